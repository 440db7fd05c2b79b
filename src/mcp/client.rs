//! The MCP client of hintcheck: the dual-era handshake (probe `server/discover`, fall back to
//! `initialize`), the tool inventory with page caps and repeated-cursor detection, and
//! `tools/call`. It declares no client capabilities and only sends what it chose to send.
//! Whatever the server does wrong comes back as data ([`ProtocolNote`]), not as an error.

use std::collections::HashSet;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::tool::{ToolDecl, UnusableTool, parse_tool, sha256_hex, shorten};
use crate::rpc::framing::{RpcError, json_type_name};
use crate::rpc::session::{Reply, Session, SessionError};

/// The modern protocol revision we speak.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The newest handshake-era revision we speak.
pub const LEGACY_VERSION: &str = "2025-11-25";
/// Handshake-era revisions we understand.
pub const LEGACY_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Which protocol era to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EraChoice {
    /// Probe `server/discover`, fall back to `initialize`.
    Auto,
    /// Only `server/discover`.
    Modern,
    /// Only `initialize`.
    Legacy,
}

/// The era the session settled on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "era", content = "version")]
pub enum Era {
    /// 2026-07-28 and later: per-request `_meta`, no handshake.
    Modern(String),
    /// 2025-11-25 and earlier: `initialize` handshake.
    Legacy(String),
}

impl Era {
    /// The negotiated protocol version.
    pub fn version(&self) -> &str {
        match self {
            Era::Modern(v) | Era::Legacy(v) => v,
        }
    }
}

/// Something the server did that the protocol does not allow or recommend.
#[derive(Debug, Clone, Serialize)]
pub struct ProtocolNote {
    /// Where it happened: `handshake`, `tools/list`, `tools/call <name>`.
    pub context: String,
    /// What happened.
    pub message: String,
}

/// What the handshake learned.
#[derive(Debug, Clone, Serialize)]
pub struct ServerIdentity {
    /// The era and version.
    pub era: Era,
    /// `serverInfo` as sent.
    pub server_info: Option<Value>,
    /// The server's capabilities object.
    pub capabilities: Option<Value>,
    /// `instructions`, shortened.
    pub instructions: Option<String>,
}

/// Why the handshake failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The transport failed (timeout, closed stream).
    #[error("handshake failed")]
    Session(#[from] SessionError),
    /// The server answered with an error.
    #[error("the server refused {method}: {code} {message}")]
    Refused {
        /// The method.
        method: &'static str,
        /// The error code.
        code: i64,
        /// The error message.
        message: String,
    },
    /// No answer to the greeting within the handshake timeout, probe included.
    #[error("no answer to {asked} within the handshake timeout ({})", crate::text::format_duration(*within))]
    NoAnswer {
        /// What was asked (`server/discover, then initialize`).
        asked: String,
        /// The handshake timeout.
        within: Duration,
    },
    /// The answer was not a usable result.
    #[error("the answer to {method} is unusable: {why}")]
    Unusable {
        /// The method.
        method: &'static str,
        /// Why.
        why: String,
    },
}

/// Timeouts and limits of the client.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Which era to use.
    pub era: EraChoice,
    /// How long to wait for `server/discover` before assuming a handshake-era server.
    pub discover_timeout: Duration,
    /// How long the handshake (and each `tools/list` page) may take.
    pub handshake_timeout: Duration,
    /// Most `tools/list` pages read.
    pub max_pages: usize,
    /// Most tools kept.
    pub max_tools: usize,
    /// Whether the client declares the `roots` capability.
    pub offer_roots: bool,
    /// Most `input_required` rounds answered per modern request.
    pub max_input_rounds: usize,
    /// What the client calls itself (`clientInfo`): an ordinary host's name and version by
    /// default ([`DEFAULT_CLIENT_NAME`]), so that a server cannot tell it is being checked.
    pub client_name: String,
    /// See `client_name`.
    pub client_version: String,
    /// Ends the `server/discover` probe before its timeout where the server is shown to have
    /// left it unanswered; without it, a server that ignores the probe costs its whole wait.
    pub probe_left_unanswered: Option<LeftUnanswered>,
}

