//! When a call is over: the settle period after a response ends as soon as the server's
//! process tree is proven quiet ([`crate::observe::quiet`]: every thread waits for an outside
//! event or until past the window), else once the tree has been idle (no thread running or in
//! uninterruptible sleep, and no process left that the call started) for a quiet interval,
//! and at the latest after a maximum. A helper that the call started keeps the window open
//! until it exits, so its late writes stay with the call, unless it can only be woken by
//! someone else: it waits for input on a pipe (a persistent helper such as `git cat-file
//! --batch` that only acts when the idle server writes to it) or on a futex without a timeout
//! (an idle thread-pool worker), or it is proven to sleep past the longest window; an idle
//! server closes the window within a millisecond.
use std::time::{Duration, Instant};

use crate::observe::quiet::{Held, Horizon, Quiescence};
use crate::sandbox::tree::ProcessTree;

/// For this long after a response, looks for a proof of quiet are [`QUICK_LOOK_PAUSE`] apart.
const QUICK_LOOKS: Duration = Duration::from_millis(3);
const QUICK_LOOK_PAUSE: Duration = Duration::from_micros(300);

/// Whether a thread can only be woken by another thread or process acting first: it is
/// blocked reading a pipe, or waiting on a futex without a timeout (an idle worker of a
/// thread pool, a condition variable). Such a thread cannot act on its own later, so it does
/// not hold a call's window open; whatever wakes it runs first and is seen as busy. A thread
/// in a timed wait (a sleep, a futex with a timeout) can, and does hold the window.
pub fn waits_for_others(tid: u32) -> bool {
    waits_on_pipe(tid) || waits_on_futex_forever(tid)
}

/// Whether a thread is blocked in `futex` waiting (or locking) with no timeout, read from
/// `/proc/TID/syscall` (`NR arg0 … arg5 sp pc`, in hex while the thread is blocked).
pub fn waits_on_futex_forever(tid: u32) -> bool {
    crate::sandbox::tree::read_proc(format!("/proc/{tid}/syscall"))
        .is_ok_and(|line| untimed_futex_wait(&line))
}

/// Parses a `/proc/TID/syscall` line: `futex(uaddr, op, val, timeout, …)` with a waiting
/// operation and a null timeout.
pub(crate) fn untimed_futex_wait(line: &str) -> bool {
    const FUTEX_WAIT: u64 = 0;
    const FUTEX_LOCK_PI: u64 = 6;
    const FUTEX_WAIT_BITSET: u64 = 9;
    const FUTEX_WAIT_REQUEUE_PI: u64 = 11;
    const FUTEX_LOCK_PI2: u64 = 13;
    // FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME.
    const FLAGS: u64 = 128 | 256;
    let hex = |f: &str| u64::from_str_radix(f.trim_start_matches("0x"), 16).ok();
    let mut fields = line.split_whitespace();
    let Some(nr) = fields.next().and_then(|f| f.parse::<i64>().ok()) else {
        return false;
    };
    if nr != libc::SYS_futex {
        return false;
    }
    let args: Vec<u64> = fields.take(4).filter_map(hex).collect();
    let [_, op, _, timeout] = args[..] else {
        return false;
    };
    matches!(
        op & !FLAGS,
        FUTEX_WAIT | FUTEX_LOCK_PI | FUTEX_WAIT_BITSET | FUTEX_WAIT_REQUEUE_PI | FUTEX_LOCK_PI2
    ) && timeout == 0
}

/// Whether a thread is blocked reading a pipe (its kernel wait channel), that is, waiting
/// for another process to act.
pub fn waits_on_pipe(tid: u32) -> bool {
    crate::sandbox::tree::read_proc(format!("/proc/{tid}/wchan")).is_ok_and(|w| {
        matches!(
            w.trim(),
            "pipe_read" | "anon_pipe_read" | "pipe_wait" | "pipe_wait_readable"
        )
    })
}

/// Threads that ran between two samples of [`ProcessTree::runtimes`].
pub fn ran_between(
    before: &std::collections::HashMap<u32, u64>,
    after: &std::collections::HashMap<u32, u64>,
) -> Vec<u32> {
    after
        .iter()
        .filter(|(tid, ns)| before.get(tid).is_some_and(|b| *ns > b))
        .map(|(tid, _)| *tid)
        .collect()
}

