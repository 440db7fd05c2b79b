//! From what the user gave to what a run uses: [`Given`] reads the config file and the
//! scenario, lays each option struct's layers over each other (the command line over the
//! scenario over the config file over the defaults, see [`super::layers`]), and the
//! functions here turn the merged options into the validated parts of a
//! [`super::RunConfig`], one concern each. Errors name the option as the user wrote it: its
//! flag when the command line set it, else its file section and key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::file::{self, ConfigFile};
use super::layers::{Choice, Layer, Source, Sources};
use super::options::{
    EraArg, FailOnArg, FailOptions, ReportOptions, RootsArg, RunOptions, SandboxArg,
    SandboxOptions, ServerOptions, TransportArg,
};
use super::{
    ConfigError, Outputs, PendingSetup, RootsOffer, Transport, Waits, fake_server_command,
    parse_duration, parse_size,
};
use crate::cli::VerifyArgs;
use crate::finding::{Category, FailOn, FailRule};
use crate::fleet::setup::{SetupError, SetupSection};
use crate::mcp::client::EraChoice;
use crate::sandbox::SandboxLevel;
use crate::scenario::Scenario;
use crate::text::format_duration;

/// The server's extra environment, in order.
pub type Env = Vec<(String, String)>;

/// As root, the uid and gid the server runs as.
pub type RunAs = (u32, u32);

/// What the user gave, read and layered: the files found and every option struct merged,
/// with where each value came from.
#[derive(Debug)]
pub struct Given {
    /// The config file, when one was read.
    pub file: Option<ConfigFile>,
    /// The scenario, when one was given.
    pub scenario: Option<Scenario>,
    /// `[server]`, merged.
    pub server: ServerOptions,
    /// `[run]`, merged.
    pub run: RunOptions,
    /// `[sandbox]`, merged.
    pub sandbox: SandboxOptions,
    /// `[fail]`, merged.
    pub fail: FailOptions,
    /// `[report]`, merged.
    pub report: ReportOptions,
    /// Where each value came from.
    pub sources: Sources,
}

impl Given {
    /// Reads the config file (unless `--no-config`) and the scenario, and merges the layers.
    pub fn read(a: &VerifyArgs, cwd: &Path) -> Result<Given, ConfigError> {
        let file = if a.no_config {
            None
        } else {
            match file::discover(a.config.as_deref(), cwd) {
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
        let flag_server = ServerOptions {
            command: (!a.command.is_empty()).then(|| a.command.clone()),
            ..a.server.clone()
        };
        let mut flag_sandbox = a.sandbox.clone();
        if a.no_sandbox {
            flag_sandbox.level = Some(SandboxArg::Off.into());
        }
        let mut layering = Layering {
            scenario: scenario.as_ref(),
            file: file.as_ref(),
            sources: Sources::default(),
        };
        let in_file = file.as_ref();
        let server = layering.merge(
            flag_server,
            scenario_server(a, scenario.as_ref())?,
            in_file.map(file_server),
        );
        let run = layering.merge(
            a.run.clone(),
            scenario.as_ref().map(|s| s.run.clone()),
            in_file.map(|f| f.run.clone()),
        );
        let sandbox = layering.merge(flag_sandbox, None, in_file.map(|f| f.sandbox.clone()));
        let fail = layering.merge(a.fail.clone(), None, in_file.map(|f| f.fail.clone()));
        let report = layering.merge(a.report.clone(), None, in_file.map(|f| f.report.clone()));
        let sources = layering.sources;
        Ok(Given {
            file,
            scenario,
            server,
            run,
            sandbox,
            fail,
            report,
            sources,
        })
    }

    /// How an error names an option: its flag when the command line set it, else its file
    /// section and key.
    pub fn name(&self, section: &'static str, key: &'static str) -> String {
        self.sources.name(section, key)
    }

    /// A duration option, parsed.
    fn duration(&self, key: &'static str, text: &Option<String>) -> Result<Duration, ConfigError> {
        parse_duration(
            &self.name(RunOptions::SECTION, key),
            text.as_deref().unwrap_or_default(),
        )
    }
}

/// The places options are read from besides the command line, and where each merged value
/// came from.
struct Layering<'a> {
    scenario: Option<&'a Scenario>,
    file: Option<&'a ConfigFile>,
    sources: Sources,
}

impl Layering<'_> {
    /// One option struct's layers merged, highest first: the command line's, the
    /// scenario's (its paths relative to the scenario's directory), the config file's
    /// (relative to the project directory), then the defaults.
    fn merge<T: Layer>(&mut self, flags: T, in_scenario: Option<T>, in_file: Option<T>) -> T {
        let mut layers = vec![(Source::Flag, flags)];
        if let (Some(mut layer), Some(s)) = (in_scenario, self.scenario) {
            layer.rebase(&s.dir());
            layers.push((Source::Scenario(s.path.clone()), layer));
        }
        if let (Some(mut layer), Some(f)) = (in_file, self.file) {
            layer.rebase(&f.base);
            layers.push((Source::ConfigFile(f.path.clone()), layer));
        }
        let (value, from) = T::merge(layers);
        self.sources.extend(from);
        value
    }
}

