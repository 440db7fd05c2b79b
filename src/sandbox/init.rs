//! The sandbox side: the sandbox init (hintcheck re-executed as `/sbin/init`), started by the harness (so it starts
//! single-threaded, before any async runtime) with the control socket on fd 3 and the config
//! in an environment variable. It creates the namespaces, forks our own PID 1 (which mounts a
//! fresh /proc and tmpfs over /run, /tmp, /var/tmp and /dev/shm, and reaps), and PID 1 forks
//! the server child, which applies rlimits, Landlock, the uid switch (as root), drops every
//! capability, sets `no_new_privs`, installs the seccomp filter, reports what was enforced
//! and executes the server. Every return value is checked; a failed step is reported with its
//! errno and, in `required` mode, nothing is started.

#![allow(unsafe_code)]

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::control::{self, ControlRecord, StepFailure};
use super::policy::{CONFIG_ENV, Enforcement, SandboxConfig, SandboxLevel, TEMPORARY_PLACES};

/// The file descriptor the harness puts the control socket on.
pub const CONTROL_FD: RawFd = 3;

/// The init's whole command line (`/proc/1/cmdline` in the sandbox, which the server can read):
/// that of an ordinary container's init. The binary knows it is the sandbox's init by this and
/// by the config in its environment ([`is_sandbox_init`]).
pub const INIT_ARGV0: &str = "/sbin/init";

/// Whether this process was started as the sandbox's init.
pub fn is_sandbox_init() -> bool {
    let mut args = std::env::args_os();
    args.next().is_some_and(|a| a == INIT_ARGV0)
        && args.next().is_none()
        && std::env::var_os(CONFIG_ENV).is_some()
}

struct Init {
    /// The control socket; parents drop their copy after forking, so that the server's
    /// `execve` closes the last one and the harness sees the channel end.
    ctl: Option<OwnedFd>,
    config: SandboxConfig,
    enforcement: Enforcement,
    /// The init's end of the connector, served by the outer init once PID 1 is forked.
    connector: Option<OwnedFd>,
}

type Step = Result<(), (Option<i32>, String)>;

fn os_err(context: &str) -> (Option<i32>, String) {
    let e = std::io::Error::last_os_error();
    (e.raw_os_error(), format!("{context}: {e}"))
}

fn io_err(context: &str, e: std::io::Error) -> (Option<i32>, String) {
    (e.raw_os_error(), format!("{context}: {e}"))
}

fn cstr(p: impl AsRef<OsStr>) -> CString {
    // Paths and arguments come from our own config; an interior NUL is replaced, not fatal.
    CString::new(p.as_ref().as_bytes().to_vec()).unwrap_or_else(|e| {
        let mut v = e.into_vec();
        v.retain(|&b| b != 0);
        CString::new(v).unwrap_or_default()
    })
}

