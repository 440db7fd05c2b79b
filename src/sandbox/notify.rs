//! The seccomp notification recorder, harness side: a thread reads every notification from
//! the listener the sandbox handed over, decodes the system call (paths from the thread's
//! memory, resolved against its cwd or dirfd; socket addresses; argv), checks that the
//! notification is still valid (`ID_VALID`, so a recycled thread id cannot lie), and answers
//! `CONTINUE`: the kernel then runs the call, and Landlock and the namespaces decide. Calls the
//! sandbox refuses outright ([`super::seccomp::refusal`]: foreign socket families, nested
//! namespaces) are answered with their errno instead, decided from the registers alone.
//! Records go to a bounded queue that the attempt observer drains at every checkpoint.
//! Recorded memory can be changed by the target after we read it (TOCTOU): these records are
//! evidence of intent, and file effects stay the ground truth.

#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Most attempts kept between two checkpoints; the rest are counted.
const QUEUE_CAP: usize = 50_000;

/// What one notification asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptKind {
    /// A filesystem change: `path` (and `target` for rename/link/symlink).
    Path {
        /// The path as the server named it, made absolute.
        path: String,
        /// The second path of rename, link and symlink.
        target: Option<String>,
        /// For opens, the flags.
        flags: Option<u64>,
    },
    /// connect, bind or sendto with an address.
    Socket {
        /// `inet`, `inet6`, `unix`, or the family number.
        family: String,
        /// The address (IP, or socket path).
        address: String,
        /// The port, for inet families.
        port: Option<u16>,
        /// Whether the socket is a UDP socket (a UDP connect sends nothing by itself).
        udp: bool,
    },
    /// A call the sandbox refused outright (a socket family no server needs, a nested
    /// namespace): the server got an error, and the attempt is evidence of evasion.
    Refused {
        /// What was tried.
        what: String,
    },
    /// execve(at).
    Exec {
        /// The program.
        path: String,
        /// Its arguments.
        argv: Vec<String>,
        /// Its environment (`NAME=value` entries), as far as [`MAX_ENV_ENTRIES`] and
        /// [`MAX_ENV_BYTES`] go.
        env: Vec<String>,
    },
}

/// One recorded system call.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// When the notification was read.
    pub at: Instant,
    /// The thread (in the harness's pid namespace).
    pub tid: u32,
    /// Its process (thread group), in the harness's pid namespace.
    pub pid: u32,
    /// The system call.
    pub syscall: &'static str,
    /// What it asked for.
    pub kind: AttemptKind,
}

/// Attempts not yet drained, plus how many were dropped for the cap.
#[derive(Debug, Default)]
pub struct Pending {
    /// The records.
    pub attempts: Vec<Attempt>,
    /// Records dropped because the queue was full.
    pub dropped: u64,
    /// Bytes of the environments held by the records (at most [`ENV_QUEUE_BUDGET`]).
    pub env_bytes: usize,
    /// Programs started whose environment was not kept: the budget was spent.
    pub env_dropped: u64,
    /// TCP connects past loopback to a port nothing listened on that got no listener opened
    /// on demand (the cap was reached, or the sandbox's init stopped answering).
    pub connects_unserved: u64,
    /// Shared mappings of files made so far that may be written through (never drained):
    /// writes through them change files without any notification. A read-only mapping
    /// through a read-only descriptor by a process nothing else could change the descriptors
    /// of (see [`unwritable_map`]: glibc maps its `gconv-modules.cache` so as every Python
    /// process starts) is not counted: the kernel never lets it be written.
    pub shared_file_maps: u64,
}

/// Whether an `mmap` the filter reported (a shared mapping of a file, by the thread `tid`,
/// with the system call's arguments `args`) can never be written through: `PROT_WRITE` not
/// asked and a descriptor opened read-only (the kernel then clears the mapping's
/// `VM_MAYWRITE`, and `mprotect` refuses to add `PROT_WRITE`). The descriptor is read while the
/// thread is stopped in the call, so this holds only where nothing can swap another file in
/// under the same number before the call runs: the process has one thread and is alone in
/// its pid namespace but for the namespace's init (the sandbox's, which shares no descriptor
/// table). Anything else counts as a mapping that may be written.
fn unwritable_map(tid: u32, args: &[u64; 6]) -> bool {
    if args[2] & libc::PROT_WRITE as u64 != 0 {
        return false;
    }
    let read_only = super::tree::read_proc(format!("/proc/{tid}/fdinfo/{}", args[4] as i32))
        .ok()
        .and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
        })
        .is_some_and(|flags| flags & libc::O_ACCMODE as u32 == libc::O_RDONLY as u32);
    read_only && alone_in_its_namespace(tid)
}

