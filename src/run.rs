//! The orchestrator: drives launch → handshake → inventory → exercise → observe → judge and
//! builds the [`Report`]. It owns the timeouts, the restarts after a crash or a hung call, and
//! the interruption path. A misbehaving server never makes this fail: whatever happens ends up
//! in the report, with the exit code it deserves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::sync::watch;

use crate::audit;
use crate::config::{RootsOffer, RunConfig};
use crate::evidence::{CallRecord, CallTiming, Coverage, Phase, PhaseObservation, ToolRun};
use crate::exercise::plan::{allowed_dirs_in, plan, steered_candidate};
use crate::exercise::semantics::WorkspaceFacts;
use crate::finding::{Finding, Severity};
use crate::mcp::client::{CallOutcome, ClientOptions, EraChoice, McpClient, ProtocolNote};
use crate::mcp::tool::{HintName, shorten};
use crate::observe::activity::{ProcessTree, ran_between, settle};
use crate::observe::attempts::AttemptObserver;
use crate::observe::fs::{
    FsSnapshotObserver, OverlayRoot, SandboxDir, SnapshotLimits, SnapshotRoot,
};
use crate::observe::inotify::InotifyObserver;
use crate::observe::{Observation, Recorder, ServerStart};
use crate::progress::{ProgressEvent, ProgressHook};
use crate::report::{
    CoverageSummary, Report, ServerSummary, Settings, ToolReport, WireSummary, exit_code,
};
use crate::rpc::session::{Session, SessionOptions};
use crate::rpc::transcript::Entry;
use crate::sandbox::cgroup::RunCgroup;
use crate::sandbox::control::StepFailure;
use crate::sandbox::policy::{Limits, named_tmp_entries};
use crate::sandbox::process::{ExitSummary, LaunchSpec, ServerProcess, resolve_program};
use crate::sandbox::scratch::Scratch;
use crate::sandbox::watchdog::{LimitFlag, WatchLimits, Watchdog};
use crate::sandbox::{Enforcement, LaunchError, SandboxConfig, SandboxLevel, SandboxStatus};

/// The resolver the sandbox's resolv.conf names: a documentation address, unreachable from
/// the empty network namespace, so a lookup fails fast and its attempt is seen as DNS.
const SANDBOX_RESOLVER: &str = "192.0.2.53";

/// How long a server gets to exit by itself after its stdin is closed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A started and greeted server.
struct Live {
    process: ServerProcess,
    client: McpClient,
    /// The run's cgroup (root mode); dropping it kills what is left and removes it.
    cgroup: Option<RunCgroup>,
    /// The resource watchdog of this server; dropping it stops it.
    _watchdog: Option<Watchdog>,
}

/// What is collected from every server instance of a run.
#[derive(Default)]
struct Collected {
    exits: Vec<ExitSummary>,
    notes: Vec<ProtocolNote>,
    anomalies: Vec<Entry>,
    stats: crate::rpc::transcript::TranscriptStats,
    server_requests: Vec<crate::rpc::session::ServerRequestRecord>,
    notifications: BTreeMap<String, usize>,
    stderr: String,
    stderr_bytes: u64,
    transcripts: Vec<Vec<Entry>>,
}

impl Collected {
    fn absorb(&mut self, session: &Session, notes: Vec<ProtocolNote>, keep_transcript: bool) {
        let rec = session.record();
        self.notes.extend(notes);
        self.anomalies.extend(rec.anomalies);
        self.stats.sent += rec.stats.sent;
        self.stats.received += rec.stats.received;
        self.stats.garbage += rec.stats.garbage;
        self.stats.unknown_id += rec.stats.unknown_id;
        self.stats.dropped_entries += rec.stats.dropped_entries;
        self.server_requests.extend(rec.server_requests);
        for n in rec.notifications {
            // The method names come from the server: keep the map small whatever it sends.
            let key =
                if self.notifications.len() < 100 || self.notifications.contains_key(&n.method) {
                    shorten(&n.method, 100)
                } else {
                    "(other methods)".into()
                };
            *self.notifications.entry(key).or_default() += 1;
        }
        if !self.stderr.is_empty() && !rec.stderr.is_empty() {
            self.stderr.push_str("\n[— restarted —]\n");
        }
        self.stderr.push_str(&rec.stderr);
        self.stderr_bytes += rec.stderr_bytes;
        if keep_transcript {
            self.transcripts.push(session.transcript());
        }
    }
}

struct Ctx<'a> {
    /// Set by a server's watchdog when it ended the server for a limit: the run ends.
    limit_hit: LimitFlag,
    /// What the sandbox hides and shows, and who the server is in it.
    placement: Placement,
    /// The scratch HOME on the host.
    home: PathBuf,
    scratch_root: PathBuf,
    writable: Vec<PathBuf>,
    run_as: Option<(u32, u32)>,
    config: &'a RunConfig,
    spec: LaunchSpec,
    started: Instant,
    workspace: String,
}

/// What the sandbox hides (users' private places), what it shows of them (what the server runs
/// on), which /tmp entries stay visible, and who the server is in it (account, HOME). The same
/// for every server start of a run.
#[derive(Debug, Clone, Default)]
struct Placement {
    /// /tmp entries the server must see: its files on the command line, in its environment,
    /// and the lower layers of overlays.
    visible_tmp: Vec<PathBuf>,
    hidden: Vec<PathBuf>,
    exposed: Vec<PathBuf>,
    identity: crate::sandbox::policy::SandboxIdentity,
}

impl Placement {
    /// For a run of `command` with the configured environment and `run_as` (root mode).
    fn new(
        config: &RunConfig,
        command: &[String],
        run_as: Option<(u32, u32)>,
        scratch_root: &Path,
    ) -> Placement {
        let hidden = crate::sandbox::policy::private_directories();
        let path_var = std::env::var("PATH").ok();
        let program = resolve_program(&command[0], path_var.as_deref())
            .unwrap_or_else(|_| PathBuf::from(&command[0]));
        let overlays: Vec<String> = config
            .overlays
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let words: Vec<&str> = command
            .iter()
            .map(String::as_str)
            .chain(config.env.iter().map(|(_, v)| v.as_str()))
            .chain(overlays.iter().map(String::as_str))
            .collect();
        let visible_tmp = named_tmp_entries(words.iter().copied(), scratch_root);
        let exposed = crate::sandbox::policy::exposed_paths(
            &hidden,
            words.iter().copied(),
            &program,
            &config.expose,
        );
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let mut identity = crate::sandbox::policy::sandbox_identity(run_as, &passwd, &hidden);
        // A HOME that is a hidden place itself (/root) replaces it whole: only where nothing
        // else must be shown there.
        if let Some(home) = &identity.home {
            let crowded = hidden.contains(home)
                && exposed
                    .iter()
                    .chain(&config.overlays)
                    .any(|p| p.starts_with(home));
            if crowded {
                identity.home = None;
            }
        }
        Placement {
            visible_tmp,
            hidden,
            exposed,
            identity,
        }
    }

    /// The server's environment in the sandbox: HOME (and what lies under it: the XDG
    /// directories) where the account's home directory shows it, USER and LOGNAME the account.
    fn server_env(&self, env: &[(String, String)], home: &Path) -> Vec<(String, String)> {
        let scratch_home = home.display().to_string();
        let mut out: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| {
                let moved = match (&self.identity.home, v.strip_prefix(&scratch_home)) {
                    (Some(inside), Some(rest)) if rest.is_empty() || rest.starts_with('/') => {
                        format!("{}{rest}", inside.display())
                    }
                    _ => v.clone(),
                };
                (k.clone(), moved)
            })
            .collect();
        if let Some(user) = &self.identity.user {
            out.retain(|(k, _)| k != "USER" && k != "LOGNAME");
            out.push(("USER".into(), user.clone()));
            out.push(("LOGNAME".into(), user.clone()));
        }
        out
    }
}