/// `mount(2)`.
fn mount(
    source: Option<&str>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> Step {
    let src = source.map(cstr);
    let tgt = cstr(target);
    let fs = fstype.map(cstr);
    let dat = data.map(cstr);
    // SAFETY: every pointer is either null or points to a NUL-terminated string that lives
    // until the call returns.
    let r = unsafe {
        libc::mount(
            src.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            tgt.as_ptr(),
            fs.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            dat.as_ref()
                .map_or(std::ptr::null(), |s| s.as_ptr() as *const libc::c_void),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(os_err(&format!("mount {}", target.display())))
    }
}

/// Entry point of the sandbox init; returns the process exit code.
pub fn main() -> i32 {
    // Whatever started hintcheck may have leaked descriptors to it (a host file, a connected
    // socket, a directory): none of them may reach the server. Closed before anything else.
    let inherited = close_descriptors_from(CONTROL_FD as u32 + 1);
    // The name in /proc/1/status and /proc/1/stat: the executed path was /proc/self/fd/N.
    // SAFETY: PR_SET_NAME with a NUL-terminated string of at most 16 bytes.
    unsafe {
        libc::prctl(
            libc::PR_SET_NAME,
            c"init".as_ptr() as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    // SAFETY: the harness placed the control socket on fd 3 with dup2 right before exec; this
    // process owns it from here on.
    let ctl = unsafe { OwnedFd::from_raw_fd(CONTROL_FD) };
    // The server's execve must close the last copy, which tells the harness it started.
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(ctl.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    let config: SandboxConfig = match std::env::var(CONFIG_ENV)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
    {
        Ok(c) => c,
        Err(e) => {
            let _ = control::send(
                ctl.as_fd(),
                &ControlRecord::Failed(StepFailure {
                    step: "config".into(),
                    errno: None,
                    message: format!("cannot read the sandbox config: {e}"),
                }),
                &[],
            );
            return 120;
        }
    };
    let mut init = Init {
        ctl: Some(ctl),
        config,
        enforcement: Enforcement {
            inherited_descriptors_closed: inherited,
            ..Enforcement::default()
        },
        connector: None,
    };
    init.outer().unwrap_or(121)
}

impl Init {
    fn fail(&self, step: &str, (errno, message): (Option<i32>, String)) {
        let Some(ctl) = &self.ctl else { return };
        let _ = control::send(
            ctl.as_fd(),
            &ControlRecord::Failed(StepFailure {
                step: step.into(),
                errno,
                message,
            }),
            &[],
        );
    }

    /// Runs a step: an error is fatal when the step is essential or the level is `required`,
    /// otherwise it is recorded as a degradation.
    fn step(&mut self, name: &str, essential: bool, r: Step) -> Result<(), ()> {
        let r = match &self.config.simulate_failure {
            Some(simulated) if simulated == name => Err((
                Some(libc::EPERM),
                format!("{name}: simulated failure (EPERM)"),
            )),
            _ => r,
        };
        match r {
            Ok(()) => Ok(()),
            Err(e) if essential || self.config.level == SandboxLevel::Required => {
                self.fail(name, e);
                Err(())
            }
            Err((_, msg)) => {
                self.enforcement.degraded.push(format!("{name}: {msg}"));
                Ok(())
            }
        }
    }

    /// The first process: namespaces, then PID 1.
    fn outer(&mut self) -> Result<i32, ()> {
        let scratch_parent = self.tie_to_harness()?;
        let cgroup_dir = self.open_run_cgroup()?;
        // SAFETY: getppid cannot fail.
        if unsafe { libc::getppid() } != self.config.harness_pid {
            return Ok(122); // The harness is already gone.
        }
        self.enter_namespaces()?;
        let (death_r, death_w) = match rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) {
            Ok(p) => p,
            Err(e) => {
                self.fail("pipe", io_err("pipe", e.into()));
                return Err(());
            }
        };
        let (pid1, in_cgroup) = self.fork_pid1(cgroup_dir.as_ref())?;
        // In both processes: PID 1 reports the enforcement to the harness.
        if in_cgroup {
            self.enforcement.cgroup = self.config.cgroup_enforces.clone();
        }
        if pid1 == 0 {
            drop(death_w);
            self.connector = None;
            let code = self.pid1(death_r);
            // SAFETY: leave without running destructors shared with the parent.
            unsafe { libc::_exit(code) };
        }
        drop(death_r);
        self.ctl = None;
        // Held until this process exits: PID 1 sees the pipe close when we are gone.
        let _death_w = death_w;
        quiet_stdio();
        // Connections into this network namespace for the harness, until PID 1 ends.
        let status = match self.connector.take() {
            Some(connector) => wait_answering(pid1, &connector),
            None => wait_for(pid1),
        };
        if ORPHANED.load(std::sync::atomic::Ordering::SeqCst) {
            remove_scratch(scratch_parent.as_ref(), &self.config.scratch_root);
        }
        Ok(status)
    }

    /// Ties this process to the harness: if the harness dies (even by SIGKILL), this process
    /// gets SIGUSR2 and then kills the sandbox and removes the scratch directories, which
    /// nobody else is left to remove. The scratch directories' parent, opened for that.
    fn tie_to_harness(&mut self) -> Result<Option<OwnedFd>, ()> {
        let scratch_parent = self.config.scratch_root.parent().and_then(|p| {
            rustix::fs::open(
                p,
                rustix::fs::OFlags::DIRECTORY
                    | rustix::fs::OFlags::RDONLY
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .ok()
        });
        // The handler only sets a flag; the work happens in the wait loop.
        install_orphan_handler();
        // SAFETY: prctl with integer arguments.
        let r = unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGUSR2 as libc::c_ulong,
                0,
                0,
                0,
            )
        };
        self.step(
            "pdeathsig",
            true,
            if r == 0 {
                Ok(())
            } else {
                Err(os_err("PR_SET_PDEATHSIG"))
            },
        )?;
        Ok(scratch_parent)
    }

    /// The run's cgroup: PID 1 is forked straight into it (every process of the sandbox
    /// starts inside). Opened now, while the host's cgroup tree is in view.
    fn open_run_cgroup(&mut self) -> Result<Option<OwnedFd>, ()> {
        let mut cgroup_dir: Option<OwnedFd> = None;
        if let Some(cg) = self.config.cgroup.clone() {
            let r = rustix::fs::open(
                &cg,
                rustix::fs::OFlags::PATH
                    | rustix::fs::OFlags::DIRECTORY
                    | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )
            .map(|fd| cgroup_dir = Some(fd))
            .map_err(|e| io_err("opening the run's cgroup", e.into()));
            self.step("cgroup", false, r)?;
        }
        Ok(cgroup_dir)
    }

    /// The namespaces (a user namespace when unprivileged, with its maps), the host name,
    /// private mounts, `lo`, the network observer's sockets and the connector.
    fn enter_namespaces(&mut self) -> Result<(), ()> {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let userns = uid != 0;
        let mut flags =
            libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS;
        if !self.config.host_network {
            flags |= libc::CLONE_NEWNET;
        }
        if userns {
            flags |= libc::CLONE_NEWUSER;
        }
        // SAFETY: unshare with flags only; this process is single-threaded (a fresh exec).
        let r = unsafe { libc::unshare(flags) };
        self.step(
            "unshare",
            true,
            if r == 0 {
                Ok(())
            } else {
                Err(os_err("unshare"))
            },
        )?;
        self.enforcement.user_namespace = userns;
        self.enforcement.namespaces = ["net", "mnt", "pid", "ipc", "uts"]
            .iter()
            .filter(|n| !(self.config.host_network && **n == "net"))
            .map(|s| s.to_string())
            .collect();
        if userns {
            self.enforcement.namespaces.push("user".into());
            let maps = std::fs::write("/proc/self/setgroups", "deny")
                .and_then(|_| std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")))
                .and_then(|_| std::fs::write("/proc/self/gid_map", format!("0 {gid} 1")));
            self.step(
                "uid_map",
                true,
                maps.map_err(|e| io_err("writing the uid/gid map of the user namespace", e)),
            )?;
        }
        if !self.config.host_network {
            // Only the proof of quiet's speed depends on it: nothing to report either way.
            let _ = super::netns::own_connection_table();
        }
        let name = self.config.hostname.clone();
        let host = cstr(&name);
        // SAFETY: the pointer and length describe a live buffer.
        let r = unsafe { libc::sethostname(host.as_ptr(), name.len()) };
        self.step(
            "hostname",
            false,
            if r == 0 {
                Ok(())
            } else {
                Err(os_err("sethostname"))
            },
        )?;
        let r = mount(
            None,
            Path::new("/"),
            None,
            libc::MS_REC | libc::MS_PRIVATE,
            None,
        );
        self.step("mount-private", true, r)?;
        if !self.config.host_network {
            let r = super::netns::loopback_up();
            self.step(
                "loopback",
                false,
                r.map_err(|e| io_err("bringing lo up", e)),
            )?;
        }

        if self.config.network_observer {
            let r = self.network_observer();
            self.step("network-observer", false, r)?;
        }
        if self.config.connector {
            let r = self.hand_over_connector();
            self.step("connector", true, r)?;
        }
        Ok(())
    }

    /// Forks PID 1, into the run's cgroup where `clone3` can (else it joins the cgroup
    /// first): its pid (0 in the child) and whether it is in the cgroup.
    fn fork_pid1(&mut self, cgroup_dir: Option<&OwnedFd>) -> Result<(libc::pid_t, bool), ()> {
        let (pid1, in_cgroup) = match cgroup_dir.map(fork_into_cgroup) {
            Some(Ok(pid)) => (pid, true),
            // No clone3 or no CLONE_INTO_CGROUP (old kernel, a filter): join, then fork.
            Some(Err(_)) => {
                let r = match &self.config.cgroup {
                    Some(cg) => std::fs::write(cg.join("cgroup.procs"), "0")
                        .map_err(|e| io_err("joining the run's cgroup", e)),
                    None => Ok(()),
                };
                let joined = r.is_ok();
                self.step("cgroup", false, r)?;
                // SAFETY: single-threaded process; the child only runs our own code and execve.
                (unsafe { libc::fork() }, joined)
            }
            // SAFETY: as above.
            None => (unsafe { libc::fork() }, false),
        };
        if pid1 < 0 {
            self.fail("fork", os_err("fork of PID 1"));
            return Err(());
        }
        Ok((pid1, in_cgroup))
    }

    /// Routes everything to `lo`, binds the observer's sockets and hands them to the harness.
    /// The sockets are closed here afterwards: only the harness holds them.
    fn network_observer(&mut self) -> Step {
        super::netns::route_everything_to_loopback()
            .map_err(|e| io_err("routing every address to lo", e))?;
        let socks =
            super::netns::observer_sockets(&self.config.observe_ports, self.config.packet_observer)
                .map_err(|e| io_err("binding the DNS stub", e))?;
        let ports: Vec<u16> = socks.listeners.iter().map(|(p, _)| *p).collect();
        let mut fds: Vec<std::os::fd::BorrowedFd<'_>> = vec![socks.dns.as_fd()];
        fds.extend(socks.listeners.iter().map(|(_, l)| l.as_fd()));
        fds.extend(socks.packets.as_ref().ok().map(|p| p.as_fd()));
        let packet_error = socks.packets.as_ref().err().cloned();
        let Some(ctl) = &self.ctl else {
            return Err((None, "no control socket".into()));
        };
        control::send(
            ctl.as_fd(),
            &ControlRecord::Network {
                ports: ports.clone(),
                packet_error: packet_error.clone(),
            },
            &fds,
        )
        .map_err(|e| io_err("handing over the observer's sockets", e))?;
        self.enforcement.network_observer = Some(format!(
            "every address routed to lo; DNS answered by hintcheck on port 53; TCP {} read by hintcheck; {}",
            ports
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            match &packet_error {
                None => "every outgoing TCP SYN and every packet of another IP protocol (UDP on any port, UDP-Lite, SCTP, ICMP) seen by a packet socket on lo"
                    .to_string(),
                Some(e) => format!(
                    "no packet socket on lo ({e}): sendmsg and connected-UDP destinations unseen"
                ),
            }
        ));
        Ok(())
    }

    /// Makes the connector's pair and hands the harness its end (this process lives in the
    /// sandbox's network namespace from now on).
    fn hand_over_connector(&mut self) -> Step {
        let (harness, init) =
            super::control::pair().map_err(|e| io_err("the connector's socket pair", e))?;
        let Some(ctl) = &self.ctl else {
            return Err((None, "no control socket".into()));
        };
        control::send(ctl.as_fd(), &ControlRecord::Connector, &[harness.as_fd()])
            .map_err(|e| io_err("handing over the connector", e))?;
        self.connector = Some(init);
        Ok(())
    }

    /// PID 1 of the new pid namespace: mounts, then the server child, then reaping.
    fn pid1(&mut self, death_r: OwnedFd) -> i32 {
        // SAFETY: prctl with integer arguments.
        if unsafe {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            )
        } != 0
        {
            self.fail("pdeathsig", os_err("PR_SET_PDEATHSIG in PID 1"));
            return 123;
        }
        // getppid() is 0 here: the pipe tells whether the outer init died before the prctl.
        let mut fds = [rustix::event::PollFd::new(
            &death_r,
            rustix::event::PollFlags::IN,
        )];
        if rustix::event::poll(
            &mut fds,
            Some(&rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            }),
        )
        .unwrap_or(0)
            > 0
        {
            return 124;
        }
        // A cgroup namespace rooted at the run's cgroup: /proc/self/cgroup says `/`, and the
        // cgroup tree mounted below shows nothing of the host's (or of hintcheck's names).
        self.own_cgroup_view();
        if self.mounts().is_err() {
            return 125;
        }
        // SAFETY: single-threaded process; the child runs our code then execve.
        let server = unsafe { libc::fork() };
        if server < 0 {
            self.fail("fork", os_err("fork of the server"));
            return 126;
        }
        if server == 0 {
            drop(death_r);
            self.server_child();
        }
        self.ctl = None;
        quiet_stdio();
        reap_until(server)
    }

    /// Unshares the cgroup namespace and mounts a cgroup2 tree of its own over
    /// /sys/fs/cgroup. Missing, this is a tell (the host's cgroup names), not a hole: it is
    /// reported as degraded, never fatal.
    fn own_cgroup_view(&mut self) {
        // SAFETY: unshare with a flag only; PID 1 is single-threaded.
        if unsafe { libc::unshare(libc::CLONE_NEWCGROUP) } != 0 {
            let (_, msg) = os_err("unshare(CLONE_NEWCGROUP)");
            self.enforcement
                .degraded
                .push(format!("cgroup-namespace: {msg}"));
            return;
        }
        self.enforcement.namespaces.push("cgroup".into());
        let cgroup_fs = Path::new("/sys/fs/cgroup");
        if !cgroup_fs.is_dir() {
            return;
        }
        match mount(
            Some("cgroup2"),
            cgroup_fs,
            Some("cgroup2"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        ) {
            Ok(()) => self.enforcement.mounts.push(
                "own cgroup2 tree over /sys/fs/cgroup (the host's cgroups out of sight)".into(),
            ),
            Err((_, msg)) => self
                .enforcement
                .degraded
                .push(format!("mount-cgroup: {msg}")),
        }
    }

    /// System V shared memory lives outside every process and every tmpfs: its limits in the
    /// sandbox's own IPC namespace are set to the memory limit (best effort: kernels before
    /// 5.19 refuse the write in a user namespace).
    fn limit_shared_memory(&mut self) {
        let bytes = self.config.limits.data_bytes;
        let pages = bytes / 4096;
        let ok = std::fs::write("/proc/sys/kernel/shmmax", bytes.to_string()).is_ok()
            && std::fs::write("/proc/sys/kernel/shmall", pages.to_string()).is_ok();
        if ok {
            self.enforcement.rlimits.push(format!(
                "System V shared memory {bytes} (kernel.shmmax, shmall)"
            ));
        } else {
            self.enforcement.degraded.push(
                "shm-limit: System V shared memory is not limited in this IPC namespace".into(),
            );
        }
    }

    fn mounts(&mut self) -> Result<(), ()> {
        let nodev = libc::MS_NOSUID | libc::MS_NODEV;
        let r = mount(
            Some("proc"),
            Path::new("/proc"),
            Some("proc"),
            nodev | libc::MS_NOEXEC,
            None,
        );
        self.mounted("mount-proc", r, "fresh /proc of the pid namespace")?;
        self.limit_shared_memory();
        // Where /etc/resolv.conf really points, before /run is replaced.
        let resolv_target = resolve_link(Path::new("/etc/resolv.conf"));
        let r = mount(
            Some("tmpfs"),
            Path::new("/run"),
            Some("tmpfs"),
            nodev,
            Some("mode=0755,size=64m"),
        );
        self.mounted(
            "mount-run",
            r,
            "tmpfs over /run (host sockets out of reach)",
        )?;
        if Path::new("/var/run").is_dir() && !Path::new("/var/run").is_symlink() {
            let r = mount(
                Some("tmpfs"),
                Path::new("/var/run"),
                Some("tmpfs"),
                nodev,
                Some("mode=0755,size=64m"),
            );
            self.mounted("mount-var-run", r, "tmpfs over /var/run")?;
        }
        // The sandbox's own files are written while the scratch root is still writable here.
        let r = self.write_resolv_conf();
        self.step("resolv-conf", false, r)?;
        let r = self.write_accounts();
        self.step("accounts", false, r)?;
        // Overlays first, on the host's paths: the binds below carry them along.
        for (i, dir) in self.config.overlays.clone().into_iter().enumerate() {
            let r = self.overlay(i, &dir);
            self.mounted(
                "overlay",
                r,
                &format!(
                    "overlay over {} (writes stay in the sandbox)",
                    dir.display()
                ),
            )?;
        }
        self.hide_private()?;
        for dir in TEMPORARY_PLACES.map(Path::new) {
            if !dir.is_dir() {
                continue;
            }
            let r = self.new_temporary(dir);
            let name = format!(
                "mount-{}",
                dir.display()
                    .to_string()
                    .trim_start_matches('/')
                    .replace('/', "-")
            );
            let label = if self.config.scratch_root.starts_with(dir) {
                format!(
                    "tmpfs over {} (the scratch directories bound inside)",
                    dir.display()
                )
            } else {
                format!("tmpfs over {}", dir.display())
            };
            self.mounted(&name, r, &label)?;
        }
        for p in &self.config.shown_temporary {
            self.enforcement.mounts.push(format!(
                "{} visible read-only (the server runs on it or is given it)",
                p.display()
            ));
        }
        let r = self.bind_resolv_conf(&resolv_target);
        self.mounted("resolv-conf", r, "own /etc/resolv.conf")?;
        self.bind_ca_bundle();
        if Path::new("/etc/passwd").is_file() {
            let r = self.bind_accounts();
            let label = match (&self.config.run_user, self.config.run_as) {
                (Some(name), Some((uid, _))) => format!(
                    "/etc/passwd and /etc/group of a plain system, with an account for uid {uid} ({name})"
                ),
                _ => "/etc/passwd and /etc/group of a plain system (the host's accounts out of sight)"
                    .to_string(),
            };
            self.mounted("accounts", r, &label)?;
        }
        Ok(())
    }

    /// An overlay over a host directory: reads see the host, writes go to an upper layer in
    /// the scratch root. In a user namespace the overlay keeps its metadata in `user.*`
    /// xattrs (`userxattr`, Linux 5.11+).
    fn overlay(&mut self, i: usize, dir: &Path) -> Step {
        let base = super::scratch::overlay_dir(&self.config.scratch_root, i);
        let (upper, work) = (base.join("upper"), base.join("work"));
        let mut data = format!(
            "lowerdir={},upperdir={},workdir={}",
            dir.display(),
            upper.display(),
            work.display()
        );
        if self.enforcement.user_namespace {
            data.push_str(",userxattr");
        }
        mount(
            Some("overlay"),
            dir,
            Some("overlay"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&data),
        )?;
        // The server runs as another uid in root mode: the top directory becomes its own
        // (a copy-up in the upper layer; the host directory is untouched).
        if let Some((uid, gid)) = self.config.run_as {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid))
                .map_err(|e| io_err("chown of the overlay", e))?;
        }
        Ok(())
    }

    /// A mount step: on success its label goes into the enforcement record.
    fn mounted(&mut self, name: &str, r: Step, label: &str) -> Result<(), ()> {
        let ok = r.is_ok();
        self.step(name, false, r)?;
        if ok {
            self.enforcement.mounts.push(label.to_string());
        }
        Ok(())
    }

    /// A fresh tmpfs over a temporary place (/tmp, /var/tmp, /dev/shm) that still holds the
    /// scratch root at its usual path when it lies there, and, read-only, the entries of the
    /// place the server runs on.
    fn new_temporary(&self, place: &Path) -> Step {
        // An entry that is an overlay stays writable: the overlay is what the server writes.
        let mut binds: Vec<Bind> = self
            .config
            .shown_temporary
            .iter()
            .filter(|p| p.starts_with(place))
            .map(|p| Bind::same(p, !self.config.overlays.contains(p)))
            .collect();
        binds.extend(self.scratch_binds(place));
        cover_with_tmpfs(place, &binds, "mode=1777,size=256m")
    }

    /// The binds that keep the scratch root visible inside `place` (when it lies there): the
    /// root itself read-only (the server may not replace its own directories, nor write the
    /// sandbox's files next to them), its writable directories read-write on top; and the
    /// writable directories outside the scratch root that lie there (an installer's target).
    fn scratch_binds(&self, place: &Path) -> Vec<Bind> {
        let root = &self.config.scratch_root;
        let mut binds = Vec::new();
        if root.starts_with(place) {
            binds.push(Bind::same(root, true));
        }
        binds.extend(
            self.config
                .writable
                .iter()
                .filter(|w| w.starts_with(place))
                .map(|w| Bind::same(w, false)),
        );
        binds
    }

    /// Covers each place that holds users' private files (home directories, /root) with an
    /// empty tmpfs that shows, read-only, only what the server runs on; the scratch root and
    /// overlay directories that lie there stay at their paths.
    fn hide_private(&mut self) -> Result<(), ()> {
        for place in self.config.hidden.clone() {
            if !place.is_dir() {
                continue;
            }
            let under = |p: &&PathBuf| p.starts_with(&place) && p.as_path() != place;
            let mut binds: Vec<Bind> = self
                .config
                .exposed
                .iter()
                .filter(under)
                .map(|p| Bind::same(p, true))
                .collect();
            // Overlays (mounted already) stay writable: the overlay is what the server writes.
            binds.extend(
                self.config
                    .overlays
                    .iter()
                    .filter(under)
                    .map(|p| Bind::same(p, false)),
            );
            binds.extend(self.scratch_binds(&place));
            let home_here = self
                .config
                .home_inside
                .clone()
                .filter(|h| h.starts_with(&place));
            if let Some(inside) = home_here.as_ref().filter(|h| **h != place) {
                binds.push(Bind {
                    source: self.config.home.clone(),
                    inside: inside.clone(),
                    read_only: false,
                });
            }
            // Empty, it is as closed as a home directory; with paths to show, traversable.
            let mode = match (place == Path::new("/home"), binds.is_empty()) {
                (true, _) => "0755",
                (false, true) => "0700",
                (false, false) => "0711",
            };
            let mut r = cover_with_tmpfs(&place, &binds, &format!("mode={mode},size=16m"));
            if r.is_ok() && home_here.as_ref() == Some(&place) {
                // The place is the server's home itself (/root): the scratch HOME stands in it.
                let source = self.config.home.display().to_string();
                r = mount(Some(&source), &place, None, libc::MS_BIND, None);
            }
            let mut label = format!("{} hidden (an empty tmpfs over it)", place.display());
            let shown: Vec<String> = binds
                .iter()
                .filter(|b| Some(&b.inside) != home_here.as_ref())
                .map(|b| b.inside.display().to_string())
                .collect();
            if !shown.is_empty() {
                label.push_str(&format!(
                    " but for what the server runs on: {}",
                    shown.join(", ")
                ));
            }
            if let Some(h) = &home_here {
                label.push_str(&format!("; the scratch HOME is shown at {}", h.display()));
            }
            self.mounted("hide-private", r, &label)?;
        }
        Ok(())
    }

    /// Where the sandbox's resolv.conf is kept, in the scratch root.
    fn resolv_conf_file(&self) -> PathBuf {
        self.config
            .scratch_root
            .join(super::scratch::STATE_DIR)
            .join("resolv.conf")
    }

    fn write_resolv_conf(&mut self) -> Step {
        std::fs::write(self.resolv_conf_file(), &self.config.resolv_conf)
            .map_err(|e| io_err("writing resolv.conf", e))
    }

    /// A plain system's /etc/passwd and /etc/group ([`BASE_PASSWD`], [`BASE_GROUP`]: the host's
    /// accounts would say whose machine it is, a CI runner's or a company's), with the account
    /// the server runs as: the run's own (`run_user`), or the host's line of a `--run-as` uid;
    /// written to the scratch root's state directory.
    fn write_accounts(&mut self) -> Step {
        let state = self.config.scratch_root.join(super::scratch::STATE_DIR);
        let home = self
            .config
            .home_inside
            .as_ref()
            .unwrap_or(&self.config.home)
            .display()
            .to_string();
        let mut passwd = BASE_PASSWD.to_string();
        let mut group = BASE_GROUP.to_string();
        match (&self.config.run_user, self.config.run_as) {
            (Some(name), Some((uid, gid))) => {
                passwd.push_str(&format!("{name}:x:{uid}:{gid}:{name}:{home}:/bin/bash\n"));
                group.push_str(&format!("{name}:x:{gid}:\n"));
            }
            (None, Some((uid, gid))) => {
                let host_line = |file: &str, id: u32| {
                    std::fs::read_to_string(file)
                        .unwrap_or_default()
                        .lines()
                        .find(|l| l.split(':').nth(2) == Some(id.to_string().as_str()))
                        .map(|l| format!("{l}\n"))
                };
                for (text, line) in [
                    (&mut passwd, host_line("/etc/passwd", uid)),
                    (&mut group, host_line("/etc/group", gid)),
                ] {
                    if let Some(line) = line.filter(|l| !text.contains(l.as_str())) {
                        text.push_str(&line);
                    }
                }
            }
            _ => {}
        }
        for (file, text) in [("passwd", passwd), ("group", group)] {
            std::fs::write(state.join(file), text)
                .map_err(|e| io_err(&format!("writing {file}"), e))?;
        }
        Ok(())
    }

    fn bind_accounts(&mut self) -> Step {
        let state = self.config.scratch_root.join(super::scratch::STATE_DIR);
        for file in ["passwd", "group"] {
            let source = state.join(file).display().to_string();
            mount(
                Some(&source),
                &Path::new("/etc").join(file),
                None,
                libc::MS_BIND,
                None,
            )?;
        }
        Ok(())
    }

    fn bind_resolv_conf(&mut self, target: &Path) -> Step {
        if !target.exists() {
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| io_err("creating the resolv.conf directory", e))?;
            }
            std::fs::write(target, "")
                .map_err(|e| io_err("creating the resolv.conf mount point", e))?;
        }
        mount(
            Some(&self.resolv_conf_file().display().to_string()),
            target,
            None,
            libc::MS_BIND,
            None,
        )
    }

    /// Shows the run's CA bundle (the system's plus the run's own authority) at the paths
    /// where the system keeps its bundle, so that HTTPS to the observer's listeners completes
    /// inside the sandbox; the host's files are untouched. Not a confinement: a failure is
    /// recorded as degraded (HTTPS is then refused as before), never fatal.
    fn bind_ca_bundle(&mut self) {
        let Some(bundle) = self.config.ca_bundle.clone() else {
            return;
        };
        let mut done: Vec<PathBuf> = Vec::new();
        for path in super::policy::SYSTEM_BUNDLES {
            let target = resolve_link(Path::new(path));
            if !target.is_file() || done.contains(&target) {
                continue;
            }
            match mount(
                Some(&bundle.display().to_string()),
                &target,
                None,
                libc::MS_BIND,
                None,
            ) {
                Ok(()) => {
                    self.enforcement.mounts.push(format!(
                        "{} shows the system bundle with the run's own certificate authority (HTTPS is answered inside the sandbox only)",
                        target.display()
                    ));
                    done.push(target);
                }
                Err((_, msg)) => self
                    .enforcement
                    .degraded
                    .push(format!("ca-bundle: {}: {msg}", target.display())),
            }
        }
    }

    /// The server child: never returns.
    fn server_child(&mut self) -> ! {
        // Made before the seccomp filter, which may allow only an execve of this very path
        // buffer (`single_exec`).
        let program = cstr(&self.config.program);
        let code = match self.confine(program.as_ptr() as u64) {
            Ok(()) => self.exec(program),
            Err(()) => 127,
        };
        // SAFETY: leave without running destructors shared with the parent.
        unsafe { libc::_exit(code) }
    }

    /// Limits, Landlock, the uid switch, capabilities, no_new_privs and seccomp; `program`
    /// is the address of the path the final `execve` passes.
    fn confine(&mut self, program: u64) -> Result<(), ()> {
        // SAFETY: setsid has no arguments; failure only means we already lead a session.
        unsafe { libc::setsid() };
        self.set_rlimits()?;
        self.restrict_landlock()?;
        self.drop_privileges()?;
        let listener = self.install_filter(program)?;
        self.report_enforced(listener)
    }

    /// The resource limits.
    fn set_rlimits(&mut self) -> Result<(), ()> {
        let limits = self.config.limits.clone();
        let rl = vec![
            (libc::RLIMIT_CORE, 0, "core 0".to_string()),
            (
                libc::RLIMIT_NOFILE,
                limits.open_files,
                format!("nofile {}", limits.open_files),
            ),
            (
                libc::RLIMIT_FSIZE,
                limits.file_size,
                format!("fsize {}", limits.file_size),
            ),
            (
                libc::RLIMIT_CPU,
                limits.cpu_seconds,
                format!("cpu {}s", limits.cpu_seconds),
            ),
            (
                libc::RLIMIT_DATA,
                limits.data_bytes,
                format!("data {}", limits.data_bytes),
            ),
            (
                libc::RLIMIT_NPROC,
                limits.processes,
                format!("nproc {}", limits.processes),
            ),
        ];
        for (res, value, label) in rl {
            let lim = libc::rlimit {
                rlim_cur: value,
                rlim_max: value,
            };
            // SAFETY: a valid resource and a pointer to a live rlimit.
            let r = unsafe { libc::setrlimit(res, &lim) };
            self.step(
                "rlimit",
                false,
                if r == 0 { Ok(()) } else { Err(os_err(&label)) },
            )?;
            if r == 0 {
                self.enforcement.rlimits.push(label);
            }
        }
        Ok(())
    }

    /// Landlock, with what it lets the server read beyond the system's directories.
    fn restrict_landlock(&mut self) -> Result<(), ()> {
        match super::landlock::restrict(&self.config) {
            Ok((status, abi)) => {
                let none = status == "none";
                self.enforcement.readable_beyond_system = self.config.readable.as_ref().map(|r| {
                    let system: Vec<&Path> = super::policy::SYSTEM_READABLE
                        .iter()
                        .map(Path::new)
                        .collect();
                    r.iter()
                        .filter(|p| !system.contains(&p.as_path()) && p.exists())
                        .map(|p| p.display().to_string())
                        .collect()
                });
                self.enforcement.landlock = status;
                self.enforcement.landlock_abi = abi;
                if none {
                    self.step(
                        "landlock",
                        false,
                        Err((None, "Landlock is not available in this kernel".into())),
                    )?;
                }
            }
            Err(e) => {
                self.enforcement.landlock = "none".into();
                self.step("landlock", false, Err((None, e)))?;
            }
        }
        Ok(())
    }

    /// The bounding set, the uid switch (as root, to `run_as`), every capability, and
    /// no_new_privs.
    fn drop_privileges(&mut self) -> Result<(), ()> {
        // Drop the bounding set while we still hold CAP_SETPCAP (before any uid switch).
        for cap in caps::all() {
            if caps::has_cap(None, caps::CapSet::Bounding, cap).unwrap_or(false) {
                let r = caps::drop(None, caps::CapSet::Bounding, cap);
                self.step(
                    "capabilities",
                    true,
                    r.map_err(|e| (None, format!("dropping {cap} from the bounding set: {e}"))),
                )?;
            }
        }
        if let Some((uid, gid)) = self.config.run_as {
            // Order matters: groups and gid first, uid last, every return checked.
            // SAFETY: plain integer arguments; a null list with length 0 clears the groups.
            let r = unsafe {
                if libc::setgroups(0, std::ptr::null()) != 0 {
                    Err(os_err("setgroups"))
                } else if libc::setresgid(gid, gid, gid) != 0 {
                    Err(os_err("setresgid"))
                } else if libc::setresuid(uid, uid, uid) != 0 {
                    Err(os_err("setresuid"))
                } else {
                    Ok(())
                }
            };
            self.step("drop-uid", true, r)?;
            // SAFETY: getresuid-style checks with plain calls.
            let (now_uid, now_euid) = unsafe { (libc::getuid(), libc::geteuid()) };
            if now_uid != uid || now_euid != uid {
                self.fail(
                    "drop-uid",
                    (
                        None,
                        format!("still uid {now_uid}/{now_euid} after setresuid({uid})"),
                    ),
                );
                return Err(());
            }
        }
        for set in [
            caps::CapSet::Ambient,
            caps::CapSet::Inheritable,
            caps::CapSet::Effective,
            caps::CapSet::Permitted,
        ] {
            let r = caps::clear(None, set);
            self.step(
                "capabilities",
                true,
                r.map_err(|e| (None, format!("clearing {set:?}: {e}"))),
            )?;
        }
        self.enforcement.capabilities_dropped = caps::read(None, caps::CapSet::Permitted)
            .map(|s| s.is_empty())
            .unwrap_or(false)
            && caps::read(None, caps::CapSet::Effective)
                .map(|s| s.is_empty())
                .unwrap_or(false);
        // SAFETY: prctl with integer arguments.
        let r = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
        self.step(
            "no-new-privs",
            true,
            if r == 0 {
                Ok(())
            } else {
                Err(os_err("PR_SET_NO_NEW_PRIVS"))
            },
        )?;
        self.enforcement.no_new_privs = true;
        Ok(())
    }

    /// The seccomp filter (with its listener when attempts are reported), and what it refuses
    /// in words.
    fn install_filter(&mut self, program: u64) -> Result<Option<OwnedFd>, ()> {
        let single_exec = self.config.single_exec.then_some(program);
        let listener = match install_seccomp(self.config.notify, single_exec) {
            Ok(l) => l,
            Err(e) => {
                self.step("seccomp", false, Err(e))?;
                None
            }
        };
        self.enforcement.seccomp = if self
            .enforcement
            .degraded
            .iter()
            .any(|d| d.starts_with("seccomp"))
        {
            "none".into()
        } else {
            format!(
                "foreign-architecture and x32 system calls, io_uring and clone3 refused (ENOSYS); socket(AF_UNIX) refused (EACCES); \
sockets of any family but IPv4, IPv6 (TCP, UDP, ICMP, UDP-Lite, MPTCP) and routing netlink (AF_VSOCK, AF_PACKET, SCTP, other netlink protocols), socket pairs but AF_UNIX, \
nested namespaces (unshare and clone with CLONE_NEW*, setns) refused{}{}",
                if listener.is_some() {
                    " and reported; write, connect, sendto, sendmmsg and exec attempts and shared file mappings reported to hintcheck"
                } else {
                    " (not reported: no listener)"
                },
                if single_exec.is_some() {
                    "; every execve but the program's own, and every execveat, refused (EPERM)"
                } else {
                    ""
                }
            )
        };
        Ok(listener)
    }

    /// Sends the enforcement record (with the seccomp listener) to the harness; the server
    /// does not keep the listener.
    fn report_enforced(&mut self, listener: Option<OwnedFd>) -> Result<(), ()> {
        // SAFETY: getuid/getgid cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        self.enforcement.host_uid = self
            .config
            .run_as
            .map(|r| r.0)
            .unwrap_or_else(|| host_id("/proc/self/uid_map", uid));
        self.enforcement.host_gid = self
            .config
            .run_as
            .map(|r| r.1)
            .unwrap_or_else(|| host_id("/proc/self/gid_map", gid));
        let sent = match &self.ctl {
            Some(ctl) => {
                let fds: Vec<std::os::fd::BorrowedFd<'_>> =
                    listener.iter().map(|l| l.as_fd()).collect();
                control::send(
                    ctl.as_fd(),
                    &ControlRecord::Enforced(self.enforcement.clone()),
                    &fds,
                )
            }
            None => Err(std::io::Error::other("no control socket")),
        };
        // The server must not hold its own listener.
        drop(listener);
        if let Err(e) = sent {
            self.fail("report", io_err("sending the enforcement record", e));
            return Err(());
        }
        Ok(())
    }

    fn exec(&mut self, program: CString) -> i32 {
        if let Err(e) = std::env::set_current_dir(&self.config.cwd) {
            self.fail(
                "chdir",
                io_err(&format!("chdir {}", self.config.cwd.display()), e),
            );
            return 127;
        }
        let mut argv: Vec<CString> = vec![program.clone()];
        argv.extend(self.config.args.iter().map(cstr));
        let envp: Vec<CString> = self
            .config
            .env
            .iter()
            .map(|(k, v)| cstr(format!("{k}={v}")))
            .collect();
        let mut argv_p: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_p.push(std::ptr::null());
        let mut envp_p: Vec<*const libc::c_char> = envp.iter().map(|a| a.as_ptr()).collect();
        envp_p.push(std::ptr::null());
        // Only stdin, stdout and stderr cross the execve: every other descriptor of this
        // process (the control socket, the init's own) is closed by it.
        mark_close_on_exec_from(3);
        // The Rust runtime ignores SIGPIPE; the server must start with the default.
        // SAFETY: resetting a signal disposition to its default.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        // SAFETY: NULL-terminated arrays of pointers to live NUL-terminated strings.
        unsafe { libc::execve(program.as_ptr(), argv_p.as_ptr(), envp_p.as_ptr()) };
        self.fail(
            "exec",
            os_err(&format!("execve {}", self.config.program.display())),
        );
        127
    }
}

