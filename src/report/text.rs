//! The human report. Its first screen is the result and what decided it: every contradicted
//! hint with its tool and one line of evidence (failing, weak and accepted ones apart), other
//! findings in one line each, reach, the sandbox and its observers in short form. Per-tool
//! details follow (✗ contradicted, ! something to say, ? never reached, - skipped, ✓ only for
//! tools with nothing to say, in one line unless `--verbose`), then the run's findings,
//! replays, notes and the result again. Columns are aligned; every string that came from the
//! server goes through [`crate::text::escape::terminal`] first.

use std::fmt::Write;

use super::{Report, ToolReport};
use crate::audit::suggest::{SupportBasis, SupportedHint};
use crate::finding::{Finding, Severity, Verdict};
use crate::mcp::tool::shorten;
use crate::text::escape::terminal as esc;

/// Renders the report as text.
pub fn render(r: &Report) -> String {
    render_with(r, false, false)
}

/// Renders the report as text, with ANSI colours on verdicts and the result when `color`, and
/// every detail (observers, arguments and suggestions of every tool) when `verbose`.
pub fn render_with(r: &Report, color: bool, verbose: bool) -> String {
    let mut o = String::new();
    let _ = write_report(&mut o, r, Paint(color), verbose);
    o
}

/// ANSI colouring, or none.
#[derive(Clone, Copy)]
struct Paint(bool);

impl Paint {
    fn wrap(self, code: &str, s: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
    fn red(self, s: &str) -> String {
        self.wrap("1;31", s)
    }
    fn yellow(self, s: &str) -> String {
        self.wrap("33", s)
    }
    fn green(self, s: &str) -> String {
        self.wrap("32", s)
    }
}

/// Display width of a string (characters; what the server sent is escaped first).
fn width(s: &str) -> usize {
    s.chars().count()
}

/// `s` padded with blanks to `w` characters.
fn pad(s: &str, w: usize) -> String {
    format!("{s}{}", " ".repeat(w.saturating_sub(width(s))))
}

/// The one-line form of a finding's first piece of evidence, with how many more there are.
fn first_evidence(f: &Finding) -> String {
    let Some(e) = f.evidence.first() else {
        return esc(&shorten(&f.message, 120));
    };
    let more = match f.evidence.len() {
        1 => String::new(),
        n => format!(" (+{} more)", n - 1),
    };
    format!("{}: {}{more}", esc(&e.source), esc(&shorten(&e.text, 110)))
}

/// The mark of a tool: ✗ a contradiction that counts, ! something to say (a weak or accepted
/// contradiction, a finding), ? no successful call, - skipped, ✓ nothing to say.
fn mark(r: &Report, t: &ToolReport) -> &'static str {
    let firm = t.all_verdicts().any(|v| {
        v.verdict == Verdict::Contradicted
            && !v.uncertain
            && r.verdict_finding(&t.name, v)
                .is_none_or(|f| f.accepted.is_none() && f.severity == Severity::Error)
    });
    let secret = r.findings.iter().any(|f| {
        (crate::audit::about_secrets(f.audit) || f.audit == crate::audit::data_labels::META.id)
            && f.severity == Severity::Error
            && f.accepted.is_none()
            && f.tool.as_deref() == Some(&t.name)
    });
    if firm || secret {
        return "✗";
    }
    if t.skipped.is_some() {
        return "-";
    }
    let said = t.contradicted()
        || r.findings
            .iter()
            .any(|f| f.tool.as_deref() == Some(&t.name));
    if said {
        "!"
    } else if t.calls.iter().any(|c| c.outcome.is_success()) {
        "✓"
    } else {
        "?"
    }
}

fn server_name(r: &Report) -> String {
    r.server
        .identity
        .as_ref()
        .and_then(|id| id.server_info.as_ref())
        .map(|i| {
            let name = i.get("name").and_then(|v| v.as_str()).unwrap_or("?");
            let version = i.get("version").and_then(|v| v.as_str()).unwrap_or("");
            esc(format!("{name} {version}").trim())
        })
        .unwrap_or_else(|| esc(&shorten(&r.server.command.join(" "), 120)))
}

