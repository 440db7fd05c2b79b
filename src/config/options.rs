//! Every option a run can be given in more than one place, declared once: its name, its doc
//! (the `--help` text), its default and where it may come from. Where is said by the struct
//! it belongs to: [`ServerOptions`] and [`RunOptions`] come from a flag, a scenario's
//! `[server]` and `[run]`, or the config file's; [`SandboxOptions`], [`FailOptions`] and
//! [`ReportOptions`] from a flag or the config file. Each struct is the command line's flags
//! (flattened into [`crate::cli::VerifyArgs`]) and a file's section at once; the layers are
//! merged by [`crate::config::layers`]. Options that only the command line has (`--check`,
//! `--transcript`, …) stay in [`crate::cli`].

use std::path::PathBuf;

use clap::ValueEnum;

use super::layers::{Choice, Rebase};

/// Report formats.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable report.
    #[default]
    Text,
    /// Versioned JSON (schema_version 1).
    Json,
    /// SARIF 2.1.0 for GitHub code scanning.
    Sarif,
    /// JUnit XML: a test case per tool and hint.
    Junit,
    /// A Markdown summary (for $GITHUB_STEP_SUMMARY).
    Markdown,
    /// One self-contained HTML page to browse (no external assets).
    Html,
}

/// `--fail-on`, `[fail] on`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOnArg {
    /// Findings never fail the run.
    Never,
    /// Any finding fails the run.
    Note,
    /// Warnings and errors fail the run.
    Warning,
    /// Only errors (contradicted hints, planted secrets handed to the model) fail the run.
    Error,
}

/// `--roots`, `[run] roots`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RootsArg {
    /// Refuse roots/list (-32601) and declare no roots capability.
    None,
    /// Declare the roots capability and answer roots/list with the scratch workspace.
    Workspace,
}

/// `--sandbox`, `[sandbox] level`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxArg {
    /// Every isolation step must succeed, or the server is not started (exit 5).
    Required,
    /// Steps that fail are reported and skipped; without namespaces, no sandbox at all.
    BestEffort,
    /// No sandbox (as --no-sandbox): only for servers already isolated by other means.
    Off,
}

/// `--transport`, `[run] transport`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// JSON-RPC lines on the server's stdin and stdout.
    Stdio,
    /// Streamable HTTP: the server listens on `{port}` (in the sandbox's own network
    /// namespace) and hintcheck POSTs to it.
    Http,
}

/// `--era`, `[run] era`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EraArg {
    /// Probe server/discover, fall back to initialize.
    Auto,
    /// 2026-07-28 and later only.
    Modern,
    /// initialize handshake only (2025-11-25 and earlier).
    Legacy,
}

/// A path inside the scratch workspace (relative to it wherever it is written).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(transparent)]
pub struct InWorkspace(pub PathBuf);

impl From<std::ffi::OsString> for InWorkspace {
    fn from(s: std::ffi::OsString) -> Self {
        InWorkspace(PathBuf::from(s))
    }
}

impl Rebase for Option<InWorkspace> {}

/// `K=V` (a header, an environment variable).
fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) => Ok((k.to_string(), v.to_string())),
        None => Err(format!("{text:?} is not K=V")),
    }
}

/// `--header K=V`: the name and value trimmed.
fn header(text: &str) -> Result<(String, String), String> {
    key_value(text).map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
}

/// `--env K=V`, or `--env K` passing K from hintcheck's own environment.
fn env_entry(text: &str) -> Result<(String, String), String> {
    let (k, v) = match text.split_once('=') {
        Some((k, v)) => (k.to_string(), v.to_string()),
        None => match std::env::var(text) {
            Ok(v) => (text.to_string(), v),
            Err(_) => {
                return Err(format!(
                    "{text:?} has no `=VALUE` and is not set in hintcheck's environment"
                ));
            }
        },
    };
    if k.is_empty() || k.contains('\0') || v.contains('\0') {
        return Err(format!("{text:?} is not K=V"));
    }
    Ok((k, v))
}