/// The environment the server gets: a clean one with the scratch directories.
fn server_env(scratch: &Scratch, extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for key in [
        "PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME",
    ] {
        if let Ok(v) = std::env::var(key) {
            env.push((key.into(), v));
        }
    }
    let home = scratch.home.display().to_string();
    let tmp = scratch.tmp.display().to_string();
    env.extend([
        ("HOME".to_string(), home.clone()),
        ("TMPDIR".into(), tmp.clone()),
        ("TMP".into(), tmp.clone()),
        ("TEMP".into(), tmp),
        ("XDG_CONFIG_HOME".into(), format!("{home}/.config")),
        ("XDG_CACHE_HOME".into(), format!("{home}/.cache")),
        ("XDG_DATA_HOME".into(), format!("{home}/.local/share")),
        ("XDG_STATE_HOME".into(), format!("{home}/.local/state")),
    ]);
    for (k, v) in extra {
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// Why a server could not be started and greeted.
struct StartFailure {
    message: String,
    session: Option<(Session, Vec<ProtocolNote>)>,
    exit: Option<ExitSummary>,
    /// Set when the sandbox itself failed (nothing was started).
    sandbox: Option<StepFailure>,
    /// What the sandbox enforced, when it started the server and the handshake failed.
    enforcement: Option<Enforcement>,
}

impl StartFailure {
    fn plain(message: String) -> Self {
        Self {
            message,
            session: None,
            exit: None,
            sandbox: None,
            enforcement: None,
        }
    }
}

/// Starts the server (inside the sandbox unless it is off) and performs the handshake.
async fn start_server(
    ctx: &Ctx<'_>,
    sandbox: Option<SandboxLevel>,
    recorder: &mut Recorder,
) -> Result<(Live, Option<Enforcement>), StartFailure> {
    let mut cgroup = None;
    let mut attempts = None;
    let mut network = None;
    let (mut process, pipes, enforcement) = match sandbox {
        None => {
            let (p, pipes) = ServerProcess::spawn(&ctx.spec)
                .map_err(|e| StartFailure::plain(error_chain(&e)))?;
            (p, pipes, None)
        }
        Some(level) => {
            let path_var = ctx
                .spec
                .env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.as_str());
            let program = resolve_program(&ctx.spec.program, path_var)
                .map_err(|e| StartFailure::plain(error_chain(&e)))?;
            // No run marker: the pid namespace ends every process of the sandbox, and a
            // variable naming hintcheck would tell the server it is watched. Its user and HOME
            // are those of an ordinary account.
            let env = ctx.placement.server_env(&ctx.spec.env, &ctx.home);
            let limits = Limits {
                data_bytes: ctx.config.memory_limit,
                ..Limits::for_uid(
                    ctx.run_as
                        .map(|r| r.0)
                        .unwrap_or_else(|| rustix::process::getuid().as_raw()),
                )
            };
            // As root, a cgroup of its own where the host offers cgroup v2 (best effort).
            if ctx.run_as.is_some() {
                static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                cgroup = RunCgroup::create(
                    &format!("job-{}-{n}", ctx.spec.run_id),
                    limits.processes,
                    limits.data_bytes,
                )
                .ok();
            }
            let sandbox_config = SandboxConfig {
                cgroup: cgroup.as_ref().map(|c| c.path().to_path_buf()),
                cgroup_enforces: cgroup
                    .as_ref()
                    .map(|c| c.enforces.clone())
                    .unwrap_or_default(),
                level,
                visible_tmp: ctx.placement.visible_tmp.clone(),
                hidden: ctx.placement.hidden.clone(),
                exposed: ctx.placement.exposed.clone(),
                overlays: ctx.config.overlays.clone(),
                notify: true,
                network_observer: true,
                observe_ports: ctx.config.observe_ports.clone(),
                program,
                args: ctx.spec.args.clone(),
                env,
                cwd: ctx.spec.cwd.clone(),
                scratch_root: ctx.scratch_root.clone(),
                writable: ctx.writable.clone(),
                run_as: ctx.run_as,
                run_user: ctx.placement.identity.added_user.clone(),
                home_inside: ctx.placement.identity.home.clone(),
                home: ctx.home.clone(),
                harness_pid: std::process::id() as i32,
                resolv_conf: format!(
                    "nameserver {SANDBOX_RESOLVER}\noptions timeout:1 attempts:1\n"
                ),
                simulate_failure: crate::sandbox::policy::simulated_failure(),
                hostname: crate::sandbox::sandbox_hostname().to_string(),
                limits,
            };
            match ServerProcess::spawn_sandboxed(
                &ctx.spec,
                &sandbox_config,
                ctx.config.sandbox_exe.as_deref(),
            )
            .await
            {
                Ok(started) => {
                    attempts = started.attempts;
                    network = started.network;
                    (started.process, started.pipes, Some(started.enforcement))
                }
                Err(LaunchError::Sandbox(f)) if f.step == "exec" => {
                    // The sandbox is in place; the server program itself could not start.
                    let mut message = format!(
                        "the server program could not be started in the sandbox: {}",
                        f.message
                    );
                    if let (Some(13), Some((uid, _))) = (f.errno, ctx.run_as) {
                        message.push_str(&format!(
                            "; in the sandbox the server runs as uid {uid}, which must be able to \
reach the program, its interpreter and their libraries (a directory such as /root, mode 700, \
hides them): install the server somewhere readable, or pass --run-as 0 to keep root's file \
ownership (writes stay confined and capabilities dropped)"
                        ));
                    }
                    return Err(StartFailure::plain(message));
                }
                Err(LaunchError::Sandbox(f)) => {
                    return Err(StartFailure {
                        message: format!("sandbox step {} failed: {}", f.step, f.message),
                        session: None,
                        exit: None,
                        sandbox: Some(f),
                        enforcement: None,
                    });
                }
                Err(e) => return Err(StartFailure::plain(error_chain(&e))),
            }
        }
    };
    // Limits that hold without a memory cgroup: from now on, also while it starts.
    let watchdog = process.pid().map(|pid| {
        crate::sandbox::watchdog::start(
            pid,
            ctx.writable.clone(),
            WatchLimits {
                // The per-process limits (RLIMIT_DATA) and a cgroup's memory.max act at the
                // limit itself; the tree as a whole is ended a quarter above it.
                memory_bytes: ctx
                    .config
                    .memory_limit
                    .saturating_add(ctx.config.memory_limit / 4),
                disk_bytes: ctx.config.disk_limit,
            },
            ctx.limit_hit.clone(),
        )
    });
    // The observers take their baseline now, before the server can do anything more.
    let sandbox_root = enforcement
        .as_ref()
        .and(process.pid())
        .map(|pid| PathBuf::from(format!("/proc/{pid}/root")));
    recorder.server_started(&ServerStart {
        sandbox_root,
        attempts,
        network,
        server_pid: process.pid(),
    });
    let config = ctx.config;
    let roots = (config.roots == RootsOffer::Workspace)
        .then(|| vec![json!({"uri": format!("file://{}", ctx.workspace), "name": "workspace"})]);
    let session = Session::start(
        ctx.started,
        pipes.stdin,
        pipes.stdout,
        Some(Box::new(pipes.stderr)),
        SessionOptions {
            max_line_bytes: config.max_line_bytes,
            roots,
            ..Default::default()
        },
    );
    let options = ClientOptions {
        era: config.era,
        discover_timeout: config.discover_timeout,
        handshake_timeout: config.handshake_timeout,
        offer_roots: config.roots == RootsOffer::Workspace,
        ..Default::default()
    };
    match McpClient::connect(session, options).await {
        Ok(client) => Ok((
            Live {
                process,
                client,
                cgroup,
                _watchdog: watchdog,
            },
            enforcement,
        )),
        Err((mut session, err, notes)) => {
            session.close_stdin().await;
            let exit = process.shutdown(Duration::from_millis(500)).await;
            session.drain(Duration::from_millis(500)).await;
            let mut msg = error_chain(&err);
            if let Some(code) = exit.code {
                msg.push_str(&format!(" (the server exited with code {code})"));
            } else if let Some(sig) = exit.signal {
                msg.push_str(&format!(" (the server was ended by signal {sig})"));
            }
            Err(StartFailure {
                message: msg,
                session: Some((session, notes)),
                exit: Some(exit),
                sandbox: None,
                enforcement,
            })
        }
    }
}

async fn stop_server(
    live: Live,
    collected: &mut Collected,
    keep_transcript: bool,
    recorder: &mut Recorder,
) {
    let Live {
        mut process,
        client,
        cgroup,
        _watchdog,
    } = live;
    let (mut session, notes) = client.into_session();
    session.close_stdin().await;
    let exit = process.shutdown(EXIT_GRACE).await;
    session.drain(Duration::from_millis(500)).await;
    collected.absorb(&session, notes, keep_transcript);
    collected.exits.push(exit);
    drop(cgroup);
    // The sandbox's private directories are gone with it.
    recorder.server_started(&ServerStart::default());
}

/// The error and its causes on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// The server runs in the scratch workspace, so a relative path the user typed (relative to
/// where hintcheck runs) is made absolute when it names something that exists.
fn absolutize(arg: &str) -> String {
    if arg.starts_with('-') || arg.starts_with('/') || !arg.contains('/') {
        return arg.to_string();
    }
    let p = std::path::Path::new(arg);
    match (p.exists(), std::path::absolute(p)) {
        (true, Ok(abs)) => abs.display().to_string(),
        _ => arg.to_string(),
    }
}

fn substitute(arg: &str, scratch: &Scratch) -> String {
    arg.replace("{workspace}", &scratch.workspace.display().to_string())
        .replace("{home}", &scratch.home.display().to_string())
        .replace("{tmp}", &scratch.tmp.display().to_string())
}

/// The result of a run: the report, and the transcript when one was asked for.
pub struct Verification {
    /// The report.
    pub report: Report,
    /// Every line exchanged, when `RunConfig::transcript` is set (in server-instance order).
    pub transcript: Vec<Entry>,
}

/// Runs one verification. `stop` ends the run early (the report is then partial).
pub async fn verify(
    config: &RunConfig,
    stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Verification {
    let mut v = verify_unchecked(config, stop, subreaper).await;
    // Runs that ended early (no handshake, no sandbox) have findings too.
    crate::baseline::fingerprint_findings(&mut v.report);
    if config.check_expectations {
        check_expectations(&mut v.report, config);
    }
    v
}

/// [`verify`] without the `--check` of the scenario's expectations.
async fn verify_unchecked(
    config: &RunConfig,
    mut stop: watch::Receiver<bool>,
    subreaper: bool,
) -> Verification {
    let started = Instant::now();
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let deadline = started + config.run_timeout;
    config
        .progress
        .emit(ProgressEvent::Stage("starting the server"));
    let mut notes: Vec<String> = Vec::new();
    let mut collected = Collected::default();
    let keep_transcript = config.transcript.is_some();
    let settings = Settings {
        repeat: config.repeat,
        seed: config.seed,
        settle_ms: config.settle.as_millis() as u64,
        call_timeout_ms: config.call_timeout.as_millis() as u64,
        era: match config.era {
            EraChoice::Auto => "auto",
            EraChoice::Modern => "modern",
            EraChoice::Legacy => "legacy",
        }
        .into(),
        roots: match config.roots {
            RootsOffer::None => "none",
            RootsOffer::Workspace => "workspace",
        }
        .into(),
        fail_on: config.fail_on,
    };
    let sandbox = SandboxStatus::scratch_only(subreaper);
    let base_report = |command: Vec<String>, start_error: Option<String>| Report {
        hintcheck_version: env!("CARGO_PKG_VERSION").into(),
        started_unix_ms,
        duration_ms: started.elapsed().as_millis() as u64,
        server: ServerSummary {
            command,
            identity: None,
            start_error,
            exits: Vec::new(),
            restarts: 0,
            stderr: String::new(),
            stderr_bytes: 0,
            tools_sha256: None,
            startup_us: None,
        },
        sandbox: sandbox.clone(),
        coverage: CoverageSummary::default(),
        tools: Vec::new(),
        phases: Vec::new(),
        findings: Vec::new(),
        wire: WireSummary::default(),
        settings: settings.clone(),
        seeded: Vec::new(),
        notes: Vec::new(),
        exit_code: exit_code::HARNESS,
        exit_reason: String::new(),
        partial: None,
        baseline: None,
        expectations: None,
    };

    let mut scratch = match Scratch::create() {
        Ok(s) => s,
        Err(e) => {
            let mut r = base_report(config.command.clone(), Some(error_chain(&e)));
            r.exit_reason = "harness error: could not create the scratch directories".into();
            return Verification {
                report: r,
                transcript: Vec::new(),
            };
        }
    };
    let seeding = match &config.workspace_seed {
        Some(seed) => scratch.seed_from(seed),
        None => scratch.seed_default(),
    }
    .and_then(|()| match &config.sqlite_seed {
        Some(rel) => scratch.seed_sqlite(rel),
        None => Ok(()),
    });
    let seed_notes = std::mem::take(&mut scratch.seed_notes);
    if let Err(e) = seeding {
        let mut r = base_report(config.command.clone(), Some(error_chain(&e)));
        r.exit_reason = "harness error: could not seed the workspace".into();
        return Verification {
            report: r,
            transcript: Vec::new(),
        };
    }
    let command: Vec<String> = config
        .command
        .iter()
        .map(|a| absolutize(&substitute(a, &scratch)))
        .collect();
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run_id = format!(
        "{}-{}-{}",
        std::process::id(),
        started_unix_ms,
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    // As root, the server runs as a uid of its own: the scratch directories become its own.
    let run_as = (config.sandbox.is_some() && rustix::process::getuid().is_root()).then(|| {
        config
            .run_as
            .unwrap_or_else(crate::sandbox::policy::allocate_run_uid)
    });
    if config.sandbox.is_some() {
        if let Err(e) = scratch.prepare_sandbox(run_as, config.overlays.len()) {
            let mut r = base_report(
                config.command.clone(),
                Some(format!(
                    "cannot prepare the scratch directories for the sandbox: {e}"
                )),
            );
            r.exit_reason = "harness error: could not prepare the sandbox".into();
            return Verification {
                report: r,
                transcript: Vec::new(),
            };
        }
    }
    let placement = if config.sandbox.is_some() {
        Placement::new(
            config,
            &command,
            run_as,
            scratch.root().unwrap_or(Path::new("/")),
        )
    } else {
        Placement::default()
    };
    let ctx = Ctx {
        limit_hit: LimitFlag::default(),
        placement,
        home: scratch.home.clone(),
        scratch_root: scratch.root().map(|p| p.to_path_buf()).unwrap_or_default(),
        writable: vec![
            scratch.workspace.clone(),
            scratch.home.clone(),
            scratch.tmp.clone(),
        ],
        run_as,
        config,
        spec: LaunchSpec {
            program: command[0].clone(),
            args: command[1..].to_vec(),
            env: server_env(
                &scratch,
                &config
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), substitute(v, &scratch)))
                    .collect::<Vec<_>>(),
            ),
            cwd: scratch.workspace.clone(),
            run_id,
        },
        started,
        workspace: scratch.workspace.display().to_string(),
    };
    let scratch_roots = vec![
        SnapshotRoot::new("$WORKSPACE", scratch.workspace.clone()),
        SnapshotRoot::new("$HOME", scratch.home.clone()),
        SnapshotRoot::new("$TMPDIR", scratch.tmp.clone()),
    ];
    // Change notifications from now on: what the harness did to the scratch directories is
    // over (seed, sandbox preparation).
    let mut inotify_observer = InotifyObserver::new(&scratch_roots);
    let notified = inotify_observer.is_active();
    let mut fs_observer = FsSnapshotObserver::new(scratch_roots, SnapshotLimits::default());
    let mut read_only_tmp: Vec<PathBuf> = Vec::new();
    if config.sandbox.is_some() {
        // In the sandbox's /tmp, the scratch root is watched through the scratch roots, the
        // overlays through their own roots, and the read-only /tmp entries named on the
        // command line cannot change: walk none of them twice.
        let top_name = |p: &std::path::Path| -> Option<String> {
            p.strip_prefix("/tmp")
                .ok()
                .and_then(|rel| rel.components().next())
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
        };
        let words: Vec<&str> = command
            .iter()
            .map(String::as_str)
            .chain(config.env.iter().map(|(_, v)| v.as_str()))
            .collect();
        let scratch_root = scratch.root().map(|p| p.to_path_buf()).unwrap_or_default();
        read_only_tmp = named_tmp_entries(words, &scratch_root);
        let mut skip_in_tmp: Vec<String> = read_only_tmp
            .iter()
            .chain(config.overlays.iter())
            .chain(std::iter::once(&scratch_root))
            .filter_map(|p| top_name(p))
            .collect();
        skip_in_tmp.sort();
        skip_in_tmp.dedup();
        let scratch_name = skip_in_tmp;
        let sandbox_dirs = vec![
            SandboxDir::new("/tmp", scratch_name),
            SandboxDir::new("/var/tmp", Vec::new()),
            SandboxDir::new("/dev/shm", Vec::new()),
        ];
        inotify_observer.watch_sandbox_dirs(sandbox_dirs.clone());
        fs_observer.watch_sandbox_dirs(sandbox_dirs);
        // Overlays through their layers: only what the upper layer holds is walked (and
        // watched for writes that do not last).
        let overlays: Vec<OverlayRoot> = config
            .overlays
            .iter()
            .enumerate()
            .map(|(i, d)| OverlayRoot {
                label: d.display().to_string(),
                lower: d.clone(),
                upper: crate::sandbox::scratch::overlay_dir(&scratch_root, i).join("upper"),
            })
            .collect();
        inotify_observer.watch_overlay_uppers(&overlays);
        fs_observer.watch_overlays(overlays);
    }
    let mut observers: Vec<Box<dyn crate::observe::Observer>> =
        vec![Box::new(fs_observer), Box::new(inotify_observer)];
    if config.sandbox.is_some() {
        let mut writable: Vec<PathBuf> = vec![
            scratch.workspace.clone(),
            scratch.home.clone(),
            scratch.tmp.clone(),
            PathBuf::from("/tmp"),
            PathBuf::from("/var/tmp"),
            PathBuf::from("/dev/shm"),
        ];
        writable.extend(config.overlays.iter().cloned());
        writable.extend(ctx.placement.identity.home.clone());
        let resolver = SANDBOX_RESOLVER
            .parse()
            .unwrap_or(std::net::IpAddr::from([192, 0, 2, 53]));
        // The scratch root itself is read-only inside (only its three directories are not).
        let mut read_only = read_only_tmp.clone();
        read_only.extend(scratch.root().map(|p| p.to_path_buf()));
        observers.push(Box::new(AttemptObserver::new(
            writable, read_only, resolver,
        )));
        observers.push(Box::new(crate::observe::net::NetObserver::new(
            config.observe_ports.clone(),
        )));
    }
    let mut recorder = Recorder::new(observers);
    let coverage = Coverage {
        files: Some(format!(
            "{}{}",
            if config.sandbox.is_some() {
                "$WORKSPACE, $HOME, $TMPDIR and the sandbox's /tmp, /var/tmp, /dev/shm (effects); write attempts anywhere (seccomp)"
            } else {
                "$WORKSPACE, $HOME, $TMPDIR only (effects), the weaker mode without a sandbox: writes elsewhere and write attempts are unseen"
            },
            match (notified, config.sandbox.is_some()) {
                (true, true) => "; writes that did not last under $WORKSPACE, $HOME, $TMPDIR and the sandbox's /tmp, /var/tmp, /dev/shm (inotify)",
                (true, false) => "; writes that did not last under $WORKSPACE, $HOME, $TMPDIR (inotify)",
                (false, _) => "",
            }
        )),
        network: config.sandbox.is_some().then(|| {
            format!("DNS questions with their names, connect, sendto and sendmmsg attempts (seccomp), every outgoing TCP SYN and every packet of another IP protocol on lo (UDP on any port and with any payload, UDP-Lite, SCTP, ICMP) whatever sent it (a packet socket, where the sandbox says it made one), TLS SNI and HTTP request lines on ports {}", config.observe_ports.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", "))
        }),
    };
    // Launch and handshake.
    let mut sandbox_level = config.sandbox;
    let mut sandbox_status = SandboxStatus::scratch_only(subreaper);
    let launched = Instant::now();
    let mut first = start_server(&ctx, sandbox_level, &mut recorder).await;
    let startup_us = launched.elapsed().as_micros() as u64;
    if let Err(f) = &first {
        if let (Some(step), Some(SandboxLevel::BestEffort)) = (&f.sandbox, sandbox_level) {
            // Best effort and no namespaces at all: run without the sandbox, and say so loudly.
            sandbox_status.requested = "best-effort".into();
            sandbox_status.not_enforced.insert(
                0,
                format!(
                    "the sandbox could not be set up (step {}: {}); the server ran without it",
                    step.step, step.message
                ),
            );
            sandbox_level = None;
            first = start_server(&ctx, None, &mut recorder).await;
        }
    }
    let mut live = match first {
        Ok((l, enforcement)) => {
            if let (Some(e), Some(level)) = (enforcement, sandbox_level) {
                sandbox_status = SandboxStatus::from_enforcement(&e, level);
            }
            Some(l)
        }
        Err(f) => {
            if let (Some(e), Some(level)) = (&f.enforcement, sandbox_level) {
                sandbox_status = SandboxStatus::from_enforcement(e, level);
            }
            if let Some((s, n)) = f.session {
                collected.absorb(&s, n, keep_transcript);
            }
            collected.exits.extend(f.exit);
            let mut r = base_report(command.clone(), Some(f.message.clone()));
            r.sandbox = sandbox_status;
            r.findings = protocol_findings(&collected);
            let transcript = finish_collected(&mut r, collected);
            r.seeded = scratch.seeded.clone();
            r.phases = phase_observations(recorder.checkpoint(), Phase::Startup, None);
            match &f.sandbox {
                Some(step) => {
                    r.exit_code = exit_code::SANDBOX_UNAVAILABLE;
                    r.exit_reason = format!(
                        "the required sandbox is unavailable: step {} failed",
                        step.step
                    );
                    r.sandbox.requested = "required".into();
                    r.sandbox.not_enforced.insert(0, f.message.clone());
                    if let Some(fix) = crate::sandbox::remedy(step) {
                        r.notes.push(fix);
                    }
                }
                None => {
                    r.exit_reason =
                        "harness error: the server could not be started or greeted".into()
                }
            }
            r.notes.extend(recorder.take_notes());
            if let Err(e) = scratch.remove() {
                r.notes.push(e);
            }
            r.duration_ms = started.elapsed().as_millis() as u64;
            return Verification {
                report: r,
                transcript,
            };
        }
    };
    let identity = live.as_ref().map(|l| l.client.identity().clone());

    // Inventory.
    let inventory = match live.as_mut() {
        Some(l) => l.client.list_tools().await,
        None => Default::default(),
    };
    let mut phases = phase_observations(recorder.checkpoint(), Phase::Startup, None);

    // Threads that run while no call is in flight are background workers: what the server
    // does while they run during a call may be theirs.
    let skip = if sandbox_level.is_some() { 3 } else { 1 };
    let mut background: Vec<u32> = Vec::new();
    if let Some(l) = live.as_ref() {
        background.extend(probe_background(l.process.pid().map(ProcessTree::new), skip).await);
    }
    let mut idle_sample: Option<std::collections::HashMap<u32, u64>> = None;

    // Exercise and observe.
    let workspace_facts = WorkspaceFacts::scan(&scratch.workspace);
    let planned = plan(
        &inventory.tools,
        config.seed,
        &config.overrides,
        Some(&workspace_facts),
        config.attempts,
    );
    let mut runs: Vec<ToolRun> = vec![ToolRun::default(); inventory.tools.len()];
    let mut restarts = 0usize;
    let mut partial: Option<String> = None;
    // The tool whose call was in flight when a watchdog ended the server.
    let mut limit_during: Option<String> = None;
    let mut last_tool: Option<String> = None;
    let mut called = vec![false; inventory.tools.len()];
    // (owner call, task id) of processes and threads started by calls, while they live.
    let mut lingering: Vec<(String, String, u32)> = Vec::new();
    // Where a server said paths must be, once an error told us.
    let mut steer: Option<WorkspaceFacts> = None;
    if config.isolate {
        notes.push(
            "--isolate: every tool was called on a fresh server with a fresh workspace".into(),
        );
        // The listing server is not used for calls: each tool gets its own.
        if let Some(l) = live.take() {
            stop_server(l, &mut collected, keep_transcript, &mut recorder).await;
        }
        phases.extend(phase_observations(recorder.checkpoint(), Phase::Idle, None));
    }
    config.progress.emit(ProgressEvent::Planned(planned.len()));
    for (position, p) in planned.iter().enumerate() {
        let tool = &inventory.tools[p.tool_index];
        config.progress.emit(ProgressEvent::Tool {
            position,
            name: &tool.name,
        });
        let run = &mut runs[p.tool_index];
        run.synthesis_notes = p.notes.clone();
        run.overridden = p.overridden.clone();
        if let Some(why) = &p.skip {
            run.skipped = Some(why.clone());
            continue;
        }
        if let Some(only) = &config.only_tools {
            if !only.contains(&tool.name) {
                run.skipped = Some("not selected for this run".into());
                continue;
            }
        }
        if partial.is_some() {
            continue;
        }
        if *stop.borrow() {
            partial = Some("interrupted by a signal".into());
            continue;
        }
        if let Some(why) = limit_reason(&ctx) {
            partial = Some(why);
            continue;
        }
        if Instant::now() >= deadline {
            partial = Some(format!(
                "the run timeout ({}s) was reached",
                config.run_timeout.as_secs()
            ));
            continue;
        }
        if config.isolate {
            called[p.tool_index] = true;
            let remaining = deadline.saturating_duration_since(Instant::now());
            match run_isolated(config, &stop, subreaper, &tool.name, remaining).await {
                Ok((calls, nested_phases)) => {
                    run.calls = calls;
                    phases.extend(nested_phases);
                }
                Err(why) => run.skipped = Some(why),
            }
            if *stop.borrow() {
                partial = Some("interrupted by a signal".into());
            }
            continue;
        }
        if live.is_none() {
            if restarts >= config.max_restarts {
                run.skipped = Some(format!(
                    "not called: the server stopped working and was restarted {restarts} times already"
                ));
                continue;
            }
            restarts += 1;
            match start_server(&ctx, sandbox_level, &mut recorder).await {
                Ok((l, _)) => {
                    background.extend(
                        probe_background(l.process.pid().map(ProcessTree::new), skip).await,
                    );
                    idle_sample = None;
                    live = Some(l);
                }
                Err(f) => {
                    if let Some((s, n)) = f.session {
                        collected.absorb(&s, n, keep_transcript);
                    }
                    collected.exits.extend(f.exit);
                    notes.push(format!("restart {restarts} failed: {}", f.message));
                    run.skipped = Some("not called: the server could not be restarted".into());
                    continue;
                }
            }
        }
        phases.extend(phase_observations(
            recorder.checkpoint(),
            Phase::Idle,
            last_tool.clone(),
        ));
        called[p.tool_index] = true;
        last_tool = Some(tool.name.clone());
        // The first call tries the candidate argument sets in turn while it ends in an
        // error; the repeats reuse the set that worked.
        let mut number = 1;
        let mut attempt = 1;
        // A directory a server said it allows (learned from an earlier error) goes first.
        let mut candidates = p.candidates.clone();
        if let Some(facts) = &steer {
            let c = steered_candidate(tool, config.seed, &config.overrides, facts);
            candidates.retain(|x| *x != c);
            candidates.insert(0, c);
        }
        while number <= config.repeat {
            let arguments = candidates[attempt - 1].clone();
            let Some(l) = live.as_mut() else { break };
            let cursor = l.client.session().transcript_len();
            let tree = l.process.pid().map(ProcessTree::new);
            let before = tree.map(|t| t.tasks()).unwrap_or_default();
            // Processes and threads that earlier calls started and that still run: what they
            // do now may land in this call's window.
            lingering.retain(|(_, _, tid)| before.contains(tid));
            let mut lingering_now: Vec<String> = lingering
                .iter()
                .map(|(owner, _, _)| owner.clone())
                .collect();
            lingering_now.sort();
            lingering_now.dedup();
            let mut lingering_tools: Vec<String> =
                lingering.iter().map(|(_, t, _)| t.clone()).collect();
            lingering_tools.sort();
            lingering_tools.dedup();
            let rt_start = tree.map(|t| t.runtimes(skip)).unwrap_or_default();
            if let Some(prev) = idle_sample.take() {
                background.extend(ran_between(&prev, &rt_start));
                background.sort_unstable();
                background.dedup();
            }
            let t0 = Instant::now();
            let timeout = config
                .call_timeout
                .min(deadline.saturating_duration_since(t0))
                .max(Duration::from_millis(1));
            let outcome = tokio::select! {
                o = l.client.call_tool(&tool.name, &arguments, timeout) => Some(o),
                _ = stop.changed() => None,
            };
            let duration = t0.elapsed();
            let duration_ms = duration.as_millis() as u64;
            let interrupted = outcome.is_none();
            let outcome = outcome.unwrap_or(CallOutcome::Timeout {
                after_ms: duration_ms,
            });
            let settled = if interrupted {
                Duration::ZERO
            } else {
                settle(tree, &before, config.settle, config.settle_max).await
            };
            if let Some(t) = tree {
                let label = if number == 1 && attempt > 1 {
                    format!("{} call 1 (attempt {attempt})", tool.name)
                } else if number == 1 {
                    format!("{} call 1", tool.name)
                } else {
                    format!("{} repeat {number}", tool.name)
                };
                lingering.extend(
                    t.tasks()
                        .into_iter()
                        .filter(|tid| !before.contains(tid))
                        .map(|tid| (label.clone(), tool.name.clone(), tid)),
                );
            }
            let observe_start = Instant::now();
            let observations = recorder.checkpoint();
            let observe = observe_start.elapsed();
            // Only writes and external network traffic can be evidence against a hint.
            let evidential = observations
                .iter()
                .any(|o| o.is_write() || o.as_network().is_some_and(|n| !n.loopback));
            let rt_end = tree.map(|t| t.runtimes(skip)).unwrap_or_default();
            let busy_background: Vec<u32> = ran_between(&rt_start, &rt_end)
                .into_iter()
                .filter(|t| background.contains(t))
                .collect();
            idle_sample = Some(rt_end);
            if evidential && !busy_background.is_empty() {
                lingering_now.push(format!(
                    "background threads of the server ({})",
                    busy_background.len()
                ));
            }
            if limit_during.is_none() && limit_reason(&ctx).is_some() {
                limit_during = Some(tool.name.clone());
            }
            let wire_anomalies = l.client.session().anomalies_since(cursor).len();
            let broken = matches!(
                outcome,
                CallOutcome::Timeout { .. } | CallOutcome::ServerDied
            ) || l.process.has_exited();
            if number == 1 && outcome.worth_another_attempt() {
                // "… not in /…/workspace/docs": aim the next attempt at the allowed directory.
                let error_text = match &outcome {
                    CallOutcome::ToolError { text, .. } | CallOutcome::ErrorLike { text, .. } => {
                        text.as_str()
                    }
                    CallOutcome::RpcError { message, .. } => message.as_str(),
                    _ => "",
                };
                let current = steer.as_ref().map_or(&scratch.workspace, |f| &f.root);
                if let Some(dir) = allowed_dirs_in(error_text, &scratch.workspace, current)
                    .into_iter()
                    .next()
                {
                    let facts = WorkspaceFacts::scan(&dir);
                    let c = steered_candidate(tool, config.seed, &config.overrides, &facts);
                    if !candidates[..attempt].contains(&c) {
                        candidates.retain(|x| *x != c);
                        candidates.insert(attempt, c);
                    }
                    steer = Some(facts);
                }
                // "Available sheets: 'Sheet1', 'Notes'", "Missing required argument: mode": the
                // next attempts take what the error offers.
                let learned = crate::exercise::feedback::corrections(
                    error_text,
                    &tool.input_schema,
                    &arguments,
                    &candidates,
                );
                let learned: Vec<Value> = learned
                    .into_iter()
                    .filter(|c| !candidates[..attempt].contains(c))
                    .collect();
                for (k, c) in learned.into_iter().enumerate() {
                    run.synthesis_notes.push(format!(
                        "the error of attempt {attempt} offered {c}, queued as attempt {}",
                        attempt + k + 1
                    ));
                    candidates.retain(|x| *x != c);
                    candidates.insert((attempt + k).min(candidates.len()), c);
                }
            }
            let retry = number == 1
                && attempt < candidates.len().min(config.attempts)
                && outcome.worth_another_attempt();
            run.calls.push(CallRecord {
                number,
                attempt,
                arguments,
                outcome,
                started_ms: t0.duration_since(started).as_millis() as u64,
                duration_ms,
                settle_ms: settled.as_millis() as u64,
                timing: CallTiming {
                    response_us: duration.as_micros() as u64,
                    settle_us: settled.as_micros() as u64,
                    observe_us: observe.as_micros() as u64,
                },
                concurrent_with: if evidential {
                    lingering_now.clone()
                } else {
                    Vec::new()
                },
                concurrent_tools: if evidential {
                    lingering_tools.clone()
                } else {
                    Vec::new()
                },
                background_ran: evidential && !busy_background.is_empty(),
                confirmed_by_replay: Vec::new(),
                observations,
                wire_anomalies,
            });
            if interrupted {
                partial = Some("interrupted by a signal".into());
            }
            if broken || interrupted {
                // A crashed or hung server cannot be trusted for later calls: start afresh.
                if let Some(l) = live.take() {
                    stop_server(l, &mut collected, keep_transcript, &mut recorder).await;
                }
                phases.extend(phase_observations(
                    recorder.checkpoint(),
                    Phase::Idle,
                    last_tool.clone(),
                ));
                break;
            }
            if retry {
                attempt += 1;
            } else {
                number += 1;
            }
        }
    }

    // Shutdown.
    if let Some(l) = live.take() {
        stop_server(l, &mut collected, keep_transcript, &mut recorder).await;
    }
    phases.extend(phase_observations(
        recorder.checkpoint(),
        Phase::Shutdown,
        None,
    ));
    notes.extend(recorder.take_notes());

    // Confirm uncertain attributions by replaying tools alone on fresh servers.
    if config.replay && partial.is_none() {
        config
            .progress
            .emit(ProgressEvent::Stage("confirming attributions"));
        let names: Vec<String> = inventory.tools.iter().map(|t| t.name.clone()).collect();
        notes.extend(
            replay_ambiguous(config, &stop, subreaper, &names, &mut runs, &mut phases).await,
        );
    }

    // Judge.
    let mut findings: Vec<Finding> = Vec::new();
    let mut tools = Vec::new();
    for (tool, run) in inventory.tools.iter().zip(runs) {
        let judgement = audit::judge_tool(tool, &run, &coverage);
        findings.extend(judgement.findings);
        if config.require_hints {
            findings.extend(audit::missing_hints::finding(tool, &judgement.supported));
        }
        tools.push(ToolReport {
            name: tool.name.clone(),
            title: tool.title.clone(),
            description: tool.description.as_ref().map(|d| shorten(d, 300)),
            index: tool.index,
            definition_sha256: tool.definition_sha256.clone(),
            declared: HintName::ALL
                .iter()
                .map(|h| (h.key(), tool.hints.get(*h).describe()))
                .collect(),
            skipped: run.skipped.clone(),
            // The arguments that worked, or else the first set tried.
            arguments: run
                .calls
                .iter()
                .find(|c| c.number == 1 && c.outcome.is_success())
                .map(|c| c.arguments.clone())
                .or_else(|| {
                    planned
                        .iter()
                        .find(|p| p.tool_index == tool.index)
                        .map(|p| p.arguments().clone())
                })
                .unwrap_or(Value::Null),
            synthesis_notes: run.synthesis_notes.clone(),
            overridden: run.overridden.clone(),
            calls: run.calls,
            verdicts: judgement.verdicts,
            suggestions: judgement.suggestions,
            supported: judgement.supported,
            definition: tool.definition.clone(),
        });
    }
    findings.extend(audit::malformed_tool::unusable_findings(
        &inventory.unusable,
    ));
    findings.extend(audit::out_of_window::findings(&phases));
    if let Some(why) = limit_reason(&ctx) {
        findings.push(audit::resource_limit::finding(
            &why,
            limit_during.as_deref(),
        ));
        partial.get_or_insert(why);
    }
    findings.extend(audit::sandbox_evasion::findings(
        tools.iter().map(|t| (t.name.as_str(), t.calls.as_slice())),
        &phases,
    ));

    let mut report = base_report(command, None);
    report.sandbox = sandbox_status;
    report.server.identity = identity;
    report.server.restarts = restarts;
    report.server.startup_us = Some(startup_us);
    report.server.tools_sha256 = Some(inventory.sha256.clone());
    report.coverage = CoverageSummary {
        observers: recorder.statuses(),
        files_observed: coverage.files.is_some(),
        network_observed: coverage.network.is_some(),
        tools_listed: inventory.tools.len(),
        tools_succeeded: tools
            .iter()
            .filter(|t| t.calls.iter().any(|c| c.outcome.is_success()))
            .count(),
        tools_failed: tools
            .iter()
            .filter(|t| !t.calls.is_empty() && !t.calls.iter().any(|c| c.outcome.is_success()))
            .count(),
        tools_skipped: tools
            .iter()
            .filter(|t| t.calls.is_empty() && t.skipped.is_some())
            .count(),
        tools_not_called: tools
            .iter()
            .enumerate()
            .filter(|(i, t)| !called[*i] && t.skipped.is_none())
            .count(),
        calls: tools.iter().map(|t| t.calls.len()).sum(),
        inventory_incomplete: inventory.incomplete.clone(),
        background_threads: background.len(),
        unreached: tools
            .iter()
            .filter_map(|t| crate::report::Unreached::of(&t.name, &t.calls))
            .collect(),
    };
    findings.extend(protocol_findings(&collected));
    let transcript = finish_collected(&mut report, collected);
    report.tools = tools;
    report.phases = phases;
    report.findings = findings;
    report.seeded = scratch.seeded.clone();
    report.partial = partial.clone();
    report.notes = seed_notes.into_iter().chain(notes).collect();

    crate::baseline::fingerprint_findings(&mut report);
    if let Some(b) = &config.baseline {
        report.baseline = Some(b.apply(&mut report));
    }
    (report.exit_code, report.exit_reason) = decide_exit(&report, config);
    if let Err(e) = scratch.remove() {
        report.notes.push(e);
    }
    report.duration_ms = started.elapsed().as_millis() as u64;
    Verification { report, transcript }
}

