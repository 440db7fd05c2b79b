//! Riskier cases of a tool that already worked. A tool's first successful call shows one case
//! of it; a read-only claim must hold for every operation it offers and a `destructiveHint:
//! false` where it can fail. [`variants`] takes the arguments that worked and makes, for each
//! other value of a parameter that selects an operation (`action: read | delete`, also the
//! `const`s of a `oneOf` of operations), for each boolean flag set the other way from its
//! default (`force`, `overwrite`, `dry_run: false`), and for a path the call made new, an
//! existing file of the same kind instead: one argument set per case, one thing changed each.
//! Cases that remove come last, so that what they remove was there for the others.

use serde_json::{Map, Value};

use super::semantics::{WorkspaceFacts, words};
use crate::mcp::tool::ToolDecl;

/// Parameter names that select what a tool does.
const OPERATION_PARAMS: &[&str] = &[
    "action",
    "actions",
    "operation",
    "op",
    "mode",
    "command",
    "cmd",
    "method",
    "verb",
    "subcommand",
];

/// Words of values that name an operation (an enum whose values are mostly these selects
/// one, whatever the parameter is called).
const OPERATION_WORDS: &[&str] = &[
    "get", "read", "list", "show", "view", "search", "find", "query", "info", "status", "stat",
    "create", "add", "insert", "new", "write", "set", "put", "save", "update", "edit", "modify",
    "patch", "append", "replace", "rename", "move", "copy", "delete", "remove", "rm", "drop",
    "clear", "reset", "purge", "archive", "restore", "start", "stop", "kill", "run", "exec",
    "open", "close", "lock", "unlock", "merge", "unmerge", "import", "export", "upload",
    "download", "push", "pull", "commit", "checkout", "apply", "sync", "enable", "disable",
];

/// Words of flags whose non-default setting is the risky one, tried first.
const RISKY_FLAG_WORDS: &[&str] = &[
    "force",
    "overwrite",
    "replace",
    "recursive",
    "delete",
    "remove",
    "purge",
    "confirm",
    "confirmed",
    "apply",
    "commit",
    "write",
    "save",
    "create",
    "destructive",
    "hard",
    "prune",
    "clean",
];

/// Words that say a case removes things (see [`super::plan::removes`]).
const REMOVING_WORDS: &[&str] = &[
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
    "prune",
    "clean",
];

/// Most values tried of one operation parameter, most flags, most cases of one tool.
const MAX_OPERATIONS: usize = 10;
const MAX_FLAGS: usize = 6;
const MAX_VARIANTS: usize = 12;

/// One riskier case of a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// The arguments: those that worked with one thing changed.
    pub arguments: Value,
    /// The parameter changed.
    pub parameter: String,
    /// What changed, for the report: `action: delete`, `force: true`, `path: an existing
    /// file`.
    pub what: String,
    /// Whether the case removes things (it then runs after the others).
    pub removes: bool,
}

