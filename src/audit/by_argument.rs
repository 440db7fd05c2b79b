//! What each value of a selecting argument did. A tool whose behaviour an argument selects
//! (`action: read | delete`, `force`, `dry_run`) declares one set of hints for all of its
//! operations; [`profile`] sorts the tool's calls by the value each had in force and says, per
//! value, what those calls did (destructive, additive, network, read-only, no effect, not
//! reached) with the evidence, and which of the tool's contradicted hints that value bore
//! out. It judges nothing on its own: a hint is contradicted by the tool's audit when any
//! value contradicts it, and this names the values.

use serde_json::Value;

use super::{bears_on, category_of, evidence_of};
use crate::evidence::{CallRecord, Coverage, Observation, ToolRun};
pub use crate::exercise::variants::value_text;
use crate::exercise::variants::{Selector, parameter_of, selected};
use crate::finding::{Category, Evidence, HintVerdict, Verdict};
use crate::mcp::tool::HintName;

/// What the calls made with one value did, most telling first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Behaviour {
    /// Deleted, overwrote or truncated existing content (or tried to).
    Destructive,
    /// Wrote without destroying anything: created, appended, extended.
    Additive,
    /// Sent traffic beyond loopback.
    Network,
    /// Succeeded and wrote and sent nothing.
    ReadOnly,
    /// Succeeded and wrote and sent nothing, although the value names an operation that
    /// changes things (`delete`, `force: true`): it did not act here, which proves nothing
    /// about what it does where it can act.
    NoEffect,
    /// No call with this value succeeded (or none was made, or nothing watched it).
    NotReached,
}

impl Behaviour {
    /// The report's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Behaviour::Destructive => "destructive",
            Behaviour::Additive => "additive",
            Behaviour::Network => "network",
            Behaviour::ReadOnly => "read-only",
            Behaviour::NoEffect => "no effect",
            Behaviour::NotReached => "not reached",
        }
    }
}

/// What one value of a selecting argument did.
#[derive(Debug, Clone)]
pub struct ArgumentBehaviour {
    /// The argument (`action`).
    pub argument: String,
    /// The value (`"delete"`, `true`).
    pub value: Value,
    /// The most telling behaviour of its calls.
    pub behaviour: Behaviour,
    /// Every kind of effect its calls had (destructive, additive, network), beyond the first.
    pub effects: Vec<Behaviour>,
    /// Its calls, by label with their outcome (`variant (action: delete): ok`).
    pub calls: Vec<String>,
    /// The effects that count, weighed as a hint's evidence is.
    pub evidence: Vec<Evidence>,
    /// The tool's contradicted hints that this value's calls bore out.
    pub contradicts: Vec<HintName>,
    /// Why it was not reached, or what was left out of its behaviour.
    pub note: Option<String>,
    /// Whether the argument is a flag (a boolean) rather than an operation.
    pub flag: bool,
    /// Every weighty effect came from the tool's first call and its repeats, none from a
    /// case that tried this value on its own.
    pub first_call_only: bool,
    /// Its effects came from the first call only while a later case of another value of
    /// the same argument wrote nothing: they may be first-use work, and no resolution is
    /// suggested from them.
    pub maybe_first_use: bool,
}

impl ArgumentBehaviour {
    /// `action: delete`, `force: true`.
    pub fn describe_value(&self) -> String {
        selected(&self.argument, &self.value)
    }
}

/// What each value of each of `selectors` did in the calls of `run` (see the module's
/// documentation); `verdicts` are the tool's own, whose contradictions the values are matched
/// against.
pub fn profile(
    run: &ToolRun,
    coverage: &Coverage,
    selectors: &[Selector],
    verdicts: &[HintVerdict],
) -> Vec<ArgumentBehaviour> {
    let contradicted: Vec<HintName> = verdicts
        .iter()
        .filter(|v| v.verdict == Verdict::Contradicted)
        .map(|v| v.hint)
        .collect();
    let mut out = Vec::new();
    for selector in selectors {
        // A riskier case that changed another selecting argument (`force: true` sent with
        // the first call's `action: list`) says nothing of this one's values: each value is
        // seen with everything else as the tool's working call had it.
        let another = |c: &&CallRecord| {
            c.variant.as_deref().is_some_and(|v| {
                let parameter = parameter_of(v);
                parameter != selector.argument && selectors.iter().any(|s| s.argument == parameter)
            })
        };
        for value in &selector.values {
            let calls: Vec<&CallRecord> = run
                .calls
                .iter()
                .filter(|c| !another(c))
                .filter(|c| selector.in_force(&c.arguments).as_ref() == Some(value))
                .collect();
            out.push(one_value(selector, value, &calls, coverage, &contradicted));
        }
    }
    // A value that wrote only in the tool's first call, beside one of the same argument that
    // was reached and wrote nothing, may owe its writes to first-use work: said, not hidden.
    let quiet: Vec<String> = out
        .iter()
        .filter(|e| {
            matches!(
                e.behaviour,
                Behaviour::ReadOnly | Behaviour::Network | Behaviour::NoEffect
            )
        })
        .map(|e| e.argument.clone())
        .collect();
    for e in out
        .iter_mut()
        .filter(|e| e.first_call_only && quiet.contains(&e.argument))
        .filter(|e| matches!(e.behaviour, Behaviour::Destructive | Behaviour::Additive))
    {
        e.maybe_first_use = true;
        e.note = Some(
            "its effects all came from the tool's first call and its repeats, while a later case of another value wrote nothing: the first call may have done first-use work (an install, a cache), or left the later case nothing to act on".into(),
        );
    }
    out
}

