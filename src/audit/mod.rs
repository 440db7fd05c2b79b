//! The judge stage. One audit per hint ([`read_only`], [`destructive`], [`idempotent`],
//! [`open_world`]) turns a tool's declared hint and its call records into a verdict with
//! evidence and, for absent hints, a suggestion. The definition audits
//! ([`annotation_type`], [`malformed_tool`]) and the run audits ([`protocol`],
//! [`out_of_window`], [`sandbox_evasion`], [`secret_access`], [`exfiltration`],
//! [`resource_limit`]) produce findings; [`data_labels`] judges the data labels declared beside
//! the hints. Audits never touch processes or sockets.

pub mod annotation_type;
pub mod by_argument;
pub mod data_labels;
pub mod destructive;
pub mod exfiltration;
pub mod idempotent;
pub mod malformed_tool;
pub mod missing_hints;
pub mod open_world;
pub mod out_of_window;
pub mod protocol;
pub mod read_only;
pub mod resolved;
pub mod resource_limit;
pub mod sandbox_evasion;
pub mod secret_access;
pub mod suggest;

use crate::evidence::Observation;
use crate::evidence::{CallRecord, Coverage, PhaseObservation, ToolRun};
use crate::finding::{
    Category, Confidence, Evidence, Finding, HintVerdict, Severity, Suggestion, Verdict,
};
use crate::mcp::tool::{HintName, ToolDecl};

/// Static description of an audit: what `hintcheck explain` prints and SARIF `rules[]` reuses.
#[derive(Debug)]
pub struct AuditMeta {
    /// Kebab-case id.
    pub id: &'static str,
    /// One line.
    pub summary: &'static str,
    /// The full text.
    pub docs: &'static str,
}

/// Every audit, in the order reports list them.
pub const ALL: [&AuditMeta; 14] = [
    &read_only::META,
    &destructive::META,
    &idempotent::META,
    &open_world::META,
    &missing_hints::META,
    &annotation_type::META,
    &malformed_tool::META,
    &protocol::META,
    &out_of_window::META,
    &sandbox_evasion::META,
    &secret_access::META,
    &exfiltration::META,
    &data_labels::META,
    &resource_limit::META,
];

/// Whether the audit with this id is about the planted secrets ([`secret_access`],
/// [`exfiltration`]): reports show those findings first.
pub fn about_secrets(id: &str) -> bool {
    id == secret_access::META.id || id == exfiltration::META.id
}

/// Visits every observation of the calls of `tools` and of `phases`, with the tool it fell
/// to (`None` outside every call) and where it was seen: `call 2 (attempt 1)`, or the phase
/// (`startup`, `idle`, …).
pub(crate) fn each_observation<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a [CallRecord])>,
    phases: &[PhaseObservation],
    mut visit: impl FnMut(Option<&str>, String, &Observation),
) {
    for (tool, calls) in tools {
        for call in calls {
            for o in &call.observations {
                visit(
                    Some(tool),
                    format!("call {} (attempt {})", call.number, call.attempt),
                    o,
                );
            }
        }
    }
    for p in phases {
        let source = serde_json::to_value(p.phase)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        visit(None, source, &p.observation);
    }
}

/// Adds a piece of evidence to `list`, unless it holds the same text or ten pieces already.
pub(crate) fn add_distinct(list: &mut Vec<Evidence>, source: String, text: String) {
    if list.len() < 10 && !list.iter().any(|e| e.text == text) {
        list.push(Evidence::plain(source, text));
    }
}

/// The audit with this id.
pub fn find(id: &str) -> Option<&'static AuditMeta> {
    ALL.into_iter().find(|m| m.id == id)
}

/// The audit with this id, or the audit that judges the hint of this name (`readOnlyHint`,
/// any case).
pub fn find_by_id_or_hint(name: &str) -> Option<&'static AuditMeta> {
    find(name).or_else(|| {
        let hint = HintName::ALL
            .into_iter()
            .find(|h| h.key().eq_ignore_ascii_case(name))?;
        Some(for_hint(hint))
    })
}