/// The riskier cases of `tool` (input schema `schema`, its local references inlined) after a
/// call with `worked` succeeded; `facts` is what the workspace holds now (for an existing
/// target in place of a path the call made new). Parameters in `fixed` (the user's overrides)
/// are never changed.
pub fn variants(
    tool: &ToolDecl,
    schema: &Value,
    worked: &Value,
    facts: &WorkspaceFacts,
    fixed: &[String],
) -> Vec<Variant> {
    let Some(base) = worked.as_object() else {
        return Vec::new();
    };
    let mut out: Vec<Variant> = Vec::new();
    let mut push = |arguments: Map<String, Value>, parameter: &str, what: String, removes: bool| {
        let v = Value::Object(arguments);
        if v != *worked && !out.iter().any(|o| o.arguments == v) {
            out.push(Variant {
                arguments: v,
                parameter: parameter.to_string(),
                what,
                removes,
            });
        }
    };
    let free = |name: &str| !fixed.iter().any(|f| f == name);
    for (param, values) in operations(schema).into_iter().filter(|(p, _)| free(p)) {
        // What was sent, else the default the server applied.
        let in_force = base.get(&param).cloned().or_else(|| {
            schema
                .get("properties")
                .and_then(|p| p.get(&param))
                .and_then(|p| p.get("default"))
                .cloned()
        });
        for value in values.iter().take(MAX_OPERATIONS) {
            if in_force.as_ref() == Some(value) {
                continue;
            }
            let mut c = base.clone();
            c.insert(param.clone(), value.clone());
            let text = value.as_str().unwrap_or_default();
            push(c, &param, selected(&param, value), removing(text));
        }
    }
    let mut flags = flags(schema, base);
    flags.retain(|(name, _)| free(name));
    flags.sort_by_key(|(name, value)| !risky_flag(name, *value));
    for (name, value) in flags.into_iter().take(MAX_FLAGS) {
        let mut c = base.clone();
        c.insert(name.clone(), Value::Bool(value));
        // `force: true`, `recursive: true` remove more than the call before did.
        let removes = value
            && words(&name)
                .iter()
                .any(|w| REMOVING_WORDS.contains(&w.as_str()));
        push(c, &name, selected(&name, &Value::Bool(value)), removes);
    }
    if let Some((param, existing)) = existing_target(tool, base, facts).filter(|(p, _)| free(p)) {
        let mut c = base.clone();
        c.insert(param.clone(), existing);
        push(c, &param, format!("{param}: an existing file"), false);
    }
    // Stable: the order within each group stays.
    out.sort_by_key(|v| v.removes);
    out.truncate(MAX_VARIANTS);
    out
}

/// How a selecting argument's value is named wherever it is shown (a riskier case's `what`,
/// the values a call had in force, a profile's value): `action: delete`, `force: true`.
pub fn selected(argument: &str, value: &Value) -> String {
    format!("{argument}: {}", value_text(value))
}

/// The argument a riskier case's `what` names (`action` of `action: delete`; see
/// [`selected`]).
pub fn parameter_of(what: &str) -> &str {
    what.split_once(": ").map_or(what, |(p, _)| p)
}

/// A value as reports write it: a string bare, anything else as JSON.
pub fn value_text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// A parameter that selects what a tool does: an operation (`action: read | delete`) or a
/// flag that changes it (`force`, `dry_run`), with every value it offers.
#[derive(Debug, Clone, PartialEq)]
pub struct Selector {
    /// The parameter's name.
    pub argument: String,
    /// The values it offers, in the schema's order (`false` before `true` for a flag).
    pub values: Vec<Value>,
    /// What the server applies when the parameter is not sent: the schema's default, and
    /// `false` for a flag without one.
    pub default: Option<Value>,
    /// Whether it is a boolean flag.
    pub flag: bool,
}

impl Selector {
    /// The value in force in a call sent `arguments`: the value sent, else the default.
    pub fn in_force(&self, arguments: &Value) -> Option<Value> {
        arguments
            .get(&self.argument)
            .filter(|v| !v.is_null())
            .cloned()
            .or_else(|| self.default.clone())
    }

    /// Whether `value` names an operation that changes things (`delete`, `write`, `force:
    /// true`, `dry_run: false`): one that showed nothing did not act as its name says.
    pub fn acts(&self, value: &Value) -> bool {
        match value {
            Value::Bool(b) if self.flag => risky_flag(&self.argument, *b),
            Value::String(s) => words(s)
                .first()
                .is_some_and(|w| CHANGING_WORDS.contains(&w.as_str()) || removing(s)),
            _ => false,
        }
    }
}

/// Words of operations that change things (what an operation that only reads never is).
const CHANGING_WORDS: &[&str] = &[
    "create", "add", "insert", "new", "write", "set", "put", "save", "update", "edit", "modify",
    "patch", "append", "replace", "rename", "move", "copy", "archive", "restore", "import",
    "upload", "push", "commit", "checkout", "apply", "sync", "merge", "unmerge", "lock", "unlock",
    "enable", "disable", "start", "stop", "kill", "run", "exec",
];

