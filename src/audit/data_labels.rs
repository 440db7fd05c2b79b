//! `data-labels`: the data labels a server declares beside the hints (see
//! [`crate::mcp::labels`]) judged against what its tools did, like hints: what a result
//! carried (a planted credential, the network stand-in's pages), where a call's arguments
//! went (a destination's name, public or internal), what its calls changed. A verdict per
//! declared label; a contradiction is a finding, firm only on firm evidence. For every tool,
//! the labels the observations support (for `hintcheck suggest`), most useful where none are
//! declared.

use serde_json::Value;

use super::AuditMeta;
use crate::evidence::{Coverage, NetEvent, NetKind, Observation, SecretMove, ToolRun};
use crate::finding::{Confidence, Evidence, Finding, Severity, Verdict};
use crate::mcp::labels::{DATA_CLASSES, DESTINATIONS, OUTCOMES, ResultLabels, SOURCES, set};
use crate::mcp::tool::{Hint, ToolDecl};

use super::suggest::SupportBasis;

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "data-labels",
    summary: "a tool's declared data labels (sensitivity, source, destination, outcomes) contradict what it did",
    docs: "Draft proposals let a server label the data that flows through its tools: SEP-1913's \
`returnMetadata {source, sensitivity}` and `inputMetadata {destination, sensitivity, outcomes}` on \
a tool's annotations (each a value or the list of possible values), its early form's \
`sensitiveHint` and `privateHint`, and labels on results: the \
`io.modelcontextprotocol/trust-annotations` extension's `sensitive` and `untrusted` in a result's \
(or content block's) `_meta`, and SEP-1913's `_meta.annotations`. Hosts would enforce rules \
with them (\"credentials never go to a public destination\"). hintcheck judges each declared \
label against the run, like a hint:\n\n\
- **sensitivity** (`returnMetadata.sensitivity` without `credentials`, `sensitiveHint: low`, \
`privateHint: false`, and the same claims on a result): contradicted by a result that carried a \
planted credential (see `secret-access`). A tool-level claim is only a warning where the caller \
named the credential's file (a file reader told to read `.env`); a claim on the very result that \
carried it is an error.\n\
- **source** (`returnMetadata.source`): a result of a successful call that held what the \
network's stand-in site served, fetched from a public host the caller chose (its name was in \
the arguments), is whatever that host serves: a set without `untrustedPublic` is contradicted \
(an error), and so is the result's own `untrusted: false` or `openWorldHint: false`. What a \
server fetched from a host of its own choosing is the server's to classify: not judged.\n\
- **destination** (`inputMetadata.destination`): an argument's value (8 characters or more, in \
an HTTP request's line or body or another protocol's bytes; not a value the schema offered, not \
part of the host's name) sent to a host the arguments did not name needs `public` for a public \
name (or `user`, `system`: storage the service may keep private, which a run cannot tell), \
`internal` or more for an internal one (`.internal`, `.local`, `.corp`, `.lan`, `.home.arpa`, a \
single label, a private address). A name does not prove who reads the data: a **warning**.\n\
- **outcomes** (`inputMetadata.outcomes`): `benign` alone is judged as `readOnlyHint: true` \
(same evidence), held as a **warning** since the draft lets benign tools change private \
drafts; whether a change can be undone (`consequential` or `irreversible`) is nothing a run \
sees.\n\n\
A label holding a value outside the draft's lists is not judged (an `annotation-type` warning \
names it); a `medium` `sensitiveHint` neither. `inputMetadata.sensitivity` (what a tool accepts) is nothing a run can contradict. Where a tool \
declares no labels, `hintcheck suggest` proposes those the run supports (`data_labels`).\n\n\
Fix: declare what the tool returns and where its input goes, or change the tool.",
};

/// A declared data label and what the run made of it.
#[derive(Debug, Clone)]
pub struct LabelVerdict {
    /// The label: `returnMetadata.sensitivity`, `result sensitivity`, …
    pub label: &'static str,
    /// Where it was declared: `tools/list`, or `results` (a result's `_meta`).
    pub declared_in: &'static str,
    /// The declared value, as a report writes it.
    pub declared: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in one sentence.
    pub reason: String,
    /// What it rests on.
    pub evidence: Vec<Evidence>,
}

/// A data label the observations support (for `hintcheck suggest`).
#[derive(Debug, Clone, PartialEq)]
pub struct SupportedLabel {
    /// The field: `returnMetadata.sensitivity`, `inputMetadata.destination`, …
    pub label: &'static str,
    /// Its values.
    pub values: Vec<String>,
    /// How well it is backed.
    pub basis: SupportBasis,
    /// Whether it differs from what the tool declares now (an absent label differs).
    pub changed: bool,
    /// Why.
    pub reason: String,
}

/// What the audit concluded about one tool.
#[derive(Debug, Clone, Default)]
pub struct LabelJudgement {
    /// A verdict per declared label.
    pub verdicts: Vec<LabelVerdict>,
    /// The contradictions.
    pub findings: Vec<Finding>,
    /// The labels the observations support.
    pub supported: Vec<SupportedLabel>,
}

/// A host a call reached: its name (or address), whether it is internal, whether the call's
/// arguments named it (the caller chose it).
#[derive(Clone)]
struct Host {
    name: String,
    internal: bool,
    named_by_arguments: bool,
}

/// A result that carried a planted credential.
struct Returned {
    evidence: Evidence,
    labels: Option<ResultLabels>,
}

/// A result that held what the stand-in site served, and the hosts its call connected to.
struct Fetched {
    evidence: Evidence,
    hosts: Vec<Host>,
    labels: Option<ResultLabels>,
}

impl Fetched {
    /// Whether the caller chose a public host it fetched from.
    fn fetched_from_callers_public_host(&self) -> bool {
        self.hosts
            .iter()
            .any(|h| h.named_by_arguments && !h.internal)
    }
}