/// What the calls made with `value` of `selector` did.
fn one_value(
    selector: &Selector,
    value: &Value,
    calls: &[&CallRecord],
    coverage: &Coverage,
    contradicted: &[HintName],
) -> ArgumentBehaviour {
    let counted: Vec<(&CallRecord, &Observation)> = calls
        .iter()
        .flat_map(|c| c.observations.iter().map(move |o| (*c, o)))
        .filter(|(c, o)| c.counts(o) && o.is_evidential())
        .collect();
    // What the server does for every call (its bookkeeping, a lock, its first-call set-up)
    // says nothing of this value.
    let weighty =
        |(c, o): &&(&CallRecord, &Observation)| !category_of(c, o).is_some_and(Category::softens);
    let mut effects: Vec<Behaviour> = Vec::new();
    for (_, o) in counted.iter().filter(weighty) {
        let kind = if o.is_destructive() {
            Behaviour::Destructive
        } else if o.is_write() {
            Behaviour::Additive
        } else {
            Behaviour::Network
        };
        if !effects.contains(&kind) {
            effects.push(kind);
        }
    }
    effects.sort();
    let succeeded = calls.iter().any(|c| c.outcome.is_success());
    let softened = counted.iter().filter(|p| !weighty(p)).count();
    let mut note = None;
    let behaviour = match effects.first() {
        Some(b) => *b,
        None if calls.is_empty() => {
            note = Some("never called: the explorer tries at most ten values of an operation and six flags, each once the tool has worked".into());
            Behaviour::NotReached
        }
        None if !succeeded => {
            let outcomes: Vec<&str> = calls.iter().map(|c| c.outcome.label()).collect();
            note = Some(format!(
                "no call with it succeeded ({}); what their windows showed is not counted",
                outcomes.join(", ")
            ));
            Behaviour::NotReached
        }
        None if coverage.files.is_none() => {
            note = Some("no file observer was active".into());
            Behaviour::NotReached
        }
        None if selector.acts(value) => {
            note = Some(format!(
                "it names an operation that changes things, but nothing was written or sent{}: it did not act on what it was given",
                if softened > 0 {
                    " beyond the server's own bookkeeping"
                } else {
                    ""
                }
            ));
            Behaviour::NoEffect
        }
        None => {
            if softened > 0 {
                note = Some(format!(
                    "{softened} write(s) of the server's own (bookkeeping, temporary files, first-call set-up) are not counted"
                ));
            }
            Behaviour::ReadOnly
        }
    };
    // What bore the tool's contradictions out: the same weighty effects the behaviour rests on.
    let contradicts = contradicted
        .iter()
        .copied()
        .filter(|h| counted.iter().filter(weighty).any(|(_, o)| bears_on(*h, o)))
        .collect();
    // Whether every weighty effect came from the tool's first call and its repeats (not from
    // a riskier case that tried this value on purpose): the first call does first-use work
    // (an install, a cache) that later cases do not repeat.
    let first_call_only = !effects.is_empty()
        && counted
            .iter()
            .filter(weighty)
            .all(|(c, _)| c.variant.is_none() && c.prerequisite_for.is_none());
    ArgumentBehaviour {
        argument: selector.argument.clone(),
        first_call_only,
        maybe_first_use: false,
        flag: selector.flag,
        value: value.clone(),
        behaviour,
        effects: effects.into_iter().skip(1).collect(),
        calls: calls
            .iter()
            .map(|c| format!("{}: {}", c.label(), c.outcome.label()))
            .collect(),
        evidence: evidence_of(counted.into_iter()),
        contradicts,
        note,
    }
}