/// The exit code and its reason for a finished report: failing findings (those at or above
/// `--fail-on` and not accepted by the baseline) first, then stale baseline entries when they
/// fail the run, then an incomplete run, then "nothing verified".
fn decide_exit(report: &Report, config: &RunConfig) -> (i32, String) {
    let failing: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| f.accepted.is_none() && config.fail_on.fails(f.severity))
        .collect();
    let accepted = report
        .baseline
        .as_ref()
        .map(|b| b.accepted)
        .unwrap_or_default();
    let accepted_note = if accepted > 0 {
        format!(" ({accepted} accepted by the baseline)")
    } else {
        String::new()
    };
    let stale = report
        .baseline
        .as_ref()
        .map(|b| b.stale.len())
        .unwrap_or_default();
    let partial = report.partial.as_ref();
    if !failing.is_empty() {
        let contradicted: Vec<&&Finding> = failing
            .iter()
            .filter(|f| f.hint.is_some() && f.severity == Severity::Error)
            .collect();
        let tools: std::collections::BTreeSet<&str> = contradicted
            .iter()
            .filter_map(|f| f.tool.as_deref())
            .collect();
        let others = failing.len() - contradicted.len();
        let mut parts = Vec::new();
        if !contradicted.is_empty() {
            parts.push(format!(
                "{} contradicted hint(s) in {} tool(s)",
                contradicted.len(),
                tools.len()
            ));
        }
        if others > 0 {
            parts.push(format!(
                "{others} other finding(s) at or above --fail-on {}",
                config.fail_on.as_str()
            ));
        }
        return (
            exit_code::CONTRADICTIONS,
            format!("{}{accepted_note}", parts.join("; ")),
        );
    }
    if stale > 0 && config.fail_on_stale_baseline {
        return (
            exit_code::CONTRADICTIONS,
            format!(
                "{stale} baseline entr{} matched no finding (stale; remove them from the baseline){accepted_note}",
                if stale == 1 { "y" } else { "ies" }
            ),
        );
    }
    if let Some(why) = partial {
        return (
            exit_code::HARNESS,
            format!("the run did not complete ({why}); the report is partial"),
        );
    }
    if report.coverage.tools_succeeded == 0 {
        return (
            exit_code::NOTHING_VERIFIED,
            if report.tools.is_empty() {
                "nothing verified: the server listed no usable tool".to_string()
            } else {
                "nothing verified: no tool call succeeded".to_string()
            },
        );
    }
    let below = report
        .findings
        .iter()
        .filter(|f| f.accepted.is_none() && f.hint.is_some() && f.severity == Severity::Error)
        .count();
    // Contradictions held at warning level: uncertain attribution, or writes that did not last.
    let weak = report
        .findings
        .iter()
        .filter(|f| f.accepted.is_none() && f.hint.is_some() && f.severity != Severity::Error)
        .count();
    let weak_note = if weak > 0 {
        format!(
            "; {weak} weak contradiction(s) (uncertain, or writes that did not last) reported as warnings"
        )
    } else {
        String::new()
    };
    let exercised = report.coverage.tools_succeeded;
    (
        exit_code::OK,
        if below > 0 {
            format!(
                "{below} contradicted hint(s) in {exercised} exercised tool(s), not failing the run (--fail-on {}){weak_note}{accepted_note}",
                config.fail_on.as_str()
            )
        } else {
            format!(
                "no {}contradiction in {exercised} exercised tool(s){weak_note}{accepted_note}",
                if weak > 0 { "firm " } else { "" }
            )
        },
    )
}

