//! The seccomp filter of the server, as hand-written classic BPF (no C library to install).
//!
//! Refused outright: system calls of a foreign architecture (an x86_64 process can still enter
//! the i386 table with `int 0x80`) and the x32 ABI, `io_uring_setup`/`enter`/`register` (io_uring
//! operations bypass seccomp, so a server could otherwise act unobserved) and `clone3` (its
//! flags sit in a struct BPF cannot read; runtimes fall back to `clone`), all with ENOSYS;
//! `socket(AF_UNIX)` with EACCES (a network namespace does not isolate pathname unix sockets and
//! Landlock controls them only from ABI 9; `socketpair` stays allowed). These are routine
//! (glibc probes nscd's socket on every lookup) and not reported.
//!
//! Refused and reported ([`refusal`]): every other socket family than `AF_INET`, `AF_INET6` and
//! routing netlink (`AF_VSOCK` reaches a virtual machine's host, `AF_PACKET` and others reach
//! what the network namespace hides), inet sockets of other IP protocols than TCP, UDP, ICMP,
//! UDP-Lite and MPTCP (SCTP, DCCP: kernel modules loaded on demand), `socketpair` of any family but `AF_UNIX`, `unshare` and
//! `clone` with any `CLONE_NEW*` flag, and `setns`: nested namespaces give full capabilities
//! over new kernel objects (nf_tables, mounts), the usual route to kernel privilege
//! escalation. With a listener the harness answers these with the error, after recording
//! them; without one the filter returns the error itself.
//!
//! Reported to the harness through a user-notification listener, then continued: `open` and
//! `openat` with a write flag (tested in BPF, so read-only opens cost nothing), `openat2`,
//! `creat`, `truncate`, `ftruncate`, `unlink(at)`, `rename(at, at2)`, `mkdir(at)`, `rmdir`, `link(at)`,
//! `symlink(at)`, `mknod(at)`, `chmod`, `fchmodat`, `connect`, `bind`, `sendto` with an
//! address, `sendmmsg`, `execve(at)`, `flock` and the locking commands of `fcntl` (the harness
//! refuses a lock on a file other sandboxes can see). Everything else is allowed.

use serde::Serialize;

/// One BPF instruction (the layout of `struct sock_filter`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Constant.
    pub k: u32,
}

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
const BPF_JSET_K: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
const OFFSET_NR: u32 = 0; // seccomp_data.nr
const OFFSET_ARCH: u32 = 4; // seccomp_data.arch
/// seccomp_data.args[i], low word (little endian).
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
/// `SECCOMP_RET_USER_NOTIF`.
pub const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
const ENOSYS: u32 = 38;
const EACCES: u32 = 13;
const EPERM: u32 = 1;
const EAFNOSUPPORT: u32 = 97;
const EPROTONOSUPPORT: u32 = 93;
const AF_UNIX: u32 = 1;
/// `MAP_SHARED` (also set in `MAP_SHARED_VALIDATE`).
const MAP_SHARED: u32 = 0x01;
const MAP_ANONYMOUS: u32 = 0x20;
const AF_INET: u32 = 2;
const AF_INET6: u32 = 10;
const AF_NETLINK: u32 = 16;
const NETLINK_ROUTE: u32 = 0;
/// The IP protocols an inet socket may name: the default (0), TCP, UDP, ICMP and ICMPv6 (ping
/// sockets), UDP-Lite and MPTCP. Others (SCTP, DCCP, L2TP, ...) are kernel code a server has no
/// use for, often a module the kernel would load on demand: refused and reported.
const INET_PROTOCOLS: [u32; 7] = [0, 6, 17, 1, 58, 136, 262];
/// The `CLONE_NEW*` flags `clone` takes (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID,
/// NEWNET); in `clone`'s flags the byte 0x80 is part of the exit signal.
const CLONE_NEW_FLAGS: u32 = 0x7E02_0000;
/// The namespace flags `unshare` takes: those and `CLONE_NEWTIME`.
const UNSHARE_NEW_FLAGS: u32 = CLONE_NEW_FLAGS | 0x80;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// System call numbers at or above this are the x32 ABI on x86_64.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(not(target_arch = "x86_64"))]
const X32_SYSCALL_BIT: Option<u32> = None;

