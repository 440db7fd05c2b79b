//! The exercise stage: what to call, with which arguments, and what to learn from each answer.
//! [`explore`] is the stage itself: it calls the tools in the order of the [`plan`], learns
//! values from every response ([`pool`]) and from errors ([`feedback`]), runs the tools others
//! need first, and says what a tool that never succeeded was missing ([`missing`]). [`synth`] builds arguments from a tool's `inputSchema` ([`pattern`] for
//! `pattern` strings, [`rng`] for determinism, [`semantics`] for parameters whose names say
//! what they are). [`variants`] makes the riskier cases of a tool that worked: its other
//! operations, its flags set, an existing target.

pub mod explore;
pub mod feedback;
pub mod missing;
pub mod packs;
pub mod pattern;
pub mod plan;
pub mod pool;
pub mod rng;
pub mod semantics;
pub mod synth;
pub mod variants;
