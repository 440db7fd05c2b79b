//! Hostile servers at scale (issue 8): memory that stays flat however many calls are made.
//! The protocol-hostility scenarios (`scenarios/hostile-*`: floods, a 1 GiB line, responses
//! nobody asked for, a closed stdout, shifting pages, list_changed, 100,000 tools, a mute
//! server) run with every other scenario against their `[expect]`.

use std::process::{Command, Stdio};
use std::time::Duration;

use hintcheck::observe::activity::collect_with_peak_rss;

use crate::util::{fake_server, hintcheck_bin};

/// Runs hintcheck verify on a generated scenario; returns the JSON report's size in bytes
/// and the peak RSS of the hintcheck process in KiB.
fn peak_rss(scenario: &std::path::Path, repeat: &str) -> (usize, u64) {
    let child = Command::new(hintcheck_bin())
        .args(["verify", "--format", "json", "--no-summary", "--no-config"])
        .args(["--era", "legacy", "--settle", "1ms", "--repeat", repeat])
        .arg("--scenario")
        .arg(scenario)
        .env("HINTCHECK_FAKE_SERVER", fake_server())
        .env_remove("GITHUB_STEP_SUMMARY")
        // One malloc arena: with one per thread, the peak depends on which of the runtime's
        // threads happened to allocate when (6 to 12 MiB apart between identical runs of a
        // debug build), which says nothing of what the run keeps per call.
        .env("MALLOC_ARENA_MAX", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("hintcheck");
    let (report, exited, peak) = collect_with_peak_rss(child, Duration::from_secs(300));
    assert!(exited, "the soak run did not finish");
    let v: serde_json::Value = serde_json::from_str(&report).expect("a JSON report");
    assert!(
        v["coverage"]["calls"].as_u64().unwrap_or(0) > 0,
        "{}",
        v["exit_reason"]
    );
    (report.len(), peak)
}

#[test]
fn memory_does_not_grow_with_the_number_of_calls_beyond_the_report() {
    let dir = tempfile::tempdir().expect("tmp");
    let scenario = dir.path().join("soak.toml");
    std::fs::write(&scenario, "[fake]\ngenerate_tools = 60\n").expect("scenario");
    let (small_report, small_peak) = peak_rss(&scenario, "2");
    let (large_report, large_peak) = peak_rss(&scenario, "12");
    let grown_kib = large_peak.saturating_sub(small_peak);
    let report_grew_kib = (large_report.saturating_sub(small_report) / 1024) as u64;
    // 600 more calls: the report holds each call's record (rendered, its size is known);
    // anything beyond a few times that plus allocator slack would be a leak.
    assert!(
        grown_kib <= 8 * 1024 + 4 * report_grew_kib,
        "peak RSS grew by {grown_kib} KiB (report by {report_grew_kib} KiB): {small_peak} KiB for 120 calls, {large_peak} KiB for 720"
    );
    eprintln!(
        "peak RSS {small_peak} KiB for 120 calls, {large_peak} KiB for 720 (report {small_report} -> {large_report} bytes)"
    );
}

/// A run cut short by a harness limit says which limit, with the flag that raises it, in the
/// exit reason, the report's `limits_hit` and the text report (issue 29, item 7).
#[test]
fn a_limit_that_cut_the_run_short_is_named_with_its_flag() {
    use crate::util::{repo, run};
    let verify_json = |scenario: &str| {
        run(
            &[
                "verify",
                "--scenario",
                scenario,
                "--format",
                "json",
                "--no-progress",
            ],
            &[],
            Duration::from_secs(120),
        )
    };
    for (fixture, limit, flag) in [
        ("line", "the line cap (4096 bytes)", "--max-line-bytes"),
        (
            "listing",
            "the handshake timeout (200ms)",
            "--handshake-timeout",
        ),
    ] {
        let scenario = repo().join("tests/fixtures/limits").join(fixture);
        let scenario = scenario.display().to_string();
        let o = verify_json(&scenario);
        // The listing: the server may still be building it when `initialize` waits (exit
        // 3), or when `tools/list` does (exit 4).
        assert!(
            o.code == 4 || fixture == "listing" && o.code == 3,
            "{fixture}: {}",
            o.stderr
        );
        let r = o.json();
        let reason = r["exit_reason"].as_str().unwrap_or_default();
        let hit = reason
            .split("; harness limit hit: ")
            .nth(1)
            .unwrap_or_default();
        assert!(
            hit.contains(&format!("{limit}, raise it with {flag}")),
            "{fixture}: {reason}"
        );
        if o.code == 4 {
            assert!(reason.starts_with("nothing verified: the server listed no usable tool"));
        }
        let hits = r["limits_hit"].as_array().expect("limits_hit");
        assert!(
            hits.iter().any(|h| h["limit"] == limit
                && h["raise_with"]
                    .as_str()
                    .is_some_and(|f| f.starts_with(flag))),
            "{fixture}: {hits:?}"
        );
        let text = run(
            &["verify", "--scenario", &scenario, "--no-progress"],
            &[],
            Duration::from_secs(120),
        );
        assert!(
            text.stdout
                .contains(&format!("limit:    {limit}, raise it with {flag}")),
            "{fixture}: {}",
            text.stdout
        );
    }
    // Over HTTP: a head larger than the message cap.
    let o = verify_json(&repo().join("scenarios/hostile-http").display().to_string());
    let hits = o.json()["limits_hit"].clone();
    assert!(
        hits.as_array().is_some_and(|h| h.iter().any(|h| h["limit"]
            .as_str()
            .is_some_and(|l| l.starts_with("the HTTP message cap")))),
        "{hits}"
    );
}
