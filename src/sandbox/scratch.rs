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

    /// Removes everything, first making every directory writable again. Returns an error
    /// message when something could not be removed.
    pub fn remove(&mut self) -> Result<(), String> {
        let Some(root) = self.root.take() else {
            return Ok(());
        };
        let path = root.path().to_path_buf();
        restore_permissions(&path, 0);
        match root.close() {
            Ok(()) => Ok(()),
            Err(e) => Err(format!("could not remove {}: {e}", path.display())),
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = self.remove();
    }
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
