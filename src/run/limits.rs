//! Which harness limit cut a run short, and what raises it. A limit that was hit (a line
//! longer than the line cap, a listing slower than the handshake timeout, an HTTP head or body
//! over the message cap, the tool or page cap, call and run timeouts, the memory and disk
//! limits) is found in the finished report's own records (its protocol findings, start error,
//! inventory and calls) and named in the report (`limits_hit`) and in the exit reason of a
//! run that verified nothing or did not complete, with the flag that raises it.

use crate::config::RunConfig;
use crate::mcp::client::CallOutcome;
use crate::report::{LimitHit, Report};
use crate::text::format_duration;

/// The limits `report` ran into.
pub(super) fn hit(report: &Report, config: &RunConfig) -> Vec<LimitHit> {
    let mut texts: Vec<String> = Vec::new();
    for f in &report.findings {
        texts.push(f.message.clone());
        texts.extend(f.evidence.iter().map(|e| e.text.clone()));
    }
    texts.extend(report.server.start_error.clone());
    texts.extend(report.coverage.inventory_incomplete.clone());
    texts.extend(report.notes.iter().cloned());
    let any = |needles: &[&str]| {
        texts
            .iter()
            .find(|t| needles.iter().any(|n| t.contains(n)))
            .cloned()
    };
    let mut out = Vec::new();
    let cap = config.server.max_line_bytes;
    if let Some(seen) = any(&["longer than the line cap", "-byte cap; dropped"]) {
        out.push(LimitHit {
            limit: format!("the line cap ({cap} bytes)"),
            seen,
            raise_with: Some("--max-line-bytes or [run] max_line_bytes".into()),
        });
    }
    if let Some(seen) = any(&[
        "message head is too large",
        "a response body longer than",
        "an event longer than",
        "an event-stream line longer than",
    ]) {
        out.push(LimitHit {
            limit: format!("the HTTP message cap ({cap} bytes)"),
            seen,
            raise_with: Some("--max-line-bytes or [run] max_line_bytes".into()),
        });
    }
    if let Some(seen) = any(&[
        "no response to initialize within",
        "no response to tools/list within",
        "no response to server/discover within",
        "within the handshake timeout",
    ]) {
        out.push(LimitHit {
            limit: format!(
                "the handshake timeout ({})",
                format_duration(config.waits.handshake_timeout)
            ),
            seen,
            raise_with: Some("--handshake-timeout or [run] handshake_timeout".into()),
        });
    }
    if let Some(seen) = any(&["tools; the rest were not read"]) {
        out.push(LimitHit {
            limit: "the tool cap".into(),
            seen,
            raise_with: None,
        });
    }
    if let Some(seen) = any(&["(page cap)"]) {
        out.push(LimitHit {
            limit: "the page cap of tools/list".into(),
            seen,
            raise_with: None,
        });
    }
    let timed_out: Vec<&str> = report
        .tools
        .iter()
        .filter(|t| {
            t.calls
                .iter()
                .any(|c| matches!(c.outcome, CallOutcome::Timeout { .. }))
        })
        .map(|t| t.name.as_str())
        .collect();
    if !timed_out.is_empty() {
        out.push(LimitHit {
            limit: format!(
                "the call timeout ({})",
                format_duration(config.waits.call_timeout)
            ),
            seen: format!(
                "calls of {} tool(s) got no answer in time ({})",
                timed_out.len(),
                crate::mcp::tool::shorten(&timed_out.join(", "), 120)
            ),
            raise_with: Some("--call-timeout or [run] call_timeout".into()),
        });
    }
    if let Some(why) = report.partial.as_deref().filter(|p| p.contains("timeout")) {
        out.push(LimitHit {
            limit: format!(
                "the run timeout ({})",
                format_duration(config.waits.run_timeout)
            ),
            seen: why.to_string(),
            raise_with: Some("--timeout or [run] timeout".into()),
        });
    }
    for f in report
        .findings
        .iter()
        .filter(|f| f.audit == "resource-limit")
    {
        let (limit, flag) = if f.message.contains("memory") {
            ("the memory limit", "--memory-limit")
        } else {
            ("the disk limit", "--disk-limit")
        };
        out.push(LimitHit {
            limit: limit.into(),
            seen: f.message.clone(),
            raise_with: Some(flag.into()),
        });
    }
    for h in &mut out {
        h.seen = crate::mcp::tool::shorten(&h.seen, 200);
    }
    out
}

/// The limits in the words an exit reason ends with (empty when none was hit).
pub(super) fn in_words(hits: &[LimitHit]) -> String {
    if hits.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = hits.iter().map(LimitHit::short).collect();
    format!("; harness limit hit: {}", parts.join("; "))
}
