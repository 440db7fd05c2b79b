//! The run's one collector: every stage emits what it learned as [`RunEvent`]s to the
//! [`RunLog`] (which also forwards the stage names to the progress display), and
//! [`RunLog::assemble`] turns what was collected into the [`Report`] on every path the run can
//! take (finished, a server that could not be started or greeted, a run that never started,
//! an interrupted one), so a partial report and a full one cannot differ in shape.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::config::{RootsOffer, RunConfig};
use crate::evidence::{ControlRequest, PhaseObservation, ReplayRecord};
use crate::finding::{Finding, Severity};
use crate::mcp::client::{EraChoice, ProtocolNote, ServerIdentity};
use crate::mcp::tool::shorten;
use crate::progress::{ProgressEvent, ProgressHook};
use crate::report::{
    CoverageSummary, Report, ServerSummary, Settings, ToolReport, WireSummary, exit_code,
};
use crate::rpc::session::{ServerRequestRecord, Session};
use crate::rpc::transcript::{Entry, TranscriptStats};
use crate::sandbox::SandboxStatus;
use crate::sandbox::process::ExitSummary;
use crate::sandbox::scratch::Scratch;

use super::limits;

/// The result of a run: the report, and the transcript when one was asked for.
pub struct Verification {
    /// The report.
    pub report: Report,
    /// Every line exchanged, when `RunConfig::transcript` is set (in server-instance order).
    pub transcript: Vec<Entry>,
}

/// What a stage tells the collector.
pub(super) enum RunEvent {
    /// A stage begins (the progress display shows its words).
    Stage(&'static str),
    /// Notes for the report, in the order the run made them.
    Notes(Vec<String>),
    /// The command as the server is started (its placeholders filled).
    Command(Vec<String>),
    /// What the sandbox enforced, or will not.
    Sandbox(SandboxStatus),
    /// Why the server could not be started or greeted, or the run could not start it.
    StartError(String),
    /// The server answered the greeting, this long after its launch began.
    Greeted {
        identity: ServerIdentity,
        startup_us: u64,
    },
    /// The digest of the tool listing.
    Listed { sha256: String },
    /// The canaries planted (kinds and places).
    Canaries(Vec<crate::report::PlantedCanary>),
    /// The control requests and how the server answered them.
    Controls(Vec<ControlRequest>),
    /// How often the server was started again after a crash or a hung call.
    Restarts(usize),
    /// Observations of the windows that belong to no call, as attribution left them.
    Phases(Vec<PhaseObservation>),
    /// The replays made to confirm attributions.
    Replays(Vec<ReplayRecord>),
    /// Every tool's entry and what the run reached.
    Judged {
        tools: Vec<ToolReport>,
        coverage: CoverageSummary,
    },
    /// Findings, in the order the audits made them.
    Findings(Vec<Finding>),
    /// The run did not complete, and why (the first reason given holds).
    Partial(String),
    /// A stage ended after this long.
    Took(TimedStage, std::time::Duration),
    /// A server instance's windows: how many closed on a proof of quiet, how many after the
    /// idle period.
    Windows { proven: u32, by_idle_period: u32 },
    /// A server instance ended (it was stopped, or it could not be started or greeted): what
    /// its session recorded (when it had one), the protocol notes, how it exited, and
    /// whether it turned out to speak the older HTTP+SSE transport.
    InstanceEnded {
        session: Option<Box<Session>>,
        notes: Vec<ProtocolNote>,
        exit: Option<ExitSummary>,
        legacy_http: bool,
    },
}

/// The stages whose time the report gives.
#[derive(Debug, Clone, Copy)]
pub(super) enum TimedStage {
    Prepare,
    Launch,
    Inventory,
    Explore,
    /// Parts of the exploration.
    Controls,
    LateWait,
    Shutdown,
    Attribute,
    Judge,
}

/// How the run ended: what decides its exit code.
pub(super) enum Ending {
    /// Every stage ran (a stage that was cut short said so with [`RunEvent::Partial`]).
    Finished,
    /// The server could not be started or greeted: the exit code and its reason, and whether
    /// a server process ran at all (else the seeded workspace was never seen by one).
    StartFailed {
        exit_code: i32,
        reason: String,
        started: bool,
    },
    /// Nothing was started: the scratch directories, their seed or the preflight failed, or
    /// the `[setup]` did.
    NotStarted { reason: String },
}

/// What is collected from every server instance of a run.
#[derive(Default)]
struct Collected {
    exits: Vec<ExitSummary>,
    notes: Vec<ProtocolNote>,
    anomalies: Vec<Entry>,
    stats: TranscriptStats,
    server_requests: Vec<ServerRequestRecord>,
    notifications: BTreeMap<String, usize>,
    stderr: String,
    stderr_bytes: u64,
    transcripts: Vec<Vec<Entry>>,
    /// The transport as the servers spoke it, where it differs from the configured one's
    /// name (`http+sse`: the older HTTP+SSE transport).
    transport: Option<&'static str>,
}

impl Collected {
    /// Takes in what a server instance's session recorded.
    fn absorb(&mut self, session: &Session, notes: Vec<ProtocolNote>, keep_transcript: bool) {
        let rec = session.record();
        self.notes.extend(notes);
        self.anomalies.extend(rec.anomalies);
        self.stats.sent += rec.stats.sent;
        self.stats.received += rec.stats.received;
        self.stats.garbage += rec.stats.garbage;
        self.stats.unknown_id += rec.stats.unknown_id;
        self.stats.dropped_entries += rec.stats.dropped_entries;
        self.server_requests.extend(rec.server_requests);
        for n in rec.notifications {
            // The method names come from the server: keep the map small whatever it sends.
            let key =
                if self.notifications.len() < 100 || self.notifications.contains_key(&n.method) {
                    shorten(&n.method, 100)
                } else {
                    "(other methods)".into()
                };
            *self.notifications.entry(key).or_default() += 1;
        }
        if !self.stderr.is_empty() && !rec.stderr.is_empty() {
            self.stderr.push_str("\n[— restarted —]\n");
        }
        self.stderr.push_str(&rec.stderr);
        self.stderr_bytes += rec.stderr_bytes;
        if keep_transcript {
            self.transcripts.push(session.transcript());
        }
    }

