//! `data-labels`: the data labels a server declares beside the hints (see
//! [`crate::mcp::labels`]) judged against what its tools did, like hints: what a result
//! carried (a planted credential, the network stand-in's pages), where a call's arguments
//! went (a destination's name, public or internal), what its calls changed. A verdict per
//! declared label; a contradiction is a finding, firm only on firm evidence. For every tool,
//! the labels the observations support (for `hintcheck suggest`), most useful where none are
//! declared.

use serde_json::Value;

use super::{AuditMeta, HintJudgement};
use crate::evidence::{Coverage, NetEvent, NetKind, Observation, SecretMove, ToolRun};
use crate::finding::{Confidence, Evidence, Finding, Severity, Verdict};
use crate::mcp::labels::{ResultLabels, set};
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
- **source** (`returnMetadata.source`): a result that held what the network's stand-in site served \
needs a public source (`untrustedPublic`, `trustedPublic`), or `internal` when the host's name is \
an internal one (`.internal`, `.local`, `.corp`, `.lan`, `.home.arpa`, a single label, a private \
address); `trustedPublic` alone, `untrusted: false` or a result's `openWorldHint: false` are \
contradicted when the caller chose the host (its name was in the arguments): the content is \
whatever that host serves.\n\
- **destination** (`inputMetadata.destination`): an argument's value (8 characters or more) in \
what a call sent to a host needs `public` for a public name (or `user`, `system`: storage the \
service may keep private, which a run cannot tell), `internal` (or more) for an internal one; \
`ephemeral` alone, or `internal` for a public name, is contradicted.\n\
- **outcomes** (`inputMetadata.outcomes`): `benign` alone is judged as `readOnlyHint: true`, a \
set without `irreversible` as `destructiveHint: false`, with the same evidence and firmness.\n\n\
`inputMetadata.sensitivity` (what a tool accepts) is nothing a run can contradict. Where a tool \
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
/// arguments named it.
struct Host {
    name: String,
    internal: bool,
    named_by_arguments: bool,
}

/// What the run showed about the data of one tool.
#[derive(Default)]
struct Seen {
    /// Results that carried a planted credential: the evidence, whether the caller named its
    /// file, and the result's labels.
    returned: Vec<(Evidence, bool, Option<ResultLabels>)>,
    /// Results that held fetched content, with the hosts their call reached.
    fetched: Vec<(Evidence, Vec<Host>, Option<ResultLabels>)>,
    /// An argument's value sent to a host: the evidence and the host.
    sent: Vec<(Evidence, Host)>,
    /// Results that carried labels, by call label.
    labelled: Vec<(String, ResultLabels)>,
    /// Whether a call succeeded.
    succeeded: bool,
}