/// The parameters of a tool (input schema `schema`, its local references inlined) that select
/// what it does: its operations (see [`variants`]) and its flags whose names say they change
/// what it does (`force`, `recursive`, `dry_run`: either setting is a risky one), plus any
/// other flag one of `tried` (the arguments of the calls made) set away from its default.
pub fn selectors(schema: &Value, tried: &[&Value]) -> Vec<Selector> {
    let property = |name: &str| schema.get("properties").and_then(|p| p.get(name));
    let mut out: Vec<Selector> = operations(schema)
        .into_iter()
        .map(|(argument, values)| Selector {
            default: property(&argument).and_then(|p| p.get("default")).cloned(),
            argument,
            values,
            flag: false,
        })
        .collect();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return out;
    };
    for (name, p) in props.iter().filter(|(_, p)| is_boolean(p)) {
        let default = p.get("default").and_then(Value::as_bool).unwrap_or(false);
        let flipped = tried
            .iter()
            .any(|a| a.get(name).and_then(Value::as_bool) == Some(!default));
        if flipped || risky_flag(name, true) || risky_flag(name, false) {
            out.push(Selector {
                argument: name.clone(),
                values: vec![Value::Bool(false), Value::Bool(true)],
                default: Some(Value::Bool(default)),
                flag: true,
            });
        }
    }
    out
}

/// Whether an operation's name says it removes things.
fn removing(value: &str) -> bool {
    words(value)
        .iter()
        .any(|w| REMOVING_WORDS.contains(&w.as_str()))
}

/// Whether setting flag `name` to `value` is a risky case: a flag that does more set
/// (`force: true`), or one that holds back turned off (`dry_run: false`).
fn risky_flag(name: &str, value: bool) -> bool {
    let ws = words(name);
    let holds_back = ws
        .iter()
        .any(|w| matches!(w.as_str(), "dry" | "preview" | "simulate" | "safe"));
    if holds_back {
        return !value;
    }
    value && ws.iter().any(|w| RISKY_FLAG_WORDS.contains(&w.as_str()))
}

/// The parameters that select an operation, with the values each offers: a string enum under
/// an operation's name (`action`, `op`, `mode`) or whose values mostly name operations, and a
/// property that is a `const` in each branch of a `oneOf`/`anyOf` (a discriminated union).
fn operations(schema: &Value) -> Vec<(String, Vec<Value>)> {
    let mut out: Vec<(String, Vec<Value>)> = Vec::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            let values = enum_values(p);
            if values.len() < 2 {
                continue;
            }
            let by_name = words(name)
                .last()
                .is_some_and(|w| OPERATION_PARAMS.contains(&w.as_str()));
            let naming_operations = values
                .iter()
                .filter(|v| {
                    v.as_str().is_some_and(|s| {
                        words(s)
                            .first()
                            .is_some_and(|w| OPERATION_WORDS.contains(&w.as_str()))
                    })
                })
                .count();
            if by_name || naming_operations * 2 > values.len() {
                out.push((name.clone(), values));
            }
        }
    }
    // A discriminated union: the property each branch fixes to a value of its own.
    for key in ["oneOf", "anyOf"] {
        let Some(branches) = schema.get(key).and_then(Value::as_array) else {
            continue;
        };
        let mut by_property: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
        for b in branches {
            let Some(props) = b.get("properties").and_then(Value::as_object) else {
                continue;
            };
            for (name, p) in props {
                if let Some(v) = p.get("const").filter(|v| v.is_string()) {
                    by_property.entry(name.clone()).or_default().push(v.clone());
                }
            }
        }
        for (name, values) in by_property {
            if values.len() >= 2 && values.len() * 2 >= branches.len() {
                match out.iter_mut().find(|(n, _)| *n == name) {
                    Some((_, known)) => {
                        for v in values {
                            if !known.contains(&v) {
                                known.push(v);
                            }
                        }
                    }
                    None => out.push((name, values)),
                }
            }
        }
    }
    out
}

/// The string values a property's schema offers: its `enum`, or the `const`s of its
/// `oneOf`/`anyOf`.
fn enum_values(p: &Value) -> Vec<Value> {
    if let Some(e) = p.get("enum").and_then(Value::as_array) {
        return e.iter().filter(|v| v.is_string()).cloned().collect();
    }
    ["oneOf", "anyOf"]
        .iter()
        .filter_map(|k| p.get(*k).and_then(Value::as_array))
        .flatten()
        .filter_map(|b| b.get("const").filter(|v| v.is_string()).cloned())
        .collect()
}

