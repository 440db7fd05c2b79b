//! Network setup inside the sandbox's network namespace, with ioctls only (no `ip` binary and
//! no async runtime in the init process). Today: bring `lo` up, so that a server can talk to
//! itself on loopback while every other destination is unreachable.

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
    Ok(ObserverSockets { dns, listeners })
}
