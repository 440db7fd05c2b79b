//! What an error says to try next. Servers that refuse arguments often say what they would
//! accept: "Available sheets: 'Sheet1', 'Notes'", "must be one of [a, b]", zod's "Expected 'a' |
//! 'b', received 'x'", pydantic's "Input should be 'a' or 'b'", ajv's `allowedValues`, or that
//! a field is missing, or that a flag must be set ("pass confirm: true"). [`corrections`] turns
//! such a text into new argument sets: the field it is about set to each value offered, the
//! boolean properties it names set, or the fields it names as missing filled from the other
//! candidates. Only properties of the tool's own schema are ever set.
//!
//! Each rule is a [`Rule`]: its name, what triggers it, what it learns, and the real errors it
//! was built from ([`Fixture`]s, checked by the tests). The rules here are the core: formats of
//! validators and frameworks (zod, ajv, pydantic) and phrasings seen in unrelated servers; a
//! rule seen in one kind of server only lives in a domain pack ([`super::packs`]), whose rules
//! run after these when the pack is in force.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::packs::Packs;

/// Phrases after which an error lists the values it accepts.
const LIST_TRIGGERS: [&str; 23] = [
    "allowedvalues",
    "one of",
    "must be",
    "valid types",
    "allowed values",
    "allowed keys",
    "allowed:",
    "available",
    "valid values",
    "valid options",
    "valid choices",
    "supported values",
    "supported",
    "existing",
    "possible values",
    "expected",
    "input should be",
    "choices",
    "such as",
    "for example",
    "e.g.",
    "choose from",
    "did you mean",
];

/// Most values taken from one list, and most new argument sets from one error.
const MAX_VALUES: usize = 8;
const MAX_CORRECTIONS: usize = 3;

/// New argument sets that follow what `text` (an error) says, starting from `arguments` (the
/// set that was refused); `others` are the tool's other candidates, whose values fill fields
/// the error names as missing. Sets equal to `arguments` or to one another are left out.
pub fn corrections(
    text: &str,
    schema: &Value,
    arguments: &Value,
    others: &[Value],
    packs: &Packs,
) -> Vec<Value> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    let refusal = Refusal {
        text,
        lowered: text.to_lowercase(),
        schema,
        properties,
        arguments,
        current: arguments.as_object().cloned().unwrap_or_default(),
        others,
        packs,
    };
    let mut out: Vec<Value> = Vec::new();
    let mut push = |candidate: Map<String, Value>| {
        let v = Value::Object(candidate);
        if v != *arguments && !out.contains(&v) && out.len() < MAX_CORRECTIONS {
            out.push(v);
        }
    };
    // In this order: the first sets made are the ones tried. The packs' rules come after the
    // core's that read what the error offers, before those that fill what it says is missing.
    let (reading, filling) = CORE.split_at(CORE_BEFORE_PACKS);
    let pack_rules = packs.iter().flat_map(|p| p.rules.iter());
    for rule in reading.iter().chain(pack_rules).chain(filling) {
        (rule.apply)(&refusal, &mut push);
    }
    out
}

/// An error and the argument set it refused, as the rules read them.
pub struct Refusal<'a> {
    /// The error.
    pub text: &'a str,
    /// The error in lower case.
    pub lowered: String,
    /// The tool's input schema.
    pub schema: &'a Value,
    /// Its properties.
    pub properties: &'a Map<String, Value>,
    /// The refused set.
    pub arguments: &'a Value,
    /// The refused set's members.
    pub current: Map<String, Value>,
    /// The tool's other candidate sets.
    pub others: &'a [Value],
    /// The packs in force (their notations: a refused name inside a reference).
    pub packs: &'a Packs,
}

/// One rule: what in an error triggers it and the argument sets it then makes.
pub struct Rule {
    /// A short name.
    pub name: &'static str,
    /// What in an error (and the refused set) triggers it.
    pub trigger: &'static str,
    /// What it changes in the refused set.
    pub learns: &'static str,
    /// Where its phrasing is seen (a validator's format, or which kinds of server).
    pub seen_in: &'static str,
    /// The real errors it was built from, each with what it must lead to.
    pub built_from: &'static [Fixture],
    /// Pushes the argument sets the error leads to.
    pub apply: Apply,
}

