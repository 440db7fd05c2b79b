//! `hintcheck scan` and `merge`: parallel jobs, shards, JSON Lines, `--check`, and the suite of
//! real servers from npm and PyPI (installed by their scenarios' `[setup]`).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::util::{
    Outcome, assert_self_contained, cache, chromium, copy_dir, installers_present,
    render_in_browser, repo, run,
};

const LIMIT: Duration = Duration::from_secs(600);

fn lines(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn scan(args: &[&str]) -> Outcome {
    let cache = cache();
    let mut all = vec!["scan", "--cache-dir", cache.as_str()];
    all.extend_from_slice(args);
    run(&all, &[], LIMIT)
}

const FAST: [&str; 4] = [
    "scenarios/demo",
    "scenarios/modern-era",
    "scenarios/pagination",
    "scenarios/nothing-verified",
];

#[test]
fn shards_split_the_list_and_merge_puts_them_back_together() {
    let dir = tempfile::tempdir().expect("tmp");
    let cache = cache();
    let paths: Vec<String> = FAST
        .iter()
        .map(|p| repo().join(p).display().to_string())
        .collect();
    let mut files = Vec::new();
    let mut seen = BTreeSet::new();
    for k in 1..=2 {
        let out = dir.path().join(format!("shard-{k}.jsonl"));
        // The first shard named on the command line, the second read from the environment
        // a GitHub matrix job is given (0-based, as strategy.job-index is).
        let shard = if k == 1 { "1/2" } else { "auto" };
        let mut args = vec![
            "scan",
            "--cache-dir",
            &cache,
            "--jobs",
            "2",
            "--shard",
            shard,
            "--output",
            out.to_str().expect("utf-8"),
        ];
        args.extend(paths.iter().map(String::as_str));
        let o = run(
            &args,
            &[
                ("HINTCHECK_SHARD_INDEX", "1"),
                ("HINTCHECK_SHARD_COUNT", "2"),
            ],
            LIMIT,
        );
        if k == 2 {
            assert!(
                o.stderr
                    .contains("shard 2/2 (from HINTCHECK_SHARD_INDEX=1 and HINTCHECK_SHARD_COUNT)"),
                "{}",
                o.stderr
            );
        }
        // demo contradicts itself on purpose (1); nothing-verified verifies nothing (4).
        assert!(matches!(o.code, 1 | 4), "{}", o.stderr);
        let got = lines(&std::fs::read_to_string(&out).expect("jsonl"));
        assert_eq!(got.len(), 2, "two of four per shard");
        for l in &got {
            assert_eq!(l["scan_version"], 1);
            assert_eq!(l["shard"], format!("{k}/2"));
            assert!(l["report"]["schema_version"].is_number(), "{l}");
            assert_eq!(l["transport"], "stdio", "{l}");
            assert!(
                seen.insert(l["id"].as_str().expect("id").to_string()),
                "overlap"
            );
        }
        files.push(out);
    }
    assert_eq!(
        seen,
        ["demo", "modern-era", "pagination", "nothing-verified"]
            .into_iter()
            .map(String::from)
            .collect()
    );
    let file_args: Vec<&str> = files.iter().map(|f| f.to_str().expect("utf-8")).collect();
    let mut merge_args = vec!["merge", "--format", "json"];
    merge_args.extend(&file_args);
    let merged = run(&merge_args, &[], LIMIT);
    assert_eq!(merged.code, 1, "the combined exit: contradictions");
    let m = merged.json();
    assert_eq!(m["totals"]["servers"], 4);
    assert_eq!(m["totals"]["contradicted"], 7 + 1 + 1);
    let mut text_args = vec!["merge"];
    text_args.extend(&file_args);
    let text = run(&text_args, &[], LIMIT);
    assert!(text.stdout.contains("nothing-verified"), "{}", text.stdout);
    assert!(text.stdout.contains("4 server(s)"), "{}", text.stdout);
    let modern = text
        .stdout
        .lines()
        .find(|l| l.starts_with("modern-era "))
        .expect("a row");
    assert!(modern.contains(" stdio "), "{modern}");
    // One shard alone: merge says which is missing.
    let half = run(&["merge", file_args[0]], &[], LIMIT);
    assert!(
        half.stdout.contains("no line from shard(s) 2/2"),
        "{}",
        half.stdout
    );
    assert!(
        !text.stdout.contains("no line from shard"),
        "{}",
        text.stdout
    );
}

#[test]
fn a_rerun_resumes_keeping_servers_done_at_the_same_version() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("scan.jsonl");
    let out_arg = out.to_str().expect("utf-8").to_string();
    let paths: Vec<String> = FAST
        .iter()
        .map(|p| repo().join(p).display().to_string())
        .collect();
    let scan_resuming = |extra: &[&str]| {
        let mut args = vec!["--jobs", "2", "--resume", "--output", out_arg.as_str()];
        args.extend_from_slice(extra);
        args.extend(paths.iter().map(String::as_str));
        scan(&args)
    };
    // A first run (the file does not exist yet).
    let first = scan_resuming(&[]);
    assert!(matches!(first.code, 1 | 4), "{}", first.stderr);
    let whole = std::fs::read_to_string(&out).expect("jsonl");
    let done = lines(&whole);
    assert_eq!(done.len(), 4, "{}", first.stderr);
    assert!(done.iter().all(|l| l["run_key"].is_string()), "{whole}");
    // The earlier run died writing its last line, and one server's line is from another
    // version of hintcheck (or of the package): only that one runs again.
    let mut edited: Vec<String> = whole.lines().map(str::to_string).collect();
    let mut stale: Value = serde_json::from_str(&edited[1]).expect("line");
    stale["run_key"] = "from another version".into();
    let stale_target = stale["target"].as_str().expect("target").to_string();
    edited[1] = stale.to_string();
    let mut text = edited.join("\n");
    text.push_str("\n{\"scan_version\":1,\"target\":\"cut off");
    std::fs::write(&out, &text).expect("write");
    let second = scan_resuming(&[]);
    assert_eq!(second.code, first.code, "{}", second.stderr);
    assert!(
        second.stderr.contains("removed a last line cut off"),
        "{}",
        second.stderr
    );
    assert!(
        second.stderr.contains("3 of 4 server(s) already verified"),
        "{}",
        second.stderr
    );
    let after = lines(&std::fs::read_to_string(&out).expect("jsonl"));
    assert_eq!(after.len(), 5, "the four lines and the rerun one appended");
    assert_eq!(after[4]["target"], stale_target.as_str());
    assert_ne!(after[4]["run_key"], "from another version");
    // Merge takes the newest line per server.
    let merged = run(&["merge", "--format", "json", &out_arg], &[], LIMIT);
    assert_eq!(merged.json()["totals"]["servers"], 4, "{}", merged.stdout);
    // Nothing left to do; other options make another run.
    let third = scan_resuming(&[]);
    assert!(
        third.stderr.contains("4 of 4 server(s) already verified"),
        "{}",
        third.stderr
    );
    assert_eq!(
        third.code, first.code,
        "the kept lines decide the exit code"
    );
    let other = scan_resuming(&["--fail-on", "warning"]);
    assert!(
        other.stderr.contains("0 of 4 server(s) already verified"),
        "{}",
        other.stderr
    );
    // A file that is not a scan's results is left alone.
    std::fs::write(&out, "not a scan\n").expect("write");
    let refused = scan_resuming(&[]);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains(":1 is not a line of a hintcheck scan"),
        "{}",
        refused.stderr
    );
    assert_eq!(std::fs::read_to_string(&out).expect("kept"), "not a scan\n");
}

