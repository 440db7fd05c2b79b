//! Git repositories judged by their own model. A commit rewrites `refs/heads/<branch>` (41
//! bytes replaced), which byte-wise is an overwrite; in git's model it is history that only
//! grew. File effects inside a `.git` directory are classified again here, with the
//! repository read by the harness (gix, isolated from the environment and the user's
//! configuration; nothing the server says is used): a ref moved to a descendant of the
//! commit it named is [`FileEffectKind::RefAdvanced`]; a ref moved elsewhere (reset, amend,
//! rebase, a forced update) or a tag moved is [`FileEffectKind::RefRewound`]; git's scratch
//! files, HEAD switched between branches, refs packed (and the ref directories that
//! emptied) and loose objects that a pack still holds are
//! [`FileEffectKind::GitBookkeeping`]. A deleted branch stays a deletion. A
//! working-tree file a git command removed or replaced whose old content a branch's (or
//! HEAD's) commit holds at the same path is [`FileEffectKind::WorkTreeKept`] (a checkout
//! switched it; switching back restores it). What cannot be read (an object missing, a
//! repository that does not open) keeps its byte-wise kind.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::evidence::{FileEffect, FileEffectKind};

/// Commits visited at most to decide whether one descends from another.
const MAX_WALK: usize = 100_000;

/// Files git rewrites for itself, relative to the git directory.
const SCRATCH: &[&str] = &[
    "COMMIT_EDITMSG",
    "ORIG_HEAD",
    "FETCH_HEAD",
    "MERGE_HEAD",
    "MERGE_MSG",
    "MERGE_MODE",
    "SQUASH_MSG",
    "AUTO_MERGE",
    "CHERRY_PICK_HEAD",
    "REVERT_HEAD",
    "REBASE_HEAD",
    "BISECT_LOG",
    "gc.pid",
    "gc.log",
    "description",
    // The staging area: rewritten whole on every `git add` and status refresh.
    "index",
];

/// What a ref file holds.
#[derive(Debug, PartialEq)]
enum RefValue {
    /// `ref: refs/heads/main`.
    Symbolic(String),
    /// A commit id (hex).
    Id(String),
}

