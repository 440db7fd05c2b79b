//! What the sandbox is asked to do ([`SandboxConfig`], sent from the harness to the init
//! process) and what it reports back as done ([`Enforcement`]). Both cross a process
//! boundary as JSON, so they are plain data.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Where distributions keep the system bundle of certificate authorities; the sandbox shows
/// the run's bundle there (see `SandboxConfig::ca_bundle`).
pub const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/pki/tls/cert.pem",
];

/// How strict the sandbox must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxLevel {
    /// Every isolation step must succeed, or the server is not started.
    Required,
    /// Steps that fail are reported and skipped.
    BestEffort,
}

impl SandboxLevel {
    /// Its name in reports and on the command line (`required`, `best-effort`).
    pub fn name(self) -> &'static str {
        match self {
            SandboxLevel::Required => "required",
            SandboxLevel::BestEffort => "best-effort",
        }
    }
}

fn yes() -> bool {
    true
}

/// The environment variable that carries the config to the sandbox init.
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
    /// its writes land in `scratch_root/.state/overlay-N/upper` and never reach the host.
    #[serde(default)]
    pub overlays: Vec<PathBuf>,
    /// Entries of the host's temporary places ([`TEMPORARY_PLACES`]) that the server runs on
    /// or is given (its program, interpreters, script, the paths of its command line and
    /// environment, `--expose` paths): visible read-only inside, at their own paths, where each
    /// of these places is otherwise a fresh tmpfs.
    pub shown_temporary: Vec<PathBuf>,
    /// Places that hold users' private files (home directories, /root): each is covered by an
    /// empty tmpfs inside, so that no key, token or history of the invoking user is readable.
    #[serde(default)]
    pub hidden: Vec<PathBuf>,
    /// Paths inside hidden places the server needs (its program, interpreter and packages,
    /// `--expose` directories): shown read-only at their usual paths.
    #[serde(default)]
    pub exposed: Vec<PathBuf>,
    /// In root mode, the uid and gid the server runs as.
    pub run_as: Option<(u32, u32)>,
    /// The account name of `run_as` where the host's /etc/passwd has none: the sandbox shows
    /// a passwd and group file with it added (many programs, git among them, need the
    /// current user to have an account).
    #[serde(default)]
    pub run_user: Option<String>,
    /// Where the scratch HOME is shown inside (`/home/dev`, `/root`): the home directory of the
    /// account the server runs as, so that its HOME looks like a developer's. `None` keeps the
    /// scratch path.
    #[serde(default)]
    pub home_inside: Option<PathBuf>,
    /// The scratch HOME on the host (bound at `home_inside`).
    #[serde(default)]
    pub home: PathBuf,
    /// The pid of the harness, to notice when it is already gone.
    pub harness_pid: i32,
    /// Content of the sandbox's resolv.conf.
    pub resolv_conf: String,
    /// A CA bundle (the system's plus the run's own authority) to show at the system bundle's
    /// paths inside the sandbox, so that HTTPS to the observer's listeners completes there
    /// and nowhere else.
    #[serde(default)]
    pub ca_bundle: Option<PathBuf>,
    /// Resource limits for the server.
    pub limits: Limits,
    /// Whether to route every address to `lo` and hand the harness a DNS stub socket and TCP
    /// listeners (the lo-local network observer).
    #[serde(default)]
    pub network_observer: bool,
    /// The TCP ports whose first bytes the network observer reads.
    #[serde(default)]
    pub observe_ports: Vec<u16>,
    /// Whether the network observer gets a packet socket on `lo` (guard, which reads no
    /// packets, saves its making).
    #[serde(default = "yes")]
    pub packet_observer: bool,
    /// Whether the harness gets connections into the sandbox's network namespace (a server
    /// that speaks HTTP; see [`super::connector`]).
    #[serde(default)]
    pub connector: bool,
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
    /// The host name inside the sandbox (see [`super::sandbox_hostname`]).
    #[serde(default)]
    pub hostname: String,
    /// Keep the host's network namespace (installers, which need the package registries):
    /// no network namespace of its own, no observer, the host's resolver configuration.
    #[serde(default)]
    pub host_network: bool,
    /// Where reading and executing is allowed, beneath each of these paths only (the
    /// writable directories and the sandbox's own tmpfs mounts are always readable): the
    /// system directories, the server's runtime and package, what `--expose` names. `None`
    /// allows reading everywhere.
    #[serde(default)]
    pub readable: Option<Vec<PathBuf>>,
    /// Refuse every `execve` after the one that starts the program (`EPERM`), and every
    /// `execveat`: an installer that would build a package from source starts the build in
    /// another process, which never runs.
    #[serde(default)]
    pub single_exec: bool,
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
        use std::os::unix::fs::MetadataExt;
        // A process's /proc directory is owned by its user: one stat each, not a read of
        // its status (which costs ten times as much on a busy host).
        let running = std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        e.file_name()
                            .to_str()
                            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
                    })
                    .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
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
    /// Descriptors inherited from whatever started hintcheck, closed before anything ran.
    #[serde(default)]
    pub inherited_descriptors_closed: usize,
    /// Where Landlock let the server read, beyond the system directories
    /// ([`SYSTEM_READABLE`]); `None` when reading was allowed everywhere.
    #[serde(default)]
    pub readable_beyond_system: Option<Vec<String>>,
}

