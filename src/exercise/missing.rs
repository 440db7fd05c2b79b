//! What a tool that never succeeded was missing, as far as its last error tells: a program
//! this machine does not have, a network service, a browser, credentials (none of which the
//! sandbox can give: counted apart), or something the explorer could have found but did not
//! (an existing object nobody handed out, a session set up first, arguments of another
//! shape).

use std::sync::LazyLock;

use regex::Regex;

/// The explorer's belief about what a failed tool lacked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// What was missing, in words.
    pub what: String,
    /// Whether this machine (the sandbox, without network or credentials) cannot give it.
    pub unavailable_here: bool,
}

struct Rule {
    pattern: LazyLock<Regex>,
    what: &'static str,
    unavailable_here: bool,
}

macro_rules! rule {
    ($re:expr, $what:expr, $unavailable:expr) => {
        Rule {
            pattern: LazyLock::new(|| Regex::new($re).expect("static regex")),
            what: $what,
            unavailable_here: $unavailable,
        }
    };
}

static RULES: [Rule; 9] = [
    rule!(
        r#"(?i)(econnrefused|connection refused|enotfound|getaddrinfo|name or service not known|temporary failure in name resolution|network is unreachable|no route to host|(^|\n|error"?:\s*"?)(fetch failed|failed to fetch)\b|could not connect|couldn't connect|unable to connect|connect(ion)? (timed out|error|failed)|\bssl\b|certificate|socket hang up|econnreset|eai_again)"#,
        "a network service (the sandbox has no outside network)",
        true
    ),
    rule!(
        r"(?i)(command not found|/bin/sh: \d+: \S+: not found|libreoffice|soffice|not installed|is not recognized as|no such file or directory[^\n]{0,40}(spawn|exec)|spawn \S+ enoent|executable (file )?not found|could not find (an? )?(interpreter|executable|compiler)|\b(python|node|java|ruby|go|rustc|gcc|php|perl|deno|bun|docker)\b[^\n]{0,30}(not found|not available|is required))",
        "a program that is not installed here",
        true
    ),
    rule!(
        r"(?i)(browser|chromium|chrome|playwright|puppeteer|webdriver|selenium)",
        "a browser",
        true
    ),
    rule!(
        r"(?i)(api[ _-]?key|access[ _-]?token|unauthori[sz]ed|\b401\b|\b403\b|forbidden|credentials?|authenticat|not logged in|login required|secret)",
        "credentials (an API key or a login)",
        true
    ),
    rule!(
        r"(?i)(no (active|current|open|selected) [a-z]+|no (working directory|project|workspace|database|session|connection)|not (been )?(initiali[sz]ed|connected|selected|activated|opened)|(set|select|activate|open|initiali[sz]e|connect)\b[^.\n]{0,40}\bfirst)",
        "a session set up first (the set-up it names did not succeed)",
        false
    ),
    rule!(
        r"(?i)(not found|does not exist|doesn't exist|no such|unknown (id|task|project|session|item|entity)|no (task|item|entity|record|process|session)s? (with|found)|invalid (id|uuid|pid|handle|session))",
        "an existing object to name (no tool handed one out)",
        false
    ),
    rule!(
        r"(?i)(permission denied|eacces|eperm|read-only file system|erofs|operation not permitted|not allowed|outside (of )?(the )?allowed)",
        "a place it may write or read (the sandbox refused, or the server allows only some paths)",
        false
    ),
    rule!(
        r"(?i)(required|missing|invalid|expected|must be|should be|validation|malformed|unexpected|cannot parse|could not parse|bad request)",
        "arguments of another shape than the schema says",
        false
    ),
    rule!(
        r"(?i)(timed? ?out|no answer within)",
        "an answer within the call timeout",
        false
    ),
];

/// What the error `said` (the last error of a tool that never succeeded) suggests was missing.
pub fn diagnose(said: &str) -> Option<Missing> {
    RULES
        .iter()
        .find(|r| r.pattern.is_match(said))
        .map(|r| Missing {
            what: r.what.to_string(),
            unavailable_here: r.unavailable_here,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_what_was_missing() {
        let cases = [
            ("spawn python3 ENOENT", "a program", true),
            ("Error: /bin/sh: 1: rustc: not found", "a program", true),
            (
                "connect ECONNREFUSED 127.0.0.1:5432",
                "a network service",
                true,
            ),
            ("OPENAI_API_KEY is not set", "credentials", true),
            ("Failed to launch the browser process", "a browser", true),
            (
                "No working directory set. Use set_working_dir first",
                "a session",
                false,
            ),
            ("Task 7 not found", "an existing object", false),
            ("TypeError: fetch failed", "a network service", true),
            ("TypeError: Failed to fetch", "a network service", true),
            ("{\"error\": \"fetch failed\"}", "a network service", true),
            ("No active vault", "a session", false),
            ("Missing required argument: mode", "arguments", false),
        ];
        for (said, what, _) in cases {
            let m = diagnose(said).unwrap_or_else(|| panic!("{said}"));
            assert!(m.what.starts_with(what), "{said}: {}", m.what);
        }
        assert!(
            diagnose("spawn python3 ENOENT")
                .expect("present")
                .unavailable_here
        );
        assert!(
            !diagnose("Task 7 not found")
                .expect("present")
                .unavailable_here
        );
        assert_eq!(diagnose("all good"), None);
        // A tool's own "fetch" failing for a bad argument is not the network.
        let git = "Error: Git fetch failed: Exit Code: 128\nStderr: fatal: 'i' does not appear to be a git repository";
        assert!(diagnose(git).is_none_or(|m| !m.unavailable_here));
    }
}
