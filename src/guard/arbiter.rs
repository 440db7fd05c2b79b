//! The per-call decisions: every write, delete, rename, shared mapping and network attempt the
//! sandbox reports is answered under the policy in force at that moment (the hints of the
//! calls in flight, or the outside-calls policy). A refusal may rest on the thread's memory
//! (refusing is always safe); an allowance that depends on a path is never a `CONTINUE`: the
//! operation is done for the server beneath a directory opened before it started
//! ([`crate::sandbox::perform`]), so a path swapped after the check changes nothing.

use std::path::Path;
use std::sync::OnceLock;

use rustix::fs::{Mode, OFlags, RenameFlags};

use super::journal::{Entry, Process, Refusals, Tried};
use super::policy::{Now, Policy, Rule};
use crate::sandbox::notify::{Arbiter, AttemptKind, Notice, Ruling};
use crate::sandbox::perform::{self, Place};

/// The directories the server may change, as guard sees them.
#[derive(Debug)]
pub struct Places {
    /// The server's own state directory (`--state-dir`).
    pub state: Place,
    /// What `--allow-write` names.
    pub writable: Vec<Place>,
}

/// Guard's [`Arbiter`].
pub struct GuardArbiter {
    refusals: Refusals,
    places: Places,
    /// The sandbox's own tmpfs mounts (its /tmp, /var/tmp, /dev/shm), part of the server's
    /// own state: opened through the server's root at the first notification (its own
    /// `execve`, before any of its code ran).
    temporary: OnceLock<Vec<Place>>,
    /// Files the server created in the shared directories while guard ran (device, inode):
    /// its own to delete, empty or replace in a non-destructive window (lock files, journals).
    created: std::sync::Mutex<std::collections::HashSet<(u64, u64)>>,
}

/// Most files remembered as the server's own creations.
const CREATED_CAP: usize = 100_000;

const O_TRUNC: u64 = libc::O_TRUNC as u64;
const O_CREAT: u64 = libc::O_CREAT as u64;
const O_EXCL: u64 = libc::O_EXCL as u64;
const O_CLOEXEC: u64 = libc::O_CLOEXEC as u64;

impl GuardArbiter {
    /// An arbiter deciding under `window`'s policy, recording in `journal`.
    pub fn new(refusals: Refusals, places: Places) -> Self {
        GuardArbiter {
            refusals,
            places,
            temporary: OnceLock::new(),
            created: Default::default(),
        }
    }

    /// The place of the server's own state holding `path`, with the path relative to it:
    /// the state directory, or the sandbox's own tmpfs mounts (but for the shared
    /// directories bound inside them).
    fn own_state(&self, path: &str) -> Option<(&Place, String)> {
        if let Some(rel) = self.places.state.relative(path) {
            return Some((&self.places.state, rel));
        }
        if self
            .places
            .writable
            .iter()
            .any(|p| p.relative(path).is_some())
        {
            return None;
        }
        self.temporary
            .get()
            .into_iter()
            .flatten()
            .find_map(|p| p.relative(path).map(|r| (p, r)))
    }

    /// The place `--allow-write` names or the server's own state holding `path`.
    fn writable(&self, path: &str) -> Option<(&Place, String)> {
        self.own_state(path).or_else(|| {
            self.places
                .writable
                .iter()
                .find_map(|p| p.relative(path).map(|r| (p, r)))
        })
    }

    fn entry(&self, n: &Notice<'_>, now: &Now, rule: Option<Rule>, tried: &Tried<'_>) -> Entry {
        let pid = crate::sandbox::notify::thread_group(n.tid).unwrap_or(n.tid);
        let armed_by = if now.calls.is_empty() {
            self.refusals.window().armed_by(
                n.tid,
                started_ns(pid, Some(n.tid)),
                started_ns(pid, None),
            )
        } else {
            None
        };
        Entry::refusal(
            now,
            rule,
            tried,
            n.syscall,
            Some(Process::of(pid, n.tid)),
            armed_by,
        )
    }

    /// Refuses the call with EACCES and records why.
    fn refuse(&self, n: &Notice<'_>, now: &Now, rule: Option<Rule>, tried: Tried<'_>) -> Ruling {
        let entry = self.entry(n, now, rule, &tried);
        self.refusals.record(now, entry);
        Ruling::Refuse(libc::EACCES)
    }

