//! Enforcement, for real: a hostile server tries to write outside its scratch directories,
//! reach host services, signal its parent, leave a daemon, fork-bomb and eat memory. Every
//! attempt must fail inside the sandbox, the host must be unchanged, nothing may be left
//! running, and the report must still be complete. Each test runs as root and as an
//! unprivileged user (through user namespaces); where the machine cannot, the test skips with
//! the reason (HINTCHECK_REQUIRE_ALL=1 turns that into a failure).

use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{
    Outcome, fake_server, hint_verdict, hintcheck_bin, processes_matching, repo, report_tool, skip,
};

/// A copy of everything the sandbox tests hand to hintcheck (its binaries and fixtures) in a
/// world-readable directory under /tmp, so that an unprivileged uid can use them whatever the
/// permissions of the checkout are. Passed to the server as `HINTCHECK_IT`, which makes the
/// sandbox show it read-only inside (it names a /tmp entry).
pub(crate) struct Stage {
    pub(crate) dir: PathBuf,
    pub(crate) hintcheck: PathBuf,
    pub(crate) fake: PathBuf,
}

pub(crate) fn stage() -> &'static Stage {
    static STAGE: std::sync::OnceLock<Stage> = std::sync::OnceLock::new();
    STAGE.get_or_init(|| {
        // Stages of earlier test processes that are gone (a test binary has no teardown hook).
        for e in std::fs::read_dir("/tmp").into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix("hintcheck-it-") {
                if !Path::new("/proc").join(pid).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        let dir = PathBuf::from(format!("/tmp/hintcheck-it-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).expect("stage");
        let copy = |from: &Path, to: &Path| {
            std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
            std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        };
        let hintcheck = dir.join("bin/hintcheck");
        let fake = dir.join("bin/hintcheck-fake-server");
        copy(&hintcheck_bin(), &hintcheck);
        copy(&fake_server(), &fake);
        for fixture in [
            "escape",
            "external-connect",
            "hostile-resources",
            "hostile-sandbox",
            "network",
            "pylib",
            "python",
            "python-background",
            "python-pool",
            "git",
            "journal",
            "lazy-db",
            "pool-trash",
            "telemetry",
            "fetcher",
            "json-store",
            "sqlite",
            "python-pool-ticker",
            "static",
            "over-http",
            "deep-tree",
            "late-thread",
            "per-request",
            "startup-work",
            "documents",
            "lazy-store",
            "raised-mapping",
            "shared-counters",
            "secrets",
            "exfiltration",
            "leaky-client",
            "labelled",
            "per-argument",
            "guard",
            "ignored-probe",
            "late-probe-answer",
        ] {
            let src = repo().join("tests/fixtures").join(fixture);
            let dst = dir.join("fixtures").join(fixture);
            copy_tree(&src, &dst);
        }
        for d in [dir.as_path(), &dir.join("fixtures")] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        Stage {
            dir,
            hintcheck,
            fake,
        }
    })
}

fn copy_tree(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for e in std::fs::read_dir(src).expect("read_dir").flatten() {
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).expect("copy");
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        }
    }
}

pub(crate) fn fixture(name: &str) -> String {
    stage()
        .dir
        .join("fixtures")
        .join(name)
        .display()
        .to_string()
}

/// `verify --scenario <fixture> <extra…> --format json`, as arguments for [`run_as`].
pub(crate) fn verify_json_args(name: &str, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["verify".to_string(), "--scenario".into(), fixture(name)];
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(["--format".into(), "json".into()]);
    args
}

pub(crate) fn is_root() -> bool {
    rustix::process::getuid().is_root()
}

pub(crate) fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// How hintcheck is started: as root, or as an unprivileged user.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum As {
    Root,
    Unprivileged,
}

/// The command prefix for running hintcheck as `who`, optionally inside a fresh network
/// namespace that the test itself creates; `None` (with the reason printed) when impossible.
pub(crate) fn prefix(who: As, own_netns: bool) -> Option<Vec<String>> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    match (who, is_root()) {
        (As::Root, false) => {
            skip("the root variant needs root");
            None
        }
        (As::Root, true) => Some(if own_netns {
            s(&["unshare", "--net", "--"])
        } else {
            Vec::new()
        }),
        (As::Unprivileged, true) => {
            if !have("setpriv") {
                skip("setpriv (util-linux) is missing");
                return None;
            }
            let mut p = if own_netns {
                s(&["unshare", "--net", "--"])
            } else {
                Vec::new()
            };
            p.extend(s(&[
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
            ]));
            Some(p)
        }
        (As::Unprivileged, false) => Some(if own_netns {
            s(&["unshare", "--user", "--map-current-user", "--net", "--"])
        } else {
            Vec::new()
        }),
    }
}

/// Runs hintcheck through `prefix` with a wall-clock limit.
pub(crate) fn run_as(prefix: &[String], args: &[String], limit: Duration) -> Outcome {
    run_as_with_env(prefix, args, &[], limit)
}

