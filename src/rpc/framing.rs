//! Line framing for JSON-RPC over stdio: a bounded, cancellation-free line reader and the
//! classifier that turns every line the server writes into a [`Classified`] record. Nothing
//! here trusts the peer: lines are capped, non-UTF-8 and non-JSON input is kept as data, and
//! classification never fails.

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt};

/// One unit read from the server's stdout.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line without its terminating `\n`.
    Line(Vec<u8>),
    /// A line longer than the cap. `head` holds its first bytes, `len` the full length seen.
    Oversized { head: Vec<u8>, len: u64 },
    /// End of stream. `trailing` holds bytes after the last newline, if any.
    Eof { trailing: Option<Vec<u8>> },
}

/// How many bytes of an oversized line are kept for the transcript.
pub const OVERSIZED_HEAD: usize = 256;

/// Reads newline-delimited frames with a hard cap on the length of a line.
///
/// A line longer than `cap` is not buffered: its first bytes are kept and the rest is
/// counted and dropped until the next newline, so a hostile 1 GiB line costs no memory.
pub struct LineReader<R> {
    inner: R,
    cap: usize,
    pending: Vec<u8>,
    chunk: Box<[u8]>,
    /// Set while dropping the tail of an oversized line: (kept head, bytes seen so far).
    discarding: Option<(Vec<u8>, u64)>,
    /// How much of `pending` is known to hold no newline (so each byte is searched once).
    scanned: usize,
    eof: bool,
}

/// The position of the first `\n`, found with the standard library's optimised `memchr`
/// (through `BufRead::skip_until`), which stays fast in unoptimised builds too.
fn find_newline(data: &[u8]) -> Option<usize> {
    use std::io::BufRead;
    let mut rest = data;
    let n = rest.skip_until(b'\n').unwrap_or(0);
    (n > 0 && data[n - 1] == b'\n').then(|| n - 1)
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    /// A reader over `inner` whose lines may be at most `cap` bytes long.
    pub fn new(inner: R, cap: usize) -> Self {
        Self {
            inner,
            cap: cap.max(1),
            pending: Vec::new(),
            chunk: vec![0u8; 64 * 1024].into_boxed_slice(),
            discarding: None,
            scanned: 0,
            eof: false,
        }
    }

    /// The next frame. After `Frame::Eof` every further call returns `Eof { trailing: None }`.
    pub async fn next_frame(&mut self) -> std::io::Result<Frame> {
        loop {
            if let Some(frame) = self.take_buffered() {
                return Ok(frame);
            }
            if self.eof {
                if let Some((head, len)) = self.discarding.take() {
                    return Ok(Frame::Oversized { head, len });
                }
                let trailing = if self.pending.is_empty() {
                    None
                } else {
                    Some(std::mem::take(&mut self.pending))
                };
                return Ok(Frame::Eof { trailing });
            }
            let n = match self.inner.read(&mut self.chunk).await {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                self.eof = true;
                continue;
            }
            let data = &self.chunk[..n];
            if let Some((head, len)) = self.discarding.as_mut() {
                match find_newline(data) {
                    Some(pos) => {
                        *len += pos as u64;
                        let frame = Frame::Oversized {
                            head: std::mem::take(head),
                            len: *len,
                        };
                        self.discarding = None;
                        self.pending.extend_from_slice(&data[pos + 1..]);
                        // The rest of the chunk may hold more lines, but first hand back this one.
                        return Ok(frame);
                    }
                    None => {
                        *len += n as u64;
                        continue;
                    }
                }
            }
            self.pending.extend_from_slice(data);
        }
    }

    /// A complete frame from `pending`, or switches to discarding when the cap is exceeded.
    fn take_buffered(&mut self) -> Option<Frame> {
        if self.discarding.is_some() {
            return None;
        }
        let from = self.scanned.min(self.pending.len());
        if let Some(pos) = find_newline(&self.pending[from..]).map(|p| p + from) {
            self.scanned = 0;
            if pos > self.cap {
                let head = self.pending[..OVERSIZED_HEAD.min(pos)].to_vec();
                self.pending.drain(..=pos);
                return Some(Frame::Oversized {
                    head,
                    len: pos as u64,
                });
            }
            let mut line: Vec<u8> = self.pending.drain(..=pos).collect();
            line.pop();
            return Some(Frame::Line(line));
        }
        self.scanned = self.pending.len();
        if self.pending.len() > self.cap {
            let head = self.pending[..OVERSIZED_HEAD.min(self.pending.len())].to_vec();
            let len = self.pending.len() as u64;
            self.pending.clear();
            self.scanned = 0;
            self.discarding = Some((head, len));
        }
        None
    }
}

