//! How much time the sandbox adds to a server's start: the median of starting `true` plainly
//! versus inside the sandbox (namespaces, mounts, Landlock, seccomp, uid switch), each until
//! the process has exited. Target: under 15 ms added (issue 3). Prints medians, the
//! difference and the ratio; run with `cargo bench --bench sandbox_start`
//! (`HINTCHECK_BENCH_OBSERVERS=1` adds the network observer and seccomp notification, as
//! `verify` starts servers).

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::path::PathBuf;
use std::time::{Duration, Instant};

use hintcheck::sandbox::doctor::probe_setup;
use hintcheck::sandbox::policy::SandboxLevel;
use hintcheck::sandbox::process::ServerProcess;

const RUNS: usize = 40;
const TARGET_MS: f64 = 15.0;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let root = rustix::process::getuid().is_root();
    let (_scratch, spec, mut config) = probe_setup(SandboxLevel::Required).expect("probe setup");
    // HINTCHECK_BENCH_OBSERVERS=1: as `verify` starts servers, with the network observer and
    // seccomp notification (what they add to the start).
    if std::env::var("HINTCHECK_BENCH_OBSERVERS").is_ok_and(|v| v == "1") {
        config.notify = true;
        config.network_observer = true;
        config.observe_ports = vec![80, 443, 8080, 8443];
    }
    let (plain, sandboxed) = rt.block_on(async {
        let mut plain = Vec::new();
        let mut sandboxed = Vec::new();
        for i in 0..RUNS + 5 {
            let t = Instant::now();
            let (mut p, pipes) = ServerProcess::spawn(&spec).expect("spawn");
            drop(pipes);
            let _ = p.shutdown(Duration::from_secs(5)).await;
            let plain_t = t.elapsed();
            let t = Instant::now();
            let mut started =
                // The network observer serves the sockets, as in a run.
                ServerProcess::spawn_sandboxed(&spec, &config, Some(&exe), |s| {
                    hintcheck::observe::net::start(s.dns, s.listeners, Some(s.more_listeners), s.packets, None, None)
                }, None)
                    .await
                    .expect("sandbox");
            drop(started.pipes);
            let _ = started.process.shutdown(Duration::from_secs(5)).await;
            let sandbox_t = t.elapsed();
            if i >= 5 {
                plain.push(plain_t);
                sandboxed.push(sandbox_t);
            }
        }
        (median(plain), median(sandboxed))
    });
    let added = sandboxed.as_secs_f64() * 1000.0 - plain.as_secs_f64() * 1000.0;
    println!(
        "sandbox start ({} mode, {RUNS} runs, medians)",
        if root { "root" } else { "unprivileged" }
    );
    println!(
        "  plain start of `true`:      {:8.2} ms",
        plain.as_secs_f64() * 1000.0
    );
    println!(
        "  sandboxed start of `true`:  {:8.2} ms",
        sandboxed.as_secs_f64() * 1000.0
    );
    println!(
        "  added by the sandbox:       {added:8.2} ms (target < {TARGET_MS} ms){}",
        if added < TARGET_MS { "" } else { "  MISSED" }
    );
    println!(
        "  ratio sandboxed / plain:    {:8.2}",
        sandboxed.as_secs_f64() / plain.as_secs_f64()
    );
}