/// The io_uring system calls (the same numbers on every architecture since 5.1).
const IO_URING: [u32; 3] = [425, 426, 427];
/// `clone3` (the same number on every architecture since 5.3).
const CLONE3: u32 = 435;

/// A system call the sandbox refuses and reports: the errno the server gets, and what it
/// tried, for the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The errno returned to the server.
    pub errno: i32,
    /// What was tried, for humans: `socket(AF_VSOCK)`, `unshare(CLONE_NEWUSER|CLONE_NEWNET)`.
    pub what: String,
}

/// The name of an address family, for reports.
fn family_name(family: u32) -> String {
    let name = match family {
        1 => "AF_UNIX",
        2 => "AF_INET",
        3 => "AF_AX25",
        4 => "AF_IPX",
        5 => "AF_APPLETALK",
        9 => "AF_X25",
        10 => "AF_INET6",
        16 => "AF_NETLINK",
        17 => "AF_PACKET",
        21 => "AF_RDS",
        29 => "AF_CAN",
        30 => "AF_TIPC",
        31 => "AF_BLUETOOTH",
        38 => "AF_ALG",
        40 => "AF_VSOCK",
        41 => "AF_KCM",
        42 => "AF_QIPCRTR",
        44 => "AF_XDP",
        45 => "AF_MCTP",
        _ => return format!("address family {family}"),
    };
    name.to_string()
}

/// The names of the namespace flags set in `flags`.
fn namespace_flags(flags: u32) -> String {
    const NAMES: [(u32, &str); 8] = [
        (0x0002_0000, "CLONE_NEWNS"),
        (0x0200_0000, "CLONE_NEWCGROUP"),
        (0x0400_0000, "CLONE_NEWUTS"),
        (0x0800_0000, "CLONE_NEWIPC"),
        (0x1000_0000, "CLONE_NEWUSER"),
        (0x2000_0000, "CLONE_NEWPID"),
        (0x4000_0000, "CLONE_NEWNET"),
        (0x80, "CLONE_NEWTIME"),
    ];
    NAMES
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, n)| *n)
        .collect::<Vec<_>>()
        .join("|")
}

/// Whether the sandbox refuses this call and reports it, decided from the registers alone
/// (no memory the server could change afterwards). The filter's program makes exactly these
/// decisions (a unit test checks that they agree).
pub fn refusal(nr: i64, args: &[u64; 6]) -> Option<Refusal> {
    let low = |i: usize| args[i] as u32;
    let refuse = |errno: u32, what: String| {
        Some(Refusal {
            errno: errno as i32,
            what,
        })
    };
    match nr {
        libc::SYS_socket => match low(0) {
            AF_INET | AF_INET6 if INET_PROTOCOLS.contains(&low(2)) => None,
            family @ (AF_INET | AF_INET6) => refuse(
                EPROTONOSUPPORT,
                format!("socket({}, IP protocol {})", family_name(family), low(2)),
            ),
            AF_UNIX => None,
            AF_NETLINK if low(2) == NETLINK_ROUTE => None,
            AF_NETLINK => refuse(
                EPROTONOSUPPORT,
                format!("socket(AF_NETLINK, protocol {})", low(2)),
            ),
            family => refuse(EAFNOSUPPORT, format!("socket({})", family_name(family))),
        },
        libc::SYS_socketpair if low(0) != AF_UNIX => {
            refuse(EAFNOSUPPORT, format!("socketpair({})", family_name(low(0))))
        }
        libc::SYS_unshare if low(0) & UNSHARE_NEW_FLAGS != 0 => refuse(
            EPERM,
            format!(
                "unshare({}): a nested namespace",
                namespace_flags(low(0) & UNSHARE_NEW_FLAGS)
            ),
        ),
        libc::SYS_clone if low(0) & CLONE_NEW_FLAGS != 0 => refuse(
            EPERM,
            format!(
                "clone({}): a nested namespace",
                namespace_flags(low(0) & CLONE_NEW_FLAGS)
            ),
        ),
        libc::SYS_setns => refuse(EPERM, "setns: joining another namespace".into()),
        _ => None,
    }
}

