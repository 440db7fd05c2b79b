//! The output of `hintcheck suggest`: per tool, an `annotations` object ready to paste into
//! the tool's definition, plus the basis of every value (`observed`: backed by a behaviour
//! seen, such as a write or a destroyed file; `consistent`: fits everything exercised, which
//! proves only what was exercised; `unverified`: nothing exercised it, so the declared value
//! or the spec's default is kept) and which values differ from what the tool declares now.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::Report;
use crate::baseline::server_key;

/// The version of this format.
pub const SUGGEST_VERSION: u32 = 1;

#[derive(Serialize)]
struct ToolSuggestion<'a> {
    name: &'a str,
    definition_sha256: &'a str,
    annotations: Map<String, Value>,
    changed: Vec<&'static str>,
    basis: Map<String, Value>,
}

/// Renders the suggestions of a report as pretty JSON.
pub fn render(r: &Report) -> String {
    let tools: Vec<ToolSuggestion<'_>> = r
        .tools
        .iter()
        .filter(|t| !t.supported.is_empty())
        .map(|t| {
            let mut annotations = Map::new();
            let mut basis = Map::new();
            for s in &t.supported {
                annotations.insert(s.hint.key().into(), json!(s.value));
                basis.insert(
                    s.hint.key().into(),
                    json!({ "basis": s.basis.as_str(), "reason": s.reason }),
                );
            }
            ToolSuggestion {
                name: &t.name,
                definition_sha256: &t.definition_sha256,
                annotations,
                changed: t
                    .supported
                    .iter()
                    .filter(|s| s.changed)
                    .map(|s| s.hint.key())
                    .collect(),
                basis,
            }
        })
        .collect();
    let out = json!({
        "schema_version": SUGGEST_VERSION,
        "server": server_key(r),
        "complete": r.partial.is_none() && r.server.start_error.is_none(),
        "sandbox": r.sandbox.level,
        "coverage": {
            "tools_listed": r.coverage.tools_listed,
            "tools_succeeded": r.coverage.tools_succeeded,
            "files_observed": r.coverage.files_observed,
            "network_observed": r.coverage.network_observed,
        },
        "legend": {
            "observed": "backed by a behaviour hintcheck saw",
            "consistent": "fits everything that was exercised; proves only what was exercised",
            "unverified": "nothing exercised it: the declared value, or the spec's default when none was declared",
        },
        "tools": tools,
    });
    let mut text = serde_json::to_string_pretty(&out).unwrap_or_default();
    text.push('\n');
    text
}
