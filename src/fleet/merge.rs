//! `hintcheck merge` and a scan's own summary: scan results read back from JSON Lines (a
//! later line for a target replacing an earlier one), their totals and exit code, the shards
//! missing or short in a split, and the summary as text, Markdown, HTML or JSON.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use serde_json::Value;

use super::scan::{SCAN_VERSION, ScanError, ScanLine, parse_shard};
use crate::report::exit_code;
use crate::report::status::{ServerStatus, StatusFacts};

/// Totals over scan lines.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    /// Servers.
    pub servers: usize,
    /// Per exit code.
    pub by_exit_code: BTreeMap<i32, usize>,
    /// Contradicted hints in all.
    pub contradicted: u64,
    /// Servers whose expectations were checked and met.
    pub expectations_met: usize,
    /// Servers whose expectations were checked and not met.
    pub expectations_unmet: usize,
    /// Servers without a report, or whose run erred or was interrupted (exit 2, 3, 5, 130,
    /// 143), skipped ones aside.
    pub errors: usize,
    /// Registry entries not run, with their reason in their line.
    pub skipped: usize,
    /// The sum of the servers' run times.
    pub sum_of_runs_ms: u64,
}

/// Sums up lines.
pub fn totals(lines: &[ScanLine]) -> Totals {
    let mut t = Totals::default();
    for l in lines {
        t.servers += 1;
        *t.by_exit_code.entry(l.exit_code).or_default() += 1;
        t.contradicted += l
            .summary
            .as_ref()
            .and_then(|s| s["contradicted"].as_u64())
            .unwrap_or(0);
        if let Some(e) = &l.expectations {
            if e["unmet"].as_array().is_some_and(Vec::is_empty) {
                t.expectations_met += 1;
            } else {
                t.expectations_unmet += 1;
            }
        }
        if l.skipped.is_some() {
            t.skipped += 1;
        } else if l.report.is_none() || is_error_code(l.exit_code) {
            // An interrupted or failed run writes a report too: its exit code says it erred.
            t.errors += 1;
        }
        t.sum_of_runs_ms += l.duration_ms;
    }
    t
}

/// Whether a verify's exit code says the run erred (usage, harness, sandbox) or was
/// interrupted.
fn is_error_code(code: i32) -> bool {
    matches!(
        code,
        exit_code::USAGE
            | exit_code::HARNESS
            | exit_code::SANDBOX_UNAVAILABLE
            | exit_code::INTERRUPTED_BY_SIGINT
            | exit_code::INTERRUPTED_BY_SIGTERM
    )
}

/// The exit code of a scan (or a merge): a server without a report or with a harness error
/// outranks one whose findings (or, checked, expectations) fail, which outranks one where
/// nothing was verified.
pub fn exit_code_of(lines: &[ScanLine]) -> i32 {
    let codes: Vec<i32> = lines.iter().map(|l| l.exit_code).collect();
    if lines
        .iter()
        .any(|l| l.report.is_none() && l.skipped.is_none())
        || codes.iter().any(|c| is_error_code(*c))
    {
        exit_code::HARNESS
    } else if codes.contains(&exit_code::CONTRADICTIONS) {
        exit_code::CONTRADICTIONS
    } else if codes.contains(&exit_code::NOTHING_VERIFIED) {
        exit_code::NOTHING_VERIFIED
    } else {
        exit_code::OK
    }
}

/// Reads scan results from JSON Lines files; a later line for the same target replaces an
/// earlier one (a re-run shard).
pub fn read_lines(paths: &[PathBuf]) -> Result<Vec<ScanLine>, ScanError> {
    let mut by_target: BTreeMap<String, ScanLine> = BTreeMap::new();
    for path in paths {
        let text = std::fs::read_to_string(path).map_err(|source| ScanError::Read {
            path: path.clone(),
            source,
        })?;
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() {
                continue;
            }
            let line: ScanLine = serde_json::from_str(raw).map_err(|e| ScanError::BadLine {
                path: path.clone(),
                line: i + 1,
                message: e.to_string(),
            })?;
            if line.scan_version != SCAN_VERSION {
                return Err(ScanError::BadLine {
                    path: path.clone(),
                    line: i + 1,
                    message: format!(
                        "scan_version {} (this hintcheck reads {SCAN_VERSION})",
                        line.scan_version
                    ),
                });
            }
            by_target.insert(line.target.clone(), line);
        }
    }
    Ok(by_target.into_values().collect())
}

