//! The explorer's host: the running server and the observers around it. It starts the server
//! when none runs (counting restarts), makes each call and observes its window (the process
//! tree, settling, the recorder's checkpoint, threads that earlier calls left running, the
//! server's background threads), closes the time between calls, and stops a server that broke.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::watch;

use super::collect::RunLog;
use super::nested;
use super::server::{
    Live, RunContext, Stop, limit_reason, probe_background, start_server, stop_server,
};
use crate::evidence::Observation;
use crate::evidence::{CallRecord, CallTiming, ControlRequest, Phase, PhaseObservation};
use crate::mcp::client::CallOutcome;
use crate::mcp::tool::ToolDecl;
use crate::observe::Recorder;
use crate::observe::activity::{ran_between, settle};
use crate::observe::quiet::{Held, Horizon};
use crate::sandbox::SandboxLevel;
use crate::sandbox::tree::ProcessTree;

use crate::exercise::explore::{Host, ObservedCall};
use crate::observe::ThreadPin;

/// The call timeout of a tool that says it waits for something: long enough for a tool that
/// answers when it has an answer, short enough not to hold the run when nothing comes.
const LONG_POLL_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a server that let a call time out gets to answer a `ping`.
const PING_PATIENCE: Duration = Duration::from_secs(1);

/// How long each control request may take.
const CONTROL_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest wait for a `tools/resolve` answer before the call goes out without it.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(2);

/// Above this many tools the listing is not asked for again as a control (its answer is the
/// whole list once more).
const MAX_TOOLS_FOR_LIST_CONTROL: usize = 1000;

/// A tool name the server does not list, for the control call: a plausible one (never a
/// word that names hintcheck), from the run's vocabulary.
fn unknown_tool_name(seed: u64, tools: &[ToolDecl]) -> String {
    let term = crate::workspace::vocab::Vocabulary::of(seed).term();
    ["summarize", "archive", "export", "sync"]
        .iter()
        .map(|verb| format!("{verb}_{term}"))
        .chain((2..).map(|n| format!("summarize_{term}_{n}")))
        .find(|name| !tools.iter().any(|t| t.name == *name))
        .unwrap_or_default()
}

/// Start-up activity has settled after this long without any file or network activity.
const STARTUP_QUIET: Duration = Duration::from_millis(100);

/// How often the observers are read while start-up activity settles.
const QUIET_STEP: Duration = Duration::from_millis(25);

/// How often the server's process tree is looked at for a proof of quiet while its start-up
/// activity settles.
const LOOK_STEP: Duration = Duration::from_millis(2);

/// How long the background probe watches for threads that run while no call is in flight;
/// a start-up wait that proves the tree quiet for this long makes the probe unnecessary.
pub(super) const BACKGROUND_PROBE: Duration = Duration::from_millis(200);

/// What waiting for a fresh server's start-up activity to settle showed.
pub(super) struct StartupWait {
    /// What the server did meanwhile: start-up work, not any tool's.
    pub(super) observations: Vec<Observation>,
    /// How long the wait took.
    pub(super) took: Duration,
    /// Whether it settled (else the bound, `--startup-quiet`, ended it).
    pub(super) settled: bool,
    /// Whether it settled by a proof that the tree is quiet for [`STARTUP_QUIET`] and
    /// [`BACKGROUND_PROBE`]: no thread can then run on its own before that, and the
    /// background probe is not needed.
    pub(super) proven: bool,
}

impl StartupWait {
    /// A note for the report when the wait was more than the quiet period itself.
    pub(super) fn note(&self, bound: Duration) -> Option<String> {
        let active = self
            .observations
            .iter()
            .any(|o| !matches!(o, Observation::Process(_)));
        if self.settled && !active {
            return None;
        }
        Some(if self.settled {
            format!(
                "the server's start-up activity settled {} ms after the greeting; what it did until then is reported as start-up work, not the first tool's",
                self.took.as_millis()
            )
        } else {
            format!(
                "the server's start-up activity had not settled after {} ms (--startup-quiet {} ms): it keeps writing or sending on its own, and the first call went ahead",
                self.took.as_millis(),
                bound.as_millis()
            )
        })
    }
}

