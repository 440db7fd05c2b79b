//! The render stage's input: [`Report`], a finished account of one run (server, sandbox,
//! coverage, per-tool calls and verdicts, findings), and the renderers ([`text`], [`json`],
//! [`sarif`] with its [`anchor`]s, [`junit`], [`markdown`], [`html`] and [`suggest`]).
//! Renderers only format; every decision was made before a `Report` exists.

pub mod anchor;
pub mod annotations;
pub mod html;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod sarif;
pub mod status;
pub mod suggest;
pub mod text;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::audit::suggest::SupportedHint;
use crate::baseline::BaselineOutcome;
use crate::evidence::{CallRecord, PhaseObservation};
use crate::finding::{Finding, HintVerdict, Suggestion, Verdict};
use crate::mcp::client::ServerIdentity;

/// One run, finished.
#[derive(Debug, Clone)]
pub struct Report {
    /// hintcheck's version.
    pub hintcheck_version: String,
    /// Start of the run, milliseconds since the Unix epoch.
    pub started_unix_ms: u64,
    /// Wall time of the run.
    pub duration_ms: u64,
    /// The server.
    pub server: ServerSummary,
    /// What was enforced.
    pub sandbox: SandboxSummary,
    /// What was observed and exercised.
    pub coverage: CoverageSummary,
    /// Per tool, in listing order.
    pub tools: Vec<ToolReport>,
    /// Observations outside every call window.
    pub phases: Vec<PhaseObservation>,
    /// The replays made to decide attribution, in order.
    pub replays: Vec<crate::evidence::ReplayRecord>,
    /// The control requests (requests that run no tool) made after the greeting: an effect
    /// they also produce is the server's per-request bookkeeping, never a tool's.
    pub controls: Vec<crate::evidence::ControlRequest>,
    /// Every finding.
    pub findings: Vec<Finding>,
    /// Wire statistics.
    pub wire: WireSummary,
    /// The settings in force.
    pub settings: Settings,
    /// Paths seeded into the workspace.
    pub seeded: Vec<String>,
    /// The fake credentials planted (none with `--no-canaries`).
    pub canaries: Vec<PlantedCanary>,
    /// Notes about the run itself (observer limits, cleanup problems).
    pub notes: Vec<String>,
    /// The exit code hintcheck returns.
    pub exit_code: i32,
    /// Why, in one line.
    pub exit_reason: String,
    /// Set when the run stopped early (timeout, interruption).
    pub partial: Option<String>,
    /// What the baseline accepted, when one was given.
    pub baseline: Option<BaselineOutcome>,
    /// The scenario's expectations, when `--check` asked for them.
    pub expectations: Option<ExpectationOutcome>,
    /// Harness limits the run ran into (a line cap, a timeout), each with what raises it.
    pub limits_hit: Vec<LimitHit>,
    /// Where the run's time went.
    pub timing: Timing,
    /// The same server run in other configurations (`--variant`, `[[variants]]`), each a
    /// report of its own.
    pub variants: Vec<VariantReport>,
}

/// A configuration run beside the default one: its name, what it changed, its report.
#[derive(Debug, Clone)]
pub struct VariantReport {
    /// Its name.
    pub name: String,
    /// What it changed (`READ_ONLY=1`, `server args: --read-only`).
    pub settings: Vec<String>,
    /// Its run's report.
    pub report: Box<Report>,
}

/// A fake credential the run planted: what it imitates and where it was put (its value is
/// the run's own and never reported).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PlantedCanary {
    /// `ssh-private-key`, `aws-secret-access-key`, `github-token`, …
    pub kind: String,
    /// `~/.ssh/id_ed25519`, `$WORKSPACE/.env`, `$GITHUB_TOKEN`, …
    pub place: String,
}

/// Where a run's time went, stage by stage, in microseconds (a nested run's own stages are
/// inside the `replays_us` of the run that made it).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Timing {
    /// The scratch directories, the seeded workspace, the sandbox's placement.
    pub prepare_us: u64,
    /// The observers, the sandbox, the server's start and its greeting.
    pub launch_us: u64,
    /// The tool listing, the wait for start-up work to settle, the background probe.
    pub inventory_us: u64,
    /// The control requests, every call with its window, the wait for late effects, the
    /// server's stop.
    pub explore_us: u64,
    /// Of `explore_us`: the control requests and their window.
    pub controls_us: u64,
    /// Of `explore_us`: waiting for the calls' responses.
    pub calls_us: u64,
    /// Of `explore_us`: the calls' windows held open after their responses.
    pub settle_us: u64,
    /// Of `explore_us`: the observers' checkpoints after each call.
    pub observe_us: u64,
    /// Of `explore_us`: after the last call, the wait for what calls left running.
    pub late_wait_us: u64,
    /// Of `explore_us`: the server's stop and the last walk of its files.
    pub shutdown_us: u64,
    /// The replays made to decide attribution.
    pub replays_us: u64,
    /// The audits and the coverage.
    pub judge_us: u64,
    /// Call and control windows closed because the server's processes were proven quiet
    /// (every thread waiting for an outside event), and those closed without such a proof
    /// (after the idle period, `--settle`, or at `--settle-max`).
    pub windows_proven_quiet: u32,
    pub windows_closed_by_idle_period: u32,
}

