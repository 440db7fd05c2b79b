//! Starting and stopping the server under test: where it runs (placement), its environment, the launch into the sandbox with the handshake, and what is collected from each instance.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::sync::watch;

use super::collect::{RunEvent, RunLog};
use crate::config::{RootsOffer, RunConfig};
use crate::mcp::client::{ClientOptions, HandshakeError, LeftUnanswered, McpClient, ProtocolNote};
use crate::observe::activity::ran_between;
use crate::observe::net::NetHandle;
use crate::observe::{Recorder, ServerStart};
use crate::rpc::session::{Session, SessionOptions};
use crate::sandbox::cgroup::RunCgroup;
use crate::sandbox::connector::Connector;
use crate::sandbox::control::StepFailure;
use crate::sandbox::notify::AttemptQueue;
use crate::sandbox::policy::{Limits, named_temporary_entries};
use crate::sandbox::process::{
    ExitSummary, LaunchSpec, NetworkSockets, ServerPipes, ServerProcess, resolve_program,
};
use crate::sandbox::scratch::Scratch;
use crate::sandbox::tree::ProcessTree;
use crate::sandbox::watchdog::{LimitFlag, WatchLimits, Watchdog};
use crate::sandbox::{Enforcement, LaunchError, SandboxConfig, SandboxLevel};
use crate::text::error_chain;

/// The resolver the sandbox's resolv.conf names: a documentation address, unreachable from
/// the empty network namespace, so a lookup fails fast and its attempt is seen as DNS.
pub(super) const SANDBOX_RESOLVER: &str = "192.0.2.53";

/// How long a server gets to exit by itself after its stdin is closed.
pub(super) const EXIT_GRACE: Duration = Duration::from_secs(2);

/// A started and greeted server.
pub(super) struct Live {
    pub(super) process: ServerProcess,
    pub(super) client: McpClient,
    /// The run's cgroup (root mode); dropping it kills what is left and removes it.
    pub(super) cgroup: Option<RunCgroup>,
    /// The resource watchdog of this server; dropping it stops it.
    pub(super) _watchdog: Option<Watchdog>,
    /// The HTTP bridge, when the server speaks HTTP.
    pub(super) http: Option<HttpLink>,
    /// What the looks at its process tree have seen, to prove it quiet.
    pub(super) quiet: crate::observe::quiet::Quiescence,
}

/// What a run keeps of the HTTP bridge of a server.
pub(super) struct HttpLink {
    notes: crate::rpc::http::TransportNotes,
    done: tokio::task::JoinHandle<()>,
    /// Set when the server spoke only the older HTTP+SSE transport.
    legacy: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// The run's context, the same for every server start of the run (the first and restarts
/// after a crash): its configuration, how it launches its server (placement, launch spec,
/// port, TLS authority) and what bounds it (the stop signal, the deadline, a watchdog's
/// limit).
pub(super) struct RunContext<'a> {
    /// Set by a server's watchdog when it ended the server for a limit: the run ends.
    pub(super) limit_hit: LimitFlag,
    /// What the sandbox hides and shows, and who the server is in it.
    pub(super) placement: Placement,
    /// The scratch HOME on the host.
    pub(super) home: PathBuf,
    pub(super) scratch_root: PathBuf,
    pub(super) writable: Vec<PathBuf>,
    pub(super) run_as: Option<(u32, u32)>,
    pub(super) config: &'a RunConfig,
    pub(super) spec: LaunchSpec,
    pub(super) started: Instant,
    pub(super) workspace: String,
    /// The port `{port}` named, when the server speaks HTTP.
    pub(super) http_port: Option<u16>,
    /// The run's certificate authority and the bundle that trusts it, when the sandbox's
    /// network observer answers HTTPS.
    pub(super) tls: Option<(std::sync::Arc<crate::observe::tls::Authority>, PathBuf)>,
    /// Turns true at an interrupt (SIGINT, SIGTERM).
    pub(super) stop: watch::Receiver<bool>,
    /// Whether hintcheck reaps the server's orphans (it is a child subreaper).
    pub(super) subreaper: bool,
    /// When the run's `--timeout` passes.
    pub(super) deadline: Instant,
    /// The run's canaries, when they were planted.
    pub(super) secrets: Option<std::sync::Arc<crate::observe::secrets::SecretWatch>>,
}

