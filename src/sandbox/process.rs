//! Starting the server and ending it with everything it spawned. The server gets its own
//! process group and a clean environment; teardown closes stdin, waits, then signals the
//! group, and finally sweeps for stragglers that left the group (marked by an environment
//! variable, or orphaned to hintcheck when it is a child subreaper). Dropping a
//! [`ServerProcess`] kills the group, so a panic or an interrupted run leaves nothing behind.
//! [`ServerProcess::spawn_sandboxed`] starts the server through the sandbox init (hintcheck re-executed as `/sbin/init`)
//! instead: the same binary, opened once and executed through its descriptor.

#![allow(unsafe_code)]

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use rustix::process::{Pid, Signal, WaitOptions};
use serde::Serialize;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

use super::LaunchError;
use super::control::{self, ControlRecord, StepFailure};
use super::policy::{CONFIG_ENV, Enforcement, SandboxConfig};

/// How long the sandbox may take to report that the server started.
const SANDBOX_START_TIMEOUT: Duration = Duration::from_secs(15);

/// Opens an executable as an `O_PATH` descriptor numbered above the standard ones and the
/// control socket's slot (fd 3), which the child's `dup2` would otherwise overwrite.
pub(crate) fn open_exe(path: &Path) -> std::io::Result<OwnedFd> {
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    Ok(rustix::io::fcntl_dupfd_cloexec(&fd, 10)?)
}

/// The hintcheck binary, opened once: every sandbox executes exactly this file, even if the
/// path is replaced while hintcheck runs. A library user whose own executable is not hintcheck
/// (a test binary) names the hintcheck binary in `RunConfig::sandbox_exe` instead.
pub fn self_exe() -> Result<&'static OwnedFd, LaunchError> {
    static EXE: OnceLock<Result<OwnedFd, String>> = OnceLock::new();
    EXE.get_or_init(|| open_exe(Path::new("/proc/self/exe")).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| {
            LaunchError::Sandbox(StepFailure {
                step: "self-exe".into(),
                errno: None,
                message: format!("cannot open /proc/self/exe: {e}"),
            })
        })
}

/// The hintcheck binary a sandbox's init runs as: this very executable (opened once), or the
/// one a library user names (a test binary is not hintcheck).
pub(crate) enum InitExe {
    /// [`self_exe`].
    Shared(&'static OwnedFd),
    /// A binary named by the caller.
    Opened(OwnedFd),
}

/// What starting the sandbox's init takes, whoever waits for it: the executable, both ends
/// of the control channel, and the command with what every init gets (its argv\[0\], only
/// the configuration in its environment, a process group of its own, the control channel on
/// [`super::init::CONTROL_FD`]). The caller adds its standard streams and spawns it.
pub(crate) struct InitLaunch {
    /// Kept open until the command has been spawned (the command executes it by descriptor).
    pub exe: InitExe,
    /// hintcheck's end of the control channel.
    pub host_end: OwnedFd,
    /// The init's end: to be dropped once the command has been spawned.
    pub init_end: OwnedFd,
    /// The command.
    pub command: std::process::Command,
}

impl InitLaunch {
    /// The init's command for `config`, run from `exe_override` or this executable.
    pub(crate) fn prepare(
        config: &SandboxConfig,
        exe_override: Option<&Path>,
    ) -> Result<InitLaunch, LaunchError> {
        use std::os::unix::process::CommandExt;
        let exe = InitExe::open(exe_override)?;
        let (host_end, init_end) = control::pair().map_err(|e| step_error("socketpair", e))?;
        let json = serde_json::to_string(config)
            .map_err(|e| step_error("config", std::io::Error::other(e)))?;
        let mut command = std::process::Command::new(exe.path());
        // PID 1 of the sandbox is a fork of this process: its command line is all the server
        // can read of it, and it must look like any container's init.
        command
            .arg0(super::init::INIT_ARGV0)
            .env_clear()
            .env(CONFIG_ENV, json)
            .process_group(0);
        let init_fd = init_end.as_raw_fd();
        // SAFETY: the hook makes only async-signal-safe system calls (see onto_control_fd).
        unsafe {
            command.pre_exec(control::onto_control_fd(init_fd));
        }
        Ok(InitLaunch {
            exe,
            host_end,
            init_end,
            command,
        })
    }

