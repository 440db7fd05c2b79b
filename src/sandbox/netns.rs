//! Network setup inside the sandbox's network namespace, with ioctls and netlink only (no `ip`
//! binary and no async runtime in the init process): bring `lo` up, route every address to it,
//! and make the observer's sockets (the DNS stub, the TCP listeners, and a packet socket on
//! `lo` that sees every outgoing TCP SYN and UDP datagram, whatever system call sent it).

#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

/// Buckets of the sandbox's own connection hash table: small enough that reading the
/// namespace's TCP tables costs microseconds, as many as a small machine's table has.
const OWN_CONNECTION_TABLE: u32 = 4096;

/// Moves the calling process into a fresh network namespace with a TCP connection hash
/// table of its own (`net.ipv4.tcp_child_ehash_entries`, Linux 6.1 and later, set in the
/// namespace just made, where it applies to the namespaces made from it). A namespace made
/// from the host's shares the host's table, and every read of its `/proc/net/tcp` (the
/// proof of quiet reads it) then scans that whole table: 4 ms a read on a machine with
/// much memory. Whether it took effect; where it did not (an older kernel), the process
/// stays where it was, in a namespace of its own all the same. Called only in a network
/// namespace the sandbox has just made: in the host's, the setting would outlive the run.
pub fn own_connection_table() -> bool {
    if std::fs::write(
        "/proc/sys/net/ipv4/tcp_child_ehash_entries",
        OWN_CONNECTION_TABLE.to_string(),
    )
    .is_err()
    {
        return false;
    }
    // SAFETY: unshare with one flag; the init process is single-threaded here (a fresh exec).
    unsafe { libc::unshare(libc::CLONE_NEWNET) == 0 }
}

/// Brings the loopback interface up.
pub fn loopback_up() -> std::io::Result<()> {
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").or_else(|_| {
        // Before lo is up, binding may fail; any datagram socket serves for the ioctl.
        std::net::UdpSocket::bind("0.0.0.0:0")
    });
    let fd = match &sock {
        Ok(s) => s.as_raw_fd(),
        Err(_) => {
            // SAFETY: socket(2) with constant arguments; the descriptor is closed below.
            let fd =
                unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            fd
        }
    };
    let result = set_up(fd, b"lo");
    if sock.is_err() {
        // SAFETY: closing the descriptor we created above.
        unsafe { libc::close(fd) };
    }
    result
}

fn set_up(fd: i32, name: &[u8]) -> std::io::Result<()> {
    // SAFETY: ifreq is plain old data; zero is a valid initial value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(name) {
        *dst = *src as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS with a pointer to a live ifreq.
    if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: reading and writing the flags member of the union SIOCGIFFLAGS filled.
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    // SAFETY: SIOCSIFFLAGS with a pointer to a live ifreq.
    if unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Routes every IPv4 and IPv6 address to `lo` ("lo-local"): a connection to any address is
/// then local, reaches the sandbox's own listeners or is refused at once, and never leaves.
/// One `RTM_NEWROUTE` netlink message per family (`SIOCADDRT` cannot create RTN_LOCAL routes).
pub fn route_everything_to_loopback() -> std::io::Result<()> {
    // SAFETY: if_nametoindex with a NUL-terminated name.
    let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) } as i32;
    if lo == 0 {
        return Err(std::io::Error::last_os_error());
    }
    add_local_default(libc::AF_INET as u8, lo)?;
    // IPv6 may be disabled in this kernel: IPv4 alone still routes everything it can reach.
    let _ = add_local_default(libc::AF_INET6 as u8, lo);
    Ok(())
}

fn add_local_default(family: u8, oif: i32) -> std::io::Result<()> {
    // SAFETY: socket(2) with constant arguments; the descriptor is owned right away.
    let raw = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: we just created this descriptor.
    let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    let mut m: Vec<u8> = Vec::with_capacity(40);
    m.extend_from_slice(&0u32.to_ne_bytes()); // nlmsg_len, patched below
    m.extend_from_slice(&libc::RTM_NEWROUTE.to_ne_bytes());
    m.extend_from_slice(
        &((libc::NLM_F_REQUEST | libc::NLM_F_ACK | libc::NLM_F_CREATE | libc::NLM_F_EXCL) as u16)
            .to_ne_bytes(),
    );
    m.extend_from_slice(&1u32.to_ne_bytes()); // seq
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid
    // struct rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type; flags.
    m.extend_from_slice(&[
        family,
        0,
        0,
        0,
        libc::RT_TABLE_LOCAL,
        libc::RTPROT_BOOT,
        libc::RT_SCOPE_HOST,
        libc::RTN_LOCAL,
    ]);
    m.extend_from_slice(&0u32.to_ne_bytes());
    // RTA_OIF = lo
    m.extend_from_slice(&8u16.to_ne_bytes());
    m.extend_from_slice(&libc::RTA_OIF.to_ne_bytes());
    m.extend_from_slice(&oif.to_ne_bytes());
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    // SAFETY: send/recv with live buffers of the given lengths.
    unsafe {
        if libc::send(
            sock.as_raw_fd(),
            m.as_ptr() as *const libc::c_void,
            m.len(),
            0,
        ) < 0
        {
            return Err(std::io::Error::last_os_error());
        }
        let mut buf = [0u8; 1024];
        let n = libc::recv(
            sock.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
        );
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = n as usize;
        if n >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == libc::NLMSG_ERROR as u16 {
            let err = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
            if err != 0 {
                return Err(std::io::Error::from_raw_os_error(-err));
            }
        }
    }
    Ok(())
}

