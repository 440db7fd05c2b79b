//! The command line: usage errors name the problem and exit 2, harness errors exit 3,
//! formats, explain, the transcript, and cleanup of processes and scratch directories.

use std::time::Duration;

use crate::util::{at, entries, processes_matching, run};

const LIMIT: Duration = Duration::from_secs(60);

#[test]
fn explain_prints_docs_and_lists_audits() {
    let out = run(&["explain", "read-only"], &[], LIMIT);
    assert_eq!(out.code, 0);
    assert!(
        out.stdout.starts_with("read-only — readOnlyHint: true"),
        "{}",
        out.stdout
    );
    let all = run(&["explain"], &[], LIMIT);
    assert_eq!(all.code, 0);
    for id in [
        "read-only",
        "destructive",
        "idempotent",
        "open-world",
        "annotation-type",
        "protocol",
        "secret-access",
        "exfiltration",
    ] {
        assert!(
            all.stdout.contains(id),
            "{id} missing from:\n{}",
            all.stdout
        );
    }
    let bad = run(&["explain", "nope"], &[], LIMIT);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("no audit or hint named \"nope\""),
        "{}",
        bad.stderr
    );
    // A hint's name explains the audit that judges it.
    for (hint, audit) in [
        ("readOnlyHint", "read-only"),
        ("destructivehint", "destructive"),
        ("openWorldHint", "open-world"),
    ] {
        let out = run(&["explain", hint], &[], LIMIT);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stdout.starts_with(&format!("{audit} — ")),
            "{}",
            out.stdout
        );
    }
}

#[test]
fn usage_errors_name_the_problem_and_exit_2() {
    let cases: &[(&[&str], &str)] = &[
        (&["verify"], "no server command"),
        (&["verify", "--repeat", "0", "--", "x"], "--repeat"),
        (&["verify", "--attempts", "17", "--", "x"], "--attempts"),
        (
            &["verify", "--sqlite", "../outside.db", "--", "x"],
            "--sqlite",
        ),
        (&["verify", "--sqlite", "/abs.db", "--", "x"], "--sqlite"),
        (&["verify", "--run-as", "nobody", "--", "x"], "--run-as"),
        (&["verify", "--run-as", "1:x", "--", "x"], "--run-as"),
        (&["verify", "--env", "=x", "--", "x"], "--env"),
        (
            &["verify", "--call-timeout", "soon", "--", "x"],
            "--call-timeout",
        ),
        (&["verify", "--args", "t=[1]", "--", "x"], "--args"),
        (
            &["verify", "--call-timeout", "0s", "--", "x"],
            "--call-timeout: a timeout of zero",
        ),
        (
            &["verify", "--settle", "3s", "--settle-max", "1s", "--", "x"],
            "longer than --settle-max",
        ),
        (
            &["verify", "--jobs", "0", "--", "x"],
            "--jobs: must be at least 1",
        ),
        (
            &["verify", "--transport", "http", "--", "x"],
            "`{port}` must appear in the command",
        ),
        (
            &["verify", "--http-path", "/mcp", "--", "x"],
            "--http-path: only with --transport http",
        ),
        (
            &[
                "verify",
                "--transport",
                "http",
                "--http-path",
                "mcp",
                "--",
                "x",
                "{port}",
            ],
            "--http-path",
        ),
        (
            &[
                "verify",
                "--transport",
                "http",
                "--header",
                "Bad Name=1",
                "--",
                "x",
                "{port}",
            ],
            "--header",
        ),
        (&["verify", "--no-such-flag"], "--no-such-flag"),
        (
            &["verify", "--workspace", "/nonexistent/seed", "--", "x"],
            "/nonexistent/seed",
        ),
        (
            &["verify", "--scenario", "/nonexistent/scenario.toml"],
            "/nonexistent/scenario.toml",
        ),
    ];
    for (args, needle) in cases {
        let out = run(args, &[], LIMIT);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains(needle),
            "{args:?}: {needle} not in {}",
            out.stderr
        );
    }
}

