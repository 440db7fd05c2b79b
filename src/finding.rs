//! Findings and verdicts: what the audits conclude, each with the evidence it rests on.

use serde::Serialize;

use crate::mcp::tool::HintName;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Informational.
    Note,
    /// Something to look at.
    Warning,
    /// An annotation is contradicted by behaviour.
    Error,
}

/// What fails a run: the lowest severity (`--fail-on`) and the categories that never fail it
/// (`--fail-except`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FailRule {
    /// The lowest severity that fails the run.
    pub on: FailOn,
    /// Categories whose findings never fail the run.
    pub except: Vec<Category>,
}

impl FailRule {
    /// Whether this finding fails the run: not accepted by a baseline, at or above the
    /// severity, and of no excepted category.
    pub fn fails(&self, f: &Finding) -> bool {
        f.accepted.is_none()
            && self.on.fails(f.severity)
            && !f.category.is_some_and(|c| self.except.contains(&c))
    }

    /// `--fail-on error`, with ` except bookkeeping, transient` when categories are excepted.
    pub fn describe(&self) -> String {
        if self.except.is_empty() {
            format!("--fail-on {}", self.on.as_str())
        } else {
            let except: Vec<&str> = self.except.iter().map(|c| c.as_str()).collect();
            format!(
                "--fail-on {} (except {})",
                self.on.as_str(),
                except.join(", ")
            )
        }
    }
}

/// The lowest severity that fails a run (`--fail-on`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FailOn {
    /// Findings never fail the run (harness errors and "nothing verified" still do).
    Never,
    /// Notes and worse.
    Note,
    /// Warnings and errors (uncertain contradictions, malformed definitions, protocol
    /// anomalies).
    Warning,
    /// Errors only: contradicted hints (the default).
    #[default]
    Error,
}

impl FailOn {
    /// Whether a finding of this severity fails the run.
    pub fn fails(self, severity: Severity) -> bool {
        match self {
            FailOn::Never => false,
            FailOn::Note => true,
            FailOn::Warning => severity >= Severity::Warning,
            FailOn::Error => severity >= Severity::Error,
        }
    }

    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            FailOn::Never => "never",
            FailOn::Note => "note",
            FailOn::Warning => "warning",
            FailOn::Error => "error",
        }
    }
}

impl Severity {
    /// The lowercase name (SARIF levels use the same words).
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Note => "note",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// How sure the finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    /// Indirect or weak evidence.
    Low,
    /// Good evidence with some room for doubt.
    Medium,
    /// Directly observed.
    High,
}

/// The outcome of judging one hint of one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Behaviour contradicts the declared hint.
    Contradicted,
    /// The tool was exercised and nothing contradicted the hint.
    Consistent,
    /// No successful call reached the behaviour, or nobody watched it.
    Unexercised,
    /// The hint promises nothing that could be contradicted (absent, or the spec's default).
    NotApplicable,
}

impl Verdict {
    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Contradicted => "contradicted",
            Verdict::Consistent => "consistent",
            Verdict::Unexercised => "unexercised",
            Verdict::NotApplicable => "not-applicable",
        }
    }
}

/// What kind of effect a piece of evidence is, when it is not plainly the tool's own change
/// of its environment. Reports show it in every format; `--fail-except` and a baseline's
/// `accept_categories` use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// A write that did not last: a lock or temporary file created and removed in the window,
    /// a change to SQLite's shared-memory index (a `-shm` file: it holds no data, SQLite
    /// rebuilds it, and readers write it), or git's index rewritten byte for byte (its stat
    /// cache refreshed).
    Transient,
    /// The server's per-call bookkeeping: a journal, log, history or counter that every tool
    /// writes on every call, in a file the server itself created outside the workspace.
    Bookkeeping,
    /// What the first call of any tool does on a fresh server (a database or cache made on
    /// first use), shown by a replay with a different tool.
    FirstCallInitialisation,
    /// A value changed in place in a store (a counter bumped, a row updated): an update, not a
    /// deletion, though not additive either.
    Update,
    /// A change to (or an attempt on) the server's own installed files: its package directory
    /// or virtual environment (a bundled helper made executable, a cache inside the package):
    /// the server's upkeep of itself, not of the user's files.
    OwnInstallation,
}

impl Category {
    /// Every category, in report order.
    pub const ALL: [Category; 5] = [
        Category::Transient,
        Category::Bookkeeping,
        Category::FirstCallInitialisation,
        Category::Update,
        Category::OwnInstallation,
    ];

