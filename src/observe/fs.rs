//! The snapshot observer: walks the scratch directories the server may write (workspace,
//! HOME, TMPDIR) at every checkpoint and diffs the result against the previous walk, giving
//! created, appended, overwritten, truncated, deleted, renamed and re-moded paths with sizes
//! and hashes. The walk never follows symlinks (every open is `O_NOFOLLOW` relative to an
//! already-open directory), never blocks on FIFOs, and is bounded in entries and depth.
//! It sees only effects that persist until the checkpoint, not attempts.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
use sha2::{Digest, Sha256};

use super::inotify::{ChangeFeed, Changes};
use super::{ObserveError, Observer, ObserverStatus};
use crate::evidence::{FileEffect, FileEffectKind, Mechanism, ObjectKind, Observation};

/// A directory tree to watch, shown in reports under `label` (e.g. `$WORKSPACE`).
#[derive(Debug, Clone)]
pub struct SnapshotRoot {
    /// The name shown in reports.
    pub label: String,
    /// The real path.
    pub path: PathBuf,
    /// Names directly under the root that are not walked (watched elsewhere).
    pub exclude: Vec<String>,
}

impl SnapshotRoot {
    /// A root without exclusions.
    pub fn new(label: &str, path: PathBuf) -> Self {
        Self {
            label: label.into(),
            path,
            exclude: Vec::new(),
        }
    }
}

/// A directory of the sandbox (its private `/tmp`, …), watched through `/proc/PID/root` from
/// each server start and shown in reports under its path inside the sandbox.
#[derive(Debug, Clone)]
pub struct SandboxDir {
    /// Its path inside the sandbox, also its name in reports.
    pub inside: PathBuf,
    /// Names directly under it that are not watched (watched elsewhere).
    pub exclude: Vec<String>,
}

impl SandboxDir {
    /// The directory at `inside`, without the names in `exclude`.
    pub fn new(inside: &str, exclude: Vec<String>) -> Self {
        Self {
            inside: PathBuf::from(inside),
            exclude,
        }
    }

    /// Its name in reports.
    pub fn label(&self) -> String {
        self.inside.display().to_string()
    }

    /// The root to walk for the sandbox whose root directory is `root` (`/proc/PID/root`).
    pub fn under(&self, root: &Path) -> SnapshotRoot {
        SnapshotRoot {
            label: self.label(),
            path: root.join(self.inside.strip_prefix("/").unwrap_or(&self.inside)),
            exclude: self.exclude.clone(),
        }
    }
}

/// Bounds of one snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotLimits {
    /// Most entries walked over all roots.
    pub max_entries: usize,
    /// Deepest directory level walked.
    pub max_depth: usize,
    /// Files up to this size keep their content, to tell appends and truncations apart.
    pub keep_content_bytes: u64,
    /// Total content kept per snapshot.
    pub content_budget: u64,
    /// Files larger than this are not hashed.
    pub hash_limit: u64,
    /// Most effects reported per checkpoint.
    pub max_effects: usize,
}