/// A scenario's `[server]`, its command made whole: the harness's fake server reading the
/// scenario when it names none (speaking HTTP when the scenario or the flag asks for that
/// transport), `{scenario}`, `{scenario_dir}` and `{fake_server}` replaced.
fn scenario_server(
    a: &VerifyArgs,
    scenario: Option<&Scenario>,
) -> Result<Option<ServerOptions>, ConfigError> {
    let Some(s) = scenario else {
        return Ok(None);
    };
    let mut command = match &s.server.command {
        Some(c) => c.clone(),
        None => {
            let mut c = vec![
                "{fake_server}".into(),
                "--scenario".into(),
                "{scenario}".into(),
            ];
            let http = |t: &Option<Choice<TransportArg>>| matches!(t, Some(c) if c.known() == TransportArg::Http);
            if http(&a.run.transport) || http(&s.run.transport) {
                c.extend(["--http".into(), "{port}".into()]);
            }
            c
        }
    };
    if command.iter().any(|c| c.contains("{fake_server}")) {
        command = with_fake_server(command, &fake_server_command());
    }
    let scenario_path = s.path.display().to_string();
    let scenario_dir = s.dir().display().to_string();
    for c in &mut command {
        *c = c
            .replace("{scenario}", &scenario_path)
            .replace("{scenario_dir}", &scenario_dir);
    }
    Ok(Some(ServerOptions {
        command: Some(command),
        ..s.server.clone()
    }))
}

/// A choice option (checked where it was given: by clap, or when its file was read).
fn choice<T: clap::ValueEnum + Clone + Send + Sync + 'static>(
    value: &Option<Choice<T>>,
) -> Option<T> {
    value.as_ref().map(Choice::known)
}

/// `command` with `{fake_server}` replaced by the words that start it: a word that is the
/// placeholder alone becomes those words, one that holds it inside other text (a shell line)
/// gets them joined by spaces.
fn with_fake_server(command: Vec<String>, fake: &[String]) -> Vec<String> {
    command
        .into_iter()
        .flat_map(|c| {
            if c == "{fake_server}" {
                fake.to_vec()
            } else {
                vec![c.replace("{fake_server}", &fake.join(" "))]
            }
        })
        .collect()
}

/// The config file's `[server]`, `{config_dir}` in its command replaced.
fn file_server(f: &ConfigFile) -> ServerOptions {
    let dir = f.base.display().to_string();
    ServerOptions {
        command: f.server.command.as_ref().map(|command| {
            command
                .iter()
                .map(|c| c.replace("{config_dir}", &dir))
                .collect()
        }),
        ..f.server.clone()
    }
}

