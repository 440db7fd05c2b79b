//! Values chosen by meaning: a parameter named like a path gets a path inside the scratch
//! workspace (an existing file for tools that read or change, a fresh name for tools that
//! create), a URL gets an address under a reserved test domain (so the network observer sees
//! the attempt), text to replace gets a word the seeded files contain. Only plain strings are
//! chosen this way: an `enum`, `const`, `pattern`, `format` or `default` always wins.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use serde_json::{Map, Value};

use super::packs::Stage;
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
    /// A SQLite database file among `files`, if any.
    pub sqlite: Option<String>,
    /// Commands the server was told to allow (`ALLOWED_COMMANDS=ls,cat` in its environment,
    /// `--allowed-commands ls,cat` on its command line).
    pub allowed_commands: Vec<String>,
    /// The run's words (file names, text, addresses), from its seed.
    pub vocab: crate::workspace::vocab::Vocabulary,
    /// The domain packs in force.
    pub packs: super::packs::Packs,
    /// The workspace's git repository (its branches, commits, remotes, tracked files).
    pub repository: Option<crate::workspace::repository::Repository>,
}

impl WorkspaceFacts {
    /// Lists a workspace (bounded).
    pub fn scan(root: &Path) -> WorkspaceFacts {
        Self::scan_leaving_out(root, &[])
    }

    /// [`WorkspaceFacts::scan`] that neither lists nor opens the files `unlisted` names
    /// (relative to `root`).
    pub fn scan_leaving_out(root: &Path, unlisted: &[String]) -> WorkspaceFacts {
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
                if unlisted.iter().any(|u| Path::new(u) == r) {
                    continue;
                }
                let Ok(ft) = e.file_type() else { continue };
                if ft.is_dir() && facts.dirs.len() < 200 {
                    facts.dirs.push(r.display().to_string());
                    stack.push(r);
                } else if ft.is_file() && facts.files.len() < 200 {
                    facts.files.push(r.display().to_string());
                }
            }
        }
        // A copy under a new name (`table-2.csv`, made where a name was taken) after the
        // file it was named after: the original is the better input.
        facts.files.sort_by_cached_key(|f| renamed_copy_key(f));
        facts.dirs.sort();
        facts.sqlite = facts
            .files
            .iter()
            .find(|f| {
                let mut magic = [0u8; 16];
                crate::workspace::open_regular(&root.join(f)).is_some_and(|mut file| {
                    std::io::Read::read_exact(&mut file, &mut magic).is_ok()
                        && &magic == b"SQLite format 3\0"
                })
            })
            .cloned();
        facts.repository = crate::workspace::repository::Repository::read(root);
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

