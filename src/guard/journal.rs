//! What guard refused (and what it allowed only in the server's own state during a
//! restricted window): one JSON line per operation in `--log FILE`, a one-line notice on
//! stderr per refusal, and `hintcheck guard --summary LOG`, the refusals per tool.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use super::policy::{Now, Rule, Window};

/// Most notices on stderr; past it, refusals go to the log only (and one line says so).
const NOTICE_CAP: u64 = 200;

/// Most entries logged in one run: a server that tries without end cannot fill the disk.
pub const LOG_CAP: u64 = 100_000;

/// One operation guard refused or allowed only in the server's own state.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// When (UTC, milliseconds).
    pub time: String,
    /// `refused`, or `allowed` (a write in the server's own state during a restricted window).
    pub decision: String,
    /// The tool whose window it was (several calls in flight: the first; see `calls`), or
    /// the tool that armed the work, when known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tool: Option<String>,
    /// The hint under its protocol name (`readOnlyHint`); none outside calls.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub hint: Option<String>,
    /// The id of the call (JSON text), when one was in flight.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub call_id: Option<String>,
    /// The HTTP session whose server it was (`--transport http`; `stateless` for the server
    /// shared by requests without a session).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub session: Option<String>,
    /// Every call in flight, when more than one was.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub calls: Vec<String>,
    /// `call` (in a call's window) or `outside-calls` (start-up, background work, after an
    /// answer).
    pub window: String,
    /// What was tried: `write`, `delete`, `truncate`, `rename`, `create`, `chmod`,
    /// `shared-write-mapping`, `connect`, `datagram`, `dns`.
    pub operation: String,
    /// The system call.
    pub syscall: String,
    /// The path, for files.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path: Option<String>,
    /// The second path of a rename or link.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target: Option<String>,
    /// The destination (`address:port`), for the network.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub destination: Option<String>,
    /// The process: its pid (outside the sandbox) and command line; none where the
    /// operation was seen only at the forwarder (a connection, a DNS query).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub process: Option<Process>,
    /// Why, in a sentence.
    pub reason: String,
}

/// The process that made the call.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Process {
    /// Its pid, as the host sees it.
    pub pid: u32,
    /// Its thread.
    pub tid: u32,
    /// Its command line (cut at 200 characters).
    pub command: String,
}

impl Process {
    /// Thread `tid` of process `pid`, with the command line read from /proc.
    pub fn of(pid: u32, tid: u32) -> Process {
        let command = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                let words: Vec<String> = b
                    .split(|c| *c == 0)
                    .filter(|w| !w.is_empty())
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect();
                words.join(" ")
            })
            .unwrap_or_default();
        Process {
            pid,
            tid,
            command: command.chars().take(200).collect(),
        }
    }
}

/// What was tried, for an entry.
#[derive(Debug, Clone, Default)]
pub struct Tried<'a> {
    /// `write`, `delete`, `connect`, `dns`, …
    pub operation: &'a str,
    /// The path, for files.
    pub path: Option<&'a str>,
    /// The second path of a rename or link.
    pub target: Option<&'a str>,
    /// The destination (an address and port, a name).
    pub destination: Option<String>,
}

impl Entry {
    /// The refusal of `tried` under `rule` (none: outside the directories the server may
    /// write) in the window `now`; `armed_by` names the tool whose call left the work behind,
    /// outside calls.
    pub fn refusal(
        now: &Now,
        rule: Option<Rule>,
        tried: &Tried<'_>,
        syscall: &str,
        process: Option<Process>,
        armed_by: Option<String>,
    ) -> Entry {
        let first = now.calls.first();
        let reason = match (rule, first) {
            (Some(r), Some(c)) if c.hints.learned_for(r) => format!(
                "tool {} is held to {} by --policy (its verification supports it; the tool declares nothing)",
                c.tool,
                r.declared()
            ),
            (Some(r), Some(c)) => format!("tool {} declares {}", c.tool, r.declared()),
            (Some(r), None) => r.outside().to_string(),
            (None, _) => "outside the directories the server may write".to_string(),
        };
        Entry {
            time: crate::text::iso_utc_ms(crate::text::unix_ms_now()),
            decision: "refused".into(),
            tool: first.map(|c| c.tool.clone()).or(armed_by),
            hint: rule
                .filter(|_| first.is_some())
                .map(|r| r.hint().to_string()),
            call_id: first.map(|c| c.id.clone()),
            session: None,
            calls: if now.calls.len() > 1 {
                now.calls
                    .iter()
                    .map(|c| format!("{} {}", c.id, c.tool))
                    .collect()
            } else {
                Vec::new()
            },
            window: if first.is_some() {
                "call"
            } else {
                "outside-calls"
            }
            .into(),
            operation: tried.operation.into(),
            syscall: syscall.into(),
            path: tried.path.map(String::from),
            target: tried.target.map(String::from),
            destination: tried.destination.clone(),
            process,
            reason,
        }
    }
}

