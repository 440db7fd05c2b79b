//! Top-level errors of the hintcheck command and their exit codes. A misbehaving server is
//! never one of these: it is findings in a report. These are our own failures and the
//! user's input errors.

use std::path::PathBuf;

use crate::config::ConfigError;
use crate::report::exit_code;

/// What can stop the hintcheck command itself.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command line or a scenario file is wrong.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The async runtime could not be built.
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    /// The report could not be written where asked.
    #[error("cannot write {what} to {}", path.display())]
    Output {
        /// Report or transcript.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The documented exit code of this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Config(ConfigError::Setup(
                crate::fleet::setup::SetupError::Invalid(_)
                | crate::fleet::setup::SetupError::BadTimeout(_),
            )) => exit_code::USAGE,
            Error::Config(ConfigError::Setup(_)) => exit_code::HARNESS,
            Error::Config(_) => exit_code::USAGE,
            Error::Runtime(_) | Error::Output { .. } => exit_code::HARNESS,
        }
    }
}