/// The places every user may write to that the sandbox covers with a tmpfs of its own: what
/// the host keeps there is out of sight except the entries the server runs on
/// ([`named_temporary_entries`]) and the scratch root.
pub const TEMPORARY_PLACES: [&str; 3] = ["/tmp", "/var/tmp", "/dev/shm"];

/// The top-level entries of the [`TEMPORARY_PLACES`] that `words` (a command line, its
/// program and interpreters, environment values, `--expose` paths) name, except the scratch
/// root's: the sandbox shows them read-only.
pub fn named_temporary_entries<'a>(
    words: impl IntoIterator<Item = &'a str>,
    scratch_root: &std::path::Path,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for word in words {
        for candidate in path_candidates(word) {
            let candidate = std::path::Path::new(candidate);
            for place in TEMPORARY_PLACES.map(std::path::Path::new) {
                let Ok(rel) = candidate.strip_prefix(place) else {
                    continue;
                };
                let Some(std::path::Component::Normal(first)) = rel.components().next() else {
                    continue;
                };
                let top = place.join(first);
                // Entries inside the scratch root are bound read-write anyway; a symbolic
                // link (anyone may make one there) would show what it points at.
                let plain =
                    std::fs::symlink_metadata(&top).is_ok_and(|m| !m.file_type().is_symlink());
                if top == scratch_root || !plain || out.contains(&top) {
                    continue;
                }
                out.push(top);
            }
        }
    }
    out
}

/// The first uid (and gid) of the range a root run gives its server: one of its own per run,
/// so that `RLIMIT_NPROC` counts this run's processes only and no two runs share an owner.
pub const RUN_UID_BASE: u32 = 0x6000_0000;
/// How many uids the range holds.
pub const RUN_UID_COUNT: u32 = 1 << 16;

/// A uid (and the same gid) of the reserved range that no process uses and no account names,
/// starting at a point that differs between processes and calls.
pub fn allocate_run_uid() -> (u32, u32) {
    static CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let mut in_use: std::collections::HashSet<u32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
                .filter_map(|s| {
                    s.lines()
                        .find(|l| l.starts_with("Uid:"))
                        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
                })
                .collect()
        })
        .unwrap_or_default();
    in_use.extend(
        std::fs::read_to_string("/etc/passwd")
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(':').nth(2)?.parse::<u32>().ok()),
    );
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let start = std::process::id()
        .wrapping_mul(2_654_435_761)
        .wrapping_add(nanos)
        .wrapping_add(CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) * 7919);
    (0..RUN_UID_COUNT)
        .map(|i| RUN_UID_BASE + start.wrapping_add(i) % RUN_UID_COUNT)
        .find(|uid| !in_use.contains(uid))
        .map(|uid| (uid, uid))
        .unwrap_or((65534, 65534))
}

