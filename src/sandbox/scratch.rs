//! The scratch directories of a run: one temporary directory holding the server's workspace
//! (its working directory), HOME and TMPDIR, seeded from the user's workspace, and removed
//! at the end even when the server made parts of it unwritable.

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
const GIT_NAME: &str = "Developer";
const GIT_EMAIL: &str = "developer@example.test";

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

    /// Seeds the workspace with a few small files, for runs without a user seed: `files`
    /// (path, content: a developer's notes, a readme, a JSON document, made from the run's
    /// words so that edits find what synthesized arguments look for) and `draft`, left out of
    /// the commit. Tools that read, edit or list then have something to work on. The
    /// workspace is also made a git repository (branch `main`, one commit) when `git` is
    /// installed. Files are dated an hour back, so that a read-only `git status` has no racy
    /// index to refresh.
    pub fn seed_default(
        &mut self,
        files: &[(&str, String)],
        draft: &str,
    ) -> Result<(), LaunchError> {
        let mut seeded = Vec::new();
        for (rel, content) in files {
            let path = self.workspace.join(rel);
            let write = || -> std::io::Result<()> {
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)?;
                }
                let mut file = fs::File::create(&path)?;
                std::io::Write::write_all(&mut file, content.as_bytes())?;
                file.set_modified(
                    std::time::SystemTime::now() - std::time::Duration::from_secs(3600),
                )
            };
            write().map_err(|source| LaunchError::Seed {
                path: path.clone(),
                source,
            })?;
            seeded.push((*rel).to_string());
        }
        // Small valid files of the common document types (a spreadsheet, a Word document, a
        // PDF, a CSV table, a notebook, an image, source code), for tools that open them.
        for doc in super::documents::all() {
            let path = self.workspace.join(doc.path);
            let write = || -> std::io::Result<()> {
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)?;
                }
                fs::write(&path, &doc.bytes)?;
                fs::File::options().write(true).open(&path)?.set_modified(
                    std::time::SystemTime::now() - std::time::Duration::from_secs(3600),
                )
            };
            write().map_err(|source| LaunchError::Seed {
                path: path.clone(),
                source,
            })?;
            seeded.push(doc.path.to_string());
        }
        seeded.push("draft.txt".to_string());
        // One file stays out of the commit, so that staging and committing tools have work.
        let draft_path = self.workspace.join("draft.txt");
        fs::write(&draft_path, draft).map_err(|source| LaunchError::Seed {
            path: draft_path.clone(),
            source,
        })?;
        match self.seed_git_repository() {
            Ok(()) => {
                seeded.push(".git (repository, branch main, 1 commit; draft.txt untracked)".into())
            }
            Err(why) => self
                .seed_notes
                .push(format!("the workspace is not a git repository: {why}")),
        }
        seeded.sort();
        self.seeded = seeded;
        Ok(())
    }

    /// Creates the small SQLite database of [`super::sqlite`] at `rel` in the workspace.
    pub fn seed_sqlite(&mut self, rel: &Path) -> Result<(), LaunchError> {
        let path = self.workspace.join(rel);
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(&path, super::sqlite::items_database())
        };
        write().map_err(|source| LaunchError::Seed {
            path: path.clone(),
            source,
        })?;
        self.seeded.push(format!(
            "{} (SQLite: table items, {} rows)",
            rel.display(),
            super::sqlite::ITEMS.len()
        ));
        self.seeded.sort();
        Ok(())
    }

    /// `git init` and one commit of everything in the workspace.
    fn seed_git_repository(&self) -> Result<(), String> {
        self.git(&["init", "--quiet", "--initial-branch=main"])?;
        self.git(&["add", "--all", "--", ".", ":!draft.txt"])?;
        self.git(&[
            "commit",
            "--quiet",
            "--no-verify",
            "--message=Initial commit",
        ])
    }

    /// Runs one git command in the workspace, isolated from the host's git configuration.
    fn git(&self, args: &[&str]) -> Result<(), String> {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                &format!("user.name={GIT_NAME}"),
                "-c",
                &format!("user.email={GIT_EMAIL}"),
                "-c",
                "commit.gpgsign=false",
                // The workspace may belong to the sandbox's uid by now.
                "-c",
                "safe.directory=*",
            ])
            .args(args)
            .current_dir(&self.workspace)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_DATE", "2026-01-15T12:00:00Z")
            .env("GIT_COMMITTER_DATE", "2026-01-15T12:00:00Z")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("git could not be run ({e})"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "git {} failed: {}",
                args[0],
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
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
            // The change of owner changed every file's ctime: refresh the seeded repository's
            // index now, or the server's first read-only `git status` would rewrite it.
            let index = self.workspace.join(".git/index");
            if self.seeded.iter().any(|s| s.starts_with(".git")) && index.is_file() {
                self.git(&["update-index", "-q", "--refresh"])
                    .map_err(std::io::Error::other)?;
                std::os::unix::fs::chown(&index, Some(uid), Some(gid))?;
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

    #[test]
    fn a_missing_seed_is_an_error_naming_it() {
        let mut s = Scratch::create().expect("scratch");
        let err = s
            .seed_from(Path::new("/nonexistent/seed"))
            .expect_err("missing");
        assert!(err.to_string().contains("/nonexistent/seed"), "{err}");
    }
}
