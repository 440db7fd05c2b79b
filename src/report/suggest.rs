//! The output of `hintcheck suggest`: per tool, an `annotations` object ready to paste into
//! the tool's definition, plus the basis of every value (`observed`: backed by a behaviour
//! seen, such as a write or a destroyed file; `consistent`: fits everything exercised, which
//! proves only what was exercised; `unverified`: nothing exercised it, so the declared value
//! or the spec's default is kept) and which values differ from what the tool declares now.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::Report;
use crate::baseline::server_key;
use crate::mcp::tool::{HintName, shorten};
use crate::text::escape::terminal as escape_untrusted;

/// The version of this format.
pub const SUGGEST_VERSION: u32 = 1;

#[derive(Serialize)]
struct ToolSuggestion<'a> {
    name: &'a str,
    definition_sha256: &'a str,
    annotations: Map<String, Value>,
    changed: Vec<&'static str>,
    basis: Map<String, Value>,
    /// The draft SEP-1913 data labels the run supports (`returnMetadata`, `inputMetadata`),
    /// only the fields it could see: the author fills in the rest.
    #[serde(skip_serializing_if = "Map::is_empty")]
    data_labels: Map<String, Value>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    data_labels_basis: Map<String, Value>,
    /// For a tool whose behaviour an argument selects: the annotations each value supports,
    /// ready to serve from `tools/resolve` for calls that pass it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    resolutions: Vec<Value>,
    /// When the values need different annotations: the tools a split would make, each able
    /// to declare honest static annotations.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    split: Vec<Value>,
}

/// The annotations as an object (`{"readOnlyHint": true}`).
fn annotations_object(hints: &[(HintName, bool)]) -> Value {
    Value::Object(
        hints
            .iter()
            .map(|(h, v)| (h.key().to_string(), json!(v)))
            .collect(),
    )
}

/// The per-value resolutions and the split of a tool, as the JSON output writes them.
fn per_value(t: &super::ToolReport, network_observed: bool) -> (Vec<Value>, Vec<Value>) {
    use crate::audit::by_argument::{split, value_annotations};
    let resolved = value_annotations(&t.by_argument, network_observed);
    let resolutions = resolved
        .iter()
        .map(|r| {
            json!({
                "arguments": { r.argument.clone(): r.value },
                "annotations": annotations_object(&r.hints),
                "basis": if r.observed { "observed" } else { "consistent" },
            })
        })
        .collect();
    let split = split(&resolved)
        .into_iter()
        .map(|(argument, groups)| {
            json!({
                "argument": argument,
                "tools": groups
                    .iter()
                    .map(|(values, hints)| json!({ "values": values, "annotations": annotations_object(hints) }))
                    .collect::<Vec<_>>(),
            })
        })
        .collect();
    (resolutions, split)
}

/// The data labels of a tool as draft-shaped objects (`{"returnMetadata": {"sensitivity":
/// "credentials"}}`), and the basis of each field by its dotted name.
fn data_labels(t: &super::ToolReport) -> (Map<String, Value>, Map<String, Value>) {
    let mut labels = Map::new();
    let mut basis = Map::new();
    for s in &t.labels_supported {
        let Some((object, field)) = s.label.split_once('.') else {
            continue;
        };
        let value = match s.values.as_slice() {
            [one] => json!(one),
            many => json!(many),
        };
        if let Value::Object(m) = labels
            .entry(object.to_string())
            .or_insert_with(|| json!({}))
        {
            m.insert(field.to_string(), value);
        }
        basis.insert(
            s.label.to_string(),
            json!({ "basis": s.basis.as_str(), "changed": s.changed, "reason": s.reason }),
        );
    }
    (labels, basis)
}