#[test]
fn a_scenario_with_an_unknown_key_is_rejected_naming_key_and_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("scenario.toml");
    std::fs::write(&file, "[server]\ncomand = [\"x\"]\n").expect("write");
    let out = run(
        &["verify", "--scenario", file.to_str().expect("utf8")],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("comand") && out.stderr.contains("scenario.toml"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_missing_server_command_is_a_harness_error_with_a_report() {
    let out = run(
        &[
            "verify",
            "--format",
            "json",
            "--",
            "no-such-mcp-server-hintcheck",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["exit_code"], 3);
    assert!(
        r["server"]["start_error"]
            .as_str()
            .expect("error")
            .contains("no-such-mcp-server-hintcheck")
    );
}

#[test]
fn a_server_that_exits_at_once_is_reported_with_its_stderr() {
    let out = run(
        &["verify", "--", "sh", "-c", "echo broken config >&2; exit 7"],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stdout.contains("could not be verified"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("exited with code 7"), "{}", out.stdout);
    assert!(out.stdout.contains("| broken config"), "{}", out.stdout);
}

#[test]
fn json_report_is_versioned_and_complete() {
    let out = run(
        &[
            "verify",
            "--scenario",
            &at("scenarios/demo"),
            "--format",
            "json",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["schema_version"], 1);
    assert_eq!(r["sandbox"]["level"], "full", "{}", r["sandbox"]);
    assert_eq!(r["sandbox"]["requested"], "required");
    assert_eq!(r["coverage"]["files_observed"], true);
    assert_eq!(r["coverage"]["network_observed"], true);
    assert_eq!(r["summary"]["contradicted"], 7);
    let tools = r["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 11);
    for t in tools {
        assert_eq!(
            t["verdicts"].as_array().map(Vec::len),
            Some(4),
            "{}",
            t["name"]
        );
        assert!(
            t["definition_sha256"]
                .as_str()
                .is_some_and(|h| h.len() == 64)
        );
    }
    let get_status = tools
        .iter()
        .find(|t| t["name"] == "get_status")
        .expect("get_status");
    let obs = &get_status["calls"][0]["observations"][0];
    assert_eq!(obs["type"], "file");
    assert_eq!(obs["kind"], "created");
    assert_eq!(obs["mechanism"], "snapshot");
    assert_eq!(obs["path"], "$WORKSPACE/status.log");
    assert!(
        out.stderr.trim_end().ends_with("(exit 1)"),
        "{}",
        out.stderr
    );
}

#[test]
fn text_report_escapes_what_the_server_sent() {
    let out = run(
        &["verify", "--scenario", &at("scenarios/malformed-tools")],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains('\u{1b}'), "raw escape in report");
    assert!(
        !out.stdout.contains('\u{202e}'),
        "raw bidi override in report"
    );
    assert!(out.stdout.contains("- task_only"), "{}", out.stdout);
    // Without a seed of its own, the run lists the default seed it made.
    let seeded = out
        .stdout
        .lines()
        .find(|l| l.starts_with("seeded:"))
        .unwrap_or_default();
    // The text report shows the first eight (sorted) and counts the rest; among them the
    // small valid documents of the common types (issue 14).
    for file in [
        "data/budget.xlsx",
        "data/sample.json",
        "data/table.csv",
        "docs/readme.md",
        "docs/report.docx",
        "docs/summary.pdf",
        "draft.txt",
    ] {
        assert!(seeded.contains(file), "{file}: {seeded}");
    }
    assert!(seeded.contains("more"), "{seeded}");
    let has_git = std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert_eq!(seeded.contains(".git (repository"), has_git, "{seeded}");
}

#[test]
fn output_file_transcript_and_no_leftovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    let report = dir.path().join("report.json");
    let transcript = dir.path().join("transcript.jsonl");
    let out = run(
        &[
            "verify",
            "--scenario",
            &at("scenarios/crash-and-hang"),
            "--format",
            "json",
            "--output",
            report.to_str().expect("utf8"),
            "--transcript",
            transcript.to_str().expect("utf8"),
        ],
        &[("TMPDIR", tmp.to_str().expect("utf8"))],
        LIMIT,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.is_empty());
    let r: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).expect("report")).expect("json");
    assert_eq!(r["server"]["restarts"], 3);
    let lines = std::fs::read_to_string(&transcript).expect("transcript");
    assert!(lines.lines().count() > 10);
    for l in lines.lines() {
        let e: serde_json::Value = serde_json::from_str(l).expect("jsonl");
        assert!(e["direction"] == "sent" || e["direction"] == "received");
    }
    assert!(
        entries(&tmp).is_empty(),
        "scratch left behind: {:?}",
        entries(&tmp)
    );
    // Other tests may run the same scenario at this moment: wait for their runs to end too.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !processes_matching("--linger 4242").is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        processes_matching("--linger 4242").is_empty(),
        "daemon left running"
    );
}

#[test]
fn an_unwritable_output_still_prints_the_report() {
    let out = run(
        &[
            "verify",
            "--scenario",
            &at("scenarios/startup-writer"),
            "--output",
            "/dev/null/dir/report.txt",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 3);
    assert!(out.stdout.contains("result:"), "{}", out.stdout);
    assert!(
        out.stderr.contains("/dev/null/dir/report.txt"),
        "{}",
        out.stderr
    );
}

#[test]
fn workspace_placeholder_env_and_args_overrides_reach_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("seed.txt"), "seed").expect("w");
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        r#"
[[tools]]
name = "write_named"
annotations = { readOnlyHint = true }
input_schema = { type = "object", properties = { name = { type = "string" } }, required = ["name"] }
steps = [{ action = "write", path = "{arg:name}", content = "x" }]
"#,
    )
    .expect("write");
    let out = run(
        &[
            "verify",
            "--scenario",
            scenario.to_str().expect("utf8"),
            "--workspace",
            dir.path().to_str().expect("utf8"),
            "--args",
            r#"write_named={"name":"chosen.txt"}"#,
            "--format",
            "json",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["tools"][0]["arguments"]["name"], "chosen.txt");
    assert_eq!(r["tools"][0]["arguments_overridden"][0], "name");
    assert_eq!(
        r["tools"][0]["calls"][0]["observations"][0]["path"],
        "$WORKSPACE/chosen.txt"
    );
    assert!(
        r["seeded"]
            .as_array()
            .expect("seeded")
            .iter()
            .any(|s| s == "seed.txt")
    );
}

#[test]
fn a_server_over_http_is_judged_as_over_stdio_in_and_out_of_the_sandbox() {
    // The stateless revision over HTTP: every POST names its method and version in headers
    // (the fake server refuses a header that disagrees with the body).
    let modern = crate::util::repo().join("scenarios/modern-era");
    let out = run(
        &[
            "verify",
            "--scenario",
            modern.to_str().expect("utf8"),
            "--transport",
            "http",
            "--check",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let scenario = crate::util::repo().join("tests/fixtures/over-http");
    let s = scenario.to_str().expect("utf8");
    for extra in [&[][..], &["--no-sandbox"][..]] {
        let mut args = vec!["verify", "--scenario", s, "--format", "json"];
        args.extend(extra);
        let out = run(&args, &[], LIMIT);
        assert_eq!(out.code, 1, "{extra:?}: {}", out.stderr);
        let r = out.json();
        assert_eq!(r["settings"]["transport"], "http");
        let verdict =
            |tool: usize, hint: usize| r["tools"][tool]["verdicts"][hint]["verdict"].clone();
        assert_eq!(r["tools"][0]["name"], "slow_read");
        assert_eq!(verdict(0, 0), "consistent", "{extra:?}");
        assert_eq!(r["tools"][1]["name"], "get_status");
        assert_eq!(verdict(1, 0), "contradicted", "{extra:?}");
        // Its arguments went in Mcp-Param-* headers as well (the server checks them).
        assert_eq!(r["tools"][2]["name"], "routed_read");
        for call in r["tools"][2]["calls"].as_array().expect("calls") {
            assert_eq!(call["outcome"], "ok", "{extra:?}: {call}");
        }
        // The port was chosen by hintcheck and named on the command line.
        let command = r["server"]["command"].as_array().expect("command");
        let port = command.last().and_then(|p| p.as_str()).expect("port");
        assert!(port.parse::<u16>().is_ok(), "{command:?}");
        if extra.is_empty() {
            // hintcheck's own connections to the server's port are not the server's traffic.
            let text = r.to_string();
            assert!(!text.contains(&format!(":{port}\"")), "{text}");
            assert_eq!(verdict(0, 3), "consistent");
        }
    }
}

#[test]
fn a_server_on_a_fixed_port_gets_it_and_the_observer_steps_aside() {
    let fake = crate::util::fake_server();
    let fake = fake.to_str().expect("utf8");
    let scenario = crate::util::repo().join("tests/fixtures/over-http/scenario.toml");
    let s = scenario.to_str().expect("utf8");
    // 8080 is one of the ports whose first bytes the network observer reads by default.
    let out = run(
        &[
            "verify",
            "--format",
            "json",
            "--transport",
            "http",
            "--http-port",
            "8080",
            "--",
            fake,
            "--scenario",
            s,
            "--http",
            "8080",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 1, "the liar is caught: {}", out.stderr);
    let r = out.json();
    assert_eq!(r["settings"]["transport"], "http");
    assert_eq!(r["coverage"]["tools_succeeded"], 3, "{}", r["coverage"]);
    let net = r["coverage"]["observers"]
        .as_array()
        .expect("observers")
        .iter()
        .find(|o| o["name"] == "lo-local network")
        .expect("the network observer")["covers"]
        .to_string();
    assert!(net.contains("ports 80, 443, 8443"), "{net}");
    // What cannot be: a privileged port, the observer's port asked for by name, no transport.
    for (args, says) in [
        (
            &["--transport", "http", "--http-port", "443"][..],
            "below 1024",
        ),
        (
            &[
                "--transport",
                "http",
                "--http-port",
                "8080",
                "--observe-port",
                "8080",
            ][..],
            "the port the server listens on",
        ),
        (&["--http-port", "3000"][..], "only with --transport http"),
    ] {
        let mut all = vec!["verify"];
        all.extend_from_slice(args);
        all.extend(["--", fake]);
        let out = run(&all, &[], LIMIT);
        assert_eq!(out.code, 2, "{args:?}");
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
    }
}

#[test]
fn a_server_with_only_the_older_http_sse_transport_is_spoken_to_in_it() {
    // Its endpoint refuses the handshake's POST; its GET /sse stream names where messages go.
    let scenario = crate::util::repo().join("tests/fixtures/over-http-sse");
    let s = scenario.to_str().expect("utf8");
    let dir = tempfile::tempdir().expect("tmp");
    let transcript = dir.path().join("transcript.jsonl");
    let t = transcript.to_str().expect("utf8");
    for extra in [&[][..], &["--no-sandbox"][..]] {
        let mut args = vec![
            "verify",
            "--scenario",
            s,
            "--format",
            "json",
            "--transcript",
            t,
        ];
        args.extend(extra);
        let out = run(&args, &[], LIMIT);
        // Every line of the transcript names the transport it went over.
        let lines = std::fs::read_to_string(&transcript).expect("transcript");
        assert!(lines.lines().count() > 4, "{lines}");
        for line in lines.lines() {
            let entry: serde_json::Value = serde_json::from_str(line).expect("json");
            assert_eq!(entry["transport"], "http+sse", "{line}");
        }
        assert_eq!(out.code, 1, "{extra:?}: {}", out.stderr);
        let r = out.json();
        assert_eq!(r["settings"]["transport"], "http+sse", "{extra:?}");
        let tool = |name: &str| {
            r["tools"]
                .as_array()
                .expect("tools")
                .iter()
                .find(|t| t["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("{name}"))
        };
        let read_only = |name: &str| tool(name)["verdicts"][0]["verdict"].clone();
        assert_eq!(read_only("read_status"), "consistent", "{extra:?}");
        assert_eq!(read_only("get_status"), "contradicted", "{extra:?}");
        // The server ends its stream at this call: the session sees it hang up, and the next
        // tool gets a fresh server.
        assert_eq!(tool("hang_up")["calls"][0]["outcome"], "server died");
        assert_eq!(read_only("read_after"), "consistent", "{extra:?}");
        let findings = r["findings"].to_string();
        assert!(
            findings.contains("the server ended its event stream"),
            "{findings}"
        );
        assert!(!findings.contains("second response"), "{findings}");
    }
}
