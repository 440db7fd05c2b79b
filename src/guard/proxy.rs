//! The transparent MCP proxy over stdio: every line the host writes goes to the server and
//! every line the server writes goes to the host, unchanged, `tools/list` included. On the
//! way guard reads what it needs: the tools' hints from the answers to the host's
//! `tools/list`, each `tools/call` (whose window opens before the server sees it, and which
//! waits while calls of another policy are in flight), each answer (which closes its window,
//! and with `--on-violation error` is replaced by an error naming what was refused).

use std::sync::{Arc, Mutex};

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::Mutex as AsyncMutex;

use super::policy::{Call, Window};
use crate::rpc::framing::{Frame, LineReader};

/// The longest line passed on (64 MiB); a longer one is dropped and said on stderr.
pub const MAX_LINE: usize = 64 << 20;

/// The JSON-RPC code of the error that replaces an answer with `--on-violation error`.
pub const VIOLATION_CODE: i64 = -32001;

/// The parts of a JSON-RPC message guard reads; the line itself is passed on untouched. Read
/// as hosts read it (a repeated key: the last one counts, as in `JSON.parse`), so that no line
/// a host takes as a message is lost to guard; `params` and `result` are left unparsed until a
/// listing or a call needs them (a tool's answer may be megabytes guard never reads).
struct Envelope<'a> {
    id: Option<Value>,
    method: Option<String>,
    params: Option<&'a RawValue>,
    /// Present (even `null`): an answer.
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
}

/// A message's members, unparsed.
pub(crate) type Members<'a> = std::collections::HashMap<String, &'a RawValue>;

impl<'a> Envelope<'a> {
    fn of(mut m: Members<'a>) -> Envelope<'a> {
        Envelope {
            id: m.get("id").and_then(|r| serde_json::from_str(r.get()).ok()),
            method: m
                .get("method")
                .and_then(|r| serde_json::from_str::<String>(r.get()).ok()),
            params: m.remove("params"),
            result: m.remove("result"),
            error: m.remove("error"),
        }
    }

    fn params(&self) -> Option<Value> {
        self.params.and_then(|p| serde_json::from_str(p.get()).ok())
    }
}

/// An id as comparable text (`7`, `"abc"`): the same value however it was spelled.
pub(crate) fn id_text(id: &Value) -> String {
    match id {
        // `5` and `5.0` are the same id.
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9e15 => format!("{}", f as i64),
            _ => n.to_string(),
        },
        v => v.to_string(),
    }
}

/// The messages of a line: one object, or the objects of a batch.
fn envelopes(line: &[u8]) -> Vec<Envelope<'_>> {
    if let Ok(m) = serde_json::from_slice::<Members<'_>>(line) {
        return vec![Envelope::of(m)];
    }
    serde_json::from_slice::<Vec<&RawValue>>(line)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|item| serde_json::from_str::<Members<'_>>(item.get()).ok())
        .map(Envelope::of)
        .collect()
}

/// What the proxy does with a refused call's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnViolation {
    /// The server's own answer goes to the host (the refused operation failed in the server).
    Pass,
    /// The answer is replaced by an error naming what was refused.
    Error,
}

/// The server's stdin, written by both directions (held calls are sent when a response
/// releases them).
pub type ToServer = Arc<AsyncMutex<Option<Box<dyn AsyncWrite + Send + Unpin>>>>;

/// Writes `line` to the server; false once its stdin is gone.
pub(crate) async fn send(to_server: &ToServer, line: &[u8]) -> bool {
    let mut guard = to_server.lock().await;
    let Some(w) = guard.as_mut() else {
        return false;
    };
    let ok = w.write_all(line).await.is_ok()
        && w.write_all(b"\n").await.is_ok()
        && w.flush().await.is_ok();
    if !ok {
        *guard = None;
    }
    ok
}