    /// The error of a spawn that failed.
    pub(crate) fn spawn_failed(source: std::io::Error) -> LaunchError {
        LaunchError::Spawn {
            program: "hintcheck (sandbox init)".into(),
            source,
        }
    }
}

impl InitExe {
    /// This executable, or the binary at `path`.
    pub(crate) fn open(path: Option<&Path>) -> Result<InitExe, LaunchError> {
        match path {
            None => self_exe().map(InitExe::Shared),
            Some(path) => open_exe(path)
                .map(InitExe::Opened)
                .map_err(|e| LaunchError::NotFound {
                    program: path.display().to_string(),
                    detail: format!("the sandbox executable cannot be opened: {e}"),
                }),
        }
    }

    /// The path that executes it (through its descriptor).
    pub(crate) fn path(&self) -> String {
        let fd = match self {
            InitExe::Shared(fd) => fd.as_raw_fd(),
            InitExe::Opened(fd) => fd.as_raw_fd(),
        };
        format!("/proc/self/fd/{fd}")
    }
}

/// A step of starting a sandbox that failed in the harness, as a launch error.
pub(crate) fn step_error(step: &str, e: std::io::Error) -> LaunchError {
    LaunchError::Sandbox(StepFailure {
        step: step.into(),
        errno: e.raw_os_error(),
        message: e.to_string(),
    })
}

/// Environment variable carried by every process of a run, to find stragglers.
pub const RUN_MARKER: &str = "HINTCHECK_RUN_ID";

/// What to start.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The program (a path, or a name searched in `PATH`).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The value of [`RUN_MARKER`].
    pub run_id: String,
}

/// How the server ended.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct ExitSummary {
    /// Exit code, when it exited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// How we got it to stop: `exited`, `stdin-closed`, `terminated`, `killed`.
    pub how: String,
    /// Processes of the run still alive after the server ended, killed by the sweep.
    pub stragglers_killed: Vec<String>,
}

/// A running server.
pub struct ServerProcess {
    child: Child,
    pid: Option<Pid>,
    run_id: String,
    /// Kept out of other runs' sweeps while it lives.
    _registered: Registered,
    /// [`ServerProcess::shutdown`] ended it and swept what it left: nothing is left to do
    /// when it is dropped.
    shut_down: bool,
}

/// The sockets of the sandbox's network namespace that the harness serves (every address
/// inside is routed to `lo`): the DNS stub's, a listener per observed port, and the packet
/// socket on `lo` when it could be opened. The sandbox hands them over and knows nothing of
/// what serves them.
pub struct NetworkSockets {
    /// The DNS stub's UDP socket (port 53 on `lo`).
    pub dns: std::net::UdpSocket,
    /// A TCP listener per observed port.
    pub listeners: Vec<(u16, std::net::TcpListener)>,
    /// The packet socket on `lo`.
    pub packets: Option<OwnedFd>,
    /// Listeners opened later, on demand, for ports a server connects to (see
    /// [`super::notify::OnDemand`]), with their ports.
    pub more_listeners: std::sync::mpsc::Receiver<(u16, std::net::TcpListener)>,
}

/// A server started in the sandbox, with what the sandbox handed over; `N` is what the
/// caller made of the network namespace's sockets (see [`ServerProcess::spawn_sandboxed`]).
pub struct Sandboxed<N> {
    /// The process (the sandbox's init, outside).
    pub process: ServerProcess,
    /// The server's pipes.
    pub pipes: ServerPipes,
    /// What was enforced.
    pub enforcement: Enforcement,
    /// The seccomp recorder's queue, when attempts are reported.
    pub attempts: Option<super::notify::AttemptQueue>,
    /// What serves the network namespace's sockets, when they were handed over.
    pub network: Option<N>,
    /// Connections into the sandbox's network namespace, when asked for.
    pub connector: Option<super::connector::Connector>,
}

/// The server's three pipes.
pub struct ServerPipes {
    /// Its stdin.
    pub stdin: ChildStdin,
    /// Its stdout.
    pub stdout: ChildStdout,
    /// Its stderr.
    pub stderr: ChildStderr,
}

