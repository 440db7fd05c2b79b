//! JUnit XML in the Jenkins/Ant form most CI systems read: one `<testsuite>` per server, one
//! `<testcase>` per tool and hint (`classname="<server>.tools"`, `name="<tool>: <hint>"`) and
//! one `run` case for the server itself. A contradicted hint that fails the run is a
//! `<failure>`; a tool whose calls crashed or hung is an `<error>`; a hint that promises
//! nothing or was not exercised is `<skipped>`; evidence goes to `<system-out>` and the
//! server's stderr to the run case's `<system-err>`. Untrusted text is escaped and stripped of
//! characters XML 1.0 cannot carry.

use std::fmt::Write;

use super::{Report, ToolReport};
use crate::baseline::server_key;
use crate::finding::{Finding, HintVerdict, Verdict};
use crate::mcp::client::CallOutcome;

/// Escapes text for XML attributes and content (see [`crate::text::escape::xml`]).
pub fn escape(s: &str) -> String {
    crate::text::escape::xml(s)
}

enum Status {
    Passed,
    Failure { message: String, kind: String },
    Error { message: String },
    Skipped { message: String },
}

struct Case {
    name: String,
    classname: String,
    seconds: f64,
    status: Status,
    out: String,
    err: String,
}

/// Why every call of a tool ended without an answer (crash, hang, garbage), if so.
fn harness_failure(t: &ToolReport) -> Option<String> {
    // A tool that waits (the server still answered a ping) is not a harness failure.
    let waits = |c: &crate::evidence::CallRecord| matches!(c.outcome, CallOutcome::Waiting { .. });
    if t.calls.is_empty() || t.calls.iter().any(|c| c.outcome.answered() || waits(c)) {
        return None;
    }
    let what: Vec<String> = t
        .calls
        .iter()
        .map(|c| c.outcome.said().unwrap_or_else(|| c.outcome.label().into()))
        .collect();
    Some(what.join("; "))
}

/// A verdict's case output: what was declared, the verdict and why, then its evidence.
fn verdict_text(
    declared: &str,
    verdict: Verdict,
    reason: &str,
    evidence: &[crate::finding::Evidence],
) -> String {
    let mut out = format!(
        "declared: {declared}\nverdict: {}\n{reason}\n",
        verdict.as_str()
    );
    for e in evidence {
        let _ = writeln!(out, "{}: {}", e.source, e.labelled());
    }
    out
}

fn hint_case(r: &Report, t: &ToolReport, v: &HintVerdict, server: &str) -> Case {
    let mut out = verdict_text(&v.declared, v.verdict, &v.reason, &v.evidence);
    let finding = r.verdict_finding(&t.name, v);
    let status = match (v.verdict, finding) {
        (Verdict::Contradicted, Some(f)) => {
            if let Some(why) = &f.accepted {
                let _ = writeln!(out, "{why}");
                Status::Passed
            } else if r.settings.fail.fails(f) {
                Status::Failure {
                    message: f.message.clone(),
                    kind: f.audit.to_string(),
                }
            } else {
                Status::Passed
            }
        }
        (Verdict::Contradicted | Verdict::Consistent, _) => Status::Passed,
        (Verdict::Unexercised, _) => match harness_failure(t) {
            Some(why) => Status::Error {
                message: format!("{}: {why}", t.name),
            },
            None => Status::Skipped {
                message: v.reason.clone(),
            },
        },
        (Verdict::NotApplicable, _) => Status::Skipped {
            message: match &t.skipped {
                Some(why) => format!("not called: {why}"),
                None => v.reason.clone(),
            },
        },
    };
    let tool_ms: u64 = t.calls.iter().map(|c| c.duration_ms).sum();
    // A resolved hint's case is numbered among the tool's resolutions of that hint (its
    // arguments name the run's paths, which would change the name between runs).
    let name = match &v.resolved_for {
        Some(arguments) => {
            let n = t
                .resolved
                .iter()
                .filter(|o| o.hint == v.hint)
                .position(|o| o.resolved_for.as_ref() == Some(arguments))
                .unwrap_or(0);
            let _ = writeln!(out, "resolved with tools/resolve for {arguments}");
            format!("{}: {} resolved #{}", t.name, v.hint.key(), n + 1)
        }
        None => format!("{}: {}", t.name, v.hint.key()),
    };
    Case {
        name,
        classname: format!("{server}.tools"),
        seconds: tool_ms as f64 / 1000.0 / 4.0,
        status,
        out,
        err: String::new(),
    }
}