/// The accounts of a freshly installed Debian system.
const BASE_PASSWD: &str = "root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
bin:x:2:2:bin:/bin:/usr/sbin/nologin
sys:x:3:3:sys:/dev:/usr/sbin/nologin
sync:x:4:65534:sync:/bin:/bin/sync
games:x:5:60:games:/usr/games:/usr/sbin/nologin
man:x:6:12:man:/var/cache/man:/usr/sbin/nologin
lp:x:7:7:lp:/var/spool/lpd:/usr/sbin/nologin
mail:x:8:8:mail:/var/mail:/usr/sbin/nologin
news:x:9:9:news:/var/spool/news:/usr/sbin/nologin
uucp:x:10:10:uucp:/var/spool/uucp:/usr/sbin/nologin
proxy:x:13:13:proxy:/bin:/usr/sbin/nologin
www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin
backup:x:34:34:backup:/var/backups:/usr/sbin/nologin
list:x:38:38:Mailing List Manager:/var/list:/usr/sbin/nologin
irc:x:39:39:ircd:/run/ircd:/usr/sbin/nologin
_apt:x:42:65534::/nonexistent:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
";

/// The groups of a freshly installed Debian system.
const BASE_GROUP: &str = "root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
news:x:9:
uucp:x:10:
man:x:12:
proxy:x:13:
kmem:x:15:
dialout:x:20:
cdrom:x:24:
sudo:x:27:
audio:x:29:
www-data:x:33:
backup:x:34:
operator:x:37:
list:x:38:
irc:x:39:
src:x:40:
shadow:x:42:
utmp:x:43:
video:x:44:
plugdev:x:46:
staff:x:50:
games:x:60:
users:x:100:
nogroup:x:65534:
";

