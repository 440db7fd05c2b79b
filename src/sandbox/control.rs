//! The control channel between the harness and the sandbox's init: a `SOCK_SEQPACKET` pair
//! (message boundaries are kept, file descriptors travel with `SCM_RIGHTS`) carrying typed
//! records as JSON. The init side reports what it enforced, or which step failed with which
//! errno; the harness reads until the socket closes, which happens when the server's `execve`
//! closes the last (close-on-exec) copy.

#![allow(unsafe_code)]

use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use serde::{Deserialize, Serialize};

/// Largest record accepted.
const MAX_RECORD: usize = 64 * 1024;

/// What the init side says.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum ControlRecord {
    /// Everything the sandbox enforced, sent by the server child just before `execve`.
    Enforced(super::Enforcement),
    /// A step failed; in `required` mode nothing was started.
    Failed(StepFailure),
    /// The network observer's sockets follow: the DNS socket, then one listener per port, then
    /// the packet socket on `lo` unless `packet_error` says why there is none.
    Network {
        /// The listeners' ports, in the order of the descriptors after the DNS socket.
        ports: Vec<u16>,
        /// Why the packet socket could not be made, if it could not.
        packet_error: Option<String>,
    },
    /// The harness's end of the connector follows (see [`super::connector`]).
    Connector,
}

/// A failed step.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StepFailure {
    /// The step (`unshare`, `uid_map`, `landlock`, `exec`, …).
    pub step: String,
    /// The errno, when a system call failed.
    pub errno: Option<i32>,
    /// What happened.
    pub message: String,
}

/// Creates the socket pair: (harness end, init end). Both are close-on-exec.
pub fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    Ok(rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?)
}

/// Sends one record with optional file descriptors. Errors are returned, never panicked on.
pub fn send(
    socket: BorrowedFd<'_>,
    record: &ControlRecord,
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other(
            "too many file descriptors for one record",
        ));
    }
    rustix::net::sendmsg(
        socket,
        &[IoSlice::new(&bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    Ok(())
}

/// Receives one record; `None` when the other side closed the channel.
pub fn recv(socket: BorrowedFd<'_>) -> std::io::Result<Option<(ControlRecord, Vec<OwnedFd>)>> {
    let mut buf = vec![0u8; MAX_RECORD];
    let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(4))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let msg = loop {
        match rustix::net::recvmsg(
            socket,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            other => break other?,
        }
    };
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = m {
            fds.extend(received);
        }
    }
    if msg.bytes == 0 {
        return Ok(None);
    }
    let record = serde_json::from_slice(&buf[..msg.bytes.min(buf.len())])
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    Ok(Some((record, fds)))
}

/// What the child that becomes the sandbox's init does between `fork` and `exec`: it puts
/// its end of the control socket, `init_fd`, on [`super::init::CONTROL_FD`] without
/// close-on-exec (`dup2`, or `fcntl` when it already is that descriptor: `dup2` onto itself
/// would keep close-on-exec set). Async-signal-safe: two system calls, no allocation.
pub fn onto_control_fd(init_fd: std::os::fd::RawFd) -> impl FnMut() -> std::io::Result<()> {
    move || {
        // SAFETY: plain system calls on descriptor numbers, in the forked child.
        let r = unsafe {
            if init_fd == super::init::CONTROL_FD {
                libc::fcntl(init_fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(init_fd, super::init::CONTROL_FD)
            }
        };
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// Borrows an owned descriptor (a convenience for callers holding `OwnedFd`s).
pub fn borrow(fd: &OwnedFd) -> BorrowedFd<'_> {
    fd.as_fd()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_descriptors_cross_the_pair_and_close_is_seen() {
        let (a, b) = pair().expect("socketpair");
        let (extra, _keep) = pair().expect("another pair to send");
        let failure = ControlRecord::Failed(StepFailure {
            step: "unshare".into(),
            errno: Some(1),
            message: "EPERM".into(),
        });
        send(b.as_fd(), &failure, &[extra.as_fd()]).expect("send");
        drop(b);
        let (got, fds) = recv(a.as_fd()).expect("recv").expect("a record");
        assert_eq!(got, failure);
        assert_eq!(fds.len(), 1);
        assert!(recv(a.as_fd()).expect("recv").is_none(), "closed");
    }
}
