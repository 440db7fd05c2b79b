//! The scratch directories of a run: one temporary directory holding the server's workspace
//! (its working directory), HOME and TMPDIR (seeded by `crate::workspace`), prepared for the
//! sandbox's uid, and removed at the end even when the server made parts of it unwritable.

use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::LaunchError;

/// The directory of the scratch root that holds the sandbox's own files (its resolv.conf, the
/// overlays' layers). Its name, like the root's, says nothing of hintcheck: both show in the
/// sandbox's mount table.
pub const STATE_DIR: &str = ".state";

/// The layers of the `i`-th overlay (`upper`, `work`) under the scratch root.
pub fn overlay_dir(scratch_root: &Path, i: usize) -> PathBuf {
    scratch_root.join(STATE_DIR).join(format!("overlay-{i}"))
}

/// The git identity of the seed's commit and of the server's HOME (`~/.gitconfig`): an
/// ordinary developer's, so that commit tools can commit and nothing names hintcheck.
pub(crate) const GIT_NAME: &str = "Developer";
pub(crate) const GIT_EMAIL: &str = "developer@example.test";

/// The scratch directories of one run.
#[derive(Debug)]
pub struct Scratch {
    root: Option<tempfile::TempDir>,
    /// The server's working directory (`{workspace}`).
    pub workspace: PathBuf,
    /// The server's HOME.
    pub home: PathBuf,
    /// The server's TMPDIR.
    pub tmp: PathBuf,
    /// Paths copied in from the seed, relative to the workspace.
    pub seeded: Vec<String>,
    /// What could not be seeded, for the report.
    pub seed_notes: Vec<String>,
}

impl Scratch {
    /// Creates the directories under the system temporary directory.
    pub fn create() -> Result<Scratch, LaunchError> {
        let root = tempfile::Builder::new()
            // Named as mktemp names its directories: nothing in the server's paths may say
            // it is watched.
            .prefix("tmp.")
            .rand_bytes(10)
            .tempdir()
            .map_err(|source| LaunchError::Scratch { source })?;
        let base = root.path().to_path_buf();
        let make = |name: &str| -> Result<PathBuf, LaunchError> {
            let p = base.join(name);
            fs::create_dir(&p).map_err(|source| LaunchError::Scratch { source })?;
            Ok(p)
        };
        let home = make("home")?;
        // A git identity, as a developer's machine has one: commit tools can commit.
        fs::write(
            home.join(".gitconfig"),
            format!("[user]\n\tname = {GIT_NAME}\n\temail = {GIT_EMAIL}\n"),
        )
        .map_err(|source| LaunchError::Scratch { source })?;
        Ok(Scratch {
            workspace: make("workspace")?,
            home,
            tmp: make("tmp")?,
            root: Some(root),
            seeded: Vec::new(),
            seed_notes: Vec::new(),
        })
    }

    /// The directory holding the three scratch directories.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_ref().map(|r| r.path())
    }

    /// Prepares the scratch root for the sandbox: a [`STATE_DIR`] directory for its own files,
    /// and, when the server runs as another uid (root mode), the three directories handed
    /// over to that uid and the root made traversable.
    pub fn prepare_sandbox(
        &self,
        run_as: Option<(u32, u32)>,
        overlays: usize,
    ) -> std::io::Result<()> {
        let Some(root) = self.root() else {
            return Ok(());
        };
        fs::create_dir_all(root.join(STATE_DIR))?;
        for i in 0..overlays {
            fs::create_dir_all(overlay_dir(root, i).join("upper"))?;
            fs::create_dir_all(overlay_dir(root, i).join("work"))?;
        }
        if let Some((uid, gid)) = run_as {
            fs::set_permissions(root, fs::Permissions::from_mode(0o711))?;
            for dir in [&self.workspace, &self.home, &self.tmp] {
                chown_tree(dir, uid, gid, 0)?;
            }
        }
        Ok(())
    }

    /// Removes everything here and now (see [`remove_now`]). Returns an error message when
    /// something could not be removed.
    pub fn remove(&mut self) -> Result<(), String> {
        match self.root.take() {
            Some(root) => remove_now(root),
            None => Ok(()),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

impl Scratch {
    /// Removes the directories on a thread of their own, off the run's path (a run's scratch
    /// takes 10 to 25 ms to remove, each replay's too): [`wait_for_removals`] waits until
    /// every one handed over is gone. Without that thread, removes them here. What was
    /// seeded stays known.
    pub fn remove_off_path(&mut self) -> Result<(), String> {
        let Some(root) = self.root.take() else {
            return Ok(());
        };
        match removals().hand_over(root) {
            Ok(()) => Ok(()),
            Err(root) => remove_now(root),
        }
    }
}

/// Removes a scratch root; where something in it cannot be removed (a directory the server
/// made unwritable), makes every directory writable and tries again.
fn remove_now(root: tempfile::TempDir) -> Result<(), String> {
    let path = root.keep();
    if fs::remove_dir_all(&path).is_ok() {
        return Ok(());
    }
    restore_permissions(&path, 0);
    match fs::remove_dir_all(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(format!("could not remove {}: {e}", path.display()))
        }
        _ => Ok(()),
    }
}

/// Scratch directories handed over for removal and not yet removed, and what could not be.
#[derive(Default)]
struct Removals {
    state: std::sync::Mutex<RemovalState>,
    done: std::sync::Condvar,
}

#[derive(Default)]
struct RemovalState {
    /// The remover thread's queue, once it is started.
    queue: Option<std::sync::mpsc::Sender<tempfile::TempDir>>,
    /// Handed over and not yet removed.
    pending: usize,
    /// Why some could not be removed.
    failures: Vec<String>,
}

/// The process's removals.
fn removals() -> &'static Removals {
    static REMOVALS: std::sync::OnceLock<Removals> = std::sync::OnceLock::new();
    REMOVALS.get_or_init(Removals::default)
}

