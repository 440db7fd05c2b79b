//! Real MCP servers from npm, installed beforehand by `scripts/install-real-servers`
//! (`.ci/run` does it). Without them the tests skip with the reason; with
//! HINTCHECK_REQUIRE_ALL=1 a skip fails.

use std::path::PathBuf;
use std::time::Duration;

use crate::util::{repo, run, skip};

fn server_js(package: &str) -> Option<PathBuf> {
    let root = std::env::var("HINTCHECK_REAL_SERVERS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| repo().join("target/real-servers"));
    let p = root
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    p.is_file().then_some(p)
}

fn has_node() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn server_filesystem_gets_a_verdict_for_every_tool() {
    let Some(js) = server_js("server-filesystem") else {
        return skip(
            "@modelcontextprotocol/server-filesystem is not installed (scripts/install-real-servers)",
        );
    };
    if !has_node() {
        return skip("node is not on PATH");
    }
    let out = run(
        &[
            "verify",
            "--format",
            "json",
            "--",
            "node",
            js.to_str().expect("utf8"),
            "{workspace}",
        ],
        &[],
        Duration::from_secs(120),
    );
    assert!(
        matches!(out.code, 0 | 1),
        "exit {}: {}",
        out.code,
        out.stderr
    );
    let r = out.json();
    assert_eq!(r["server"]["era"], "legacy");
    let tools = r["tools"].as_array().expect("tools");
    assert!(tools.len() >= 10, "{} tools", tools.len());
    for t in tools {
        let verdicts = t["verdicts"].as_array().expect("verdicts");
        assert_eq!(verdicts.len(), 4, "{}", t["name"]);
        assert!(
            !t["calls"].as_array().expect("calls").is_empty(),
            "{} was not called",
            t["name"]
        );
    }
    let create = tools
        .iter()
        .find(|t| t["name"] == "create_directory")
        .expect("create_directory");
    assert_eq!(create["calls"][0]["outcome"], "ok");
    assert_eq!(create["calls"][0]["observations"][0]["kind"], "created");
    // Paths chosen from the seeded workspace let (nearly) every tool do its real work.
    let succeeded = r["coverage"]["tools_succeeded"].as_u64().expect("n");
    assert!(succeeded + 1 >= tools.len() as u64, "{succeeded} succeeded");
    let edit = tools
        .iter()
        .find(|t| t["name"] == "edit_file")
        .expect("edit_file");
    assert_eq!(edit["calls"][0]["outcome"], "ok", "{}", edit["calls"][0]);
    assert_eq!(edit["calls"][0]["observations"][0]["kind"], "overwritten");
    let read = tools
        .iter()
        .find(|t| t["name"] == "read_text_file")
        .expect("read_text_file");
    let text = read["calls"][0]["detail"]["text"].as_str().unwrap_or("");
    assert!(text.contains("hintcheck sample notes"), "{text}");
}

#[test]
fn server_memory_writes_are_seen_when_its_file_is_in_the_workspace() {
    let Some(js) = server_js("server-memory") else {
        return skip(
            "@modelcontextprotocol/server-memory is not installed (scripts/install-real-servers)",
        );
    };
    if !has_node() {
        return skip("node is not on PATH");
    }
    let out = run(
        &[
            "verify",
            "--format",
            "json",
            "--env",
            "MEMORY_FILE_PATH={workspace}/memory.jsonl",
            "--",
            "node",
            js.to_str().expect("utf8"),
        ],
        &[],
        Duration::from_secs(120),
    );
    assert!(
        matches!(out.code, 0 | 1),
        "exit {}: {}",
        out.code,
        out.stderr
    );
    let r = out.json();
    let tools = r["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 9);
    for t in tools {
        assert_eq!(
            t["verdicts"].as_array().map(Vec::len),
            Some(4),
            "{}",
            t["name"]
        );
    }
    let create = tools
        .iter()
        .find(|t| t["name"] == "create_entities")
        .expect("create_entities");
    assert_eq!(
        create["calls"][0]["observations"][0]["path"],
        "$WORKSPACE/memory.jsonl"
    );
    let read = tools
        .iter()
        .find(|t| t["name"] == "read_graph")
        .expect("read_graph");
    let ro = read["verdicts"]
        .as_array()
        .expect("v")
        .iter()
        .find(|v| v["hint"] == "readOnlyHint")
        .expect("ro");
    assert_eq!(ro["verdict"], "consistent");
}

#[test]
fn server_memory_default_file_is_seen_through_an_overlay() {
    let Some(js) = server_js("server-memory") else {
        return skip(
            "@modelcontextprotocol/server-memory is not installed (scripts/install-real-servers)",
        );
    };
    if !has_node() {
        return skip("node is not on PATH");
    }
    // Without MEMORY_FILE_PATH the server writes memory.jsonl next to its own code.
    let dist = js.parent().expect("dist").to_path_buf();
    let before: Vec<String> = crate::util::entries(&dist);
    let out = run(
        &[
            "verify",
            "--format",
            "json",
            "--overlay",
            dist.to_str().expect("utf8"),
            "--",
            "node",
            js.to_str().expect("utf8"),
        ],
        &[],
        Duration::from_secs(120),
    );
    assert!(
        matches!(out.code, 0 | 1),
        "exit {}: {}",
        out.code,
        out.stderr
    );
    let r = out.json();
    let create = r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "create_entities")
        .expect("tool");
    assert_eq!(
        create["calls"][0]["outcome"], "ok",
        "{}",
        create["calls"][0]
    );
    let path = create["calls"][0]["observations"][0]["path"]
        .as_str()
        .unwrap_or_default();
    assert!(path.ends_with("/dist/memory.jsonl"), "{path}");
    assert_eq!(
        crate::util::entries(&dist),
        before,
        "the host directory changed"
    );
}
