//! The JSON report, version 1. These DTOs are frozen: they are the machine-readable contract
//! and change only with `schema_version`, independently of the internal types they are built
//! from. Strings from the server are passed through as JSON strings (JSON escaping makes them
//! safe); nothing here decides anything.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::Report;
use crate::evidence::CallRecord;
use crate::finding::{Category, Evidence, Finding, HintVerdict, Suggestion};
use crate::observe::Observation;

/// The version of this format.
pub const SCHEMA_VERSION: u32 = 1;

/// The top-level object.
#[derive(Debug, Serialize)]
pub struct ReportV1<'a> {
    schema_version: u32,
    hintcheck_version: &'a str,
    started_unix_ms: u64,
    duration_ms: u64,
    exit_code: i32,
    exit_reason: &'a str,
    partial: Option<&'a str>,
    /// Harness limits the run ran into, each with what raises it (additive).
    #[serde(skip_serializing_if = "<[super::LimitHit]>::is_empty")]
    limits_hit: &'a [super::LimitHit],
    summary: SummaryV1,
    server: ServerV1<'a>,
    sandbox: SandboxV1<'a>,
    coverage: CoverageV1<'a>,
    settings: SettingsV1<'a>,
    seeded: &'a [String],
    tools: Vec<ToolV1<'a>>,
    out_of_window: Vec<PhaseV1<'a>>,
    /// The replays made to decide attribution (additive).
    #[serde(skip_serializing_if = "<[crate::evidence::ReplayRecord]>::is_empty")]
    replays: &'a [crate::evidence::ReplayRecord],
    /// The control requests made after the greeting (requests that run no tool; additive).
    controls: &'a [crate::evidence::ControlRequest],
    findings: Vec<FindingV1<'a>>,
    wire: WireV1<'a>,
    notes: &'a [String],
    /// Present when a baseline was given (added in 0.1: additive, schema_version stays 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    baseline: Option<BaselineV1<'a>>,
    /// Present with `--check` (additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    expectations: Option<&'a super::ExpectationOutcome>,
    /// The other files the run wrote, by format (additive; with `--json FILE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    outputs: Option<&'a serde_json::Map<String, Value>>,
}

#[derive(Debug, Serialize)]
struct BaselineV1<'a> {
    path: &'a str,
    accepted: usize,
    stale: &'a [crate::baseline::BaselineEntry],
    changed_definitions: Vec<ChangedDefinitionV1<'a>>,
}

#[derive(Debug, Serialize)]
struct ChangedDefinitionV1<'a> {
    tool: &'a str,
    accepted_sha256: &'a str,
    current_sha256: &'a str,
}

#[derive(Debug, Serialize)]
struct SummaryV1 {
    tools: usize,
    contradicted: usize,
    consistent: usize,
    unexercised: usize,
    not_applicable: usize,
    findings_by_severity: BTreeMap<&'static str, usize>,
}

#[derive(Debug, Serialize)]
struct ServerV1<'a> {
    command: &'a [String],
    era: Option<&'a str>,
    protocol_version: Option<&'a str>,
    server_info: Option<&'a Value>,
    instructions: Option<&'a str>,
    start_error: Option<&'a str>,
    restarts: usize,
    exits: Vec<ExitV1<'a>>,
    stderr: &'a str,
    stderr_bytes: u64,
    tools_sha256: Option<&'a str>,
    /// From the launch (sandbox set-up included) to the end of the first handshake (additive).
    startup_us: Option<u64>,
}

#[derive(Debug, Serialize)]
struct ExitV1<'a> {
    code: Option<i32>,
    signal: Option<i32>,
    how: &'a str,
    stragglers_killed: &'a [String],
}

#[derive(Debug, Serialize)]
struct SandboxV1<'a> {
    level: &'a str,
    requested: &'a str,
    summary: &'a str,
    enforced: &'a [String],
    not_enforced: &'a [String],
}

