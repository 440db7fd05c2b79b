//! `secret-access`: tools that handed a planted secret (a canary, see
//! [`crate::workspace::canary`]) on: in their result, where it goes to the model and its
//! provider (an error), or in the arguments of a program they started (a warning). A file
//! reader asked for the canary's very file, by path, only did what it was told: that stays an
//! observation of the call. A tool that opened or read a file holding a canary is a warning
//! (many have a reason to use a credential; the user should know which do), unless the file
//! is one that well-known libraries read on their own ([`IMPLICIT_LOOKUPS`]). Sightings
//! outside every call (start-up, between calls) are the server's: one finding per kind of
//! sighting (reads a note, programs given a secret a warning).

use std::collections::BTreeMap;

use super::AuditMeta;
use crate::evidence::{CallRecord, Observation, PhaseObservation, SecretMove};
use crate::finding::{Confidence, Evidence, Finding, Severity};

/// Metadata.
pub const META: AuditMeta = AuditMeta {
    id: "secret-access",
    summary: "a tool handed on a planted secret (in its result, to a program it started) or read one",
    docs: "Every run plants fake credentials of its own where servers and the libraries they use \
look for real ones: SSH keys (`~/.ssh/id_rsa`, `id_ed25519`), `~/.aws/credentials`, \
`~/.config/gh/hosts.yml`, `~/.netrc`, `~/.git-credentials`, `~/.docker/config.json`, \
`~/.kube/config`, `~/.npmrc`, `~/.pypirc`, a `.env` in the workspace, and the variables \
`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `GITHUB_TOKEN`, `OPENAI_API_KEY` and \
`ANTHROPIC_API_KEY`, and the instance credentials the cloud metadata endpoint (169.254.169.254, \
answered inside the sandbox as AWS's, Google Cloud's and Azure's) hands out. Each value is new for each run (from its seed) and recognised in any common \
encoding (raw, base64, hex, base32, URL or JSON escaping, gzip or deflate, one inside another) and \
by any 16 bytes of it. `--no-canaries` plants none; the sandbox's home is its own, so the real \
user's secrets are never there to be read.\n\n\
A tool whose result carries a canary that its arguments did not is an **error**: the secret went \
to the model and its provider, and from there into logs and transcripts. A file reader that was \
asked for the canary's own file by path (`read_file` given `.env`) did what it was told: that \
call keeps the sighting as an observation, not a finding. A tool that passed a canary to a \
program it started, in that program's arguments (visible to every process on the machine; \
sometimes the only way a command-line client takes a token) or in its environment under a name \
of its choosing (a variable inherited as planted, or a line of `.env` a server loaded at start, \
is nobody's doing), is a **warning**, and so is one that copied a canary into a file of its own \
outside the workspace (a token cached under `$HOME`; a temporary file other users can read is \
`exfiltration`). Programs given a canary \
outside every tool call (at start-up, between calls) are the server's: one warning for all.\n\n\
A tool that opened or read a file holding a canary is a **warning**: many tools have a reason to \
use a credential, and the user should know which do. Not counted: the files well-known libraries \
read on their own (`~/.netrc`, the AWS SDKs' `~/.aws/credentials`, git's \
`~/.git-credentials`, npm's `~/.npmrc`, the clouds' SDKs' metadata endpoint), a file the call asked for by path, and a workspace \
secret read in the same window as the workspace's ordinary files (a search or a sync reads \
`.env` with everything else; the run plants a `.env.example` beside it to tell the two apart). \
Such reads stay observations of the call. Reads outside every call (a library loading `.env` at \
start-up) are one note for the server. A tool whose definition (as listed) carries a canary is \
an **error**: the listing went to the model.\n\n\
Fix: return what the user asked for, not the credentials the server found; pass tokens to \
programs on their standard input or in their environment rather than in their arguments (the \
environment is still reported: the user should know which tools hand credentials on).",
};

/// What one tool (or the server outside the calls) did with secrets.
#[derive(Default)]
struct Handed {
    returned: Vec<Evidence>,
    passed: Vec<Evidence>,
    read: Vec<Evidence>,
    copied: Vec<Evidence>,
    /// The secrets (kind and place) returned, passed and read: what the messages count.
    returned_secrets: std::collections::BTreeSet<(String, String)>,
    passed_secrets: std::collections::BTreeSet<(String, String)>,
    read_secrets: std::collections::BTreeSet<(String, String)>,
    copied_secrets: std::collections::BTreeSet<(String, String)>,
}

/// The files that well-known libraries read on their own, for every request or client they
/// make: `~/.netrc` (HTTP clients: curl, Python's requests), the AWS SDKs' credential chain,
/// git's stored credentials (its `store` helper), npm's configuration (every `npm` and `npx`
/// and the libraries that load it), and the cloud metadata endpoint (the AWS, Google Cloud
/// and Azure SDKs ask it for the instance's credentials). A read of them is an observation
/// of the call, not a finding, unless the content then moves.
pub const IMPLICIT_LOOKUPS: [&str; 5] = [
    "~/.netrc",
    "~/.aws/credentials",
    "~/.git-credentials",
    "~/.npmrc",
    crate::observe::metadata::PLACE,
];

