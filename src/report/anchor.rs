//! Where SARIF results point. GitHub code scanning rejects results without a physical
//! location, and MCP tools have no line of their own, so each tool is anchored on the first
//! line of a user-named file (`--anchor`: the server's source or manifest) that quotes the
//! tool's name, and otherwise on its line in `hintcheck-tools.json`, an inventory of the tool
//! definitions (one tool per line) written next to the SARIF file. Locating reads files, so it
//! happens before rendering; the SARIF renderer only formats the [`Anchors`] it is given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::Report;

/// The default inventory file name.
pub const INVENTORY_FILE: &str = "hintcheck-tools.json";

/// One location in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// The file, relative to the source root with `/` separators, or an absolute `file://`
    /// URI when it lies outside the root.
    pub uri: String,
    /// Whether `uri` is relative to the source root (`%SRCROOT%`).
    pub relative: bool,
    /// 1-based line.
    pub line: usize,
    /// 1-based first column (Unicode code points).
    pub start_column: usize,
    /// 1-based column after the last one.
    pub end_column: usize,
    /// Whether it points into the tool inventory.
    pub in_inventory: bool,
}

/// The anchors of one run.
#[derive(Debug, Clone)]
pub struct Anchors {
    /// The source root as a `file://` URI ending in `/`.
    pub source_root_uri: String,
    /// Per tool name.
    pub tools: BTreeMap<String, Anchor>,
    /// For findings about the server rather than one tool.
    pub server: Anchor,
    /// The inventory's text when no file holds it (SARIF on stdout without `--inventory`):
    /// the SARIF then carries it, so that its locations resolve.
    pub embedded_inventory: Option<String>,
    /// Anchor files no result points at, each with why: it could not be read, or it quotes
    /// none of the tools it could have anchored (none when the server listed no tool).
    pub unused_files: Vec<(PathBuf, &'static str)>,
}

/// The tool inventory: its text and the line of each tool (and of the server entry).
#[derive(Debug, Clone)]
pub struct Inventory {
    /// The JSON text, one tool per line.
    pub text: String,
    /// 1-based line and length of each tool's entry.
    pub tool_lines: BTreeMap<String, (usize, usize)>,
    /// 1-based line and length of the server entry.
    pub server_line: (usize, usize),
}

/// Builds the inventory of a report's tools.
pub fn inventory(report: &Report) -> Inventory {
    let server = report
        .server
        .identity
        .as_ref()
        .and_then(|i| i.server_info.clone())
        .unwrap_or(Value::Null);
    let header = [
        "{".to_string(),
        "\"schema_version\": 1,".to_string(),
        format!(
            "\"generator\": {},",
            json!(format!("hintcheck {}", report.hintcheck_version))
        ),
        format!("\"server\": {},", {
            let mut server = json!({"serverInfo": server, "command": report.server.command});
            crate::text::escape::json_strings(&mut server);
            server
        }),
        format!(
            "\"tools_sha256\": {},",
            json!(report.server.tools_sha256.as_deref())
        ),
        "\"tools\": [".to_string(),
    ];
    let mut lines: Vec<String> = header.to_vec();
    let server_line = (4, lines[3].chars().count());
    let mut tool_lines = BTreeMap::new();
    let count = report.tools.len();
    for (i, t) in report.tools.iter().enumerate() {
        let mut entry = json!({
            "name": t.name,
            "definition_sha256": t.definition_sha256,
            "definition": t.definition,
        });
        // A viewer of the inventory (GitHub shows it beside the SARIF results) gets no raw
        // control or bidirectional character.
        crate::text::escape::json_strings(&mut entry);
        let mut line = serde_json::to_string(&entry).unwrap_or_default();
        if i + 1 < count {
            line.push(',');
        }
        tool_lines
            .entry(t.name.clone())
            .or_insert((lines.len() + 1, line.chars().count()));
        lines.push(line);
    }
    lines.push("]".into());
    lines.push("}".into());
    let mut text = lines.join("\n");
    text.push('\n');
    Inventory {
        text,
        tool_lines,
        server_line,
    }
}

/// Where the inventory goes: `explicit`, else next to the SARIF file, else the working
/// directory.
pub fn inventory_path(explicit: Option<&Path>, sarif: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    sarif
        .and_then(Path::parent)
        .map(|d| d.join(INVENTORY_FILE))
        .unwrap_or_else(|| PathBuf::from(INVENTORY_FILE))
}

/// `path` as a SARIF artifact URI: relative to `root` when inside it, else absolute.
pub fn artifact_uri(path: &Path, root: &Path) -> (String, bool) {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let root = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
    match abs.strip_prefix(&root) {
        Ok(rel) => {
            let parts: Vec<String> = rel
                .components()
                .map(|c| percent_encode(&c.as_os_str().to_string_lossy()))
                .collect();
            (parts.join("/"), true)
        }
        Err(_) => (file_uri(&abs), false),
    }
}

/// A `file://` URI of an absolute path.
pub fn file_uri(abs: &Path) -> String {
    let parts: Vec<String> = abs
        .components()
        .filter(|c| !matches!(c, std::path::Component::RootDir))
        .map(|c| percent_encode(&c.as_os_str().to_string_lossy()))
        .collect();
    format!("file:///{}", parts.join("/"))
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The first line of `text` that quotes `name` (in `"`, `'` or `` ` ``): its 1-based number
/// and the columns of the quoted literal.
pub fn find_quoted(text: &str, name: &str) -> Option<(usize, usize, usize)> {
    for (i, line) in text.lines().enumerate() {
        for q in ['"', '\'', '`'] {
            let needle = format!("{q}{name}{q}");
            if let Some(pos) = line.find(&needle) {
                let start = line[..pos].chars().count() + 1;
                return Some((i + 1, start, start + needle.chars().count()));
            }
        }
    }
    None
}

