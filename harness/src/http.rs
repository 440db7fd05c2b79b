//! The fake server's Streamable HTTP mode: a small HTTP/1.1 front (written by hand, so that
//! hostile scenarios can break HTTP on purpose) over the same line-oriented loop as stdio.
//! Each POSTed message becomes a line of the loop's input; every line the loop writes goes
//! to the POST waiting for the response it belongs to, as server-sent events (the server's
//! own requests and notifications ride on the stream of the request in flight). The answer to
//! `initialize` carries `Mcp-Session-Id`; later requests without it get 400; `DELETE` ends the
//! session and the process. With `sse_only` it speaks the older HTTP+SSE transport
//! (2024-11-05) instead: `GET /sse` opens the one event stream, whose first event names the
//! endpoint that POSTs go to (answered `202 Accepted`); every message comes on the stream.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};

use serde_json::Value;

const SESSION_ID: &str = "fake-session-1";

/// What the loop's output is routed by.
#[derive(Default)]
struct Routes {
    /// Response id (as JSON text) → the stream of the POST that asked.
    waiting: HashMap<String, Sender<String>>,
    /// The stream of the most recent request in flight (for the server's own messages).
    current: Option<Sender<String>>,
    /// The session id was handed out.
    session: bool,
    /// The GET stream, when the client opened one (the fault `flood_stream` floods it).
    stream: Option<Sender<String>>,
}

/// The port listened on, and whether the listeners were closed (fault `close_listener`).
static PORT: AtomicU16 = AtomicU16::new(0);
static LISTENERS_CLOSED: AtomicBool = AtomicBool::new(false);

/// Answers of streams cut on purpose (fault `resumable_cut`), by the last event id they sent:
/// a GET with that `Last-Event-ID` gets the answer.
static RESUMABLE: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// Where the older transport's stream says messages go.
const LEGACY_ENDPOINT: &str = "/messages?session_id=fake-session-1";

/// Listens on `port` of 127.0.0.1 and ::1; returns the loop's output and input. Calls of
/// the tools in `faults` get the named fault instead of an answer (see [`fault`]).
pub(crate) fn listen(
    port: u16,
    faults: HashMap<String, String>,
    sse_only: bool,
    param_headers: HashMap<String, Vec<(String, String)>>,
) -> (
    Box<dyn Write>,
    Box<dyn Iterator<Item = std::io::Result<String>>>,
) {
    let faults = Arc::new(faults);
    let param_headers = Arc::new(param_headers);
    let (to_loop, from_http) = channel::<String>();
    let routes = Arc::new(Mutex::new(Routes::default()));
    PORT.store(port, Ordering::SeqCst);
    for addr in [format!("127.0.0.1:{port}"), format!("[::1]:{port}")] {
        let Ok(listener) = TcpListener::bind(&addr) else {
            continue;
        };
        let (to_loop, routes, faults) = (to_loop.clone(), routes.clone(), faults.clone());
        let param_headers = param_headers.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                if LISTENERS_CLOSED.load(Ordering::SeqCst) {
                    // The listener goes with this thread: later connections are refused.
                    break;
                }
                let (to_loop, routes, faults) = (to_loop.clone(), routes.clone(), faults.clone());
                let param_headers = param_headers.clone();
                std::thread::spawn(move || {
                    if sse_only {
                        serve_legacy(stream, &to_loop, &routes, &faults)
                    } else {
                        serve_connection(stream, &to_loop, &routes, &faults, &param_headers)
                    }
                });
            }
        });
    }
    drop(to_loop);
    (
        Box::new(Output {
            routes,
            pending: Vec::new(),
        }),
        Box::new(Input(from_http)),
    )
}

struct Input(Receiver<String>);

impl Iterator for Input {
    type Item = std::io::Result<String>;
    fn next(&mut self) -> Option<Self::Item> {
        self.0.recv().ok().map(Ok)
    }
}

