//! Reports for CI, produced for the demo scenario: SARIF (validated against the official
//! SARIF 2.1.0 schema and GitHub's upload rules), JUnit (parsed back), the Markdown summary
//! (a snapshot), `hintcheck suggest`, baselines, the config file, and progress and colour on a
//! terminal versus a pipe.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::util::{
    Outcome, assert_self_contained, at, chromium, copy_dir, fake_server, read_json,
    render_in_browser, repo, run, run_in,
};

const LIMIT: Duration = Duration::from_secs(120);

/// The demo's six lies, as `tool: hint`.
const DEMO_LIES: [&str; 7] = [
    "get_status: readOnlyHint",
    "get_status: idempotentHint",
    "peek_cache: readOnlyHint",
    "tidy_notes: readOnlyHint",
    "add_item: idempotentHint",
    "reset_items: destructiveHint",
    "archive_note: destructiveHint",
];

fn demo(args: &[&str], cwd: Option<&Path>) -> Outcome {
    let demo = at("scenarios/demo");
    let mut all = vec!["verify", "--scenario", demo.as_str()];
    all.extend_from_slice(args);
    run_in(cwd, &all, &[], LIMIT)
}

fn sarif_validator() -> jsonschema::Validator {
    let mut schema = read_json(&repo().join("tests/data/sarif/sarif-schema-2.1.0.json"));
    // The official schema's `language` patterns have a stray `]` that strict regex checking
    // (with format validation on) rejects; hintcheck emits no `language`, so the corrected
    // pattern changes nothing about what is validated.
    fn fix_language_patterns(v: &mut Value) -> usize {
        match v {
            Value::Object(m) => {
                let mut fixed = 0;
                for (k, x) in m.iter_mut() {
                    if k == "pattern" && x == "^[a-zA-Z]{2}|^[a-zA-Z]{2}-[a-zA-Z]{2}]?$" {
                        *x = Value::from("^[a-zA-Z]{2}$|^[a-zA-Z]{2}-[a-zA-Z]{2}$");
                        fixed += 1;
                    } else {
                        fixed += fix_language_patterns(x);
                    }
                }
                fixed
            }
            Value::Array(a) => a.iter_mut().map(fix_language_patterns).sum(),
            _ => 0,
        }
    }
    assert!(fix_language_patterns(&mut schema) > 0);
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .expect("the SARIF schema compiles")
}

