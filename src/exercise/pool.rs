//! The value pool: what the server handed out, kept for later calls. Every response is read
//! (structuredContent, text content, JSON inside text, resource links) for values that name
//! things a later tool may take: ids, UUIDs, pids, session and cursor tokens, names of
//! entities (projects, vaults, sheets, tables, branches), revisions, paths and URLs; the
//! seeded workspace adds its own (its repository's branches, commits and remotes). Each
//! value is typed ([`ValueKind`]), keeps the words of the key it came under, where it came
//! from ([`Provenance`]: a listing, a creation, an error's offer, the workspace) and whether
//! the thing still exists (a process stopped or a session closed is not reused), so a later
//! parameter (`taskId`, `pid`, `vault`, a revision) takes the best match by name, kind and
//! origin, and the report can say where a pooled argument came from.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::packs::Packs;

use super::semantics::words;

/// Values kept at most (the oldest go first).
const MAX_VALUES: usize = 400;
/// Strings longer than this are not names or ids.
const MAX_VALUE_CHARS: usize = 200;
/// Array elements read per array.
const MAX_ELEMENTS: usize = 25;
/// How deep a response is walked.
const MAX_DEPTH: usize = 8;
/// An object an answer held (its scalar members and lists of strings) and where it came from.
type HeldObject = (Map<String, Value>, String);

/// Objects kept at most, and members an object kept has at most.
const MAX_OBJECTS: usize = 64;
const MAX_OBJECT_MEMBERS: usize = 12;
/// Lines of text remembered as seen, at most.
const MAX_SEEN_LINES: usize = 10_000;
/// Answers whose lines of text are kept.
const MAX_TEXT_ANSWERS: usize = 8;
/// Keys under which an answer shows text as it stands (a paragraph's, a file's).
const TEXT_KEYS: &[&str] = &[
    "text",
    "content",
    "body",
    "paragraph",
    "line",
    "snippet",
    "preview",
    "excerpt",
];

/// What a pooled value names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// An identifier (`id`, `taskId`, a UUID).
    Id,
    /// A process id.
    Pid,
    /// A session, connection or cursor token.
    Session,
    /// A revision: a commit or a branch (a tag is a name: notes have tags too).
    Revision,
    /// A remote's name.
    Remote,
    /// A path or file name.
    Path,
    /// A URL or URI.
    Url,
    /// The name or title of a thing.
    Name,
}

impl ValueKind {
    /// The kind of a value kept under key words `key`.
    /// Decided by the key's last word first: `commit.url` is a URL and `commit.title` a
    /// name, not revisions; a tag is a name (notes have tags too).
    fn of(key: &[String], value: &Value) -> ValueKind {
        let has = |list: &[&str]| key.iter().any(|w| list.contains(&w.as_str()));
        let last = key.last().map(String::as_str).unwrap_or("");
        const PATHS: &[&str] = &["path", "file", "filename", "filepath", "dir", "directory"];
        if last == "pid" {
            ValueKind::Pid
        } else if matches!(last, "uri" | "url" | "href" | "link") {
            ValueKind::Url
        } else if PATHS.contains(&last) {
            ValueKind::Path
        } else if has(&["session", "cursor", "connection"]) {
            ValueKind::Session
        } else if has(&["remote"]) && matches!(last, "remote" | "name") {
            ValueKind::Remote
        } else if REVISION_WORDS.contains(&last)
            || (matches!(last, "name" | "id") && has(&["branch", "branches", "commit"]))
        {
            ValueKind::Revision
        } else if has(PATHS) {
            ValueKind::Path
        } else if has(&["uri", "url"]) {
            ValueKind::Url
        } else if REFERENCE_WORDS.contains(&last)
            || last.ends_with("id")
            || value.as_str().is_some_and(|s| UUID.is_match(s))
        {
            ValueKind::Id
        } else {
            ValueKind::Name
        }
    }
}

/// Last words of keys that name a revision.
const REVISION_WORDS: &[&str] = &[
    "commit", "commits", "sha", "hash", "revision", "rev", "branch", "branches", "oid", "treeish",
];

/// Where a pooled value came from; what the server listed, made or offered beats what the
/// workspace was seeded with, which beats nothing (an invented value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// The seeded workspace's own facts (its repository's branches, commits, remotes).
    Workspace,
    /// An error's list of accepted values.
    Offered,
    /// Another kind of answer.
    Answered,
    /// What a tool that creates, starts or opens something answered.
    Created,
    /// What a tool that lists, reads or searches answered.
    Listed,
}

impl Provenance {
    /// How much a value of this origin is worth. What the server said of its current state
    /// (a listing, a creation, an error's list of what exists) ranks alike: among those the
    /// freshest wins, since a later answer may show a rename the listing before did not.
    fn rank(self) -> u8 {
        match self {
            Provenance::Workspace => 0,
            Provenance::Answered => 1,
            Provenance::Offered | Provenance::Created | Provenance::Listed => 2,
        }
    }
}

/// One value the server handed out.
#[derive(Debug, Clone, PartialEq)]
pub struct Pooled {
    /// The value (a string or a number).
    pub value: Value,
    /// Words of the key it came under, with the enclosing key's (`tasks[0].id` → task, id).
    pub key: Vec<String>,
    /// What it names.
    pub kind: ValueKind,
    /// Where it came from.
    pub provenance: Provenance,
    /// The thing it names is gone: a process stopped, a session closed, an object a response
    /// said had ended. Never picked again.
    pub ended: bool,
    /// The tool whose response held it.
    pub tool: String,
    /// Where it came from, for the report ("create_task call 1: structuredContent.task.id").
    pub source: String,
}

/// A value chosen for a parameter, with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Pick {
    /// The value to send.
    pub value: Value,
    /// Where it came from.
    pub source: String,
}

/// Everything learned from responses so far.
#[derive(Debug, Clone)]
pub struct ValuePool {
    values: Vec<Pooled>,
    /// The branch the workspace's repository is on, and the commit it names: a parameter
    /// named for a branch takes it, one that names a revision to move to takes another.
    current_branch: Option<String>,
    head_commit: Option<String>,
    /// The commits the repository's other branches name.
    other_commits: Vec<String>,
    /// Words for things a server keeps by name: the core's, those of the packs in force and
    /// those the server's own listing tools name (`list_vaults`: vault).
    entities: Vec<String>,
    /// Lines of text the latest answers showed (a paragraph's `text`, a file's content), the
    /// latest answer last: what a parameter that must quote existing text can take.
    texts: Vec<Vec<String>>,
    /// Values and lines of text learned so far, ever (it only grows).
    learned: usize,
    /// Every line of text kept so far (bounded by the answers read).
    seen_lines: std::collections::HashSet<String>,
    /// Objects the answers held (`{"from": "Ada", "to": "Engine", "relationType": "wrote"}`),
    /// their scalar members (and lists of strings) only, the latest last, with where each
    /// came from: a parameter that takes such an object whole can take an existing one.
    objects: Vec<HeldObject>,
}

impl Default for ValuePool {
    /// An empty pool that knows the entities of every pack.
    fn default() -> Self {
        ValuePool::with_packs(&Packs::all())
    }
}

/// Last words of a parameter name that mean it refers to something that already exists.
const REFERENCE_WORDS: &[&str] = &[
    "id",
    "ids",
    "uuid",
    "guid",
    "pid",
    "handle",
    "token",
    "cursor",
    "session",
    "ref",
    "slug",
    "key",
    "identifier",
    // A version token a reader hands out and an editor checks (`file_hash`, `etag`).
    "hash",
    "etag",
];

/// Words for things any kind of server keeps by name (packs add their own).
const ENTITY_WORDS: &[&str] = &[
    "project",
    "table",
    "tag",
    "entity",
    "collection",
    "index",
    "database",
    "db",
    "repo",
    "repository",
    "notebook",
    "note",
    "document",
    "doc",
    "task",
    "workflow",
    "job",
    "process",
    "session",
    "model",
    "topic",
    "channel",
    "board",
    "list",
    "page",
    "space",
    "memory",
    "schema",
    "workspace",
    "bucket",
    "queue",
    "container",
    "terminal",
    "conversation",
    "thread",
    "user",
    "team",
    "item",
    "record",
    "resource",
    "order",
    "issue",
    "ticket",
    "event",
    "message",
    "comment",
    "node",
    "snapshot",
    "backup",
    "build",
    "deployment",
    "release",
    "artifact",
    "dataset",
];

/// Keys that only wrap an answer (`{"result": {"dataset": "sales"}}`): what they hold is
/// about the tool's entity, as at the top level.
const WRAPPER_KEYS: &[&str] = &[
    "result", "results", "data", "response", "payload", "output", "body", "value",
];

