//! `annotation-type`: hints must be booleans inside an `annotations` object.

use super::AuditMeta;
use crate::finding::Finding;
use crate::mcp::tool::ToolDecl;

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "annotation-type",
    summary: "a hint is not a boolean, or annotations are malformed or misplaced",
    docs: "The four hints of `ToolAnnotations` are booleans. A hint that is `null`, a string such as \
\"yes\", a number, or a key with the wrong case (`readonlyHint`) is read differently by different \
hosts: some treat it as absent, some as truthy. hintcheck judges such a hint as absent (the spec's \
worst-case default applies, so it cannot be contradicted) and reports it here. It also reports an \
`annotations` member that is not an object, and hints set on the tool itself instead of inside \
`annotations`, where hosts do not look.\n\n\
Fix: send `true` or `false` under the exact key inside `annotations`.",
};

/// Findings for one tool's definition.
pub fn findings(tool: &ToolDecl) -> Vec<Finding> {
    super::definition_findings(tool, META.id, true)
}
