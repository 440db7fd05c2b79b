//! `open-world`: a tool that declares `openWorldHint: false` must not reach external entities.

use super::{AuditMeta, HintJudgement, evidence_of};
use crate::evidence::{Coverage, ToolRun};
use crate::finding::{Suggestion, SuggestionBasis, Verdict};
use crate::mcp::tool::{HintName, ToolDecl};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "open-world",
    summary: "openWorldHint: false, but the tool tried to reach the network",
    docs: "`openWorldHint: false` promises that the tool's domain of interaction is closed: it talks \
to no external entities. hintcheck contradicts it when, during the tool's calls, the server asks a \
DNS question, opens a TCP connection or sends a UDP datagram to a non-loopback address. Traffic \
between the server and its own listeners is not evidence: loopback, and an address the server \
bound itself before it connected there (inside the sandbox any address can be bound, so a server \
could bind an outside address to mask a connection to it; the bind is seen, and the call's \
observations name such traffic \"an address the server bound itself\"). Attempts count even though the \
sandbox never lets them leave the machine: intent is behaviour. The verdict is `unexercised` when \
no network observer was active (for example with --no-sandbox), because nobody watched.\n\n\
Fix: declare `openWorldHint: true`, or remove the network access from the tool.",
};

/// Whether the tool's way to the network was tried: a tool that takes an address (a `url`,
/// `uri`, `endpoint`, `host` …) must have succeeded with one given; otherwise calls that
/// reached nothing (a local path, an empty query) cannot say it stays closed.
fn address_tried(tool: &ToolDecl, run: &ToolRun) -> bool {
    const ADDRESS_WORDS: [&str; 8] = [
        "url", "uri", "link", "href", "endpoint", "website", "host", "domain",
    ];
    let takes_address = tool
        .input_schema
        .get("properties")
        .and_then(serde_json::Value::as_object)
        .is_some_and(|props| {
            props.keys().any(|k| {
                let k = k.to_lowercase();
                ADDRESS_WORDS.iter().any(|w| k.contains(w))
            })
        });
    !takes_address
        || run.calls.iter().any(|c| {
            c.outcome.is_success() && {
                let args = c.arguments.to_string();
                args.contains("http://") || args.contains("https://")
            }
        })
}

/// Judges `openWorldHint`.
pub fn judge(tool: &ToolDecl, run: &ToolRun, coverage: &Coverage) -> HintJudgement {
    let external: Vec<_> = run
        .observations()
        .filter(|(_, o)| o.as_network().is_some_and(|n| !n.loopback))
        .collect();
    match tool.hints.open_world.declared() {
        Some(true) => HintJudgement::new(
            Verdict::NotApplicable,
            "openWorldHint is true: nothing to contradict",
        ),
        None => {
            let mut j = HintJudgement::new(
                Verdict::NotApplicable,
                "openWorldHint is not declared: the spec's default (true) promises nothing",
            );
            j.suggestion = if let Some((_, o)) = external.first() {
                Some(Suggestion {
                    hint: HintName::OpenWorld,
                    value: true,
                    basis: SuggestionBasis::Observed,
                    reason: format!("the tool reached for the network: {}", o.describe()),
                })
            } else if coverage.network.is_some() && run.succeeded() && address_tried(tool, run) {
                Some(Suggestion {
                    hint: HintName::OpenWorld,
                    value: false,
                    basis: SuggestionBasis::Consistent,
                    reason: "no network activity was observed in the successful calls".into(),
                })
            } else {
                None
            };
            j
        }
        Some(false) => {
            if !external.is_empty() {
                let mut j = HintJudgement::new(
                    Verdict::Contradicted,
                    format!(
                        "{} network attempt(s) to external destinations were observed",
                        external.len()
                    ),
                );
                j.evidence = evidence_of(external.into_iter());
                return j;
            }
            if coverage.network.is_none() {
                return HintJudgement::new(
                    Verdict::Unexercised,
                    "network activity was not observed in this run (no network observer was active)",
                );
            }
            if run.succeeded() {
                let internal = run.observations().any(|(_, o)| o.as_network().is_some());
                HintJudgement::new(
                    Verdict::Consistent,
                    if internal {
                        "only traffic inside the server was observed (loopback, or addresses it bound itself)"
                    } else {
                        "no network activity was observed"
                    },
                )
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
    use crate::evidence::NetKind;
    use serde_json::json;

    #[test]
    fn a_tool_that_takes_an_address_must_have_been_given_one() {
        let fetch = crate::mcp::tool::parse_tool(
            &json!({"name": "fetch", "inputSchema": {"type": "object",
                "properties": {"url": {"type": "string"}}}}),
            0,
        )
        .expect("tool");
        let without = run(vec![call(1, ok(), vec![])]);
        let j = judge(&fetch, &without, &full_coverage());
        assert!(j.suggestion.is_none(), "{:?}", j.suggestion);
        let mut with = call(1, ok(), vec![]);
        with.arguments = json!({"url": "https://hintcheck.example.test/"});
        let j = judge(&fetch, &run(vec![with]), &full_coverage());
        assert_eq!(j.suggestion.map(|s| s.value), Some(false));
        // A tool with no address to give keeps the suggestion.
        let j = judge(&tool(json!({})), &without, &full_coverage());
        assert_eq!(j.suggestion.map(|s| s.value), Some(false));
    }

    #[test]
    fn external_attempts_contradict_loopback_does_not() {
        let t = tool(json!({"openWorldHint": false}));
        let lo = run(vec![call(
            1,
            ok(),
            vec![net(NetKind::Connect, "127.0.0.1", true)],
        )]);
        assert_eq!(
            judge(&t, &lo, &full_coverage()).verdict,
            Verdict::Consistent
        );
        for kind in [NetKind::Dns, NetKind::Connect, NetKind::Datagram] {
            let r = run(vec![call(1, ok(), vec![net(kind, "192.0.2.1", false)])]);
            assert_eq!(
                judge(&t, &r, &full_coverage()).verdict,
                Verdict::Contradicted,
                "{kind:?}"
            );
        }
    }

    #[test]
    fn without_a_network_observer_nothing_is_claimed() {
        let t = tool(json!({"openWorldHint": false}));
        let mut cov = full_coverage();
        cov.network = None;
        let j = judge(&t, &run(vec![call(1, ok(), vec![])]), &cov);
        assert_eq!(j.verdict, Verdict::Unexercised);
        let absent = judge(&tool(json!({})), &run(vec![call(1, ok(), vec![])]), &cov);
        assert!(
            absent.suggestion.is_none(),
            "no suggestion without an observer"
        );
    }
}
