//! Git: tools about a repository's history (`git_diff`, `create_branch`, `git_checkout`).
//! Values: for tools whose name speaks of branches, commits, diffs, merges or revisions, a
//! branch is `main` (the seeded repository's branch) or, for a tool that creates one, the
//! run's new branch name; a revision (`rev`, `ref`, `commit`, `sha`, a tool's `target` or
//! `base`) is `HEAD`; what a clone copies (its `url`, `source`, `repo`) is the seeded
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
    if stage != Stage::Place {
        return None;
    }
    let on_revisions = s
        .tool_words
        .iter()
        .any(|w| REVISION_TOOL_WORDS.contains(&w.as_str()));
    let text = |v: &str| Some(Value::String(v.to_string()));
    let clones = s.tool_words.iter().any(|w| w == "clone");
    if clones
        && p.has(&[
            "url",
            "uri",
            "source",
            "repo",
            "repository",
            "remote",
            "from",
        ])
    {
        return Some(s.abs(""));
    }
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
