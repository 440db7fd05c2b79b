//! The demo carried by the binary: the demo scenario (a notes server whose tools include
//! honest ones and liars) and its workspace are built into hintcheck, and the fake server that
//! plays them is the binary's hidden `fake-server` subcommand, so `hintcheck demo` runs from a
//! copy of the binary alone, anywhere, exactly as `hintcheck verify --scenario scenarios/demo`
//! does from a checkout.

use std::path::{Path, PathBuf};

use include_dir::{Dir, include_dir};

/// `scenarios/demo` as it was when the binary was built.
static DEMO: Dir<'static> = include_dir!("$CARGO_MANIFEST_DIR/scenarios/demo");

/// Why the demo could not be laid out.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The temporary directory or a file in it could not be written.
    #[error("could not lay out the demo scenario in {dir}: {source}")]
    Write {
        /// Where it was being written.
        dir: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// The demo scenario written out in a fresh temporary directory (removed when dropped).
#[derive(Debug)]
pub struct DemoScenario {
    dir: tempfile::TempDir,
}

impl DemoScenario {
    /// Writes the scenario file and its workspace into a new directory under the system's
    /// temporary directory.
    pub fn lay_out() -> Result<DemoScenario, DemoError> {
        let temp = std::env::temp_dir();
        let dir = tempfile::Builder::new()
            .prefix("hintcheck-demo-")
            .tempdir_in(&temp)
            .map_err(|source| DemoError::Write { dir: temp, source })?;
        DEMO.extract(dir.path())
            .map_err(|source| DemoError::Write {
                dir: dir.path().to_path_buf(),
                source,
            })?;
        Ok(DemoScenario { dir })
    }

    /// The directory that holds `scenario.toml`, what `--scenario` is given.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `scenarios/demo` is carried, byte for byte (a file added to the demo
    /// after the binary was built would be missing: the build tracks the directory).
    #[test]
    fn the_carried_demo_is_the_scenario_directory() {
        let laid = DemoScenario::lay_out().expect("laid out");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/demo");
        let files = |root: &Path| -> Vec<(PathBuf, Vec<u8>)> {
            let mut out = Vec::new();
            let mut stack = vec![root.to_path_buf()];
            while let Some(d) = stack.pop() {
                for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
                    let p = e.path();
                    if p.is_dir() {
                        stack.push(p);
                    } else {
                        let rel = p.strip_prefix(root).expect("inside").to_path_buf();
                        out.push((rel, std::fs::read(&p).expect("read")));
                    }
                }
            }
            out.sort();
            out
        };
        let carried = files(laid.path());
        assert!(carried.len() >= 7, "the demo's files: {carried:?}");
        assert_eq!(carried, files(&source));
        let kept = laid.path().to_path_buf();
        drop(laid);
        assert!(!kept.exists(), "the laid-out demo is removed when dropped");
    }
}
