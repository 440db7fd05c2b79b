//! Soak (issue 8): the harness server with 2,000 tools, two calls each, verified by the
//! hintcheck binary. Prints the wall time, the calls per second and the peak RSS of the
//! hintcheck process (its VmHWM, sampled until it exits). Run with `cargo bench --bench soak`.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hintcheck::observe::activity::collect_with_peak_rss;

const TOOLS: usize = 2000;

fn main() {
    let hintcheck = PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"));
    let fake = hintcheck.with_file_name("hintcheck-fake-server");
    if !fake.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["build", "--release", "-p", "hintcheck-harness"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok && fake.is_file(), "cannot build the fake server");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("soak.toml");
    std::fs::write(
        &scenario,
        format!("[fake]\nserver_name = \"soak\"\ngenerate_tools = {TOOLS}\n"),
    )
    .expect("scenario");
    let t = Instant::now();
    let child = Command::new(&hintcheck)
        .args([
            "verify",
            "--format",
            "json",
            "--no-summary",
            "--no-config",
            "--era",
            "legacy",
        ])
        .arg("--scenario")
        .arg(&scenario)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("hintcheck");
    let (text, exited, peak_kib) = collect_with_peak_rss(child, Duration::from_secs(1800));
    assert!(exited, "the soak run did not finish");
    let wall = t.elapsed().as_secs_f64();
    let report: serde_json::Value = serde_json::from_str(&text).expect("a JSON report");
    let calls = report["coverage"]["calls"].as_u64().unwrap_or(0);
    assert_eq!(calls, 2 * TOOLS as u64, "{}", report["exit_reason"]);
    println!("soak: {TOOLS} tools x 2 calls through hintcheck (sandboxed)");
    println!(
        "  wall time {wall:.1} s, {:.0} calls/s, peak RSS of hintcheck {:.1} MiB",
        calls as f64 / wall,
        peak_kib as f64 / 1024.0
    );
}
