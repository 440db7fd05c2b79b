//! Nested runs: a tool called alone on a fresh server, to confirm or correct an uncertain attribution (replay) or to give each tool its own server (`--isolate`).

use super::*;

/// A key that identifies an observation across runs (fake network addresses differ between
/// runs, names do not; process starts are not evidence).
/// Paths match by shape (random segments such as UUIDs, hashes, timestamps and counters are
/// placeholders), so a note moved to `trash/<uuid>` matches the replay's other uuid.
pub(super) fn replay_key(o: &Observation) -> Option<String> {
    match o {
        Observation::File(f) => Some(format!(
            "file {} {}",
            f.kind.verb(),
            crate::observe::path_shape(&f.path)
        )),
        Observation::Attempt(a) => Some(format!(
            "attempt {} {}",
            a.syscall,
            crate::observe::path_shape(&a.path)
        )),
        Observation::Network(n) => Some(format!(
            "net {:?} {} {:?}",
            n.kind,
            n.name.clone().unwrap_or_else(|| n.destination.clone()),
            n.port
        )),
        Observation::Refused(r) => Some(format!("refused {}", r.what)),
        Observation::Process(_) => None,
    }
}

/// Most tools replayed in one run.
pub(super) const MAX_REPLAYS: usize = 6;

/// Calls one tool on a fresh server with a fresh workspace (`--isolate`): a nested run limited
/// to the tool. Returns its calls and the observations outside them (labelled with the tool),
/// or why the tool could not be called.
pub(super) async fn run_isolated(
    config: &RunConfig,
    stop: &watch::Receiver<bool>,
    subreaper: bool,
    tool: &str,
    remaining: Duration,
) -> Result<(Vec<CallRecord>, Vec<PhaseObservation>), String> {
    let mut cfg = config.clone();
    cfg.progress = ProgressHook::default();
    cfg.check_expectations = false;
    cfg.only_tools = Some(vec![tool.to_string()]);
    cfg.isolate = false;
    cfg.replay = false;
    cfg.transcript = None;
    cfg.run_timeout = remaining.max(Duration::from_millis(1));
    let v = Box::pin(verify(&cfg, stop.clone(), subreaper)).await;
    let r = v.report;
    if let Some(e) = &r.server.start_error {
        return Err(format!(
            "not called: its isolated server did not start ({e})"
        ));
    }
    let Some(t) = r.tools.into_iter().find(|t| t.name == tool) else {
        return Err("not called: its isolated server did not list it".into());
    };
    if t.calls.is_empty() {
        return Err(t
            .skipped
            .unwrap_or_else(|| "not called in its isolated run".into()));
    }
    let phases = r
        .phases
        .into_iter()
        .map(|mut p| {
            p.after_tool = Some(p.after_tool.unwrap_or_else(|| tool.to_string()));
            p
        })
        .collect();
    Ok((t.calls, phases))
}

/// What a replay of one tool alone on a fresh server showed, as [`replay_key`]s.
pub(super) struct Replayed {
    /// Observed where nothing but the tool could have done it: in its calls' windows (its own
    /// earlier calls may have been running, no other tool was called) while none of the
    /// server's background threads ran, and between or after its calls when they never ran.
    certain: BTreeSet<String>,
    /// Observed before the tool was first called (while the server started, or idle before
    /// the call): the server does it on its own.
    unprompted: BTreeSet<String>,
    /// Observed anywhere, the background threads' windows included.
    seen: BTreeSet<String>,
}

/// What a replay says about one observation of an uncertain call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum ReplayVerdict {
    /// The tool alone did it, where nothing else ran.
    Reproduced,
    /// The server does it before the tool is ever called: not the tool's evidence.
    Unprompted,
    /// It happened again, but only while the server's background threads ran too.
    Unsure,
    /// The tool alone never did it.
    Absent,
}

impl Replayed {
    /// What the replay says about `o`. Observations without a key (process starts) count as
    /// reproduced.
    fn judge(&self, o: &Observation) -> ReplayVerdict {
        let Some(k) = replay_key(o) else {
            return ReplayVerdict::Reproduced;
        };
        if self.certain.contains(&k) {
            ReplayVerdict::Reproduced
        } else if self.unprompted.contains(&k) {
            ReplayVerdict::Unprompted
        } else if self.seen.contains(&k) {
            ReplayVerdict::Unsure
        } else {
            ReplayVerdict::Absent
        }
    }
}

