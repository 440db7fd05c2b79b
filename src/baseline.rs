//! Baselines: the findings a team has looked at and accepted, kept in a JSON file in the
//! repository, so that CI fails only on new ones. Each finding has a fingerprint that stays
//! the same across runs (server name, audit, tool, hint; for findings without a hint, the
//! message with its numbers removed). A baseline entry also keeps the tool's definition hash:
//! when the tool changed since the finding was accepted, the report says so. Entries that no
//! longer match anything are stale and reported (and fail the run when asked).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::finding::{Category, Finding};
use crate::mcp::tool::sha256_hex;
use crate::report::Report;

/// The version of the baseline format.
pub const BASELINE_VERSION: u32 = 1;

/// Errors reading or writing a baseline.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The file could not be read.
    #[error("cannot read the baseline {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a baseline.
    #[error("invalid baseline {}: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// A baseline file.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineFile {
    /// Always [`BASELINE_VERSION`].
    pub schema_version: u32,
    /// Free text for the humans who keep the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// The accepted findings.
    #[serde(default)]
    pub findings: Vec<BaselineEntry>,
    /// Categories whose findings are all accepted (`bookkeeping`, `first-call-initialisation`,
    /// `transient`, `update`), whichever tool and server they concern.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accept_categories: Vec<Category>,
}

/// One accepted finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineEntry {
    /// The finding's fingerprint (the only field used for matching).
    pub fingerprint: String,
    /// The audit, for readers.
    pub audit: String,
    /// The server, for readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The tool, for readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The hint, for readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The finding's message when it was accepted.
    #[serde(default)]
    pub message: String,
    /// SHA-256 of the tool's definition when the finding was accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub definition_sha256: Option<String>,
    /// Why it is accepted (written by a human).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A loaded baseline.
#[derive(Debug, Clone)]
pub struct Baseline {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its entries.
    pub entries: Vec<BaselineEntry>,
    /// Categories whose findings are all accepted.
    pub accept_categories: Vec<Category>,
}

/// What applying a baseline found, for the report.
#[derive(Debug, Clone, Default)]
pub struct BaselineOutcome {
    /// The baseline file.
    pub path: String,
    /// Findings accepted by it.
    pub accepted: usize,
    /// Entries that matched no finding of this run.
    pub stale: Vec<BaselineEntry>,
    /// Accepted findings whose tool definition changed since they were accepted:
    /// `(tool, accepted hash, current hash)`.
    pub changed_definitions: Vec<(String, String, String)>,
}