/// A case per data label a tool declared (or its results carried): failed where its
/// contradiction fails the run, passed where consistent (or accepted), skipped otherwise.
fn label_case(
    r: &Report,
    t: &ToolReport,
    v: &crate::audit::data_labels::LabelVerdict,
    server: &str,
) -> Case {
    let declared = format!("{} ({})", v.declared, v.declared_in);
    let mut out = verdict_text(&declared, v.verdict, &v.reason, &v.evidence);
    let finding = r.label_finding(&t.name, v.label);
    if let Some(why) = finding.and_then(|f| f.accepted.as_ref()) {
        let _ = writeln!(out, "{why}");
    }
    let status = match (v.verdict, finding) {
        (Verdict::Contradicted, Some(f)) if f.accepted.is_none() && r.settings.fail.fails(f) => {
            Status::Failure {
                message: f.message.clone(),
                kind: f.audit.to_string(),
            }
        }
        (Verdict::Contradicted | Verdict::Consistent, _) => Status::Passed,
        (Verdict::Unexercised | Verdict::NotApplicable, _) => Status::Skipped {
            message: v.reason.clone(),
        },
    };
    Case {
        name: format!("{}: {}", t.name, v.label),
        classname: format!("{server}.data-labels"),
        seconds: 0.0,
        status,
        out,
        err: String::new(),
    }
}

fn run_case(r: &Report, server: &str) -> Case {
    let mut out = format!("{} (exit {})\n", r.exit_reason, r.exit_code);
    let _ = writeln!(out, "sandbox: {} — {}", r.sandbox.level, r.sandbox.summary);
    let others: Vec<&Finding> = r.findings.iter().filter(|f| f.hint.is_none()).collect();
    for f in &others {
        let _ = writeln!(
            out,
            "[{}] {}{}: {}{}",
            f.severity.as_str(),
            f.audit,
            f.category_tag(),
            f.message,
            f.accepted
                .as_ref()
                .map(|a| format!(" ({a})"))
                .unwrap_or_default()
        );
    }
    let failing: Vec<&&Finding> = others.iter().filter(|f| r.settings.fail.fails(f)).collect();
    let status = if let Some(e) = &r.server.start_error {
        Status::Error { message: e.clone() }
    } else if let Some(p) = &r.partial {
        Status::Error {
            message: format!("the run did not complete: {p}"),
        }
    } else if let Some(first) = failing.first() {
        Status::Failure {
            message: format!("{} finding(s); first: {}", failing.len(), first.message),
            kind: first.audit.to_string(),
        }
    } else {
        Status::Passed
    };
    Case {
        name: "run".into(),
        classname: format!("{server}.server"),
        seconds: r.duration_ms as f64 / 1000.0,
        status,
        out,
        err: r.server.stderr.clone(),
    }
}

/// A case per tool (or the server) that handed a planted secret on: failed where one of its
/// secret findings fails the run, passed (with the findings in its output) otherwise.
fn secret_cases(r: &Report, server: &str) -> Vec<Case> {
    let mut by_tool: std::collections::BTreeMap<Option<&str>, Vec<&Finding>> =
        std::collections::BTreeMap::new();
    for f in r
        .findings
        .iter()
        .filter(|f| crate::audit::about_secrets(f.audit))
    {
        by_tool.entry(f.tool.as_deref()).or_default().push(f);
    }
    by_tool
        .into_iter()
        .map(|(tool, findings)| {
            let mut out = String::new();
            for f in &findings {
                let _ = writeln!(out, "[{}] {}: {}", f.severity.as_str(), f.audit, f.message);
                for e in &f.evidence {
                    let _ = writeln!(out, "  {}: {}", e.source, e.text);
                }
            }
            let status = match findings.iter().find(|f| r.settings.fail.fails(f)) {
                Some(first) => Status::Failure {
                    message: first.message.clone(),
                    kind: first.audit.to_string(),
                },
                None => Status::Passed,
            };
            Case {
                name: tool.unwrap_or("(server)").to_string(),
                classname: format!("{server}.secrets"),
                seconds: 0.0,
                status,
                out,
                err: String::new(),
            }
        })
        .collect()
}

