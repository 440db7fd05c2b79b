//! The fleet: many servers rather than one run. [`scan`] verifies many scenario files in
//! child processes, in shards and resumably; [`merge`] reads their results back and sums them
//! up; [`registry`] turns registry documents into scenarios (or skips that say why); [`setup`]
//! installs a scenario's server (npm, PyPI, the runtimes it needs) in the installers'
//! sandbox, for a scan and for a single `verify --scenario` alike.

pub mod merge;
pub mod registry;
pub mod scan;
pub mod setup;