/// Says, when looked at while the `server/discover` probe waits, whether the server has
/// taken the probe in and waits for more input without having answered, so that nothing it
/// runs can answer before the probe's time is up (given the time the probe has left).
#[derive(Clone)]
pub struct LeftUnanswered(pub std::sync::Arc<dyn Fn(Duration) -> bool + Send + Sync>);

impl std::fmt::Debug for LeftUnanswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeftUnanswered(..)")
    }
}

/// How soon a waiting `server/discover` probe first looks whether it was left unanswered,
/// and the longest pause between two looks.
const UNANSWERED_LOOK_EVERY: Duration = Duration::from_millis(4);
const UNANSWERED_LOOK_AT_MOST_EVERY: Duration = Duration::from_millis(32);

/// The `clientInfo` name sent unless `--client-info` says otherwise: a common host's.
pub const DEFAULT_CLIENT_NAME: &str = "Visual Studio Code";
/// The version sent with [`DEFAULT_CLIENT_NAME`].
pub const DEFAULT_CLIENT_VERSION: &str = "1.105.1";

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            era: EraChoice::Auto,
            discover_timeout: Duration::from_secs(3),
            handshake_timeout: Duration::from_secs(30),
            max_pages: 100,
            max_tools: 10_000,
            offer_roots: false,
            max_input_rounds: 4,
            client_name: DEFAULT_CLIENT_NAME.into(),
            client_version: DEFAULT_CLIENT_VERSION.into(),
            probe_left_unanswered: None,
        }
    }
}

/// The tools the server listed.
#[derive(Debug, Clone, Default)]
pub struct Inventory {
    /// Usable tools, in listing order.
    pub tools: Vec<ToolDecl>,
    /// Listed entries that cannot be called.
    pub unusable: Vec<UnusableTool>,
    /// Pages read.
    pub pages: usize,
    /// Whether the listing was cut short (page cap, repeated cursor, tool cap, error).
    pub incomplete: Option<String>,
    /// SHA-256 over the tool definitions in order.
    pub sha256: String,
    /// Whether the server announced `tools.resolve` (SEP-1862).
    pub resolve_announced: bool,
}

/// How one `tools/call` ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum CallOutcome {
    /// A result without `isError: true`.
    Ok {
        /// The first text content, shortened.
        text: String,
        /// SHA-256 of the result without `_meta`.
        result_sha256: String,
    },
    /// A result without `isError` that says it failed ("Error: …", "… not found", a JSON
    /// object about an `error`): not a success (see [`super::error_like`]).
    ErrorLike {
        /// The first text content, shortened.
        text: String,
        /// SHA-256 of the result without `_meta`.
        result_sha256: String,
        /// Why it looks like a failure.
        why: String,
    },
    /// A result with `isError: true`.
    ToolError {
        /// The first text content, shortened.
        text: String,
        /// SHA-256 of the result without `_meta`.
        result_sha256: String,
    },
    /// A JSON-RPC error response.
    RpcError {
        /// The code.
        code: i64,
        /// The message, shortened.
        message: String,
    },
    /// No answer within the call timeout.
    Timeout {
        /// Milliseconds waited.
        after_ms: u64,
    },
    /// No answer within the call timeout, while the server still answered a `ping`: the tool
    /// waits (for an event, a peer, a long poll); the server is not hung and keeps serving.
    Waiting {
        /// Milliseconds waited.
        after_ms: u64,
    },
    /// The server's stdout ended before the answer.
    ServerDied,
    /// The answer was not a usable `CallToolResult`.
    Malformed {
        /// Why.
        why: String,
    },
}

impl CallOutcome {
    /// Whether another argument set may fare better: the tool reported an error, or the
    /// server rejected the parameters (-32602) or failed inside (-32603). Timeouts and crashes
    /// are not retried (the server is restarted instead).
    pub fn worth_another_attempt(&self) -> bool {
        matches!(
            self,
            CallOutcome::ToolError { .. }
                | CallOutcome::ErrorLike { .. }
                | CallOutcome::RpcError {
                    code: -32602 | -32603,
                    ..
                }
        )
    }

    /// Whether the call completed successfully (the tool ran and reported success).
    pub fn is_success(&self) -> bool {
        matches!(self, CallOutcome::Ok { .. })
    }

