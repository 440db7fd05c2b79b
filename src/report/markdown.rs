//! The Markdown summary, made for `$GITHUB_STEP_SUMMARY` (GitHub-flavoured Markdown): the
//! result and its exit code, what the sandbox enforced and what was observed, the contradicted
//! hints with their first evidence, a matrix of every tool's hints and verdicts, evidence per
//! tool in collapsible sections, and the other findings. GitHub rejects a step summary over
//! 1 MiB, so the summary stops adding detail at [`BUDGET`] bytes and says how much it left out.
//! Text from the server is escaped so that it can neither break the tables nor inject HTML.

use std::fmt::Write;

use super::{Report, ToolReport};
use crate::baseline::server_key;
use crate::finding::{HintVerdict, Verdict};
use crate::mcp::client::Era;

/// The most bytes the summary uses (GitHub allows 1 MiB per step; leave room for others).
pub const BUDGET: usize = 400 * 1024;

/// The most tools listed in the matrix.
const MATRIX_ROWS: usize = 300;

/// Escapes untrusted text for a table cell or a list item.
pub fn md(s: &str) -> String {
    crate::text::escape::markdown(s)
}

fn shorten(s: &str, max: usize) -> String {
    crate::mcp::tool::shorten(s, max)
}

fn icon(v: &HintVerdict) -> &'static str {
    verdict_icon(v.verdict, v.uncertain)
}

fn verdict_icon(verdict: Verdict, uncertain: bool) -> &'static str {
    match verdict {
        Verdict::Contradicted if uncertain => "⚠️",
        Verdict::Contradicted => "❌",
        Verdict::Consistent => "✅",
        Verdict::Unexercised => "⚪",
        Verdict::NotApplicable => "➖",
    }
}

fn cell(v: &HintVerdict) -> String {
    format!("{} {}", icon(v), md(&v.declared))
}

/// A verdict's first five pieces of evidence, a sub-item each.
fn evidence_lines(o: &mut String, evidence: &[crate::finding::Evidence]) {
    for e in evidence.iter().take(5) {
        let _ = writeln!(
            o,
            "  - {}: {}",
            md(&e.source),
            md(&shorten(&e.labelled(), 300))
        );
    }
}

fn tool_details(o: &mut String, r: &Report, t: &ToolReport) {
    let _ = writeln!(o, "\n#### {}\n", md(&t.name));
    if let Some(s) = &t.skipped {
        let _ = writeln!(o, "- not called: {}", md(s));
        return;
    }
    for v in t.all_verdicts() {
        let _ = writeln!(
            o,
            "- {} **{}** ({} {}): {}: {}",
            icon(v),
            v.hint.key(),
            if v.source.is_some() {
                "resolved by tools/resolve to"
            } else {
                "declared"
            },
            md(&v.declared),
            v.verdict.as_str(),
            md(&shorten(&v.reason, 300))
        );
        evidence_lines(o, &v.evidence);
    }
    for v in &t.labels {
        let weak = r
            .label_finding(&t.name, v.label)
            .is_some_and(|f| f.severity != crate::finding::Severity::Error || f.accepted.is_some());
        let _ = writeln!(
            o,
            "- {} data label **{}** (declared {} in {}): {}: {}",
            verdict_icon(v.verdict, weak),
            v.label,
            md(&v.declared),
            v.declared_in,
            v.verdict.as_str(),
            md(&shorten(&v.reason, 300))
        );
        evidence_lines(o, &v.evidence);
    }
    let supported: Vec<String> = t
        .supported
        .iter()
        .filter(|s| s.changed)
        .map(|s| format!("{}: {} ({})", s.hint.key(), s.value, s.basis.as_str()))
        .collect();
    if !supported.is_empty() {
        let _ = writeln!(o, "- suggested: {}", supported.join(", "));
    }
}

/// Renders the summary.
pub fn render(r: &Report) -> String {
    let mut o = String::new();
    header(&mut o, r);
    contradicted(&mut o, r);
    variants(&mut o, r);
    secrets(&mut o, r);
    tools(&mut o, r);
    other_findings(&mut o, r);
    replays(&mut o, r);
    footer(&mut o, r);
    o
}

/// Each configuration run beside the default one: its settings, its result and its
/// contradicted hints.
fn variants(o: &mut String, r: &Report) {
    if r.variants.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n### Variants\n");
    let _ = writeln!(o, "| variant | settings | result | contradicted |");
    let _ = writeln!(o, "|---|---|---|---|");
    for v in &r.variants {
        let contradicted: Vec<String> = v
            .report
            .tools
            .iter()
            .flat_map(|t| {
                t.all_verdicts()
                    .filter(|h| h.verdict == Verdict::Contradicted)
                    .map(move |h| format!("{} {}: {}", md(&t.name), h.hint.key(), md(&h.declared)))
            })
            .collect();
        let _ = writeln!(
            o,
            "| {} | {} | {} (exit {}) | {} |",
            md(&v.name),
            md(&v.settings.join(", ")),
            md(&shorten(&v.report.exit_reason, 200)),
            v.report.exit_code,
            if contradicted.is_empty() {
                "none".to_string()
            } else {
                contradicted.join("<br>")
            }
        );
    }
}

