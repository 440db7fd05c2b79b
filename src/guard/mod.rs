//! `hintcheck guard`: the enforcing proxy. The host starts guard where it would have started
//! the server; guard runs the server in the sandbox for as long as the host keeps it, passes
//! every message through unchanged ([`proxy`]), and answers every write, delete, rename and
//! network attempt of the server under the hints of the calls in flight ([`arbiter`],
//! [`policy`]): a read-only tool cannot write outside the server's own state, a
//! non-destructive one cannot delete, truncate or rename over, a closed-world one cannot
//! reach past loopback. What is refused is logged ([`journal`]).

pub mod arbiter;
pub mod forward;
pub mod http;
pub mod journal;
pub mod policy;
pub mod proxy;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::sandbox::perform::Place;
use crate::sandbox::policy::{Limits, SandboxConfig, SandboxLevel};
use crate::sandbox::process::{LaunchSpec, ServerProcess, resolve_program};

pub use proxy::OnViolation;

/// How long the server gets to exit by itself once the host closed its end.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What `hintcheck guard` was asked.
#[derive(Debug, Clone)]
pub struct GuardOptions {
    /// The server's command line.
    pub command: Vec<String>,
    /// Real directories the server may write (`--allow-write`).
    pub allow_write: Vec<PathBuf>,
    /// Directories it may read besides its own package and the system (`--allow-read`).
    pub allow_read: Vec<PathBuf>,
    /// Its own state directory (`--state-dir`); `None`: a private one kept between runs.
    pub state_dir: Option<PathBuf>,
    /// Where refusals are logged as JSON lines.
    pub log: Option<PathBuf>,
    /// What a call whose window had refusals is answered with.
    pub on_violation: OnViolation,
    /// Calls of different policies may be in flight together.
    pub no_serialize: bool,
    /// Additive writes in the shared directories before the first call.
    pub allow_startup_writes: bool,
    /// A verify JSON report whose supported hints fill the undeclared ones (`--policy`).
    pub policy: Option<PathBuf>,
    /// Names answered with an address of guard's choosing that leads to `ADDR` on the host
    /// (`--resolve NAME=ADDR`).
    pub resolve: Vec<String>,
    /// The sandbox binary (tests), as `--sandbox-exe`.
    pub exe: Option<PathBuf>,
    /// How the host speaks to guard.
    pub transport: Transport,
}

/// How the host speaks to guard.
#[derive(Debug, Clone)]
pub enum Transport {
    /// Lines on guard's stdin and stdout: the host started guard.
    Stdio,
    /// Streamable HTTP on a loopback address.
    Http(http::HttpOptions),
}