    /// Whether the server answered at all (success, tool error or JSON-RPC error).
    pub fn answered(&self) -> bool {
        matches!(
            self,
            CallOutcome::Ok { .. }
                | CallOutcome::ErrorLike { .. }
                | CallOutcome::ToolError { .. }
                | CallOutcome::RpcError { .. }
                | CallOutcome::Malformed { .. }
        )
    }

    /// What the outcome says, for a call that did not succeed: the tool's or the server's
    /// words, or what happened (no answer, a dead server); `None` for a success.
    pub fn said(&self) -> Option<String> {
        match self {
            CallOutcome::ToolError { text, .. } => Some(text.clone()),
            CallOutcome::ErrorLike { text, why, .. } => Some(format!("{text} ({why})")),
            CallOutcome::RpcError { code, message } => Some(format!("{code} {message}")),
            CallOutcome::Malformed { why } => Some(why.clone()),
            CallOutcome::Timeout { after_ms } => Some(format!("no answer within {after_ms} ms")),
            CallOutcome::Waiting { after_ms } => Some(format!(
                "no answer within {after_ms} ms while the server answered a ping: the tool waits"
            )),
            CallOutcome::ServerDied => Some("the server died".into()),
            CallOutcome::Ok { .. } => None,
        }
    }

    /// Short label.
    pub fn label(&self) -> &'static str {
        match self {
            CallOutcome::Ok { .. } => "ok",
            CallOutcome::ErrorLike { .. } => "error-like",
            CallOutcome::ToolError { .. } => "isError",
            CallOutcome::RpcError { .. } => "json-rpc error",
            CallOutcome::Timeout { .. } => "timeout",
            CallOutcome::Waiting { .. } => "waiting",
            CallOutcome::ServerDied => "server died",
            CallOutcome::Malformed { .. } => "malformed result",
        }
    }

    /// The digest of the result, when there is one.
    pub fn result_sha256(&self) -> Option<&str> {
        match self {
            CallOutcome::Ok { result_sha256, .. }
            | CallOutcome::ErrorLike { result_sha256, .. }
            | CallOutcome::ToolError { result_sha256, .. } => Some(result_sha256),
            _ => None,
        }
    }
}

/// A connected MCP client.
pub struct McpClient {
    session: Session,
    identity: ServerIdentity,
    options: ClientOptions,
    notes: Vec<ProtocolNote>,
}

impl McpClient {
    /// Performs the handshake over `session`.
    pub async fn connect(
        session: Session,
        mut options: ClientOptions,
    ) -> Result<McpClient, (Session, HandshakeError, Vec<ProtocolNote>)> {
        let mut notes = Vec::new();
        let result = handshake(&session, &options, &mut notes).await;
        // The probe's check holds what it watches (duplicates of the server's pipes, which
        // would keep its stdin open after hintcheck closes it): not kept past the greeting.
        options.probe_left_unanswered = None;
        match result {
            Ok(identity) => Ok(McpClient {
                session,
                identity,
                options,
                notes,
            }),
            Err(e) => Err((session, e, notes)),
        }
    }

    /// What the handshake learned.
    pub fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    /// The session underneath.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Gives the session back (for shutdown).
    pub fn into_session(self) -> (Session, Vec<ProtocolNote>) {
        (self.session, self.notes)
    }

    /// Protocol problems noticed so far.
    pub fn take_notes(&mut self) -> Vec<ProtocolNote> {
        std::mem::take(&mut self.notes)
    }

    fn params(&self, mut params: Value) -> Value {
        if let Era::Modern(version) = &self.identity.era {
            params["_meta"] = modern_meta(version, &self.options);
        }
        params
    }

