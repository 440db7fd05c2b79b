//! Leaf helpers that import nothing of the crate: escaping of untrusted text for each medium
//! it lands in ([`escape`]), an error with its causes on one line ([`error_chain`]), a
//! duration as a person writes it ([`format_duration`]), a list of choices ([`one_of`]), the
//! closest of them to a misspelt word ([`closest`]) and a TOML error as a person reads it
//! ([`toml`]).

pub mod escape;
pub mod toml;

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

/// The candidate closest to `word` when it is close enough to be what was meant (a typo, a
/// letter case or separator slip), for "did you mean …?".
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let fold = |s: &str| s.to_lowercase().replace(['-', '_'], "");
    let word_folded = fold(word);
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| (strsim::jaro_winkler(&word_folded, &fold(c)), c))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// Choices as a sentence lists them: `a`, `a or b`, `a, b or c`.
pub fn one_of(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

/// `2026-11-30T03:54:46Z` from milliseconds since the epoch.
pub fn iso_utc(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `2026-11-30T03:54:46.123Z` from milliseconds since the epoch.
pub fn iso_utc_ms(unix_ms: u64) -> String {
    let whole = iso_utc(unix_ms);
    format!("{}.{:03}Z", whole.trim_end_matches('Z'), unix_ms % 1000)
}

/// Milliseconds since the Unix epoch, now.
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
