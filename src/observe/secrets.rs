//! Where the run's planted secrets (its canaries, [`crate::workspace::canary`]) turn up: in a
//! tool's result (the secret went to the model) and in the arguments of a program the server
//! started. Each sighting becomes an [`Observation::Secret`] naming the canary's kind and
//! place and how its bytes were carried, never its value.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::reads::SecretFile;
use crate::evidence::{Mechanism, Observation, SecretMove, SecretSighting};
use crate::workspace::canary::{Base, Canaries, Canary, Detector};

/// A run's canaries and the detector of their values.
#[derive(Debug)]
pub struct SecretWatch {
    canaries: Canaries,
    detector: Detector,
}

impl SecretWatch {
    /// Watches for `canaries`.
    pub fn new(canaries: Canaries) -> SecretWatch {
        let detector = canaries.detector();
        SecretWatch { canaries, detector }
    }

    /// The canaries planted.
    pub fn canaries(&self) -> &Canaries {
        &self.canaries
    }

    /// The workspace files planted, relative to the workspace (`.env`).
    pub fn workspace_files(&self) -> Vec<String> {
        self.canaries
            .files
            .iter()
            .filter(|f| f.base == Base::Workspace)
            .map(|f| f.rel.to_string())
            .collect()
    }

    /// The files planted in the workspace beside its secrets that hold none (`.env.example`):
    /// a window that reads one of them as well as a secret swept the workspace.
    pub fn decoy_files(&self, workspace: &Path) -> Vec<PathBuf> {
        self.canaries
            .files
            .iter()
            .filter(|f| f.base == Base::Workspace && !f.secret)
            .map(|f| workspace.join(f.rel))
            .collect()
    }

    /// The files planted that hold a secret, under `home` and `workspace`, each with the
    /// kinds it holds.
    pub fn secret_files(&self, home: &Path, workspace: &Path) -> Vec<SecretFile> {
        self.canaries
            .files
            .iter()
            .filter(|f| f.secret)
            .map(|f| {
                let place = f.place();
                let kinds: Vec<&str> = self
                    .canaries
                    .items
                    .iter()
                    .filter(|c| c.place == place)
                    .map(|c| c.kind)
                    .collect();
                SecretFile {
                    path: match f.base {
                        Base::Home => home.join(f.rel),
                        Base::Workspace => workspace.join(f.rel),
                    },
                    place,
                    kinds: kinds.join(", "),
                }
            })
            .collect()
    }

    /// The canaries in a tool's `result` that its `arguments` did not carry (a tool that
    /// echoes what it was given, a value the explorer learnt from an earlier result, passes
    /// nothing on), each once; `asked` where the arguments named the canary's file.
    pub fn in_result(&self, result: &Value, arguments: &Value) -> Vec<Observation> {
        if self.detector.is_empty() {
            return Vec::new();
        }
        let Ok(bytes) = serde_json::to_vec(result) else {
            return Vec::new();
        };
        let sightings = self.detector.find(&bytes);
        if sightings.is_empty() {
            return Vec::new();
        }
        let given = self.carried_by(arguments);
        let mut strings = Vec::new();
        strings_in(arguments, &mut strings);
        sightings
            .into_iter()
            .filter(|s| !given.contains(&s.canary))
            .filter_map(|s| {
                let canary = self.canaries.items.get(s.canary)?;
                Some(Observation::Secret(SecretSighting {
                    how: SecretMove::Returned,
                    kind: canary.kind.to_string(),
                    place: canary.place.clone(),
                    encoding: s.encoding,
                    target: None,
                    asked: names_file_of(&strings, canary),
                    swept: false,
                    mechanism: Mechanism::Result,
                }))
            })
            .collect()
    }