/// Open flags that mean a write: O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND, __O_TMPFILE.
pub const WRITE_FLAGS: u32 = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000;

/// When a watched system call is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    /// When the argument (low word) has any of these bits.
    FlagsIn(u32, u32),
    /// When the argument is not zero (a pointer).
    NonZero(u32),
    /// When the argument has a bit of the first mask and none of the second.
    FlagsInNotIn(u32, u32, u32),
    /// When the argument (low word) is one of these values.
    OneOf(u32, [u32; 4]),
}

/// The `fcntl` commands that take a lock: `F_SETLK`, `F_SETLKW`, `F_OFD_SETLK`,
/// `F_OFD_SETLKW`.
pub const FCNTL_LOCKS: [u32; 4] = [6, 7, 37, 38];

/// The watched system calls of this architecture: (number, condition, name).
pub fn watched() -> Vec<(u32, &'static str)> {
    rules()
        .into_iter()
        .map(|(nr, _, name)| (nr, name))
        .collect()
}

fn rules() -> Vec<(u32, When, &'static str)> {
    let mut v: Vec<(i64, When, &'static str)> = vec![
        (libc::SYS_openat, When::FlagsIn(2, WRITE_FLAGS), "openat"),
        (libc::SYS_openat2, When::Always, "openat2"),
        (libc::SYS_truncate, When::Always, "truncate"),
        (libc::SYS_ftruncate, When::Always, "ftruncate"),
        (libc::SYS_unlinkat, When::Always, "unlinkat"),
        (libc::SYS_renameat, When::Always, "renameat"),
        (libc::SYS_renameat2, When::Always, "renameat2"),
        (libc::SYS_mkdirat, When::Always, "mkdirat"),
        (libc::SYS_linkat, When::Always, "linkat"),
        (libc::SYS_symlinkat, When::Always, "symlinkat"),
        (libc::SYS_mknodat, When::Always, "mknodat"),
        (libc::SYS_fchmodat, When::Always, "fchmodat"),
        (libc::SYS_fchmodat2, When::Always, "fchmodat2"),
        (libc::SYS_connect, When::Always, "connect"),
        (libc::SYS_bind, When::Always, "bind"),
        (libc::SYS_sendto, When::NonZero(4), "sendto"),
        (libc::SYS_sendmmsg, When::Always, "sendmmsg"),
        (libc::SYS_execve, When::Always, "execve"),
        (libc::SYS_execveat, When::Always, "execveat"),
        // Locks: on a file other sandboxes can see, a lock is a signal between runs.
        (libc::SYS_flock, When::Always, "flock"),
        (libc::SYS_fcntl, When::OneOf(1, FCNTL_LOCKS), "fcntl"),
        // A shared mapping of a file: writes through it change the file without any
        // notification, so the snapshot observer reads everything while one may exist.
        (
            libc::SYS_mmap,
            When::FlagsInNotIn(3, MAP_SHARED, MAP_ANONYMOUS),
            "mmap",
        ),
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        (libc::SYS_open, When::FlagsIn(1, WRITE_FLAGS), "open"),
        (libc::SYS_creat, When::Always, "creat"),
        (libc::SYS_unlink, When::Always, "unlink"),
        (libc::SYS_rename, When::Always, "rename"),
        (libc::SYS_mkdir, When::Always, "mkdir"),
        (libc::SYS_rmdir, When::Always, "rmdir"),
        (libc::SYS_link, When::Always, "link"),
        (libc::SYS_symlink, When::Always, "symlink"),
        (libc::SYS_mknod, When::Always, "mknod"),
        (libc::SYS_chmod, When::Always, "chmod"),
    ]);
    v.into_iter().map(|(nr, w, n)| (nr as u32, w, n)).collect()
}

