//! Guard's cost (issue 36): the latency a call gains through `hintcheck guard` over a direct
//! connection to the same server, guard's start-up over the bare server's (medians of 15
//! start-ups each, interleaved), and guard's memory over a 10,000-call soak. Servers: the fake server (a read-only tool that answers at once)
//! and the reference filesystem server (npm, installed by the scenario suite into
//! target/hintcheck-cache; skipped with the reason when it is not there). Medians of 3 runs
//! of 1,000 calls each, after 100 calls of warm-up. Run with `cargo bench --bench guard`.
//!
//! Targets: < 0.2 ms a call on the fake server, < 0.5 ms on the filesystem server, start-up
//! < 20 ms more than the bare server, memory flat over the soak. And what `--transport http`
//! costs a call over guard on stdio (the fake server, one keep-alive connection, JSON answers;
//! no target: a host's own HTTP stack costs more), with guard's memory over as many calls.

#![allow(clippy::print_stdout)] // a benchmark reports on stdout

#[allow(dead_code)] // the benchmarks share it; this one uses the fake server only
mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 3;
/// Start-ups measured for each side (interleaved).
const STARTS: usize = 15;
const CALLS: usize = 1000;
const WARM_UP: usize = 100;
const SOAK: usize = 10_000;

/// A server (direct or through guard) with a client on its stdio.
struct Client {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Client {
    /// Starts `argv` and greets it; returns the client and the time to the greeting's answer.
    fn start(argv: &[String]) -> (Client, Duration) {
        let t = Instant::now();
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut c = Client {
            child,
            stdin,
            stdout,
            next: 1,
        };
        c.request(
            "initialize",
            r#"{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#,
        );
        let startup = t.elapsed();
        writeln!(
            c.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("write");
        c.request("tools/list", "{}");
        (c, startup)
    }

    fn request(&mut self, method: &str, params: &str) -> String {
        let id = self.next;
        self.next += 1;
        writeln!(
            self.stdin,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#
        )
        .expect("write");
        self.stdin.flush().expect("flush");
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read");
        assert!(
            line.contains(&format!("\"id\":{id}")),
            "{method}: unexpected answer {line}"
        );
        line
    }

    /// The time of each of `n` calls of `call` (a `tools/call` params object).
    fn calls(&mut self, call: &str, n: usize) -> Vec<Duration> {
        (0..n)
            .map(|_| {
                let t = Instant::now();
                let answer = self.request("tools/call", call);
                let took = t.elapsed();
                assert!(!answer.contains("\"error\""), "{answer}");
                took
            })
            .collect()
    }

    fn rss_kib(&self) -> u64 {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next()?.parse().ok())
            })
            .unwrap_or(0)
    }

    fn finish(mut self) {
        drop(self.stdin);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One run: (start-up ms, median ms a call).
fn run(argv: &[String], call: &str) -> (f64, f64) {
    let (mut c, startup) = Client::start(argv);
    c.calls(call, WARM_UP);
    let per_call = median(c.calls(call, CALLS).into_iter().map(ms).collect());
    c.finish();
    (ms(startup), per_call)
}

fn compare(label: &str, direct: &[String], guard: &[String], call: &str, target_ms: f64) {
    let (mut d_start, mut d_call, mut g_start, mut g_call) = (vec![], vec![], vec![], vec![]);
    for _ in 0..RUNS {
        d_call.push(run(direct, call).1);
        g_call.push(run(guard, call).1);
    }
    for _ in 0..STARTS {
        for (argv, out) in [(direct, &mut d_start), (guard, &mut g_start)] {
            let (c, startup) = Client::start(argv);
            c.finish();
            out.push(ms(startup));
        }
    }
    // Start-ups vary by tens of milliseconds for node: the median of the paired differences.
    let added_start = median(d_start.iter().zip(&g_start).map(|(d, g)| g - d).collect());
    let (ds, dc, gs, gc) = (
        median(d_start),
        median(d_call),
        median(g_start),
        median(g_call),
    );
    let added = gc - dc;
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "{label}: direct {dc:.3} ms a call, through guard {gc:.3} ms: +{added:.3} ms (target < {target_ms} ms: {})",
        verdict(added < target_ms)
    );
    println!(
        "  start-up to the greeting's answer: bare {ds:.0} ms, through guard {gs:.0} ms: +{added_start:.0} ms, median of the paired differences (target < 20 ms: {})",
        verdict(added_start < 20.0)
    );
}

