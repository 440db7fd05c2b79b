//! Structured stores judged by their own model: a SQLite database or a JSON, JSON Lines,
//! YAML, TOML or CSV file that a window changed is read before and after by the harness (rusqlite
//! for databases; nothing the server says is used) and the change is told in the store's own
//! terms: rows or members added, changed, removed, tables created or dropped. Byte-wise a
//! database insert rewrites pages in place and a JSON counter bump rewrites the file; here
//! the first is an addition and the second an update (`visits: 1 → 2`), which
//! `destructiveHint: false` does not allow. What cannot be read (a file too large to have been
//! kept, a database in WAL mode whose change sits in its log, a table the harness cannot
//! select from) keeps its byte-wise kind.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::evidence::{FileEffect, FileEffectKind};

/// Rows compared per table at most; a larger table is left to its byte-wise kind.
const MAX_ROWS: usize = 100_000;
/// Changes named in the evidence at most.
const MAX_DETAILS: usize = 4;

/// What changed in a store.
#[derive(Debug, Default, PartialEq)]
pub struct StoreDiff {
    /// Rows, members, elements or tables added.
    pub added: usize,
    /// Values changed in place.
    pub changed: usize,
    /// Rows, members, elements or tables removed.
    pub removed: usize,
    /// The first changes, as a reader would say them.
    pub details: Vec<String>,
}

impl StoreDiff {
    fn note(&mut self, s: String) {
        if self.details.len() < MAX_DETAILS {
            self.details.push(s);
        }
    }
}

/// Classifies again the effects of `effects` on stores whose content before and after
/// `before` and `after` give.
pub fn reclassify(
    effects: &mut [FileEffect],
    before: &dyn Fn(&str) -> Option<Vec<u8>>,
    after: &dyn Fn(&str) -> Option<Vec<u8>>,
) {
    for effect in effects.iter_mut() {
        // (An `Extended` JSON file already says it only grew.)
        let rewritten = effect.database
            || matches!(
                effect.kind,
                FileEffectKind::Overwritten | FileEffectKind::Truncated
            );
        if !rewritten || effect.path.contains("/.git/") {
            continue;
        }
        let (Some(old), Some(new)) = (before(&effect.path), after(&effect.path)) else {
            continue;
        };
        let diff = if old.starts_with(b"SQLite format 3\0") && new.starts_with(b"SQLite format 3\0")
        {
            sqlite_diff(&old, &new)
        } else {
            text_diff(&effect.path, &old, &new)
        };
        let Some(diff) = diff else { continue };
        effect.database = false;
        if diff.added + diff.changed + diff.removed == 0 {
            // Nothing added, changed or removed in the store's own terms (rows replaced by
            // equal ones, only timestamps moved, pages reorganised): the same content again.
            effect.kind = FileEffectKind::Rewritten;
            continue;
        }
        effect.kind = FileEffectKind::StoreChanged {
            added: diff.added,
            changed: diff.changed,
            removed: diff.removed,
            detail: diff.details.join("; "),
        };
    }
}

/// The change between two versions of a text store, by the file's extension (or, without
/// one, as JSON); `None` when either version does not parse.
fn text_diff(path: &str, old: &[u8], new: &[u8]) -> Option<StoreDiff> {
    let (old, new) = (
        std::str::from_utf8(old).ok()?,
        std::str::from_utf8(new).ok()?,
    );
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    let mut diff = StoreDiff::default();
    match ext.as_deref() {
        Some("toml") => {
            let parse = |s: &str| -> Option<Value> {
                serde_json::to_value(s.parse::<toml::Table>().ok()?).ok()
            };
            json_diff(&parse(old)?, &parse(new)?, "", &mut diff);
        }
        Some("csv" | "tsv") => csv_diff(old, new, &mut diff),
        Some("yaml" | "yml") => json_diff(&yaml_value(old)?, &yaml_value(new)?, "", &mut diff),
        Some("jsonl" | "ndjson") => {
            let lines = |s: &str| -> Option<Vec<Value>> {
                s.lines()
                    .filter(|l| !l.trim().is_empty())
                    .map(|l| serde_json::from_str(l).ok())
                    .collect()
            };
            // Named "lines" in the evidence: each element is a line of the file.
            json_diff(
                &Value::Array(lines(old)?),
                &Value::Array(lines(new)?),
                "lines",
                &mut diff,
            );
        }
        Some("json") | None => {
            json_diff(
                &serde_json::from_str(old).ok()?,
                &serde_json::from_str(new).ok()?,
                "",
                &mut diff,
            );
        }
        _ => return None,
    }
    Some(diff)
}