/// The loop's output: each complete line goes where it belongs.
struct Output {
    routes: Arc<Mutex<Routes>>,
    pending: Vec<u8>,
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        while let Some(i) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=i).collect();
            let line = String::from_utf8_lossy(&line).trim_end().to_string();
            let id = serde_json::from_str::<Value>(&line)
                .ok()
                .filter(|m| m.get("method").is_none())
                .and_then(|m| m.get("id").map(Value::to_string));
            let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
            let to = match id.and_then(|id| routes.waiting.remove(&id)) {
                Some(s) => Some(s),
                None => routes.current.clone(),
            };
            if let Some(to) = to {
                let _ = to.send(line);
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One request's head and body.
struct Request {
    method: String,
    path: String,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut words = line.split_whitespace();
    let method = words.next()?.to_string();
    let path = words.next().unwrap_or("/").to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length.min(64 * 1024 * 1024)];
    reader.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

fn respond(stream: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
}

/// Breaks HTTP on purpose for one call (`id` as JSON text): a server error without a message,
/// an HTML page, an event stream cut mid-event, a connection closed without a word, an event
/// stream that dribbles a byte every 50 ms, an event longer than any cap before the answer.
fn fault(writer: &mut TcpStream, kind: &str, id: &str) {
    let answer = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"answered after a fault\"}}]}}}}"
    );
    let sse_head =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    let _ = match kind {
        "status_500" => {
            respond(
                writer,
                "500 Internal Server Error",
                &[("Content-Type", "text/plain")],
                b"boom",
            );
            Ok(())
        }
        "wrong_content_type" => {
            respond(
                writer,
                "200 OK",
                &[("Content-Type", "text/html")],
                b"<html><body>not MCP</body></html>",
            );
            Ok(())
        }
        "broken_stream" => writer
            .write_all(sse_head.as_bytes())
            .and_then(|()| writer.write_all(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":")),
        "dribble" => writer.write_all(sse_head.as_bytes()).and_then(|()| {
            for b in format!("data: {answer}\n\n").bytes() {
                writer.write_all(&[b])?;
                writer.flush()?;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Ok(())
        }),
        "huge_event" => writer.write_all(sse_head.as_bytes()).and_then(|()| {
            writer.write_all(b"data: ")?;
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..24 {
                writer.write_all(&chunk)?;
            }
            writer.write_all(format!("\n\ndata: {answer}\n\n").as_bytes())
        }),
        // A chunk size that is not hexadecimal, inside an event stream.
        "bad_chunk" => writer.write_all(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\ndata: {}\n\n\r\n",
        ),
        // Headers without end: 64 MiB of them, as long as the client reads.
        "huge_headers" => writer.write_all(b"HTTP/1.1 200 OK\r\n").and_then(|()| {
            let filler = format!("X-Filler: {}\r\n", "a".repeat(32 * 1024));
            for _ in 0..2048 {
                writer.write_all(filler.as_bytes())?;
            }
            Ok(())
        }),
        // The server stops listening (its accept loops are woken to end): later connections
        // are refused.
        "close_listener" => {
            LISTENERS_CLOSED.store(true, Ordering::SeqCst);
            let port = PORT.load(Ordering::SeqCst);
            for host in ["127.0.0.1", "::1"] {
                let _ = TcpStream::connect((host, port));
            }
            Ok(())
        }
        // As the 2025-11-25 revision lets a server do: a priming event with an id (and a
        // retry), then the stream is closed; the answer waits for a GET with Last-Event-ID.
        "resumable_cut" => {
            let event_id = format!("ev-{id}");
            RESUMABLE
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((event_id.clone(), answer.clone()));
            writer.write_all(
                format!("{sse_head}id: {event_id}\nretry: 20\ndata:\n\n").as_bytes(),
            )
        }
        // `close` and anything unknown: the connection ends without a word.
        _ => Ok(()),
    };
    let _ = writer.flush();
    let _ = writer.shutdown(std::net::Shutdown::Both);
}

/// The `x-mcp-header` declarations of the tools' input schemas: tool → (property, header).
pub(crate) fn declared_headers(
    tools: impl Iterator<Item = Value>,
) -> HashMap<String, Vec<(String, String)>> {
    tools
        .filter_map(|t| {
            let name = t["name"].as_str()?.to_string();
            let declared: Vec<(String, String)> = t["inputSchema"]["properties"]
                .as_object()?
                .iter()
                .filter_map(|(p, s)| Some((p.clone(), s["x-mcp-header"].as_str()?.to_string())))
                .collect();
            Some((name, declared))
        })
        .filter(|(_, d)| !d.is_empty())
        .collect()
}

/// Answers a request whose routing headers disagree with its body: 400 with the JSON-RPC
/// error -32020 the 2026-07-28 revision names for it.
fn refuse_header_mismatch(writer: &mut TcpStream, message: &Value, why: &str) {
    let body = serde_json::json!({"jsonrpc": "2.0", "id": message.get("id"),
        "error": {"code": -32020, "message": why}});
    respond(
        writer,
        "400 Bad Request",
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    );
}

/// What is wrong with a call's `Mcp-Param-*` headers, as the 2026-07-28 revision has a server
/// check them: every declared argument present in the body must be in its header (a
/// `=?base64?…?=` value decoded), with the same value.
fn param_header_mismatch(
    message: &Value,
    headers: &HashMap<String, String>,
    declared: &HashMap<String, Vec<(String, String)>>,
) -> Option<String> {
    let tool = message["params"]["name"].as_str()?;
    for (property, header) in declared.get(tool)? {
        let argument = &message["params"]["arguments"][property];
        let want = match argument {
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) => argument.to_string(),
            _ => continue,
        };
        let key = format!("mcp-param-{}", header.to_ascii_lowercase());
        let Some(got) = headers.get(&key) else {
            return Some(format!("Missing header Mcp-Param-{header}"));
        };
        let got = match got
            .strip_prefix("=?base64?")
            .and_then(|g| g.strip_suffix("?="))
        {
            Some(encoded) => match base64_decode(encoded) {
                Some(text) => text,
                None => return Some(format!("Mcp-Param-{header} is not valid base64")),
            },
            None => got.clone(),
        };
        if got != want {
            return Some(format!(
                "Header mismatch: Mcp-Param-{header} header value '{got}' does not match body value '{want}'"
            ));
        }
    }
    None
}

