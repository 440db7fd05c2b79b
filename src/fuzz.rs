//! Fuzz entry points: each takes arbitrary bytes, must never panic, hang or grow without
//! bound, and checks the properties that must hold for any input. They are driven by
//! coverage-guided `cargo fuzz` targets in `fuzz/` (nightly) and, on the stable toolchain,
//! by the bounded mutation driver in the tests (`tests/it/fuzz.rs`), both over the corpus in
//! `fuzz/corpus/<target>/`.

use std::collections::HashSet;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, ReadBuf};

use crate::exercise::synth::synthesize_arguments;
use crate::mcp::tool::parse_tool;
use crate::rpc::framing::{Classified, Frame, LineReader, Message, OVERSIZED_HEAD, classify};
use crate::rpc::session::{Session, SessionOptions};

/// The names of the targets (and of their corpus directories).
pub const TARGETS: [&str; 3] = ["framing", "session", "synthesis"];

/// Runs the named target on one input.
pub fn run(target: &str, data: &[u8]) {
    match target {
        "framing" => framing(data),
        "session" => session(data),
        "synthesis" => synthesis(data),
        other => panic!("no fuzz target {other:?}"),
    }
}

/// Hands out `data` in pieces whose sizes come from the data itself, so lines and UTF-8
/// sequences are torn across reads.
struct Torn {
    data: Vec<u8>,
    pos: usize,
    sizes: Vec<u8>,
    turn: usize,
}

impl Torn {
    fn new(data: &[u8], sizes: &[u8]) -> Torn {
        Torn {
            data: data.to_vec(),
            pos: 0,
            sizes: sizes.to_vec(),
            turn: 0,
        }
    }
}

impl AsyncRead for Torn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let size = match self.sizes.get(self.turn % self.sizes.len().max(1)) {
            Some(s) => usize::from(*s % 64) + 1,
            None => 64,
        };
        self.turn += 1;
        let left = self.data.len() - self.pos;
        let n = size.min(left).min(buf.remaining());
        let start = self.pos;
        buf.put_slice(&self.data[start..start + n]);
        self.pos += n;
        Poll::Ready(Ok(()))
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}

/// Framing: any byte stream is cut into lines no longer than the cap (oversized lines keep
/// only their head), nothing is invented, and every line can be classified.
pub fn framing(data: &[u8]) {
    let (cap, rest) = match data.split_first() {
        Some((c, rest)) => (usize::from(*c) + 1, rest),
        None => (16, data),
    };
    let split = rest.len() / 8;
    let (sizes, stream) = rest.split_at(split);
    runtime().block_on(async {
        let mut reader = LineReader::new(Torn::new(stream, sizes), cap);
        let mut seen = 0u64;
        loop {
            let frame = reader
                .next_frame()
                .await
                .expect("in-memory reads do not fail");
            match frame {
                Frame::Line(line) => {
                    assert!(
                        line.len() <= cap,
                        "a line of {} over the cap {cap}",
                        line.len()
                    );
                    seen += line.len() as u64 + 1;
                    let _ = classify(&line).kind();
                }
                Frame::Oversized { head, len } => {
                    assert!(head.len() <= OVERSIZED_HEAD && len > cap as u64);
                    seen += len;
                }
                Frame::Eof { trailing } => {
                    seen += trailing.map_or(0, |t| t.len() as u64);
                    break;
                }
            }
        }
        assert!(
            seen <= stream.len() as u64 + 1,
            "more bytes framed ({seen}) than read ({})",
            stream.len()
        );
    });
}

/// Session: whatever the server sends, the session ends its request within the timeout and
/// writes nothing but its own requests and answers to the server's well-formed requests.
pub fn session(data: &[u8]) {
    let valid_request_ids: HashSet<String> = data
        .split(|b| *b == b'\n')
        .filter_map(|line| match classify(line) {
            Classified::Message(Message::Request { id, .. }) => Some(id.to_value().to_string()),
            _ => None,
        })
        .collect();
    let written = runtime().block_on(async {
        let (client_in, mut server_in) = tokio::io::duplex(1 << 20);
        let session = Session::start(
            Instant::now(),
            client_in,
            Torn::new(data, &data[..data.len().min(16)]),
            None,
            SessionOptions {
                max_line_bytes: 4096,
                first_id: Some(7),
                ..SessionOptions::default()
            },
        );
        let started = Instant::now();
        let _ = session
            .request("tools/list", Some(json!({})), Duration::from_millis(20))
            .await;
        assert!(started.elapsed() < Duration::from_secs(2), "a request hung");
        session.close_stdin().await;
        let mut written = Vec::new();
        let _ = tokio::time::timeout(
            Duration::from_millis(200),
            server_in.read_to_end(&mut written),
        )
        .await;
        written
    });
    for line in written.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: Value = serde_json::from_slice(line).expect("the session writes JSON");
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        if v.get("method").is_some() {
            continue; // our own request or notification
        }
        let id = v["id"].to_string();
        assert!(
            valid_request_ids.contains(&id),
            "answered {id}, which no well-formed request of the server carried: {v}"
        );
    }
}

/// Synthesis: any JSON as an `inputSchema` yields an arguments object of bounded size and
/// depth, deterministically.
pub fn synthesis(data: &[u8]) {
    let Ok(schema) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let seed = data.len() as u64;
    let got = synthesize_arguments(&schema, seed, "fuzz", None, true);
    assert!(got.arguments.is_object(), "arguments must be an object");
    assert!(
        got.arguments.to_string().len() < 16 << 20,
        "arguments grew beyond 16 MiB"
    );
    assert_eq!(
        synthesize_arguments(&schema, seed, "fuzz", None, true),
        got,
        "not deterministic"
    );
    let tool = json!({"name": "fuzz", "inputSchema": schema, "annotations": schema});
    let _ = parse_tool(&tool, 0);
}
