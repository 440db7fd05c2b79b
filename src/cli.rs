//! The command line, as clap types only. [`crate::config`] validates these into a
//! [`crate::config::RunConfig`]; nothing else sees clap.

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::config::layers::Layer;
pub use crate::config::options::{
    EraArg, FailOnArg, FailOptions, Format, ReportOptions, RootsArg, RunOptions, SandboxArg,
    SandboxOptions, ServerOptions, TransportArg,
};

/// Checks whether the tools of an MCP server do what their annotations say.
#[derive(Debug, Parser)]
#[command(name = "hintcheck", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Parses the command line, with each option's default shown in `--help` as the option
    /// declares it (see [`crate::config::options`]).
    pub fn try_parse_showing_defaults() -> Result<Cli, clap::Error> {
        Cli::try_parse_showing_defaults_from(std::env::args_os())
    }

    /// [`Cli::try_parse_showing_defaults`] of the given words (the first is the program).
    pub fn try_parse_showing_defaults_from<I, T>(words: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let command = Cli::command_showing_defaults();
        let matches = command.clone().try_get_matches_from(words)?;
        let mut cli = Cli::from_arg_matches(&matches)?;
        if let (Command::Scan(a), Some(("scan", scan_matches))) =
            (&mut cli.command, matches.subcommand())
        {
            let scan = command
                .find_subcommand("scan")
                .expect("scan is a subcommand");
            a.passed_on = passed_on_flags(scan, scan_matches);
        }
        Ok(cli)
    }

    /// The command, with every layered option's default appended to its help.
    pub fn command_showing_defaults() -> clap::Command {
        let mut defaults = Vec::new();
        defaults.extend(ServerOptions::default_texts());
        defaults.extend(RunOptions::default_texts());
        defaults.extend(SandboxOptions::default_texts());
        defaults.extend(FailOptions::default_texts());
        defaults.extend(ReportOptions::default_texts());
        let show = |mut command: clap::Command| {
            for (id, text) in &defaults {
                command = command.mut_arg(*id, |arg| {
                    // A flag (`--no-canaries`) names its own effect; its default would
                    // only confuse.
                    if is_switch(&arg) {
                        return arg;
                    }
                    let suffix = format!(" [default: {text}]");
                    let help = arg.get_help().map(|h| format!("{h}{suffix}"));
                    let long = arg.get_long_help().map(|h| format!("{h}{suffix}"));
                    let arg = match help {
                        Some(h) => arg.help(h),
                        None => arg,
                    };
                    match long {
                        Some(h) => arg.long_help(h),
                        None => arg,
                    }
                });
            }
            command
        };
        let command = Cli::command()
            .mut_subcommand("verify", show)
            .mut_subcommand("suggest", show);
        let verify = command
            .find_subcommand("verify")
            .expect("verify is a subcommand")
            .clone();
        command.mut_subcommand("scan", |mut scan| {
            for id in PASSED_ON {
                if scan.get_arguments().any(|a| a.get_id() == *id) {
                    scan = scan.mut_arg(*id, |a| a.help_heading(PASSED_ON_HEADING));
                    continue;
                }
                let arg = verify
                    .get_arguments()
                    .find(|a| a.get_id() == *id)
                    .expect("every passed-on option is a verify option");
                scan = scan.arg(arg.clone().help_heading(PASSED_ON_HEADING));
            }
            scan
        })
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start an MCP server (stdio or HTTP), call every tool, and judge its annotations.
    ///
    /// Examples: hintcheck verify --scenario scenarios/demo;
    /// hintcheck verify -- node node_modules/@modelcontextprotocol/server-filesystem/dist/index.js {workspace}
    Verify(Box<VerifyArgs>),
    /// Verify the demo server built into hintcheck (honest tools and liars), as `verify` does
    ///
    /// The demo is a small notes server whose tools include honest ones and liars; it runs from
    /// the binary alone. Every verify option that is not about the server applies.
    ///
    /// Examples: hintcheck demo; hintcheck demo --format html --output demo.html
    #[command(
        mut_arg("command", |a| a.hide(true)),
        mut_arg("scenario", |a| a.hide(true)),
        mut_arg("check", |a| a.hide(true))
    )]
    Demo(Box<VerifyArgs>),
    /// Verify the server (as `verify` does) and print, for every tool, the annotations the
    /// observations support, each with its basis: a table, or JSON ready to paste
    /// (--format json).
    ///
    /// Example: hintcheck suggest --format json --scenario scenarios/demo
    Suggest(Box<VerifyArgs>),
    /// Verify many servers (scenario files), in parallel and in shards, as JSON Lines.
    ///
    /// Example: hintcheck scan --jobs 4 --shard 1/3 --check scenarios/
    Scan(ScanArgs),
    /// Combine the JSON Lines of scans (shards) into one summary.
    Merge(MergeArgs),
    /// Print the documentation of an audit (or list them all).
    Explain(ExplainArgs),
    /// Check what the sandbox can enforce on this machine, and how to fix what it cannot.
    Doctor(DoctorArgs),
    /// Run an MCP server in the sandbox as a transparent proxy that enforces its tools' hints
    /// on every call (start it where the host would start the server).
    ///
    /// A call of a tool declared readOnlyHint: true cannot write outside the server's own
    /// state directory; destructiveHint: false cannot delete, truncate or rename over;
    /// openWorldHint: false cannot reach past loopback. Refusals fail the server's system
    /// call (EACCES), go to --log as JSON lines and to stderr.
    ///
    /// Examples: hintcheck guard --allow-write ~/notes -- npx -y @modelcontextprotocol/server-filesystem ~/notes;
    /// hintcheck guard --summary guard.log
    Guard(GuardArgs),
}

