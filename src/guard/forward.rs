//! The server's network, served by guard: every address in the sandbox's network namespace is
//! routed to its loopback, so nothing leaves it but through here. The DNS stub answers a name
//! with what the host resolves for it while the calls in flight may reach the open world, and
//! refuses it (logging the name) otherwise; a TCP connection lands on a listener opened on
//! demand at the very address and port the server dialled, and is forwarded out of the
//! namespace, from the host, when the policy in force at that moment is open-world, and reset
//! otherwise. The decision rests on guard's own state at the moment the connection arrives,
//! never on the server's memory. Datagrams other than DNS are not forwarded.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::journal::{Entry, Refusals, Tried};
use super::policy::Rule;
use crate::observe::net::{build_reply, is_local_name, parse_query};
use crate::sandbox::process::NetworkSockets;

/// Most connections forwarded at once (each holds two threads); past it, connections are
/// reset.
const MAX_CONNECTIONS: usize = 256;

/// Most lookups resolved at once; past it, queries go unanswered (the resolver retries).
const MAX_LOOKUPS: usize = 32;

/// How long a forwarded connection may take to open on the host.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Names answered with an address of guard's choosing (`--resolve NAME=ADDR`): the server is
/// told a documentation address (198.51.100.0/24), and what it sends there goes to `ADDR`
/// from the host (a service on the host's loopback, which the server's own loopback hides).
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    names: Vec<(String, IpAddr, IpAddr)>,
}

impl Resolved {
    /// Reads `NAME=ADDR` items.
    pub fn parse(items: &[String]) -> Result<Resolved, String> {
        let mut names = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let (name, addr) = item
                .split_once('=')
                .ok_or_else(|| format!("--resolve {item}: expected NAME=ADDR"))?;
            let name = name.trim().trim_end_matches('.').to_ascii_lowercase();
            if name.is_empty() {
                return Err(format!("--resolve {item}: the name is empty"));
            }
            let real: IpAddr = addr
                .trim()
                .parse()
                .map_err(|_| format!("--resolve {item}: {addr:?} is not an IP address"))?;
            if i >= 200 {
                return Err("--resolve: at most 200 names".into());
            }
            let told = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10 + i as u8));
            names.push((name, told, real));
        }
        Ok(Resolved { names })
    }

    fn told(&self, name: &str) -> Option<IpAddr> {
        self.names
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, t, _)| *t)
    }

    fn real(&self, told: IpAddr) -> Option<IpAddr> {
        self.names
            .iter()
            .find(|(_, t, _)| *t == told)
            .map(|(_, _, r)| *r)
    }
}

/// How often the threads that wait on the namespace's sockets look whether to stop.
const STOP_POLL: Duration = Duration::from_millis(500);

/// What ends the forwarder's threads when the server's sandbox ends (guard runs one per HTTP
/// session: each ended session must take its threads, sockets and namespace with it).
#[derive(Debug, Default)]
pub struct Forwarder {
    stopped: AtomicBool,
    /// Sockets shut down at the stop (listeners, forwarded connections), by key.
    sockets: Mutex<HashMap<u64, Vec<OwnedFd>>>,
    next: AtomicU64,
}

impl Forwarder {
    /// Keeps copies of `fds` to shut down at the stop; the key releases them.
    fn hold(&self, fds: Vec<OwnedFd>) -> Option<u64> {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.sockets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, fds);
        if self.stopped.load(Ordering::Acquire) {
            self.stop();
            return None;
        }
        Some(key)
    }

    fn release(&self, key: u64) {
        self.sockets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// Stops every thread: blocked accepts and copies return, the DNS stub sees the flag.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let held: Vec<OwnedFd> = self
            .sockets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .flat_map(|(_, fds)| fds)
            .collect();
        for fd in &held {
            let _ = rustix::net::shutdown(fd, rustix::net::Shutdown::Both);
        }
    }
}

/// Owns a forwarder: dropped (the server ended, or its launch failed after the network was
/// handed over), it stops it.
#[derive(Debug)]
pub struct Forwarding(Arc<Forwarder>);