impl RunContext<'_> {
    /// Why the run must end now, if it must: an interrupt, a watchdog's limit, the timeout.
    pub(super) fn must_stop(&self) -> Option<String> {
        if *self.stop.borrow() {
            return Some("interrupted by a signal".into());
        }
        if let Some(why) = limit_reason(self) {
            return Some(why);
        }
        (Instant::now() >= self.deadline).then(|| {
            format!(
                "the run timeout ({}) was reached",
                crate::text::format_duration(self.config.waits.run_timeout)
            )
        })
    }

    /// Resolves, with the reason, once an interrupt arrives or the run's deadline passes.
    pub(super) async fn interruption(&self) -> String {
        let mut stop = self.stop.clone();
        let signalled = async {
            if stop.wait_for(|s| *s).await.is_err() {
                // No one can interrupt any more: only the deadline is left.
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = signalled => {}
            () = tokio::time::sleep_until(self.deadline.into()) => {}
        }
        self.must_stop()
            .unwrap_or_else(|| "interrupted by a signal".into())
    }
}

/// What the sandbox hides (users' private places), what it shows of them (what the server runs
/// on), which /tmp entries stay visible, and who the server is in it (account, HOME). The same
/// for every server start of a run.
#[derive(Debug, Clone, Default)]
pub(super) struct Placement {
    /// Entries of /tmp, /var/tmp and /dev/shm the server must see: its program and
    /// interpreters, its files on the command line and in its environment, `--expose` paths
    /// and the lower layers of overlays.
    pub(super) shown_temporary: Vec<PathBuf>,
    pub(super) hidden: Vec<PathBuf>,
    pub(super) exposed: Vec<PathBuf>,
    /// Where the server may read and execute (see `SandboxConfig::readable`).
    pub(super) readable: Vec<PathBuf>,
    /// The server's PATH: the system's and its runtime's directories (not the host user's
    /// PATH, which tells where and by whom it runs); `None` when `--env PATH=…` sets one.
    pub(super) path: Option<String>,
    pub(super) identity: crate::sandbox::policy::SandboxIdentity,
}

impl Placement {
    /// For a run of `command` with the configured environment and `run_as` (root mode).
    pub(super) fn new(
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
            .sandbox
            .overlays
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        let words: Vec<&str> = command
            .iter()
            .map(String::as_str)
            .chain(config.server.env.iter().map(|(_, v)| v.as_str()))
            .chain(overlays.iter().map(String::as_str))
            .collect();
        // The program as found on PATH, and what the user asked to see, count as named
        // wherever they lie (not the program's #! interpreters: the package chose those, and
        // in a scan it is not trusted).
        let running: Vec<String> = std::iter::once(program.clone())
            .chain(config.sandbox.expose.iter().cloned())
            .map(|p| p.display().to_string())
            .collect();
        let shown_temporary = named_temporary_entries(
            words
                .iter()
                .copied()
                .chain(running.iter().map(String::as_str)),
            scratch_root,
        );
        let exposed = crate::sandbox::policy::exposed_paths(
            &hidden,
            words.iter().copied(),
            &program,
            &config.sandbox.expose,
        );
        let mut explicit = config.sandbox.expose.clone();
        explicit.push(scratch_root.to_path_buf());
        let readable = crate::sandbox::policy::readable_paths(
            &hidden,
            words.iter().copied(),
            &program,
            &exposed,
            &explicit,
        );
        let path = (!config.server.env.iter().any(|(k, _)| k == "PATH"))
            .then(|| crate::sandbox::policy::clean_path(&program, path_var.as_deref()));
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let mut identity = crate::sandbox::policy::sandbox_identity(run_as, &passwd, &hidden);
        // A HOME that is a hidden place itself (/root) replaces it whole: only where nothing
        // else must be shown there.
        if let Some(home) = &identity.home {
            let crowded = hidden.contains(home)
                && exposed
                    .iter()
                    .chain(&config.sandbox.overlays)
                    .any(|p| p.starts_with(home));
            if crowded {
                identity.home = None;
            }
        }
        Placement {
            shown_temporary,
            hidden,
            exposed,
            readable,
            path,
            identity,
        }
    }