/// What a rule does: pushes the argument sets an error leads to.
pub type Apply = fn(&Refusal<'_>, &mut dyn FnMut(Map<String, Value>));

/// A real error a rule was built from: the tool's schema and the refused arguments (JSON), and
/// an argument set the rule must make from them (JSON).
pub struct Fixture {
    /// The error text.
    pub error: &'static str,
    /// The tool's input schema.
    pub schema: &'static str,
    /// The arguments it refused.
    pub sent: &'static str,
    /// The tool's other candidate sets (a JSON array).
    pub others: &'static str,
    /// A set the rule must make.
    pub leads_to: &'static str,
}

/// How many of the core's rules run before the packs' (those that read what the error offers
/// or quotes back); the rest (alternatives, missing fields) run after them.
const CORE_BEFORE_PACKS: usize = 7;

/// The core's rules, in the order their sets are tried.
pub const CORE: &[Rule] = &[
    Rule {
        name: "offered values",
        trigger: "a list of accepted values after a phrase such as 'Available', 'must be one of', 'Expected', 'Input should be', 'allowedValues', 'choose from', 'Did you mean'",
        learns: "the field the list is about set to each value (typed as the schema says), or the value the error quotes back replaced where it was sent, also deep inside objects and arrays",
        seen_in: "zod, pydantic, ajv, argparse, click and enum checks of many servers",
        built_from: &[
            Fixture {
                error: "Sheet 'Sheet9' not found. Available sheets: 'Sheet1', 'Notes'",
                schema: r#"{"type": "object", "properties": {"sheet": {"type": "string"}, "path": {"type": "string"}}}"#,
                sent: r#"{"sheet": "Sheet9", "path": "/w/book.xlsx"}"#,
                others: "[]",
                leads_to: r#"{"sheet": "Sheet1", "path": "/w/book.xlsx"}"#,
            },
            Fixture {
                error: "Field 'blue-harbor' not found. Available fields: 'name', 'amount'.",
                schema: r#"{"type": "object", "properties": {"sheet": {"type": "string"}, "row_fields": {"type": "array", "items": {"type": "string"}}}}"#,
                sent: r#"{"sheet": "S", "row_fields": ["blue-harbor"]}"#,
                others: "[]",
                leads_to: r#"{"sheet": "S", "row_fields": ["name"]}"#,
            },
            Fixture {
                // argparse's refusal of a choice.
                error: "argument mode: invalid choice: 'x' (choose from 'fast', 'slow')",
                schema: r#"{"type": "object", "properties": {"mode": {"type": "string"}}}"#,
                sent: r#"{"mode": "x"}"#,
                others: "[]",
                leads_to: r#"{"mode": "fast"}"#,
            },
            Fixture {
                // click's suggestion for a name it does not know.
                error: "No such command 'lst'. Did you mean 'list'?",
                schema: r#"{"type": "object", "properties": {"command": {"type": "string"}}}"#,
                sent: r#"{"command": "lst"}"#,
                others: "[]",
                leads_to: r#"{"command": "list"}"#,
            },
            Fixture {
                error: "Command 'north-valley' is not recognized or supported. Supported commands: ls, pwd, cat, head",
                schema: r#"{"type": "object", "properties": {"command": {"type": "string"}, "session_id": {"type": "string"}}}"#,
                sent: r#"{"command": "north-valley"}"#,
                others: "[]",
                leads_to: r#"{"command": "ls"}"#,
            },
            Fixture {
                error: "limit must be one of 10, 50, 100",
                schema: r#"{"type": "object", "properties": {"limit": {"type": "integer"}}}"#,
                sent: r#"{}"#,
                others: "[]",
                leads_to: r#"{"limit": 10}"#,
            },
        ],
        apply: offered,
    },
    Rule {
        name: "already exists",
        trigger: "'already exists' with a value of the refused set quoted (or a path's last parts)",
        learns: "that value made new (`name-2`, `dir/file-2.ext`); where it is both the source and the new name, only the new one",
        seen_in: "servers of files, spreadsheets and databases",
        built_from: &[
            Fixture {
                error: "A sheet named 'Summary' already exists.",
                schema: r#"{"type": "object", "properties": {"sheet": {"type": "string"}, "new_name": {"type": "string"}, "path": {"type": "string"}}}"#,
                sent: r#"{"sheet": "Summary", "new_name": "Summary", "path": "/w/a.xlsx"}"#,
                others: "[]",
                leads_to: r#"{"sheet": "Summary", "new_name": "Summary-2", "path": "/w/a.xlsx"}"#,
            },
            Fixture {
                error: "Move failed: Destination already exists: /w/customer-feedback-final.txt",
                schema: r#"{"type": "object", "properties": {"source": {"type": "string"}, "destination": {"type": "string"}}}"#,
                sent: r#"{"source": "/w/notes.txt", "destination": "/w/customer-feedback-final.txt"}"#,
                others: "[]",
                leads_to: r#"{"source": "/w/notes.txt", "destination": "/w/customer-feedback-final-2.txt"}"#,
            },
        ],
        apply: already_exists,
    },
    Rule {
        name: "named instead",
        trigger: "'use X instead' (also 'use X format instead') where X is a value a property's enum allows, or the word after X names a string property",
        learns: "that property set to X",
        seen_in: "servers that offer a fallback format or mode (archives, exports)",
        built_from: &[Fixture {
            error: "Compression failed: ZIP compression requires additional dependencies. Use tar format instead.",
            schema: r#"{"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}, "format": {"type": "string", "enum": ["zip", "tar", "tar.gz"], "default": "zip"}}}"#,
            sent: r#"{"paths": ["/w/notes.txt"]}"#,
            others: "[]",
            leads_to: r#"{"paths": ["/w/notes.txt"], "format": "tar"}"#,
        }],
        apply: named_instead,
    },
    Rule {
        name: "flag asked for",
        trigger: "the name of a boolean property of the tool, not yet true",
        learns: "those flags set to true",
        seen_in: "confirmation flags of servers that delete (files, tasks, memories)",
        built_from: &[Fixture {
            error: "Refusing to delete without confirmation: pass confirm: true",
            schema: r#"{"type": "object", "properties": {"path": {"type": "string"}, "confirm": {"type": "boolean"}}}"#,
            sent: r#"{"path": "/w/a"}"#,
            others: "[]",
            leads_to: r#"{"path": "/w/a", "confirm": true}"#,
        }],
        apply: flags,
    },
    Rule {
        name: "missing thing",
        trigger: "'has no', 'not found', 'does not exist', 'no such', 'unknown'",
        learns: "optional properties holding an invented name left out (they cannot refer to anything)",
        seen_in: "servers of documents, spreadsheets and notes",
        built_from: &[Fixture {
            error: "Sheet 'S' has no charts.",
            schema: r#"{"type": "object", "required": ["sheet"], "properties": {"sheet": {"type": "string"}, "replace": {"type": "string"}, "at": {"type": "string"}}}"#,
            sent: r#"{"sheet": "blue-harbor", "replace": "quiet-river", "at": "B2"}"#,
            others: "[]",
            leads_to: r#"{"sheet": "blue-harbor", "at": "B2"}"#,
        }],
        apply: missing_thing,
    },
    Rule {
        name: "validator issues",
        trigger: "a JSON issue list (zod's `received`/`options`/`path`, ajv's `instancePath`/`allowedValues`, `too_small`/`too_big`)",
        learns: "each issue's value, found by its path (also inside a string that carries JSON), set to an allowed value or to the length or bound it wants",
        seen_in: "zod and ajv, as the TypeScript SDK's servers return them",
        built_from: &[
            Fixture {
                error: r#"tasks format error: [ { "received": "file kind", "code": "invalid_enum_value", "options": ["TO_MODIFY", "REFERENCE"], "path": [0, "files", 0, "type"] } ]"#,
                schema: r#"{"type": "object", "properties": {"tasksRaw": {"type": "string"}}}"#,
                sent: r#"{"tasksRaw": "[{\"name\":\"a\",\"files\":[{\"type\":\"file kind\"}]}]"}"#,
                others: "[]",
                leads_to: r#"{"tasksRaw": "[{\"name\":\"a\",\"files\":[{\"type\":\"TO_MODIFY\"}]}]"}"#,
            },
            Fixture {
                error: r#"[{"instancePath": "/mode", "keyword": "enum", "params": {"allowedValues": ["fast", "slow"]}}]"#,
                schema: r#"{"type": "object", "properties": {"mode": {"type": "string"}}}"#,
                sent: r#"{"mode": "x"}"#,
                others: "[]",
                leads_to: r#"{"mode": "fast"}"#,
            },
        ],
        apply: received,
    },
    Rule {
        name: "letters, digits and underscores",
        trigger: "'underscore' or 'only letters' with a value of the refused set quoted",
        learns: "hyphens and spaces in that value made underscores",
        seen_in: "servers that name tables, sheets and identifiers",
        built_from: &[Fixture {
            error: "Invalid table name 'my-table'. Start with a letter or underscore and use only letters, digits and underscores.",
            schema: r#"{"type": "object", "properties": {"new_name": {"type": "string"}}}"#,
            sent: r#"{"new_name": "my-table"}"#,
            others: "[]",
            leads_to: r#"{"new_name": "my_table"}"#,
        }],
        apply: underscores,
    },
    Rule {
        name: "one of two, alone",
        trigger: "'either X … or Y' naming two properties (at the top or inside an object argument)",
        learns: "a set with X alone and one with Y alone, values from the other candidates",
        seen_in: "servers with alternative inputs (a block of data or series, options or a source)",
        built_from: &[
            Fixture {
                error: "Cannot provide both search_text and paragraph_index",
                schema: r#"{"type": "object", "properties": {"filename": {"type": "string"}, "search_text": {"type": "string"}, "paragraph_index": {"type": "integer"}}}"#,
                sent: r#"{"filename": "/w/a.docx", "search_text": "plan", "paragraph_index": 1}"#,
                others: "[]",
                leads_to: r#"{"filename": "/w/a.docx", "search_text": "plan"}"#,
            },
            Fixture {
                error: "Pass either source (a block of data) or series (explicit ranges), not both and not neither.",
                schema: r#"{"type": "object", "properties": {"source": {"type": "string"}, "series": {"type": "array"}, "rule": {"type": "object", "properties": {"type": {"type": "string"}}}}}"#,
                sent: r#"{"rule": {"type": "date"}}"#,
                others: "[]",
                leads_to: r#"{"rule": {"type": "date"}, "source": "notes"}"#,
            },
        ],
        apply: exclusive_alone,
    },
    Rule {
        name: "inner field needed",
        trigger: "'need', 'requires', 'required' or 'missing' with the name of a field of an object argument or of the objects of a list argument",
        learns: "that field filled, from the other candidates, beside a path for a path (a destination beside its source), or with a plain value of its schema",
        seen_in: "servers whose arguments are nested objects (rules, styles, series)",
        built_from: &[
            Fixture {
                error: "color_scale needs 2 or 3 colors.",
                schema: r#"{"type": "object", "properties": {"rule": {"type": "object", "properties": {"type": {"type": "string"}, "colors": {"type": "array", "items": {"type": "string"}}}}}}"#,
                sent: r#"{"rule": {"type": "color_scale"}}"#,
                others: "[]",
                leads_to: r#"{"rule": {"type": "color_scale", "colors": ["4472C4", "ED7D31"]}}"#,
            },
            Fixture {
                // An item of a list: a path beside the one it has, for a destination.
                error: r#"{"successful": 0, "errors": 1, "results": [{"operation": "copy", "status": "error", "error": "Destination path is required for copy operation"}]}"#,
                schema: r#"{"type": "object", "properties": {"operations": {"type": "array", "items": {"type": "object", "properties": {"operation": {"type": "string"}, "source": {"type": "string"}, "destination": {"type": "string"}}}}}}"#,
                sent: r#"{"operations": [{"operation": "copy", "source": "/w/notes.txt"}]}"#,
                others: "[]",
                leads_to: r#"{"operations": [{"operation": "copy", "source": "/w/notes.txt", "destination": "/w/notes-2.txt"}]}"#,
            },
        ],
        apply: inner_fields,
    },
    Rule {
        name: "missing field",
        trigger: "'required' or 'missing' with the name of a property not sent",
        learns: "that property filled from the other candidates",
        seen_in: "pydantic ('Field required'), the SDKs' argument checks and hand-written checks",
        built_from: &[Fixture {
            error: "Missing required argument: mode",
            schema: r#"{"type": "object", "properties": {"path": {"type": "string"}, "mode": {"type": "string"}}}"#,
            sent: r#"{"path": "/w/a"}"#,
            others: r#"[{"path": "/w/a", "mode": "fast"}]"#,
            leads_to: r#"{"path": "/w/a", "mode": "fast"}"#,
        }],
        apply: missing_fields,
    },
];

/// Values a field is offered, put in that field, or in place of the value quoted back.
fn offered(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let text = r.text;
    let lowered = r.lowered.as_str();
    let properties = r.properties;
    let arguments = r.arguments;
    let current = &r.current;
    // Values offered for a field. A value that was sent and is quoted back before the list
    // ("Field 'x' not found. Available fields: 'name', 'amount'") is replaced where it is,
    // also deep inside an object or array argument and as the sheet of a reference
    // (`Data!B2:B9`); values not sent yet come first.
    if let Some((at, values)) = offered_values(text) {
        if let Some(q) = &refused_value(text, at, arguments, r.packs) {
            let (fresh, sent): (Vec<&String>, Vec<&String>) =
                values.iter().partition(|v| !holds(arguments, v, 0));
            // "Field 'x' not found": where the same value was sent under several names, the
            // member named like the word before the quote ("field") is the one refused.
            let noun = noun_before(text, q);
            let only_named = noun
                .as_deref()
                .is_some_and(|n| key_holding_named(arguments, q, n, 0));
            for v in fresh.into_iter().chain(sent) {
                let mut c = arguments.clone();
                let to = Value::String(v.clone());
                let replaced = if only_named {
                    replace_named(&mut c, q, &to, noun.as_deref().unwrap_or(""), 0)
                } else {
                    replace_deep(&mut c, q, &to, 0)
                };
                if replaced | replace_embedded(&mut c, q, v, r.packs, 0) {
                    if let Value::Object(c) = c {
                        push(c);
                    }
                }
            }
        } else if let Some(field) = field_of(lowered, at, properties, current) {
            for value in values {
                let mut c = current.clone();
                c.insert(field.clone(), typed(&value, &properties[&field]));
                push(c);
            }
        }
    }
}

/// A value that already exists, made new.
fn already_exists(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let lowered = r.lowered.as_str();
    let current = &r.current;
    // "A sheet named 'x' already exists": the value quoted back, made new (before a flag
    // that would overwrite it: what exists may be what other tools work on).
    if lowered.contains("already exist") {
        let quoted: Vec<(&String, &str)> = current
            .iter()
            .filter_map(|(k, v)| Some((k, v.as_str().filter(|s| s.len() >= 2)?)))
            .filter(|(_, s)| {
                let s = s.to_lowercase();
                // A path may come back shorter: "data/table.csv already exists".
                let tail: String = {
                    let parts: Vec<&str> = s.rsplit('/').take(2).collect();
                    parts.into_iter().rev().collect::<Vec<_>>().join("/")
                };
                lowered.contains(&format!("'{s}'"))
                    || lowered.contains(&format!("\"{s}\""))
                    // "Destination already exists: /w/a.txt": a whole path, unquoted.
                    || (s.starts_with('/') && lowered.contains(&s))
                    || (s.contains('/') && lowered.contains(&format!("{tail} already exist")))
            })
            .collect();
        // Where the same value is the source and the new name, only the new one changes.
        let creating = |k: &str| {
            let lk = k.to_lowercase();
            ["new", "dest", "target", "output", "to_", "_to"]
                .iter()
                .any(|w| lk.contains(w))
        };
        let chosen: Vec<&(&String, &str)> = if quoted.iter().any(|(k, _)| creating(k)) {
            quoted.iter().filter(|(k, _)| creating(k)).collect()
        } else {
            quoted.iter().collect()
        };
        if !chosen.is_empty() {
            let mut c = current.clone();
            for (k, s) in chosen {
                c.insert((*k).clone(), Value::String(renamed(s)));
            }
            push(c);
        }
    }
}

/// A value the error says to use instead, set where the schema allows it.
fn named_instead(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    static INSTEAD: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"(?i)\buse\s+(?:the\s+)?['"`]?([A-Za-z0-9_.\-]+)['"`]?\s+(?:([A-Za-z_]+)\s+)?instead\b"#)
            .expect("static regex")
    });
    for c in INSTEAD.captures_iter(r.text).take(2) {
        let value = &c[1];
        let noun = c.get(2).map(|m| m.as_str().to_lowercase());
        let allows = |p: &Value| {
            p.get("enum")
                .and_then(Value::as_array)
                .is_some_and(|e| e.iter().any(|v| v.as_str() == Some(value)))
        };
        let field = r
            .properties
            .iter()
            .find(|(_, p)| allows(p))
            .or_else(|| {
                let noun = noun.as_deref()?;
                r.properties.iter().find(|(k, p)| {
                    p.get("type").and_then(Value::as_str) == Some("string")
                        && super::semantics::words(k).last().map(String::as_str) == Some(noun)
                })
            })
            .map(|(k, _)| k.clone());
        if let Some(field) = field {
            let mut c = r.current.clone();
            c.insert(field.clone(), typed(value, &r.properties[&field]));
            push(c);
        }
    }
}