/// Whether the process of `tid` has one thread and no other process shares its pid
/// namespace but the namespace's init (never the host's namespace). The namespace's processes
/// are read from its own `/proc` (the sandbox mounts one), through the process's root: every
/// process of the namespace is listed there, whatever its owner or dumpability.
fn alone_in_its_namespace(tid: u32) -> bool {
    let field = |status: &str, name: &str| -> Option<String> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
    };
    let Ok(ns) = std::fs::read_link(format!("/proc/{tid}/ns/pid")) else {
        return false;
    };
    if std::fs::read_link("/proc/self/ns/pid").is_ok_and(|own| own == ns) {
        return false;
    }
    let Ok(status) = super::tree::read_proc(format!("/proc/{tid}/status")) else {
        return false;
    };
    if field(&status, "Threads:").as_deref() != Some("1") {
        return false;
    }
    // Its pid inside its own namespace (the last of `NSpid`).
    let Some(own) =
        field(&status, "NSpid:").and_then(|ids| ids.split_whitespace().last().map(str::to_string))
    else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(format!("/proc/{tid}/root/proc")) else {
        return false;
    };
    let mut pids: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    pids.sort();
    pids.dedup();
    let mut expected = vec!["1".to_string(), own];
    expected.sort();
    expected.dedup();
    pids == expected
}

/// Shared between the recorder thread and the observer.
pub type AttemptQueue = Arc<Mutex<Pending>>;

/// Starts the recorder thread on `listener`; it ends when every process of the filter is gone.
pub fn start(listener: OwnedFd) -> AttemptQueue {
    start_with_locks(listener, LockPlaces::default())
}

/// Where a sandboxed server may take file locks (`flock`, `fcntl` locks): its own writable
/// places, as the server names them. A lock elsewhere (on a system file, its package, a /tmp
/// entry shown read-only) is on a file other sandboxes can see too, and would let two runs
/// signal each other: it fails with `ENOLCK` and is reported as a refused call. With no places
/// given, every lock is allowed.
#[derive(Debug, Clone, Default)]
pub struct LockPlaces {
    /// The places the server owns (scratch directories, the sandbox's tmpfs, overlays).
    pub own: Vec<std::path::PathBuf>,
    /// Places inside `own` that are shared nevertheless (read-only /tmp entries).
    pub shared: Vec<std::path::PathBuf>,
}

impl LockPlaces {
    /// Whether a lock on the file at `path` (as the server's descriptor names it) is refused.
    pub fn refuses(&self, path: &str) -> bool {
        if self.own.is_empty() || !path.starts_with('/') {
            // No policy, or not a file (a pipe, a socket, an anonymous inode).
            return false;
        }
        let p = std::path::Path::new(path.trim_end_matches(" (deleted)"));
        // The most specific place decides: a writable directory bound inside a shared entry
        // (guard's shared directories under /tmp) is the server's own.
        let depth = |places: &[std::path::PathBuf]| {
            places
                .iter()
                .filter(|o| p.starts_with(o))
                .map(|o| o.components().count())
                .max()
        };
        match (depth(&self.own), depth(&self.shared)) {
            (None, _) => true,
            (Some(own), Some(shared)) => shared >= own,
            (Some(_), None) => false,
        }
    }
}

/// [`start`], refusing locks outside `places`.
pub fn start_with_locks(listener: OwnedFd, places: LockPlaces) -> AttemptQueue {
    start_with(listener, places, None, None)
}

/// [`start_with_locks`], opening listeners on demand (see [`OnDemand`]) when given, and
/// asking `arbiter` (when given) how to answer each notification.
pub fn start_with(
    listener: OwnedFd,
    places: LockPlaces,
    on_demand: Option<OnDemand>,
    arbiter: Option<Arc<dyn Arbiter>>,
) -> AttemptQueue {
    let queue: AttemptQueue = Arc::new(Mutex::new(Pending::default()));
    let q = queue.clone();
    let _ = std::thread::Builder::new()
        .name("seccomp-recorder".into())
        .spawn(move || run(listener, q, places, on_demand, arbiter));
    queue
}

/// One notification as an [`Arbiter`] sees it: the registers (which the thread cannot change
/// under us) and what was decoded from its memory (which it can: evidence, never a licence).
#[derive(Debug)]
pub struct Notice<'a> {
    /// The thread, in the harness's pid namespace.
    pub tid: u32,
    /// The system call's number and name.
    pub nr: i64,
    /// Its name.
    pub syscall: &'static str,
    /// Its arguments.
    pub args: [u64; 6],
    /// What it asked for, decoded from the thread's memory.
    pub kinds: &'a [AttemptKind],
}

