//! Seeding the workspace: the user's own seed copied in (symlinks as symlinks), or the
//! default world (notes made from the run's words, small documents of the common types, a
//! draft left out of a git repository of one commit), and the SQLite database a scenario asks
//! for.

use std::fs;
use std::path::{Path, PathBuf};

use crate::sandbox::scratch::{GIT_EMAIL, GIT_NAME, Scratch};

/// Most entries copied from a seed directory.
const MAX_SEED_ENTRIES: usize = 100_000;

/// Why the workspace could not be seeded.
#[derive(Debug, thiserror::Error)]
pub enum SeedError {
    /// A seed could not be copied or a seeded file written.
    #[error("cannot copy the workspace seed {}", path.display())]
    Write {
        /// The seed directory, or the file being written.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Scratch {
    /// Copies `seed` into the workspace. Symlinks are copied as symlinks, never followed.
    pub fn seed_from(&mut self, seed: &Path) -> Result<(), SeedError> {
        let meta = fs::metadata(seed).map_err(|source| SeedError::Write {
            path: seed.to_path_buf(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(SeedError::Write {
                path: seed.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            });
        }
        let mut seeded = Vec::new();
        copy_tree(seed, &self.workspace, Path::new(""), &mut seeded).map_err(|source| {
            SeedError::Write {
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
    pub fn seed_default(&mut self, files: &[(&str, String)], draft: &str) -> Result<(), SeedError> {
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
            write().map_err(|source| SeedError::Write {
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
            write().map_err(|source| SeedError::Write {
                path: path.clone(),
                source,
            })?;
            seeded.push(doc.path.to_string());
        }
        seeded.push("draft.txt".to_string());
        // One file stays out of the commit, so that staging and committing tools have work.
        let draft_path = self.workspace.join("draft.txt");
        fs::write(&draft_path, draft).map_err(|source| SeedError::Write {
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
    pub fn seed_sqlite(&mut self, rel: &Path) -> Result<(), SeedError> {
        let path = self.workspace.join(rel);
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(&path, super::sqlite::items_database())
        };
        write().map_err(|source| SeedError::Write {
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

    /// After the scratch directories changed owner to `run_as` (which changed every file's
    /// ctime): refreshes the seeded repository's index, or the server's first read-only
    /// `git status` would rewrite it.
    pub fn refresh_git_index(&self, run_as: Option<(u32, u32)>) -> std::io::Result<()> {
        let Some((uid, gid)) = run_as else {
            return Ok(());
        };
        let index = self.workspace.join(".git/index");
        if self.seeded.iter().any(|s| s.starts_with(".git")) && index.is_file() {
            self.git(&["update-index", "-q", "--refresh"])
                .map_err(std::io::Error::other)?;
            std::os::unix::fs::chown(&index, Some(uid), Some(gid))?;
        }
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

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
