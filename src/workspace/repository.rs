//! What the workspace's git repository holds, read from its files: the current branch, the
//! branches and tags with the commits they name, the remotes, and the files the index
//! tracks. Never by running git: a repository the user seeded may carry a configuration
//! that runs commands (`core.fsmonitor`, hooks), and nothing of it may run on the host. The
//! explorer gives history tools these revisions and files instead of invented ones.

use std::path::Path;

/// Most refs, remotes and tracked files read.
const MAX_ENTRIES: usize = 200;
/// Most directory entries visited under `refs/` (whatever they hold).
const MAX_VISITED: usize = 2_000;
/// Largest loose ref read (an id or a `ref: …` line).
const MAX_REF_BYTES: u64 = 256;
/// Largest index or packed-refs file read.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// A repository's names for things, as its files say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Repository {
    /// The branch `HEAD` points at (`None` when detached).
    pub current: Option<String>,
    /// Branches and the commit each names (`main`, hex id), the current first.
    pub branches: Vec<(String, String)>,
    /// Tags.
    pub tags: Vec<String>,
    /// Remotes (`origin`).
    pub remotes: Vec<String>,
    /// Files the index tracks, relative to the root.
    pub tracked: Vec<String>,
}

impl Repository {
    /// The repository at `root/.git`, if there is one.
    pub fn read(root: &Path) -> Option<Repository> {
        let git = root.join(".git");
        if !std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
            return None;
        }
        let head = small_text(&git.join("HEAD"))?;
        let mut repo = Repository {
            current: head
                .trim()
                .strip_prefix("ref: refs/heads/")
                .map(str::to_string),
            ..Default::default()
        };
        let mut refs: Vec<(String, String)> = Vec::new();
        let mut visited = 0;
        walk_refs(&git.join("refs"), "refs", &mut refs, &mut visited, 0);
        if let Some(packed) = small_text(&git.join("packed-refs")) {
            for line in packed.lines().filter(|l| !l.starts_with(['#', '^'])) {
                if let Some((id, name)) = line.split_once(' ') {
                    if is_object_id(id) && !refs.iter().any(|(n, _)| n == name) {
                        refs.push((name.to_string(), id.to_string()));
                    }
                }
            }
        }
        refs.sort();
        for (name, id) in refs.into_iter().take(MAX_ENTRIES) {
            if let Some(branch) = name.strip_prefix("refs/heads/") {
                repo.branches.push((branch.to_string(), id));
            } else if let Some(tag) = name.strip_prefix("refs/tags/") {
                repo.tags.push(tag.to_string());
            }
        }
        if let Some(current) = &repo.current {
            if let Some(i) = repo.branches.iter().position(|(b, _)| b == current) {
                let c = repo.branches.remove(i);
                repo.branches.insert(0, c);
            }
        }
        if let Some(config) = small_text(&git.join("config")) {
            repo.remotes = config
                .lines()
                .filter_map(|l| {
                    l.trim()
                        .strip_prefix("[remote \"")?
                        .strip_suffix("\"]")
                        .map(str::to_string)
                })
                .take(MAX_ENTRIES)
                .collect();
        }
        // A SHA-256 repository's index holds 32-byte ids.
        let sha256 = small_text(&git.join("config")).is_some_and(|c| {
            c.lines().any(|l| {
                l.replace([' ', '\t'], "")
                    .eq_ignore_ascii_case("objectformat=sha256")
            })
        });
        repo.tracked = small_bytes(&git.join("index"), MAX_FILE_BYTES)
            .map(|b| index_paths(&b, if sha256 { 32 } else { 20 }))
            .unwrap_or_default();
        Some(repo)
    }

    /// The commit the current branch names.
    pub fn head_commit(&self) -> Option<&str> {
        let current = self.current.as_deref()?;
        self.branches
            .iter()
            .find(|(b, _)| b == current)
            .map(|(_, id)| id.as_str())
    }
}

/// A regular file's bytes, at most `max`, never through a symlink (nor from a FIFO or a
/// device).
fn small_bytes(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = super::open_regular(path)?;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, max + 1), &mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

/// A small file's text (HEAD, config, packed-refs), the same way.
fn small_text(path: &Path) -> Option<String> {
    String::from_utf8(small_bytes(path, MAX_FILE_BYTES)?).ok()
}

/// A full commit id: 40 (SHA-1) or 64 (SHA-256) hex digits.
fn is_object_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Loose refs under `dir` (named `prefix/…`), bounded in refs kept and entries visited; a
/// link is never followed, `refs` itself included.
fn walk_refs(
    dir: &Path,
    prefix: &str,
    out: &mut Vec<(String, String)>,
    visited: &mut usize,
    depth: usize,
) {
    if depth > 6 || !std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        *visited += 1;
        if out.len() >= MAX_ENTRIES || *visited > MAX_VISITED {
            return;
        }
        let name = format!("{prefix}/{}", e.file_name().to_string_lossy());
        match e.file_type() {
            Ok(t) if t.is_dir() => walk_refs(&e.path(), &name, out, visited, depth + 1),
            Ok(t) if t.is_file() => {
                let id =
                    small_bytes(&e.path(), MAX_REF_BYTES).and_then(|b| String::from_utf8(b).ok());
                if let Some(id) = id {
                    let id = id.trim();
                    if is_object_id(id) {
                        out.push((name, id.to_string()));
                    }
                }
            }
            _ => {}
        }
    }
}

