//! The validated run configuration. [`RunConfig::from_verify_args`] resolves the command line,
//! an optional scenario and the project's config file ([`file`]) into one value with every
//! default applied; the library never sees clap types. Errors name the flag or file at fault.

pub mod file;
pub mod layers;
pub mod options;
pub mod resolve;
pub mod variants;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::baseline::{Baseline, BaselineError};
use crate::cli::{ColorArg, VerifyArgs};
use crate::finding::FailRule;
use crate::fleet::setup::{Installed, SetupError, SetupSection, network_launcher_advice};
use crate::mcp::client::EraChoice;
use crate::progress::ProgressHook;
use crate::sandbox::SandboxLevel;
use crate::scenario::{Scenario, ScenarioError};
use file::ConfigFileError;
use layers::{Layer, Sources};
use options::{Format, ReportOptions, RunOptions};
use resolve::Given;

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

/// Everything a run needs, validated, in the groups the stages take: the server and how to
/// speak to it, the sandbox, the waits, the exploration, nested runs, the judgement and the
/// outputs.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The server, what it starts with and how it is spoken to.
    pub server: ServerSpec,
    /// The sandbox around it.
    pub sandbox: SandboxSpec,
    /// How long the run waits for what.
    pub waits: Waits,
    /// How the tools are called.
    pub explore: ExploreOptions,
    /// Replays and isolated runs.
    pub nested: NestedOptions,
    /// What fails the run.
    pub judge: JudgeOptions,
    /// Where the reports go.
    pub outputs: Outputs,
    /// Colour and progress.
    pub terminal: Terminal,
    /// Seed of the run's words (the seeded files, new names, text to write).
    pub seed: u64,
    /// When the command began (reading the configuration): `waits.run_timeout` counts from
    /// here, so the `[setup]` installs spend the run's time.
    pub begun: Instant,
    /// `[setup]` installs still to do ([`RunConfig::install_setup`]).
    pub pending_setup: Option<PendingSetup>,
    /// What the `[setup]` installed, once it has (its notes go into the report).
    pub installed: Option<Installed>,
    /// The scenario, when one was given.
    pub scenario: Option<Scenario>,
    /// The config file that was read.
    pub config_file: Option<PathBuf>,
    /// Where each option's value came from (the command line, the scenario, the config file,
    /// the default).
    pub sources: Sources,
    /// Where progress events go (nowhere unless the binary installs a display).
    pub progress: ProgressHook,
    /// The configurations run beside the default one, each a run of its own.
    pub variants: Vec<variants::VariantSpec>,
    /// For the run of a variant, its name.
    pub variant_of: Option<String>,
}

/// The server, what it starts with and how it is spoken to.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// The server command; placeholders are substituted at launch.
    pub command: Vec<String>,
    /// Extra environment for the server.
    pub env: Vec<(String, String)>,
    /// Seed directory for the workspace.
    pub workspace_seed: Option<PathBuf>,
    /// A SQLite database to create in the workspace (relative path).
    pub sqlite_seed: Option<PathBuf>,
    /// How the server speaks MCP.
    pub transport: Transport,
    /// Era choice.
    pub era: EraChoice,
    /// What the client calls itself in the handshake (`clientInfo` name and version).
    pub client_info: (String, String),
    /// Roots offered.
    pub roots: RootsOffer,
    /// Line cap.
    pub max_line_bytes: usize,
    /// Whether fake credentials are planted ([`crate::workspace::canary`]).
    pub canaries: bool,
}

/// The sandbox around the server.
#[derive(Debug, Clone)]
pub struct SandboxSpec {
    /// The sandbox level, or `None` for no sandbox.
    pub level: Option<SandboxLevel>,
    /// The binary that runs the sandbox init; `None` means this executable (the hintcheck
    /// binary). Library users whose executable is something else set it.
    pub exe: Option<PathBuf>,
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
}

/// How long the run waits for what.
#[derive(Debug, Clone)]
pub struct Waits {
    /// Per-call timeout.
    pub call_timeout: Duration,
    /// Handshake timeout.
    pub handshake_timeout: Duration,
    /// Discover-probe timeout.
    pub discover_timeout: Duration,
    /// Whole-run timeout (the `[setup]` installs included).
    pub run_timeout: Duration,
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
    /// The least time to leave the server alone after its greeting, before any call: set only
    /// by the replay that runs no tool (how long the first call of the run came after the
    /// start), so that the server's own delayed start-up work shows.
    pub hold_before_calls: Duration,
    /// Whether the server is killed once the last window and the late wait closed instead of
    /// having its input closed and being given time to exit: set only by replays whose run's
    /// own stop showed nothing.
    pub stop_at_once: bool,
}

