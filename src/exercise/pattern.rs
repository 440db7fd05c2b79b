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
    build(&hir, rng, &mut out, &mut budget)?;
    Ok(out)
}

fn first_line(s: &str) -> String {
    s.lines().last().unwrap_or(s).trim().to_string()
}

fn build(hir: &Hir, rng: &mut Rng, out: &mut String, budget: &mut usize) -> Result<(), String> {
    if *budget == 0 {
        return Err("pattern expands to more than 4096 characters".into());
    }
    *budget -= 1;
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Ok(()),
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
                build(&rep.sub, rng, out, budget)?;
            }
            Ok(())
        }
        HirKind::Capture(cap) => build(&cap.sub, rng, out, budget),
        HirKind::Concat(parts) => {
            for p in parts {
                build(p, rng, out, budget)?;
            }
            Ok(())
        }
        HirKind::Alternation(alts) => {
            let i = rng.below(alts.len() as u64) as usize;
            build(&alts[i], rng, out, budget)
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
