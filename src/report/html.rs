//! One self-contained HTML page for people to browse: the figures of a scan (or of one run)
//! with a chart of declared versus contradicted versus unexercised hints, a row per server, and
//! per server its tools with their verdicts and evidence. It is made from the versioned JSON
//! reports (what `merge` reads back from scan lines, what `verify --format json` writes), so
//! both commands share it; every string from a server is escaped twice over (control and
//! bidirectional characters made visible, then HTML-escaped by `maud`), ids are our own
//! counters, and a Content-Security-Policy forbids anything but the page's own inline style.

use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde_json::Value;

use super::status::{ServerStatus, StatusFacts};

/// The four hints, in the order the page shows them.
const HINTS: [&str; 4] = [
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// Evidence lines shown per verdict before "and N more".
const EVIDENCE_SHOWN: usize = 12;

/// One server on the page: its scan line's facts and, when it ran, its JSON report.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    /// The scenario's id or the registry entry's `name@version`.
    pub id: &'a str,
    /// Where it came from (the scenario file, or the registry document and entry).
    pub target: &'a str,
    /// The exit code `verify` gave it.
    pub exit_code: i32,
    /// Why.
    pub exit_reason: &'a str,
    /// Why it was not run, for a skipped registry entry.
    pub skipped: Option<&'a str>,
    /// The end of the child's stderr, when no report came back.
    pub error: Option<&'a str>,
    /// With `--check`: the expectation outcome.
    pub expectations: Option<&'a Value>,
    /// The whole JSON report (schema_version 1).
    pub report: Option<&'a Value>,
}

impl<'a> Entry<'a> {
    /// The report of a server that ran (a skipped one may carry a report of its setup).
    fn ran(&self) -> Option<&'a Value> {
        self.report.filter(|_| self.skipped.is_none())
    }
}

/// What one hint looks like across all tools on the page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HintTally {
    /// Tools that declared it (any value).
    pub declared: u64,
    /// Verdicts `contradicted`.
    pub contradicted: u64,
    /// Verdicts `consistent`.
    pub consistent: u64,
    /// Verdicts `unexercised`.
    pub unexercised: u64,
    /// Declared, but promising nothing to check (or implied by another hint).
    pub not_applicable: u64,
}

/// The figures a researcher would quote, over every server with a report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Figures {
    /// Servers on the page.
    pub servers: usize,
    /// Servers with a report.
    pub servers_run: usize,
    /// Registry entries not run.
    pub servers_skipped: usize,
    /// Servers that were run but gave no report.
    pub servers_failed: usize,
    /// Servers with at least one contradicted hint.
    pub servers_contradicted: usize,
    /// Tools listed by the servers that ran.
    pub tools: u64,
    /// Tools with at least one hint whose declared value promises something checkable.
    pub tools_with_claim: u64,
    /// Tools with at least one contradicted hint.
    pub tools_contradicted: u64,
    /// Tools with at least one successful call.
    pub tools_reached: u64,
    /// Tools that could be called here (listed, not skipped, not waiting on what this machine
    /// cannot give).
    pub tools_reachable: u64,
    /// Checkable claims (hint verdicts contradicted, consistent or unexercised).
    pub claims: u64,
    /// Per hint, in [`HINTS`] order.
    pub hints: [HintTally; 4],
}

impl Figures {
    /// Tallies the reports of `entries`.
    pub fn of(entries: &[Entry<'_>]) -> Self {
        let mut f = Figures {
            servers: entries.len(),
            ..Figures::default()
        };
        for e in entries {
            if e.skipped.is_some() {
                f.servers_skipped += 1;
                continue;
            }
            let Some(report) = e.report else {
                f.servers_failed += 1;
                continue;
            };
            f.servers_run += 1;
            let (reached, reachable) = reach(report);
            f.tools_reached += reached;
            f.tools_reachable += reachable;
            let mut server_contradicted = false;
            for tool in tools(report) {
                f.tools += 1;
                let mut claim = false;
                let mut contradicted = false;
                for v in tool["verdicts"].as_array().into_iter().flatten() {
                    // A hint resolved for some arguments is no declaration of the tool's: it
                    // marks the tool, not the hint's tally.
                    if v["source"].is_string() {
                        if v["verdict"] == "contradicted" {
                            contradicted = true;
                            claim = true;
                        }
                        continue;
                    }
                    let Some(i) = HINTS.iter().position(|h| v["hint"] == *h) else {
                        continue;
                    };
                    let tally = &mut f.hints[i];
                    if v["declared"].as_str().is_some_and(|d| d != "absent") {
                        tally.declared += 1;
                    }
                    match v["verdict"].as_str() {
                        Some("contradicted") => {
                            tally.contradicted += 1;
                            contradicted = true;
                            claim = true;
                        }
                        Some("consistent") => {
                            tally.consistent += 1;
                            claim = true;
                        }
                        Some("unexercised") => {
                            tally.unexercised += 1;
                            claim = true;
                        }
                        _ if v["declared"].as_str().is_some_and(|d| d != "absent") => {
                            tally.not_applicable += 1;
                        }
                        _ => {}
                    }
                }
                f.tools_with_claim += u64::from(claim);
                f.tools_contradicted += u64::from(contradicted);
                server_contradicted |= contradicted;
            }
            f.servers_contradicted += usize::from(server_contradicted);
        }
        f.claims = f
            .hints
            .iter()
            .map(|h| h.contradicted + h.consistent + h.unexercised)
            .sum();
        f
    }

    fn contradicted_claims(&self) -> u64 {
        self.hints.iter().map(|h| h.contradicted).sum()
    }

    fn unexercised_claims(&self) -> u64 {
        self.hints.iter().map(|h| h.unexercised).sum()
    }
}

/// The tools of a report.
fn tools(report: &Value) -> impl Iterator<Item = &Value> {
    report["tools"].as_array().into_iter().flatten()
}

/// Tools with a successful call, and tools that could be called here (as `[expect] reach`
/// counts them).
fn reach(report: &Value) -> (u64, u64) {
    let mut reached = 0;
    let mut possible: u64 = 0;
    for t in tools(report) {
        let calls = t["calls"].as_array().map(Vec::as_slice).unwrap_or_default();
        if calls.iter().any(|c| c["outcome"] == "ok") {
            reached += 1;
        }
        if !calls.is_empty() || t["skipped"].is_null() {
            possible += 1;
        }
    }
    let unavailable = report["coverage"]["unreached"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|u| u["unavailable_here"] == true)
        .count() as u64;
    (reached, possible.saturating_sub(unavailable))
}

/// `part` of `whole` as a percentage, or a dash when there is no whole.
fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        "–".into()
    } else {
        format!("{:.0}%", part as f64 * 100.0 / whole as f64)
    }
}