/// Errors of `hintcheck guard`.
#[derive(Debug, thiserror::Error)]
pub enum GuardError {
    /// No server command after `--`.
    #[error(
        "guard needs the server's command after --, as in: hintcheck guard -- npx -y @modelcontextprotocol/server-filesystem /srv/data"
    )]
    NoCommand,
    /// A directory option names something that is not a directory.
    #[error("{option} {}: {detail}", path.display())]
    Directory {
        /// The option.
        option: &'static str,
        /// The path given.
        path: PathBuf,
        /// Why it cannot be used.
        detail: String,
    },
    /// The state directory could not be made.
    #[error("cannot create the state directory {}", path.display())]
    StateDir {
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The log could not be opened.
    #[error("cannot open the log {}", path.display())]
    Log {
        /// Where.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The `--policy` report cannot be read.
    #[error("--policy {}: {detail}", path.display())]
    Policy {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// A `--resolve` item cannot be read.
    #[error("{0}")]
    Resolve(String),
    /// The server could not be started in the sandbox.
    #[error("cannot start the server in the sandbox")]
    Launch(#[from] crate::sandbox::LaunchError),
    /// The HTTP endpoint cannot listen where asked.
    #[error("--listen {listen}: {detail}")]
    Listen {
        /// The address asked for.
        listen: String,
        /// Why.
        detail: String,
    },
    /// The async runtime could not be built.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
}

/// A directory option's value made absolute and free of symlinks (the sandbox reports paths
/// that way), checked to be a directory.
fn directory(option: &'static str, path: &Path) -> Result<PathBuf, GuardError> {
    let fail = |detail: String| GuardError::Directory {
        option,
        path: path.to_path_buf(),
        detail,
    };
    let real = std::fs::canonicalize(path).map_err(|e| fail(e.to_string()))?;
    if !real.is_dir() {
        return Err(fail("not a directory".into()));
    }
    if real == Path::new("/") {
        return Err(fail("the whole file system cannot be shared".into()));
    }
    Ok(real)
}

/// The private state directory of `command`, kept between runs:
/// `$XDG_STATE_HOME/hintcheck/guard/<program>-<hash of the command line>`.
pub fn default_state_dir(command: &[String]) -> PathBuf {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| std::env::temp_dir().join("hintcheck-state"));
    let program: String = Path::new(command.first().map(String::as_str).unwrap_or("server"))
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("server")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(40)
        .collect();
    let digest = sha2::Sha256::digest(command.join("\0").as_bytes());
    let short: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    base.join("hintcheck/guard")
        .join(format!("{program}-{short}"))
}

use sha2::Digest as _;

/// Everything guard resolved before starting the server.
struct Prepared {
    state_dir: PathBuf,
    allow_write: Vec<PathBuf>,
    allow_read: Vec<PathBuf>,
    journal: Arc<journal::Journal>,
    resolved: Arc<forward::Resolved>,
    learned: policy::Learned,
}

fn prepare(o: &GuardOptions) -> Result<Prepared, GuardError> {
    if o.command.is_empty() {
        return Err(GuardError::NoCommand);
    }
    let state = o
        .state_dir
        .clone()
        .unwrap_or_else(|| default_state_dir(&o.command));
    std::fs::create_dir_all(&state).map_err(|source| GuardError::StateDir {
        path: state.clone(),
        source,
    })?;
    use std::os::unix::fs::PermissionsExt;
    if o.state_dir.is_none() {
        let _ = std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700));
    }
    let state_dir = directory("--state-dir", &state)?;
    let allow_write = o
        .allow_write
        .iter()
        .map(|d| directory("--allow-write", d))
        .collect::<Result<Vec<_>, _>>()?;
    for w in &allow_write {
        if w.starts_with(&state_dir) || state_dir.starts_with(w) {
            return Err(GuardError::Directory {
                option: "--state-dir",
                path: state_dir.clone(),
                detail: format!(
                    "it must lie apart from --allow-write {} (what is in the state directory is the server's own at any time)",
                    w.display()
                ),
            });
        }
    }
    let allow_read = o
        .allow_read
        .iter()
        .map(|d| directory("--allow-read", d))
        .collect::<Result<Vec<_>, _>>()?;
    let journal = journal::Journal::open(o.log.as_deref()).map_err(|source| GuardError::Log {
        path: o.log.clone().unwrap_or_default(),
        source,
    })?;
    let resolved = forward::Resolved::parse(&o.resolve).map_err(GuardError::Resolve)?;
    let learned = match &o.policy {
        None => policy::Learned::default(),
        Some(path) => {
            let fail = |detail: String| GuardError::Policy {
                path: path.clone(),
                detail,
            };
            let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
            policy::Learned::from_report(&text).map_err(fail)?
        }
    };
    Ok(Prepared {
        state_dir,
        allow_write,
        allow_read,
        journal: Arc::new(journal),
        resolved: Arc::new(resolved),
        learned,
    })
}

/// Variables of guard's own environment that describe the host and its user, not the server:
/// replaced inside (HOME and the XDG directories point into the state directory).
const REPLACED: [&str; 9] = [
    "HOME",
    "TMPDIR",
    "TMP",
    "TEMP",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
];

/// The server's environment: guard's own (the host sets the server's variables, API keys and
/// PATH among them, on guard), with HOME, the XDG directories and the temporary directory
/// moved into the state directory and the sandbox's /tmp (a PATH of the system and the
/// server's runtime when guard has none).
fn server_env(state: &Path, program: &Path) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !REPLACED.contains(&k.as_str()))
        .collect();
    let home = state.display().to_string();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push((
            "PATH".into(),
            crate::sandbox::policy::clean_path(program, None),
        ));
    }
    env.extend([
        ("HOME".to_string(), home.clone()),
        ("TMPDIR".into(), "/tmp".into()),
        ("XDG_CONFIG_HOME".into(), format!("{home}/.config")),
        ("XDG_CACHE_HOME".into(), format!("{home}/.cache")),
        ("XDG_DATA_HOME".into(), format!("{home}/.local/share")),
        ("XDG_STATE_HOME".into(), format!("{home}/.local/state")),
    ]);
    env
}

