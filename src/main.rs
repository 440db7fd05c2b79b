//! The hintcheck binary: parses the command line, builds the async runtime, runs the
//! requested command and maps the outcome to the documented exit codes. The sandbox's init (this
//! binary re-executed as `/sbin/init` with its config in the environment) is dispatched here,
//! before any runtime or thread exists.

use std::io::Write;
use std::process::ExitCode;

use hintcheck::cli::{
    Cli, Command, DoctorArgs, DoctorFormat, ExplainArgs, GuardArgs, GuardTransportArg, MergeArgs,
    MergeFormat, OnViolationArg, ScanArgs, VerifyArgs,
};
use hintcheck::config::{RunConfig, parse_duration};
use hintcheck::error::Error;
use hintcheck::fleet::scan::{ScanError, ScanLine, ScanOutcome, ScanTarget};
use hintcheck::output::{self, Mode};
use hintcheck::progress::{Display, Lines};
use hintcheck::report::exit_code;
use hintcheck::sandbox::process::become_subreaper;

/// How often a log gets a progress line on long runs.
const PROGRESS_LINE_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// A line on stderr with every character a server or a registry document could have supplied
/// made harmless for a terminal (newlines kept: the messages are ours, their parts are not).
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("{}", hintcheck::text::escape::keeping_lines(&format!($($arg)*)))
    };
}

fn main() -> ExitCode {
    // The sandbox's init runs before anything else exists: no runtime, no threads.
    if hintcheck::sandbox::init::is_sandbox_init() {
        let code = hintcheck::sandbox::init::main();
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    // The fake server the demo (and any scenario without a command) runs, when no
    // `hintcheck-fake-server` lies beside this binary: words after it are the server's own.
    // (Only its words are read as text: hintcheck's own may be any bytes, as paths are.)
    if std::env::args_os().nth(1).as_deref()
        == Some(std::ffi::OsStr::new(
            hintcheck::config::FAKE_SERVER_SUBCOMMAND,
        ))
    {
        let words: Vec<String> = std::env::args_os()
            .skip(2)
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        hintcheck_harness::run(&words, &[hintcheck::config::FAKE_SERVER_SUBCOMMAND]);
    }
    // The runs' scratch directories are removed off their path: whatever way this ends (a
    // panic included), it waits for them, since nothing may be left behind.
    let _removals = WaitForRemovals;
    let cli = match Cli::try_parse_showing_defaults() {
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
                say!("hintcheck: error: {}", hintcheck::text::error_chain(&e));
                e.exit_code()
            }
        },
        Command::Verify(a) => verifying(&a, Mode::Verify),
        Command::Demo(a) => demo(*a),
        Command::Scan(a) => scan(&a),
        Command::Merge(a) => merge(&a),
        Command::Suggest(a) => verifying(&a, Mode::Suggest),
        Command::Guard(a) => guard(&a),
    };
    ExitCode::from(code as u8)
}

/// Waits, when dropped, for the scratch directories the runs handed over for removal, and
/// says which could not be removed.
struct WaitForRemovals;

impl Drop for WaitForRemovals {
    fn drop(&mut self) {
        for failure in hintcheck::sandbox::scratch::wait_for_removals() {
            say!("hintcheck: {failure}");
        }
    }
}

/// `hintcheck demo`: the demo scenario carried by the binary, laid out in a temporary
/// directory for the run, verified as `verify --scenario` would.
fn demo(mut a: VerifyArgs) -> i32 {
    if !a.command.is_empty() || a.scenario.is_some() {
        return usage_error(
            "demo runs the server built into hintcheck; to verify yours: hintcheck verify -- CMD (or --scenario FILE)",
        );
    }
    let laid = match hintcheck::demo::DemoScenario::lay_out() {
        Ok(l) => l,
        Err(e) => {
            say!("hintcheck: error: {e}");
            return exit_code::HARNESS;
        }
    };
    a.scenario = Some(laid.path().to_path_buf());
    // The demo is the same everywhere: a config file found around it is not read unless
    // --config names one.
    if a.config.is_none() {
        a.no_config = true;
    }
    verifying(&a, Mode::Verify)
}

