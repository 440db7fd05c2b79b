//! The change-notification observer: inotify watches on the scratch directories report every
//! create, write, delete, move and attribute change as it happens, so a write that left no
//! trace by the end of a window (a lock file created and removed, a file written back to what
//! it was) is still seen. The snapshot observer stays the source of the effects that last; this
//! one adds only what the snapshots cannot show, as `transient` effects. It needs no namespace:
//! without a mount namespace it is the only record of such writes (the weaker mode, named in
//! the report), and inside the sandbox it watches the same host directories.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::fs::{OverlayRoot, SandboxDir, SnapshotRoot};
use super::{ObserveError, Observer, ObserverStatus};
use crate::evidence::{FileEffect, FileEffectKind, Mechanism, ObjectKind, Observation};

/// Most directories watched (each costs a watch descriptor of the user's inotify budget).
const MAX_WATCHES: usize = 8_192;

/// What happened to one path during a window, from its events (every path with an event
/// changed: it was created, written, removed, moved or had its attributes changed).
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    created: bool,
    removed: bool,
    is_dir: bool,
}

/// The inotify watches over the observed directories, shared by the change-notification
/// observer (which reports what changed and changed back) and the snapshot observer (which
/// re-reads only the paths named here between its full walks).
pub type ChangeFeed = Arc<Mutex<Watcher>>;

/// What the snapshot observer learns from the watches since it last asked.
#[derive(Debug, Default)]
pub struct Changes {
    /// Every path (as displayed) whose entry may have changed: created, written, removed,
    /// moved, or its attributes changed.
    pub paths: BTreeSet<String>,
    /// Whether `paths` is all that changed: false after a queue overflow, or while some
    /// directory is not watched (the watch cap, a watch that failed).
    pub complete: bool,
}

/// The inotify instance and its watches.
pub struct Watcher {
    fd: Option<OwnedFd>,
    /// Watch descriptor → (display path, real path) of the directory.
    dirs: HashMap<i32, (String, PathBuf)>,
    /// Directories of the sandbox, watched through `/proc/PID/root` from each server start.
    sandbox_dirs: Vec<SandboxDir>,
    /// The watches on the current sandbox's directories.
    sandbox_watches: Vec<i32>,
    /// For the change-notification observer.
    seen: BTreeMap<String, Seen>,
    /// For the snapshot observer.
    changed: BTreeSet<String>,
    /// Events were lost since the snapshot observer last asked.
    pub(super) overflowed: bool,
    /// Directories that could not be watched (cap, errors): their changes are not reported.
    unwatched: usize,
    notes: Vec<String>,
    capped: bool,
}

