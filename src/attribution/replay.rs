//! Replays: tools called again on fresh servers (nested runs, see [`NestedRuns`]), alone or after
//! the calls their state depends on, to confirm or correct an uncertain attribution, to tell
//! a server's first-call initialisation and lazy set-up from a tool's effects, and to settle
//! writes to what the server keeps for several tools.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::server_wide::{OwnPlaces, ServersOwn};
use super::{NestedPlan, NestedRuns, ReplayWaits};
use crate::evidence::Observation;
use crate::evidence::at_or_under;
use crate::evidence::{CallRecord, Phase, PhaseObservation, ReplayRecord, ToolRun};
use crate::mcp::tool::{HintName, ToolDecl};

/// Most tools replayed in one run.
pub(crate) const MAX_REPLAYS: usize = 6;

/// What a replay of one tool alone on a fresh server showed, as [`Observation::shape_key`]s.
pub(crate) struct Replayed {
    /// Observed where nothing but the tool could have done it: in its calls' windows (its own
    /// earlier calls may have been running, no other tool was called) while none of the
    /// server's background threads ran, and between or after its calls when they never ran.
    certain: BTreeSet<String>,
    /// Observed before the tool was first called (while the server started, or idle before
    /// the call): the server does it on its own.
    unprompted: BTreeSet<String>,
    /// Observed in the tool's calls' windows, whatever else ran there.
    in_focus: BTreeSet<String>,
    /// Observed outside the tool's calls' windows: in any phase (start-up, the controls,
    /// between calls, shutdown) or in another tool's call.
    outside: BTreeSet<String>,
    /// Observed anywhere, the background threads' windows included.
    seen: BTreeSet<String>,
}

/// What a replay says about one observation of an uncertain call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ReplayVerdict {
    /// The tool alone did it, where nothing else ran.
    Reproduced,
    /// The server does it before the tool is ever called: not the tool's evidence.
    Unprompted,
    /// It happened again, but not only in the tool's windows: also where neither the tool
    /// nor the server's start-up can have done it (after another tool, at shutdown).
    Unsure,
    /// The tool alone never did it.
    Absent,
}

impl Replayed {
    /// What the replay says about `o`. Observations without a key (process starts) count as
    /// reproduced.
    fn judge(&self, o: &Observation) -> ReplayVerdict {
        let Some(k) = o.shape_key() else {
            return ReplayVerdict::Reproduced;
        };
        if self.certain.contains(&k) {
            ReplayVerdict::Reproduced
        } else if self.unprompted.contains(&k) {
            ReplayVerdict::Unprompted
        } else if self.in_focus.contains(&k) && !self.outside.contains(&k) {
            // The server's background threads ran in the tool's windows too, but they never
            // did it outside them (before the first call, between calls, at the controls):
            // the tool reproduced it.
            ReplayVerdict::Reproduced
        } else if self.seen.contains(&k) {
            ReplayVerdict::Unsure
        } else {
            ReplayVerdict::Absent
        }
    }
}

/// The tools a replay called and the one in question, if any.
type ReplayKey = (Vec<String>, Option<String>);

/// The replays of one run: each set of tools is replayed at most once, at most
/// [`MAX_REPLAYS`] server runs in all; every replay is recorded for the report.
pub(crate) struct Replays<'a, N> {
    /// Makes the nested runs.
    runner: &'a N,
    /// The run's own `--late-wait`.
    late_wait: Duration,
    /// By what was replayed: the replay's number and what it showed (none: it could not run).
    done: BTreeMap<ReplayKey, (usize, Option<Replayed>)>,
    /// The main run's deadline: replays fit before it.
    deadline: Instant,
    /// Replays that may run at the same time (see [`Replays::prefetch_alone`]).
    jobs: usize,
    /// What each replay was for and showed.
    pub(crate) records: Vec<ReplayRecord>,
    /// Tools whose threads did something after their calls: replays focused on them wait up
    /// to [`REPLAY_LATE_WAIT`] for what their calls left running.
    waiting: BTreeSet<String>,
    /// How long a replay that calls no tool leaves its server alone after the greeting.
    idle_hold: Duration,
    /// Whether replays kill their server after the last window instead of stopping it (see
    /// [`ReplayWaits::stop_at_once`]).
    stop_at_once: bool,
}

/// How a differential replay judged an observation of a call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Differential {
    /// The run with the tool reproduced it in the tool's calls; the run without the tool
    /// never showed it. The text names the replays.
    Confirmed(String),
    /// Reproduced, but only while the server's background threads ran too.
    Unsure,
    /// Not reproduced, or the run without the tool showed it too.
    NotTheTools,
}

/// How long a replay waits after its last call for the threads and processes its calls
/// started (and that can still act on their own) to finish: a late effect is replayed only
/// if the replay waits for it.
pub(crate) const REPLAY_LATE_WAIT: Duration = Duration::from_secs(30);

/// The longest one replay may take.
const MAX_REPLAY_TIME: Duration = Duration::from_secs(120);

impl<'a, N: NestedRuns> Replays<'a, N> {
    /// No replay yet; `runner` makes them, each must end before `deadline` (the main run's);
    /// `late_wait` is the run's own `--late-wait`.
    pub(crate) fn new(runner: &'a N, late_wait: Duration, deadline: Instant) -> Self {
        Replays {
            runner,
            late_wait,
            done: BTreeMap::new(),
            deadline,
            jobs: 1,
            records: Vec::new(),
            waiting: BTreeSet::new(),
            idle_hold: Duration::ZERO,
            stop_at_once: false,
        }
    }

    /// Replays kill their server once their last window and late wait closed, when the main
    /// run watched its own server's end and it did nothing there (`quiet_end`): a server's
    /// exit after its input closes (100 to 270 ms for the Python SDK's servers) is then not
    /// worth waiting for, since no replay is asked what the server does at its end.
    pub(crate) fn stopping_at_once(mut self, quiet_end: bool) -> Self {
        self.stop_at_once = quiet_end;
        self
    }

    /// Replays focused on `tools` wait for what their calls left running (see
    /// [`REPLAY_LATE_WAIT`]).
    pub(crate) fn waiting_for(&mut self, tools: impl IntoIterator<Item = String>) {
        self.waiting.extend(tools);
    }

    /// How long a replay focused on `focus` waits after its last call.
    fn late_wait(&self, focus: Option<&str>) -> Duration {
        match focus {
            Some(f) if self.waiting.contains(f) => REPLAY_LATE_WAIT.max(self.late_wait),
            _ => self.late_wait,
        }
    }

    /// Lets up to `jobs` replays run at the same time.
    pub(crate) fn side_by_side(mut self, jobs: usize) -> Self {
        self.jobs = jobs.max(1);
        self
    }