/// The name of a watched or refused system call.
pub fn name_of(nr: i32) -> &'static str {
    let refused: [(i64, &'static str); 5] = [
        (libc::SYS_socket, "socket"),
        (libc::SYS_socketpair, "socketpair"),
        (libc::SYS_unshare, "unshare"),
        (libc::SYS_clone, "clone"),
        (libc::SYS_setns, "setns"),
    ];
    rules()
        .into_iter()
        .find(|r| r.0 == nr as u32)
        .map(|r| r.2)
        .or_else(|| {
            refused
                .iter()
                .find(|(n, _)| *n == nr as i64)
                .map(|(_, name)| *name)
        })
        .unwrap_or("?")
}

/// The filter program; `notify` adds the user-notification rules. With `single_exec`, the
/// address of the program path the sandbox's own `execve` passes: that `execve` is allowed,
/// every other one (and every `execveat`) fails with `EPERM`.
pub fn filter(notify: bool, single_exec: Option<u64>) -> Vec<Insn> {
    let enosys = SECCOMP_RET_ERRNO | ENOSYS;
    // Every test jumps at most a few instructions: each rule carries its own returns.
    let mut p = vec![
        stmt(BPF_LD_W_ABS, OFFSET_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH, 1, 0),
        ret(enosys),
        stmt(BPF_LD_W_ABS, OFFSET_NR),
    ];
    if let Some(bit) = X32_SYSCALL_BIT {
        p.push(jump(BPF_JGE_K, bit, 0, 1));
        p.push(ret(enosys));
    }
    for nr in IO_URING {
        p.push(jump(BPF_JEQ_K, nr, 0, 1));
        p.push(ret(enosys));
    }
    // clone3's flags sit in a struct: ENOSYS, and runtimes fall back to clone.
    p.push(jump(BPF_JEQ_K, CLONE3, 0, 1));
    p.push(ret(enosys));
    // Refusals the harness records (with a listener) or the filter answers (without one).
    let refuse = |errno: u32| {
        ret(if notify {
            SECCOMP_RET_USER_NOTIF
        } else {
            SECCOMP_RET_ERRNO | errno
        })
    };
    let allow = ret(SECCOMP_RET_ALLOW);
    p.extend(socket_rules(&refuse));
    // socketpair: unix only.
    p.extend([
        jump(BPF_JEQ_K, libc::SYS_socketpair as u32, 0, 4),
        stmt(BPF_LD_W_ABS, arg_low(0)),
        jump(BPF_JEQ_K, AF_UNIX, 0, 1),
        allow,
        refuse(EAFNOSUPPORT),
    ]);
    // unshare and clone with a namespace flag; setns always.
    for (nr, mask) in [
        (libc::SYS_unshare as u32, UNSHARE_NEW_FLAGS),
        (libc::SYS_clone as u32, CLONE_NEW_FLAGS),
    ] {
        p.extend([
            jump(BPF_JEQ_K, nr, 0, 4),
            stmt(BPF_LD_W_ABS, arg_low(0)),
            jump(BPF_JSET_K, mask, 0, 1),
            refuse(EPERM),
            allow,
        ]);
    }
    p.extend([jump(BPF_JEQ_K, libc::SYS_setns as u32, 0, 1), refuse(EPERM)]);
    if let Some(path) = single_exec {
        let first = if notify {
            ret(SECCOMP_RET_USER_NOTIF)
        } else {
            allow
        };
        p.extend([
            jump(BPF_JEQ_K, libc::SYS_execveat as u32, 0, 1),
            ret(SECCOMP_RET_ERRNO | EPERM),
            jump(BPF_JEQ_K, libc::SYS_execve as u32, 0, 6),
            stmt(BPF_LD_W_ABS, arg_low(0)),
            jump(BPF_JEQ_K, path as u32, 0, 2),
            stmt(BPF_LD_W_ABS, arg_low(0) + 4),
            jump(BPF_JEQ_K, (path >> 32) as u32, 1, 0),
            ret(SECCOMP_RET_ERRNO | EPERM),
            first,
        ]);
    }
    if notify {
        p.extend(notify_rules());
    }
    p.push(ret(SECCOMP_RET_ALLOW));
    p
}