/// `--check`: the scenario's `[expect]` decides the exit code (0 met, 1 unmet); the run's own
/// exit code and reason are kept in the report.
fn check_expectations(report: &mut Report, config: &RunConfig) {
    let Some(expect) = config.scenario.as_ref().and_then(|s| s.expect.as_ref()) else {
        return;
    };
    let unmet = crate::scenario::check(expect, report);
    let outcome = crate::report::ExpectationOutcome {
        run_exit_code: report.exit_code,
        run_exit_reason: report.exit_reason.clone(),
        unmet,
    };
    (report.exit_code, report.exit_reason) = match outcome.unmet.first() {
        None => (
            exit_code::OK,
            format!(
                "every expectation of the scenario is met (the run: {}, exit {})",
                outcome.run_exit_reason, outcome.run_exit_code
            ),
        ),
        Some(first) => (
            exit_code::CONTRADICTIONS,
            format!(
                "{} expectation(s) of the scenario unmet, first: {first}",
                outcome.unmet.len()
            ),
        ),
    };
    report.expectations = Some(outcome);
}

/// Why a watchdog ended the run's server, if one did.
fn limit_reason(ctx: &Ctx<'_>) -> Option<String> {
    ctx.limit_hit
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// Threads (other than the server's main thread) that use CPU while no call is in flight,
/// watched for a short while after the tool listing.
async fn probe_background(tree: Option<ProcessTree>, skip: usize) -> Vec<u32> {
    let Some(tree) = tree else { return Vec::new() };
    let first = tree.runtimes(skip);
    tokio::time::sleep(Duration::from_millis(200)).await;
    ran_between(&first, &tree.runtimes(skip))
}

/// A key that identifies an observation across runs (fake network addresses differ between
/// runs, names do not; process starts are not evidence).
fn replay_key(o: &Observation) -> Option<String> {
    match o {
        Observation::File(f) => Some(format!("file {} {}", f.kind.verb(), f.path)),
        Observation::Attempt(a) => Some(format!("attempt {} {}", a.syscall, a.path)),
        Observation::Network(n) => Some(format!(
            "net {:?} {} {:?}",
            n.kind,
            n.name.clone().unwrap_or_else(|| n.destination.clone()),
            n.port
        )),
        Observation::Refused(r) => Some(format!("refused {}", r.what)),
        Observation::Process(_) => None,
    }
}

/// Most tools replayed in one run.
const MAX_REPLAYS: usize = 6;

/// Calls one tool on a fresh server with a fresh workspace (`--isolate`): a nested run limited
/// to the tool. Returns its calls and the observations outside them (labelled with the tool),
/// or why the tool could not be called.
async fn run_isolated(
    config: &RunConfig,
    stop: &watch::Receiver<bool>,
    subreaper: bool,
    tool: &str,
    remaining: Duration,
) -> Result<(Vec<CallRecord>, Vec<PhaseObservation>), String> {
    let mut cfg = config.clone();
    cfg.progress = ProgressHook::default();
    cfg.check_expectations = false;
    cfg.only_tools = Some(vec![tool.to_string()]);
    cfg.isolate = false;
    cfg.replay = false;
    cfg.transcript = None;
    cfg.run_timeout = remaining.max(Duration::from_millis(1));
    let v = Box::pin(verify(&cfg, stop.clone(), subreaper)).await;
    let r = v.report;
    if let Some(e) = &r.server.start_error {
        return Err(format!(
            "not called: its isolated server did not start ({e})"
        ));
    }
    let Some(t) = r.tools.into_iter().find(|t| t.name == tool) else {
        return Err("not called: its isolated server did not list it".into());
    };
    if t.calls.is_empty() {
        return Err(t
            .skipped
            .unwrap_or_else(|| "not called in its isolated run".into()));
    }
    let phases = r
        .phases
        .into_iter()
        .map(|mut p| {
            p.after_tool = Some(p.after_tool.unwrap_or_else(|| tool.to_string()));
            p
        })
        .collect();
    Ok((t.calls, phases))
}

/// What a replay of one tool alone on a fresh server showed, as [`replay_key`]s.
struct Replayed {
    /// Observed where nothing but the tool could have done it: in its calls' windows (its own
    /// earlier calls may have been running, no other tool was called) while none of the
    /// server's background threads ran, and between or after its calls when they never ran.
    certain: BTreeSet<String>,
    /// Observed before the tool was first called (while the server started, or idle before
    /// the call): the server does it on its own.
    unprompted: BTreeSet<String>,
    /// Observed anywhere, the background threads' windows included.
    seen: BTreeSet<String>,
}

/// What a replay says about one observation of an uncertain call.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ReplayVerdict {
    /// The tool alone did it, where nothing else ran.
    Reproduced,
    /// The server does it before the tool is ever called: not the tool's evidence.
    Unprompted,
    /// It happened again, but only while the server's background threads ran too.
    Unsure,
    /// The tool alone never did it.
    Absent,
}

