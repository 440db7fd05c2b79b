//! The attempt observer: turns the seccomp recorder's system calls into observations. A write
//! outside every writable directory is a write the sandbox denied (inferred from the policy,
//! since the recorder answers before the kernel decides): intent is behaviour, so it counts
//! against `readOnlyHint: true`. Writes inside writable directories are left to the file
//! observer, which sees their real effect. `connect` and `sendto` give network destinations;
//! `execve` gives the programs the server started.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::{ObserveError, Observer, ObserverStatus, PinKey, ServerStart, ThreadPin};
use crate::evidence::{
    Mechanism, NetEvent, NetKind, Observation, ProcessEvent, RefusedCall, WriteAttempt,
};
use crate::sandbox::notify::{AttemptKind, AttemptQueue};

/// Paths a server writes as a matter of course that change nothing (terminals, null devices,
/// its own descriptors).
fn harmless(path: &str) -> bool {
    // Not a path: what a descriptor of a pipe or socket refers to (`pipe:[1234]`).
    !path.starts_with('/')
        || matches!(
            path,
            "/dev/null"
                | "/dev/zero"
                | "/dev/full"
                | "/dev/tty"
                | "/dev/ptmx"
                | "/dev/stdout"
                | "/dev/stderr"
                | "/dev/stdin"
        )
        || path.starts_with("/dev/pts/")
        || path.starts_with("/dev/fd/")
        || path.starts_with("/proc/self/fd/")
        || path.starts_with("/proc/thread-self/fd/")
}

/// The attempt observer.
pub struct AttemptObserver {
    queue: Option<AttemptQueue>,
    network: Option<super::net::NetHandle>,
    writable: Vec<PathBuf>,
    read_only: Vec<PathBuf>,
    resolver: IpAddr,
    notes: Vec<String>,
    /// The threads the last checkpoint's system calls name.
    pins: Vec<ThreadPin>,
    /// Addresses (not loopback, not a wildcard) the running server bound itself: traffic to
    /// one of them is the server talking to itself, as on loopback.
    own_addresses: std::collections::HashSet<(IpAddr, u16)>,
    /// Where the file snapshot cannot see: set while its last walk stopped at its entry
    /// limit, and how deep its walks go.
    snapshot_gap: Option<(std::sync::Arc<std::sync::atomic::AtomicBool>, usize)>,
}

impl AttemptObserver {
    /// An observer for a sandbox whose writable directories are `writable` (except what lies
    /// under `read_only`, such as the /tmp entries shown read-only) and whose `resolv.conf`
    /// names `resolver`.
    pub fn new(writable: Vec<PathBuf>, read_only: Vec<PathBuf>, resolver: IpAddr) -> Self {
        Self {
            queue: None,
            network: None,
            writable,
            read_only,
            resolver,
            notes: Vec::new(),
            pins: Vec::new(),
            own_addresses: Default::default(),
            snapshot_gap: None,
        }
    }

    /// Remembers an address the server binds. Wildcards and port 0 name no address to
    /// connect to; the run's fake addresses for names stay names (a connection to one is
    /// aimed at what the name means outside). Inside the sandbox any address can be bound
    /// (every address is local there): a bound address counts only for traffic after its
    /// bind, and the bind itself is in the transcript of system calls, not hidden.
    fn bound(&mut self, address: &str, port: Option<u16>) {
        let (Ok(ip), Some(port)) = (address.parse::<IpAddr>(), port) else {
            return;
        };
        let ip = ip.to_canonical();
        let named = self.network.as_ref().is_some_and(|n| {
            n.names
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .name_of(ip)
                .is_some()
        });
        if port != 0 && !ip.is_unspecified() && !ip.is_loopback() && !named {
            self.own_addresses.insert((ip, port));
        }
    }

    /// Reports writes inside the writable directories where the file snapshot cannot see
    /// their effect: below `max_depth` directories, and all of them while `gap` is set.
    pub fn seeing_snapshot_gaps(
        mut self,
        gap: std::sync::Arc<std::sync::atomic::AtomicBool>,
        max_depth: usize,
    ) -> Self {
        self.snapshot_gap = Some((gap, max_depth));
        self
    }

