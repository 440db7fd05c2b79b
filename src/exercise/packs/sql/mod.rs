//! SQL: tools that run statements on a database. Values: a database path (`db`,
//! `database`, `sqlite`) is the seeded SQLite file; a statement (`sql`, or a `query` whose
//! description speaks of SQL) does what the tool is for on the seeded `items` table (a read,
//! an insert, an update) or makes a new table (`IF NOT EXISTS`); a `table` is `items`.

use serde_json::Value;

use super::{Pack, Stage};
use crate::exercise::semantics::{Intent, ParamWords, Semantics};

/// The pack.
pub const PACK: Pack = Pack {
    name: "sql",
    about: "databases: SQL statements on the seeded SQLite file",
    rules: &[],
    choose: Some(choose),
    notation: None,
    entities: &[],
    contexts: &[],
};

/// The seeded database for a database path; a statement or the seeded table for a program.
fn choose(stage: Stage, s: &Semantics, p: &ParamWords, name: &str, hint: &str) -> Option<Value> {
    let has = |list: &[&str]| p.has(list);
    let text = |v: &str| Some(Value::String(v.to_string()));
    let seeded = s.facts.sqlite.as_deref();
    match stage {
        Stage::Place => {
            let db = seeded?;
            (has(&["db", "database", "sqlite"]) && !has(&["name"])).then(|| s.abs(db))
        }
        Stage::Address => None,
        Stage::Program => {
            if has(&["sql"]) || (has(&["query"]) && hint.to_ascii_lowercase().contains("sql")) {
                let v = &s.facts.vocab;
                let new_table = format!(
                    "CREATE TABLE IF NOT EXISTS {} (id INTEGER PRIMARY KEY, note TEXT)",
                    v.table()
                );
                let on_tables = s.tool_words.iter().any(|w| w == "table");
                return text(&match s.intent {
                    Intent::Create if on_tables => new_table,
                    Intent::Create if seeded.is_some() => {
                        format!("INSERT INTO items (name) VALUES ('{}')", v.term())
                    }
                    Intent::Create => new_table,
                    Intent::Modify if seeded.is_some() => {
                        format!("UPDATE items SET name = '{}' WHERE id = 1", v.term())
                    }
                    _ if seeded.is_some() => "SELECT * FROM items".into(),
                    _ => "SELECT 1".into(),
                });
            }
            if seeded.is_some() && matches!(name, "table" | "table_name" | "tableName") {
                return text("items");
            }
            None
        }
    }
}