/// Judges the data labels `tool` declares (and its results carry) against `run`.
/// `canaries` is whether the run planted secrets (without them no result can carry one).
pub fn judge(
    tool: &ToolDecl,
    run: &ToolRun,
    coverage: &Coverage,
    canaries: bool,
) -> LabelJudgement {
    let seen = seen(run);
    let labels = &tool.labels;
    let mut out = LabelJudgement::default();
    let exercised = |what: &str| -> Option<(Verdict, String)> {
        (!seen.succeeded).then(|| {
            (
                Verdict::Unexercised,
                format!("no call succeeded, so no {what} was seen"),
            )
        })
    };

    // Sensitivity, declared on the tool.
    let not_sensitive: Vec<(&'static str, String)> = [
        labels
            .return_sensitivity
            .as_ref()
            .filter(|c| !c.iter().any(|c| c == "credentials"))
            .map(|c| ("returnMetadata.sensitivity", set(c))),
        (labels.sensitive_hint.as_deref() == Some("low"))
            .then(|| ("sensitiveHint", "\"low\"".to_string())),
        (labels.private_hint == Some(false)).then(|| ("privateHint", "false".to_string())),
    ]
    .into_iter()
    .flatten()
    .collect();
    for (label, declared) in not_sensitive {
        let (verdict, reason, evidence) = if !seen.returned.is_empty() {
            let asked_only = seen.returned.iter().all(|(_, asked, _)| *asked);
            (
                Verdict::Contradicted,
                format!(
                    "{} result(s) carried a planted credential{}",
                    results(seen.returned.iter().map(|(e, _, _)| e)),
                    if asked_only {
                        " (from a file the caller named)"
                    } else {
                        ""
                    }
                ),
                seen.returned.iter().map(|(e, _, _)| e.clone()).collect(),
            )
        } else if let Some((v, r)) = exercised("result") {
            (v, r, Vec::new())
        } else if !canaries {
            (
                Verdict::Unexercised,
                "no secrets were planted (--no-canaries), so no result could carry one".into(),
                Vec::new(),
            )
        } else {
            (
                Verdict::Consistent,
                "no result carried a planted credential".into(),
                Vec::new(),
            )
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
    let declares_sensitive = labels
        .return_sensitivity
        .as_ref()
        .is_some_and(|c| c.iter().any(|c| c == "credentials"))
        || matches!(labels.sensitive_hint.as_deref(), Some("medium" | "high"))
        || labels.private_hint == Some(true);
    if declares_sensitive {
        let (declared, label) = match (&labels.return_sensitivity, &labels.sensitive_hint) {
            (Some(c), _) => (set(c), "returnMetadata.sensitivity"),
            (None, Some(h)) => (format!("{h:?}"), "sensitiveHint"),
            (None, None) => ("true".into(), "privateHint"),
        };
        let (verdict, reason) = if seen.returned.is_empty() {
            exercised("result").unwrap_or((
                Verdict::Consistent,
                "a declared possibility; no result carried a planted credential".into(),
            ))
        } else {
            (
                Verdict::Consistent,
                format!(
                    "{} result(s) carried a planted credential, as declared",
                    results(seen.returned.iter().map(|(e, _, _)| e))
                ),
            )
        };
        out.push(
            tool,
            label,
            "tools/list",
            declared,
            verdict,
            reason,
            Vec::new(),
        );
    }

    // Source, declared on the tool.
    if let Some(sources) = &labels.return_source {
        let has = |s: &str| sources.iter().any(|v| v == s);
        let public = has("untrustedPublic") || has("trustedPublic");
        let mut against = Vec::new();
        let mut why = "";
        for (e, hosts, _) in &seen.fetched {
            let chosen = hosts.iter().any(|h| h.named_by_arguments);
            let all_internal = !hosts.is_empty() && hosts.iter().all(|h| h.internal);
            if all_internal && !(public || has("internal")) {
                why = "held data fetched from an internal host";
                against.push(e.clone());
            } else if !all_internal && !public {
                why = "held data fetched from a host on the public network";
                against.push(e.clone());
            } else if !all_internal && chosen && !has("untrustedPublic") {
                why = "held data fetched from a host the caller chose, whatever it serves (untrustedPublic)";
                against.push(e.clone());
            }
        }
        let (verdict, reason) = if !against.is_empty() {
            (
                Verdict::Contradicted,
                format!("{} result(s) {why}", against.len()),
            )
        } else if !seen.fetched.is_empty() {
            (
                Verdict::Consistent,
                format!(
                    "{} result(s) held fetched data, as declared",
                    seen.fetched.len()
                ),
            )
        } else if let Some(e) = exercised("result") {
            e
        } else if coverage.network.is_none() {
            (
                Verdict::Unexercised,
                "the network was not observed, so fetched data could not be recognised".into(),
            )
        } else {
            (
                Verdict::Consistent,
                "no result held data fetched from the network".into(),
            )
        };
        out.push(
            tool,
            "returnMetadata.source",
            "tools/list",
            set(sources),
            verdict,
            reason,
            against,
        );
    }

    // Destination, declared on the tool.
    if let Some(destinations) = &labels.input_destination {
        let has = |s: &str| destinations.iter().any(|v| v == s);
        let kept = has("public") || has("user") || has("system");
        let mut against = Vec::new();
        for (e, host) in &seen.sent {
            let allowed = if host.internal {
                kept || has("internal")
            } else {
                kept
            };
            if !allowed {
                against.push(e.clone());
            }
        }
        let (verdict, reason) = if !against.is_empty() {
            (
                Verdict::Contradicted,
                format!(
                    "an argument's value was sent to {}",
                    describe_hosts(&seen.sent, &against)
                ),
            )
        } else if !seen.sent.is_empty() {
            (
                Verdict::Consistent,
                format!(
                    "an argument's value was sent to {}{}",
                    describe_hosts(&seen.sent, &[]),
                    if seen
                        .sent
                        .iter()
                        .all(|(_, h)| has("public") || (h.internal && has("internal")))
                    {
                        ", as declared"
                    } else {
                        ": consistent only if that service keeps it for the user or the platform, which a run cannot tell"
                    }
                ),
            )
        } else if let Some(e) = exercised("argument sent") {
            e
        } else if coverage.network.is_none() {
            (Verdict::Unexercised, "the network was not observed".into())
        } else {
            (
                Verdict::Consistent,
                "no argument's value was seen leaving in what the calls sent".into(),
            )
        };
        out.push(
            tool,
            "inputMetadata.destination",
            "tools/list",
            set(destinations),
            verdict,
            reason,
            against,
        );
    }

    // Outcomes, declared on the tool: judged as the hints they imply.
    if let Some(outcomes) = &labels.input_outcomes {
        let has = |s: &str| outcomes.iter().any(|v| v == s);
        let (implied, j) = if outcomes.iter().all(|o| o == "benign") {
            let mut t = tool.clone();
            t.hints.read_only = Hint::Declared(true);
            (
                "readOnlyHint: true",
                super::read_only::judge(&t, run, coverage),
            )
        } else if !has("irreversible") {
            let mut t = tool.clone();
            t.hints.read_only = Hint::Declared(false);
            t.hints.destructive = Hint::Declared(false);
            (
                "destructiveHint: false",
                super::destructive::judge(&t, run, coverage),
            )
        } else {
            (
                "",
                HintJudgement::new(
                    Verdict::NotApplicable,
                    "irreversible outcomes are declared possible: nothing can contradict that",
                ),
            )
        };
        let reason = if implied.is_empty() {
            j.reason
        } else {
            format!("judged as {implied}: {}", j.reason)
        };
        out.push(
            tool,
            "inputMetadata.outcomes",
            "tools/list",
            set(outcomes),
            j.verdict,
            reason,
            j.evidence,
        );
    }

    // Labels on the results themselves.
    if seen
        .labelled
        .iter()
        .any(|(_, l)| !l.claims_not_sensitive().is_empty() || l.claims_sensitive())
    {
        let against: Vec<Evidence> = seen
            .returned
            .iter()
            .filter_map(|(e, _, l)| {
                let claims = l.as_ref()?.claims_not_sensitive();
                (!claims.is_empty()).then(|| Evidence {
                    text: format!("{} (the result says {})", e.text, claims.join(", ")),
                    firm: true,
                    ..e.clone()
                })
            })
            .collect();
        let claims: std::collections::BTreeSet<String> = seen
            .labelled
            .iter()
            .flat_map(|(_, l)| {
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
        } else {
            (
                Verdict::Consistent,
                "every result that carried a planted credential said it was sensitive".into(),
            )
        };
        out.push(
            tool,
            "result sensitivity",
            "its results",
            format!(
                "{} on {} result(s)",
                claims.into_iter().collect::<Vec<_>>().join("; "),
                seen.labelled.len()
            ),
            verdict,
            reason,
            against,
        );
    }
    if seen
        .labelled
        .iter()
        .any(|(_, l)| !l.claims_trusted().is_empty())
    {
        let against: Vec<Evidence> = seen
            .fetched
            .iter()
            .filter(|(_, hosts, _)| hosts.iter().any(|h| h.named_by_arguments && !h.internal))
            .filter_map(|(e, _, l)| {
                let claims = l.as_ref()?.claims_trusted();
                (!claims.is_empty()).then(|| Evidence {
                    text: format!("{} (the result says {})", e.text, claims.join(", ")),
                    ..e.clone()
                })
            })
            .collect();
        let claims: std::collections::BTreeSet<String> = seen
            .labelled
            .iter()
            .flat_map(|(_, l)| l.claims_trusted())
            .collect();
        let (verdict, reason) = if against.is_empty() {
            (
                Verdict::Consistent,
                "no result labelled trusted held data from a host the caller chose".into(),
            )
        } else {
            (
                Verdict::Contradicted,
                format!(
                    "{} result(s) labelled trusted held data fetched from a host the caller chose",
                    against.len()
                ),
            )
        };
        out.push(
            tool,
            "result trust",
            "its results",
            format!(
                "{} on {} result(s)",
                claims.into_iter().collect::<Vec<_>>().join("; "),
                seen.labelled.len()
            ),
            verdict,
            reason,
            against,
        );
    }
    out.supported = supported(tool, run, coverage, &seen);
    out
}

impl LabelJudgement {
    /// Adds a verdict, and a finding when it is a contradiction.
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
                fingerprint: String::new(),
                accepted: None,
                audit: META.id,
                tool: Some(tool.name.clone()),
                hint: None,
                category: None,
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
                    "{} declares {label}: {declared} ({declared_in}) but {reason}",
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

/// How many results (calls) the pieces of `evidence` come from.
fn results<'a>(evidence: impl Iterator<Item = &'a Evidence>) -> usize {
    evidence
        .map(|e| e.source.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

/// The hosts of `sent` whose evidence is among `only` (all when `only` is empty), named.
fn describe_hosts(sent: &[(Evidence, Host)], only: &[Evidence]) -> String {
    let mut names: Vec<String> = sent
        .iter()
        .filter(|(e, _)| only.is_empty() || only.iter().any(|o| o.text == e.text))
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

/// What the run showed about the data of one tool.
fn seen(run: &ToolRun) -> Seen {
    let mut seen = Seen {
        succeeded: run.calls.iter().any(|c| c.outcome.is_success()),
        ..Seen::default()
    };
    for c in &run.calls {
        if let Some(l) = &c.result_labels {
            seen.labelled.push((c.label(), l.clone()));
        }
        for o in &c.observations {
            if let Observation::Secret(s) = o {
                if s.how == SecretMove::Returned {
                    seen.returned.push((
                        Evidence {
                            firm: !s.asked,
                            ..Evidence::plain(c.label(), s.describe())
                        },
                        s.asked,
                        c.result_labels.clone(),
                    ));
                }
            }
        }
        let strings = argument_strings(&c.arguments);
        let hosts: Vec<(Host, &NetEvent, &Observation)> = c
            .observations
            .iter()
            .filter_map(|o| {
                let n = o.as_network().filter(|n| !n.loopback)?;
                let name = n.name.clone().unwrap_or_else(|| n.destination.clone());
                let named_by_arguments = strings
                    .iter()
                    .any(|(_, v)| v.to_ascii_lowercase().contains(&name.to_ascii_lowercase()));
                Some((
                    Host {
                        internal: internal(n.name.as_deref(), &n.destination),
                        named_by_arguments,
                        name,
                    },
                    n,
                    o,
                ))
            })
            .collect();
        if c.returned_fetched {
            let reached: Vec<String> = hosts
                .iter()
                .map(|(h, _, _)| h.name.clone())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            let chosen = hosts.iter().any(|(h, _, _)| h.named_by_arguments);
            seen.fetched.push((
                Evidence {
                    firm: true,
                    ..Evidence::plain(
                        c.label(),
                        format!(
                            "its result held what the network's stand-in site served{}{}",
                            if reached.is_empty() {
                                String::new()
                            } else {
                                format!(" (the call reached {})", reached.join(", "))
                            },
                            if chosen {
                                "; the arguments named the host"
                            } else {
                                ""
                            }
                        ),
                    )
                },
                hosts
                    .iter()
                    .map(|(h, _, _)| Host {
                        name: h.name.clone(),
                        internal: h.internal,
                        named_by_arguments: h.named_by_arguments,
                    })
                    .collect(),
                c.result_labels.clone(),
            ));
        }
        for (host, n, o) in hosts {
            if n.kind == NetKind::Dns {
                continue;
            }
            let bytes = n.carried.bytes();
            let Some((argument, _)) = strings
                .iter()
                .filter(|(_, v)| !v.eq_ignore_ascii_case(&host.name))
                .find(|(_, v)| carries(bytes, v))
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

/// The labels the observations support: a returned credential is `credentials`, fetched data
/// a public (or internal) source, an argument sent to a host a public (or internal)
/// destination, none sent and nothing written `ephemeral`; the outcomes from what the calls
/// changed.
fn supported(
    tool: &ToolDecl,
    run: &ToolRun,
    coverage: &Coverage,
    seen: &Seen,
) -> Vec<SupportedLabel> {
    let labels = &tool.labels;
    let mut out = Vec::new();
    let mut add = |label: &'static str,
                   values: Vec<&str>,
                   basis: SupportBasis,
                   declared: &Option<Vec<String>>,
                   reason: String| {
        let values: Vec<String> = values.into_iter().map(str::to_string).collect();
        // What only fits the calls made never narrows a declaration; what was seen changes
        // it only where the declared set lacks it.
        if basis != SupportBasis::Observed && declared.is_some() {
            return;
        }
        let changed = declared
            .as_ref()
            .is_none_or(|d| !values.iter().all(|v| d.contains(v)));
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
            vec!["credentials"],
            SupportBasis::Observed,
            &labels.return_sensitivity,
            format!(
                "{} result(s) carried a planted credential",
                results(seen.returned.iter().map(|(e, _, _)| e))
            ),
        );
    }
    if !seen.fetched.is_empty() {
        let internal_only = seen
            .fetched
            .iter()
            .all(|(_, hosts, _)| !hosts.is_empty() && hosts.iter().all(|h| h.internal));
        add(
            "returnMetadata.source",
            vec![if internal_only {
                "internal"
            } else {
                "untrustedPublic"
            }],
            SupportBasis::Observed,
            &labels.return_source,
            format!(
                "{} result(s) held data fetched from {}",
                seen.fetched.len(),
                if internal_only {
                    "internal hosts"
                } else {
                    "the network"
                }
            ),
        );
    }
    let wrote = run
        .calls
        .iter()
        .any(|c| c.observations.iter().any(|o| o.is_write() && c.counts(o)));
    if !seen.sent.is_empty() {
        let internal_only = seen.sent.iter().all(|(_, h)| h.internal);
        add(
            "inputMetadata.destination",
            vec![if internal_only { "internal" } else { "public" }],
            SupportBasis::Observed,
            &labels.input_destination,
            format!(
                "an argument's value was sent to {}",
                describe_hosts(&seen.sent, &[])
            ),
        );
    } else if seen.succeeded && coverage.network.is_some() && !wrote {
        add(
            "inputMetadata.destination",
            vec!["ephemeral"],
            SupportBasis::Consistent,
            &labels.input_destination,
            "no call sent an argument's value anywhere or wrote anything".into(),
        );
    }
    let destroyed = run.calls.iter().any(|c| {
        c.observations
            .iter()
            .any(|o| o.is_destructive() && c.counts(o))
    });
    if destroyed || wrote {
        add(
            "inputMetadata.outcomes",
            vec![if destroyed {
                "irreversible"
            } else {
                "consequential"
            }],
            SupportBasis::Observed,
            &labels.input_outcomes,
            if destroyed {
                "a call deleted or overwrote data".into()
            } else {
                "a call changed files that last".into()
            },
        );
    } else if seen.succeeded && coverage.files.is_some() && seen.sent.is_empty() {
        // Input sent to a service may change state there, which no observer sees.
        add(
            "inputMetadata.outcomes",
            vec!["benign"],
            SupportBasis::Consistent,
            &labels.input_outcomes,
            "no call changed anything that was watched".into(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::testing::*;
    use crate::evidence::{FileEffectKind, Mechanism, SecretSighting};
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
        j.verdicts
            .iter()
            .find(|v| v.label == label)
            .unwrap_or_else(|| panic!("no verdict on {label}: {:?}", j.verdicts))
    }

    #[test]
    fn a_credential_in_a_result_contradicts_a_sensitivity_without_credentials() {
        let t = tool(json!({"returnMetadata": {"source": "system", "sensitivity": "none"}}));
        let j = judge(
            &t,
            &run(vec![call(1, ok(), vec![returned(false)])]),
            &full_coverage(),
            true,
        );
        let v = verdict(&j, "returnMetadata.sensitivity");
        assert_eq!(v.verdict, Verdict::Contradicted, "{v:?}");
        assert_eq!(j.findings[0].severity, Severity::Error);
        assert_eq!(j.findings[0].audit, "data-labels");
        // Asked for by path: still wrong, but only a warning.
        let j = judge(
            &t,
            &run(vec![call(1, ok(), vec![returned(true)])]),
            &full_coverage(),
            true,
        );
        assert_eq!(j.findings[0].severity, Severity::Warning);
        // Declared: consistent; and the suggestion says credentials.
        let honest = tool(
            json!({"returnMetadata": {"source": "system", "sensitivity": ["user", "credentials"]}}),
        );
        let j = judge(
            &honest,
            &run(vec![call(1, ok(), vec![returned(false)])]),
            &full_coverage(),
            true,
        );
        assert_eq!(
            verdict(&j, "returnMetadata.sensitivity").verdict,
            Verdict::Consistent
        );
        assert!(j.findings.is_empty());
        assert!(
            j.supported
                .iter()
                .any(|s| s.label == "returnMetadata.sensitivity" && s.values == ["credentials"])
        );
        // Nothing returned: consistent; no canaries: unexercised.
        let j = judge(
            &t,
            &run(vec![call(1, ok(), vec![])]),
            &full_coverage(),
            true,
        );
        assert_eq!(
            verdict(&j, "returnMetadata.sensitivity").verdict,
            Verdict::Consistent
        );
        let j = judge(
            &t,
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
    fn a_result_labelled_not_sensitive_that_carries_a_credential_is_an_error() {
        let t = tool(json!({}));
        let mut c = call(1, ok(), vec![returned(true)]);
        c.result_labels = crate::mcp::labels::result_labels(
            &json!({"content": [], "_meta": {TRUST_EXTENSION: {"sensitive": false}}}),
        );
        let j = judge(&t, &run(vec![c]), &full_coverage(), true);
        let v = verdict(&j, "result sensitivity");
        assert_eq!(v.verdict, Verdict::Contradicted, "{v:?}");
        assert_eq!(j.findings[0].severity, Severity::Error);
        assert!(v.evidence[0].text.contains("sensitive: false"), "{v:?}");
        let mut c = call(1, ok(), vec![returned(false)]);
        c.result_labels = crate::mcp::labels::result_labels(
            &json!({"content": [], "_meta": {TRUST_EXTENSION: {"sensitive": true}}}),
        );
        let j = judge(&t, &run(vec![c]), &full_coverage(), true);
        assert_eq!(
            verdict(&j, "result sensitivity").verdict,
            Verdict::Consistent
        );
    }

    #[test]
    fn an_argument_sent_to_a_public_name_contradicts_an_internal_destination() {
        let t = tool(
            json!({"inputMetadata": {"destination": "internal", "sensitivity": "user", "outcomes": "consequential"}}),
        );
        let mut c = call(
            1,
            ok(),
            vec![sent(
                "api.notes.test",
                b"POST /v1 HTTP/1.1\r\n\r\n{\"text\":\"quarterly plan draft\"}",
            )],
        );
        c.arguments = json!({"text": "quarterly plan draft"});
        let j = judge(&t, &run(vec![c.clone()]), &full_coverage(), true);
        let v = verdict(&j, "inputMetadata.destination");
        assert_eq!(v.verdict, Verdict::Contradicted, "{v:?}");
        assert!(v.reason.contains("api.notes.test (a public name)"), "{v:?}");
        assert!(
            v.evidence[0].text.contains("carrying argument `text`"),
            "{v:?}"
        );
        assert!(
            j.supported
                .iter()
                .any(|s| s.label == "inputMetadata.destination" && s.values == ["public"])
        );
        // The same to an internal name: as declared.
        let mut c2 = call(
            1,
            ok(),
            vec![sent("sync.corp.internal", b"text=quarterly+plan+draft")],
        );
        c2.arguments = c.arguments.clone();
        let j = judge(&t, &run(vec![c2]), &full_coverage(), true);
        assert_eq!(
            verdict(&j, "inputMetadata.destination").verdict,
            Verdict::Consistent
        );
        // A fetch whose URL only names its host sends no argument's value.
        let mut c3 = call(
            1,
            ok(),
            vec![sent(
                "docs.example.test",
                b"GET /page HTTP/1.1\r\nHost: docs.example.test\r\n\r\n",
            )],
        );
        c3.arguments = json!({"url": "https://docs.example.test/page?x=1"});
        let j = judge(&t, &run(vec![c3]), &full_coverage(), true);
        assert_eq!(
            verdict(&j, "inputMetadata.destination").verdict,
            Verdict::Consistent
        );
    }

    #[test]
    fn fetched_data_needs_a_public_source_and_a_chosen_host_an_untrusted_one() {
        let page = |name: &str, url: &str| {
            let mut c = call(1, ok(), vec![sent(name, b"GET / HTTP/1.1\r\n\r\n")]);
            c.arguments = json!({"url": url});
            c.returned_fetched = true;
            c
        };
        let system = tool(json!({"returnMetadata": {"source": "system", "sensitivity": "none"}}));
        let j = judge(
            &system,
            &run(vec![page("news.test", "https://news.test/")]),
            &full_coverage(),
            true,
        );
        assert_eq!(
            verdict(&j, "returnMetadata.source").verdict,
            Verdict::Contradicted
        );
        let trusted =
            tool(json!({"returnMetadata": {"source": "trustedPublic", "sensitivity": "none"}}));
        let j = judge(
            &trusted,
            &run(vec![page("news.test", "https://news.test/")]),
            &full_coverage(),
            true,
        );
        assert_eq!(
            verdict(&j, "returnMetadata.source").verdict,
            Verdict::Contradicted
        );
        // The server's own API host, not the caller's choice: trustedPublic is its call.
        let j = judge(
            &trusted,
            &run(vec![page("api.weather.test", "Paris")]),
            &full_coverage(),
            true,
        );
        assert_eq!(
            verdict(&j, "returnMetadata.source").verdict,
            Verdict::Consistent
        );
        let internal =
            tool(json!({"returnMetadata": {"source": "internal", "sensitivity": "none"}}));
        let j = judge(
            &internal,
            &run(vec![page(
                "wiki.corp.internal",
                "https://wiki.corp.internal/",
            )]),
            &full_coverage(),
            true,
        );
        assert_eq!(
            verdict(&j, "returnMetadata.source").verdict,
            Verdict::Consistent
        );
        assert!(
            j.supported
                .iter()
                .any(|s| s.label == "returnMetadata.source" && s.values == ["internal"])
        );
    }

    #[test]
    fn benign_outcomes_are_judged_as_read_only() {
        let t = tool(
            json!({"inputMetadata": {"destination": "user", "sensitivity": "user", "outcomes": "benign"}}),
        );
        let c = call(
            1,
            ok(),
            vec![file("$WORKSPACE/notes.md", FileEffectKind::Created)],
        );
        let j = judge(&t, &run(vec![c]), &full_coverage(), true);
        let v = verdict(&j, "inputMetadata.outcomes");
        assert_eq!(v.verdict, Verdict::Contradicted, "{v:?}");
        assert!(
            v.reason.starts_with("judged as readOnlyHint: true"),
            "{v:?}"
        );
        assert_eq!(j.findings[0].severity, Severity::Error);
        assert!(
            j.supported
                .iter()
                .any(|s| s.label == "inputMetadata.outcomes" && s.values == ["consequential"])
        );
        let consequential = tool(
            json!({"inputMetadata": {"destination": "user", "sensitivity": "user", "outcomes": ["benign", "consequential"]}}),
        );
        let c = call(
            1,
            ok(),
            vec![file("$WORKSPACE/notes.md", FileEffectKind::Deleted)],
        );
        let j = judge(&consequential, &run(vec![c]), &full_coverage(), true);
        assert_eq!(
            verdict(&j, "inputMetadata.outcomes").verdict,
            Verdict::Contradicted
        );
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
