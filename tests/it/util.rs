//! Helpers shared by the integration tests: locating the binaries and running hintcheck with
//! a wall-clock limit, so that a hung server can never hang the test suite.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The repository root.
pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The hintcheck binary under test.
pub(crate) fn hintcheck_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hintcheck"))
}

/// The fake server, built next to hintcheck by `cargo test --workspace`.
pub(crate) fn fake_server() -> PathBuf {
    let p = hintcheck_bin().with_file_name("hintcheck-fake-server");
    assert!(
        p.is_file(),
        "{} is missing: run the tests with `cargo test --workspace`",
        p.display()
    );
    p
}

/// What a hintcheck run printed and returned.
pub(crate) struct Outcome {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Outcome {
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }
}

/// Runs hintcheck with `args`, extra environment and a wall-clock limit.
pub(crate) fn run(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Outcome {
    run_in(None, args, env, limit)
}

/// Runs hintcheck in directory `cwd` (default: the repository root). The caller's CI
/// environment (a step summary file, a config file, colour settings) does not leak in.
pub(crate) fn run_in(
    cwd: Option<&Path>,
    args: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> Outcome {
    let mut cmd = Command::new(hintcheck_bin());
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    for k in [
        "GITHUB_STEP_SUMMARY",
        "HINTCHECK_CONFIG",
        "NO_COLOR",
        "CLICOLOR_FORCE",
        "FORCE_COLOR",
    ] {
        cmd.env_remove(k);
    }
    cmd.args(args).env("HINTCHECK_FAKE_SERVER", fake_server());
    for (k, v) in env {
        cmd.env(k, v);
    }
    capture(cmd, limit, &format!("hintcheck {args:?}"))
}

/// Runs `cmd` with stdin closed, its output captured and a wall-clock limit.
pub(crate) fn capture(mut cmd: Command, limit: Duration, what: &str) -> Outcome {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = wait_within(&mut child, limit, what);
    Outcome {
        code: status.code().unwrap_or(-1),
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

/// The cache the tests install real servers into (inside the repository's target directory,
/// reachable by the sandbox's uid when the tests run as root).
pub(crate) fn cache() -> String {
    repo().join("target/hintcheck-cache").display().to_string()
}

/// Whether real servers can be installed here (npm, and a Python with venv); skips (with the
/// reason) when not.
pub(crate) fn installers_present() -> bool {
    let ok = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !ok("npm", &["--version"]) || !ok("node", &["--version"]) {
        skip("node and npm are not installed: the real servers cannot be set up");
        return false;
    }
    if !ok("python3", &["-c", "import venv, ensurepip"]) {
        skip("python3 with venv is not installed: the PyPI servers cannot be set up");
        return false;
    }
    true
}

/// Whether a skip must fail (CI sets HINTCHECK_REQUIRE_ALL=1).
pub(crate) fn skip(reason: &str) {
    if std::env::var("HINTCHECK_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("required test skipped: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
}

/// Pids of live processes whose command line contains `needle`.
pub(crate) fn processes_matching(needle: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| {
                    String::from_utf8_lossy(&b)
                        .replace('\0', " ")
                        .contains(needle)
                })
                .unwrap_or(false)
        })
        .filter(|pid| {
            // Zombies are already dead.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    s.rsplit(')')
                        .next()
                        .is_some_and(|r| !r.trim_start().starts_with('Z'))
                })
                .unwrap_or(false)
        })
        .collect()
}

/// A path inside the repository.
pub(crate) fn at(rel: &str) -> String {
    repo().join(rel).display().to_string()
}

/// Copies a directory tree (files and directories only).
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(e.file_name());
        if e.path().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).expect("copy");
        }
    }
}

/// Entries of a directory.
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The tool `name` of a JSON report.
pub(crate) fn report_tool<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tool {name} in the report"))
}

/// The verdict on `hint` of `tool` (a tool of a JSON report).
pub(crate) fn hint_verdict<'a>(tool: &'a serde_json::Value, hint: &str) -> &'a serde_json::Value {
    tool["verdicts"]
        .as_array()
        .expect("verdicts")
        .iter()
        .find(|v| v["hint"] == hint)
        .unwrap_or_else(|| panic!("{}: no verdict on {hint}", tool["name"]))
}

/// The descriptions of the observations outside every call in JSON report `r`, of `phase`
/// only when one is named (`"first-call"`, `"server-state"`).
pub(crate) fn out_of_window<'a>(r: &'a serde_json::Value, phase: Option<&str>) -> Vec<&'a str> {
    r["out_of_window"]
        .as_array()
        .expect("out_of_window")
        .iter()
        .filter(|p| phase.is_none_or(|phase| p["phase"] == phase))
        .filter_map(|p| p["description"].as_str())
        .collect()
}

