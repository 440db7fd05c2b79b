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
        self.seed_default_before_owner_change(words, false)
    }

    /// [`Scratch::seed_default`], where `owner_changes` says the scratch directories change
    /// owner next (as root, for the server's uid) and [`Scratch::refresh_git_index`] follows:
    /// a copy of the kept seed then leaves the index's refresh to it (one git process less).
    pub fn seed_default_before_owner_change(
        &mut self,
        words: &super::vocab::Vocabulary,
        owner_changes: bool,
    ) -> Result<(), SeedError> {
        let key = template_key(words);
        if let Some(template) = SeedTemplate::kept(&key) {
            if template.apply(self, !owner_changes).is_ok() {
                return Ok(());
            }
            // What was written goes before the seed is made afresh.
            for dir in [self.workspace.clone(), self.home.join("git")] {
                let _ = fs::remove_dir_all(&dir);
                let _ = fs::create_dir_all(&dir);
            }
            let _ = fs::remove_dir(self.home.join("git"));
        }
        self.seed_default_afresh(words)?;
        if self.seed_notes.is_empty()
            && let Ok(template) = SeedTemplate::capture(self)
        {
            template.keep(key);
        }
        Ok(())
    }

    /// [`Scratch::seed_default`] without a kept template: the files written, git run.
    fn seed_default_afresh(&mut self, words: &super::vocab::Vocabulary) -> Result<(), SeedError> {
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
    /// bare copy under the home that `main` tracks. The history is written by one `git
    /// fast-import` (a process per commit, branch and ref cost 90 ms a run); the index by
    /// `git reset`; the reflogs and the remote's configuration as `git commit`, `git branch`
    /// and `git fetch` would have left them.
    fn seed_git_repository(&self, words: &super::vocab::Vocabulary) -> Result<(), String> {
        const FIRST: &str = "2026-01-15T12:00:00Z";
        const SECOND: &str = "2026-01-16T09:30:00Z";
        const BRANCHED: &str = "2026-01-17T14:10:00Z";
        let second = super::vocab::Vocabulary::SECOND_COMMIT_FILE;
        let (branch_file, branch_content, branch_message) = words.branch_commit();
        let branch = words.seeded_branch;
        let mut first_files = Vec::new();
        committed_files(&self.workspace, Path::new(""), &mut first_files)
            .map_err(|e| format!("the workspace could not be read ({e})"))?;
        first_files.retain(|(rel, _)| rel != "draft.txt" && rel != second);
        first_files.sort();
        let second_content = fs::read(self.workspace.join(second)).ok();
        let second_message = words.second_commit_message();
        let mut commits = vec![FastCommit {
            reference: "refs/heads/main".into(),
            date: FIRST,
            message: "Initial commit",
            parent: None,
            files: first_files,
        }];
        if let Some(content) = second_content {
            commits.push(FastCommit {
                reference: "refs/heads/main".into(),
                date: SECOND,
                message: &second_message,
                parent: Some(1),
                files: vec![(second.to_string(), content)],
            });
        }
        let main_mark = commits.len();
        commits.push(FastCommit {
            reference: format!("refs/heads/{branch}"),
            date: BRANCHED,
            message: &branch_message,
            parent: Some(1),
            files: vec![(branch_file, branch_content.into_bytes())],
        });
        let branch_mark = commits.len();
        let mut stream = fast_import_stream(&commits)?;
        for (reference, mark) in [
            ("refs/remotes/origin/main".to_string(), main_mark),
            (format!("refs/remotes/origin/{branch}"), branch_mark),
        ] {
            stream.extend(format!("reset {reference}\nfrom :{mark}\n\n").into_bytes());
        }
        stream.extend(b"done\n");
        self.git(&["init", "--quiet", "--initial-branch=main"])?;
        let marks = self.workspace.join(".git/hintcheck-marks");
        let marks_arg = format!("--export-marks={}", marks.display());
        let imported = self.git_with(
            &["fast-import", "--quiet", "--done", &marks_arg],
            &[],
            Some(&stream),
        );
        let ids = fs::read_to_string(&marks).unwrap_or_default();
        let _ = fs::remove_file(&marks);
        imported?;
        let id = |mark: usize| -> Result<String, String> {
            ids.lines()
                .find_map(|l| l.strip_prefix(&format!(":{mark} ")))
                .map(str::to_string)
                .ok_or_else(|| format!("git fast-import made no commit {mark}"))
        };
        self.git(&["reset", "--quiet"])?;
        // The remote: a bare copy of every branch, which `main` tracks.
        let remote = self.home.join("git").join(format!("{}.git", words.topic));
        let remote = remote.display().to_string();
        self.git(&["clone", "--quiet", "--bare", ".", &remote])?;
        let git_dir = self.workspace.join(".git");
        let mut config = fs::OpenOptions::new()
            .append(true)
            .open(git_dir.join("config"))
            .map_err(|e| format!("the repository's config could not be written ({e})"))?;
        std::io::Write::write_all(
            &mut config,
            format!(
                "[remote \"origin\"]\n\turl = {remote}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n"
            )
            .as_bytes(),
        )
        .map_err(|e| format!("the repository's config could not be written ({e})"))?;
        // The reflogs the commands would have written.
        let zero = "0".repeat(40);
        let (c1, c_main, c_branch) = (id(1)?, id(main_mark)?, id(branch_mark)?);
        let mut main_log = vec![(
            zero.as_str(),
            c1.as_str(),
            FIRST,
            "commit (initial): Initial commit".to_string(),
        )];
        if main_mark > 1 {
            main_log.push((
                c1.as_str(),
                c_main.as_str(),
                SECOND,
                format!("commit: {second_message}"),
            ));
        }
        let fetched = "fetch --quiet origin: storing head".to_string();
        let logs = [
            ("HEAD".to_string(), main_log.clone()),
            ("refs/heads/main".to_string(), main_log),
            (
                format!("refs/heads/{branch}"),
                vec![
                    (
                        zero.as_str(),
                        c1.as_str(),
                        FIRST,
                        format!(
                            "branch: Created from HEAD{}",
                            if main_mark > 1 { "~1" } else { "" }
                        ),
                    ),
                    (c1.as_str(), c_branch.as_str(), FIRST, String::new()),
                ],
            ),
            (
                "refs/remotes/origin/main".to_string(),
                vec![(zero.as_str(), c_main.as_str(), FIRST, fetched.clone())],
            ),
            (
                format!("refs/remotes/origin/{branch}"),
                vec![(zero.as_str(), c_branch.as_str(), FIRST, fetched)],
            ),
        ];
        for (reference, entries) in logs {
            let path = git_dir.join("logs").join(reference);
            let text: String = entries
                .iter()
                .map(|(old, new, date, message)| {
                    format!(
                        "{old} {new} {GIT_NAME} <{GIT_EMAIL}> {} +0000\t{message}\n",
                        epoch(date)
                    )
                })
                .collect();
            path.parent()
                .map(fs::create_dir_all)
                .transpose()
                .and_then(|_| fs::write(&path, text))
                .map_err(|e| format!("a reflog could not be written ({e})"))?;
        }
        Ok(())
    }

    /// Runs one git command in the workspace, isolated from the host's git configuration.
    fn git(&self, args: &[&str]) -> Result<(), String> {
        self.git_with(args, &[], None).map(|_| ())
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

/// The default seed of one vocabulary as it was written (the workspace with its repository,
/// and the remote under the home), kept once per process: nested runs (replays, `--isolate`)
/// write it again instead of running git a dozen times, then let git refresh the index's
/// file metadata for the new files.
struct SeedTemplate {
    /// (under the home rather than the workspace, path relative to it, content: `None` for
    /// a directory, modification time).
    entries: Vec<(bool, PathBuf, Option<Vec<u8>>, std::time::SystemTime)>,
    workspace: PathBuf,
    home: PathBuf,
    seeded: Vec<String>,
}

/// What tells one vocabulary's default seed from another's.
fn template_key(words: &super::vocab::Vocabulary) -> String {
    format!(
        "{:?}",
        (
            words.words(),
            words.seed_files(),
            words.draft(),
            words.branch_commit()
        )
    )
}

/// The templates kept (with the vocabulary each was made from), the latest last.
static SEED_TEMPLATES: std::sync::Mutex<Vec<(String, std::sync::Arc<SeedTemplate>)>> =
    std::sync::Mutex::new(Vec::new());

/// Most templates kept at once (a process runs one seed, tests run several).
const KEPT_TEMPLATES: usize = 4;

impl SeedTemplate {
    /// The template kept for the vocabulary `key`, if one is.
    fn kept(key: &str) -> Option<std::sync::Arc<SeedTemplate>> {
        let kept = SEED_TEMPLATES.lock().ok()?;
        kept.iter().find(|(k, _)| k == key).map(|(_, t)| t.clone())
    }

    /// Keeps this template for the vocabulary `key` (the oldest kept one goes).
    fn keep(self, key: String) {
        if let Ok(mut kept) = SEED_TEMPLATES.lock() {
            kept.retain(|(k, _)| *k != key);
            if kept.len() >= KEPT_TEMPLATES {
                kept.remove(0);
            }
            kept.push((key, std::sync::Arc::new(self)));
        }
    }

    /// Reads what `scratch` was seeded with: its workspace and the home's `git` directory.
    fn capture(scratch: &Scratch) -> std::io::Result<SeedTemplate> {
        let mut entries = Vec::new();
        for (in_home, root) in [
            (false, scratch.workspace.clone()),
            (true, scratch.home.join("git")),
        ] {
            let mut stack = vec![PathBuf::new()];
            while let Some(rel) = stack.pop() {
                for entry in fs::read_dir(root.join(&rel))? {
                    let entry = entry?;
                    let name = rel.join(entry.file_name());
                    let meta = entry.metadata()?;
                    let path = if in_home {
                        Path::new("git").join(&name)
                    } else {
                        name.clone()
                    };
                    if meta.is_dir() {
                        entries.push((in_home, path, None, meta.modified()?));
                        stack.push(name);
                    } else if meta.is_file() {
                        entries.push((
                            in_home,
                            path,
                            Some(fs::read(entry.path())?),
                            meta.modified()?,
                        ));
                    } else {
                        return Err(std::io::Error::other(
                            "a seeded entry is neither a file nor a directory",
                        ));
                    }
                }
            }
        }
        // Parents before their children.
        entries.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        Ok(SeedTemplate {
            entries,
            workspace: scratch.workspace.clone(),
            home: scratch.home.clone(),
            seeded: scratch.seeded.clone(),
        })
    }

    /// Writes the template into `scratch` (the repositories' configurations naming the new
    /// places) and, when `refresh`, has git refresh the index (the files are new, their
    /// inodes and times differ from those the index recorded).
    fn apply(&self, scratch: &mut Scratch, refresh: bool) -> Result<(), String> {
        let old = [
            self.workspace.display().to_string(),
            self.home.display().to_string(),
        ];
        let new = [
            scratch.workspace.display().to_string(),
            scratch.home.display().to_string(),
        ];
        let write = || -> std::io::Result<()> {
            for (in_home, rel, content, modified) in &self.entries {
                let path = if *in_home {
                    scratch.home.join(rel)
                } else {
                    scratch.workspace.join(rel)
                };
                match content {
                    None => fs::create_dir_all(&path)?,
                    Some(bytes) if rel.file_name().is_some_and(|n| n == "config") => {
                        let mut text = String::from_utf8_lossy(bytes).into_owned();
                        for (from, to) in old.iter().zip(&new) {
                            text = text.replace(from.as_str(), to);
                        }
                        fs::write(&path, text)?;
                    }
                    Some(bytes) => {
                        fs::write(&path, bytes)?;
                        fs::File::options()
                            .write(true)
                            .open(&path)?
                            .set_modified(*modified)?;
                    }
                }
            }
            Ok(())
        };
        write().map_err(|e| format!("the kept seed could not be written ({e})"))?;
        if refresh {
            scratch.git(&["update-index", "-q", "--refresh"])?;
        }
        scratch.seeded = self.seeded.clone();
        Ok(())
    }
}

/// One commit of the seeded history, for `git fast-import`.
struct FastCommit<'a> {
    reference: String,
    date: &'a str,
    message: &'a str,
    /// The mark (1-based position) of its parent.
    parent: Option<usize>,
    /// (path, content) of each file it adds or changes.
    files: Vec<(String, Vec<u8>)>,
}

/// The `git fast-import` stream of `commits`, each marked by its 1-based position.
fn fast_import_stream(commits: &[FastCommit<'_>]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let data = |out: &mut Vec<u8>, bytes: &[u8]| {
        out.extend(format!("data {}\n", bytes.len()).into_bytes());
        out.extend(bytes);
        out.push(b'\n');
    };
    for (i, c) in commits.iter().enumerate() {
        let when = format!("{GIT_NAME} <{GIT_EMAIL}> {} +0000", epoch(c.date));
        out.extend(
            format!(
                "commit {}\nmark :{}\nauthor {when}\ncommitter {when}\n",
                c.reference,
                i + 1
            )
            .into_bytes(),
        );
        data(&mut out, format!("{}\n", c.message).as_bytes());
        if let Some(parent) = c.parent {
            out.extend(format!("from :{parent}\n").into_bytes());
        }
        for (path, content) in &c.files {
            if path.contains(['\n', '"']) || path.starts_with(' ') {
                return Err(format!(
                    "a seeded file's name cannot be committed: {path:?}"
                ));
            }
            out.extend(format!("M 100644 inline {path}\n").into_bytes());
            data(&mut out, content);
        }
        out.push(b'\n');
    }
    Ok(out)
}

/// Seconds since the epoch of an RFC 3339 instant written in this file.
fn epoch(date: &str) -> i64 {
    date.parse::<jiff::Timestamp>()
        .map(|t| t.as_second())
        .unwrap_or(0)
}

/// Every regular file under `dir` (recursively, `.git` left out) with its content, by its
/// path relative to the workspace: what `git add --all` would stage.
fn committed_files(
    dir: &Path,
    rel: &Path,
    out: &mut Vec<(String, Vec<u8>)>,
) -> std::io::Result<()> {
    for entry in fs::read_dir(dir.join(rel))? {
        let entry = entry?;
        let name = rel.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() && name != Path::new(".git") {
            committed_files(dir, &name, out)?;
        } else if kind.is_file() {
            out.push((name.to_string_lossy().into_owned(), fs::read(entry.path())?));
        }
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

    /// What git shows of a seeded workspace and its remote, with the scratch root left out.
    fn git_picture(s: &Scratch) -> String {
        let sh = "git status --porcelain=v2 --branch && git for-each-ref --format='%(refname) %(objectname) %(upstream)' && git log --all --format='%H %P %an %ae %ad %cd %s' --date=raw && git reflog show --all --format='%gd %H %gs' --date=raw && git config --local --list && git ls-files -s && cd ../home/git/*.git && git for-each-ref && git config --local --list && cat HEAD";
        let out = std::process::Command::new("sh")
            .args(["-c", sh])
            .current_dir(&s.workspace)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let root = s.workspace.parent().expect("root").display().to_string();
        String::from_utf8_lossy(&out.stdout).replace(&root, "ROOT")
    }

    #[test]
    fn a_seed_made_again_from_the_kept_template_is_the_same_repository() {
        if super::super::git_missing() {
            return;
        }
        let words = super::super::vocab::Vocabulary::of(11);
        let mut fresh = Scratch::create().expect("scratch");
        fresh.seed_default(&words).expect("seeded");
        assert!(SeedTemplate::kept(&template_key(&words)).is_some());
        let mut again = Scratch::create().expect("scratch");
        again.seed_default(&words).expect("seeded again");
        assert_eq!(fresh.seeded, again.seeded);
        let index = again.workspace.join(".git/index");
        let before = fs::metadata(&index)
            .and_then(|m| m.modified())
            .expect("index");
        assert_eq!(git_picture(&fresh), git_picture(&again));
        // A read-only `git status` finds nothing to refresh in the index.
        let after = fs::metadata(&index)
            .and_then(|m| m.modified())
            .expect("index");
        assert_eq!(
            before, after,
            "git status rewrote the index of the copied seed"
        );
        fresh.remove().expect("removed");
        again.remove().expect("removed");
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
