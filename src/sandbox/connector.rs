//! Connections into the sandbox's network namespace, for servers that speak HTTP: the
//! sandbox's outer init lives in that namespace and answers each request for a port with a
//! TCP socket it connected there (to 127.0.0.1, else ::1), passed back over a socket pair.
//! Nothing listens on the host, and the harness never enters the namespace (unprivileged it
//! could not: `setns` into a network namespace needs `CAP_SYS_ADMIN` in the caller's own user
//! namespace too). A request is the port (two bytes, big endian); the answer is an errno (four
//! bytes, 0 when connected) with the socket attached. A request for a listener (`L`, the
//! address as 16 bytes of IPv6, IPv4 mapped, and the port) is answered the same way with a
//! TCP listener bound there: every address inside is local (routed to `lo`), so the network
//! observer can listen, on demand, on the very address and port a server is connecting to.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// The size of a request for a listener: `L`, 16 bytes of address, 2 of port.
const LISTEN_REQUEST: usize = 19;

/// How long a request waits for the init's answer (its connect may take two
/// [`CONNECT_TIMEOUT`]s, one per address family).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the init waits for one connection on the sandbox's loopback.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The harness's end: asks the init for connections (shared: clones ask through one pair).
#[derive(Clone)]
pub struct Connector {
    socket: std::sync::Arc<Mutex<OwnedFd>>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connector")
    }
}

impl Connector {
    /// Wraps the harness's end of the pair the init handed over.
    pub fn new(socket: OwnedFd) -> Connector {
        // An init that stops answering must not hold a caller (the seccomp recorder among
        // them) for ever: a request waits this long at most.
        let _ = rustix::net::sockopt::set_socket_timeout(
            &socket,
            rustix::net::sockopt::Timeout::Recv,
            Some(ANSWER_TIMEOUT),
        );
        Connector {
            socket: std::sync::Arc::new(Mutex::new(socket)),
        }
    }

    /// A TCP socket connected to `port` on the sandbox's loopback (blocking; one request at a
    /// time). `ConnectionRefused` while nothing listens there yet.
    pub fn connect(&self, port: u16) -> std::io::Result<TcpStream> {
        self.ask(&port.to_be_bytes()).map(TcpStream::from)
    }

    /// A TCP listener bound to `address` and `port` in the sandbox's network namespace.
    pub fn listen(&self, address: IpAddr, port: u16) -> std::io::Result<TcpListener> {
        let v6 = match address {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        let mut request = [0u8; LISTEN_REQUEST];
        request[0] = b'L';
        request[1..17].copy_from_slice(&v6.octets());
        request[17..].copy_from_slice(&port.to_be_bytes());
        self.ask(&request).map(TcpListener::from)
    }

    /// Sends one request and waits for its answer: the socket it carries, or the errno.
    fn ask(&self, request: &[u8]) -> std::io::Result<OwnedFd> {
        let socket = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        rustix::net::send(socket.as_fd(), request, SendFlags::NOSIGNAL)?;
        let mut answer = [0u8; 4];
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = loop {
            match rustix::net::recvmsg(
                socket.as_fd(),
                &mut [IoSliceMut::new(&mut answer)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            ) {
                Err(rustix::io::Errno::INTR) => continue,
                other => break other?,
            }
        };
        let mut fds: Vec<OwnedFd> = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = m {
                fds.extend(received);
            }
        }
        if got.bytes == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "the sandbox is gone",
            ));
        }
        match (i32::from_be_bytes(answer), fds.pop()) {
            (0, Some(fd)) => Ok(fd),
            (0, None) => Err(std::io::Error::other("the sandbox sent no socket")),
            (errno, _) => Err(std::io::Error::from_raw_os_error(errno)),
        }
    }
}

/// The init's end: answers requests until the harness closes its end.
pub fn serve(socket: OwnedFd) {
    while answer_one(&socket) {}
}