    /// Makes now, up to `jobs` at a time, the replays of each of `tools` alone on a fresh
    /// server that are not made yet (within the budget, numbered in `tools`' order), so that
    /// asking for them later finds them made.
    pub(crate) async fn prefetch_alone(&mut self, tools: &[(String, String)]) {
        use futures_util::StreamExt;
        let mut todo: Vec<(ReplayKey, String)> = Vec::new();
        for (tool, purpose) in tools {
            let key = (vec![tool.clone()], Some(tool.clone()));
            if self.done.contains_key(&key) || todo.iter().any(|(k, _)| *k == key) {
                continue;
            }
            if self.done.len() + todo.len() >= MAX_REPLAYS {
                break;
            }
            todo.push((key, purpose.clone()));
        }
        let remaining = self.deadline.saturating_duration_since(Instant::now());
        // Made here whatever the number of jobs: the replays' numbers and the budget they
        // spend do not depend on --jobs.
        if todo.is_empty() || remaining < Duration::from_secs(1) {
            return;
        }
        let time = remaining.min(MAX_REPLAY_TIME);
        let runner = self.runner;
        let stop_at_once = self.stop_at_once;
        let waits: Vec<Duration> = todo
            .iter()
            .map(|((_, focus), _)| self.late_wait(focus.as_deref()))
            .collect();
        let made: Vec<(Option<Replayed>, Duration)> =
            futures_util::stream::iter(todo.iter().zip(waits).map(
                |(((tools, focus), _), wait)| async move {
                    let started = Instant::now();
                    let plan = NestedPlan {
                        tools,
                        time,
                        replay: Some(ReplayWaits {
                            late_wait: wait,
                            hold_before_calls: None,
                            stop_at_once,
                        }),
                    };
                    let replayed = replay_keys(runner, plan, focus.as_deref()).await;
                    (replayed, started.elapsed())
                },
            ))
            .buffered(self.jobs)
            .collect()
            .await;
        for ((key, purpose), (replayed, took)) in todo.into_iter().zip(made) {
            self.record(key, purpose, replayed, took);
        }
    }

    /// Keeps what a replay showed, numbered, with its record for the report.
    fn record(
        &mut self,
        key: ReplayKey,
        purpose: String,
        replayed: Option<Replayed>,
        took: Duration,
    ) {
        let id = self.records.len() + 1;
        self.records.push(ReplayRecord {
            id,
            tools: key.0.clone(),
            purpose,
            outcome: match &replayed {
                Some(r) => format!(
                    "ran: {} kind(s) of effect seen, {} of them where the tool in question could not have done them; after its last call it waited up to {} ms for what its calls left running, then {}",
                    r.seen.len(),
                    r.unprompted.len(),
                    self.late_wait(key.1.as_deref()).as_millis(),
                    if self.stop_at_once {
                        "killed its server (the run's own server did nothing at its end)"
                    } else {
                        "stopped its server as the run stops its own (the run's own server did something at its end, or its end was not watched)"
                    }
                ),
                None => "could not run: its server did not start".into(),
            },
            duration_ms: took.as_millis() as u64,
        });
        self.done.insert(key, (id, replayed));
    }

    /// What a fresh server showed when `tools` were called (in the explorer's order) with
    /// `focus` the tool under question (or none); made now unless made before. Returns the
    /// replay's number with what it showed; `Err` says why there is none.
    async fn run(
        &mut self,
        (tools, focus): (&[String], Option<&str>),
        purpose: String,
    ) -> Result<(usize, &Replayed), &'static str> {
        let mut key = (tools.to_vec(), focus.map(str::to_string));
        // Without a tool in question only what was seen counts, and that is the same whatever
        // the focus of an earlier replay of the same tools was.
        if focus.is_none() {
            if let Some(k) = self.done.keys().find(|(t, _)| t.as_slice() == tools) {
                key = k.clone();
            }
        }
        if !self.done.contains_key(&key) {
            if self.done.len() >= MAX_REPLAYS {
                return Err("the replay budget is spent");
            }
            let started = Instant::now();
            let remaining = self.deadline.saturating_duration_since(started);
            if remaining < Duration::from_secs(1) {
                return Err("the run timeout leaves no time for a replay");
            }
            let plan = NestedPlan {
                tools,
                time: remaining.min(MAX_REPLAY_TIME),
                replay: Some(ReplayWaits {
                    late_wait: self.late_wait(focus),
                    hold_before_calls: tools.is_empty().then_some(self.idle_hold),
                    stop_at_once: self.stop_at_once,
                }),
            };
            let replayed = replay_keys(self.runner, plan, focus).await;
            self.record(key.clone(), purpose, replayed, started.elapsed());
        }
        match self.done.get(&key) {
            Some((id, Some(r))) => Ok((*id, r)),
            _ => Err("its replay could not run"),
        }
    }

    /// What a replay of `tool` alone on a fresh server showed, with the words evidence cites.
    async fn of(
        &mut self,
        tool: &str,
        purpose: String,
    ) -> Result<(String, &Replayed), &'static str> {
        let tools = [tool.to_string()];
        let (id, r) = self.run((&tools, Some(tool)), purpose).await?;
        Ok((format!("replay {id}: {tool} alone on a fresh server"), r))
    }

    /// Differential replay: fresh servers run `prefix` (the calls `tool`'s state depends
    /// on) with and without `tool`; an observation is the tool's when the run with it shows
    /// it in the tool's calls and the run without it never does. Paths match by shape.
    async fn differential(
        &mut self,
        prefix: &[String],
        tool: &str,
        observations: &[&Observation],
    ) -> Result<Vec<Differential>, &'static str> {
        let mut with_tool = prefix.to_vec();
        with_tool.push(tool.to_string());
        let purpose = format!(
            "what {tool} did after {} (the calls its state depends on)",
            prefix.join(", ")
        );
        let (with_id, with) = self.run((&with_tool, Some(tool)), purpose).await?;
        let verdicts: Vec<ReplayVerdict> = observations.iter().map(|o| with.judge(o)).collect();
        if verdicts
            .iter()
            .all(|v| !matches!(v, ReplayVerdict::Reproduced | ReplayVerdict::Unsure))
        {
            return Ok(vec![Differential::NotTheTools; observations.len()]);
        }
        let purpose = format!("what {} did without {tool}", prefix.join(", "));
        let (without_id, without) = self.run((prefix, None), purpose).await?;
        let cited = format!(
            "replays {with_id} and {without_id}: {} then {tool}, against {} alone, on fresh servers",
            prefix.join(", "),
            prefix.join(", ")
        );
        Ok(observations
            .iter()
            .zip(verdicts)
            .map(|(o, v)| {
                let without_shows = o.shape_key().is_some_and(|k| without.seen.contains(&k));
                match v {
                    _ if without_shows => Differential::NotTheTools,
                    ReplayVerdict::Reproduced => Differential::Confirmed(cited.clone()),
                    ReplayVerdict::Unsure => Differential::Unsure,
                    _ => Differential::NotTheTools,
                }
            })
            .collect())
    }
}

/// The calls (tool, call) of `runs` for which `keep(tool, call)` holds.
fn calls_where(runs: &[ToolRun], keep: impl Fn(usize, &CallRecord) -> bool) -> Vec<(usize, usize)> {
    let keep = &keep;
    runs.iter()
        .enumerate()
        .flat_map(|(i, r)| {
            r.calls
                .iter()
                .enumerate()
                .filter(move |(_, c)| keep(i, c))
                .map(move |(j, _)| (i, j))
        })
        .collect()
}

