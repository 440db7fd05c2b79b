//! A first run that explains itself (issue 16): interrupts and timeouts in every phase, the
//! cause of a harness error on stderr whatever the format, the pre-flight check, stdout that
//! stays machine-readable, `suggest` as a table, `[setup]` progress and its limits. Bounds are
//! generous: a loaded CI machine must pass them, a hang must not.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{
    assert_partial, at, fake_server, gone_within, hintcheck_bin, processes_matching, read_json,
    run, run_in, skip, wait_within,
};

const LIMIT: Duration = Duration::from_secs(60);

/// hintcheck started with `args`, its stderr piped, stdout discarded.
fn spawn(args: &[&str], env: &[(&str, &str)]) -> Child {
    let mut cmd = Command::new(hintcheck_bin());
    cmd.args(args)
        .env("HINTCHECK_FAKE_SERVER", fake_server())
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("HINTCHECK_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().expect("spawn hintcheck")
}

/// Waits for `child` at most `limit`; its exit code, stderr and how long the wait took.
fn finish(mut child: Child, limit: Duration) -> (i32, String, Duration) {
    let start = Instant::now();
    let status = wait_within(&mut child, limit, "hintcheck");
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    (status.code().unwrap_or(-1), err, start.elapsed())
}

fn signal(child: &Child, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, sig).expect("signal");
}

/// Waits until a process whose command line holds `needle` runs.
fn wait_for_process(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes_matching(needle).is_empty() {
        assert!(Instant::now() < deadline, "{needle} never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_interrupt_while_the_server_starts_ends_the_run_at_once_with_a_partial_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("r.json");
    let report_arg = report.display().to_string();
    // A server that never answers: the run is in its greeting when the signal comes.
    let child = spawn(
        &[
            "verify",
            "--format",
            "json",
            "--output",
            &report_arg,
            "--",
            "sleep",
            "4351",
        ],
        &[],
    );
    wait_for_process("sleep 4351");
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, rustix::process::Signal::INT);
    let (code, stderr, took) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 130, "128 + SIGINT, as shells expect: {stderr}");
    assert!(
        stderr.contains("interrupted by SIGINT: the report is partial"),
        "{stderr}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?} after SIGINT");
    assert!(stderr.contains("interrupted by a signal"), "{stderr}");
    assert_partial(&read_json(&report), "interrupted");
    assert!(
        gone_within("sleep 4351", Duration::from_secs(5)),
        "the server survived"
    );
}

#[test]
fn the_run_timeout_and_the_handshake_timeout_bound_the_greeting() {
    let started = Instant::now();
    let out = run(
        &["verify", "--timeout", "2s", "--", "sleep", "4352"],
        &[],
        LIMIT,
    );
    let took = started.elapsed();
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(took < Duration::from_secs(15), "--timeout 2s took {took:?}");
    assert!(
        out.stderr.contains("the run timeout (2s) was reached"),
        "{}",
        out.stderr
    );
    // The discover probe (3 s by default) is inside the handshake timeout, not added to it.
    let started = Instant::now();
    let out = run(
        &["verify", "--handshake-timeout", "2s", "--", "sleep", "4353"],
        &[],
        LIMIT,
    );
    let took = started.elapsed();
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        took < Duration::from_secs(12),
        "--handshake-timeout 2s took {took:?}"
    );
    assert!(
        out.stderr.contains(
            "no answer to server/discover, then initialize within the handshake timeout (2s)"
        ),
        "{}",
        out.stderr
    );
}

#[test]
fn the_cause_of_a_harness_error_is_on_stderr_whatever_the_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("r.json");
    let report_arg = report.display().to_string();
    let json_to_file = ["verify", "--format", "json", "--output", &report_arg, "--"];
    let with = |cmd: &[&str]| {
        let args: Vec<&str> = json_to_file.iter().chain(cmd).copied().collect();
        run(&args, &[], LIMIT)
    };
    // Command not found: nothing ran, so the report claims no sandbox and no seeded files.
    let out = with(&["no-such-mcp-server-4354"]);
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.contains("could not be started")
            && out.stderr.contains("\"no-such-mcp-server-4354\" not found"),
        "{}",
        out.stderr
    );
    let r = read_json(&report);
    assert_eq!(r["sandbox"]["level"], "not-started", "{}", r["sandbox"]);
    assert_eq!(
        r["seeded"].as_array().map(Vec::len),
        Some(0),
        "{}",
        r["seeded"]
    );
    // Exited with a status: the status and the server's last stderr lines.
    let out = with(&[
        "sh",
        "-c",
        "echo first problem >&2; echo last words >&2; exit 4",
    ]);
    assert_eq!(out.code, 3);
    assert!(out.stderr.contains("exited with code 4"), "{}", out.stderr);
    assert!(
        out.stderr.contains("the server's last stderr lines:")
            && out.stderr.contains("  last words"),
        "{}",
        out.stderr
    );
    // Output that is not JSON: the first offending line.
    let out = with(&["sh", "-c", "echo Starting the server on stdout; exit 0"]);
    assert_eq!(out.code, 3);
    assert!(
        out.stderr
            .contains("not JSON (the first: \"Starting the server on stdout\")"),
        "{}",
        out.stderr
    );
    // No answer: how long was waited.
    let out = run(
        &[
            "verify",
            "--format",
            "json",
            "--output",
            &report_arg,
            "--handshake-timeout",
            "1s",
            "--",
            "sleep",
            "4355",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 3);
    assert!(
        out.stderr.contains("within the handshake timeout (1s)"),
        "{}",
        out.stderr
    );
}

