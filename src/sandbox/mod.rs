//! The launch stage: scratch directories ([`scratch`]), starting and ending the server
//! ([`process`]), and [`SandboxStatus`], the statement every report carries of what was
//! enforced. In this mode the server runs as an ordinary process in scratch directories: it
//! is not isolated from the host; the namespace sandbox plugs in here.

pub mod process;
pub mod scratch;

use std::path::PathBuf;

use serde::Serialize;

/// Errors of the launch stage.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The scratch directories could not be created.
    #[error("cannot create the scratch directories")]
    Scratch {
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The seed directory could not be copied.
    #[error("cannot copy the workspace seed {}", path.display())]
    Seed {
        /// The seed directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The server program does not exist.
    #[error("server command {program:?} not found: {detail}")]
    NotFound {
        /// The program as given.
        program: String,
        /// Why.
        detail: String,
    },
    /// Starting the server failed.
    #[error("cannot start the server {program}")]
    Spawn {
        /// The resolved program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// What isolation was in force, for every report.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxStatus {
    /// `none`, or the sandbox level.
    pub level: String,
    /// One sentence for humans.
    pub summary: String,
    /// What was enforced.
    pub enforced: Vec<String>,
    /// What was not enforced.
    pub not_enforced: Vec<String>,
}

impl SandboxStatus {
    /// The status of the scratch-directory mode.
    pub fn scratch_only(subreaper: bool) -> SandboxStatus {
        let mut enforced = vec![
            "scratch working directory, HOME and TMPDIR (removed after the run)".to_string(),
            "clean environment (only PATH, locale and --env variables are passed)".into(),
            "own process group; stragglers are swept at the end".into(),
        ];
        if subreaper {
            enforced.push("orphaned descendants are reparented to hintcheck and killed".into());
        }
        SandboxStatus {
            level: "none".into(),
            summary: "no sandbox: the server ran as an ordinary process in scratch directories and could reach the whole host"
                .into(),
            enforced,
            not_enforced: vec![
                "filesystem isolation (writes outside the scratch directories reach the host and are not observed)".into(),
                "network isolation (network activity is neither blocked nor observed)".into(),
                "resource limits".into(),
            ],
        }
    }
}