/// The boolean properties the error names, set.
fn flags(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let lowered = r.lowered.as_str();
    let properties = r.properties;
    let current = &r.current;
    // A flag the error asks for ("set confirm to true to delete"): the boolean properties it
    // names, set.
    let flags: Vec<&String> = properties
        .iter()
        .filter(|(k, p)| {
            p.get("type").and_then(Value::as_str) == Some("boolean")
                && current.get(*k) != Some(&Value::Bool(true))
                && mentions(lowered, &k.to_lowercase()).is_some()
        })
        .map(|(k, _)| k)
        .collect();
    if !flags.is_empty() {
        let mut c = current.clone();
        for k in flags {
            c.insert(k.clone(), Value::Bool(true));
        }
        push(c);
    }
}

/// An optional invented name that cannot refer to anything, left out.
fn missing_thing(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let lowered = r.lowered.as_str();
    let schema = r.schema;
    let current = &r.current;
    // "Sheet 'x' has no charts", "not found": an optional property holding an invented
    // name ("replace": a chart to replace) cannot refer to anything; left out.
    static MISSING_THING: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\b(has no|have no|there (are|is) no|not found|does not exist|doesn't exist|no such|unknown)\b")
            .expect("static regex")
    });
    if MISSING_THING.is_match(lowered) {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut c = current.clone();
        c.retain(|k, v| {
            required.contains(&k.as_str()) || !v.as_str().is_some_and(super::synth::is_invented)
        });
        if c.len() < current.len() {
            push(c);
        }
    }
}

/// A validator's issue list applied.
fn received(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let text = r.text;
    let arguments = r.arguments;
    // A validator's issue list (zod, ajv) that says which value it received and which it
    // allows: that value replaced wherever it is, also inside a string that carries JSON.
    let replaced = replace_received(text, arguments);
    if let Some(Value::Object(c)) = replaced {
        push(c);
    }
}

/// Hyphens and spaces made underscores.
fn underscores(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let lowered = r.lowered.as_str();
    let current = &r.current;
    // "Use only letters, digits and underscores": hyphens and spaces become underscores in
    // the value the error quotes back.
    if lowered.contains("underscore") || lowered.contains("only letters") {
        let mut c = current.clone();
        let mut changed = false;
        for (k, v) in current.iter() {
            if let Some(s) = v.as_str() {
                if s.contains(['-', ' ']) && lowered.contains(&s.to_lowercase()) {
                    c.insert(k.clone(), Value::String(s.replace(['-', ' '], "_")));
                    changed = true;
                }
            }
        }
        if changed {
            push(c);
        }
    }
}

/// One of two exclusive arguments, alone.
fn exclusive_alone(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let lowered = r.lowered.as_str();
    let properties = r.properties;
    let current = &r.current;
    let others = r.others;
    // "Pass either source or series, not both": one of them, alone (also inside an object
    // argument, like a rule's fields).
    for (x, y) in either_or(lowered) {
        for c in exclusive_choices(current, properties, others, &x, &y) {
            push(c);
        }
    }
}

/// A missing field of an object argument, filled.
fn inner_fields(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let lowered = r.lowered.as_str();
    let properties = r.properties;
    let current = &r.current;
    let others = r.others;
    // "date rules need a period", "custom validation needs a formula": a field of an object
    // argument that is missing there, taken from the other candidates.
    if ["need", "requires", "required", "missing"]
        .iter()
        .any(|w| lowered.contains(w))
    {
        let mut c = current.clone();
        let mut changed = false;
        let fill = |param: &str,
                    inner: &Map<String, Value>,
                    inner_props: &Map<String, Value>,
                    from_other: &dyn Fn(&Value) -> Option<Value>|
         -> Option<Map<String, Value>> {
            let mut filled = inner.clone();
            let mut any = false;
            for field in inner_props.keys() {
                if inner.contains_key(field) || mentions(lowered, &field.to_lowercase()).is_none() {
                    continue;
                }
                let v = others
                    .iter()
                    .find_map(|o| from_other(o.get(param)?)?.get(field.as_str()).cloned())
                    .or_else(|| path_beside(field, inner))
                    .or_else(|| plain_value_for(field, &inner_props[field]));
                if let Some(v) = v {
                    filled.insert(field.clone(), v);
                    any = true;
                }
            }
            any.then_some(filled)
        };
        for (param, inner, inner_props) in object_arguments(current, properties) {
            if let Some(filled) = fill(param, inner, inner_props, &|v| Some(v.clone())) {
                c.insert(param.clone(), Value::Object(filled));
                changed = true;
            }
        }
        // The first object of a list argument ("Condition 0 missing required key 'field'").
        for (param, inner, inner_props) in item_arguments(current, properties) {
            if let Some(filled) = fill(param, inner, inner_props, &|v| v.get(0).cloned()) {
                let mut items = current[param.as_str()]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                items[0] = Value::Object(filled);
                c.insert(param.clone(), Value::Array(items));
                changed = true;
            }
        }
        if changed {
            push(c);
        }
    }
}