/// How a notification is answered.
#[derive(Debug)]
pub enum Ruling {
    /// The kernel runs the call (Landlock and the namespaces still decide).
    Continue,
    /// The call fails with this errno.
    Refuse(i32),
    /// The arbiter made the call itself, on values of its own: this is its return value.
    Done(i64),
    /// The arbiter opened the file itself: the descriptor is installed in the thread's table
    /// (`SECCOMP_IOCTL_NOTIF_ADDFD`) and its number is the call's return value.
    Install {
        /// The descriptor.
        fd: OwnedFd,
        /// Whether the installed descriptor is close-on-exec.
        cloexec: bool,
    },
}

/// Decides, per notification, whether a call runs: the enforcing proxy's policy. Whatever it
/// allows on the strength of the thread's memory it must do itself ([`Ruling::Done`],
/// [`Ruling::Install`]), since that memory may change once the call is let run.
pub trait Arbiter: Send + Sync {
    /// The answer to `notice`.
    fn rule(&self, notice: &Notice<'_>) -> Ruling;
}

/// Most listeners opened on demand in one sandbox.
pub const MAX_ON_DEMAND: usize = 64;

/// Listeners opened on demand: before a TCP `connect` past loopback to a port the network
/// observer does not listen on runs, a listener bound to that very address and port is made
/// inside the sandbox (through the connector: every address there is local) and handed to
/// the observer, so that the connection is accepted and what it sends is read instead of
/// refused unseen. The address comes from the server's memory and may change after it is
/// read: the worst a server gets by that is a listener it does not use.
pub struct OnDemand {
    connector: super::connector::Connector,
    sink: std::sync::mpsc::Sender<(u16, std::net::TcpListener)>,
    observed: Vec<u16>,
    opened: std::collections::HashSet<(std::net::IpAddr, u16)>,
    /// The init stopped answering: no more requests.
    broken: bool,
}

impl OnDemand {
    /// Opens listeners through `connector` and hands them to `sink`; `observed` are the ports
    /// the observer listens on already (on every address).
    pub fn new(
        connector: super::connector::Connector,
        sink: std::sync::mpsc::Sender<(u16, std::net::TcpListener)>,
        observed: Vec<u16>,
    ) -> OnDemand {
        OnDemand {
            connector,
            sink,
            observed,
            opened: Default::default(),
            broken: false,
        }
    }

    /// Before a `connect` decoded as `kinds` runs: opens the listener it needs, if any.
    /// How many connects it needed a listener for and could not have one (the cap was
    /// reached, or the init stopped answering).
    fn before_connect(&mut self, kinds: &[AttemptKind]) -> u64 {
        let mut unserved = 0;
        for kind in kinds {
            let AttemptKind::Socket {
                family,
                address,
                port: Some(port),
                udp: false,
            } = kind
            else {
                continue;
            };
            let Ok(ip) = address.parse::<std::net::IpAddr>() else {
                continue;
            };
            let ip = match ip {
                std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, std::net::IpAddr::V4),
                v4 => v4,
            };
            if !family.starts_with("inet")
                || ip.is_loopback()
                || ip.is_unspecified()
                || ip.is_multicast()
                || *port == 0
                || self.observed.contains(port)
                || self.opened.contains(&(ip, *port))
            {
                continue;
            }
            if self.opened.len() >= MAX_ON_DEMAND || self.broken {
                unserved += 1;
                continue;
            }
            match self.connector.listen(ip, *port) {
                Ok(listener) => {
                    self.opened.insert((ip, *port));
                    let _ = self.sink.send((*port, listener));
                }
                // The init did not answer (or is gone): ask no more.
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::BrokenPipe
                    ) =>
                {
                    self.broken = true;
                    unserved += 1;
                }
                Err(_) => {}
            }
        }
        unserved
    }
}

/// The refusal of a lock on a file other sandboxes can see (see [`LockPlaces`]), decided
/// from the descriptor's file alone: an unlock there is refused too (it undoes nothing the
/// server could have done), so nothing the server can change in its memory after the check
/// matters; a descriptor whose file cannot be read is refused. A thread that swaps the
/// descriptor (`dup2`) between this check and the call can still race it.
fn lock_refusal(req: &libc::seccomp_notif, places: &LockPlaces) -> Option<super::seccomp::Refusal> {
    let a = req.data.args;
    let locks = match req.data.nr as i64 {
        libc::SYS_flock => true,
        libc::SYS_fcntl => super::seccomp::FCNTL_LOCKS.contains(&(a[1] as u32)),
        _ => false,
    };
    if !locks || places.own.is_empty() {
        return None;
    }
    let path = fd_link(req.pid, a[0] as i32).unwrap_or_else(|| "/(unreadable)".into());
    places.refuses(&path).then(|| super::seccomp::Refusal {
        errno: libc::ENOLCK,
        what: format!(
            "{}: a lock on {path}, a file other sandboxes can see too (a channel between runs)",
            super::seccomp::name_of(req.data.nr)
        ),
    })
}

