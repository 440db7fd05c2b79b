//! What the exercise and observe stages hand to attribution, the audits and the report:
//! every call made to every tool, how it ended and what was observed in its window
//! ([`observation`]), plus the observations that fell outside every call window (startup,
//! idle, shutdown). Audits read these records and nothing else. Calls and observations carry
//! no serialization of their own: the report writes them field by field.

use serde::Serialize;
use serde_json::Value;

pub mod observation;

pub use observation::{
    Carried, FileEffect, FileEffectKind, Mechanism, NetEvent, NetKind, ObjectKind, Observation,
    ProcessEvent, RefusedCall, SecretMove, SecretSighting, WriteAttempt, at_or_under, path_shape,
    write_key,
};

use crate::mcp::client::CallOutcome;

/// One call of a tool.
#[derive(Debug, Clone)]
pub struct CallRecord {
    /// 1 for the first call, 2.. for the identical repeats.
    pub number: usize,
    /// Which argument set a first call tried (1, 2, ..): failed first calls are retried with
    /// the next candidate; repeats carry the attempt that succeeded.
    pub attempt: usize,
    /// The arguments sent.
    pub arguments: Value,
    /// How it ended.
    pub outcome: CallOutcome,
    /// Milliseconds from the start of the run to the request.
    pub started_ms: u64,
    /// Milliseconds from the request to the response (or the timeout).
    pub duration_ms: u64,
    /// Milliseconds waited after the response until the server's processes were idle.
    pub settle_ms: u64,
    /// The same in microseconds, and what the observers cost (for benchmarks).
    pub timing: CallTiming,
    /// What was observed in the call's window.
    pub observations: Vec<Observation>,
    /// Garbage or unsolicited lines the server wrote during the call.
    pub wire_anomalies: usize,
    /// Earlier calls whose processes or threads were still running during this call's
    /// window: its observations may be theirs (attribution is then uncertain).
    pub concurrent_with: Vec<String>,
    /// The tools of `concurrent_with`.
    pub concurrent_tools: Vec<String>,
    /// Whether threads the server runs on its own (not started by any call) ran during this
    /// call's window (then listed in `concurrent_with` too).
    pub background_ran: bool,
    /// Every piece of evidence of this window was made by the call's own threads (the system
    /// calls behind it name them): other threads that ran did not do it.
    pub pinned_on_own_threads: bool,
    /// Every piece of evidence of this window was made by the call's own threads, whatever
    /// else ran (see `pinned_on_own_threads`, which is kept only where it ruled something out).
    pub own_threads_did_it: bool,
    /// Observations of this call that a replay of the tool alone, on a fresh server,
    /// reproduced (attribution confirmed), as descriptions.
    pub confirmed_by_replay: Vec<String>,
    /// Which replay confirmed them ("replay 2: show_note alone on a fresh server").
    pub confirmed_by: Option<String>,
    /// Writes of this call, by description, to a file the server made during the run that
    /// other tools' calls wrote too (its own state, or data several tools share): firm only
    /// once a replay of the tool (alone, or after the calls its state depends on) did it
    /// again, since the server may write it for whichever call comes when its timer or
    /// counter fires. Set before the replays.
    pub shared_state: Vec<String>,
    /// What the run's first call created that may be the server's first-call initialisation
    /// or start-up work, by description, when no replay could check it (the replay budget
    /// was spent, or the replay could not run): firm only once a replay confirms it is the
    /// tool's.
    pub unchecked_initialisation: Vec<String>,
    /// Observations of this call that are not plainly its tool's own change, by description:
    /// the server's per-call bookkeeping (a journal every tool appends to). Set before judging.
    pub categories: std::collections::BTreeMap<String, crate::finding::Category>,
    /// Arguments taken from what earlier calls returned: argument name → where the value
    /// came from ("create_task call 1: structuredContent.task.id").
    pub pooled: std::collections::BTreeMap<String, String>,
    /// Set on a call made because another tool's error or description asked for this one
    /// first (its number is 0: neither a first call nor a repeat).
    pub prerequisite_for: Option<String>,
    /// Set on a call made once the tool had succeeded, to try a riskier case of it: another
    /// operation its enum offers, a flag set the other way, an existing target instead of a
    /// new one (`"action: delete"`). Its number is 0: neither a first call nor a repeat.
    pub variant: Option<String>,
    /// The data labels its result carried on its `_meta` (see [`crate::mcp::labels`]).
    pub result_labels: Option<crate::mcp::labels::ResultLabels>,
    /// Its result held what the network observer's stand-in web site served (a page, a
    /// document) and its arguments did not: data fetched from the network went to the model.
    pub returned_fetched: bool,
    /// For a tool whose behaviour an argument selects: the values in force in this call
    /// (`action: read`), set before judging so that its evidence names them. Riskier cases
    /// name theirs in `variant`.
    pub selection: Option<String>,
    /// What the server resolved the tool to for this call's arguments (`tools/resolve`,
    /// asked in the call's window just before it), for a tool marked `resolve: true` on a
    /// server that announced the capability.
    pub resolution: Option<crate::mcp::resolve::Resolution>,
}

