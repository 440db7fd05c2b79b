//! Spreadsheets: workbooks with sheets, cells and ranges in A1 notation. Values: a cell
//! (`B2`, the seeded workbook's formula cell where a description speaks of a formula), a
//! column letter, the seeded block (`A1:B4`) for ranges, for parameters of tools about
//! workbooks or sheets or whose description shows A1 notation. Notation: a sheet's name
//! inside a reference (`Data!B2:B9`, `'my sheet'!A1`), so a sheet an error refuses is
//! replaced there too. Rules: a block cut to one row or column, and a cell moved out of the
//! blocks it would cover.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::{Notation, Pack, Stage};
use crate::exercise::feedback::{Fixture, Refusal, Rule, mentions};
use crate::exercise::semantics::{ParamWords, Semantics};

/// The pack.
pub const PACK: Pack = Pack {
    name: "spreadsheets",
    about: "workbooks: sheets, cells and ranges in A1 notation",
    rules: &[
        Rule {
            name: "one row or column",
            trigger: "'one row', 'a single column' (and the like)",
            learns: "a block reference (`A1:B3`) cut to its first column or row, in the field the error names, else in every such field",
            seen_in: "a spreadsheet server's sparkline and validation tools",
            built_from: &[Fixture {
                error: "The range must be one row or one column of cells.",
                schema: r#"{"type": "object", "properties": {"range": {"type": "string"}, "source": {"type": "string"}}}"#,
                sent: r#"{"range": "A1:B4", "source": "A1:B4"}"#,
                others: "[]",
                leads_to: r#"{"range": "A1:A4", "source": "A1:B4"}"#,
            }],
            apply: one_line,
        },
        Rule {
            name: "outside the block",
            trigger: "'overlap', 'cover', 'outside', 'intersects' with a single cell the error names",
            learns: "that cell moved to the right of the blocks the call names",
            seen_in: "a spreadsheet server's PivotTable tool",
            built_from: &[Fixture {
                error: "The PivotTable would cover its own source data A1:B4. Choose a `at` outside it.",
                schema: r#"{"type": "object", "properties": {"source": {"type": "string"}, "at": {"type": "string"}}}"#,
                sent: r#"{"at": "B2", "source": "A1:B4"}"#,
                others: "[]",
                leads_to: r#"{"at": "D1", "source": "A1:B4"}"#,
            }],
            apply: overlap,
        },
    ],
    choose: Some(choose),
    notation: Some(Notation {
        at: reference_at,
        quote: quote_sheet,
    }),
    entities: &["sheet", "worksheet"],
    contexts: &[],
};

/// A1 places for the parameters of tools about workbooks or sheets, or whose description
/// shows A1 notation: a cell, a column letter, the seeded block.
fn choose(stage: Stage, s: &Semantics, p: &ParamWords, _name: &str, hint: &str) -> Option<Value> {
    if stage != Stage::Place {
        return None;
    }
    let has = |list: &[&str]| p.has(list);
    let text = |v: &str| Some(Value::String(v.to_string()));
    let spreadsheet = s.file_kind == Some("xlsx") || has(&["sheet", "worksheet"]);
    let a1 = hint.contains("A1") || hint.contains("'B2'");
    if !(spreadsheet || a1) || has(&["text", "color", "colour", "style", "name", "path"]) {
        return None;
    }
    if has(&["cell", "at", "anchor", "position"]) {
        // "Formula cell to set": the seeded workbook's total.
        if hint.to_lowercase().contains("formula") {
            return text(crate::workspace::documents::WORKBOOK_FORMULA_CELL);
        }
        return text("B2");
    }
    if has(&["column", "col"]) && !has(&["width", "index", "count"]) {
        return text("A");
    }
    if has(&["range", "area", "cells", "source", "data", "block"]) || a1 {
        return text(crate::workspace::documents::WORKBOOK_BLOCK);
    }
    None
}

/// A sheet's name as a reference writes it: plain, or quoted where it is not a plain name.
fn quote_sheet(name: &str) -> String {
    if name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        name.to_string()
    } else {
        format!("'{}'", name.replace('\'', "''"))
    }
}

/// A block reference cut to one row or column.
fn one_line(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let lowered = r.lowered.as_str();
    let current = &r.current;
    // "The range must be one row or one column of cells": a block reference (`A1:B3`) cut to
    // its first column (or row), in the field the error names, else in every such field.
    static ONE_LINE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\b(one|a single|single)\s+(row|column)s?\b").expect("static regex")
    });
    if let Some(m) = ONE_LINE.captures(lowered) {
        let column = lowered[m.get(0).map_or(0, |g| g.start())..].contains("column");
        let blocks: Vec<(&String, String)> = current
            .iter()
            .filter_map(|(k, v)| Some((k, cut_block(v.as_str()?, column)?)))
            .collect();
        let named: Vec<&(&String, String)> = blocks
            .iter()
            .filter(|(k, _)| mentions(lowered, &k.to_lowercase()).is_some())
            .collect();
        let chosen: Vec<&(&String, String)> = if named.is_empty() {
            blocks.iter().collect()
        } else {
            named
        };
        if !chosen.is_empty() {
            let mut c = current.clone();
            for (k, cut) in chosen {
                c.insert((*k).clone(), Value::String(cut.clone()));
            }
            push(c);
        }
    }
}