#[derive(Debug, Serialize)]
struct CoverageV1<'a> {
    files_observed: bool,
    network_observed: bool,
    observers: Vec<ObserverV1<'a>>,
    tools_listed: usize,
    tools_succeeded: usize,
    tools_failed: usize,
    tools_skipped: usize,
    tools_not_called: usize,
    calls: usize,
    inventory_incomplete: Option<&'a str>,
    background_threads: usize,
    values_learned: usize,
    unreached: Vec<UnreachedV1<'a>>,
}

#[derive(Debug, Serialize)]
struct UnreachedV1<'a> {
    tool: &'a str,
    outcome: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    said: Option<&'a str>,
    /// What the explorer believes was missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    missing: Option<&'a str>,
    /// Something this machine cannot give (counted apart from reach).
    unavailable_here: bool,
}

#[derive(Debug, Serialize)]
struct ObserverV1<'a> {
    name: &'a str,
    covers: &'a str,
    blind_spots: &'a [String],
}

#[derive(Debug, Serialize)]
struct SettingsV1<'a> {
    repeat: usize,
    seed: u64,
    settle_ms: u64,
    call_timeout_ms: u64,
    era: &'a str,
    roots: &'a str,
    /// `stdio` or `http` (additive).
    transport: &'a str,
    fail_on: &'static str,
    /// Categories whose findings do not fail the run (additive).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    fail_except: Vec<&'static str>,
}

#[derive(Debug, Serialize)]
struct ToolV1<'a> {
    name: &'a str,
    title: Option<&'a str>,
    description: Option<&'a str>,
    index: usize,
    definition_sha256: &'a str,
    declared: &'a BTreeMap<&'static str, String>,
    skipped: Option<&'a str>,
    arguments: &'a Value,
    arguments_overridden: &'a [String],
    synthesis_notes: &'a [String],
    calls: Vec<CallV1<'a>>,
    verdicts: Vec<VerdictV1<'a>>,
    suggestions: Vec<SuggestionV1<'a>>,
    /// The value the observations support for every hint (what `hintcheck suggest` prints).
    supported: &'a [crate::audit::suggest::SupportedHint],
}

#[derive(Debug, Serialize)]
struct CallV1<'a> {
    number: usize,
    /// Which candidate argument set (1..); repeats carry the one that worked.
    attempt: usize,
    /// The arguments sent (first calls only; repeats send the same).
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a Value>,
    outcome: &'a str,
    detail: Value,
    started_ms: u64,
    duration_ms: u64,
    settle_ms: u64,
    timing_us: &'a crate::evidence::CallTiming,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    concurrent_with: &'a [String],
    /// The call's own threads made every piece of its evidence (system calls name them).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pinned_on_own_threads: bool,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    confirmed_by_replay: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    confirmed_by: Option<&'a str>,
    /// Observations that are not plainly the tool's own change, with their category.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    categories: &'a std::collections::BTreeMap<String, Category>,
    /// Arguments taken from earlier responses, with where each came from.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pooled: &'a std::collections::BTreeMap<String, String>,
    /// The tool this call was made for, when another tool needed it first.
    #[serde(skip_serializing_if = "Option::is_none")]
    prerequisite_for: Option<&'a str>,
    wire_anomalies: usize,
    observations: Vec<ObservationV1<'a>>,
}

/// Observations keep their own serialization (kind, mechanism, paths): it is part of v1.
#[derive(Debug, Serialize)]
struct ObservationV1<'a> {
    description: String,
    #[serde(flatten)]
    record: &'a Observation,
}

#[derive(Debug, Serialize)]
struct VerdictV1<'a> {
    hint: &'static str,
    declared: &'a str,
    verdict: &'static str,
    reason: &'a str,
    audit: &'a str,
    uncertain: bool,
    evidence: Vec<EvidenceV1<'a>>,
}

#[derive(Debug, Serialize)]
struct EvidenceV1<'a> {
    source: &'a str,
    text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<&'static str>,
    /// The observer that saw it.
    #[serde(skip_serializing_if = "Option::is_none")]
    seen_by: Option<&'static str>,
    /// This piece alone makes its contradiction firm (additive).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    firm: bool,
}

