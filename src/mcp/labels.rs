//! Data labels: what a server declares about the data flowing through its tools, beyond the
//! four hints. On a tool's `annotations`, the draft SEP-1913 fields: `returnMetadata {source,
//! sensitivity}`, `inputMetadata {destination, sensitivity, outcomes}` (each a value or the
//! list of possible values) and the early form's `sensitiveHint` (`low`, `medium`, `high`)
//! and `privateHint`. On a result, the labels of its `_meta`: the
//! `io.modelcontextprotocol/trust-annotations` extension's `sensitive` and `untrusted` (on the
//! result or any of its content blocks; once true, true) and SEP-1913's response annotations
//! under `_meta.annotations` (`sensitivity`, `sensitiveHint`, `privateHint`, `openWorldHint`).
//! Read leniently: a field of the wrong shape is a definition problem and is not judged; a
//! value outside the drafts' lists is kept as given (and matches nothing).

use serde::Serialize;
use serde_json::{Map, Value};

use crate::rpc::framing::json_type_name;

/// The key of the trust-annotations extension in a result's (or content block's) `_meta`.
pub const TRUST_EXTENSION: &str = "io.modelcontextprotocol/trust-annotations";

/// `returnMetadata.source`'s values.
pub const SOURCES: [&str; 5] = [
    "untrustedPublic",
    "trustedPublic",
    "internal",
    "user",
    "system",
];
/// `inputMetadata.destination`'s values.
pub const DESTINATIONS: [&str; 5] = ["ephemeral", "system", "user", "internal", "public"];
/// `inputMetadata.outcomes`' values.
pub const OUTCOMES: [&str; 3] = ["benign", "consequential", "irreversible"];
/// The data classes a `sensitivity` names (besides `{"regulated": {"scopes": [...]}}`).
pub const DATA_CLASSES: [&str; 5] = ["none", "user", "pii", "financial", "credentials"];
/// `sensitiveHint`'s levels.
pub const LEVELS: [&str; 3] = ["low", "medium", "high"];

/// The data labels a tool declares in `tools/list`. Each list is the set of possible values
/// (a single value is a set of one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolLabels {
    /// `returnMetadata.source`.
    pub return_source: Option<Vec<String>>,
    /// `returnMetadata.sensitivity`.
    pub return_sensitivity: Option<Vec<String>>,
    /// `inputMetadata.destination`.
    pub input_destination: Option<Vec<String>>,
    /// `inputMetadata.sensitivity`: what the tool accepts (nothing a run can contradict).
    pub input_sensitivity: Option<Vec<String>>,
    /// `inputMetadata.outcomes`.
    pub input_outcomes: Option<Vec<String>>,
    /// `sensitiveHint` (the early form).
    pub sensitive_hint: Option<String>,
    /// `privateHint` (the early form).
    pub private_hint: Option<bool>,
}

impl ToolLabels {
    /// Whether the tool declares none.
    pub fn is_empty(&self) -> bool {
        *self == ToolLabels::default()
    }
}

/// The labels one result carries on its `_meta` (and its content blocks').
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ResultLabels {
    /// The extension's `sensitive`: true if the result or any block says true, false if one
    /// says false and none true, absent where none says (absence is no claim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sensitive: Option<bool>,
    /// The extension's `untrusted`, combined the same way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untrusted: Option<bool>,
    /// `_meta.annotations.sensitivity`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sensitivity: Option<Vec<String>>,
    /// `_meta.annotations.sensitiveHint`.
    #[serde(rename = "sensitiveHint", skip_serializing_if = "Option::is_none")]
    pub sensitive_hint: Option<String>,
    /// `_meta.annotations.privateHint`.
    #[serde(rename = "privateHint", skip_serializing_if = "Option::is_none")]
    pub private_hint: Option<bool>,
    /// `_meta.annotations.openWorldHint`: whether the result holds data from untrusted
    /// sources.
    #[serde(rename = "openWorldHint", skip_serializing_if = "Option::is_none")]
    pub open_world: Option<bool>,
}

