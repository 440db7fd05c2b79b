//! The Streamable HTTP transport, bridged to the line-oriented session: the session writes
//! JSON-RPC lines and reads lines as it does from a stdio server, and this bridge turns each
//! line it writes into a POST to the server's endpoint (on a connection made inside the
//! sandbox's network namespace, see [`crate::sandbox::connector`]) and each message the
//! server answers with (a JSON body, or every event of an SSE stream: responses, the server's
//! own requests and notifications) into a line the session reads. The session keeps all
//! judgement (classification, transcript, anomalies); what only HTTP can get wrong (a status,
//! a content type, a broken stream) is told to the session as an error response for the
//! request it concerned, marked as the transport's, and counted in [`TransportNotes`].
//! Bodies and SSE lines are capped like stdio lines. Each POST names its method, tool and
//! version in headers, and a call's `x-mcp-header` arguments in `Mcp-Param-*` headers (learnt
//! from the tool list as it passes). A stream that ends before its answer but named its
//! events is resumed with `Last-Event-ID`. A server that offers only the older HTTP+SSE
//! transport (2024-11-05) is found by the spec's fallback and spoken to in that.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// How the bridge reaches the server's port: a TCP connection to it (made where the server
/// listens), or the error (`ConnectionRefused` while it does not listen yet).
pub type Connect = Arc<
    dyn Fn(u16) -> Pin<Box<dyn Future<Output = std::io::Result<tokio::net::TcpStream>> + Send>>
        + Send
        + Sync,
>;

/// Where and how to reach the server.
#[derive(Debug, Clone)]
pub struct HttpTarget {
    /// The port it listens on.
    pub port: u16,
    /// The MCP endpoint's path (`/mcp`).
    pub path: String,
    /// Headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Most bytes of one body or one SSE event.
    pub max_message_bytes: usize,
    /// How long the server may take to listen on its port, from the bridge's start.
    pub listen_timeout: Duration,
}

/// What the transport saw that the JSON-RPC lines cannot show (statuses, content types,
/// broken streams), for the report.
pub type TransportNotes = Arc<Mutex<Vec<String>>>;

/// Most transport notes kept.
const MAX_NOTES: usize = 50;

/// The session's ends of the bridge: (what it writes requests to, what it reads messages from).
pub struct Bridge {
    /// Where the session writes.
    pub to_server: Box<dyn AsyncWrite + Send + Unpin>,
    /// Where the session reads.
    pub from_server: Box<dyn AsyncRead + Send + Unpin>,
    /// What the transport saw.
    pub notes: TransportNotes,
    /// Ends when the bridge has ended the HTTP session after the session closed its end.
    pub done: tokio::task::JoinHandle<()>,
    /// Set once the server turned out to speak only the older HTTP+SSE transport.
    pub legacy: Arc<AtomicBool>,
}

/// Starts the bridge; `keep` (the server's stdin, say) is held until the session closes its
/// end, when the bridge ends the HTTP session (`DELETE`) and lets it go.
pub fn start(target: HttpTarget, connect: Connect, keep: Option<Box<dyn Send>>) -> Bridge {
    let (session_end, bridge_end) = tokio::io::duplex(256 * 1024);
    let (session_read, session_write) = tokio::io::split(session_end);
    let (bridge_read, bridge_write) = tokio::io::split(bridge_end);
    let notes: TransportNotes = Arc::new(Mutex::new(Vec::new()));
    let legacy = Arc::new(AtomicBool::new(false));
    let state = Arc::new(State {
        target,
        connect,
        out: tokio::sync::Mutex::new(Box::new(bridge_write)),
        session: Mutex::new(HttpSession::default()),
        notes: notes.clone(),
        legacy: legacy.clone(),
        legacy_stream: Mutex::new(None),
    });
    let done = tokio::spawn(run(state, bridge_read, keep));
    Bridge {
        to_server: Box::new(session_write),
        from_server: Box::new(session_read),
        notes,
        done,
        legacy,
    }
}

/// How long the older transport's event stream may take to name its endpoint.
const ENDPOINT_WAIT: Duration = Duration::from_secs(5);

/// Longest endpoint the older transport's stream may name.
const MAX_ENDPOINT: usize = 2048;

/// What the bridge keeps between requests.
#[derive(Default)]
struct HttpSession {
    /// `Mcp-Session-Id` the server gave with its answer to `initialize`.
    id: Option<String>,
    /// The negotiated version, sent as `MCP-Protocol-Version` after the handshake.
    protocol_version: Option<String>,
    /// Requests in flight: id (as JSON text) → method.
    methods: HashMap<String, String>,
    /// Whether a connection ever succeeded (before that, refusals mean "not listening yet").
    listening: bool,
    /// The older HTTP+SSE transport (2024-11-05), once the server turned out to offer only
    /// that: where messages are POSTed (the endpoint its event stream named).
    legacy_endpoint: Option<String>,
    /// Whether that event stream is still open (the answers come only on it).
    legacy_open: bool,
    /// Whether the older transport was tried (once).
    legacy_tried: bool,
    /// Whether the server hung up (see [`State::hang_up`]).
    hung_up: bool,
    /// Tools (by name) whose listed input schema asks for arguments mirrored into
    /// `Mcp-Param-*` headers.
    param_headers: HashMap<String, Vec<crate::mcp::tool::ParamHeader>>,
}