impl Default for SnapshotLimits {
    fn default() -> Self {
        Self {
            max_entries: 200_000,
            max_depth: 64,
            keep_content_bytes: 1024 * 1024,
            content_budget: 128 * 1024 * 1024,
            hash_limit: 1024 * 1024 * 1024,
            max_effects: 2_000,
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    kind: ObjectKind,
    mode: u32,
    size: u64,
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    sha: Option<[u8; 32]>,
    content: Option<Arc<[u8]>>,
    link: Option<Vec<u8>>,
    /// SHA-256 of the first `n` bytes, where `n` is the size of the previous version of a
    /// grown file: tells an append from a rewrite when the old content was not kept.
    prefix_sha: Option<(u64, [u8; 32])>,
    /// The content is a database file changed in place (SQLite or git index magic).
    database: bool,
    /// The digest of the content without what its format writes anew on every save (zip
    /// packages, PDF: see [`super::normalise`]), for those formats.
    norm_sha: Option<[u8; 32]>,
    /// Hard links to it (a file written through another of its names elsewhere changes
    /// without an event in this directory).
    links: u64,
}

impl Entry {
    fn same_version(&self, other: &Entry) -> bool {
        self.dev == other.dev
            && self.ino == other.ino
            && self.size == other.size
            && self.mtime == other.mtime
            && self.ctime == other.ctime
            && self.kind == other.kind
    }
}

type Snapshot = BTreeMap<String, Entry>;

/// Watches directory trees through snapshots.
pub struct FsSnapshotObserver {
    roots: Vec<SnapshotRoot>,
    /// Roots inside a running sandbox (its private /tmp, …), replaced at every server start.
    sandbox_dirs: Vec<SandboxDir>,
    sandbox_roots: Vec<SnapshotRoot>,
    /// Overlays, watched through their upper layer (only what changed is walked).
    overlays: Vec<OverlayRoot>,
    /// Paths of the overlays' merged views that their upper layers touched so far (entries,
    /// whiteouts, what opaque directories hide): every other path still shows its lower layer.
    overlay_touched: std::collections::BTreeSet<String>,
    limits: SnapshotLimits,
    last: Snapshot,
    notes: Vec<String>,
    /// The process whose descendants are the server's (see [`super::ServerStart`]).
    server_pid: Option<u32>,
    /// Files (device, inode) the server's processes had mapped shared and writable at the
    /// previous checkpoint.
    mapped: HashSet<(u64, u64)>,
    /// The files hashed again at this checkpoint whatever their metadata says.
    forced: HashSet<(u64, u64)>,
    /// When the mappings were last read.
    mapped_at: Option<std::time::Instant>,
    /// Change notifications over the same directories: between full walks, only the paths
    /// they name are read again.
    feed: Option<ChangeFeed>,
    /// Whether the notifications can stand for a full walk for the current server: it runs
    /// where writes are confined to watched directories (Landlock) and its shared file
    /// mappings are reported (seccomp).
    notified_writes: bool,
    /// The seccomp recorder's queue of the current server (its count of shared file mappings).
    attempts: Option<crate::sandbox::notify::AttemptQueue>,
    /// The next checkpoint walks everything.
    walk_whole: bool,
    /// The last full walk stopped at a limit.
    truncated: bool,
    /// The same, shared with the attempt observer: while set, writes it sees inside the
    /// writable directories are reported, since the snapshot may not show their effect.
    gap: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Bytes of content kept in `last`.
    kept_total: u64,
    /// Files of `last` with more than one name: read again at every checkpoint.
    multi_linked: BTreeSet<String>,
    /// Checkpoints that walked everything, and those that read only what changed.
    whole_walks: u64,
    partial_reads: u64,
    /// Files (device, inode) never opened (see [`FsSnapshotObserver::never_reading`]).
    unread: HashSet<(u64, u64)>,
}

/// A directory covered by an overlay: `lower` is the host directory (never written), `upper`
/// receives every change; the server sees their merge under `label`.
#[derive(Debug, Clone)]
pub struct OverlayRoot {
    /// The path the server sees (the host directory's path), shown in reports.
    pub label: String,
    /// The host directory.
    pub lower: PathBuf,
    /// The upper layer on the host.
    pub upper: PathBuf,
}

impl FsSnapshotObserver {
    /// A flag set while the last full walk stopped at a limit (see the attempt observer).
    pub fn gap_flag(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.gap.clone()
    }

    /// How deep the walks go: a path with more components below its root is not seen.
    pub fn max_depth(&self) -> usize {
        self.limits.max_depth
    }

    /// Takes the baseline snapshot of `roots`.
    pub fn new(roots: Vec<SnapshotRoot>, limits: SnapshotLimits) -> Self {
        Self::never_reading(roots, limits, &[])
    }

    /// [`FsSnapshotObserver::new`] that never opens the files `unread` names (as they are
    /// now: device and inode), from the baseline on: their entries rest on their metadata,
    /// so that whoever opens them is the server (the planted secrets, whose reads another
    /// observer reports).
    pub fn never_reading(
        roots: Vec<SnapshotRoot>,
        limits: SnapshotLimits,
        unread: &[PathBuf],
    ) -> Self {
        let unread = unread
            .iter()
            .filter_map(|p| {
                let st = rustix::fs::lstat(p).ok()?;
                Some((st.st_dev as u64, inode(&st)))
            })
            .collect();
        let mut me = Self {
            roots,
            sandbox_dirs: Vec::new(),
            sandbox_roots: Vec::new(),
            overlays: Vec::new(),
            overlay_touched: std::collections::BTreeSet::new(),
            limits,
            last: Snapshot::new(),
            notes: Vec::new(),
            server_pid: None,
            mapped: HashSet::new(),
            forced: HashSet::new(),
            mapped_at: None,
            feed: None,
            notified_writes: false,
            attempts: None,
            walk_whole: true,
            truncated: false,
            gap: std::sync::Arc::default(),
            kept_total: 0,
            multi_linked: BTreeSet::new(),
            whole_walks: 0,
            partial_reads: 0,
            unread,
        };
        me.last = me.take();
        me.remember_whole_walk();
        me
    }

    /// Follows change notifications over the same directories (see [`ChangeFeed`]).
    pub fn follow(&mut self, feed: ChangeFeed) {
        self.feed = Some(feed);
    }

    /// Also watch directories of a running sandbox, seen through `/proc/<pid>/root`. The
    /// baseline of those roots is taken at every server start (a restarted sandbox has fresh
    /// directories).
    pub fn watch_sandbox_dirs(&mut self, dirs: Vec<SandboxDir>) {
        self.sandbox_dirs = dirs;
    }

    /// Also watch overlays through their layers. Their upper layers must still be empty (or
    /// hold only what the baseline should include).
    pub fn watch_overlays(&mut self, overlays: Vec<OverlayRoot>) {
        self.overlays = overlays;
        let (view, touched, before) = self.overlay_views();
        self.last.extend(before);
        self.last.extend(view);
        self.overlay_touched.extend(touched);
    }

    /// The overlays' merged views, restricted to what their upper layers touch: (the current
    /// entries, every touched path, the lower layer's entries for paths touched for the first
    /// time: their state before).
    fn overlay_views(&mut self) -> (Snapshot, Vec<String>, Snapshot) {
        let force: HashSet<(u64, u64)> = self.forced.clone();
        let mut view = Snapshot::new();
        let mut touched: Vec<String> = Vec::new();
        let mut before = Snapshot::new();
        let empty = Snapshot::new();
        for ov in self.overlays.clone() {
            let mut walk = Walk::new(&self.limits, &self.last, Some(UpperMarks::default()));
            walk.force_hash = &force;
            match open_dir(&ov.upper) {
                Ok(fd) => walk.dir(fd, &ov.label, 0),
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => walk
                    .notes
                    .push(format!("cannot open the upper layer of {}: {e}", ov.label)),
            }
            let marks = walk.upper.take().unwrap_or_default();
            let upper_entries = std::mem::take(&mut walk.out);
            self.notes.append(&mut walk.notes);
            // What the lower layer has under the paths the upper layer touches.
            let mut lower = Walk::new(&self.limits, &empty, None);
            let lower_path = |display: &str| -> PathBuf {
                let rel = display
                    .strip_prefix(&ov.label)
                    .unwrap_or(display)
                    .trim_start_matches('/');
                ov.lower.join(rel)
            };
            let mut paths: Vec<String> = upper_entries
                .keys()
                .chain(&marks.whiteouts)
                .cloned()
                .collect();
            // An opaque directory hides the whole lower subtree under it.
            for dir in &marks.opaque {
                if let Ok(fd) = open_dir(&lower_path(dir)) {
                    let mut hidden = Walk::new(&self.limits, &empty, None);
                    hidden.dir(fd, dir, 0);
                    paths.extend(hidden.out.into_keys());
                }
            }
            // Paths touched earlier and no longer in the upper layer show the lower one again.
            let prefix = format!("{}/", ov.label);
            paths.extend(
                self.overlay_touched
                    .iter()
                    .filter(|p| p.starts_with(&prefix))
                    .cloned(),
            );
            paths.sort();
            paths.dedup();
            for p in &paths {
                let first_time = !self.overlay_touched.contains(p);
                let in_upper = upper_entries.contains_key(p);
                let hidden = marks.whiteouts.contains(p)
                    || marks
                        .opaque
                        .iter()
                        .any(|d| p.starts_with(&format!("{d}/")) && !in_upper);
                if !first_time && (in_upper || hidden) {
                    continue;
                }
                let path = lower_path(p);
                let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
                    continue;
                };
                let Ok(dirfd) = open_dir(parent) else {
                    continue;
                };
                let Some((entry, _)) = lower.entry(&dirfd, name.as_encoded_bytes(), p) else {
                    continue;
                };
                if first_time {
                    before.insert(p.clone(), entry.clone());
                }
                if !in_upper && !hidden {
                    view.insert(p.clone(), entry);
                }
            }
            self.notes.append(&mut lower.notes);
            touched.extend(paths);
            view.extend(upper_entries);
        }
        (view, touched, before)
    }

    /// The files whose content must be read again whatever their metadata says: those mapped
    /// shared and writable now or at the previous checkpoint (a write through such a mapping
    /// changes neither size nor times, and fires no notification).
    fn refresh_mapped(&mut self) -> HashSet<(u64, u64)> {
        // Two checkpoints follow each other closely (after a call, and before the next one):
        // the mappings read at the first stand for the second.
        if self
            .mapped_at
            .is_some_and(|at| at.elapsed() < MAPPINGS_FRESH_FOR)
        {
            return self.forced.clone();
        }
        self.mapped_at = Some(std::time::Instant::now());
        let now = self
            .server_pid
            .map(mapped_shared_writable)
            .unwrap_or_default();
        let force: HashSet<(u64, u64)> = now.union(&self.mapped).copied().collect();
        self.mapped = now;
        self.forced = force.clone();
        force
    }

    /// The scratch roots and the current sandbox's.
    fn all_roots(&self) -> Vec<SnapshotRoot> {
        self.roots
            .iter()
            .chain(&self.sandbox_roots)
            .cloned()
            .collect()
    }

    fn take(&mut self) -> Snapshot {
        let roots = self.all_roots();
        let sandbox_labels: Vec<String> =
            self.sandbox_roots.iter().map(|r| r.label.clone()).collect();
        let mut snap = self.take_roots(&roots);
        // A sandbox directory that cannot be opened has vanished with its sandbox (the server
        // died): keep its last state instead of reporting everything in it as deleted.
        for label in sandbox_labels {
            let prefix = format!("{label}/");
            if !snap.keys().any(|k| k.starts_with(&prefix)) {
                for (k, v) in self.last.iter().filter(|(k, _)| k.starts_with(&prefix)) {
                    snap.insert(k.clone(), v.clone());
                }
            }
        }
        snap
    }

    fn take_roots(&mut self, roots: &[SnapshotRoot]) -> Snapshot {
        let force = self.refresh_mapped();
        let mut walk = Walk::new(&self.limits, &self.last, None);
        walk.force_hash = &force;
        walk.unread = &self.unread;
        for root in roots {
            match open_dir(&root.path) {
                Ok(fd) => {
                    walk.exclude = root.exclude.clone();
                    walk.dir(fd, &root.label, 0);
                }
                Err(e)
                    if e == rustix::io::Errno::NOENT
                        && self.sandbox_roots.iter().any(|r| r.label == root.label) => {}
                Err(e) => walk.notes.push(format!("cannot open {}: {e}", root.label)),
            }
        }
        if walk.truncated {
            self.truncated = true;
            self.gap.store(true, std::sync::atomic::Ordering::Relaxed);
            walk.notes.push(format!(
                "snapshot stopped at {} entries or depth {}; effects beyond were not seen",
                self.limits.max_entries, self.limits.max_depth
            ));
        }
        self.notes.extend(walk.notes);
        walk.out
    }

    /// Derived state of `last` after a full walk: its kept content and multi-linked files.
    fn remember_whole_walk(&mut self) {
        self.kept_total = self
            .last
            .values()
            .filter_map(|e| e.content.as_ref().map(|c| c.len() as u64))
            .sum();
        self.multi_linked = self
            .last
            .iter()
            .filter(|(_, e)| e.kind == ObjectKind::File && e.links > 1)
            .map(|(p, _)| p.clone())
            .collect();
    }

    /// Whether this checkpoint may read only what the notifications name.
    fn may_follow_changes(&mut self, changes: &Changes) -> bool {
        if self.walk_whole || self.truncated || !changes.complete || !self.notified_writes {
            return false;
        }
        // A shared writable mapping changes a file without any event: once the server made
        // one (seccomp reports every shared file mapping), every checkpoint walks.
        self.attempts
            .as_ref()
            .is_some_and(|q| q.lock().unwrap_or_else(|p| p.into_inner()).shared_file_maps == 0)
    }

    /// The snapshot's changes at the paths `changed` names (and their subtrees where a
    /// directory appeared or was replaced), plus the overlays' views: (the entries of `last`
    /// those paths had, the entries they have now). `None` when a full walk is needed (an
    /// unexpected error, a limit reached).
    fn read_changed(&mut self, changed: BTreeSet<String>) -> Option<(Snapshot, Snapshot)> {
        let mut pending = changed;
        pending.extend(self.multi_linked.iter().cloned());
        let mut done: HashSet<String> = HashSet::new();
        let roots = self.all_roots();
        let mut old = Snapshot::new();
        let mut walk = Walk::new(&self.limits, &self.last, None);
        walk.unread = &self.unread;
        walk.kept_content = self.kept_total;
        walk.base_entries = self.last.len();
        let mut root_fds: HashMap<usize, Option<OwnedFd>> = HashMap::new();
        let mut rewalked: Vec<String> = Vec::new();
        while let Some(path) = pending.pop_first() {
            if !done.insert(path.clone()) {
                continue;
            }
            let path = &path;
            if rewalked.iter().any(|d| {
                path.starts_with(d.as_str()) && path.as_bytes().get(d.len()) == Some(&b'/')
            }) {
                continue;
            }
            let Some((i, rel)) = roots.iter().enumerate().find_map(|(i, r)| {
                path.strip_prefix(r.label.as_str())
                    .and_then(|rest| rest.strip_prefix('/'))
                    .filter(|rest| !rest.is_empty())
                    .map(|rest| (i, rest))
            }) else {
                continue;
            };
            let root = &roots[i];
            let (parent_rel, name) = rel.rsplit_once('/').unwrap_or(("", rel));
            let top = rel.split('/').next().unwrap_or(rel);
            if root.exclude.iter().any(|x| x == top) {
                continue;
            }
            let depth = rel.split('/').count();
            if depth >= self.limits.max_depth {
                return None;
            }
            let root_fd = root_fds
                .entry(i)
                .or_insert_with(|| open_dir(&root.path).ok());
            let Some(root_fd) = root_fd.as_ref() else {
                // A sandbox directory gone with its sandbox keeps its last state; another
                // root that cannot be opened needs the full walk's note.
                if self.sandbox_roots.iter().any(|r| r.label == root.label) {
                    continue;
                }
                return None;
            };
            let parent = open_parent(root_fd, parent_rel)?;
            let was = self.last.get(path.as_str());
            let now = parent.as_ref().and_then(|fd| {
                walk.entry(fd, name.as_bytes(), path)
                    .map(|(entry, _)| (fd, entry))
            });
            let subtree = |last: &Snapshot, old: &mut Snapshot| {
                old.extend(entries_below(last, path).map(|(p, e)| (p.clone(), e.clone())));
            };
            if let Some(e) = was {
                old.insert(path.clone(), e.clone());
            }
            match now {
                None => {
                    if was.is_some_and(|e| e.kind == ObjectKind::Dir) {
                        subtree(&self.last, &mut old);
                    }
                }
                Some((fd, entry)) => {
                    let same_dir = entry.kind == ObjectKind::Dir
                        && was.is_some_and(|w| {
                            w.kind == ObjectKind::Dir && (w.dev, w.ino) == (entry.dev, entry.ino)
                        });
                    let walk_in = entry.kind == ObjectKind::Dir && !same_dir;
                    if was.is_some_and(|w| w.kind == ObjectKind::Dir) && !same_dir {
                        subtree(&self.last, &mut old);
                    }
                    // A file that gained a name: its other names change with it, without
                    // events where they are.
                    if entry.kind == ObjectKind::File
                        && entry.links > 1
                        && !self.multi_linked.contains(path)
                    {
                        let inode = (entry.dev, entry.ino);
                        pending.extend(
                            self.last
                                .iter()
                                .filter(|(p, e)| (e.dev, e.ino) == inode && !done.contains(*p))
                                .map(|(p, _)| p.clone()),
                        );
                    }
                    walk.out.insert(path.clone(), entry);
                    if walk_in {
                        let sub = rustix::fs::openat(
                            fd.as_fd(),
                            name,
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                            Mode::empty(),
                        );
                        match sub {
                            Ok(sub) => walk.dir(sub, path, depth),
                            Err(
                                rustix::io::Errno::NOENT
                                | rustix::io::Errno::NOTDIR
                                | rustix::io::Errno::LOOP,
                            ) => {}
                            Err(_) => return None,
                        }
                        rewalked.push(path.clone());
                    }
                }
            }
            if walk.truncated {
                return None;
            }
        }
        let removed_content: u64 = old
            .values()
            .filter_map(|e| e.content.as_ref().map(|c| c.len() as u64))
            .sum();
        let kept_now = walk.kept_content.saturating_sub(self.kept_total);
        let mut new = std::mem::take(&mut walk.out);
        self.notes.append(&mut walk.notes);
        drop(walk);
        self.kept_total = (self.kept_total + kept_now).saturating_sub(removed_content);
        self.add_overlay_views(&mut old, &mut new);
        Some((old, new))
    }

    /// The overlays' share of a checkpoint: their upper layers are walked whole (they hold
    /// only what changed), their entries before into `old`, their view now into `new`.
    fn add_overlay_views(&mut self, old: &mut Snapshot, new: &mut Snapshot) {
        if self.overlays.is_empty() {
            return;
        }
        let (view, touched, before) = self.overlay_views();
        for (p, e) in before {
            self.last.entry(p).or_insert(e);
        }
        self.overlay_touched.extend(touched);
        for ov in &self.overlays {
            old.extend(entries_below(&self.last, &ov.label).map(|(p, e)| (p.clone(), e.clone())));
        }
        new.extend(view);
    }
}

/// The directory `parent_rel` beneath the root (the root itself when empty): `Some(None)`
/// when it is gone or no longer reachable without a symlink (the walk would not see it
/// either), `None` on any other error (a full walk is needed).
fn open_parent(root_fd: &OwnedFd, parent_rel: &str) -> Option<Option<OwnedFd>> {
    if parent_rel.is_empty() {
        return Some(Some(root_fd.try_clone().ok()?));
    }
    match open_beneath(root_fd, parent_rel) {
        Ok(fd) => Some(Some(fd)),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP) => {
            Some(None)
        }
        Err(_) => None,
    }
}

