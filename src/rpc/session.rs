//! The JSON-RPC session with the server: request ids and their correlation, per-request
//! timeouts, replies to the few server-to-client requests we accept (`ping`, and `roots/list`
//! when the workspace is offered), and the recording of everything else. Garbage and
//! unsolicited responses are recorded and never answered.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::framing::{
    Classified, Frame, LineReader, Message, RawResult, RpcError, RpcId, classify,
};
use super::transcript::{CappedCapture, Direction, Entry, Transcript, TranscriptStats};

/// Errors of one request. A misbehaving server produces these; they become findings.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No response within the timeout.
    #[error("no response to {method} within {after:?}")]
    Timeout {
        /// The method of the request.
        method: String,
        /// How long we waited.
        after: Duration,
    },
    /// The server took the request in and went quiet, waiting for more input, without
    /// answering (see [`Session::probe_until`]).
    #[error("the server read {method} and waited for more input without answering ({after:?})")]
    LeftUnanswered {
        /// The method of the request.
        method: String,
        /// How long the request had waited.
        after: Duration,
    },
    /// The server closed its stdout (or exited) before answering.
    #[error("the server closed the connection before answering {method}")]
    Closed {
        /// The method of the request.
        method: String,
    },
    /// Writing to the server's stdin failed.
    #[error("could not send {method} to the server")]
    Write {
        /// The method of the request.
        method: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Limits and policies of a session.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Longest accepted line in bytes.
    pub max_line_bytes: usize,
    /// Bytes of line text the transcript keeps in full.
    pub transcript_budget: usize,
    /// Bytes kept from the start and from the end of stderr.
    pub stderr_head: usize,
    /// See `stderr_head`.
    pub stderr_tail: usize,
    /// Roots offered to `roots/list`; `None` refuses the request with -32601.
    pub roots: Option<Vec<Value>>,
    /// Most server-to-client requests answered; later ones are recorded only.
    pub max_replies: u64,
    /// The id of the first request; `None` picks one at random per session, so that a server
    /// cannot answer a request before it was made (a response printed at startup with id 1
    /// would otherwise be taken for the answer to our first request).
    pub first_id: Option<i64>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: 16 * 1024 * 1024,
            transcript_budget: 8 * 1024 * 1024,
            stderr_head: 32 * 1024,
            stderr_tail: 32 * 1024,
            roots: None,
            max_replies: 10_000,
            first_id: None,
        }
    }
}

/// A request id base nobody can guess: 1,000,000 to 1,000,999,999, from the standard
/// library's per-process random hash keys (no extra dependency), different per session.
fn unpredictable_first_id() -> i64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    1_000_000 + (h.finish() % 1_000_000_000) as i64
}

/// A response to one of our requests.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The result (as its text, see [`RawResult`]) or the error object.
    pub outcome: Result<RawResult, RpcError>,
    /// The transcript entry of the response.
    pub seq: u64,
    /// When it arrived.
    pub at: Instant,
}

/// A notification the server sent.
#[derive(Debug, Clone, Serialize)]
pub struct NotificationRecord {
    /// Transcript entry.
    pub seq: u64,
    /// The method.
    pub method: String,
}

/// A request the server sent us, and what we did with it.
#[derive(Debug, Clone, Serialize)]
pub struct ServerRequestRecord {
    /// Transcript entry.
    pub seq: u64,
    /// The method.
    pub method: String,
    /// What we answered (`result`, `error -32601`, `not answered: …`).
    pub answer: String,
}

/// Why the session ended.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "detail")]
pub enum CloseReason {
    /// The server closed stdout.
    Eof,
    /// Reading stdout failed.
    ReadError(String),
}