/// The `[setup]` to install (the scenario's, or the config file's when neither a scenario
/// nor a command was given), bounded by its own timeout and the run's.
pub fn pending_setup(
    a: &VerifyArgs,
    given: &Given,
    run_timeout: Duration,
    sandbox: Option<SandboxLevel>,
) -> Result<Option<PendingSetup>, ConfigError> {
    let setup: &SetupSection = match (&given.scenario, &given.file) {
        (Some(s), _) if !s.setup.is_empty() => &s.setup,
        (None, Some(f)) if !f.setup.is_empty() && a.command.is_empty() => &f.setup,
        _ => return Ok(None),
    };
    crate::fleet::setup::check_pins(setup)?;
    // Absolute: the installers run confined, in a directory of their own, where a relative
    // `--cache-dir` would name nothing.
    let cache = a
        .install
        .cache_dir
        .as_deref()
        .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()))
        .unwrap_or_else(crate::fleet::setup::cache_root);
    // The installs end at `[setup] timeout` and, the run's timeout bounding the command as
    // a whole, at `--timeout`.
    let own = match &setup.timeout {
        Some(t) => parse_duration("[setup] timeout", t)
            .map_err(|e| SetupError::BadTimeout(e.to_string()))?,
        None => crate::fleet::setup::DEFAULT_SETUP_TIMEOUT,
    };
    let mut limits =
        crate::fleet::setup::SetupLimits::within(own.min(run_timeout), !a.no_progress && !a.quiet);
    if run_timeout < own {
        limits.deadline_name = format!("the run timeout ({})", format_duration(run_timeout));
    }
    // The installers are confined as the server is (see `setup::confine`).
    limits.confinement = crate::fleet::setup::Confinement {
        level: sandbox,
        exe: None,
        allow_source_builds: a.install.allow_source_builds || setup.allow_source_builds,
    };
    Ok(Some(PendingSetup {
        section: setup.clone(),
        cache,
        limits,
    }))
}

/// How many calls, attempts and servers at once.
pub fn counts(given: &Given) -> Result<(usize, usize, usize), ConfigError> {
    let run = &given.run;
    let in_range =
        |key: &'static str, value: Option<usize>, range: std::ops::RangeInclusive<usize>| {
            let n = value.unwrap_or_default();
            if range.contains(&n) {
                Ok(n)
            } else {
                Err(ConfigError::BadValue {
                    flag: given.name(RunOptions::SECTION, key),
                    message: format!("{n} is not between {} and {}", range.start(), range.end()),
                })
            }
        };
    let repeat = in_range("repeat", run.repeat, 1..=20)?;
    let attempts = in_range("attempts", run.attempts, 1..=16)?;
    let jobs = match run.jobs.unwrap_or_default() {
        0 => {
            return Err(ConfigError::BadValue {
                flag: given.name(RunOptions::SECTION, "jobs"),
                message: "must be at least 1 (1 runs replays one after another)".into(),
            });
        }
        n => n,
    };
    Ok((repeat, attempts, jobs))
}

/// The explorer's domain packs in force.
pub fn packs(given: &Given) -> Result<crate::exercise::packs::Packs, ConfigError> {
    let value = given.run.packs.as_deref().unwrap_or("all");
    crate::exercise::packs::Packs::parse(value).map_err(|e| ConfigError::BadValue {
        flag: given.name(RunOptions::SECTION, "packs"),
        message: e.to_string(),
    })
}

/// The run's waits, parsed.
pub fn waits(given: &Given) -> Result<Waits, ConfigError> {
    let run = &given.run;
    Ok(Waits {
        call_timeout: given.duration("call_timeout", &run.call_timeout)?,
        handshake_timeout: given.duration("handshake_timeout", &run.handshake_timeout)?,
        discover_timeout: given.duration("discover_timeout", &run.discover_timeout)?,
        run_timeout: given.duration("timeout", &run.timeout)?,
        settle: given.duration("settle", &run.settle)?,
        settle_max: given.duration("settle_max", &run.settle_max)?,
        late_wait: given.duration("late_wait", &run.late_wait)?,
        startup_quiet: given.duration("startup_quiet", &run.startup_quiet)?,
        hold_before_calls: Duration::ZERO,
        stop_at_once: false,
    })
}

