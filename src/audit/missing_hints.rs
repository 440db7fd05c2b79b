//! `missing-hints` (with `--require-hints`): every tool declares the hints hosts and app
//! directories rely on. A tool must declare `readOnlyHint` and `openWorldHint`, and, unless it
//! declares itself read-only, `destructiveHint` (the spec makes `destructiveHint` meaningless for
//! read-only tools). `idempotentHint` is not required. Each finding names the missing hints and
//! the values the run's observations support, with their basis, ready to declare.

use super::AuditMeta;
use super::suggest::SupportedHint;
use crate::finding::{Confidence, Evidence, Finding, Severity};
use crate::mcp::tool::{HintName, ToolDecl};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "missing-hints",
    summary: "a tool leaves hints undeclared that hosts and app directories require",
    docs: "With `--require-hints` (or `[fail] require_hints = true`), every tool must declare \
`readOnlyHint` and `openWorldHint`, and every tool that does not declare `readOnlyHint: true` must \
also declare `destructiveHint`. An absent hint means the spec's worst-case default (not read-only, \
destructive, open world): hosts then ask for confirmation on every call, and app directories reject \
the tool. `idempotentHint` is not required. A hint with a wrong type counts as absent. The finding \
lists, for each missing hint, the value the run's observations support and how well (observed, \
consistent with what was exercised, or unverified); `hintcheck suggest` prints them as JSON.\n\n\
Fix: declare the listed hints in the tool's `annotations`.",
};

/// The hints `tool` must declare and does not.
pub fn missing(tool: &ToolDecl) -> Vec<HintName> {
    let read_only = tool.hints.read_only.declared() == Some(true);
    HintName::ALL
        .into_iter()
        .filter(|h| match h {
            HintName::ReadOnly | HintName::OpenWorld => true,
            HintName::Destructive => !read_only,
            HintName::Idempotent => false,
        })
        .filter(|h| tool.hints.get(*h).declared().is_none())
        .collect()
}

/// The finding for `tool`, if it leaves a required hint undeclared.
pub fn finding(tool: &ToolDecl, supported: &[SupportedHint]) -> Option<Finding> {
    let missing = missing(tool);
    if missing.is_empty() {
        return None;
    }
    let keys: Vec<&str> = missing.iter().map(|h| h.key()).collect();
    Some(Finding {
        resolved_for: None,
        category: None,
        audit: META.id,
        tool: Some(tool.name.clone()),
        hint: None,
        severity: Severity::Error,
        confidence: Confidence::High,
        message: format!("{} does not declare {}", tool.name, keys.join(", ")),
        evidence: missing
            .iter()
            .map(|h| Evidence {
                category: None,
                seen_by: None,
                firm: false,
                uncertain: false,
                source: "supported".into(),
                text: match supported.iter().find(|s| s.hint == *h) {
                    Some(s) => format!(
                        "{}: {} ({}: {})",
                        h.key(),
                        s.value,
                        s.basis.as_str(),
                        s.reason
                    ),
                    None => format!("{}: (nothing observed)", h.key()),
                },
            })
            .collect(),
        fingerprint: String::new(),
        accepted: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool::parse_tool;
    use serde_json::json;

    fn missing_of(annotations: serde_json::Value) -> Vec<&'static str> {
        let tool = parse_tool(
            &json!({"name": "t", "inputSchema": {"type": "object"}, "annotations": annotations}),
            0,
        )
        .expect("tool");
        missing(&tool).into_iter().map(|h| h.key()).collect()
    }

    #[test]
    fn read_only_tools_need_no_destructive_hint_and_idempotence_is_never_required() {
        assert_eq!(
            missing_of(json!({})),
            ["readOnlyHint", "destructiveHint", "openWorldHint"]
        );
        assert_eq!(missing_of(json!({"readOnlyHint": true})), ["openWorldHint"]);
        assert_eq!(
            missing_of(json!({"readOnlyHint": false, "openWorldHint": false})),
            ["destructiveHint"]
        );
        // A wrong type is no declaration.
        assert_eq!(
            missing_of(
                json!({"readOnlyHint": "true", "destructiveHint": false, "openWorldHint": true})
            ),
            ["readOnlyHint"]
        );
        assert!(
            missing_of(
                json!({"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true})
            )
            .is_empty()
        );
    }
}