/// Renders the report as JUnit XML.
pub fn render(r: &Report) -> String {
    let server = server_key(r);
    let mut cases = vec![run_case(r, &server)];
    cases.extend(secret_cases(r, &server));
    for t in &r.tools {
        cases.extend(t.all_verdicts().map(|v| hint_case(r, t, v, &server)));
        cases.extend(t.labels.iter().map(|v| label_case(r, t, v, &server)));
    }
    // Each variant's cases, in classes of their own (`<server>.variant.<name>.tools`, …).
    for v in &r.variants {
        let class = format!("{server}.variant.{}", v.name);
        cases.push(run_case(&v.report, &class));
        cases.extend(secret_cases(&v.report, &class));
        for t in &v.report.tools {
            cases.extend(t.all_verdicts().map(|h| hint_case(&v.report, t, h, &class)));
            cases.extend(t.labels.iter().map(|l| label_case(&v.report, t, l, &class)));
        }
    }
    let count = |f: fn(&Status) -> bool| cases.iter().filter(|c| f(&c.status)).count();
    let failures = count(|s| matches!(s, Status::Failure { .. }));
    let errors = count(|s| matches!(s, Status::Error { .. }));
    let skipped = count(|s| matches!(s, Status::Skipped { .. }));
    let time = r.duration_ms as f64 / 1000.0;
    let stamp = crate::text::iso_utc(r.started_unix_ms);
    let mut o = String::new();
    o.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        o,
        "<testsuites name=\"hintcheck\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time:.3}\" timestamp=\"{stamp}\">",
        cases.len()
    );
    let _ = writeln!(
        o,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{time:.3}\" timestamp=\"{stamp}\">",
        escape(&server),
        cases.len()
    );
    o.push_str("    <properties>\n");
    let properties = [
        ("hintcheck.version", r.hintcheck_version.clone()),
        ("sandbox.level", r.sandbox.level.clone()),
        ("sandbox.enforced", r.sandbox.enforced.join(", ")),
        ("files_observed", r.coverage.files_observed.to_string()),
        ("network_observed", r.coverage.network_observed.to_string()),
        ("fail_on", r.settings.fail.on.as_str().to_string()),
        (
            "fail_except",
            r.settings
                .fail
                .except
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join(","),
        ),
        ("exit_code", r.exit_code.to_string()),
        (
            "config_file",
            r.settings.config_file.clone().unwrap_or_default(),
        ),
        (
            "settings_from",
            r.settings.sources_line().unwrap_or_default(),
        ),
    ];
    for (k, v) in properties {
        let _ = writeln!(o, "      <property name=\"{k}\" value=\"{}\"/>", escape(&v));
    }
    o.push_str("    </properties>\n");
    for c in &cases {
        let _ = writeln!(
            o,
            "    <testcase name=\"{}\" classname=\"{}\" time=\"{:.3}\">",
            escape(&c.name),
            escape(&c.classname),
            c.seconds
        );
        match &c.status {
            Status::Passed => {}
            Status::Failure { message, kind } => {
                let _ = writeln!(
                    o,
                    "      <failure message=\"{}\" type=\"{}\">{}</failure>",
                    escape(message),
                    escape(kind),
                    escape(&c.out)
                );
            }
            Status::Error { message } => {
                let _ = writeln!(
                    o,
                    "      <error message=\"{}\" type=\"harness\"/>",
                    escape(message)
                );
            }
            Status::Skipped { message } => {
                let _ = writeln!(o, "      <skipped message=\"{}\"/>", escape(message));
            }
        }
        let _ = writeln!(o, "      <system-out>{}</system-out>", escape(&c.out));
        if !c.err.is_empty() {
            let _ = writeln!(o, "      <system-err>{}</system-err>", escape(&c.err));
        }
        o.push_str("    </testcase>\n");
    }
    o.push_str("  </testsuite>\n</testsuites>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_covers_markup_and_forbidden_characters() {
        assert_eq!(
            escape("a<b & \"c\"\u{1}"),
            "a&lt;b &amp; &quot;c&quot;\\u{1}"
        );
        assert_eq!(escape("ok\ttab\nline"), "ok\ttab\nline");
    }

    #[test]
    fn timestamps_are_iso_8601_utc() {
        assert_eq!(crate::text::iso_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            crate::text::iso_utc(1_796_010_886_000),
            "2026-11-30T03:54:46Z"
        );
        assert_eq!(
            crate::text::iso_utc(951_782_400_000),
            "2000-02-29T00:00:00Z"
        );
    }
}