/// Finds `program` like a shell would, with the host's `PATH`.
pub fn resolve_program(program: &str, path_var: Option<&str>) -> Result<PathBuf, LaunchError> {
    let is_exec = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = std::path::absolute(program).unwrap_or_else(|_| PathBuf::from(program));
        return if is_exec(&p) {
            Ok(p)
        } else {
            Err(LaunchError::NotFound {
                program: program.into(),
                detail: if p.exists() {
                    "it is not an executable file".into()
                } else {
                    "no such file".into()
                },
            })
        };
    }
    let path_var = path_var.unwrap_or("/usr/local/bin:/usr/bin:/bin");
    for dir in path_var.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(program);
        if is_exec(&candidate) {
            return Ok(candidate);
        }
    }
    Err(LaunchError::NotFound {
        program: program.into(),
        detail: format!("not found in PATH ({path_var})"),
    })
}

impl ServerProcess {
    /// Starts the server.
    pub fn spawn(spec: &LaunchSpec) -> Result<(ServerProcess, ServerPipes), LaunchError> {
        let host_path = spec
            .env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_str());
        let program = resolve_program(&spec.program, host_path)?;
        let mut cmd = Command::new(&program);
        cmd.args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env(RUN_MARKER, &spec.run_id)
            .current_dir(&spec.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // SAFETY: between fork and exec only close_range, which is async-signal-safe: no
        // descriptor inherited from whatever started hintcheck reaches the server.
        unsafe {
            cmd.pre_exec(|| {
                libc::syscall(
                    libc::SYS_close_range,
                    3u32,
                    u32::MAX,
                    libc::CLOSE_RANGE_CLOEXEC,
                );
                Ok(())
            });
        }
        let (child, registered) =
            Registered::spawn(&mut cmd).map_err(|source| LaunchError::Spawn {
                program: program.display().to_string(),
                source,
            })?;
        Self::adopt(
            child,
            registered,
            &spec.run_id,
            &program.display().to_string(),
        )
    }