#[derive(Debug, Serialize)]
struct SuggestionV1<'a> {
    hint: &'static str,
    value: bool,
    basis: &'static str,
    reason: &'a str,
}

#[derive(Debug, Serialize)]
struct FindingV1<'a> {
    audit: &'a str,
    tool: Option<&'a str>,
    hint: Option<&'static str>,
    severity: &'static str,
    confidence: &'static str,
    message: &'a str,
    evidence: Vec<EvidenceV1<'a>>,
    /// The category every piece of evidence shares, when they share one.
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<&'static str>,
    fingerprint: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    accepted: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct PhaseV1<'a> {
    phase: &'static str,
    after_tool: Option<&'a str>,
    description: String,
    observation: &'a Observation,
}

#[derive(Debug, Serialize)]
struct WireV1<'a> {
    lines_sent: u64,
    lines_received: u64,
    garbage_lines: u64,
    unknown_id_responses: u64,
    server_requests: Vec<ServerRequestV1<'a>>,
    notifications: &'a BTreeMap<String, usize>,
}

#[derive(Debug, Serialize)]
struct ServerRequestV1<'a> {
    method: &'a str,
    answer: &'a str,
}

fn evidence(e: &[Evidence]) -> Vec<EvidenceV1<'_>> {
    e.iter()
        .map(|e| EvidenceV1 {
            source: &e.source,
            text: &e.text,
            category: e.category.map(Category::as_str),
            seen_by: e.seen_by,
            firm: e.firm,
        })
        .collect()
}

fn call(c: &CallRecord) -> CallV1<'_> {
    let mut detail = serde_json::to_value(&c.outcome).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut detail {
        m.remove("kind");
    }
    CallV1 {
        number: c.number,
        attempt: c.attempt,
        arguments: (c.number <= 1).then_some(&c.arguments),
        outcome: c.outcome.label(),
        detail,
        started_ms: c.started_ms,
        duration_ms: c.duration_ms,
        settle_ms: c.settle_ms,
        timing_us: &c.timing,
        concurrent_with: &c.concurrent_with,
        pinned_on_own_threads: c.pinned_on_own_threads,
        confirmed_by_replay: &c.confirmed_by_replay,
        confirmed_by: c.confirmed_by.as_deref(),
        categories: &c.categories,
        pooled: &c.pooled,
        prerequisite_for: c.prerequisite_for.as_deref(),
        wire_anomalies: c.wire_anomalies,
        observations: c
            .observations
            .iter()
            .map(|o| ObservationV1 {
                description: o.describe(),
                record: o,
            })
            .collect(),
    }
}

fn verdict(v: &HintVerdict) -> VerdictV1<'_> {
    VerdictV1 {
        hint: v.hint.key(),
        declared: &v.declared,
        verdict: v.verdict.as_str(),
        reason: &v.reason,
        audit: v.audit,
        uncertain: v.uncertain,
        evidence: evidence(&v.evidence),
    }
}

fn suggestion(s: &Suggestion) -> SuggestionV1<'_> {
    SuggestionV1 {
        hint: s.hint.key(),
        value: s.value,
        basis: match s.basis {
            crate::finding::SuggestionBasis::Observed => "observed",
            crate::finding::SuggestionBasis::Consistent => "consistent",
        },
        reason: &s.reason,
    }
}

fn finding(f: &Finding) -> FindingV1<'_> {
    FindingV1 {
        audit: f.audit,
        tool: f.tool.as_deref(),
        hint: f.hint.map(|h| h.key()),
        severity: f.severity.as_str(),
        confidence: match f.confidence {
            crate::finding::Confidence::High => "high",
            crate::finding::Confidence::Medium => "medium",
            crate::finding::Confidence::Low => "low",
        },
        message: &f.message,
        evidence: evidence(&f.evidence),
        category: f.category.map(Category::as_str),
        fingerprint: &f.fingerprint,
        accepted: f.accepted.as_deref(),
    }
}