pub(crate) fn words(s: &str) -> Vec<String> {
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

/// Sorts `dir/name-2.ext` just after `dir/name.ext`: (the name without its `-N`, N, name).
fn renamed_copy_key(f: &str) -> (String, u32, String) {
    static COPY: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(.*)-(\d{1,3})(\.[A-Za-z0-9]+)?$").expect("static regex"));
    match COPY.captures(f) {
        Some(c) => (
            format!("{}{}", &c[1], c.get(3).map_or("", |m| m.as_str())),
            c[2].parse().unwrap_or(0),
            f.to_string(),
        ),
        None => (f.to_string(), 0, f.to_string()),
    }
}

/// Whether a tool says it waits for something to happen before it answers (a long poll, an
/// event, a message): by its name's words (`wait_for_message`, `poll_events`, `listen`) or
/// its description ("long-polls", "blocks until", "waits until", "waits for").
pub fn waits_for_events(tool: &ToolDecl) -> bool {
    let name = words(&tool.name);
    let by_name = name.iter().any(|w| {
        ["wait", "await", "poll", "longpoll", "listen", "subscribe"].contains(&w.as_str())
    });
    let description = tool.description.as_deref().unwrap_or("").to_lowercase();
    let by_description = [
        "long poll",
        "long-poll",
        "longpoll",
        "blocks until",
        "waits until",
        "wait until",
        "waits for",
        "until a message",
        "until an event",
    ]
    .iter()
    .any(|p| description.contains(p));
    by_name || by_description
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
    pub(crate) facts: WorkspaceFacts,
    pub(crate) intent: Intent,
    /// The words of the tool's name.
    pub(crate) tool_words: Vec<String>,
    /// The tool's name says it works on directories (`list_directory`, `mkdir`).
    on_directories: bool,
    /// The tool's name says it removes (`removeDirectory`, `delete_file`).
    removes: bool,
    /// Meaning wins over a schema's `default` and `examples` too (a later attempt, when the
    /// defaults did not work).
    over_defaults: bool,
    /// The kind of file the tool works on, by extension (`xlsx` for an Excel tool), from its
    /// name and description or from an error that named it.
    pub(crate) file_kind: Option<&'static str>,
    /// Paths are relative to the workspace (a vault-relative server, or one whose errors
    /// refused absolute paths).
    relative: bool,
    /// Commands the tool's description says are allowed.
    allowed_commands: Vec<String>,
    /// Other lists the tool's description gives ("Supported formats: png, svg"): the noun
    /// (singular) and its values.
    listed: Vec<(String, Vec<String>)>,
    /// Objects the tool's description shows as items of a JSON list (an example of what a
    /// list of member-less objects takes).
    object_examples: Vec<Value>,
    /// The names of the tool's parameters: a description that quotes one ("keeping its name
    /// unless `name` is given") points at it, it does not give an example.
    parameters: Vec<String>,
    /// What the tool's description says of each parameter in an `Args:` or `Parameters:`
    /// section (a docstring that FastMCP and others pass on as the description, while the
    /// schema's properties have none).
    documented: BTreeMap<String, String>,
}

impl Semantics {
    /// For `tool`, over `facts`.
    pub fn new(facts: &WorkspaceFacts, tool: &ToolDecl) -> Semantics {
        let about = format!(
            "{} {}",
            tool.name,
            tool.description.as_deref().unwrap_or("")
        );
        Semantics {
            facts: facts.clone(),
            intent: Intent::of(tool),
            over_defaults: false,
            file_kind: file_kind(&about),
            relative: false,
            allowed_commands: tool
                .description
                .as_deref()
                .map(allowed_commands_in)
                .unwrap_or_default(),
            listed: tool
                .description
                .as_deref()
                .map(allowed_lists_in)
                .unwrap_or_default(),
            on_directories: words(&tool.name)
                .iter()
                .any(|w| DIRECTORY_TOOL_WORDS.contains(&w.as_str())),
            removes: super::plan::removes(tool),
            parameters: tool
                .input_schema
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default(),
            tool_words: words(&tool.name),
            object_examples: tool
                .description
                .as_deref()
                .map(object_examples)
                .unwrap_or_default(),
            documented: tool
                .description
                .as_deref()
                .map(|d| {
                    let mut documented = documented_parameters(d);
                    inline_parameters(d, tool, &mut documented);
                    documented
                })
                .unwrap_or_default(),
        }
    }

    /// The workspace path `rel` as the tool takes paths (absolute, or relative to the root).
    pub(crate) fn abs(&self, rel: &str) -> Value {
        if self.relative {
            return Value::String(if rel.is_empty() {
                ".".into()
            } else {
                rel.to_string()
            });
        }
        if rel.is_empty() {
            return Value::String(self.facts.root.display().to_string());
        }
        Value::String(self.facts.root.join(rel).display().to_string())
    }

    /// The same, with paths relative to the workspace.
    pub fn with_relative_paths(&self) -> Semantics {
        Semantics {
            relative: true,
            ..self.clone()
        }
    }

    /// The same, with existing files for every path (a fresh name was refused: the tool
    /// works on a file that must exist).
    pub fn with_existing_files(&self) -> Semantics {
        Semantics {
            intent: Intent::Modify,
            over_defaults: false,
            ..self.clone()
        }
    }

    /// The same, for files of kind `kind` (an extension).
    pub fn with_file_kind(&self, kind: &'static str) -> Semantics {
        Semantics {
            file_kind: Some(kind),
            ..self.clone()
        }
    }

    fn existing_file(&self) -> Value {
        self.existing_file_of(self.file_kind)
    }

    fn existing_file_of(&self, kind: Option<&str>) -> Value {
        // Files under hidden directories (`.git`, a server's own `.state`) are not the
        // user's files.
        let visible = || self.facts.files.iter().filter(|f| visible(f));
        if let Some(kind) = kind {
            let suffix = format!(".{kind}");
            if let Some(f) = visible().find(|f| f.ends_with(&suffix)) {
                return self.abs(f);
            }
        }
        let pick = visible()
            .find(|f| f.ends_with(".txt"))
            .or_else(|| visible().next())
            .or_else(|| self.facts.files.first());
        match pick {
            Some(f) => self.abs(f),
            None => self.abs(&self.facts.vocab.missing_file()),
        }
    }

    fn existing_dir(&self) -> Value {
        self.abs("")
    }

    /// A directory to remove: never the workspace itself (a remover given the root empties
    /// the whole workspace for the tools after it), but one the run made, else the first
    /// visible one under the root; the root only when it has none.
    fn removable_dir(&self) -> Value {
        let visible = || {
            self.facts
                .dirs
                .iter()
                .filter(|d| !d.is_empty() && visible(d))
        };
        visible()
            .find(|d| self.facts.vocab.made_by_the_run(d))
            .or_else(|| visible().next())
            .map_or_else(|| self.existing_dir(), |d| self.abs(d))
    }

    /// An existing place of the workspace: the workspace itself for a `folder`, else a file
    /// (of the kind set, if any).
    pub fn existing_place(&self, folder: bool) -> Value {
        if folder {
            self.existing_dir()
        } else {
            self.existing_file()
        }
    }

    /// The same, but meaning wins over `default` and `examples` as well.
    pub fn over_defaults(&self) -> Semantics {
        Semantics {
            over_defaults: true,
            ..self.clone()
        }
    }

    /// A value for property `name` whose schema is `schema`, if its meaning is clear: plain
    /// strings, and arrays of plain strings named like a list of paths.
    pub fn value_for(&self, name: &str, schema: &Map<String, Value>) -> Option<Value> {
        // An optional value (`anyOf: [X, null]`, pydantic's `Optional[X]` with `default:
        // null`) means what X means.
        if let Some(inner) = optional_inner(schema) {
            return self.value_for(name, &inner);
        }
        // A list of objects that declare no members (`conditions: [{}]`), where the tool's
        // description shows one in JSON ("Examples: [{"field": "status", "operator": "eq",
        // "value": "active"}]"): the example's first item.
        if schema.get("type").and_then(Value::as_str) == Some("array")
            && schema
                .get("items")
                .and_then(Value::as_object)
                .is_some_and(|items| {
                    items.get("type").and_then(Value::as_str) == Some("object")
                        && !items.contains_key("properties")
                })
        {
            if let Some(item) = self.object_examples.first() {
                return Some(Value::Array(vec![item.clone()]));
            }
        }
        // A path whose example or default is relative ("Projects/Plan.md"): a path of the
        // workspace written the same way, of the example's kind (an example names a file that
        // is not here).
        // The same for a list of paths whose items (or whole example) are relative.
        if schema.get("type").and_then(Value::as_str) == Some("array") {
            let ws = words(name);
            let paths = ws.last().is_some_and(|w| {
                ["paths", "files", "filenames", "filepaths", "notes"].contains(&w.as_str())
            });
            let items = schema.get("items").and_then(Value::as_object);
            let example = items
                .and_then(|i| i.get("examples").and_then(Value::as_array))
                .and_then(|e| e.first())
                .or_else(|| {
                    schema
                        .get("examples")
                        .and_then(Value::as_array)
                        .and_then(|e| e.first())
                        .and_then(|e| e.as_array())
                        .and_then(|e| e.first())
                })
                .and_then(Value::as_str);
            if let (true, Some(example)) = (paths, example) {
                if !example.starts_with('/') && example.contains('.') && !example.contains("://") {
                    let kind = file_kind(example);
                    let relative = self.with_relative_paths();
                    return Some(Value::Array(vec![relative.existing_file_of(kind)]));
                }
            }
        }
        // A property without a description of its own (FastMCP gives it only a title) is
        // described by the tool's docstring.
        let hint = match self.documented.get(name) {
            Some(documented) if !schema.contains_key("description") => {
                format!("{documented} {}", describe(schema))
            }
            _ => describe(schema),
        };
        if let Some(example) = relative_path_example(name, schema) {
            let kind = file_kind(&example);
            let relative = self.with_relative_paths();
            let relative = match kind {
                Some(k) => relative.with_file_kind(k),
                None => relative,
            };
            let ws = words(name);
            return Some(relative.path_for(&ws, kind, &hint));
        }
        match schema.get("type").and_then(Value::as_str) {
            // A default that is a web address becomes the test address.
            Some("string")
                if self.over_defaults
                    && schema.keys().all(|k| {
                        k == "format" || k == "default" || k == "examples" || is_plain_key(k)
                    })
                    && schema
                        .get("format")
                        .and_then(Value::as_str)
                        .is_none_or(|f| matches!(f, "uri" | "url" | "iri" | "uri-reference"))
                    && schema
                        .get("default")
                        .and_then(Value::as_str)
                        .is_some_and(|d| d.starts_with("http://") || d.starts_with("https://")) =>
            {
                Some(Value::String(TEST_URL.into()))
            }
            // A web address by format: the test address the network observer answers.
            Some("string")
                if schema
                    .get("format")
                    .and_then(Value::as_str)
                    .is_some_and(|f| matches!(f, "uri" | "url" | "iri"))
                    && schema.keys().all(|k| {
                        k == "format"
                            || is_plain_key(k)
                            || (self.over_defaults && matches!(k.as_str(), "default" | "examples"))
                    }) =>
            {
                Some(Value::String(TEST_URL.into())).filter(|v| fits_length(schema, v))
            }
            Some("string") if is_plain(schema, self.over_defaults) => {
                self.choose(name, &hint).filter(|v| fits_length(schema, v))
            }
            Some("array") => {
                let items = schema.get("items").and_then(Value::as_object)?;
                let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
                let max = schema
                    .get("maxItems")
                    .and_then(Value::as_u64)
                    .unwrap_or(u64::MAX);
                let ws = words(name);
                let paths = ws.last().is_some_and(|w| {
                    ["paths", "files", "filenames", "filepaths", "sources"].contains(&w.as_str())
                });
                let plain_items = items.get("type").and_then(Value::as_str) == Some("string")
                    && is_plain(items, self.over_defaults);
                // A command given as an argv array: the command chosen for a string, word by
                // word (within what the server allows).
                let argv = ws
                    .iter()
                    .any(|w| ["command", "cmd", "argv"].contains(&w.as_str()));
                if argv && plain_items {
                    let chosen = self.choose("command", &describe(items))?;
                    let words: Vec<Value> = chosen
                        .as_str()?
                        .split_whitespace()
                        .map(|w| Value::String(w.to_string()))
                        .collect();
                    let fits = (min..=max).contains(&(words.len() as u64))
                        && words.iter().all(|w| fits_length(items, w));
                    return fits.then_some(Value::Array(words));
                }
                (paths && plain_items && min <= 1 && max >= 1)
                    .then(|| Value::Array(vec![self.existing_file()]))
                    .filter(|v| v[0].as_str().is_some_and(|_| fits_length(items, &v[0])))
            }
            _ => None,
        }
    }

    fn choose(&self, name: &str, hint: &str) -> Option<Value> {
        let p = ParamWords { ws: words(name) };
        self.choose_place(&p, name, hint)
            .or_else(|| self.listed_value(&p, hint))
            .or_else(|| self.choose_text_value(&p, name, hint))
            .or_else(|| self.choose_program(&p, name, hint))
            .or_else(|| self.choose_by_words(&p, hint))
    }

    /// A place: a repository to clone (packs), a URL, a file's content as base64, what the
    /// packs know of places, a path.
    fn choose_place(&self, p: &ParamWords, name: &str, hint: &str) -> Option<Value> {
        let ws = &p.ws;
        let has = |list: &[&str]| p.has(list);
        let last = p.last();
        let text = |s: &str| Some(Value::String(s.to_string()));
        // What the packs in force know of addresses (a repository to clone).
        if let Some(v) = self.facts.packs.choose(Stage::Address, self, p, name, hint) {
            return Some(v);
        }
        if has(&["url", "uri", "link", "href", "endpoint", "website"]) {
            return text(TEST_URL);
        }
        // Content as base64: a seeded file of the tool's kind, encoded.
        if has(&["base64", "b64"]) {
            if let Some(file) = self.existing_file_of(self.file_kind).as_str() {
                if let Ok(bytes) = std::fs::read(self.facts.root.join(file)) {
                    use base64::Engine as _;
                    return text(&base64::engine::general_purpose::STANDARD.encode(bytes));
                }
            }
        }
        // What the packs in force know of places (a revision, an A1 range, the database).
        if let Some(v) = self.facts.packs.choose(Stage::Place, self, p, name, hint) {
            return Some(v);
        }
        // A path inside a document ("Dot-notation path to the array", a JSONPath), not a
        // file's: the document's root.
        if has(&["path"]) {
            if let Some(root) = data_path_root(hint) {
                return text(root);
            }
        }
        if PATH_WORDS.contains(&last) || (ws.len() == 1 && has(PATH_WORDS)) {
            // The parameter's own words name a kind (`image_path`, `csv_file`) before the
            // tool's.
            let own = file_kind(&format!("{name} {hint}"));
            let kind = own.or(self.file_kind);
            // A file the parameter names a kind for (`image_path`, `csv_file`) is an input
            // the tool reads, unless its name says it is written.
            if own.is_some() && !names_a_place_to_write(ws) && !has(&["dir", "directory", "folder"])
            {
                return Some(self.existing_file_of(kind));
            }
            return Some(self.path_for(ws, kind, hint));
        }
        None
    }

    /// A value the server says it accepts: the first of a list in the parameter's own
    /// description ("One of: png, svg"), else of a list the tool's description gives for a
    /// noun the parameter is named by ("Supported formats: png, svg" for `format`,
    /// `output_format`).
    fn listed_value(&self, p: &ParamWords, hint: &str) -> Option<Value> {
        const LIST_PHRASES: &[&str] = &[
            "one of",
            "supported",
            "allowed",
            "valid values",
            "valid options",
            "possible values",
            "choices",
            "available",
            "options:",
        ];
        // Things to run keep their own choice (the most harmless command, a statement that
        // does what the tool is for), whatever a description lists; a `command_type` is no
        // command.
        let names_a_kind = matches!(p.last(), "type" | "kind" | "mode" | "category" | "format");
        if p.has(&[
            "command",
            "cmd",
            "shell",
            "script",
            "sql",
            "code",
            "expression",
            "expr",
            "argv",
        ]) && !names_a_kind
        {
            return None;
        }
        let lowered = hint.to_lowercase();
        if LIST_PHRASES.iter().any(|w| lowered.contains(w)) {
            if let Some((_, values)) = super::feedback::offered_values(hint) {
                if let Some(first) = values.into_iter().next() {
                    return Some(Value::String(first));
                }
            }
        }
        // "kind: preference | procedural | fact": a description that is a list of bare words
        // between bars.
        static BAR_LIST: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"^\s*([A-Za-z0-9_][A-Za-z0-9_\-]*)(?:\s*\|\s*[A-Za-z0-9_][A-Za-z0-9_\-]*)+(?:\s|[.;]|$)")
                .expect("static regex")
        });
        if let Some(first) = BAR_LIST.captures(hint).and_then(|c| c.get(1)) {
            return Some(Value::String(first.as_str().to_string()));
        }
        // "The command type to approve (read, write, system)": a list in parentheses in the
        // parameter's own description.
        if let Some(first) = parenthesised_lists(hint)
            .into_iter()
            .next()
            .and_then(|(_, values)| values.into_iter().next())
        {
            return Some(Value::String(first));
        }
        self.listed
            .iter()
            .filter(|(noun, _)| noun != "command")
            .find(|(noun, _)| p.ws.iter().any(|w| super::pool::singular(w) == *noun))
            .and_then(|(_, values)| values.first())
            .map(|v| Value::String(v.clone()))
    }

    /// Text and scalars: words the tool's file contains or new ones, ids, an email address, a
    /// time zone, a time, a date.
    fn choose_text_value(&self, p: &ParamWords, name: &str, hint: &str) -> Option<Value> {
        let has = |list: &[&str]| p.has(list);
        let last = p.last();
        let text = |s: &str| Some(Value::String(s.to_string()));
        // Text to find, replace or anchor at: words the file the tool works on contains.
        if has(&[
            "old", "search", "find", "target", "anchor", "header", "heading", "match",
        ]) && (has(&["text", "string", "str", "anchor"]) || last == "anchor")
            || name == "oldText"
        {
            return Some(Value::String(self.text_in_file()));
        }
        if has(&["new", "replacement", "replace"]) && has(&["text", "string", "str"])
            || name == "newText"
        {
            return text(&self.facts.vocab.edited());
        }
        if has(&["uuid", "guid"]) {
            return text("00000000-0000-4000-8000-000000000001");
        }
        if matches!(last, "id" | "ids" | "key" | "identifier") && !has(&["api", "secret"]) {
            return text("1");
        }
        if has(&["email", "mail"]) {
            return text(&self.facts.vocab.email());
        }
        if has(&["timezone", "tz"]) || (has(&["zone"]) && has(&["time"])) {
            return text(example_in(hint).unwrap_or("Etc/UTC"));
        }
        if hint.contains("HH:MM") || (last == "time" && !has(&["timestamp"])) {
            return text("12:30");
        }
        if has(&["date", "day"]) || hint.contains("YYYY-MM-DD") {
            return text("2026-01-15");
        }
        if has(&["timestamp", "datetime"]) {
            return text("2026-01-15T12:30:00Z");
        }
        None
    }

    /// Something to run: what the packs know of programs, a command the server allows, code,
    /// a language.
    fn choose_program(&self, p: &ParamWords, name: &str, hint: &str) -> Option<Value> {
        let has = |list: &[&str]| p.has(list);
        let text = |s: &str| Some(Value::String(s.to_string()));
        // What the packs in force know of programs (a SQL statement).
        if let Some(v) = self.facts.packs.choose(Stage::Program, self, p, name, hint) {
            return Some(v);
        }
        if has(&["command", "cmd", "shell", "script"]) {
            // Within what the server allows, the most harmless command.
            let allowed: &[String] = if self.allowed_commands.is_empty() {
                &self.facts.allowed_commands
            } else {
                &self.allowed_commands
            };
            if allowed.is_empty() || allowed.iter().any(|c| c == "echo") {
                return text(&format!("echo {}", self.facts.vocab.term()));
            }
            let pick = ["ls", "pwd", "date", "whoami", "true", "uname", "cat", "git"]
                .iter()
                .find(|p| allowed.iter().any(|c| c == *p))
                .map(|p| p.to_string())
                .unwrap_or_else(|| allowed[0].clone());
            return text(match pick.as_str() {
                "cat" => "cat notes.txt",
                "git" => "git status",
                other => other,
            });
        }
        if has(&["code", "snippet", "expression", "expr"]) {
            return text(&if hint.to_ascii_lowercase().contains("python") {
                format!("print('{}')", self.facts.vocab.term())
            } else {
                "1 + 1".to_string()
            });
        }
        if has(&["language", "lang", "locale"]) {
            // A programming language for tools about code, a human one otherwise.
            let code = self.file_kind == Some("py")
                || ["programming", "code", "syntax", "source", "parser"]
                    .iter()
                    .any(|w| hint.to_lowercase().contains(w));
            return text(example_in(hint).unwrap_or(if code { "python" } else { "en" }));
        }
        None
    }

    /// What the description shows or the name's words ask for: a structured example, a quoted
    /// example, a pattern, a search term, a name, a message, content.
    fn choose_by_words(&self, p: &ParamWords, hint: &str) -> Option<Value> {
        let has = |list: &[&str]| p.has(list);
        let text = |s: &str| Some(Value::String(s.to_string()));
        // A string that carries JSON: the structured example its description gives
        // ("example: [{name: 'a', ...}]", in JSON or JavaScript literal syntax), as JSON.
        if let Some(example) = structured_example_in(hint) {
            return Some(Value::String(example.to_string()));
        }
        if let Some(example) = example_in(hint).filter(|e| !self.parameters.iter().any(|p| p == e))
        {
            return text(example);
        }
        if has(&["pattern", "glob"]) {
            // A regular expression or a substring (a glob's `*` repeats nothing in a regex):
            // a word to look for; a glob otherwise.
            let lowered = hint.to_lowercase();
            let regex = ["regex", "regular expression", "substring"]
                .iter()
                .any(|w| lowered.contains(w));
            if regex && !has(&["glob"]) && !lowered.contains("glob") {
                return text(self.facts.vocab.term());
            }
            return text("*.txt");
        }
        if has(&["query", "keyword", "keywords", "term", "q"]) {
            return text(self.facts.vocab.term());
        }
        if has(&["name", "title", "label"]) {
            return text(self.facts.vocab.name());
        }
        if has(&["message", "comment", "note", "description", "summary"]) {
            return text(&self.facts.vocab.message());
        }
        if has(&["content", "contents", "text", "body", "data"]) {
            return text(&self.facts.vocab.content());
        }
        None
    }

    /// Words of the file the tool works on (its kind's seeded file, else a text file), for
    /// parameters that name text to find in it.
    fn text_in_file(&self) -> String {
        let file = self.existing_file_of(self.file_kind);
        file.as_str()
            .and_then(|p| sample_text(Path::new(p)))
            .unwrap_or_else(|| self.facts.vocab.term().to_string())
    }

    /// A path for a parameter named `ws`: an existing or fresh file or directory, by what the
    /// name and the tool say.
    fn path_for(&self, ws: &[String], kind: Option<&str>, hint: &str) -> Value {
        let fresh_file = |stem: &str| match kind {
            Some(k) => self.abs(&format!("{stem}.{k}")),
            None => self.abs(&format!("{stem}.txt")),
        };
        let has = |list: &[&str]| ws.iter().any(|w| list.contains(&w.as_str()));
        if let Some(noun) =
            described_directory(hint).filter(|_| !has(&["file", "filename", "filepath"]))
        {
            // A repository, project or workspace is the existing one; a directory a tool
            // that creates is given may be new.
            let plain_directory = matches!(noun.as_str(), "directory" | "folder");
            return match self.intent {
                Intent::Create if plain_directory && !has(&["repo", "repository", "root"]) => {
                    self.abs(&self.facts.vocab.new_dir())
                }
                _ => self.existing_dir(),
            };
        }
        // A repository or root is always the existing workspace.
        if has(&["root", "cwd", "repo", "repository", "workspace", "project"]) {
            return self.existing_dir();
        }
        // A tool about some kind of file (a workbook) searches in a file, not a directory.
        let dirish = has(&["dir", "directory", "folder"])
            || (self.on_directories && kind.is_none() && !has(&["file", "filename", "filepath"]));
        let fresh = names_a_place_to_write(ws);
        let v = &self.facts.vocab;
        let context = has(&["working", "cwd", "root", "base", "workspace", "current"]);
        match (dirish, fresh, self.intent) {
            (true, _, Intent::Create) => self.abs(&v.new_dir()),
            (true, _, _) if self.removes && !context => self.removable_dir(),
            (true, _, _) => self.existing_dir(),
            (false, true, _) => fresh_file(&v.moved_stem()),
            (false, false, Intent::Create) => fresh_file(v.new_stem()),
            // Unsure what the tool does: an existing file first, a fresh name on a later
            // attempt.
            (false, false, Intent::Unknown) if self.over_defaults => fresh_file(v.new_stem()),
            (false, false, _) => self.existing_file_of(kind),
        }
    }
}