/// A harness limit the run ran into.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct LimitHit {
    /// The limit and its value, in words (`the line cap (4096 bytes)`).
    pub limit: String,
    /// What ran into it.
    pub seen: String,
    /// The flag (and setting) that raises it; `None` for a fixed limit.
    pub raise_with: Option<String>,
}

impl LimitHit {
    /// `the line cap (4096 bytes), raise it with --max-line-bytes or [run] max_line_bytes`.
    pub fn short(&self) -> String {
        match &self.raise_with {
            Some(flag) => format!("{}, raise it with {flag}", self.limit),
            None => format!("{}, which is fixed", self.limit),
        }
    }
}

/// The check of a report against its scenario's `[expect]`.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ExpectationOutcome {
    /// The exit code the run had before the check decided it.
    pub run_exit_code: i32,
    /// The run's own exit reason.
    pub run_exit_reason: String,
    /// One line per unmet expectation (empty: all met).
    pub unmet: Vec<String>,
}

/// What isolation was in force, in the report's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSummary {
    /// `full`, `partial` or `none`.
    pub level: String,
    /// What was asked for: `required`, `best-effort` or `off`.
    pub requested: String,
    /// One sentence for humans.
    pub summary: String,
    /// What was enforced.
    pub enforced: Vec<String>,
    /// What was not enforced.
    pub not_enforced: Vec<String>,
}

/// How a server process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerExit {
    /// Exit code, when it exited.
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    pub signal: Option<i32>,
    /// How the run got it to stop: `exited`, `stdin-closed`, `terminated`, `killed`.
    pub how: String,
    /// Processes of the run still alive after the server ended, killed by the sweep.
    pub stragglers_killed: Vec<String>,
}

/// What one observer covers, for the coverage section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObserverSummary {
    /// The observer's name.
    pub name: String,
    /// What it watches.
    pub covers: String,
    /// What it cannot see.
    pub blind_spots: Vec<String>,
}

/// Line counts of the wire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WireStats {
    /// Lines sent to the server.
    pub sent: u64,
    /// Lines received from the server.
    pub received: u64,
    /// Received lines that were not well-formed JSON-RPC messages.
    pub garbage: u64,
    /// Well-formed responses whose id matched no outstanding request.
    pub unknown_id: u64,
    /// Transcript entries not kept because the transcript was full (still counted here).
    pub dropped_entries: u64,
}

/// A request the server sent, and what the run did with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRequest {
    /// Its transcript entry.
    pub seq: u64,
    /// The method.
    pub method: String,
    /// What the run answered (`result`, `error -32601`, `not answered: …`).
    pub answer: String,
}

/// The server as seen by the run.
#[derive(Debug, Clone)]
pub struct ServerSummary {
    /// The command as given (placeholders substituted).
    pub command: Vec<String>,
    /// What the handshake learned.
    pub identity: Option<ServerIdentity>,
    /// Why the server could not be started or greeted, if so.
    pub start_error: Option<String>,
    /// How each server process ended (more than one after restarts).
    pub exits: Vec<ServerExit>,
    /// How often the server was restarted after a crash or a hung call.
    pub restarts: usize,
    /// The kept part of stderr.
    pub stderr: String,
    /// Total stderr bytes.
    pub stderr_bytes: u64,
    /// SHA-256 over the tool definitions.
    pub tools_sha256: Option<String>,
    /// From the launch (sandbox set-up included) to the end of the first handshake, in µs.
    pub startup_us: Option<u64>,
}