impl Observer for FsSnapshotObserver {
    fn server_started(&mut self, start: &super::ServerStart) {
        self.server_pid = start.server_pid;
        self.mapped_at = None;
        self.attempts = start.attempts.clone();
        self.notified_writes = start.writes_confined && start.attempts.is_some();
        // The new sandbox's directories were read before their watches existed.
        self.walk_whole = true;
        let sandbox_root = start.sandbox_root.as_deref();
        let old: Vec<String> = self
            .sandbox_roots
            .iter()
            .map(|r| format!("{}/", r.label))
            .collect();
        self.last
            .retain(|path, _| !old.iter().any(|o| path.starts_with(o.as_str())));
        self.sandbox_roots = match sandbox_root {
            Some(root) => self.sandbox_dirs.iter().map(|d| d.under(root)).collect(),
            None => Vec::new(),
        };
        // A baseline for the fresh sandbox directories only; the other roots keep theirs, so
        // nothing that happened there since the last checkpoint is lost.
        let roots = self.sandbox_roots.clone();
        let fresh = self.take_roots(&roots);
        self.last.extend(fresh);
    }

    fn checkpoint(&mut self) -> Result<Vec<Observation>, ObserveError> {
        let changes = self
            .feed
            .as_ref()
            .map(|f| f.lock().unwrap_or_else(|p| p.into_inner()).take_changes());
        let partial = match changes {
            Some(changes) if self.may_follow_changes(&changes) => self.read_changed(changes.paths),
            _ => None,
        };
        let (old, now, whole) = match partial {
            Some((old, new)) => {
                self.partial_reads += 1;
                (old, new, false)
            }
            None => {
                self.whole_walks += 1;
                self.walk_whole = false;
                self.truncated = false;
                let mut now = self.take();
                self.gap
                    .store(self.truncated, std::sync::atomic::Ordering::Relaxed);
                let (view, touched, before) = self.overlay_views();
                // Paths the upper layers touch for the first time were their lower selves
                // until now.
                for (p, e) in before {
                    self.last.entry(p).or_insert(e);
                }
                self.overlay_touched.extend(touched);
                now.extend(view);
                (Snapshot::new(), now, true)
            }
        };
        // After a full walk `now` is everything; otherwise it is what changed, `old` what
        // those paths were, and every other path is as in `last`.
        let before: &Snapshot = if whole { &self.last } else { &old };
        let mut effects = diff(before, &now);
        let content = |snapshot: &Snapshot, p: &str| {
            snapshot
                .get(p)
                .and_then(|e| e.content.as_deref().map(<[u8]>::to_vec))
        };
        let content_now = |p: &str| match now.get(p) {
            Some(e) => e.content.as_deref().map(<[u8]>::to_vec),
            None if whole || old.contains_key(p) => None,
            None => content(&self.last, p),
        };
        // Stores read in their own terms: rows and members added, changed, removed.
        super::store::reclassify(&mut effects, &|p| content(&self.last, p), &content_now);
        // Effects inside a git repository, judged by git's model (a commit moves a ref
        // forward; it does not destroy it).
        if effects.iter().any(|e| e.path.contains("/.git/")) {
            let roots = &self.roots;
            let real_path = |p: &str| {
                roots.iter().find_map(|r| {
                    let rest = p.strip_prefix(&r.label)?;
                    Some(r.path.join(rest.trim_start_matches('/')))
                })
            };
            super::git::reclassify_worktree(&mut effects, &|p| content(&self.last, p), &real_path);
            super::git::reclassify(
                &mut effects,
                &|p| content(&self.last, p),
                &content_now,
                &real_path,
            );
        }
        if whole {
            self.last = now;
            self.remember_whole_walk();
        } else {
            for p in old.keys() {
                if !now.contains_key(p) {
                    self.last.remove(p);
                    self.multi_linked.remove(p);
                }
            }
            for (p, e) in now {
                if e.kind == ObjectKind::File && e.links > 1 {
                    self.multi_linked.insert(p.clone());
                } else {
                    self.multi_linked.remove(&p);
                }
                self.last.insert(p, e);
            }
        }
        if effects.len() > self.limits.max_effects {
            self.notes.push(format!(
                "{} file effects in one window; only the first {} are listed",
                effects.len(),
                self.limits.max_effects
            ));
            effects.truncate(self.limits.max_effects);
        }
        Ok(effects.into_iter().map(Observation::File).collect())
    }