/// A path into a document one level down to the first item of the list at `sent` (the root
/// when nothing was sent), in the notation parameter `name` of `tool` is described with: `$[0]`
/// for a JSONPath, `/0` for a JSON Pointer, `0` or `users.0` for a dotted path. `None` when the
/// parameter is no path into a document.
pub(crate) fn first_item_path(tool: &ToolDecl, name: &str, sent: Option<&str>) -> Option<String> {
    let schema = tool
        .input_schema
        .get("properties")?
        .get(name)?
        .as_object()?;
    let mut hint = describe(schema);
    if !schema.contains_key("description") {
        if let Some(d) = tool.description.as_deref() {
            let mut documented = documented_parameters(d);
            inline_parameters(d, tool, &mut documented);
            if let Some(documented) = documented.get(name) {
                hint = format!("{documented} {hint}");
            }
        }
    }
    let root = data_path_root(&hint)?;
    let at = sent.unwrap_or(root);
    Some(if root == "$" {
        format!("{at}[0]")
    } else if hint.to_lowercase().contains("pointer") {
        format!("{at}/0")
    } else if at.is_empty() || at == "." {
        "0".to_string()
    } else {
        format!("{at}.0")
    })
}

/// The objects of the first JSON list of objects a description shows (`[{"field": "status",
/// "operator": "eq", "value": "active"}, …]`), read from each `[{` on (bounded; a list
/// spread over lines with indentation is still JSON).
fn object_examples(description: &str) -> Vec<Value> {
    let text: String = description.chars().take(8_000).collect();
    for (at, _) in text.match_indices("[{").take(8) {
        let mut stream = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        if let Some(Ok(Value::Array(items))) = stream.next() {
            let objects: Vec<Value> = items.into_iter().filter(Value::is_object).collect();
            if !objects.is_empty() {
                return objects;
            }
        }
    }
    Vec::new()
}