/// The replays of one run: each tool is replayed at most once, at most [`MAX_REPLAYS`] in
/// all; every replay is recorded for the report.
#[derive(Default)]
pub(super) struct Replays {
    done: BTreeMap<String, Option<Replayed>>,
    /// What each replay was for and showed.
    pub(super) records: Vec<ReplayRecord>,
}

impl Replays {
    /// What a replay of `tool` alone on a fresh server showed: made now unless it was made
    /// before; `Err` says why there is none (the budget is spent, or it could not run).
    async fn of(
        &mut self,
        config: &RunConfig,
        stop: &watch::Receiver<bool>,
        subreaper: bool,
        tool: &str,
        purpose: String,
    ) -> Result<&Replayed, &'static str> {
        if !self.done.contains_key(tool) {
            if self.done.len() >= MAX_REPLAYS {
                return Err("the replay budget is spent");
            }
            let started = Instant::now();
            let replayed = replay_keys(config, stop, subreaper, tool).await;
            self.records.push(ReplayRecord {
                tool: tool.to_string(),
                purpose,
                outcome: match &replayed {
                    Some(r) => format!(
                        "ran: {} kind(s) of effect seen, {} of them before {tool} was called",
                        r.seen.len(),
                        r.unprompted.len()
                    ),
                    None => "could not run: its server did not start".into(),
                },
                duration_ms: started.elapsed().as_millis() as u64,
            });
            self.done.insert(tool.to_string(), replayed);
        }
        match self.done.get(tool) {
            Some(Some(r)) => Ok(r),
            _ => Err("its replay could not run"),
        }
    }
}

/// Replays `tool` alone on a fresh server with a long settle period; returns what it showed,
/// or `None` when the replay could not run.
pub(super) async fn replay_keys(
    config: &RunConfig,
    stop: &watch::Receiver<bool>,
    subreaper: bool,
    tool: &str,
) -> Option<Replayed> {
    let mut cfg = config.clone();
    cfg.progress = ProgressHook::default();
    cfg.check_expectations = false;
    cfg.only_tools = Some(vec![tool.to_string()]);
    cfg.replay = false;
    cfg.transcript = None;
    cfg.settle = Duration::from_millis(300);
    cfg.settle_max = cfg.settle_max.max(Duration::from_secs(5));
    let v = Box::pin(verify(&cfg, stop.clone(), subreaper)).await;
    let r = v.report;
    if r.server.start_error.is_some() {
        return None;
    }
    // Only this tool was called (besides session set-up tools, which the explorer runs
    // first): its calls' windows hold nothing of another tool, only possibly of the server's
    // background threads.
    let quiet = r.coverage.background_threads == 0;
    let calls = || {
        r.tools
            .iter()
            .filter(|t| t.name == tool)
            .flat_map(|t| t.calls.iter())
    };
    let after_calls = || {
        r.phases
            .iter()
            .filter(|p| p.phase != Phase::Startup && p.after_tool.as_deref() == Some(tool))
    };
    let certain = calls()
        .filter(|c| !c.background_ran)
        .flat_map(|c| c.observations.iter())
        .chain(after_calls().filter(|_| quiet).map(|p| &p.observation))
        .filter_map(replay_key)
        .collect();
    // What the server did unasked, or for the set-up tools.
    let set_up = r
        .tools
        .iter()
        .filter(|t| t.name != tool)
        .flat_map(|t| t.calls.iter())
        .flat_map(|c| c.observations.iter());
    let unprompted = r
        .phases
        .iter()
        .filter(|p| p.phase == Phase::Startup || p.after_tool.as_deref().is_none_or(|t| t != tool))
        .map(|p| &p.observation)
        .chain(set_up)
        .filter_map(replay_key)
        .collect();
    let seen = r
        .tools
        .iter()
        .flat_map(|t| t.calls.iter())
        .flat_map(|c| c.observations.iter())
        .chain(r.phases.iter().map(|p| &p.observation))
        .filter_map(replay_key)
        .collect();
    Some(Replayed {
        certain,
        unprompted,
        seen,
    })
}