fn result_line(r: &Report, paint: Paint) -> String {
    let result = format!("{} (exit {})", r.exit_reason, r.exit_code);
    match r.exit_code {
        0 => paint.green(&result),
        1 => paint.red(&result),
        _ => paint.yellow(&result),
    }
}

/// The first screen: who, the result, and what decided it.
fn write_summary(o: &mut String, r: &Report, paint: Paint, verbose: bool) -> std::fmt::Result {
    summary_head(o, r, paint)?;
    contradicted_hints(o, r, verbose)?;
    variants(o, r, paint)?;
    other_findings(o, r, verbose)?;
    run_facts(o, r, verbose)
}

/// Each configuration run beside the default one: its name, settings and result, then its
/// contradicted hints, each saying whether the default run contradicted it too.
fn variants(o: &mut String, r: &Report, paint: Paint) -> std::fmt::Result {
    for v in &r.variants {
        let vr = &v.report;
        writeln!(
            o,
            "\nvariant {} ({}): {} (exit {})",
            esc(&v.name),
            esc(&v.settings.join(", ")),
            esc(&vr.exit_reason),
            vr.exit_code
        )?;
        for t in &vr.tools {
            for h in t
                .all_verdicts()
                .filter(|h| h.verdict == Verdict::Contradicted)
            {
                // A resolved hint is matched by hint among the default run's resolved ones
                // (its arguments name each run's own paths).
                let default = r.tools.iter().find(|d| d.name == t.name).and_then(|d| {
                    let same: Vec<&crate::finding::HintVerdict> = d
                        .all_verdicts()
                        .filter(|dv| dv.hint == h.hint && dv.source.is_some() == h.source.is_some())
                        .collect();
                    same.iter()
                        .find(|dv| dv.verdict == Verdict::Contradicted)
                        .or(same.first())
                        .copied()
                });
                let whose = match default {
                    Some(d) if d.verdict == Verdict::Contradicted => {
                        "also in the default run".to_string()
                    }
                    Some(d) => format!(
                        "only in this variant; the default run declares {}: {}, {}",
                        d.hint.key(),
                        esc(&d.declared),
                        d.verdict.as_str()
                    ),
                    None if h.source.is_some() => {
                        "only in this variant; the default run resolved no such hint".into()
                    }
                    None => "only in this variant; the default run lists no such tool".into(),
                };
                let evidence = vr
                    .verdict_finding(&t.name, h)
                    .map(first_evidence)
                    .unwrap_or_else(|| esc(&shorten(&h.reason, 120)));
                writeln!(
                    o,
                    "  {} {}  {}: {}{}  {evidence} ({whose})",
                    paint.red("✗"),
                    esc(&t.name),
                    h.hint.key(),
                    esc(&h.declared),
                    if h.source.is_some() {
                        " (resolved)"
                    } else {
                        ""
                    }
                )?;
            }
        }
    }
    Ok(())
}

/// The server, its command and protocol, the result, and why a run is partial or the server
/// could not be verified.
fn summary_head(o: &mut String, r: &Report, paint: Paint) -> std::fmt::Result {
    let name = server_name(r);
    match &r.server.identity {
        Some(id) => {
            let mut era = match &id.era {
                crate::mcp::client::Era::Modern(v) => format!("modern era, {v}"),
                crate::mcp::client::Era::Legacy(v) => format!("handshake era, {}", esc(v)),
            };
            if r.settings.transport != "stdio" {
                era.push_str(&format!(", over {}", r.settings.transport.to_uppercase()));
                if r.settings.transport == crate::config::Transport::LEGACY_HTTP {
                    era.push_str(" (the 2024-11-05 transport: the only one the server offered)");
                }
            }
            writeln!(o, "hintcheck {} — {name} ({era})", r.hintcheck_version)?;
        }
        None => writeln!(o, "hintcheck {} — {name}", r.hintcheck_version)?,
    }
    writeln!(
        o,
        "command:  {}",
        esc(&shorten(&r.server.command.join(" "), 200))
    )?;
    writeln!(o, "result:   {}", result_line(r, paint))?;
    if let Some(p) = &r.partial {
        writeln!(o, "PARTIAL:  {}", esc(p))?;
    }
    if let Some(e) = &r.server.start_error {
        writeln!(o, "server:   could not be verified: {}", esc(e))?;
    }
    Ok(())
}