/// The root of a document, in the notation a path's description names, when the description
/// says the path leads inside a document rather than to a file: "Dot-notation path to the
/// array", "JSONPath expression" (`$`), "JSON Pointer" (the empty pointer), "path to the key".
/// A path to a JSON *file* is a file's.
pub(crate) fn data_path_root(hint: &str) -> Option<&'static str> {
    static DATA_PATH: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)\b(dot[- ]notation|dotted path|json ?path|json pointer|key path|jq (path|filter|expression)|path (to|of|within|inside|in(to)?) (the |a |an )?(json |nested )?(array|object|field|key|value|node|element|property|section)s?\b|path (within|inside|in(to)?) (the |a )?(json|document|data|structure))",
        )
        .expect("static regex")
    });
    let m = DATA_PATH.find(hint)?;
    // "Path to the JSON file", "path within the data directory": a file's.
    let after = hint[m.end()..].trim_start().to_lowercase();
    if ["file", "directory", "folder", "dir "]
        .iter()
        .any(|w| after.starts_with(w))
    {
        return None;
    }
    let lowered = hint.to_lowercase();
    Some(
        if lowered.contains("jsonpath") || lowered.contains("json path") || hint.contains("$.") {
            "$"
        } else {
            ""
        },
    )
}

/// Whether the words of a parameter name say it is a place to write to (`destination`,
/// `output_path`, `new_name`).
pub(crate) fn names_a_place_to_write(ws: &[String]) -> bool {
    ws.iter().any(|w| {
        [
            "destination",
            "dest",
            "target",
            "new",
            "to",
            "output",
            "out",
        ]
        .contains(&w.as_str())
    })
}

/// Whether the words of a parameter name say it is a path (`file`, `path`, `dest`).
pub(crate) fn names_a_path(ws: &[String]) -> bool {
    ws.iter().any(|w| PATH_WORDS.contains(&w.as_str()))
}

/// Whether a workspace path (relative) is one of the user's: not under a hidden directory
/// (`.git`, a server's own `.state`).
pub(crate) fn visible(rel: &str) -> bool {
    !rel.split('/').any(|c| c.starts_with('.'))
}

/// What a path's description says it is when it calls it a directory ("Path to the Git
/// repository", "Root of the project", "Path of the directory to create"): the noun, lower
/// case. Anchored at the start: "Path to the file, relative to the root of the repository"
/// is a file.
pub(crate) fn described_directory(hint: &str) -> Option<String> {
    static DESCRIBES_DIRECTORY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"(?i)^\W*(the |a |an )?(path|root|location) (to|of) (the |a |an |your )?(git |project |local |target )?(?P<noun>repository|repo|directory|folder|working (directory|tree)|workspace|project)\b",
        )
        .expect("static regex")
    });
    DESCRIBES_DIRECTORY
        .captures(hint)
        .and_then(|c| c.name("noun"))
        .map(|m| m.as_str().to_ascii_lowercase())
}

/// Commands a text says are allowed ("Allowed commands: ls, cat, pwd").
pub fn allowed_commands_in(text: &str) -> Vec<String> {
    static PHRASE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)\b(?:allowed|permitted|whitelisted|supported|only)\s+commands?\s*(?:(?:are|is|include)\b\s*:?|[:=])\s*([^.\n]{1,300})",
        )
        .expect("static regex")
    });
    let Some(list) = PHRASE.captures(text).and_then(|c| c.get(1)) else {
        return Vec::new();
    };
    list.as_str()
        .split([',', ' ', '|', ';'])
        .map(|w| w.trim_matches(|c: char| "`'\"()[]".contains(c)))
        .filter(|w| {
            !w.is_empty()
                && !matches!(*w, "and" | "or" | "the" | "commands" | "command")
                && w.len() <= 30
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        })
        .map(str::to_string)
        .collect()
}

/// "to a specified format (jpeg, png, webp, bmp)": a noun and three or more single words in
/// parentheses after it.
static PARENTHESISED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(
        r"(?i)\b([a-z]{3,20})\s*\(([a-z0-9][a-z0-9._-]*(?:\s*,\s*[a-z0-9][a-z0-9._-]*){2,15})\)",
    )
    .expect("static regex")
});

/// The lists in parentheses of a text ([`PARENTHESISED`]): the noun before each and its values.
fn parenthesised_lists(text: &str) -> Vec<(String, Vec<String>)> {
    PARENTHESISED
        .captures_iter(text)
        .take(4)
        .filter_map(|c| {
            let values: Vec<String> = c
                .get(2)?
                .as_str()
                .split(',')
                .map(|w| w.trim().to_string())
                .filter(|w| !matches!(w.to_lowercase().as_str(), "e.g." | "i.e." | "etc" | "etc."))
                .collect();
            let noun = c.get(1)?.as_str().to_lowercase();
            (values.len() >= 2).then_some((noun, values))
        })
        .collect()
}

/// What a docstring's `Args:` (or `Arguments:`, `Parameters:`) section says of each parameter:
/// lines `name: text`, `name (type): text` or `- name: text`, with the more indented lines
/// after one continuing it (also the text of an entry `name:` given on the next line); the
/// section ends at another section's heading (`Returns:`, `Note:`) or at a line no more
/// indented than its own heading that is no entry. FastMCP servers pass such docstrings on as
/// the tool's description. (numpy's underlined sections and reST's `:param x:` are not read.)
/// Parameters a description documents inline, sentence by sentence ("Store one memory.
/// kind: preference | procedural | fact. content: the memory itself"): for each parameter of
/// `tool` not yet in `documented`, the text after "<name>:" up to the end of its sentence.
fn inline_parameters(
    description: &str,
    tool: &ToolDecl,
    documented: &mut BTreeMap<String, String>,
) {
    let Some(properties) = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    else {
        return;
    };
    // A description of megabytes is read once per parameter at most, and only its head.
    let head: String = description.chars().take(8_000).collect();
    for name in properties.keys().take(64) {
        if documented.contains_key(name) || name.len() < 2 {
            continue;
        }
        let marker = format!("{name}:");
        let found = head.match_indices(&marker).find(|(at, _)| {
            // The name starts a sentence or a line: "… memory. kind: …", not "the_kind:".
            head[..*at]
                .chars()
                .next_back()
                .is_none_or(|c| c.is_whitespace())
        });
        if let Some((at, _)) = found {
            let rest = head[at + marker.len()..].trim_start();
            let end = [". ", ".\n", "\n"]
                .iter()
                .filter_map(|t| rest.find(t))
                .min()
                .unwrap_or(rest.len().min(300));
            let text = rest[..end].trim();
            if !text.is_empty() {
                documented.insert(name.clone(), text.to_string());
            }
        }
    }
}