/// Everything the session recorded, for the report.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRecord {
    /// Per-class counts.
    pub stats: TranscriptStats,
    /// Notifications received.
    pub notifications: Vec<NotificationRecord>,
    /// Server-to-client requests received.
    pub server_requests: Vec<ServerRequestRecord>,
    /// Received lines that were garbage, unknown-id or late responses.
    pub anomalies: Vec<Entry>,
    /// The kept part of stderr.
    pub stderr: String,
    /// Total stderr bytes.
    pub stderr_bytes: u64,
    /// How the stream ended, if it did.
    pub closed: Option<CloseReason>,
    /// Notifications and server requests counted but not kept.
    pub unrecorded: u64,
}

struct State {
    transcript: Transcript,
    pending: HashMap<i64, (String, oneshot::Sender<Reply>)>,
    timed_out: HashSet<i64>,
    /// Probes hintcheck stopped waiting for by its own choice (a short patience, not a fault).
    abandoned_probes: HashSet<i64>,
    answered: HashSet<i64>,
    notifications: Vec<NotificationRecord>,
    server_requests: Vec<ServerRequestRecord>,
    stderr: CappedCapture,
    closed: Option<CloseReason>,
    replies_sent: u64,
    /// Notifications and server requests beyond `MAX_RECORDS`, counted only.
    unrecorded: u64,
}

/// Most notifications and server requests kept as records (each kind).
const MAX_RECORDS: usize = 1_000;

type Writer = Box<dyn AsyncWrite + Send + Unpin>;

struct Shared {
    state: Mutex<State>,
    stdin: tokio::sync::Mutex<Option<Writer>>,
    options: SessionOptions,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock would be our bug; keep going with the data we have.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes one line to the server, recording it first. Returns the write error, if any.
    async fn send_line(&self, line: Vec<u8>) -> std::io::Result<()> {
        self.lock()
            .transcript
            .record(Direction::Sent, &line, line.len() as u64, "sent", None);
        let mut guard = self.stdin.lock().await;
        let Some(w) = guard.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "stdin already closed",
            ));
        };
        let mut framed = line;
        framed.push(b'\n');
        w.write_all(&framed).await?;
        w.flush().await
    }
}

/// Reads the counts of a session owned elsewhere.
#[derive(Clone)]
pub struct SessionWatch(Arc<Shared>);

impl SessionWatch {
    /// The transcript's counts so far.
    pub fn stats(&self) -> TranscriptStats {
        self.0.lock().transcript.stats()
    }
}

/// A live JSON-RPC session over the server's stdio.
pub struct Session {
    shared: Arc<Shared>,
    next_id: AtomicI64,
    reader: JoinHandle<()>,
    stderr_reader: Option<JoinHandle<()>>,
}