/// Fields named as missing, filled.
fn missing_fields(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let lowered = r.lowered.as_str();
    let properties = r.properties;
    let current = &r.current;
    let others = r.others;
    // Fields named as missing.
    if lowered.contains("required") || lowered.contains("missing") {
        let missing: Vec<&String> = properties
            .keys()
            .filter(|k| !current.contains_key(*k) && mentions(lowered, &k.to_lowercase()).is_some())
            .collect();
        if !missing.is_empty() {
            let mut c = current.clone();
            for k in missing {
                if let Some(v) = others.iter().find_map(|o| o.get(k.as_str())) {
                    c.insert(k.clone(), v.clone());
                }
            }
            push(c);
        }
    }
}

/// `arguments` corrected by a validator's issue list (zod, ajv), when the error carries one
/// as JSON: each issue's value, found by its `path` (in the arguments, or inside a string
/// argument that holds JSON) or by the value it `received`, set to the first value it allows
/// (`options`, `allowedValues`), padded or cut to the length it wants (`too_small`,
/// `too_big`, `minLength`, `maxLength`), or set to the bound of a number.
fn replace_received(text: &str, arguments: &Value) -> Option<Value> {
    let issues = super::pool::json_in(text)?;
    let issues: Vec<&Value> = match &issues {
        Value::Array(a) => a.iter().collect(),
        Value::Object(o) => o
            .get("issues")
            .or_else(|| o.get("errors"))
            .and_then(Value::as_array)
            .map(|a| a.iter().collect())
            .unwrap_or_else(|| vec![&issues]),
        _ => return None,
    };
    let mut out = arguments.clone();
    let mut changed = false;
    for issue in issues.iter().take(20) {
        let allowed = ["options", "allowedValues", "values"]
            .iter()
            .find_map(|k| issue.get(*k).and_then(Value::as_array))
            .or_else(|| {
                issue
                    .get("params")
                    .and_then(|p| p.get("allowedValues"))
                    .and_then(Value::as_array)
            })
            .and_then(|a| a.first())
            .cloned();
        let path = issue_path(issue);
        let fix = |current: &Value| -> Option<Value> {
            if let Some(a) = &allowed {
                return Some(a.clone());
            }
            let code = issue
                .get("code")
                .or_else(|| issue.get("keyword"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let bound = |k: &str| {
                issue
                    .get(k)
                    .or_else(|| issue.get("params").and_then(|p| p.get("limit")))
                    .and_then(Value::as_u64)
            };
            match (code, current) {
                ("too_small" | "minLength", Value::String(s)) => {
                    let min = bound("minimum")? as usize;
                    let mut padded = s.clone();
                    while padded.chars().count() < min {
                        padded.push_str(" with more detail");
                    }
                    Some(Value::String(padded))
                }
                ("too_big" | "maxLength", Value::String(s)) => {
                    let max = bound("maximum")? as usize;
                    Some(Value::String(s.chars().take(max.max(1)).collect()))
                }
                ("too_small" | "minimum", Value::Number(_)) => bound("minimum").map(Value::from),
                ("too_big" | "maximum", Value::Number(_)) => bound("maximum").map(Value::from),
                _ => None,
            }
        };
        let by_path = path
            .as_deref()
            .is_some_and(|p| !p.is_empty() && fix_at_path(&mut out, p, &fix));
        if by_path {
            changed = true;
        } else if let (Some(received), Some(to)) = (
            issue.get("received").and_then(Value::as_str),
            allowed.as_ref(),
        ) {
            changed |= replace_deep(&mut out, received, to, 0);
        }
    }
    changed.then_some(out)
}

/// An issue's path: zod's `path` array, or ajv's `instancePath` ("/tasks/0/name").
fn issue_path(issue: &Value) -> Option<Vec<Value>> {
    if let Some(Value::Array(p)) = issue.get("path") {
        return Some(p.clone());
    }
    let pointer = issue.get("instancePath").and_then(Value::as_str)?;
    Some(
        pointer
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| match s.parse::<u64>() {
                Ok(n) => Value::from(n),
                Err(_) => Value::String(s.to_string()),
            })
            .collect(),
    )
}

/// Applies `fix` to the value at `path` in `arguments`, or at `path` inside one of its string
/// members that holds JSON (a validator that parsed that string reports paths inside it).
fn fix_at_path(
    arguments: &mut Value,
    path: &[Value],
    fix: &dyn Fn(&Value) -> Option<Value>,
) -> bool {
    fn at<'v>(v: &'v mut Value, path: &[Value]) -> Option<&'v mut Value> {
        path.iter().try_fold(v, |v, step| match (v, step) {
            (Value::Object(m), Value::String(k)) => m.get_mut(k),
            (Value::Array(a), Value::Number(n)) => a.get_mut(n.as_u64()? as usize),
            _ => None,
        })
    }
    if let Some(target) = at(arguments, path) {
        if let Some(new) = fix(target) {
            if *target != new {
                *target = new;
                return true;
            }
        }
        return false;
    }
    let Value::Object(members) = arguments else {
        return false;
    };
    for member in members.values_mut() {
        let Value::String(s) = member else { continue };
        let Ok(mut inner) = serde_json::from_str::<Value>(s) else {
            continue;
        };
        if let Some(target) = at(&mut inner, path) {
            if let Some(new) = fix(target) {
                if *target != new {
                    *target = new;
                    *s = inner.to_string();
                    return true;
                }
            }
        }
    }
    false
}

/// Replaces string values equal to `from` by `to` inside `v`, and inside strings that hold
/// JSON; whether anything changed.
fn replace_deep(v: &mut Value, from: &str, to: &Value, depth: usize) -> bool {
    if depth > 16 {
        return false;
    }
    match v {
        Value::String(s) if s == from => {
            *v = to.clone();
            true
        }
        Value::String(s) if s.trim_start().starts_with(['[', '{']) => {
            let Ok(mut inner) = serde_json::from_str::<Value>(s) else {
                return false;
            };
            let changed = replace_deep(&mut inner, from, to, depth + 1);
            if changed {
                *s = inner.to_string();
            }
            changed
        }
        Value::Array(items) => items
            .iter_mut()
            .fold(false, |acc, i| replace_deep(i, from, to, depth + 1) | acc),
        Value::Object(map) => map
            .values_mut()
            .fold(false, |acc, i| replace_deep(i, from, to, depth + 1) | acc),
        _ => false,
    }
}

/// The value sent that an error quotes back just before its list of offered values at `at`
/// ("Sheet 'S' has no PivotTable 'P'. Available: …" → `P`): the closest quoted value the
/// arguments hold, where a quoted reference (`'Data!B2'`) gives way to the sheet quoted in it.
fn refused_value(text: &str, at: usize, arguments: &Value, packs: &Packs) -> Option<String> {
    let quoted = quoted_words(text.get(..at).unwrap_or(text));
    let embedded_at = |s: &str, name: &str| packs.notations().any(|n| (n.at)(s, name).is_some());
    quoted
        .iter()
        .rev()
        .filter(|q| q.len() >= 2)
        .filter(|q| {
            !quoted
                .iter()
                .any(|r| r != *q && r.len() >= 2 && embedded_at(q, r))
        })
        .find(|q| holds(arguments, q, 0) || holds_embedded(arguments, q, packs, 0))
        .cloned()
}

/// The word just before `'q'` in `text`, singular and lowercased ("Sheet 'x'" → sheet).
fn noun_before(text: &str, q: &str) -> Option<String> {
    let at = text
        .find(&format!("'{q}'"))
        .or_else(|| text.find(&format!("\"{q}\"")))?;
    let word = text[..at]
        .trim_end()
        .rsplit(|c: char| !c.is_alphanumeric())
        .next()?
        .to_lowercase();
    (word.len() >= 2).then(|| super::pool::singular(&word))
}

/// Whether a member whose name has the word `noun` holds the string `s` (at any depth).
fn key_holding_named(v: &Value, s: &str, noun: &str, depth: usize) -> bool {
    depth <= 16
        && match v {
            Value::Object(map) => map.iter().any(|(k, x)| {
                (x.as_str() == Some(s) && names(k, noun))
                    || key_holding_named(x, s, noun, depth + 1)
            }),
            Value::Array(items) => items
                .iter()
                .any(|x| key_holding_named(x, s, noun, depth + 1)),
            _ => false,
        }
}