impl Watcher {
    fn new() -> Self {
        let mut me = Self {
            fd: None,
            dirs: HashMap::new(),
            sandbox_dirs: Vec::new(),
            sandbox_watches: Vec::new(),
            seen: BTreeMap::new(),
            changed: BTreeSet::new(),
            overflowed: false,
            unwatched: 0,
            notes: Vec::new(),
            capped: false,
        };
        match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
            Ok(fd) => me.fd = Some(fd),
            Err(e) => me.notes.push(format!(
                "inotify is not available ({e}): transient writes unseen"
            )),
        }
        me
    }

    /// Every path that may have changed since the last call (events read first).
    pub fn take_changes(&mut self) -> Changes {
        self.drain();
        let paths = std::mem::take(&mut self.changed);
        // A name that is not UTF-8 is shown escaped by the walk: its events cannot name it.
        let complete = self.fd.is_some()
            && !self.overflowed
            && self.unwatched == 0
            && !paths
                .iter()
                .any(|p| p.contains(char::REPLACEMENT_CHARACTER));
        self.overflowed = false;
        Changes { paths, complete }
    }

    /// Watches `path` and every directory below it (but not the top-level names in `skip`);
    /// returns the watch descriptors added.
    fn watch_tree(&mut self, display: &str, path: &Path, skip: &[String]) -> Vec<i32> {
        let mut added = Vec::new();
        self.watch_tree_into(display, path, skip, &mut added);
        added
    }

    fn watch_tree_into(
        &mut self,
        display: &str,
        path: &Path,
        skip: &[String],
        added: &mut Vec<i32>,
    ) {
        let Some(fd) = &self.fd else { return };
        if self.dirs.len() >= MAX_WATCHES {
            self.unwatched += 1;
            if !self.capped {
                self.capped = true;
                self.notes.push(format!(
                    "more than {MAX_WATCHES} directories: change notification is incomplete, so every checkpoint walks the whole tree (slower), and writes that do not last in the unwatched directories are seen only as write attempts"
                ));
            }
            return;
        }
        let mask = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MODIFY
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::ATTRIB
            | WatchFlags::DONT_FOLLOW
            | WatchFlags::ONLYDIR
            | WatchFlags::EXCL_UNLINK;
        match inotify::add_watch(fd, path, mask) {
            Ok(wd) => {
                self.dirs
                    .insert(wd, (display.to_string(), path.to_path_buf()));
                added.push(wd);
            }
            // Gone before it could be watched: nothing in it can change.
            Err(rustix::io::Errno::NOENT) => return,
            Err(e) => {
                self.unwatched += 1;
                self.notes
                    .push(format!("cannot watch {display} for changes: {e}"));
                return;
            }
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        let mut subdirs: Vec<(String, PathBuf)> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .filter(|e| !skip.iter().any(|n| e.file_name() == n.as_str()))
            .map(|e| {
                (
                    format!("{display}/{}", e.file_name().to_string_lossy()),
                    e.path(),
                )
            })
            .collect();
        subdirs.sort();
        for (d, p) in subdirs {
            self.watch_tree_into(&d, &p, &[], added);
        }
    }

    /// Reads every pending event into `seen` and `changed`; directories created or moved in
    /// are watched from now on (whatever happened in them before is the snapshot's to see:
    /// their path is in `changed`).
    fn drain(&mut self) {
        let Some(fd) = self.fd.take() else { return };
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut new_dirs: Vec<(String, PathBuf)> = Vec::new();
        {
            let mut reader = inotify::Reader::new(&fd, &mut buf);
            while let Ok(event) = reader.next() {
                let flags = event.events();
                if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                    self.overflowed = true;
                    self.notes.push(
                        "the change-notification queue overflowed: some transient writes were not seen"
                            .into(),
                    );
                    continue;
                }
                let Some((dir_display, dir_path)) = self.dirs.get(&event.wd()) else {
                    continue;
                };
                let Some(name) = event.file_name() else {
                    // The watched directory itself (its attributes).
                    if flags.contains(ReadFlags::ATTRIB) {
                        self.changed.insert(dir_display.clone());
                    }
                    continue;
                };
                let name = name.to_string_lossy();
                let display = format!("{dir_display}/{name}");
                let s = self.seen.entry(display.clone()).or_default();
                s.is_dir |= flags.contains(ReadFlags::ISDIR);
                if flags.intersects(ReadFlags::CREATE | ReadFlags::MOVED_TO) {
                    s.created = true;
                    if flags.contains(ReadFlags::ISDIR) {
                        new_dirs.push((display.clone(), dir_path.join(name.as_ref())));
                    }
                } else if flags.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
                    s.removed = true;
                }
                self.changed.insert(display);
            }
        }
        self.fd = Some(fd);
        for (display, path) in new_dirs {
            let added = self.watch_tree(&display, &path, &[]);
            if self
                .sandbox_dirs
                .iter()
                .any(|d| Path::new(&display).starts_with(&d.inside))
            {
                self.sandbox_watches.extend(added);
            }
        }
    }

    /// Removes every watch (the kernel frees them after a grace period, in its own workers).
    fn remove_all(&mut self) {
        if let Some(fd) = &self.fd {
            for wd in self.dirs.keys() {
                let _ = inotify::remove_watch(fd, *wd);
            }
        }
        self.dirs.clear();
        self.sandbox_watches.clear();
    }

    /// Drops the previous sandbox's watches and watches the new one's directories.
    fn rewatch_sandbox(&mut self, root: Option<&Path>) {
        // The previous sandbox's directories are gone with it (or about to be).
        self.drain();
        if let Some(fd) = &self.fd {
            for wd in self.sandbox_watches.drain(..) {
                let _ = inotify::remove_watch(fd, wd);
                self.dirs.remove(&wd);
            }
        }
        let Some(root) = root else {
            return;
        };
        for r in self
            .sandbox_dirs
            .iter()
            .map(|d| d.under(root))
            .collect::<Vec<_>>()
        {
            let added = self.watch_tree(&r.label, &r.path, &r.exclude);
            self.sandbox_watches.extend(added);
        }
    }
}