fn run(
    listener: OwnedFd,
    queue: AttemptQueue,
    places: LockPlaces,
    mut on_demand: Option<OnDemand>,
    arbiter: Option<Arc<dyn Arbiter>>,
) {
    let fd = listener.as_raw_fd();
    loop {
        // Wait for a notification, or for the end (no process left: POLLHUP).
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one valid pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, 1000) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if r == 0 {
            continue;
        }
        if pfd.revents & libc::POLLIN == 0
            && pfd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
        {
            return;
        }
        // SAFETY: seccomp_notif is plain data; zero is the required initial value.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        // SAFETY: NOTIF_RECV with a pointer to a live, zeroed seccomp_notif.
        if unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut req) } != 0 {
            // ENOENT: the target died before we read it; EINTR: retry.
            continue;
        }
        // The registers cannot change under us: a refusal is decided from them (and, for a
        // lock, from the file its descriptor names) before anything is decoded.
        let refused = super::seccomp::refusal(req.data.nr as i64, &req.data.args)
            .or_else(|| lock_refusal(&req, &places));
        let decoded = match &refused {
            Some(r) => vec![AttemptKind::Refused {
                what: r.what.clone(),
            }],
            None => decode(&req),
        };
        // SAFETY: NOTIF_ID_VALID with a pointer to the id.
        let valid = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) } == 0;
        // Counted before the call runs: a write through the mapping comes after.
        if req.data.nr as i64 == libc::SYS_mmap && !unwritable_map(req.pid, &req.data.args) {
            queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .shared_file_maps += 1;
        }
        let ruling = match (&refused, &arbiter) {
            (Some(r), _) => Ruling::Refuse(r.errno),
            (None, Some(a)) if valid => a.rule(&Notice {
                tid: req.pid,
                nr: req.data.nr as i64,
                syscall: super::seccomp::name_of(req.data.nr),
                args: req.data.args,
                kinds: &decoded,
            }),
            _ => Ruling::Continue,
        };
        // A connect past loopback to a port nothing listens on gets its listener before
        // it runs (see [`OnDemand`]).
        if valid && matches!(ruling, Ruling::Continue) && req.data.nr as i64 == libc::SYS_connect {
            if let Some(d) = on_demand.as_mut() {
                let unserved = d.before_connect(&decoded);
                if unserved > 0 {
                    queue
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .connects_unserved += unserved;
                }
            }
        }
        // Always answer: an unanswered notification blocks the server's thread.
        answer(fd, req.id, ruling);
        if valid && !decoded.is_empty() {
            let pid = thread_group(req.pid).unwrap_or(req.pid);
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            for kind in decoded {
                q.record(Attempt {
                    at: Instant::now(),
                    tid: req.pid,
                    pid,
                    syscall: super::seccomp::name_of(req.data.nr),
                    kind,
                });
            }
        }
    }
}

/// Answers notification `id` with `ruling`.
fn answer(listener: i32, id: u64, ruling: Ruling) {
    let (val, error, flags) = match ruling {
        Ruling::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Ruling::Refuse(errno) => (0, -errno, 0),
        Ruling::Done(val) => (val, 0, 0),
        Ruling::Install { fd, cloexec } => {
            let add = libc::seccomp_notif_addfd {
                id,
                flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
                srcfd: fd.as_raw_fd() as u32,
                newfd: 0,
                newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
            };
            // SAFETY: NOTIF_ADDFD with a pointer to a live request naming a descriptor we
            // own; with FLAG_SEND the kernel answers the notification itself on success.
            let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &add) };
            if r >= 0 {
                return;
            }
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE);
            (0, -errno, 0)
        }
    };
    let resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: NOTIF_SEND with a pointer to a live response.
    unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &resp) };
}

impl Pending {
    /// Keeps `a`, as far as the caps allow: at most [`QUEUE_CAP`] records (the rest are
    /// counted), and the environments of programs started at most [`ENV_QUEUE_BUDGET`] bytes
    /// in all (past it a program is kept without its environment, and counted): a server
    /// that starts programs in a loop, each with a large environment, cannot fill the
    /// harness's memory between two checkpoints.
    fn record(&mut self, mut a: Attempt) {
        if self.attempts.len() >= QUEUE_CAP {
            self.dropped += 1;
            return;
        }
        if let AttemptKind::Exec { env, argv, .. } = &mut a.kind {
            let size: usize = env.iter().chain(argv.iter()).map(String::len).sum();
            if self.env_bytes + size > ENV_QUEUE_BUDGET {
                self.env_dropped += 1;
                env.clear();
                argv.truncate(1);
            } else {
                self.env_bytes += size;
            }
        }
        self.attempts.push(a);
    }
}