/// The most shards [`shard_gaps`] looks through for one split.
const MAX_SHARDS_CHECKED: usize = 10_000;

/// The first 20 of `items` joined by `sep`, and how many more there are.
fn first_of(items: &[String], sep: &str) -> String {
    let shown = items.iter().take(20).cloned().collect::<Vec<_>>().join(sep);
    match items.len().saturating_sub(20) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// One way the list was split, as merged lines show it.
#[derive(Default)]
struct Split<'a> {
    /// The list's size, when the lines say.
    list_size: Option<usize>,
    /// The distinct targets seen per shard (1-based).
    targets: BTreeMap<usize, std::collections::BTreeSet<&'a str>>,
}

/// What merged lines lack: for each split of the list (`N` shards, or the whole list), the
/// shards with no line and those with fewer lines than their share of the list (a shard that
/// did not finish, or a file not given to merge), and a note when lines come from splits of
/// different sizes. Lines written before scans said their list's size are only checked for
/// shards with no line at all.
pub fn shard_gaps(lines: &[ScanLine]) -> Vec<String> {
    // Per split size: the list's size, and the distinct targets seen per shard.
    let mut splits: BTreeMap<usize, Split<'_>> = BTreeMap::new();
    for l in lines {
        let (k, n) = match l.shard.as_deref() {
            Some(s) => match parse_shard(s) {
                Ok(kn) => kn,
                Err(_) => continue,
            },
            None => (1, 1),
        };
        let split = splits.entry(n).or_default();
        if let Some(size) = l.list_size {
            split.list_size = Some(split.list_size.map_or(size, |s| s.max(size)));
        }
        split
            .targets
            .entry(k)
            .or_default()
            .insert(l.target.as_str());
    }
    let mut notes = Vec::new();
    if splits.len() > 1 {
        let sizes: Vec<String> = splits
            .keys()
            .map(|n| {
                if *n == 1 {
                    "unsharded".to_string()
                } else {
                    format!("of {n}")
                }
            })
            .collect();
        notes.push(format!(
            "lines come from splits of different sizes ({}): some servers may be counted twice or not at all",
            sizes.join(", ")
        ));
    }
    for (
        n,
        Split {
            list_size: size,
            targets: seen,
        },
    ) in &splits
    {
        let share = |k: usize| size.map(|total| if k <= total { (total - k) / n + 1 } else { 0 });
        let mut missing = Vec::new();
        let mut short = Vec::new();
        // Shards past the list's size are empty; a line may still claim any N, so the check
        // stops at a bound (the lines come from files, which can say anything).
        let needed = size.map_or(*n, |total| total.min(*n));
        let upto = needed.min(MAX_SHARDS_CHECKED);
        if upto < needed {
            notes.push(format!(
                "lines name {n} shards: only the first {MAX_SHARDS_CHECKED} are checked for lines"
            ));
        }
        for k in 1..=upto {
            let got = seen.get(&k).map_or(0, |t| t.len());
            match share(k) {
                Some(0) => {}
                Some(want) if got == 0 => missing.push(format!("{k}/{n} ({want} server(s))")),
                Some(want) if got < want => short.push(format!("{k}/{n} has {got} of {want}")),
                None if got == 0 => missing.push(format!("{k}/{n}")),
                _ => {}
            }
        }
        let what = if *n == 1 {
            "the scan".to_string()
        } else {
            "shard(s)".to_string()
        };
        if !missing.is_empty() {
            notes.push(format!(
                "no line from {what} {} (one that did not finish or was not given to merge)",
                first_of(&missing, ", ")
            ));
        }
        if !short.is_empty() {
            notes.push(format!(
                "fewer lines than servers: {} (interrupted, or still running)",
                first_of(&short, "; ")
            ));
        }
    }
    notes
}

/// The contradicted-hint count of a line, or `-` without a report.
fn contradicted_cell(l: &ScanLine) -> String {
    l.summary
        .as_ref()
        .and_then(|s| s["contradicted"].as_u64())
        .map(|n| n.to_string())
        .unwrap_or_else(|| "-".into())
}

/// The transport a line's server was spoken to over, or `-` without a report.
fn transport_cell(l: &ScanLine) -> String {
    l.transport.clone().unwrap_or_else(|| "-".into())
}

