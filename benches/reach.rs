//! How much of each real server the explorer reaches with no hand-written arguments: for
//! every real scenario (`scenarios/real-*`, installed first so installs are not timed), the
//! tools with a successful (not error-like) call out of the tools listed, with every domain
//! pack in force and with none (the core alone, `--packs none`), the tools left out because
//! they need what this machine cannot give (a network service, a program that is not
//! installed), the calls made and how many of them tried another value of an argument that
//! selects the tool's behaviour (the calls behind the per-value profiles, `tools[].by_argument`),
//! the values profiled, the values learned from responses, and the seconds the run took (with
//! the packs), with the seconds per reached tool over the suite. Prints a Markdown table (the README's reach table). Run with
//! `cargo bench --bench reach` (needs npm and python3 with venv; installs into
//! target/hintcheck-cache). Not a timed test: the figures are for reading.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::path::{Path, PathBuf};
use std::process::Command;

fn verify(exe: &Path, scenario: &Path, cache: &str, packs: &str) -> Option<serde_json::Value> {
    let out = Command::new(exe)
        .args([
            "verify",
            "--format",
            "json",
            "--cache-dir",
            cache,
            "--packs",
            packs,
            // One seed for every measurement: the same words and arguments each time.
            "--seed",
            "0",
            "--scenario",
        ])
        .arg(scenario)
        .output()
        .expect("hintcheck verify runs");
    serde_json::from_slice(&out.stdout).ok()
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"));
    let cache = root.join("target/hintcheck-cache").display().to_string();
    let mut targets: Vec<PathBuf> = std::fs::read_dir(root.join("scenarios"))
        .expect("scenarios")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("real-"))
        .map(|e| e.path())
        .collect();
    targets.sort();
    println!(
        "| scenario | reached / listed | without packs | cannot work here | reach of the rest | without packs | calls | of them per value | values profiled | values learned | seconds |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let (mut reached_all, mut bare_all, mut possible_all) = (0usize, 0usize, 0usize);
    let (mut calls_all, mut per_value_all, mut seconds_all) = (0u64, 0usize, 0.0f64);
    for t in &targets {
        // Install and warm up first.
        let _ = verify(&exe, t, &cache, "all");
        let name = t
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (Some(r), Some(bare)) = (
            verify(&exe, t, &cache, "all"),
            verify(&exe, t, &cache, "none"),
        ) else {
            println!("| {name} | no report | | | | | | | | | |");
            continue;
        };
        let c = &r["coverage"];
        let listed = c["tools_listed"].as_u64().unwrap_or(0) as usize;
        let reached = c["tools_succeeded"].as_u64().unwrap_or(0) as usize;
        let reached_bare = bare["coverage"]["tools_succeeded"].as_u64().unwrap_or(0) as usize;
        let unavailable = c["unreached"]
            .as_array()
            .map(|u| u.iter().filter(|u| u["unavailable_here"] == true).count())
            .unwrap_or(0);
        let skipped = c["tools_skipped"].as_u64().unwrap_or(0) as usize;
        let possible = listed.saturating_sub(unavailable + skipped);
        reached_all += reached;
        bare_all += reached_bare;
        possible_all += possible;
        let share = |n: usize| 100.0 * n as f64 / possible.max(1) as f64;
        let tools = r["tools"].as_array().cloned().unwrap_or_default();
        // The calls that tried another value of a selecting argument (the riskier cases), and
        // the values whose behaviour the profiles report.
        let per_value = tools
            .iter()
            .flat_map(|t| t["calls"].as_array().cloned().unwrap_or_default())
            .filter(|c| c["variant"].is_string())
            .count();
        let profiled = tools
            .iter()
            .flat_map(|t| t["by_argument"].as_array().cloned().unwrap_or_default())
            .filter(|e| e["behaviour"] != "not reached")
            .count();
        let calls = c["calls"].as_u64().unwrap_or(0);
        let seconds = r["duration_ms"].as_f64().unwrap_or(0.0) / 1000.0;
        calls_all += calls;
        per_value_all += per_value;
        seconds_all += seconds;
        println!(
            "| {name} | {reached} / {listed} | {reached_bare} | {unavailable} | {:.0}% | {:.0}% | {calls} | {per_value} | {profiled} | {} | {seconds:.1} |",
            share(reached),
            share(reached_bare),
            c["values_learned"].as_u64().unwrap_or(0),
        );
    }
    let share = |n: usize| 100.0 * n as f64 / possible_all.max(1) as f64;
    println!(
        "\nreached {reached_all} of {possible_all} tools that can work here ({:.0}%); {bare_all} ({:.0}%) without packs",
        share(reached_all),
        share(bare_all)
    );
    println!(
        "{calls_all} calls, {per_value_all} of them for the per-value profiles; {:.2} s per reached tool",
        seconds_all / reached_all.max(1) as f64
    );
}
