//! The scratch directories of a run: one temporary directory holding the server's workspace
//! (its working directory), HOME and TMPDIR, seeded from the user's workspace, and removed
//! at the end even when the server made parts of it unwritable.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::LaunchError;

/// Most entries copied from a seed directory.
const MAX_SEED_ENTRIES: usize = 100_000;

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
}

impl Scratch {
    /// Creates the directories under the system temporary directory.
    pub fn create() -> Result<Scratch, LaunchError> {
        let root = tempfile::Builder::new()
            .prefix("hintcheck-")
            .tempdir()
            .map_err(|source| LaunchError::Scratch { source })?;
        let base = root.path().to_path_buf();
        let make = |name: &str| -> Result<PathBuf, LaunchError> {
            let p = base.join(name);
            fs::create_dir(&p).map_err(|source| LaunchError::Scratch { source })?;
            Ok(p)
        };
        Ok(Scratch {
            workspace: make("workspace")?,
            home: make("home")?,
            tmp: make("tmp")?,
            root: Some(root),
            seeded: Vec::new(),
        })
    }

    /// The directory holding the three scratch directories.
    pub fn root(&self) -> Option<&Path> {
        self.root.as_ref().map(|r| r.path())
    }

    /// Copies `seed` into the workspace. Symlinks are copied as symlinks, never followed.
    pub fn seed_from(&mut self, seed: &Path) -> Result<(), LaunchError> {
        let meta = fs::metadata(seed).map_err(|source| LaunchError::Seed {
            path: seed.to_path_buf(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(LaunchError::Seed {
                path: seed.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        let mut seeded = Vec::new();
        copy_tree(seed, &self.workspace, Path::new(""), &mut seeded).map_err(|source| {
            LaunchError::Seed {
                path: seed.to_path_buf(),
                source,
            }
        })?;
        seeded.sort();
        self.seeded = seeded;
        Ok(())
    }

    /// Prepares the scratch root for the sandbox: a `.sandbox` directory for its own files,
    /// and, when the server runs as another uid (root mode), the three directories handed
    /// over to that uid and the root made traversable.
    pub fn prepare_sandbox(&self, run_as: Option<(u32, u32)>) -> std::io::Result<()> {
        let Some(root) = self.root() else {
            return Ok(());
        };
        fs::create_dir_all(root.join(".sandbox"))?;
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

fn copy_tree(src: &Path, dst: &Path, rel: &Path, seeded: &mut Vec<String>) -> std::io::Result<()> {
    for entry in fs::read_dir(src)? {
        let entry = entry?;
        if seeded.len() >= MAX_SEED_ENTRIES {
            return Err(std::io::Error::other(format!(
                "more than {MAX_SEED_ENTRIES} entries"
            )));
        }
        let name = entry.file_name();
        let from = entry.path();
        let to = dst.join(&name);
        let rel = rel.join(&name);
        let ft = entry.file_type()?;
        if ft.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&from)?, &to)?;
        } else if ft.is_dir() {
            fs::create_dir(&to)?;
            copy_tree(&from, &to, &rel, seeded)?;
            fs::set_permissions(&to, fs::metadata(&from)?.permissions())?;
        } else if ft.is_file() {
            fs::copy(&from, &to)?;
        } else {
            continue;
        }
        seeded.push(rel.to_string_lossy().into_owned());
    }
    Ok(())
}

fn chown_tree(path: &Path, uid: u32, gid: u32, depth: usize) -> std::io::Result<()> {
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
    fn seeds_copy_links_as_links_and_removal_survives_locked_dirs() {
        let seed = tempfile::tempdir().expect("tempdir");
        fs::create_dir(seed.path().join("sub")).expect("mkdir");
        fs::write(seed.path().join("sub/a.txt"), "a").expect("w");
        std::os::unix::fs::symlink("/etc/passwd", seed.path().join("link")).expect("symlink");
        let mut s = Scratch::create().expect("scratch");
        s.seed_from(seed.path()).expect("seed");
        assert_eq!(s.seeded, ["link", "sub", "sub/a.txt"]);
        assert!(
            fs::symlink_metadata(s.workspace.join("link"))
                .expect("lstat")
                .file_type()
                .is_symlink()
        );
        let locked = s.workspace.join("locked");
        fs::create_dir(&locked).expect("mkdir");
        fs::write(locked.join("f"), "x").expect("w");
        fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).expect("chmod");
        let root = s.root().expect("root").to_path_buf();
        s.remove().expect("removed");
        assert!(!root.exists());
    }

    #[test]
    fn a_missing_seed_is_an_error_naming_it() {
        let mut s = Scratch::create().expect("scratch");
        let err = s
            .seed_from(Path::new("/nonexistent/seed"))
            .expect_err("missing");
        assert!(err.to_string().contains("/nonexistent/seed"), "{err}");
    }
}
