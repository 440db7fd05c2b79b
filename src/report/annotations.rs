//! GitHub workflow annotations: one `::error`, `::warning` or `::notice` command per finding,
//! printed to stdout, which GitHub shows on the run and on the pull request's changed files.
//! They work where SARIF cannot be uploaded (pull requests from forks, repositories without
//! code scanning). A finding about a tool is placed on the first line of an `--anchor` file that
//! quotes the tool's name (as the SARIF results are); one without such a line has no file and
//! shows on the run only. Findings a baseline accepted are left out.

use std::path::{Path, PathBuf};

use super::Report;
use super::anchor::{artifact_uri, find_quoted};
use crate::finding::Severity;

/// Most evidence lines added to an annotation's message.
const EVIDENCE_LINES: usize = 5;

/// The workflow commands for the report's findings, one per line.
pub fn render(r: &Report, anchor_files: &[PathBuf], source_root: &Path) -> String {
    let files: Vec<(PathBuf, String)> = anchor_files
        .iter()
        .filter_map(|p| Some((p.clone(), std::fs::read_to_string(p).ok()?)))
        .collect();
    let place = |tool: &str| -> Option<(String, usize)> {
        files.iter().find_map(|(path, text)| {
            let (line, _, _) = find_quoted(text, tool)?;
            let (uri, relative) = artifact_uri(path, source_root);
            relative.then_some((uri, line))
        })
    };
    let mut out = String::new();
    // The default run's findings, then each variant's, named with it.
    let findings = r.every_run().flat_map(|run| {
        run.findings
            .iter()
            .map(move |f| (run.settings.variant.as_ref(), f))
    });
    for (variant, f) in findings.filter(|(_, f)| f.accepted.is_none()) {
        let command = match f.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "notice",
        };
        let mut properties = Vec::new();
        if let Some((file, line)) = f.tool.as_deref().and_then(place) {
            properties.push(format!("file={}", property(&file)));
            properties.push(format!("line={line}"));
        }
        let title = match (&f.tool, f.hint) {
            (Some(tool), Some(hint)) => format!("hintcheck {}: {tool} {}", f.audit, hint.key()),
            (Some(tool), None) => format!("hintcheck {}: {tool}", f.audit),
            _ => format!("hintcheck {}", f.audit),
        };
        let title = match variant {
            Some(v) => format!("{title} (variant {v})"),
            None => title,
        };
        properties.push(format!("title={}", property(&title)));
        let mut message = match variant {
            Some(v) => format!("[variant {v}] {}", f.message),
            None => f.message.clone(),
        };
        for e in f.evidence.iter().take(EVIDENCE_LINES) {
            message.push_str(&format!("\n{}: {}", e.source, e.labelled()));
        }
        if f.evidence.len() > EVIDENCE_LINES {
            message.push_str(&format!(
                "\n… {} more in the report",
                f.evidence.len() - EVIDENCE_LINES
            ));
        }
        out.push_str(&format!(
            "::{command} {}::{}\n",
            properties.join(","),
            data(&message)
        ));
    }
    out
}

/// Escapes a command's message (see [`crate::text::escape::github_data`]).
fn data(s: &str) -> String {
    crate::text::escape::github_data(s)
}

/// Escapes a command's property value (see [`crate::text::escape::github_property`]).
fn property(s: &str) -> String {
    crate::text::escape::github_property(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_and_properties_are_escaped_as_github_reads_them() {
        assert_eq!(data("50% done\r\nnext"), "50%25 done\\u{d}%0Anext");
        assert_eq!(
            property("hintcheck read-only: a,b: c"),
            "hintcheck read-only%3A a%2Cb%3A c"
        );
        // A message cannot end the command early or start another one.
        assert!(!data("x\n::error::forged").contains('\n'));
    }
}