    /// The canaries (their indices) a call's `arguments` carry.
    fn carried_by(&self, arguments: &Value) -> BTreeSet<usize> {
        serde_json::to_vec(arguments)
            .map(|a| {
                self.detector
                    .find(&a)
                    .into_iter()
                    .map(|s| s.canary)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Settles a call's sightings by its `arguments`: a read of a file they named was asked
    /// for (a file reader told to read `.env` reads it), and a secret they carried that the
    /// server then sent is the explorer's doing (a value it learnt from an earlier result),
    /// not the tool's: dropped.
    pub fn judge_call(&self, observations: &mut Vec<Observation>, arguments: &Value) {
        if !observations
            .iter()
            .any(|o| matches!(o, Observation::Secret(_)))
        {
            return;
        }
        let mut strings = Vec::new();
        strings_in(arguments, &mut strings);
        let given: BTreeSet<(&str, &str)> = self
            .carried_by(arguments)
            .into_iter()
            .filter_map(|i| self.canaries.items.get(i))
            .map(|c| (c.kind, c.place.as_str()))
            .collect();
        observations.retain_mut(|o| {
            let Observation::Secret(s) = o else {
                return true;
            };
            match s.how {
                SecretMove::Read => {
                    s.asked = names_place(&strings, &s.place);
                    true
                }
                SecretMove::Sent | SecretMove::Argv => {
                    !given.contains(&(s.kind.as_str(), s.place.as_str()))
                }
                SecretMove::Returned => true,
            }
        });
    }

    /// Adds a sighting for each canary in what the network events among `observations` carry
    /// past loopback: the names looked up (as asked, and with the labels below the last two
    /// joined, so a secret split across labels is whole again) and the first bytes sent (an
    /// HTTP request line, a TLS server name); each canary once per destination and channel.
    /// A destination is named by its parent domain where its own name holds a secret.
    pub fn in_network(&self, observations: &mut Vec<Observation>) {
        if self.detector.is_empty() {
            return;
        }
        let mut found = Vec::new();
        let mut seen = BTreeSet::new();
        for o in observations.iter() {
            let Observation::Network(n) = o else {
                continue;
            };
            if n.loopback {
                continue;
            }
            let port = n.port.map(|p| format!(":{p}")).unwrap_or_default();
            let mut carried: Vec<(String, String)> = Vec::new();
            if n.kind == crate::evidence::NetKind::Dns {
                for name in n.name.iter().chain(std::iter::once(&n.destination)) {
                    if name.parse::<std::net::IpAddr>().is_ok() {
                        continue;
                    }
                    let labels: Vec<&str> = name.trim_end_matches('.').split('.').collect();
                    let joined = labels[..labels.len().saturating_sub(2)].concat();
                    let target = format!("{} (DNS name)", parent_domain(name));
                    carried.push((name.to_string(), target.clone()));
                    carried.push((joined, target));
                }
            }
            if let Some(payload) = &n.payload {
                let host = n.name.as_deref().unwrap_or(&n.destination);
                let host = if self.detector.find(host.as_bytes()).is_empty() {
                    host.to_string()
                } else {
                    parent_domain(host)
                };
                let channel = if payload.starts_with("TLS") {
                    "TLS"
                } else if payload.starts_with("HTTP") {
                    "HTTP request line"
                } else {
                    "bytes sent"
                };
                carried.push((payload.clone(), format!("{host}{port} ({channel})")));
            }
            for (text, target) in carried {
                let sent = (SecretMove::Sent, target, n.mechanism);
                found.extend(self.sightings_in(text.as_bytes(), sent, &mut seen));
            }
        }
        observations.extend(found);
    }

    /// Adds a sighting for each canary in the arguments of a program started among
    /// `observations`.
    pub fn in_programs(&self, observations: &mut Vec<Observation>) {
        if self.detector.is_empty() {
            return;
        }
        let mut found = Vec::new();
        for o in observations.iter() {
            let Observation::Process(p) = o else {
                continue;
            };
            let argv = p.argv.join("\0");
            let passed = (SecretMove::Argv, p.program.clone(), p.mechanism);
            found.extend(self.sightings_in(argv.as_bytes(), passed, &mut BTreeSet::new()));
        }
        observations.extend(found);
    }

    /// A sighting of each canary in `bytes`, moved as `how` to `target` and seen by
    /// `mechanism`, unless `seen` holds it (with that target) already.
    fn sightings_in(
        &self,
        bytes: &[u8],
        (how, target, mechanism): (SecretMove, String, Mechanism),
        seen: &mut BTreeSet<(usize, String)>,
    ) -> Vec<Observation> {
        self.detector
            .find(bytes)
            .into_iter()
            .filter(|s| seen.insert((s.canary, target.clone())))
            .filter_map(|s| {
                let canary = self.canaries.items.get(s.canary)?;
                Some(Observation::Secret(SecretSighting {
                    how,
                    kind: canary.kind.to_string(),
                    place: canary.place.clone(),
                    encoding: s.encoding,
                    target: Some(target.clone()),
                    asked: false,
                    swept: false,
                    mechanism,
                }))
            })
            .collect()
    }

    /// The canaries in the definitions of the tools a server listed (each definition's
    /// name and the canaries in it, each once): a secret in a description or a schema's
    /// `default` goes to the model with the listing, and would come back as an argument.
    pub fn in_listing<'a>(
        &self,
        definitions: impl IntoIterator<Item = (&'a str, &'a Value)>,
    ) -> Vec<(String, Vec<&Canary>)> {
        if self.detector.is_empty() {
            return Vec::new();
        }
        definitions
            .into_iter()
            .filter_map(|(name, definition)| {
                let bytes = serde_json::to_vec(definition).ok()?;
                let mut seen = BTreeSet::new();
                let found: Vec<&Canary> = self
                    .detector
                    .find(&bytes)
                    .into_iter()
                    .filter(|s| seen.insert(s.canary))
                    .filter_map(|s| self.canaries.items.get(s.canary))
                    .collect();
                (!found.is_empty()).then(|| (name.to_string(), found))
            })
            .collect()
    }
}

/// The last two labels of a name (`exfil.test` of `a1b2.exfil.test`), or the name itself.
fn parent_domain(name: &str) -> String {
    let labels: Vec<&str> = name.trim_end_matches('.').split('.').collect();
    labels[labels.len().saturating_sub(2)..].join(".")
}

/// Every string value in `v` (not the keys: a server's schema names them).
fn strings_in<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings_in(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings_in(x, out)),
        _ => {}
    }
}