/// The audit that judges `hint`.
pub fn for_hint(hint: HintName) -> &'static AuditMeta {
    match hint {
        HintName::ReadOnly => &read_only::META,
        HintName::Destructive => &destructive::META,
        HintName::Idempotent => &idempotent::META,
        HintName::OpenWorld => &open_world::META,
    }
}

/// What an audit of one hint concludes.
#[derive(Debug, Clone)]
pub struct HintJudgement {
    /// The verdict.
    pub verdict: Verdict,
    /// Why.
    pub reason: String,
    /// What it rests on.
    pub evidence: Vec<Evidence>,
    /// How sure a contradiction is.
    pub confidence: Confidence,
    /// For absent hints: what the observations support.
    pub suggestion: Option<Suggestion>,
}

impl HintJudgement {
    fn new(verdict: Verdict, reason: impl Into<String>) -> Self {
        Self {
            verdict,
            reason: reason.into(),
            evidence: Vec::new(),
            confidence: Confidence::High,
            suggestion: None,
        }
    }

    /// A hint its tool's calls could not show: none of them succeeded.
    fn unexercised_as_no_call_succeeded(run: &ToolRun) -> Self {
        Self::new(
            Verdict::Unexercised,
            format!("no call succeeded ({})", outcomes_summary(run)),
        )
    }
}

/// What the audits concluded about one tool.
#[derive(Debug, Clone)]
pub struct ToolJudgement {
    /// One verdict per hint, in spec order.
    pub verdicts: Vec<HintVerdict>,
    /// Suggestions for absent hints.
    pub suggestions: Vec<Suggestion>,
    /// Findings about this tool.
    pub findings: Vec<Finding>,
    /// The value the observations support for every hint.
    pub supported: Vec<suggest::SupportedHint>,
}

