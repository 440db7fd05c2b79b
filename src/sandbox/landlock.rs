//! Landlock for the server, best effort through the `landlock` crate: read and execute only
//! beneath the paths the config names readable (the system directories, the server's runtime
//! and package, `--expose`; everywhere when it names none), full access only to the scratch
//! directories, the sandbox's own tmpfs mounts and harmless devices; signals and abstract unix
//! sockets scoped to the sandbox where the ABI has scopes. No network rules: the network
//! namespace isolates, and a denied connect would never reach the observer (pitfall 2). The
//! status is reported, never branched on.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use super::policy::SandboxConfig;

/// The newest ABI whose rights we ask for: everything up to scopes (6.12).
const TARGET_ABI: ABI = ABI::V6;

/// Applies the ruleset to the calling thread; returns (`full`/`partial`/`none`, ABI).
pub fn restrict(config: &SandboxConfig) -> Result<(String, Option<u32>), String> {
    let existing = |paths: Vec<&Path>| -> Vec<std::path::PathBuf> {
        paths
            .into_iter()
            .filter(|p| p.exists())
            .map(Path::to_path_buf)
            .collect()
    };
    let mut writable: Vec<&Path> = config
        .writable
        .iter()
        .chain(&config.overlays)
        .map(|p| p.as_path())
        .collect();
    writable.extend([
        Path::new("/tmp"),
        Path::new("/var/tmp"),
        Path::new("/dev/shm"),
    ]);
    let devices = existing(vec![
        Path::new("/dev/null"),
        Path::new("/dev/zero"),
        Path::new("/dev/full"),
        Path::new("/dev/random"),
        Path::new("/dev/urandom"),
    ]);
    let readable: Vec<std::path::PathBuf> = match &config.readable {
        Some(paths) => existing(paths.iter().map(|p| p.as_path()).collect()),
        None => vec![Path::new("/").to_path_buf()],
    };
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(TARGET_ABI))
        .map_err(|e| e.to_string())?
        .scope(Scope::from_all(TARGET_ABI))
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(
            readable,
            AccessFs::from_read(TARGET_ABI),
        ))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(
            existing(writable),
            AccessFs::from_all(TARGET_ABI),
        ))
        .map_err(|e| e.to_string())?
        .add_rules(path_beneath_rules(devices, AccessFs::from_all(TARGET_ABI)))
        .map_err(|e| e.to_string())?
        .restrict_self()
        .map_err(|e| e.to_string())?;
    let level = match status.ruleset {
        RulesetStatus::FullyEnforced => "full",
        RulesetStatus::PartiallyEnforced => "partial",
        RulesetStatus::NotEnforced => "none",
    };
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => format!("{effective_abi:?}")
            .trim_start_matches('V')
            .parse()
            .ok(),
        _ => None,
    };
    Ok((level.to_string(), abi))
}