    /// Wraps a spawned child and takes its three pipes.
    fn adopt(
        mut child: Child,
        registered: Registered,
        run_id: &str,
        program: &str,
    ) -> Result<(ServerProcess, ServerPipes), LaunchError> {
        let pid = child.id().and_then(|p| Pid::from_raw(p as i32));
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(LaunchError::Spawn {
                program: program.into(),
                source: std::io::Error::other("the child's pipes were not created"),
            });
        };
        Ok((
            ServerProcess {
                child,
                pid,
                run_id: run_id.into(),
                _registered: registered,
                shut_down: false,
            },
            ServerPipes {
                stdin,
                stdout,
                stderr,
            },
        ))
    }

    /// Starts the server inside the sandbox: the sandbox init with the control
    /// socket on fd 3. Returns once the server was executed, with what was enforced.
    pub async fn spawn_sandboxed<N: Send + 'static>(
        spec: &LaunchSpec,
        config: &SandboxConfig,
        exe_override: Option<&Path>,
        serve_network: impl FnOnce(NetworkSockets) -> N + Send + 'static,
        arbiter: Option<std::sync::Arc<dyn super::notify::Arbiter>>,
    ) -> Result<Sandboxed<N>, LaunchError> {
        let InitLaunch {
            exe: _exe,
            host_end,
            init_end,
            command,
        } = InitLaunch::prepare(config, exe_override)?;
        let mut cmd = Command::from(command);
        cmd.env(RUN_MARKER, &spec.run_id)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // Other runs' sweeps leave it alone from its start (it is ours, not an orphan).
        let (mut child, registered) =
            Registered::spawn(&mut cmd).map_err(InitLaunch::spawn_failed)?;
        drop(init_end);
        let mut serve_network = Some(serve_network);
        let mut arbiter = arbiter;
        let lock_places = lock_places(config);
        // Listeners opened on demand go from the seccomp recorder to what serves the network.
        let (more_listeners_in, more_listeners) = std::sync::mpsc::channel();
        let mut more_listeners = Some(more_listeners);
        let mut observed_ports = Vec::new();
        let reader = tokio::task::spawn_blocking(move || {
            let mut enforced = None;
            let mut network = None;
            let mut connector = None;
            loop {
                match control::recv(host_end.as_fd()) {
                    Ok(Some((
                        ControlRecord::Network {
                            ports,
                            packet_error,
                        },
                        fds,
                    ))) => {
                        // Serve DNS at once: the server may look names up while starting.
                        let mut fds = fds.into_iter();
                        observed_ports = ports.clone();
                        if let (Some(dns), Some(more_listeners)) =
                            (fds.next(), more_listeners.take())
                        {
                            let listeners = ports
                                .iter()
                                .zip(fds.by_ref())
                                .map(|(p, fd)| (*p, std::net::TcpListener::from(fd)))
                                .collect();
                            let packets = match packet_error {
                                None => fds.next(),
                                Some(_) => None,
                            };
                            network = serve_network.take().map(|serve| {
                                serve(NetworkSockets {
                                    dns: std::net::UdpSocket::from(dns),
                                    listeners,
                                    packets,
                                    more_listeners,
                                })
                            });
                        }
                    }
                    Ok(Some((ControlRecord::Connector, mut fds))) => {
                        connector = fds.pop().map(super::connector::Connector::new);
                    }
                    Ok(Some((ControlRecord::Enforced(e), mut fds))) => {
                        // Answer notifications at once: the server's own execve is one.
                        // With a connector and an observer, listeners are opened on demand.
                        let on_demand = match (&connector, &network) {
                            (Some(c), Some(_)) => Some(super::notify::OnDemand::new(
                                super::connector::Connector::clone(c),
                                more_listeners_in.clone(),
                                observed_ports.clone(),
                            )),
                            _ => None,
                        };
                        let queue = fds.pop().map(|l| {
                            super::notify::start_with(
                                l,
                                lock_places.clone(),
                                on_demand,
                                arbiter.take(),
                            )
                        });
                        enforced = Some((e, queue, network.take(), connector.take()));
                    }
                    Ok(Some((ControlRecord::Failed(f), _))) => return Err(f),
                    Ok(None) => return Ok(enforced),
                    Err(e) => {
                        return Err(StepFailure {
                            step: "control".into(),
                            errno: e.raw_os_error(),
                            message: format!("reading the control channel: {e}"),
                        });
                    }
                }
            }
        });
        let outcome = match tokio::time::timeout(SANDBOX_START_TIMEOUT, reader).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => Err(StepFailure {
                step: "control".into(),
                errno: None,
                message: e.to_string(),
            }),
            Err(_) => Err(StepFailure {
                step: "start".into(),
                errno: None,
                message: format!(
                    "the sandbox did not start the server within {SANDBOX_START_TIMEOUT:?}"
                ),
            }),
        };
        let (enforcement, attempts, network, connector) = match outcome {
            Ok(Some(e)) => e,
            Ok(None) => {
                let status = tokio::time::timeout(Duration::from_secs(2), child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok);
                return Err(LaunchError::Sandbox(StepFailure {
                    step: "init".into(),
                    errno: None,
                    message: format!(
                        "the sandbox init ended before starting the server ({status:?})"
                    ),
                }));
            }
            Err(f) => {
                let _ = child.start_kill();
                let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
                return Err(LaunchError::Sandbox(f));
            }
        };
        let (process, pipes) =
            Self::adopt(child, registered, &spec.run_id, "hintcheck (sandbox init)")?;
        Ok(Sandboxed {
            process,
            pipes,
            enforcement,
            attempts,
            network,
            connector,
        })
    }

    /// The server's pid (in sandbox mode, the pid of the sandbox's init, outside).
    pub fn pid(&self) -> Option<u32> {
        self.pid.map(|p| p.as_raw_nonzero().get() as u32)
    }

    /// Whether the server has exited (without waiting).
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// The server's exit status, if it exits within `limit`.
    async fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Ends the server: waits `grace` for it to exit by itself (stdin should be closed first),
    /// then SIGTERM to its group, then SIGKILL, then sweeps stragglers.
    pub async fn shutdown(&mut self, grace: Duration) -> ExitSummary {
        let mut how = "stdin-closed";
        let mut status = self.exit_within(grace).await;
        if status.is_none() {
            how = "terminated";
            self.signal_group(Signal::TERM);
            status = self.exit_within(Duration::from_secs(1)).await;
        }
        if status.is_none() {
            how = "killed";
            self.signal_group(Signal::KILL);
            status = self.exit_within(Duration::from_secs(2)).await;
        }
        // Whatever is left in the group has outlived the server.
        self.signal_group(Signal::KILL);
        let stragglers_killed = sweep(&self.run_id, self.pid);
        self.shut_down = true;
        use std::os::unix::process::ExitStatusExt;
        ExitSummary {
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            how: how.into(),
            stragglers_killed,
        }
    }

    /// How the server ended, if it already did (used when it died mid-run).
    pub fn exit_status_now(&mut self) -> Option<ExitSummary> {
        use std::os::unix::process::ExitStatusExt;
        match self.child.try_wait() {
            Ok(Some(s)) => Some(ExitSummary {
                code: s.code(),
                signal: s.signal(),
                how: "exited".into(),
                stragglers_killed: Vec::new(),
            }),
            _ => None,
        }
    }

    /// Kills the server's process group at once (an interrupt: no grace); the exit is
    /// collected later by [`ServerProcess::shutdown`].
    pub fn kill_now(&self) {
        self.signal_group(Signal::KILL);
    }

    fn signal_group(&self, sig: Signal) {
        if let Some(pid) = self.pid {
            // ESRCH (the group is gone) is the normal case at the end.
            let _ = rustix::process::kill_process_group(pid, sig);
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // After a shutdown, a second sweep of every process would find nothing (4 ms).
        if !self.shut_down {
            self.signal_group(Signal::KILL);
            let _ = sweep(&self.run_id, self.pid);
        }
    }
}

