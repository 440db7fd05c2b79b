//! Proof that a server is quiet: a look at `/proc` that shows every thread of the server's
//! process tree asleep in a wait that nothing inside the tree can end soon (reading a pipe or
//! socket, a futex or `epoll` without a timeout, waiting for a child, or a timed wait whose
//! deadline is further than the horizon asked for), no thread having run since the look
//! before, no armed timer descriptor due within the horizon, and no connection open in the
//! sandbox's network namespace (where an answer from the observers could still be on its way).
//! Such a tree cannot act before someone outside it does, so a call's window may close at once
//! instead of after a fixed idle period; the fixed period stays the fallback wherever one of
//! these conditions cannot be shown. Deadlines of timed waits are bounded from below by the
//! last look at which the thread was seen to have run (a wait begins after the thread last
//! ran), or the server's start for a thread never seen running.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::sandbox::tree::ProcessTree;

/// Most threads a proof looks at; a larger tree is never proven quiet.
const MAX_THREADS: usize = 512;
/// Most descriptors of one process looked through for timers; more, and no proof.
const MAX_DESCRIPTORS: usize = 512;

/// How a blocked thread waits, read from its `/proc/TID/syscall` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Only an event from outside the thread ends it (input, a wake-up, a child's end).
    Untimed,
    /// It also ends by itself this long after the call began.
    After(Duration),
    /// It also ends by itself this long after the look (an absolute deadline).
    Left(Duration),
    /// Its timeout is in the thread's memory, at this address, in this form.
    Timeout(u64, TimeoutForm),
    /// Not a wait whose end can be bounded (a system call held by the supervisor, a busy
    /// poll, a clock that is not read): no proof.
    Unknown,
}

/// How a timeout passed by pointer is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutForm {
    /// A `struct timespec` counted from the call.
    RelativeTimespec,
    /// A `struct timeval` counted from the call (`select`).
    RelativeTimeval,
    /// A `struct timespec` deadline on the monotonic clock.
    MonotonicDeadline,
    /// A `struct timespec` deadline on the real-time clock.
    RealtimeDeadline,
}

/// Reads the wait of a blocked thread from its `/proc/TID/syscall` line (`NR arg0 … arg5 sp
/// pc`, arguments in hex); a timeout passed by pointer is left to [`read_timeout`].
pub fn wait_of(line: &str) -> Wait {
    let mut fields = line.split_whitespace();
    let Some(nr) = fields.next().and_then(|f| f.parse::<i64>().ok()) else {
        return Wait::Unknown;
    };
    let hex = |f: &str| u64::from_str_radix(f.trim_start_matches("0x"), 16).ok();
    let args: Vec<u64> = fields.take(6).filter_map(hex).collect();
    if args.len() < 6 {
        return Wait::Unknown;
    }
    // A timeout passed by pointer: null waits forever.
    let pointer = |arg: u64, form: TimeoutForm| {
        if arg == 0 {
            Wait::Untimed
        } else {
            Wait::Timeout(arg, form)
        }
    };
    match nr {
        libc::SYS_read
        | libc::SYS_readv
        | libc::SYS_recvfrom
        | libc::SYS_recvmsg
        | libc::SYS_accept4
        | libc::SYS_wait4
        | libc::SYS_waitid
        | libc::SYS_rt_sigsuspend => Wait::Untimed,
        libc::SYS_futex => futex_wait(args[1], args[3]),
        libc::SYS_epoll_pwait => millis_wait(args[3]),
        libc::SYS_ppoll => pointer(args[2], TimeoutForm::RelativeTimespec),
        libc::SYS_pselect6 => pointer(args[4], TimeoutForm::RelativeTimespec),
        libc::SYS_epoll_pwait2 => pointer(args[3], TimeoutForm::RelativeTimespec),
        libc::SYS_clock_nanosleep => {
            let absolute = args[1] & libc::TIMER_ABSTIME as u64 != 0;
            match (args[0] as i32, absolute) {
                (_, false) => Wait::Timeout(args[2], TimeoutForm::RelativeTimespec),
                (libc::CLOCK_MONOTONIC, true) => {
                    Wait::Timeout(args[2], TimeoutForm::MonotonicDeadline)
                }
                (libc::CLOCK_REALTIME, true) => {
                    Wait::Timeout(args[2], TimeoutForm::RealtimeDeadline)
                }
                _ => Wait::Unknown,
            }
        }
        _ => arch_wait_of(nr, &args),
    }
}

