//! Leaf helpers that import nothing of the crate: escaping of untrusted text for each medium
//! it lands in ([`escape`]), an error with its causes on one line ([`error_chain`]), a
//! duration as a person writes it ([`format_duration`]) and a list of choices ([`one_of`]).

pub mod escape;

use std::time::Duration;

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

/// A duration as a person writes it: `300ms`, `3s`, `2.5s`, `2m`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Choices as a sentence lists them: `a`, `a or b`, `a, b or c`.
pub fn one_of(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}
