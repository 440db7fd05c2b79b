//! The GitHub Action (`action.yml` and its scripts under `action/`), run here the way the
//! runner runs them: the same environment variables, a throw-away working directory, and the
//! hintcheck binary under test.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use crate::util::{at, fake_server, hintcheck_bin, repo};

fn script(name: &str, cwd: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("action").join(name)).current_dir(cwd);
    for k in [
        "GITHUB_STEP_SUMMARY",
        "HINTCHECK_CONFIG",
        "NO_COLOR",
        "CLICOLOR_FORCE",
    ] {
        cmd.env_remove(k);
    }
    cmd.env("HINTCHECK_FAKE_SERVER", fake_server());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("bash runs")
}

fn text(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn the_action_verifies_the_demo_and_hands_its_exit_code_to_the_last_step() {
    let dir = tempfile::tempdir().expect("tmp");
    let outputs = dir.path().join("github-output");
    let summary = dir.path().join("step-summary.md");
    let args = format!("--scenario '{}'", at("scenarios/demo"));
    let bin = hintcheck_bin();
    let o = script(
        "run.sh",
        dir.path(),
        &[
            ("HINTCHECK_BIN", bin.to_str().expect("utf-8")),
            ("HINTCHECK_ARGS", &args),
            ("HINTCHECK_SARIF", "/dev/null/hintcheck.sarif"),
            ("GITHUB_OUTPUT", outputs.to_str().expect("utf-8")),
        ],
    );
    // The SARIF cannot be written: hintcheck says so (exit 3) and the step records it.
    assert!(o.status.success(), "{}", text(&o));
    let recorded = std::fs::read_to_string(&outputs).expect("outputs");
    assert!(recorded.contains("exit-code=3"), "{recorded}");
    assert!(!recorded.contains("sarif-file="), "{recorded}");
    assert!(text(&o).contains("cannot write"), "{}", text(&o));

    std::fs::write(&outputs, "").expect("reset");
    let o = script(
        "run.sh",
        dir.path(),
        &[
            ("HINTCHECK_BIN", bin.to_str().expect("utf-8")),
            ("HINTCHECK_ARGS", &args),
            ("HINTCHECK_SARIF", "reports/hintcheck.sarif"),
            ("HINTCHECK_FAIL_ON", "error"),
            ("GITHUB_OUTPUT", outputs.to_str().expect("utf-8")),
            ("GITHUB_STEP_SUMMARY", summary.to_str().expect("utf-8")),
        ],
    );
    assert!(
        o.status.success(),
        "the step never fails itself: {}",
        text(&o)
    );
    let recorded = std::fs::read_to_string(&outputs).expect("outputs");
    assert!(recorded.contains("exit-code=1\n"), "{recorded}");
    assert!(
        recorded.contains("sarif-file=reports/hintcheck.sarif\n"),
        "{recorded}"
    );
    let sarif: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("reports/hintcheck.sarif")).expect("sarif"),
    )
    .expect("json");
    assert_eq!(
        sarif["runs"][0]["results"]
            .as_array()
            .expect("results")
            .len(),
        8
    );
    assert!(dir.path().join("reports/hintcheck-tools.json").is_file());
    let md = std::fs::read_to_string(&summary).expect("summary");
    assert!(md.contains("## ❌ hintcheck: demo-notes"), "{md}");
    // Each finding is also a workflow annotation: the seven lies as errors.
    let stdout = String::from_utf8_lossy(&o.stdout);
    let errors = stdout.lines().filter(|l| l.starts_with("::error ")).count();
    assert_eq!(errors, 7, "{stdout}");
    // The counts and the JUnit file (the action's default, no config file saying otherwise).
    for line in [
        "contradicted=7\n",
        "tools=11\n",
        "junit-file=hintcheck.junit.xml\n",
    ] {
        assert!(recorded.contains(line), "{line} in {recorded}");
    }
    assert!(recorded.contains("unexercised="), "{recorded}");
    assert!(dir.path().join("hintcheck.junit.xml").is_file());
}