impl Baseline {
    /// Reads a baseline file. A missing file is an error: a typo must not silently accept
    /// nothing.
    pub fn load(path: &Path) -> Result<Baseline, BaselineError> {
        let text = std::fs::read_to_string(path).map_err(|source| BaselineError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let invalid = |message: String| BaselineError::Invalid {
            path: path.to_path_buf(),
            message,
        };
        let file: BaselineFile = serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if file.schema_version != BASELINE_VERSION {
            return Err(invalid(format!(
                "schema_version {} is not supported (this hintcheck reads {BASELINE_VERSION})",
                file.schema_version
            )));
        }
        if let Some(e) = file.findings.iter().find(|e| e.fingerprint.is_empty()) {
            return Err(invalid(format!(
                "the entry for {} has an empty fingerprint",
                e.tool.as_deref().unwrap_or(&e.audit)
            )));
        }
        Ok(Baseline {
            path: path.to_path_buf(),
            entries: file.findings,
            accept_categories: file.accept_categories,
        })
    }

    /// Marks the report's findings that this baseline accepts and returns what matched,
    /// what is stale and which accepted tools changed.
    pub fn apply(&self, report: &mut Report) -> BaselineOutcome {
        let by_fingerprint: BTreeMap<&str, &BaselineEntry> = self
            .entries
            .iter()
            .map(|e| (e.fingerprint.as_str(), e))
            .collect();
        // Owned: the findings are marked below.
        let definitions: BTreeMap<String, String> = report
            .definition_hashes()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut outcome = BaselineOutcome {
            path: self.path.display().to_string(),
            ..BaselineOutcome::default()
        };
        let mut matched = std::collections::BTreeSet::new();
        for f in &mut report.findings {
            let Some(entry) = by_fingerprint.get(f.fingerprint.as_str()) else {
                if let Some(c) = f.category.filter(|c| self.accept_categories.contains(c)) {
                    outcome.accepted += 1;
                    f.accepted = Some(format!(
                        "accepted in {}: every {} finding is",
                        outcome.path,
                        c.as_str()
                    ));
                }
                continue;
            };
            matched.insert(entry.fingerprint.as_str());
            outcome.accepted += 1;
            f.accepted = Some(match &entry.reason {
                Some(r) => format!("accepted in {}: {r}", outcome.path),
                None => format!("accepted in {}", outcome.path),
            });
            if let (Some(tool), Some(then)) = (&f.tool, &entry.definition_sha256) {
                if let Some(now) = definitions.get(tool.as_str()) {
                    if then != now && !outcome.changed_definitions.iter().any(|(t, ..)| t == tool) {
                        outcome
                            .changed_definitions
                            .push((tool.clone(), then.clone(), now.clone()));
                    }
                }
            }
        }
        outcome.stale = self
            .entries
            .iter()
            .filter(|e| !matched.contains(e.fingerprint.as_str()))
            .cloned()
            .collect();
        outcome
    }
}

/// The name that identifies the server in fingerprints: `serverInfo.name`, or the command.
pub fn server_key(report: &Report) -> String {
    report
        .server
        .info("name")
        .filter(|n| !n.trim().is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| report.server.command.join(" "))
}

/// The fingerprint of a finding of a server: 32 hex digits, stable across runs as long as
/// the server's name, the audit, the tool and the hint stay the same. `words` are the run's
/// own words (file names, text it made up), which vary with its seed and are left out.
pub fn fingerprint(server: &str, f: &Finding, words: &[String]) -> String {
    let detail: String = match f.hint {
        // A hint the server resolved: apart from its static declaration, but not by the
        // arguments, which name the run's paths and words.
        Some(h) if f.resolved_for.is_some() => format!("{} tools/resolve", h.key()),
        Some(h) => h.key().to_string(),
        // A data label: the label and its declared value, not the reason, which names hosts
        // and counts that vary between runs.
        None if f.audit == crate::audit::data_labels::META.id => f
            .message
            .split(crate::audit::data_labels::LABEL_END)
            .next()
            .unwrap_or_default()
            .chars()
            .filter(|c| !c.is_ascii_digit())
            .collect(),
        // Counts and the run's words vary between runs; what the finding is about does not.
        None => {
            let mut message = f.message.clone();
            for w in words {
                message = message.replace(w.as_str(), "*");
            }
            message.chars().filter(|c| !c.is_ascii_digit()).collect()
        }
    };
    let key = [
        "hintcheck-finding/v1",
        server,
        f.audit,
        f.tool.as_deref().unwrap_or(""),
        &detail,
    ]
    .join("\u{0}");
    sha256_hex(key.as_bytes())[..32].to_string()
}

/// Sets the fingerprint of every finding of the report (of a variant's run: with the
/// variant's name, so that the same finding in two configurations is two findings).
pub fn fingerprint_findings(report: &mut Report) {
    let mut server = server_key(report);
    if let Some(v) = &report.settings.variant {
        server.push_str(&format!("\u{0}variant {v}"));
    }
    let words = crate::workspace::vocab::Vocabulary::of(report.settings.seed).words();
    for f in &mut report.findings {
        f.fingerprint = fingerprint(&server, f, &words);
    }
}

/// A baseline that accepts every finding of the report (what `--write-baseline` writes),
/// keeping the reasons of entries an earlier baseline already had.
pub fn render(report: &Report, previous: Option<&Baseline>) -> String {
    let server = server_key(report);
    let reasons: BTreeMap<&str, &str> = previous
        .map(|b| {
            b.entries
                .iter()
                .filter_map(|e| Some((e.fingerprint.as_str(), e.reason.as_deref()?)))
                .collect()
        })
        .unwrap_or_default();
    let mut seen = std::collections::BTreeSet::new();
    // The variants' findings too: their fingerprints carry the variant's name, and their
    // tools' definitions are the variant's own (a read-only mode declares other hints).
    let runs: Vec<(&Report, BTreeMap<&str, &str>)> = report
        .every_run()
        .map(|r| (r, r.definition_hashes()))
        .collect();
    let findings = runs
        .iter()
        .flat_map(|(r, definitions)| r.findings.iter().map(move |f| (f, definitions)))
        .filter(|(f, _)| seen.insert(f.fingerprint.clone()))
        .map(|(f, definitions)| BaselineEntry {
            fingerprint: f.fingerprint.clone(),
            audit: f.audit.to_string(),
            server: Some(server.clone()),
            tool: f.tool.clone(),
            hint: f.hint.map(|h| h.key().to_string()),
            message: f.message.clone(),
            definition_sha256: f
                .tool
                .as_deref()
                .and_then(|t| definitions.get(t))
                .map(|s| (*s).to_string()),
            reason: reasons
                .get(f.fingerprint.as_str())
                .map(|r| (*r).to_string()),
        })
        .collect();
    let file = BaselineFile {
        schema_version: BASELINE_VERSION,
        comment: Some(
            "Findings accepted for hintcheck --baseline. Matching uses `fingerprint` only; add a `reason` to each entry.".into(),
        ),
        findings,
        accept_categories: previous
            .map(|b| b.accept_categories.clone())
            .unwrap_or_default(),
    };
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::finding::{Confidence, Severity};
    use crate::mcp::tool::HintName;

    fn finding(tool: &str, hint: Option<HintName>, message: &str) -> Finding {
        Finding {
            resolved_for: None,
            category: None,
            audit: "read-only",
            tool: Some(tool.into()),
            hint,
            severity: Severity::Error,
            confidence: Confidence::High,
            message: message.into(),
            evidence: Vec::new(),
            fingerprint: String::new(),
            accepted: None,
        }
    }

    #[test]
    fn fingerprints_ignore_counts_and_wording_but_not_identity() {
        let fingerprint = |s: &str, f: &Finding| fingerprint(s, f, &[]);
        let a = finding("t", Some(HintName::ReadOnly), "2 writes");
        let b = finding("t", Some(HintName::ReadOnly), "7 writes, differently");
        assert_eq!(fingerprint("s", &a), fingerprint("s", &b));
        assert_ne!(fingerprint("s", &a), fingerprint("other", &a));
        let c = finding("u", Some(HintName::ReadOnly), "2 writes");
        assert_ne!(fingerprint("s", &a), fingerprint("s", &c));
        let d = finding("t", None, "3 lines of garbage");
        let e = finding("t", None, "12 lines of garbage");
        assert_eq!(fingerprint("s", &d), fingerprint("s", &e));
        assert_eq!(fingerprint("s", &a).len(), 32);
    }

    #[test]
    fn a_data_labels_fingerprint_keeps_the_label_not_the_reason() {
        let labelled = |message: &str| Finding {
            audit: crate::audit::data_labels::META.id,
            ..finding("post", None, message)
        };
        let a = labelled(
            "post declares inputMetadata.destination: \"internal\" (tools/list) but an argument's value was sent to a.test (a public name)",
        );
        let b = labelled(
            "post declares inputMetadata.destination: \"internal\" (tools/list) but an argument's value was sent to b.test, c.test (a public name)",
        );
        let c = labelled(
            "post declares returnMetadata.source: \"system\" (tools/list) but 2 result(s) held data",
        );
        assert_eq!(fingerprint("s", &a, &[]), fingerprint("s", &b, &[]));
        assert_ne!(fingerprint("s", &a, &[]), fingerprint("s", &c, &[]));
    }

    #[test]
    fn fingerprints_do_not_depend_on_the_runs_words() {
        use crate::workspace::vocab::Vocabulary;
        let (one, two) = (Vocabulary::of(1), Vocabulary::of(2));
        let said = |v: &Vocabulary| {
            finding(
                "t",
                None,
                &format!("wrote $WORKSPACE/{}.txt between calls", v.new_stem()),
            )
        };
        assert_eq!(
            fingerprint("s", &said(&one), &one.words()),
            fingerprint("s", &said(&two), &two.words())
        );
    }

    #[test]
    fn bad_baselines_are_rejected_with_the_file_named() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("b.json");
        std::fs::write(
            &path,
            r#"{"schema_version":1,"findings":[{"fingerprint":"x","audit":"a","colour":"red"}]}"#,
        )
        .expect("write");
        let err = Baseline::load(&path).expect_err("unknown key");
        let text = err.to_string();
        assert!(text.contains("b.json") && text.contains("colour"), "{text}");
        std::fs::write(&path, r#"{"schema_version":9,"findings":[]}"#).expect("write");
        assert!(Baseline::load(&path).is_err());
        assert!(Baseline::load(&dir.path().join("missing.json")).is_err());
    }
}