/// Classifies again the effects of `effects` that lie in a `.git` directory. `before` and
/// `after` give a file's content (kept for small files) at the start and end of the window;
/// `real_path` maps a reported path (`$WORKSPACE/repo/.git`) to where the harness reads it.
pub fn reclassify(
    effects: &mut [FileEffect],
    before: &dyn Fn(&str) -> Option<Vec<u8>>,
    after: &dyn Fn(&str) -> Option<Vec<u8>>,
    real_path: &dyn Fn(&str) -> Option<PathBuf>,
) {
    let mut repos: HashMap<String, Option<gix::Repository>> = HashMap::new();
    for effect in effects.iter_mut() {
        let Some((git_dir, rel)) = split_git_path(&effect.path) else {
            continue;
        };
        let (git_dir, rel) = (git_dir.to_string(), rel.to_string());
        let is_ref = rel == "HEAD" || rel.starts_with("refs/");
        let repo = |repos: &mut HashMap<String, Option<gix::Repository>>| {
            repos
                .entry(git_dir.clone())
                .or_insert_with(|| real_path(&git_dir).and_then(|p| open(&p)))
                .clone()
        };
        // A loose ref written over a packed one (`git pack-refs` ran before): it moved from
        // the value packed-refs held.
        if is_ref && effect.kind == FileEffectKind::Created {
            let packed = before(&format!("{git_dir}/packed-refs")).map(|b| packed_refs(&b));
            let old = packed.as_ref().and_then(|p| p.get(&rel)).cloned();
            if let (Some(old), Some(RefValue::Id(new))) =
                (old, after(&effect.path).and_then(|b| parse_ref(&b)))
            {
                if let Some(kind) = ref_moved(&rel, &old, &new, repo(&mut repos).as_ref()) {
                    effect.kind = kind;
                }
            }
            continue;
        }
        let changed_or_gone = matches!(
            effect.kind,
            FileEffectKind::Overwritten
                | FileEffectKind::Truncated
                | FileEffectKind::Deleted
                | FileEffectKind::Replaced
        );
        if !changed_or_gone {
            continue;
        }
        if SCRATCH.contains(&rel.as_str()) || rel.ends_with(".lock") {
            effect.kind = FileEffectKind::GitBookkeeping;
            effect.database = false;
            continue;
        }
        if is_ref && effect.kind == FileEffectKind::Overwritten {
            let (Some(old), Some(new)) = (
                before(&effect.path).and_then(|b| parse_ref(&b)),
                after(&effect.path).and_then(|b| parse_ref(&b)),
            ) else {
                continue;
            };
            match (old, new) {
                (RefValue::Symbolic(_), RefValue::Symbolic(_)) => {
                    effect.kind = FileEffectKind::GitBookkeeping;
                }
                (RefValue::Id(a), RefValue::Id(b)) => {
                    if let Some(kind) = ref_moved(&rel, &a, &b, repo(&mut repos).as_ref()) {
                        effect.kind = kind;
                    }
                }
                _ => {}
            }
            continue;
        }
        if rel == "packed-refs"
            && matches!(
                effect.kind,
                FileEffectKind::Overwritten | FileEffectKind::Truncated
            )
        {
            let (Some(old), Some(new)) = (before(&effect.path), after(&effect.path)) else {
                continue;
            };
            let (old, new) = (packed_refs(&old), packed_refs(&new));
            let loose_now = |name: &str| {
                real_path(&format!("{git_dir}/{name}"))
                    .and_then(|p| std::fs::read(p).ok())
                    .and_then(|b| parse_ref(&b))
            };
            let r = repo(&mut repos);
            let mut verdict: Option<FileEffectKind> = Some(FileEffectKind::GitBookkeeping);
            for (name, id) in &old {
                let now = new.get(name).cloned().or_else(|| match loose_now(name) {
                    Some(RefValue::Id(id)) => Some(id),
                    _ => None,
                });
                let step = match now {
                    Some(n) if n == *id => continue,
                    None => None,
                    Some(n) => ref_moved(name, id, &n, r.as_ref()),
                };
                match step {
                    // A ref deleted, or one whose move cannot be read: the byte-wise kind.
                    None => {
                        verdict = None;
                        break;
                    }
                    Some(k @ FileEffectKind::RefRewound { .. }) => {
                        verdict = Some(k);
                        break;
                    }
                    Some(k) => verdict = Some(k),
                }
            }
            if let Some(k) = verdict {
                effect.kind = k;
            }
            continue;
        }
        // A directory of refs emptied by `git pack-refs` (`refs/heads/fix/`, `refs/remotes/
        // origin/`): it held no data of its own; each ref file in it is judged on its own.
        if is_ref
            && effect.kind == FileEffectKind::Deleted
            && effect.object == crate::evidence::observation::ObjectKind::Dir
        {
            effect.kind = FileEffectKind::GitBookkeeping;
            continue;
        }
        if is_ref && effect.kind == FileEffectKind::Deleted {
            // `git pack-refs`: the loose ref went into packed-refs, at the same commit or a
            // later one.
            let (Some(RefValue::Id(old)), Some(packed)) = (
                before(&effect.path).and_then(|b| parse_ref(&b)),
                after(&format!("{git_dir}/packed-refs")).or_else(|| {
                    real_path(&format!("{git_dir}/packed-refs")).and_then(|p| std::fs::read(p).ok())
                }),
            ) else {
                continue;
            };
            if let Some(now) = packed_refs(&packed).get(&rel) {
                let forward = *now == old
                    || repo(&mut repos).and_then(|r| descends(&r, &old, now)) == Some(true);
                if forward {
                    effect.kind = FileEffectKind::GitBookkeeping;
                }
            }
            continue;
        }
        if effect.kind == FileEffectKind::Deleted {
            // A loose object removed once a pack holds it (`git gc`).
            if let Some(id) = loose_object_id(&rel) {
                let packed = repo(&mut repos).is_some_and(|r| {
                    gix::ObjectId::from_hex(id.as_bytes()).is_ok_and(|id| r.has_object(id))
                });
                if packed {
                    effect.kind = FileEffectKind::GitBookkeeping;
                }
            }
        }
    }
}