    /// Whether the snapshot cannot see the effect of a write at `path` (a writable one).
    fn beyond_snapshot(&self, path: &str) -> bool {
        let Some((gap, max_depth)) = &self.snapshot_gap else {
            return false;
        };
        if gap.load(std::sync::atomic::Ordering::Relaxed) {
            return true;
        }
        let p = Path::new(path);
        let below = self
            .writable
            .iter()
            .filter_map(|d| p.strip_prefix(d).ok())
            .map(|rest| rest.components().count())
            .min()
            .unwrap_or(0);
        below > *max_depth
    }

    fn is_writable(&self, path: &str) -> bool {
        let p = Path::new(path);
        // The most specific directory decides (an overlay inside a read-only entry is writable).
        let best = |dirs: &[PathBuf]| {
            dirs.iter()
                .filter(|d| p.starts_with(d))
                .map(|d| d.components().count())
                .max()
        };
        match (best(&self.writable), best(&self.read_only)) {
            (Some(w), Some(r)) => w > r,
            (Some(_), None) => true,
            _ => false,
        }
    }

    fn file_attempt(
        &self,
        syscall: &str,
        path: String,
        target: Option<String>,
        flags: Option<u64>,
        pid: u32,
    ) -> Option<Observation> {
        let allowed = self.is_writable(&path)
            && target
                .as_deref()
                .is_none_or(|t| self.is_writable(t) || syscall.starts_with("symlink"));
        let beyond = allowed
            && (self.beyond_snapshot(&path)
                || target.as_deref().is_some_and(|t| self.beyond_snapshot(t)));
        if harmless(&path) || allowed && !beyond {
            return None;
        }
        let exists = Path::new(&path).exists();
        let truncates = flags.is_some_and(|f| f & 0o1000 != 0);
        let destructive = match syscall {
            "unlink" | "unlinkat" | "rmdir" | "truncate" => exists,
            "rename" | "renameat" | "renameat2" => {
                exists || target.as_deref().is_some_and(|t| Path::new(t).exists())
            }
            "open" | "openat" | "openat2" | "creat" => exists && (truncates || syscall == "creat"),
            _ => false,
        };
        Some(Observation::Attempt(WriteAttempt {
            syscall: syscall.to_string(),
            path,
            target,
            denied: !allowed,
            beyond_snapshot: beyond,
            destructive,
            pid,
            mechanism: Mechanism::Attempt,
        }))
    }

    fn socket_attempt(
        &self,
        syscall: &str,
        family: &str,
        address: String,
        port: Option<u16>,
        udp: bool,
    ) -> Option<Observation> {
        if syscall == "bind" || family == "unix" {
            // Binding is the server's own listener; unix sockets are refused before connect.
            return None;
        }
        let ip: Option<IpAddr> = address.parse().ok();
        let own = ip
            .zip(port)
            .is_some_and(|(ip, port)| self.own_addresses.contains(&(ip.to_canonical(), port)));
        let loopback =
            own || ip.is_some_and(|ip| ip.is_loopback() || ip.to_canonical().is_loopback());
        if port == Some(0) {
            // getaddrinfo connects UDP sockets to port 0 to sort addresses: nothing is sent.
            return None;
        }
        if self.network.is_some() && port == Some(53) {
            // The DNS stub reports the question itself, with the name.
            return None;
        }
        let name = match (&self.network, ip) {
            (Some(n), Some(ip)) => n
                .names
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .name_of(ip),
            _ => None,
        };
        let kind = if ip == Some(self.resolver) && port == Some(53) || port == Some(53) && !loopback
        {
            NetKind::Dns
        } else if syscall == "sendto" || udp {
            NetKind::Datagram
        } else {
            NetKind::Connect
        };
        Some(Observation::Network(NetEvent {
            kind,
            destination: if kind == NetKind::Dns {
                format!("resolver {address}")
            } else {
                address
            },
            port,
            name,
            loopback,
            mechanism: Mechanism::Attempt,
            payload: own.then(|| "an address the server bound itself".to_string()),
            carried: Default::default(),
        }))
    }
}

impl Observer for AttemptObserver {
    fn server_started(&mut self, start: &ServerStart) {
        // Whatever the previous server left is taken at the last checkpoint; a new recorder
        // replaces it.
        self.queue = start.attempts.clone();
        self.network = start.network.clone();
        self.own_addresses.clear();
    }

