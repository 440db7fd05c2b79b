//! The evidence vocabulary: one observation of what a server did (a file effect, network
//! activity, a write attempt, a program started, a refused system call) with the mechanism
//! that saw it. Observers produce these records, the audits and attribution reason over them,
//! and the report renders them; none of those layers reaches into another to do it.

/// How an observation was made, so a reader can tell what was seen from what was inferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// A before/after snapshot of a directory tree (sees effects that persist, not attempts).
    Snapshot,
    /// A system call the server made, seen before the kernel ran it (seccomp notification):
    /// an attempt, which may have been denied.
    Attempt,
    /// A packet seen on the sandbox's network.
    Packet,
    /// A DNS question the sandbox's resolver answered.
    Dns,
    /// The first bytes of a connection (TLS SNI, HTTP request line).
    Payload,
    /// A change notification (inotify): the kernel said the path changed as it happened, even
    /// when nothing of the change lasted.
    Notify,
    /// The tool's result, as the server sent it.
    Result,
}

impl Mechanism {
    /// How evidence names it: `seen by …`.
    pub fn seen_by(self) -> &'static str {
        match self {
            Mechanism::Snapshot => "snapshot",
            Mechanism::Attempt => "seccomp",
            Mechanism::Packet => "packet",
            Mechanism::Dns => "dns",
            Mechanism::Payload => "listener",
            Mechanism::Notify => "inotify",
            Mechanism::Result => "result",
        }
    }
}

/// What happened to one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileEffectKind {
    /// A new file, directory or symlink.
    Created,
    /// A file that grew and whose old content is a prefix of the new content.
    Appended,
    /// A file whose content was replaced.
    Overwritten,
    /// A JSON or JSON Lines file rewritten so that everything it held is still there, with
    /// values only added (members, array elements, lines): an additive update.
    Extended,
    /// A file cut down to a prefix of its old content (or emptied).
    Truncated,
    /// A path that existed before and is gone.
    Deleted,
    /// A path moved; `over_existing` when it replaced something at the destination.
    Renamed {
        /// Where it came from.
        from: String,
        /// Whether the destination existed before.
        over_existing: bool,
    },
    /// Only the permission bits changed.
    ModeChanged {
        /// Old mode, octal.
        from: String,
        /// New mode, octal.
        to: String,
    },
    /// The path now holds a different kind of object (file ↔ directory ↔ symlink).
    Replaced,
    /// A symlink now points elsewhere.
    Retargeted,
    /// A file written again with identical content (a write, but no change of content).
    Rewritten,
    /// A git ref moved to a commit that descends from the one it named (a new commit, a
    /// fast-forward): history only grew.
    RefAdvanced {
        /// The commit it named before (abbreviated).
        from: String,
        /// The commit it names now (abbreviated).
        to: String,
    },
    /// A git ref moved to a commit that does not descend from the one it named (reset,
    /// amend, rebase, a forced update), or a tag moved: history was rewritten.
    RefRewound {
        /// The commit it named before (abbreviated).
        from: String,
        /// The commit it names now (abbreviated).
        to: String,
    },
    /// One of git's own bookkeeping files changed: a scratch file (COMMIT_EDITMSG,
    /// ORIG_HEAD, FETCH_HEAD, a `.lock`), HEAD switched to another branch, refs packed, or a
    /// loose object removed that a pack still holds. Not the repository's content.
    GitBookkeeping,
    /// A working-tree file a git command deleted or replaced (a checkout, a hard reset) whose
    /// old content the repository keeps, at the same path, in the commit a branch or HEAD
    /// names: switching back restores it, nothing is lost.
    WorkTreeKept {
        /// Whether the file is gone (else its content was replaced).
        was_deleted: bool,
        /// The ref whose commit holds the old content.
        reference: String,
    },
    /// A structured store (a SQLite database, a JSON, JSON Lines, TOML or CSV file) read
    /// before and after by the harness: what was added, changed in place and removed, in its
    /// own terms (rows, members, tables). Destructive when anything was changed or removed.
    StoreChanged {
        /// Rows, members, elements or tables added.
        added: usize,
        /// Values changed in place (updates).
        changed: usize,
        /// Rows, members, elements or tables removed.
        removed: usize,
        /// The first changes, as a reader would say them (`visits: 1 → 2`).
        detail: String,
    },
    /// A path changed and changed back within one window (seen by change notification only):
    /// `created` when it was created and removed again (a lock or temporary file).
    Transient {
        /// Created and removed within the window.
        created: bool,
    },
}

