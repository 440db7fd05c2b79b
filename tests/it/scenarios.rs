//! Runs every scenario under `scenarios/` in process, concurrently, and checks each report
//! against the scenario's `[expect]` section. A scenario without `[expect]` is an error: a
//! test that asserts nothing is a defect.

use std::time::Duration;

use hintcheck::cli::{Format, ReportOptions, RunOptions, VerifyArgs};
use hintcheck::config::RunConfig;
use hintcheck::report::Report;
use hintcheck::scenario::check;

use crate::util::{fake_server, repo};

fn args_for(path: std::path::PathBuf) -> VerifyArgs {
    VerifyArgs {
        scenario: Some(path),
        report: ReportOptions {
            format: Some(Format::Json.into()),
            ..ReportOptions::default()
        },
        run: RunOptions {
            timeout: Some("120s".into()),
            ..RunOptions::default()
        },
        ..VerifyArgs::default()
    }
}

/// Runs one scenario in process.
pub(crate) fn run_scenario(name: &str) -> Report {
    run_scenario_with(name, |_| {})
}

/// Runs one scenario in process, after `adjust` changed its options.
pub(crate) fn run_scenario_with(name: &str, adjust: impl FnOnce(&mut VerifyArgs)) -> Report {
    // The config finds the fake server next to the test binary's directory; fail clearly first.
    let _ = fake_server();
    let mut args = args_for(repo().join("scenarios").join(name));
    adjust(&mut args);
    let mut config = RunConfig::from_verify_args(&args).expect("scenario config");
    // This test binary is not hintcheck: the sandbox must re-execute the real one.
    config.sandbox.exe = Some(crate::util::hintcheck_bin());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let report = tokio::time::timeout(
            Duration::from_secs(150),
            hintcheck::run::verify(&config, rx, false),
        )
        .await
        .expect("scenario finished in time")
        .report;
        assert!(hintcheck::sandbox::scratch::wait_for_removals().is_empty());
        report
    })
}

