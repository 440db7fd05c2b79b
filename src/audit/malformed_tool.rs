//! `malformed-tool`: a tool definition that breaks the spec (no usable name, no input schema).

use super::AuditMeta;
use crate::finding::{Confidence, Evidence, Finding, Severity};
use crate::mcp::tool::{ToolDecl, UnusableTool};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "malformed-tool",
    summary: "a tool definition is malformed (name, inputSchema, duplicates)",
    docs: "Every tool needs a unique string `name` (the spec recommends 1–128 characters of \
[A-Za-z0-9_.-]) and an `inputSchema` that is a JSON Schema object with `type: \"object\"`. A tool \
without a usable name cannot be called and is listed here; a tool with a missing or malformed \
schema is still called, with no arguments. An `x-mcp-header` on a property (the 2026-07-28 \
revision: the argument rides in an `Mcp-Param-*` HTTP header too) must be an HTTP token, unique \
among the tool's properties regardless of case, on a property of a primitive type; hintcheck \
names each one that is not, and mirrors only the valid ones. Other tools of the server are verified as usual: one \
broken definition never hides the rest.\n\n\
Fix: send a valid definition for every tool.",
};

/// Findings for one usable tool's definition.
pub fn findings(tool: &ToolDecl) -> Vec<Finding> {
    super::definition_findings(tool, META.id, false)
}

/// Findings for listed entries that could not be used at all.
pub fn unusable_findings(unusable: &[UnusableTool]) -> Vec<Finding> {
    unusable
        .iter()
        .map(|u| Finding {
            resolved_for: None,
            category: None,
            fingerprint: String::new(),
            accepted: None,
            audit: META.id,
            tool: None,
            hint: None,
            severity: Severity::Warning,
            confidence: Confidence::High,
            message: u.message.clone(),
            evidence: vec![Evidence {
                category: None,
                seen_by: None,
                firm: false,
                uncertain: false,
                source: "tools/list".into(),
                text: u.raw.clone(),
            }],
        })
        .collect()
}
