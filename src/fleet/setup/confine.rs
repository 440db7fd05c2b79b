//! The installers' confinement. npm never runs install scripts and pip never builds from
//! source unless the user opts in, but a package manager is large and a registry package is
//! untrusted: every installer (venv creation, `pip install`, `npm install`, `npm view`) runs
//! in a sandbox of hintcheck's own, the same init and kernel mechanisms as a server's:
//!
//! - writes only to the directory being installed and the sandbox's scratch (the package
//!   manager's cache and HOME live there: empty, and removed afterwards);
//! - reads only the system directories, the installer's runtime, the install directory and
//!   the files the registry settings name: the invoking user's homes are empty tmpfs, and
//!   their other files (outside `/home` too) are unreadable under Landlock;
//! - a clean environment: PATH, the locale and the package managers' own registry, proxy and
//!   certificate settings (`PIP_INDEX_URL`, `npm_config_registry`, `HTTPS_PROXY`, …); no
//!   token or other variable of the user;
//! - the host's network (the registries must be reached), its own mount, pid, IPC and UTS
//!   namespaces, no capabilities, `no_new_privs`, seccomp; as root a uid of its own, the
//!   installed files given back to root afterwards;
//! - without `allow_source_builds`, every `execve` after the installer's own is refused: a
//!   source build (pip's build backend, `setup.py`, a build environment) and anything a
//!   package manager would start for a package (git, node-gyp, a shell) never runs, and the
//!   install fails naming what was refused.
//!
//! With `--sandbox best-effort` an installer that cannot be confined (user namespaces
//! refused) runs unconfined and the report says so; with `--sandbox off` installers run
//! unconfined (still without scripts or source builds).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::SetupError;
use crate::sandbox::policy::{Limits, SandboxConfig, SandboxLevel};
use crate::sandbox::scratch::Scratch;

/// How installers are confined.
#[derive(Debug, Clone, Default)]
pub struct Confinement {
    /// `None`: unconfined (`--sandbox off`); else the sandbox's level.
    pub level: Option<SandboxLevel>,
    /// The hintcheck binary, when the running executable is not hintcheck (a test binary).
    pub exe: Option<PathBuf>,
    /// Whether pip may build packages from source (inside the confinement).
    pub allow_source_builds: bool,
}

impl Confinement {
    /// Confinement as required, the default of `verify`.
    pub fn required() -> Confinement {
        Confinement {
            level: Some(SandboxLevel::Required),
            ..Confinement::default()
        }
    }
}

/// One run of an installer.
#[derive(Debug, Clone)]
pub struct Installer {
    /// The command in words, for messages (`pip install x==1`).
    pub what: String,
    /// The program (absolute).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Where it installs: the only host directories it may write.
    pub writable: Vec<PathBuf>,
    /// Whether it may start other programs (venv creation runs pip through ensurepip; a
    /// source build runs its backend). Package installs without source builds may not.
    pub may_exec: bool,
    /// Whether it may run package code (a source build with `allow_source_builds`): then it
    /// runs confined or not at all.
    pub builds: bool,
}

/// Why an installer that may build packages from source does not run unconfined.
const NO_UNCONFINED_BUILDS: &str = "allow_source_builds lets a package's own code run, which happens only inside the installers' sandbox";

/// An installer that was started: the process and what must outlive it.
pub(super) struct Started {
    /// The process (the sandbox's init when confined).
    pub child: Child,
    /// The sandbox's scratch directories (its HOME, TMPDIR and the package manager's cache).
    scratch: Option<Scratch>,
    /// As root, the uid the installer ran as: its files are given back to root.
    run_as: Option<(u32, u32)>,
    writable: Vec<PathBuf>,
    /// Why it runs unconfined, when it does.
    pub unconfined: Option<String>,
}

impl Started {
    /// Cleans up after the installer ended: the scratch is removed and, as root, what it
    /// installed becomes root's.
    pub(super) fn finish(mut self) -> Result<(), SetupError> {
        if let Some(mut s) = self.scratch.take() {
            let _ = s.remove();
        }
        if self.run_as.is_some() {
            for dir in &self.writable {
                if dir.exists() {
                    crate::sandbox::scratch::chown_tree(dir, 0, 0, 0).map_err(|source| {
                        SetupError::Cache {
                            path: dir.clone(),
                            source,
                        }
                    })?;
                }
            }
        }
        Ok(())
    }
}