/// Waits until `tree` is proven quiet for at least `quiet` by `proof` (see
/// [`crate::observe::quiet`]), or has been idle for `quiet`, at most `max`; processes not in
/// `before` (started during the call) count as busy while they live, unless the proof holds.
/// Returns the time waited.
pub async fn settle(
    tree: Option<ProcessTree>,
    before: &[u32],
    quiet: Duration,
    max: Duration,
    mut proof: Option<&mut Quiescence>,
) -> Duration {
    let start = Instant::now();
    let Some(tree) = tree else {
        tokio::time::sleep(quiet).await;
        return start.elapsed();
    };
    let mut idle_since: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if now.duration_since(start) >= max {
            if let Some(q) = proof {
                q.counted(false);
            }
            return start.elapsed();
        }
        // Threads the call started must not act before the longest window would end.
        let horizon = Horizon {
            all: quiet,
            held: Some((Held::NotIn(before), start + max)),
        };
        if let Some(q) = proof.as_deref_mut()
            && q.look(&tree, horizon)
        {
            q.counted(true);
            return start.elapsed();
        }
        // What the look just read of the threads, else read afresh.
        let (tasks, busy) = match proof.as_deref().and_then(Quiescence::last_seen) {
            Some((tasks, busy)) => (tasks.clone(), *busy),
            None => (tree.tasks(), tree.busy()),
        };
        let started_by_call = tasks
            .iter()
            .any(|t| !before.contains(t) && !waits_for_others(*t));
        if started_by_call || busy {
            idle_since = None;
        } else {
            let since = *idle_since.get_or_insert(now);
            if now.duration_since(since) >= quiet {
                if let Some(q) = proof {
                    q.counted(false);
                }
                return start.elapsed();
            }
        }
        // Looks for a proof come close together at first (two that agree close the
        // window): a short blocking pause, finer than the runtime's timer, then the timer.
        if proof.is_some() && start.elapsed() < QUICK_LOOKS {
            std::thread::sleep(QUICK_LOOK_PAUSE);
        } else {
            tokio::time::sleep(Duration::from_millis(if proof.is_some() { 1 } else { 2 })).await;
        }
    }
}

/// Waits for `child`, whose stdout must be piped, reading that stdout on a thread (so a full
/// pipe cannot stall it) and sampling its peak RSS every 5 ms. Kills it after `limit`.
/// Returns its stdout, whether it exited by itself within the limit, and the peak in KiB.
pub fn collect_with_peak_rss(
    mut child: std::process::Child,
    limit: std::time::Duration,
) -> (String, bool, u64) {
    let pid = child.id();
    let mut out = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(o) = out.as_mut() {
            let _ = std::io::Read::read_to_string(o, &mut s);
        }
        s
    });
    let started = std::time::Instant::now();
    let mut peak = 0u64;
    let mut exited = true;
    while child.try_wait().ok().flatten().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            exited = false;
            break;
        }
        if let Some(kib) = vm_hwm_kib(pid) {
            peak = peak.max(kib);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    (reader.join().unwrap_or_default(), exited, peak)
}