impl Replayed {
    /// What the replay says about `o`. Observations without a key (process starts) count as
    /// reproduced.
    fn judge(&self, o: &Observation) -> ReplayVerdict {
        let Some(k) = replay_key(o) else {
            return ReplayVerdict::Reproduced;
        };
        if self.certain.contains(&k) {
            ReplayVerdict::Reproduced
        } else if self.unprompted.contains(&k) {
            ReplayVerdict::Unprompted
        } else if self.seen.contains(&k) {
            ReplayVerdict::Unsure
        } else {
            ReplayVerdict::Absent
        }
    }
}

/// Replays `tool` alone on a fresh server with a long settle period; returns what it showed,
/// or `None` when the replay could not run.
async fn replay_keys(
    config: &RunConfig,
    stop: &watch::Receiver<bool>,
    subreaper: bool,
    tool: &str,
) -> Option<Replayed> {
    let mut cfg = config.clone();
    cfg.progress = ProgressHook::default();
    cfg.check_expectations = false;
    cfg.only_tools = Some(vec![tool.to_string()]);
    cfg.replay = false;
    cfg.transcript = None;
    cfg.settle = Duration::from_millis(300);
    cfg.settle_max = cfg.settle_max.max(Duration::from_secs(5));
    let v = Box::pin(verify(&cfg, stop.clone(), subreaper)).await;
    let r = v.report;
    if r.server.start_error.is_some() {
        return None;
    }
    // Only this tool was called: its calls' windows hold nothing of another tool, only
    // possibly of the server's background threads.
    let quiet = r.coverage.background_threads == 0;
    let calls = || r.tools.iter().flat_map(|t| t.calls.iter());
    let after_calls = || {
        r.phases
            .iter()
            .filter(|p| p.phase != Phase::Startup && p.after_tool.is_some())
    };
    let certain = calls()
        .filter(|c| !c.background_ran)
        .flat_map(|c| c.observations.iter())
        .chain(after_calls().filter(|_| quiet).map(|p| &p.observation))
        .filter_map(replay_key)
        .collect();
    let unprompted = r
        .phases
        .iter()
        .filter(|p| p.phase == Phase::Startup || p.after_tool.is_none())
        .filter_map(|p| replay_key(&p.observation))
        .collect();
    let seen = calls()
        .flat_map(|c| c.observations.iter())
        .chain(r.phases.iter().map(|p| &p.observation))
        .filter_map(replay_key)
        .collect();
    Some(Replayed {
        certain,
        unprompted,
        seen,
    })
}