    /// A request; in the modern era `input_required` results carrying only `requestState`
    /// are retried with a new id, a bounded number of times.
    async fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Reply, SessionError> {
        let mut params = self.params(params);
        let mut rounds = 0;
        loop {
            let reply = self
                .session
                .request(method, Some(params.clone()), timeout)
                .await?;
            let Ok(result) = &reply.outcome else {
                return Ok(reply);
            };
            if !matches!(self.identity.era, Era::Modern(_)) {
                return Ok(reply);
            }
            // Only the members that steer the exchange are read here (a listing stays text).
            #[derive(serde::Deserialize, Default)]
            struct Steering {
                #[serde(rename = "resultType")]
                result_type: Option<Value>,
                #[serde(rename = "inputRequests")]
                input_requests: Option<Value>,
                #[serde(rename = "requestState")]
                request_state: Option<Value>,
            }
            let steering: Steering = serde_json::from_str(result.text()).unwrap_or_default();
            match steering.result_type.as_ref().and_then(Value::as_str) {
                Some("input_required") => {
                    if steering.input_requests.is_some() {
                        self.notes.push(ProtocolNote {
                            context: method.into(),
                            message: "input_required with inputRequests, although hintcheck declared no client capabilities".into(),
                        });
                        return Ok(reply);
                    }
                    rounds += 1;
                    if rounds > self.options.max_input_rounds {
                        self.notes.push(ProtocolNote {
                            context: method.into(),
                            message: format!(
                                "still input_required after {} rounds",
                                self.options.max_input_rounds
                            ),
                        });
                        return Ok(reply);
                    }
                    params["requestState"] = steering.request_state.unwrap_or(Value::Null);
                }
                None | Some("complete") => return Ok(reply),
                Some(other) => {
                    self.notes.push(ProtocolNote {
                        context: method.into(),
                        message: format!("unknown resultType {other:?}"),
                    });
                    return Ok(reply);
                }
            }
        }
    }

    /// Whether the server answers a `ping` within `patience` (a call that timed out on a
    /// server that still answers is a tool that waits, not a hung server).
    pub async fn answers_ping(&mut self, patience: Duration) -> bool {
        self.session
            .request("ping", Some(json!({})), patience)
            .await
            .is_ok_and(|r| r.outcome.is_ok())
    }

    /// A request that runs no tool (one of the run's controls), and how the server answered
    /// it, in a few words: `answered`, `tool error: …`, `json-rpc error -32602 …`, or why no
    /// answer came. A listing's first page is read as text only.
    pub async fn control(&mut self, method: &str, params: Value, timeout: Duration) -> String {
        match self.request(method, params, timeout).await {
            Ok(reply) => match reply.outcome {
                Ok(result) if method == "tools/call" => {
                    let v = result.value();
                    if v.get("isError") == Some(&Value::Bool(true)) {
                        let text = v["content"][0]["text"].as_str().unwrap_or("").to_string();
                        format!("tool error: {}", shorten(&text, 120))
                    } else {
                        "answered".into()
                    }
                }
                Ok(_) => "answered".into(),
                Err(e) => format!("json-rpc error {} {}", e.code, shorten(&e.message, 120)),
            },
            Err(e) => e.to_string(),
        }
    }

    /// Whether the server announced `tools.resolve` (SEP-1862): only then is
    /// [`Self::resolve_tool`] ever sent.
    pub fn offers_resolve(&self) -> bool {
        super::resolve::announced(self.identity.capabilities.as_ref())
    }

    /// Asks the server what tool `name` resolves to for `arguments` (`tools/resolve`). The
    /// wait is hintcheck's own choice: an answer after it is not held against the server.
    pub async fn resolve_tool(
        &mut self,
        name: &str,
        arguments: &Value,
        timeout: Duration,
    ) -> super::resolve::Resolution {
        let params = self.params(json!({ "name": name, "arguments": arguments }));
        match self
            .session
            .probe(super::resolve::METHOD, Some(params), timeout)
            .await
        {
            Ok(reply) => super::resolve::interpret(name, reply.outcome.map(|r| r.value())),
            Err(e) => super::resolve::Resolution::failed(e.to_string()),
        }
    }