impl FileEffectKind {
    /// Whether the effect destroys or replaces content that existed before.
    pub fn is_destructive(&self) -> bool {
        match self {
            FileEffectKind::Overwritten
            | FileEffectKind::Truncated
            | FileEffectKind::Deleted
            | FileEffectKind::Replaced
            | FileEffectKind::Retargeted => true,
            FileEffectKind::Renamed { over_existing, .. } => *over_existing,
            FileEffectKind::RefRewound { .. } => true,
            FileEffectKind::StoreChanged {
                changed, removed, ..
            } => *changed > 0 || *removed > 0,
            FileEffectKind::RefAdvanced { .. }
            | FileEffectKind::GitBookkeeping
            | FileEffectKind::WorkTreeKept { .. } => false,
            FileEffectKind::Created
            | FileEffectKind::Appended
            | FileEffectKind::ModeChanged { .. }
            | FileEffectKind::Extended
            | FileEffectKind::Rewritten
            | FileEffectKind::Transient { .. } => false,
        }
    }

    /// A short verb for reports.
    pub fn verb(&self) -> &'static str {
        match self {
            FileEffectKind::Created => "created",
            FileEffectKind::Appended => "appended to",
            FileEffectKind::Overwritten => "overwrote",
            FileEffectKind::Truncated => "truncated",
            FileEffectKind::Deleted => "deleted",
            FileEffectKind::Renamed {
                over_existing: true,
                ..
            } => "renamed over",
            FileEffectKind::Renamed { .. } => "renamed to",
            FileEffectKind::ModeChanged { .. } => "changed mode of",
            FileEffectKind::Replaced => "replaced",
            FileEffectKind::Retargeted => "retargeted symlink",
            FileEffectKind::Rewritten => "rewrote (same content)",
            FileEffectKind::Extended => "extended (only additions)",
            FileEffectKind::RefAdvanced { .. } => "moved forward git ref",
            FileEffectKind::RefRewound { .. } => {
                "moved git ref to a commit that does not descend from the old one:"
            }
            FileEffectKind::GitBookkeeping => "updated git's own bookkeeping file",
            FileEffectKind::WorkTreeKept { .. } => "replaced from the repository",
            FileEffectKind::StoreChanged {
                changed, removed, ..
            } if *changed > 0 || *removed > 0 => "changed and removed entries of",
            FileEffectKind::StoreChanged { .. } => "only added entries to",
            FileEffectKind::Transient { created: true } => "created and removed",
            FileEffectKind::Transient { created: false } => "changed and restored",
        }
    }

    /// Whether the change did not last past the window (a lock file, a temporary file).
    pub fn is_transient(&self) -> bool {
        matches!(self, FileEffectKind::Transient { .. })
    }

    /// Whether the effect makes a path (to last, or for a moment).
    pub fn is_creation(&self) -> bool {
        matches!(
            self,
            FileEffectKind::Created | FileEffectKind::Transient { .. }
        )
    }

    /// Whether the effect creates or rewrites content and never removes, moves or changes the
    /// kind of anything: what a server's own files (its journal, the database it made) undergo.
    pub fn creates_or_rewrites(&self) -> bool {
        self.is_creation()
            || matches!(
                self,
                FileEffectKind::Appended
                    | FileEffectKind::Extended
                    | FileEffectKind::Overwritten
                    | FileEffectKind::Rewritten
                    | FileEffectKind::StoreChanged { .. }
            )
    }
}

/// The kind of object at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A FIFO, socket or device node.
    Special,
}

/// One effect on the filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEffect {
    /// The path, relative to a named root: `$WORKSPACE/notes.txt`, `$HOME/.cache/x`.
    pub path: String,
    /// What happened.
    pub kind: FileEffectKind,
    /// What the path holds (after the effect, or before a deletion).
    pub object: ObjectKind,
    /// Size before, for files.
    pub size_before: Option<u64>,
    /// Size after, for files.
    pub size_after: Option<u64>,
    /// SHA-256 before, for files.
    pub sha256_before: Option<String>,
    /// SHA-256 after, for files.
    pub sha256_after: Option<String>,
    /// How it was seen.
    pub mechanism: Mechanism,
    /// A database file (SQLite, git's index) or a zip package (an Office document) changed
    /// in place, before and after: it is rewritten whether entries were added or removed, so
    /// the change is a write but not evidence of destruction.
    pub database: bool,
}

