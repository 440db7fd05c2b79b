//! The fake MCP server of hintcheck's tests and demo: a scriptable stdio (or HTTP) server that
//! reads a scenario file (`[fake]` and `[[tools]]`, see `scenarios/README.md`) and behaves as it
//! says: honest or lying tools that write, append, overwrite, truncate, delete, rename, spawn a
//! child that writes, connect to a loopback port, sleep, print garbage or oversized lines,
//! answer with a wrong id, exit or hang. It speaks the handshake era, the modern era, or both.
//! It runs as the `hintcheck-fake-server` binary of this package, or inside the hintcheck
//! binary itself (`hintcheck fake-server …`, hidden), which is how the released binary alone
//! runs the demo.
//!
//! Internal modes: `--child-write PATH CONTENT DELAY_MS` (a spawned writer), `--linger SECONDS`
//! (a process left running) and `--fork-bomb`.

mod http;

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

#[derive(Debug, Deserialize, Default)]
struct ScenarioFile {
    #[serde(default)]
    fake: Fake,
    #[serde(default)]
    tools: Vec<ToolSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fake {
    /// `legacy`, `modern` or `both`.
    #[serde(default = "legacy", deserialize_with = "era_name")]
    era: String,
    protocol_version: Option<String>,
    #[serde(default = "default_name")]
    server_name: String,
    /// Tools per tools/list page; 0 means one page.
    #[serde(default)]
    page_size: usize,
    /// Return the same cursor forever.
    #[serde(default)]
    repeat_cursor: bool,
    /// Never answer server/discover.
    #[serde(default)]
    ignore_discover: bool,
    /// Answer the first server/discover this late (a server still starting), and refuse
    /// initialize as the Python SDK does when it serves the modern protocol (-32022).
    discover_delay_ms: Option<u64>,
    /// Never answer initialize.
    #[serde(default)]
    never_answer_initialize: bool,
    /// Exit on server/discover, as a server on an older SDK that crashes on an unknown
    /// request before initialize.
    #[serde(default)]
    die_on_discover: bool,
    /// After answering server/discover, refuse every tools/call until initialize came
    /// ("initialize is required"), as a server whose modern answer is only a façade.
    #[serde(default)]
    modern_calls_need_initialize: bool,
    /// Lines printed on stdout before anything else.
    #[serde(default)]
    garbage_before_handshake: Vec<String>,
    /// Send a ping request to the client before answering tools/list.
    #[serde(default)]
    ping_client: bool,
    /// Send roots/list to the client after the handshake and log the answer on stderr.
    #[serde(default)]
    request_roots: bool,
    /// Write this file (relative to the cwd) at startup.
    startup_write: Option<String>,
    /// Add this many generated read-only tools (`gen_0`, `gen_1`, …) after the listed ones.
    #[serde(default)]
    generate_tools: usize,
    /// Each generated tool's call sleeps this many milliseconds (a server with work to do).
    #[serde(default)]
    generated_call_ms: u64,
    /// The tool list changes between pages: every tools/list request sees the list rotated
    /// by one more tool, so pages overlap and a tool goes missing.
    #[serde(default)]
    shifting_pages: bool,
    /// Responses (ids 1..=N) printed at startup, before any request was made.
    #[serde(default)]
    responses_before_requests: u32,
    /// HTTP mode: what the HTTP front does instead of answering a call of the tool (by
    /// name): `status_500`, `wrong_content_type`, `broken_stream`, `close`, `dribble`,
    /// `huge_event`.
    #[serde(default)]
    http_faults: HashMap<String, String>,
    /// HTTP mode: speak only the older HTTP+SSE transport (2024-11-05): `GET /sse` is the
    /// event stream, its `endpoint` event names where POSTs go (fault `end_stream` ends the
    /// stream when its tool is called).
    #[serde(default)]
    http_sse_only: bool,
}

impl Default for Fake {
    fn default() -> Self {
        toml::from_str("").unwrap_or_else(|e| die(&format!("defaults: {e}")))
    }
}

fn legacy() -> String {
    "legacy".into()
}

fn default_name() -> String {
    "hintcheck-fake-server".into()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolSpec {
    name: String,
    description: Option<String>,
    title: Option<String>,
    annotations: Option<toml::Value>,
    /// Raw JSON for `annotations` (for `null` and other things TOML cannot say).
    annotations_json: Option<String>,
    input_schema: Option<toml::Value>,
    input_schema_json: Option<String>,
    /// The whole raw tool definition; wins over every other field.
    tool_json: Option<String>,
    task_support: Option<String>,
    #[serde(default)]
    steps: Vec<Step>,
    /// Text of the result.
    result_text: Option<String>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct Step {
    #[serde(deserialize_with = "action_name")]
    action: String,
    /// Run only on this call of the tool (1-based).
    on_call: Option<u32>,
    /// Run only when each named argument has this value.
    #[serde(default)]
    when: std::collections::BTreeMap<String, toml::Value>,
    path: Option<String>,
    content: Option<String>,
    from: Option<String>,
    to: Option<String>,
    size: Option<u64>,
    mode: Option<String>,
    delay_ms: Option<u64>,
    seconds: Option<u64>,
    host: Option<String>,
    port: Option<u16>,
    ms: Option<u64>,
    text: Option<String>,
    bytes: Option<usize>,
    code: Option<i64>,
    message: Option<String>,
    method: Option<String>,
    /// For `spawn`: the command line (placeholders expanded).
    argv: Option<Vec<String>>,
    /// For `spawn`: variables set for the program (placeholders expanded), beside the
    /// environment it inherits.
    env: Option<std::collections::BTreeMap<String, String>>,
    /// For `connect`: `host:port` (placeholders expanded), instead of `host` and `port`.
    address: Option<String>,
    /// For `connect`: send a TLS ClientHello naming this server instead of `content`.
    tls_sni: Option<String>,
    /// For `lookup`: the name to resolve.
    name: Option<String>,
}

const ACTIONS: &[&str] = &[
    "reveal",
    "spawn",
    "kill_parent",
    "fork_bomb",
    "alloc",
    "connect_unix",
    "lookup",
    "udp",
    "write",
    "append",
    "truncate",
    "delete",
    "rename",
    "mkdir",
    "chmod",
    "counter",
    "spawn_write",
    "spawn_daemon",
    "connect",
    "connect_self",
    "sleep",
    "garbage",
    "oversized",
    "stderr",
    "wrong_id",
    "exit",
    "hang",
    "no_answer",
    "error",
    "rpc_error",
    "notify",
    "flood_stdout",
    "flood_stderr",
    "close_stdout",
    "read",
    "flock",
];

fn die(msg: &str) -> ! {
    eprintln!("hintcheck-fake-server: {msg}");
    std::process::exit(2);
}

/// How this program starts itself again (its spawned writers, lingering processes and fork
/// bombs): its own executable followed by these words (`fake-server` inside hintcheck).
static RELAUNCH_WORDS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// A command that runs this program again in `mode` (`--child-write`, `--linger`, …).
fn relaunch(mode: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap_or_default());
    c.args(RELAUNCH_WORDS.get().map(Vec::as_slice).unwrap_or_default());
    c.arg(mode);
    c
}

/// Runs the fake server on `args` (the words after the program, or after `relaunch_words`
/// when it runs inside another binary) and exits the process when it is done.
pub fn run(args: &[String], relaunch_words: &[&str]) -> ! {
    let _ = RELAUNCH_WORDS.set(relaunch_words.iter().map(|w| w.to_string()).collect());
    match args.first().map(String::as_str) {
        Some("--child-write") if args.len() == 4 => {
            let delay: u64 = args[3].parse().unwrap_or(0);
            std::thread::sleep(Duration::from_millis(delay));
            let _ = std::fs::write(&args[1], &args[2]);
        }
        Some("--linger") if args.len() == 2 => {
            let secs: u64 = args[1].parse().unwrap_or(60);
            std::thread::sleep(Duration::from_secs(secs));
        }
        Some("--fork-bomb") => fork_bomb(),
        Some("--scenario") if args.len() == 2 => serve(Path::new(&args[1]), None),
        Some("--scenario") if args.len() == 4 && args[2] == "--http" => {
            let port = args[3]
                .parse()
                .unwrap_or_else(|_| die("--http takes a port number"));
            serve(Path::new(&args[1]), Some(port))
        }
        _ => die("usage: hintcheck-fake-server --scenario FILE [--http PORT]"),
    }
    std::process::exit(0)
}

/// Lets go of the stdout pipe while the process keeps running: fd 1 becomes the write end of
/// a fresh pipe whose read end is closed, so the client reads end-of-file.
fn close_stdout() {
    if let Ok((read, write)) = rustix::pipe::pipe() {
        let _ = rustix::stdio::dup2_stdout(&write);
        drop(read);
    }
}

/// Two copies of itself, forever, until the process limit says no; then sleep.
fn fork_bomb() {
    for _ in 0..2 {
        let _ = relaunch("--fork-bomb")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
    }
    std::thread::sleep(Duration::from_secs(600));
}

/// A minimal TLS 1.2 ClientHello naming `name` in its SNI extension.
fn client_hello(name: &str) -> Vec<u8> {
    let n = name.as_bytes();
    let list_len = (n.len() + 3) as u16;
    let mut sni = vec![0, 0];
    sni.extend_from_slice(&(list_len + 2).to_be_bytes());
    sni.extend_from_slice(&list_len.to_be_bytes());
    sni.push(0);
    sni.extend_from_slice(&(n.len() as u16).to_be_bytes());
    sni.extend_from_slice(n);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[0u8; 32]);
    body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
    body.extend_from_slice(&(sni.len() as u16).to_be_bytes());
    body.extend_from_slice(&sni);
    let mut hs = vec![0x01];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(&body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend_from_slice(&hs);
    rec
}

fn load(path: &Path) -> ScenarioFile {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| die(&format!("cannot read {}: {e}", path.display())));
    let mut file: ScenarioFile =
        toml::from_str(&text).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
    let work: Vec<Step> = match file.fake.generated_call_ms {
        0 => Vec::new(),
        ms => vec![
            toml::from_str(&format!("action = \"sleep\"\nms = {ms}"))
                .unwrap_or_else(|e| die(&format!("the generated tools' step: {e}"))),
        ],
    };
    for i in 0..file.fake.generate_tools {
        file.tools.push(ToolSpec {
            name: format!("gen_{i}"),
            description: Some("A generated read-only tool.".into()),
            title: None,
            annotations: Some(toml::Value::Table(toml::map::Map::from_iter([(
                "readOnlyHint".to_string(),
                toml::Value::Boolean(true),
            )]))),
            annotations_json: None,
            input_schema: None,
            input_schema_json: None,
            tool_json: None,
            task_support: None,
            steps: work.clone(),
            result_text: None,
        });
    }
    file
}

/// Checks the fake server's part of a scenario file (`[fake]` and `[[tools]]`: their keys,
/// step actions and era) as the fake server will read it; the error carries its place in
/// `text`.
pub fn check_scenario(text: &str) -> Result<(), toml::de::Error> {
    toml::from_str::<ScenarioFile>(text).map(|_| ())
}

/// A name among `known`, or an error that lists them.
fn one_of<'de, D: serde::Deserializer<'de>>(
    d: D,
    what: &str,
    known: &[&str],
) -> Result<String, D::Error> {
    let name = String::deserialize(d)?;
    if known.contains(&name.as_str()) {
        Ok(name)
    } else {
        Err(serde::de::Error::custom(format!(
            "unknown {what} `{name}`, expected one of {}",
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

fn action_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    one_of(d, "action", ACTIONS)
}

fn era_name<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    one_of(d, "era", &["legacy", "modern", "both"])
}

fn definition(t: &ToolSpec) -> Value {
    if let Some(raw) = &t.tool_json {
        return serde_json::from_str(raw)
            .unwrap_or_else(|e| die(&format!("tool {}: tool_json: {e}", t.name)));
    }
    let mut d = Map::new();
    d.insert("name".into(), json!(t.name));
    if let Some(title) = &t.title {
        d.insert("title".into(), json!(title));
    }
    d.insert(
        "description".into(),
        json!(
            t.description
                .clone()
                .unwrap_or_else(|| format!("The {} tool.", t.name))
        ),
    );
    let schema = match (&t.input_schema_json, &t.input_schema) {
        (Some(raw), _) => serde_json::from_str(raw)
            .unwrap_or_else(|e| die(&format!("tool {}: input_schema_json: {e}", t.name))),
        (None, Some(s)) => serde_json::to_value(s)
            .unwrap_or_else(|e| die(&format!("tool {}: input_schema: {e}", t.name))),
        (None, None) => json!({"type": "object", "properties": {}}),
    };
    d.insert("inputSchema".into(), schema);
    match (&t.annotations_json, &t.annotations) {
        (Some(raw), _) => {
            d.insert(
                "annotations".into(),
                serde_json::from_str(raw)
                    .unwrap_or_else(|e| die(&format!("tool {}: annotations_json: {e}", t.name))),
            );
        }
        (None, Some(a)) => {
            d.insert(
                "annotations".into(),
                serde_json::to_value(a).unwrap_or(Value::Null),
            );
        }
        (None, None) => {}
    }
    if let Some(ts) = &t.task_support {
        d.insert("execution".into(), json!({ "taskSupport": ts }));
    }
    Value::Object(d)
}

struct Server {
    file: ScenarioFile,
    out: Box<dyn Write>,
    lines: Box<dyn Iterator<Item = std::io::Result<String>>>,
    calls: HashMap<String, u32>,
    modern: bool,
    next_request: i64,
    /// Lines read while waiting for the client's answer, handled afterwards.
    queued: std::collections::VecDeque<String>,
    /// Started slowly (`discover_delay_ms`): a modern server then refuses initialize.
    slow_start: bool,
}

impl Server {
    fn send(&mut self, v: &Value) {
        let _ = writeln!(self.out, "{v}");
        let _ = self.out.flush();
    }

    fn raw(&mut self, line: &str) {
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
    }

    fn result(&mut self, id: &Value, mut result: Value) {
        if self.modern {
            result["resultType"] = json!("complete");
        }
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    fn error(&mut self, id: &Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    /// Sends a request to the client and waits for its answer, skipping anything else.
    fn ask_client(&mut self, method: &str) -> Option<Value> {
        self.next_request += 1;
        let id = format!("fake-{}", self.next_request);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method}));
        for line in self.lines.by_ref() {
            let Ok(line) = line else { return None };
            match serde_json::from_str::<Value>(&line) {
                Ok(v) if v.get("id") == Some(&json!(id)) && v.get("method").is_none() => {
                    return Some(v);
                }
                _ => self.queued.push_back(line),
            }
        }
        None
    }

    fn next_line(&mut self) -> Option<String> {
        if let Some(l) = self.queued.pop_front() {
            return Some(l);
        }
        self.lines.next().and_then(Result::ok)
    }
}

fn serve(path: &Path, http_port: Option<u16>) {
    let file = load(path);
    let (out, lines): (
        Box<dyn Write>,
        Box<dyn Iterator<Item = std::io::Result<String>>>,
    ) = match http_port {
        Some(port) => http::listen(
            port,
            file.fake.http_faults.clone(),
            file.fake.http_sse_only,
            http::declared_headers(file.tools.iter().map(definition)),
        ),
        None => {
            let stdin: &'static std::io::Stdin = Box::leak(Box::new(std::io::stdin()));
            (Box::new(std::io::stdout()), Box::new(stdin.lock().lines()))
        }
    };
    let slow_start = file.fake.discover_delay_ms.is_some();
    let mut s = Server {
        slow_start,
        file,
        out,
        lines,
        calls: HashMap::new(),
        modern: false,
        next_request: 0,
        queued: std::collections::VecDeque::new(),
    };
    for g in s.file.fake.garbage_before_handshake.clone() {
        s.raw(&g);
    }
    for id in 1..=s.file.fake.responses_before_requests {
        s.send(&json!({"jsonrpc": "2.0", "id": id, "result": {"unrequested": true}}));
    }
    let mut list_requests = 0usize;
    if let Some(p) = s.file.fake.startup_write.clone() {
        let _ = std::fs::write(&p, "started\n");
    }
    while let Some(line) = s.next_line() {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(method) = msg
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            continue;
        };
        let Some(id) = msg.get("id").cloned() else {
            if method == "notifications/initialized" && s.file.fake.request_roots {
                let answer = s.ask_client("roots/list");
                eprintln!("roots/list answer: {}", answer.unwrap_or(Value::Null));
            }
            continue;
        };
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        let era = s.file.fake.era.clone();
        match method.as_str() {
            "server/discover" => {
                if s.file.fake.die_on_discover {
                    eprintln!("Traceback (most recent call last): unknown method server/discover");
                    std::process::exit(1);
                }
                if s.file.fake.ignore_discover {
                    continue;
                }
                if let Some(ms) = s.file.fake.discover_delay_ms.take() {
                    std::thread::sleep(Duration::from_millis(ms));
                }
                if era == "legacy" {
                    s.error(&id, -32601, "Method not found");
                } else {
                    s.modern = true;
                    let name = s.file.fake.server_name.clone();
                    s.result(
                        &id,
                        json!({
                            "supportedVersions": ["2026-07-28"],
                            "capabilities": {"tools": {}},
                            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": name, "version": "1.0.0"}},
                            "ttlMs": 60000, "cacheScope": "public"
                        }),
                    );
                }
            }
            "initialize" => {
                if s.file.fake.never_answer_initialize {
                    continue;
                }
                if era == "modern" && s.slow_start {
                    s.error(
                        &id,
                        -32022,
                        "connection is serving the 2026-07-28 protocol; the initialize handshake is not accepted",
                    );
                    continue;
                }
                if era == "modern" {
                    s.error(&id, -32601, "Method not found");
                    continue;
                }
                let asked = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("2025-11-25")
                    .to_string();
                let version = s.file.fake.protocol_version.clone().unwrap_or(asked);
                let name = s.file.fake.server_name.clone();
                s.result(
                    &id,
                    json!({"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": {"name": name, "version": "1.0.0"}}),
                );
            }
            "ping" => s.result(&id, json!({})),
            "tools/list" => {
                if s.file.fake.ping_client {
                    let _ = s.ask_client("ping");
                }
                let mut all: Vec<Value> = s.file.tools.iter().map(definition).collect();
                if s.file.fake.shifting_pages && !all.is_empty() {
                    let shift = list_requests % all.len();
                    all.rotate_left(shift);
                }
                list_requests += 1;
                let page_size = if s.file.fake.page_size == 0 {
                    all.len().max(1)
                } else {
                    s.file.fake.page_size
                };
                let start: usize = params
                    .get("cursor")
                    .and_then(Value::as_str)
                    .and_then(|c| c.strip_prefix("page-"))
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let end = (start + page_size).min(all.len());
                let mut result = json!({"tools": all[start.min(all.len())..end]});
                if s.file.fake.repeat_cursor {
                    result["nextCursor"] = json!("page-0");
                } else if end < all.len() {
                    result["nextCursor"] = json!(format!("page-{end}"));
                }
                if s.modern {
                    result["ttlMs"] = json!(60000);
                    result["cacheScope"] = json!("public");
                }
                s.result(&id, result);
            }
            "tools/call" if s.modern && s.file.fake.modern_calls_need_initialize => s.error(
                &id,
                -32002,
                "Server not initialized: initialize is required",
            ),
            "tools/call" => call(&mut s, &id, &params),
            _ => s.error(&id, -32601, &format!("Method not found: {method}")),
        }
    }
}

fn expand(template: &str, args: &Value, n: u32) -> String {
    let mut out = template.replace("{n}", &n.to_string());
    out = out.replace(
        "{time}",
        &std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos().to_string())
            .unwrap_or_default(),
    );
    // Expanded once, left to right: a value holding `{env:` is not expanded again.
    // `{envhex:NAME}` is the variable's bytes in hex.
    let mut expanded = String::new();
    let mut rest = out.as_str();
    while let Some(start) = rest.find("{env") {
        let Some(len) = rest[start..].find('}') else {
            break;
        };
        let inner = &rest[start + 1..start + len];
        let value = match inner.split_once(':') {
            Some(("env", name)) => std::env::var(name).unwrap_or_default(),
            Some(("envhex", name)) => std::env::var(name)
                .unwrap_or_default()
                .bytes()
                .map(|b| format!("{b:02x}"))
                .collect(),
            _ => rest[start..=start + len].to_string(),
        };
        expanded.push_str(&rest[..start]);
        expanded.push_str(&value);
        rest = &rest[start + len + 1..];
    }
    expanded.push_str(rest);
    out = expanded;
    while let Some(start) = out.find("{arg:") {
        let Some(len) = out[start..].find('}') else {
            break;
        };
        let name = &out[start + 5..start + len];
        let value = match args.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        };
        out.replace_range(start..start + len + 1, &value);
    }
    out
}

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn resolve(path: &str) -> PathBuf {
    match path.strip_prefix("~/") {
        Some(rest) => PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(rest),
        None => PathBuf::from(path),
    }
}

