//! The hintcheck binary: parses the command line, builds the async runtime, runs the
//! requested command and maps the outcome to the documented exit codes. The sandbox's hidden
//! re-exec entry point will be dispatched here, before any runtime or thread exists.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use hintcheck::cli::{Cli, Command, DoctorArgs, DoctorFormat, ExplainArgs, VerifyArgs};
use hintcheck::config::RunConfig;
use hintcheck::error::Error;
use hintcheck::output::{self, Mode};
use hintcheck::progress::Display;
use hintcheck::report::exit_code;
use hintcheck::sandbox::process::become_subreaper;

fn main() -> ExitCode {
    // The sandbox's init runs before anything else exists: no runtime, no threads.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "__sandbox-init")
    {
        let code = hintcheck::sandbox::init::main();
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { exit_code::USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code as u8);
        }
    };
    let code = match cli.command {
        Command::Explain(a) => explain(&a),
        Command::Doctor(a) => match doctor(&a) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("hintcheck: error: {}", hintcheck::run::error_chain(&e));
                e.exit_code()
            }
        },
        Command::Verify(a) => match verify(&a, Mode::Verify) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("hintcheck: error: {}", hintcheck::run::error_chain(&e));
                e.exit_code()
            }
        },
        Command::Suggest(a) => match verify(&a, Mode::Suggest) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("hintcheck: error: {}", hintcheck::run::error_chain(&e));
                e.exit_code()
            }
        },
    };
    ExitCode::from(code as u8)
}

fn explain(a: &ExplainArgs) -> i32 {
    let mut out = std::io::stdout().lock();
    match &a.audit {
        None => {
            for m in hintcheck::audit::ALL {
                let _ = writeln!(out, "{:<16} {}", m.id, m.summary);
            }
            0
        }
        Some(id) => match hintcheck::audit::find(id) {
            Some(m) => {
                let _ = writeln!(out, "{} — {}\n\n{}", m.id, m.summary, m.docs);
                0
            }
            None => {
                let ids: Vec<&str> = hintcheck::audit::ALL.iter().map(|m| m.id).collect();
                eprintln!(
                    "hintcheck: error: no audit named {id:?}; the audits are: {}",
                    ids.join(", ")
                );
                exit_code::USAGE
            }
        },
    }
}

fn doctor(a: &DoctorArgs) -> Result<i32, Error> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let report = runtime.block_on(hintcheck::sandbox::doctor::diagnose());
    let text = match a.format {
        DoctorFormat::Text => hintcheck::sandbox::doctor::render_text(&report),
        DoctorFormat::Json => format!(
            "{}\n",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ),
    };
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
    Ok(if report.required_sandbox_available {
        0
    } else {
        exit_code::SANDBOX_UNAVAILABLE
    })
}

fn verify(a: &VerifyArgs, mode: Mode) -> Result<i32, Error> {
    let mut config = RunConfig::from_verify_args(a)?;
    let display = config
        .terminal
        .progress
        .then(|| Display::stderr(config.terminal.color));
    if let Some(d) = &display {
        config.progress = d.hook();
    }
    let subreaper = become_subreaper();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let verification = runtime.block_on(async {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut int), Ok(mut term)) = (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) else {
                return;
            };
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            let _ = stop_tx.send(true);
        });
        hintcheck::run::verify(&config, stop_rx, subreaper).await
    });
    if let Some(d) = &display {
        d.finish();
    }
    output::emit(&verification, &config, mode)?;
    let report = &verification.report;
    // Contradictions are what `suggest` is for: they do not fail it.
    let code = match (mode, report.exit_code) {
        (Mode::Suggest, exit_code::CONTRADICTIONS) => exit_code::OK,
        (_, code) => code,
    };
    eprintln!("hintcheck: {} (exit {code})", report.exit_reason);
    Ok(code)
}
