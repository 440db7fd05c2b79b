//! Note vaults: servers that keep notes in vaults (a directory of Markdown files the server
//! knows by name). A vault is both a thing its tools take by name (from a listing) and the
//! context a session selects ("Please select a vault first").

use super::Pack;

/// The pack.
pub const PACK: Pack = Pack {
    name: "notes",
    about: "note vaults: a vault is named by listings and selected by sessions",
    rules: &[],
    choose: None,
    notation: None,
    entities: &["vault"],
    contexts: &["vault"],
};