/// A host path shown at a path inside the sandbox.
struct Bind {
    source: PathBuf,
    inside: PathBuf,
    read_only: bool,
}

impl Bind {
    /// `path` shown at its own path.
    fn same(path: &Path, read_only: bool) -> Bind {
        Bind {
            source: path.to_path_buf(),
            inside: path.to_path_buf(),
            read_only,
        }
    }
}

/// Mounts a fresh tmpfs over `target` that still shows `binds` (host paths, each at its
/// `inside` path under `target`, read-only or not): the tmpfs is filled in a staging directory
/// of the sandbox's /run, then moved over `target` in one step. Read-only binds come first, so
/// that a writable directory inside one of them is bound on top.
fn cover_with_tmpfs(target: &Path, binds: &[Bind], options: &str) -> Step {
    let nodev = libc::MS_NOSUID | libc::MS_NODEV;
    let stage = Path::new("/run/.stage");
    std::fs::create_dir_all(stage).map_err(|e| io_err("creating the staging directory", e))?;
    mount(Some("tmpfs"), stage, Some("tmpfs"), nodev, Some(options))?;
    let mut ordered: Vec<&Bind> = binds.iter().collect();
    ordered.sort_by_key(|b| (!b.read_only, b.inside.components().count()));
    for b in ordered {
        let Ok(rel) = b.inside.strip_prefix(target) else {
            continue;
        };
        // Only plain names below the covered place: never `..` out of the staging tmpfs.
        if !rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return Err(io_err(
                &format!("a bind into {}", target.display()),
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{} is not a plain path below it", b.inside.display()),
                ),
            ));
        }
        let inner = stage.join(rel);
        let made = if b.source.is_dir() {
            std::fs::create_dir_all(&inner)
        } else {
            inner
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|_| std::fs::write(&inner, ""))
        };
        made.map_err(|e| {
            io_err(
                &format!("creating a mount point in {}", target.display()),
                e,
            )
        })?;
        let src = b.source.display().to_string();
        mount(Some(&src), &inner, None, libc::MS_BIND | libc::MS_REC, None)?;
        if b.read_only {
            // In a user namespace the source mount's flags are locked: keep them.
            mount(
                None,
                &inner,
                None,
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | locked_flags(&b.source),
                None,
            )?;
        }
    }
    mount(
        Some(&stage.display().to_string()),
        target,
        None,
        libc::MS_MOVE,
        None,
    )?;
    let _ = std::fs::remove_dir(stage);
    Ok(())
}