/// Keys whose values are names or ids worth keeping (besides entity words).
const KEPT_KEYS: &[&str] = &[
    "hash",
    "etag",
    "id",
    "ids",
    "uuid",
    "guid",
    "pid",
    "handle",
    "token",
    "cursor",
    "session",
    "name",
    "names",
    "title",
    "key",
    "slug",
    "ref",
    "identifier",
    "path",
    "file",
    "filename",
    "filepath",
    "uri",
    "url",
];

static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
        .expect("static regex")
});

/// "Task ID: abc-123", "process with PID 4242", "session_id=s-1", "id is 7".
static LABELLED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)(?:\b([a-z][a-z_]{1,30})[ _-]+)?\b(id|pid|uuid|identifier|token|handle|session[ _-]?id|session)\b\s*(?:[:=#]|is\b|of\b)?\s*([`'"\[(]?)([A-Za-z0-9][A-Za-z0-9_.:-]{0,80})"#,
    )
    .expect("static regex")
});

/// "Created task 'x'", "opened project `demo`", "vault "Notes"": a quoted name after an
/// entity word.
static QUOTED_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)\b([a-z]{2,20})s?\s*(?:named|called|name)?\s*[:=]?\s*[`'"]([^`'"\n]{1,80})[`'"]"#,
    )
    .expect("static regex")
});

/// Paths, and words too general to name a kind of thing (`list_names`, `list_types`).
const NOT_ENTITIES: &[&str] = &[
    "file",
    "dir",
    "directory",
    "folder",
    "path",
    "root",
    "tool",
    "name",
    "type",
    "key",
    "value",
    "item",
    "field",
    "option",
    "setting",
    "command",
    "resource",
    "prompt",
    "result",
    "match",
    "entry",
    "error",
    "warning",
    "message",
    "line",
    "data",
];

/// Kinds of things known at most (the core's, the packs' and those the server showed).
const MAX_ENTITIES: usize = 96;

/// Words that never label an id ("with PID 1", "the ID").
const FILLER: &[&str] = &[
    "with", "the", "a", "an", "new", "its", "your", "this", "that", "and", "of", "for", "has",
    "is", "was", "created", "started", "opened", "assigned", "given", "returned", "using",
];

impl ValuePool {
    /// An empty pool.
    pub fn new() -> ValuePool {
        ValuePool::default()
    }

    /// An empty pool that knows the entities of `packs` besides the core's.
    pub fn with_packs(packs: &Packs) -> ValuePool {
        ValuePool {
            values: Vec::new(),
            current_branch: None,
            head_commit: None,
            other_commits: Vec::new(),
            entities: ENTITY_WORDS
                .iter()
                .copied()
                .chain(packs.entities())
                .map(str::to_string)
                .collect(),
            texts: Vec::new(),
            learned: 0,
            seen_lines: Default::default(),
            objects: Vec::new(),
        }
    }

