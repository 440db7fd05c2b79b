//! The call plan: which tools are called, in which order, with which arguments. Tools that
//! declare `readOnlyHint: true` go first, additive ones (`destructiveHint: false`) next and the
//! rest last, so that one tool's deletions do not starve another of its inputs. Tools that
//! require task-augmented calls are skipped with that reason. Each tool gets a short list of
//! candidate argument sets, tried in turn while the tool answers with an error: values chosen
//! by meaning with only the required properties, then with every property, then with meaning
//! winning over the schema's defaults, then plain schema-driven values with other seeds. User overrides (`--args`) are merged over every
//! candidate.

use std::collections::BTreeMap;

use serde_json::Value;

use super::packs::Packs;
use super::semantics::{Semantics, WorkspaceFacts};
use super::synth::synthesize_arguments;
use crate::mcp::tool::ToolDecl;

/// One planned tool.
#[derive(Debug, Clone)]
pub struct PlannedTool {
    /// Index into the inventory.
    pub tool_index: usize,
    /// The argument sets to try, in order, while calls fail (at least one; all distinct).
    /// The repeats reuse exactly the set of the first successful call.
    pub candidates: Vec<Value>,
    /// Synthesis notes (of the first candidate).
    pub notes: Vec<String>,
    /// Argument names that came from an override.
    pub overridden: Vec<String>,
    /// Why the tool is not called, if it is not.
    pub skip: Option<String>,
}

impl PlannedTool {
    /// The first candidate.
    pub fn arguments(&self) -> &Value {
        &self.candidates[0]
    }
}

/// Orders the tools and builds up to `max_candidates` argument sets for each.
pub fn plan(
    tools: &[ToolDecl],
    seed: u64,
    overrides: &BTreeMap<String, Value>,
    workspace: Option<&WorkspaceFacts>,
    max_candidates: usize,
) -> Vec<PlannedTool> {
    let all = Packs::all();
    let packs = workspace.map_or(&all, |w| &w.packs);
    let mut order: Vec<usize> = (0..tools.len()).collect();
    order.sort_by_key(|&i| {
        let h = &tools[i].hints;
        // Session set-up (a working directory, a project) before everything that needs it.
        let rank = if is_session_setup(&tools[i], packs) {
            -1
        } else if h.read_only.declared() == Some(true) {
            0
        } else if h.destructive.declared() == Some(false) {
            1
        } else {
            2
        };
        // Within a rank, tools that read go first, then those that add, then the rest, then
        // those that change or remove: staging runs before committing.
        let intent = match super::semantics::Intent::of(&tools[i]) {
            super::semantics::Intent::Read => 0,
            super::semantics::Intent::Create => 1,
            super::semantics::Intent::Unknown | super::semantics::Intent::Modify
                if removes(&tools[i]) =>
            {
                4
            }
            super::semantics::Intent::Unknown => 2,
            super::semantics::Intent::Modify => 3,
        };
        // Removers go last-listed first: servers list a thing's tools after those of what it
        // builds on (a table, then its slicer), so removing in reverse frees each thing
        // before what it depends on. Those that remove everything (`clear_all_tasks`, or
        // with nothing to name) go after the ones that remove one thing.
        let (bulk, position) = if intent == 4 {
            (removes_everything(&tools[i]), tools.len() - i)
        } else {
            (false, i)
        };
        (rank, intent, bulk, position)
    });
    order
        .into_iter()
        .map(|i| {
            let tool = &tools[i];
            let skip = (tool.task_support.as_deref() == Some("required"))
                .then(|| "execution.taskSupport is \"required\": the tool can only be called as a task, which hintcheck does not do".to_string());
            let meaning = workspace.map(|w| Semantics::new(w, tool));
            let meaning_over_defaults = meaning.as_ref().map(Semantics::over_defaults);
            // (seed offset, values by meaning, every property)
            let variants = [
                (0, meaning.as_ref(), false),
                (0, meaning.as_ref(), true),
                (0, meaning_over_defaults.as_ref(), true),
                (1, None, false),
                (2, None, true),
            ];
            let mut candidates: Vec<Value> = Vec::new();
            let mut notes = Vec::new();
            let mut overridden = Vec::new();
            for (k, (offset, semantics, fill)) in variants.into_iter().enumerate() {
                if candidates.len() >= max_candidates.max(1) {
                    break;
                }
                let synthesis = synthesize_arguments(
                    &tool.input_schema,
                    seed.wrapping_add(offset),
                    &tool.name,
                    semantics,
                    fill,
                );
                if k == 0 {
                    notes = synthesis.notes;
                }
                let (arguments, names) = with_overrides(synthesis.arguments, overrides.get(&tool.name));
                overridden = names;
                if !candidates.contains(&arguments) {
                    candidates.push(arguments);
                }
            }
            PlannedTool {
                tool_index: i,
                candidates,
                notes,
                overridden,
                skip,
            }
        })
        .collect()
}