/// Confirms or corrects uncertain attributions: a call whose window other calls' processes
/// shared keeps only what a replay of its tool alone reproduces, and observations that belong
/// to no call (or were taken from one) go to the tool whose replay reproduces them. Returns
/// notes for the report.
async fn replay_ambiguous(
    config: &RunConfig,
    stop: &watch::Receiver<bool>,
    subreaper: bool,
    names: &[String],
    runs: &mut [ToolRun],
    phases: &mut Vec<PhaseObservation>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let mut cache: BTreeMap<String, Option<Replayed>> = BTreeMap::new();
    let matters = |o: &Observation| o.is_write() || o.as_network().is_some_and(|n| !n.loopback);
    // 1. Calls with uncertain windows keep what their own tool reproduces alone.
    let mut orphans: Vec<(Vec<String>, Observation)> = Vec::new();
    for (i, run) in runs.iter_mut().enumerate() {
        for call in run
            .calls
            .iter_mut()
            .filter(|c| !c.concurrent_with.is_empty())
        {
            if !cache.contains_key(&names[i]) {
                if cache.len() >= MAX_REPLAYS {
                    notes.push(format!(
                        "replay budget spent: {} {} stays uncertain",
                        names[i],
                        call.label()
                    ));
                    continue;
                }
                let keys = replay_keys(config, stop, subreaper, &names[i]).await;
                cache.insert(names[i].clone(), keys);
            }
            let Some(Some(replayed)) = cache.get(&names[i]) else {
                notes.push(format!(
                    "{} {}: its replay could not run; it stays uncertain",
                    names[i],
                    call.label()
                ));
                continue;
            };
            let mut own = Vec::new();
            let mut unsure = Vec::new();
            for o in std::mem::take(&mut call.observations) {
                let verdict = replayed.judge(&o);
                match verdict {
                    ReplayVerdict::Reproduced => own.push(o),
                    ReplayVerdict::Unsure => {
                        notes.push(format!(
                            "{} {}: \"{}\" happened again when {} ran alone on a fresh server, but so did the server's own background threads; it stays uncertain",
                            names[i],
                            call.label(),
                            o.describe(),
                            names[i]
                        ));
                        unsure.push(o);
                    }
                    ReplayVerdict::Unprompted | ReplayVerdict::Absent => {
                        let why = if verdict == ReplayVerdict::Absent {
                            format!(
                                "did not happen when {} ran alone on a fresh server",
                                names[i]
                            )
                        } else {
                            format!("a fresh server did it before {} was ever called", names[i])
                        };
                        notes.push(format!(
                            "{} {}: \"{}\" {why}; it is not attributed to it",
                            names[i],
                            call.label(),
                            o.describe(),
                        ));
                        if matters(&o) {
                            orphans.push((call.concurrent_tools.clone(), o));
                        }
                    }
                }
            }
            call.confirmed_by_replay = own
                .iter()
                .filter(|o| matters(o))
                .map(|o| o.describe())
                .collect();
            // What stays unsure keeps the call's uncertainty; confirmed observations are marked.
            if unsure.is_empty() {
                call.concurrent_with.clear();
            }
            own.extend(unsure);
            call.observations = own;
        }
    }
    // 2. Observations outside every call (or taken from one): find the tool that produces them.
    let mut candidates: Vec<(Vec<String>, Observation)> = orphans;
    let mut keep: Vec<PhaseObservation> = Vec::new();
    for p in phases.drain(..) {
        match (&p.phase, &p.after_tool) {
            (Phase::Idle, Some(t)) if matters(&p.observation) => {
                candidates.push((vec![t.clone()], p.observation))
            }
            _ => keep.push(p),
        }
    }
    for (tools, o) in candidates {
        let mut placed = false;
        for t in &tools {
            let Some(i) = names.iter().position(|n| n == t) else {
                continue;
            };
            if !cache.contains_key(t) {
                if cache.len() >= MAX_REPLAYS {
                    break;
                }
                let keys = replay_keys(config, stop, subreaper, t).await;
                cache.insert(t.clone(), keys);
            }
            let reproduced = replay_key(&o).is_some()
                && matches!(cache.get(t), Some(Some(r)) if r.judge(&o) == ReplayVerdict::Reproduced);
            if reproduced {
                if let Some(last) = runs[i].calls.last_mut() {
                    notes.push(format!("\"{}\" is attributed to {t}: a replay of {t} alone on a fresh server reproduced it", o.describe()));
                    last.confirmed_by_replay.push(o.describe());
                    last.observations.push(o.clone());
                    placed = true;
                    break;
                }
            }
        }
        if !placed {
            keep.push(PhaseObservation {
                phase: Phase::Idle,
                after_tool: tools.first().cloned(),
                observation: o,
            });
        }
    }
    *phases = keep;
    notes
}