impl Session {
    /// Starts the reader tasks over the server's stdout (and stderr, when given).
    pub fn start(
        start: Instant,
        stdin: impl AsyncWrite + Send + Unpin + 'static,
        stdout: impl AsyncRead + Send + Unpin + 'static,
        stderr: Option<Box<dyn AsyncRead + Send + Unpin>>,
        options: SessionOptions,
    ) -> Session {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                transcript: Transcript::new(start, options.transcript_budget),
                pending: HashMap::new(),
                timed_out: HashSet::new(),
                abandoned_probes: HashSet::new(),
                answered: HashSet::new(),
                notifications: Vec::new(),
                server_requests: Vec::new(),
                stderr: CappedCapture::new(options.stderr_head, options.stderr_tail),
                closed: None,
                replies_sent: 0,
                unrecorded: 0,
            }),
            stdin: tokio::sync::Mutex::new(Some(Box::new(stdin))),
            options,
        });
        let reader = tokio::spawn(read_loop(
            shared.clone(),
            LineReader::new(stdout, shared.options.max_line_bytes),
        ));
        let stderr_reader = stderr.map(|mut err| {
            let shared = shared.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    match err.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => shared.lock().stderr.push(&buf[..n]),
                    }
                }
            })
        });
        let first_id = shared
            .options
            .first_id
            .unwrap_or_else(unpredictable_first_id);
        Session {
            shared,
            next_id: AtomicI64::new(first_id),
            reader,
            stderr_reader,
        }
    }

    /// Sends a request and waits for its response, at most `timeout` in all. A response after
    /// the timeout is a `late-response` anomaly of the server.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Reply, SessionError> {
        self.send_and_wait(method, params, timeout, false, std::future::pending())
            .await
    }

    /// Like [`Session::request`] for a probe whose short `timeout` is hintcheck's own choice
    /// (`server/discover` before falling back to `initialize`): an answer after it is recorded
    /// as `probe-response`, not held against the server, which owes no answer within it.
    pub async fn probe(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Reply, SessionError> {
        self.send_and_wait(method, params, timeout, true, std::future::pending())
            .await
    }

    /// Like [`Session::probe`], and given up as soon as `unanswered` completes (the server is
    /// shown to have taken the probe in and to wait for more input without answering):
    /// [`SessionError::LeftUnanswered`] then, with how long the probe had waited.
    pub async fn probe_until(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        unanswered: impl std::future::Future<Output = ()>,
    ) -> Result<Reply, SessionError> {
        self.send_and_wait(method, params, timeout, true, unanswered)
            .await
    }

    async fn send_and_wait(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
        probe: bool,
        unanswered: impl std::future::Future<Output = ()>,
    ) -> Result<Reply, SessionError> {
        let asked = tokio::time::Instant::now();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut st = self.shared.lock();
            if st.closed.is_some() {
                return Err(SessionError::Closed {
                    method: method.into(),
                });
            }
            st.pending.insert(id, (method.to_string(), tx));
        }
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        let line = serde_json::to_vec(&msg).unwrap_or_default();
        let deadline = tokio::time::Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, self.shared.send_line(line)).await {
            Ok(Ok(())) => {}
            Ok(Err(source)) => {
                self.shared.lock().pending.remove(&id);
                return Err(SessionError::Write {
                    method: method.into(),
                    source,
                });
            }
            Err(_) => {
                self.forget(id, probe);
                return Err(SessionError::Timeout {
                    method: method.into(),
                    after: timeout,
                });
            }
        }
        let mut rx = rx;
        let expired = tokio::time::sleep_until(deadline);
        tokio::pin!(expired, unanswered);
        let ended = tokio::select! {
            // An answer that is there wins over the deadline and over giving up.
            biased;
            answer = &mut rx => return answer.map_err(|_| SessionError::Closed {
                method: method.into(),
            }),
            () = &mut expired => SessionError::Timeout {
                method: method.into(),
                after: timeout,
            },
            () = &mut unanswered => SessionError::LeftUnanswered {
                method: method.into(),
                after: asked.elapsed(),
            },
        };
        // The reader may have taken the answer meanwhile (giving up can take a while to
        // decide): one taken is the answer, not a late one.
        if !self.forget(id, probe)
            && let Ok(reply) = rx.try_recv()
        {
            return Ok(reply);
        }
        Err(ended)
    }

    /// Forgets a request that is no longer waited for, so that an answer to it is recorded as
    /// late (or as a probe's); whether it was still waiting (not answered meanwhile).
    fn forget(&self, id: i64, probe: bool) -> bool {
        let mut st = self.shared.lock();
        if st.pending.remove(&id).is_none() {
            return false;
        }
        if probe {
            st.abandoned_probes.insert(id);
        } else {
            st.timed_out.insert(id);
        }
        true
    }

    /// The id the next request will get (used to cancel a request that timed out).
    pub fn last_id(&self) -> i64 {
        self.next_id.load(Ordering::Relaxed) - 1
    }

    /// Sends a notification. Errors are ignored: a dead server is noticed elsewhere.
    pub async fn notify(&self, method: &str, params: Option<Value>) {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        let line = serde_json::to_vec(&msg).unwrap_or_default();
        let _ = tokio::time::timeout(Duration::from_secs(2), self.shared.send_line(line)).await;
    }

    /// Closes the server's stdin (the polite way to ask a stdio server to exit).
    pub async fn close_stdin(&self) {
        if let Ok(mut guard) =
            tokio::time::timeout(Duration::from_secs(1), self.shared.stdin.lock()).await
        {
            if let Some(mut w) = guard.take() {
                let _ = tokio::time::timeout(Duration::from_millis(200), w.shutdown()).await;
            }
        }
    }

    /// Whether the server's stdout has ended.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed.is_some()
    }

    /// Waits until the reader tasks have seen the end of both streams, at most `timeout`.
    pub async fn drain(&mut self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, &mut self.reader).await;
        if let Some(h) = self.stderr_reader.as_mut() {
            let _ = tokio::time::timeout(Duration::from_millis(200), h).await;
        }
    }

    /// Number of transcript entries so far (a cheap cursor for "what happened since").
    pub fn transcript_len(&self) -> usize {
        self.shared.lock().transcript.entries().len()
    }

    /// Garbage and unsolicited lines received since transcript position `from`.
    pub fn anomalies_since(&self, from: usize) -> Vec<Entry> {
        let st = self.shared.lock();
        st.transcript.entries()[from.min(st.transcript.entries().len())..]
            .iter()
            .filter(|e| e.direction == Direction::Received && is_anomaly(&e.class))
            .cloned()
            .collect()
    }

    /// A copy of the full transcript.
    pub fn transcript(&self) -> Vec<Entry> {
        self.shared.lock().transcript.entries().to_vec()
    }

    /// A handle that reads the session's counts while another part owns the session (the
    /// progress of a greeting).
    pub fn watch(&self) -> SessionWatch {
        SessionWatch(Arc::clone(&self.shared))
    }

    /// Everything recorded so far.
    pub fn record(&self) -> SessionRecord {
        let st = self.shared.lock();
        SessionRecord {
            stats: st.transcript.stats(),
            notifications: st.notifications.clone(),
            server_requests: st.server_requests.clone(),
            anomalies: st
                .transcript
                .entries()
                .iter()
                .filter(|e| e.direction == Direction::Received && is_anomaly(&e.class))
                .take(200)
                .cloned()
                .collect(),
            stderr: st.stderr.text(),
            stderr_bytes: st.stderr.total(),
            closed: st.closed.clone(),
            unrecorded: st.unrecorded,
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.reader.abort();
        if let Some(h) = &self.stderr_reader {
            h.abort();
        }
    }
}

