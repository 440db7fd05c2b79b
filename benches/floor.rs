//! Verification against the floor (issue 37). For the harness's fake server (the demo), the
//! reference filesystem and memory servers (npm), and two Python servers (the lazy-store
//! fixture, a small server whose store needs a replay to judge, and mcp-server-time from
//! PyPI), it runs `hintcheck verify` and the *floor*: the same server started bare, without a
//! sandbox, on a workspace seeded the same way, sent the same `initialize`, `tools/list` and
//! tool calls as hintcheck's report shows (same arguments, same order, back to back) by a
//! minimal client that then closes its input and waits for the server to exit. It prints
//! the medians of 3, their ratio, the target, and hintcheck's time split (set-up, greeting,
//! listing and start-up wait, controls, calls, settle, observers, late wait, stop, replays,
//! report) from the report's `timing`.
//!
//! Then every real scenario (`scenarios/real-*`) verified one after another with default
//! flags: each server's time and split, the average and the slowest.
//!
//! With `HINTCHECK_FLOOR_REAL=1` each real server's floor is measured too (one bare session
//! with the calls of the run it follows) and printed beside its time, with hintcheck's own
//! share (its time less the floor) and that share's average: what hintcheck can still take
//! out, apart from the servers' own start, calls and exit. `HINTCHECK_FLOOR_SKIP_FIVE=1`
//! leaves out the five servers measured against the floor first.
//!
//! Before and after: with `HINTCHECK_FLOOR_BEFORE` naming an earlier hintcheck binary (a
//! build of the commit before a change), each figure is measured with it too, in the same
//! run, and printed beside (medians of 3 alike; each real server once with each, as the new
//! binary), with the earlier binary's average over the real servers.
//!
//! Targets: hintcheck ≤ 2 × floor + 100 ms on the filesystem and memory servers; on the
//! Python servers no more than the floor plus 200 ms (waits the server's behaviour calls for
//! are in the floor's calls); real servers under 1.3 s on average, none over 5 s. Run with
//! `cargo bench --bench floor` (installs into target/hintcheck-cache; without npm or python3
//! the servers that need them are skipped). Not a timed test: the figures are for reading.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const RUNS: usize = 3;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// `hintcheck verify --format json --seed 0` of a scenario; the report and the wall time.
fn verify(exe: &Path, scenario: &Path, cache: &str) -> Option<(Value, f64)> {
    let t = Instant::now();
    let out = Command::new(exe)
        .args(["verify", "--format", "json", "--no-config", "--seed", "0"])
        .args(["--cache-dir", cache, "--scenario"])
        .arg(scenario)
        .env_remove("GITHUB_STEP_SUMMARY")
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let wall = t.elapsed().as_secs_f64() * 1000.0;
    let report: Value = serde_json::from_slice(&out.stdout).ok()?;
    report["server"]["start_error"]
        .is_null()
        .then_some((report, wall))
}

/// The workspace a report's server worked in (`…/tmp.XXXXXXXXXX/workspace`), wherever the
/// report names it: the command, the calls' arguments, the server's instructions.
fn report_workspace(report: &Value) -> Option<String> {
    let text = report.to_string();
    text.match_indices("/workspace").find_map(|(at, _)| {
        let head = &text[..at];
        let start = head
            .rfind(|c: char| c == '"' || c == '=' || c.is_whitespace())
            .map_or(0, |i| i + 1);
        let dir = &head[start..];
        dir.rsplit('/')
            .next()
            .is_some_and(|last| last.starts_with("tmp."))
            .then(|| format!("{dir}/workspace"))
    })
}

/// Every tools/call hintcheck's main run sent, in order: (tool, arguments).
fn calls_of(report: &Value) -> Vec<(String, Value)> {
    let mut calls: Vec<(u64, String, Value)> = Vec::new();
    for t in report["tools"].as_array().into_iter().flatten() {
        let name = t["name"].as_str().unwrap_or_default().to_string();
        let mut last = json!({});
        for c in t["calls"].as_array().into_iter().flatten() {
            // A repeat's arguments are the call's before it.
            if !c["arguments"].is_null() {
                last = c["arguments"].clone();
            }
            calls.push((
                c["started_ms"].as_u64().unwrap_or(0),
                name.clone(),
                last.clone(),
            ));
        }
    }
    calls.sort_by_key(|c| c.0);
    calls.into_iter().map(|(_, t, a)| (t, a)).collect()
}

