//! `out-of-window`: effects that happened outside every tool call (startup, between calls,
//! shutdown). They belong to no tool, but a background writer is worth knowing about.

use std::collections::BTreeMap;

use super::AuditMeta;
use crate::evidence::{FileEffectKind, Observation};
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
            // What the server does on every request is reported once, server-wide.
            Phase::Control | Phase::PerRequest => 1,
            Phase::ServerState => 2,
            Phase::Idle => 3,
            Phase::FirstCall => 4,
            Phase::Shutdown => 5,
        };
        let after = match p.phase {
            Phase::Control | Phase::PerRequest | Phase::ServerState => None,
            _ => p.after_tool.as_deref(),
        };
        grouped.entry((order, after)).or_default().push(p);
    }
    grouped
        .into_iter()
        .map(|((_, after), mut items)| {
            let phase = items[0].phase;
            let category = match phase {
                Phase::FirstCall => Some(Category::FirstCallInitialisation),
                Phase::Control | Phase::PerRequest | Phase::ServerState => {
                    Some(Category::Bookkeeping)
                }
                _ => None,
            };
            let mut tools: Vec<&str> = items
                .iter()
                .filter(|p| matches!(p.phase, Phase::PerRequest | Phase::ServerState))
                .filter_map(|p| p.after_tool.as_deref())
                .collect();
            tools.sort_unstable();
            tools.dedup();
            let taken_from = if tools.is_empty() {
                String::new()
            } else {
                format!(" (taken from the calls of {})", tools.join(", "))
            };
            // Each kind of effect once: the same bookkeeping in every call is one line.
            if matches!(
                phase,
                Phase::Control | Phase::PerRequest | Phase::ServerState
            ) {
                let mut shapes = std::collections::BTreeSet::new();
                items.retain(|p| shapes.insert(p.observation.shape_key()));
            }
            // Losing content or talking to the outside world is worth a look all the same.
            let worth_a_look = items.iter().any(|p| {
                loses_content(&p.observation)
                    || p.observation.as_network().is_some_and(|n| !n.loopback)
            });
            let (severity, what) = match phase {
                Phase::Control | Phase::PerRequest => (
                    if worth_a_look {
                        Severity::Warning
                    } else {
                        Severity::Note
                    },
                    format!(
                        "on every request or on the server's own: the control requests (requests that run no tool: ping, tools/list, a call of a tool it does not have) saw them too, so they are the server's (per-request bookkeeping, or work it does on its own) and no tool's evidence{taken_from}"
                    ),
                ),
                Phase::ServerState => (
                    if worth_a_look {
                        Severity::Warning
                    } else {
                        Severity::Note
                    },
                    format!(
                        "in calls, to files the server keeps for several tools, that replays showed are not the calling tool's: a fresh server did them before the tool was called, or the tool alone (and after the calls its state depends on) did not do them, so the server writes them for whichever call is open when its timer or counter fires, and they are no tool's evidence{taken_from}"
                    ),
                ),
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
                resolved_for: None,
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
                        source: p.phase.name().to_string(),
                        text: p.observation.describe(),
                        seen_by: Some(p.observation.mechanism().seen_by()),
                        firm: false,
                        uncertain: false,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Whether an effect loses content: a deletion, a truncation, a rename over a file, a branch
/// rewound (an overwrite of a file with new content, a timestamp, does not count here).
fn loses_content(o: &Observation) -> bool {
    match o {
        Observation::File(f) => matches!(
            f.kind,
            FileEffectKind::Deleted
                | FileEffectKind::Truncated
                | FileEffectKind::Renamed {
                    over_existing: true,
                    ..
                }
                | FileEffectKind::RefRewound { .. }
        ),
        Observation::Attempt(a) => a.destructive,
        _ => false,
    }
}
