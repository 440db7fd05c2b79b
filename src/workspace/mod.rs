//! The seeded world a server works on: the workspace's files and their git repository
//! ([`seed`]; what a repository holds is read back by [`repository`]), small valid documents of the common types ([`documents`]) and the SQLite
//! database a scenario can ask for ([`sqlite`]), all in the run's words ([`vocab`]: the
//! seed's file names and contents and the values synthesis makes up). The explorer reads the
//! same facts (the documents' cells and blocks, the words) to make arguments that find what is
//! there.

pub mod canary;
pub mod documents;
pub mod repository;
mod seed;
pub mod sqlite;
pub mod vocab;

pub use seed::SeedError;

/// Opens `path` for reading if it is a regular file, never through a symlink and never
/// blocking: the server may have swapped a file for a FIFO or a link since it was listed.
pub(crate) fn open_regular(path: &std::path::Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// For tests that need git: whether it is missing (then the test skips, saying so, or fails
/// when CI sets HINTCHECK_REQUIRE_ALL=1).
#[cfg(test)]
pub(crate) fn git_missing() -> bool {
    let missing = std::process::Command::new("git")
        .arg("--version")
        .output()
        .is_err();
    if missing {
        assert!(
            !std::env::var("HINTCHECK_REQUIRE_ALL").is_ok_and(|v| v == "1"),
            "required test skipped: git is not installed"
        );
        eprintln!("SKIPPED: git is not installed");
    }
    missing
}
