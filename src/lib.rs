//! hintcheck checks whether the tools of an MCP server do what their annotations say.
//!
//! It starts the server, calls every tool with arguments made from its `inputSchema`,
//! repeats each call, records what really happened, and judges `readOnlyHint`,
//! `destructiveHint`, `idempotentHint` and `openWorldHint` as contradicted, consistent,
//! unexercised or not applicable, with evidence.
//!
//! ```text
//! prepare ─► launch ─► inventory ─► explore ─► attribute ─► judge ─► assemble ─► render
//! sandbox   sandbox,   mcp          exercise,  replays,     audit    run's       report
//!           rpc + mcp               observe    server-wide           collector
//! ```
//!
//! # Layout
//! - [`sandbox`]: scratch directories, starting and ending the server, what was enforced.
//! - [`rpc`]: JSON-RPC framing, transcript and session over the server's stdio.
//! - [`mcp`]: both protocol eras, tool listing and calls; lenient tool definitions.
//! - [`exercise`]: argument synthesis and the call plan.
//! - [`observe`]: observers and their records.
//! - [`evidence`]: the call records the audits read.
//! - [`audit`]: one audit per hint, plus definition and protocol audits.
//! - [`finding`], [`report`]: verdicts and findings; text and JSON renderers.
//! - [`baseline`]: accepted findings and fingerprints; [`progress`]: progress on stderr.
//! - [`fuzz`]: entry points for fuzzing (cargo fuzz and the tests' bounded driver).
//! - [`output`]: writes a finished run's reports where asked; [`scan`]: many servers at once.
//! - [`run`]: the per-server pipeline (the stage list, one module per stage, the collector
//!   that assembles the report); [`attribution`]: who did what (server-wide effects,
//!   replays); [`workspace`]: the seeded world; [`text`]: leaf helpers; [`config`], [`cli`], [`scenario`] (with [`setup`]: installing
//!   real servers), [`error`]: the edges.
//!
//! Data flows forward only: audits never touch processes, renderers only format a finished
//! [`report::Report`].

pub mod attribution;
pub mod audit;
pub mod baseline;
pub mod cli;
pub mod config;
pub mod demo;
pub mod error;
pub mod evidence;
pub mod exercise;
pub mod finding;
pub mod fleet;
pub mod fuzz;
pub mod guard;
pub mod interrupt;
pub mod mcp;
pub mod observe;
pub mod output;
pub mod progress;
pub mod report;
pub mod rpc;
pub mod run;
pub mod sandbox;
pub mod scenario;
pub mod text;
pub mod workspace;