/// What the places read are: files, or files and the metadata endpoint.
fn places_noun(read: &std::collections::BTreeSet<(String, String)>) -> &'static str {
    if read
        .iter()
        .all(|(_, place)| place.starts_with("~/") || place.starts_with('$'))
    {
        "file(s)"
    } else {
        "place(s)"
    }
}

/// Findings for the sightings of planted secrets in the calls of `tools` and in `phases`.
pub fn findings<'a>(
    tools: impl IntoIterator<Item = (&'a str, &'a [CallRecord])>,
    phases: &[PhaseObservation],
) -> Vec<Finding> {
    let mut by_tool: BTreeMap<Option<String>, Handed> = BTreeMap::new();
    super::each_observation(tools, phases, |tool, source, o| {
        let Observation::Secret(s) = o else {
            return;
        };
        if s.asked
            || s.swept
            || s.how == SecretMove::Sent
            || super::exfiltration::written_for_others(s)
            || (s.how == SecretMove::Read && IMPLICIT_LOOKUPS.contains(&s.place.as_str()))
        {
            return;
        }
        let handed = by_tool.entry(tool.map(str::to_string)).or_default();
        let (list, secrets) = match s.how {
            SecretMove::Returned => (&mut handed.returned, &mut handed.returned_secrets),
            SecretMove::Argv | SecretMove::Env => (&mut handed.passed, &mut handed.passed_secrets),
            SecretMove::Written => (&mut handed.copied, &mut handed.copied_secrets),
            SecretMove::Read | SecretMove::Sent => (&mut handed.read, &mut handed.read_secrets),
        };
        secrets.insert((s.kind.clone(), s.place.clone()));
        super::add_distinct(list, source, s.describe());
    });
    let mut out = Vec::new();
    for (tool, handed) in by_tool {
        let who = tool.clone().unwrap_or_else(|| "the server".into());
        if !handed.returned.is_empty() {
            out.push(finding(
                &tool,
                Severity::Error,
                format!(
                    "{who} returned {} planted secret(s) in its result: they went to the model",
                    handed.returned_secrets.len()
                ),
                handed.returned,
            ));
        }
        if !handed.read.is_empty() {
            // A tool's reads are worth knowing (many have a reason to use a credential); the
            // server's own outside the calls (a library loading `.env` at start-up) less so.
            let (severity, message) = match &tool {
                Some(t) => (
                    Severity::Warning,
                    format!(
                        "{t} read {} {} holding planted secrets",
                        handed.read_secrets.len(),
                        places_noun(&handed.read_secrets)
                    ),
                ),
                None => (
                    Severity::Note,
                    format!(
                        "the server read {} {} holding planted secrets outside any tool call (at start-up or between calls)",
                        handed.read_secrets.len(),
                        places_noun(&handed.read_secrets)
                    ),
                ),
            };
            out.push(finding(&tool, severity, message, handed.read));
        }
        if !handed.copied.is_empty() {
            out.push(finding(
                &tool,
                Severity::Warning,
                format!(
                    "{who} copied {} planted secret(s) into files of its own outside the workspace{}",
                    handed.copied_secrets.len(),
                    if tool.is_none() {
                        ", outside any tool call"
                    } else {
                        ""
                    }
                ),
                handed.copied,
            ));
        }
        if !handed.passed.is_empty() {
            let when = if tool.is_none() {
                ", outside any tool call"
            } else {
                ""
            };
            let said = |how: &str| handed.passed.iter().any(|e| e.text.ends_with(how));
            let how = match (said("in its arguments"), said("in its environment")) {
                (true, true) => "in their arguments and environment",
                (false, true) => "in their environment",
                _ => "in their arguments",
            };
            out.push(finding(
                &tool,
                Severity::Warning,
                format!(
                    "{who} passed {} planted secret(s) to programs {how}{when}",
                    handed.passed_secrets.len()
                ),
                handed.passed,
            ));
        }
    }
    out
}

/// Findings for tools whose definitions (as listed) carry planted secrets: `(tool, [(kind,
/// place)])`. The listing goes to the model, and a schema's `default` would come back as an
/// argument, where a result's echo of it would pass unnoticed.
pub fn listing_findings(found: Vec<(String, Vec<(&str, &str)>)>) -> Vec<Finding> {
    found
        .into_iter()
        .map(|(tool, canaries)| {
            let evidence = canaries
                .iter()
                .map(|(kind, place)| {
                    Evidence::plain(
                        "tools/list",
                        format!("its definition carries the planted {kind} from {place}"),
                    )
                })
                .collect::<Vec<_>>();
            finding(
                &Some(tool.clone()),
                Severity::Error,
                format!(
                    "{tool}'s definition carries {} planted secret(s): the listing hands them to the model",
                    evidence.len()
                ),
                evidence,
            )
        })
        .collect()
}

