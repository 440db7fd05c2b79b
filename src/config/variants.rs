//! Configurations as variants: the same server run again with other settings beside the
//! default run. Many servers set their hints from their configuration (a read-only mode
//! chosen by an environment variable or a flag turns every `readOnlyHint` on); a variant runs
//! the server with that configuration and judges the hints it then declares. A variant comes
//! from `--variant NAME:K=V[,K=V…]` (environment variables) or a `[[variants]]` table of a
//! scenario or the config file, which may also append arguments to the server's command
//! (`server_args`), seed another workspace (`workspace`) and, in a scenario, hold the
//! variant's own `[variants.expect]`. Variants of the same name: the command line's win over
//! the scenario's, the scenario's over the config file's.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::ConfigError;
use crate::scenario::Expect;

/// Most variants a run makes (each is a server run of its own).
pub const MAX_VARIANTS: usize = 16;

/// One variant: a name and what it changes.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    /// What the report calls it (`read-only`): letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// Environment variables set for the server (over the run's own).
    #[serde(default, deserialize_with = "super::options::table")]
    pub env: Vec<(String, String)>,
    /// Arguments appended to the server's command.
    #[serde(default)]
    pub server_args: Vec<String>,
    /// A directory copied into the scratch workspace instead of the run's (relative to the
    /// scenario's or the config file's directory).
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// What this variant's report must say (scenarios only, with `--check`).
    #[serde(default)]
    pub expect: Option<Expect>,
}

impl VariantSpec {
    /// What it changes, one setting per entry (`READ_ONLY=1`, `server args: --read-only`,
    /// `workspace: /srv/seed`).
    pub fn settings(&self) -> Vec<String> {
        let mut out: Vec<String> = self.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if !self.server_args.is_empty() {
            out.push(format!("server args: {}", self.server_args.join(" ")));
        }
        if let Some(w) = &self.workspace {
            out.push(format!("workspace: {}", w.display()));
        }
        out
    }
}

/// `--variant NAME:K=V[,K=V…]`.
pub fn parse_flag(text: &str) -> Result<VariantSpec, String> {
    let (name, settings) = text
        .split_once(':')
        .ok_or_else(|| format!("{text:?} is not NAME:KEY=VALUE[,KEY=VALUE…]"))?;
    let mut env = Vec::new();
    for setting in settings.split(',').filter(|s| !s.is_empty()) {
        let (k, v) = setting
            .split_once('=')
            .ok_or_else(|| format!("{setting:?} (in {text:?}) is not KEY=VALUE"))?;
        env.push((k.to_string(), v.to_string()));
    }
    let spec = VariantSpec {
        name: name.to_string(),
        env,
        server_args: Vec::new(),
        workspace: None,
        expect: None,
    };
    check(&spec).map_err(|e| format!("{text:?}: {e}"))?;
    Ok(spec)
}

/// What is wrong with a variant, if anything.
fn check(v: &VariantSpec) -> Result<(), String> {
    if v.name.is_empty()
        || v.name.len() > 64
        || !v
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "the name {:?} is not 1 to 64 letters, digits, '-', '_' or '.'",
            v.name
        ));
    }
    if v.name == "default" {
        return Err("\"default\" names the run without a variant".into());
    }
    if let Some((k, _)) = v
        .env
        .iter()
        .find(|(k, _)| k.is_empty() || k.contains('=') || k.contains('\0'))
    {
        return Err(format!("{k:?} is not an environment variable's name"));
    }
    if v.env.is_empty() && v.server_args.is_empty() && v.workspace.is_none() {
        return Err("it changes nothing (no KEY=VALUE, server_args or workspace)".into());
    }
    Ok(())
}