/// Waits, after a server's greeting, until its process tree is proven quiet for
/// [`STARTUP_QUIET`] and then [`BACKGROUND_PROBE`] (see [`crate::observe::quiet`]: the
/// quiet period and the background probe that would follow it could see nothing), or it
/// has had no file or network activity for [`STARTUP_QUIET`] and no worker thread sleeps
/// until a deadline within the bound (`--startup-quiet`, within the run's deadline), so
/// that work it started on its own (an update check, an index sync) does not land in the
/// first call's window. A server that never settles (a heartbeat) costs the bound, not more.
pub(super) async fn settle_start(
    recorder: &mut Recorder,
    ctx: &RunContext<'_>,
    live: &mut Live,
) -> StartupWait {
    let started = Instant::now();
    let hold = ctx.config.waits.hold_before_calls;
    let bound = ctx
        .config
        .waits
        .startup_quiet
        .max(hold)
        .min(ctx.deadline.saturating_duration_since(started));
    let mut wait = StartupWait {
        observations: Vec::new(),
        took: Duration::ZERO,
        settled: true,
        proven: false,
    };
    if bound.is_zero() {
        return wait;
    }
    let tree = live.process.pid().map(ProcessTree::new);
    let mut quiet_since = started;
    let mut next_read = started + QUIET_STEP;
    loop {
        tokio::time::sleep(if tree.is_some() {
            LOOK_STEP
        } else {
            QUIET_STEP
        })
        .await;
        let now = Instant::now();
        wait.took = started.elapsed();
        if let Some(tree) = &tree
            && wait.took >= hold
            && live.quiet.look(
                tree,
                Horizon::every_thread(STARTUP_QUIET + BACKGROUND_PROBE),
            )
        {
            wait.observations.extend(recorder.checkpoint());
            recorder.take_pins();
            wait.proven = true;
            return wait;
        }
        if now < next_read {
            continue;
        }
        next_read = now + QUIET_STEP;
        let seen = recorder.checkpoint();
        recorder.take_pins();
        if seen.iter().any(|o| !matches!(o, Observation::Process(_))) {
            quiet_since = now;
        }
        wait.observations.extend(seen);
        // A worker thread that sleeps until its part of the start-up work is still to come.
        let worker_due = tree.as_ref().is_some_and(|t| {
            live.quiet
                .worker_due_within(t, bound.saturating_sub(wait.took))
        });
        if now.duration_since(quiet_since) >= STARTUP_QUIET && wait.took >= hold && !worker_due {
            return wait;
        }
        if wait.took >= bound || ctx.must_stop().is_some() {
            wait.settled = false;
            return wait;
        }
    }
}

/// The server of a run, as the explorer uses it.
pub(super) struct ServerHost<'r, 'c> {
    pub(super) ctx: &'r RunContext<'c>,
    pub(super) sandbox_level: Option<SandboxLevel>,
    pub(super) recorder: &'r mut Recorder,
    pub(super) log: &'r mut RunLog,
    pub(super) live: Option<Live>,
    pub(super) restarts: usize,
    pub(super) phases: Vec<PhaseObservation>,
    /// Threads that ran while no call was in flight.
    pub(super) background: Vec<u32>,
    pub(super) idle_sample: Option<std::collections::HashMap<u32, u64>>,
    /// (owner call, tool, task id) of processes and threads started by calls, while they live.
    pub(super) lingering: Vec<(String, String, u32)>,
    /// The tool whose call was in flight when a watchdog ended the server.
    pub(super) limit_during: Option<String>,
    /// Threads of the sandbox's own processes above the server's (init, wrapper).
    pub(super) skip: usize,
    /// Isolated runs kept going at the same time.
    pub(super) side_by_side: usize,
    /// Tools that say they wait for something (`wait_for_event`, "long-polls until …").
    pub(super) long_pollers: std::collections::BTreeSet<String>,
    /// Tools marked `resolve: true`: before each of their calls, where the server announced
    /// `tools.resolve`, their annotations for the call's arguments are asked.
    pub(super) resolving: std::collections::BTreeSet<String>,
    pub(super) notes: Vec<String>,
}

