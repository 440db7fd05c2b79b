//! The resource watchdog: limits that hold without a memory cgroup (unprivileged runs, hosts
//! without the controller). A thread samples the server's process tree four times a second:
//! its memory (proportional anonymous and shared pages from `smaps_rollup`, plus memfd files
//! it holds open without mapping them) and, once a second, the size of the scratch
//! directories (a bounded walk). Past a limit it kills the whole tree (the sandbox's init's
//! process group: PID 1 takes the pid namespace with it) and says why through a
//! [`LimitFlag`]; the run then ends with a finding instead of letting the host run out.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::tree::ProcessTree;

/// Why the watchdog ended the server, once it did.
pub type LimitFlag = Arc<Mutex<Option<String>>>;

/// How often the tree's memory is sampled.
const TICK: Duration = Duration::from_millis(250);
/// Every how many ticks the scratch directories are measured.
const DISK_EVERY: u32 = 4;
/// Most entries counted per disk measurement (beyond, the count so far stands).
const MAX_DISK_ENTRIES: usize = 200_000;

/// The limits the watchdog enforces.
#[derive(Debug, Clone, Copy)]
pub struct WatchLimits {
    /// Memory of the whole process tree, in bytes.
    pub memory_bytes: u64,
    /// Bytes in the scratch directories.
    pub disk_bytes: u64,
}

/// A running watchdog; dropping it stops the thread.
pub struct Watchdog {
    stop: Arc<AtomicBool>,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Starts watching the tree rooted at `root` (the sandbox's init outside, or the server) and
/// the scratch directories `scratch`.
pub fn start(root: u32, scratch: Vec<PathBuf>, limits: WatchLimits, flag: LimitFlag) -> Watchdog {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let _ = std::thread::Builder::new()
        .name("watchdog".into())
        .spawn(move || run(root, &scratch, limits, &flag, &s));
    Watchdog { stop }
}

fn run(root: u32, scratch: &[PathBuf], limits: WatchLimits, flag: &LimitFlag, stop: &AtomicBool) {
    let tree = ProcessTree::new(root);
    let mut tick = 0u32;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(TICK);
        if stop.load(Ordering::SeqCst) || !std::path::Path::new(&format!("/proc/{root}")).exists() {
            return;
        }
        let memory = tree_memory(&tree);
        let mut why = (memory > limits.memory_bytes).then(|| {
            format!(
                "the server's processes used {} of memory, over the limit of {} (--memory-limit and a quarter)",
                mib(memory),
                mib(limits.memory_bytes)
            )
        });
        tick += 1;
        if why.is_none() && tick % DISK_EVERY == 0 {
            let disk = disk_usage(scratch);
            if disk > limits.disk_bytes {
                why = Some(format!(
                    "the server wrote {} into its scratch directories, over the limit of {} (--disk-limit)",
                    mib(disk),
                    mib(limits.disk_bytes)
                ));
            }
        }
        if let Some(why) = why {
            *flag.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
            if let Some(pid) = rustix::process::Pid::from_raw(root as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            return;
        }
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// The memory the tree holds: per process the proportional share of its anonymous and shared
/// pages (`Pss_Anon`, `Pss_Shmem`), plus the size of each memfd file held open (counted once,
/// whoever holds it): a memfd written with `write` and never mapped is in no process's pages.
pub fn tree_memory(tree: &ProcessTree) -> u64 {
    let mut total = 0u64;
    let mut memfds: HashSet<(u64, u64)> = HashSet::new();
    for pid in tree.pids() {
        total += process_memory(pid);
        for fd in std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let is_memfd = std::fs::read_link(fd.path())
                .is_ok_and(|t| t.to_string_lossy().starts_with("/memfd:"));
            if !is_memfd {
                continue;
            }
            if let Ok(st) = rustix::fs::stat(fd.path()) {
                if memfds.insert(file_id(&st)) {
                    total += st.st_size.max(0) as u64;
                }
            }
        }
    }
    total
}

/// (device, inode) of a file (their integer types differ between architectures).
#[allow(clippy::unnecessary_cast)]
fn file_id(st: &rustix::fs::Stat) -> (u64, u64) {
    (st.st_dev as u64, st.st_ino as u64)
}

/// One process's proportional anonymous and shared memory, in bytes.
fn process_memory(pid: u32) -> u64 {
    let field = |text: &str, names: &[&str]| -> u64 {
        text.lines()
            .filter(|l| names.iter().any(|n| l.starts_with(n)))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum::<u64>()
            * 1024
    };
    if let Ok(rollup) = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")) {
        return field(&rollup, &["Pss_Anon:", "Pss_Shmem:"]);
    }
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .map(|s| field(&s, &["RssAnon:", "RssShmem:"]))
        .unwrap_or(0)
}

/// Bytes held by the files under `dirs` (a walk that never follows symlinks, bounded).
pub fn disk_usage(dirs: &[PathBuf]) -> u64 {
    let mut total = 0u64;
    let mut entries = 0usize;
    let mut todo: Vec<PathBuf> = dirs.to_vec();
    while let Some(dir) = todo.pop() {
        let Ok(read) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in read.flatten() {
            entries += 1;
            if entries > MAX_DISK_ENTRIES {
                return total;
            }
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            if meta.is_dir() {
                todo.push(e.path());
            } else {
                use std::os::unix::fs::MetadataExt;
                total += meta.blocks() * 512;
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_of_our_own_tree_and_the_size_of_a_directory_are_measured() {
        let me = ProcessTree::new(std::process::id());
        assert!(tree_memory(&me) > 0);
        let t = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(t.path().join("sub")).expect("mkdir");
        std::fs::write(t.path().join("sub/data.bin"), vec![7u8; 256 * 1024]).expect("write");
        std::os::unix::fs::symlink("/usr", t.path().join("elsewhere")).expect("symlink");
        let used = disk_usage(&[t.path().to_path_buf()]);
        assert!((256 * 1024..4 * 1024 * 1024).contains(&used), "{used}");
    }

    #[test]
    fn a_tree_over_its_limit_is_killed_and_the_reason_kept() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("sleep");
        let flag: LimitFlag = Arc::default();
        let _dog = start(
            child.id(),
            Vec::new(),
            WatchLimits {
                memory_bytes: 0,
                disk_bytes: u64::MAX,
            },
            flag.clone(),
        );
        let status = child.wait().expect("wait");
        assert!(!status.success(), "killed");
        let why = flag.lock().expect("flag").clone().expect("a reason");
        assert!(why.contains("--memory-limit"), "{why}");
    }
}