impl ResultLabels {
    /// Whether the result says that it is not sensitive, in any of the forms: the extension's
    /// `sensitive: false`, a `sensitivity` without `credentials`, `sensitiveHint: low`,
    /// `privateHint: false`. The claims, as `name: value` lines.
    pub fn claims_not_sensitive(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.sensitive == Some(false) {
            out.push(format!("{TRUST_EXTENSION} sensitive: false"));
        }
        if let Some(classes) = &self.sensitivity {
            if !classes.iter().any(|c| c == "credentials") {
                out.push(format!("_meta.annotations.sensitivity: {}", set(classes)));
            }
        }
        if self.sensitive_hint.as_deref() == Some("low") {
            out.push("_meta.annotations.sensitiveHint: low".into());
        }
        if self.private_hint == Some(false) {
            out.push("_meta.annotations.privateHint: false".into());
        }
        out
    }

    /// Whether the result says it holds nothing from untrusted sources: the extension's
    /// `untrusted: false` or `openWorldHint: false`.
    pub fn claims_trusted(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.untrusted == Some(false) {
            out.push(format!("{TRUST_EXTENSION} untrusted: false"));
        }
        if self.open_world == Some(false) {
            out.push("_meta.annotations.openWorldHint: false".into());
        }
        out
    }

    /// Whether it labels the result sensitive in any form.
    pub fn claims_sensitive(&self) -> bool {
        self.sensitive == Some(true)
            || self
                .sensitivity
                .as_ref()
                .is_some_and(|c| c.iter().any(|c| c == "credentials"))
            || self.sensitive_hint.as_deref() == Some("high")
            || self.private_hint == Some(true)
    }
}