impl CallRecord {
    /// A first call with `arguments` that ended in `outcome`, nothing observed (the caller
    /// fills in timings, observations and numbering).
    pub fn bare(arguments: &Value, outcome: CallOutcome) -> CallRecord {
        CallRecord {
            number: 1,
            attempt: 1,
            arguments: arguments.clone(),
            outcome,
            started_ms: 0,
            duration_ms: 0,
            settle_ms: 0,
            timing: CallTiming::default(),
            observations: Vec::new(),
            wire_anomalies: 0,
            concurrent_with: Vec::new(),
            categories: Default::default(),
            shared_state: Vec::new(),
            unchecked_initialisation: Vec::new(),
            pinned_on_own_threads: false,
            own_threads_did_it: false,
            concurrent_tools: Vec::new(),
            background_ran: false,
            confirmed_by_replay: Vec::new(),
            confirmed_by: None,
            pooled: Default::default(),
            prerequisite_for: None,
            variant: None,
            result_labels: None,
            returned_fetched: false,
            selection: None,
            resolution: None,
        }
    }

    /// Whether observation `o` of this call may count against a hint. Verdicts rest on calls
    /// that succeeded; what a failed call's window showed counts only once it is shown to be
    /// the tool's: a replay of the tool alone on a fresh server did it again, or the call's
    /// own threads (or processes they started) made every piece and it is no write to what
    /// the server keeps for several tools (see [`CallRecord::shared_state`]: a counter the
    /// server flushes on the thread of whichever call is the twentieth). A tool that writes
    /// even when it fails is still a writer. The rest stays an observation of the call.
    pub fn counts(&self, o: &Observation) -> bool {
        let described = || o.describe();
        self.outcome.is_success()
            || self.confirmed_by_replay.contains(&described())
            || self.own_threads_did_it && !self.shared_state.contains(&described())
    }

    /// A short label: `call 1`, `repeat 2`.
    pub fn label(&self) -> String {
        if let Some(other) = &self.prerequisite_for {
            format!("call before {other}")
        } else if let Some(variant) = &self.variant {
            format!("variant ({variant})")
        } else {
            let mut said: Vec<String> = Vec::new();
            if self.number == 1 && self.attempt > 1 {
                said.push(format!("attempt {}", self.attempt));
            }
            said.extend(self.selection.clone());
            let base = if self.number == 1 {
                "call 1".to_string()
            } else {
                format!("repeat {}", self.number)
            };
            match said.is_empty() {
                true => base,
                false => format!("{base} ({})", said.join("; ")),
            }
        }
    }
}

/// Where the time of one call went, in microseconds.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CallTiming {
    /// From writing the request to parsing the response.
    pub response_us: u64,
    /// The settle period after the response.
    pub settle_us: u64,
    /// The observers' checkpoint after the settle period.
    pub observe_us: u64,
}

/// Everything done with one tool.
#[derive(Debug, Clone, Default)]
pub struct ToolRun {
    /// The calls, in order.
    pub calls: Vec<CallRecord>,
    /// Why the tool was not called, if it was not.
    pub skipped: Option<String>,
    /// Notes from argument synthesis.
    pub synthesis_notes: Vec<String>,
    /// Argument names given by the user.
    pub overridden: Vec<String>,
}

impl ToolRun {
    /// Whether at least one call succeeded.
    pub fn succeeded(&self) -> bool {
        self.calls.iter().any(|c| c.outcome.is_success())
    }

    /// The first call that counts: the successful attempt, or else the last one tried.
    pub fn first_call(&self) -> Option<&CallRecord> {
        self.calls
            .iter()
            .find(|c| c.number == 1 && c.outcome.is_success())
            .or_else(|| self.calls.iter().rfind(|c| c.number == 1))
    }

    /// The identical repeats of the first call.
    pub fn repeats(&self) -> impl Iterator<Item = &CallRecord> {
        self.calls.iter().filter(|c| c.number > 1)
    }