fn is_anomaly(class: &str) -> bool {
    !matches!(
        class,
        "request" | "response" | "notification" | "sent" | "probe-response"
    )
}

async fn read_loop<R: AsyncRead + Unpin>(shared: Arc<Shared>, mut reader: LineReader<R>) {
    loop {
        let frame = match reader.next_frame().await {
            Ok(f) => f,
            Err(e) => {
                close(&shared, CloseReason::ReadError(e.to_string()));
                return;
            }
        };
        match frame {
            Frame::Line(bytes) => handle_line(&shared, &bytes).await,
            Frame::Oversized { head, len } => {
                let limit = shared.options.max_line_bytes;
                shared.lock().transcript.record(
                    Direction::Received,
                    &head,
                    len,
                    "oversized",
                    Some(format!(
                        "line of {len} bytes exceeds the {limit}-byte cap; dropped"
                    )),
                );
            }
            Frame::Eof { trailing } => {
                if let Some(t) = trailing {
                    shared.lock().transcript.record(
                        Direction::Received,
                        &t,
                        t.len() as u64,
                        "unterminated",
                        Some("bytes after the last newline at end of stream".into()),
                    );
                }
                close(&shared, CloseReason::Eof);
                return;
            }
        }
    }
}

fn close(shared: &Shared, reason: CloseReason) {
    let mut st = shared.lock();
    st.closed = Some(reason);
    // Dropping the senders wakes every waiting request with `Closed`.
    st.pending.clear();
}

