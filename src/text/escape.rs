//! One escaping helper per medium that text from a server (tool names, evidence, DNS names,
//! Host headers, file names, stderr, installer output) can land in. Every helper first makes
//! the characters that act on a reader invisible-to-harmless: C0 and C1 controls (ESC starts
//! terminal sequences such as OSC 52, which sets the clipboard; CSI moves the cursor and can
//! hide lines), DEL, bidirectional overrides and isolates (they reorder what a reader sees),
//! zero-width and other invisible format characters, line and paragraph separators, and the
//! Unicode tag characters (invisible text that models read). Each becomes a visible `\u{…}`
//! escape; then the medium's own syntax is escaped.
//!
//! - [`terminal`]: stdout and stderr (reports, progress, log lines), one line per call.
//! - [`keeping_lines`]: the same, with newlines and tabs kept (multi-line fields of SARIF and
//!   JUnit, whose renderers show them as text).
//! - [`github_data`] / [`github_property`]: GitHub workflow commands (`::error …::message`).
//! - [`xml`]: JUnit XML (characters XML 1.0 cannot carry are made visible too).
//! - [`markdown`]: GitHub-flavoured Markdown table cells and list items.
//!
//! HTML is escaped by `maud` after [`terminal`] (see the HTML report).

use std::fmt::Write;

/// Whether `c` must never reach a reader raw: controls, bidirectional formatting, invisible
/// format characters, line separators and tag characters.
pub fn is_hazardous(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00ad}'                     // soft hyphen (invisible)
            | '\u{034f}'                   // combining grapheme joiner (invisible)
            | '\u{061c}'                   // Arabic letter mark (bidi)
            | '\u{115f}' | '\u{1160}'      // Hangul fillers (blank)
            | '\u{180b}'..='\u{180e}'      // Mongolian variation selectors and separator
            | '\u{fe00}'..='\u{fe0f}'      // variation selectors (hide text)
            | '\u{200b}'..='\u{200f}'      // zero-width space, joiners, LRM, RLM
            | '\u{2028}' | '\u{2029}'      // line and paragraph separators
            | '\u{202a}'..='\u{202e}'      // bidi embeddings and overrides
            | '\u{2060}'..='\u{2064}'      // word joiner, invisible operators
            | '\u{2066}'..='\u{206f}'      // bidi isolates, deprecated format characters
            | '\u{3164}' | '\u{ffa0}'      // Hangul fillers
            | '\u{feff}'                   // zero-width no-break space (BOM)
            | '\u{fff9}'..='\u{fffb}'      // interlinear annotations
            | '\u{e0000}'..='\u{e007f}'    // tag characters
            | '\u{e0100}'..='\u{e01ef}'    // variation selectors supplement (hide text)
        )
}

fn push_escaped(out: &mut String, c: char) {
    let _ = write!(out, "\\u{{{:x}}}", c as u32);
}