/// A bare session's time (ms, from spawn to exit) and how many of its calls failed (an error
/// or a result marked `isError`).
struct Floor {
    ms: f64,
    failed: usize,
}

/// The calls of hintcheck's main run that failed, as the floor counts them.
fn failed_calls(report: &Value) -> usize {
    report["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|t| t["calls"].as_array().into_iter().flatten())
        .filter(|c| c["outcome"] != "ok")
        .count()
}

/// One bare session: the server spawned on a freshly seeded workspace, greeted, listed, sent
/// `calls`, its input closed and its exit awaited.
fn floor_session(scenario: &Path, report: &Value, calls: &[(String, Value)]) -> Option<Floor> {
    let s = hintcheck::scenario::Scenario::load(scenario).ok()?;
    let mut scratch = hintcheck::sandbox::scratch::Scratch::create().ok()?;
    let dir = s.path.parent().unwrap_or(Path::new("."));
    match &s.server.workspace {
        Some(seed) => scratch.seed_from(&dir.join(seed)).ok()?,
        None => scratch
            .seed_default(&hintcheck::workspace::vocab::Vocabulary::of(0))
            .ok()?,
    }
    if let Some(rel) = &s.server.sqlite {
        scratch.seed_sqlite(&rel.0).ok()?;
    }
    let ours = scratch.workspace.display().to_string();
    let theirs = report_workspace(report).unwrap_or_else(|| "\u{0}".into());
    let fill = |v: &str| {
        v.replace(&theirs, &ours)
            .replace("{workspace}", &ours)
            .replace("{home}", &scratch.home.display().to_string())
            .replace("{tmp}", &scratch.tmp.display().to_string())
    };
    let command: Vec<String> = report["server"]["command"]
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .map(fill)
        .collect();
    let started = Instant::now();
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .envs(s.server.env.iter().map(|(k, v)| (k.clone(), fill(v))))
        .env("HOME", &scratch.home)
        .env("TMPDIR", &scratch.tmp)
        .current_dir(&scratch.workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let stdout = child.stdout.take()?;
    let (tx, rx) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && tx.send(v).is_err()
            {
                break;
            }
        }
    });
    let mut id = 0u64;
    let mut ask = |method: &str, params: Value| -> Option<Value> {
        id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").ok()?;
        stdin.flush().ok()?;
        loop {
            let v = rx.recv_timeout(Duration::from_secs(30)).ok()?;
            if v["id"] == id {
                return Some(v);
            }
        }
    };
    let greeted = ask(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "floor", "version": "0"}}),
    )
    .is_some();
    let mut answered = greeted;
    let mut failed = 0;
    if greeted {
        answered &= ask("tools/list", json!({})).is_some();
        for (tool, arguments) in calls {
            let arguments: Value =
                serde_json::from_str(&arguments.to_string().replace(&theirs, &ours))
                    .unwrap_or(Value::Null);
            match ask("tools/call", json!({"name": tool, "arguments": arguments})) {
                Some(v) if v.get("error").is_some() || v["result"]["isError"] == true => {
                    failed += 1
                }
                Some(_) => {}
                None => answered = false,
            }
        }
    }
    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(10);
    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let took = started.elapsed().as_secs_f64() * 1000.0;
    let _ = child.kill();
    let _ = child.wait();
    let _ = scratch.remove();
    answered.then_some(Floor { ms: took, failed })
}

/// " (the floor's calls failed N times, hintcheck's M: not comparable)" where the bare
/// session's calls failed more often than hintcheck's (a path it could not map), or nothing.
fn comparability(floor_failed: usize, report: &Value) -> String {
    let ours = failed_calls(report);
    if floor_failed > ours {
        format!(
            " (the floor's calls failed {floor_failed} times, hintcheck's {ours}: not comparable)"
        )
    } else {
        String::new()
    }
}