impl FileEffect {
    /// An effect known only by its path and kind (no sizes or hashes): what change
    /// notifications give.
    pub fn bare(
        path: impl Into<String>,
        kind: FileEffectKind,
        object: ObjectKind,
        mechanism: Mechanism,
    ) -> Self {
        Self {
            path: path.into(),
            kind,
            object,
            size_before: None,
            size_after: None,
            sha256_before: None,
            sha256_after: None,
            mechanism,
            database: false,
        }
    }

    /// One line for humans: `overwrote $WORKSPACE/a.txt (12 → 3 bytes)`.
    pub fn describe(&self) -> String {
        let sizes = match (self.size_before, self.size_after) {
            (Some(a), Some(b)) => format!(" ({a} → {b} bytes)"),
            (None, Some(b)) if self.object == ObjectKind::File => format!(" ({b} bytes)"),
            (Some(a), None) => format!(" (was {a} bytes)"),
            _ => String::new(),
        };
        match &self.kind {
            FileEffectKind::Renamed { from, .. } => {
                format!("{} {} {}{}", from, self.kind.verb(), self.path, sizes)
            }
            FileEffectKind::ModeChanged { from, to } => {
                format!("changed mode of {} ({from} → {to})", self.path)
            }
            FileEffectKind::WorkTreeKept {
                was_deleted,
                reference,
            } => format!(
                "{} {}{sizes}, whose old content the repository keeps ({reference} holds it)",
                if *was_deleted { "removed" } else { "replaced" },
                self.path
            ),
            FileEffectKind::StoreChanged {
                added,
                changed,
                removed,
                detail,
            } => {
                let verb = if *changed > 0 || *removed > 0 {
                    "changed"
                } else {
                    "added to"
                };
                let counts = format!("{added} added, {changed} changed, {removed} removed");
                if detail.is_empty() {
                    format!("{verb} {} ({counts})", self.path)
                } else {
                    format!("{verb} {} ({counts}: {detail})", self.path)
                }
            }
            FileEffectKind::RefAdvanced { from, to } | FileEffectKind::RefRewound { from, to }
                if !from.is_empty() =>
            {
                format!("{} {} ({from} → {to})", self.kind.verb(), self.path)
            }
            FileEffectKind::Created if self.object == ObjectKind::Dir => {
                format!("created directory {}", self.path)
            }
            FileEffectKind::Deleted if self.object == ObjectKind::Dir => {
                format!("deleted directory {}", self.path)
            }
            FileEffectKind::Transient { created: true } if self.object == ObjectKind::Dir => {
                format!("created and removed directory {}", self.path)
            }
            FileEffectKind::Transient { created: false } => {
                format!("wrote to {} without a lasting change", self.path)
            }
            _ if self.database => format!(
                "changed {} {} in place{}",
                if is_package_path(&self.path) {
                    "package"
                } else {
                    "database"
                },
                self.path,
                sizes
            ),
            kind => format!("{} {}{}", kind.verb(), self.path, sizes),
        }
    }
}

/// What kind of network activity was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetKind {
    /// A DNS question.
    Dns,
    /// A TCP connection attempt.
    Connect,
    /// A UDP (or UDP-Lite) datagram.
    Datagram,
    /// Any other IP packet sent on its own (ICMP, raw IP protocols): `payload` names it.
    Packet,
}

/// One network event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetEvent {
    /// What happened.
    pub kind: NetKind,
    /// Destination address (or the name asked for, for DNS).
    pub destination: String,
    /// Destination port.
    pub port: Option<u16>,
    /// The DNS name behind the destination, when known.
    pub name: Option<String>,
    /// Whether the destination is loopback (127.0.0.0/8, ::1): not open-world evidence.
    pub loopback: bool,
    /// How it was seen.
    pub mechanism: Mechanism,
    /// What was asked or sent (DNS query type, TLS SNI, HTTP request line).
    pub payload: Option<String>,
    /// The bytes it carried out, for the scan for planted secrets only.
    pub carried: Carried,
}

