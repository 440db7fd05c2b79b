//! `destructive`: a tool that declares `destructiveHint: false` may only make additive updates.

use super::{AuditMeta, HintJudgement, evidence_of};
use crate::evidence::{Coverage, FileEffectKind, ToolRun};
use crate::finding::{Suggestion, SuggestionBasis, Verdict};
use crate::mcp::tool::{HintName, ToolDecl};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "destructive",
    summary: "destructiveHint: false, but the tool deleted or overwrote existing content",
    docs: "`destructiveHint: false` promises that the tool performs only additive updates. It is \
meaningful only when `readOnlyHint` is false; a tool that declares `readOnlyHint: true` and \
writes anyway is judged as the writer it is on the `destructiveHint` it declared explicitly, and the reason \
says so. hintcheck contradicts it when a call deletes, \
overwrites, truncates or renames over content that existed before that call, or replaces a path \
with a different kind of object. Creating new paths and appending to files (the old content stays \
a prefix of the new) are additive and never count. Effects on content the tool itself created in \
an earlier call still count: it existed before the call that destroyed it.\n\n\
Fix: declare `destructiveHint: true`, or change the tool so that it only adds.",
};

/// Judges `destructiveHint`.
pub fn judge(tool: &ToolDecl, run: &ToolRun, coverage: &Coverage) -> HintJudgement {
    let destructive: Vec<_> = run
        .observations()
        .filter(|(_, o)| o.is_destructive())
        .collect();
    let any_write = run.observations().any(|(_, o)| o.is_write());
    // Whether a write met content that existed before it and kept it (an append, entries
    // added to a store, a ref moved forward): only then was the case that could destroy
    // content tried. A tool seen creating new paths only may still overwrite old ones.
    let wrote_onto_existing = run.observations().any(|(_, o)| {
        o.as_file().is_some_and(|f| {
            matches!(
                f.kind,
                FileEffectKind::Appended
                    | FileEffectKind::Extended
                    | FileEffectKind::StoreChanged { .. }
                    | FileEffectKind::RefAdvanced { .. }
            )
        })
    });
    // Whether every write made a new path (the only case where "an overwrite was not
    // tried" is true: a rewrite, an overwrite or a removal met existing content).
    let only_created = run
        .observations()
        .filter(|(_, o)| o.is_write())
        .all(|(_, o)| {
            o.as_file()
                .is_some_and(|f| f.kind == FileEffectKind::Created)
        });
    // Changes inside a database file are writes whose kind the file cannot tell.
    let database_change = run
        .observations()
        .find(|(_, o)| o.as_file().is_some_and(|f| f.database))
        .map(|(_, o)| o.describe());
    // What the writes support, for an absent hint and for a tool whose readOnlyHint: true
    // its writes contradict.
    let suggestion = if let Some((_, o)) = destructive.first() {
        Some(Suggestion {
            hint: HintName::Destructive,
            value: true,
            basis: SuggestionBasis::Observed,
            reason: format!("the tool destroyed existing content: {}", o.describe()),
        })
    } else if any_write && run.succeeded() && database_change.is_none() && wrote_onto_existing {
        Some(Suggestion {
            hint: HintName::Destructive,
            value: false,
            basis: SuggestionBasis::Consistent,
            reason: "every observed write was additive, onto existing content too (appended, or entries only added)".into(),
        })
    } else {
        None
    };
    // A tool that claims to be read-only but writes is judged as the writer it is on the
    // destructiveHint it declared explicitly.
    super::judged_for_writers(
        tool,
        run,
        HintName::Destructive,
        tool.hints.destructive.declared().is_some(),
        suggestion,
        || {
            let mut j =
                judge_declared(tool, run, coverage, destructive, any_write, database_change);
            if any_write && only_created && j.verdict == Verdict::NotApplicable {
                j.reason.push_str(
                    "; every write observed made a new path, so an overwrite of existing content was not tried",
                );
            }
            j
        },
    )
}