impl Drop for Forwarding {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// A copy of a socket's descriptor, to shut it down from another thread.
fn copy_of<S: std::os::fd::AsFd>(socket: &S) -> Option<OwnedFd> {
    socket.as_fd().try_clone_to_owned().ok()
}

/// Serves the namespace's sockets: the DNS stub, and each listener opened on demand, until
/// the returned forwarder is stopped.
pub fn start(sockets: NetworkSockets, refusals: Refusals, resolved: Arc<Resolved>) -> Forwarding {
    // Guard reads no packets: the namespace's routes keep everything inside.
    drop(sockets.packets);
    let forwarder = Arc::new(Forwarder::default());
    let connections = Arc::new(AtomicUsize::new(0));
    {
        let (refusals, resolved, forwarder) =
            (refusals.clone(), resolved.clone(), forwarder.clone());
        let dns = sockets.dns;
        let _ = std::thread::Builder::new()
            .name("guard-dns".into())
            .spawn(move || dns_loop(dns, refusals, resolved, &forwarder));
    }
    let mut listeners = sockets.listeners;
    let more = sockets.more_listeners;
    let stop = forwarder.clone();
    let _ = std::thread::Builder::new()
        .name("guard-listeners".into())
        .spawn(move || {
            let serve = |listener: TcpListener| {
                if stop
                    .hold(copy_of(&listener).into_iter().collect())
                    .is_none()
                {
                    return;
                }
                let (refusals, resolved, connections, stop) = (
                    refusals.clone(),
                    resolved.clone(),
                    connections.clone(),
                    stop.clone(),
                );
                let _ = std::thread::Builder::new()
                    .name("guard-accept".into())
                    .spawn(move || accept_loop(listener, refusals, resolved, connections, &stop));
            };
            for (_, l) in listeners.drain(..) {
                serve(l);
            }
            while !stop.stopped() {
                match more.recv_timeout(STOP_POLL) {
                    Ok((_, l)) => serve(l),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
        });
    Forwarding(forwarder)
}

/// An address as the kernel gives it (an IPv4 address of a dual-stack listener is
/// IPv4-mapped IPv6), plain.
fn plain(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn accept_loop(
    listener: TcpListener,
    refusals: Refusals,
    resolved: Arc<Resolved>,
    connections: Arc<AtomicUsize>,
    forwarder: &Arc<Forwarder>,
) {
    for conn in listener.incoming() {
        if forwarder.stopped() {
            break;
        }
        let Ok(conn) = conn else {
            continue;
        };
        let Ok(local) = conn.local_addr() else {
            continue;
        };
        let destination = SocketAddr::new(plain(local.ip()), local.port());
        if refused_here(&refusals, "connect", destination.to_string()) {
            reset(conn);
            continue;
        }
        if connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            connections.fetch_sub(1, Ordering::SeqCst);
            reset(conn);
            continue;
        }
        let target = SocketAddr::new(
            resolved.real(destination.ip()).unwrap_or(destination.ip()),
            destination.port(),
        );
        let (connections, forwarder) = (connections.clone(), forwarder.clone());
        let _ = std::thread::Builder::new()
            .name("guard-forward".into())
            .spawn(move || {
                if let Ok(out) = TcpStream::connect_timeout(&target, CONNECT_TIMEOUT) {
                    let held = forwarder.hold(
                        [copy_of(&conn), copy_of(&out)]
                            .into_iter()
                            .flatten()
                            .collect(),
                    );
                    if let Some(key) = held {
                        splice(conn, out);
                        forwarder.release(key);
                    }
                } else {
                    reset(conn);
                }
                connections.fetch_sub(1, Ordering::SeqCst);
            });
    }
}

/// Whether the policy in force now is closed-world: then `operation` towards `destination`
/// is refused and recorded (seen at the forwarder: no process is known).
fn refused_here(refusals: &Refusals, operation: &str, destination: String) -> bool {
    let now = refusals.window().now();
    if !now.policy.closed_world {
        return false;
    }
    let entry = Entry::refusal(
        &now,
        Some(Rule::ClosedWorld),
        &Tried {
            operation,
            destination: Some(destination),
            ..Tried::default()
        },
        operation,
        None,
        None,
    );
    refusals.record(&now, entry);
    true
}

/// Ends a connection with a reset (the server sees it refused).
fn reset(conn: TcpStream) {
    let _ = rustix::net::sockopt::set_socket_linger(&conn, Some(Duration::ZERO));
    drop(conn);
}

/// Copies both ways until both sides are done.
fn splice(inside: TcpStream, outside: TcpStream) {
    let (Ok(inside2), Ok(outside2)) = (inside.try_clone(), outside.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || pump(inside2, outside2));
    pump(outside, inside);
    let _ = up.join();
}

fn pump(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

fn dns_loop(sock: UdpSocket, refusals: Refusals, resolved: Arc<Resolved>, forwarder: &Forwarder) {
    let _ = sock.set_read_timeout(Some(STOP_POLL));
    let sock = Arc::new(sock);
    let lookups = Arc::new(AtomicUsize::new(0));
    let mut buf = [0u8; 1500];
    while !forwarder.stopped() {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let Some((asked, qtype, question_end)) = parse_query(&buf[..n]) else {
            continue;
        };
        let question = buf[..question_end].to_vec();
        let name = asked.to_ascii_lowercase();
        let name = name.trim_end_matches('.').to_string();
        if is_local_name(&name) {
            let answer = match qtype {
                1 => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
                28 => Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
                _ => None,
            };
            let _ = sock.send_to(&build_reply(&question, answer), from);
            continue;
        }
        if refused_here(&refusals, "dns", name.chars().take(253).collect()) {
            let mut reply = build_reply(&question, None);
            reply[3] = 0x85; // REFUSED
            let _ = sock.send_to(&reply, from);
            continue;
        }
        if let Some(told) = resolved.told(&name) {
            let answer =
                matches!((qtype, told), (1, IpAddr::V4(_)) | (28, IpAddr::V6(_))).then_some(told);
            let _ = sock.send_to(&build_reply(&question, answer), from);
            continue;
        }
        if lookups.fetch_add(1, Ordering::SeqCst) >= MAX_LOOKUPS {
            lookups.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let (sock, lookups) = (sock.clone(), lookups.clone());
        let _ = std::thread::Builder::new()
            .name("guard-lookup".into())
            .spawn(move || {
                let reply = lookup(&name, qtype, &question);
                let _ = sock.send_to(&reply, from);
                lookups.fetch_sub(1, Ordering::SeqCst);
            });
    }
}

/// The host's answer to a query for `name` of type `qtype` (A or AAAA; other types get an
/// empty answer), or NXDOMAIN.
fn lookup(name: &str, qtype: u16, question: &[u8]) -> Vec<u8> {
    use std::net::ToSocketAddrs;
    let found: Option<Vec<IpAddr>> = (name, 0)
        .to_socket_addrs()
        .ok()
        .map(|a| a.map(|s| s.ip()).collect());
    let Some(found) = found else {
        let mut reply = build_reply(question, None);
        reply[3] = 0x83; // NXDOMAIN
        return reply;
    };
    let answer = found.into_iter().find(|ip| match qtype {
        1 => ip.is_ipv4(),
        28 => ip.is_ipv6(),
        _ => false,
    });
    build_reply(question, answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_names_get_documentation_addresses_that_map_back() {
        let r = Resolved::parse(&["Outside.test=127.0.0.1".into(), "b.test=::1".into()])
            .expect("parse");
        let told = r.told("outside.test").expect("told");
        assert_eq!(told, IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10)));
        assert_eq!(r.real(told), Some(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        assert!(r.told("other.test").is_none());
        for bad in ["nothing", "=1.2.3.4", "a.test=not-an-ip"] {
            assert!(Resolved::parse(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
