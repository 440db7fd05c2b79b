//! The JSON report, version 1. These DTOs are frozen: they are the machine-readable contract
//! and change only with `schema_version`, independently of the internal types they are built
//! from. Strings from the server are passed through as JSON strings (JSON escaping makes them
//! safe); nothing here decides anything.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::Report;
use crate::evidence::{
    CallRecord, FileEffect, FileEffectKind, Mechanism, NetKind, ObjectKind, Observation, SecretMove,
};
use crate::finding::{Category, Evidence, Finding, HintVerdict, Suggestion};

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
    /// The run's settings (left out of a variant's report, whose `settings` are what the
    /// variant changed; the rest are the top level's).
    #[serde(skip_serializing_if = "Option::is_none")]
    settings: Option<SettingsV1<'a>>,
    seeded: &'a [String],
    /// The fake credentials planted, by kind and place (additive; empty with
    /// `--no-canaries`).
    canaries: &'a [super::PlantedCanary],
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
    /// Where the run's time went (additive).
    timing: &'a super::Timing,
    /// The other files the run wrote, by format (additive; with `--json FILE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    outputs: Option<&'a serde_json::Map<String, Value>>,
    /// The same server run in other configurations, each a report of this shape with its
    /// name and settings (additive).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    variants: Vec<VariantV1<'a>>,
}

/// A configuration run beside the default one: its name, what it changed, and its report
/// in the top level's shape (its `tools[]` are the top level's `tools[]`).
#[derive(Debug, Serialize)]
struct VariantV1<'a> {
    name: &'a str,
    settings: &'a [String],
    #[serde(flatten)]
    report: Box<ReportV1<'a>>,
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
    /// The data labels' verdicts by kind (hints' are above), when any was judged (additive).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    data_labels: BTreeMap<&'static str, usize>,
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
    /// The explorer's domain packs in force (additive).
    packs: &'a str,
    fail_on: &'static str,
    /// Categories whose findings do not fail the run (additive).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    fail_except: Vec<&'static str>,
    /// The config file read (additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    config_file: Option<&'a str>,
    /// Where the options set other than by default came from (additive).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    sources: Vec<SourceV1<'a>>,
}

/// Options that came from one place.
#[derive(Debug, Serialize)]
struct SourceV1<'a> {
    from: &'a str,
    options: &'a [String],
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
    /// A verdict per data label the tool declared or its results carried (additive).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    data_labels: Vec<LabelVerdictV1<'a>>,
    /// The data labels the observations support (additive).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    data_labels_supported: Vec<SupportedLabelV1<'a>>,
    /// What each value of an argument that selects the tool's behaviour did (additive).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    by_argument: Vec<ArgumentBehaviourV1<'a>>,
}

/// What the calls made with one value of a selecting argument did.
#[derive(Debug, Serialize)]
struct ArgumentBehaviourV1<'a> {
    argument: &'a str,
    value: &'a Value,
    /// `destructive`, `additive`, `network`, `read-only`, `no effect` or `not reached`.
    behaviour: &'static str,
    /// Its calls' other kinds of effect.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    effects: Vec<&'static str>,
    calls: &'a [String],
    evidence: Vec<EvidenceV1<'a>>,
    /// The tool's contradicted hints this value bore out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    contradicts: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
}

/// A data label's verdict: the label, where and what was declared, the verdict and why.
#[derive(Debug, Serialize)]
struct LabelVerdictV1<'a> {
    label: &'static str,
    declared_in: &'static str,
    declared: &'a str,
    verdict: &'static str,
    reason: &'a str,
    audit: &'static str,
    evidence: Vec<EvidenceV1<'a>>,
}

/// A data label the observations support.
#[derive(Debug, Serialize)]
struct SupportedLabelV1<'a> {
    label: &'static str,
    values: &'a [String],
    basis: &'static str,
    changed: bool,
    reason: &'a str,
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
    /// The riskier case this call tried, once the tool had succeeded (`action: delete`).
    #[serde(skip_serializing_if = "Option::is_none")]
    variant: Option<&'a str>,
    wire_anomalies: usize,
    /// The data labels its result carried on its `_meta` (additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    result_labels: Option<&'a crate::mcp::labels::ResultLabels>,
    /// Its result held what the network's stand-in site served (additive).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    returned_fetched: bool,
    /// What the server resolved the tool to for these arguments (additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    resolution: Option<ResolutionV1<'a>>,
    observations: Vec<ObservationV1<'a>>,
}