/// A server (or sandbox init) in [`live_servers`] from its spawn until it is dropped.
struct Registered(Option<i32>);

impl Registered {
    /// Spawns `cmd`, registered as it starts (see [`Registered::spawned`]).
    fn spawn(cmd: &mut Command) -> std::io::Result<(Child, Registered)> {
        Self::spawned(|| cmd.spawn(), Child::id)
    }

    /// A child started by `spawn` (whose pid `pid_of` reads), registered as it starts: under
    /// the lock a sweep asks before each kill, so that no other run's sweep finds it
    /// unregistered.
    fn spawned<C>(
        spawn: impl FnOnce() -> std::io::Result<C>,
        pid_of: impl FnOnce(&C) -> Option<u32>,
    ) -> std::io::Result<(C, Registered)> {
        let mut live = live_servers();
        let child = spawn()?;
        let pid = pid_of(&child).and_then(|p| i32::try_from(p).ok());
        live.extend(pid);
        Ok((child, Registered(pid)))
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            live_servers().remove(&pid);
        }
    }
}

/// Runs a helper command of hintcheck's own (git, for a seed) to its end and returns its
/// output, among the processes the runs' sweeps leave alone meanwhile: a run's sweep takes
/// every child of hintcheck that is not one of them for an orphan, and a replay made side
/// by side with another would otherwise lose its `git` to the other's sweep. Registered as
/// it is spawned (under the same lock a sweep asks before each kill). Unlike
/// `Command::output`, the standard streams are the caller's to set: unset, they are
/// inherited and the output is empty.
pub fn helper_output(cmd: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    let (child, _registered) = Registered::spawned(|| cmd.spawn(), |c| Some(c.id()))?;
    child.wait_with_output()
}

/// The servers (or sandbox inits) of every run of this process that are not yet dropped,
/// and the helpers of [`helper_output`] while they run: runs side by side (replays,
/// isolated runs) share hintcheck as parent, and one run's sweep for orphans must not take
/// another run's server or helper for one.
fn live_servers() -> std::sync::MutexGuard<'static, std::collections::BTreeSet<i32>> {
    static LIVE: std::sync::Mutex<std::collections::BTreeSet<i32>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A process's parent, process group and session, from `/proc/PID/stat`.
