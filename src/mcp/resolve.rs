//! Tool Resolution (SEP-1862): a server that announces the capability `tools.resolve` and
//! marks a tool `resolve: true` answers `tools/resolve {name, arguments}` with the tool's
//! definition refined for those arguments (`{tool: {name, annotations, …}}`), so that a
//! multi-operation tool can say `readOnlyHint: true` for its reads alone. A resolution is as
//! unverified as a declaration: [`interpret`] reads the answer leniently into the hints it
//! claims, and the audits judge them against the call made with those arguments.

use serde_json::Value;

use super::tool::{Hints, parse_tool, shorten};
use crate::rpc::framing::{RpcError, json_type_name};

/// The method.
pub const METHOD: &str = "tools/resolve";

/// The largest resolved `annotations` object kept (as JSON text): four booleans and a title
/// take far less, and every call keeps its resolution.
pub const MAX_ANNOTATIONS_BYTES: usize = 4096;

/// What the server resolved a tool to for one call's arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    /// The resolved definition's `annotations` as sent (`null` when it had none or the
    /// resolution failed).
    pub annotations: Value,
    /// The hints they claim (all absent when the resolution failed).
    pub hints: Hints,
    /// Why the answer is no usable resolution (an error, no tool object, another tool's
    /// name, no answer): the call is then judged on the static declaration alone.
    pub failure: Option<String>,
}

impl Resolution {
    /// A resolution that did not come.
    pub fn failed(why: impl Into<String>) -> Resolution {
        Resolution {
            annotations: Value::Null,
            hints: Hints::absent(),
            failure: Some(why.into()),
        }
    }
}

/// Whether a server's capabilities object announces `tools.resolve`.
pub fn announced(capabilities: Option<&Value>) -> bool {
    capabilities
        .and_then(|c| c.get("tools"))
        .and_then(|t| t.get("resolve"))
        == Some(&Value::Bool(true))
}

/// Reads the answer to `tools/resolve` for tool `name`.
pub fn interpret(name: &str, answer: Result<Value, RpcError>) -> Resolution {
    let result = match answer {
        Ok(r) => r,
        Err(e) => {
            return Resolution::failed(format!(
                "json-rpc error {} {}",
                e.code,
                shorten(&e.message, 200)
            ));
        }
    };
    let Some(tool) = result.get("tool") else {
        return Resolution::failed(format!(
            "the answer has no tool object ({})",
            match &result {
                Value::Object(m) => format!(
                    "keys: {}",
                    m.keys().take(8).cloned().collect::<Vec<_>>().join(", ")
                ),
                other => format!("a {}", json_type_name(other)),
            }
        ));
    };
    match parse_tool(tool, 0) {
        Err(unusable) => Resolution::failed(format!(
            "the resolved tool is unusable: {}",
            unusable.message
        )),
        Ok(resolved) if resolved.name != name => Resolution::failed(format!(
            "the resolved tool is named {:?}, not {name:?}",
            shorten(&resolved.name, 80)
        )),
        Ok(resolved) => {
            let annotations = tool.get("annotations").cloned().unwrap_or(Value::Null);
            let size = annotations.to_string().len();
            if size > MAX_ANNOTATIONS_BYTES {
                return Resolution::failed(format!(
                    "the resolved annotations take {size} bytes, more than the {MAX_ANNOTATIONS_BYTES} kept"
                ));
            }
            let failure = match &annotations {
                Value::Object(_) | Value::Null => None,
                other => Some(format!(
                    "the resolved annotations are a {}, not an object",
                    json_type_name(other)
                )),
            };
            Resolution {
                annotations,
                hints: resolved.hints,
                failure,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool::Hint;
    use serde_json::json;

    #[test]
    fn a_resolution_is_read_leniently_and_its_failures_say_why() {
        let r = interpret(
            "manage",
            Ok(
                json!({"tool": {"name": "manage", "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true, "destructiveHint": "no"}}}),
            ),
        );
        assert_eq!(r.failure, None);
        assert_eq!(r.hints.read_only, Hint::Declared(true));
        assert!(matches!(r.hints.destructive, Hint::WrongType(_)));
        let other = interpret("manage", Ok(json!({"tool": {"name": "wipe"}})));
        assert!(other.failure.unwrap_or_default().contains("named \"wipe\""));
        let bare = interpret("manage", Ok(json!({"annotations": {}})));
        assert!(bare.failure.unwrap_or_default().contains("no tool object"));
        let huge = interpret(
            "manage",
            Ok(json!({"tool": {"name": "manage", "annotations": {"title": "x".repeat(10_000)}}})),
        );
        assert!(
            huge.failure
                .unwrap_or_default()
                .contains("more than the 4096 kept")
        );
        assert_eq!(huge.annotations, Value::Null, "nothing of it is kept");
        let refused = interpret(
            "manage",
            Err(RpcError {
                code: -32601,
                message: "Method not found".into(),
                data: None,
            }),
        );
        assert_eq!(
            refused.failure.as_deref(),
            Some("json-rpc error -32601 Method not found")
        );
        assert!(announced(Some(&json!({"tools": {"resolve": true}}))));
        assert!(!announced(Some(&json!({"tools": {"listChanged": true}}))));
        assert!(!announced(None));
    }
}