/// `hintcheck guard`
#[derive(Debug, Args)]
pub struct GuardArgs {
    /// A real directory the server may write (repeatable); what it writes there lands there.
    #[arg(long = "allow-write", value_name = "DIR")]
    pub allow_write: Vec<std::path::PathBuf>,
    /// A directory the server may read besides its own package and the system (repeatable).
    #[arg(long = "allow-read", value_name = "DIR")]
    pub allow_read: Vec<std::path::PathBuf>,
    /// The server's own state directory, writable at any time and shown as its HOME
    /// [default: a private one per command line under $XDG_STATE_HOME/hintcheck/guard]
    #[arg(long = "state-dir", value_name = "DIR")]
    pub state_dir: Option<std::path::PathBuf>,
    /// Append a JSON line per refused operation (and per write allowed only in the state
    /// directory during a read-only call) to FILE.
    #[arg(long, value_name = "FILE")]
    pub log: Option<std::path::PathBuf>,
    /// What the host gets for a call whose window had refusals: the server's own answer
    /// (`pass`), or an MCP error naming the refused operation (`error`).
    #[arg(long = "on-violation", value_enum, default_value_t = OnViolationArg::Pass)]
    pub on_violation: OnViolationArg,
    /// Until the host's first call, let the server add to the --allow-write directories (a
    /// server that creates its database or its log directory as it starts); deletes,
    /// truncations and renames over stay refused, and the network closed.
    #[arg(long = "allow-startup-writes")]
    pub allow_startup_writes: bool,
    /// Let calls whose hints differ run at the same time (the widest policy of the calls in
    /// flight then holds for all of them), instead of one after the other.
    #[arg(long = "no-serialize")]
    pub no_serialize: bool,
    /// A `hintcheck verify --format json` report of this server: the hints its observations
    /// support (observed or consistent) fill those a tool does not declare; a declared hint
    /// is never loosened, and a tool whose definition changed since keeps its own.
    #[arg(long, value_name = "REPORT.json")]
    pub policy: Option<std::path::PathBuf>,
    /// Answer NAME with an address that leads to ADDR from the host, in calls that may reach
    /// the open world (repeatable): a service on the host's loopback, which the server's own
    /// loopback hides.
    #[arg(long, value_name = "NAME=ADDR")]
    pub resolve: Vec<String>,
    /// How the host speaks to guard: lines on stdin and stdout (the host starts guard), or
    /// Streamable HTTP at http://ADDR/mcp (each session gets a server of its own).
    #[arg(long, value_enum, default_value_t = GuardTransportArg::Stdio)]
    pub transport: GuardTransportArg,
    /// Where `--transport http` listens (loopback only: guard serves without authentication)
    /// [default: 127.0.0.1:7447]
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<String>,
    /// Most HTTP sessions (each a server in a sandbox of its own) at once; past it, the
    /// session idle longest makes room, or the host is told to retry [default: 8]
    #[arg(long = "max-sessions", value_name = "N")]
    pub max_sessions: Option<usize>,
    /// Print the refusals of a guard log per tool, and exit.
    #[arg(long, value_name = "LOG", conflicts_with_all = ["allow_write", "allow_read", "state_dir", "log", "resolve", "policy", "command"])]
    pub summary: Option<std::path::PathBuf>,
    /// The hintcheck binary the sandbox runs as its init (tests).
    #[arg(long = "sandbox-exe", value_name = "PATH", hide = true)]
    pub sandbox_exe: Option<std::path::PathBuf>,
    /// The server's command, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Values of guard's `--transport`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum GuardTransportArg {
    /// JSON-RPC lines on stdin and stdout.
    #[default]
    Stdio,
    /// Streamable HTTP on a loopback address.
    Http,
}