/// The boolean properties whose value in force in `base` (sent, else the default, else
/// false) is the default, each with the other value.
fn flags(schema: &Value, base: &Map<String, Value>) -> Vec<(String, bool)> {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .filter(|(_, p)| is_boolean(p))
        .filter_map(|(name, p)| {
            let default = p.get("default").and_then(Value::as_bool).unwrap_or(false);
            let in_force = base.get(name).and_then(Value::as_bool).unwrap_or(default);
            (in_force == default).then(|| (name.clone(), !default))
        })
        .collect()
}

/// Whether a property's schema is a boolean (also `["boolean", "null"]`).
fn is_boolean(p: &Value) -> bool {
    match p.get("type") {
        Some(Value::String(t)) => t == "boolean",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "boolean"),
        _ => false,
    }
}

/// For a tool that writes, a path parameter whose value in `base` is a file the run names as
/// new (so the call made it) and an existing file of the workspace of the same kind to put
/// there instead, written as the value was (absolute, or relative to the root).
fn existing_target(
    tool: &ToolDecl,
    base: &Map<String, Value>,
    facts: &WorkspaceFacts,
) -> Option<(String, Value)> {
    use super::semantics::Intent;
    if !matches!(Intent::of(tool), Intent::Create | Intent::Modify) || super::plan::removes(tool) {
        return None;
    }
    let root = facts.root.display().to_string();
    base.iter().find_map(|(name, v)| {
        let s = v.as_str()?;
        let (absolute, rel) = match s.strip_prefix(&format!("{root}/")) {
            Some(rel) => (true, rel),
            None if !s.starts_with('/') && s.contains('.') => (false, s),
            None => return None,
        };
        if !facts.vocab.made_by_the_run(rel) {
            return None;
        }
        let extension = rel.rsplit_once('.').map(|(_, e)| e)?;
        let existing = facts.files.iter().find(|f| {
            !facts.vocab.made_by_the_run(f)
                && f.rsplit_once('.').is_some_and(|(_, e)| e == extension)
        })?;
        let value = if absolute {
            format!("{root}/{existing}")
        } else {
            existing.clone()
        };
        Some((name.clone(), Value::String(value)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::tool::parse_tool;
    use serde_json::json;

    fn tool(v: Value) -> ToolDecl {
        parse_tool(&v, 0).expect("tool")
    }

    fn variants_of(
        t: &ToolDecl,
        schema: &Value,
        worked: &Value,
        facts: &WorkspaceFacts,
    ) -> Vec<Variant> {
        variants(t, schema, worked, facts, &[])
    }

    #[test]
    fn the_users_overrides_and_the_default_in_force_are_not_cases() {
        let schema = json!({"type": "object", "properties": {
            "action": {"type": "string", "enum": ["read", "delete"], "default": "read"},
            "force": {"type": "boolean"}
        }});
        let t = tool(json!({"name": "manage", "inputSchema": schema}));
        // `read` applied by default: only `delete` is new.
        let vs = variants_of(&t, &schema, &json!({}), &WorkspaceFacts::default());
        assert_eq!(whats(&vs), ["force: true", "action: delete"]);
        // The user pinned both: nothing changes.
        let fixed = ["action".to_string(), "force".to_string()];
        let vs = variants(
            &t,
            &schema,
            &json!({"action": "read"}),
            &WorkspaceFacts::default(),
            &fixed,
        );
        assert!(vs.is_empty(), "{vs:?}");
    }

    fn whats(vs: &[Variant]) -> Vec<&str> {
        vs.iter().map(|v| v.what.as_str()).collect()
    }

    #[test]
    fn every_other_operation_is_tried_and_removals_come_last() {
        let schema = json!({"type": "object", "properties": {
            "action": {"type": "string", "enum": ["delete", "read", "list"]},
            "path": {"type": "string"},
            "format": {"type": "string", "enum": ["json", "text"]}
        }});
        let t = tool(json!({"name": "manage_notes", "inputSchema": schema}));
        let vs = variants_of(
            &t,
            &schema,
            &json!({"action": "read", "path": "a.md"}),
            &WorkspaceFacts::default(),
        );
        // `format` selects no operation; `delete` runs after `list`.
        assert_eq!(whats(&vs), ["action: list", "action: delete"]);
        assert!(vs[1].removes);
        assert_eq!(vs[1].arguments, json!({"action": "delete", "path": "a.md"}));
    }

    #[test]
    fn an_enum_of_operation_names_selects_an_operation_whatever_it_is_called() {
        let schema = json!({"type": "object", "properties": {
            "what": {"type": "string", "enum": ["get", "set", "remove_all"]},
            "sort": {"type": "string", "enum": ["asc", "desc"]}
        }});
        let t = tool(json!({"name": "prefs", "inputSchema": schema}));
        let vs = variants_of(
            &t,
            &schema,
            &json!({"what": "get", "sort": "asc"}),
            &WorkspaceFacts::default(),
        );
        assert_eq!(whats(&vs), ["what: set", "what: remove_all"]);
    }

    #[test]
    fn the_operations_of_a_discriminated_union_are_tried() {
        let schema = json!({"type": "object", "oneOf": [
            {"properties": {"op": {"const": "read"}, "path": {"type": "string"}}},
            {"properties": {"op": {"const": "write"}, "path": {"type": "string"}, "text": {"type": "string"}}},
            {"properties": {"op": {"const": "delete"}, "path": {"type": "string"}}}
        ]});
        let t = tool(json!({"name": "files", "inputSchema": schema}));
        let vs = variants_of(
            &t,
            &schema,
            &json!({"op": "read", "path": "a"}),
            &WorkspaceFacts::default(),
        );
        assert_eq!(whats(&vs), ["op: write", "op: delete"]);
    }

    #[test]
    fn flags_are_set_the_other_way_from_their_default_risky_ones_first() {
        let schema = json!({"type": "object", "properties": {
            "verbose": {"type": "boolean"},
            "dry_run": {"type": "boolean", "default": true},
            "overwrite": {"type": ["boolean", "null"]},
            "recursive": {"type": "boolean"},
            "confirm": {"type": "boolean"},
            "delete_source": {"type": "boolean"}
        }});
        let t = tool(json!({"name": "sync", "inputSchema": schema}));
        // `confirm` was already sent true: its risky case ran.
        let vs = variants_of(
            &t,
            &schema,
            &json!({"confirm": true}),
            &WorkspaceFacts::default(),
        );
        // Risky names first; one that removes after everything else.
        assert_eq!(
            whats(&vs),
            [
                "dry_run: false",
                "overwrite: true",
                "recursive: true",
                "verbose: true",
                "delete_source: true"
            ]
        );
        assert_eq!(vs.iter().filter(|v| v.removes).count(), 1);
    }

    #[test]
    fn a_writer_that_made_a_new_file_is_also_given_an_existing_one() {
        let facts = WorkspaceFacts {
            root: "/ws".into(),
            files: vec!["data/table.csv".into(), "notes/todo.md".into()],
            ..Default::default()
        };
        let new = format!("notes/{}.md", facts.vocab.new_stem());
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}});
        let t = tool(json!({"name": "write_note", "inputSchema": schema}));
        let vs = variants_of(
            &t,
            &schema,
            &json!({"path": format!("/ws/{new}"), "content": "x"}),
            &facts,
        );
        assert_eq!(vs.len(), 1);
        assert_eq!(
            vs[0].arguments,
            json!({"path": "/ws/notes/todo.md", "content": "x"})
        );
        assert_eq!(vs[0].what, "path: an existing file");
        // Relative, as it was sent.
        let vs = variants_of(&t, &schema, &json!({"path": new, "content": "x"}), &facts);
        assert_eq!(vs[0].arguments["path"], "notes/todo.md");
        // A file that was there already, a reader, a remover, or no file of that kind: none.
        assert!(variants_of(&t, &schema, &json!({"path": "/ws/notes/todo.md"}), &facts).is_empty());
        for name in ["read_note", "delete_note"] {
            let other = tool(json!({"name": name, "inputSchema": schema}));
            assert!(
                variants_of(
                    &other,
                    &schema,
                    &json!({"path": format!("/ws/{new}")}),
                    &facts
                )
                .is_empty()
            );
        }
        let txt = format!("/ws/{}.txt", facts.vocab.new_stem());
        assert!(variants_of(&t, &schema, &json!({"path": txt}), &facts).is_empty());
    }
}
