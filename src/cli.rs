//! The command line, as clap types only. [`crate::config`] validates these into a
//! [`crate::config::RunConfig`]; nothing else sees clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Checks whether the tools of an MCP server do what their annotations say.
#[derive(Debug, Parser)]
#[command(name = "hintcheck", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start an MCP server (stdio or HTTP), call every tool, and judge its annotations.
    ///
    /// Examples: hintcheck verify --scenario scenarios/demo;
    /// hintcheck verify -- node node_modules/@modelcontextprotocol/server-filesystem/dist/index.js {workspace}
    Verify(Box<VerifyArgs>),
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

/// `--fail-on`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FailOnArg {
    /// Findings never fail the run.
    Never,
    /// Any finding fails the run.
    Note,
    /// Warnings and errors fail the run.
    Warning,
    /// Only errors (contradicted hints) fail the run.
    Error,
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

/// `--roots`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RootsArg {
    /// Refuse roots/list (-32601) and declare no roots capability.
    None,
    /// Declare the roots capability and answer roots/list with the scratch workspace.
    Workspace,
}

/// `--sandbox`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SandboxArg {
    /// Every isolation step must succeed, or the server is not started (exit 5).
    Required,
    /// Steps that fail are reported and skipped; without namespaces, no sandbox at all.
    BestEffort,
}

/// `--transport`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// JSON-RPC lines on the server's stdin and stdout.
    Stdio,
    /// Streamable HTTP: the server listens on `{port}` (in the sandbox's own network
    /// namespace) and hintcheck POSTs to it.
    Http,
}

/// `--era`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EraArg {
    /// Probe server/discover, fall back to initialize.
    Auto,
    /// 2026-07-28 and later only.
    Modern,
    /// initialize handshake only (2025-11-25 and earlier).
    Legacy,
}