/// Most tools whose `Mcp-Param-*` declarations are kept.
const MAX_PARAM_TOOLS: usize = 10_000;

struct State {
    target: HttpTarget,
    connect: Connect,
    out: tokio::sync::Mutex<Box<dyn AsyncWrite + Send + Unpin>>,
    session: Mutex<HttpSession>,
    notes: TransportNotes,
    /// Shared with [`Bridge::legacy`].
    legacy: Arc<AtomicBool>,
    /// The task relaying the older transport's event stream.
    legacy_stream: Mutex<Option<tokio::task::AbortHandle>>,
}

impl State {
    fn session(&self) -> std::sync::MutexGuard<'_, HttpSession> {
        self.session.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, what: String) {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        if notes.len() < MAX_NOTES {
            notes.push(what);
        }
    }

    /// Hands one message to the session, as one line.
    async fn deliver(&self, text: &[u8]) {
        // A message is one line for the session: JSON is written compactly; anything else
        // keeps its bytes on one line, for the session to call garbage.
        let mut line = match serde_json::from_slice::<Value>(text) {
            Ok(v) => v.to_string().into_bytes(),
            Err(_) => text
                .iter()
                .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
                .collect(),
        };
        line.push(b'\n');
        let mut out = self.out.lock().await;
        let _ = out.write_all(&line).await;
        let _ = out.flush().await;
    }

    /// Tells the session that request `id` failed in the transport (no JSON-RPC answer can
    /// come), so that it does not wait for its timeout; noted for the report.
    async fn fail(&self, id: &Value, why: String) {
        self.note(why.clone());
        self.answer_for(id, why).await;
    }

    /// Answers request `id` with an error that says it is the transport's.
    async fn answer_for(&self, id: &Value, why: String) {
        self.session().methods.remove(&id.to_string());
        let answer = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32000, "message": format!("hintcheck (HTTP transport): {why}")},
        });
        self.deliver(answer.to_string().as_bytes()).await;
    }

    /// The server is gone for its client (it stopped listening, or ended the older
    /// transport's stream): the session sees it hang up, as when a stdio server closes its
    /// stdout (requests waiting end, and a later call starts a fresh server). Said once.
    async fn hang_up(&self, why: String) {
        if std::mem::replace(&mut self.session().hung_up, true) {
            return;
        }
        self.note(why);
        let _ = self.out.lock().await.shutdown().await;
    }

    /// A connection to the server's port; while it has never listened, refusals are retried
    /// until the listen timeout; a refusal after it listened is the server hanging up.
    async fn connection(&self) -> std::io::Result<tokio::net::TcpStream> {
        let deadline = tokio::time::Instant::now() + self.target.listen_timeout;
        loop {
            match (self.connect)(self.target.port).await {
                Ok(s) => {
                    self.session().listening = true;
                    return Ok(s);
                }
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && !self.session().listening
                        && tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => {
                    if e.kind() == std::io::ErrorKind::ConnectionRefused && self.session().listening
                    {
                        self.hang_up(format!(
                            "the server stopped listening on port {}",
                            self.target.port
                        ))
                        .await;
                    }
                    return Err(e);
                }
            }
        }
    }
}

async fn run(
    state: Arc<State>,
    from_session: impl AsyncRead + Send + Unpin + 'static,
    keep: Option<Box<dyn Send>>,
) {
    let mut lines = BufReader::new(from_session).lines();
    let mut posts = tokio::task::JoinSet::new();
    while let Ok(Some(line)) = lines.next_line().await {
        let message: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        let request_id = match (message.get("method"), message.get("id")) {
            (Some(Value::String(method)), Some(id)) => {
                state
                    .session()
                    .methods
                    .insert(id.to_string(), method.clone());
                Some(id.clone())
            }
            _ => None,
        };
        // A notification or an answer is delivered before what follows it (the server reads
        // `notifications/initialized` before the first request); requests go side by side (a
        // call that waits must not hold up a ping).
        if request_id.is_none() {
            // The stream for what the server sends outside any request (list changes, its
            // own requests), where the server offers one: open before the server hears
            // `initialized`, after which it may announce things at once.
            // (The older transport's stream, open since the handshake, is that stream.)
            if message.get("method").and_then(Value::as_str) == Some("notifications/initialized")
                && state.session().legacy_endpoint.is_none()
            {
                let (open, opened) = tokio::sync::oneshot::channel();
                let s = state.clone();
                posts.spawn(async move { listen(&s, open).await });
                let _ = tokio::time::timeout(Duration::from_secs(1), opened).await;
            }
            post(&state, line, None).await;
            continue;
        }
        let s = state.clone();
        posts.spawn(async move { post(&s, line, request_id).await });
        // Finished posts are collected as we go (their answers are already delivered).
        while posts.try_join_next().is_some() {}
    }
    // The session closed its end: the posts in flight are abandoned, the HTTP session ended
    // (the older transport's by closing its stream).
    posts.abort_all();
    if let Some(stream) = state
        .legacy_stream
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    {
        stream.abort();
    }
    if state.session().id.is_some() {
        let _ = tokio::time::timeout(Duration::from_secs(2), delete(&state)).await;
    }
    drop(keep);
}

