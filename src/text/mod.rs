//! Leaf helpers that import nothing of the crate: escaping of untrusted text for each medium
//! it lands in ([`escape`]), and an error with its causes on one line ([`error_chain`]).

pub mod escape;

/// The error and its causes on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}