/// Roots, era and the name hintcheck gives itself.
pub fn protocol(given: &Given) -> Result<(RootsOffer, EraChoice, (String, String)), ConfigError> {
    let section = RunOptions::SECTION;
    let roots = match choice(&given.run.roots) {
        Some(RootsArg::Workspace) => RootsOffer::Workspace,
        Some(RootsArg::None) | None => RootsOffer::None,
    };
    let era = match choice(&given.run.era) {
        Some(EraArg::Modern) => EraChoice::Modern,
        Some(EraArg::Legacy) => EraChoice::Legacy,
        Some(EraArg::Auto) | None => EraChoice::Auto,
    };
    let text = given.run.client_info.clone().unwrap_or_default();
    let client_info = match text.rsplit_once('/') {
        Some((name, version))
            if !name.trim().is_empty()
                && !version.trim().is_empty()
                && !text.chars().any(char::is_control) =>
        {
            (name.trim().to_string(), version.trim().to_string())
        }
        _ => {
            return Err(ConfigError::BadValue {
                flag: given.name(section, "client_info"),
                message: format!("{text:?} is not NAME/VERSION (e.g. \"Claude Desktop/0.14.1\")"),
            });
        }
    };
    Ok((roots, era, client_info))
}

/// How the server speaks MCP, with the HTTP settings checked.
pub fn transport(given: &Given) -> Result<Transport, ConfigError> {
    let section = RunOptions::SECTION;
    let run = &given.run;
    let http_flags = ["http_path", "http_port", "headers"];
    match choice(&run.transport) {
        Some(TransportArg::Stdio) | None => {
            match http_flags
                .iter()
                .find(|k| given.sources.from_flag(section, k))
            {
                Some(key) => Err(ConfigError::BadValue {
                    flag: given.name(section, key),
                    message: "only with --transport http".into(),
                }),
                None => Ok(Transport::Stdio),
            }
        }
        Some(TransportArg::Http) => {
            let path = run.http_path.clone().unwrap_or_default();
            if !path.starts_with('/') || path.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(ConfigError::BadValue {
                    flag: given.name(section, "http_path"),
                    message: format!("{path:?} is not an absolute path without spaces"),
                });
            }
            let headers = run.headers.clone();
            for (k, v) in &headers {
                if hyper::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                    || hyper::header::HeaderValue::from_str(v).is_err()
                {
                    return Err(ConfigError::BadValue {
                        flag: given.name(section, "headers"),
                        message: format!("{k}={v} is not a valid HTTP header"),
                    });
                }
            }
            if let Some(p) = run.http_port
                && p < 1024
            {
                return Err(ConfigError::BadValue {
                    flag: given.name(section, "http_port"),
                    message: format!(
                        "{p} is below 1024: the server runs without privileges and cannot listen there"
                    ),
                });
            }
            Ok(Transport::Http {
                path,
                headers,
                port: run.http_port,
            })
        }
    }
}

/// The sandbox level (`None`: no sandbox) and, as root, whom the server runs as.
pub fn sandbox(given: &Given) -> Result<(Option<SandboxLevel>, Option<RunAs>), ConfigError> {
    let section = SandboxOptions::SECTION;
    let level = match choice(&given.sandbox.level) {
        Some(SandboxArg::Required) | None => Some(SandboxLevel::Required),
        Some(SandboxArg::BestEffort) => Some(SandboxLevel::BestEffort),
        Some(SandboxArg::Off) => None,
    };
    let run_as = match &given.sandbox.run_as {
        None => None,
        Some(text) => Some(super::parse_run_as(&given.name(section, "run_as"), text)?),
    };
    Ok((level, run_as))
}

