//! Lenient views of tool definitions as the server sent them. Hints are read from the raw
//! JSON as tri-state values so that `false`, an absent key, `null` and `"yes"` stay
//! distinguishable, and a malformed tool spoils only itself.

use serde::Serialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::rpc::framing::json_type_name;

/// The four behaviour hints of `ToolAnnotations`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum HintName {
    /// `readOnlyHint`
    #[serde(rename = "readOnlyHint")]
    ReadOnly,
    /// `destructiveHint`
    #[serde(rename = "destructiveHint")]
    Destructive,
    /// `idempotentHint`
    #[serde(rename = "idempotentHint")]
    Idempotent,
    /// `openWorldHint`
    #[serde(rename = "openWorldHint")]
    OpenWorld,
}

impl HintName {
    /// All four, in the spec's order.
    pub const ALL: [HintName; 4] = [
        HintName::ReadOnly,
        HintName::Destructive,
        HintName::Idempotent,
        HintName::OpenWorld,
    ];

    /// The wire name.
    pub fn key(self) -> &'static str {
        match self {
            HintName::ReadOnly => "readOnlyHint",
            HintName::Destructive => "destructiveHint",
            HintName::Idempotent => "idempotentHint",
            HintName::OpenWorld => "openWorldHint",
        }
    }

    /// The value the spec assumes when the hint is absent.
    pub fn default_value(self) -> bool {
        match self {
            HintName::ReadOnly => false,
            HintName::Destructive => true,
            HintName::Idempotent => false,
            HintName::OpenWorld => true,
        }
    }

    /// Parses a wire name.
    pub fn from_key(key: &str) -> Option<HintName> {
        HintName::ALL.into_iter().find(|h| h.key() == key)
    }
}

/// A hint as declared.
#[derive(Debug, Clone, PartialEq)]
pub enum Hint {
    /// The key is not there (the spec's default applies).
    Absent,
    /// A boolean.
    Declared(bool),
    /// Anything else (`null`, a string, …): a protocol error; treated as absent for judging.
    WrongType(Value),
}

impl Hint {
    fn from_raw(v: Option<&Value>) -> Hint {
        match v {
            None => Hint::Absent,
            Some(Value::Bool(b)) => Hint::Declared(*b),
            Some(other) => Hint::WrongType(other.clone()),
        }
    }

    /// The declared boolean, if there is one.
    pub fn declared(&self) -> Option<bool> {
        match self {
            Hint::Declared(b) => Some(*b),
            _ => None,
        }
    }

    /// The value a host would act on: the declared boolean or the spec default.
    pub fn effective(&self, name: HintName) -> bool {
        self.declared().unwrap_or(name.default_value())
    }

    /// A short description: `true`, `false`, `absent` or `wrong type (null)`.
    pub fn describe(&self) -> String {
        match self {
            Hint::Absent => "absent".into(),
            Hint::Declared(b) => b.to_string(),
            Hint::WrongType(v) => format!("wrong type ({v})"),
        }
    }
}

/// The four hints of one tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Hints {
    /// `readOnlyHint`
    pub read_only: Hint,
    /// `destructiveHint`
    pub destructive: Hint,
    /// `idempotentHint`
    pub idempotent: Hint,
    /// `openWorldHint`
    pub open_world: Hint,
}

impl Hints {
    /// Every hint absent.
    pub fn absent() -> Hints {
        Hints {
            read_only: Hint::Absent,
            destructive: Hint::Absent,
            idempotent: Hint::Absent,
            open_world: Hint::Absent,
        }
    }

    /// The hint by name.
    pub fn get(&self, name: HintName) -> &Hint {
        match name {
            HintName::ReadOnly => &self.read_only,
            HintName::Destructive => &self.destructive,
            HintName::Idempotent => &self.idempotent,
            HintName::OpenWorld => &self.open_world,
        }
    }
}

/// A problem with a tool's definition: the input of the `annotation-type` and
/// `malformed-tool` audits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DefinitionProblem {
    /// `annotation-type` for hints and annotations, `malformed-tool` for the rest.
    pub audit: &'static str,
    /// What is wrong.
    pub message: String,
}

/// An argument a tool asks to be mirrored into an HTTP header (`x-mcp-header` on a property of
/// its input schema, the 2026-07-28 revision): `Mcp-Param-{header}` carries the argument
/// `property` of every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamHeader {
    /// The argument's name.
    pub property: String,
    /// The header's name after `Mcp-Param-`.
    pub header: String,
}

