//! `hintcheck guard --transport http`: guard serves MCP's Streamable HTTP to the host on a
//! loopback address and speaks stdio to the server, as it does without it. Each session
//! (an `initialize` without `Mcp-Session-Id`) gets a server of its own in a sandbox of its own,
//! so that its calls, windows and ids are its own; `DELETE` or the server's end closes it.
//! Requests without a session (the stateless era, 2026-07-28, or a client that never asked
//! for one) share one server, started at the first of them; their ids (and progress tokens)
//! are renamed on the way in so that two hosts' ids never meet in it, and named back on the
//! way out. Every message otherwise passes unchanged and goes through the same proxy as over
//! stdio ([`super::proxy`]): a request's window opens before its server sees it, a call that
//! must wait is held, the answer closes the window and is sent on the request's own stream
//! (an SSE stream, or a JSON body for a host that accepts no stream).

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Bytes, Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::proxy::{self, MAX_LINE, Members, ToHost, ToServer};
use super::{GuardError, GuardOptions, Launched, Prepared};

/// The endpoint's path.
pub const ENDPOINT: &str = "/mcp";

/// The address guard listens on unless `--listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7447";

/// How a message waits for a host that does not read its stream before that stream is
/// given up.
const STALL: Duration = Duration::from_secs(30);

/// How often an SSE stream with nothing to say sends a comment (proxies and clients that
/// time out idle streams keep it).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Messages kept for a session's GET stream while none is open (and the most bytes they
/// hold): a server that talks to nobody cannot fill guard's memory.
const QUEUE_CAP: usize = 64;
const QUEUE_BYTES: usize = 16 << 20;

/// A session without requests in flight or an open stream for this long may be ended to make
/// room for a new one when `--max-sessions` are open.
const EVICTABLE_AFTER: Duration = Duration::from_secs(60);

/// JSON-RPC code of an answer guard gives when the server ended before answering.
const SERVER_ENDED: i64 = -32000;

/// JSON-RPC code of a header that contradicts the body (2026-07-28, `HeaderMismatchError`).
const HEADER_MISMATCH: i64 = -32020;

/// `--transport http`'s options.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen (loopback only).
    pub listen: String,
    /// Most sessions (each a server) at once.
    pub max_sessions: usize,
}

/// Binds the listener before anything starts, so that a taken port or a non-loopback
/// address is an error the user sees at once.
pub fn bind(h: &HttpOptions) -> Result<std::net::TcpListener, GuardError> {
    let fail = |detail: String| GuardError::Listen {
        listen: h.listen.clone(),
        detail,
    };
    let addr: SocketAddr = h
        .listen
        .parse()
        .map_err(|_| fail("not an address and port, as in 127.0.0.1:7447 or [::1]:7447".into()))?;
    if !addr.ip().is_loopback() {
        return Err(fail(
            "guard serves without authentication, so it listens on loopback only (127.0.0.1 or ::1); put an authenticating proxy in front to serve further".into(),
        ));
    }
    if h.max_sessions == 0 {
        return Err(fail("--max-sessions must be at least 1".into()));
    }
    let listener = std::net::TcpListener::bind(addr).map_err(|e| fail(e.to_string()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| fail(e.to_string()))?;
    Ok(listener)
}

/// Serves until SIGINT or SIGTERM; then ends every server. Returns 0.
pub(super) async fn serve(
    o: &GuardOptions,
    p: Arc<Prepared>,
    listener: std::net::TcpListener,
) -> Result<i32, GuardError> {
    let listener = tokio::net::TcpListener::from_std(listener).map_err(GuardError::Runtime)?;
    let local = listener.local_addr().map_err(GuardError::Runtime)?;
    let max_sessions = match &o.transport {
        super::Transport::Http(h) => h.max_sessions,
        super::Transport::Stdio => 1,
    };
    let front = Arc::new(Front {
        o: o.clone(),
        p,
        max_sessions,
        sessions: Mutex::new(HashMap::new()),
        starting: Default::default(),
        running: Default::default(),
        closing: AtomicBool::new(false),
        stateless: tokio::sync::Mutex::new(None),
        ended: Mutex::new(Vec::new()),
    });
    eprintln!("hintcheck guard: serving MCP (Streamable HTTP) at http://{local}{ENDPOINT}");
    let tasks = tokio::task::LocalSet::new();
    tasks
        .run_until(async {
            let mut stop = crate::interrupt::watch();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let front = front.clone();
                        tokio::task::spawn_local(async move {
                            let service = hyper::service::service_fn(move |req| {
                                let front = front.clone();
                                async move { Ok::<_, Infallible>(front.handle(req).await) }
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .keep_alive(true)
                                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                                .await;
                        });
                    }
                    _ = stop.wait_for(|s| *s) => break,
                }
            }
            front.end_all().await;
        })
        .await;
    Ok(0)
}