#[test]
fn check_judges_by_expectations_and_fails_on_a_false_accusation() {
    let dir = tempfile::tempdir().expect("tmp");
    // The demo, expecting one lie fewer (the unlisted contradiction is unexpected) and one
    // firm lie as weak (firmness is checked both ways).
    let text = std::fs::read_to_string(repo().join("scenarios/demo/scenario.toml"))
        .expect("demo")
        .replace("\"get_status:readOnlyHint\",", "")
        .replace(
            "[expect]\n",
            "[expect]\nweak = [\"add_item:idempotentHint\"]\n",
        );
    let strict = dir.path().join("strict");
    std::fs::create_dir_all(&strict).expect("mkdir");
    std::fs::write(strict.join("scenario.toml"), &text).expect("write");
    copy_dir(
        &repo().join("scenarios/demo/workspace"),
        &strict.join("workspace"),
    );
    let demo = repo().join("scenarios/demo").display().to_string();
    let strict_path = strict.display().to_string();
    let o = scan(&["--check", "--jobs", "2", &demo, &strict_path]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let got = lines(&o.stdout);
    let by_target = |needle: &str| {
        got.iter()
            .find(|l| l["target"].as_str().is_some_and(|t| t.contains(needle)))
            .unwrap_or_else(|| panic!("{needle}"))
            .clone()
    };
    assert_eq!(
        by_target("/demo/")["expectations"]["unmet"],
        serde_json::json!([])
    );
    let unmet = by_target("/strict/")["expectations"]["unmet"].clone();
    assert!(
        unmet
            .to_string()
            .contains("get_status:readOnlyHint: contradicted"),
        "{unmet}"
    );
    assert!(
        unmet.to_string().contains(
            "add_item:idempotentHint: a firm contradiction (an error), expected weak (a warning)"
        ),
        "{unmet}"
    );
    assert!(
        o.stderr.contains("expectations 1 met, 1 unmet"),
        "{}",
        o.stderr
    );
}

#[test]
fn bad_scan_and_merge_input_is_named() {
    let o = scan(&["/nonexistent-hintcheck-path"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("/nonexistent-hintcheck-path"),
        "{}",
        o.stderr
    );
    let o = scan(&["--shard", "3/2", "scenarios"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--shard"), "{}", o.stderr);
    let dir = tempfile::tempdir().expect("tmp");
    let bad = dir.path().join("results.jsonl");
    std::fs::write(&bad, "{\"scan_version\": 1}\n").expect("write");
    let o = run(&["merge", bad.to_str().expect("utf-8")], &[], LIMIT);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("results.jsonl:1"), "{}", o.stderr);
}

#[test]
fn launchers_that_download_are_refused_with_what_to_do_instead() {
    let o = run(
        &[
            "verify",
            "--",
            "npx",
            "-y",
            "@modelcontextprotocol/server-memory@2026.8.31",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("[setup] npm = [\"@modelcontextprotocol/server-memory@2026.8.31\"]"),
        "{}",
        o.stderr
    );
    let o = run(&["verify", "--", "uvx", "mcp-server-time"], &[], LIMIT);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("{venv}/bin/mcp-server-time"),
        "{}",
        o.stderr
    );
    // An unpinned package in [setup] is the scenario's mistake.
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::write(
        dir.path().join("scenario.toml"),
        "[setup]\nnpm = [\"@modelcontextprotocol/server-memory\"]\n[server]\ncommand = [\"node\", \"{npm}/x.js\"]\n",
    )
    .expect("write");
    let o = run(
        &["verify", "--scenario", dir.path().to_str().expect("utf-8")],
        &[],
        LIMIT,
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("not pinned"), "{}", o.stderr);
}

/// A registry list page mixing npm, PyPI (stdio and Streamable HTTP), remote-only, OCI, MCPB
/// and a server that needs a secret: the runnable ones are installed pinned and verified, the
/// others are skipped with their reasons, and the page's servers merge into one summary.
#[test]
fn a_registry_page_is_scanned_with_the_right_skips() {
    if !installers_present() {
        return;
    }
    let page = repo().join("tests/fixtures/registry/page.json");
    let page = page.to_str().expect("utf-8");
    let listed = scan(&["--list", page]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_eq!(listed.stdout.lines().count(), 7, "{}", listed.stdout);
    // Two shards, as two machines of a fleet would scan the page.
    let dir = tempfile::tempdir().expect("tmp");
    let mut shards = Vec::new();
    let mut got = Vec::new();
    for k in 1..=2 {
        let out = dir.path().join(format!("shard-{k}.jsonl"));
        let o = scan(&[
            "--jobs",
            "2",
            "--shard",
            &format!("{k}/2"),
            "--output",
            out.to_str().expect("utf-8"),
            page,
        ]);
        let part = lines(&std::fs::read_to_string(&out).expect("jsonl"));
        assert!(!part.is_empty(), "shard {k}: {}", o.stderr);
        got.extend(part);
        shards.push(out.to_str().expect("utf-8").to_string());
    }
    assert_eq!(got.len(), 7, "{got:?}");
    let line = |name: &str| {
        got.iter()
            .find(|l| l["id"].as_str().is_some_and(|i| i.starts_with(name)))
            .unwrap_or_else(|| panic!("{name}: {got:?}"))
            .clone()
    };
    for (name, why) in [
        ("test.example/hosted@", "remote only"),
        ("test.example/container@", "OCI image"),
        ("test.example/bundle@", "MCPB bundle"),
        ("test.example/weather@", "secret WEATHER_API_KEY"),
    ] {
        let l = line(name);
        let skipped = l["skipped"].as_str().unwrap_or_default();
        assert!(skipped.contains(why), "{name}: {l}");
        assert_eq!(l["exit_code"], 0, "{l}");
        assert!(l["report"].is_null());
    }
    for (name, transport) in [
        ("io.github.modelcontextprotocol/server-memory@", "stdio"),
        ("io.github.modelcontextprotocol/server-time@", "stdio"),
        ("io.github.modelcontextprotocol/server-everything@", "http"),
    ] {
        let l = line(name);
        assert!(l["skipped"].is_null(), "{l}");
        assert!(
            matches!(l["exit_code"].as_i64(), Some(0 | 1)),
            "{name}: {}",
            l["exit_reason"]
        );
        assert_eq!(l["transport"], transport, "{name}");
        assert!(
            l["report"]["coverage"]["tools_succeeded"]
                .as_u64()
                .unwrap_or(0)
                > 0,
            "{name}: no tool reached"
        );
    }
    // The page's launch details reached the servers: the memory file in the workspace, the
    // time zone named on the command line.
    let memory = line("io.github.modelcontextprotocol/server-memory@");
    assert!(
        memory["report"]["server"]["command"]
            .to_string()
            .contains("index.js"),
        "{}",
        memory["report"]["server"]["command"]
    );
    let time = line("io.github.modelcontextprotocol/server-time@");
    assert!(
        time["report"]["server"]["command"]
            .to_string()
            .contains("--local-timezone"),
        "{}",
        time["report"]["server"]["command"]
    );
    let merged = run(&["merge", &shards[0], &shards[1]], &[], LIMIT);
    assert!(
        merged.stdout.contains("7 server(s)") && merged.stdout.contains("4 skipped"),
        "{}",
        merged.stdout
    );
    assert!(
        merged.stdout.contains("skipped (remote only:"),
        "{}",
        merged.stdout
    );
    // The two shards as one page people can browse, checked in a real browser; the page and
    // its screenshot are kept under target/hintcheck-html.
    let kept = repo().join("target/hintcheck-html");
    std::fs::create_dir_all(&kept).expect("target/hintcheck-html");
    let html = kept.join("registry-scan.html");
    let o = run(
        &[
            "merge",
            "--format",
            "html",
            "--output",
            html.to_str().expect("utf-8"),
            &shards[0],
            &shards[1],
        ],
        &[],
        LIMIT,
    );
    assert!(matches!(o.code, 0 | 1), "{}", o.stderr);
    let page_text = std::fs::read_to_string(&html).expect("html");
    assert_self_contained(&page_text);
    let Some(browser) = chromium() else {
        return;
    };
    let shown = render_in_browser(&browser, &html, &kept.join("registry-scan.png"));
    let dom = &shown.dom;
    assert_eq!(dom.matches("<tr class=\"row-").count(), 7, "{dom}");
    assert_eq!(dom.matches("<details class=\"server\"").count(), 3, "{dom}");
    for part in [
        "id=\"hint-chart\"",
        "id=\"share-with-claim\"",
        "id=\"share-contradicted\"",
        "id=\"reach\"",
        "remote only",
        "OCI image",
        "server-everything",
    ] {
        assert!(dom.contains(part), "{part} not in the rendered page");
    }
    assert_eq!(shown.size, (1280, 1800));
    assert!(
        shown.png_bytes > 20_000,
        "a screenshot of {} bytes shows next to nothing",
        shown.png_bytes
    );
}

/// Registry entries that need more than their install: a Node newer than the machine's (from
/// the npm registry's Node binary packages), a Python server written for the 1.x `mcp` SDK
/// that dies under 2.x (installed again with `mcp<2`), an HTTP server on the fixed port its
/// URL names; each report says what was done.
#[test]
fn what_a_package_needs_beyond_its_install_is_provided_and_said() {
    if !installers_present() {
        return;
    }
    let page = repo().join("tests/fixtures/registry/runtimes.json");
    let o = scan(&["--jobs", "2", page.to_str().expect("utf-8")]);
    let got = lines(&o.stdout);
    assert_eq!(got.len(), 3, "{}", o.stderr);
    let line = |name: &str| {
        got.iter()
            .find(|l| l["id"].as_str().is_some_and(|i| i.contains(name)))
            .unwrap_or_else(|| panic!("{name}: {}", o.stderr))
            .clone()
    };
    let notes = |l: &Value| l["report"]["notes"].to_string();
    // firecrawl-mcp declares engines.node >=22.0.0.
    let firecrawl = line("firecrawl");
    assert!(
        matches!(firecrawl["exit_code"].as_i64(), Some(0 | 1)),
        "{}: {}",
        firecrawl["exit_reason"],
        firecrawl["error"]
    );
    assert!(
        firecrawl["report"]["coverage"]["tools_succeeded"]
            .as_u64()
            .unwrap_or(0)
            > 0,
        "{}",
        firecrawl["exit_reason"]
    );
    let program = firecrawl["report"]["server"]["command"][0]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let machine_major: Option<u64> = std::process::Command::new("node")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .trim()
                .trim_start_matches('v')
                .split('.')
                .next()
                .and_then(|m| m.parse().ok())
        });
    if machine_major.is_some_and(|m| m >= 22) {
        assert_eq!(program, "node", "the machine's Node will do");
    } else {
        assert!(
            program.ends_with("/bin/node") && program.contains("node-linux-"),
            "{program}"
        );
        assert!(
            notes(&firecrawl).contains("firecrawl-mcp needs Node >=22.0.0"),
            "{}",
            notes(&firecrawl)
        );
    }
    // mcp-server-sqlite 2025.4.25 dies under the 2.x SDK its dependencies resolve to.
    let sqlite = line("server-sqlite");
    assert_eq!(sqlite["exit_code"], 0, "{}", sqlite["exit_reason"]);
    assert!(
        notes(&sqlite).contains("installed again with mcp<2")
            && notes(&sqlite).contains("on mcp 1."),
        "{}",
        notes(&sqlite)
    );
    assert_eq!(
        sqlite["report"]["coverage"]["tools_succeeded"],
        sqlite["report"]["coverage"]["tools_listed"]
    );
    // server-everything on 3001, the fixed port of its URL, in the sandbox's own namespace.
    let fixed = line("fixed-port");
    // Its get-env returns the run's planted API keys with the rest of its environment: that
    // alone fails the run.
    assert_eq!(fixed["exit_code"], 1, "{}", fixed["exit_reason"]);
    assert!(
        fixed["exit_reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("planted secrets handed on in 1 finding(s)")),
        "{}: {}",
        fixed["exit_reason"],
        fixed["report"]["findings"]
    );
    assert_eq!(fixed["transport"], "http");
    assert!(
        fixed["report"]["coverage"]["tools_succeeded"]
            .as_u64()
            .unwrap_or(0)
            >= 10,
        "{}",
        fixed["report"]["coverage"]
    );
}

/// The whole scenario suite, as CI users would run it: `scan --check --jobs 2 scenarios/`,
/// real servers from npm and PyPI included (installed by their `[setup]`).
#[test]
fn the_real_server_suite_meets_its_expectations() {
    if !installers_present() {
        return;
    }
    let real = std::fs::read_dir(repo().join("scenarios"))
        .expect("scenarios")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("real-"))
        .count();
    assert!(real >= 8, "{real} real-server scenarios");
    let suite = repo().join("scenarios").display().to_string();
    // Fifty-odd real servers, installed on first use by a debug build beside the other
    // tests: a bound on a hang, not a speed target (the scan's own time is in its report).
    let cache = cache();
    let o = run(
        &[
            "scan",
            "--cache-dir",
            cache.as_str(),
            "--check",
            "--jobs",
            "2",
            &suite,
        ],
        &[],
        std::time::Duration::from_secs(30 * 60),
    );
    let got = lines(&o.stdout);
    let none = tempfile::tempdir().expect("tmp");
    let all =
        hintcheck::fleet::scan::expand(&[repo().join("scenarios")], none.path()).expect("expand");
    assert_eq!(got.len(), all.len(), "{}", o.stderr);
    let failures: Vec<String> = got
        .iter()
        .filter(|l| l["exit_code"] != 0)
        .map(|l| {
            // What the unreached tools last answered, and the run's seed: enough to tell a
            // machine's difference (a program not found, a file not readable) from the
            // explorer's, and to rerun it with the same words.
            let answers: Vec<String> = l["report"]["coverage"]["unreached"]
                .as_array()
                .into_iter()
                .flatten()
                .take(6)
                .map(|u| {
                    let said: String = u["said"].as_str().unwrap_or("").chars().take(200).collect();
                    format!("{}: {} {said:?}", u["tool"], u["outcome"])
                })
                .collect();
            format!(
                "{}: {} {} (the run: {}; start: {}; error: {}; seed {}; unreached tools said: {answers:#?})",
                l["id"],
                l["exit_reason"],
                l["expectations"]["unmet"],
                l["report"]["exit_reason"],
                l["report"]["server"]["start_error"],
                l["error"],
                l["report"]["settings"]["seed"],
            )
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}\n{}", o.stderr);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // Every real server was really exercised: tools reached, and a declared hint confirmed
    // where the server declares any (shrimp, tree-sitter, code-runner and sqlite declare none).
    // A server kept in the suite because the explorer reaches none of its tools says so in
    // its scenario (`exit = 4`, nothing verified; @sylphx/pdf-reader-mcp), and was judged by it.
    for l in got.iter().filter(|l| {
        l["id"].as_str().is_some_and(|i| i.starts_with("real-"))
            && l["expectations"]["run_exit_code"] != 4
    }) {
        assert!(
            l["report"]["coverage"]["tools_succeeded"]
                .as_u64()
                .unwrap_or(0)
                > 0,
            "{}: no tool reached",
            l["id"]
        );
        let declares = l["report"]["tools"].as_array().is_some_and(|tools| {
            tools.iter().any(|t| {
                t["declared"]
                    .as_object()
                    .is_some_and(|d| d.values().any(|v| v != "absent"))
            })
        });
        assert!(
            !declares || l["summary"]["consistent"].as_u64().unwrap_or(0) > 0,
            "{}: nothing consistent",
            l["id"]
        );
    }
}

#[test]
fn an_interrupted_scan_keeps_partial_reports_and_leaves_nothing_running() {
    let dir = tempfile::tempdir().expect("tmp");
    let out = dir.path().join("scan.jsonl");
    // Copies under this test's own directory: other tests run the same scenarios at the same
    // time, and the leftover check below looks for processes by path.
    for name in ["hostile-many-tools", "crash-and-hang"] {
        copy_dir(&repo().join("scenarios").join(name), &dir.path().join(name));
    }
    let many = dir.path().join("hostile-many-tools").display().to_string();
    let hang = dir.path().join("crash-and-hang").display().to_string();
    let mut child = std::process::Command::new(crate::util::hintcheck_bin())
        .args(["scan", "--jobs", "2", "--output"])
        .arg(&out)
        .args([many.as_str(), hang.as_str()])
        .env("HINTCHECK_FAKE_SERVER", crate::util::fake_server())
        .env_remove("GITHUB_STEP_SUMMARY")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("scan");
    // Both servers are busy (100,000 tools; a hanging call) when the signal comes.
    std::thread::sleep(Duration::from_secs(4));
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let status = crate::util::wait_within(
        &mut child,
        Duration::from_secs(60),
        "the scan after SIGTERM",
    );
    assert_eq!(
        status.code(),
        Some(143),
        "an interrupted scan exits 128 + SIGTERM"
    );
    let got = lines(&std::fs::read_to_string(&out).expect("jsonl"));
    assert_eq!(got.len(), 2, "both servers have their line");
    for l in &got {
        assert_eq!(
            l["exit_code"], 143,
            "each server's run was interrupted too: {l}"
        );
        assert!(
            l["report"]["partial"]
                .as_str()
                .is_some_and(|p| p.contains("interrupted")),
            "{}",
            l["report"]["partial"]
        );
    }
    assert!(
        crate::util::processes_matching(&many).is_empty()
            && crate::util::processes_matching(&hang).is_empty(),
        "a process of the scan outlived it"
    );
}

/// A server that takes its time is named while it runs, with what its child verify says it
/// is doing (the tool it calls; an install, when it has one); its progress lines stay out of
/// its line's error.
#[test]
fn a_long_running_server_is_named_with_what_it_is_doing() {
    let dir = tempfile::tempdir().expect("tmp");
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        "[meta]\nid = \"slow-one\"\n\n[run]\ncall_timeout = \"30s\"\n\n[[tools]]\nname = \"nap\"\nannotations = { readOnlyHint = true }\nsteps = [{ action = \"sleep\", ms = 6500 }]\n",
    )
    .expect("write");
    let out = run(
        &["scan", &scenario.display().to_string()],
        &[],
        Duration::from_secs(120),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .lines()
            .any(|l| l.starts_with("hintcheck: still running 1: slow-one (")
                && l.contains("calling tool 1 of 1 (nap)")),
        "{}",
        out.stderr
    );
}