/// The bytes an event carried out of the server: a request with its headers and body
/// (decrypted, for TLS), a datagram's payload, a name as it was asked (its letters' case
/// kept), a started program's environment. Kept only
/// for the scan for planted secrets ([`crate::observe::secrets`]), never reported, and no
/// part of an event's identity: two events alike in every other way are one event, their
/// bytes joined ([`Carried::join`]).
#[derive(Clone, Default)]
pub struct Carried(Option<std::sync::Arc<Vec<u8>>>);

impl Carried {
    /// Most bytes one event keeps: the rest of a longer stream goes unscanned (counted by
    /// [`Carried::join`]).
    pub const LIMIT: usize = 1 << 20;

    /// Carried `bytes` (at most [`Carried::LIMIT`] of them).
    pub fn of(bytes: &[u8]) -> Carried {
        if bytes.is_empty() {
            return Carried(None);
        }
        Carried(Some(std::sync::Arc::new(
            bytes[..bytes.len().min(Self::LIMIT)].to_vec(),
        )))
    }

    /// The bytes (empty when none were kept).
    pub fn bytes(&self) -> &[u8] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Appends `other`'s bytes to these (the same destination sent again: a secret split
    /// across two requests or datagrams is whole again), within [`Carried::LIMIT`]; how many
    /// bytes did not fit. Appending to bytes no clone shares copies nothing.
    pub fn join(&mut self, other: Carried) -> usize {
        let Some(theirs) = other.0 else {
            return 0;
        };
        match &mut self.0 {
            None => {
                self.0 = Some(theirs);
                0
            }
            Some(mine) => {
                let room = Self::LIMIT.saturating_sub(mine.len());
                let taken = theirs.len().min(room);
                std::sync::Arc::make_mut(mine).extend_from_slice(&theirs[..taken]);
                theirs.len() - taken
            }
        }
    }

    /// Takes the bytes, leaving none.
    pub fn take(&mut self) -> Carried {
        Carried(self.0.take())
    }
}

impl std::fmt::Debug for Carried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Carried({} bytes)", self.bytes().len())
    }
}

/// Carried bytes never tell two events apart.
impl PartialEq for Carried {
    fn eq(&self, _: &Carried) -> bool {
        true
    }
}

impl Eq for Carried {}

impl NetEvent {
    /// One line for humans.
    pub fn describe(&self) -> String {
        let port = self.port.map(|p| format!(":{p}")).unwrap_or_default();
        let name = self
            .name
            .as_ref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default();
        let payload = self
            .payload
            .as_ref()
            .map(|p| format!(": {p}"))
            .unwrap_or_default();
        match self.kind {
            NetKind::Dns => match &self.payload {
                Some(p) if self.mechanism == Mechanism::Dns => {
                    format!("looked up {} ({p})", self.destination)
                }
                _ => format!("looked up {}", self.destination),
            },
            NetKind::Connect => format!("connected to {}{port}{name}{payload}", self.destination),
            NetKind::Datagram if self.mechanism == Mechanism::Attempt => {
                format!("sent or aimed UDP at {}{port}{name}", self.destination)
            }
            NetKind::Datagram => format!(
                "sent a {}datagram to {}{port}{name}",
                self.payload
                    .as_ref()
                    .map(|p| format!("{p} "))
                    .unwrap_or_default(),
                self.destination
            ),
            NetKind::Packet => format!(
                "sent {} to {}{name}",
                self.payload.as_deref().unwrap_or("an IP packet"),
                self.destination
            ),
        }
    }
}

/// A filesystem change the server asked for, seen as a system call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteAttempt {
    /// The system call.
    pub syscall: String,
    /// The path, as the server named it.
    pub path: String,
    /// The second path of rename, link and symlink.
    pub target: Option<String>,
    /// Whether the sandbox denied it (inferred: the path is outside every writable directory).
    pub denied: bool,
    /// Whether it would destroy content that exists (unlink, rmdir, truncate, O_TRUNC,
    /// rename from or over an existing path).
    pub destructive: bool,
    /// Allowed, but where the snapshot cannot show its effect (deeper than its walks go, or
    /// while a walk stopped at its entry limit): the attempt stands for the write.
    pub beyond_snapshot: bool,
    /// The process that tried (host pid).
    pub pid: u32,
    /// How it was seen.
    pub mechanism: Mechanism,
}