/// Standard base64 (with padding) to UTF-8 text.
fn base64_decode(text: &str) -> Option<String> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut bits: u32 = 0;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.trim_end_matches('=').bytes() {
        let v = ALPHABET.iter().position(|&a| a == c)? as u32;
        bits = bits << 6 | v;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    String::from_utf8(out).ok()
}

fn serve_connection(
    stream: TcpStream,
    to_loop: &Sender<String>,
    routes: &Mutex<Routes>,
    faults: &HashMap<String, String>,
    param_headers: &HashMap<String, Vec<(String, String)>>,
) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let routes_now = || routes.lock().unwrap_or_else(|p| p.into_inner());
        let accepts = request.headers.get("accept").cloned().unwrap_or_default();
        if request.method == "DELETE" {
            respond(&mut writer, "200 OK", &[], b"");
            std::process::exit(0);
        }
        if let Some(last) = request.headers.get("last-event-id") {
            let answer = RESUMABLE
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .find(|(id, _)| id == last)
                .map(|(_, a)| a.clone());
            match answer {
                Some(answer) => {
                    let body = format!("id: {last}-2\ndata: {answer}\n\n");
                    respond(
                        &mut writer,
                        "200 OK",
                        &[("Content-Type", "text/event-stream")],
                        body.as_bytes(),
                    );
                }
                None => respond(&mut writer, "404 Not Found", &[], b"no such stream"),
            }
            continue;
        }
        if request.method == "GET" && accepts.contains("text/event-stream") {
            // The stream for what the server sends outside any request.
            let (tx, rx) = channel::<String>();
            routes_now().stream = Some(tx);
            stream_lines(&mut writer, "", &rx);
            return;
        }
        if request.method != "POST" {
            respond(&mut writer, "405 Method Not Allowed", &[], b"");
            continue;
        }
        if !(accepts.contains("application/json") && accepts.contains("text/event-stream")) {
            respond(&mut writer, "406 Not Acceptable", &[], b"");
            continue;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&request.body) else {
            respond(&mut writer, "400 Bad Request", &[], b"not JSON");
            continue;
        };
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        // The 2026-07-28 revision's routing header must say what the body says.
        if let Some(named) = request.headers.get("mcp-method") {
            if !method.is_empty() && named != method {
                refuse_header_mismatch(
                    &mut writer,
                    &message,
                    &format!(
                        "Header mismatch: Mcp-Method header value '{named}' does not match body value '{method}'"
                    ),
                );
                continue;
            }
        }
        if method == "tools/call" {
            if let Some(why) = param_header_mismatch(&message, &request.headers, param_headers) {
                refuse_header_mismatch(&mut writer, &message, &why);
                continue;
            }
        }
        let session_given = request.headers.get("mcp-session-id").map(String::as_str);
        if routes_now().session && method != "initialize" && session_given != Some(SESSION_ID) {
            respond(
                &mut writer,
                "400 Bad Request",
                &[],
                b"missing or wrong Mcp-Session-Id",
            );
            continue;
        }
        let id = message.get("id").filter(|_| !method.is_empty());
        let Some(id) = id.map(Value::to_string) else {
            // A notification or the client's answer: accepted, nothing to say.
            let _ = to_loop.send(String::from_utf8_lossy(&request.body).into_owned());
            respond(&mut writer, "202 Accepted", &[], b"");
            continue;
        };
        if method == "tools/call" {
            match message["params"]["name"]
                .as_str()
                .and_then(|t| faults.get(t))
                .map(String::as_str)
            {
                // 200,000 notifications on the GET stream, then the call is answered.
                Some("flood_stream") => {
                    if let Some(stream) = routes_now().stream.clone() {
                        let note = r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"flood"}}"#;
                        for _ in 0..200_000 {
                            if stream.send(note.to_string()).is_err() {
                                break;
                            }
                        }
                    }
                }
                Some(kind) => {
                    fault(&mut writer, kind, &id);
                    return;
                }
                None => {}
            }
        }
        let (tx, rx) = channel::<String>();
        {
            let mut r = routes_now();
            r.waiting.insert(id.clone(), tx.clone());
            r.current = Some(tx);
        }
        let _ = to_loop.send(String::from_utf8_lossy(&request.body).into_owned());
        // Every message for this stream, up to and including the response.
        let head = {
            let mut r = routes_now();
            let first = method == "initialize" && !r.session;
            r.session |= first;
            first
        };
        let mut head_text = String::from(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n",
        );
        if head {
            head_text.push_str(&format!("Mcp-Session-Id: {SESSION_ID}\r\n"));
        }
        head_text.push_str("\r\n");
        if writer.write_all(head_text.as_bytes()).is_err() {
            return;
        }
        for line in rx.iter() {
            let is_response = serde_json::from_str::<Value>(&line).is_ok_and(|m| {
                m.get("method").is_none() && m.get("id").map(Value::to_string).as_ref() == Some(&id)
            });
            let event = format!("event: message\ndata: {line}\n\n");
            let chunk = format!("{:x}\r\n{event}\r\n", event.len());
            if writer.write_all(chunk.as_bytes()).is_err() {
                return;
            }
            let _ = writer.flush();
            if is_response {
                break;
            }
        }
        let _ = writer.write_all(b"0\r\n\r\n");
        let _ = writer.flush();
    }
}