/// Whether one of `strings` is, as a whole, a path to the file `canary` is planted in
/// (`.env`, `./.env`, `/…/workspace/.env`, `~/.aws/credentials`, `file:///…/.env`); a
/// command line that mentions one (`cat .env`) is not a request for that file alone.
fn names_file_of(strings: &[&str], canary: &Canary) -> bool {
    names_place(strings, &canary.place)
}

/// Whether one of `strings` is, as a whole, a path to the planted file reports name
/// `place`.
fn names_place(strings: &[&str], place: &str) -> bool {
    let Some(rel) = place
        .strip_prefix("~/")
        .or_else(|| place.strip_prefix("$WORKSPACE/"))
    else {
        return false;
    };
    strings.iter().any(|s| {
        let s = s.trim().trim_end_matches('/');
        !s.contains(char::is_whitespace)
            && s.strip_suffix(rel)
                .is_some_and(|before| before.is_empty() || before.ends_with('/'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn watch() -> SecretWatch {
        SecretWatch::new(Canaries::of(11))
    }

    fn value_of(w: &SecretWatch, place: &str) -> String {
        w.canaries()
            .items
            .iter()
            .find(|c| c.place == place)
            .expect("planted")
            .value
            .clone()
    }

    #[test]
    fn a_result_carrying_a_canary_is_seen_unless_the_arguments_carried_it() {
        let w = watch();
        let token = value_of(&w, "$GITHUB_TOKEN");
        let result = json!({"content": [{"type": "text", "text": format!("token: {token}")}]});
        let seen = w.in_result(&result, &json!({"query": "status"}));
        assert_eq!(seen.len(), 1, "{seen:?}");
        let Observation::Secret(s) = &seen[0] else {
            panic!("{seen:?}")
        };
        assert_eq!(
            (s.how, s.kind.as_str()),
            (SecretMove::Returned, "github-token")
        );
        assert_eq!((s.place.as_str(), s.asked), ("$GITHUB_TOKEN", false));
        assert!(!s.describe().contains(&token), "never the value");
        // An echo of what the call was given is not a secret the tool found.
        assert!(w.in_result(&result, &json!({"text": token})).is_empty());
        // Nothing planted, nothing seen.
        assert!(
            w.in_result(&json!({"text": "plain"}), &json!({}))
                .is_empty()
        );
    }

    #[test]
    fn a_file_reader_given_the_canarys_path_was_asked_for_it() {
        let w = watch();
        let key = value_of(&w, "~/.aws/credentials");
        let result = json!({"content": [{"type": "text", "text": format!("[default]\naws_secret_access_key = {key}\n")}]});
        for (path, asked) in [
            ("/home/u/.aws/credentials", true),
            ("~/.aws/credentials", true),
            (".aws/credentials", true),
            ("/home/u/.aws", false),
            ("/home/u/x.aws/credentials", false),
        ] {
            let seen = w.in_result(&result, &json!({"path": path}));
            let Some(Observation::Secret(s)) = seen.first() else {
                panic!("{path}: {seen:?}")
            };
            assert_eq!(s.asked, asked, "{path}");
        }
    }

    #[test]
    fn a_definition_carrying_a_canary_is_named_and_keys_never_ask() {
        let w = watch();
        let token = value_of(&w, "$GITHUB_TOKEN");
        let listed =
            json!({"name": "sync", "inputSchema": {"properties": {"token": {"default": token}}}});
        let plain = json!({"name": "plain", "description": "reads notes"});
        let found = w.in_listing([("sync", &listed), ("plain", &plain)]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, "sync");
        assert_eq!(found[0].1[0].place, "$GITHUB_TOKEN");
        // A schema's property names are the server's: they never make a call "asked".
        let key = value_of(&w, "~/.aws/credentials");
        let result = json!({"content": [{"type": "text", "text": key}]});
        for arguments in [
            json!({".aws/credentials": "x"}),
            json!({"command": "cat ~/.aws/credentials"}),
        ] {
            let seen = w.in_result(&result, &arguments);
            let Some(Observation::Secret(s)) = seen.first() else {
                panic!("{seen:?}")
            };
            assert!(!s.asked, "{arguments}");
        }
    }

    #[test]
    fn a_secret_in_a_name_split_across_labels_or_in_a_request_line_is_sent() {
        let w = watch();
        let key = value_of(&w, "$AWS_SECRET_ACCESS_KEY");
        let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
        let (a, b) = hex.split_at(40);
        let net = |kind, destination: &str, name: Option<String>, payload: Option<String>| {
            Observation::Network(crate::evidence::NetEvent {
                kind,
                destination: destination.into(),
                port: Some(53),
                name,
                loopback: false,
                mechanism: Mechanism::Dns,
                payload,
            })
        };
        let mut observations = vec![
            net(
                crate::evidence::NetKind::Dns,
                &format!("{a}.{b}.exfil.test"),
                None,
                Some("A".into()),
            ),
            net(
                crate::evidence::NetKind::Connect,
                "192.0.2.9",
                Some("collector.test".into()),
                Some(format!(
                    "HTTP \"GET /c?k={} HTTP/1.1\"",
                    key.replace('/', "%2F")
                )),
            ),
            net(
                crate::evidence::NetKind::Dns,
                "docs.example.test",
                None,
                None,
            ),
        ];
        w.in_network(&mut observations);
        let sent: Vec<String> = observations
            .iter()
            .filter_map(|o| match o {
                Observation::Secret(s) => Some(s.describe()),
                _ => None,
            })
            .collect();
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert!(
            sent[0].contains("(hex) to exfil.test (DNS name)"),
            "{}",
            sent[0]
        );
        assert!(
            sent[1].contains("to collector.test:53 (HTTP request line)"),
            "{}",
            sent[1]
        );
        // Loopback is not the network; a connection to a name holding the secret is named
        // by its parent domain (the report never spells the value), and its name is no DNS
        // question of its own.
        let mut local = net(
            crate::evidence::NetKind::Connect,
            "127.0.0.1",
            None,
            Some(format!("HTTP \"GET /?k={key} HTTP/1.1\"")),
        );
        if let Observation::Network(n) = &mut local {
            n.loopback = true;
        }
        let mut observations = vec![
            local,
            net(
                crate::evidence::NetKind::Connect,
                "192.0.2.9",
                Some(format!("{a}.exfil.test")),
                Some(format!("HTTP \"GET /?k={key} HTTP/1.1\"")),
            ),
        ];
        w.in_network(&mut observations);
        let sent: Vec<String> = observations
            .iter()
            .filter_map(|o| match o {
                Observation::Secret(s) => Some(s.describe()),
                _ => None,
            })
            .collect();
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(
            sent[0].ends_with("to exfil.test:53 (HTTP request line)") && !sent[0].contains(a),
            "{}",
            sent[0]
        );
    }

    #[test]
    fn a_program_given_a_canary_in_its_arguments_is_seen_once() {
        let w = watch();
        let key = value_of(&w, "$OPENAI_API_KEY");
        let mut observations = vec![Observation::Process(crate::evidence::ProcessEvent {
            program: "/usr/bin/curl".into(),
            argv: vec![
                "curl".into(),
                "-H".into(),
                format!("Authorization: Bearer {key}"),
                format!("--data={key}"),
            ],
            pid: 9,
            mechanism: Mechanism::Attempt,
        })];
        w.in_programs(&mut observations);
        assert_eq!(observations.len(), 2, "{observations:?}");
        let Observation::Secret(s) = &observations[1] else {
            panic!("{observations:?}")
        };
        assert_eq!(s.how, SecretMove::Argv);
        assert_eq!(s.target.as_deref(), Some("/usr/bin/curl"));
        assert!(
            s.describe().contains("to /usr/bin/curl"),
            "{}",
            s.describe()
        );
    }
}