    /// The server's environment in the sandbox: HOME (and what lies under it: the XDG
    /// directories) where the account's home directory shows it, USER and LOGNAME the account.
    pub(super) fn server_env(
        &self,
        env: &[(String, String)],
        home: &Path,
    ) -> Vec<(String, String)> {
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
        if let Some(path) = &self.path {
            out.retain(|(k, _)| k != "PATH");
            out.insert(0, ("PATH".into(), path.clone()));
        }
        if let Some(user) = &self.identity.user {
            out.retain(|(k, _)| k != "USER" && k != "LOGNAME");
            out.push(("USER".into(), user.clone()));
            out.push(("LOGNAME".into(), user.clone()));
        }
        out
    }
}

/// The environment the server gets: a clean one with the scratch directories.
pub(super) fn server_env(scratch: &Scratch, extra: &[(String, String)]) -> Vec<(String, String)> {
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
pub(super) struct StartFailure {
    pub(super) message: String,
    pub(super) session: Option<(Session, Vec<ProtocolNote>)>,
    pub(super) exit: Option<ExitSummary>,
    /// Set when the sandbox itself failed (nothing was started).
    pub(super) sandbox: Option<StepFailure>,
    /// What the sandbox enforced, when it started the server and the handshake failed.
    pub(super) enforcement: Option<Enforcement>,
    /// Set when an interrupt or the run's timeout ended the start (the reason).
    pub(super) interrupted: Option<String>,
    /// Whether a server process was started at all.
    pub(super) started: bool,
}

impl StartFailure {
    /// What the failed instance said and how it exited, for the collector (taken out of
    /// the failure).
    pub(super) fn instance_ended(&mut self) -> RunEvent {
        let (session, notes) = match self.session.take() {
            Some((session, notes)) => (Some(Box::new(session)), notes),
            None => (None, Vec::new()),
        };
        RunEvent::InstanceEnded {
            session,
            notes,
            exit: self.exit.take(),
            legacy_http: false,
        }
    }

    pub(super) fn plain(message: String) -> Self {
        Self {
            message,
            session: None,
            exit: None,
            sandbox: None,
            enforcement: None,
            interrupted: None,
            started: false,
        }
    }
}

/// A spawned server process and what its sandbox handed out.
struct Spawned {
    process: ServerProcess,
    pipes: ServerPipes,
    /// What the sandbox enforced (none without a sandbox).
    enforcement: Option<Enforcement>,
    cgroup: Option<RunCgroup>,
    attempts: Option<AttemptQueue>,
    network: Option<NetHandle>,
    connector: Option<Connector>,
}

/// Starts the server (inside the sandbox unless it is off) and performs the handshake.
pub(super) async fn start_server(
    ctx: &RunContext<'_>,
    sandbox: Option<SandboxLevel>,
    recorder: &mut Recorder,
) -> Result<(Live, Option<Enforcement>), StartFailure> {
    let spawned_at = std::time::Instant::now();
    let Spawned {
        mut process,
        pipes,
        enforcement,
        cgroup,
        attempts,
        network,
        connector,
    } = spawn(ctx, sandbox).await?;
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
                    .sandbox
                    .memory_limit
                    .saturating_add(ctx.config.sandbox.memory_limit / 4),
                disk_bytes: ctx.config.sandbox.disk_limit,
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
        writes_confined: enforcement.as_ref().is_some_and(|e| e.landlock != "none"),
    });
    // Only where a proof of quiet is possible: a stdio server in a network namespace of the
    // sandbox's (in hintcheck's own, the network part of a proof never holds).
    let own_network = enforcement
        .as_ref()
        .is_some_and(|e| e.namespaces.iter().any(|n| n == "net"));
    let left_unanswered = if ctx.http_port.is_none() && own_network {
        process
            .pid()
            .and_then(|pid| probe_left_unanswered(pid, &pipes, spawned_at))
    } else {
        None
    };
    let (wire, http) = wire(ctx, pipes, connector);
    let (greeting, interrupted) = greet(ctx, wire, &mut process, left_unanswered).await;
    match greeting {
        Greeting::Greeted(client) => Ok((
            Live {
                process,
                client: *client,
                cgroup,
                _watchdog: watchdog,
                http,
                quiet: crate::observe::quiet::Quiescence::new(spawned_at).serving_on(ctx.http_port),
            },
            enforcement,
        )),
        Greeting::Stuck => Err(StartFailure {
            started: true,
            interrupted,
            ..StartFailure::plain("the greeting was interrupted".into())
        }),
        Greeting::Failed(failure) => {
            Err(greeting_failed(failure, process, enforcement, interrupted).await)
        }
    }
}