pub(crate) fn documented_parameters(description: &str) -> BTreeMap<String, String> {
    static ENTRY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"^\s*(?:[-*]\s*)?`?([A-Za-z_][A-Za-z0-9_]*)`?\s*(?:\([^)]{0,60}\))?\s*[:：]\s*(.*)$",
        )
        .expect("static regex")
    });
    const OPENS: &[&str] = &[
        "args:",
        "arguments:",
        "parameters:",
        "params:",
        "parameter:",
    ];
    const CLOSES: &[&str] = &[
        "returns:",
        "return:",
        "raises:",
        "yields:",
        "examples:",
        "example:",
        "note:",
        "notes:",
        "attributes:",
        "usage:",
        "see also:",
        "warning:",
        "warnings:",
    ];
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    // The indentation of the open section's heading, and the entry being read (with its own).
    let mut section: Option<usize> = None;
    let mut current: Option<(String, usize)> = None;
    for line in description.lines().take(400) {
        let trimmed = line.trim();
        let indent = line.len() - line.trim_start().len();
        let lowered = trimmed.to_lowercase();
        if OPENS.contains(&lowered.as_str()) {
            section = Some(indent);
            current = None;
            continue;
        }
        if CLOSES.contains(&lowered.as_str()) {
            section = None;
            current = None;
            continue;
        }
        let Some(heading) = section else {
            continue;
        };
        if trimmed.is_empty() {
            continue;
        }
        match (&current, ENTRY.captures(line)) {
            (Some((name, at)), _) if indent > *at => {
                if let Some(text) = out.get_mut(name) {
                    if !text.is_empty() {
                        text.push(' ');
                    }
                    text.push_str(trimmed);
                }
            }
            (_, Some(c)) if indent > heading || trimmed.starts_with(['-', '*']) => {
                let name = c[1].to_string();
                out.insert(name.clone(), c[2].trim().to_string());
                current = Some((name, indent));
            }
            _ => {
                section = None;
                current = None;
            }
        }
    }
    out
}

/// Lists a text gives for a noun: "Supported formats: png, svg, pdf", "Allowed types are
/// note, task", "Valid modes = fast | slow": the noun (singular, lower case) and the values.
pub fn allowed_lists_in(text: &str) -> Vec<(String, Vec<String>)> {
    static PHRASE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)\b(?:allowed|permitted|supported|valid|available|accepted)\s+([a-z]{3,20})\s*(?:(?:are|is|include)\b\s*:?|[:=])\s*([^.\n]{1,300})",
        )
        .expect("static regex")
    });
    // In a tool's description a list in parentheses is one of values only after a noun that
    // names a kind of value ("format (png, svg)"); "a user (name, email, role)" lists fields.
    const KIND_NOUNS: &[&str] = &[
        "format",
        "formats",
        "type",
        "types",
        "mode",
        "modes",
        "kind",
        "kinds",
        "level",
        "style",
        "unit",
        "units",
        "language",
        "method",
        "operation",
        "action",
        "order",
        "category",
        "status",
        "encoding",
        "algorithm",
        "strategy",
        "scope",
        "priority",
    ];
    PHRASE
        .captures_iter(text)
        .chain(PARENTHESISED.captures_iter(text).filter(|c| {
            c.get(1)
                .is_some_and(|n| KIND_NOUNS.contains(&n.as_str().to_lowercase().as_str()))
        }))
        .take(8)
        .filter_map(|c| {
            let noun = super::pool::singular(&c.get(1)?.as_str().to_lowercase());
            let values: Vec<String> = c
                .get(2)?
                .as_str()
                .split([',', ' ', '|', ';'])
                .map(|w| w.trim_matches(|c: char| "`'\"()[]".contains(c)))
                .filter(|w| {
                    !w.is_empty()
                        && !matches!(*w, "and" | "or" | "the")
                        && w.len() <= 30
                        && w.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
                })
                .map(str::to_string)
                .collect();
            (!values.is_empty()).then_some((noun, values))
        })
        .collect()
}

/// Commands a server's environment or command line allows: the values of variables named
/// like `ALLOWED_COMMANDS` and of options like `--allowed-commands`.
pub fn allowed_commands_from(env: &[(String, String)], args: &[String]) -> Vec<String> {
    let names_allowlist = |k: &str| {
        let k = k.to_uppercase().replace('-', "_");
        (k.contains("ALLOW") || k.contains("WHITELIST") || k.contains("PERMIT"))
            && (k.contains("COMMAND") || k.contains("CMD"))
    };
    let split = |v: &str| -> Vec<String> {
        v.split([',', ' ', ';', ':'])
            .map(str::trim)
            .filter(|c| !c.is_empty() && c.len() <= 30 && !c.contains('/'))
            .map(str::to_string)
            .collect()
    };
    let mut out = Vec::new();
    for (k, v) in env {
        if names_allowlist(k) {
            out.extend(split(v));
        }
    }
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        if !a.starts_with('-') || !names_allowlist(a) {
            continue;
        }
        match a.split_once('=') {
            Some((_, v)) => out.extend(split(v)),
            None => {
                if let Some(v) = it.next_if(|v| !v.starts_with('-')) {
                    out.extend(split(v));
                }
            }
        }
    }
    out.dedup();
    out
}

/// The one non-null branch of an `anyOf`/`oneOf` that allows null, with the outer schema's
/// description and title (and its default unless that is null), when the schema is that.
fn optional_inner(schema: &Map<String, Value>) -> Option<Map<String, Value>> {
    let branches = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array)?;
    let is_null = |b: &Value| b.get("type").and_then(Value::as_str) == Some("null");
    let mut non_null = branches.iter().filter(|b| !is_null(b));
    let inner = non_null.next()?.as_object()?.clone();
    if non_null.next().is_some() || !branches.iter().any(is_null) {
        return None;
    }
    let mut merged = inner;
    for key in ["description", "title", "examples"] {
        if let Some(v) = schema.get(key) {
            merged.entry(key.to_string()).or_insert_with(|| v.clone());
        }
    }
    if let Some(d) = schema.get("default").filter(|d| !d.is_null()) {
        merged.insert("default".into(), d.clone());
    }
    Some(merged)
}

/// The relative path a path parameter's schema gives as its example or default, if any.
fn relative_path_example(name: &str, schema: &Map<String, Value>) -> Option<String> {
    if schema.get("type").and_then(Value::as_str) != Some("string")
        || schema.contains_key("enum")
        || schema.contains_key("pattern")
    {
        return None;
    }
    let ws = words(name);
    let last = ws.last().map(String::as_str).unwrap_or("");
    if !PATH_WORDS.contains(&last) {
        return None;
    }
    let example = schema
        .get("examples")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
        .or_else(|| schema.get("default"))
        .and_then(Value::as_str)?;
    let looks_relative = !example.starts_with('/')
        && !example.contains("://")
        && !example.contains(char::is_whitespace)
        && example.contains('.')
        && example.len() <= 200;
    looks_relative.then(|| example.to_string())
}

/// A few words a file contains, read from the file itself: the first line of a text file, the
/// first paragraph of a Word document; `None` for other binary files.
pub fn sample_text(path: &Path) -> Option<String> {
    let words = |line: &str| -> Option<String> {
        let w: Vec<&str> = line.split_whitespace().take(2).collect();
        (!w.is_empty()).then(|| w.join(" "))
    };
    // Office packages: (extension, the part with the text, its paragraph and text tags).
    let office = [
        ("docx", "word/document.xml", "w"),
        ("pptx", "ppt/slides/slide1.xml", "a"),
    ];
    if let Some((_, part, ns)) = office
        .iter()
        .find(|(ext, _, _)| path.extension().is_some_and(|e| e == *ext))
    {
        let file = std::fs::File::open(path).ok()?;
        let mut archive = zip::ZipArchive::new(file).ok()?;
        let mut xml = String::new();
        let entry = archive.by_name(part).ok()?;
        std::io::Read::read_to_string(&mut std::io::Read::take(entry, 1 << 20), &mut xml).ok()?;
        let (open_plain, open_attrs, close_tag) = (
            format!("<{ns}:t>"),
            format!("<{ns}:t "),
            format!("</{ns}:t>"),
        );
        // The first paragraph with text, its runs joined (an edit splits a paragraph's text
        // into several runs).
        for paragraph in xml.split(&format!("</{ns}:p>")).take(200) {
            let mut text = String::new();
            let mut rest = paragraph;
            while let Some(start) = [rest.find(&open_plain), rest.find(&open_attrs)]
                .into_iter()
                .flatten()
                .min()
            {
                let open_end = start + rest[start..].find('>')? + 1;
                let close = open_end + rest[open_end..].find(&close_tag)?;
                text.push_str(&rest[open_end..close]);
                rest = &rest[close..];
            }
            if let Some(w) = words(&text) {
                return Some(w);
            }
        }
        return None;
    }
    let mut head = vec![0u8; 4096];
    let n = std::io::Read::read(&mut std::fs::File::open(path).ok()?, &mut head).ok()?;
    let text = std::str::from_utf8(&head[..n]).ok()?;
    text.lines()
        .map(|l| l.trim_start_matches(['#', ' ', '-', '*']).trim())
        .find(|l| !l.is_empty() && !l.starts_with(['{', '[']))
        .and_then(words)
}