/// The checks GitHub code scanning applies on upload (ci-conventions.md §1).
fn assert_github_accepts(log: &Value) {
    assert_eq!(log["version"], "2.1.0");
    let runs = log["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "hintcheck");
    let rules = driver["rules"].as_array().expect("rules");
    let rule_ids: BTreeSet<&str> = rules.iter().filter_map(|r| r["id"].as_str()).collect();
    for r in rules {
        for key in ["shortDescription", "fullDescription", "help"] {
            let text = r[key]["text"].as_str().expect("text");
            assert!(!text.is_empty(), "{key} of {}", r["id"]);
            if key != "help" {
                assert!(text.chars().count() <= 1024, "{key} of {}", r["id"]);
            }
        }
    }
    let category = run["automationDetails"]["id"].as_str().expect("category");
    assert!(category.starts_with("hintcheck/"), "{category}");
    for result in run["results"].as_array().expect("results") {
        let rule = result["ruleId"].as_str().expect("ruleId");
        assert!(rule_ids.contains(rule), "{rule} has no rule");
        assert!(
            !result["message"]["text"]
                .as_str()
                .expect("message")
                .is_empty()
        );
        let loc = &result["locations"][0]["physicalLocation"];
        assert!(
            !loc["artifactLocation"]["uri"]
                .as_str()
                .expect("uri")
                .is_empty()
        );
        for k in ["startLine", "startColumn", "endLine", "endColumn"] {
            assert!(loc["region"][k].as_u64().expect(k) >= 1, "{k}");
        }
        assert!(
            result["partialFingerprints"]["primaryLocationLineHash"]
                .as_str()
                .is_some_and(|f| f.len() == 32)
        );
    }
}

#[test]
fn sarif_for_the_demo_is_valid_and_anchored_on_the_inventory_or_the_named_source() {
    let dir = tempfile::tempdir().expect("tmp");
    let sarif_path = dir.path().join("out/hintcheck.sarif");
    std::fs::create_dir_all(sarif_path.parent().expect("parent")).expect("mkdir");
    let sarif = sarif_path.display().to_string();
    let root = dir.path().display().to_string();
    let out = demo(
        &["--sarif", &sarif, "--source-root", &root, "-o", "/dev/null"],
        None,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let log = read_json(&sarif_path);
    let validator = sarif_validator();
    let errors: Vec<String> = validator
        .iter_errors(&log)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "schema errors: {errors:#?}");
    assert_github_accepts(&log);

    let run = &log["runs"][0];
    assert_eq!(run["properties"]["sandbox"]["level"], "full");
    assert!(
        run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
            .as_str()
            .is_some_and(|u| u.starts_with("file:///") && u.ends_with('/'))
    );
    let results = run["results"].as_array().expect("results");
    let errors: BTreeSet<String> = results
        .iter()
        .filter(|r| r["level"] == "error")
        .map(|r| {
            let tool = r["locations"][0]["logicalLocations"][0]["name"]
                .as_str()
                .expect("tool");
            format!(
                "{tool}: {}",
                r["properties"]["hint"].as_str().expect("hint")
            )
        })
        .collect();
    assert_eq!(errors, DEMO_LIES.iter().map(|s| s.to_string()).collect());
    // Without an anchor, each result points at its tool's line of the inventory.
    let inventory_path = dir.path().join("out/hintcheck-tools.json");
    let inventory = std::fs::read_to_string(&inventory_path).expect("inventory written");
    serde_json::from_str::<Value>(&inventory).expect("the inventory is JSON");
    let lines: Vec<&str> = inventory.lines().collect();
    for r in results
        .iter()
        .filter(|r| r["properties"]["hint"].is_string())
    {
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["uri"], "out/hintcheck-tools.json");
        assert_eq!(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
        let line = lines[loc["region"]["startLine"].as_u64().expect("line") as usize - 1];
        let tool = r["locations"][0]["logicalLocations"][0]["name"]
            .as_str()
            .expect("tool");
        assert!(
            line.starts_with(&format!("{{\"name\":\"{tool}\"")),
            "{tool}: {line}"
        );
    }
    // Fingerprints are stable: a second run gives the same ones.
    let again = demo(
        &["--sarif", &sarif, "--source-root", &root, "-o", "/dev/null"],
        None,
    );
    assert_eq!(again.code, 1);
    let prints = |log: &Value| -> Vec<String> {
        log["runs"][0]["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["partialFingerprints"]["primaryLocationLineHash"].to_string())
            .collect()
    };
    assert_eq!(prints(&log), prints(&read_json(&sarif_path)));

    // A named source file anchors each tool on the line that quotes its name.
    let source = dir.path().join("server.py");
    std::fs::write(
        &source,
        "import mcp\n\n@tool(\"get_status\")\ndef get_status(): ...\n\nTOOLS = ['reset_items']\n",
    )
    .expect("source");
    let anchor = source.display().to_string();
    let anchored = demo(
        &[
            "--format",
            "sarif",
            "--anchor",
            &anchor,
            "--source-root",
            &root,
            "--inventory",
            &dir.path().join("inv.json").display().to_string(),
        ],
        None,
    );
    assert_eq!(anchored.code, 1, "{}", anchored.stderr);
    let log = anchored.json();
    assert!(validator.is_valid(&log));
    let location_of = |tool: &str| -> (String, u64, u64) {
        let r = log["runs"][0]["results"]
            .as_array()
            .expect("results")
            .iter()
            .find(|r| r["locations"][0]["logicalLocations"][0]["name"] == tool)
            .expect("result");
        let loc = &r["locations"][0]["physicalLocation"];
        (
            loc["artifactLocation"]["uri"]
                .as_str()
                .expect("uri")
                .to_string(),
            loc["region"]["startLine"].as_u64().expect("line"),
            loc["region"]["startColumn"].as_u64().expect("column"),
        )
    };
    assert_eq!(location_of("get_status"), ("server.py".into(), 3, 7));
    assert_eq!(location_of("reset_items"), ("server.py".into(), 6, 10));
    assert_eq!(location_of("tidy_notes").0, "inv.json", "not in the source");

    // An anchor outside the source root is used with its absolute URI; one that quotes no
    // tool is named on stderr, its tools anchored on the inventory.
    let elsewhere = tempfile::tempdir().expect("tmp");
    let outside = elsewhere.path().join("tools.ts");
    std::fs::write(&outside, "server.tool(\"tidy_notes\", {}, h);\n").expect("write");
    let quoting_none = elsewhere.path().join("README.md");
    std::fs::write(&quoting_none, "# a server\n").expect("write");
    let out = demo(
        &[
            "--format",
            "sarif",
            "--anchor",
            &quoting_none.display().to_string(),
            "--anchor",
            &outside.display().to_string(),
            "--source-root",
            &root,
            "--inventory",
            &dir.path().join("inv.json").display().to_string(),
        ],
        None,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let log = out.json();
    let tidy = log["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["locations"][0]["logicalLocations"][0]["name"] == "tidy_notes")
        .expect("tidy_notes");
    assert_eq!(
        tidy["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
        format!("file://{}", outside.display())
    );
    assert!(
        out.stderr.contains(&format!(
            "--anchor {} quotes none of the server's tools",
            quoting_none.display()
        )),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr
            .contains(&format!("--anchor {} quotes none", outside.display())),
        "{}",
        out.stderr
    );

    // SARIF on stdout with no --inventory writes no file: it carries the inventory its
    // locations point at, as the run's first artifact.
    let cwd = tempfile::tempdir().expect("tmp");
    let stdout = demo(&["--format", "sarif"], Some(cwd.path()));
    assert_eq!(stdout.code, 1, "{}", stdout.stderr);
    assert_eq!(
        std::fs::read_dir(cwd.path()).expect("cwd").count(),
        0,
        "no file left behind"
    );
    let log = stdout.json();
    let errors: Vec<String> = validator
        .iter_errors(&log)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "schema errors: {errors:#?}");
    let artifact = &log["runs"][0]["artifacts"][0];
    let embedded = artifact["contents"]["text"]
        .as_str()
        .expect("embedded inventory");
    let lines: Vec<&str> = embedded.lines().collect();
    for r in log["runs"][0]["results"].as_array().expect("results") {
        let loc = &r["locations"][0]["physicalLocation"];
        assert_eq!(loc["artifactLocation"]["index"], 0, "{loc}");
        assert_eq!(
            loc["artifactLocation"]["uri"], artifact["location"]["uri"],
            "{loc}"
        );
        if let Some(tool) = r["locations"][0]["logicalLocations"][0]["name"].as_str() {
            let line = lines[loc["region"]["startLine"].as_u64().expect("line") as usize - 1];
            assert!(
                line.starts_with(&format!("{{\"name\":\"{tool}\"")),
                "{tool}: {line}"
            );
        }
    }
}

#[test]
fn annotations_for_the_demo_are_placed_on_the_anchor_line_that_names_each_tool() {
    let dir = tempfile::tempdir().expect("tmp");
    // A server source quoting two of the lying tools.
    let source = dir.path().join("src/server.ts");
    std::fs::create_dir_all(source.parent().expect("parent")).expect("mkdir");
    std::fs::write(
        &source,
        "// tools\nserver.tool(\"get_status\", {}, handler);\n\nserver.tool(\"tidy_notes\", {}, h2);\n",
    )
    .expect("write");
    let root = dir.path().display().to_string();
    let anchor = source.display().to_string();
    let out = demo(
        &[
            "--annotations",
            "--anchor",
            &anchor,
            "--source-root",
            &root,
            "-o",
            "/dev/null",
        ],
        None,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let commands: Vec<&str> = out.stdout.lines().filter(|l| l.starts_with("::")).collect();
    let errors: Vec<&&str> = commands
        .iter()
        .filter(|l| l.starts_with("::error "))
        .collect();
    assert_eq!(errors.len(), 7, "{commands:#?}");
    let of = |tool: &str| {
        errors
            .iter()
            .find(|l| l.contains(&format!("%3A {tool} ")))
            .unwrap_or_else(|| panic!("{tool}: {commands:#?}"))
    };
    assert!(
        of("get_status").starts_with("::error file=src/server.ts,line=2,title=hintcheck read-only%3A get_status readOnlyHint::"),
        "{}",
        of("get_status")
    );
    assert!(of("tidy_notes").starts_with("::error file=src/server.ts,line=4,"));
    // A tool no anchor names shows on the run only; evidence follows on escaped lines.
    let add = of("add_item");
    assert!(add.starts_with("::error title="), "{add}");
    assert!(add.contains("%0A"), "{add}");
    assert!(commands.iter().all(|l| !l.contains('\r')));
}

#[test]
fn require_hints_fails_on_tools_that_leave_hints_undeclared_and_says_what_to_declare() {
    let out = demo(&["--require-hints", "--format", "json"], None);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r: Value = serde_json::from_str(&out.stdout).expect("json");
    let missing: Vec<&Value> = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["audit"] == "missing-hints")
        .collect();
    let of = |tool: &str| {
        missing
            .iter()
            .find(|f| f["tool"] == tool)
            .unwrap_or_else(|| panic!("{tool}: {missing:#?}"))
    };
    // The demo's fetch_quote declares no hint but openWorldHint; read-only by what was seen.
    let quote = of("fetch_quote");
    assert_eq!(quote["severity"], "error");
    assert_eq!(
        quote["message"],
        "fetch_quote does not declare readOnlyHint, destructiveHint"
    );
    assert!(
        quote["evidence"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("readOnlyHint: true (consistent")),
        "{quote}"
    );
    // archive_note writes: what it must declare is backed by what was observed.
    assert!(
        of("archive_note")["evidence"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("readOnlyHint: false (observed")),
        "{}",
        of("archive_note")
    );
    assert!(
        r["exit_reason"]
            .as_str()
            .is_some_and(|t| t.contains("other finding(s)")),
        "{}",
        r["exit_reason"]
    );
    // Without the flag, none.
    let plain = demo(&["--format", "json"], None);
    assert!(!plain.stdout.contains("\"missing-hints\""));
}

#[test]
fn junit_for_the_demo_parses_back_with_a_case_per_tool_and_hint() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("junit.xml");
    let out = demo(
        &["--junit", &path.display().to_string(), "-o", "/dev/null"],
        None,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let text = std::fs::read_to_string(&path).expect("junit written");
    let doc = roxmltree::Document::parse(&text).expect("well-formed XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let suite = root
        .children()
        .find(|n| n.has_tag_name("testsuite"))
        .expect("testsuite");
    assert_eq!(suite.attribute("name"), Some("demo-notes"));
    let cases: Vec<roxmltree::Node<'_, '_>> = suite
        .children()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    assert_eq!(cases.len(), 1 + 11 * 4, "a run case and 4 per tool");
    assert_eq!(suite.attribute("tests"), Some("45"));
    let failing: BTreeSet<&str> = cases
        .iter()
        .filter(|c| c.children().any(|n| n.has_tag_name("failure")))
        .filter_map(|c| c.attribute("name"))
        .collect();
    assert_eq!(failing, DEMO_LIES.into_iter().collect());
    assert_eq!(suite.attribute("failures"), Some("7"));
    let skipped = cases
        .iter()
        .filter(|c| c.children().any(|n| n.has_tag_name("skipped")))
        .count();
    assert_eq!(
        suite.attribute("skipped"),
        Some(skipped.to_string().as_str())
    );
    assert_eq!(suite.attribute("errors"), Some("0"));
    let failure = cases
        .iter()
        .find(|c| c.attribute("name") == Some("get_status: readOnlyHint"))
        .and_then(|c| c.children().find(|n| n.has_tag_name("failure")))
        .expect("failure");
    assert_eq!(failure.attribute("type"), Some("read-only"));
    assert!(
        failure.text().unwrap_or("").contains("status.log"),
        "evidence in the failure body"
    );
    assert!(cases.iter().all(|c| {
        c.attribute("classname")
            .is_some_and(|n| n.starts_with("demo-notes."))
    }));
}

#[test]
fn the_html_page_of_the_demo_shows_every_lie_with_its_evidence_in_a_browser() {
    let kept = repo().join("target/hintcheck-html");
    std::fs::create_dir_all(&kept).expect("target/hintcheck-html");
    let page = kept.join("demo.html");
    let out = demo(
        &["--format", "html", "--output", &page.display().to_string()],
        None,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let text = std::fs::read_to_string(&page).expect("html written");
    assert_self_contained(&text);
    // Where the settings came from, as in every report.
    assert!(
        text.contains("<dt>set</dt><dd>--format, --output from the command line; [server] command"),
        "{text}"
    );
    // One server: the page opens with its result and every contradiction, the details and
    // the scan's figures after them.
    let at = |id: &str| {
        text.find(&format!("id=\"{id}\""))
            .unwrap_or_else(|| panic!("no #{id}"))
    };
    assert!(at("result") < at("servers-in-detail"));
    assert!(at("servers-in-detail") < at("summary"));
    assert!(
        !text.contains("id=\"server-table\""),
        "no table of one server"
    );
    let result = &text[at("result")..at("servers-in-detail")];
    assert!(
        result.contains("<span class=\"v v-contradicted\">failed</span>"),
        "{result}"
    );
    for lie in DEMO_LIES {
        let (tool, hint) = lie.split_once(": ").expect("tool: hint");
        assert!(
            result.contains(&format!(
                "<td><code>{tool}</code></td><td><code>{hint}</code></td>"
            )),
            "{lie} opens the page: {result}"
        );
    }
    let Some(browser) = chromium() else {
        return;
    };
    let shown = render_in_browser(&browser, &page, &kept.join("demo.png"));
    let dom = &shown.dom;
    // Each lie: its tool's row and the reasons under it name the hint as contradicted, with
    // the evidence.
    for lie in DEMO_LIES {
        let (tool, hint) = lie.split_once(": ").expect("tool: hint");
        let at = dom
            .find(&format!("<strong>{tool}</strong>"))
            .unwrap_or_else(|| panic!("{tool} has no row"));
        let rest = &dom[at..];
        let row = &rest[..rest[1..].find("<tr id=").map_or(rest.len(), |e| e + 1)];
        assert!(
            row.contains(&format!(
                "<code>{hint}</code> <span class=\"v v-contradicted\">contradicted</span>"
            )),
            "{lie}: {row}"
        );
        assert!(row.contains("seen by snapshot"), "{lie}: evidence: {row}");
    }
    assert!(dom.contains("demo-notes 1.0.0"));
    assert!(
        dom.contains("not enforced:"),
        "the sandbox's gaps are shown"
    );
    assert!(shown.png_bytes > 20_000);
}

/// Replaces what differs between runs and machines (durations, the sandbox as root or not).
fn normalise_summary(md: &str) -> String {
    md.lines()
        .map(|l| {
            if l.starts_with("**Sandbox:**") {
                "**Sandbox:** (normalised)".to_string()
            } else if l.starts_with("<sub>hintcheck") {
                match l.rfind(" · ") {
                    Some(i) => format!("{} · (duration)</sub>", &l[..i]),
                    None => l.to_string(),
                }
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_markdown_summary_of_the_demo_matches_its_snapshot() {
    // A pinned seed: the run's words and its summary's seed line are the same every time.
    let out = demo(&["--format", "markdown", "--seed", "0"], None);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let got = normalise_summary(&out.stdout);
    let snapshot = repo().join("tests/data/snapshots/demo-summary.md");
    if std::env::var("HINTCHECK_UPDATE_SNAPSHOTS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(snapshot.parent().expect("parent")).expect("mkdir");
        std::fs::write(&snapshot, &got).expect("write snapshot");
    }
    let want = std::fs::read_to_string(&snapshot).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (HINTCHECK_UPDATE_SNAPSHOTS=1 writes it)",
            snapshot.display()
        )
    });
    assert_eq!(
        got, want,
        "the summary changed; review it and rerun with HINTCHECK_UPDATE_SNAPSHOTS=1"
    );
    assert!(out.stdout.len() < 1024 * 1024);
}

#[test]
fn the_summary_is_appended_to_github_step_summary_unless_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let summary = dir.path().join("step-summary.md");
    std::fs::write(&summary, "earlier step\n").expect("seed");
    let demo_dir = at("scenarios/demo");
    let args = ["verify", "--scenario", demo_dir.as_str(), "-o", "/dev/null"];
    let env = [("GITHUB_STEP_SUMMARY", summary.to_str().expect("utf-8"))];
    let out = run(&args, &env, LIMIT);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let text = std::fs::read_to_string(&summary).expect("summary");
    assert!(
        text.starts_with("earlier step\n## ❌ hintcheck: demo-notes"),
        "{text}"
    );
    let mut refused = args.to_vec();
    refused.push("--no-summary");
    let out = run(&refused, &env, LIMIT);
    assert_eq!(out.code, 1);
    assert_eq!(std::fs::read_to_string(&summary).expect("summary"), text);
}

#[test]
fn suggest_prints_pasteable_annotations_with_their_basis() {
    let demo_dir = at("scenarios/demo");
    let out = run(
        &["suggest", "--format", "json", "--scenario", &demo_dir],
        &[],
        LIMIT,
    );
    assert_eq!(
        out.code, 0,
        "contradictions do not fail suggest: {}",
        out.stderr
    );
    let s = out.json();
    assert_eq!(s["schema_version"], 1);
    assert_eq!(s["complete"], true);
    let tools = s["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 11);
    for t in tools {
        let annotations = t["annotations"].as_object().expect("annotations");
        assert_eq!(annotations.len(), 4, "{t}");
        assert!(annotations.values().all(Value::is_boolean));
        for (hint, b) in t["basis"].as_object().expect("basis") {
            assert!(
                ["observed", "consistent", "unverified"]
                    .contains(&b["basis"].as_str().expect("basis")),
                "{hint}"
            );
        }
    }
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))
    };
    let get_status = tool("get_status");
    assert_eq!(get_status["annotations"]["readOnlyHint"], false);
    assert_eq!(get_status["basis"]["readOnlyHint"]["basis"], "observed");
    assert!(
        get_status["changed"]
            .as_array()
            .expect("changed")
            .contains(&Value::from("readOnlyHint"))
    );
    let reset = tool("reset_items");
    assert_eq!(reset["annotations"]["destructiveHint"], true);
    assert_eq!(reset["basis"]["destructiveHint"]["basis"], "observed");
    let read_note = tool("read_note");
    assert_eq!(read_note["annotations"]["readOnlyHint"], true);
    assert_eq!(read_note["basis"]["readOnlyHint"]["basis"], "consistent");
    assert_eq!(read_note["annotations"]["destructiveHint"], false);
}

#[test]
fn a_baseline_accepts_known_findings_reports_stale_ones_and_changed_tools() {
    let dir = tempfile::tempdir().expect("tmp");
    let baseline = dir.path().join("baseline.json");
    let b = baseline.display().to_string();
    let out = demo(&["--write-baseline", &b, "-o", "/dev/null"], None);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("wrote the baseline to {b} (8 finding(s)")),
        "{}",
        out.stderr
    );
    let written = read_json(&baseline);
    assert_eq!(written["findings"].as_array().expect("findings").len(), 8);

    let accepted = demo(&["--baseline", &b, "--format", "json"], None);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    let r = accepted.json();
    assert_eq!(r["baseline"]["accepted"], 8);
    assert!(
        r["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .all(|f| f["accepted"].is_string())
    );
    assert!(
        accepted
            .stderr
            .contains("; 8 finding(s) accepted by the baseline")
    );
    // The accepted lies are still called contradicted, not "no contradiction".
    assert!(
        accepted.stderr.contains(
            "no contradiction outside the baseline in 11 exercised tool(s) (7 contradicted hint(s) accepted by the baseline)"
        ),
        "{}",
        accepted.stderr
    );

    // Drop one accepted finding, add a stale entry, mark a tool as changed.
    let mut edited = written.clone();
    let findings = edited["findings"].as_array_mut().expect("findings");
    let dropped = findings.remove(0);
    findings[0]["definition_sha256"] = Value::from("0".repeat(64));
    findings[0]["reason"] = Value::from("tracked in issue 12");
    findings.push(serde_json::json!({
        "fingerprint": "00000000000000000000000000000000",
        "audit": "read-only",
        "tool": "a_tool_since_removed",
    }));
    std::fs::write(&baseline, edited.to_string()).expect("write");
    let out = demo(&["--baseline", &b, "--format", "json"], None);
    assert_eq!(out.code, 1, "the dropped finding is new again");
    let r = out.json();
    assert_eq!(r["baseline"]["stale"][0]["tool"], "a_tool_since_removed");
    assert_eq!(
        r["baseline"]["changed_definitions"][0]["tool"],
        findings_tool(&edited, 0)
    );
    let new: Vec<&Value> = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["accepted"].is_null())
        .collect();
    assert_eq!(new.len(), 1);
    assert_eq!(new[0]["fingerprint"], dropped["fingerprint"]);
    assert!(out.stderr.contains("1 contradicted hint(s) in 1 tool(s)"));

    // The rewritten baseline keeps the human's reason.
    let rewritten = dir.path().join("again.json");
    let again = demo(
        &[
            "--baseline",
            &b,
            "--write-baseline",
            &rewritten.display().to_string(),
            "-o",
            "/dev/null",
        ],
        None,
    );
    assert_eq!(again.code, 1);
    let kept = read_json(&rewritten);
    assert!(
        kept["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["reason"] == "tracked in issue 12")
    );

    // Stale entries fail the run only when asked.
    let mut all_plus_stale = written.clone();
    all_plus_stale["findings"]
        .as_array_mut()
        .expect("findings")
        .push(serde_json::json!({"fingerprint": "ffffffffffffffffffffffffffffffff", "audit": "destructive"}));
    std::fs::write(&baseline, all_plus_stale.to_string()).expect("write");
    assert_eq!(demo(&["--baseline", &b, "-o", "/dev/null"], None).code, 0);
    let strict = demo(
        &[
            "--baseline",
            &b,
            "--fail-on-stale-baseline",
            "-o",
            "/dev/null",
        ],
        None,
    );
    assert_eq!(strict.code, 1);
    assert!(strict.stderr.contains("stale"), "{}", strict.stderr);

    // A baseline that is not one is a usage error naming the file.
    std::fs::write(&baseline, "{\"findings\": 3}").expect("write");
    let bad = demo(&["--baseline", &b], None);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("baseline.json"), "{}", bad.stderr);
}

fn findings_tool(baseline: &Value, i: usize) -> Value {
    baseline["findings"][i]["tool"].clone()
}

#[test]
fn fail_on_moves_the_threshold_both_ways() {
    let warning = demo(&["--fail-on", "warning", "-o", "/dev/null"], None);
    assert_eq!(warning.code, 1);
    assert!(
        warning
            .stderr
            .contains("1 other finding(s) at or above --fail-on warning")
    );
    let never = demo(&["--fail-on", "never", "--format", "json"], None);
    assert_eq!(never.code, 0, "{}", never.stderr);
    assert_eq!(never.json()["settings"]["fail_on"], "never");
    assert!(
        never.stderr.contains("not failing the run"),
        "{}",
        never.stderr
    );
}

/// A project with a config file that runs the demo server, a copy of the demo's seed and a
/// git directory marking the repository root.
fn project(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tmp");
    let root = dir.path();
    std::fs::create_dir_all(root.join(".git")).expect("git");
    std::fs::create_dir_all(root.join(".config")).expect(".config");
    std::fs::copy(
        repo().join("scenarios/demo/scenario.toml"),
        root.join("demo.toml"),
    )
    .expect("scenario");
    copy_dir(&repo().join("scenarios/demo/workspace"), &root.join("seed"));
    std::fs::write(root.join(".config/hintcheck.toml"), config).expect("config");
    dir
}

#[test]
fn the_config_file_is_found_applied_and_overridden_by_flags() {
    let fake = fake_server().display().to_string();
    let config = format!(
        r#"# hintcheck settings of this project
[server]
command = ["{fake}", "--scenario", "{{config_dir}}/demo.toml"]
workspace = "seed"

[run]
repeat = 2
call_timeout = "20s"

[fail]
on = "warning"

[report]
format = "json"
"#
    );
    let dir = project(&config);
    let sub = dir.path().join("src/deep");
    std::fs::create_dir_all(&sub).expect("subdir");
    // Found from a subdirectory; the command, seed, format and threshold come from the file.
    let out = run_in(Some(&sub), &["verify"], &[], LIMIT);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["settings"]["fail_on"], "warning");
    assert_eq!(r["summary"]["contradicted"], 7, "the seed was copied");
    assert!(
        out.stderr
            .contains("other finding(s) at or above --fail-on warning")
    );
    // Flags win over the file.
    let out = run_in(
        Some(&sub),
        &["verify", "--format", "text", "--fail-on", "never"],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("result:"), "text report");
    // --no-config ignores it (and then there is no command).
    let out = run_in(Some(&sub), &["verify", "--no-config"], &[], LIMIT);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("no server command"), "{}", out.stderr);
    // HINTCHECK_CONFIG and --config name a file directly.
    let elsewhere = tempfile::tempdir().expect("tmp");
    let path = dir.path().join(".config/hintcheck.toml");
    let out = run_in(
        Some(elsewhere.path()),
        &[
            "verify",
            "--config",
            path.to_str().expect("utf-8"),
            "-o",
            "/dev/null",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
}

#[test]
fn an_unknown_config_key_names_the_key_the_file_and_the_line() {
    let dir = project(
        "[server]\ncommand = [\"true\"]\n\n[report]\nformat = \"json\"\nsarif_file = \"x.sarif\"\n",
    );
    let out = run_in(Some(dir.path()), &["verify"], &[], LIMIT);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("sarif_file"), "{}", out.stderr);
    assert!(
        out.stderr.contains(".config/hintcheck.toml"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains(".config/hintcheck.toml:6:1: unknown field `sarif_file`"),
        "{}",
        out.stderr
    );
    // The line itself, marked, with its line breaks.
    assert!(
        out.stderr
            .contains("\n  |\n6 | sarif_file = \"x.sarif\"\n  | ^^^^^^^^^^\n"),
        "{}",
        out.stderr
    );
    // A misspelt choice: its place and the closest choice.
    let dir = project("[fail]\non = \"warnings\"\n[server]\ncommand = [\"true\"]\n");
    let out = run_in(Some(dir.path()), &["verify"], &[], LIMIT);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(".config/hintcheck.toml:2:6: \"warnings\" is not never, note, warning or error; did you mean \"warning\"?"),
        "{}",
        out.stderr
    );
    // A value checked later names its file, line and column too.
    let dir = project("[run]\ntimeout =  \"3 parsecs\"\n[server]\ncommand = [\"true\"]\n");
    let out = run_in(Some(dir.path()), &["verify"], &[], LIMIT);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains(
            ".config/hintcheck.toml:2:12: [run] timeout: \"3 parsecs\" has an unknown unit"
        ),
        "{}",
        out.stderr
    );
}