/// An observation as v1 writes it: a line for humans, then its record.
#[derive(Debug, Serialize)]
struct ObservationV1<'a> {
    description: String,
    #[serde(flatten)]
    record: RecordV1<'a>,
}

/// v1's record of one observation, written out field by field: the evidence records carry
/// no serialization of their own, so a change to them cannot move the report's schema.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum RecordV1<'a> {
    File(FileV1<'a>),
    Network(NetworkV1<'a>),
    Attempt(AttemptV1<'a>),
    Process(ProcessV1<'a>),
    Refused(RefusedV1<'a>),
    Secret(SecretV1<'a>),
}

/// A file effect: its kind's own fields (a rename's source, a ref's old and new commit, a
/// store's counts) follow `kind`, each present only for the kinds that have it.
#[derive(Debug, Default, Serialize)]
struct FileV1<'a> {
    path: &'a str,
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    over_existing: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    was_deleted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reference: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    added: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    changed: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    removed: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<bool>,
    object: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    size_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    size_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256_before: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256_after: Option<&'a str>,
    mechanism: &'static str,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    database: bool,
}

#[derive(Debug, Serialize)]
struct NetworkV1<'a> {
    kind: &'static str,
    destination: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    loopback: bool,
    mechanism: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct AttemptV1<'a> {
    syscall: &'a str,
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
    denied: bool,
    destructive: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    beyond_snapshot: bool,
    pid: u32,
    mechanism: &'static str,
}

#[derive(Debug, Serialize)]
struct ProcessV1<'a> {
    program: &'a str,
    argv: &'a [String],
    pid: u32,
    mechanism: &'static str,
}

#[derive(Debug, Serialize)]
struct RefusedV1<'a> {
    syscall: &'a str,
    what: &'a str,
    pid: u32,
    mechanism: &'static str,
}

/// A planted secret seen moving: its kind and place, never its value.
#[derive(Debug, Serialize)]
struct SecretV1<'a> {
    how: &'static str,
    kind: &'a str,
    place: &'a str,
    encoding: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    target: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    asked: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    swept: bool,
    mechanism: &'static str,
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
    /// `tools/resolve` for a hint the server resolved for `arguments` (additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a Value>,
}

/// What the server resolved a tool to for a call's arguments (`tools/resolve`).
#[derive(Debug, Serialize)]
struct ResolutionV1<'a> {
    annotations: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<&'a str>,
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
    /// For a hint resolved with `tools/resolve`: the arguments it was resolved for
    /// (additive).
    #[serde(skip_serializing_if = "Option::is_none")]
    resolved_for: Option<&'a Value>,
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
    observation: RecordV1<'a>,
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

fn observation(o: &Observation) -> ObservationV1<'_> {
    ObservationV1 {
        description: o.describe(),
        record: record(o),
    }
}

fn record(o: &Observation) -> RecordV1<'_> {
    match o {
        Observation::File(f) => RecordV1::File(file(f)),
        Observation::Network(n) => RecordV1::Network(NetworkV1 {
            kind: match n.kind {
                NetKind::Dns => "dns",
                NetKind::Connect => "connect",
                NetKind::Datagram => "datagram",
                NetKind::Packet => "packet",
            },
            destination: &n.destination,
            port: n.port,
            name: n.name.as_deref(),
            loopback: n.loopback,
            mechanism: mechanism(n.mechanism),
            payload: n.payload.as_deref(),
        }),
        Observation::Attempt(a) => RecordV1::Attempt(AttemptV1 {
            syscall: &a.syscall,
            path: &a.path,
            target: a.target.as_deref(),
            denied: a.denied,
            destructive: a.destructive,
            beyond_snapshot: a.beyond_snapshot,
            pid: a.pid,
            mechanism: mechanism(a.mechanism),
        }),
        Observation::Process(p) => RecordV1::Process(ProcessV1 {
            program: &p.program,
            argv: &p.argv,
            pid: p.pid,
            mechanism: mechanism(p.mechanism),
        }),
        Observation::Refused(r) => RecordV1::Refused(RefusedV1 {
            syscall: &r.syscall,
            what: &r.what,
            pid: r.pid,
            mechanism: mechanism(r.mechanism),
        }),
        Observation::Secret(s) => RecordV1::Secret(SecretV1 {
            how: match s.how {
                SecretMove::Returned => "returned",
                SecretMove::Argv => "argv",
                SecretMove::Env => "env",
                SecretMove::Read => "read",
                SecretMove::Sent => "sent",
                SecretMove::Written => "written",
            },
            kind: &s.kind,
            place: &s.place,
            encoding: &s.encoding,
            target: s.target.as_deref(),
            asked: s.asked,
            swept: s.swept,
            mechanism: mechanism(s.mechanism),
        }),
    }
}

