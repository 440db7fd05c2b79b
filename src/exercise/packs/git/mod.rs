//! Git: tools about a repository's history (`git_diff`, `create_branch`, `git_checkout`).
//! Values: for tools whose name speaks of branches, commits, diffs, merges or revisions, a
//! branch is `main` (the seeded repository's branch) or, for a tool that creates one, the
//! run's new branch name; a revision (`rev`, `ref`, `commit`, `sha`, a tool's `target` or
//! `base`) is `HEAD`; what a clone copies (its `url`, `source`, `remote`) is the seeded
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

/// A branch or a revision of the seeded repository.
fn choose(stage: Stage, s: &Semantics, p: &ParamWords, _name: &str, _hint: &str) -> Option<Value> {
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
    if p.has(&["revision", "rev", "ref", "commit", "sha", "treeish"])
        || (on_revisions && p.has(&["target", "base"]))
    {
        return text("HEAD");
    }
    None
}
