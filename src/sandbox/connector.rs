//! Connections into the sandbox's network namespace, for servers that speak HTTP: the
//! sandbox's outer init lives in that namespace and answers each request for a port with a
//! TCP socket it connected there (to 127.0.0.1, else ::1), passed back over a socket pair.
//! Nothing listens on the host, and the harness never enters the namespace (unprivileged it
//! could not: `setns` into a network namespace needs `CAP_SYS_ADMIN` in the caller's own user
//! namespace too). A request is the port (two bytes, big endian); the answer is an errno (four
//! bytes, 0 when connected) with the socket attached.

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// How long the init waits for one connection on the sandbox's loopback.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The harness's end: asks the init for connections.
pub struct Connector {
    socket: Mutex<OwnedFd>,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Connector")
    }
}

impl Connector {
    /// Wraps the harness's end of the pair the init handed over.
    pub fn new(socket: OwnedFd) -> Connector {
        Connector {
            socket: Mutex::new(socket),
        }
    }

    /// A TCP socket connected to `port` on the sandbox's loopback (blocking; one request at a
    /// time). `ConnectionRefused` while nothing listens there yet.
    pub fn connect(&self, port: u16) -> std::io::Result<TcpStream> {
        let socket = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        rustix::net::send(socket.as_fd(), &port.to_be_bytes(), SendFlags::NOSIGNAL)?;
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
            (0, Some(fd)) => Ok(TcpStream::from(fd)),
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
    let mut request = [0u8; 2];
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
    if n != 2 {
        return true;
    }
    let port = u16::from_be_bytes(request);
    let connected = connect_loopback(port);
    let (errno, stream) = match &connected {
        Ok(s) => (0, Some(s)),
        Err(e) => (e.raw_os_error().unwrap_or(libc::ECONNREFUSED), None),
    };
    let fds: Vec<_> = stream.iter().map(|s| s.as_fd()).collect();
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
        drop(connector);
        server
            .join()
            .expect("the init's loop ends with the harness's end");
    }
}
