//! Hints resolved with `tools/resolve` (SEP-1862), judged like declared ones. Each call of a
//! tool that resolves carries what the server resolved it to for the call's arguments; the
//! calls made with the same arguments and the same resolution are judged together, by the
//! same audits and the same firmness as the tool's static declaration ([`super::judge_tool`]
//! on the tool with its hints replaced). Only a resolved hint less cautious than the static
//! one gets a verdict of its own (one that equals it is the static verdict's; the spec's
//! defaults are the cautious values): `"source": "tools/resolve"` with the arguments. A
//! resolution more cautious than the static declaration contradicts the static worst case by
//! the server's own word, and a resolution that fails, differs between identical arguments or
//! is not asked where a tool wants it is a protocol finding.

use serde_json::Value;

use super::{ToolJudgement, judge_tool};
use crate::evidence::{CallRecord, Coverage, ToolRun};
use crate::finding::{Confidence, Evidence, Finding, HintVerdict, Severity};
use crate::mcp::resolve::Resolution;
use crate::mcp::tool::{Hint, HintName, ToolDecl, shorten};

/// What the resolutions of one tool's calls came to.
#[derive(Debug, Default)]
pub struct ResolvedJudgement {
    /// A verdict per resolved hint less cautious than the static one, per argument set.
    pub verdicts: Vec<HintVerdict>,
    /// Contradicted resolutions, and the protocol findings.
    pub findings: Vec<Finding>,
}

/// The value a hint has in force: the declared boolean, else the spec's default.
fn in_force(hint: HintName, h: &Hint) -> bool {
    h.declared().unwrap_or(hint.default_value())
}

