//! `hintcheck doctor`: what the sandbox can enforce and observe on this machine, found by
//! really setting it up in a throw-away sandbox (on Ubuntu 24.04 `unshare` succeeds and the
//! user namespace is still useless, so only the whole setup proves anything), with the exact
//! remedy for each gap.

use serde::Serialize;

use super::control::StepFailure;
use super::policy::{Limits, SandboxConfig, SandboxLevel};
use super::process::{LaunchSpec, ServerProcess, resolve_program};
use super::scratch::Scratch;
use super::{Enforcement, LaunchError, SandboxStatus, remedy};

/// One line of the doctor's report.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// `ok`, `degraded`, `missing` or `info`.
    pub status: &'static str,
    /// What was found.
    pub detail: String,
    /// How to fix it, when it is not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remedy: Option<String>,
    /// A shell script that applies the narrowest remedy without questions (for automation
    /// such as the GitHub Action), when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

/// The doctor's findings.
#[derive(Debug, Clone, Serialize)]
pub struct DoctorReport {
    /// Whether `--sandbox required` (the default) will work.
    pub required_sandbox_available: bool,
    /// The sandbox level a run would report (`full`, `partial`, `none`).
    pub level: String,
    /// Every check.
    pub checks: Vec<Check>,
    /// What a run would state as enforced, when the sandbox works.
    pub enforced: Vec<String>,
}

