//! The sandbox's process tree as `/proc` shows it: the processes below a root pid (the
//! sandbox's init or the server), their live threads, their CPU time and whether any of them
//! is busy. The watchdog bounds the tree's memory with it; the observers decide from it when a
//! call's window may close.

/// A small `/proc` file (a thread's `stat`, `schedstat`, `syscall`, `wchan`, a task's
/// `children`, a timer's `fdinfo`) in two reads: `std::fs::read_to_string` asks for the size
/// first (procfs says 0) and then reads from a 32-byte probe up, five to eight system calls
/// where two do, and the settle wait reads hundreds of these per call on a busy tree.
pub fn read_proc(path: impl AsRef<std::path::Path>) -> std::io::Result<String> {
    read_proc_into(path, 4096)
}

/// A `/proc` file read into a buffer of `capacity` bytes to start with (see [`read_proc`]).
/// Bytes that are not UTF-8 (a thread may name itself anything, and its name is in its
/// `stat`) are replaced, not an error: a thread whose state could not be read would be a
/// thread the settle wait does not see.
pub fn read_proc_into(
    path: impl AsRef<std::path::Path>,
    capacity: usize,
) -> std::io::Result<String> {
    let mut bytes = Vec::with_capacity(capacity);
    std::io::Read::read_to_end(&mut std::fs::File::open(path)?, &mut bytes)?;
    Ok(String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

/// The state letter of a `/proc/…/stat` line (the field after the command's closing
/// parenthesis).
pub fn state_of(stat: &str) -> Option<&str> {
    stat.rsplit(')').next()?.split_whitespace().next()
}

/// Most processes looked at in one tree.
const MAX_PROCESSES: usize = 4096;

/// The processes below (and including) a root pid.
#[derive(Debug, Clone, Copy)]
pub struct ProcessTree {
    root: u32,
}

impl ProcessTree {
    /// The tree rooted at `root` (the server, or the sandbox's init).
    pub fn new(root: u32) -> Self {
        Self { root }
    }

    /// The root and every descendant, through `/proc/<pid>/task/<tid>/children`.
    pub fn pids(&self) -> Vec<u32> {
        let mut out = vec![self.root];
        let mut i = 0;
        while i < out.len() && out.len() < MAX_PROCESSES {
            let pid = out[i];
            if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                for t in tasks.flatten() {
                    if let Ok(children) = read_proc(t.path().join("children")) {
                        out.extend(
                            children
                                .split_whitespace()
                                .filter_map(|c| c.parse::<u32>().ok()),
                        );
                    }
                }
            }
            i += 1;
        }
        out.truncate(MAX_PROCESSES);
        out
    }

    /// Every task of every process of the tree, each with its process's place in
    /// [`ProcessTree::pids`] and its `/proc/<pid>/task/<tid>` directory: the one walk the
    /// readings below (and the proof of quiet's) share.
    pub fn task_dirs(&self) -> Vec<TaskDir> {
        let mut out = Vec::new();
        for (index, pid) in self.pids().into_iter().enumerate() {
            let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in entries.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                out.push(TaskDir {
                    index,
                    pid,
                    tid,
                    dir: t.path(),
                });
            }
        }
        out
    }

    /// Every live thread (task id) of every process of the tree; zombies are dead.
    pub fn tasks(&self) -> Vec<u32> {
        self.task_dirs()
            .into_iter()
            .filter(TaskDir::live)
            .map(|t| t.tid)
            .collect()
    }

    /// [`ProcessTree::tasks`] and [`ProcessTree::runtimes`] in one walk of the tree.
    pub fn tasks_and_runtimes(
        &self,
        skip: usize,
    ) -> (Vec<u32>, std::collections::HashMap<u32, u64>) {
        let mut tasks = Vec::new();
        let mut runtimes = std::collections::HashMap::new();
        for t in self.task_dirs() {
            if t.live() {
                tasks.push(t.tid);
            }
            if let Some(ns) = t.runtime().filter(|_| !t.skipped(skip)) {
                runtimes.insert(t.tid, ns);
            }
        }
        (tasks, runtimes)
    }

    /// CPU time (ns) of every live thread of the tree, from `/proc/<pid>/task/<tid>/schedstat`;
    /// the threads of the first `skip` processes (the sandbox's init and PID 1, the server's
    /// main thread) are left out: they are not background workers.
    pub fn runtimes(&self, skip: usize) -> std::collections::HashMap<u32, u64> {
        self.task_dirs()
            .into_iter()
            .filter(|t| !t.skipped(skip))
            .filter_map(|t| Some((t.tid, t.runtime()?)))
            .collect()
    }

    /// Whether any thread of the tree is running or in uninterruptible sleep.
    pub fn busy(&self) -> bool {
        self.task_dirs().iter().any(|t| {
            read_proc(t.dir.join("stat")).is_ok_and(|st| matches!(state_of(&st), Some("R" | "D")))
        })
    }
}