/// For a hint the tool's audit contradicted: the values that bore it out, when the profile
/// shows a value of the same argument that was reached and did not (`action: delete`, or
/// `action: delete, action: purge`); `None` when every value reached contradicts it or no
/// argument selects the behaviour.
pub fn only_with(profile: &[ArgumentBehaviour], hint: HintName) -> Option<String> {
    let mut named: Vec<String> = Vec::new();
    for (_, entries) in by_argument(profile) {
        // A value is named only where a case of its own bore the hint out: what only the
        // tool's first call did may be first-use work, not the value's.
        let bore: Vec<&ArgumentBehaviour> = entries
            .iter()
            .filter(|e| e.contradicts.contains(&hint))
            .copied()
            .collect();
        let held = entries
            .iter()
            .any(|e| !e.contradicts.contains(&hint) && e.behaviour != Behaviour::NotReached);
        if !bore.is_empty() && held && bore.iter().all(|e| !e.first_call_only) {
            named.extend(bore.iter().map(|e| e.describe_value()));
        }
    }
    (!named.is_empty()).then(|| named.join(", "))
}

/// The annotations one value of a selecting argument supports: what a server could answer
/// `tools/resolve` with for calls that pass it.
#[derive(Debug, Clone, PartialEq)]
pub struct ValueAnnotations {
    /// The argument.
    pub argument: String,
    /// The value.
    pub value: Value,
    /// `readOnlyHint`, `destructiveHint` (for a writer) and `openWorldHint` (where the
    /// network was observed), in that order.
    pub hints: Vec<(HintName, bool)>,
    /// `observed` when a behaviour backs them (a write, a destroyed file, traffic),
    /// `consistent` when they only fit what its calls did.
    pub observed: bool,
}

/// For each reached value of each selecting argument (its calls succeeded, or showed an
/// effect), the annotations it supports; values that had no effect where they should have
/// acted, or were not reached, get none. `network_observed` says whether the network was
/// watched (else `openWorldHint` is left out unless traffic was seen).
pub fn value_annotations(
    profile: &[ArgumentBehaviour],
    network_observed: bool,
) -> Vec<ValueAnnotations> {
    // A flag's values were tried with one operation only: where an operation selects the
    // behaviour, a flag's resolution would claim for every operation what one showed.
    let operations = profile.iter().any(|e| !e.flag);
    profile
        .iter()
        .filter(|e| !(e.maybe_first_use || operations && e.flag))
        .filter_map(|e| {
            let network =
                e.behaviour == Behaviour::Network || e.effects.contains(&Behaviour::Network);
            let mut hints = match e.behaviour {
                Behaviour::Destructive => {
                    vec![(HintName::ReadOnly, false), (HintName::Destructive, true)]
                }
                Behaviour::Additive => {
                    vec![(HintName::ReadOnly, false), (HintName::Destructive, false)]
                }
                Behaviour::Network | Behaviour::ReadOnly => vec![(HintName::ReadOnly, true)],
                Behaviour::NoEffect | Behaviour::NotReached => return None,
            };
            if network || network_observed {
                hints.push((HintName::OpenWorld, network));
            }
            Some(ValueAnnotations {
                argument: e.argument.clone(),
                value: e.value.clone(),
                observed: matches!(e.behaviour, Behaviour::Destructive | Behaviour::Additive)
                    || network,
                hints,
            })
        })
        .collect()
}

/// Values that share annotations, and those annotations: one tool of a split.
pub type SplitGroup = (Vec<Value>, Vec<(HintName, bool)>);

/// When the values of one argument need different annotations, the groups a split of the
/// tool would make (each a tool whose static annotations would be honest): per argument with
/// two groups or more, each group's values and the annotations they share. Empty when one
/// set of annotations fits every reached value.
pub fn split(resolved: &[ValueAnnotations]) -> Vec<(String, Vec<SplitGroup>)> {
    let mut out = Vec::new();
    let mut arguments: Vec<&str> = Vec::new();
    for r in resolved {
        if !arguments.contains(&r.argument.as_str()) {
            arguments.push(&r.argument);
        }
    }
    for argument in arguments {
        let mut groups: Vec<SplitGroup> = Vec::new();
        for r in resolved.iter().filter(|r| r.argument == argument) {
            match groups.iter_mut().find(|(_, h)| *h == r.hints) {
                Some((values, _)) => values.push(r.value.clone()),
                None => groups.push((vec![r.value.clone()], r.hints.clone())),
            }
        }
        if groups.len() > 1 {
            out.push((argument.to_string(), groups));
        }
    }
    out
}