fn check(
    name: &str,
    status: &'static str,
    detail: impl Into<String>,
    remedy: Option<String>,
) -> Check {
    Check {
        name: name.into(),
        status,
        detail: detail.into(),
        remedy,
        fix: None,
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// An AppArmor profile that lets this very binary create user namespaces.
pub fn apparmor_profile() -> String {
    let exe = std::fs::read_link("/proc/self/exe")
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "/usr/local/bin/hintcheck".into());
    format!(
        "sudo tee /etc/apparmor.d/hintcheck >/dev/null <<'EOF'\nabi <abi/4.0>,\ninclude <tunables/global>\nprofile hintcheck {exe} flags=(unconfined) {{\n  userns,\n}}\nEOF\nsudo apparmor_parser -r /etc/apparmor.d/hintcheck"
    )
}

/// A throw-away sandbox around `true`: its scratch directories, launch spec and config. The
/// doctor probes with it; the start-up benchmark times it.
pub fn probe_setup(
    level: SandboxLevel,
) -> Result<(Scratch, LaunchSpec, SandboxConfig), StepFailure> {
    let fail = |step: &str, message: String| StepFailure {
        step: step.into(),
        errno: None,
        message,
    };
    let scratch = Scratch::create().map_err(|e| fail("scratch", e.to_string()))?;
    let run_as = rustix::process::getuid()
        .is_root()
        .then(super::policy::allocate_run_uid);
    scratch
        .prepare_sandbox(run_as, 0)
        .map_err(|e| fail("scratch", e.to_string()))?;
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    let program = resolve_program("true", Some(&path)).map_err(|e| fail("probe", e.to_string()))?;
    let spec = LaunchSpec {
        program: program.display().to_string(),
        args: Vec::new(),
        env: vec![("PATH".into(), path)],
        cwd: scratch.workspace.clone(),
        run_id: format!("probe-{}", std::process::id()),
    };
    let hidden = super::policy::private_directories();
    let exposed = super::policy::exposed_paths(&hidden, [], &program, &[]);
    let scratch_root = scratch.root().map(|p| p.to_path_buf()).unwrap_or_default();
    let readable = super::policy::readable_paths(
        &hidden,
        [],
        &program,
        &exposed,
        std::slice::from_ref(&scratch_root),
    );
    let identity = super::policy::sandbox_identity(
        run_as,
        &std::fs::read_to_string("/etc/passwd").unwrap_or_default(),
        &hidden,
    );
    let config = SandboxConfig {
        level,
        program,
        args: Vec::new(),
        env: spec.env.clone(),
        cwd: scratch.workspace.clone(),
        scratch_root,
        writable: vec![
            scratch.workspace.clone(),
            scratch.home.clone(),
            scratch.tmp.clone(),
        ],
        shown_temporary: Vec::new(),
        hidden,
        exposed,
        overlays: Vec::new(),
        notify: false,
        network_observer: false,
        observe_ports: Vec::new(),
        packet_observer: true,
        connector: false,
        run_as,
        run_user: identity.added_user.clone(),
        home_inside: identity.home.clone(),
        home: scratch.home.clone(),
        harness_pid: std::process::id() as i32,
        resolv_conf: "nameserver 127.0.0.1\n".into(),
        ca_bundle: None,
        limits: Limits::default(),
        simulate_failure: super::policy::simulated_failure(),
        hostname: super::sandbox_hostname().to_string(),
        cgroup: None,
        cgroup_enforces: Vec::new(),
        host_network: false,
        readable: Some(readable),
        single_exec: false,
    };
    Ok((scratch, spec, config))
}

/// What the probe found about reaching a server that speaks HTTP inside the sandbox: `Ok`
/// when a connection to a port where nothing listens was refused inside its network
/// namespace (the connector works), else what went wrong.
type HttpProbe = Result<(), String>;

/// Sets up a throw-away sandbox around `true` and reports what it enforced (and whether a
/// server that speaks HTTP could be reached in it) or where it failed.
async fn probe_sandbox(level: SandboxLevel) -> Result<(Enforcement, HttpProbe), StepFailure> {
    let (_scratch, mut spec, mut config) = probe_setup(level)?;
    // A server that stays up while a connection is tried in its namespace (`true` would be
    // gone, and its sandbox with it, before the connector answered).
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
    if let Ok(sleep) = resolve_program("sleep", Some(&path)) {
        if sleep.parent() == config.program.parent() {
            spec.program = sleep.display().to_string();
            spec.args = vec!["10".into()];
            config.program = sleep;
            config.args = spec.args.clone();
        }
    }
    // As a run sets it up: the recorder and the network observer's sockets (routes to `lo`,
    // the DNS stub's and listeners' sockets handed over) are part of what it enforces. The
    // sockets are only checked to be handed over: nothing serves them here.
    config.notify = true;
    config.network_observer = true;
    config.observe_ports = vec![80, 443, 8080, 8443];
    config.connector = true;
    match ServerProcess::spawn_sandboxed(&spec, &config, None, |sockets| sockets, None).await {
        Ok(mut started) => {
            drop(started.pipes);
            // Port 9 (discard): nothing listens there in a fresh namespace.
            let http = match started.connector.take() {
                Some(c) => match tokio::task::spawn_blocking(move || c.connect(9)).await {
                    Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Ok(()),
                    Ok(Ok(_)) => Ok(()),
                    Ok(Err(e)) => Err(format!("a connection inside the sandbox failed: {e}")),
                    Err(e) => Err(e.to_string()),
                },
                None => Err("the sandbox handed over no connector".into()),
            };
            let _ = started
                .process
                .shutdown(std::time::Duration::from_millis(50))
                .await;
            Ok((started.enforcement, http))
        }
        Err(LaunchError::Sandbox(f)) => Err(f),
        Err(e) => Err(StepFailure {
            step: "launch".into(),
            errno: None,
            message: e.to_string(),
        }),
    }
}

/// Runs every probe.
pub async fn diagnose() -> DoctorReport {
    let mut checks = Vec::new();
    let root = rustix::process::getuid().is_root();
    check_privileges(root, &mut checks);
    let required = probe_sandbox(SandboxLevel::Required).await;
    let best = match &required {
        Ok(e) => Ok(e.clone()),
        Err(_) => probe_sandbox(SandboxLevel::BestEffort).await,
    };
    let (best, http) = match best {
        Ok((e, http)) => (Ok(e), Some(http)),
        Err(f) => (Err(f), None),
    };
    match &required {
        Ok(_) => checks.push(check(
            "sandbox (required)",
            "ok",
            "every isolation step succeeded",
            None,
        )),
        Err(f) => checks.push(check(
            "sandbox (required)",
            "missing",
            format!("step {} failed: {}", f.step, f.message),
            remedy(f).or_else(|| Some("run under sudo, or use --sandbox best-effort".into())),
        )),
    }
    let (level, enforced) = check_best_effort(&best, &mut checks);
    checks.push(http_check(http));
    check_host(&mut checks);
    DoctorReport {
        required_sandbox_available: required.is_ok(),
        level,
        checks,
        enforced,
    }
}

/// Who runs hintcheck, and what keeps an unprivileged user from user namespaces.
fn check_privileges(root: bool, checks: &mut Vec<Check>) {
    checks.push(check(
        "privileges",
        "info",
        if root {
            "running as root: namespaces without a user namespace; the server runs as a uid of its own for each run (from 1610612736 up, or 65534 when none is free; --run-as chooses one)"
        } else {
            "running unprivileged: the sandbox needs user namespaces"
        },
        None,
    ));
    if let Some(v) = read_trimmed("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") {
        let restricted = v == "1";
        let mut c = check(
            "apparmor userns restriction",
            if restricted && !root { "degraded" } else { "info" },
            format!("kernel.apparmor_restrict_unprivileged_userns = {v}"),
            (restricted && !root).then(|| {
                format!(
                    "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or load a profile for this binary:\n{}",
                    apparmor_profile()
                )
            }),
        );
        // The profile lets only this binary create user namespaces: narrower than the sysctl.
        c.fix = (restricted && !root).then(apparmor_profile);
        checks.push(c);
    }
    if let Some(v) = read_trimmed("/proc/sys/user/max_user_namespaces") {
        if v == "0" && !root {
            let mut c = check(
                "user namespaces",
                "missing",
                "user.max_user_namespaces = 0",
                Some("sudo sysctl -w user.max_user_namespaces=15000".into()),
            );
            c.fix = c.remedy.clone();
            checks.push(c);
        }
    }
}

/// What the best the sandbox can do here enforces (Landlock, seccomp, namespaces, degraded
/// steps): the level a run would get and what it enforces.
fn check_best_effort(
    best: &Result<Enforcement, StepFailure>,
    checks: &mut Vec<Check>,
) -> (String, Vec<String>) {
    let mut enforced = Vec::new();
    let level = match best {
        Ok(e) => {
            let status = SandboxStatus::from_enforcement(e, SandboxLevel::BestEffort);
            let landlock_remedy = (e.landlock != "full").then(|| {
                "a kernel with Landlock ABI 6 or newer (Linux 6.12+) and `landlock` in the lsm= boot parameter".to_string()
            });
            checks.push(check(
                "landlock",
                if e.landlock == "full" {
                    "ok"
                } else {
                    "degraded"
                },
                format!(
                    "{} (ABI {})",
                    e.landlock,
                    e.landlock_abi
                        .map(|a| a.to_string())
                        .unwrap_or_else(|| "none".into())
                ),
                landlock_remedy,
            ));
            checks.push(check(
                "seccomp",
                if e.seccomp == "none" { "missing" } else { "ok" },
                e.seccomp.clone(),
                None,
            ));
            checks.push(check(
                "namespaces",
                "ok",
                format!(
                    "{}{}",
                    e.namespaces.join(", "),
                    if e.user_namespace {
                        " (user namespace)"
                    } else {
                        ""
                    }
                ),
                None,
            ));
            for d in &e.degraded {
                checks.push(check("degraded step", "degraded", d.clone(), None));
            }
            enforced = status.enforced;
            status.level
        }
        Err(f) => {
            checks.push(check(
                "sandbox (best effort)",
                "missing",
                format!(
                    "step {} failed: {}; runs would have no sandbox at all",
                    f.step, f.message
                ),
                remedy(f),
            ));
            "none".into()
        }
    };
    (level, enforced)
}

/// Whether servers that speak HTTP can be reached in the sandbox.
fn http_check(http: Option<Result<(), String>>) -> Check {
    match http {
        Some(Ok(())) => check(
            "transport http",
            "ok",
            "servers that speak HTTP are reached inside the sandbox's network namespace (nothing listens on the host)",
            None,
        ),
        Some(Err(why)) => check(
            "transport http",
            "missing",
            format!("`--transport http` cannot reach a server in the sandbox: {why}"),
            None,
        ),
        None => check(
            "transport http",
            "missing",
            "no sandbox: `--transport http` works only with --no-sandbox (on the host's loopback)",
            None,
        ),
    }
}

/// What the host offers beyond the sandbox's steps: seccomp user notification, TUN, cgroup v2.
fn check_host(checks: &mut Vec<Check>) {
    let notif = read_trimmed("/proc/sys/kernel/seccomp/actions_avail")
        .is_some_and(|a| a.split_whitespace().any(|x| x == "user_notif"));
    checks.push(check(
        "seccomp user notification",
        "info",
        if notif {
            "available (for recording write and connect attempts)"
        } else {
            "not available"
        },
        None,
    ));
    let tun = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .is_ok();
    checks.push(check(
        "/dev/net/tun",
        "info",
        if tun {
            "can be opened (TUN network observer possible)"
        } else {
            "cannot be opened (the lo-local observer needs no TUN)"
        },
        None,
    ));
    let cgroup = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
        || std::path::Path::new("/sys/fs/cgroup/unified/cgroup.controllers").exists();
    checks.push(check(
        "cgroup v2",
        "info",
        if cgroup { "present" } else { "not mounted" },
        None,
    ));
}

/// The doctor's report as text.
pub fn render_text(r: &DoctorReport) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "sandbox: {} — {}\n\n",
        r.level,
        if r.required_sandbox_available {
            "`hintcheck verify` (sandbox required, the default) works here"
        } else {
            "`hintcheck verify` will refuse to start servers (exit 5) until a remedy below is applied"
        }
    ));
    for c in &r.checks {
        o.push_str(&format!("[{:<8}] {}: {}\n", c.status, c.name, c.detail));
        if let Some(fix) = &c.remedy {
            for line in fix.lines() {
                o.push_str(&format!("           fix: {line}\n"));
            }
        }
    }
    if !r.enforced.is_empty() {
        o.push_str("\nA run enforces:\n");
        for e in &r.enforced {
            o.push_str(&format!("  - {e}\n"));
        }
    }
    o
}