/// The calls (tool, call) whose windows other calls' threads shared, where a replay can make
/// a piece of evidence firm (see [`worth_a_replay`]).
fn uncertain_calls(runs: &[ToolRun], own: &ServersOwn) -> Vec<(usize, usize)> {
    calls_where(runs, |_, c| {
        !c.concurrent_with.is_empty() && c.observations.iter().any(|o| worth_a_replay(o, own))
    })
}

/// Whether `o` of a call of `tool` bears on a hint `tool` declared that its calls do not
/// already contradict firmly (`firm`, see [`firm_already`]).
fn bears_on_an_open_hint(tool: &ToolDecl, firm: &BTreeSet<HintName>, o: &Observation) -> bool {
    crate::audit::declared_hints_it_bears_on(tool, o)
        .iter()
        .any(|h| !firm.contains(h))
}

/// The calls (tool, call) with writes to the server's shared state that no replay confirmed
/// yet (see [`CallRecord::shared_state`]) and that bear on a hint their tool declared and
/// does not already contradict firmly (`firm`, one set per tool).
fn shared_state_calls(
    tools: &[ToolDecl],
    runs: &[ToolRun],
    firm: &[BTreeSet<HintName>],
) -> Vec<(usize, usize)> {
    calls_where(runs, |i, c| {
        c.observations.iter().any(|o| {
            let described = o.describe();
            c.shared_state.contains(&described)
                && !c.confirmed_by_replay.contains(&described)
                && (bears_on_an_open_hint(&tools[i], &firm[i], o)
                    || c.number > 1
                        && !firm[i].contains(&HintName::Idempotent)
                        && crate::audit::bears_on_declared_idempotence(&tools[i], o))
        })
    })
}

/// Whether a replay can make `o` firm evidence against some tool (or take it off a tool it
/// would make a firm liar): evidential, and nothing that stays a warning whatever a replay
/// finds (see [`ServersOwn::stays_a_warning`]). A replay costs a server start and the late
/// wait; one that can at best turn a warning into nothing is not run.
fn worth_a_replay(o: &Observation, own: &ServersOwn) -> bool {
    o.is_evidential() && !own.stays_a_warning(o)
}

/// Whether moving `observations` away from `tool` can change a verdict on a hint it declared
/// or the suggestion for one it left out: one of them bears on a declared hint (see
/// [`crate::audit::bears_on_declared`]), or `readOnlyHint` is not declared (the suggestion rests on whether
/// the tool wrote).
fn replay_can_change_a_verdict(tool: &ToolDecl, observations: &[Observation]) -> bool {
    observations.iter().any(|o| {
        o.is_evidential()
            && (crate::audit::bears_on_declared(tool, o)
                || tool.hints.read_only.declared().is_none())
    })
}

/// The failed calls (tool, call) of exclusive windows whose effects could contradict a
/// declared hint but are not shown to be the tool's (see [`CallRecord::counts`]): a replay of
/// the tool alone decides (only where its outcome can change a verdict: not for a hint the
/// tool's calls already contradict firmly, `firm`, one set per tool).
fn unproven_failed_calls(
    tools: &[ToolDecl],
    runs: &[ToolRun],
    own: &ServersOwn,
    firm: &[BTreeSet<HintName>],
) -> Vec<(usize, usize)> {
    calls_where(runs, |i, c| {
        !c.outcome.is_success()
            && c.concurrent_with.is_empty()
            && c.observations.iter().any(|o| {
                !c.counts(o)
                    && worth_a_replay(o, own)
                    && bears_on_an_open_hint(&tools[i], &firm[i], o)
            })
    })
}

/// The hints `tool` declared that its calls in `run` already contradict firmly without any
/// replay: by an effect that counts, in a window no other call shared, that is no write to
/// the server's shared state, can be firm (see [`worth_a_replay`]) and is no creation (a
/// later replay may show a creation to be the server's first-call initialisation or lazy
/// set-up). A replay for another piece of evidence against such a hint cannot change its
/// verdict.
fn firm_already(tool: &ToolDecl, run: &ToolRun, own: &ServersOwn) -> BTreeSet<HintName> {
    run.calls
        .iter()
        .filter(|c| c.concurrent_with.is_empty())
        .flat_map(|c| {
            c.observations
                .iter()
                .filter(move |o| {
                    c.counts(o)
                        && worth_a_replay(o, own)
                        && !c.shared_state.contains(&o.describe())
                        && !o.as_file().is_some_and(|f| f.kind.is_creation())
                })
                .flat_map(|o| crate::audit::declared_hints_it_bears_on(tool, o))
        })
        .collect()
}

/// Why `tool` is replayed alone for its uncertain (or failed) `call`.
fn alone_purpose(tool: &str, call: &CallRecord) -> String {
    if call.concurrent_with.is_empty() && call.outcome.is_success() {
        format!(
            "{tool} {} wrote files the server keeps for several tools: are those writes the tool's?",
            call.label()
        )
    } else if call.concurrent_with.is_empty() {
        format!(
            "{tool} {} failed ({}): are the effects seen in its window the tool's?",
            call.label(),
            call.outcome.label()
        )
    } else {
        format!(
            "{tool} {} shared its window with {}",
            call.label(),
            call.concurrent_with.join(", ")
        )
    }
}

/// Most tools a differential replay runs before the tool in question.
const MAX_PREFIX: usize = 4;

/// The calls the state of `runs[tool]`'s call `call` may depend on, shortened: the tools
/// called before it that wrote something in the run, gave it an argument, or were run for
/// it as a prerequisite, in the order they were first called (at most [`MAX_PREFIX`]).
/// When there are more, those that wrote at, above or below a path the call touched (the
/// tool that made the branch a deletion removes, the one that made the store it rewrites)
/// and those that gave it something are kept first, then the latest writers.
pub(crate) fn state_prefix(
    names: &[String],
    runs: &[ToolRun],
    tool: usize,
    call: usize,
) -> Vec<String> {
    let Some(this) = runs[tool].calls.get(call) else {
        return Vec::new();
    };
    let touched: Vec<&str> = this
        .observations
        .iter()
        .filter_map(|o| o.as_file().map(|f| f.path.as_str()))
        .collect();
    let related = |path: &str| {
        touched
            .iter()
            .any(|t| at_or_under(t, path) || at_or_under(path, t))
    };
    // (whether it bears on this call's state, when it was first called, which tool)
    let mut earlier: Vec<(bool, u64, usize)> = runs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != tool)
        .filter_map(|(i, r)| {
            let first = r.calls.iter().map(|c| c.started_ms).min()?;
            (first < this.started_ms).then_some((first, i))
        })
        .filter_map(|(first, i)| {
            let r = &runs[i];
            let gave = this
                .pooled
                .values()
                .any(|from| from.split_whitespace().next() == Some(names[i].as_str()))
                || r.calls
                    .iter()
                    .any(|c| c.prerequisite_for.as_deref() == Some(names[tool].as_str()));
            let wrote_here = r.all_observations().any(|(c, o)| {
                c.started_ms < this.started_ms && o.as_file().is_some_and(|f| related(&f.path))
            });
            let wrote = r.all_observations().any(|(_, o)| o.is_write());
            (gave || wrote).then_some((gave || wrote_here, first, i))
        })
        .collect();
    // The related ones first, each group latest first; then back to call order.
    earlier.sort_by_key(|(related, first, _)| (!*related, std::cmp::Reverse(*first)));
    earlier.truncate(MAX_PREFIX);
    earlier.sort_by_key(|(_, first, _)| *first);
    earlier
        .into_iter()
        .map(|(_, _, i)| names[i].clone())
        .collect()
}