impl WriteAttempt {
    /// One line for humans.
    pub fn describe(&self) -> String {
        let target = self
            .target
            .as_ref()
            .map(|t| format!(" -> {t}"))
            .unwrap_or_default();
        let verdict = if self.denied {
            ", denied by the sandbox"
        } else if self.beyond_snapshot {
            ", where the snapshot cannot see (past its depth or entry limit)"
        } else {
            ""
        };
        format!("tried {} {}{target}{verdict}", self.syscall, self.path)
    }
}

/// A program the server started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEvent {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub argv: Vec<String>,
    /// The process (host pid).
    pub pid: u32,
    /// How it was seen.
    pub mechanism: Mechanism,
    /// Its environment (`NAME=value` entries, each ended by a NUL byte), for the scan for
    /// planted secrets only: never reported, never part of its identity.
    pub env: Carried,
}

/// A system call the sandbox refused outright: a socket family no server needs (`AF_VSOCK`
/// reaches a virtual machine's host) or a nested namespace (the usual first step of a kernel
/// privilege escalation). The server got an error; the attempt is evidence of evasion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedCall {
    /// The system call.
    pub syscall: String,
    /// What it asked for: `socket(AF_VSOCK)`, `unshare(CLONE_NEWUSER)`.
    pub what: String,
    /// The process that tried (host pid).
    pub pid: u32,
    /// How it was seen.
    pub mechanism: Mechanism,
}

/// How a planted secret (a canary) was seen leaving its place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretMove {
    /// In a tool's result: the secret went to the model (and its provider).
    Returned,
    /// In the arguments of a program the server started.
    Argv,
    /// In the environment of a program the server started, under a name of the server's
    /// choosing (a variable inherited as it was planted is not passed on).
    Env,
    /// Its file opened or read (`encoding` says which).
    Read,
    /// In what the server sent over the network (a DNS name, an HTTP request line, a TLS
    /// server name): `target` says where.
    Sent,
    /// In a file the server wrote outside the workspace (`$HOME`, `$TMPDIR`): `target` names
    /// it, and says when other users could read it.
    Written,
}

/// A planted secret seen where it should not be: its kind and place (never its value), how
/// it was carried, and where it went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSighting {
    /// How it moved.
    pub how: SecretMove,
    /// What it imitates (`aws-secret-access-key`, `ssh-private-key`, …).
    pub kind: String,
    /// Where it was planted (`~/.aws/credentials`, `$GITHUB_TOKEN`).
    pub place: String,
    /// How its bytes were carried (`raw`, `base64`, `gzip in base64`, …).
    pub encoding: String,
    /// Where it went: the program started, for [`SecretMove::Argv`]; the destination and
    /// the channel, for [`SecretMove::Sent`].
    pub target: Option<String>,
    /// Whether the call asked for it: its arguments named the file the secret is planted in
    /// (a file reader given that path returns it as told).
    pub asked: bool,
    /// For a read of a workspace file: the same window read the workspace's ordinary files
    /// too (a search, a sync, an archive of everything), so the secret was not singled out.
    pub swept: bool,
    /// How it was seen.
    pub mechanism: Mechanism,
}

impl SecretSighting {
    /// One line for humans.
    pub fn describe(&self) -> String {
        let what = format!("the planted {} from {}", self.kind, self.place);
        let encoding = if self.encoding == "raw" {
            String::new()
        } else {
            format!(" ({})", self.encoding)
        };
        match self.how {
            SecretMove::Returned if self.asked => {
                format!("returned {what}{encoding}, whose file the arguments named")
            }
            SecretMove::Returned => format!("returned {what}{encoding} in its result"),
            SecretMove::Argv => format!(
                "passed {what}{encoding} to {} in its arguments",
                self.target.as_deref().unwrap_or("a program")
            ),
            SecretMove::Env => format!(
                "passed {what}{encoding} to {} in its environment",
                self.target.as_deref().unwrap_or("a program")
            ),
            SecretMove::Sent => format!(
                "sent {what}{encoding} to {}",
                self.target.as_deref().unwrap_or("the network")
            ),
            SecretMove::Written => format!(
                "wrote {what}{encoding} to {}",
                self.target.as_deref().unwrap_or("a file")
            ),
            SecretMove::Read => format!(
                "{} {}{}, which holds a planted {}",
                self.encoding,
                self.place,
                if self.swept {
                    " with the workspace's other files"
                } else {
                    ""
                },
                self.kind
            ),
        }
    }
}