/// Who the server is inside the sandbox: the accounts it sees, its user name and where its HOME
/// appears.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxIdentity {
    /// The account added to the sandbox's /etc/passwd for a run's own uid (the host has none).
    pub added_user: Option<String>,
    /// The user name (USER and LOGNAME), when the server's uid has an account.
    pub user: Option<String>,
    /// Where the scratch HOME is shown: the account's home directory, when it lies in a hidden
    /// place (which the sandbox covers anyway); `None` keeps the scratch path.
    pub home: Option<PathBuf>,
}

/// The identity of a server running as `run_as` (root mode) or as uid 0 of a user namespace
/// (`None`), on a host whose /etc/passwd is `passwd` and whose hidden places are `hidden`.
pub fn sandbox_identity(
    run_as: Option<(u32, u32)>,
    passwd: &str,
    hidden: &[PathBuf],
) -> SandboxIdentity {
    let uid = run_as.map_or(0, |r| r.0);
    let account = passwd.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 6 && f[2] == uid.to_string()).then(|| (f[0].to_string(), PathBuf::from(f[5])))
    });
    let (added_user, user, home) = match account {
        Some((name, home)) => (None, Some(name), home),
        None => {
            let name = run_user_name(passwd);
            (
                Some(name.clone()),
                Some(name.clone()),
                Path::new("/home").join(name),
            )
        }
    };
    let shown = hidden
        .iter()
        .any(|h| home.starts_with(h))
        .then_some(home)
        .filter(|h| h.components().count() > 1);
    SandboxIdentity {
        added_user,
        user,
        home: shown,
    }
}

/// The account name a run's own uid gets in the sandbox's `/etc/passwd`: an ordinary one the
/// host does not use already.
pub fn run_user_name(host_passwd: &str) -> String {
    let taken: Vec<&str> = host_passwd
        .lines()
        .filter_map(|l| l.split(':').next())
        .collect();
    ["dev", "developer", "builder", "work"]
        .into_iter()
        .find(|n| !taken.contains(n))
        .unwrap_or("dev")
        .to_string()
}

/// The places on this host that hold users' private files: `/home`, `/root`, and the invoking
/// user's home directory where it lies elsewhere (never `/` or a system directory). Symlinked
/// places are named by their target, which is what a mount covers.
pub fn private_directories() -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = vec![PathBuf::from("/home"), PathBuf::from("/root")];
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        candidates.push(PathBuf::from(home));
    }
    let system = [
        "/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/var", "/opt", "/proc", "/sys",
        "/dev", "/run", "/tmp", "/srv", "/mnt", "/media", "/boot",
    ];
    let mut out: Vec<PathBuf> = Vec::new();
    for c in candidates {
        let Ok(real) = std::fs::canonicalize(&c) else {
            continue;
        };
        if !real.is_dir() || system.iter().any(|s| real == Path::new(s)) {
            continue;
        }
        if out.iter().any(|o| real.starts_with(o)) {
            continue;
        }
        out.retain(|o| !o.starts_with(&real));
        out.push(real);
    }
    out.sort();
    out
}

/// The directories version managers keep their runtimes, shims and settings in, under a home.
const VERSION_MANAGERS: [&str; 8] = [
    ".pyenv", ".nvm", ".rbenv", ".nodenv", ".goenv", ".asdf", ".volta", ".fnm",
];

/// Files that say a directory is the root of an installed package or a project: what a
/// program found inside it needs around it.
const PACKAGE_MARKERS: [&str; 7] = [
    "pyvenv.cfg",
    "package.json",
    "pyproject.toml",
    "setup.py",
    "Cargo.toml",
    "go.mod",
    "requirements.txt",
];

