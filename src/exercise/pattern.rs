//! Strings that match a JSON Schema `pattern`: the regular expression is parsed with
//! `regex-syntax` and a shortest-ish matching string is built from its syntax tree, preferring
//! plain ASCII letters and digits. Patterns `regex-syntax` cannot parse (lookaround,
//! backreferences) are reported as unsupported.

use regex_syntax::hir::{Class, Hir, HirKind};

use super::rng::Rng;

/// Builds a string matching `pattern`, or says why it cannot.
pub fn generate(pattern: &str, rng: &mut Rng) -> Result<String, String> {
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(pattern)
        .map_err(|e| {
            format!(
                "pattern {pattern:?} is not supported: {}",
                first_line(&e.to_string())
            )
        })?;
    let mut out = String::new();
    let mut budget = 4096usize;
    let mut anchors = Anchors::default();
    build(&hir, rng, &mut out, &mut budget, &mut anchors)?;
    if anchors.broken || anchors.end_at.is_some_and(|n| out.len() > n) {
        return Err(format!(
            "pattern {pattern:?}: its anchors (^ or $ in the middle) cannot be satisfied by the string built"
        ));
    }
    Ok(out)
}

/// Where `^`/`$` anchors were met while building (JSON Schema patterns are searched, not
/// matched whole, so only anchors in the middle constrain).
#[derive(Default)]
struct Anchors {
    /// The length of the string when `$` was met.
    end_at: Option<usize>,
    /// `^` met after characters were already produced.
    broken: bool,
}

fn first_line(s: &str) -> String {
    s.lines().last().unwrap_or(s).trim().to_string()
}

fn build(
    hir: &Hir,
    rng: &mut Rng,
    out: &mut String,
    budget: &mut usize,
    anchors: &mut Anchors,
) -> Result<(), String> {
    if *budget == 0 {
        return Err("pattern expands to more than 4096 characters".into());
    }
    *budget -= 1;
    match hir.kind() {
        HirKind::Empty => Ok(()),
        HirKind::Look(look) => {
            use regex_syntax::hir::Look;
            match look {
                Look::Start if !out.is_empty() => anchors.broken = true,
                Look::End => {
                    anchors.end_at.get_or_insert(out.len());
                }
                _ => {}
            }
            Ok(())
        }
        HirKind::Literal(lit) => {
            out.push_str(&String::from_utf8_lossy(&lit.0));
            Ok(())
        }
        HirKind::Class(Class::Unicode(class)) => {
            let ranges: Vec<(char, char)> = class
                .ranges()
                .iter()
                .map(|r| (r.start(), r.end()))
                .collect();
            let c = pick_char(&ranges, rng).ok_or("pattern has an empty character class")?;
            out.push(c);
            Ok(())
        }
        HirKind::Class(Class::Bytes(class)) => {
            let ranges: Vec<(char, char)> = class
                .ranges()
                .iter()
                .filter(|r| r.start() < 0x80)
                .map(|r| (r.start() as char, (r.end().min(0x7f)) as char))
                .collect();
            let c = pick_char(&ranges, rng).ok_or("pattern needs non-ASCII bytes")?;
            out.push(c);
            Ok(())
        }
        HirKind::Repetition(rep) => {
            let extra = match rep.max {
                Some(max) if max > rep.min => u32::from(rng.coin()),
                None => u32::from(rng.coin()),
                _ => 0,
            };
            for _ in 0..(rep.min + extra) {
                build(&rep.sub, rng, out, budget, anchors)?;
            }
            Ok(())
        }
        HirKind::Capture(cap) => build(&cap.sub, rng, out, budget, anchors),
        HirKind::Concat(parts) => {
            for p in parts {
                build(p, rng, out, budget, anchors)?;
            }
            Ok(())
        }
        HirKind::Alternation(alts) => {
            let i = rng.below(alts.len() as u64) as usize;
            build(&alts[i], rng, out, budget, anchors)
        }
    }
}

/// A character from the class, preferring letters, then digits, then printable ASCII.
fn pick_char(ranges: &[(char, char)], rng: &mut Rng) -> Option<char> {
    let contains = |c: char| ranges.iter().any(|&(a, b)| a <= c && c <= b);
    for pool in [
        ('a'..='z').collect::<Vec<_>>(),
        ('0'..='9').collect(),
        ('A'..='Z').collect(),
        ('!'..='~').collect(),
    ] {
        let hits: Vec<char> = pool.into_iter().filter(|c| contains(*c)).collect();
        if !hits.is_empty() {
            return Some(hits[rng.below(hits.len() as u64) as usize]);
        }
    }
    ranges
        .iter()
        .map(|&(a, _)| a)
        .find(|c| !c.is_control())
        .or_else(|| ranges.first().map(|r| r.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_patterns_produce_plausible_strings() {
        let mut rng = Rng::new(1, "p");
        let cases = [
            ("^[a-z]{3}$", 3),
            ("^\\d{4}-\\d{2}-\\d{2}$", 10),
            ("^[A-Z][a-z]+$", 2),
            ("^[^/]+$", 1),
        ];
        for (pat, min_len) in cases {
            let s = generate(pat, &mut rng).expect(pat);
            assert!(s.chars().count() >= min_len, "{pat} -> {s:?}");
            assert!(s.chars().all(|c| !c.is_control()), "{pat} -> {s:?}");
        }
        assert_eq!(generate("^abc$", &mut rng).expect("literal"), "abc");
    }

    #[test]
    fn unsupported_patterns_say_why() {
        let mut rng = Rng::new(1, "p");
        let err = generate("(?=lookahead)x", &mut rng).expect_err("lookaround");
        assert!(err.contains("not supported"), "{err}");
    }
}
