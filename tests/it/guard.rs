//! `hintcheck guard` driven by a plain MCP client: the liars of the guard fixture refused on
//! the host's real directory (a read-only tool and its child writing, a non-destructive tool
//! deleting, emptying and renaming over, a closed-world tool's datagram, lookup and connect, a
//! timer's write after the answer), the honest tools untouched, writes that escape checks at
//! open time either stopped or as the README lists them, serialized windows, the log, its
//! summary and `--on-violation error`; as root and unprivileged.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::sandbox::{As, fixture, prefix, stage};
use crate::util::gone_within;

/// A guard started as a host would start it, with a client on its stdio.
struct Host {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
}

impl Host {
    fn start(who: As, guard_args: &[String], data: &Path) -> Option<Host> {
        Host::start_with(who, guard_args, data, &[])
    }

    fn start_with(
        who: As,
        guard_args: &[String],
        data: &Path,
        env: &[(&str, String)],
    ) -> Option<Host> {
        let prefix = prefix(who, false)?;
        let mut argv = prefix;
        argv.push(stage().hintcheck.display().to_string());
        argv.push("guard".into());
        argv.extend(guard_args.iter().cloned());
        argv.extend([
            "--".into(),
            "python3".into(),
            format!("{}/server.py", fixture("guard")),
            data.display().to_string(),
        ]);
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("TMPDIR", "/tmp")
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn guard");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut host = Host {
            child,
            stdin,
            lines,
            next_id: 1,
        };
        let init = host.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}),
        );
        assert_eq!(
            init["result"]["serverInfo"]["name"], "guard-fixture",
            "{init}"
        );
        host.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        Some(host)
    }

    fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{msg}").expect("write to guard");
        stdin.flush().expect("flush");
    }

    /// The next line guard passes on, as JSON.
    fn receive(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .expect("guard answered within 20 s");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = self.receive();
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    /// Calls `tool` and returns what its operations did (the fixture answers with a JSON
    /// object of outcomes), or the whole answer when it is an error.
    fn call(&mut self, tool: &str) -> Value {
        let answer = self.request(
            "tools/call",
            json!({"name": tool, "arguments": {"name": "a.txt"}}),
        );
        // Calls a few ticks of /proc's clock apart, as a host's are: a thread's start time
        // then names the call that started it.
        std::thread::sleep(Duration::from_millis(30));
        match answer["result"]["content"][0]["text"].as_str() {
            Some(t) => serde_json::from_str(t).unwrap_or(Value::String(t.into())),
            None => answer,
        }
    }

    /// Closes the host's end and waits for guard to end; its stderr.
    fn finish(mut self) -> String {
        self.stdin = None;
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(
                    status.code().is_some(),
                    "guard ended by a signal: {status:?}"
                );
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "guard did not end within 15 s of the host closing its end"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        err
    }
}

/// A fresh directory every uid may write, under the stage.
fn open_dir(path: &Path) {
    let _ = std::fs::remove_dir_all(path);
    std::fs::create_dir_all(path).expect("mkdir");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).expect("chmod");
}

/// The data directory of a run, with the files the fixture's tools aim at.
pub(crate) fn data_dir(root: &Path) -> PathBuf {
    let data = root.join("data");
    open_dir(&data);
    for (name, content) in [
        ("a.txt", "a\n"),
        ("old.txt", "old\n"),
        ("keep.txt", "keep\n"),
        ("draft.txt", "draft\n"),
        ("final.txt", "final\n"),
        ("journal.txt", "journal\n"),
        ("scratch.txt", "scratch\n"),
        ("ledger.txt", "ledger\n"),
        ("mapped.bin", &"\0".repeat(4096)),
    ] {
        let p = data.join(name);
        std::fs::write(&p, content).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    }
    data
}

pub(crate) fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"))
}

/// The log's entries.
pub(crate) fn entries(log: &Path) -> Vec<Value> {
    read(log)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line not JSON ({e}): {l}")))
        .collect()
}

