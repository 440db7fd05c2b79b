//! Values chosen by meaning: a parameter named like a path gets a path inside the scratch
//! workspace (an existing file for tools that read or change, a fresh name for tools that
//! create), a URL gets an address under a reserved test domain (so the network observer sees
//! the attempt), text to replace gets a word the seeded files contain. Only plain strings are
//! chosen this way: an `enum`, `const`, `pattern`, `format` or `default` always wins.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::mcp::tool::ToolDecl;

/// What the workspace holds, for choosing paths.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceFacts {
    /// The workspace's absolute path (as the server sees it).
    pub root: PathBuf,
    /// Existing files, relative to the root.
    pub files: Vec<String>,
    /// Existing directories, relative to the root.
    pub dirs: Vec<String>,
}

impl WorkspaceFacts {
    /// Lists a workspace (bounded).
    pub fn scan(root: &Path) -> WorkspaceFacts {
        let mut facts = WorkspaceFacts {
            root: root.to_path_buf(),
            ..Default::default()
        };
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
                continue;
            };
            let mut names: Vec<_> = entries.flatten().collect();
            names.sort_by_key(|e| e.file_name());
            for e in names {
                let r = rel.join(e.file_name());
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_dir() && facts.dirs.len() < 200 {
                    facts.dirs.push(r.display().to_string());
                    stack.push(r);
                } else if ft.is_file() && facts.files.len() < 200 {
                    facts.files.push(r.display().to_string());
                }
            }
        }
        facts.files.sort();
        facts.dirs.sort();
        facts
    }
}

/// What a tool seems to do with its paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    /// Reads, lists, searches.
    Read,
    /// Creates or writes new things.
    Create,
    /// Changes, moves or deletes existing things.
    Modify,
    /// Cannot tell.
    Unknown,
}

fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in s.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase();
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl Intent {
    /// From the tool's name (first) and description.
    pub fn of(tool: &ToolDecl) -> Intent {
        const READ: &[&str] = &[
            "read", "get", "list", "show", "view", "search", "find", "info", "stat", "tree", "cat",
            "open", "query", "describe", "inspect", "log", "status", "diff",
        ];
        const CREATE: &[&str] = &[
            "write", "create", "save", "new", "make", "mkdir", "add", "put", "upload", "touch",
            "init", "generate",
        ];
        const MODIFY: &[&str] = &[
            "edit", "update", "append", "move", "rename", "delete", "remove", "copy", "replace",
            "patch", "commit", "reset", "checkout",
        ];
        let classify = |ws: &[String]| -> Option<Intent> {
            for w in ws {
                if CREATE.contains(&w.as_str()) {
                    return Some(Intent::Create);
                }
                if MODIFY.contains(&w.as_str()) {
                    return Some(Intent::Modify);
                }
                if READ.contains(&w.as_str()) {
                    return Some(Intent::Read);
                }
            }
            None
        };
        classify(&words(&tool.name))
            .or_else(|| {
                tool.description
                    .as_deref()
                    .and_then(|d| classify(&words(d).into_iter().take(12).collect::<Vec<_>>()))
            })
            .unwrap_or(Intent::Unknown)
    }
}

/// Words in a tool's name that make a bare `path` parameter a directory.
const DIRECTORY_TOOL_WORDS: &[&str] = &[
    "dir",
    "directory",
    "directories",
    "folder",
    "folders",
    "mkdir",
    "tree",
    "ls",
    "search",
    "find",
    "list",
    "glob",
    "grep",
    "walk",
];

/// Meaning-based values for one tool.
#[derive(Debug, Clone)]
pub struct Semantics {
    facts: WorkspaceFacts,
    intent: Intent,
    /// The tool's name says it works on directories (`list_directory`, `mkdir`).
    on_directories: bool,
}

impl Semantics {
    /// For `tool`, over `facts`.
    pub fn new(facts: &WorkspaceFacts, tool: &ToolDecl) -> Semantics {
        Semantics {
            facts: facts.clone(),
            intent: Intent::of(tool),
            on_directories: words(&tool.name)
                .iter()
                .any(|w| DIRECTORY_TOOL_WORDS.contains(&w.as_str())),
        }
    }

    fn abs(&self, rel: &str) -> Value {
        Value::String(self.facts.root.join(rel).display().to_string())
    }

    fn existing_file(&self) -> Value {
        let pick = self
            .facts
            .files
            .iter()
            .find(|f| f.ends_with(".txt"))
            .or_else(|| self.facts.files.first());
        match pick {
            Some(f) => self.abs(f),
            None => self.abs("hintcheck-missing.txt"),
        }
    }

    fn existing_dir(&self) -> Value {
        Value::String(self.facts.root.display().to_string())
    }