/// Judges the resolutions of `tool`'s calls in `run`; `announced` says whether the server
/// announced `tools.resolve`.
pub fn judge(
    tool: &ToolDecl,
    run: &ToolRun,
    coverage: &Coverage,
    announced: bool,
) -> ResolvedJudgement {
    let mut out = ResolvedJudgement::default();
    if tool.resolve && !announced {
        out.findings.push(protocol(
            tool,
            Severity::Note,
            format!(
                "{} is marked resolve: true, but the server did not announce the tools.resolve capability: its resolutions were not asked",
                tool.name
            ),
            Vec::new(),
        ));
        return out;
    }
    // The calls by the arguments they were resolved for and the hints resolved, in order.
    let mut groups: Vec<(&Value, &Resolution, Vec<&CallRecord>)> = Vec::new();
    let mut failures: Vec<Evidence> = Vec::new();
    let mut wrong_types: Vec<Evidence> = Vec::new();
    for c in &run.calls {
        let Some(r) = &c.resolution else { continue };
        if let Some(why) = &r.failure {
            failures.push(Evidence::plain(c.label(), why.clone()));
            continue;
        }
        for hint in HintName::ALL {
            if let Hint::WrongType(v) = r.hints.get(hint) {
                wrong_types.push(Evidence::plain(
                    c.label(),
                    format!(
                        "{} is {}, not a boolean",
                        hint.key(),
                        shorten(&v.to_string(), 60)
                    ),
                ));
            }
        }
        match groups
            .iter_mut()
            .find(|(a, res, _)| **a == c.arguments && res.hints == r.hints)
        {
            Some((_, _, calls)) => calls.push(c),
            None => groups.push((&c.arguments, r, vec![c])),
        }
    }
    if !failures.is_empty() {
        out.findings.push(protocol(
            tool,
            Severity::Warning,
            format!(
                "{} is marked resolve: true, but {} of its tools/resolve request(s) got no usable resolution; those calls are judged on its static annotations alone",
                tool.name,
                failures.len()
            ),
            failures.into_iter().take(5).collect(),
        ));
    }
    if !wrong_types.is_empty() {
        out.findings.push(protocol(
            tool,
            Severity::Warning,
            format!(
                "{}'s tools/resolve answered hints that are not booleans; they are not judged",
                tool.name
            ),
            wrong_types.into_iter().take(5).collect(),
        ));
    }
    // The same arguments resolved two ways (the world may have changed between the two
    // calls: the target made or removed by another call), once per tool.
    let twice: Vec<Evidence> = groups
        .iter()
        .enumerate()
        .filter_map(|(i, (arguments, r, calls))| {
            groups[..i]
                .iter()
                .find(|(a, _, _)| a == arguments)
                .map(|(_, other, others)| {
                    Evidence::plain(
                        format!("{} and {}", others[0].label(), calls[0].label()),
                        format!(
                            "{} then {}",
                            shorten(&other.annotations.to_string(), 200),
                            shorten(&r.annotations.to_string(), 200)
                        ),
                    )
                })
        })
        .take(5)
        .collect();
    if !twice.is_empty() {
        out.findings.push(protocol(
            tool,
            Severity::Note,
            format!(
                "{}'s tools/resolve answered the same arguments with different hints (a host cannot rely on either, unless what the arguments name changed between the calls)",
                tool.name
            ),
            twice,
        ));
    }
    // Resolutions more cautious than the static declaration, by hint: one finding each.
    let mut more_cautious: Vec<(HintName, bool, bool, Vec<Evidence>)> = Vec::new();
    for (arguments, resolution, calls) in groups {
        let args = shorten(&arguments.to_string(), 200);
        let mut resolved = tool.clone();
        resolved.hints = resolution.hints.clone();
        let mut run = ToolRun {
            calls: calls.into_iter().cloned().collect(),
            ..ToolRun::default()
        };
        // The replays that earn firmness were chosen for the static hints: what a call
        // created may be the server's set-up on first use, which no replay checked for the
        // resolved ones. A creation earns firmness here only from a replay that confirmed it.
        for c in &mut run.calls {
            let creations: Vec<String> = c
                .observations
                .iter()
                .filter(|o| o.is_write() && !o.is_destructive())
                .filter(|o| {
                    o.as_file()
                        .is_none_or(|f| f.kind == crate::evidence::FileEffectKind::Created)
                })
                .map(|o| o.describe())
                .filter(|d| !c.confirmed_by_replay.contains(d))
                .collect();
            c.unchecked_initialisation.extend(creations);
        }
        let ToolJudgement {
            verdicts, findings, ..
        } = judge_tool(&resolved, &run, coverage);
        // Beside a resolved readOnlyHint: true, destructiveHint and idempotentHint mean
        // nothing (the spec's words): neither compared nor judged.
        let reads = in_force(HintName::ReadOnly, resolution.hints.get(HintName::ReadOnly));
        for hint in HintName::ALL {
            let said = resolution.hints.get(hint);
            if matches!(said, Hint::WrongType(_))
                || reads && matches!(hint, HintName::Destructive | HintName::Idempotent)
            {
                continue;
            }
            let (resolved_value, static_value) =
                (in_force(hint, said), in_force(hint, tool.hints.get(hint)));
            if resolved_value == static_value {
                continue;
            }
            if resolved_value == hint.default_value() {
                // More cautious than the static declaration: the server itself says the
                // static one is not its worst case.
                let piece = Evidence::plain(
                    run.calls[0].label(),
                    format!(
                        "resolved for {args}: {}",
                        shorten(&resolution.annotations.to_string(), 300)
                    ),
                );
                match more_cautious.iter_mut().find(|(h, ..)| *h == hint) {
                    Some((.., pieces)) if pieces.len() < 5 => pieces.push(piece),
                    Some(_) => {}
                    None => more_cautious.push((hint, resolved_value, static_value, vec![piece])),
                }
                continue;
            }
            // A resolved hint the audit finds nothing to judge in says nothing.
            let Some(mut v) = verdicts
                .iter()
                .find(|v| v.hint == hint && v.verdict != crate::finding::Verdict::NotApplicable)
                .cloned()
            else {
                continue;
            };
            v.source = Some(crate::mcp::resolve::METHOD);
            v.resolved_for = Some(arguments.clone());
            v.reason = format!("resolved for {args}: {}", v.reason);
            for mut f in findings
                .iter()
                .filter(|f| f.hint == Some(hint) && f.audit == v.audit)
                .cloned()
            {
                let declares = format!("{} declares ", tool.name);
                f.message = f.message.replacen(
                    &declares,
                    &format!("{}'s tools/resolve for {args} says ", tool.name),
                    1,
                );
                f.resolved_for = Some(arguments.clone());
                out.findings.push(f);
            }
            out.verdicts.push(v);
        }
    }
    // The message names no arguments (they hold the run's paths): the fingerprint stays the
    // same between runs.
    for (hint, resolved_value, static_value, evidence) in more_cautious {
        out.findings.push(protocol(
            tool,
            Severity::Warning,
            format!(
                "{}'s tools/resolve says {}: {resolved_value} for some arguments, more cautious than its static {}: {static_value}: the static annotations are not the tool's worst case",
                tool.name,
                hint.key(),
                hint.key()
            ),
            evidence,
        ));
    }
    out
}

