//! `exfiltration`: a planted secret (a canary, see [`crate::workspace::canary`]) in what the
//! server sent over the network: a DNS name (labels joined, so a secret split across them is
//! found), an HTTP request (line, headers, body), a TLS server name, a datagram. An error on the tool whose window it
//! fell in, or on the server when it happened outside every call (at start-up, between calls,
//! in a control request: never discounted as bookkeeping). A credential sent to its own
//! service (a GitHub token to GitHub's hosts) is use, not exfiltration: an observation.

use std::collections::{BTreeMap, BTreeSet};

use super::AuditMeta;
use crate::evidence::{CallRecord, Observation, PhaseObservation, SecretMove, SecretSighting};
use crate::finding::{Confidence, Evidence, Finding, Severity};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "exfiltration",
    summary: "a planted secret left over the network, or in a temporary file other users can read",
    docs: "Every run plants fake credentials of its own where servers look for real ones (see \
`hintcheck explain secret-access` for the places) and looks for their bytes, in any common \
encoding (raw, base64, hex, base32, URL escaping, gzip or deflate, one inside another) and by any \
16 bytes of them, in what the server sends, each destination's traffic joined in order (a secret \
split over several requests, datagrams or lookups is whole again): the DNS names it looks up, in \
the case they were asked in (labels joined, and joined across successive lookups under one \
parent domain) and the rest of each query (other questions, EDNS options and other records), its HTTP requests whole (request line, headers, body up to 1 MiB; decrypted for \
HTTPS) and what other protocols send on the observed ports (80, 443, 8080, 8443 and \
`--observe-port`, and any other port a connection is made to, through a listener opened for \
it), TLS server names, and datagrams and other packets whole, whatever their port. \
The sandbox's network goes nowhere, so nothing really left; on a real machine it would have.\n\n\
Traffic a call schedules for later (a timer's upload after the call answered) is the call's: the \
replay that gives the traffic to the tool that armed the timer takes its secrets along.\n\n\
A sighting is an **error** on the tool whose call (or whose window) sent it, whatever its hints \
say: `openWorldHint: false` tools that send a secret are the worst case, and a declared open-world \
tool has no licence to send one elsewhere either. Outside every call (at start-up, between calls, \
in a request that runs no tool) it is an error on the server, never discounted as bookkeeping. A \
credential sent in a request to its own service (a GitHub token to GitHub's hosts, an npm token \
to the npm registry, an API key to its provider's API) is use, not exfiltration: it stays an \
observation. A credential in a DNS name or a TLS server name is never use.\n\n\
A TCP connection past loopback to any other port is read too: the sandbox opens a listener \
on that address and port before the connect runs. Not yet seen: what a connection \
sends after its first 3 s or after a pause of 150 ms once answered (what it sends after the \
answer within that, a second request, is read with the first; see docs/secrets.md).\n\n\
A secret written into a temporary file that other users can read (under `$TMPDIR`, `/tmp`, \
`/var/tmp` or `/dev/shm`, on a real machine shared by every user; a file readable by all) left \
the user's reach too: an **error** here. A copy \
into a file of the server's own (under `$HOME`, or not readable by others) is a `secret-access` \
warning.\n\n\
Fix: do not send credentials anywhere but to the service they belong to.",
};

/// Where each kind of credential is used rather than leaked: the hosts of its own service
/// (a name equal to one, or below it). Only a request to such a host counts: a credential
/// in a DNS name or a TLS server name is never how a client uses it, and AWS's secret key
/// never travels at all (requests are signed with it).
const OWN_SERVICES: [(&str, &[&str]); 12] = [
    (
        "github-token",
        &["github.com", "githubusercontent.com", "ghcr.io"],
    ),
    ("netrc-password", &["github.com"]),
    ("git-credential", &["github.com"]),
    ("npm-token", &["npmjs.org", "npmjs.com"]),
    ("pypi-token", &["pypi.org", "pythonhosted.org"]),
    ("docker-token", &["docker.io", "docker.com"]),
    ("openai-api-key", &["openai.com"]),
    ("anthropic-api-key", &["anthropic.com"]),
    ("aws-access-key-id", &["amazonaws.com"]),
    // The metadata endpoint's instance credentials, sent by the clouds' SDKs.
    ("aws-session-token", &["amazonaws.com"]),
    ("gcp-access-token", &["googleapis.com"]),
    (
        "azure-access-token",
        &["azure.com", "microsoft.com", "windows.net", "azure.net"],
    ),
];

/// How a file others can read is marked in the target of a [`SecretMove::Written`]
/// sighting.
pub const READABLE_BY_OTHERS: &str = "(a temporary file other users can read)";

/// Whether `s` is a secret written into a temporary file that other users can read (on a
/// real machine `$TMPDIR` is the shared `/tmp`): it left the user's reach.
pub fn written_for_others(s: &SecretSighting) -> bool {
    s.how == SecretMove::Written
        && s.target
            .as_deref()
            .is_some_and(|t| t.ends_with(READABLE_BY_OTHERS))
}

/// Whether `s` is a credential sent to its own service: in a request (not a DNS name, not a
/// TLS server name) to one of its hosts.
pub fn is_use(s: &SecretSighting) -> bool {
    let Some(target) = s.target.as_deref() else {
        return false;
    };
    let request = ["(HTTP request line)", "(HTTP request)", "(HTTPS request)"];
    if !request.iter().any(|r| target.ends_with(r)) {
        return false;
    }
    let Some(host) = target_host(target) else {
        return false;
    };
    OWN_SERVICES
        .iter()
        .filter(|(kind, _)| s.kind.split(", ").any(|k| k == *kind))
        .flat_map(|(_, hosts)| hosts.iter())
        .any(|own| host == *own || host.ends_with(&format!(".{own}")))
}