    fn status(&self) -> ObserverStatus {
        ObserverStatus {
            name: "fs-snapshot".into(),
            covers: format!(
                "files under {} (before/after snapshots per window){}{}",
                self.roots
                    .iter()
                    .map(|r| r.label.clone())
                    .chain(self.sandbox_dirs.iter().map(SandboxDir::label))
                    .collect::<Vec<_>>()
                    .join(", "),
                if self.partial_reads == 0 {
                    String::new()
                } else {
                    format!(
                        "; {} checkpoint(s) walked everything (each server start, the end, and wherever notifications could not stand for a walk), {} read again only the paths change notifications named",
                        self.whole_walks, self.partial_reads
                    )
                },
                if self.overlays.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; overlays over {} through their upper layers (changes, whiteouts, opaque directories)",
                        self.overlays
                            .iter()
                            .map(|o| o.label.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ),
            blind_spots: vec![
                "writes outside these directories".into(),
                "write attempts that failed, and files created and removed within one window"
                    .into(),
            ],
        }
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn walk_whole_next(&mut self) {
        self.walk_whole = true;
    }
}

struct Walk<'a> {
    limits: &'a SnapshotLimits,
    previous: &'a Snapshot,
    /// Files (device, inode) hashed again even when their metadata is unchanged.
    force_hash: &'a HashSet<(u64, u64)>,
    /// Files (device, inode) never opened: their entry rests on their metadata alone.
    unread: &'a HashSet<(u64, u64)>,
    out: Snapshot,
    /// Entries of the snapshot outside `out` (they count against the entry limit).
    base_entries: usize,
    kept_content: u64,
    truncated: bool,
    notes: Vec<String>,
    /// Top-level names of the current root to skip.
    exclude: Vec<String>,
    /// Walking an overlay's upper layer: whiteouts and opaque directories are recorded here
    /// instead of being entries.
    upper: Option<UpperMarks>,
}

/// What an overlay's upper layer says beyond its entries.
#[derive(Debug, Default)]
struct UpperMarks {
    /// Paths deleted in the merged view (whiteouts: character devices 0/0).
    whiteouts: Vec<String>,
    /// Directories that hide everything the lower layer has under them.
    opaque: Vec<String>,
}

/// Whether an upper-layer directory is opaque (`trusted.` as root, `user.` with `userxattr`).
fn is_opaque(dir: &OwnedFd) -> bool {
    let mut value = [0u8; 4];
    ["trusted.overlay.opaque", "user.overlay.opaque"]
        .iter()
        .any(|name| {
            matches!(rustix::fs::fgetxattr(dir, *name, &mut value), Ok(n) if value[..n] == *b"y")
        })
}

impl<'a> Walk<'a> {
    /// A walk that reuses the hashes of unchanged files from `previous`; `upper` when it walks
    /// an overlay's upper layer.
    fn new(limits: &'a SnapshotLimits, previous: &'a Snapshot, upper: Option<UpperMarks>) -> Self {
        static NONE: std::sync::LazyLock<HashSet<(u64, u64)>> =
            std::sync::LazyLock::new(HashSet::new);
        Self {
            limits,
            previous,
            force_hash: &NONE,
            unread: &NONE,
            out: Snapshot::new(),
            base_entries: 0,
            kept_content: 0,
            truncated: false,
            notes: Vec::new(),
            exclude: Vec::new(),
            upper,
        }
    }

    fn dir(&mut self, fd: OwnedFd, prefix: &str, depth: usize) {
        if depth >= self.limits.max_depth {
            self.truncated = true;
            return;
        }
        let mut dir = match Dir::read_from(fd.as_fd()) {
            Ok(d) => d,
            Err(e) => {
                self.notes.push(format!("cannot list {prefix}: {e}"));
                return;
            }
        };
        let mut names = Vec::new();
        while let Some(entry) = dir.read() {
            match entry {
                Ok(e) => {
                    let name = e.file_name().to_bytes();
                    if name != b"." && name != b".." {
                        names.push(name.to_vec());
                    }
                }
                Err(e) => {
                    self.notes.push(format!("error listing {prefix}: {e}"));
                    break;
                }
            }
        }
        names.sort();
        if depth == 0 && !self.exclude.is_empty() {
            names.retain(|n| !self.exclude.iter().any(|x| x.as_bytes() == n.as_slice()));
        }
        for name in names {
            if self.base_entries + self.out.len() >= self.limits.max_entries {
                self.truncated = true;
                return;
            }
            let display = format!("{prefix}/{}", display_name(&name));
            let Some((entry, is_whiteout)) = self.entry(&fd, &name, &display) else {
                continue;
            };
            if is_whiteout {
                if let Some(marks) = self.upper.as_mut() {
                    marks.whiteouts.push(display);
                    continue;
                }
            }
            let kind = entry.kind;
            self.out.insert(display.clone(), entry);
            if kind == ObjectKind::Dir {
                match rustix::fs::openat(
                    fd.as_fd(),
                    name.as_slice(),
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(sub) => {
                        if let Some(marks) = self.upper.as_mut().filter(|_| is_opaque(&sub)) {
                            marks.opaque.push(display.clone());
                        }
                        self.dir(sub, &display, depth + 1)
                    }
                    Err(e) => self
                        .notes
                        .push(format!("cannot open directory {display}: {e}")),
                }
            }
        }
    }