    /// Lists every tool, page by page.
    pub async fn list_tools(&mut self) -> Inventory {
        let mut inv = Inventory::default();
        let mut cursors = HashSet::new();
        let mut cursor: Option<String> = None;
        let mut raw_all = Vec::new();
        let mut names = HashSet::new();
        loop {
            if inv.pages >= self.options.max_pages {
                inv.incomplete = Some(format!(
                    "stopped after {} pages (page cap)",
                    self.options.max_pages
                ));
                break;
            }
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let timeout = self.options.handshake_timeout;
            let reply = match self.request("tools/list", params, timeout).await {
                Ok(r) => r,
                Err(e) => {
                    inv.incomplete = Some(format!("tools/list failed: {e}"));
                    break;
                }
            };
            inv.pages += 1;
            let result = match reply.outcome {
                Ok(r) => r,
                Err(e) => {
                    inv.incomplete = Some(format!(
                        "tools/list returned error {} {}",
                        e.code,
                        shorten(&e.message, 200)
                    ));
                    break;
                }
            };
            // The page is read one tool at a time from its text: only the tools kept are
            // ever parsed, and never all of them at once beside each other's maps.
            #[derive(serde::Deserialize)]
            struct Page<'a> {
                #[serde(borrow)]
                tools: Option<Vec<&'a serde_json::value::RawValue>>,
                #[serde(rename = "nextCursor")]
                next_cursor: Option<Value>,
            }
            let Ok(Page {
                tools: Some(tools),
                next_cursor,
            }) = serde_json::from_str::<Page>(result.text())
            else {
                inv.incomplete = Some("tools/list result has no tools array".into());
                break;
            };
            for raw in tools {
                let raw: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
                let raw = &raw;
                if inv.tools.len() + inv.unusable.len() >= self.options.max_tools {
                    inv.incomplete = Some(format!(
                        "more than {} tools; the rest were not read",
                        self.options.max_tools
                    ));
                    break;
                }
                let index = inv.tools.len() + inv.unusable.len();
                raw_all.push(raw.to_string());
                match parse_tool(raw, index) {
                    Ok(tool) => {
                        if !names.insert(tool.name.clone()) {
                            inv.unusable.push(UnusableTool {
                                index,
                                message: format!("duplicate tool name {:?}; only the first definition is verified", tool.name),
                                raw: shorten(&raw.to_string(), 300),
                            });
                            continue;
                        }
                        inv.tools.push(tool);
                    }
                    Err(u) => inv.unusable.push(u),
                }
            }
            if inv.incomplete.is_some() {
                break;
            }
            match next_cursor.as_ref() {
                None | Some(Value::Null) => break,
                Some(Value::String(c)) if c.is_empty() => break,
                Some(Value::String(c)) => {
                    if !cursors.insert(c.clone()) {
                        inv.incomplete = Some(format!(
                            "the server repeated cursor {:?}; stopped paging",
                            shorten(c, 80)
                        ));
                        break;
                    }
                    cursor = Some(c.clone());
                }
                Some(other) => {
                    inv.incomplete = Some(format!(
                        "nextCursor is a {}, not a string",
                        json_type_name(other)
                    ));
                    break;
                }
            }
        }
        if let Some(why) = &inv.incomplete {
            self.notes.push(ProtocolNote {
                context: "tools/list".into(),
                message: why.clone(),
            });
        }
        inv.sha256 = sha256_hex(raw_all.join("\n").as_bytes());
        inv.resolve_announced = self.offers_resolve();
        inv
    }

    /// Calls a tool once.
    pub async fn call_tool(
        &mut self,
        name: &str,
        arguments: &Value,
        timeout: Duration,
    ) -> CallOutcome {
        self.call_tool_with_result(name, arguments, timeout).await.0
    }

    /// [`Self::call_tool`], with the result object as the server sent it (without `_meta`)
    /// when there was one (what the explorer learns from), and the data labels its `_meta`
    /// and its content blocks' carried (see [`super::labels`]).
    pub async fn call_tool_with_result(
        &mut self,
        name: &str,
        arguments: &Value,
        timeout: Duration,
    ) -> (
        CallOutcome,
        Option<Value>,
        Option<super::labels::ResultLabels>,
    ) {
        let params = json!({ "name": name, "arguments": arguments });
        let reply = match self.request("tools/call", params, timeout).await {
            Ok(r) => r,
            // (A request is never given up on before its timeout.)
            Err(
                SessionError::Timeout { after, .. } | SessionError::LeftUnanswered { after, .. },
            ) => {
                if matches!(self.identity.era, Era::Legacy(_)) {
                    let id = self.session.last_id();
                    self.session
                        .notify(
                            "notifications/cancelled",
                            Some(json!({"requestId": id, "reason": "hintcheck call timeout"})),
                        )
                        .await;
                }
                return (
                    CallOutcome::Timeout {
                        after_ms: after.as_millis() as u64,
                    },
                    None,
                    None,
                );
            }
            Err(SessionError::Closed { .. } | SessionError::Write { .. }) => {
                return (CallOutcome::ServerDied, None, None);
            }
        };
        match reply.outcome.map(|r| r.value()) {
            Err(RpcError {
                code,
                message,
                data,
            }) => {
                let raw = json!({ "error": { "code": code, "message": &message, "data": data } });
                (
                    CallOutcome::RpcError {
                        code,
                        message: shorten(&message, 500),
                    },
                    Some(raw),
                    None,
                )
            }
            Ok(result) => {
                let labels = super::labels::result_labels(&result);
                let mut raw = result.clone();
                if let Some(m) = raw.as_object_mut() {
                    m.remove("_meta");
                }
                (
                    interpret_call_result(name, result, &mut self.notes),
                    Some(raw),
                    labels,
                )
            }
        }
    }
}

