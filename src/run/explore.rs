//! The explore stage: the control requests, then the explorer calls every tool through the
//! run's [`ServerHost`] (which observes each call's window and restarts a server that broke),
//! waits for what the last calls left running, and the server is shut down.

use serde_json::Value;

use super::collect::{RunEvent, RunLog, TimedStage};
use super::host::ServerHost;
use super::inventory::Listed;
use super::server::{RunContext, Stop, stop_server};
use crate::evidence::{Coverage, Phase, PhaseObservation, ToolRun};
use crate::exercise::explore::{Explored, Explorer, Given};
use crate::mcp::client::Inventory;
use crate::sandbox::scratch::Scratch;

/// What the calls and the windows between them showed, which attribution then refines.
pub(super) struct Evidence {
    /// Each tool's calls, in inventory order.
    pub(super) runs: Vec<ToolRun>,
    /// The windows that belong to no call (start-up, controls, idle, shutdown).
    pub(super) phases: Vec<PhaseObservation>,
}

/// What the run reached besides the evidence: the judging and the coverage statement need it.
pub(super) struct Reached {
    /// What each observer covered, as the run's last checkpoint left it.
    pub(super) observers: Vec<crate::observe::ObserverStatus>,
    pub(super) coverage: Coverage,
    pub(super) inventory: Inventory,
    /// Per tool: whether a call was made (or attempted).
    pub(super) called: Vec<bool>,
    /// Per tool: the first argument set planned.
    pub(super) planned_arguments: Vec<Value>,
    /// Values learned from responses.
    pub(super) pooled_values: usize,
    /// How many threads ran while no call was in flight.
    pub(super) background_threads: usize,
    /// The tool whose call was in flight when a watchdog ended the server.
    pub(super) limit_during: Option<String>,
    /// How many nested runs may go side by side.
    pub(super) side_by_side: usize,
    /// Whether the run's last stop was a graceful stop of a live server (its input closed,
    /// time to exit), so that what the server does at its end was watched.
    pub(super) stopped_gracefully: bool,
}

/// The explored run, its server stopped.
pub(super) struct Exercised {
    pub(super) evidence: Evidence,
    pub(super) reached: Reached,
}

/// Makes the control requests and every tool's calls, then stops the server.
pub(super) async fn explore(
    ctx: &RunContext<'_>,
    scratch: &Scratch,
    listed: Listed,
    log: &mut RunLog,
) -> Exercised {
    let Listed {
        mut recorder,
        coverage,
        sandbox_level,
        side_by_side,
        live,
        inventory,
        phases,
        background,
        skip,
        stopped,
    } = listed;
    let isolate = ctx.config.explore.isolate;
    let config = ctx.config;
    let explorer = Explorer::new(
        &inventory.tools,
        &config.explore,
        Given::new(
            &config.server.command,
            &config.server.env,
            config.seed,
            &config.explore.packs,
        )
        .leaving_out(
            ctx.secrets
                .as_ref()
                .map(|w| w.workspace_files())
                .unwrap_or_default(),
        ),
        &config.progress,
        &scratch.workspace,
    );
    let mut host = ServerHost {
        ctx,
        sandbox_level,
        recorder: &mut recorder,
        log,
        live,
        restarts: 0,
        phases,
        background,
        idle_sample: None,
        lingering: Vec::new(),
        limit_during: None,
        skip,
        side_by_side,
        long_pollers: inventory
            .tools
            .iter()
            .filter(|t| crate::exercise::semantics::waits_for_events(t))
            .map(|t| t.name.clone())
            .collect(),
        resolving: inventory
            .tools
            .iter()
            .filter(|t| t.resolve)
            .map(|t| t.name.clone())
            .collect(),
        notes: Vec::new(),
    };
    let began = std::time::Instant::now();
    let controls = if isolate {
        Vec::new()
    } else {
        host.controls(&inventory.tools).await
    };
    host.log
        .emit(RunEvent::Took(TimedStage::Controls, began.elapsed()));
    let explored = explorer.run(&mut host).await;
    let mut late = None;
    let began = std::time::Instant::now();
    if explored.partial.is_none() && !isolate {
        late = host.wait_for_late_effects().await;
    }
    host.log
        .emit(RunEvent::Took(TimedStage::LateWait, began.elapsed()));
    let ServerHost {
        live,
        restarts,
        mut phases,
        background,
        limit_during,
        notes: host_notes,
        ..
    } = host;
    log.emit(RunEvent::Controls(controls));
    log.emit(RunEvent::Restarts(restarts));
    if let Some((tool, waited)) = late {
        log.note(format!(
            "after the last call, waited {} ms for what calls of {tool} left running (a timer or a sleeping thread) to act on its own (--late-wait {} ms)",
            waited.as_millis(),
            ctx.config.waits.late_wait.as_millis()
        ));
    }
    log.emit(RunEvent::Notes(host_notes));
    let Explored {
        runs,
        called,
        planned_arguments,
        partial,
        notes: explorer_notes,
        pooled_values,
    } = explored;
    // A stop while the tools were listed leaves the run as partial as one during the calls.
    for why in partial.into_iter().chain(stopped) {
        log.emit(RunEvent::Partial(why));
    }
    log.emit(RunEvent::Notes(explorer_notes));

    // Shutdown.
    let began = std::time::Instant::now();
    // Whether the run saw its server's own end: a graceful stop of a live server.
    let stopped_gracefully = live.is_some() && ctx.must_stop().is_none();
    if let Some(l) = live {
        stop_server(l, ctx, log, &mut recorder, Stop::AtEnd).await;
    }
    phases.extend(PhaseObservation::all_in(
        Phase::Shutdown,
        recorder.checkpoint_whole(),
    ));
    log.emit(RunEvent::Took(TimedStage::Shutdown, began.elapsed()));
    let observers = recorder.statuses();
    log.emit(RunEvent::Notes(recorder.take_notes()));
    // Closing the change notifications and the packet socket takes the kernel 10 to 30 ms
    // (each waits for a grace period): the observers go on a thread of their own, off the
    // run's path, while replays and judging go on.
    recorder.close_off_path();
    Exercised {
        evidence: Evidence { runs, phases },
        reached: Reached {
            observers,
            coverage,
            inventory,
            called,
            planned_arguments,
            pooled_values,
            background_threads: background.len(),
            limit_during,
            side_by_side,
            stopped_gracefully,
        },
    }
}