/// Spawns the server's process: plainly, or in a sandbox of `level`.
async fn spawn(
    ctx: &RunContext<'_>,
    sandbox: Option<SandboxLevel>,
) -> Result<Spawned, StartFailure> {
    let Some(level) = sandbox else {
        let (process, pipes) =
            ServerProcess::spawn(&ctx.spec).map_err(|e| StartFailure::plain(error_chain(&e)))?;
        return Ok(Spawned {
            process,
            pipes,
            enforcement: None,
            cgroup: None,
            attempts: None,
            network: None,
            connector: None,
        });
    };
    let path_var = ctx
        .spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    let program = resolve_program(&ctx.spec.program, path_var)
        .map_err(|e| StartFailure::plain(error_chain(&e)))?;
    let limits = Limits {
        data_bytes: ctx.config.sandbox.memory_limit,
        ..Limits::for_uid(
            ctx.run_as
                .map(|r| r.0)
                .unwrap_or_else(|| rustix::process::getuid().as_raw()),
        )
    };
    // As root, a cgroup of its own where the host offers cgroup v2 (best effort).
    let mut cgroup = None;
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
    let sandbox_config = sandbox_config(ctx, level, program, cgroup.as_ref(), limits);
    // The network observer serves the namespace's sockets at once (the server may look names
    // up while it starts), answering HTTPS with the run's authority.
    let authority = ctx.tls.as_ref().map(|(a, _)| a.clone());
    let metadata = ctx
        .secrets
        .as_ref()
        .and_then(|w| crate::observe::metadata::CloudMetadata::of(w.canaries()));
    let observe_network = move |sockets: NetworkSockets| {
        crate::observe::net::start(
            sockets.dns,
            sockets.listeners,
            Some(sockets.more_listeners),
            sockets.packets,
            authority,
            metadata,
        )
    };
    match ServerProcess::spawn_sandboxed(
        &ctx.spec,
        &sandbox_config,
        ctx.config.sandbox.exe.as_deref(),
        observe_network,
        None,
    )
    .await
    {
        Ok(started) => Ok(Spawned {
            process: started.process,
            pipes: started.pipes,
            enforcement: Some(started.enforcement),
            cgroup,
            attempts: started.attempts,
            network: started.network,
            connector: started.connector,
        }),
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
            Err(StartFailure::plain(message))
        }
        Err(LaunchError::Sandbox(f)) => {
            let message = format!("sandbox step {} failed: {}", f.step, f.message);
            Err(StartFailure {
                sandbox: Some(f),
                ..StartFailure::plain(message)
            })
        }
        Err(e) => Err(StartFailure::plain(error_chain(&e))),
    }
}

/// What the sandbox of a server start is told: what the placement shows and hides, the
/// observers it sets up, the server's program, environment and limits.
fn sandbox_config(
    ctx: &RunContext<'_>,
    level: SandboxLevel,
    program: PathBuf,
    cgroup: Option<&RunCgroup>,
    limits: Limits,
) -> SandboxConfig {
    SandboxConfig {
        cgroup: cgroup.map(|c| c.path().to_path_buf()),
        cgroup_enforces: cgroup.map(|c| c.enforces.clone()).unwrap_or_default(),
        level,
        shown_temporary: ctx.placement.shown_temporary.clone(),
        hidden: ctx.placement.hidden.clone(),
        exposed: ctx.placement.exposed.clone(),
        overlays: ctx.config.sandbox.overlays.clone(),
        notify: true,
        network_observer: true,
        observe_ports: ctx.config.sandbox.observe_ports.clone(),
        packet_observer: true,
        // HTTP servers are reached through it; the network observer opens listeners on
        // demand through it (the ports a server connects to).
        connector: true,
        program,
        args: ctx.spec.args.clone(),
        // No run marker: the pid namespace ends every process of the sandbox, and a variable
        // naming hintcheck would tell the server it is watched. Its user and HOME are those
        // of an ordinary account.
        env: ctx.placement.server_env(&ctx.spec.env, &ctx.home),
        cwd: ctx.spec.cwd.clone(),
        scratch_root: ctx.scratch_root.clone(),
        writable: ctx.writable.clone(),
        run_as: ctx.run_as,
        run_user: ctx.placement.identity.added_user.clone(),
        home_inside: ctx.placement.identity.home.clone(),
        home: ctx.home.clone(),
        harness_pid: std::process::id() as i32,
        resolv_conf: format!("nameserver {SANDBOX_RESOLVER}\noptions timeout:1 attempts:1\n"),
        ca_bundle: ctx.tls.as_ref().map(|(_, bundle)| bundle.clone()),
        simulate_failure: crate::sandbox::policy::simulated_failure(),
        hostname: crate::sandbox::sandbox_hostname().to_string(),
        host_network: false,
        readable: Some(ctx.placement.readable.clone()),
        single_exec: false,
        limits,
    }
}