/// The kind of file (an extension the default seed has a file of) that `text` (a tool's or a
/// parameter's name and description, or an error) is about, if one: the first named.
pub fn file_kind(text: &str) -> Option<&'static str> {
    const KINDS: &[(&str, &str)] = &[
        (".xlsx", "xlsx"),
        (".xlsm", "xlsx"),
        ("excel", "xlsx"),
        ("workbook", "xlsx"),
        ("spreadsheet", "xlsx"),
        ("xlsx", "xlsx"),
        (".docx", "docx"),
        ("docx", "docx"),
        ("word document", "docx"),
        ("word文档", "docx"),
        ("word 文档", "docx"),
        ("microsoft word", "docx"),
        (".pptx", "pptx"),
        ("pptx", "pptx"),
        ("powerpoint", "pptx"),
        ("presentation", "pptx"),
        ("slide deck", "pptx"),
        (".pdf", "pdf"),
        ("pdf", "pdf"),
        (".csv", "csv"),
        ("csv", "csv"),
        (".tsv", "csv"),
        (".ipynb", "ipynb"),
        ("notebook", "ipynb"),
        ("jupyter", "ipynb"),
        (".png", "png"),
        (".jpg", "png"),
        ("image", "png"),
        ("picture", "png"),
        ("photo", "png"),
        ("screenshot", "png"),
        ("markdown", "md"),
        (".md", "md"),
        (".json", "json"),
        (".zip", "zip"),
        ("zip archive", "zip"),
        ("archive file", "zip"),
        ("archive path", "zip"),
        ("the archive", "zip"),
        ("an archive", "zip"),
        (".py", "py"),
        ("python file", "py"),
        ("source file", "py"),
        ("source code", "py"),
        ("syntax tree", "py"),
        ("detect language", "py"),
    ];
    let lowered = text.to_lowercase();
    KINDS
        .iter()
        .filter_map(|(word, kind)| {
            let at = lowered.find(word)?;
            // A word, not part of one ("pdfs" counts, "images" counts, "wordpress" does not).
            let before_ok = at == 0
                || word.starts_with('.')
                || !lowered[..at]
                    .chars()
                    .next_back()
                    .is_some_and(|c| c.is_ascii_alphanumeric());
            before_ok.then_some((at, *kind))
        })
        .min_by_key(|(at, _)| *at)
        .map(|(_, kind)| kind)
}

/// The URL given to parameters that take one: a page under a reserved test name, plain HTTP,
/// which the network observer answers with a small HTML page (so that a fetcher reaches the
/// code that handles pages); URLs by schema format end in `.txt`, which it answers with text.
pub const TEST_URL: &str = "http://example.test/guide.html";

/// Words that make a parameter a path when they end its name.
const PATH_WORDS: &[&str] = &[
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

/// A schema that is a string and nothing more: no `enum`, `const`, `pattern`, `format` or
/// composition, which always win over meaning, and (unless `over_defaults`) no `default` or
/// `examples`.
fn is_plain(schema: &Map<String, Value>, over_defaults: bool) -> bool {
    schema
        .keys()
        .all(|k| is_plain_key(k) || (over_defaults && matches!(k.as_str(), "default" | "examples")))
}

/// Keys that describe a string without constraining its content.
fn is_plain_key(key: &str) -> bool {
    matches!(
        key,
        "type" | "description" | "title" | "minLength" | "maxLength" | "$comment"
    )
}

fn fits_length(schema: &Map<String, Value>, v: &Value) -> bool {
    let len = v.as_str().map_or(0, |s| s.chars().count()) as u64;
    schema
        .get("minLength")
        .and_then(Value::as_u64)
        .is_none_or(|m| len >= m)
        && schema
            .get("maxLength")
            .and_then(Value::as_u64)
            .is_none_or(|m| len <= m)
}

/// The description and title of a schema, as one text.
fn describe(schema: &Map<String, Value>) -> String {
    ["description", "title"]
        .iter()
        .filter_map(|k| schema.get(*k).and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first structured example in a description: an object or array literal, in JSON or in
/// JavaScript literal syntax (unquoted keys, single quotes), parsed; only arrays and objects
/// with something in them.
pub fn structured_example_in(text: &str) -> Option<Value> {
    let mut from = 0;
    for _ in 0..8 {
        let start = from + text[from..].find(['[', '{'])?;
        if let Some(end) = balanced_end(&text[start..]) {
            let literal = &text[start..start + end];
            if let Ok(v) = json5::from_str::<Value>(literal) {
                let filled = match &v {
                    Value::Array(a) => a.iter().any(|e| e.is_object() || e.is_array()),
                    Value::Object(o) => !o.is_empty(),
                    _ => false,
                };
                if filled {
                    return Some(v);
                }
            }
        }
        from = start + 1;
    }
    None
}

/// The length of the bracketed literal `text` starts with (quotes respected), if it closes.
fn balanced_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '\'' | '"' => quote = Some(c),
            '[' | '{' => depth += 1,
            ']' | '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + c.len_utf8());
                }
            }
            _ => {}
        }
        if i > 20_000 {
            return None;
        }
    }
    None
}

/// The first quoted example in a description (`'America/New_York'`, `"local"`, `` `main` ``):
/// short, one word, at most 64 characters.
pub fn example_in(text: &str) -> Option<&str> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let q = bytes[i];
        if matches!(q, b'\'' | b'"' | b'`') {
            // An apostrophe inside a word (don't) is not a quote.
            let opening = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
            if opening {
                if let Some(len) = text[i + 1..].find(q as char) {
                    let inner = &text[i + 1..i + 1 + len];
                    let ok = !inner.is_empty()
                        && inner.len() <= 64
                        && !inner.chars().any(char::is_whitespace);
                    if ok {
                        return Some(inner);
                    }
                    i += len + 2;
                    continue;
                }
            }
        }
        i += 1;
    }
    None
}

/// A parameter name's words.
pub struct ParamWords {
    pub(crate) ws: Vec<String>,
}

impl ParamWords {
    /// Whether any word is in `list`.
    pub(crate) fn has(&self, list: &[&str]) -> bool {
        self.ws.iter().any(|w| list.contains(&w.as_str()))
    }

