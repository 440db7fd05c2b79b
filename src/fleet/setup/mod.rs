//! A scenario's `[setup]`: installing a real server outside the sandbox, before the run, so
//! that the sandboxed launch needs no network. npm packages go into a prefix and PyPI packages
//! into a virtual environment, both in hintcheck's cache directory under a name derived from
//! the pinned package list, so runs and parallel scans share one install (a lock file
//! serialises installers). Installing never runs package code on the host where it can be
//! avoided: npm runs with `--ignore-scripts` and pip with `--only-binary :all:` (no source
//! builds). The launch command names the installed entry point through `{npm}` (the prefix)
//! and `{venv}` (the environment). Launchers that download at run time (`npx`, `uvx`, …) are
//! refused with the exact steps to install instead.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::mcp::tool::sha256_hex;

pub mod confine;
pub mod requirement;
pub mod runtime;

pub use confine::Confinement;

/// How a setup error that is about this machine (a runtime that cannot be had here) begins:
/// a scan lists such a server as skipped, with the rest of the message as the reason.
pub const UNAVAILABLE: &str = "[setup] cannot be provided here: ";

/// Errors installing a scenario's server.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A tool the setup needs is missing.
    #[error("[setup] needs {tool}, which was not found: {hint}")]
    Missing {
        /// npm, python3.
        tool: &'static str,
        /// What to do.
        hint: String,
    },
    /// An installer failed.
    #[error("[setup] {what} failed (exit {code}): {output}")]
    Failed {
        /// The command.
        what: String,
        /// Its exit code.
        code: i32,
        /// The end of its output.
        output: String,
    },
    /// The cache could not be prepared.
    #[error("[setup] cannot prepare the cache directory {}", path.display())]
    Cache {
        /// The directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An interrupt or the timeout ended an installer (what it had done is removed).
    #[error("[setup] {what} was stopped after {:.1} s: {why}", elapsed.as_secs_f64())]
    Stopped {
        /// The command.
        what: String,
        /// An interrupt, or which timeout.
        why: String,
        /// How long it had run.
        elapsed: std::time::Duration,
    },
    /// `[setup] timeout` is not a duration.
    #[error("[setup] timeout: {0}")]
    BadTimeout(String),
    /// A runtime the server needs cannot be had here (the message begins with
    /// [`UNAVAILABLE`]).
    #[error("[setup] cannot be provided here: {what}: {why}")]
    Unavailable {
        /// What is needed.
        what: String,
        /// Why it cannot be had.
        why: String,
    },
    /// An item is not a package name and one version of its ecosystem (a path, a URL, an
    /// option, a range).
    #[error("[setup] {0}")]
    Invalid(#[from] requirement::InvalidRequirement),
    /// The installers' sandbox could not be set up (and the sandbox is required).
    #[error("[setup] {what} cannot run in the installers' sandbox: {why}")]
    Confinement {
        /// The command.
        what: String,
        /// Why, with the fix when there is a known one.
        why: String,
    },
    /// An install lock could not be taken.
    #[error("[setup] cannot take the install lock {} after {:.1} s: {why}", path.display(), waited.as_secs_f64())]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// How long it was waited for.
        waited: Duration,
        /// Why the wait ended.
        why: String,
    },
    /// An installer would have run package code (a source build, a program a package asked
    /// for), which the installers' sandbox refused.
    #[error(
        "[setup] {what} would run package code on this machine ({line}), which was refused: a package must install from a wheel (PyPI) or without its scripts (npm). Set allow_source_builds = true in [setup] or pass --allow-source-builds to let it build inside the installers' sandbox"
    )]
    PackageCode {
        /// The command.
        what: String,
        /// The installer's line that shows it.
        line: String,
    },
}

/// `[setup]` of a scenario.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetupSection {
    /// npm packages, each pinned (`name@1.2.3`).
    #[serde(default)]
    pub npm: Vec<String>,
    /// PyPI packages, each pinned (`name==1.2.3`).
    #[serde(default)]
    pub pip: Vec<String>,
    /// How long the installs may take in all (`"10m"` unless set); the run's `--timeout`
    /// bounds them too.
    #[serde(default)]
    pub timeout: Option<String>,
    /// Let pip build packages from source (and npm fetch dependencies that need another
    /// program, such as git): inside the installers' sandbox, never on the host as such.
    /// Off by default: a source build runs the package's own code.
    #[serde(default)]
    pub allow_source_builds: bool,
    /// Requirements hintcheck adds to the PyPI install (`mcp<2` when a server died under the
    /// 2.x SDK); not pins, and not written in scenarios.
    #[serde(skip)]
    pub constraints: Vec<String>,
}

/// How long installs may take when `[setup] timeout` does not say.
pub const DEFAULT_SETUP_TIMEOUT: Duration = Duration::from_secs(600);

/// How often a running installer's progress is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// What bounds the installs and where their progress goes.
#[derive(Debug, Clone)]
pub struct SetupLimits {
    /// When the installs must have ended.
    pub deadline: Instant,
    /// Which limit the deadline is, in words (`[setup] timeout (10m)`).
    pub deadline_name: String,
    /// Whether progress lines are printed on stderr.
    pub progress: bool,
    /// How the installers are confined.
    pub confinement: Confinement,
    /// How long an install lock held by something other than a live hintcheck is waited for
    /// ([`LOCK_WAIT`]).
    pub lock_wait: Duration,
    /// What the installers' runs had to say for the report (an unconfined run, and why).
    pub notes: Arc<Mutex<Vec<String>>>,
}