type WireWrite = Box<dyn tokio::io::AsyncWrite + Send + Unpin>;
type WireRead = Box<dyn tokio::io::AsyncRead + Send + Unpin>;

/// Where the session's lines go and come from, and the server's log.
struct Wire {
    to_server: WireWrite,
    from_server: WireRead,
    log: WireRead,
}

/// The session's wire: the server's stdio, or over HTTP the bridge (the server's stdio is
/// then its log).
fn wire(
    ctx: &RunContext<'_>,
    pipes: ServerPipes,
    connector: Option<Connector>,
) -> (Wire, Option<HttpLink>) {
    let config = ctx.config;
    match (&config.server.transport, ctx.http_port) {
        (crate::config::Transport::Http { path, headers, .. }, Some(port)) => {
            let bridge = crate::rpc::http::start(
                crate::rpc::http::HttpTarget {
                    port,
                    path: path.clone(),
                    headers: headers.clone(),
                    max_message_bytes: config.server.max_line_bytes,
                    listen_timeout: config.waits.handshake_timeout,
                },
                http_connect(connector),
                Some(Box::new(pipes.stdin)),
            );
            (
                Wire {
                    to_server: bridge.to_server,
                    from_server: bridge.from_server,
                    log: crate::rpc::http::merged_log(pipes.stdout, pipes.stderr),
                },
                Some(HttpLink {
                    notes: bridge.notes,
                    done: bridge.done,
                    legacy: bridge.legacy,
                }),
            )
        }
        _ => (
            Wire {
                to_server: Box::new(pipes.stdin),
                from_server: Box::new(pipes.stdout),
                log: Box::new(pipes.stderr),
            },
            None,
        ),
    }
}

/// A greeting that failed: the session, the client's error (none when an interrupt ended
/// it) and the protocol notes.
type GreetingFailure = (Session, Option<HandshakeError>, Vec<ProtocolNote>);

/// How a greeting ended.
enum Greeting {
    /// The server answered it.
    Greeted(Box<McpClient>),
    /// It failed, or an interrupt ended it.
    Failed(GreetingFailure),
    /// An interrupt came and the greeting did not end even after the server was ended.
    Stuck,
}

/// Greets the server over `wire`. The greeting ends early at an interrupt or the run's
/// timeout: the server is ended, which closes its stdout and fails the pending request at
/// once. Returns how it ended, and the interruption's reason, if one came.
async fn greet(
    ctx: &RunContext<'_>,
    wire: Wire,
    process: &mut ServerProcess,
    probe_left_unanswered: Option<LeftUnanswered>,
) -> (Greeting, Option<String>) {
    let config = ctx.config;
    let roots = (config.server.roots == RootsOffer::Workspace)
        .then(|| vec![json!({"uri": format!("file://{}", ctx.workspace), "name": "workspace"})]);
    let session = Session::start(
        ctx.started,
        wire.to_server,
        wire.from_server,
        Some(wire.log),
        SessionOptions {
            max_line_bytes: config.server.max_line_bytes,
            roots,
            ..Default::default()
        },
    );
    let options = ClientOptions {
        era: config.server.era,
        discover_timeout: config.waits.discover_timeout,
        handshake_timeout: config.waits.handshake_timeout,
        offer_roots: config.server.roots == RootsOffer::Workspace,
        client_name: config.server.client_info.0.clone(),
        client_version: config.server.client_info.1.clone(),
        probe_left_unanswered,
        ..Default::default()
    };
    let watch = session.watch();
    let connect = McpClient::connect(session, options);
    tokio::pin!(connect);
    let began = Instant::now();
    let mut tick = tokio::time::interval(GREETING_PROGRESS_EVERY);
    loop {
        tokio::select! {
            c = &mut connect => return match c {
                Ok(client) => (Greeting::Greeted(Box::new(client)), None),
                Err((session, e, notes)) => (Greeting::Failed((session, Some(e), notes)), None),
            },
            why = ctx.interruption() => {
                process.kill_now();
                let greeting = match tokio::time::timeout(Duration::from_secs(2), &mut connect).await {
                    Ok(Ok(client)) => {
                        let (session, notes) = client.into_session();
                        Greeting::Failed((session, None, notes))
                    }
                    Ok(Err((session, e, notes))) => Greeting::Failed((session, Some(e), notes)),
                    Err(_) => Greeting::Stuck,
                };
                return (greeting, Some(why));
            }
            _ = tick.tick() => {
                if let Some(words) = greeting_progress(began.elapsed(), &watch.stats()) {
                    config.progress.emit(crate::progress::ProgressEvent::Stage(&words));
                }
            }
        }
    }
}

