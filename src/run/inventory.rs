//! The inventory stage: the greeted server lists its tools; what it did while it started is
//! start-up work, and work it started on its own settles before the first call; the threads
//! that run while no call is in flight are its background workers. Under `--isolate` the
//! listing server is stopped here: every tool gets a server of its own.

use super::collect::{RunEvent, RunLog};
use super::host::settle_start;
use super::launch::Launched;
use super::server::{Live, RunContext, Stop, probe_background, stop_server};
use crate::evidence::{Coverage, Phase, PhaseObservation};
use crate::mcp::client::Inventory;
use crate::observe::Recorder;
use crate::sandbox::SandboxLevel;
use crate::sandbox::tree::ProcessTree;

/// The server's tools and what it did before the first call.
pub(super) struct Listed {
    pub(super) recorder: Recorder,
    /// What the observers cover.
    pub(super) coverage: Coverage,
    pub(super) sandbox_level: Option<SandboxLevel>,
    /// How many nested runs may go side by side.
    pub(super) side_by_side: usize,
    /// The listing server, still running (none under `--isolate`).
    pub(super) live: Option<Live>,
    pub(super) inventory: Inventory,
    /// Start-up work and, under `--isolate`, what the listing server did until it stopped.
    pub(super) phases: Vec<PhaseObservation>,
    /// Threads that ran while no call was in flight.
    pub(super) background: Vec<u32>,
    /// Threads of the sandbox's own processes above the server's (init, wrapper).
    pub(super) skip: usize,
    /// Why the listing was cut short (an interrupt, the timeout), if it was: the explore
    /// stage reports it after the explorer's own reason, which wins (the first reason given
    /// holds).
    pub(super) stopped: Option<String>,
}

/// Lists the tools of the launched server and lets its start-up work settle.
pub(super) async fn list(ctx: &RunContext<'_>, launched: Launched, log: &mut RunLog) -> Listed {
    let Launched {
        mut recorder,
        coverage,
        mut live,
        sandbox_level,
        side_by_side,
    } = launched;
    let mut stopped = None;
    let inventory = tokio::select! {
        inventory = live.client.list_tools() => inventory,
        why = ctx.interruption() => {
            let incomplete = Some(format!("{why} while the tools were being listed"));
            stopped = Some(why);
            Inventory {
                incomplete,
                ..Default::default()
            }
        }
    };
    log.emit(RunEvent::Listed {
        sha256: inventory.sha256.clone(),
    });
    let mut phases = PhaseObservation::all_in(Phase::Startup, recorder.checkpoint());
    // Work the server started on its own settles before the first call.
    let mut proven_quiet = false;
    if !ctx.config.explore.isolate {
        let wait = settle_start(&mut recorder, ctx, &mut live).await;
        proven_quiet = wait.proven;
        log.emit(RunEvent::Notes(
            wait.note(ctx.config.waits.startup_quiet)
                .into_iter()
                .collect(),
        ));
        phases.extend(PhaseObservation::all_in(Phase::Startup, wait.observations));
    }
    let skip = if sandbox_level.is_some() { 3 } else { 1 };
    // A tree proven quiet for the probe's length has no thread that runs on its own then.
    let background = if proven_quiet {
        Vec::new()
    } else {
        probe_background(live.process.pid().map(ProcessTree::new), skip).await
    };
    let mut live = Some(live);
    if ctx.config.explore.isolate {
        log.note(
            "--isolate: every tool was called on a fresh server with a fresh workspace".into(),
        );
        // The listing server is not used for calls: each tool gets its own.
        if let Some(l) = live.take() {
            stop_server(l, ctx, log, &mut recorder, Stop::Midway).await;
        }
        phases.extend(PhaseObservation::all_in(Phase::Idle, recorder.checkpoint()));
    }
    Listed {
        recorder,
        coverage,
        sandbox_level,
        side_by_side,
        live,
        inventory,
        phases,
        background,
        skip,
        stopped,
    }
}