impl SetupLimits {
    /// Installs that may take `limit` from now (`[setup] timeout`), confined as required.
    pub fn within(limit: Duration, progress: bool) -> SetupLimits {
        SetupLimits {
            deadline: Instant::now() + limit,
            deadline_name: format!("[setup] timeout ({})", crate::text::format_duration(limit)),
            progress,
            confinement: Confinement::required(),
            lock_wait: LOCK_WAIT,
            notes: Arc::default(),
        }
    }

    fn note(&self, note: String) {
        let mut notes = self.notes.lock().unwrap_or_else(|p| p.into_inner());
        if !notes.contains(&note) {
            notes.push(note);
        }
    }

    /// The notes gathered so far, taken.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl SetupSection {
    /// Whether there is anything to install.
    pub fn is_empty(&self) -> bool {
        self.npm.is_empty() && self.pip.is_empty()
    }
}

/// Where a setup installed things (the values of `{npm}` and `{venv}`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Installed {
    /// The npm prefix (its `node_modules` holds the packages).
    pub npm: Option<PathBuf>,
    /// The virtual environment.
    pub venv: Option<PathBuf>,
    /// The Node each npm package named by `{node_for:PACKAGE}` runs on.
    pub node: std::collections::BTreeMap<String, PathBuf>,
    /// What the setup provided beyond the packages, in words (for the report's notes).
    pub notes: Vec<String>,
}

impl Installed {
    /// Replaces `{npm}` and `{venv}` in a command argument, and the entry points of installed
    /// packages: `{npm_bin:PACKAGE}` (the script its package.json's `bin` names: the one named
    /// like the package, else the only or first one; else its `main`) and
    /// `{venv_bin:PACKAGE}` (the console script its entry points name: the one named like the
    /// package, else the first; else `bin/PACKAGE`).
    pub fn substitute(&self, arg: &str) -> String {
        let mut out = arg.to_string();
        out = replace_entry_points(&out, "node_for", |pkg| {
            Some(
                self.node
                    .get(pkg)
                    .cloned()
                    .unwrap_or_else(|| PathBuf::from("node")),
            )
        });
        if let Some(p) = &self.npm {
            out = replace_entry_points(&out, "npm_bin", |pkg| npm_entry_point(p, pkg));
            out = out.replace("{npm}", &p.display().to_string());
        }
        if let Some(p) = &self.venv {
            out = replace_entry_points(&out, "venv_bin", |pkg| venv_entry_point(p, pkg));
            out = out.replace("{venv}", &p.display().to_string());
        }
        out
    }
}

impl Installed {
    /// Provides the Node of every `{node_for:PACKAGE}` among `args`: the machine's when the
    /// package's `engines.node` allows it, else one from the npm registry (see
    /// [`runtime::node_for`]).
    pub fn provide_runtimes(
        &mut self,
        args: &[String],
        cache: &Path,
        limits: &SetupLimits,
    ) -> Result<(), SetupError> {
        for arg in args {
            let mut rest = arg.as_str();
            while let Some(at) = rest.find("{node_for:") {
                let after = &rest[at + "{node_for:".len()..];
                let Some(end) = after.find('}') else { break };
                let package = &after[..end];
                rest = &after[end + 1..];
                if self.node.contains_key(package) {
                    continue;
                }
                let Some(prefix) = &self.npm else {
                    return Err(SetupError::Unavailable {
                        what: format!("Node for {package}"),
                        why: "{node_for:…} names a package, but [setup] installs no npm package"
                            .into(),
                    });
                };
                let (node, note) = runtime::node_for(prefix, package, cache, limits)?;
                self.node.insert(package.to_string(), node);
                self.notes.extend(note);
            }
        }
        for note in limits.take_notes() {
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
        }
        Ok(())
    }
}

/// An installed npm package's directory and its package.json (never outside the prefix).
fn npm_manifest(prefix: &Path, package: &str) -> Option<(PathBuf, serde_json::Value)> {
    if package.contains("..") {
        return None;
    }
    let dir = prefix.join("node_modules").join(package);
    let manifest =
        serde_json::from_str(&std::fs::read_to_string(dir.join("package.json")).ok()?).ok()?;
    Some((dir, manifest))
}

/// A requirement's distribution name (`mcp` of `mcp[cli]==1.30.0`).
fn requirement_name(requirement: &str) -> &str {
    requirement
        .split(|c: char| "<>=!~ ;[".contains(c))
        .next()
        .unwrap_or(requirement)
        .trim()
}

/// Where a distribution installed in a virtual environment keeps its metadata
/// (`<name>-<version>.dist-info`, names compared as pip normalises them), and its version.
fn installed_distribution(venv: &Path, package: &str) -> Option<(PathBuf, String)> {
    let wanted = normal_name(package);
    let lib = std::fs::read_dir(venv.join("lib")).ok()?;
    for python in lib.flatten() {
        let Ok(site) = std::fs::read_dir(python.path().join("site-packages")) else {
            continue;
        };
        for info in site.flatten() {
            let name = info.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".dist-info") else {
                continue;
            };
            let (dist, version) = stem.rsplit_once('-').unwrap_or((stem, ""));
            if normal_name(dist) == wanted {
                return Some((info.path(), version.to_string()));
            }
        }
    }
    None
}