/// The check that ends the `server/discover` probe of a stdio server early: at two looks in a
/// row, the server's stdin holds nothing unread (it took the probe in) and its stdout nothing
/// hintcheck has not read (no answer on its way), and the second look proves its process tree
/// quiet for the probe's time left (see [`crate::observe::quiet`]: every thread waits for
/// input or past that time, no timer is due and no connection is open in the sandbox's
/// network namespace). An answer written before the first look has had the time between the
/// looks to reach the session. `None` where the pipes cannot be watched.
fn probe_left_unanswered(
    pid: u32,
    pipes: &ServerPipes,
    spawned_at: Instant,
) -> Option<LeftUnanswered> {
    use std::os::fd::AsFd;
    let stdin = pipes.stdin.as_fd().try_clone_to_owned().ok()?;
    let stdout = pipes.stdout.as_fd().try_clone_to_owned().ok()?;
    let tree = ProcessTree::new(pid);
    // The tree's looks, and whether the pipes were empty at the previous one.
    let state = std::sync::Mutex::new((crate::observe::quiet::Quiescence::new(spawned_at), false));
    Some(LeftUnanswered(std::sync::Arc::new(move |left| {
        let unread = |fd: &std::os::fd::OwnedFd| rustix::io::ioctl_fionread(fd).ok();
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        let (quiet, emptied_before) = &mut *state;
        if unread(&stdin) != Some(0) || unread(&stdout) != Some(0) {
            *emptied_before = false;
            return false;
        }
        let proven = quiet.look(&tree, crate::observe::quiet::Horizon::every_thread(left));
        std::mem::replace(emptied_before, true) && proven
    })))
}

/// How often a greeting that takes its time says how it goes.
const GREETING_PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// What a greeting that is taking its time has seen so far (nothing in its first seconds):
/// how long it has waited, and the lines on the server's stdout that were not JSON-RPC.
fn greeting_progress(
    waited: Duration,
    stats: &crate::rpc::transcript::TranscriptStats,
) -> Option<String> {
    if waited < Duration::from_secs(2) && stats.garbage == 0 {
        return None;
    }
    let mut words = format!("greeting the server: {} s", waited.as_secs());
    if stats.garbage > 0 {
        words.push_str(&format!(
            ", {} line(s) on its stdout that are not JSON-RPC",
            stats.garbage
        ));
    } else {
        words.push_str(", no answer yet");
    }
    Some(words)
}

/// Why a started server could not be greeted: the client's error or the interruption, and
/// how the server ended when it ended by itself. The server is stopped and its last words
/// drained.
async fn greeting_failed(
    (mut session, err, notes): GreetingFailure,
    mut process: ServerProcess,
    enforcement: Option<Enforcement>,
    interrupted: Option<String>,
) -> StartFailure {
    session.close_stdin().await;
    let exit = process.shutdown(Duration::from_millis(500)).await;
    session.drain(Duration::from_millis(500)).await;
    let mut message = match (&interrupted, &err) {
        (None, Some(e)) => error_chain(e),
        _ => format!(
            "{} while the server was being greeted",
            interrupted.as_deref().unwrap_or("interrupted")
        ),
    };
    // How the server ended says something only when it ended by itself.
    if interrupted.is_none() && exit.how == "stdin-closed" {
        if let Some(code) = exit.code {
            message.push_str(&format!(" (the server exited with code {code})"));
        } else if let Some(sig) = exit.signal {
            message.push_str(&format!(" (the server was ended by signal {sig})"));
        }
    }
    StartFailure {
        message,
        session: Some((session, notes)),
        exit: Some(exit),
        sandbox: None,
        enforcement,
        interrupted,
        started: true,
    }
}

