//! The validated run configuration. [`RunConfig::from_verify_args`] resolves the command line,
//! an optional scenario and the project's config file ([`file`]) into one value with every
//! default applied; the library never sees clap types. Errors name the flag or file at fault.

pub mod file;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::baseline::{Baseline, BaselineError};
use crate::cli::{ColorArg, EraArg, FailOnArg, Format, RootsArg, SandboxArg, VerifyArgs};
use crate::finding::{Category, FailOn, FailRule};
use crate::mcp::client::EraChoice;
use crate::progress::ProgressHook;
use crate::sandbox::SandboxLevel;
use crate::scenario::{Scenario, ScenarioError};
use crate::setup::{Installed, SetupError, SetupSection, network_launcher_advice};
use crate::text::format_duration;
use file::{ConfigFile, ConfigFileError};

/// Errors in the user's input.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A flag has a bad value.
    #[error("{flag}: {message}")]
    BadValue {
        /// The flag.
        flag: String,
        /// What is wrong.
        message: String,
    },
    /// No server command was given.
    #[error(
        "no server command: give one after `--` (hintcheck verify -- CMD ARGS…) or use --scenario FILE"
    )]
    NoCommand,
    /// Both a scenario and a command were given.
    #[error("give either --scenario or a command after `--`, not both")]
    ScenarioAndCommand,
    /// The scenario could not be used.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// The config file could not be used.
    #[error(transparent)]
    File(#[from] ConfigFileError),
    /// The baseline could not be used.
    #[error(transparent)]
    Baseline(#[from] BaselineError),
    /// The server could not be installed.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The command downloads its server at run time, which the sandbox forbids.
    #[error("{0}")]
    NetworkLauncher(String),
    /// The fake server of the harness was not found.
    #[error(
        "the scenario needs the harness's fake server, which was not found next to hintcheck ({searched}); build it with `cargo build --workspace` or set HINTCHECK_FAKE_SERVER"
    )]
    NoFakeServer {
        /// Where we looked.
        searched: String,
    },
}

/// Roots offered to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootsOffer {
    /// None.
    None,
    /// The scratch workspace.
    Workspace,
}

/// How the server speaks MCP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// JSON-RPC lines on its stdin and stdout.
    Stdio,
    /// Streamable HTTP on the port `{port}` names (one hintcheck chooses), or on the fixed
    /// port the server always listens on.
    Http {
        /// The MCP endpoint's path.
        path: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
        /// The port the server listens on whatever it is told (`--http-port`).
        port: Option<u16>,
    },
}

impl Transport {
    /// The name reports give HTTP when the server spoke only the older HTTP+SSE transport
    /// (2024-11-05), which `--transport http` falls back to.
    pub const LEGACY_HTTP: &'static str = "http+sse";

    /// Its name in reports (`stdio`, `http`).
    pub fn name(&self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http { .. } => "http",
        }
    }
}

/// Servers kept going at the same time for replays and isolated runs, by default: the
/// second core works while the first waits on a server.
pub const DEFAULT_JOBS: usize = 2;