/// Values of `--on-violation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum OnViolationArg {
    /// The server's own answer (the refused operation failed inside the server).
    #[default]
    Pass,
    /// An MCP error naming the refused operation.
    Error,
}

/// `hintcheck doctor`
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Report format.
    #[arg(long, value_enum, default_value_t = DoctorFormat::Text)]
    pub format: DoctorFormat,
}

/// Formats of `hintcheck doctor`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum DoctorFormat {
    /// Human-readable.
    #[default]
    Text,
    /// JSON.
    Json,
}

/// `--color`
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ColorArg {
    /// Colour on a terminal unless NO_COLOR is set (CLICOLOR_FORCE forces it).
    #[default]
    Auto,
    /// Always colour.
    Always,
    /// Never colour.
    Never,
}

/// `hintcheck verify` (the `Default` is the command line with no option given).
#[derive(Debug, Default, Args)]
pub struct VerifyArgs {
    // First, so that `--help` lists it under Arguments, before any heading.
    /// The server command; `{workspace}`, `{home}` and `{tmp}` are replaced by the scratch paths.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// Verify the server of a scenario file (or directory holding scenario.toml).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Run the server once more with these environment variables set, beside the default
    /// run (repeatable; also `[[variants]]` in a scenario or the config file): hints a
    /// configuration turns on (a read-only mode) are judged in it.
    #[arg(long = "variant", value_name = "NAME:K=V[,K=V…]", value_parser = crate::config::variants::parse_flag)]
    pub variants: Vec<crate::config::variants::VariantSpec>,
    /// Read settings from this config file instead of looking for `.config/hintcheck.toml`
    /// or `hintcheck.toml` (also HINTCHECK_CONFIG).
    #[arg(long, value_name = "FILE", conflicts_with = "no_config")]
    pub config: Option<PathBuf>,
    /// Use no config file.
    #[arg(long)]
    pub no_config: bool,
    /// The server (also `[server]` in a scenario or the config file).
    #[command(flatten)]
    pub server: ServerOptions,
    /// How the server is exercised (also `[run]` in a scenario or the config file).
    #[command(flatten)]
    pub run: RunOptions,
    /// The sandbox (also `[sandbox]` in the config file).
    #[command(flatten, next_help_heading = "Sandbox")]
    pub sandbox: SandboxOptions,
    /// Run the server without the sandbox (only for servers already isolated by other means).
    #[arg(long, help_heading = "Sandbox")]
    pub no_sandbox: bool,
    /// What fails the run (also `[fail]` in the config file).
    #[command(flatten, next_help_heading = "Failing the run")]
    pub fail: FailOptions,
    /// Write every finding of this run to FILE as a baseline (keeping the reasons of the
    /// --baseline entries).
    #[arg(long, value_name = "FILE", help_heading = "Failing the run")]
    pub write_baseline: Option<PathBuf>,
    /// Where reports go (also `[report]` in the config file).
    #[command(flatten, next_help_heading = "Reports")]
    pub report: ReportOptions,
    /// Write the full JSON-RPC transcript to FILE (JSON Lines).
    #[arg(long, value_name = "FILE", help_heading = "Reports")]
    pub transcript: Option<PathBuf>,
    /// Do not write the Markdown summary to $GITHUB_STEP_SUMMARY.
    #[arg(long, help_heading = "Reports")]
    pub no_summary: bool,
    /// Colour in the text report and progress.
    #[arg(long, value_enum, help_heading = "Reports")]
    pub color: Option<ColorArg>,
    /// No progress on stderr: neither the bar on a terminal nor the plain lines a log gets
    /// every few seconds on long runs.
    #[arg(long, help_heading = "Reports")]
    pub no_progress: bool,
    /// The text report in full: what every observer sees, the arguments, calls and
    /// suggestions of every tool (without it, tools with nothing to say take one line).
    #[arg(long, short, help_heading = "Reports", conflicts_with = "quiet")]
    pub verbose: bool,
    /// Nothing on stderr but errors: no progress, no closing line for a run that completed
    /// (exit 0, 1 or 4); the report goes where it would.
    #[arg(long, short, help_heading = "Reports")]
    pub quiet: bool,
    /// Check the report against the scenario's `[expect]`: exit 0 when every expectation is
    /// met, 1 when one is not (each is printed).
    #[arg(long, requires = "scenario", help_heading = "Reports")]
    pub check: bool,
    /// How `[setup]` installs servers.
    #[command(flatten, next_help_heading = "Installing")]
    pub install: InstallOptions,
}