/// Whether property name `k` has the word `noun` (`sheet_name`, `sheetName` for sheet).
fn names(k: &str, noun: &str) -> bool {
    super::semantics::words(k)
        .iter()
        .any(|w| super::pool::singular(w) == noun)
}

/// Replaces string values equal to `from` by `to` in members whose name has the word `noun`
/// (at any depth); whether anything changed.
fn replace_named(v: &mut Value, from: &str, to: &Value, noun: &str, depth: usize) -> bool {
    if depth > 16 {
        return false;
    }
    match v {
        Value::Object(map) => map.iter_mut().fold(false, |acc, (k, x)| {
            if x.as_str() == Some(from) && names(k, noun) {
                *x = to.clone();
                true
            } else {
                replace_named(x, from, to, noun, depth + 1) | acc
            }
        }),
        Value::Array(items) => items.iter_mut().fold(false, |acc, x| {
            replace_named(x, from, to, noun, depth + 1) | acc
        }),
        _ => false,
    }
}

/// The name of the member of `v` (at any depth) whose value is the string `s`.
fn key_holding(v: &Value, s: &str, depth: usize) -> Option<String> {
    if depth > 16 {
        return None;
    }
    match v {
        Value::Object(map) => map.iter().find_map(|(k, x)| {
            if x.as_str() == Some(s) {
                Some(k.clone())
            } else {
                key_holding(x, s, depth + 1)
            }
        }),
        Value::Array(items) => items.iter().find_map(|x| key_holding(x, s, depth + 1)),
        _ => None,
    }
}

/// Whether `v` holds the string `s` as a value (deep, also inside strings that hold JSON).
fn holds(v: &Value, s: &str, depth: usize) -> bool {
    depth <= 16
        && match v {
            Value::String(x) if x == s => true,
            Value::String(x) if x.trim_start().starts_with(['[', '{']) => {
                serde_json::from_str::<Value>(x).is_ok_and(|inner| holds(&inner, s, depth + 1))
            }
            Value::Array(items) => items.iter().any(|i| holds(i, s, depth + 1)),
            Value::Object(map) => map.values().any(|i| holds(i, s, depth + 1)),
            _ => false,
        }
}

/// Whether a string in `v` embeds `name` in the notation of a pack in force (a sheet in
/// `Data!B2:B9`).
fn holds_embedded(v: &Value, name: &str, packs: &Packs, depth: usize) -> bool {
    depth <= 16
        && match v {
            Value::String(x) => packs.notations().any(|n| (n.at)(x, name).is_some()),
            Value::Array(items) => items
                .iter()
                .any(|i| holds_embedded(i, name, packs, depth + 1)),
            Value::Object(map) => map
                .values()
                .any(|i| holds_embedded(i, name, packs, depth + 1)),
            _ => false,
        }
}

/// Replaces `from` by `to` where the strings of `v` embed it in the notation of a pack in
/// force (written as that notation quotes it); whether anything changed.
fn replace_embedded(v: &mut Value, from: &str, to: &str, packs: &Packs, depth: usize) -> bool {
    if depth > 16 {
        return false;
    }
    match v {
        Value::String(s) => {
            let mut changed = false;
            for notation in packs.notations() {
                let to = (notation.quote)(to);
                for _ in 0..8 {
                    let Some(range) = (notation.at)(s, from) else {
                        break;
                    };
                    s.replace_range(range, &to);
                    changed = true;
                }
            }
            changed
        }
        Value::Array(items) => items.iter_mut().fold(false, |acc, i| {
            replace_embedded(i, from, to, packs, depth + 1) | acc
        }),
        Value::Object(map) => map.values_mut().fold(false, |acc, i| {
            replace_embedded(i, from, to, packs, depth + 1) | acc
        }),
        _ => false,
    }
}

/// The pairs of words an error offers as alternatives ("either source ... or series").
fn either_or(lowered: &str) -> Vec<(String, String)> {
    static EITHER: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"\beither\s+`?([a-z_][a-z0-9_]*)`?[^.;]{0,60}?\bor\s+`?([a-z_][a-z0-9_]*)`?",
        )
        .expect("static regex")
    });
    // "Cannot provide both search_text and paragraph_index", "x and y are mutually
    // exclusive", "only one of x or y": one of them alone as well.
    static NOT_BOTH: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"\b(?:(?:cannot|can't|can not|must not|do not|don't|not)\s+(?:\w+\s+)?both|only one of)\s+`?([a-z_][a-z0-9_]*)`?,?\s+(?:and|or)\s+`?([a-z_][a-z0-9_]*)`?|\b`?([a-z_][a-z0-9_]*)`?\s+and\s+`?([a-z_][a-z0-9_]*)`?\s+are mutually exclusive",
        )
        .expect("static regex")
    });
    EITHER
        .captures_iter(lowered)
        .take(4)
        .map(|c| (c[1].to_string(), c[2].to_string()))
        .chain(NOT_BOTH.captures_iter(lowered).take(4).filter_map(|c| {
            let x = c.get(1).or(c.get(3))?;
            let y = c.get(2).or(c.get(4))?;
            Some((x.as_str().to_string(), y.as_str().to_string()))
        }))
        .collect()
}

/// Argument sets with exactly one of the properties `x` and `y`, at the top level or inside
/// an object argument whose schema has both; a value missing from `current` comes from the
/// other candidates.
fn exclusive_choices(
    current: &Map<String, Value>,
    properties: &Map<String, Value>,
    others: &[Value],
    x: &str,
    y: &str,
) -> Vec<Map<String, Value>> {
    let find_key = |props: &Map<String, Value>, word: &str| {
        props.keys().find(|k| k.to_lowercase() == word).cloned()
    };
    let one_of = |obj: &Map<String, Value>,
                  props: &Map<String, Value>,
                  from: &dyn Fn(&str) -> Option<Value>|
     -> Vec<Map<String, Value>> {
        let (Some(kx), Some(ky)) = (find_key(props, x), find_key(props, y)) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (keep, drop) in [(&kx, &ky), (&ky, &kx)] {
            let mut o = obj.clone();
            o.remove(drop);
            if !o.contains_key(keep) {
                match from(keep).or_else(|| plain_value_for(keep, &props[keep.as_str()])) {
                    Some(v) => {
                        o.insert(keep.clone(), v);
                    }
                    None => continue,
                }
            }
            out.push(o);
        }
        out
    };
    let top = one_of(current, properties, &|k| {
        others.iter().find_map(|o| o.get(k)).cloned()
    });
    if !top.is_empty() {
        return top;
    }
    let mut out = Vec::new();
    for (param, inner, inner_props) in object_arguments(current, properties) {
        for o in one_of(inner, inner_props, &|k| {
            others
                .iter()
                .find_map(|c| c.get(param.as_str())?.get(k))
                .cloned()
        }) {
            let mut c = current.clone();
            c.insert(param.clone(), Value::Object(o));
            out.push(c);
        }
    }
    out
}

/// The list arguments whose first item is an object and whose items' schema declares
/// properties: (name, first item, properties).
fn item_arguments<'a>(
    current: &'a Map<String, Value>,
    properties: &'a Map<String, Value>,
) -> impl Iterator<Item = (&'a String, &'a Map<String, Value>, &'a Map<String, Value>)> {
    current.iter().filter_map(|(param, value)| {
        let first = value.as_array()?.first()?.as_object()?;
        let inner_props = properties
            .get(param)?
            .get("items")?
            .get("properties")?
            .as_object()?;
        Some((param, first, inner_props))
    })
}

/// For a field that names a place to write (`destination`, `target`, `output_path`), a new
/// path beside the path `beside` already holds (`/w/notes.txt` → `/w/notes-2.txt`).
fn path_beside(field: &str, beside: &Map<String, Value>) -> Option<Value> {
    let ws = super::semantics::words(field);
    let place = ws.iter().any(|w| {
        [
            "destination",
            "dest",
            "target",
            "output",
            "to",
            "path",
            "file",
        ]
        .contains(&w.as_str())
    });
    if !place {
        return None;
    }
    beside
        .values()
        .filter_map(Value::as_str)
        .find(|s| s.starts_with('/'))
        .map(|s| Value::String(renamed(s)))
}

/// The object-valued arguments whose schema declares properties: (name, value, properties).
fn object_arguments<'a>(
    current: &'a Map<String, Value>,
    properties: &'a Map<String, Value>,
) -> impl Iterator<Item = (&'a String, &'a Map<String, Value>, &'a Map<String, Value>)> {
    current.iter().filter_map(|(param, value)| {
        let inner = value.as_object()?;
        let inner_props = properties.get(param)?.get("properties")?.as_object()?;
        Some((param, inner, inner_props))
    })
}

