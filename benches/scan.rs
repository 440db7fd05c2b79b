//! The suite benchmark: `hintcheck scan --check` over the real-server suite
//! (`scenarios/real-*`, installed first so installs are not timed) with `--jobs 1` and then
//! `--jobs 2`. It prints, per scenario, the tools reached and the seconds of its run, then per
//! job count the wall time, the sum of the runs and the seconds per reached tool, beside the
//! figure issue 19 started from (0.82 s per reached tool, `--jobs 1`); the README's suite
//! table is this output. The servers spend most of a run waiting (handshakes, settle
//! periods), so two jobs on two cores should take clearly less than the sum of the single
//! runs. Run with `cargo bench --bench scan` (needs npm and python3 with venv; installs into
//! target/hintcheck-cache). Not a timed test: the figures are for reading.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

/// Seconds per reached tool when issue 19 was filed (8 real scenarios, 57 tools reached,
/// 46.9 s with `--jobs 1`).
const ISSUE_19_START: f64 = 0.82;

/// One scan: wall seconds, and per scenario (seconds of its run, tools reached, tools listed).
struct Scan {
    wall: f64,
    runs: BTreeMap<String, (f64, u64, u64)>,
}

impl Scan {
    fn sum(&self) -> f64 {
        self.runs.values().map(|r| r.0).sum()
    }
    fn reached(&self) -> u64 {
        self.runs.values().map(|r| r.1).sum()
    }
}

fn scan(jobs: &str, targets: &[String], cache: &str) -> Scan {
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
    let runs = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|v| {
            let coverage = &v["report"]["coverage"];
            (
                v["id"].as_str().unwrap_or("?").to_string(),
                (
                    v["duration_ms"].as_f64().unwrap_or(0.0) / 1000.0,
                    coverage["tools_succeeded"].as_u64().unwrap_or(0),
                    coverage["tools_listed"].as_u64().unwrap_or(0),
                ),
            )
        })
        .collect();
    Scan { wall, runs }
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
    let one = scan("1", &targets, &cache);
    let two = scan("2", &targets, &cache);
    println!("| scenario | reached / listed | seconds (--jobs 1) | seconds per reached tool |");
    println!("|---|---|---|---|");
    for (id, (secs, reached, listed)) in &one.runs {
        println!(
            "| {id} | {reached} / {listed} | {secs:.1} | {} |",
            if *reached > 0 {
                format!("{:.2}", secs / *reached as f64)
            } else {
                "-".into()
            }
        );
    }
    println!();
    println!(
        "| scan of {} real servers | wall | the runs | reached | seconds per reached tool (wall) |",
        targets.len()
    );
    println!("|---|---|---|---|---|");
    for (label, s) in [("--jobs 1", &one), ("--jobs 2", &two)] {
        let reached = s.reached().max(1) as f64;
        println!(
            "| {label} | {:.1} s | {:.1} s | {} | {:.2} |",
            s.wall,
            s.sum(),
            s.reached(),
            s.wall / reached
        );
    }
    println!("| issue 19's start (8 scenarios, --jobs 1) | 46.9 s | | 57 | {ISSUE_19_START:.2} |");
    let now = one.wall / one.reached().max(1) as f64;
    println!();
    println!(
        "--jobs 1: {now:.2} s per reached tool, {:.0}% of issue 19's start (target: at most 50%); --jobs 2: {:.2}x faster than --jobs 1",
        100.0 * now / ISSUE_19_START,
        one.wall / two.wall
    );
}