/// One observation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// A filesystem effect.
    File(FileEffect),
    /// Network activity.
    Network(NetEvent),
    /// A write that was attempted (and, when denied, had no effect).
    Attempt(WriteAttempt),
    /// A program started.
    Process(ProcessEvent),
    /// A system call the sandbox refused (an attempt to get out of it).
    Refused(RefusedCall),
    /// A planted secret seen where it should not be.
    Secret(SecretSighting),
}

impl Observation {
    /// Whether this shows the tool writing: an effect, or an attempt the sandbox denied.
    pub fn is_write(&self) -> bool {
        match self {
            Observation::File(_) => true,
            Observation::Attempt(a) => a.denied || a.beyond_snapshot,
            Observation::Network(_)
            | Observation::Process(_)
            | Observation::Refused(_)
            | Observation::Secret(_) => false,
        }
    }

    /// A key that identifies this observation across windows and runs, by kind and shape:
    /// paths match by shape (random segments such as UUIDs, hashes, timestamps and counters
    /// are placeholders, so a note moved to `trash/<uuid>` matches another run's uuid), network
    /// events by name (fake addresses differ between runs) and port. Process starts have none
    /// (they are not evidence).
    pub fn shape_key(&self) -> Option<String> {
        match self {
            Observation::File(f) => Some(format!("file {} {}", f.kind.verb(), path_shape(&f.path))),
            Observation::Attempt(a) => {
                Some(format!("attempt {} {}", a.syscall, path_shape(&a.path)))
            }
            Observation::Network(n) => Some(format!(
                "net {:?} {} {:?}",
                n.kind,
                n.name.clone().unwrap_or_else(|| n.destination.clone()),
                n.port
            )),
            Observation::Refused(r) => Some(format!("refused {}", r.what)),
            Observation::Secret(s) => Some(format!("secret {:?} {}", s.how, s.place)),
            Observation::Process(_) => None,
        }
    }

    /// For a write of content that destroys nothing (a creation, an append, an extension, a
    /// rewrite with the same content, entries only added to a store), a key of its path's
    /// shape alone: what the server's first request creates, the next ones append to. `None`
    /// for everything else, above all the writes that replace content, so that a store the
    /// server merely opened on its first request does not excuse a tool's overwrite of it.
    pub fn additive_write_key(&self) -> Option<String> {
        let f = self.as_file()?;
        (f.kind.creates_or_rewrites() && !self.is_destructive() && !f.kind.is_transient())
            .then(|| write_key(&f.path))
    }

    /// Whether this can be evidence against a hint: a write (or a denied write attempt) or
    /// network traffic that is not loopback. Process starts, refused calls and loopback
    /// traffic are not.
    pub fn is_evidential(&self) -> bool {
        self.is_write() || self.as_network().is_some_and(|n| !n.loopback)
    }

    /// How plainly this shows what the server did, most telling first (0): the bytes it sent
    /// (an HTTP request line, a TLS server name), a change to a file, a connection or
    /// datagram, a denied or other attempt, a name looked up, and last a UDP socket aimed
    /// at an address (a resolver sorting its answers does that without sending anything).
    /// Evidence lists the most telling pieces first.
    pub fn telling_rank(&self) -> u8 {
        match self {
            Observation::Network(n) if n.mechanism == Mechanism::Payload => 0,
            Observation::Secret(_) => 0,
            Observation::File(_) => 1,
            Observation::Network(n) => match (n.kind, n.mechanism) {
                (NetKind::Datagram, Mechanism::Attempt) => 5,
                (NetKind::Dns, _) => 4,
                _ => 2,
            },
            Observation::Attempt(_) | Observation::Refused(_) => 3,
            Observation::Process(_) => 6,
        }
    }

    /// Whether this shows the tool destroying existing content (or trying to).
    pub fn is_destructive(&self) -> bool {
        match self {
            Observation::File(f) => f.kind.is_destructive() && !f.database,
            Observation::Attempt(a) => (a.denied || a.beyond_snapshot) && a.destructive,
            Observation::Network(_)
            | Observation::Process(_)
            | Observation::Refused(_)
            | Observation::Secret(_) => false,
        }
    }
}

impl Observation {
    /// How it was seen.
    pub fn mechanism(&self) -> Mechanism {
        match self {
            Observation::File(f) => f.mechanism,
            Observation::Attempt(a) => a.mechanism,
            Observation::Network(n) => n.mechanism,
            Observation::Process(p) => p.mechanism,
            Observation::Refused(r) => r.mechanism,
            Observation::Secret(s) => s.mechanism,
        }
    }

