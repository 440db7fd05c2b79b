//! What parallel scanning saves: `hintcheck scan --check` over the real-server suite
//! (`scenarios/real-*`, installed first so installs are not timed) with `--jobs 1` and then
//! `--jobs 2`, printing both wall times, the sum of the single runs and the speed-up. The
//! servers spend most of a run waiting (handshakes, settle periods), so two jobs on two cores
//! should take clearly less than the sum of the single runs. Run with
//! `cargo bench --bench scan` (needs npm and python3 with venv; installs into
//! target/hintcheck-cache).

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

fn scan(jobs: &str, targets: &[String], cache: &str) -> (f64, f64) {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"));
    let t = Instant::now();
    let out = Command::new(&exe)
        .args(["scan", "--check", "--cache-dir", cache, "--jobs", jobs])
        .args(targets)
        .output()
        .expect("hintcheck scan runs");
    let wall = t.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "scan --jobs {jobs} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sum: f64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["duration_ms"].as_f64())
        .sum::<f64>()
        / 1000.0;
    (wall, sum)
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cache = root.join("target/hintcheck-cache").display().to_string();
    let mut targets: Vec<String> = std::fs::read_dir(root.join("scenarios"))
        .expect("scenarios")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("real-"))
        .map(|e| e.path().display().to_string())
        .collect();
    targets.sort();
    // Install (and warm up) first: the figures are about verifying, not downloading.
    let _ = scan("2", &targets, &cache);
    let (one, sum_one) = scan("1", &targets, &cache);
    let (two, sum_two) = scan("2", &targets, &cache);
    println!("scan of {} real servers (scan --check)", targets.len());
    println!("  --jobs 1: {one:6.1} s wall (the runs: {sum_one:.1} s)");
    println!("  --jobs 2: {two:6.1} s wall (the runs: {sum_two:.1} s)");
    println!(
        "  speed-up: {:.2}x over --jobs 1, {:.2}x over the sum of single runs",
        one / two,
        sum_one / two
    );
}