/// A BPF statement.
fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

/// A BPF conditional jump.
fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

/// A BPF return.
fn ret(k: u32) -> Insn {
    stmt(BPF_RET_K, k)
}

/// The rules of `socket`: inet and inet6 with the protocols a server needs, routing netlink;
/// unix refused silently; the rest refused by `refuse` (reported with a listener).
fn socket_rules(refuse: &dyn Fn(u32) -> Insn) -> Vec<Insn> {
    let allow = ret(SECCOMP_RET_ALLOW);
    // Layout (offsets from the block's first instruction):
    //   0 nr?  1 ld family  2 inet?  3 inet6?  4 unix?  5 EACCES  6 netlink?  7 EAFNOSUPPORT
    //   8 ld protocol (netlink)  9 route?  10 EPROTONOSUPPORT
    //   11 ld protocol (inet)  12.. one test per allowed protocol, then EPROTONOSUPPORT, allow
    let allow_at = 12 + INET_PROTOCOLS.len() + 1;
    let inet_at = 11;
    let mut block = vec![
        jump(BPF_JEQ_K, libc::SYS_socket as u32, 0, allow_at as u8),
        stmt(BPF_LD_W_ABS, arg_low(0)),
        jump(BPF_JEQ_K, AF_INET, (inet_at - 3) as u8, 0),
        jump(BPF_JEQ_K, AF_INET6, (inet_at - 4) as u8, 0),
        jump(BPF_JEQ_K, AF_UNIX, 0, 1),
        ret(SECCOMP_RET_ERRNO | EACCES),
        jump(BPF_JEQ_K, AF_NETLINK, 1, 0),
        refuse(EAFNOSUPPORT),
        stmt(BPF_LD_W_ABS, arg_low(2)),
        jump(BPF_JEQ_K, NETLINK_ROUTE, (allow_at - 10) as u8, 0),
        refuse(EPROTONOSUPPORT),
        stmt(BPF_LD_W_ABS, arg_low(2)),
    ];
    for (i, protocol) in INET_PROTOCOLS.iter().enumerate() {
        block.push(jump(
            BPF_JEQ_K,
            *protocol,
            (allow_at - (12 + i) - 1) as u8,
            0,
        ));
    }
    block.push(refuse(EPROTONOSUPPORT));
    block.push(allow);
    debug_assert_eq!(block.len(), allow_at + 1);
    block
}