/// A server's row of the text and Markdown tables: server, exit, transport, contradicted,
/// seconds and status, each escaped by `esc` for the medium.
fn row_cells(l: &ScanLine, esc: fn(&str) -> String) -> [String; 6] {
    [
        esc(&l.id),
        status_of(l).exit_cell(l.exit_code),
        esc(&transport_cell(l)),
        contradicted_cell(l),
        format!("{:.1}", l.duration_ms as f64 / 1000.0),
        esc(&status_of(l).line()),
    ]
}

/// `text` in at most `width` characters: a longer one loses its middle (registry names
/// share their beginnings; the package and version at the end tell them apart).
fn cut_middle(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text.to_string();
    }
    let head = (width - 1) / 3;
    let tail = width - 1 - head;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// A line's outcome, in the words every rendering of a scan shares.
fn status_of(l: &ScanLine) -> ServerStatus {
    ServerStatus::of(StatusFacts {
        exit_code: l.exit_code,
        skipped: l.skipped.as_deref(),
        has_report: l.report.is_some(),
        expectations: l.expectations.as_ref(),
        report: l.report.as_ref(),
    })
}

/// The combined summary as text.
pub fn render_text(lines: &[ScanLine]) -> String {
    use crate::text::escape::terminal as esc;
    let t = totals(lines);
    let mut o = String::new();
    let width = lines
        .iter()
        .map(|l| esc(&l.id).chars().count())
        .max()
        .unwrap_or(6)
        .clamp(6, 60);
    o.push_str(&format!(
        "{:<width$}  {:>4}  {:<9}  {:>12}  {:>8}  {}\n",
        "server", "exit", "transport", "contradicted", "seconds", "status"
    ));
    for l in lines {
        let [server, exit, transport, contradicted, seconds, status] = row_cells(l, esc);
        // A name longer than the column is cut (whole in the JSON and HTML summaries), so
        // that the columns stay aligned.
        let server = cut_middle(&server, width);
        o.push_str(&format!(
            "{server:<width$}  {exit:>4}  {transport:<9}  {contradicted:>12}  {seconds:>8}  {status}\n",
        ));
        if let Some(e) = &l.expectations {
            for u in e["unmet"].as_array().into_iter().flatten().take(5) {
                o.push_str(&format!("    unmet: {}\n", esc(u.as_str().unwrap_or(""))));
            }
        }
        if let Some(err) = &l.error {
            o.push_str(&format!(
                "    error: {}\n",
                esc(err.lines().last().unwrap_or(""))
            ));
        }
    }
    o.push_str(&format!(
        "\n{} server(s): {} contradicted hint(s); {} error(s); {} skipped; expectations {} met, {} unmet; {:.1} s of runs\n",
        t.servers,
        t.contradicted,
        t.errors,
        t.skipped,
        t.expectations_met,
        t.expectations_unmet,
        t.sum_of_runs_ms as f64 / 1000.0
    ));
    for note in shard_gaps(lines) {
        o.push_str(&format!("note: {note}\n"));
    }
    o
}

/// The combined summary as Markdown (for a job summary).
pub fn render_markdown(lines: &[ScanLine]) -> String {
    use crate::report::markdown::md;
    let t = totals(lines);
    let mut o = String::from(
        "## hintcheck scan\n\n| server | exit | transport | contradicted | seconds | status |\n|---|---|---|---|---|---|\n",
    );
    for l in lines {
        o.push_str(&format!("| {} |\n", row_cells(l, md).join(" | ")));
    }
    o.push_str(&format!(
        "\n{} server(s) · {} contradicted hint(s) · {} error(s) · {} skipped · expectations {} met, {} unmet\n",
        t.servers, t.contradicted, t.errors, t.skipped, t.expectations_met, t.expectations_unmet
    ));
    for note in shard_gaps(lines) {
        o.push_str(&format!("\n> **Note:** {note}\n"));
    }
    o
}

/// The combined summary as one self-contained HTML page.
pub fn render_html(lines: &[ScanLine]) -> String {
    let entries: Vec<crate::report::html::Entry<'_>> = lines
        .iter()
        .map(|l| crate::report::html::Entry {
            id: &l.id,
            target: &l.target,
            exit_code: l.exit_code,
            exit_reason: &l.exit_reason,
            skipped: l.skipped.as_deref(),
            error: l.error.as_deref(),
            expectations: l.expectations.as_ref(),
            report: l.report.as_ref(),
        })
        .collect();
    crate::report::html::render(
        &format!("hintcheck scan of {} server(s)", lines.len()),
        &entries,
        &shard_gaps(lines),
    )
}

