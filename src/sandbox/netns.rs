//! Network setup inside the sandbox's network namespace, with ioctls and netlink only (no `ip`
//! binary and no async runtime in the init process): bring `lo` up, route every address to it,
//! and make the observer's sockets (the DNS stub, the TCP listeners, and a packet socket on
//! `lo` that sees every outgoing TCP SYN and UDP datagram, whatever system call sent it).

#![allow(unsafe_code)]

use std::os::fd::AsRawFd;

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

/// Keeps outgoing IPv4/IPv6 packets that open a TCP connection (SYN without ACK) or carry UDP,
/// cut to their first 128 bytes (headers); everything else (established TCP traffic, incoming
/// copies) never reaches the harness. Offsets are from the network header (`SOCK_DGRAM`).
fn syn_and_udp_filter() -> [libc::sock_filter; 21] {
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
        /* 1 */ bpf(jeq, 0, 18, 4), // outgoing, else drop
        /* 2 */ bpf(ld_b, 0, 0, 0),
        /* 3 */ bpf(c(BPF_ALU | BPF_RSH | BPF_K), 0, 0, 4), // IP version
        /* 4 */ bpf(jeq, 0, 7, 4), // IPv4, else 12
        /* 5 */ bpf(ld_b, 0, 0, 9), // protocol
        /* 6 */ bpf(jeq, 12, 0, 17), // UDP: accept
        /* 7 */ bpf(jeq, 0, 12, 6), // TCP, else drop
        /* 8 */ bpf(c(BPF_LDX | BPF_B | BPF_MSH), 0, 0, 0), // X = header length
        /* 9 */ bpf(c(BPF_LD | BPF_B | BPF_IND), 0, 0, 13), // TCP flags
        /* 10 */ bpf(c(BPF_ALU | BPF_AND | BPF_K), 0, 0, 0x12),
        /* 11 */ bpf(jeq, 7, 8, 0x02), // SYN alone: accept, else drop
        /* 12 */ bpf(jeq, 0, 7, 6), // IPv6, else drop
        /* 13 */ bpf(ld_b, 0, 0, 6), // next header
        /* 14 */ bpf(jeq, 4, 0, 17), // UDP: accept
        /* 15 */ bpf(jeq, 0, 4, 6), // TCP, else drop
        /* 16 */ bpf(ld_b, 0, 0, 40 + 13), // TCP flags after the fixed header
        /* 17 */ bpf(c(BPF_ALU | BPF_AND | BPF_K), 0, 0, 0x12),
        /* 18 */ bpf(jeq, 0, 1, 0x02),
        /* 19 */ bpf(c(BPF_RET | BPF_K), 0, 0, 128),
        /* 20 */ bpf(c(BPF_RET | BPF_K), 0, 0, 0),
    ]
}

/// A packet socket on `lo` (network layer, `SOCK_DGRAM`) that receives the first bytes of
/// every outgoing TCP SYN and UDP datagram: it sees what seccomp cannot (`sendmsg`, connected
/// UDP `send`, raw sockets). Needs `CAP_NET_RAW` in the namespace's owner, which the init has.
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
    let filter = syn_and_udp_filter();
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
pub fn observer_sockets(ports: &[u16]) -> std::io::Result<ObserverSockets> {
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
    let packets = packet_socket().map_err(|e| e.to_string());
    Ok(ObserverSockets {
        dns,
        listeners,
        packets,
    })
}