/// The change-notification observer.
pub struct InotifyObserver {
    feed: ChangeFeed,
    labels: Vec<String>,
}

impl InotifyObserver {
    /// Watches every directory under `roots` (and those created later).
    pub fn new(roots: &[SnapshotRoot]) -> Self {
        let mut watcher = Watcher::new();
        for r in roots {
            watcher.watch_tree(&r.label, &r.path, &[]);
        }
        Self {
            feed: Arc::new(Mutex::new(watcher)),
            labels: roots.iter().map(|r| r.label.clone()).collect(),
        }
    }

    fn watcher(&self) -> std::sync::MutexGuard<'_, Watcher> {
        self.feed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The watches, for the snapshot observer.
    pub fn feed(&self) -> ChangeFeed {
        self.feed.clone()
    }

    /// Also watch directories of every sandbox the server runs in (its private `/tmp`, …).
    pub fn watch_sandbox_dirs(&mut self, dirs: Vec<SandboxDir>) {
        self.labels.extend(dirs.iter().map(SandboxDir::label));
        self.watcher().sandbox_dirs = dirs;
    }

    /// Also watch overlays through their upper layers, where every change to them lands.
    pub fn watch_overlay_uppers(&mut self, overlays: &[OverlayRoot]) {
        let mut w = self.feed.lock().unwrap_or_else(|p| p.into_inner());
        for o in overlays {
            self.labels.push(o.label.clone());
            w.watch_tree(&o.label, &o.upper, &[]);
        }
    }

    /// Whether the observer is watching.
    pub fn is_active(&self) -> bool {
        self.watcher().fd.is_some()
    }
}

impl Observer for InotifyObserver {
    fn server_started(&mut self, start: &super::ServerStart) {
        self.watcher()
            .rewatch_sandbox(start.sandbox_root.as_deref());
    }

    fn release(&mut self) {
        self.watcher().remove_all();
    }

    fn checkpoint(&mut self) -> Result<Vec<Observation>, ObserveError> {
        let seen = {
            let mut w = self.watcher();
            w.drain();
            std::mem::take(&mut w.seen)
        };
        // Every path that changed: the recorder keeps only those the snapshots did not
        // explain (see `keep_unexplained`).
        Ok(seen
            .into_iter()
            .map(|(path, s)| {
                Observation::File(FileEffect::bare(
                    path,
                    FileEffectKind::Transient {
                        created: s.created && s.removed,
                    },
                    if s.is_dir {
                        ObjectKind::Dir
                    } else {
                        ObjectKind::File
                    },
                    Mechanism::Notify,
                ))
            })
            .collect())
    }

    fn status(&self) -> ObserverStatus {
        ObserverStatus {
            name: "inotify".into(),
            covers: format!(
                "every create, write, delete, move and attribute change under {} as it happens: writes that left no lasting change by the end of a window",
                self.labels.join(", ")
            ),
            blind_spots: vec![
                "changes through memory mappings (no event)".into(),
                "directories beyond the watch cap".into(),
            ],
        }
    }

    fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.watcher().notes)
    }
}

/// Keeps the change notifications that no other record of the same batch explains: a path
/// with a lasting effect (or under a directory created, deleted or renamed in the batch) is the
/// snapshot's; what remains changed and changed back within the window.
pub fn keep_unexplained(observations: &mut Vec<Observation>) {
    let explained: std::collections::BTreeSet<String> = observations
        .iter()
        .filter_map(Observation::as_file)
        .filter(|f| f.mechanism != Mechanism::Notify)
        .flat_map(|f| {
            let mut paths = vec![f.path.clone()];
            if let FileEffectKind::Renamed { from, .. } = &f.kind {
                paths.push(from.clone());
            }
            paths
        })
        .collect();
    // The path itself or one of its ancestors (a lookup per level, not a scan per effect).
    let covered = |path: &str| {
        std::iter::successors(Some(path), |p| p.rsplit_once('/').map(|(parent, _)| parent))
            .any(|p| explained.contains(p))
    };
    observations.retain(|o| match o.as_file() {
        Some(f) if f.mechanism == Mechanism::Notify => !covered(&f.path),
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observer(dir: &Path) -> InotifyObserver {
        let o = InotifyObserver::new(&[SnapshotRoot::new("$W", dir.to_path_buf())]);
        assert!(o.is_active(), "{:?}", o.watcher().notes);
        o
    }

    fn seen(o: &mut InotifyObserver) -> Vec<String> {
        let mut batch = o.checkpoint().expect("checkpoint");
        keep_unexplained(&mut batch);
        batch.iter().map(Observation::describe).collect()
    }

    #[test]
    fn a_file_created_and_removed_within_a_window_is_seen() {
        let t = tempfile::tempdir().expect("tmp");
        std::fs::create_dir(t.path().join("sub")).expect("mkdir");
        let mut o = observer(t.path());
        assert!(seen(&mut o).is_empty());
        std::fs::write(t.path().join("sub/lock"), "pid").expect("write");
        std::fs::remove_file(t.path().join("sub/lock")).expect("rm");
        // A directory made during the window is watched from then on.
        std::fs::create_dir(t.path().join("new")).expect("mkdir");
        std::fs::remove_dir(t.path().join("new")).expect("rmdir");
        assert_eq!(
            seen(&mut o),
            [
                "created and removed directory $W/new",
                "created and removed $W/sub/lock"
            ]
        );
        std::fs::create_dir(t.path().join("later")).expect("mkdir");
        let _ = seen(&mut o);
        std::fs::write(t.path().join("later/x"), "1").expect("write");
        std::fs::remove_file(t.path().join("later/x")).expect("rm");
        assert_eq!(seen(&mut o), ["created and removed $W/later/x"]);
    }

    #[test]
    fn notifications_explained_by_a_lasting_effect_are_dropped() {
        let effect = |path: &str, kind: FileEffectKind, mechanism: Mechanism| {
            Observation::File(FileEffect::bare(path, kind, ObjectKind::File, mechanism))
        };
        let note = |path: &str| {
            effect(
                path,
                FileEffectKind::Transient { created: false },
                Mechanism::Notify,
            )
        };
        let mut batch = vec![
            effect("$W/kept.txt", FileEffectKind::Created, Mechanism::Snapshot),
            effect(
                "$W/dir",
                FileEffectKind::Renamed {
                    from: "$W/old".into(),
                    over_existing: false,
                },
                Mechanism::Snapshot,
            ),
            note("$W/kept.txt"),
            note("$W/old/inner.txt"),
            note("$W/dir/inner.txt"),
            note("$W/config.json"),
        ];
        keep_unexplained(&mut batch);
        let described: Vec<String> = batch.iter().map(Observation::describe).collect();
        assert_eq!(
            described,
            [
                "created $W/kept.txt",
                "$W/old renamed to $W/dir",
                "wrote to $W/config.json without a lasting change"
            ]
        );
    }
}
