//! Real MCP servers from npm and PyPI, installed by the `[setup]` of their scenarios
//! (`scenarios/real-*`, the same pinned versions) into `target/hintcheck-cache`. Without npm or
//! a Python with venv the tests skip with the reason; with HINTCHECK_REQUIRE_ALL=1 a skip
//! fails. No argument is written by hand: the coverage
//! asserted here is what synthesis, the seeded workspace and the attempts reach alone.

use std::path::PathBuf;
use std::time::Duration;

use hintcheck::fleet::setup::Installed;
use hintcheck::scenario::Scenario;

use crate::util::{
    assert_four_verdicts, cache, first_success, hint_verdict, installers_present, repo,
    report_tool, run,
};

/// What the scenario `scenarios/<name>` installs (its `[setup]`, into the tests' cache), when
/// npm and Python are there; otherwise the test is skipped with the reason.
pub(crate) fn installed(scenario: &str) -> Option<Installed> {
    if !installers_present() {
        return None;
    }
    let s = Scenario::load(&repo().join("scenarios").join(scenario)).expect("scenario");
    installed_packages(&s.setup, scenario)
}

/// What `setup` installs into the tests' cache (`what` names it in a failure); `None` (the
/// test skipped with the reason) without npm or Python.
pub(crate) fn installed_packages(
    setup: &hintcheck::fleet::setup::SetupSection,
    what: &str,
) -> Option<Installed> {
    if !installers_present() {
        return None;
    }
    let mut limits = hintcheck::fleet::setup::SetupLimits::within(
        hintcheck::fleet::setup::DEFAULT_SETUP_TIMEOUT,
        false,
    );
    // The installers' sandbox re-executes hintcheck, which this test binary is not.
    limits.confinement.exe = Some(crate::util::hintcheck_bin());
    match hintcheck::fleet::setup::ensure(setup, std::path::Path::new(&cache()), &limits) {
        Ok(i) => Some(i),
        Err(e) => panic!("[setup] of {what}: {e}"),
    }
}

/// The entry point of an npm reference server, installed by its scenario's `[setup]`.
pub(crate) fn node_server(package: &str) -> Option<PathBuf> {
    let scenario = format!("real-{}", package.trim_start_matches("server-"));
    let p = installed(&scenario)?
        .npm?
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(p.is_file(), "{} was not installed", p.display());
    Some(p)
}

/// The console script of a PyPI server, installed by its scenario's `[setup]`.
fn python_server(script: &str) -> Option<PathBuf> {
    let scenario = format!("real-{}", script.trim_start_matches("mcp-server-"));
    let installed = installed(&scenario)?;
    let venv = installed.venv?;
    PYTHON.get_or_init(|| venv.join("bin/python"));
    let p = venv.join("bin").join(script);
    assert!(p.is_file(), "{} was not installed", p.display());
    Some(p)
}

/// The Python of the PyPI servers' environments (all built from the same interpreter).
static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Whether uid 65534 (the sandbox's uid when the tests run as root) can reach `path`: every
/// directory on the way searchable by others, the file itself readable and executable.
fn reachable_by_others(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Ok(real) = std::fs::canonicalize(path) else {
        return false;
    };
    let mode = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.permissions().mode());
    real.ancestors()
        .skip(1)
        .all(|d| mode(d).is_ok_and(|m| m & 0o001 != 0))
        && mode(&real).is_ok_and(|m| m & 0o005 == 0o005)
}

/// `--run-as 0` when the tests run as root and the interpreter of the PyPI servers lives where
/// uid 65534 cannot reach it (a Python under /root); said on stderr.
fn run_as_for_python() -> Vec<&'static str> {
    let Some(python) = PYTHON.get() else {
        return Vec::new();
    };
    if rustix::process::geteuid().is_root() && !reachable_by_others(python) {
        eprintln!(
            "NOTE: {} is not reachable by uid 65534; running the server with --run-as 0",
            python.display()
        );
        vec!["--run-as", "0"]
    } else {
        Vec::new()
    }
}

/// Runs `verify --format json` on a server and returns the report, after checking the exit.
fn verify_json(command: &[&str]) -> serde_json::Value {
    verify_json_with(&[], command)
}

/// Like [`verify_json`], with extra options before the command.
fn verify_json_with(options: &[&str], command: &[&str]) -> serde_json::Value {
    let mut argv = vec!["verify", "--format", "json"];
    argv.extend_from_slice(options);
    argv.push("--");
    argv.extend_from_slice(command);
    let out = run(&argv, &[], Duration::from_secs(120));
    assert!(
        matches!(out.code, 0 | 1),
        "exit {}: {}",
        out.code,
        out.stderr
    );
    out.json()
}

