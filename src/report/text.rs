//! The human report: per tool the declared hints, verdicts and evidence, then findings,
//! out-of-window effects, coverage and the result. Every string that came from the server
//! goes through [`escape_untrusted`] first.

use std::fmt::Write;

use super::{Report, escape_untrusted as esc};
use crate::finding::{SuggestionBasis, Verdict};

/// Renders the report as text.
pub fn render(r: &Report) -> String {
    render_with(r, false)
}

/// Renders the report as text, with ANSI colours on verdicts and the result when `color`.
pub fn render_with(r: &Report, color: bool) -> String {
    let mut o = String::new();
    let _ = write_report(&mut o, r, Paint(color));
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

fn write_report(o: &mut String, r: &Report, paint: Paint) -> std::fmt::Result {
    writeln!(
        o,
        "hintcheck {} — {}",
        r.hintcheck_version,
        esc(&r.server.command.join(" "))
    )?;
    if let Some(id) = &r.server.identity {
        let info = id
            .server_info
            .as_ref()
            .map(|i| {
                let name = i.get("name").and_then(|v| v.as_str()).unwrap_or("?");
                let version = i.get("version").and_then(|v| v.as_str()).unwrap_or("");
                esc(format!("{name} {version}").trim())
            })
            .unwrap_or_else(|| "unnamed server".into());
        let era = match &id.era {
            crate::mcp::client::Era::Modern(v) => format!("modern era, {v}"),
            crate::mcp::client::Era::Legacy(v) => format!("handshake era, {}", esc(v)),
        };
        writeln!(
            o,
            "server:   {info} ({era}) · {} tools · {} calls · {:.1}s",
            r.coverage.tools_listed,
            r.coverage.calls,
            r.duration_ms as f64 / 1000.0
        )?;
    }
    if let Some(e) = &r.server.start_error {
        writeln!(o, "server:   could not be verified: {}", esc(e))?;
    }
    writeln!(o, "sandbox:  {} — {}", r.sandbox.level, r.sandbox.summary)?;
    if r.sandbox.level != "full" {
        for gap in &r.sandbox.not_enforced {
            writeln!(o, "          not enforced: {gap}")?;
        }
    }
    for obs in &r.coverage.observers {
        writeln!(o, "observed: {} [{}]", obs.covers, obs.name)?;
    }
    if !r.coverage.network_observed {
        writeln!(o, "observed: network activity was NOT observed")?;
    }
    if !r.seeded.is_empty() {
        const SHOWN: usize = 8;
        let mut listed: Vec<String> = r.seeded.iter().take(SHOWN).map(|p| esc(p)).collect();
        if r.seeded.len() > SHOWN {
            listed.push(format!("… {} more", r.seeded.len() - SHOWN));
        }
        writeln!(
            o,
            "seeded:   {} path(s) into $WORKSPACE: {}",
            r.seeded.len(),
            listed.join(", ")
        )?;
    }
    if let Some(p) = &r.partial {
        writeln!(o, "PARTIAL:  {p}")?;
    }
    for t in &r.tools {
        writeln!(o)?;
        let mark = if t.contradicted() {
            "✗"
        } else if t.skipped.is_some() {
            "-"
        } else if t.calls.iter().any(|c| c.outcome.is_success()) {
            "✓"
        } else {
            "?"
        };
        writeln!(o, "{mark} {}", esc(&t.name))?;
        if let Some(s) = &t.skipped {
            writeln!(o, "    skipped: {}", esc(s))?;
            continue;
        }
        for v in &t.verdicts {
            let accepted = r
                .findings
                .iter()
                .find(|f| f.tool.as_deref() == Some(&t.name) && f.hint == Some(v.hint))
                .and_then(|f| f.accepted.as_ref());
            let tag = match v.verdict {
                Verdict::Contradicted if v.uncertain => paint.yellow("CONTRADICTED?"),
                Verdict::Contradicted if accepted.is_some() => paint.yellow("CONTRADICTED "),
                Verdict::Contradicted => paint.red("CONTRADICTED "),
                Verdict::Consistent => paint.green("consistent   "),
                Verdict::Unexercised => "unexercised  ".to_string(),
                Verdict::NotApplicable => "n/a          ".to_string(),
            };
            writeln!(
                o,
                "    {:<16} {:<8} {tag} {}{}",
                v.hint.key(),
                esc(&v.declared),
                esc(&v.reason),
                accepted
                    .map(|a| format!(" ({})", esc(a)))
                    .unwrap_or_default()
            )?;
            for e in &v.evidence {
                writeln!(o, "        {}: {}", e.source, esc(&e.labelled()))?;
            }
        }
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
                writeln!(
                    o,
                    "    {}: {}",
                    first.label(),
                    esc(&crate::mcp::tool::shorten(&d, 200))
                )?;
            }
        }
        let args = serde_json::to_string(&t.arguments).unwrap_or_default();
        writeln!(
            o,
            "    arguments: {}",
            esc(&crate::mcp::tool::shorten(&args, 300))
        )?;
        for n in t.synthesis_notes.iter().take(3) {
            writeln!(o, "    note:      {}", esc(n))?;
        }
        for s in &t.suggestions {
            let basis = match s.basis {
                SuggestionBasis::Observed => "observed",
                SuggestionBasis::Consistent => "consistent with what was exercised",
            };
            writeln!(
                o,
                "    suggest:   {}: {} ({basis}: {})",
                s.hint.key(),
                s.value,
                esc(&s.reason)
            )?;
        }
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
    writeln!(o, "\ncoverage: {}", c.describe())?;
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
    writeln!(
        o,
        "limits:   verdicts cover only the arguments tried and what the observers saw; `consistent` is not proof of absence"
    )?;
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
            "baseline: {} finding(s) accepted by {}",
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
    let result = format!("{} (exit {})", r.exit_reason, r.exit_code);
    let result = match r.exit_code {
        0 => paint.green(&result),
        1 => paint.red(&result),
        _ => paint.yellow(&result),
    };
    writeln!(o, "\nresult:   {result}")?;
    Ok(())
}