/// What to show of a hidden place for a path `p` inside it that the server uses: its
/// package's root (the directory holding its `node_modules`, a virtual environment, the
/// `bin`, `lib` and `lib64` of an installation prefix, a project's root), else its directory,
/// else itself. Never the hidden place itself or a home directory as a whole (`protected`).
fn exposure_for(p: &Path, place: &Path) -> Vec<PathBuf> {
    // /home/NAME and the place itself are never shown whole.
    let homes = place.file_name().is_some_and(|n| n == "home");
    let protected = |d: &Path| d == place || homes && d.parent() == Some(place);
    let allowed = |d: &Path| d.starts_with(place) && !protected(d);
    let dir = if p.is_dir() {
        p
    } else {
        p.parent().unwrap_or(p)
    };
    // Inside node_modules: the project that holds it.
    let mut acc = PathBuf::new();
    for c in p.components() {
        if c.as_os_str() == "node_modules" {
            return vec![if allowed(&acc) {
                acc
            } else {
                acc.join("node_modules")
            }];
        }
        acc.push(c);
    }
    // Inside a version manager's root (pyenv, nvm, …): the whole root. Its shims run its
    // own scripts, which read the versions and settings kept beside them.
    for a in dir.ancestors().take_while(|a| allowed(a)) {
        if a.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| VERSION_MANAGERS.contains(&n))
        {
            return vec![a.to_path_buf()];
        }
    }
    // The nearest package root.
    for a in dir.ancestors().take_while(|a| allowed(a)) {
        if PACKAGE_MARKERS.iter().any(|m| a.join(m).exists()) {
            return vec![a.to_path_buf()];
        }
    }
    // An installation prefix: PREFIX/bin/program.
    if let Some(prefix) = dir
        .file_name()
        .filter(|n| *n == "bin" || *n == "sbin")
        .and_then(|_| dir.parent())
        .filter(|prefix| allowed(prefix))
    {
        return ["bin", "sbin", "lib", "lib64", "libexec"]
            .iter()
            .map(|d| prefix.join(d))
            .filter(|d| d.is_dir())
            .collect();
    }
    if allowed(dir) {
        vec![dir.to_path_buf()]
    } else {
        vec![p.to_path_buf()]
    }
}

/// The interpreter a script names on its `#!` line, if any.
fn shebang(program: &Path) -> Option<PathBuf> {
    super::preflight::shebang_words(program)
        .first()
        .map(PathBuf::from)
}

/// What every runtime reads and no user keeps private files in: the distribution's
/// directories, the sandbox's own `/proc`, `/run` and tmpfs mounts, the devices a runtime
/// opens and the parts of `/sys` runtimes size themselves by. Not `/var`, `/srv`, `/opt`,
/// `/mnt`, `/media` or the homes: a server reads there only what it runs on or what the user
/// exposes. Not the terminals either (`/dev/pts` is the host's: reading another terminal of
/// the invoking user would show its keystrokes; the server has no controlling terminal).
pub const SYSTEM_READABLE: [&str; 22] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/proc",
    "/run",
    "/tmp",
    "/var/tmp",
    "/nix/store",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
    "/sys/kernel/mm/transparent_hugepage",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/shm",
];

/// Where a server may read and execute (Landlock, [`SandboxConfig::readable`]): the
/// [`SYSTEM_READABLE`] directories, and for every path the server runs on that lies elsewhere
/// (its program, interpreters, the absolute paths among `words`) the package around it (see
/// [`exposure_for`]; never a top-level directory or a home as a whole), the `shown` paths of
/// hidden places, and the `explicit` ones (`--expose`, the scratch root) as given.
pub fn readable_paths<'a>(
    hidden: &[PathBuf],
    words: impl IntoIterator<Item = &'a str>,
    program: &Path,
    shown: &[PathBuf],
    explicit: &[PathBuf],
) -> Vec<PathBuf> {
    let system: Vec<&Path> = SYSTEM_READABLE.iter().map(Path::new).collect();
    let mut out: Vec<PathBuf> = system
        .iter()
        .filter(|p| p.exists())
        .map(|p| p.to_path_buf())
        .collect();
    for p in named_paths(words, program) {
        if system.iter().any(|s| p.starts_with(s)) {
            continue;
        }
        let place = hidden
            .iter()
            .find(|h| p.starts_with(h))
            .cloned()
            .or_else(|| p.components().take(2).collect::<PathBuf>().into());
        let Some(place) = place.filter(|pl| pl.as_path() != Path::new("/")) else {
            continue;
        };
        let homes = place.file_name().is_some_and(|n| n == "home");
        for e in exposure_for(&p, &place) {
            let whole_place = e == place || homes && e.parent() == Some(place.as_path());
            if !whole_place && !out.contains(&e) {
                out.push(e);
            }
        }
    }
    for e in shown.iter().chain(explicit) {
        if !out.contains(e) {
            out.push(e.clone());
        }
    }
    out
}

