//! What the benchmarks share: the harness's fake server, built when missing, and one
//! `hintcheck verify` run with its report, wall time and peak RSS.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hintcheck::observe::activity::collect_with_peak_rss;
use serde_json::Value;

/// The fake server next to `hintcheck`, built with cargo when it is not there yet.
pub(crate) fn fake_server(hintcheck: &Path) -> PathBuf {
    let fake = hintcheck.with_file_name("hintcheck-fake-server");
    if !fake.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let ok = Command::new(cargo)
            .args(["build", "--release", "-p", "hintcheck-harness"])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok && fake.is_file(), "cannot build the fake server");
    }
    fake
}

/// Runs `hintcheck verify --format json --seed 0 ARGS` (a fixed seed: the same words and
/// arguments in every measurement), stopping it after `limit`; returns the report, the wall
/// time and the peak RSS of the hintcheck process in MiB (its VmHWM).
pub(crate) fn verify(hintcheck: &Path, args: &[&str], limit: Duration) -> (Value, Duration, f64) {
    let t = Instant::now();
    let child = Command::new(hintcheck)
        .args(["verify", "--format", "json", "--no-summary", "--no-config"])
        .args(["--seed", "0"])
        .args(args)
        .env_remove("GITHUB_STEP_SUMMARY")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("hintcheck");
    let (text, exited, hwm_kib) = collect_with_peak_rss(child, limit);
    assert!(exited, "hintcheck verify {args:?} did not finish");
    let wall = t.elapsed();
    let report: Value = serde_json::from_str(&text).expect("a JSON report");
    (report, wall, hwm_kib as f64 / 1024.0)
}