/// The response body: a whole JSON body, nothing, or an SSE stream.
type Body = UnsyncBoxBody<Bytes, Infallible>;

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// A response with a JSON-RPC error body.
fn rpc_error(status: StatusCode, id: Option<&str>, code: i64, message: &str) -> Response<Body> {
    let id: Value = id
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null);
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": code, "message": message},
    });
    let mut r = Response::new(full(serde_json::to_vec(&body).unwrap_or_default()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn status_only(status: StatusCode) -> Response<Body> {
    let mut r = Response::new(full(Bytes::new()));
    *r.status_mut() = status;
    r
}

/// Everything the endpoint serves.
struct Front {
    o: GuardOptions,
    p: Arc<Prepared>,
    max_sessions: usize,
    sessions: Mutex<HashMap<String, Arc<Link>>>,
    /// Sessions whose server is starting (they count against `--max-sessions`).
    starting: std::sync::atomic::AtomicUsize,
    /// Sessions' servers alive, those ending included (they count too).
    running: Arc<std::sync::atomic::AtomicUsize>,
    /// Guard is ending: no server starts any more.
    closing: AtomicBool,
    /// The server shared by requests without a session, once one came.
    stateless: tokio::sync::Mutex<Option<Arc<Link>>>,
    /// The tasks of every server started, awaited at the end.
    ended: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

fn header_text<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether `host` (a Host header's or an Origin's authority, port and all) names this
/// machine's loopback: a page on another site that the browser resolves to 127.0.0.1 (DNS
/// rebinding) names its own host, and is refused.
fn names_loopback(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        authority.split(':').next().unwrap_or("")
    };
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Front {
    async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if req.uri().path() != ENDPOINT {
            return rpc_error(
                StatusCode::NOT_FOUND,
                None,
                -32600,
                &format!("not found: the MCP endpoint is {ENDPOINT}"),
            );
        }
        if let Some(refusal) = self.foreign(req.headers()) {
            return refusal;
        }
        match *req.method() {
            Method::POST => self.post(req).await,
            Method::GET => self.get(req.headers()),
            Method::DELETE => self.delete(req.headers()).await,
            _ => {
                let mut r = status_only(StatusCode::METHOD_NOT_ALLOWED);
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
                r
            }
        }
    }

    /// A request whose Host or Origin is not this machine's loopback (a web page's request
    /// made through DNS rebinding): 403.
    fn foreign(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        if let Some(host) = header_text(headers, "host") {
            if !names_loopback(host) {
                return Some(rpc_error(
                    StatusCode::FORBIDDEN,
                    None,
                    -32600,
                    "forbidden: the Host header does not name this machine's loopback",
                ));
            }
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let authority = origin
                .to_str()
                .ok()
                .and_then(|o| o.split_once("://"))
                .map(|(_, rest)| rest.split('/').next().unwrap_or(""));
            if !authority.is_some_and(names_loopback) {
                return Some(rpc_error(
                    StatusCode::FORBIDDEN,
                    None,
                    -32600,
                    "forbidden: the Origin is not this machine's loopback",
                ));
            }
        }
        None
    }

    fn session_of(&self, headers: &HeaderMap) -> Result<Option<Arc<Link>>, Box<Response<Body>>> {
        let Some(id) = header_text(headers, "mcp-session-id") else {
            return Ok(None);
        };
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        match sessions.get(id).filter(|l| l.alive.load(Ordering::Acquire)) {
            Some(link) => Ok(Some(link.clone())),
            None => Err(Box::new(rpc_error(
                StatusCode::NOT_FOUND,
                None,
                -32001,
                "session not found (it ended, or guard restarted): start a new one with initialize",
            ))),
        }
    }

    async fn post(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let headers = req.headers().clone();
        let content_type = header_text(&headers, "content-type").unwrap_or("");
        if !content_type
            .to_ascii_lowercase()
            .starts_with("application/json")
        {
            return rpc_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                None,
                -32600,
                "the body must be application/json",
            );
        }
        let accept = header_text(&headers, "accept")
            .unwrap_or("*/*")
            .to_ascii_lowercase();
        let any = accept.contains("*/*");
        let stream = any || accept.contains("text/event-stream");
        if !stream && !accept.contains("application/json") {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                None,
                -32600,
                "Accept must allow application/json or text/event-stream",
            );
        }
        let body = match Limited::new(req.into_body(), MAX_LINE).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => {
                return rpc_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    None,
                    -32600,
                    &format!("the body is over {MAX_LINE} bytes, or was cut off"),
                );
            }
        };
        // A JSON text holds a line break only as whitespace between tokens: the message
        // becomes one line for the server, every token as the host wrote it.
        let line: Vec<u8> = body
            .iter()
            .map(|b| if matches!(b, b'\n' | b'\r') { b' ' } else { *b })
            .collect();
        let Some(messages) = messages(&line) else {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                None,
                -32700,
                "parse error: the body is not a JSON-RPC message or a batch of them",
            );
        };
        let initialize = messages
            .iter()
            .any(|m| method(m).as_deref() == Some("initialize"));
        let link = match self.session_of(&headers) {
            Err(not_found) => return *not_found,
            Ok(Some(_)) if initialize => {
                return rpc_error(
                    StatusCode::BAD_REQUEST,
                    None,
                    -32600,
                    "initialize inside a session: start a new session without Mcp-Session-Id",
                );
            }
            Ok(Some(link)) => {
                if let Some(bad) = link.version_mismatch(&headers) {
                    return bad;
                }
                link
            }
            Ok(None) if initialize => match self.new_session().await {
                Ok(link) => link,
                Err(r) => return *r,
            },
            Ok(None) => {
                if let Some(bad) = header_mismatch(&headers, &messages) {
                    return bad;
                }
                match self.stateless_link().await {
                    Ok(link) => link,
                    Err(r) => return *r,
                }
            }
        };
        if link.rename
            && messages
                .iter()
                .any(|m| method(m).as_deref() == Some("notifications/cancelled"))
        {
            // A request without a session cannot be told from another host's of the same id:
            // the shared server's requests run to their answer (each under its own window).
            return status_only(StatusCode::ACCEPTED);
        }
        link.touch();
        let (line, receiver) = link.admit(&line, &messages, stream);
        drop(messages);
        let forward = {
            let mut w = link.window.lock().unwrap_or_else(|p| p.into_inner());
            proxy::from_host_line(&mut w, line)
        };
        // Written by a task of its own: a host that hangs up while its body is being written
        // cannot leave half a line in the server's stdin (its window already open).
        let to_server = link.to_server.clone();
        let written = tokio::task::spawn_local(async move {
            for line in forward {
                if !proxy::send(&to_server, &line).await {
                    break;
                }
            }
        });
        let _ = written.await;
        let Some(receiver) = receiver else {
            let mut r = status_only(StatusCode::ACCEPTED);
            link.name_session(&mut r);
            return r;
        };
        let mut r = if stream {
            sse(receiver)
        } else {
            json_body(receiver).await
        };
        link.name_session(&mut r);
        r
    }

    fn get(&self, headers: &HeaderMap) -> Response<Body> {
        let link = match self.session_of(headers) {
            Err(r) => return *r,
            // The stateless era has no stream of its own: 405, as the spec has it.
            Ok(None) => {
                let mut r = status_only(StatusCode::METHOD_NOT_ALLOWED);
                r.headers_mut()
                    .insert(header::ALLOW, HeaderValue::from_static("POST"));
                return r;
            }
            Ok(Some(link)) => link,
        };
        let accept = header_text(headers, "accept").unwrap_or("");
        if !accept.contains("text/event-stream") {
            return rpc_error(
                StatusCode::NOT_ACCEPTABLE,
                None,
                -32600,
                "Accept must allow text/event-stream",
            );
        }
        link.touch();
        match link.open_standalone() {
            Some(receiver) => sse(receiver),
            None => rpc_error(
                StatusCode::CONFLICT,
                None,
                -32600,
                "this session's stream is already open",
            ),
        }
    }

    async fn delete(&self, headers: &HeaderMap) -> Response<Body> {
        match self.session_of(headers) {
            Err(r) => *r,
            Ok(None) => status_only(StatusCode::METHOD_NOT_ALLOWED),
            Ok(Some(link)) => {
                if let Some(id) = &link.session {
                    self.sessions
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(id);
                }
                link.stop();
                status_only(StatusCode::OK)
            }
        }
    }

    /// A new session and its server; when `--max-sessions` are open, the one idle longest
    /// (nothing in flight, no stream open, for a minute at least) makes room, or 503.
    async fn new_session(self: &Arc<Self>) -> Result<Arc<Link>, Box<Response<Body>>> {
        let taken = || self.running.load(Ordering::Acquire) + self.starting.load(Ordering::Acquire);
        let evicted = {
            let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
            sessions.retain(|_, l| l.alive.load(Ordering::Acquire));
            let mut evicted = false;
            if taken() >= self.max_sessions {
                let idlest = sessions
                    .iter()
                    .filter(|(_, l)| l.evictable())
                    .min_by_key(|(_, l)| l.last_used())
                    .map(|(k, _)| k.clone());
                match idlest.and_then(|k| sessions.remove(&k)) {
                    Some(l) => {
                        eprintln!(
                            "hintcheck guard: session {} ended to make room (--max-sessions {})",
                            l.label(),
                            self.max_sessions
                        );
                        l.stop();
                        evicted = true;
                    }
                    None => {
                        let mut r = rpc_error(
                            StatusCode::SERVICE_UNAVAILABLE,
                            None,
                            -32000,
                            &format!(
                                "{} sessions are open and busy (--max-sessions): try again later",
                                self.max_sessions
                            ),
                        );
                        r.headers_mut()
                            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
                        return Err(Box::new(r));
                    }
                }
            }
            // The slot is taken before the server starts (other initializes see it).
            self.starting.fetch_add(1, Ordering::AcqRel);
            evicted
        };
        if evicted {
            // The session that makes room is gone only once its server is.
            let deadline = Instant::now() + Duration::from_secs(10);
            while taken() > self.max_sessions && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let id = session_id();
        let started = self.start_link(Some(id.clone())).await;
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        self.starting.fetch_sub(1, Ordering::AcqRel);
        let link = started?;
        sessions.insert(id, link.clone());
        Ok(link)
    }

    /// The server of the requests without a session, started at the first of them (again
    /// when it ended).
    async fn stateless_link(self: &Arc<Self>) -> Result<Arc<Link>, Box<Response<Body>>> {
        let mut shared = self.stateless.lock().await;
        if let Some(link) = shared.as_ref().filter(|l| l.alive.load(Ordering::Acquire)) {
            return Ok(link.clone());
        }
        let link = self.start_link(None).await?;
        *shared = Some(link.clone());
        Ok(link)
    }

    async fn start_link(
        self: &Arc<Self>,
        session: Option<String>,
    ) -> Result<Arc<Link>, Box<Response<Body>>> {
        if self.closing.load(Ordering::Acquire) {
            return Err(Box::new(rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                -32000,
                "hintcheck guard is ending",
            )));
        }
        let label = session.clone().unwrap_or_else(|| "stateless".into());
        let Launched {
            pipes,
            window,
            ending,
        } = match super::launch(&self.o, &self.p, Some(label.clone())).await {
            Ok(l) => l,
            Err(e) => {
                let message = crate::text::error_chain(&e);
                eprintln!("hintcheck guard: {message}");
                return Err(Box::new(rpc_error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    None,
                    -32603,
                    &format!("hintcheck guard could not start the server: {message}"),
                )));
            }
        };
        if self.closing.load(Ordering::Acquire) {
            // Guard began to end while this server started: it ends with the rest.
            let _ = ending.end().await;
            return Err(Box::new(rpc_error(
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                -32000,
                "hintcheck guard is ending",
            )));
        }
        let running = session.is_some().then(|| {
            self.running.fetch_add(1, Ordering::AcqRel);
            self.running.clone()
        });
        if session.is_none() {
            // Several hosts share this server: no host's listing relaxes another's hints.
            window.lock().unwrap_or_else(|p| p.into_inner()).share();
        }
        let to_server: ToServer = Arc::new(tokio::sync::Mutex::new(Some(Box::new(pipes.stdin))));
        let stderr = super::copy_stderr(pipes.stderr);
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let link = Arc::new(Link {
            rename: session.is_none(),
            session,
            to_server: to_server.clone(),
            window: window.clone(),
            routes: Mutex::new(Routes::default()),
            protocol: Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
            alive: AtomicBool::new(true),
            stop: Mutex::new(Some(stop)),
            next: AtomicU64::new(1),
        });
        let on_violation = self.o.on_violation;
        let (front, held) = (self.clone(), link.clone());
        let task = tokio::task::spawn_local(async move {
            let reader = proxy::server_to_host(
                pipes.stdout,
                LinkHost(held.clone()),
                to_server.clone(),
                window,
                on_violation,
            );
            tokio::select! {
                () = reader => {}
                _ = stopped => {}
            }
            held.alive.store(false, Ordering::Release);
            let _ = tokio::time::timeout(Duration::from_millis(200), async {
                *to_server.lock().await = None;
            })
            .await;
            let code = ending.end().await;
            held.fail_pending(code);
            if let Some(id) = &held.session {
                let mut sessions = front.sessions.lock().unwrap_or_else(|p| p.into_inner());
                if sessions.get(id).is_some_and(|l| Arc::ptr_eq(l, &held)) {
                    sessions.remove(id);
                }
            }
            let _ = tokio::time::timeout(Duration::from_millis(200), stderr).await;
            if let Some(running) = running {
                running.fetch_sub(1, Ordering::AcqRel);
            }
        });
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        ended.retain(|t| !t.is_finished());
        ended.push(task);
        Ok(link)
    }

    /// Ends every server and waits for each to be gone.
    async fn end_all(&self) {
        self.closing.store(true, Ordering::Release);
        // Sessions still starting see the flag after their launch and end by themselves, or
        // were entered before it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.starting.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut links: Vec<Arc<Link>> = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, l)| l)
            .collect();
        links.extend(self.stateless.lock().await.take());
        for l in &links {
            l.stop();
        }
        let tasks: Vec<_> = self
            .ended
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    }
}