    /// Records a write allowed in the server's own state during a read-only call.
    fn allowed(&self, n: &Notice<'_>, now: &Now, tried: Tried<'_>) {
        if now.calls.is_empty() || !now.policy.read_only {
            return;
        }
        let mut entry = self.entry(n, now, Some(Rule::ReadOnly), &tried);
        entry.decision = "allowed".into();
        entry.reason = "in the server's own state directory".into();
        self.refusals.record_allowed(entry);
    }

    /// Remembers that the server created the file open as `fd`.
    fn remember_created(&self, fd: &std::os::fd::OwnedFd) {
        if let Ok(st) = rustix::fs::fstat(fd) {
            let mut created = self.created.lock().unwrap_or_else(|p| p.into_inner());
            if created.len() < CREATED_CAP {
                created.insert((st.st_dev, st.st_ino));
            }
        }
    }

    /// Forgets a creation that was removed.
    fn forget_created(&self, id: (u64, u64)) {
        self.created
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
    }

    /// Whether the server created `(device, inode)` while guard ran.
    fn server_created(&self, id: (u64, u64)) -> bool {
        self.created
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&id)
    }

    fn file_rule(policy: Policy) -> Rule {
        if policy.read_only {
            Rule::ReadOnly
        } else {
            Rule::NonDestructive
        }
    }

    fn open(&self, n: &Notice<'_>, now: &Now, path: &str) -> Ruling {
        let a = n.args;
        let (flags, mode) = match n.syscall {
            "open" => (a[1], a[2]),
            "creat" => (O_CREAT | O_TRUNC | libc::O_WRONLY as u64, a[1]),
            _ => (a[2], a[3]),
        };
        let policy = now.policy;
        let truncates = flags & O_TRUNC != 0;
        let creates = flags & O_CREAT != 0;
        if !(policy.read_only || policy.non_destructive && (truncates || creates)) {
            return Ruling::Continue;
        }
        let oflags = OFlags::from_bits_retain(flags as u32);
        let mode = Mode::from_bits_retain((mode as u32) & 0o7777 & !perform::umask_of(n.tid));
        let cloexec = flags & O_CLOEXEC != 0;
        let tried = |operation| Tried {
            operation,
            path: Some(path),
            target: None,
            destination: None,
        };
        if let Some(ruling) = reopen_harmless(n.tid, path, oflags, cloexec) {
            return ruling;
        }
        if let Some((place, rel)) = self.own_state(path) {
            // Opened without truncating first: a name in the state directory that is a hard
            // link to a shared file is not the server's to empty.
            return match place.open(&rel, oflags - OFlags::TRUNC, mode) {
                Ok(fd) => {
                    let linked = rustix::fs::fstat(&fd).is_ok_and(|st| {
                        st.st_mode & libc::S_IFMT == libc::S_IFREG && st.st_nlink > 1
                    });
                    if truncates && linked {
                        return self.refuse(
                            n,
                            now,
                            Some(Self::file_rule(policy)),
                            tried("truncate"),
                        );
                    }
                    if truncates {
                        if let Err(e) = rustix::fs::ftruncate(&fd, 0) {
                            return Ruling::Refuse(e.raw_os_error());
                        }
                    }
                    self.allowed(n, now, tried("write"));
                    Ruling::Install { fd, cloexec }
                }
                Err(e) => Ruling::Refuse(e.raw_os_error().unwrap_or(libc::EACCES)),
            };
        }
        if policy.read_only {
            return self.refuse(n, now, Some(Rule::ReadOnly), tried("write"));
        }
        // Non-destructive, creating or truncating: a new file may be made (and is remembered
        // as the server's), an existing one not emptied unless the server made it.
        let Some((place, rel)) = self.writable(path) else {
            return self.refuse(n, now, None, tried("write"));
        };
        let plain = oflags - OFlags::TRUNC - OFlags::CREATE - OFlags::EXCL;
        if creates {
            match place.open(&rel, plain | OFlags::CREATE | OFlags::EXCL, mode) {
                Ok(fd) => {
                    self.remember_created(&fd);
                    return Ruling::Install { fd, cloexec };
                }
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) && flags & O_EXCL == 0 => {}
                Err(e) => return Ruling::Refuse(e.raw_os_error().unwrap_or(libc::EACCES)),
            }
        }
        match place.open(&rel, plain, mode) {
            Ok(fd) => {
                let st = rustix::fs::fstat(&fd).ok();
                let emptied = truncates
                    && st.is_none_or(|st| {
                        (st.st_mode & libc::S_IFMT) == libc::S_IFREG && st.st_size > 0
                    });
                let own = st.is_some_and(|st| self.server_created((st.st_dev, st.st_ino)));
                match (emptied, own) {
                    (false, _) => Ruling::Install { fd, cloexec },
                    // Its own file: emptied on the descriptor guard opened.
                    (true, true) => match rustix::fs::ftruncate(&fd, 0) {
                        Ok(()) => Ruling::Install { fd, cloexec },
                        Err(e) => Ruling::Refuse(e.raw_os_error()),
                    },
                    (true, false) => {
                        self.refuse(n, now, Some(Rule::NonDestructive), tried("truncate"))
                    }
                }
            }
            Err(e) => Ruling::Refuse(e.raw_os_error().unwrap_or(libc::EACCES)),
        }
    }

    /// A path operation done in the server's own state for it, or refused.
    fn in_state_or_refuse(
        &self,
        n: &Notice<'_>,
        now: &Now,
        rule: Rule,
        tried: Tried<'_>,
        act: impl FnOnce(&Place, &str) -> std::io::Result<()>,
    ) -> Ruling {
        let path = tried.path.unwrap_or("");
        match self.own_state(path) {
            Some((place, rel)) => match act(place, &rel) {
                Ok(()) => {
                    self.allowed(n, now, tried);
                    Ruling::Done(0)
                }
                Err(e) => Ruling::Refuse(e.raw_os_error().unwrap_or(libc::EACCES)),
            },
            None => self.refuse(n, now, Some(rule), tried),
        }
    }

    fn rename(&self, n: &Notice<'_>, now: &Now, from: &str, to: &str) -> Ruling {
        let flags = if n.syscall == "renameat2" {
            n.args[4] as u32
        } else {
            0
        };
        let policy = now.policy;
        let tried = || Tried {
            operation: "rename",
            path: Some(from),
            target: Some(to),
            destination: None,
        };
        let requested = RenameFlags::from_bits_retain(flags);
        let done = |r: std::io::Result<()>| match r {
            Ok(()) => Ruling::Done(0),
            Err(e) => Ruling::Refuse(e.raw_os_error().unwrap_or(libc::EACCES)),
        };
        // Moving shared content into the server's state takes it out of the shared
        // directory: a delete, unless the server made the file.
        if self.own_state(from).is_none() && self.own_state(to).is_some() {
            let made = self
                .writable(from)
                .and_then(|(p, r)| p.identity(&r).ok())
                .is_some_and(|id| self.server_created(id));
            if policy.read_only || !made {
                let rule = Self::file_rule(policy);
                return self.refuse(n, now, Some(rule), tried());
            }
        }
        if let (Some(a), Some(b)) = (self.own_state(from), self.own_state(to)) {
            let r = perform::rename((a.0, &a.1), (b.0, &b.1), requested);
            if r.is_ok() {
                self.allowed(n, now, tried());
            }
            return done(r);
        }
        if policy.read_only {
            return self.refuse(n, now, Some(Rule::ReadOnly), tried());
        }
        if requested.contains(RenameFlags::EXCHANGE) {
            return self.refuse(n, now, Some(Rule::NonDestructive), tried());
        }
        let (Some(a), Some(b)) = (self.writable(from), self.writable(to)) else {
            return self.refuse(n, now, None, tried());
        };
        match perform::rename((a.0, &a.1), (b.0, &b.1), requested | RenameFlags::NOREPLACE) {
            Err(e)
                if e.raw_os_error() == Some(libc::EEXIST)
                    && !requested.contains(RenameFlags::NOREPLACE) =>
            {
                // A save through a temporary file: allowed where the new content keeps the
                // old (see [`keeps_content`]).
                let own_target = b.0.identity(&b.1).is_ok_and(|id| self.server_created(id));
                if own_target || keeps_content((a.0, &a.1), (b.0, &b.1)) {
                    return done(perform::rename((a.0, &a.1), (b.0, &b.1), requested));
                }
                let mut t = tried();
                t.operation = "rename-over";
                self.refuse(n, now, Some(Rule::NonDestructive), t)
            }
            r => done(r),
        }
    }

    /// A hard link in a restricted window: a name in the state directory only for a file of
    /// the state (else a shared file would become the server's); in a read-only window only
    /// inside the state; elsewhere between the places the server may write. `linkat` with
    /// `AT_SYMLINK_FOLLOW` or `AT_EMPTY_PATH` is refused (guard links names, not what they
    /// lead to).
    fn link(&self, n: &Notice<'_>, now: &Now, from: &str, to: &str) -> Ruling {
        let policy = now.policy;
        let tried = Tried {
            operation: "link",
            path: Some(from),
            target: Some(to),
            destination: None,
        };
        let plain = n.syscall == "link" || n.args[4] == 0;
        let into_state = self.own_state(to).is_some();
        let (a, b) = if policy.read_only || into_state {
            (self.own_state(from), self.own_state(to))
        } else {
            (self.writable(from), self.writable(to))
        };
        match (a, b) {
            (Some(a), Some(b)) if plain => match perform::link((a.0, &a.1), (b.0, &b.1)) {
                Ok(()) => Ruling::Done(0),
                Err(e) => Ruling::Refuse(e.raw_os_error().unwrap_or(libc::EACCES)),
            },
            _ => self.refuse(n, now, Some(Self::file_rule(policy)), tried),
        }
    }

    fn network(&self, n: &Notice<'_>, now: &Now) -> Ruling {
        if !now.policy.closed_world || n.syscall == "bind" {
            return Ruling::Continue;
        }
        for kind in n.kinds {
            let AttemptKind::Socket {
                family,
                address,
                port,
                udp,
            } = kind
            else {
                continue;
            };
            // Lookups go to the DNS stub, which refuses them with the name in the log.
            if !family.starts_with("inet") || is_local(address) || (*udp && *port == Some(53)) {
                continue;
            }
            let operation = match (port, udp) {
                (Some(53), _) => "dns",
                (_, true) => "datagram",
                _ => "connect",
            };
            let destination = match port {
                Some(p) if address.contains(':') => format!("[{address}]:{p}"),
                Some(p) => format!("{address}:{p}"),
                None => address.clone(),
            };
            return self.refuse(
                n,
                now,
                Some(Rule::ClosedWorld),
                Tried {
                    operation,
                    path: None,
                    target: None,
                    destination: Some(destination),
                },
            );
        }
        Ruling::Continue
    }

    /// Whether an open file (a copy of the server's descriptor) is the server's own: in its
    /// state directory or the sandbox's tmpfs, or linked nowhere (a memfd, a deleted file:
    /// what is written there changes nothing anyone else sees).
    fn own_file(&self, fd: &std::os::fd::OwnedFd) -> bool {
        match rustix::fs::fstat(fd) {
            Ok(st) if st.st_nlink == 0 => return true,
            // Also linked elsewhere (a shared file): not the server's alone.
            Ok(st) if st.st_nlink > 1 && st.st_mode & libc::S_IFMT == libc::S_IFREG => {
                return false;
            }
            Ok(_) => {}
            Err(_) => return false,
        }
        std::iter::once(&self.places.state)
            .chain(self.temporary.get().into_iter().flatten())
            .any(|p| perform::lies_beneath(fd, p))
    }

    /// A shared writable mapping of a file, in a read-only window: refused unless the file is
    /// the server's own (decided on a copy of the descriptor; a thread that swaps the
    /// descriptor in between can only map another file it already holds open for writing,
    /// which is the case of descriptors opened before the call).
    fn mapping(&self, n: &Notice<'_>, now: &Now) -> Ruling {
        let writes = n.args[2] & libc::PROT_WRITE as u64 != 0;
        if !now.policy.read_only || !writes {
            return Ruling::Continue;
        }
        let fd = n.args[4] as i32;
        let copy = perform::descriptor_of(n.tid, fd);
        if copy.as_ref().is_ok_and(|c| self.own_file(c)) {
            return Ruling::Continue;
        }
        let path = copy
            .ok()
            .and_then(|c| perform::descriptor_path(&c))
            .unwrap_or_else(|| format!("descriptor {fd}"));
        self.refuse(
            n,
            now,
            Some(Rule::ReadOnly),
            Tried {
                operation: "shared-write-mapping",
                path: Some(&path),
                target: None,
                destination: None,
            },
        )
    }

    /// `ftruncate`, decided and done on a copy of the server's descriptor (the same open
    /// file, which the server cannot swap under us): in a read-only window only the server's
    /// own files; in a non-destructive one no shrinking of content.
    fn ftruncate(&self, n: &Notice<'_>, now: &Now) -> Ruling {
        let policy = now.policy;
        if !policy.restricts_files() {
            return Ruling::Continue;
        }
        let Ok(copy) = perform::descriptor_of(n.tid, n.args[0] as i32) else {
            return Ruling::Refuse(libc::EBADF);
        };
        let len = n.args[1];
        let done = |copy: &std::os::fd::OwnedFd| match rustix::fs::ftruncate(copy, len) {
            Ok(()) => Ruling::Done(0),
            Err(e) => Ruling::Refuse(e.raw_os_error()),
        };
        let made =
            rustix::fs::fstat(&copy).is_ok_and(|st| self.server_created((st.st_dev, st.st_ino)));
        if self.own_file(&copy) || (made && !policy.read_only) {
            return done(&copy);
        }
        let size = rustix::fs::fstat(&copy).map_or(0, |st| st.st_size.max(0) as u64);
        let shrinks = len < size;
        if !policy.read_only && !shrinks {
            return done(&copy);
        }
        let path = perform::descriptor_path(&copy).unwrap_or_default();
        let rule = if policy.read_only {
            Rule::ReadOnly
        } else {
            Rule::NonDestructive
        };
        self.refuse(
            n,
            now,
            Some(rule),
            Tried {
                operation: if shrinks { "truncate" } else { "write" },
                path: Some(&path),
                target: None,
                destination: None,
            },
        )
    }
}