/// A `futex` wait: no timeout waits for a wake-up; `FUTEX_WAIT` counts its timeout from
/// the call, the others take a deadline (on the real-time clock with
/// `FUTEX_CLOCK_REALTIME`, and always for `FUTEX_LOCK_PI`).
fn futex_wait(op: u64, timeout: u64) -> Wait {
    const FUTEX_WAIT: u64 = 0;
    const FUTEX_LOCK_PI: u64 = 6;
    const FUTEX_WAIT_BITSET: u64 = 9;
    const FUTEX_WAIT_REQUEUE_PI: u64 = 11;
    const FUTEX_LOCK_PI2: u64 = 13;
    const PRIVATE: u64 = 128;
    const CLOCK_REALTIME: u64 = 256;
    let form = match op & !(PRIVATE | CLOCK_REALTIME) {
        FUTEX_WAIT => TimeoutForm::RelativeTimespec,
        FUTEX_LOCK_PI => TimeoutForm::RealtimeDeadline,
        FUTEX_WAIT_BITSET | FUTEX_WAIT_REQUEUE_PI | FUTEX_LOCK_PI2 if op & CLOCK_REALTIME != 0 => {
            TimeoutForm::RealtimeDeadline
        }
        FUTEX_WAIT_BITSET | FUTEX_WAIT_REQUEUE_PI | FUTEX_LOCK_PI2 => {
            TimeoutForm::MonotonicDeadline
        }
        _ => return Wait::Unknown,
    };
    if timeout == 0 {
        Wait::Untimed
    } else {
        Wait::Timeout(timeout, form)
    }
}