    /// The same, knowing as well the things the server's listing tools list: the word after
    /// `list` in a tool's name, when plural (`list_vaults`, `obsidian_list_vaults`: vault;
    /// not files or directories, which are paths).
    pub fn knowing_listed<'t>(
        mut self,
        tool_names: impl IntoIterator<Item = &'t str>,
    ) -> ValuePool {
        for name in tool_names {
            let ws = words(name);
            let listed = ws
                .iter()
                .position(|w| w == "list")
                .and_then(|i| ws.get(i + 1))
                .filter(|w| w.len() > 3 && w.ends_with('s'))
                .map(|w| singular(w));
            if let Some(noun) = listed {
                self.know_entity(noun);
            }
        }
        self
    }

    /// Knows the server's own tools by name, for parameters named for a tool (`tool_name`,
    /// a guidance or help tool's `tool`): the first listed is offered (a tool that reads,
    /// where listings come first).
    pub fn knowing_tools<'t>(mut self, tool_names: impl IntoIterator<Item = &'t str>) -> ValuePool {
        if let Some(first) = tool_names.into_iter().next() {
            self.values.push(Pooled {
                value: Value::String(first.to_string()),
                key: vec!["tool".into(), "name".into()],
                kind: ValueKind::Name,
                provenance: Provenance::Listed,
                ended: false,
                tool: "tools/list".into(),
                source: "tools/list: the server's tools".into(),
            });
            if !self.entities.iter().any(|e| e == "tool") {
                self.entities.push("tool".into());
            }
        }
        self
    }

    /// Knows `noun` as a thing the server keeps by name, unless it is too general or a path.
    fn know_entity(&mut self, noun: String) {
        if noun.len() >= 3
            && !NOT_ENTITIES.contains(&noun.as_str())
            && !self.entities.contains(&noun)
            && self.entities.len() < MAX_ENTITIES
        {
            self.entities.push(noun);
        }
    }

    /// Whether `w` names a thing the server keeps by name.
    fn is_entity(&self, w: &str) -> bool {
        self.entities.iter().any(|e| e == w)
    }

    /// Whether nothing was learned yet.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// How many values and lines of text it has learned, ever: a count that only grows, for
    /// telling whether anything new came since.
    pub fn learned(&self) -> usize {
        self.learned
    }

    /// How many values it holds.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Learns from the result of `tool`'s call `label` (the result object without `_meta`).
    pub fn learn(&mut self, tool: &str, label: &str, result: &Value) {
        let origin = format!("{tool} {label}");
        let provenance = provenance_of(tool);
        let tool_words: Vec<String> = words(tool);
        // What the response is about, for its top-level members: the tool's entity
        // (`register_project` answers `{"name": …}` about a project).
        let about: Vec<String> = objects_of(tool).into_iter().take(1).collect();
        self.texts.push(Vec::new());
        if let Some(s) = result.get("structuredContent") {
            let at = Walk {
                origin: &origin,
                tool,
                provenance,
                ended: false,
            };
            at.walk(self, s, &about, "structuredContent", 0);
        }
        let Some(Value::Array(items)) = result.get("content") else {
            self.close_text_group();
            return;
        };
        for (i, item) in items.iter().take(MAX_ELEMENTS).enumerate() {
            match item.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let Some(text) = item.get("text").and_then(Value::as_str) else {
                        continue;
                    };
                    let at = format!("content[{i}].text");
                    let walk = Walk {
                        origin: &origin,
                        tool,
                        provenance,
                        ended: false,
                    };
                    match json_in(text) {
                        Some(v) => walk.walk(self, &v, &about, &at, 0),
                        None => {
                            // What a reader shows is content; other tools' prose is a
                            // message about what they did ("Document copied to …").
                            if provenance == Provenance::Listed {
                                self.learn_text(text);
                            }
                            walk.prose(self, text, &tool_words, &at)
                        }
                    }
                }
                Some("resource_link") | Some("resource") => {
                    let r = item.get("resource").unwrap_or(item);
                    if let Some(uri) = r.get("uri").and_then(Value::as_str) {
                        self.add(
                            Value::String(uri.into()),
                            vec!["uri".into()],
                            (tool, provenance, false),
                            format!("{origin}: content[{i}].uri"),
                        );
                    }
                    if let Some(name) = r.get("name").and_then(Value::as_str) {
                        self.add(
                            Value::String(name.into()),
                            vec!["resource".into(), "name".into()],
                            (tool, provenance, false),
                            format!("{origin}: content[{i}].name"),
                        );
                    }
                }
                _ => {}
            }
        }
        self.close_text_group();
    }

    /// Ends the latest answer's group of lines: dropped when it kept none, the oldest group
    /// dropped beyond [`MAX_TEXT_ANSWERS`] answers with text.
    fn close_text_group(&mut self) {
        if self.texts.last().is_some_and(Vec::is_empty) {
            self.texts.pop();
        }
        if self.texts.len() > MAX_TEXT_ANSWERS {
            self.texts.remove(0);
        }
    }

    /// Keeps the lines of `text` (a paragraph, a file's content) with the latest answer's.
    fn learn_text(&mut self, text: &str) {
        let Some(group) = self.texts.last_mut() else {
            return;
        };
        for line in text.lines().take(MAX_ELEMENTS) {
            let line = line.trim();
            if group.len() < MAX_ELEMENTS
                && line.contains(' ')
                && line.chars().count() <= MAX_VALUE_CHARS
                && !group.iter().any(|l| l == line)
            {
                group.push(line.to_string());
                // Only a line no answer showed before is something new.
                if self.seen_lines.len() < MAX_SEEN_LINES
                    && self.seen_lines.insert(line.to_string())
                {
                    self.learned += 1;
                }
            }
        }
    }

    /// Keeps an object an answer held, by its scalar members and lists of strings, when it
    /// has two to a dozen of them.
    fn learn_object(&mut self, map: &Map<String, Value>, source: String) {
        if map.len() > 3 * MAX_OBJECT_MEMBERS {
            return;
        }
        let kept: Map<String, Value> = map
            .iter()
            .filter(|(_, v)| match v {
                Value::String(s) => s.chars().count() <= MAX_VALUE_CHARS,
                Value::Number(_) | Value::Bool(_) => true,
                Value::Array(items) => {
                    items.len() <= MAX_ELEMENTS && items.iter().all(Value::is_string)
                }
                _ => false,
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !(2..=MAX_OBJECT_MEMBERS).contains(&kept.len())
            || self.objects.iter().any(|(o, _)| *o == kept)
        {
            return;
        }
        if self.objects.len() >= MAX_OBJECTS {
            self.objects.remove(0);
        }
        self.objects.push((kept, source));
        self.learned += 1;
    }

    /// An object an answer held that has every member `schema` (an object's schema)
    /// requires, by name or by a name of the same meaning (`relationType` for `type`,
    /// `from` for `source`), given in the schema's own member names: an existing relation
    /// for a tool that updates or removes one. Two required members at least (one is no
    /// shape); the object with the most members named alike wins, then the latest.
    pub fn pick_object(&self, schema: &Map<String, Value>) -> Option<Pick> {
        let props = schema.get("properties")?.as_object()?;
        let required: Vec<&str> = schema
            .get("required")?
            .as_array()?
            .iter()
            .filter_map(Value::as_str)
            .collect();
        if required.len() < 2 || required.iter().any(|r| !props.contains_key(*r)) {
            return None;
        }
        let mut best: Option<(usize, &HeldObject)> = None;
        for entry in self.objects.iter().rev() {
            let object = &entry.0;
            let found = |member: &str| {
                object
                    .keys()
                    .find(|k| k.as_str() == member)
                    .map(|k| (k, true))
                    .or_else(|| {
                        object
                            .keys()
                            .find(|k| same_member(member, k))
                            .map(|k| (k, false))
                    })
            };
            let mut exact = 0;
            let mut complete = true;
            let mut used: Vec<&String> = Vec::new();
            for member in &required {
                match found(member) {
                    // Each required member its own key (`sourceId` and `targetId` do not
                    // both take an `id`).
                    Some((k, same))
                        if fits_member(&object[k], props.get(*member)) && !used.contains(&k) =>
                    {
                        used.push(k);
                        exact += usize::from(same);
                    }
                    _ => complete = false,
                }
            }
            if complete && best.is_none_or(|(e, _)| exact > e) {
                best = Some((exact, entry));
            }
        }
        let (_, (object, source)) = best?;
        let mut value = Map::new();
        for member in props.keys() {
            let key = object
                .keys()
                .find(|k| *k == member)
                .or_else(|| object.keys().find(|k| same_member(member, k)));
            if let Some(v) = key
                .map(|k| &object[k])
                .filter(|v| fits_member(v, props.get(member)))
            {
                value.insert(member.clone(), v.clone());
            }
        }
        Some(Pick {
            value: Value::Object(value),
            source: source.clone(),
        })
    }

    /// Existing text for a parameter that must quote some (`before`, `anchor`, a header),
    /// from the latest answer that showed any: its first line when `whole_line`, else a word
    /// of it (a small edit of a paragraph, not all of it); never one of `refused`.
    pub fn quoted_text(&self, whole_line: bool, refused: &[String]) -> Option<String> {
        let group = self.texts.iter().rev().find(|g| !g.is_empty())?;
        if whole_line {
            return group.iter().find(|l| !refused.contains(l)).cloned();
        }
        group.iter().find_map(|line| {
            line.split(|c: char| !c.is_alphanumeric())
                .find(|w| {
                    w.chars().count() >= 4
                        && w.chars().all(char::is_alphabetic)
                        && !refused.iter().any(|r| r == w)
                })
                .map(str::to_string)
        })
    }

    /// Learns the values an error offered for parameter `field` ("Available sheets: 'Summary'"):
    /// they exist on the server, so later tools take them for parameters of that name.
    pub fn learn_offered(&mut self, tool: &str, label: &str, field: &str, values: &[String]) {
        for v in values.iter().take(MAX_ELEMENTS) {
            if v.chars().count() <= MAX_VALUE_CHARS {
                self.add(
                    Value::String(v.clone()),
                    words(field),
                    (tool, Provenance::Offered, false),
                    format!("{tool} {label}: the error's list of values for {field}"),
                );
            }
        }
    }

    /// Learns the seeded workspace's own facts: its repository's branches (the current one
    /// known as such), the commits they name, its tags and remotes.
    pub fn know_workspace(&mut self, facts: &super::semantics::WorkspaceFacts) {
        let Some(repo) = &facts.repository else {
            return;
        };
        self.current_branch = repo.current.clone();
        self.head_commit = repo.head_commit().map(str::to_string);
        self.other_commits = repo
            .branches
            .iter()
            .filter(|(b, _)| Some(b) != repo.current.as_ref())
            .map(|(_, id)| id.clone())
            .collect();
        let from = ("", Provenance::Workspace, false);
        let text = |s: &str| Value::String(s.to_string());
        let source = |what: &str| format!("the workspace's repository: {what}");
        // The freshest wins ties: the current branch and its commit go last.
        for (branch, id) in repo.branches.iter().rev() {
            self.add(
                text(id),
                vec!["commit".into(), "sha".into()],
                from,
                source(&format!("the commit of branch {branch}")),
            );
            self.add(
                text(branch),
                vec!["branch".into(), "name".into()],
                from,
                source("a branch"),
            );
        }
        for (names, entity) in [(&repo.tags, "tag"), (&repo.remotes, "remote")] {
            for name in names {
                self.add(
                    text(name),
                    vec![entity.into(), "name".into()],
                    from,
                    source(&format!("a {entity}")),
                );
            }
        }
    }

    fn add(
        &mut self,
        value: Value,
        key: Vec<String>,
        (tool, provenance, ended): (&str, Provenance, bool),
        source: String,
    ) {
        let kind = ValueKind::of(&key, &value);
        // Only processes and sessions end; a task reported `completed` still exists.
        let ended = ended && matches!(kind, ValueKind::Pid | ValueKind::Session);
        if ended {
            self.end_value(&value_text(&value));
        }
        if let Some(i) = self
            .values
            .iter()
            .position(|p| p.value == value && p.key == key)
        {
            // Seen again: it moves to the end (the freshest wins ties), and what the server
            // listed or made counts over what the workspace was seeded with.
            let mut p = self.values.remove(i);
            if provenance.rank() >= p.provenance.rank() {
                p.provenance = provenance;
            }
            p.ended |= ended;
            self.values.push(p);
            return;
        }
        if self.values.len() >= MAX_VALUES {
            self.values.remove(0);
        }
        self.values.push(Pooled {
            value,
            key,
            kind,
            provenance,
            ended,
            tool: tool.into(),
            source,
        });
        self.learned += 1;
    }

    /// Marks the processes and sessions named `text` as ended.
    fn end_value(&mut self, text: &str) {
        for p in &mut self.values {
            if matches!(p.kind, ValueKind::Pid | ValueKind::Session) && value_text(&p.value) == text
            {
                p.ended = true;
            }
        }
    }

    /// After a successful call of `tool` that stops, kills or closes something
    /// (`kill_process(pid)`, `close_session(sessionId)`): the references it was given name
    /// things that have ended.
    pub fn end(&mut self, tool: &str, arguments: &Value) {
        const ENDING: &[&str] = &[
            "stop",
            "kill",
            "close",
            "end",
            "terminate",
            "disconnect",
            "exit",
            "quit",
            "cancel",
            "shutdown",
            "abort",
        ];
        if !words(tool).iter().any(|w| ENDING.contains(&w.as_str())) {
            return;
        }
        let Value::Object(m) = arguments else {
            return;
        };
        for (k, v) in m {
            // Only processes and sessions end: `cancel_task(taskId)` leaves the task there.
            let ws: Vec<String> = words(k).iter().map(|w| singular(w)).collect();
            let names_one = ws.last().is_some_and(|w| w == "pid")
                || ws.iter().any(|w| {
                    matches!(
                        w.as_str(),
                        "session" | "process" | "connection" | "terminal" | "shell"
                    )
                });
            if names_one {
                let items = match v {
                    Value::Array(items) => items.iter().collect(),
                    other => vec![other],
                };
                for item in items {
                    self.end_value(&value_text(item));
                }
            }
        }
    }

    /// Forgets the values a removing call of `tool` consumed: those of parameters that name
    /// what it removes (`delete_task(taskId)`, `remove_project(name)`), not the others
    /// (`clear_cache(project)` leaves the project).
    pub fn forget(&mut self, tool: &str, arguments: &Value) {
        let objects: Vec<String> = words(tool).iter().map(|w| singular(w)).collect();
        let mut gone: Vec<&Value> = Vec::new();
        if let Value::Object(m) = arguments {
            for (k, v) in m {
                let ws: Vec<String> = words(k).iter().map(|w| singular(w)).collect();
                let names_removed = ws.iter().any(|w| objects.contains(w) && w != "tool")
                    || matches!(ws.as_slice(), [w] if matches!(w.as_str(), "id" | "name" | "uuid" | "key"));
                if !names_removed {
                    continue;
                }
                match v {
                    Value::Array(items) => gone.extend(items.iter()),
                    other => gone.push(other),
                }
            }
        }
        self.values.retain(|p| {
            !gone.iter().any(|g| {
                **g == p.value
                    || g.as_str().is_some_and(|s| {
                        p.value.as_i64().is_some() && s.parse::<i64>().ok() == p.value.as_i64()
                    })
            })
        });
    }

    /// The best pooled value for parameter `name` of `tool` with schema `schema`, when one
    /// fits well enough: a reference (`taskId`, `pid`, `session`) or an entity's name
    /// (`vault`, `sheetName`, `project`). Parameters with an `enum` or `const` never take one.
    pub fn pick(&self, tool: &str, name: &str, schema: &Map<String, Value>) -> Option<Pick> {
        self.pick_excluding(tool, name, schema, &[])
    }

    /// The same, passing over the values in `taken` (another parameter of the same call has
    /// them: `task_id` and `depends_on_task_id` name two tasks).
    pub fn pick_excluding(
        &self,
        tool: &str,
        name: &str,
        schema: &Map<String, Value>,
        taken: &[Value],
    ) -> Option<Pick> {
        self.pick_ranked(tool, name, schema, taken, false)
    }

    /// Another value than those in `taken`, after the server refused them as gone or done:
    /// what a listing showed (the state as it is) before what a creation answered (an id
    /// a reload may have renumbered since).
    pub fn pick_instead(
        &self,
        tool: &str,
        name: &str,
        schema: &Map<String, Value>,
        taken: &[Value],
    ) -> Option<Pick> {
        self.pick_ranked(tool, name, schema, taken, true)
    }

    fn pick_ranked(
        &self,
        tool: &str,
        name: &str,
        schema: &Map<String, Value>,
        taken: &[Value],
        listed_first: bool,
    ) -> Option<Pick> {
        if schema.contains_key("enum") || schema.contains_key("const") {
            return None;
        }
        let ty = schema.get("type").and_then(Value::as_str);
        let (ty, array) = match ty {
            Some("array") => (
                schema
                    .get("items")
                    .and_then(|i| i.get("type"))
                    .and_then(Value::as_str),
                true,
            ),
            t => (t, false),
        };
        if let Some(pick) = self.pick_revision(tool, name, schema, ty, array) {
            return Some(pick);
        }
        let mut param = words(name);
        // A bare `name` or `id` of a tool about one thing is that thing's (`remove_project`'s
        // `name` is a project name).
        if matches!(param.as_slice(), [w] if w == "name" || w == "id") {
            if let Some(entity) = objects_of(tool).into_iter().next() {
                param.insert(0, entity);
            }
        }
        let last = param.last()?.clone();
        let last = singular(&last);
        let reference = REFERENCE_WORDS.contains(&last.as_str()) || last.ends_with("id");
        let entity_param = param.iter().any(|w| self.is_entity(&singular(w)));
        let entity_name =
            self.is_entity(&last) || (entity_param && matches!(last.as_str(), "name" | "title"));
        if !(reference || entity_name) {
            return None;
        }
        let mut best: Option<((u32, bool, u8), usize)> = None;
        for (i, p) in self.values.iter().enumerate() {
            if p.ended || matches!(p.kind, ValueKind::Revision | ValueKind::Remote) {
                continue;
            }
            let Some(value) = fitting(&p.value, ty) else {
                continue;
            };
            if taken.contains(&value) {
                continue;
            }
            if !matches_pattern(&value, item_schema(schema, array)) {
                continue;
            }
            let mut score = score(&param, &last, &p.key, &p.value, &self.entities);
            if score == 0 {
                continue;
            }
            // A value from a tool about the same thing (create_task → get_task).
            let objects = objects_of(tool);
            if objects_of(&p.tool).iter().any(|w| objects.contains(w)) {
                score += 2;
            }
            let _ = value;
            // Among equal matches, what the server listed or made wins.
            let listed = listed_first && p.provenance == Provenance::Listed;
            let rank = (score, listed, p.provenance.rank());
            if best.is_none_or(|(r, _)| rank >= r) {
                best = Some((rank, i));
            }
        }
        let ((score, _, _), i) = best?;
        if score < 5 {
            return None;
        }
        let p = &self.values[i];
        let value = fitting(&p.value, ty)?;
        Some(Pick {
            value: if array {
                Value::Array(vec![value])
            } else {
                value
            },
            source: p.source.clone(),
        })
    }
}

/// What a parameter about revisions wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RevisionWant {
    /// The branch a tool works on (`branch`): the current one.
    CurrentBranch,
    /// A branch or revision to go to or take from (`target`, `upstream`, `from`): another.
    OtherBranch,
    /// A commit (`commit`, `sha`, `onto`, `commits`): another branch's.
    Commit,
    /// A remote (`remote`).
    Remote,
}

