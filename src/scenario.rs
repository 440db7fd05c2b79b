//! Scenario files (`scenarios/<name>/scenario.toml`): a server to verify (the harness's fake
//! server by default, or a real command), run settings, and what the report must and must not
//! contain. hintcheck reads `[meta]`, `[server]`, `[run]` and `[expect]`; `[fake]` and
//! `[[tools]]` are the fake server's, checked when the file is loaded with the fake
//! server's own types. The format is documented in
//! `scenarios/README.md`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::audit::suggest::SupportBasis;
use crate::config::options::{RunOptions, ServerOptions};
use crate::finding::Severity;
use crate::report::Report;

/// Errors reading a scenario.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read scenario {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid scenario.
    #[error("invalid scenario {}{}: {problem}", path.display(), problem.location())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        problem: Box<crate::text::toml::TomlProblem>,
    },
}

/// A scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Description.
    #[serde(default)]
    pub meta: Meta,
    /// The server.
    #[serde(default)]
    pub server: ServerOptions,
    /// Run settings.
    #[serde(default)]
    pub run: RunOptions,
    /// What to install before the run (outside the sandbox).
    #[serde(default)]
    pub setup: crate::fleet::setup::SetupSection,
    /// Expectations.
    #[serde(default)]
    pub expect: Option<Expect>,
    /// The fake server's settings (read by the fake server).
    #[serde(default)]
    pub fake: Option<toml::Value>,
    /// The fake server's tools (read by the fake server).
    #[serde(default)]
    pub tools: Option<toml::Value>,
    /// The configurations run beside the default one (see [`crate::config::variants`]).
    #[serde(default)]
    pub variants: Vec<crate::config::variants::VariantSpec>,
    /// Where the file is.
    #[serde(skip)]
    pub path: PathBuf,
}

/// `[meta]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// Short id.
    pub id: Option<String>,
    /// One line.
    pub description: Option<String>,
    /// Related issues.
    #[serde(default)]
    pub issues: Vec<u32>,
}

/// `[expect]`: what the report must (and must not) say.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The exit code.
    pub exit: Option<i32>,
    /// `tool:hintName` pairs that must be contradicted.
    #[serde(default)]
    pub contradicted: Vec<String>,
    /// `tool:hintName` pairs of `contradicted` whose contradiction must stay a warning (no
    /// piece of its evidence firm: uncertain, unconfirmed, of a softening category). Every
    /// other pair of `contradicted` must be firm (an error), so that an expected lie cannot
    /// turn weak unnoticed; pairs listed in `categorised` say by their category why they are
    /// weak and need not be listed here.
    #[serde(default)]
    pub weak: Vec<String>,
    /// `tool:hintName` pairs that must be consistent.
    #[serde(default)]
    pub consistent: Vec<String>,
    /// `tool:hintName` pairs that must be unexercised.
    #[serde(default)]
    pub unexercised: Vec<String>,
    /// `audit` or `audit:tool` findings that must be present.
    #[serde(default)]
    pub findings: Vec<String>,
    /// `audit` or `audit:tool` findings that must be absent.
    #[serde(default)]
    pub absent: Vec<String>,
    /// Whether contradictions not listed in `contradicted` are failures (default true).
    #[serde(default = "yes")]
    pub only_listed_contradictions: bool,
    /// Tools that must be skipped.
    #[serde(default)]
    pub skipped: Vec<String>,
    /// `tool:hintName=true|false`: the value the observations must support (`hintcheck
    /// suggest`), backed by what was observed or consistent with it (not merely kept).
    #[serde(default)]
    pub suggested: Vec<String>,
    /// Tools that must get at least one successful (not error-like) call.
    #[serde(default)]
    pub reached: Vec<String>,
    /// `tool:hintName=category` (the contradiction's finding rests only on effects of that
    /// category: bookkeeping, first-call-initialisation, transient, update, own-installation) or
    /// `audit=category` (some finding of the audit has it).
    #[serde(default)]
    pub categorised: Vec<String>,
    /// The least share (0 to 1) of the tools that can work here (listed, not skipped, not
    /// needing what this machine cannot give) that must get a successful call.
    pub reach: Option<f64>,
    /// The transport the server was spoken to over (`stdio`, `http`, `http+sse` for the older
    /// HTTP+SSE transport that `http` falls back to).
    pub transport: Option<String>,
}

fn yes() -> bool {
    true
}

impl Scenario {
    /// Reads a scenario from a file, or from `scenario.toml` inside a directory.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let file = if path.is_dir() {
            path.join("scenario.toml")
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read_to_string(&file).map_err(|source| ScenarioError::Read {
            path: file.clone(),
            source,
        })?;
        let mut s: Scenario = toml::from_str(&text).map_err(|e| ScenarioError::Invalid {
            path: file.clone(),
            problem: Box::new(crate::text::toml::TomlProblem::new(&text, &e)),
        })?;
        // The fake server's sections, checked now as it will read them: a mistake there
        // would otherwise end the run as a server that died before the handshake.
        if s.fake.is_some() || s.tools.is_some() {
            hintcheck_harness::check_scenario(&text).map_err(|e| ScenarioError::Invalid {
                path: file.clone(),
                problem: Box::new(crate::text::toml::TomlProblem::new(&text, &e)),
            })?;
        }
        s.path = std::path::absolute(&file).unwrap_or(file);
        Ok(s)
    }

    /// The directory the scenario file is in.
    pub fn dir(&self) -> PathBuf {
        self.path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }
}