/// Most environment entries read from a program started.
const MAX_ENV_ENTRIES: u64 = 256;

/// Most bytes of environments held between two checkpoints (past it, programs are recorded
/// without theirs, and counted).
pub const ENV_QUEUE_BUDGET: usize = 32 << 20;

/// Most bytes of a program's environment read in all.
const MAX_ENV_BYTES: usize = 256 << 10;

/// The strings of a NULL-terminated array of string pointers at `array` in the process's
/// memory (an `argv` or an `envp`): at most `entries` of them, each cut to `each` bytes, and
/// no more than `total` bytes in all.
fn read_string_array(
    mem: &std::fs::File,
    array: u64,
    entries: u64,
    each: usize,
    total: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut read = 0usize;
    for i in 0..entries {
        let Some(at) = array.checked_add(i * 8) else {
            break;
        };
        let Some(ptr) = read_mem(mem, at, 8, false) else {
            break;
        };
        if ptr.len() < 8 {
            break;
        }
        let p = u64::from_ne_bytes(ptr[..8].try_into().unwrap_or([0; 8]));
        if p == 0 || read >= total {
            break;
        }
        let text = read_mem(mem, p, each.min(total - read), true)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        read += text.len();
        out.push(text);
    }
    out
}

fn read_mem(mem: &File, addr: u64, max: usize, c_string: bool) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = addr;
    while out.len() < max {
        let page_left = 4096 - (at as usize % 4096);
        let mut buf = vec![0u8; page_left.min(max - out.len())];
        let n = mem.read_at(&mut buf, at).ok()?;
        if n == 0 {
            break;
        }
        buf.truncate(n);
        if c_string {
            if let Some(z) = buf.iter().position(|&b| b == 0) {
                out.extend_from_slice(&buf[..z]);
                return Some(out);
            }
        }
        out.extend_from_slice(&buf);
        at += n as u64;
    }
    Some(out)
}

/// What descriptor `fd` of thread `tid` refers to (its working directory for `AT_FDCWD`).
fn fd_link(tid: u32, fd: i32) -> Option<String> {
    let link = if fd == libc::AT_FDCWD {
        format!("/proc/{tid}/cwd")
    } else {
        format!("/proc/{tid}/fd/{fd}")
    };
    std::fs::read_link(link)
        .ok()
        .map(|p| p.display().to_string())
}

fn dir_of(tid: u32, dirfd: i32) -> String {
    fd_link(tid, dirfd).unwrap_or_else(|| "?".into())
}

fn absolute(tid: u32, dirfd: i32, p: &str) -> String {
    if p.starts_with('/') {
        p.to_string()
    } else {
        format!("{}/{p}", dir_of(tid, dirfd).trim_end_matches('/'))
    }
}

/// The process (thread group id) of a thread.
pub fn thread_group(tid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:").and_then(|v| v.trim().parse().ok()))
}

/// Whether descriptor `fd` of thread `tid` is a datagram socket: a copy of the descriptor
/// is taken with `pidfd_getfd` (the same permission as reading the thread's memory) and asked.
fn is_udp_socket(tid: u32, fd: i32) -> bool {
    let tgid = thread_group(tid).map(|t| t as i32);
    let Some(pid) = tgid.and_then(rustix::process::Pid::from_raw) else {
        return false;
    };
    let Ok(pidfd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        return false;
    };
    let Ok(copy) =
        rustix::process::pidfd_getfd(&pidfd, fd, rustix::process::PidfdGetfdFlags::empty())
    else {
        return false;
    };
    rustix::net::sockopt::socket_type(&copy).is_ok_and(|t| t == rustix::net::SocketType::DGRAM)
}

fn sockaddr(buf: &[u8]) -> Option<(String, String, Option<u16>)> {
    if buf.len() < 2 {
        return None;
    }
    let family = u16::from_ne_bytes([buf[0], buf[1]]) as i32;
    match family {
        libc::AF_INET if buf.len() >= 8 => Some((
            "inet".into(),
            std::net::Ipv4Addr::new(buf[4], buf[5], buf[6], buf[7]).to_string(),
            Some(u16::from_be_bytes([buf[2], buf[3]])),
        )),
        libc::AF_INET6 if buf.len() >= 24 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&buf[8..24]);
            Some((
                "inet6".into(),
                std::net::Ipv6Addr::from(a).to_string(),
                Some(u16::from_be_bytes([buf[2], buf[3]])),
            ))
        }
        libc::AF_UNIX => {
            let p = &buf[2..];
            let name = if p.first() == Some(&0) {
                format!(
                    "@{}",
                    String::from_utf8_lossy(&p[1..]).trim_end_matches('\0')
                )
            } else {
                String::from_utf8_lossy(p.split(|&b| b == 0).next().unwrap_or(&[])).into_owned()
            };
            Some(("unix".into(), name, None))
        }
        // Netlink (getaddrinfo asks the kernel for interfaces) and others are not attempts
        // to reach anybody.
        _ => None,
    }
}