impl ServerHost<'_, '_> {
    /// The control requests: once after the greeting, requests that run no tool (`ping`,
    /// the first page of `tools/list`, a call of a tool the server does not list), in one
    /// window observed like a call's. What the server does for them it does on every
    /// request: those effects go to the phases as [`Phase::Control`], and the same effects
    /// in tools' calls are its bookkeeping, not the tools'. Returns what was asked and how
    /// the server answered. A server the controls broke is replaced before the first call.
    pub(super) async fn controls(&mut self, tools: &[ToolDecl]) -> Vec<ControlRequest> {
        let config = self.ctx.config;
        if self.ctx.must_stop().is_some() {
            return Vec::new();
        }
        let Some(l) = self.live.as_mut() else {
            return Vec::new();
        };
        let tree = l.process.pid().map(ProcessTree::new);
        let before = tree.map(|t| t.tasks()).unwrap_or_default();
        let timeout = CONTROL_TIMEOUT
            .min(self.ctx.deadline.saturating_duration_since(Instant::now()))
            .max(Duration::from_millis(1));
        let unknown = unknown_tool_name(config.seed, tools);
        let mut asked = Vec::new();
        for (method, params, tool) in [
            ("ping", json!({}), None),
            ("tools/list", json!({}), None),
            (
                "tools/call",
                json!({"name": unknown, "arguments": {}}),
                Some(unknown.clone()),
            ),
        ] {
            let outcome = if method == "tools/list" && tools.len() > MAX_TOOLS_FOR_LIST_CONTROL {
                format!("not sent: the server lists {} tools", tools.len())
            } else if l.client.session().is_closed() {
                "not sent: the server hung up".into()
            } else {
                l.client.control(method, params, timeout).await
            };
            asked.push(ControlRequest {
                method: method.into(),
                tool,
                outcome,
            });
        }
        settle(
            tree,
            &before,
            config.waits.settle,
            config.waits.settle_max,
            Some(&mut l.quiet),
        )
        .await;
        let observations = self.recorder.checkpoint();
        self.recorder.take_pins();
        self.phases
            .extend(PhaseObservation::all_in(Phase::Control, observations));
        let broken = l.process.has_exited() || l.client.session().is_closed();
        if broken {
            self.notes.push(
                "the server stopped working during the control requests; the first call got a fresh one".into(),
            );
            self.discard(None).await;
        }
        asked
    }