/// A mistake in a scenario's `[[tools]]` (read by the fake server) is a scenario error with
/// its place and the closest key, before anything starts; not a server that died in the
/// handshake.
#[test]
fn a_typo_in_a_scenarios_tools_is_a_scenario_error() {
    let dir = tempfile::tempdir().expect("tmp");
    let scenario = dir.path().join("scenario.toml");
    for (text, expected) in [
        (
            "[meta]\nid = \"t\"\n\n[[tools]]\nname = \"a\"\nanotations = { readOnlyHint = true }\n",
            "scenario.toml:6:1: unknown field `anotations` (did you mean `annotations`?)",
        ),
        (
            "[[tools]]\nname = \"a\"\nsteps = [{ action = \"apend\", path = \"x\" }]\n",
            "scenario.toml:3:21: unknown action `apend` (did you mean `append`?)",
        ),
        (
            "[fake]\nera = \"moden\"\n",
            "scenario.toml:2:7: unknown era `moden` (did you mean `modern`?)",
        ),
    ] {
        std::fs::write(&scenario, text).expect("write");
        let out = crate::util::run(
            &["verify", "--scenario", &scenario.display().to_string()],
            &[],
            LIMIT,
        );
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(out.stderr.contains(expected), "{}", out.stderr);
        assert!(!out.stderr.contains("handshake"), "{}", out.stderr);
    }
}