/// Whether `tool`'s name says it removes things (`delete_task`, `removeEntity`, `clear_all`,
/// `kill_process`): such tools run after the others of their rank, so that what they remove
/// was there for the rest.
pub fn removes(tool: &ToolDecl) -> bool {
    const VERBS: &[&str] = &[
        "delete",
        "remove",
        "rm",
        "drop",
        "clear",
        "destroy",
        "purge",
        "kill",
        "terminate",
        "erase",
        "wipe",
        "truncate",
        "reset",
        "unlink",
        "uninstall",
    ];
    super::semantics::words(&tool.name)
        .iter()
        .any(|w| VERBS.contains(&w.as_str()))
}

/// Whether `tool` sets up a session the other tools work in: a working or project
/// directory, an active project, workspace or repository, a selected database, or a context
/// a pack in force names (`set_working_dir`, `activate_project`, `use_database`,
/// `change_directory`; `open_vault` with the notes pack).
pub fn is_session_setup(tool: &ToolDecl, packs: &Packs) -> bool {
    const VERBS: &[&str] = &[
        "set",
        "change",
        "switch",
        "select",
        "use",
        "activate",
        "open",
        "load",
        "init",
        "initialize",
        "connect",
        "cd",
        "chdir",
        "enter",
        "choose",
        "register",
        "mount",
    ];
    const OBJECTS: &[&str] = &[
        "working",
        "workdir",
        "cwd",
        "dir",
        "directory",
        "project",
        "workspace",
        "root",
        "database",
        "db",
        "repo",
        "repository",
        "folder",
        "context",
    ];
    const NOT: &[&str] = &[
        "delete", "remove", "drop", "close", "create", "new", "list", "get", "read",
    ];
    let ws = super::semantics::words(&tool.name);
    let has = |list: &[&str]| ws.iter().any(|w| list.contains(&w.as_str()));
    if has(NOT) {
        return false;
    }
    let context = has(OBJECTS) || packs.contexts().any(|c| ws.iter().any(|w| w == c));
    // The verb leads the name, or follows the server's prefix (`git_set_working_dir`).
    let verb_first = ws
        .iter()
        .take(if ws.len() > 2 { 2 } else { 1 })
        .any(|w| VERBS.contains(&w.as_str()));
    if verb_first && context {
        return true;
    }
    matches!(ws.as_slice(), [w] if w == "cd" || w == "chdir")
}

/// Merges a user override over synthesized arguments; returns them with the overridden names
/// (`*` when the override replaced the whole value).
fn with_overrides(mut arguments: Value, over: Option<&Value>) -> (Value, Vec<String>) {
    let mut names = Vec::new();
    match (over, &mut arguments) {
        (None, _) => {}
        (Some(Value::Object(over)), Value::Object(args)) => {
            for (k, v) in over {
                args.insert(k.clone(), v.clone());
                names.push(k.clone());
            }
        }
        (Some(other), _) => {
            arguments = other.clone();
            names.push("*".into());
        }
    }
    (arguments, names)
}

/// An argument set aimed at another directory: values by meaning over `facts` (a directory
/// the server said it allows), with every property, overrides merged.
pub fn steered_candidate(
    tool: &ToolDecl,
    seed: u64,
    overrides: &BTreeMap<String, Value>,
    facts: &WorkspaceFacts,
) -> Value {
    kind_candidate(tool, seed, overrides, facts, None, false, false).swap_remove(0)
}

