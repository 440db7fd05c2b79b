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
use crate::evidence::{
    CallRecord, CallTiming, ControlRequest, Coverage, Phase, PhaseObservation, ReplayRecord,
    ToolRun,
};
use crate::exercise::explore::{Explored, Explorer};
use crate::finding::{Finding, Severity};
use crate::mcp::client::{CallOutcome, ClientOptions, EraChoice, McpClient, ProtocolNote};
use crate::mcp::tool::{HintName, ToolDecl, shorten};
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
mod judge;
mod limits;
mod observers;
mod prepare;
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

/// The result of a run: the report, and the transcript when one was asked for.
pub struct Verification {
    /// The report.
    pub report: Report,
    /// Every line exchanged, when `RunConfig::transcript` is set (in server-instance order).
    pub transcript: Vec<Entry>,
}

/// The report of a run whose server never started because its `[setup]` failed or was
/// stopped (`stopped`: by an interrupt or a timeout, so the report is partial): the cause, no
/// sandbox claimed, exit 3.
pub fn never_started(config: &RunConfig, cause: String, stopped: bool) -> Verification {
    let base = ReportBase {
        started: config.begun,
        started_unix_ms: unix_ms_now().saturating_sub(config.begun.elapsed().as_millis() as u64),
        settings: settings_of(config),
        sandbox: SandboxStatus::not_started(requested_sandbox(config)),
    };
    let reason = format!("harness error: {cause}");
    let mut v = *prepare::not_started(&base, config, cause.clone(), &reason);
    if stopped {
        v.report.partial = Some(cause);
    }
    v
}

/// Milliseconds since the Unix epoch, now.
fn unix_ms_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// What the run asked of the sandbox, in the report's words.
fn requested_sandbox(config: &RunConfig) -> &'static str {
    config.sandbox.map_or("off", SandboxLevel::name)
}