/// The `x-mcp-header` declarations of an input schema's properties that a client can follow,
/// and what is wrong with the others: a name that is not an HTTP token (RFC 9110), a name
/// that another property took (names compare case-insensitively), a property that is not of
/// a primitive type (string, integer, number, boolean).
pub fn param_headers(input_schema: &Value) -> (Vec<ParamHeader>, Vec<String>) {
    let mut headers: Vec<ParamHeader> = Vec::new();
    let mut problems = Vec::new();
    let Some(properties) = input_schema.get("properties").and_then(Value::as_object) else {
        return (headers, problems);
    };
    let is_tchar = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    for (property, schema) in properties {
        let Some(declared) = schema.get("x-mcp-header") else {
            continue;
        };
        let Some(name) = declared
            .as_str()
            .filter(|n| !n.is_empty() && n.chars().all(is_tchar))
        else {
            problems.push(format!(
                "property {property:?} has x-mcp-header {}, not an HTTP header name (a token of RFC 9110)",
                shorten(&declared.to_string(), 60)
            ));
            continue;
        };
        let primitive = |t: &Value| {
            matches!(
                t.as_str(),
                Some("string" | "integer" | "number" | "boolean")
            )
        };
        let typed = match schema.get("type") {
            Some(Value::Array(types)) => types.iter().all(|t| primitive(t) || t == "null"),
            Some(t) => primitive(t),
            None => false,
        };
        if !typed {
            problems.push(format!(
                "property {property:?} has x-mcp-header {name:?} but is not of a primitive type (string, integer, number, boolean)"
            ));
            continue;
        }
        if headers.iter().any(|h| h.header.eq_ignore_ascii_case(name)) {
            problems.push(format!(
                "x-mcp-header {name:?} is declared by more than one property (names are case-insensitive)"
            ));
            continue;
        }
        headers.push(ParamHeader {
            property: property.clone(),
            header: name.to_string(),
        });
    }
    (headers, problems)
}

/// An argument's value as an `Mcp-Param-*` header value: a string, number or boolean as its
/// text; one that cannot travel as a plain header value (not printable ASCII, whitespace at
/// either end, or looking like the sentinel itself) as `=?base64?…?=` of its UTF-8. `None` for
/// null, objects and arrays (which are not mirrored).
pub fn param_header_value(value: &Value) -> Option<String> {
    use base64::Engine as _;
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    let plain = text.bytes().all(|b| (0x20..0x7f).contains(&b))
        && text.trim() == text
        && !text.starts_with("=?base64?");
    Some(if plain {
        text
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
        )
    })
}

/// A tool as listed by the server, read leniently.
#[derive(Debug, Clone)]
pub struct ToolDecl {
    /// The tool's name.
    pub name: String,
    /// `title` (or `annotations.title`).
    pub title: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `inputSchema` as sent (an empty object schema when it was missing or malformed).
    pub input_schema: Value,
    /// The four hints.
    pub hints: Hints,
    /// The data labels it declares beside them (SEP-1913's draft fields).
    pub labels: super::labels::ToolLabels,
    /// `execution.taskSupport`, when present.
    pub task_support: Option<String>,
    /// `resolve: true`: the tool's annotations for given arguments can be asked with
    /// `tools/resolve` (SEP-1862), where the server announced the capability.
    pub resolve: bool,
    /// What is wrong with the definition.
    pub problems: Vec<DefinitionProblem>,
    /// SHA-256 of the tool's JSON as received (key order kept), to notice changed tools.
    pub definition_sha256: String,
    /// The tool's JSON as received (key order kept).
    pub definition: Value,
    /// Position in the listing.
    pub index: usize,
}

/// A listed tool that cannot be called at all (no usable name).
#[derive(Debug, Clone, Serialize)]
pub struct UnusableTool {
    /// Position in the listing.
    pub index: usize,
    /// What is wrong.
    pub message: String,
    /// The raw JSON, shortened.
    pub raw: String,
}