/// Judges one tool.
pub fn judge_tool(tool: &ToolDecl, run: &ToolRun, coverage: &Coverage) -> ToolJudgement {
    let judged: [(HintName, &AuditMeta, HintJudgement); 4] = [
        (
            HintName::ReadOnly,
            &read_only::META,
            read_only::judge(tool, run, coverage),
        ),
        (
            HintName::Destructive,
            &destructive::META,
            destructive::judge(tool, run, coverage),
        ),
        (
            HintName::Idempotent,
            &idempotent::META,
            idempotent::judge(tool, run, coverage),
        ),
        (
            HintName::OpenWorld,
            &open_world::META,
            open_world::judge(tool, run, coverage),
        ),
    ];
    let mut out = ToolJudgement {
        verdicts: Vec::new(),
        suggestions: Vec::new(),
        findings: annotation_type::findings(tool),
        supported: Vec::new(),
    };
    out.findings.extend(malformed_tool::findings(tool));
    for (hint, meta, j) in judged {
        // Firmness is earned: a contradiction fails the run only when at least one piece
        // of its evidence is firm on its own; any number of uncertain or softened pieces
        // stays a warning.
        let contradicted = j.verdict == Verdict::Contradicted;
        let firm = j.evidence.is_empty() || j.evidence.iter().any(|e| e.firm);
        let uncertain = contradicted && !firm && j.evidence.iter().any(|e| e.uncertain);
        // The category every piece of evidence shares (transient files, the server's
        // bookkeeping) is shown and usable in --fail-except.
        let category = Category::common(j.evidence.iter().map(|e| e.category));
        if contradicted {
            out.findings.push(Finding {
                resolved_for: None,
                fingerprint: String::new(),
                accepted: None,
                audit: meta.id,
                tool: Some(tool.name.clone()),
                hint: Some(hint),
                category,
                severity: if firm {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                confidence: if uncertain {
                    Confidence::Low
                } else {
                    j.confidence
                },
                message: format!(
                    "{} declares {}: {} but {}",
                    tool.name,
                    hint.key(),
                    tool.hints.get(hint).describe(),
                    j.reason
                ),
                evidence: j.evidence.clone(),
            });
        }
        if let Some(s) = j.suggestion {
            out.suggestions.push(s);
        }
        let reason = match tool.hints.get(hint) {
            crate::mcp::tool::Hint::WrongType(_) if j.verdict == Verdict::NotApplicable => format!(
                "{} is not a boolean: judged as absent, so the spec's default ({}) applies and nothing can be contradicted",
                hint.key(),
                hint.default_value()
            ),
            _ => j.reason,
        };
        let reason = match uncounted_for(hint, run) {
            n if n > 0 && matches!(j.verdict, Verdict::Consistent | Verdict::Unexercised) => {
                format!(
                    "{reason}; {n} effect(s) seen during failed calls are not counted: nothing showed they were the tool's (neither the call's own threads nor a replay of the tool alone)"
                )
            }
            _ => reason,
        };
        out.verdicts.push(HintVerdict {
            source: None,
            resolved_for: None,
            hint,
            declared: tool.hints.get(hint).describe(),
            verdict: j.verdict,
            reason: if uncertain {
                format!("{reason}, but other calls' processes were running at the time (uncertain)")
            } else {
                reason
            },
            evidence: j.evidence,
            audit: meta.id,
            uncertain,
        });
    }
    out.supported = suggest::supported(&tool.hints, &out.verdicts, &out.suggestions);
    out
}

/// Whether observation `o` is the kind of effect that contradicts `hint` declared against
/// its default: a write (`readOnlyHint: true`), a destructive effect (`destructiveHint:
/// false`), traffic beyond loopback (`openWorldHint: false`). Idempotence is judged on
/// repeats, never on one effect.
pub(crate) fn bears_on(hint: HintName, o: &Observation) -> bool {
    match hint {
        HintName::ReadOnly => o.is_write(),
        HintName::Destructive => o.is_destructive(),
        HintName::OpenWorld => o.as_network().is_some_and(|n| !n.loopback),
        HintName::Idempotent => false,
    }
}

/// Whether `o` could contradict a hint `tool` declared (see [`bears_on`]).
pub(crate) fn bears_on_declared(tool: &ToolDecl, o: &Observation) -> bool {
    !declared_hints_it_bears_on(tool, o).is_empty()
}

/// Whether `o`, seen in an identical repeat of a call of `tool`, could contradict the
/// `idempotentHint: true` it declared (a lasting change; see [`idempotent::counts`]).
pub(crate) fn bears_on_declared_idempotence(tool: &ToolDecl, o: &Observation) -> bool {
    tool.hints.idempotent.declared() == Some(true) && idempotent::counts(o)
}

/// The hints `tool` declared that `o` could contradict (see [`bears_on`]).
pub(crate) fn declared_hints_it_bears_on(tool: &ToolDecl, o: &Observation) -> Vec<HintName> {
    HintName::ALL
        .into_iter()
        .filter(|h| tool.hints.get(*h).declared() == Some(!h.default_value()) && bears_on(*h, o))
        .collect()
}

/// How many effects of failed calls that bear on `hint` are not counted (see
/// [`CallRecord::counts`]).
fn uncounted_for(hint: HintName, run: &ToolRun) -> usize {
    run.uncounted().filter(|(_, o)| bears_on(hint, o)).count()
}

/// Evidence lines for observations, capped so that a flood stays readable: the pieces that
/// are firm on their own first (see [`Evidence::firm`]), then the others, each group with
/// its most telling pieces first ([`Observation::telling_rank`]) and otherwise in order; what is
/// left out is summed up in one last line that keeps their shared category, firmness and
/// uncertainty, so the verdict weighs every piece, listed or not.
pub(crate) fn evidence_of<'a>(
    items: impl Iterator<Item = (&'a CallRecord, &'a Observation)>,
) -> Vec<Evidence> {
    const CAP: usize = 20;
    let mut ranked: Vec<(u8, Evidence)> = items
        .map(|(c, o)| (o.telling_rank(), piece_of(c, o)))
        .collect();
    ranked.sort_by_key(|(rank, e)| (!e.firm, *rank));
    let mut all: Vec<Evidence> = ranked.into_iter().map(|(_, e)| e).collect();
    if all.len() <= CAP {
        return all;
    }
    let hidden = all.split_off(CAP);
    all.push(Evidence {
        category: Category::common(hidden.iter().map(|e| e.category)),
        seen_by: None,
        source: "…".into(),
        text: format!("{} more not listed", hidden.len()),
        firm: hidden.iter().any(|e| e.firm),
        uncertain: hidden.iter().all(|e| e.uncertain),
    });
    all
}