/// Everything a run needs, validated.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The server command; placeholders are substituted at launch.
    pub command: Vec<String>,
    /// Extra environment for the server.
    pub env: Vec<(String, String)>,
    /// Seed directory for the workspace.
    pub workspace_seed: Option<PathBuf>,
    /// A SQLite database to create in the workspace (relative path).
    pub sqlite_seed: Option<PathBuf>,
    /// Calls per tool.
    pub repeat: usize,
    /// Argument sets tried per tool while its calls fail.
    pub attempts: usize,
    /// Per-call timeout.
    pub call_timeout: Duration,
    /// Handshake timeout.
    pub handshake_timeout: Duration,
    /// Discover-probe timeout.
    pub discover_timeout: Duration,
    /// Whole-run timeout (the `[setup]` installs included).
    pub run_timeout: Duration,
    /// When the command began (reading the configuration): `run_timeout` counts from here, so
    /// the `[setup]` installs spend the run's time.
    pub begun: Instant,
    /// `[setup]` installs still to do ([`RunConfig::install_setup`]).
    pub pending_setup: Option<PendingSetup>,
    /// What the `[setup]` installed, once it has (its notes go into the report).
    pub installed: Option<Installed>,
    /// How long the server's processes must be idle after a response before the call's
    /// window closes.
    pub settle: Duration,
    /// The longest the window stays open after a response.
    pub settle_max: Duration,
    /// After the last call, the longest wait for threads and processes that calls started
    /// and that can still act on their own.
    pub late_wait: Duration,
    /// After the greeting and every restart, the longest wait for the server's start-up
    /// activity to settle (zero: no wait).
    pub startup_quiet: Duration,
    /// Synthesis seed.
    pub seed: u64,
    /// Roots offered.
    pub roots: RootsOffer,
    /// Era choice.
    pub era: EraChoice,
    /// What the client calls itself in the handshake (`clientInfo` name and version).
    pub client_info: (String, String),
    /// How the server speaks MCP.
    pub transport: Transport,
    /// Line cap.
    pub max_line_bytes: usize,
    /// Argument overrides by tool.
    pub overrides: BTreeMap<String, Value>,
    /// How often a crashed or hung server is restarted.
    pub max_restarts: usize,
    /// Output format.
    pub format: Format,
    /// Output file.
    pub output: Option<PathBuf>,
    /// Transcript file.
    pub transcript: Option<PathBuf>,
    /// The sandbox level, or `None` for no sandbox.
    pub sandbox: Option<SandboxLevel>,
    /// RLIMIT_DATA of the server in bytes.
    pub memory_limit: u64,
    /// Bytes the server may write into its scratch directories (the watchdog ends the run
    /// past it).
    pub disk_limit: u64,
    /// Host directories covered by an overlay (absolute, existing).
    pub overlays: Vec<PathBuf>,
    /// Host directories kept visible read-only in the sandbox's hidden places (absolute,
    /// existing).
    pub expose: Vec<PathBuf>,
    /// TCP ports whose first bytes the network observer reads (80, 443, 8080, 8443 and more).
    pub observe_ports: Vec<u16>,
    /// As root, the uid and gid the sandboxed server runs as; `None`: a uid of its own for
    /// every run, from a reserved range (see [`crate::sandbox::policy::allocate_run_uid`]).
    pub run_as: Option<(u32, u32)>,
    /// Call only these tools (replays use it); `None` calls all.
    pub only_tools: Option<Vec<String>>,
    /// Whether `only_tools` is also the order of the calls (replays of "this tool, then that
    /// one").
    pub keep_order: bool,
    /// The least time to leave the server alone after its greeting, before any call: set only
    /// by the replay that runs no tool (how long the first call of the run came after the
    /// start), so that the server's own delayed start-up work shows.
    pub hold_before_calls: Duration,
    /// Whether uncertain attributions are confirmed by replaying tools alone.
    pub replay: bool,
    /// One fresh server and workspace per tool.
    pub isolate: bool,
    /// Servers kept going at the same time for replays and isolated runs (in the sandbox).
    pub jobs: usize,
    /// The binary that runs the sandbox init; `None` means this executable (the hintcheck
    /// binary). Library users whose executable is something else set it.
    pub sandbox_exe: Option<PathBuf>,
    /// The scenario, when one was given.
    pub scenario: Option<Scenario>,
    /// What fails the run: the lowest severity and the categories excepted.
    pub fail: FailRule,
    /// Accepted findings.
    pub baseline: Option<Baseline>,
    /// Whether baseline entries that match nothing fail the run.
    pub fail_on_stale_baseline: bool,
    /// Whether tools must declare the hints app directories require (`missing-hints`).
    pub require_hints: bool,
    /// Where the extra reports go.
    pub outputs: Outputs,
    /// Colour and progress.
    pub terminal: Terminal,
    /// The config file that was read.
    pub config_file: Option<PathBuf>,
    /// Where progress events go (nowhere unless the binary installs a display).
    pub progress: ProgressHook,
    /// Whether the report is checked against the scenario's `[expect]` (which then decides
    /// the exit code).
    pub check_expectations: bool,
}

/// `--timeout` when nothing sets it.
pub const DEFAULT_RUN_TIMEOUT: Duration = Duration::from_secs(900);

/// Parses `30s`, `500ms`, `2m`, `1h` or a plain number of seconds.
pub fn parse_duration(flag: &str, s: &str) -> Result<Duration, ConfigError> {
    let bad = |m: &str| ConfigError::BadValue {
        flag: flag.into(),
        message: format!("{s:?} {m} (use e.g. 500ms, 30s, 2m)"),
    };
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&s[..i], s[i..].trim()),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| bad("is not a duration"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad("has an unknown unit")),
    };
    if !secs.is_finite() || !(0.0..=7.0 * 24.0 * 3600.0).contains(&secs) {
        return Err(bad("is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses `512MiB`, `4G`, `1024k` or a plain number of bytes.
pub fn parse_size(flag: &str, s: &str) -> Result<u64, ConfigError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim().to_ascii_lowercase());
    let n: u64 = num.parse().map_err(|_| ConfigError::BadValue {
        flag: flag.into(),
        message: format!("{s:?} is not a size (use e.g. 512MiB or 4G)"),
    })?;
    let mult: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => {
            return Err(ConfigError::BadValue {
                flag: flag.into(),
                message: format!("{s:?} has an unknown unit"),
            });
        }
    };
    let bytes = n
        .checked_mul(mult)
        .filter(|b| *b >= 16 << 20)
        .ok_or_else(|| ConfigError::BadValue {
            flag: flag.into(),
            message: format!("{s:?} is out of range (at least 16MiB)"),
        })?;
    Ok(bytes)
}

fn parse_env(items: &[String]) -> Result<Vec<(String, String)>, ConfigError> {
    items
        .iter()
        .map(|item| {
            let (k, v) = match item.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                None => {
                    let v = std::env::var(item).map_err(|_| ConfigError::BadValue {
                        flag: "--env".into(),
                        message: format!(
                            "{item:?} has no `=VALUE` and is not set in hintcheck's environment"
                        ),
                    })?;
                    (item.clone(), v)
                }
            };
            if k.is_empty() || k.contains('\0') || v.contains('\0') {
                return Err(ConfigError::BadValue {
                    flag: "--env".into(),
                    message: format!("{item:?} is not K=V"),
                });
            }
            Ok((k, v))
        })
        .collect()
}