fn finding(
    tool: &Option<String>,
    severity: Severity,
    message: String,
    evidence: Vec<Evidence>,
) -> Finding {
    Finding {
        resolved_for: None,
        category: None,
        fingerprint: String::new(),
        accepted: None,
        audit: META.id,
        message,
        tool: tool.clone(),
        hint: None,
        severity,
        confidence: Confidence::High,
        evidence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Mechanism, Phase, SecretSighting};

    fn sighting(how: SecretMove, place: &str, asked: bool) -> Observation {
        Observation::Secret(SecretSighting {
            how,
            kind: "github-token".into(),
            place: place.into(),
            encoding: "base64".into(),
            target: (how == SecretMove::Argv).then(|| "/usr/bin/gh".into()),
            asked,
            swept: false,
            mechanism: Mechanism::Result,
        })
    }

    #[test]
    fn a_result_is_an_error_a_program_a_warning_and_an_asked_for_file_nothing() {
        let call = |number: usize, observations: Vec<Observation>| {
            crate::audit::testing::call(number, crate::audit::testing::ok(), observations)
        };
        let leaky = vec![
            call(
                1,
                vec![sighting(SecretMove::Returned, "$GITHUB_TOKEN", false)],
            ),
            call(
                2,
                vec![sighting(SecretMove::Returned, "$GITHUB_TOKEN", false)],
            ),
        ];
        let reader = vec![call(
            1,
            vec![sighting(SecretMove::Returned, "$WORKSPACE/.env", true)],
        )];
        let runner = vec![call(
            1,
            vec![sighting(SecretMove::Argv, "~/.config/gh/hosts.yml", false)],
        )];
        let phases = vec![PhaseObservation {
            started_by: None,
            phase: Phase::Startup,
            after_tool: None,
            observation: sighting(SecretMove::Argv, "$GITHUB_TOKEN", false),
        }];
        let f = findings(
            [
                ("leaky", leaky.as_slice()),
                ("read_file", reader.as_slice()),
                ("run", runner.as_slice()),
            ],
            &phases,
        );
        let of = |tool: Option<&str>| {
            f.iter()
                .find(|f| f.tool.as_deref() == tool)
                .unwrap_or_else(|| panic!("{tool:?}: {f:?}"))
        };
        assert_eq!(f.len(), 3, "{f:?}");
        let leaky = of(Some("leaky"));
        assert_eq!(leaky.severity, Severity::Error);
        assert_eq!(leaky.evidence.len(), 1, "the same sighting once");
        assert_eq!(leaky.evidence[0].source, "call 1 (attempt 1)");
        assert!(
            leaky.evidence[0]
                .text
                .contains("github-token from $GITHUB_TOKEN (base64)"),
            "{}",
            leaky.evidence[0].text
        );
        assert_eq!(of(Some("run")).severity, Severity::Warning);
        let server = of(None);
        assert_eq!(server.severity, Severity::Warning);
        assert!(
            server.message.contains("outside any tool call"),
            "{}",
            server.message
        );
        assert!(!f.iter().any(|f| f.tool.as_deref() == Some("read_file")));
    }

    #[test]
    fn reads_are_warnings_but_a_librarys_look_up_or_a_sweep_and_the_start_up_a_note() {
        let read = |place: &str, swept: bool| {
            Observation::Secret(SecretSighting {
                how: SecretMove::Read,
                kind: "ssh-private-key".into(),
                place: place.into(),
                encoding: "read".into(),
                target: None,
                asked: false,
                swept,
                mechanism: Mechanism::Notify,
            })
        };
        let call = |observations: Vec<Observation>| {
            vec![crate::audit::testing::call(
                1,
                crate::audit::testing::ok(),
                observations,
            )]
        };
        let loader = call(vec![read("~/.ssh/id_rsa", false)]);
        let client = call(vec![read("~/.netrc", false), read("~/.npmrc", false)]);
        let search = call(vec![read("$WORKSPACE/.env", true)]);
        let phases = vec![PhaseObservation {
            started_by: None,
            phase: Phase::Startup,
            after_tool: None,
            observation: read("$WORKSPACE/.env", false),
        }];
        let f = findings(
            [
                ("load_key", loader.as_slice()),
                ("fetch", client.as_slice()),
                ("search", search.as_slice()),
            ],
            &phases,
        );
        assert_eq!(f.len(), 2, "{f:?}");
        assert_eq!(f[0].tool, None);
        assert_eq!(f[0].severity, Severity::Note);
        assert!(
            f[0].message.contains("outside any tool call"),
            "{}",
            f[0].message
        );
        assert_eq!(f[1].tool.as_deref(), Some("load_key"));
        assert_eq!(f[1].severity, Severity::Warning);
    }
}