/// Reads one entry of `tools/list`.
pub fn parse_tool(raw: &Value, index: usize) -> Result<ToolDecl, UnusableTool> {
    let unusable = |message: String| UnusableTool {
        index,
        message,
        raw: shorten(&raw.to_string(), 300),
    };
    let Value::Object(obj) = raw else {
        return Err(unusable(format!(
            "tool #{index} is a JSON {}, not an object",
            json_type_name(raw)
        )));
    };
    let name = match obj.get("name") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::String(_)) => return Err(unusable(format!("tool #{index} has an empty name"))),
        Some(other) => {
            return Err(unusable(format!(
                "tool #{index} has a name that is a {}",
                json_type_name(other)
            )));
        }
        None => return Err(unusable(format!("tool #{index} has no name"))),
    };
    let mut problems = Vec::new();
    let mut problem =
        |audit: &'static str, message: String| problems.push(DefinitionProblem { audit, message });

    if name.len() > 128
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        problem(
            "malformed-tool",
            "name is not 1–128 characters of [A-Za-z0-9_.-] as the spec recommends".to_string(),
        );
    }
    let input_schema = input_schema_of(obj, &mut problem);
    for why in param_headers(&input_schema).1 {
        problem("malformed-tool", why);
    }
    let string_field = |key: &str| obj.get(key).and_then(Value::as_str).map(str::to_string);
    let description = string_field("description");
    let mut title = string_field("title");

    let mut labels = super::labels::ToolLabels::default();
    let hints = match obj.get("annotations") {
        None => Hints::absent(),
        Some(Value::Object(ann)) => {
            if title.is_none() {
                title = ann.get("title").and_then(Value::as_str).map(str::to_string);
            }
            labels = super::labels::tool_labels(ann, &mut problem);
            hints_of(ann, &mut problem)
        }
        Some(other) => {
            problem(
                "annotation-type",
                format!(
                    "annotations is a {}, not an object; every hint is judged as absent",
                    json_type_name(other)
                ),
            );
            Hints::absent()
        }
    };
    for name in HintName::ALL {
        if obj.contains_key(name.key()) {
            problem(
                "annotation-type",
                format!(
                    "{} is set on the tool itself, outside annotations, where hosts do not read it",
                    name.key()
                ),
            );
        }
    }
    let task_support = obj
        .get("execution")
        .and_then(|e| e.get("taskSupport"))
        .and_then(Value::as_str)
        .map(str::to_string);

    let resolve = match obj.get("resolve") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(other) => {
            problem(
                "annotation-type",
                format!(
                    "resolve is a {}, not a boolean; tools/resolve is not asked for this tool",
                    json_type_name(other)
                ),
            );
            false
        }
    };

    Ok(ToolDecl {
        name,
        title,
        description,
        input_schema,
        hints,
        labels,
        task_support,
        resolve,
        problems,
        definition_sha256: sha256_hex(raw.to_string().as_bytes()),
        definition: raw.clone(),
        index,
    })
}

