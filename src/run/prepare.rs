//! Preparing a run: the scratch directories and their seed, the command with its
//! placeholders filled, and where and as whom the server runs (placement, uid, environment).
//! A failure here ends the run with a report that says which step failed.

use super::*;

/// The scratch directories, the seed's notes, the command, and the launch context.
type Prepared<'a> = (Scratch, Vec<String>, Vec<String>, Ctx<'a>);

/// The finished report of a run that ended before its server started: the sandbox claims
/// nothing and no seed is reported.
pub(super) fn not_started(
    base: &ReportBase,
    config: &RunConfig,
    cause: String,
    reason: &str,
) -> Box<Verification> {
    let mut r = base.report(config.command.clone(), Some(cause));
    r.sandbox = SandboxStatus::not_started(requested_sandbox(config));
    r.exit_reason = reason.to_string();
    Box::new(Verification {
        report: r,
        transcript: Vec::new(),
    })
}

/// Prepares a run of `config`; `Err` is the finished report of a run that could not start.
pub(super) fn prepare<'a>(
    config: &'a RunConfig,
    base: &ReportBase,
    started: Instant,
    started_unix_ms: u64,
    stop: watch::Receiver<bool>,
    deadline: Instant,
) -> Result<Prepared<'a>, Box<Verification>> {
    let mut scratch = match Scratch::create() {
        Ok(s) => s,
        Err(e) => {
            return Err(not_started(
                base,
                config,
                error_chain(&e),
                "harness error: could not create the scratch directories",
            ));
        }
    };
    let seeding = match &config.workspace_seed {
        Some(seed) => scratch.seed_from(seed),
        None => {
            let words = crate::exercise::vocab::Vocabulary::of(config.seed);
            scratch.seed_default(&words.seed_files(), &words.draft())
        }
    }
    .and_then(|()| match &config.sqlite_seed {
        Some(rel) => scratch.seed_sqlite(rel),
        None => Ok(()),
    });
    let mut seed_notes = std::mem::take(&mut scratch.seed_notes);
    if let Err(e) = seeding {
        return Err(not_started(
            base,
            config,
            error_chain(&e),
            "harness error: could not seed the workspace",
        ));
    }
    let http_port = match config.transport {
        crate::config::Transport::Stdio => None,
        crate::config::Transport::Http { port: Some(p), .. } => Some(p),
        crate::config::Transport::Http { .. } => free_port(),
    };
    let command: Vec<String> = config
        .command
        .iter()
        .map(|a| absolutize(&substitute(a, &scratch, http_port)))
        .collect();
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run_id = format!(
        "{}-{}-{}",
        std::process::id(),
        started_unix_ms,
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    // As root, the server runs as a uid of its own: the scratch directories become its own.
    let run_as = (config.sandbox.is_some() && rustix::process::getuid().is_root()).then(|| {
        config
            .run_as
            .unwrap_or_else(crate::sandbox::policy::allocate_run_uid)
    });
    if config.sandbox.is_some() {
        if let Err(e) = scratch.prepare_sandbox(run_as, config.overlays.len()) {
            return Err(not_started(
                base,
                config,
                format!("cannot prepare the scratch directories for the sandbox: {e}"),
                "harness error: could not prepare the sandbox",
            ));
        }
    }
    let placement = if config.sandbox.is_some() {
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
    let path_var = std::env::var("PATH").ok();
    if let Ok(program) = resolve_program(&command[0], path_var.as_deref()) {
        let account = match (config.sandbox, run_as) {
            (Some(_), Some((uid, gid))) => crate::sandbox::preflight::Account::Ids(uid, gid),
            _ => crate::sandbox::preflight::Account::Current,
        };
        if let Err(e) = crate::sandbox::preflight::check(
            &program,
            &command,
            account,
            path_var.as_deref(),
            crate::sandbox::preflight::View {
                hidden: &placement.hidden,
                exposed: &placement.exposed,
            },
        ) {
            let cause = e.to_string();
            let reason = format!("harness error: the server cannot be started: {cause}");
            return Err(not_started(base, config, cause, &reason));
        }
    }
    // HTTPS completes inside the sandbox only: a certificate authority of this run, trusted
    // through the bundle the sandbox shows at the system's paths and the usual variables.
    let tls = if config.sandbox.is_some() {
        trust_run_authority(&scratch, &mut seed_notes)
    } else {
        None
    };
    let mut env_extra: Vec<(String, String)> = Vec::new();
    if let Some((authority, bundle)) = &tls {
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
            .env
            .iter()
            .map(|(k, v)| (k.clone(), substitute(v, &scratch, http_port))),
    );
    let ctx = Ctx {
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
        deadline,
        http_port,
    };
    Ok((scratch, seed_notes, command, ctx))
}

/// Makes the run's certificate authority and writes the bundle that trusts it (the system's
/// bundle plus its certificate) into the scratch root's state directory, which the sandbox
/// shows read-only; `None` (with a note) when either fails: HTTPS then stays unanswered.
fn trust_run_authority(
    scratch: &Scratch,
    notes: &mut Vec<String>,
) -> Option<(std::sync::Arc<crate::observe::tls::Authority>, PathBuf)> {
    let authority = match crate::observe::tls::Authority::new() {
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