/// The first evidence line of `hint`'s verdict on tool `name` in JSON report `r` ("" when none).
pub(crate) fn first_evidence(r: &serde_json::Value, name: &str, hint: &str) -> String {
    hint_verdict(report_tool(r, name), hint)["evidence"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The successful first call (of any attempt) of a tool of a JSON report.
pub(crate) fn first_success(tool: &serde_json::Value) -> &serde_json::Value {
    tool["calls"]
        .as_array()
        .expect("calls")
        .iter()
        .find(|c| c["number"] == 1 && c["outcome"] == "ok")
        .unwrap_or_else(|| panic!("{} never succeeded: {}", tool["name"], tool["calls"]))
}

/// Every tool of a JSON report has a verdict for each of the four hints.
pub(crate) fn assert_four_verdicts(r: &serde_json::Value) {
    for t in r["tools"].as_array().expect("tools") {
        assert_eq!(
            t["verdicts"].as_array().map(Vec::len),
            Some(4),
            "{}",
            t["name"]
        );
    }
}

/// Waits for `child` at most `limit` (killing it and failing the test after that, naming
/// `what`).
pub(crate) fn wait_within(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether every process whose command line holds `needle` is gone within `limit`.
pub(crate) fn gone_within(needle: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while !processes_matching(needle).is_empty() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

/// A JSON file, parsed (the test fails naming the file otherwise).
pub(crate) fn read_json(p: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Asserts that a JSON report is partial for a reason that mentions `why`.
pub(crate) fn assert_partial(report: &serde_json::Value, why: &str) {
    assert!(
        report["partial"].as_str().unwrap_or_default().contains(why),
        "partial: {}",
        report["partial"]
    );
}

/// Debian's Chromium (or another Chromium-family browser on PATH, or the one
/// `HINTCHECK_CHROMIUM` names); skips (with the reason) when there is none.
pub(crate) fn chromium() -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = std::env::var_os("HINTCHECK_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            ["chromium", "chromium-browser", "google-chrome"]
                .iter()
                .filter_map(|name| {
                    std::env::var_os("PATH").and_then(|path| {
                        std::env::split_paths(&path)
                            .map(|dir| dir.join(name))
                            .find(|p| p.is_file())
                    })
                }),
        )
        .collect();
    let found = candidates.into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        skip(
            "no Chromium (Debian's package chromium; .ci/run installs it): the HTML report cannot be checked in a browser",
        );
    }
    found
}

/// What a headless browser made of a local page: its DOM after parsing, and a screenshot.
pub(crate) struct Rendered {
    /// The serialized DOM (`--dump-dom`).
    pub dom: String,
    /// The screenshot's width and height, read from its PNG header.
    pub size: (u32, u32),
    /// The screenshot's length in bytes.
    pub png_bytes: usize,
}

/// Opens `page` in headless `browser` with no network (the flags that keep Chromium from
/// calling home), dumps its DOM and writes a full-width screenshot to `png`.
pub(crate) fn render_in_browser(browser: &Path, page: &Path, png: &Path) -> Rendered {
    let profile = tempfile::tempdir().expect("profile");
    let url = format!("file://{}", page.display());
    let browse = |extra: &[&str]| {
        let mut cmd = Command::new(browser);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1280,1800",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(&url);
        let out = cmd.output().expect("browser");
        assert!(
            out.status.success(),
            "{}: {}",
            browser.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let dom = String::from_utf8_lossy(&browse(&["--dump-dom"]).stdout).into_owned();
    browse(&[&format!("--screenshot={}", png.display())]);
    let bytes = std::fs::read(png).expect("screenshot");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    Rendered {
        dom,
        size: (be(16), be(20)),
        png_bytes: bytes.len(),
    }
}

/// A page that loads nothing from anywhere: no scripts, no external references, and a policy
/// that forbids them should a server's text ever get through.
pub(crate) fn assert_self_contained(page: &str) {
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("Content-Security-Policy"));
    assert!(!page.contains("<script"), "no scripts");
    assert!(!page.contains(" src="), "no external assets");
    for (at, _) in page.match_indices("href=\"") {
        assert!(
            page[at + 6..].starts_with('#'),
            "a link out of the page: {}",
            &page[at..(at + 80).min(page.len())]
        );
    }
}
