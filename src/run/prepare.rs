//! Preparing a run: the scratch directories and their seed, the command with its
//! placeholders filled, and where and as whom the server runs (placement, uid, environment).
//! A failure here ends the run with a report that says which step failed.

use super::*;

/// The scratch directories, the seed's notes, the command, and the launch context.
type Prepared<'a> = (Scratch, Vec<String>, Vec<String>, Ctx<'a>);

/// Prepares a run of `config`; `Err` is the finished report of a run that could not start.
pub(super) fn prepare<'a>(
    config: &'a RunConfig,
    base: &ReportBase,
    started: Instant,
    started_unix_ms: u64,
) -> Result<Prepared<'a>, Box<Verification>> {
    let mut scratch = match Scratch::create() {
        Ok(s) => s,
        Err(e) => {
            let mut r = base.report(config.command.clone(), Some(error_chain(&e)));
            r.exit_reason = "harness error: could not create the scratch directories".into();
            return Err(Box::new(Verification {
                report: r,
                transcript: Vec::new(),
            }));
        }
    };
    let seeding = match &config.workspace_seed {
        Some(seed) => scratch.seed_from(seed),
        None => scratch.seed_default(),
    }
    .and_then(|()| match &config.sqlite_seed {
        Some(rel) => scratch.seed_sqlite(rel),
        None => Ok(()),
    });
    let seed_notes = std::mem::take(&mut scratch.seed_notes);
    if let Err(e) = seeding {
        let mut r = base.report(config.command.clone(), Some(error_chain(&e)));
        r.exit_reason = "harness error: could not seed the workspace".into();
        return Err(Box::new(Verification {
            report: r,
            transcript: Vec::new(),
        }));
    }
    let command: Vec<String> = config
        .command
        .iter()
        .map(|a| absolutize(&substitute(a, &scratch)))
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
            let mut r = base.report(
                config.command.clone(),
                Some(format!(
                    "cannot prepare the scratch directories for the sandbox: {e}"
                )),
            );
            r.exit_reason = "harness error: could not prepare the sandbox".into();
            return Err(Box::new(Verification {
                report: r,
                transcript: Vec::new(),
            }));
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
    let ctx = Ctx {
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
            env: server_env(
                &scratch,
                &config
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), substitute(v, &scratch)))
                    .collect::<Vec<_>>(),
            ),
            cwd: scratch.workspace.clone(),
            run_id,
        },
        started,
        workspace: scratch.workspace.display().to_string(),
    };
    Ok((scratch, seed_notes, command, ctx))
}