/// Replays `plan` on a fresh server with `focus` as the tool under question; returns what it
/// showed, or `None` when the replay could not run (a replay cut short by its time still
/// counts for what it saw).
async fn replay_keys(
    runner: &impl NestedRuns,
    plan: NestedPlan<'_>,
    focus: Option<&str>,
) -> Option<Replayed> {
    let r = runner.run(plan).await;
    if r.server.start_error.is_some() {
        return None;
    }
    let is_focus = |name: &str| focus == Some(name);
    // Besides the focus tool, only the tools before it (and session set-up tools, which the
    // explorer runs first) were called: the focus tool's windows hold nothing of another
    // tool's call, only possibly of the server's background threads or of threads the
    // earlier calls left behind.
    let quiet = r.coverage.background_threads == 0;
    let calls = || {
        r.tools
            .iter()
            .filter(|t| is_focus(&t.name))
            .flat_map(|t| t.calls.iter())
    };
    let after_calls = || {
        r.phases
            .iter()
            .filter(|p| p.phase != Phase::Startup && p.after_tool.as_deref().is_some_and(is_focus))
    };
    let certain = calls()
        .filter(|c| !c.background_ran)
        .flat_map(|c| c.observations.iter())
        .chain(after_calls().filter(|_| quiet).map(|p| &p.observation))
        .filter_map(Observation::shape_key)
        .collect();
    let in_focus = calls()
        .flat_map(|c| c.observations.iter())
        .filter_map(Observation::shape_key)
        .collect();
    // What the server did for the other tools.
    let others = || {
        r.tools
            .iter()
            .filter(|t| !is_focus(&t.name))
            .flat_map(|t| t.calls.iter())
            .flat_map(|c| c.observations.iter())
    };
    let outside = others()
        .chain(r.phases.iter().map(|p| &p.observation))
        .filter_map(Observation::shape_key)
        .collect();
    // What the server did unasked, or for the other tools.
    let unprompted = r
        .phases
        .iter()
        .filter(|p| p.phase == Phase::Startup || !p.after_tool.as_deref().is_some_and(is_focus))
        .map(|p| &p.observation)
        .chain(others())
        .filter_map(Observation::shape_key)
        .collect();
    let seen = r
        .tools
        .iter()
        .flat_map(|t| t.calls.iter())
        .flat_map(|c| c.observations.iter())
        .chain(r.phases.iter().map(|p| &p.observation))
        .filter_map(Observation::shape_key)
        .collect();
    Some(Replayed {
        certain,
        unprompted,
        in_focus,
        outside,
        seen,
    })
}

/// What the attribution steps work on: the tools with their names, every tool's calls (whose
/// evidence they confirm or move) and the observations of no call (where moved evidence
/// goes).
pub(crate) struct Attributing<'a> {
    /// The tools, in listing order.
    pub tools: &'a [ToolDecl],
    /// Their names, in the same order.
    pub names: &'a [String],
    /// Every tool's calls.
    pub runs: &'a mut [ToolRun],
    /// The observations of no call.
    pub phases: &'a mut Vec<PhaseObservation>,
}

/// Confirms or corrects uncertain attributions: a call whose window other calls' processes
/// shared keeps what a replay of its tool alone reproduces, or else what a differential
/// replay (the calls its state depends on, with and without the tool) pins on it; and
/// observations that belong to no call (or were taken from one) go to the tool whose replay
/// reproduces them. Returns notes for the report.
pub(crate) async fn replay_ambiguous(
    replays: &mut Replays<'_, impl NestedRuns>,
    evidence: &mut Attributing<'_>,
    servers: &ServersOwn,
) -> Vec<String> {
    let (tools, names) = (evidence.tools, evidence.names);
    let (runs, phases) = (&mut *evidence.runs, &mut *evidence.phases);
    let mut notes = Vec::new();
    // Replays of the tools whose threads acted after their calls wait for them.
    replays.waiting_for(phases.iter().filter_map(|p| p.started_by.clone()));
    // 1. Calls with uncertain windows keep what their own tool reproduces; so do failed
    // calls whose effects are not yet shown to be the tool's (they count only then), and
    // writes to the server's shared state.
    let unsettled = calls_to_replay((tools, names), runs, servers);
    // Every tool with such a call is replayed alone: those replays side by side first.
    let alone: Vec<(String, String)> = unsettled
        .iter()
        .map(|(i, j, _)| {
            (
                names[*i].clone(),
                alone_purpose(&names[*i], &runs[*i].calls[*j]),
            )
        })
        .collect();
    replays.prefetch_alone(&alone).await;
    let mut left = LeftByCalls::default();
    for (i, j, prefix) in unsettled {
        replay_call(replays, names, runs, (i, j, &prefix), &mut left, &mut notes).await;
    }
    // 2. Observations outside every call (or taken from one): find the tool that produces them.
    notes.extend(place_outside_calls(replays, names, runs, phases, left, servers).await);
    notes
}

/// The calls (tool, call, the tools its state depends on) whose effects a replay settles:
/// uncertain windows, failed calls whose effects are not yet the tool's, and writes to the
/// server's shared state that bear on a hint not already firm.
fn calls_to_replay(
    (tools, names): (&[ToolDecl], &[String]),
    runs: &[ToolRun],
    servers: &ServersOwn,
) -> Vec<(usize, usize, Vec<String>)> {
    let firm: Vec<BTreeSet<HintName>> = tools
        .iter()
        .zip(runs.iter())
        .map(|(tool, run)| firm_already(tool, run, servers))
        .collect();
    let mut unsettled: Vec<(usize, usize, Vec<String>)> = uncertain_calls(runs, servers)
        .into_iter()
        .map(|(i, j)| (i, j, state_prefix(names, runs, i, j)))
        .chain(
            unproven_failed_calls(tools, runs, servers, &firm)
                .into_iter()
                .map(|(i, j)| (i, j, Vec::new())),
        )
        .collect();
    // Writes to the server's shared state earn firmness from a replay, alone or after the
    // calls the tool's state depends on.
    for (i, j) in shared_state_calls(tools, runs, &firm) {
        if !unsettled.iter().any(|(a, b, _)| (*a, *b) == (i, j)) {
            unsettled.push((i, j, state_prefix(names, runs, i, j)));
        }
    }
    unsettled
}

/// What replaying the unsettled calls left for the windows outside the calls.
#[derive(Default)]
struct LeftByCalls {
    /// Effects no replay pinned on the call's tool while other calls shared its window: the
    /// tools to ask, and the effect.
    orphans: Vec<(Vec<String>, Observation)>,
    /// Shared state the replays showed the server writing for no tool in particular.
    servers_own: Vec<PhaseObservation>,
}

/// Where a replay puts one observation of an unsettled call.
enum Placed {
    /// The tool's own (with the replay that showed it, when it matters).
    Own(Option<String>),
    /// Still uncertain.
    Unsure,
    /// Not the tool's; `decided` when every replay that could say so did.
    NotTheTools { decided: bool },
}