/// How the tools are called.
#[derive(Debug, Clone)]
pub struct ExploreOptions {
    /// Calls per tool.
    pub repeat: usize,
    /// Argument sets tried per tool while its calls fail.
    pub attempts: usize,
    /// Argument overrides by tool.
    pub overrides: BTreeMap<String, Value>,
    /// Call only these tools (replays use it); `None` calls all.
    pub only_tools: Option<Vec<String>>,
    /// Whether `only_tools` is also the order of the calls (replays of "this tool, then that
    /// one").
    pub keep_order: bool,
    /// How often a crashed or hung server is restarted.
    pub max_restarts: usize,
    /// One fresh server and workspace per tool.
    pub isolate: bool,
    /// The explorer's domain packs in force.
    pub packs: crate::exercise::packs::Packs,
    /// Whether tools that succeeded are called in their riskier cases too (other operations,
    /// flags set, existing targets); replays leave them out.
    pub riskier_cases: bool,
}

/// Replays and isolated runs.
#[derive(Debug, Clone)]
pub struct NestedOptions {
    /// Whether uncertain attributions are confirmed by replaying tools alone.
    pub replay: bool,
    /// Servers kept going at the same time for replays and isolated runs (in the sandbox).
    pub jobs: usize,
}

/// What fails the run.
#[derive(Debug, Clone)]
pub struct JudgeOptions {
    /// The lowest severity that fails the run and the categories excepted.
    pub fail: FailRule,
    /// Accepted findings.
    pub baseline: Option<Baseline>,
    /// Whether baseline entries that match nothing fail the run.
    pub fail_on_stale_baseline: bool,
    /// Whether tools must declare the hints app directories require (`missing-hints`).
    pub require_hints: bool,
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

/// The name of the hidden subcommand that runs the fake server inside the hintcheck binary.
pub const FAKE_SERVER_SUBCOMMAND: &str = "fake-server";

/// The command that starts the harness's fake server: `HINTCHECK_FAKE_SERVER`, the
/// `hintcheck-fake-server` program next to our own binary (a build of the workspace), or our
/// own binary's `fake-server` subcommand (the released binary alone).
pub fn fake_server_command() -> Vec<String> {
    if let Ok(p) = std::env::var("HINTCHECK_FAKE_SERVER") {
        return vec![p];
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let beside = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|d| d.join("hintcheck-fake-server"))
        .find(|c| c.is_file());
    match beside {
        Some(program) => vec![program.display().to_string()],
        None => vec![
            exe.display().to_string(),
            FAKE_SERVER_SUBCOMMAND.to_string(),
        ],
    }
}

/// `[setup]` installs still to do, with where and within what.
#[derive(Debug, Clone)]
pub struct PendingSetup {
    /// What to install.
    pub section: SetupSection,
    /// The cache it goes into.
    pub cache: PathBuf,
    /// The deadline and whether progress is printed.
    pub limits: crate::fleet::setup::SetupLimits,
}

/// Where the reports of a run go.
#[derive(Debug, Clone, Default)]
pub struct Outputs {
    /// The report's format.
    pub format: Format,
    /// The report's file (`None`: stdout).
    pub main: Option<PathBuf>,
    /// The JSON-RPC transcript's file.
    pub transcript: Option<PathBuf>,
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
    /// Nothing on stderr but errors (`--quiet`).
    pub quiet: bool,
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
            quiet: false,
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
        let given = Given::read(a, &cwd)?;
        if given
            .server
            .command
            .as_ref()
            .is_none_or(|c| c.first().is_none_or(String::is_empty))
        {
            return Err(ConfigError::NoCommand);
        }
        let waits = resolve::waits(&given)?;
        let (sandbox, run_as) = resolve::sandbox(&given)?;
        let pending_setup = resolve::pending_setup(a, &given, waits.run_timeout, sandbox)?;
        let (repeat, attempts, jobs) = resolve::counts(&given)?;
        let (roots, era, client_info) = resolve::protocol(&given)?;
        let transport = resolve::transport(&given)?;
        let max_line_bytes = given.run.max_line_bytes.unwrap_or_default();
        if max_line_bytes < 1024 {
            return Err(ConfigError::BadValue {
                flag: given.name(RunOptions::SECTION, "max_line_bytes"),
                message: "must be at least 1024".into(),
            });
        }
        let (workspace_seed, sqlite_seed) = resolve::seeds(&given)?;
        if a.check
            && given.scenario.as_ref().is_some_and(|s| {
                s.expect.is_none() && s.variants.iter().all(|v| v.expect.is_none())
            })
        {
            return Err(ConfigError::BadValue {
                flag: "--check".into(),
                message: "the scenario has no [expect] section (nor a [variants.expect]) to check"
                    .into(),
            });
        }
        let (command, env) = resolve::command(&given, &transport)?;
        if sandbox.is_some()
            && let Some(advice) = network_launcher_advice(&command)
        {
            return Err(ConfigError::NetworkLauncher(advice));
        }
        let fail = resolve::fail_rule(&given)?;
        let baseline = match &given.fail.baseline {
            Some(p) => Some(Baseline::load(p)?),
            None => None,
        };
        let outputs = resolve::outputs(a, &given, &cwd)?;
        let observe_ports = resolve::observe_ports(&given, &transport)?;
        let (overlays, expose) = resolve::host_dirs(&given)?;
        let (memory_limit, disk_limit) = resolve::limits(&given)?;
        let variants = variants::merge(
            &a.variants,
            (
                given
                    .scenario
                    .as_ref()
                    .map_or(&[][..], |s| s.variants.as_slice()),
                given.scenario.as_ref().map(|s| s.dir()).as_deref(),
            ),
            (
                given
                    .file
                    .as_ref()
                    .map_or(&[][..], |f| f.variants.as_slice()),
                given.file.as_ref().map(|f| f.base.as_path()),
            ),
        )?;
        let config = RunConfig {
            server: ServerSpec {
                command,
                env,
                workspace_seed,
                sqlite_seed,
                transport,
                era,
                client_info,
                roots,
                max_line_bytes,
                canaries: given.server.canaries.unwrap_or(true),
            },
            sandbox: SandboxSpec {
                level: sandbox,
                exe: None,
                memory_limit,
                disk_limit,
                overlays,
                expose,
                observe_ports,
                run_as,
            },
            waits,
            explore: ExploreOptions {
                repeat,
                attempts,
                overrides: resolve::overrides(&given),
                only_tools: None,
                keep_order: false,
                max_restarts: 3,
                isolate: given.run.isolate.unwrap_or(false),
                packs: resolve::packs(&given)?,
                riskier_cases: true,
            },
            nested: NestedOptions { replay: true, jobs },
            judge: JudgeOptions {
                fail,
                baseline,
                fail_on_stale_baseline: given.fail.stale_baseline.unwrap_or(false),
                require_hints: given.fail.require_hints.unwrap_or(false),
                check_expectations: a.check,
            },
            outputs,
            terminal: Terminal {
                verbose: a.verbose,
                quiet: a.quiet,
                ..Terminal::resolve(a.color, a.no_progress || a.quiet)
            },
            seed: given
                .run
                .seed
                .unwrap_or_else(crate::workspace::vocab::fresh_seed),
            begun,
            pending_setup,
            installed: None,
            config_file: given.file.map(|f| f.path),
            scenario: given.scenario,
            sources: given.sources,
            progress: ProgressHook::default(),
            variants,
            variant_of: None,
        };
        config.check_durations()?;
        config.check_stdout()?;
        Ok(config)
    }
}