/// The combined summary as JSON.
pub fn render_json(lines: &[ScanLine]) -> String {
    let rows: Vec<Value> = lines
        .iter()
        .map(|l| {
            serde_json::json!({
                "target": l.target,
                "id": l.id,
                "server": l.server,
                "exit_code": l.exit_code,
                "exit_reason": l.exit_reason,
                "duration_ms": l.duration_ms,
                "skipped": l.skipped,
                "transport": l.transport,
                "summary": l.summary,
                "shard": l.shard,
                "expectations": l.expectations,
                "error": l.error,
            })
        })
        .collect();
    let mut text = serde_json::to_string_pretty(&serde_json::json!({
        "scan_version": SCAN_VERSION,
        "exit_code": exit_code_of(lines),
        "totals": totals(lines),
        "shard_notes": shard_gaps(lines),
        "servers": rows,
    }))
    .unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(code: i32, report: bool) -> ScanLine {
        ScanLine {
            scan_version: 1,
            target: format!("t{code}"),
            id: "x".into(),
            server: None,
            exit_code: code,
            exit_reason: String::new(),
            duration_ms: 1,
            skipped: None,
            transport: report.then(|| "stdio".into()),
            summary: None,
            expectations: None,
            error: None,
            report: report.then(|| serde_json::json!({})),
            shard: None,
            list_size: None,
            run_key: None,
        }
    }

    #[test]
    fn long_names_are_cut_so_that_the_text_table_stays_aligned() {
        let long = ScanLine {
            id: format!("io.example/{}", "very-long-server-name-".repeat(4)),
            ..line(1, true)
        };
        let text = render_text(&[long.clone(), line(0, true)]);
        let rows: Vec<&str> = text.lines().take(3).collect();
        let exit_column = |row: &str| row.chars().take_while(|c| !c.is_ascii_digit()).count();
        assert_eq!(exit_column(rows[1]), exit_column(rows[2]), "{text}");
        assert!(
            rows[1].starts_with("io.example/very-lon…")
                && rows[1].contains("-name-very-long-server-name-  "),
            "{text}"
        );
        // Markdown keeps the whole name.
        assert!(render_markdown(std::slice::from_ref(&long)).contains(&long.id));
    }

    #[test]
    fn merge_names_missing_and_short_shards_but_not_empty_ones() {
        let at = |target: &str, shard: &str| ScanLine {
            target: target.into(),
            shard: Some(shard.into()),
            list_size: Some(5),
            ..line(0, true)
        };
        // Five servers in four shards: shard 1 has two (1 and 5), the others one each.
        let whole = [
            at("a", "1/4"),
            at("e", "1/4"),
            at("b", "2/4"),
            at("c", "3/4"),
            at("d", "4/4"),
        ];
        assert!(shard_gaps(&whole).is_empty(), "{:?}", shard_gaps(&whole));
        let notes = shard_gaps(&whole[..3]);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains("3/4 (1 server(s)), 4/4 (1 server(s))"),
            "{notes:?}"
        );
        let notes = shard_gaps(&whole[1..]);
        assert!(notes[0].contains("1/4 has 1 of 2"), "{notes:?}");
        // Eight shards of five: shards 6 to 8 are empty, and nothing says they are missing.
        let eight: Vec<ScanLine> = (1..=5)
            .map(|k| at(&format!("t{k}"), &format!("{k}/8")))
            .collect();
        assert!(shard_gaps(&eight).is_empty(), "{:?}", shard_gaps(&eight));
        // A line that claims an absurd split is checked within bounds, quickly.
        let absurd = [ScanLine {
            shard: Some(format!("1/{}", usize::MAX)),
            list_size: None,
            ..at("x", "1/4")
        }];
        let notes = shard_gaps(&absurd);
        assert!(notes[0].contains("only the first 10000"), "{notes:?}");
        assert!(notes[1].contains("and 9979 more"), "{notes:?}");
        let mut mixed = eight.clone();
        mixed.push(at("a", "1/4"));
        assert!(shard_gaps(&mixed)[0].contains("different sizes"));
    }

    #[test]
    fn errors_outrank_findings_which_outrank_nothing_verified() {
        assert_eq!(exit_code_of(&[line(0, true), line(4, true)]), 4);
        assert_eq!(exit_code_of(&[line(4, true), line(1, true)]), 1);
        assert_eq!(exit_code_of(&[line(1, true), line(5, true)]), 3);
        assert_eq!(exit_code_of(&[line(0, true), line(3, false)]), 3);
        assert_eq!(exit_code_of(&[line(0, true)]), 0);
    }
}