impl RevisionWant {
    /// What parameter `name` (described by `hint`) wants, if it names a revision or a
    /// remote.
    fn of(tool: &str, name: &str, hint: &str) -> Option<RevisionWant> {
        static ABOUT_REVISIONS: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"(?i)\b(commit (hash|sha|id|ref)|revision|branch|tag name|git ref|treeish|tree-ish)")
                .expect("static regex")
        });
        static ABOUT_FILES: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(r"(?i)\b(file|path|url|directory)\b").expect("static regex")
        });
        let ws: Vec<String> = words(name).iter().map(|w| singular(w)).collect();
        let has = |list: &[&str]| ws.iter().any(|w| list.contains(&w.as_str()));
        let last = ws.last()?.as_str();
        if last == "remote" || (has(&["remote"]) && last == "name") {
            return Some(RevisionWant::Remote);
        }
        // By the last word: `commit_message` and `hash_algorithm` are no commits.
        if matches!(last, "commit" | "sha" | "hash" | "oid" | "onto")
            || (matches!(last, "id" | "ref") && has(&["commit"]))
        {
            return Some(RevisionWant::Commit);
        }
        if last == "branch" || (has(&["branch"]) && last == "name") {
            return Some(if ws.len() == 1 || has(&["current", "local", "remote"]) {
                RevisionWant::CurrentBranch
            } else {
                RevisionWant::OtherBranch
            });
        }
        // `rev`, `ref`, `upstream` are revisions only for a tool about revisions or where the
        // description says so (a document store's `rev`, a PDF tool's `ref` are not).
        const REVISION_TOOLS: &[&str] = &[
            "git", "branch", "commit", "checkout", "diff", "merge", "rebase", "revision", "cherry",
            "revert", "blame", "tag", "stash", "log",
        ];
        let about_revisions = words(tool)
            .iter()
            .any(|w| REVISION_TOOLS.contains(&w.as_str()))
            || ABOUT_REVISIONS.is_match(hint);
        let named = has(&["revision", "rev", "ref", "treeish", "upstream"]) && about_revisions;
        let described = has(&[
            "target", "object", "base", "source", "from", "to", "start", "end",
        ]) && ABOUT_REVISIONS.is_match(hint)
            && !ABOUT_FILES.is_match(&hint.replace("file(s)", ""));
        (named && !ABOUT_FILES.is_match(hint) || described).then_some(RevisionWant::OtherBranch)
    }
}