/// `hintcheck verify` (the `Default` is the command line with no option given).
#[derive(Debug, Default, Args)]
pub struct VerifyArgs {
    /// Verify the server of a scenario file (or directory holding scenario.toml).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Read settings from this config file instead of looking for `.config/hintcheck.toml`
    /// or `hintcheck.toml` (also HINTCHECK_CONFIG).
    #[arg(long, value_name = "FILE", conflicts_with = "no_config")]
    pub config: Option<PathBuf>,
    /// Use no config file.
    #[arg(long)]
    pub no_config: bool,
    /// Report format [default: text].
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Write the report to FILE instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Create a small SQLite database (table `items`, 3 rows) at this path inside the
    /// workspace.
    #[arg(long, value_name = "RELATIVE_PATH")]
    pub sqlite: Option<PathBuf>,
    /// Call every tool on a fresh server with a fresh workspace, so no tool's effects reach
    /// another (one server start per tool).
    #[arg(long)]
    pub isolate: bool,
    /// Servers that replays and --isolate runs keep going at the same time (in the sandbox,
    /// where each has a pid namespace of its own; 1 runs them one after another)
    /// [default: 2].
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Argument sets tried per tool while its calls end in an error (isError or invalid
    /// params) [default: 4].
    #[arg(long, value_name = "N")]
    pub attempts: Option<usize>,
    /// Calls per tool: the first plus identical repeats [default: 2].
    #[arg(long, value_name = "N")]
    pub repeat: Option<usize>,
    /// Longest wait for one tool call, e.g. 30s or 500ms [default: 30s].
    #[arg(long, value_name = "DURATION")]
    pub call_timeout: Option<String>,
    /// Longest wait for the handshake and each tools/list page [default: 30s].
    #[arg(long, value_name = "DURATION")]
    pub handshake_timeout: Option<String>,
    /// Longest wait for server/discover before falling back to initialize [default: 3s].
    #[arg(long, value_name = "DURATION")]
    pub discover_timeout: Option<String>,
    /// Longest time for the whole run; the report is then marked partial [default: 15m].
    #[arg(long, value_name = "DURATION")]
    pub timeout: Option<String>,
    /// After a response, how long the server's processes must be idle before the call's
    /// window closes [default: 10ms].
    #[arg(long, value_name = "DURATION")]
    pub settle: Option<String>,
    /// The longest a call's window stays open after the response [default: 2s].
    #[arg(long, value_name = "DURATION")]
    pub settle_max: Option<String>,
    /// After the last call, how long threads and processes that calls started and that can
    /// still act on their own (a timer, a sleeping flush loop) may take to do so before the
    /// server stops: their late writes and traffic are then attributed by replay [default: 5s].
    #[arg(long, value_name = "DURATION")]
    pub late_wait: Option<String>,
    /// After the greeting (and after every restart), the longest wait for the server's
    /// start-up activity to settle before the first call: it has settled after 100 ms without
    /// any file or network activity, and what it did until then is start-up work, not the
    /// first tool's [default: 2s; 0s: no wait].
    #[arg(long, value_name = "DURATION")]
    pub startup_quiet: Option<String>,
    /// Set an environment variable for the server (K=V; `{workspace}`, `{home}`, `{tmp}` are
    /// replaced), or pass one from hintcheck's own environment (K).
    #[arg(long = "env", value_name = "K=V")]
    pub env: Vec<String>,
    /// Copy DIR into the scratch workspace before the server starts.
    #[arg(long, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Seed of the run's words (what the seeded files say, the names of new files and
    /// branches, addresses, text to write): the same seed reproduces a run; synthesis makes
    /// the same choices whatever the seed [default: a new one for each run, printed in the
    /// report].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Whether to offer the scratch workspace as a root.
    #[arg(long, value_enum)]
    pub roots: Option<RootsArg>,
    /// Protocol era.
    #[arg(long, value_enum)]
    pub era: Option<EraArg>,
    /// What hintcheck calls itself in the handshake (`clientInfo`), as NAME/VERSION
    /// [default: Visual Studio Code/1.105.1, an ordinary host's, so that a server cannot tell
    /// it is being checked].
    #[arg(long, value_name = "NAME/VERSION")]
    pub client_info: Option<String>,
    /// How the server speaks MCP [default: stdio]. With `http`, `{port}` in the command or an
    /// `--env` value is the port it must listen on.
    #[arg(long, value_enum)]
    pub transport: Option<TransportArg>,
    /// The MCP endpoint's path, with `--transport http` [default: /mcp].
    #[arg(long, value_name = "PATH")]
    pub http_path: Option<String>,
    /// A header sent with every HTTP request (K=V; repeatable), with `--transport http`.
    #[arg(long = "header", value_name = "K=V")]
    pub headers: Vec<String>,
    /// The port a server that always listens on one port uses, with `--transport http`
    /// (instead of `{port}`; in the sandbox's own network namespace, so nothing on the host
    /// is in the way; the network observer then leaves that port to it).
    #[arg(long, value_name = "PORT")]
    pub http_port: Option<u16>,
    /// Longest accepted stdout line in bytes [default: 16777216].
    #[arg(long, value_name = "BYTES")]
    pub max_line_bytes: Option<usize>,
    /// Arguments for one tool, merged over the synthesized ones (TOOL=JSON).
    #[arg(long = "args", value_name = "TOOL=JSON")]
    pub args: Vec<String>,
    /// Memory the server may use (RLIMIT_DATA), e.g. 512MiB or 4G [default: 8GiB].
    #[arg(long, value_name = "SIZE")]
    pub memory_limit: Option<String>,
    /// Bytes the server may write into its scratch directories, e.g. 512MiB or 10G; past it
    /// the run ends with a finding [default: 4GiB].
    #[arg(long, value_name = "SIZE")]
    pub disk_limit: Option<String>,
    /// Cover a host directory with an overlay: the server may write there, its writes stay
    /// in the sandbox and are observed (for servers that write next to their own files).
    #[arg(long, value_name = "DIR")]
    pub overlay: Vec<PathBuf>,
    /// Keep a host directory visible (read-only) in the sandbox although it lies in a hidden
    /// place (home directories, /root): for a server whose runtime or data hintcheck cannot
    /// find from its command line.
    #[arg(long, value_name = "DIR")]
    pub expose: Vec<PathBuf>,
    /// As root, the uid (and gid) the server runs as inside the sandbox [default: a uid of its
    /// own for every run, from 1610612736 up]. `0` keeps root's file ownership (for servers installed under /root); writes
    /// stay confined by Landlock and every capability is still dropped.
    #[arg(long, value_name = "UID[:GID]")]
    pub run_as: Option<String>,
    /// Read the first bytes of TCP connections to this port too (besides 80, 443, 8080, 8443).
    #[arg(long, value_name = "PORT")]
    pub observe_port: Vec<u16>,
    /// How strict the sandbox must be [default: required].
    #[arg(long, value_enum, conflicts_with = "no_sandbox")]
    pub sandbox: Option<SandboxArg>,
    /// Run the server without the sandbox (only for servers already isolated by other means).
    #[arg(long)]
    pub no_sandbox: bool,
    /// Write the full JSON-RPC transcript to FILE (JSON Lines).
    #[arg(long, value_name = "FILE")]
    pub transcript: Option<PathBuf>,
    /// Also write SARIF 2.1.0 to FILE.
    #[arg(long, value_name = "FILE")]
    pub sarif: Option<PathBuf>,
    /// Also write JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write the JSON report to FILE (whatever --format prints).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also print GitHub workflow annotations (`::error file=…,line=…::…`) for every finding on
    /// stdout, placed on the `--anchor` line that names the tool (for pull requests from forks,
    /// where SARIF cannot be uploaded)
    #[arg(long)]
    pub annotations: bool,
    /// Also append the Markdown summary to FILE [default: $GITHUB_STEP_SUMMARY when set].
    #[arg(long, value_name = "FILE")]
    pub summary: Option<PathBuf>,
    /// Do not write the Markdown summary to $GITHUB_STEP_SUMMARY.
    #[arg(long)]
    pub no_summary: bool,
    /// A file to anchor SARIF results on (the server's source or manifest): each tool's
    /// result points at the first line quoting the tool's name. Repeatable.
    #[arg(long, value_name = "FILE")]
    pub anchor: Vec<PathBuf>,
    /// Where to write the tool inventory SARIF results point at when no anchor names a tool
    /// [default: hintcheck-tools.json next to the SARIF file, or in the working directory when
    /// SARIF goes to stdout].
    #[arg(long, value_name = "FILE")]
    pub inventory: Option<PathBuf>,
    /// The directory SARIF paths are made relative to (the repository root) [default: the
    /// project directory of the config file, else the working directory].
    #[arg(long, value_name = "DIR")]
    pub source_root: Option<PathBuf>,
    /// The lowest finding severity that fails the run (exit 1) [default: error, i.e. a
    /// contradicted hint].
    #[arg(long, value_enum)]
    pub fail_on: Option<FailOnArg>,
    /// Findings of this category never fail the run, whatever their severity: bookkeeping,
    /// first-call-initialisation, transient, update, own-installation (repeatable, or comma-separated).
    #[arg(long, value_name = "CATEGORY", value_delimiter = ',')]
    pub fail_except: Vec<String>,
    /// Accepted findings (JSON, from --write-baseline): they are reported but do not fail
    /// the run.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Write every finding of this run to FILE as a baseline (keeping the reasons of the
    /// --baseline entries).
    #[arg(long, value_name = "FILE")]
    pub write_baseline: Option<PathBuf>,
    /// Fail the run when a baseline entry matches no finding any more.
    #[arg(long)]
    pub fail_on_stale_baseline: bool,
    /// Fail on tools that leave hints undeclared: `readOnlyHint` and `openWorldHint` always,
    /// `destructiveHint` unless `readOnlyHint: true` (as app directories demand); the
    /// `missing-hints` findings name the values the run supports
    #[arg(long)]
    pub require_hints: bool,
    /// Colour in the text report and progress.
    #[arg(long, value_enum)]
    pub color: Option<ColorArg>,
    /// No progress on stderr: neither the bar on a terminal nor the plain lines a log gets
    /// every few seconds on long runs.
    #[arg(long)]
    pub no_progress: bool,
    /// The text report in full: what every observer sees, the arguments, calls and
    /// suggestions of every tool (without it, tools with nothing to say take one line).
    #[arg(long, short)]
    pub verbose: bool,
    /// Check the report against the scenario's `[expect]`: exit 0 when every expectation is
    /// met, 1 when one is not (each is printed).
    #[arg(long, requires = "scenario")]
    pub check: bool,
    /// Where `[setup]` installs servers [default: HINTCHECK_CACHE, /var/cache/hintcheck as
    /// root, else ~/.cache/hintcheck].
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Let `[setup]` build packages from source (pip) and start the programs a package needs
    /// (npm's git dependencies), inside the installers' sandbox: a source build runs the
    /// package's own code. Without it such an install is refused.
    #[arg(long)]
    pub allow_source_builds: bool,
    /// The server command; `{workspace}`, `{home}` and `{tmp}` are replaced by the scratch paths.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
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
    /// Passed to every verify: the lowest finding severity that fails a server.
    #[arg(long, value_enum)]
    pub fail_on: Option<FailOnArg>,
    /// Passed to every verify: categories whose findings never fail a server.
    #[arg(long, value_name = "CATEGORY", value_delimiter = ',')]
    pub fail_except: Vec<String>,
    /// Passed to every verify: how strict the sandbox must be.
    #[arg(long, value_enum)]
    pub sandbox: Option<SandboxArg>,
    /// Where `[setup]` installs servers (shared by all jobs).
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Passed to every verify: let `[setup]` build packages from source inside the
    /// installers' sandbox.
    #[arg(long)]
    pub allow_source_builds: bool,
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