/// Runs hintcheck on a pseudo-terminal (Python's `pty`), returning everything it drew.
fn on_terminal(args: &[&str], env: &[(&str, &str)]) -> String {
    let script = r#"
import os, pty, sys
out = bytearray()
def read(fd):
    data = os.read(fd, 65536)
    out.extend(data)
    return data
status = pty.spawn(sys.argv[1:], read)
sys.stdout.write(out.decode("utf-8", "replace"))
"#;
    let mut cmd = std::process::Command::new("python3");
    cmd.arg("-c").arg(script).arg(crate::util::hintcheck_bin());
    cmd.args(args);
    for k in [
        "NO_COLOR",
        "CLICOLOR_FORCE",
        "FORCE_COLOR",
        "GITHUB_STEP_SUMMARY",
    ] {
        cmd.env_remove(k);
    }
    cmd.env("TERM", "xterm-256color");
    cmd.env("HINTCHECK_FAKE_SERVER", fake_server());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("python3 runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn progress_and_colour_appear_on_a_terminal_only_and_honour_no_color() {
    let demo_dir = at("scenarios/demo");
    let args = ["verify", "--scenario", demo_dir.as_str(), "--repeat", "1"];
    // Through pipes: no escape sequence at all.
    let piped = run(&args, &[], LIMIT);
    assert!(!piped.stdout.contains('\u{1b}') && !piped.stderr.contains('\u{1b}'));
    // On a terminal: a coloured report (and progress drawing on stderr).
    let drawn = on_terminal(&args, &[]);
    assert!(drawn.contains("result:"), "{drawn}");
    assert!(
        drawn.contains("\u{1b}[1;31m"),
        "red contradictions on a terminal"
    );
    // NO_COLOR: no colour, whatever else is drawn.
    let plain = on_terminal(&args, &[("NO_COLOR", "1")]);
    assert!(plain.contains("result:"), "{plain}");
    assert!(!plain.contains("\u{1b}[1;31m") && !plain.contains("\u{1b}[36m"));
    // CLICOLOR_FORCE colours even through a pipe (progress stays off).
    let forced = run(&args, &[("CLICOLOR_FORCE", "1")], LIMIT);
    assert!(forced.stdout.contains("\u{1b}[1;31m"));
    assert!(
        !forced.stderr.contains('\u{1b}'),
        "no progress through a pipe"
    );
    // --no-progress on a terminal: the report only.
    let quiet = on_terminal(
        &[&args[..], &["--no-progress", "--color", "never"]].concat(),
        &[],
    );
    assert!(!quiet.contains('\u{1b}'), "{quiet:?}");
}

#[test]
fn categories_can_be_excepted_from_failing_and_accepted_by_a_baseline() {
    if !Path::new("/usr/bin/python3").is_file() {
        return crate::util::skip("/usr/bin/python3 is missing (the lazy-db fixture)");
    }
    let fixture = at("tests/fixtures/lazy-db");
    let verify = |extra: &[&str]| {
        let mut args = vec![
            "verify",
            "--scenario",
            fixture.as_str(),
            "--fail-on",
            "note",
        ];
        args.extend_from_slice(extra);
        run(&args, &[], LIMIT)
    };
    // The database made on first use is a note of its category: it fails `--fail-on note`…
    let noted = verify(&["--format", "json"]);
    assert_eq!(noted.code, 1, "{}", noted.stderr);
    let r = noted.json();
    let finding = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["category"] == "first-call-initialisation")
        .expect("a first-call finding");
    assert_eq!(finding["severity"], "note");
    // The replay that decided it is listed in every human format.
    let text = verify(&["--format", "text"]);
    assert!(
        text.stdout.contains("replay 1: ") && text.stdout.contains("on a fresh server"),
        "{}",
        text.stdout
    );
    let markdown = verify(&["--format", "markdown"]);
    assert!(
        markdown
            .stdout
            .contains("Replays that decided attribution (1)"),
        "{}",
        markdown.stdout
    );
    // … unless its category is excepted, on the command line or in the config file …
    let excepted = verify(&[
        "--fail-except",
        "first-call-initialisation",
        "--format",
        "json",
    ]);
    assert_eq!(excepted.code, 0, "{}", excepted.stderr);
    assert_eq!(
        excepted.json()["settings"]["fail_except"],
        serde_json::json!(["first-call-initialisation"])
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hintcheck.toml");
    std::fs::write(
        &config,
        "[fail]\non = \"note\"\nexcept = [\"first-call-initialisation\"]\n",
    )
    .expect("write");
    let configured = run(
        &[
            "verify",
            "--config",
            config.to_str().expect("utf8"),
            "--scenario",
            fixture.as_str(),
            "-o",
            "/dev/null",
        ],
        &[],
        LIMIT,
    );
    assert_eq!(configured.code, 0, "{}", configured.stderr);
    // … or a baseline accepts every finding of the category.
    let baseline = dir.path().join("baseline.json");
    std::fs::write(
        &baseline,
        r#"{"schema_version": 1, "accept_categories": ["first-call-initialisation"]}"#,
    )
    .expect("write");
    let accepted = verify(&[
        "--baseline",
        baseline.to_str().expect("utf8"),
        "--format",
        "json",
    ]);
    assert_eq!(accepted.code, 0, "{}", accepted.stderr);
    assert!(
        accepted.json()["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["accepted"]
                .as_str()
                .is_some_and(|a| a.contains("every first-call-initialisation finding"))),
        "{}",
        accepted.stdout
    );
    // A category that does not exist is a usage error naming it and the choices.
    let bad = verify(&["--fail-except", "bookkeeeping"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr.contains("\"bookkeeeping\" is not a category")
            && bad.stderr.contains("first-call-initialisation"),
        "{}",
        bad.stderr
    );
}

/// Where a character from the server lands raw, if anywhere: controls (but newlines and tabs),
/// bidirectional and invisible format characters, separators, tag characters.
fn raw_hazard(text: &str) -> Option<String> {
    // hintcheck's own emoji (`⚠️`) carries a variation selector; a server's never does.
    let own = text.replace("\u{26a0}\u{fe0f}", "\u{26a0}");
    let text = own.as_str();
    let at = text
        .char_indices()
        .find(|(_, c)| *c != '\n' && *c != '\t' && hintcheck::text::escape::is_hazardous(*c))?;
    let start = text[..at.0]
        .char_indices()
        .rev()
        .nth(60)
        .map_or(0, |(i, _)| i);
    Some(format!("U+{:04X} in {:?}", at.1 as u32, &text[start..at.0]))
}

/// A server whose tool names, title, description, file names, looked-up name and Host header
/// carry OSC 52 (set the clipboard), cursor moves, C1 controls, bidirectional overrides and
/// invisible characters: no medium passes one through raw (issue 29, item 2). The JSON report
/// keeps them, escaped as JSON, for machines.
#[test]
fn server_supplied_text_reaches_no_medium_raw() {
    let dir = tempfile::tempdir().expect("tmp");
    let d = dir.path();
    let scenario = at("tests/fixtures/hostile-names");
    let path = |name: &str| d.join(name).display().to_string();
    let o = run_in(
        Some(d),
        &[
            "verify",
            "--scenario",
            &scenario,
            "--annotations",
            "--sarif",
            &path("r.sarif"),
            "--junit",
            &path("r.xml"),
            "--summary",
            &path("s.md"),
            "--verbose",
        ],
        &[("NO_COLOR", "1")],
        LIMIT,
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stdout.contains("::error"), "annotations: {}", o.stdout);
    let mut media = vec![
        ("text report and annotations".to_string(), o.stdout.clone()),
        ("stderr".into(), o.stderr.clone()),
    ];
    for f in ["r.sarif", "r.xml", "s.md", "hintcheck-tools.json"] {
        let text = std::fs::read_to_string(d.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        media.push((f.to_string(), text));
    }
    for format in ["markdown", "html", "junit", "sarif"] {
        let o = run_in(
            Some(d),
            &["verify", "--scenario", &scenario, "--format", format],
            &[],
            LIMIT,
        );
        media.push((format!("--format {format}"), o.stdout));
        media.push((format!("--format {format} stderr"), o.stderr));
    }
    let lines = run_in(
        Some(d),
        &["scan", &scenario, "--output", &path("scan.jsonl")],
        &[],
        LIMIT,
    );
    media.push(("scan stderr".into(), lines.stderr));
    for format in ["text", "markdown", "html"] {
        let o = run_in(
            Some(d),
            &["merge", &path("scan.jsonl"), "--format", format],
            &[],
            LIMIT,
        );
        media.push((format!("merge --format {format}"), o.stdout));
    }
    for (medium, text) in &media {
        assert!(!text.is_empty(), "{medium} is empty");
        if let Some(hit) = raw_hazard(text) {
            panic!("{medium} passes a server's character through raw: {hit}");
        }
    }
    // The escapes are visible, so a reader sees what the server tried.
    assert!(o.stdout.contains("notes\\u{1b}]52;c;"), "{}", o.stdout);
    assert!(o.stdout.contains("Host: bad\\u{1b}]52"), "{}", o.stdout);
    // The JSON report keeps the names as sent (JSON escapes the controls).
    let json = run_in(
        Some(d),
        &["verify", "--scenario", &scenario, "--format", "json"],
        &[],
        LIMIT,
    )
    .json();
    assert!(
        json["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .any(|t| t["name"] == "notes\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}"),
        "{json}"
    );
}

#[test]
fn quiet_says_nothing_on_stderr_but_errors() {
    let out = demo(&["-q", "--format", "json", "--call-timeout", "20s"], None);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.trim().is_empty(), "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["summary"]["contradicted"], 7, "the report is whole");
    // The report says where its settings came from.
    let sources = &r["settings"]["sources"];
    assert_eq!(sources[0]["from"], "the command line", "{sources}");
    assert_eq!(
        sources[0]["options"],
        serde_json::json!(["--format", "--call-timeout"])
    );
    assert!(
        sources[1]["from"]
            .as_str()
            .is_some_and(|f| f.starts_with("the scenario ")),
        "{sources}"
    );
    // An error is still said.
    let failed = run(
        &["verify", "-q", "--", "/nonexistent/hintcheck-server"],
        &[],
        LIMIT,
    );
    assert!(
        failed.code >= 2 && failed.stderr.contains("hintcheck"),
        "{}: {}",
        failed.code,
        failed.stderr
    );
}

/// However many tools lie, the text report's first screen (20 lines) names every one of
/// them; `--verbose` gives each hint its own line.
#[test]
fn the_first_screen_names_every_contradicted_tool() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut scenario = String::from("[meta]\nid = \"many-lies\"\n");
    let names: Vec<String> = (0..25)
        .map(|i| format!("lying_tool_with_a_long_name_{i:02}"))
        .collect();
    for (i, name) in names.iter().enumerate() {
        scenario.push_str(&format!(
            "\n[[tools]]\nname = \"{name}\"\nannotations = {{ readOnlyHint = true, idempotentHint = true }}\nsteps = [{{ action = \"append\", path = \"log-{i:02}.txt\", content = \"x\\n\" }}]\n"
        ));
    }
    let file = dir.path().join("scenario.toml");
    std::fs::write(&file, scenario).expect("write");
    let file = file.display().to_string();
    let out = run(&["verify", "--scenario", &file], &[], LIMIT);
    assert_eq!(out.code, 1, "{}", out.stderr);
    let first_screen: Vec<&str> = out.stdout.lines().take(20).collect();
    for name in &names {
        assert!(
            first_screen.iter().any(|l| l.contains(name.as_str())),
            "{name} is not on the first screen:\n{}",
            out.stdout
        );
    }
    let out = run(&["verify", "--scenario", &file, "--verbose"], &[], LIMIT);
    for name in &names {
        assert!(
            out.stdout
                .lines()
                .any(|l| l.contains(name.as_str()) && l.contains("readOnlyHint: true")),
            "{name} has its hint's line with --verbose:\n{}",
            out.stdout
        );
    }
}