/// A Python distribution or script name as pip compares them (case, `-`, `_`, `.`).
fn normal_name(n: &str) -> String {
    n.to_ascii_lowercase()
        .split(|c: char| "-_.".contains(c))
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Replaces each `{kind:PACKAGE}` in `arg` with what `find` gives for the package (left as it
/// is when it finds nothing).
fn replace_entry_points(arg: &str, kind: &str, find: impl Fn(&str) -> Option<PathBuf>) -> String {
    let open = format!("{{{kind}:");
    let mut out = String::new();
    let mut rest = arg;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        let Some(end) = after.find('}') else { break };
        out.push_str(&rest[..at]);
        match find(&after[..end]) {
            Some(path) => out.push_str(&path.display().to_string()),
            None => out.push_str(&rest[at..at + open.len() + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The script an installed npm package runs as (see [`Installed::substitute`]).
fn npm_entry_point(prefix: &Path, package: &str) -> Option<PathBuf> {
    let (dir, manifest) = npm_manifest(prefix, package)?;
    let unscoped = package.rsplit('/').next().unwrap_or(package);
    let relative = match &manifest["bin"] {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(bins) => bins
            .get(unscoped)
            .or_else(|| bins.values().next())
            .and_then(|v| v.as_str())
            .map(str::to_string),
        _ => manifest["main"].as_str().map(str::to_string),
    }?;
    let path = dir.join(relative);
    (path.starts_with(&dir)
        && !path
            .components()
            .any(|c| c == std::path::Component::ParentDir))
    .then_some(path)
}

/// The console script an installed PyPI package runs as (see [`Installed::substitute`]).
fn venv_entry_point(venv: &Path, package: &str) -> Option<PathBuf> {
    let wanted = normal_name(package);
    if let Some((info, _)) = installed_distribution(venv, package) {
        let points = std::fs::read_to_string(info.join("entry_points.txt")).unwrap_or_default();
        let mut in_scripts = false;
        let mut scripts = Vec::new();
        for line in points.lines().map(str::trim) {
            if line.starts_with('[') {
                in_scripts = line == "[console_scripts]";
            } else if in_scripts {
                if let Some((script, _)) = line.split_once('=') {
                    scripts.push(script.trim().to_string());
                }
            }
        }
        let script = scripts
            .iter()
            .find(|s| normal_name(s) == wanted)
            .or_else(|| scripts.first())?;
        if script.contains('/') || script.starts_with('.') {
            return None;
        }
        return Some(venv.join("bin").join(script));
    }
    Some(venv.join("bin").join(package)).filter(|_| !package.contains('/'))
}

/// hintcheck's cache directory: `HINTCHECK_CACHE`, else `/var/cache/hintcheck` as root (a
/// home under `/root` is out of reach of the sandbox's uid 65534), else
/// `$XDG_CACHE_HOME/hintcheck` or `~/.cache/hintcheck`.
pub fn cache_root() -> PathBuf {
    if let Some(p) = std::env::var_os("HINTCHECK_CACHE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if rustix::process::geteuid().is_root() {
        return PathBuf::from("/var/cache/hintcheck");
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(p).join("hintcheck");
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".cache/hintcheck"))
        .unwrap_or_else(|| std::env::temp_dir().join("hintcheck-cache"))
}

/// Every item a package name and one version of its ecosystem (before anything is
/// installed; see [`requirement`]).
pub fn check_pins(setup: &SetupSection) -> Result<(), SetupError> {
    for p in &setup.npm {
        requirement::npm(p)?;
    }
    for p in &setup.pip {
        requirement::pypi(p)?;
    }
    Ok(())
}

fn mkdir_shared(path: &Path) -> Result<(), SetupError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path)
        .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)))
        .map_err(|source| SetupError::Cache {
            path: path.to_path_buf(),
            source,
        })
}