    fn checkpoint(&mut self) -> Result<Vec<Observation>, ObserveError> {
        let Some(queue) = &self.queue else {
            return Ok(Vec::new());
        };
        let pending = {
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            if q.dropped > 0 {
                self.notes.push(format!(
                    "{} system calls were not recorded (the recorder's queue was full)",
                    q.dropped
                ));
                q.dropped = 0;
            }
            if q.env_dropped > 0 {
                self.notes.push(format!(
                    "{} program(s) started were recorded without their environment and arguments (more than {} MiB of them between two checkpoints): planted secrets in them were not looked for",
                    q.env_dropped,
                    crate::sandbox::notify::ENV_QUEUE_BUDGET >> 20
                ));
                q.env_dropped = 0;
            }
            if q.connects_unserved > 0 {
                self.notes.push(format!(
                    "{} TCP connection(s) to ports nothing listened on were refused unread: the {} listeners opened on demand were spent, or the sandbox stopped opening them",
                    q.connects_unserved,
                    crate::sandbox::notify::MAX_ON_DEMAND
                ));
                q.connects_unserved = 0;
            }
            q.env_bytes = 0;
            std::mem::take(&mut q.attempts)
        };
        let mut out: Vec<Observation> = Vec::new();
        self.pins.clear();
        for a in pending {
            match &a.kind {
                AttemptKind::Path { path, target, .. } => {
                    for p in std::iter::once(path).chain(target) {
                        self.pins.push(ThreadPin {
                            key: PinKey::Path(p.clone()),
                            tid: a.tid,
                        });
                    }
                }
                AttemptKind::Socket { address, port, .. } => self.pins.push(ThreadPin {
                    key: PinKey::Socket {
                        destination: address
                            .parse::<IpAddr>()
                            .map(|ip| ip.to_canonical().to_string())
                            .unwrap_or_else(|_| address.clone()),
                        port: *port,
                    },
                    tid: a.tid,
                }),
                AttemptKind::Refused { .. } | AttemptKind::Exec { .. } => {}
            }
            let obs = match a.kind {
                AttemptKind::Path {
                    path,
                    target,
                    flags,
                } => self.file_attempt(a.syscall, path, target, flags, a.pid),
                AttemptKind::Socket {
                    family,
                    address,
                    port,
                    udp,
                } => {
                    if a.syscall == "bind" {
                        self.bound(&address, port);
                    }
                    self.socket_attempt(a.syscall, &family, address, port, udp)
                }
                AttemptKind::Refused { what } => Some(Observation::Refused(RefusedCall {
                    syscall: a.syscall.to_string(),
                    what,
                    pid: a.pid,
                    mechanism: Mechanism::Attempt,
                })),
                AttemptKind::Exec { path, argv, env } => {
                    let mut entries = Vec::new();
                    for e in env {
                        entries.extend_from_slice(e.as_bytes());
                        entries.push(0);
                    }
                    Some(Observation::Process(ProcessEvent {
                        program: path,
                        argv,
                        pid: a.pid,
                        mechanism: Mechanism::Attempt,
                        env: crate::evidence::Carried::of(&entries),
                    }))
                }
            };
            if let Some(o) = obs {
                // `execvp` tries each PATH directory in turn and only the last try runs: one
                // process start per (pid, argv), the last program tried.
                if let Observation::Process(p) = &o {
                    out.retain(|earlier| {
                        !matches!(earlier, Observation::Process(e) if e.pid == p.pid && e.argv == p.argv)
                    });
                }
                // One record per distinct attempt in a window is enough evidence.
                if !out.contains(&o) {
                    out.push(o);
                }
            }
        }
        Ok(out)
    }

