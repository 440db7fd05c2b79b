//! A TOML error as a person reads it: the line and column it is at, what is wrong (with the
//! closest valid name when a key or value is unknown), and the line itself with the place
//! marked, its line breaks kept.

use std::fmt;

/// What is wrong in a TOML file, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TomlProblem {
    /// Line and column (1-based) where it starts, when known.
    pub at: Option<(usize, usize)>,
    /// What is wrong, on one line.
    pub what: String,
    /// The offending line, numbered, with the place marked below it (empty when unknown).
    pub excerpt: String,
    /// What was expected, when the parser listed it.
    pub expected: Option<String>,
}

impl TomlProblem {
    /// The problem `error` found in `text`.
    pub fn new(text: &str, error: &::toml::de::Error) -> TomlProblem {
        let message = error.message().trim();
        let (mut what, expected) = match message.split_once(", expected ") {
            Some((head, rest)) => (head.to_string(), Some(format!("expected {rest}"))),
            None => (message.to_string(), None),
        };
        // serde names an unknown key or value and lists the valid ones in backquotes.
        if let (Some(unknown), Some(list)) = (backquoted(&what).first(), &expected) {
            let names = backquoted(list);
            if let Some(close) = super::closest(unknown, names.iter().map(String::as_str)) {
                what.push_str(&format!(" (did you mean `{close}`?)"));
            }
        }
        let Some(span) = error.span() else {
            return TomlProblem {
                at: None,
                what,
                excerpt: String::new(),
                expected,
            };
        };
        let mut start = span.start.min(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let (line_no, column) = line_and_column(text, start);
        let line = super::escape::terminal(text[line_start..line_end].trim_end_matches('\r'));
        let mut end = span.end.clamp(start, line_end);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let width = text[start..end].chars().count().max(1);
        let gutter = " ".repeat(line_no.to_string().len());
        let excerpt = format!(
            "{gutter} |\n{line_no} | {line}\n{gutter} | {}{}",
            " ".repeat(column - 1),
            "^".repeat(width)
        );
        TomlProblem {
            at: Some((line_no, column)),
            what,
            excerpt,
            expected,
        }
    }

    /// `:LINE:COLUMN` to put after the file's name (empty when unknown).
    pub fn location(&self) -> String {
        self.at
            .map(|(l, c)| format!(":{l}:{c}"))
            .unwrap_or_default()
    }
}

impl fmt::Display for TomlProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.what)?;
        if !self.excerpt.is_empty() {
            write!(f, "\n{}", self.excerpt)?;
        }
        if let Some(expected) = &self.expected {
            write!(f, "\n{expected}")?;
        }
        Ok(())
    }
}

/// The line and column (1-based) of byte `offset` of `text`.
fn line_and_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    (
        text[..offset].matches('\n').count() + 1,
        text[line_start..offset].chars().count() + 1,
    )
}

/// Where the value of the key at `path` (`["run", "timeout"]`) starts in `text`, as line and
/// column (1-based); `None` when the text does not parse or holds no such key.
pub fn value_location(text: &str, path: &[&str]) -> Option<(usize, usize)> {
    let document = ::toml::de::DeTable::parse(text).ok()?;
    let mut table = document.get_ref();
    let (last, sections) = path.split_last()?;
    for name in sections {
        let (_, value) = table.iter().find(|(k, _)| k.get_ref() == name)?;
        match value.get_ref() {
            ::toml::de::DeValue::Table(t) => table = t,
            _ => return None,
        }
    }
    let (_, value) = table.iter().find(|(k, _)| k.get_ref() == last)?;
    Some(line_and_column(text, value.span().start))
}

/// The words between backquotes in `s`, in order.
fn backquoted(s: &str) -> Vec<String> {
    s.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Run {
        timeout: Option<String>,
        settle: Option<String>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct File {
        run: Option<Run>,
    }

    #[test]
    fn an_unknown_key_is_placed_marked_and_matched_to_the_closest() {
        let text = "[run]\nsettle = \"1s\"\ntimout = \"30s\"\n";
        let e = ::toml::from_str::<File>(text).expect_err("unknown key");
        let p = TomlProblem::new(text, &e);
        assert_eq!(p.at, Some((3, 1)));
        assert_eq!(p.location(), ":3:1");
        assert_eq!(
            p.to_string(),
            "unknown field `timout` (did you mean `timeout`?)\n  |\n3 | timout = \"30s\"\n  | ^^^^^^\nexpected `timeout` or `settle`"
        );
    }

    #[test]
    fn a_value_is_found_by_its_key_path() {
        let text = "[run]\nsettle = \"1s\"\n\n[run.args]\nx = 1\n[fail]\non =   \"never\"\n";
        assert_eq!(value_location(text, &["run", "settle"]), Some((2, 10)));
        assert_eq!(value_location(text, &["fail", "on"]), Some((7, 8)));
        assert_eq!(value_location(text, &["run", "args", "x"]), Some((5, 5)));
        assert_eq!(value_location(text, &["run", "timeout"]), None);
        assert_eq!(value_location("[run", &["run", "x"]), None);
    }

    #[test]
    fn nothing_close_suggests_nothing_and_other_errors_keep_their_words() {
        let text = "[run]\nzzz = 1\n";
        let p = TomlProblem::new(text, &::toml::from_str::<File>(text).expect_err("unknown"));
        assert_eq!(p.what, "unknown field `zzz`");
        let text = "[run]\ntimeout = [\n";
        let p = TomlProblem::new(text, &::toml::from_str::<File>(text).expect_err("broken"));
        assert!(p.at.is_some(), "{p:?}");
        assert!(!p.what.is_empty());
    }
}