/// Asserts that at least 90% of the listed tools got a successful call, naming the others.
fn assert_ninety_percent(r: &serde_json::Value) {
    let tools = r["tools"].as_array().expect("tools");
    let failed: Vec<String> = tools
        .iter()
        .filter(|t| {
            !t["calls"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["outcome"] == "ok"))
        })
        .map(|t| format!("{} ({})", t["name"], t["calls"][0]["detail"]))
        .collect();
    let ok = tools.len() - failed.len();
    assert!(
        ok * 10 >= tools.len() * 9,
        "{ok} of {} tools succeeded; not: {failed:?}",
        tools.len()
    );
}

#[test]
fn server_filesystem_limited_to_a_subdirectory_is_steered_by_its_errors() {
    let Some(js) = node_server("server-filesystem") else {
        return;
    };
    // The server allows only docs/; the first path tried is outside, and its error names the
    // allowed directory.
    let r = verify_json(&["node", js.to_str().expect("utf8"), "{workspace}/docs"]);
    assert_ninety_percent(&r);
    let write = report_tool(&r, "write_file");
    let ok = first_success(write);
    let words =
        hintcheck::workspace::vocab::Vocabulary::of(r["settings"]["seed"].as_u64().expect("seed"));
    assert!(
        ok["arguments"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with(&format!("/workspace/docs/{}.txt", words.new_stem()))),
        "{ok}"
    );
    assert_eq!(ok["observations"][0]["kind"], "created", "{ok}");
    // Once learned, later tools aim inside docs/ from their first attempt.
    let later = report_tool(&r, "get_file_info");
    assert_eq!(later["calls"][0]["attempt"], 1);
    assert_eq!(later["calls"][0]["outcome"], "ok", "{}", later["calls"][0]);
}

