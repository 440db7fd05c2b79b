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
