//! Leaf helpers that import nothing of the crate: escaping of untrusted text for each medium
//! it lands in ([`escape`]).

pub mod escape;