#[test]
fn server_everything_reaches_ninety_percent_of_its_tools() {
    let Some(js) = node_server("server-everything") else {
        return;
    };
    let r = verify_json(&["node", js.to_str().expect("utf8")]);
    assert_ninety_percent(&r);
    // The tool whose default URL points elsewhere (an https:// address on the internet)
    // succeeds at once: HTTPS completes inside the sandbox with the run's own certificate
    // authority, and the request inside TLS is observed.
    let gzip = report_tool(&r, "gzip-file-as-resource");
    let calls = gzip["calls"].as_array().expect("calls");
    let worked = first_success(gzip);
    let seen: Vec<String> = worked["observations"]
        .as_array()
        .expect("observations")
        .iter()
        .map(|o| o["description"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(
        seen.iter()
            .any(|d| d.contains("TLS ClientHello, SNI ") && d.contains("; HTTP \"GET /")),
        "{seen:?}"
    );
    // The repeat reuses exactly the arguments that worked.
    let repeat = calls.iter().find(|c| c["number"] == 2).expect("repeat");
    assert_eq!(repeat["attempt"], worked["attempt"]);
}

#[test]
fn mcp_server_git_works_on_the_seeded_repository() {
    let Some(git) = python_server("mcp-server-git") else {
        return;
    };
    let r = verify_json_with(&run_as_for_python(), &[git.to_str().expect("utf8")]);
    assert_ninety_percent(&r);
    assert!(
        r["seeded"]
            .as_array()
            .expect("seeded")
            .iter()
            .any(|s| s.as_str().is_some_and(|s| s.starts_with(".git"))),
        "{}",
        r["seeded"]
    );
    let tools = r["tools"].as_array().expect("tools");
    let tool = |name: &str| report_tool(&r, name);
    let status = tool("git_status");
    assert!(
        status["calls"][0]["detail"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("On branch main")),
        "{}",
        status["calls"][0]
    );
    // `git status` on the fresh repository leaves nothing changed (no stale index to
    // refresh), but takes and releases .git/index.lock: a minor contradiction, seen by change
    // notification. Nothing else is contradicted, and the sandbox's own host name is not an
    // external destination.
    for t in tools {
        for v in t["verdicts"].as_array().expect("verdicts") {
            if v["verdict"] != "contradicted" {
                continue;
            }
            assert_eq!(
                (t["name"].as_str(), v["hint"].as_str()),
                (Some("git_status"), Some("readOnlyHint")),
                "{v}"
            );
            assert!(
                v["evidence"]
                    .as_array()
                    .expect("evidence")
                    .iter()
                    .all(|e| e["text"].as_str().is_some_and(
                        |t| t.starts_with("created and removed $WORKSPACE/.git/index.lock")
                    )),
                "{v}"
            );
        }
    }
    assert!(
        r["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["hint"].is_string())
            .all(|f| f["severity"] == "warning"),
        "{}",
        r["findings"]
    );
    assert_eq!(r["exit_code"], 0, "{}", r["exit_reason"]);
    // Tools that add run before tools that change: the untracked draft is staged, then
    // committed.
    assert_eq!(tool("git_add")["calls"][0]["outcome"], "ok");
    let commit = &tool("git_commit")["calls"][0];
    assert_eq!(commit["outcome"], "ok", "{commit}");
    let branch = tool("git_create_branch");
    let words =
        hintcheck::workspace::vocab::Vocabulary::of(r["settings"]["seed"].as_u64().expect("seed"));
    assert!(
        branch["calls"][0]["observations"]
            .as_array()
            .expect("observations")
            .iter()
            .any(|o| o["path"]
                .as_str()
                .is_some_and(|p| p.contains(&format!("refs/heads/{}", words.branch)))),
        "{}",
        branch["calls"][0]
    );
}

#[test]
fn mcp_server_time_answers_with_described_examples() {
    let Some(time) = python_server("mcp-server-time") else {
        return;
    };
    let r = verify_json_with(&run_as_for_python(), &[time.to_str().expect("utf8")]);
    assert_ninety_percent(&r);
    let convert = report_tool(&r, "convert_time");
    assert_eq!(convert["arguments"]["time"], "12:30");
    assert!(
        convert["arguments"]["source_timezone"]
            .as_str()
            .is_some_and(|z| z.contains('/')),
        "{}",
        convert["arguments"]
    );
}

#[test]
fn server_filesystem_gets_a_verdict_for_every_tool() {
    let Some(js) = node_server("server-filesystem") else {
        return;
    };
    let r = verify_json(&["node", js.to_str().expect("utf8"), "{workspace}"]);
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
    let create = report_tool(&r, "create_directory");
    assert_eq!(create["calls"][0]["outcome"], "ok");
    assert_eq!(create["calls"][0]["observations"][0]["kind"], "created");
    // Paths chosen from the seeded workspace let (nearly) every tool do its real work.
    let succeeded = r["coverage"]["tools_succeeded"].as_u64().expect("n");
    assert!(succeeded + 1 >= tools.len() as u64, "{succeeded} succeeded");
    let edit = report_tool(&r, "edit_file");
    assert_eq!(edit["calls"][0]["outcome"], "ok", "{}", edit["calls"][0]);
    assert_eq!(edit["calls"][0]["observations"][0]["kind"], "overwritten");
    let read = report_tool(&r, "read_text_file");
    let text = read["calls"][0]["detail"]["text"].as_str().unwrap_or("");
    let words =
        hintcheck::workspace::vocab::Vocabulary::of(r["settings"]["seed"].as_u64().expect("seed"));
    assert!(text.contains(&format!("{} draft", words.title)), "{text}");
    // Every write tool shows its write.
    for name in ["write_file", "edit_file", "create_directory", "move_file"] {
        let t = tools.iter().find(|t| t["name"] == name).expect(name);
        let first = first_success(t);
        assert!(
            first["observations"]
                .as_array()
                .is_some_and(|o| o.iter().any(|o| o["type"] == "file")),
            "{name}: {first}"
        );
    }
}

#[test]
fn server_memory_writes_are_seen_when_its_file_is_in_the_workspace() {
    let Some(js) = node_server("server-memory") else {
        return;
    };
    let r = verify_json_with(
        &["--env", "MEMORY_FILE_PATH={workspace}/memory.jsonl"],
        &["node", js.to_str().expect("utf8")],
    );
    let tools = r["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 9);
    assert_four_verdicts(&r);
    let create = report_tool(&r, "create_entities");
    assert_eq!(
        create["calls"][0]["observations"][0]["path"],
        "$WORKSPACE/memory.jsonl"
    );
    let read = report_tool(&r, "read_graph");
    let ro = hint_verdict(read, "readOnlyHint");
    assert_eq!(ro["verdict"], "consistent");
    // Adding an observation rewrites the JSON Lines file, but only adds to it.
    let add = report_tool(&r, "add_observations");
    let first = first_success(add);
    assert_eq!(first["observations"][0]["kind"], "extended", "{first}");
    let destructive = hint_verdict(add, "destructiveHint");
    assert_ne!(destructive["verdict"], "contradicted", "{destructive}");
}

#[test]
fn server_memory_default_file_is_seen_through_an_overlay() {
    let Some(js) = node_server("server-memory") else {
        return;
    };
    // Without MEMORY_FILE_PATH the server writes memory.jsonl next to its own code.
    let dist = js.parent().expect("dist").to_path_buf();
    let before: Vec<String> = crate::util::entries(&dist);
    let r = verify_json_with(
        &["--overlay", dist.to_str().expect("utf8")],
        &["node", js.to_str().expect("utf8")],
    );
    let create = report_tool(&r, "create_entities");
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