/// Text for a terminal (stdout or stderr) on one line: newlines, tabs and carriage returns
/// become `\n`, `\t`, `\r`, every other hazardous character a `\u{…}` escape.
pub fn terminal(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if is_hazardous(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// [`terminal`], keeping newlines and tabs (a carriage return is still escaped: it would
/// overwrite the line before it).
pub fn keeping_lines(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if is_hazardous(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// A workflow command's message: [`keeping_lines`], then GitHub's `escapeData` (`%`, CR, LF),
/// so that a message cannot end its command or start another one.
pub fn github_data(s: &str) -> String {
    keeping_lines(s)
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// A workflow command's property value (`title=`, `file=`): [`github_data`], then GitHub's
/// `escapeProperty` (`:` and `,`).
pub fn github_property(s: &str) -> String {
    github_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// XML 1.0 attribute values and content: markup escaped; hazardous characters (and those XML
/// cannot carry, U+FFFE and U+FFFF) made visible; newlines and tabs kept.
pub fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' => out.push(c),
            '\u{fffe}' | '\u{ffff}' => push_escaped(&mut out, c),
            c if is_hazardous(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

/// A GitHub-flavoured Markdown table cell or list item: [`terminal`], then every character
/// Markdown or HTML would read as syntax escaped.
pub fn markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in terminal(s).chars() {
        match c {
            '|' | '`' | '*' | '_' | '[' | ']' | '\\' | '#' | '~' | '!' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out
}

/// Applies [`keeping_lines`] to every string of a JSON document (SARIF: messages, names,
/// locations), keys included.
pub fn json_strings(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s)
            if s.chars().any(|c| is_hazardous(c) && c != '\n' && c != '\t') =>
        {
            *s = keeping_lines(s);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(json_strings),
        serde_json::Value::Object(map) => {
            let hazardous_key = map
                .keys()
                .any(|k| k.chars().any(|c| is_hazardous(c) && c != '\n' && c != '\t'));
            if hazardous_key {
                let old = std::mem::take(map);
                for (k, mut value) in old {
                    json_strings(&mut value);
                    map.insert(keeping_lines(&k), value);
                }
            } else {
                map.values_mut().for_each(json_strings);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names a hostile server could give a tool, a DNS name, a Host header or a file.
    const HOSTILE: [&str; 8] = [
        "x\x1b]52;c;ZWNobyBwd25lZA==\x07y", // OSC 52: set the clipboard
        "ok\x1b[1A\x1b[2K\x1b[32m✓ clean\x1b[0m", // cursor up, erase, fake line
        "evil\u{9b}31mred",                 // C1 CSI
        "admin\u{202e}txt.exe",             // right-to-left override
        "a\u{2066}b\u{2069}c\u{200b}d\u{feff}", // isolates, zero-width
        "line\u{2028}break\rcarriage",      // separators and CR
        "tag\u{e0041}\u{e0042}s\u{fe01}\u{e0105}", // tag characters, variation selectors
        "del\x7fbell\x07nul\0",             // DEL, BEL, NUL
    ];

    fn raw_hazard(s: &str, allowed: &[char]) -> Option<char> {
        s.chars().find(|c| is_hazardous(*c) && !allowed.contains(c))
    }

    #[test]
    fn no_medium_lets_a_hazardous_character_through() {
        for h in HOSTILE {
            assert_eq!(raw_hazard(&terminal(h), &[]), None, "terminal {h:?}");
            assert_eq!(raw_hazard(&keeping_lines(h), &['\n', '\t']), None, "{h:?}");
            assert_eq!(raw_hazard(&github_data(h), &[]), None, "data {h:?}");
            assert_eq!(raw_hazard(&github_property(h), &[]), None, "prop {h:?}");
            assert_eq!(raw_hazard(&xml(h), &['\n', '\t']), None, "xml {h:?}");
            assert_eq!(raw_hazard(&markdown(h), &[]), None, "md {h:?}");
            let mut v = serde_json::json!({ h: [h, { "k": h }] });
            json_strings(&mut v);
            assert_eq!(
                raw_hazard(&v.to_string(), &['\n', '\t']),
                None,
                "json {h:?}"
            );
        }
    }

    #[test]
    fn escapes_are_visible_and_plain_text_is_untouched() {
        assert_eq!(terminal("a\x1b[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(terminal("x\u{202e}y\nz"), "x\\u{202e}y\\nz");
        assert_eq!(terminal("naïve ✓ 日本"), "naïve ✓ 日本");
        assert_eq!(keeping_lines("a\nb\u{85}c"), "a\nb\\u{85}c");
        assert_eq!(
            xml("<a b='1'>&\u{202e}"),
            "&lt;a b=&apos;1&apos;&gt;&amp;\\u{202e}"
        );
        assert_eq!(markdown("a|b<c>"), "a\\|b&lt;c&gt;");
    }

    #[test]
    fn workflow_commands_cannot_be_ended_or_forged() {
        assert_eq!(github_data("50% done\r\nnext"), "50%25 done\\u{d}%0Anext");
        assert_eq!(
            github_property("hintcheck read-only: a,b: c"),
            "hintcheck read-only%3A a%2Cb%3A c"
        );
        assert!(!github_data("x\n::error::forged").contains('\n'));
        assert!(!github_data("x\u{2028}::error::forged").contains('\u{2028}'));
    }
}