/// Argument sets over `facts`, by meaning, overrides merged: required properties only, then
/// every property (at least one set). Paths are files of kind `kind` (an extension an error
/// asked for: "must point to an Excel file (.xlsx)"), existing files with `existing`, and
/// relative to the workspace with `relative`.
#[allow(clippy::too_many_arguments)]
pub fn kind_candidate(
    tool: &ToolDecl,
    seed: u64,
    overrides: &BTreeMap<String, Value>,
    facts: &WorkspaceFacts,
    kind: Option<&'static str>,
    existing: bool,
    relative: bool,
) -> Vec<Value> {
    let mut semantics = Semantics::new(facts, tool);
    if relative {
        semantics = semantics.with_relative_paths();
    }
    if let Some(kind) = kind {
        semantics = semantics.with_file_kind(kind);
    }
    if existing {
        semantics = semantics.with_existing_files();
    }
    let mut out: Vec<Value> = Vec::new();
    // Required properties only, then every property.
    for fill in [false, true] {
        let synthesis =
            synthesize_arguments(&tool.input_schema, seed, &tool.name, Some(&semantics), fill);
        let c = with_overrides(synthesis.arguments, overrides.get(&tool.name)).0;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    out
}

/// Whether remover `tool` removes everything of its kind: its name says all
/// (`clear_all_tasks`, `delete_everything`) or it takes nothing required to name a thing.
fn removes_everything(tool: &ToolDecl) -> bool {
    let named_all = super::semantics::words(&tool.name)
        .iter()
        .any(|w| matches!(w.as_str(), "all" | "everything"));
    let names_nothing = tool
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(|r| r.is_empty());
    named_all || names_nothing
}

/// Directories named in an error text that lie inside `within` (the workspace) and are neither
/// `current` nor one of its ancestors: where a server that refused a path says it would accept one ("… not in
/// /tmp/…/workspace/docs"). Only directories inside the workspace are ever proposed.
pub fn allowed_dirs_in(
    text: &str,
    within: &std::path::Path,
    current: &std::path::Path,
) -> Vec<std::path::PathBuf> {
    let mut out: Vec<std::path::PathBuf> = Vec::new();
    for token in text.split(|c: char| {
        c.is_whitespace() || matches!(c, ',' | ';' | '"' | '\'' | '(' | ')' | '[' | ']')
    }) {
        let token = token.trim_end_matches(['.', ':']);
        if !token.starts_with('/') {
            continue;
        }
        let path = std::path::PathBuf::from(token);
        if path.starts_with(within)
            // The current root or one of its ancestors would contain the refused path anyway.
            && !current.starts_with(&path)
            && path.is_dir()
            && !out.contains(&path)
        {
            out.push(path);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool::parse_tool;
    use serde_json::json;

    #[test]
    fn removers_go_last_listed_first_and_those_that_remove_everything_last() {
        let named = json!({"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}});
        let tools: Vec<ToolDecl> = [
            json!({"name": "delete_table", "inputSchema": named}),
            json!({"name": "clear_all_items", "inputSchema": named}),
            json!({"name": "delete_slicer", "inputSchema": named}),
            json!({"name": "reset", "inputSchema": {"type": "object"}}),
            json!({"name": "add_slicer", "inputSchema": named}),
        ]
        .iter()
        .enumerate()
        .map(|(i, v)| parse_tool(v, i).expect("tool"))
        .collect();
        let order: Vec<&str> = plan(&tools, 1, &BTreeMap::new(), None, 1)
            .iter()
            .map(|p| tools[p.tool_index].name.as_str())
            .collect();
        assert_eq!(
            order,
            [
                "add_slicer",
                "delete_slicer",
                "delete_table",
                "reset",
                "clear_all_items"
            ]
        );
    }

    #[test]
    fn read_only_first_then_additive_then_the_rest_and_overrides_win() {
        let tools: Vec<ToolDecl> = [
            json!({"name":"wipe","inputSchema":{"type":"object"}}),
            json!({"name":"add","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false}}),
            json!({"name":"read","inputSchema":{"type":"object","required":["p"],"properties":{"p":{"type":"string"}}},"annotations":{"readOnlyHint":true}}),
            json!({"name":"task","inputSchema":{"type":"object"},"execution":{"taskSupport":"required"}}),
        ]
        .iter()
        .enumerate()
        .map(|(i, t)| parse_tool(t, i).expect("tool"))
        .collect();
        let overrides = BTreeMap::from([("read".to_string(), json!({"p": "given.txt"}))]);
        let p = plan(&tools, 0, &overrides, None, 4);
        let names: Vec<&str> = p
            .iter()
            .map(|x| tools[x.tool_index].name.as_str())
            .collect();
        assert_eq!(names, ["read", "add", "task", "wipe"]);
        assert_eq!(p[0].arguments(), &json!({"p": "given.txt"}));
        // Every candidate carries the override; they are distinct.
        assert!(p[0].candidates.iter().all(|c| c["p"] == "given.txt"));
        let mut distinct = p[0].candidates.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), p[0].candidates.len());
        assert_eq!(p[0].overridden, ["p"]);
        assert!(p[2].skip.is_some());
    }

    #[test]
    fn allowed_directories_come_only_from_inside_the_workspace() {
        let w = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(w.path().join("docs")).expect("mkdir");
        let docs = w.path().join("docs");
        let text = format!(
            "Access denied - path outside allowed directories: {0}/notes.txt not in {1}, also /etc and {0}.",
            w.path().display(),
            docs.display()
        );
        assert_eq!(
            allowed_dirs_in(&text, w.path(), w.path()),
            vec![docs.clone()]
        );
        // The current root is not proposed again; nothing outside the workspace ever is.
        assert!(allowed_dirs_in(&text, w.path(), &docs).is_empty());
        assert!(allowed_dirs_in("not in /etc", w.path(), w.path()).is_empty());
    }

    #[test]
    fn candidates_fill_optional_properties_and_respect_the_bound() {
        let tool = parse_tool(
            &json!({"name":"fetch","inputSchema":{"type":"object","properties":{"url":{"type":"string"}}}}),
            0,
        )
        .expect("tool");
        let facts = WorkspaceFacts::default();
        let p = plan(
            std::slice::from_ref(&tool),
            0,
            &BTreeMap::new(),
            Some(&facts),
            4,
        );
        assert_eq!(p[0].candidates[0], json!({}));
        assert_eq!(
            p[0].candidates[1],
            json!({"url": crate::exercise::semantics::TEST_URL})
        );
        assert!(p[0].candidates.len() >= 3, "{:?}", p[0].candidates);
        let one = plan(
            std::slice::from_ref(&tool),
            0,
            &BTreeMap::new(),
            Some(&facts),
            1,
        );
        assert_eq!(one[0].candidates.len(), 1);
    }
}
