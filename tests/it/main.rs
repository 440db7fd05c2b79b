//! The integration test binary (one link step for all of them).

/// Two tests that run `$run` as root and as an unprivileged user (through user namespaces);
/// defined before the modules that use it.
macro_rules! as_root_and_unprivileged {
    ($root:ident, $unprivileged:ident, $run:path) => {
        #[test]
        fn $root() {
            $run(crate::sandbox::As::Root);
        }

        #[test]
        fn $unprivileged() {
            $run(crate::sandbox::As::Unprivileged);
        }
    };
}

/// The GitHub Action's scripts, run as the runner runs them.
mod action;
/// Behaviour per argument value: lies for one operation or flag, named with it.
mod by_argument;
/// The command line: usage errors, formats, exit codes, explain, cleanup.
mod cli;
/// The demo from the binary alone and from a checkout, under /tmp, /var/tmp and a home.
mod demo;
/// A first run that explains itself: interrupts, causes, pre-flight, stdout, [setup].
mod first_run;
/// The ready fleet files (Kubernetes Indexed Job, GitHub matrix workflow), run here.
mod fleet;
/// The fuzz targets under a bounded mutation driver (stable toolchain).
mod fuzz;
/// The enforcing proxy: liars refused on the host's real directory, honest tools untouched.
mod guard;
/// The enforcing proxy serving Streamable HTTP: sessions, the stateless era, real SDK clients.
mod guard_http;
/// Hostile servers at scale: flat memory over many calls.
mod hostile;
/// Attacks on installs: package code never runs on the host; what runs, runs confined.
mod install;
/// The PyPI and npm packages: built, installed from their files, running the demo.
mod packaging;
/// Real MCP servers from npm, when installed.
mod real_servers;
/// SARIF, JUnit, Markdown, suggest, baselines, the config file, progress and colour.
mod reports;
/// Escape attempts against the sandbox, as root and unprivileged.
mod sandbox;
/// Scanning many servers: jobs, shards, JSON Lines, merge, --check, the real-server suite.
mod scan;
/// Every scenario under scenarios/ against its `[expect]` section.
mod scenarios;
/// Planted secrets (canaries): who returns them or passes them on, as root and unprivileged.
mod secrets;
/// Locating binaries, running hintcheck with a wall-clock limit.
mod util;
