//! `hintcheck guard --transport http` driven over real HTTP: sessions that each get a server
//! of their own (the same ids in two sessions never meet), the liars refused on the host's
//! real directory and logged with their session, `--on-violation error` on a JSON answer,
//! requests without a session sharing one server with their ids kept apart, the stateless
//! era's header checks, foreign Origins and Hosts refused, `DELETE` ending a session's server,
//! SIGTERM ending them all; as root and unprivileged. And real host-side clients (the
//! TypeScript SDK's Streamable HTTP transport, 1.x and 2.x, and the Python SDK's) speaking
//! through guard to the reference filesystem server and to a 2026-07-28 server.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::guard::{RunDirs, SERIAL, entries, read, refusal};
use crate::sandbox::{As, fixture, prefix, stage};
use crate::util::{gone_within, processes_matching};

/// An HTTP response.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of the body: the events of an SSE stream, or a JSON body.
    fn messages(&self) -> Vec<Value> {
        let text = String::from_utf8_lossy(&self.body);
        if self
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/event-stream"))
        {
            return text
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
                .collect();
        }
        match serde_json::from_str(&text) {
            Ok(Value::Array(items)) => items,
            Ok(v) => vec![v],
            Err(e) => panic!("not JSON ({e}): {text}"),
        }
    }

    /// The one message of the body.
    fn message(&self) -> Value {
        let mut all = self.messages();
        assert_eq!(all.len(), 1, "{all:?}");
        all.remove(0)
    }
}

/// Removes HTTP/1.1 chunked framing.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(end) = body.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&body[..end])
                .split(';')
                .next()
                .unwrap_or("")
                .trim(),
            16,
        )
        .unwrap_or(0);
        if size == 0 {
            return out;
        }
        let start = end + 2;
        out.extend_from_slice(&body[start..(start + size).min(body.len())]);
        body = &body[(start + size + 2).min(body.len())..];
    }
}

/// One request on a connection of its own, read to its end.
fn http(addr: &str, method: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).expect("connect to guard");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nconnection: close\r\ncontent-length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("host: {addr}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read the response");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {}", String::from_utf8_lossy(&raw)));
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .expect("a status");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
        .collect();
    let body = &raw[split + 4..];
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    Reply {
        status,
        headers,
        body: if chunked {
            dechunk(body)
        } else {
            body.to_vec()
        },
    }
}

const STREAM: (&str, &str) = ("accept", "application/json, text/event-stream");
const JSON_ONLY: (&str, &str) = ("accept", "application/json");
const BODY_JSON: (&str, &str) = ("content-type", "application/json");

/// Guard serving HTTP, as a user starts it.
struct Served {
    child: Child,
    addr: String,
    stderr: Receiver<String>,
}

impl Served {
    /// Guard running `command` from `cwd` (where the server starts).
    fn start(who: As, guard_args: &[String], command: &[String], cwd: &Path) -> Option<Served> {
        let mut argv = prefix(who, false)?;
        argv.push(stage().hintcheck.display().to_string());
        argv.extend(["guard", "--transport", "http", "--listen", "127.0.0.1:0"].map(String::from));
        argv.extend(guard_args.iter().cloned());
        argv.push("--".into());
        argv.extend(command.iter().cloned());
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .env("TMPDIR", "/tmp")
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn guard");
        let err = child.stderr.take().expect("stderr");
        let (tx, stderr) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = stderr
            .recv_timeout(Duration::from_secs(20))
            .expect("guard says where it serves");
        let url = first
            .split(" at http://")
            .nth(1)
            .unwrap_or_else(|| panic!("no address in: {first}"));
        let addr = url.trim_end_matches("/mcp").to_string();
        Some(Served {
            child,
            addr,
            stderr,
        })
    }

    fn post(&self, session: Option<&str>, accept: (&str, &str), body: &Value) -> Reply {
        let mut headers = vec![BODY_JSON, accept];
        if let Some(s) = session {
            headers.push(("mcp-session-id", s));
        }
        http(&self.addr, "POST", &headers, &body.to_string())
    }