/// Replays the tool of call `j` of tool `i` (alone, and after `prefix` for what it did not
/// do alone) and keeps in the call what the replays show is the tool's; the rest goes to
/// `left` or stays uncertain.
async fn replay_call(
    replays: &mut Replays<'_, impl NestedRuns>,
    names: &[String],
    runs: &mut [ToolRun],
    (i, j, prefix): (usize, usize, &[String]),
    left: &mut LeftByCalls,
    notes: &mut Vec<String>,
) {
    let matters = Observation::is_evidential;
    let tool = names[i].as_str();
    let label = runs[i].calls[j].label();
    let purpose = alone_purpose(tool, &runs[i].calls[j]);
    // A successful call no other call shared is replayed for its shared-state writes only:
    // its other effects are its own already and are not judged.
    let call = &mut runs[i].calls[j];
    let only_shared = call.outcome.is_success() && call.concurrent_with.is_empty();
    let (observations, not_judged): (Vec<Observation>, Vec<Observation>) =
        std::mem::take(&mut call.observations)
            .into_iter()
            .partition(|o| !only_shared || call.shared_state.contains(&o.describe()));
    let (alone_cited, verdicts) = match replays.of(tool, purpose).await {
        Ok((cited, r)) => (
            cited,
            observations.iter().map(|o| r.judge(o)).collect::<Vec<_>>(),
        ),
        Err(why) => {
            let stays = if only_shared {
                "its writes to the server's shared state stay unconfirmed (warnings)"
            } else {
                "it stays uncertain"
            };
            notes.push(format!("{tool} {label}: {why}; {stays}"));
            let call = &mut runs[i].calls[j];
            call.observations = not_judged;
            call.observations.extend(observations);
            return;
        }
    };
    // What the tool alone did not do may depend on what earlier calls made.
    let absent: Vec<&Observation> = observations
        .iter()
        .zip(&verdicts)
        .filter(|(o, v)| **v == ReplayVerdict::Absent && matters(o))
        .map(|(o, _)| o)
        .collect();
    let mut differential: Vec<Differential> = Vec::new();
    if !absent.is_empty() && !prefix.is_empty() {
        match replays.differential(prefix, tool, &absent).await {
            Ok(d) => differential = d,
            Err(why) => notes.push(format!(
                "{tool} {label}: no differential replay after {} ({why})",
                prefix.join(", ")
            )),
        }
    }
    let mut differential = differential.into_iter();
    let servers_before = left.servers_own.len();
    let mut own = Vec::new();
    let mut unsure = Vec::new();
    let mut cited: Vec<String> = Vec::new();
    for (o, verdict) in observations.into_iter().zip(verdicts) {
        // The differential verdicts follow the absent observations in order.
        let second = (verdict == ReplayVerdict::Absent && matters(&o) && !prefix.is_empty())
            .then(|| differential.next())
            .flatten();
        let (placed, note) = place((tool, &label, prefix), &o, verdict, second, &alone_cited);
        notes.extend(note);
        match placed {
            Placed::Own(by) => {
                if let Some(by) = by.filter(|by| !cited.contains(by)) {
                    cited.push(by);
                }
                own.push(o);
            }
            Placed::Unsure => unsure.push(o),
            Placed::NotTheTools { decided } => {
                let call = &runs[i].calls[j];
                if call.shared_state.contains(&o.describe())
                    && call.concurrent_with.is_empty()
                    && decided
                {
                    // The server wrote its shared state in the tool's window, but not for
                    // the tool: it is the server's (a counter flushed every so many
                    // requests, a journal on a timer).
                    left.servers_own.push(PhaseObservation {
                        started_by: None,
                        phase: Phase::ServerState,
                        after_tool: Some(tool.to_string()),
                        observation: o,
                    });
                } else if call.concurrent_with.is_empty() {
                    // A failed call's window held nothing else: what it showed stays its
                    // observation, not counted.
                    unsure.push(o);
                } else if matters(&o) {
                    left.orphans.push((call.concurrent_tools.clone(), o));
                }
            }
        }
    }
    let call = &mut runs[i].calls[j];
    call.confirmed_by_replay = own
        .iter()
        .filter(|o| matters(o))
        .map(|o| o.describe())
        .collect();
    if !cited.is_empty() {
        call.confirmed_by = Some(cited.join("; "));
    }
    // What stays unsure keeps the call's uncertainty; confirmed observations are marked.
    if unsure.is_empty() {
        call.concurrent_with.clear();
    }
    own.extend(unsure);
    own.extend(not_judged);
    // A directory the window created for what the replays showed to be the server's shared
    // state (the state directory its first flush made) is the server's too.
    let servers_here: Vec<String> = left.servers_own[servers_before..]
        .iter()
        .filter_map(|p| p.observation.as_file().map(|f| f.path.clone()))
        .collect();
    let confirmed = &call.confirmed_by_replay;
    let (containers, own): (Vec<Observation>, Vec<Observation>) = own.into_iter().partition(|o| {
        !confirmed.contains(&o.describe())
            && o.as_file().is_some_and(|f| {
                f.kind.is_creation()
                    && servers_here
                        .iter()
                        .any(|p| p != &f.path && at_or_under(p, &f.path))
            })
    });
    left.servers_own
        .extend(containers.into_iter().map(|observation| PhaseObservation {
            started_by: None,
            phase: Phase::ServerState,
            after_tool: Some(tool.to_string()),
            observation,
        }));
    call.observations = own;
}

/// Where the replays put observation `o` of a call of `tool` (`label`; `prefix`: the calls
/// its state depends on): the verdict of the replay alone and, for what it did not do alone,
/// the differential one; with the note that says so.
fn place(
    (tool, label, prefix): (&str, &str, &[String]),
    o: &Observation,
    verdict: ReplayVerdict,
    second: Option<Differential>,
    alone_cited: &str,
) -> (Placed, Option<String>) {
    match (verdict, second) {
        (ReplayVerdict::Reproduced, _) => (
            Placed::Own(Observation::is_evidential(o).then(|| alone_cited.to_string())),
            None,
        ),
        (_, Some(Differential::Confirmed(by))) => {
            let note = format!(
                "{tool} {label}: \"{}\" did not happen when {tool} ran alone, but did when it ran after {} and not without it ({by}); it is attributed to {tool}",
                o.describe(),
                prefix.join(", ")
            );
            (Placed::Own(Some(by)), Some(note))
        }
        (ReplayVerdict::Unsure, _) | (_, Some(Differential::Unsure)) => (
            Placed::Unsure,
            Some(format!(
                "{tool} {label}: \"{}\" happened again when {tool} was replayed on a fresh server, but so did the server's own background threads; it stays uncertain",
                o.describe(),
            )),
        ),
        (ReplayVerdict::Unprompted | ReplayVerdict::Absent, second) => {
            let why = if verdict == ReplayVerdict::Absent {
                if prefix.is_empty() {
                    format!("did not happen when {tool} ran alone on a fresh server")
                } else {
                    format!(
                        "did not happen when {tool} ran alone, nor only when it ran after {} on a fresh server",
                        prefix.join(", ")
                    )
                }
            } else {
                format!("a fresh server did it before {tool} was ever called")
            };
            let note = format!(
                "{tool} {label}: \"{}\" {why}; it is not attributed to it",
                o.describe(),
            );
            // Unprompted, or absent alone and (where earlier calls made its state) after
            // them too.
            let decided =
                verdict == ReplayVerdict::Unprompted || prefix.is_empty() || second.is_some();
            (Placed::NotTheTools { decided }, Some(note))
        }
    }
}