/// The paths a word of the command line or the environment may name: the word, the value of
/// a `KEY=value` word, and each entry of a colon-separated list of absolute paths (`PATH`,
/// `PYTHONPATH`, `NODE_PATH`, `LD_LIBRARY_PATH`): a program the server finds through its
/// `PATH` is one it runs on. A path that climbs (`/tmp/../etc`, `/home/u/..`) names nothing:
/// it would name the place above what it shows.
fn path_candidates(word: &str) -> Vec<&str> {
    let mut out = vec![word];
    out.extend(word.split_once('=').map(|(_, v)| v));
    let lists: Vec<&str> = out.clone();
    for list in lists {
        // `/venv/bin:$PATH`, `/venv/bin:.`: the absolute entries of a list that starts with one.
        if list.starts_with('/') && list.contains(':') {
            out.extend(list.split(':').filter(|e| e.starts_with('/')));
        }
    }
    out.retain(|c| {
        !Path::new(c)
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    });
    out
}

/// The PATH of a standard Linux system.
const SYSTEM_PATH: [&str; 6] = [
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// A server's PATH in the sandbox: the directories of its program and of the interpreters its
/// `#!` line names (found with the host's `path_var`, as named and resolved: a virtual
/// environment's `bin`, a Node version manager's), then the system's. The host user's own
/// PATH (a CI runner's tool cache, a home's `.local/bin`) is not passed: it tells where and by
/// whom the server runs.
pub fn clean_path(program: &Path, path_var: Option<&str>) -> String {
    let mut dirs: Vec<String> = Vec::new();
    let mut add = |d: Option<&Path>| {
        if let Some(d) = d.map(|d| d.display().to_string()) {
            if !d.is_empty() && !dirs.contains(&d) {
                dirs.push(d);
            }
        }
    };
    let mut runtime = vec![program.to_path_buf()];
    runtime.extend(super::preflight::shebang_interpreters(program, path_var));
    for p in &runtime {
        add(p.parent());
        add(std::fs::canonicalize(p)
            .ok()
            .as_deref()
            .and_then(Path::parent));
    }
    for d in SYSTEM_PATH {
        add(Some(Path::new(d)));
    }
    dirs.join(":")
}

/// The paths a server runs on: the program, the interpreter its `#!` line names (and the one
/// `PATH` finds for `env`), every absolute path among `words` that exists, and of each the
/// interpreter of a script, both as named and with symlinks resolved.
fn named_paths<'a>(words: impl IntoIterator<Item = &'a str>, program: &Path) -> Vec<PathBuf> {
    let mut named: Vec<PathBuf> = vec![program.to_path_buf()];
    // `#!/usr/bin/env node` needs the node that PATH finds as well as env.
    let path_var = std::env::var("PATH").ok();
    named.extend(super::preflight::shebang_interpreters(
        program,
        path_var.as_deref(),
    ));
    for word in words {
        for candidate in path_candidates(word) {
            if candidate.starts_with('/') && Path::new(candidate).exists() {
                named.push(PathBuf::from(candidate));
            }
        }
    }
    let mut resolved: Vec<PathBuf> = Vec::new();
    for p in named {
        let real = std::fs::canonicalize(&p).ok();
        // A resolved script names its interpreter too (a virtual environment's entry point).
        if let Some(interpreter) = real.as_deref().and_then(shebang) {
            resolved.extend(std::fs::canonicalize(&interpreter).ok());
            resolved.push(interpreter);
        }
        resolved.push(p);
        resolved.extend(real);
    }
    resolved
}