/// A plain value that a schema accepts: its default or first example or enum value, else a
/// small value of its type (arrays get two items: "needs 2 or 3 colors").
fn plain_value(schema: &Value, depth: usize) -> Option<Value> {
    if depth > 4 {
        return None;
    }
    if let Some(v) = schema.get("default").filter(|d| !d.is_null()) {
        return Some(v.clone());
    }
    for key in ["examples", "enum"] {
        if let Some(v) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return Some(v.clone());
        }
    }
    if let Some(v) = schema.get("const") {
        return Some(v.clone());
    }
    Some(match schema.get("type").and_then(Value::as_str)? {
        "string" => Value::String("notes".into()),
        "integer" | "number" => Value::from(
            schema
                .get("minimum")
                .and_then(Value::as_i64)
                .unwrap_or(1)
                .max(1),
        ),
        "boolean" => Value::Bool(true),
        "array" => {
            let item = plain_value(schema.get("items")?, depth + 1)?;
            Value::Array(vec![item.clone(), item])
        }
        "object" => Value::Object(Map::new()),
        _ => return None,
    })
}

/// A plain value for the property `name`: colours are hex RGB (`4472C4`, with `#` when the
/// schema's description shows one), the rest as [`plain_value`] makes them.
fn plain_value_for(name: &str, schema: &Value) -> Option<Value> {
    let lowered = name.to_lowercase();
    if lowered.contains("color") || lowered.contains("colour") {
        let hash = schema.to_string().contains('#');
        let hex = Value::String(if hash { "#4472C4" } else { "4472C4" }.to_string());
        return match schema.get("type").and_then(Value::as_str) {
            Some("array") => Some(Value::Array(vec![
                hex,
                Value::String(if hash { "#ED7D31" } else { "ED7D31" }.to_string()),
            ])),
            Some("string") | None => Some(hex),
            _ => plain_value(schema, 0),
        };
    }
    plain_value(schema, 0)
}

/// A new name beside `s`: `name-2`, `dir/file-2.ext`.
fn renamed(s: &str) -> String {
    let (dir, file) = match s.rfind('/') {
        Some(i) => (&s[..=i], &s[i + 1..]),
        None => ("", s),
    };
    match file.rfind('.').filter(|i| *i > 0) {
        Some(i) => format!("{dir}{}-2{}", &file[..i], &file[i..]),
        None => format!("{dir}{file}-2"),
    }
}

/// The parameter an error's list of offered values is about, and the values, when the error
/// has such a list and names a property of `schema`.
pub fn offered_for(
    text: &str,
    schema: &Value,
    arguments: &Value,
    packs: &Packs,
) -> Option<(String, Vec<String>)> {
    let properties = schema.get("properties").and_then(Value::as_object)?;
    let current = arguments.as_object().cloned().unwrap_or_default();
    let (at, values) = offered_values(text)?;
    // The member that held the refused value, at any depth (`target.name` is a name).
    let field = refused_value(text, at, arguments, packs)
        .and_then(|q| key_holding(arguments, &q, 0))
        .or_else(|| field_of(&text.to_lowercase(), at, properties, &current))?;
    Some((field, values))
}

/// Where in `text` a list of accepted values begins, and its values.
pub fn offered_values(text: &str) -> Option<(usize, Vec<String>)> {
    // ASCII lower case keeps every byte offset of `text` (the triggers are ASCII): a full
    // lower-casing changes the length of some characters and would cut `text` mid-character.
    let lowered = text.to_ascii_lowercase();
    for trigger in LIST_TRIGGERS {
        let mut from = 0;
        while let Some(pos) = lowered[from..].find(trigger).map(|p| p + from) {
            from = pos + trigger.len();
            // A whole word: "unsupported" and "unexpected" offer nothing.
            if lowered[..pos]
                .chars()
                .next_back()
                .is_some_and(char::is_alphanumeric)
            {
                continue;
            }
            let mut rest = &text[from..];
            // "Available sheets: …": skip the words up to a colon close by.
            let mut colon_seen = false;
            if let Some(colon) = rest.find(':').filter(|c| *c < 40) {
                if !rest[..colon].contains(['\n', '.', '\'', '"', '[']) {
                    rest = &rest[colon + 1..];
                    colon_seen = true;
                }
            }
            // "Supported commands: ls, pwd" lists; "'>' not supported between instances of
            // 'NoneType' and 'int'" does not.
            if trigger == "supported" && !colon_seen {
                continue;
            }
            let values = list_values(rest);
            if !values.is_empty() {
                return Some((pos, values));
            }
        }
    }
    // "Sheets: 'a', 'b'", "Columns: [\"x\", \"y\"]": a plural noun and a colon before quoted
    // values.
    static PLURAL_LIST: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"\b[A-Za-z]{3,}s:\s*['"`\[]"#).expect("static regex"));
    // "Use 'list', 'get_layouts', or 'get_info'": quoted values right after "use" or "try".
    static USE_LIST: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r#"(?i)\b(?:use|try)\s+['"`]"#).expect("static regex"));
    PLURAL_LIST
        .find_iter(text)
        .find_map(|m| {
            let colon = m.start() + m.as_str().find(':')?;
            let values = list_values(&text[colon + 1..]);
            (!values.is_empty()).then_some((m.start(), values))
        })
        .or_else(|| {
            USE_LIST.find_iter(text).find_map(|m| {
                let values = list_values(&text[m.end() - 1..]);
                (!values.is_empty()).then_some((m.start(), values))
            })
        })
}

/// The values of a list at the start of `rest`: a JSON or Python array, quoted words, or bare
/// words separated by commas, bars or "or", up to the end of the sentence.
fn list_values(rest: &str) -> Vec<String> {
    let rest = rest.trim_start();
    // A JSON key's closing quote (`"allowedValues": […]`).
    let rest = rest
        .strip_prefix("\":")
        .or_else(|| rest.strip_prefix("':"))
        .unwrap_or(rest);
    let rest = rest.trim_start_matches(['=', ':']).trim_start();
    if rest.starts_with('[') {
        if let Some(end) = rest.find(']') {
            let inner = &rest[..=end];
            let parsed = serde_json::from_str::<Vec<Value>>(inner)
                .or_else(|_| serde_json::from_str::<Vec<Value>>(&inner.replace('\'', "\"")));
            if let Ok(items) = parsed {
                return items
                    .iter()
                    .filter_map(|v| match v {
                        Value::String(s) => Some(s.clone()),
                        Value::Number(n) => Some(n.to_string()),
                        _ => None,
                    })
                    .take(MAX_VALUES)
                    .collect();
            }
        }
    }
    let end = [
        "\n",
        ". ",
        ";",
        " received",
        " but got",
        ", got",
        " instead",
    ]
    .iter()
    .filter_map(|t| rest.find(t))
    .min()
    .unwrap_or(rest.len());
    let segment = rest[..end].trim_end_matches('.');
    let quoted = quoted_words(segment);
    if !quoted.is_empty() {
        return quoted.into_iter().take(MAX_VALUES).collect();
    }
    let words: Vec<String> = segment
        .split([',', '|', '[', ']', '(', ')'])
        .flat_map(|part| part.split(" or "))
        .map(|w| w.trim().to_string())
        .filter(|w| {
            !w.is_empty()
                && w.len() <= 64
                && !w.contains(' ')
                && w.chars()
                    .all(|c| c.is_alphanumeric() || "-_./@".contains(c))
        })
        .take(MAX_VALUES)
        .collect();
    // A sentence of one bare word is prose more often than a list.
    if words.len() >= 2 { words } else { Vec::new() }
}

/// The strings in single, double or back quotes in `segment`.
fn quoted_words(segment: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = segment.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if matches!(c, '\'' | '"' | '`') {
            if let Some(len) = segment[i + 1..].find(c) {
                let word = &segment[i + 1..i + 1 + len];
                if !word.is_empty() && word.len() <= 128 && !out.iter().any(|w| w == word) {
                    out.push(word.to_string());
                }
                // Skip past the closing quote.
                while chars.peek().is_some_and(|(j, _)| *j <= i + 1 + len) {
                    chars.next();
                }
            }
        }
    }
    out
}

/// Where `name` is mentioned in `lowered` as a word (quoted or bare), if it is.
pub(crate) fn mentions(lowered: &str, name: &str) -> Option<usize> {
    let bytes = lowered.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut from = 0;
    while let Some(pos) = lowered[from..].find(name).map(|p| p + from) {
        let before = pos.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(pos + name.len()).copied();
        if !before.is_some_and(word) && !after.is_some_and(word) {
            return Some(pos);
        }
        from = pos + name.len();
    }
    None
}