/// The peak resident set size of a live process (`VmHWM`), in KiB.
pub fn vm_hwm_kib(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The id of this process's thread named `name`, once it exists.
    fn thread_named(name: &str) -> u32 {
        for _ in 0..500 {
            for t in std::fs::read_dir("/proc/self/task")
                .expect("tasks")
                .flatten()
            {
                if std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name) {
                    return t.file_name().to_string_lossy().parse().expect("tid");
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        panic!("no thread named {name}");
    }

    /// Waits until `probe(tid)` holds, at most a second.
    fn eventually(tid: u32, probe: fn(u32) -> bool) -> bool {
        (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(5));
            probe(tid)
        })
    }

    #[test]
    fn a_thread_waiting_on_a_condition_forever_waits_for_others_and_a_timed_wait_does_not() {
        use std::sync::{Arc, Condvar, Mutex};
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let spawn = |name: &str, timed: bool| {
            let pair = pair.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || {
                    let (lock, cv) = &*pair;
                    let mut done = lock.lock().expect("lock");
                    while !*done {
                        done = if timed {
                            cv.wait_timeout(done, Duration::from_secs(30))
                                .expect("wait")
                                .0
                        } else {
                            cv.wait(done).expect("wait")
                        };
                    }
                })
                .expect("thread")
        };
        let forever = spawn("hc-idle-worker", false);
        let timed = spawn("hc-timed-worker", true);
        let forever_tid = thread_named("hc-idle-worker");
        let timed_tid = thread_named("hc-timed-worker");
        assert!(
            eventually(forever_tid, waits_for_others),
            "an untimed condition wait was not recognised: {:?}",
            std::fs::read_to_string(format!("/proc/{forever_tid}/syscall"))
        );
        assert!(eventually(timed_tid, |t| std::fs::read_to_string(format!(
            "/proc/{t}/syscall"
        ))
        .is_ok_and(|l| l.starts_with(&libc::SYS_futex.to_string()))));
        assert!(
            !waits_for_others(timed_tid),
            "a timed wait can act on its own later"
        );
        *pair.0.lock().expect("lock") = true;
        pair.1.notify_all();
        forever.join().expect("join");
        timed.join().expect("join");
    }

    #[test]
    fn futex_lines_are_read_by_operation_and_timeout() {
        let nr = libc::SYS_futex;
        // FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME, no timeout.
        assert!(untimed_futex_wait(&format!(
            "{nr} 0x7f00 0x189 0x0 0x0 0x0 0xffffffff 0x7ffd 0x7f01"
        )));
        // FUTEX_WAIT_PRIVATE with a timeout.
        assert!(!untimed_futex_wait(&format!(
            "{nr} 0x7f00 0x80 0x2 0x7ffd1000 0x0 0x0 0x7ffd 0x7f01"
        )));
        // FUTEX_WAKE is not a wait.
        assert!(!untimed_futex_wait(&format!(
            "{nr} 0x7f00 0x81 0x1 0x0 0x0 0x0 0x7ffd 0x7f01"
        )));
        assert!(!untimed_futex_wait("running"));
        assert!(!untimed_futex_wait(
            "0 0x3 0x7f00 0x1000 0x0 0x0 0x0 0x7ffd 0x7f01"
        ));
        assert!(!untimed_futex_wait(&format!("{nr} 0x7f00")));
    }

    #[tokio::test]
    async fn a_new_helper_waiting_on_its_input_pipe_does_not_hold_the_window() {
        let mut helper = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("cat");
        let tree = ProcessTree::new(helper.id());
        std::thread::sleep(Duration::from_millis(50));
        assert!(waits_on_pipe(helper.id()), "cat is not blocked on its pipe");
        // Nothing of the tree existed before: the helper is new, but it waits for input.
        let t = settle(
            Some(tree),
            &[],
            Duration::from_millis(10),
            Duration::from_secs(2),
            None,
        )
        .await;
        assert!(t < Duration::from_millis(1000), "took {t:?}");
        let _ = helper.kill();
        let _ = helper.wait();
    }

    #[tokio::test]
    async fn an_idle_tree_settles_fast_and_a_working_child_keeps_the_window_open() {
        let mut idle = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let tree = ProcessTree::new(idle.id());
        let t = settle(
            Some(tree),
            &tree.tasks(),
            Duration::from_millis(10),
            Duration::from_secs(2),
            None,
        )
        .await;
        assert!(t < Duration::from_millis(500), "idle tree took {t:?}");
        let _ = idle.kill();
        let _ = idle.wait();
        // A shell whose child burns CPU for ~300 ms.
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .spawn()
            .expect("sh");
        let tree = ProcessTree::new(busy.id());
        let t = settle(
            Some(tree),
            &tree.tasks(),
            Duration::from_millis(10),
            Duration::from_millis(150),
            None,
        )
        .await;
        assert!(
            t >= Duration::from_millis(140),
            "busy tree settled after {t:?}"
        );
        let _ = busy.kill();
        let _ = busy.wait();
        // A sleeping child that the call started keeps the window open until it exits.
        let mut parent = std::process::Command::new("sh")
            .args(["-c", "sleep 0.3 & wait"])
            .spawn()
            .expect("sh");
        let tree = ProcessTree::new(parent.id());
        let before = vec![parent.id()];
        std::thread::sleep(Duration::from_millis(50));
        let t = settle(
            Some(tree),
            &before,
            Duration::from_millis(10),
            Duration::from_secs(2),
            None,
        )
        .await;
        assert!(
            t >= Duration::from_millis(200),
            "settled after {t:?} while the child slept"
        );
        let _ = parent.wait();
    }
}