/// `--args TOOL=JSON`: a tool's arguments, a JSON object.
fn tool_args(text: &str) -> Result<(String, serde_json::Value), String> {
    let (tool, json) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not TOOL=JSON"))?;
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("{tool}: not JSON: {e}"))?;
    if !v.is_object() {
        return Err(format!("{tool}: the arguments must be a JSON object"));
    }
    Ok((tool.to_string(), v))
}

/// A file's table of strings (`[server.env]`, `[run.headers]`) as pairs in key order.
pub(super) fn table<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, String)>, D::Error> {
    let map: std::collections::BTreeMap<String, String> = serde::Deserialize::deserialize(d)?;
    Ok(map.into_iter().collect())
}

/// A file's `[run.args]`: per tool, a table (the arguments object) or a string of JSON.
fn args_table<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<(String, serde_json::Value)>, D::Error> {
    use serde::de::Error;
    let map: std::collections::BTreeMap<String, toml::Value> = serde::Deserialize::deserialize(d)?;
    map.into_iter()
        .map(|(tool, v)| {
            let json = match v {
                toml::Value::String(s) => serde_json::from_str(&s)
                    .map_err(|e| D::Error::custom(format!("[run.args] {tool}: not JSON: {e}")))?,
                other => serde_json::to_value(other)
                    .map_err(|e| D::Error::custom(format!("[run.args] {tool}: {e}")))?,
            };
            if !json.is_object() {
                return Err(D::Error::custom(format!(
                    "[run.args] {tool}: the arguments must be an object"
                )));
            }
            Ok((tool, json))
        })
        .collect()
}

crate::options! {
    /// `[server]`: the server to run and what it starts with.
    pub struct ServerOptions in "[server]" {
        /// The server command (a file's; the command line gives it after `--`).
        #[arg(skip)]
        pub command: Option<Vec<String>>,
        /// Set an environment variable for the server (K=V; `{workspace}`, `{home}`, `{tmp}` are
        /// replaced), or pass one from hintcheck's own environment (K).
        #[arg(long = "env", value_name = "K=V", value_parser = env_entry)]
        #[serde(default, deserialize_with = "table")]
        pub env: Vec<(String, String)>,
        /// Copy DIR into the scratch workspace before the server starts.
        #[arg(long, value_name = "DIR")]
        pub workspace: Option<PathBuf>,
        /// Create a small SQLite database (table `items`, 3 rows) at this path inside the
        /// workspace.
        #[arg(long, value_name = "RELATIVE_PATH")]
        pub sqlite: Option<InWorkspace>,
        /// Plant no fake credentials. By default each run plants its own (SSH keys, cloud and
        /// registry tokens, a `.env`, API keys in the environment) where servers look for real
        /// ones, and reports the tools that return or pass them on (`canaries = false` in a
        /// file).
        #[arg(long = "no-canaries", num_args = 0, default_missing_value = "false")]
        pub canaries: Option<bool> = true,
    }
}