    /// The protocol findings of what the server instances said.
    fn findings(&self) -> Vec<Finding> {
        let mut out = crate::audit::protocol::findings(
            &self.notes,
            &self.anomalies,
            self.stats.garbage,
            self.stats.unknown_id,
        );
        out.extend(crate::audit::protocol::list_changed(
            self.notifications
                .get("notifications/tools/list_changed")
                .copied()
                .unwrap_or(0),
        ));
        out
    }
}

/// The collector of one run: the report as far as the stages have filled it, and what the
/// server instances said.
pub(super) struct RunLog {
    started: Instant,
    progress: ProgressHook,
    report: Report,
    /// Whether the transcript is kept (`--transcript`).
    keep_transcript: bool,
    /// What every server instance of the run said ([`RunEvent::InstanceEnded`]).
    instances: Collected,
}

impl RunLog {
    /// The collector of a run of `config` that began at `started` (`subreaper`: whether
    /// hintcheck reaps the server's orphans, which the sandbox status says until a sandbox
    /// says more).
    pub(super) fn new(config: &RunConfig, started: Instant, subreaper: bool) -> Self {
        let started_unix_ms =
            crate::text::unix_ms_now().saturating_sub(started.elapsed().as_millis() as u64);
        let report = Report {
            hintcheck_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_ms,
            duration_ms: 0,
            server: ServerSummary {
                command: config.server.command.clone(),
                identity: None,
                start_error: None,
                exits: Vec::new(),
                restarts: 0,
                stderr: String::new(),
                stderr_bytes: 0,
                tools_sha256: None,
                startup_us: None,
            },
            sandbox: SandboxStatus::scratch_only(subreaper).into(),
            coverage: CoverageSummary::default(),
            tools: Vec::new(),
            phases: Vec::new(),
            controls: Vec::new(),
            replays: Vec::new(),
            findings: Vec::new(),
            wire: WireSummary::default(),
            settings: settings_of(config),
            seeded: Vec::new(),
            canaries: Vec::new(),
            notes: Vec::new(),
            exit_code: exit_code::HARNESS,
            exit_reason: String::new(),
            partial: None,
            baseline: None,
            expectations: None,
            limits_hit: Vec::new(),
            timing: crate::report::Timing::default(),
            variants: Vec::new(),
        };
        RunLog {
            started,
            progress: config.progress.clone(),
            report,
            keep_transcript: config.outputs.transcript.is_some(),
            instances: Collected::default(),
        }
    }

