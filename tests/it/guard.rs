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
fn data_dir(root: &Path) -> PathBuf {
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
        ("mapped.bin", &"\0".repeat(4096)),
    ] {
        let p = data.join(name);
        std::fs::write(&p, content).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    }
    data
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| format!("<{e}>"))
}

/// The log's entries.
fn entries(log: &Path) -> Vec<Value> {
    read(log)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("log line not JSON ({e}): {l}")))
        .collect()
}

/// The refusal of `operation` on a path ending in `path_end` (or a destination) by `tool`.
fn refusal<'a>(log: &'a [Value], tool: &str, operation: &str, end: &str) -> &'a Value {
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
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn run_dir(name: &str, who: As) -> PathBuf {
    let root = stage().dir.join(format!(
        "guard-{name}-{}",
        format!("{who:?}").to_lowercase()
    ));
    open_dir(&root);
    root
}

fn enforces_each_calls_hints(who: As) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let root = run_dir("hints", who);
    let data = data_dir(&root);
    let state = root.join("state");
    open_dir(&state);
    let log = root.join("guard.log");
    let args: Vec<String> = [
        "--allow-write",
        &data.display().to_string(),
        "--state-dir",
        &state.display().to_string(),
        "--log",
        &log.display().to_string(),
        "--resolve",
        "outside.test=127.0.0.1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
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
    // The liars are refused, each operation with EACCES.
    assert_eq!(
        host.call("peek"),
        json!({"write": "PermissionError 13", "child": "exit 2"})
    );
    assert_eq!(
        host.call("tidy"),
        json!({"delete": "PermissionError 13", "truncate": "PermissionError 13", "rename-over": "PermissionError 13"})
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
    for absent in ["peek.log", "child.txt", "late.txt", "scratch.txt"] {
        assert!(
            !data.join(absent).exists(),
            "{absent} exists; stderr:\n{stderr}"
        );
    }
    assert_eq!(read(&data.join("old.txt")), "old\n");
    assert_eq!(read(&data.join("keep.txt")), "keep\n");
    assert_eq!(read(&data.join("draft.txt")), "draft\n");
    assert_eq!(read(&data.join("final.txt")), "final\n");
    assert_eq!(read(&data.join("new-1.txt")), "new\n");
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
    for honest in ["read_note", "add_note", "wipe", "hold"] {
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
        let root = run_dir(if no_serialize { "wide" } else { "serial" }, who);
        let data = data_dir(&root);
        let state = root.join("state");
        open_dir(&state);
        let mut args: Vec<String> = vec![
            "--allow-write".into(),
            data.display().to_string(),
            "--state-dir".into(),
            state.display().to_string(),
            "--on-violation".into(),
            "error".into(),
        ];
        if no_serialize {
            args.push("--no-serialize".into());
        }
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
    let root = run_dir("policy", who);
    let data = data_dir(&root);
    let state = root.join("state");
    open_dir(&state);
    let log = root.join("guard.log");
    // What a verification of a server like this one could support: wipe (which declares
    // nothing) read-only, and peek (declared read-only) a writer: the first fills an absent
    // hint, the second must not loosen a declared one.
    let report = root.join("report.json");
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
    let args: Vec<String> = [
        "--allow-write",
        &data.display().to_string(),
        "--state-dir",
        &state.display().to_string(),
        "--log",
        &log.display().to_string(),
        "--policy",
        &report.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
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