/// A fresh session id: 128 random bits in hex.
fn session_id() -> String {
    let mut bytes = [0u8; 16];
    if rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).is_err() {
        // No getrandom: the clock and a counter (ids need only be unguessable to other
        // local users, who cannot read guard's memory either way).
        static N: AtomicU64 = AtomicU64::new(0);
        let t = crate::text::unix_ms_now() ^ u64::from(std::process::id()) << 32;
        bytes[..8].copy_from_slice(&t.to_le_bytes());
        bytes[8..].copy_from_slice(&N.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The checks of the stateless era (2026-07-28) on a request without a session: a
/// `MCP-Protocol-Version`, `Mcp-Method` or `Mcp-Name` header that contradicts the body is a
/// 400 with `HeaderMismatchError`, as the server itself would have answered had it read the
/// headers.
fn header_mismatch(headers: &HeaderMap, messages: &[Members<'_>]) -> Option<Response<Body>> {
    let [m] = messages else { return None };
    let id = m.get("id").map(|r| r.get());
    let params = members_of(m.get("params").copied());
    let bad = |what: String| {
        Some(rpc_error(
            StatusCode::BAD_REQUEST,
            id,
            HEADER_MISMATCH,
            &format!("header mismatch: {what}"),
        ))
    };
    if let (Some(header), Some(body)) = (
        header_text(headers, "mcp-protocol-version"),
        members_of(params.as_ref().and_then(|p| p.get("_meta").copied())).and_then(|meta| {
            string_of(meta.get("io.modelcontextprotocol/protocolVersion").copied())
        }),
    ) {
        if header != body {
            return bad(format!(
                "MCP-Protocol-Version {header} but the request's _meta says {body}"
            ));
        }
    }
    let method = method(m);
    if let (Some(header), Some(body)) = (header_text(headers, "mcp-method"), method.as_deref()) {
        if header != body {
            return bad(format!(
                "Mcp-Method {header} but the body's method is {body}"
            ));
        }
    }
    let named = params.as_ref().and_then(|p| {
        let key = match method.as_deref() {
            Some("tools/call" | "prompts/get") => "name",
            Some("resources/read") => "uri",
            _ => return None,
        };
        string_of(p.get(key).copied())
    });
    if let (Some(header), Some(body)) = (header_text(headers, "mcp-name"), named) {
        if header != body {
            return bad(format!("Mcp-Name {header} but the body names {body}"));
        }
    }
    None
}

/// The messages of a body or a line: one object, or a non-empty batch of objects; `None`
/// for anything else.
fn messages(line: &[u8]) -> Option<Vec<Members<'_>>> {
    if let Ok(m) = serde_json::from_slice::<Members<'_>>(line) {
        return Some(vec![m]);
    }
    let items = serde_json::from_slice::<Vec<&RawValue>>(line).ok()?;
    let parsed: Vec<Members<'_>> = items
        .iter()
        .map(|item| serde_json::from_str::<Members<'_>>(item.get()))
        .collect::<Result<_, _>>()
        .ok()?;
    (!parsed.is_empty()).then_some(parsed)
}

fn members_of(raw: Option<&RawValue>) -> Option<Members<'_>> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

fn string_of(raw: Option<&RawValue>) -> Option<String> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

fn method(m: &Members<'_>) -> Option<String> {
    string_of(m.get("method").copied())
}

/// A value's id text (`7`, `"abc"`), as the window keys calls.
fn key_of(raw: &RawValue) -> Option<String> {
    serde_json::from_str::<Value>(raw.get())
        .ok()
        .filter(|v| v.is_string() || v.is_number())
        .map(|v| proxy::id_text(&v))
}

/// Where `raw` (a value borrowed from `line`) lies in it.
fn spot(line: &[u8], raw: &RawValue) -> Range<usize> {
    let start = raw.get().as_ptr() as usize - line.as_ptr() as usize;
    start..start + raw.get().len()
}

/// `line` with each range replaced by its text.
fn splice(line: &[u8], mut edits: Vec<(Range<usize>, String)>) -> Vec<u8> {
    if edits.is_empty() {
        return line.to_vec();
    }
    edits.sort_by_key(|(r, _)| r.start);
    let mut out = Vec::with_capacity(line.len() + 64);
    let mut at = 0;
    for (range, text) in edits {
        if range.start < at || range.end > line.len() {
            continue;
        }
        out.extend_from_slice(&line[at..range.start]);
        out.extend_from_slice(text.as_bytes());
        at = range.end;
    }
    out.extend_from_slice(&line[at..]);
    out
}

/// The progress token a request asks for (`params._meta.progressToken`).
fn progress_token<'a>(m: &Members<'a>) -> Option<&'a RawValue> {
    members_of(m.get("params").copied())
        .and_then(|p| members_of(p.get("_meta").copied()))
        .and_then(|meta| meta.get("progressToken").copied())
}