/// An event stream (chunked) that starts with `first` (an event, or nothing) and carries each
/// line of `rx` as a message event, until every sender is gone or the client.
fn stream_lines(writer: &mut TcpStream, first: &str, rx: &Receiver<String>) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
    let first = if first.is_empty() {
        String::new()
    } else {
        chunk(first)
    };
    if writer
        .write_all(format!("{head}{first}").as_bytes())
        .is_err()
    {
        return;
    }
    let _ = writer.flush();
    for line in rx.iter() {
        let event = format!("event: message\ndata: {line}\n\n");
        if writer.write_all(chunk(&event).as_bytes()).is_err() {
            return;
        }
        let _ = writer.flush();
    }
    let _ = writer.write_all(b"0\r\n\r\n");
    let _ = writer.flush();
}

/// One chunk of a chunked body.
fn chunk(text: &str) -> String {
    format!("{:x}\r\n{text}\r\n", text.len())
}

/// The older HTTP+SSE transport: `GET /sse` is the stream, POSTs to its endpoint are only
/// accepted. The fault `end_stream` ends the stream when its tool is called (a server that
/// drops its client), before any answer.
fn serve_legacy(
    stream: TcpStream,
    to_loop: &Sender<String>,
    routes: &Mutex<Routes>,
    faults: &HashMap<String, String>,
) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let routes_now = || routes.lock().unwrap_or_else(|p| p.into_inner());
        if request.method == "GET" && request.path == "/sse" {
            let (tx, rx) = channel::<String>();
            {
                let mut r = routes_now();
                r.current = Some(tx);
                r.session = true;
            }
            let endpoint = format!("event: endpoint\ndata: {LEGACY_ENDPOINT}\n\n");
            stream_lines(&mut writer, &endpoint, &rx);
            return;
        }
        if request.method != "POST" || request.path != LEGACY_ENDPOINT {
            respond(&mut writer, "404 Not Found", &[], b"Cannot POST here");
            continue;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&request.body) else {
            respond(&mut writer, "400 Bad Request", &[], b"not JSON");
            continue;
        };
        if message["method"] == "tools/call" {
            if let Some(kind) = message["params"]["name"]
                .as_str()
                .and_then(|t| faults.get(t))
            {
                if kind == "end_stream" {
                    // The stream's only sender goes: the stream ends.
                    routes_now().current = None;
                    respond(&mut writer, "202 Accepted", &[], b"Accepted");
                    continue;
                }
                let id = message.get("id").map(Value::to_string).unwrap_or_default();
                fault(&mut writer, kind, &id);
                return;
            }
        }
        let _ = to_loop.send(String::from_utf8_lossy(&request.body).into_owned());
        respond(&mut writer, "202 Accepted", &[], b"Accepted");
    }
}