fn interpret_call_result(name: &str, result: Value, notes: &mut Vec<ProtocolNote>) -> CallOutcome {
    let Value::Object(mut map) = result else {
        return CallOutcome::Malformed {
            why: format!("the result is a {}, not an object", json_type_name(&result)),
        };
    };
    map.remove("_meta");
    let digest = sha256_hex(Value::Object(map.clone()).to_string().as_bytes());
    let text = match map.get("content") {
        Some(Value::Array(items)) => items
            .iter()
            .find_map(|i| i.get("text").and_then(Value::as_str))
            .map(|t| shorten(t, 500))
            .unwrap_or_default(),
        Some(_) => {
            notes.push(ProtocolNote {
                context: format!("tools/call {name}"),
                message: "content is not an array".into(),
            });
            String::new()
        }
        None => {
            notes.push(ProtocolNote {
                context: format!("tools/call {name}"),
                message: "the result has no content array (it is required)".into(),
            });
            String::new()
        }
    };
    match map.get("isError") {
        Some(Value::Bool(true)) => CallOutcome::ToolError {
            text,
            result_sha256: digest,
        },
        None | Some(Value::Bool(false)) => match super::error_like::error_like(&map) {
            Some(why) => CallOutcome::ErrorLike {
                text,
                result_sha256: digest,
                why,
            },
            None => CallOutcome::Ok {
                text,
                result_sha256: digest,
            },
        },
        Some(other) => {
            notes.push(ProtocolNote {
                context: format!("tools/call {name}"),
                message: format!("isError is {other}, not a boolean; treated as an error"),
            });
            CallOutcome::ToolError {
                text,
                result_sha256: digest,
            }
        }
    }
}

fn client_info(options: &ClientOptions) -> Value {
    json!({"name": options.client_name, "version": options.client_version})
}

fn client_capabilities(offer_roots: bool) -> Value {
    if offer_roots {
        json!({"roots": {"listChanged": false}})
    } else {
        json!({})
    }
}

fn modern_meta(version: &str, options: &ClientOptions) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": client_info(options),
        "io.modelcontextprotocol/clientCapabilities": client_capabilities(options.offer_roots),
    })
}