fn call(s: &mut Server, id: &Value, params: &Value) {
    let name = params
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let args = params.get("arguments").cloned().unwrap_or(json!({}));
    let Some(tool) = s.file.tools.iter().find(|t| t.name == name) else {
        s.error(id, -32602, &format!("Unknown tool: {name}"));
        return;
    };
    let steps = tool.steps.clone();
    let mut text = tool
        .result_text
        .clone()
        .unwrap_or_else(|| format!("{name} done"));
    let n = {
        let c = s.calls.entry(name.clone()).or_insert(0);
        *c += 1;
        *c
    };
    let mut is_error = false;
    let mut failures = Vec::new();
    for step in &steps {
        if step.on_call.is_some_and(|k| k != n) {
            continue;
        }
        let differs = |(name, want): (&String, &toml::Value)| {
            serde_json::to_value(want).ok().as_ref() != args.get(name)
        };
        if step.when.iter().any(differs) {
            continue;
        }
        // A tool that waits for an event that never comes: its call is never answered, while
        // the server goes on serving everything else.
        if step.action == "no_answer" {
            return;
        }
        let p = |v: &Option<String>| resolve(&expand(v.as_deref().unwrap_or(""), &args, n));
        let content = expand(step.content.as_deref().unwrap_or(""), &args, n);
        let io = match step.action.as_str() {
            "write" => std::fs::write(p(&step.path), content),
            "append" => std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p(&step.path))
                .and_then(|mut f| f.write_all(content.as_bytes())),
            "truncate" => std::fs::OpenOptions::new()
                .write(true)
                .open(p(&step.path))
                .and_then(|f| f.set_len(step.size.unwrap_or(0))),
            "delete" => {
                let target = p(&step.path);
                if target.is_dir() {
                    std::fs::remove_dir_all(target)
                } else {
                    std::fs::remove_file(target)
                }
            }
            "rename" => std::fs::rename(p(&step.from), p(&step.to)),
            "mkdir" => std::fs::create_dir_all(p(&step.path)),
            "chmod" => {
                use std::os::unix::fs::PermissionsExt;
                let mode =
                    u32::from_str_radix(step.mode.as_deref().unwrap_or("644"), 8).unwrap_or(0o644);
                std::fs::set_permissions(p(&step.path), std::fs::Permissions::from_mode(mode))
            }
            "counter" => {
                let target = p(&step.path);
                let current: u64 = std::fs::read_to_string(&target)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                    .unwrap_or(0);
                std::fs::write(target, format!("{}\n", current + 1))
            }
            "spawn_write" => relaunch("--child-write")
                .args([
                    p(&step.path).display().to_string(),
                    content,
                    step.delay_ms.unwrap_or(0).to_string(),
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .map(|_| ()),
            "spawn_daemon" => {
                use std::os::unix::process::CommandExt;
                relaunch("--linger")
                    .arg(step.seconds.unwrap_or(300).to_string())
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .process_group(0)
                    .spawn()
                    .map(|_| ())
            }
            "connect" => {
                use std::net::ToSocketAddrs;
                let host = step.host.clone().unwrap_or_else(|| "127.0.0.1".into());
                let addr = match &step.address {
                    Some(a) => expand(a, &args, n),
                    None => format!("{host}:{}", step.port.unwrap_or(9)),
                };
                let bytes = match &step.tls_sni {
                    Some(sni) => client_hello(sni),
                    None => content.clone().into_bytes(),
                };
                // Names are resolved through the system resolver (the sandbox's DNS stub).
                match addr.to_socket_addrs().map(|mut a| a.next()) {
                    Ok(Some(sa)) => {
                        std::net::TcpStream::connect_timeout(&sa, Duration::from_secs(2)).and_then(
                            |mut c| {
                                c.write_all(&bytes)?;
                                let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
                                let mut sink = [0u8; 64];
                                let _ = std::io::Read::read(&mut c, &mut sink);
                                Ok(())
                            },
                        )
                    }
                    Ok(None) => Err(std::io::Error::other(format!("{addr}: no address"))),
                    Err(e) => Err(e),
                }
            }
            // Listens on `address` and connects to that listener: a server talking to itself
            // on an address it bound (inside the sandbox any address can be bound).
            "connect_self" => {
                let addr = expand(step.address.as_deref().unwrap_or("127.0.0.1:0"), &args, n);
                std::net::TcpListener::bind(addr.as_str()).and_then(|listener| {
                    let at = listener.local_addr()?;
                    let accepting = std::thread::spawn(move || listener.accept().map(|_| ()));
                    let mut c = std::net::TcpStream::connect_timeout(&at, Duration::from_secs(2))?;
                    c.write_all(content.as_bytes())?;
                    accepting
                        .join()
                        .unwrap_or_else(|_| Err(std::io::Error::other("accept panicked")))
                })
            }
            "lookup" => {
                use std::net::ToSocketAddrs;
                let name = expand(step.name.as_deref().unwrap_or("example.test"), &args, n);
                (name.as_str(), 0).to_socket_addrs().map(|_| ())
            }
            "udp" => {
                let addr = expand(step.address.as_deref().unwrap_or("127.0.0.1:9"), &args, n);
                std::net::UdpSocket::bind("0.0.0.0:0")
                    .and_then(|s| s.send_to(content.as_bytes(), addr.as_str()).map(|_| ()))
            }
            "connect_unix" => std::os::unix::net::UnixStream::connect(p(&step.path))
                .and_then(|mut c| c.write_all(b"escaped")),
            "spawn" => {
                let argv: Vec<String> = step
                    .argv
                    .clone()
                    .unwrap_or_default()
                    .iter()
                    .map(|a| expand(a, &args, n))
                    .collect();
                let env: Vec<(String, String)> = step
                    .env
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), expand(v, &args, n)))
                    .collect();
                match argv.split_first() {
                    Some((prog, rest)) => Command::new(prog)
                        .args(rest)
                        .envs(env)
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .map(|_| ()),
                    None => Err(std::io::Error::other("spawn needs argv")),
                }
            }
            "kill_parent" => {
                // `kill -KILL $PPID` through the shell's builtin: no libc in the harness.
                let ppid = std::fs::read_to_string("/proc/self/stat")
                    .ok()
                    .and_then(|st| {
                        st.rsplit(')')
                            .next()
                            .and_then(|r| r.split_whitespace().nth(1))
                            .map(str::to_string)
                    })
                    .unwrap_or_default();
                Command::new("sh")
                    .args(["-c", &format!("kill -KILL {ppid}")])
                    .status()
                    .and_then(|st| {
                        if st.success() {
                            Ok(())
                        } else {
                            Err(std::io::Error::other(format!("kill {ppid} refused")))
                        }
                    })
            }
            "fork_bomb" => relaunch("--fork-bomb")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map(|_| ()),
            "alloc" => {
                // Touch every page so that the memory is really used.
                let total = step.bytes.unwrap_or(usize::MAX);
                let mut blocks: Vec<Vec<u8>> = Vec::new();
                let mut used = 0usize;
                while used < total {
                    let mut block = Vec::new();
                    if block.try_reserve_exact(16 << 20).is_err() {
                        break;
                    }
                    block.resize(16 << 20, 1u8);
                    used += block.len();
                    blocks.push(block);
                }
                text = format!("allocated {} MiB", used >> 20);
                Ok(())
            }
            "sleep" => {
                std::thread::sleep(Duration::from_millis(step.ms.unwrap_or(100)));
                Ok(())
            }
            "garbage" => {
                s.raw(
                    &step
                        .text
                        .clone()
                        .unwrap_or_else(|| "this is not json".into()),
                );
                Ok(())
            }
            "oversized" => {
                // Streamed in chunks: a 1 GiB line must not need 1 GiB here.
                let mut left = step.bytes.unwrap_or(1 << 20);
                let chunk = vec![b'x'; 1 << 20];
                let lock = &mut s.out;
                let mut io = Ok(());
                while left > 0 && io.is_ok() {
                    let n = left.min(chunk.len());
                    io = lock.write_all(&chunk[..n]);
                    left -= n;
                }
                io.and_then(|()| lock.write_all(b"\n"))
                    .and_then(|()| lock.flush())
            }
            "flood_stdout" | "flood_stderr" => {
                // Lines of garbage, as fast as the pipe takes them, `bytes` in all.
                let line = format!(
                    "{}\n",
                    step.text.clone().unwrap_or_else(|| "flood ".repeat(20))
                );
                let mut left = step.bytes.unwrap_or(64 << 20);
                let mut block = String::new();
                while block.len() < 1 << 16 {
                    block.push_str(&line);
                }
                let mut io = Ok(());
                while left > 0 && io.is_ok() {
                    io = if step.action == "flood_stdout" {
                        s.out.write_all(block.as_bytes())
                    } else {
                        std::io::stderr().lock().write_all(block.as_bytes())
                    };
                    left = left.saturating_sub(block.len());
                }
                io
            }
            "close_stdout" => {
                // Close stdout and keep running, answering nothing.
                let _ = s.out.flush();
                close_stdout();
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            "stderr" => {
                eprintln!("{}", step.text.clone().unwrap_or_default());
                Ok(())
            }
            "wrong_id" => {
                let wrong = match id {
                    Value::Number(n) => json!(n.as_i64().unwrap_or(0) + 1000),
                    _ => json!("not-your-id"),
                };
                s.send(&json!({"jsonrpc":"2.0","id": wrong, "result": {"content": []}}));
                return;
            }
            "exit" => std::process::exit(step.code.unwrap_or(1) as i32),
            "hang" => loop {
                std::thread::sleep(Duration::from_secs(3600));
            },
            "error" => {
                is_error = true;
                text = step.text.clone().unwrap_or_else(|| "tool failed".into());
                Ok(())
            }
            "rpc_error" => {
                let message = step
                    .message
                    .clone()
                    .unwrap_or_else(|| "Invalid params".into());
                s.error(id, step.code.unwrap_or(-32602), &message);
                return;
            }
            // Reads a whole file (or the environment variable `name`) and adds it to the
            // result, as it is (`mode` raw) or encoded (`base64`, `hex`): a tool that hands on
            // what it found.
            "reveal" => match &step.name {
                Some(variable) => Ok(std::env::var(variable).unwrap_or_default().into_bytes()),
                None => std::fs::read(p(&step.path)),
            }
            .and_then(|content| {
                let shown = match step.mode.as_deref().unwrap_or("raw") {
                    "raw" => String::from_utf8_lossy(&content).into_owned(),
                    "base64" => base64(&content),
                    "hex" => content.iter().map(|b| format!("{b:02x}")).collect(),
                    other => return Err(std::io::Error::other(format!("unknown mode {other}"))),
                };
                text.push_str(&format!("; {shown}"));
                Ok(())
            }),
            // Reads a file and adds its first line to the result: what the server could see.
            "read" => std::fs::read_to_string(p(&step.path)).map(|content| {
                let first = content.lines().next().unwrap_or_default().to_string();
                text.push_str(&format!("; read {}: {first}", p(&step.path).display()));
            }),
            // Takes an exclusive lock on a file and keeps it for the server's life.
            "flock" => std::fs::File::open(p(&step.path)).and_then(|f| {
                rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive)?;
                text.push_str(&format!("; locked {}", p(&step.path).display()));
                std::mem::forget(f);
                Ok(())
            }),
            "notify" => {
                let method = step
                    .method
                    .clone()
                    .unwrap_or_else(|| "notifications/tools/list_changed".into());
                s.send(&json!({"jsonrpc":"2.0","method": method}));
                Ok(())
            }
            other => Err(std::io::Error::other(format!("unknown action {other}"))),
        };
        if let Err(e) = io {
            failures.push(format!("{}: {e}", step.action));
        }
    }
    if !failures.is_empty() {
        is_error = true;
        text = failures.join("; ");
    }
    let mut result = json!({"content": [{"type": "text", "text": text}]});
    if is_error {
        result["isError"] = json!(true);
    }
    s.result(id, result);
}