/// Checks a report against `[expect]`; returns one line per unmet expectation.
pub fn check(expect: &Expect, report: &Report) -> Vec<String> {
    let mut failures = Vec::new();
    check_run(expect, report, &mut failures);
    check_verdicts(expect, report, &mut failures);
    check_findings(expect, report, &mut failures);
    check_suggestions(expect, report, &mut failures);
    check_categories(expect, report, &mut failures);
    check_reach(expect, report, &mut failures);
    failures
}

/// The exit code and the transport.
fn check_run(expect: &Expect, report: &Report, failures: &mut Vec<String>) {
    if let Some(code) = expect.exit
        && report.exit_code != code
    {
        failures.push(format!("exit code {} (expected {code})", report.exit_code));
    }
    if let Some(want) = &expect.transport
        && &report.settings.transport != want
    {
        failures.push(format!(
            "transport {} (expected {want})",
            report.settings.transport
        ));
    }
}

/// The verdicts listed, and (unless turned off) no contradiction beyond those listed.
fn check_verdicts(expect: &Expect, report: &Report, failures: &mut Vec<String>) {
    let verdict_of = |pair: &str| -> Result<Option<&str>, String> {
        let (tool, hint) = pair
            .split_once(':')
            .ok_or_else(|| format!("{pair:?} is not tool:hintName"))?;
        let t = report
            .tools
            .iter()
            .find(|t| t.name == tool)
            .ok_or_else(|| format!("{pair}: no tool {tool:?} in the report"))?;
        Ok(t.verdicts
            .iter()
            .find(|v| v.hint.key() == hint)
            .map(|v| v.verdict.as_str()))
    };
    for (list, want) in [
        (&expect.contradicted, "contradicted"),
        (&expect.consistent, "consistent"),
        (&expect.unexercised, "unexercised"),
    ] {
        for pair in list {
            match verdict_of(pair) {
                Ok(Some(got)) if got == want => {}
                Ok(Some(got)) => failures.push(format!("{pair}: {got} (expected {want})")),
                Ok(None) => failures.push(format!("{pair}: no verdict (expected {want})")),
                Err(e) => failures.push(e),
            }
        }
    }
    check_firmness(expect, report, failures);
    if expect.only_listed_contradictions {
        for t in &report.tools {
            for v in &t.verdicts {
                let pair = format!("{}:{}", t.name, v.hint.key());
                if v.verdict.as_str() == "contradicted" && !expect.contradicted.contains(&pair) {
                    failures.push(format!(
                        "{pair}: contradicted, which no expectation lists (false accusation?)"
                    ));
                }
            }
            // A hint the server resolved is listed by its finding (`read-only:tool`).
            for v in &t.resolved {
                let finding = format!("{}:{}", v.audit, t.name);
                if v.verdict.as_str() == "contradicted" && !expect.findings.contains(&finding) {
                    failures.push(format!(
                        "{}:{} as resolved by tools/resolve: contradicted, which no expectation lists in findings as {finding} (false accusation?)",
                        t.name,
                        v.hint.key()
                    ));
                }
            }
        }
    }
}

/// Each expected contradiction is firm (an error), unless it is listed as weak or by its
/// category; each listed as weak is a warning.
fn check_firmness(expect: &Expect, report: &Report, failures: &mut Vec<String>) {
    let severity_of = |pair: &str| {
        let (tool, hint) = pair.split_once(':')?;
        report
            .findings
            .iter()
            .find(|f| {
                f.tool.as_deref() == Some(tool)
                    && f.hint.is_some_and(|h| h.key() == hint)
                    && f.resolved_for.is_none()
            })
            .map(|f| f.severity)
    };
    let categorised = |pair: &str| {
        expect
            .categorised
            .iter()
            .any(|c| c.split_once('=').is_some_and(|(what, _)| what == pair))
    };
    for pair in &expect.weak {
        if !expect.contradicted.contains(pair) {
            failures.push(format!("{pair}: listed as weak but not as contradicted"));
        } else if severity_of(pair) == Some(Severity::Error) {
            failures.push(format!(
                "{pair}: a firm contradiction (an error), expected weak (a warning)"
            ));
        }
    }
    for pair in &expect.contradicted {
        if expect.weak.contains(pair) || categorised(pair) {
            continue;
        }
        match severity_of(pair) {
            Some(Severity::Error) | None => {}
            Some(other) => failures.push(format!(
                "{pair}: a weak contradiction ({}), expected firm (an error); list it under weak if that is right",
                other.as_str()
            )),
        }
    }
}