impl Removals {
    /// Queues `root` for the remover thread (started on first use); `Err` gives it back when
    /// the thread cannot be started.
    fn hand_over(&'static self, root: tempfile::TempDir) -> Result<(), tempfile::TempDir> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.queue.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<tempfile::TempDir>();
            let started = std::thread::Builder::new()
                .name("hintcheck-scratch-removal".into())
                .spawn(move || {
                    for root in rx {
                        let path = root.path().display().to_string();
                        let outcome =
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                remove_now(root)
                            }))
                            .unwrap_or_else(|_| {
                                Err(format!("could not remove {path}: its removal failed"))
                            });
                        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
                        state.pending -= 1;
                        state.failures.extend(outcome.err());
                        self.done.notify_all();
                    }
                });
            if started.is_err() {
                return Err(root);
            }
            state.queue = Some(tx);
        }
        let Some(queue) = state.queue.as_ref() else {
            return Err(root);
        };
        match queue.send(root) {
            Ok(()) => {
                state.pending += 1;
                Ok(())
            }
            Err(std::sync::mpsc::SendError(root)) => Err(root),
        }
    }
}

/// Waits until every scratch directory handed over by [`Scratch::remove_off_path`] is removed,
/// and says which could not be (the process must not end before: nothing may be left
/// behind).
pub fn wait_for_removals() -> Vec<String> {
    let r = removals();
    let mut state = r.state.lock().unwrap_or_else(|p| p.into_inner());
    while state.pending > 0 {
        state = r.done.wait(state).unwrap_or_else(|p| p.into_inner());
    }
    std::mem::take(&mut state.failures)
}

/// Removes the tree `name` inside the directory `parent`, relative to the descriptor (the
/// caller may be in another mount namespace than the one `parent` was opened in), making
/// locked directories writable first. Errors are ignored: this runs when nobody is left to
/// report them.
pub fn force_remove_at(parent: std::os::fd::BorrowedFd<'_>, name: &std::ffi::OsStr) {
    remove_at(parent, name, 0);
}

fn remove_at(parent: std::os::fd::BorrowedFd<'_>, name: &std::ffi::OsStr, depth: usize) {
    use rustix::fs::{AtFlags, Dir, FileType, Mode, OFlags};
    let is_dir = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)
        .map(|st| FileType::from_raw_mode(st.st_mode as _) == FileType::Directory)
        .unwrap_or(false);
    if !is_dir {
        let _ = rustix::fs::unlinkat(parent, name, AtFlags::empty());
        return;
    }
    if depth < 256 {
        if let Ok(fd) = rustix::fs::openat(
            parent,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            let _ = rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700));
            let mut names = Vec::new();
            if let Ok(mut dir) = Dir::read_from(&fd) {
                while let Some(Ok(e)) = dir.read() {
                    let n = e.file_name().to_bytes();
                    if n != b"." && n != b".." {
                        names.push(std::ffi::OsStr::from_bytes(n).to_os_string());
                    }
                }
            }
            for n in names {
                remove_at(std::os::fd::AsFd::as_fd(&fd), &n, depth + 1);
            }
        }
    }
    let _ = rustix::fs::unlinkat(parent, name, AtFlags::REMOVEDIR);
}

pub(crate) fn chown_tree(path: &Path, uid: u32, gid: u32, depth: usize) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    if depth < 256 && fs::symlink_metadata(path)?.is_dir() {
        for e in fs::read_dir(path)? {
            chown_tree(&e?.path(), uid, gid, depth + 1)?;
        }
    }
    Ok(())
}

fn restore_permissions(dir: &Path, depth: usize) {
    if depth > 256 {
        return;
    }
    let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                restore_permissions(&e.path(), depth + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_removed_off_the_path_is_gone_once_waited_for() {
        let mut scratches: Vec<Scratch> = (0..3)
            .map(|_| Scratch::create().expect("scratch"))
            .collect();
        let roots: Vec<PathBuf> = scratches
            .iter()
            .map(|s| s.root().expect("root").to_path_buf())
            .collect();
        // A directory the server made unwritable, with a file in it.
        let locked = scratches[0].workspace.join("locked");
        fs::create_dir(&locked).expect("mkdir");
        fs::write(locked.join("f"), "x").expect("write");
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o500)).expect("chmod");
        scratches[1].seeded = vec!["notes.md".into()];
        for s in &mut scratches {
            s.remove_off_path().expect("handed over");
            // Handed over once: a second call and the drop do nothing.
            s.remove_off_path().expect("nothing left to hand over");
        }
        assert_eq!(
            scratches[1].seeded,
            ["notes.md"],
            "what was seeded stays known"
        );
        drop(scratches);
        assert!(wait_for_removals().is_empty());
        for root in roots {
            assert!(!root.exists(), "{} left behind", root.display());
        }
    }

    #[test]
    fn removal_through_a_descriptor_handles_locked_directories() {
        let t = tempfile::tempdir().expect("tempdir");
        let tree = t.path().join("tree");
        fs::create_dir_all(tree.join("a/b")).expect("mkdir");
        fs::write(tree.join("a/b/f"), "x").expect("w");
        std::os::unix::fs::symlink("/etc", tree.join("link")).expect("symlink");
        fs::set_permissions(tree.join("a"), fs::Permissions::from_mode(0o000)).expect("chmod");
        let parent = fs::File::open(t.path()).expect("open");
        force_remove_at(
            std::os::fd::AsFd::as_fd(&parent),
            std::ffi::OsStr::new("tree"),
        );
        assert!(!tree.exists());
        assert!(Path::new("/etc").exists());
    }
}