/// Parses `UID[:GID]` (the gid defaults to the uid).
fn parse_run_as(flag: &str, text: &str) -> Result<(u32, u32), ConfigError> {
    let bad = |message: String| ConfigError::BadValue {
        flag: flag.into(),
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
            let mut installed: Installed =
                crate::fleet::setup::ensure(&p.section, &p.cache, &p.limits)?;
            let args: Vec<String> = self
                .server
                .command
                .iter()
                .chain(self.server.env.iter().map(|(_, v)| v))
                .cloned()
                .collect();
            installed.provide_runtimes(&args, &p.cache, &p.limits)?;
            for c in &mut self.server.command {
                *c = installed.substitute(c);
            }
            for (_, v) in &mut self.server.env {
                *v = installed.substitute(v);
            }
            self.installed = Some(installed);
        }
        Ok(())
    }

    /// Machine-readable stdout stays machine-readable: GitHub annotations would follow a JSON,
    /// SARIF or JUnit report there.
    fn check_stdout(&self) -> Result<(), ConfigError> {
        let outputs = &self.outputs;
        let machine = matches!(
            outputs.format,
            Format::Json | Format::Sarif | Format::Junit | Format::Html
        );
        if outputs.annotations && machine && outputs.main.is_none() {
            let name = match outputs.format {
                Format::Json => "json",
                Format::Sarif => "sarif",
                Format::Html => "html",
                _ => "junit",
            };
            return Err(ConfigError::BadValue {
                flag: self.sources.name(ReportOptions::SECTION, "annotations"),
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
        let name = |key| self.sources.name(RunOptions::SECTION, key);
        for (key, d) in [
            ("call_timeout", self.waits.call_timeout),
            ("handshake_timeout", self.waits.handshake_timeout),
            ("discover_timeout", self.waits.discover_timeout),
            ("timeout", self.waits.run_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::BadValue {
                    flag: name(key),
                    message: "a timeout of zero leaves no time for any answer".into(),
                });
            }
        }
        if self.waits.settle > self.waits.settle_max {
            return Err(ConfigError::BadValue {
                flag: name("settle"),
                message: format!(
                    "{} ms is longer than {} ({} ms): a window could never settle",
                    self.waits.settle.as_millis(),
                    name("settle_max"),
                    self.waits.settle_max.as_millis()
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
}