/// Where and how `[setup]` installs servers: `verify` uses them, `scan` too (its registry
/// scenarios live in the cache) and passes them on.
#[derive(Debug, Default, Args)]
pub struct InstallOptions {
    /// Where `[setup]` installs servers [default: HINTCHECK_CACHE, /var/cache/hintcheck as
    /// root, else ~/.cache/hintcheck].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Let `[setup]` build packages from source (pip) and start the programs a package needs
    /// (npm's git dependencies), inside the installers' sandbox: a source build runs the
    /// package's own code. Without it such an install is refused.
    #[arg(long)]
    pub allow_source_builds: bool,
}

/// The `verify` options `scan` takes and passes on to every verify it starts, by argument
/// id: their declarations (doc, value parser, default) are `verify`'s own, copied onto
/// `scan` (see [`Cli::command_showing_defaults`]), and what was given is passed on as it was
/// written (see [`passed_on_flags`]).
pub const PASSED_ON: &[&str] = &[
    "on",
    "except",
    "require_hints",
    "level",
    "no_sandbox",
    "run_as",
    "cache_dir",
    "allow_source_builds",
    "canaries",
];

/// The heading the passed-on options have in `scan --help`.
const PASSED_ON_HEADING: &str = "Passed to every verify";

/// The passed-on options given on `scan`'s command line, as flags for `verify`, in
/// [`PASSED_ON`] order and in the form scans wrote before (`--fail-on warning`,
/// `--fail-except a,b`, `--allow-source-builds`; `--require-hints=true` where the flag takes
/// its value after `=` only), so that `--resume` keeps the lines of an earlier scan.
fn passed_on_flags(scan: &clap::Command, matches: &clap::ArgMatches) -> Vec<String> {
    let mut flags = Vec::new();
    for id in PASSED_ON {
        if matches.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        let Some(arg) = scan.get_arguments().find(|a| a.get_id() == *id) else {
            continue;
        };
        let long = arg.get_long().unwrap_or(id);
        if is_switch(arg) {
            flags.push(format!("--{long}"));
            continue;
        }
        let values: Vec<String> = matches
            .get_raw(id)
            .into_iter()
            .flatten()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        if arg.is_require_equals_set() {
            flags.extend(values.iter().map(|v| format!("--{long}={v}")));
        } else if let Some(delimiter) = arg.get_value_delimiter() {
            flags.extend([format!("--{long}"), values.join(&delimiter.to_string())]);
        } else {
            for v in values {
                flags.extend([format!("--{long}"), v]);
            }
        }
    }
    flags
}

/// Whether `arg` is written without a value (`--allow-source-builds`, `--no-canaries`).
fn is_switch(arg: &clap::Arg) -> bool {
    !arg.get_action().takes_values() || arg.get_num_args().is_some_and(|n| n.max_values() == 0)
}

/// `hintcheck scan`
#[derive(Debug, Args)]
pub struct ScanArgs {
    /// Scenario files, directories holding scenario.toml, directories of such directories, or
    /// registry documents (.json: a server.json, or a registry list page `{"servers": [...]}`):
    /// npm and PyPI packages are installed pinned and verified; what cannot run here (remote
    /// only, OCI, MCPB, required secrets) is listed as skipped with the reason.
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Servers verified at the same time [default: the number of CPUs].
    #[arg(long, short, value_name = "N")]
    pub jobs: Option<usize>,
    /// Only the K-th of N shards of the sorted list (every N-th from the K-th; 1-based), for
    /// CI matrices and Kubernetes indexed jobs. `auto` reads K (and N) from the environment:
    /// JOB_COMPLETION_INDEX (Kubernetes Indexed Job; N from `auto/N` or
    /// HINTCHECK_SHARD_COUNT), HINTCHECK_SHARD_INDEX and HINTCHECK_SHARD_COUNT (0-based; a
    /// GitHub matrix sets them from strategy.job-index and job-total), CLOUD_RUN_TASK_INDEX,
    /// CI_NODE_INDEX (GitLab), BUILDKITE_PARALLEL_JOB, CIRCLE_NODE_INDEX,
    /// AWS_BATCH_JOB_ARRAY_INDEX.
    #[arg(long, value_name = "K/N|auto|auto/N")]
    pub shard: Option<String>,
    /// Resume the scan whose results are in --output FILE: servers it already verified with
    /// this hintcheck version, the same scenario (pinned package and version) and the same
    /// options keep their lines; the rest run and are appended.
    #[arg(long, requires = "output")]
    pub resume: bool,
    /// Judge each server by its scenario's [expect]: exit 1 on any unexpected or missing
    /// finding.
    #[arg(long)]
    pub check: bool,
    /// Write the JSON Lines to FILE instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the scenario files of this shard and exit.
    #[arg(long)]
    pub list: bool,
    /// Longest time for one server's run [default: the scenario's [run] timeout, else 15m].
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// Where `[setup]` installs servers (shared by all jobs; passed to every verify).
    #[command(flatten)]
    pub install: InstallOptions,
    /// The options of [`PASSED_ON`] given on the command line, as flags for every verify
    /// (read from the parse by [`Cli::try_parse_showing_defaults`]).
    #[arg(skip)]
    pub passed_on: Vec<String>,
}

