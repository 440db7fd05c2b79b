//! Behaviour per argument value (issue 35): lies that show only for one operation or one
//! non-default flag are contradictions that name the value, and the report says what each
//! value did; honest counterparts are not accused.

use std::time::Duration;

use crate::sandbox::{As, prefix, run_as, verify_json_args};
use crate::util::skip;

/// The profile entry of `tool` for `argument: value`.
fn entry<'a>(
    r: &'a serde_json::Value,
    tool: &str,
    argument: &str,
    value: serde_json::Value,
) -> &'a serde_json::Value {
    r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == tool)
        .and_then(|t| {
            t["by_argument"]
                .as_array()?
                .iter()
                .find(|e| e["argument"] == argument && e["value"] == value)
        })
        .unwrap_or_else(|| panic!("no {argument}: {value} in {tool}'s by_argument"))
}

fn per_argument_run(who: As) {
    if !std::path::Path::new("/usr/bin/python3").is_file() {
        return skip("/usr/bin/python3 is missing (the per-argument fixture)");
    }
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    let out = run_as(
        &prefix,
        &verify_json_args("per-argument", &["--check"]),
        Duration::from_secs(120),
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    let r = out.json();
    use serde_json::json;
    // The admin's lie is its purge alone; its other actions read.
    for action in ["list", "read", "stat"] {
        let e = entry(&r, "notes_admin", "action", json!(action));
        assert_eq!(e["behaviour"], "read-only", "{e}");
        assert!(e.get("contradicts").is_none(), "{e}");
    }
    let purge = entry(&r, "notes_admin", "action", json!("purge"));
    assert_eq!(purge["behaviour"], "destructive", "{purge}");
    assert_eq!(purge["contradicts"], json!(["readOnlyHint"]), "{purge}");
    assert_eq!(
        purge["calls"],
        json!(["variant (action: purge): ok"]),
        "{purge}"
    );
    let evidence = &purge["evidence"][0];
    assert!(
        evidence["text"]
            .as_str()
            .expect("a string")
            .starts_with("deleted $WORKSPACE/"),
        "{evidence}"
    );
    assert_eq!(evidence["firm"], true, "{evidence}");
    // The contradiction names the value, in the verdict and the finding.
    let finding = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["tool"] == "notes_admin" && f["hint"] == "readOnlyHint")
        .expect("notes_admin's finding");
    assert!(
        finding["message"]
            .as_str()
            .expect("a string")
            .ends_with("(with action: purge)"),
        "{finding}"
    );
    // The exporter's lie is its non-default flag.
    let replaced = entry(&r, "export_note", "overwrite", json!(true));
    assert_eq!(replaced["behaviour"], "destructive", "{replaced}");
    assert_eq!(replaced["contradicts"], json!(["destructiveHint"]));
    let kept = entry(&r, "export_note", "overwrite", json!(false));
    assert_eq!(kept["behaviour"], "additive", "{kept}");
    assert!(kept.get("contradicts").is_none(), "{kept}");
    // Honest counterparts: every value as declared.
    let appended = entry(&r, "archive_note", "overwrite", json!(true));
    assert_eq!(appended["behaviour"], "additive", "{appended}");
    for action in ["list", "read", "stat"] {
        let e = entry(&r, "notes_reader", "action", json!(action));
        assert_eq!(e["behaviour"], "read-only", "{e}");
    }
    // The text report's table under the tool, and the HTML report's.
    let text = run_as(
        &prefix,
        &[
            "verify".into(),
            "--scenario".into(),
            crate::sandbox::fixture("per-argument"),
            "--color".into(),
            "never".into(),
        ],
        Duration::from_secs(120),
    );
    assert_eq!(text.code, 1, "{}", text.stderr);
    let table_line = text
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("action: purge"))
        .unwrap_or_else(|| panic!("no table line for action: purge:\n{}", text.stdout));
    assert!(
        table_line.contains("destructive") && table_line.contains("contradicts readOnlyHint"),
        "{table_line}"
    );
    let html = run_as(
        &prefix,
        &verify_json_args("per-argument", &[])
            .into_iter()
            .map(|a| if a == "json" { "html".to_string() } else { a })
            .collect::<Vec<_>>(),
        Duration::from_secs(120),
    );
    assert!(
        html.stdout.contains("by argument: what each value did") && html.stdout.contains("purge"),
        "html"
    );
}

as_root_and_unprivileged!(
    a_lie_for_one_value_is_named_with_it_as_root,
    a_lie_for_one_value_is_named_with_it_unprivileged,
    per_argument_run
);