/// Most bytes compared at a rename over an existing file.
const COMPARED: u64 = 64 << 20;

/// Whether renaming `from` over `to` keeps what `to` holds: the same bytes, the old bytes
/// followed by more (an append), or, for a document package (.xlsx, .docx: a zip) or a SQLite
/// database replaced by another of its kind, whatever the edit (they are rewritten whether
/// entries are added or removed: the file alone cannot tell, as verify says of them too).
/// Compared on descriptors guard opened; a server that keeps writing the new file through
/// another descriptor after asking for the rename can still change it (in the README).
fn keeps_content(from: (&Place, &str), to: (&Place, &str)) -> bool {
    let open = |(place, rel): (&Place, &str)| {
        place
            .open(rel, OFlags::RDONLY | OFlags::NOFOLLOW, Mode::empty())
            .ok()
            .filter(|fd| {
                rustix::fs::fstat(fd).is_ok_and(|st| {
                    st.st_mode & libc::S_IFMT == libc::S_IFREG && (st.st_size as u64) <= COMPARED
                })
            })
            .map(std::fs::File::from)
    };
    let (Some(mut new), Some(mut old)) = (open(from), open(to)) else {
        return false;
    };
    let (mut new_bytes, mut old_bytes) = (Vec::new(), Vec::new());
    use std::io::Read;
    if new.read_to_end(&mut new_bytes).is_err() || old.read_to_end(&mut old_bytes).is_err() {
        return false;
    }
    const PACKAGE: &[u8] = b"PK\x03\x04";
    const DATABASE: &[u8] = b"SQLite format 3\0";
    let same_kind = |magic: &[u8]| old_bytes.starts_with(magic) && new_bytes.starts_with(magic);
    new_bytes.starts_with(&old_bytes) || same_kind(PACKAGE) || same_kind(DATABASE)
}