/// A server's string, made safe to show (HTML escaping is maud's).
fn shown(s: &str) -> String {
    crate::text::escape::terminal(s)
}

/// A long server string cut to `max` characters.
fn shown_cut(s: &str, max: usize) -> String {
    let mut cut: String = s.chars().take(max).collect();
    if cut.len() < s.len() {
        cut.push('…');
    }
    shown(&cut)
}

/// The page for a scan (`merge --format html`) or one run (`verify --format html`).
/// `notes` are said under the figures (shards missing from a merge).
pub fn render(title: &str, entries: &[Entry<'_>], notes: &[String]) -> String {
    let figures = Figures::of(entries);
    let generated_by = entries
        .iter()
        .find_map(|e| e.report.and_then(|r| r["hintcheck_version"].as_str()))
        .unwrap_or(env!("CARGO_PKG_VERSION"));
    // One server: its result and its contradictions open the page; the figures of a scan
    // follow its details.
    let single = match entries {
        [e] => e.ran().map(|r| (e, r)),
        _ => None,
    };
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta http-equiv="Content-Security-Policy"
                    content="default-src 'none'; style-src 'unsafe-inline'; img-src data:";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                header {
                    h1 { (title) }
                    p.lede {
                        "hintcheck " (shown(generated_by)) " launched " (if single.is_some() { "the server" } else { "each server" }) " in its sandbox, called its tools with arguments made from their schemas, and judged each declared hint by what it saw. A hint is "
                        span.v.v-contradicted { "contradicted" } " when an observation goes against it, "
                        span.v.v-consistent { "consistent" } " when calls succeeded and nothing went against it, and "
                        span.v.v-unexercised { "unexercised" } " when no successful call reached it. A clean result proves only what was exercised."
                    }
                }
                @if let Some((e, report)) = single {
                    (single_result(e, report))
                    (variants(report))
                } @else {
                    (summary(&figures))
                }
                @for note in notes {
                    p.note { strong { "Note: " } (note) }
                }
                @if single.is_none() {
                    (server_table(entries))
                }
                section #servers-in-detail {
                    h2 { @if single.is_some() { "The server in detail" } @else { "Servers in detail" } }
                    @for (i, e) in entries.iter().enumerate() {
                        @if let Some(report) = e.ran() {
                            (server_detail(i, e, report, entries.len() == 1))
                        }
                    }
                    @if figures.servers_run == 0 {
                        p.muted { "No server produced a report." }
                    }
                }
                @if single.is_some() {
                    (summary(&figures))
                }
                footer {
                    p.muted {
                        "Made by hintcheck " (env!("CARGO_PKG_VERSION")) " from " (figures.servers) " server(s). Every name, description and path on this page came from the servers under test and is shown as text."
                    }
                }
            }
        }
    };
    page.into_string()
}