/// The request for one line of the session, with the headers of the HTTP session so far.
fn request(
    state: &State,
    method: hyper::Method,
    body: Full<Bytes>,
) -> Option<hyper::Request<Full<Bytes>>> {
    let target = &state.target;
    let uri = state
        .session()
        .legacy_endpoint
        .clone()
        .unwrap_or_else(|| target.path.clone());
    let mut b = hyper::Request::builder()
        .method(method)
        .uri(uri)
        .header(hyper::header::HOST, format!("127.0.0.1:{}", target.port))
        .header(hyper::header::ACCEPT, "application/json, text/event-stream")
        .header(hyper::header::CONTENT_TYPE, "application/json");
    {
        let session = state.session();
        // Values the server chose are sent only when they can be header values (a request
        // that cannot be built would never be sent, and its caller would wait in vain).
        let valid = |v: &str| hyper::header::HeaderValue::from_str(v).is_ok();
        if let Some(id) = session.id.as_deref().filter(|v| valid(v)) {
            b = b.header("Mcp-Session-Id", id);
        }
        // (The older transport has no such header.)
        if let Some(v) = session
            .protocol_version
            .as_deref()
            .filter(|v| valid(v) && session.legacy_endpoint.is_none())
        {
            b = b.header("MCP-Protocol-Version", v);
        }
    }
    for (k, v) in &target.headers {
        b = b.header(k.as_str(), v.as_str());
    }
    b.body(body).ok()
}

/// The headers a message names itself by (the 2026-07-28 revision requires them, earlier
/// servers ignore them): `Mcp-Method`, `Mcp-Name` (the tool or prompt called, the resource
/// read), and `MCP-Protocol-Version` from the version the message carries in `_meta` (before
/// the handshake settled one; after it, the negotiated version is sent with every request).
/// A value that cannot be a header value (a control character in a tool's name) is left out.
fn routing_headers(message: &Value) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let Some(method) = message.get("method").and_then(Value::as_str) else {
        return out;
    };
    out.push(("mcp-method", method.to_string()));
    let params = &message["params"];
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str(),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => {
            params["uri"].as_str()
        }
        _ => None,
    };
    if let Some(name) = name {
        out.push(("mcp-name", name.to_string()));
    }
    if let Some(v) = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str() {
        out.push(("mcp-protocol-version", v.to_string()));
    }
    out
}

/// The `Mcp-Param-*` headers of a tool call: each argument the tool's listed schema declares
/// with `x-mcp-header`, when the call carries it (null and absent arguments are left out).
fn param_headers(state: &State, message: &Value) -> Vec<(String, String)> {
    if message.get("method").and_then(Value::as_str) != Some("tools/call") {
        return Vec::new();
    }
    let params = &message["params"];
    let Some(tool) = params["name"].as_str() else {
        return Vec::new();
    };
    let session = state.session();
    let Some(declared) = session.param_headers.get(tool) else {
        return Vec::new();
    };
    declared
        .iter()
        .filter_map(|d| {
            let value = crate::mcp::tool::param_header_value(&params["arguments"][&d.property])?;
            Some((
                format!("mcp-param-{}", d.header.to_ascii_lowercase()),
                value,
            ))
        })
        .collect()
}