fn parse_overrides(items: &[String]) -> Result<BTreeMap<String, Value>, ConfigError> {
    let mut out = BTreeMap::new();
    for item in items {
        let (tool, json) = item.split_once('=').ok_or_else(|| ConfigError::BadValue {
            flag: "--args".into(),
            message: format!("{item:?} is not TOOL=JSON"),
        })?;
        let v: Value = serde_json::from_str(json).map_err(|e| ConfigError::BadValue {
            flag: "--args".into(),
            message: format!("{tool}: not JSON: {e}"),
        })?;
        if !v.is_object() {
            return Err(ConfigError::BadValue {
                flag: "--args".into(),
                message: format!("{tool}: the arguments must be a JSON object"),
            });
        }
        out.insert(tool.to_string(), v);
    }
    Ok(out)
}

/// The harness's fake server: `HINTCHECK_FAKE_SERVER`, or next to our own binary.
pub fn find_fake_server() -> Result<PathBuf, ConfigError> {
    if let Ok(p) = std::env::var("HINTCHECK_FAKE_SERVER") {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut searched = Vec::new();
    let mut dir = exe.parent().map(Path::to_path_buf);
    for _ in 0..2 {
        let Some(d) = dir else { break };
        let candidate = d.join("hintcheck-fake-server");
        if candidate.is_file() {
            return Ok(candidate);
        }
        searched.push(candidate.display().to_string());
        dir = d.parent().map(Path::to_path_buf);
    }
    Err(ConfigError::NoFakeServer {
        searched: searched.join(", "),
    })
}

/// `[setup]` installs still to do, with where and within what.
#[derive(Debug, Clone)]
pub struct PendingSetup {
    /// What to install.
    pub section: SetupSection,
    /// The cache it goes into.
    pub cache: PathBuf,
    /// The deadline and whether progress is printed.
    pub limits: crate::setup::SetupLimits,
}

/// Where the extra reports of a run go.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// SARIF file.
    pub sarif: Option<PathBuf>,
    /// JUnit XML file.
    pub junit: Option<PathBuf>,
    /// JSON report file (beside the main report).
    pub json: Option<PathBuf>,
    /// Print GitHub workflow annotations on stdout.
    pub annotations: bool,
    /// Markdown summary file (appended to).
    pub summary: Option<PathBuf>,
    /// The tool inventory SARIF results point at; `None` puts `hintcheck-tools.json` next
    /// to the SARIF output.
    pub inventory: Option<PathBuf>,
    /// Files searched for each tool's name to anchor its SARIF results.
    pub anchors: Vec<PathBuf>,
    /// The directory SARIF paths are relative to.
    pub source_root: PathBuf,
    /// Where to write this run's findings as a baseline.
    pub write_baseline: Option<PathBuf>,
}

/// How the run talks to the terminal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Terminal {
    /// Colour in the text report (on stdout) and progress.
    pub color: bool,
    /// A progress display on stderr.
    pub progress: bool,
    /// Plain progress lines on stderr (a log, not a terminal), every few seconds on long runs.
    pub progress_lines: bool,
    /// The text report in full (`--verbose`).
    pub verbose: bool,
}

impl Terminal {
    /// Resolves `--color` and `--no-progress` against NO_COLOR, CLICOLOR_FORCE, FORCE_COLOR,
    /// TERM=dumb and whether stdout and stderr are terminals.
    pub fn resolve(color: Option<ColorArg>, no_progress: bool) -> Terminal {
        use std::io::IsTerminal;
        let set = |k: &str| std::env::var_os(k).is_some_and(|v| !v.is_empty());
        let forced = set("CLICOLOR_FORCE") || set("FORCE_COLOR");
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        let color = match color.unwrap_or_default() {
            ColorArg::Always => true,
            ColorArg::Never => false,
            ColorArg::Auto if set("NO_COLOR") => false,
            ColorArg::Auto if forced => true,
            ColorArg::Auto => std::io::stdout().is_terminal() && !dumb,
        };
        let bar = !dumb && std::io::stderr().is_terminal();
        Terminal {
            color,
            progress: !no_progress && bar,
            progress_lines: !no_progress && !bar,
            verbose: false,
        }
    }
}

impl RunConfig {
    /// Validates the verify arguments (with the scenario and the config file they lead to)
    /// into a run configuration. Precedence: flags, then the scenario, then the config file,
    /// then defaults.
    pub fn from_verify_args(a: &VerifyArgs) -> Result<RunConfig, ConfigError> {
        let mut config = Self::deferring_setup(a)?;
        config.install_setup()?;
        Ok(config)
    }