/// The observer's sockets, created inside the network namespace and handed to the harness:
/// a DNS stub on port 53 of every address, and TCP listeners that read the first bytes of
/// what the server sends (TLS SNI, HTTP request line).
pub struct ObserverSockets {
    /// UDP, port 53, dual-stack.
    pub dns: std::net::UdpSocket,
    /// TCP listeners, dual-stack, with their ports.
    pub listeners: Vec<(u16, std::net::TcpListener)>,
    /// The packet socket on `lo`, or why it could not be made.
    pub packets: Result<std::os::fd::OwnedFd, String>,
}

/// A classic BPF instruction.
const fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Keeps every outgoing IPv4/IPv6 packet except TCP segments of established connections: a
/// TCP SYN without ACK (a connection attempt), and anything of every other IP protocol (UDP
/// and UDP-Lite datagrams whatever their port, SCTP, ICMP, raw protocols), whole (a
/// datagram's payload is scanned for planted secrets). Incoming copies and established TCP
/// traffic never reach the harness.
/// Offsets are from the network header (`SOCK_DGRAM`).
fn first_packets_filter() -> [libc::sock_filter; 19] {
    use libc::{
        BPF_ABS, BPF_ALU, BPF_AND, BPF_B, BPF_IND, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_LDX,
        BPF_MSH, BPF_RET, BPF_RSH, BPF_W,
    };
    const fn c(a: u32) -> u16 {
        a as u16
    }
    // SKF_AD_OFF + SKF_AD_PKTTYPE: the packet's type, PACKET_OUTGOING = 4.
    const PKTTYPE: u32 = (-0x1000i32 + 4) as u32;
    let ld_b = c(BPF_LD | BPF_B | BPF_ABS);
    let jeq = c(BPF_JMP | BPF_JEQ | BPF_K);
    [
        /* 0 */ bpf(c(BPF_LD | BPF_W | BPF_ABS), 0, 0, PKTTYPE),
        /* 1 */ bpf(jeq, 0, 16, 4), // outgoing, else drop
        /* 2 */ bpf(ld_b, 0, 0, 0),
        /* 3 */ bpf(c(BPF_ALU | BPF_RSH | BPF_K), 0, 0, 4), // IP version
        /* 4 */ bpf(jeq, 0, 6, 4), // IPv4, else 11
        /* 5 */ bpf(ld_b, 0, 0, 9), // protocol
        /* 6 */ bpf(jeq, 0, 10, 6), // TCP, else accept
        /* 7 */ bpf(c(BPF_LDX | BPF_B | BPF_MSH), 0, 0, 0), // X = header length
        /* 8 */ bpf(c(BPF_LD | BPF_B | BPF_IND), 0, 0, 13), // TCP flags
        /* 9 */ bpf(c(BPF_ALU | BPF_AND | BPF_K), 0, 0, 0x12),
        /* 10 */ bpf(jeq, 6, 7, 0x02), // SYN alone: accept, else drop
        /* 11 */ bpf(jeq, 0, 6, 6), // IPv6, else drop
        /* 12 */ bpf(ld_b, 0, 0, 6), // next header
        /* 13 */ bpf(jeq, 0, 3, 6), // TCP, else accept
        /* 14 */ bpf(ld_b, 0, 0, 40 + 13), // TCP flags after the fixed header
        /* 15 */ bpf(c(BPF_ALU | BPF_AND | BPF_K), 0, 0, 0x12),
        /* 16 */ bpf(jeq, 0, 1, 0x02),
        /* 17 */ bpf(c(BPF_RET | BPF_K), 0, 0, 0xffff),
        /* 18 */ bpf(c(BPF_RET | BPF_K), 0, 0, 0),
    ]
}