/// Confirms or corrects uncertain attributions: a call whose window other calls' processes
/// shared keeps only what a replay of its tool alone reproduces, and observations that belong
/// to no call (or were taken from one) go to the tool whose replay reproduces them. Returns
/// notes for the report.
pub(super) async fn replay_ambiguous(
    config: &RunConfig,
    stop: &watch::Receiver<bool>,
    subreaper: bool,
    names: &[String],
    runs: &mut [ToolRun],
    phases: &mut Vec<PhaseObservation>,
    replays: &mut Replays,
) -> Vec<String> {
    let mut notes = Vec::new();
    let matters = |o: &Observation| o.is_write() || o.as_network().is_some_and(|n| !n.loopback);
    // 1. Calls with uncertain windows keep what their own tool reproduces alone.
    let mut orphans: Vec<(Vec<String>, Observation)> = Vec::new();
    for (i, run) in runs.iter_mut().enumerate() {
        for call in run
            .calls
            .iter_mut()
            .filter(|c| !c.concurrent_with.is_empty())
        {
            let purpose = format!(
                "{} {} shared its window with {}",
                names[i],
                call.label(),
                call.concurrent_with.join(", ")
            );
            let replayed = match replays
                .of(config, stop, subreaper, &names[i], purpose)
                .await
            {
                Ok(r) => r,
                Err(why) => {
                    notes.push(format!(
                        "{} {}: {why}; it stays uncertain",
                        names[i],
                        call.label()
                    ));
                    continue;
                }
            };
            let mut own = Vec::new();
            let mut unsure = Vec::new();
            for o in std::mem::take(&mut call.observations) {
                let verdict = replayed.judge(&o);
                match verdict {
                    ReplayVerdict::Reproduced => own.push(o),
                    ReplayVerdict::Unsure => {
                        notes.push(format!(
                            "{} {}: \"{}\" happened again when {} ran alone on a fresh server, but so did the server's own background threads; it stays uncertain",
                            names[i],
                            call.label(),
                            o.describe(),
                            names[i]
                        ));
                        unsure.push(o);
                    }
                    ReplayVerdict::Unprompted | ReplayVerdict::Absent => {
                        let why = if verdict == ReplayVerdict::Absent {
                            format!(
                                "did not happen when {} ran alone on a fresh server",
                                names[i]
                            )
                        } else {
                            format!("a fresh server did it before {} was ever called", names[i])
                        };
                        notes.push(format!(
                            "{} {}: \"{}\" {why}; it is not attributed to it",
                            names[i],
                            call.label(),
                            o.describe(),
                        ));
                        if matters(&o) {
                            orphans.push((call.concurrent_tools.clone(), o));
                        }
                    }
                }
            }
            call.confirmed_by_replay = own
                .iter()
                .filter(|o| matters(o))
                .map(|o| o.describe())
                .collect();
            // What stays unsure keeps the call's uncertainty; confirmed observations are marked.
            if unsure.is_empty() {
                call.concurrent_with.clear();
            }
            own.extend(unsure);
            call.observations = own;
        }
    }
    // 2. Observations outside every call (or taken from one): find the tool that produces them.
    let mut candidates: Vec<(Vec<String>, Observation)> = orphans;
    let mut keep: Vec<PhaseObservation> = Vec::new();
    for p in phases.drain(..) {
        match (&p.phase, &p.after_tool) {
            (Phase::Idle, Some(t)) if matters(&p.observation) => {
                candidates.push((vec![t.clone()], p.observation))
            }
            _ => keep.push(p),
        }
    }
    for (tools, o) in candidates {
        let mut placed = false;
        for t in &tools {
            let Some(i) = names.iter().position(|n| n == t) else {
                continue;
            };
            let purpose = format!(
                "\"{}\" happened outside every call, after {t}",
                o.describe()
            );
            let reproduced = replay_key(&o).is_some()
                && matches!(replays.of(config, stop, subreaper, t, purpose).await, Ok(r) if r.judge(&o) == ReplayVerdict::Reproduced);
            if reproduced {
                if let Some(last) = runs[i].calls.last_mut() {
                    notes.push(format!("\"{}\" is attributed to {t}: a replay of {t} alone on a fresh server reproduced it", o.describe()));
                    last.confirmed_by_replay.push(o.describe());
                    last.observations.push(o.clone());
                    placed = true;
                    break;
                }
            }
        }
        if !placed {
            keep.push(PhaseObservation {
                phase: Phase::Idle,
                after_tool: tools.first().cloned(),
                observation: o,
            });
        }
    }
    *phases = keep;
    notes
}

/// Whether an effect of the first call can be lazy initialisation: it creates something new
/// (a database file, a cache directory) or writes inside what the same call created. Changes
/// to what existed before the call never are.
fn initialisation_candidate(o: &Observation, created_in_call: &[&str]) -> bool {
    let Some(f) = o.as_file() else { return false };
    let inside_new = created_in_call
        .iter()
        .any(|c| f.path == *c || f.path.strip_prefix(c).is_some_and(|r| r.starts_with('/')));
    match f.kind {
        crate::observe::FileEffectKind::Created
        | crate::observe::FileEffectKind::Transient { .. } => true,
        crate::observe::FileEffectKind::Appended
        | crate::observe::FileEffectKind::Extended
        | crate::observe::FileEffectKind::Overwritten
        | crate::observe::FileEffectKind::Rewritten
        | crate::observe::FileEffectKind::StoreChanged { .. } => inside_new,
        _ => false,
    }
}

