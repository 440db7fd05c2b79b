//! The per-server pipeline, as a list of stages each a function of the previous one's value:
//! prepare (scratch directories, seed, placement) → launch (observers, sandbox, greeting) →
//! inventory (the tool listing, start-up work) → explore (controls, every tool's calls,
//! shutdown) → attribute (server-wide effects, replays) → judge (audits, coverage). Each stage
//! emits what it learned to the run's collector, which assembles the [`Report`] on every path
//! (finished, a failed start, a run that never started, an interrupted one). Nested runs
//! (replays, `--isolate`) run the same pipeline (era fallback included) on a narrower plan.
//! A misbehaving server never makes this fail: whatever happens ends up in the report, with
//! the exit code it deserves.

use std::time::Instant;

use tokio::sync::watch;

use crate::config::RunConfig;
use crate::evidence::CallRecord;
use crate::mcp::client::EraChoice;
use crate::report::Report;
use crate::sandbox::scratch::Scratch;

mod attribute;
mod collect;
mod explore;
mod host;
mod inventory;
mod judge;
mod launch;
mod limits;
mod nested;
mod observers;
mod prepare;
mod records;
mod server;

pub use collect::Verification;
use collect::{Ending, RunEvent, RunLog, TimedStage};
use server::RunContext;

/// Runs one verification. `stop` ends the run early (the report is then partial). Its
/// scratch directories (and its replays') are removed off its path: the caller waits for
/// them ([`crate::sandbox::scratch::wait_for_removals`]) before the process ends.
pub async fn verify(
    config: &RunConfig,
    stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Verification {
    let mut v = in_either_era(config, stop.clone(), subreaper).await;
    for spec in &config.variants {
        if let Some(why) = v
            .report
            .partial
            .clone()
            .or_else(|| (*stop.borrow()).then(|| "the run was interrupted".to_string()))
        {
            v.report
                .notes
                .push(format!("the variant {} was not run: {why}", spec.name));
            continue;
        }
        let variant = in_either_era(&config.for_variant(spec), stop.clone(), subreaper).await;
        v.report.variants.push(crate::report::VariantReport {
            name: spec.name.clone(),
            settings: spec.settings(),
            report: Box::new(variant.report),
        });
    }
    collect::baseline_across_variants(&mut v.report, config);
    collect::decide_exit_with_variants(&mut v.report);
    if config.judge.check_expectations {
        collect::check_expectations(&mut v.report, config);
    }
    v
}

/// The pipeline; a server that cannot be spoken to in the modern era is greeted once more,
/// in the handshake era, before the run gives up on it.
async fn in_either_era(
    config: &RunConfig,
    stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Verification {
    let mut v = pipeline(config, stop.clone(), subreaper).await;
    if let Some(why) = handshake_era_needed(config, &v.report) {
        let first_did_not_start = v.report.server.start_error.is_some();
        let mut legacy = config.clone();
        legacy.server.era = EraChoice::Legacy;
        if v.report.partial.is_none() && !*stop.borrow() {
            v = pipeline(&legacy, stop, subreaper).await;
            let note = if first_did_not_start && v.report.server.start_error.is_some() {
                // A server that dies on its own (a bad argument, a missing file) dies in
                // either era: the probe is not to blame.
                format!(
                    "the server ended before answering in the handshake era too (initialize, no server/discover probe), so the probe was not the cause (the first try said: {why}); see the server's own output"
                )
            } else {
                format!(
                    "the run was made again in the handshake era (initialize, no server/discover probe): {why}"
                )
            };
            v.report.notes.insert(0, note);
        }
    }
    v
}

/// The report of a run whose server never started because its `[setup]` failed or was
/// stopped (`stopped`: by an interrupt or a timeout, so the report is partial): the cause, no
/// sandbox claimed, exit 3.
pub fn never_started(config: &RunConfig, cause: String, stopped: bool) -> Verification {
    let mut log = RunLog::new(config, config.begun, false);
    log.emit(RunEvent::StartError(cause.clone()));
    let reason = format!("harness error: {cause}");
    if stopped {
        log.emit(RunEvent::Partial(cause));
    }
    log.assemble(config, Ending::NotStarted { reason }, None)
}

/// One run of the pipeline: the stages, then the report from what they collected.
async fn pipeline(
    config: &RunConfig,
    stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Verification {
    let mut log = RunLog::new(config, Instant::now(), subreaper);
    log.emit(RunEvent::Stage("starting the server"));
    let began = Instant::now();
    let mut prepared = match prepare::prepare(config, &mut log, stop, subreaper) {
        Ok(p) => p,
        Err(ending) => return log.assemble(config, ending, None),
    };
    log.emit(RunEvent::Took(TimedStage::Prepare, began.elapsed()));
    let ending = stages(&prepared.ctx, &mut prepared.scratch, &mut log).await;
    log.assemble(config, ending, Some(prepared.scratch))
}

/// The stages from the launch of the server to the judgement of what it did. Once the server
/// is stopped and its directories read for the last time, they are removed off the run's path
/// (while replays and judging go on).
async fn stages(ctx: &RunContext<'_>, scratch: &mut Scratch, log: &mut RunLog) -> Ending {
    let mut began = Instant::now();
    let mut took = |log: &mut RunLog, stage: TimedStage| {
        log.emit(RunEvent::Took(stage, began.elapsed()));
        began = Instant::now();
    };
    let launched = launch::launch(ctx, scratch, log).await;
    took(log, TimedStage::Launch);
    let launched = match launched {
        Ok(l) => l,
        Err(ending) => return ending,
    };
    let listed = inventory::list(ctx, launched, log).await;
    took(log, TimedStage::Inventory);
    let exercised = explore::explore(ctx, scratch, listed, log).await;
    if let Err(e) = scratch.remove_off_path() {
        log.note(e);
    }
    took(log, TimedStage::Explore);
    let attributed = attribute::attribute(ctx, exercised, log).await;
    took(log, TimedStage::Attribute);
    judge::judge(ctx, attributed, log);
    took(log, TimedStage::Judge);
    Ending::Finished
}

/// Why a run made with the era left to detection (`--era auto`) must be made again in the
/// handshake era, if it must: the server died or hung up on the `server/discover` probe (an
/// older SDK that crashes on an unknown request before `initialize`), or it answered the probe
/// and listed its tools but refused every call as uninitialised.
fn handshake_era_needed(config: &RunConfig, report: &Report) -> Option<String> {
    if config.server.era != EraChoice::Auto {
        return None;
    }
    if let Some(error) = &report.server.start_error {
        let probe = "server/discover";
        let died = [
            crate::rpc::session::SessionError::Closed {
                method: probe.into(),
            }
            .to_string(),
            format!("could not send {probe}"),
        ];
        return died
            .iter()
            .any(|d| error.contains(d.as_str()))
            .then(|| "the server hung up on the server/discover probe".to_string());
    }
    let modern = report
        .server
        .identity
        .as_ref()
        .is_some_and(|i| matches!(i.era, crate::mcp::client::Era::Modern(_)));
    let calls: Vec<&CallRecord> = report.tools.iter().flat_map(|t| t.calls.iter()).collect();
    let uninitialised = |c: &&CallRecord| {
        c.outcome.said().is_some_and(|said| {
            let said = said.to_lowercase();
            said.contains("initializ") || said.contains("initialis")
        })
    };
    (modern && !calls.is_empty() && calls.iter().all(uninitialised)).then(|| {
        format!(
            "the server answered server/discover and listed its tools, but refused all {} call(s) as uninitialised",
            calls.len()
        )
    })
}