/// The variables of the user's environment an installer gets: the package managers' own
/// registry, proxy and certificate settings (a private index or a corporate proxy must keep
/// working), nothing else.
const PASSED_THROUGH: [&str; 30] = [
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_NO_INDEX",
    "PIP_TRUSTED_HOST",
    "PIP_CERT",
    "PIP_CLIENT_CERT",
    "PIP_PROXY",
    "PIP_RETRIES",
    "PIP_TIMEOUT",
    "PIP_DEFAULT_TIMEOUT",
    "npm_config_registry",
    "NPM_CONFIG_REGISTRY",
    "npm_config_cafile",
    "NPM_CONFIG_CAFILE",
    "npm_config_strict_ssl",
    "NPM_CONFIG_STRICT_SSL",
    "npm_config_proxy",
    "npm_config_https_proxy",
    "npm_config_noproxy",
    "npm_config_fetch_retries",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

/// The environment of an installer whose HOME and TMPDIR are `home` and `tmp`.
fn installer_env(program: &Path, home: &Path, tmp: &Path) -> Vec<(String, String)> {
    let mut path = vec![
        "/usr/local/bin".to_string(),
        "/usr/bin".into(),
        "/bin".into(),
    ];
    if let Some(dir) = program.parent().map(|d| d.display().to_string()) {
        if !path.contains(&dir) {
            path.insert(0, dir);
        }
    }
    let home = home.display().to_string();
    let tmp = tmp.display().to_string();
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), path.join(":")),
        ("HOME".into(), home.clone()),
        ("TMPDIR".into(), tmp),
        ("LANG".into(), "C.UTF-8".into()),
        ("PIP_CACHE_DIR".into(), format!("{home}/.cache/pip")),
        ("PIP_DISABLE_PIP_VERSION_CHECK".into(), "1".into()),
        ("PIP_NO_INPUT".into(), "1".into()),
        ("npm_config_cache".into(), format!("{home}/.npm")),
        ("npm_config_update_notifier".into(), "false".into()),
        ("npm_config_fund".into(), "false".into()),
        ("npm_config_audit".into(), "false".into()),
    ];
    for key in PASSED_THROUGH {
        if let Ok(v) = std::env::var(key) {
            env.push((key.into(), v));
        }
    }
    env
}

/// The uid installers run as when hintcheck is root: one per hintcheck process, so that the
/// steps of one install (the venv, then pip) can write what the one before made.
fn installer_uid() -> (u32, u32) {
    static UID: std::sync::OnceLock<(u32, u32)> = std::sync::OnceLock::new();
    *UID.get_or_init(crate::sandbox::policy::allocate_run_uid)
}

/// Where an installer's standard output goes: a pipe read into its output tail, or a file
/// (a query whose answer is wanted).
pub(super) fn output(stdout: Option<&std::fs::File>) -> Result<(Stdio, Stdio), std::io::Error> {
    let out = match stdout {
        Some(f) => Stdio::from(f.try_clone()?),
        None => Stdio::piped(),
    };
    Ok((out, Stdio::piped()))
}

/// Starts `installer` with its standard output on `stdout` (piped when `None`) and its
/// standard error piped: confined as `confinement` says, or unconfined (with the reason) where
/// the level allows it.
pub(super) fn start(
    installer: &Installer,
    confinement: &Confinement,
    stdout: Option<&std::fs::File>,
) -> Result<Started, SetupError> {
    let io = |e: std::io::Error| SetupError::Failed {
        what: installer.what.clone(),
        code: -1,
        output: e.to_string(),
    };
    let Some(level) = confinement.level else {
        if installer.builds {
            return Err(SetupError::Confinement {
                what: installer.what.clone(),
                why: format!("{NO_UNCONFINED_BUILDS}, and the sandbox is off"),
            });
        }
        let (out, err) = output(stdout).map_err(io)?;
        return start_plain(installer, out, err, "the sandbox is off (--sandbox off)");
    };
    let (out, err) = output(stdout).map_err(io)?;
    match start_confined(installer, confinement, level, out, err) {
        Ok(started) => Ok(started),
        Err(Refused { why, .. }) if level == SandboxLevel::BestEffort && !installer.builds => {
            let (out, err) = output(stdout).map_err(io)?;
            start_plain(
                installer,
                out,
                err,
                &format!(
                    "the installers' sandbox could not be set up ({why}) and --sandbox is best-effort"
                ),
            )
        }
        Err(Refused { why, remedy }) => Err(SetupError::Confinement {
            what: installer.what.clone(),
            why: match remedy {
                Some(r) => format!("{why}. {r}"),
                None => why,
            },
        }),
    }
}

/// Why the confinement could not be set up, and the fix when there is a known one.
struct Refused {
    why: String,
    remedy: Option<String>,
}

