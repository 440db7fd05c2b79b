//! `protocol`: what the server did wrong on the wire (garbage on stdout, unknown ids,
//! oversized lines, malformed results, broken pagination).

use std::collections::BTreeMap;

use super::AuditMeta;
use crate::finding::{Confidence, Evidence, Finding, Severity};
use crate::mcp::client::ProtocolNote;
use crate::mcp::tool::shorten;
use crate::rpc::transcript::Entry;

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "protocol",
    summary: "the server broke the MCP or JSON-RPC protocol",
    docs: "On stdio the server must write nothing but JSON-RPC messages to stdout, one per line, \
and must answer each request once with its id. hintcheck records every line before parsing it and \
reports here what was not a valid message (not UTF-8, not JSON, not JSON-RPC, longer than the line \
cap, unterminated at exit), responses to ids it never sent or answered twice or after the timeout, \
and results that are malformed (no `content`, a non-boolean `isError`, broken pagination). Where a \
server announces `tools.resolve` (SEP-1862), a resolution that fails or answers the same arguments \
two ways, and one more cautious than the tool's static annotations (the static ones are then not its \
worst case, by the server's own word), are reported here too, as is a tool marked `resolve: true` on \
a server that did not announce the capability (never asked). It never \
replies to garbage. These findings do not change hint verdicts, but a server that pollutes stdout \
breaks real hosts.\n\n\
Fix: log to stderr, never to stdout.",
};

/// Findings for the wire anomalies and protocol notes of a run.
pub fn findings(
    notes: &[ProtocolNote],
    anomalies: &[Entry],
    stats_garbage: u64,
    stats_unknown: u64,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut by_class: BTreeMap<&str, Vec<&Entry>> = BTreeMap::new();
    for e in anomalies {
        by_class.entry(e.class.as_str()).or_default().push(e);
    }
    for (class, entries) in by_class {
        let what = match class {
            "not-json" => "lines on stdout that are not JSON",
            "not-utf8" => "lines on stdout that are not UTF-8",
            "not-jsonrpc" => "JSON lines that are not JSON-RPC 2.0 messages",
            "blank" => "empty lines on stdout",
            "oversized" => "lines longer than the line cap",
            "unterminated" => "bytes after the last newline when stdout closed",
            "unknown-id" => "responses to ids hintcheck never sent",
            "late-response" => "responses that arrived after the request timed out",
            "duplicate-response" => "second responses to an already answered id",
            other => other,
        };
        out.push(server_finding(
            Severity::Warning,
            format!("{} {what}", entries.len()),
            entries
                .iter()
                .take(3)
                .map(|e| Evidence {
                    category: None,
                    seen_by: None,
                    firm: false,
                    uncertain: false,
                    source: format!("transcript #{}", e.seq),
                    text: match &e.note {
                        Some(n) => format!("{} ({n})", shorten(&e.text, 120)),
                        None => shorten(&e.text, 120),
                    },
                })
                .collect(),
        ));
    }
    let listed: u64 = anomalies.len() as u64;
    if stats_garbage + stats_unknown > listed {
        out.push(server_finding(
            Severity::Note,
            format!(
                "{} further anomalous lines are counted but not listed",
                stats_garbage + stats_unknown - listed
            ),
            Vec::new(),
        ));
    }
    for n in notes {
        out.push(server_finding(
            Severity::Warning,
            format!("{}: {}", n.context, n.message),
            Vec::new(),
        ));
    }
    out
}

/// A note when the server announced during the run that its tool list changed: the
/// verdicts are for the list read at the start, which may no longer be what hosts see.
pub fn list_changed(count: usize) -> Option<Finding> {
    (count > 0).then(|| {
        server_finding(
            Severity::Note,
            format!(
                "the server announced {count} time(s) during the run that its tool list changed \
(notifications/tools/list_changed); the verdicts are for the list read at the start"
            ),
            Vec::new(),
        )
    })
}

/// A finding about the server as a whole (no tool, no hint), directly observed.
fn server_finding(severity: Severity, message: String, evidence: Vec<Evidence>) -> Finding {
    Finding {
        resolved_for: None,
        category: None,
        audit: META.id,
        tool: None,
        hint: None,
        severity,
        confidence: Confidence::High,
        message,
        evidence,
        fingerprint: String::new(),
        accepted: None,
    }
}
