//! The observe stage: what the server did, as records with the mechanism that saw them.
//! An [`Observer`] is asked for a checkpoint at every window boundary (before and after each
//! call, after startup, at shutdown); everything it saw since the previous checkpoint belongs
//! to the window that just ended. [`fs`] provides the snapshot observer of the scratch
//! directories; the sandbox adds kernel-fed observers behind the same trait.

pub mod activity;
pub mod attempts;
pub mod fs;
pub mod git;
pub mod inotify;
pub mod metadata;
pub mod net;
pub mod normalise;
pub mod quiet;
pub mod reads;
pub mod secrets;
pub mod store;
pub mod tls;
pub mod web;

use serde::Serialize;

use crate::evidence::{FileEffectKind, NetKind, Observation};

/// What one observer covers, for the report's coverage section.
#[derive(Debug, Clone, Serialize)]
pub struct ObserverStatus {
    /// The observer's name.
    pub name: String,
    /// What it watches.
    pub covers: String,
    /// What it cannot see.
    pub blind_spots: Vec<String>,
}

/// Errors of an observer. They are reported, never fatal to the run.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// A snapshot could not read something.
    #[error("snapshot of {root} failed")]
    Snapshot {
        /// The root being walked.
        root: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// What observers learn when a server (re)starts or stops.
#[derive(Debug, Clone, Default)]
pub struct ServerStart {
    /// `/proc/<pid>/root` of its sandbox, if any (`None` also when the server stopped).
    pub sandbox_root: Option<std::path::PathBuf>,
    /// The queue of its seccomp recorder, if any.
    pub attempts: Option<crate::sandbox::notify::AttemptQueue>,
    /// Its network observer service, if any.
    pub network: Option<net::NetHandle>,
    /// The pid (in hintcheck's pid namespace) whose descendants are the server's processes:
    /// the sandbox's init, or the server itself without a sandbox.
    pub server_pid: Option<u32>,
    /// Whether Landlock confines its writes to the observed directories.
    pub writes_confined: bool,
}

/// A source of observations.
pub trait Observer: Send {
    /// A server (re)started or stopped.
    fn server_started(&mut self, _start: &ServerStart) {}
    /// The threads that the system calls of the last checkpoint's window name, for pinning
    /// observations on the thread that made them (only observers that see system calls).
    fn take_pins(&mut self) -> Vec<ThreadPin> {
        Vec::new()
    }
    /// What it sees since the previous checkpoint.
    fn checkpoint(&mut self) -> Result<Vec<Observation>, ObserveError>;
    /// What it covers.
    fn status(&self) -> ObserverStatus;
    /// Notes collected while observing (limits hit, unreadable entries).
    fn take_notes(&mut self) -> Vec<String>;
    /// The next checkpoint must not rest on change notifications (the run's last one).
    fn walk_whole_next(&mut self) {}
    /// Lets go, after the last checkpoint, of what the kernel must wait a grace period to
    /// free (change-notification watches), so that the grace period runs in the kernel's
    /// own workers before the observer is closed rather than in the close.
    fn release(&mut self) {}
}

/// How long the closing thread leaves the kernel to free what observers released before it
/// closes them: freeing watches waits for a grace period in a kernel worker (under 10 ms
/// here); a close after it is instant, a close before it waits for it (12 ms and more).
const RELEASE_GRACE: std::time::Duration = std::time::Duration::from_millis(25);

/// What a system call says about who did something: the thread that opened, created, removed
/// or renamed a path, or connected or sent to an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadPin {
    /// What it did it to.
    pub key: PinKey,
    /// The thread (host task id).
    pub tid: u32,
}

/// What a pin names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinKey {
    /// A path, as the server named it (absolute).
    Path(String),
    /// A destination address (canonical) and port.
    Socket {
        /// The address.
        destination: String,
        /// The port.
        port: Option<u16>,
    },
}

impl PinKey {
    /// Whether this pin names what observation `o` is about: the same destination, or a path
    /// that ends with the observation's path below its root (`$WORKSPACE/notes/a.md` and
    /// `/tmp/…/workspace/notes/a.md`), or the path a rename came from.
    pub fn names(&self, o: &Observation) -> bool {
        let tail_matches = |pinned: &str, observed: &str| {
            let below_root = observed
                .strip_prefix('$')
                .and_then(|rest| rest.find('/').map(|i| &rest[i..]))
                .unwrap_or(observed);
            below_root.len() > 1 && pinned.ends_with(below_root)
        };
        match (self, o) {
            (PinKey::Path(p), Observation::File(f)) => {
                tail_matches(p, &f.path)
                    || matches!(&f.kind, FileEffectKind::Renamed { from, .. } if tail_matches(p, from))
            }
            (PinKey::Path(p), Observation::Attempt(a)) => *p == a.path,
            // A question to the DNS stub is pinned on whoever sent to port 53.
            (PinKey::Socket { port, .. }, Observation::Network(n)) if n.kind == NetKind::Dns => {
                *port == Some(53)
            }
            (PinKey::Socket { destination, port }, Observation::Network(n)) => {
                *destination == n.destination && *port == n.port
            }
            _ => false,
        }
    }
}

/// All observers of a run.
pub struct Recorder {
    observers: Vec<Box<dyn Observer>>,
    notes: Vec<String>,
    /// The run's canaries, looked for in what the observers saw.
    secrets: Option<std::sync::Arc<secrets::SecretWatch>>,
    /// Where files written outside the workspace are looked in for them: `$HOME` and
    /// `$TMPDIR`, with their directories.
    secret_roots: Vec<(String, std::path::PathBuf)>,
    /// The same, and the sandbox's own temporary places (`/tmp`, `/var/tmp`, `/dev/shm`,
    /// through `/proc/PID/root`) while a sandboxed server runs.
    secret_roots_now: Vec<(String, std::path::PathBuf)>,
}