    fn status(&self) -> ObserverStatus {
        ObserverStatus {
            name: "seccomp-attempts".into(),
            covers: "write attempts outside the writable directories (denied by the sandbox), connect, sendto and sendmmsg destinations, started programs, and calls the sandbox refused (socket families other than IPv4, IPv6 and routing netlink; nested namespaces), by seccomp user notification".into(),
            blind_spots: vec![
                "DNS names (only the resolver's address is seen)".into(),
                "which thread wrote through a descriptor it opened before the window (its evidence then cannot be pinned on a thread)".into(),
                "sendmsg destinations (the packet socket on lo sees where they went) and writes through descriptors opened before the call".into(),
            ],
        }
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn take_pins(&mut self) -> Vec<ThreadPin> {
        std::mem::take(&mut self.pins)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs() -> AttemptObserver {
        AttemptObserver::new(
            vec![
                PathBuf::from("/tmp"),
                PathBuf::from("/scratch/workspace"),
                PathBuf::from("/tmp/ro/overlay"),
            ],
            vec![PathBuf::from("/tmp/ro")],
            "192.0.2.53".parse().expect("ip"),
        )
    }

    #[test]
    fn writes_outside_writable_dirs_are_denied_attempts() {
        let o = obs();
        assert!(
            o.file_attempt(
                "openat",
                "/scratch/workspace/a".into(),
                None,
                Some(0o101),
                1
            )
            .is_none()
        );
        assert!(
            o.file_attempt("openat", "/dev/null".into(), None, Some(0o1), 1)
                .is_none()
        );
        let Some(Observation::Attempt(a)) =
            o.file_attempt("openat", "/etc/hintcheck-x".into(), None, Some(0o101), 1)
        else {
            panic!("expected an attempt");
        };
        assert!(a.denied && !a.destructive);
        let Some(Observation::Attempt(a)) =
            o.file_attempt("unlinkat", "/etc/passwd".into(), None, None, 1)
        else {
            panic!("expected an attempt");
        };
        assert!(a.destructive, "deleting an existing file");
        assert!(
            o.file_attempt("openat", "/tmp/ro/x".into(), None, Some(0o1), 1)
                .is_some(),
            "read-only /tmp entry"
        );
        assert!(
            o.file_attempt("openat", "/tmp/ro/overlay/x".into(), None, Some(0o1), 1)
                .is_none(),
            "overlay inside it"
        );
        assert!(
            o.file_attempt("openat", "/tmp/other".into(), None, Some(0o1), 1)
                .is_none(),
            "the sandbox's /tmp"
        );
    }

    #[test]
    fn network_attempts_are_classified() {
        let o = obs();
        let dns = o.socket_attempt("connect", "inet", "192.0.2.53".into(), Some(53), true);
        assert!(matches!(
            dns,
            Some(Observation::Network(NetEvent {
                kind: NetKind::Dns,
                loopback: false,
                ..
            }))
        ));
        let lo = o.socket_attempt("connect", "inet", "127.0.0.1".into(), Some(8080), false);
        assert!(matches!(
            lo,
            Some(Observation::Network(NetEvent { loopback: true, .. }))
        ));
        let v6 = o.socket_attempt(
            "connect",
            "inet6",
            "::ffff:127.0.0.1".into(),
            Some(80),
            false,
        );
        assert!(
            matches!(
                v6,
                Some(Observation::Network(NetEvent { loopback: true, .. }))
            ),
            "{v6:?}"
        );
        let udp = o.socket_attempt("sendto", "inet", "192.0.2.1".into(), Some(123), true);
        assert!(matches!(
            udp,
            Some(Observation::Network(NetEvent {
                kind: NetKind::Datagram,
                ..
            }))
        ));
        assert!(
            o.socket_attempt("bind", "inet", "0.0.0.0".into(), Some(80), false)
                .is_none()
        );
    }

    #[test]
    fn traffic_to_an_address_the_server_bound_is_its_own() {
        let mut o = obs();
        let external = |o: &AttemptObserver, ip: &str, port| match o.socket_attempt(
            "connect",
            "inet",
            ip.into(),
            Some(port),
            false,
        ) {
            Some(Observation::Network(n)) => !n.loopback,
            other => panic!("{other:?}"),
        };
        assert!(external(&o, "192.0.2.7", 9000), "before any bind");
        o.bound("192.0.2.7", Some(9000));
        o.bound("0.0.0.0", Some(9001));
        o.bound("2001:db8::7", Some(0));
        assert!(!external(&o, "192.0.2.7", 9000));
        assert!(!external(&o, "::ffff:192.0.2.7", 9000), "v4-mapped");
        assert!(external(&o, "192.0.2.7", 9002), "another port");
        assert!(
            external(&o, "192.0.2.8", 9001),
            "a wildcard bind names no address"
        );
        assert!(external(&o, "2001:db8::7", 443), "port 0 names no port");
        // A new server starts with nothing bound.
        o.server_started(&ServerStart::default());
        assert!(external(&o, "192.0.2.7", 9000));
    }
}