async fn handshake(
    session: &Session,
    options: &ClientOptions,
    notes: &mut Vec<ProtocolNote>,
) -> Result<ServerIdentity, HandshakeError> {
    // The handshake timeout bounds the whole greeting, the discover probe included; the probe
    // takes at most half of it, so that a handshake-era server still gets its initialize.
    let ends = tokio::time::Instant::now() + options.handshake_timeout;
    let left = || {
        ends.saturating_duration_since(tokio::time::Instant::now())
            .max(Duration::from_millis(1))
    };
    let mut asked = Vec::new();
    if options.era != EraChoice::Legacy {
        let timeout = if options.era == EraChoice::Modern {
            left()
        } else {
            options.discover_timeout.min(options.handshake_timeout / 2)
        };
        asked.push("server/discover");
        // Only this first probe finds the era out: it alone may be given up on early.
        let check = (options.era == EraChoice::Auto)
            .then_some(options.probe_left_unanswered.as_ref())
            .flatten();
        match discover(session, options, timeout, check, MODERN_VERSION).await {
            Ok(identity) => return Ok(identity),
            Err(DiscoverOutcome::WantsVersion(supported)) => {
                // A modern server that wants another modern version: never fall back.
                if let Some(v) = supported.iter().find(|v| v.as_str() > LEGACY_VERSION) {
                    return match discover(session, options, left(), None, v).await {
                        Ok(identity) => Ok(identity),
                        Err(_) => Err(HandshakeError::Unusable {
                            method: "server/discover",
                            why: format!("the server asked for version {v} and then refused it"),
                        }),
                    };
                }
                notes.push(ProtocolNote {
                    context: "handshake".into(),
                    message: format!("server/discover answered -32022 listing only handshake-era versions {supported:?}"),
                });
            }
            Err(DiscoverOutcome::Fatal(e)) => return Err(e),
            Err(DiscoverOutcome::Unanswered) if options.era == EraChoice::Modern => {
                return Err(HandshakeError::NoAnswer {
                    asked: "server/discover".into(),
                    within: options.handshake_timeout,
                });
            }
            Err(DiscoverOutcome::NotModern(why)) if options.era == EraChoice::Modern => {
                return Err(HandshakeError::Unusable {
                    method: "server/discover",
                    why,
                });
            }
            // A handshake-era server: initialize follows.
            Err(DiscoverOutcome::Unanswered | DiscoverOutcome::NotModern(_)) => {}
        }
    }
    asked.push("initialize");
    match initialize(session, options, left(), notes).await {
        Err(HandshakeError::Session(SessionError::Timeout { .. })) => {
            Err(HandshakeError::NoAnswer {
                asked: asked.join(", then "),
                within: options.handshake_timeout,
            })
        }
        // A server that refuses initialize because it serves the modern protocol was only
        // slow to answer the probe (a Python server starting on a loaded machine): it is asked
        // again, with the rest of the greeting's time.
        Err(HandshakeError::Refused { code: -32022, .. })
            if options.era == EraChoice::Auto && asked.contains(&"server/discover") =>
        {
            // Slowness is no protocol fault: the transcript shows both probes.
            match discover(session, options, left(), None, MODERN_VERSION).await {
                Ok(identity) => Ok(identity),
                Err(_) => Err(HandshakeError::Unusable {
                    method: "server/discover",
                    why: "the server refused initialize as not its protocol, and then gave no usable answer to server/discover either".into(),
                }),
            }
        }
        other => other,
    }
}

enum DiscoverOutcome {
    WantsVersion(Vec<String>),
    /// No answer within the probe's time.
    Unanswered,
    NotModern(String),
    Fatal(HandshakeError),
}