/// A cell moved out of the blocks it would cover.
fn overlap(r: &Refusal<'_>, push: &mut dyn FnMut(Map<String, Value>)) {
    let lowered = r.lowered.as_str();
    let current = &r.current;
    // "The PivotTable would cover its own source data A1:B3. Choose a `at` outside it": a
    // single cell the error names moved to the right of the blocks the call names.
    static OVERLAP: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\b(overlap|overlaps|overlapping|cover|covers|outside|intersects?)\b")
            .expect("static regex")
    });
    if OVERLAP.is_match(lowered) {
        let right_of = current
            .values()
            .filter_map(|v| block_columns(v.as_str()?))
            .map(|(_, last)| last)
            .max();
        if let Some(last) = right_of {
            let mut c = current.clone();
            let mut changed = false;
            for (k, v) in current {
                let single = v.as_str().is_some_and(|s| SINGLE_CELL.is_match(s));
                if single && mentions(lowered, &k.to_lowercase()).is_some() {
                    c.insert(
                        k.clone(),
                        Value::String(format!("{}1", column_name(last + 2))),
                    );
                    changed = true;
                }
            }
            if changed {
                push(c);
            }
        }
    }
}

/// Where `sheet!` (or `'sheet'!`) begins a reference in `s`: the byte range of the sheet part.
fn reference_at(s: &str, sheet: &str) -> Option<std::ops::Range<usize>> {
    for form in [format!("'{sheet}'!"), format!("{sheet}!")] {
        let mut from = 0;
        while let Some(pos) = s[from..].find(&form).map(|p| p + from) {
            let before = s[..pos].chars().next_back();
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '\'') {
                return Some(pos..pos + form.len() - 1);
            }
            from = pos + form.len();
        }
    }
    None
}

/// A block reference (`A1:B3`, `Data!$A$1:$C$9`) of more than one row and column, cut to its
/// first column (`A1:A3`) or first row (`A1:B1`).
fn cut_block(s: &str, column: bool) -> Option<String> {
    static BLOCK: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(.*!)?\$?([A-Z]{1,3})\$?(\d+):\$?([A-Z]{1,3})\$?(\d+)$")
            .expect("static regex")
    });
    let c = BLOCK.captures(s)?;
    let prefix = c.get(1).map_or("", |m| m.as_str());
    let (c1, r1, c2, r2) = (&c[2], &c[3], &c[4], &c[5]);
    if c1 == c2 || r1 == r2 {
        return None;
    }
    Some(if column {
        format!("{prefix}{c1}{r1}:{c1}{r2}")
    } else {
        format!("{prefix}{c1}{r1}:{c2}{r1}")
    })
}

/// A single cell in A1 notation (`B2`, `$C$10`).
static SINGLE_CELL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\$?[A-Z]{1,3}\$?\d+$").expect("static regex"));

/// The first and last column numbers (A = 1) of a block reference (`A1:B4`, `Data!A1:C9`).
fn block_columns(s: &str) -> Option<(u32, u32)> {
    static BLOCK: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^(?:.*!)?\$?([A-Z]{1,3})\$?\d+:\$?([A-Z]{1,3})\$?\d+$").expect("static regex")
    });
    let c = BLOCK.captures(s)?;
    let number = |letters: &str| {
        letters
            .bytes()
            .fold(0u32, |n, b| n * 26 + u32::from(b - b'A' + 1))
    };
    Some((number(&c[1]), number(&c[2])))
}

/// The letters of column number `n` (1 = A, 27 = AA).
fn column_name(mut n: u32) -> String {
    let mut out = Vec::new();
    while n > 0 {
        let r = (n - 1) % 26;
        out.push(char::from(b'A' + r as u8));
        n = (n - 1) / 26;
    }
    out.iter().rev().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exercise::feedback::corrections;
    use crate::exercise::packs::Packs;
    use serde_json::json;

    #[test]
    fn a_sheet_that_does_not_exist_is_replaced_inside_references() {
        let schema = json!({"type": "object", "properties": {
            "refers_to": {"type": "string"},
            "series": {"type": "array", "items": {"type": "object", "properties": {"values": {"type": "string"}}}}}});
        let all = Packs::all();
        let c = corrections(
            "'Data' in 'Data!$B$2:$B$100' is not a sheet of this workbook. Sheets: 'Main', 'my sheet'",
            &schema,
            &json!({"refers_to": "Data!$B$2:$B$100"}),
            &[],
            &all,
        );
        assert_eq!(c[0], json!({"refers_to": "Main!$B$2:$B$100"}));
        assert_eq!(c[1], json!({"refers_to": "'my sheet'!$B$2:$B$100"}));
        let c = corrections(
            "Sheet 'Data' not found. Available sheets: 'Summary-1'.",
            &schema,
            &json!({"series": [{"values": "Data!B2:B13"}]}),
            &[],
            &all,
        );
        assert_eq!(c[0], json!({"series": [{"values": "'Summary-1'!B2:B13"}]}));
        // Without the pack, the core does not know the notation: the reference stays.
        let c = corrections(
            "Sheet 'Data' not found. Available sheets: 'Summary-1'.",
            &schema,
            &json!({"series": [{"values": "Data!B2:B13"}]}),
            &[],
            &Packs::none(),
        );
        assert!(
            c.iter().all(|c| c["series"][0]["values"] == "Data!B2:B13"),
            "{c:?}"
        );
    }

    #[test]
    fn block_helpers_read_a1_notation() {
        assert_eq!(column_name(28), "AB");
        assert_eq!(block_columns("Data!$AA$1:$AB$9"), Some((27, 28)));
        assert_eq!(cut_block("B2:B9", true), None);
        assert_eq!(quote_sheet("my sheet"), "'my sheet'");
        assert_eq!(reference_at("='Data'!A1", "Data"), Some(1..7));
    }
}