    /// A value for property `name` whose (flattened) schema is `schema`, if its meaning is clear.
    pub fn value_for(&self, name: &str, schema: &Map<String, Value>) -> Option<Value> {
        const PLAIN_KEYS: &[&str] = &[
            "type",
            "description",
            "title",
            "minLength",
            "maxLength",
            "$comment",
        ];
        let plain_string = schema.get("type").and_then(Value::as_str) == Some("string")
            && schema.keys().all(|k| PLAIN_KEYS.contains(&k.as_str()));
        if !plain_string {
            return None;
        }
        let fits = |v: &Value| {
            let len = v.as_str().map_or(0, |s| s.chars().count()) as u64;
            schema
                .get("minLength")
                .and_then(Value::as_u64)
                .is_none_or(|m| len >= m)
                && schema
                    .get("maxLength")
                    .and_then(Value::as_u64)
                    .is_none_or(|m| len <= m)
        };
        self.choose(name).filter(fits)
    }

    fn choose(&self, name: &str) -> Option<Value> {
        let ws = words(name);
        let has = |list: &[&str]| ws.iter().any(|w| list.contains(&w.as_str()));
        let last = ws.last().map(String::as_str).unwrap_or("");
        if has(&["url", "uri", "link", "href", "endpoint", "website"]) {
            return Some(Value::String("https://example.test/hintcheck".into()));
        }
        let pathish = [
            "path",
            "file",
            "filename",
            "filepath",
            "dir",
            "directory",
            "folder",
            "root",
            "source",
            "src",
            "destination",
            "dest",
            "target",
            "location",
            "cwd",
            "repo",
            "repository",
        ];
        if pathish.contains(&last) || (ws.len() == 1 && has(&pathish)) {
            let dirish = has(&[
                "dir",
                "directory",
                "folder",
                "root",
                "cwd",
                "repo",
                "repository",
            ]) || (self.on_directories && !has(&["file", "filename", "filepath"]));
            let fresh = has(&[
                "destination",
                "dest",
                "target",
                "new",
                "to",
                "output",
                "out",
            ]);
            return Some(match (dirish, fresh, self.intent) {
                (true, _, Intent::Create) => self.abs("hintcheck-new-dir"),
                (true, _, _) => self.existing_dir(),
                (false, true, _) => self.abs("hintcheck-moved.txt"),
                (false, false, Intent::Create) => self.abs("hintcheck-new.txt"),
                (false, false, _) => self.existing_file(),
            });
        }
        if has(&["old", "search", "find"]) && has(&["text", "string", "str"]) || name == "oldText" {
            return Some(Value::String("hintcheck".into()));
        }
        if has(&["new", "replacement", "replace"]) && has(&["text", "string", "str"])
            || name == "newText"
        {
            return Some(Value::String("hintcheck edited".into()));
        }
        if has(&["pattern", "glob"]) {
            return Some(Value::String("*.txt".into()));
        }
        if has(&["query", "keyword", "keywords", "term"]) || name == "q" {
            return Some(Value::String("hintcheck".into()));
        }
        if has(&["content", "contents", "text", "body"]) {
            return Some(Value::String("hintcheck test content\n".into()));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool::parse_tool;
    use serde_json::json;

    fn sem(name: &str) -> Semantics {
        let facts = WorkspaceFacts {
            root: PathBuf::from("/w"),
            files: vec!["docs/readme.md".into(), "notes.txt".into()],
            dirs: vec!["docs".into()],
        };
        let tool =
            parse_tool(&json!({"name": name, "inputSchema": {"type": "object"}}), 0).expect("tool");
        Semantics::new(&facts, &tool)
    }

    #[test]
    fn paths_follow_what_the_tool_does() {
        let s = json!({"type": "string"});
        let s = s.as_object().expect("obj");
        let cases = [
            ("read_text_file", "path", json!("/w/notes.txt")),
            ("write_file", "path", json!("/w/hintcheck-new.txt")),
            ("create_directory", "path", json!("/w/hintcheck-new-dir")),
            ("list_directory", "path", json!("/w")),
            ("directory_tree", "path", json!("/w")),
            ("search_files", "path", json!("/w")),
            ("get_file_info", "path", json!("/w/notes.txt")),
            ("list_directory", "directory", json!("/w")),
            ("move_file", "destination", json!("/w/hintcheck-moved.txt")),
            ("move_file", "source", json!("/w/notes.txt")),
            ("fetch", "url", json!("https://example.test/hintcheck")),
            ("edit_file", "oldText", json!("hintcheck")),
            ("search_files", "pattern", json!("*.txt")),
        ];
        for (tool, param, want) in cases {
            assert_eq!(sem(tool).value_for(param, s), Some(want), "{tool}.{param}");
        }
        assert_eq!(sem("x").value_for("count", s), None);
        for other in [
            json!({"type": "string", "enum": ["a"]}),
            json!({"$ref": "#/$defs/p"}),
            json!({"type": "string", "maxLength": 3}),
            json!({"type": ["string", "null"]}),
        ] {
            assert_eq!(
                sem("read_file").value_for("path", other.as_object().expect("obj")),
                None,
                "{other}"
            );
        }
    }

    #[test]
    fn words_split_camel_and_snake_case() {
        assert_eq!(words("readTextFile"), ["read", "text", "file"]);
        assert_eq!(words("old_text"), ["old", "text"]);
    }
}