fn file(f: &FileEffect) -> FileV1<'_> {
    let mut v1 = FileV1 {
        path: &f.path,
        object: match f.object {
            ObjectKind::File => "file",
            ObjectKind::Dir => "dir",
            ObjectKind::Symlink => "symlink",
            ObjectKind::Special => "special",
        },
        size_before: f.size_before,
        size_after: f.size_after,
        sha256_before: f.sha256_before.as_deref(),
        sha256_after: f.sha256_after.as_deref(),
        mechanism: mechanism(f.mechanism),
        database: f.database,
        ..FileV1::default()
    };
    v1.kind = match &f.kind {
        FileEffectKind::Created => "created",
        FileEffectKind::Appended => "appended",
        FileEffectKind::Overwritten => "overwritten",
        FileEffectKind::Extended => "extended",
        FileEffectKind::Truncated => "truncated",
        FileEffectKind::Deleted => "deleted",
        FileEffectKind::Replaced => "replaced",
        FileEffectKind::Retargeted => "retargeted",
        FileEffectKind::Rewritten => "rewritten",
        FileEffectKind::GitBookkeeping => "git-bookkeeping",
        FileEffectKind::Renamed {
            from,
            over_existing,
        } => {
            v1.from = Some(from);
            v1.over_existing = Some(*over_existing);
            "renamed"
        }
        FileEffectKind::ModeChanged { from, to } => {
            (v1.from, v1.to) = (Some(from.as_str()), Some(to.as_str()));
            "mode-changed"
        }
        FileEffectKind::RefAdvanced { from, to } => {
            (v1.from, v1.to) = (Some(from.as_str()), Some(to.as_str()));
            "ref-advanced"
        }
        FileEffectKind::RefRewound { from, to } => {
            (v1.from, v1.to) = (Some(from.as_str()), Some(to.as_str()));
            "ref-rewound"
        }
        FileEffectKind::WorkTreeKept {
            was_deleted,
            reference,
        } => {
            v1.was_deleted = Some(*was_deleted);
            v1.reference = Some(reference);
            "work-tree-kept"
        }
        FileEffectKind::StoreChanged {
            added,
            changed,
            removed,
            detail,
        } => {
            (v1.added, v1.changed, v1.removed) = (Some(*added), Some(*changed), Some(*removed));
            v1.detail = Some(detail);
            "store-changed"
        }
        FileEffectKind::Transient { created } => {
            v1.created = Some(*created);
            "transient"
        }
    };
    v1
}

