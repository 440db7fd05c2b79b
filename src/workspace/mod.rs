//! The seeded world a server works on: the workspace's files and their git repository
//! ([`seed`]), small valid documents of the common types ([`documents`]) and the SQLite
//! database a scenario can ask for ([`sqlite`]), all in the run's words ([`vocab`]: the
//! seed's file names and contents and the values synthesis makes up). The explorer reads the
//! same facts (the documents' cells and blocks, the words) to make arguments that find what is
//! there.

pub mod documents;
mod seed;
pub mod sqlite;
pub mod vocab;

pub use seed::SeedError;