/// The user-notification rules: every system call the recorder reports, under its condition.
fn notify_rules() -> Vec<Insn> {
    let mut p = Vec::new();
    for (nr, when, _) in rules() {
        match when {
            When::Always => {
                p.push(jump(BPF_JEQ_K, nr, 0, 1));
                p.push(ret(SECCOMP_RET_USER_NOTIF));
            }
            When::FlagsIn(arg, mask) => {
                p.push(jump(BPF_JEQ_K, nr, 0, 4));
                p.push(stmt(BPF_LD_W_ABS, arg_low(arg)));
                p.push(jump(BPF_JSET_K, mask, 0, 1));
                p.push(ret(SECCOMP_RET_USER_NOTIF));
                p.push(ret(SECCOMP_RET_ALLOW));
            }
            When::FlagsInNotIn(arg, any, none) => {
                p.push(jump(BPF_JEQ_K, nr, 0, 5));
                p.push(stmt(BPF_LD_W_ABS, arg_low(arg)));
                p.push(jump(BPF_JSET_K, any, 0, 2));
                p.push(jump(BPF_JSET_K, none, 1, 0));
                p.push(ret(SECCOMP_RET_USER_NOTIF));
                p.push(ret(SECCOMP_RET_ALLOW));
            }
            When::OneOf(arg, values) => {
                p.push(jump(BPF_JEQ_K, nr, 0, 7));
                p.push(stmt(BPF_LD_W_ABS, arg_low(arg)));
                for (i, v) in values.iter().enumerate() {
                    p.push(jump(BPF_JEQ_K, *v, (4 - i) as u8, 0));
                }
                p.push(ret(SECCOMP_RET_ALLOW));
                p.push(ret(SECCOMP_RET_USER_NOTIF));
            }
            When::NonZero(arg) => {
                // A 64-bit pointer is non-zero when either word is.
                p.push(jump(BPF_JEQ_K, nr, 0, 6));
                p.push(stmt(BPF_LD_W_ABS, arg_low(arg)));
                p.push(jump(BPF_JEQ_K, 0, 0, 2));
                p.push(stmt(BPF_LD_W_ABS, arg_low(arg) + 4));
                p.push(jump(BPF_JEQ_K, 0, 1, 0));
                p.push(ret(SECCOMP_RET_USER_NOTIF));
                p.push(ret(SECCOMP_RET_ALLOW));
            }
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interpreter of the subset the filter uses, to check its decisions.
    fn run(prog: &[Insn], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let mut acc = 0u32;
        let mut pc = 0usize;
        for _ in 0..prog.len() + 1 {
            let i = prog[pc];
            match i.code {
                BPF_LD_W_ABS => {
                    acc = match i.k {
                        OFFSET_ARCH => arch,
                        OFFSET_NR => nr,
                        k if (16..64).contains(&k) => {
                            let idx = ((k - 16) / 8) as usize;
                            if (k - 16) % 8 == 0 {
                                args[idx] as u32
                            } else {
                                (args[idx] >> 32) as u32
                            }
                        }
                        other => panic!("unexpected load offset {other}"),
                    };
                    pc += 1;
                }
                BPF_JEQ_K => {
                    pc += 1 + if acc == i.k {
                        i.jt as usize
                    } else {
                        i.jf as usize
                    }
                }
                BPF_JGE_K => {
                    pc += 1 + if acc >= i.k {
                        i.jt as usize
                    } else {
                        i.jf as usize
                    }
                }
                BPF_JSET_K => {
                    pc += 1 + if acc & i.k != 0 {
                        i.jt as usize
                    } else {
                        i.jf as usize
                    }
                }
                BPF_RET_K => return i.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
        panic!("the program did not return (a loop?)");
    }

    #[test]
    fn the_program_refuses_exactly_what_refusal_names() {
        let n = |nr: i64| nr as u32;
        let a = AUDIT_ARCH;
        let mut cases: Vec<(i64, [u64; 6])> = Vec::new();
        for family in 0..64u64 {
            for protocol in [0u64, 1, 4, 6, 9, 12, 15, 17, 33, 58, 132, 136, 255, 262] {
                cases.push((libc::SYS_socket, [family, 1, protocol, 0, 0, 0]));
            }
            cases.push((libc::SYS_socketpair, [family, 1, 0, 0, 0, 0]));
        }
        for bit in 0..32 {
            let flags = 1u64 << bit;
            cases.push((libc::SYS_unshare, [flags, 0, 0, 0, 0, 0]));
            cases.push((libc::SYS_clone, [flags | 17, 0, 0, 0, 0, 0]));
        }
        // What glibc's fork and pthread_create pass.
        cases.push((libc::SYS_clone, [0x0120_0011, 0, 0, 0, 0, 0]));
        cases.push((libc::SYS_clone, [0x003d_0f00, 0, 0, 0, 0, 0]));
        cases.push((libc::SYS_setns, [3, 0, 0, 0, 0, 0]));
        for notify in [false, true] {
            let p = filter(notify, None);
            for (nr, args) in &cases {
                let got = run(&p, a, n(*nr), *args);
                let want = match refusal(*nr, args) {
                    Some(_) if notify => SECCOMP_RET_USER_NOTIF,
                    Some(r) => SECCOMP_RET_ERRNO | r.errno as u32,
                    None if *nr == libc::SYS_socket && args[0] == 1 => SECCOMP_RET_ERRNO | EACCES,
                    None => SECCOMP_RET_ALLOW,
                };
                assert_eq!(got, want, "notify {notify}: nr {nr} args {args:?}");
            }
            assert_eq!(
                run(&p, a, CLONE3, [0; 6]),
                SECCOMP_RET_ERRNO | ENOSYS,
                "clone3"
            );
        }
        let vsock = refusal(libc::SYS_socket, &[40, 1, 0, 0, 0, 0]).expect("vsock");
        assert_eq!(vsock.what, "socket(AF_VSOCK)");
        assert!(
            refusal(libc::SYS_socket, &[16, 3, 0, 0, 0, 0]).is_none(),
            "rtnetlink"
        );
        assert!(
            refusal(libc::SYS_socket, &[16, 3, 12, 0, 0, 0]).is_some(),
            "nf_tables"
        );
        let sctp = refusal(libc::SYS_socket, &[2, 1, 132, 0, 0, 0]).expect("sctp");
        assert_eq!(sctp.what, "socket(AF_INET, IP protocol 132)");
        assert!(
            refusal(libc::SYS_socket, &[10, 2, 136, 0, 0, 0]).is_none(),
            "UDP-Lite"
        );
        let user = refusal(
            libc::SYS_unshare,
            &[0x1000_0000 | 0x4000_0000, 0, 0, 0, 0, 0],
        )
        .expect("userns");
        assert_eq!(
            user.what,
            "unshare(CLONE_NEWUSER|CLONE_NEWNET): a nested namespace"
        );
        assert!(
            refusal(libc::SYS_clone, &[0x80 | 17, 0, 0, 0, 0, 0]).is_none(),
            "exit signal"
        );
    }

    #[test]
    fn decisions() {
        for notify in [false, true] {
            let p = filter(notify, None);
            assert!(p.len() < 4096);
            let a = AUDIT_ARCH;
            let enosys = SECCOMP_RET_ERRNO | ENOSYS;
            let n = |nr: i64| nr as u32;
            assert_eq!(run(&p, a, n(libc::SYS_read), [0; 6]), SECCOMP_RET_ALLOW);
            assert_eq!(run(&p, 0x4000_0003, 1, [0; 6]), enosys, "i386 entry");
            for nr in IO_URING {
                assert_eq!(run(&p, a, nr, [0; 6]), enosys);
            }
            if X32_SYSCALL_BIT.is_some() {
                assert_eq!(run(&p, a, 0x4000_0001, [0; 6]), enosys, "x32");
            }
            let sock = n(libc::SYS_socket);
            assert_eq!(
                run(&p, a, sock, [1, 1, 0, 0, 0, 0]),
                SECCOMP_RET_ERRNO | EACCES,
                "unix socket"
            );
            assert_eq!(
                run(&p, a, sock, [2, 1, 0, 0, 0, 0]),
                SECCOMP_RET_ALLOW,
                "inet socket"
            );
            let watched = if notify {
                SECCOMP_RET_USER_NOTIF
            } else {
                SECCOMP_RET_ALLOW
            };
            let openat = n(libc::SYS_openat);
            assert_eq!(
                run(&p, a, openat, [0, 0, 0o0, 0, 0, 0]),
                SECCOMP_RET_ALLOW,
                "read-only open"
            );
            assert_eq!(
                run(&p, a, openat, [0, 0, 0o1101, 0, 0, 0]),
                watched,
                "write open"
            );
            assert_eq!(
                run(&p, a, openat, [0, 0, 0o2002, 0, 0, 0]),
                watched,
                "append open"
            );
            assert_eq!(run(&p, a, n(libc::SYS_unlinkat), [0; 6]), watched);
            let mmap = n(libc::SYS_mmap);
            for (flags, expected, what) in [
                (0x01, watched, "shared file mapping"),
                (0x03, watched, "MAP_SHARED_VALIDATE"),
                (0x02, SECCOMP_RET_ALLOW, "private file mapping"),
                (0x21, SECCOMP_RET_ALLOW, "shared anonymous mapping"),
                (0x22, SECCOMP_RET_ALLOW, "private anonymous mapping"),
            ] {
                assert_eq!(
                    run(&p, a, mmap, [0, 4096, 3, flags, 3, 0]),
                    expected,
                    "{what}"
                );
            }
            assert_eq!(run(&p, a, n(libc::SYS_connect), [0; 6]), watched);
            let fcntl = n(libc::SYS_fcntl);
            for cmd in FCNTL_LOCKS {
                assert_eq!(
                    run(&p, a, fcntl, [3, cmd as u64, 0, 0, 0, 0]),
                    watched,
                    "lock {cmd}"
                );
            }
            for cmd in [1, 2, 3, 4, 5] {
                assert_eq!(
                    run(&p, a, fcntl, [3, cmd, 0, 0, 0, 0]),
                    SECCOMP_RET_ALLOW,
                    "fcntl {cmd}"
                );
            }
            assert_eq!(run(&p, a, n(libc::SYS_flock), [3, 2, 0, 0, 0, 0]), watched);
            assert_eq!(run(&p, a, n(libc::SYS_execve), [0; 6]), watched);
            let sendto = n(libc::SYS_sendto);
            assert_eq!(
                run(&p, a, sendto, [3, 0, 10, 0, 0, 0]),
                SECCOMP_RET_ALLOW,
                "sendto without address"
            );
            assert_eq!(
                run(&p, a, sendto, [3, 0, 10, 0, 0x7fff_0000_1000, 16]),
                watched,
                "sendto with address"
            );
            assert_eq!(
                run(&p, a, sendto, [3, 0, 10, 0, 0x0000_7fff_0000_0000, 16]),
                watched,
                "high-word pointer"
            );
        }
    }

    #[test]
    fn a_single_exec_filter_allows_only_the_sandboxs_own_execve() {
        let path: u64 = 0x7ffd_1234_5678;
        for notify in [false, true] {
            let p = filter(notify, Some(path));
            let a = AUDIT_ARCH;
            let eperm = SECCOMP_RET_ERRNO | EPERM;
            let first = if notify {
                SECCOMP_RET_USER_NOTIF
            } else {
                SECCOMP_RET_ALLOW
            };
            let execve = libc::SYS_execve as u32;
            assert_eq!(run(&p, a, execve, [path, 0, 0, 0, 0, 0]), first);
            // Same low word, another high word; another address; execveat (fexecve).
            assert_eq!(
                run(&p, a, execve, [path & 0xffff_ffff, 0, 0, 0, 0, 0]),
                eperm
            );
            assert_eq!(run(&p, a, execve, [path + 8, 0, 0, 0, 0, 0]), eperm);
            assert_eq!(
                run(&p, a, libc::SYS_execveat as u32, [3, path, 0, 0, 0, 0]),
                eperm
            );
            assert_eq!(run(&p, a, libc::SYS_read as u32, [0; 6]), SECCOMP_RET_ALLOW);
        }
    }
}