fn observer(o: &crate::report::ObserverSummary) -> ObserverV1<'_> {
    ObserverV1 {
        name: &o.name,
        covers: &o.covers,
        blind_spots: &o.blind_spots,
    }
}

/// Builds the v1 DTO of a report.
pub fn to_v1(r: &Report) -> ReportV1<'_> {
    ReportV1 {
        schema_version: SCHEMA_VERSION,
        hintcheck_version: &r.hintcheck_version,
        started_unix_ms: r.started_unix_ms,
        duration_ms: r.duration_ms,
        exit_code: r.exit_code,
        exit_reason: &r.exit_reason,
        partial: r.partial.as_deref(),
        limits_hit: &r.limits_hit,
        summary: summary_of(r),
        server: server_of(r),
        sandbox: SandboxV1 {
            level: &r.sandbox.level,
            requested: &r.sandbox.requested,
            summary: &r.sandbox.summary,
            enforced: &r.sandbox.enforced,
            not_enforced: &r.sandbox.not_enforced,
        },
        coverage: coverage_of(r),
        settings: SettingsV1 {
            repeat: r.settings.repeat,
            seed: r.settings.seed,
            settle_ms: r.settings.settle_ms,
            call_timeout_ms: r.settings.call_timeout_ms,
            era: &r.settings.era,
            roots: &r.settings.roots,
            transport: &r.settings.transport,
            fail_on: r.settings.fail.on.as_str(),
            fail_except: r.settings.fail.except.iter().map(|c| c.as_str()).collect(),
        },
        seeded: &r.seeded,
        tools: r.tools.iter().map(tool).collect(),
        replays: &r.replays,
        controls: &r.controls,
        out_of_window: r
            .phases
            .iter()
            .map(|p| PhaseV1 {
                phase: p.phase.name(),
                after_tool: p.after_tool.as_deref(),
                description: p.observation.describe(),
                observation: &p.observation,
            })
            .collect(),
        findings: r.findings.iter().map(finding).collect(),
        wire: wire_of(r),
        notes: &r.notes,
        expectations: r.expectations.as_ref(),
        outputs: None,
        baseline: r.baseline.as_ref().map(baseline),
    }
}

/// The v1 summary: verdicts by kind and findings by severity.
fn summary_of(r: &Report) -> SummaryV1 {
    let mut summary = SummaryV1 {
        tools: r.tools.len(),
        contradicted: 0,
        consistent: 0,
        unexercised: 0,
        not_applicable: 0,
        findings_by_severity: BTreeMap::new(),
    };
    for v in r.tools.iter().flat_map(|t| &t.verdicts) {
        match v.verdict {
            crate::finding::Verdict::Contradicted => summary.contradicted += 1,
            crate::finding::Verdict::Consistent => summary.consistent += 1,
            crate::finding::Verdict::Unexercised => summary.unexercised += 1,
            crate::finding::Verdict::NotApplicable => summary.not_applicable += 1,
        }
    }
    for f in &r.findings {
        *summary
            .findings_by_severity
            .entry(finding(f).severity)
            .or_default() += 1;
    }
    summary
}

/// The v1 server record.
fn server_of(r: &Report) -> ServerV1<'_> {
    let identity = r.server.identity.as_ref();
    ServerV1 {
        command: &r.server.command,
        era: identity.map(|i| match i.era {
            crate::mcp::client::Era::Modern(_) => "modern",
            crate::mcp::client::Era::Legacy(_) => "legacy",
        }),
        protocol_version: identity.map(|i| i.era.version()),
        server_info: identity.and_then(|i| i.server_info.as_ref()),
        instructions: identity.and_then(|i| i.instructions.as_deref()),
        start_error: r.server.start_error.as_deref(),
        restarts: r.server.restarts,
        exits: r
            .server
            .exits
            .iter()
            .map(|e| ExitV1 {
                code: e.code,
                signal: e.signal,
                how: &e.how,
                stragglers_killed: &e.stragglers_killed,
            })
            .collect(),
        stderr: &r.server.stderr,
        stderr_bytes: r.server.stderr_bytes,
        tools_sha256: r.server.tools_sha256.as_deref(),
        startup_us: r.server.startup_us,
    }
}