/// One observation of a call as evidence against a hint, weighed: it is uncertain when other
/// calls' threads or the server's background threads shared the window and no replay pinned
/// it on the tool; firm when it is not uncertain, it counts (its call succeeded, or a replay
/// showed the tool did it), it is no write to the server's shared state that no replay
/// confirmed (see [`CallRecord::shared_state`]), and it is of no softening category
/// (bookkeeping, transient, first-call initialisation).
fn piece_of(c: &CallRecord, o: &Observation) -> Evidence {
    let described = o.describe();
    let confirmed = c.confirmed_by_replay.contains(&described);
    let uncertain = !confirmed && !c.concurrent_with.is_empty();
    let category = category_of(c, o);
    // A write to the server's shared state, or what the run's first call created where no
    // replay checked the server's first-call initialisation, earns firmness only from a
    // replay.
    let unchecked = !confirmed && c.unchecked_initialisation.contains(&described);
    let unearned = !confirmed && (c.shared_state.contains(&described) || unchecked);
    let firm = !uncertain && !unearned && c.counts(o) && !category.is_some_and(Category::softens);
    Evidence {
        category,
        seen_by: Some(o.mechanism().seen_by()),
        source: c.label(),
        text: if confirmed {
            format!(
                "{described} (confirmed by {})",
                c.confirmed_by
                    .as_deref()
                    .unwrap_or("replaying the tool alone on a fresh server")
            )
        } else if uncertain {
            format!(
                "{described} (uncertain: started by {} may have done it)",
                c.concurrent_with.join(", ")
            )
        } else if unchecked {
            format!(
                "{described} (not confirmed: it may be the server's set-up on a first call or first use, and no replay checked)"
            )
        } else if unearned {
            format!(
                "{described} (not confirmed: other tools' calls wrote this file of the server's too, and no replay showed the tool doing it)"
            )
        } else {
            described
        },
        firm,
        uncertain,
    }
}

/// The category of an observation of a call: what the run marked on the call (bookkeeping,
/// first-call initialisation), else what the effect itself says (a transient file, a value
/// changed in place in a store).
pub(crate) fn category_of(call: &CallRecord, o: &Observation) -> Option<Category> {
    if let Some(c) = call.categories.get(&o.describe()) {
        return Some(*c);
    }
    let file = o.as_file()?;
    // SQLite's shared-memory index beside a database: no data, written by readers too.
    let shm = [".db-shm", ".sqlite-shm", ".sqlite3-shm", ".db3-shm"];
    if shm.iter().any(|s| file.path.ends_with(s)) {
        return Some(Category::Transient);
    }
    // git's index rewritten byte for byte: `git status` refreshing its stat cache after
    // other calls touched the working tree; nothing of the repository changed.
    if file.path.ends_with("/.git/index") && file.kind == crate::evidence::FileEffectKind::Rewritten
    {
        return Some(Category::Transient);
    }
    match &file.kind {
        crate::evidence::FileEffectKind::Transient { .. } => Some(Category::Transient),
        crate::evidence::FileEffectKind::StoreChanged {
            changed,
            removed: 0,
            ..
        } if *changed > 0 => Some(Category::Update),
        _ => None,
    }
}

