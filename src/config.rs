//! The validated run configuration. [`RunConfig::from_verify_args`] resolves the command line
//! and an optional scenario file into one value with every default applied; the library never
//! sees clap types. Errors name the flag or file at fault.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::cli::{EraArg, Format, RootsArg, SandboxArg, VerifyArgs};
use crate::mcp::client::EraChoice;
use crate::sandbox::SandboxLevel;
use crate::scenario::{Scenario, ScenarioError};

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
    /// Whole-run timeout.
    pub run_timeout: Duration,
    /// How long the server's processes must be idle after a response before the call's
    /// window closes.
    pub settle: Duration,
    /// The longest the window stays open after a response.
    pub settle_max: Duration,
    /// Synthesis seed.
    pub seed: u64,
    /// Roots offered.
    pub roots: RootsOffer,
    /// Era choice.
    pub era: EraChoice,
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
    /// Host directories covered by an overlay (absolute, existing).
    pub overlays: Vec<PathBuf>,
    /// TCP ports whose first bytes the network observer reads (80, 443, 8080, 8443 and more).
    pub observe_ports: Vec<u16>,
    /// As root, the uid and gid the sandboxed server runs as.
    pub run_as: (u32, u32),
    /// Call only these tools (replays use it); `None` calls all.
    pub only_tools: Option<Vec<String>>,
    /// Whether uncertain attributions are confirmed by replaying tools alone.
    pub replay: bool,
    /// One fresh server and workspace per tool.
    pub isolate: bool,
    /// The binary that runs `__sandbox-init`; `None` means this executable (the hintcheck
    /// binary). Library users whose executable is something else set it.
    pub sandbox_exe: Option<PathBuf>,
    /// The scenario, when one was given.
    pub scenario: Option<Scenario>,
}

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

impl RunConfig {
    /// Validates the verify arguments (and the scenario they name) into a run configuration.
    pub fn from_verify_args(a: &VerifyArgs) -> Result<RunConfig, ConfigError> {
        let scenario = match &a.scenario {
            Some(p) => Some(Scenario::load(p)?),
            None => None,
        };
        if scenario.is_some() && !a.command.is_empty() {
            return Err(ConfigError::ScenarioAndCommand);
        }
        let run = scenario.as_ref().map(|s| s.run.clone()).unwrap_or_default();
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
        let mut command = a.command.clone();
        let mut env = Vec::new();
        let mut workspace_seed = a.workspace.clone();
        let mut overrides = BTreeMap::new();
        if let Some(s) = &scenario {
            command = match &s.server.command {
                Some(c) => c.clone(),
                None => vec![
                    "{fake_server}".into(),
                    "--scenario".into(),
                    "{scenario}".into(),
                ],
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
            overrides = s.arg_overrides()?;
        }
        if command.is_empty() || command[0].is_empty() {
            return Err(ConfigError::NoCommand);
        }
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
        let sqlite_seed = a
            .sqlite
            .clone()
            .or_else(|| scenario.as_ref().and_then(|s| s.server.sqlite.clone()));
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
        Ok(RunConfig {
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
            run_timeout: duration("--timeout", &a.timeout, &None, Duration::from_secs(900))?,
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
            seed: a.seed.or(run.seed).unwrap_or(0),
            roots,
            era,
            max_line_bytes,
            overrides,
            max_restarts: 3,
            format: a.format,
            output: a.output.clone(),
            transcript: a.transcript.clone(),
            sandbox: match (a.no_sandbox, a.sandbox) {
                (true, _) => None,
                (false, Some(SandboxArg::BestEffort)) => Some(SandboxLevel::BestEffort),
                (false, _) => Some(SandboxLevel::Required),
            },
            sandbox_exe: None,
            only_tools: None,
            observe_ports: {
                let mut ports = vec![80u16, 443, 8080, 8443];
                ports.extend(a.observe_port.iter().copied());
                if let Some(s) = &scenario {
                    ports.extend(s.run.observe_ports.iter().copied());
                }
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
            run_as: match &a.run_as {
                None => (65534, 65534),
                Some(text) => parse_run_as(text)?,
            },
            overlays: {
                let mut dirs: Vec<PathBuf> = a.overlay.clone();
                if let Some(s) = &scenario {
                    dirs.extend(s.run.overlays.iter().map(|d| s.dir().join(d)));
                }
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
                    out.push(abs);
                }
                out
            },
            memory_limit: match a.memory_limit.as_ref().or(run.memory_limit.as_ref()) {
                Some(v) => parse_size("--memory-limit", v)?,
                None => 8 * 1024 * 1024 * 1024,
            },
            scenario,
        })
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