/// One server behind the endpoint: a session's, or the stateless requests'.
struct Link {
    /// The session's id; `None` for the stateless server.
    session: Option<String>,
    /// Ids and progress tokens are renamed on the way in (the stateless server, where
    /// several hosts' requests meet).
    rename: bool,
    to_server: ToServer,
    window: Arc<Mutex<super::policy::Window>>,
    routes: Mutex<Routes>,
    /// The version the session's `initialize` settled on.
    protocol: Mutex<Option<String>>,
    last_used: Mutex<Instant>,
    alive: AtomicBool,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    next: AtomicU64,
}

/// Where the server's messages go.
#[derive(Default)]
struct Routes {
    /// Requests of the host not answered yet, by their id as the server sees it.
    pending: HashMap<String, Pending>,
    /// Progress tokens as the server sees them → the request's key in `pending`.
    tokens: HashMap<String, String>,
    /// Open POST streams.
    streams: HashMap<u64, Stream>,
    next_stream: u64,
    /// The session's GET stream.
    standalone: Option<Outbox>,
    /// What waits for a GET stream, and its bytes.
    queue: VecDeque<Vec<u8>>,
    queued_bytes: usize,
    /// Messages nothing could take (said once on stderr).
    dropped: u64,
}

struct Pending {
    stream: u64,
    /// The host's own id (JSON text) when it was renamed.
    host_id: Option<String>,
    /// The host's own progress token and the token's key as the server sees it.
    host_token: Option<(String, String)>,
    initialize: bool,
}