    /// The last word ("" for none).
    pub(crate) fn last(&self) -> &str {
        self.ws.last().map(String::as_str).unwrap_or("")
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
            sqlite: Some("data/app.db".into()),
            allowed_commands: Vec::new(),
            vocab: crate::workspace::vocab::Vocabulary::default(),
            packs: Default::default(),
            repository: None,
        };
        let tool =
            parse_tool(&json!({"name": name, "inputSchema": {"type": "object"}}), 0).expect("tool");
        Semantics::new(&facts, &tool)
    }

    #[test]
    fn a_path_its_description_calls_a_repository_is_the_workspace() {
        let s = sem("git_status");
        let described = |d: &str| json!({"type": "string", "description": d});
        let repo = described("Path to the Git repository. Defaults to the session's.");
        assert_eq!(
            s.value_for("path", repo.as_object().expect("obj")),
            Some(json!("/w"))
        );
        // Anchored: a file relative to the repository's root stays a file.
        let file = described("Path to the file to read, relative to the root of the repository");
        let v = s.value_for("path", file.as_object().expect("obj"));
        assert!(
            v.as_ref()
                .and_then(Value::as_str)
                .is_some_and(|p| p != "/w"),
            "{v:?}"
        );
        // A tool that creates a directory gets a new one.
        let made = sem("create_directory");
        let dir = described("Path of the directory to create");
        let v = made.value_for("path", dir.as_object().expect("obj"));
        assert!(
            v.as_ref()
                .and_then(Value::as_str)
                .is_some_and(|p| p.starts_with("/w/")),
            "{v:?}"
        );
    }

    #[test]
    fn a_command_given_as_an_argv_array_is_an_allowed_command_word_by_word() {
        let facts = WorkspaceFacts {
            root: PathBuf::from("/w"),
            files: vec!["notes.txt".into()],
            dirs: Vec::new(),
            sqlite: None,
            allowed_commands: Vec::new(),
            vocab: crate::workspace::vocab::Vocabulary::default(),
            packs: Default::default(),
            repository: None,
        };
        let tool = parse_tool(
            &json!({"name": "shell_execute", "inputSchema": {"type": "object"},
                    "description": "Execute an allowed command.\nAllowed commands: touch, cat, find, wc\nDefault timeout: 30s"}),
            0,
        )
        .expect("tool");
        let argv = json!({"type": "array", "items": {"type": "string"}});
        let argv = argv.as_object().expect("obj");
        assert_eq!(
            Semantics::new(&facts, &tool).value_for("command", argv),
            Some(json!(["cat", "notes.txt"]))
        );
        // With nothing said about what is allowed, a harmless echo.
        let v = sem("run").value_for("argv", argv).expect("argv");
        assert_eq!(v[0], "echo", "{v}");
    }

    #[test]
    fn paths_inside_a_document_are_its_root_and_regex_patterns_are_words() {
        let sem = sem("filter_objects");
        let value = |name: &str, hint: &str| {
            let schema = json!({"type": "string", "description": hint});
            sem.value_for(name, schema.as_object().expect("obj"))
        };
        // universal-json-agent's docstrings, a JSONPath and a JSON Pointer.
        for (hint, root) in [
            (
                "Dot-notation path to the array (e.g. \"products\", \"data.users\").",
                "",
            ),
            (
                "Dot-notation path to the object to flatten. Empty means root.",
                "",
            ),
            ("JSONPath expression, e.g. $.store.book", "$"),
            ("A JSON Pointer to the value to read", ""),
        ] {
            let v = value("path", hint);
            assert_eq!(v, Some(json!(root)), "{hint}");
        }
        // A path to a JSON file is a file's.
        let file = value("path", "Path to the JSON file to load");
        assert!(file.is_some_and(|f| f.as_str().is_some_and(|f| f.starts_with("/w/"))));
        // ripgrep's "(regex by default)": a word, never a glob; a glob stays a glob.
        let term = crate::workspace::vocab::Vocabulary::default()
            .term()
            .to_string();
        for hint in [
            "The search pattern (regex by default)",
            "A substring or regex pattern to search for.",
        ] {
            let v = value("pattern", hint);
            assert_eq!(v, Some(json!(term)), "{hint}");
        }
        let glob = value("filePattern", "Filter by file type or glob");
        assert_eq!(glob, Some(json!("*.txt")));
    }

    #[test]
    fn a_list_where_an_object_was_wanted_and_member_less_items_shown_in_an_example() {
        // universal-json-agent's flatten (the path documented in its docstring only) and
        // multi_filter (its conditions' members shown only in the description's example).
        let flatten = parse_tool(
            &json!({"name": "flatten",
                    "description": "Flatten a nested JSON object.\n\nArgs:\n    alias: The alias.\n    path: Dot-notation path to the object to flatten. Empty means root.\n",
                    "inputSchema": {"type": "object", "properties": {
                        "alias": {"type": "string"}, "path": {"type": "string", "default": ""}}}}),
            0,
        )
        .expect("tool");
        assert_eq!(
            first_item_path(&flatten, "path", None).as_deref(),
            Some("0")
        );
        assert_eq!(
            first_item_path(&flatten, "path", Some("users")).as_deref(),
            Some("users.0")
        );
        assert_eq!(first_item_path(&flatten, "alias", None), None);
        let described = |d: &str| {
            parse_tool(
                &json!({"name": "pick", "inputSchema": {"type": "object", "properties": {
                    "at": {"type": "string", "description": d}}}}),
                0,
            )
            .expect("tool")
        };
        let jsonpath = described("JSONPath expression, e.g. $.store.book");
        assert_eq!(
            first_item_path(&jsonpath, "at", None).as_deref(),
            Some("$[0]")
        );
        let pointer = described("A JSON Pointer to the value to read");
        assert_eq!(first_item_path(&pointer, "at", None).as_deref(), Some("/0"));
        let multi_filter = parse_tool(
            &json!({"name": "multi_filter",
                    "description": "Filter with conditions.\n\n        Examples:\n          - [{\"field\": \"status\", \"operator\": \"eq\", \"value\": \"active\"},\n             {\"field\": \"score\", \"operator\": \"gt\", \"value\": 80}]\n",
                    "inputSchema": {"type": "object", "properties": {
                        "conditions": {"type": "array",
                                       "items": {"type": "object", "additionalProperties": true}}}}}),
            0,
        )
        .expect("tool");
        let sem = Semantics::new(&sem("x").facts, &multi_filter);
        let schema = multi_filter.input_schema["properties"]["conditions"].clone();
        assert_eq!(
            sem.value_for("conditions", schema.as_object().expect("obj")),
            Some(json!([{"field": "status", "operator": "eq", "value": "active"}]))
        );
        assert!(object_examples("No example here [1, 2] or [{broken").is_empty());
    }

    #[test]
    fn inline_documented_lists_and_directories_to_remove() {
        // halflife-mcp's docstring documents its parameters inline, sentence by sentence.
        let facts = WorkspaceFacts {
            root: PathBuf::from("/w"),
            files: vec!["docs/readme.md".into(), "notes.txt".into()],
            dirs: vec!["docs".into(), ".git".into()],
            sqlite: None,
            allowed_commands: Vec::new(),
            vocab: crate::workspace::vocab::Vocabulary::default(),
            packs: Default::default(),
            repository: None,
        };
        let tool = parse_tool(
            &json!({"name": "memory_remember", "description": "Store one memory. kind: preference | procedural | fact | episodic | trace.\n        content: the memory itself, short.",
                "inputSchema": {"type": "object", "properties": {"kind": {"title": "Kind", "type": "string"}, "content": {"type": "string"}}}}),
            0,
        )
        .expect("tool");
        let sem = Semantics::new(&facts, &tool);
        let kind = json!({"title": "Kind", "type": "string"});
        assert_eq!(
            sem.value_for("kind", kind.as_object().expect("obj")),
            Some(json!("preference"))
        );
        // A tool that removes a directory never gets the workspace itself; its working
        // directory stays the workspace.
        let tool = parse_tool(
            &json!({"name": "removeDirectory", "inputSchema": {"type": "object"}}),
            0,
        )
        .expect("tool");
        let sem = Semantics::new(&facts, &tool);
        let s = json!({"type": "string", "description": "Directory path"});
        assert_eq!(
            sem.value_for("path", s.as_object().expect("obj")),
            Some(json!("/w/docs"))
        );
        let s =
            json!({"type": "string", "description": "Working directory for directory operation"});
        assert_eq!(
            sem.value_for("workingDirectory", s.as_object().expect("obj")),
            Some(json!("/w"))
        );
    }

    #[test]
    fn paths_follow_what_the_tool_does() {
        let v = crate::workspace::vocab::Vocabulary::default();
        let s = json!({"type": "string"});
        let s = s.as_object().expect("obj");
        let cases = [
            ("read_text_file", "path", json!("/w/notes.txt")),
            (
                "write_file",
                "path",
                json!(format!("/w/{}.txt", v.new_stem())),
            ),
            (
                "create_directory",
                "path",
                json!(format!("/w/{}", v.new_dir())),
            ),
            ("list_directory", "path", json!("/w")),
            ("directory_tree", "path", json!("/w")),
            ("search_files", "path", json!("/w")),
            ("get_file_info", "path", json!("/w/notes.txt")),
            ("list_directory", "directory", json!("/w")),
            (
                "move_file",
                "destination",
                json!(format!("/w/{}.txt", v.moved_stem())),
            ),
            ("move_file", "source", json!("/w/notes.txt")),
            ("fetch", "url", json!(TEST_URL)),
            ("git_add", "repo_path", json!("/w")),
            ("git_diff", "target", json!("HEAD")),
            ("git_show", "revision", json!("HEAD")),
            ("git_create_branch", "branch_name", json!(v.branch)),
            ("git_checkout", "branch_name", json!("main")),
            ("git_clone", "url", json!("/w")),
            ("send", "to_email", json!(v.email())),
            ("run", "command", json!(format!("echo {}", v.term()))),
            ("get_item", "item_id", json!("1")),
            (
                "get_item",
                "uuid",
                json!("00000000-0000-4000-8000-000000000001"),
            ),
            ("edit_file", "oldText", json!(v.term())),
            ("search_files", "pattern", json!("*.txt")),
            ("read_query", "sql", json!("SELECT * FROM items")),
            (
                "write_query",
                "sql",
                json!(format!("INSERT INTO items (name) VALUES ('{}')", v.term())),
            ),
            (
                "create_table",
                "sql",
                json!(format!(
                    "CREATE TABLE IF NOT EXISTS {} (id INTEGER PRIMARY KEY, note TEXT)",
                    v.table()
                )),
            ),
            (
                "update_rows",
                "sql",
                json!(format!(
                    "UPDATE items SET name = '{}' WHERE id = 1",
                    v.term()
                )),
            ),
            ("describe_table", "table_name", json!("items")),
            ("open", "db_path", json!("/w/data/app.db")),
            ("open", "database", json!("/w/data/app.db")),
        ];
        for (tool, param, want) in cases {
            assert_eq!(sem(tool).value_for(param, s), Some(want), "{tool}.{param}");
        }
        // A web address by format, even without a telling name.
        let uri = json!({"type": "string", "format": "uri", "minLength": 1});
        assert_eq!(
            sem("fetch").value_for("target", uri.as_object().expect("obj")),
            Some(json!(TEST_URL))
        );
        assert_eq!(sem("x").value_for("count", s), None);
        // Unsure what a tool does with a path: an existing file, then a fresh name.
        assert_eq!(
            sem("frobnicate").value_for("path", s),
            Some(json!("/w/notes.txt"))
        );
        assert_eq!(
            sem("frobnicate").over_defaults().value_for("path", s),
            Some(json!(format!("/w/{}.txt", v.new_stem())))
        );
        let described = |d: &str| json!({"type": "string", "description": d});
        let tz = described("IANA timezone name (e.g., 'America/New_York', 'Europe/London').");
        let tz = tz.as_object().expect("obj");
        assert_eq!(
            sem("get_current_time").value_for("timezone", tz),
            Some(json!("America/New_York"))
        );
        let kind = described("Whether to list local branches ('local') or all ('all').");
        let kind = kind.as_object().expect("obj");
        assert_eq!(
            sem("git_branch").value_for("branch_type", kind),
            Some(json!("local"))
        );
        let hhmm = described("Time to convert in 24-hour format (HH:MM)");
        assert_eq!(
            sem("convert_time").value_for("time", hhmm.as_object().expect("obj")),
            Some(json!("12:30"))
        );
        let files = json!({"type": "array", "items": {"type": "string"}, "minItems": 1});
        let files = files.as_object().expect("obj");
        assert_eq!(
            sem("git_add").value_for("files", files),
            Some(json!(["/w/notes.txt"]))
        );
        let two = json!({"type": "array", "items": {"type": "string"}, "minItems": 2});
        assert_eq!(
            sem("git_add").value_for("files", two.as_object().expect("obj")),
            None
        );
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
    fn values_a_description_lists_are_taken_for_the_parameter_they_are_for() {
        let with = |description: &str, param: &str, param_description: &str| {
            let tool = parse_tool(
                &json!({"name": "render", "description": description,
                        "inputSchema": {"type": "object", "properties": {
                            param: {"type": "string", "description": param_description}}}}),
                0,
            )
            .expect("tool");
            let facts = WorkspaceFacts {
                root: PathBuf::from("/w"),
                ..Default::default()
            };
            Semantics::new(&facts, &tool).value_for(
                param,
                tool.input_schema["properties"][param]
                    .as_object()
                    .expect("schema"),
            )
        };
        // The tool's description names the noun; the parameter is named by it.
        assert_eq!(
            with(
                "Renders a diagram. Supported formats: svg, png, pdf.",
                "output_format",
                ""
            ),
            Some(json!("svg"))
        );
        // The parameter's own description lists its values.
        assert_eq!(
            with("Renders a diagram.", "theme", "One of: dark, light"),
            Some(json!("dark"))
        );
        // A command keeps its own, stricter choice.
        assert_ne!(
            with("Runs a command.", "command", "One of: rm, ls"),
            Some(json!("rm"))
        );
        // A list for another noun says nothing of this parameter.
        assert_eq!(
            with("Supported formats: svg, png.", "theme", "The theme"),
            None
        );
        // A list in parentheses after the noun (an image converter's).
        assert_eq!(
            with(
                "Converts a single image to a specified format (jpeg, png, webp, heic, avif, bmp, tiff, ico)",
                "target_format",
                ""
            ),
            Some(json!("jpeg"))
        );
        // Two words in parentheses are an aside, not a list.
        assert_eq!(
            with(
                "Renders in a format (svg or png) of your choice",
                "format",
                ""
            ),
            None
        );
        assert_eq!(
            allowed_lists_in("Allowed types are note, task. Valid modes = fast | slow"),
            [
                (
                    "type".to_string(),
                    vec!["note".to_string(), "task".to_string()]
                ),
                (
                    "mode".to_string(),
                    vec!["fast".to_string(), "slow".to_string()]
                )
            ]
        );
    }

    #[test]
    fn a_docstrings_args_describe_parameters_the_schema_leaves_undescribed() {
        // A FastMCP server's description (a command-line server's docstring).
        let description = "
            Approve a command type for the current session.

            Args:
                command_type: The command type to approve (read, write, system)
                session_id: The session ID.
                    Continued on the next line.
                remember (bool): Whether to remember the approval

            Returns:
                success: a dictionary
            ";
        let documented = documented_parameters(description);
        assert_eq!(
            documented.get("command_type").map(String::as_str),
            Some("The command type to approve (read, write, system)")
        );
        assert_eq!(
            documented.get("session_id").map(String::as_str),
            Some("The session ID. Continued on the next line.")
        );
        assert!(documented.contains_key("remember"));
        assert!(!documented.contains_key("success"), "{documented:?}");
        // An entry whose text is on the next line; prose after the section is not an entry.
        let next_line = documented_parameters(
            "Reads a file.\n\nArgs:\n    path:\n        The file to read.\n\nNote: it must exist.\n",
        );
        assert_eq!(
            next_line.get("path").map(String::as_str),
            Some("The file to read.")
        );
        assert!(!next_line.contains_key("Note"), "{next_line:?}");
        // A field list after a noun that names no kind of value lists fields, not values, and
        // "e.g." is no value.
        assert!(allowed_lists_in("Creates a user (name, email, role)").is_empty());
        assert_eq!(
            parenthesised_lists("The language (e.g., en, fr, de)"),
            [(
                "language".to_string(),
                vec!["en".to_string(), "fr".to_string(), "de".to_string()]
            )]
        );
        // Parameters in a list (a Word server's, in Chinese).
        let listed =
            documented_parameters("创建新的Word文档\n\nParameters:\n- file_path: 文档保存路径\n");
        assert_eq!(
            listed.get("file_path").map(String::as_str),
            Some("文档保存路径")
        );
        // The value comes from the docstring's list.
        let tool = parse_tool(
            &json!({"name": "approve_command_type", "description": description,
                    "inputSchema": {"type": "object", "properties": {
                        "command_type": {"type": "string", "title": "Command Type"}}}}),
            0,
        )
        .expect("tool");
        let facts = WorkspaceFacts {
            root: PathBuf::from("/w"),
            ..Default::default()
        };
        assert_eq!(
            Semantics::new(&facts, &tool).value_for(
                "command_type",
                tool.input_schema["properties"]["command_type"]
                    .as_object()
                    .expect("schema")
            ),
            Some(json!("read"))
        );
    }

    #[test]
    fn examples_are_quoted_single_words() {
        assert_eq!(example_in("Use 'Etc/UTC' as local"), Some("Etc/UTC"));
        assert_eq!(
            example_in("don't use \"two words\" but `main`"),
            Some("main")
        );
        assert_eq!(example_in("no quotes here"), None);
        assert_eq!(
            structured_example_in(
                "Tasks, example: [{name: 'a', deps: ['b'], files: [{path: 'x', line: 1}]}, {name: 'c'}]"
            ),
            Some(
                serde_json::json!([{"name": "a", "deps": ["b"], "files": [{"path": "x", "line": 1}]}, {"name": "c"}])
            )
        );
        assert_eq!(
            structured_example_in("JSON like {\"a\": 1} (see [docs])"),
            Some(serde_json::json!({"a": 1}))
        );
        assert_eq!(structured_example_in("a list [1, 2] or [x]"), None);
        assert_eq!(structured_example_in("unclosed [{a: 1"), None);
        assert_eq!(
            allowed_commands_from(
                &[("ALLOWED_COMMANDS".into(), "ls,cat".into())],
                &["--allowed-commands".into(), "pwd".into()]
            ),
            ["ls", "cat", "pwd"]
        );
        assert_eq!(
            allowed_commands_in("Runs a shell command. Allowed commands: ls, cat, git."),
            ["ls", "cat", "git"]
        );
        assert!(allowed_commands_in("Runs a command.").is_empty());
        // "an allowed command as an argv array" is prose, not the list that follows.
        assert_eq!(
            allowed_commands_in(
                "Execute an allowed command as an argv array on the host. Allowed commands run with \
                 the server's authority.\nAllowed commands: touch, cat, ls\nAllowed patterns: "
            ),
            ["touch", "cat", "ls"]
        );
        assert_eq!(
            allowed_commands_in("The allowed commands are ls and pwd."),
            ["ls", "pwd"]
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let docx = dir.path().join("r.docx");
        std::fs::write(&docx, crate::workspace::documents::docx()).expect("write");
        assert_eq!(sample_text(&docx).as_deref(), Some("Quarterly report"));
        let pptx = dir.path().join("d.pptx");
        std::fs::write(&pptx, crate::workspace::documents::pptx()).expect("write");
        assert_eq!(sample_text(&pptx).as_deref(), Some("Quarterly review"));
        assert_eq!(file_kind("Path to the PowerPoint file"), Some("pptx"));
        let md = dir.path().join("r.md");
        std::fs::write(&md, "# Title here\n\nbody").expect("write");
        assert_eq!(sample_text(&md).as_deref(), Some("Title here"));
        assert_eq!(example_in("unclosed 'quote"), None);
    }

    #[test]
    fn words_split_camel_and_snake_case() {
        assert_eq!(words("readTextFile"), ["read", "text", "file"]);
        assert_eq!(words("old_text"), ["old", "text"]);
    }
}