/// The flags of the mount holding `path` that a user namespace may not clear on a remount
/// (nosuid, nodev, noexec and the atime flags: `statvfs` reports them with the same bits).
fn locked_flags(path: &Path) -> libc::c_ulong {
    let locked = libc::MS_NOSUID
        | libc::MS_NODEV
        | libc::MS_NOEXEC
        | libc::MS_NOATIME
        | libc::MS_NODIRATIME
        | libc::MS_RELATIME;
    let p = cstr(path);
    // SAFETY: statvfs with a NUL-terminated path and a pointer to a zeroed statvfs.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statvfs(p.as_ptr(), &mut st) } == 0 {
        st.f_flag as libc::c_ulong & locked
    } else {
        0
    }
}

/// Closes every descriptor numbered `first` or higher; returns how many were open. Used at
/// the init's start, while it is single-threaded and holds nothing of its own above fd 3.
fn close_descriptors_from(first: u32) -> usize {
    let open: Vec<u32> = std::fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect()
        })
        .unwrap_or_default();
    // SAFETY: close_range on a range of descriptors this process does not use (nothing of
    // its own is open above the control socket yet).
    let r = unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) };
    if r != 0 {
        // Before Linux 5.9: one by one (the directory listing's own descriptor is closed
        // already and fails harmlessly).
        for &fd in open.iter().filter(|&&fd| fd >= first) {
            // SAFETY: closing a descriptor number; none of them is owned by Rust code here.
            unsafe { libc::close(fd as i32) };
        }
    }
    // The listing's own descriptor was open while it was read.
    open.iter()
        .filter(|&&fd| fd >= first)
        .count()
        .saturating_sub(1)
}

