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
            Err(why) => {
                // Nothing half made stays: the remote's directory holds only the remote.
                let _ = fs::remove_dir_all(self.workspace.join(".git"));
                let _ = fs::remove_dir_all(self.home.join("git"));
                self.seed_notes
                    .push(format!("the workspace is not a git repository: {why}"))
            }
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

    /// A repository with a first commit of everything but the draft and one file, a second
    /// commit of that file, a branch off the first commit with a file of its own, and
    /// `origin`: a bare copy under the home that `main` tracks. The objects and branches of
    /// both are written in-process (git's own processes for this cost 30 ms a run, on the
    /// path to the server's start); the index by `git reset`, with every file's metadata;
    /// the reflogs and the configuration as `git init`, `git commit`, `git branch`, `git
    /// fetch` and `git clone --bare` would have left them.
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
        let mut commits = vec![SeededCommit {
            date: FIRST,
            message: "Initial commit",
            parent: None,
            files: first_files,
        }];
        if let Some(content) = second_content {
            commits.push(SeededCommit {
                date: SECOND,
                message: &second_message,
                parent: Some(1),
                files: vec![(second.to_string(), content)],
            });
        }
        let main_mark = commits.len();
        commits.push(SeededCommit {
            date: BRANCHED,
            message: &branch_message,
            parent: Some(1),
            files: vec![(branch_file, branch_content.into_bytes())],
        });
        let branch_mark = commits.len();
        let remote = self.home.join("git").join(format!("{}.git", words.topic));
        let written = write_history(
            &self.workspace,
            &remote,
            &commits,
            branch,
            [main_mark, branch_mark],
        )
        .and_then(|ids| {
            // The index, as `git commit` leaves it (with every file's metadata).
            self.git(&["reset", "--quiet"])?;
            Ok(ids)
        });
        let ids = written?;
        let git_dir = self.workspace.join(".git");
        // The configuration `git init` and `git clone --bare` write, and the remote that
        // `main` tracks.
        let remote = remote.display().to_string();
        let workspace = self.workspace.display();
        for (path, text) in [
            (
                git_dir.join("config"),
                format!(
                    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n[remote \"origin\"]\n\turl = {remote}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\tremote = origin\n\tmerge = refs/heads/main\n"
                ),
            ),
            (
                PathBuf::from(&remote).join("config"),
                format!(
                    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n[remote \"origin\"]\n\turl = {workspace}/.\n"
                ),
            ),
        ] {
            fs::write(&path, text)
                .map_err(|e| format!("the repository's config could not be written ({e})"))?;
        }
        // The reflogs the commands would have written.
        let zero = "0".repeat(40);
        let [c1, c_main, c_branch] = ids.map(|id| id.to_string());
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
        let out = crate::sandbox::process::helper_output(
            std::process::Command::new("git")
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
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped()),
        )
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

/// One commit of the seeded history.
struct SeededCommit<'a> {
    date: &'a str,
    message: &'a str,
    /// The 1-based position of its parent in the history.
    parent: Option<usize>,
    /// (path, content) of each file it adds or changes.
    files: Vec<(String, Vec<u8>)>,
}

