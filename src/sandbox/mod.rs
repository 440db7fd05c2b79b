//! The launch stage: scratch directories ([`scratch`]), starting and ending the server
//! ([`process`]), and [`SandboxStatus`], the statement every report carries of what was
//! enforced. In this mode the server runs as an ordinary process in scratch directories: it
//! is not isolated from the host; the namespace sandbox plugs in here.

pub mod cgroup;
pub mod confined;
pub mod connector;
pub mod control;
pub mod doctor;
pub mod init;
pub mod landlock;
pub mod netns;
pub mod notify;
pub mod perform;
pub mod policy;
pub mod preflight;
pub mod process;
pub mod scratch;
pub mod seccomp;
pub mod tree;
pub mod watchdog;

pub use policy::{Enforcement, SandboxConfig, SandboxLevel};

use serde::Serialize;

/// The host name inside the sandbox (its own UTS namespace): the host's own name, so that
/// nothing in it says the server is watched (a fixed name would be a fingerprint), or
/// `workstation` when the host's name is empty or names hintcheck. Lookups of it are local.
pub fn sandbox_hostname() -> &'static str {
    static NAME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NAME.get_or_init(|| {
        let uname = rustix::system::uname();
        let host = uname.nodename().to_string_lossy().into_owned();
        let plain = !host.is_empty()
            && !host.to_ascii_lowercase().contains("hintcheck")
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
        if plain { host } else { "workstation".into() }
    })
}
/// Errors of the launch stage.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The scratch directories could not be created.
    #[error("cannot create the scratch directories")]
    Scratch {
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The server program does not exist.
    #[error("server command {program:?} not found: {detail}")]
    NotFound {
        /// The program as given.
        program: String,
        /// Why.
        detail: String,
    },
    /// A step of the sandbox failed.
    #[error("sandbox step {} failed: {}", .0.step, .0.message)]
    Sandbox(control::StepFailure),
    /// Starting the server failed.
    #[error("cannot start the server {program}")]
    Spawn {
        /// The resolved program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The exact fix for a failed sandbox step, when there is a known one.
pub fn remedy(f: &control::StepFailure) -> Option<String> {
    let eperm = matches!(f.errno, Some(1) | Some(13));
    match f.step.as_str() {
        "unshare" | "uid_map" | "mount-private" | "loopback" if eperm || f.step == "uid_map" => Some(
            "unprivileged user namespaces are refused or restricted here. Either run hintcheck as root (sudo), \
or allow them: `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 23.10+), \
`sudo sysctl -w kernel.unprivileged_userns_clone=1` (older Debian), \
or `sudo sysctl -w user.max_user_namespaces=15000`; inside Docker, the default seccomp profile blocks them. \
`--sandbox best-effort` runs without isolation instead, and says so in the report."
                .into(),
        ),
        "landlock" => Some("Landlock is not enabled: boot with `lsm=...,landlock` (Linux 5.13+), or use --sandbox best-effort.".into()),
        "seccomp" => Some("seccomp filters are not available in this kernel or container; use --sandbox best-effort.".into()),
        _ => None,
    }
}

/// The directories every server may read, in words (see [`policy::SYSTEM_READABLE`]).
const SYSTEM_DIRECTORIES_IN_WORDS: &str = "/usr, /bin, /sbin, /lib*, /etc, /nix/store, the sandbox's own /proc, /run and tmpfs mounts, a few devices and the CPU and memory entries of /sys";

/// The watchdog's line in every report's enforcement.
const WATCHDOG: &str = "a watchdog on the process tree's memory (memfd files included) and on the scratch directories' size ends the run past --memory-limit and --disk-limit";

/// What isolation was in force, for every report.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxStatus {
    /// `full`, `partial` or `none`.
    pub level: String,
    /// What was asked for: `required`, `best-effort` or `off`.
    pub requested: String,
    /// One sentence for humans.
    pub summary: String,
    /// What was enforced.
    pub enforced: Vec<String>,
    /// What was not enforced.
    pub not_enforced: Vec<String>,
}

impl SandboxStatus {
    /// The status of the scratch-directory mode.
    pub fn scratch_only(subreaper: bool) -> SandboxStatus {
        let mut enforced = vec![
            "scratch working directory, HOME and TMPDIR (removed after the run)".to_string(),
            "clean environment (only PATH, locale and --env variables are passed)".into(),
            "descriptors: only stdin, stdout and stderr reach the server".into(),
            WATCHDOG.into(),
            "own process group; stragglers are swept at the end".into(),
        ];
        if subreaper {
            enforced.push("orphaned descendants are reparented to hintcheck and killed".into());
        }
        SandboxStatus {
            level: "none".into(),
            requested: "off".into(),
            summary: "no sandbox: the server ran as an ordinary process in scratch directories and could reach the whole host"
                .into(),
            enforced,
            not_enforced: vec![
                "filesystem isolation (writes outside the scratch directories reach the host and are not observed)".into(),
                "network isolation (network activity is neither blocked nor observed)".into(),
                "resource limits".into(),
            ],
        }
    }

    /// The status of a run whose server was never started: nothing ran, so nothing was
    /// enforced or left unenforced.
    pub fn not_started(requested: &str) -> SandboxStatus {
        SandboxStatus {
            level: "not-started".into(),
            requested: requested.into(),
            summary: "the server was never started: nothing ran, in a sandbox or outside one"
                .into(),
            enforced: Vec::new(),
            not_enforced: Vec::new(),
        }
    }

    /// The status of a sandbox that started, from what its init reported.
    pub fn from_enforcement(e: &Enforcement, requested: SandboxLevel) -> SandboxStatus {
        let mut enforced = vec![format!(
            "namespaces: {}{}",
            e.namespaces.join(", "),
            if e.user_namespace {
                " (unprivileged, through a user namespace)"
            } else {
                ""
            }
        )];
        enforced.push(match &e.network_observer {
            Some(n) => {
                format!("network: a network namespace of its own, nothing leaves the machine; {n}")
            }
            None => {
                "network: an empty network namespace (loopback only); nothing leaves the machine"
                    .into()
            }
        });
        enforced.extend(e.mounts.iter().cloned());
        if let Some(abi) = e.landlock_abi {
            let reads = match &e.readable_beyond_system {
                Some(beyond) if beyond.is_empty() => {
                    "read/execute only in the system directories".to_string()
                }
                Some(beyond) => format!(
                    "read/execute only in the system directories and {}",
                    beyond.join(", ")
                ),
                None => "read/execute everywhere".to_string(),
            };
            enforced.push(format!(
                "Landlock ABI {abi}: {} ({reads}; writes only to the scratch directories and the sandbox's tmpfs)",
                e.landlock
            ));
        }
        enforced.push(format!("seccomp: {}", e.seccomp));
        enforced.push(format!(
            "descriptors: only stdin, stdout and stderr reach the server ({} inherited from whatever started hintcheck closed in the sandbox's init)",
            e.inherited_descriptors_closed
        ));
        if e.no_new_privs {
            enforced.push("no_new_privs".into());
        }
        if e.capabilities_dropped {
            enforced.push("every capability dropped".into());
        }
        enforced.push(format!(
            "server runs as host uid {} gid {}",
            e.host_uid, e.host_gid
        ));
        if !e.rlimits.is_empty() {
            enforced.push(format!("rlimits: {}", e.rlimits.join(", ")));
        }
        enforced.push(
            "PID 1 of its own pid namespace: no process of the server outlives the run".into(),
        );
        enforced.push(WATCHDOG.into());
        if !e.cgroup.is_empty() {
            enforced.push(format!("cgroup v2: {}", e.cgroup.join(", ")));
        }
        let mut not_enforced: Vec<String> = e
            .degraded
            .iter()
            .map(|d| format!("degraded: {d}"))
            .collect();
        if e.landlock != "full" {
            not_enforced.push(format!("Landlock is {} on this kernel", e.landlock));
        }
        if e.network_observer.is_none() {
            not_enforced
                .push("DNS questions and payloads are not observed (no network observer)".into());
        }
        match (&e.readable_beyond_system, e.landlock_abi) {
            (Some(_), Some(_)) => not_enforced.push(format!(
                "reading the system directories is allowed ({}): a host that keeps secrets there (in /etc, say) shows them to the server",
                SYSTEM_DIRECTORIES_IN_WORDS
            )),
            _ if e.mounts.iter().any(|m| m.contains(" hidden (")) => not_enforced.push(
                "reading host files outside the hidden places is allowed (Landlock grants read access to /; system files, installed programs and the server's own package stay readable)".into(),
            ),
            _ => not_enforced.push("reading host files is allowed (Landlock grants read access to /)".into()),
        }
        let full = e.degraded.is_empty() && e.landlock == "full";
        SandboxStatus {
            level: if full { "full" } else { "partial" }.into(),
            requested: requested.name().into(),
            summary: if full {
                "the server ran in namespaces under Landlock and seccomp; it could not change the host or reach the network".into()
            } else {
                "the server ran in namespaces with some protections missing (see not_enforced)"
                    .into()
            },
            enforced,
            not_enforced,
        }
    }
}