fn start_confined(
    installer: &Installer,
    confinement: &Confinement,
    level: SandboxLevel,
    stdout: Stdio,
    stderr: Stdio,
) -> Result<Started, Refused> {
    let refused = |why: String| Refused { why, remedy: None };
    let scratch = Scratch::create().map_err(|e| refused(crate::text::error_chain(&e)))?;
    let run_as = rustix::process::getuid().is_root().then(installer_uid);
    scratch
        .prepare_sandbox(run_as, 0)
        .map_err(|e| refused(format!("preparing its scratch directories: {e}")))?;
    if let Some((uid, gid)) = run_as {
        for dir in &installer.writable {
            crate::sandbox::scratch::chown_tree(dir, uid, gid, 0)
                .map_err(|e| refused(format!("handing {} to uid {uid}: {e}", dir.display())))?;
        }
    }
    let root = scratch.root().map(Path::to_path_buf).unwrap_or_default();
    let env = installer_env(&installer.program, &scratch.home, &scratch.tmp);
    let hidden = crate::sandbox::policy::private_directories();
    let mut words: Vec<String> = installer.args.clone();
    words.extend(env.iter().map(|(_, v)| v.clone()));
    let mut explicit = installer.writable.clone();
    explicit.push(root.clone());
    let exposed = crate::sandbox::policy::exposed_paths(
        &hidden,
        words.iter().map(String::as_str),
        &installer.program,
        &[],
    );
    let readable = crate::sandbox::policy::readable_paths(
        &hidden,
        words.iter().map(String::as_str),
        &installer.program,
        &exposed,
        &explicit,
    );
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let identity = crate::sandbox::policy::sandbox_identity(run_as, &passwd, &hidden);
    let mut writable = vec![
        scratch.workspace.clone(),
        scratch.home.clone(),
        scratch.tmp.clone(),
    ];
    writable.extend(installer.writable.iter().cloned());
    let config = SandboxConfig {
        level,
        program: installer.program.clone(),
        args: installer.args.clone(),
        env,
        cwd: scratch.workspace.clone(),
        scratch_root: root.clone(),
        writable,
        overlays: Vec::new(),
        shown_temporary: crate::sandbox::policy::named_temporary_entries(
            words.iter().map(String::as_str),
            &root,
        ),
        hidden,
        exposed,
        run_as,
        run_user: identity.added_user,
        // HOME stays the scratch path (the package managers' caches live there).
        home_inside: None,
        home: scratch.home.clone(),
        harness_pid: std::process::id() as i32,
        resolv_conf: std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default(),
        ca_bundle: None,
        limits: Limits::for_uid(
            run_as
                .map(|r| r.0)
                .unwrap_or_else(|| rustix::process::getuid().as_raw()),
        ),
        network_observer: false,
        observe_ports: Vec::new(),
        packet_observer: false,
        connector: false,
        notify: false,
        cgroup: None,
        cgroup_enforces: Vec::new(),
        hostname: crate::sandbox::sandbox_hostname().to_string(),
        simulate_failure: crate::sandbox::policy::simulated_failure(),
        host_network: true,
        readable: Some(readable),
        single_exec: !installer.may_exec,
    };
    let spawned =
        crate::sandbox::confined::spawn(&config, confinement.exe.as_deref(), stdout, stderr);
    if spawned.is_err() && run_as.is_some() {
        // Handed to the installer's uid above: root's again, whatever runs next.
        for dir in &installer.writable {
            let _ = crate::sandbox::scratch::chown_tree(dir, 0, 0, 0);
        }
    }
    match spawned {
        Ok(c) => Ok(Started {
            child: c.child,
            scratch: Some(scratch),
            run_as,
            writable: installer.writable.clone(),
            unconfined: None,
        }),
        Err(e) => Err(Refused {
            why: crate::text::error_chain(&e),
            remedy: match &e {
                crate::sandbox::LaunchError::Sandbox(f) => crate::sandbox::remedy(f),
                _ => None,
            },
        }),
    }
}

/// Starts `installer` as an ordinary process of the invoking user (a clean environment and a
/// HOME of its own still), saying why.
fn start_plain(
    installer: &Installer,
    stdout: Stdio,
    stderr: Stdio,
    why: &str,
) -> Result<Started, SetupError> {
    let failed = |e: std::io::Error| SetupError::Failed {
        what: installer.what.clone(),
        code: -1,
        output: e.to_string(),
    };
    let scratch = Scratch::create().map_err(|e| failed(std::io::Error::other(e.to_string())))?;
    let mut cmd = Command::new(&installer.program);
    cmd.args(&installer.args)
        .env_clear()
        .envs(installer_env(
            &installer.program,
            &scratch.home,
            &scratch.tmp,
        ))
        .current_dir(&scratch.workspace);
    crate::sandbox::process::die_with_hintcheck(&mut cmd);
    cmd.stdin(Stdio::null()).stdout(stdout).stderr(stderr);
    let child = cmd.spawn().map_err(failed)?;
    Ok(Started {
        child,
        scratch: Some(scratch),
        run_as: None,
        writable: Vec::new(),
        unconfined: Some(why.to_string()),
    })
}