impl Recorder {
    /// A recorder over the given observers.
    pub fn new(observers: Vec<Box<dyn Observer>>) -> Self {
        Self {
            observers,
            notes: Vec::new(),
            secrets: None,
            secret_roots: Vec::new(),
            secret_roots_now: Vec::new(),
        }
    }

    /// Looks for the run's canaries in what the observers see from now on, and in the files
    /// written under `roots` (named roots and their directories).
    pub fn watch_secrets(
        &mut self,
        watch: std::sync::Arc<secrets::SecretWatch>,
        roots: Vec<(String, std::path::PathBuf)>,
    ) {
        self.secrets = Some(watch);
        self.secret_roots_now = roots.clone();
        self.secret_roots = roots;
    }

    /// The thread pins of the last checkpoint's window.
    pub fn take_pins(&mut self) -> Vec<ThreadPin> {
        self.observers
            .iter_mut()
            .flat_map(|o| o.take_pins())
            .collect()
    }

    /// Everything seen since the last checkpoint, in observer order.
    pub fn checkpoint(&mut self) -> Vec<Observation> {
        let mut out = Vec::new();
        for o in &mut self.observers {
            match o.checkpoint() {
                Ok(obs) => out.extend(obs),
                Err(e) => {
                    let mut msg = e.to_string();
                    let mut src = std::error::Error::source(&e);
                    while let Some(s) = src {
                        msg.push_str(&format!(": {s}"));
                        src = s.source();
                    }
                    self.notes.push(msg);
                }
            }
            self.notes.extend(o.take_notes());
        }
        net::drop_repeated_packets(&mut out);
        inotify::keep_unexplained(&mut out);
        if let Some(watch) = &self.secrets {
            watch.in_programs(&mut out);
            watch.in_network(&mut out);
            watch.in_files(&mut out, &self.secret_roots_now);
        }
        out
    }

    /// A checkpoint that reads everything again, whatever notifications said (the last).
    pub fn checkpoint_whole(&mut self) -> Vec<Observation> {
        for o in &mut self.observers {
            o.walk_whole_next();
        }
        self.checkpoint()
    }

    /// Tells every observer that a server (re)started or stopped.
    pub fn server_started(&mut self, start: &ServerStart) {
        self.secret_roots_now = self.secret_roots.clone();
        if let Some(root) = &start.sandbox_root {
            self.secret_roots_now.extend(
                crate::sandbox::policy::TEMPORARY_PLACES
                    .iter()
                    .map(|place| (place.to_string(), root.join(place.trim_start_matches('/')))),
            );
        }
        for o in &mut self.observers {
            o.server_started(start);
        }
    }

    /// Status of every observer.
    pub fn statuses(&self) -> Vec<ObserverStatus> {
        self.observers.iter().map(|o| o.status()).collect()
    }

    /// Notes collected so far.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    /// Closes the observers off the caller's path (after the last checkpoint): what they
    /// hold that the kernel frees only after a grace period is released now, and the
    /// observers are closed on a thread of their own once the kernel had the time to free
    /// it. Closing change notifications with their watches still in place waits for that
    /// grace period in the close (12 to 20 ms), and a process that ends meanwhile waits for
    /// it at its exit: released first, both are instant.
    pub fn close_off_path(mut self) {
        for o in &mut self.observers {
            o.release();
        }
        // Without a thread the close happens here (with the failed spawn's closure).
        let _ = std::thread::Builder::new()
            .name("hintcheck-observers-close".into())
            .spawn(move || {
                std::thread::sleep(RELEASE_GRACE);
                drop(self);
            });
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn pins_name_the_observations_their_system_calls_made() {
        use super::*;
        use crate::evidence::{FileEffect, Mechanism, NetEvent, ObjectKind};
        let file = |p: &str, kind| {
            Observation::File(FileEffect::bare(
                p,
                kind,
                ObjectKind::File,
                Mechanism::Snapshot,
            ))
        };
        let pin = PinKey::Path("/tmp/x.1/workspace/notes/a.md".into());
        assert!(pin.names(&file("$WORKSPACE/notes/a.md", FileEffectKind::Created)));
        assert!(!pin.names(&file("$WORKSPACE/notes/b.md", FileEffectKind::Created)));
        // A rename is pinned by its source too.
        let renamed = file(
            "$WORKSPACE/trash/z.md",
            FileEffectKind::Renamed {
                from: "$WORKSPACE/notes/a.md".into(),
                over_existing: false,
            },
        );
        assert!(pin.names(&renamed));
        let socket = PinKey::Socket {
            destination: "198.18.0.1".into(),
            port: Some(80),
        };
        let connect = |destination: &str, port, kind| {
            Observation::Network(NetEvent {
                kind,
                destination: destination.into(),
                port,
                name: None,
                loopback: false,
                mechanism: Mechanism::Packet,
                payload: None,
                carried: Default::default(),
            })
        };
        assert!(socket.names(&connect("198.18.0.1", Some(80), NetKind::Connect)));
        assert!(!socket.names(&connect("198.18.0.1", Some(443), NetKind::Connect)));
        let resolver = PinKey::Socket {
            destination: "192.0.2.53".into(),
            port: Some(53),
        };
        assert!(resolver.names(&connect("x.example.test", None, NetKind::Dns)));
    }
}