/// One finding per definition problem of `audit` in a tool.
pub(crate) fn definition_findings(
    tool: &ToolDecl,
    audit: &'static str,
    with_hash: bool,
) -> Vec<Finding> {
    tool.problems
        .iter()
        .filter(|p| p.audit == audit)
        .map(|p| Finding {
            resolved_for: None,
            category: None,
            fingerprint: String::new(),
            accepted: None,
            audit,
            tool: Some(tool.name.clone()),
            hint: None,
            severity: Severity::Warning,
            confidence: Confidence::High,
            message: format!("{}: {}", tool.name, p.message),
            evidence: if with_hash {
                vec![Evidence::plain(
                    "tools/list",
                    format!("definition sha256 {}", &tool.definition_sha256[..16]),
                )]
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// "2 of 2 calls succeeded" / the outcomes of failed calls, for reasons.
/// Judges `hint`, which is meaningful only for tools that write, with `judge_declared`. A tool
/// that declares `readOnlyHint: true` gets "not applicable" (with `suggestion`), unless it
/// wrote and declared `hint` explicitly: then it is judged as the writer it is, and the reason
/// says why. `declared` is whether the tool declared `hint` at all.
pub(crate) fn judged_for_writers(
    tool: &ToolDecl,
    run: &ToolRun,
    hint: HintName,
    declared: bool,
    suggestion: Option<Suggestion>,
    judge_declared: impl FnOnce() -> HintJudgement,
) -> HintJudgement {
    let read_only = tool.hints.read_only.declared() == Some(true);
    let read_only_broken = read_only && declared && run.observations().any(|(_, o)| o.is_write());
    if read_only && !read_only_broken {
        let mut j = HintJudgement::new(
            Verdict::NotApplicable,
            format!(
                "readOnlyHint is true: {} is meaningful only for tools that write",
                hint.key()
            ),
        );
        j.suggestion = suggestion;
        return j;
    }
    let mut j = judge_declared();
    if read_only_broken {
        j.reason = format!(
            "readOnlyHint: true is contradicted by the tool's writes, so the {} it declared is judged as for a tool that writes: {}",
            hint.key(),
            j.reason
        );
    }
    j.suggestion = j.suggestion.or(suggestion);
    j
}

pub(crate) fn outcomes_summary(run: &ToolRun) -> String {
    if run.calls.is_empty() {
        return run
            .skipped
            .clone()
            .unwrap_or_else(|| "the tool was not called".into());
    }
    let labels: Vec<String> = run
        .calls
        .iter()
        .map(|c| format!("{}: {}", c.label(), c.outcome.label()))
        .collect();
    labels.join(", ")
}

#[cfg(test)]
pub(crate) mod testing {
    //! Builders of synthetic tools and runs for the audit tests.
    use super::*;
    use crate::evidence::{FileEffect, FileEffectKind, Mechanism, NetEvent, NetKind, ObjectKind};
    use crate::mcp::client::CallOutcome;
    use crate::mcp::tool::parse_tool;
    use serde_json::{Value, json};

    pub(crate) fn tool(annotations: Value) -> ToolDecl {
        parse_tool(
            &json!({"name":"t","inputSchema":{"type":"object"},"annotations":annotations}),
            0,
        )
        .expect("tool")
    }

    pub(crate) fn ok() -> CallOutcome {
        CallOutcome::Ok {
            text: "done".into(),
            result_sha256: "same".into(),
        }
    }

    pub(crate) fn call(
        number: usize,
        outcome: CallOutcome,
        observations: Vec<Observation>,
    ) -> CallRecord {
        CallRecord {
            number,
            duration_ms: 1,
            observations,
            ..CallRecord::bare(&json!({}), outcome)
        }
    }

    pub(crate) fn file(path: &str, kind: FileEffectKind) -> Observation {
        Observation::File(FileEffect::bare(
            path,
            kind,
            ObjectKind::File,
            Mechanism::Snapshot,
        ))
    }

    /// A write the sandbox refused (an `openat` for writing outside the writable places).
    pub(crate) fn denied_attempt(path: &str) -> Observation {
        Observation::Attempt(crate::evidence::WriteAttempt {
            syscall: "openat".into(),
            path: path.into(),
            target: None,
            denied: true,
            beyond_snapshot: false,
            destructive: false,
            pid: 1,
            mechanism: Mechanism::Attempt,
        })
    }

    pub(crate) fn net(kind: NetKind, destination: &str, loopback: bool) -> Observation {
        Observation::Network(NetEvent {
            kind,
            destination: destination.into(),
            port: Some(443),
            name: None,
            loopback,
            mechanism: Mechanism::Packet,
            payload: None,
            carried: Default::default(),
        })
    }

    pub(crate) fn run(calls: Vec<CallRecord>) -> ToolRun {
        ToolRun {
            calls,
            ..Default::default()
        }
    }

    pub(crate) fn full_coverage() -> Coverage {
        Coverage {
            files: Some("$WORKSPACE".into()),
            network: Some("synthetic".into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::FileEffectKind;
    use serde_json::json;
    use std::collections::HashSet;
    use testing::*;

    /// `n` calls of a read-only tool, each appending to a log while another call's process
    /// ran (uncertain), plus, when `firm_last`, one last call whose window was its own.
    fn uncertain_appends(n: usize, firm_last: bool) -> ToolJudgement {
        let t = tool(json!({"readOnlyHint": true}));
        let mut calls: Vec<CallRecord> = (0..n)
            .map(|i| {
                let mut c = call(
                    1,
                    ok(),
                    vec![file(&format!("$HOME/log-{i}"), FileEffectKind::Appended)],
                );
                c.concurrent_with = vec!["other call 1".into()];
                c
            })
            .collect();
        if firm_last {
            calls.push(call(
                1,
                ok(),
                vec![file("$WORKSPACE/mine", FileEffectKind::Created)],
            ));
        }
        judge_tool(&t, &run(calls), &full_coverage())
    }

    #[test]
    fn any_number_of_uncertain_pieces_stays_a_warning() {
        // Past the evidence cap too: the summary line keeps their weight.
        let j = uncertain_appends(25, false);
        let f = &j.findings[0];
        assert_eq!(f.severity, Severity::Warning, "{f:?}");
        assert_eq!(f.confidence, Confidence::Low);
        assert!(j.verdicts[0].uncertain);
        assert!(f.evidence.iter().all(|e| !e.firm));
        assert_eq!(
            f.evidence.last().map(|e| e.text.as_str()),
            Some("5 more not listed")
        );
    }

    #[test]
    fn one_firm_piece_makes_the_contradiction_firm_and_comes_first() {
        let j = uncertain_appends(25, true);
        let f = &j.findings[0];
        assert_eq!(f.severity, Severity::Error, "{f:?}");
        assert!(!j.verdicts[0].uncertain);
        assert!(f.evidence[0].firm);
        assert_eq!(f.evidence[0].text, "created $WORKSPACE/mine");
    }

    #[test]
    fn audit_ids_are_unique_kebab_case_and_documented() {
        let mut seen = HashSet::new();
        for m in ALL {
            assert!(seen.insert(m.id), "duplicate id {}", m.id);
            assert!(
                m.id.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{}",
                m.id
            );
            assert!(!m.summary.is_empty() && m.docs.len() > 80, "{}", m.id);
            assert!(!m.summary.contains('\n'), "{}", m.id);
        }
    }
}
