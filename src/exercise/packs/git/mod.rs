//! Git: tools about a repository's history (`git_diff`, `create_branch`, `git_checkout`).
//! Values: for tools whose name speaks of branches, commits, diffs, merges or revisions, a
//! branch is `main` (the seeded repository's branch) or, for a tool that creates one, the
//! run's new branch name; a revision (`rev`, `ref`, `commit`, `sha`, a tool's `target` or
//! `base`) of a tool about revisions, or one its description calls a commit or branch, is
//! `HEAD` (the value pool's branches and commits of the seeded repository, and those a
//! listing gave, come first); a file whose history a tool reads (blame, log, show) is one
//! the repository tracks; what a clone copies (its `url`, `source`, `remote`) is the seeded
//! repository itself, by its path (a clone needs no network then).

use serde_json::Value;

use super::{Pack, Stage};
use crate::exercise::semantics::{Intent, ParamWords, Semantics};

/// The pack.
pub const PACK: Pack = Pack {
    name: "git",
    about: "version control: branches, commits and revisions of the seeded repository",
    rules: &[],
    choose: Some(choose),
    notation: None,
    entities: &["branch"],
    contexts: &[],
};

/// Words of tool names about version control.
const REVISION_TOOL_WORDS: &[&str] = &[
    "git", "branch", "commit", "checkout", "diff", "revision", "merge", "rebase",
];

/// Words of tool names about one file's history.
const HISTORY_TOOL_WORDS: &[&str] = &["blame", "annotate", "log", "history", "show"];

/// A branch or a revision of the seeded repository.
fn choose(stage: Stage, s: &Semantics, p: &ParamWords, _name: &str, hint: &str) -> Option<Value> {
    // What a clone copies (its address, not where the copy goes).
    if stage == Stage::Address {
        let clones = s.tool_words.iter().any(|w| w == "clone");
        let source = p.has(&["url", "uri", "source", "remote", "from"])
            && !p.has(&[
                "dest",
                "destination",
                "target",
                "to",
                "into",
                "dir",
                "directory",
            ]);
        return (clones && source).then(|| s.abs(""));
    }
    if stage != Stage::Place {
        return None;
    }
    let on_revisions = s
        .tool_words
        .iter()
        .any(|w| REVISION_TOOL_WORDS.contains(&w.as_str()));
    let text = |v: &str| Some(Value::String(v.to_string()));
    // The seeded workspace is a git repository on branch `main`.
    if on_revisions && p.has(&["branch"]) && matches!(p.last(), "branch" | "name") {
        return text(if s.intent == Intent::Create {
            s.facts.vocab.branch
        } else {
            "main"
        });
    }
    // A file whose history is read: one the repository tracks (an untracked draft has none).
    let history = s
        .tool_words
        .iter()
        .any(|w| HISTORY_TOOL_WORDS.contains(&w.as_str()));
    if history
        && matches!(p.last(), "file" | "path" | "filepath" | "filename")
        && !p.has(&["dir", "directory", "repo", "repository", "root"])
        && crate::exercise::semantics::described_directory(hint).is_none()
    {
        if let Some(file) = s.facts.repository.as_ref().and_then(|r| {
            r.tracked
                .iter()
                .find(|f| f.ends_with(".txt") || f.ends_with(".md"))
                .or(r.tracked.first())
        }) {
            return Some(s.abs(file));
        }
    }
    // `ref` of a PDF tool is no revision: only a tool about revisions, or a parameter its
    // description calls one.
    let described = {
        let h = hint.to_ascii_lowercase();
        ["commit", "revision", "branch"]
            .iter()
            .any(|w| h.contains(w))
            && !["file path", "path to", "url"]
                .iter()
                .any(|w| h.contains(w))
    };
    if (p.has(&["revision", "rev", "ref", "commit", "sha", "treeish"])
        && (on_revisions || described))
        || (on_revisions && p.has(&["target", "base"]))
    {
        return text("HEAD");
    }
    None
}