/// A YAML document (the first of the file) as a JSON value, read with yaml-rust2; `None`
/// when it does not parse or uses aliases (an alias is expanded by copying, so a few lines
/// can stand for gigabytes: such a file keeps its byte-wise kind).
fn yaml_value(text: &str) -> Option<Value> {
    use yaml_rust2::parser::{Event, Parser};
    let mut events = Parser::new_from_str(text);
    loop {
        match events.next_token().ok()?.0 {
            Event::Alias(_) => return None,
            Event::StreamEnd => break,
            _ => {}
        }
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(text).ok()?;
    fn convert(y: &yaml_rust2::Yaml) -> Value {
        use yaml_rust2::Yaml;
        match y {
            Yaml::Real(r) => r
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map_or_else(|| Value::String(r.clone()), Value::Number),
            Yaml::Integer(i) => Value::from(*i),
            Yaml::String(s) => Value::String(s.clone()),
            Yaml::Boolean(b) => Value::Bool(*b),
            Yaml::Array(a) => Value::Array(a.iter().map(convert).collect()),
            Yaml::Hash(h) => Value::Object(
                h.iter()
                    .map(|(k, v)| {
                        let key = match k {
                            Yaml::String(s) => s.clone(),
                            other => match convert(other) {
                                Value::String(s) => s,
                                v => v.to_string(),
                            },
                        };
                        (key, convert(v))
                    })
                    .collect(),
            ),
            Yaml::Null | Yaml::Alias(_) | Yaml::BadValue => Value::Null,
        }
    }
    Some(docs.first().map(convert).unwrap_or(Value::Null))
}

/// Members added, removed and changed between two JSON values; array elements by position
/// where both have one, added or removed beyond.
fn json_diff(old: &Value, new: &Value, at: &str, diff: &mut StoreDiff) {
    let path = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    Some(w) => json_diff(v, w, &path(k), diff),
                    None => {
                        diff.removed += 1;
                        diff.note(format!("{} removed", path(k)));
                    }
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                diff.added += 1;
                diff.note(format!("{} added", path(k)));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            // Elements kept in order count as kept even when others were inserted before
            // them (a list that grew at its head); what is left is paired in order: two
            // objects (or arrays) are compared member by member, other values are changed.
            let mut unmatched_old: Vec<usize> = Vec::new();
            let mut unmatched_new: Vec<usize> = Vec::new();
            let mut next = 0;
            for (i, v) in a.iter().enumerate() {
                match b[next..].iter().position(|w| w == v) {
                    Some(k) => {
                        unmatched_new.extend(next..next + k);
                        next += k + 1;
                    }
                    None => unmatched_old.push(i),
                }
            }
            unmatched_new.extend(next..b.len());
            let pairs = unmatched_old.len().min(unmatched_new.len());
            for (&i, &k) in unmatched_old.iter().zip(&unmatched_new) {
                let (x, y) = (&a[i], &b[k]);
                if (x.is_object() && y.is_object()) || (x.is_array() && y.is_array()) {
                    json_diff(x, y, &format!("{}[{k}]", label(at)), diff);
                } else {
                    diff.changed += 1;
                    diff.note(format!("{}[{k}]: {} → {}", label(at), short(x), short(y)));
                }
            }
            for &i in &unmatched_old[pairs..] {
                diff.removed += 1;
                diff.note(format!(
                    "{}: an element removed ({})",
                    label(at),
                    short(&a[i])
                ));
            }
            let grown = unmatched_new.len() - pairs;
            if grown > 0 {
                diff.added += grown;
                diff.note(format!("{}: {grown} element(s) added", label(at)));
            }
        }
        (a, b) if a != b => {
            diff.changed += 1;
            diff.note(format!("{}: {} → {}", label(at), short(a), short(b)));
        }
        _ => {}
    }
}