/// Runs one verification. `stop` ends the run early (the report is then partial).
pub async fn verify(
    config: &RunConfig,
    stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Verification {
    let mut v = verify_unchecked(config, stop.clone(), subreaper).await;
    // A server that cannot be spoken to in the modern era is greeted once more, in the
    // handshake era, before the run gives up on it.
    if let Some(why) = handshake_era_needed(config, &v.report) {
        let first_did_not_start = v.report.server.start_error.is_some();
        let mut legacy = config.clone();
        legacy.era = EraChoice::Legacy;
        let first_partial = v.report.partial.is_some();
        if !first_partial && !*stop.borrow() {
            v = verify_unchecked(&legacy, stop, subreaper).await;
            let note = if first_did_not_start && v.report.server.start_error.is_some() {
                // A server that dies on its own (a bad argument, a missing file) dies in
                // either era: the probe is not to blame.
                format!(
                    "the server ended before answering in the handshake era too (initialize, no server/discover probe), so the probe was not the cause (the first try said: {why}); see the server's own output"
                )
            } else {
                format!(
                    "the run was made again in the handshake era (initialize, no server/discover probe): {why}"
                )
            };
            v.report.notes.insert(0, note);
        }
    }
    // Runs that ended early (no handshake, no sandbox) have findings too.
    crate::baseline::fingerprint_findings(&mut v.report);
    if config.check_expectations {
        check_expectations(&mut v.report, config);
    }
    v
}

/// Why a run made with the era left to detection (`--era auto`) must be made again in the
/// handshake era, if it must: the server died or hung up on the `server/discover` probe (an
/// older SDK that crashes on an unknown request before `initialize`), or it answered the probe
/// and listed its tools but refused every call as uninitialised.
fn handshake_era_needed(config: &RunConfig, report: &Report) -> Option<String> {
    if config.era != EraChoice::Auto {
        return None;
    }
    if let Some(error) = &report.server.start_error {
        let probe = "server/discover";
        let died = [
            crate::rpc::session::SessionError::Closed {
                method: probe.into(),
            }
            .to_string(),
            format!("could not send {probe}"),
        ];
        return died
            .iter()
            .any(|d| error.contains(d.as_str()))
            .then(|| "the server hung up on the server/discover probe".to_string());
    }
    let modern = report
        .server
        .identity
        .as_ref()
        .is_some_and(|i| matches!(i.era, crate::mcp::client::Era::Modern(_)));
    let calls: Vec<&CallRecord> = report.tools.iter().flat_map(|t| t.calls.iter()).collect();
    let uninitialised = |c: &&CallRecord| {
        c.outcome.said().is_some_and(|said| {
            let said = said.to_lowercase();
            said.contains("initializ") || said.contains("initialis")
        })
    };
    (modern && !calls.is_empty() && calls.iter().all(uninitialised)).then(|| {
        format!(
            "the server answered server/discover and listed its tools, but refused all {} call(s) as uninitialised",
            calls.len()
        )
    })
}

/// [`verify`] without the `--check` of the scenario's expectations.
async fn verify_unchecked(
    config: &RunConfig,
    stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Verification {
    let started = Instant::now();
    let started_unix_ms = unix_ms_now();
    // The command as a whole: what reading the configuration and the installs took counts.
    let deadline = config.begun + config.run_timeout;
    config
        .progress
        .emit(ProgressEvent::Stage("starting the server"));
    let mut notes: Vec<String> = Vec::new();
    let mut collected = Collected::default();
    let keep_transcript = config.transcript.is_some();
    let base = ReportBase {
        started,
        started_unix_ms,
        settings: settings_of(config),
        sandbox: SandboxStatus::scratch_only(subreaper),
    };
    // The scratch directories, the seed, and where and as whom the server runs.
    let (mut scratch, seed_notes, command, ctx) = match prepare::prepare(
        config,
        &base,
        started,
        started_unix_ms,
        stop.clone(),
        deadline,
    ) {
        Ok(p) => p,
        Err(failed) => return *failed,
    };
    // Observers: what is watched, and what the report says was covered.
    let (mut recorder, coverage) = observers::build(config, &scratch, &command, &ctx);
    // Launch and handshake.
    let mut sandbox_level = config.sandbox;
    let mut sandbox_status = SandboxStatus::scratch_only(subreaper);
    let launched = Instant::now();
    let mut first = start_server(&ctx, sandbox_level, &mut recorder).await;
    let startup_us = launched.elapsed().as_micros() as u64;
    if let Err(f) = &first {
        if let (Some(step), Some(SandboxLevel::BestEffort)) = (&f.sandbox, sandbox_level) {
            // Best effort and no namespaces at all: run without the sandbox, and say so loudly.
            sandbox_status.requested = SandboxLevel::BestEffort.name().into();
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
    // Nested runs (replays, isolated runs) go side by side only where every server has a pid
    // namespace of its own: without one, a server's orphans are hintcheck's children like
    // the other runs' servers, and one run's sweep could not tell them apart.
    let mut side_by_side = 1;
    let mut live = match first {
        Ok((l, enforcement)) => {
            if let (Some(e), Some(level)) = (enforcement, sandbox_level) {
                sandbox_status = SandboxStatus::from_enforcement(&e, level);
                if e.namespaces.iter().any(|n| n == "pid") {
                    side_by_side = config.jobs;
                }
            }
            Some(l)
        }
        Err(f) => {
            if let (Some(e), Some(level)) = (&f.enforcement, sandbox_level) {
                sandbox_status = SandboxStatus::from_enforcement(e, level);
            }
            let mut r = base.report(command.clone(), Some(f.message.clone()));
            r.sandbox = sandbox_status;
            return start_failed(
                config,
                r,
                f,
                collected,
                &mut recorder,
                scratch,
                keep_transcript,
            );
        }
    };
    let identity = live.as_ref().map(|l| l.client.identity().clone());

    // Inventory.
    let mut listing_stopped = None;
    let inventory = match live.as_mut() {
        Some(l) => tokio::select! {
            inventory = l.client.list_tools() => inventory,
            why = ctx.interruption() => {
                let incomplete = Some(format!("{why} while the tools were being listed"));
                listing_stopped = Some(why);
                crate::mcp::client::Inventory {
                    incomplete,
                    ..Default::default()
                }
            }
        },
        None => Default::default(),
    };
    let mut phases = phase_observations(recorder.checkpoint(), Phase::Startup, None);
    // Work the server started on its own settles before the first call.
    if live.is_some() && !config.isolate {
        let wait = host::settle_start(&mut recorder, &ctx).await;
        notes.extend(wait.note(config.startup_quiet));
        phases.extend(phase_observations(wait.observations, Phase::Startup, None));
    }

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
            stop_server(l, &ctx, &mut collected, &mut recorder).await;
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
        subreaper,
        side_by_side,
        long_pollers: inventory
            .tools
            .iter()
            .filter(|t| crate::exercise::semantics::waits_for_events(t))
            .map(|t| t.name.clone())
            .collect(),
        notes: Vec::new(),
    };
    let controls = if config.isolate {
        Vec::new()
    } else {
        host.controls(&inventory.tools).await
    };
    let explored = explorer.run(&mut host).await;
    if explored.partial.is_none() && !config.isolate {
        if let Some((tool, waited)) = host.wait_for_late_effects().await {
            notes.push(format!(
                "after the last call, waited {} ms for what calls of {tool} left running (a timer or a sleeping thread) to act on its own (--late-wait {} ms)",
                waited.as_millis(),
                config.late_wait.as_millis()
            ));
        }
    }
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
    // A stop while the tools were listed leaves the run as partial as one during the calls.
    let mut partial = partial.or(listing_stopped);
    notes.extend(explorer_notes);

    // Shutdown.
    if let Some(l) = live {
        stop_server(l, &ctx, &mut collected, &mut recorder).await;
    }
    phases.extend(phase_observations(
        recorder.checkpoint_whole(),
        Phase::Shutdown,
        None,
    ));
    notes.extend(recorder.take_notes());

    // What the server also did for the control requests is its per-request bookkeeping.
    let names: Vec<String> = inventory.tools.iter().map(|t| t.name.clone()).collect();
    notes.extend(audit::server_wide::discount_per_request(
        &mut runs,
        &names,
        &mut phases,
    ));
    // The upkeep of the server's own installation is its own, and writes to what it keeps
    // for several tools earn firmness from a replay (each tool has its own server under
    // --isolate: nothing is shared there).
    let installed: Vec<&std::path::Path> = config
        .installed
        .iter()
        .flat_map(|i| i.npm.iter().chain(i.venv.iter()))
        .map(|p| p.as_path())
        .collect();
    let servers_own = audit::server_wide::ServersOwn::of(
        &runs,
        &phases,
        audit::server_wide::installation_roots(&config.command, &installed),
    );
    notes.extend(audit::server_wide::mark_own_installation(
        &mut runs,
        &names,
        &servers_own,
    ));
    if !config.isolate {
        audit::server_wide::mark_shared_state(&inventory.tools, &mut runs, &servers_own);
    }

    // Confirm uncertain attributions by replaying tools alone on fresh servers, and tell the
    // server's first-call initialisation apart from the first tool's writes.
    let mut replays =
        Replays::within(config, &stop, subreaper, deadline).side_by_side(side_by_side);
    if config.replay && partial.is_none() {
        config
            .progress
            .emit(ProgressEvent::Stage("confirming attributions"));
        notes.extend(
            replay_ambiguous(
                &mut replays,
                (&inventory.tools, &names),
                &mut runs,
                &mut phases,
                &servers_own,
            )
            .await,
        );
        if !config.isolate {
            notes.extend(
                first_call_initialisation(
                    &mut replays,
                    (&inventory.tools, &names),
                    &mut runs,
                    &mut phases,
                )
                .await,
            );
            notes.extend(
                lazy_set_up(
                    &mut replays,
                    (&inventory.tools, &names),
                    &mut runs,
                    &mut phases,
                )
                .await,
            );
        }
    }
    let replay_records = replays.records;

    // Tell the server's per-call bookkeeping apart from the tools' own writes.
    notes.extend(audit::server_wide::mark_bookkeeping(
        &mut runs, &names, &phases,
    ));

    // Judge.
    let (tools, mut findings) =
        judge::judge_tools(config, &inventory, runs, &planned_arguments, &coverage);
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

    let mut report = base.report(command, None);
    report.sandbox = sandbox_status;
    report.server.identity = identity;
    report.server.restarts = restarts;
    report.server.startup_us = Some(startup_us);
    report.server.tools_sha256 = Some(inventory.sha256.clone());
    report.coverage = judge::coverage_summary(
        &recorder,
        &coverage,
        &inventory,
        &tools,
        &called,
        background.len(),
        pooled_values,
    );
    findings.extend(protocol_findings(&collected));
    let transcript = finish_collected(&mut report, collected);
    report.tools = tools;
    report.phases = phases;
    report.replays = replay_records;
    report.controls = controls;
    report.findings = findings;
    report.seeded = scratch.seeded.clone();
    report.partial = partial.clone();
    report.notes = seed_notes.into_iter().chain(notes).collect();

    crate::baseline::fingerprint_findings(&mut report);
    if let Some(b) = &config.baseline {
        report.baseline = Some(b.apply(&mut report));
    }
    report.limits_hit = limits::hit(&report, config);
    (report.exit_code, report.exit_reason) = decide_exit(&report, config);
    if let Err(e) = scratch.remove() {
        report.notes.push(e);
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    Verification { report, transcript }
}

/// The report of a run whose server could not be started or greeted (`report` holds the
/// command, the start error and what the sandbox enforced).
fn start_failed(
    config: &RunConfig,
    mut r: Report,
    f: StartFailure,
    mut collected: Collected,
    recorder: &mut Recorder,
    mut scratch: Scratch,
    keep_transcript: bool,
) -> Verification {
    if let Some((s, n)) = f.session {
        collected.absorb(&s, n, keep_transcript);
    }
    collected.exits.extend(f.exit);
    let mut cause = f.message.clone();
    if let Some(line) = collected
        .anomalies
        .iter()
        .find(|e| e.class.starts_with("not-json"))
    {
        let what = if e_is_json(&line.class) {
            "JSON-RPC"
        } else {
            "JSON"
        };
        cause.push_str(&format!(
            "; its stdout has a line that is not {what} (the first: {:?})",
            shorten(&line.text, 120)
        ));
    }
    r.server.start_error = Some(cause.clone());
    r.findings = protocol_findings(&collected);
    let transcript = finish_collected(&mut r, collected);
    r.seeded = scratch.seeded.clone();
    r.phases = phase_observations(recorder.checkpoint(), Phase::Startup, None);
    if !f.started {
        // Nothing ran: no sandbox held anything, and the seed was never seen by a server.
        r.sandbox = SandboxStatus::not_started(requested_sandbox(config));
        r.seeded.clear();
    }
    if let Some(why) = &f.interrupted {
        r.partial = Some(format!("{why} while the server was starting"));
    }
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
        None if f.interrupted.is_some() => r.exit_reason = format!("harness error: {cause}"),
        None if !f.started => {
            r.exit_reason = format!("harness error: the server could not be started: {cause}");
        }
        None => r.exit_reason = format!("harness error: the server could not be greeted: {cause}"),
    }
    r.limits_hit = limits::hit(&r, config);
    r.exit_reason.push_str(&limits::in_words(&r.limits_hit));
    r.notes.extend(recorder.take_notes());
    if let Err(e) = scratch.remove() {
        r.notes.push(e);
    }
    Verification {
        report: r,
        transcript,
    }
}

/// Whether a garbage line's class says it was JSON (only not JSON-RPC).
fn e_is_json(class: &str) -> bool {
    class == "not-jsonrpc"
}

/// The settings a report records.
fn settings_of(config: &RunConfig) -> Settings {
    Settings {
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
        transport: config.transport.name().into(),
        fail: config.fail.clone(),
    }
}

/// What every report of a run starts from, whatever stage the run ended in.
struct ReportBase {
    started: Instant,
    started_unix_ms: u64,
    settings: Settings,
    sandbox: SandboxStatus,
}

impl ReportBase {
    /// An empty report for `command`, with the start error when the server did not start.
    fn report(&self, command: Vec<String>, start_error: Option<String>) -> Report {
        Report {
            hintcheck_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_ms: self.started_unix_ms,
            duration_ms: self.started.elapsed().as_millis() as u64,
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
            sandbox: self.sandbox.clone(),
            coverage: CoverageSummary::default(),
            tools: Vec::new(),
            phases: Vec::new(),
            controls: Vec::new(),
            replays: Vec::new(),
            findings: Vec::new(),
            wire: WireSummary::default(),
            settings: self.settings.clone(),
            seeded: Vec::new(),
            notes: Vec::new(),
            exit_code: exit_code::HARNESS,
            exit_reason: String::new(),
            partial: None,
            baseline: None,
            expectations: None,
            limits_hit: Vec::new(),
        }
    }
}

/// The exit code and its reason for a finished report: failing findings (those at or above
/// `--fail-on` and not accepted by the baseline) first, then stale baseline entries when they
/// fail the run, then an incomplete run, then "nothing verified".
fn decide_exit(report: &Report, config: &RunConfig) -> (i32, String) {
    let failing: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| config.fail.fails(f))
        .collect();
    let accepted = report
        .baseline
        .as_ref()
        .map(|b| b.accepted)
        .unwrap_or_default();
    // Said after what fails the run ("more") or alone.
    let accepted_note_after = |more: bool| {
        if accepted == 0 {
            String::new()
        } else if more {
            format!("; {accepted} more finding(s) accepted by the baseline")
        } else {
            format!("; {accepted} finding(s) accepted by the baseline")
        }
    };
    let accepted_note = accepted_note_after(false);
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
                "{others} other finding(s) at or above {}",
                config.fail.describe()
            ));
        }
        return (
            exit_code::CONTRADICTIONS,
            format!("{}{}", parts.join("; "), accepted_note_after(true)),
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
    let limits = limits::in_words(&report.limits_hit);
    if let Some(why) = partial {
        return (
            exit_code::HARNESS,
            format!("the run did not complete ({why}); the report is partial{limits}"),
        );
    }
    if report.coverage.tools_succeeded == 0 {
        return (
            exit_code::NOTHING_VERIFIED,
            if report.tools.is_empty() {
                format!("nothing verified: the server listed no usable tool{limits}")
            } else {
                format!("nothing verified: no tool call succeeded{limits}")
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
                config.fail.describe()
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
            started_by: None,
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
    if let Some(spoken) = c.transport {
        r.settings.transport = spoken.into();
    }
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