/// Marks every descriptor numbered `first` or higher close-on-exec.
fn mark_close_on_exec_from(first: u32) {
    // SAFETY: close_range with CLOSE_RANGE_CLOEXEC only changes descriptor flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r != 0 {
        for fd in first..4096 {
            // SAFETY: fcntl on a descriptor number; EBADF for those not open.
            unsafe { libc::fcntl(fd as i32, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
}

/// The host id a namespace id maps to (first line of the map).
fn host_id(map: &str, inside: u32) -> u32 {
    std::fs::read_to_string(map)
        .ok()
        .and_then(|m| {
            m.lines().find_map(|l| {
                let f: Vec<u32> = l
                    .split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect();
                (f.len() == 3 && inside >= f[0] && inside < f[0] + f[2])
                    .then(|| f[1] + (inside - f[0]))
            })
        })
        .unwrap_or(inside)
}

/// Follows symlinks by hand (the target may not exist).
fn resolve_link(path: &Path) -> PathBuf {
    let mut p = path.to_path_buf();
    for _ in 0..16 {
        match std::fs::read_link(&p) {
            Ok(t) => {
                p = if t.is_absolute() {
                    t
                } else {
                    p.parent().unwrap_or(Path::new("/")).join(t)
                };
            }
            Err(_) => break,
        }
    }
    p
}

/// Points stdin, stdout and stderr at /dev/null so that only the server holds the pipes.
fn quiet_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    {
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors of this process.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}

/// Waits for one child and turns its status into an exit code.
/// Set by the SIGUSR2 handler: the harness is gone.
static ORPHANED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_orphaned(_sig: libc::c_int) {
    ORPHANED.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn install_orphan_handler() {
    // SAFETY: a zeroed sigaction with a handler that only stores to an atomic (async-signal
    // safe); no SA_RESTART, so waitpid returns EINTR and the loop sees the flag.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_orphaned as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGUSR2, &action, std::ptr::null_mut());
    }
}

/// Removes the scratch root through a directory descriptor opened in the host's mount
/// namespace (here the root is a mount point of the sandbox's /tmp).
fn remove_scratch(parent: Option<&OwnedFd>, root: &Path) {
    let (Some(parent), Some(name)) = (parent, root.file_name()) else {
        return;
    };
    // In this namespace the root is a mount point, which rmdir refuses: detach it first.
    let target = cstr(root);
    // SAFETY: umount2 with a NUL-terminated path.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    super::scratch::force_remove_at(parent.as_fd(), name);
}

fn wait_for(pid: libc::pid_t) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a pointer to a live int.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return exit_code(status);
        }
        if r < 0 && ORPHANED.load(std::sync::atomic::Ordering::SeqCst) {
            // The harness is gone: end the sandbox (PID 1 takes everything with it).
            // SAFETY: kill with a pid we forked.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            continue;
        }
        if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 128;
        }
    }
}