/// Answers one request (blocking until it comes); false once the harness closed its end.
/// The outer init calls it when its poll says a request waits: a process that unshared its
/// pid namespace cannot start threads.
pub fn answer_one(socket: &OwnedFd) -> bool {
    let mut request = [0u8; LISTEN_REQUEST];
    let n = loop {
        match rustix::net::recv(socket.as_fd(), &mut request, RecvFlags::empty()) {
            Ok((n, _)) => break n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
    };
    if n == 0 {
        return false;
    }
    let made: std::io::Result<OwnedFd> = match n {
        2 => connect_loopback(u16::from_be_bytes([request[0], request[1]])).map(OwnedFd::from),
        LISTEN_REQUEST if request[0] == b'L' => {
            let mut v6 = [0u8; 16];
            v6.copy_from_slice(&request[1..17]);
            let v6 = Ipv6Addr::from(v6);
            let address = v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4);
            let port = u16::from_be_bytes([request[17], request[18]]);
            bind_listener(SocketAddr::new(address, port))
        }
        _ => return true,
    };
    let (errno, made) = match made {
        Ok(fd) => (0, Some(fd)),
        Err(e) => (e.raw_os_error().unwrap_or(libc::ECONNREFUSED), None),
    };
    let fds: Vec<_> = made.iter().map(|s| s.as_fd()).collect();
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return false;
    }
    let answer = errno.to_be_bytes();
    rustix::net::sendmsg(
        socket.as_fd(),
        &[IoSlice::new(&answer)],
        &mut control,
        SendFlags::NOSIGNAL,
    )
    .is_ok()
}

/// A TCP listener bound to `at`, free to bind an address no interface holds (every address
/// inside is routed to `lo`, which IPv4 accepts as local but IPv6 does not).
fn bind_listener(at: SocketAddr) -> std::io::Result<OwnedFd> {
    use rustix::net::{AddressFamily, SocketFlags, SocketType, sockopt};
    let family = if at.is_ipv4() {
        AddressFamily::INET
    } else {
        AddressFamily::INET6
    };
    let fd = rustix::net::socket_with(family, SocketType::STREAM, SocketFlags::CLOEXEC, None)?;
    sockopt::set_socket_reuseaddr(&fd, true)?;
    if at.is_ipv4() {
        sockopt::set_ip_freebind(&fd, true)?;
    } else {
        sockopt::set_ipv6_freebind(&fd, true)?;
        sockopt::set_ipv6_v6only(&fd, true)?;
    }
    rustix::net::bind(&fd, &at)?;
    rustix::net::listen(&fd, 128)?;
    Ok(fd)
}

/// Connects to `port` on 127.0.0.1, else on ::1 (servers that bind `localhost` may take
/// either); the first address's error when neither listens.
fn connect_loopback(port: u16) -> std::io::Result<TcpStream> {
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
    TcpStream::connect_timeout(&v4, CONNECT_TIMEOUT)
        .or_else(|e| TcpStream::connect_timeout(&v6, CONNECT_TIMEOUT).map_err(|_| e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_made_on_the_other_side_and_refusals_come_back() {
        let (harness, init) = super::super::control::pair().expect("pair");
        let server = std::thread::spawn(move || serve(init));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listen");
        let port = listener.local_addr().expect("addr").port();
        let connector = Connector::new(harness);
        let stream = connector.connect(port).expect("connected");
        let (accepted, _) = listener.accept().expect("accept");
        assert_eq!(
            stream.local_addr().expect("local"),
            accepted.peer_addr().expect("peer")
        );
        drop(listener);
        let refused = connector.connect(port).expect_err("nothing listens");
        assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
        // A listener on demand, bound on the other side.
        let listener = connector
            .listen(IpAddr::V4(Ipv4Addr::LOCALHOST), 0)
            .expect("listener");
        let at = listener.local_addr().expect("addr");
        assert!(at.ip().is_loopback() && at.port() != 0, "{at}");
        let _client = TcpStream::connect(at).expect("connect");
        listener.accept().expect("accepted");
        drop(connector);
        server
            .join()
            .expect("the init's loop ends with the harness's end");
    }
}
