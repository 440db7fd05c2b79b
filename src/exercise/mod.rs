//! The exercise stage: what to call and with which arguments. [`synth`] builds arguments from
//! a tool's `inputSchema` ([`pattern`] for `pattern` strings, [`rng`] for determinism,
//! [`semantics`] for parameters whose names say what they are);
//! [`plan`] orders the tools and applies user-given argument overrides; [`feedback`] reads
//! what an error says to try next.

pub mod feedback;
pub mod pattern;
pub mod plan;
pub mod rng;
pub mod semantics;
pub mod synth;