/// The title with the result, then the run: protocol, coverage, sandbox, baseline.
fn header(o: &mut String, r: &Report) {
    let server = server_key(r);
    let version = r.server.info("version").unwrap_or("");
    let mark = match r.exit_code {
        0 => "✅",
        1 => "❌",
        _ => "⚠️",
    };
    let _ = writeln!(o, "## {mark} hintcheck: {} {}\n", md(&server), md(version));
    let _ = writeln!(
        o,
        "**Result:** {} (exit {})",
        md(&r.exit_reason),
        r.exit_code
    );
    if let Some(p) = &r.partial {
        let _ = writeln!(o, "\n**Partial run:** {}", md(p));
    }
    if let Some(e) = &r.server.start_error {
        let _ = writeln!(o, "\n**The server could not be verified:** {}", md(e));
    }
    if let Some(id) = &r.server.identity {
        let era = match &id.era {
            Era::Modern(v) => format!("modern era, {}", md(v)),
            Era::Legacy(v) => format!("handshake era, {}", md(v)),
        };
        let _ = writeln!(o, "\n**Protocol:** {era}");
    }
    let c = &r.coverage;
    let _ = writeln!(o, "\n**Coverage:** {}", c.describe());
    let _ = writeln!(
        o,
        "\n**Observed:** file effects {} · network {}",
        if c.files_observed { "yes" } else { "**no**" },
        if c.network_observed { "yes" } else { "**no**" }
    );
    let _ = writeln!(
        o,
        "\n**Sandbox:** {} — {}",
        md(&r.sandbox.level),
        md(&r.sandbox.summary)
    );
    if let Some(b) = &r.baseline {
        let _ = writeln!(
            o,
            "\n**Baseline:** {} finding(s) accepted by {}; {} stale entr{}",
            b.accepted,
            md(&b.path),
            b.stale.len(),
            if b.stale.len() == 1 { "y" } else { "ies" }
        );
        for (tool, _, _) in &b.changed_definitions {
            let _ = writeln!(
                o,
                "- the definition of {} changed since its findings were accepted",
                md(tool)
            );
        }
    }
}

/// The table of contradicted hints, with each one's first evidence.
fn contradicted(o: &mut String, r: &Report) {
    let contradicted: Vec<(&ToolReport, &HintVerdict)> = r
        .tools
        .iter()
        .flat_map(|t| t.all_verdicts().map(move |v| (t, v)))
        .filter(|(_, v)| v.verdict == Verdict::Contradicted)
        .collect();
    if !contradicted.is_empty() {
        let _ = writeln!(o, "\n### Contradicted hints\n");
        let _ = writeln!(o, "| tool | hint | declared | observed | first evidence |");
        let _ = writeln!(o, "|---|---|---|---|---|");
        for (t, v) in &contradicted {
            let accepted = r
                .verdict_finding(&t.name, v)
                .and_then(|f| f.accepted.as_ref());
            let first = v
                .evidence
                .first()
                .map(|e| format!("{}: {}", md(&e.source), md(&shorten(&e.labelled(), 160))))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "| {} {} | {} | {} | {}{}{} | {} |",
                icon(v),
                md(&t.name),
                match v.source {
                    Some(source) => format!("{} ({source})", v.hint.key()),
                    None => v.hint.key().to_string(),
                },
                md(&v.declared),
                md(&shorten(&v.reason, 200)),
                if v.uncertain { " (uncertain)" } else { "" },
                if accepted.is_some() {
                    " (accepted)"
                } else {
                    ""
                },
                first
            );
        }
    }
    let labels: Vec<(&ToolReport, &crate::audit::data_labels::LabelVerdict)> = r
        .tools
        .iter()
        .flat_map(|t| t.labels.iter().map(move |v| (t, v)))
        .filter(|(_, v)| v.verdict == Verdict::Contradicted)
        .collect();
    if !labels.is_empty() {
        let _ = writeln!(o, "\n### Contradicted data labels\n");
        let _ = writeln!(o, "| tool | label | declared | observed | first evidence |");
        let _ = writeln!(o, "|---|---|---|---|---|");
        for (t, v) in labels {
            let finding = r.label_finding(&t.name, v.label);
            let first = v
                .evidence
                .first()
                .map(|e| format!("{}: {}", md(&e.source), md(&shorten(&e.labelled(), 160))))
                .unwrap_or_default();
            let _ = writeln!(
                o,
                "| {} {} | {} | {} | {}{} | {} |",
                verdict_icon(
                    v.verdict,
                    finding.is_some_and(|f| f.severity != crate::finding::Severity::Error)
                ),
                md(&t.name),
                v.label,
                md(&v.declared),
                md(&shorten(&v.reason, 200)),
                if finding.is_some_and(|f| f.accepted.is_some()) {
                    " (accepted)"
                } else {
                    ""
                },
                first
            );
        }
    }
}

