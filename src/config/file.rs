//! The project config file, `.config/hintcheck.toml` or `hintcheck.toml`, kept in the
//! repository of the server being checked: the server command and environment, run settings
//! and argument overrides (the same `[server]` and `[run]` sections as a scenario), the
//! sandbox policy, what fails the run and where reports go. It is found with `--config`, then
//! `HINTCHECK_CONFIG`, then by looking in the working directory and its parents up to the
//! repository root; `--no-config` skips it. Relative paths in it are relative to the project
//! directory (the directory holding `.config/`, or the file's own directory). Unknown keys
//! are errors that name the key, the file and the line.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::options::{FailOptions, ReportOptions, RunOptions, SandboxOptions, ServerOptions};

/// The file names looked for, in order, in each directory.
pub const CANDIDATES: [&str; 2] = [".config/hintcheck.toml", "hintcheck.toml"];

/// Errors reading the config file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigFileError {
    /// The file could not be read.
    #[error("cannot read the config file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid config.
    #[error("invalid config file {}{}: {problem}", path.display(), problem.location())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        problem: Box<crate::text::toml::TomlProblem>,
    },
}

/// The config file's contents.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The server: `command`, `env`, `workspace`, `sqlite` (as in scenarios).
    #[serde(default)]
    pub server: ServerOptions,
    /// Run settings and `[run.args]` overrides (as in scenarios).
    #[serde(default)]
    pub run: RunOptions,
    /// What to install before the run (as in scenarios).
    #[serde(default)]
    pub setup: crate::fleet::setup::SetupSection,
    /// Sandbox policy.
    #[serde(default)]
    pub sandbox: SandboxOptions,
    /// What fails the run.
    #[serde(default)]
    pub fail: FailOptions,
    /// Where reports go.
    #[serde(default)]
    pub report: ReportOptions,
    /// The configurations run beside the default one (see [`super::variants`]).
    #[serde(default)]
    pub variants: Vec<super::variants::VariantSpec>,
    /// The file (absolute).
    #[serde(skip)]
    pub path: PathBuf,
    /// The project directory relative paths are resolved against.
    #[serde(skip)]
    pub base: PathBuf,
}

impl ConfigFile {
    /// Reads and validates a config file.
    pub fn load(path: &Path) -> Result<ConfigFile, ConfigFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut file: ConfigFile = toml::from_str(&text).map_err(|e| ConfigFileError::Invalid {
            path: path.to_path_buf(),
            problem: Box::new(crate::text::toml::TomlProblem::new(&text, &e)),
        })?;
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = abs.parent().map(Path::to_path_buf).unwrap_or_default();
        file.base = if dir.file_name().is_some_and(|n| n == ".config") {
            dir.parent().map(Path::to_path_buf).unwrap_or(dir)
        } else {
            dir
        };
        file.path = abs;
        Ok(file)
    }

    /// A path from the file, resolved against the project directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        self.base.join(p)
    }
}

/// The config file to use: `explicit` (from `--config`), else `HINTCHECK_CONFIG`, else the
/// first candidate found from `start` upwards, stopping at the directory that holds `.git`.
pub fn discover(explicit: Option<&Path>, start: &Path) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("HINTCHECK_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let mut dir = Some(start);
    while let Some(d) = dir {
        for c in CANDIDATES {
            let candidate = d.join(c);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
        if d.join(".git").exists() {
            break;
        }
        dir = d.parent();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_name_the_key_the_file_and_the_line() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("hintcheck.toml");
        std::fs::write(
            &path,
            "[server]\ncommand = [\"x\"]\n\n[fail]\nonn = \"warning\"\n",
        )
        .expect("write");
        let err = ConfigFile::load(&path).expect_err("unknown key");
        let text = err.to_string();
        assert!(text.contains("hintcheck.toml"), "{text}");
        assert!(text.contains("onn"), "{text}");
        assert!(
            text.contains("hintcheck.toml:5:1: unknown field `onn`"),
            "{text}"
        );
        assert!(text.contains("(did you mean `on`?)"), "{text}");
        assert!(text.contains("\n5 | onn = \"warning\"\n"), "{text}");
    }

    #[test]
    fn discovery_prefers_dot_config_and_stops_at_the_repository_root() {
        let dir = tempfile::tempdir().expect("tmp");
        let repo = dir.path().join("repo");
        let sub = repo.join("a/b");
        std::fs::create_dir_all(&sub).expect("mkdir");
        std::fs::create_dir_all(repo.join(".git")).expect("git");
        std::fs::write(dir.path().join("hintcheck.toml"), "").expect("outside");
        // Discovery defers to HINTCHECK_CONFIG; this test is about the search itself.
        if std::env::var_os("HINTCHECK_CONFIG").is_some() {
            return;
        }
        assert_eq!(discover(None, &sub), None, "stops at the repository root");
        std::fs::write(repo.join("hintcheck.toml"), "").expect("root");
        assert_eq!(discover(None, &sub), Some(repo.join("hintcheck.toml")));
        std::fs::create_dir_all(repo.join(".config")).expect("dot config");
        std::fs::write(repo.join(".config/hintcheck.toml"), "").expect("dot");
        assert_eq!(
            discover(None, &sub),
            Some(repo.join(".config/hintcheck.toml"))
        );
        let loaded = ConfigFile::load(&repo.join(".config/hintcheck.toml")).expect("load");
        assert_eq!(loaded.base, std::path::absolute(&repo).expect("abs"));
    }
}