/// The v1 coverage record.
fn coverage_of(r: &Report) -> CoverageV1<'_> {
    CoverageV1 {
        files_observed: r.coverage.files_observed,
        network_observed: r.coverage.network_observed,
        observers: r.coverage.observers.iter().map(observer).collect(),
        tools_listed: r.coverage.tools_listed,
        tools_succeeded: r.coverage.tools_succeeded,
        tools_failed: r.coverage.tools_failed,
        tools_skipped: r.coverage.tools_skipped,
        tools_not_called: r.coverage.tools_not_called,
        calls: r.coverage.calls,
        inventory_incomplete: r.coverage.inventory_incomplete.as_deref(),
        background_threads: r.coverage.background_threads,
        values_learned: r.coverage.values_learned,
        unreached: r
            .coverage
            .unreached
            .iter()
            .map(|u| UnreachedV1 {
                tool: &u.tool,
                outcome: &u.outcome,
                said: u.said.as_deref(),
                missing: u.missing.as_deref(),
                unavailable_here: u.unavailable_here,
            })
            .collect(),
    }
}

/// The v1 record of one tool.
fn tool(t: &crate::report::ToolReport) -> ToolV1<'_> {
    ToolV1 {
        name: &t.name,
        title: t.title.as_deref(),
        description: t.description.as_deref(),
        index: t.index,
        definition_sha256: &t.definition_sha256,
        declared: &t.declared,
        skipped: t.skipped.as_deref(),
        arguments: &t.arguments,
        arguments_overridden: &t.overridden,
        synthesis_notes: &t.synthesis_notes,
        calls: t.calls.iter().map(call).collect(),
        verdicts: t.verdicts.iter().map(verdict).collect(),
        suggestions: t.suggestions.iter().map(suggestion).collect(),
        supported: &t.supported,
    }
}

/// The v1 wire record.
fn wire_of(r: &Report) -> WireV1<'_> {
    WireV1 {
        lines_sent: r.wire.stats.sent,
        lines_received: r.wire.stats.received,
        garbage_lines: r.wire.stats.garbage,
        unknown_id_responses: r.wire.stats.unknown_id,
        server_requests: r
            .wire
            .server_requests
            .iter()
            .take(200)
            .map(|s| ServerRequestV1 {
                method: &s.method,
                answer: &s.answer,
            })
            .collect(),
        notifications: &r.wire.notifications,
    }
}

/// The v1 baseline record.
fn baseline(b: &crate::report::BaselineOutcome) -> BaselineV1<'_> {
    BaselineV1 {
        path: &b.path,
        accepted: b.accepted,
        stale: &b.stale,
        changed_definitions: b
            .changed_definitions
            .iter()
            .map(|(tool, then, now)| ChangedDefinitionV1 {
                tool,
                accepted_sha256: then,
                current_sha256: now,
            })
            .collect(),
    }
}

/// Renders the report as pretty JSON.
pub fn render(r: &Report) -> String {
    render_with_outputs(r, &serde_json::Map::new())
}

/// Renders the report as pretty JSON with `outputs` (the other files the run wrote: `sarif`,
/// `junit`, `inventory`, …, by path) when there are any.
pub fn render_with_outputs(
    r: &Report,
    outputs: &serde_json::Map<String, serde_json::Value>,
) -> String {
    // Written straight from the report (no tree of the whole document first: a report of
    // 10,000 tools would hold it twice).
    let mut v1 = to_v1(r);
    v1.outputs = (!outputs.is_empty()).then_some(outputs);
    let mut s =
        serde_json::to_string_pretty(&v1).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