fn guard_argv(hintcheck: &Path, state: &Path, extra: &[String], server: &[String]) -> Vec<String> {
    let mut v = vec![
        hintcheck.display().to_string(),
        "guard".into(),
        "--state-dir".into(),
        state.display().to_string(),
    ];
    v.extend(extra.iter().cloned());
    v.push("--".into());
    v.extend(server.iter().cloned());
    v
}

fn find(dir: &Path, suffix: &str, depth: usize) -> Option<PathBuf> {
    if depth == 0 {
        return None;
    }
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.to_string_lossy().ends_with(suffix) {
            return Some(p);
        }
        if p.is_dir() && !p.is_symlink() {
            if let Some(found) = find(&p, suffix, depth - 1) {
                return Some(found);
            }
        }
    }
    None
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let hintcheck = PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"));
    let fake = common::fake_server(&hintcheck);
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).expect("state");
    let scenario = dir.path().join("bench.toml");
    std::fs::write(
        &scenario,
        "[fake]\nserver_name = \"bench\"\n\n[[tools]]\nname = \"echo\"\ndescription = \"Answers at once.\"\nannotations = { readOnlyHint = true, openWorldHint = false }\nresult_text = \"hello\"\n",
    )
    .expect("scenario");
    println!("guard against a direct connection (medians of {RUNS} runs of {CALLS} calls)");
    let fake_argv = vec![
        fake.display().to_string(),
        "--scenario".into(),
        scenario.display().to_string(),
    ];
    let echo = r#"{"name":"echo","arguments":{}}"#;
    compare(
        "fake server",
        &fake_argv,
        &guard_argv(&hintcheck, &state, &[], &fake_argv),
        echo,
        0.2,
    );

    let cache = root.join("target/hintcheck-cache/npm");
    match (
        find(
            &cache,
            "@modelcontextprotocol/server-filesystem/dist/index.js",
            6,
        ),
        which("node"),
    ) {
        (Some(index), Some(node)) => {
            let files = dir.path().join("files");
            std::fs::create_dir(&files).expect("files");
            std::fs::write(files.join("a.txt"), "a file to read\n").expect("file");
            let server = vec![
                node.display().to_string(),
                index.display().to_string(),
                files.display().to_string(),
            ];
            let read = format!(
                r#"{{"name":"read_text_file","arguments":{{"path":"{}"}}}}"#,
                files.join("a.txt").display()
            );
            compare(
                "server-filesystem (npm), read_text_file",
                &server,
                &guard_argv(
                    &hintcheck,
                    &state,
                    &["--allow-write".into(), files.display().to_string()],
                    &server,
                ),
                &read,
                0.5,
            );
        }
        _ => println!(
            "server-filesystem (npm): skipped, not installed in target/hintcheck-cache (run the scenario suite first) or no node on PATH"
        ),
    }

    over_http(&hintcheck, &state, &fake_argv, echo);

    // The soak: memory of the guard process over 10,000 calls.
    let (mut c, _) = Client::start(&guard_argv(&hintcheck, &state, &[], &fake_argv));
    c.calls(echo, 1000);
    let early = c.rss_kib();
    c.calls(echo, SOAK - 1000);
    let late = c.rss_kib();
    c.finish();
    let growth = late as f64 / 1024.0 - early as f64 / 1024.0;
    println!(
        "soak: {SOAK} calls through guard: RSS of guard {:.1} MiB after 1,000 calls, {:.1} MiB after {SOAK}: {growth:+.1} MiB ({})",
        early as f64 / 1024.0,
        late as f64 / 1024.0,
        if growth < 2.0 { "flat" } else { "GROWING" }
    );
}

/// A host on one keep-alive HTTP connection to guard's endpoint, asking JSON answers.
struct HttpHost {
    stream: BufReader<std::net::TcpStream>,
    session: String,
    next: u64,
}