/// Decodes one notification: what it asked for (several destinations for `sendmmsg`), nothing
/// for calls that are not worth recording.
fn decode(req: &libc::seccomp_notif) -> Vec<AttemptKind> {
    if req.data.nr as i64 == libc::SYS_sendmmsg {
        return decode_sendmmsg(req).unwrap_or_default();
    }
    let syscall = super::seccomp::name_of(req.data.nr);
    decode_one(req)
        .map(|kind| match kind {
            AttemptKind::Path {
                path,
                target,
                flags,
            } => {
                // The call acts on what the path names after the kernel resolved it in the
                // sandbox's view; a final symlink is followed by the calls that open.
                let follows = matches!(
                    syscall,
                    "open"
                        | "openat"
                        | "openat2"
                        | "creat"
                        | "truncate"
                        | "chmod"
                        | "fchmodat"
                        | "fchmodat2"
                ) && flags.is_none_or(|f| f & O_NOFOLLOW == 0);
                let second_is_path = !syscall.starts_with("symlink");
                AttemptKind::Path {
                    path: resolve(req.pid, &path, follows),
                    target: target.map(|t| {
                        if second_is_path {
                            resolve(req.pid, &t, false)
                        } else {
                            t
                        }
                    }),
                    flags,
                }
            }
            other => other,
        })
        .into_iter()
        .collect()
}

/// `O_NOFOLLOW`.
const O_NOFOLLOW: u64 = 0o400000;

/// Most symlinks followed while resolving one path (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// The path `path` (absolute, as the thread named it) names once the kernel resolved it in the
/// thread's view: a descriptor path (`/proc/self/fd/N`, `/proc/thread-self/fd/N`, `/dev/fd/N`)
/// becomes what the descriptor refers to, symlinks are followed (the last one only when
/// `follow_last`), `.` and `..` are folded. Each component is looked at through
/// `/proc/TID/root`, so a symlink means what it means inside the sandbox. Best effort: the
/// thread may change things after we looked (these records are evidence of intent).
fn resolve(tid: u32, path: &str, follow_last: bool) -> String {
    let mut path = path.to_string();
    // A symlink may lead to a descriptor path (`/dev/stdout` is `/proc/self/fd/1`), which only
    // the thread's own descriptor table can answer.
    for _ in 0..4 {
        if let Some(target) = descriptor_target(tid, &path) {
            path = target;
        }
        if !path.starts_with('/') {
            // A pipe or socket behind a descriptor: `pipe:[1234]`.
            return path;
        }
        let walked = walk(tid, &path, follow_last);
        if walked == path || descriptor_target(tid, &walked).is_none() {
            return walked;
        }
        path = walked;
    }
    path
}

/// [`resolve`]'s walk through the components, in the thread's root.
fn walk(tid: u32, path: &str, follow_last: bool) -> String {
    let mut todo: std::collections::VecDeque<String> = path
        .split('/')
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        match c.as_str() {
            "." => continue,
            ".." => {
                out.pop();
                continue;
            }
            _ => {}
        }
        let last = todo.is_empty();
        if (!last || follow_last) && links < MAX_LINKS {
            let seen = format!("/proc/{tid}/root/{}", {
                let mut v = out.clone();
                v.push(c.clone());
                v.join("/")
            });
            if let Ok(target) = std::fs::read_link(&seen) {
                links += 1;
                let target = target.to_string_lossy().into_owned();
                if target.starts_with('/') {
                    out.clear();
                }
                for part in target.split('/').rev().filter(|p| !p.is_empty()) {
                    todo.push_front(part.to_string());
                }
                continue;
            }
        }
        out.push(c);
    }
    format!("/{}", out.join("/"))
}

/// What a descriptor path of thread `tid` refers to, with the rest of the path appended.
fn descriptor_target(tid: u32, path: &str) -> Option<String> {
    let rest = ["/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/"]
        .iter()
        .find_map(|prefix| path.strip_prefix(prefix))?;
    let (fd, tail) = rest.split_once('/').unwrap_or((rest, ""));
    let target = fd_link(tid, fd.parse::<u32>().ok()? as i32)?;
    Some(if tail.is_empty() {
        target
    } else {
        format!("{}/{tail}", target.trim_end_matches('/'))
    })
}

/// Most messages of one `sendmmsg` whose destinations are read.
const SENDMMSG_READ: u64 = 64;