/// The property a list of values at `at` is for: the schema property named closest before
/// it, else the one whose refused value the error repeats, else the only string property.
fn field_of(
    lowered: &str,
    at: usize,
    properties: &Map<String, Value>,
    current: &Map<String, Value>,
) -> Option<String> {
    let named_before = properties
        .keys()
        .filter_map(|k| {
            let lk = k.to_lowercase();
            let mut best = None;
            let mut from = 0;
            while let Some(p) = mentions(&lowered[from..], &lk).map(|p| p + from) {
                if p < at {
                    best = Some(p);
                }
                from = p + lk.len();
                if from >= lowered.len() {
                    break;
                }
            }
            best.map(|p| (p, k.clone()))
        })
        .max();
    // The value that was sent, quoted back ("Invalid range 'x'"), names its field best.
    let echoed = current.iter().find(|(_, v)| {
        v.as_str()
            .is_some_and(|s| s.len() >= 4 && lowered.contains(&format!("'{}'", s.to_lowercase())))
    });
    if let Some((k, _)) = echoed {
        return Some(k.clone());
    }
    if let Some((_, k)) = named_before {
        return Some(k);
    }
    let echoed = current.iter().find(|(_, v)| {
        v.as_str()
            .is_some_and(|s| s.len() >= 2 && lowered.contains(&s.to_lowercase()))
    });
    if let Some((k, _)) = echoed {
        return Some(k.clone());
    }
    let strings: Vec<&String> = properties
        .iter()
        .filter(|(_, p)| p.get("type").and_then(Value::as_str) == Some("string"))
        .map(|(k, _)| k)
        .collect();
    (strings.len() == 1).then(|| strings[0].clone())
}

