//! A cgroup v2 per run, as root: the sandbox's init moves itself in before it forks, so the
//! server and everything it starts are inside; `pids.max` and `memory.max` bound them where
//! the controllers are available, and `cgroup.kill` ends them all at teardown. Hosts differ
//! (pure v2 on Ubuntu runners, hybrid v1/v2 with no v2 controllers elsewhere): what was
//! available is reported, nothing here is fatal.

use std::path::{Path, PathBuf};

/// A run's cgroup.
#[derive(Debug)]
pub struct RunCgroup {
    path: PathBuf,
    /// What the cgroup enforces, for the report.
    pub enforces: Vec<String>,
}

/// The directory under the cgroup v2 root that holds the runs' cgroups. Its name and theirs
/// show in the host's cgroup tree, which a server without a cgroup of its own can list: they
/// say nothing of hintcheck.
const PARENT: &str = "jobs";

/// Removes the empty cgroups of runs whose hintcheck is gone (killed before it could remove
/// its own): `job-<pid>-…` where no process `<pid>` exists and nothing runs inside.
fn remove_stale(parent: &Path) {
    for e in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("job-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let empty = std::fs::read_to_string(e.path().join("cgroup.procs"))
            .is_ok_and(|p| p.trim().is_empty());
        if empty && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

/// Where the cgroup v2 hierarchy is mounted.
fn cgroup2_mount() -> Option<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        if right.split_whitespace().next() != Some("cgroup2") {
            return None;
        }
        left.split_whitespace().nth(4).map(PathBuf::from)
    })
}

impl RunCgroup {
    /// Creates `<cgroup2>/jobs/<name>` with the limits the host supports.
    pub fn create(name: &str, max_pids: u64, max_memory: u64) -> Result<RunCgroup, String> {
        let mount = cgroup2_mount().ok_or("no cgroup v2 hierarchy is mounted")?;
        let parent = mount.join(PARENT);
        std::fs::create_dir_all(&parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        remove_stale(&parent);
        let available =
            std::fs::read_to_string(mount.join("cgroup.controllers")).unwrap_or_default();
        let wanted: Vec<&str> = ["pids", "memory"]
            .into_iter()
            .filter(|c| available.split_whitespace().any(|a| a == *c))
            .collect();
        let mut enforces = Vec::new();
        // Controllers must be enabled from the top down; the root is exempt from the
        // no-internal-processes rule and our own parent directory holds no processes.
        for dir in [&mount, &parent] {
            for c in &wanted {
                let _ = std::fs::write(dir.join("cgroup.subtree_control"), format!("+{c}"));
            }
        }
        let path = parent.join(name);
        std::fs::create_dir(&path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut cg = RunCgroup {
            path,
            enforces: Vec::new(),
        };
        if cg.path.join("pids.max").exists()
            && std::fs::write(cg.path.join("pids.max"), max_pids.to_string()).is_ok()
        {
            enforces.push(format!("pids.max {max_pids}"));
        }
        if cg.path.join("memory.max").exists()
            && std::fs::write(cg.path.join("memory.max"), max_memory.to_string()).is_ok()
        {
            enforces.push(format!("memory.max {max_memory}"));
            let _ = std::fs::write(cg.path.join("memory.swap.max"), "0");
        }
        if cg.path.join("cgroup.kill").exists() {
            enforces.push("cgroup.kill at teardown".into());
        }
        cg.enforces = enforces;
        Ok(cg)
    }

    /// The cgroup's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Kills every process in the cgroup and removes it.
    pub fn kill_and_remove(&self) {
        let _ = std::fs::write(self.path.join("cgroup.kill"), "1");
        for _ in 0..100 {
            if std::fs::remove_dir(&self.path).is_ok() || !self.path.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        self.kill_and_remove();
    }
}
