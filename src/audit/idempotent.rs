//! `idempotent`: a tool that declares `idempotentHint: true` must have no additional effect
//! when the identical call is repeated.

use super::{AuditMeta, HintJudgement, evidence_of, outcomes_summary};
use crate::evidence::{Coverage, ToolRun};
use crate::evidence::{FileEffectKind, Observation};
use crate::finding::{Confidence, Suggestion, SuggestionBasis, Verdict};
use crate::mcp::tool::{HintName, ToolDecl};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "idempotent",
    summary: "idempotentHint: true, but repeating the identical call changed the environment again",
    docs: "`idempotentHint: true` promises that calling the tool repeatedly with the same arguments \
has no additional effect on its environment. It is meaningful only when `readOnlyHint` is false; a tool that declares `readOnlyHint: true` and \
writes anyway is judged as the writer it is on the `idempotentHint` it declared explicitly, and the reason \
says so. \
hintcheck makes the first call, then repeats it with exactly the same arguments (`--repeat`, 2 calls \
by default), and contradicts the hint when a repeat has an effect of its own: a file created, \
appended to, overwritten, truncated, deleted or renamed again. Rewriting a file with identical \
content, or git updating its own bookkeeping files, is not an additional effect. A different response to the repeat is reported as a weak \
signal of hidden state, never as a contradiction, because the spec defines idempotence by effects. \
The verdict is `unexercised` when the first call did not succeed or no repeat was made.\n\n\
Fix: declare `idempotentHint: false`, or make the repeated call a no-op.",
};

/// Whether `o`, in a repeat, is an additional effect: a lasting change of a file.
pub(crate) fn counts(o: &Observation) -> bool {
    match o {
        // A same-content rewrite, and git's own bookkeeping (its index refreshed, ORIG_HEAD,
        // FETCH_HEAD), change nothing a user keeps.
        Observation::File(f) => {
            !matches!(
                f.kind,
                FileEffectKind::Rewritten | FileEffectKind::GitBookkeeping
            ) && !f.kind.is_transient()
        }
        Observation::Network(_)
        | Observation::Attempt(_)
        | Observation::Process(_)
        | Observation::Refused(_)
        | Observation::Secret(_) => false,
    }
}

/// Judges `idempotentHint`.
pub fn judge(tool: &ToolDecl, run: &ToolRun, coverage: &Coverage) -> HintJudgement {
    let first_ok = run.first_call().is_some_and(|c| c.outcome.is_success());
    let repeats: Vec<_> = run.repeats().collect();
    let repeat_effects: Vec<_> = repeats
        .iter()
        .flat_map(|c| {
            c.observations
                .iter()
                .filter(|o| counts(o) && c.counts(o))
                .map(move |o| (*c, o))
        })
        .collect();
    let first_effects = run
        .first_call()
        .is_some_and(|c| c.observations.iter().any(|o| counts(o) && c.counts(o)));
    let answered_repeats = repeats.iter().filter(|c| c.outcome.answered()).count();
    // Only a repeat that succeeded shows what repeating does: one that failed (the file to
    // move is gone) proves nothing about a repeat that works.
    let succeeded_repeats = repeats.iter().filter(|c| c.outcome.is_success()).count();
    // What the repeats support, for an absent hint and for a tool whose readOnlyHint: true
    // its writes contradict.
    // Effects of little weight or not the tool's own (a log every tool appends to) say
    // nothing of what repeating the tool does.
    let weighty = repeat_effects
        .iter()
        .find(|(c, o)| !super::category_of(c, o).is_some_and(crate::finding::Category::softens));
    // A riskier case that appended (`append: true`) would append again if repeated: no
    // suggestion that repeating changes nothing.
    let a_case_appends = run
        .calls
        .iter()
        .filter(|c| c.variant.is_some() && c.outcome.is_success())
        .flat_map(|c| c.observations.iter().map(move |o| (c, o)))
        .any(|(c, o)| {
            matches!(o, Observation::File(f) if f.kind == FileEffectKind::Appended)
                && c.counts(o)
                && !super::category_of(c, o).is_some_and(crate::finding::Category::softens)
        });
    let suggestion = if !(first_ok && answered_repeats > 0) {
        None
    } else if let Some((_, o)) = weighty {
        Some(Suggestion {
            hint: HintName::Idempotent,
            value: false,
            basis: SuggestionBasis::Observed,
            reason: format!(
                "the repeated call had an effect of its own: {}",
                o.describe()
            ),
        })
    } else if first_effects && succeeded_repeats > 0 && repeat_effects.is_empty() && !a_case_appends
    {
        Some(Suggestion {
            hint: HintName::Idempotent,
            value: true,
            basis: SuggestionBasis::Consistent,
            reason: "the first call wrote and the identical repeat changed nothing".into(),
        })
    } else {
        None
    };
    // A tool that claims to be read-only but writes is judged as the writer it is on the
    // idempotentHint it declared explicitly (a repeat that appended again contradicts it).
    super::judged_for_writers(
        tool,
        run,
        HintName::Idempotent,
        tool.hints.idempotent.declared().is_some(),
        suggestion,
        || {
            judge_declared(
                tool,
                run,
                coverage,
                (first_ok, first_effects),
                &repeats,
                repeat_effects,
            )
        },
    )
}