/// Sends `request` on a fresh connection; the response with the connection's driver running.
async fn send(
    state: &State,
    request: hyper::Request<Full<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    let stream = state
        .connection()
        .await
        .map_err(|e| format!("cannot connect to port {}: {e}", state.target.port))?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .max_buf_size(state.target.max_message_bytes.max(64 * 1024))
        .handshake(io)
        .await
        .map_err(|e| format!("HTTP handshake failed: {e}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    match sender.send_request(request).await {
        Ok(response) => Ok(response),
        Err(e) => {
            // A connection that broke may be the server going away: whether it still listens
            // (a refusal now is it hanging up, and the session hears that first).
            let _ = state.connection().await;
            Err(format!("the server did not answer the POST: {e}"))
        }
    }
}

/// POSTs one line and delivers what comes back.
async fn post(state: &Arc<State>, line: String, request_id: Option<Value>) {
    let message: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
    let (legacy, legacy_open) = {
        let session = state.session();
        (session.legacy_endpoint.is_some(), session.legacy_open)
    };
    if legacy && !legacy_open {
        if let Some(id) = &request_id {
            state
                .answer_for(id, "the server's event stream has ended".into())
                .await;
        }
        return;
    }
    let Some(request) = post_request(state, line.clone(), &message) else {
        return;
    };
    let fail = |why: String| fail_or_note(state, request_id.as_ref(), why);
    let response = match send(state, request).await {
        Ok(r) => r,
        Err(why) => return fail(why).await,
    };
    let status = response.status();
    // A session id is given with the answer to `initialize` (a refusal may carry one that
    // names no session: the Python SDK's answer to a request before `initialize` does).
    let initializing = request_id.as_ref().is_some_and(|id| {
        state
            .session()
            .methods
            .get(&id.to_string())
            .map(String::as_str)
            == Some("initialize")
    });
    // A server that refuses the handshake's POST may speak the older transport (the spec's
    // backwards compatibility: 400, 404 or 405, then a GET for its event stream).
    if initializing
        && !legacy
        && matches!(status.as_u16(), 400 | 404 | 405)
        && open_legacy(state).await
    {
        return Box::pin(post(state, line, request_id)).await;
    }
    // With the older transport a POST is only accepted: its answer comes on the stream.
    if legacy && status.is_success() {
        return;
    }
    if let Some(id) = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .filter(|_| initializing && status.is_success())
    {
        state.session().id = Some(id.to_string());
    }
    let content_type = response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if status == hyper::StatusCode::ACCEPTED || status == hyper::StatusCode::NO_CONTENT {
        if request_id.is_some() {
            fail(format!(
                "the server answered a request with {status} and no message"
            ))
            .await;
        }
        return;
    }
    let mut body = response.into_body();
    if content_type.starts_with("text/event-stream") {
        relay_stream(state, &mut body, request_id.as_ref(), status).await;
        return;
    }
    // One JSON body (or whatever the server sent instead), capped.
    let Some(text) = read_capped(state, &mut body).await else {
        return fail(format!(
            "a response body longer than {} bytes",
            state.target.max_message_bytes
        ))
        .await;
    };
    deliver_body(state, status, &content_type, &text, request_id.as_ref()).await;
}

/// The POST of one line, with the headers the spec asks for (routing, `Mcp-Param-*`).
fn post_request(
    state: &Arc<State>,
    line: String,
    message: &Value,
) -> Option<hyper::Request<Full<Bytes>>> {
    let mut request = request(state, hyper::Method::POST, Full::new(Bytes::from(line)))?;
    for (name, value) in routing_headers(message) {
        if let Ok(value) = hyper::header::HeaderValue::from_str(&value) {
            request.headers_mut().insert(name, value);
        }
    }
    for (name, value) in param_headers(state, message) {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(name.as_bytes()),
            hyper::header::HeaderValue::from_str(&value),
        ) {
            request.headers_mut().insert(name, value);
        }
    }
    Some(request)
}

/// The request failed with `why`: it is answered with that error (a notification's failure
/// is noted).
async fn fail_or_note(state: &State, request_id: Option<&Value>, why: String) {
    match request_id {
        Some(id) => state.fail(id, why).await,
        None => state.note(why),
    }
}

/// Relays an event stream until it answers `request_id`, resuming it where it named its
/// events; a stream that ends without the answer fails the request.
async fn relay_stream(
    state: &State,
    body: &mut hyper::body::Incoming,
    request_id: Option<&Value>,
    status: hyper::StatusCode,
) {
    let mut events = SseParser::new(state.target.max_message_bytes);
    let mut answered = relay_parsed(state, body, request_id, &mut events).await;
    // A stream that ended before the answer but named its events is resumed (the
    // 2025-11-25 revision lets a server close it on purpose and expect that).
    let mut resumed = 0;
    while !answered && request_id.is_some() && resumed < MAX_RESUMES {
        let Some(last) = events.last_id.clone() else {
            break;
        };
        resumed += 1;
        tokio::time::sleep(events.retry.min(MAX_RETRY_WAIT)).await;
        let Some(mut resumed_body) = resume(state, &last).await else {
            break;
        };
        events = events.resumed();
        answered = relay_parsed(state, &mut resumed_body, request_id, &mut events).await;
    }
    if !answered && request_id.is_some() {
        let why = format!("the event stream ended without the answer (HTTP {status})");
        fail_or_note(state, request_id, why).await;
    }
}

/// The response body, or `None` past the message cap (a broken body is noted and what came
/// is kept).
async fn read_capped(state: &State, body: &mut hyper::body::Incoming) -> Option<Vec<u8>> {
    let mut text: Vec<u8> = Vec::new();
    let mut capped = false;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                if let Ok(data) = frame.into_data() {
                    if text.len() + data.len() > state.target.max_message_bytes {
                        capped = true;
                        break;
                    }
                    text.extend_from_slice(&data);
                }
            }
            Err(e) => {
                state.note(format!("the response body broke: {e}"));
                break;
            }
        }
    }
    (!capped).then_some(text)
}

