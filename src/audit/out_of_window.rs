//! `out-of-window`: effects that happened outside every tool call (startup, between calls,
//! shutdown). They belong to no tool, but a background writer is worth knowing about.

use std::collections::BTreeMap;

use super::AuditMeta;
use crate::evidence::{Phase, PhaseObservation};
use crate::finding::{Category, Confidence, Evidence, Finding, Severity};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "out-of-window",
    summary: "the server changed its environment outside any tool call",
    docs: "hintcheck attributes what it observes to the tool call whose window it falls in: from the \
request to the response plus a settle period. Effects at startup (before the tool listing ended), \
between calls, and at shutdown belong to no call. They are reported here instead of being dropped: \
a server that writes in the background, or whose tool keeps working after it answered, may hide \
effects from per-tool verdicts. Startup writes such as caches and logs are common and usually \
harmless; idle writes right after a call often belong to that call (the report names it).\n\n\
Fix: finish a tool's work before answering, or declare the hints of the tools that trigger it.",
};

/// Findings for observations outside every call window.
pub fn findings(phases: &[PhaseObservation]) -> Vec<Finding> {
    let mut grouped: BTreeMap<(u8, Option<&str>), Vec<&PhaseObservation>> = BTreeMap::new();
    // Writes and external network attempts matter; the server's own start (an exec) and
    // loopback traffic do not.
    for p in phases.iter().filter(|p| p.observation.is_evidential()) {
        let order = match p.phase {
            Phase::Startup => 0,
            Phase::Idle => 1,
            Phase::FirstCall => 2,
            Phase::Shutdown => 3,
        };
        grouped
            .entry((order, p.after_tool.as_deref()))
            .or_default()
            .push(p);
    }
    grouped
        .into_iter()
        .map(|((_, after), items)| {
            let phase = items[0].phase;
            let category =
                (phase == Phase::FirstCall).then_some(Category::FirstCallInitialisation);
            let (severity, what) = match phase {
                Phase::FirstCall => (
                    Severity::Note,
                    format!(
                        "as the server's first-call initialisation (in the first call, of {}; a replay with a different tool did the same)",
                        after.unwrap_or("a tool")
                    ),
                ),
                Phase::Startup => (Severity::Note, "at startup".to_string()),
                Phase::Idle => (
                    Severity::Warning,
                    match after {
                        Some(t) => format!("between calls, after a call of {t}"),
                        None => "between calls".into(),
                    },
                ),
                Phase::Shutdown => (Severity::Note, "at shutdown".to_string()),
            };
            Finding {
                category,
                fingerprint: String::new(),
                accepted: None,
                audit: META.id,
                tool: None,
                hint: None,
                severity,
                confidence: Confidence::High,
                message: format!("{} effect(s) {what}", items.len()),
                evidence: items
                    .iter()
                    .take(10)
                    .map(|p| Evidence {
                        category,
                        source: serde_json::to_value(p.phase)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default(),
                        text: p.observation.describe(),
                        seen_by: Some(p.observation.mechanism().seen_by()),
                    })
                    .collect(),
            }
        })
        .collect()
}