/// How many lines the first screen holds: every contradicted tool is named on it.
const FIRST_SCREEN: usize = 20;

/// One contradicted hint: the tool, `hint: declared`, the evidence, its category.
type ContradictionRow<'a> = (String, String, String, Option<&'a str>);

/// The contradicted hints: the failing ones, the weak ones (warnings), the accepted ones; one
/// line each when they fit on the first screen (or with `verbose`), else one line per tool,
/// else the tools' names.
fn contradicted_hints(o: &mut String, r: &Report, verbose: bool) -> std::fmt::Result {
    let mut firm = Vec::new();
    let mut weak = Vec::new();
    let mut accepted = Vec::new();
    for t in &r.tools {
        for v in t
            .all_verdicts()
            .filter(|v| v.verdict == Verdict::Contradicted)
        {
            let f = r.verdict_finding(&t.name, v);
            let evidence = match f {
                Some(f) => first_evidence(f),
                None => esc(&shorten(&v.reason, 120)),
            };
            let row = (
                esc(&t.name),
                format!(
                    "{}: {}{}",
                    v.hint.key(),
                    esc(&v.declared),
                    if v.source.is_some() {
                        " (resolved)"
                    } else {
                        ""
                    }
                ),
                evidence,
                f.and_then(|f| f.category).map(|c| c.as_str()),
            );
            match f {
                Some(f) if f.accepted.is_some() => accepted.push(row),
                Some(f) if f.severity != Severity::Error || v.uncertain => weak.push(row),
                _ if v.uncertain => weak.push(row),
                _ => firm.push(row),
            }
        }
        // Data labels contradicted, like hints.
        for v in t
            .labels
            .iter()
            .filter(|v| v.verdict == Verdict::Contradicted)
        {
            let f = r.label_finding(&t.name, v.label);
            let row = (
                esc(&t.name),
                format!("{}: {}", v.label, esc(&v.declared)),
                match f {
                    Some(f) => first_evidence(f),
                    None => esc(&shorten(&v.reason, 120)),
                },
                None,
            );
            match f {
                Some(f) if f.accepted.is_some() => accepted.push(row),
                Some(f) if f.severity != Severity::Error => weak.push(row),
                _ => firm.push(row),
            }
        }
    }
    let groups = [
        ("contradicted", firm, "✗"),
        (
            "contradicted, held as warnings (uncertain, writes that did not last, labels a run cannot prove)",
            weak,
            "!",
        ),
        (
            "contradicted, accepted by the baseline (reported, not failing the run)",
            accepted,
            "·",
        ),
    ];
    let room = FIRST_SCREEN.saturating_sub(o.lines().count());
    // Each group takes a blank line and its title.
    let lines_for = |count: &dyn Fn(&[ContradictionRow<'_>]) -> usize| -> usize {
        groups
            .iter()
            .filter(|g| !g.1.is_empty())
            .map(|g| 2 + count(&g.1))
            .sum()
    };
    if verbose || lines_for(&|rows| rows.len()) <= room {
        return hint_lines(o, &groups);
    }
    let by_tool: Vec<_> = groups
        .iter()
        .map(|(title, rows, sign)| (*title, per_tool(rows), *sign))
        .collect();
    if lines_for(&|rows| per_tool(rows).len()) <= room {
        return hint_lines(o, &by_tool);
    }
    // Only the names fit: as many to a line as a terminal's width holds.
    for (title, rows, sign) in &by_tool {
        if rows.is_empty() {
            continue;
        }
        writeln!(
            o,
            "\n{title}: {} tool(s) (--verbose: each hint)",
            rows.len()
        )?;
        let mut line = String::new();
        for (tool, ..) in rows {
            let tool = shorten(tool, 40);
            if !line.is_empty() && width(&line) + width(&tool) + 2 > 96 {
                writeln!(o, "  {sign} {line}")?;
                line.clear();
            }
            if !line.is_empty() {
                line.push_str(", ");
            }
            line.push_str(&tool);
        }
        if !line.is_empty() {
            writeln!(o, "  {sign} {line}")?;
        }
    }
    Ok(())
}

/// The rows of one tool made one: its hints joined, its first evidence.
fn per_tool<'a>(rows: &[ContradictionRow<'a>]) -> Vec<ContradictionRow<'a>> {
    let mut out: Vec<ContradictionRow<'a>> = Vec::new();
    for row in rows {
        match out.iter_mut().find(|r| r.0 == row.0) {
            Some(r) => {
                r.1.push_str(", ");
                r.1.push_str(&row.1);
            }
            None => out.push(row.clone()),
        }
    }
    out
}