crate::options! {
    /// `[run]`: how the server is exercised and within what.
    pub struct RunOptions in "[run]" {
        /// Calls per tool: the first plus identical repeats.
        #[arg(long, value_name = "N")]
        pub repeat: Option<usize> = 2,
        /// Argument sets tried per tool while its calls end in an error (isError or invalid
        /// params).
        #[arg(long, value_name = "N")]
        pub attempts: Option<usize> = 4,
        /// The explorer's domain packs in force: `all`, `none` (the core alone), or a
        /// comma-separated list (git, notes, spreadsheets, sql): what it knows of one kind of
        /// server beyond what any server's errors and descriptions say.
        #[arg(long, value_name = "LIST")]
        pub packs: Option<String> = "all".into(),
        /// Call every tool on a fresh server with a fresh workspace, so no tool's effects reach
        /// another (one server start per tool).
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
            hide_possible_values = true)]
        pub isolate: Option<bool>,
        /// Servers that replays and --isolate runs keep going at the same time (in the sandbox,
        /// where each has a pid namespace of its own; 1 runs them one after another).
        #[arg(long, value_name = "N")]
        pub jobs: Option<usize> = super::DEFAULT_JOBS,
        /// Seed of the run's words (what the seeded files say, the names of new files and
        /// branches, addresses, text to write): the same seed reproduces a run; synthesis makes
        /// the same choices whatever the seed [default: a new one for each run, printed in the
        /// report].
        #[arg(long, value_name = "N")]
        pub seed: Option<u64>,
        /// Whether to offer the scratch workspace as a root.
        #[arg(long, value_parser = Choice::<RootsArg>::parser())]
        pub roots: Option<Choice<RootsArg>> = RootsArg::None.into(),
        /// Protocol era.
        #[arg(long, value_parser = Choice::<EraArg>::parser())]
        pub era: Option<Choice<EraArg>> = EraArg::Auto.into(),
        /// What hintcheck calls itself in the handshake (`clientInfo`), as NAME/VERSION: by
        /// default an ordinary host's, so that a server cannot tell it is being checked.
        #[arg(long, value_name = "NAME/VERSION")]
        pub client_info: Option<String> = format!(
            "{}/{}",
            crate::mcp::client::DEFAULT_CLIENT_NAME,
            crate::mcp::client::DEFAULT_CLIENT_VERSION
        ),
        /// How the server speaks MCP. With `http`, `{port}` in the command or an `--env` value
        /// is the port it must listen on.
        #[arg(long, value_parser = Choice::<TransportArg>::parser())]
        pub transport: Option<Choice<TransportArg>> = TransportArg::Stdio.into(),
        /// The MCP endpoint's path, with `--transport http`.
        #[arg(long, value_name = "PATH")]
        pub http_path: Option<String> = "/mcp".into(),
        /// The port a server that always listens on one port uses, with `--transport http`
        /// (instead of `{port}`; in the sandbox's own network namespace, so nothing on the host
        /// is in the way; the network observer then leaves that port to it).
        #[arg(long, value_name = "PORT")]
        pub http_port: Option<u16>,
        /// A header sent with every HTTP request (K=V; repeatable), with `--transport http`.
        #[arg(long = "header", value_name = "K=V", value_parser = header)]
        #[serde(default, deserialize_with = "table")]
        pub headers: Vec<(String, String)>,
        /// After a response, how long the server's processes must be idle before the call's
        /// window closes.
        #[arg(long, value_name = "DURATION")]
        pub settle: Option<String> = "10ms".into(),
        /// The longest a call's window stays open after the response.
        #[arg(long, value_name = "DURATION")]
        pub settle_max: Option<String> = "2s".into(),
        /// After the last call, how long threads and processes that calls started and that can
        /// still act on their own (a timer, a sleeping flush loop) may take to do so before the
        /// server stops: their late writes and traffic are then attributed by replay.
        #[arg(long, value_name = "DURATION")]
        pub late_wait: Option<String> = "5s".into(),
        /// After the greeting (and after every restart), the longest wait for the server's
        /// start-up activity to settle before the first call: it has settled after 100 ms without
        /// any file or network activity, and what it did until then is start-up work, not the
        /// first tool's (0s: no wait).
        #[arg(long, value_name = "DURATION")]
        pub startup_quiet: Option<String> = "2s".into(),
        /// Longest wait for one tool call, e.g. 30s or 500ms.
        #[arg(long, value_name = "DURATION")]
        pub call_timeout: Option<String> = "30s".into(),
        /// Longest wait for the handshake and each tools/list page.
        #[arg(long, value_name = "DURATION")]
        pub handshake_timeout: Option<String> = "30s".into(),
        /// Longest wait for server/discover before falling back to initialize.
        #[arg(long, value_name = "DURATION")]
        pub discover_timeout: Option<String> = "3s".into(),
        /// Longest accepted stdout line in bytes.
        #[arg(long, value_name = "BYTES")]
        pub max_line_bytes: Option<usize> = 16 * 1024 * 1024,
        /// Memory the server may use (RLIMIT_DATA), e.g. 512MiB or 4G.
        #[arg(long, value_name = "SIZE")]
        pub memory_limit: Option<String> = "8GiB".into(),
        /// Bytes the server may write into its scratch directories, e.g. 512MiB or 10G; past it
        /// the run ends with a finding.
        #[arg(long, value_name = "SIZE")]
        pub disk_limit: Option<String> = "4GiB".into(),
        /// Longest time for the whole run; the report is then marked partial.
        #[arg(long, value_name = "DURATION")]
        pub timeout: Option<String> = crate::text::format_duration(super::DEFAULT_RUN_TIMEOUT),
        /// Cover a host directory with an overlay: the server may write there, its writes stay
        /// in the sandbox and are observed (for servers that write next to their own files).
        #[arg(long = "overlay", value_name = "DIR")]
        #[serde(default)]
        pub overlays: Vec<PathBuf>,
        /// Keep a host directory visible (read-only) in the sandbox although it lies in a hidden
        /// place (home directories, /root): for a server whose runtime or data hintcheck cannot
        /// find from its command line.
        #[arg(long, value_name = "DIR")]
        #[serde(default)]
        pub expose: Vec<PathBuf>,
        /// Read the first bytes of TCP connections to this port too (besides 80, 443, 8080, 8443).
        #[arg(long = "observe-port", value_name = "PORT")]
        #[serde(default)]
        pub observe_ports: Vec<u16>,
        /// Arguments for one tool, merged over the synthesized ones (TOOL=JSON; in a file, a
        /// table per tool or a string of JSON).
        #[arg(long = "args", value_name = "TOOL=JSON", value_parser = tool_args)]
        #[serde(default, deserialize_with = "args_table")]
        pub args: Vec<(String, serde_json::Value)>,
    }
}