/// Observations outside every call (idle windows after a tool, and effects no replay pinned
/// on a call's own tool): each goes to the first tool whose replay (alone, or after the calls
/// its state depends on) reproduces it; the rest stay where they were seen, with the
/// server's shared-state writes. Returns notes for the report.
async fn place_outside_calls(
    replays: &mut Replays<'_, impl NestedRuns>,
    names: &[String],
    runs: &mut [ToolRun],
    phases: &mut Vec<PhaseObservation>,
    left: LeftByCalls,
    servers: &ServersOwn,
) -> Vec<String> {
    // (the tools to ask, in order; the tool it is shown after when none did it; it)
    let mut candidates: Vec<(Vec<String>, Option<String>, Observation)> = left
        .orphans
        .into_iter()
        .map(|(tools, o)| (tools.clone(), tools.first().cloned(), o))
        .collect();
    let mut keep: Vec<PhaseObservation> = Vec::new();
    for p in phases.drain(..) {
        match (&p.phase, &p.after_tool) {
            (Phase::Idle, Some(t)) if worth_a_replay(&p.observation, servers) => {
                // The tool whose call started the threads that did it first, then the last.
                let tools = p.started_by.iter().chain([t]).cloned().collect();
                candidates.push((tools, Some(t.clone()), p.observation))
            }
            _ => keep.push(p),
        }
    }
    let mut attributed: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (tools, after, o) in candidates {
        match reproduced_by(replays, names, runs, &tools, &o).await {
            Some((i, t, by)) => {
                attributed
                    .entry((t, by.clone()))
                    .or_default()
                    .push(o.describe());
                let Some(call) = runs[i].calls.last_mut() else {
                    continue;
                };
                call.confirmed_by_replay.push(o.describe());
                call.confirmed_by = Some(match call.confirmed_by.take() {
                    Some(c) if !c.contains(&by) => format!("{c}; {by}"),
                    Some(c) => c,
                    None => by,
                });
                call.observations.push(o);
            }
            None => keep.push(PhaseObservation {
                started_by: None,
                phase: Phase::Idle,
                after_tool: after,
                observation: o,
            }),
        }
    }
    keep.extend(left.servers_own);
    *phases = keep;
    attributed
        .into_iter()
        .map(|((t, by), described)| {
            format!(
                "{} effect(s) outside {t}'s call windows are attributed to {t}: {by} reproduced them ({})",
                described.len(),
                described.join("; ")
            )
        })
        .collect()
}

/// The first of `tools` (that was called) whose replay reproduces `o`, alone or after the
/// calls its last call's state depends on: its index, its name and the replay cited.
async fn reproduced_by(
    replays: &mut Replays<'_, impl NestedRuns>,
    names: &[String],
    runs: &[ToolRun],
    tools: &[String],
    o: &Observation,
) -> Option<(usize, String, String)> {
    for t in tools {
        let Some(i) = names.iter().position(|n| n == t) else {
            continue;
        };
        let Some(last) = runs[i].calls.len().checked_sub(1) else {
            continue;
        };
        let purpose = format!(
            "\"{}\" happened outside every call, after {t}",
            o.describe()
        );
        let mut by = match replays.of(t, purpose).await {
            Ok((cited, r)) if r.judge(o) == ReplayVerdict::Reproduced => Some(cited),
            _ => None,
        };
        let prefix = state_prefix(names, runs, i, last);
        if by.is_none() && o.shape_key().is_some() && !prefix.is_empty() {
            if let Ok(d) = replays.differential(&prefix, t, &[o]).await {
                if let Some(Differential::Confirmed(cited)) = d.into_iter().next() {
                    by = Some(cited);
                }
            }
        }
        if let Some(by) = by {
            return Some((i, t.clone(), by));
        }
    }
    None
}

/// Whether an effect of the first call can be lazy initialisation: it creates something new
/// (a database file, a cache directory) or writes inside what the same call created. Changes
/// to what existed before the call never are.
fn initialisation_candidate(o: &Observation, created_in_call: &[&str]) -> bool {
    let Some(f) = o.as_file() else { return false };
    // A store's directory made private on first use (`chmod 700`) is set-up too, when a
    // replay with another tool does the same (a file's mode stays the tool's).
    let mode_changed = matches!(f.kind, crate::evidence::FileEffectKind::ModeChanged { .. })
        && f.object == crate::evidence::ObjectKind::Dir;
    f.kind.is_creation()
        || mode_changed
        || f.kind.creates_or_rewrites()
            && created_in_call
                .iter()
                .any(|c| crate::evidence::at_or_under(&f.path, c))
}

/// Tells the server's first-call initialisation apart from the first tool's writes: what
/// the run's first call created (and wrote inside what it created) is replayed with a
/// different tool, alone on a fresh server; what that replay does too is the server's, not
/// the first tool's, and moves to the report's first-call phase (reported once, as a note).
/// The other tool is one whose calls wrote nothing in the run, if any succeeded.
pub(crate) async fn first_call_initialisation(
    replays: &mut Replays<'_, impl NestedRuns>,
    evidence: &mut Attributing<'_>,
) -> Vec<String> {
    let (tools, names) = (evidence.tools, evidence.names);
    let (runs, phases) = (&mut *evidence.runs, &mut *evidence.phases);
    let mut notes = Vec::new();
    let first = runs
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            r.calls
                .iter()
                .enumerate()
                .map(move |(j, c)| (i, j, c.started_ms))
        })
        .min_by_key(|(.., started)| *started);
    let Some((tool, call, _)) = first else {
        return notes;
    };
    let observations = &runs[tool].calls[call].observations;
    // A replay is spent only where its outcome can change a verdict or a suggestion.
    if !replay_can_change_a_verdict(&tools[tool], observations) {
        return notes;
    }
    let created_paths: Vec<String> = observations
        .iter()
        .filter_map(|o| o.as_file())
        .filter(|f| f.kind == crate::evidence::FileEffectKind::Created)
        .map(|f| f.path.clone())
        .collect();
    let created: Vec<&str> = created_paths.iter().map(String::as_str).collect();
    // A different tool, preferably one that wrote nothing in the run.
    let writes = |r: &ToolRun| r.all_observations().filter(|(_, o)| o.is_write()).count();
    let other = runs
        .iter()
        .enumerate()
        .filter(|(i, r)| *i != tool && r.succeeded())
        .min_by_key(|(_, r)| writes(r))
        .map(|(i, _)| i);
    let Some(other) = other else {
        // No tool to compare with: a fresh server left alone is the control, unless the
        // call's own threads made every piece of evidence (start-up work runs on threads the
        // server started on its own).
        let own = runs[tool].calls[call].own_threads_did_it;
        if !own && observations.iter().any(Observation::is_evidential) {
            notes.extend(start_up_work(replays, names, runs, phases, (tool, call)).await);
        }
        return notes;
    };
    // A place the tool writes on every call and no other tool touches is its own, however
    // alike the other tool's paths look (replays match effects by path shape).
    let own_places = OwnPlaces::of(runs);
    let candidate =
        |o: &Observation| initialisation_candidate(o, &created) && !own_places.holds(tool, o);
    if !runs[tool].calls[call].observations.iter().any(candidate) {
        return notes;
    }
    let purpose = format!(
        "is what the first call ({}) created the server's first-call initialisation?",
        names[tool]
    );
    let replayed = match replays.of(&names[other], purpose).await {
        Ok((_, r)) => r,
        Err(why) => {
            // Unchecked, what it created cannot be firm evidence: a server may well make
            // its state directory on whichever call comes first.
            let first_call = &mut runs[tool].calls[call];
            let unchecked: Vec<String> = first_call
                .observations
                .iter()
                .filter(|o| candidate(o))
                .map(Observation::describe)
                .collect();
            first_call.unchecked_initialisation = unchecked;
            notes.push(format!(
                "what the first call ({}) created stays its own but is not firm evidence: \
                 {why}, so no replay checked whether the server does it on any first call",
                names[tool]
            ));
            return notes;
        }
    };
    let first_call = &mut runs[tool].calls[call];
    let (server, own): (Vec<Observation>, Vec<Observation>) =
        std::mem::take(&mut first_call.observations)
            .into_iter()
            .partition(|o| candidate(o) && replayed.judge(o) != ReplayVerdict::Absent);
    first_call.observations = own;
    if !server.is_empty() {
        let described: Vec<String> = server.iter().map(|o| o.describe()).collect();
        notes.push(format!(
            "{} effect(s) of the first call ({} {}) are the server's first-call initialisation, not the tool's: a replay of {} alone on a fresh server did the same ({})",
            server.len(),
            names[tool],
            first_call.label(),
            names[other],
            described.join("; ")
        ));
    }
    for o in server {
        phases.push(PhaseObservation {
            started_by: None,
            phase: Phase::FirstCall,
            after_tool: Some(names[tool].clone()),
            observation: o,
        });
    }
    notes
}

