//! Behaviour per argument value (issue 35): lies that show only for one operation or one
//! non-default flag are contradictions that name the value, and the report says what each
//! value did; honest counterparts are not accused.

use std::time::Duration;

use crate::sandbox::{As, prefix, run_as, verify_json_args};
use crate::util::{Outcome, hint_verdict, report_tool, skip};

/// The profile entry of `tool` for `argument: value`.
fn entry<'a>(
    r: &'a serde_json::Value,
    tool: &str,
    argument: &str,
    value: serde_json::Value,
) -> &'a serde_json::Value {
    report_tool(r, tool)["by_argument"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|e| e["argument"] == argument && e["value"] == value)
        })
        .unwrap_or_else(|| panic!("no {argument}: {value} in {tool}'s by_argument"))
}

/// How hintcheck is started for the per-argument fixture, or `None` (said) when it cannot be.
fn ready(who: As) -> Option<Vec<String>> {
    if !std::path::Path::new("/usr/bin/python3").is_file() {
        skip("/usr/bin/python3 is missing (the per-argument fixture)");
        return None;
    }
    prefix(who, false)
}

/// `verify` of the per-argument fixture's scenario `file` (`scenario.toml`, `resolving.toml`,
/// …) in `format` (text without colour), with `extra` flags.
fn report_in(prefix: &[String], file: &str, format: &str, extra: &[&str]) -> Outcome {
    let mut args = verify_json_args(&format!("per-argument/{file}"), extra);
    if let Some(f) = args.last_mut() {
        *f = format.to_string();
    }
    if format == "text" {
        args.extend(["--color".to_string(), "never".to_string()]);
    }
    run_as(prefix, &args, Duration::from_secs(240))
}

fn per_argument_run(who: As) {
    let Some(prefix) = ready(who) else {
        return;
    };
    let out = report_in(&prefix, "scenario.toml", "json", &["--check"]);
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
    let text = report_in(&prefix, "scenario.toml", "text", &[]);
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
    // `suggest` serves each value's annotations and the split that would make them static.
    let suggested = run_as(
        &prefix,
        &[
            "suggest".into(),
            "--scenario".into(),
            crate::sandbox::fixture("per-argument"),
            "--format".into(),
            "json".into(),
        ],
        Duration::from_secs(240),
    );
    assert_eq!(suggested.code, 0, "{}", suggested.stderr);
    let s: serde_json::Value = serde_json::from_str(&suggested.stdout).expect("suggest json");
    let admin = report_tool(&s, "notes_admin");
    let purge = admin["resolutions"]
        .as_array()
        .expect("resolutions")
        .iter()
        .find(|r| r["arguments"]["action"] == "purge")
        .expect("purge's resolution");
    assert_eq!(purge["annotations"]["destructiveHint"], true, "{purge}");
    assert_eq!(purge["basis"], "observed");
    assert_eq!(
        admin["split"][0]["tools"][0]["values"],
        json!(["list", "read", "stat"]),
        "{admin}"
    );
    let html = report_in(&prefix, "scenario.toml", "html", &[]);
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

/// Runs the per-argument fixture's scenario `file` with `--check` and its JSON report.
fn fixture_run(who: As, file: &str) -> Option<serde_json::Value> {
    let prefix = ready(who)?;
    let out = report_in(&prefix, file, "json", &["--check"]);
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, out.stdout);
    Some(out.json())
}

/// A tool's verdicts on the hints the server resolved.
fn resolved<'a>(r: &'a serde_json::Value, tool: &str) -> Vec<&'a serde_json::Value> {
    report_tool(r, tool)["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .filter(|v| v["source"] == "tools/resolve")
        .collect()
}

/// A `tools/resolve` that lies for one action is contradicted by that action's call, with
/// the arguments it was resolved for; the honest resolver and the static worst case stand.
fn resolving_run(who: As) {
    let Some(r) = fixture_run(who, "resolving.toml") else {
        return;
    };
    let lies = resolved(&r, "files_manager");
    let delete = lies
        .iter()
        .find(|v| v["verdict"] == "contradicted")
        .unwrap_or_else(|| panic!("no contradicted resolution: {lies:?}"));
    assert_eq!(delete["hint"], "readOnlyHint", "{delete}");
    assert_eq!(delete["declared"], "true", "{delete}");
    assert_eq!(delete["arguments"]["action"], "delete", "{delete}");
    assert_eq!(delete["evidence"][0]["firm"], true, "{delete}");
    // Its read was resolved read-only truthfully.
    assert!(
        lies.iter().any(|v| v["arguments"]["action"] == "read"
            && v["hint"] == "readOnlyHint"
            && v["verdict"] == "consistent"),
        "{lies:?}"
    );
    let finding = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["tool"] == "files_manager" && f["audit"] == "read-only")
        .expect("the resolution's finding");
    assert_eq!(finding["severity"], "error", "{finding}");
    assert_eq!(finding["resolved_for"]["action"], "delete", "{finding}");
    assert!(
        finding["message"]
            .as_str()
            .expect("a string")
            .starts_with("files_manager's tools/resolve for {\"action\":\"delete\""),
        "{finding}"
    );
    // Each call carries its resolution; the static verdicts are the static declaration's.
    let calls = r["tools"][0]["calls"].as_array().expect("calls");
    assert!(
        calls
            .iter()
            .all(|c| c["resolution"]["annotations"].is_object()),
        "{calls:?}"
    );
    let honest = resolved(&r, "notes_manager");
    assert!(!honest.is_empty());
    assert!(
        honest.iter().all(|v| v["verdict"] != "contradicted"),
        "{honest:?}"
    );
}