    /// Takes in what a stage learned.
    pub(super) fn emit(&mut self, event: RunEvent) {
        let r = &mut self.report;
        match event {
            RunEvent::Stage(words) => self.progress.emit(ProgressEvent::Stage(words)),
            RunEvent::Took(stage, took) => {
                let us = took.as_micros() as u64;
                let t = &mut r.timing;
                *match stage {
                    TimedStage::Prepare => &mut t.prepare_us,
                    TimedStage::Launch => &mut t.launch_us,
                    TimedStage::Inventory => &mut t.inventory_us,
                    TimedStage::Explore => &mut t.explore_us,
                    TimedStage::Controls => &mut t.controls_us,
                    TimedStage::LateWait => &mut t.late_wait_us,
                    TimedStage::Shutdown => &mut t.shutdown_us,
                    TimedStage::Attribute => &mut t.replays_us,
                    TimedStage::Judge => &mut t.judge_us,
                } += us;
            }
            RunEvent::Windows {
                proven,
                by_idle_period,
            } => {
                r.timing.windows_proven_quiet += proven;
                r.timing.windows_closed_by_idle_period += by_idle_period;
            }
            RunEvent::Notes(notes) => r.notes.extend(notes),
            RunEvent::Command(command) => r.server.command = command,
            RunEvent::Sandbox(status) => r.sandbox = status.into(),
            RunEvent::StartError(why) => r.server.start_error = Some(why),
            RunEvent::Greeted {
                identity,
                startup_us,
            } => {
                r.server.identity = Some(identity);
                r.server.startup_us = Some(startup_us);
            }
            RunEvent::Listed { sha256 } => r.server.tools_sha256 = Some(sha256),
            RunEvent::Canaries(canaries) => r.canaries = canaries,
            RunEvent::Controls(controls) => r.controls = controls,
            RunEvent::Restarts(n) => r.server.restarts = n,
            RunEvent::Phases(phases) => r.phases.extend(phases),
            RunEvent::Replays(replays) => r.replays = replays,
            RunEvent::Judged { tools, coverage } => {
                r.tools = tools;
                r.coverage = coverage;
            }
            RunEvent::Findings(findings) => r.findings.extend(findings),
            RunEvent::Partial(why) => {
                r.partial.get_or_insert(why);
            }
            RunEvent::InstanceEnded {
                session,
                notes,
                exit,
                legacy_http,
            } => {
                let instances = &mut self.instances;
                match session {
                    Some(session) => instances.absorb(&session, notes, self.keep_transcript),
                    None => instances.notes.extend(notes),
                }
                instances.exits.extend(exit);
                if legacy_http {
                    instances.transport = Some(crate::config::Transport::LEGACY_HTTP);
                }
            }
        }
    }

    /// The lines of the servers' output that were not JSON-RPC, so far.
    pub(super) fn instance_anomalies(&self) -> &[Entry] {
        &self.instances.anomalies
    }

    /// When the run began (the calls' start times count from it).
    pub(super) fn started(&self) -> Instant {
        self.started
    }

    /// When the run's report says it began, in milliseconds since the Unix epoch.
    pub(super) fn started_unix_ms(&self) -> u64 {
        self.report.started_unix_ms
    }

    /// Why the run is partial, if a stage said it is.
    pub(super) fn partial(&self) -> Option<&str> {
        self.report.partial.as_deref()
    }

    /// A note for the report.
    pub(super) fn note(&mut self, note: String) {
        self.emit(RunEvent::Notes(vec![note]));
    }