/// The matrix of every tool's hints, then each tool's reasons and evidence (within the
/// size budget).
fn tools(o: &mut String, r: &Report) {
    if !r.tools.is_empty() {
        let _ = writeln!(o, "\n### Tools\n");
        let _ = writeln!(
            o,
            "| tool | readOnlyHint | destructiveHint | idempotentHint | openWorldHint | calls |"
        );
        let _ = writeln!(o, "|---|---|---|---|---|---|");
        for t in r.tools.iter().take(MATRIX_ROWS) {
            let cells: Vec<String> = t.verdicts.iter().map(cell).collect();
            let ok = t.calls.iter().filter(|c| c.outcome.is_success()).count();
            let calls = match &t.skipped {
                Some(_) => "skipped".to_string(),
                None => format!("{ok}/{} ok", t.calls.len()),
            };
            let _ = writeln!(o, "| {} | {} | {calls} |", md(&t.name), cells.join(" | "));
        }
        if r.tools.len() > MATRIX_ROWS {
            let _ = writeln!(
                o,
                "\n{} more tool(s) in the JSON or SARIF report.",
                r.tools.len() - MATRIX_ROWS
            );
        }
        let _ = writeln!(
            o,
            "\n❌ contradicted · ⚠️ contradicted, uncertain · ✅ consistent · ⚪ not exercised · ➖ promises nothing (absent or the spec's default); each cell shows the declared value."
        );
        let _ = writeln!(
            o,
            "\n<details><summary>Reasons and evidence per tool</summary>\n"
        );
        let mut left_out = 0;
        for t in &r.tools {
            let mut section = String::new();
            tool_details(&mut section, r, t);
            if o.len() + section.len() > BUDGET {
                left_out += 1;
                continue;
            }
            o.push_str(&section);
        }
        if left_out > 0 {
            let _ = writeln!(
                o,
                "\n{left_out} tool(s) left out to keep the summary small; the JSON report has them."
            );
        }
        let _ = writeln!(o, "\n</details>");
    }
}

/// The planted secrets handed on (`secret-access`, `exfiltration`), near the top: what a
/// user scanning a server fears most. Two pieces of evidence each.
fn secrets(o: &mut String, r: &Report) {
    let handed: Vec<_> = r
        .findings
        .iter()
        .filter(|f| crate::audit::about_secrets(f.audit))
        .collect();
    if handed.is_empty() {
        return;
    }
    let _ = writeln!(o, "\n### Planted secrets handed on\n");
    for f in handed {
        let _ = writeln!(
            o,
            "- **{}** {}: {}{}",
            f.severity.as_str(),
            f.audit,
            md(&shorten(&f.message, 300)),
            if f.accepted.is_some() {
                " (accepted)"
            } else {
                ""
            }
        );
        for e in f.evidence.iter().take(2) {
            let _ = writeln!(o, "  - {}: {}", md(&e.source), md(&shorten(&e.text, 300)));
        }
    }
}

/// Findings about no hint (protocol, definitions, limits), within the size budget; the
/// secrets' are above.
fn other_findings(o: &mut String, r: &Report) {
    let others: Vec<_> = r
        .findings
        .iter()
        .filter(|f| f.hint.is_none() && !crate::audit::about_secrets(f.audit))
        .collect();
    if !others.is_empty() {
        let _ = writeln!(o, "\n### Other findings\n");
        for (i, f) in others.iter().enumerate() {
            if o.len() > BUDGET {
                let _ = writeln!(o, "- … {} more in the JSON report", others.len() - i);
                break;
            }
            let _ = writeln!(
                o,
                "- **{}** {}{}: {}{}",
                f.severity.as_str(),
                f.audit,
                f.category_tag(),
                md(&shorten(&f.message, 300)),
                if f.accepted.is_some() {
                    " (accepted)"
                } else {
                    ""
                }
            );
        }
    }
}

/// The replays that decided attribution.
fn replays(o: &mut String, r: &Report) {
    if !r.replays.is_empty() {
        let _ = writeln!(
            o,
            "\n<details><summary>Replays that decided attribution ({})</summary>\n",
            r.replays.len()
        );
        for x in &r.replays {
            let _ = writeln!(o, "- replay {}: {}", x.id, md(&x.summary()));
        }
        let _ = writeln!(o, "\n</details>");
    }
}

/// The version, seed and settings the run used, and where they came from.
fn footer(o: &mut String, r: &Report) {
    let config = r
        .settings
        .config_file
        .as_ref()
        .map(|f| format!(" · config {}", md(f)))
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "\n<sub>hintcheck {} · seed {} · {} call(s) per tool · fail on {} · {:.1} s{config}</sub>",
        md(&r.hintcheck_version),
        r.settings.seed,
        r.settings.repeat,
        r.settings.fail.on.as_str(),
        r.duration_ms as f64 / 1000.0
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untrusted_text_cannot_break_tables_or_inject_html() {
        assert_eq!(md("a|b"), "a\\|b");
        assert_eq!(md("<script>"), "&lt;script&gt;");
        assert_eq!(
            md("x\ny"),
            "x\\\\ny",
            "newlines are escaped, then the backslash"
        );
        assert_eq!(md("[link](http://x)"), "\\[link\\](http://x)");
    }
}
