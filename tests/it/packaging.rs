//! The packages for Python and Node users, built here by `packaging/build.sh` (maturin from
//! PyPI into a venv of its own; the release profile, which `.ci/run`'s install step has
//! built), installed from their files into a fresh venv and a fresh npm prefix, and
//! `hintcheck demo` run from each as a user would, from an empty directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::demo::assert_demo_lies;
use crate::util::{capture, installers_present, repo};

/// The maturin the packages are built with.
const MATURIN: &str = "maturin==1.16.0";

/// Runs `program args` (no fake server in its environment), failing with its output.
fn must(program: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) {
    let mut cmd = Command::new(program);
    cmd.args(args).envs(env.iter().copied());
    let o = capture(cmd, limit, &format!("{} {args:?}", program.display()));
    assert_eq!(
        o.code,
        0,
        "{} {args:?}\nstdout:\n{}\nstderr:\n{}",
        program.display(),
        o.stdout,
        o.stderr
    );
}

/// `hintcheck demo --format json` through `program`, from an empty directory.
fn demo_through(program: &Path) {
    let empty = tempfile::tempdir().expect("tmp");
    let mut cmd = Command::new(program);
    cmd.args(["demo", "--format", "json"])
        .current_dir(empty.path())
        .env_remove("HINTCHECK_FAKE_SERVER")
        .env_remove("HINTCHECK_CONFIG")
        .env_remove("GITHUB_STEP_SUMMARY");
    let o = capture(
        cmd,
        Duration::from_secs(120),
        &program.display().to_string(),
    );
    assert_demo_lies(&o, program);
    assert_eq!(
        o.json()["server"]["command"][1],
        "fake-server",
        "the installed binary plays the demo server"
    );
}

#[test]
fn the_pypi_and_npm_packages_install_and_run_the_demo() {
    if !installers_present() {
        return;
    }
    let work: PathBuf = repo().join("target/hintcheck-packaging");
    let tools = work.join("maturin-venv");
    if !tools.join("bin/maturin").is_file() {
        must(
            Path::new("python3"),
            &["-m", "venv", &tools.display().to_string()],
            &[],
            Duration::from_secs(120),
        );
        must(
            &tools.join("bin/pip"),
            &["install", "--quiet", MATURIN],
            &[],
            Duration::from_secs(300),
        );
    }
    let dist = work.join("dist");
    let _ = std::fs::remove_dir_all(&dist);
    let maturin = tools.join("bin/maturin").display().to_string();
    must(
        &repo().join("packaging/build.sh"),
        &["--profile", "release", "--out", &dist.display().to_string()],
        &[("MATURIN", maturin.as_str())],
        Duration::from_secs(1500),
    );
    let found = |dir: &str, suffix: &str| -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = std::fs::read_dir(dist.join(dir))
            .expect("dist")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.display().to_string().ends_with(suffix))
            .collect();
        out.sort();
        out
    };
    // A bin wheel installable on manylinux systems, and the two npm packages.
    let wheels = found("pypi", ".whl");
    assert_eq!(wheels.len(), 1, "{wheels:?}");
    let wheel = wheels[0].display().to_string();
    assert!(
        wheel.contains("-py3-none-manylinux_") && wheel.contains(std::env::consts::ARCH),
        "{wheel}"
    );
    let tarballs = found("npm", ".tgz");
    assert_eq!(tarballs.len(), 2, "{tarballs:?}");

    // pip: a fresh venv, the wheel from its file.
    let installs = tempfile::tempdir_in(&work).expect("tmp");
    let venv = installs.path().join("venv");
    must(
        Path::new("python3"),
        &["-m", "venv", &venv.display().to_string()],
        &[],
        Duration::from_secs(120),
    );
    must(
        &venv.join("bin/pip"),
        &["install", "--quiet", "--no-index", &wheel],
        &[],
        Duration::from_secs(300),
    );
    demo_through(&venv.join("bin/hintcheck"));

    // npm: a fresh prefix, both packages from their files (the other platform's package,
    // which is not among them, is optional and skipped).
    let prefix = installs.path().join("npm");
    std::fs::create_dir_all(&prefix).expect("prefix");
    let mut args = vec![
        "install".to_string(),
        "--no-audit".into(),
        "--no-fund".into(),
        "--prefix".into(),
        prefix.display().to_string(),
    ];
    args.extend(tarballs.iter().map(|t| t.display().to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    must(Path::new("npm"), &args, &[], Duration::from_secs(300));
    demo_through(&prefix.join("node_modules/.bin/hintcheck"));
}