    /// The entry for `name` in `fd` (hashed when a file), and whether it is an overlay
    /// whiteout; `None` when it vanished or cannot be read.
    fn entry(&mut self, fd: &OwnedFd, name: &[u8], display: &str) -> Option<(Entry, bool)> {
        let st = match rustix::fs::statat(fd.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(e) => {
                // Gone since the listing: it simply is not in this snapshot.
                if e != rustix::io::Errno::NOENT {
                    self.notes.push(format!("cannot stat {display}: {e}"));
                }
                return None;
            }
        };
        let ft = FileType::from_raw_mode(st.st_mode as _);
        let whiteout = ft == FileType::CharacterDevice && st.st_rdev == 0;
        let kind = match ft {
            FileType::RegularFile => ObjectKind::File,
            FileType::Directory => ObjectKind::Dir,
            FileType::Symlink => ObjectKind::Symlink,
            _ => ObjectKind::Special,
        };
        let mut entry = Entry {
            kind,
            mode: st.st_mode as u32 & 0o7777,
            size: if kind == ObjectKind::File {
                st.st_size as u64
            } else {
                0
            },
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mtime: (st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: (st.st_ctime as i64, st.st_ctime_nsec as i64),
            sha: None,
            content: None,
            link: None,
            prefix_sha: None,
            database: false,
            norm_sha: None,
            links: st.st_nlink as u64,
        };
        match kind {
            ObjectKind::File => self.file(fd, name, display, &mut entry),
            ObjectKind::Symlink => {
                entry.link = rustix::fs::readlinkat(fd.as_fd(), name, Vec::new())
                    .ok()
                    .map(|c| c.into_bytes());
            }
            ObjectKind::Dir | ObjectKind::Special => {}
        }
        Some((entry, whiteout))
    }

    fn file(&mut self, dirfd: &OwnedFd, name: &[u8], display: &str, entry: &mut Entry) {
        // A file whose every read is the server's to answer for (a planted secret): known by
        // its metadata only, so that an open of it is never ours.
        if self.unread.contains(&(entry.dev, entry.ino)) {
            return;
        }
        let previous = self.previous.get(display);
        if let Some(prev) = previous {
            if prev.same_version(entry)
                && prev.sha.is_some()
                && !self.force_hash.contains(&(entry.dev, entry.ino))
            {
                entry.sha = prev.sha;
                entry.database = prev.database;
                entry.norm_sha = prev.norm_sha;
                if let Some(c) = &prev.content {
                    if self.kept_content + c.len() as u64 <= self.limits.content_budget {
                        self.kept_content += c.len() as u64;
                        entry.content = Some(c.clone());
                    }
                }
                return;
            }
        }
        if entry.size > self.limits.hash_limit {
            self.notes.push(format!(
                "{display} is larger than {} bytes; not hashed",
                self.limits.hash_limit
            ));
            return;
        }
        let fd = match rustix::fs::openat(
            dirfd.as_fd(),
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(e) => {
                self.notes.push(format!("cannot read {display}: {e}"));
                return;
            }
        };
        match rustix::fs::fstat(&fd) {
            Ok(st)
                if FileType::from_raw_mode(st.st_mode as _) == FileType::RegularFile
                    && inode(&st) == entry.ino => {}
            _ => return,
        }
        let keep = entry.size <= self.limits.keep_content_bytes
            && self.kept_content + entry.size <= self.limits.content_budget;
        let mut file = std::fs::File::from(fd);
        let mut hasher = Sha256::new();
        let mut prefix = previous
            .filter(|p| {
                p.kind == ObjectKind::File
                    && p.content.is_none()
                    && p.size > 0
                    && p.size < entry.size
            })
            .map(|p| (p.size, Sha256::new()));
        let mut kept = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        let mut normalisable = false;
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if total == 0 {
                        entry.database = DATABASE_MAGICS.iter().any(|m| buf[..n].starts_with(m));
                        normalisable = [&b"PK\x03\x04"[..], b"%PDF-"]
                            .iter()
                            .any(|m| buf[..n].starts_with(m));
                    }
                    hasher.update(&buf[..n]);
                    if let Some((len, h)) = prefix.as_mut() {
                        let upto = (*len).saturating_sub(total).min(n as u64) as usize;
                        h.update(&buf[..upto]);
                    }
                    total += n as u64;
                    if keep && total <= self.limits.keep_content_bytes {
                        kept.extend_from_slice(&buf[..n]);
                    }
                    if total > self.limits.hash_limit {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.notes.push(format!("error reading {display}: {e}"));
                    return;
                }
            }
        }
        // The file may have changed size while we read: what we hashed is what we report.
        entry.size = total;
        entry.sha = Some(hasher.finalize().into());
        entry.prefix_sha = prefix
            .filter(|(len, _)| *len <= total)
            .map(|(len, h)| (len, h.finalize().into()));
        let whole_kept = keep && total <= self.limits.keep_content_bytes;
        if normalisable {
            // A document: read again whole (unless kept) for the digest that leaves out what
            // every save writes.
            let mut whole = Vec::new();
            let content = if whole_kept {
                Some(&kept[..])
            } else {
                use std::io::Seek;
                (file.rewind().is_ok() && file.by_ref().take(total).read_to_end(&mut whole).is_ok())
                    .then_some(&whole[..])
            };
            entry.norm_sha = content.and_then(super::normalise::normalised_digest);
        }
        if whole_kept {
            self.kept_content += total;
            entry.content = Some(kept.into());
        }
    }
}

/// How long the mappings read at one checkpoint stand for the next.
const MAPPINGS_FRESH_FOR: std::time::Duration = std::time::Duration::from_millis(100);

/// The files (device, inode) that `root` or any of its descendants has mapped shared and
/// writable (`rw-s` in `/proc/PID/maps`).
fn mapped_shared_writable(root: u32) -> HashSet<(u64, u64)> {
    crate::sandbox::tree::ProcessTree::new(root)
        .pids()
        .into_iter()
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/maps")).ok())
        .flat_map(|maps| {
            maps.lines()
                .filter_map(shared_writable_file)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The (device, inode) of a `/proc/PID/maps` line that maps a file shared and writable.
fn shared_writable_file(line: &str) -> Option<(u64, u64)> {
    let mut fields = line.split_whitespace();
    let _range = fields.next()?;
    let perms = fields.next()?.as_bytes();
    if perms.get(1) != Some(&b'w') || perms.get(3) != Some(&b's') {
        return None;
    }
    let _offset = fields.next()?;
    let (major, minor) = fields.next()?.split_once(':')?;
    let inode: u64 = fields.next()?.parse().ok()?;
    if inode == 0 {
        return None;
    }
    let dev = rustix::fs::makedev(
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    Some((dev, inode))
}

/// The entries of `snapshot` below directory `dir` (not `dir` itself), in order.
fn entries_below<'s>(
    snapshot: &'s Snapshot,
    dir: &str,
) -> impl Iterator<Item = (&'s String, &'s Entry)> {
    let prefix = format!("{dir}/");
    snapshot
        .range::<str, _>((
            std::ops::Bound::Included(prefix.as_str()),
            std::ops::Bound::Unbounded,
        ))
        .take_while(move |(p, _)| p.starts_with(prefix.as_str()))
}

/// Opens directory `rel` below `root` without following any symlink on the way (nor leaving
/// `root`).
fn open_beneath(root: &OwnedFd, rel: &str) -> rustix::io::Result<OwnedFd> {
    use rustix::fs::ResolveFlags;
    rustix::fs::openat2(
        root,
        rel,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
}

/// The first `max` bytes of regular file `rel` below directory `root`, and whether every
/// user could read it there (the file readable by others, and every directory between `root`
/// and it searchable by others: a file in a private `mkdtemp` directory is not), opened
/// without following any symlink on the way (nor leaving `root`) and without waiting (a FIFO
/// put in its place is not a regular file and is not read).
pub(crate) fn read_file_beneath(root: &Path, rel: &str, max: usize) -> Option<(Vec<u8>, bool)> {
    use rustix::fs::ResolveFlags;
    use std::io::Read;
    let dir = open_dir(root).ok()?;
    let fd = rustix::fs::openat2(
        &dir,
        rel,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(max as u64)
        .read_to_end(&mut bytes)
        .ok()?;
    let parents_open = rel
        .match_indices('/')
        .map(|(i, _)| &rel[..i])
        .all(|parent| {
            rustix::fs::statat(&dir, parent, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|p| p.st_mode & 0o001 != 0)
        });
    Some((bytes, st.st_mode & 0o004 != 0 && parents_open))
}

/// Opens a directory for walking. The last component is never followed: a server that
/// replaced a watched directory by a symlink (to a home directory, say) gets an error here,
/// never a walk of what the link points at. The components before it are the harness's own
/// (the scratch root, `/proc/PID/root`, an overlay's layers).
fn open_dir(path: &Path) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        rustix::fs::CWD,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// The inode number (its integer type differs between architectures).
#[allow(clippy::unnecessary_cast)]
fn inode(st: &rustix::fs::Stat) -> u64 {
    st.st_ino as u64
}

/// A path component for display: UTF-8 as is, other bytes as `\xNN`.
fn display_name(name: &[u8]) -> String {
    match std::str::from_utf8(name) {
        Ok(s) => s.to_string(),
        Err(_) => name
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    (b as char).to_string()
                } else {
                    format!("\\x{b:02x}")
                }
            })
            .collect(),
    }
}

fn hex(sha: &Option<[u8; 32]>) -> Option<String> {
    sha.map(|s| s.iter().map(|b| format!("{b:02x}")).collect())
}

fn effect(
    path: &str,
    kind: FileEffectKind,
    before: Option<&Entry>,
    after: Option<&Entry>,
) -> FileEffect {
    let object = after.or(before).map(|e| e.kind).unwrap_or(ObjectKind::File);
    // The version before may not have been read (unchanged files are not hashed).
    let database = matches!(
        kind,
        FileEffectKind::Overwritten | FileEffectKind::Truncated
    ) && before.is_some_and(|e| e.database || e.sha.is_none())
        && after.is_some_and(|e| e.database);
    let file_size = |e: Option<&Entry>| e.filter(|e| e.kind == ObjectKind::File).map(|e| e.size);
    FileEffect {
        path: path.to_string(),
        kind,
        object,
        size_before: file_size(before),
        size_after: file_size(after),
        sha256_before: before.and_then(|e| hex(&e.sha)),
        sha256_after: after.and_then(|e| hex(&e.sha)),
        mechanism: Mechanism::Snapshot,
        database,
    }
}

/// Whether `new` holds everything `old` held, as JSON (one document) or JSON Lines: every
/// old line matched, in order, by a new line that contains it (see [`json_contains`]).
fn json_extends(old: &[u8], new: &[u8]) -> bool {
    fn values(b: &[u8]) -> Option<Vec<serde_json::Value>> {
        let text = std::str::from_utf8(b).ok()?;
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
            return Some(vec![v]);
        }
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).ok())
            .collect()
    }
    let (Some(old), Some(new)) = (values(old), values(new)) else {
        return false;
    };
    if old.is_empty() {
        return false;
    }
    let mut rest = new.iter();
    old.iter().all(|o| rest.any(|n| json_contains(n, o)))
}