struct Stream {
    outbox: Outbox,
    /// Answers still due on it.
    due: usize,
    /// An SSE stream (it can carry the server's own requests and notifications); a JSON
    /// body carries answers only.
    events: bool,
}

/// The most bytes a stream holds for a host that reads slower than the server writes; past
/// it, the server's lines wait (a session's) or the stream is closed (the shared server's,
/// whose other hosts must not wait).
const STREAM_BYTES: usize = MAX_LINE + (1 << 20);

/// The sending end of a stream: its messages, and the bytes they may hold.
#[derive(Clone)]
struct Outbox {
    sender: mpsc::UnboundedSender<Vec<u8>>,
    budget: Arc<tokio::sync::Semaphore>,
}

/// The receiving end of a stream.
struct Inbox {
    receiver: mpsc::UnboundedReceiver<Vec<u8>>,
    budget: Arc<tokio::sync::Semaphore>,
}

/// What a message costs of a stream's budget.
fn weight(line: &[u8]) -> u32 {
    (line.len() + 64).min(STREAM_BYTES) as u32
}

fn stream_pair() -> (Outbox, Inbox) {
    let (sender, receiver) = mpsc::unbounded_channel();
    let budget = Arc::new(tokio::sync::Semaphore::new(STREAM_BYTES));
    (
        Outbox {
            sender,
            budget: budget.clone(),
        },
        Inbox { receiver, budget },
    )
}

impl Outbox {
    fn is_closed(&self) -> bool {
        self.sender.is_closed()
    }

    /// Queues `line` without waiting; false when the host went away or the stream is full.
    fn offer(&self, line: Vec<u8>) -> bool {
        match self.budget.try_acquire_many(weight(&line)) {
            Ok(permit) => {
                permit.forget();
                self.sender.send(line).is_ok()
            }
            Err(_) => false,
        }
    }

    /// Queues `line`, waiting up to `patience` for room; false when the host went away or
    /// did not read meanwhile.
    async fn send(&self, line: Vec<u8>, patience: Duration) -> bool {
        let room = tokio::time::timeout(patience, self.budget.acquire_many(weight(&line)));
        tokio::select! {
            permit = room => match permit {
                Ok(Ok(permit)) => {
                    permit.forget();
                    self.sender.send(line).is_ok()
                }
                _ => false,
            },
            // The host hung up: its stream's room never comes back.
            () = self.sender.closed() => false,
        }
    }
}

impl Inbox {
    async fn recv(&mut self) -> Option<Vec<u8>> {
        let line = self.receiver.recv().await?;
        self.budget.add_permits(weight(&line) as usize);
        Some(line)
    }
}

/// Where one message of the server goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Target {
    Stream(u64),
    Unrelated,
}

impl Link {
    fn label(&self) -> &str {
        self.session.as_deref().unwrap_or("stateless")
    }