/// Lazy set-up: a place the server makes on first access (a storage directory, a database)
/// by whichever tool touches it first, blamed on a tool declared read-only that happened to
/// come first. For such a tool whose only writes are creations (and writes inside what it
/// created), a fresh server runs another tool that used the same place in the run (it wrote
/// at or under it) and then the tool: when the creation moves to the other tool, it is the
/// server's set-up, reported once as first-call initialisation, not the tool's evidence.
pub(crate) async fn lazy_set_up(
    replays: &mut Replays<'_, impl NestedRuns>,
    evidence: &mut Attributing<'_>,
) -> Vec<String> {
    let (tools, names) = (evidence.tools, evidence.names);
    let (runs, phases) = (&mut *evidence.runs, &mut *evidence.phases);
    let mut notes = Vec::new();
    for i in 0..runs.len() {
        if tools[i].hints.read_only.declared() != Some(true) {
            continue;
        }
        // Lasting creations only: what was created and removed again (a lock) is transient,
        // never firm, and no replay can change that.
        let created: Vec<String> = runs[i]
            .observations()
            .filter_map(|(_, o)| o.as_file())
            .filter(|f| f.kind == crate::evidence::FileEffectKind::Created)
            .map(|f| f.path.clone())
            .collect();
        let inside = |path: &str| created.iter().any(|c| at_or_under(path, c));
        // Only a tool whose every counted write is a creation or inside one, in windows of
        // its own (what is uncertain already is not firm).
        let only_creations = !created.is_empty()
            && runs[i].observations().all(|(c, o)| {
                !o.is_evidential()
                    || c.concurrent_with.is_empty() && o.as_file().is_some_and(|f| inside(&f.path))
            });
        if !only_creations {
            continue;
        }
        let other = (0..runs.len()).find(|&k| {
            k != i
                && runs[k].succeeded()
                && runs[k]
                    .all_observations()
                    .any(|(_, o)| o.as_file().is_some_and(|f| inside(&f.path)))
        });
        let Some(k) = other else { continue };
        let sequence = [names[k].clone(), names[i].clone()];
        let purpose = format!(
            "is what {} created the server's set-up of a place {} uses too?",
            names[i], names[k]
        );
        let Ok((id, replayed)) = replays.run((&sequence, Some(&names[i])), purpose).await else {
            continue;
        };
        let mut moved: Vec<String> = Vec::new();
        for call in &mut runs[i].calls {
            let (set_up, own): (Vec<Observation>, Vec<Observation>) =
                std::mem::take(&mut call.observations)
                    .into_iter()
                    .partition(|o| {
                        // Made by the other tool in the replay, and then not touched at all
                        // by this one (a tool that overwrote what the other made is a writer).
                        let touched = o.as_file().is_some_and(|f| {
                            let shape = format!(" {}", crate::evidence::path_shape(&f.path));
                            replayed.in_focus.iter().any(|k| k.ends_with(&shape))
                        });
                        o.as_file().is_some_and(|f| inside(&f.path))
                            && o.shape_key()
                                .is_some_and(|key| replayed.seen.contains(&key))
                            && replayed.judge(o) != ReplayVerdict::Reproduced
                            && !touched
                    });
            call.observations = own;
            for o in set_up {
                moved.push(o.describe());
                phases.push(PhaseObservation {
                    started_by: None,
                    phase: Phase::FirstCall,
                    after_tool: Some(names[i].clone()),
                    observation: o,
                });
            }
        }
        if !moved.is_empty() {
            notes.push(format!(
                "{} effect(s) of {} are the server's set-up of a place it makes on first use, not the tool's: replay {id}, {} then {} on a fresh server, made it in {}'s call instead ({})",
                moved.len(),
                names[i],
                names[k],
                names[i],
                names[k],
                moved.join("; ")
            ));
        }
    }
    notes
}