/// Delivers a response body to the session: an answer (or messages) as they are; a refusal
/// at the HTTP level as the request's error answer; anything that does not answer the
/// request fails it, so that nobody waits for a response that cannot come.
async fn deliver_body(
    state: &State,
    status: hyper::StatusCode,
    content_type: &str,
    text: &[u8],
    request_id: Option<&Value>,
) {
    let is_json = content_type.starts_with("application/json");
    if !is_json && status.is_success() {
        state.note(format!(
            "HTTP {status} with content type {:?}",
            if content_type.is_empty() {
                "(none)"
            } else {
                content_type
            }
        ));
    }
    if text.is_empty() {
        if request_id.is_some() {
            fail_or_note(
                state,
                request_id,
                format!("HTTP {status} with an empty body"),
            )
            .await;
        }
        return;
    }
    let answers = is_answer_to(text, request_id);
    if !status.is_success() && !answers {
        // A refusal at the HTTP level (the spec's 400 for a request before `initialize`, a
        // 404 for an unknown session, a 500): the request is answered with it, and the body
        // (an error with id null, typically) is not a message of the exchange. A server error
        // is noted; a refusal is the server's answer, judged like any error answer.
        let said = serde_json::from_slice::<Value>(text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(text).chars().take(200).collect());
        let why = format!("HTTP {status}: {said}");
        match request_id {
            Some(id) if status.is_server_error() => state.fail(id, why).await,
            Some(id) => state.answer_for(id, why).await,
            None => state.note(why),
        }
        return;
    }
    remember_answer(state, text);
    state.deliver(text).await;
    // A success whose body does not answer the request the POST carried: the request is
    // answered for it so that nobody waits for a response that cannot come.
    if request_id.is_some() && !answers {
        let why = format!("HTTP {status} with a body that does not answer the request");
        fail_or_note(state, request_id, why).await;
    }
}

/// A GET that asks for an event stream (at `path`, else the endpoint), with the headers of
/// the HTTP session so far.
fn stream_request(state: &State, path: Option<&str>) -> Option<hyper::Request<Full<Bytes>>> {
    let mut request = request(state, hyper::Method::GET, Full::new(Bytes::new()))?;
    if let Some(path) = path {
        *request.uri_mut() = path.parse::<hyper::Uri>().ok()?;
    }
    let headers = request.headers_mut();
    headers.remove(hyper::header::CONTENT_TYPE);
    headers.insert(
        hyper::header::ACCEPT,
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    Some(request)
}

/// The GET stream: every event the server sends on it goes to the session, until the server
/// ends it (a server without one answers 405, which the spec allows).
async fn listen(state: &State, opened: tokio::sync::oneshot::Sender<()>) {
    let Some(request) = stream_request(state, None) else {
        return;
    };
    let Ok(response) = send(state, request).await else {
        return;
    };
    if !response.status().is_success() || !is_event_stream(&response) {
        return;
    }
    let _ = opened.send(());
    relay_events(state, &mut response.into_body(), None).await;
}

/// Most times one request's stream is resumed.
const MAX_RESUMES: usize = 3;

/// Longest wait a server's `retry:` may ask for before a stream is resumed.
const MAX_RETRY_WAIT: Duration = Duration::from_secs(1);

/// The continuation of a stream after its event `last` (a GET with `Last-Event-ID`), when the
/// server gives one.
async fn resume(state: &State, last: &str) -> Option<hyper::body::Incoming> {
    let mut request = stream_request(state, None)?;
    request.headers_mut().insert(
        "last-event-id",
        hyper::header::HeaderValue::from_str(last).ok()?,
    );
    let response = send(state, request).await.ok()?;
    if !response.status().is_success() || !is_event_stream(&response) {
        state.note(format!(
            "a stream could not be resumed after event {last:?} (HTTP {})",
            response.status()
        ));
        return None;
    }
    Some(response.into_body())
}

/// Hands every event of an event stream to the session, until the stream ends or breaks, or
/// until the answer to `until` (a request's id) came (the stream has nothing more for that
/// request); whether it came.
async fn relay_events(
    state: &State,
    body: &mut hyper::body::Incoming,
    until: Option<&Value>,
) -> bool {
    relay_parsed(
        state,
        body,
        until,
        &mut SseParser::new(state.target.max_message_bytes),
    )
    .await
}

/// [`relay_events`] with a parser that has already read the stream's first bytes.
async fn relay_parsed(
    state: &State,
    body: &mut hyper::body::Incoming,
    until: Option<&Value>,
    events: &mut SseParser,
) -> bool {
    let mut answered = false;
    while !answered {
        let data = match body.frame().await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
            Some(Err(e)) => {
                state.note(format!("the event stream broke: {e}"));
                break;
            }
            None => break,
        };
        for event in events.feed(&data) {
            answered |= deliver_event(state, &event, until).await;
        }
        for why in events.take_problems() {
            state.note(why);
        }
    }
    answered
}

