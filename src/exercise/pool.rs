//! The value pool: what the server handed out, kept for later calls. Every response is read
//! (structuredContent, text content, JSON inside text, resource links) for values that name
//! things a later tool may take: ids, UUIDs, pids, session and cursor tokens, names of
//! entities (projects, vaults, sheets, tables, branches), paths and URLs. Each value keeps the
//! words of the key it came under and where it came from, so a later parameter (`taskId`,
//! `pid`, `vault`) takes the best match by name and type, and the report can say where a
//! pooled argument came from.

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

/// One value the server handed out.
#[derive(Debug, Clone, PartialEq)]
pub struct Pooled {
    /// The value (a string or a number).
    pub value: Value,
    /// Words of the key it came under, with the enclosing key's (`tasks[0].id` → task, id).
    pub key: Vec<String>,
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
    /// Words for things a server keeps by name: the core's, those of the packs in force and
    /// those the server's own listing tools name (`list_vaults`: vault).
    entities: Vec<String>,
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
];

/// Keys whose values are names or ids worth keeping (besides entity words).
const KEPT_KEYS: &[&str] = &[
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
            entities: ENTITY_WORDS
                .iter()
                .copied()
                .chain(packs.entities())
                .map(str::to_string)
                .collect(),
        }
    }

    /// The same, knowing as well the things the server's listing tools list: the word after
    /// `list` in a tool's name, when plural (`list_vaults`, `obsidian_list_vaults`: vault;
    /// not files or directories, which are paths).
    pub fn knowing_listed<'t>(
        mut self,
        tool_names: impl IntoIterator<Item = &'t str>,
    ) -> ValuePool {
        // Paths, and words too general to name a kind of thing (`list_names`, `list_types`).
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
        ];
        for name in tool_names {
            let ws = words(name);
            let listed = ws
                .iter()
                .position(|w| w == "list")
                .and_then(|i| ws.get(i + 1))
                .filter(|w| w.len() > 3 && w.ends_with('s'))
                .map(|w| singular(w));
            if let Some(noun) = listed.filter(|n| !NOT_ENTITIES.contains(&n.as_str())) {
                if !self.entities.contains(&noun) {
                    self.entities.push(noun);
                }
            }
        }
        self
    }

    /// Whether `w` names a thing the server keeps by name.
    fn is_entity(&self, w: &str) -> bool {
        self.entities.iter().any(|e| e == w)
    }

    /// Whether nothing was learned yet.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// How many values are kept.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Learns from the result of `tool`'s call `label` (the result object without `_meta`).
    pub fn learn(&mut self, tool: &str, label: &str, result: &Value) {
        let origin = format!("{tool} {label}");
        let tool_words: Vec<String> = words(tool);
        // What the response is about, for its top-level members: the tool's entity
        // (`register_project` answers `{"name": …}` about a project).
        let about: Vec<String> = objects_of(tool).into_iter().take(1).collect();
        if let Some(s) = result.get("structuredContent") {
            self.walk(s, &about, &origin, "structuredContent", tool, 0);
        }
        let Some(Value::Array(items)) = result.get("content") else {
            return;
        };
        for (i, item) in items.iter().take(MAX_ELEMENTS).enumerate() {
            match item.get("type").and_then(Value::as_str) {
                Some("text") => {
                    let Some(text) = item.get("text").and_then(Value::as_str) else {
                        continue;
                    };
                    let at = format!("content[{i}].text");
                    match json_in(text) {
                        Some(v) => self.walk(&v, &about, &origin, &at, tool, 0),
                        None => self.prose(text, &tool_words, &origin, &at, tool),
                    }
                }
                Some("resource_link") | Some("resource") => {
                    let r = item.get("resource").unwrap_or(item);
                    if let Some(uri) = r.get("uri").and_then(Value::as_str) {
                        self.add(
                            Value::String(uri.into()),
                            vec!["uri".into()],
                            tool,
                            format!("{origin}: content[{i}].uri"),
                        );
                    }
                    if let Some(name) = r.get("name").and_then(Value::as_str) {
                        self.add(
                            Value::String(name.into()),
                            vec!["resource".into(), "name".into()],
                            tool,
                            format!("{origin}: content[{i}].name"),
                        );
                    }
                }
                _ => {}
            }
        }
    }

    fn walk(
        &mut self,
        v: &Value,
        key: &[String],
        origin: &str,
        at: &str,
        tool: &str,
        depth: usize,
    ) {
        if depth > MAX_DEPTH {
            return;
        }
        match v {
            Value::Object(map) => {
                for (k, child) in map.iter().take(100) {
                    let mut kw: Vec<String> = key
                        .last()
                        .filter(|w| !KEPT_KEYS.contains(&w.as_str()))
                        .map(|w| vec![singular(w)])
                        .unwrap_or_default();
                    kw.extend(words(k));
                    self.walk(child, &kw, origin, &format!("{at}.{k}"), tool, depth + 1);
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().take(MAX_ELEMENTS).enumerate() {
                    // A list of strings under "vaults" holds vault names.
                    let kw: Vec<String> = match (child, key.last()) {
                        (Value::String(_), Some(last)) if self.is_entity(&singular(last)) => {
                            vec![singular(last), "name".into()]
                        }
                        _ => key.to_vec(),
                    };
                    self.walk(child, &kw, origin, &format!("{at}[{i}]"), tool, depth + 1);
                }
            }
            Value::String(s) => {
                let kept = key.last().is_some_and(|w| {
                    KEPT_KEYS.contains(&w.as_str())
                        || self.is_entity(&singular(w))
                        || w.ends_with("id")
                }) || UUID.is_match(s);
                if kept
                    && !s.is_empty()
                    && s.chars().count() <= MAX_VALUE_CHARS
                    && !s.contains('\n')
                {
                    self.add(v.clone(), key.to_vec(), tool, format!("{origin}: {at}"));
                }
            }
            Value::Number(_)
                if key.last().is_some_and(|w| {
                    REFERENCE_WORDS.contains(&w.as_str()) || w.ends_with("id")
                }) =>
            {
                self.add(v.clone(), key.to_vec(), tool, format!("{origin}: {at}"));
            }
            _ => {}
        }
    }

    fn prose(&mut self, text: &str, tool_words: &[String], origin: &str, at: &str, tool: &str) {
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
            self.add(
                value,
                key,
                tool,
                format!(
                    "{origin}: {at}, \"{}\"",
                    shorten(c.get(0).map_or("", |m| m.as_str()))
                ),
            );
        }
        for m in UUID.find_iter(&text).take(20) {
            self.add(
                Value::String(m.as_str().into()),
                vec!["uuid".into()],
                tool,
                format!("{origin}: {at}"),
            );
        }
        for c in QUOTED_NAME.captures_iter(&text).take(20) {
            let entity = singular(&c[1].to_lowercase());
            if self.is_entity(&entity) {
                self.add(
                    Value::String(c[2].to_string()),
                    vec![entity, "name".into()],
                    tool,
                    format!("{origin}: {at}, \"{}\"", shorten(&c[0])),
                );
            }
        }
    }

    /// Learns the values an error offered for parameter `field` ("Available sheets: 'Summary'"):
    /// they exist on the server, so later tools take them for parameters of that name.
    pub fn learn_offered(&mut self, tool: &str, label: &str, field: &str, values: &[String]) {
        for v in values.iter().take(MAX_ELEMENTS) {
            if v.chars().count() <= MAX_VALUE_CHARS {
                self.add(
                    Value::String(v.clone()),
                    words(field),
                    tool,
                    format!("{tool} {label}: the error's list of values for {field}"),
                );
            }
        }
    }

    fn add(&mut self, value: Value, key: Vec<String>, tool: &str, source: String) {
        if let Some(i) = self
            .values
            .iter()
            .position(|p| p.value == value && p.key == key)
        {
            // Seen again: it moves to the end (the freshest wins ties).
            let p = self.values.remove(i);
            self.values.push(p);
            return;
        }
        if self.values.len() >= MAX_VALUES {
            self.values.remove(0);
        }
        self.values.push(Pooled {
            value,
            key,
            tool: tool.into(),
            source,
        });
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
        let mut best: Option<(u32, usize)> = None;
        for (i, p) in self.values.iter().enumerate() {
            let Some(value) = fitting(&p.value, ty) else {
                continue;
            };
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
            if best.is_none_or(|(s, _)| score >= s) {
                best = Some((score, i));
            }
        }
        let (score, i) = best?;
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
        if key_words.len() == 1 && key_last == entity && value.is_string() {
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
