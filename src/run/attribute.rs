//! The attribute stage: who did what. What the server also did for the control requests is
//! its per-request bookkeeping; the upkeep of its own installation is its own; writes to what
//! it keeps for several tools, uncertain attributions, failed calls' effects, its first-call
//! initialisation and lazy set-up are settled by replays (nested runs of the same pipeline on
//! a narrower plan); its per-call bookkeeping is told apart from the tools' own writes.

use super::collect::{RunEvent, RunLog};
use super::explore::{Evidence, Exercised, Reached};
use super::nested::Nested;
use super::server::RunContext;
use crate::attribution::replay::{
    Attributing, Replays, first_call_initialisation, lazy_set_up, replay_ambiguous,
};
use crate::attribution::server_wide;
use crate::evidence::Phase;

/// The evidence with every effect given to whom it belongs.
pub(super) struct Attributed {
    pub(super) evidence: Evidence,
    pub(super) reached: Reached,
}

/// Attributes what the calls and the windows between them showed.
pub(super) async fn attribute(
    ctx: &RunContext<'_>,
    exercised: Exercised,
    log: &mut RunLog,
) -> Attributed {
    let Exercised {
        evidence: Evidence {
            mut runs,
            mut phases,
        },
        reached,
    } = exercised;
    let config = ctx.config;
    let tools = &reached.inventory.tools;
    let names: Vec<String> = tools.iter().map(|t| t.name.clone()).collect();
    // What the server also did for the control requests is its per-request bookkeeping.
    log.emit(RunEvent::Notes(server_wide::discount_per_request(
        &mut runs,
        &names,
        &mut phases,
    )));
    // The upkeep of the server's own installation is its own, and writes to what it keeps
    // for several tools earn firmness from a replay (each tool has its own server under
    // --isolate: nothing is shared there).
    let installed: Vec<&std::path::Path> = config
        .installed
        .iter()
        .flat_map(|i| i.npm.iter().chain(i.venv.iter()))
        .map(|p| p.as_path())
        .collect();
    let servers_own = server_wide::ServersOwn::of(
        &runs,
        &phases,
        server_wide::installation_roots(&config.server.command, &installed),
    );
    log.emit(RunEvent::Notes(server_wide::mark_own_installation(
        &mut runs,
        &names,
        &servers_own,
    )));
    if !config.explore.isolate {
        server_wide::mark_shared_state(tools, &mut runs, &servers_own);
    }

    // Confirm uncertain attributions by replaying tools alone on fresh servers, and tell the
    // server's first-call initialisation apart from the first tool's writes.
    let nested = Nested::of(ctx);
    // Replays kill their server at their end only where the run watched its own server's
    // end (a graceful stop) and it did nothing there.
    let quiet_end =
        reached.stopped_gracefully && !phases.iter().any(|p| p.phase == Phase::Shutdown);
    let mut replays = Replays::new(&nested, config.waits.late_wait, ctx.deadline)
        .side_by_side(reached.side_by_side)
        .stopping_at_once(quiet_end);
    if config.nested.replay && log.partial().is_none() {
        log.emit(RunEvent::Stage("confirming attributions"));
        let mut evidence = Attributing {
            tools,
            names: &names,
            runs: &mut runs,
            phases: &mut phases,
        };
        let notes = replay_ambiguous(&mut replays, &mut evidence, &servers_own).await;
        log.emit(RunEvent::Notes(notes));
        if !config.explore.isolate {
            let notes = first_call_initialisation(&mut replays, &mut evidence).await;
            log.emit(RunEvent::Notes(notes));
            let notes = lazy_set_up(&mut replays, &mut evidence).await;
            log.emit(RunEvent::Notes(notes));
        }
    }
    log.emit(RunEvent::Replays(replays.records));

    // A secret found in traffic goes where that traffic went.
    crate::attribution::carried::secrets_follow_their_traffic(&names, &mut runs, &mut phases);

    // Tell the server's per-call bookkeeping apart from the tools' own writes.
    log.emit(RunEvent::Notes(server_wide::mark_bookkeeping(
        &mut runs, &names, &phases,
    )));
    Attributed {
        evidence: Evidence { runs, phases },
        reached,
    }
}
