//! The orchestrator: drives launch → handshake → inventory → exercise → observe → judge and
//! builds the [`Report`]. It owns the timeouts, the restarts after a crash or a hung call, and
//! the interruption path. A misbehaving server never makes this fail: whatever happens ends up
//! in the report, with the exit code it deserves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::audit;
use crate::config::{RootsOffer, RunConfig};
use crate::evidence::{CallRecord, CallTiming, Coverage, Phase, PhaseObservation, ToolRun};
use crate::exercise::explore::{Explored, Explorer};
use crate::finding::{Finding, Severity};
use crate::mcp::client::{CallOutcome, ClientOptions, EraChoice, McpClient, ProtocolNote};
use crate::mcp::tool::{HintName, shorten};
use crate::observe::activity::{ProcessTree, ran_between, settle};
use crate::observe::attempts::AttemptObserver;
use crate::observe::fs::{
    FsSnapshotObserver, OverlayRoot, SandboxDir, SnapshotLimits, SnapshotRoot,
};
use crate::observe::inotify::InotifyObserver;
use crate::observe::{Observation, Recorder, ServerStart};
use crate::progress::{ProgressEvent, ProgressHook};
use crate::report::{
    CoverageSummary, Report, ServerSummary, Settings, ToolReport, WireSummary, exit_code,
};
use crate::rpc::session::{Session, SessionOptions};
use crate::rpc::transcript::Entry;
use crate::sandbox::cgroup::RunCgroup;
use crate::sandbox::control::StepFailure;
use crate::sandbox::policy::{Limits, named_tmp_entries};
use crate::sandbox::process::{ExitSummary, LaunchSpec, ServerProcess, resolve_program};
use crate::sandbox::scratch::Scratch;
use crate::sandbox::watchdog::{LimitFlag, WatchLimits, Watchdog};
use crate::sandbox::{Enforcement, LaunchError, SandboxConfig, SandboxLevel, SandboxStatus};
/// The error and its causes on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

mod host;
mod replay;
mod server;

use host::ServerHost;
use replay::*;
use server::*;

/// The server runs in the scratch workspace, so a relative path the user typed (relative to
/// where hintcheck runs) is made absolute when it names something that exists.
fn absolutize(arg: &str) -> String {
    if arg.starts_with('-') || arg.starts_with('/') || !arg.contains('/') {
        return arg.to_string();
    }
    let p = std::path::Path::new(arg);
    match (p.exists(), std::path::absolute(p)) {
        (true, Ok(abs)) => abs.display().to_string(),
        _ => arg.to_string(),
    }
}

fn substitute(arg: &str, scratch: &Scratch) -> String {
    arg.replace("{workspace}", &scratch.workspace.display().to_string())
        .replace("{home}", &scratch.home.display().to_string())
        .replace("{tmp}", &scratch.tmp.display().to_string())
}

/// The result of a run: the report, and the transcript when one was asked for.
pub struct Verification {
    /// The report.
    pub report: Report,
    /// Every line exchanged, when `RunConfig::transcript` is set (in server-instance order).
    pub transcript: Vec<Entry>,
}

