//! Registry-scale throughput: servers per hour on this machine with `--jobs 1` and
//! `--jobs 2`, and how a scan's wall time grows with the number of servers. The servers are
//! the real-server suite (`scenarios/real-*`), taken in a fixed order and repeated (each copy
//! in a directory of its own, so the scan sees distinct servers) to make lists of 1 to twice
//! the suite; the registry page of the tests (`tests/fixtures/registry/page.json`: three
//! packages to run, four entries skipped) is scanned as a list of its own. Installs happen
//! once before any timing (a warm-up scan), so the figures are about verifying, not
//! downloading. For each job count it fits wall = fixed + per-server × N by least squares and
//! prints servers per hour at the largest list. Run with `cargo bench --bench scan_scale`
//! (needs npm and python3 with venv); the figures are for reading, not a timed test.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// One scan: its wall time and how many lines (servers) it wrote.
fn scan(exe: &Path, jobs: usize, targets: &[PathBuf], cache: &str) -> (f64, usize) {
    let t = Instant::now();
    let out = Command::new(exe)
        .args(["scan", "--cache-dir", cache, "--jobs", &jobs.to_string()])
        .args(targets)
        .output()
        .expect("hintcheck scan runs");
    let wall = t.elapsed().as_secs_f64();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .count();
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 4)) && lines == targets_count(targets),
        "scan --jobs {jobs} of {} target(s) failed:\n{}",
        targets.len(),
        String::from_utf8_lossy(&out.stderr)
    );
    (wall, lines)
}

/// Servers in a list of targets: a registry page counts its entries.
fn targets_count(targets: &[PathBuf]) -> usize {
    targets
        .iter()
        .map(|t| {
            if t.extension().is_some_and(|e| e == "json") {
                let page: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(t).expect("page")).expect("json");
                page["servers"].as_array().map_or(1, Vec::len)
            } else {
                1
            }
        })
        .sum()
}

/// Copies a scenario directory (its workspace and fixtures beside it) into `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read").flatten() {
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), dest).expect("copy");
        }
    }
}

/// Least squares of `y = a + b x`: (a, b).
fn fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x, sy + y));
    let (mx, my) = (sx / n, sy / n);
    let sxx: f64 = points.iter().map(|(x, _)| (x - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - b * mx, b)
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"));
    let cache = root.join("target/hintcheck-cache").display().to_string();
    let mut suite: Vec<PathBuf> = std::fs::read_dir(root.join("scenarios"))
        .expect("scenarios")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("real-"))
        .map(|e| e.path())
        .collect();
    suite.sort();
    // Twice the suite, the second copy in directories of its own.
    let copies = tempfile::tempdir().expect("tmp");
    let mut servers = suite.clone();
    for s in &suite {
        let name = s.file_name().expect("name").to_string_lossy().into_owned();
        let dest = copies.path().join(format!("{name}-copy"));
        copy_dir(s, &dest);
        let toml = dest.join("scenario.toml");
        let text = std::fs::read_to_string(&toml).expect("scenario");
        let text = text.replacen(
            &format!("id = \"{name}\""),
            &format!("id = \"{name}-copy\""),
            1,
        );
        std::fs::write(&toml, text).expect("write");
        servers.push(dest);
    }
    let page = root.join("tests/fixtures/registry/page.json");
    // Install and warm up.
    let _ = scan(&exe, 2, &suite, &cache);
    let _ = scan(&exe, 2, std::slice::from_ref(&page), &cache);
    let all = servers.len();
    let sizes: Vec<usize> = [1, 2, 4, 8, suite.len(), all]
        .into_iter()
        .filter(|n| *n <= all)
        .collect();
    println!(
        "| servers | --jobs 1 wall | --jobs 2 wall | --jobs 1 servers/hour | --jobs 2 servers/hour |"
    );
    println!("|---|---|---|---|---|");
    let mut points = [Vec::new(), Vec::new()];
    for &n in &sizes {
        let list = &servers[..n];
        let (one, _) = scan(&exe, 1, list, &cache);
        let (two, _) = scan(&exe, 2, list, &cache);
        points[0].push((n as f64, one));
        points[1].push((n as f64, two));
        println!(
            "| {n} | {one:.1} s | {two:.1} s | {:.0} | {:.0} |",
            n as f64 * 3600.0 / one,
            n as f64 * 3600.0 / two
        );
    }
    let (page_one, entries) = scan(&exe, 1, std::slice::from_ref(&page), &cache);
    let (page_two, _) = scan(&exe, 2, std::slice::from_ref(&page), &cache);
    println!(
        "| registry page ({entries} entries: 3 run, 4 skipped) | {page_one:.1} s | {page_two:.1} s | {:.0} | {:.0} |",
        entries as f64 * 3600.0 / page_one,
        entries as f64 * 3600.0 / page_two
    );
    println!();
    for (jobs, p) in [(1, &points[0]), (2, &points[1])] {
        let (fixed, per) = fit(p);
        println!(
            "--jobs {jobs}: wall ≈ {fixed:.2} s + {per:.2} s × servers (least squares over {} lists); {:.0} servers per hour at {all}",
            p.len(),
            3600.0 * all as f64 / p.last().map_or(1.0, |l| l.1)
        );
    }
    let last = |p: &Vec<(f64, f64)>| p.last().map_or(1.0, |l| l.1);
    println!(
        "--jobs 2 is {:.2}x --jobs 1 at {all} servers",
        last(&points[0]) / last(&points[1])
    );
}
