//! Seeding the workspace: the user's own seed copied in (symlinks as symlinks), or the
//! default world (notes made from the run's words, small documents of the common types, a
//! draft left out of a git repository with a short history, a second branch and a remote),
//! and the SQLite database a scenario asks for.

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

    /// Seeds the workspace with a few small files, for runs without a user seed: the
    /// vocabulary's files (a developer's notes, a readme, a JSON document, made from the run's
    /// words so that edits find what synthesized arguments look for) and its draft, left out
    /// of the commits. Tools that read, edit or list then have something to work on. The
    /// workspace is also made a git repository when `git` is installed: `main` with two
    /// commits, a second branch one commit ahead of the first, and a remote `origin` (a bare
    /// copy in the home, which `main` tracks), so that history, branch and remote tools have
    /// real revisions and a remote that needs no network. Files are dated an hour back, so
    /// that a read-only `git status` has no racy index to refresh.
    pub fn seed_default(&mut self, words: &super::vocab::Vocabulary) -> Result<(), SeedError> {
        let mut seeded = Vec::new();
        let files = words.seed_files();
        let draft = words.draft();
        for (rel, content) in &files {
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
        match self.seed_git_repository(words) {
            Ok(()) => seeded.push(format!(
                ".git (repository: main with 2 commits, {} one commit ahead of the first, \
                 remote origin; draft.txt untracked)",
                words.seeded_branch
            )),
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

    /// `git init`, a first commit of everything but the draft and one file, a second commit
    /// of that file, a branch off the first commit with a file of its own, and `origin`: a
    /// bare copy under the home that `main` tracks.
    fn seed_git_repository(&self, words: &super::vocab::Vocabulary) -> Result<(), String> {
        let second = super::vocab::Vocabulary::SECOND_COMMIT_FILE;
        let (branch_file, branch_content, branch_message) = words.branch_commit();
        let commit = |message: &str, date: &str| {
            self.git_dated(
                &[
                    "commit",
                    "--quiet",
                    "--no-verify",
                    &format!("--message={message}"),
                ],
                date,
            )
        };
        self.git(&["init", "--quiet", "--initial-branch=main"])?;
        self.git(&[
            "add",
            "--all",
            "--",
            ".",
            ":!draft.txt",
            &format!(":!{second}"),
        ])?;
        commit("Initial commit", "2026-01-15T12:00:00Z")?;
        if self.workspace.join(second).is_file() {
            self.git(&["add", "--", second])?;
            commit(&words.second_commit_message(), "2026-01-16T09:30:00Z")?;
        }
        // The other branch: one commit off the first, with a file `main` does not have.
        self.git(&["branch", "--quiet", words.seeded_branch, "HEAD~1"])
            .or_else(|_| self.git(&["branch", "--quiet", words.seeded_branch]))?;
        let index = self.workspace.join(".git/hintcheck-branch-index");
        let branch_commit = (|| -> Result<String, String> {
            let env = [("GIT_INDEX_FILE", index.as_os_str())];
            self.git_with(&["read-tree", words.seeded_branch], &env, None)?;
            let blob = self.git_with(
                &["hash-object", "-w", "--stdin"],
                &env,
                Some(branch_content.as_bytes()),
            )?;
            self.git_with(
                &[
                    "update-index",
                    "--add",
                    "--cacheinfo",
                    &format!("100644,{},{branch_file}", blob.trim()),
                ],
                &env,
                None,
            )?;
            let tree = self.git_with(&["write-tree"], &env, None)?;
            let date = [
                (
                    "GIT_AUTHOR_DATE",
                    std::ffi::OsStr::new("2026-01-17T14:10:00Z"),
                ),
                (
                    "GIT_COMMITTER_DATE",
                    std::ffi::OsStr::new("2026-01-17T14:10:00Z"),
                ),
            ];
            self.git_with(
                &[
                    "commit-tree",
                    tree.trim(),
                    "-p",
                    words.seeded_branch,
                    "-m",
                    &branch_message,
                ],
                &date,
                None,
            )
        })();
        let _ = fs::remove_file(&index);
        let branch_commit = branch_commit?;
        self.git(&[
            "update-ref",
            &format!("refs/heads/{}", words.seeded_branch),
            branch_commit.trim(),
        ])?;
        // The remote: a bare copy of every branch, which `main` tracks.
        let remote = self.home.join("git").join(format!("{}.git", words.topic));
        let remote = remote.display().to_string();
        self.git(&["clone", "--quiet", "--bare", ".", &remote])?;
        self.git(&["remote", "add", "origin", &remote])?;
        self.git(&["fetch", "--quiet", "origin"])?;
        self.git(&["branch", "--quiet", "--set-upstream-to=origin/main", "main"])
    }

    /// Runs one git command in the workspace, isolated from the host's git configuration.
    fn git(&self, args: &[&str]) -> Result<(), String> {
        self.git_with(args, &[], None).map(|_| ())
    }

    /// The same, dated `date` (author and committer).
    fn git_dated(&self, args: &[&str], date: &str) -> Result<(), String> {
        let date = std::ffi::OsStr::new(date);
        self.git_with(
            args,
            &[("GIT_AUTHOR_DATE", date), ("GIT_COMMITTER_DATE", date)],
            None,
        )
        .map(|_| ())
    }

    /// The same with more environment and `input` on stdin; its standard output.
    fn git_with(
        &self,
        args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
        input: Option<&[u8]>,
    ) -> Result<String, String> {
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
            .envs(env.iter().copied())
            .stdin(if input.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                if let (Some(bytes), Some(mut stdin)) = (input, child.stdin.take()) {
                    std::io::Write::write_all(&mut stdin, bytes)?;
                }
                child.wait_with_output()
            })
            .map_err(|e| format!("git could not be run ({e})"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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
    fn the_default_seed_has_history_a_second_branch_and_a_remote() {
        if super::super::git_missing() {
            return;
        }
        let words = super::super::vocab::Vocabulary::of(7);
        let mut s = Scratch::create().expect("scratch");
        s.seed_default(&words).expect("seeded");
        let repo = super::super::repository::Repository::read(&s.workspace).expect("a repository");
        assert_eq!(repo.current.as_deref(), Some("main"));
        let branches: Vec<&str> = repo.branches.iter().map(|(b, _)| b.as_str()).collect();
        assert_eq!(branches, ["main", words.seeded_branch]);
        assert_ne!(repo.branches[0].1, repo.branches[1].1);
        assert_eq!(repo.remotes, ["origin"]);
        // The draft stays out of every commit; the branch's own file is not in the worktree.
        assert!(!repo.tracked.iter().any(|f| f == "draft.txt"));
        assert!(repo.tracked.iter().any(|f| f == "notes.txt"));
        assert!(!s.workspace.join(words.branch_commit().0).exists());
        // The remote lives in the home and `main` tracks it.
        let config = fs::read_to_string(s.workspace.join(".git/config")).expect("config");
        assert!(config.contains(&s.home.display().to_string()), "{config}");
        assert!(config.contains("merge = refs/heads/main"), "{config}");
        assert!(s.seeded.iter().any(|e| e.contains(words.seeded_branch)));
        s.remove().expect("removed");
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