/// `$WORKSPACE/repo/.git/refs/heads/main` → (`$WORKSPACE/repo/.git`, `refs/heads/main`).
fn split_git_path(path: &str) -> Option<(&str, &str)> {
    let at = path.find("/.git/")?;
    Some((&path[..at + 5], &path[at + 6..]))
}

/// The git directory at `path`, opened without the environment or any configuration but
/// its own.
/// Working-tree files that a git command removed or replaced in a window where the git
/// directory changed too: the old content (kept by the snapshot for small files) is looked up
/// at the same path in the commits HEAD and the local branches name; where one holds exactly
/// that content the effect becomes [`FileEffectKind::WorkTreeKept`]. A blob git merely has
/// (written just before the deletion, or staged) does not count: only a branch's commit keeps
/// content for good.
pub fn reclassify_worktree(
    effects: &mut [FileEffect],
    before: &dyn Fn(&str) -> Option<Vec<u8>>,
    real_path: &dyn Fn(&str) -> Option<PathBuf>,
) {
    let mut repos: HashMap<String, Option<gix::Repository>> = HashMap::new();
    for effect in effects.iter_mut() {
        let was_deleted = match effect.kind {
            FileEffectKind::Deleted => true,
            FileEffectKind::Overwritten | FileEffectKind::Truncated => false,
            _ => continue,
        };
        if effect.path.contains("/.git/") || effect.object != crate::evidence::ObjectKind::File {
            continue;
        }
        // The nearest directory above the file that holds a `.git` directory.
        let Some(root) = effect
            .path
            .match_indices('/')
            .map(|(i, _)| &effect.path[..i])
            .rev()
            .find(|dir| real_path(&format!("{dir}/.git")).is_some_and(|p| p.is_dir()))
            .map(str::to_string)
        else {
            continue;
        };
        let Some(old) = before(&effect.path) else {
            continue;
        };
        let repo = repos
            .entry(root.clone())
            .or_insert_with(|| real_path(&format!("{root}/.git")).and_then(|p| open(&p)));
        let Some(repo) = repo.as_ref() else { continue };
        let rel = &effect.path[root.len() + 1..];
        if let Some(reference) = holder_of(repo, rel, &old) {
            effect.kind = FileEffectKind::WorkTreeKept {
                was_deleted,
                reference,
            };
        }
    }
}

/// The ref (HEAD or a local branch) whose commit holds `content` at `rel`, if one does.
fn holder_of(repo: &gix::Repository, rel: &str, content: &[u8]) -> Option<String> {
    let blob =
        gix::objs::compute_hash(repo.object_hash(), gix::object::Kind::Blob, content).ok()?;
    let holds = |mut r: gix::Reference<'_>| -> bool {
        r.peel_to_commit()
            .ok()
            .and_then(|c| c.tree().ok())
            .and_then(|t| t.lookup_entry_by_path(rel).ok().flatten())
            .is_some_and(|e| e.oid() == blob)
    };
    if let Ok(head) = repo.find_reference("HEAD") {
        if holds(head) {
            return Some("HEAD".into());
        }
    }
    let refs = repo.references().ok()?;
    let branches = refs.local_branches().ok()?;
    for r in branches.flatten() {
        let name = r.name().as_bstr().to_string();
        if holds(r) {
            return Some(name);
        }
    }
    None
}

fn open(path: &Path) -> Option<gix::Repository> {
    gix::open_opts(path, gix::open::Options::isolated()).ok()
}