/// Whether `big` contains `small`: equal scalars; objects with every member of `small`
/// (recursively contained); arrays with `small`'s elements as an ordered subsequence.
fn json_contains(big: &serde_json::Value, small: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (big, small) {
        (Value::Object(b), Value::Object(s)) => s
            .iter()
            .all(|(k, v)| b.get(k).is_some_and(|bv| json_contains(bv, v))),
        (Value::Array(b), Value::Array(s)) => {
            let mut rest = b.iter();
            s.iter().all(|v| rest.any(|bv| json_contains(bv, v)))
        }
        (b, s) => b == s,
    }
}

/// The first bytes of files that are rewritten whether entries are added or removed: SQLite
/// databases, git's index, and zip packages (Office documents: .xlsx, .docx, .pptx; .odt,
/// .epub, .jar), whose every change rewrites the archive.
const DATABASE_MAGICS: &[&[u8]] = &[b"SQLite format 3\0", b"DIRC", b"PK\x03\x04"];

/// Classifies a change of content of a regular file.
fn content_change(old: &Entry, new: &Entry) -> Option<FileEffectKind> {
    let same_content = old.sha.is_some() && old.sha == new.sha
        || old.norm_sha.is_some() && old.norm_sha == new.norm_sha;
    if same_content || (old.sha.is_none() && old.size == new.size && old.mtime == new.mtime) {
        if old.mode != new.mode {
            return Some(FileEffectKind::ModeChanged {
                from: format!("{:o}", old.mode),
                to: format!("{:o}", new.mode),
            });
        }
        if old.mtime != new.mtime || old.ino != new.ino {
            return Some(FileEffectKind::Rewritten);
        }
        return None;
    }
    if new.size > old.size {
        if let (Some(o), Some(n)) = (&old.content, &new.content) {
            if n.starts_with(o) {
                return Some(FileEffectKind::Appended);
            }
        }
        if let (Some((len, prefix)), Some(old_sha)) = (&new.prefix_sha, &old.sha) {
            if *len == old.size && prefix == old_sha {
                return Some(FileEffectKind::Appended);
            }
        }
        if old.size == 0 {
            return Some(FileEffectKind::Appended);
        }
        if let (Some(o), Some(n)) = (&old.content, &new.content) {
            if json_extends(o, n) {
                return Some(FileEffectKind::Extended);
            }
        }
        return Some(FileEffectKind::Overwritten);
    }
    if new.size < old.size {
        if new.size == 0 {
            return Some(FileEffectKind::Truncated);
        }
        if let (Some(o), Some(n)) = (&old.content, &new.content) {
            if o.starts_with(n) {
                return Some(FileEffectKind::Truncated);
            }
        }
    }
    Some(FileEffectKind::Overwritten)
}

fn diff(old: &Snapshot, new: &Snapshot) -> Vec<FileEffect> {
    let mut effects: Vec<FileEffect> = Vec::new();
    let mut deleted: BTreeMap<&str, &Entry> = old
        .iter()
        .filter(|(p, _)| !new.contains_key(*p))
        .map(|(p, e)| (p.as_str(), e))
        .collect();
    let by_inode: HashMap<(u64, u64), &str> =
        deleted.iter().map(|(p, e)| ((e.dev, e.ino), *p)).collect();
    // Overlays copy a file up before renaming it, so the moved file has a new inode: one
    // deleted file with exactly the same (non-empty) content is its source.
    let mut by_content: HashMap<[u8; 32], Vec<&str>> = HashMap::new();
    for (p, e) in &deleted {
        if let (ObjectKind::File, Some(sha), true) = (e.kind, e.sha, e.size > 0) {
            by_content.entry(sha).or_default().push(p);
        }
    }
    let rename_source = |e: &Entry| -> Option<&str> {
        if let Some(from) = by_inode.get(&(e.dev, e.ino)) {
            let src = old.get(*from)?;
            // Inode numbers are reused quickly: a rename also keeps the kind and the content.
            return (src.kind == e.kind && (e.kind != ObjectKind::File || src.sha == e.sha))
                .then_some(*from);
        }
        match by_content.get(&e.sha?).map(Vec::as_slice) {
            Some([only]) if e.kind == ObjectKind::File => Some(*only),
            _ => None,
        }
    };
    let mut renamed_dirs: Vec<(String, String)> = Vec::new();
    let mut consumed: Vec<&str> = Vec::new();

    for (path, e) in new {
        match old.get(path) {
            None => {
                if let Some(from) = rename_source(e) {
                    consumed.push(from);
                    if e.kind == ObjectKind::Dir {
                        renamed_dirs.push((from.to_string(), path.clone()));
                    }
                    effects.push(effect(
                        path,
                        FileEffectKind::Renamed {
                            from: from.to_string(),
                            over_existing: false,
                        },
                        old.get(from),
                        Some(e),
                    ));
                } else {
                    effects.push(effect(path, FileEffectKind::Created, None, Some(e)));
                }
            }
            Some(o) => {
                if o.kind != e.kind {
                    effects.push(effect(path, FileEffectKind::Replaced, Some(o), Some(e)));
                    continue;
                }
                if (o.dev, o.ino) != (e.dev, e.ino) {
                    if let Some(from) = rename_source(e) {
                        consumed.push(from);
                        effects.push(effect(
                            path,
                            FileEffectKind::Renamed {
                                from: from.to_string(),
                                over_existing: true,
                            },
                            Some(o),
                            Some(e),
                        ));
                        continue;
                    }
                }
                let kind = match e.kind {
                    ObjectKind::File => content_change(o, e),
                    ObjectKind::Symlink if o.link != e.link => Some(FileEffectKind::Retargeted),
                    _ if o.mode != e.mode => Some(FileEffectKind::ModeChanged {
                        from: format!("{:o}", o.mode),
                        to: format!("{:o}", e.mode),
                    }),
                    _ => None,
                };
                if let Some(kind) = kind {
                    effects.push(effect(path, kind, Some(o), Some(e)));
                }
            }
        }
    }
    for from in consumed {
        deleted.remove(from);
    }
    // A deleted directory stands for everything that was under it.
    let deleted_dirs: Vec<String> = deleted
        .iter()
        .filter(|(_, e)| e.kind == ObjectKind::Dir)
        .map(|(p, _)| format!("{p}/"))
        .collect();
    for (path, e) in &deleted {
        if deleted_dirs.iter().any(|d| path.starts_with(d.as_str())) {
            continue;
        }
        effects.push(effect(path, FileEffectKind::Deleted, Some(e), None));
    }
    // Children of a renamed directory moved with it.
    effects.retain(|f| match &f.kind {
        FileEffectKind::Renamed { from, .. } => !renamed_dirs.iter().any(|(old_dir, new_dir)| {
            from.starts_with(&format!("{old_dir}/")) && f.path.starts_with(&format!("{new_dir}/"))
        }),
        _ => true,
    });
    effects.sort_by(|a, b| a.path.cmp(&b.path));
    effects
}