/// [`wait_for`], answering the connector's requests meanwhile (a process that unshared its
/// pid namespace cannot start a thread for them).
fn wait_answering(pid: libc::pid_t, connector: &OwnedFd) -> i32 {
    use rustix::event::{PollFd, PollFlags};
    let Some(pidfd) = rustix::process::Pid::from_raw(pid)
        .and_then(|p| rustix::process::pidfd_open(p, rustix::process::PidfdFlags::empty()).ok())
    else {
        return wait_for(pid);
    };
    let mut open = true;
    loop {
        if ORPHANED.load(std::sync::atomic::Ordering::SeqCst) {
            // The harness is gone, and the signal that said so interrupted the poll, not a
            // `waitpid`: end the sandbox here (PID 1 takes everything with it), then reap.
            // SAFETY: kill with a pid we forked.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            return wait_for(pid);
        }
        let mut fds = vec![PollFd::new(&pidfd, PollFlags::IN)];
        if open {
            fds.push(PollFd::new(connector, PollFlags::IN));
        }
        match rustix::event::poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return wait_for(pid),
        }
        let exited = !fds[0].revents().is_empty();
        let request = fds.get(1).is_some_and(|f| !f.revents().is_empty());
        if exited {
            return wait_for(pid);
        }
        if request {
            open = super::connector::answer_one(connector);
        }
    }
}