    /// A new session: its id.
    fn initialize(&self) -> String {
        let r = self.post(
            None,
            STREAM,
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}}),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(r.message()["result"]["serverInfo"]["name"], "guard-fixture");
        let session = r
            .header("mcp-session-id")
            .expect("a session id")
            .to_string();
        let note = self.post(
            Some(&session),
            STREAM,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert_eq!(note.status, 202);
        session
    }

    /// Calls `tool` with id `id`; what the fixture says its operations did, or the answer
    /// when it is an error.
    fn call(&self, session: Option<&str>, accept: (&str, &str), id: u64, tool: &str) -> Value {
        let r = self.post(
            session,
            accept,
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {"name": "a.txt"}}}),
        );
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        let answer = r.message();
        assert_eq!(answer["id"], id, "{answer}");
        std::thread::sleep(Duration::from_millis(30));
        match answer["result"]["content"][0]["text"].as_str() {
            Some(t) => serde_json::from_str(t).unwrap_or(Value::String(t.into())),
            None => answer,
        }
    }

    /// SIGTERM, as a service manager stops it; guard's exit code and stderr.
    fn stop(mut self) -> (i32, String) {
        self.stop_now()
    }

    fn stop_now(&mut self) -> (i32, String) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        let code = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status.code().unwrap_or(-1);
            }
            assert!(
                Instant::now() < deadline,
                "guard did not end within 20 s of SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let err: Vec<String> = self.stderr.try_iter().collect();
        (code, err.join("\n"))
    }
}

/// The fixture's servers alive.
fn servers() -> usize {
    servers_of("guard/server.py", "python")
}

/// Servers alive whose command line holds `needle`, run by `program` (guard's own command
/// line names the server too).
fn servers_of(needle: &str, program: &str) -> usize {
    processes_matching(needle)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.starts_with(program))
        })
        .count()
}