#[test]
fn the_pre_flight_check_names_the_directory_the_server_cannot_enter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let closed = dir.path().join("closed");
    std::fs::create_dir(&closed).expect("mkdir");
    let script = closed.join("server.sh");
    std::fs::write(&script, "echo never\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    let root = rustix::process::getuid().is_root();
    // As root the server runs as a uid of its own, kept out of a 0700 directory; an
    // unprivileged user keeps its own uid, kept out of a 0000 one.
    let mode = if root { 0o700 } else { 0o000 };
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(mode)).expect("chmod");
    let script_arg = script.display().to_string();
    let out = run(
        &["verify", "--format", "json", "--", "sh", &script_arg],
        &[],
        LIMIT,
    );
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(out.code, 3, "{}", out.stderr);
    let named = format!("the directory {}", closed.display());
    assert!(
        out.stderr.contains(&named) && out.stderr.contains("cannot be entered"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("install the server where every user can read it"),
        "{}",
        out.stderr
    );
    if root {
        assert!(out.stderr.contains("--run-as 0"), "{}", out.stderr);
    }
    let r = out.json();
    assert_eq!(r["sandbox"]["level"], "not-started");
    assert_eq!(r["sandbox"]["requested"], "required", "{}", r["sandbox"]);
}

#[test]
fn machine_readable_stdout_stays_machine_readable() {
    let demo = at("scenarios/demo");
    for format in ["json", "sarif", "junit"] {
        let out = run(
            &[
                "verify",
                "--annotations",
                "--format",
                format,
                "--scenario",
                &demo,
            ],
            &[],
            LIMIT,
        );
        assert_eq!(out.code, 2, "{format}: {}", out.stderr);
        assert!(
            out.stderr.contains("--annotations") && out.stderr.contains("--output FILE"),
            "{}",
            out.stderr
        );
        assert!(out.stdout.is_empty(), "{}", out.stdout);
    }
    // SARIF on stdout: valid JSON, and no inventory file left in the working directory.
    let dir = tempfile::tempdir().expect("tempdir");
    let out = run_in(
        Some(dir.path()),
        &["verify", "--format", "sarif", "--scenario", &demo],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let sarif = out.json();
    assert_eq!(sarif["version"], "2.1.0");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "stray files: {left:?}");
    // suggest: a table for text, JSON when asked, other formats refused.
    let table = run(&["suggest", "--scenario", &demo], &[], LIMIT);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let header = table
        .stdout
        .lines()
        .find(|l| l.starts_with("TOOL"))
        .expect("a table header");
    for hint in [
        "readOnlyHint",
        "destructiveHint",
        "idempotentHint",
        "openWorldHint",
    ] {
        assert!(header.contains(hint), "{header}");
    }
    let row = table
        .stdout
        .lines()
        .find(|l| l.starts_with("tidy_notes "))
        .expect("a row per tool");
    // Columns line up with the header.
    let column = header.find("destructiveHint").expect("column");
    assert_eq!(row.get(column..column + 4), Some("true"), "{header}\n{row}");
    assert!(
        table.stdout.contains("Why the changes:"),
        "{}",
        table.stdout
    );
    let json = run(
        &["suggest", "--format", "json", "--scenario", &demo],
        &[],
        LIMIT,
    );
    assert_eq!(json.json()["schema_version"], 1);
    let refused = run(
        &["suggest", "--format", "sarif", "--scenario", &demo],
        &[],
        LIMIT,
    );
    assert_eq!(refused.code, 2, "{}", refused.stderr);
}