/// Holds an exclusive lock on `<dir>.lock` while one installer works on `dir`.
struct Lock(#[allow(dead_code)] std::fs::File);

/// How long a lock held by something other than a live hintcheck is waited for.
pub const LOCK_WAIT: Duration = Duration::from_secs(20);

/// Takes the exclusive lock on `<dir>.lock`, waiting while another hintcheck installs the same
/// packages (until the setup's deadline), and at most [`LOCK_WAIT`] for any other holder: a
/// lock nobody releases ends in an error naming it, never a hang. The holder's pid is written
/// into the lock file. Servers never see these files (the sandbox shows a server only its own
/// install directory), so their holder is a process of the host.
fn lock(dir: &Path, limits: &SetupLimits) -> Result<Lock, SetupError> {
    let path = dir.with_extension("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|source| SetupError::Cache {
            path: path.clone(),
            source,
        })?;
    let started = Instant::now();
    let mut said = false;
    loop {
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                let _ = file.set_len(0);
                let _ = std::io::Write::write_all(
                    &mut &file,
                    format!("{}\n", std::process::id()).as_bytes(),
                );
                return Ok(Lock(file));
            }
            Err(rustix::io::Errno::WOULDBLOCK | rustix::io::Errno::INTR) => {}
            Err(e) => {
                return Err(SetupError::Cache {
                    path,
                    source: e.into(),
                });
            }
        }
        let holder = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok());
        let installing = holder.is_some_and(is_hintcheck);
        let waited = started.elapsed();
        let stop = if crate::interrupt::requested() {
            Some("interrupted by a signal".to_string())
        } else if Instant::now() >= limits.deadline {
            Some(format!("{} was reached", limits.deadline_name))
        } else if !installing && waited >= limits.lock_wait {
            Some(format!(
                "its holder ({}) is not a hintcheck installing these packages",
                holder.map_or("unknown".to_string(), |p| format!("pid {p}"))
            ))
        } else {
            None
        };
        if let Some(why) = stop {
            return Err(SetupError::Locked { path, waited, why });
        }
        if limits.progress && !said && waited >= Duration::from_secs(2) {
            said = true;
            eprintln!(
                "hintcheck: [setup] waiting for the lock {}{}",
                path.display(),
                holder.map_or(String::new(), |p| format!(" (held by pid {p})"))
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether process `pid` is alive and runs hintcheck (a binary named so, or this one).
fn is_hintcheck(pid: u32) -> bool {
    let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
        return false;
    };
    exe.file_name().is_some_and(|n| n == "hintcheck")
        || std::fs::read_link("/proc/self/exe").is_ok_and(|own| own == exe)
}

/// What pip and npm print when they are about to run package code or another program: a
/// source build (a build environment, metadata from a build backend, `setup.py`, a wheel
/// built), or a program a package needs that the sandbox refused (git for a git dependency).
const PACKAGE_CODE_MARKERS: [&str; 7] = [
    "Installing build dependencies",
    "Getting requirements to build",
    "Preparing metadata (",
    "Building wheel for",
    "Building editable for",
    "setup.py",
    // npm starting a program (git for a git dependency), refused with EPERM.
    "spawn EPERM",
];

/// The last lines an installer wrote (stdout and stderr together).
#[derive(Default)]
struct OutputTail {
    lines: std::collections::VecDeque<String>,
    partial: String,
    /// The first line that showed the installer about to run package code.
    package_code: Option<String>,
}

impl OutputTail {
    const KEEP: usize = 40;

    fn push(&mut self, bytes: &[u8]) {
        self.partial.push_str(&String::from_utf8_lossy(bytes));
        while let Some(i) = self.partial.find(['\n', '\r']) {
            let line: String = self.partial.drain(..=i).collect();
            let line = line.trim_end().to_string();
            if self.package_code.is_none() && PACKAGE_CODE_MARKERS.iter().any(|m| line.contains(m))
            {
                self.package_code = Some(line.trim().to_string());
            }
            if !line.trim().is_empty() {
                if self.lines.len() == Self::KEEP {
                    self.lines.pop_front();
                }
                self.lines.push_back(line);
            }
        }
    }

    fn last(&self) -> Option<&str> {
        self.lines.back().map(String::as_str)
    }

    fn tail(&self, n: usize) -> String {
        let mut lines: Vec<&str> = self.lines.iter().map(String::as_str).collect();
        if !self.partial.trim().is_empty() {
            lines.push(self.partial.trim());
        }
        lines[lines.len().saturating_sub(n)..].join(" | ")
    }
}

/// Runs one installer (confined as `limits` says, see [`confine`]) in a process group of its
/// own that dies with hintcheck, printing a progress line every few seconds; an interrupt or
/// the deadline kills the whole group.
fn run_installer(installer: &confine::Installer, limits: &SetupLimits) -> Result<(), SetupError> {
    run_installer_with(installer, limits, None)
}

/// [`run_installer`], with its standard output going to `stdout` when given (a query whose
/// answer is wanted; its errors still end up in the error's tail).
fn run_installer_with(
    installer: &confine::Installer,
    limits: &SetupLimits,
    stdout: Option<std::fs::File>,
) -> Result<(), SetupError> {
    let what = installer.what.clone();
    let started = Instant::now();
    if limits.progress {
        eprintln!(
            "hintcheck: [setup] {}",
            crate::text::escape::terminal(&what)
        );
    }
    let mut run = confine::start(installer, &limits.confinement, stdout.as_ref())?;
    drop(stdout);
    if let Some(why) = &run.unconfined {
        limits.note(format!(
            "the installers ran outside a sandbox, as the invoking user: {why}"
        ));
    }
    let result = wait_for_installer(&mut run.child, &what, installer.may_exec, limits, started);
    let cleaned = run.finish();
    result.and(cleaned)
}

/// Waits for an installer, reading its output, within the limits.
fn wait_for_installer(
    child: &mut std::process::Child,
    what: &str,
    may_exec: bool,
    limits: &SetupLimits,
    started: Instant,
) -> Result<(), SetupError> {
    let what = what.to_string();
    let tail = Arc::new(Mutex::new(OutputTail::default()));
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut pipe| {
        let tail = tail.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                tail.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(&buf[..n]);
            }
        })
    })
    .collect();
    // The installer and whatever it started, at once.
    let group = rustix::process::Pid::from_child(child);
    let kill_group = || {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    };
    let mut next_progress = started + PROGRESS_EVERY;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) => {}
            Err(e) => break Err(e.to_string()),
        }
        let stop = if crate::interrupt::requested() {
            Some("interrupted by a signal".to_string())
        } else if Instant::now() >= limits.deadline {
            Some(format!("{} was reached", limits.deadline_name))
        } else {
            None
        };
        if let Some(why) = stop {
            kill_group();
            let _ = child.wait();
            return Err(SetupError::Stopped {
                what,
                why,
                elapsed: started.elapsed(),
            });
        }
        if limits.progress && Instant::now() >= next_progress {
            next_progress += PROGRESS_EVERY;
            let last = tail
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .last()
                .map(|l| {
                    format!(
                        "; last output: {}",
                        crate::text::escape::terminal(&crate::mcp::tool::shorten(l, 120))
                    )
                })
                .unwrap_or_default();
            eprintln!(
                "hintcheck: [setup] {} still running after {} s{last}",
                what.split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" "),
                started.elapsed().as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The group may hold helpers that keep the pipes open: end them before reading the rest.
    kill_group();
    for r in readers {
        let _ = r.join();
    }
    let status = status.map_err(|e| SetupError::Failed {
        what: what.clone(),
        code: -1,
        output: e,
    })?;
    let tail = tail.lock().unwrap_or_else(|p| p.into_inner());
    if !status.success() && !may_exec {
        if let Some(line) = &tail.package_code {
            return Err(SetupError::PackageCode {
                what,
                line: crate::mcp::tool::shorten(line, 200),
            });
        }
    }
    if status.success() {
        if limits.progress {
            eprintln!(
                "hintcheck: [setup] done in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
        return Ok(());
    }
    Err(SetupError::Failed {
        what,
        code: status.code().unwrap_or(-1),
        output: tail.tail(8),
    })
}

/// A Python every uid can run (the sandbox runs servers as uid 65534 when hintcheck is
/// root): the system's before one under a private home.
fn python() -> Result<PathBuf, SetupError> {
    let path_python = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("python3"))
            .find(|p| p.is_file())
    });
    let candidates = [
        Some(PathBuf::from("/usr/bin/python3")),
        Some(PathBuf::from("/usr/local/bin/python3")),
        path_python,
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| {
            p.is_file()
                && Command::new(p)
                    .args(["-c", "import venv, ensurepip"])
                    .output()
                    .is_ok_and(|o| o.status.success())
        })
        .ok_or(SetupError::Missing {
            tool: "python3",
            hint: "install Python 3 with the venv module (e.g. apt install python3-venv)".into(),
        })
}