    /// Late effects: gives the threads and processes that calls started, and that can still
    /// act on their own (a timer, a sleeping flush loop, not an idle pool worker), up to
    /// `--late-wait` (within the run's deadline) to finish, then closes what they did as the
    /// time after the tool that started them. Returns that tool when there was something to
    /// wait for, with how long the wait took.
    pub(super) async fn wait_for_late_effects(&mut self) -> Option<(String, Duration)> {
        let config = self.ctx.config;
        let tree = self.live.as_ref()?.process.pid().map(ProcessTree::new)?;
        let started = Instant::now();
        let limit = config
            .waits
            .late_wait
            .min(self.ctx.deadline.saturating_duration_since(started));
        let pending = |lingering: &[(String, String, u32)]| -> Option<String> {
            let alive = tree.tasks();
            lingering
                .iter()
                .rev()
                .find(|(_, _, tid)| {
                    alive.contains(tid) && !crate::observe::activity::waits_for_others(*tid)
                })
                .map(|(_, tool, _)| tool.clone())
        };
        let owner = pending(&self.lingering)?;
        let lingering: Vec<u32> = self.lingering.iter().map(|(_, _, tid)| *tid).collect();
        // Threads whose waits are proven to last past the limit need no waiting for.
        let horizon = Horizon {
            all: config.waits.settle,
            held: Some((Held::In(&lingering), started + limit)),
        };
        while started.elapsed() < limit && pending(&self.lingering).is_some() {
            if self.ctx.must_stop().is_some() {
                break;
            }
            if let Some(l) = self.live.as_mut()
                && l.quiet.look(&tree, horizon)
            {
                if pending(&self.lingering).is_some() {
                    self.notes.push(format!(
                        "what calls of {owner} left running sleeps past --late-wait ({} ms): the wait for late effects ended at once, and what it does after the run is not observed (raise --late-wait to see it)",
                        limit.as_millis()
                    ));
                }
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let waited = started.elapsed();
        self.between_calls(Some(&owner));
        Some((owner, waited))
    }
}

/// Whether a tool's `result` holds what the observer's stand-in web site served and its
/// `arguments` did not (data the tool fetched, not data it was given).
fn returns_fetched(result: &Value, arguments: &Value) -> bool {
    let holds =
        |v: &Value| serde_json::to_vec(v).is_ok_and(|b| crate::observe::web::carries_served(&b));
    holds(result) && !holds(arguments)
}

/// The tool whose call started the threads that did `o`, when the system calls behind it
/// name only threads and processes one tool's calls started and that are still alive
/// (`lingering`): a thread a call left sleeping (a timer, a delayed flush) acts for that call
/// whenever it wakes, unless it is a pool worker a later call handed a job (which only a
/// replay tells apart).
fn started_by(
    lingering: &[(String, String, u32)],
    o: &Observation,
    pins: &[ThreadPin],
) -> Option<String> {
    if !o.is_evidential() {
        return None;
    }
    let tids: Vec<u32> = pins
        .iter()
        .filter(|p| p.key.names(o))
        .map(|p| p.tid)
        .collect();
    if tids.is_empty() {
        return None;
    }
    let mut owners = tids.iter().map(|tid| {
        lingering
            .iter()
            .find(|(_, _, t)| t == tid)
            .map(|(_, tool, _)| tool.clone())
    });
    let first = owners.next()??;
    owners
        .all(|o| o.as_deref() == Some(first.as_str()))
        .then_some(first)
}

/// A tool call's answer as [`request`] saw it.
struct Answer {
    /// How it ended; `None` when an interrupt came first.
    outcome: Option<CallOutcome>,
    /// The result, when it came.
    result: Option<Value>,
    /// The data labels the result carried.
    labels: Option<crate::mcp::labels::ResultLabels>,
    /// How long the server took (the ping after a timeout not included).
    took: Duration,
}

impl Answer {
    /// No answer: an interrupt came first, `took` into the wait.
    fn interrupted(took: Duration) -> Answer {
        Answer {
            outcome: None,
            result: None,
            labels: None,
            took,
        }
    }
}

/// Sends a tool call and waits for its answer within `timeout`, or until an interrupt. A call
/// that timed out on a server that still answers a ping is waiting (a long poll), not hung.
async fn request(
    l: &mut Live,
    stop: &watch::Receiver<bool>,
    tool: &str,
    arguments: &Value,
    timeout: Duration,
) -> Answer {
    let mut stop = stop.clone();
    let sent = Instant::now();
    let answered = tokio::select! {
        o = l.client.call_tool_with_result(tool, arguments, timeout) => Some(o),
        _ = stop.changed() => None,
    };
    let took = sent.elapsed();
    let Some((mut outcome, result, labels)) = answered else {
        return Answer::interrupted(took);
    };
    if let CallOutcome::Timeout { after_ms } = outcome {
        if l.client.answers_ping(PING_PATIENCE).await {
            outcome = CallOutcome::Waiting { after_ms };
        }
    }
    Answer {
        outcome: Some(outcome),
        result,
        labels,
        took,
    }
}

/// Who besides a call may act in its window, as the window opens: the threads and processes
/// earlier calls started that still run.
struct OpenWindow {
    /// The server's tasks before the call.
    before: Vec<u32>,
    /// The threads earlier calls left running.
    lingering_tids: Vec<u32>,
    /// Those of them that only someone else can wake (idle pool workers): what they do in
    /// this window, they do for this call.
    woken_by_call: Vec<u32>,
    /// The earlier calls (their labels) and tools whose threads still run.
    lingering_calls: Vec<String>,
    lingering_tools: Vec<String>,
    /// Each thread's CPU time as the window opens.
    runtimes: std::collections::HashMap<u32, u64>,
}

/// Whom a call's window pins its evidence on.
struct WhoDidIt {
    concurrent_with: Vec<String>,
    concurrent_tools: Vec<String>,
    background_ran: bool,
    pinned_on_own_threads: bool,
    own_threads_did_it: bool,
}

impl OpenWindow {
    /// Opens a call's window on the server's process `tree`; `lingering` (owner call, tool,
    /// task) keeps only the tasks that still run. `skip`: the sandbox's own threads.
    fn open(
        tree: Option<ProcessTree>,
        lingering: &mut Vec<(String, String, u32)>,
        skip: usize,
    ) -> Self {
        let (before, runtimes) = tree.map(|t| t.tasks_and_runtimes(skip)).unwrap_or_default();
        lingering.retain(|(_, _, tid)| before.contains(tid));
        let lingering_tids: Vec<u32> = lingering.iter().map(|(_, _, t)| *t).collect();
        let woken_by_call: Vec<u32> = lingering_tids
            .iter()
            .copied()
            .filter(|t| crate::observe::activity::waits_for_others(*t))
            .collect();
        let mut lingering_calls: Vec<String> = lingering
            .iter()
            .map(|(owner, _, _)| owner.clone())
            .collect();
        lingering_calls.sort();
        lingering_calls.dedup();
        let mut lingering_tools: Vec<String> =
            lingering.iter().map(|(_, t, _)| t.clone()).collect();
        lingering_tools.sort();
        lingering_tools.dedup();
        OpenWindow {
            before,
            lingering_tids,
            woken_by_call,
            lingering_calls,
            lingering_tools,
            runtimes,
        }
    }

    /// Whom the window's `observations` are pinned on, given which threads made their system
    /// calls (`pins`), the CPU times as it closed, and the server's `background` threads.
    ///
    /// Per-thread evidence: when the system calls behind every piece of evidence were made by
    /// the call's own threads (the one that took the request, threads it started, idle
    /// workers it woke), neither background threads nor earlier calls' threads did it. An
    /// idle worker counts as woken by the call only while no background thread ran: one of
    /// those could have woken it.
    fn who_did(
        self,
        observations: &[Observation],
        pins: &[ThreadPin],
        runtimes_end: &std::collections::HashMap<u32, u64>,
        background: &[u32],
    ) -> WhoDidIt {
        // Only writes and external network traffic can be evidence against a hint.
        let evidential = observations.iter().any(Observation::is_evidential);
        let busy_background: Vec<u32> = ran_between(&self.runtimes, runtimes_end)
            .into_iter()
            .filter(|t| background.contains(t))
            .collect();
        let own_thread = |tid: u32| {
            !background.contains(&tid)
                && (!self.lingering_tids.contains(&tid)
                    || self.woken_by_call.contains(&tid) && busy_background.is_empty())
        };
        let own_threads_did_it = evidential
            && observations.iter().filter(|o| o.is_evidential()).all(|o| {
                let tids: Vec<u32> = pins
                    .iter()
                    .filter(|p| p.key.names(o))
                    .map(|p| p.tid)
                    .collect();
                !tids.is_empty() && tids.iter().all(|t| own_thread(*t))
            });
        let (mut concurrent_with, mut concurrent_tools) =
            (self.lingering_calls, self.lingering_tools);
        // Recorded only where it ruled something out.
        let pinned_on_own_threads =
            own_threads_did_it && (!concurrent_with.is_empty() || !busy_background.is_empty());
        if pinned_on_own_threads {
            concurrent_with.clear();
            concurrent_tools.clear();
        } else if evidential && !busy_background.is_empty() {
            concurrent_with.push(format!(
                "background threads of the server ({})",
                busy_background.len()
            ));
        }
        if !evidential {
            concurrent_with.clear();
            concurrent_tools.clear();
        }
        WhoDidIt {
            concurrent_with,
            concurrent_tools,
            background_ran: evidential && !busy_background.is_empty() && !pinned_on_own_threads,
            pinned_on_own_threads,
            own_threads_did_it,
        }
    }
}

impl Host for ServerHost<'_, '_> {
    fn must_stop(&self) -> Option<String> {
        self.ctx.must_stop()
    }

    async fn ready(&mut self) -> Result<(), String> {
        // A server that hung up between calls (closed its stdout, stopped listening) is
        // stopped, and the next call gets a fresh one.
        if self
            .live
            .as_ref()
            .is_some_and(|l| l.client.session().is_closed())
        {
            self.discard(None).await;
        }
        if self.live.is_some() {
            return Ok(());
        }
        let config = self.ctx.config;
        if self.restarts >= config.explore.max_restarts {
            return Err(format!(
                "not called: the server stopped working and was restarted {} times already",
                self.restarts
            ));
        }
        self.restarts += 1;
        match start_server(self.ctx, self.sandbox_level, self.recorder).await {
            Ok((mut l, _)) => {
                // The fresh server's start-up work is its own, not the next call's.
                let wait = settle_start(self.recorder, self.ctx, &mut l).await;
                if !wait.proven {
                    self.background.extend(
                        probe_background(l.process.pid().map(ProcessTree::new), self.skip).await,
                    );
                }
                self.idle_sample = None;
                self.live = Some(l);
                self.notes.extend(
                    wait.note(config.waits.startup_quiet)
                        .map(|n| format!("restart {}: {n}", self.restarts)),
                );
                self.phases
                    .extend(PhaseObservation::all_in(Phase::Startup, wait.observations));
                Ok(())
            }
            Err(mut f) => {
                self.log.emit(f.instance_ended());
                self.notes
                    .push(format!("restart {} failed: {}", self.restarts, f.message));
                Err("not called: the server could not be restarted".into())
            }
        }
    }

    fn between_calls(&mut self, last_tool: Option<&str>) {
        let observations = self.recorder.checkpoint();
        let pins = self.recorder.take_pins();
        for o in observations {
            // The threads or processes an earlier call started may have done it (a timer it
            // left, or a pool worker it made that a later call handed a job): replays ask that
            // call's tool first, then the tool that came last.
            self.phases.push(PhaseObservation {
                started_by: started_by(&self.lingering, &o, &pins)
                    .filter(|t| Some(t.as_str()) != last_tool),
                phase: Phase::Idle,
                after_tool: last_tool.map(str::to_string),
                observation: o,
            });
        }
    }

    async fn call(&mut self, tool: &str, label: &str, arguments: &Value) -> ObservedCall {
        let Some(l) = self.live.as_mut() else {
            return ObservedCall {
                record: CallRecord::bare(arguments, CallOutcome::ServerDied),
                result: None,
                broken: true,
                interrupted: false,
            };
        };
        let cursor = l.client.session().transcript_len();
        let tree = l.process.pid().map(ProcessTree::new);
        let window = OpenWindow::open(tree, &mut self.lingering, self.skip);
        if let Some(prev) = self.idle_sample.take() {
            self.background.extend(ran_between(&prev, &window.runtimes));
            self.background.sort_unstable();
            self.background.dedup();
        }
        // What the tool resolves to for these arguments, asked in the call's window (what
        // the server does to answer is the call's as a host would see it); not when the run
        // has too little time left to wait for it.
        let left = self.ctx.deadline.saturating_duration_since(Instant::now());
        let mut stopped = false;
        let resolution =
            if self.resolving.contains(tool) && l.client.offers_resolve() && left > RESOLVE_TIMEOUT
            {
                let mut stop = self.ctx.stop.clone();
                tokio::select! {
                    r = l.client.resolve_tool(tool, arguments, RESOLVE_TIMEOUT) => Some(r),
                    _ = stop.changed() => {
                        stopped = true;
                        None
                    }
                }
            } else {
                None
            };
        let t0 = Instant::now();
        // A tool that says it waits for something (a long poll) gets a short timeout: the
        // ping after it tells its waiting from a hung server.
        let own_timeout = if self.long_pollers.contains(tool) {
            self.ctx.config.waits.call_timeout.min(LONG_POLL_TIMEOUT)
        } else {
            self.ctx.config.waits.call_timeout
        };
        let timeout = own_timeout
            .min(self.ctx.deadline.saturating_duration_since(t0))
            .max(Duration::from_millis(1));
        let Answer {
            outcome,
            result,
            labels: result_labels,
            took: duration,
        } = if stopped {
            // Interrupted while the resolution was asked: the call is never sent.
            Answer::interrupted(Duration::ZERO)
        } else {
            request(l, &self.ctx.stop, tool, arguments, timeout).await
        };
        let interrupted = outcome.is_none();
        let outcome = outcome.unwrap_or(CallOutcome::Timeout {
            after_ms: duration.as_millis() as u64,
        });
        let proven_before = l.quiet.proven;
        let settled = if interrupted {
            Duration::ZERO
        } else {
            let config = self.ctx.config;
            settle(
                tree,
                &window.before,
                config.waits.settle,
                config.waits.settle_max,
                Some(&mut l.quiet),
            )
            .await
        };
        if let Some(t) = tree {
            // The threads of the look that proved the tree quiet and closed the window, else
            // read afresh.
            let tasks = match l.quiet.last_seen() {
                Some((tasks, _)) if l.quiet.proven > proven_before => tasks.clone(),
                _ => t.tasks(),
            };
            self.lingering.extend(
                tasks
                    .into_iter()
                    .filter(|tid| !window.before.contains(tid))
                    .map(|tid| (label.to_string(), tool.to_string(), tid)),
            );
        }
        let observe_start = Instant::now();
        let observations = self.recorder.checkpoint();
        let pins = self.recorder.take_pins();
        // A secret in the answer went to the model: the call's own, whatever the windows say.
        let secrets = match (&self.ctx.secrets, &result) {
            (Some(watch), Some(result)) => watch.in_result(result, arguments),
            _ => Vec::new(),
        };
        let returned_fetched = result
            .as_ref()
            .is_some_and(|r| returns_fetched(r, arguments));
        let observe = observe_start.elapsed();
        let rt_end = tree.map(|t| t.runtimes(self.skip)).unwrap_or_default();
        let who = window.who_did(&observations, &pins, &rt_end, &self.background);
        self.idle_sample = Some(rt_end);
        if self.limit_during.is_none() && limit_reason(self.ctx).is_some() {
            self.limit_during = Some(tool.to_string());
        }
        let mut observations = observations;
        if let Some(watch) = &self.ctx.secrets {
            watch.judge_call(&mut observations, arguments);
        }
        observations.extend(secrets);
        let wire_anomalies = l.client.session().anomalies_since(cursor).len();
        let broken = matches!(
            outcome,
            CallOutcome::Timeout { .. } | CallOutcome::ServerDied
        ) || l.process.has_exited();
        let record = CallRecord {
            started_ms: t0.duration_since(self.ctx.started).as_millis() as u64,
            duration_ms: duration.as_millis() as u64,
            settle_ms: settled.as_millis() as u64,
            timing: CallTiming {
                response_us: duration.as_micros() as u64,
                settle_us: settled.as_micros() as u64,
                observe_us: observe.as_micros() as u64,
            },
            concurrent_with: who.concurrent_with,
            concurrent_tools: who.concurrent_tools,
            background_ran: who.background_ran,
            pinned_on_own_threads: who.pinned_on_own_threads,
            own_threads_did_it: who.own_threads_did_it,
            observations,
            wire_anomalies,
            result_labels,
            returned_fetched,
            resolution,
            ..CallRecord::bare(arguments, outcome)
        };
        ObservedCall {
            record,
            result,
            broken,
            interrupted,
        }
    }

    async fn discard(&mut self, last_tool: Option<&str>) {
        // A crashed or hung server cannot be trusted for later calls: the next one starts
        // afresh.
        if let Some(l) = self.live.take() {
            stop_server(l, self.ctx, self.log, self.recorder, Stop::Midway).await;
        }
        self.between_calls(last_tool);
    }

    async fn isolated(&mut self, tool: &str) -> Result<Vec<CallRecord>, String> {
        self.isolated_all(&[tool.to_string()])
            .await
            .pop()
            .unwrap_or_else(|| Err("not called in its isolated run".into()))
    }

    async fn isolated_all(&mut self, tools: &[String]) -> Vec<Result<Vec<CallRecord>, String>> {
        use futures_util::StreamExt;
        let remaining = self.ctx.deadline.saturating_duration_since(Instant::now());
        let ctx = self.ctx;
        let results: Vec<_> = futures_util::stream::iter(
            tools
                .iter()
                .map(|tool| nested::isolated(ctx, tool, remaining)),
        )
        .buffered(self.side_by_side.max(1))
        .collect()
        .await;
        results
            .into_iter()
            .map(|r| {
                r.map(|(calls, nested_phases)| {
                    self.phases.extend(nested_phases);
                    calls
                })
            })
            .collect()
    }
}