    fn touch(&self) {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    fn last_used(&self) -> Instant {
        *self.last_used.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn evictable(&self) -> bool {
        let routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        // A request whose host went away holds nothing open.
        let waited_for = routes.pending.values().any(|p| {
            routes
                .streams
                .get(&p.stream)
                .is_some_and(|s| !s.outbox.is_closed())
        });
        !waited_for
            && routes.standalone.as_ref().is_none_or(Outbox::is_closed)
            && self.last_used().elapsed() >= EVICTABLE_AFTER
    }

    fn stop(&self) {
        if let Some(stop) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = stop.send(());
        }
    }

    /// The session's id on a response.
    fn name_session(&self, r: &mut Response<Body>) {
        if let Some(id) = self
            .session
            .as_deref()
            .and_then(|s| HeaderValue::from_str(s).ok())
        {
            r.headers_mut().insert("mcp-session-id", id);
        }
    }

    /// A request of the session naming another protocol version than its `initialize`
    /// settled on: 400.
    fn version_mismatch(&self, headers: &HeaderMap) -> Option<Response<Body>> {
        let header = header_text(headers, "mcp-protocol-version")?;
        let settled = self
            .protocol
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()?;
        (header != settled).then(|| {
            rpc_error(
                StatusCode::BAD_REQUEST,
                None,
                -32600,
                &format!("MCP-Protocol-Version {header} is not this session's version ({settled})"),
            )
        })
    }

    /// Registers the requests of a host's body before the server can answer them; returns
    /// the line as the server is to see it (ids renamed on the stateless server) and the
    /// receiving end of its answers (none when it holds no request: 202). A cancellation
    /// ends the waiting of the request it names (servers do not answer cancelled requests).
    fn admit(
        &self,
        line: &[u8],
        messages: &[Members<'_>],
        events: bool,
    ) -> (Vec<u8>, Option<Inbox>) {
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let stream = routes.next_stream;
        let mut edits = Vec::new();
        let mut due = 0;
        for m in messages {
            let name = method(m);
            match (name.as_deref(), m.get("id").copied()) {
                (Some(name), Some(id)) => {
                    let Some(host_key) = key_of(id) else { continue };
                    let token = progress_token(m);
                    let (key, host_id, host_token) = if self.rename {
                        let n = self.next.fetch_add(1, Ordering::Relaxed);
                        let renamed = Value::String(format!("hintcheck-guard-{n}")).to_string();
                        edits.push((spot(line, id), renamed.clone()));
                        let host_token = token.map(|t| {
                            let renamed_token =
                                Value::String(format!("hintcheck-guard-{n}-progress")).to_string();
                            edits.push((spot(line, t), renamed_token.clone()));
                            (t.get().to_string(), renamed_token)
                        });
                        (renamed, Some(id.get().to_string()), host_token)
                    } else {
                        let host_token = token.and_then(key_of).map(|k| (String::new(), k));
                        (host_key, None, host_token)
                    };
                    if let Some((_, token_key)) = &host_token {
                        routes.tokens.insert(token_key.clone(), key.clone());
                    }
                    routes.pending.insert(
                        key,
                        Pending {
                            stream,
                            host_id,
                            host_token,
                            initialize: name == "initialize",
                        },
                    );
                    due += 1;
                }
                (Some("notifications/cancelled"), None) if !self.rename => {
                    // (On the shared server cancellations never get here: see `post`.)
                    let target = members_of(m.get("params").copied())
                        .and_then(|p| p.get("requestId").copied());
                    let Some(target) = target else { continue };
                    if let Some(p) = key_of(target).and_then(|k| routes.pending.remove(&k)) {
                        if let Some((_, token_key)) = &p.host_token {
                            routes.tokens.remove(token_key);
                        }
                        routes.settle(p.stream);
                    }
                }
                _ => {}
            }
        }
        let line = splice(line, edits);
        if due == 0 {
            return (line, None);
        }
        routes.next_stream += 1;
        let (outbox, inbox) = stream_pair();
        routes.streams.insert(
            stream,
            Stream {
                outbox,
                due,
                events,
            },
        );
        (line, Some(inbox))
    }

    /// Opens the session's GET stream (none when one is open) and sends it what waited.
    fn open_standalone(&self) -> Option<Inbox> {
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        if routes.standalone.as_ref().is_some_and(|s| !s.is_closed()) {
            return None;
        }
        let (outbox, inbox) = stream_pair();
        while let Some(line) = routes.queue.pop_front() {
            outbox.offer(line);
        }
        routes.queued_bytes = 0;
        routes.standalone = Some(outbox);
        Some(inbox)
    }

    /// Sends one line of the server where it belongs: each answer on its request's stream
    /// (the host's id and token named back), a progress notification on its request's, a
    /// subscription's notification on the subscription's; anything else of a session on its
    /// latest open SSE stream, else its GET stream, else kept for it. A line that is no
    /// JSON-RPC message has no host to go to.
    async fn deliver(&self, line: Vec<u8>) {
        let sends = {
            let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
            let mut sends = Vec::new();
            for (target, line) in self.route(&mut routes, line) {
                match self.outbox_for(&mut routes, target, line) {
                    Some(send) => sends.push(send),
                    None => continue,
                }
            }
            sends
        };
        for (outbox, line) in sends {
            let sent = if self.rename {
                // The shared server's hosts do not wait for one that does not read.
                outbox.offer(line)
            } else {
                outbox.send(line, STALL).await
            };
            if !sent {
                if !outbox.is_closed() {
                    eprintln!(
                        "hintcheck guard: a host did not read its stream of session {}; it was closed",
                        self.label()
                    );
                }
                let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
                routes
                    .streams
                    .retain(|_, s| !s.outbox.sender.same_channel(&outbox.sender));
                if routes
                    .standalone
                    .as_ref()
                    .is_some_and(|s| s.sender.same_channel(&outbox.sender))
                {
                    routes.standalone = None;
                }
            }
        }
    }

    /// The stream `line` goes on for `target` (a stream whose answers are all given leaves
    /// the routes: its end comes with this last line); `None` when it is kept or dropped.
    fn outbox_for(
        &self,
        routes: &mut Routes,
        target: Target,
        line: Vec<u8>,
    ) -> Option<(Outbox, Vec<u8>)> {
        if let Target::Stream(id) = target {
            let stream = routes.streams.get(&id)?;
            if stream.due == 0 {
                return routes.streams.remove(&id).map(|s| (s.outbox, line));
            }
            return Some((stream.outbox.clone(), line));
        }
        let open = routes
            .streams
            .iter()
            .filter(|(_, s)| s.events && !s.outbox.is_closed())
            .max_by_key(|(k, _)| **k)
            .map(|(_, s)| s.outbox.clone())
            .or_else(|| routes.standalone.clone().filter(|s| !s.is_closed()));
        match open {
            Some(outbox) if self.session.is_some() => Some((outbox, line)),
            _ if self.session.is_some()
                && routes.queue.len() < QUEUE_CAP
                && routes.queued_bytes + line.len() <= QUEUE_BYTES =>
            {
                routes.queued_bytes += line.len();
                routes.queue.push_back(line);
                None
            }
            _ => {
                routes.dropped += 1;
                if routes.dropped == 1 {
                    eprintln!(
                        "hintcheck guard: the {} server sent a message no open request or stream could take; it was not passed on (nor will later ones be said)",
                        self.label()
                    );
                }
                None
            }
        }
    }

    /// Where each message of `line` goes, with the host's ids named back in it. A batch's
    /// messages are routed one by one and regrouped per destination.
    fn route(&self, routes: &mut Routes, line: Vec<u8>) -> Vec<(Target, Vec<u8>)> {
        if let Ok(m) = serde_json::from_slice::<Members<'_>>(&line) {
            let (target, edits) = self.route_one(routes, &line, &m);
            let line = splice(&line, edits);
            return vec![(target, line)];
        }
        let Ok(items) = serde_json::from_slice::<Vec<&RawValue>>(&line) else {
            routes.dropped += 1;
            return Vec::new();
        };
        let mut groups: Vec<(Target, Vec<Vec<u8>>)> = Vec::new();
        for item in items {
            let bytes = item.get().as_bytes();
            let Ok(m) = serde_json::from_slice::<Members<'_>>(bytes) else {
                continue;
            };
            let (target, edits) = self.route_one(routes, bytes, &m);
            let one = splice(bytes, edits);
            match groups.iter_mut().find(|(t, _)| *t == target) {
                Some((_, members)) => members.push(one),
                None => groups.push((target, vec![one])),
            }
        }
        groups
            .into_iter()
            .map(|(target, members)| {
                let mut out = b"[".to_vec();
                out.extend(members.join(&b","[..]));
                out.push(b']');
                (target, out)
            })
            .collect()
    }

    /// Where message `m` (of `bytes`) goes, counting the answer it is, and the edits that
    /// name the host's ids back in it.
    fn route_one(
        &self,
        routes: &mut Routes,
        bytes: &[u8],
        m: &Members<'_>,
    ) -> (Target, Vec<(Range<usize>, String)>) {
        let mut edits = Vec::new();
        let answer =
            m.get("method").is_none() && (m.contains_key("result") || m.contains_key("error"));
        let id = m.get("id").copied();
        if answer {
            let Some(p) = id.and_then(key_of).and_then(|k| routes.pending.remove(&k)) else {
                return (Target::Unrelated, edits);
            };
            if let Some((_, token_key)) = &p.host_token {
                routes.tokens.remove(token_key);
            }
            if let (Some(host_id), Some(id)) = (&p.host_id, id) {
                edits.push((spot(bytes, id), host_id.clone()));
            }
            if p.initialize {
                self.settle_version(m);
            }
            if let Some(s) = routes.streams.get_mut(&p.stream) {
                s.due = s.due.saturating_sub(1);
            }
            return (Target::Stream(p.stream), edits);
        }
        let params = members_of(m.get("params").copied());
        let token = params
            .as_ref()
            .and_then(|p| p.get("progressToken").copied());
        let by_token = token.and_then(|t| {
            let request = routes.tokens.get(&key_of(t)?)?;
            let p = routes.pending.get(request)?;
            if let Some((host_token, _)) = p.host_token.as_ref().filter(|_| self.rename) {
                edits.push((spot(bytes, t), host_token.clone()));
            }
            Some(p.stream)
        });
        let subscription = params
            .as_ref()
            .and_then(|p| members_of(p.get("_meta").copied()))
            .and_then(|meta| meta.get("io.modelcontextprotocol/subscriptionId").copied());
        let stream = by_token.or_else(|| {
            let s = subscription?;
            let p = routes.pending.get(&key_of(s)?)?;
            if let Some(host_id) = &p.host_id {
                edits.push((spot(bytes, s), host_id.clone()));
            }
            Some(p.stream)
        });
        // A JSON body carries its answers only.
        match stream.filter(|s| routes.streams.get(s).is_some_and(|s| s.events)) {
            Some(s) => (Target::Stream(s), edits),
            None => (Target::Unrelated, Vec::new()),
        }
    }