/// What fails the run: the lowest severity and the categories excepted.
pub fn fail_rule(given: &Given) -> Result<FailRule, ConfigError> {
    let section = FailOptions::SECTION;
    let on = match choice(&given.fail.on) {
        Some(FailOnArg::Never) => FailOn::Never,
        Some(FailOnArg::Note) => FailOn::Note,
        Some(FailOnArg::Warning) => FailOn::Warning,
        Some(FailOnArg::Error) | None => FailOn::Error,
    };
    let mut fail = FailRule {
        on,
        except: Vec::new(),
    };
    for name in given.fail.except.iter().flatten() {
        let category = Category::parse(name.trim()).ok_or_else(|| ConfigError::BadValue {
            flag: given.name(section, "except"),
            message: format!(
                "{name:?} is not a category (one of: {})",
                Category::ALL.map(Category::as_str).join(", ")
            ),
        })?;
        if !fail.except.contains(&category) {
            fail.except.push(category);
        }
    }
    Ok(fail)
}

/// Where the reports go.
pub fn outputs(a: &VerifyArgs, given: &Given, cwd: &Path) -> Result<Outputs, ConfigError> {
    let report = &given.report;
    let summary = if a.no_summary {
        None
    } else {
        report.summary.clone().or_else(|| {
            std::env::var_os("GITHUB_STEP_SUMMARY")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
    };
    let outputs = Outputs {
        format: choice(&report.format).unwrap_or_default(),
        main: report.output.clone(),
        transcript: a.transcript.clone(),
        sarif: report.sarif.clone(),
        junit: report.junit.clone(),
        json: report.json.clone(),
        annotations: report.annotations.unwrap_or(false),
        summary,
        inventory: report.inventory.clone(),
        anchors: report.anchors.clone().unwrap_or_default(),
        source_root: report
            .source_root
            .clone()
            .or_else(|| given.file.as_ref().map(|f| f.base.clone()))
            .unwrap_or_else(|| cwd.to_path_buf()),
        write_baseline: a.write_baseline.clone(),
    };
    for anchor in &outputs.anchors {
        if !anchor.is_file() {
            return Err(ConfigError::BadValue {
                flag: given.name(ReportOptions::SECTION, "anchors"),
                message: format!("{} is not a file", anchor.display()),
            });
        }
    }
    Ok(outputs)
}

/// The seeds of the workspace: a directory to copy, a SQLite database to make.
pub fn seeds(given: &Given) -> Result<(Option<PathBuf>, Option<PathBuf>), ConfigError> {
    let section = ServerOptions::SECTION;
    let sqlite = given.server.sqlite.as_ref().map(|p| p.0.clone());
    if let Some(p) = &sqlite {
        let inside = p
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
        if !inside || p.as_os_str().is_empty() {
            return Err(ConfigError::BadValue {
                flag: given.name(section, "sqlite"),
                message: format!(
                    "{} must be a relative path inside the workspace (no `..`, not absolute)",
                    p.display()
                ),
            });
        }
    }
    let workspace = given.server.workspace.clone();
    if let Some(w) = &workspace
        && !w.is_dir()
    {
        return Err(ConfigError::BadValue {
            flag: given.name(section, "workspace"),
            message: format!("{} is not a directory", w.display()),
        });
    }
    Ok((workspace, sqlite))
}

/// The server's memory and scratch-disk limits, in bytes.
pub fn limits(given: &Given) -> Result<(u64, u64), ConfigError> {
    let section = RunOptions::SECTION;
    let size = |key: &'static str, text: &Option<String>| {
        parse_size(
            &given.name(section, key),
            text.as_deref().unwrap_or_default(),
        )
    };
    Ok((
        size("memory_limit", &given.run.memory_limit)?,
        size("disk_limit", &given.run.disk_limit)?,
    ))
}

/// The ports whose first bytes the network observer reads: 80, 443, 8080 and 8443 (but a
/// server's own fixed port) and those asked for.
pub fn observe_ports(given: &Given, transport: &Transport) -> Result<Vec<u16>, ConfigError> {
    let own = match transport {
        Transport::Http { port, .. } => *port,
        Transport::Stdio => None,
    };
    let flag = given.name(RunOptions::SECTION, "observe_ports");
    let asked = &given.run.observe_ports;
    // A server's own fixed port is its, not the observer's (whose defaults step aside; a
    // port asked for by name cannot).
    if let Some(p) = own.filter(|p| asked.contains(p)) {
        return Err(ConfigError::BadValue {
            flag,
            message: format!(
                "{p} is the port the server listens on (--http-port): the observer cannot read it too"
            ),
        });
    }
    let mut ports: Vec<u16> = [80u16, 443, 8080, 8443]
        .into_iter()
        .filter(|p| Some(*p) != own)
        .chain(asked.iter().copied())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    if ports.len() > 32 {
        return Err(ConfigError::BadValue {
            flag,
            message: "at most 32 ports".into(),
        });
    }
    Ok(ports)
}

/// Host directories covered by an overlay and those kept visible, absolute and existing.
pub fn host_dirs(given: &Given) -> Result<(Vec<PathBuf>, Vec<PathBuf>), ConfigError> {
    // A directory is covered (or shown) before those inside it, so that no overlay (or
    // bind) hides another.
    let overlays = absolute_dirs(given, "overlays", &given.run.overlays, |d, abs| {
        (!abs.is_dir() || abs == Path::new("/"))
            .then(|| format!("{} is not a directory other than /", d.display()))
    })?;
    let expose = absolute_dirs(given, "expose", &given.run.expose, |_, abs| {
        (abs == Path::new("/")).then(|| {
            "/ is visible anyway; name the directory to keep visible in a hidden place".into()
        })
    })?;
    Ok((overlays, expose))
}

/// The host directories option `key` names, made absolute, each once, parents first;
/// `refused` says what is wrong with one (given as written, and absolute), if anything.
fn absolute_dirs(
    given: &Given,
    key: &'static str,
    dirs: &[PathBuf],
    refused: impl Fn(&Path, &Path) -> Option<String>,
) -> Result<Vec<PathBuf>, ConfigError> {
    let bad = |message| ConfigError::BadValue {
        flag: given.name(RunOptions::SECTION, key),
        message,
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for d in dirs {
        let abs = std::fs::canonicalize(d).map_err(|e| bad(format!("{}: {e}", d.display())))?;
        if let Some(why) = refused(d, &abs) {
            return Err(bad(why));
        }
        if !out.contains(&abs) {
            out.push(abs);
        }
    }
    out.sort_by_key(|d| d.components().count());
    Ok(out)
}

/// Argument overrides by tool (a higher layer's win).
pub fn overrides(given: &Given) -> BTreeMap<String, serde_json::Value> {
    given.run.args.iter().cloned().collect()
}

/// The server command and environment; with HTTP on a port hintcheck chooses, `{port}` must
/// appear in one of them.
pub fn command(given: &Given, transport: &Transport) -> Result<(Vec<String>, Env), ConfigError> {
    let command = given.server.command.clone().unwrap_or_default();
    let env = given.server.env.clone();
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
    Ok((command, env))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fake_server_placeholder_becomes_the_words_that_start_it() {
        let words = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let built_in = words(&["/opt/hintcheck", "fake-server"]);
        assert_eq!(
            with_fake_server(
                words(&["{fake_server}", "--scenario", "{scenario}"]),
                &built_in
            ),
            words(&["/opt/hintcheck", "fake-server", "--scenario", "{scenario}"])
        );
        // Inside a shell line the words are joined.
        assert_eq!(
            with_fake_server(
                words(&["sh", "-c", "exec {fake_server} --scenario x"]),
                &built_in
            ),
            words(&["sh", "-c", "exec /opt/hintcheck fake-server --scenario x"])
        );
    }
}
