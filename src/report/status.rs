//! One vocabulary for a scanned server's outcome, whatever renders it (the scan's text and
//! Markdown summaries, its HTML page): skipped with its reason, no report, expectations met
//! or unmet, failed, passed with warnings, clean, nothing verified, interrupted, error. A server whose run
//! passed but whose report holds findings (a weak contradiction, a warning) is "passed with
//! warnings", never "clean" beside a contradicted count.

use serde_json::Value;

use super::exit_code;

/// What decided a server's line of a scan.
#[derive(Debug, Clone, Copy)]
pub struct StatusFacts<'a> {
    /// The exit code its verify gave (meaningless when it was skipped).
    pub exit_code: i32,
    /// Why it was not run, when it was skipped.
    pub skipped: Option<&'a str>,
    /// Whether its JSON report came back.
    pub has_report: bool,
    /// With `--check`: the expectation outcome (`unmet`: the lines not met).
    pub expectations: Option<&'a Value>,
    /// The JSON report, when one came back.
    pub report: Option<&'a Value>,
}

/// A scanned server's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerStatus {
    /// Not run, and why.
    Skipped(String),
    /// No report came back (the child failed or was stopped before writing one).
    NoReport,
    /// With `--check`: this many expectations were not met.
    Unmet(usize),
    /// With `--check`: every expectation was met.
    ExpectationsMet,
    /// Findings failed the run (exit 1).
    Failed,
    /// The run passed, and its report still holds warnings or errors no baseline accepted
    /// (a weak contradiction, with `--fail-on never` a firm one).
    PassedWithWarnings,
    /// The run passed with no warning or error left (notes and accepted findings aside).
    Clean,
    /// Nothing was verified (exit 4).
    NothingVerified,
    /// A signal interrupted the run (exit 130 or 143); its report is partial.
    Interrupted,
    /// The run ended in a harness, usage or sandbox error.
    Error,
}

impl ServerStatus {
    /// The outcome of a server's line.
    pub fn of(facts: StatusFacts<'_>) -> ServerStatus {
        if let Some(why) = facts.skipped {
            return ServerStatus::Skipped(why.to_string());
        }
        if !facts.has_report {
            return ServerStatus::NoReport;
        }
        if let Some(unmet) = facts.expectations.and_then(|e| e["unmet"].as_array()) {
            return match unmet.len() {
                0 => ServerStatus::ExpectationsMet,
                n => ServerStatus::Unmet(n),
            };
        }
        match facts.exit_code {
            exit_code::CONTRADICTIONS => ServerStatus::Failed,
            exit_code::NOTHING_VERIFIED => ServerStatus::NothingVerified,
            exit_code::OK if has_warnings(facts.report) => ServerStatus::PassedWithWarnings,
            exit_code::OK => ServerStatus::Clean,
            exit_code::INTERRUPTED_BY_SIGINT | exit_code::INTERRUPTED_BY_SIGTERM => {
                ServerStatus::Interrupted
            }
            _ => ServerStatus::Error,
        }
    }

    /// In a few words, without the skip's reason (`skipped`).
    pub fn words(&self) -> String {
        match self {
            ServerStatus::Skipped(_) => "skipped".into(),
            ServerStatus::NoReport => "no report".into(),
            ServerStatus::Unmet(n) => format!("{n} expectation(s) unmet"),
            ServerStatus::ExpectationsMet => "expectations met".into(),
            ServerStatus::Failed => "failed".into(),
            ServerStatus::PassedWithWarnings => "passed with warnings".into(),
            ServerStatus::Clean => "clean".into(),
            ServerStatus::NothingVerified => "nothing verified".into(),
            ServerStatus::Interrupted => "interrupted".into(),
            ServerStatus::Error => "error".into(),
        }
    }

    /// In a few words, a skip with its reason: `skipped (remote only)`.
    pub fn line(&self) -> String {
        match self {
            ServerStatus::Skipped(why) => format!("skipped ({why})"),
            other => other.words(),
        }
    }

    /// The class a page colours it by: `clean`, `warning`, `contradicted`, `unexercised`,
    /// `skipped` or `error`.
    pub fn class(&self) -> &'static str {
        match self {
            ServerStatus::Skipped(_) => "skipped",
            ServerStatus::NoReport
            | ServerStatus::Unmet(_)
            | ServerStatus::Error
            | ServerStatus::Interrupted => "error",
            ServerStatus::ExpectationsMet | ServerStatus::Clean => "clean",
            ServerStatus::Failed => "contradicted",
            ServerStatus::PassedWithWarnings => "warning",
            ServerStatus::NothingVerified => "unexercised",
        }
    }

    /// The exit code to show in a table: `-` for a server that was not run.
    pub fn exit_cell(&self, exit_code: i32) -> String {
        match self {
            ServerStatus::Skipped(_) => "-".into(),
            _ => exit_code.to_string(),
        }
    }
}

/// Whether a report holds a warning or an error that no baseline accepted (a contradicted
/// hint is one of them).
fn has_warnings(report: Option<&Value>) -> bool {
    // The variants' findings count as the default run's do.
    let variants = report
        .and_then(|r| r["variants"].as_array())
        .into_iter()
        .flatten();
    report
        .into_iter()
        .chain(variants)
        .filter_map(|r| r["findings"].as_array())
        .flatten()
        .any(|f| {
            matches!(f["severity"].as_str(), Some("warning" | "error")) && f["accepted"].is_null()
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn of(exit_code: i32, report: Value) -> ServerStatus {
        ServerStatus::of(StatusFacts {
            exit_code,
            skipped: None,
            has_report: true,
            expectations: None,
            report: Some(&report),
        })
    }

    #[test]
    fn a_passed_run_with_findings_is_not_clean() {
        let weak = json!({"findings": [{"severity": "warning"}, {"severity": "note"}]});
        assert_eq!(of(0, weak).line(), "passed with warnings");
        assert_eq!(
            of(0, json!({"findings": [{"severity": "error"}]})).class(),
            "warning"
        );
        // Notes, and what a baseline accepted, leave a run clean.
        let notes = json!({"findings": [{"severity": "note"}]});
        assert_eq!(of(0, notes).line(), "clean");
        let accepted = json!({"findings": [{"severity": "warning", "accepted": "known"}]});
        assert_eq!(of(0, accepted).line(), "clean");
        assert_eq!(of(0, json!({"findings": []})).line(), "clean");
        assert_eq!(of(1, json!({})).line(), "failed");
        assert_eq!(of(4, json!({})).line(), "nothing verified");
        assert_eq!(of(3, json!({})).class(), "error");
        assert_eq!(of(130, json!({})).line(), "interrupted");
    }

    #[test]
    fn skips_say_why_and_show_no_exit_code() {
        let skipped = ServerStatus::of(StatusFacts {
            exit_code: 0,
            skipped: Some("remote only"),
            has_report: false,
            expectations: None,
            report: None,
        });
        assert_eq!(skipped.line(), "skipped (remote only)");
        assert_eq!(skipped.exit_cell(0), "-");
        let unmet = json!({"unmet": ["x"]});
        let checked = ServerStatus::of(StatusFacts {
            exit_code: 1,
            skipped: None,
            has_report: true,
            expectations: Some(&unmet),
            report: None,
        });
        assert_eq!(checked.line(), "1 expectation(s) unmet");
    }
}
