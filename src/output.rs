//! Writing a finished run where the user asked: the main report (`--format`, `--output` or
//! stdout), the transcript, the extra SARIF (with its tool inventory), JUnit, JSON and
//! Markdown files, the `$GITHUB_STEP_SUMMARY` summary and a new baseline, each with the run's
//! planted secrets' values replaced by their kind and place ([`Redaction`]: they are fake,
//! but a realistic `ghp_…` token in an uploaded report sets off secret scanners and push
//! protection). Missing parent directories
//! are created. Every output is attempted
//! even when an earlier one failed, and a main report that cannot be written goes to stdout,
//! so that nothing is lost; the first failure is returned.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::baseline;
use crate::cli::Format;
use crate::config::RunConfig;
use crate::error::Error;
use crate::report::{self, Report, anchor};
use crate::run::Verification;

/// What the main output is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The report, in `--format`.
    Verify,
    /// The supported annotations (`hintcheck suggest`).
    Suggest,
}

/// Creates the parent directory of an output when it is missing.
fn ensure_parent(path: &Path) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.exists() => std::fs::create_dir_all(dir),
        _ => Ok(()),
    }
}

fn write_file(what: &'static str, path: &Path, text: &str) -> Result<(), Error> {
    ensure_parent(path)
        .and_then(|()| std::fs::write(path, text))
        .map_err(|source| Error::Output {
            what,
            path: path.to_path_buf(),
            source,
        })
}

fn append_file(what: &'static str, path: &Path, text: &str) -> Result<(), Error> {
    ensure_parent(path)
        .and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
        })
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|source| Error::Output {
            what,
            path: path.to_path_buf(),
            source,
        })
}

/// SARIF with its inventory (written once, whichever output needs it first).
struct Sarif<'a> {
    report: &'a Report,
    config: &'a RunConfig,
    text: Option<String>,
}

impl Sarif<'_> {
    fn render(&mut self, sarif_path: Option<&Path>, first_error: &mut Option<Error>) -> String {
        if let Some(t) = &self.text {
            return t.clone();
        }
        let outputs = &self.config.outputs;
        let inventory = anchor::inventory(self.report);
        let at: PathBuf = anchor::inventory_path(outputs.inventory.as_deref(), sarif_path);
        // SARIF on stdout leaves no file behind unless --inventory asks for one.
        let wanted = sarif_path.is_some() || outputs.inventory.is_some();
        if wanted {
            if let Err(e) = write_file("the tool inventory", &at, &inventory.text) {
                first_error.get_or_insert(e);
            }
        }
        let anchors = anchor::locate(
            self.report,
            &outputs.anchors,
            &inventory,
            &at,
            &outputs.source_root,
            wanted,
        );
        if !self.config.terminal.quiet {
            for (file, why) in &anchors.unused_files {
                eprintln!(
                    "hintcheck: --anchor {} {why}: no SARIF result points at it",
                    crate::text::escape::terminal(&file.display().to_string())
                );
            }
        }
        let text = report::sarif::render(self.report, &anchors);
        self.text = Some(text.clone());
        text
    }
}

/// The other files a run writes, by kind, as the JSON report lists them (`outputs`).
fn companions(config: &RunConfig) -> serde_json::Map<String, serde_json::Value> {
    let outputs = &config.outputs;
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, p: &Path| {
        m.insert(k.into(), serde_json::Value::from(p.display().to_string()));
    };
    // The SARIF the inventory goes beside: the main report's when it is SARIF (written first).
    let first_sarif = match config.outputs.format {
        Format::Sarif => config.outputs.main.as_deref().or(outputs.sarif.as_deref()),
        _ => outputs.sarif.as_deref(),
    };
    if let Some(p) = outputs.sarif.as_deref().or(first_sarif) {
        put("sarif", p);
    }
    if first_sarif.is_some() || outputs.inventory.is_some() {
        put(
            "inventory",
            &anchor::inventory_path(outputs.inventory.as_deref(), first_sarif),
        );
    }
    if let Some(p) = &outputs.junit {
        put("junit", p);
    }
    if let Some(p) = &outputs.summary {
        put("summary", p);
    }
    if let Some(p) = &config.outputs.transcript {
        put("transcript", p);
    }
    if let Some(p) = &outputs.write_baseline {
        put("baseline", p);
    }
    m
}

/// The values of the run's planted secrets, each with what a report shows instead.
struct Redaction(Vec<(String, String)>);