/// Renders the suggestions of a report as pretty JSON.
pub fn render(r: &Report) -> String {
    let tools: Vec<ToolSuggestion<'_>> = r
        .tools
        .iter()
        .filter(|t| !t.supported.is_empty())
        .map(|t| {
            let (resolutions, split) = per_value(t, r.coverage.network_observed);
            let mut annotations = Map::new();
            let mut basis = Map::new();
            for s in &t.supported {
                annotations.insert(s.hint.key().into(), json!(s.value));
                basis.insert(
                    s.hint.key().into(),
                    json!({ "basis": s.basis.as_str(), "reason": s.reason }),
                );
            }
            let (data_labels, data_labels_basis) = data_labels(t);
            ToolSuggestion {
                resolutions,
                split,
                data_labels,
                data_labels_basis,
                name: &t.name,
                definition_sha256: &t.definition_sha256,
                annotations,
                changed: t
                    .supported
                    .iter()
                    .filter(|s| s.changed)
                    .map(|s| s.hint.key())
                    .collect(),
                basis,
            }
        })
        .collect();
    let out = json!({
        "schema_version": SUGGEST_VERSION,
        "server": server_key(r),
        "complete": r.partial.is_none() && r.server.start_error.is_none(),
        "sandbox": r.sandbox.level,
        "coverage": {
            "tools_listed": r.coverage.tools_listed,
            "tools_succeeded": r.coverage.tools_succeeded,
            "files_observed": r.coverage.files_observed,
            "network_observed": r.coverage.network_observed,
        },
        "legend": {
            "observed": "backed by a behaviour hintcheck saw",
            "consistent": "fits everything that was exercised; proves only what was exercised",
            "unverified": "nothing exercised it: the declared value, or the spec's default when none was declared",
            "data_labels": "draft SEP-1913 fields, only those the run could see: add the draft's other required fields before pasting",
        },
        "tools": tools,
    });
    let mut text = serde_json::to_string_pretty(&out).unwrap_or_default();
    text.push('\n');
    text
}

/// Renders the suggestions as a table for people: per tool the value and basis of every
/// hint (`*` where it differs from what the tool declares), then why each change.
pub fn render_text(r: &Report) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let server = escape_untrusted(&server_key(r));
    let _ = writeln!(
        o,
        "Suggested annotations for {} ({} of {} tool(s) with a successful call; sandbox {})",
        shorten(&server, 80),
        r.coverage.tools_succeeded,
        r.coverage.tools_listed,
        r.sandbox.level
    );
    if let Some(why) = r.partial.as_ref().or(r.server.start_error.as_ref()) {
        let _ = writeln!(o, "incomplete: {}", shorten(&escape_untrusted(why), 200));
    }
    let tools: Vec<_> = r.tools.iter().filter(|t| !t.supported.is_empty()).collect();
    if tools.is_empty() {
        let _ = writeln!(o, "\nno tool to suggest annotations for");
        return o;
    }
    let names: Vec<String> = tools
        .iter()
        .map(|t| shorten(&escape_untrusted(&t.name), 40))
        .collect();
    let width = names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let cell = 21;
    let _ = write!(o, "\n{:<width$}", "TOOL");
    for h in HintName::ALL {
        let _ = write!(o, "  {:<cell$}", h.key());
    }
    while o.ends_with(' ') {
        o.pop();
    }
    let _ = writeln!(o);
    let mut why = Vec::new();
    for (t, name) in tools.iter().zip(&names) {
        let _ = write!(o, "{name:<width$}");
        for h in HintName::ALL {
            let text = match t.supported.iter().find(|s| s.hint == h) {
                Some(s) => {
                    if s.changed {
                        why.push(format!(
                            "{name}: {} = {} ({}): {}",
                            h.key(),
                            s.value,
                            s.basis.as_str(),
                            shorten(&escape_untrusted(&s.reason), 160)
                        ));
                    }
                    format!(
                        "{:<5} {}{}",
                        s.value,
                        s.basis.as_str(),
                        if s.changed { " *" } else { "" }
                    )
                }
                None => "-".into(),
            };
            let _ = write!(o, "  {text:<cell$}");
        }
        // No trailing blanks after the last column.
        while o.ends_with(' ') {
            o.pop();
        }
        let _ = writeln!(o);
    }
    let _ = writeln!(
        o,
        "\n* differs from what the tool declares (an absent hint differs). observed: backed by a behaviour seen; consistent: fits everything exercised, which proves only that; unverified: nothing exercised it."
    );
    if !why.is_empty() {
        let _ = writeln!(o, "\nWhy the changes:");
        for w in why {
            let _ = writeln!(o, "  {w}");
        }
    }
    // Observed labels one per line with why; the ones that only fit what was exercised
    // grouped by value, with the tools they fit.
    let mut labels: Vec<String> = Vec::new();
    let mut fitting: std::collections::BTreeMap<String, Vec<&str>> = Default::default();
    for (t, name) in tools.iter().zip(&names) {
        for s in t.labels_supported.iter().filter(|s| s.changed) {
            let value = format!("{} = {}", s.label, crate::mcp::labels::set(&s.values));
            if s.basis == crate::audit::suggest::SupportBasis::Observed {
                labels.push(format!(
                    "{name}: {value} (observed): {}",
                    shorten(&escape_untrusted(&s.reason), 160)
                ));
            } else {
                fitting.entry(value).or_default().push(name);
            }
        }
    }
    for (value, names) in fitting {
        labels.push(format!(
            "{value} (consistent) for {} tool(s): {}",
            names.len(),
            shorten(&names.join(", "), 200)
        ));
    }
    if !labels.is_empty() {
        let _ = writeln!(
            o,
            "\nData labels (draft SEP-1913 fields; only those the run could see, the author fills in the rest):"
        );
        for l in labels {
            let _ = writeln!(o, "  {l}");
        }
    }
    per_value_text(&mut o, &tools, &names, r.coverage.network_observed);
    let _ = writeln!(
        o,
        "\nThe same as JSON, ready to paste: hintcheck suggest --format json"
    );
    o
}