/// The directory `<cache>/<kind>/<hash of packages>`, installed by `install` unless a marker
/// says an earlier run did; concurrent installers of the same list wait for each other.
fn install_once(
    cache: &Path,
    kind: &str,
    packages: &[String],
    limits: &SetupLimits,
    install: impl Fn(&Path) -> Result<(), SetupError>,
) -> Result<PathBuf, SetupError> {
    let key = sha256_hex(packages.join("\n").as_bytes());
    let parent = cache.join(kind);
    mkdir_shared(&parent)?;
    let dir = parent.join(&key[..16]);
    let marker = dir.join(".hintcheck-installed");
    // Installed already: the marker is written last, after the whole install.
    if marker.is_file() {
        return Ok(dir);
    }
    let _lock = lock(&dir, limits)?;
    if !marker.is_file() {
        let mut outcome = install(&dir);
        if let Err(SetupError::Failed { what, .. }) = &outcome {
            // A registry or its network can fail for a moment: one more try, from scratch.
            eprintln!(
                "hintcheck: [setup] {} failed; trying once more",
                crate::text::escape::terminal(what)
            );
            let _ = std::fs::remove_dir_all(&dir);
            outcome = install(&dir);
        }
        if let Err(e) = outcome {
            // Half an install is worse than none: the next run starts afresh.
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
        std::fs::write(&marker, packages.join("\n")).map_err(|source| SetupError::Cache {
            path: marker.clone(),
            source,
        })?;
    }
    Ok(dir)
}

/// Installs what `setup` lists (or finds it installed) under `cache`.
pub fn ensure(
    setup: &SetupSection,
    cache: &Path,
    limits: &SetupLimits,
) -> Result<Installed, SetupError> {
    check_pins(setup)?;
    let mut installed = Installed::default();
    if setup.is_empty() {
        return Ok(installed);
    }
    let mut limits = limits.clone();
    limits.confinement.allow_source_builds |= setup.allow_source_builds;
    let limits = &limits;
    mkdir_shared(cache)?;
    if !setup.npm.is_empty() {
        let packages: Vec<String> = setup
            .npm
            .iter()
            .map(|p| requirement::npm(p).map(|pin| pin.to_string()))
            .collect::<Result<_, _>>()?;
        installed.npm = Some(install_once(cache, "npm", &setup.npm, limits, |dir| {
            npm_install(dir, &packages, limits)
        })?);
    }
    if !setup.pip.is_empty() {
        let mut requirements: Vec<String> = setup
            .pip
            .iter()
            .map(|p| requirement::pypi(p).map(|pin| pin.to_string()))
            .collect::<Result<_, _>>()?;
        // hintcheck's own additions (`mcp<2`), never a scenario's.
        requirements.extend(setup.constraints.iter().cloned());
        let key: Vec<String> = setup
            .pip
            .iter()
            .chain(&setup.constraints)
            .cloned()
            .collect();
        installed.venv = Some(install_once(cache, "venv", &key, limits, |dir| {
            let python = python()?;
            mkdir_shared(dir)?;
            if !dir.join("bin/python").is_file() {
                run_installer(
                    &confine::Installer {
                        what: format!("{} -m venv {}", python.display(), dir.display()),
                        program: python.clone(),
                        args: vec!["-m".into(), "venv".into(), dir.display().to_string()],
                        writable: vec![dir.to_path_buf()],
                        // ensurepip installs pip with a pip of its own: the Python's own
                        // bundled wheels, no package of the scenario.
                        may_exec: true,
                        builds: false,
                    },
                    limits,
                )?;
            }
            let source_builds = limits.confinement.allow_source_builds;
            let mut args: Vec<String> = [
                "-m",
                "pip",
                "install",
                "--progress-bar",
                "off",
                "--disable-pip-version-check",
                "--no-input",
            ]
            .iter()
            .map(|a| a.to_string())
            .collect();
            if !source_builds {
                args.extend(["--only-binary".into(), ":all:".into()]);
            }
            // Nothing after `--` is read as an option.
            args.push("--".into());
            args.extend(requirements.iter().cloned());
            run_installer(
                &confine::Installer {
                    what: format!("pip install {}", requirements.join(" ")),
                    program: dir.join("bin/python"),
                    args,
                    writable: vec![dir.to_path_buf()],
                    may_exec: source_builds,
                    builds: source_builds,
                },
                limits,
            )
        })?);
    }
    installed.notes.extend(limits.take_notes());
    Ok(installed)
}

/// How npm runs without a shell or `env` in between: the Node on PATH and npm's own script
/// (`npm` is a link to `npm-cli.js`, whose `#!` line names node), so that the installer's
/// sandbox can refuse every program npm would start after it.
fn npm_command() -> Result<(PathBuf, PathBuf), SetupError> {
    let missing = || SetupError::Missing {
        tool: "npm",
        hint: "install Node.js with npm".into(),
    };
    let path = std::env::var("PATH").ok();
    let npm = crate::sandbox::process::resolve_program("npm", path.as_deref())
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .ok_or_else(missing)?;
    let node = crate::sandbox::process::resolve_program("node", path.as_deref())
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok())
        .ok_or_else(missing)?;
    let words = crate::sandbox::preflight::shebang_words(&npm);
    let names_node = words
        .iter()
        .any(|w| Path::new(w).file_name().is_some_and(|n| n == "node"));
    if !names_node {
        return Err(SetupError::Missing {
            tool: "npm",
            hint: format!(
                "{} is not npm's own script (its first line names no node): install npm from Node.js or the npm registry",
                npm.display()
            ),
        });
    }
    Ok((node, npm))
}