/// The profile's entries grouped by argument, in order.
pub fn by_argument(profile: &[ArgumentBehaviour]) -> Vec<(&str, Vec<&ArgumentBehaviour>)> {
    let mut out: Vec<(&str, Vec<&ArgumentBehaviour>)> = Vec::new();
    for e in profile {
        match out.iter_mut().find(|(a, _)| *a == e.argument) {
            Some((_, list)) => list.push(e),
            None => out.push((&e.argument, vec![e])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::testing::*;
    use crate::evidence::{FileEffectKind, NetKind};
    use crate::mcp::client::CallOutcome;
    use serde_json::json;

    fn action() -> Selector {
        Selector {
            argument: "action".into(),
            values: vec![
                json!("read"),
                json!("append"),
                json!("delete"),
                json!("purge"),
            ],
            default: None,
            flag: false,
        }
    }

    /// `c` sent `arguments`; a call numbered 0 is the riskier case that set them.
    fn with(arguments: Value, mut c: CallRecord) -> CallRecord {
        if c.number == 0 {
            c.variant = arguments
                .as_object()
                .and_then(|m| m.iter().next())
                .map(|(k, v)| selected(k, v));
        }
        c.arguments = arguments;
        c
    }

    fn contradiction(hint: HintName) -> HintVerdict {
        HintVerdict {
            source: None,
            resolved_for: None,
            hint,
            declared: "true".into(),
            verdict: Verdict::Contradicted,
            reason: String::new(),
            evidence: Vec::new(),
            audit: "read-only",
            uncertain: false,
        }
    }

    #[test]
    fn each_value_says_what_its_calls_did_and_which_contradiction_it_bore() {
        let failed = CallOutcome::ToolError {
            text: "no".into(),
            result_sha256: "h".into(),
        };
        let run = run(vec![
            with(json!({"action": "read"}), call(1, ok(), vec![])),
            with(
                json!({"action": "append"}),
                call(
                    0,
                    ok(),
                    vec![file("$WORKSPACE/a.md", FileEffectKind::Appended)],
                ),
            ),
            with(
                json!({"action": "delete"}),
                call(
                    0,
                    ok(),
                    vec![
                        file("$WORKSPACE/a.md", FileEffectKind::Deleted),
                        net(NetKind::Connect, "192.0.2.1", false),
                    ],
                ),
            ),
            // A failed call's write is not the tool's until shown to be.
            with(
                json!({"action": "purge"}),
                call(
                    0,
                    failed,
                    vec![file("$WORKSPACE/b.md", FileEffectKind::Deleted)],
                ),
            ),
        ]);
        let p = profile(
            &run,
            &full_coverage(),
            &[action()],
            &[contradiction(HintName::ReadOnly)],
        );
        let got: Vec<(&str, &str)> = p
            .iter()
            .map(|e| (e.value.as_str().expect("a string"), e.behaviour.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("read", "read-only"),
                ("append", "additive"),
                ("delete", "destructive"),
                ("purge", "not reached")
            ]
        );
        assert_eq!(p[2].effects, [Behaviour::Network]);
        assert_eq!(p[2].calls, ["variant (action: delete): ok"]);
        assert!(
            p[2].evidence[0].text.contains("deleted"),
            "{:?}",
            p[2].evidence
        );
        assert!(p[0].contradicts.is_empty());
        assert_eq!(p[1].contradicts, [HintName::ReadOnly]);
        assert!(
            p[3].note.as_deref().expect("a note").contains("isError"),
            "{:?}",
            p[3].note
        );
        assert_eq!(
            only_with(&p, HintName::ReadOnly).as_deref(),
            Some("action: append, action: delete")
        );
        // A hint every reached value bore out names none.
        let all = profile(
            &run,
            &full_coverage(),
            &[Selector {
                values: vec![json!("append"), json!("delete")],
                ..action()
            }],
            &[contradiction(HintName::ReadOnly)],
        );
        assert_eq!(only_with(&all, HintName::ReadOnly), None);
    }

    #[test]
    fn an_operation_that_changes_things_but_did_nothing_had_no_effect() {
        let flag = Selector {
            argument: "force".into(),
            values: vec![json!(false), json!(true)],
            default: Some(json!(false)),
            flag: true,
        };
        let run = run(vec![
            with(json!({}), call(1, ok(), vec![])),
            with(json!({"force": true}), call(0, ok(), vec![])),
        ]);
        let p = profile(&run, &full_coverage(), &[flag, action()], &[]);
        assert_eq!(p[0].behaviour, Behaviour::ReadOnly, "the default in force");
        assert_eq!(p[1].behaviour, Behaviour::NoEffect);
        // No call sent an action: every value is unreached, and says why.
        assert!(p[2..].iter().all(|e| e.behaviour == Behaviour::NotReached));
        assert!(
            p[2].note
                .as_deref()
                .expect("a note")
                .starts_with("never called")
        );
    }

    #[test]
    fn each_selector_sees_its_values_with_everything_else_as_the_working_call_had_it() {
        let force = Selector {
            argument: "force".into(),
            values: vec![json!(false), json!(true)],
            default: Some(json!(false)),
            flag: true,
        };
        let run = run(vec![
            with(json!({"action": "read"}), call(1, ok(), vec![])),
            with(
                json!({"action": "delete"}),
                call(
                    0,
                    ok(),
                    vec![file("$WORKSPACE/a.md", FileEffectKind::Deleted)],
                ),
            ),
            CallRecord {
                variant: Some("force: true".into()),
                arguments: json!({"force": true, "action": "read"}),
                ..call(
                    0,
                    ok(),
                    vec![file("$WORKSPACE/cache", FileEffectKind::Created)],
                )
            },
        ]);
        let p = profile(
            &run,
            &full_coverage(),
            &[action(), force],
            &[contradiction(HintName::ReadOnly)],
        );
        let of = |argument: &str, value: Value| {
            p.iter()
                .find(|e| e.argument == argument && e.value == value)
                .map(|e| e.behaviour)
        };
        // The flag's case does not make `read` a writer, nor the delete `force: false` one.
        assert_eq!(of("action", json!("read")), Some(Behaviour::ReadOnly));
        assert_eq!(of("action", json!("delete")), Some(Behaviour::Destructive));
        assert_eq!(of("force", json!(false)), Some(Behaviour::ReadOnly));
        assert_eq!(of("force", json!(true)), Some(Behaviour::Additive));
        assert_eq!(
            only_with(&p, HintName::ReadOnly).as_deref(),
            Some("action: delete, force: true")
        );
        // With an operation selecting the behaviour, the flag gets no resolution of its own.
        assert!(
            value_annotations(&p, true)
                .iter()
                .all(|r| r.argument == "action")
        );
    }

    #[test]
    fn what_only_the_first_call_did_is_not_pinned_on_its_value() {
        // The first call installed something on first use; the later case wrote nothing.
        let run = run(vec![
            with(
                json!({"action": "read"}),
                call(
                    1,
                    ok(),
                    vec![file("$HOME/.npm/_logs/a.log", FileEffectKind::Created)],
                ),
            ),
            with(json!({"action": "append"}), call(0, ok(), vec![])),
        ]);
        let p = profile(
            &run,
            &full_coverage(),
            &[action()],
            &[contradiction(HintName::ReadOnly)],
        );
        assert_eq!(p[0].behaviour, Behaviour::Additive);
        assert!(p[0].first_call_only && p[0].maybe_first_use);
        assert!(
            value_annotations(&p, true)
                .iter()
                .all(|r| r.value != json!("read"))
        );
        assert!(
            p[0].note
                .as_deref()
                .is_some_and(|n| n.contains("first-use work")),
            "{:?}",
            p[0].note
        );
        assert_eq!(only_with(&p, HintName::ReadOnly), None);
    }

    #[test]
    fn values_that_need_different_annotations_suggest_their_resolutions_and_a_split() {
        let entry = |value: &str, behaviour| ArgumentBehaviour {
            argument: "action".into(),
            value: json!(value),
            behaviour,
            effects: Vec::new(),
            calls: Vec::new(),
            evidence: Vec::new(),
            contradicts: Vec::new(),
            note: None,
            flag: false,
            first_call_only: false,
            maybe_first_use: false,
        };
        let profile = [
            entry("read", Behaviour::ReadOnly),
            entry("list", Behaviour::ReadOnly),
            entry("delete", Behaviour::Destructive),
            entry("purge", Behaviour::NotReached),
        ];
        let resolved = value_annotations(&profile, true);
        assert_eq!(resolved.len(), 3, "an unreached value gets none");
        assert_eq!(
            resolved[2].hints,
            [
                (HintName::ReadOnly, false),
                (HintName::Destructive, true),
                (HintName::OpenWorld, false)
            ]
        );
        assert!(resolved[2].observed && !resolved[0].observed);
        let groups = split(&resolved);
        assert_eq!(groups.len(), 1);
        let (argument, tools) = &groups[0];
        assert_eq!(argument, "action");
        assert_eq!(tools[0].0, [json!("read"), json!("list")]);
        assert_eq!(tools[1].0, [json!("delete")]);
        // One set of annotations for every value: nothing to split.
        assert!(split(&value_annotations(&profile[..2], true)).is_empty());
    }
}