    fn settle_version(&self, answer: &Members<'_>) {
        let version = members_of(answer.get("result").copied())
            .and_then(|r| string_of(r.get("protocolVersion").copied()));
        if let Some(v) = version {
            *self.protocol.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
        }
    }

    /// The server ended: every request still waiting is answered with an error saying so,
    /// and every stream ends.
    fn fail_pending(&self, code: i32) {
        let mut routes = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let pending: Vec<(String, Pending)> = routes.pending.drain().collect();
        for (key, p) in pending {
            let Some(stream) = routes.streams.get(&p.stream) else {
                continue;
            };
            let id = p.host_id.unwrap_or(key);
            let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
            let line = serde_json::to_vec(&serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": SERVER_ENDED,
                    "message": format!("the server ended (exit code {code}) before answering (hintcheck guard)"),
                }
            }))
            .unwrap_or_default();
            stream.outbox.offer(line);
        }
        routes.streams.clear();
        routes.standalone = None;
        routes.queue.clear();
        routes.queued_bytes = 0;
    }
}

impl Routes {
    /// A request of `stream` will not be answered (cancelled): the stream ends once nothing
    /// more is due on it.
    fn settle(&mut self, stream: u64) {
        if let Some(s) = self.streams.get_mut(&stream) {
            s.due = s.due.saturating_sub(1);
            if s.due == 0 {
                self.streams.remove(&stream);
            }
        }
    }
}

/// A server's lines, to the streams of its link.
struct LinkHost(Arc<Link>);

impl ToHost for LinkHost {
    async fn deliver(&mut self, line: Vec<u8>) -> bool {
        self.0.deliver(line).await;
        true
    }
}