/// Hands one event's message to the session; whether it answered `until`. An event without
/// data (a stream's priming event, kept for resumption) carries no message, nor does the older
/// transport's `endpoint` event.
async fn deliver_event(state: &State, event: &SseEvent, until: Option<&Value>) -> bool {
    if event.data.iter().all(u8::is_ascii_whitespace) || event.name.as_deref() == Some("endpoint") {
        return false;
    }
    remember_answer(state, &event.data);
    state.deliver(&event.data).await;
    is_answer_to(&event.data, until)
}

/// Tries the older HTTP+SSE transport (2024-11-05) once, as the spec's backwards
/// compatibility says: a GET on the endpoint (then on `/sse`, where such servers listen by
/// convention) whose event stream begins with an `endpoint` event naming where messages are
/// POSTed. Whether the server speaks it; its stream is then relayed to the session until it
/// ends, which ends the session's reading as a closed stdout would.
async fn open_legacy(state: &Arc<State>) -> bool {
    if std::mem::replace(&mut state.session().legacy_tried, true) {
        return false;
    }
    let mut paths = vec![state.target.path.clone()];
    if state.target.path != "/sse" {
        paths.push("/sse".into());
    }
    for path in paths {
        let Some(request) = stream_request(state, Some(&path)) else {
            continue;
        };
        let Ok(response) = send(state, request).await else {
            continue;
        };
        if !response.status().is_success() || !is_event_stream(&response) {
            continue;
        }
        let mut body = response.into_body();
        let mut events = SseParser::new(state.target.max_message_bytes.min(MAX_ENDPOINT));
        let first = tokio::time::timeout(ENDPOINT_WAIT, async {
            loop {
                match body.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            let got = events.feed(&data);
                            if !got.is_empty() {
                                return Some(got);
                            }
                        }
                    }
                    _ => return None,
                }
            }
        })
        .await
        .ok()
        .flatten();
        let Some(mut got) = first else { continue };
        let endpoint = got.remove(0);
        if endpoint.name.as_deref() != Some("endpoint") {
            continue;
        }
        let Some(target) = endpoint_target(&path, &endpoint.data) else {
            state.note(format!(
                "the event stream at {path} named an endpoint that is not a path on the server: {:?}",
                String::from_utf8_lossy(&endpoint.data).chars().take(200).collect::<String>()
            ));
            return false;
        };
        {
            let mut session = state.session();
            session.legacy_endpoint = Some(target);
            session.legacy_open = true;
        }
        state.legacy.store(true, Ordering::SeqCst);
        // Later events may be longer than an endpoint.
        events.max = state.target.max_message_bytes;
        let s = state.clone();
        let relay = tokio::spawn(async move {
            for event in got {
                deliver_event(&s, &event, None).await;
            }
            relay_parsed(&s, &mut body, None, &mut events).await;
            // The stream was the connection.
            s.session().legacy_open = false;
            s.hang_up("the server ended its event stream (HTTP+SSE transport)".into())
                .await;
        });
        *state
            .legacy_stream
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(relay.abort_handle());
        return true;
    }
    false
}

/// Where the older transport's `endpoint` event says messages go, as a request target on the
/// server's port: an absolute path, the path of a URL (hintcheck reaches only the server's
/// port inside the sandbox), or a path relative to the stream's. `None` for anything else.
fn endpoint_target(stream_path: &str, data: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(data).ok()?.trim();
    if text.is_empty() || text.len() > MAX_ENDPOINT {
        return None;
    }
    let url = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"));
    let target = match url {
        Some(rest) => rest
            .find('/')
            .map_or("/".to_string(), |i| rest[i..].to_string()),
        None if text.starts_with('/') => text.to_string(),
        None => {
            let dir = &stream_path[..stream_path.rfind('/').map_or(0, |i| i + 1)];
            format!("/{}{text}", dir.trim_start_matches('/'))
        }
    };
    let uri = target.parse::<hyper::Uri>().ok()?;
    (uri.authority().is_none() && uri.path().starts_with('/')).then_some(target)
}