/// Host to server: reads the host's lines, opens windows, holds calls that must wait.
/// Returns when the host closes its end (the server's stdin is then closed).
pub async fn host_to_server(
    from_host: impl AsyncRead + Unpin,
    to_server: ToServer,
    window: Arc<Mutex<Window>>,
) {
    let mut reader = LineReader::new(from_host, MAX_LINE);
    loop {
        let line = match reader.next_frame().await {
            Ok(Frame::Line(l)) => l,
            Ok(Frame::Oversized { len, .. }) => {
                eprintln!(
                    "hintcheck guard: a message of the host of {len} bytes is over {MAX_LINE} bytes and was not passed on"
                );
                continue;
            }
            Ok(Frame::Eof { trailing }) => {
                if let Some(t) = trailing {
                    let _ = send(&to_server, &t).await;
                }
                break;
            }
            Err(_) => break,
        };
        let forward = {
            let mut w = window.lock().unwrap_or_else(|p| p.into_inner());
            from_host_line(&mut w, line)
        };
        for line in forward {
            if !send(&to_server, &line).await {
                break;
            }
        }
    }
    *to_server.lock().await = None;
}

/// What to do with one line of the host: the lines to pass on now, in order (none when it is
/// held; held calls a cancellation released after it).
pub fn from_host_line(w: &mut Window, line: Vec<u8>) -> Vec<Vec<u8>> {
    let envs = envelopes(&line);
    let batch = envs.len() > 1 || line.first() == Some(&b'[');
    let mut cancelled_held = false;
    let mut cancelled_running = Vec::new();
    let mut asked: Vec<(String, String)> = Vec::new();
    let mut meta = None;
    for e in &envs {
        let (Some(method), id) = (e.method.as_deref(), e.id.as_ref()) else {
            continue;
        };
        // Only the messages guard reads are parsed further.
        let params = matches!(
            method,
            "tools/list" | "tools/call" | "notifications/cancelled"
        )
        .then(|| e.params())
        .flatten();
        match (method, id) {
            ("tools/list", Some(id)) => {
                let first_page = params
                    .as_ref()
                    .and_then(|p| p.get("cursor"))
                    .is_none_or(Value::is_null);
                w.listing_asked(id_text(id), first_page);
            }
            ("tools/call", Some(id)) => {
                let tool = params
                    .as_ref()
                    .and_then(|p| p.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if meta.is_none() {
                    meta = params.as_ref().and_then(protocol_meta);
                }
                asked.push((id_text(id), tool));
            }
            ("notifications/cancelled", None) if !batch => {
                let Some(id) = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .map(id_text)
                else {
                    continue;
                };
                if w.cancel_held(&id) {
                    cancelled_held = true;
                } else {
                    // A call in flight that the host gave up: hosts do not wait for its
                    // answer, nor will the server send one. Its window closes (work it left
                    // runs under the outside-calls policy, which refuses more).
                    cancelled_running.push(id);
                }
            }
            _ => {}
        }
    }
    if cancelled_held {
        // The server never saw the request: it hears nothing of its cancellation.
        return Vec::new();
    }
    let mut released = Vec::new();
    for id in cancelled_running {
        released.extend(w.answered(&id).1);
    }
    if asked.iter().any(|(_, tool)| w.needs_listing(tool)) {
        // A tool guard never saw listed: its hints are learnt first (the line waits whole).
        return w
            .await_listing(asked, line, batch, meta)
            .into_iter()
            .chain(released)
            .collect();
    }
    let now = w.enter(asked, line, batch);
    now.into_iter().chain(released).collect()
}

/// Where the server's lines go: the host's stdin (over stdio), or the HTTP streams of the
/// requests they answer (`--transport http`).
pub trait ToHost {
    /// Passes `line` on; false when the host is gone.
    fn deliver(&mut self, line: Vec<u8>) -> impl std::future::Future<Output = bool> + Send;
}

/// The host at the other end of guard's stdout.
pub struct Stdout<W>(pub W);

impl<W: AsyncWrite + Unpin + Send> ToHost for Stdout<W> {
    async fn deliver(&mut self, line: Vec<u8>) -> bool {
        self.0.write_all(&line).await.is_ok()
            && self.0.write_all(b"\n").await.is_ok()
            && self.0.flush().await.is_ok()
    }
}

/// The members of a request's `_meta` that the 2026-07-28 era requires on every request
/// (protocol version, client capabilities and information), for guard's own listing.
fn protocol_meta(params: &Value) -> Option<Value> {
    let meta = params.get("_meta")?.as_object()?;
    let kept: serde_json::Map<String, Value> = meta
        .iter()
        .filter(|(k, _)| k.starts_with("io.modelcontextprotocol/"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!kept.is_empty()).then_some(Value::Object(kept))
}

/// Server to host: passes the server's lines on, reads listings and answers, releases held
/// calls. Returns when the server's stdout ends.
pub async fn server_to_host(
    from_server: impl AsyncRead + Unpin,
    mut to_host: impl ToHost,
    to_server: ToServer,
    window: Arc<Mutex<Window>>,
    on_violation: OnViolation,
) {
    let mut reader = LineReader::new(from_server, MAX_LINE);
    loop {
        let line = match reader.next_frame().await {
            Ok(Frame::Line(l)) => l,
            Ok(Frame::Oversized { len, .. }) => {
                eprintln!(
                    "hintcheck guard: a message of the server of {len} bytes is over {MAX_LINE} bytes and was not passed on"
                );
                continue;
            }
            Ok(Frame::Eof { trailing }) => {
                if let Some(t) = trailing {
                    to_host.deliver(t).await;
                }
                break;
            }
            Err(_) => break,
        };
        let (line, released) = {
            let mut w = window.lock().unwrap_or_else(|p| p.into_inner());
            from_server_line(&mut w, line, on_violation)
        };
        if let Some(line) = line {
            if !to_host.deliver(line).await {
                break;
            }
        }
        for held in released {
            send(&to_server, &held).await;
        }
    }
}

/// What to pass on for one line of the server (nothing: it answered guard's own listing),
/// and the lines it releases to the server (held calls, the next page of guard's listing).
pub fn from_server_line(
    w: &mut Window,
    line: Vec<u8>,
    on_violation: OnViolation,
) -> (Option<Vec<u8>>, Vec<Vec<u8>>) {
    let envs = envelopes(&line);
    let single = envs.len() == 1 && line.first() != Some(&b'[');
    let mut released = Vec::new();
    let mut replacement = None;
    for e in &envs {
        if e.method.as_deref() == Some("notifications/tools/list_changed") {
            w.tools_changed();
        }
        let Some(id) = e.id.as_ref().filter(|_| e.method.is_none()) else {
            continue;
        };
        let id = id_text(id);
        if w.fetching(&id) {
            let result = e
                .result
                .and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
            released.extend(w.fetch_answered(&id, result.as_ref()).unwrap_or_default());
            if single {
                // Guard's own listing: no host asked it.
                return (None, released);
            }
            continue;
        }
        if let Some(first_page) = w.listing_answered(&id) {
            let mut result = e
                .result
                .and_then(|r| serde_json::from_str::<Value>(r.get()).ok());
            let last_page = result
                .as_ref()
                .and_then(|r| r.get("nextCursor"))
                .is_none_or(Value::is_null);
            let tools = result
                .as_mut()
                .and_then(|r| match r.get_mut("tools").map(Value::take) {
                    Some(Value::Array(tools)) => Some(tools),
                    _ => None,
                });
            if let Some(tools) = tools {
                for note in w.listed(&tools, first_page, last_page) {
                    eprintln!(
                        "{}",
                        crate::text::escape::keeping_lines(&format!("hintcheck guard: {note}"))
                    );
                }
            }
        }
        if e.result.is_none() && e.error.is_none() {
            continue;
        }
        let (ended, more) = w.answered(&id);
        released.extend(more);
        if let (Some((call, refused)), OnViolation::Error, true) = (ended, on_violation, single) {
            if !refused.is_empty() {
                replacement = Some(violation_error(&id, &call, &refused));
            }
        }
    }
    (Some(replacement.unwrap_or(line)), released)
}

/// The error that replaces the answer of a call whose window had refusals.
fn violation_error(id: &str, call: &Call, refused: &[String]) -> Vec<u8> {
    let id: Value = serde_json::from_str(id).unwrap_or(Value::Null);
    let message = format!(
        "hintcheck guard refused what tool {} tried against its annotations: {}",
        call.tool,
        refused.first().map(String::as_str).unwrap_or("")
    );
    serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": VIOLATION_CODE,
            "message": message,
            "data": {"tool": call.tool, "refused": refused},
        }
    }))
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(w: &mut Window) {
        assert!(
            from_host_line(
                w,
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_vec()
            )
            .len()
                == 1
        );
        let (out, _) = from_server_line(
            w,
            br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read","annotations":{"readOnlyHint":true}},{"name":"write"}]}}"#.to_vec(),
            OnViolation::Error,
        );
        assert!(out.expect("passed on").starts_with(b"{\"jsonrpc\""));
    }

    #[test]
    fn a_call_takes_the_listed_hints_and_its_answer_closes_the_window() {
        let mut w = Window::new(false, Default::default());
        listed(&mut w);
        let call = br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"read","arguments":{}}}"#;
        assert_eq!(from_host_line(&mut w, call.to_vec()), vec![call.to_vec()]);
        assert!(w.now().policy.read_only);
        // A call of another policy waits.
        let write = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write"}}"#;
        assert!(from_host_line(&mut w, write.to_vec()).is_empty());
        let (out, released) = from_server_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":"a","result":{"content":[]}}"#.to_vec(),
            OnViolation::Error,
        );
        assert!(out.expect("passed on").ends_with(b"}}"));
        assert_eq!(released, vec![write.to_vec()]);
        assert!(!w.now().policy.read_only);
    }

    #[test]
    fn with_on_violation_error_a_refused_calls_answer_becomes_an_error() {
        let mut w = Window::new(false, Default::default());
        listed(&mut w);
        from_host_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read"}}"#.to_vec(),
        );
        w.note_refusal("refused write /srv/x by tool read");
        let (out, _) = from_server_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":5.0,"result":{}}"#.to_vec(),
            OnViolation::Error,
        );
        let v: Value = serde_json::from_slice(&out.expect("passed on")).expect("json");
        assert_eq!(v["id"], 5.0);
        assert_eq!(v["error"]["code"], VIOLATION_CODE);
        assert!(
            v["error"]["message"]
                .as_str()
                .expect("text")
                .contains("/srv/x")
        );
    }

    #[test]
    fn a_call_before_any_listing_waits_for_guards_own() {
        let mut w = Window::new(false, Default::default());
        let call = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":3}}}"#;
        let sent = from_host_line(&mut w, call.to_vec());
        assert_eq!(sent.len(), 1);
        let ask: Value = serde_json::from_slice(&sent[0]).expect("json");
        assert_eq!(ask["method"], "tools/list");
        // The era's _meta goes along; the call's own progress token does not.
        assert_eq!(
            ask["params"]["_meta"],
            serde_json::json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})
        );
        assert!(w.now().calls.is_empty(), "the call waits");
        let answer = serde_json::json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"tools": [{"name": "read", "annotations": {"readOnlyHint": true}}]}});
        let (to_host, go) = from_server_line(
            &mut w,
            serde_json::to_vec(&answer).expect("json"),
            OnViolation::Pass,
        );
        assert!(to_host.is_none(), "guard's own listing stays with guard");
        assert_eq!(go, vec![call.to_vec()]);
        assert!(w.now().policy.read_only);
        // Listed once: an unknown tool later goes at once (under the worst case).
        from_server_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec(),
            OnViolation::Pass,
        );
        let other = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}}"#;
        assert_eq!(from_host_line(&mut w, other.to_vec()), vec![other.to_vec()]);
    }

    #[test]
    fn guards_own_listing_never_relaxes_what_the_host_was_shown() {
        let mut w = Window::new(false, Default::default());
        listed(&mut w);
        // The server says its tools changed, and a call of an unknown tool makes guard list.
        from_server_line(
            &mut w,
            br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#.to_vec(),
            OnViolation::Pass,
        );
        let sent = from_host_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"nope"}}"#.to_vec(),
        );
        let ask: Value = serde_json::from_slice(&sent[0]).expect("json");
        assert_eq!(ask["method"], "tools/list");
        let flipped = serde_json::json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"tools": [{"name": "read", "annotations": {"readOnlyHint": false}}]}});
        from_server_line(
            &mut w,
            serde_json::to_vec(&flipped).expect("json"),
            OnViolation::Pass,
        );
        assert!(
            w.hints_of("read").read_only == Some(true),
            "still read-only"
        );
    }

    #[test]
    fn on_a_shared_server_one_hosts_listing_never_relaxes_anothers() {
        let mut w = Window::new(false, Default::default());
        w.share();
        listed(&mut w);
        from_host_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":7,"method":"tools/list"}"#.to_vec(),
        );
        from_server_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"read"}]}}"#.to_vec(),
            OnViolation::Pass,
        );
        assert_eq!(w.hints_of("read").read_only, Some(true));
    }

    #[test]
    fn garbage_passes_through_and_opens_nothing() {
        let mut w = Window::new(false, Default::default());
        for junk in [&b"not json"[..], b"[1,2", b"{\"id\":{}}", b"[]"] {
            assert_eq!(from_host_line(&mut w, junk.to_vec()), vec![junk.to_vec()]);
            let (out, released) = from_server_line(&mut w, junk.to_vec(), OnViolation::Error);
            assert_eq!(out.as_deref(), Some(junk));
            assert!(released.is_empty());
        }
        assert!(w.now().calls.is_empty());
    }

    #[test]
    fn a_cancelled_running_call_closes_its_window_and_releases_the_held_ones() {
        let mut w = Window::new(false, Default::default());
        listed(&mut w);
        from_host_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"}}"#.to_vec(),
        );
        let write = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write"}}"#;
        assert!(from_host_line(&mut w, write.to_vec()).is_empty());
        let cancel =
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#;
        assert_eq!(
            from_host_line(&mut w, cancel.to_vec()),
            vec![cancel.to_vec(), write.to_vec()]
        );
        assert!(!w.now().policy.read_only);
    }

    #[test]
    fn a_repeated_key_or_a_null_result_is_still_an_answer() {
        let mut w = Window::new(false, Default::default());
        listed(&mut w);
        from_host_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read"}}"#.to_vec(),
        );
        from_server_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":3,"id":3,"result":null}"#.to_vec(),
            OnViolation::Pass,
        );
        assert!(w.now().calls.is_empty());
    }

    #[test]
    fn a_cancelled_held_call_never_reaches_the_server() {
        let mut w = Window::new(false, Default::default());
        listed(&mut w);
        from_host_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read"}}"#.to_vec(),
        );
        assert!(
            from_host_line(
                &mut w,
                br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"write"}}"#
                    .to_vec()
            )
            .is_empty()
        );
        assert!(
            from_host_line(
                &mut w,
                br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#
                    .to_vec()
            )
            .is_empty()
        );
        let (_, released) = from_server_line(
            &mut w,
            br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec(),
            OnViolation::Pass,
        );
        assert!(released.is_empty());
    }
}