impl Redaction {
    /// The secrets `r` planted (none with `--no-canaries`): their values derive from the
    /// run's seed. A private key's body is also replaced line by line, as its file wraps it.
    fn of(r: &Report) -> Redaction {
        if r.canaries.is_empty() {
            return Redaction(Vec::new());
        }
        let canaries = crate::workspace::canary::Canaries::of(r.settings.seed);
        let planted = |kind: &str, place: &str| {
            r.canaries
                .iter()
                .any(|p| p.kind == kind && p.place == place)
        };
        let mut pairs: Vec<(String, String)> = canaries
            .items
            .iter()
            .filter(|c| planted(c.kind, &c.place))
            .map(|c| (c.value.clone(), format!("[planted {} {}]", c.kind, c.place)))
            .collect();
        for f in canaries
            .files
            .iter()
            .filter(|f| f.content.contains("PRIVATE KEY"))
        {
            let mark = format!("[planted ssh-private-key {}]", f.place());
            pairs.extend(
                f.content
                    .lines()
                    .filter(|l| l.len() >= 40 && !l.starts_with("-----"))
                    .map(|l| (l.to_string(), mark.clone())),
            );
            // Its armour too: key scanners match the markers with whatever lies between.
            pairs.extend(
                f.content
                    .lines()
                    .filter(|l| l.starts_with("-----"))
                    .map(|l| (l.to_string(), "[planted key armour]".to_string())),
            );
        }
        // The longest first: a value that holds another is replaced whole.
        pairs.sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
        Redaction(pairs)
    }

    /// `text` with every planted value replaced.
    fn apply(&self, text: String) -> String {
        let mut out = text;
        for (value, mark) in &self.0 {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), mark);
            }
        }
        out
    }
}

/// Writes every output of a run; returns the first failure.
pub fn emit(v: &Verification, config: &RunConfig, mode: Mode) -> Result<(), Error> {
    let r = &v.report;
    let redaction = Redaction::of(r);
    let write_file =
        |what, path: &Path, text: &str| write_file(what, path, &redaction.apply(text.to_string()));
    let append_file =
        |what, path: &Path, text: &str| append_file(what, path, &redaction.apply(text.to_string()));
    let outputs = &config.outputs;
    let companions = companions(config);
    let mut first_error: Option<Error> = None;
    let mut sarif = Sarif {
        report: r,
        config,
        text: None,
    };
    let main = match (mode, config.outputs.format) {
        (Mode::Suggest, Format::Text) => report::suggest::render_text(r),
        (Mode::Suggest, _) => report::suggest::render(r),
        (Mode::Verify, Format::Text) => report::text::render_with(
            r,
            config.terminal.color && config.outputs.main.is_none(),
            config.terminal.verbose,
        ),
        (Mode::Verify, Format::Json) => report::json::render_with_outputs(r, &companions),
        (Mode::Verify, Format::Sarif) => {
            let at = config.outputs.main.as_deref().or(outputs.sarif.as_deref());
            sarif.render(at, &mut first_error)
        }
        (Mode::Verify, Format::Junit) => report::junit::render(r),
        (Mode::Verify, Format::Markdown) => report::markdown::render(r),
        (Mode::Verify, Format::Html) => report::html::render_report(r),
    };
    let main = redaction.apply(main);
    match &config.outputs.main {
        Some(path) => {
            if let Err(e) = write_file("the report", path, &main) {
                // Never lose a report: print it, then fail.
                let _ = std::io::stdout().lock().write_all(main.as_bytes());
                first_error.get_or_insert(e);
            }
        }
        None => {
            let _ = std::io::stdout().lock().write_all(main.as_bytes());
        }
    }
    if outputs.annotations && mode == Mode::Verify {
        let text = report::annotations::render(r, &outputs.anchors, &outputs.source_root);
        let text = redaction.apply(text);
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
    }
    if let Some(path) = &config.outputs.transcript {
        /// A transcript line with the transport it went over.
        #[derive(serde::Serialize)]
        struct Line<'a> {
            #[serde(flatten)]
            entry: &'a crate::rpc::transcript::Entry,
            transport: &'a str,
        }
        let mut lines = String::new();
        for entry in &v.transcript {
            let line = Line {
                entry,
                transport: &r.settings.transport,
            };
            lines.push_str(&serde_json::to_string(&line).unwrap_or_default());
            lines.push('\n');
        }
        if let Err(e) = write_file("the transcript", path, &lines) {
            first_error.get_or_insert(e);
        }
    }
    if let Some(path) = &outputs.sarif {
        let text = sarif.render(Some(path), &mut first_error);
        if let Err(e) = write_file("the SARIF report", path, &text) {
            first_error.get_or_insert(e);
        }
    }
    if let Some(path) = &outputs.junit {
        if let Err(e) = write_file("the JUnit report", path, &report::junit::render(r)) {
            first_error.get_or_insert(e);
        }
    }
    if let Some(path) = &outputs.json {
        let text = report::json::render_with_outputs(r, &companions);
        if let Err(e) = write_file("the JSON report", path, &text) {
            first_error.get_or_insert(e);
        }
    }
    if let Some(path) = &outputs.summary {
        let mut text = report::markdown::render(r);
        text.push('\n');
        if let Err(e) = append_file("the Markdown summary", path, &text) {
            first_error.get_or_insert(e);
        }
    }
    if let Some(path) = &outputs.write_baseline {
        let text = baseline::render(r, config.judge.baseline.as_ref());
        match write_file("the baseline", path, &text) {
            Ok(()) if config.terminal.quiet => {}
            Ok(()) => {
                let entries: std::collections::BTreeSet<&str> =
                    r.findings.iter().map(|f| f.fingerprint.as_str()).collect();
                eprintln!(
                    "hintcheck: wrote the baseline to {} ({} finding(s); --baseline {} accepts them)",
                    path.display(),
                    entries.len(),
                    path.display()
                );
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