/// Coverage of the run.
#[derive(Debug, Clone, Default)]
pub struct CoverageSummary {
    /// The observers and what they see.
    pub observers: Vec<ObserverSummary>,
    /// Whether file effects were observed.
    pub files_observed: bool,
    /// Whether network activity was observed.
    pub network_observed: bool,
    /// Tools listed (usable).
    pub tools_listed: usize,
    /// Tools with at least one successful call.
    pub tools_succeeded: usize,
    /// Tools called whose calls all failed.
    pub tools_failed: usize,
    /// Tools skipped on purpose.
    pub tools_skipped: usize,
    /// Tools never called (run stopped, server could not be restarted).
    pub tools_not_called: usize,
    /// Calls made.
    pub calls: usize,
    /// Set when the tool listing was incomplete.
    pub inventory_incomplete: Option<String>,
    /// Threads of the server that ran while no call was in flight (background workers).
    pub background_threads: usize,
    /// The tools that were called and never succeeded, each with how its last call ended.
    /// Values the explorer learned from responses (ids, names, tokens) for later calls.
    pub values_learned: usize,
    pub unreached: Vec<Unreached>,
}

/// A tool whose calls all failed: what its last call answered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Unreached {
    /// The tool.
    pub tool: String,
    /// How its last call ended (`isError`, `error-like`, `json-rpc error`, `timeout`, ...).
    pub outcome: String,
    /// What it said, shortened.
    pub said: Option<String>,
    /// What the explorer believes was missing (from the last error).
    pub missing: Option<String>,
    /// Whether that is something this machine cannot give (a network service, a program
    /// that is not installed, a browser, credentials): such tools are counted apart.
    pub unavailable_here: bool,
}

impl Unreached {
    /// The entry for a tool whose calls are `calls`, when none succeeded.
    pub fn of(tool: &str, calls: &[crate::evidence::CallRecord]) -> Option<Unreached> {
        use crate::mcp::client::CallOutcome;
        if calls.iter().any(|c| c.outcome.is_success()) {
            return None;
        }
        let last = calls.last()?;
        let said = last.outcome.said();
        // What was missing: something this machine cannot give, if any attempt's error says
        // so (a later attempt's "not found" is often only a worse guess), else the last
        // error's reading.
        let text_of = |o: &CallOutcome| match o {
            CallOutcome::ToolError { text, .. } | CallOutcome::ErrorLike { text, .. } => {
                Some(text.clone())
            }
            CallOutcome::RpcError { message, .. } => Some(message.clone()),
            _ => None,
        };
        let missing = calls
            .iter()
            .filter_map(|c| text_of(&c.outcome))
            .filter_map(|t| crate::exercise::missing::diagnose(&t))
            .find(|m| m.unavailable_here)
            .or_else(|| said.as_deref().and_then(crate::exercise::missing::diagnose));
        Some(Unreached {
            tool: tool.to_string(),
            outcome: last.outcome.label().to_string(),
            said: said.map(|s| s.chars().take(200).collect()),
            unavailable_here: missing.as_ref().is_some_and(|m| m.unavailable_here),
            missing: missing.map(|m| m.what),
        })
    }
}

/// Wire statistics.
#[derive(Debug, Clone, Default)]
pub struct WireSummary {
    /// Line counts.
    pub stats: WireStats,
    /// Requests the server sent us.
    pub server_requests: Vec<ServerRequest>,
    /// Notifications received, per method.
    pub notifications: BTreeMap<String, usize>,
}

/// Settings in force.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Calls per tool.
    pub repeat: usize,
    /// Synthesis seed.
    pub seed: u64,
    /// Settle period.
    pub settle_ms: u64,
    /// Per-call timeout.
    pub call_timeout_ms: u64,
    /// Era choice.
    pub era: String,
    /// Roots offered.
    pub roots: String,
    /// How the server spoke MCP (`stdio`, `http`).
    pub transport: String,
    /// The explorer's domain packs in force (`git, spreadsheets, sql`, or `none`).
    pub packs: String,
    /// What fails the run: the lowest severity and the categories excepted.
    pub fail: crate::finding::FailRule,
    /// The config file read, if one was.
    pub config_file: Option<String>,
    /// The options set other than by default, grouped by where they came from (the
    /// command line, the scenario, the config file), as they were named there.
    pub sources: Vec<(String, Vec<String>)>,
    /// The variant this run is of (`--variant`, `[[variants]]`), `None` for the default run:
    /// its findings' fingerprints carry the name.
    pub variant: Option<String>,
}

impl Settings {
    /// `--timeout from the command line; [run] repeat, [run] call_timeout from the scenario
    /// s.toml`, or `None` when every option has its default.
    pub fn sources_line(&self) -> Option<String> {
        let groups: Vec<String> = self
            .sources
            .iter()
            .map(|(from, names)| format!("{} from {from}", names.join(", ")))
            .collect();
        (!groups.is_empty()).then(|| groups.join("; "))
    }
}