struct ProcStat {
    ppid: i32,
    pgrp: i32,
    session: i32,
    /// It has ended and waits to be reaped.
    zombie: bool,
}

fn proc_stat(pid: i32) -> Option<ProcStat> {
    // As the process tree reads it: a process that names itself in bytes that are not UTF-8
    // is still read, and swept.
    let stat = super::tree::read_proc(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    let zombie = fields.next()? == "Z";
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(ProcStat {
        ppid,
        pgrp,
        session,
        zombie,
    })
}

fn has_marker(pid: i32, run_id: &str) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let needle = format!("{RUN_MARKER}={run_id}");
    env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes())
}

fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// Kills every process that belongs to the run: it carries the run marker, sits in the
/// server's process group or session, or was orphaned to us (when we are a subreaper).
/// Repeats until a pass finds nothing, so a process forking during the sweep is caught too.
fn sweep(run_id: &str, server: Option<Pid>) -> Vec<String> {
    let me = std::process::id() as i32;
    let server = server.map(|p| p.as_raw_nonzero().get());
    let subreaper = rustix::process::child_subreaper().ok().flatten().is_some();
    let mut killed = Vec::new();
    for _ in 0..50 {
        let Some(pids) = all_pids() else {
            break;
        };
        let mut found = false;
        for pid in pids {
            if pid == me || registered_elsewhere(pid, server) {
                continue;
            }
            let Some(ProcStat {
                ppid,
                pgrp,
                session,
                zombie,
            }) = proc_stat(pid)
            else {
                continue;
            };
            // A main thread that ended shows its process as a zombie while its other
            // threads may still run (and fork): that process has not ended.
            let ended = zombie && !has_other_threads(pid);
            let ours = has_marker(pid, run_id)
                || server.is_some_and(|s| pgrp == s || session == s)
                || (subreaper && ppid == me && Some(pid) != server);
            if !ours {
                continue;
            }
            let Some(p) = Pid::from_raw(pid) else {
                continue;
            };
            let line = cmdline(pid);
            if rustix::process::kill_process(p, Signal::KILL).is_ok() {
                // A process that already ended needs no further pass (it is reaped below
                // when it is ours to reap).
                found |= !ended;
                if !line.is_empty() && killed.len() < 50 {
                    killed.push(line);
                }
            }
            if ppid == me {
                let _ = rustix::process::waitpid(Some(p), WaitOptions::NOHANG);
            }
        }
        if !found {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Reap orphans that died and were handed to us.
    if subreaper {
        reap_orphans(me, server);
    }
    killed
}

/// Whether the process `pid` has a thread besides its main one.
fn has_other_threads(pid: i32) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| tasks.count() > 1)
}

/// Whether `pid` is another run's server or a helper of hintcheck's, registered now (a
/// helper is registered as it is spawned, under the lock this takes: one spawned while a
/// sweep runs is found registered).
fn registered_elsewhere(pid: i32, server: Option<i32>) -> bool {
    Some(pid) != server && live_servers().contains(&pid)
}

/// The pids /proc lists now, or `None` when it cannot be read.
fn all_pids() -> Option<impl Iterator<Item = i32>> {
    let dir = std::fs::read_dir("/proc").ok()?;
    Some(dir.flatten().filter_map(|entry| {
        entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
    }))
}

fn reap_orphans(me: i32, server: Option<i32>) {
    for pid in all_pids().into_iter().flatten() {
        if Some(pid) == server || registered_elsewhere(pid, server) {
            continue;
        }
        if proc_stat(pid).is_some_and(|stat| stat.ppid == me) {
            if let Some(p) = Pid::from_raw(pid) {
                let _ = rustix::process::waitpid(Some(p), WaitOptions::NOHANG);
            }
        }
    }
}

/// Where the server of `config` may take file locks: its scratch directories (also where its
/// HOME is shown), overlays and the sandbox's own tmpfs mounts, but for the /tmp entries shown
/// read-only.
fn lock_places(config: &SandboxConfig) -> super::notify::LockPlaces {
    let mut own: Vec<PathBuf> = config
        .writable
        .iter()
        .chain(&config.overlays)
        .cloned()
        .collect();
    own.extend(config.home_inside.clone());
    own.extend(super::policy::TEMPORARY_PLACES.map(PathBuf::from));
    super::notify::LockPlaces {
        own,
        shared: config.shown_temporary.clone(),
    }
}