/// A scenario that installs an npm package from a registry that never answers (a closed
/// loopback port): npm retries for minutes.
fn stalled_setup(dir: &Path, timeout: Option<&str>) -> String {
    let scenario = dir.join("scenario.toml");
    let limit = timeout
        .map(|t| format!("timeout = \"{t}\"\n"))
        .unwrap_or_default();
    std::fs::write(
        &scenario,
        format!(
            "[setup]\nnpm = [\"left-pad@1.3.0\"]\n{limit}[server]\ncommand = [\"{{npm}}/node_modules/.bin/none\"]\n"
        ),
    )
    .expect("write");
    scenario.display().to_string()
}

fn npm_present() -> bool {
    let ok = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        skip("npm is not installed: [setup] cannot be exercised");
    }
    ok
}

#[test]
fn setup_installs_report_progress_and_end_at_their_timeout() {
    if !npm_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let scenario = stalled_setup(dir.path(), Some("6s"));
    let env = [
        ("npm_config_registry", "http://127.0.0.1:9/"),
        ("HINTCHECK_CACHE", cache.to_str().expect("utf-8")),
    ];
    let started = Instant::now();
    let out = run(&["verify", "--scenario", &scenario], &env, LIMIT);
    let took = started.elapsed();
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(
        out.stderr
            .contains("hintcheck: [setup] npm install left-pad@1.3.0"),
        "{}",
        out.stderr
    );
    // A progress line, although stderr is a pipe.
    assert!(
        out.stderr.contains("still running after 5 s"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("stopped after")
            && out.stderr.contains("[setup] timeout (6s) was reached"),
        "{}",
        out.stderr
    );
    // The run's --timeout bounds the installs too; the half-done install is gone; the report
    // (partial, nothing started) is written in the format asked.
    let report = dir.path().join("r.json");
    let report_arg = report.display().to_string();
    let out = run(
        &[
            "verify",
            "--timeout",
            "2s",
            "--format",
            "json",
            "--output",
            &report_arg,
            "--scenario",
            &scenario,
        ],
        &env,
        LIMIT,
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    let r = read_json(&report);
    assert_eq!(r["exit_code"], 3);
    assert_eq!(r["sandbox"]["level"], "not-started");
    assert_partial(&r, "was stopped after");
    assert!(
        out.stderr.contains("the run timeout (2s) was reached"),
        "{}",
        out.stderr
    );
    let leftovers: Vec<_> = std::fs::read_dir(cache.join("npm"))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        leftovers
            .iter()
            .all(|n| n.to_string_lossy().ends_with(".lock")),
        "{leftovers:?}"
    );
    assert!(processes_matching(cache.to_str().expect("utf-8")).is_empty());
}

#[test]
fn an_interrupt_stops_setup_installs_and_everything_they_started() {
    if !npm_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cache = dir.path().join("cache");
    let cache_text = cache.display().to_string();
    let scenario = stalled_setup(dir.path(), None);
    let child = spawn(
        &["verify", "--scenario", &scenario],
        &[
            ("npm_config_registry", "http://127.0.0.1:9/"),
            ("HINTCHECK_CACHE", &cache_text),
        ],
    );
    wait_for_process(&cache_text);
    std::thread::sleep(Duration::from_millis(500));
    signal(&child, rustix::process::Signal::TERM);
    let (code, stderr, took) = finish(child, Duration::from_secs(30));
    assert_eq!(code, 143, "128 + SIGTERM: {stderr}");
    assert!(took < Duration::from_secs(5), "took {took:?} after SIGTERM");
    assert!(stderr.contains("interrupted by a signal"), "{stderr}");
    assert!(
        gone_within(&cache_text, Duration::from_secs(5)),
        "npm survived"
    );
}

#[test]
fn the_text_report_opens_with_the_result_and_every_contradiction() {
    let demo = at("scenarios/demo");
    let out = run(&["verify", "--scenario", &demo], &[], LIMIT);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    // The first screen: the result on line 3, each contradicted hint with its tool and one
    // line of evidence before any per-tool detail.
    assert!(
        lines[2].starts_with("result:   7 contradicted hint(s) in 6 tool(s)"),
        "{}",
        out.stdout
    );
    let first_screen = lines[..24].join("\n");
    for (tool, hint, evidence) in [
        (
            "get_status",
            "readOnlyHint: true",
            "created $WORKSPACE/status.log",
        ),
        (
            "get_status",
            "idempotentHint: true",
            "appended to $WORKSPACE/status.log",
        ),
        (
            "peek_cache",
            "readOnlyHint: true",
            "created $HOME/.peek-cache",
        ),
        (
            "tidy_notes",
            "readOnlyHint: true",
            "deleted $WORKSPACE/notes/old.txt",
        ),
        (
            "add_item",
            "idempotentHint: true",
            "appended to $WORKSPACE/items.txt",
        ),
        (
            "reset_items",
            "destructiveHint: false",
            "truncated $WORKSPACE/items.txt",
        ),
        (
            "archive_note",
            "destructiveHint: false",
            "renamed over $WORKSPACE/archive.txt",
        ),
    ] {
        let row = lines[..24]
            .iter()
            .find(|l| l.contains(&format!("✗ {tool} ")) && l.contains(hint))
            .unwrap_or_else(|| panic!("{tool} {hint} not on the first screen:\n{first_screen}"));
        assert!(row.contains(evidence), "{row}");
    }
    // Its rows are aligned: the evidence column starts at the same place in each.
    let evidence_at: BTreeSet<usize> = lines[..24]
        .iter()
        .filter(|l| l.starts_with("  ✗ "))
        .map(|l| {
            let byte = l
                .find("  call ")
                .or_else(|| l.find("  repeat "))
                .unwrap_or_else(|| panic!("no evidence in {l}"));
            l[..byte].chars().count()
        })
        .collect();
    assert_eq!(evidence_at.len(), 1, "{first_screen}");
    // Observers in short form; ✓ only beside a tool with nothing to say.
    assert!(
        out.stdout.contains("--verbose says what each sees"),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout.contains("seccomp user notification"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("\n! fetch_quote\n"),
        "a tool with a warning: {}",
        out.stdout
    );
    assert!(!out.stdout.contains("✓ fetch_quote"), "{}", out.stdout);
    assert!(out.stdout.contains("✓ read_note "), "{}", out.stdout);
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("result:   7 contradicted")),
        "the result closes the report too"
    );
    // --verbose: every observer, every n/a row, every suggestion's reason.
    let verbose = run(&["verify", "--verbose", "--scenario", &demo], &[], LIMIT);
    assert!(
        verbose.stdout.contains("seccomp user notification"),
        "{}",
        verbose.stdout
    );
    assert!(
        verbose
            .stdout
            .contains("    suggest:   openWorldHint: false (consistent"),
        "{}",
        verbose.stdout
    );
    assert!(verbose.stdout.lines().count() > lines.len());
}

