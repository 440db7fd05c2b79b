//! Attribution: who did what, before anything is judged. Effects the server has on its own
//! account (per-request and per-call bookkeeping, the upkeep of its own installation, state it
//! keeps for several tools) are told apart from the tools' ([`server_wide`]); uncertain
//! attributions, failed calls' effects, first-call initialisation and lazy set-up are settled
//! by replays on fresh servers ([`replay`]). A replay is a nested run: attribution asks for
//! one through [`NestedRuns`] with a [`NestedPlan`] and reads the report it returns, so it
//! knows nothing of how a run is made.

use std::future::Future;
use std::time::Duration;

use crate::report::Report;

pub mod carried;
pub mod replay;
pub mod server_wide;

/// What a nested run does differently from the run it is nested in.
pub struct NestedPlan<'a> {
    /// The tools it calls.
    pub tools: &'a [String],
    /// The longest it may take.
    pub time: Duration,
    /// A replay's waits, when it is one; `None` is a tool that `--isolate` gives a server of
    /// its own (the run's own waits hold, and the nested run is not isolated again).
    pub replay: Option<ReplayWaits>,
}

/// How a replay waits: its tools are called in the explorer's order, every window settles
/// longer, and what the calls leave running gets time to act.
pub struct ReplayWaits {
    /// How long it waits after its last call for what its calls left running.
    pub late_wait: Duration,
    /// How long its server is left alone after the greeting (a replay that calls no tool).
    pub hold_before_calls: Option<Duration>,
    /// Whether its server is killed once its last window and late wait closed, instead of
    /// closing its input and waiting for it to exit: set when the main run stopped its own
    /// server gracefully at its end and saw nothing there, so that the server's shutdown is
    /// not what any replay is asked about (stops midway, after a hung call, stay graceful).
    pub stop_at_once: bool,
}

/// Makes nested runs: the pipeline of the run being attributed, on a narrower plan.
pub trait NestedRuns {
    /// Runs `plan` on a fresh server with a fresh workspace; returns its report.
    fn run(&self, plan: NestedPlan<'_>) -> impl Future<Output = Report>;
}