/// What the sandbox is told: the server's package and the system readable, `--allow-read`
/// shown read-only, `--allow-write` and the state directory writable at their own paths (no
/// overlay: what an allowed write changes is the real directory), the rest of the users'
/// homes hidden, a network namespace whose every address is its loopback (the forwarder is the
/// way out), every write and network attempt reported to the arbiter.
fn sandbox_config(
    o: &GuardOptions,
    p: &Prepared,
    program: &Path,
    scratch_root: &Path,
) -> SandboxConfig {
    let hidden = crate::sandbox::policy::private_directories();
    // The command and the directories of PATH (where the server finds the programs it runs):
    // shown and readable where they lie in hidden places.
    let path_var = std::env::var("PATH").unwrap_or_default();
    let words: Vec<&str> = o
        .command
        .iter()
        .map(String::as_str)
        .chain(path_var.split(':').filter(|d| d.starts_with('/')))
        .collect();
    let mut shown = p.allow_read.clone();
    shown.extend(p.allow_write.iter().cloned());
    shown.push(p.state_dir.clone());
    let exposed = crate::sandbox::policy::exposed_paths(
        &hidden,
        words.iter().copied(),
        program,
        &p.allow_read,
    );
    let mut explicit = shown.clone();
    explicit.push(scratch_root.to_path_buf());
    let readable = crate::sandbox::policy::readable_paths(
        &hidden,
        words.iter().copied(),
        program,
        &exposed,
        &explicit,
    );
    let mut writable = p.allow_write.clone();
    writable.push(p.state_dir.clone());
    let cwd = std::env::current_dir()
        .ok()
        .filter(|d| {
            shown.iter().any(|s| d.starts_with(s)) || !hidden.iter().any(|h| d.starts_with(h))
        })
        .unwrap_or_else(|| p.state_dir.clone());
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let identity = crate::sandbox::policy::sandbox_identity(None, &passwd, &hidden);
    let uid = rustix::process::getuid().as_raw();
    SandboxConfig {
        level: SandboxLevel::Required,
        program: program.to_path_buf(),
        args: o.command[1..].to_vec(),
        env: server_env(&p.state_dir, program),
        cwd,
        scratch_root: scratch_root.to_path_buf(),
        writable,
        overlays: Vec::new(),
        shown_temporary: crate::sandbox::policy::named_temporary_entries(
            words.iter().copied(),
            scratch_root,
        ),
        hidden,
        exposed,
        run_as: None,
        run_user: identity.added_user,
        home_inside: None,
        home: p.state_dir.clone(),
        harness_pid: std::process::id() as i32,
        resolv_conf: "nameserver 192.0.2.53\noptions timeout:1 attempts:1\n".into(),
        ca_bundle: None,
        limits: Limits {
            // A server lives as long as its host keeps it: no CPU budget.
            cpu_seconds: libc::RLIM_INFINITY,
            ..Limits::for_uid(uid)
        },
        // Every address routed to loopback, the DNS stub's socket handed over, listeners
        // opened on demand through the connector: the forwarder is the only way out.
        network_observer: true,
        observe_ports: Vec::new(),
        packet_observer: false,
        connector: true,
        notify: true,
        cgroup: None,
        cgroup_enforces: Vec::new(),
        hostname: crate::sandbox::sandbox_hostname().to_string(),
        host_network: false,
        readable: Some(readable),
        single_exec: false,
        simulate_failure: crate::sandbox::policy::simulated_failure(),
    }
}