/// Creates the repository of `workspace` and the bare one at `remote`, writes `commits` into
/// both, and points the branches at them: `main` and `branch` at the commits at the 1-based
/// positions `heads`, in both repositories, and the workspace's `origin/main` and
/// `origin/<branch>` likewise. The ids of the first commit and of the two heads.
fn write_history(
    workspace: &Path,
    remote: &Path,
    commits: &[SeededCommit<'_>],
    branch: &str,
    heads: [usize; 2],
) -> Result<[gix::ObjectId; 3], String> {
    let init = |dir: &Path, kind| {
        gix::ThreadSafeRepository::init_opts(
            dir,
            kind,
            gix::create::Options::default(),
            gix::open::Options::isolated(),
        )
        .map(gix::Repository::from)
        .map_err(|e| format!("the repository could not be created ({e})"))
        .and_then(|repo| {
            git_template(repo.git_dir())
                .map_err(|e| format!("the repository could not be created ({e})"))?;
            Ok(repo)
        })
    };
    fs::create_dir_all(remote).map_err(|e| format!("the remote could not be created ({e})"))?;
    let repos = [
        init(workspace, gix::create::Kind::WithWorktree)?,
        init(remote, gix::create::Kind::Bare)?,
    ];
    let mut ids: Vec<gix::ObjectId> = Vec::new();
    let mut trees: Vec<std::collections::BTreeMap<String, gix::ObjectId>> = Vec::new();
    for commit in commits {
        let parent = match commit.parent {
            Some(p) => Some(
                ids.get(p.wrapping_sub(1))
                    .zip(trees.get(p.wrapping_sub(1)))
                    .ok_or_else(|| format!("the seeded history has no commit {p}"))?,
            ),
            None => None,
        };
        let mut files = parent.map(|(_, files)| files.clone()).unwrap_or_default();
        for (path, content) in &commit.files {
            let blob = gix::objs::Blob {
                data: content.clone(),
            };
            files.insert(path.clone(), write_in_all(&repos, &blob)?);
        }
        let listed: Vec<(&str, gix::ObjectId)> =
            files.iter().map(|(p, id)| (p.as_str(), *id)).collect();
        let tree = write_tree(&repos, &listed)?;
        let who = gix::actor::Signature {
            name: GIT_NAME.into(),
            email: GIT_EMAIL.into(),
            time: gix::date::Time::new(epoch(commit.date), 0),
        };
        let object = gix::objs::Commit {
            tree,
            parents: parent.map(|(id, _)| *id).into_iter().collect(),
            author: who.clone(),
            committer: who,
            encoding: None,
            message: format!("{}\n", commit.message).into(),
            extra_headers: Vec::new(),
        };
        ids.push(write_in_all(&repos, &object)?);
        trees.push(files);
    }
    let id = |position: usize| {
        ids.get(position.wrapping_sub(1))
            .copied()
            .ok_or_else(|| format!("the seeded history has no commit {position}"))
    };
    let [main, branched] = [id(heads[0])?, id(heads[1])?];
    let who = gix::actor::Signature {
        name: GIT_NAME.into(),
        email: GIT_EMAIL.into(),
        time: gix::date::Time::new(epoch(commits[0].date), 0),
    };
    let heads = [
        ("refs/heads/main".to_string(), main),
        (format!("refs/heads/{branch}"), branched),
    ];
    let tracking = [
        ("refs/remotes/origin/main".to_string(), main),
        (format!("refs/remotes/origin/{branch}"), branched),
    ];
    for (repo, refs) in [
        (&repos[0], [heads.as_slice(), tracking.as_slice()].concat()),
        (&repos[1], heads.to_vec()),
    ] {
        let edits = refs
            .into_iter()
            .map(|(name, id)| {
                Ok(gix::refs::transaction::RefEdit {
                    change: gix::refs::transaction::Change::Update {
                        log: gix::refs::transaction::LogChange {
                            mode: gix::refs::transaction::RefLog::AndReference,
                            force_create_reflog: false,
                            message: "seeded".into(),
                        },
                        expected: gix::refs::transaction::PreviousValue::Any,
                        new: gix::refs::Target::Object(id),
                    },
                    name: gix::refs::FullName::try_from(name.as_str())
                        .map_err(|e| format!("a branch cannot be named {name:?} ({e})"))?,
                    deref: false,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut time = gix::date::parse::TimeBuf::default();
        repo.edit_references_as(edits, Some(who.to_ref(&mut time)))
            .map_err(|e| format!("the branches could not be written ({e})"))?;
    }
    Ok([id(1)?, main, branched])
}

/// The tree of `files` (paths relative to it), its subtrees written first.
fn write_tree(
    repos: &[gix::Repository],
    files: &[(&str, gix::ObjectId)],
) -> Result<gix::ObjectId, String> {
    let mut entries = Vec::new();
    let mut subtrees: std::collections::BTreeMap<&str, Vec<(&str, gix::ObjectId)>> =
        std::collections::BTreeMap::new();
    for (path, id) in files {
        match path.split_once('/') {
            Some((dir, rest)) => subtrees.entry(dir).or_default().push((rest, *id)),
            None => entries.push(gix::objs::tree::Entry {
                mode: gix::objs::tree::EntryKind::Blob.into(),
                filename: (*path).into(),
                oid: *id,
            }),
        }
    }
    for (dir, inner) in subtrees {
        entries.push(gix::objs::tree::Entry {
            mode: gix::objs::tree::EntryKind::Tree.into(),
            filename: dir.into(),
            oid: write_tree(repos, &inner)?,
        });
    }
    entries.sort();
    write_in_all(repos, &gix::objs::Tree { entries })
}

/// What `git init` writes of its template into `git_dir`, in place of gix's own: git's
/// description and `info/exclude`, the sample hooks of the installed git (where its template
/// directory is found), and the legacy `branches` directory.
fn git_template(git_dir: &Path) -> std::io::Result<()> {
    const DESCRIPTION: &str =
        "Unnamed repository; edit this file 'description' to name the repository.\n";
    const EXCLUDE: &str = "# git ls-files --others --exclude-from=.git/info/exclude\n\
        # Lines that start with '#' are comments.\n\
        # For a project mostly in C, the following would be a good set of\n\
        # exclude patterns (uncomment them if you want to use them):\n\
        # *.[oa]\n\
        # *~\n";
    fs::write(git_dir.join("description"), DESCRIPTION)?;
    fs::create_dir_all(git_dir.join("info"))?;
    fs::write(git_dir.join("info/exclude"), EXCLUDE)?;
    fs::create_dir_all(git_dir.join("branches"))?;
    let hooks = git_dir.join("hooks");
    let _ = fs::remove_dir_all(&hooks);
    fs::create_dir_all(&hooks)?;
    let installed = [
        "/usr/share/git-core/templates/hooks",
        "/usr/local/share/git-core/templates/hooks",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.is_dir());
    if let Some(dir) = installed {
        for entry in fs::read_dir(dir)?.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                fs::copy(entry.path(), hooks.join(entry.file_name()))?;
            }
        }
    }
    Ok(())
}

/// Writes `object` into each of `repos`; its id.
fn write_in_all(
    repos: &[gix::Repository],
    object: &impl gix::objs::WriteTo,
) -> Result<gix::ObjectId, String> {
    let mut id = None;
    for repo in repos {
        let written = repo
            .write_object(object)
            .map_err(|e| format!("an object could not be written ({e})"))?
            .detach();
        id = Some(written);
    }
    id.ok_or_else(|| "no repository to write to".to_string())
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
        // The commits are the very objects `git fast-import` made of this history before it
        // was written in-process (same trees, authors, dates and messages), and git finds
        // both repositories sound.
        let git = |dir: &Path, args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(dir)
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .expect("git");
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let remote = s.home.join("git").join(format!("{}.git", words.topic));
        for dir in [&s.workspace, &remote] {
            assert_eq!(
                git(dir, &["rev-parse", "main", words.seeded_branch, "main~1"]),
                "54b2b0c0a1ab6f0e2f6558e138cd3b3c95be1544\n\
                 ae00d85deacb4a5e60c72193dec340685d3495cd\n\
                 3a592757327d130dc176eed408bceeb7478cb5df\n"
            );
            git(dir, &["fsck", "--strict", "--no-dangling"]);
        }
        assert_eq!(
            git(&s.workspace, &["status", "--porcelain"]),
            "?? draft.txt\n"
        );
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