/// The waits that only some architectures have as system calls of their own.
#[cfg(target_arch = "x86_64")]
fn arch_wait_of(nr: i64, args: &[u64]) -> Wait {
    match nr {
        libc::SYS_accept | libc::SYS_pause => Wait::Untimed,
        libc::SYS_epoll_wait => millis_wait(args[3]),
        libc::SYS_poll => millis_wait(args[2]),
        libc::SYS_select if args[4] == 0 => Wait::Untimed,
        libc::SYS_select => Wait::Timeout(args[4], TimeoutForm::RelativeTimeval),
        libc::SYS_nanosleep => Wait::Timeout(args[0], TimeoutForm::RelativeTimespec),
        _ => Wait::Unknown,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn arch_wait_of(_nr: i64, _args: &[u64]) -> Wait {
    Wait::Unknown
}

/// A timeout in milliseconds passed as a C int: negative waits forever, zero does not wait.
fn millis_wait(arg: u64) -> Wait {
    match arg as u32 as i32 {
        t if t < 0 => Wait::Untimed,
        0 => Wait::Unknown,
        t => Wait::After(Duration::from_millis(t as u64)),
    }
}

/// Reads a timeout that a blocked thread passed by pointer from its memory. The value was
/// copied by the kernel when the wait began; the thread's memory can have changed since
/// (another thread of the server writing it), which at worst makes a window close before a
/// wake-up that lineage then attributes to the call that started the thread.
pub fn read_timeout(tid: u32, address: u64, form: TimeoutForm) -> Wait {
    use std::os::unix::fs::FileExt;
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open(format!("/proc/{tid}/mem"))
        .and_then(|mem| mem.read_exact_at(&mut bytes, address));
    if read.is_err() {
        return Wait::Unknown;
    }
    let seconds = i64::from_ne_bytes(bytes[..8].try_into().unwrap_or_default());
    let fraction = i64::from_ne_bytes(bytes[8..].try_into().unwrap_or_default());
    let nanos = match form {
        TimeoutForm::RelativeTimeval => fraction.saturating_mul(1000),
        _ => fraction,
    };
    if seconds < 0 || !(0..1_000_000_000).contains(&nanos) {
        return Wait::Unknown;
    }
    let value = Duration::new(seconds as u64, nanos as u32);
    let now = |clock| {
        let t = rustix::time::clock_gettime(clock);
        Duration::new(
            t.tv_sec.max(0) as u64,
            t.tv_nsec.clamp(0, 999_999_999) as u32,
        )
    };
    match form {
        TimeoutForm::RelativeTimespec | TimeoutForm::RelativeTimeval => Wait::After(value),
        TimeoutForm::MonotonicDeadline => {
            Wait::Left(value.saturating_sub(now(rustix::time::ClockId::Monotonic)))
        }
        TimeoutForm::RealtimeDeadline => {
            Wait::Left(value.saturating_sub(now(rustix::time::ClockId::Realtime)))
        }
    }
}

/// How far ahead a look must prove a tree quiet.
#[derive(Debug, Clone, Copy)]
pub struct Horizon<'a> {
    /// Every thread: at least this long after the look.
    pub all: Duration,
    /// Some threads until this instant (the end of the longest wait for them): while they
    /// can act on their own they hold a window open.
    pub held: Option<(Held<'a>, Instant)>,
}

/// The threads a [`Horizon`] holds longer.
#[derive(Debug, Clone, Copy)]
pub enum Held<'a> {
    /// Those not in the list: threads a call started.
    NotIn(&'a [u32]),
    /// Those in the list: threads earlier calls left behind.
    In(&'a [u32]),
}

impl Horizon<'_> {
    /// The same horizon for every thread.
    pub fn every_thread(all: Duration) -> Self {
        Self { all, held: None }
    }
}

/// One thread as one look saw it.
#[derive(Debug, Clone)]
struct ThreadSeen {
    pid: u32,
    /// Its state letter from `/proc/TID/stat` (`S`, `R`, `D`, …).
    state: char,
    /// CPU time in nanoseconds (`/proc/TID/schedstat`).
    runtime: u64,
    wait: Wait,
}

/// What was known of a thread's activity at the last look.
#[derive(Debug, Clone, Copy)]
struct History {
    runtime: u64,
    /// The thread has not run since this instant (its current wait began after it).
    idle_since: Instant,
}

/// Looks at one server's process tree over its life and says when it is provably quiet. One
/// per server start: threads first seen are taken to have waited since the server started.
#[derive(Debug)]
pub struct Quiescence {
    started: Instant,
    last_look: Option<Instant>,
    history: HashMap<u32, History>,
    /// Per network namespace, its socket counts and the sockets the server's processes held
    /// when its tables last showed no connection: the same need no new reading of the
    /// tables.
    clean_counts: HashMap<std::path::PathBuf, (SocketCounts, Vec<u64>)>,
    /// The port the server serves MCP on (`--transport http`): hintcheck's own connections
    /// to it carry nothing while their queues are empty.
    transport_port: Option<u16>,
    /// The live threads the last look saw, with whether any was running or in
    /// uninterruptible sleep (`None` when it could not read them all).
    last_seen: Option<(Vec<u32>, bool)>,
    /// How many windows a proof closed, and how many the idle period closed.
    pub proven: u32,
    pub by_idle_period: u32,
}

impl Quiescence {
    /// For a server started at `started` (any wait of its threads began after it).
    pub fn new(started: Instant) -> Self {
        Self {
            started,
            last_look: None,
            history: HashMap::new(),
            clean_counts: HashMap::new(),
            transport_port: None,
            last_seen: None,
            proven: 0,
            by_idle_period: 0,
        }
    }

    /// For a server that serves MCP over HTTP on `port`.
    pub fn serving_on(mut self, port: Option<u16>) -> Self {
        self.transport_port = port;
        self
    }

    /// Looks at `tree` and says whether it is proven quiet as far as `horizon` asks:
    /// nothing in it ran since the previous look, every thread waits for an outside event or
    /// until after the horizon, no timer descriptor is due within it, and no connection is
    /// open in its network namespace. The first look after a gap only records.
    pub fn look(&mut self, tree: &ProcessTree, horizon: Horizon<'_>) -> bool {
        let Some(pids) = self.threads_quiet(tree, horizon) else {
            return false;
        };
        // Each process's descriptors, read once for its timers and the sockets it holds.
        let Some(descriptors) = pids
            .iter()
            .map(|pid| descriptors_of(*pid))
            .collect::<Option<Vec<_>>>()
        else {
            return false;
        };
        pids.iter()
            .zip(&descriptors)
            .all(|(pid, fds)| no_timer_due_within(*pid, fds, horizon.all).unwrap_or(false))
            && self.no_connection_open(&pids, &sockets_held(&descriptors))
    }

    /// What the last look saw of the tree's threads: every live thread, and whether any was
    /// running or in uninterruptible sleep (what [`ProcessTree::tasks`] and
    /// [`ProcessTree::busy`] would read again); `None` when it could not read them all.
    pub fn last_seen(&self) -> Option<&(Vec<u32>, bool)> {
        self.last_seen.as_ref()
    }

    /// The thread part of [`Quiescence::look`]: the processes of a tree whose threads are all
    /// proven to wait past the horizon, or `None`.
    fn threads_quiet(&mut self, tree: &ProcessTree, horizon: Horizon<'_>) -> Option<Vec<u32>> {
        let now = Instant::now();
        let previous = self.last_look.replace(now);
        let bound = previous.unwrap_or(self.started);
        let Some(threads) = threads_of(tree) else {
            self.history.clear();
            self.last_seen = None;
            return None;
        };
        self.last_seen = Some((
            threads.keys().copied().collect(),
            threads.values().any(|t| matches!(t.state, 'R' | 'D')),
        ));
        let mut quiet = previous.is_some() && threads.len() == self.history.len();
        let mut next = HashMap::with_capacity(threads.len());
        for (tid, seen) in &threads {
            let history = match self.history.get(tid) {
                Some(h) if h.runtime == seen.runtime => *h,
                _ => {
                    quiet = false;
                    History {
                        runtime: seen.runtime,
                        idle_since: bound,
                    }
                }
            };
            next.insert(*tid, history);
            if !quiet {
                continue;
            }
            let mut until = now + horizon.all;
            if let Some((held, end)) = horizon.held
                && match held {
                    Held::NotIn(list) => !list.contains(tid),
                    Held::In(list) => list.contains(tid),
                }
            {
                until = until.max(end);
            }
            quiet = seen.state == 'S'
                && match seen.wait {
                    Wait::Untimed => true,
                    Wait::After(timeout) => history.idle_since + timeout >= until,
                    Wait::Left(left) => now + left >= until,
                    Wait::Timeout(..) | Wait::Unknown => false,
                };
        }
        self.history = next;
        if !quiet {
            return None;
        }
        let mut pids: Vec<u32> = threads.values().map(|t| t.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        Some(pids)
    }

    /// Whether the network namespaces of `pids` hold no TCP connection (only listeners and
    /// closed ones) and no datagram socket but the DNS stub's: an exchange with the observers
    /// is then not in flight. A process in hintcheck's own namespace (no sandbox) is never
    /// proven: the host's sockets say nothing of the server's. The tables are read again only
    /// when the namespace's socket counts, or the sockets the server's processes hold,
    /// changed since they last showed no connection (a connection that closed and another
    /// that opened since can leave the counts as they were, not the sockets held).
    fn no_connection_open(&mut self, pids: &[u32], held: &[u64]) -> bool {
        let own = std::fs::read_link("/proc/self/ns/net").ok();
        let mut namespaces: Vec<(std::path::PathBuf, u32)> = Vec::new();
        for pid in pids {
            let Ok(ns) = std::fs::read_link(format!("/proc/{pid}/ns/net")) else {
                continue;
            };
            if Some(&ns) == own.as_ref() {
                return false;
            }
            if !namespaces.iter().any(|(n, _)| *n == ns) {
                namespaces.push((ns, *pid));
            }
        }
        namespaces.into_iter().all(|(ns, pid)| {
            let read = |table: &str| read_net_table(&format!("/proc/{pid}/net/{table}"));
            let (Ok(v4), Ok(v6)) = (read("sockstat"), read("sockstat6")) else {
                return false;
            };
            let counts = SocketCounts::of(&v4, &v6);
            let key = (counts, held.to_vec());
            if self.clean_counts.get(&ns) == Some(&key) {
                return true;
            }
            // No TCP socket in the namespace's hash: no connection, no listener (and so
            // nothing waiting in one's queue) and no connect under way; the TCP tables say
            // nothing more (where the namespace shares the host's table, as without the
            // sandbox's own, each of their reads scans it whole).
            let clean = (key.0.tcp_hashed() == Some(0)
                || ["tcp", "tcp6"].iter().all(|t| {
                    read(t).is_ok_and(|text| no_tcp_connection(&text, self.transport_port))
                }))
                && ["udp", "udp6"]
                    .iter()
                    .all(|t| read(t).is_ok_and(|text| only_dns_stub(&text)));
            if clean {
                self.clean_counts.insert(ns, key);
            }
            clean
        })
    }

    /// Whether a thread other than its process's main thread waits with a deadline due
    /// within `horizon` of now (a worker that sleeps before doing its part): start-up work
    /// still to come.
    pub fn worker_due_within(&self, tree: &ProcessTree, horizon: Duration) -> bool {
        let now = Instant::now();
        threads_of(tree).is_some_and(|threads| {
            threads.iter().any(|(tid, seen)| {
                let since = self.history.get(tid).map_or(self.started, |h| h.idle_since);
                *tid != seen.pid
                    && match seen.wait {
                        Wait::After(timeout) => since + timeout < now + horizon,
                        Wait::Left(left) => left < horizon,
                        _ => false,
                    }
            })
        })
    }

    /// Counts how a window closed: by a proof or by the idle period.
    pub fn counted(&mut self, proven: bool) {
        if proven {
            self.proven += 1;
        } else {
            self.by_idle_period += 1;
        }
    }
}

/// Every live thread of the tree, or none when the tree is larger than a proof looks at.
fn threads_of(tree: &ProcessTree) -> Option<HashMap<u32, ThreadSeen>> {
    use crate::sandbox::tree::{read_proc, state_of};
    let mut out = HashMap::new();
    for t in tree.task_dirs() {
        let Ok(stat) = read_proc(t.dir.join("stat")) else {
            continue;
        };
        let state = state_of(&stat)
            .and_then(|s| s.chars().next())
            .unwrap_or('?');
        if matches!(state, 'Z' | 'X') {
            continue;
        }
        let runtime = t.runtime()?;
        let wait = match read_proc(t.dir.join("syscall")).map(|l| wait_of(&l)) {
            Ok(Wait::Timeout(address, form)) => read_timeout(t.tid, address, form),
            Ok(wait) => wait,
            Err(_) => Wait::Unknown,
        };
        out.insert(
            t.tid,
            ThreadSeen {
                pid: t.pid,
                state,
                runtime,
                wait,
            },
        );
        if out.len() > MAX_THREADS {
            return None;
        }
    }
    Some(out)
}

/// The descriptors of process `pid`: each one's number and what it refers to (its link's
/// target); `None` when they could not all be read or there are more than
/// [`MAX_DESCRIPTORS`]. One closed while the list is read is left out.
fn descriptors_of(pid: u32) -> Option<Vec<(String, std::path::PathBuf)>> {
    let mut out = Vec::new();
    for (i, fd) in std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .enumerate()
    {
        if i >= MAX_DESCRIPTORS {
            return None;
        }
        let fd = fd.ok()?;
        if let Ok(target) = std::fs::read_link(fd.path()) {
            out.push((fd.file_name().into_string().ok()?, target));
        }
    }
    Some(out)
}

/// Whether no timer descriptor among `pid`'s `descriptors` is armed to fire within
/// `horizon` (its remaining time from `/proc/PID/fdinfo/FD`); `None` when one could not be
/// looked at.
fn no_timer_due_within(
    pid: u32,
    descriptors: &[(String, std::path::PathBuf)],
    horizon: Duration,
) -> Option<bool> {
    for (fd, target) in descriptors {
        if target.as_os_str() != "anon_inode:[timerfd]" {
            continue;
        }
        let info = crate::sandbox::tree::read_proc(format!("/proc/{pid}/fdinfo/{fd}")).ok()?;
        match timer_remaining(&info) {
            Some(left) if left.is_zero() || left >= horizon => {}
            _ => return Some(false),
        }
    }
    Some(true)
}

/// The sockets among the processes' `descriptors` (their inode numbers, sorted, once each).
fn sockets_held(descriptors: &[Vec<(String, std::path::PathBuf)>]) -> Vec<u64> {
    let mut inodes: Vec<u64> = descriptors
        .iter()
        .flatten()
        .filter_map(|(_, target)| {
            target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect();
    inodes.sort_unstable();
    inodes.dedup();
    inodes
}

/// A network namespace's own socket counts, from its `sockstat` and `sockstat6`: every
/// `name value` pair but those the kernel counts for the whole machine (orphans, sockets
/// allocated, memory), which change with the host's traffic and say nothing of the
/// namespace's sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SocketCounts(Vec<(String, String)>);

/// The `sockstat` fields that count for the whole machine, not the namespace.
const MACHINE_WIDE_SOCKET_COUNTS: [&str; 4] = ["orphan", "alloc", "mem", "memory"];

impl SocketCounts {
    fn of(sockstat: &str, sockstat6: &str) -> SocketCounts {
        let mut counts = Vec::new();
        for line in sockstat.lines().chain(sockstat6.lines()) {
            let Some((protocol, fields)) = line.split_once(':') else {
                continue;
            };
            let fields: Vec<&str> = fields.split_whitespace().collect();
            for pair in fields.chunks(2) {
                if let [name, value] = pair
                    && !MACHINE_WIDE_SOCKET_COUNTS.contains(name)
                {
                    counts.push((format!("{protocol} {name}"), (*value).to_string()));
                }
            }
        }
        SocketCounts(counts)
    }

    /// The namespace's TCP sockets in the kernel's hash (IPv4 and IPv6: listening,
    /// connecting, connected or closing, not yet closed), when both counts were read.
    fn tcp_hashed(&self) -> Option<u64> {
        let count = |key: &str| {
            self.0
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, v)| v.parse::<u64>().ok())
        };
        Some(count("TCP inuse")? + count("TCP6 inuse")?)
    }
}

/// A `/proc/PID/net/*` table, read in as few reads as it allows: each read of the TCP
/// tables scans the namespace's whole connection hash (the host's, 4 ms on a machine with
/// much memory, where the sandbox's namespace could not get one of its own: see
/// `sandbox::netns::own_connection_table`), and a read from an empty buffer starts with a
/// 32-byte probe.
fn read_net_table(path: &str) -> std::io::Result<String> {
    crate::sandbox::tree::read_proc_into(path, 64 * 1024)
}

/// The time left before a timer descriptor fires (zero when disarmed), from its fdinfo's
/// `it_value: (SEC, NSEC)` line.
fn timer_remaining(fdinfo: &str) -> Option<Duration> {
    let line = fdinfo.lines().find(|l| l.starts_with("it_value:"))?;
    let inner = line.split_once('(')?.1.split_once(')')?.0;
    let (sec, nsec) = inner.split_once(',')?;
    Some(Duration::new(
        sec.trim().parse().ok()?,
        nsec.trim().parse().ok()?,
    ))
}

/// A `/proc/net/tcp` table with only listening (`0A`) and closed (`07`) sockets,
/// connections in `TIME_WAIT` (`06`), which hold no socket of any process, and idle
/// connections to `transport` (hintcheck's own, to the server's MCP port: nothing queued
/// either way).
fn no_tcp_connection(table: &str, transport: Option<u16>) -> bool {
    let port = |address: &str| {
        address
            .rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
    };
    table.lines().skip(1).all(|row| {
        let columns: Vec<&str> = row.split_whitespace().collect();
        let [_, local, remote, state, queues, ..] = columns[..] else {
            return false;
        };
        matches!(state, "0A" | "07" | "06")
            || transport.is_some_and(|t| port(local) == Some(t) || port(remote) == Some(t))
                && queues == "00000000:00000000"
    })
}

/// A `/proc/net/udp` table whose only sockets are bound to port 53 (the observers' DNS stub).
fn only_dns_stub(table: &str) -> bool {
    table.lines().skip(1).all(|row| {
        row.split_whitespace()
            .nth(1)
            .and_then(|local| local.rsplit_once(':'))
            .is_some_and(|(_, port)| port == "0035")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sockets_a_process_holds_are_listed() {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let me = std::process::id();
        let held_now = || sockets_held(&[descriptors_of(me).expect("our own descriptors")]);
        let before = held_now();
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
        let inode = std::fs::metadata(format!("/proc/self/fd/{}", socket.as_raw_fd()))
            .expect("the socket's inode")
            .ino();
        let held = held_now();
        assert!(held.contains(&inode), "{held:?} lacks {inode}");
        assert!(!before.contains(&inode));
        assert!(held.windows(2).all(|w| w[0] < w[1]), "sorted, once each");
        // A process that is gone: nothing can be said.
        assert_eq!(descriptors_of(u32::MAX), None);
    }

    #[test]
    fn socket_counts_are_the_namespaces_own() {
        let sockstat = |inuse: u32, alloc: u32, mem: u32| {
            format!(
                "sockets: used 3\nTCP: inuse {inuse} orphan 0 tw 1 alloc {alloc} mem {mem}\n\
                 UDP: inuse 1 mem {mem}\nUDPLITE: inuse 0\nRAW: inuse 0\nFRAG: inuse 0 memory 0\n"
            )
        };
        let six = |inuse: u32| format!("TCP6: inuse {inuse}\nUDP6: inuse 0\nRAW6: inuse 0\n");
        // The host's traffic moves the machine-wide counts, not the namespace's.
        let quiet = SocketCounts::of(&sockstat(0, 1, 0), &six(0));
        assert_eq!(quiet, SocketCounts::of(&sockstat(0, 57, 12), &six(0)));
        assert_eq!(quiet.tcp_hashed(), Some(0));
        // A socket of its own is a different count, in either family.
        let listening = SocketCounts::of(&sockstat(1, 1, 0), &six(0));
        assert_ne!(quiet, listening);
        assert_eq!(listening.tcp_hashed(), Some(1));
        assert_eq!(
            SocketCounts::of(&sockstat(0, 1, 0), &six(2)).tcp_hashed(),
            Some(2)
        );
        // Counts that could not be read prove nothing.
        assert_eq!(SocketCounts::of("", &six(0)).tcp_hashed(), None);
    }

    #[test]
    fn waits_are_read_from_syscall_lines() {
        let line = |nr: i64, args: &str| format!("{nr} {args} 0x7ffd 0x7f01");
        assert_eq!(
            wait_of(&line(libc::SYS_read, "0x0 0x55 0x2000 0x0 0x0 0x0")),
            Wait::Untimed
        );
        // Node's main thread with a timer 7.8 s away, and its worker's epoll without one.
        assert_eq!(
            wait_of(&line(
                libc::SYS_epoll_pwait,
                "0xd 0x7ffe 0x400 0x1e82 0x0 0x8"
            )),
            Wait::After(Duration::from_millis(7810))
        );
        assert_eq!(
            wait_of(&line(
                libc::SYS_epoll_pwait,
                "0x9 0x7fd4 0x400 0xffffffff 0x0 0x8"
            )),
            Wait::Untimed
        );
        // A zero timeout polls; a pointer to a timeout is not read.
        assert_eq!(
            wait_of(&line(libc::SYS_epoll_pwait, "0x9 0x7fd4 0x400 0x0 0x0 0x8")),
            Wait::Unknown
        );
        assert_eq!(
            wait_of(&line(libc::SYS_ppoll, "0x7f00 0x2 0x7ffd1000 0x0 0x8 0x0")),
            Wait::Timeout(0x7ffd1000, TimeoutForm::RelativeTimespec)
        );
        assert_eq!(
            wait_of(&line(libc::SYS_ppoll, "0x7f00 0x2 0x0 0x0 0x8 0x0")),
            Wait::Untimed
        );
        // An idle pool worker, and a sleep.
        assert_eq!(
            wait_of(&line(
                libc::SYS_futex,
                "0x7f00 0x189 0x0 0x0 0x0 0xffffffff"
            )),
            Wait::Untimed
        );
        assert_eq!(
            wait_of(&line(
                libc::SYS_clock_nanosleep,
                "0x0 0x0 0x7ffd 0x7ffd 0x0 0x0"
            )),
            Wait::Timeout(0x7ffd, TimeoutForm::RelativeTimespec)
        );
        // A pool worker waiting with a deadline (Python's timed condition waits).
        assert_eq!(
            wait_of(&line(
                libc::SYS_futex,
                "0x7f00 0x89 0x0 0x7f3bdeffcb20 0x0 0xffffffff"
            )),
            Wait::Timeout(0x7f3bdeffcb20, TimeoutForm::MonotonicDeadline)
        );
        // An open held by the seccomp supervisor, a running thread, a thread outside a call.
        assert_eq!(
            wait_of(&line(
                libc::SYS_openat,
                "0xffffff9c 0x7ffe 0x80441 0x1b6 0x0 0x0"
            )),
            Wait::Unknown
        );
        assert_eq!(wait_of("running"), Wait::Unknown);
        assert_eq!(wait_of("-1 0x0 0x0"), Wait::Unknown);
    }

    #[test]
    fn network_tables_and_timers_are_read() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue\n   0: 00000000:0050 00000000:0000 0A 00000000:00000000\n   1: 0100007F:D2F0 0100007F:0050 06 00000000:00000000\n";
        assert!(no_tcp_connection(tcp, None));
        let open = format!("{tcp}   2: 0100007F:D2F2 0100007F:0050 01 00000000:00000000\n");
        assert!(!no_tcp_connection(&open, None));
        // hintcheck's idle connection to the server's MCP port (8080), and one with bytes
        // still queued.
        let transport = format!("{tcp}   2: 0100007F:D2F2 0100007F:1F90 01 00000000:00000000\n");
        assert!(no_tcp_connection(&transport, Some(8080)));
        assert!(!no_tcp_connection(&transport, None));
        let queued = format!("{tcp}   2: 0100007F:D2F2 0100007F:1F90 01 00000000:00000010\n");
        assert!(!no_tcp_connection(&queued, Some(8080)));
        let udp = "   sl  local_address rem_address   st\n  1: 00000000:0035 00000000:0000 07\n";
        assert!(only_dns_stub(udp));
        assert!(!only_dns_stub(&format!(
            "{udp}  2: 0100007F:A1B2 0100007F:0035 01\n"
        )));
        let armed = "pos:\t0\nflags:\t02\nclockid: 1\nticks: 0\nsettime flags: 00\nit_value: (0, 4000000)\nit_interval: (0, 0)\n";
        assert_eq!(timer_remaining(armed), Some(Duration::from_millis(4)));
        assert_eq!(
            timer_remaining("it_value: (3, 0)\n"),
            Some(Duration::from_secs(3))
        );
    }

    /// Looks at `tree` until its threads are proven quiet for `horizon`, at most 200 times.
    fn threads_proven(tree: &ProcessTree, horizon: Duration) -> bool {
        let mut quiet = Quiescence::new(Instant::now());
        (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(2));
            quiet
                .threads_quiet(tree, Horizon::every_thread(horizon))
                .is_some()
        })
    }

    #[test]
    fn a_tree_waiting_for_input_is_proven_quiet_and_a_sleeping_or_busy_one_is_not() {
        let short = Duration::from_millis(10);
        let mut cat = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("cat");
        let proven = threads_proven(&ProcessTree::new(cat.id()), short);
        let mut quiet = Quiescence::new(Instant::now());
        let tree = ProcessTree::new(cat.id());
        // This process's own network namespace is the host's: the whole proof never holds.
        let whole = (0..20).any(|_| {
            std::thread::sleep(Duration::from_millis(2));
            quiet.look(&tree, Horizon::every_thread(short))
        });
        let _ = cat.kill();
        let _ = cat.wait();
        assert!(proven, "cat waiting for its input was not proven quiet");
        assert!(
            !whole,
            "a tree in the host's network namespace was proven quiet"
        );
        // A sleep of 5 s is quiet for a short horizon (its timeout read from its memory),
        // not for one past its end.
        let mut sleep = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let tree = ProcessTree::new(sleep.id());
        let quiet_for_a_while = threads_proven(&tree, short);
        let quiet_past_its_end = threads_proven(&tree, Duration::from_secs(6));
        let _ = sleep.kill();
        let _ = sleep.wait();
        assert!(
            quiet_for_a_while,
            "a sleep of 5 s was not proven quiet for 10 ms"
        );
        assert!(
            !quiet_past_its_end,
            "a sleep of 5 s was proven quiet for 6 s"
        );
        // A shell counting keeps running.
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done"])
            .spawn()
            .expect("sh");
        let proven = threads_proven(&ProcessTree::new(busy.id()), short);
        let _ = busy.kill();
        let _ = busy.wait();
        assert!(!proven, "a busy process was proven quiet");
    }
}