    /// The report of the run, built from what was collected, with its exit code; `scratch`
    /// (the run's scratch directories, when they were made) is removed.
    pub(super) fn assemble(
        self,
        config: &RunConfig,
        ending: Ending,
        scratch: Option<Scratch>,
    ) -> Verification {
        let RunLog {
            started,
            mut report,
            instances,
            ..
        } = self;
        let r = &mut report;
        r.findings.extend(instances.findings());
        let transcript = finish_collected(r, instances);
        crate::baseline::fingerprint_findings(r);
        let seed_seen = match &ending {
            Ending::Finished => true,
            Ending::StartFailed { started, .. } => *started,
            Ending::NotStarted { .. } => false,
        };
        if let Some(s) = scratch.as_ref().filter(|_| seed_seen) {
            r.seeded = s.seeded.clone();
        }
        match ending {
            Ending::Finished => {
                if let Some(b) = &config.judge.baseline {
                    r.baseline = Some(b.apply(r));
                }
                r.limits_hit = limits::hit(r, config);
                (r.exit_code, r.exit_reason) = decide_exit(r, config);
            }
            Ending::StartFailed {
                exit_code, reason, ..
            } => {
                r.exit_code = exit_code;
                r.exit_reason = reason;
                r.limits_hit = limits::hit(r, config);
                r.exit_reason.push_str(&limits::in_words(&r.limits_hit));
            }
            Ending::NotStarted { reason } => {
                // Nothing ran: no sandbox held anything.
                r.sandbox = SandboxStatus::not_started(requested_sandbox(config)).into();
                r.exit_reason = reason;
            }
        }
        // A run a signal cut short exits as shells expect (130 for SIGINT), whatever else
        // it found: the report says what it has, and that it is partial.
        if let (Some(_), Some(code), Some(name)) = (
            &r.partial,
            crate::interrupt::exit_code(),
            crate::interrupt::signal_name(),
        ) {
            r.exit_code = code;
            r.exit_reason = format!(
                "interrupted by {name}: the report is partial (before the interrupt: {})",
                r.exit_reason
            );
        }
        // Removed while the run goes on (a replay's) or its report is written: whoever ends
        // the process waits for it (`scratch::wait_for_removals`).
        if let Some(mut s) = scratch {
            if let Err(e) = s.remove_off_path() {
                r.notes.push(e);
            }
        }
        report.duration_ms = started.elapsed().as_millis() as u64;
        let t = &mut report.timing;
        for c in report.tools.iter().flat_map(|tool| tool.calls.iter()) {
            t.calls_us += c.timing.response_us;
            t.settle_us += c.timing.settle_us;
            t.observe_us += c.timing.observe_us;
        }
        Verification { report, transcript }
    }
}

/// What the run asked of the sandbox, in the report's words.
pub(super) fn requested_sandbox(config: &RunConfig) -> &'static str {
    config
        .sandbox
        .level
        .map_or("off", crate::sandbox::SandboxLevel::name)
}

/// The settings a report records.
fn settings_of(config: &RunConfig) -> Settings {
    Settings {
        repeat: config.explore.repeat,
        seed: config.seed,
        settle_ms: config.waits.settle.as_millis() as u64,
        call_timeout_ms: config.waits.call_timeout.as_millis() as u64,
        era: match config.server.era {
            EraChoice::Auto => "auto",
            EraChoice::Modern => "modern",
            EraChoice::Legacy => "legacy",
        }
        .into(),
        roots: match config.server.roots {
            RootsOffer::None => "none",
            RootsOffer::Workspace => "workspace",
        }
        .into(),
        transport: config.server.transport.name().into(),
        packs: config.explore.packs.describe(),
        fail: config.judge.fail.clone(),
        config_file: config.config_file.as_ref().map(|p| p.display().to_string()),
        sources: config.sources.grouped(),
        variant: config.variant_of.clone(),
    }
}