/// Devices whose writes change nothing (`/dev/null` and its kin).
const HARMLESS_DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// An open for writing of something that is not a file: a harmless device (`/dev/null`), or
/// a pipe the thread holds already (`/dev/stderr` is `/proc/self/fd/2`): done for the server
/// on what it named, checked after the open (a character device, the very pipe), so that a
/// name swapped after we read it cannot turn into a file. `None` for everything else.
fn reopen_harmless(tid: u32, path: &str, flags: OFlags, cloexec: bool) -> Option<Ruling> {
    let flags = flags - OFlags::CREATE - OFlags::TRUNC - OFlags::EXCL;
    let install = |fd: std::os::fd::OwnedFd, ok: &dyn Fn(&rustix::fs::Stat) -> bool| {
        if rustix::fs::fstat(&fd).is_ok_and(|st| ok(&st)) {
            Ruling::Install { fd, cloexec }
        } else {
            Ruling::Refuse(libc::EACCES)
        }
    };
    if path == "/dev/tty" {
        // The sandbox's processes have no controlling terminal: what the kernel answers.
        return Some(Ruling::Refuse(libc::ENXIO));
    }
    if HARMLESS_DEVICES.contains(&path) {
        return Some(
            match rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::empty()) {
                Ok(fd) => install(fd, &|st| st.st_mode & libc::S_IFMT == libc::S_IFCHR),
                Err(e) => Ruling::Refuse(e.raw_os_error()),
            },
        );
    }
    let inode: u64 = path
        .strip_prefix("pipe:[")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    let held = std::fs::read_dir(format!("/proc/{tid}/fd"))
        .ok()?
        .flatten()
        .find(|e| std::fs::read_link(e.path()).is_ok_and(|l| l.as_os_str() == path))?;
    Some(
        match rustix::fs::open(held.path(), flags | OFlags::CLOEXEC, Mode::empty()) {
            Ok(fd) => install(fd, &|st| {
                st.st_mode & libc::S_IFMT == libc::S_IFIFO && st.st_ino == inode
            }),
            Err(e) => Ruling::Refuse(e.raw_os_error()),
        },
    )
}