/// The refusal of `operation` on a path ending in `path_end` (or a destination) by `tool`.
pub(crate) fn refusal<'a>(log: &'a [Value], tool: &str, operation: &str, end: &str) -> &'a Value {
    log.iter()
        .find(|e| {
            e["decision"] == "refused"
                && e["tool"] == tool
                && e["operation"] == operation
                && [&e["path"], &e["destination"]]
                    .iter()
                    .any(|v| v.as_str().is_some_and(|s| s.ends_with(end)))
        })
        .unwrap_or_else(|| {
            panic!(
                "no refusal of {operation} {end} by {tool} in the log:\n{}",
                serde_json::to_string_pretty(log).unwrap_or_default()
            )
        })
}

/// Serializes the guard tests (they look for leftovers by the fixture's name).
pub(crate) static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The directories of one guard run: a data directory seeded for the fixture (shared with
/// the server), a state directory and a log.
pub(crate) struct RunDirs {
    pub(crate) root: PathBuf,
    pub(crate) data: PathBuf,
    pub(crate) state: PathBuf,
    pub(crate) log: PathBuf,
}

impl RunDirs {
    pub(crate) fn new(name: &str, who: As) -> RunDirs {
        let root = stage().dir.join(format!(
            "guard-{name}-{}",
            format!("{who:?}").to_lowercase()
        ));
        open_dir(&root);
        let data = data_dir(&root);
        let state = root.join("state");
        open_dir(&state);
        let log = root.join("guard.log");
        RunDirs {
            root,
            data,
            state,
            log,
        }
    }

    /// Guard's options for these directories, then `extra`.
    pub(crate) fn args(&self, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "--allow-write".into(),
            self.data.display().to_string(),
            "--state-dir".into(),
            self.state.display().to_string(),
            "--log".into(),
            self.log.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }
}

fn enforces_each_calls_hints(who: As) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dirs = RunDirs::new("hints", who);
    let args = dirs.args(&["--resolve", "outside.test=127.0.0.1"]);
    let RunDirs {
        data, state, log, ..
    } = dirs;
    // The "outside": a service on the host's loopback, which the server reaches only through
    // guard's forwarder, in an open-world call.
    let outside = std::net::TcpListener::bind("127.0.0.1:0").expect("outside service");
    let port = outside.local_addr().expect("port").port();
    std::thread::spawn(move || {
        for conn in outside.incoming().flatten() {
            let mut conn = conn;
            let mut got = Vec::new();
            let _ = std::io::Read::read_to_end(&mut conn, &mut got);
            let _ = conn.write_all(format!("pong:{}", String::from_utf8_lossy(&got)).as_bytes());
        }
    });
    let Some(mut host) = Host::start_with(
        who,
        &args,
        &data,
        &[("GUARD_OUTSIDE_PORT", port.to_string())],
    ) else {
        return;
    };
    // tools/list passes through unchanged: the annotations as the server wrote them.
    let listed = host.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().expect("tools");
    let peek = tools.iter().find(|t| t["name"] == "peek").expect("peek");
    assert_eq!(
        peek["annotations"],
        json!({"readOnlyHint": true, "openWorldHint": false})
    );

    // Honest tools behave as without guard.
    let read_note = host.call("read_note");
    assert_eq!(
        read_note,
        json!({"content": "a\n", "cache": "ok", "tmp": "ok", "devnull": "ok", "stderr": "ok"})
    );
    assert_eq!(
        host.call("add_note"),
        json!({"create": "ok", "append": "ok"})
    );
    assert_eq!(host.call("wipe"), json!({"delete": "ok"}));
    // A save through a temporary file renamed over the old one keeps its content: allowed.
    assert_eq!(host.call("save_ledger"), json!({"save": "ok"}));
    // Files a tool created are its own to empty and remove.
    assert_eq!(host.call("with_lock"), json!({"lock": "ok"}));
    // The liars are refused, each operation with EACCES.
    assert_eq!(
        host.call("peek"),
        json!({"write": "PermissionError 13", "child": "exit 2"})
    );
    assert_eq!(
        host.call("tidy"),
        json!({"delete": "PermissionError 13", "truncate": "PermissionError 13", "rename-over": "PermissionError 13"})
    );
    assert_eq!(
        host.call("stash"),
        json!({"move": "PermissionError 13", "link": "PermissionError 13"})
    );
    let report = host.call("report");
    assert_eq!(report["datagram"], "PermissionError 13", "{report}");
    assert_eq!(report["connect"], "PermissionError 13", "{report}");
    assert_ne!(report["dns"], "ok", "{report}");
    // The open-world tool reaches the outside through the forwarder.
    assert_eq!(host.call("fetch_outside"), json!({"reply": "pong:ping"}));
    assert_eq!(host.call("schedule"), json!("scheduled"));
    std::thread::sleep(Duration::from_millis(600));
    // Writes that escape checks at open time.
    assert_eq!(host.call("hold"), json!({"hold": "ok"}));
    assert_eq!(host.call("map_now"), json!({"map": "PermissionError 13"}));
    assert_eq!(
        host.call("shrink"),
        json!({"truncate": "PermissionError 13"})
    );
    assert_eq!(
        host.call("sneak_fd"),
        json!({"write": "ok"}),
        "listed in the README"
    );
    assert_eq!(
        host.call("sneak_map"),
        json!({"write": "ok"}),
        "listed in the README"
    );
    assert_eq!(
        host.call("unappend"),
        json!({"overwrite": "ok"}),
        "listed in the README"
    );
    let stderr = host.finish();

    // The host's real directory after the run.
    for absent in [
        "peek.log",
        "child.txt",
        "late.txt",
        "scratch.txt",
        ".lock",
        ".work.tmp",
    ] {
        assert!(
            !data.join(absent).exists(),
            "{absent} exists; stderr:\n{stderr}"
        );
    }
    assert_eq!(read(&data.join("old.txt")), "old\n");
    assert_eq!(read(&data.join("keep.txt")), "keep\n");
    assert_eq!(read(&data.join("draft.txt")), "draft\n");
    assert_eq!(read(&data.join("final.txt")), "final\n");
    assert!(!state.join("stolen").exists() && !state.join("linked").exists());
    assert_eq!(read(&data.join("new-1.txt")), "new\n");
    assert_eq!(read(&data.join("ledger.txt")), "ledger\nmore\n");
    assert!(read(&data.join("held.txt")).starts_with("SNEAKED"));
    // journal.txt: appended by add_note, then overwritten in place by unappend (not stopped).
    assert!(read(&data.join("journal.txt")).starts_with("OVERWRITTEN"));
    // The honest read-only tool's cache went to its own state.
    assert_eq!(read(&state.join(".cache/notes/last")), "a\n");

    let entries = entries(&log);
    let peek_write = refusal(&entries, "peek", "write", "/peek.log");
    assert_eq!(peek_write["hint"], "readOnlyHint");
    assert_eq!(peek_write["window"], "call");
    assert!(peek_write["call_id"].is_string());
    assert!(
        peek_write["process"]["command"]
            .as_str()
            .is_some_and(|c| c.contains("server.py")),
        "{peek_write}"
    );
    let child = refusal(&entries, "peek", "write", "/child.txt");
    assert!(
        child["process"]["command"]
            .as_str()
            .is_some_and(|c| c.starts_with("/bin/sh")),
        "{child}"
    );
    for (op, end) in [
        ("delete", "/old.txt"),
        ("truncate", "/keep.txt"),
        ("rename-over", "/draft.txt"),
    ] {
        assert_eq!(
            refusal(&entries, "tidy", op, end)["hint"],
            "destructiveHint"
        );
    }
    for (op, end) in [
        ("datagram", "192.0.2.7:9999"),
        ("connect", "192.0.2.8:443"),
        ("dns", "exfil.test"),
    ] {
        assert_eq!(
            refusal(&entries, "report", op, end)["hint"],
            "openWorldHint"
        );
    }
    let late = refusal(&entries, "schedule", "write", "/late.txt");
    assert_eq!(late["window"], "outside-calls", "{late}");
    assert!(late.get("hint").is_none(), "{late}");
    assert_eq!(
        refusal(&entries, "map_now", "shared-write-mapping", "/held.txt")["hint"],
        "readOnlyHint"
    );
    assert_eq!(
        refusal(&entries, "shrink", "truncate", "/held.txt")["hint"],
        "destructiveHint"
    );
    assert!(
        entries.iter().any(|e| e["decision"] == "allowed"
            && e["tool"] == "read_note"
            && e["path"]
                .as_str()
                .is_some_and(|p| p.ends_with(".cache/notes/last"))),
        "the state write of read_note is logged as allowed"
    );
    // Nothing an honest tool did was refused.
    for honest in [
        "read_note",
        "add_note",
        "wipe",
        "hold",
        "save_ledger",
        "with_lock",
    ] {
        assert!(
            !entries.iter().any(|e| e["decision"] == "refused"
                && e["tool"] == honest
                && e["window"] == "call"),
            "{honest} was refused something"
        );
    }
    // A notice per refusal on stderr.
    assert!(
        stderr.contains("hintcheck guard: refused write") && stderr.contains("peek.log"),
        "{stderr}"
    );
    assert!(gone_within("guard/server.py", Duration::from_secs(5)));

    // The summary per tool.
    let summary = crate::util::run(
        &["guard", "--summary", &log.display().to_string()],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(summary.code, 0, "{}", summary.stderr);
    // (The resolver may ask for A and AAAA: report's count is not fixed.)
    for line in [
        "peek: 2 refused",
        "tidy: 3 refused",
        "report: ",
        "openWorldHint    dns",
        "schedule (after its call): 1 refused",
    ] {
        assert!(
            summary.stdout.contains(line),
            "{line} in:\n{}",
            summary.stdout
        );
    }
}

as_root_and_unprivileged!(
    guard_enforces_each_calls_hints_as_root,
    guard_enforces_each_calls_hints_unprivileged,
    enforces_each_calls_hints
);

fn windows_and_errors(who: As) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    for no_serialize in [false, true] {
        let dirs = RunDirs::new(if no_serialize { "wide" } else { "serial" }, who);
        let mut args = dirs.args(&["--on-violation", "error"]);
        if no_serialize {
            args.push("--no-serialize".into());
        }
        let data = dirs.data;
        let Some(mut host) = Host::start(who, &args, &data) else {
            return;
        };
        host.request("tools/list", json!({}));
        // A read-only call that writes after 0.4 s, and meanwhile a call that may write: it
        // waits for the first to answer, unless --no-serialize widens the window.
        host.send(&json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call", "params": {"name": "slow_peek", "arguments": {}}}));
        std::thread::sleep(Duration::from_millis(100));
        host.send(&json!({"jsonrpc": "2.0", "id": 101, "method": "tools/call", "params": {"name": "add_note", "arguments": {}}}));
        let first = host.receive();
        let second = host.receive();
        assert_eq!(first["id"], 100, "{first}");
        assert_eq!(second["id"], 101, "{second}");
        if no_serialize {
            assert!(
                data.join("slow.txt").exists(),
                "the widened window let it write"
            );
            assert!(first.get("result").is_some(), "{first}");
        } else {
            assert!(!data.join("slow.txt").exists());
            // --on-violation error: the answer names what was refused.
            assert_eq!(first["error"]["code"], -32001, "{first}");
            let message = first["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("slow_peek") && message.contains("slow.txt"),
                "{message}"
            );
        }
        assert!(second.get("result").is_some(), "{second}");
        // A call without refusals keeps the server's own answer.
        assert_eq!(host.call("read_note")["content"], "a\n");
        host.finish();
    }
    assert!(gone_within("guard/server.py", Duration::from_secs(5)));
}

as_root_and_unprivileged!(
    guard_serializes_windows_and_answers_violations_with_errors_as_root,
    guard_serializes_windows_and_answers_violations_with_errors_unprivileged,
    windows_and_errors
);

#[test]
fn guard_without_a_command_or_with_a_missing_directory_says_what_is_wrong() {
    let none = crate::util::run(&["guard"], &[], Duration::from_secs(30));
    assert_eq!(none.code, 2, "{}", none.stderr);
    assert!(none.stderr.contains("after --"), "{}", none.stderr);
    let missing = crate::util::run(
        &["guard", "--allow-write", "/nonexistent/dir", "--", "true"],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(missing.code, 2, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("--allow-write /nonexistent/dir"),
        "{}",
        missing.stderr
    );
}

fn policy_from_a_report(who: As) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dirs = RunDirs::new("policy", who);
    // What a verification of a server like this one could support: wipe (which declares
    // nothing) read-only, and peek (declared read-only) a writer: the first fills an absent
    // hint, the second must not loosen a declared one.
    let report = dirs.root.join("report.json");
    std::fs::write(
        &report,
        json!({"tools": [
            {"name": "wipe", "supported": [
                {"hint": "readOnlyHint", "value": true, "basis": "consistent", "changed": true, "reason": "no write observed"}]},
            {"name": "peek", "supported": [
                {"hint": "readOnlyHint", "value": false, "basis": "observed", "changed": true, "reason": "wrote"}]}
        ]})
        .to_string(),
    )
    .expect("report");
    std::fs::set_permissions(&report, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let args = dirs.args(&["--policy", &report.display().to_string()]);
    let RunDirs { data, log, .. } = dirs;
    let Some(mut host) = Host::start(who, &args, &data) else {
        return;
    };
    host.request("tools/list", json!({}));
    assert_eq!(host.call("wipe"), json!({"delete": "PermissionError 13"}));
    assert_eq!(
        host.call("peek"),
        json!({"write": "PermissionError 13", "child": "exit 2"})
    );
    host.finish();
    assert_eq!(read(&data.join("scratch.txt")), "scratch\n");
    let entries = entries(&log);
    let wipe = refusal(&entries, "wipe", "delete", "/scratch.txt");
    assert_eq!(wipe["hint"], "readOnlyHint");
    assert!(
        wipe["reason"]
            .as_str()
            .is_some_and(|r| r.contains("--policy")),
        "{wipe}"
    );
    let peek = refusal(&entries, "peek", "write", "/peek.log");
    assert!(
        peek["reason"]
            .as_str()
            .is_some_and(|r| r.contains("declares")),
        "{peek}"
    );
    // A file that is not a report is a usage error naming it.
    let bad = crate::util::run(
        &[
            "guard",
            "--policy",
            "/nonexistent/report.json",
            "--",
            "true",
        ],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("--policy /nonexistent/report.json"),
        "{}",
        bad.stderr
    );
}

as_root_and_unprivileged!(
    guard_fills_undeclared_hints_from_a_report_as_root,
    guard_fills_undeclared_hints_from_a_report_unprivileged,
    policy_from_a_report
);

/// What one server answered to a call: whether it was an error, and its text with the run's
/// own paths and every number made neutral (clocks, ids).
#[derive(Debug, Clone, PartialEq)]
struct Answered {
    error: bool,
    /// The text with the run's paths made neutral only.
    raw: String,
    /// The words of the text, numbers and ids masked, in order.
    text: String,
}

/// A plain client on a real server's stdio (direct or through guard): the answers to
/// `calls`, in order.
fn answers(
    argv: &[String],
    cwd: &Path,
    env: &[(String, String)],
    calls: &[(String, Value)],
    root: &Path,
) -> Result<Vec<Answered>, String> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{argv:?}: {e}"))?;
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut id = 0u64;
    let mut ask = |stdin: &mut ChildStdin, method: &str, params: Value| -> Option<Value> {
        id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{msg}").ok()?;
        stdin.flush().ok()?;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = lines.recv_timeout(left).ok()?;
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if v["id"] == id {
                return Some(v);
            }
        }
    };
    let init = ask(
        &mut stdin,
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}),
    )
    .ok_or("no answer to initialize")?;
    if init.get("result").is_none() {
        return Err(format!("initialize: {init}"));
    }
    let _ = writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    );
    ask(&mut stdin, "tools/list", json!({})).ok_or("no answer to tools/list")?;
    let root_text = root.display().to_string();
    // Clocks, counters and generated ids: UUIDs and hex strings, any word with a digit in it.
    let ids = regex::Regex::new(
        r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\b[0-9a-f]{8,}\b",
    )
    .expect("regex");
    let numbers = regex::Regex::new(r"[A-Za-z0-9_]*[0-9][A-Za-z0-9_]*").expect("regex");
    let mut out = Vec::new();
    for (tool, arguments) in calls {
        let answer = ask(
            &mut stdin,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
        );
        out.push(match answer {
            None => Answered {
                error: true,
                raw: "<no answer>".into(),
                text: "<no answer>".into(),
            },
            Some(v) => {
                let error = v.get("error").is_some() || v["result"]["isError"] == true;
                let body = if v.get("error").is_some() {
                    v["error"]["message"].to_string()
                } else {
                    v["result"]["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|c| {
                            c["text"]
                                .as_str()
                                .map_or_else(|| c.to_string(), String::from)
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let raw = body.replace(&root_text, "<ROOT>");
                let body = ids.replace_all(&raw, "#");
                let body = numbers.replace_all(&body, "#");
                // Listings and searches come in the order of the file system or of the
                // server's own threads: the words are compared, not their order.
                let mut words: Vec<&str> = body
                    .split(|c: char| !(c.is_alphanumeric() || c == '#' || c == '/' || c == '.'))
                    .filter(|w| !w.is_empty())
                    .collect();
                words.sort_unstable();
                Answered {
                    error,
                    text: words.join(" "),
                    raw,
                }
            }
        });
    }
    drop(stdin);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return Ok(out);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(out)
}

/// A scratch root seeded as verify seeds one for `scenario` (the same words: seed 0).
fn seeded(
    scenario: &hintcheck::scenario::Scenario,
    dir: &Path,
) -> hintcheck::sandbox::scratch::Scratch {
    let mut s = hintcheck::sandbox::scratch::Scratch::create().expect("scratch");
    match &scenario.server.workspace {
        Some(seed) => s.seed_from(&dir.join(seed)),
        None => s.seed_default(&hintcheck::workspace::vocab::Vocabulary::of(0)),
    }
    .expect("seed");
    if let Some(rel) = &scenario.server.sqlite {
        s.seed_sqlite(&rel.0).expect("sqlite seed");
    }
    s
}

/// One real scenario driven directly and through guard with the calls its verification made
/// (of the tools it found honest): `Err` names each difference.
fn same_through_guard(dir: &Path, startup_writes: bool) -> Result<usize, String> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("?")
        .to_string();
    let scenario = hintcheck::scenario::Scenario::load(dir).map_err(|e| e.to_string())?;
    let Some(installed) = crate::real_servers::installed(&name) else {
        return Ok(0);
    };
    let report = crate::util::run(
        &[
            "verify",
            "--scenario",
            &dir.display().to_string(),
            "--cache-dir",
            &crate::util::cache(),
            "--format",
            "json",
            "--seed",
            "0",
            "--no-canaries",
        ],
        &[],
        Duration::from_secs(600),
    )
    .json();
    // The verification's scratch root, as its arguments name it.
    let text = report.to_string();
    let verify_root = regex::Regex::new(r"/tmp/tmp\.[A-Za-z0-9]{10}")
        .expect("regex")
        .find(&text)
        .map(|m| m.as_str().to_string());
    let mut calls: Vec<(u64, String, Value, bool)> = Vec::new();
    for t in report["tools"].as_array().into_iter().flatten() {
        let lying = t["verdicts"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["verdict"] == "contradicted");
        if lying {
            continue;
        }
        for c in t["calls"].as_array().into_iter().flatten() {
            let network = c["observations"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|o| o.to_string().contains("network") || o.to_string().contains("dns"));
            calls.push((
                c["started_ms"].as_u64().unwrap_or(0),
                t["name"].as_str().unwrap_or("").to_string(),
                c["arguments"].clone(),
                network,
            ));
        }
    }
    calls.sort_by_key(|c| c.0);
    let mut runs = Vec::new();
    // Twice directly (what differs between those is the server's own chance), then through
    // guard.
    for through_guard in [false, false, true] {
        let scratch = seeded(&scenario, dir);
        let root = scratch.root().expect("root").to_path_buf();
        let fill = |s: &str| {
            let s = installed.substitute(s);
            let s = match &verify_root {
                Some(v) => s.replace(v.as_str(), &root.display().to_string()),
                None => s,
            };
            s.replace("{workspace}", &scratch.workspace.display().to_string())
                .replace("{home}", &scratch.home.display().to_string())
                .replace("{tmp}", &scratch.tmp.display().to_string())
        };
        let these: Vec<(String, Value)> = calls
            .iter()
            .map(|(_, tool, args, _)| {
                let args: Value =
                    serde_json::from_str(&fill(&args.to_string())).unwrap_or(Value::Null);
                (tool.clone(), args)
            })
            .collect();
        let server: Vec<String> = scenario
            .server
            .command
            .clone()
            .unwrap_or_default()
            .iter()
            .map(|w| fill(w))
            .collect();
        let mut env: Vec<(String, String)> = ["PATH", "LANG"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect();
        // What guard gives a server (HOME and the XDG directories in its state, TMPDIR /tmp),
        // given the direct run too.
        let home = scratch.home.display().to_string();
        env.push(("HOME".into(), home.clone()));
        env.push(("TMPDIR".into(), "/tmp".into()));
        for (k, v) in [
            ("XDG_CONFIG_HOME", ".config"),
            ("XDG_CACHE_HOME", ".cache"),
            ("XDG_DATA_HOME", ".local/share"),
            ("XDG_STATE_HOME", ".local/state"),
        ] {
            env.push((k.into(), format!("{home}/{v}")));
        }
        env.extend(
            scenario
                .server
                .env
                .iter()
                .map(|(k, v)| (k.clone(), fill(v))),
        );
        let log = root.join("guard.log");
        let mut argv = prefix(As::Root, true).expect("root");
        if through_guard {
            argv.push(stage().hintcheck.display().to_string());
            argv.push("guard".to_string());
            if startup_writes {
                argv.push("--allow-startup-writes".into());
            }
            argv.extend([
                "--allow-write".to_string(),
                scratch.workspace.display().to_string(),
                "--state-dir".into(),
                scratch.home.display().to_string(),
                "--log".into(),
                log.display().to_string(),
                "--".into(),
            ]);
        }
        argv.extend(server);
        let answered = answers(&argv, &scratch.workspace, &env, &these, &root);
        let started_refused = || {
            read(&log)
                .lines()
                .any(|l| l.contains("\"window\":\"outside-calls\""))
        };
        if through_guard && !startup_writes && started_refused() {
            return Err(STARTUP.into());
        }
        let answered = match answered {
            Ok(a) => a,
            // The server does not start outside hintcheck's sandbox as the test starts it:
            // nothing to compare (said, not failed).
            Err(e) if !through_guard => {
                eprintln!("{name}: not compared, it did not answer when started directly: {e}");
                return Ok(0);
            }
            Err(e) => return Err(format!("{name} (guard): {e}")),
        };
        if through_guard {
            let refused: Vec<String> = read(&log)
                .lines()
                .filter(|l| {
                    l.contains("\"decision\":\"refused\"") && l.contains("\"window\":\"call\"")
                })
                .map(String::from)
                .collect();
            if !refused.is_empty() {
                return Err(format!(
                    "{name}: an honest call was refused:\n{}",
                    refused.join("\n")
                ));
            }
        }
        runs.push(answered);
    }
    let mut differences = Vec::new();
    for (i, ((d, again), g)) in runs[0].iter().zip(&runs[1]).zip(&runs[2]).enumerate() {
        let network = calls[i].3;
        // Where the two direct runs differ at all, the server's answer is its own chance (a
        // random id, a clock): compared by outcome and length only.
        let settled = d.raw == again.raw;
        let same = d.error == g.error
            && (network
                || d.text == g.text
                || (!settled && d.text.split(' ').count() == g.text.split(' ').count()));
        if !same {
            differences.push(format!(
                "{name} call {} of {}: direct {}{} / through guard {}{}",
                i + 1,
                calls[i].1,
                if d.error { "error " } else { "" },
                d.text.chars().take(3000).collect::<String>(),
                if g.error { "error " } else { "" },
                g.text.chars().take(3000).collect::<String>()
            ));
        }
    }
    if differences.is_empty() {
        Ok(calls.len())
    } else {
        Err(differences.join("\n"))
    }
}

/// Real servers whose honest tools guard refuses, with why; the test checks that they still
/// do (remove one from the list when guard learns its case). Listed in the README under what
/// guard refuses that a verification accepts.
const KNOWN_TO_DIFFER: [(&str, &str); 3] = [
    (
        "real-git",
        "git replaces .git/index through index.lock and a checkout removes tracked files: verify judges these by git's model, guard at the system call sees renames over and deletes",
    ),
    (
        "real-jdatamunch",
        "its read-only search builds an index directory in the workspace at first use: verify counts it as the server's first-use work, guard refuses a write outside the state directory",
    ),
    (
        "real-halflife",
        "its read-only recall creates its memory store in the workspace at first use (as above)",
    ),
];

/// What [`same_through_guard`] says of a server whose writes outside every call were
/// refused: it is tried again with `--allow-startup-writes`.
const STARTUP: &str = "writes outside calls";

/// Every real scenario over stdio, its honest tools called as its verification called them,
/// directly and through guard (each in a network namespace the test makes: nothing leaves),
/// from identically seeded workspaces: the same answers (errors alike, texts alike but for
/// the run's own paths and numbers; tools that reached for the network compared by outcome),
/// and no refusal in any call's window.
#[test]
fn guard_leaves_honest_real_servers_answering_as_without_it() {
    if !crate::sandbox::is_root() {
        crate::util::skip(
            "the real servers are run in network namespaces of the test's own, which needs root here",
        );
        return;
    }
    if !crate::util::installers_present() {
        return;
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(crate::util::repo().join("scenarios"))
        .expect("scenarios")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("real-"))
                && !read(&p.join("scenario.toml")).contains("transport = \"http\"")
        })
        .collect();
    dirs.sort();
    let queue = std::sync::Mutex::new(dirs);
    let outcomes = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let Some(dir) = queue.lock().expect("queue").pop() else {
                        break;
                    };
                    let mut outcome = same_through_guard(&dir, false).map(|n| (n, false));
                    if outcome.as_ref().is_err_and(|e| e == STARTUP) {
                        outcome = same_through_guard(&dir, true).map(|n| (n, true));
                    }
                    outcomes.lock().expect("outcomes").push((dir, outcome));
                }
            });
        }
    });
    let mut outcomes = outcomes.into_inner().expect("outcomes");
    for (name, why) in KNOWN_TO_DIFFER {
        let Some(i) = outcomes
            .iter()
            .position(|(d, _)| d.file_name().is_some_and(|n| n == name))
        else {
            continue;
        };
        let (_, outcome) = outcomes.remove(i);
        assert!(
            outcome.is_err(),
            "{name} now answers the same through guard: remove it from KNOWN_TO_DIFFER ({why})"
        );
        eprintln!("{name}: differs as known: {why}");
    }
    let calls: usize = outcomes
        .iter()
        .filter_map(|(_, o)| o.as_ref().ok())
        .map(|(n, _)| n)
        .sum();
    let failures: Vec<&String> = outcomes
        .iter()
        .filter_map(|(_, o)| o.as_ref().err())
        .collect();
    let starting: Vec<String> = outcomes
        .iter()
        .filter(|(_, o)| o.as_ref().is_ok_and(|(_, s)| *s))
        .map(|(d, _)| {
            d.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    eprintln!(
        "{} real servers, {calls} honest calls compared directly and through guard; with --allow-startup-writes (they write outside calls as they start): {}",
        outcomes.len(),
        starting.join(", ")
    );
    assert!(
        failures.is_empty(),
        "{}",
        failures
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}
