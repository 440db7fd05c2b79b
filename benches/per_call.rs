//! What hintcheck costs per call: a fake server with 50 tools is called twice per tool,
//! directly by a minimal JSON-RPC client and through hintcheck (sandbox, seccomp recorder,
//! network observer, snapshots). Prints medians of the response time of each, the observers'
//! checkpoint, and the settle period on an idle server, against the targets (issue 4 and 9:
//! under 2 ms per call beyond the server's own time, settle excluded; settle under 30 ms).
//! Run with `cargo bench --bench per_call`.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hintcheck::cli::{Format, VerifyArgs};
use hintcheck::config::RunConfig;

const TOOLS: usize = 50;

fn median_us(mut v: Vec<u64>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2] as f64
}

fn fake_server(hintcheck: &Path) -> PathBuf {
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

fn scenario(dir: &Path) -> PathBuf {
    let mut s = String::new();
    for i in 0..TOOLS {
        s.push_str(&format!(
            "[[tools]]\nname = \"tool_{i}\"\nannotations = {{ readOnlyHint = true }}\n\n"
        ));
    }
    let p = dir.join("scenario.toml");
    std::fs::write(&p, s).expect("scenario");
    p
}

/// Calls every tool twice with a bare JSON-RPC client; returns the round trips in µs.
fn direct(fake: &Path, scenario: &Path) -> Vec<u64> {
    let mut child = Command::new(fake)
        .args(["--scenario", &scenario.display().to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("fake server");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut call = |id: usize, msg: String| -> u64 {
        let t = Instant::now();
        writeln!(stdin, "{msg}").expect("write");
        stdin.flush().expect("flush");
        loop {
            let line = lines.next().expect("line").expect("read");
            if line.contains(&format!("\"id\":{id}")) {
                return t.elapsed().as_micros() as u64;
            }
        }
    };
    call(0, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}"#.into());
    let mut out = Vec::new();
    for i in 0..TOOLS {
        for r in 0..2 {
            let id = 1 + i * 2 + r;
            out.push(call(id, format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"tool_{i}","arguments":{{}}}}}}"#)));
        }
    }
    drop(stdin);
    let _ = child.wait();
    out
}

fn through_hintcheck(
    hintcheck: &Path,
    scenario: &Path,
    sandbox: bool,
) -> (Vec<u64>, Vec<u64>, Vec<u64>, Duration) {
    let args = VerifyArgs {
        scenario: Some(scenario.to_path_buf()),
        format: Some(Format::Json),
        era: Some(hintcheck::cli::EraArg::Legacy),
        no_sandbox: !sandbox,
        ..VerifyArgs::default()
    };
    let mut config = RunConfig::from_verify_args(&args).expect("config");
    config.sandbox_exe = Some(hintcheck.to_path_buf());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let t = Instant::now();
    let v = rt.block_on(async {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        hintcheck::run::verify(&config, rx, false).await
    });
    let wall = t.elapsed();
    assert_eq!(
        v.report.coverage.calls,
        TOOLS * 2,
        "{}",
        v.report.exit_reason
    );
    let calls: Vec<_> = v.report.tools.iter().flat_map(|t| &t.calls).collect();
    (
        calls.iter().map(|c| c.timing.response_us).collect(),
        calls.iter().map(|c| c.timing.observe_us).collect(),
        calls.iter().map(|c| c.timing.settle_us).collect(),
        wall,
    )
}

fn main() {
    let hintcheck = PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"));
    let fake = fake_server(&hintcheck);
    let dir = tempfile::tempdir().expect("tempdir");
    // The scenario's default command, the fake server, is found next to this benchmark's
    // binary (target/release), where `fake_server` made sure it is.
    let scenario = scenario(dir.path());
    let direct = median_us(direct(&fake, &scenario));
    let (resp, observe, settle, wall) = through_hintcheck(&hintcheck, &scenario, true);
    let (resp_plain, observe_plain, _, wall_plain) =
        through_hintcheck(&hintcheck, &scenario, false);
    let (resp, observe, settle) = (median_us(resp), median_us(observe), median_us(settle));
    let (resp_plain, observe_plain) = (median_us(resp_plain), median_us(observe_plain));
    let overhead = (resp - direct + observe) / 1000.0;
    let overhead_plain = (resp_plain - direct + observe_plain) / 1000.0;
    println!("per call ({TOOLS} tools x 2 calls, medians)");
    println!(
        "  direct JSON-RPC round trip:            {:8.3} ms",
        direct / 1000.0
    );
    println!(
        "  through hintcheck, sandboxed:          {:8.3} ms (+ observers {:.3} ms)",
        resp / 1000.0,
        observe / 1000.0
    );
    println!(
        "  through hintcheck, --no-sandbox:       {:8.3} ms (+ observers {:.3} ms)",
        resp_plain / 1000.0,
        observe_plain / 1000.0
    );
    println!(
        "  added per call, sandboxed:             {overhead:8.3} ms (target < 2 ms){}",
        if overhead < 2.0 { "" } else { "  MISSED" }
    );
    println!("  added per call, --no-sandbox:          {overhead_plain:8.3} ms");
    println!(
        "  settle period on an idle server:       {:8.3} ms (target < 30 ms){}",
        settle / 1000.0,
        if settle < 30_000.0 { "" } else { "  MISSED" }
    );
    println!(
        "  whole run: sandboxed {:.2} s, --no-sandbox {:.2} s",
        wall.as_secs_f64(),
        wall_plain.as_secs_f64()
    );
}