/// Runs npm with `args` (after npm's own script) in the installers' sandbox, writing only to
/// `writable`, its standard output to `stdout` when given.
fn run_npm(
    what: String,
    args: Vec<String>,
    writable: Vec<PathBuf>,
    limits: &SetupLimits,
    stdout: Option<std::fs::File>,
) -> Result<(), SetupError> {
    let (node, npm) = npm_command()?;
    let mut all = vec![npm.display().to_string()];
    all.extend(args);
    run_installer_with(
        &confine::Installer {
            what,
            program: node,
            args: all,
            writable,
            may_exec: limits.confinement.allow_source_builds,
            builds: limits.confinement.allow_source_builds,
        },
        limits,
        stdout,
    )
}

/// `npm install`s `packages` (validated pins) into the prefix `dir`, without their install
/// scripts.
fn npm_install(dir: &Path, packages: &[String], limits: &SetupLimits) -> Result<(), SetupError> {
    mkdir_shared(dir)?;
    let mut args: Vec<String> = vec![
        "install".into(),
        "--prefix".into(),
        dir.display().to_string(),
    ];
    args.extend(
        [
            "--no-audit",
            "--no-fund",
            "--no-save",
            "--ignore-scripts",
            "--loglevel=error",
            // Nothing after `--` is read as an option.
            "--",
        ]
        .iter()
        .map(|a| a.to_string()),
    );
    args.extend(packages.iter().cloned());
    run_npm(
        format!("npm install {}", packages.join(" ")),
        args,
        vec![dir.to_path_buf()],
        limits,
        None,
    )
}

/// Launchers that fetch the server from a registry at run time, and what to use instead.
const NETWORK_LAUNCHERS: [(&str, &str); 6] = [
    ("npx", "npm"),
    ("bunx", "npm"),
    ("pnpx", "npm"),
    ("uvx", "pip"),
    ("pipx", "pip"),
    ("uv", "pip"),
];