impl ValuePool {
    /// A revision or remote for parameter `name`: what a listing gave or the workspace's
    /// repository has, never an invented name. A branch to work on is the current one; a
    /// revision to move to, merge or pick from is another branch or its commit.
    fn pick_revision(
        &self,
        tool: &str,
        name: &str,
        schema: &Map<String, Value>,
        ty: Option<&str>,
        array: bool,
    ) -> Option<Pick> {
        let hint = ["description", "title"]
            .iter()
            .filter_map(|k| schema.get(*k).and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        // A revision is text: a number named for commits is a count (`maxCommits`), and a
        // short hash of digits only is still no number.
        if !matches!(ty, None | Some("string")) {
            return None;
        }
        let want = RevisionWant::of(tool, name, &hint)?;
        let is_branch = |p: &Pooled| p.key.iter().any(|w| singular(w) == "branch");
        let is_commit = |p: &Pooled| {
            p.key
                .last()
                .is_some_and(|w| matches!(w.as_str(), "commit" | "sha" | "hash" | "oid" | "id"))
                || p.value.as_str().is_some_and(|s| {
                    (7..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_hexdigit())
                })
        };
        // A commit another branch holds (not an ancestor a log of the current one listed):
        // what a cherry-pick or an `onto` can take.
        let other_tip = |p: &Pooled| {
            p.value.as_str().is_some_and(|v| {
                v.len() >= 7 && self.other_commits.iter().any(|c| c.starts_with(v))
            })
        };
        let current = |p: &Pooled| {
            p.value.as_str().is_some_and(|v| {
                let v = v.strip_prefix("refs/heads/").unwrap_or(v);
                Some(v) == self.current_branch.as_deref()
                    || (v.len() >= 7
                        && self
                            .head_commit
                            .as_deref()
                            .is_some_and(|h| h.starts_with(v)))
            })
        };
        let mut best: Option<((u8, u8), usize)> = None;
        for (i, p) in self.values.iter().enumerate() {
            if p.ended || fitting(&p.value, ty).is_none() {
                continue;
            }
            if !matches_pattern(&p.value, item_schema(schema, array)) {
                continue;
            }
            let fit: u8 = match (want, p.kind) {
                (RevisionWant::Remote, ValueKind::Remote) => 3,
                (RevisionWant::Remote, _) | (_, ValueKind::Remote) => continue,
                (_, kind) if kind != ValueKind::Revision => continue,
                (RevisionWant::CurrentBranch, _) if is_branch(p) => 2 + u8::from(current(p)),
                (RevisionWant::OtherBranch, _) if is_branch(p) => 2 + u8::from(!current(p)),
                (RevisionWant::Commit, _) if is_commit(p) => 2 + u8::from(other_tip(p)),
                _ => 1,
            };
            let rank = (fit, p.provenance.rank());
            if best.is_none_or(|(r, _)| rank >= r) {
                best = Some((rank, i));
            }
        }
        let (_, i) = best?;
        let p = &self.values[i];
        let value = fitting(&p.value, ty)?;
        Some(Pick {
            value: if array {
                Value::Array(vec![value])
            } else {
                value
            },
            source: p.source.clone(),
        })
    }
}

/// A status that says a process (or, with `session`, a session) has ended.
fn is_ended_state(s: &str, session: bool) -> bool {
    let s = s.to_ascii_lowercase();
    if session {
        return matches!(
            s.as_str(),
            "closed" | "ended" | "terminated" | "expired" | "disconnected"
        );
    }
    matches!(
        s.as_str(),
        "exited"
            | "ended"
            | "terminated"
            | "killed"
            | "stopped"
            | "closed"
            | "dead"
            | "finished"
            | "completed"
            | "done"
            | "failed"
            | "crashed"
    )
}

/// "process 4242 exited", "session `s-1` has been closed".
static ENDED_IN_PROSE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?i)\b(?:pid|process|session)(?:[ _-]?id)?\s*[:#=]?\s*[`'"]?([A-Za-z0-9][A-Za-z0-9_.:-]{0,80}?)[`'"]?\s+(?:has\s+|was\s+|is\s+)?(?:been\s+|already\s+)?(?:exited|ended|terminated|closed|stopped|killed|finished)\b"#,
    )
    .expect("static regex")
});

/// A value as text, for comparing a string with a number (`"42"` and `42`).
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Whether an object's member `key` means what a schema's member `member` means: the same
/// last word (`relationType` and `type`, `entityName` and `name`), or the two ends of a link
/// (`from` and `source`, `to` and `target`).
fn same_member(member: &str, key: &str) -> bool {
    const ENDS: [&[&str]; 2] = [&["from", "source", "src"], &["to", "target", "dest"]];
    let (m, k) = (words(member), words(key));
    let (Some(ml), Some(kl)) = (m.last(), k.last()) else {
        return false;
    };
    ml == kl
        || ENDS
            .iter()
            .any(|end| end.contains(&ml.as_str()) && end.contains(&kl.as_str()))
}

/// Whether an object's member value suits a member schema's type.
fn fits_member(v: &Value, schema: Option<&Value>) -> bool {
    match schema.and_then(|s| s.get("type")).and_then(Value::as_str) {
        Some("string") => v.is_string(),
        Some("integer") => v.is_i64() || v.is_u64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        Some("array") => v.is_array(),
        Some(_) => false,
        None => !v.is_array(),
    }
}

/// Where a response of `tool` puts what it holds: a listing, a creation, another answer.
fn provenance_of(tool: &str) -> Provenance {
    const CREATING: &[&str] = &[
        "create", "add", "new", "make", "start", "open", "launch", "spawn", "register", "insert",
        "init", "clone", "generate", "upload", "save", "run", "begin",
    ];
    const LISTING: &[&str] = &[
        "list", "get", "read", "search", "find", "show", "query", "describe", "log", "status",
        "view", "browse", "ls", "info", "history", "branches", "tags",
    ];
    let ws = words(tool);
    if ws.iter().any(|w| CREATING.contains(&w.as_str())) {
        Provenance::Created
    } else if ws.iter().any(|w| LISTING.contains(&w.as_str())) {
        Provenance::Listed
    } else {
        Provenance::Answered
    }
}

/// One response being read: where it came from, and whether what it names has ended.
#[derive(Clone, Copy)]
struct Walk<'a> {
    origin: &'a str,
    tool: &'a str,
    provenance: Provenance,
    ended: bool,
}

impl Walk<'_> {
    fn from(&self) -> (&str, Provenance, bool) {
        (self.tool, self.provenance, self.ended)
    }

    fn walk(&self, pool: &mut ValuePool, v: &Value, key: &[String], at: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        match v {
            Value::Object(map) => {
                pool.learn_object(map, format!("{}: {at}", self.origin));
                // `{"pid": 7, "status": "exited"}`: what the object names has ended.
                // A session's own state, or a process's: a command that `completed` in a
                // session leaves the session open.
                let session = map.keys().any(|k| words(k).iter().any(|w| w == "session"));
                let ended = self.ended
                    || map.iter().any(|(k, v)| {
                        matches!(k.as_str(), "status" | "state")
                            && v.as_str().is_some_and(|s| is_ended_state(s, session))
                    });
                let inner = Walk { ended, ..*self };
                for (k, child) in map.iter().take(100) {
                    // A wrapper passes on what encloses it.
                    let enclosing = match key.split_last() {
                        Some((w, rest)) if WRAPPER_KEYS.contains(&w.as_str()) => rest.last(),
                        _ => key.last(),
                    };
                    let mut kw: Vec<String> = enclosing
                        .filter(|w| !KEPT_KEYS.contains(&w.as_str()))
                        .map(|w| vec![singular(w)])
                        .unwrap_or_default();
                    kw.extend(words(k));
                    inner.walk(pool, child, &kw, &format!("{at}.{k}"), depth + 1);
                }
            }
            Value::Array(items) => {
                // `"columns": [{"name": "order_id", …}]`: the server keeps columns by name
                // (the list's key, plural, names the kind).
                let named_objects = items.iter().take(MAX_ELEMENTS).any(|c| {
                    c.get("name")
                        .or_else(|| c.get("title"))
                        .is_some_and(Value::is_string)
                });
                if let Some(last) = key.last().filter(|w| named_objects && w.ends_with('s')) {
                    pool.know_entity(singular(last));
                }
                for (i, child) in items.iter().take(MAX_ELEMENTS).enumerate() {
                    // A list of strings under "vaults" holds vault names.
                    let kw: Vec<String> = match (child, key.last()) {
                        (Value::String(_), Some(last)) if pool.is_entity(&singular(last)) => {
                            vec![singular(last), "name".into()]
                        }
                        _ => key.to_vec(),
                    };
                    self.walk(pool, child, &kw, &format!("{at}[{i}]"), depth + 1);
                }
            }
            Value::String(s) => {
                if key.last().is_some_and(|w| TEXT_KEYS.contains(&w.as_str())) {
                    pool.learn_text(s);
                }
                let kept = key.last().is_some_and(|w| {
                    KEPT_KEYS.contains(&w.as_str())
                        || pool.is_entity(&singular(w))
                        || w.ends_with("id")
                }) || UUID.is_match(s);
                if kept
                    && !s.is_empty()
                    && s.chars().count() <= MAX_VALUE_CHARS
                    && !s.contains('\n')
                {
                    pool.add(
                        v.clone(),
                        key.to_vec(),
                        self.from(),
                        format!("{}: {at}", self.origin),
                    );
                }
            }
            Value::Number(_)
                if key.last().is_some_and(|w| {
                    REFERENCE_WORDS.contains(&w.as_str()) || w.ends_with("id")
                }) =>
            {
                pool.add(
                    v.clone(),
                    key.to_vec(),
                    self.from(),
                    format!("{}: {at}", self.origin),
                );
            }
            _ => {}
        }
    }

    fn prose(&self, pool: &mut ValuePool, text: &str, tool_words: &[String], at: &str) {
        let origin = self.origin;
        let text: String = text.chars().take(20_000).collect();
        for c in LABELLED.captures_iter(&text).take(50) {
            let label = c.get(2).map_or("", |m| m.as_str());
            let quoted = c.get(3).is_some_and(|m| !m.as_str().is_empty());
            let value = c.get(4).map_or("", |m| m.as_str());
            let value = value.trim_end_matches(['.', ':', ',']);
            // "the ID is required", "the task ID you provided" are no ids: a value is quoted,
            // has a digit, or is a compound token.
            let looks_like_id = quoted
                || value.chars().any(|ch| ch.is_ascii_digit())
                || (value.len() >= 4 && value.contains(['-', '_']));
            if value.is_empty() || FILLER.contains(&value.to_lowercase().as_str()) || !looks_like_id
            {
                continue;
            }
            let mut key: Vec<String> = Vec::new();
            match c.get(1).map(|m| m.as_str().to_lowercase()) {
                Some(w) if !FILLER.contains(&w.as_str()) => key.extend(words(&w)),
                // "with PID 4242": the entity is the tool's ("start_process").
                _ => key.extend(objects_of(&tool_words.join("_")).into_iter().take(1)),
            }
            key.extend(words(label));
            let value = match value.parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => Value::String(value.into()),
            };
            pool.add(
                value,
                key,
                self.from(),
                format!(
                    "{origin}: {at}, \"{}\"",
                    shorten(c.get(0).map_or("", |m| m.as_str()))
                ),
            );
        }
        for m in UUID.find_iter(&text).take(20) {
            pool.add(
                Value::String(m.as_str().into()),
                vec!["uuid".into()],
                self.from(),
                format!("{origin}: {at}"),
            );
        }
        for c in QUOTED_NAME.captures_iter(&text).take(20) {
            let entity = singular(&c[1].to_lowercase());
            if pool.is_entity(&entity) {
                pool.add(
                    Value::String(c[2].to_string()),
                    vec![entity, "name".into()],
                    self.from(),
                    format!("{origin}: {at}, \"{}\"", shorten(&c[0])),
                );
            }
        }
        // "process 4242 exited", "session s-1 closed": what it named has ended.
        for c in ENDED_IN_PROSE.captures_iter(&text).take(20) {
            pool.end_value(&c[1]);
        }
    }
}