/// `a: true, b: false`.
fn hints_text(hints: &[(HintName, bool)]) -> String {
    hints
        .iter()
        .map(|(h, v)| format!("{}: {v}", h.key()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per multi-operation tool: the annotations each value supports (what `tools/resolve` could
/// serve), values with the same ones together, and the split that would let static
/// annotations be honest.
fn per_value_text(
    o: &mut String,
    tools: &[&super::ToolReport],
    names: &[String],
    network_observed: bool,
) {
    use crate::audit::by_argument::{split, value_annotations, value_text};
    use std::fmt::Write;
    let mut lines: Vec<String> = Vec::new();
    for (t, name) in tools.iter().zip(names) {
        let resolved = value_annotations(&t.by_argument, network_observed);
        let splits = split(&resolved);
        // Only where the values differ: one set for all is the static annotations above.
        for (argument, groups) in &splits {
            for (values, hints) in groups {
                let values: Vec<String> = values
                    .iter()
                    .map(|v| shorten(&escape_untrusted(&value_text(v)), 40))
                    .collect();
                let observed = resolved
                    .iter()
                    .any(|r| r.argument == *argument && r.hints == *hints && r.observed);
                lines.push(format!(
                    "{name}: {}: {} → {} ({})",
                    escape_untrusted(argument),
                    values.join(", "),
                    hints_text(hints),
                    if observed { "observed" } else { "consistent" }
                ));
            }
            lines.push(format!(
                "{name}: its static annotations must cover its worst case; served per value from tools/resolve, or split on {} into {} tools (one per line above), each could declare honest static annotations",
                escape_untrusted(argument),
                groups.len()
            ));
        }
    }
    if !lines.is_empty() {
        let _ = writeln!(
            o,
            "\nPer value (ready to serve from tools/resolve for calls that pass it):"
        );
        for l in lines {
            let _ = writeln!(o, "  {l}");
        }
    }
}