/// Findings present and absent, and tools skipped.
fn check_findings(expect: &Expect, report: &Report, failures: &mut Vec<String>) {
    let has_finding = |spec: &str| -> bool {
        let (audit, tool) = match spec.split_once(':') {
            Some((a, t)) => (a, Some(t)),
            None => (spec, None),
        };
        report
            .findings
            .iter()
            .any(|f| f.audit == audit && tool.is_none_or(|t| f.tool.as_deref() == Some(t)))
    };
    for spec in &expect.findings {
        if !has_finding(spec) {
            failures.push(format!("finding {spec} is missing"));
        }
    }
    for spec in &expect.absent {
        if has_finding(spec) {
            failures.push(format!("finding {spec} must be absent but is present"));
        }
    }
    for tool in &expect.skipped {
        match report.tools.iter().find(|t| &t.name == tool) {
            Some(t) if t.skipped.is_some() => {}
            Some(_) => failures.push(format!("{tool}: expected to be skipped")),
            None => failures.push(format!("{tool}: not in the report")),
        }
    }
}

/// The annotations the observations must support (`hintcheck suggest`).
fn check_suggestions(expect: &Expect, report: &Report, failures: &mut Vec<String>) {
    for spec in &expect.suggested {
        let parsed = spec.split_once(':').and_then(|(tool, rest)| {
            let (hint, value) = rest.split_once('=')?;
            Some((tool, hint, value.parse::<bool>().ok()?))
        });
        let Some((tool, hint, want)) = parsed else {
            failures.push(format!("{spec:?} is not tool:hintName=true|false"));
            continue;
        };
        let supported = report
            .tools
            .iter()
            .find(|t| t.name == tool)
            .and_then(|t| t.supported.iter().find(|s| s.hint.key() == hint));
        match supported {
            Some(s) if s.value == want && s.basis != SupportBasis::Unverified => {}
            Some(s) => failures.push(format!(
                "{tool}:{hint}: supported {} ({}), expected {want}",
                s.value,
                s.basis.as_str()
            )),
            None => failures.push(format!("{tool}:{hint}: no such tool or hint in the report")),
        }
    }
}

/// The categories findings must have.
fn check_categories(expect: &Expect, report: &Report, failures: &mut Vec<String>) {
    for spec in &expect.categorised {
        let Some((what, category)) = spec.split_once('=') else {
            failures.push(format!(
                "{spec:?} is not tool:hintName=category or audit=category"
            ));
            continue;
        };
        let found: Vec<Option<&str>> = report
            .findings
            .iter()
            .filter(|f| match what.split_once(':') {
                Some((tool, hint)) => {
                    f.tool.as_deref() == Some(tool)
                        && f.hint.is_some_and(|h| h.key() == hint)
                        && f.resolved_for.is_none()
                }
                None => f.audit == what,
            })
            .map(|f| f.category.map(|c| c.as_str()))
            .collect();
        if !found.contains(&Some(category)) {
            failures.push(format!(
                "{what}: no finding of category {category} (found: {})",
                if found.is_empty() {
                    "no finding".to_string()
                } else {
                    found
                        .iter()
                        .map(|c| c.unwrap_or("none"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
        }
    }
}

/// The tools that must be reached, and the least share reached.
fn check_reach(expect: &Expect, report: &Report, failures: &mut Vec<String>) {
    for tool in &expect.reached {
        match report.tools.iter().find(|t| &t.name == tool) {
            Some(t) if t.calls.iter().any(|c| c.outcome.is_success()) => {}
            Some(t) => failures.push(format!(
                "{tool}: no successful call (expected one; last: {})",
                t.calls
                    .last()
                    .map_or("not called".to_string(), |c| c.outcome.label().to_string())
            )),
            None => failures.push(format!("{tool}: not in the report")),
        }
    }
    if let Some(want) = expect.reach {
        let (reached, possible) = reach(report);
        if possible > 0 && (reached as f64) < want * possible as f64 {
            let unreached: Vec<&str> = report
                .coverage
                .unreached
                .iter()
                .filter(|u| !u.unavailable_here)
                .map(|u| u.tool.as_str())
                .collect();
            failures.push(format!(
                "reach {reached}/{possible} is below {:.0}% (unreached: {})",
                want * 100.0,
                unreached.join(", ")
            ));
        }
    }
}

/// Tools with a successful call, and tools that can work here: listed, not skipped, and not
/// left unreached for want of what this machine cannot give.
pub fn reach(report: &Report) -> (usize, usize) {
    let reached = report
        .tools
        .iter()
        .filter(|t| t.calls.iter().any(|c| c.outcome.is_success()))
        .count();
    let unavailable = report
        .coverage
        .unreached
        .iter()
        .filter(|u| u.unavailable_here)
        .count();
    let skipped = report
        .tools
        .iter()
        .filter(|t| t.calls.is_empty() && t.skipped.is_some())
        .count();
    (
        reached,
        report.tools.len().saturating_sub(unavailable + skipped),
    )
}