/// One tool.
#[derive(Debug, Clone)]
pub struct ToolReport {
    /// Name.
    pub name: String,
    /// Title.
    pub title: Option<String>,
    /// Description (shortened).
    pub description: Option<String>,
    /// Position in the listing.
    pub index: usize,
    /// SHA-256 of the definition.
    pub definition_sha256: String,
    /// Declared hints, described (`true`, `absent`, …), by wire name.
    pub declared: BTreeMap<&'static str, String>,
    /// Why it was not called.
    pub skipped: Option<String>,
    /// The arguments used.
    pub arguments: Value,
    /// Synthesis notes.
    pub synthesis_notes: Vec<String>,
    /// Argument names given by the user.
    pub overridden: Vec<String>,
    /// The calls.
    pub calls: Vec<CallRecord>,
    /// One verdict per hint.
    pub verdicts: Vec<HintVerdict>,
    /// Suggestions for absent hints (and for the write hints of a read-only tool that
    /// wrote).
    pub suggestions: Vec<Suggestion>,
    /// The value the observations support for every hint (`hintcheck suggest`).
    pub supported: Vec<SupportedHint>,
    /// A verdict per data label the tool declared (or its results carried).
    pub labels: Vec<crate::audit::data_labels::LabelVerdict>,
    /// The data labels the observations support (`hintcheck suggest`).
    pub labels_supported: Vec<crate::audit::data_labels::SupportedLabel>,
    /// What each value of an argument that selects the tool's behaviour did (`action:
    /// delete` destructive, `action: read` read-only).
    pub by_argument: Vec<crate::audit::by_argument::ArgumentBehaviour>,
    /// Verdicts on the hints the server resolved with `tools/resolve` for the calls'
    /// arguments, where they are less cautious than the static ones (the JSON report lists
    /// them in `verdicts[]` with their source).
    pub resolved: Vec<HintVerdict>,
    /// The tool's definition as received (for the SARIF tool inventory).
    pub definition: Value,
}

impl ServerSummary {
    /// A string field of `serverInfo` (`name`, `version`), when the server sent one.
    pub fn info(&self, key: &str) -> Option<&str> {
        self.identity
            .as_ref()
            .and_then(|i| i.server_info.as_ref())
            .and_then(|v| v.get(key))
            .and_then(|v| v.as_str())
    }
}

impl CoverageSummary {
    /// "N tool(s) listed: …; M call(s)", the coverage in one sentence.
    pub fn describe(&self) -> String {
        format!(
            "{} tool(s) listed: {} with a successful call, {} with only failed calls{}, {} skipped, {} not called; {} call(s) in all",
            self.tools_listed,
            self.tools_succeeded,
            self.tools_failed,
            match self.unreached.iter().filter(|u| u.unavailable_here).count() {
                0 => String::new(),
                n => format!(" ({n} of them need what this machine cannot give)"),
            },
            self.tools_skipped,
            self.tools_not_called,
            self.calls
        )
    }
}

impl Report {
    /// The finding about `hint` of tool `tool`, if there is one.
    pub fn hint_finding(&self, tool: &str, hint: crate::mcp::tool::HintName) -> Option<&Finding> {
        self.findings.iter().find(|f| {
            f.tool.as_deref() == Some(tool) && f.hint == Some(hint) && f.resolved_for.is_none()
        })
    }

    /// The finding about verdict `v` of tool `tool`: its static hint's, or its resolved
    /// hint's.
    pub fn verdict_finding(&self, tool: &str, v: &HintVerdict) -> Option<&Finding> {
        match v.resolved_for {
            Some(_) => self.resolved_finding(tool, v),
            None => self.hint_finding(tool, v.hint),
        }
    }

    /// The finding about the resolved hint of verdict `v` of tool `tool` (see
    /// [`ToolReport::resolved`]), if there is one.
    pub fn resolved_finding(&self, tool: &str, v: &HintVerdict) -> Option<&Finding> {
        self.findings.iter().find(|f| {
            f.tool.as_deref() == Some(tool)
                && f.hint == Some(v.hint)
                && f.audit == v.audit
                && f.resolved_for.is_some()
                && f.resolved_for == v.resolved_for
        })
    }

    /// The finding about data label `label` of tool `tool`, if there is one.
    pub fn label_finding(&self, tool: &str, label: &str) -> Option<&Finding> {
        let prefix = format!("{tool} declares {label}: ");
        self.findings.iter().find(|f| {
            f.audit == crate::audit::data_labels::META.id
                && f.tool.as_deref() == Some(tool)
                && f.message.starts_with(&prefix)
        })
    }

    /// Each tool's definition hash, by name.
    pub fn definition_hashes(&self) -> BTreeMap<&str, &str> {
        self.tools
            .iter()
            .map(|t| (t.name.as_str(), t.definition_sha256.as_str()))
            .collect()
    }
}