    /// Every observation that may count against a hint (see [`CallRecord::counts`]), with
    /// the call it belongs to.
    pub fn observations(&self) -> impl Iterator<Item = (&CallRecord, &Observation)> {
        self.all_observations().filter(|(c, o)| c.counts(o))
    }

    /// Every observation of every call, failed calls' included, with the call it belongs to.
    pub fn all_observations(&self) -> impl Iterator<Item = (&CallRecord, &Observation)> {
        self.calls
            .iter()
            .flat_map(|c| c.observations.iter().map(move |o| (c, o)))
    }

    /// Observations of failed calls that could be evidence but are not shown to be the
    /// tool's: reported, not counted.
    pub fn uncounted(&self) -> impl Iterator<Item = (&CallRecord, &Observation)> {
        self.all_observations()
            .filter(|(c, o)| o.is_evidential() && !c.counts(o))
    }
}

/// A window that belongs to no call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// From launch to the end of the tool listing.
    Startup,
    /// Between calls.
    Idle,
    /// In the first call of the run, but what the first call of any tool does on a fresh
    /// server (lazy initialisation), as a replay with a different tool showed.
    FirstCall,
    /// From the last call to the end of the server.
    Shutdown,
    /// The control requests made after the greeting (`ping`, `tools/list`, a call of a tool
    /// the server does not have): requests that run no tool.
    Control,
    /// In a tool's call, but what the server also did for the control requests: its
    /// per-request bookkeeping, reported once and never any tool's evidence.
    PerRequest,
    /// In a tool's call, but a write to state the server keeps for several tools that a
    /// replay showed is not the tool's: the server writes it for whichever call is open when
    /// its timer or counter fires.
    ServerState,
}

impl Phase {
    /// The kebab-case name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Startup => "startup",
            Phase::Idle => "idle",
            Phase::FirstCall => "first-call",
            Phase::Shutdown => "shutdown",
            Phase::Control => "control",
            Phase::PerRequest => "per-request",
            Phase::ServerState => "server-state",
        }
    }
}

/// One control request: a request that runs no tool, made to see what the server does on
/// every request.
#[derive(Debug, Clone, Serialize)]
pub struct ControlRequest {
    /// The method (`ping`, `tools/list`, `tools/call`).
    pub method: String,
    /// For `tools/call`: the tool name asked for, one the server does not list.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// How the server answered (`answered`, `json-rpc error -32602 …`, `no answer`), or why
    /// it was not sent.
    pub outcome: String,
}

/// One nested run made to decide attribution: a tool called on a fresh server.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayRecord {
    /// Its number in the report (1, 2, …), as evidence cites it.
    pub id: usize,
    /// The tools it called, in order (the tool replayed last, after the calls its state
    /// depends on).
    pub tools: Vec<String>,
    /// Why: which attribution it was to decide.
    pub purpose: String,
    /// How it ended: what it showed, or why it could not run.
    pub outcome: String,
    /// Its duration.
    pub duration_ms: u64,
}

impl ReplayRecord {
    /// One line for reports, after `replay N: `: `create_note then show_note on a fresh
    /// server, 912 ms: <purpose> (<outcome>)`.
    pub fn summary(&self) -> String {
        format!(
            "{} on a fresh server, {} ms: {} ({})",
            self.tools.join(" then "),
            self.duration_ms,
            self.purpose,
            self.outcome
        )
    }
}

/// Observations outside every call window.
#[derive(Debug, Clone)]
pub struct PhaseObservation {
    /// The phase.
    pub phase: Phase,
    /// The tool whose call came last before it, for idle windows.
    pub after_tool: Option<String>,
    /// The tool whose call started the threads or processes whose system calls did it, when
    /// that is one tool (a timer a call left, or a pool worker it made and a later call
    /// handed a job): replays ask it first, then `after_tool`.
    pub started_by: Option<String>,
    /// What was seen.
    pub observation: Observation,
}

impl PhaseObservation {
    /// Each of `observations`, seen in `phase` in a window that follows no tool's call and
    /// that no thread of a call made.
    pub fn all_in(phase: Phase, observations: Vec<Observation>) -> Vec<Self> {
        observations
            .into_iter()
            .map(|observation| PhaseObservation {
                started_by: None,
                phase,
                after_tool: None,
                observation,
            })
            .collect()
    }
}

/// What the observers could see in this run; audits must not judge what nobody watched.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    /// Whether file effects were observed (and where).
    pub files: Option<String>,
    /// Whether network activity was observed (and how).
    pub network: Option<String>,
}