/// Waits until `count()` is `want` (10 s at most).
fn until(what: &str, want: usize, count: impl Fn() -> usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while count() != want {
        assert!(
            Instant::now() < deadline,
            "{what}: {} alive, not {want}",
            count()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Served {
    /// A failed test stops its guard too (and guard its servers).
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            self.stop_now();
        }
    }
}

fn fixture_command(data: &Path) -> Vec<String> {
    vec![
        "python3".into(),
        format!("{}/server.py", fixture("guard")),
        data.display().to_string(),
    ]
}

fn sessions_streams_and_refusals(who: As) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dirs = RunDirs::new("http", who);
    let args = dirs.args(&["--on-violation", "error"]);
    let Some(guard) = Served::start(who, &args, &fixture_command(&dirs.data), Path::new("/"))
    else {
        return;
    };
    let data = &dirs.data;
    let (a, b) = (guard.initialize(), guard.initialize());
    assert_ne!(a, b, "each initialize opens a session of its own");
    assert_eq!(servers(), 2, "a server per session");
    for s in [&a, &b] {
        let list = guard.post(
            Some(s),
            STREAM,
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        );
        assert!(list.message()["result"]["tools"].is_array());
    }
    // The same id in both sessions: each answer comes back on its own request's stream.
    let peek = guard.call(Some(&a), STREAM, 3, "peek");
    assert_eq!(
        peek["error"]["code"], -32001,
        "--on-violation error: {peek}"
    );
    let added = guard.call(Some(&b), STREAM, 3, "add_note");
    assert_eq!(added["create"], "ok", "{added}");
    assert!(!data.join("peek.log").exists() && !data.join("child.txt").exists());
    // A host that accepts no stream gets a JSON body.
    let note = guard.call(Some(&b), JSON_ONLY, 4, "read_note");
    assert_eq!(note["content"], "a\n", "{note}");
    let log = entries(&dirs.log);
    let refused = refusal(&log, "peek", "write", "/peek.log");
    assert_eq!(refused["session"], a.as_str(), "{refused}");
    assert_eq!(refused["call_id"], "3");

    // Requests without a session (the stateless era) share one server; two hosts' id 1 in
    // flight together are kept apart, and the read-only call's window is its own. Neither
    // host lists the tools first (a stateless host keeps the listing it read before): guard
    // lists them itself before the first call goes.
    let addr = guard.addr.clone();
    let slow = std::thread::spawn(move || {
        let r = http(
            &addr,
            "POST",
            &[BODY_JSON, STREAM],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow_peek", "arguments": {}}}).to_string(),
        );
        r.message()
    });
    std::thread::sleep(Duration::from_millis(100));
    // Another host's cancellation of its own id 1 cannot be told from one of this call's: on
    // the shared server it is not passed on, and the call runs to its answer.
    let cancel = guard.post(
        None,
        STREAM,
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    );
    assert_eq!(cancel.status, 202);
    let wiped = guard.call(None, STREAM, 1, "wipe");
    let slow = slow.join().expect("the slow call");
    assert_eq!(slow["id"], 1);
    assert_eq!(slow["error"]["code"], -32001, "{slow}");
    assert!(
        slow["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("slow.txt")),
        "{slow}"
    );
    assert_eq!(wiped["delete"], "ok", "{wiped}");
    assert!(!data.join("slow.txt").exists() && !data.join("scratch.txt").exists());
    let log = entries(&dirs.log);
    assert_eq!(
        refusal(&log, "slow_peek", "write", "/slow.txt")["session"],
        "stateless"
    );

    // The stateless era's headers must agree with the body.
    let mismatch = http(
        &guard.addr,
        "POST",
        &[BODY_JSON, STREAM, ("mcp-method", "tools/list")],
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "wipe"}})
            .to_string(),
    );
    assert_eq!(mismatch.status, 400);
    assert_eq!(mismatch.message()["error"]["code"], -32020);
    assert!(data.join("keep.txt").exists());
    // A web page's request (DNS rebinding) is refused, whatever it carries.
    for foreign in [("origin", "http://evil.test"), ("host", "evil.test:80")] {
        let r = http(
            &guard.addr,
            "POST",
            &[BODY_JSON, STREAM, ("mcp-session-id", &a), foreign],
            &json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "wipe"}})
                .to_string(),
        );
        assert_eq!(r.status, 403, "{foreign:?}");
    }
    let garbage = http(&guard.addr, "POST", &[BODY_JSON, STREAM], "{not json");
    assert_eq!(garbage.status, 400);
    assert_eq!(garbage.message()["error"]["code"], -32700);
    assert_eq!(http(&guard.addr, "GET", &[STREAM], "").status, 405);

    // DELETE ends the session and its server; the host is told to start anew.
    assert_eq!(
        http(&guard.addr, "DELETE", &[("mcp-session-id", &a)], "").status,
        200
    );
    let after = guard.post(
        Some(&a),
        STREAM,
        &json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}),
    );
    assert_eq!(after.status, 404);
    until(
        "B's and the stateless requests' servers are left",
        2,
        servers,
    );
    // Sessions opened and ended leave nothing of theirs in guard (threads serving their
    // network, sockets, namespaces).
    let threads = || {
        std::fs::read_dir(format!("/proc/{}/task", guard.child.id()))
            .map(|d| {
                d.flatten()
                    .filter(|t| {
                        std::fs::read_to_string(t.path().join("comm"))
                            .is_ok_and(|c| c.starts_with("guard-"))
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    // A's threads end within the forwarder's poll.
    std::thread::sleep(Duration::from_millis(1200));
    let before = threads();
    for _ in 0..3 {
        let s = guard.initialize();
        assert_eq!(
            http(&guard.addr, "DELETE", &[("mcp-session-id", &s)], "").status,
            200
        );
    }
    until("the ended sessions' servers", 2, servers);
    std::thread::sleep(Duration::from_millis(1200));
    assert_eq!(
        threads(),
        before,
        "guard's threads serving sessions' networks, before 3 sessions came and went and after"
    );
    let (code, err) = guard.stop();
    assert_eq!(code, 0, "{err}");
    assert!(
        gone_within("guard/server.py", Duration::from_secs(5)),
        "no server outlives guard"
    );
    assert_eq!(read(&data.join("keep.txt")), "keep\n");
}

as_root_and_unprivileged!(
    guard_over_http_keeps_sessions_apart_and_refuses_as_root,
    guard_over_http_keeps_sessions_apart_and_refuses_unprivileged,
    sessions_streams_and_refusals
);

#[test]
fn guard_over_http_listens_on_loopback_only() {
    let far = crate::util::run(
        &[
            "guard",
            "--transport",
            "http",
            "--listen",
            "192.0.2.1:7447",
            "--",
            "true",
        ],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(far.code, 2, "{}", far.stderr);
    assert!(far.stderr.contains("loopback only"), "{}", far.stderr);
    let stdio = crate::util::run(
        &["guard", "--listen", "127.0.0.1:7447", "--", "true"],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(stdio.code, 2, "{}", stdio.stderr);
    assert!(
        stdio.stderr.contains("--transport http"),
        "{}",
        stdio.stderr
    );
}

/// The TypeScript SDK's clients, pinned: 1.x (the 2025 handshake era, one session) and 2.x
/// (asked to speak 2026-07-28 where the server does: no session, `server/discover`).
const SDK_CLIENTS: [&str; 2] = [
    "@modelcontextprotocol/sdk@1.32.2",
    "@modelcontextprotocol/client@2.4.0",
];

/// The Python SDK's client, pinned.
const PYTHON_SDK: &str = "mcp==1.27.0";

/// Runs the Python SDK's client against `addr` with `calls`; what it printed.
fn python_sdk_client(addr: &str, calls: &Value) -> Value {
    let setup = hintcheck::fleet::setup::SetupSection {
        pip: vec![PYTHON_SDK.into()],
        ..Default::default()
    };
    let venv = crate::real_servers::installed_packages(&setup, "the Python SDK")
        .and_then(|i| i.venv)
        .expect("the Python SDK installed");
    let mut client = Command::new(venv.join("bin/python"));
    client
        .arg(format!("{}/sdk_client.py", fixture("guard")))
        .arg(format!("http://{addr}/mcp"))
        .arg(calls.to_string());
    printed(client, "the Python client")
}

/// What host-side `client` printed (one JSON object), once it ended well.
fn printed(mut client: Command, who: &str) -> Value {
    let out = client
        .output()
        .unwrap_or_else(|e| panic!("{who} did not start: {e}"));
    assert!(
        out.status.success(),
        "{who} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Runs the SDK client `kind` (`v1`, `v2`) against `addr` with `calls`; what it printed.
fn sdk_client(kind: &str, addr: &str, calls: &Value) -> Value {
    let setup = hintcheck::fleet::setup::SetupSection {
        npm: SDK_CLIENTS.map(String::from).to_vec(),
        ..Default::default()
    };
    let installed = crate::real_servers::installed_packages(&setup, "the SDK clients")
        .and_then(|i| i.npm)
        .expect("the SDK clients installed");
    let package = match kind {
        "v1" => "sdk",
        _ => "client",
    };
    let dir = installed
        .join("node_modules/@modelcontextprotocol")
        .join(package);
    let mut client = Command::new("node");
    client
        .arg(format!("{}/sdk_client.mjs", fixture("guard")))
        .arg(kind)
        .arg(&dir)
        .arg(format!("http://{addr}/mcp"))
        .arg(calls.to_string());
    printed(client, &format!("the {kind} client"))
}

#[test]
fn guard_over_http_serves_the_typescript_and_python_sdk_clients() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if !crate::util::installers_present() {
        return;
    }
    // The 2025 era: the reference filesystem server, a session, a write where allowed.
    let Some(filesystem) = crate::real_servers::node_server("server-filesystem") else {
        return;
    };
    let dirs = RunDirs::new("http-sdk", As::Root);
    let data = dirs.data.display().to_string();
    let command = vec![
        "node".into(),
        filesystem.display().to_string(),
        data.clone(),
    ];
    let Some(guard) = Served::start(As::Root, &dirs.args(&[]), &command, &dirs.data) else {
        return;
    };
    let out = sdk_client(
        "v1",
        &guard.addr,
        &json!([
            {"name": "list_directory", "arguments": {"path": data}},
            {"name": "write_file", "arguments": {"path": format!("{data}/from-host.txt"), "content": "written through guard"}},
            {"name": "read_text_file", "arguments": {"path": format!("{data}/from-host.txt")}},
        ]),
    );
    assert!(out["sessionId"].is_string(), "{out}");
    assert!(
        out["tools"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("write_file"))),
        "{out}"
    );
    let text = |i: usize| out["calls"][i]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text(0).contains("a.txt"), "{out}");
    assert_eq!(
        read(&dirs.data.join("from-host.txt")),
        "written through guard"
    );
    assert!(text(2).contains("written through guard"), "{out}");
    // The Python SDK's client, through the same guard: a session of its own.
    let py = python_sdk_client(
        &guard.addr,
        &json!([
            {"name": "write_file", "arguments": {"path": format!("{data}/from-python.txt"), "content": "written by the Python SDK"}},
            {"name": "read_text_file", "arguments": {"path": format!("{data}/from-host.txt")}},
        ]),
    );
    assert!(
        py["sessionId"].is_string() && py["sessionId"] != out["sessionId"],
        "{py}"
    );
    assert_eq!(py["calls"][0]["isError"], false, "{py}");
    assert_eq!(
        read(&dirs.data.join("from-python.txt")),
        "written by the Python SDK"
    );
    assert_eq!(py["calls"][1]["text"], "written through guard", "{py}");
    // The clients ended their sessions: their servers are gone.
    let server = filesystem.display().to_string();
    until("the ended sessions' servers", 0, || {
        servers_of(&server, "node")
    });
    let (code, err) = guard.stop();
    assert_eq!(code, 0, "{err}");

    // The 2026-07-28 era: a modern server, no session, ids of the shared server renamed.
    let dirs = RunDirs::new("http-sdk-modern", As::Root);
    let scenario = crate::util::repo().join("scenarios/modern-era/scenario.toml");
    let command = vec![
        crate::util::fake_server().display().to_string(),
        "--scenario".into(),
        scenario.display().to_string(),
    ];
    let Some(guard) = Served::start(As::Root, &dirs.args(&[]), &command, &dirs.data) else {
        return;
    };
    let out = sdk_client(
        "v2",
        &guard.addr,
        &json!([{"name": "look", "arguments": {}}, {"name": "count", "arguments": {}}]),
    );
    assert!(out["sessionId"].is_null(), "{out}");
    assert_eq!(out["tools"], json!(["count", "look"]), "{out}");
    assert_eq!(out["calls"][0]["content"][0]["text"], "look done", "{out}");
    assert_eq!(out["calls"][1]["content"][0]["text"], "count done", "{out}");
    assert_eq!(read(&dirs.data.join("count.txt")), "1\n");
    let (code, err) = guard.stop();
    assert_eq!(code, 0, "{err}");
}

#[test]
fn guard_over_http_holds_to_max_sessions_when_hosts_come_at_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dirs = RunDirs::new("http-max", As::Root);
    let args = dirs.args(&["--max-sessions", "1"]);
    let Some(guard) = Served::start(
        As::Root,
        &args,
        &fixture_command(&dirs.data),
        Path::new("/"),
    ) else {
        return;
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}}).to_string();
    let hosts: Vec<_> = (0..4)
        .map(|_| {
            let (addr, body) = (guard.addr.clone(), initialize.clone());
            std::thread::spawn(move || http(&addr, "POST", &[BODY_JSON, STREAM], &body))
        })
        .collect();
    let mut statuses: Vec<u16> = hosts
        .into_iter()
        .map(|h| h.join().expect("host").status)
        .collect();
    statuses.sort_unstable();
    assert_eq!(statuses, vec![200, 503, 503, 503]);
    assert_eq!(servers(), 1, "one server for the one session");
    let (code, err) = guard.stop();
    assert_eq!(code, 0, "{err}");
    assert!(gone_within("guard/server.py", Duration::from_secs(5)));
}
