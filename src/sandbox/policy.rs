//! What the sandbox is asked to do ([`SandboxConfig`], sent from the harness to the init
//! process) and what it reports back as done ([`Enforcement`]). Both cross a process
//! boundary as JSON, so they are plain data.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How strict the sandbox must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxLevel {
    /// Every isolation step must succeed, or the server is not started.
    Required,
    /// Steps that fail are reported and skipped.
    BestEffort,
}

/// The environment variable that carries the config to `__sandbox-init`.
pub const CONFIG_ENV: &str = "HINTCHECK_SANDBOX_CONFIG";

/// Everything the init process needs; the harness resolves paths before sending it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SandboxConfig {
    /// Required or best effort.
    pub level: SandboxLevel,
    /// The server program, as an absolute path.
    pub program: PathBuf,
    /// Its arguments (without argv[0]).
    pub args: Vec<String>,
    /// Its complete environment.
    pub env: Vec<(String, String)>,
    /// Its working directory.
    pub cwd: PathBuf,
    /// The scratch root (holds workspace, home, tmp): bound at the same path inside.
    pub scratch_root: PathBuf,
    /// Directories the server may write (inside the scratch root).
    pub writable: Vec<PathBuf>,
    /// Host directories covered by an overlay inside the sandbox: the server may write there,
    /// its writes land in `scratch_root/.sandbox/overlay-N/upper` and never reach the host.
    #[serde(default)]
    pub overlays: Vec<PathBuf>,
    /// Entries of the host's /tmp that the command line names: visible read-only inside,
    /// where /tmp is otherwise a fresh tmpfs.
    pub visible_tmp: Vec<PathBuf>,
    /// In root mode, the uid and gid the server runs as.
    pub run_as: Option<(u32, u32)>,
    /// The pid of the harness, to notice when it is already gone.
    pub harness_pid: i32,
    /// Content of the sandbox's resolv.conf.
    pub resolv_conf: String,
    /// Resource limits for the server.
    pub limits: Limits,
    /// Whether to route every address to `lo` and hand the harness a DNS stub socket and TCP
    /// listeners (the lo-local network observer).
    #[serde(default)]
    pub network_observer: bool,
    /// The TCP ports whose first bytes the network observer reads.
    #[serde(default)]
    pub observe_ports: Vec<u16>,
    /// Whether to report write, connect and exec attempts through a seccomp listener (the
    /// harness must then answer every notification).
    #[serde(default)]
    pub notify: bool,
    /// The cgroup the init moves itself into before forking (root mode, where available).
    #[serde(default)]
    pub cgroup: Option<PathBuf>,
    /// What that cgroup enforces, for the report.
    #[serde(default)]
    pub cgroup_enforces: Vec<String>,
    /// A step to fail on purpose with EPERM, for testing the failure paths (user namespaces
    /// restricted by AppArmor cannot be reproduced on every test machine). Set from
    /// [`SIMULATE_FAILURE_ENV`].
    #[serde(default)]
    pub simulate_failure: Option<String>,
}

/// Names a sandbox step that fails on purpose (tests only).
pub const SIMULATE_FAILURE_ENV: &str = "HINTCHECK_SIMULATE_SANDBOX_FAILURE";

/// The step to fail on purpose, if the environment asks for one.
pub fn simulated_failure() -> Option<String> {
    std::env::var(SIMULATE_FAILURE_ENV)
        .ok()
        .filter(|s| !s.is_empty())
}

/// Resource limits applied to the server with `setrlimit`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Limits {
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// RLIMIT_FSIZE in bytes.
    pub file_size: u64,
    /// RLIMIT_CPU in seconds.
    pub cpu_seconds: u64,
    /// RLIMIT_NPROC. It counts every process of the uid on the host (not only the sandbox's),
    /// so the harness sets it to what the uid already runs plus a margin.
    pub processes: u64,
    /// RLIMIT_DATA in bytes: a memory backstop that, unlike RLIMIT_AS, leaves the large
    /// `PROT_NONE` reservations of Go and JVM runtimes alone.
    pub data_bytes: u64,
}

impl Limits {
    /// Limits for a server running as host uid `uid`: RLIMIT_NPROC counts that uid's
    /// processes across the whole host, so the margin is added to what already runs.
    pub fn for_uid(uid: u32) -> Limits {
        let running = std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_str()
                            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
                    })
                    .filter(|e| {
                        std::fs::read_to_string(e.path().join("status")).is_ok_and(|s| {
                            s.lines()
                                .find(|l| l.starts_with("Uid:"))
                                .and_then(|l| l.split_whitespace().nth(1))
                                .and_then(|v| v.parse::<u32>().ok())
                                == Some(uid)
                        })
                    })
                    .count() as u64
            })
            .unwrap_or(0);
        Limits {
            processes: running + 512,
            ..Limits::default()
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            open_files: 4096,
            file_size: 1024 * 1024 * 1024,
            cpu_seconds: 3600,
            processes: 1024,
            data_bytes: 8 * 1024 * 1024 * 1024,
        }
    }
}

/// What the sandbox enforced, as reported by the server child right before `execve`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Enforcement {
    /// Whether a user namespace was used (unprivileged mode).
    pub user_namespace: bool,
    /// The namespaces the server lives in (`net`, `mnt`, `pid`, `ipc`, `uts`, `user`).
    pub namespaces: Vec<String>,
    /// The uid and gid the server runs as, seen from the host.
    pub host_uid: u32,
    /// See `host_uid`.
    pub host_gid: u32,
    /// Mounts made inside (tmpfs over /run, …).
    pub mounts: Vec<String>,
    /// `full`, `partial` or `none`.
    pub landlock: String,
    /// The Landlock ABI in effect, when any.
    pub landlock_abi: Option<u32>,
    /// What the seccomp filter does, or why there is none.
    pub seccomp: String,
    /// Whether `no_new_privs` is set.
    pub no_new_privs: bool,
    /// Whether every capability set is empty.
    pub capabilities_dropped: bool,
    /// Limits applied.
    pub rlimits: Vec<String>,
    /// The network observer, when it was set up.
    #[serde(default)]
    pub network_observer: Option<String>,
    /// What the run's cgroup enforces (root mode), empty without one.
    #[serde(default)]
    pub cgroup: Vec<String>,
    /// Steps that failed in best-effort mode.
    pub degraded: Vec<String>,
}

/// The top-level entries of /tmp that `words` (a command line, environment values) name,
/// except the scratch root's: the sandbox shows them read-only.
pub fn named_tmp_entries<'a>(
    words: impl IntoIterator<Item = &'a str>,
    scratch_root: &std::path::Path,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    // Entries inside the scratch root are bound read-write anyway.
    let scratch_top = (scratch_root.parent() == Some(std::path::Path::new("/tmp")))
        .then(|| scratch_root.to_path_buf());
    for word in words {
        for candidate in std::iter::once(word).chain(word.split_once('=').map(|(_, v)| v)) {
            let Ok(rel) = std::path::Path::new(candidate).strip_prefix("/tmp") else {
                continue;
            };
            let Some(first) = rel.components().next() else {
                continue;
            };
            let top = std::path::Path::new("/tmp").join(first);
            if Some(&top) == scratch_top.as_ref() || !top.exists() || out.contains(&top) {
                continue;
            }
            out.push(top);
        }
    }
    out
}