/// Moves what was collected from the server instances into the report; returns the transcript.
fn finish_collected(r: &mut Report, c: Collected) -> Vec<Entry> {
    if let Some(spoken) = c.transport {
        r.settings.transport = spoken.into();
    }
    r.server.exits = c.exits.into_iter().map(Into::into).collect();
    r.server.stderr = c.stderr;
    r.server.stderr_bytes = c.stderr_bytes;
    r.wire = WireSummary {
        stats: c.stats.into(),
        server_requests: c.server_requests.into_iter().map(Into::into).collect(),
        notifications: c.notifications,
    };
    c.transcripts.into_iter().flatten().collect()
}

/// The exit code and its reason for a finished report: failing findings (those at or above
/// `--fail-on` and not accepted by the baseline) first, then stale baseline entries when they
/// fail the run, then an incomplete run, then "nothing verified".
fn decide_exit(report: &Report, config: &RunConfig) -> (i32, String) {
    let failing: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| config.judge.fail.fails(f))
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
    if !failing.is_empty() {
        return (
            exit_code::CONTRADICTIONS,
            format!(
                "{}{}",
                failing_in_words(&failing, config),
                accepted_note_after(true)
            ),
        );
    }
    if stale > 0 && config.judge.fail_on_stale_baseline {
        return (
            exit_code::CONTRADICTIONS,
            format!(
                "{stale} baseline entr{} matched no finding (stale; remove them from the baseline){accepted_note}",
                if stale == 1 { "y" } else { "ies" }
            ),
        );
    }
    let limits = limits::in_words(&report.limits_hit);
    if let Some(why) = &report.partial {
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
    (
        exit_code::OK,
        passing_in_words(report, config) + &accepted_note,
    )
}

/// What fails the run, in words: the contradicted hints and the other failing findings.
fn failing_in_words(failing: &[&Finding], config: &RunConfig) -> String {
    let contradicted: Vec<&&Finding> = failing
        .iter()
        .filter(|f| f.hint.is_some() && f.severity == Severity::Error)
        .collect();
    let tools: std::collections::BTreeSet<&str> = contradicted
        .iter()
        .filter_map(|f| f.tool.as_deref())
        .collect();
    let secrets = failing
        .iter()
        .filter(|f| crate::audit::about_secrets(f.audit))
        .count();
    let others = failing.len() - contradicted.len() - secrets;
    let mut parts = Vec::new();
    if !contradicted.is_empty() {
        parts.push(format!(
            "{} contradicted hint(s) in {} tool(s)",
            contradicted.len(),
            tools.len()
        ));
    }
    if secrets > 0 {
        parts.push(format!(
            "planted secrets handed on in {secrets} finding(s) (secret-access, exfiltration)"
        ));
    }
    if others > 0 {
        parts.push(format!(
            "{others} other finding(s) at or above {}",
            config.judge.fail.describe()
        ));
    }
    parts.join("; ")
}

/// The reason of a run that passes: the contradictions below `--fail-on` and the weak ones.
fn passing_in_words(report: &Report, config: &RunConfig) -> String {
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
    // Contradicted hints a baseline accepts are still contradicted: said so, not "no
    // contradiction".
    let accepted = report
        .findings
        .iter()
        .filter(|f| f.accepted.is_some() && f.hint.is_some() && f.severity == Severity::Error)
        .count();
    let accepted_note = if accepted > 0 {
        format!(" ({accepted} contradicted hint(s) accepted by the baseline)")
    } else {
        String::new()
    };
    // Planted secrets handed on (errors) that do not fail the run (below `--fail-on`, or
    // accepted by a baseline) are still said: "no contradiction" alone would hide them.
    let secrets = report
        .findings
        .iter()
        .filter(|f| crate::audit::about_secrets(f.audit) && f.severity == Severity::Error)
        .count();
    let weak_note = if secrets > 0 {
        format!(
            "{weak_note}; planted secrets handed on in {secrets} finding(s) (secret-access, exfiltration), not failing the run"
        )
    } else {
        weak_note
    };
    let exercised = report.coverage.tools_succeeded;
    if below > 0 {
        format!(
            "{below} contradicted hint(s) in {exercised} exercised tool(s), not failing the run (--fail-on {}){weak_note}",
            config.judge.fail.describe()
        )
    } else {
        format!(
            "no {}contradiction {}in {exercised} exercised tool(s){accepted_note}{weak_note}",
            if weak > 0 { "firm " } else { "" },
            if accepted > 0 {
                "outside the baseline "
            } else {
                ""
            }
        )
    }
}