/// The verdict on the declared `destructiveHint` of a tool that writes (or may).
fn judge_declared(
    tool: &ToolDecl,
    run: &ToolRun,
    coverage: &Coverage,
    destructive: Vec<(&crate::evidence::CallRecord, &crate::evidence::Observation)>,
    any_write: bool,
    database_change: Option<String>,
) -> HintJudgement {
    match tool.hints.destructive.declared() {
        Some(true) => HintJudgement::new(
            Verdict::NotApplicable,
            "destructiveHint is true: nothing to contradict",
        ),
        None => HintJudgement::new(
            Verdict::NotApplicable,
            "destructiveHint is not declared: the spec's default (true) promises nothing",
        ),
        Some(false) => {
            if !destructive.is_empty() {
                let mut j = HintJudgement::new(
                    Verdict::Contradicted,
                    format!(
                        "{} destructive effect(s) on existing content were observed",
                        destructive.len()
                    ),
                );
                j.evidence = evidence_of(destructive.into_iter());
                return j;
            }
            if coverage.files.is_none() {
                return HintJudgement::new(Verdict::Unexercised, "no file observer was active");
            }
            if let Some(change) = database_change.filter(|_| run.succeeded()) {
                return HintJudgement::new(
                    Verdict::Unexercised,
                    format!(
                        "the tool {change}: a database or a document package (.xlsx, .docx) is rewritten whether entries are added or removed, so the file alone cannot show which"
                    ),
                );
            }
            if run.succeeded() {
                let what = if any_write {
                    "only additive writes were observed"
                } else {
                    "no write was observed"
                };
                HintJudgement::new(Verdict::Consistent, what)
            } else {
                HintJudgement::unexercised_as_no_call_succeeded(run)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::testing::*;
    use crate::evidence::FileEffectKind;
    use serde_json::json;

    #[test]
    fn no_write_onto_existing_content_no_relaxed_suggestion() {
        // write_file made a new file: whether it overwrites an existing one was not tried.
        let cautious = tool(json!({"destructiveHint": true}));
        let created = run(vec![call(
            1,
            ok(),
            vec![file("$WORKSPACE/new.txt", FileEffectKind::Created)],
        )]);
        let j = judge(&cautious, &created, &full_coverage());
        assert!(j.suggestion.is_none(), "{:?}", j.suggestion);
        assert!(
            j.reason
                .contains("an overwrite of existing content was not tried"),
            "{}",
            j.reason
        );
        // A rewrite of existing content (todo-txt-mcp's save) met existing content: the
        // note is not given.
        let rewritten = run(vec![call(
            1,
            ok(),
            vec![file("$WORKSPACE/todo.txt", FileEffectKind::Rewritten)],
        )]);
        let j = judge(&cautious, &rewritten, &full_coverage());
        assert!(!j.reason.contains("made a new path"), "{}", j.reason);
        // An append onto existing content was tried and kept it: additive.
        let appended = run(vec![call(
            1,
            ok(),
            vec![file("$WORKSPACE/log.txt", FileEffectKind::Appended)],
        )]);
        let s = judge(&tool(json!({})), &appended, &full_coverage()).suggestion;
        assert_eq!(s.map(|s| s.value), Some(false));
    }

    #[test]
    fn a_database_changed_in_place_is_neither_evidence_nor_proof() {
        let t = tool(json!({"destructiveHint": false}));
        let mut change = file("$WORKSPACE/app.db", FileEffectKind::Overwritten);
        if let crate::evidence::Observation::File(f) = &mut change {
            f.database = true;
        }
        let r = run(vec![call(1, ok(), vec![change])]);
        let j = judge(&t, &r, &full_coverage());
        assert_eq!(j.verdict, Verdict::Unexercised, "{}", j.reason);
        assert!(
            j.reason
                .contains("changed database $WORKSPACE/app.db in place"),
            "{}",
            j.reason
        );
        // Undeclared: no suggestion either way.
        let undeclared = tool(json!({}));
        assert!(
            judge(&undeclared, &r, &full_coverage())
                .suggestion
                .is_none()
        );
    }

    #[test]
    fn appends_and_creates_are_additive_overwrites_are_not() {
        let t = tool(json!({"destructiveHint": false}));
        let additive = run(vec![call(
            1,
            ok(),
            vec![
                file("$WORKSPACE/a", FileEffectKind::Created),
                file("$WORKSPACE/b", FileEffectKind::Appended),
            ],
        )]);
        assert_eq!(
            judge(&t, &additive, &full_coverage()).verdict,
            Verdict::Consistent
        );
        for kind in [
            FileEffectKind::Overwritten,
            FileEffectKind::Truncated,
            FileEffectKind::Deleted,
            FileEffectKind::Renamed {
                from: "$WORKSPACE/x".into(),
                over_existing: true,
            },
        ] {
            let r = run(vec![call(
                1,
                ok(),
                vec![file("$WORKSPACE/a", kind.clone())],
            )]);
            assert_eq!(
                judge(&t, &r, &full_coverage()).verdict,
                Verdict::Contradicted,
                "{kind:?}"
            );
        }
        let plain_rename = run(vec![call(
            1,
            ok(),
            vec![file(
                "$WORKSPACE/b",
                FileEffectKind::Renamed {
                    from: "$WORKSPACE/a".into(),
                    over_existing: false,
                },
            )],
        )]);
        assert_eq!(
            judge(&t, &plain_rename, &full_coverage()).verdict,
            Verdict::Consistent
        );
    }

    #[test]
    fn a_read_only_tool_that_writes_is_judged_on_its_declared_destructive_hint() {
        let r = run(vec![call(
            1,
            ok(),
            vec![file("$WORKSPACE/a", FileEffectKind::Deleted)],
        )]);
        let ro = tool(json!({"readOnlyHint": true, "destructiveHint": false}));
        let j = judge(&ro, &r, &full_coverage());
        assert_eq!(j.verdict, Verdict::Contradicted);
        assert!(
            j.reason.starts_with("readOnlyHint: true is contradicted"),
            "{}",
            j.reason
        );
        // Without an explicit destructiveHint there is nothing more to judge.
        let bare = tool(json!({"readOnlyHint": true}));
        assert_eq!(
            judge(&bare, &r, &full_coverage()).verdict,
            Verdict::NotApplicable
        );
    }

    #[test]
    fn not_applicable_for_read_only_and_default_tools() {
        let r = run(vec![call(
            1,
            ok(),
            vec![file("$WORKSPACE/a", FileEffectKind::Deleted)],
        )]);
        let ro = tool(json!({"readOnlyHint": true, "destructiveHint": false}));
        let quiet = run(vec![call(1, ok(), vec![])]);
        assert_eq!(
            judge(&ro, &quiet, &full_coverage()).verdict,
            Verdict::NotApplicable
        );
        let absent = judge(&tool(json!({})), &r, &full_coverage());
        assert_eq!(absent.verdict, Verdict::NotApplicable);
        assert!(absent.suggestion.expect("suggestion").value);
    }
}