/// When `command` starts a launcher that downloads the server at run time (which the
/// sandbox's network namespace forbids), what to do instead, in words.
pub fn network_launcher_advice(command: &[String]) -> Option<String> {
    let program = Path::new(command.first()?).file_name()?.to_str()?;
    let (launcher, ecosystem) = NETWORK_LAUNCHERS
        .iter()
        .find(|(name, _)| *name == program)?;
    // `uv run` / `uv tool run` / `pipx run` download; other subcommands are not launchers.
    let rest: Vec<&str> = command[1..].iter().map(String::as_str).collect();
    if matches!(*launcher, "uv" | "pipx") && !rest.iter().any(|a| *a == "run" || *a == "x") {
        return None;
    }
    let package = rest
        .iter()
        .find(|a| !a.starts_with('-') && !matches!(**a, "run" | "tool" | "x" | "exec"))
        .copied()
        .unwrap_or("PACKAGE");
    let bare = match package.strip_prefix('@') {
        Some(scoped) => scoped
            .split_once('@')
            .map(|(n, _)| format!("@{n}"))
            .unwrap_or_else(|| package.to_string()),
        None => package
            .split(['@', '='])
            .next()
            .unwrap_or(package)
            .to_string(),
    };
    // The version the user asked for, when the launcher's argument named one.
    let pinned = package.len() > bare.len() + 1;
    let version = if pinned {
        package[bare.len() + 1..]
            .trim_start_matches('=')
            .to_string()
    } else {
        "VERSION".to_string()
    };
    Some(match *ecosystem {
        "npm" => format!(
            "`{launcher}` downloads {package} when it starts, but the sandbox has no network. \
Install it first and launch the installed entry point: in a scenario, \
[setup] npm = [\"{bare}@{version}\"] and [server] command = [\"node\", \"{{npm}}/node_modules/{bare}/<entry>.js\", …]; \
on the command line, `npm install --prefix DIR {bare}@{version}`, then \
`hintcheck verify -- node DIR/node_modules/{bare}/<entry>.js …` (the entry is `bin` in its package.json). \
--no-sandbox would let {launcher} download, without any isolation."
        ),
        _ => format!(
            "`{launcher}` downloads {package} when it starts, but the sandbox has no network. \
Install it first and launch the installed entry point: in a scenario, \
[setup] pip = [\"{bare}=={version}\"] and [server] command = [\"{{venv}}/bin/{bare}\", …]; \
on the command line, `python3 -m venv DIR && DIR/bin/pip install {bare}=={version}`, then \
`hintcheck verify -- DIR/bin/{bare} …`. --no-sandbox would let {launcher} download, without any isolation."
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn installer_output_keeps_its_last_lines_whatever_the_line_ends() {
        let mut t = OutputTail::default();
        t.push(b"Collecting mcp\nDownloading 10%\rDownloading 100%\r\n");
        t.push(b"\n\nInstalling coll");
        t.push(b"ected packages");
        assert_eq!(t.last(), Some("Downloading 100%"));
        assert_eq!(
            t.tail(2),
            "Downloading 100% | Installing collected packages"
        );
        for i in 0..100 {
            t.push(format!("line {i}\n").as_bytes());
        }
        assert_eq!(t.lines.len(), OutputTail::KEEP);
        assert_eq!(t.last(), Some("line 99"));
    }

    #[test]
    fn packages_must_be_pinned() {
        let ok = SetupSection {
            npm: vec!["@scope/pkg@1.2.3".into(), "plain@0.1.0".into()],
            pip: vec!["tool==2026.1.1".into()],
            ..Default::default()
        };
        assert!(check_pins(&ok).is_ok());
        for bad in ["@scope/pkg", "plain", "plain@latest"] {
            let s = SetupSection {
                npm: vec![bad.into()],
                ..Default::default()
            };
            assert!(check_pins(&s).is_err(), "{bad}");
        }
        let s = SetupSection {
            pip: vec!["tool>=1".into()],
            ..Default::default()
        };
        let err = check_pins(&s).expect_err("unpinned");
        assert!(err.to_string().contains("\"tool==1.2.3\""), "{err}");
    }

    #[test]
    fn launchers_that_download_are_recognised_with_their_package() {
        let advice = network_launcher_advice(&cmd(&[
            "npx",
            "-y",
            "@modelcontextprotocol/server-memory@1.0.0",
        ]))
        .expect("npx");
        assert!(
            advice.contains("[setup] npm = [\"@modelcontextprotocol/server-memory@1.0.0\"]"),
            "{advice}"
        );
        let advice =
            network_launcher_advice(&cmd(&["/usr/bin/uvx", "mcp-server-time"])).expect("uvx");
        assert!(advice.contains("{venv}/bin/mcp-server-time"), "{advice}");
        assert!(network_launcher_advice(&cmd(&["uv", "run", "--with", "x", "srv"])).is_some());
        assert!(network_launcher_advice(&cmd(&["uv", "--version"])).is_none());
        assert!(network_launcher_advice(&cmd(&["node", "dist/index.js"])).is_none());
    }

    #[test]
    fn entry_points_of_installed_packages_are_found() {
        let dir = tempfile::tempdir().expect("tmp");
        let npm = dir.path().join("npm");
        let pkg = npm.join("node_modules/@x/notes");
        std::fs::create_dir_all(&pkg).expect("mkdir");
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name": "@x/notes", "bin": {"other": "o.js", "notes": "dist/cli.js"}}"#,
        )
        .expect("write");
        let venv = dir.path().join("venv");
        let info = venv.join("lib/python3.12/site-packages/b_server-2.0.0.dist-info");
        std::fs::create_dir_all(&info).expect("mkdir");
        std::fs::write(
            info.join("entry_points.txt"),
            "[console_scripts]\nb-tool = b:main\nb-server = b.server:main\n",
        )
        .expect("write");
        let mut i = Installed {
            npm: Some(npm.clone()),
            venv: Some(venv.clone()),
            ..Installed::default()
        };
        assert_eq!(
            i.substitute("{npm_bin:@x/notes}"),
            pkg.join("dist/cli.js").display().to_string()
        );
        assert_eq!(
            i.substitute("{venv_bin:B.Server}"),
            venv.join("bin/b-server").display().to_string()
        );
        assert_eq!(i.substitute("{npm_bin:@x/missing}"), "{npm_bin:@x/missing}");
        assert_eq!(i.substitute("{npm_bin:../../etc}"), "{npm_bin:../../etc}");
        // A package without engines runs on the machine's Node; one given another keeps it.
        assert_eq!(i.substitute("{node_for:@x/notes}"), "node");
        i.node
            .insert("@x/notes".into(), "/c/node/22/bin/node".into());
        assert_eq!(i.substitute("{node_for:@x/notes}"), "/c/node/22/bin/node");
    }

    #[test]
    fn a_failed_install_is_tried_once_more_and_a_stopped_one_is_not() {
        let cache = tempfile::tempdir().expect("tmp");
        let failed = || SetupError::Failed {
            what: "pip install x==1".into(),
            code: 1,
            output: "connection reset".into(),
        };
        let calls = std::cell::Cell::new(0);
        let limits = SetupLimits::within(Duration::from_secs(60), false);
        let dir = install_once(cache.path(), "venv", &["x==1".into()], &limits, |d| {
            calls.set(calls.get() + 1);
            std::fs::create_dir_all(d).expect("an installer makes its directory");
            if calls.get() == 1 {
                Err(failed())
            } else {
                Ok(())
            }
        })
        .expect("the second try works");
        assert_eq!(calls.get(), 2);
        assert!(dir.join(".hintcheck-installed").is_file());
        calls.set(0);
        let e = install_once(cache.path(), "venv", &["y==1".into()], &limits, |_| {
            calls.set(calls.get() + 1);
            Err(failed())
        });
        assert!(matches!(e, Err(SetupError::Failed { .. })) && calls.get() == 2);
        calls.set(0);
        let e = install_once(cache.path(), "venv", &["z==1".into()], &limits, |_| {
            calls.set(calls.get() + 1);
            Err(SetupError::Stopped {
                what: "pip".into(),
                why: "interrupted by a signal".into(),
                elapsed: Duration::from_secs(1),
            })
        });
        assert!(matches!(e, Err(SetupError::Stopped { .. })) && calls.get() == 1);
    }

    #[test]
    fn a_lock_nobody_releases_ends_in_an_error_naming_it_and_an_install_needs_none() {
        let cache = tempfile::tempdir().expect("tmp");
        let mut limits = SetupLimits::within(Duration::from_secs(60), false);
        limits.lock_wait = Duration::from_millis(300);
        let dir = cache.path().join("venv/0123456789abcdef");
        std::fs::create_dir_all(dir.parent().expect("parent")).expect("mkdir");
        // Held through another open file description, by a process that is not hintcheck
        // (this test binary).
        let holder = lock(&dir, &limits).expect("first lock");
        std::fs::write(dir.with_extension("lock"), "1\n").expect("name another holder");
        let started = Instant::now();
        let e = lock(&dir, &limits)
            .err()
            .expect("the second lock waits, then fails");
        assert!(started.elapsed() >= limits.lock_wait);
        let text = e.to_string();
        assert!(
            text.contains(&dir.with_extension("lock").display().to_string()),
            "{text}"
        );
        assert!(text.contains("not a hintcheck"), "{text}");
        // What is installed already is used without the lock.
        let calls = std::cell::Cell::new(0);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let key = sha256_hex(b"x==1");
        let installed = cache.path().join("venv").join(&key[..16]);
        std::fs::create_dir_all(&installed).expect("mkdir");
        std::fs::write(installed.join(".hintcheck-installed"), "x==1").expect("marker");
        let _held = lock(&installed, &limits).expect("lock of the installed one");
        let got = install_once(cache.path(), "venv", &["x==1".into()], &limits, |_| {
            calls.set(calls.get() + 1);
            Ok(())
        })
        .expect("installed");
        assert_eq!((got, calls.get()), (installed, 0));
        drop(holder);
    }

    #[test]
    fn placeholders_are_replaced_only_when_installed() {
        let i = Installed {
            npm: Some("/c/npm/ab".into()),
            ..Installed::default()
        };
        assert_eq!(
            i.substitute("{npm}/node_modules/x/index.js"),
            "/c/npm/ab/node_modules/x/index.js"
        );
        assert_eq!(i.substitute("{venv}/bin/x"), "{venv}/bin/x");
    }
}