/// Whether a response carries an event stream.
fn is_event_stream<B>(response: &hyper::Response<B>) -> bool {
    response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// Whether `event` (a JSON-RPC message) is the response to `id`.
fn is_answer_to(event: &[u8], id: Option<&Value>) -> bool {
    let Some(id) = id else { return false };
    serde_json::from_slice::<Value>(event).is_ok_and(|m| {
        m.get("id") == Some(id) && (m.get("result").is_some() || m.get("error").is_some())
    })
}

/// Keeps what later requests' headers need from an answer: the protocol version an
/// `initialize` result names, and the `x-mcp-header` declarations of listed tools.
fn remember_answer(state: &State, message: &[u8]) {
    let Ok(m) = serde_json::from_slice::<Value>(message) else {
        return;
    };
    let Some(id) = m.get("id") else { return };
    let mut session = state.session();
    let Some(method) = session.methods.remove(&id.to_string()) else {
        return;
    };
    if method == "initialize" {
        if let Some(v) = m["result"]["protocolVersion"].as_str() {
            session.protocol_version = Some(v.to_string());
        }
    }
    if method == "tools/list" {
        for tool in m["result"]["tools"].as_array().into_iter().flatten() {
            let Some(name) = tool["name"].as_str() else {
                continue;
            };
            let declared = crate::mcp::tool::param_headers(&tool["inputSchema"]).0;
            if !declared.is_empty() && session.param_headers.len() < MAX_PARAM_TOOLS {
                session.param_headers.insert(name.to_string(), declared);
            }
        }
    }
}

/// Ends the HTTP session (its id is among the request's headers).
async fn delete(state: &State) {
    let Some(mut request) = request(state, hyper::Method::DELETE, Full::new(Bytes::new())) else {
        return;
    };
    request.headers_mut().remove(hyper::header::CONTENT_TYPE);
    let _ = send(state, request).await;
}

/// The server's stdout and stderr as one log (with HTTP its stdout carries no messages).
pub fn merged_log(
    a: impl AsyncRead + Send + Unpin + 'static,
    b: impl AsyncRead + Send + Unpin + 'static,
) -> Box<dyn AsyncRead + Send + Unpin> {
    let (reader, writer) = tokio::io::duplex(64 * 1024);
    let writer = Arc::new(tokio::sync::Mutex::new(writer));
    for source in [
        Box::new(a) as Box<dyn AsyncRead + Send + Unpin>,
        Box::new(b),
    ] {
        let writer = writer.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(source).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let mut w = writer.lock().await;
                if w.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                    break;
                }
            }
        });
    }
    Box::new(reader)
}

/// One server-sent event: its type (`event:`, when named) and its `data` lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event's type, when the stream named one (`message`, `endpoint`).
    pub name: Option<String>,
    /// Its data.
    pub data: Vec<u8>,
}

/// Server-sent events, parsed incrementally: the `data` lines of each event joined, its type
/// kept, other fields ignored; a line longer than the cap is dropped with a note.
pub struct SseParser {
    max: usize,
    line: Vec<u8>,
    discarding: bool,
    data: Vec<u8>,
    has_data: bool,
    name: Option<String>,
    problems: Vec<String>,
    /// The id of the last event that named one (for resuming the stream).
    pub last_id: Option<String>,
    /// How long the server asks a client to wait before it resumes (`retry:`).
    pub retry: Duration,
}

impl SseParser {
    /// A parser that keeps events of at most `max` bytes.
    pub fn new(max: usize) -> SseParser {
        SseParser {
            max,
            line: Vec::new(),
            discarding: false,
            data: Vec::new(),
            has_data: false,
            name: None,
            problems: Vec::new(),
            last_id: None,
            retry: Duration::ZERO,
        }
    }

    /// A parser for the continuation of this stream: nothing half-read, the last event id
    /// and the retry kept.
    pub fn resumed(&self) -> SseParser {
        SseParser {
            last_id: self.last_id.clone(),
            retry: self.retry,
            ..SseParser::new(self.max)
        }
    }

    /// Feeds bytes; returns the events they completed. Lines are found with `memchr` and
    /// copied a slice at a time (a 24 MiB event is a few copies, not 24 million pushes).
    pub fn feed(&mut self, mut bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        while !bytes.is_empty() {
            let end = memchr::memchr(b'\n', bytes);
            let piece = &bytes[..end.unwrap_or(bytes.len())];
            if !self.discarding {
                if self.line.len() + piece.len() > self.max {
                    self.dropped("an event-stream line");
                    self.line.clear();
                    self.discarding = true;
                } else {
                    self.line.extend_from_slice(piece);
                }
            }
            let Some(end) = end else { break };
            bytes = &bytes[end + 1..];
            let line = std::mem::take(&mut self.line);
            if std::mem::take(&mut self.discarding) {
                continue;
            }
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            self.line_done(line, &mut events);
        }
        events
    }

