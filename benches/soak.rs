//! Soak (issue 8): the harness server with 2,000 tools, two calls each, verified by the
//! hintcheck binary. Prints the wall time, the calls per second and the peak RSS of the
//! hintcheck process (its VmHWM, sampled until it exits). Run with `cargo bench --bench soak`.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

mod common;

use std::path::PathBuf;
use std::time::Duration;

const TOOLS: usize = 2000;

fn main() {
    let hintcheck = PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"));
    common::fake_server(&hintcheck);
    let dir = tempfile::tempdir().expect("tempdir");
    let scenario = dir.path().join("soak.toml");
    std::fs::write(
        &scenario,
        format!("[fake]\nserver_name = \"soak\"\ngenerate_tools = {TOOLS}\n"),
    )
    .expect("scenario");
    let scenario = scenario.display().to_string();
    let (report, wall, peak_mib) = common::verify(
        &hintcheck,
        &["--era", "legacy", "--scenario", scenario.as_str()],
        Duration::from_secs(1800),
    );
    let wall = wall.as_secs_f64();
    let calls = report["coverage"]["calls"].as_u64().unwrap_or(0);
    assert_eq!(calls, 2 * TOOLS as u64, "{}", report["exit_reason"]);
    println!("soak: {TOOLS} tools x 2 calls through hintcheck (sandboxed)");
    println!(
        "  wall time {wall:.1} s, {:.0} calls/s, peak RSS of hintcheck {:.1} MiB",
        calls as f64 / wall,
        peak_mib
    );
}