/// What the run showed about the data of one tool.
#[derive(Default)]
struct Seen {
    /// Results that carried a planted credential.
    returned: Vec<Returned>,
    /// Successful calls' results that held fetched content, with a connection of their own.
    fetched: Vec<Fetched>,
    /// An argument's value sent to a host the arguments did not name: the evidence and the
    /// host.
    sent: Vec<(Evidence, Host)>,
    /// Results that carried labels.
    labelled: Vec<ResultLabels>,
    /// Whether a call succeeded.
    succeeded: bool,
    /// Whether a counted call connected or sent a datagram past loopback.
    reached_out: bool,
}

/// What a declared sensitivity label claims.
enum Claim {
    /// That nothing sensitive (no credential) is returned.
    NotSensitive,
    /// That sensitive data (credentials) may be returned.
    Sensitive,
    /// Nothing this run can judge (a value outside the draft's lists, a level of the
    /// server's own scale), with why.
    Unjudged(&'static str),
}

/// Judges the data labels `tool` declares (and its results carry) against `run`.
/// `canaries` is whether the run planted secrets (without them no result can carry one).
pub fn judge(
    tool: &ToolDecl,
    run: &ToolRun,
    coverage: &Coverage,
    canaries: bool,
) -> LabelJudgement {
    let seen = seen(tool, run);
    let mut out = LabelJudgement::default();
    sensitivity(&mut out, tool, &seen, canaries);
    source(&mut out, tool, &seen, coverage);
    destination(&mut out, tool, &seen, coverage);
    outcomes(&mut out, tool, run, coverage);
    result_sensitivity(&mut out, tool, &seen, canaries);
    result_trust(&mut out, tool, &seen);
    out.supported = supported(tool, run, coverage, &seen);
    out
}

/// Why a label holding a value outside the draft's lists is not judged.
const UNKNOWN_VALUE: &str = "it holds a value outside the draft's list (an annotation-type warning says which), so it is not judged";

/// Whether every one of `values` is one of `known`.
fn all_known(values: &[String], known: &[&str]) -> bool {
    values.iter().all(|v| known.contains(&v.as_str()))
}

/// The tool's sensitivity labels: `returnMetadata.sensitivity`, `sensitiveHint`,
/// `privateHint`, each judged by the credentials its results carried.
fn sensitivity(out: &mut LabelJudgement, tool: &ToolDecl, seen: &Seen, canaries: bool) {
    let labels = &tool.labels;
    let mut claims: Vec<(&'static str, String, Claim)> = Vec::new();
    if let Some(c) = &labels.return_sensitivity {
        let known = c
            .iter()
            .all(|v| DATA_CLASSES.contains(&v.as_str()) || v.starts_with("regulated("));
        let claim = if !known {
            Claim::Unjudged(UNKNOWN_VALUE)
        } else if c.iter().any(|v| v == "credentials") {
            Claim::Sensitive
        } else {
            Claim::NotSensitive
        };
        claims.push(("returnMetadata.sensitivity", set(c), claim));
    }
    if let Some(h) = &labels.sensitive_hint {
        let claim = match h.as_str() {
            "low" => Claim::NotSensitive,
            "high" => Claim::Sensitive,
            _ => Claim::Unjudged(
                "a middle level is the server's own scale: whether a credential is `medium` is not judged",
            ),
        };
        claims.push(("sensitiveHint", format!("{h:?}"), claim));
    }
    if let Some(p) = labels.private_hint {
        let claim = if p {
            Claim::Sensitive
        } else {
            Claim::NotSensitive
        };
        claims.push(("privateHint", p.to_string(), claim));
    }
    let returned = results(seen.returned.iter().map(|r| &r.evidence));
    for (label, declared, claim) in claims {
        let (verdict, reason, evidence) = match claim {
            Claim::Unjudged(why) => (Verdict::NotApplicable, why.to_string(), Vec::new()),
            Claim::NotSensitive if returned > 0 => {
                let firm = seen.returned.iter().any(|r| r.evidence.firm);
                (
                    Verdict::Contradicted,
                    format!(
                        "{returned} result(s) carried a planted credential{}",
                        if firm {
                            ""
                        } else {
                            " (from a file the caller named, or with the workspace's other files)"
                        }
                    ),
                    seen.returned.iter().map(|r| r.evidence.clone()).collect(),
                )
            }
            Claim::Sensitive if returned > 0 => (
                Verdict::Consistent,
                format!("{returned} result(s) carried a planted credential, as declared"),
                Vec::new(),
            ),
            claim => nothing_seen(
                seen,
                "result was seen",
                (!canaries).then_some(
                    "no secrets were planted (--no-canaries), so no result could carry one",
                ),
                if matches!(claim, Claim::Sensitive) {
                    "a declared possibility; no result carried a planted credential"
                } else {
                    "no result carried a planted credential"
                },
            ),
        };
        out.push(
            tool,
            label,
            "tools/list",
            declared,
            verdict,
            reason,
            evidence,
        );
    }
}

/// `returnMetadata.source`: data fetched from a public host the caller chose is whatever that
/// host serves (`untrustedPublic`); what the server fetched from a host of its own choosing
/// is the server's to classify, which a run cannot check.
fn source(out: &mut LabelJudgement, tool: &ToolDecl, seen: &Seen, coverage: &Coverage) {
    let Some(sources) = &tool.labels.return_source else {
        return;
    };
    let (verdict, reason, evidence) = if !all_known(sources, &SOURCES) {
        (
            Verdict::NotApplicable,
            UNKNOWN_VALUE.to_string(),
            Vec::new(),
        )
    } else {
        let against: Vec<Evidence> = seen
            .fetched
            .iter()
            .filter(|f| f.fetched_from_callers_public_host())
            .filter(|_| !sources.iter().any(|s| s == "untrustedPublic"))
            .map(|f| f.evidence.clone())
            .collect();
        if !against.is_empty() {
            (
                Verdict::Contradicted,
                format!(
                    "{} result(s) held data fetched from a public host the caller chose: whatever that host serves (untrustedPublic)",
                    results(against.iter())
                ),
                against,
            )
        } else if !seen.fetched.is_empty() {
            (
                Verdict::Consistent,
                format!(
                    "{} result(s) held fetched data{}",
                    seen.fetched.len(),
                    if seen
                        .fetched
                        .iter()
                        .any(Fetched::fetched_from_callers_public_host)
                    {
                        ", as declared"
                    } else {
                        " from a host the server chose, whose data it classifies itself (a run cannot check it)"
                    }
                ),
                Vec::new(),
            )
        } else {
            nothing_seen(
                seen,
                "result was seen",
                coverage.network.is_none().then_some(
                    "the network was not observed, so fetched data could not be recognised",
                ),
                "no result held data fetched from the network",
            )
        }
    };
    out.push(
        tool,
        "returnMetadata.source",
        "tools/list",
        set(sources),
        verdict,
        reason,
        evidence,
    );
}

/// `inputMetadata.destination`: an argument's value sent to a public name where the set has
/// no `public` (nor `user`, `system`: storage a service may keep private), or to an internal
/// one where it is only `ephemeral`. A name does not prove an audience: a warning, never an
/// error; a host the arguments named (a recipient, a URL) is where the caller sent the data.
fn destination(out: &mut LabelJudgement, tool: &ToolDecl, seen: &Seen, coverage: &Coverage) {
    let Some(destinations) = &tool.labels.input_destination else {
        return;
    };
    let has = |s: &str| destinations.iter().any(|v| v == s);
    let kept = has("public") || has("user") || has("system");
    let (verdict, reason, evidence) = if !all_known(destinations, &DESTINATIONS) {
        (
            Verdict::NotApplicable,
            UNKNOWN_VALUE.to_string(),
            Vec::new(),
        )
    } else {
        let against: Vec<(Evidence, Host)> = seen
            .sent
            .iter()
            .filter(|(_, h)| !(kept || h.internal && has("internal")))
            .map(|(e, h)| {
                (
                    Evidence {
                        firm: false,
                        ..e.clone()
                    },
                    h.clone(),
                )
            })
            .collect();
        if !against.is_empty() {
            (
                Verdict::Contradicted,
                format!(
                    "an argument's value was sent to {} (a name does not prove who reads it: a warning)",
                    describe_hosts(&against)
                ),
                against.into_iter().map(|(e, _)| e).collect(),
            )
        } else if !seen.sent.is_empty() {
            let exact = seen
                .sent
                .iter()
                .all(|(_, h)| has("public") || (h.internal && has("internal")));
            (
                Verdict::Consistent,
                format!(
                    "an argument's value was sent to {}{}",
                    describe_hosts(&seen.sent),
                    if exact {
                        ", as declared"
                    } else {
                        ": consistent if that service keeps it for the user or the platform, which a run cannot tell"
                    }
                ),
                Vec::new(),
            )
        } else {
            nothing_seen(
                seen,
                "argument was seen leaving",
                coverage
                    .network
                    .is_none()
                    .then_some("the network was not observed"),
                "no argument's value was seen leaving for a host the arguments did not name",
            )
        }
    };
    out.push(
        tool,
        "inputMetadata.destination",
        "tools/list",
        set(destinations),
        verdict,
        reason,
        evidence,
    );
}

/// `inputMetadata.outcomes`: only `benign` is judged, as `readOnlyHint: true` is, but held as
/// a warning (the draft lets benign tools change private drafts, which a run cannot tell from
/// other files); whether a change can be undone, the line between `consequential` and
/// `irreversible`, is nothing a run sees.
fn outcomes(out: &mut LabelJudgement, tool: &ToolDecl, run: &ToolRun, coverage: &Coverage) {
    let Some(outcomes) = &tool.labels.input_outcomes else {
        return;
    };
    let (verdict, reason, evidence) = if !all_known(outcomes, &OUTCOMES) {
        (
            Verdict::NotApplicable,
            UNKNOWN_VALUE.to_string(),
            Vec::new(),
        )
    } else if outcomes.iter().all(|o| o == "benign") {
        let mut t = tool.clone();
        t.hints.read_only = Hint::Declared(true);
        let j = super::read_only::judge(&t, run, coverage);
        let evidence = j
            .evidence
            .into_iter()
            .map(|e| Evidence { firm: false, ..e })
            .collect();
        let reason = if j.verdict == Verdict::Contradicted {
            format!(
                "judged as readOnlyHint: true: {} (a warning: benign tools may change private drafts)",
                j.reason
            )
        } else {
            format!("judged as readOnlyHint: true: {}", j.reason)
        };
        (j.verdict, reason, evidence)
    } else {
        (
            Verdict::NotApplicable,
            "whether a change can be undone (consequential or irreversible) is nothing a run sees"
                .to_string(),
            Vec::new(),
        )
    };
    out.push(
        tool,
        "inputMetadata.outcomes",
        "tools/list",
        set(outcomes),
        verdict,
        reason,
        evidence,
    );
}

/// The sensitivity labels on the results themselves: a result that says it is not sensitive
/// and carries a planted credential.
fn result_sensitivity(out: &mut LabelJudgement, tool: &ToolDecl, seen: &Seen, canaries: bool) {
    let claiming: Vec<&ResultLabels> = seen
        .labelled
        .iter()
        .filter(|l| !l.claims_not_sensitive().is_empty() || l.claims_sensitive())
        .collect();
    if claiming.is_empty() {
        return;
    }
    let against: Vec<Evidence> = seen
        .returned
        .iter()
        .filter_map(|r| {
            let claims = r.labels.as_ref()?.claims_not_sensitive();
            (!claims.is_empty()).then(|| Evidence {
                text: format!(
                    "{} (the result says {})",
                    r.evidence.text,
                    claims.join(", ")
                ),
                firm: true,
                ..r.evidence.clone()
            })
        })
        .collect();
    let said_sensitive = seen.returned.iter().any(|r| {
        r.labels
            .as_ref()
            .is_some_and(ResultLabels::claims_sensitive)
    });
    let claims: std::collections::BTreeSet<String> = claiming
        .iter()
        .flat_map(|l| {
            let mut c = l.claims_not_sensitive();
            if l.claims_sensitive() {
                c.push("sensitive".into());
            }
            c
        })
        .collect();
    let (verdict, reason) = if !against.is_empty() {
        (
            Verdict::Contradicted,
            format!(
                "{} result(s) labelled not sensitive carried a planted credential",
                results(against.iter())
            ),
        )
    } else if !canaries {
        (
            Verdict::Unexercised,
            "no secrets were planted (--no-canaries), so no result could carry one".to_string(),
        )
    } else if said_sensitive {
        (
            Verdict::Consistent,
            "the results that carried a planted credential said they were sensitive".to_string(),
        )
    } else {
        (
            Verdict::Consistent,
            "no result labelled not sensitive carried a planted credential".to_string(),
        )
    };
    out.push(
        tool,
        "result sensitivity",
        "its results",
        format!(
            "{} on {} result(s)",
            claims.into_iter().collect::<Vec<_>>().join("; "),
            claiming.len()
        ),
        verdict,
        reason,
        against,
    );
}

/// The trust labels on the results: a result that says its data is trusted and holds what a
/// public host the caller chose served.
fn result_trust(out: &mut LabelJudgement, tool: &ToolDecl, seen: &Seen) {
    let claiming: Vec<&ResultLabels> = seen
        .labelled
        .iter()
        .filter(|l| !l.claims_trusted().is_empty())
        .collect();
    if claiming.is_empty() {
        return;
    }
    let against: Vec<Evidence> = seen
        .fetched
        .iter()
        .filter(|f| f.fetched_from_callers_public_host())
        .filter_map(|f| {
            let claims = f.labels.as_ref()?.claims_trusted();
            (!claims.is_empty()).then(|| Evidence {
                text: format!(
                    "{} (the result says {})",
                    f.evidence.text,
                    claims.join(", ")
                ),
                ..f.evidence.clone()
            })
        })
        .collect();
    let claims: std::collections::BTreeSet<String> =
        claiming.iter().flat_map(|l| l.claims_trusted()).collect();
    let (verdict, reason) = if against.is_empty() {
        (
            Verdict::Consistent,
            "no result labelled trusted held data from a public host the caller chose",
        )
    } else {
        (
            Verdict::Contradicted,
            "a result labelled trusted held data fetched from a public host the caller chose",
        )
    };
    out.push(
        tool,
        "result trust",
        "its results",
        format!(
            "{} on {} result(s)",
            claims.into_iter().collect::<Vec<_>>().join("; "),
            claiming.len()
        ),
        verdict,
        reason.to_string(),
        against,
    );
}

impl LabelJudgement {
    /// Adds a verdict, and a finding when it is a contradiction: an error when a piece of
    /// its evidence is firm, else a warning.
    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        tool: &ToolDecl,
        label: &'static str,
        declared_in: &'static str,
        declared: String,
        verdict: Verdict,
        reason: String,
        evidence: Vec<Evidence>,
    ) {
        if verdict == Verdict::Contradicted {
            let firm = evidence.iter().any(|e| e.firm);
            self.findings.push(Finding {
                resolved_for: None,
                fingerprint: String::new(),
                accepted: None,
                audit: META.id,
                tool: Some(tool.name.clone()),
                hint: None,
                category: crate::finding::Category::common(evidence.iter().map(|e| e.category)),
                severity: if firm {
                    Severity::Error
                } else {
                    Severity::Warning
                },
                confidence: if firm {
                    Confidence::High
                } else {
                    Confidence::Medium
                },
                message: format!(
                    "{} declares {label}: {declared} ({declared_in}){LABEL_END}{reason}",
                    tool.name
                ),
                evidence: evidence.clone(),
            });
        }
        self.verdicts.push(LabelVerdict {
            label,
            declared_in,
            declared,
            verdict,
            reason,
            evidence,
        });
    }
}

/// The verdict on a label nothing contradicted or bore out: unexercised without a successful
/// call (no `unseen` was seen) or where `blind` says the run could not see it, else consistent
/// for `quiet`.
fn nothing_seen(
    seen: &Seen,
    unseen: &str,
    blind: Option<&str>,
    quiet: &str,
) -> (Verdict, String, Vec<Evidence>) {
    let (verdict, reason) = match blind {
        _ if !seen.succeeded => (
            Verdict::Unexercised,
            format!("no call succeeded, so no {unseen}"),
        ),
        Some(why) => (Verdict::Unexercised, why.to_string()),
        None => (Verdict::Consistent, quiet.to_string()),
    };
    (verdict, reason, Vec::new())
}

/// Where the label and its declared value end in a finding's message (what a baseline's
/// fingerprint keeps: the reason after it varies between runs).
pub const LABEL_END: &str = " but ";

/// How many results (calls) the pieces of `evidence` come from.
fn results<'a>(evidence: impl Iterator<Item = &'a Evidence>) -> usize {
    evidence
        .map(|e| e.source.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

/// The hosts of `sent`, named.
fn describe_hosts(sent: &[(Evidence, Host)]) -> String {
    let mut names: Vec<String> = sent
        .iter()
        .map(|(_, h)| {
            format!(
                "{} ({})",
                h.name,
                if h.internal {
                    "an internal name"
                } else {
                    "a public name"
                }
            )
        })
        .collect();
    names.sort();
    names.dedup();
    names.join(", ")
}

/// What the run showed about the data of `tool`.
fn seen(tool: &ToolDecl, run: &ToolRun) -> Seen {
    let offered = schema_values(&tool.input_schema);
    let mut seen = Seen {
        succeeded: run.calls.iter().any(|c| c.outcome.is_success()),
        ..Seen::default()
    };
    for c in &run.calls {
        if let Some(l) = &c.result_labels {
            seen.labelled.push(l.clone());
        }
        for o in &c.observations {
            if let Observation::Secret(s) = o {
                if s.how == SecretMove::Returned {
                    seen.returned.push(Returned {
                        evidence: Evidence {
                            firm: !s.asked && !s.swept,
                            ..Evidence::plain(c.label(), s.describe())
                        },
                        labels: c.result_labels.clone(),
                    });
                }
            }
        }
        let strings: Vec<(String, String)> = argument_strings(&c.arguments)
            .into_iter()
            .filter(|(_, v)| !offered.contains(v))
            .collect();
        let mut hosts: Vec<(Host, &NetEvent, &Observation)> = Vec::new();
        for o in &c.observations {
            let Some(n) = o
                .as_network()
                .filter(|n| !n.loopback && n.kind != NetKind::Dns)
            else {
                continue;
            };
            if !c.counts(o) {
                continue;
            }
            seen.reached_out = true;
            let name = n.name.clone().unwrap_or_else(|| n.destination.clone());
            let lower = name.to_ascii_lowercase();
            let named_by_arguments = argument_strings(&c.arguments)
                .iter()
                .any(|(_, v)| v.to_ascii_lowercase().contains(&lower));
            hosts.push((
                Host {
                    internal: internal(n.name.as_deref(), &n.destination),
                    named_by_arguments,
                    name,
                },
                n,
                o,
            ));
        }
        if c.returned_fetched && c.outcome.is_success() && !hosts.is_empty() {
            let reached: std::collections::BTreeSet<&str> =
                hosts.iter().map(|(h, _, _)| h.name.as_str()).collect();
            let chosen = hosts
                .iter()
                .any(|(h, _, _)| h.named_by_arguments && !h.internal);
            seen.fetched.push(Fetched {
                evidence: Evidence {
                    firm: true,
                    ..Evidence::plain(
                        c.label(),
                        format!(
                            "its result held what the network's stand-in site served (the call reached {}){}",
                            reached.into_iter().collect::<Vec<_>>().join(", "),
                            if chosen {
                                "; the arguments named the host"
                            } else {
                                ""
                            }
                        ),
                    )
                },
                hosts: hosts.iter().map(|(h, _, _)| h.clone()).collect(),
                labels: c.result_labels.clone(),
            });
        }
        for (host, n, o) in hosts {
            if host.named_by_arguments {
                continue;
            }
            let lower = host.name.to_ascii_lowercase();
            let Some((argument, _)) = strings
                .iter()
                .filter(|(_, v)| !lower.contains(&v.to_ascii_lowercase()))
                .find(|(_, v)| {
                    content_of(n.carried.bytes())
                        .iter()
                        .any(|part| carries(part, v))
                })
            else {
                continue;
            };
            let mut e = super::evidence_of(std::iter::once((c, o)))
                .into_iter()
                .next()
                .unwrap_or_else(|| Evidence::plain(c.label(), o.describe()));
            e.text = format!("{} carrying argument `{argument}`", e.text);
            seen.sent.push((e, host));
        }
    }
    seen
}

/// Of the bytes a connection carried, the parts that hold data: for an HTTP request its
/// request line and body (not the headers, where the host's name and ordinary words are),
/// else all of them.
fn content_of(bytes: &[u8]) -> Vec<&[u8]> {
    let line_end = memchr::memmem::find(bytes, b"\r\n");
    let head_end = memchr::memmem::find(bytes, b"\r\n\r\n");
    match (line_end, head_end) {
        (Some(line), Some(head))
            if bytes[..line].ends_with(b"HTTP/1.1") || bytes[..line].ends_with(b"HTTP/1.0") =>
        {
            vec![&bytes[..line], &bytes[head + 4..]]
        }
        _ => vec![bytes],
    }
}

/// The string values a tool's input schema offers itself (`default`, `const`, `enum`,
/// `examples`): the server's own choice, not the caller's data.
fn schema_values(schema: &Value) -> std::collections::BTreeSet<String> {
    fn walk(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    if matches!(k.as_str(), "default" | "const" | "enum" | "examples") {
                        strings(v, out);
                    }
                    walk(v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    fn strings(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        match v {
            Value::String(s) => {
                out.insert(s.clone());
            }
            Value::Array(items) => items.iter().for_each(|i| strings(i, out)),
            _ => {}
        }
    }
    let mut out = std::collections::BTreeSet::new();
    walk(schema, &mut out);
    out
}

/// The string values of `arguments` worth looking for in what was sent (8 characters or
/// more, not all digits), each with the name of its top-level argument.
fn argument_strings(arguments: &Value) -> Vec<(String, String)> {
    fn walk(top: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::String(s)
                if s.chars().count() >= 8 && !s.chars().all(|c| c.is_ascii_digit()) =>
            {
                out.push((top.to_string(), s.clone()))
            }
            Value::Array(items) => items.iter().for_each(|i| walk(top, i, out)),
            Value::Object(m) => m.values().for_each(|i| walk(top, i, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Value::Object(m) = arguments {
        for (k, v) in m {
            walk(k, v, &mut out);
        }
    }
    out
}

/// Whether `bytes` carry `value`: as it is, JSON-escaped, or form- or URL-encoded.
fn carries(bytes: &[u8], value: &str) -> bool {
    if bytes.is_empty() {
        return false;
    }
    let json = serde_json::to_string(value).unwrap_or_default();
    let json = json.trim_matches('"');
    let url: String = value
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    [
        value.to_string(),
        json.to_string(),
        url.clone(),
        url.replace("%20", "+"),
    ]
    .iter()
    .any(|f| memchr::memmem::find(bytes, f.as_bytes()).is_some())
}

/// Whether a destination is internal: a name under a suffix that only private networks use
/// (or a single label), else, without a name, a private, shared or link-local address.
fn internal(name: Option<&str>, address: &str) -> bool {
    const SUFFIXES: [&str; 9] = [
        ".internal",
        ".local",
        ".localdomain",
        ".lan",
        ".corp",
        ".home.arpa",
        ".intranet",
        ".private",
        ".localhost",
    ];
    if let Some(name) = name {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        return !name.contains('.') || SUFFIXES.iter().any(|s| name.ends_with(s));
    }
    match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => {
            let o = a.octets();
            a.is_private() || a.is_link_local() || (o[0] == 100 && (64..128).contains(&o[1]))
        }
        Ok(std::net::IpAddr::V6(a)) => {
            let s = a.segments()[0];
            (s & 0xfe00) == 0xfc00 || (s & 0xffc0) == 0xfe80
        }
        Err(_) => false,
    }
}

/// The labels the observations support: a returned credential is `credentials`, data fetched
/// from a public host the caller chose `untrustedPublic`, an argument sent to a host a public
/// (or internal) destination, nothing sent, written or connected to `ephemeral`; the outcomes
/// from what the calls changed. What was seen is added to a declared set; what only fits the
/// calls made is suggested only where nothing is declared.
fn supported(
    tool: &ToolDecl,
    run: &ToolRun,
    coverage: &Coverage,
    seen: &Seen,
) -> Vec<SupportedLabel> {
    let labels = &tool.labels;
    let mut out = Vec::new();
    let mut add = |label: &'static str,
                   value: &str,
                   basis: SupportBasis,
                   declared: &Option<Vec<String>>,
                   reason: String| {
        if basis != SupportBasis::Observed && declared.is_some() {
            return;
        }
        let mut values = declared.clone().unwrap_or_default();
        let changed = !values.iter().any(|v| v == value);
        if changed {
            values.push(value.to_string());
        }
        out.push(SupportedLabel {
            label,
            values,
            basis,
            changed,
            reason,
        });
    };
    if !seen.returned.is_empty() {
        add(
            "returnMetadata.sensitivity",
            "credentials",
            SupportBasis::Observed,
            &labels.return_sensitivity,
            format!(
                "{} result(s) carried a planted credential",
                results(seen.returned.iter().map(|r| &r.evidence))
            ),
        );
    }
    if seen
        .fetched
        .iter()
        .any(Fetched::fetched_from_callers_public_host)
    {
        add(
            "returnMetadata.source",
            "untrustedPublic",
            SupportBasis::Observed,
            &labels.return_source,
            "a result held data fetched from a public host the caller chose".into(),
        );
    }
    // Lasting changes of the tool's own: no transient file, no bookkeeping.
    let changed = |destructive: bool| {
        run.calls.iter().any(|c| {
            c.observations.iter().any(|o| {
                (if destructive {
                    o.is_destructive()
                } else {
                    o.is_write()
                }) && c.counts(o)
                    && !super::category_of(c, o).is_some_and(crate::finding::Category::softens)
            })
        })
    };
    let (wrote, destroyed) = (changed(false), changed(true));
    if !seen.sent.is_empty() {
        let internal_only = seen.sent.iter().all(|(_, h)| h.internal);
        add(
            "inputMetadata.destination",
            if internal_only { "internal" } else { "public" },
            SupportBasis::Observed,
            &labels.input_destination,
            format!(
                "an argument's value was sent to {}",
                describe_hosts(&seen.sent)
            ),
        );
    } else if seen.succeeded && coverage.network.is_some() && !wrote && !seen.reached_out {
        add(
            "inputMetadata.destination",
            "ephemeral",
            SupportBasis::Consistent,
            &labels.input_destination,
            "no call connected anywhere or wrote anything".into(),
        );
    }
    if destroyed || wrote {
        add(
            "inputMetadata.outcomes",
            if destroyed {
                "irreversible"
            } else {
                "consequential"
            },
            SupportBasis::Observed,
            &labels.input_outcomes,
            if destroyed {
                "a call deleted or overwrote data (irreversible unless the server keeps a way back)"
                    .into()
            } else {
                "a call made a lasting change".into()
            },
        );
    } else if seen.succeeded && coverage.files.is_some() && !seen.reached_out {
        add(
            "inputMetadata.outcomes",
            "benign",
            SupportBasis::Consistent,
            &labels.input_outcomes,
            "no call changed anything that was watched or connected anywhere".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::testing::*;
    use crate::evidence::{CallRecord, FileEffectKind, Mechanism, SecretSighting};
    use crate::mcp::labels::TRUST_EXTENSION;
    use serde_json::json;

    fn returned(asked: bool) -> Observation {
        Observation::Secret(SecretSighting {
            how: SecretMove::Returned,
            kind: "aws-secret-access-key".into(),
            place: "~/.aws/credentials".into(),
            encoding: "raw".into(),
            target: None,
            asked,
            swept: false,
            mechanism: Mechanism::Result,
        })
    }

    fn sent(name: &str, carried: &[u8]) -> Observation {
        Observation::Network(NetEvent {
            kind: NetKind::Connect,
            destination: "198.18.0.7".into(),
            port: Some(443),
            name: Some(name.into()),
            loopback: false,
            mechanism: Mechanism::Packet,
            payload: None,
            carried: crate::evidence::Carried::of(carried),
        })
    }

    fn verdict<'a>(j: &'a LabelJudgement, label: &str) -> &'a LabelVerdict {
        let mut found = j.verdicts.iter().filter(|v| v.label == label);
        let v = found
            .next()
            .unwrap_or_else(|| panic!("no verdict on {label}: {:?}", j.verdicts));
        assert!(
            found.next().is_none(),
            "two verdicts on {label}: {:?}",
            j.verdicts
        );
        v
    }

    fn judged(annotations: Value, calls: Vec<CallRecord>) -> LabelJudgement {
        judge(&tool(annotations), &run(calls), &full_coverage(), true)
    }

    #[test]
    fn a_credential_in_a_result_contradicts_a_sensitivity_without_credentials() {
        let t = json!({"returnMetadata": {"source": "system", "sensitivity": "none"}});
        let j = judged(t.clone(), vec![call(1, ok(), vec![returned(false)])]);
        let v = verdict(&j, "returnMetadata.sensitivity");
        assert_eq!(v.verdict, Verdict::Contradicted, "{v:?}");
        assert_eq!(j.findings[0].severity, Severity::Error);
        assert_eq!(j.findings[0].audit, "data-labels");
        // Asked for by path: still wrong, but only a warning.
        let j = judged(t.clone(), vec![call(1, ok(), vec![returned(true)])]);
        assert_eq!(j.findings[0].severity, Severity::Warning);
        // Declared: consistent; the suggestion adds nothing to the declared set.
        let honest =
            json!({"returnMetadata": {"source": "system", "sensitivity": ["user", "credentials"]}});
        let j = judged(honest, vec![call(1, ok(), vec![returned(false)])]);
        assert_eq!(
            verdict(&j, "returnMetadata.sensitivity").verdict,
            Verdict::Consistent
        );
        assert!(j.findings.is_empty());
        let s = j
            .supported
            .iter()
            .find(|s| s.label == "returnMetadata.sensitivity")
            .expect("supported");
        assert_eq!(
            (s.values.as_slice(), s.changed),
            (&["user".to_string(), "credentials".to_string()][..], false)
        );
        // Nothing returned: consistent; no canaries: unexercised.
        let j = judged(t.clone(), vec![call(1, ok(), vec![])]);
        assert_eq!(
            verdict(&j, "returnMetadata.sensitivity").verdict,
            Verdict::Consistent
        );
        let j = judge(
            &tool(t),
            &run(vec![call(1, ok(), vec![])]),
            &full_coverage(),
            false,
        );
        assert_eq!(
            verdict(&j, "returnMetadata.sensitivity").verdict,
            Verdict::Unexercised
        );
    }

    #[test]
    fn each_sensitivity_label_gets_one_verdict_of_its_own() {
        let j = judged(
            json!({"returnMetadata": {"source": "system", "sensitivity": "pii"}, "sensitiveHint": "high", "privateHint": false}),
            vec![call(1, ok(), vec![returned(false)])],
        );
        assert_eq!(
            verdict(&j, "returnMetadata.sensitivity").verdict,
            Verdict::Contradicted
        );
        assert_eq!(verdict(&j, "sensitiveHint").verdict, Verdict::Consistent);
        assert_eq!(verdict(&j, "privateHint").verdict, Verdict::Contradicted);
        let j = judged(
            json!({"sensitiveHint": "medium", "returnMetadata": {"source": "system", "sensitivity": "Credentials"}}),
            vec![call(1, ok(), vec![returned(false)])],
        );
        assert_eq!(verdict(&j, "sensitiveHint").verdict, Verdict::NotApplicable);
        assert_eq!(
            verdict(&j, "returnMetadata.sensitivity").verdict,
            Verdict::NotApplicable,
            "an unknown class is not judged"
        );
        assert!(j.findings.is_empty());
    }

    #[test]
    fn a_result_labelled_not_sensitive_that_carries_a_credential_is_an_error() {
        let labelled = |meta: Value, asked: bool| {
            let mut c = call(1, ok(), vec![returned(asked)]);
            c.result_labels =
                crate::mcp::labels::result_labels(&json!({"content": [], "_meta": meta}));
            c
        };
        let j = judged(
            json!({}),
            vec![labelled(
                json!({TRUST_EXTENSION: {"sensitive": false}}),
                true,
            )],
        );
        let v = verdict(&j, "result sensitivity");
        assert_eq!(v.verdict, Verdict::Contradicted, "{v:?}");
        assert_eq!(j.findings[0].severity, Severity::Error);
        assert!(v.evidence[0].text.contains("sensitive: false"), "{v:?}");
        let j = judged(
            json!({}),
            vec![labelled(
                json!({TRUST_EXTENSION: {"sensitive": true}}),
                false,
            )],
        );
        assert_eq!(
            verdict(&j, "result sensitivity").verdict,
            Verdict::Consistent
        );
        // Without canaries nothing could show it.
        let t = tool(json!({}));
        let mut c = call(1, ok(), vec![]);
        c.result_labels = crate::mcp::labels::result_labels(
            &json!({"content": [], "_meta": {TRUST_EXTENSION: {"sensitive": false}}}),
        );
        let j = judge(&t, &run(vec![c]), &full_coverage(), false);
        assert_eq!(
            verdict(&j, "result sensitivity").verdict,
            Verdict::Unexercised
        );
    }

    #[test]
    fn an_argument_sent_to_a_public_name_is_a_warning_against_an_internal_destination() {
        let t = json!({"inputMetadata": {"destination": "internal", "sensitivity": "user", "outcomes": "consequential"}});
        let post = |name: &str, body: &str, arguments: Value| {
            let mut c = call(
                1,
                ok(),
                vec![sent(
                    name,
                    format!(
                        "POST /v1 HTTP/1.1\r\nHost: {name}\r\nAccept: text/markdown\r\n\r\n{body}"
                    )
                    .as_bytes(),
                )],
            );
            c.arguments = arguments;
            c
        };
        let j = judged(
            t.clone(),
            vec![post(
                "api.notes.test",
                "{\"text\":\"quarterly plan draft\"}",
                json!({"text": "quarterly plan draft"}),
            )],
        );
        let v = verdict(&j, "inputMetadata.destination");
        assert_eq!(v.verdict, Verdict::Contradicted, "{v:?}");
        assert!(v.reason.contains("api.notes.test (a public name)"), "{v:?}");
        assert!(
            v.evidence[0].text.contains("carrying argument `text`"),
            "{v:?}"
        );
        assert_eq!(j.findings[0].severity, Severity::Warning);
        assert!(
            j.supported
                .iter()
                .any(|s| s.label == "inputMetadata.destination"
                    && s.values == ["internal", "public"]
                    && s.changed)
        );
        // The same to an internal name: as declared.
        let j = judged(
            t.clone(),
            vec![post(
                "sync.corp.internal",
                "text=quarterly+plan+draft",
                json!({"text": "quarterly plan draft"}),
            )],
        );
        assert_eq!(
            verdict(&j, "inputMetadata.destination").verdict,
            Verdict::Consistent
        );
        // A host the arguments named (a recipient's domain, a URL) is where the caller sent it;
        // a value only in the headers, a part of the host's name, or one the schema offered,
        // is nobody's data.
        for (name, arguments) in [
            (
                "mail.partner.test",
                json!({"to": "bob@mail.partner.test", "body": "quarterly plan draft"}),
            ),
            ("acme-corp.wiki.test", json!({"site": "acme-corp.wiki"})),
            ("api.notes.test", json!({"format": "text/markdown"})),
        ] {
            let j = judged(
                t.clone(),
                vec![post(name, "quarterly plan draft", arguments.clone())],
            );
            assert_eq!(
                verdict(&j, "inputMetadata.destination").verdict,
                Verdict::Consistent,
                "{name} {arguments}"
            );
        }
        let mut offered = tool(t.clone());
        offered.input_schema =
            json!({"type": "object", "properties": {"mode": {"enum": ["quarterly plan draft"]}}});
        let j = judge(
            &offered,
            &run(vec![post(
                "api.notes.test",
                "quarterly plan draft",
                json!({"mode": "quarterly plan draft"}),
            )]),
            &full_coverage(),
            true,
        );
        assert_eq!(
            verdict(&j, "inputMetadata.destination").verdict,
            Verdict::Consistent
        );
    }

    #[test]
    fn fetched_data_contradicts_a_source_only_when_the_caller_chose_a_public_host() {
        let page = |name: &str, url: &str, outcome| {
            let mut c = call(1, outcome, vec![sent(name, b"GET / HTTP/1.1\r\n\r\n")]);
            c.arguments = json!({"url": url});
            c.returned_fetched = true;
            c
        };
        for declared in ["system", "trustedPublic", "internal", "user"] {
            let t = json!({"returnMetadata": {"source": declared, "sensitivity": "none"}});
            let j = judged(
                t.clone(),
                vec![page("news.test", "https://news.test/", ok())],
            );
            assert_eq!(
                verdict(&j, "returnMetadata.source").verdict,
                Verdict::Contradicted,
                "{declared}"
            );
            // The server's own host: its data is the server's to classify.
            let j = judged(t.clone(), vec![page("api.weather.test", "Paris", ok())]);
            assert_eq!(
                verdict(&j, "returnMetadata.source").verdict,
                Verdict::Consistent,
                "{declared}"
            );
            // A failed call's error quoting a page, or a result without a connection of its
            // own (a cache, a file saved earlier), is no fetch.
            let mut cached = call(1, ok(), vec![]);
            cached.returned_fetched = true;
            let j = judged(
                t,
                vec![
                    page(
                        "news.test",
                        "https://news.test/",
                        crate::mcp::client::CallOutcome::ToolError {
                            text: "x".into(),
                            result_sha256: "x".into(),
                        },
                    ),
                    cached,
                ],
            );
            assert_eq!(
                verdict(&j, "returnMetadata.source").verdict,
                Verdict::Consistent,
                "{declared}"
            );
        }
        let untrusted =
            json!({"returnMetadata": {"source": "untrustedPublic", "sensitivity": "none"}});
        let j = judged(
            untrusted,
            vec![page("news.test", "https://news.test/", ok())],
        );
        assert_eq!(
            verdict(&j, "returnMetadata.source").verdict,
            Verdict::Consistent
        );
        let j = judged(
            json!({}),
            vec![page("news.test", "https://news.test/", ok())],
        );
        assert!(
            j.supported
                .iter()
                .any(|s| s.label == "returnMetadata.source" && s.values == ["untrustedPublic"])
        );
    }

    #[test]
    fn benign_outcomes_are_judged_as_read_only_but_held_as_a_warning() {
        let t = json!({"inputMetadata": {"destination": "user", "sensitivity": "user", "outcomes": "benign"}});
        let c = call(
            1,
            ok(),
            vec![file("$WORKSPACE/notes.md", FileEffectKind::Created)],
        );
        let j = judged(t, vec![c]);
        let v = verdict(&j, "inputMetadata.outcomes");
        assert_eq!(v.verdict, Verdict::Contradicted, "{v:?}");
        assert!(
            v.reason.starts_with("judged as readOnlyHint: true"),
            "{v:?}"
        );
        assert_eq!(j.findings[0].severity, Severity::Warning);
        // Reversibility is nothing a run sees.
        let consequential = json!({"inputMetadata": {"destination": "user", "sensitivity": "user", "outcomes": ["benign", "consequential"]}});
        let c = call(
            1,
            ok(),
            vec![file("$WORKSPACE/notes.md", FileEffectKind::Deleted)],
        );
        let j = judged(consequential, vec![c]);
        assert_eq!(
            verdict(&j, "inputMetadata.outcomes").verdict,
            Verdict::NotApplicable
        );
        assert!(
            j.supported
                .iter()
                .any(|s| s.label == "inputMetadata.outcomes"
                    && s.values == ["benign", "consequential", "irreversible"])
        );
    }

    #[test]
    fn nothing_that_only_fits_the_calls_is_suggested_over_a_declaration_or_past_a_connection() {
        let quiet = judged(json!({}), vec![call(1, ok(), vec![])]);
        assert!(
            quiet
                .supported
                .iter()
                .any(|s| s.label == "inputMetadata.destination" && s.values == ["ephemeral"])
        );
        assert!(
            quiet
                .supported
                .iter()
                .any(|s| s.label == "inputMetadata.outcomes" && s.values == ["benign"])
        );
        // A short message posted somewhere: neither ephemeral nor benign.
        let mut c = call(
            1,
            ok(),
            vec![sent("api.chat.test", b"POST / HTTP/1.1\r\n\r\nHello")],
        );
        c.arguments = json!({"text": "Hello"});
        let j = judged(json!({}), vec![c]);
        assert!(j.supported.is_empty(), "{:?}", j.supported);
        let declared = judged(
            json!({"inputMetadata": {"destination": "user", "sensitivity": "user", "outcomes": "consequential"}}),
            vec![call(1, ok(), vec![])],
        );
        assert!(declared.supported.is_empty(), "{:?}", declared.supported);
    }

    #[test]
    fn internal_names_and_addresses() {
        for (name, address, expected) in [
            (Some("sync.corp.internal"), "198.18.0.1", true),
            (Some("printer.local"), "198.18.0.1", true),
            (Some("nas"), "198.18.0.1", true),
            (Some("api.example.test"), "198.18.0.1", false),
            (None, "10.1.2.3", true),
            (None, "169.254.169.254", true),
            (None, "fd00::1", true),
            (None, "192.0.2.7", false),
        ] {
            assert_eq!(internal(name, address), expected, "{name:?} {address}");
        }
    }
}
