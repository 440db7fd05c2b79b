//! Nested runs: the same pipeline on a narrower plan (some tools, on a fresh server with a
//! fresh workspace), for a replay that confirms an attribution or for a tool that `--isolate`
//! gives a server of its own. A nested run neither replays, isolates, checks expectations,
//! keeps a transcript nor shows progress; it fits in the time the main run has left.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::server::Ctx;
use crate::config::RunConfig;
use crate::evidence::{CallRecord, PhaseObservation};
use crate::progress::ProgressHook;
use crate::report::Report;

/// What a nested run does differently from the run it is nested in.
pub(super) struct NestedPlan<'a> {
    /// The tools it calls.
    pub(super) tools: &'a [String],
    /// The longest it may take.
    pub(super) time: Duration,
    /// A replay's waits, when it is one (else the run's own settings hold).
    pub(super) replay: Option<ReplayWaits>,
}

/// How a replay waits: its tools are called in the explorer's order, every window settles
/// longer, and what the calls leave running gets time to act.
pub(super) struct ReplayWaits {
    /// How long it waits after its last call for what its calls left running.
    pub(super) late_wait: Duration,
    /// How long its server is left alone after the greeting (a replay that calls no tool).
    pub(super) hold_before_calls: Option<Duration>,
}

impl NestedPlan<'_> {
    /// The configuration of the nested run.
    fn narrow(&self, config: &RunConfig) -> RunConfig {
        let mut cfg = config.clone();
        cfg.progress = ProgressHook::default();
        cfg.check_expectations = false;
        cfg.only_tools = Some(self.tools.to_vec());
        cfg.isolate = false;
        cfg.replay = false;
        cfg.transcript = None;
        cfg.run_timeout = self.time.max(Duration::from_millis(1));
        cfg.begun = Instant::now();
        if let Some(waits) = &self.replay {
            cfg.keep_order = true;
            cfg.settle = Duration::from_millis(300);
            cfg.settle_max = cfg.settle_max.max(Duration::from_secs(5));
            // What the calls leave running (a timer, a sleeping thread) gets its time to act:
            // the effect under question may be one it makes seconds after the call answered.
            cfg.late_wait = waits.late_wait.min(self.time);
            if let Some(hold) = waits.hold_before_calls {
                cfg.hold_before_calls = hold;
            }
        }
        cfg
    }
}

/// Runs the pipeline of `config` on the narrower `plan`; returns its report.
pub(super) async fn run(
    config: &RunConfig,
    plan: NestedPlan<'_>,
    stop: &watch::Receiver<bool>,
    subreaper: bool,
) -> Report {
    let narrowed = plan.narrow(config);
    Box::pin(super::pipeline(&narrowed, stop.clone(), subreaper))
        .await
        .report
}

/// Calls one tool on a fresh server with a fresh workspace (`--isolate`): a nested run limited
/// to the tool. Returns its calls and the observations outside them (labelled with the tool),
/// or why the tool could not be called.
pub(super) async fn isolated(
    ctx: &Ctx<'_>,
    tool: &str,
    remaining: Duration,
) -> Result<(Vec<CallRecord>, Vec<PhaseObservation>), String> {
    let tools = [tool.to_string()];
    let plan = NestedPlan {
        tools: &tools,
        time: remaining,
        replay: None,
    };
    let r = run(ctx.config, plan, &ctx.stop, ctx.subreaper).await;
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