/// A packet socket on `lo` (network layer, `SOCK_DGRAM`) that receives
/// every outgoing TCP SYN and every packet of another IP protocol: it sees what seccomp cannot
/// (`sendmsg`, connected UDP `send`, UDP-Lite, SCTP, ICMP, raw sockets). Needs `CAP_NET_RAW` in the namespace's owner, which the init has.
pub fn packet_socket() -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    let protocol = (libc::ETH_P_ALL as u16).to_be();
    // Created with protocol 0 (receiving nothing) and given its protocol at bind: a socket
    // created with a protocol is already hooked, and re-binding it waits for an RCU grace
    // period (synchronize_net), 10-20 ms of every sandbox start.
    // SAFETY: socket(2) with constant arguments; the result is checked and owned below.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a descriptor we just created and own alone.
    let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
    let filter = first_packets_filter();
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: SO_ATTACH_FILTER with a pointer to a live sock_fprog and its length; the kernel
    // copies the program before returning.
    if unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&program as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: if_nametoindex with a NUL-terminated name.
    let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) } as i32;
    if lo == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: sockaddr_ll is plain old data; zero is a valid initial value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = protocol;
    addr.sll_ifindex = lo;
    // SAFETY: bind with a pointer to a live sockaddr_ll and its size.
    if unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    } < 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(owned)
}

/// Binds the observer's sockets; ports that cannot be bound are left out.
pub fn observer_sockets(ports: &[u16], packets: bool) -> std::io::Result<ObserverSockets> {
    let dns = std::net::UdpSocket::bind("[::]:53")
        .or_else(|_| std::net::UdpSocket::bind("0.0.0.0:53"))?;
    let mut listeners = Vec::new();
    for &port in ports {
        if let Ok(l) = std::net::TcpListener::bind(format!("[::]:{port}"))
            .or_else(|_| std::net::TcpListener::bind(format!("0.0.0.0:{port}")))
        {
            listeners.push((port, l));
        }
    }
    let packets = if packets {
        packet_socket().map_err(|e| e.to_string())
    } else {
        Err("not asked for".to_string())
    };
    Ok(ObserverSockets {
        dns,
        listeners,
        packets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the packet filter on a packet (from its network header) with the given packet
    /// type; returns how many bytes it keeps.
    fn run(prog: &[libc::sock_filter], packet: &[u8], pkttype: u32) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        let byte = |i: usize| packet.get(i).copied().map(u32::from);
        loop {
            let i = prog[pc];
            pc += 1;
            match i.code as u32 {
                c if c == libc::BPF_LD | libc::BPF_W | libc::BPF_ABS => {
                    assert_eq!(
                        i.k,
                        (-0x1000i32 + 4) as u32,
                        "only the packet type is loaded"
                    );
                    a = pkttype;
                }
                c if c == libc::BPF_LD | libc::BPF_B | libc::BPF_ABS => {
                    let Some(b) = byte(i.k as usize) else {
                        return 0;
                    };
                    a = b;
                }
                c if c == libc::BPF_LD | libc::BPF_B | libc::BPF_IND => {
                    let Some(b) = byte((x + i.k) as usize) else {
                        return 0;
                    };
                    a = b;
                }
                c if c == libc::BPF_LDX | libc::BPF_B | libc::BPF_MSH => {
                    let Some(b) = byte(i.k as usize) else {
                        return 0;
                    };
                    x = (b & 0x0f) * 4;
                }
                c if c == libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K => a >>= i.k,
                c if c == libc::BPF_ALU | libc::BPF_AND | libc::BPF_K => a &= i.k,
                c if c == libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K => {
                    pc += if a == i.k { i.jt } else { i.jf } as usize;
                }
                c if c == libc::BPF_RET | libc::BPF_K => return i.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    fn v4(protocol: u8, transport: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, protocol, 0, 0];
        p.extend_from_slice(&[127, 0, 0, 1, 192, 0, 2, 1]);
        p.extend_from_slice(transport);
        p
    }

    fn v6(next: u8, transport: &[u8]) -> Vec<u8> {
        let mut p = vec![0x60, 0, 0, 0, 0, 0, next, 64];
        p.extend_from_slice(&[0; 32]);
        p.extend_from_slice(transport);
        p
    }

    #[test]
    fn the_packet_filter_keeps_every_first_packet_and_no_established_traffic() {
        let f = first_packets_filter();
        let tcp = |flags: u8| {
            let mut t = vec![0u8; 20];
            t[13] = flags;
            t
        };
        const OUT: u32 = 4;
        for build in [v4 as fn(u8, &[u8]) -> Vec<u8>, v6] {
            assert_eq!(run(&f, &build(6, &tcp(0x02)), OUT), 0xffff, "SYN");
            assert_eq!(run(&f, &build(6, &tcp(0x12)), OUT), 0, "SYN-ACK");
            assert_eq!(run(&f, &build(6, &tcp(0x10)), OUT), 0, "ACK");
            assert_eq!(run(&f, &build(6, &tcp(0x18)), OUT), 0, "data");
            for protocol in [17, 136, 132, 1, 58, 47, 255] {
                assert_eq!(
                    run(&f, &build(protocol, &[0; 8]), OUT),
                    0xffff,
                    "{protocol}"
                );
            }
            assert_eq!(run(&f, &build(6, &tcp(0x02)), 0), 0, "incoming");
            assert_eq!(run(&f, &build(17, &[0; 8]), 0), 0, "incoming");
        }
        assert_eq!(run(&f, &[0x20; 40], OUT), 0, "not IP");
    }
}
