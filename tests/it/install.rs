//! Attacks on installs (issue 29, item 1), each as a hostile package author would try them:
//! `[setup]` items and registry documents that name a local source tree, an option or a
//! tarball instead of a registry release; a wheel whose dependency is a direct URL to a source
//! distribution; a package published only as source; an npm package with install scripts and
//! one with a git dependency. The packages are made by the test and served by a registry on
//! loopback (`tests/fixtures/install-attacks/registry.py`; nothing is fetched). Every package
//! that runs code tries to leave a marker on the host and to read a secret of the invoking user
//! (outside /home): the marker must never appear, and what code runs with
//! `--allow-source-builds` must have seen neither the secret nor the user's environment. Run as
//! root and as an unprivileged user.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::sandbox::{As, is_root, prefix, run_as_with_env, stage};
use crate::util::{Outcome, repo, run_in};

/// A directory every uid may use, under the sandbox tests' stage.
fn work_dir(name: &str) -> PathBuf {
    let d = stage().dir.join(format!("install-{name}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    d
}

/// The registry on loopback, ended when dropped.
struct Registry {
    child: Child,
    url: String,
}

impl Registry {
    fn start(dir: &Path, marker: &Path, secret: &Path) -> Registry {
        let port_file = dir.join("port");
        let child = Command::new("python3")
            .arg(repo().join("tests/fixtures/install-attacks/registry.py"))
            .args([dir, &port_file, marker, secret])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 runs the test registry");
        let deadline = Instant::now() + Duration::from_secs(20);
        let port = loop {
            if let Some(p) = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|p| p.trim().parse::<u16>().ok())
            {
                break p;
            }
            assert!(Instant::now() < deadline, "the test registry did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        Registry {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// The environment that points pip and npm at this registry only.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("PIP_INDEX_URL", format!("{}/simple/", self.url)),
            ("npm_config_registry", format!("{}/", self.url)),
        ]
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A file of the invoking user outside /home and /tmp that no server or installer may read:
/// mode 0600 and the user's own when hintcheck runs unprivileged (only Landlock stands in the
/// way), world-readable when it runs as root (its servers and installers have uids of their
/// own, so again only Landlock stands in the way).
struct Secret {
    dir: PathBuf,
    path: PathBuf,
    text: String,
}

impl Secret {
    fn plant(who: As) -> Secret {
        static PLANTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = PLANTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("hintcheck-it-secret-{}-{n}", std::process::id());
        let dir = if is_root() {
            PathBuf::from("/var/lib").join(name)
        } else {
            repo().join("target").join(name)
        };
        std::fs::create_dir_all(&dir).expect("mkdir secret dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let text = format!("secret-{}-{}", std::process::id(), line!());
        let path = dir.join(format!("secret-{who:?}"));
        std::fs::write(&path, format!("{text}\n")).expect("write secret");
        let mode = if who == As::Root { 0o644 } else { 0o600 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        if who == As::Unprivileged && is_root() {
            std::os::unix::fs::chown(&path, Some(65534), Some(65534)).expect("chown");
        }
        Secret { dir, path, text }
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        let _ = std::fs::remove_dir_all(self.dir.join("cache"));
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A scenario directory with `[setup]` and a server command.
fn scenario(dir: &Path, name: &str, setup: &str, command: &str) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::write(
        d.join("scenario.toml"),
        format!("[setup]\n{setup}\n\n[server]\ncommand = {command}\n"),
    )
    .expect("write scenario");
    for p in [&d, &d.join("scenario.toml")] {
        let mode = if p.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    d
}

const PYTHON_SERVER: &str = r#"["{venv}/bin/python", "-c", "pass"]"#;
const NODE_SERVER: &str = r#"["node", "-e", "0"]"#;

/// `hintcheck verify --scenario DIR` as `who`, with the registry's environment, a cache of
/// its own and a variable that must not reach any installer.
fn verify(who: As, dir: &Path, scenario: &Path, registry: &Registry, extra: &[&str]) -> Outcome {
    let prefix = prefix(who, false).expect("prefix");
    let mut args = vec![
        "verify".to_string(),
        "--scenario".into(),
        scenario.display().to_string(),
        "--no-progress".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let mut env = registry.env();
    env.push(("HINTCHECK_CACHE", dir.join("cache").display().to_string()));
    env.push(("HINTCHECK_IT_TOKEN", "token-of-the-invoking-user".into()));
    run_as_with_env(&prefix, &args, &env, Duration::from_secs(240))
}

/// What the package code that ran in the installers' sandbox recorded, from the package it
/// built.
fn seen_by(dir: &Path, package: &str) -> String {
    let venvs = dir.join("cache/venv");
    for venv in std::fs::read_dir(&venvs).expect("venvs").flatten() {
        let Ok(lib) = std::fs::read_dir(venv.path().join("lib")) else {
            continue;
        };
        for python in lib.flatten() {
            let f = python
                .path()
                .join("site-packages")
                .join(format!("{package}_seen.txt"));
            if let Ok(text) = std::fs::read_to_string(&f) {
                return text;
            }
        }
    }
    panic!("{package} was not installed under {}", venvs.display());
}

fn usable(who: As) -> bool {
    if prefix(who, false).is_none() {
        return false;
    }
    crate::util::installers_present()
}

/// Installs that would run package code are refused; what installs runs no script; nothing
/// lands on the host.
fn no_package_code_runs(who: As) {
    if !usable(who) {
        return;
    }
    let dir = work_dir(&format!("refused-{who:?}"));
    let marker = dir.join("MARKER");
    let secret = Secret::plant(who);
    let registry = Registry::start(&dir, &marker, &secret.path);
    // A wheel whose dependency is a direct URL to a source distribution: pip would build it.
    let s = scenario(&dir, "urldep", r#"pip = ["urldep==1.0"]"#, PYTHON_SERVER);
    let o = verify(who, &dir, &s, &registry, &[]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("pip install urldep==1.0 would run package code")
            && o.stderr.contains("Getting requirements to build")
            && o.stderr.contains("--allow-source-builds"),
        "{}",
        o.stderr
    );
    // Published only as source: pip finds nothing it may install.
    let s = scenario(
        &dir,
        "evilsdist",
        r#"pip = ["evilsdist==1.0"]"#,
        PYTHON_SERVER,
    );
    let o = verify(who, &dir, &s, &registry, &[]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(
        o.stderr.contains("No matching distribution"),
        "{}",
        o.stderr
    );
    // npm: install scripts never run; a git dependency's git never starts.
    let s = scenario(&dir, "scripted", r#"npm = ["scripted@1.0.0"]"#, NODE_SERVER);
    let o = verify(who, &dir, &s, &registry, &[]);
    assert!(!o.stderr.contains("[setup]"), "installed: {}", o.stderr);
    let s = scenario(&dir, "gitdep", r#"npm = ["gitdep@1.0.0"]"#, NODE_SERVER);
    let o = verify(who, &dir, &s, &registry, &[]);
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("npm install gitdep@1.0.0 would run package code")
            && o.stderr.contains("spawn EPERM"),
        "{}",
        o.stderr
    );
    assert!(!marker.exists(), "package code wrote on the host");
    // A honest wheel installs (and its files are root's again after a root run).
    let s = scenario(&dir, "goodpkg", r#"pip = ["goodpkg==1.0"]"#, PYTHON_SERVER);
    let o = verify(who, &dir, &s, &registry, &[]);
    assert!(!o.stderr.contains("[setup]"), "installed: {}", o.stderr);
}

as_root_and_unprivileged!(
    installs_run_no_package_code_as_root,
    installs_run_no_package_code_unprivileged,
    no_package_code_runs
);

/// With `--allow-source-builds` a source build runs, inside the installers' sandbox: it cannot
/// write on the host, read the user's files or see the user's environment.
fn source_builds_run_confined(who: As) {
    if !usable(who) {
        return;
    }
    let dir = work_dir(&format!("built-{who:?}"));
    let marker = dir.join("MARKER");
    let secret = Secret::plant(who);
    let registry = Registry::start(&dir, &marker, &secret.path);
    for package in ["evilsdist", "urldep"] {
        let s = scenario(
            &dir,
            package,
            &format!("pip = [\"{package}==1.0\"]"),
            PYTHON_SERVER,
        );
        let o = verify(who, &dir, &s, &registry, &["--allow-source-builds"]);
        assert!(!o.stderr.contains("[setup]"), "installed: {}", o.stderr);
    }
    for package in ["evilsdist", "evildep"] {
        let seen = seen_by(&dir, package);
        assert!(seen.contains("marker refused"), "{package}: {seen}");
        assert!(seen.contains("secret refused"), "{package}: {seen}");
        assert!(
            !seen.contains(&secret.text),
            "{package} read the secret: {seen}"
        );
        assert!(seen.contains("token=(none)"), "{package}: {seen}");
    }
    assert!(!marker.exists(), "a source build wrote on the host");
    // Without the installers' sandbox, a source build is refused, not run on the host (a
    // cache of its own: the package is installed in the other one).
    let fresh = work_dir(&format!("unconfined-{who:?}"));
    let s = scenario(
        &fresh,
        "unconfined",
        r#"pip = ["evilsdist==1.0"]"#,
        PYTHON_SERVER,
    );
    let o = verify(
        who,
        &fresh,
        &s,
        &registry,
        &["--allow-source-builds", "--no-sandbox"],
    );
    assert_eq!(o.code, 3, "{}", o.stderr);
    assert!(
        o.stderr.contains("only inside the installers' sandbox"),
        "{}",
        o.stderr
    );
    assert!(!marker.exists(), "a source build wrote on the host");
    if is_root() {
        // Installed under a uid of their own, the files are root's again.
        let venvs = dir.join("cache/venv");
        for venv in std::fs::read_dir(&venvs).expect("venvs").flatten() {
            use std::os::unix::fs::MetadataExt;
            if !venv.path().is_dir() {
                continue;
            }
            let owner = std::fs::symlink_metadata(venv.path().join("pyvenv.cfg"))
                .expect("pyvenv.cfg")
                .uid();
            let expected = if who == As::Root { 0 } else { 65534 };
            assert_eq!(owner, expected, "{}", venv.path().display());
        }
    }
}

as_root_and_unprivileged!(
    source_builds_run_confined_as_root,
    source_builds_run_confined_unprivileged,
    source_builds_run_confined
);

/// A working directory holding `pkgs/src`, a source tree whose `setup.py` leaves the returned
/// marker when something builds it.
fn local_source_tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tmp");
    let marker = dir.path().join("MARKER");
    let src = dir.path().join("pkgs/src");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::write(
        src.join("setup.py"),
        format!(
            "open({:?}, 'w').write('built')\n",
            marker.display().to_string()
        ),
    )
    .expect("setup.py");
    (dir, marker)
}

/// Items that are not a registry name and version never reach an installer: each is refused
/// before anything runs, naming the item (a source tree pip would build from the working
/// directory, options pip would read, a tarball npm would install).
#[test]
fn setup_items_that_are_not_a_name_and_version_are_refused() {
    let (dir, marker) = local_source_tree();
    std::fs::write(dir.path().join("x-1.0.0.tgz"), "not a tarball").expect("tgz");
    let cases = [
        ("pip", "pkgs/src==1"),
        ("pip", "--no-binary=evilsdist,x==1"),
        ("pip", "-f /tmp==1"),
        ("pip", "./pkgs/src==1"),
        ("pip", "x @ file:///tmp/x.tar.gz"),
        ("npm", "x@1.0.0.tgz"),
        ("npm", "x@file:x-1.0.0.tgz"),
        ("npm", "--registry=http://evil.test/@1.0.0"),
    ];
    for (key, item) in cases {
        let s = scenario(
            dir.path(),
            &format!("case-{}", item.len()),
            &format!("{key} = [{item:?}]"),
            NODE_SERVER,
        );
        let o = run_in(
            Some(dir.path()),
            &[
                "verify",
                "--scenario",
                &s.display().to_string(),
                "--no-progress",
            ],
            &[(
                "HINTCHECK_CACHE",
                &dir.path().join("cache").display().to_string(),
            )],
            Duration::from_secs(60),
        );
        assert_eq!(o.code, 2, "{item}: {}", o.stderr);
        assert!(
            o.stderr.contains(&format!("{item:?}")),
            "{item}: {}",
            o.stderr
        );
        assert!(
            !dir.path().join("cache").exists(),
            "{item}: something was installed"
        );
    }
    assert!(!marker.exists(), "a local source tree was built");
}

/// A registry document whose PyPI identifier is a relative path, or whose npm version is a
/// tarball, is a skipped line with the reason: nothing is installed from the scan's working
/// directory.
#[test]
fn registry_identifiers_that_are_paths_are_skipped() {
    let (dir, marker) = local_source_tree();
    let page = serde_json::json!({"servers": [
        {"server": {"name": "io.example/path", "version": "1", "packages": [
            {"registryType": "pypi", "identifier": "pkgs/src", "version": "1",
             "transport": {"type": "stdio"}}]}},
        {"server": {"name": "io.example/tarball", "version": "1", "packages": [
            {"registryType": "npm", "identifier": "x", "version": "1.0.0.tgz",
             "transport": {"type": "stdio"}}]}},
    ]});
    let file = dir.path().join("page.json");
    std::fs::write(&file, page.to_string()).expect("page");
    let cache = dir.path().join("cache");
    let o = run_in(
        Some(dir.path()),
        &[
            "scan",
            &file.display().to_string(),
            "--cache-dir",
            &cache.display().to_string(),
        ],
        &[],
        Duration::from_secs(60),
    );
    let lines: Vec<serde_json::Value> = o
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{}", o.stdout);
    for l in &lines {
        let reason = l["skipped"].as_str().unwrap_or_default();
        assert!(
            reason.contains("not a package name") || reason.contains("not one pinned version"),
            "{l}"
        );
    }
    assert!(!marker.exists(), "a local source tree was built");
    assert!(!cache.join("venv").exists() && !cache.join("npm").exists());
}

/// A server reads only the system directories and what it runs on (issue 29, items 4 and 6):
/// installed in a cache outside /home (its own install directory readable), it cannot read a
/// secret of the invoking user beside that cache, nor open, let alone lock, the cache's
/// install lock next to its own directory (which would hang later runs).
fn servers_read_only_what_they_run_on(who: As) {
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    let secret = Secret::plant(who);
    // An install of the fake server as `[setup]` would leave it: the package directory, its
    // marker, and the lock file beside it.
    let cache = secret.dir.join("cache");
    let package = cache.join("venv/0123456789abcdef");
    std::fs::create_dir_all(package.join("bin")).expect("mkdir");
    std::fs::write(package.join("pyvenv.cfg"), "home = /usr/bin\n").expect("pyvenv.cfg");
    let server = package.join("bin/server");
    std::fs::copy(&stage().fake, &server).expect("copy the fake server");
    let lock = cache.join("venv/0123456789abcdef.lock");
    std::fs::write(&lock, "1\n").expect("lock file");
    for (p, mode) in [
        (cache.as_path(), 0o755),
        (&cache.join("venv"), 0o755),
        (&package, 0o755),
        (&package.join("bin"), 0o755),
        (&server, 0o755),
        (&lock, 0o644),
    ] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
    let dir = work_dir(&format!("reads-{who:?}"));
    let scenario = dir.join("scenario.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"[run]
era = "legacy"

[server]
command = [{server:?}, "--scenario", {scenario:?}]

[[tools]]
name = "peek"
annotations = {{ readOnlyHint = true }}
steps = [{{ action = "read", path = {secret:?} }}]

[[tools]]
name = "hold"
annotations = {{ readOnlyHint = true }}
steps = [{{ action = "flock", path = {lock:?} }}]

[[tools]]
name = "own"
annotations = {{ readOnlyHint = true }}
steps = [{{ action = "read", path = {cfg:?} }}]

[[tools]]
name = "signal"
annotations = {{ readOnlyHint = true }}
steps = [{{ action = "flock", path = "/etc/passwd" }}, {{ action = "flock", path = {cfg:?} }}]

[[tools]]
name = "own_lock"
annotations = {{ readOnlyHint = true }}
steps = [{{ action = "flock", path = "notes.txt" }}]
"#,
            server = server.display().to_string(),
            scenario = scenario.display().to_string(),
            secret = secret.path.display().to_string(),
            lock = lock.display().to_string(),
            cfg = package.join("pyvenv.cfg").display().to_string(),
        ),
    )
    .expect("scenario");
    std::fs::set_permissions(&scenario, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let o = run_as_with_env(
        &prefix,
        &[
            "verify".into(),
            "--scenario".into(),
            scenario.display().to_string(),
            "--format".into(),
            "json".into(),
        ],
        &[],
        Duration::from_secs(120),
    );
    let report = o.json();
    let text_of = |tool: &str| -> String {
        let t = crate::util::report_tool(&report, tool);
        t["calls"].to_string()
    };
    let peek = text_of("peek");
    assert!(
        !peek.contains(&secret.text),
        "the server read the secret: {peek}"
    );
    assert!(peek.contains("read: "), "{peek}");
    let hold = text_of("hold");
    assert!(
        !hold.contains("locked"),
        "the server took the install lock: {hold}"
    );
    assert!(hold.contains("flock: "), "{hold}");
    // Its own package stays readable: the server runs.
    assert!(
        text_of("own").contains("home = /usr/bin"),
        "{}",
        text_of("own")
    );
    // A lock on a file other sandboxes can read too (a system file, its package) would be a
    // signal between runs: refused and reported; a lock on its own workspace file is its own.
    let signal = text_of("signal");
    assert!(!signal.contains("locked"), "{signal}");
    assert!(signal.contains("No locks available"), "{signal}");
    assert!(
        text_of("own_lock").contains("locked"),
        "{}",
        text_of("own_lock")
    );
    let evasion: Vec<&serde_json::Value> = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["audit"] == "sandbox-evasion" && f["tool"] == "signal")
        .collect();
    assert!(
        evasion
            .iter()
            .any(|f| f.to_string().contains("a lock on /etc/passwd")),
        "{evasion:?}"
    );
    let enforced = report["sandbox"]["enforced"].to_string();
    assert!(
        enforced.contains("read/execute only in the system directories and"),
        "{enforced}"
    );
}

as_root_and_unprivileged!(
    servers_read_only_what_they_run_on_as_root,
    servers_read_only_what_they_run_on_unprivileged,
    servers_read_only_what_they_run_on
);