/// Observations of a window that belongs to no call.
fn phase_observations(
    observations: Vec<Observation>,
    phase: Phase,
    after_tool: Option<String>,
) -> Vec<PhaseObservation> {
    observations
        .into_iter()
        .map(|observation| PhaseObservation {
            phase,
            after_tool: after_tool.clone(),
            observation,
        })
        .collect()
}

fn protocol_findings(c: &Collected) -> Vec<Finding> {
    let mut out =
        audit::protocol::findings(&c.notes, &c.anomalies, c.stats.garbage, c.stats.unknown_id);
    out.extend(audit::protocol::list_changed(
        c.notifications
            .get("notifications/tools/list_changed")
            .copied()
            .unwrap_or(0),
    ));
    out
}

/// Moves what was collected from the server instances into the report; returns the transcript.
fn finish_collected(r: &mut Report, c: Collected) -> Vec<Entry> {
    r.server.exits = c.exits;
    r.server.stderr = c.stderr;
    r.server.stderr_bytes = c.stderr_bytes;
    r.wire = WireSummary {
        stats: c.stats,
        server_requests: c.server_requests,
        notifications: c.notifications,
    };
    c.transcripts.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::{Mechanism, WriteAttempt};

    fn denied_write(path: &str) -> Observation {
        Observation::Attempt(WriteAttempt {
            syscall: "openat".into(),
            path: path.into(),
            target: None,
            denied: true,
            destructive: false,
            pid: 1,
            mechanism: Mechanism::Attempt,
        })
    }

    #[test]
    fn a_replay_pins_clears_or_leaves_open_by_where_it_saw_the_observation() {
        let key = |p: &str| replay_key(&denied_write(p)).expect("key");
        let replayed = Replayed {
            certain: [key("/etc/mine"), key("/etc/both")].into(),
            unprompted: [key("/etc/server-does-it"), key("/etc/both")].into(),
            seen: [
                key("/etc/mine"),
                key("/etc/both"),
                key("/etc/server-does-it"),
                key("/etc/beside-busy-threads"),
            ]
            .into(),
        };
        let judge = |p: &str| replayed.judge(&denied_write(p));
        assert_eq!(judge("/etc/mine"), ReplayVerdict::Reproduced);
        // Done where nothing else ran wins over being done unprompted too.
        assert_eq!(judge("/etc/both"), ReplayVerdict::Reproduced);
        assert_eq!(judge("/etc/server-does-it"), ReplayVerdict::Unprompted);
        // Seen again, but only while background threads ran: neither pinned nor cleared.
        assert_eq!(judge("/etc/beside-busy-threads"), ReplayVerdict::Unsure);
        assert_eq!(judge("/etc/never"), ReplayVerdict::Absent);
    }
}