/// An SSE response carrying each line as a `message` event until the stream's answers are
/// all sent (a comment every [`KEEP_ALIVE`] meanwhile). A JSON text holds a line break or a
/// carriage return only as whitespace: each becomes a space, so that no line of the server
/// can end its event early and forge another.
fn sse(inbox: Inbox) -> Response<Body> {
    let tick = tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE);
    let events = futures_util::stream::unfold((inbox, tick), |(mut inbox, mut tick)| async move {
        let chunk = tokio::select! {
            line = inbox.recv() => event(&line?),
            _ = tick.tick() => Bytes::from_static(b": keep-alive\n\n"),
        };
        Some((Ok::<_, Infallible>(Frame::data(chunk)), (inbox, tick)))
    });
    let mut r = Response::new(StreamBody::new(events).boxed_unsync());
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// One SSE event carrying `line`.
fn event(line: &[u8]) -> Bytes {
    let mut event = Vec::with_capacity(line.len() + 24);
    event.extend_from_slice(b"event: message\ndata: ");
    event.extend(
        line.iter()
            .map(|b| if matches!(b, b'\r' | b'\n') { b' ' } else { *b }),
    );
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// A JSON response with the answers of a body: the one answer, or those of a batch as an
/// array (at most [`MAX_LINE`] bytes of them).
async fn json_body(mut inbox: Inbox) -> Response<Body> {
    let mut messages: Vec<Vec<u8>> = Vec::new();
    let mut total = 0;
    while let Some(line) = inbox.recv().await {
        total += line.len();
        if total > MAX_LINE {
            return rpc_error(
                StatusCode::BAD_GATEWAY,
                None,
                -32603,
                &format!("the server's answers to this body are over {MAX_LINE} bytes"),
            );
        }
        // A line that is itself a batch of answers gives its members.
        match serde_json::from_slice::<Vec<&RawValue>>(&line) {
            Ok(items) => messages.extend(items.iter().map(|i| i.get().as_bytes().to_vec())),
            Err(_) => messages.push(line),
        }
    }
    let body = match messages.len() {
        1 => messages.pop().unwrap_or_default(),
        _ => {
            let mut all = b"[".to_vec();
            all.extend(messages.join(&b","[..]));
            all.push(b']');
            all
        }
    };
    let mut r = Response::new(full(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_are_told_from_others() {
        for ok in [
            "localhost:7447",
            "127.0.0.1",
            "127.0.0.1:80",
            "[::1]:7447",
            "LOCALHOST",
        ] {
            assert!(names_loopback(ok), "{ok}");
        }
        for bad in [
            "evil.test:7447",
            "192.0.2.1",
            "localhost.evil.test",
            "[2001:db8::1]:80",
            "",
        ] {
            assert!(!names_loopback(bad), "{bad}");
        }
    }

    #[test]
    fn splicing_replaces_only_the_ranges_named() {
        let line = br#"{"id":7,"method":"tools/call","params":{"_meta":{"progressToken":7}}}"#;
        let m = messages(line).expect("a message").remove(0);
        let id = m.get("id").copied().expect("id");
        let token = progress_token(&m).expect("token");
        let out = splice(
            line,
            vec![
                (spot(line, token), "\"t\"".into()),
                (spot(line, id), "\"g\"".into()),
            ],
        );
        assert_eq!(
            out,
            br#"{"id":"g","method":"tools/call","params":{"_meta":{"progressToken":"t"}}}"#
        );
    }

    #[test]
    fn only_json_rpc_shapes_are_messages() {
        assert!(messages(b"not json").is_none());
        assert!(messages(b"[]").is_none());
        assert!(messages(b"[1]").is_none());
        assert!(messages(b"7").is_none());
        assert_eq!(
            messages(br#"[{"id":1},{"id":2}]"#).map(|m| m.len()),
            Some(2)
        );
    }

    fn link(rename: bool) -> Link {
        Link {
            session: (!rename).then(|| "s".to_string()),
            rename,
            to_server: Arc::new(tokio::sync::Mutex::new(None)),
            window: Arc::new(Mutex::new(super::super::policy::Window::new(
                false,
                Default::default(),
            ))),
            routes: Mutex::new(Routes::default()),
            protocol: Mutex::new(None),
            last_used: Mutex::new(Instant::now()),
            alive: AtomicBool::new(true),
            stop: Mutex::new(None),
            next: AtomicU64::new(1),
        }
    }

    #[tokio::test]
    async fn the_stateless_server_sees_renamed_ids_and_the_host_gets_its_own_back() {
        let l = link(true);
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"p"}}}"#;
        let ms = messages(body).expect("message");
        let (line, receiver) = l.admit(body, &ms, true);
        let mut receiver = receiver.expect("a stream");
        let seen: Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(seen["id"], "hintcheck-guard-1");
        assert_eq!(
            seen["params"]["_meta"]["progressToken"],
            "hintcheck-guard-1-progress"
        );
        // A second host's id 1 meets no other.
        let (line2, _r2) = l.admit(body, &ms, true);
        assert!(String::from_utf8_lossy(&line2).contains("hintcheck-guard-2"));
        l.deliver(
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"hintcheck-guard-1-progress","progress":1}}"#.to_vec(),
        )
        .await;
        l.deliver(
            br#"{"jsonrpc":"2.0","id":"hintcheck-guard-1","result":{"content":[]}}"#.to_vec(),
        )
        .await;
        let progress: Value =
            serde_json::from_slice(&receiver.recv().await.expect("progress")).expect("json");
        assert_eq!(progress["params"]["progressToken"], "p");
        let answer: Value =
            serde_json::from_slice(&receiver.recv().await.expect("answer")).expect("json");
        assert_eq!(answer["id"], 1);
        // Every answer due was sent: the stream ends.
        assert!(receiver.recv().await.is_none());
    }

    #[tokio::test]
    async fn a_session_keeps_the_hosts_ids_and_sends_the_servers_requests_on_an_open_stream() {
        let l = link(false);
        let body = br#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"a"}}"#;
        let ms = messages(body).expect("message");
        let (line, receiver) = l.admit(body, &ms, true);
        assert_eq!(line, body.to_vec());
        let mut receiver = receiver.expect("a stream");
        // The server asks the host for its roots while the call runs.
        let ask = br#"{"jsonrpc":"2.0","id":0,"method":"roots/list"}"#;
        l.deliver(ask.to_vec()).await;
        assert_eq!(receiver.recv().await.expect("request"), ask.to_vec());
        l.deliver(br#"{"jsonrpc":"2.0","id":"c","result":{}}"#.to_vec())
            .await;
        assert!(receiver.recv().await.is_some());
        assert!(receiver.recv().await.is_none());
        // With nothing open, a notification waits for the GET stream.
        l.deliver(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#.to_vec())
            .await;
        let mut standalone = l.open_standalone().expect("stream");
        assert!(standalone.recv().await.is_some());
        assert!(l.open_standalone().is_none(), "one GET stream at a time");
    }

    #[test]
    fn a_server_line_cannot_end_its_event_early() {
        let forged = b"{\"jsonrpc\":\"2.0\",\r\rdata: {\"id\":2}\r\r\"id\":1,\"result\":{}}";
        let e = event(forged);
        let body = &e[..e.len() - 2];
        assert!(!body.contains(&b'\r') && body.iter().filter(|b| **b == b'\n').count() == 1);
    }

    #[tokio::test]
    async fn a_batch_of_answers_to_two_requests_goes_half_to_each() {
        let l = link(false);
        let mut inboxes = Vec::new();
        for id in [1, 2] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"a"}}}}"#
            );
            let ms = messages(body.as_bytes()).expect("message");
            inboxes.push(l.admit(body.as_bytes(), &ms, true).1.expect("stream"));
        }
        l.deliver(
            br#"[{"jsonrpc":"2.0","id":2,"result":{}},{"jsonrpc":"2.0","id":1,"result":{}}]"#
                .to_vec(),
        )
        .await;
        for (i, inbox) in inboxes.iter_mut().enumerate() {
            let got: Value =
                serde_json::from_slice(&inbox.recv().await.expect("answer")).expect("json");
            assert_eq!(got[0]["id"], i as u64 + 1, "{got}");
            assert!(inbox.recv().await.is_none());
        }
    }

    #[tokio::test]
    async fn a_cancelled_requests_stream_ends() {
        let l = link(false);
        let call = br#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"a"}}"#;
        let ms = messages(call).expect("message");
        let (_, inbox) = l.admit(call, &ms, true);
        let cancel =
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":0}}"#;
        let cm = messages(cancel).expect("message");
        let (seen, none) = l.admit(cancel, &cm, true);
        assert!(none.is_none());
        assert_eq!(seen, cancel.to_vec());
        // Servers do not answer cancelled requests: the stream ends without one.
        assert!(inbox.expect("stream").recv().await.is_none());
    }

    #[tokio::test]
    async fn a_json_body_gets_its_answer_only() {
        let l = link(false);
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":"p"}}}"#;
        let ms = messages(body).expect("message");
        let inbox = l.admit(body, &ms, false).1.expect("stream");
        l.deliver(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}"#.to_vec()).await;
        l.deliver(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec())
            .await;
        let r = json_body(inbox).await;
        let bytes = r.into_body().collect().await.expect("body").to_bytes();
        let v: Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(v["id"], 1, "{v}");
    }

    #[tokio::test]
    async fn a_server_that_ends_answers_every_waiting_request_with_an_error() {
        let l = link(true);
        let body = br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"a"}}"#;
        let ms = messages(body).expect("message");
        let (_, receiver) = l.admit(body, &ms, false);
        let mut receiver = receiver.expect("stream");
        l.fail_pending(3);
        let v: Value =
            serde_json::from_slice(&receiver.recv().await.expect("error")).expect("json");
        assert_eq!(v["id"], 9);
        assert_eq!(v["error"]["code"], SERVER_ENDED);
        assert!(receiver.recv().await.is_none());
    }
}
