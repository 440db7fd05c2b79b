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

/// Most bytes of a file written outside the workspace read to look for canaries.
pub const MAX_FILE_READ: usize = 1 << 20;

/// Most files written outside the workspace read in one checkpoint.
pub const MAX_FILES_READ: usize = 16;

/// A run's canaries and the detector of their values.
#[derive(Debug)]
pub struct SecretWatch {
    canaries: Canaries,
    detector: Detector,
    /// The last [`TAIL`] bytes of each destination's traffic (by key) at the checkpoints
    /// before: a secret split between two windows is whole across their boundary.
    tails: std::sync::Mutex<std::collections::HashMap<String, Vec<u8>>>,
    /// The secrets found in files written outside the workspace, by path: found once.
    written: std::sync::Mutex<std::collections::HashSet<(String, usize)>>,
}

/// Most files and secrets remembered as found in files written outside the workspace.
const MAX_WRITTEN_REMEMBERED: usize = 4096;

/// Most destinations whose last bytes are kept from one checkpoint to the next.
const MAX_TAILS: usize = 1024;

/// How much of each destination's traffic is kept from one checkpoint to the next, and how
/// much of the next is joined to it: more than any planted value's longest encoding.
const TAIL: usize = 4096;

impl SecretWatch {
    /// Watches for `canaries`.
    pub fn new(canaries: Canaries) -> SecretWatch {
        let detector = canaries.detector();
        SecretWatch {
            canaries,
            detector,
            tails: Default::default(),
            written: Default::default(),
        }
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
        let bytes = text_of(result);
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
        self.detector
            .find(&text_of(arguments))
            .into_iter()
            .map(|s| s.canary)
            .collect()
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
                SecretMove::Sent | SecretMove::Written | SecretMove::Argv | SecretMove::Env => {
                    !given.contains(&(s.kind.as_str(), s.place.as_str()))
                }
                SecretMove::Returned => true,
            }
        });
    }

    /// Adds a sighting for each canary in what the network events among `observations` carry
    /// past loopback, each canary once per destination and channel:
    /// - the names looked up, as asked (their case kept), with the labels below the last two
    ///   joined (a secret split across labels is whole again), and those parts joined across
    ///   the successive names under one parent domain (a secret spread over several lookups);
    /// - what was sent to each destination, the events to one place joined in order: HTTP
    ///   requests with their headers and bodies (decrypted inside TLS), datagrams' payloads,
    ///   other protocols' bytes; and TLS server names.
    ///
    /// A destination is named by its parent domain where its own name holds a secret.
    pub fn in_network(&self, observations: &mut Vec<Observation>) {
        if self.detector.is_empty() {
            return;
        }
        // Every place's bytes, joined in order: (target, mechanism, bytes).
        let mut sent: Vec<(String, Mechanism, Vec<u8>)> = Vec::new();
        let mut add = |key: String, mechanism: Mechanism, bytes: &[u8]| match sent
            .iter_mut()
            .find(|(k, _, _)| *k == key)
        {
            Some((_, _, joined)) => joined.extend_from_slice(bytes),
            None => sent.push((key, mechanism, bytes.to_vec())),
        };
        // Names already taken (a name asked for both address families is one lookup).
        let mut names = std::collections::HashSet::new();
        let mut fetched: Vec<Observation> = Vec::new();
        for o in observations.iter() {
            let Observation::Network(n) = o else {
                continue;
            };
            if n.loopback {
                continue;
            }
            let port = n.port.map(|p| format!(":{p}")).unwrap_or_default();
            let carried = n.carried.bytes();
            if n.kind == crate::evidence::NetKind::Dns {
                // The name asked, and what the rest of the query carried.
                let (carried, rest) = match carried.iter().position(|b| *b == super::net::DNS_REST)
                {
                    Some(i) => (&carried[..i], &carried[i + 1..]),
                    None => (carried, &[][..]),
                };
                let asked = if carried.is_empty() {
                    n.name
                        .clone()
                        .or_else(|| (n.mechanism == Mechanism::Dns).then(|| n.destination.clone()))
                        .unwrap_or_default()
                } else {
                    String::from_utf8_lossy(carried).into_owned()
                };
                // What the rest of a query carried, each query's (a name asked again may
                // bring other records).
                if !rest.is_empty() {
                    let target = format!("{} (DNS query's other parts)", parent_domain(&asked));
                    add(format!("0{target}"), n.mechanism, rest);
                }
                if asked.is_empty()
                    || asked.parse::<std::net::IpAddr>().is_ok()
                    || !names.insert(asked.clone())
                {
                    continue;
                }
                let labels: Vec<&str> = asked.trim_end_matches('.').split('.').collect();
                let below = &labels[..labels.len().saturating_sub(2)];
                let target = format!("{} (DNS name)", parent_domain(&asked));
                // Three views of the names under one parent, each joined across lookups:
                // the names whole (apart), the labels below the parent (joined), the first
                // labels (joined: a counter or a session label often follows the data).
                let name = format!("{asked}\n");
                add(format!("0{target}"), n.mechanism, name.as_bytes());
                add(format!("1{target}"), n.mechanism, below.concat().as_bytes());
                add(
                    format!("2{target}"),
                    n.mechanism,
                    below.first().unwrap_or(&"").as_bytes(),
                );
                continue;
            }
            let host = n.name.as_deref().unwrap_or(&n.destination);
            let host = if self.detector.find(host.as_bytes()).is_empty() {
                host.to_string()
            } else {
                parent_domain(host)
            };
            if let Some(sni) = n
                .payload
                .as_deref()
                .and_then(|p| p.strip_prefix("TLS ClientHello, SNI "))
            {
                let sni = sni.split(';').next().unwrap_or_default();
                let key = format!("0{host}{port} (TLS server name)");
                add(key, n.mechanism, format!("{sni}\n").as_bytes());
            }
            if let Some(kinds) = self.fetched_from_metadata(n) {
                fetched.push(Observation::Secret(SecretSighting {
                    how: SecretMove::Read,
                    kind: kinds,
                    place: super::metadata::PLACE.to_string(),
                    encoding: "fetched".into(),
                    target: None,
                    asked: false,
                    swept: false,
                    mechanism: n.mechanism,
                }));
            }
            if !carried.is_empty() {
                let channel = match n.kind {
                    crate::evidence::NetKind::Datagram => "datagram",
                    crate::evidence::NetKind::Packet => "packet",
                    _ if n.payload.as_deref().is_some_and(|p| p.starts_with("TLS")) => {
                        "HTTPS request"
                    }
                    _ if super::net::describe_payload(carried)
                        .is_some_and(|d| d.starts_with("HTTP")) =>
                    {
                        "HTTP request"
                    }
                    _ => "bytes sent",
                };
                add(format!("0{host}{port} ({channel})"), n.mechanism, carried);
            } else if let Some(payload) = n.payload.as_deref().filter(|p| !p.starts_with("TLS")) {
                // Seen without its bytes: what the description says.
                let channel = if payload.starts_with("HTTP") {
                    "HTTP request line"
                } else {
                    "bytes sent"
                };
                let key = format!("0{host}{port} ({channel})");
                add(key, n.mechanism, format!("{payload}\n").as_bytes());
            }
        }
        let mut seen = BTreeSet::new();
        let mut found = Vec::new();
        let mut tails = self.tails.lock().unwrap_or_else(|p| p.into_inner());
        for (key, mechanism, bytes) in sent {
            let target = key[1..].to_string();
            found.extend(self.sightings_in(
                &bytes,
                (SecretMove::Sent, target.clone(), mechanism),
                &mut seen,
            ));
            // Across the boundary with what this destination was sent before: a secret
            // found only there (not in the tail alone, nor in this window's bytes) was
            // split between the two windows, and is this one's, which completed it.
            let tail = tails.remove(&key).unwrap_or_default();
            if !tail.is_empty() {
                let mut joined = tail.clone();
                joined.extend_from_slice(&bytes[..bytes.len().min(TAIL)]);
                let mut excluded = seen.clone();
                excluded.extend(
                    self.detector
                        .find(&tail)
                        .into_iter()
                        .map(|s| (s.canary, target.clone())),
                );
                let before = excluded.clone();
                let split = self.sightings_in(
                    &joined,
                    (SecretMove::Sent, target.clone(), mechanism),
                    &mut excluded,
                );
                // Only what was found across the boundary counts as seen: a secret of the
                // tail alone must not hide a new one in another view of this target.
                seen.extend(excluded.difference(&before).cloned().collect::<Vec<_>>());
                found.extend(split);
            }
            let mut kept = tail;
            kept.extend_from_slice(&bytes[bytes.len().saturating_sub(TAIL)..]);
            let cut = kept.len().saturating_sub(TAIL);
            kept.drain(..cut);
            if tails.len() < MAX_TAILS || tails.contains_key(&key) {
                tails.insert(key, kept);
            }
        }
        drop(tails);
        fetched.dedup();
        observations.extend(fetched);
        observations.extend(found);
    }

    /// Adds a sighting for each canary in the files the server wrote outside the workspace
    /// among `observations` (`roots`: the named roots to look in, `$HOME`, `$TMPDIR` and the
    /// sandbox's own `/tmp`, `/var/tmp` and `/dev/shm`, with their directories), each file read up to [`MAX_FILE_READ`] bytes and at most
    /// [`MAX_FILES_READ`] files a checkpoint; a planted file itself is not looked in. A
    /// temporary file that other users could read (on a real machine `$TMPDIR` is the shared
    /// `/tmp` too) is marked so ([`crate::audit::exfiltration::READABLE_BY_OTHERS`]).
    pub fn in_files(&self, observations: &mut Vec<Observation>, roots: &[(String, PathBuf)]) {
        use crate::evidence::{FileEffectKind, ObjectKind};
        if self.detector.is_empty() || roots.is_empty() {
            return;
        }
        let planted: BTreeSet<String> = self
            .canaries
            .files
            .iter()
            .filter(|f| f.base == Base::Home)
            .map(|f| format!("$HOME/{}", f.rel))
            .collect();
        let mut read = 0;
        let mut seen = BTreeSet::new();
        let mut found = Vec::new();
        for o in observations.iter() {
            let Observation::File(f) = o else {
                continue;
            };
            let lasting = !matches!(
                f.kind,
                FileEffectKind::Deleted | FileEffectKind::Transient { .. }
            );
            if !lasting || f.object != ObjectKind::File || planted.contains(&f.path) {
                continue;
            }
            let Some((name, dir, rel)) = roots.iter().find_map(|(name, dir)| {
                let rel = f.path.strip_prefix(name.as_str())?.strip_prefix('/')?;
                Some((name, dir, rel))
            }) else {
                continue;
            };
            if read == MAX_FILES_READ {
                break;
            }
            read += 1;
            let Some((bytes, others_read)) = super::fs::read_file_beneath(dir, rel, MAX_FILE_READ)
            else {
                continue;
            };
            let temporary = name == "$TMPDIR"
                || crate::sandbox::policy::TEMPORARY_PLACES.contains(&name.as_str());
            let target = if temporary && others_read {
                format!(
                    "{} {}",
                    f.path,
                    crate::audit::exfiltration::READABLE_BY_OTHERS
                )
            } else {
                format!("{} (a file of its own)", f.path)
            };
            // A secret already found in this file (a log appended to at every call) is the
            // window's that wrote it first, not every later one's.
            let mut reported = self.written.lock().unwrap_or_else(|p| p.into_inner());
            for s in self.detector.find(&bytes) {
                if reported.len() < MAX_WRITTEN_REMEMBERED
                    && !reported.insert((f.path.clone(), s.canary))
                {
                    seen.insert((s.canary, target.clone()));
                }
            }
            drop(reported);
            found.extend(self.sightings_in(
                &bytes,
                (SecretMove::Written, target, Mechanism::Snapshot),
                &mut seen,
            ));
        }
        observations.extend(found);
    }

    /// The kinds of the planted instance credentials a request to the cloud metadata
    /// endpoint asked for (AWS's role credentials, Google Cloud's or Azure's token).
    fn fetched_from_metadata(&self, n: &crate::evidence::NetEvent) -> Option<String> {
        let head = n.carried.bytes();
        let destination = n.destination.parse().ok();
        if !super::metadata::is_endpoint(destination, head)
            || !super::metadata::asks_for_credentials(head)
        {
            return None;
        }
        let text = String::from_utf8_lossy(head);
        let provider = if text.contains("/computeMetadata/") {
            "gcp-"
        } else if text.contains("/metadata/identity/") {
            "azure-"
        } else {
            "aws-"
        };
        let kinds: Vec<&str> = self
            .canaries
            .items
            .iter()
            .filter(|c| c.place == super::metadata::PLACE && c.kind.starts_with(provider))
            .map(|c| c.kind)
            .collect();
        (!kinds.is_empty()).then(|| kinds.join(", "))
    }

    /// Adds a sighting for each canary in the arguments of a program started among
    /// `observations`, and in its environment under a name of the server's choosing.
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
            // The environment, but the variables inherited as they were planted.
            let chosen: Vec<u8> = p
                .env
                .bytes()
                .split(|b| *b == 0)
                .filter(|entry| !self.inherited(entry))
                .flat_map(|entry| entry.iter().copied().chain([0]))
                .collect();
            if !chosen.is_empty() {
                let passed = (SecretMove::Env, p.program.clone(), p.mechanism);
                found.extend(self.sightings_in(&chosen, passed, &mut BTreeSet::new()));
            }
        }
        observations.extend(found);
    }

    /// Whether an environment entry (`NAME=value`) is one of the planted variables as it was
    /// planted, or a line of the planted `.env` as it stands (a server that loads `.env` at
    /// start, as dotenv does, hands it to every program it starts): a program inherits it,
    /// no tool passed it on.
    fn inherited(&self, entry: &[u8]) -> bool {
        let Some(eq) = entry.iter().position(|b| *b == b'=') else {
            return false;
        };
        let (name, value) = (&entry[..eq], &entry[eq + 1..]);
        let planted = self
            .canaries
            .env
            .iter()
            .any(|(n, v)| n.as_bytes() == name && v.as_bytes() == value);
        planted
            || self
                .canaries
                .files
                .iter()
                .filter(|f| f.base == Base::Workspace && f.secret)
                .any(|f| f.content.lines().any(|l| l.as_bytes() == entry))
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
pub fn parent_domain(name: &str) -> String {
    let labels: Vec<&str> = name.trim_end_matches('.').split('.').collect();
    labels[labels.len().saturating_sub(2)..].join(".")
}

/// Every string value in `v` (not the keys: a server's schema names them).
/// Takes `asked` back from the secret sightings of a call whose arguments named the
/// secret's place only with a value the tool's own `schema` offered (a `default`, `const`,
/// `enum` or `examples` entry): the server chose that path, not the caller, so a server
/// cannot make its own read of a key look asked for.
pub fn asked_only_by_schema(observations: &mut [Observation], arguments: &Value, schema: &Value) {
    let mut offered = Vec::new();
    schema_offers(schema, &mut offered);
    if offered.is_empty() {
        return;
    }
    let mut strings = Vec::new();
    strings_in(arguments, &mut strings);
    let callers: Vec<&str> = strings
        .into_iter()
        .filter(|s| !offered.contains(s))
        .collect();
    for o in observations {
        if let Observation::Secret(s) = o {
            if s.asked && !names_place(&callers, &s.place) {
                s.asked = false;
            }
        }
    }
}

/// The strings a schema offers as values, at any depth.
fn schema_offers<'a>(schema: &'a Value, out: &mut Vec<&'a str>) {
    match schema {
        Value::Object(o) => {
            for (key, v) in o {
                if matches!(key.as_str(), "default" | "const" | "enum" | "examples") {
                    strings_in(v, out);
                } else {
                    schema_offers(v, out);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| schema_offers(x, out)),
        _ => {}
    }
}

/// The text of a JSON value as its reader sees it: every object key and string, unescaped
/// (a base64 dump wrapped in lines is whole again, where its JSON form has `\n` escapes
/// between the lines), one a line.
fn text_of(v: &Value) -> Vec<u8> {
    fn walk(v: &Value, out: &mut Vec<u8>) {
        match v {
            Value::String(s) => {
                out.extend_from_slice(s.as_bytes());
                out.push(b'\n');
            }
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.iter().for_each(|(k, x)| {
                out.extend_from_slice(k.as_bytes());
                out.push(b'\n');
                walk(x, out);
            }),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut out);
    out
}

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
/// `place` (or, for the metadata endpoint, a URL to it).
fn names_place(strings: &[&str], place: &str) -> bool {
    // The metadata endpoint is named by a URL to it (a fetcher told to fetch it).
    if place == super::metadata::PLACE {
        return strings.iter().any(|s| {
            [
                "169.254.169.254",
                "metadata.google.internal",
                "fd00:ec2::254",
            ]
            .iter()
            .any(|host| s.contains(host))
        });
    }
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

    /// The secret sightings among `observations`, described.
    fn described_sightings(observations: &[Observation]) -> Vec<String> {
        observations
            .iter()
            .filter_map(|o| match o {
                Observation::Secret(s) => Some(s.describe()),
                _ => None,
            })
            .collect()
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
    fn a_gzip_dump_in_base64_wrapped_in_lines_is_found_in_a_result() {
        use base64::Engine;
        use std::io::Write;
        let w = watch();
        let key = value_of(&w, "$OPENAI_API_KEY");
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(format!("OPENAI_API_KEY={key}\n").as_bytes())
            .expect("gzip");
        let encoded = base64::engine::general_purpose::STANDARD.encode(gz.finish().expect("gzip"));
        // Wrapped at 20 columns, as `base64` wraps (at 76) a longer dump.
        let wrapped: Vec<String> = encoded
            .as_bytes()
            .chunks(20)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        let result = json!({"content": [{"type": "text", "text": wrapped.join("\n")}]});
        let seen = w.in_result(&result, &json!({}));
        assert_eq!(seen.len(), 1, "{seen:?}");
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
    fn a_path_the_schema_offered_is_not_the_caller_asking() {
        let read = |asked| {
            Observation::Secret(SecretSighting {
                how: SecretMove::Read,
                kind: "ssh-private-key".into(),
                place: "~/.ssh/id_rsa".into(),
                encoding: "read".into(),
                target: None,
                asked,
                swept: false,
                mechanism: Mechanism::Notify,
            })
        };
        let schema = json!({"type": "object", "properties": {"path": {"type": "string", "default": "~/.ssh/id_rsa"}}});
        let mut observations = vec![read(true)];
        asked_only_by_schema(
            &mut observations,
            &json!({"path": "~/.ssh/id_rsa"}),
            &schema,
        );
        assert_eq!(observations, [read(false)]);
        // A path of the caller's own stays asked.
        let mut observations = vec![read(true)];
        let schema = json!({"type": "object", "properties": {"path": {"type": "string", "default": "notes.md"}}});
        asked_only_by_schema(
            &mut observations,
            &json!({"path": "/home/u/.ssh/id_rsa"}),
            &schema,
        );
        assert_eq!(observations, [read(true)]);
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
                carried: Default::default(),
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
        let sent: Vec<String> = described_sightings(&observations);
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
        let sent: Vec<String> = described_sightings(&observations);
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(
            sent[0].ends_with("to exfil.test:53 (HTTP request line)") && !sent[0].contains(a),
            "{}",
            sent[0]
        );
    }

    #[test]
    fn what_was_sent_is_searched_whole_and_joined_per_place() {
        use crate::evidence::{Carried, NetKind};
        use base64::Engine;
        let w = watch();
        let token = value_of(&w, "$GITHUB_TOKEN");
        let key = value_of(&w, "$OPENAI_API_KEY");
        let event = |kind, destination: &str, name: Option<&str>, port, carried: &[u8]| {
            Observation::Network(crate::evidence::NetEvent {
                kind,
                destination: destination.into(),
                port,
                name: name.map(str::to_string),
                loopback: false,
                mechanism: Mechanism::Payload,
                payload: None,
                carried: Carried::of(carried),
            })
        };
        // Base64 keeps its meaning only in the case it was asked in.
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&token);
        let b64_name = format!("{}.t.exfil.test", &b64[..40]);
        // A secret spread over lookups of 12 hex digits each (6 bytes: no part alone names it),
        // each followed by a counter label.
        let hex: String = key.bytes().map(|b| format!("{b:02x}")).collect();
        let mut observations: Vec<Observation> = hex
            .as_bytes()
            .chunks(12)
            .enumerate()
            .map(|(i, c)| {
                let name = format!("{}.{i}.drip.test", String::from_utf8_lossy(c));
                event(NetKind::Dns, &name, Some(&name), None, name.as_bytes())
            })
            .collect();
        observations.push(event(
            NetKind::Dns,
            &b64_name.to_ascii_lowercase(),
            Some(&b64_name.to_ascii_lowercase()),
            None,
            b64_name.as_bytes(),
        ));
        // A body, and a datagram's payload split over two datagrams.
        let body = format!(
            "POST /ingest HTTP/1.1\r\nHost: hooks.test\r\nContent-Type: application/json\r\n\r\n{{\"k\": \"{token}\"}}"
        );
        observations.push(event(
            NetKind::Connect,
            "198.18.0.5",
            Some("hooks.test"),
            Some(443),
            body.as_bytes(),
        ));
        let (first, second) = key.split_at(key.len() / 2);
        for half in [first, second] {
            observations.push(event(
                NetKind::Datagram,
                "192.0.2.77",
                None,
                Some(9999),
                half.as_bytes(),
            ));
        }
        // A query whose second question (or EDNS option) carries a secret, asked under an
        // innocent first name.
        let mut with_rest = b"cdn.example.test".to_vec();
        with_rest.push(super::super::net::DNS_REST);
        with_rest.extend_from_slice(format!("{}.q.test\n", &b64[..40]).as_bytes());
        observations.push(event(
            NetKind::Dns,
            "cdn.example.test",
            Some("cdn.example.test"),
            None,
            &with_rest,
        ));
        w.in_network(&mut observations);
        let sent: Vec<String> = described_sightings(&observations);
        for says in [
            "openai-api-key from $OPENAI_API_KEY (hex) to drip.test (DNS name)",
            "github-token from $GITHUB_TOKEN (base64) to exfil.test (DNS name)",
            "github-token from $GITHUB_TOKEN to hooks.test:443 (HTTP request)",
            "openai-api-key from $OPENAI_API_KEY to 192.0.2.77:9999 (datagram)",
            "github-token from $GITHUB_TOKEN (base64) to example.test (DNS query's other parts)",
        ] {
            assert!(sent.iter().any(|s| s.contains(says)), "{says}: {sent:?}");
        }
        assert_eq!(sent.len(), 5, "{sent:?}");
    }

    #[test]
    fn a_secret_split_between_two_windows_is_the_second_ones_and_is_never_seen_twice() {
        use crate::evidence::{Carried, NetKind};
        let w = watch();
        let key = value_of(&w, "$OPENAI_API_KEY");
        let datagram = |bytes: &[u8]| {
            vec![Observation::Network(crate::evidence::NetEvent {
                kind: NetKind::Datagram,
                destination: "192.0.2.77".into(),
                port: Some(9999),
                name: None,
                loopback: false,
                mechanism: Mechanism::Packet,
                payload: None,
                carried: Carried::of(bytes),
            })]
        };
        // Ten bytes a window: no piece alone is long enough to name the secret.
        let mut pieces = key.as_bytes().chunks(10);
        let mut window = datagram(pieces.next().expect("piece"));
        w.in_network(&mut window);
        assert!(described_sightings(&window).is_empty(), "{window:?}");
        let mut window = datagram(pieces.next().expect("piece"));
        w.in_network(&mut window);
        let sent = described_sightings(&window);
        assert_eq!(sent.len(), 1, "{sent:?}");
        assert!(
            sent[0].contains("to 192.0.2.77:9999 (datagram)"),
            "{sent:?}"
        );
        // The pieces that follow, and later traffic to the same place, do not find it again
        // in what came before.
        for piece in pieces.chain([&b"ping"[..]]) {
            let mut window = datagram(piece);
            w.in_network(&mut window);
            assert!(described_sightings(&window).is_empty(), "{window:?}");
        }
        // Sent whole again, it is seen again.
        let mut window = datagram(key.as_bytes());
        w.in_network(&mut window);
        assert_eq!(described_sightings(&window).len(), 1);
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
            env: Default::default(),
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
        // In the environment: a variable inherited as planted is nobody's doing; the same
        // value under a name the server chose, or a file's secret, is passed on.
        let token = value_of(&w, "$GITHUB_TOKEN");
        let aws = value_of(&w, "~/.aws/credentials");
        let started = |env: String| {
            let mut observations = vec![Observation::Process(crate::evidence::ProcessEvent {
                program: "/usr/bin/gh".into(),
                argv: vec!["gh".into(), "repo".into(), "list".into()],
                pid: 10,
                mechanism: Mechanism::Attempt,
                env: crate::evidence::Carried::of(env.as_bytes()),
            })];
            w.in_programs(&mut observations);
            described_sightings(&observations)
        };
        assert!(started(format!("PATH=/usr/bin\0GITHUB_TOKEN={token}\0")).is_empty());
        // What a server that loaded `.env` at start gives every program.
        let dotenv = w
            .canaries()
            .files
            .iter()
            .find(|f| f.rel == ".env")
            .map(|f| f.content.replace('\n', "\0"))
            .expect(".env");
        assert!(started(dotenv).is_empty());
        assert_eq!(
            started(format!("GITHUB_TOKEN={token}\0GH_TOKEN={token}\0AWS_KEY={aws}\0")),
            [
                "passed the planted github-token from $GITHUB_TOKEN to /usr/bin/gh in its environment",
                format!("passed the planted {} from ~/.aws/credentials to /usr/bin/gh in its environment", w.canaries().items.iter().find(|c| c.value == aws).map(|c| c.kind).unwrap_or_default()).as_str(),
            ]
        );
    }
}