/// The distinct destinations of a `sendmmsg` (each `struct mmsghdr` starts with a `msghdr`
/// whose first fields are `msg_name` and `msg_namelen`); messages without a name go where
/// the socket is connected, which the packet socket sees.
fn decode_sendmmsg(req: &libc::seccomp_notif) -> Option<Vec<AttemptKind>> {
    let tid = req.pid;
    let a = req.data.args;
    let mem = File::open(format!("/proc/{tid}/mem")).ok()?;
    let entry = std::mem::size_of::<libc::mmsghdr>() as u64;
    let mut out: Vec<AttemptKind> = Vec::new();
    for i in 0..a[2].min(SENDMMSG_READ) {
        let Some(head) = read_mem(&mem, a[1] + i * entry, 16, false) else {
            break;
        };
        if head.len() < 12 {
            break;
        }
        let name = u64::from_ne_bytes(head[..8].try_into().ok()?);
        let len = u32::from_ne_bytes(head[8..12].try_into().ok()?) as usize;
        if name == 0 || len == 0 {
            continue;
        }
        let Some((family, address, port)) = read_mem(&mem, name, len.min(128), false)
            .as_deref()
            .and_then(sockaddr)
        else {
            continue;
        };
        let kind = AttemptKind::Socket {
            family,
            address,
            port,
            udp: true,
        };
        if !out.contains(&kind) {
            out.push(kind);
        }
    }
    Some(out)
}