/// How much an exit code outranks another when the default run and its variants end
/// differently: an interrupt, then what stopped a run (no sandbox, a harness error), then
/// contradictions, then nothing verified, then a clean run.
fn exit_rank(code: i32) -> u8 {
    match code {
        exit_code::INTERRUPTED_BY_SIGINT | exit_code::INTERRUPTED_BY_SIGTERM => 6,
        exit_code::SANDBOX_UNAVAILABLE => 5,
        exit_code::HARNESS => 4,
        exit_code::CONTRADICTIONS => 3,
        exit_code::NOTHING_VERIFIED => 2,
        exit_code::OK => 0,
        _ => 1,
    }
}

/// A baseline entry is stale only when no run matched it: the default run's and every
/// variant's findings are looked at together, the default run's report keeps the stale list,
/// and each run's exit is decided again where `--fail-on-stale-baseline` made it rest on
/// entries another run matched.
pub(super) fn baseline_across_variants(report: &mut Report, config: &RunConfig) {
    if report.variants.is_empty() || config.judge.baseline.is_none() {
        return;
    }
    let found: std::collections::BTreeSet<String> = report
        .every_run()
        .flat_map(|r| &r.findings)
        .map(|f| f.fingerprint.clone())
        .collect();
    let decided_again = |r: &mut Report, config: &RunConfig| {
        let finished = r.partial.is_none()
            && matches!(
                r.exit_code,
                exit_code::OK | exit_code::CONTRADICTIONS | exit_code::NOTHING_VERIFIED
            );
        if finished && config.judge.fail_on_stale_baseline {
            (r.exit_code, r.exit_reason) = decide_exit(r, config);
        }
    };
    if let Some(b) = &mut report.baseline {
        b.stale.retain(|e| !found.contains(&e.fingerprint));
    }
    decided_again(report, config);
    for v in &mut report.variants {
        if let Some(b) = &mut v.report.baseline {
            b.stale.clear();
        }
        if let Some(spec) = config.variants.iter().find(|s| s.name == v.name) {
            decided_again(&mut v.report, &config.for_variant(spec));
        }
    }
}

/// The exit code covers every variant: the one that outranks the others decides it, and its
/// reason says which variant (`variant read-only: 1 contradicted hint(s) in 1 tool(s)`).
pub(super) fn decide_exit_with_variants(report: &mut Report) {
    let worst = report
        .variants
        .iter()
        .filter(|v| exit_rank(v.report.exit_code) > exit_rank(report.exit_code))
        .max_by_key(|v| exit_rank(v.report.exit_code));
    if let Some(v) = worst {
        report.exit_reason = format!(
            "variant {}: {} (the default run: {}, exit {})",
            v.name, v.report.exit_reason, report.exit_reason, report.exit_code
        );
        report.exit_code = v.report.exit_code;
    }
}

/// `--check`: the scenario's `[expect]` decides the exit code (0 met, 1 unmet); the run's own
/// exit code and reason are kept in the report. Each variant's `[variants.expect]` is checked
/// against its own report, its unmet lines named with it.
pub(super) fn check_expectations(report: &mut Report, config: &RunConfig) {
    let expect = config.scenario.as_ref().and_then(|s| s.expect.as_ref());
    if expect.is_none() && config.variants.iter().all(|v| v.expect.is_none()) {
        return;
    }
    let mut unmet = expect
        .map(|e| crate::scenario::check(e, report))
        .unwrap_or_default();
    for spec in &config.variants {
        let Some(expect) = &spec.expect else { continue };
        match report.variants.iter().find(|v| v.name == spec.name) {
            Some(v) => unmet.extend(
                crate::scenario::check(expect, &v.report)
                    .into_iter()
                    .map(|line| format!("variant {}: {line}", spec.name)),
            ),
            None => unmet.push(format!("variant {}: not run", spec.name)),
        }
    }
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