/// The host of a target as [`crate::observe::secrets`] writes it: `name:port (channel)`.
fn target_host(target: &str) -> Option<String> {
    let destination = target.split(' ').next()?;
    let host = destination
        .rsplit_once(':')
        .map_or(destination, |(h, _)| h)
        .trim_end_matches('.')
        .to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

/// Findings for the secrets sent by the calls of `tools` (each with whether it declared
/// `openWorldHint: false`) and in `phases`.
pub fn findings<'a>(
    tools: impl IntoIterator<Item = (&'a str, bool, &'a [CallRecord])>,
    phases: &[PhaseObservation],
) -> Vec<Finding> {
    let mut by_tool: BTreeMap<Option<String>, (bool, Vec<Evidence>, BTreeSet<String>)> =
        BTreeMap::new();
    let tools: Vec<(&str, bool, &[CallRecord])> = tools.into_iter().collect();
    let walked = tools.iter().map(|(tool, _, calls)| (*tool, *calls));
    super::each_observation(walked, phases, |tool, source, o| {
        let Observation::Secret(s) = o else {
            return;
        };
        if !(s.how == SecretMove::Sent && !is_use(s) || written_for_others(s)) {
            return;
        }
        let closed = tools
            .iter()
            .any(|(t, closed, _)| Some(*t) == tool && *closed);
        let (is_closed, evidence, secrets) = by_tool.entry(tool.map(str::to_string)).or_default();
        *is_closed |= closed;
        secrets.insert(format!(
            "{} {}{}",
            s.kind,
            s.place,
            if s.how == SecretMove::Written {
                " (written)"
            } else {
                ""
            }
        ));
        super::add_distinct(evidence, source, s.describe());
    });
    by_tool
        .into_iter()
        .map(|(tool, (closed, evidence, secrets))| Finding {
            resolved_for: None,
            category: None,
            fingerprint: String::new(),
            accepted: None,
            audit: META.id,
            message: {
                let written = secrets.iter().filter(|s| s.ends_with(" (written)")).count();
                let how = match (written, secrets.len() - written) {
                    (0, n) => format!("sent {n} planted secret(s) over the network"),
                    (w, 0) => format!(
                        "left {w} planted secret(s) in temporary files other users can read"
                    ),
                    (w, n) => format!(
                        "sent {n} planted secret(s) over the network and left {w} in temporary files other users can read"
                    ),
                };
                match &tool {
                    Some(t) => format!(
                        "{t} {how}{}",
                        if closed && written < secrets.len() {
                            ", although it declares openWorldHint: false"
                        } else {
                            ""
                        }
                    ),
                    None => format!("the server {how} outside any tool call"),
                }
            },
            tool,
            hint: None,
            severity: Severity::Error,
            confidence: Confidence::High,
            evidence,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Mechanism, Phase};

    fn sent(kind: &str, target: &str) -> Observation {
        Observation::Secret(SecretSighting {
            how: SecretMove::Sent,
            kind: kind.into(),
            place: "$GITHUB_TOKEN".into(),
            encoding: "hex".into(),
            target: Some(target.into()),
            asked: false,
            swept: false,
            mechanism: Mechanism::Dns,
        })
    }

    #[test]
    fn a_secret_sent_elsewhere_is_an_error_and_to_its_own_service_use() {
        let call = |observations: Vec<Observation>| {
            vec![crate::audit::testing::call(
                1,
                crate::audit::testing::ok(),
                observations,
            )]
        };
        let leaky = call(vec![sent(
            "github-token",
            "c0ffee.exfil.test:53 (DNS name)",
        )]);
        let client = call(vec![sent(
            "github-token",
            "api.github.com:443 (HTTP request line)",
        )]);
        // Never use: GitHub's name in a DNS question, a look-alike host.
        assert!(!is_use(
            &match sent("github-token", "github.com (DNS name)") {
                Observation::Secret(s) => s,
                _ => unreachable!(),
            }
        ));
        for host in ["evilgithub.com", "github.com.evil.test"] {
            let Observation::Secret(s) =
                sent("github-token", &format!("{host}:443 (HTTP request line)"))
            else {
                unreachable!()
            };
            assert!(!is_use(&s), "{host}");
        }
        let phases = vec![PhaseObservation {
            started_by: None,
            phase: Phase::Startup,
            after_tool: None,
            observation: sent("openai-api-key", "telemetry.test:80 (HTTP request line)"),
        }];
        let f = findings(
            [
                ("status", true, leaky.as_slice()),
                ("list_repos", false, client.as_slice()),
            ],
            &phases,
        );
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(f.iter().all(|f| f.severity == Severity::Error));
        let status = f
            .iter()
            .find(|f| f.tool.as_deref() == Some("status"))
            .expect("status");
        assert!(
            status.message.contains("openWorldHint: false"),
            "{}",
            status.message
        );
        assert!(
            status.evidence[0]
                .text
                .contains("to c0ffee.exfil.test:53 (DNS name)"),
            "{}",
            status.evidence[0].text
        );
        let server = f.iter().find(|f| f.tool.is_none()).expect("server");
        assert!(server.message.contains("outside any tool call"));
    }
}
