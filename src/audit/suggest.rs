//! The annotations a tool's observed behaviour supports, for every hint (what `hintcheck
//! suggest` prints): a contradicted hint flips, backed by what was observed; an absent hint
//! takes what the audits suggested; a consistent hint stays, consistent with what was
//! exercised; anything else keeps the declared value (or the spec's default) and says it was
//! not verified. A read-only tool, once supported, also gets the `destructiveHint` and
//! `idempotentHint` that read-only implies, so that every hint is declared.

use serde::Serialize;

use crate::finding::{HintVerdict, Suggestion, SuggestionBasis, Verdict};
use crate::mcp::tool::{HintName, Hints};

/// How well the behaviour backs a supported value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SupportBasis {
    /// An observed behaviour proves it (a write, a destroyed file, a DNS lookup).
    Observed,
    /// It fits everything that was exercised, which proves only what was exercised.
    Consistent,
    /// Nothing exercised it: the declared value, or the spec's default when none was.
    Unverified,
}

impl SupportBasis {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SupportBasis::Observed => "observed",
            SupportBasis::Consistent => "consistent",
            SupportBasis::Unverified => "unverified",
        }
    }
}

/// The value the observations support for one hint.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SupportedHint {
    /// The hint.
    pub hint: HintName,
    /// The value to declare.
    pub value: bool,
    /// How well it is backed.
    pub basis: SupportBasis,
    /// Whether it differs from what the tool declares now (an absent hint differs).
    pub changed: bool,
    /// Why.
    pub reason: String,
}

/// The supported value of every hint, in spec order.
pub fn supported(
    hints: &Hints,
    verdicts: &[HintVerdict],
    suggestions: &[Suggestion],
) -> Vec<SupportedHint> {
    let mut out: Vec<SupportedHint> = HintName::ALL
        .into_iter()
        .map(|hint| {
            let declared = hints.get(hint).declared();
            let verdict = verdicts.iter().find(|v| v.hint == hint);
            let suggestion = suggestions.iter().find(|s| s.hint == hint);
            let (value, basis, reason) = match (verdict, suggestion, declared) {
                (Some(v), _, Some(d)) if v.verdict == Verdict::Contradicted && !v.uncertain => (
                    !d,
                    SupportBasis::Observed,
                    format!("declared {d}, but {}", v.reason),
                ),
                (_, Some(s), _) => (
                    s.value,
                    match s.basis {
                        SuggestionBasis::Observed => SupportBasis::Observed,
                        SuggestionBasis::Consistent => SupportBasis::Consistent,
                    },
                    s.reason.clone(),
                ),
                (Some(v), None, Some(d)) if v.verdict == Verdict::Consistent => {
                    (d, SupportBasis::Consistent, v.reason.clone())
                }
                (v, None, Some(d)) => (
                    d,
                    SupportBasis::Unverified,
                    format!(
                        "kept as declared; not verified: {}",
                        v.map(|v| v.reason.as_str())
                            .unwrap_or("the hint was not judged")
                    ),
                ),
                (_, None, None) => (
                    hint.default_value(),
                    SupportBasis::Unverified,
                    format!(
                        "nothing observed supports a value: the spec's default ({})",
                        hint.default_value()
                    ),
                ),
            };
            SupportedHint {
                hint,
                value,
                basis,
                changed: declared != Some(value),
                reason,
            }
        })
        .collect();
    // readOnlyHint: true implies no destructive update and no additional effect on repeat.
    if let Some(read_only) = out
        .iter()
        .find(|s| s.hint == HintName::ReadOnly && s.value && s.basis != SupportBasis::Unverified)
        .cloned()
    {
        for s in &mut out {
            let implied = match s.hint {
                HintName::Destructive => false,
                HintName::Idempotent => true,
                _ => continue,
            };
            if s.basis == SupportBasis::Unverified {
                s.value = implied;
                s.basis = read_only.basis;
                s.changed = hints.get(s.hint).declared() != Some(implied);
                s.reason = format!(
                    "implied by readOnlyHint: true ({})",
                    read_only.reason.trim_end_matches('.')
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::testing::tool;
    use serde_json::json;

    fn verdict(hint: HintName, verdict: Verdict, uncertain: bool) -> HintVerdict {
        HintVerdict {
            source: None,
            resolved_for: None,
            hint,
            declared: String::new(),
            verdict,
            reason: "because".into(),
            evidence: Vec::new(),
            audit: "a",
            uncertain,
        }
    }

    fn value(s: &[SupportedHint], h: HintName) -> (bool, SupportBasis, bool) {
        let x = s.iter().find(|x| x.hint == h).expect("hint");
        (x.value, x.basis, x.changed)
    }

    #[test]
    fn contradictions_flip_consistent_hints_stay_and_absent_ones_get_defaults() {
        let t = tool(json!({"readOnlyHint": true, "openWorldHint": false, "idempotentHint": true}));
        let verdicts = [
            verdict(HintName::ReadOnly, Verdict::Contradicted, false),
            verdict(HintName::OpenWorld, Verdict::Consistent, false),
            verdict(HintName::Idempotent, Verdict::NotApplicable, false),
        ];
        let s = supported(&t.hints, &verdicts, &[]);
        assert_eq!(
            value(&s, HintName::ReadOnly),
            (false, SupportBasis::Observed, true)
        );
        assert_eq!(
            value(&s, HintName::OpenWorld),
            (false, SupportBasis::Consistent, false)
        );
        assert_eq!(
            value(&s, HintName::Idempotent),
            (true, SupportBasis::Unverified, false)
        );
        assert_eq!(
            value(&s, HintName::Destructive),
            (true, SupportBasis::Unverified, true),
            "absent: the spec default, which an absent hint already means but does not say"
        );
    }

    #[test]
    fn read_only_implies_the_write_hints_and_uncertainty_changes_nothing() {
        let t = tool(json!({"openWorldHint": false}));
        let suggestions = [Suggestion {
            hint: HintName::ReadOnly,
            value: true,
            basis: SuggestionBasis::Consistent,
            reason: "no write was observed".into(),
        }];
        let verdicts = [verdict(HintName::OpenWorld, Verdict::Contradicted, true)];
        let s = supported(&t.hints, &verdicts, &suggestions);
        assert_eq!(
            value(&s, HintName::Destructive),
            (false, SupportBasis::Consistent, true)
        );
        assert_eq!(
            value(&s, HintName::Idempotent),
            (true, SupportBasis::Consistent, true)
        );
        assert_eq!(
            value(&s, HintName::OpenWorld),
            (false, SupportBasis::Unverified, false),
            "an uncertain contradiction keeps the declared value"
        );
    }
}