/// Sends `server/discover` for `version` and waits at most `timeout` for its answer, or
/// until `check` shows the server left it unanswered (a handshake-era server that ignores
/// unknown requests, given up on without waiting out the probe's time).
async fn discover(
    session: &Session,
    options: &ClientOptions,
    timeout: Duration,
    check: Option<&LeftUnanswered>,
    version: &str,
) -> Result<ServerIdentity, DiscoverOutcome> {
    let params = json!({"_meta": modern_meta(version, options)});
    let unanswered = async {
        let Some(LeftUnanswered(left_unanswered)) = check else {
            return std::future::pending().await;
        };
        let ends = tokio::time::Instant::now() + timeout;
        // Looks come further apart while they fail (a server still at work), so that a busy
        // server's looks cost little.
        let mut every = UNANSWERED_LOOK_EVERY;
        loop {
            tokio::time::sleep(every).await;
            if left_unanswered(ends.saturating_duration_since(tokio::time::Instant::now())) {
                return;
            }
            every = (every * 3 / 2).min(UNANSWERED_LOOK_AT_MOST_EVERY);
        }
    };
    let reply = match session
        .probe_until("server/discover", Some(params), timeout, unanswered)
        .await
    {
        Ok(r) => r,
        Err(SessionError::Timeout { .. } | SessionError::LeftUnanswered { .. }) => {
            return Err(DiscoverOutcome::Unanswered);
        }
        Err(e) => return Err(DiscoverOutcome::Fatal(e.into())),
    };
    match reply.outcome.map(|r| r.value()) {
        Err(e) if e.code == -32022 => {
            let supported = e
                .data
                .as_ref()
                .and_then(|d| d.get("supported"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            Err(DiscoverOutcome::WantsVersion(supported))
        }
        Err(e) => Err(DiscoverOutcome::NotModern(format!(
            "server/discover answered {} {}",
            e.code, e.message
        ))),
        Ok(result) => {
            let supported: Vec<&str> = result
                .get("supportedVersions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if supported.is_empty() {
                return Err(DiscoverOutcome::NotModern(
                    "server/discover result without supportedVersions".into(),
                ));
            }
            if !supported.contains(&version) {
                let owned = supported.iter().map(|s| s.to_string()).collect();
                return Err(DiscoverOutcome::WantsVersion(owned));
            }
            Ok(ServerIdentity {
                era: Era::Modern(version.to_string()),
                server_info: result
                    .get("_meta")
                    .and_then(|m| m.get("io.modelcontextprotocol/serverInfo"))
                    .cloned()
                    .or_else(|| result.get("serverInfo").cloned()),
                capabilities: result.get("capabilities").cloned(),
                instructions: result
                    .get("instructions")
                    .and_then(Value::as_str)
                    .map(|s| shorten(s, 2000)),
            })
        }
    }
}

async fn initialize(
    session: &Session,
    options: &ClientOptions,
    timeout: Duration,
    notes: &mut Vec<ProtocolNote>,
) -> Result<ServerIdentity, HandshakeError> {
    let params = json!({
        "protocolVersion": LEGACY_VERSION,
        "capabilities": client_capabilities(options.offer_roots),
        "clientInfo": client_info(options),
    });
    let reply = session.request("initialize", Some(params), timeout).await?;
    let result = match reply.outcome.map(|r| r.value()) {
        Ok(r) => r,
        Err(e) => {
            return Err(HandshakeError::Refused {
                method: "initialize",
                code: e.code,
                message: shorten(&e.message, 300),
            });
        }
    };
    let Some(version) = result.get("protocolVersion").and_then(Value::as_str) else {
        return Err(HandshakeError::Unusable {
            method: "initialize",
            why: "no protocolVersion in the result".into(),
        });
    };
    if !LEGACY_VERSIONS.contains(&version) {
        notes.push(ProtocolNote {
            context: "handshake".into(),
            message: format!("the server chose protocol version {version:?}, which hintcheck does not know; continuing as {LEGACY_VERSION}"),
        });
    }
    session.notify("notifications/initialized", None).await;
    Ok(ServerIdentity {
        era: Era::Legacy(version.to_string()),
        server_info: result.get("serverInfo").cloned(),
        capabilities: result.get("capabilities").cloned(),
        instructions: result
            .get("instructions")
            .and_then(Value::as_str)
            .map(|s| shorten(s, 2000)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_results_are_interpreted_leniently() {
        let mut notes = Vec::new();
        let ok = interpret_call_result(
            "t",
            json!({"content":[{"type":"text","text":"hi"}]}),
            &mut notes,
        );
        assert!(matches!(&ok, CallOutcome::Ok { text, .. } if text == "hi"));
        let err = interpret_call_result("t", json!({"content":[], "isError": true}), &mut notes);
        assert!(matches!(err, CallOutcome::ToolError { .. }));
        let odd = interpret_call_result("t", json!({"isError": "yes"}), &mut notes);
        assert!(matches!(odd, CallOutcome::ToolError { .. }));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(matches!(
            interpret_call_result("t", json!([1]), &mut notes),
            CallOutcome::Malformed { .. }
        ));
    }

    #[test]
    fn meta_is_ignored_in_result_digests() {
        let mut notes = Vec::new();
        let a = interpret_call_result("t", json!({"content":[],"_meta":{"x":1}}), &mut notes);
        let b = interpret_call_result("t", json!({"content":[],"_meta":{"x":2}}), &mut notes);
        assert_eq!(a.result_sha256(), b.result_sha256());
    }
}
