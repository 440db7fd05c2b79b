//! The sandbox's process tree as `/proc` shows it: the processes below a root pid (the
//! sandbox's init or the server), their live threads, their CPU time and whether any of them
//! is busy. The watchdog bounds the tree's memory with it; the observers decide from it when a
//! call's window may close.

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

    /// The root pid.
    pub fn root(&self) -> u32 {
        self.root
    }

    /// The root and every descendant, through `/proc/<pid>/task/<tid>/children`.
    pub fn pids(&self) -> Vec<u32> {
        let mut out = vec![self.root];
        let mut i = 0;
        while i < out.len() && out.len() < MAX_PROCESSES {
            let pid = out[i];
            if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
                for t in tasks.flatten() {
                    if let Ok(children) = std::fs::read_to_string(t.path().join("children")) {
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

    /// Every live thread (task id) of every process of the tree; zombies are dead.
    pub fn tasks(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for pid in self.pids() {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                let state = std::fs::read_to_string(t.path().join("stat"))
                    .ok()
                    .and_then(|st| {
                        st.rsplit(')')
                            .next()
                            .and_then(|r| r.split_whitespace().next())
                            .map(str::to_string)
                    });
                if !matches!(state.as_deref(), Some("Z") | Some("X") | None) {
                    out.push(tid);
                }
            }
        }
        out
    }

    /// CPU time (ns) of every live thread of the tree, from `/proc/<pid>/task/<tid>/schedstat`;
    /// the threads of the first `skip` processes (the sandbox's init and PID 1, the server's
    /// main thread) are left out: they are not background workers.
    pub fn runtimes(&self, skip: usize) -> std::collections::HashMap<u32, u64> {
        let pids = self.pids();
        let mut out = std::collections::HashMap::new();
        for (i, pid) in pids.iter().enumerate() {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                let Some(tid) = t.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                if i < skip && tid == *pid {
                    continue;
                }
                if let Some(ns) = std::fs::read_to_string(t.path().join("schedstat"))
                    .ok()
                    .and_then(|s| {
                        s.split_whitespace()
                            .next()
                            .and_then(|v| v.parse::<u64>().ok())
                    })
                {
                    out.insert(tid, ns);
                }
            }
        }
        out
    }

    /// Whether any thread of the tree is running or in uninterruptible sleep.
    pub fn busy(&self) -> bool {
        for pid in self.pids() {
            let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for t in tasks.flatten() {
                if let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) {
                    let state = stat
                        .rsplit(')')
                        .next()
                        .and_then(|r| r.split_whitespace().next());
                    if matches!(state, Some("R") | Some("D")) {
                        return true;
                    }
                }
            }
        }
        false
    }
}