async fn handle_line(shared: &Shared, bytes: &[u8]) {
    let classified = classify(bytes);
    let note = match &classified {
        Classified::NotJson(why) | Classified::NotJsonRpc(why) => Some(why.clone()),
        _ => None,
    };
    let seq = shared.lock().transcript.record(
        Direction::Received,
        bytes,
        bytes.len() as u64,
        classified.kind(),
        note,
    );
    let Classified::Message(message) = classified else {
        return;
    };
    match message {
        Message::Response { id, outcome } => {
            let mut st = shared.lock();
            let numeric = match &id {
                RpcId::Number(n) => Some(*n),
                RpcId::String(_) => None,
            };
            let waiter = numeric.and_then(|n| st.pending.remove(&n).map(|w| (n, w)));
            match waiter {
                Some((n, (_, tx))) => {
                    st.answered.insert(n);
                    let _ = tx.send(Reply {
                        outcome,
                        seq,
                        at: Instant::now(),
                    });
                }
                None => {
                    let (class, note) = match numeric {
                        Some(n) if st.abandoned_probes.remove(&n) => {
                            st.answered.insert(n);
                            (
                                "probe-response",
                                format!(
                                    "answer to probe id {n} after hintcheck moved on (its own short wait, not the server's fault)"
                                ),
                            )
                        }
                        Some(n) if st.timed_out.contains(&n) => (
                            "late-response",
                            format!("response to id {n} after we stopped waiting"),
                        ),
                        Some(n) if st.answered.contains(&n) => {
                            ("duplicate-response", format!("second response to id {n}"))
                        }
                        _ => (
                            "unknown-id",
                            format!("response to id {id}, which we never sent"),
                        ),
                    };
                    st.transcript.reclassify(seq, class, Some(note));
                }
            }
        }
        Message::Notification { method, .. } => {
            shared
                .lock()
                .notifications
                .push(NotificationRecord { seq, method });
        }
        Message::Request { id, method, .. } => {
            let (answer, reply) = {
                let mut st = shared.lock();
                if st.replies_sent >= shared.options.max_replies {
                    (
                        format!(
                            "not answered: more than {} server requests",
                            shared.options.max_replies
                        ),
                        None,
                    )
                } else {
                    st.replies_sent += 1;
                    let reply = answer_server_request(&method, &shared.options);
                    let answer = match &reply {
                        Ok(_) => "result".to_string(),
                        Err((code, _)) => format!("error {code}"),
                    };
                    (answer, Some(reply))
                }
            };
            {
                let mut st = shared.lock();
                if st.server_requests.len() < MAX_RECORDS {
                    st.server_requests.push(ServerRequestRecord {
                        seq,
                        method,
                        answer,
                    });
                } else {
                    st.unrecorded += 1;
                }
            }
            if let Some(reply) = reply {
                let msg = match reply {
                    Ok(result) => json!({"jsonrpc": "2.0", "id": id.to_value(), "result": result}),
                    Err((code, message)) => {
                        json!({"jsonrpc": "2.0", "id": id.to_value(), "error": {"code": code, "message": message}})
                    }
                };
                let line = serde_json::to_vec(&msg).unwrap_or_default();
                let _ = tokio::time::timeout(Duration::from_secs(5), shared.send_line(line)).await;
            }
        }
    }
}