    fn line_done(&mut self, line: &[u8], events: &mut Vec<SseEvent>) {
        if line.is_empty() {
            let name = self.name.take();
            if std::mem::take(&mut self.has_data) {
                events.push(SseEvent {
                    name,
                    data: std::mem::take(&mut self.data),
                });
            }
            return;
        }
        if line.starts_with(b":") {
            return;
        }
        let (field, value) = match line.iter().position(|&c| c == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        // An id names the stream's position (an id with a NUL is ignored, as the standard
        // says); it is kept whether or not the event carries data.
        if field == b"id" && !value.contains(&0) && value.len() <= 256 {
            self.last_id = Some(String::from_utf8_lossy(value).into_owned());
        }
        if field == b"retry" {
            if let Some(ms) = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
            {
                self.retry = Duration::from_millis(ms);
            }
        }
        if field == b"event" {
            self.name = Some(String::from_utf8_lossy(&value[..value.len().min(100)]).into_owned());
        }
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            if self.data.len() + value.len() > self.max {
                self.dropped("an event");
                self.data.clear();
                self.has_data = false;
                return;
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
    }

    fn dropped(&mut self, what: &str) {
        self.problems
            .push(format!("{what} longer than {} bytes was dropped", self.max));
    }

    /// What was wrong in the stream so far.
    pub fn take_problems(&mut self) -> Vec<String> {
        std::mem::take(&mut self.problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_their_method_tool_and_version_in_headers() {
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "read_note", "arguments": {},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}});
        assert_eq!(
            routing_headers(&call),
            [
                ("mcp-method", "tools/call".to_string()),
                ("mcp-name", "read_note".to_string()),
                ("mcp-protocol-version", "2026-07-28".to_string()),
            ]
        );
        let read = json!({"jsonrpc": "2.0", "id": 4, "method": "resources/read", "params": {"uri": "file:///a"}});
        assert_eq!(
            routing_headers(&read)[1],
            ("mcp-name", "file:///a".to_string())
        );
        assert!(routing_headers(&json!({"jsonrpc": "2.0", "id": 5, "result": {}})).is_empty());
    }

    #[test]
    fn the_older_transports_endpoint_is_a_path_on_the_server() {
        let at = |data: &str| endpoint_target("/sse", data.as_bytes());
        assert_eq!(
            at("/message?sessionId=a1").as_deref(),
            Some("/message?sessionId=a1")
        );
        assert_eq!(
            at("messages/?session_id=b2").as_deref(),
            Some("/messages/?session_id=b2")
        );
        assert_eq!(
            endpoint_target("/v1/sse", b"post").as_deref(),
            Some("/v1/post")
        );
        assert_eq!(
            at("http://localhost:3001/message?sessionId=c").as_deref(),
            Some("/message?sessionId=c")
        );
        assert_eq!(at("http://localhost:3001").as_deref(), Some("/"));
        for bad in ["", "/a b", "/a\u{7f}", &format!("/{}", "x".repeat(3000))] {
            assert_eq!(at(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn events_are_cut_at_blank_lines_and_capped() {
        let mut p = SseParser::new(64);
        let mut got = p.feed(b"event: message\r\ndata: {\"a\":");
        assert!(got.is_empty());
        got.extend(p.feed(b"1}\r\n\r\n: a comment\n\ndata: x\ndata: y\n\n"));
        let data: Vec<_> = got.iter().map(|e| e.data.clone()).collect();
        assert_eq!(data, [b"{\"a\":1}".to_vec(), b"x\ny".to_vec()]);
        assert_eq!(got[0].name.as_deref(), Some("message"));
        assert_eq!(got[1].name, None, "a type names one event only");
        let long = format!("data: {}\n\ndata: ok\n\n", "z".repeat(100));
        let got = p.feed(long.as_bytes());
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].data, b"ok");
        // Ids and retry are kept for resuming, also from an event without data.
        assert_eq!(p.last_id, None);
        p.feed(b"id: ev-7\nretry: 250\ndata:\n\n: keep-alive\n\n");
        assert_eq!(p.last_id.as_deref(), Some("ev-7"));
        assert_eq!(p.retry, Duration::from_millis(250));
        let next = p.resumed();
        assert_eq!(next.last_id.as_deref(), Some("ev-7"));
        assert_eq!(p.take_problems().len(), 1);
    }

    #[test]
    fn events_do_not_depend_on_how_the_stream_is_cut() {
        let stream = format!(
            "data: {}\r\n\ndata: {}\n\nevent: e\ndata: a\ndata: b\n\n:c\ndata: {}\n\n",
            "x".repeat(15),
            "y".repeat(17),
            "w".repeat(9)
        );
        let whole = SseParser::new(22).feed(stream.as_bytes());
        // A line of exactly the cap is kept ("data: ", 15 bytes and the CR); one more is dropped.
        assert_eq!(whole.len(), 3, "{whole:?}");
        assert_eq!(whole[0].data.len(), 15);
        for size in [1, 2, 3, 7, 22, 23] {
            let mut p = SseParser::new(22);
            let cut: Vec<_> = stream
                .as_bytes()
                .chunks(size)
                .flat_map(|piece| p.feed(piece))
                .collect();
            assert_eq!(cut, whole, "pieces of {size}");
            assert_eq!(p.take_problems().len(), 1, "pieces of {size}");
        }
    }
}
