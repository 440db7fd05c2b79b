//! The launch stage: the observers are built, the server is started in the sandbox and
//! greeted (under `--sandbox best-effort` without namespaces, once more without a sandbox, said
//! loudly). A server that cannot be started or greeted ends the run here, with the cause,
//! what it printed and what the sandbox enforced.

use super::collect::{Ending, RunEvent, RunLog, requested_sandbox};
use super::observers;
use super::server::{Live, RunContext, StartFailure, start_server};
use crate::evidence::{Coverage, Phase, PhaseObservation};
use crate::mcp::tool::shorten;
use crate::observe::Recorder;
use crate::report::exit_code;
use crate::sandbox::scratch::Scratch;
use crate::sandbox::{SandboxLevel, SandboxStatus};

/// A started and greeted server with the observers around it.
pub(super) struct Launched {
    pub(super) recorder: Recorder,
    /// What the observers cover.
    pub(super) coverage: Coverage,
    pub(super) live: Live,
    /// The sandbox the server runs in (none when best effort fell back to none).
    pub(super) sandbox_level: Option<SandboxLevel>,
    /// How many nested runs (replays, isolated tools) may go side by side.
    pub(super) side_by_side: usize,
}

/// Builds the observers and starts and greets the server; `Err` ends a run whose server
/// could not be started or greeted (the collector was told why).
pub(super) async fn launch(
    ctx: &RunContext<'_>,
    scratch: &Scratch,
    log: &mut RunLog,
) -> Result<Launched, Ending> {
    let (mut recorder, coverage) = observers::build(ctx.config, scratch, ctx);
    let mut sandbox_level = ctx.config.sandbox.level;
    let mut sandbox_status = SandboxStatus::scratch_only(ctx.subreaper);
    let launched = std::time::Instant::now();
    let mut first = start_server(ctx, sandbox_level, &mut recorder).await;
    let startup_us = launched.elapsed().as_micros() as u64;
    if let Err(f) = &first {
        if let (Some(step), Some(SandboxLevel::BestEffort)) = (&f.sandbox, sandbox_level) {
            // Best effort and no namespaces at all: run without the sandbox, and say so loudly.
            sandbox_status.requested = SandboxLevel::BestEffort.name().into();
            sandbox_status.not_enforced.insert(
                0,
                format!(
                    "the sandbox could not be set up (step {}: {}); the server ran without it",
                    step.step, step.message
                ),
            );
            sandbox_level = None;
            first = start_server(ctx, None, &mut recorder).await;
        }
    }
    match first {
        Ok((live, enforcement)) => {
            // Nested runs (replays, isolated runs) go side by side only where every server has
            // a pid namespace of its own: without one, a server's orphans are hintcheck's
            // children like the other runs' servers, and one run's sweep could not tell them
            // apart.
            let mut side_by_side = 1;
            if let (Some(e), Some(level)) = (enforcement, sandbox_level) {
                sandbox_status = SandboxStatus::from_enforcement(&e, level);
                if e.namespaces.iter().any(|n| n == "pid") {
                    side_by_side = ctx.config.nested.jobs;
                }
            }
            log.emit(RunEvent::Sandbox(sandbox_status));
            log.emit(RunEvent::Greeted {
                identity: live.client.identity().clone(),
                startup_us,
            });
            Ok(Launched {
                recorder,
                coverage,
                live,
                sandbox_level,
                side_by_side,
            })
        }
        Err(f) => {
            if let (Some(e), Some(level)) = (&f.enforcement, sandbox_level) {
                sandbox_status = SandboxStatus::from_enforcement(e, level);
            }
            Err(start_failed(ctx, f, sandbox_status, &mut recorder, log))
        }
    }
}

/// What to try when a server that started could not be greeted with the era left to
/// detection: the two eras' flags, named with the probe's wait in force.
fn greeting_remedy(config: &crate::config::RunConfig) -> String {
    if config.server.era != crate::mcp::client::EraChoice::Auto {
        return String::new();
    }
    format!(
        "; if the server speaks the 2026-07-28 protocol and answers server/discover slowly, try --era modern or a --discover-timeout longer than {}; if it speaks an older one, --era legacy skips the probe",
        crate::text::format_duration(config.waits.discover_timeout)
    )
}

/// Tells the collector what a server that could not be started or greeted left (what it
/// said, what it wrote while it started, what the sandbox enforced) and ends the run.
fn start_failed(
    ctx: &RunContext<'_>,
    mut f: StartFailure,
    mut sandbox: SandboxStatus,
    recorder: &mut Recorder,
    log: &mut RunLog,
) -> Ending {
    log.emit(f.instance_ended());
    let mut cause = f.message.clone();
    if let Some(line) = log
        .instance_anomalies()
        .iter()
        .find(|e| e.class.starts_with("not-json"))
    {
        let what = if line.class == "not-jsonrpc" {
            "JSON-RPC"
        } else {
            "JSON"
        };
        cause.push_str(&format!(
            "; its stdout has a line that is not {what} (the first: {:?})",
            shorten(&line.text, 120)
        ));
    }
    log.emit(RunEvent::StartError(cause.clone()));
    log.emit(RunEvent::Phases(PhaseObservation::all_in(
        Phase::Startup,
        recorder.checkpoint(),
    )));
    if !f.started {
        // Nothing ran: no sandbox held anything.
        sandbox = SandboxStatus::not_started(requested_sandbox(ctx.config));
    }
    if let Some(why) = &f.interrupted {
        log.emit(RunEvent::Partial(format!(
            "{why} while the server was starting"
        )));
    }
    let mut notes = Vec::new();
    let (exit_code, reason) = match &f.sandbox {
        Some(step) => {
            sandbox.requested = "required".into();
            sandbox.not_enforced.insert(0, f.message.clone());
            notes.extend(crate::sandbox::remedy(step));
            (
                exit_code::SANDBOX_UNAVAILABLE,
                format!(
                    "the required sandbox is unavailable: step {} failed",
                    step.step
                ),
            )
        }
        None if f.interrupted.is_some() => (exit_code::HARNESS, format!("harness error: {cause}")),
        None if !f.started => (
            exit_code::HARNESS,
            format!("harness error: the server could not be started: {cause}"),
        ),
        None => (
            exit_code::HARNESS,
            format!(
                "harness error: the server could not be greeted: {cause}{}",
                greeting_remedy(ctx.config)
            ),
        ),
    };
    log.emit(RunEvent::Sandbox(sandbox));
    notes.extend(recorder.take_notes());
    log.emit(RunEvent::Notes(notes));
    Ending::StartFailed {
        exit_code,
        reason,
        started: f.started,
    }
}