/// What we answer to a server-to-client request: we declare no client capabilities.
fn answer_server_request(method: &str, options: &SessionOptions) -> Result<Value, (i64, String)> {
    match method {
        "ping" => Ok(json!({})),
        "roots/list" => match &options.roots {
            Some(roots) => Ok(json!({ "roots": roots })),
            None => Err((-32601, "Client does not support roots".into())),
        },
        "sampling/createMessage" => Err((-32601, "Client does not support sampling".into())),
        "elicitation/create" => Err((-32601, "Client does not support elicitation".into())),
        other => Err((-32601, format!("Method not found: {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncBufReadExt, BufReader};

    /// A session wired to in-memory pipes; returns the server's ends.
    fn pair(
        options: SessionOptions,
    ) -> (Session, tokio::io::DuplexStream, tokio::io::DuplexStream) {
        let (client_out, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, client_in) = tokio::io::duplex(1 << 20);
        let s = Session::start(Instant::now(), client_out, client_in, None, options);
        (s, server_in, server_out)
    }

    #[tokio::test]
    async fn garbage_is_recorded_and_never_answered() {
        let (s, server_in, mut server_out) = pair(SessionOptions::default());
        let mut lines = BufReader::new(server_in).lines();
        server_out
            .write_all(b"hello\n\xff\n[1]\n{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n")
            .await
            .expect("write");
        // The only line we ever write back is the answer to the ping.
        let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
            .await
            .expect("reply in time")
            .expect("read")
            .expect("a line");
        let v: Value = serde_json::from_str(&line).expect("json");
        assert_eq!(v, json!({"jsonrpc":"2.0","id":7,"result":{}}));
        let rec = s.record();
        let classes: Vec<&str> = rec.anomalies.iter().map(|e| e.class.as_str()).collect();
        assert_eq!(
            classes,
            ["not-json", "not-utf8", "not-jsonrpc", "unknown-id"]
        );
        assert_eq!(rec.server_requests.len(), 1);
        drop(server_out);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), lines.next_line())
                .await
                .map(|r| r.ok().flatten().is_none())
                .unwrap_or(true)
        );
    }

    #[tokio::test]
    async fn responses_are_correlated_and_timeouts_leave_late_replies_marked() {
        let (s, server_in, mut server_out) = pair(SessionOptions::default());
        let mut lines = BufReader::new(server_in).lines();
        let s = Arc::new(s);
        let s2 = s.clone();
        let slow =
            tokio::spawn(async move { s2.request("slow", None, Duration::from_millis(100)).await });
        let first = lines.next_line().await.expect("read").expect("line");
        let first: Value = serde_json::from_str(&first).expect("json");
        let err = slow.await.expect("join").expect_err("must time out");
        assert!(matches!(err, SessionError::Timeout { .. }));
        // Answer the timed-out request late, then a fresh one on time.
        let late = json!({"jsonrpc":"2.0","id":first["id"],"result":{}});
        server_out
            .write_all(format!("{late}\n").as_bytes())
            .await
            .expect("write");
        let s3 = s.clone();
        let fast = tokio::spawn(async move {
            s3.request("fast", Some(json!({"x":1})), Duration::from_secs(5))
                .await
        });
        let second: Value =
            serde_json::from_str(&lines.next_line().await.expect("read").expect("line"))
                .expect("json");
        assert_eq!(second["params"], json!({"x":1}));
        let reply = json!({"jsonrpc":"2.0","id":second["id"],"result":{"ok":true}});
        server_out
            .write_all(format!("{reply}\n").as_bytes())
            .await
            .expect("write");
        let got = fast.await.expect("join").expect("answered");
        assert_eq!(got.outcome.expect("result").value(), json!({"ok": true}));
        let classes: Vec<String> = s
            .record()
            .anomalies
            .iter()
            .map(|e| e.class.clone())
            .collect();
        assert_eq!(classes, ["late-response"]);
    }

    #[tokio::test]
    async fn a_late_answer_to_an_abandoned_probe_is_recorded_but_not_held_against_the_server() {
        let (s, server_in, mut server_out) = pair(SessionOptions::default());
        let mut lines = BufReader::new(server_in).lines();
        let err = s
            .probe("server/discover", None, Duration::from_millis(50))
            .await
            .expect_err("must time out");
        assert!(matches!(err, SessionError::Timeout { .. }));
        let probe: Value =
            serde_json::from_str(&lines.next_line().await.expect("read").expect("line"))
                .expect("json");
        // A slow server answers the probe, then the same id again (that one is a fault).
        let late = json!({"jsonrpc":"2.0","id":probe["id"],"error":{"code":-32601,"message":"no"}});
        server_out
            .write_all(format!("{late}\n{late}\n").as_bytes())
            .await
            .expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let rec = s.record();
        let classes: Vec<&str> = rec.anomalies.iter().map(|e| e.class.as_str()).collect();
        assert_eq!(classes, ["duplicate-response"]);
        let all: Vec<String> = s.transcript().into_iter().map(|e| e.class).collect();
        assert!(all.contains(&"probe-response".to_string()), "{all:?}");
    }

    #[tokio::test]
    async fn a_probe_given_up_on_ends_at_once_and_its_late_answer_is_no_fault() {
        let (s, server_in, mut server_out) = pair(SessionOptions::default());
        let mut lines = BufReader::new(server_in).lines();
        // Given up on (the server was shown to ignore it): well before its hour's timeout.
        let err = s
            .probe_until("server/discover", None, Duration::from_secs(3600), async {})
            .await
            .expect_err("given up on");
        assert!(
            matches!(&err, SessionError::LeftUnanswered { method, .. } if method == "server/discover"),
            "{err:?}"
        );
        let probe: Value =
            serde_json::from_str(&lines.next_line().await.expect("read").expect("line"))
                .expect("json");
        // Its answer after all is a probe's late answer, not held against the server.
        let late = json!({"jsonrpc":"2.0","id":probe["id"],"result":{}});
        server_out
            .write_all(format!("{late}\n").as_bytes())
            .await
            .expect("write");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            s.record().anomalies.is_empty(),
            "{:?}",
            s.record().anomalies
        );
    }

    /// Giving up takes a while to decide (the server's tree is read): an answer the reader
    /// took meanwhile is the probe's answer, not dropped.
    #[tokio::test(flavor = "multi_thread", worker_threads = 3)]
    async fn an_answer_taken_while_giving_up_is_decided_wins() {
        let (s, server_in, mut server_out) = pair(SessionOptions::default());
        let server = tokio::spawn(async move {
            let mut lines = BufReader::new(server_in).lines();
            let probe: Value =
                serde_json::from_str(&lines.next_line().await.expect("read").expect("line"))
                    .expect("json");
            let answer = json!({"jsonrpc":"2.0","id":probe["id"],"result":{"ok":true}});
            server_out
                .write_all(format!("{answer}\n").as_bytes())
                .await
                .expect("write");
            (lines, server_out)
        });
        let got = s
            .probe_until("server/discover", None, Duration::from_secs(3600), async {
                // The decision to give up, blocking its thread while the answer arrives.
                std::thread::sleep(Duration::from_millis(300));
            })
            .await
            .expect("the answer that came meanwhile");
        assert_eq!(got.outcome.expect("result").value(), json!({"ok": true}));
        let _server = server.await.expect("join");
        assert!(
            s.record().anomalies.is_empty(),
            "{:?}",
            s.record().anomalies
        );
    }

    #[tokio::test]
    async fn eof_wakes_waiting_requests() {
        let (s, _server_in, server_out) = pair(SessionOptions::default());
        let s = Arc::new(s);
        let s2 = s.clone();
        let waiting =
            tokio::spawn(async move { s2.request("x", None, Duration::from_secs(10)).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(server_out);
        let err = waiting.await.expect("join").expect_err("closed");
        assert!(matches!(err, SessionError::Closed { .. }), "{err:?}");
        assert!(s.is_closed());
    }

    #[tokio::test]
    async fn roots_are_offered_only_when_configured() {
        let roots = vec![json!({"uri": "file:///w", "name": "workspace"})];
        for (offer, expect_result) in [(None, false), (Some(roots.clone()), true)] {
            let (s, server_in, mut server_out) = pair(SessionOptions {
                roots: offer,
                ..Default::default()
            });
            let mut lines = BufReader::new(server_in).lines();
            server_out
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"roots/list\"}\n")
                .await
                .expect("write");
            let v: Value =
                serde_json::from_str(&lines.next_line().await.expect("read").expect("line"))
                    .expect("json");
            assert_eq!(v.get("result").is_some(), expect_result, "{v}");
            if expect_result {
                assert_eq!(v["result"]["roots"], json!(roots));
            } else {
                assert_eq!(v["error"]["code"], -32601);
            }
            drop(s);
        }
    }
}
