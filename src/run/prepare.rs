//! Preparing a run: the scratch directories and their seed, the command with its
//! placeholders filled, and where and as whom the server runs (placement, uid, environment).
//! A failure here ends the run with a report that says which step failed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;

use super::collect::{Ending, RunEvent, RunLog};
use super::server::{Placement, RunContext, server_env};
use crate::config::RunConfig;
use crate::observe::secrets::SecretWatch;
use crate::observe::tls::Authority;
use crate::sandbox::process::{LaunchSpec, resolve_program};
use crate::sandbox::scratch::Scratch;
use crate::sandbox::watchdog::LimitFlag;
use crate::text::error_chain;
use crate::workspace::canary::Canaries;

/// A prepared run: its scratch directories (seeded) and how its server is launched.
pub(super) struct Prepared<'a> {
    pub(super) scratch: Scratch,
    pub(super) ctx: RunContext<'a>,
}

/// Tells the collector why the run could not start, and ends it.
fn not_started(log: &mut RunLog, cause: String, reason: &str) -> Ending {
    log.emit(RunEvent::StartError(cause));
    Ending::NotStarted {
        reason: reason.to_string(),
    }
}

/// Prepares a run of `config`; `Err` ends a run that could not start (the collector was told
/// why).
pub(super) fn prepare<'a>(
    config: &'a RunConfig,
    log: &mut RunLog,
    stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Result<Prepared<'a>, Ending> {
    let started = log.started();
    // The command as a whole: what reading the configuration and the installs took counts.
    let deadline = config.begun + config.waits.run_timeout;
    // As root, the server runs as a uid of its own: the scratch directories become its own
    // once seeded.
    let owner_changes = config.sandbox.level.is_some() && rustix::process::getuid().is_root();
    let mut scratch = match seeded_scratch(config, owner_changes) {
        Ok(s) => s,
        Err((cause, reason)) => return Err(not_started(log, cause, reason)),
    };
    let mut seed_notes = std::mem::take(&mut scratch.seed_notes);
    let secrets = match planted_canaries(config, &scratch, &mut seed_notes) {
        Ok(s) => s,
        Err(e) => {
            return Err(not_started(
                log,
                error_chain(&e),
                "harness error: could not plant the canaries",
            ));
        }
    };
    if let Some(watch) = &secrets {
        log.emit(RunEvent::Canaries(
            watch
                .canaries()
                .items
                .iter()
                .map(|c| crate::report::PlantedCanary {
                    kind: c.kind.to_string(),
                    place: c.place.clone(),
                })
                .collect(),
        ));
    }
    let http_port = match config.server.transport {
        crate::config::Transport::Stdio => None,
        crate::config::Transport::Http { port: Some(p), .. } => Some(p),
        crate::config::Transport::Http { .. } => free_port(),
    };
    let command: Vec<String> = config
        .server
        .command
        .iter()
        .map(|a| absolutize(&substitute(a, &scratch, http_port)))
        .collect();
    log.emit(RunEvent::Command(command.clone()));
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run_id = format!(
        "{}-{}-{}",
        std::process::id(),
        log.started_unix_ms(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let run_as = owner_changes.then(|| {
        config
            .sandbox
            .run_as
            .unwrap_or_else(crate::sandbox::policy::allocate_run_uid)
    });
    if config.sandbox.level.is_some() {
        let prepared = scratch
            .prepare_sandbox(run_as, config.sandbox.overlays.len())
            .and_then(|()| scratch.refresh_git_index(run_as));
        if let Err(e) = prepared {
            return Err(not_started(
                log,
                format!("cannot prepare the scratch directories for the sandbox: {e}"),
                "harness error: could not prepare the sandbox",
            ));
        }
    }
    let placement = if config.sandbox.level.is_some() {
        Placement::new(
            config,
            &command,
            run_as,
            scratch.root().unwrap_or(Path::new("/")),
        )
    } else {
        Placement::default()
    };
    // Before launch: can the server's account reach its program, interpreter and script?
    let scratch_root = scratch.root().unwrap_or(Path::new("/"));
    if let Err(cause) = preflight(config, &command, run_as, &placement, scratch_root) {
        let reason = format!("harness error: the server cannot be started: {cause}");
        return Err(not_started(log, cause, &reason));
    }
    // HTTPS completes inside the sandbox only: a certificate authority of this run, trusted
    // through the bundle the sandbox shows at the system's paths and the usual variables.
    let tls = if config.sandbox.level.is_some() {
        trust_run_authority(&scratch, &mut seed_notes)
    } else {
        None
    };
    let env_extra = run_variables(
        config,
        &scratch,
        tls.as_ref(),
        http_port,
        secrets.as_deref(),
    );
    log.emit(RunEvent::Notes(seed_notes));
    let ctx = RunContext {
        tls,
        limit_hit: LimitFlag::default(),
        placement,
        home: scratch.home.clone(),
        scratch_root: scratch.root().map(|p| p.to_path_buf()).unwrap_or_default(),
        writable: vec![
            scratch.workspace.clone(),
            scratch.home.clone(),
            scratch.tmp.clone(),
        ],
        run_as,
        config,
        spec: LaunchSpec {
            program: command[0].clone(),
            args: command[1..].to_vec(),
            env: server_env(&scratch, &env_extra),
            cwd: scratch.workspace.clone(),
            run_id,
        },
        started,
        workspace: scratch.workspace.display().to_string(),
        stop,
        subreaper,
        deadline,
        http_port,
        secrets,
    };
    Ok(Prepared { scratch, ctx })
}

/// The scratch directories, seeded (the scenario's workspace, or the run's own words, and
/// the SQLite seed); `owner_changes`: they become the server's uid's next, and the seeded
/// repository's index is refreshed after that. `Err`: the cause and the reason the run could
/// not start.
fn seeded_scratch(
    config: &RunConfig,
    owner_changes: bool,
) -> Result<Scratch, (String, &'static str)> {
    let mut scratch = Scratch::create().map_err(|e| {
        (
            error_chain(&e),
            "harness error: could not create the scratch directories",
        )
    })?;
    match &config.server.workspace_seed {
        Some(seed) => scratch.seed_from(seed),
        None => {
            let words = crate::workspace::vocab::Vocabulary::of(config.seed);
            scratch.seed_default_before_owner_change(&words, owner_changes)
        }
    }
    .and_then(|()| match &config.server.sqlite_seed {
        Some(rel) => scratch.seed_sqlite(rel),
        None => Ok(()),
    })
    .map_err(|e| {
        (
            error_chain(&e),
            "harness error: could not seed the workspace",
        )
    })?;
    Ok(scratch)
}

/// The run's canaries, planted in the seeded home and workspace (none with
/// `--no-canaries`; a place the seed already fills is left alone, with a note in `notes`);
/// the variables the user sets themselves are theirs, not canaries.
fn planted_canaries(
    config: &RunConfig,
    scratch: &Scratch,
    notes: &mut Vec<String>,
) -> Result<Option<Arc<SecretWatch>>, crate::workspace::canary::CanaryError> {
    if !config.server.canaries {
        return Ok(None);
    }
    let mut canaries = Canaries::of(config.seed);
    canaries.leaving_out_variables(|name| config.server.env.iter().any(|(k, _)| k == name));
    let planted = canaries.plant(&scratch.home, &scratch.workspace)?;
    notes.extend(planted.notes);
    Ok(Some(Arc::new(SecretWatch::new(canaries))))
}

/// Whether the server's account can reach its program, interpreter and script as the
/// sandbox will show them (the private places and the temporary places covered, what the
/// placement shows in them and the scratch root visible); `Err` says what it cannot reach.
fn preflight(
    config: &RunConfig,
    command: &[String],
    run_as: Option<(u32, u32)>,
    placement: &Placement,
    scratch_root: &Path,
) -> Result<(), String> {
    let path_var = std::env::var("PATH").ok();
    let Ok(program) = resolve_program(&command[0], path_var.as_deref()) else {
        return Ok(());
    };
    let mut hidden = placement.hidden.clone();
    let mut exposed = placement.exposed.clone();
    if config.sandbox.level.is_some() {
        hidden.extend(crate::sandbox::policy::TEMPORARY_PLACES.map(PathBuf::from));
        exposed.extend(placement.shown_temporary.iter().cloned());
        exposed.extend(config.sandbox.overlays.iter().cloned());
        exposed.push(scratch_root.to_path_buf());
    }
    let account = match (config.sandbox.level, run_as) {
        (Some(_), Some((uid, gid))) => crate::sandbox::preflight::Account::Ids(uid, gid),
        _ => crate::sandbox::preflight::Account::Current,
    };
    crate::sandbox::preflight::check(
        &program,
        command,
        account,
        path_var.as_deref(),
        crate::sandbox::preflight::View {
            hidden: &hidden,
            exposed: &exposed,
        },
    )
    .map_err(|e| e.to_string())
}

/// The variables the run adds to the server's environment: the bundles that trust the run's
/// certificate authority (when HTTPS is answered), the canaries' variables, then the user's
/// own, which win.
fn run_variables(
    config: &RunConfig,
    scratch: &Scratch,
    tls: Option<&(Arc<Authority>, PathBuf)>,
    http_port: Option<u16>,
    secrets: Option<&SecretWatch>,
) -> Vec<(String, String)> {
    let mut env_extra: Vec<(String, String)> = Vec::new();
    if let Some(watch) = secrets {
        env_extra.extend(watch.canaries().env.iter().cloned());
    }
    if let Some((authority, bundle)) = tls {
        let bundle = bundle.display().to_string();
        env_extra.extend(
            crate::observe::tls::BUNDLE_VARIABLES
                .iter()
                .map(|k| (k.to_string(), bundle.clone())),
        );
        let ca = scratch
            .root()
            .map(|r| r.join(crate::sandbox::scratch::STATE_DIR).join("ca.pem"));
        if let Some(ca) = ca.filter(|p| std::fs::write(p, authority.ca_pem()).is_ok()) {
            env_extra.push((
                crate::observe::tls::NODE_VARIABLE.to_string(),
                ca.display().to_string(),
            ));
        }
    }
    // The user's own settings win over the run's.
    env_extra.extend(
        config
            .server
            .env
            .iter()
            .map(|(k, v)| (k.clone(), substitute(v, scratch, http_port))),
    );
    env_extra
}

/// Makes the run's certificate authority and writes the bundle that trusts it (the system's
/// bundle plus its certificate) into the scratch root's state directory, which the sandbox
/// shows read-only; `None` (with a note) when either fails: HTTPS then stays unanswered.
fn trust_run_authority(
    scratch: &Scratch,
    notes: &mut Vec<String>,
) -> Option<(Arc<Authority>, PathBuf)> {
    let authority = match Authority::new() {
        Ok(a) => a,
        Err(e) => {
            notes.push(format!("HTTPS is not answered in this run: {e}"));
            return None;
        }
    };
    let bundle = scratch
        .root()?
        .join(crate::sandbox::scratch::STATE_DIR)
        .join("ca-bundle.pem");
    if let Err(e) = std::fs::write(&bundle, authority.bundle_pem()) {
        notes.push(format!(
            "HTTPS is not answered in this run: cannot write {}: {e}",
            bundle.display()
        ));
        return None;
    }
    Some((authority, bundle))
}

/// The server runs in the scratch workspace, so a relative path the user typed (relative to
/// where hintcheck runs) is made absolute when it names something that exists.
fn absolutize(arg: &str) -> String {
    if arg.starts_with('-') || arg.starts_with('/') || !arg.contains('/') {
        return arg.to_string();
    }
    let p = Path::new(arg);
    match (p.exists(), std::path::absolute(p)) {
        (true, Ok(abs)) => abs.display().to_string(),
        _ => arg.to_string(),
    }
}

/// `arg` with the placeholders `{workspace}`, `{home}`, `{tmp}` and `{port}` filled.
fn substitute(arg: &str, scratch: &Scratch, port: Option<u16>) -> String {
    let arg = arg
        .replace("{workspace}", &scratch.workspace.display().to_string())
        .replace("{home}", &scratch.home.display().to_string())
        .replace("{tmp}", &scratch.tmp.display().to_string());
    match port {
        Some(p) => arg.replace("{port}", &p.to_string()),
        None => arg,
    }
}

/// A port for a server that speaks HTTP: one free on the host's loopback now (in the
/// sandbox's fresh network namespace every port is free but the observer's few, which a
/// port the host hands out is not).
fn free_port() -> Option<u16> {
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .ok()
}