fn decode_one(req: &libc::seccomp_notif) -> Option<AttemptKind> {
    let tid = req.pid;
    let a = req.data.args;
    let mem = File::open(format!("/proc/{tid}/mem")).ok()?;
    let s = |addr: u64| -> String {
        read_mem(&mem, addr, 4096, true)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_else(|| "<unreadable>".into())
    };
    let fd_arg = |i: usize| a[i] as i32;
    let path = |path: String, target: Option<String>, flags: Option<u64>| {
        Some(AttemptKind::Path {
            path,
            target,
            flags,
        })
    };
    let nr = req.data.nr as i64;
    #[cfg(target_arch = "x86_64")]
    {
        let cwd = libc::AT_FDCWD;
        match nr {
            libc::SYS_open => return path(absolute(tid, cwd, &s(a[0])), None, Some(a[1])),
            libc::SYS_creat
            | libc::SYS_unlink
            | libc::SYS_mkdir
            | libc::SYS_rmdir
            | libc::SYS_chmod
            | libc::SYS_mknod => {
                return path(absolute(tid, cwd, &s(a[0])), None, None);
            }
            libc::SYS_rename | libc::SYS_link => {
                return path(
                    absolute(tid, cwd, &s(a[0])),
                    Some(absolute(tid, cwd, &s(a[1]))),
                    None,
                );
            }
            libc::SYS_symlink => return path(absolute(tid, cwd, &s(a[1])), Some(s(a[0])), None),
            _ => {}
        }
    }
    match nr {
        libc::SYS_openat => path(absolute(tid, fd_arg(0), &s(a[1])), None, Some(a[2])),
        libc::SYS_openat2 => path(absolute(tid, fd_arg(0), &s(a[1])), None, None),
        libc::SYS_truncate => path(absolute(tid, libc::AT_FDCWD, &s(a[0])), None, None),
        libc::SYS_unlinkat
        | libc::SYS_mkdirat
        | libc::SYS_mknodat
        | libc::SYS_fchmodat
        | libc::SYS_fchmodat2 => path(absolute(tid, fd_arg(0), &s(a[1])), None, None),
        libc::SYS_renameat | libc::SYS_renameat2 | libc::SYS_linkat => path(
            absolute(tid, fd_arg(0), &s(a[1])),
            Some(absolute(tid, fd_arg(2), &s(a[3]))),
            None,
        ),
        libc::SYS_symlinkat => path(absolute(tid, fd_arg(1), &s(a[2])), Some(s(a[0])), None),
        libc::SYS_connect | libc::SYS_bind => {
            let b = read_mem(&mem, a[1], (a[2] as usize).min(128), false)?;
            let (family, address, port) = sockaddr(&b)?;
            let udp = family.starts_with("inet") && is_udp_socket(tid, fd_arg(0));
            Some(AttemptKind::Socket {
                family,
                address,
                port,
                udp,
            })
        }
        libc::SYS_sendto => {
            let b = read_mem(&mem, a[4], (a[5] as usize).min(128), false)?;
            let (family, address, port) = sockaddr(&b)?;
            Some(AttemptKind::Socket {
                family,
                address,
                port,
                udp: true,
            })
        }
        libc::SYS_execve | libc::SYS_execveat => {
            let (path_arg, argv_arg, envp_arg, dirfd) = if nr == libc::SYS_execve {
                (a[0], a[1], a[2], libc::AT_FDCWD)
            } else {
                (a[1], a[2], a[3], fd_arg(0))
            };
            Some(AttemptKind::Exec {
                path: absolute(tid, dirfd, &s(path_arg)),
                argv: read_string_array(&mem, argv_arg, 32, 512, usize::MAX),
                env: read_string_array(&mem, envp_arg, MAX_ENV_ENTRIES, 4096, MAX_ENV_BYTES),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_read_only_mapping_through_a_read_only_descriptor_by_a_lone_process_is_unwritable() {
        use std::os::fd::AsRawFd;
        let t = tempfile::tempdir().expect("tempdir");
        let path = t.path().join("f");
        std::fs::write(&path, b"x").expect("write");
        let read_only = std::fs::File::open(&path).expect("open");
        let writable = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open");
        let tid = rustix::thread::gettid().as_raw_nonzero().get() as u32;
        let args =
            |prot: i32, fd: i32| [0, 4096, prot as u64, libc::MAP_SHARED as u64, fd as u64, 0];
        // This test runs in the host's pid namespace, beside other processes and threads:
        // another thread could swap the descriptor, so even the read-only case counts.
        assert!(!alone_in_its_namespace(tid));
        assert!(!unwritable_map(
            tid,
            &args(libc::PROT_READ, read_only.as_raw_fd())
        ));
        assert!(!unwritable_map(
            tid,
            &args(libc::PROT_READ, writable.as_raw_fd())
        ));
        assert!(!unwritable_map(
            tid,
            &args(libc::PROT_READ | libc::PROT_WRITE, read_only.as_raw_fd())
        ));
        assert!(!unwritable_map(tid, &args(libc::PROT_READ, 987_654)));
    }

    fn exec(env_bytes: usize) -> Attempt {
        Attempt {
            at: Instant::now(),
            tid: 7,
            pid: 7,
            syscall: "execve",
            kind: AttemptKind::Exec {
                path: "/bin/true".into(),
                argv: vec!["true".into()],
                env: vec![format!("PAD={}", "x".repeat(env_bytes.saturating_sub(4)))],
            },
        }
    }

    #[test]
    fn environments_kept_between_checkpoints_are_bounded_in_all() {
        let mut q = Pending::default();
        // 4 MiB a program: the budget holds eight of them.
        for _ in 0..20 {
            q.record(exec((4 << 20) - 16));
        }
        assert_eq!(q.attempts.len(), 20, "every program is recorded");
        let kept = q
            .attempts
            .iter()
            .filter(|a| matches!(&a.kind, AttemptKind::Exec { env, .. } if !env.is_empty()))
            .count();
        assert_eq!(kept, ENV_QUEUE_BUDGET / (4 << 20));
        assert_eq!(q.env_dropped, 20 - kept as u64);
        assert!(q.env_bytes <= ENV_QUEUE_BUDGET);
    }

    #[test]
    fn listeners_are_opened_on_demand_up_to_the_cap_and_the_rest_counted() {
        let (harness, init) = super::super::control::pair().expect("pair");
        let server = std::thread::spawn(move || super::super::connector::serve(init));
        let (sink, listeners) = std::sync::mpsc::channel();
        let mut on_demand = OnDemand::new(
            super::super::connector::Connector::new(harness),
            sink,
            vec![80],
        );
        let connect = |address: &str, port: u16| AttemptKind::Socket {
            family: "inet".into(),
            address: address.into(),
            port: Some(port),
            udp: false,
        };
        // Loopback, an observed port, a datagram: nothing to open.
        let skipped = [
            connect("127.0.0.1", 4444),
            connect("192.0.2.9", 80),
            AttemptKind::Socket {
                family: "inet".into(),
                address: "192.0.2.9".into(),
                port: Some(4444),
                udp: true,
            },
        ];
        assert_eq!(on_demand.before_connect(&skipped), 0);
        assert!(listeners.try_recv().is_err());
        // A documentation address (bound freely, as inside the sandbox every address is
        // local), each port once; past the cap, counted.
        let mut unserved = 0;
        for port in 0..(MAX_ON_DEMAND as u16 + 3) {
            unserved += on_demand.before_connect(&[connect("192.0.2.9", 41000 + port)]);
        }
        assert_eq!(
            on_demand.before_connect(&[connect("192.0.2.9", 41000)]),
            0,
            "once"
        );
        assert_eq!(unserved, 3);
        assert_eq!(listeners.try_iter().count(), MAX_ON_DEMAND);
        drop(on_demand);
        server.join().expect("the init's loop ends");
    }

    #[test]
    fn records_past_the_cap_are_counted_not_kept() {
        let mut q = Pending::default();
        for _ in 0..QUEUE_CAP + 3 {
            q.record(exec(8));
        }
        assert_eq!((q.attempts.len(), q.dropped), (QUEUE_CAP, 3));
    }
}