#[test]
fn a_log_gets_a_plain_progress_line_every_few_seconds_on_long_runs() {
    // A server whose one tool takes 12 s: a log (stderr is a pipe here) gets lines on the way.
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        "[run]\nrepeat = 1\n[[tools]]\nname = \"slow\"\nannotations = { readOnlyHint = true }\nsteps = [{ action = \"sleep\", ms = 12000 }]\n",
    )
    .expect("write");
    let scenario = scenario.display().to_string();
    let out = run(&["verify", "--scenario", &scenario], &[], LIMIT);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let progress: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("hintcheck: ") && l.contains(" s: "))
        .collect();
    assert!(progress.len() >= 2, "{}", out.stderr);
    assert!(
        progress
            .iter()
            .any(|l| l.contains("calling tool 1 of 1 (slow)")),
        "{progress:?}"
    );
    let quiet = run(
        &["verify", "--no-progress", "--scenario", &scenario],
        &[],
        LIMIT,
    );
    assert!(
        !quiet.stderr.contains(" s: calling tool"),
        "{}",
        quiet.stderr
    );
}

/// A server that prints something other than JSON-RPC and never answers: the progress says
/// how long the greeting has waited and what came instead of an answer, before the error.
#[test]
fn a_greeting_that_gets_garbage_says_so_while_it_waits() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("scenario.toml"),
        "[meta]\nid = \"garbage-then-silence\"\n\n[fake]\ngarbage_before_handshake = [\"Loading model weights...\", \"42%\", \"{not json\"]\nnever_answer_initialize = true\n",
    )
    .expect("write");
    let scenario = dir.path().display().to_string();
    let child = spawn(
        &[
            "verify",
            "--scenario",
            &scenario,
            "--era",
            "legacy",
            "--handshake-timeout",
            "12s",
        ],
        &[],
    );
    let (code, stderr, _) = finish(child, LIMIT);
    assert_eq!(code, 3, "{stderr}");
    let progress = stderr
        .lines()
        .find(|l| l.contains("greeting the server:"))
        .unwrap_or_else(|| panic!("no greeting progress:\n{stderr}"));
    assert!(
        progress.contains("3 line(s) on its stdout that are not JSON-RPC"),
        "{progress}"
    );
    let error_at = stderr.find("could not be greeted").expect("the error");
    assert!(
        stderr.find(progress).is_some_and(|p| p < error_at),
        "{stderr}"
    );
}
