//! A small SQLite database written byte by byte, for seeding workspaces: one table
//! `items(id INTEGER PRIMARY KEY, name TEXT)` with three rows, in the documented file format
//! (a 100-byte header, page 1 holding `sqlite_master`, page 2 the table). No SQLite library
//! is needed to create it; any SQLite can read and change it.

/// The page size of the file.
const PAGE_SIZE: usize = 4096;

/// The table's schema, as `sqlite_master` stores it.
pub const ITEMS_SQL: &str = "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT)";

/// The rows of `items`.
pub const ITEMS: &[&str] = &["notebook", "desk lamp", "coffee beans"];

/// SQLite's variable-length integer (big-endian, 7 bits per byte; at most 9 bytes).
fn varint(mut v: u64, out: &mut Vec<u8>) {
    if v > 0x00ff_ffff_ffff_ffff {
        let mut buf = [0u8; 9];
        buf[8] = v as u8;
        v >>= 8;
        for i in (0..8).rev() {
            buf[i] = ((v & 0x7f) as u8) | 0x80;
            v >>= 7;
        }
        out.extend_from_slice(&buf);
        return;
    }
    let mut tmp = Vec::new();
    loop {
        tmp.push((v & 0x7f) as u8);
        v >>= 7;
        if v == 0 {
            break;
        }
    }
    for (i, b) in tmp.iter().rev().enumerate() {
        out.push(if i + 1 < tmp.len() { b | 0x80 } else { *b });
    }
}

/// One column of a record.
enum Column<'a> {
    Null,
    Int(u8),
    Text(&'a str),
}

/// A record: header (its size, then one serial type per column) and body.
fn record(columns: &[Column<'_>]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut body = Vec::new();
    for c in columns {
        match c {
            Column::Null => varint(0, &mut types),
            Column::Int(v) => {
                varint(1, &mut types);
                body.push(*v);
            }
            Column::Text(s) => {
                varint(s.len() as u64 * 2 + 13, &mut types);
                body.extend_from_slice(s.as_bytes());
            }
        }
    }
    // The header size counts itself; every size here fits in one byte.
    let mut out = vec![(types.len() + 1) as u8];
    out.extend(types);
    out.extend(body);
    out
}

/// A leaf table b-tree page whose header starts at `header_at` (100 on page 1), with cells
/// `(rowid, record)` stored from the end of the page.
fn leaf_page(page: &mut [u8], header_at: usize, cells: &[(u64, Vec<u8>)]) {
    let mut content_start = PAGE_SIZE;
    let mut pointers = Vec::new();
    for (rowid, payload) in cells {
        let mut cell = Vec::new();
        varint(payload.len() as u64, &mut cell);
        varint(*rowid, &mut cell);
        cell.extend_from_slice(payload);
        content_start -= cell.len();
        page[content_start..content_start + cell.len()].copy_from_slice(&cell);
        pointers.push(content_start as u16);
    }
    page[header_at] = 0x0d; // leaf table b-tree page
    page[header_at + 1..header_at + 3].copy_from_slice(&0u16.to_be_bytes()); // no freeblock
    page[header_at + 3..header_at + 5].copy_from_slice(&(cells.len() as u16).to_be_bytes());
    page[header_at + 5..header_at + 7].copy_from_slice(&(content_start as u16).to_be_bytes());
    page[header_at + 7] = 0; // fragmented free bytes
    for (i, p) in pointers.iter().enumerate() {
        let at = header_at + 8 + 2 * i;
        page[at..at + 2].copy_from_slice(&p.to_be_bytes());
    }
}

/// The bytes of the database file.
pub fn items_database() -> Vec<u8> {
    let mut file = vec![0u8; PAGE_SIZE * 2];
    let (page1, page2) = file.split_at_mut(PAGE_SIZE);
    // The database header.
    page1[..16].copy_from_slice(b"SQLite format 3\0");
    page1[16..18].copy_from_slice(&(PAGE_SIZE as u16).to_be_bytes());
    page1[18] = 1; // file format write version (legacy journal)
    page1[19] = 1; // read version
    page1[20] = 0; // reserved bytes per page
    page1[21] = 64; // maximum embedded payload fraction
    page1[22] = 32; // minimum embedded payload fraction
    page1[23] = 32; // leaf payload fraction
    page1[24..28].copy_from_slice(&1u32.to_be_bytes()); // file change counter
    page1[28..32].copy_from_slice(&2u32.to_be_bytes()); // size in pages
    page1[40..44].copy_from_slice(&1u32.to_be_bytes()); // schema cookie
    page1[44..48].copy_from_slice(&4u32.to_be_bytes()); // schema format number
    page1[56..60].copy_from_slice(&1u32.to_be_bytes()); // text encoding: UTF-8
    page1[92..96].copy_from_slice(&1u32.to_be_bytes()); // version-valid-for
    page1[96..100].copy_from_slice(&3_045_000u32.to_be_bytes()); // SQLite version that wrote
    let master = record(&[
        Column::Text("table"),
        Column::Text("items"),
        Column::Text("items"),
        Column::Int(2),
        Column::Text(ITEMS_SQL),
    ]);
    leaf_page(page1, 100, &[(1, master)]);
    let rows: Vec<(u64, Vec<u8>)> = ITEMS
        .iter()
        .enumerate()
        .map(|(i, name)| (i as u64 + 1, record(&[Column::Null, Column::Text(name)])))
        .collect();
    leaf_page(page2, 0, &rows);
    file
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_follow_the_format() {
        let enc = |v| {
            let mut o = Vec::new();
            varint(v, &mut o);
            o
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x81, 0x00]);
        assert_eq!(enc(16383), [0xff, 0x7f]);
        assert_eq!(enc(u64::MAX).len(), 9);
    }

    /// The file is read back by a real SQLite (Python's `sqlite3` module), which also runs an
    /// integrity check and changes it.
    #[test]
    fn a_real_sqlite_reads_checks_and_changes_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("app.db");
        std::fs::write(&db, items_database()).expect("write");
        let script = "import sqlite3,sys\n\
c=sqlite3.connect(sys.argv[1])\n\
print(c.execute('pragma integrity_check').fetchone()[0])\n\
print(','.join(r[0] for r in c.execute('select name from items order by id')))\n\
c.execute(\"insert into items(name) values ('delta')\"); c.commit()\n\
print(c.execute('select count(*) from items').fetchone()[0])\n";
        let out = match std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&db)
            .output()
        {
            Ok(o) => o,
            Err(e) => {
                if std::env::var("HINTCHECK_REQUIRE_ALL").is_ok_and(|v| v == "1") {
                    panic!("python3 is needed to check the SQLite file: {e}");
                }
                eprintln!("SKIPPED: python3 is not available to check the SQLite file ({e})");
                return;
            }
        };
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(text, "ok\nnotebook,desk lamp,coffee beans\n4\n");
    }
}