/// [`run_as`] with more environment for hintcheck.
pub(crate) fn run_as_with_env(
    prefix: &[String],
    args: &[String],
    env: &[(&str, String)],
    limit: Duration,
) -> Outcome {
    let mut argv: Vec<String> = prefix.to_vec();
    argv.push(stage().hintcheck.display().to_string());
    argv.extend(args.iter().cloned());
    if args.first().is_some_and(|a| a == "verify") {
        argv.push("--env".into());
        argv.push(format!("HINTCHECK_IT={}", stage().dir.display()));
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.args(&argv[1..])
        .env("HINTCHECK_FAKE_SERVER", &stage().fake)
        .env("TMPDIR", "/tmp")
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    let start = Instant::now();
    let out = std::thread::spawn(move || child.wait_with_output());
    while !out.is_finished() {
        assert!(
            start.elapsed() < limit,
            "{argv:?} did not finish within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = out.join().expect("join").expect("output");
    Outcome {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// A directory that every uid may write by permissions alone, so that only the sandbox can
/// stop a write into it.
fn open_dir(name: &str) -> PathBuf {
    let d = stage().dir.join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("mkdir");
    std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    d
}

fn world_writable_file(path: &Path, content: &str) {
    std::fs::write(path, content).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).expect("chmod");
}

/// Asserts that no process whose command line holds `needle` is alive (the kernel may need a
/// moment to finish a namespace).
fn assert_nothing_left(needle: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut left = processes_matching(needle);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = processes_matching(needle);
    }
    assert!(left.is_empty(), "{needle} still running: {left:?}");
}

/// The escape tests look for leftovers by name: they must not overlap.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn escape_run(who: As) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    let tag = format!("{who:?}").to_lowercase();
    let host = open_dir(&format!("escape-host-{tag}"));
    let ssh = host.join(".ssh");
    std::fs::create_dir(&ssh).expect("mkdir");
    std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let seed = open_dir(&format!("escape-seed-{tag}"));
    world_writable_file(&seed.join("original.txt"), "seed");
    // Host services: a TCP listener on loopback and a unix socket, both open to every uid.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("tcp listener");
    tcp.set_nonblocking(true).expect("nonblocking");
    let port = tcp.local_addr().expect("addr").port();
    let sock_path = host.join("host.sock");
    let unix = std::os::unix::net::UnixListener::bind(&sock_path).expect("unix listener");
    unix.set_nonblocking(true).expect("nonblocking");
    std::fs::set_permissions(&sock_path, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let var_tmp_marker = Path::new("/var/tmp/hintcheck-escape");
    let _ = std::fs::remove_file(var_tmp_marker);

    let arg = |tool: &str, json: String| vec!["--args".to_string(), format!("{tool}={json}")];
    let mut args: Vec<String> = vec![
        "verify".into(),
        "--scenario".into(),
        fixture("escape"),
        "--workspace".into(),
        seed.display().to_string(),
        "--format".into(),
        "json".into(),
    ];
    args.extend(arg(
        "write_host_ssh",
        format!(r#"{{"path":"{}/authorized_keys"}}"#, ssh.display()),
    ));
    args.extend(arg(
        "write_seed",
        format!(r#"{{"path":"{}/original.txt"}}"#, seed.display()),
    ));
    args.extend(arg(
        "connect_out",
        format!(r#"{{"host":"127.0.0.1","port":{port}}}"#),
    ));
    args.extend(arg(
        "connect_unix",
        format!(r#"{{"path":"{}"}}"#, sock_path.display()),
    ));
    let out = run_as(&prefix, &args, Duration::from_secs(180));

    // A complete report, with the sandbox in force.
    assert!(
        matches!(out.code, 0 | 1 | 4),
        "exit {}: {}",
        out.code,
        out.stderr
    );
    let r = out.json();
    assert_eq!(r["sandbox"]["requested"], "required");
    assert!(
        r["sandbox"]["level"] == "full" || r["sandbox"]["level"] == "partial",
        "{}",
        r["sandbox"]
    );
    let expect_userns = who == As::Unprivileged;
    let userns = r["sandbox"]["enforced"][0]
        .as_str()
        .unwrap_or_default()
        .contains("user namespace");
    assert_eq!(userns, expect_userns, "{}", r["sandbox"]["enforced"][0]);
    let tools = r["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 11);
    crate::util::assert_four_verdicts(&r);
    let outcome = |name: &str| -> String {
        let t = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name}"));
        t["calls"][0]["outcome"]
            .as_str()
            .unwrap_or("not called")
            .to_string()
    };
    for denied in [
        "write_host_ssh",
        "write_etc",
        "write_seed",
        "connect_out",
        "connect_unix",
    ] {
        assert_eq!(
            outcome(denied),
            "isError",
            "{denied} must fail inside the sandbox"
        );
    }
    assert_eq!(
        outcome("write_var_tmp"),
        "ok",
        "the sandbox's own /var/tmp is writable"
    );
    // Denied writes are still behaviour: the recorder saw the attempt, the read-only hint falls.
    for tool in ["write_host_ssh", "write_etc", "write_seed"] {
        let t = tools.iter().find(|t| t["name"] == tool).expect("tool");
        let ro = &t["verdicts"][0];
        assert_eq!(ro["verdict"], "contradicted", "{tool}: {ro}");
        let evidence = ro["evidence"][0]["text"].as_str().unwrap_or_default();
        assert!(
            evidence.contains("denied by the sandbox"),
            "{tool}: {evidence}"
        );
        let obs = &t["calls"][0]["observations"][0];
        assert_eq!(obs["type"], "attempt");
        assert_eq!(obs["mechanism"], "attempt");
    }
    // The fork bomb's processes and the memory eater together may pass the tree's memory
    // bound: then the watchdog ends the run there, with a finding that says so. Otherwise the
    // server still works after every attack.
    let watchdog = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["audit"] == "resource-limit");
    match watchdog {
        Some(f) => {
            assert!(
                r["partial"]
                    .as_str()
                    .is_some_and(|p| p.contains("--memory-limit")),
                "{f}"
            );
            assert!(
                f["tool"] == "eat_memory" || f["tool"] == "fork_bomb",
                "ended during {}",
                f["tool"]
            );
        }
        None => assert_eq!(outcome("still_works"), "ok"),
    }
    let var_tmp = tools
        .iter()
        .find(|t| t["name"] == "write_var_tmp")
        .expect("tool");
    assert_eq!(
        var_tmp["calls"][0]["observations"][0]["path"],
        "/var/tmp/hintcheck-escape"
    );

    // The host is unchanged.
    assert!(
        !ssh.join("authorized_keys").exists(),
        "wrote into the host's .ssh"
    );
    assert!(
        !Path::new("/etc/hintcheck-escape").exists(),
        "wrote into /etc"
    );
    assert!(!var_tmp_marker.exists(), "wrote into the host's /var/tmp");
    assert_eq!(
        std::fs::read_to_string(seed.join("original.txt")).expect("seed"),
        "seed"
    );
    assert!(
        matches!(
            tcp.accept().map_err(|e| e.kind()),
            Err(ErrorKind::WouldBlock)
        ),
        "reached the host's loopback listener"
    );
    assert!(
        matches!(
            unix.accept().map_err(|e| e.kind()),
            Err(ErrorKind::WouldBlock)
        ),
        "reached the host's unix socket"
    );

    // Nothing is left running (the kernel may need a moment to finish the namespace).
    let escape_fixture = fixture("escape");
    for needle in ["sleep 4343", "--fork-bomb", escape_fixture.as_str()] {
        assert_nothing_left(needle);
    }
    let _ = std::fs::remove_dir_all(&host);
    let _ = std::fs::remove_dir_all(&seed);
}

as_root_and_unprivileged!(
    escape_attempts_fail_as_root,
    escape_attempts_fail_unprivileged,
    escape_run
);

fn external(who: As) {
    if !have("unshare") {
        return skip("unshare (util-linux) is missing");
    }
    let Some(prefix) = prefix(who, true) else {
        return;
    };
    let args = verify_json_args("external-connect", &[]);
    let out = run_as(&prefix, &args, Duration::from_secs(60));
    // Both tools declare openWorldHint: false and try to connect out: contradicted, with the
    // destination seen by the seccomp recorder. The connection reaches only hintcheck's own
    // listener inside the sandbox (every address is local there), which reads the first bytes.
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    let tools = r["tools"].as_array().expect("tools");
    for (t, dest, payload) in [
        (&tools[0], "192.0.2.1:80", "HTTP \"GET / HTTP/1.0\""),
        (&tools[1], "2001:db8::1:443", "5 bytes"),
    ] {
        let ow = hint_verdict(t, "openWorldHint");
        assert_eq!(ow["verdict"], "contradicted", "{}", t["name"]);
        let evidence: Vec<&str> = ow["evidence"]
            .as_array()
            .expect("evidence")
            .iter()
            .filter_map(|e| e["text"].as_str())
            .collect();
        assert!(
            evidence.contains(&format!("connected to {dest}").as_str()),
            "{evidence:?}"
        );
        assert!(
            evidence.iter().any(|e| e.ends_with(payload)),
            "{payload} not in {evidence:?}"
        );
    }
    // A connection to a listener the server made itself on 192.0.2.7 stays inside the server.
    let own = &tools[2];
    assert_eq!(own["name"], "connect_own_listener");
    assert_eq!(own["calls"][0]["outcome"], "ok", "{own}");
    let seen = own["calls"][0]["observations"].to_string();
    assert!(
        seen.contains("an address the server bound itself"),
        "{seen}"
    );
    let ow = hint_verdict(own, "openWorldHint");
    assert_eq!(ow["verdict"], "consistent", "{ow}");
}

as_root_and_unprivileged!(
    external_connections_fail_as_root,
    external_connections_fail_unprivileged,
    external
);

#[test]
fn a_restricted_user_namespace_is_refused_with_the_remedy() {
    // Ubuntu 24.04 lets unshare() succeed and then refuses the uid map; simulate that step.
    let scenario = crate::util::at("scenarios/startup-writer");
    let step = if is_root() { "unshare" } else { "uid_map" };
    let env_step = [("HINTCHECK_SIMULATE_SANDBOX_FAILURE", step)];
    let out = crate::util::run(
        &["verify", "--scenario", &scenario, "--format", "json"],
        &env_step,
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 5, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["exit_code"], 5);
    assert_eq!(r["sandbox"]["requested"], "required");
    assert!(r["notes"].to_string().contains("sysctl"), "{}", r["notes"]);
    assert!(
        r["server"]["start_error"]
            .as_str()
            .unwrap_or_default()
            .contains(step)
    );

    let doctor = crate::util::run(&["doctor"], &env_step, Duration::from_secs(60));
    assert_eq!(doctor.code, 5, "{}", doctor.stdout);
    assert!(doctor.stdout.contains("fix: "), "{}", doctor.stdout);

    let best = crate::util::run(
        &[
            "verify",
            "--sandbox",
            "best-effort",
            "--scenario",
            &scenario,
            "--format",
            "json",
        ],
        &env_step,
        Duration::from_secs(60),
    );
    assert_eq!(best.code, 0, "{}", best.stderr);
    let r = best.json();
    assert_eq!(r["sandbox"]["level"], "none");
    assert_eq!(r["sandbox"]["requested"], "best-effort");
    assert!(
        r["sandbox"]["not_enforced"][0]
            .as_str()
            .unwrap_or_default()
            .contains("could not be set up")
    );
}

#[test]
fn no_sandbox_is_stated_in_the_report() {
    let out = crate::util::run(
        &[
            "verify",
            "--no-sandbox",
            "--scenario",
            &crate::util::at("scenarios/startup-writer"),
            "--format",
            "json",
        ],
        &[],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.json();
    assert_eq!(r["sandbox"]["level"], "none");
    assert_eq!(r["sandbox"]["requested"], "off");
}

#[test]
fn sigterm_mid_run_leaves_a_partial_report_and_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        r#"
[run]
call_timeout = "60s"
[[tools]]
name = "quick"
annotations = { readOnlyHint = true }
[[tools]]
name = "stuck"
annotations = { readOnlyHint = true }
steps = [{ action = "spawn", argv = ["sleep", "4344"] }, { action = "hang" }]
"#,
    )
    .expect("write");
    let report = dir.path().join("report.json");
    let mut child = Command::new(hintcheck_bin())
        .args(["verify", "--format", "json", "--output"])
        .arg(&report)
        .arg("--scenario")
        .arg(&scenario)
        .env("HINTCHECK_FAKE_SERVER", fake_server())
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Wait until the stuck call is in flight.
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes_matching("sleep 4344").is_empty() {
        assert!(Instant::now() < deadline, "the stuck tool never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let status = crate::util::wait_within(
        &mut child,
        Duration::from_secs(20),
        "hintcheck after SIGTERM",
    );
    assert_eq!(status.code(), Some(143), "128 + SIGTERM");
    let r = crate::util::read_json(&report);
    crate::util::assert_partial(&r, "interrupted");
    assert_eq!(r["exit_code"], 143);
    let quick = r["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "quick")
        .expect("quick");
    assert_eq!(quick["calls"][0]["outcome"], "ok");
    assert!(
        crate::util::gone_within("sleep 4344", Duration::from_secs(3)),
        "the server's child survived"
    );
    assert!(
        crate::util::entries(&tmp).is_empty(),
        "scratch left: {:?}",
        crate::util::entries(&tmp)
    );
}

#[test]
fn sigkill_of_hintcheck_still_leaves_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("mkdir");
    let scenario = dir.path().join("scenario.toml");
    std::fs::write(
        &scenario,
        r#"
[run]
call_timeout = "60s"
[[tools]]
name = "stuck"
annotations = { readOnlyHint = true }
steps = [{ action = "write", path = "evidence.txt", content = "x" }, { action = "spawn", argv = ["sleep", "4345"] }, { action = "hang" }]
"#,
    )
    .expect("write");
    let mut child = Command::new(hintcheck_bin())
        .args(["verify", "--scenario"])
        .arg(&scenario)
        .env("HINTCHECK_FAKE_SERVER", fake_server())
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    while processes_matching("sleep 4345").is_empty() {
        assert!(Instant::now() < deadline, "the stuck tool never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !crate::util::entries(&tmp).is_empty(),
        "the scratch directory exists during the run"
    );
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    // No handler runs in hintcheck: the sandbox's init notices (PR_SET_PDEATHSIG) and cleans up.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_matching("sleep 4345");
        let scratch = crate::util::entries(&tmp);
        if left.is_empty() && scratch.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left behind: processes {left:?}, scratch {scratch:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // As root the run had a cgroup of its own, which nobody was left to remove: the next run
    // removes it.
    let Some(jobs) = is_root().then(cgroup_jobs_dir).flatten() else {
        return;
    };
    let killed = format!("job-{}-", child.id());
    let stale = || {
        crate::util::entries(&jobs)
            .into_iter()
            .filter(|n| n.starts_with(&killed))
            .collect::<Vec<_>>()
    };
    if stale().is_empty() {
        // Another test's run, started meanwhile, has removed it already.
        return;
    }
    let next = crate::util::run(
        &[
            "verify",
            "--scenario",
            &crate::util::at("scenarios/demo"),
            "--format",
            "json",
        ],
        &[("TMPDIR", tmp.to_str().expect("utf-8"))],
        Duration::from_secs(60),
    );
    assert!(matches!(next.code, 0 | 1), "{}", next.stderr);
    assert!(stale().is_empty(), "stale cgroups left: {:?}", stale());
}

/// The directory of the runs' cgroups (root mode), where the host has cgroup v2.
fn cgroup_jobs_dir() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next() == Some("cgroup2"))
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))
            .flatten()
    })?;
    Some(mount.join("jobs")).filter(|d| d.is_dir())
}

fn overlay_run(who: As) {
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    let tag = format!("{who:?}").to_lowercase();
    let dir = open_dir(&format!("overlay-{tag}"));
    world_writable_file(&dir.join("existing.txt"), "host content");
    world_writable_file(&dir.join("gone.txt"), "to be deleted");
    world_writable_file(&dir.join("moved.txt"), "to be moved");
    std::fs::create_dir_all(dir.join("old")).expect("mkdir");
    std::fs::set_permissions(dir.join("old"), std::fs::Permissions::from_mode(0o777))
        .expect("chmod");
    world_writable_file(&dir.join("old/a.txt"), "hidden by an opaque directory");
    let scenario = dir.join("scenario.toml");
    world_writable_file(
        &scenario,
        r#"
[[tools]]
name = "write_beside"
annotations = { readOnlyHint = true }
input_schema = { type = "object", properties = { dir = { type = "string" } }, required = ["dir"] }
steps = [
    { action = "write", path = "{arg:dir}/new.txt", content = "inside" },
    { action = "append", path = "{arg:dir}/existing.txt", content = " + sandbox" },
]

[[tools]]
name = "reshape"
annotations = { readOnlyHint = false, destructiveHint = false }
input_schema = { type = "object", properties = { dir = { type = "string" } }, required = ["dir"] }
steps = [
    { action = "delete", path = "{arg:dir}/gone.txt" },
    { action = "rename", from = "{arg:dir}/moved.txt", to = "{arg:dir}/moved2.txt" },
    { action = "delete", path = "{arg:dir}/old" },
    { action = "mkdir", path = "{arg:dir}/old" },
    { action = "write", path = "{arg:dir}/old/fresh.txt", content = "new" },
    { action = "write", path = "{arg:dir}/brief.lock", content = "1" },
    { action = "delete", path = "{arg:dir}/brief.lock" },
]
"#,
    );
    if who == As::Unprivileged && is_root() {
        // A user overlays their own files: in a user namespace an overlay cannot copy up a
        // file whose owner is not mapped (EOVERFLOW).
        for p in [
            dir.clone(),
            dir.join("existing.txt"),
            dir.join("gone.txt"),
            dir.join("moved.txt"),
            dir.join("old"),
            dir.join("old/a.txt"),
            scenario.clone(),
        ] {
            std::os::unix::fs::lchown(&p, Some(65534), Some(65534)).expect("chown");
        }
    }
    let args: Vec<String> = vec![
        "verify".into(),
        "--scenario".into(),
        scenario.display().to_string(),
        "--overlay".into(),
        dir.display().to_string(),
        "--args".into(),
        format!(r#"write_beside={{"dir":"{}"}}"#, dir.display()),
        "--args".into(),
        format!(r#"reshape={{"dir":"{}"}}"#, dir.display()),
        "--repeat".into(),
        "1".into(),
        "--format".into(),
        "json".into(),
    ];
    let out = run_as(&prefix, &args, Duration::from_secs(60));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    let seen_by = |tool: &str| -> Vec<String> {
        let t = r["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .find(|t| t["name"] == tool)
            .unwrap_or_else(|| panic!("{tool}"));
        let call = &t["calls"][0];
        assert_eq!(call["outcome"], "ok", "{call}");
        call["observations"]
            .as_array()
            .expect("observations")
            .iter()
            .map(|o| o["description"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let d = dir.display();
    // Seen through the upper layer: a whiteout, a copied-up rename, an opaque directory.
    let reshaped = seen_by("reshape");
    let expected = [
        format!("deleted {d}/gone.txt (was 13 bytes)"),
        format!("{d}/moved.txt renamed to {d}/moved2.txt (11 → 11 bytes)"),
        format!("deleted {d}/old/a.txt (was 29 bytes)"),
        format!("created {d}/old/fresh.txt (3 bytes)"),
        // A lock taken and released: seen by change notification on the upper layer.
        format!("created and removed {d}/brief.lock"),
    ];
    for e in &expected {
        assert!(reshaped.contains(e), "{e:?} not in {reshaped:?}");
    }
    // The recreated directory got the default mode: the only other effect.
    let others: Vec<&String> = reshaped.iter().filter(|o| !expected.contains(o)).collect();
    assert!(
        others
            .iter()
            .all(|o| o.starts_with(&format!("changed mode of {d}/old "))),
        "{others:?}"
    );
    let seen = seen_by("write_beside");
    assert!(
        seen.contains(&format!("created {d}/new.txt (6 bytes)")),
        "{seen:?}"
    );
    assert!(
        seen.contains(&format!("appended to {d}/existing.txt (12 → 22 bytes)")),
        "{seen:?}"
    );
    // The host directory is untouched.
    assert!(!dir.join("new.txt").exists());
    assert!(dir.join("gone.txt").exists() && dir.join("old/a.txt").exists());
    assert_eq!(
        std::fs::read_to_string(dir.join("existing.txt")).expect("read"),
        "host content"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

as_root_and_unprivileged!(
    overlays_keep_writes_inside_and_observed_as_root,
    overlays_keep_writes_inside_and_observed_unprivileged,
    overlay_run
);

fn network_run(who: As) {
    if !have("unshare") {
        return skip("unshare (util-linux) is missing");
    }
    let Some(prefix) = prefix(who, true) else {
        return;
    };
    let args = verify_json_args("network", &[]);
    let out = run_as(&prefix, &args, Duration::from_secs(60));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    assert!(
        r["sandbox"]["enforced"][1]
            .as_str()
            .unwrap_or_default()
            .contains("DNS answered by hintcheck"),
        "{}",
        r["sandbox"]["enforced"][1]
    );
    let tools = r["tools"].as_array().expect("tools");
    let open_world = |name: &str| -> (String, Vec<String>) {
        let t = tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name}"));
        let v = hint_verdict(t, "openWorldHint");
        let evidence = v["evidence"]
            .as_array()
            .expect("evidence")
            .iter()
            .map(|e| e["text"].as_str().unwrap_or_default().to_string())
            .collect();
        (
            v["verdict"].as_str().unwrap_or_default().to_string(),
            evidence,
        )
    };
    let expect = [
        ("lookup_only", "looked up lookup.example.test (A)"),
        (
            "https_by_name",
            "(secret.example.test): TLS ClientHello, SNI secret.example.test",
        ),
        (
            "https_literal_ip",
            "192.0.2.10:443: TLS ClientHello, SNI pinned.example.test",
        ),
        (
            "http_with_host",
            "HTTP \"GET /collect?token=abc123 HTTP/1.1\", Host: tracker.example.test",
        ),
        ("udp_datagram", "UDP at 192.0.2.20:123"),
    ];
    for (tool, needle) in expect {
        let (verdict, evidence) = open_world(tool);
        assert_eq!(verdict, "contradicted", "{tool}: {evidence:?}");
        assert!(
            evidence.iter().any(|e| e.contains(needle)),
            "{tool}: {needle} not in {evidence:?}"
        );
    }
    assert_eq!(open_world("loopback_only").0, "consistent");
    // Every network observation names how it was seen.
    for t in tools {
        for c in t["calls"].as_array().expect("calls") {
            for o in c["observations"].as_array().expect("observations") {
                assert!(
                    matches!(
                        o["mechanism"].as_str(),
                        Some("attempt" | "dns" | "payload" | "snapshot")
                    ),
                    "{o}"
                );
            }
        }
    }
}

as_root_and_unprivileged!(
    network_behaviour_is_observed_with_names_as_root,
    network_behaviour_is_observed_with_names_unprivileged,
    network_run
);

fn python_run(who: As) {
    if !Path::new("/usr/bin/python3").is_file() {
        return skip("/usr/bin/python3 is missing (the Python runtime case)");
    }
    if !have("unshare") {
        return skip("unshare (util-linux) is missing");
    }
    let Some(prefix) = prefix(who, true) else {
        return;
    };
    let args = verify_json_args("python", &[]);
    let out = run_as(&prefix, &args, Duration::from_secs(90));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    let tools = r["tools"].as_array().expect("tools");
    let verdict = |tool: &str, hint: &str| -> (String, Vec<String>) {
        let t = tools
            .iter()
            .find(|t| t["name"] == tool)
            .unwrap_or_else(|| panic!("{tool}"));
        let v = hint_verdict(t, hint);
        let evidence = v["evidence"]
            .as_array()
            .expect("evidence")
            .iter()
            .map(|e| {
                format!(
                    "{}: {}",
                    e["source"].as_str().unwrap_or_default(),
                    e["text"].as_str().unwrap_or_default()
                )
            })
            .collect();
        (
            v["verdict"].as_str().unwrap_or_default().to_string(),
            evidence,
        )
    };
    let cases = [
        // A helper process writes 200 ms after the answer: still call 1's.
        (
            "child_writer",
            "readOnlyHint",
            "call 1: created $WORKSPACE/child.txt (1 bytes)",
        ),
        // A thread writes 500 ms after the answer: still call 1's.
        (
            "late_thread_writer",
            "readOnlyHint",
            "call 1: created $WORKSPACE/late.txt (5 bytes)",
        ),
        // Writes only on the second call.
        (
            "second_call_writer",
            "idempotentHint",
            "repeat 2: created $WORKSPACE/second.txt (6 bytes)",
        ),
        // A DNS lookup without a connection.
        (
            "dns_only",
            "openWorldHint",
            "call 1: looked up py.example.test (A)",
        ),
        // HTTPS to a literal IP: the SNI names the host.
        (
            "https_ip",
            "openWorldHint",
            "TLS ClientHello, SNI pinned.example.test",
        ),
        // HTTP with a Host header, by name.
        ("http_host", "openWorldHint", "Host: web.example.test"),
        // A UDP datagram.
        ("udp", "openWorldHint", "192.0.2.40:9999"),
        // A datagram sent with sendmsg: its address is out of seccomp's sight, the packet
        // socket on lo sees it.
        (
            "udp_sendmsg",
            "openWorldHint",
            "call 1: sent a datagram to 192.0.2.41:9998",
        ),
        // A lock file taken and released before the answer: seen by change notification.
        (
            "lock_briefly",
            "readOnlyHint",
            "call 1: created and removed $WORKSPACE/py.lock",
        ),
        // The same in the sandbox's private /tmp, watched through /proc/PID/root.
        (
            "tmp_lock_briefly",
            "readOnlyHint",
            "call 1: created and removed /tmp/py-tmp.lock",
        ),
        // A write the sandbox denies.
        (
            "denied_write",
            "readOnlyHint",
            "call 1: tried openat /etc/pyserver-denied, denied by the sandbox",
        ),
    ];
    for (tool, hint, needle) in cases {
        let (v, evidence) = verdict(tool, hint);
        assert_eq!(v, "contradicted", "{tool} {hint}: {evidence:?}");
        assert!(
            evidence.iter().any(|e| e.contains(needle)),
            "{tool}: {needle:?} not in {evidence:?}"
        );
    }
    assert_eq!(verdict("honest_reader", "readOnlyHint").0, "consistent");
    assert_eq!(verdict("honest_reader", "openWorldHint").0, "consistent");
    assert_eq!(
        verdict("second_call_writer", "destructiveHint").0,
        "consistent"
    );
    let out_of_window = crate::util::out_of_window(&r, None);
    assert!(
        out_of_window
            .iter()
            .all(|d| !d.contains("late.txt") && !d.contains("child.txt")),
        "{out_of_window:?}"
    );
}

/// A handshake-era server that takes `server/discover` in and ignores it costs its own start,
/// not the probe's wait: with a probe of 60 s in a run of at most 20 s, the server is greeted
/// in the handshake era and its tool checked. A modern server that answers the probe after a
/// timed wait of its own (0.9 s) is not quiet meanwhile: the probe waits for its answer (one
/// `server/discover`, no `initialize`).
fn ignored_probe_run(who: As) {
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    let probe = ["--discover-timeout", "60s", "--handshake-timeout", "120s"];
    // Where the unprivileged user may write too.
    let transcript = PathBuf::from(format!(
        "/tmp/hintcheck-it-late-probe-{}-{who:?}.jsonl",
        std::process::id()
    ));
    let args = verify_json_args(
        "late-probe-answer",
        &[
            &probe[..],
            &["--transcript", &transcript.display().to_string()],
        ]
        .concat(),
    );
    let out = run_as(&prefix, &args, Duration::from_secs(60));
    let r = out.json();
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, r["notes"]);
    assert_eq!(r["server"]["era"], "modern", "{}", r["server"]);
    let sent: Vec<String> = std::fs::read_to_string(&transcript)
        .expect("transcript")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["direction"] == "sent")
        .filter_map(|e| {
            serde_json::from_str::<serde_json::Value>(e["text"].as_str()?).ok()?["method"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    let _ = std::fs::remove_file(&transcript);
    assert_eq!(
        sent.iter().filter(|m| *m == "server/discover").count(),
        1,
        "{sent:?}"
    );
    assert!(!sent.iter().any(|m| m == "initialize"), "{sent:?}");

    // The proof needs the server in a network namespace of the sandbox's.
    let own_network = r["sandbox"]["enforced"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str())
        .any(|e| e.starts_with("namespaces: net"));
    if !own_network {
        return skip("the sandbox gave the server no network namespace here, so no proof of quiet");
    }
    let args = verify_json_args(
        "ignored-probe",
        &[&probe[..], &["--timeout", "20s"]].concat(),
    );
    let out = run_as(&prefix, &args, Duration::from_secs(60));
    let r = out.json();
    assert_eq!(out.code, 0, "{}\n{}", out.stderr, r["notes"]);
    assert!(r["partial"].is_null(), "{}", r["partial"]);
    assert_eq!(r["server"]["era"], "legacy", "{}", r["server"]);
    assert_eq!(r["server"]["protocol_version"], "2025-03-26");
    assert_eq!(r["server"]["start_error"], serde_json::Value::Null);
    let t = report_tool(&r, "look");
    assert_eq!(hint_verdict(t, "readOnlyHint")["verdict"], "consistent");
}

as_root_and_unprivileged!(
    an_ignored_probe_is_not_waited_out_as_root,
    an_ignored_probe_is_not_waited_out_unprivileged,
    ignored_probe_run
);

as_root_and_unprivileged!(
    a_python_server_is_observed_call_by_call_as_root,
    a_python_server_is_observed_call_by_call_unprivileged,
    python_run
);

fn python_background_run(who: As) {
    if !Path::new("/usr/bin/python3").is_file() {
        return skip("/usr/bin/python3 is missing (the Python runtime case)");
    }
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    let args = verify_json_args("python-background", &[]);
    let out = run_as(&prefix, &args, Duration::from_secs(120));
    // A thread writes bg.txt every 100 ms, also while honest tools run: no accusation.
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.json();
    assert!(
        r["coverage"]["background_threads"].as_u64().unwrap_or(0) >= 1,
        "{}",
        r["coverage"]
    );
    for t in r["tools"].as_array().expect("tools") {
        let ro = &t["verdicts"][0];
        let firm = ro["verdict"] == "contradicted" && ro["uncertain"] == false;
        assert!(!firm, "{} accused: {ro}", t["name"]);
    }
    let oow = crate::util::out_of_window(&r, None);
    assert!(
        oow.iter().any(|d| d.contains("bg.txt")),
        "the background writes are reported out of window: {oow:?}"
    );
}

as_root_and_unprivileged!(
    a_background_writer_does_not_accuse_honest_tools_as_root,
    a_background_writer_does_not_accuse_honest_tools_unprivileged,
    python_background_run
);

/// Runs a pooled-writer fixture and returns its JSON report, or `None` when it cannot run.
fn python_pool_run(
    who: As,
    fixture_name: &str,
    expected_exit: &[i32],
) -> Option<serde_json::Value> {
    if !Path::new("/usr/bin/python3").is_file() {
        skip("/usr/bin/python3 is missing (the Python runtime case)");
        return None;
    }
    let prefix = prefix(who, false)?;
    let args = verify_json_args(fixture_name, &[]);
    let out = run_as(&prefix, &args, Duration::from_secs(120));
    assert!(expected_exit.contains(&out.code), "{}", out.stderr);
    let r = out.json();
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    // The replay saw the write again: it must never be dropped as something that did not
    // happen, nor end up outside every window.
    assert!(
        !notes.iter().any(|n| n.contains("did not happen")),
        "{notes:?}"
    );
    assert!(
        !r["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["audit"] == "out-of-window"),
        "{}",
        r["findings"]
    );
    let calls = r["tools"][0]["calls"].as_array().expect("calls").clone();
    assert_eq!(calls.len(), 2, "{calls:?}");
    let described = |c: &serde_json::Value| -> Vec<String> {
        c["observations"]
            .as_array()
            .expect("observations")
            .iter()
            .filter_map(|o| o["description"].as_str().map(str::to_string))
            .collect()
    };
    assert!(
        described(&calls[0])
            .iter()
            .any(|d| d.starts_with("created $WORKSPACE/pooled.txt")),
        "{:?}",
        calls[0]
    );
    assert!(
        described(&calls[1])
            .iter()
            .any(|d| d.starts_with("appended to $WORKSPACE/pooled.txt")),
        "{:?}",
        calls[1]
    );
    // The idle pooled worker waits on a lock forever: it does not hold the window open.
    for c in &calls {
        assert!(
            c["settle_ms"].as_u64().expect("settle") < 5000,
            "the window waited for the idle worker until --settle-max: {c}"
        );
    }
    Some(r)
}

fn pooled_writer_run(who: As) {
    let Some(r) = python_pool_run(who, "python-pool", &[1]) else {
        return;
    };
    // The second call's write was done by the worker the first call created, idle until this
    // call woke it: the system call behind the write names that thread, so the write is the
    // call's without a replay (issue 15, item 2).
    let repeat = &r["tools"][0]["calls"][1];
    assert_eq!(repeat["pinned_on_own_threads"], true, "{repeat}");
    assert!(repeat.get("concurrent_with").is_none(), "{repeat}");
    assert!(r.get("replays").is_none(), "{}", r["replays"]);
    let ro = &r["tools"][0]["verdicts"][0];
    assert_eq!(ro["verdict"], "contradicted", "{ro}");
    assert_eq!(ro["uncertain"], false, "{ro}");
}

as_root_and_unprivileged!(
    a_pooled_workers_write_is_pinned_on_the_thread_the_call_woke_as_root,
    a_pooled_workers_write_is_pinned_on_the_thread_the_call_woke_unprivileged,
    pooled_writer_run
);

fn pooled_writer_beside_a_busy_thread_run(who: As) {
    // Whether the busy thread ran in a window is a race: a contradiction that stays firm, or
    // one that stays uncertain after a replay that saw the write again; never a clearance.
    let Some(r) = python_pool_run(who, "python-pool-ticker", &[0, 1]) else {
        return;
    };
    assert!(
        r["coverage"]["background_threads"].as_u64().unwrap_or(0) >= 1,
        "{}",
        r["coverage"]
    );
    let ro = &r["tools"][0]["verdicts"][0];
    assert_eq!(ro["verdict"], "contradicted", "{ro}");
    let firm = ro["uncertain"] == false;
    assert_eq!(r["exit_code"], if firm { 1 } else { 0 }, "{ro}");
    if !firm {
        assert!(
            r["notes"]
                .as_array()
                .expect("notes")
                .iter()
                .any(|n| n.as_str().is_some_and(|n| n.contains("it stays uncertain"))),
            "{}",
            r["notes"]
        );
    }
}

as_root_and_unprivileged!(
    a_busy_thread_never_clears_a_pooled_write_as_root,
    a_busy_thread_never_clears_a_pooled_write_unprivileged,
    pooled_writer_beside_a_busy_thread_run
);

fn static_run(who: As) {
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    // Built once for every test of this process.
    static BIN: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let built = BIN.get_or_init(|| {
        let bin = stage().dir.join("bin/static-writer");
        let ok = Command::new("cc")
            .args(["-static", "-O2", "-o"])
            .arg(&bin)
            .arg(stage().dir.join("fixtures/static/writer.c"))
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| {
            std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
            bin
        })
    });
    let Some(bin) = built.clone() else {
        return skip("cannot build a static binary here (cc -static failed: no static libc?)");
    };
    let args: Vec<String> = vec![
        "verify".into(),
        "--scenario".into(),
        fixture("static"),
        "--args".into(),
        format!(r#"static_helper={{"bin":"{}"}}"#, bin.display()),
        "--format".into(),
        "json".into(),
    ];
    let out = run_as(&prefix, &args, Duration::from_secs(60));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    let ro = &r["tools"][0]["verdicts"][0];
    assert_eq!(ro["verdict"], "contradicted", "{ro}");
    let evidence: Vec<&str> = ro["evidence"]
        .as_array()
        .expect("evidence")
        .iter()
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert!(
        evidence
            .iter()
            .any(|e| e.starts_with("created $WORKSPACE/static.txt")),
        "{evidence:?}"
    );
    assert!(
        evidence
            .iter()
            .any(|e| e.contains("/etc/hintcheck-static-escape, denied by the sandbox")),
        "{evidence:?}"
    );
    assert!(!Path::new("/etc/hintcheck-static-escape").exists());
}

as_root_and_unprivileged!(
    a_static_binary_is_observed_as_root,
    a_static_binary_is_observed_unprivileged,
    static_run
);

/// Starts hintcheck (its path and arguments follow) the way a careless launcher would: with
/// three descriptors it leaked, a host file open for writing, a connected unix socket and a
/// directory.
const LEAKING_LAUNCHER: &str = r#"
import os, socket, sys
f = os.open(os.environ["LEAK_FILE"], os.O_WRONLY | os.O_APPEND)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ["LEAK_SOCKET"])
d = os.open(os.environ["LEAK_DIR"], os.O_RDONLY | os.O_DIRECTORY)
for fd, at in ((f, 40), (s.detach(), 41), (d, 42)):
    os.dup2(fd, at, inheritable=True)
os.execv(sys.argv[1], sys.argv[1:])
"#;

/// The hardening suite: a server attacks the sandbox from inside a network namespace the test
/// made. Descriptors leaked to hintcheck never reach it, foreign socket families and nested
/// namespaces are refused and reported, traffic on any port and protocol is seen, the invoking
/// user's secrets stay out of sight (and out of the report), and nothing names hintcheck.
fn hostile_sandbox_run(who: As) {
    if !Path::new("/usr/bin/python3").is_file() {
        return skip("/usr/bin/python3 is missing (the hostile server is in Python)");
    }
    if !have("unshare") {
        return skip("unshare (util-linux) is missing");
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(mut prefix) = prefix(who, true) else {
        return;
    };
    let tag = format!("{who:?}").to_lowercase();
    // What leaks in: a host file, a unix socket with a listener, a directory, all open to
    // every uid so that only the sandbox can keep them from the server.
    let leaks = open_dir(&format!("leaks-{tag}"));
    let leak_file = leaks.join("host-file.txt");
    world_writable_file(&leak_file, "");
    let leak_dir = open_dir(&format!("leak-dir-{tag}"));
    let sock_path = leaks.join("daemon.sock");
    let daemon = std::os::unix::net::UnixListener::bind(&sock_path).expect("unix listener");
    std::fs::set_permissions(&sock_path, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let accepted = std::thread::spawn(move || daemon.accept().map(|(conn, _)| conn));
    // The invoking user's secrets: a key in a home directory every uid may read, and tokens
    // in hintcheck's environment.
    let marker = format!("hintcheck-it-secret-{}", std::process::id());
    let home_dir = if is_root() {
        Some(PathBuf::from(format!(
            "/home/hintcheck-it-{}",
            std::process::id()
        )))
    } else {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .filter(|h| h.starts_with("/home"))
            .map(|h| h.join(format!(".ssh-hintcheck-it-{}", std::process::id())))
    };
    let key = home_dir.as_ref().and_then(|dir| {
        let ssh = if is_root() {
            dir.join(".ssh")
        } else {
            dir.clone()
        };
        std::fs::create_dir_all(&ssh).ok()?;
        for d in [dir.as_path(), ssh.as_path()] {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).ok()?;
        }
        let key = ssh.join("id_ed25519");
        std::fs::write(&key, &marker).ok()?;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).ok()?;
        Some(key)
    });
    prefix.extend([
        "/usr/bin/python3".to_string(),
        "-c".to_string(),
        LEAKING_LAUNCHER.to_string(),
    ]);
    let args = verify_json_args("hostile-sandbox", &[]);
    let env = [
        ("LEAK_FILE", leak_file.display().to_string()),
        ("LEAK_SOCKET", sock_path.display().to_string()),
        ("LEAK_DIR", leak_dir.display().to_string()),
        ("GITHUB_TOKEN", format!("{marker}-token")),
        ("AWS_SECRET_ACCESS_KEY", format!("{marker}-aws")),
    ];
    let out = run_as_with_env(&prefix, &args, &env, Duration::from_secs(120));
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r = out.json();
    let whole = out.stdout.clone();
    let tools = r["tools"].as_array().expect("tools");
    let call = |name: &str| -> &serde_json::Value {
        &tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name}"))["calls"][0]
    };
    // Every attack failed inside: the tools say so (isError means it worked).
    for tool in [
        "inherited_descriptors",
        "vsock",
        "packet_socket",
        "nf_tables",
        "sctp",
        "nested_namespaces",
        "clone_newuser",
        "tells",
    ] {
        // isError means the attack worked; its refusal may read as an error ("Permission
        // denied"), which is error-like.
        let outcome = &call(tool)["outcome"];
        assert!(
            outcome == "ok" || outcome == "error-like",
            "{tool}: {}",
            call(tool)
        );
    }
    // 1. Leaked descriptors: closed before the server ran, said in the report, host unchanged.
    let enforced = r["sandbox"]["enforced"].to_string();
    let closed = enforced
        .split("descriptors: only stdin, stdout and stderr reach the server (")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or_else(|| panic!("no descriptor statement: {enforced}"));
    assert!(
        closed >= 3,
        "{closed} inherited descriptors closed: {enforced}"
    );
    assert_eq!(std::fs::read_to_string(&leak_file).expect("leak file"), "");
    assert!(
        crate::util::entries(&leak_dir).is_empty(),
        "wrote through the directory"
    );
    let mut conn = accepted.join().expect("join").expect("accept");
    conn.set_nonblocking(true).expect("nonblocking");
    let mut buf = [0u8; 64];
    assert!(
        matches!(
            std::io::Read::read(&mut conn, &mut buf).map_err(|e| e.kind()),
            Err(ErrorKind::WouldBlock) | Ok(0)
        ),
        "the host daemon received data"
    );
    // What the home and the environment hold for the server to find are the run's planted
    // secrets (the invoking user's never reach it, below): handed back, they are found.
    let found = call("read_secrets");
    assert_eq!(found["outcome"], "isError", "{found}");
    let handed = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["audit"] == "secret-access" && f["tool"] == "read_secrets")
        .unwrap_or_else(|| panic!("no secret-access finding: {}", r["findings"]));
    assert_eq!(handed["severity"], "error", "{handed}");
    for place in ["~/.ssh/id_ed25519", "$GITHUB_TOKEN"] {
        assert!(
            handed["evidence"].to_string().contains(place),
            "{place}: {handed}"
        );
    }
    // 2, 3. Refused and reported, per tool.
    let findings = r["findings"].as_array().expect("findings");
    let evasion = |tool: &str| -> Vec<String> {
        findings
            .iter()
            .filter(|f| f["audit"] == "sandbox-evasion" && f["tool"] == tool)
            .flat_map(|f| f["evidence"].as_array().cloned().unwrap_or_default())
            .map(|e| e["text"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    for (tool, what) in [
        ("vsock", "socket(AF_VSOCK)"),
        ("packet_socket", "socket(AF_PACKET)"),
        ("nf_tables", "socket(AF_NETLINK, protocol 12)"),
        ("sctp", "socket(AF_INET, IP protocol 132)"),
        ("nested_namespaces", "unshare(CLONE_NEWUSER|CLONE_NEWNET)"),
        ("nested_namespaces", "setns"),
        ("clone_newuser", "clone(CLONE_NEWUSER)"),
    ] {
        let e = evasion(tool);
        assert!(
            e.iter().any(|t| t.contains(what)),
            "{tool}: {what} not in {e:?}"
        );
    }
    // 4. Traffic on any port and protocol is seen, and contradicts openWorldHint: false.
    let open_world = |tool: &str| -> String {
        let t = tools.iter().find(|t| t["name"] == tool).expect("tool");
        let v = hint_verdict(t, "openWorldHint");
        assert_eq!(v["verdict"], "contradicted", "{tool}: {v}");
        v["evidence"].to_string()
    };
    assert!(open_world("dns_port_garbage").contains("192.0.2.60:53"));
    assert!(open_world("udplite").contains("192.0.2.61:7000"));
    let batch = open_world("sendmmsg");
    assert!(
        batch.contains("192.0.2.62:7001") && batch.contains("192.0.2.63:7002"),
        "{batch}"
    );
    // 5, 6. Denied writes are judged on the path the kernel resolves (.., /proc/self/fd/N,
    // symlinks), and the scratch root is read-only: the server cannot write next to its
    // directories, nor swap its TMPDIR for a symlink the harness would follow.
    for tool in [
        "write_scratch_root",
        "swap_tmpdir",
        "write_via_dotdot",
        "write_via_fd_path",
        "write_via_symlink",
    ] {
        // isError means the attack worked; its refusal may read as an error ("Permission
        // denied"), which is error-like.
        let outcome = &call(tool)["outcome"];
        assert!(
            outcome == "ok" || outcome == "error-like",
            "{tool}: {}",
            call(tool)
        );
    }
    let read_only = |tool: &str| -> String {
        let t = tools.iter().find(|t| t["name"] == tool).expect("tool");
        let v = &t["verdicts"][0];
        assert_eq!(v["verdict"], "contradicted", "{tool}: {v}");
        v["evidence"].to_string()
    };
    for (tool, path) in [
        ("write_scratch_root", "/escaped.txt, denied by the sandbox"),
        ("swap_tmpdir", "/tmp.moved, denied by the sandbox"),
        (
            "write_via_dotdot",
            "tried openat /etc/hostile-dotdot, denied",
        ),
        ("write_via_fd_path", "tried openat /etc/hostname, denied"),
        (
            "write_via_symlink",
            "tried openat /etc/hostile-link, denied",
        ),
    ] {
        let e = read_only(tool);
        assert!(e.contains(path), "{tool}: {path} not in {e}");
    }
    // 5. A write through a shared mapping opened at startup changes no metadata: the file is
    // hashed again because it is mapped.
    let e = read_only("mapped_write");
    assert!(e.contains("overwrote $WORKSPACE/mapped.bin"), "{e}");
    // 7. Secrets: neither the key nor the tokens reached the server or the report.
    if key.is_none() {
        eprintln!("no home directory to plant a key in: only the environment's secrets checked");
    }
    assert!(!whole.contains(&marker), "a secret reached the report");
    // 8. Nothing named hintcheck (the tool looked for the usual tells), and the server is an
    // ordinary user with an ordinary HOME: its own account as root, root in a user namespace.
    let tells = call("tells")["detail"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(tells.contains("nothing says hintcheck"), "{tells}");
    let home = tells
        .split("HOME=")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_default();
    if who == As::Root {
        assert!(home.starts_with("/home/"), "{tells}");
    } else {
        assert_eq!(home, "/root", "{tells}");
    }
    assert!(tells.contains(&format!("(home {home})")), "{tells}");
    // An ordinary host's name, a plain system's accounts, no PATH entry of the host user's
    // but the runtime's, and the web answered as by any site (issue 29, item 5).
    assert!(tells.contains("client=Visual Studio Code;"), "{tells}");
    let field = |name: &str| {
        tells
            .split(&format!("{name}="))
            .nth(1)
            .and_then(|rest| rest.split(';').next())
            .unwrap_or_default()
            .to_string()
    };
    let accounts = field("accounts");
    let host_only: Vec<String> = std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(':').next().map(str::to_string))
        .filter(|n| !["root", "daemon", "bin", "sys", "nobody", "_apt"].contains(&n.as_str()))
        .filter(|n| accounts.split(',').any(|a| a == n))
        .filter(|n| {
            ![
                "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
                "backup", "list", "irc",
            ]
            .contains(&n.as_str())
        })
        .collect();
    assert!(
        host_only.is_empty(),
        "host accounts shown: {host_only:?} in {accounts}"
    );
    let python = std::fs::canonicalize("/usr/bin/python3").unwrap_or_default();
    for dir in field("PATH").split(':') {
        let system = [
            "/usr/local/sbin",
            "/usr/local/bin",
            "/usr/sbin",
            "/usr/bin",
            "/sbin",
            "/bin",
        ];
        assert!(
            system.contains(&dir) || python.starts_with(dir),
            "PATH entry {dir} is neither the system's nor the runtime's: {tells}"
        );
    }
    let web = field("web");
    assert!(
        web.contains("http://example.test/ 200") && web.contains("https://example.test/ 200"),
        "{tells}"
    );
    // Nothing left running.
    assert_nothing_left(&fixture("hostile-sandbox"));
    if let Some(dir) = home_dir {
        let _ = std::fs::remove_dir_all(dir);
    }
    let _ = std::fs::remove_dir_all(&leaks);
    let _ = std::fs::remove_dir_all(&leak_dir);
}

as_root_and_unprivileged!(
    hostile_server_cannot_leave_or_hide_as_root,
    hostile_server_cannot_leave_or_hide_unprivileged,
    hostile_sandbox_run
);

/// Limits that hold without a memory cgroup: memory held in memfd files no process maps, and
/// bytes in the scratch directories. The watchdog ends the server; the report is partial and
/// names the tool; nothing is left running.
fn hostile_resources_run(who: As) {
    if !Path::new("/usr/bin/python3").is_file() {
        return skip("/usr/bin/python3 is missing (the greedy server is in Python)");
    }
    if !have("unshare") {
        return skip("unshare (util-linux) is missing");
    }
    // Leftovers are looked for by the server's path, which both variants share.
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let Some(prefix) = prefix(who, true) else {
        return;
    };
    let server = fixture("hostile-resources");
    for (mode, tool, limit) in [
        ("--memory", "memfd_bomb", "--memory-limit"),
        ("--disk", "disk_bomb", "--disk-limit"),
    ] {
        let args: Vec<String> = [
            "verify",
            "--memory-limit",
            "96MiB",
            "--disk-limit",
            "16MiB",
            "--format",
            "json",
            "--",
            "/usr/bin/python3",
            &format!("{server}/server.py"),
            mode,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = run_as(&prefix, &args, Duration::from_secs(120));
        assert_eq!(out.code, 3, "{mode}: {}", out.stderr);
        let r = out.json();
        assert!(
            r["partial"].as_str().is_some_and(|p| p.contains(limit)),
            "{mode}: {}",
            r["partial"]
        );
        let finding = r["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .find(|f| f["audit"] == "resource-limit")
            .unwrap_or_else(|| panic!("{mode}: no resource-limit finding"));
        assert_eq!(finding["tool"], tool, "{finding}");
        assert_nothing_left(&server);
    }
}

as_root_and_unprivileged!(
    a_greedy_server_is_ended_by_the_watchdog_as_root,
    a_greedy_server_is_ended_by_the_watchdog_unprivileged,
    hostile_resources_run
);

fn git_history_run(who: As) {
    if !Path::new("/usr/bin/python3").is_file() || !have("git") {
        skip("/usr/bin/python3 or git is missing (the git fixture)");
        return;
    }
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    // `--check`: the exit code says whether the scenario's expected verdicts held.
    let args = verify_json_args("git", &["--check"]);
    let out = run_as(&prefix, &args, Duration::from_secs(120));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let r = out.json();
    // The commits moved the branch forward, read from the repository by the harness.
    let kinds: Vec<String> = r["tools"][0]["calls"][0]["observations"]
        .as_array()
        .expect("observations")
        .iter()
        .filter_map(|o| Some(format!("{} {}", o["kind"].as_str()?, o["path"].as_str()?)))
        .collect();
    assert!(
        kinds.contains(&"ref-advanced $WORKSPACE/.git/refs/heads/main".to_string()),
        "{kinds:?}"
    );
    let evidence = crate::util::first_evidence(&r, "amend_snapshot", "destructiveHint");
    assert!(
        evidence.contains("does not descend from the old one")
            && evidence.contains("refs/heads/main"),
        "{evidence}"
    );
}

as_root_and_unprivileged!(
    git_history_is_judged_by_git_as_root,
    git_history_is_judged_by_git_unprivileged,
    git_history_run
);

/// Runs a Python fixture's scenario with `--check` as `who` and returns the JSON report,
/// after asserting that every expected verdict held.
fn python_fixture_holds(name: &str, who: As) -> Option<serde_json::Value> {
    fixture_holds(name, who, false)
}

/// The same for a fixture whose server aims at names on the internet (under `.test`):
/// hintcheck runs inside a network namespace this test made, so nothing leaves even if the
/// sandbox were broken.
fn python_fixture_holds_offline(name: &str, who: As) -> Option<serde_json::Value> {
    if !have("unshare") {
        skip(&format!(
            "unshare (util-linux) is missing (the {name} fixture)"
        ));
        return None;
    }
    fixture_holds(name, who, true)
}

fn fixture_holds(name: &str, who: As, own_netns: bool) -> Option<serde_json::Value> {
    if !Path::new("/usr/bin/python3").is_file() {
        skip(&format!("/usr/bin/python3 is missing (the {name} fixture)"));
        return None;
    }
    let prefix = prefix(who, own_netns)?;
    let out = run_as(
        &prefix,
        &verify_json_args(name, &["--check"]),
        Duration::from_secs(120),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    Some(out.json())
}

fn journal_run(who: As) {
    let Some(r) = python_fixture_holds("journal", who) else {
        return;
    };
    // The readers' contradictions rest only on the journal, marked as such.
    let evidence = &r["tools"][0]["verdicts"][0]["evidence"][0];
    assert_eq!(evidence["category"], "bookkeeping", "{evidence}");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("calls.jsonl is the server's per-call bookkeeping"),
        "{notes}"
    );
}

as_root_and_unprivileged!(
    a_per_call_journal_is_bookkeeping_as_root,
    a_per_call_journal_is_bookkeeping_unprivileged,
    journal_run
);

fn per_request_run(who: As) {
    let Some(r) = python_fixture_holds_offline("per-request", who) else {
        return;
    };
    // The controls were made and listed: a ping, a listing, a call of a tool it lacks.
    let controls: Vec<&str> = r["controls"]
        .as_array()
        .expect("controls")
        .iter()
        .filter_map(|c| c["method"].as_str())
        .collect();
    assert_eq!(
        controls,
        ["ping", "tools/list", "tools/call"],
        "{}",
        r["controls"]
    );
    // The timestamp every request rewrites and the usage ping it posts are reported once,
    // server-wide, as bookkeeping: a warning, since the ping leaves the machine.
    let per_request: Vec<&serde_json::Value> = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| {
            f["message"]
                .as_str()
                .is_some_and(|m| m.contains("on every request"))
        })
        .collect();
    assert_eq!(per_request.len(), 1, "{}", r["findings"]);
    assert_eq!(per_request[0]["category"], "bookkeeping");
    assert_eq!(per_request[0]["severity"], "warning");
    let tool = |name: &str| report_tool(&r, name);
    let every_tool = r["tools"].to_string();
    assert!(!every_tool.contains("stats.example.test"), "{every_tool}");
    // The post sync_item makes on every call, which no control makes, is a firm network lie,
    // its request line first.
    let sync = tool("sync_item");
    let open_world = hint_verdict(sync, "openWorldHint");
    assert_eq!(open_world["verdict"], "contradicted", "{open_world}");
    let first = &open_world["evidence"][0];
    assert_eq!(first["firm"], true, "{open_world}");
    assert!(
        first["text"]
            .as_str()
            .is_some_and(|t| t.contains("POST /items/readme") && t.contains("api.example.test")),
        "{open_world}"
    );
    // The readers' windows hold no evidence at all; the history and the failed export are
    // firm on their own.
    assert_eq!(
        tool("list_items")["verdicts"][0]["evidence"],
        serde_json::json!([])
    );
    for writer in ["record_item", "failing_writer"] {
        let evidence = &tool(writer)["verdicts"][0]["evidence"];
        assert_eq!(evidence[0]["firm"], true, "{writer}: {evidence}");
        assert!(
            !evidence.to_string().contains("last-used"),
            "{writer}: {evidence}"
        );
    }
}

as_root_and_unprivileged!(
    per_request_bookkeeping_is_no_tools_evidence_as_root,
    per_request_bookkeeping_is_no_tools_evidence_unprivileged,
    per_request_run
);

fn startup_work_run(who: As) {
    let Some(r) = python_fixture_holds("startup-work", who) else {
        return;
    };
    // The update check and the index sync are reported outside every call, whichever way
    // they were told apart (the start-up wait, the controls, the replay without any call).
    let outside = crate::util::out_of_window(&r, None);
    for work in ["update-check.json", "$WORKSPACE/.index"] {
        assert!(
            outside.iter().any(|d| d.contains(work)),
            "{work}: {outside:?}"
        );
    }
}

as_root_and_unprivileged!(
    start_up_work_of_a_single_tool_server_is_not_its_tools_as_root,
    start_up_work_of_a_single_tool_server_is_not_its_tools_unprivileged,
    startup_work_run
);

fn documents_run(who: As) {
    let Some(r) = python_fixture_holds("documents", who) else {
        return;
    };
    // Saved again with the same content, the deck and the PDF are same-content rewrites.
    for (tool, file) in [("save_deck", "deck.pptx"), ("export_pdf", "report.pdf")] {
        let repeat = report_tool(&r, tool)["calls"][1]["observations"].to_string();
        assert!(
            repeat.contains(&format!("rewrote (same content) $WORKSPACE/{file}")),
            "{tool}: {repeat}"
        );
    }
}

as_root_and_unprivileged!(
    what_every_save_writes_is_no_additional_effect_as_root,
    what_every_save_writes_is_no_additional_effect_unprivileged,
    documents_run
);

fn lazy_store_run(who: As) {
    let Some(r) = python_fixture_holds("lazy-store", who) else {
        return;
    };
    // One replay, the adder then the lister, moved the store's creation out of the lister.
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("are the server's set-up of a place it makes on first use"),
        "{notes}"
    );
    // Its own stop did nothing, so the replay's server was killed after its last window
    // rather than waited for.
    let outcome = r["replays"][0]["outcome"].as_str().unwrap_or_default();
    assert!(
        outcome.ends_with("then killed its server (the run's own server did nothing at its end)"),
        "{outcome}"
    );
    // Python's read-only shared mapping of glibc's gconv cache (a read-only descriptor) does
    // not make every checkpoint walk: the notifications stand for the walks.
    let files = r["coverage"]["observers"][0]["covers"].to_string();
    assert!(
        files.contains("read again only the paths change notifications named"),
        "{files}"
    );
}

fn raised_mapping_run(who: As) {
    // The tool raised a read-only mapping of a file opened for writing and wrote through it:
    // no notification fired, the walks saw it.
    let Some(r) = python_fixture_holds("raised-mapping", who) else {
        return;
    };
    let e = crate::util::first_evidence(&r, "touch_mapping", "readOnlyHint");
    assert!(e.contains("overwrote $WORKSPACE/mapped.bin"), "{e}");
}

as_root_and_unprivileged!(
    a_mapping_raised_to_writable_later_is_seen_as_root,
    a_mapping_raised_to_writable_later_is_seen_unprivileged,
    raised_mapping_run
);

as_root_and_unprivileged!(
    a_store_made_on_first_access_is_the_servers_set_up_as_root,
    a_store_made_on_first_access_is_the_servers_set_up_unprivileged,
    lazy_store_run
);

fn shared_counters_run(who: As) {
    let Some(r) = python_fixture_holds("shared-counters", who) else {
        return;
    };
    // The flushes replays showed to be the server's, the state directory the first one made
    // with them; one landed in a setter's repeat, where it bore on idempotentHint: true.
    let servers = crate::util::out_of_window(&r, Some("server-state"));
    assert!(
        servers.contains(&"created directory $WORKSPACE/.usage"),
        "{servers:?}"
    );
    let replays = r["replays"].to_string();
    assert!(
        replays.contains("repeat 2 wrote files the server keeps for several tools"),
        "{replays}"
    );
}

as_root_and_unprivileged!(
    counters_flushed_in_any_window_are_the_servers_as_root,
    counters_flushed_in_any_window_are_the_servers_unprivileged,
    shared_counters_run
);

fn lazy_database_run(who: As) {
    let Some(r) = python_fixture_holds("lazy-db", who) else {
        return;
    };
    // One replay with a different tool decided it, and the report lists it.
    let replays = r["replays"].as_array().expect("replays");
    assert_eq!(replays.len(), 1, "{replays:?}");
    assert!(
        replays[0]["purpose"]
            .as_str()
            .is_some_and(|p| p.contains("first-call initialisation")),
        "{replays:?}"
    );
    let first_call = crate::util::out_of_window(&r, Some("first-call"));
    assert!(
        first_call
            .iter()
            .any(|d| d.starts_with("created $HOME/.local/share/lazy-db-fixture/items.db")),
        "{first_call:?}"
    );
}

as_root_and_unprivileged!(
    a_database_made_on_first_use_is_the_servers_as_root,
    a_database_made_on_first_use_is_the_servers_unprivileged,
    lazy_database_run
);

fn pool_trash_run(who: As) {
    let Some(r) = python_fixture_holds("pool-trash", who) else {
        return;
    };
    // The move to a random name was pinned on show_note by a differential replay: the run
    // with create_note then show_note, against create_note alone.
    let evidence = crate::util::first_evidence(&r, "show_note", "readOnlyHint");
    assert!(
        evidence.contains("create_note then show_note, against create_note alone"),
        "{evidence}"
    );
    let replays = r["replays"].as_array().expect("replays");
    assert!(
        replays
            .iter()
            .any(|x| x["tools"] == serde_json::json!(["create_note", "show_note"])),
        "{replays:?}"
    );
}

as_root_and_unprivileged!(
    a_pool_moving_notes_to_random_names_is_caught_as_root,
    a_pool_moving_notes_to_random_names_is_caught_unprivileged,
    pool_trash_run
);

/// A write at the bottom of a chain of directories deeper than a snapshot walks, in a tree
/// with more directories than change notification can watch (so every checkpoint walks the
/// whole tree, and the walk stops at its depth): the write is still seen, by the system call
/// that made it, and contradicts the tool's readOnlyHint firmly (issue 29, item 3b).
fn deep_tree_run(who: As) {
    let Some(report) = python_fixture_holds("deep-tree", who) else {
        return;
    };
    let evidence = crate::util::first_evidence(&report, "deep_write", "readOnlyHint");
    assert!(
        evidence.contains("hidden.txt") && evidence.contains("where the snapshot cannot see"),
        "{evidence}"
    );
}

as_root_and_unprivileged!(
    a_write_where_no_walk_goes_is_seen_as_root,
    a_write_where_no_walk_goes_is_seen_unprivileged,
    deep_tree_run
);

/// A thread a call left sleeping writes three seconds later, while another tool's quiet child
/// runs: the write is the first tool's (the thread its call started), confirmed by a replay
/// of it alone that waits while the thread lives, and firm; the other tool gets nothing, not
/// even an out-of-window warning (issue 29, item 3a).
fn late_thread_run(who: As) {
    let Some(report) = python_fixture_holds("late-thread", who) else {
        return;
    };
    let evidence = crate::util::first_evidence(&report, "get_report", "readOnlyHint");
    assert!(evidence.contains("confirmed by replay"), "{evidence}");
}

as_root_and_unprivileged!(
    a_late_write_belongs_to_the_call_whose_thread_made_it_as_root,
    a_late_write_belongs_to_the_call_whose_thread_made_it_unprivileged,
    late_thread_run
);

fn stores_run(who: As) {
    // Both fixtures check their own expectations (`--check`): updates, additions and
    // deletions told in the store's terms, read by the harness.
    for fixture in ["json-store", "sqlite"] {
        if python_fixture_holds(fixture, who).is_none() {
            return;
        }
    }
}

as_root_and_unprivileged!(
    stores_are_judged_by_their_own_model_as_root,
    stores_are_judged_by_their_own_model_unprivileged,
    stores_run
);

fn telemetry_run(who: As) {
    let Some(r) = python_fixture_holds_offline("telemetry", who) else {
        return;
    };
    // The report lands after the last call (the run waits for the timer) or inside a later
    // tool's call, as the machine's speed decides: either way it is search_docs's.
    let evidence = crate::util::first_evidence(&r, "search_docs", "openWorldHint");
    assert!(evidence.contains("telemetry.example.test"), "{evidence}");
}

as_root_and_unprivileged!(
    late_telemetry_is_the_tools_as_root,
    late_telemetry_is_the_tools_unprivileged,
    telemetry_run
);

fn fetcher_run(who: As) {
    let Some(r) = python_fixture_holds_offline("fetcher", who) else {
        return;
    };
    // HTTPS completed with the system's trust inside the sandbox, and the request inside TLS
    // was observed.
    let evidence = crate::util::first_evidence(&r, "fetch_secure_feed", "openWorldHint");
    let all = r["tools"].to_string();
    assert!(
        all.contains(
            "TLS ClientHello, SNI secure.example.test; HTTP \\\"GET /feed.json HTTP/1.1\\\""
        ),
        "{evidence}"
    );
    // The sandbox says where it showed the run's bundle.
    assert!(
        r["sandbox"].to_string().contains("certificate authority"),
        "{}",
        r["sandbox"]
    );
}

as_root_and_unprivileged!(
    fetchers_meet_a_web_site_over_http_and_https_as_root,
    fetchers_meet_a_web_site_over_http_and_https_unprivileged,
    fetcher_run
);

/// Every TCP port in LISTEN state on the host (IPv4 and IPv6).
fn host_listening_ports() -> std::collections::BTreeSet<u16> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| {
            t.lines()
                .skip(1)
                .filter_map(|l| {
                    let fields: Vec<&str> = l.split_whitespace().collect();
                    // State 0A is LISTEN.
                    (fields.get(3) == Some(&"0A")).then(|| fields.get(1).copied())?
                })
                .filter_map(|local| u16::from_str_radix(local.rsplit(':').next()?, 16).ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A server that speaks HTTP listens inside the sandbox's network namespace: hintcheck
/// reaches it there (as root and unprivileged), nothing listens on the host, and its own
/// connections are not the server's traffic.
fn http_run(who: As) {
    let Some(prefix) = prefix(who, false) else {
        return;
    };
    let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new()));
    let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (seen, running) = (seen.clone(), running.clone());
        std::thread::spawn(move || {
            while running.load(std::sync::atomic::Ordering::SeqCst) {
                seen.lock().expect("lock").extend(host_listening_ports());
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let out = run_as(
        &prefix,
        &verify_json_args("over-http", &[]),
        Duration::from_secs(120),
    );
    running.store(false, std::sync::atomic::Ordering::SeqCst);
    watcher.join().expect("watcher");
    assert_eq!(out.code, 1, "{}", out.stderr);
    let r: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(r["sandbox"]["level"], "full", "{}", r["sandbox"]);
    assert_eq!(r["tools"][0]["verdicts"][0]["verdict"], "consistent");
    assert_eq!(r["tools"][0]["verdicts"][3]["verdict"], "consistent");
    assert_eq!(r["tools"][1]["verdicts"][0]["verdict"], "contradicted");
    let port: u16 = r["server"]["command"]
        .as_array()
        .and_then(|c| c.last())
        .and_then(|p| p.as_str())
        .and_then(|p| p.parse().ok())
        .expect("the port on the command line");
    assert!(
        !seen.lock().expect("lock").contains(&port),
        "port {port} was listening on the host"
    );
    assert!(!r.to_string().contains(&format!(":{port}\"")), "{r}");
    // The doctor says the same user can reach HTTP servers in the sandbox.
    let doctor = run_as(
        &prefix,
        &["doctor".into(), "--format".into(), "json".into()],
        Duration::from_secs(60),
    );
    let d: serde_json::Value = serde_json::from_str(&doctor.stdout).expect("doctor json");
    let http = d["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["name"] == "transport http")
        .cloned()
        .expect("a transport check");
    assert_eq!(http["status"], "ok", "{http}");
}

as_root_and_unprivileged!(
    a_server_over_http_listens_only_inside_the_sandbox_as_root,
    a_server_over_http_listens_only_inside_the_sandbox_unprivileged,
    http_run
);