/// How well pooled key words `key` (and the value's shape) match a parameter.
fn score(param: &[String], last: &str, key: &[String], value: &Value, entities: &[String]) -> u32 {
    let key_last = key.last().map(|w| singular(w)).unwrap_or_default();
    let joined = |ws: &[String]| ws.iter().map(|w| singular(w)).collect::<Vec<_>>().join(" ");
    if joined(param) == joined(key) {
        return 10;
    }
    let others: Vec<String> = param[..param.len() - 1]
        .iter()
        .map(|w| singular(w))
        .collect();
    let key_words: Vec<String> = key.iter().map(|w| singular(w)).collect();
    let idish = |w: &str| matches!(w, "id" | "uuid" | "guid" | "identifier");
    if idish(last) && (idish(&key_last) || key_last.ends_with("id")) {
        if others.is_empty() {
            return 5;
        }
        if others.iter().any(|w| key_words.contains(w)) {
            return 8;
        }
        // taskId against a bare id of something else: only by the tool (scored by the caller).
        return if key_words.len() == 1 { 3 } else { 0 };
    }
    if last == key_last && REFERENCE_WORDS.contains(&last) {
        return if others.is_empty() || others.iter().any(|w| key_words.contains(w)) {
            8
        } else {
            3
        };
    }
    if matches!(last, "uuid" | "guid") && value.as_str().is_some_and(|s| UUID.is_match(s)) {
        return 6;
    }
    // Entities by name: `vault`, `vaultName`, `sheet_name` against vault/name, sheet/name.
    let entity = if entities.iter().any(|e| e == last) {
        Some(last.to_string())
    } else {
        others.iter().rev().find(|w| entities.contains(w)).cloned()
    };
    if let Some(entity) = entity {
        if key_words.contains(&entity) && matches!(key_last.as_str(), "name" | "title") {
            return 9;
        }
        // `{"dataset": "sales"}`, also inside what a tool answered about (`index.dataset`).
        if key_last == entity && value.is_string() {
            return 7;
        }
    }
    0
}

/// The schema a single value must meet: the parameter's, or its items' for an array.
fn item_schema(schema: &Map<String, Value>, array: bool) -> Option<&Map<String, Value>> {
    if array {
        schema.get("items").and_then(Value::as_object)
    } else {
        Some(schema)
    }
}

/// Whether a string value meets the schema's `pattern` (a pattern this regex engine cannot
/// read is not held against it).
fn matches_pattern(value: &Value, schema: Option<&Map<String, Value>>) -> bool {
    let (Some(s), Some(pattern)) = (
        value.as_str(),
        schema
            .and_then(|s| s.get("pattern"))
            .and_then(Value::as_str),
    ) else {
        return true;
    };
    regex::Regex::new(pattern).map_or(true, |re| re.is_match(s))
}

/// The value as the parameter's type wants it, if it can be.
fn fitting(v: &Value, ty: Option<&str>) -> Option<Value> {
    match (ty, v) {
        (Some("integer") | Some("number"), Value::Number(_)) => Some(v.clone()),
        (Some("integer") | Some("number"), Value::String(s)) => {
            s.parse::<i64>().ok().map(Value::from)
        }
        (Some("string") | None, Value::String(_)) => Some(v.clone()),
        (Some("string") | None, Value::Number(n)) => Some(Value::String(n.to_string())),
        _ => None,
    }
}

/// What a tool's name is about: its words, singular, without verbs and filler
/// (`create_task` → task, `register_project_tool` → project).
pub(crate) fn objects_of(tool: &str) -> Vec<String> {
    const NOT_OBJECTS: &[&str] = &[
        "get", "list", "create", "make", "add", "new", "delete", "remove", "update", "set", "read",
        "write", "edit", "run", "start", "stop", "open", "close", "search", "find", "query",
        "fetch", "show", "describe", "insert", "append", "register", "tool", "mcp", "all", "by",
        "to", "from", "of", "for", "the", "a", "and", "or", "in", "on", "with", "info", "detail",
        "status", "check", "do", "execute", "call", "kill", "clear",
    ];
    words(tool)
        .iter()
        .map(|w| singular(w))
        .filter(|w| w.len() > 1 && !NOT_OBJECTS.contains(&w.as_str()))
        .collect()
}

pub(crate) fn singular(w: &str) -> String {
    if w.len() > 3 && w.ends_with("ies") {
        format!("{}y", &w[..w.len() - 3])
    } else if w.len() > 3
        && w.ends_with("es")
        && (w.ends_with("ches") || w.ends_with("shes") || w.ends_with("xes"))
    {
        w[..w.len() - 2].to_string()
    } else if w.len() >= 3
        && w.ends_with('s')
        && !w.ends_with("ss")
        && !w.ends_with("us")
        && !w.ends_with("is")
    {
        w[..w.len() - 1].to_string()
    } else {
        w.to_string()
    }
}

fn shorten(s: &str) -> String {
    crate::mcp::tool::shorten(s, 60)
}