/// A JSON-RPC id as the peer sent it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RpcId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl RpcId {
    /// The id as a JSON value.
    pub fn to_value(&self) -> Value {
        match self {
            RpcId::Number(n) => Value::from(*n),
            RpcId::String(s) => Value::from(s.clone()),
        }
    }

    fn from_value(v: &Value) -> Option<RpcId> {
        match v {
            Value::Number(n) => n.as_i64().map(RpcId::Number),
            Value::String(s) => Some(RpcId::String(s.clone())),
            _ => None,
        }
    }
}

impl std::fmt::Display for RpcId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RpcId::Number(n) => write!(f, "{n}"),
            RpcId::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// The error message.
    pub message: String,
    /// Optional extra data.
    pub data: Option<Value>,
}

/// A well-formed JSON-RPC message from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request the server sends us.
    Request {
        /// Its id.
        id: RpcId,
        /// Its method.
        method: String,
        /// Its params, if any.
        params: Option<Value>,
    },
    /// A notification.
    Notification {
        /// Its method.
        method: String,
        /// Its params, if any.
        params: Option<Value>,
    },
    /// A response to one of our requests.
    Response {
        /// The id it answers.
        id: RpcId,
        /// The result or the error.
        outcome: Result<RawResult, RpcError>,
    },
}

/// A response's result as the JSON text it arrived as (checked to be JSON), parsed when it is
/// read: a listing of 100,000 tools is then read one tool at a time instead of becoming one
/// tree of maps that holds hundreds of megabytes.
#[derive(Debug, Clone)]
pub struct RawResult(Box<RawValue>);

impl RawResult {
    /// The result parsed whole.
    pub fn value(&self) -> Value {
        serde_json::from_str(self.0.get()).unwrap_or(Value::Null)
    }

    /// The JSON text.
    pub fn text(&self) -> &str {
        self.0.get()
    }

    /// A result made from a value (tests, and answers built by the harness).
    pub fn from_value(v: &Value) -> RawResult {
        RawResult(RawValue::from_string(v.to_string()).unwrap_or_else(|_| null_raw()))
    }
}

fn null_raw() -> Box<RawValue> {
    RawValue::from_string("null".into()).expect("null is JSON")
}

impl PartialEq for RawResult {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// What a line turned out to be. Everything but `Message` is garbage that is recorded, never
/// answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Classified {
    /// A valid JSON-RPC 2.0 message.
    Message(Message),
    /// An empty or whitespace-only line.
    Blank,
    /// Bytes that are not UTF-8.
    NotUtf8,
    /// UTF-8 that is not JSON.
    NotJson(String),
    /// JSON that is not a JSON-RPC 2.0 message; the string says why.
    NotJsonRpc(String),
    /// A line longer than the cap.
    Oversized(u64),
}

impl Classified {
    /// A short machine-friendly name for the class, used in reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Classified::Message(Message::Request { .. }) => "request",
            Classified::Message(Message::Notification { .. }) => "notification",
            Classified::Message(Message::Response { .. }) => "response",
            Classified::Blank => "blank",
            Classified::NotUtf8 => "not-utf8",
            Classified::NotJson(_) => "not-json",
            Classified::NotJsonRpc(_) => "not-jsonrpc",
            Classified::Oversized(_) => "oversized",
        }
    }

    /// Whether the line is garbage (not a well-formed message).
    pub fn is_garbage(&self) -> bool {
        !matches!(self, Classified::Message(_))
    }
}

/// Classifies one line (without its newline). Never fails and never panics.
pub fn classify(line: &[u8]) -> Classified {
    let Ok(text) = std::str::from_utf8(line) else {
        return Classified::NotUtf8;
    };
    if text.trim().is_empty() {
        return Classified::Blank;
    }
    // An object is read member by member, each kept as its text (checked to be JSON): the
    // result stays text until it is read. Anything else is not a message.
    let members: Vec<(String, Box<RawValue>)> = match text.trim_start().as_bytes().first() {
        Some(b'{') => match serde_json::from_str::<RawMembers>(text) {
            Ok(m) => m.0,
            Err(e) => return Classified::NotJson(e.to_string()),
        },
        Some(b'[') => {
            return match serde_json::from_str::<&RawValue>(text) {
                Ok(_) => Classified::NotJsonRpc("a JSON array (batches are not allowed)".into()),
                Err(e) => Classified::NotJson(e.to_string()),
            };
        }
        _ => {
            return match serde_json::from_str::<Value>(text) {
                Ok(other) => {
                    Classified::NotJsonRpc(format!("a bare JSON {}", json_type_name(&other)))
                }
                Err(e) => Classified::NotJson(e.to_string()),
            };
        }
    };
    // Later duplicates win, as they do for a parsed object.
    let mut result = None;
    let mut map = Map::new();
    for (key, raw) in members {
        if key == "result" {
            result = Some(raw);
        } else {
            map.remove(&key);
            map.insert(key, serde_json::from_str(raw.get()).unwrap_or(Value::Null));
        }
    }
    classify_object(map, result)
}