#[cfg(test)]
mod tests {

    #[test]
    fn json_growth_that_keeps_everything_is_an_extension() {
        let ok = |a: &str, b: &str| json_extends(a.as_bytes(), b.as_bytes());
        // JSON Lines: an observation added inside an existing line, a new line at the end.
        assert!(ok(
            "{\"name\":\"a\",\"obs\":[\"x\"]}\n{\"from\":\"a\"}\n",
            "{\"name\":\"a\",\"obs\":[\"x\",\"y\"]}\n{\"from\":\"a\"}\n{\"from\":\"b\"}\n"
        ));
        // One document: a member added.
        assert!(ok("{\"a\":1}", "{\"a\":1,\"b\":[2]}"));
        // A value changed, an element removed, a line dropped: not additive.
        assert!(!ok("{\"a\":1}", "{\"a\":2,\"b\":3}"));
        assert!(!ok("[1,2]", "[2,3,4]"));
        assert!(!ok(
            "{\"n\":1}\n{\"n\":2}\n",
            "{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n"
        ));
        // Not JSON at all.
        assert!(!ok("hello", "hello world, longer"));
    }
    use super::*;
    use std::fs;

    fn observer(dir: &std::path::Path) -> FsSnapshotObserver {
        FsSnapshotObserver::new(
            vec![SnapshotRoot::new("$W", dir.to_path_buf())],
            SnapshotLimits::default(),
        )
    }

    fn kinds(o: &mut FsSnapshotObserver) -> Vec<(String, FileEffectKind)> {
        o.checkpoint()
            .expect("checkpoint")
            .into_iter()
            .filter_map(|o| o.as_file().map(|f| (f.path.clone(), f.kind.clone())))
            .collect()
    }

    #[test]
    fn classifies_every_kind_of_change() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = t.path();
        fs::write(d.join("append.txt"), "one\n").expect("w");
        fs::write(d.join("over.txt"), "hello world").expect("w");
        fs::write(d.join("trunc.txt"), "0123456789").expect("w");
        fs::write(d.join("empty.txt"), "abc").expect("w");
        fs::write(d.join("gone.txt"), "x").expect("w");
        fs::write(d.join("move.txt"), "moving").expect("w");
        fs::write(d.join("src.txt"), "new content").expect("w");
        fs::write(d.join("dst.txt"), "old content").expect("w");
        fs::create_dir_all(d.join("olddir/sub")).expect("mkdir");
        fs::write(d.join("olddir/sub/f"), "f").expect("w");
        fs::create_dir_all(d.join("rmdir/a")).expect("mkdir");
        fs::write(d.join("rmdir/a/f"), "f").expect("w");
        let mut o = observer(d);