as_root_and_unprivileged!(
    a_resolution_that_lies_for_one_action_is_contradicted_as_root,
    a_resolution_that_lies_for_one_action_is_contradicted_unprivileged,
    resolving_run
);

/// A server that did not announce `tools.resolve` is never asked, whatever its tools say (it
/// ends itself when asked): no restart, no resolution, a note per tool.
fn unannounced_run(who: As) {
    let Some(r) = fixture_run(who, "unannounced.toml") else {
        return;
    };
    assert_eq!(r["server"]["restarts"], 0, "{}", r["server"]);
    for t in r["tools"].as_array().expect("tools") {
        assert!(
            t["calls"]
                .as_array()
                .expect("calls")
                .iter()
                .all(|c| c.get("resolution").is_none()),
            "{t}"
        );
    }
    // And the admin that resolves more cautiously than it declares, in the first fixture.
    let Some(r) = fixture_run(who, "scenario.toml") else {
        return;
    };
    let protocol = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["tool"] == "notes_admin" && f["audit"] == "protocol")
        .expect("notes_admin's protocol finding");
    assert!(
        protocol["message"]
            .as_str()
            .expect("a string")
            .contains("the static annotations are not the tool's worst case"),
        "{protocol}"
    );
}

as_root_and_unprivileged!(
    an_unannounced_resolution_is_never_asked_as_root,
    an_unannounced_resolution_is_never_asked_unprivileged,
    unannounced_run
);

/// The server's read-only mode as a variant: the exporter that keeps writing is contradicted
/// in it alone, the report says so, and the exit code covers it; a variant from the command
/// line runs beside the scenario's.
fn variants_run(who: As) {
    let Some(prefix) = ready(who) else {
        return;
    };
    let out = report_in(
        &prefix,
        "scenario.toml",
        "json",
        &["--variant", "quiet-mode:NOTES_READ_ONLY=1,NOTES_QUIET=1"],
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    let variants = r["variants"].as_array().expect("variants");
    let names: Vec<&str> = variants.iter().filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(
        names,
        ["quiet-mode", "read-only"],
        "the command line's first"
    );
    let read_only = &variants[1];
    assert_eq!(
        read_only["settings"],
        serde_json::json!(["NOTES_READ_ONLY=1"])
    );
    assert_eq!(read_only["exit_code"], 1);
    let verdict = hint_verdict(report_tool(read_only, "export_note"), "readOnlyHint");
    assert_eq!(verdict["declared"], "true", "{verdict}");
    assert_eq!(verdict["verdict"], "contradicted", "{verdict}");
    // The default run declares the exporter a writer: nothing to contradict there.
    assert_eq!(
        report_tool(&r, "export_note")["declared"]["readOnlyHint"],
        "false"
    );
    // The honest writer refuses in read-only mode: not accused.
    let archiver = report_tool(read_only, "archive_note");
    assert!(
        archiver["verdicts"]
            .as_array()
            .expect("verdicts")
            .iter()
            .all(|v| v["verdict"] != "contradicted"),
        "{archiver}"
    );
    // The text report's summary of the variant says the contradiction is its alone.
    let text = report_in(&prefix, "scenario.toml", "text", &[]);
    assert_eq!(text.code, 1, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("variant read-only (NOTES_READ_ONLY=1): "),
        "{}",
        text.stdout
    );
    let line = text
        .stdout
        .lines()
        .find(|l| l.contains("export_note  readOnlyHint: true"))
        .unwrap_or_else(|| panic!("no variant line for the exporter:\n{}", text.stdout));
    assert!(
        line.contains("only in this variant; the default run declares readOnlyHint: false"),
        "{line}"
    );
    // SARIF and JUnit carry the variant's findings and cases, named with it.
    for (format, says) in [
        (
            "sarif",
            "[variant read-only] export_note declares readOnlyHint: true",
        ),
        (
            "junit",
            "name=\"export_note: readOnlyHint\" classname=\"per-argument.variant.read-only.tools\"",
        ),
    ] {
        let out = report_in(&prefix, "scenario.toml", format, &[]);
        assert_eq!(out.code, 1, "{format}: {}", out.stderr);
        assert!(out.stdout.contains(says), "{format}:\n{}", out.stdout);
    }
}

as_root_and_unprivileged!(
    a_hint_a_configuration_turns_on_is_judged_in_it_as_root,
    a_hint_a_configuration_turns_on_is_judged_in_it_unprivileged,
    variants_run
);