/// The verdict on the declared `idempotentHint` of a tool that writes (or may).
fn judge_declared(
    tool: &ToolDecl,
    run: &ToolRun,
    coverage: &Coverage,
    (first_ok, first_effects): (bool, bool),
    repeats: &[&crate::evidence::CallRecord],
    repeat_effects: Vec<(&crate::evidence::CallRecord, &Observation)>,
) -> HintJudgement {
    let answered_repeats = repeats.iter().filter(|c| c.outcome.answered()).count();
    match tool.hints.idempotent.declared() {
        Some(false) => HintJudgement::new(
            Verdict::NotApplicable,
            "idempotentHint is false: nothing to contradict",
        ),
        None => HintJudgement::new(
            Verdict::NotApplicable,
            "idempotentHint is not declared: the spec's default (false) promises nothing",
        ),
        Some(true) => {
            if !first_ok {
                return HintJudgement::new(
                    Verdict::Unexercised,
                    format!("the first call did not succeed ({})", outcomes_summary(run)),
                );
            }
            if !repeat_effects.is_empty() {
                let mut j = HintJudgement::new(
                    Verdict::Contradicted,
                    format!(
                        "the identical repeat call had {} effect(s) of its own",
                        repeat_effects.len()
                    ),
                );
                j.evidence = evidence_of(repeat_effects.into_iter());
                return j;
            }
            if answered_repeats == 0 {
                return HintJudgement::new(
                    Verdict::Unexercised,
                    if repeats.is_empty() {
                        "the call was not repeated (--repeat 1)".to_string()
                    } else {
                        format!("no repeat call was answered ({})", outcomes_summary(run))
                    },
                );
            }
            if coverage.files.is_none() {
                return HintJudgement::new(Verdict::Unexercised, "no file observer was active");
            }
            let first_digest = run.first_call().and_then(|c| c.outcome.result_sha256());
            let changed = repeats
                .iter()
                .any(|c| c.outcome.result_sha256() != first_digest);
            let mut j = HintJudgement::new(
                Verdict::Consistent,
                if changed {
                    "repeats had no effect of their own (the response changed, a weak sign of hidden state)"
                } else if first_effects {
                    "the first call wrote, the identical repeats changed nothing"
                } else {
                    "no call had any observed effect"
                },
            );
            if !first_effects {
                j.confidence = Confidence::Low;
            }
            j
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::testing::*;
    use crate::mcp::client::CallOutcome;
    use serde_json::json;

    #[test]
    fn a_failed_repeat_supports_no_idempotent_suggestion() {
        use crate::evidence::FileEffectKind;
        let moved = file("$WORKSPACE/b.txt", FileEffectKind::Created);
        let failed = crate::mcp::client::CallOutcome::ToolError {
            text: "a.txt: no such file".into(),
            result_sha256: "x".into(),
        };
        let r = run(vec![
            call(1, ok(), vec![moved.clone()]),
            call(2, failed, vec![]),
        ]);
        let j = judge(
            &tool(json!({"idempotentHint": false})),
            &r,
            &full_coverage(),
        );
        assert!(j.suggestion.is_none(), "{:?}", j.suggestion);
        // A repeat that succeeded and changed nothing supports true.
        let r = run(vec![
            call(1, ok(), vec![moved.clone()]),
            call(2, ok(), vec![]),
        ]);
        let j = judge(&tool(json!({})), &r, &full_coverage());
        assert_eq!(j.suggestion.map(|s| s.value), Some(true));
        // Unless a riskier case appended (`append: true`): repeating it would append again.
        let mut appending = call(
            0,
            ok(),
            vec![file("$WORKSPACE/b.txt", FileEffectKind::Appended)],
        );
        appending.variant = Some("append: true".into());
        let r = run(vec![
            call(1, ok(), vec![moved.clone()]),
            call(2, ok(), vec![]),
            appending,
        ]);
        let j = judge(&tool(json!({})), &r, &full_coverage());
        assert!(j.suggestion.is_none(), "{:?}", j.suggestion);
        // A repeat whose only effect is bookkeeping (a log every tool appends to) says nothing.
        let mut logged = call(2, ok(), vec![file("$HOME/.log", FileEffectKind::Appended)]);
        logged.categories.insert(
            logged.observations[0].describe(),
            crate::finding::Category::Bookkeeping,
        );
        let r = run(vec![call(1, ok(), vec![moved]), logged]);
        let j = judge(&tool(json!({})), &r, &full_coverage());
        assert!(j.suggestion.is_none(), "{:?}", j.suggestion);
    }

    #[test]
    fn a_repeat_with_its_own_effect_contradicts() {
        let t = tool(json!({"idempotentHint": true}));
        let r = run(vec![
            call(1, ok(), vec![file("$WORKSPACE/n", FileEffectKind::Created)]),
            call(
                2,
                ok(),
                vec![file("$WORKSPACE/n", FileEffectKind::Appended)],
            ),
        ]);
        let j = judge(&t, &r, &full_coverage());
        assert_eq!(j.verdict, Verdict::Contradicted);
        assert_eq!(j.evidence[0].source, "repeat 2");
    }

    #[test]
    fn a_read_only_tool_that_appends_again_contradicts_its_idempotent_hint() {
        let r = run(vec![
            call(
                1,
                ok(),
                vec![file("$WORKSPACE/log", FileEffectKind::Appended)],
            ),
            call(
                2,
                ok(),
                vec![file("$WORKSPACE/log", FileEffectKind::Appended)],
            ),
        ]);
        let liar = tool(json!({"readOnlyHint": true, "idempotentHint": true}));
        let j = judge(&liar, &r, &full_coverage());
        assert_eq!(j.verdict, Verdict::Contradicted);
        assert!(
            j.reason.contains("judged as for a tool that writes"),
            "{}",
            j.reason
        );
        let quiet = run(vec![call(1, ok(), vec![]), call(2, ok(), vec![])]);
        assert_eq!(
            judge(&liar, &quiet, &full_coverage()).verdict,
            Verdict::NotApplicable
        );
    }

    #[test]
    fn same_content_rewrite_and_changed_response_do_not_contradict() {
        let t = tool(json!({"idempotentHint": true}));
        let r = run(vec![
            call(1, ok(), vec![file("$WORKSPACE/n", FileEffectKind::Created)]),
            call(
                2,
                CallOutcome::Ok {
                    text: "other".into(),
                    result_sha256: "different".into(),
                },
                vec![file("$WORKSPACE/n", FileEffectKind::Rewritten)],
            ),
        ]);
        let j = judge(&t, &r, &full_coverage());
        assert_eq!(j.verdict, Verdict::Consistent);
        assert!(j.reason.contains("weak sign"));
    }

    #[test]
    fn unexercised_without_a_successful_first_call_or_a_repeat() {
        let t = tool(json!({"idempotentHint": true}));
        let failed = run(vec![
            call(1, CallOutcome::ServerDied, vec![]),
            call(2, ok(), vec![]),
        ]);
        assert_eq!(
            judge(&t, &failed, &full_coverage()).verdict,
            Verdict::Unexercised
        );
        let once = run(vec![call(1, ok(), vec![])]);
        assert_eq!(
            judge(&t, &once, &full_coverage()).verdict,
            Verdict::Unexercised
        );
    }

    #[test]
    fn suggestion_for_absent_hint() {
        let t = tool(json!({}));
        let r = run(vec![
            call(1, ok(), vec![file("$WORKSPACE/n", FileEffectKind::Created)]),
            call(2, ok(), vec![]),
        ]);
        let s = judge(&t, &r, &full_coverage())
            .suggestion
            .expect("suggestion");
        assert!(s.value);
    }
}