        fs::write(d.join("append.txt"), "one\ntwo\n").expect("w");
        fs::write(d.join("over.txt"), "HELLO").expect("w");
        fs::write(d.join("trunc.txt"), "01234").expect("w");
        fs::write(d.join("empty.txt"), "").expect("w");
        fs::remove_file(d.join("gone.txt")).expect("rm");
        fs::rename(d.join("move.txt"), d.join("moved.txt")).expect("mv");
        fs::rename(d.join("src.txt"), d.join("dst.txt")).expect("mv");
        fs::rename(d.join("olddir"), d.join("newdir")).expect("mv");
        fs::remove_dir_all(d.join("rmdir")).expect("rm -r");
        fs::write(d.join("new.txt"), "n").expect("w");
        let got = kinds(&mut o);
        let expect = vec![
            ("$W/append.txt".to_string(), FileEffectKind::Appended),
            (
                "$W/dst.txt".into(),
                FileEffectKind::Renamed {
                    from: "$W/src.txt".into(),
                    over_existing: true,
                },
            ),
            ("$W/empty.txt".into(), FileEffectKind::Truncated),
            ("$W/gone.txt".into(), FileEffectKind::Deleted),
            (
                "$W/moved.txt".into(),
                FileEffectKind::Renamed {
                    from: "$W/move.txt".into(),
                    over_existing: false,
                },
            ),
            ("$W/new.txt".into(), FileEffectKind::Created),
            (
                "$W/newdir".into(),
                FileEffectKind::Renamed {
                    from: "$W/olddir".into(),
                    over_existing: false,
                },
            ),
            ("$W/over.txt".into(), FileEffectKind::Overwritten),
            ("$W/rmdir".into(), FileEffectKind::Deleted),
            ("$W/trunc.txt".into(), FileEffectKind::Truncated),
        ];
        assert_eq!(got, expect);
        assert!(
            kinds(&mut o).is_empty(),
            "a second checkpoint without changes is empty"
        );
    }

    #[test]
    fn shared_writable_mappings_are_read_from_proc_maps() {
        let line = "7f1c2a000000-7f1c2a001000 rw-s 00000000 fd:01 1234567    /tmp/x/mapped.bin";
        assert_eq!(
            shared_writable_file(line),
            Some((rustix::fs::makedev(0xfd, 1), 1234567))
        );
        for other in [
            "7f1c2a000000-7f1c2a001000 r--s 00000000 fd:01 1234567    /tmp/x/ro.bin",
            "7f1c2a000000-7f1c2a001000 rw-p 00000000 fd:01 1234567    /tmp/x/private.bin",
            "7f1c2a000000-7f1c2a001000 rw-s 00000000 00:01 0          /dev/zero (deleted)",
        ] {
            assert_eq!(shared_writable_file(other), None, "{other}");
        }
    }

    #[test]
    fn a_watched_root_replaced_by_a_symlink_is_not_walked() {
        let t = tempfile::tempdir().expect("tempdir");
        let secrets = tempfile::tempdir().expect("tempdir");
        std::fs::write(secrets.path().join("id_ed25519"), "secret").expect("key");
        let root = t.path().join("tmp");
        std::fs::create_dir(&root).expect("mkdir");
        let mut o = observer(&root);
        assert!(kinds(&mut o).is_empty());
        std::fs::remove_dir(&root).expect("rmdir");
        std::os::unix::fs::symlink(secrets.path(), &root).expect("symlink");
        let seen = kinds(&mut o);
        assert!(
            seen.iter().all(|(p, _)| !p.contains("id_ed25519")),
            "walked through the symlink: {seen:?}"
        );
    }

    #[test]
    fn symlinks_are_recorded_not_followed() {
        let t = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        fs::write(outside.path().join("secret"), "s").expect("w");
        let mut o = observer(t.path());
        std::os::unix::fs::symlink(outside.path(), t.path().join("escape")).expect("symlink");
        let got = kinds(&mut o);
        assert_eq!(
            got,
            vec![("$W/escape".to_string(), FileEffectKind::Created)]
        );
        fs::write(outside.path().join("secret"), "changed").expect("w");
        assert!(
            kinds(&mut o).is_empty(),
            "nothing under the link target is watched"
        );
    }

    #[test]
    fn fifos_do_not_block_the_walk_and_modes_are_seen() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().expect("tempdir");
        fs::write(t.path().join("f"), "x").expect("w");
        let mut o = observer(t.path());
        rustix::fs::mknodat(
            rustix::fs::CWD,
            t.path().join("pipe"),
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .expect("mkfifo");
        fs::set_permissions(t.path().join("f"), fs::Permissions::from_mode(0o600)).expect("chmod");
        let got = kinds(&mut o);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(matches!(got[0].1, FileEffectKind::ModeChanged { .. }));
        assert_eq!(got[1], ("$W/pipe".to_string(), FileEffectKind::Created));
    }

    #[test]
    fn entry_limit_is_reported() {
        let t = tempfile::tempdir().expect("tempdir");
        for i in 0..20 {
            fs::write(t.path().join(format!("f{i}")), "x").expect("w");
        }
        let mut o = FsSnapshotObserver::new(
            vec![SnapshotRoot::new("$W", t.path().to_path_buf())],
            SnapshotLimits {
                max_entries: 5,
                ..Default::default()
            },
        );
        assert!(
            o.take_notes()
                .iter()
                .any(|n| n.contains("stopped at 5 entries"))
        );
    }

    /// A server start whose shared mappings `maps` counts, confined by Landlock or not.
    fn started(
        maps: &crate::sandbox::notify::AttemptQueue,
        writes_confined: bool,
    ) -> super::super::ServerStart {
        super::super::ServerStart {
            sandbox_root: None,
            attempts: Some(maps.clone()),
            network: None,
            server_pid: None,
            writes_confined,
        }
    }

    /// An observer that follows change notifications as it does for a sandboxed server
    /// (writes confined, shared mappings reported to `maps`), after its first full walk.
    fn following(
        dir: &std::path::Path,
    ) -> (
        FsSnapshotObserver,
        super::super::inotify::InotifyObserver,
        crate::sandbox::notify::AttemptQueue,
    ) {
        let roots = vec![SnapshotRoot::new("$W", dir.to_path_buf())];
        let notes = super::super::inotify::InotifyObserver::new(&roots);
        let mut o = FsSnapshotObserver::new(roots, SnapshotLimits::default());
        o.follow(notes.feed());
        let maps = crate::sandbox::notify::AttemptQueue::default();
        o.server_started(&started(&maps, true));
        assert!(kinds(&mut o).is_empty());
        (o, notes, maps)
    }

    #[test]
    fn reading_what_notifications_name_sees_what_a_full_walk_sees() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let t = tempfile::tempdir().expect("tempdir");
        let d = t.path();
        fs::create_dir_all(d.join("tree/deep/er")).expect("mkdir");
        fs::write(d.join("tree/deep/er/leaf.txt"), "leaf").expect("w");
        fs::create_dir(d.join("moving")).expect("mkdir");
        fs::write(d.join("moving/inside.txt"), "inside").expect("w");
        fs::write(d.join("log.txt"), "one\n").expect("w");
        fs::write(d.join("config.json"), "{\"a\":1}").expect("w");
        fs::write(d.join("linked.txt"), "first").expect("w");
        fs::create_dir(d.join("sub")).expect("mkdir");
        let mut whole = observer(d);
        let (mut partial, _notes, _maps) = following(d);
        type Step = Box<dyn Fn(&std::path::Path)>;
        let steps: Vec<(&str, Step)> = vec![
            ("nothing", Box::new(|_| {})),
            (
                "append, overwrite, create",
                Box::new(|d| {
                    fs::write(d.join("log.txt"), "one\ntwo\n").expect("w");
                    fs::write(d.join("config.json"), "{\"a\":2}").expect("w");
                    fs::write(d.join("sub/new.txt"), "new").expect("w");
                }),
            ),
            (
                "a directory made and filled within one window",
                Box::new(|d| {
                    fs::create_dir_all(d.join("fresh/a/b")).expect("mkdir");
                    fs::write(d.join("fresh/a/b/c.txt"), "c").expect("w");
                }),
            ),
            (
                "written inside the directory made earlier",
                Box::new(|d| fs::write(d.join("fresh/a/b/c.txt"), "cc").expect("w")),
            ),
            (
                "a directory renamed, then written in",
                Box::new(|d| {
                    fs::rename(d.join("moving"), d.join("moved")).expect("mv");
                    fs::write(d.join("moved/inside.txt"), "changed").expect("w");
                }),
            ),
            (
                "written in the renamed directory later",
                Box::new(|d| fs::write(d.join("moved/inside.txt"), "again").expect("w")),
            ),
            (
                "a tree removed",
                Box::new(|d| fs::remove_dir_all(d.join("tree")).expect("rm")),
            ),
            (
                "a hard link made, then the file written through it",
                Box::new(|d| {
                    fs::hard_link(d.join("linked.txt"), d.join("sub/alias.txt")).expect("ln");
                }),
            ),
            (
                "written through the other name",
                Box::new(|d| fs::write(d.join("sub/alias.txt"), "second!").expect("w")),
            ),
            (
                "mode changed, directory replaced by a symlink",
                Box::new(|d| {
                    fs::set_permissions(d.join("log.txt"), fs::Permissions::from_mode(0o600))
                        .expect("chmod");
                    fs::remove_dir_all(d.join("fresh")).expect("rm");
                    symlink("/etc", d.join("fresh")).expect("ln -s");
                }),
            ),
            (
                "a file renamed over another",
                Box::new(|d| fs::rename(d.join("sub/new.txt"), d.join("config.json")).expect("mv")),
            ),
        ];
        for (what, step) in steps {
            step(d);
            assert_eq!(kinds(&mut partial), kinds(&mut whole), "{what}");
        }
        assert_eq!(partial.whole_walks, 1, "after the server start");
        assert_eq!(partial.partial_reads, 11);
        // The last state is the same as a full walk's.
        let walked = partial.take();
        assert_eq!(
            partial.last.keys().collect::<Vec<_>>(),
            walked.keys().collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_shared_mapping_or_lost_events_mean_full_walks() {
        let t = tempfile::tempdir().expect("tempdir");
        let d = t.path();
        fs::write(d.join("mapped.bin"), [0u8; 16]).expect("w");
        let (mut o, notes, maps) = following(d);
        fs::write(d.join("a.txt"), "a").expect("w");
        assert_eq!(kinds(&mut o).len(), 1);
        assert_eq!((o.whole_walks, o.partial_reads), (1, 1));
        // Once the server mapped a file shared, a write through it fires nothing: walk.
        maps.lock().expect("lock").shared_file_maps = 1;
        fs::write(d.join("b.txt"), "b").expect("w");
        assert_eq!(kinds(&mut o).len(), 1);
        assert_eq!((o.whole_walks, o.partial_reads), (2, 1));
        maps.lock().expect("lock").shared_file_maps = 0;
        // Lost events (an overflowed queue) and the run's last checkpoint walk too.
        notes.feed().lock().expect("lock").overflowed = true;
        assert!(kinds(&mut o).is_empty());
        assert_eq!((o.whole_walks, o.partial_reads), (3, 1));
        o.walk_whole_next();
        assert!(kinds(&mut o).is_empty());
        assert_eq!((o.whole_walks, o.partial_reads), (4, 1));
        // A server outside Landlock may write anywhere the watches do not reach.
        o.server_started(&started(&maps, false));
        fs::write(d.join("c.txt"), "c").expect("w");
        assert_eq!(kinds(&mut o).len(), 1);
        fs::write(d.join("d.txt"), "d").expect("w");
        assert_eq!(kinds(&mut o).len(), 1);
        assert_eq!((o.whole_walks, o.partial_reads), (6, 1));
    }

    #[test]
    fn a_written_file_is_read_beneath_its_root_and_never_through_a_link_or_a_fifo() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path();
        std::fs::write(dir.join("plain"), b"0123456789").expect("write");
        std::os::unix::fs::symlink("/etc/passwd", dir.join("link")).expect("symlink");
        std::fs::create_dir(dir.join("sub")).expect("mkdir");
        std::os::unix::fs::symlink(dir, dir.join("sub/up")).expect("symlink");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join("fifo"),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .expect("mkfifo");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("plain"), std::fs::Permissions::from_mode(0o644))
            .expect("chmod");
        let (bytes, open) = read_file_beneath(dir, "plain", 4).expect("plain");
        assert_eq!((bytes.as_slice(), open), (&b"0123"[..], true));
        // In a directory only its owner can search: nobody else reads it.
        std::fs::create_dir(dir.join("private")).expect("mkdir");
        std::fs::write(dir.join("private/f"), b"x").expect("write");
        std::fs::set_permissions(
            dir.join("private/f"),
            std::fs::Permissions::from_mode(0o644),
        )
        .expect("chmod");
        std::fs::set_permissions(dir.join("private"), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        assert_eq!(
            read_file_beneath(dir, "private/f", 4).map(|r| r.1),
            Some(false)
        );
        for rel in ["link", "sub/up/plain", "fifo", "../plain", "missing"] {
            assert!(read_file_beneath(dir, rel, 4).is_none(), "{rel}");
        }
    }
}