/// `value` in the type the property expects.
fn typed(value: &str, property: &Value) -> Value {
    match property.get("type").and_then(Value::as_str) {
        Some("integer") => value
            .parse::<i64>()
            .map(Value::from)
            .unwrap_or(Value::from(value)),
        Some("number") => value
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or(Value::from(value)),
        Some("boolean") => value
            .parse::<bool>()
            .map(Value::from)
            .unwrap_or(Value::from(value)),
        Some("array") => Value::Array(vec![Value::from(value)]),
        _ => Value::from(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The corrections with every pack in force.
    fn corrections(text: &str, schema: &Value, arguments: &Value, others: &[Value]) -> Vec<Value> {
        super::corrections(text, schema, arguments, others, &Packs::all())
    }

    fn offered_for(text: &str, schema: &Value, arguments: &Value) -> Option<(String, Vec<String>)> {
        super::offered_for(text, schema, arguments, &Packs::all())
    }

    #[test]
    fn every_rule_turns_the_errors_it_was_built_from_into_what_they_ask() {
        let json = |s: &str| serde_json::from_str::<Value>(s).expect(s);
        let rules = CORE.iter().map(|r| ("core", r)).chain(
            super::super::packs::ALL
                .iter()
                .flat_map(|p| p.rules.iter().map(|r| (p.name, r))),
        );
        for (pack, rule) in rules {
            assert!(
                !rule.built_from.is_empty(),
                "{pack}: {} has no fixture",
                rule.name
            );
            // The packs' rules run before the core's that fill what is missing.
            assert_eq!(CORE[CORE_BEFORE_PACKS].name, "one of two, alone");
            assert!(
                !rule.trigger.is_empty() && !rule.learns.is_empty() && !rule.seen_in.is_empty()
            );
            // The core's rules stand alone: they run with no pack in force.
            let packs = if pack == "core" {
                Packs::none()
            } else {
                Packs::all()
            };
            for f in rule.built_from {
                let schema = json(f.schema);
                let sent = json(f.sent);
                let others: Vec<Value> = serde_json::from_str(f.others).expect(f.others);
                let refusal = Refusal {
                    text: f.error,
                    lowered: f.error.to_lowercase(),
                    schema: &schema,
                    properties: schema["properties"].as_object().expect("properties"),
                    arguments: &sent,
                    current: sent.as_object().cloned().unwrap_or_default(),
                    others: &others,
                    packs: &packs,
                };
                let mut made = Vec::new();
                (rule.apply)(&refusal, &mut |c| made.push(Value::Object(c)));
                assert!(
                    made.contains(&json(f.leads_to)),
                    "{pack}: {} on {:?} made {made:?}",
                    rule.name,
                    f.error
                );
            }
        }
    }

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "sheet": {"type": "string"},
            "path": {"type": "string"},
            "limit": {"type": "integer"},
            "mode": {"type": "string"}
        }})
    }

    #[test]
    fn a_refused_value_is_replaced_where_it_was_sent_under_the_name_the_error_uses() {
        let schema = json!({"type": "object", "properties": {
            "sheet": {"type": "string"}, "field": {"type": "string"},
            "row_fields": {"type": "array", "items": {"type": "string"}},
            "target": {"type": "object", "properties": {"sheet": {"type": "string"}, "name": {"type": "string"}}}}});
        // Deep in an array, values not sent yet first.
        let sent = json!({"sheet": "S", "row_fields": ["blue-harbor"]});
        let c = corrections(
            "Field 'blue-harbor' not found. Available fields: 'name', 'amount'.",
            &schema,
            &sent,
            &[],
        );
        assert_eq!(c[0], json!({"sheet": "S", "row_fields": ["name"]}));
        assert_eq!(c[1], json!({"sheet": "S", "row_fields": ["amount"]}));
        // The same invented value under two names: only the one the error names changes.
        let sent = json!({"sheet": "x", "field": "x"});
        let c = corrections(
            "Field 'x' not found. Fields: 'name', 'amount'.",
            &schema,
            &sent,
            &[],
        );
        assert_eq!(c[0], json!({"sheet": "x", "field": "name"}));
        // The closest quoted value before the list is the refused one, also inside an object.
        let sent = json!({"sheet": "S1", "target": {"sheet": "S1", "name": "Sales"}});
        let c = corrections(
            "Sheet 'S1' has no table or PivotTable 'Sales'. Available: 'PivotTable1'.",
            &schema,
            &sent,
            &[],
        );
        assert_eq!(
            c[0]["target"],
            json!({"sheet": "S1", "name": "PivotTable1"})
        );
        assert_eq!(c[0]["sheet"], "S1");
        let (field, values) = offered_for(
            "Sheet 'S1' has no table or PivotTable 'Sales'. Available: 'PivotTable1'.",
            &schema,
            &sent,
        )
        .expect("offered");
        assert_eq!(
            (field.as_str(), values),
            ("name", vec!["PivotTable1".to_string()])
        );
    }

    #[test]
    fn lists_after_must_be_and_use_are_offered() {
        for (text, first) in [
            (
                "Invalid operation: x. Must be 'add', 'format', or 'validate'",
                "add",
            ),
            (
                "Unsupported operation: x. Use 'list', 'get_layouts', or 'get_info'",
                "list",
            ),
            (
                "Invalid chart type: 'x'. Valid types are: column, bar, line",
                "column",
            ),
        ] {
            let (_, values) = offered_values(text).expect(text);
            assert_eq!(values[0], first, "{text}");
        }
        // Python's comparison error and a refused format offer nothing: "supported" lists
        // only before a colon, and a trigger inside a word ("unsupported", "unexpected") is
        // none.
        for text in [
            "提取文档结构失败: '>' not supported between instances of 'NoneType' and 'int'",
            "Unsupported archive format: .txt, .md",
            "Unexpected token: a, b",
        ] {
            assert_eq!(offered_values(text), None, "{text}");
        }
    }

    #[test]
    fn ranges_are_reshaped_as_errors_ask() {
        let schema = json!({"type": "object", "properties": {
            "range": {"type": "string"}, "source": {"type": "string"}, "at": {"type": "string"}}});
        let c = corrections(
            "The range must be one row or one column of cells.",
            &schema,
            &json!({"range": "A1:B4", "source": "A1:B4"}),
            &[],
        );
        assert_eq!(c[0], json!({"range": "A1:A4", "source": "A1:B4"}));
        let c = corrections(
            "The PivotTable would cover its own source data A1:B4. Choose a `at` outside it.",
            &schema,
            &json!({"at": "B2", "source": "A1:B4"}),
            &[],
        );
        assert_eq!(c[0], json!({"at": "D1", "source": "A1:B4"}));
    }

    #[test]
    fn invented_optional_values_are_left_out_when_something_is_missing() {
        let schema = json!({"type": "object", "required": ["sheet"], "properties": {
            "sheet": {"type": "string"}, "replace": {"type": "string"}, "at": {"type": "string"}}});
        let sent = json!({"sheet": "blue-harbor", "replace": "quiet-river", "at": "B2"});
        let c = corrections("Sheet 'S' has no charts.", &schema, &sent, &[]);
        assert!(
            c.contains(&json!({"sheet": "blue-harbor", "at": "B2"})),
            "{c:?}"
        );
    }

    #[test]
    fn fields_of_referenced_definitions_are_filled_as_errors_ask() {
        let schema = crate::exercise::synth::inline_refs(&json!({"type": "object",
            "properties": {"rule": {"$ref": "#/$defs/Rule"}},
            "$defs": {"Rule": {"type": "object", "required": ["type"], "properties": {
                "type": {"type": "string"},
                "colors": {"type": "array", "items": {"type": "string"}, "description": "Hex."},
                "options": {"type": "array", "items": {"type": "string"}},
                "source": {"type": "string"}}}}}));
        let c = corrections(
            "color_scale needs 2 or 3 colors.",
            &schema,
            &json!({"rule": {"type": "color_scale"}}),
            &[],
        );
        assert_eq!(c[0]["rule"]["colors"], json!(["4472C4", "ED7D31"]));
        let c = corrections(
            "list validation needs either options or source.",
            &schema,
            &json!({"rule": {"type": "list"}}),
            &[],
        );
        assert_eq!(c[0]["rule"]["options"], json!(["notes", "notes"]));
        assert_eq!(c[1]["rule"]["source"], "notes");
    }

    #[test]
    fn one_of_two_alternatives_and_fields_a_nested_object_needs() {
        let schema = json!({"type": "object", "properties": {
            "source": {"type": "string"}, "series": {"type": "array"},
            "rule": {"type": "object", "properties": {"type": {"type": "string"}, "period": {"type": "string"}}}}});
        let full = json!({"source": "A1:B3", "series": ["A1:A3"], "rule": {"type": "date", "period": "today"}});
        let c = corrections(
            "Pass either source (a block of data) or series (explicit ranges), not both and not neither.",
            &schema,
            &json!({"rule": {"type": "date"}}),
            std::slice::from_ref(&full),
        );
        assert_eq!(c[0], json!({"rule": {"type": "date"}, "source": "A1:B3"}));
        assert_eq!(c[1], json!({"rule": {"type": "date"}, "series": ["A1:A3"]}));
        let c = corrections(
            "date rules need a period.",
            &schema,
            &json!({"rule": {"type": "date"}}),
            std::slice::from_ref(&full),
        );
        assert_eq!(c[0]["rule"], json!({"type": "date", "period": "today"}));
    }

    #[test]
    fn names_that_exist_or_break_rules_are_changed() {
        let schema = json!({"type": "object", "properties": {"new_name": {"type": "string"}, "path": {"type": "string"}}});
        let schema3 = json!({"type": "object", "properties": {"sheet": {"type": "string"}, "new_name": {"type": "string"}, "path": {"type": "string"}}});
        let c = corrections(
            "A sheet named 'Summary' already exists.",
            &schema3,
            &json!({"sheet": "Summary", "new_name": "Summary", "path": "/w/a.xlsx"}),
            &[],
        );
        assert_eq!(c[0]["new_name"], "Summary-2");
        assert_eq!(c[0]["sheet"], "Summary");
        assert_eq!(c[0]["path"], "/w/a.xlsx");
        assert_eq!(renamed("/w/new.txt"), "/w/new-2.txt");
        let c = corrections(
            "Invalid table name 'my-table'. Start with a letter or underscore and use only letters, digits and underscores.",
            &schema,
            &json!({"new_name": "my-table"}),
            &[],
        );
        assert_eq!(c[0]["new_name"], "my_table");
    }

    #[test]
    fn validator_issues_fix_the_value_at_their_path() {
        let schema = json!({"type": "object", "properties": {"tasksRaw": {"type": "string"}, "n": {"type": "integer"}}});
        let args = json!({"tasksRaw": "[{\"d\":\"long enough\"},{\"d\":\"short\"}]", "n": 0});
        let error = r#"Invalid: [ { "code": "too_small", "minimum": 10, "type": "string", "path": [1, "d"] }, { "code": "too_small", "minimum": 1, "type": "number", "path": ["n"] } ]"#;
        let c = corrections(error, &schema, &args, &[]);
        let tasks: Value =
            serde_json::from_str(c[0]["tasksRaw"].as_str().expect("string")).expect("json");
        assert_eq!(tasks[0]["d"], "long enough");
        assert!(
            tasks[1]["d"]
                .as_str()
                .is_some_and(|d| d.chars().count() >= 10 && d.starts_with("short"))
        );
        assert_eq!(c[0]["n"], 1);
        // ajv: instancePath and allowedValues.
        let schema = json!({"type": "object", "properties": {"mode": {"type": "string"}}});
        let error = r#"[{"instancePath": "/mode", "keyword": "enum", "params": {"allowedValues": ["fast", "slow"]}}]"#;
        let c = corrections(error, &schema, &json!({"mode": "x"}), &[]);
        assert_eq!(c[0]["mode"], "fast");
    }

    #[test]
    fn a_refused_value_is_replaced_by_an_allowed_one_even_inside_json_text() {
        let schema = json!({"type": "object", "properties": {"tasksRaw": {"type": "string"}}});
        let args = json!({"tasksRaw": "[{\"name\":\"a\",\"files\":[{\"type\":\"file kind\"}]}]"});
        let error = r#"tasks format error: [ { "received": "file kind", "code": "invalid_enum_value", "options": ["TO_MODIFY", "REFERENCE"], "path": [0, "files", 0, "type"] } ]"#;
        let c = corrections(error, &schema, &args, &[]);
        assert_eq!(
            c[0]["tasksRaw"],
            json!("[{\"name\":\"a\",\"files\":[{\"type\":\"TO_MODIFY\"}]}]")
        );
    }

    #[test]
    fn lists_of_accepted_values_are_read_in_their_usual_forms() {
        for (text, values) in [
            (
                "Sheet 'Sheet9' not found. Available sheets: 'Sheet1', 'Notes'",
                vec!["Sheet1", "Notes"],
            ),
            (
                "mode must be one of [\"fast\", \"slow\"]",
                vec!["fast", "slow"],
            ),
            (
                "Invalid enum value. Expected 'read' | 'write', received 'x'",
                vec!["read", "write"],
            ),
            (
                "Input should be 'a', 'b' or 'c' [type=literal_error]",
                vec!["a", "b", "c"],
            ),
            (
                "Unknown key. Allowed keys: name, email, phone",
                vec!["name", "email", "phone"],
            ),
            (
                "{\"keyword\":\"enum\",\"params\":{\"allowedValues\":[\"x\",\"y\"]}}",
                vec!["x", "y"],
            ),
            (
                "Existing project names: ['alpha', 'beta']",
                vec!["alpha", "beta"],
            ),
        ] {
            let (_, got) = offered_values(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(got, values, "{text}");
        }
        // Letters whose lower case is longer or shorter than they are cut nothing in half.
        for hostile in ["İone ofé", "KKK one of: a, b", "ẞ must be 'x' or 'y'"] {
            let _ = offered_values(hostile);
        }
        for prose in [
            "File not found",
            "Expected a string",
            "Permission denied: /etc",
        ] {
            assert_eq!(offered_values(prose), None, "{prose}");
        }
    }

    #[test]
    fn corrections_set_the_field_the_error_is_about_or_fill_what_it_misses() {
        let args = json!({"sheet": "Sheet9", "path": "/w/book.xlsx"});
        let c = corrections(
            "Sheet 'Sheet9' not found. Available sheets: 'Sheet1', 'Notes'",
            &schema(),
            &args,
            &[],
        );
        assert_eq!(
            c,
            [
                json!({"sheet": "Sheet1", "path": "/w/book.xlsx"}),
                json!({"sheet": "Notes", "path": "/w/book.xlsx"})
            ]
        );
        // The property named before the list wins; values take the property's type.
        let c = corrections(
            "limit must be one of 10, 50, 100",
            &schema(),
            &json!({}),
            &[],
        );
        assert_eq!(c[0], json!({"limit": 10}));
        // A field named as missing is filled from another candidate.
        let c = corrections(
            "Missing required argument: mode",
            &schema(),
            &json!({"path": "/w/a"}),
            &[json!({"path": "/w/a", "mode": "fast"})],
        );
        assert_eq!(c, [json!({"path": "/w/a", "mode": "fast"})]);
        // A confirmation flag the error asks for is set.
        let with_flag = json!({"type": "object", "properties": {"path": {"type": "string"}, "confirm": {"type": "boolean"}}});
        let c = corrections(
            "Refusing to delete without confirmation: pass confirm: true",
            &with_flag,
            &json!({"path": "/w/a"}),
            &[],
        );
        assert_eq!(c, [json!({"path": "/w/a", "confirm": true})]);
        // Nothing to learn: nothing proposed; never a property outside the schema.
        assert!(corrections("Internal error", &schema(), &args, &[]).is_empty());
        assert!(
            corrections(
                "color must be one of red, blue",
                &json!({"type": "object", "properties": {"a": {"type": "integer"}}}),
                &json!({}),
                &[]
            )
            .is_empty()
        );
    }
}