impl Report {
    /// This run, then each variant's run (see [`Report::variants`]).
    pub fn every_run(&self) -> impl Iterator<Item = &Report> {
        std::iter::once(self).chain(self.variants.iter().map(|v| &*v.report))
    }
}

impl ToolReport {
    /// Whether any hint is contradicted, a resolved one included.
    pub fn contradicted(&self) -> bool {
        self.all_verdicts()
            .any(|v| v.verdict == Verdict::Contradicted)
    }

    /// The verdicts on its static hints, then those on the hints the server resolved.
    pub fn all_verdicts(&self) -> impl Iterator<Item = &HintVerdict> {
        self.verdicts.iter().chain(&self.resolved)
    }
}

/// Exit codes, documented in one place (also in the README).
pub mod exit_code {
    /// The run completed and no finding reached `--fail-on` (default: no declared hint was
    /// contradicted).
    pub const OK: i32 = 0;
    /// At least one finding not accepted by the baseline reached `--fail-on` (default: a
    /// declared hint was contradicted), or the baseline has stale entries and
    /// `--fail-on-stale-baseline` was given.
    pub const CONTRADICTIONS: i32 = 1;
    /// Usage or input error (bad flag, unreadable scenario).
    pub const USAGE: i32 = 2;
    /// Harness error: the server could not be started or greeted, or the report could not be
    /// written. Errors outrank findings.
    pub const HARNESS: i32 = 3;
    /// Nothing was verified: no tool, or no call succeeded. Never looks clean.
    pub const NOTHING_VERIFIED: i32 = 4;
    /// The sandbox was required (the default) but could not be set up; nothing was started.
    pub const SANDBOX_UNAVAILABLE: i32 = 5;
    /// SIGINT interrupted the run (128 + 2); the report written is partial.
    pub const INTERRUPTED_BY_SIGINT: i32 = 130;
    /// SIGTERM interrupted the run (128 + 15); the report written is partial.
    pub const INTERRUPTED_BY_SIGTERM: i32 = 143;
}

/// What a person needs on stderr when the server could not be started or greeted, whatever
/// the report's format: the server's last stderr lines (the cause is in the exit reason).
pub fn start_failure_detail(r: &Report) -> Vec<String> {
    if r.server.start_error.is_none() || r.server.stderr.trim().is_empty() {
        return Vec::new();
    }
    let lines: Vec<&str> = r
        .server
        .stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let tail = &lines[lines.len().saturating_sub(8)..];
    let mut out = vec![format!(
        "the server's last stderr line{}:",
        if tail.len() == 1 { "" } else { "s" }
    )];
    out.extend(
        tail.iter()
            .map(|l| format!("  {}", crate::mcp::tool::shorten(l, 240))),
    );
    if let Some(why) = missing_native_build(&r.server.stderr) {
        out.push(why.to_string());
    }
    out
}

/// What a server's stderr says when a Node package's native addon was never built or
/// downloaded (`bindings`' "Could not locate the bindings file", node-gyp-build's "No native
/// build was found", a `.node` module not found): installs run npm with `--ignore-scripts`,
/// so such a package cannot start here. The explanation, when it does.
fn missing_native_build(stderr: &str) -> Option<&'static str> {
    let native_missing = stderr.contains("Could not locate the bindings file")
        || stderr.contains("No native build was found")
        || (stderr.contains("Cannot find module") && stderr.contains(".node'"));
    native_missing.then_some(
        "a native addon of the server was never built: hintcheck installs npm packages with \
         --ignore-scripts (no package code runs at install time), so a package that compiles \
         or downloads its binary then (sqlite3, better-sqlite3) cannot start here",
    )
}

#[cfg(test)]
mod tests {
    use super::missing_native_build;

    #[test]
    fn a_native_addon_never_built_is_explained() {
        // mcp-sqlite 1.0.9 (npm), its sqlite3 dependency installed without scripts.
        let sqlite3 = "/w/node_modules/bindings/bindings.js:135\n  throw err;\n  ^\n\nError: \
                       Could not locate the bindings file. Tried:\n → /w/node_modules/sqlite3/\
                       build/node_sqlite3.node\n";
        assert!(missing_native_build(sqlite3).is_some_and(|w| w.contains("--ignore-scripts")));
        let gyp_build = "Error: No native build was found for platform=linux arch=x64";
        assert!(missing_native_build(gyp_build).is_some());
        assert_eq!(
            missing_native_build("Error: ENOENT: no such file 'app.db'"),
            None
        );
    }
}
