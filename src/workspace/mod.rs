//! The seeded world a server works on: the workspace's files and their git repository
//! ([`seed`]), small valid documents of the common types ([`documents`]) and the SQLite
//! database a scenario can ask for ([`sqlite`]). The explorer reads the same facts (the
//! documents' cells and blocks) to make arguments that find what is there.

pub mod documents;
mod seed;
pub mod sqlite;

pub use seed::SeedError;