#[test]
fn every_scenario_meets_its_expectations() {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("scenarios"))
        .expect("scenarios dir")
        .flatten()
        .filter(|e| e.path().join("scenario.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // Real servers need their [setup] (npm, PyPI): `the_real_server_suite_meets_its_
        // expectations` (tests/it/scan.rs) scans them.
        .filter(|name| {
            hintcheck::scenario::Scenario::load(&repo().join("scenarios").join(name))
                .map(|s| s.setup.is_empty())
                .unwrap_or(true)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 10, "scenarios: {names:?}");
    let handles: Vec<_> = names
        .iter()
        .map(|name| {
            let name = name.clone();
            std::thread::spawn(move || (name.clone(), run_scenario(&name)))
        })
        .collect();
    let mut failures = Vec::new();
    for h in handles {
        let (name, report) = h.join().expect("scenario thread");
        let scenario = hintcheck::scenario::Scenario::load(&repo().join("scenarios").join(&name))
            .expect("load");
        let Some(expect) = scenario.expect else {
            failures.push(format!("{name}: no [expect] section"));
            continue;
        };
        let unmet = check(&expect, &report);
        if !unmet.is_empty() {
            // Enough context to debug a failure from the CI log alone.
            let calls: Vec<String> = report
                .tools
                .iter()
                .map(|t| {
                    let outcomes: Vec<&str> = t.calls.iter().map(|c| c.outcome.label()).collect();
                    format!("{} {:?} {:?}", t.name, t.skipped, outcomes)
                })
                .collect();
            failures.push(format!(
                "{name}: start_error {:?}; notes {:?}; calls {calls:?}",
                report.server.start_error, report.notes
            ));
        }
        for f in unmet {
            failures.push(format!("{name}: {f}"));
        }
        eprintln!(
            "scenario {name}: exit {} — {}",
            report.exit_code, report.exit_reason
        );
    }
    assert!(
        failures.is_empty(),
        "unmet expectations:\n{}",
        failures.join("\n")
    );
}

#[test]
fn isolated_tools_reach_the_same_verdicts_each_on_its_own_server() {
    let contradicted = |r: &Report| {
        let mut v: Vec<(String, String)> = r
            .tools
            .iter()
            .flat_map(|t| {
                t.verdicts
                    .iter()
                    .filter(|v| v.verdict == hintcheck::finding::Verdict::Contradicted)
                    .map(|v| (t.name.clone(), v.hint.key().to_string()))
            })
            .collect();
        v.sort();
        v
    };
    let shared = run_scenario("demo");
    let isolated = run_scenario_with("demo", |a| a.run.isolate = Some(true));
    assert_eq!(contradicted(&isolated), contradicted(&shared));
    assert!(isolated.notes.iter().any(|n| n.starts_with("--isolate")));
    for t in &isolated.tools {
        assert!(!t.calls.is_empty(), "{} was not called", t.name);
    }
    // Each tool saw the seeded workspace as it was: no tool's effect reached another, so
    // every first call found the seed's files where the scenario put them.
    assert_eq!(isolated.coverage.tools_succeeded, isolated.tools.len());
}

#[test]
fn demo_evidence_names_the_exact_effects() {
    let r = run_scenario("demo");
    let verdict = |tool: &str, hint: &str| {
        r.tools
            .iter()
            .find(|t| t.name == tool)
            .and_then(|t| t.verdicts.iter().find(|v| v.hint.key() == hint))
            .unwrap_or_else(|| panic!("{tool}:{hint}"))
            .clone()
    };
    let v = verdict("reset_items", "destructiveHint");
    let t = &v.evidence[0].text;
    assert!(
        t.starts_with("truncated $WORKSPACE/items.txt (") && t.ends_with("→ 0 bytes)"),
        "{t}"
    );
    let v = verdict("add_item", "idempotentHint");
    assert_eq!(v.evidence.len(), 1);
    assert_eq!(v.evidence[0].source, "repeat 2");
    assert!(
        v.evidence[0]
            .text
            .starts_with("appended to $WORKSPACE/items.txt"),
        "{:?}",
        v.evidence
    );
    let v = verdict("peek_cache", "readOnlyHint");
    assert_eq!(v.evidence[0].text, "created $HOME/.peek-cache (7 bytes)");
    let v = verdict("archive_note", "destructiveHint");
    assert!(
        v.evidence[0]
            .text
            .contains("draft.txt renamed over $WORKSPACE/archive.txt"),
        "{:?}",
        v.evidence
    );
    assert_eq!(r.seeded.len(), 7);
    assert!(r.coverage.network_observed);
    assert_eq!(r.sandbox.level, "full", "{:?}", r.sandbox);
}

#[test]
fn crash_and_hang_restart_the_server_and_kill_the_daemon() {
    let r = run_scenario("crash-and-hang");
    let outcome = |tool: &str| -> Vec<String> {
        r.tools
            .iter()
            .find(|t| t.name == tool)
            .map(|t| {
                t.calls
                    .iter()
                    .map(|c| c.outcome.label().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // A death at a first call is tried once more on a fresh server: twice is the tool's own.
    assert_eq!(outcome("crash"), ["server died", "server died"]);
    assert_eq!(outcome("hang"), ["timeout"]);
    assert_eq!(outcome("survivor"), ["ok", "ok"]);
    assert_eq!(r.server.restarts, 3);
    // Other tests may be running the same scenario right now: wait for their runs to end too.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !crate::util::processes_matching("--linger 4242").is_empty()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        crate::util::processes_matching("--linger 4242").is_empty(),
        "the daemon survived"
    );
    // The daemon died with the sandbox's pid namespace.
    assert_eq!(r.sandbox.level, "full");
}

#[test]
fn roots_are_offered_when_asked_and_pings_answered() {
    let r = run_scenario("roots");
    let answers: Vec<(&str, &str)> = r
        .wire
        .server_requests
        .iter()
        .map(|s| (s.method.as_str(), s.answer.as_str()))
        .collect();
    assert_eq!(answers, [("roots/list", "result")]);
    assert!(r.server.stderr.contains("file://"), "{}", r.server.stderr);
    let hostile = run_scenario("hostile-wire");
    let answers: Vec<(&str, &str)> = hostile
        .wire
        .server_requests
        .iter()
        .map(|s| (s.method.as_str(), s.answer.as_str()))
        .collect();
    assert!(
        answers.contains(&("roots/list", "error -32601")),
        "{answers:?}"
    );
    assert!(answers.contains(&("ping", "result")), "{answers:?}");
}

#[test]
fn modern_era_is_detected_and_legacy_fallback_works() {
    let modern = run_scenario("modern-era");
    assert_eq!(modern.server.start_error, None, "{:?}", modern.notes);
    let era = modern.server.identity.as_ref().map(|i| i.era.clone());
    assert_eq!(
        era,
        Some(hintcheck::mcp::client::Era::Modern("2026-07-28".into()))
    );
    let legacy = run_scenario("discover-fallback");
    let era = legacy.server.identity.as_ref().map(|i| i.era.clone());
    assert_eq!(
        era,
        Some(hintcheck::mcp::client::Era::Legacy("2025-03-26".into()))
    );
}

#[test]
fn a_server_that_dies_on_its_own_is_not_said_to_have_died_of_the_probe() {
    let r = run_scenario("dies-at-start");
    assert!(r.server.start_error.is_some(), "{:?}", r.notes);
    assert!(
        r.notes[0].contains("the probe was not the cause"),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes.iter().all(|n| !n.contains("was made again")),
        "{:?}",
        r.notes
    );
}

fn run_lingering(replay: bool) -> hintcheck::report::Report {
    run_fixture_with("lingering", |c| c.nested.replay = replay)
}

/// Runs a fixture scenario in process, with `adjust` applied to its configuration.
fn run_fixture_with(
    fixture: &str,
    adjust: impl FnOnce(&mut RunConfig),
) -> hintcheck::report::Report {
    let mut config =
        RunConfig::from_verify_args(&args_for(repo().join("tests/fixtures").join(fixture)))
            .expect("config");
    config.sandbox.exe = Some(crate::util::hintcheck_bin());
    adjust(&mut config);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let report = hintcheck::run::verify(&config, rx, false).await.report;
        assert!(hintcheck::sandbox::scratch::wait_for_removals().is_empty());
        report
    })
}

#[test]
fn replays_side_by_side_decide_as_they_do_one_after_another() {
    let decided = |jobs: usize| {
        let r = run_fixture_with("lingering-twice", |c| c.nested.jobs = jobs);
        // Side by side only in the sandbox, where each server has its own pid namespace.
        assert_eq!(r.sandbox.level, "full", "{:?}", r.sandbox);
        let verdicts: Vec<(String, String, bool)> = r
            .tools
            .iter()
            .map(|t| {
                let v = &t.verdicts[0];
                (t.name.clone(), v.verdict.as_str().to_string(), v.uncertain)
            })
            .collect();
        let replays: Vec<(usize, Vec<String>, String)> = r
            .replays
            .iter()
            .map(|x| (x.id, x.tools.clone(), x.purpose.clone()))
            .collect();
        (verdicts, replays)
    };
    let (one, one_replays) = decided(1);
    let (two, two_replays) = decided(2);
    assert_eq!(one, two);
    assert_eq!(one_replays, two_replays);
    // Both honest tools cleared, both helpers' starters accused, nothing left uncertain.
    assert_eq!(
        two,
        [
            ("starts_slow_writer", "contradicted"),
            ("honest_but_slow", "consistent"),
            ("starts_other_writer", "contradicted"),
            ("honest_and_slower", "consistent"),
        ]
        .map(|(t, v)| (t.to_string(), v.to_string(), false))
    );
    // The two replays alone (made together) come first, in the tools' order.
    assert_eq!(two_replays[0].1, ["honest_but_slow"]);
    assert_eq!(two_replays[1].1, ["honest_and_slower"]);
}

#[test]
fn without_replay_a_lingering_helper_makes_attribution_uncertain_not_an_accusation() {
    let r = run_lingering(false);
    let honest = r
        .tools
        .iter()
        .find(|t| t.name == "honest_but_slow")
        .expect("tool");
    assert_eq!(
        honest.calls[0].concurrent_with,
        ["starts_slow_writer call 1"]
    );
    let ro = &honest.verdicts[0];
    assert!(ro.uncertain, "{ro:?}");
    assert!(
        ro.evidence[0]
            .text
            .contains("uncertain: started by starts_slow_writer call 1"),
        "{:?}",
        ro.evidence
    );
    let finding = r
        .findings
        .iter()
        .find(|f| f.tool.as_deref() == Some("honest_but_slow"))
        .expect("finding");
    assert_eq!(finding.severity, hintcheck::finding::Severity::Warning);
    assert_eq!(
        r.exit_code, 0,
        "an uncertain contradiction does not fail the run: {}",
        r.exit_reason
    );
}

#[test]
fn replay_moves_a_lingering_helpers_write_to_the_tool_that_started_it() {
    let r = run_lingering(true);
    let verdict = |tool: &str| {
        r.tools
            .iter()
            .find(|t| t.name == tool)
            .map(|t| t.verdicts[0].clone())
            .expect("tool")
    };
    let honest = verdict("honest_but_slow");
    assert_eq!(honest.verdict.as_str(), "consistent", "{honest:?}");
    let liar = verdict("starts_slow_writer");
    assert_eq!(liar.verdict.as_str(), "contradicted");
    assert!(!liar.uncertain);
    assert!(
        liar.evidence[0]
            .text
            .contains("created $WORKSPACE/slow.txt")
            && liar.evidence[0]
                .text
                .contains("starts_slow_writer alone on a fresh server)"),
        "{:?}",
        liar.evidence
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("starts_slow_writer alone on a fresh server reproduced them")),
        "{:?}",
        r.notes
    );
    assert_eq!(r.exit_code, 1);
}

#[test]
fn a_seeded_sqlite_database_is_found_and_queried_by_meaning() {
    let Some(out) = run_python_fixture("sqlite", &["import sqlite3"], &[]) else {
        return crate::util::skip("/usr/bin/python3 with sqlite3 is missing (the SQLite fixture)");
    };
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    assert!(
        r["seeded"].as_array().expect("seeded").iter().any(|s| s
            .as_str()
            .is_some_and(|s| s.starts_with("data/app.db (SQLite"))),
        "{}",
        r["seeded"]
    );
    let tools = r["tools"].as_array().expect("tools");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let verdict = |name: &str, hint: &str| {
        tool(name)["verdicts"]
            .as_array()
            .expect("verdicts")
            .iter()
            .find(|v| v["hint"] == hint)
            .map(|v| v["verdict"].as_str().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    // The SQL parameter got a read of the seeded table, which the server ran.
    let query = tool("read_query");
    assert_eq!(query["arguments"]["query"], "SELECT * FROM items");
    assert!(
        query["calls"][0]["detail"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("notebook")),
        "{}",
        query["calls"][0]
    );
    assert_eq!(verdict("read_query", "readOnlyHint"), "consistent");
    // The "read-only" listing deletes a row: the database file changed.
    assert_eq!(verdict("list_tables", "readOnlyHint"), "contradicted");
    assert_eq!(tool("add_item")["calls"][0]["outcome"], "ok");
    // An insert rewrites pages in place; read with SQLite by the harness, it only added a
    // row, so `destructiveHint: false` is confirmed. The deletion says what it removed.
    assert_eq!(verdict("add_item", "destructiveHint"), "consistent");
    let change = &tool("add_item")["calls"][0]["observations"][0];
    assert_eq!(change["kind"], "store-changed", "{change}");
    assert_eq!(change["added"], 1, "{change}");
    assert!(change.get("database").is_none(), "{change}");
    let deletion = &tool("list_tables")["calls"][0]["observations"][0];
    assert_eq!(deletion["removed"], 1, "{deletion}");
    assert_eq!(
        deletion["detail"], "table items: 1 row(s) deleted",
        "{deletion}"
    );
}

#[test]
fn a_counter_bumped_in_a_json_store_is_an_update_with_its_values() {
    let Some(out) = run_python_fixture("json-store", &[], &["--check"]) else {
        return crate::util::skip("/usr/bin/python3 is missing (the JSON store fixture)");
    };
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The store is shared with add_tag, so a replay of count_visit alone confirmed it.
    let evidence = crate::util::first_evidence(&out.json(), "count_visit", "destructiveHint");
    assert!(
        evidence.starts_with(
            "changed $WORKSPACE/stats.json (0 added, 1 changed, 0 removed: visits: 1 → 2) (confirmed by replay"
        ),
        "{evidence}"
    );
    let evidence = crate::util::first_evidence(&out.json(), "open_settings", "destructiveHint");
    assert_eq!(
        evidence,
        "changed $WORKSPACE/settings.yaml (0 added, 1 changed, 0 removed: opened: 1 → 2)"
    );
}

#[test]
fn writes_that_do_not_last_are_seen_without_a_sandbox_too() {
    // Without any sandbox (the weaker mode) only the scratch directories are watched; a lock
    // taken and released inside the call is still seen, by change notification.
    let r = run_scenario_with("transient-writes", |a| a.no_sandbox = true);
    let scenario = hintcheck::scenario::Scenario::load(&repo().join("scenarios/transient-writes"))
        .expect("load");
    let unmet = check(&scenario.expect.expect("[expect]"), &r);
    assert!(unmet.is_empty(), "{unmet:?}");
    let locks = r
        .tools
        .iter()
        .find(|t| t.name == "locks_briefly")
        .expect("tool");
    let ro = &locks.verdicts[0];
    assert_eq!(
        ro.evidence
            .iter()
            .map(|e| e.text.as_str())
            .collect::<Vec<_>>(),
        [
            "created and removed $WORKSPACE/state.lock",
            "created and removed $WORKSPACE/state.lock"
        ]
    );
    let finding = r
        .findings
        .iter()
        .find(|f| f.tool.as_deref() == Some("locks_briefly"))
        .expect("finding");
    assert_eq!(finding.severity, hintcheck::finding::Severity::Warning);
    assert!(r.sandbox.level.contains("none"), "{:?}", r.sandbox.level);
    assert_eq!(r.exit_code, 0, "{}", r.exit_reason);
}

#[test]
fn an_error_that_names_what_it_accepts_steers_the_next_attempt() {
    let r = run_scenario("error-feedback");
    let tool = |name: &str| {
        r.tools
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("no tool {name}"))
    };
    let first_ok = |name: &str| {
        tool(name)
            .calls
            .iter()
            .find(|c| c.number == 1 && c.outcome.is_success())
            .unwrap_or_else(|| panic!("{name} never succeeded"))
            .clone()
    };
    let ok = first_ok("open_sheet");
    assert_eq!(ok.attempt, 2);
    assert_eq!(
        ok.arguments["sheet"], "Summary",
        "the first sheet the error offered"
    );
    let ok = first_ok("set_mode");
    assert!(
        ok.arguments["mode"].is_string(),
        "the missing field filled: {ok:?}"
    );
    assert!(
        tool("open_sheet")
            .synthesis_notes
            .iter()
            .any(|n| n.contains("offered")),
        "{:?}",
        tool("open_sheet").synthesis_notes
    );
}

#[test]
fn tools_never_reached_are_named_with_their_last_answer() {
    let r = run_scenario("error-like");
    let unreached: Vec<(&str, &str)> = r
        .coverage
        .unreached
        .iter()
        .map(|u| (u.tool.as_str(), u.outcome.as_str()))
        .collect();
    assert_eq!(
        unreached,
        [("find_note", "error-like"), ("save_draft", "error-like")]
    );
    let said = r.coverage.unreached[0].said.as_deref().unwrap_or_default();
    assert!(said.contains("Error: note not found"), "{said}");
}

#[test]
fn the_explorer_carries_ids_and_sets_up_the_session_of_a_stateful_server() {
    let Some(out) = run_python_fixture("session", &[], &["--check"]) else {
        return crate::util::skip("/usr/bin/python3 is missing (the session fixture)");
    };
    let r = out.json();
    assert_eq!(out.code, 0, "{}", r["expectations"]);
    let tools = r["tools"].as_array().expect("tools");
    let tool = |name: &str| crate::util::report_tool(&r, name);
    // The working directory was set first, with a directory.
    assert_eq!(tools[0]["name"], "set_working_dir");
    assert!(
        tool("set_working_dir")["arguments"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/workspace")),
        "{}",
        tool("set_working_dir")["arguments"]
    );
    // The note id came from create_note's answer, and the call says so.
    let first = &tool("read_note")["calls"][0];
    assert_eq!(first["outcome"], "ok", "{first}");
    assert!(
        first["pooled"]["noteId"]
            .as_str()
            .is_some_and(|s| s.starts_with("create_note ")),
        "{first}"
    );
    assert_eq!(tool("job_status")["arguments"]["pid"], 4242);
    assert_eq!(tool("search_vault")["arguments"]["vault"], "Work");
    // export_report's error named generate_report, which ran before the next attempt.
    let export = tool("export_report")["calls"].as_array().expect("calls");
    assert_eq!(export[0]["outcome"], "isError");
    assert_eq!(export[1]["outcome"], "ok");
    assert!(r["coverage"]["values_learned"].as_u64().unwrap_or(0) >= 3);
}

/// Runs the Python fixture `tests/fixtures/<name>` (JSON report, `extra` flags) when
/// /usr/bin/python3 can run each of `imports`; `None` when it cannot.
fn run_python_fixture(
    name: &str,
    imports: &[&str],
    extra: &[&str],
) -> Option<crate::util::Outcome> {
    let python_works = |code: &str| {
        std::process::Command::new("/usr/bin/python3")
            .args(["-c", code])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !python_works("pass") || !imports.iter().all(|i| python_works(i)) {
        return None;
    }
    let fixture = repo().join("tests/fixtures").join(name);
    let mut args = vec![
        "verify",
        "--scenario",
        fixture.to_str().expect("utf8"),
        "--format",
        "json",
    ];
    args.extend_from_slice(extra);
    Some(crate::util::run(&args, &[], Duration::from_secs(90)))
}

#[test]
fn a_tool_that_waits_is_told_from_a_hung_server_by_a_ping() {
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        r#"
[run]
call_timeout = "4s"
[[tools]]
name = "wait_for_event"
description = "Blocks until the next event arrives."
annotations = { readOnlyHint = true }
steps = [{ action = "no_answer" }]
[[tools]]
name = "quiet"
annotations = { readOnlyHint = true }
steps = [{ action = "no_answer" }]
[[tools]]
name = "quick"
annotations = { readOnlyHint = true }
"#,
    )
    .expect("write");
    let scenario = scenario.display().to_string();
    let started = std::time::Instant::now();
    let out = crate::util::run(
        &["verify", "--format", "json", "--scenario", &scenario],
        &[],
        Duration::from_secs(120),
    );
    let took = started.elapsed();
    let r = out.json();
    let calls = |name: &str| -> Vec<serde_json::Value> {
        crate::util::report_tool(&r, name)["calls"]
            .as_array()
            .expect("calls")
            .clone()
    };
    // The long-poller is recognised by what it says and gets a short timeout; the other waits
    // the call timeout. Both are waiting, not hung: the server answered a ping and was kept.
    let waited = calls("wait_for_event");
    assert_eq!(waited[0]["outcome"], "waiting", "{}", waited[0]);
    let after = waited[0]["detail"]["after_ms"].as_u64().unwrap_or_default();
    assert!((2_500..4_000).contains(&after), "{}", waited[0]);
    let quiet = calls("quiet");
    assert_eq!(quiet[0]["outcome"], "waiting", "{}", quiet[0]);
    assert_eq!(r["server"]["restarts"], 0, "{}", r["server"]);
    assert_eq!(calls("quick")[0]["outcome"], "ok");
    assert!(took < Duration::from_secs(60), "took {took:?}");
}