/// hintcheck's time split from a report's `timing` (ms), and the report's own writing.
fn split(report: &Value, wall: f64) -> String {
    let t = &report["timing"];
    let ms = |k: &str| t[k].as_f64().unwrap_or(0.0) / 1000.0;
    let greeting = report["server"]["startup_us"].as_f64().unwrap_or(0.0) / 1000.0;
    let duration = report["duration_ms"].as_f64().unwrap_or(0.0);
    let explore_rest = ms("explore_us")
        - ms("controls_us")
        - ms("calls_us")
        - ms("settle_us")
        - ms("observe_us")
        - ms("late_wait_us")
        - ms("shutdown_us");
    format!(
        "set-up {:.0} (of it the workspace {:.0}), greeting {:.0}, listing and start-up wait {:.0}, controls {:.0}, calls {:.0}, settle {:.0}, observers {:.0}, explorer {:.0}, late wait {:.0}, stop {:.0}, replays {:.0}, report {:.0} (ms; windows closed by proof {}, by idle period {})",
        ms("prepare_us") + (ms("launch_us") - greeting).max(0.0),
        ms("prepare_us"),
        greeting,
        ms("inventory_us"),
        ms("controls_us"),
        ms("calls_us"),
        ms("settle_us"),
        ms("observe_us"),
        explore_rest.max(0.0),
        ms("late_wait_us"),
        ms("shutdown_us"),
        ms("replays_us"),
        ms("judge_us") + (wall - duration).max(0.0),
        t["windows_proven_quiet"],
        t["windows_closed_by_idle_period"],
    )
}

/// The target for a server: `hintcheck ≤ factor × floor + extra` (ms).
struct Target {
    factor: f64,
    extra_ms: f64,
}

/// The earlier binary `HINTCHECK_FLOOR_BEFORE` names, if it names one that exists.
fn before_exe() -> Option<PathBuf> {
    let p = PathBuf::from(std::env::var_os("HINTCHECK_FLOOR_BEFORE")?);
    p.is_file().then_some(p)
}

/// " (before: N ms)" for the earlier binary's median wall time on `scenario`, or nothing.
fn before_note(scenario: &Path, cache: &str) -> String {
    let Some(old) = before_exe() else {
        return String::new();
    };
    let walls: Vec<f64> = (0..RUNS)
        .filter_map(|_| verify(&old, scenario, cache).map(|(_, w)| w))
        .collect();
    if walls.is_empty() {
        return " (before: did not run)".into();
    }
    format!(" (before: {:.0} ms)", median(walls))
}