/// Where refusals go: the journal, and the windows of the calls in flight (for
/// `--on-violation error`).
#[derive(Debug, Clone)]
pub struct Refusals {
    window: Arc<Mutex<Window>>,
    journal: Arc<Journal>,
    session: Option<String>,
}

impl Refusals {
    /// Refusals recorded in `journal` and noted in `window`; `session` names the HTTP session
    /// of the server in every entry.
    pub fn new(
        window: Arc<Mutex<Window>>,
        journal: Arc<Journal>,
        session: Option<String>,
    ) -> Refusals {
        Refusals {
            window,
            journal,
            session,
        }
    }

    /// The shared window, locked.
    pub fn window(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records refusal `entry`, made in window `now`.
    pub fn record(&self, now: &Now, entry: Entry) {
        let entry = self.stamped(entry);
        if !now.calls.is_empty() {
            self.window().note_refusal(&notice(&entry));
        }
        self.journal.record(&entry);
    }

    /// Logs `entry`, an operation allowed (no notice, nothing noted in the window).
    pub fn record_allowed(&self, entry: Entry) {
        self.journal.record(&self.stamped(entry));
    }

    fn stamped(&self, mut entry: Entry) -> Entry {
        entry.session.clone_from(&self.session);
        entry
    }
}

/// Where entries go.
#[derive(Debug)]
pub struct Journal {
    log: Option<Mutex<std::fs::File>>,
    notices: std::sync::atomic::AtomicU64,
    logged: std::sync::atomic::AtomicU64,
}

impl Journal {
    /// A journal writing to `log` (appended to) when given.
    pub fn open(log: Option<&std::path::Path>) -> std::io::Result<Journal> {
        let log = match log {
            Some(p) => Some(Mutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(p)?,
            )),
            None => None,
        };
        Ok(Journal {
            log,
            notices: Default::default(),
            logged: Default::default(),
        })
    }

    /// Records `entry`: a line in the log (at most [`LOG_CAP`] per run; one line says when
    /// the rest are left out), and for a refusal a notice on stderr.
    pub fn record(&self, entry: &Entry) {
        if let Some(log) = &self.log {
            let n = self
                .logged
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let line = match n.cmp(&LOG_CAP) {
                std::cmp::Ordering::Less => serde_json::to_vec(entry).ok(),
                std::cmp::Ordering::Equal => Some(
                    format!(
                        "{{\"time\":\"{}\",\"decision\":\"log-full\",\"reason\":\"{LOG_CAP} entries in this run: the rest are not logged\"}}",
                        entry.time
                    )
                    .into_bytes(),
                ),
                std::cmp::Ordering::Greater => None,
            };
            if let Some(mut line) = line {
                line.push(b'\n');
                let mut f = log.lock().unwrap_or_else(|p| p.into_inner());
                let _ = f.write_all(&line);
            }
        }
        if entry.decision != "refused" {
            return;
        }
        let n = self
            .notices
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n < NOTICE_CAP {
            eprintln!(
                "{}",
                crate::text::escape::keeping_lines(&format!("hintcheck guard: {}", notice(entry)))
            );
        } else if n == NOTICE_CAP {
            eprintln!(
                "hintcheck guard: {NOTICE_CAP} refusals so far; the rest are only in the log"
            );
        }
    }
}

/// The one-line notice of a refusal.
pub fn notice(e: &Entry) -> String {
    let what = e.path.as_deref().or(e.destination.as_deref()).unwrap_or("");
    let who = match (&e.tool, e.window.as_str()) {
        (Some(t), "call") => format!("tool {t}"),
        (Some(t), _) => format!("work left by tool {t} (outside its call)"),
        (None, _) => "the server outside any call".to_string(),
    };
    format!("refused {} {what} by {who}: {}", e.operation, e.reason)
}

