//! Nested runs: the same pipeline on a narrower plan (some tools, on a fresh server with a
//! fresh workspace), for a replay attribution asks for ([`NestedRuns`]) or for a tool that
//! `--isolate` gives a server of its own. A nested run neither replays, checks expectations,
//! keeps a transcript nor shows progress, and fits in the time the main run has left; a
//! replay of an `--isolate` run is isolated too, a tool's own server is not.

use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::server::RunContext;
use crate::attribution::{NestedPlan, NestedRuns};
use crate::config::RunConfig;
use crate::evidence::{CallRecord, PhaseObservation};
use crate::progress::ProgressHook;
use crate::report::Report;

/// The nested runs of a run: its configuration, its stop signal, and whether hintcheck reaps
/// the servers' orphans.
pub(super) struct Nested<'a> {
    config: &'a RunConfig,
    stop: &'a watch::Receiver<bool>,
    subreaper: bool,
}

impl<'a> Nested<'a> {
    /// The nested runs of the run `ctx` launches servers for.
    pub(super) fn of(ctx: &'a RunContext<'a>) -> Self {
        Nested {
            config: ctx.config,
            stop: &ctx.stop,
            subreaper: ctx.subreaper,
        }
    }
}

impl NestedRuns for Nested<'_> {
    async fn run(&self, plan: NestedPlan<'_>) -> Report {
        let narrowed = narrowed(self.config, &plan);
        Box::pin(super::in_either_era(
            &narrowed,
            self.stop.clone(),
            self.subreaper,
        ))
        .await
        .report
    }
}

/// The configuration of a nested run of `config` on `plan`.
fn narrowed(config: &RunConfig, plan: &NestedPlan<'_>) -> RunConfig {
    let mut cfg = config.clone();
    cfg.progress = ProgressHook::default();
    cfg.judge.check_expectations = false;
    cfg.explore.only_tools = Some(plan.tools.to_vec());
    cfg.nested.replay = false;
    cfg.outputs.transcript = None;
    cfg.waits.run_timeout = plan.time.max(Duration::from_millis(1));
    cfg.begun = Instant::now();
    match &plan.replay {
        // A tool `--isolate` gives a server of its own.
        None => cfg.explore.isolate = false,
        // A replay of an isolated run is isolated too: each of its tools on a server of its
        // own.
        Some(waits) => {
            cfg.explore.keep_order = true;
            // A replay repeats the calls whose effect is in question; the riskier cases of
            // the tools before the one in question would act outside its windows and blur
            // what it showed.
            cfg.explore.riskier_cases = false;
            cfg.waits.settle = Duration::from_millis(300);
            cfg.waits.settle_max = cfg.waits.settle_max.max(Duration::from_secs(5));
            // What the calls leave running (a timer, a sleeping thread) gets its time to
            // act: the effect under question may be one it makes seconds after the call
            // answered.
            cfg.waits.late_wait = waits.late_wait.min(plan.time);
            if let Some(hold) = waits.hold_before_calls {
                cfg.waits.hold_before_calls = hold;
            }
            cfg.waits.stop_at_once = waits.stop_at_once;
        }
    }
    cfg
}

/// Calls one tool on a fresh server with a fresh workspace (`--isolate`): a nested run limited
/// to the tool. Returns its calls and the observations outside them (labelled with the tool),
/// or why the tool could not be called.
pub(super) async fn isolated(
    ctx: &RunContext<'_>,
    tool: &str,
    remaining: Duration,
) -> Result<(Vec<CallRecord>, Vec<PhaseObservation>), String> {
    let tools = [tool.to_string()];
    let plan = NestedPlan {
        tools: &tools,
        time: remaining,
        replay: None,
    };
    let r = Nested::of(ctx).run(plan).await;
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