/// The variants of a run: the command line's, then the scenario's and the config file's
/// not named on the command line (a name given twice in one place is an error), their
/// workspaces made absolute against `scenario_dir` and `file_dir`; expectations only where a
/// scenario holds them.
pub fn merge(
    flags: &[VariantSpec],
    scenario: (&[VariantSpec], Option<&Path>),
    file: (&[VariantSpec], Option<&Path>),
) -> Result<Vec<VariantSpec>, ConfigError> {
    let bad = |place: &str, message: String| ConfigError::BadValue {
        flag: place.to_string(),
        message,
    };
    let mut out: Vec<VariantSpec> = Vec::new();
    for (place, list, dir) in [
        ("--variant", flags, None),
        ("[[variants]] of the scenario", scenario.0, scenario.1),
        ("[[variants]] of the config file", file.0, file.1),
    ] {
        let mut here: Vec<&str> = Vec::new();
        for v in list {
            check(v).map_err(|e| bad(place, format!("the variant {:?}: {e}", v.name)))?;
            if here.contains(&v.name.as_str()) {
                return Err(bad(
                    place,
                    format!("the variant {:?} is given twice", v.name),
                ));
            }
            here.push(&v.name);
            if place.ends_with("config file") && v.expect.is_some() {
                return Err(bad(
                    place,
                    format!(
                        "the variant {:?} has expectations, which only a scenario can hold",
                        v.name
                    ),
                ));
            }
            if out.iter().any(|o| o.name == v.name) {
                continue;
            }
            let mut v = v.clone();
            if let (Some(w), Some(dir)) = (&v.workspace, dir) {
                v.workspace = Some(dir.join(w));
            }
            if let Some(w) = &v.workspace {
                if !w.is_dir() {
                    return Err(bad(
                        place,
                        format!(
                            "the variant {:?}'s workspace {} is not a directory",
                            v.name,
                            w.display()
                        ),
                    ));
                }
            }
            out.push(v);
        }
    }
    if out.len() > MAX_VARIANTS {
        return Err(bad(
            "--variant",
            format!(
                "{} variants, more than the {MAX_VARIANTS} a run makes (each is a run of the server of its own)",
                out.len()
            ),
        ));
    }
    Ok(out)
}

impl super::RunConfig {
    /// The configuration of variant `v`: the same run (the same seed, so the same words and
    /// arguments) with its environment set over the run's, its arguments appended to the
    /// command and its workspace seeded, with a run timeout of its own and no variants.
    pub fn for_variant(&self, v: &VariantSpec) -> super::RunConfig {
        let mut c = self.clone();
        for (k, value) in &v.env {
            c.server.env.retain(|(key, _)| key != k);
            c.server.env.push((k.clone(), value.clone()));
        }
        c.server.command.extend(v.server_args.iter().cloned());
        if let Some(w) = &v.workspace {
            c.server.workspace_seed = Some(w.clone());
        }
        c.variants = Vec::new();
        c.variant_of = Some(v.name.clone());
        c.begun = std::time::Instant::now();
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, env: &[(&str, &str)]) -> VariantSpec {
        VariantSpec {
            name: name.into(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            server_args: Vec::new(),
            workspace: None,
            expect: None,
        }
    }

    #[test]
    fn the_flag_names_a_variant_and_its_environment() {
        let v = parse_flag("read-only:READ_ONLY=1,MODE=safe").expect("variant");
        assert_eq!(
            v,
            spec("read-only", &[("READ_ONLY", "1"), ("MODE", "safe")])
        );
        assert_eq!(v.settings(), ["READ_ONLY=1", "MODE=safe"]);
        for bad in [
            "read-only",
            "ro:READ_ONLY",
            "default:A=1",
            "a b:A=1",
            "ro:",
            "ro:=1",
        ] {
            assert!(parse_flag(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_command_line_wins_by_name_and_twice_in_one_place_is_an_error() {
        let flags = [spec("ro", &[("A", "1")])];
        let scenario = [spec("ro", &[("A", "2")]), spec("fast", &[("B", "1")])];
        let merged = merge(&flags, (&scenario, None), (&[], None)).expect("merged");
        assert_eq!(
            merged,
            [spec("ro", &[("A", "1")]), spec("fast", &[("B", "1")])]
        );
        let twice = [spec("ro", &[("A", "1")]), spec("ro", &[("A", "2")])];
        let e = merge(&[], (&twice, None), (&[], None)).expect_err("twice");
        assert!(e.to_string().contains("given twice"), "{e}");
    }
}
