//! `read-only`: a tool that declares `readOnlyHint: true` must not modify its environment.

use super::{AuditMeta, HintJudgement, category_of, evidence_of, outcomes_summary};
use crate::evidence::{Coverage, ToolRun};
use crate::finding::{Category, Suggestion, SuggestionBasis, Verdict};
use crate::mcp::tool::{HintName, ToolDecl};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "read-only",
    summary: "readOnlyHint: true, but the tool modified its environment",
    docs: "A tool that declares `readOnlyHint: true` promises not to modify its environment. \
Hosts use the hint to skip confirmation and to run such tools in parallel. hintcheck calls the \
tool (and repeats the call) and contradicts the hint when any write is observed in the call \
windows: a file created, appended to, overwritten, truncated, deleted, renamed, re-moded or \
rewritten under the observed directories. The verdict is `consistent` when at least one call \
succeeded and nothing was written, `unexercised` when no call succeeded. A clean verdict covers \
only the arguments that were tried and the places that were observed (see the report's coverage).\n\n\
Fix: set `readOnlyHint: false` (and declare `destructiveHint`/`idempotentHint` truthfully), or \
remove the write from the tool.",
};

/// Judges `readOnlyHint`.
pub fn judge(tool: &ToolDecl, run: &ToolRun, coverage: &Coverage) -> HintJudgement {
    let writes: Vec<_> = run.observations().filter(|(_, o)| o.is_write()).collect();
    let declared = tool.hints.read_only.declared();
    if declared != Some(true) {
        let mut j = HintJudgement::new(
            Verdict::NotApplicable,
            match declared {
                Some(_) => "readOnlyHint is false: the tool may write, nothing to contradict",
                None => "readOnlyHint is not declared: the spec's default (false) promises nothing",
            },
        );
        if declared.is_none() {
            // Writes of little weight or not the tool's own (a log every tool appends to, a
            // lock file) neither show that it writes nor that it does not.
            let weighty = writes
                .iter()
                .find(|(c, o)| !category_of(c, o).is_some_and(Category::softens));
            j.suggestion = if let Some((_, o)) = weighty {
                Some(Suggestion {
                    hint: HintName::ReadOnly,
                    value: false,
                    basis: SuggestionBasis::Observed,
                    reason: format!("the tool wrote: {}", o.describe()),
                })
            } else if !writes.is_empty() {
                None
            } else if run.succeeded() && coverage.files.is_some() {
                Some(Suggestion {
                    hint: HintName::ReadOnly,
                    value: true,
                    basis: SuggestionBasis::Consistent,
                    reason: "no write was observed in the successful calls".into(),
                })
            } else {
                None
            };
        }
        return j;
    }
    if !writes.is_empty() {
        let n = writes.len();
        let category = Category::common(writes.iter().map(|(c, o)| category_of(c, o)));
        let mut j = HintJudgement::new(
            Verdict::Contradicted,
            match category {
                Some(Category::Transient) => format!(
                    "{n} write(s) were observed during its calls, none of them lasting (temporary, lock or SQLite shared-memory files)"
                ),
                Some(Category::Bookkeeping) => format!(
                    "{n} write(s) were observed during its calls, all of them the server's per-call bookkeeping (a file the server made outside the workspace, which every tool writes on every call)"
                ),
                _ => format!("{n} write(s) were observed during its calls"),
            },
        );
        j.evidence = evidence_of(writes.into_iter());
        return j;
    }
    if coverage.files.is_none() {
        return HintJudgement::new(Verdict::Unexercised, "no file observer was active");
    }
    if run.succeeded() {
        let n = run.calls.iter().filter(|c| c.outcome.is_success()).count();
        HintJudgement::new(
            Verdict::Consistent,
            format!("{n} successful call(s), no write observed"),
        )
    } else {
        HintJudgement::new(
            Verdict::Unexercised,
            format!(
                "no call succeeded ({}), so the behaviour was not reached",
                outcomes_summary(run)
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::testing::*;
    use crate::evidence::FileEffectKind;
    use crate::mcp::client::CallOutcome;
    use serde_json::json;

    #[test]
    fn a_failed_calls_write_counts_once_shown_to_be_the_tools() {
        let t = tool(json!({"readOnlyHint": true}));
        let failed = || {
            call(
                1,
                CallOutcome::ToolError {
                    text: "x".into(),
                    result_sha256: "h".into(),
                },
                vec![file("$WORKSPACE/log", FileEffectKind::Appended)],
            )
        };
        // Seen, but nothing shows it was the tool's: an observation, not a verdict.
        let j = judge(&t, &run(vec![failed()]), &full_coverage());
        assert_eq!(j.verdict, Verdict::Unexercised);
        // The call's own threads did it: a tool that writes even when it fails writes.
        let mut own = failed();
        own.own_threads_did_it = true;
        let j = judge(&t, &run(vec![own.clone()]), &full_coverage());
        assert_eq!(j.verdict, Verdict::Contradicted);
        assert!(j.evidence[0].firm, "{:?}", j.evidence);
        // Unless it wrote what the server keeps for several tools: then only a replay shows
        // it is the tool's.
        own.shared_state = vec!["appended to $WORKSPACE/log".into()];
        let j = judge(&t, &run(vec![own]), &full_coverage());
        assert_eq!(j.verdict, Verdict::Unexercised);
        // A replay of the tool alone did it again: a tool that writes even when it fails
        // writes.
        let mut replayed = failed();
        replayed.confirmed_by_replay = vec!["appended to $WORKSPACE/log".into()];
        let j = judge(&t, &run(vec![replayed]), &full_coverage());
        assert_eq!(j.verdict, Verdict::Contradicted);
        assert!(j.evidence[0].firm, "{:?}", j.evidence);
    }

    #[test]
    fn a_reader_that_touches_sqlites_shared_memory_index_is_only_warned() {
        let t = tool(json!({"readOnlyHint": true}));
        let mut c = call(
            1,
            ok(),
            vec![file(
                "$WORKSPACE/index.sqlite3-shm",
                FileEffectKind::Overwritten,
            )],
        );
        c.confirmed_by_replay = vec![c.observations[0].describe()];
        let j = judge(&t, &run(vec![c]), &full_coverage());
        assert_eq!(j.verdict, Verdict::Contradicted);
        assert!(!j.evidence[0].firm, "{:?}", j.evidence);
        assert_eq!(j.evidence[0].category, Some(Category::Transient));
        // A file of the user's that merely ends so is no index of a database.
        let c = call(
            1,
            ok(),
            vec![file("$WORKSPACE/report-shm", FileEffectKind::Overwritten)],
        );
        let j = judge(&t, &run(vec![c]), &full_coverage());
        assert!(j.evidence[0].firm, "{:?}", j.evidence);
    }

    #[test]
    fn consistent_needs_a_successful_call() {
        let t = tool(json!({"readOnlyHint": true}));
        assert_eq!(
            judge(&t, &run(vec![call(1, ok(), vec![])]), &full_coverage()).verdict,
            Verdict::Consistent
        );
        let failed = run(vec![call(1, CallOutcome::Timeout { after_ms: 5 }, vec![])]);
        assert_eq!(
            judge(&t, &failed, &full_coverage()).verdict,
            Verdict::Unexercised
        );
    }

    #[test]
    fn absent_hint_gets_a_suggestion_never_a_verdict() {
        let t = tool(json!({}));
        let quiet = judge(&t, &run(vec![call(1, ok(), vec![])]), &full_coverage());
        assert_eq!(quiet.verdict, Verdict::NotApplicable);
        let s = quiet.suggestion.expect("suggestion");
        assert!(s.value);
        assert_eq!(s.basis, SuggestionBasis::Consistent);
        let writer = judge(
            &t,
            &run(vec![call(
                1,
                ok(),
                vec![file("$HOME/x", FileEffectKind::Created)],
            )]),
            &full_coverage(),
        );
        let s = writer.suggestion.expect("suggestion");
        assert!(!s.value);
        assert_eq!(s.basis, SuggestionBasis::Observed);
    }

    #[test]
    fn wrong_type_is_judged_as_absent() {
        let t = tool(json!({"readOnlyHint": "true"}));
        let j = judge(
            &t,
            &run(vec![call(
                1,
                ok(),
                vec![file("$HOME/x", FileEffectKind::Created)],
            )]),
            &full_coverage(),
        );
        assert_eq!(j.verdict, Verdict::NotApplicable);
    }
}