/// Runs one verification. `stop` ends the run early (the report is then partial).
pub async fn verify(
    config: &RunConfig,
    stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Verification {
    let mut v = verify_unchecked(config, stop, subreaper).await;
    // Runs that ended early (no handshake, no sandbox) have findings too.
    crate::baseline::fingerprint_findings(&mut v.report);
    if config.check_expectations {
        check_expectations(&mut v.report, config);
    }
    v
}

/// [`verify`] without the `--check` of the scenario's expectations.
async fn verify_unchecked(
    config: &RunConfig,
    stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Verification {
    let started = Instant::now();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let deadline = started + config.run_timeout;
    config
        .progress
        .emit(ProgressEvent::Stage("starting the server"));
    let mut notes: Vec<String> = Vec::new();
    let mut collected = Collected::default();
    let keep_transcript = config.transcript.is_some();
    let settings = Settings {
        repeat: config.repeat,
        seed: config.seed,
        settle_ms: config.settle.as_millis() as u64,
        call_timeout_ms: config.call_timeout.as_millis() as u64,
        era: match config.era {
            EraChoice::Auto => "auto",
            EraChoice::Modern => "modern",
            EraChoice::Legacy => "legacy",
        }
        .into(),
        roots: match config.roots {
            RootsOffer::None => "none",
            RootsOffer::Workspace => "workspace",
        }
        .into(),
        fail_on: config.fail_on,
    };
    let sandbox = SandboxStatus::scratch_only(subreaper);
    let base_report = |command: Vec<String>, start_error: Option<String>| Report {
        hintcheck_version: env!("CARGO_PKG_VERSION").into(),
        started_unix_ms,
        duration_ms: started.elapsed().as_millis() as u64,
        server: ServerSummary {
            command,
            identity: None,
            start_error,
            exits: Vec::new(),
            restarts: 0,
            stderr: String::new(),
            stderr_bytes: 0,
            tools_sha256: None,
            startup_us: None,
        },
        sandbox: sandbox.clone(),
        coverage: CoverageSummary::default(),
        tools: Vec::new(),
        phases: Vec::new(),
        findings: Vec::new(),
        wire: WireSummary::default(),
        settings: settings.clone(),
        seeded: Vec::new(),
        notes: Vec::new(),
        exit_code: exit_code::HARNESS,
        exit_reason: String::new(),
        partial: None,
        baseline: None,
        expectations: None,
    };

    let mut scratch = match Scratch::create() {
        Ok(s) => s,
        Err(e) => {
            let mut r = base_report(config.command.clone(), Some(error_chain(&e)));
            r.exit_reason = "harness error: could not create the scratch directories".into();
            return Verification {
                report: r,
                transcript: Vec::new(),
            };
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
        let mut r = base_report(config.command.clone(), Some(error_chain(&e)));
        r.exit_reason = "harness error: could not seed the workspace".into();
        return Verification {
            report: r,
            transcript: Vec::new(),
        };
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
            let mut r = base_report(
                config.command.clone(),
                Some(format!(
                    "cannot prepare the scratch directories for the sandbox: {e}"
                )),
            );
            r.exit_reason = "harness error: could not prepare the sandbox".into();
            return Verification {
                report: r,
                transcript: Vec::new(),
            };
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
    let scratch_roots = vec![
        SnapshotRoot::new("$WORKSPACE", scratch.workspace.clone()),
        SnapshotRoot::new("$HOME", scratch.home.clone()),
        SnapshotRoot::new("$TMPDIR", scratch.tmp.clone()),
    ];
    // Change notifications from now on: what the harness did to the scratch directories is
    // over (seed, sandbox preparation).
    let mut inotify_observer = InotifyObserver::new(&scratch_roots);
    let notified = inotify_observer.is_active();
    let mut fs_observer = FsSnapshotObserver::new(scratch_roots, SnapshotLimits::default());
    let mut read_only_tmp: Vec<PathBuf> = Vec::new();
    if config.sandbox.is_some() {
        // In the sandbox's /tmp, the scratch root is watched through the scratch roots, the
        // overlays through their own roots, and the read-only /tmp entries named on the
        // command line cannot change: walk none of them twice.
        let top_name = |p: &std::path::Path| -> Option<String> {
            p.strip_prefix("/tmp")
                .ok()
                .and_then(|rel| rel.components().next())
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
        };
        let words: Vec<&str> = command
            .iter()
            .map(String::as_str)
            .chain(config.env.iter().map(|(_, v)| v.as_str()))
            .collect();
        let scratch_root = scratch.root().map(|p| p.to_path_buf()).unwrap_or_default();
        read_only_tmp = named_tmp_entries(words, &scratch_root);
        let mut skip_in_tmp: Vec<String> = read_only_tmp
            .iter()
            .chain(config.overlays.iter())
            .chain(std::iter::once(&scratch_root))
            .filter_map(|p| top_name(p))
            .collect();
        skip_in_tmp.sort();
        skip_in_tmp.dedup();
        let scratch_name = skip_in_tmp;
        let sandbox_dirs = vec![
            SandboxDir::new("/tmp", scratch_name),
            SandboxDir::new("/var/tmp", Vec::new()),
            SandboxDir::new("/dev/shm", Vec::new()),
        ];
        inotify_observer.watch_sandbox_dirs(sandbox_dirs.clone());
        fs_observer.watch_sandbox_dirs(sandbox_dirs);
        // Overlays through their layers: only what the upper layer holds is walked (and
        // watched for writes that do not last).
        let overlays: Vec<OverlayRoot> = config
            .overlays
            .iter()
            .enumerate()
            .map(|(i, d)| OverlayRoot {
                label: d.display().to_string(),
                lower: d.clone(),
                upper: crate::sandbox::scratch::overlay_dir(&scratch_root, i).join("upper"),
            })
            .collect();
        inotify_observer.watch_overlay_uppers(&overlays);
        fs_observer.watch_overlays(overlays);
    }
    let mut observers: Vec<Box<dyn crate::observe::Observer>> =
        vec![Box::new(fs_observer), Box::new(inotify_observer)];
    if config.sandbox.is_some() {
        let mut writable: Vec<PathBuf> = vec![
            scratch.workspace.clone(),
            scratch.home.clone(),
            scratch.tmp.clone(),
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev/shm"),
        ];
        writable.extend(config.overlays.iter().cloned());
        writable.extend(ctx.placement.identity.home.clone());
        let resolver = SANDBOX_RESOLVER
            .parse()
            .unwrap_or(std::net::IpAddr::from([192, 0, 2, 53]));
        // The scratch root itself is read-only inside (only its three directories are not).
        let mut read_only = read_only_tmp.clone();
        read_only.extend(scratch.root().map(|p| p.to_path_buf()));
        observers.push(Box::new(AttemptObserver::new(
            writable, read_only, resolver,
        )));
        observers.push(Box::new(crate::observe::net::NetObserver::new(
            config.observe_ports.clone(),
        )));
    }
    let mut recorder = Recorder::new(observers);
    let coverage = Coverage {
        files: Some(format!(
            "{}{}",
            if config.sandbox.is_some() {
                "$WORKSPACE, $HOME, $TMPDIR and the sandbox's /tmp, /var/tmp, /dev/shm (effects); write attempts anywhere (seccomp)"
            } else {
                "$WORKSPACE, $HOME, $TMPDIR only (effects), the weaker mode without a sandbox: writes elsewhere and write attempts are unseen"
            },
            match (notified, config.sandbox.is_some()) {
                (true, true) => "; writes that did not last under $WORKSPACE, $HOME, $TMPDIR and the sandbox's /tmp, /var/tmp, /dev/shm (inotify)",
                (true, false) => "; writes that did not last under $WORKSPACE, $HOME, $TMPDIR (inotify)",
                (false, _) => "",
            }
        )),
        network: config.sandbox.is_some().then(|| {
            format!("DNS questions with their names, connect, sendto and sendmmsg attempts (seccomp), every outgoing TCP SYN and every packet of another IP protocol on lo (UDP on any port and with any payload, UDP-Lite, SCTP, ICMP) whatever sent it (a packet socket, where the sandbox says it made one), TLS SNI and HTTP request lines on ports {}", config.observe_ports.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "))
        }),
    };
    // Launch and handshake.
    let mut sandbox_level = config.sandbox;
    let mut sandbox_status = SandboxStatus::scratch_only(subreaper);
    let launched = Instant::now();
    let mut first = start_server(&ctx, sandbox_level, &mut recorder).await;
    let startup_us = launched.elapsed().as_micros() as u64;
    if let Err(f) = &first {
        if let (Some(step), Some(SandboxLevel::BestEffort)) = (&f.sandbox, sandbox_level) {
            // Best effort and no namespaces at all: run without the sandbox, and say so loudly.
            sandbox_status.requested = "best-effort".into();
            sandbox_status.not_enforced.insert(
                0,
                format!(
                    "the sandbox could not be set up (step {}: {}); the server ran without it",
                    step.step, step.message
                ),
            );
            sandbox_level = None;
            first = start_server(&ctx, None, &mut recorder).await;
        }
    }
    let mut live = match first {
        Ok((l, enforcement)) => {
            if let (Some(e), Some(level)) = (enforcement, sandbox_level) {
                sandbox_status = SandboxStatus::from_enforcement(&e, level);
            }
            Some(l)
        }
        Err(f) => {
            if let (Some(e), Some(level)) = (&f.enforcement, sandbox_level) {
                sandbox_status = SandboxStatus::from_enforcement(e, level);
            }
            if let Some((s, n)) = f.session {
                collected.absorb(&s, n, keep_transcript);
            }
            collected.exits.extend(f.exit);
            let mut r = base_report(command.clone(), Some(f.message.clone()));
            r.sandbox = sandbox_status;
            r.findings = protocol_findings(&collected);
            let transcript = finish_collected(&mut r, collected);
            r.seeded = scratch.seeded.clone();
            r.phases = phase_observations(recorder.checkpoint(), Phase::Startup, None);
            match &f.sandbox {
                Some(step) => {
                    r.exit_code = exit_code::SANDBOX_UNAVAILABLE;
                    r.exit_reason = format!(
                        "the required sandbox is unavailable: step {} failed",
                        step.step
                    );
                    r.sandbox.requested = "required".into();
                    r.sandbox.not_enforced.insert(0, f.message.clone());
                    if let Some(fix) = crate::sandbox::remedy(step) {
                        r.notes.push(fix);
                    }
                }
                None => {
                    r.exit_reason =
                        "harness error: the server could not be started or greeted".into()
                }
            }
            r.notes.extend(recorder.take_notes());
            if let Err(e) = scratch.remove() {
                r.notes.push(e);
            }
            r.duration_ms = started.elapsed().as_millis() as u64;
            return Verification {
                report: r,
                transcript,
            };
        }
    };
    let identity = live.as_ref().map(|l| l.client.identity().clone());

    // Inventory.
    let inventory = match live.as_mut() {
        Some(l) => l.client.list_tools().await,
        None => Default::default(),
    };
    let mut phases = phase_observations(recorder.checkpoint(), Phase::Startup, None);

    // Threads that run while no call is in flight are background workers: what the server
    // does while they run during a call may be theirs.
    let skip = if sandbox_level.is_some() { 3 } else { 1 };
    let mut background: Vec<u32> = Vec::new();
    if let Some(l) = live.as_ref() {
        background.extend(probe_background(l.process.pid().map(ProcessTree::new), skip).await);
    }
    if config.isolate {
        notes.push(
            "--isolate: every tool was called on a fresh server with a fresh workspace".into(),
        );
        // The listing server is not used for calls: each tool gets its own.
        if let Some(l) = live.take() {
            stop_server(l, &mut collected, keep_transcript, &mut recorder).await;
        }
        phases.extend(phase_observations(recorder.checkpoint(), Phase::Idle, None));
    }

    // Exercise and observe.
    let explorer = Explorer::new(&inventory.tools, config, &scratch.workspace);
    let mut host = ServerHost {
        ctx: &ctx,
        sandbox_level,
        recorder: &mut recorder,
        collected: &mut collected,
        live,
        restarts: 0,
        phases,
        background,
        idle_sample: None,
        lingering: Vec::new(),
        limit_during: None,
        skip,
        stop: stop.clone(),
        subreaper,
        deadline,
        notes: Vec::new(),
    };
    let explored = explorer.run(&mut host).await;
    let ServerHost {
        live,
        restarts,
        mut phases,
        background,
        limit_during,
        notes: host_notes,
        ..
    } = host;
    notes.extend(host_notes);
    let Explored {
        mut runs,
        called,
        planned_arguments,
        partial,
        notes: explorer_notes,
        pooled_values,
    } = explored;
    let mut partial = partial;
    notes.extend(explorer_notes);

    // Shutdown.
    if let Some(l) = live {
        stop_server(l, &mut collected, keep_transcript, &mut recorder).await;
    }
    phases.extend(phase_observations(
        recorder.checkpoint(),
        Phase::Shutdown,
        None,
    ));
    notes.extend(recorder.take_notes());

    // Confirm uncertain attributions by replaying tools alone on fresh servers.
    if config.replay && partial.is_none() {
        config
            .progress
            .emit(ProgressEvent::Stage("confirming attributions"));
        let names: Vec<String> = inventory.tools.iter().map(|t| t.name.clone()).collect();
        notes.extend(
            replay_ambiguous(config, &stop, subreaper, &names, &mut runs, &mut phases).await,
        );
    }

    // Judge.
    let mut findings: Vec<Finding> = Vec::new();
    let mut tools = Vec::new();
    for (tool, run) in inventory.tools.iter().zip(runs) {
        let judgement = audit::judge_tool(tool, &run, &coverage);
        findings.extend(judgement.findings);
        if config.require_hints {
            findings.extend(audit::missing_hints::finding(tool, &judgement.supported));
        }
        tools.push(ToolReport {
            name: tool.name.clone(),
            title: tool.title.clone(),
            description: tool.description.as_ref().map(|d| shorten(d, 300)),
            index: tool.index,
            definition_sha256: tool.definition_sha256.clone(),
            declared: HintName::ALL
                .iter()
                .map(|h| (h.key(), tool.hints.get(*h).describe()))
                .collect(),
            skipped: run.skipped.clone(),
            // The arguments that worked, or else the first set tried.
            arguments: run
                .calls
                .iter()
                .find(|c| c.number == 1 && c.outcome.is_success())
                .map(|c| c.arguments.clone())
                .or_else(|| planned_arguments.get(tool.index).cloned())
                .unwrap_or(Value::Null),
            synthesis_notes: run.synthesis_notes.clone(),
            overridden: run.overridden.clone(),
            calls: run.calls,
            verdicts: judgement.verdicts,
            suggestions: judgement.suggestions,
            supported: judgement.supported,
            definition: tool.definition.clone(),
        });
    }
    findings.extend(audit::malformed_tool::unusable_findings(
        &inventory.unusable,
    ));
    findings.extend(audit::out_of_window::findings(&phases));
    if let Some(why) = limit_reason(&ctx) {
        findings.push(audit::resource_limit::finding(
            &why,
            limit_during.as_deref(),
        ));
        partial.get_or_insert(why);
    }
    findings.extend(audit::sandbox_evasion::findings(
        tools.iter().map(|t| (t.name.as_str(), t.calls.as_slice())),
        &phases,
    ));

    let mut report = base_report(command, None);
    report.sandbox = sandbox_status;
    report.server.identity = identity;
    report.server.restarts = restarts;
    report.server.startup_us = Some(startup_us);
    report.server.tools_sha256 = Some(inventory.sha256.clone());
    report.coverage = CoverageSummary {
        observers: recorder.statuses(),
        files_observed: coverage.files.is_some(),
        network_observed: coverage.network.is_some(),
        tools_listed: inventory.tools.len(),
        tools_succeeded: tools
            .iter()
            .filter(|t| t.calls.iter().any(|c| c.outcome.is_success()))
            .count(),
        tools_failed: tools
            .iter()
            .filter(|t| !t.calls.is_empty() && !t.calls.iter().any(|c| c.outcome.is_success()))
            .count(),
        tools_skipped: tools
            .iter()
            .filter(|t| t.calls.is_empty() && t.skipped.is_some())
            .count(),
        tools_not_called: tools
            .iter()
            .enumerate()
            .filter(|(i, t)| !called[*i] && t.skipped.is_none())
            .count(),
        calls: tools.iter().map(|t| t.calls.len()).sum(),
        inventory_incomplete: inventory.incomplete.clone(),
        background_threads: background.len(),
        values_learned: pooled_values,
        unreached: tools
            .iter()
            .filter_map(|t| crate::report::Unreached::of(&t.name, &t.calls))
            .collect(),
    };
    findings.extend(protocol_findings(&collected));
    let transcript = finish_collected(&mut report, collected);
    report.tools = tools;
    report.phases = phases;
    report.findings = findings;
    report.seeded = scratch.seeded.clone();
    report.partial = partial.clone();
    report.notes = seed_notes.into_iter().chain(notes).collect();

    crate::baseline::fingerprint_findings(&mut report);
    if let Some(b) = &config.baseline {
        report.baseline = Some(b.apply(&mut report));
    }
    (report.exit_code, report.exit_reason) = decide_exit(&report, config);
    if let Err(e) = scratch.remove() {
        report.notes.push(e);
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    Verification { report, transcript }
}

/// The exit code and its reason for a finished report: failing findings (those at or above
/// `--fail-on` and not accepted by the baseline) first, then stale baseline entries when they
/// fail the run, then an incomplete run, then "nothing verified".
fn decide_exit(report: &Report, config: &RunConfig) -> (i32, String) {
    let failing: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| f.accepted.is_none() && config.fail_on.fails(f.severity))
        .collect();
    let accepted = report
        .baseline
        .as_ref()
        .map(|b| b.accepted)
        .unwrap_or_default();
    let accepted_note = if accepted > 0 {
        format!(" ({accepted} accepted by the baseline)")
    } else {
        String::new()
    };
    let stale = report
        .baseline
        .as_ref()
        .map(|b| b.stale.len())
        .unwrap_or_default();
    let partial = report.partial.as_ref();
    if !failing.is_empty() {
        let contradicted: Vec<&&Finding> = failing
            .iter()
            .filter(|f| f.hint.is_some() && f.severity == Severity::Error)
            .collect();
        let tools: std::collections::BTreeSet<&str> = contradicted
            .iter()
            .filter_map(|f| f.tool.as_deref())
            .collect();
        let others = failing.len() - contradicted.len();
        let mut parts = Vec::new();
        if !contradicted.is_empty() {
            parts.push(format!(
                "{} contradicted hint(s) in {} tool(s)",
                contradicted.len(),
                tools.len()
            ));
        }
        if others > 0 {
            parts.push(format!(
                "{others} other finding(s) at or above --fail-on {}",
                config.fail_on.as_str()
            ));
        }
        return (
            exit_code::CONTRADICTIONS,
            format!("{}{accepted_note}", parts.join("; ")),
        );
    }
    if stale > 0 && config.fail_on_stale_baseline {
        return (
            exit_code::CONTRADICTIONS,
            format!(
                "{stale} baseline entr{} matched no finding (stale; remove them from the baseline){accepted_note}",
                if stale == 1 { "y" } else { "ies" }
            ),
        );
    }
    if let Some(why) = partial {
        return (
            exit_code::HARNESS,
            format!("the run did not complete ({why}); the report is partial"),
        );
    }
    if report.coverage.tools_succeeded == 0 {
        return (
            exit_code::NOTHING_VERIFIED,
            if report.tools.is_empty() {
                "nothing verified: the server listed no usable tool".to_string()
            } else {
                "nothing verified: no tool call succeeded".to_string()
            },
        );
    }
    let below = report
        .findings
        .iter()
        .filter(|f| f.accepted.is_none() && f.hint.is_some() && f.severity == Severity::Error)
        .count();
    // Contradictions held at warning level: uncertain attribution, or writes that did not last.
    let weak = report
        .findings
        .iter()
        .filter(|f| f.accepted.is_none() && f.hint.is_some() && f.severity != Severity::Error)
        .count();
    let weak_note = if weak > 0 {
        format!(
            "; {weak} weak contradiction(s) (uncertain, or writes that did not last) reported as warnings"
        )
    } else {
        String::new()
    };
    let exercised = report.coverage.tools_succeeded;
    (
        exit_code::OK,
        if below > 0 {
            format!(
                "{below} contradicted hint(s) in {exercised} exercised tool(s), not failing the run (--fail-on {}){weak_note}{accepted_note}",
                config.fail_on.as_str()
            )
        } else {
            format!(
                "no {}contradiction in {exercised} exercised tool(s){weak_note}{accepted_note}",
                if weak > 0 { "firm " } else { "" }
            )
        },
    )
}

/// `--check`: the scenario's `[expect]` decides the exit code (0 met, 1 unmet); the run's own
/// exit code and reason are kept in the report.
fn check_expectations(report: &mut Report, config: &RunConfig) {
    let Some(expect) = config.scenario.as_ref().and_then(|s| s.expect.as_ref()) else {
        return;
    };
    let unmet = crate::scenario::check(expect, report);
    let outcome = crate::report::ExpectationOutcome {
        run_exit_code: report.exit_code,
        run_exit_reason: report.exit_reason.clone(),
        unmet,
    };
    (report.exit_code, report.exit_reason) = match outcome.unmet.first() {
        None => (
            exit_code::OK,
            format!(
                "every expectation of the scenario is met (the run: {}, exit {})",
                outcome.run_exit_reason, outcome.run_exit_code
            ),
        ),
        Some(first) => (
            exit_code::CONTRADICTIONS,
            format!(
                "{} expectation(s) of the scenario unmet, first: {first}",
                outcome.unmet.len()
            ),
        ),
    };
    report.expectations = Some(outcome);
}
/// Observations of a window that belongs to no call.
fn phase_observations(
    observations: Vec<Observation>,
    phase: Phase,
    after_tool: Option<String>,
) -> Vec<PhaseObservation> {
    observations
        .into_iter()
        .map(|observation| PhaseObservation {
            phase,
            after_tool: after_tool.clone(),
            observation,
        })
        .collect()
}

fn protocol_findings(c: &Collected) -> Vec<Finding> {
    let mut out =
        audit::protocol::findings(&c.notes, &c.anomalies, c.stats.garbage, c.stats.unknown_id);
    out.extend(audit::protocol::list_changed(
        c.notifications
            .get("notifications/tools/list_changed")
            .copied()
            .unwrap_or(0),
    ));
    out
}

/// Moves what was collected from the server instances into the report; returns the transcript.
fn finish_collected(r: &mut Report, c: Collected) -> Vec<Entry> {
    r.server.exits = c.exits;
    r.server.stderr = c.stderr;
    r.server.stderr_bytes = c.stderr_bytes;
    r.wire = WireSummary {
        stats: c.stats,
        server_requests: c.server_requests,
        notifications: c.notifications,
    };
    c.transcripts.into_iter().flatten().collect()
}