/// Tells the server's own start-up work (an update check, an index sync, a timer it set at
/// start) apart from the first call's effects when no other tool can serve as control: a
/// fresh server is greeted and left alone, calling no tool, for as long as the run's first
/// call came after the start; what it does then is its own. Those effects of the first call
/// move to the start-up phase (named with the tool whose window they fell in).
async fn start_up_work(
    replays: &mut Replays<'_, impl NestedRuns>,
    names: &[String],
    runs: &mut [ToolRun],
    phases: &mut Vec<PhaseObservation>,
    (tool, call): (usize, usize),
) -> Vec<String> {
    let first_call = &runs[tool].calls[call];
    let label = first_call.label();
    // Until the end of the first call's window, and a little more.
    replays.idle_hold = Duration::from_millis(
        first_call.started_ms + first_call.duration_ms + first_call.settle_ms + 500,
    );
    let purpose = format!(
        "did the server do on its own, calling no tool, what the first call ({} {label}) showed?",
        names[tool]
    );
    let replayed = match replays.run((&[], None), purpose).await {
        Ok((id, r)) => (id, r),
        Err(why) => {
            let first_call = &mut runs[tool].calls[call];
            // What it created (start-up work makes things; a delete stays firm).
            first_call.unchecked_initialisation = first_call
                .observations
                .iter()
                .filter(|o| {
                    o.as_file()
                        .is_some_and(|f| f.kind == crate::evidence::FileEffectKind::Created)
                })
                .map(Observation::describe)
                .collect();
            return vec![format!(
                "what the first call ({} {label}) showed stays its own but is not firm evidence: no other tool had a successful call to replay it with, and {why}",
                names[tool]
            )];
        }
    };
    let (id, replayed) = replayed;
    let first_call = &mut runs[tool].calls[call];
    let (server, own): (Vec<Observation>, Vec<Observation>) =
        std::mem::take(&mut first_call.observations)
            .into_iter()
            .partition(|o| o.is_evidential() && replayed.judge(o) != ReplayVerdict::Absent);
    first_call.observations = own;
    if server.is_empty() {
        return Vec::new();
    }
    let described: Vec<String> = server.iter().map(|o| o.describe()).collect();
    let note = format!(
        "{} effect(s) in the first call ({} {label}) are the server's own start-up work, not the tool's: replay {id}, a fresh server left alone without any call, did the same ({})",
        server.len(),
        names[tool],
        described.join("; ")
    );
    phases.extend(server.into_iter().map(|o| PhaseObservation {
        started_by: None,
        phase: Phase::Startup,
        after_tool: Some(names[tool].clone()),
        observation: o,
    }));
    vec![note]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_first_call_makes_or_makes_private_is_a_candidate_for_initialisation() {
        use crate::audit::testing::file;
        use crate::evidence::FileEffectKind;
        let of = |path: &str, kind: FileEffectKind| file(path, kind);
        let made = ["$WORKSPACE/memory/index.db"];
        assert!(initialisation_candidate(
            &of("$WORKSPACE/memory/index.db", FileEffectKind::Created),
            &made
        ));
        let made_private = |object| {
            let mut o = of(
                "$WORKSPACE/memory",
                FileEffectKind::ModeChanged {
                    from: "755".into(),
                    to: "700".into(),
                },
            );
            if let Observation::File(f) = &mut o {
                f.object = object;
            }
            o
        };
        assert!(initialisation_candidate(
            &made_private(crate::evidence::ObjectKind::Dir),
            &made
        ));
        // A file's mode is the tool's.
        assert!(!initialisation_candidate(
            &made_private(crate::evidence::ObjectKind::File),
            &made
        ));
        // An existing file changed is the tool's (unless inside what the call made).
        assert!(!initialisation_candidate(
            &of("$WORKSPACE/notes.txt", FileEffectKind::Overwritten),
            &made
        ));
    }

    #[test]
    fn a_replay_pins_clears_or_leaves_open_by_where_it_saw_the_observation() {
        let key = |p: &str| {
            crate::audit::testing::denied_attempt(p)
                .shape_key()
                .expect("key")
        };
        let replayed = Replayed {
            certain: [key("/etc/mine"), key("/etc/both")].into(),
            unprompted: [key("/etc/server-does-it"), key("/etc/both")].into(),
            in_focus: [
                key("/etc/mine"),
                key("/etc/both"),
                key("/etc/beside-busy-threads"),
                key("/etc/also-between-calls"),
            ]
            .into(),
            outside: [
                key("/etc/server-does-it"),
                key("/etc/both"),
                key("/etc/also-between-calls"),
                key("/etc/at-shutdown"),
            ]
            .into(),
            seen: [
                key("/etc/mine"),
                key("/etc/both"),
                key("/etc/server-does-it"),
                key("/etc/beside-busy-threads"),
                key("/etc/at-shutdown"),
                key("/etc/also-between-calls"),
            ]
            .into(),
        };
        let judge = |p: &str| replayed.judge(&crate::audit::testing::denied_attempt(p));
        assert_eq!(judge("/etc/mine"), ReplayVerdict::Reproduced);
        // Done where nothing else ran wins over being done unprompted too.
        assert_eq!(judge("/etc/both"), ReplayVerdict::Reproduced);
        assert_eq!(judge("/etc/server-does-it"), ReplayVerdict::Unprompted);
        // Seen again in the tool's windows while background threads ran, and never where
        // they ran alone: the tool's.
        assert_eq!(judge("/etc/beside-busy-threads"), ReplayVerdict::Reproduced);
        // Seen, but in no window of the tool's; or in its windows and between calls too (a
        // background writer): neither pinned nor cleared.
        assert_eq!(judge("/etc/at-shutdown"), ReplayVerdict::Unsure);
        assert_eq!(judge("/etc/also-between-calls"), ReplayVerdict::Unsure);
        assert_eq!(judge("/etc/never"), ReplayVerdict::Absent);
    }

    #[test]
    fn the_state_prefix_keeps_earlier_writers_and_argument_sources_in_call_order() {
        use crate::audit::testing::{call, file, ok, run};
        use crate::evidence::FileEffectKind;
        let at = |ms: u64, mut c: CallRecord| {
            c.started_ms = ms;
            c
        };
        let names: Vec<String> = ["reader", "maker", "lister", "shower", "later"]
            .map(String::from)
            .to_vec();
        let mut shower = at(40, call(1, ok(), vec![]));
        shower.pooled.insert(
            "id".into(),
            "lister call 1: structuredContent.items[0].id".into(),
        );
        let runs = vec![
            run(vec![at(10, call(1, ok(), vec![]))]),
            run(vec![at(
                20,
                call(
                    1,
                    ok(),
                    vec![file("$WORKSPACE/n/a.md", FileEffectKind::Created)],
                ),
            )]),
            run(vec![at(30, call(1, ok(), vec![]))]),
            run(vec![shower]),
            run(vec![at(
                50,
                call(1, ok(), vec![file("$WORKSPACE/x", FileEffectKind::Created)]),
            )]),
        ];
        // The reader wrote nothing and gave nothing; the later writer came after.
        assert_eq!(state_prefix(&names, &runs, 3, 0), ["maker", "lister"]);
        assert!(state_prefix(&names, &runs, 0, 0).is_empty());
    }

    #[test]
    fn the_state_prefix_keeps_the_tool_that_made_what_the_call_touched() {
        use crate::audit::testing::{call, file, ok, run};
        use crate::evidence::FileEffectKind;
        let writer = |ms: u64, path: &str| {
            let mut c = call(1, ok(), vec![file(path, FileEffectKind::Created)]);
            c.started_ms = ms;
            run(vec![c])
        };
        let names: Vec<String> = ["brancher", "a", "b", "c", "d", "e", "dropper"]
            .map(String::from)
            .to_vec();
        let mut dropper = call(
            1,
            ok(),
            vec![file(
                "$WORKSPACE/.git/refs/heads/topic",
                FileEffectKind::Deleted,
            )],
        );
        dropper.started_ms = 100;
        let runs = vec![
            writer(10, "$WORKSPACE/.git/refs/heads/topic"),
            writer(20, "$WORKSPACE/a"),
            writer(30, "$WORKSPACE/b"),
            writer(40, "$WORKSPACE/c"),
            writer(50, "$WORKSPACE/d"),
            writer(60, "$WORKSPACE/e"),
            run(vec![dropper]),
        ];
        // Five writers came before; the one that made the branch stays, with the latest.
        assert_eq!(
            state_prefix(&names, &runs, 6, 0),
            ["brancher", "c", "d", "e"]
        );
    }
}