/// JSON carried in a text content: the whole text, or the first object or array in it.
pub fn json_in(text: &str) -> Option<Value> {
    let t = text.trim();
    if t.len() > 1_000_000 {
        return None;
    }
    if let Ok(v @ (Value::Object(_) | Value::Array(_))) = serde_json::from_str::<Value>(t) {
        return Some(v);
    }
    let start = t.find(['{', '['])?;
    let mut stream = serde_json::Deserializer::from_str(&t[start..]).into_iter::<Value>();
    match stream.next() {
        Some(Ok(v @ (Value::Object(_) | Value::Array(_)))) => Some(v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Map<String, Value> {
        v.as_object().cloned().expect("present")
    }

    /// The value picked for a plain string parameter.
    fn picked(pool: &ValuePool, tool: &str, name: &str) -> Value {
        pool.pick(tool, name, &schema(json!({"type": "string"})))
            .expect("a pooled value")
            .value
    }

    #[test]
    fn ended_processes_and_closed_sessions_are_not_reused() {
        let mut pool = ValuePool::new();
        let text = |t: &str| json!({"content": [{"type": "text", "text": t}]});
        pool.learn(
            "start_process",
            "call 1",
            &text("Started process with PID 4242"),
        );
        pool.learn(
            "start_process",
            "call 2",
            &text("Started process with PID 4243"),
        );
        let pid = |pool: &ValuePool| {
            pool.pick("read_output", "pid", &schema(json!({"type": "integer"})))
                .map(|p| p.value)
        };
        assert_eq!(pid(&pool), Some(json!(4243)));
        // A listing says the freshest has exited: the other one is taken.
        pool.learn(
            "list_processes",
            "call 1",
            &json!({"content": [], "structuredContent": {"processes": [{"pid": 4243, "status": "exited"}]}}),
        );
        assert_eq!(pid(&pool), Some(json!(4242)));
        // A successful kill ends the one it was given.
        pool.end("kill_process", &json!({"pid": 4242}));
        assert_eq!(pid(&pool), None);
        // Prose says a session closed; a task reported completed still exists.
        pool.learn("open_session", "call 1", &text("Session ID: s-17 opened"));
        pool.learn(
            "session_info",
            "call 1",
            &text("session s-17 has been closed"),
        );
        assert!(
            pool.pick("run_query", "sessionId", &schema(json!({"type": "string"})))
                .is_none()
        );
        pool.learn(
            "list_tasks",
            "call 1",
            &json!({"content": [], "structuredContent": {"tasks": [{"id": "t-9", "status": "completed"}]}}),
        );
        assert_eq!(picked(&pool, "get_task", "taskId"), json!("t-9"));
    }

    #[test]
    fn revisions_and_remotes_come_from_the_workspace_and_listings_never_invented() {
        let facts = crate::exercise::semantics::WorkspaceFacts {
            repository: Some(crate::workspace::repository::Repository {
                current: Some("main".into()),
                branches: vec![
                    ("main".into(), "a".repeat(40)),
                    ("fix/date-parsing".into(), "b".repeat(40)),
                ],
                tags: Vec::new(),
                remotes: vec!["origin".into()],
                tracked: vec!["notes.txt".into()],
            }),
            ..Default::default()
        };
        let mut pool = ValuePool::new();
        pool.know_workspace(&facts);
        fn pick(pool: &ValuePool, tool: &str, name: &str, s: Value) -> Option<Value> {
            pool.pick(tool, name, &schema(s)).map(|p| p.value)
        }
        let described = |d: &str| json!({"type": "string", "description": d});
        // A branch to work on is the current one; one to move to is another.
        assert_eq!(
            pick(&pool, "git_push", "branch", described("")),
            Some(json!("main"))
        );
        assert_eq!(
            pick(
                &pool,
                "git_checkout",
                "target",
                described("Branch name, commit hash, or tag")
            ),
            Some(json!("fix/date-parsing"))
        );
        assert_eq!(
            pick(&pool, "git_rebase", "upstream", described("")),
            Some(json!("fix/date-parsing"))
        );
        // A commit to pick is the other branch's.
        assert_eq!(
            pick(
                &pool,
                "git_cherry_pick",
                "commits",
                json!({"type": "array", "items": {"type": "string"}})
            ),
            Some(json!(["b".repeat(40)]))
        );
        assert_eq!(
            pick(&pool, "git_fetch", "remote", described("Remote name")),
            Some(json!("origin"))
        );
        // A PDF tool's `ref` is a file, not a revision; a plain name is no revision.
        assert_eq!(
            pick(
                &pool,
                "pdf_read",
                "ref",
                described("PDF file path or artifact id")
            ),
            None
        );
        assert_eq!(pick(&pool, "create_note", "title", described("")), None);
        // A count named for commits takes no commit, not even a short hash of digits only.
        pool.learn(
            "git_log",
            "call 1",
            &json!({"content": [], "structuredContent": {"commits": [{"hash": "6178464"}]}}),
        );
        assert_eq!(
            pick(
                &pool,
                "git_changelog_analyze",
                "maxCommits",
                json!({"type": "integer", "maximum": 1000})
            ),
            None
        );
        // What a listing gave counts over the workspace's facts of the same rank.
        pool.learn(
            "git_branch",
            "call 1",
            &json!({"content": [], "structuredContent": {"branches": [{"name": "release/2.0"}]}}),
        );
        assert_eq!(
            pick(
                &pool,
                "git_merge",
                "source_branch",
                described("Branch to merge")
            ),
            Some(json!("release/2.0"))
        );
    }

    #[test]
    fn objects_an_answer_held_fill_a_schema_of_their_shape() {
        // mcp-memory-libsql's read_graph, then its delete_relation (source, target, type)
        // and mcp-knowledge-graph's update_relations items (from, to, relationType).
        let mut pool = ValuePool::new();
        let graph = r#"{"entities": [{"name": "Ada Lovelace", "entityType": "person",
            "observations": ["wrote the first published algorithm"]}],
            "relations": [{"from": "Ada Lovelace", "to": "Analytical Engine",
            "relationType": "wrote notes on"}]}"#;
        pool.learn(
            "read_graph",
            "call 1",
            &json!({"content": [{"type": "text", "text": graph}]}),
        );
        let string = json!({"type": "string"});
        let delete_relation = schema(json!({"type": "object",
            "properties": {"source": string, "target": string, "type": string},
            "required": ["source", "target", "type"]}));
        let pick = pool.pick_object(&delete_relation).expect("a relation");
        assert_eq!(
            pick.value,
            json!({"source": "Ada Lovelace", "target": "Analytical Engine", "type": "wrote notes on"})
        );
        assert!(
            pick.source.starts_with("read_graph call 1"),
            "{}",
            pick.source
        );
        let relation_item = schema(json!({"type": "object",
            "properties": {"from": string, "to": string, "relationType": string},
            "required": ["from", "to", "relationType"]}));
        assert_eq!(
            pool.pick_object(&relation_item).map(|p| p.value),
            Some(
                json!({"from": "Ada Lovelace", "to": "Analytical Engine", "relationType": "wrote notes on"})
            )
        );
        // An entity's shape (a name and its observations, a list kept whole).
        let observations = schema(json!({"type": "object",
            "properties": {"entityName": string,
                           "observations": {"type": "array", "items": string}},
            "required": ["entityName", "observations"]}));
        assert_eq!(
            pool.pick_object(&observations).map(|p| p.value),
            Some(json!({"entityName": "Ada Lovelace",
                        "observations": ["wrote the first published algorithm"]}))
        );
        // One required member is no shape; a member no object has is no match.
        let one = schema(json!({"type": "object", "properties": {"from": string},
            "required": ["from"]}));
        assert_eq!(pool.pick_object(&one), None);
        let other = schema(json!({"type": "object",
            "properties": {"from": string, "weight": {"type": "number"}},
            "required": ["from", "weight"]}));
        assert_eq!(pool.pick_object(&other), None);
        // Two required members never share one key (`sourceId`, `targetId` and an `id`).
        pool.learn(
            "list_nodes",
            "call 1",
            &json!({"content": [], "structuredContent": {"nodes": [{"id": "n-1", "name": "a"}]}}),
        );
        let link = schema(json!({"type": "object",
            "properties": {"sourceId": string, "targetId": string},
            "required": ["sourceId", "targetId"]}));
        assert_eq!(pool.pick_object(&link), None);
    }

    #[test]
    fn kinds_come_from_the_last_word_and_only_processes_and_sessions_end() {
        let mut pool = ValuePool::new();
        let facts = crate::exercise::semantics::WorkspaceFacts {
            repository: Some(crate::workspace::repository::Repository {
                current: Some("main".into()),
                branches: vec![
                    ("main".into(), "a".repeat(40)),
                    ("topic".into(), "b".repeat(40)),
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        pool.know_workspace(&facts);
        // A commit's URL and title are no revisions; a log's short id of the current
        // branch's history does not beat another branch's commit for a cherry-pick.
        pool.learn(
            "git_log",
            "call 1",
            &json!({"content": [], "structuredContent": {"commits": [
                {"sha": "aaaaaaa", "url": "https://example.test/c/1", "title": "Add notes"}]}}),
        );
        let commits = schema(json!({"type": "array", "items": {"type": "string"}}));
        assert_eq!(
            pool.pick("git_cherry_pick", "commits", &commits)
                .map(|p| p.value),
            Some(json!(["b".repeat(40)]))
        );
        let text = schema(json!({"type": "string"}));
        assert!(pool.pick("git_merge", "commit_message", &text).is_none());
        // Tags are names: a notes server's tag is reused for a `tag` parameter.
        pool.learn(
            "list_notes",
            "call 1",
            &json!({"content": [], "structuredContent": {"tags": ["work"]}}),
        );
        assert_eq!(picked(&pool, "find_by_tag", "tag"), json!("work"));
        // Cancelling a task leaves its id; a command that completed leaves its session.
        pool.learn(
            "create_task",
            "call 1",
            &json!({"content": [], "structuredContent": {"taskId": "t-1"}}),
        );
        pool.end("cancel_task", &json!({"taskId": "t-1"}));
        assert_eq!(picked(&pool, "get_task", "taskId"), json!("t-1"));
        pool.learn(
            "run_in_session",
            "call 1",
            &json!({"content": [], "structuredContent": {"sessionId": "s-2", "status": "completed"}}),
        );
        assert_eq!(picked(&pool, "read_session", "sessionId"), json!("s-2"));
    }

    #[test]
    fn values_under_a_wrapper_key_are_the_tools_own() {
        let mut pool = ValuePool::new();
        pool.learn(
            "index_local",
            "call 1",
            &json!({"content": [], "structuredContent": {"result": {"dataset": "sales", "rows": 12}}}),
        );
        assert_eq!(picked(&pool, "describe_dataset", "dataset"), json!("sales"));
    }

    #[test]
    fn ids_from_structured_content_go_to_parameters_named_for_them() {
        let mut pool = ValuePool::new();
        pool.learn(
            "create_task",
            "call 1",
            &json!({"content": [], "structuredContent": {"task": {"id": "t-42", "name": "write docs"}}}),
        );
        let pick = pool
            .pick("get_task", "taskId", &schema(json!({"type": "string"})))
            .expect("present");
        assert_eq!(pick.value, json!("t-42"));
        assert!(
            pick.source
                .contains("create_task call 1: structuredContent.task.id"),
            "{}",
            pick.source
        );
        // A bare `id` of a task tool takes it too.
        assert_eq!(picked(&pool, "delete_task", "id"), json!("t-42"));
        // A parameter about something else does not.
        assert!(
            pool.pick("get_user", "userId", &schema(json!({"type": "string"})))
                .is_none()
        );
        // Enums never take pooled values.
        assert!(
            pool.pick(
                "get_task",
                "taskId",
                &schema(json!({"type": "string", "enum": ["a"]}))
            )
            .is_none()
        );
    }

    #[test]
    fn pids_and_labelled_ids_come_from_prose() {
        let mut pool = ValuePool::new();
        pool.learn(
            "query_task",
            "call 1",
            &json!({"content": [{"type": "text", "text": "The task ID you provided does not exist; the ID is required."}]}),
        );
        assert!(pool.is_empty(), "{pool:?}");
        pool.learn(
            "start_process",
            "call 1",
            &json!({"content": [{"type": "text", "text": "Started process with PID 4242 in the background."}]}),
        );
        let pick = pool
            .pick("kill_process", "pid", &schema(json!({"type": "integer"})))
            .expect("present");
        assert_eq!(pick.value, json!(4242));
        pool.learn(
            "open_session",
            "call 1",
            &json!({"content": [{"type": "text", "text": "Session ID: s-77f. Use it for later calls."}]}),
        );
        assert_eq!(picked(&pool, "send", "sessionId"), json!("s-77f"));
    }

    #[test]
    fn tool_names_go_to_parameters_named_for_a_tool_and_two_ids_differ() {
        let pool = ValuePool::with_packs(&Packs::none())
            .knowing_tools(["create_document", "get_tool_detailed_guidance"]);
        let s = schema(json!({"type": "string"}));
        let pick = pool.pick("get_tool_detailed_guidance", "tool_name", &s);
        assert_eq!(pick.map(|p| p.value), Some(json!("create_document")));
        assert!(
            pool.pick("get_tool_detailed_guidance", "title", &s)
                .is_none()
        );
        // ohno's add_dependency: task_id and depends_on_task_id name two tasks.
        let mut pool = ValuePool::with_packs(&Packs::none());
        for id in ["task-a1", "task-b2"] {
            pool.learn(
                "create_task",
                "call 1",
                &json!({"structuredContent": {"task_id": id}}),
            );
        }
        let first = pool
            .pick("add_dependency", "task_id", &s)
            .expect("a task")
            .value;
        let other = pool
            .pick_excluding(
                "add_dependency",
                "depends_on_task_id",
                &s,
                std::slice::from_ref(&first),
            )
            .expect("another task")
            .value;
        assert_ne!(first, other);
    }

    #[test]
    fn a_version_hash_a_reader_hands_out_goes_to_the_editor() {
        // mcp-text-editor's get_text_file_contents, keyed by the file.
        let mut pool = ValuePool::with_packs(&Packs::none());
        pool.learn(
            "get_text_file_contents",
            "call 1",
            &json!({"content": [{"type": "text", "text": "{\"/w/draft.txt\": {\"ranges\": [{\"range_hash\": \"r1\"}], \"file_hash\": \"f1\"}}"}]}),
        );
        let s = schema(json!({"type": "string"}));
        let pick = pool.pick("edit_text_file_contents", "file_hash", &s);
        assert_eq!(pick.map(|p| p.value), Some(json!("f1")));
    }

    #[test]
    fn a_plural_list_of_named_objects_names_a_kind_of_thing() {
        // jdatamunch's describe_dataset: `columns: [{"id": …, "name": "order_id"}]`.
        let mut pool = ValuePool::with_packs(&Packs::none());
        pool.learn(
            "describe_dataset",
            "call 1",
            &json!({"content": [{"type": "text", "text": "{\"result\": {\"dataset\": \"sales\", \"columns\": [{\"id\": \"sales::order_id#column\", \"name\": \"order_id\", \"type\": \"integer\"}, {\"id\": \"sales::region#column\", \"name\": \"region\"}]}}"}]}),
        );
        let pick = pool.pick(
            "describe_column",
            "column",
            &schema(json!({"type": "string"})),
        );
        assert!(
            pick.as_ref()
                .is_some_and(|p| p.value == json!("order_id") || p.value == json!("region")),
            "{:?}",
            pick.map(|p| p.value)
        );
        // Results and entries name no kind of thing.
        let mut pool = ValuePool::with_packs(&Packs::none());
        pool.learn(
            "search",
            "call 1",
            &json!({"structuredContent": {"results": [{"name": "a"}], "entries": [{"name": "b"}]}}),
        );
        assert!(!pool.is_entity("result") && !pool.is_entity("entry"));
    }

    #[test]
    fn what_a_listing_tool_lists_is_an_entity_without_any_pack() {
        let vaults = json!({"content": [{"type": "text", "text": "Available vaults:\n{\"vaults\": [\"Notes\", \"Work\"]}"}]});
        let mut bare = ValuePool::with_packs(&Packs::none());
        bare.learn("list_vaults", "call 1", &vaults);
        assert!(
            bare.pick("search_vault", "vault", &schema(json!({"type": "string"})))
                .is_none()
        );
        let mut pool = ValuePool::with_packs(&Packs::none()).knowing_listed([
            "obsidian_list_vaults",
            "list_files",
            "read_note",
        ]);
        pool.learn("obsidian_list_vaults", "call 1", &vaults);
        assert_eq!(picked(&pool, "search_vault", "vault"), json!("Work"));
        assert!(!pool.is_entity("file"));
    }

    #[test]
    fn names_from_lists_and_json_inside_text() {
        let mut pool = ValuePool::new();
        pool.learn(
            "list_vaults",
            "call 1",
            &json!({"content": [{"type": "text", "text": "Available vaults:\n{\"vaults\": [\"Notes\", \"Work\"]}"}]}),
        );
        assert_eq!(picked(&pool, "search_vault", "vault"), json!("Work"));
        pool.learn(
            "list_sheets",
            "call 1",
            &json!({"content": [{"type": "text", "text": "[{\"name\": \"Sheet1\", \"rows\": 3}]"}], "structuredContent": {"sheets": [{"name": "Sheet1"}]}}),
        );
        assert_eq!(picked(&pool, "read_sheet", "sheet_name"), json!("Sheet1"));
        // A value that does not meet the parameter's pattern is not taken.
        assert!(
            pool.pick(
                "read_sheet",
                "sheet_name",
                &schema(json!({"type": "string", "pattern": "^[0-9]+$"}))
            )
            .is_none()
        );
        // Plain parameters (`path`, `content`) are not the pool's business.
        assert!(
            pool.pick("write", "content", &schema(json!({"type": "string"})))
                .is_none()
        );
    }

    #[test]
    fn top_level_members_are_about_the_tools_entity() {
        let mut pool = ValuePool::new();
        pool.learn(
            "register_project_tool",
            "call 1",
            &json!({"content": [{"type": "text", "text": "{\"name\": \"/w\", \"root_path\": \"/w\"}"}]}),
        );
        assert_eq!(picked(&pool, "list_files", "project"), json!("/w"));
    }

    #[test]
    fn uuids_anywhere_and_arrays_of_ids() {
        let mut pool = ValuePool::new();
        pool.learn(
            "plan_tasks",
            "call 1",
            &json!({"content": [{"type": "text", "text": "Created 1 task: 0f8fad5b-d9cb-469f-a165-70867728950e (write docs)"}]}),
        );
        let pick = pool
            .pick(
                "get_task_detail",
                "taskIds",
                &schema(json!({"type": "array", "items": {"type": "string"}})),
            )
            .expect("present");
        assert_eq!(pick.value, json!(["0f8fad5b-d9cb-469f-a165-70867728950e"]));
    }

    #[test]
    fn hostile_responses_stay_bounded() {
        let mut pool = ValuePool::new();
        let many: Vec<Value> = (0..10_000).map(|i| json!({"id": i})).collect();
        pool.learn(
            "flood",
            "call 1",
            &json!({"structuredContent": {"items": many}}),
        );
        assert!(pool.len() <= MAX_ELEMENTS);
        let deep = (0..500).fold(json!({"id": 1}), |v, _| json!({"a": v}));
        pool.learn("deep", "call 1", &json!({"structuredContent": deep}));
        for i in 0..1000 {
            pool.learn("x", "call 1", &json!({"structuredContent": {"items": (0..25).map(|j| json!({"id": i * 100 + j})).collect::<Vec<_>>()}}));
        }
        assert!(pool.len() <= MAX_VALUES);
    }
}