/// How a server is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// A stop in the middle of the run (a restart after a hung or broken call, a hang-up):
    /// what the server does while it exits still counts.
    Midway,
    /// The run's last stop, after its last window and late wait.
    AtEnd,
}

/// Stops a server: its stdin is closed and it gets [`EXIT_GRACE`] to exit, or, when the run
/// must end now (an interrupt, the timeout) or it is a replay's last stop and nobody asks
/// what the server does at its end (`waits.stop_at_once`), it is killed at once.
pub(super) async fn stop_server(
    live: Live,
    ctx: &RunContext<'_>,
    log: &mut RunLog,
    recorder: &mut Recorder,
    stop: Stop,
) {
    let Live {
        mut process,
        client,
        cgroup,
        _watchdog,
        mut http,
        quiet,
    } = live;
    log.emit(RunEvent::Windows {
        proven: quiet.proven,
        by_idle_period: quiet.by_idle_period,
    });
    let (mut session, mut notes) = client.into_session();
    let grace =
        if ctx.must_stop().is_some() || (stop == Stop::AtEnd && ctx.config.waits.stop_at_once) {
            process.kill_now();
            Duration::ZERO
        } else {
            session.close_stdin().await;
            match http.as_mut() {
                // An HTTP server does not end with its stdin: once the bridge ended the HTTP
                // session, it is asked to stop.
                Some(link) => {
                    let _ = tokio::time::timeout(EXIT_GRACE, &mut link.done).await;
                    Duration::ZERO
                }
                None => EXIT_GRACE,
            }
        };
    let mut legacy_http = false;
    if let Some(link) = http {
        notes.extend(http_notes(&link.notes));
        legacy_http = link.legacy.load(std::sync::atomic::Ordering::SeqCst);
    }
    let exit = process.shutdown(grace).await;
    session.drain(Duration::from_millis(500)).await;
    log.emit(RunEvent::InstanceEnded {
        session: Some(Box::new(session)),
        notes,
        exit: Some(exit),
        legacy_http,
    });
    drop(cgroup);
    // The sandbox's private directories are gone with it.
    recorder.server_started(&ServerStart::default());
}

/// The transport's notes as protocol notes.
fn http_notes(notes: &crate::rpc::http::TransportNotes) -> Vec<ProtocolNote> {
    notes
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|n| ProtocolNote {
            context: "http".into(),
            message: n.clone(),
        })
        .collect()
}

/// How the HTTP bridge reaches the server's port: through the sandbox's connector (inside its
/// network namespace), or on the host's loopback without a sandbox.
fn http_connect(
    connector: Option<crate::sandbox::connector::Connector>,
) -> crate::rpc::http::Connect {
    let connector = connector.map(std::sync::Arc::new);
    std::sync::Arc::new(move |port: u16| {
        let connector = connector.clone();
        Box::pin(async move {
            let stream = match connector {
                Some(c) => tokio::task::spawn_blocking(move || c.connect(port))
                    .await
                    .map_err(std::io::Error::other)??,
                // Without a sandbox, on the host's loopback: 127.0.0.1, else ::1 (a server that
                // binds `localhost` may take either).
                None => {
                    return match tokio::net::TcpStream::connect(("127.0.0.1", port)).await {
                        Ok(s) => Ok(s),
                        Err(e) => tokio::net::TcpStream::connect(("::1", port))
                            .await
                            .map_err(|_| e),
                    };
                }
            };
            stream.set_nonblocking(true)?;
            tokio::net::TcpStream::from_std(stream)
        })
    })
}

/// Why a watchdog ended the run's server, if one did.
pub(super) fn limit_reason(ctx: &RunContext<'_>) -> Option<String> {
    ctx.limit_hit
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// Threads (other than the server's main thread) that use CPU while no call is in flight,
/// watched for a short while after the tool listing.
pub(super) async fn probe_background(tree: Option<ProcessTree>, skip: usize) -> Vec<u32> {
    let Some(tree) = tree else { return Vec::new() };
    let first = tree.runtimes(skip);
    tokio::time::sleep(super::host::BACKGROUND_PROBE).await;
    ran_between(&first, &tree.runtimes(skip))
}