fn label(at: &str) -> &str {
    if at.is_empty() { "the document" } else { at }
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

/// Rows added, removed and changed between two CSV texts: rows keyed by their first column
/// (a changed row keeps its key), the header compared as a row.
fn csv_diff(old: &str, new: &str, diff: &mut StoreDiff) {
    let rows = |s: &str| -> Vec<String> { s.lines().map(str::to_string).collect() };
    let (old, new) = (rows(old), rows(new));
    let key = |r: &str| r.split([',', '\t']).next().unwrap_or("").to_string();
    let mut new_by_key: HashMap<String, Vec<&String>> = HashMap::new();
    for r in &new {
        new_by_key.entry(key(r)).or_default().push(r);
    }
    let mut kept: HashMap<&String, usize> = HashMap::new();
    for r in &new {
        *kept.entry(r).or_default() += 1;
    }
    let mut used: HashMap<String, usize> = HashMap::new();
    for r in &old {
        if let Some(n) = kept.get_mut(r).filter(|n| **n > 0) {
            *n -= 1;
            continue;
        }
        let k = key(r);
        let replaced = new_by_key
            .get(&k)
            .is_some_and(|rs| rs.iter().any(|x| !old.contains(x)));
        if replaced && *used.entry(k.clone()).or_default() == 0 {
            *used.get_mut(&k).expect("entry") += 1;
            diff.changed += 1;
            let to = new_by_key[&k]
                .iter()
                .find(|x| !old.contains(x))
                .expect("some");
            diff.note(format!("row {k:?} changed: {r} → {to}"));
        } else {
            diff.removed += 1;
            diff.note(format!("row removed: {r}"));
        }
    }
    let added = new
        .iter()
        .filter(|r| !old.contains(r) && !used.contains_key(&key(r)))
        .count();
    if added > 0 {
        diff.added += added;
        diff.note(format!("{added} row(s) added"));
    }
}

/// A row as the database gives it.
type Row = Vec<rusqlite::types::Value>;

/// One table of a database, read whole.
struct Table {
    /// Declared `WITHOUT ROWID` (rows are compared whole).
    without_rowid: bool,
    /// The column that holds the rowid (an `INTEGER PRIMARY KEY`), if any.
    rowid_column: Option<usize>,
    /// The column names.
    columns: Vec<String>,
    /// The rows with their rowid.
    rows: Vec<(i64, Row)>,
}

/// A database's tables by name.
type Tables = BTreeMap<String, Table>;

/// Tables, and the rows of each, of a database held in `bytes`; `None` when it cannot be
/// read whole.
fn sqlite_tables(bytes: &[u8]) -> Option<Tables> {
    let file = tempfile::NamedTempFile::new().ok()?;
    std::fs::write(file.path(), bytes).ok()?;
    let uri = format!("file:{}?immutable=1", file.path().display());
    let db = rusqlite::Connection::open_with_flags(
        uri,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_URI
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .ok()?;
    let names: Vec<(String, String)> = {
        let mut st = db
            .prepare("SELECT name, COALESCE(sql, '') FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
            .ok()?;
        st.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .ok()?
            .collect::<Result<_, _>>()
            .ok()?
    };
    let mut out = BTreeMap::new();
    for (name, sql) in names {
        let without_rowid = sql.to_ascii_uppercase().contains("WITHOUT ROWID");
        let quoted = format!("\"{}\"", name.replace('"', "\"\""));
        let query = if without_rowid {
            format!("SELECT 0, * FROM {quoted}")
        } else {
            format!("SELECT rowid, * FROM {quoted}")
        };
        // (name, declared type, primary-key position) of each column.
        let info: Vec<(String, String, i64)> = {
            let mut st = db.prepare(&format!("PRAGMA table_info({quoted})")).ok()?;
            st.query_map([], |r| Ok((r.get(1)?, r.get(2)?, r.get(5)?)))
                .ok()?
                .collect::<Result<_, _>>()
                .ok()?
        };
        let keys: Vec<usize> = (0..info.len()).filter(|&i| info[i].2 > 0).collect();
        let rowid_column = match keys[..] {
            [k] if !without_rowid && info[k].1.eq_ignore_ascii_case("INTEGER") => Some(k),
            _ => None,
        };
        let columns: Vec<String> = info.into_iter().map(|(name, ..)| name).collect();
        let mut st = db.prepare(&query).ok()?;
        let count = st.column_count();
        let mut rows = Vec::new();
        let mut q = st.query([]).ok()?;
        while let Some(r) = q.next().ok()? {
            if rows.len() >= MAX_ROWS {
                return None;
            }
            let id: i64 = r.get(0).ok()?;
            let values: Row = (1..count)
                .map(|c| r.get(c))
                .collect::<Result<_, _>>()
                .ok()?;
            rows.push((id, values));
        }
        out.insert(
            name,
            Table {
                without_rowid,
                rowid_column,
                columns,
                rows,
            },
        );
    }
    Some(out)
}

/// Tables created and dropped, rows inserted, updated and deleted.
fn sqlite_diff(old: &[u8], new: &[u8]) -> Option<StoreDiff> {
    let (old, new) = (sqlite_tables(old)?, sqlite_tables(new)?);
    let mut diff = StoreDiff::default();
    for name in old.keys().filter(|n| !new.contains_key(*n)) {
        diff.removed += 1;
        diff.note(format!("table {name} dropped"));
    }
    for name in new.keys().filter(|n| !old.contains_key(*n)) {
        diff.added += 1;
        diff.note(format!("table {name} created"));
    }
    // Rows whose only change is a counter raised by one (a version, a step count): with
    // rows added beside them, the bookkeeping of that addition, not an update.
    let mut bumps: Vec<String> = Vec::new();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    for (name, table) in &old {
        let Some(after_table) = new.get(name) else {
            continue;
        };
        let (before, after) = (&table.rows, &after_table.rows);
        let same_content = |old_row: (i64, &Row), new_row: (i64, &Row)| {
            same_content(old_row, new_row, table.rowid_column, now)
        };
        let (mut inserted, mut updated, mut deleted) = (0, 0, 0);
        if table.without_rowid {
            // Rows compared whole (values have no total order or hash: REAL).
            let mut count: HashMap<String, i64> = HashMap::new();
            for (_, r) in before {
                *count.entry(format!("{r:?}")).or_default() += 1;
            }
            for (_, r) in after {
                *count.entry(format!("{r:?}")).or_default() -= 1;
            }
            for n in count.values() {
                match n.cmp(&0) {
                    std::cmp::Ordering::Greater => deleted += *n as usize,
                    std::cmp::Ordering::Less => inserted += (-n) as usize,
                    std::cmp::Ordering::Equal => {}
                }
            }
        } else {
            let a: HashMap<i64, &Row> = before.iter().map(|(id, r)| (*id, r)).collect();
            let b: HashMap<i64, &Row> = after.iter().map(|(id, r)| (*id, r)).collect();
            let mut gone: Vec<(i64, &Row)> = Vec::new();
            let mut retimed = 0;
            for (id, r) in &a {
                match b.get(id) {
                    None => gone.push((*id, r)),
                    Some(s) if s != r && same_content((*id, r), (*id, s)) => retimed += 1,
                    Some(s) if s != r && counter_raised(&table.columns, r, s, now) => {
                        bumps.push(format!(
                            "table {name}: row {id} updated ({} → {})",
                            row_text(r),
                            row_text(s)
                        ))
                    }
                    Some(s) if s != r => {
                        updated += 1;
                        if updated == 1 {
                            diff.note(format!(
                                "table {name}: row {id} updated ({} → {})",
                                row_text(r),
                                row_text(s)
                            ));
                        }
                    }
                    _ => {}
                }
            }
            // A deleted row and an inserted one equal but for the row's own id and its
            // timestamps are the same row written again (INSERT OR REPLACE, delete-then-
            // insert of the same values): neither a removal nor an addition.
            let mut new_rows: Vec<(i64, &Row)> = b
                .iter()
                .filter(|(id, _)| !a.contains_key(id))
                .map(|(id, r)| (*id, *r))
                .collect();
            new_rows.sort_by_key(|(id, _)| *id);
            gone.sort_by_key(|(id, _)| *id);
            let mut replaced = 0;
            for old_row in gone {
                match new_rows
                    .iter()
                    .position(|new_row| same_content(old_row, *new_row))
                {
                    Some(at) => {
                        new_rows.remove(at);
                        replaced += 1;
                    }
                    None => deleted += 1,
                }
            }
            inserted = new_rows.len();
            for (n, what) in [
                (replaced, "replaced by equal rows"),
                (retimed, "with only timestamps changed"),
            ] {
                if n > 0 {
                    diff.note(format!("table {name}: {n} row(s) {what}"));
                }
            }
        }
        for (n, what) in [(inserted, "inserted"), (deleted, "deleted")] {
            if n > 0 {
                diff.note(format!("table {name}: {n} row(s) {what}"));
            }
        }
        if updated > 1 {
            diff.note(format!("table {name}: {updated} row(s) updated"));
        }
        diff.added += inserted;
        diff.changed += updated;
        diff.removed += deleted;
    }
    if diff.added > 0 {
        if !bumps.is_empty() {
            diff.note(format!(
                "{} row(s) with a counter raised by one beside the rows added",
                bumps.len()
            ));
        }
    } else {
        diff.changed += bumps.len();
        for b in bumps {
            diff.note(b);
        }
    }
    Some(diff)
}

/// Whether `new` is `old` with one or more counters raised by exactly one (integer cells of
/// columns named like a counter: a version, a revision, a count, a total, a sequence) and
/// every other cell equal or a fresh timestamp. A flag set from 0 to 1 (`archived`) is no
/// counter.
fn counter_raised(columns: &[String], old: &Row, new: &Row, now: f64) -> bool {
    use rusqlite::types::Value as V;
    const COUNTER_WORDS: &[&str] = &[
        "version", "revision", "count", "counter", "total", "seq", "sequence",
    ];
    let counter = |i: usize| {
        columns.get(i).is_some_and(|c| {
            c.to_ascii_lowercase()
                .split(|ch: char| !ch.is_ascii_alphanumeric())
                .any(|w| COUNTER_WORDS.contains(&w))
        })
    };
    let mut raised = false;
    let rest_same = old
        .iter()
        .zip(new)
        .enumerate()
        .all(|(i, (a, b))| match (a, b) {
            (V::Integer(x), V::Integer(y)) if counter(i) && x.checked_add(1) == Some(*y) => {
                raised = true;
                true
            }
            _ => a == b || fresh_timestamps(a, b, now),
        });
    old.len() == new.len() && rest_same && raised
}

/// Whether two rows (each with its rowid) hold the same content: every cell equal, but for
/// the table's rowid column (an `INTEGER PRIMARY KEY`) and fresh timestamps (see
/// [`fresh_timestamps`]).
fn same_content(
    (old_id, old): (i64, &Row),
    (new_id, new): (i64, &Row),
    rowid_column: Option<usize>,
    now: f64,
) -> bool {
    use rusqlite::types::Value as V;
    old.len() == new.len()
        && old.iter().zip(new).enumerate().all(|(i, (a, b))| {
            a == b
                || (rowid_column == Some(i) && *a == V::Integer(old_id) && *b == V::Integer(new_id))
                || fresh_timestamps(a, b, now)
        })
}

/// Whether `a` and `b` are both timestamps, at most a day apart, `b` written about now (the
/// time a store records on every save, not a date the tool was asked to move): a date and
/// time in text (within 15 hours of now, for it may be local time) or seconds or
/// milliseconds since the epoch (within an hour of now).
fn fresh_timestamps(a: &rusqlite::types::Value, b: &rusqlite::types::Value, now: f64) -> bool {
    use rusqlite::types::Value as V;
    const DAY: f64 = 86_400.0;
    // Seconds since the epoch, and how far from now a fresh one may be.
    let seconds = |v: &V| -> Option<(f64, f64)> {
        let n = match v {
            V::Text(t) => return text_timestamp(t).map(|s| (s, 15.0 * 3600.0)),
            V::Integer(i) => *i as f64,
            V::Real(f) => *f,
            _ => return None,
        };
        if (1e9..1e10).contains(&n) {
            Some((n, 3600.0))
        } else if (1e12..1e13).contains(&n) {
            Some((n / 1000.0, 3600.0))
        } else {
            None
        }
    };
    match (seconds(a), seconds(b)) {
        (Some((a, _)), Some((b, fresh))) => (b - a).abs() <= DAY && (b - now).abs() <= fresh,
        _ => false,
    }
}

/// Seconds since the epoch of a date with a time of day, as SQLite's `CURRENT_TIMESTAMP` and
/// ISO 8601 write them (a time without an offset read as UTC).
fn text_timestamp(s: &str) -> Option<f64> {
    static STAMP: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$",
        )
        .expect("timestamp pattern")
    });
    if !STAMP.is_match(s) {
        return None;
    }
    let iso = s.replacen(' ', "T", 1);
    let timestamp = match iso.parse::<jiff::Timestamp>() {
        Ok(t) => t,
        Err(_) => iso
            .parse::<jiff::civil::DateTime>()
            .ok()?
            .to_zoned(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp(),
    };
    Some(timestamp.as_millisecond() as f64 / 1000.0)
}

fn row_text(r: &Row) -> String {
    use rusqlite::types::Value as V;
    let cells: Vec<String> = r
        .iter()
        .map(|v| match v {
            V::Null => "NULL".into(),
            V::Integer(i) => i.to_string(),
            V::Real(f) => f.to_string(),
            V::Text(t) => format!("{t:?}"),
            V::Blob(b) => format!("<{} bytes>", b.len()),
        })
        .collect();
    let s = cells.join(", ");
    if s.chars().count() > 60 {
        format!("{}…", s.chars().take(60).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_changes_are_told_in_members() {
        let mut d = StoreDiff::default();
        json_diff(
            &json!({"visits": 1, "tags": ["a"], "old": true}),
            &json!({"visits": 2, "tags": ["a", "b"], "new": 1}),
            "",
            &mut d,
        );
        assert_eq!((d.added, d.changed, d.removed), (2, 1, 1), "{d:?}");
        assert!(d.details.contains(&"visits: 1 → 2".to_string()), "{d:?}");
        let mut d = StoreDiff::default();
        json_diff(&json!([1, 2]), &json!([0, 1, 2]), "", &mut d);
        assert_eq!((d.added, d.changed, d.removed), (1, 0, 0), "{d:?}");
        // An object element that lost a member: compared member by member.
        let mut d = StoreDiff::default();
        json_diff(
            &json!([{"name": "a", "notes": ["x", "y"]}, {"name": "b"}]),
            &json!([{"name": "a", "notes": ["x"]}, {"name": "b"}]),
            "lines",
            &mut d,
        );
        assert_eq!((d.added, d.changed, d.removed), (0, 0, 1), "{d:?}");
        assert_eq!(d.details, ["lines[0].notes: an element removed (\"y\")"]);
    }

    #[test]
    fn yaml_documents_are_told_in_members_and_aliases_are_not_expanded() {
        let d = text_diff(
            "$HOME/.config/app/state.yaml",
            b"visits: 1\ntags:\n  - a\n",
            b"visits: 2\ntags:\n  - a\n  - b\nratio: 0.5\n",
        )
        .expect("diff");
        assert_eq!((d.added, d.changed, d.removed), (2, 1, 0), "{d:?}");
        assert!(d.details.contains(&"visits: 1 → 2".to_string()), "{d:?}");
        // A billion laughs in a few lines: left to the byte-wise kind.
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n";
        assert_eq!(yaml_value(bomb), None);
        assert_eq!(yaml_value("a: [unclosed"), None);
    }

    #[test]
    fn csv_rows_are_keyed_by_their_first_column() {
        let mut d = StoreDiff::default();
        csv_diff("name,n\na,1\nb,2\n", "name,n\na,1\nb,3\nc,4\n", &mut d);
        assert_eq!((d.added, d.changed, d.removed), (1, 1, 0), "{d:?}");
        assert!(d.details[0].contains("b,2 → b,3"), "{d:?}");
    }

    /// A SQLite database in a temporary directory, changed a step at a time: each step's
    /// change as `sqlite_diff` tells it, with the bytes before and after.
    struct Steps {
        _dir: tempfile::TempDir,
        path: std::path::PathBuf,
        db: rusqlite::Connection,
        bytes: Vec<u8>,
    }

    impl Steps {
        fn new(schema: &str) -> Steps {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("a.db");
            let db = rusqlite::Connection::open(&path).expect("open");
            db.execute_batch(schema).expect("schema");
            let bytes = std::fs::read(&path).expect("read");
            Steps {
                _dir: dir,
                path,
                db,
                bytes,
            }
        }

        /// Runs `sql`; the change it made (and the bytes before it).
        fn step(&mut self, sql: &str) -> (StoreDiff, Vec<u8>) {
            self.db.execute_batch(sql).expect(sql);
            let after = std::fs::read(&self.path).expect("read");
            let before = std::mem::replace(&mut self.bytes, after);
            (sqlite_diff(&before, &self.bytes).expect("diff"), before)
        }
    }

    /// A change's (added, changed, removed).
    fn counts(d: &StoreDiff) -> (usize, usize, usize) {
        (d.added, d.changed, d.removed)
    }

    #[test]
    fn sqlite_rows_are_told_inserted_updated_and_deleted() {
        let mut db = Steps::new(
            "CREATE TABLE items(name TEXT, n INTEGER); INSERT INTO items VALUES ('a', 1), ('b', 2);",
        );
        let (d, _) = db.step("INSERT INTO items VALUES ('c', 3);");
        assert_eq!(counts(&d), (1, 0, 0), "{d:?}");
        let (d, _) = db.step("UPDATE items SET n = 5 WHERE name = 'a'; DELETE FROM items WHERE name = 'b'; CREATE TABLE t(x);");
        assert_eq!(counts(&d), (1, 1, 1), "{d:?}");
        assert!(
            d.details
                .iter()
                .any(|s| s == "table items: row 1 updated (\"a\", 1 → \"a\", 5)"),
            "{d:?}"
        );
        assert_eq!(sqlite_diff(b"SQLite format 3\0garbage", &db.bytes), None);
    }

    #[test]
    fn a_version_raised_beside_rows_added_is_their_bookkeeping_and_alone_an_update() {
        let mut db = Steps::new(
            "CREATE TABLE sessions(id TEXT PRIMARY KEY, title TEXT, version INTEGER);
             CREATE TABLE steps(session TEXT, body TEXT);
             INSERT INTO sessions VALUES ('s1', 'guide', 3);",
        );
        let (d, _) = db.step(
            "INSERT INTO steps VALUES ('s1', 'step one');
                 UPDATE sessions SET version = version + 1 WHERE id = 's1';",
        );
        assert_eq!(counts(&d), (1, 0, 0), "{d:?}");
        let (d, _) = db.step("UPDATE sessions SET version = version + 1 WHERE id = 's1';");
        assert_eq!(counts(&d), (0, 1, 0), "{d:?}");
    }

    #[test]
    fn sqlite_rows_written_again_with_the_same_content_are_no_change() {
        let mut db = Steps::new(
            "CREATE TABLE obs(id INTEGER PRIMARY KEY AUTOINCREMENT, entity TEXT, content TEXT, \
               created_at TEXT DEFAULT (datetime('now')));
             CREATE TABLE kv(k TEXT UNIQUE, v TEXT, stamp INTEGER);
             INSERT INTO obs(entity, content) VALUES ('e', 'swift-forest');
             INSERT INTO kv VALUES ('theme', 'dark', unixepoch());",
        );
        // Delete-then-insert of the same values (a new id and creation time), and INSERT OR
        // REPLACE of the same value a second later.
        let (d, before) = db.step(
            "DELETE FROM obs WHERE entity = 'e';
             INSERT INTO obs(entity, content, created_at)
               VALUES ('e', 'swift-forest', datetime('now', '+1 second'));
             INSERT OR REPLACE INTO kv VALUES ('theme', 'dark', unixepoch() + 1);",
        );
        assert_eq!(counts(&d), (0, 0, 0), "{d:?}");
        assert!(
            d.details
                .iter()
                .any(|s| s == "table obs: 1 row(s) replaced by equal rows"),
            "{d:?}"
        );
        // The same content is a same-content rewrite, not a store change.
        let mut effect = FileEffect::bare(
            "a.db",
            FileEffectKind::Overwritten,
            crate::evidence::ObjectKind::File,
            crate::evidence::Mechanism::Snapshot,
        );
        effect.database = true;
        let mut effects = vec![effect];
        let again = db.bytes.clone();
        reclassify(&mut effects, &|_| Some(before.clone()), &|_| {
            Some(again.clone())
        });
        assert_eq!(effects[0].kind, FileEffectKind::Rewritten);
        // Another value is a change.
        let (d, _) = db.step("INSERT OR REPLACE INTO kv VALUES ('theme', 'light', unixepoch());");
        assert_eq!(counts(&d), (1, 0, 1), "{d:?}");
    }

    #[test]
    fn only_the_rowid_column_and_fresh_timestamps_are_set_aside() {
        let mut db = Steps::new(
            "CREATE TABLE stock(id INTEGER PRIMARY KEY, qty INTEGER);
             CREATE TABLE tasks(id INTEGER PRIMARY KEY, title TEXT, due_at TEXT, archived INTEGER);
             CREATE TABLE log(line TEXT);
             INSERT INTO stock VALUES (5, 5);
             INSERT INTO tasks VALUES (1, 'plan', datetime('now'), 0);",
        );
        // A row whose other cell happens to follow the id is another row; a due date moved
        // by a week is an update; a flag set beside a row added is an update too.
        let (d, _) = db.step(
            "DELETE FROM stock; INSERT INTO stock VALUES (6, 6);
                 UPDATE tasks SET due_at = datetime('now', '+7 days');",
        );
        assert_eq!(counts(&d), (1, 1, 1), "{d:?}");
        let (d, _) =
            db.step("UPDATE tasks SET archived = 1; INSERT INTO log VALUES ('archived plan');");
        assert_eq!(counts(&d), (1, 1, 0), "{d:?}");
    }
}