/// Runs guard: the server in the sandbox, the proxy on guard's stdin and stdout (or, with
/// `--transport http`, on a local HTTP endpoint: [`http`]), until the host closes its end or
/// the server ends. Returns the exit code (the server's own over stdio).
pub fn run(o: &GuardOptions) -> Result<i32, GuardError> {
    let prepared = prepare(o)?;
    let listen = match &o.transport {
        Transport::Stdio => None,
        Transport::Http(h) => Some(http::bind(h)?),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(GuardError::Runtime)?;
    crate::interrupt::install();
    let code = runtime.block_on(async {
        match listen {
            None => serve_stdio(o, prepared).await,
            Some(listener) => http::serve(o, Arc::new(prepared), listener).await,
        }
    });
    // The read of guard's stdin may still be blocked in its thread: not waited for.
    runtime.shutdown_background();
    code
}

/// Servers started by this guard (names each one's processes apart).
static LAUNCHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A server started in the sandbox: its pipes, the window its calls open, and what ends it.
struct Launched {
    pipes: crate::sandbox::process::ServerPipes,
    window: Arc<Mutex<policy::Window>>,
    ending: Ending,
}

/// The server's process, scratch and forwarder, for its end.
struct Ending {
    process: ServerProcess,
    scratch: crate::sandbox::scratch::Scratch,
    forwarder: Option<forward::Forwarding>,
}

impl Ending {
    /// Ends the server (it has `EXIT_GRACE` to exit by itself once its stdin is closed) and
    /// removes its scratch; returns its exit code.
    async fn end(mut self) -> i32 {
        let exit = self.process.shutdown(EXIT_GRACE).await;
        // Its network's threads and sockets end with it.
        drop(self.forwarder.take());
        // A server can leave a large tree in its scratch: removed off the runtime's thread
        // (over HTTP, other sessions' servers are served meanwhile).
        let mut scratch = self.scratch;
        let _ = tokio::task::spawn_blocking(move || scratch.remove()).await;
        exit.code.unwrap_or(match exit.signal {
            Some(s) => 128 + s,
            None => 0,
        })
    }
}

/// Starts the server in the sandbox under a window of its own; `session` names its HTTP
/// session in the log.
async fn launch(
    o: &GuardOptions,
    p: &Prepared,
    session: Option<String>,
) -> Result<Launched, GuardError> {
    let path_var = std::env::var("PATH").ok();
    let program = resolve_program(&o.command[0], path_var.as_deref())?;
    let mut scratch = crate::sandbox::scratch::Scratch::create()?;
    scratch
        .prepare_sandbox(None, 0)
        .map_err(|source| crate::sandbox::LaunchError::Scratch { source })?;
    let scratch_root = scratch
        .root()
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let config = sandbox_config(o, p, &program, &scratch_root);
    let places = arbiter::Places {
        state: Place::on_host(&p.state_dir).map_err(|e| GuardError::StateDir {
            path: p.state_dir.clone(),
            source: e,
        })?,
        writable: p
            .allow_write
            .iter()
            .map(|d| {
                Place::on_host(d).map_err(|e| GuardError::Directory {
                    option: "--allow-write",
                    path: d.clone(),
                    detail: e.to_string(),
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let mut window = policy::Window::new(o.no_serialize, p.learned.clone());
    if o.allow_startup_writes {
        window.allow_startup_writes();
    }
    let window = Arc::new(Mutex::new(window));
    let refusals = journal::Refusals::new(window.clone(), p.journal.clone(), session);
    let arbiter = arbiter::GuardArbiter::new(refusals.clone(), places);
    let spec = LaunchSpec {
        program: o.command[0].clone(),
        args: o.command[1..].to_vec(),
        env: config.env.clone(),
        cwd: config.cwd.clone(),
        // Unique per server: the sweep at its end takes only its own stragglers.
        run_id: format!(
            "guard-{}-{}",
            std::process::id(),
            LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ),
    };
    let (forwarding, resolved) = (refusals, p.resolved.clone());
    let started = ServerProcess::spawn_sandboxed(
        &spec,
        &config,
        o.exe.as_deref(),
        move |sockets| forward::start(sockets, forwarding, resolved),
        Some(Arc::new(arbiter)),
    )
    .await;
    let started = match started {
        Ok(s) => s,
        Err(e) => {
            let _ = scratch.remove();
            return Err(e.into());
        }
    };
    Ok(Launched {
        pipes: started.pipes,
        window,
        ending: Ending {
            process: started.process,
            scratch,
            forwarder: started.network,
        },
    })
}

/// The server's stderr, copied to guard's.
fn copy_stderr(
    mut stderr: impl tokio::io::AsyncRead + Unpin + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut stderr, &mut tokio::io::stderr()).await;
    })
}

async fn serve_stdio(o: &GuardOptions, p: Prepared) -> Result<i32, GuardError> {
    let Launched {
        pipes,
        window,
        ending,
    } = launch(o, &p, None).await?;
    let to_server: proxy::ToServer = Arc::new(tokio::sync::Mutex::new(Some(Box::new(pipes.stdin))));
    let log = copy_stderr(pipes.stderr);
    let mut inbound = tokio::spawn(proxy::host_to_server(
        tokio::io::stdin(),
        to_server.clone(),
        window.clone(),
    ));
    let outbound = proxy::server_to_host(
        pipes.stdout,
        proxy::Stdout(tokio::io::stdout()),
        to_server.clone(),
        window.clone(),
        o.on_violation,
    );
    let mut stop = crate::interrupt::watch();
    tokio::pin!(outbound);
    tokio::select! {
        // The server's stdout ended: it is gone (or closed it).
        () = &mut outbound => {}
        // The host closed its end: the server's stdin is closed; it may finish what it
        // writes within the grace period.
        _ = &mut inbound => {
            let _ = tokio::time::timeout(EXIT_GRACE, &mut outbound).await;
        }
        _ = stop.wait_for(|s| *s) => {}
    }
    // A server that stopped reading its stdin may hold a write (and the pipe's lock) for
    // ever: that write is abandoned, and the shutdown below ends the server regardless.
    inbound.abort();
    let _ = tokio::time::timeout(Duration::from_millis(200), async {
        *to_server.lock().await = None;
    })
    .await;
    let code = ending.end().await;
    let _ = tokio::time::timeout(Duration::from_millis(200), log).await;
    Ok(code)
}