/// `verify` (or `suggest`) with its error said on stderr and mapped to its exit code.
fn verifying(a: &VerifyArgs, mode: Mode) -> i32 {
    match verify(a, mode) {
        Ok(code) => code,
        Err(e) => {
            say!("hintcheck: error: {}", hintcheck::text::error_chain(&e));
            e.exit_code()
        }
    }
}

/// `hintcheck guard`: the enforcing proxy, or the summary of its log.
fn guard(a: &GuardArgs) -> i32 {
    if let Some(log) = &a.summary {
        return match std::fs::read_to_string(log) {
            Ok(text) => {
                let _ = write!(
                    std::io::stdout().lock(),
                    "{}",
                    hintcheck::guard::journal::summary(&text)
                );
                0
            }
            Err(e) => {
                say!(
                    "hintcheck: error: cannot read the guard log {}: {e}",
                    log.display()
                );
                exit_code::USAGE
            }
        };
    }
    if a.transport == GuardTransportArg::Stdio && (a.listen.is_some() || a.max_sessions.is_some()) {
        say!("hintcheck: error: --listen and --max-sessions go with --transport http");
        return exit_code::USAGE;
    }
    let options = hintcheck::guard::GuardOptions {
        command: a.command.clone(),
        allow_write: a.allow_write.clone(),
        allow_read: a.allow_read.clone(),
        state_dir: a.state_dir.clone(),
        log: a.log.clone(),
        on_violation: match a.on_violation {
            OnViolationArg::Pass => hintcheck::guard::OnViolation::Pass,
            OnViolationArg::Error => hintcheck::guard::OnViolation::Error,
        },
        no_serialize: a.no_serialize,
        allow_startup_writes: a.allow_startup_writes,
        resolve: a.resolve.clone(),
        policy: a.policy.clone(),
        exe: a.sandbox_exe.clone(),
        transport: match a.transport {
            GuardTransportArg::Stdio => hintcheck::guard::Transport::Stdio,
            GuardTransportArg::Http => {
                hintcheck::guard::Transport::Http(hintcheck::guard::http::HttpOptions {
                    listen: a
                        .listen
                        .clone()
                        .unwrap_or_else(|| hintcheck::guard::http::DEFAULT_LISTEN.into()),
                    max_sessions: a.max_sessions.unwrap_or(8),
                })
            }
        },
    };
    match hintcheck::guard::run(&options) {
        Ok(code) => code,
        Err(e) => {
            say!("hintcheck: error: {}", hintcheck::text::error_chain(&e));
            match e {
                hintcheck::guard::GuardError::NoCommand
                | hintcheck::guard::GuardError::Directory { .. }
                | hintcheck::guard::GuardError::Resolve(_)
                | hintcheck::guard::GuardError::Policy { .. }
                | hintcheck::guard::GuardError::Listen { .. } => exit_code::USAGE,
                _ => exit_code::HARNESS,
            }
        }
    }
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
        Some(id) => match hintcheck::audit::find_by_id_or_hint(id) {
            Some(m) => {
                let _ = writeln!(out, "{} — {}\n\n{}", m.id, m.summary, m.docs);
                0
            }
            None => {
                let ids: Vec<&str> = hintcheck::audit::ALL.iter().map(|m| m.id).collect();
                say!(
                    "hintcheck: error: no audit or hint named {id:?}; the audits are: {} (or name a hint: readOnlyHint, destructiveHint, idempotentHint, openWorldHint)",
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
    // From here on an interrupt ends the run (the [setup] installs included) with a report.
    hintcheck::interrupt::install();
    if mode == Mode::Suggest {
        use hintcheck::cli::Format;
        if matches!(
            a.report.format.as_ref().map(|f| f.known()),
            Some(Format::Sarif | Format::Junit | Format::Markdown | Format::Html)
        ) {
            return Ok(usage_error(
                "suggest prints --format text (a table) or --format json (annotations to paste)",
            ));
        }
    }
    let mut config = RunConfig::deferring_setup(a)?;
    // The setup as written, for one more try with `mcp<2` should the server die under the
    // 2.x SDK its dependencies resolved to.
    let sdk_retry = config.pending_setup.as_ref().and_then(|p| {
        hintcheck::fleet::setup::runtime::with_mcp_below_2(&p.section).map(|section| {
            let mut pending = p.clone();
            pending.section = section;
            (
                pending,
                config.server.command.clone(),
                config.server.env.clone(),
            )
        })
    });
    if let Err(e) = config.install_setup() {
        return never_started(&config, e, mode);
    }
    let display = config
        .terminal
        .progress
        .then(|| Display::stderr(config.terminal.color));
    if let Some(d) = &display {
        config.progress = d.hook();
    }
    // A log (CI) gets a plain line every few seconds instead of a bar.
    let lines = config
        .terminal
        .progress_lines
        .then(|| Lines::stderr(PROGRESS_LINE_EVERY));
    if let Some(l) = &lines {
        config.progress = l.hook();
    }
    let subreaper = become_subreaper();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(Error::Runtime)?;
    let run = |config: &RunConfig| {
        runtime.block_on(async {
            let stop_rx = hintcheck::interrupt::watch();
            hintcheck::run::verify(config, stop_rx, subreaper).await
        })
    };
    let mut verification = run(&config);
    let mut notes = setup_notes(&config);
    if let Some((pending, command, env)) = sdk_retry
        && let Some(death) = died_under_sdk_2(&config, &verification.report)
    {
        say!(
            "hintcheck: the server died at start under the mcp 2.x SDK ({death}); installing it again with mcp<2"
        );
        config.pending_setup = Some(pending);
        config.server.command = command;
        config.server.env = env;
        match config.install_setup() {
            Ok(()) => {
                verification = run(&config);
                notes = setup_notes(&config);
                let sdk = config
                    .installed
                    .as_ref()
                    .and_then(|i| i.venv.as_deref())
                    .and_then(hintcheck::fleet::setup::runtime::mcp_version)
                    .map_or_else(|| "mcp<2".to_string(), |v| format!("mcp {v}"));
                notes.push(format!(
                    "the server died at start under the mcp 2.x SDK its dependencies resolved to ({death}); it was installed again with mcp<2, and this report is of the run on {sdk}"
                ));
            }
            Err(e) => notes.push(format!(
                "the server died at start under the mcp 2.x SDK ({death}); installing it again with mcp<2 failed: {e}"
            )),
        }
    }
    verification.report.notes.splice(0..0, notes);
    if let Some(d) = &display {
        d.finish();
    }
    if let Some(l) = &lines {
        l.finish();
    }
    output::emit(&verification, &config, mode)?;
    let report = &verification.report;
    // Contradictions are what `suggest` is for: they do not fail it.
    let code = match (mode, report.exit_code) {
        (Mode::Suggest, exit_code::CONTRADICTIONS) => exit_code::OK,
        (_, code) => code,
    };
    for line in hintcheck::report::start_failure_detail(report) {
        say!("hintcheck: {line}");
    }
    // --quiet: a run that completed says nothing more; errors are always said.
    let completed = matches!(
        code,
        exit_code::OK | exit_code::CONTRADICTIONS | exit_code::NOTHING_VERIFIED
    );
    if !(config.terminal.quiet && completed) {
        say!("hintcheck: {} (exit {code})", report.exit_reason);
    }
    Ok(code)
}

/// A report for a run whose `[setup]` failed: nothing ran, but the report says why, in the
/// format asked.
fn never_started(
    config: &RunConfig,
    e: hintcheck::fleet::setup::SetupError,
    mode: Mode,
) -> Result<i32, Error> {
    let stopped = matches!(e, hintcheck::fleet::setup::SetupError::Stopped { .. });
    let mut v = hintcheck::run::never_started(config, e.to_string(), stopped);
    v.report.notes.splice(0..0, setup_notes(config));
    output::emit(&v, config, mode)?;
    say!(
        "hintcheck: {} (exit {})",
        v.report.exit_reason,
        v.report.exit_code
    );
    Ok(v.report.exit_code)
}

/// What the `[setup]` provided beyond the packages (a Node from the registry), for the report.
fn setup_notes(config: &RunConfig) -> Vec<String> {
    config
        .installed
        .as_ref()
        .map(|i| i.notes.clone())
        .unwrap_or_default()
}

/// Whether the server died before it answered, under an `mcp` 2.x SDK, the way a server
/// written for 1.x does: the exception's line.
fn died_under_sdk_2(config: &RunConfig, report: &hintcheck::report::Report) -> Option<String> {
    let venv = config.installed.as_ref()?.venv.as_deref()?;
    if report.server.start_error.is_none()
        || report.partial.is_some()
        || hintcheck::fleet::setup::runtime::mcp_version(venv)?
            .split('.')
            .next()?
            != "2"
    {
        return None;
    }
    hintcheck::fleet::setup::runtime::died_like_a_1x_server(&report.server.stderr)
}

fn usage_error(e: impl std::fmt::Display) -> i32 {
    say!("hintcheck: error: {e}");
    exit_code::USAGE
}

/// `hintcheck scan`: exit 0 when every server is clean (with --check: meets its
/// expectations), 1 on findings (unmet expectations), 3 when a server gave no report.
fn scan(a: &ScanArgs) -> i32 {
    use hintcheck::fleet::{merge, scan};
    hintcheck::interrupt::install();
    let (all, shard, targets) = match scan_targets(a) {
        Ok(t) => t,
        Err(e) => return usage_error(e),
    };
    if a.list {
        print_targets(&targets);
        return 0;
    }
    let timeout = match a
        .timeout
        .as_deref()
        .map(|t| parse_duration("--timeout", t))
        .transpose()
    {
        Ok(t) => t.unwrap_or(hintcheck::config::DEFAULT_RUN_TIMEOUT),
        Err(e) => return usage_error(e),
    };
    if a.jobs == Some(0) {
        return usage_error("--jobs: 0 is not a number of jobs (at least 1)");
    }
    let verify_args = scan::verify_flags(a, timeout);
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    // --resume: what the results file already holds at this version is kept, not run again.
    let (kept, targets) = match resumed(a, targets, &verify_args) {
        Ok(r) => r,
        Err(e) => return usage_error(e),
    };
    let plan = scan::ScanPlan {
        shard,
        total: all.len(),
        targets,
        jobs,
        check: a.check,
        verify_args,
        exe: std::env::current_exe().unwrap_or_else(|_| "hintcheck".into()),
        child_limit: timeout + std::time::Duration::from_secs(60),
    };
    let mut out = match results_file(a) {
        Ok(out) => out,
        Err(code) => return code,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            say!("hintcheck: error: cannot start the async runtime: {e}");
            return exit_code::HARNESS;
        }
    };
    let selected = plan.targets.len() + kept.len();
    let total = plan.total;
    let mut outcome = runtime.block_on(async {
        let stop_rx = hintcheck::interrupt::watch();
        scan::scan(plan, &mut out, stop_rx).await
    });
    let _ = out.flush();
    let resumed = kept.len();
    let mut lines = kept;
    lines.append(&mut outcome.lines);
    outcome.lines = lines;
    let code = if outcome.interrupted {
        hintcheck::interrupt::exit_code().unwrap_or(exit_code::HARNESS)
    } else {
        merge::exit_code_of(&outcome.lines)
    };
    say_scanned(a, &outcome, total, selected < total, resumed, jobs, code);
    code
}

/// The K-th of N shards (1-based), when the scan is one.
type Shard = Option<(usize, usize)>;

/// The scan's targets: every server its paths name, the shard (from `--shard`, or the
/// environment a fleet sets, which is said), and the targets of that shard.
fn scan_targets(a: &ScanArgs) -> Result<(Vec<ScanTarget>, Shard, Vec<ScanTarget>), ScanError> {
    use hintcheck::fleet::scan;
    // Scenarios written for registry entries live in the cache, beside the installs.
    let registry_dir = a
        .install
        .cache_dir
        .clone()
        .unwrap_or_else(hintcheck::fleet::setup::cache_root)
        .join("registry");
    let all = scan::expand(&a.paths, &registry_dir)?;
    let shard = a
        .shard
        .as_deref()
        .map(|s| scan::resolve_shard(s, |name| std::env::var(name).ok()))
        .transpose()?;
    if let Some(((k, n), source)) = &shard
        && source != "--shard"
    {
        say!("hintcheck: shard {k}/{n} (from {source})");
    }
    let shard = shard.map(|(s, _)| s);
    let targets = match shard {
        Some(s) => scan::shard(&all, s),
        None => all.clone(),
    };
    Ok((all, shard, targets))
}

/// `scan --list`: the shard's scenario files, and why any is skipped.
fn print_targets(targets: &[ScanTarget]) {
    use hintcheck::text::escape::terminal;
    let mut out = std::io::stdout().lock();
    for t in targets {
        let _ = match &t.plan {
            Ok(_) => writeln!(out, "{}", terminal(&t.label)),
            Err(why) => writeln!(out, "{} (skipped: {})", terminal(&t.label), terminal(why)),
        };
    }
}

/// With `--resume`, the lines the results file keeps and the targets still to run; else
/// nothing kept and every target.
fn resumed(
    a: &ScanArgs,
    targets: Vec<ScanTarget>,
    verify_args: &[String],
) -> Result<(Vec<ScanLine>, Vec<ScanTarget>), ScanError> {
    use hintcheck::fleet::scan;
    let (true, Some(path)) = (a.resume, &a.output) else {
        return Ok((Vec::new(), targets));
    };
    let (previous, cut) = scan::load_for_resume(path)?;
    if cut {
        say!(
            "hintcheck: {}: removed a last line cut off by the earlier scan's end",
            path.display()
        );
    }
    let selected = targets.len();
    let (kept, targets) = scan::resume(previous, targets, verify_args, a.check);
    say!(
        "hintcheck: resuming {}: {} of {selected} server(s) already verified (same hintcheck version, scenario and options), {} to run",
        path.display(),
        kept.len(),
        targets.len()
    );
    Ok((kept, targets))
}

/// Where the scan's lines go: `--output` (appended to with `--resume`), else stdout; the exit
/// code when the file cannot be written.
fn results_file(a: &ScanArgs) -> Result<Box<dyn Write>, i32> {
    let Some(p) = &a.output else {
        return Ok(Box::new(std::io::stdout().lock()));
    };
    let opened = if a.resume {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
    } else {
        std::fs::File::create(p)
    };
    match opened {
        Ok(f) => Ok(Box::new(std::io::BufWriter::new(f))),
        Err(e) => {
            say!("hintcheck: error: cannot write {}: {e}", p.display());
            Err(exit_code::HARNESS)
        }
    }
}

/// The scan's closing lines on stderr: how many servers, how fast, what they found.
fn say_scanned(
    a: &ScanArgs,
    outcome: &ScanOutcome,
    total: usize,
    sharded: bool,
    resumed: usize,
    jobs: usize,
    code: i32,
) {
    let totals = hintcheck::fleet::merge::totals(&outcome.lines);
    let ran_ms: u64 = outcome.lines[resumed..].iter().map(|l| l.duration_ms).sum();
    let speedup = ran_ms as f64 / outcome.wall.as_millis().max(1) as f64;
    say!(
        "hintcheck: scanned {} of {total} server(s){}{} in {:.1} s (the runs took {:.1} s in all: {speedup:.2}x with --jobs {jobs}); {} contradicted hint(s), {} error(s){} (exit {code})",
        outcome.lines.len(),
        if sharded { " (this shard)" } else { "" },
        if resumed > 0 {
            format!(", {resumed} of them kept from the earlier scan,")
        } else {
            String::new()
        },
        outcome.wall.as_secs_f64(),
        ran_ms as f64 / 1000.0,
        totals.contradicted,
        totals.errors,
        if a.check {
            format!(
                ", expectations {} met, {} unmet",
                totals.expectations_met, totals.expectations_unmet
            )
        } else {
            String::new()
        },
    );
    if outcome.interrupted {
        say!(
            "hintcheck: the scan was interrupted; the lines written are complete reports or partial ones"
        );
    }
}

/// `hintcheck merge`: the combined summary of scan results, exiting as the scan would have.
fn merge(a: &MergeArgs) -> i32 {
    use hintcheck::fleet::merge;
    let lines = match merge::read_lines(&a.files) {
        Ok(l) => l,
        Err(e) => return usage_error(e),
    };
    let text = match a.format {
        MergeFormat::Text => merge::render_text(&lines),
        MergeFormat::Json => merge::render_json(&lines),
        MergeFormat::Markdown => merge::render_markdown(&lines),
        MergeFormat::Html => merge::render_html(&lines),
    };
    match &a.output {
        Some(p) => {
            if let Err(e) = std::fs::write(p, &text) {
                let _ = std::io::stdout().lock().write_all(text.as_bytes());
                say!("hintcheck: error: cannot write {}: {e}", p.display());
                return exit_code::HARNESS;
            }
        }
        None => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
        }
    }
    merge::exit_code_of(&lines)
}