/// One task of a [`ProcessTree`] (see [`ProcessTree::task_dirs`]).
#[derive(Debug, Clone)]
pub struct TaskDir {
    /// Its process's place in [`ProcessTree::pids`].
    pub index: usize,
    /// Its process.
    pub pid: u32,
    /// The task (thread) id.
    pub tid: u32,
    /// `/proc/<pid>/task/<tid>`.
    pub dir: std::path::PathBuf,
}

impl TaskDir {
    /// Whether it is alive (its `stat` reads, and says neither zombie nor dead).
    fn live(&self) -> bool {
        read_proc(self.dir.join("stat"))
            .is_ok_and(|st| !matches!(state_of(&st), Some("Z" | "X") | None))
    }

    /// Its CPU time in nanoseconds (`schedstat`).
    pub fn runtime(&self) -> Option<u64> {
        read_proc(self.dir.join("schedstat"))
            .ok()?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// Whether it is the main thread of one of the first `skip` processes.
    fn skipped(&self, skip: usize) -> bool {
        self.index < skip && self.tid == self.pid
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A child process whose thread names itself in bytes that are not UTF-8, once it has;
    /// `None` (the test skips, or fails under HINTCHECK_REQUIRE_ALL) without python3.
    pub(crate) fn child_named_in_other_bytes() -> Option<std::process::Child> {
        use std::io::BufRead;
        let script = "import ctypes,sys\nctypes.CDLL(None).prctl(15, b'\\xff\\xfeworker', 0, 0, 0)\nprint('named',flush=True)\nsys.stdin.read()";
        let Ok(mut named) = std::process::Command::new("python3")
            .args(["-c", script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
        else {
            assert!(
                !std::env::var("HINTCHECK_REQUIRE_ALL").is_ok_and(|v| v == "1"),
                "required test skipped: python3 is missing"
            );
            eprintln!("SKIPPED: python3 is missing");
            return None;
        };
        let mut line = String::new();
        std::io::BufReader::new(named.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read");
        assert_eq!(line.trim(), "named");
        Some(named)
    }

    #[test]
    fn a_thread_named_in_bytes_that_are_not_utf8_is_still_seen() {
        let Some(mut named) = child_named_in_other_bytes() else {
            return;
        };
        let stat = read_proc(format!("/proc/{}/stat", named.id())).expect("stat");
        let tasks = ProcessTree::new(named.id()).tasks();
        let _ = named.kill();
        let _ = named.wait();
        assert!(stat.contains("worker)"), "{stat}");
        assert_eq!(tasks, [named.id()]);
    }

    #[test]
    fn one_walk_sees_the_tasks_and_runtimes_two_walks_see() {
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & sleep 5 & wait"])
            .spawn()
            .expect("sh");
        let tree = ProcessTree::new(shell.id());
        // Until both children exist.
        for _ in 0..200 {
            if tree.pids().len() == 3 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (mut tasks, runtimes) = tree.tasks_and_runtimes(1);
        let mut apart = tree.tasks();
        tasks.sort_unstable();
        apart.sort_unstable();
        assert_eq!(tasks.len(), 3, "{tasks:?}");
        assert_eq!(tasks, apart);
        // The first process's main thread is skipped; the sleeps have not run since.
        let mut timed: Vec<u32> = runtimes.keys().copied().collect();
        timed.sort_unstable();
        let mut expected: Vec<u32> = tree.runtimes(1).keys().copied().collect();
        expected.sort_unstable();
        assert_eq!(timed, expected);
        assert!(!timed.contains(&shell.id()));
        for pid in tree.pids().into_iter().skip(1) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        let _ = shell.kill();
        let _ = shell.wait();
    }
}