/// The tool's input schema: an object schema as given, else an empty one with the problem.
fn input_schema_of(
    obj: &Map<String, Value>,
    problem: &mut impl FnMut(&'static str, String),
) -> Value {
    match obj.get("inputSchema") {
        Some(Value::Object(s)) => {
            if let Some(t) = s.get("type") {
                if t != "object" {
                    problem(
                        "malformed-tool",
                        format!("inputSchema.type is {t}, not \"object\""),
                    );
                }
            }
            Value::Object(s.clone())
        }
        Some(other) => {
            problem(
                "malformed-tool",
                format!(
                    "inputSchema is a {}, not an object; calling with no arguments",
                    json_type_name(other)
                ),
            );
            Value::Object(Map::new())
        }
        None => {
            problem(
                "malformed-tool",
                "inputSchema is missing; calling with no arguments".into(),
            );
            Value::Object(Map::new())
        }
    }
}

/// The four hints of an `annotations` object, with what is wrong in it: a hint that is not a
/// boolean, a key that is a hint's in the wrong case or without `Hint`.
fn hints_of(ann: &Map<String, Value>, problem: &mut impl FnMut(&'static str, String)) -> Hints {
    let hints = Hints {
        read_only: Hint::from_raw(ann.get("readOnlyHint")),
        destructive: Hint::from_raw(ann.get("destructiveHint")),
        idempotent: Hint::from_raw(ann.get("idempotentHint")),
        open_world: Hint::from_raw(ann.get("openWorldHint")),
    };
    for name in HintName::ALL {
        if let Hint::WrongType(v) = hints.get(name) {
            problem(
                "annotation-type",
                format!(
                    "annotations.{} is {} ({}), not a boolean; hosts may read it either way, hintcheck judges it as absent",
                    name.key(),
                    shorten(&v.to_string(), 60),
                    json_type_name(v)
                ),
            );
        }
    }
    for key in ann.keys() {
        let lower = key.to_ascii_lowercase();
        let near = HintName::ALL.into_iter().find(|h| {
            h.key().to_ascii_lowercase() == lower
                || h.key().to_ascii_lowercase() == format!("{lower}hint")
        });
        if let Some(h) = near {
            if h.key() != key {
                problem(
                    "annotation-type",
                    format!(
                        "annotations has key {key:?}; the spec's key is {:?} (keys are case-sensitive)",
                        h.key()
                    ),
                );
            }
        }
    }
    hints
}

/// Lowercase hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    let digest = Sha256::digest(data);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Shortens a string to at most `max` characters, marking the cut.
pub fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max).collect();
        out.push('…');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_declared_as_headers_are_mirrored_and_bad_declarations_named() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "shard": {"type": "integer", "x-mcp-header": "Shard"},
            "REGION2": {"type": "string", "x-mcp-header": "region"},
            "spaced": {"type": "string", "x-mcp-header": "Has Space"},
            "filter": {"type": "object", "x-mcp-header": "Filter"},
            "plain": {"type": "string"},
        }});
        let (headers, problems) = param_headers(&schema);
        let names: Vec<_> = headers.iter().map(|h| h.header.as_str()).collect();
        assert_eq!(names, ["Region", "Shard"]);
        assert_eq!(problems.len(), 3, "{problems:?}");
        let t = parse_tool(&serde_json::json!({"name": "t", "inputSchema": schema}), 0)
            .expect("usable");
        assert_eq!(t.problems.len(), 3);
        let v = |j: Value| param_header_value(&j);
        assert_eq!(
            v(serde_json::json!("us-west1")).as_deref(),
            Some("us-west1")
        );
        assert_eq!(v(serde_json::json!(42)).as_deref(), Some("42"));
        assert_eq!(v(serde_json::json!(true)).as_deref(), Some("true"));
        assert_eq!(
            v(serde_json::json!("Zürich")).as_deref(),
            Some("=?base64?WsO8cmljaA==?=")
        );
        assert_eq!(
            v(serde_json::json!(" padded")).as_deref(),
            Some("=?base64?IHBhZGRlZA==?=")
        );
        assert!(v(serde_json::json!("=?base64?x?=")).is_some_and(|s| s != "=?base64?x?="));
        assert_eq!(v(Value::Null), None);
        assert_eq!(v(serde_json::json!({"a": 1})), None);
    }

    #[test]
    fn hints_are_tri_state_and_wrong_types_are_problems_for_that_tool_only() {
        let t = parse_tool(
            &json!({"name":"a","inputSchema":{"type":"object"},
                    "annotations":{"readOnlyHint":"yes","destructiveHint":false,"idempotentHint":null}}),
            0,
        )
        .expect("usable");
        assert_eq!(t.hints.read_only, Hint::WrongType(json!("yes")));
        assert_eq!(t.hints.destructive, Hint::Declared(false));
        assert_eq!(t.hints.idempotent, Hint::WrongType(Value::Null));
        assert_eq!(t.hints.open_world, Hint::Absent);
        assert_eq!(
            t.problems
                .iter()
                .filter(|p| p.audit == "annotation-type")
                .count(),
            2
        );
        assert!(!t.hints.read_only.effective(HintName::ReadOnly));
        assert!(t.hints.open_world.effective(HintName::OpenWorld));
    }

    #[test]
    fn malformed_definitions_are_reported_not_fatal() {
        assert!(parse_tool(&json!("x"), 3).is_err());
        assert!(parse_tool(&json!({"name": 5}), 0).is_err());
        let t = parse_tool(
            &json!({"name":"b","annotations":[true],"readOnlyHint":true}),
            1,
        )
        .expect("usable");
        assert_eq!(t.input_schema, json!({}));
        let audits: Vec<&str> = t.problems.iter().map(|p| p.audit).collect();
        assert_eq!(
            audits,
            ["malformed-tool", "annotation-type", "annotation-type"]
        );
    }

    #[test]
    fn miscased_hint_keys_are_flagged() {
        let t = parse_tool(&json!({"name":"c","inputSchema":{"type":"object"},"annotations":{"readonlyHint":true}}), 0)
            .expect("usable");
        assert_eq!(t.hints.read_only, Hint::Absent);
        assert!(t.problems[0].message.contains("readOnlyHint"));
    }

    #[test]
    fn every_real_world_tool_parses_cleanly() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/mcp-spec/real-world/github-mcp-server/toolsnaps"
        );
        let Ok(entries) = std::fs::read_dir(dir) else {
            panic!("test data missing: {dir}");
        };
        let mut n = 0;
        for e in entries {
            let path = e.expect("dir entry").path();
            let raw: Value =
                serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
            let t = parse_tool(&raw, 0).expect("usable");
            assert!(
                t.problems.is_empty(),
                "{}: {:?}",
                path.display(),
                t.problems
            );
            assert!(t.hints.read_only.declared().is_some(), "{}", path.display());
            n += 1;
        }
        assert_eq!(n, 117);
    }
}