/// `hintcheck merge`
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// JSON Lines files written by `hintcheck scan`.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Summary format.
    #[arg(long, value_enum, default_value_t = MergeFormat::Text)]
    pub format: MergeFormat,
    /// Write the summary to FILE instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Formats of `hintcheck merge`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum MergeFormat {
    /// A table.
    #[default]
    Text,
    /// One JSON object with totals and a row per server.
    Json,
    /// A Markdown table (for $GITHUB_STEP_SUMMARY).
    Markdown,
    /// One self-contained HTML page: the figures, a chart, a row per server, and per server
    /// its tools with verdicts and evidence.
    Html,
}

/// `hintcheck explain`
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The audit id (e.g. read-only); without it, every audit is listed.
    pub audit: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_of(words: &[&str]) -> ScanArgs {
        let words = ["hintcheck", "scan"].iter().chain(words);
        match Cli::try_parse_showing_defaults_from(words).map(|c| c.command) {
            Ok(Command::Scan(a)) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn scan_passes_on_what_it_was_given_as_verify_reads_it() {
        let a = scan_of(&[
            "--fail-except",
            "bookkeeping,transient",
            "--fail-on",
            "warning",
            "--no-sandbox",
            "--require-hints",
            "--cache-dir",
            "/c",
            "--run-as",
            "0",
            "s/",
        ]);
        assert_eq!(
            a.passed_on,
            [
                "--fail-on",
                "warning",
                "--fail-except",
                "bookkeeping,transient",
                "--require-hints=true",
                "--no-sandbox",
                "--run-as",
                "0",
                "--cache-dir",
                "/c",
            ]
        );
        assert_eq!(
            a.install.cache_dir.as_deref(),
            Some(std::path::Path::new("/c"))
        );
        // Nothing given, nothing passed on (verify's own defaults hold there).
        assert!(scan_of(&["s/"]).passed_on.is_empty());
        // The flags parse as verify's.
        let mut verify = vec!["hintcheck", "verify"];
        let given = scan_of(&["--sandbox", "best-effort", "--allow-source-builds", "s/"]);
        verify.extend(given.passed_on.iter().map(String::as_str));
        verify.extend(["--", "server"]);
        let Ok(Command::Verify(v)) =
            Cli::try_parse_showing_defaults_from(verify).map(|c| c.command)
        else {
            panic!("verify takes what scan passes on");
        };
        assert!(v.install.allow_source_builds);
        assert_eq!(
            v.sandbox.level.map(|c| c.known()),
            Some(SandboxArg::BestEffort)
        );
        // A wrong value is refused by the scan, with verify's choices.
        let wrong =
            Cli::try_parse_showing_defaults_from(["hintcheck", "scan", "--fail-on", "x", "s/"]);
        assert!(wrong.is_err_and(|e| e.to_string().contains("warning")));
    }

    #[test]
    fn canaries_are_planted_unless_a_flag_or_a_file_says_no() {
        let verify = |words: &[&str]| {
            let words = ["hintcheck", "verify"].iter().chain(words);
            match Cli::try_parse_showing_defaults_from(words).map(|c| c.command) {
                Ok(Command::Verify(v)) => v,
                other => panic!("{other:?}"),
            }
        };
        let planted = |v: &VerifyArgs| {
            crate::config::RunConfig::from_verify_args(v)
                .expect("config")
                .server
                .canaries
        };
        assert!(planted(&verify(&["--", "server"])));
        assert!(!planted(&verify(&["--no-canaries", "--", "server"])));
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("hintcheck.toml");
        std::fs::write(&file, "[server]\ncanaries = false\n").expect("write");
        let file = file.display().to_string();
        assert!(!planted(&verify(&["--config", &file, "--", "server"])));
        assert_eq!(
            scan_of(&["--no-canaries", "s/"]).passed_on,
            ["--no-canaries"]
        );
    }
}