/// How many refusals of one hint and operation, and up to three of their paths.
type Tally = (u64, Vec<String>);

/// The summary of a log: per tool, the refusals per hint and operation.
pub fn summary(text: &str) -> String {
    let mut per_tool: BTreeMap<String, BTreeMap<(String, String), Tally>> = BTreeMap::new();
    let mut allowed = 0u64;
    let mut unreadable = 0u64;
    let mut full = false;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(e) = serde_json::from_str::<Entry>(line) else {
            if line.contains("\"decision\":\"log-full\"") {
                full = true;
            } else {
                unreadable += 1;
            }
            continue;
        };
        if e.decision != "refused" {
            allowed += 1;
            continue;
        }
        let tool = match (&e.tool, e.window.as_str()) {
            (Some(t), "call") => t.clone(),
            (Some(t), _) => format!("{t} (after its call)"),
            (None, _) => "(outside calls)".into(),
        };
        let hint = e.hint.clone().unwrap_or_else(|| "-".into());
        let slot = per_tool
            .entry(tool)
            .or_default()
            .entry((hint, e.operation.clone()))
            .or_default();
        slot.0 += 1;
        let what = e.path.or(e.destination).unwrap_or_default();
        if slot.1.len() < 3 && !slot.1.contains(&what) {
            slot.1.push(what);
        }
    }
    let mut out = String::new();
    if per_tool.is_empty() {
        out.push_str("no refusals\n");
    }
    for (tool, rows) in &per_tool {
        let total: u64 = rows.values().map(|r| r.0).sum();
        out.push_str(&format!("{tool}: {total} refused\n"));
        for ((hint, op), (n, examples)) in rows {
            out.push_str(&format!(
                "  {hint:<16} {op:<22} {n:>5}  {}\n",
                examples.join(", ")
            ));
        }
    }
    if allowed > 0 {
        out.push_str(&format!(
            "{allowed} writes allowed in the server's own state during restricted windows\n"
        ));
    }
    if unreadable > 0 {
        out.push_str(&format!(
            "{unreadable} lines of the log could not be read\n"
        ));
    }
    if full {
        out.push_str(&format!(
            "the log reached {LOG_CAP} entries in a run: what followed was not logged\n"
        ));
    }
    crate::text::escape::keeping_lines(&out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(tool: Option<&str>, window: &str, op: &str, decision: &str) -> Entry {
        Entry {
            time: "2026-12-05T10:00:00.000Z".into(),
            decision: decision.into(),
            tool: tool.map(Into::into),
            hint: tool.map(|_| "readOnlyHint".into()),
            call_id: None,
            session: None,
            calls: vec![],
            window: window.into(),
            operation: op.into(),
            syscall: "openat".into(),
            path: Some("/srv/data/x".into()),
            target: None,
            destination: None,
            process: Some(Process {
                pid: 1,
                tid: 1,
                command: "python3 server.py".into(),
            }),
            reason: "declared readOnlyHint: true".into(),
        }
    }

    #[test]
    fn the_summary_counts_per_tool_hint_and_operation() {
        let lines: Vec<String> = [
            entry(Some("read_notes"), "call", "write", "refused"),
            entry(Some("read_notes"), "call", "write", "refused"),
            entry(Some("read_notes"), "outside-calls", "write", "refused"),
            entry(None, "outside-calls", "delete", "refused"),
            entry(Some("read_notes"), "call", "write", "allowed"),
        ]
        .iter()
        .map(|e| serde_json::to_string(e).expect("json"))
        .chain([
            "garbage".to_string(),
            r#"{"time":"x","decision":"log-full","reason":"full"}"#.to_string(),
        ])
        .collect();
        let s = summary(&lines.join("\n"));
        assert!(s.contains("read_notes: 2 refused"), "{s}");
        assert!(s.contains("read_notes (after its call): 1 refused"), "{s}");
        assert!(s.contains("(outside calls): 1 refused"), "{s}");
        assert!(s.contains("1 writes allowed"), "{s}");
        assert!(s.contains("1 lines of the log could not be read"), "{s}");
        assert!(s.contains("was not logged"), "{s}");
        assert_eq!(summary(""), "no refusals\n");
    }

    #[test]
    fn a_notice_names_the_tool_or_the_work_it_left() {
        let e = entry(Some("read_notes"), "outside-calls", "write", "refused");
        assert!(notice(&e).contains("work left by tool read_notes"));
    }
}