    /// Like [`RunConfig::from_verify_args`], with the `[setup]` installs left to
    /// [`RunConfig::install_setup`] (validated already): so that a failed or interrupted
    /// install can still be reported in the format asked.
    pub fn deferring_setup(a: &VerifyArgs) -> Result<RunConfig, ConfigError> {
        let begun = Instant::now();
        let cwd = std::env::current_dir().unwrap_or_default();
        let file = if a.no_config {
            None
        } else {
            match file::discover(a.config.as_deref(), &cwd) {
                Some(p) => Some(ConfigFile::load(&p)?),
                None => None,
            }
        };
        let scenario = match &a.scenario {
            Some(p) => Some(Scenario::load(p)?),
            None => None,
        };
        if scenario.is_some() && !a.command.is_empty() {
            return Err(ConfigError::ScenarioAndCommand);
        }
        let file_run = file
            .as_ref()
            .map(|f| f.run.clone().with_base(&f.base))
            .unwrap_or_default();
        let run = match &scenario {
            Some(s) => s.run.clone().with_base(&s.dir()).over(file_run),
            None => file_run,
        };
        let duration = |flag: &str,
                        cli: &Option<String>,
                        file: &Option<String>,
                        default: Duration|
         -> Result<Duration, ConfigError> {
            match cli.as_ref().or(file.as_ref()) {
                Some(s) => parse_duration(flag, s),
                None => Ok(default),
            }
        };
        let mut env = Vec::new();
        let mut workspace_seed = a.workspace.clone();
        let mut overrides = BTreeMap::new();
        let mut sqlite_seed = a.sqlite.clone();
        if let Some(f) = &file {
            env.extend(f.server.env.iter().map(|(k, v)| (k.clone(), v.clone())));
            overrides = f.run.arg_overrides(&f.path)?;
        }
        let mut command = a.command.clone();
        if let Some(s) = &scenario {
            command = match &s.server.command {
                Some(c) => c.clone(),
                None => {
                    let mut c = vec![
                        "{fake_server}".into(),
                        "--scenario".into(),
                        "{scenario}".into(),
                    ];
                    // The fake server speaks HTTP when its scenario asks for that transport.
                    if a.transport == Some(crate::cli::TransportArg::Http)
                        || s.run.transport.as_deref() == Some("http")
                    {
                        c.extend(["--http".into(), "{port}".into()]);
                    }
                    c
                }
            };
            let fake = if command.iter().any(|c| c.contains("{fake_server}")) {
                Some(find_fake_server()?.display().to_string())
            } else {
                None
            };
            let scenario_path = s.path.display().to_string();
            let scenario_dir = s.dir().display().to_string();
            for c in &mut command {
                *c = c
                    .replace("{scenario}", &scenario_path)
                    .replace("{scenario_dir}", &scenario_dir);
                if let Some(f) = &fake {
                    *c = c.replace("{fake_server}", f);
                }
            }
            env.extend(s.server.env.iter().map(|(k, v)| (k.clone(), v.clone())));
            if workspace_seed.is_none() {
                workspace_seed = s.server.workspace.as_ref().map(|w| s.dir().join(w));
            }
            sqlite_seed = sqlite_seed.or_else(|| s.server.sqlite.clone());
            overrides.extend(s.arg_overrides()?);
        }
        if let Some(f) = &file {
            if command.is_empty() {
                let dir = f.base.display().to_string();
                command = f
                    .server
                    .command
                    .iter()
                    .flatten()
                    .map(|c| c.replace("{config_dir}", &dir))
                    .collect();
            }
            if workspace_seed.is_none() {
                workspace_seed = f.server.workspace.as_ref().map(|w| f.resolve(w));
            }
            sqlite_seed = sqlite_seed.or_else(|| f.server.sqlite.clone());
        }
        if command.is_empty() || command[0].is_empty() {
            return Err(ConfigError::NoCommand);
        }
        // Install what the scenario (or else the config file) needs, outside the sandbox.
        let setup: Option<&SetupSection> = match (&scenario, &file) {
            (Some(s), _) if !s.setup.is_empty() => Some(&s.setup),
            (None, Some(f)) if !f.setup.is_empty() && a.command.is_empty() => Some(&f.setup),
            _ => None,
        };
        let pending_setup = match setup {
            Some(setup) => {
                crate::setup::check_pins(setup)?;
                let cache = a.cache_dir.clone().unwrap_or_else(crate::setup::cache_root);
                // The installs end at `[setup] timeout` and, the run's timeout bounding the
                // command as a whole, at `--timeout`.
                let own = match &setup.timeout {
                    Some(t) => parse_duration("[setup] timeout", t)
                        .map_err(|e| SetupError::BadTimeout(e.to_string()))?,
                    None => crate::setup::DEFAULT_SETUP_TIMEOUT,
                };
                let run_timeout =
                    duration("--timeout", &a.timeout, &run.timeout, DEFAULT_RUN_TIMEOUT)?;
                let mut limits =
                    crate::setup::SetupLimits::within(own.min(run_timeout), !a.no_progress);
                if run_timeout < own {
                    limits.deadline_name =
                        format!("the run timeout ({})", format_duration(run_timeout));
                }
                Some(PendingSetup {
                    section: setup.clone(),
                    cache,
                    limits,
                })
            }
            None => None,
        };
        env.extend(parse_env(&a.env)?);
        overrides.extend(parse_overrides(&a.args)?);
        let repeat = a.repeat.or(run.repeat).unwrap_or(2);
        if !(1..=20).contains(&repeat) {
            return Err(ConfigError::BadValue {
                flag: "--repeat".into(),
                message: format!("{repeat} is not between 1 and 20"),
            });
        }
        let attempts = a.attempts.or(run.attempts).unwrap_or(4);
        if !(1..=16).contains(&attempts) {
            return Err(ConfigError::BadValue {
                flag: "--attempts".into(),
                message: format!("{attempts} is not between 1 and 16"),
            });
        }
        let roots = match a.roots {
            Some(RootsArg::Workspace) => RootsOffer::Workspace,
            Some(RootsArg::None) => RootsOffer::None,
            None => match run.roots.as_deref() {
                None | Some("none") => RootsOffer::None,
                Some("workspace") => RootsOffer::Workspace,
                Some(other) => {
                    return Err(ConfigError::BadValue {
                        flag: "[run] roots".into(),
                        message: format!("{other:?} is not none or workspace"),
                    });
                }
            },
        };
        let transport = match a
            .transport
            .map(|t| match t {
                crate::cli::TransportArg::Stdio => "stdio",
                crate::cli::TransportArg::Http => "http",
            })
            .or(run.transport.as_deref())
        {
            None | Some("stdio") => Transport::Stdio,
            Some("http") => {
                let path = a
                    .http_path
                    .clone()
                    .or_else(|| run.http_path.clone())
                    .unwrap_or_else(|| "/mcp".into());
                if !path.starts_with('/')
                    || path.chars().any(|c| c.is_whitespace() || c.is_control())
                {
                    return Err(ConfigError::BadValue {
                        flag: "--http-path".into(),
                        message: format!("{path:?} is not an absolute path without spaces"),
                    });
                }
                let mut headers: Vec<(String, String)> = run
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                for h in &a.headers {
                    let Some((k, v)) = h.split_once('=') else {
                        return Err(ConfigError::BadValue {
                            flag: "--header".into(),
                            message: format!("{h:?} is not K=V"),
                        });
                    };
                    headers.push((k.trim().to_string(), v.trim().to_string()));
                }
                for (k, v) in &headers {
                    if hyper::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                        || hyper::header::HeaderValue::from_str(v).is_err()
                    {
                        return Err(ConfigError::BadValue {
                            flag: "--header".into(),
                            message: format!("{k}={v} is not a valid HTTP header"),
                        });
                    }
                }
                let port = a.http_port.or(run.http_port);
                if let Some(p) = port
                    && p < 1024
                {
                    return Err(ConfigError::BadValue {
                        flag: "--http-port".into(),
                        message: format!(
                            "{p} is below 1024: the server runs without privileges and cannot listen there"
                        ),
                    });
                }
                Transport::Http {
                    path,
                    headers,
                    port,
                }
            }
            Some(other) => {
                return Err(ConfigError::BadValue {
                    flag: "[run] transport".into(),
                    message: format!("{other:?} is not stdio or http"),
                });
            }
        };
        if transport == Transport::Stdio
            && (a.http_path.is_some() || !a.headers.is_empty() || a.http_port.is_some())
        {
            return Err(ConfigError::BadValue {
                flag: if a.http_path.is_some() {
                    "--http-path"
                } else if a.http_port.is_some() {
                    "--http-port"
                } else {
                    "--header"
                }
                .into(),
                message: "only with --transport http".into(),
            });
        }
        let era = match a.era {
            Some(EraArg::Auto) => EraChoice::Auto,
            Some(EraArg::Modern) => EraChoice::Modern,
            Some(EraArg::Legacy) => EraChoice::Legacy,
            None => match run.era.as_deref() {
                None | Some("auto") => EraChoice::Auto,
                Some("modern") => EraChoice::Modern,
                Some("legacy") => EraChoice::Legacy,
                Some(other) => {
                    return Err(ConfigError::BadValue {
                        flag: "[run] era".into(),
                        message: format!("{other:?} is not auto, modern or legacy"),
                    });
                }
            },
        };
        let client_info = match a.client_info.as_deref().or(run.client_info.as_deref()) {
            None => (
                crate::mcp::client::DEFAULT_CLIENT_NAME.to_string(),
                crate::mcp::client::DEFAULT_CLIENT_VERSION.to_string(),
            ),
            Some(text) => match text.rsplit_once('/') {
                Some((name, version))
                    if !name.trim().is_empty()
                        && !version.trim().is_empty()
                        && !text.chars().any(char::is_control) =>
                {
                    (name.trim().to_string(), version.trim().to_string())
                }
                _ => {
                    return Err(ConfigError::BadValue {
                        flag: if a.client_info.is_some() {
                            "--client-info".into()
                        } else {
                            "[run] client_info".into()
                        },
                        message: format!(
                            "{text:?} is not NAME/VERSION (e.g. \"Claude Desktop/0.14.1\")"
                        ),
                    });
                }
            },
        };
        let max_line_bytes = a
            .max_line_bytes
            .or(run.max_line_bytes)
            .unwrap_or(16 * 1024 * 1024);
        if max_line_bytes < 1024 {
            return Err(ConfigError::BadValue {
                flag: "--max-line-bytes".into(),
                message: "must be at least 1024".into(),
            });
        }
        if let Some(p) = &sqlite_seed {
            let inside = p
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            if !inside || p.as_os_str().is_empty() {
                return Err(ConfigError::BadValue {
                    flag: "--sqlite".into(),
                    message: format!(
                        "{} must be a relative path inside the workspace (no `..`, not absolute)",
                        p.display()
                    ),
                });
            }
        }
        if let Some(w) = &workspace_seed {
            if !w.is_dir() {
                return Err(ConfigError::BadValue {
                    flag: "--workspace".into(),
                    message: format!("{} is not a directory", w.display()),
                });
            }
        }
        let sandbox_section = file.as_ref().map(|f| f.sandbox.clone()).unwrap_or_default();
        let check_expectations = a.check;
        if check_expectations && scenario.as_ref().is_some_and(|s| s.expect.is_none()) {
            return Err(ConfigError::BadValue {
                flag: "--check".into(),
                message: "the scenario has no [expect] section to check".into(),
            });
        }
        let fail_section = file.as_ref().map(|f| f.fail.clone()).unwrap_or_default();
        let report_section = file.as_ref().map(|f| f.report.clone()).unwrap_or_default();
        let from_file = |p: &Option<PathBuf>| -> Option<PathBuf> {
            let f = file.as_ref()?;
            p.as_ref().map(|p| f.resolve(p))
        };
        let sandbox = match (a.no_sandbox, a.sandbox) {
            (true, _) => None,
            (false, Some(SandboxArg::BestEffort)) => Some(SandboxLevel::BestEffort),
            (false, Some(SandboxArg::Required)) => Some(SandboxLevel::Required),
            (false, None) => match sandbox_section.level.as_deref() {
                None | Some("required") => Some(SandboxLevel::Required),
                Some("best-effort") => Some(SandboxLevel::BestEffort),
                Some("off") => None,
                Some(other) => {
                    return Err(ConfigError::BadValue {
                        flag: "[sandbox] level".into(),
                        message: format!("{other:?} is not required, best-effort or off"),
                    });
                }
            },
        };
        if sandbox.is_some() {
            if let Some(advice) = network_launcher_advice(&command) {
                return Err(ConfigError::NetworkLauncher(advice));
            }
        }
        // The installers are confined as the server is (see `setup::confine`).
        let mut pending_setup = pending_setup;
        if let Some(p) = &mut pending_setup {
            p.limits.confinement = crate::setup::Confinement {
                level: sandbox,
                exe: None,
                allow_source_builds: a.allow_source_builds || p.section.allow_source_builds,
            };
        }
        let fail_on = match a.fail_on {
            Some(FailOnArg::Never) => FailOn::Never,
            Some(FailOnArg::Note) => FailOn::Note,
            Some(FailOnArg::Warning) => FailOn::Warning,
            Some(FailOnArg::Error) => FailOn::Error,
            None => match fail_section.on.as_deref() {
                None | Some("error") => FailOn::Error,
                Some("warning") => FailOn::Warning,
                Some("note") => FailOn::Note,
                Some("never") => FailOn::Never,
                Some(other) => {
                    return Err(ConfigError::BadValue {
                        flag: "[fail] on".into(),
                        message: format!("{other:?} is not never, note, warning or error"),
                    });
                }
            },
        };
        let except_names: Vec<(String, String)> = if a.fail_except.is_empty() {
            fail_section
                .except
                .clone()
                .unwrap_or_default()
                .into_iter()
                .map(|c| ("[fail] except".to_string(), c))
                .collect()
        } else {
            a.fail_except
                .iter()
                .map(|c| ("--fail-except".to_string(), c.clone()))
                .collect()
        };
        let mut fail = FailRule {
            on: fail_on,
            except: Vec::new(),
        };
        for (flag, name) in except_names {
            let category = Category::parse(name.trim()).ok_or_else(|| ConfigError::BadValue {
                flag,
                message: format!(
                    "{name:?} is not a category (one of: {})",
                    Category::ALL.map(Category::as_str).join(", ")
                ),
            })?;
            if !fail.except.contains(&category) {
                fail.except.push(category);
            }
        }
        let baseline = match a
            .baseline
            .clone()
            .or_else(|| from_file(&fail_section.baseline))
        {
            Some(p) => Some(Baseline::load(&p)?),
            None => None,
        };
        let format = match a.format {
            Some(f) => f,
            None => match report_section.format.as_deref() {
                None | Some("text") => Format::Text,
                Some("json") => Format::Json,
                Some("sarif") => Format::Sarif,
                Some("junit") => Format::Junit,
                Some("markdown") => Format::Markdown,
                Some("html") => Format::Html,
                Some(other) => {
                    return Err(ConfigError::BadValue {
                        flag: "[report] format".into(),
                        message: format!(
                            "{other:?} is not text, json, sarif, junit, markdown or html"
                        ),
                    });
                }
            },
        };
        let summary = if a.no_summary {
            None
        } else {
            a.summary
                .clone()
                .or_else(|| from_file(&report_section.summary))
                .or_else(|| {
                    std::env::var_os("GITHUB_STEP_SUMMARY")
                        .filter(|v| !v.is_empty())
                        .map(PathBuf::from)
                })
        };
        let outputs = Outputs {
            sarif: a.sarif.clone().or_else(|| from_file(&report_section.sarif)),
            junit: a.junit.clone().or_else(|| from_file(&report_section.junit)),
            json: a.json.clone().or_else(|| from_file(&report_section.json)),
            annotations: a.annotations || report_section.annotations.unwrap_or(false),
            summary,
            inventory: a
                .inventory
                .clone()
                .or_else(|| from_file(&report_section.inventory)),
            anchors: if a.anchor.is_empty() {
                report_section
                    .anchors
                    .iter()
                    .filter_map(|p| from_file(&Some(p.clone())))
                    .collect()
            } else {
                a.anchor.clone()
            },
            source_root: a
                .source_root
                .clone()
                .or_else(|| from_file(&report_section.source_root))
                .or_else(|| file.as_ref().map(|f| f.base.clone()))
                .unwrap_or_else(|| cwd.clone()),
            write_baseline: a.write_baseline.clone(),
        };
        for anchor in &outputs.anchors {
            if !anchor.is_file() {
                return Err(ConfigError::BadValue {
                    flag: "--anchor".into(),
                    message: format!("{} is not a file", anchor.display()),
                });
            }
        }
        if matches!(transport, Transport::Http { port: None, .. })
            && !command
                .iter()
                .chain(env.iter().map(|(_, v)| v))
                .any(|w| w.contains("{port}"))
        {
            return Err(ConfigError::BadValue {
                flag: "--transport http".into(),
                message: "`{port}` must appear in the command or an --env value: it becomes the port the server is to listen on (in the sandbox's own network namespace); a server that always listens on one port says so with --http-port".into(),
            });
        }
        let own_port = match &transport {
            Transport::Http { port, .. } => *port,
            Transport::Stdio => None,
        };
        let config = RunConfig {
            command,
            env,
            workspace_seed,
            sqlite_seed,
            repeat,
            attempts,
            call_timeout: duration(
                "--call-timeout",
                &a.call_timeout,
                &run.call_timeout,
                Duration::from_secs(30),
            )?,
            handshake_timeout: duration(
                "--handshake-timeout",
                &a.handshake_timeout,
                &run.handshake_timeout,
                Duration::from_secs(30),
            )?,
            discover_timeout: duration(
                "--discover-timeout",
                &a.discover_timeout,
                &run.discover_timeout,
                Duration::from_secs(3),
            )?,
            run_timeout: duration("--timeout", &a.timeout, &run.timeout, DEFAULT_RUN_TIMEOUT)?,
            begun,
            pending_setup,
            installed: None,
            settle: duration(
                "--settle",
                &a.settle,
                &run.settle,
                Duration::from_millis(10),
            )?,
            settle_max: duration(
                "--settle-max",
                &a.settle_max,
                &run.settle_max,
                Duration::from_secs(2),
            )?,
            late_wait: duration(
                "--late-wait",
                &a.late_wait,
                &run.late_wait,
                Duration::from_secs(5),
            )?,
            startup_quiet: duration(
                "--startup-quiet",
                &a.startup_quiet,
                &run.startup_quiet,
                Duration::from_secs(2),
            )?,
            seed: a
                .seed
                .or(run.seed)
                .unwrap_or_else(crate::exercise::vocab::fresh_seed),
            roots,
            era,
            client_info,
            transport,
            max_line_bytes,
            overrides,
            max_restarts: 3,
            format,
            output: a
                .output
                .clone()
                .or_else(|| from_file(&report_section.output)),
            transcript: a.transcript.clone(),
            sandbox,
            sandbox_exe: None,
            only_tools: None,
            keep_order: false,
            hold_before_calls: Duration::ZERO,
            observe_ports: {
                // A server's own fixed port is its, not the observer's (whose defaults step
                // aside; a port asked for by name cannot).
                let own = own_port;
                let mut ports: Vec<u16> = [80u16, 443, 8080, 8443]
                    .into_iter()
                    .filter(|p| Some(*p) != own)
                    .collect();
                let asked: Vec<u16> = a
                    .observe_port
                    .iter()
                    .chain(run.observe_ports.iter())
                    .copied()
                    .collect();
                if let Some(p) = own.filter(|p| asked.contains(p)) {
                    return Err(ConfigError::BadValue {
                        flag: "--observe-port".into(),
                        message: format!(
                            "{p} is the port the server listens on (--http-port): the observer cannot read it too"
                        ),
                    });
                }
                ports.extend(asked);
                ports.sort_unstable();
                ports.dedup();
                if ports.len() > 32 {
                    return Err(ConfigError::BadValue {
                        flag: "--observe-port".into(),
                        message: "at most 32 ports".into(),
                    });
                }
                ports
            },
            replay: true,
            isolate: a.isolate || run.isolate.unwrap_or(false),
            jobs: match a.jobs.or(run.jobs) {
                Some(0) => {
                    return Err(ConfigError::BadValue {
                        flag: "--jobs".into(),
                        message: "must be at least 1 (1 runs replays one after another)".into(),
                    });
                }
                Some(n) => n,
                None => DEFAULT_JOBS,
            },
            run_as: match a.run_as.as_ref().or(sandbox_section.run_as.as_ref()) {
                None => None,
                Some(text) => Some(parse_run_as(text)?),
            },
            overlays: {
                let mut dirs: Vec<PathBuf> = a.overlay.clone();
                dirs.extend(run.overlays.iter().cloned());
                let mut out = Vec::new();
                for d in dirs {
                    let abs = std::fs::canonicalize(&d).map_err(|e| ConfigError::BadValue {
                        flag: "--overlay".into(),
                        message: format!("{}: {e}", d.display()),
                    })?;
                    if !abs.is_dir() || abs == Path::new("/") {
                        return Err(ConfigError::BadValue {
                            flag: "--overlay".into(),
                            message: format!("{} is not a directory other than /", d.display()),
                        });
                    }
                    if !out.contains(&abs) {
                        out.push(abs);
                    }
                }
                out
            },
            expose: {
                let mut out: Vec<PathBuf> = Vec::new();
                for d in a.expose.iter().chain(&run.expose) {
                    let abs = std::fs::canonicalize(d).map_err(|e| ConfigError::BadValue {
                        flag: "--expose".into(),
                        message: format!("{}: {e}", d.display()),
                    })?;
                    if abs == Path::new("/") {
                        return Err(ConfigError::BadValue {
                            flag: "--expose".into(),
                            message: "/ is visible anyway; name the directory to keep visible in a hidden place".into(),
                        });
                    }
                    if !out.contains(&abs) {
                        out.push(abs);
                    }
                }
                out
            },
            disk_limit: match a.disk_limit.as_ref().or(run.disk_limit.as_ref()) {
                Some(v) => parse_size("--disk-limit", v)?,
                None => 4 * 1024 * 1024 * 1024,
            },
            memory_limit: match a.memory_limit.as_ref().or(run.memory_limit.as_ref()) {
                Some(v) => parse_size("--memory-limit", v)?,
                None => 8 * 1024 * 1024 * 1024,
            },
            scenario,
            fail,
            baseline,
            fail_on_stale_baseline: a.fail_on_stale_baseline
                || fail_section.stale_baseline.unwrap_or(false),
            require_hints: a.require_hints || fail_section.require_hints.unwrap_or(false),
            outputs,
            terminal: Terminal {
                verbose: a.verbose,
                ..Terminal::resolve(a.color, a.no_progress)
            },
            config_file: file.map(|f| f.path),
            progress: ProgressHook::default(),
            check_expectations,
        };
        config.check_durations()?;
        config.check_stdout()?;
        Ok(config)
    }
}