fn against_floor(exe: &Path, scenario: &Path, cache: &str, label: &str, target: Option<Target>) {
    // A warm-up run installs what the scenario needs.
    if verify(exe, scenario, cache).is_none() {
        println!("{label}: skipped (the server did not start here)");
        return;
    }
    let mut runs: Vec<(f64, Value)> = (0..RUNS)
        .filter_map(|_| verify(exe, scenario, cache).map(|(r, w)| (w, r)))
        .collect();
    if runs.is_empty() {
        println!("{label}: skipped (no run finished)");
        return;
    }
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (wall, report) = runs.swap_remove(runs.len() / 2);
    let calls = calls_of(&report);
    let floors: Vec<Floor> = (0..RUNS)
        .filter_map(|_| floor_session(scenario, &report, &calls))
        .collect();
    let comparable = comparability(floors.iter().map(|f| f.failed).max().unwrap_or(0), &report);
    let floor = median(floors.iter().map(|f| f.ms).collect());
    let verdict = match target {
        Some(Target { factor, extra_ms }) => {
            let bound = factor * floor + extra_ms;
            if wall <= bound {
                format!("target ≤ {factor} × floor + {extra_ms:.0} ms = {bound:.0} ms: met")
            } else {
                format!(
                    "target ≤ {factor} × floor + {extra_ms:.0} ms = {bound:.0} ms: MISSED by {:.0} ms",
                    wall - bound
                )
            }
        }
        None => "no target".into(),
    };
    let before = before_note(scenario, cache);
    println!(
        "{label} ({} calls, {} replays): floor {floor:.0} ms{comparable}, hintcheck {wall:.0} ms{before}, {:.1}× the floor ({verdict})\n    {}",
        calls.len(),
        report["replays"].as_array().map_or(0, Vec::len),
        wall / floor,
        split(&report, wall)
    );
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"));
    let cache = root.join("target/hintcheck-cache").display().to_string();
    println!("hintcheck against the floor (medians of {RUNS}; ms)");
    let cases: [(&str, &str, Option<Target>); 5] = [
        ("scenarios/demo", "fake server (the demo)", None),
        (
            "scenarios/real-filesystem",
            "server-filesystem (npm)",
            Some(Target {
                factor: 2.0,
                extra_ms: 100.0,
            }),
        ),
        (
            "scenarios/real-memory",
            "server-memory (npm)",
            Some(Target {
                factor: 2.0,
                extra_ms: 100.0,
            }),
        ),
        (
            "tests/fixtures/lazy-store",
            "a small Python server with a replay (lazy-store)",
            Some(Target {
                factor: 1.0,
                extra_ms: 200.0,
            }),
        ),
        (
            "scenarios/real-time",
            "mcp-server-time (PyPI)",
            Some(Target {
                factor: 1.0,
                extra_ms: 200.0,
            }),
        ),
    ];
    if std::env::var_os("HINTCHECK_FLOOR_SKIP_FIVE").is_none() {
        for (path, label, target) in cases {
            against_floor(&exe, &root.join(path), &cache, label, target);
        }
    }
    let with_floors = std::env::var_os("HINTCHECK_FLOOR_REAL").is_some();
    println!("\nreal servers in sequence (default flags, after a warm-up run each)");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root.join("scenarios"))
        .expect("scenarios")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("real-"))
        })
        .collect();
    dirs.sort();
    let mut times = Vec::new();
    let mut befores: Vec<f64> = Vec::new();
    let mut own_shares: Vec<f64> = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("?");
        if verify(&exe, dir, &cache).is_none() {
            println!("{name}: skipped (the server did not start here)");
            continue;
        }
        let Some((report, wall)) = verify(&exe, dir, &cache) else {
            println!("{name}: skipped (the run did not finish)");
            continue;
        };
        let before_wall = before_exe()
            .and_then(|old| verify(&old, dir, &cache))
            .map(|(_, w)| w);
        befores.extend(before_wall);
        let before = before_wall
            .map(|w| format!(" (before: {w:.0} ms)"))
            .unwrap_or_default();
        let floor = with_floors
            .then(|| floor_session(dir, &report, &calls_of(&report)))
            .flatten();
        let floor = floor
            .map(|f| {
                let comparable = comparability(f.failed, &report);
                if comparable.is_empty() {
                    own_shares.push(wall - f.ms);
                }
                format!(
                    " (floor {:.0} ms{comparable}, hintcheck's own {:.0} ms)",
                    f.ms,
                    wall - f.ms
                )
            })
            .unwrap_or_default();
        println!(
            "{name}: {wall:.0} ms{floor}{before}\n    {}",
            split(&report, wall)
        );
        times.push((wall, name.to_string()));
    }
    if times.is_empty() {
        return;
    }
    let average = times.iter().map(|t| t.0).sum::<f64>() / times.len() as f64;
    let over: Vec<String> = times
        .iter()
        .filter(|t| t.0 > 5000.0)
        .map(|t| format!("{} ({:.1} s)", t.1, t.0 / 1000.0))
        .collect();
    if !own_shares.is_empty() {
        println!(
            "hintcheck's own share (time less the floor) on the {} of them whose floor is comparable: {:.2} s a server on average",
            own_shares.len(),
            own_shares.iter().sum::<f64>() / own_shares.len() as f64 / 1000.0
        );
    }
    if !befores.is_empty() {
        println!(
            "the earlier binary on {} of them: average {:.2} s a server",
            befores.len(),
            befores.iter().sum::<f64>() / befores.len() as f64 / 1000.0
        );
    }
    println!(
        "{} real servers: average {:.2} s a server (target < 1.3 s: {}); over 5 s: {}",
        times.len(),
        average / 1000.0,
        if average < 1300.0 { "met" } else { "MISSED" },
        if over.is_empty() {
            "none".to_string()
        } else {
            over.join(", ")
        }
    );
}