crate::options! {
    /// `[sandbox]`: how strict the sandbox is, and whom the server runs as.
    pub struct SandboxOptions in "[sandbox]" {
        /// How strict the sandbox must be.
        #[arg(
            long = "sandbox",
            value_parser = Choice::<SandboxArg>::parser(),
            conflicts_with = "no_sandbox"
        )]
        pub level: Option<Choice<SandboxArg>> = SandboxArg::Required.into(),
        /// As root, the uid (and gid) the server runs as inside the sandbox [default: a uid of its
        /// own for every run, from 1610612736 up]. `0` keeps root's file ownership (for servers
        /// installed under /root); writes stay confined by Landlock and every capability is still
        /// dropped.
        #[arg(long, value_name = "UID[:GID]")]
        pub run_as: Option<String>,
    }
}

crate::options! {
    /// `[fail]`: what fails the run.
    pub struct FailOptions in "[fail]" {
        /// The lowest finding severity that fails the run (exit 1): by default a contradicted
        /// hint.
        #[arg(long = "fail-on", value_name = "SEVERITY", value_parser = Choice::<FailOnArg>::parser())]
        pub on: Option<Choice<FailOnArg>> = FailOnArg::Error.into(),
        /// Findings of this category never fail the run, whatever their severity: bookkeeping,
        /// first-call-initialisation, transient, update, own-installation (repeatable, or
        /// comma-separated).
        #[arg(long = "fail-except", value_name = "CATEGORY", value_delimiter = ',')]
        pub except: Option<Vec<String>>,
        /// Accepted findings (JSON, from --write-baseline): they are reported but do not fail
        /// the run.
        #[arg(long = "baseline", value_name = "FILE")]
        pub baseline: Option<PathBuf>,
        /// Fail the run when a baseline entry matches no finding any more.
        #[arg(
            long = "fail-on-stale-baseline",
            num_args = 0..=1,
            require_equals = true,
            default_missing_value = "true",
            hide_possible_values = true
        )]
        pub stale_baseline: Option<bool>,
        /// Fail on tools that leave hints undeclared: `readOnlyHint` and `openWorldHint` always,
        /// `destructiveHint` unless `readOnlyHint: true` (as app directories demand); the
        /// `missing-hints` findings name the values the run supports.
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
            hide_possible_values = true)]
        pub require_hints: Option<bool>,
    }
}