/// One line per row, the columns aligned across the groups.
fn hint_lines(
    o: &mut String,
    groups: &[(&str, Vec<ContradictionRow<'_>>, &str)],
) -> std::fmt::Result {
    let rows = groups.iter().flat_map(|g| g.1.iter());
    let name_w = rows
        .clone()
        .map(|r| width(&shorten(&r.0, 40)))
        .max()
        .unwrap_or(0);
    let hint_w = rows.map(|r| width(&r.1)).max().unwrap_or(0);
    for (title, group, sign) in groups {
        if group.is_empty() {
            continue;
        }
        writeln!(o, "\n{title}:")?;
        for (tool, hint, evidence, category) in group.iter() {
            let tag = category.map(|c| format!(" [{c}]")).unwrap_or_default();
            writeln!(
                o,
                "  {sign} {}  {}  {evidence}{tag}",
                pad(&shorten(tool, 40), name_w),
                pad(hint, hint_w)
            )?;
        }
    }
    Ok(())
}

/// Findings about no hint (the first ten unless `verbose`).
fn other_findings(o: &mut String, r: &Report, verbose: bool) -> std::fmt::Result {
    let mut others: Vec<&Finding> = r.findings.iter().filter(|f| f.hint.is_none()).collect();
    // Secrets handed on come first: after a contradiction, the worst a tool can do.
    others.sort_by_key(|f| {
        (
            std::cmp::Reverse(f.severity),
            !crate::audit::about_secrets(f.audit),
        )
    });
    if !others.is_empty() {
        writeln!(o, "\nother findings:")?;
        for f in others.iter().take(if verbose { usize::MAX } else { 10 }) {
            // Messages about a tool mostly name it first already.
            let about = f
                .tool
                .as_deref()
                .filter(|t| !f.message.starts_with(*t))
                .map(|t| format!("{}: ", esc(t)))
                .unwrap_or_default();
            writeln!(
                o,
                "  [{}] {}{}: {about}{}{}",
                f.severity.as_str(),
                f.audit,
                f.category_tag(),
                esc(&shorten(&f.message, 160)),
                if f.accepted.is_some() {
                    " (accepted by the baseline)"
                } else {
                    ""
                }
            )?;
        }
        if !verbose && others.len() > 10 {
            writeln!(o, "  … {} more below", others.len() - 10)?;
        }
    }
    Ok(())
}

/// What the run reached and observed, the sandbox, the seed and the settings (every line of
/// them when `verbose`).
fn run_facts(o: &mut String, r: &Report, verbose: bool) -> std::fmt::Result {
    let c = &r.coverage;
    writeln!(o)?;
    writeln!(
        o,
        "reach:    {} of {} tool(s) with a successful call, {} with only failed calls, {} skipped, {} not called · {} call(s) · {:.1} s",
        c.tools_succeeded,
        c.tools_listed,
        c.tools_failed,
        c.tools_skipped,
        c.tools_not_called,
        c.calls,
        r.duration_ms as f64 / 1000.0
    )?;
    writeln!(o, "sandbox:  {} — {}", r.sandbox.level, r.sandbox.summary)?;
    if r.sandbox.level != "full" {
        for gap in &r.sandbox.not_enforced {
            writeln!(o, "          not enforced: {gap}")?;
        }
    }
    if r.sandbox.level != "not-started" {
        if verbose {
            for obs in &c.observers {
                writeln!(o, "observed: {} [{}]", obs.covers, obs.name)?;
            }
        } else if !c.observers.is_empty() {
            let names: Vec<&str> = c.observers.iter().map(|x| x.name.as_str()).collect();
            writeln!(
                o,
                "observed: files {}, network {} by {} (--verbose says what each sees)",
                if c.files_observed { "yes" } else { "NO" },
                if c.network_observed { "yes" } else { "NO" },
                names.join(", ")
            )?;
        }
        if !c.network_observed {
            writeln!(o, "observed: network activity was NOT observed")?;
        }
    }
    if !r.seeded.is_empty() {
        let shown = if verbose { usize::MAX } else { 8 };
        let mut listed: Vec<String> = r.seeded.iter().take(shown).map(|p| esc(p)).collect();
        if r.seeded.len() > shown {
            listed.push(format!("… {} more", r.seeded.len() - shown));
        }
        writeln!(
            o,
            "seeded:   {} path(s) into $WORKSPACE: {}",
            r.seeded.len(),
            listed.join(", ")
        )?;
    }
    if !r.canaries.is_empty() {
        let places: Vec<String> = if verbose {
            r.canaries
                .iter()
                .map(|c| format!("{} ({})", esc(&c.kind), esc(&c.place)))
                .collect()
        } else {
            let files: std::collections::BTreeSet<&str> = r
                .canaries
                .iter()
                .filter(|c| !c.place.starts_with('$') || c.place.contains('/'))
                .map(|c| c.place.as_str())
                .collect();
            let variables = r
                .canaries
                .iter()
                .filter(|c| c.place.starts_with('$') && !c.place.contains('/'))
                .count();
            vec![format!(
                "{} file(s) and {variables} environment variable(s) (--verbose lists them)",
                files.len()
            )]
        };
        writeln!(
            o,
            "canaries: {} fake credential(s) planted: {}",
            r.canaries.len(),
            places.join(", ")
        )?;
    }
    // The seed chooses the run's words and arguments: the same seed repeats them.
    writeln!(
        o,
        "seed:     {} (--seed {} repeats this run's words and arguments)",
        r.settings.seed, r.settings.seed
    )?;
    if let Some(file) = &r.settings.config_file {
        writeln!(o, "config:   read {}", esc(file))?;
    }
    if let Some(line) = r.settings.sources_line() {
        writeln!(o, "set:      {}", esc(&line))?;
    }
    Ok(())
}

/// What each value of the tool's selecting arguments did, one line each: the value, its
/// behaviour (and its other effects), how many calls had it, the hints it contradicted, and
/// why it was not reached.
fn write_by_argument(o: &mut String, t: &ToolReport, paint: Paint) -> std::fmt::Result {
    if t.by_argument.is_empty() {
        return Ok(());
    }
    writeln!(o, "    by argument:")?;
    let values: Vec<String> = t
        .by_argument
        .iter()
        .map(|e| esc(&shorten(&e.describe_value(), 40)))
        .collect();
    let w = values.iter().map(|v| v.chars().count()).max().unwrap_or(0);
    for (e, value) in t.by_argument.iter().zip(&values) {
        let mut behaviour = e.behaviour.as_str().to_string();
        for more in &e.effects {
            behaviour.push_str(&format!(" + {}", more.as_str()));
        }
        let mut tail = match e.calls.len() {
            0 => String::new(),
            1 => "1 call".to_string(),
            n => format!("{n} calls"),
        };
        if !e.contradicts.is_empty() {
            let hints: Vec<&str> = e.contradicts.iter().map(|h| h.key()).collect();
            tail.push_str(&format!("; contradicts {}", paint.red(&hints.join(", "))));
        }
        if let Some(n) = &e.note {
            if !tail.is_empty() {
                tail.push_str("; ");
            }
            tail.push_str(&esc(&shorten(n, 120)));
        }
        writeln!(o, "      {}  {:<24} {tail}", pad(value, w), behaviour)?;
    }
    Ok(())
}

/// One tool's details: its verdicts with evidence, calls, arguments, notes and suggestions.
fn write_tool(
    o: &mut String,
    r: &Report,
    t: &ToolReport,
    paint: Paint,
    verbose: bool,
    (name_w, declared_w): (usize, usize),
) -> std::fmt::Result {
    let mark = mark(r, t);
    if mark == "✓" && !verbose {
        // Nothing to say: one line with what was confirmed.
        let confirmed: Vec<&str> = t
            .verdicts
            .iter()
            .filter(|v| v.verdict == Verdict::Consistent)
            .map(|v| v.hint.key())
            .collect();
        let mut what = if confirmed.is_empty() {
            "reached; no declared hint to check".to_string()
        } else {
            format!("consistent: {}", confirmed.join(", "))
        };
        match t
            .resolved
            .iter()
            .filter(|v| v.verdict == Verdict::Consistent)
            .count()
        {
            0 => {}
            n => what.push_str(&format!(
                "; {n} hint(s) resolved with tools/resolve consistent"
            )),
        }
        writeln!(o, "✓ {}  {what}", pad(&esc(&t.name), name_w))?;
        // Only where its values behaved differently: that is news about a tool whose hints
        // held.
        let mut seen = t
            .by_argument
            .iter()
            .map(|e| e.behaviour)
            .filter(|b| *b != crate::audit::by_argument::Behaviour::NotReached);
        let first = seen.next();
        if seen.any(|b| Some(b) != first) {
            write_by_argument(o, t, paint)?;
        }
        return Ok(());
    }
    writeln!(o, "\n{mark} {}", esc(&t.name))?;
    if let Some(s) = &t.skipped {
        return writeln!(o, "    skipped: {}", esc(s));
    }
    let mut not_applicable = Vec::new();
    // Room for `destructiveHint (resolved)` where the server resolved hints.
    let key_w = if t.resolved.is_empty() { 16 } else { 26 };
    for v in t.all_verdicts() {
        if v.verdict == Verdict::NotApplicable && !verbose {
            not_applicable.push(v.hint.key());
            continue;
        }
        let finding = r.verdict_finding(&t.name, v);
        let accepted = finding.and_then(|f| f.accepted.as_ref());
        let weak = finding.is_some_and(|f| f.severity != Severity::Error);
        let tag = match v.verdict {
            Verdict::Contradicted if v.uncertain => paint.yellow("CONTRADICTED?"),
            Verdict::Contradicted if accepted.is_some() => paint.yellow("ACCEPTED     "),
            Verdict::Contradicted if weak => paint.yellow("CONTRADICTED!"),
            Verdict::Contradicted => paint.red("CONTRADICTED "),
            Verdict::Consistent => paint.green("consistent   "),
            Verdict::Unexercised => "unexercised  ".to_string(),
            Verdict::NotApplicable => "n/a          ".to_string(),
        };
        writeln!(
            o,
            "    {:<key_w$} {} {tag} {}{}",
            match v.source {
                Some(_) => format!("{} (resolved)", v.hint.key()),
                None => v.hint.key().to_string(),
            },
            pad(&esc(&v.declared), declared_w),
            esc(&v.reason),
            accepted
                .map(|a| format!(" ({})", esc(a)))
                .unwrap_or_default()
        )?;
        for e in &v.evidence {
            writeln!(o, "        {}: {}", e.source, esc(&e.labelled()))?;
        }
    }
    if !not_applicable.is_empty() {
        writeln!(
            o,
            "    n/a:       {} (nothing to contradict; --verbose says why)",
            not_applicable.join(", ")
        )?;
    }
    for v in &t.labels {
        let finding = r.label_finding(&t.name, v.label);
        let tag = match v.verdict {
            Verdict::Contradicted if finding.is_some_and(|f| f.accepted.is_some()) => {
                paint.yellow("ACCEPTED     ")
            }
            Verdict::Contradicted if finding.is_some_and(|f| f.severity != Severity::Error) => {
                paint.yellow("CONTRADICTED!")
            }
            Verdict::Contradicted => paint.red("CONTRADICTED "),
            Verdict::Consistent => paint.green("consistent   "),
            Verdict::Unexercised => "unexercised  ".to_string(),
            Verdict::NotApplicable => "n/a          ".to_string(),
        };
        writeln!(
            o,
            "    label {} {} {tag} {}",
            v.label,
            esc(&v.declared),
            esc(&v.reason)
        )?;
        for e in &v.evidence {
            writeln!(o, "        {}: {}", e.source, esc(&e.labelled()))?;
        }
    }
    write_by_argument(o, t, paint)?;
    let calls: Vec<String> = t
        .calls
        .iter()
        .map(|c| format!("{} {} ({} ms)", c.label(), c.outcome.label(), c.duration_ms))
        .collect();
    writeln!(o, "    calls:     {}", calls.join(", "))?;
    if let Some(first) = t.calls.iter().find(|c| !c.outcome.is_success()) {
        let detail = match &first.outcome {
            crate::mcp::client::CallOutcome::ToolError { text, .. } => Some(text.clone()),
            crate::mcp::client::CallOutcome::ErrorLike { text, why, .. } => {
                Some(format!("{text} (not isError, but {why})"))
            }
            crate::mcp::client::CallOutcome::RpcError { code, message } => {
                Some(format!("{code} {message}"))
            }
            crate::mcp::client::CallOutcome::Malformed { why } => Some(why.clone()),
            _ => None,
        };
        if let Some(d) = detail {
            writeln!(o, "    {}: {}", first.label(), esc(&shorten(&d, 200)))?;
        }
    }
    let args = serde_json::to_string(&t.arguments).unwrap_or_default();
    writeln!(o, "    arguments: {}", esc(&shorten(&args, 300)))?;
    for n in t.synthesis_notes.iter().take(3) {
        writeln!(o, "    note:      {}", esc(n))?;
    }
    // What to declare: every hint whose supported value differs from the declared one and
    // that something backs, the fixes of contradicted hints first (observed), then the values
    // that fit everything exercised.
    let mut changes: Vec<&SupportedHint> = t
        .supported
        .iter()
        .filter(|s| s.changed && s.basis != SupportBasis::Unverified)
        .collect();
    changes.sort_by_key(|s| s.basis != SupportBasis::Observed);
    if verbose {
        for s in &changes {
            let basis = match s.basis {
                SupportBasis::Observed => "observed",
                _ => "consistent with what was exercised",
            };
            writeln!(
                o,
                "    suggest:   {}: {} ({basis}: {})",
                s.hint.key(),
                s.value,
                esc(&s.reason)
            )?;
        }
    } else if !changes.is_empty() {
        let values: Vec<String> = changes
            .iter()
            .map(|s| format!("{}: {}", s.hint.key(), s.value))
            .collect();
        writeln!(
            o,
            "    suggest:   {} (why: hintcheck suggest, or --verbose)",
            values.join(", ")
        )?;
    }
    Ok(())
}

fn write_report(o: &mut String, r: &Report, paint: Paint, verbose: bool) -> std::fmt::Result {
    write_summary(o, r, paint, verbose)?;
    if !r.tools.is_empty() {
        writeln!(o, "\ntools:")?;
    }
    let declared_w = r
        .tools
        .iter()
        .flat_map(|t| &t.verdicts)
        .filter(|v| verbose || v.verdict != Verdict::NotApplicable)
        .map(|v| width(&esc(&v.declared)))
        .max()
        .unwrap_or(0)
        .max(6);
    let name_w = r
        .tools
        .iter()
        .filter(|t| mark(r, t) == "✓")
        .map(|t| width(&esc(&t.name)))
        .max()
        .unwrap_or(0);
    for t in &r.tools {
        write_tool(o, r, t, paint, verbose, (name_w, declared_w))?;
    }
    let listed: Vec<_> = r.findings.iter().filter(|f| f.hint.is_none()).collect();
    if !listed.is_empty() {
        writeln!(o, "\nfindings:")?;
        for f in listed {
            writeln!(
                o,
                "  [{}] {}{}: {}{}",
                f.severity.as_str(),
                f.audit,
                f.category_tag(),
                esc(&f.message),
                f.accepted
                    .as_ref()
                    .map(|a| format!(" ({})", esc(a)))
                    .unwrap_or_default()
            )?;
            for e in f.evidence.iter().take(5) {
                writeln!(o, "      {}: {}", esc(&e.source), esc(&e.labelled()))?;
            }
        }
    }
    if !r
        .server
        .exits
        .iter()
        .all(|e| e.stragglers_killed.is_empty())
    {
        writeln!(o, "\nleft running by the server and killed:")?;
        for s in r.server.exits.iter().flat_map(|e| &e.stragglers_killed) {
            writeln!(o, "  {}", esc(s))?;
        }
    }
    let c = &r.coverage;
    writeln!(o)?;
    if verbose {
        writeln!(o, "coverage: {}", c.describe())?;
    }
    if let Some(i) = &c.inventory_incomplete {
        writeln!(o, "          the tool listing was incomplete: {}", esc(i))?;
    }
    for u in c.unreached.iter().take(20) {
        writeln!(
            o,
            "unreached: {} ({}{}){}",
            esc(&u.tool),
            u.outcome,
            u.said
                .as_ref()
                .map(|s| format!(": {}", esc(s)))
                .unwrap_or_default(),
            u.missing
                .as_ref()
                .map(|m| format!(
                    "; missing: {m}{}",
                    if u.unavailable_here {
                        " (not available here)"
                    } else {
                        ""
                    }
                ))
                .unwrap_or_default()
        )?;
    }
    if c.unreached.len() > 20 {
        writeln!(o, "unreached: … and {} more", c.unreached.len() - 20)?;
    }
    for x in &r.replays {
        writeln!(o, "replay {}: {}", x.id, esc(&x.summary()))?;
    }
    for n in &r.notes {
        writeln!(o, "note:     {}", esc(n))?;
    }
    for l in &r.limits_hit {
        writeln!(o, "limit:    {}: {}", esc(&l.short()), esc(&l.seen))?;
    }
    writeln!(
        o,
        "limits:   verdicts cover only the arguments tried and what the observers saw; `consistent` is not proof of absence"
    )?;
    if verbose {
        for line in &r.sandbox.enforced {
            writeln!(o, "enforced: {line}")?;
        }
    }
    if r.server.stderr_bytes > 0
        && (r.server.start_error.is_some() || r.exit_code == super::exit_code::HARNESS)
    {
        writeln!(o, "\nserver stderr ({} bytes):", r.server.stderr_bytes)?;
        for line in r.server.stderr.lines().take(40) {
            writeln!(o, "  | {}", esc(line))?;
        }
    }
    if let Some(b) = &r.baseline {
        writeln!(
            o,
            "baseline: {} finding(s) accepted by {} (marked \"accepted by the baseline\" above; they do not fail the run)",
            b.accepted,
            esc(&b.path)
        )?;
        for e in &b.stale {
            writeln!(
                o,
                "          stale entry (matched nothing): {} {} {}",
                e.audit,
                esc(e.tool.as_deref().unwrap_or("")),
                esc(e.hint.as_deref().unwrap_or(""))
            )?;
        }
        for (tool, then, now) in &b.changed_definitions {
            writeln!(
                o,
                "          {} changed since its findings were accepted (definition {} → {})",
                esc(tool),
                esc(&then.chars().take(16).collect::<String>()),
                now.chars().take(16).collect::<String>()
            )?;
        }
    }
    if let Some(e) = &r.expectations {
        for line in &e.unmet {
            writeln!(o, "unmet:    {}", esc(line))?;
        }
    }
    writeln!(o, "\nresult:   {}", result_line(r, paint))?;
    Ok(())
}