/// A set of values as a report writes it: `"none"`, `["user", "pii"]`.
pub fn set(values: &[String]) -> String {
    match values {
        [one] => format!("{one:?}"),
        _ => format!(
            "[{}]",
            values
                .iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The data labels of a tool's `annotations` object, with what is wrong in them.
pub fn tool_labels(
    ann: &Map<String, Value>,
    problem: &mut impl FnMut(&'static str, String),
) -> ToolLabels {
    let mut labels = ToolLabels::default();
    let mut metadata = |key: &str| match ann.get(key) {
        None => None,
        Some(Value::Object(m)) => Some(m.clone()),
        Some(other) => {
            problem(
                "annotation-type",
                format!(
                    "annotations.{key} is a {}, not an object; not judged",
                    json_type_name(other)
                ),
            );
            None
        }
    };
    let returned = metadata("returnMetadata");
    let input = metadata("inputMetadata");
    if let Some(m) = &returned {
        labels.return_source = values_of(m, "returnMetadata", "source", &SOURCES, problem);
        labels.return_sensitivity = classes_of(m, "returnMetadata", problem);
    }
    if let Some(m) = &input {
        labels.input_destination =
            values_of(m, "inputMetadata", "destination", &DESTINATIONS, problem);
        labels.input_sensitivity = classes_of(m, "inputMetadata", problem);
        labels.input_outcomes = values_of(m, "inputMetadata", "outcomes", &OUTCOMES, problem);
    }
    match ann.get("sensitiveHint") {
        None => {}
        Some(Value::String(s)) if LEVELS.contains(&s.as_str()) => {
            labels.sensitive_hint = Some(s.clone())
        }
        Some(other) => problem(
            "annotation-type",
            format!(
                "annotations.sensitiveHint is {}, none of \"low\", \"medium\", \"high\"; not judged",
                crate::mcp::tool::shorten(&other.to_string(), 60)
            ),
        ),
    }
    match ann.get("privateHint") {
        None => {}
        Some(Value::Bool(b)) => labels.private_hint = Some(*b),
        Some(other) => problem(
            "annotation-type",
            format!(
                "annotations.privateHint is a {}, not a boolean; not judged",
                json_type_name(other)
            ),
        ),
    }
    labels
}

/// One enumerated field of a metadata object: a string or a list of strings. Values outside
/// `known` are kept, with a problem.
fn values_of(
    m: &Map<String, Value>,
    object: &str,
    key: &str,
    known: &[&str],
    problem: &mut impl FnMut(&'static str, String),
) -> Option<Vec<String>> {
    let raw = m.get(key)?;
    let values: Option<Vec<String>> = match raw {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string))
            .collect(),
        _ => None,
    };
    let Some(values) = values.filter(|v| !v.is_empty()) else {
        problem(
            "annotation-type",
            format!(
                "annotations.{object}.{key} is {}, not a value or a list of values; not judged",
                crate::mcp::tool::shorten(&raw.to_string(), 60)
            ),
        );
        return None;
    };
    for v in values.iter().filter(|v| !known.contains(&v.as_str())) {
        problem(
            "annotation-type",
            format!(
                "annotations.{object}.{key} holds {v:?}, none of {}",
                known.join(", ")
            ),
        );
    }
    Some(values)
}

/// The `sensitivity` of a metadata object: data classes, a regulated class written
/// `regulated(GDPR, HIPAA)`.
fn classes_of(
    m: &Map<String, Value>,
    object: &str,
    problem: &mut impl FnMut(&'static str, String),
) -> Option<Vec<String>> {
    let raw = m.get("sensitivity")?;
    let classes = data_classes(raw);
    for c in classes.iter().flatten() {
        if !DATA_CLASSES.contains(&c.as_str()) && !c.starts_with("regulated(") {
            problem(
                "annotation-type",
                format!(
                    "annotations.{object}.sensitivity holds {c:?}, none of {} or a regulated class",
                    DATA_CLASSES.join(", ")
                ),
            );
        }
    }
    if classes.is_none() {
        problem(
            "annotation-type",
            format!(
                "annotations.{object}.sensitivity is {}, not a data class or a list of them; not judged",
                crate::mcp::tool::shorten(&raw.to_string(), 60)
            ),
        );
    }
    classes
}

/// Data classes: a class, `{"regulated": {"scopes": [...]}}`, or a list of them.
fn data_classes(raw: &Value) -> Option<Vec<String>> {
    let one = |v: &Value| -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Object(o) => {
                let scopes = o.get("regulated")?.get("scopes")?.as_array()?;
                let scopes: Option<Vec<&str>> = scopes.iter().map(Value::as_str).collect();
                Some(format!("regulated({})", scopes?.join(", ")))
            }
            _ => None,
        }
    };
    match raw {
        Value::Array(items) if !items.is_empty() => items.iter().map(one).collect(),
        Value::Array(_) => None,
        other => one(other).map(|c| vec![c]),
    }
}

/// The labels a tool's `result` carries, if any.
pub fn result_labels(result: &Value) -> Option<ResultLabels> {
    let mut labels = ResultLabels::default();
    // The result's own labels speak for the whole result; a content block's may only
    // strengthen them (once true, true): a block's `false` claims nothing about the others.
    let mut extension = |meta: Option<&Value>, whole: bool| {
        let Some(ext) = meta.and_then(|m| m.get(TRUST_EXTENSION)) else {
            return;
        };
        for (key, slot) in [
            ("sensitive", &mut labels.sensitive),
            ("untrusted", &mut labels.untrusted),
        ] {
            match ext.get(key).and_then(Value::as_bool) {
                Some(true) => *slot = Some(true),
                Some(false) if whole && slot.is_none() => *slot = Some(false),
                _ => {}
            }
        }
    };
    extension(result.get("_meta"), true);
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        extension(block.get("_meta"), false);
    }
    if let Some(a) = result.get("_meta").and_then(|m| m.get("annotations")) {
        labels.sensitivity = a.get("sensitivity").and_then(data_classes);
        labels.sensitive_hint = a
            .get("sensitiveHint")
            .and_then(Value::as_str)
            .map(str::to_string);
        labels.private_hint = a.get("privateHint").and_then(Value::as_bool);
        labels.open_world = a.get("openWorldHint").and_then(Value::as_bool);
    }
    (labels != ResultLabels::default()).then_some(labels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(ann: Value) -> (ToolLabels, Vec<String>) {
        let mut problems = Vec::new();
        let labels = tool_labels(ann.as_object().expect("object"), &mut |_, m| {
            problems.push(m)
        });
        (labels, problems)
    }

    #[test]
    fn the_drafts_fields_are_read_as_sets() {
        let (l, problems) = parse(json!({
            "returnMetadata": {"source": "user", "sensitivity": ["pii", {"regulated": {"scopes": ["GDPR", "HIPAA"]}}]},
            "inputMetadata": {"destination": ["internal", "public"], "sensitivity": "none", "outcomes": "benign"},
            "sensitiveHint": "low",
            "privateHint": true
        }));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(l.return_source, Some(vec!["user".to_string()]));
        assert_eq!(
            l.return_sensitivity,
            Some(vec![
                "pii".to_string(),
                "regulated(GDPR, HIPAA)".to_string()
            ])
        );
        assert_eq!(
            l.input_destination,
            Some(vec!["internal".to_string(), "public".to_string()])
        );
        assert_eq!(l.input_outcomes, Some(vec!["benign".to_string()]));
        assert_eq!(l.sensitive_hint.as_deref(), Some("low"));
        assert_eq!(l.private_hint, Some(true));
        assert!(!l.is_empty());
        assert!(parse(json!({"readOnlyHint": true})).0.is_empty());
    }

    #[test]
    fn wrong_shapes_are_problems_and_not_judged() {
        let (l, problems) = parse(json!({
            "returnMetadata": "secret",
            "inputMetadata": {"destination": 3, "outcomes": ["benign", "cosmic"], "sensitivity": []},
            "sensitiveHint": "extreme",
            "privateHint": "yes"
        }));
        assert_eq!(l.return_source, None);
        assert_eq!(l.input_destination, None);
        assert_eq!(l.input_sensitivity, None);
        assert_eq!(
            l.input_outcomes,
            Some(vec!["benign".to_string(), "cosmic".to_string()])
        );
        assert_eq!((l.sensitive_hint, l.private_hint), (None, None));
        let all = problems.join("\n");
        for says in [
            "annotations.returnMetadata is a string",
            "annotations.inputMetadata.destination is 3",
            "holds \"cosmic\", none of benign, consequential, irreversible",
            "annotations.inputMetadata.sensitivity is []",
            "sensitiveHint is \"extreme\"",
            "privateHint is a string",
        ] {
            assert!(all.contains(says), "{says} in {all}");
        }
    }

    #[test]
    fn result_labels_unite_the_result_and_its_blocks() {
        assert_eq!(result_labels(&json!({"content": []})), None);
        let weakened = json!({
            "content": [{"type": "text", "text": "x", "_meta": {TRUST_EXTENSION: {"sensitive": true}}}],
            "_meta": {TRUST_EXTENSION: {"sensitive": false, "untrusted": false}}
        });
        let l = result_labels(&weakened).expect("labels");
        assert_eq!(l.sensitive, Some(true), "a block strengthens the claim");
        let block_only = json!({
            "content": [{"type": "text", "text": "x", "_meta": {TRUST_EXTENSION: {"sensitive": false}}}]
        });
        assert_eq!(
            result_labels(&block_only),
            None,
            "a block's false claims nothing about the whole result"
        );
        assert!(l.claims_not_sensitive().is_empty());
        assert_eq!(
            l.claims_trusted(),
            vec![format!("{TRUST_EXTENSION} untrusted: false")]
        );
        let sep = json!({"content": [], "_meta": {"annotations": {
            "sensitivity": "user", "sensitiveHint": "low", "privateHint": false, "openWorldHint": false
        }}});
        let l = result_labels(&sep).expect("labels");
        assert_eq!(l.claims_not_sensitive().len(), 3);
        assert_eq!(l.claims_trusted().len(), 1);
        assert!(!l.claims_sensitive());
    }
}