/// Tells the server's first-call initialisation apart from the first tool's writes: what
/// the run's first call created (and wrote inside what it created) is replayed with a
/// different tool, alone on a fresh server; what that replay does too is the server's, not
/// the first tool's, and moves to the report's first-call phase (reported once, as a note).
/// The other tool is one whose calls wrote nothing in the run, if any succeeded.
pub(super) async fn first_call_initialisation(
    config: &RunConfig,
    stop: &watch::Receiver<bool>,
    subreaper: bool,
    names: &[String],
    runs: &mut [ToolRun],
    phases: &mut Vec<PhaseObservation>,
    replays: &mut Replays,
) -> Vec<String> {
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
    let created_paths: Vec<String> = observations
        .iter()
        .filter_map(|o| o.as_file())
        .filter(|f| f.kind == crate::observe::FileEffectKind::Created)
        .map(|f| f.path.clone())
        .collect();
    let created: Vec<&str> = created_paths.iter().map(String::as_str).collect();
    if !observations
        .iter()
        .any(|o| initialisation_candidate(o, &created))
    {
        return notes;
    }
    // A different tool, preferably one that wrote nothing in the run.
    let writes = |r: &ToolRun| r.observations().filter(|(_, o)| o.is_write()).count();
    let Some(other) = runs
        .iter()
        .enumerate()
        .filter(|(i, r)| *i != tool && r.succeeded())
        .min_by_key(|(_, r)| writes(r))
        .map(|(i, _)| i)
    else {
        notes.push(format!(
            "what the first call ({} {}) created stays its own: no other tool had a successful call to replay it with",
            names[tool],
            runs[tool].calls[call].label()
        ));
        return notes;
    };
    let purpose = format!(
        "is what the first call ({}) created the server's first-call initialisation?",
        names[tool]
    );
    let replayed = match replays
        .of(config, stop, subreaper, &names[other], purpose)
        .await
    {
        Ok(r) => r,
        Err(why) => {
            notes.push(format!(
                "what the first call ({}) created stays its own: {why}",
                names[tool]
            ));
            return notes;
        }
    };
    let first_call = &mut runs[tool].calls[call];
    let (server, own): (Vec<Observation>, Vec<Observation>) =
        std::mem::take(&mut first_call.observations)
            .into_iter()
            .partition(|o| {
                initialisation_candidate(o, &created) && replayed.judge(o) != ReplayVerdict::Absent
            });
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
            phase: Phase::FirstCall,
            after_tool: Some(names[tool].clone()),
            observation: o,
        });
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{Mechanism, WriteAttempt};

    fn denied_write(path: &str) -> Observation {
        Observation::Attempt(WriteAttempt {
            syscall: "openat".into(),
            path: path.into(),
            target: None,
            denied: true,
            destructive: false,
            pid: 1,
            mechanism: Mechanism::Attempt,
        })
    }

    #[test]
    fn a_replay_pins_clears_or_leaves_open_by_where_it_saw_the_observation() {
        let key = |p: &str| replay_key(&denied_write(p)).expect("key");
        let replayed = Replayed {
            certain: [key("/etc/mine"), key("/etc/both")].into(),
            unprompted: [key("/etc/server-does-it"), key("/etc/both")].into(),
            seen: [
                key("/etc/mine"),
                key("/etc/both"),
                key("/etc/server-does-it"),
                key("/etc/beside-busy-threads"),
            ]
            .into(),
        };
        let judge = |p: &str| replayed.judge(&denied_write(p));
        assert_eq!(judge("/etc/mine"), ReplayVerdict::Reproduced);
        // Done where nothing else ran wins over being done unprompted too.
        assert_eq!(judge("/etc/both"), ReplayVerdict::Reproduced);
        assert_eq!(judge("/etc/server-does-it"), ReplayVerdict::Unprompted);
        // Seen again, but only while background threads ran: neither pinned nor cleared.
        assert_eq!(judge("/etc/beside-busy-threads"), ReplayVerdict::Unsure);
        assert_eq!(judge("/etc/never"), ReplayVerdict::Absent);
    }
}