/// How ref `rel` moving from commit `old` to commit `new` is judged: unchanged is
/// bookkeeping, a tag that moved or a branch moved to a non-descendant is rewound, a branch
/// moved to a descendant advanced; `None` when `repo` cannot tell.
fn ref_moved(
    rel: &str,
    old: &str,
    new: &str,
    repo: Option<&gix::Repository>,
) -> Option<FileEffectKind> {
    if old == new {
        return Some(FileEffectKind::GitBookkeeping);
    }
    let forward = if rel.starts_with("refs/tags/") {
        false
    } else {
        descends(repo?, old, new)?
    };
    Some(moved(forward, old, new))
}

fn moved(forward: bool, from: &str, to: &str) -> FileEffectKind {
    let short = |s: &str| s.chars().take(12).collect::<String>();
    if forward {
        FileEffectKind::RefAdvanced {
            from: short(from),
            to: short(to),
        }
    } else {
        FileEffectKind::RefRewound {
            from: short(from),
            to: short(to),
        }
    }
}

fn parse_ref(bytes: &[u8]) -> Option<RefValue> {
    let text = std::str::from_utf8(bytes).ok()?.trim();
    if let Some(target) = text.strip_prefix("ref:") {
        return Some(RefValue::Symbolic(target.trim().to_string()));
    }
    is_hex_id(text).then(|| RefValue::Id(text.to_ascii_lowercase()))
}

fn is_hex_id(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The refs of a `packed-refs` file: name → id (peeled lines and comments skipped).
fn packed_refs(bytes: &[u8]) -> HashMap<String, String> {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('^'))
        .filter_map(|l| {
            let (id, name) = l.split_once(' ')?;
            is_hex_id(id).then(|| (name.trim().to_string(), id.to_ascii_lowercase()))
        })
        .collect()
}

/// `objects/ab/cdef…` → `abcdef…`.
fn loose_object_id(rel: &str) -> Option<String> {
    let rest = rel.strip_prefix("objects/")?;
    let (dir, file) = rest.split_once('/')?;
    let id = format!("{dir}{file}");
    (dir.len() == 2 && is_hex_id(&id)).then_some(id)
}

/// Whether commit `descendant` has `ancestor` among its ancestors (or is it); `None` when
/// the walk cannot tell (an object missing or unreadable, or the walk's bound reached).
fn descends(repo: &gix::Repository, ancestor: &str, descendant: &str) -> Option<bool> {
    let ancestor = gix::ObjectId::from_hex(ancestor.as_bytes()).ok()?;
    let start = gix::ObjectId::from_hex(descendant.as_bytes()).ok()?;
    let mut seen = std::collections::HashSet::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(id) = queue.pop_front() {
        if id == ancestor {
            return Some(true);
        }
        if !seen.insert(id) {
            continue;
        }
        if seen.len() > MAX_WALK {
            return None;
        }
        let commit = repo.find_commit(id).ok()?;
        queue.extend(commit.parent_ids().map(|p| p.detach()));
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_and_paths_are_read() {
        assert_eq!(
            split_git_path("$WORKSPACE/r/.git/refs/heads/main"),
            Some(("$WORKSPACE/r/.git", "refs/heads/main"))
        );
        assert_eq!(split_git_path("$WORKSPACE/r/git/x"), None);
        assert_eq!(
            parse_ref(b"ref: refs/heads/main\n"),
            Some(RefValue::Symbolic("refs/heads/main".into()))
        );
        let id = "a".repeat(40);
        assert_eq!(
            parse_ref(format!("{id}\n").as_bytes()),
            Some(RefValue::Id(id.clone()))
        );
        assert_eq!(parse_ref(b"garbage"), None);
        let packed = format!("# pack-refs with: peeled\n{id} refs/heads/main\n^{id}\n");
        assert_eq!(
            packed_refs(packed.as_bytes()).get("refs/heads/main"),
            Some(&id)
        );
        assert_eq!(
            loose_object_id(&format!("objects/aa/{}", "b".repeat(38))),
            Some(format!("aa{}", "b".repeat(38)))
        );
        assert_eq!(loose_object_id("objects/pack/x.pack"), None);
    }
}