/// A protocol finding about `tool`'s resolutions.
fn protocol(
    tool: &ToolDecl,
    severity: Severity,
    message: String,
    evidence: Vec<Evidence>,
) -> Finding {
    Finding {
        audit: super::protocol::META.id,
        tool: Some(tool.name.clone()),
        hint: None,
        resolved_for: None,
        severity,
        confidence: Confidence::High,
        message,
        evidence,
        category: None,
        fingerprint: String::new(),
        accepted: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::testing::*;
    use crate::evidence::FileEffectKind;
    use crate::finding::Verdict;
    use crate::mcp::resolve::interpret;
    use crate::mcp::tool::parse_tool;
    use serde_json::json;

    fn manager(annotations: Value) -> ToolDecl {
        parse_tool(
            &json!({"name": "manage", "resolve": true, "inputSchema": {"type": "object"},
                "annotations": annotations}),
            0,
        )
        .expect("tool")
    }

    fn resolved(
        arguments: Value,
        annotations: Value,
        observations: Vec<crate::evidence::Observation>,
    ) -> CallRecord {
        let mut c = call(1, ok(), observations);
        c.arguments = arguments;
        c.resolution = Some(interpret(
            "manage",
            Ok(json!({"tool": {"name": "manage", "annotations": annotations}})),
        ));
        c
    }

    #[test]
    fn a_resolution_less_cautious_than_the_declaration_is_judged_on_its_calls() {
        // Honest statically (it may delete), but resolves its delete as read-only.
        let t = manager(json!({"readOnlyHint": false, "destructiveHint": true}));
        let run = run(vec![
            resolved(
                json!({"action": "read"}),
                json!({"readOnlyHint": true}),
                vec![],
            ),
            resolved(
                json!({"action": "delete"}),
                json!({"readOnlyHint": true}),
                vec![file("$WORKSPACE/a.md", FileEffectKind::Deleted)],
            ),
        ]);
        let j = judge(&t, &run, &full_coverage(), true);
        let verdicts: Vec<(String, Verdict)> = j
            .verdicts
            .iter()
            .map(|v| {
                (
                    v.resolved_for.clone().unwrap_or_default().to_string(),
                    v.verdict,
                )
            })
            .collect();
        assert_eq!(
            verdicts,
            [
                (r#"{"action":"read"}"#.into(), Verdict::Consistent),
                (r#"{"action":"delete"}"#.into(), Verdict::Contradicted)
            ]
        );
        assert!(
            j.verdicts
                .iter()
                .all(|v| v.source == Some("tools/resolve") && v.hint == HintName::ReadOnly)
        );
        let f = &j.findings[0];
        assert_eq!(f.severity, Severity::Error);
        assert!(
            f.message.starts_with(
                r#"manage's tools/resolve for {"action":"delete"} says readOnlyHint: true but"#
            ),
            "{}",
            f.message
        );
        assert_eq!(f.resolved_for, Some(json!({"action": "delete"})));
    }

    #[test]
    fn a_resolution_more_cautious_than_the_static_worst_case_is_a_protocol_finding() {
        let t = manager(json!({"readOnlyHint": true}));
        let run = run(vec![resolved(
            json!({"action": "delete"}),
            json!({"readOnlyHint": false}),
            vec![],
        )]);
        let j = judge(&t, &run, &full_coverage(), true);
        assert!(j.verdicts.is_empty());
        assert_eq!(j.findings.len(), 1);
        assert_eq!(j.findings[0].audit, "protocol");
        assert!(j.findings[0].message.contains("not the tool's worst case"));
        // Not announced: nothing asked, and a note says so.
        let j = judge(&t, &run, &full_coverage(), false);
        assert!(j.findings[0].message.contains("did not announce"));
    }
}