/// The page for one run (`verify --format html`), made from its JSON report.
pub fn render_report(r: &super::Report) -> String {
    let report = serde_json::to_value(super::json::to_v1(r)).unwrap_or_default();
    let id = report["server"]["server_info"]["name"]
        .as_str()
        .unwrap_or("the server")
        .to_string();
    let target = report["server"]["command"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let entry = Entry {
        id: &id,
        target: &target,
        exit_code: r.exit_code,
        exit_reason: &r.exit_reason,
        skipped: None,
        error: None,
        expectations: None,
        report: Some(&report),
    };
    render(
        &format!("hintcheck verify: {}", shown_cut(&id, 80)),
        &[entry],
        &[],
    )
}

/// The result of a one-server page, first: its status and exit, and every contradicted hint
/// with the observation that contradicts it.
fn single_result(e: &Entry<'_>, report: &Value) -> Markup {
    let (text, class, _) = status(e);
    let contradicted: Vec<(&str, &Value)> = tools(report)
        .flat_map(|t| {
            let name = t["name"].as_str().unwrap_or("?");
            // Hints, then data labels (whose `label` stands where a hint's name does).
            t["verdicts"]
                .as_array()
                .into_iter()
                .flatten()
                .chain(t["data_labels"].as_array().into_iter().flatten())
                .filter(|v| v["verdict"] == "contradicted")
                .map(move |v| (name, v))
        })
        .collect();
    html! {
        section #result {
            h2 { "Result" }
            p.result {
                span class=(format!("v v-{class}")) { (text) } " "
                (shown_cut(e.exit_reason, 300)) " (exit " (e.exit_code) ")"
            }
            @if !contradicted.is_empty() {
                table #contradictions {
                    thead { tr { th { "tool" } th { "hint or data label" } th { "declared" } th { "what was seen" } } }
                    tbody {
                        @for (tool, v) in &contradicted {
                            tr {
                                td { code { (shown_cut(tool, 120)) } }
                                td {
                                    code { (shown(v["hint"].as_str().or(v["label"].as_str()).unwrap_or(""))) }
                                    @if let Some(source) = v["source"].as_str() {
                                        " " span.muted.small { "(" (shown(source)) " for " code { (shown_cut(&v["arguments"].to_string(), 120)) } ")" }
                                    }
                                }
                                td { (shown_cut(v["declared"].as_str().unwrap_or(""), 120)) }
                                td {
                                    @if let Some(source) = v["evidence"][0]["source"].as_str() {
                                        (shown_cut(source, 60)) ": "
                                    }
                                    (shown_cut(v["evidence"][0]["text"].as_str().unwrap_or(v["reason"].as_str().unwrap_or("")), 300))
                                    @if v["uncertain"] == true { " " span.muted { "(uncertain)" } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The summary: the figures and the chart.
fn summary(f: &Figures) -> Markup {
    let contradicted_claims = f.contradicted_claims();
    html! {
        section #summary {
            h2 { "Summary" }
            div.figures {
                div.figure {
                    span.big { (f.servers_run) }
                    span.label { "server(s) verified" }
                    span.sub { "of " (f.servers) " · " (f.servers_skipped) " skipped · " (f.servers_failed) " without a report" }
                }
                div.figure {
                    span.big { (f.tools) }
                    span.label { "tools" }
                    span.sub { (f.claims) " checkable claim(s)" }
                }
                div.figure #share-with-claim {
                    span.big { (percent(f.tools_with_claim, f.tools)) }
                    span.label { "of tools make a checkable claim" }
                    span.sub { (f.tools_with_claim) " of " (f.tools) }
                }
                div.figure.bad[f.tools_contradicted > 0] #share-contradicted {
                    span.big { (percent(f.tools_contradicted, f.tools_with_claim)) }
                    span.label { "of those have a claim contradicted" }
                    span.sub { (f.tools_contradicted) " tool(s) · " (contradicted_claims) " of " (f.claims) " claims · " (f.servers_contradicted) " server(s)" }
                }
                div.figure #reach {
                    span.big { (percent(f.tools_reached, f.tools_reachable)) }
                    span.label { "reach" }
                    span.sub { (f.tools_reached) " of " (f.tools_reachable) " callable tool(s) answered a call successfully" }
                }
                div.figure #share-unexercised {
                    span.big { (percent(f.unexercised_claims(), f.claims)) }
                    span.label { "of claims unexercised" }
                    span.sub { (f.unexercised_claims()) " claim(s) no successful call reached" }
                }
            }
            figure {
                (chart(f))
                figcaption { "Per hint: the tools that declared it, by verdict. Not applicable: the declared value promises nothing to check (readOnlyHint: false, destructiveHint: true, …) or another hint settles it." }
            }
            table.numbers #hint-table {
                thead { tr { th { "hint" } th { "declared" } th { "contradicted" } th { "consistent" } th { "unexercised" } th { "not applicable" } th { "not declared" } } }
                tbody {
                    @for (hint, t) in HINTS.iter().zip(f.hints.iter()) {
                        tr {
                            td { code { (hint) } }
                            td { (t.declared) }
                            td { (t.contradicted) }
                            td { (t.consistent) }
                            td { (t.unexercised) }
                            td { (t.not_applicable) }
                            td { (f.tools.saturating_sub(t.declared)) }
                        }
                    }
                }
            }
        }
    }
}

/// Horizontal stacked bars, one per hint: declared, split by verdict.
fn chart(f: &Figures) -> Markup {
    const LABEL: f64 = 130.0;
    const BAR: f64 = 440.0;
    const ROW: f64 = 30.0;
    let longest = f.hints.iter().map(|h| h.declared).max().unwrap_or(0).max(1) as f64;
    let height = ROW * HINTS.len() as f64 + 34.0;
    let width = LABEL + BAR + 60.0;
    // Each non-empty segment with where it starts and how wide it is, and where the bar ends.
    let layout = |t: &HintTally| {
        let mut x = LABEL;
        let mut bars = Vec::new();
        for (class, n) in [
            ("contradicted", t.contradicted),
            ("consistent", t.consistent),
            ("unexercised", t.unexercised),
            ("na", t.not_applicable),
        ] {
            if n > 0 {
                let w = n as f64 / longest * BAR;
                bars.push((class, x, w, n));
                x += w;
            }
        }
        (bars, x)
    };
    html! {
        svg #hint-chart xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {width} {height}")) width=(width) height=(height)
            aria-label="Declared hints by verdict" {
            @for (row, (hint, t)) in HINTS.iter().zip(f.hints.iter()).enumerate() {
                @let y = row as f64 * ROW + 6.0;
                text x=(LABEL - 8.0) y=(y + 15.0) text-anchor="end" class="axis" { (hint) }
                @let (bars, end) = layout(t);
                @for (class, x, w, n) in bars {
                    rect class=(format!("seg-{class}")) x=(format!("{x:.1}")) y=(y) width=(format!("{w:.1}")) height="20" {
                        title { (n) " " (if class == "na" { "not applicable" } else { class }) }
                    }
                }
                text x=(format!("{:.1}", end + 6.0)) y=(y + 15.0) class="axis" { (t.declared) }
            }
            @let ly = ROW * HINTS.len() as f64 + 14.0;
            @for (i, (class, name)) in [("contradicted", "contradicted"), ("consistent", "consistent"), ("unexercised", "unexercised"), ("na", "not applicable")].iter().enumerate() {
                @let lx = LABEL + i as f64 * 115.0;
                rect class=(format!("seg-{class}")) x=(lx) y=(ly) width="12" height="12" {}
                text x=(lx + 16.0) y=(ly + 11.0) class="legend" { (name) }
            }
        }
    }
}

/// A server's status in a few words, its class, and the detail to show under it.
fn status(e: &Entry<'_>) -> (String, &'static str, Option<String>) {
    let status = ServerStatus::of(StatusFacts {
        exit_code: e.exit_code,
        skipped: e.skipped,
        has_report: e.report.is_some(),
        expectations: e.expectations,
        report: e.report,
    });
    let detail = match (e.skipped, e.error) {
        (Some(why), _) => Some(shown_cut(why, 300)),
        (None, Some(err)) => Some(shown_cut(err.lines().last().unwrap_or(""), 300)),
        (None, None) => None,
    };
    (status.words(), status.class(), detail)
}

/// Where the run's settings came from, from the JSON report's `settings.sources`:
/// `--timeout from the command line; [run] repeat from the scenario …` (empty: all defaults).
fn settings_sources(settings: &Value) -> String {
    settings["sources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|group| {
            let options: Vec<&str> = group["options"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            format!(
                "{} from {}",
                options.join(", "),
                group["from"].as_str().unwrap_or("?")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The server's name and version from its report.
fn server_name(report: &Value) -> String {
    let info = &report["server"]["server_info"];
    match (info["name"].as_str(), info["version"].as_str()) {
        (Some(n), Some(v)) => shown_cut(&format!("{n} {v}"), 80),
        (Some(n), None) => shown_cut(n, 80),
        _ => "–".into(),
    }
}

/// A row per server.
fn server_table(entries: &[Entry<'_>]) -> Markup {
    html! {
        section #servers {
            h2 { "Servers" }
            table #server-table {
                thead { tr { th { "server" } th { "reports as" } th { "transport" } th { "sandbox" } th.n { "tools" } th.n { "reach" } th.n { "contradicted" } th { "result" } } }
                tbody {
                    @for (i, e) in entries.iter().enumerate() {
                        @let (text, class, detail) = status(e);
                        tr class=(format!("row-{class}")) {
                            td {
                                @if e.ran().is_some() {
                                    a href=(format!("#server-{i}")) { (shown_cut(e.id, 120)) }
                                } @else {
                                    (shown_cut(e.id, 120))
                                }
                                br;
                                span.muted.small { (shown_cut(e.target, 160)) }
                            }
                            @if let Some(r) = e.ran() {
                                @let (reached, possible) = reach(r);
                                td { (server_name(r)) }
                                td { (shown(r["settings"]["transport"].as_str().unwrap_or("stdio"))) }
                                td { (shown(r["sandbox"]["level"].as_str().unwrap_or("–"))) }
                                td.n { (tools(r).count()) }
                                td.n { (reached) "/" (possible) }
                                td.n { (r["summary"]["contradicted"].as_u64().unwrap_or(0)) }
                            } @else {
                                td { "–" } td { "–" } td { "–" } td.n { "–" } td.n { "–" } td.n { "–" }
                            }
                            td {
                                span class=(format!("v v-{class}")) { (text) }
                                @if let Some(detail) = detail {
                                    br;
                                    span.muted.small.detail { (detail) }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One server: what ran, in what sandbox, and its tools.
fn server_detail(i: usize, e: &Entry<'_>, report: &Value, open: bool) -> Markup {
    let contradicted = report["summary"]["contradicted"].as_u64().unwrap_or(0);
    let sandbox = &report["sandbox"];
    let coverage = &report["coverage"];
    let command: Vec<String> = report["server"]["command"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|s| shown_cut(s, 200))
        .collect();
    let (secrets, findings): (Vec<&Value>, Vec<&Value>) = report["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["hint"].is_null())
        .partition(|f| f["audit"].as_str().is_some_and(crate::audit::about_secrets));
    // `None` for a report from before canaries were planted.
    let canaries = report["canaries"].as_array().map(Vec::len);
    html! {
        details.server id=(format!("server-{i}")) open[open || contradicted > 0 || !secrets.is_empty()] {
            summary {
                strong { (shown_cut(e.id, 120)) }
                " — " (server_name(report)) " — "
                @if contradicted > 0 {
                    span.v.v-contradicted { (contradicted) " contradicted" }
                } @else {
                    span.muted { (shown_cut(e.exit_reason, 200)) }
                }
            }
            dl.facts {
                dt { "result" } dd { (shown_cut(e.exit_reason, 300)) " (exit " (e.exit_code) ")" }
                dt { "command" } dd { code { (command.join(" ")) } }
                dt { "protocol" } dd {
                    (shown(report["server"]["protocol_version"].as_str().unwrap_or("–")))
                    " over " (shown(report["settings"]["transport"].as_str().unwrap_or("stdio")))
                }
                dt { "sandbox" } dd {
                    (shown(sandbox["level"].as_str().unwrap_or("–"))) ": "
                    (shown(sandbox["summary"].as_str().unwrap_or("")))
                    @for gap in sandbox["not_enforced"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                        br; span.muted { "not enforced: " (shown(gap)) }
                    }
                }
                @let notes: Vec<&str> = report["notes"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
                @if !notes.is_empty() {
                    dt { "notes" } dd {
                        ul.notes {
                            @for n in notes.iter().take(20) { li { (shown_cut(n, 400)) } }
                            @if notes.len() > 20 { li.muted { "and " (notes.len() - 20) " more" } }
                        }
                    }
                }
                dt { "observed" } dd {
                    "files " (if coverage["files_observed"] == true { "yes" } else { "no" })
                    ", network " (if coverage["network_observed"] == true { "yes" } else { "no" })
                    "; " (coverage["calls"].as_u64().unwrap_or(0)) " call(s), "
                    (coverage["tools_succeeded"].as_u64().unwrap_or(0)) " of "
                    (coverage["tools_listed"].as_u64().unwrap_or(0)) " tool(s) answered a call successfully"
                }
                @if let Some(canaries) = canaries {
                    dt { "canaries" } dd {
                        @if canaries > 0 {
                            (canaries) " fake credential(s) planted (SSH keys, tokens, a .env, API keys in the environment)"
                        } @else {
                            span.muted { "none planted" }
                        }
                    }
                }
                @if let Some(file) = report["settings"]["config_file"].as_str() {
                    dt { "config" } dd { (shown_cut(file, 300)) }
                }
                @let set = settings_sources(&report["settings"]);
                @if !set.is_empty() {
                    dt { "set" } dd { (shown_cut(&set, 600)) }
                }
            }
            @if !secrets.is_empty() {
                h4 { "Planted secrets handed on" }
                ul.findings {
                    @for f in &secrets {
                        li {
                            span class=(format!("sev sev-{}", severity_class(f))) { (shown(f["severity"].as_str().unwrap_or(""))) }
                            " " (shown_cut(f["message"].as_str().unwrap_or(""), 400))
                            ul {
                                @for e in f["evidence"].as_array().into_iter().flatten().take(10) {
                                    li {
                                        (shown_cut(e["source"].as_str().unwrap_or(""), 100)) ": "
                                        (shown_cut(e["text"].as_str().unwrap_or(""), 300))
                                    }
                                }
                            }
                        }
                    }
                }
            }
            table.tools {
                thead { tr { th { "tool" } @for h in HINTS { th { code { (h) } } } } }
                tbody {
                    @for (j, tool) in tools(report).enumerate() {
                        (tool_rows(i, j, tool))
                    }
                }
            }
            @if !findings.is_empty() {
                h4 { "Other findings" }
                ul.findings {
                    @for f in findings.iter().take(50) {
                        li {
                            span class=(format!("sev sev-{}", severity_class(f))) { (shown(f["severity"].as_str().unwrap_or(""))) }
                            " " (shown(f["audit"].as_str().unwrap_or(""))) ": "
                            (shown_cut(f["message"].as_str().unwrap_or(""), 400))
                        }
                    }
                    @if findings.len() > 50 { li.muted { "and " (findings.len() - 50) " more" } }
                }
            }
        }
    }
}

fn severity_class(f: &Value) -> &'static str {
    match f["severity"].as_str() {
        Some("error") => "error",
        Some("warning") => "warning",
        _ => "note",
    }
}

fn verdict_class(v: &Value) -> &'static str {
    match v["verdict"].as_str() {
        Some("contradicted") => "contradicted",
        Some("consistent") => "consistent",
        Some("unexercised") => "unexercised",
        _ => "na",
    }
}

/// A tool's row (declared value and verdict per hint) and the row of its reasons and evidence.
fn tool_rows(i: usize, j: usize, tool: &Value) -> Markup {
    let verdicts: Vec<&Value> = tool["verdicts"].as_array().into_iter().flatten().collect();
    let by_hint = |h: &str| {
        verdicts
            .iter()
            .copied()
            .find(|v| v["hint"] == h && v["source"].is_null())
    };
    // The static hints' verdicts, then those on hints the server resolved.
    let claims: Vec<&Value> = HINTS
        .iter()
        .filter_map(|h| by_hint(h))
        .chain(verdicts.iter().copied().filter(|v| v["source"].is_string()))
        .filter(|v| verdict_class(v) != "na")
        .collect();
    let labels: Vec<&Value> = tool["data_labels"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let contradicted = claims
        .iter()
        .chain(&labels)
        .any(|v| verdict_class(v) == "contradicted");
    let by_argument: Vec<&Value> = tool["by_argument"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let reached = tool["calls"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["outcome"] == "ok");
    html! {
        tr id=(format!("server-{i}-tool-{j}")) {
            td {
                strong { (shown_cut(tool["name"].as_str().unwrap_or(""), 120)) }
                @if let Some(why) = tool["skipped"].as_str() {
                    br; span.muted.small { "skipped: " (shown_cut(why, 200)) }
                } @else if !reached {
                    br; span.muted.small { "no successful call" }
                }
            }
            @for h in HINTS {
                @if let Some(v) = by_hint(h) {
                    td title=(shown_cut(v["reason"].as_str().unwrap_or(""), 400)) {
                        span.declared { (shown_cut(v["declared"].as_str().unwrap_or(""), 40)) }
                        " "
                        span class=(format!("v v-{}", verdict_class(v))) {
                            (v["verdict"].as_str().unwrap_or("").replace("not-applicable", "n/a"))
                        }
                        @if v["uncertain"] == true { " " span.muted.small { "(uncertain)" } }
                    }
                } @else {
                    td { "–" }
                }
            }
        }
        @if !claims.is_empty() || !labels.is_empty() || !by_argument.is_empty() {
            tr.why {
                td colspan="5" {
                    details open[contradicted] {
                        summary { "why" }
                        @for v in claims.iter().chain(&labels) {
                            p {
                                @if let Some(label) = v["label"].as_str() {
                                    "data label " code { (shown(label)) } " " span.declared { (shown_cut(v["declared"].as_str().unwrap_or(""), 80)) }
                                } @else {
                                    code { (shown(v["hint"].as_str().unwrap_or(""))) }
                                    @if let Some(source) = v["source"].as_str() {
                                        " (" (shown(source)) ")"
                                    }
                                }
                                " "
                                span class=(format!("v v-{}", verdict_class(v))) { (shown(v["verdict"].as_str().unwrap_or(""))) }
                                ": " (shown_cut(v["reason"].as_str().unwrap_or(""), 600))
                            }
                            @let evidence: Vec<&Value> = v["evidence"].as_array().into_iter().flatten().collect();
                            @if !evidence.is_empty() {
                                ul.evidence {
                                    @for ev in evidence.iter().take(EVIDENCE_SHOWN) {
                                        li {
                                            span.source { (shown(ev["source"].as_str().unwrap_or(""))) } ": "
                                            (shown_cut(ev["text"].as_str().unwrap_or(""), 400))
                                            @if let Some(by) = ev["seen_by"].as_str() { " " span.muted.small { "(seen by " (shown(by)) ")" } }
                                        }
                                    }
                                    @if evidence.len() > EVIDENCE_SHOWN {
                                        li.muted { "and " (evidence.len() - EVIDENCE_SHOWN) " more (in the JSON report)" }
                                    }
                                }
                            }
                        }
                        @if !by_argument.is_empty() {
                            (by_argument_table(&by_argument))
                        }
                    }
                }
            }
        }
    }
}

/// The configurations run beside the default one (`variants[]`): each one's settings, result
/// and contradicted hints.
fn variants(report: &Value) -> Markup {
    let variants: Vec<&Value> = report["variants"]
        .as_array()
        .into_iter()
        .flatten()
        .collect();
    let text = |v: &Value| v.as_str().unwrap_or("").to_string();
    html! {
        @if !variants.is_empty() {
            section #variants {
                h2 { "Variants" }
                p.muted { "The same server run again in other configurations; the exit code covers them all." }
                table {
                    thead { tr { th { "variant" } th { "settings" } th { "result" } th { "contradicted" } } }
                    tbody {
                        @for v in &variants {
                            tr {
                                td { code { (shown_cut(&text(&v["name"]), 80)) } }
                                td.small {
                                    @for s in v["settings"].as_array().into_iter().flatten() {
                                        code { (shown_cut(&text(s), 200)) } br;
                                    }
                                }
                                td { (shown_cut(&text(&v["exit_reason"]), 300)) " (exit " (v["exit_code"]) ")" }
                                td {
                                    @for t in v["tools"].as_array().into_iter().flatten() {
                                        @for h in t["verdicts"].as_array().into_iter().flatten().filter(|h| h["verdict"] == "contradicted") {
                                            code { (shown_cut(&text(&t["name"]), 120)) } " " (shown(&text(&h["hint"]))) ": " (shown_cut(&text(&h["declared"]), 40))
                                            @if h["source"].is_string() { " (resolved)" }
                                            br;
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// What each value of the tool's selecting arguments did: value, behaviour, calls, the hints
/// it contradicted, and the first piece of evidence or why it was not reached.
fn by_argument_table(entries: &[&Value]) -> Markup {
    let text = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let list = |v: &Value| -> String {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    html! {
        table.by-argument {
            caption.small.muted { "by argument: what each value did" }
            tr { th { "value" } th { "behaviour" } th { "calls" } th { "contradicts" } th { "evidence" } }
            @for e in entries {
                @let behaviour = e["behaviour"].as_str().unwrap_or("");
                tr {
                    td { code { (shown_cut(e["argument"].as_str().unwrap_or(""), 60)) ": " (shown_cut(&text(&e["value"]), 60)) } }
                    td class=(if list(&e["contradicts"]).is_empty() { "" } else { "v v-contradicted" }) {
                        (shown(behaviour))
                        @let more = list(&e["effects"]);
                        @if !more.is_empty() { " + " (shown(&more)) }
                    }
                    td { (e["calls"].as_array().map_or(0, Vec::len)) }
                    td { (shown(&list(&e["contradicts"]))) }
                    td.small {
                        @if let Some(first) = e["evidence"].as_array().and_then(|a| a.first()) {
                            span.source { (shown(first["source"].as_str().unwrap_or(""))) } ": "
                            (shown_cut(first["text"].as_str().unwrap_or(""), 300))
                        } @else if let Some(note) = e["note"].as_str() {
                            span.muted { (shown_cut(note, 300)) }
                        }
                    }
                }
            }
        }
    }
}

/// The page's style: readable on screen and in print, no external fonts.
const STYLE: &str = r#"
:root { --red: #c62828; --green: #2e7d32; --amber: #b26a00; --grey: #9e9e9e; --ink: #1d1d1f; --muted: #6b6b70; --line: #e3e3e8; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); margin: 0 auto; max-width: 1180px; padding: 24px; }
h1 { font-size: 26px; margin: 0 0 6px; }
h2 { font-size: 20px; margin: 32px 0 12px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h4 { margin: 16px 0 6px; }
.lede { color: var(--muted); max-width: 860px; }
.muted { color: var(--muted); }
.small { font-size: 12px; }
code { font: 13px ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; overflow-wrap: anywhere; }
.figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 12px; }
.figure { border: 1px solid var(--line); border-radius: 8px; padding: 12px; display: flex; flex-direction: column; }
.figure .big { font-size: 30px; font-weight: 650; }
.figure.bad .big { color: var(--red); }
.figure .label { font-weight: 600; }
.figure .sub { color: var(--muted); font-size: 12px; margin-top: 4px; }
figure { margin: 20px 0 8px; }
figcaption { color: var(--muted); font-size: 13px; }
svg .axis, svg .legend { font: 13px ui-monospace, Menlo, Consolas, monospace; fill: var(--ink); }
.seg-contradicted { fill: var(--red); } .seg-consistent { fill: var(--green); } .seg-unexercised { fill: var(--amber); } .seg-na { fill: var(--grey); }
table { border-collapse: collapse; width: 100%; margin: 8px 0; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 13px; color: var(--muted); font-weight: 600; }
table.by-argument { font-size: 13px; margin-top: 10px; }
table.by-argument caption { text-align: left; }
td.n, th.n, table.numbers td, table.numbers th { text-align: right; }
table.numbers td:first-child, table.numbers th:first-child { text-align: left; }
.v { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600; color: #fff; background: var(--grey); white-space: nowrap; }
.v-contradicted { background: var(--red); } .v-consistent, .v-clean { background: var(--green); } .v-unexercised { background: var(--amber); }
.v-error { background: #6a1b9a; } .v-warning { background: var(--amber); } .v-skipped, .v-na { background: var(--grey); }
.declared { font: 12px ui-monospace, Menlo, Consolas, monospace; color: var(--muted); }
details.server { border: 1px solid var(--line); border-radius: 8px; padding: 8px 12px; margin: 10px 0; }
details.server > summary { cursor: pointer; font-size: 16px; }
dl.facts { display: grid; grid-template-columns: 110px 1fr; gap: 4px 12px; margin: 12px 0; }
dl.facts dt { color: var(--muted); } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
tr.why td { border-bottom: 1px solid var(--line); padding-top: 0; }
tr.why summary { cursor: pointer; color: var(--muted); font-size: 13px; }
tr.why p { margin: 6px 0 2px; }
ul.evidence { margin: 2px 0 8px; padding-left: 20px; font-size: 13px; overflow-wrap: anywhere; }
.source { font-weight: 600; }
.sev { font-size: 12px; font-weight: 600; text-transform: uppercase; }
.sev-error { color: var(--red); } .sev-warning { color: var(--amber); } .sev-note { color: var(--muted); }
.row-skipped td { color: var(--muted); }
ul.notes { margin: 0; padding-left: 18px; }
.note { border-left: 4px solid var(--amber); padding: 6px 10px; background: #fff8e6; }
footer { margin-top: 32px; border-top: 1px solid var(--line); }
@media print { body { max-width: none; } }
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(tools: Value) -> Value {
        json!({
            "hintcheck_version": "0.1.0",
            "summary": {"contradicted": 1},
            "server": {"server_info": {"name": "<b>srv</b>", "version": "1"}, "command": ["x"]},
            "sandbox": {"level": "full", "summary": "ok"},
            "settings": {"transport": "stdio"},
            "coverage": {"unreached": []},
            "tools": tools,
            "findings": [],
            "notes": ["it ran on Node 26 from the npm registry"],
        })
    }

    fn verdict(hint: &str, declared: &str, verdict: &str) -> Value {
        json!({"hint": hint, "declared": declared, "verdict": verdict, "reason": "r", "evidence": []})
    }

    #[test]
    fn figures_count_claims_contradictions_and_reach() {
        let r = report(json!([
            {"name": "a", "calls": [{"outcome": "ok"}], "verdicts": [
                verdict("readOnlyHint", "true", "contradicted"),
                verdict("destructiveHint", "false", "not-applicable"),
                verdict("openWorldHint", "absent", "not-applicable"),
            ]},
            {"name": "b", "calls": [{"outcome": "isError"}], "verdicts": [
                verdict("readOnlyHint", "true", "unexercised"),
            ]},
            {"name": "c", "calls": [{"outcome": "ok"}], "verdicts": [
                verdict("readOnlyHint", "false", "not-applicable"),
            ]},
            {"name": "d", "calls": [], "skipped": "asked to", "verdicts": []},
        ]));
        let entries = [
            Entry {
                id: "one",
                target: "one.toml",
                exit_code: 1,
                exit_reason: "",
                skipped: None,
                error: None,
                expectations: None,
                report: Some(&r),
            },
            Entry {
                id: "two",
                target: "page.json",
                exit_code: 0,
                exit_reason: "",
                skipped: Some("remote only"),
                error: None,
                expectations: None,
                report: None,
            },
        ];
        let f = Figures::of(&entries);
        assert_eq!((f.servers, f.servers_run, f.servers_skipped), (2, 1, 1));
        assert_eq!(
            (f.tools, f.tools_with_claim, f.tools_contradicted),
            (4, 2, 1)
        );
        assert_eq!((f.tools_reached, f.tools_reachable), (2, 3));
        assert_eq!(f.claims, 2);
        assert_eq!(
            f.hints[0],
            HintTally {
                declared: 3,
                contradicted: 1,
                consistent: 0,
                unexercised: 1,
                not_applicable: 1
            }
        );
        assert_eq!(f.hints[1].declared, 1);
        assert_eq!(f.hints[3].declared, 0);
        let page = render(
            "hintcheck scan",
            &entries,
            &["no line from shard(s) 2/2".into()],
        );
        assert!(page.contains("&lt;b&gt;srv&lt;/b&gt;"), "names are escaped");
        assert!(!page.contains("<b>srv"));
        assert!(page.contains(">skipped</span>") && page.contains("remote only"));
        assert!(
            page.contains(">50%<"),
            "share contradicted of tools with a claim"
        );
        assert!(page.contains(">67%<"), "reach: 2 of 3");
        assert!(page.contains("no line from shard(s) 2/2"));
        assert!(
            page.contains("it ran on Node 26 from the npm registry"),
            "notes are shown"
        );
    }

    #[test]
    fn control_and_bidirectional_characters_are_made_visible() {
        let r = report(json!([
            {"name": "evil\u{202e}txt.exe</td><script>alert(1)</script>", "calls": [], "verdicts": [
                json!({"hint": "readOnlyHint", "declared": "true", "verdict": "unexercised",
                       "reason": "x\u{1b}[2J", "evidence": [{"source": "call 1", "text": "<img src=x onerror=alert(1)>"}]}),
            ]},
        ]));
        let entry = Entry {
            id: "s",
            target: "t",
            exit_code: 4,
            exit_reason: "",
            skipped: None,
            error: None,
            expectations: None,
            report: Some(&r),
        };
        let page = render("t", &[entry], &[]);
        assert!(!page.contains("<script>"));
        assert!(!page.contains("<img"));
        assert!(!page.contains('\u{202e}') && !page.contains('\u{1b}'));
        assert!(page.contains("\\u{202e}") && page.contains("&lt;script&gt;"));
    }
}