/// PID 1's loop: reaps everything, returns when the server exits.
fn reap_until(server: libc::pid_t) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with a pointer to a live int.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == server {
            return exit_code(status);
        }
        if r < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                _ => return 128,
            }
        }
    }
}

fn exit_code(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        128
    }
}

/// Installs the filter; with `notify`, returns the user-notification listener.
fn install_seccomp(
    notify: bool,
    single_exec: Option<u64>,
) -> Result<Option<OwnedFd>, (Option<i32>, String)> {
    let prog: Vec<libc::sock_filter> = super::seccomp::filter(notify, single_exec)
        .into_iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    let install = |flags: libc::c_ulong| {
        // SAFETY: the program outlives the call; no_new_privs is already set.
        unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                flags,
                &fprog as *const libc::sock_fprog,
            )
        }
    };
    if !notify {
        return if install(0) == 0 {
            Ok(None)
        } else {
            Err(os_err("seccomp(SET_MODE_FILTER)"))
        };
    }
    // WAIT_KILLABLE_RECV (5.19+) keeps Go's preemption signals from restarting notified calls.
    let mut r = install(
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
    );
    if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
        r = install(libc::SECCOMP_FILTER_FLAG_NEW_LISTENER);
    }
    if r < 0 {
        return Err(os_err("seccomp(SET_MODE_FILTER, NEW_LISTENER)"));
    }
    // SAFETY: the kernel returned a new descriptor that we own.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(r as RawFd) }))
}

/// `clone3(CLONE_INTO_CGROUP)`: a fork whose child starts in the cgroup `dir`, without the
/// migration that writing `cgroup.procs` performs (which waits for an RCU grace period, about
/// 9 ms of every sandbox start). Returns the child's pid in the parent and 0 in the child.
fn fork_into_cgroup(dir: &OwnedFd) -> std::io::Result<i32> {
    /// `struct clone_args` (Linux 5.7 layout, with `cgroup`).
    #[repr(C)]
    #[derive(Default)]
    struct CloneArgs {
        flags: u64,
        pidfd: u64,
        child_tid: u64,
        parent_tid: u64,
        exit_signal: u64,
        stack: u64,
        stack_size: u64,
        tls: u64,
        set_tid: u64,
        set_tid_size: u64,
        cgroup: u64,
    }
    const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
    let args = CloneArgs {
        flags: CLONE_INTO_CGROUP,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: dir.as_raw_fd() as u64,
        ..CloneArgs::default()
    };
    // SAFETY: clone3 without CLONE_VM is a fork (the child gets a copy of this single-threaded
    // process and runs only our own code, fork and execve); `args` is a live clone_args of the
    // size given. glibc's own fork is bypassed, so the child's thread block keeps the parent's
    // cached thread id: only raise/abort use it (a failed abort still ends the process), and
    // glibc's fork in the child sets its own child's id afresh.
    let r = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as i32)
    }
}