/// Parses `UID[:GID]` (the gid defaults to the uid).
fn parse_run_as(text: &str) -> Result<(u32, u32), ConfigError> {
    let bad = |message: String| ConfigError::BadValue {
        flag: "--run-as".into(),
        message,
    };
    let (uid, gid) = match text.split_once(':') {
        Some((u, g)) => (u, g),
        None => (text, text),
    };
    let number = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|&n| n != u32::MAX)
            .ok_or_else(|| bad(format!("{text:?} is not UID or UID:GID (numbers)")))
    };
    Ok((number(uid)?, number(gid)?))
}

impl RunConfig {
    /// Does the pending `[setup]` installs and puts where they went (`{npm}`, `{venv}`) into
    /// the command and the environment; what they take counts against `--timeout`.
    pub fn install_setup(&mut self) -> Result<(), SetupError> {
        if let Some(p) = self.pending_setup.take() {
            let mut installed: Installed = crate::setup::ensure(&p.section, &p.cache, &p.limits)?;
            let args: Vec<String> = self
                .command
                .iter()
                .chain(self.env.iter().map(|(_, v)| v))
                .cloned()
                .collect();
            installed.provide_runtimes(&args, &p.cache, &p.limits)?;
            for c in &mut self.command {
                *c = installed.substitute(c);
            }
            for (_, v) in &mut self.env {
                *v = installed.substitute(v);
            }
            self.installed = Some(installed);
        }
        Ok(())
    }

