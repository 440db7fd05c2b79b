//! The seccomp filter of the server, as hand-written classic BPF (no C library to install).
//! It refuses system calls of a foreign architecture (an x86_64 process can still enter the
//! i386 table with `int 0x80`) and the x32 ABI, and makes `io_uring_setup`, `io_uring_enter`
//! and `io_uring_register` fail with ENOSYS: io_uring operations bypass seccomp, so a server
//! could otherwise act unobserved. `socket(AF_UNIX, …)` fails with EACCES: a network
//! namespace does not isolate pathname unix sockets and Landlock controls them only from ABI 9,
//! so a server could otherwise reach host daemons (D-Bus, docker.sock, nscd); `socketpair`
//! stays allowed. Everything else is allowed.

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
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
const OFFSET_NR: u32 = 0; // seccomp_data.nr
const OFFSET_ARCH: u32 = 4; // seccomp_data.arch

const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const ENOSYS: u32 = 38;
const EACCES: u32 = 13;
const AF_UNIX: u32 = 1;
const OFFSET_ARG0_LOW: u32 = 16; // seccomp_data.args[0], low word (little endian)

#[cfg(target_arch = "x86_64")]
const SYS_SOCKET: u32 = 41;
#[cfg(target_arch = "aarch64")]
const SYS_SOCKET: u32 = 198;

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

/// The filter program.
pub fn filter() -> Vec<Insn> {
    let stmt = |code, k| Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let mut p = vec![stmt(BPF_LD_W_ABS, OFFSET_ARCH)];
    // Layout: every test jumps forward to the shared ENOSYS return at the end.
    let mut tests: Vec<(u16, u32)> = Vec::new();
    p.push(Insn {
        code: BPF_JEQ_K,
        jt: 0,
        jf: 0, // patched below: foreign arch → ENOSYS
        k: AUDIT_ARCH,
    });
    p.push(stmt(BPF_LD_W_ABS, OFFSET_NR));
    if let Some(bit) = X32_SYSCALL_BIT {
        tests.push((BPF_JGE_K, bit));
    }
    for nr in IO_URING {
        tests.push((BPF_JEQ_K, nr));
    }
    for (code, k) in &tests {
        p.push(Insn {
            code: *code,
            jt: 0,
            jf: 0,
            k: *k,
        });
    }
    // socket(AF_UNIX, …) → EACCES.
    let socket_test = p.len();
    p.push(Insn {
        code: BPF_JEQ_K,
        jt: 0,
        jf: 2, // not socket(): on to ALLOW
        k: SYS_SOCKET,
    });
    p.push(stmt(BPF_LD_W_ABS, OFFSET_ARG0_LOW));
    p.push(Insn {
        code: BPF_JEQ_K,
        jt: 2, // AF_UNIX → EACCES
        jf: 0,
        k: AF_UNIX,
    });
    let allow = p.len();
    p.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
    p.push(stmt(BPF_RET_K, SECCOMP_RET_ERRNO | ENOSYS));
    p.push(stmt(BPF_RET_K, SECCOMP_RET_ERRNO | EACCES));
    let enosys = allow + 1;
    debug_assert_eq!(socket_test + 3, allow);
    // Arch check: equal → continue (jt 0), otherwise → ENOSYS.
    p[1].jf = (enosys - 2) as u8;
    for (i, insn) in p.iter_mut().enumerate().take(3 + tests.len()).skip(3) {
        insn.jt = (enosys - i - 1) as u8;
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny interpreter of the subset the filter uses, to check its decisions.
    fn run(prog: &[Insn], arch: u32, nr: u32) -> u32 {
        run_with(prog, arch, nr, 0)
    }

    fn run_with(prog: &[Insn], arch: u32, nr: u32, arg0: u32) -> u32 {
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let i = prog[pc];
            match i.code {
                BPF_LD_W_ABS => {
                    acc = match i.k {
                        OFFSET_ARCH => arch,
                        OFFSET_NR => nr,
                        OFFSET_ARG0_LOW => arg0,
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
                BPF_RET_K => return i.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    #[test]
    fn decisions() {
        let p = filter();
        let enosys = SECCOMP_RET_ERRNO | ENOSYS;
        assert_eq!(run(&p, AUDIT_ARCH, 0), SECCOMP_RET_ALLOW);
        assert_eq!(run(&p, AUDIT_ARCH, 59), SECCOMP_RET_ALLOW);
        assert_eq!(run(&p, 0x4000_0003, 1), enosys, "i386 entry");
        for nr in IO_URING {
            assert_eq!(run(&p, AUDIT_ARCH, nr), enosys);
        }
        if X32_SYSCALL_BIT.is_some() {
            assert_eq!(run(&p, AUDIT_ARCH, 0x4000_0001), enosys, "x32");
        }
        let eacces = SECCOMP_RET_ERRNO | EACCES;
        assert_eq!(
            run_with(&p, AUDIT_ARCH, SYS_SOCKET, AF_UNIX),
            eacces,
            "unix socket"
        );
        assert_eq!(
            run_with(&p, AUDIT_ARCH, SYS_SOCKET, 2),
            SECCOMP_RET_ALLOW,
            "inet socket"
        );
        assert_eq!(
            run_with(&p, AUDIT_ARCH, SYS_SOCKET, 10),
            SECCOMP_RET_ALLOW,
            "inet6 socket"
        );
    }
}
