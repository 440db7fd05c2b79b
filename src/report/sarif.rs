//! SARIF 2.1.0 for GitHub code scanning: one run per report, `rules[]` from the audit
//! metadata, one result per finding with a physical location (from [`super::anchor`]), the
//! tool and server as logical locations, stable `partialFingerprints`, baseline state and
//! suppressions for accepted findings, and the sandbox level, coverage and exit status in the
//! run's properties. GitHub's limits (1024-character descriptions, 25,000 results, 20 tags)
//! are respected here.

use serde_json::{Map, Value, json};

use super::Report;
use super::anchor::{Anchor, Anchors};
use crate::audit::{ALL, AuditMeta};
use crate::baseline::server_key;
use crate::finding::Finding;

/// The schema URI GitHub's documentation uses.
pub const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// GitHub keeps at most this many results per run.
const MAX_RESULTS: usize = 25_000;

/// GitHub's limit on descriptions.
const MAX_DESCRIPTION: usize = 1024;

/// The default level, security severity (GitHub's 0.1–10 scale) and tags of an audit.
fn rule_profile(id: &str) -> (&'static str, Option<&'static str>, &'static [&'static str]) {
    match id {
        "read-only" => (
            "error",
            Some("7.5"),
            &["security", "mcp", "annotations", "readOnlyHint"],
        ),
        "destructive" => (
            "error",
            Some("7.5"),
            &["security", "mcp", "annotations", "destructiveHint"],
        ),
        "open-world" => (
            "error",
            Some("6.5"),
            &["security", "mcp", "annotations", "openWorldHint"],
        ),
        "idempotent" => (
            "error",
            Some("4.0"),
            &["correctness", "mcp", "annotations", "idempotentHint"],
        ),
        "out-of-window" => ("warning", Some("4.0"), &["security", "mcp", "behaviour"]),
        // A server probing its sandbox for a way out.
        "sandbox-evasion" => ("warning", Some("7.0"), &["security", "mcp", "sandbox"]),
        "secret-access" => ("error", Some("8.0"), &["security", "mcp", "secrets"]),
        "exfiltration" => (
            "error",
            Some("9.0"),
            &["security", "mcp", "secrets", "network"],
        ),
        // A false data label lets a host's data-flow rule pass what it should stop.
        "data-labels" => (
            "error",
            Some("6.5"),
            &["security", "mcp", "annotations", "data-labels"],
        ),
        _ => ("warning", None, &["correctness", "mcp", "protocol"]),
    }
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

fn pascal_case(id: &str) -> String {
    id.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_uppercase().chain(c).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

fn rule(meta: &AuditMeta) -> Value {
    let (level, security, tags) = rule_profile(meta.id);
    let first_paragraph = meta.docs.split("\n\n").next().unwrap_or(meta.docs);
    let mut properties = json!({
        "tags": tags,
        "precision": "high",
        "problem.severity": if level == "error" { "error" } else { "warning" },
    });
    if let Some(s) = security {
        properties["security-severity"] = json!(s);
    }
    json!({
        "id": meta.id,
        "name": pascal_case(meta.id),
        "shortDescription": { "text": truncate(meta.summary, MAX_DESCRIPTION) },
        "fullDescription": { "text": truncate(first_paragraph, MAX_DESCRIPTION) },
        "help": {
            "text": format!("{}\n\nMore: hintcheck explain {}", meta.docs, meta.id),
            "markdown": format!("{}\n\nMore: `hintcheck explain {}`", meta.docs, meta.id),
        },
        "defaultConfiguration": { "level": level },
        "properties": properties,
    })
}

fn physical(anchor: &Anchor, embedded: bool) -> Value {
    let mut artifact = json!({ "uri": anchor.uri });
    if anchor.relative {
        artifact["uriBaseId"] = json!("%SRCROOT%");
    }
    if anchor.in_inventory && embedded {
        // The run's first artifact: the inventory, carried in the SARIF itself.
        artifact["index"] = json!(0);
    }
    json!({
        "artifactLocation": artifact,
        "region": {
            "startLine": anchor.line,
            "startColumn": anchor.start_column,
            "endLine": anchor.line,
            "endColumn": anchor.end_column.max(anchor.start_column + 1),
        }
    })
}

fn result(r: &Report, f: &Finding, anchors: &Anchors, server: &str) -> Value {
    let rule_index = ALL.iter().position(|m| m.id == f.audit);
    let anchor = f
        .tool
        .as_ref()
        .and_then(|t| anchors.tools.get(t))
        .unwrap_or(&anchors.server);
    let logical = match &f.tool {
        Some(t) => json!([{
            "name": t,
            "fullyQualifiedName": format!("{server}/tools/{t}"),
            "kind": "function",
        }]),
        None => json!([{ "name": server, "fullyQualifiedName": server, "kind": "module" }]),
    };
    let mut properties = Map::new();
    properties.insert("confidence".into(), json!(f.confidence));
    if let Some(v) = &r.settings.variant {
        properties.insert("variant".into(), json!(v));
    }
    if let Some(h) = f.hint {
        properties.insert("hint".into(), json!(h.key()));
    }
    if let Some(c) = f.category {
        properties.insert("category".into(), json!(c.as_str()));
    }
    if let Some(t) = f
        .tool
        .as_ref()
        .and_then(|t| r.tools.iter().find(|x| &x.name == t))
    {
        properties.insert("definitionSha256".into(), json!(t.definition_sha256));
    }
    properties.insert(
        "evidence".into(),
        Value::Array(
            f.evidence
                .iter()
                .map(|e| {
                    let mut v = json!({ "source": e.source, "text": e.text });
                    if let Some(c) = e.category {
                        v["category"] = json!(c.as_str());
                    }
                    if let Some(m) = e.seen_by {
                        v["seenBy"] = json!(m);
                    }
                    v
                })
                .collect(),
        ),
    );
    let mut out = json!({
        "ruleId": f.audit,
        "level": f.severity.as_str(),
        "message": { "text": truncate(&match &r.settings.variant {
            Some(v) => format!("[variant {v}] {}", f.message),
            None => f.message.clone(),
        }, 4096) },
        "locations": [{
            "physicalLocation": physical(anchor, anchors.embedded_inventory.is_some()),
            "logicalLocations": logical,
        }],
        "partialFingerprints": {
            "primaryLocationLineHash": f.fingerprint,
            "hintcheckFinding/v1": f.fingerprint,
        },
        "properties": properties,
    });
    if let Some(i) = rule_index {
        out["ruleIndex"] = json!(i);
    }
    if r.baseline.is_some() {
        out["baselineState"] = json!(if f.accepted.is_some() {
            "unchanged"
        } else {
            "new"
        });
    }
    if let Some(why) = &f.accepted {
        out["suppressions"] = json!([{ "kind": "external", "justification": why }]);
    }
    out
}

/// Renders the report as a SARIF 2.1.0 log.
pub fn render(r: &Report, anchors: &Anchors) -> String {
    let server = server_key(r);
    // The default run's findings, then each variant's (with the variant's report, whose
    // tool definitions they are about).
    let mut findings: Vec<(&Report, &Finding)> = r
        .every_run()
        .flat_map(|run| run.findings.iter().map(move |f| (run, f)))
        .collect();
    // When GitHub's limit is exceeded, keep the most severe.
    findings.sort_by_key(|(_, f)| std::cmp::Reverse(f.severity));
    let dropped = findings.len().saturating_sub(MAX_RESULTS);
    findings.truncate(MAX_RESULTS);
    let results: Vec<Value> = findings
        .iter()
        .map(|(of, f)| result(of, f, anchors, &server))
        .collect();
    let mut notifications: Vec<Value> = r
        .notes
        .iter()
        .map(|n| json!({ "level": "note", "message": { "text": truncate(n, 4096) } }))
        .collect();
    if dropped > 0 {
        notifications.push(json!({
            "level": "warning",
            "message": { "text": format!("{dropped} less severe result(s) left out (GitHub keeps 25,000 per run); the JSON report has them all") },
        }));
    }
    if let Some(e) = &r.server.start_error {
        notifications.push(json!({ "level": "error", "message": { "text": e } }));
    }
    let executed = !matches!(
        r.exit_code,
        super::exit_code::HARNESS | super::exit_code::SANDBOX_UNAVAILABLE
    );
    let mut invocation = json!({
        "executionSuccessful": executed,
        "exitCode": r.exit_code,
        "exitCodeDescription": r.exit_reason,
        "toolExecutionNotifications": notifications,
    });
    if r.partial.is_some() {
        invocation["properties"] = json!({ "partial": r.partial });
    }
    if !r.replays.is_empty() {
        invocation["properties"]["replays"] = json!(r.replays);
    }
    let c = &r.coverage;
    let log = json!({
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "hintcheck",
                    "semanticVersion": r.hintcheck_version,
                    "version": r.hintcheck_version,
                    "rules": ALL.iter().map(|m| rule(m)).collect::<Vec<_>>(),
                }
            },
            "automationDetails": {
                "id": format!("hintcheck/{}/", category_safe(&server)),
            },
            "originalUriBaseIds": {
                "%SRCROOT%": { "uri": anchors.source_root_uri },
            },
            "columnKind": "unicodeCodePoints",
            "invocations": [invocation],
            "results": results,
            "properties": {
                "server": {
                    "name": server,
                    "command": r.server.command,
                    "toolsSha256": r.server.tools_sha256,
                },
                "sandbox": {
                    "level": r.sandbox.level,
                    "requested": r.sandbox.requested,
                    "summary": r.sandbox.summary,
                    "enforced": r.sandbox.enforced,
                    "notEnforced": r.sandbox.not_enforced,
                },
                "coverage": {
                    "filesObserved": c.files_observed,
                    "networkObserved": c.network_observed,
                    "toolsListed": c.tools_listed,
                    "toolsSucceeded": c.tools_succeeded,
                    "toolsFailed": c.tools_failed,
                    "toolsSkipped": c.tools_skipped,
                    "toolsNotCalled": c.tools_not_called,
                    "calls": c.calls,
                },
                "failOn": r.settings.fail.on.as_str(),
                "failExcept": r.settings.fail.except,
                "configFile": r.settings.config_file,
                "settingsFrom": r.settings.sources_line(),
            },
        }],
    });
    // Every string a server could have supplied, wherever it landed: no raw control or
    // bidirectional character reaches a SARIF viewer.
    let mut log = log;
    if let Some(text) = &anchors.embedded_inventory {
        // Nothing on disk holds the inventory the locations point at: the run carries it.
        let at = anchors
            .tools
            .values()
            .chain([&anchors.server])
            .find(|a| a.in_inventory)
            .map(|a| {
                let mut location = physical(a, false)["artifactLocation"].clone();
                location["description"] = json!({ "text": "the tool inventory" });
                location
            })
            .unwrap_or(Value::Null);
        log["runs"][0]["artifacts"] = json!([{
            "location": at,
            "mimeType": "application/json",
            "contents": { "text": text },
            "description": { "text": "hintcheck's inventory of the server's tools, one per line (embedded: SARIF went to stdout and no --inventory file was asked for)" },
        }]);
    }
    crate::text::escape::json_strings(&mut log);
    let mut text = serde_json::to_string_pretty(&log).unwrap_or_default();
    text.push('\n');
    text
}

/// The server name as part of a category id: no `/` (it would split the category).
fn category_safe(server: &str) -> String {
    server
        .chars()
        .map(|c| if c == '/' || c.is_control() { '_' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_stay_within_githubs_limits() {
        for m in ALL {
            let r = rule(m);
            for key in ["shortDescription", "fullDescription"] {
                let text = r[key]["text"].as_str().expect("text");
                assert!(!text.is_empty() && text.chars().count() <= 1024, "{}", m.id);
            }
            assert!(r["properties"]["tags"].as_array().expect("tags").len() <= 20);
        }
        assert_eq!(pascal_case("read-only"), "ReadOnly");
    }
}