    /// The kebab-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Transient => "transient",
            Category::Bookkeeping => "bookkeeping",
            Category::FirstCallInitialisation => "first-call-initialisation",
            Category::Update => "update",
            Category::OwnInstallation => "own-installation",
        }
    }

    /// The category with this name.
    pub fn parse(name: &str) -> Option<Category> {
        Category::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// Whether a contradiction resting only on effects of this category is a warning rather
    /// than an error (effects of little weight, or not the tool's own).
    pub fn softens(self) -> bool {
        matches!(
            self,
            Category::Transient
                | Category::Bookkeeping
                | Category::FirstCallInitialisation
                | Category::OwnInstallation
        )
    }

    /// The category every item shares, if they share one (and there is at least one).
    pub fn common(mut items: impl Iterator<Item = Option<Category>>) -> Option<Category> {
        let first = items.next()??;
        items.all(|c| c == Some(first)).then_some(first)
    }
}

impl Finding {
    /// ` (bookkeeping)` after the audit id in reports, when the finding has a category.
    pub fn category_tag(&self) -> String {
        self.category
            .map(|c| format!(" ({})", c.as_str()))
            .unwrap_or_default()
    }
}

/// One piece of evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    /// The call it comes from (`call 1`, `repeat 2`), or the phase (`startup`, `idle`).
    pub source: String,
    /// What was seen.
    pub text: String,
    /// What kind of effect it is, when it is not plainly the tool's own change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
    /// The observer that saw it (`snapshot`, `seccomp`, `inotify`, `packet`, `dns`,
    /// `listener`), for evidence that rests on an observation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seen_by: Option<&'static str>,
    /// For a hint's evidence: this piece alone makes the contradiction firm (the call
    /// succeeded or a replay showed the tool did it, nothing else can have done it, and it
    /// is no softening category). Any number of pieces that are not firm stay a warning.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub firm: bool,
    /// Other calls' threads or the server's own background threads may have done it.
    #[serde(skip)]
    pub uncertain: bool,
}

impl Evidence {
    /// The text with its category and observer in brackets, when it has them
    /// (`… [bookkeeping; seen by snapshot]`).
    pub fn labelled(&self) -> String {
        let parts: Vec<String> = self
            .category
            .map(|c| c.as_str().to_string())
            .into_iter()
            .chain(self.seen_by.map(|m| format!("seen by {m}")))
            .collect();
        if parts.is_empty() {
            self.text.clone()
        } else {
            format!("{} [{}]", self.text, parts.join("; "))
        }
    }

    /// Evidence of no particular category.
    pub fn plain(source: impl Into<String>, text: impl Into<String>) -> Evidence {
        Evidence {
            source: source.into(),
            text: text.into(),
            category: None,
            seen_by: None,
            firm: false,
            uncertain: false,
        }
    }
}

/// Annotations the observations support, for hints the tool left absent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Suggestion {
    /// The hint.
    pub hint: HintName,
    /// The suggested value.
    pub value: bool,
    /// `observed` when behaviour proves it, `consistent` when it only fits what was exercised.
    pub basis: SuggestionBasis,
    /// Why.
    pub reason: String,
}

/// How strong a suggestion is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SuggestionBasis {
    /// Backed by an observed behaviour (e.g. a write, so not read-only).
    Observed,
    /// Only consistent with what was exercised.
    Consistent,
}

/// The judgement of one hint of one tool.
#[derive(Debug, Clone, Serialize)]
pub struct HintVerdict {
    /// The hint.
    pub hint: HintName,
    /// The declared value, described (`true`, `absent`, `wrong type (null)`).
    pub declared: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in one sentence.
    pub reason: String,
    /// The evidence (for contradictions, the behaviour seen).
    pub evidence: Vec<Evidence>,
    /// The audit that judged it.
    pub audit: &'static str,
    /// Where the judged value came from: `None` for the tool's static declaration,
    /// `tools/resolve` for the annotations the server resolved for `resolved_for`.
    pub source: Option<&'static str>,
    /// The arguments a resolved hint was resolved for.
    pub resolved_for: Option<serde_json::Value>,
    /// For a contradiction: no piece of its evidence is firm, and some come from windows
    /// that other calls' processes or the server's background threads shared, so the
    /// behaviour may be theirs. Reported, but does not fail the run.
    pub uncertain: bool,
}

/// A finding: something the report tells the user about, with evidence.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The audit id.
    pub audit: &'static str,
    /// The tool, when the finding is about one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The hint, for hint audits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<HintName>,
    /// For a hint the server resolved with `tools/resolve`: the arguments it was resolved
    /// for (the finding is about that resolution, not the tool's static declaration).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resolved_for: Option<serde_json::Value>,
    /// How bad.
    pub severity: Severity,
    /// How sure.
    pub confidence: Confidence,
    /// One sentence.
    pub message: String,
    /// What it rests on.
    pub evidence: Vec<Evidence>,
    /// The category every piece of evidence shares (bookkeeping, first-call
    /// initialisation, transient, update), when they share one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<Category>,
    /// A stable identity across runs (server, audit, tool, hint), for baselines and SARIF;
    /// set when the report is finished.
    pub fingerprint: String,
    /// Why the finding was accepted, when a baseline lists it: it is reported but does not
    /// fail the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted: Option<String>,
}