    /// Machine-readable stdout stays machine-readable: GitHub annotations would follow a JSON,
    /// SARIF or JUnit report there.
    fn check_stdout(&self) -> Result<(), ConfigError> {
        let machine = matches!(
            self.format,
            Format::Json | Format::Sarif | Format::Junit | Format::Html
        );
        if self.outputs.annotations && machine && self.output.is_none() {
            let name = match self.format {
                Format::Json => "json",
                Format::Sarif => "sarif",
                Format::Html => "html",
                _ => "junit",
            };
            return Err(ConfigError::BadValue {
                flag: "--annotations".into(),
                message: format!(
                    "GitHub annotations are printed on stdout, where --format {name} writes its report: write the report to a file (--output FILE) or use --format text or markdown"
                ),
            });
        }
        Ok(())
    }

    /// Durations that cannot work: a zero timeout (nothing could ever answer) or a settle
    /// period longer than the longest settle.
    fn check_durations(&self) -> Result<(), ConfigError> {
        for (flag, d) in [
            ("--call-timeout", self.call_timeout),
            ("--handshake-timeout", self.handshake_timeout),
            ("--discover-timeout", self.discover_timeout),
            ("--timeout", self.run_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::BadValue {
                    flag: flag.into(),
                    message: "a timeout of zero leaves no time for any answer".into(),
                });
            }
        }
        if self.settle > self.settle_max {
            return Err(ConfigError::BadValue {
                flag: "--settle".into(),
                message: format!(
                    "{} ms is longer than --settle-max ({} ms): a window could never settle",
                    self.settle.as_millis(),
                    self.settle_max.as_millis()
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_reject_garbage() {
        assert_eq!(
            parse_duration("--x", "500ms").expect("ms"),
            Duration::from_millis(500)
        );
        assert_eq!(
            parse_duration("--x", "2m").expect("m"),
            Duration::from_secs(120)
        );
        assert_eq!(
            parse_duration("--x", "3").expect("plain"),
            Duration::from_secs(3)
        );
        let err = parse_duration("--call-timeout", "soon").expect_err("bad");
        assert!(err.to_string().starts_with("--call-timeout"), "{err}");
        assert!(parse_duration("--x", "5 fortnights").is_err());
        assert!(parse_duration("--x", "-1s").is_err());
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("--m", "256MiB").expect("mib"), 256 << 20);
        assert_eq!(parse_size("--m", "4G").expect("g"), 4 << 30);
        assert!(parse_size("--m", "12 parsecs").is_err());
        assert!(parse_size("--m", "1k").is_err(), "too small");
    }

    #[test]
    fn env_and_args_are_validated() {
        assert_eq!(
            parse_env(&["A=1".into()]).expect("kv"),
            [("A".to_string(), "1".to_string())]
        );
        assert!(parse_env(&["=x".into()]).is_err());
        assert!(parse_env(&["HINTCHECK_SURELY_UNSET_VAR".into()]).is_err());
        assert!(parse_overrides(&["t={\"a\":1}".into()]).is_ok());
        assert!(parse_overrides(&["t=[1]".into()]).is_err());
        assert!(parse_overrides(&["t".into()]).is_err());
    }
}