/// Anchors every tool of the report: on the first anchor file that quotes its name, else on
/// its line of the inventory written at `inventory_at`. Unreadable anchor files are skipped
/// (their names were checked when the run was configured).
pub fn locate(
    report: &Report,
    anchor_files: &[PathBuf],
    inventory: &Inventory,
    inventory_at: &Path,
    source_root: &Path,
    inventory_written: bool,
) -> Anchors {
    let files: Vec<(PathBuf, String)> = anchor_files
        .iter()
        .filter_map(|p| Some((p.clone(), std::fs::read_to_string(p).ok()?)))
        .collect();
    let (inventory_uri, inventory_relative) = artifact_uri(inventory_at, source_root);
    let in_inventory = |(line, len): (usize, usize)| Anchor {
        uri: inventory_uri.clone(),
        relative: inventory_relative,
        line,
        start_column: 1,
        end_column: len + 1,
        in_inventory: true,
    };
    let mut tools = BTreeMap::new();
    for t in &report.tools {
        let found = files.iter().find_map(|(path, text)| {
            let (line, start, end) = find_quoted(text, &t.name)?;
            let (uri, relative) = artifact_uri(path, source_root);
            Some(Anchor {
                uri,
                relative,
                line,
                start_column: start,
                end_column: end,
                in_inventory: false,
            })
        });
        let anchor = found.unwrap_or_else(|| {
            in_inventory(inventory.tool_lines.get(&t.name).copied().unwrap_or((1, 1)))
        });
        tools.insert(t.name.clone(), anchor);
    }
    let server = match files.first() {
        Some((path, text)) => {
            let (uri, relative) = artifact_uri(path, source_root);
            Anchor {
                uri,
                relative,
                line: 1,
                start_column: 1,
                end_column: text.lines().next().map(|l| l.chars().count()).unwrap_or(0) + 1,
                in_inventory: false,
            }
        }
        None => in_inventory(inventory.server_line),
    };
    let root = std::path::absolute(source_root).unwrap_or_else(|_| source_root.to_path_buf());
    let mut source_root_uri = file_uri(&root);
    if !source_root_uri.ends_with('/') {
        source_root_uri.push('/');
    }
    let used = server.in_inventory || tools.values().any(|a| a.in_inventory);
    let unused_files = anchor_files
        .iter()
        .filter_map(|p| {
            let (uri, _) = artifact_uri(p, source_root);
            if tools.is_empty() || tools.values().any(|a| a.uri == uri) {
                None
            } else if files.iter().any(|(f, _)| f == p) {
                Some((
                    p.clone(),
                    "quotes none of the server's tools (or only tools an earlier --anchor quotes)",
                ))
            } else {
                Some((p.clone(), "could not be read"))
            }
        })
        .collect();
    Anchors {
        source_root_uri,
        tools,
        server,
        embedded_inventory: (used && !inventory_written).then(|| inventory.text.clone()),
        unused_files,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_names_are_found_with_their_columns() {
        let src = "import x\nserver.tool('read_note', ...)\nserver.tool(\"read_notes\")\n";
        assert_eq!(find_quoted(src, "read_note"), Some((2, 13, 24)));
        assert_eq!(find_quoted(src, "read_notes"), Some((3, 13, 25)));
        assert_eq!(find_quoted(src, "missing"), None);
    }

    #[test]
    fn uris_are_relative_inside_the_root_and_encoded() {
        let (uri, rel) = artifact_uri(Path::new("/repo/src/my server.py"), Path::new("/repo"));
        assert_eq!((uri.as_str(), rel), ("src/my%20server.py", true));
        let (uri, rel) = artifact_uri(Path::new("/elsewhere/x.json"), Path::new("/repo"));
        assert_eq!((uri.as_str(), rel), ("file:///elsewhere/x.json", false));
    }
}