impl HttpHost {
    fn post(&mut self, session: Option<&str>, body: &str) -> (Option<String>, String) {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json\r\ncontent-length: {}\r\n",
            body.len()
        );
        if let Some(s) = session {
            head.push_str(&format!("mcp-session-id: {s}\r\n"));
        }
        head.push_str("\r\n");
        let w = self.stream.get_mut();
        w.write_all(head.as_bytes()).expect("send");
        w.write_all(body.as_bytes()).expect("send");
        let (mut length, mut session_id) = (0usize, None);
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).expect("read");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                match k.to_ascii_lowercase().as_str() {
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    "mcp-session-id" => session_id = Some(v.trim().to_string()),
                    _ => {}
                }
            }
        }
        let mut answer = vec![0; length];
        std::io::Read::read_exact(&mut self.stream, &mut answer).expect("body");
        (session_id, String::from_utf8_lossy(&answer).into_owned())
    }

    fn start(addr: &str) -> HttpHost {
        let stream = std::net::TcpStream::connect(addr).expect("connect to guard");
        stream.set_nodelay(true).expect("nodelay");
        let mut host = HttpHost {
            stream: BufReader::new(stream),
            session: String::new(),
            next: 2,
        };
        let (session, _) = host.post(
            None,
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#,
        );
        host.session = session.expect("a session");
        let s = host.session.clone();
        host.post(
            Some(&s),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        );
        host.post(
            Some(&s),
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        );
        host
    }

    fn calls(&mut self, call: &str, n: usize) -> Vec<Duration> {
        let session = self.session.clone();
        (0..n)
            .map(|_| {
                let id = self.next;
                self.next += 1;
                let t = Instant::now();
                let (_, answer) = self.post(
                    Some(&session),
                    &format!(
                        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{call}}}"#
                    ),
                );
                let took = t.elapsed();
                assert!(
                    answer.contains(&format!("\"id\":{id}")) && !answer.contains("\"error\""),
                    "{answer}"
                );
                took
            })
            .collect()
    }
}

/// Guard over HTTP against guard over stdio, on the fake server.
fn over_http(hintcheck: &Path, state: &Path, server: &[String], call: &str) {
    let argv = guard_argv(
        hintcheck,
        state,
        &[
            "--transport".into(),
            "http".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
        ],
        server,
    );
    let mut guard = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("guard");
    let mut err = BufReader::new(guard.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first)
        .expect("guard says where it serves");
    let addr = first
        .trim_end()
        .split(" at http://")
        .nth(1)
        .and_then(|u| u.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("no address in {first}"))
        .to_string();
    let pid = guard.id();
    let rss = || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            })
            .unwrap_or(0) as f64
            / 1024.0
    };
    let mut per_call = Vec::new();
    for _ in 0..RUNS {
        let mut host = HttpHost::start(&addr);
        host.calls(call, WARM_UP);
        per_call.push(median(
            host.calls(call, CALLS).into_iter().map(ms).collect(),
        ));
        let session = host.session.clone();
        let w = host.stream.get_mut();
        let _ = write!(
            w,
            "DELETE /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\nmcp-session-id: {session}\r\ncontent-length: 0\r\n\r\n"
        );
    }
    let stdio = median(
        (0..RUNS)
            .map(|_| run(&guard_argv(hintcheck, state, &[], server), call).1)
            .collect(),
    );
    let http = median(per_call);
    println!(
        "fake server over HTTP: through guard {http:.3} ms a call (one keep-alive connection, JSON answers), over stdio {stdio:.3} ms: HTTP adds {:+.3} ms",
        http - stdio
    );
    let mut host = HttpHost::start(&addr);
    host.calls(call, 1000);
    let early = rss();
    host.calls(call, SOAK - 1000);
    let late = rss();
    println!(
        "  soak over HTTP: RSS of guard {early:.1} MiB after 1,000 calls, {late:.1} MiB after {SOAK}: {:+.1} MiB ({})",
        late - early,
        if late - early < 2.0 {
            "flat"
        } else {
            "GROWING"
        }
    );
    let _ = Command::new("kill").arg(pid.to_string()).status();
    let _ = guard.wait();
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}