crate::options! {
    /// `[report]`: where the reports go.
    pub struct ReportOptions in "[report]" {
        /// Report format.
        #[arg(long, value_parser = Choice::<Format>::parser())]
        pub format: Option<Choice<Format>> = Format::Text.into(),
        /// Write the report to FILE instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        pub output: Option<PathBuf>,
        /// Also write SARIF 2.1.0 to FILE.
        #[arg(long, value_name = "FILE")]
        pub sarif: Option<PathBuf>,
        /// Also write JUnit XML to FILE.
        #[arg(long, value_name = "FILE")]
        pub junit: Option<PathBuf>,
        /// Also write the JSON report to FILE (whatever --format prints).
        #[arg(long, value_name = "FILE")]
        pub json: Option<PathBuf>,
        /// Also print GitHub workflow annotations (`::error file=…,line=…::…`) for every finding
        /// on stdout, placed on the `--anchor` line that names the tool (for pull requests from
        /// forks, where SARIF cannot be uploaded).
        #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
            hide_possible_values = true)]
        pub annotations: Option<bool>,
        /// Also append the Markdown summary to FILE [default: $GITHUB_STEP_SUMMARY when set].
        #[arg(long, value_name = "FILE")]
        pub summary: Option<PathBuf>,
        /// Where to write the tool inventory SARIF results point at when no anchor names a tool
        /// [default: hintcheck-tools.json next to the SARIF file; SARIF on stdout carries the
        /// inventory itself and writes no file].
        #[arg(long, value_name = "FILE")]
        pub inventory: Option<PathBuf>,
        /// A file to anchor SARIF results on (the server's source or manifest): each tool's
        /// result points at the first line quoting the tool's name. Repeatable.
        #[arg(long = "anchor", value_name = "FILE")]
        pub anchors: Option<Vec<PathBuf>>,
        /// The directory SARIF paths are made relative to (the repository root) [default: the
        /// project directory of the config file, else the working directory].
        #[arg(long, value_name = "DIR")]
        pub source_root: Option<PathBuf>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::layers::{Layer, Source};

    #[test]
    fn env_and_args_are_validated() {
        assert_eq!(env_entry("A=1").expect("kv"), ("A".into(), "1".into()));
        assert!(env_entry("=x").is_err());
        assert!(env_entry("HINTCHECK_SURELY_UNSET_VAR").is_err());
        assert!(tool_args("t={\"a\":1}").is_ok());
        assert!(tool_args("t=[1]").is_err());
        assert!(tool_args("t").is_err());
    }

    #[test]
    fn a_higher_layer_wins_lists_join_and_every_value_keeps_its_source() {
        let flags = RunOptions {
            call_timeout: Some("5s".into()),
            overlays: vec!["/from-flag".into()],
            ..RunOptions::default()
        };
        let scenario: RunOptions = toml::from_str(
            "call_timeout = \"9s\"\nrepeat = 3\noverlays = [\"here\"]\n[args]\nt = { a = 1 }\n",
        )
        .expect("scenario");
        let file: RunOptions =
            toml::from_str("repeat = 5\nattempts = 7\n[args]\nt = '{\"a\": 2}'\nu = { b = 1 }\n")
                .expect("file");
        let mut scenario_layer = scenario;
        scenario_layer.rebase(std::path::Path::new("/scenarios/x"));
        let (merged, sources) = RunOptions::merge(vec![
            (Source::Flag, flags),
            (
                Source::Scenario("/scenarios/x/scenario.toml".into()),
                scenario_layer,
            ),
            (Source::ConfigFile("/p/hintcheck.toml".into()), file),
        ]);
        assert_eq!(merged.call_timeout.as_deref(), Some("5s"));
        assert_eq!(merged.repeat, Some(3));
        assert_eq!(merged.attempts, Some(7));
        assert_eq!(
            merged.jobs,
            Some(crate::config::DEFAULT_JOBS),
            "the default"
        );
        assert_eq!(
            merged.overlays,
            [PathBuf::from("/scenarios/x/here"), "/from-flag".into()],
            "joined, the lower layer's first, its paths relative to its file"
        );
        let args: std::collections::BTreeMap<_, _> = merged.args.into_iter().collect();
        assert_eq!(
            args["t"],
            serde_json::json!({"a": 1}),
            "the scenario's wins"
        );
        assert_eq!(args["u"], serde_json::json!({"b": 1}));
        assert_eq!(sources.of("[run]", "call_timeout"), [Source::Flag]);
        assert_eq!(sources.name("[run]", "call_timeout"), "--call-timeout");
        // Set by a file: named with the file (and the line, when the file can be read).
        assert_eq!(
            sources.name("[run]", "repeat"),
            "[run] repeat (/scenarios/x/scenario.toml)"
        );
        assert_eq!(
            sources.name("[run]", "overlays"),
            "--overlay",
            "a list the command line added to"
        );
        assert_eq!(
            sources.name("[run]", "jobs"),
            "--jobs",
            "a default names its flag"
        );
        assert_eq!(sources.of("[run]", "jobs"), [Source::Default]);
        assert_eq!(sources.of("[run]", "seed"), [], "unset, no default");
        let described = sources.describe();
        assert!(
            described.contains(&"--call-timeout from the command line".to_string()),
            "{described:?}"
        );
        assert!(
            described.contains(
                &"--overlay from the command line and the scenario /scenarios/x/scenario.toml"
                    .to_string()
            ),
            "{described:?}"
        );
        assert!(
            described
                .contains(&"[run] attempts from the config file /p/hintcheck.toml".to_string()),
            "{described:?}"
        );
        assert!(
            !described.iter().any(|d| d.contains("jobs")),
            "defaults are not listed"
        );
    }

    #[test]
    fn a_header_given_higher_up_replaces_the_lower_ones_and_repeats_within_a_place_stay() {
        let flags = RunOptions {
            headers: vec![("Accept".into(), "a".into()), ("Accept".into(), "b".into())],
            ..RunOptions::default()
        };
        let file: RunOptions =
            toml::from_str("[headers]\nAccept = \"file\"\nAuthorization = \"Bearer x\"\n")
                .expect("file");
        let (merged, _) = RunOptions::merge(vec![
            (Source::Flag, flags),
            (Source::ConfigFile("/p/hintcheck.toml".into()), file),
        ]);
        let pairs: Vec<(&str, &str)> = merged
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("Authorization", "Bearer x"),
                ("Accept", "a"),
                ("Accept", "b")
            ]
        );
    }

    #[test]
    fn a_file_choice_is_checked_when_read_with_its_line_and_the_closest_choice() {
        let err = toml::from_str::<FailOptions>("\non = \"warnin\"\n").expect_err("not a choice");
        assert_eq!(err.span(), Some(6..14));
        assert_eq!(
            err.message(),
            "\"warnin\" is not never, note, warning or error; did you mean \"warning\"?"
        );
        let file: FailOptions = toml::from_str("on = \"note\"\n").expect("a choice");
        assert_eq!(file.on.map(|c| c.known()), Some(FailOnArg::Note));
        let flags = <FailOptions as clap::Args>::augment_args(clap::Command::new("t"))
            .try_get_matches_from(["t", "--fail-on", "sometimes"]);
        assert!(flags.is_err(), "clap checks a flag's choice itself");
    }

    #[test]
    fn every_default_shows_in_the_help_as_declared() {
        let help = crate::cli::Cli::command_showing_defaults()
            .find_subcommand_mut("verify")
            .expect("verify")
            .render_long_help()
            .to_string();
        for (flag, text) in [
            ("--repeat", "[default: 2]"),
            ("--call-timeout", "[default: 30s]"),
            ("--max-line-bytes", "[default: 16777216]"),
            ("--era", "[default: auto]"),
            ("--fail-on", "[default: error]"),
            ("--format", "[default: text]"),
            ("--sandbox", "[default: required]"),
        ] {
            let at = help.find(&format!("{flag} ")).expect(flag);
            let next = help[at + 2..]
                .find("\n  -")
                .map_or(help.len(), |n| at + 2 + n);
            assert!(help[at..next].contains(text), "{flag}: {}", &help[at..next]);
        }
    }
}