/// The members of a JSON object, each as its text, in order.
struct RawMembers(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for RawMembers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RawMembers;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<RawMembers, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = access.next_entry::<String, Box<RawValue>>()? {
                    out.push(entry);
                }
                Ok(RawMembers(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

fn classify_object(mut map: Map<String, Value>, result: Option<Box<RawValue>>) -> Classified {
    match map.get("jsonrpc") {
        Some(Value::String(v)) if v == "2.0" => {}
        Some(other) => {
            return Classified::NotJsonRpc(format!("\"jsonrpc\" is {other}, not \"2.0\""));
        }
        None => return Classified::NotJsonRpc("no \"jsonrpc\" member".into()),
    }
    let id = map.remove("id");
    if let Some(method) = map.remove("method") {
        let Value::String(method) = method else {
            return Classified::NotJsonRpc("\"method\" is not a string".into());
        };
        if result.is_some() || map.contains_key("error") {
            return Classified::NotJsonRpc("has both \"method\" and a result or error".into());
        }
        let params = map.remove("params");
        if let Some(p) = &params {
            if !p.is_object() && !p.is_array() {
                return Classified::NotJsonRpc(
                    "\"params\" is neither an object nor an array".into(),
                );
            }
        }
        return match id {
            None => Classified::Message(Message::Notification { method, params }),
            Some(raw) => match RpcId::from_value(&raw) {
                Some(id) => Classified::Message(Message::Request { id, method, params }),
                None => {
                    Classified::NotJsonRpc(format!("request id {raw} is not a string or integer"))
                }
            },
        };
    }
    let Some(raw_id) = id else {
        return Classified::NotJsonRpc("neither a request, a notification nor a response".into());
    };
    let Some(id) = RpcId::from_value(&raw_id) else {
        return Classified::NotJsonRpc(format!("response id {raw_id} is not a string or integer"));
    };
    let error = map.remove("error");
    match (result, error) {
        (Some(_), Some(_)) => {
            Classified::NotJsonRpc("response has both \"result\" and \"error\"".into())
        }
        (None, None) => {
            Classified::NotJsonRpc("response has neither \"result\" nor \"error\"".into())
        }
        (Some(result), None) => Classified::Message(Message::Response {
            id,
            outcome: Ok(RawResult(result)),
        }),
        (None, Some(error)) => match parse_error(error) {
            Ok(err) => Classified::Message(Message::Response {
                id,
                outcome: Err(err),
            }),
            Err(why) => Classified::NotJsonRpc(why),
        },
    }
}

fn parse_error(error: Value) -> Result<RpcError, String> {
    let Value::Object(mut e) = error else {
        return Err("\"error\" is not an object".into());
    };
    let code = match e.get("code") {
        Some(Value::Number(n)) if n.is_i64() => n.as_i64().unwrap_or_default(),
        _ => return Err("\"error.code\" is not an integer".into()),
    };
    let message = match e.remove("message") {
        Some(Value::String(s)) => s,
        _ => return Err("\"error.message\" is not a string".into()),
    };
    Ok(RpcError {
        code,
        message,
        data: e.remove("data"),
    })
}

/// The JSON type name of a value, as JSON Schema spells it.
pub fn json_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    /// An AsyncRead that hands out its data in fixed-size pieces, to tear lines apart.
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        step: usize,
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            let end = (self.pos + self.step)
                .min(self.data.len())
                .min(self.pos + buf.remaining());
            let start = self.pos;
            buf.put_slice(&self.data[start..end]);
            self.pos = end;
            Poll::Ready(Ok(()))
        }
    }

    async fn frames(data: &[u8], step: usize, cap: usize) -> Vec<Frame> {
        let mut reader = LineReader::new(
            Trickle {
                data: data.to_vec(),
                pos: 0,
                step,
            },
            cap,
        );
        let mut out = Vec::new();
        loop {
            let f = reader
                .next_frame()
                .await
                .expect("in-memory reads do not fail");
            let end = matches!(f, Frame::Eof { .. });
            out.push(f);
            if end {
                return out;
            }
        }
    }

    #[tokio::test]
    async fn torn_lines_are_reassembled_at_every_split() {
        let data = b"{\"a\":1}\n\n{\"b\":\"\xc3\xa9\"}\ntail";
        for step in 1..=data.len() {
            let got = frames(data, step, 1024).await;
            assert_eq!(
                got,
                vec![
                    Frame::Line(b"{\"a\":1}".to_vec()),
                    Frame::Line(Vec::new()),
                    Frame::Line(b"{\"b\":\"\xc3\xa9\"}".to_vec()),
                    Frame::Eof {
                        trailing: Some(b"tail".to_vec())
                    },
                ],
                "step {step}"
            );
        }
    }

    #[tokio::test]
    async fn oversized_lines_are_dropped_but_counted_and_the_stream_recovers() {
        let mut data = vec![b'x'; 5000];
        data.push(b'\n');
        data.extend_from_slice(b"ok\n");
        for step in [1, 7, 100, 4096, 10_000] {
            let got = frames(&data, step, 1000).await;
            assert_eq!(got.len(), 3, "step {step}: {got:?}");
            match &got[0] {
                Frame::Oversized { head, len } => {
                    assert_eq!(*len, 5000, "step {step}");
                    assert_eq!(head.len(), OVERSIZED_HEAD);
                }
                other => panic!("step {step}: expected oversized, got {other:?}"),
            }
            assert_eq!(got[1], Frame::Line(b"ok".to_vec()));
        }
    }

    #[tokio::test]
    async fn oversized_line_at_eof_is_reported() {
        let data = vec![b'y'; 3000];
        let got = frames(&data, 512, 1000).await;
        assert!(
            matches!(got[0], Frame::Oversized { len: 3000, .. }),
            "{got:?}"
        );
        assert_eq!(got[1], Frame::Eof { trailing: None });
    }

    #[test]
    fn classification_covers_every_kind_of_garbage() {
        assert_eq!(classify(b"   ").kind(), "blank");
        assert_eq!(classify(b"\xff\xfe").kind(), "not-utf8");
        assert_eq!(classify(b"Starting server...").kind(), "not-json");
        assert_eq!(classify(b"[1,2]").kind(), "not-jsonrpc");
        assert_eq!(classify(b"42").kind(), "not-jsonrpc");
        assert_eq!(classify(br#"{"id":1,"result":{}}"#).kind(), "not-jsonrpc");
        assert_eq!(
            classify(br#"{"jsonrpc":"1.0","id":1,"result":{}}"#).kind(),
            "not-jsonrpc"
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#)
                .kind(),
            "not-jsonrpc"
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":null,"result":{}}"#).kind(),
            "not-jsonrpc"
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#).kind(),
            "not-jsonrpc"
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","method":7}"#).kind(),
            "not-jsonrpc"
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#).kind(),
            "not-jsonrpc"
        );
    }

    #[test]
    fn classification_accepts_well_formed_messages() {
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
            Classified::Message(Message::Request {
                id: RpcId::String("a".into()),
                method: "ping".into(),
                params: None
            })
        );
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#).kind(),
            "notification"
        );
        assert_eq!(
            classify(b"{\"jsonrpc\":\"2.0\",\"id\":3,\"error\":{\"code\":-32601,\"message\":\"nope\"}}\r"),
            Classified::Message(Message::Response {
                id: RpcId::Number(3),
                outcome: Err(RpcError {
                    code: -32601,
                    message: "nope".into(),
                    data: None
                })
            })
        );
    }

    #[test]
    fn a_result_stays_the_text_it_arrived_as_until_it_is_read() {
        let line = br#"{"jsonrpc":"2.0","result":{"tools":[{"name":"a"}, {"name":"b"}]},"id":7}"#;
        let Classified::Message(Message::Response { id, outcome }) = classify(line) else {
            panic!("a response");
        };
        assert_eq!(id, RpcId::Number(7));
        let result = outcome.expect("a result");
        assert_eq!(result.text(), r#"{"tools":[{"name":"a"}, {"name":"b"}]}"#);
        assert_eq!(result.value()["tools"][1]["name"], "b");
        // Members named twice: the later one counts, as in a parsed object.
        let twice = br#"{"jsonrpc":"2.0","id":1,"result":1,"result":{"x":2}}"#;
        let Classified::Message(Message::Response { outcome, .. }) = classify(twice) else {
            panic!("a response");
        };
        assert_eq!(
            outcome.expect("result").value(),
            serde_json::json!({"x": 2})
        );
        // Trailing garbage after the object is not JSON.
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":1,"result":{}} x"#).kind(),
            "not-json"
        );
    }
}