#[test]
fn the_action_passes_only_what_was_set_and_the_config_file_decides_the_rest() {
    let dir = tempfile::tempdir().expect("tmp");
    std::fs::create_dir(dir.path().join(".git")).expect("a repository root");
    std::fs::create_dir(dir.path().join(".config")).expect("mkdir");
    let demo = at("scenarios/demo/scenario.toml");
    let seed = at("scenarios/demo/workspace");
    std::fs::write(
        dir.path().join(".config/hintcheck.toml"),
        format!(
            "[fail]\non = \"never\"\n[report]\nsarif = \"reports/project.sarif\"\njunit = \"reports/project-junit.xml\"\nannotations = false\n[sandbox]\nlevel = \"best-effort\"\n# the demo's server\n[server]\nworkspace = \"{seed}\"\ncommand = [\"{}\", \"--scenario\", \"{demo}\"]\n",
            fake_server().display()
        ),
    )
    .expect("config");
    let outputs = dir.path().join("github-output");
    let bin = hintcheck_bin();
    let o = script(
        "run.sh",
        dir.path(),
        &[
            ("HINTCHECK_BIN", bin.to_str().expect("utf-8")),
            ("GITHUB_OUTPUT", outputs.to_str().expect("utf-8")),
            ("RUNNER_TEMP", dir.path().to_str().expect("utf-8")),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let recorded = std::fs::read_to_string(&outputs).expect("outputs");
    // `[fail] on = "never"` holds: the job is not failed by the action's own default.
    assert!(
        recorded.contains("exit-code=0\n"),
        "{recorded}\n{}",
        text(&o)
    );
    assert!(recorded.contains("contradicted=7\n"), "{recorded}");
    let project = dir.path().canonicalize().expect("canonical");
    assert!(
        recorded.contains(&format!(
            "sarif-file={}\n",
            project.join("reports/project.sarif").display()
        )),
        "{recorded}"
    );
    assert!(
        recorded.contains(&format!(
            "junit-file={}\n",
            project.join("reports/project-junit.xml").display()
        )),
        "{recorded}"
    );
    assert!(
        !dir.path().join("hintcheck.sarif").exists(),
        "no default SARIF beside the config's"
    );
    assert!(!dir.path().join("hintcheck.junit.xml").exists());
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        !stdout.contains("::error "),
        "annotations = false holds: {stdout}"
    );
    // The sandbox step reads the config's level too.
    let bin_dir = tempfile::tempdir().expect("tmp");
    let doctor = fake_doctor(bin_dir.path(), false);
    let o = script(
        "prepare-sandbox.sh",
        dir.path(),
        &[("HINTCHECK_BIN", doctor.to_str().expect("utf-8"))],
    );
    assert!(
        o.status.success(),
        "best-effort from the config: {}",
        text(&o)
    );
    // An input set wins over the file.
    std::fs::write(&outputs, "").expect("reset");
    let o = script(
        "run.sh",
        dir.path(),
        &[
            ("HINTCHECK_BIN", bin.to_str().expect("utf-8")),
            ("GITHUB_OUTPUT", outputs.to_str().expect("utf-8")),
            ("HINTCHECK_FAIL_ON", "error"),
            ("HINTCHECK_SARIF", "input.sarif"),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let recorded = std::fs::read_to_string(&outputs).expect("outputs");
    assert!(recorded.contains("exit-code=1\n"), "{recorded}");
    assert!(recorded.contains("sarif-file=input.sarif\n"), "{recorded}");
}

#[test]
fn the_action_scans_a_list_of_servers_in_scan_mode() {
    let dir = tempfile::tempdir().expect("tmp");
    let outputs = dir.path().join("github-output");
    let summary = dir.path().join("summary.md");
    let targets = format!("{}\n{}", at("scenarios/demo"), at("scenarios/pagination"));
    let bin = hintcheck_bin();
    let o = script(
        "run.sh",
        dir.path(),
        &[
            ("HINTCHECK_BIN", bin.to_str().expect("utf-8")),
            ("HINTCHECK_SCAN", &targets),
            ("HINTCHECK_JOBS", "2"),
            ("GITHUB_OUTPUT", outputs.to_str().expect("utf-8")),
            ("GITHUB_STEP_SUMMARY", summary.to_str().expect("utf-8")),
            ("RUNNER_TEMP", dir.path().to_str().expect("utf-8")),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let recorded = std::fs::read_to_string(&outputs).expect("outputs");
    assert!(recorded.contains("exit-code=1\n"), "{recorded}");
    assert!(
        recorded.contains("results-file=hintcheck-scan.jsonl\n"),
        "{recorded}"
    );
    // The demo's seven and the pagination scenario's own.
    let contradicted: u32 = recorded
        .lines()
        .find_map(|l| l.strip_prefix("contradicted="))
        .and_then(|n| n.parse().ok())
        .expect("a count");
    assert!(contradicted > 7, "{recorded}");
    let lines = std::fs::read_to_string(dir.path().join("hintcheck-scan.jsonl")).expect("results");
    assert_eq!(lines.lines().count(), 2);
    let md = std::fs::read_to_string(&summary).expect("summary");
    assert!(md.contains("demo"), "{md}");
}

/// A stand-in for `hintcheck doctor` whose sandbox works once its fix ran.
fn fake_doctor(dir: &Path, fix_works: bool) -> std::path::PathBuf {
    let marker = dir.join("fixed");
    let available = if fix_works {
        format!("[ -e '{}' ] && ok=true || ok=false", marker.display())
    } else {
        "ok=false".to_string()
    };
    let body = format!(
        r#"#!/usr/bin/env bash
{available}
if [ "$*" = "doctor --format json" ]; then
  printf '{{"required_sandbox_available": %s, "level": "none", "checks": [{{"name": "apparmor userns restriction", "status": "degraded", "detail": "restricted", "fix": "touch '\''{marker}'\''"}}], "enforced": []}}' "$ok"
else
  echo "doctor text report"
fi
"#,
        marker = marker.display()
    );
    let path = dir.join("hintcheck");
    std::fs::write(&path, body).expect("write");
    let mut perms = std::fs::metadata(&path).expect("meta").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).expect("chmod");
    path
}

#[test]
fn preparing_the_sandbox_applies_the_doctors_fix_and_checks_again() {
    let dir = tempfile::tempdir().expect("tmp");
    let bin = fake_doctor(dir.path(), true);
    let o = script(
        "prepare-sandbox.sh",
        dir.path(),
        &[("HINTCHECK_BIN", bin.to_str().expect("utf-8"))],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(dir.path().join("fixed").exists(), "the fix ran");
    assert!(text(&o).contains("the sandbox works now"), "{}", text(&o));

    let dir = tempfile::tempdir().expect("tmp");
    let bin = fake_doctor(dir.path(), false);
    let o = script(
        "prepare-sandbox.sh",
        dir.path(),
        &[("HINTCHECK_BIN", bin.to_str().expect("utf-8"))],
    );
    assert_eq!(o.status.code(), Some(5), "{}", text(&o));
    assert!(
        text(&o).contains("::error title=hintcheck::"),
        "{}",
        text(&o)
    );
    let o = script(
        "prepare-sandbox.sh",
        dir.path(),
        &[
            ("HINTCHECK_BIN", bin.to_str().expect("utf-8")),
            ("HINTCHECK_SANDBOX", "best-effort"),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("::warning title=hintcheck::"),
        "{}",
        text(&o)
    );
}

#[test]
fn preparing_the_sandbox_on_this_machine_needs_no_fix() {
    let dir = tempfile::tempdir().expect("tmp");
    let bin = hintcheck_bin();
    let o = script(
        "prepare-sandbox.sh",
        dir.path(),
        &[("HINTCHECK_BIN", bin.to_str().expect("utf-8"))],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("the sandbox works on this runner"),
        "{}",
        text(&o)
    );
}

#[test]
fn action_yml_declares_what_it_uses_and_its_scripts_exist() {
    let yml = std::fs::read_to_string(repo().join("action.yml")).expect("action.yml");
    let declared: BTreeSet<String> = yml
        .split("\ninputs:\n")
        .nth(1)
        .and_then(|rest| rest.split("\noutputs:\n").next())
        .expect("an inputs section")
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.ends_with(':'))
        .map(|l| l.trim().trim_end_matches(':').to_string())
        .collect();
    let used: BTreeSet<String> = yml
        .match_indices("inputs.")
        .map(|(i, _)| {
            yml[i + "inputs.".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect()
        })
        .collect();
    assert!(!used.is_empty());
    let undeclared: Vec<&String> = used.difference(&declared).collect();
    assert!(
        undeclared.is_empty(),
        "used but not declared: {undeclared:?}"
    );
    for (i, _) in yml.match_indices("$GITHUB_ACTION_PATH/action/") {
        let name: String = yml[i + "$GITHUB_ACTION_PATH/action/".len()..]
            .chars()
            .take_while(|c| !matches!(c, '"' | '\'' | ' ' | '\n'))
            .collect();
        let path = repo().join("action").join(&name);
        let mode = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .permissions();
        assert!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o111 != 0,
            "{name} is executable"
        );
    }
    // The flags the scripts pass exist.
    let help = Command::new(hintcheck_bin())
        .args(["verify", "--help"])
        .output()
        .expect("help");
    let help = String::from_utf8_lossy(&help.stdout);
    let run = std::fs::read_to_string(repo().join("action/run.sh")).expect("run.sh");
    for flag in [
        "--sarif",
        "--junit",
        "--json",
        "--fail-on",
        "--config",
        "--baseline",
        "--sandbox",
        "--annotations",
    ] {
        assert!(run.contains(flag), "{flag} in run.sh");
        assert!(help.contains(flag), "{flag} in verify --help");
    }
}

#[test]
fn third_party_actions_are_pinned_by_commit_and_the_readme_links_nothing_outside() {
    let mut files = vec![repo().join("action.yml")];
    if let Ok(dir) = std::fs::read_dir(repo().join(".github/workflows")) {
        files.extend(dir.flatten().map(|e| e.path()));
    }
    assert!(
        files.len() >= 2,
        "action.yml and the release workflow: {files:?}"
    );
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read");
        for line in text.lines().filter(|l| {
            l.trim_start().starts_with("- uses:") || l.trim_start().starts_with("uses:")
        }) {
            let target = line.split("uses:").nth(1).expect("uses").trim();
            let target = target.split_whitespace().next().unwrap_or_default();
            if target.starts_with("./") {
                continue;
            }
            let (_, pin) = target
                .split_once('@')
                .unwrap_or_else(|| panic!("unpinned: {line}"));
            assert!(
                pin.len() == 40 && pin.chars().all(|c| c.is_ascii_hexdigit()),
                "{}: {line} is not pinned by commit",
                f.display()
            );
            assert!(
                line.contains("# v"),
                "{line}: say which version the commit is"
            );
        }
    }
    let release = std::fs::read_to_string(repo().join(".github/workflows/release.yml"))
        .expect("release workflow");
    for needed in [
        "x86_64",
        "aarch64",
        "unknown-linux-musl",
        "SHA256SUMS",
        "--locked",
    ] {
        assert!(release.contains(needed), "{needed} in the release workflow");
    }
    // The archive names the release makes are the ones the action's installer fetches.
    let install = std::fs::read_to_string(repo().join("action/install.sh")).expect("install.sh");
    assert!(release.contains("hintcheck-$version-${{ matrix.arch }}-linux.tar.gz"));
    assert!(install.contains("hintcheck-$want-$arch-linux.tar.gz"));
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README");
    for (i, _) in readme.match_indices("://") {
        let host: String = readme[i + 3..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '.' || *c == '-')
            .collect();
        assert!(
            host.ends_with(".test")
                || host == "localhost"
                || host.is_empty()
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback()),
            "the README links outside the repository: {host}"
        );
    }
    assert!(
        readme.find("## Install").expect("an install section")
            < readme.find("## Set-up commands").expect("set-up")
    );
    assert!(readme.contains("cargo install --locked --path ."));
}

#[test]
fn the_installer_takes_the_release_binary_only_when_its_checksum_matches() {
    let dir = tempfile::tempdir().expect("tmp");
    let version = std::fs::read_to_string(repo().join("Cargo.toml"))
        .expect("Cargo.toml")
        .lines()
        .find_map(|l| l.strip_prefix("version = \""))
        .map(|v| v.trim_end_matches('"').to_string())
        .expect("version");
    let arch = match std::env::consts::ARCH {
        "aarch64" => "aarch64",
        _ => "x86_64",
    };
    // A release as the workflow makes it: an archive holding `hintcheck`, and SHA256SUMS.
    let release = dir.path().join("releases").join(format!("v{version}"));
    std::fs::create_dir_all(&release).expect("mkdir");
    let staged = dir.path().join("staged");
    std::fs::create_dir(&staged).expect("mkdir");
    let fake = staged.join("hintcheck");
    std::fs::write(&fake, format!("#!/bin/sh\necho \"hintcheck {version}\"\n")).expect("write");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let asset = format!("hintcheck-{version}-{arch}-linux.tar.gz");
    let tar = Command::new("tar")
        .arg("-czf")
        .arg(release.join(&asset))
        .arg("-C")
        .arg(&staged)
        .arg("hintcheck")
        .status()
        .expect("tar");
    assert!(tar.success());
    let sums = Command::new("sha256sum")
        .arg(&asset)
        .current_dir(&release)
        .output()
        .expect("sha256sum");
    std::fs::write(release.join("SHA256SUMS"), &sums.stdout).expect("sums");
    let install = |cache: &Path| {
        let github_path = dir.path().join("github-path");
        let mut cmd = Command::new("bash");
        cmd.arg(repo().join("action/install.sh"))
            .current_dir(dir.path())
            // No hintcheck and no cargo on PATH: only the release can install it.
            .env("PATH", "/usr/bin:/bin")
            .env("CARGO", "/nonexistent/cargo")
            .env("GITHUB_ACTION_PATH", repo())
            .env("GITHUB_PATH", &github_path)
            .env("RUNNER_TOOL_CACHE", cache)
            .env("HINTCHECK_ACTION_REPOSITORY", "owner/hintcheck")
            .env(
                "HINTCHECK_RELEASE_BASE",
                format!("file://{}", dir.path().join("releases").display()),
            );
        (cmd.output().expect("bash"), github_path)
    };
    let cache = dir.path().join("cache");
    let (o, github_path) = install(&cache);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains(&format!("installed the release binary {asset}")),
        "{}",
        text(&o)
    );
    let bin = cache.join(format!("hintcheck-{version}/bin"));
    assert!(bin.join("hintcheck").is_file());
    assert!(
        std::fs::read_to_string(&github_path)
            .expect("GITHUB_PATH")
            .contains(&bin.display().to_string())
    );
    // A second run finds it in the (restored) cache.
    let (o, _) = install(&cache);
    assert!(text(&o).contains("restored from the cache"), "{}", text(&o));
    // A tampered archive is refused: with no cargo to build from source, the step fails.
    std::fs::write(release.join(&asset), b"not the archive").expect("tamper");
    let other = dir.path().join("other-cache");
    let (o, _) = install(&other);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("does not match its checksum"),
        "{}",
        text(&o)
    );
    assert!(
        !other
            .join(format!("hintcheck-{version}/bin/hintcheck"))
            .exists()
    );
}