/// The paths of a version 2 or 3 index (`DIRC`) whose object ids take `id_len` bytes,
/// bounded, each once (conflict stages repeat a path); none for other versions.
fn index_paths(b: &[u8], id_len: usize) -> Vec<String> {
    let be32 = |at: usize| -> Option<u32> {
        b.get(at..at + 4)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    };
    let (Some(version), Some(count)) = (be32(4), be32(8)) else {
        return Vec::new();
    };
    if !b.starts_with(b"DIRC") || !matches!(version, 2 | 3) {
        return Vec::new();
    }
    // ctime, mtime, dev, ino, mode, uid, gid, size (40 bytes), the object id, flags.
    let fixed = 40 + id_len + 2;
    let mut at = 12;
    let mut paths: Vec<String> = Vec::new();
    for _ in 0..(count as usize).min(MAX_ENTRIES) {
        let Some(flags) = b
            .get(at + fixed - 2..at + fixed)
            .map(|s| u16::from_be_bytes([s[0], s[1]]))
        else {
            break;
        };
        let extended = version == 3 && flags & 0x4000 != 0;
        let start = at + fixed + if extended { 2 } else { 0 };
        let Some(len) = b
            .get(start..)
            .and_then(|rest| rest.iter().position(|&c| c == 0))
        else {
            break;
        };
        let path = String::from_utf8_lossy(&b[start..start + len]).into_owned();
        if !path.is_empty() && paths.last() != Some(&path) {
            paths.push(path);
        }
        // Entries are padded with 1 to 8 NULs to a multiple of 8 bytes.
        let entry = start - at + len;
        at += (entry + 8) & !7;
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_seeded_repository_without_running_git() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(["-c", "user.name=a", "-c", "user.email=a@example.test"])
                .args(args)
                .current_dir(dir.path())
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .is_ok_and(|o| o.status.success());
            assert!(ok, "git {args:?}");
        };
        if super::super::git_missing() {
            return;
        }
        std::fs::create_dir(dir.path().join("docs")).expect("mkdir");
        std::fs::write(dir.path().join("docs/readme.md"), "# x\n").expect("write");
        std::fs::write(dir.path().join("a-file-with-a-longer-name.txt"), "x\n").expect("write");
        std::fs::write(dir.path().join("untracked.txt"), "x\n").expect("write");
        run(&["init", "-q", "--initial-branch=main"]);
        run(&["add", "docs", "a-file-with-a-longer-name.txt"]);
        run(&["commit", "-q", "-m", "one"]);
        run(&["branch", "fix/date-parsing"]);
        run(&["tag", "v1"]);
        run(&["remote", "add", "origin", "/nowhere.git"]);
        run(&["pack-refs", "--all"]);
        run(&["branch", "later"]);
        let repo = Repository::read(dir.path()).expect("a repository");
        assert_eq!(repo.current.as_deref(), Some("main"));
        let names: Vec<&str> = repo.branches.iter().map(|(b, _)| b.as_str()).collect();
        assert_eq!(names, ["main", "fix/date-parsing", "later"]);
        assert!(repo.head_commit().is_some_and(is_object_id));
        assert_eq!(repo.tags, ["v1"]);
        assert_eq!(repo.remotes, ["origin"]);
        assert_eq!(
            repo.tracked,
            ["a-file-with-a-longer-name.txt", "docs/readme.md"]
        );
    }

    #[test]
    fn hostile_files_stay_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let git = dir.path().join(".git");
        std::fs::create_dir_all(git.join("refs/heads")).expect("mkdir");
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").expect("write");
        std::fs::write(git.join("refs/heads/main"), "not an id\n").expect("write");
        // An index that claims many entries and ends early.
        let mut index = b"DIRC\0\0\0\x02\xff\xff\xff\xff".to_vec();
        index.extend(std::iter::repeat_n(0u8, 70));
        std::fs::write(git.join("index"), index).expect("write");
        // Links out of the repository are never followed.
        std::os::unix::fs::symlink("/etc/hostname", git.join("config")).expect("symlink");
        let repo = Repository::read(dir.path()).expect("a repository");
        assert!(repo.branches.is_empty());
        assert!(repo.tracked.is_empty());
        assert!(repo.remotes.is_empty());
        assert!(Repository::read(&dir.path().join("nowhere")).is_none());
    }
}