/// The paths inside `hidden` places that the server needs, shown read-only: for every path
/// the server runs on ([`named_paths`]), the package around it (see [`exposure_for`]); and
/// the `explicit` directories (`--expose`) as given.
pub fn exposed_paths<'a>(
    hidden: &[PathBuf],
    words: impl IntoIterator<Item = &'a str>,
    program: &Path,
    explicit: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for p in named_paths(words, program) {
        let Some(place) = hidden.iter().find(|h| p.starts_with(h)) else {
            continue;
        };
        // A word that names a hidden place or a home itself shows nothing of it: only
        // `--expose` shows a whole home.
        let homes = place.file_name().is_some_and(|n| n == "home");
        for e in exposure_for(&p, place) {
            let whole = e == *place || homes && e.parent() == Some(place.as_path());
            if !whole && !out.contains(&e) {
                out.push(e);
            }
        }
    }
    for e in explicit {
        if hidden.iter().any(|h| e.starts_with(h)) && !out.contains(e) {
            out.push(e.clone());
        }
    }
    // A path inside another shown path needs no bind of its own.
    out.sort();
    let mut kept: Vec<PathBuf> = Vec::new();
    for p in out {
        if !kept.iter().any(|k| p.starts_with(k)) {
            kept.push(p);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_of_every_temporary_place_are_named_by_their_top_directory() {
        let var_tmp = tempfile::Builder::new()
            .prefix("hintcheck-named-")
            .tempdir_in("/var/tmp")
            .expect("a directory under /var/tmp");
        let tmp = tempfile::Builder::new()
            .prefix("hintcheck-named-")
            .tempdir_in("/tmp")
            .expect("a directory under /tmp");
        let program = var_tmp.path().join("bin/server");
        let script = tmp.path().join("lib/main.py");
        let link = tmp.path().with_extension("link");
        std::os::unix::fs::symlink("/etc", &link).expect("symlink");
        let words = [
            program.display().to_string(),
            format!("--data={}", script.display()),
            "/var/tmp".to_string(),
            "/dev/shm/not-there".to_string(),
            "/tmp/../etc/passwd".to_string(),
            format!("{}/x", link.display()),
        ];
        let scratch = tempfile::tempdir().expect("scratch");
        let named = named_temporary_entries(words.iter().map(String::as_str), scratch.path());
        // The top entries that exist, once each; a place itself, missing entries, a path that
        // climbs out and a symbolic link are not.
        let _ = std::fs::remove_file(&link);
        assert_eq!(
            named,
            vec![var_tmp.path().to_path_buf(), tmp.path().to_path_buf()]
        );
        // The scratch root is bound read-write anyway.
        let inside = scratch.path().join("workspace").display().to_string();
        assert!(named_temporary_entries([inside.as_str()], scratch.path()).is_empty());
    }

    #[test]
    fn the_server_gets_an_ordinary_account_and_home() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\ndev:x:1000:1000::/home/dev:/bin/sh\n";
        let hidden = vec![PathBuf::from("/home"), PathBuf::from("/root")];
        let own = sandbox_identity(Some((1_610_612_800, 1_610_612_800)), passwd, &hidden);
        assert_eq!(own.added_user.as_deref(), Some("developer"), "dev is taken");
        assert_eq!(own.home, Some(PathBuf::from("/home/developer")));
        let userns = sandbox_identity(None, passwd, &hidden);
        assert_eq!(
            (userns.added_user, userns.user.as_deref()),
            (None, Some("root"))
        );
        assert_eq!(userns.home, Some(PathBuf::from("/root")));
        let nobody = sandbox_identity(
            Some((65534, 65534)),
            "nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n",
            &hidden,
        );
        assert_eq!(
            nobody.home, None,
            "a home outside the hidden places stays the scratch one"
        );
    }

    #[test]
    fn a_program_in_a_hidden_place_brings_its_package_and_interpreter_only() {
        let t = tempfile::tempdir().expect("tempdir");
        let home = t.path().join("home");
        let user = home.join("dev");
        // A virtual environment whose entry point names its python, which is a symlink into
        // an installation prefix that also lies in the home directory.
        let venv = user.join(".cache/tool/venv/abc");
        let prefix = user.join(".pyenv/versions/3.11");
        for d in [
            venv.join("bin"),
            prefix.join("bin"),
            prefix.join("lib/python3.11"),
            user.join(".ssh"),
            user.join("proj/node_modules/srv/dist"),
        ] {
            std::fs::create_dir_all(&d).expect("mkdir");
        }
        std::fs::write(venv.join("pyvenv.cfg"), "home = x\n").expect("cfg");
        std::fs::write(prefix.join("bin/python3.11"), "").expect("python");
        std::os::unix::fs::symlink(prefix.join("bin/python3.11"), venv.join("bin/python"))
            .expect("symlink");
        let entry = venv.join("bin/server");
        std::fs::write(
            &entry,
            format!("#!{}\nimport x\n", venv.join("bin/python").display()),
        )
        .expect("entry");
        std::fs::write(user.join(".ssh/id_ed25519"), "secret").expect("key");
        let script = user.join("proj/node_modules/srv/dist/index.js");
        std::fs::write(&script, "").expect("script");
        let home = std::fs::canonicalize(&home).expect("canonical");
        let hidden = vec![home.clone()];
        let real = |p: &Path| std::fs::canonicalize(p).expect("canonical");
        let shown = exposed_paths(&hidden, [script.to_str().expect("utf-8")], &entry, &[]);
        assert!(shown.contains(&real(&venv)), "{shown:?}");
        // The interpreter lies in a version manager's root: the root is shown whole (its
        // shims and scripts read what lies beside them), the rest of the home is not.
        assert!(shown.contains(&real(&user.join(".pyenv"))), "{shown:?}");
        assert!(shown.contains(&real(&user.join("proj"))), "{shown:?}");
        for s in &shown {
            assert!(
                !real(&user.join(".ssh")).starts_with(s),
                "{s:?} shows the keys"
            );
            assert_ne!(s, &real(&user), "the whole home directory");
        }
        // A shim named on the command line brings its manager's root too.
        let shims = user.join(".pyenv/shims");
        std::fs::create_dir_all(&shims).expect("mkdir");
        std::fs::write(shims.join("python3"), "#!/usr/bin/env bash\n").expect("shim");
        let shown = exposed_paths(&hidden, [], &shims.join("python3"), &[]);
        assert!(shown.contains(&real(&user.join(".pyenv"))), "{shown:?}");
        assert!(!shown.contains(&real(&user)), "{shown:?}");
        // A script lying directly in the home directory is shown alone.
        let loose = user.join("server.py");
        std::fs::write(&loose, "").expect("loose");
        let shown = exposed_paths(&hidden, [], &loose, &[]);
        assert_eq!(shown, vec![real(&loose)]);
        // A PATH given to the server names its entries: a tool it runs from a virtual
        // environment's bin is shown with that environment, never the home as a whole, nor
        // what an entry that climbs (`home/..`) would name.
        let tools = user.join(".cache/tools/venv");
        std::fs::create_dir_all(tools.join("bin")).expect("mkdir");
        std::fs::write(tools.join("pyvenv.cfg"), "home = x\n").expect("cfg");
        let path = format!(
            "{}:/usr/bin:{}:{}/..:$PATH",
            tools.join("bin").display(),
            user.display(),
            user.display()
        );
        let shown = exposed_paths(&hidden, [path.as_str()], &loose, &[]);
        assert!(shown.contains(&real(&tools)), "{shown:?}");
        assert!(!shown.contains(&real(&user)), "{shown:?}");
        assert!(
            !shown.iter().any(|s| real(&home).starts_with(s)),
            "{shown:?}"
        );
        assert_eq!(
            path_candidates("PATH=/a/bin:/b"),
            ["PATH=/a/bin:/b", "/a/bin:/b", "/a/bin", "/b"]
        );
        assert_eq!(
            path_candidates("/venv/bin:$PATH"),
            ["/venv/bin:$PATH", "/venv/bin"]
        );
        assert_eq!(path_candidates("http://x:80/y"), ["http://x:80/y"]);
    }
}