/// Makes hintcheck the reaper of orphans of its children, so that a daemon that double-forks
/// out of the server's process group is still found. Called once by the binary at startup.
pub fn become_subreaper() -> bool {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid())).is_ok()
}

/// Makes a helper command (an installer) die with hintcheck: it gets a process group of its
/// own (so that an interrupt can end all it started, and a terminal's Ctrl-C reaches
/// hintcheck alone) and SIGKILL when hintcheck's thread that started it ends, even by SIGKILL.
pub fn die_with_hintcheck(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    // SAFETY: between fork and exec only prctl(PR_SET_PDEATHSIG), which is
    // async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_resolved_with_clear_errors() {
        assert!(resolve_program("sh", Some("/usr/bin:/bin")).is_ok());
        let err =
            resolve_program("no-such-program-hintcheck", Some("/usr/bin")).expect_err("missing");
        assert!(
            err.to_string().contains("no-such-program-hintcheck"),
            "{err}"
        );
        assert!(resolve_program("./definitely/not/here", None).is_err());
    }

    #[test]
    fn a_process_named_in_bytes_that_are_not_utf8_is_read_for_the_sweep() {
        let Some(mut named) = crate::sandbox::tree::tests::child_named_in_other_bytes() else {
            return;
        };
        let stat = proc_stat(named.id() as i32);
        let _ = named.kill();
        let _ = named.wait();
        let stat = stat.expect("its stat is read");
        assert_eq!(stat.ppid, std::process::id() as i32);
        assert!(!stat.zombie);
    }

    #[test]
    fn a_helper_is_left_to_its_caller_while_it_runs() {
        // A unique argument finds the helper among this process's children (the shell
        // stays, not execing `sleep`, with a command after it).
        let mark = format!("mark-{}-{}", std::process::id(), line!());
        let arg = format!("sleep 0.4; true {mark}");
        let helper = std::thread::spawn({
            let arg = arg.clone();
            move || {
                helper_output(
                    std::process::Command::new("sh")
                        .args(["-c", &arg])
                        .stdout(std::process::Stdio::null()),
                )
            }
        });
        let me = std::process::id() as i32;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let pid = loop {
            let found = all_pids().into_iter().flatten().find(|p| {
                proc_stat(*p).is_some_and(|s| s.ppid == me) && cmdline(*p).contains(&mark)
            });
            if let Some(pid) = found {
                break pid;
            }
            assert!(std::time::Instant::now() < deadline, "the helper never ran");
            std::thread::sleep(Duration::from_millis(5));
        };
        // Another run's sweep, as it decides on each process, leaves it alone.
        assert!(registered_elsewhere(pid, None));
        assert!(!registered_elsewhere(pid, Some(pid)));
        let out = helper.join().expect("join").expect("the helper ran");
        assert!(out.status.success());
        assert!(
            !registered_elsewhere(pid, None),
            "unregistered once it ended"
        );
    }

    #[tokio::test]
    async fn shutdown_kills_the_whole_group_including_a_lingering_child() {
        let dir = tempfile::tempdir().expect("tempdir");
        let spec = LaunchSpec {
            program: "sh".into(),
            args: vec!["-c".into(), "sleep 300 & sleep 300".into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: dir.path().to_path_buf(),
            run_id: format!("test-{}", std::process::id()),
        };
        let (mut p, pipes) = ServerProcess::spawn(&spec).expect("spawn");
        drop(pipes);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let summary = p.shutdown(Duration::from_millis(100)).await;
        assert_eq!(summary.how, "terminated");
        tokio::time::sleep(Duration::from_millis(50)).await;
        let left: Vec<i32> = std::fs::read_dir("/proc")
            .expect("proc")
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .filter(|pid| has_marker(*pid, &spec.run_id) && proc_stat(*pid).is_some())
            .collect();
        assert!(left.is_empty(), "left running: {left:?}");
    }
}