    /// The file effect, if this is one.
    pub fn as_file(&self) -> Option<&FileEffect> {
        match self {
            Observation::File(f) => Some(f),
            _ => None,
        }
    }

    /// The network event, if this is one.
    pub fn as_network(&self) -> Option<&NetEvent> {
        match self {
            Observation::Network(n) => Some(n),
            _ => None,
        }
    }

    /// One line for humans.
    pub fn describe(&self) -> String {
        match self {
            Observation::File(f) => f.describe(),
            Observation::Network(n) => n.describe(),
            Observation::Attempt(a) => a.describe(),
            Observation::Process(p) => format!("started {}", p.argv.join(" ")),
            Observation::Refused(r) => format!("tried {}, refused by the sandbox", r.what),
            Observation::Secret(s) => s.describe(),
        }
    }
}

/// Whether a path names a zip package (an Office document, an archive) by its extension.
fn is_package_path(path: &str) -> bool {
    let lower = path.to_lowercase();
    [
        ".xlsx", ".xlsm", ".docx", ".pptx", ".odt", ".ods", ".odp", ".zip", ".jar", ".epub",
    ]
    .iter()
    .any(|e| lower.ends_with(e))
}

/// Whether reported path `path` is `dir` or lies below it.
pub fn at_or_under(path: &str, dir: &str) -> bool {
    path.strip_prefix(dir)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The key of any write of `path`'s content, by its shape (see
/// [`Observation::additive_write_key`]).
pub fn write_key(path: &str) -> String {
    format!("file write {}", path_shape(path))
}

/// The shape of a path: random segments (UUIDs, long hex runs, timestamps, counters)
/// replaced by placeholders, so that `trash/3f2a…` in one run matches `trash/9c1d…` in a
/// replay, and `journal-2026-11-30.log` matches the next day's journal.
pub fn path_shape(path: &str) -> String {
    static UUID: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")
            .expect("uuid pattern")
    });
    // Hex runs of 8 or more with at least one digit and one letter (hashes, random ids);
    // words such as "deadbeef" without digits stay.
    static HEX: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)\b[0-9a-f]{8,}\b").expect("hex pattern")
    });
    static DIGITS: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"[0-9]+").expect("digits pattern"));
    let s = UUID.replace_all(path, "<id>");
    let s = HEX.replace_all(&s, |c: &regex::Captures| {
        let m = &c[0];
        if m.bytes().any(|b| b.is_ascii_digit()) && m.bytes().any(|b| b.is_ascii_alphabetic()) {
            "<id>".to_string()
        } else {
            m.to_string()
        }
    });
    DIGITS.replace_all(&s, "#").into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_segments_of_paths_have_one_shape() {
        assert_eq!(
            path_shape("$WORKSPACE/trash/3f2a9c1d-0b4e-4e7a-9a51-55c1d2e3f4a5.md"),
            path_shape("$WORKSPACE/trash/9c1d3f2a-4e7a-0b4e-55c1-9a51d2e3f4a5.md")
        );
        assert_eq!(
            path_shape("$HOME/.cache/x/9f86d081884c7d65"),
            "$HOME/.cache/x/<id>"
        );
        assert_eq!(
            path_shape("$HOME/logs/journal-2026-11-30.log"),
            "$HOME/logs/journal-#-#-#.log"
        );
        assert_eq!(
            path_shape("$WORKSPACE/notes/readme.md"),
            "$WORKSPACE/notes/readme.md"
        );
        assert_eq!(
            path_shape("$WORKSPACE/deadbeefcafe"),
            "$WORKSPACE/deadbeefcafe"
        );
    }

    #[test]
    fn a_package_changed_in_place_is_called_a_package() {
        let mut f = FileEffect::bare(
            "$WORKSPACE/data/budget.xlsx",
            FileEffectKind::Overwritten,
            ObjectKind::File,
            Mechanism::Snapshot,
        );
        f.database = true;
        assert_eq!(
            f.describe(),
            "changed package $WORKSPACE/data/budget.xlsx in place"
        );
        f.path = "$WORKSPACE/app.db".into();
        assert_eq!(f.describe(), "changed database $WORKSPACE/app.db in place");
    }
}