fn mechanism(m: Mechanism) -> &'static str {
    match m {
        Mechanism::Snapshot => "snapshot",
        Mechanism::Attempt => "attempt",
        Mechanism::Packet => "packet",
        Mechanism::Dns => "dns",
        Mechanism::Payload => "payload",
        Mechanism::Notify => "notify",
        Mechanism::Result => "result",
    }
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
        variant: c.variant.as_deref(),
        wire_anomalies: c.wire_anomalies,
        result_labels: c.result_labels.as_ref(),
        returned_fetched: c.returned_fetched,
        resolution: c.resolution.as_ref().map(|r| ResolutionV1 {
            annotations: &r.annotations,
            failure: r.failure.as_deref(),
        }),
        observations: c.observations.iter().map(observation).collect(),
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
        source: v.source,
        arguments: v.resolved_for.as_ref(),
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
        resolved_for: f.resolved_for.as_ref(),
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
        timing: &r.timing,
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
        settings: Some(SettingsV1 {
            repeat: r.settings.repeat,
            seed: r.settings.seed,
            settle_ms: r.settings.settle_ms,
            call_timeout_ms: r.settings.call_timeout_ms,
            era: &r.settings.era,
            roots: &r.settings.roots,
            transport: &r.settings.transport,
            packs: &r.settings.packs,
            fail_on: r.settings.fail.on.as_str(),
            fail_except: r.settings.fail.except.iter().map(|c| c.as_str()).collect(),
            config_file: r.settings.config_file.as_deref(),
            sources: r
                .settings
                .sources
                .iter()
                .map(|(from, options)| SourceV1 { from, options })
                .collect(),
        }),
        seeded: &r.seeded,
        canaries: &r.canaries,
        variants: r
            .variants
            .iter()
            .map(|v| VariantV1 {
                name: &v.name,
                settings: &v.settings,
                report: Box::new(ReportV1 {
                    settings: None,
                    ..to_v1(&v.report)
                }),
            })
            .collect(),
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
                observation: record(&p.observation),
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
        data_labels: BTreeMap::new(),
    };
    for v in r.tools.iter().flat_map(|t| &t.labels) {
        *summary.data_labels.entry(v.verdict.as_str()).or_default() += 1;
    }
    for v in r.tools.iter().flat_map(|t| t.all_verdicts()) {
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
        verdicts: t.all_verdicts().map(verdict).collect(),
        suggestions: t.suggestions.iter().map(suggestion).collect(),
        supported: &t.supported,
        data_labels: t
            .labels
            .iter()
            .map(|v| LabelVerdictV1 {
                label: v.label,
                declared_in: v.declared_in,
                declared: &v.declared,
                verdict: v.verdict.as_str(),
                reason: &v.reason,
                audit: crate::audit::data_labels::META.id,
                evidence: evidence(&v.evidence),
            })
            .collect(),
        data_labels_supported: t
            .labels_supported
            .iter()
            .map(|s| SupportedLabelV1 {
                label: s.label,
                values: &s.values,
                basis: s.basis.as_str(),
                changed: s.changed,
                reason: &s.reason,
            })
            .collect(),
        by_argument: t
            .by_argument
            .iter()
            .map(|e| ArgumentBehaviourV1 {
                argument: &e.argument,
                value: &e.value,
                behaviour: e.behaviour.as_str(),
                effects: e.effects.iter().map(|b| b.as_str()).collect(),
                calls: &e.calls,
                evidence: evidence(&e.evidence),
                contradicts: e.contradicts.iter().map(|h| h.key()).collect(),
                note: e.note.as_deref(),
            })
            .collect(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{
        FileEffect, FileEffectKind, Mechanism, NetEvent, NetKind, ObjectKind, ProcessEvent,
        RefusedCall, WriteAttempt,
    };

    /// One observation of every type and every file-effect kind, every optional field set
    /// somewhere and left out somewhere.
    fn every_observation() -> Vec<Observation> {
        let file =
            |kind, object| FileEffect::bare("$WORKSPACE/a.txt", kind, object, Mechanism::Snapshot);
        let mut sized = file(FileEffectKind::Overwritten, ObjectKind::File);
        sized.size_before = Some(12);
        sized.size_after = Some(3);
        sized.sha256_before = Some("ab".repeat(32));
        sized.sha256_after = Some("cd".repeat(32));
        let mut db = file(
            FileEffectKind::StoreChanged {
                added: 1,
                changed: 2,
                removed: 3,
                detail: "table notes: 1 row added".into(),
            },
            ObjectKind::File,
        );
        db.database = true;
        db.mechanism = Mechanism::Notify;
        let kinds = [
            (FileEffectKind::Created, ObjectKind::Dir),
            (FileEffectKind::Appended, ObjectKind::File),
            (FileEffectKind::Extended, ObjectKind::File),
            (FileEffectKind::Truncated, ObjectKind::File),
            (FileEffectKind::Deleted, ObjectKind::Symlink),
            (
                FileEffectKind::Renamed {
                    from: "$WORKSPACE/b.txt".into(),
                    over_existing: true,
                },
                ObjectKind::File,
            ),
            (
                FileEffectKind::ModeChanged {
                    from: "644".into(),
                    to: "755".into(),
                },
                ObjectKind::Special,
            ),
            (FileEffectKind::Replaced, ObjectKind::File),
            (FileEffectKind::Retargeted, ObjectKind::Symlink),
            (FileEffectKind::Rewritten, ObjectKind::File),
            (
                FileEffectKind::RefAdvanced {
                    from: "1a".into(),
                    to: "2b".into(),
                },
                ObjectKind::File,
            ),
            (
                FileEffectKind::RefRewound {
                    from: "2b".into(),
                    to: "1a".into(),
                },
                ObjectKind::File,
            ),
            (FileEffectKind::GitBookkeeping, ObjectKind::File),
            (
                FileEffectKind::WorkTreeKept {
                    was_deleted: true,
                    reference: "HEAD".into(),
                },
                ObjectKind::File,
            ),
            (
                FileEffectKind::Transient { created: false },
                ObjectKind::File,
            ),
        ];
        let mut all: Vec<Observation> = kinds
            .into_iter()
            .map(|(k, o)| Observation::File(file(k, o)))
            .collect();
        all.push(Observation::File(sized));
        all.push(Observation::File(db));
        for (kind, mechanism, port, name, payload) in [
            (
                NetKind::Dns,
                Mechanism::Dns,
                None,
                Some("api.example.test"),
                None,
            ),
            (
                NetKind::Connect,
                Mechanism::Payload,
                Some(443),
                Some("api.example.test"),
                Some("POST /v1/track"),
            ),
            (NetKind::Datagram, Mechanism::Attempt, Some(53), None, None),
            (NetKind::Packet, Mechanism::Packet, Some(80), None, None),
        ] {
            all.push(Observation::Network(NetEvent {
                kind,
                destination: "192.0.2.1".into(),
                port,
                name: name.map(Into::into),
                loopback: port == Some(80),
                mechanism,
                payload: payload.map(Into::into),
                carried: Default::default(),
            }));
        }
        for (target, beyond_snapshot) in [(Some("$WORKSPACE/c.txt"), true), (None, false)] {
            all.push(Observation::Attempt(WriteAttempt {
                syscall: "renameat2".into(),
                path: "/etc/passwd".into(),
                target: target.map(Into::into),
                denied: true,
                destructive: beyond_snapshot,
                beyond_snapshot,
                pid: 41,
                mechanism: Mechanism::Attempt,
            }));
        }
        all.push(Observation::Process(ProcessEvent {
            program: "/usr/bin/git".into(),
            argv: vec!["git".into(), "status".into()],
            pid: 42,
            mechanism: Mechanism::Attempt,
            env: Default::default(),
        }));
        all.push(Observation::Refused(RefusedCall {
            syscall: "socket".into(),
            what: "socket(AF_VSOCK)".into(),
            pid: 43,
            mechanism: Mechanism::Attempt,
        }));
        all
    }

    /// The v1 lines of [`every_observation`], as the report has written them since v1.
    const V1_LINES: &str = r#"{"description":"created directory $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"created","object":"dir","mechanism":"snapshot"}
{"description":"appended to $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"appended","object":"file","mechanism":"snapshot"}
{"description":"extended (only additions) $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"extended","object":"file","mechanism":"snapshot"}
{"description":"truncated $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"truncated","object":"file","mechanism":"snapshot"}
{"description":"deleted $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"deleted","object":"symlink","mechanism":"snapshot"}
{"description":"$WORKSPACE/b.txt renamed over $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"renamed","from":"$WORKSPACE/b.txt","over_existing":true,"object":"file","mechanism":"snapshot"}
{"description":"changed mode of $WORKSPACE/a.txt (644 → 755)","type":"file","path":"$WORKSPACE/a.txt","kind":"mode-changed","from":"644","to":"755","object":"special","mechanism":"snapshot"}
{"description":"replaced $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"replaced","object":"file","mechanism":"snapshot"}
{"description":"retargeted symlink $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"retargeted","object":"symlink","mechanism":"snapshot"}
{"description":"rewrote (same content) $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"rewritten","object":"file","mechanism":"snapshot"}
{"description":"moved forward git ref $WORKSPACE/a.txt (1a → 2b)","type":"file","path":"$WORKSPACE/a.txt","kind":"ref-advanced","from":"1a","to":"2b","object":"file","mechanism":"snapshot"}
{"description":"moved git ref to a commit that does not descend from the old one: $WORKSPACE/a.txt (2b → 1a)","type":"file","path":"$WORKSPACE/a.txt","kind":"ref-rewound","from":"2b","to":"1a","object":"file","mechanism":"snapshot"}
{"description":"updated git's own bookkeeping file $WORKSPACE/a.txt","type":"file","path":"$WORKSPACE/a.txt","kind":"git-bookkeeping","object":"file","mechanism":"snapshot"}
{"description":"removed $WORKSPACE/a.txt, whose old content the repository keeps (HEAD holds it)","type":"file","path":"$WORKSPACE/a.txt","kind":"work-tree-kept","was_deleted":true,"reference":"HEAD","object":"file","mechanism":"snapshot"}
{"description":"wrote to $WORKSPACE/a.txt without a lasting change","type":"file","path":"$WORKSPACE/a.txt","kind":"transient","created":false,"object":"file","mechanism":"snapshot"}
{"description":"overwrote $WORKSPACE/a.txt (12 → 3 bytes)","type":"file","path":"$WORKSPACE/a.txt","kind":"overwritten","object":"file","size_before":12,"size_after":3,"sha256_before":"abababababababababababababababababababababababababababababababab","sha256_after":"cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd","mechanism":"snapshot"}
{"description":"changed $WORKSPACE/a.txt (1 added, 2 changed, 3 removed: table notes: 1 row added)","type":"file","path":"$WORKSPACE/a.txt","kind":"store-changed","added":1,"changed":2,"removed":3,"detail":"table notes: 1 row added","object":"file","mechanism":"notify","database":true}
{"description":"looked up 192.0.2.1","type":"network","kind":"dns","destination":"192.0.2.1","name":"api.example.test","loopback":false,"mechanism":"dns"}
{"description":"connected to 192.0.2.1:443 (api.example.test): POST /v1/track","type":"network","kind":"connect","destination":"192.0.2.1","port":443,"name":"api.example.test","loopback":false,"mechanism":"payload","payload":"POST /v1/track"}
{"description":"sent or aimed UDP at 192.0.2.1:53","type":"network","kind":"datagram","destination":"192.0.2.1","port":53,"loopback":false,"mechanism":"attempt"}
{"description":"sent an IP packet to 192.0.2.1","type":"network","kind":"packet","destination":"192.0.2.1","port":80,"loopback":true,"mechanism":"packet"}
{"description":"tried renameat2 /etc/passwd -> $WORKSPACE/c.txt, denied by the sandbox","type":"attempt","syscall":"renameat2","path":"/etc/passwd","target":"$WORKSPACE/c.txt","denied":true,"destructive":true,"beyond_snapshot":true,"pid":41,"mechanism":"attempt"}
{"description":"tried renameat2 /etc/passwd, denied by the sandbox","type":"attempt","syscall":"renameat2","path":"/etc/passwd","denied":true,"destructive":false,"pid":41,"mechanism":"attempt"}
{"description":"started git status","type":"process","program":"/usr/bin/git","argv":["git","status"],"pid":42,"mechanism":"attempt"}
{"description":"tried socket(AF_VSOCK), refused by the sandbox","type":"refused","syscall":"socket","what":"socket(AF_VSOCK)","pid":43,"mechanism":"attempt"}
"#;

    #[test]
    fn observations_keep_their_v1_shape() {
        let written: Vec<String> = every_observation()
            .iter()
            .map(|o| serde_json::to_string(&observation(o)).expect("serialises"))
            .collect();
        for (got, want) in written.iter().zip(V1_LINES.lines()) {
            assert_eq!(got, want);
        }
        assert_eq!(written.len(), V1_LINES.lines().count());
        // A phase's observation is the record alone.
        let phase = serde_json::to_value(record(&every_observation()[0])).expect("serialises");
        assert_eq!(phase["type"], "file");
        assert!(phase.get("description").is_none());
    }
}