/// Loopback, unspecified and the sandbox's own addresses stay inside.
fn is_local(address: &str) -> bool {
    match address.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(v4)) => v4.is_loopback() || v4.is_unspecified(),
        Ok(std::net::IpAddr::V6(v6)) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified())
        }
        Err(_) => false,
    }
}

/// When thread `tid` of process `pid` (or the process itself) started, on the boot clock in
/// nanoseconds (/proc counts in clock ticks).
fn started_ns(pid: u32, tid: Option<u32>) -> Option<u64> {
    let path = match tid {
        Some(t) => format!("/proc/{pid}/task/{t}/stat"),
        None => format!("/proc/{pid}/stat"),
    };
    let stat = std::fs::read_to_string(path).ok()?;
    // The command may hold spaces and parentheses: fields count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let per_second = clock_ticks();
    Some(ticks.saturating_mul(1_000_000_000) / per_second)
}

/// USER_HZ, the unit of start times in /proc: 100 on every Linux architecture we run on.
fn clock_ticks() -> u64 {
    100
}

impl Arbiter for GuardArbiter {
    fn rule(&self, n: &Notice<'_>) -> Ruling {
        self.temporary.get_or_init(|| {
            crate::sandbox::policy::TEMPORARY_PLACES
                .iter()
                .filter_map(|p| Place::in_sandbox(n.tid, Path::new(p)).ok())
                .collect()
        });
        let now = {
            let mut w = self.refusals.window();
            let now = w.now();
            if let Some(call) = now.calls.first() {
                w.acted_for(n.tid, &call.tool);
            }
            now
        };
        let policy = now.policy;
        let (path, target) = match n.kinds.first() {
            Some(AttemptKind::Path { path, target, .. }) => {
                (Some(path.as_str()), target.as_deref())
            }
            _ => (None, None),
        };
        let tried = |operation| Tried {
            operation,
            path,
            target,
            destination: None,
        };
        let file_op = !matches!(
            n.syscall,
            "execve"
                | "execveat"
                | "connect"
                | "bind"
                | "sendto"
                | "sendmmsg"
                | "flock"
                | "fcntl"
                | "mmap"
                | "ftruncate"
        );
        if file_op && !policy.restricts_files() {
            return Ruling::Continue;
        }
        if file_op && path.is_some_and(|p| p.contains("<unreadable>")) {
            // The kernel would fail to read it too.
            return Ruling::Refuse(libc::EFAULT);
        }
        if file_op && path.is_none() && n.syscall != "openat2" {
            // Its memory could not be read: nothing to decide on, so nothing is allowed.
            return Ruling::Refuse(libc::EACCES);
        }
        let p = path.unwrap_or("");
        let a = n.args;
        let umask = || perform::umask_of(n.tid);
        match n.syscall {
            // The flags of openat2 are in memory the thread can change: runtimes fall back
            // to openat, whose flags are in registers.
            "openat2" => Ruling::Refuse(libc::ENOSYS),
            "open" | "openat" | "creat" => self.open(n, &now, p),
            "truncate" => self.in_state_or_refuse(
                n,
                &now,
                Self::file_rule(policy),
                tried("truncate"),
                |place, rel| place.truncate(rel, a[1]),
            ),
            "unlink" | "unlinkat" | "rmdir" => {
                let dir = n.syscall == "rmdir"
                    || (n.syscall == "unlinkat" && a[2] & libc::AT_REMOVEDIR as u64 != 0);
                // The kernel removes only an empty directory: no content is lost (lock
                // directories come and go so).
                if dir && !policy.read_only {
                    return Ruling::Continue;
                }
                // A file the server created while guard ran is its own to remove.
                if !dir && !policy.read_only && self.own_state(p).is_none() {
                    if let Some((place, rel)) = self.writable(p) {
                        match place.unlink_if(&rel, &|id| self.server_created(id)) {
                            Ok(Some(id)) => {
                                // Its inode may be reused for a file that is not the server's.
                                self.forget_created(id);
                                return Ruling::Done(0);
                            }
                            Ok(None) => {}
                            Err(e) => {
                                return Ruling::Refuse(e.raw_os_error().unwrap_or(libc::EACCES));
                            }
                        }
                    }
                }
                self.in_state_or_refuse(
                    n,
                    &now,
                    Self::file_rule(policy),
                    tried("delete"),
                    |place, rel| place.unlink(rel, dir),
                )
            }
            "rename" | "renameat" | "renameat2" => self.rename(n, &now, p, target.unwrap_or("")),
            // Hard links are made by guard on its copies of both paths in every restricted
            // window (a name swapped after the check could link a shared file into the state).
            "link" | "linkat" => self.link(n, &now, p, target.unwrap_or("")),
            // Creations: refused only in a read-only window (outside the server's state).
            _ if !policy.read_only && !matches!(n.syscall, "mmap") && file_op => Ruling::Continue,
            "mkdir" | "mkdirat" => {
                let mode = if n.syscall == "mkdir" { a[1] } else { a[2] };
                let mode = Mode::from_bits_retain((mode as u32) & 0o7777 & !umask());
                self.in_state_or_refuse(n, &now, Rule::ReadOnly, tried("create"), |place, rel| {
                    place.mkdir(rel, mode)
                })
            }
            "symlink" | "symlinkat" => {
                let link_target = target.unwrap_or("").to_string();
                self.in_state_or_refuse(n, &now, Rule::ReadOnly, tried("create"), |place, rel| {
                    place.symlink(&link_target, rel)
                })
            }
            "chmod" | "fchmodat" | "fchmodat2" => {
                let mode = if n.syscall == "chmod" { a[1] } else { a[2] };
                let mode = Mode::from_bits_retain((mode as u32) & 0o7777);
                self.in_state_or_refuse(n, &now, Rule::ReadOnly, tried("chmod"), |place, rel| {
                    place.chmod(rel, mode)
                })
            }
            "mknod" | "mknodat" => self.refuse(n, &now, Some(Rule::ReadOnly), tried("create")),
            "mmap" => self.mapping(n, &now),
            "ftruncate" => self.ftruncate(n, &now),
            "connect" | "bind" | "sendto" | "sendmmsg" => self.network(n, &now),
            _ => Ruling::Continue,
        }
    }
}
