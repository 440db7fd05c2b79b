//! The lo-local network observer. Inside the sandbox's network namespace every address is
//! routed to `lo`; the sandbox hands us a UDP socket on port 53, TCP listeners (80, 443, and
//! later, on demand, one for each other address and port a server connects to) and a packet
//! socket on `lo`. The DNS stub answers every name with an address of its own
//! (198.18.0.0/15, fc00:5eed::/96), so later connections map back to names; the listeners read
//! what each connection sends (HTTP requests whole, inside TLS too, answered like a small
//! ordinary site or, at 169.254.169.254, as a cloud's metadata endpoint) and close; the packet
//! socket sees every outgoing TCP SYN and every datagram whole, whichever system call sent it
//! (`sendmsg`, a connected UDP `send`). What was sent is kept on the events for the scan for
//! planted secrets. Nothing here ever talks to a real network.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{ObserveError, Observer, ObserverStatus, ServerStart};
use crate::evidence::{Carried, Mechanism, NetEvent, NetKind, Observation};

/// Names the DNS stub handed out, both ways.
#[derive(Debug, Default)]
pub struct FakeNames {
    by_name_v4: HashMap<String, Ipv4Addr>,
    by_name_v6: HashMap<String, Ipv6Addr>,
    by_ip: HashMap<IpAddr, String>,
}

impl FakeNames {
    fn v4(&mut self, name: &str) -> Ipv4Addr {
        let next = self.by_name_v4.len() as u32 + 1;
        let ip = *self
            .by_name_v4
            .entry(name.to_string())
            .or_insert_with(|| Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 18, 0, 0)) + next));
        self.by_ip.insert(IpAddr::V4(ip), name.to_string());
        ip
    }

    fn v6(&mut self, name: &str) -> Ipv6Addr {
        let next = self.by_name_v6.len() as u128 + 1;
        let base = u128::from(Ipv6Addr::new(0xfc00, 0x5eed, 0, 0, 0, 0, 0, 0));
        let ip = *self
            .by_name_v6
            .entry(name.to_string())
            .or_insert_with(|| Ipv6Addr::from(base + next));
        self.by_ip.insert(IpAddr::V6(ip), name.to_string());
        ip
    }

    /// The name behind a fake address (also in its v4-mapped v6 form).
    pub fn name_of(&self, ip: IpAddr) -> Option<String> {
        self.by_ip
            .get(&ip.to_canonical())
            .or_else(|| self.by_ip.get(&ip))
            .cloned()
    }
}

/// What the network service threads share with the observer.
#[derive(Debug, Default)]
pub struct NetState {
    /// The fake names.
    pub names: Mutex<FakeNames>,
    events: Mutex<Vec<NetEvent>>,
    stop: AtomicBool,
    /// Readable once the service is stopped: the threads waiting in poll wake at once and
    /// close their sockets (closing the packet socket waits for a grace period, which then
    /// runs beside the rest of the run instead of in the process's exit).
    wake: Option<std::os::fd::OwnedFd>,
    /// The packet socket, read by its thread and drained at every checkpoint too.
    packets: Option<std::os::fd::OwnedFd>,
    /// The run's certificate authority: with it, TLS connections are completed.
    authority: Option<Arc<super::tls::Authority>>,
    /// The instance credentials the metadata endpoint hands out, when canaries are planted.
    metadata: Option<super::metadata::CloudMetadata>,
    /// Bytes the events since the last checkpoint carry.
    carried_kept: AtomicUsize,
    /// Bytes sent past [`CARRIED_BUDGET`] since the last report of them: not scanned.
    unscanned: AtomicUsize,
    /// Connections being read and answered now.
    connections: AtomicUsize,
}

/// A running network observer service.
pub type NetHandle = Arc<NetState>;

/// Most events kept between checkpoints.
const EVENT_CAP: usize = 10_000;

/// Most bytes the events between two checkpoints carry for the secret scan: a flood is not
/// held in memory (what is past it goes unscanned, with a note).
const CARRIED_BUDGET: usize = 16 << 20;

/// Most connections read at once, each on a thread of its own; more wait for one to end.
const MAX_CONNECTIONS: usize = 32;

/// Most bytes read from a connection that is neither HTTP nor TLS.
const MAX_RAW_READ: usize = 64 << 10;

/// The longest one connection is read: a client that trickles its bytes holds a thread no
/// longer.
const CONNECTION_TIME: Duration = Duration::from_secs(3);

/// A connection whose reads end when its time is up (each waits 500 ms at most).
struct Bounded {
    conn: std::net::TcpStream,
    until: std::time::Instant,
    /// The longest one read waits (shared with the answer, which shortens it once the
    /// request is read).
    patience: std::rc::Rc<std::cell::Cell<Duration>>,
}

/// How long a client may pause once it has been answered before its connection is closed:
/// an honest client closes at once (the answer says `Connection: close`); what a client
/// sends meanwhile (a second request on the connection) is kept with the first.
const AFTER_ANSWER_PATIENCE: Duration = Duration::from_millis(150);

impl Read for Bounded {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self
            .until
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        self.conn
            .set_read_timeout(Some(left.min(self.patience.get())))?;
        self.conn.read(buf)
    }
}

impl Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.conn.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.conn.flush()
    }
}

impl NetState {
    /// Records an event; one alike an event already recorded joins its carried bytes to
    /// that one's (a secret split across two requests to one place is whole again). Carried
    /// bytes past [`CARRIED_BUDGET`] are dropped and counted.
    fn push(&self, mut e: NetEvent) {
        let n = e.carried.bytes().len();
        if n > 0 && self.carried_kept.fetch_add(n, Ordering::SeqCst) + n > CARRIED_BUDGET {
            self.unscanned.fetch_add(n, Ordering::SeqCst);
            e.carried = Carried::default();
        }
        let mut ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(same) = ev.iter_mut().find(|x| **x == e) {
            // A name asked again is the same name: its bytes are not joined to themselves;
            // what the rest of the query carried (other questions, EDNS) is, each time.
            let more = if e.kind == NetKind::Dns {
                let carried = e.carried.bytes();
                carried
                    .iter()
                    .position(|b| *b == DNS_REST)
                    .map(|i| {
                        let mut rest = vec![if same.carried.bytes().contains(&DNS_REST) {
                            b'\n'
                        } else {
                            DNS_REST
                        }];
                        rest.extend_from_slice(&carried[i + 1..]);
                        Carried::of(&rest)
                    })
                    .unwrap_or_default()
            } else {
                e.carried.take()
            };
            let dropped = same.carried.join(more);
            self.unscanned.fetch_add(dropped, Ordering::SeqCst);
        } else if ev.len() < EVENT_CAP {
            ev.push(e);
        }
    }

    /// Reads what the packet socket holds now, each packet an event. A packet is queued on the
    /// socket as the server sends it (lo delivers to packet sockets in the sender's own system
    /// call), so a checkpoint that drains it misses nothing the server sent before its
    /// answer, however late the packet thread is scheduled.
    fn drain_packets(&self) {
        let Some(fd) = &self.packets else { return };
        let mut buf = vec![0u8; 1 << 16];
        while let Ok((n, _)) = rustix::net::recv(fd, &mut buf, rustix::net::RecvFlags::DONTWAIT) {
            let Some(packet) = parse_packet(&buf[..n]) else {
                continue;
            };
            if let Some(e) = packet_event(&packet, self) {
                self.push(e);
            }
        }
    }

    /// Stops the service threads (they wake at once where they wait in poll, or notice
    /// within 200 ms without a wake-up; nobody waits for them).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(wake) = &self.wake {
            let _ = rustix::io::write(wake, &1u64.to_ne_bytes());
        }
    }
}

/// Starts the DNS stub, the listeners and the packet reader on sockets made inside the sandbox.
pub fn start(
    dns: UdpSocket,
    listeners: Vec<(u16, TcpListener)>,
    more_listeners: Option<std::sync::mpsc::Receiver<(u16, TcpListener)>>,
    packets: Option<std::os::fd::OwnedFd>,
    authority: Option<Arc<super::tls::Authority>>,
    metadata: Option<super::metadata::CloudMetadata>,
) -> NetHandle {
    let has_packets = packets.is_some();
    let state: NetHandle = Arc::new(NetState {
        authority,
        metadata,
        packets,
        wake: rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::CLOEXEC | rustix::event::EventfdFlags::NONBLOCK,
        )
        .ok(),
        ..NetState::default()
    });
    if has_packets {
        let s = state.clone();
        let _ = std::thread::Builder::new()
            .name("packets".into())
            .spawn(move || packet_loop(s));
    }
    let s = state.clone();
    let _ = dns.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = std::thread::Builder::new()
        .name("dns-stub".into())
        .spawn(move || dns_loop(dns, s));
    for (port, listener) in listeners {
        listen_on(listener, port, &state);
    }
    // Listeners opened on demand, for the ports a server connects to, as they come.
    if let Some(more) = more_listeners {
        let s = state.clone();
        let _ = std::thread::Builder::new()
            .name("listeners".into())
            .spawn(move || {
                while !s.stop.load(Ordering::SeqCst) {
                    match more.recv_timeout(Duration::from_millis(200)) {
                        Ok((port, listener)) => listen_on(listener, port, &s),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                }
            });
    }
    state
}

/// Accepts on `listener` (port `port`) on a thread of its own until the service stops.
fn listen_on(listener: TcpListener, port: u16, state: &NetHandle) {
    let s = state.clone();
    let _ = listener.set_nonblocking(true);
    let _ = std::thread::Builder::new()
        .name(format!("listener-{port}"))
        .spawn(move || accept_loop(listener, port, s));
}

fn dns_loop(sock: UdpSocket, state: NetHandle) {
    let mut buf = [0u8; 1500];
    while !state.stop.load(Ordering::SeqCst) {
        if !readable_soon(&sock, &state) {
            continue;
        }
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        let Some((asked, qtype, question_end)) = parse_query(&buf[..n]) else {
            // A datagram to port 53 that is not a usable question is never answered. The
            // packet socket reports those whose header is not a query's (with the address
            // they were aimed at); the rest, a query's header with garbage after it, only the
            // stub sees.
            if !looks_like_dns_query(&buf[..n]) {
                continue;
            }
            state.push(NetEvent {
                kind: NetKind::Datagram,
                destination: "resolver".into(),
                port: Some(53),
                name: None,
                loopback: false,
                mechanism: Mechanism::Dns,
                payload: Some(format!("malformed DNS ({n} bytes)")),
                carried: Carried::of(&buf[..n]),
            });
            continue;
        };
        // Names are told apart without case; the case asked is kept for the secret scan
        // (base64 in a label loses its meaning in lower case).
        let name = asked.to_ascii_lowercase();
        // The sandbox's own host name (git and many runtimes look it up to build an
        // identity) and `localhost` names are answered with loopback and are not external.
        let local = is_local_name(&name);
        let answer = if local {
            match qtype {
                1 => Some(IpAddr::V4(Ipv4Addr::LOCALHOST)),
                28 => Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
                _ => None,
            }
        } else {
            let mut names = state.names.lock().unwrap_or_else(|p| p.into_inner());
            match qtype {
                1 => Some(IpAddr::V4(names.v4(&name))),
                28 => Some(IpAddr::V6(names.v6(&name))),
                _ => None,
            }
        };
        state.push(NetEvent {
            kind: NetKind::Dns,
            destination: name.clone(),
            port: None,
            name: Some(name),
            loopback: local,
            mechanism: Mechanism::Dns,
            payload: Some(match qtype {
                1 => "A".to_string(),
                28 => "AAAA".to_string(),
                other => format!("type {other}"),
            }),
            // The name as asked, then what the rest of the query carries (see
            // [`DNS_REST`]).
            carried: Carried::of(&{
                let rest = rest_of_query(&buf[..n], question_end);
                let mut carried = asked.clone().into_bytes();
                if !rest.is_empty() {
                    carried.push(DNS_REST);
                    carried.extend_from_slice(&rest);
                }
                carried
            }),
        });
        let reply = build_reply(&buf[..question_end], answer);
        let _ = sock.send_to(&reply, from);
    }
}

/// In a DNS event's carried bytes, what separates the name asked from the rest of the query
/// (other questions' names, other records' bytes): a byte no name holds.
pub const DNS_REST: u8 = 0;

/// Names that stay inside the sandbox: its host name and `localhost`.
pub fn is_local_name(name: &str) -> bool {
    let name = name.trim_end_matches('.');
    let host = crate::sandbox::sandbox_hostname();
    name == host
        || name == "localhost"
        || name.ends_with(".localhost")
        || name
            .strip_prefix(host)
            .is_some_and(|rest| rest.starts_with('.'))
}

/// Whether a datagram starts like a DNS query: a full header, the response bit clear, a
/// standard query with at least one question. The packet socket, which sees only a datagram's
/// first bytes, leaves these to the stub.
pub fn looks_like_dns_query(b: &[u8]) -> bool {
    b.len() >= 12 && b[2] & 0xf8 == 0 && u16::from_be_bytes([b[4], b[5]]) > 0
}

/// (name as asked, qtype, end of the question section) of a standard query.
pub fn parse_query(b: &[u8]) -> Option<(String, u16, usize)> {
    if b.len() < 12 || b[2] & 0x80 != 0 || u16::from_be_bytes([b[4], b[5]]) == 0 {
        return None;
    }
    parse_question(b, 12)
}

/// The parts of a query past its first question that can carry data: the names of its
/// other questions (at most 8), one a line, then the bytes of its other records (EDNS
/// options among them) as they are; empty when there are none.
pub fn rest_of_query(b: &[u8], first_end: usize) -> Vec<u8> {
    let questions = u16::from_be_bytes([b[4], b[5]]);
    let mut out = Vec::new();
    let mut off = first_end;
    for _ in 1..questions.min(8) {
        let Some((name, _, end)) = parse_question(b, off) else {
            break;
        };
        out.extend_from_slice(name.as_bytes());
        out.push(b'\n');
        off = end;
    }
    if let Some(rest) = b.get(off..) {
        out.extend_from_slice(rest);
    }
    out
}

/// The question at `off`: its name, type, and where it ends.
fn parse_question(b: &[u8], mut off: usize) -> Option<(String, u16, usize)> {
    let mut labels = Vec::new();
    loop {
        let len = *b.get(off)? as usize;
        if len == 0 {
            off += 1;
            break;
        }
        if len & 0xc0 != 0 || labels.len() > 127 {
            return None;
        }
        labels.push(String::from_utf8_lossy(b.get(off + 1..off + 1 + len)?).into_owned());
        off += 1 + len;
    }
    let qtype = u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]);
    Some((labels.join("."), qtype, off + 4))
}

/// A reply that copies the question and answers it with `answer` (TTL 5 s), or no answer.
pub fn build_reply(question: &[u8], answer: Option<IpAddr>) -> Vec<u8> {
    let mut r = question.to_vec();
    r[2] = 0x84 | (question[2] & 0x01); // response, authoritative, keep RD
    r[3] = 0x80; // recursion available, NOERROR
    r[4..6].copy_from_slice(&1u16.to_be_bytes());
    r[6..8].copy_from_slice(&(answer.is_some() as u16).to_be_bytes());
    r[8..12].fill(0);
    if let Some(ip) = answer {
        r.extend_from_slice(&[0xc0, 0x0c]); // name: pointer to the question
        let (rtype, data): (u16, Vec<u8>) = match ip {
            IpAddr::V4(v4) => (1, v4.octets().to_vec()),
            IpAddr::V6(v6) => (28, v6.octets().to_vec()),
        };
        r.extend_from_slice(&rtype.to_be_bytes());
        r.extend_from_slice(&1u16.to_be_bytes()); // class IN
        r.extend_from_slice(&5u32.to_be_bytes()); // TTL
        r.extend_from_slice(&(data.len() as u16).to_be_bytes());
        r.extend_from_slice(&data);
    }
    r
}

fn accept_loop(listener: TcpListener, port: u16, state: NetHandle) {
    while !state.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((conn, _peer)) => {
                // Each connection is read on a thread of its own (a client that sends slowly
                // does not hold up the next), up to a bound; past it, on this one.
                if state.connections.fetch_add(1, Ordering::SeqCst) < MAX_CONNECTIONS {
                    let s = state.clone();
                    let spawned = std::thread::Builder::new()
                        .name(format!("connection-{port}"))
                        .spawn(move || {
                            serve_connection(conn, port, &s);
                            s.connections.fetch_sub(1, Ordering::SeqCst);
                        });
                    if spawned.is_err() {
                        state.connections.fetch_sub(1, Ordering::SeqCst);
                    }
                } else {
                    serve_connection(conn, port, &state);
                    state.connections.fetch_sub(1, Ordering::SeqCst);
                }
            }
            // Nothing to accept: sleep in poll until a connection arrives (or a stop may have
            // come), instead of waking up every few milliseconds on a busy machine.
            Err(_) => {
                readable_soon(&listener, &state);
            }
        }
    }
}

/// Reads what the server sends on one connection and answers it as the other side would: an
/// HTTP request (its head, and its body up to its length) gets what it asks for from a small,
/// ordinary site, so that a fetching tool can finish its work (and show what it does with
/// it); HTTPS the same, inside TLS with a certificate of the run's authority; anything else is
/// read until the client pauses, and closed. The event is recorded before the answer goes
/// out: a client that waits for it has its event in the window of the call that made it.
fn serve_connection(conn: std::net::TcpStream, port: u16, state: &NetState) {
    // Every address is local: the local address is where the server connected.
    let dest = conn.local_addr().ok();
    let _ = conn.set_nonblocking(false);
    let mut conn = Bounded {
        conn,
        until: std::time::Instant::now() + CONNECTION_TIME,
        patience: std::rc::Rc::new(std::cell::Cell::new(Duration::from_millis(500))),
    };
    let mut buf = vec![0u8; 4096];
    let n = conn.read(&mut buf).unwrap_or(0);
    buf.truncate(n);
    let dest_ip = dest.map(|d| d.ip().to_canonical());
    let name = dest_ip.and_then(|ip| {
        state
            .names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .name_of(ip)
    });
    let event = |payload: Option<String>, carried: &[u8]| NetEvent {
        kind: NetKind::Connect,
        destination: dest_ip.map(|ip| ip.to_string()).unwrap_or_default(),
        port: Some(dest.map(|d: SocketAddr| d.port()).unwrap_or(port)),
        name: name.clone(),
        loopback: dest_ip.is_some_and(|ip| ip.is_loopback()),
        mechanism: Mechanism::Payload,
        payload,
        carried: Carried::of(carried),
    };
    let hello = describe_payload(&buf);
    let is_client_hello = n > 5 && buf[0] == 0x16 && buf[5] == 0x01;
    let tls_config = is_client_hello
        .then_some(state.authority.as_ref())
        .flatten()
        .and_then(|a| a.server_config(dest_ip));
    // Past its first bytes, a request is waited for as long as the connection may last: a
    // client that pauses before its body still sends it.
    conn.patience.set(CONNECTION_TIME);
    let patience = conn.patience.clone();
    if let Some(config) = tls_config {
        let mut recorded = None;
        let after = super::tls::serve(config, &buf, &mut conn, |request| {
            let payload = match (hello.as_deref(), describe_payload(&request.head)) {
                (Some(tls), Some(inside)) => Some(format!("{tls}; {inside}")),
                (tls, _) => tls.map(str::to_string),
            };
            state.push(event(payload.clone(), &request.carried));
            recorded = Some(payload);
            patience.set(AFTER_ANSWER_PATIENCE);
            super::web::answer(&request.head)
        });
        match recorded {
            // What came after the answer joins the request's bytes.
            Some(payload) => {
                if let Some((_, after)) = after.filter(|(_, a)| !a.is_empty()) {
                    state.push(event(payload, &after));
                }
            }
            None => state.push(event(hello, &[])),
        }
    } else if is_client_hello {
        state.push(event(hello, &[]));
    } else if super::web::served_for(&buf).is_some() {
        let request = super::web::read_request(buf, &mut conn);
        state.push(event(describe_payload(&request.head), &request.carried));
        // The cloud metadata endpoint hands out the planted instance credentials.
        let reply = match &state.metadata {
            Some(m) if super::metadata::is_endpoint(dest_ip, &request.head) => {
                m.answer(&request.head)
            }
            _ => super::web::answer(&request.head),
        };
        if let Some(reply) = reply {
            let _ = conn.write_all(&reply);
        }
        // The answer is whole: a client that reads until the end has it at once. What it
        // sends after (a second request on the connection) joins the request's bytes.
        let _ = conn.conn.shutdown(std::net::Shutdown::Write);
        conn.patience.set(AFTER_ANSWER_PATIENCE);
        let after = super::web::read_on(&mut conn, MAX_RAW_READ);
        if !after.is_empty() {
            state.push(event(describe_payload(&request.head), &after));
        }
    } else {
        // Another protocol: what it sends until it pauses (or waits for an answer that
        // never comes).
        conn.patience.set(Duration::from_millis(150));
        if n > 0 {
            let more = super::web::read_on(&mut conn, MAX_RAW_READ.saturating_sub(buf.len()));
            buf.extend_from_slice(&more);
        }
        buf.truncate(MAX_RAW_READ);
        state.push(event(describe_payload(&buf), &buf));
    }
}

/// Waits in poll until `fd` is readable or the service stops, at most 200 ms (the service
/// threads' interval for noticing a stop without a wake-up); whether `fd` is readable.
fn readable_soon(fd: impl std::os::fd::AsFd, state: &NetState) -> bool {
    let timeout = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 200_000_000,
    };
    use std::os::fd::AsFd;
    // The wake-up is polled beside `fd` where there is one (the second slot unused otherwise).
    let own = fd.as_fd();
    let wake = state.wake.as_ref().map(|w| w.as_fd());
    let second = wake.unwrap_or(own);
    let mut fds = [
        rustix::event::PollFd::new(&own, rustix::event::PollFlags::IN),
        rustix::event::PollFd::new(&second, rustix::event::PollFlags::IN),
    ];
    let polled = if wake.is_some() { 2 } else { 1 };
    let _ = rustix::event::poll(&mut fds[..polled], Some(&timeout));
    // An error or hang-up counts as readable: the `recv` that follows clears a pending
    // socket error (poll would otherwise report it again at once, for ever).
    !fds[0].revents().is_empty()
}

/// Reads the packet socket: each outgoing SYN or datagram becomes an event (the kernel's filter
/// passes nothing else). Waits in poll, 200 ms at most, to notice a stop.
fn packet_loop(state: NetHandle) {
    let Some(fd) = &state.packets else { return };
    while !state.stop.load(Ordering::SeqCst) {
        if readable_soon(fd, &state) {
            state.drain_packets();
        }
    }
}

/// What the packet socket tells of one packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The IP protocol (6 TCP, 17 UDP, 136 UDP-Lite, 132 SCTP, 1 ICMP, 58 ICMPv6, ...).
    pub protocol: u8,
    /// Source port, for protocols with ports.
    pub source_port: Option<u16>,
    /// Destination address.
    pub destination: IpAddr,
    /// Destination port, for protocols with ports.
    pub port: Option<u16>,
    /// The message type, for ICMP and ICMPv6.
    pub icmp_type: Option<u8>,
    /// For UDP, whether the payload starts like a DNS query.
    pub dns_query: bool,
    /// What it carried past its transport header (a datagram's payload, an ICMP message's
    /// data; a protocol unknown here, its whole transport part; a TCP SYN, nothing).
    pub data: Vec<u8>,
}

/// IP protocols whose transport header starts with the source and destination ports.
const PORTED: [u8; 5] = [6, 17, 33, 132, 136];

/// Parses the network and transport headers of an IPv4 or IPv6 packet (IPv6 extension headers
/// are not walked: their packet is reported by the protocol of the first one).
pub fn parse_packet(b: &[u8]) -> Option<Packet> {
    let (protocol, destination, transport) = match b.first()? >> 4 {
        4 => {
            let header = usize::from(b.first()? & 0x0f) * 4;
            let dst: [u8; 4] = b.get(16..20)?.try_into().ok()?;
            (
                *b.get(9)?,
                IpAddr::V4(Ipv4Addr::from(dst)),
                b.get(header..)?,
            )
        }
        6 => {
            let dst: [u8; 16] = b.get(24..40)?.try_into().ok()?;
            (*b.get(6)?, IpAddr::V6(Ipv6Addr::from(dst)), b.get(40..)?)
        }
        _ => return None,
    };
    let ports = if PORTED.contains(&protocol) {
        Some((
            u16::from_be_bytes([*transport.first()?, *transport.get(1)?]),
            u16::from_be_bytes([*transport.get(2)?, *transport.get(3)?]),
        ))
    } else {
        None
    };
    let icmp_type = matches!(protocol, 1 | 58)
        .then(|| transport.first().copied())
        .flatten();
    let dns_query = protocol == 17 && transport.get(8..).is_some_and(looks_like_dns_query);
    let data = match protocol {
        6 => &[][..],
        1 | 17 | 58 | 136 => transport.get(8..).unwrap_or_default(),
        _ => transport,
    };
    Some(Packet {
        protocol,
        source_port: ports.map(|p| p.0),
        destination,
        port: ports.map(|p| p.1),
        icmp_type,
        dns_query,
        data: data.to_vec(),
    })
}

/// ICMP messages the kernel sends by itself in answer to a packet (destination unreachable,
/// time exceeded, parameter problem, ...): not the server's doing.
fn is_icmp_error(p: &Packet) -> bool {
    match (p.protocol, p.icmp_type) {
        (1, Some(t)) => matches!(t, 3 | 4 | 5 | 11 | 12),
        (58, Some(t)) => t < 128,
        _ => false,
    }
}

/// The name of an IP protocol a server can send on its own, for reports.
fn protocol_name(p: &Packet) -> String {
    match (p.protocol, p.icmp_type) {
        (1, Some(8)) => "an ICMP echo request".into(),
        (1, Some(t)) => format!("an ICMP message (type {t})"),
        (58, Some(128)) => "an ICMPv6 echo request".into(),
        (58, Some(t)) => format!("an ICMPv6 message (type {t})"),
        (2, _) => "an IGMP message".into(),
        (47, _) => "a GRE packet".into(),
        (other, _) => format!("a packet of IP protocol {other}"),
    }
}

/// The event for a packet, or `None` for DNS queries (the stub reports the question with its
/// name), the stub's own answers, and the kernel's ICMP errors. A datagram to port 53 that
/// does not start like a query is reported: port 53 is no licence to send anything.
fn packet_event(p: &Packet, state: &NetState) -> Option<NetEvent> {
    if p.protocol == 17 && (p.port == Some(53) && p.dns_query || p.source_port == Some(53)) {
        return None;
    }
    if is_icmp_error(p) {
        return None;
    }
    let destination = p.destination.to_canonical();
    let name = state
        .names
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .name_of(destination);
    let (kind, payload) = match p.protocol {
        6 => (NetKind::Connect, None),
        17 if p.port == Some(53) => (NetKind::Datagram, Some("non-DNS".to_string())),
        17 => (NetKind::Datagram, None),
        136 => (NetKind::Datagram, Some("UDP-Lite".to_string())),
        132 => (NetKind::Connect, Some("SCTP".to_string())),
        33 => (NetKind::Connect, Some("DCCP".to_string())),
        _ => (NetKind::Packet, Some(protocol_name(p))),
    };
    Some(NetEvent {
        kind,
        destination: destination.to_string(),
        port: p.port,
        name,
        loopback: destination.is_loopback(),
        mechanism: Mechanism::Packet,
        payload,
        carried: Carried::of(&p.data),
    })
}

/// Drops packet events that another mechanism already reported in the same batch (the same
/// kind, destination and port, seen by seccomp or a listener, which say more).
pub fn drop_repeated_packets(observations: &mut Vec<Observation>) {
    /// What tells two reports of one packet alike.
    type Key = (NetKind, String, Option<u16>);
    let key = |n: &NetEvent| -> Key { (n.kind, canonical(&n.destination), n.port) };
    let seen_otherwise: std::collections::HashSet<Key> = observations
        .iter()
        .filter_map(Observation::as_network)
        .filter(|n| n.mechanism != Mechanism::Packet)
        .map(key)
        .collect();
    // What a dropped packet carried goes to the event that stays (seccomp sees a datagram's
    // address, the packet socket its payload).
    let mut moved: Vec<(Key, Carried)> = Vec::new();
    observations.retain_mut(|o| match o {
        Observation::Network(n) if n.mechanism == Mechanism::Packet => {
            let k = key(n);
            if seen_otherwise.contains(&k) {
                moved.push((k, n.carried.take()));
                false
            } else {
                true
            }
        }
        _ => true,
    });
    if moved.is_empty() {
        return;
    }
    let mut kept: std::collections::HashMap<Key, usize> = std::collections::HashMap::new();
    for (i, o) in observations.iter().enumerate() {
        if let Observation::Network(n) = o {
            if n.mechanism != Mechanism::Packet {
                kept.entry(key(n)).or_insert(i);
            }
        }
    }
    for (k, carried) in moved {
        if let Some(Observation::Network(n)) = kept.get(&k).map(|&i| &mut observations[i]) {
            n.carried.join(carried);
        }
    }
}

/// An address in the form the events use (v4-mapped IPv6 as IPv4); other text unchanged.
fn canonical(destination: &str) -> String {
    destination
        .parse::<IpAddr>()
        .map(|ip| ip.to_canonical().to_string())
        .unwrap_or_else(|_| destination.to_string())
}

/// The first bytes of a connection, for humans: TLS SNI or the HTTP request line and Host.
pub fn describe_payload(b: &[u8]) -> Option<String> {
    if b.is_empty() {
        return None;
    }
    if let Some(sni) = tls_sni(b) {
        return Some(format!("TLS ClientHello, SNI {sni}"));
    }
    let text = String::from_utf8_lossy(&b[..b.len().min(2048)]);
    let mut lines = text.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let looks_http = [
        "GET ", "POST ", "PUT ", "DELETE ", "HEAD ", "PATCH ", "OPTIONS ", "CONNECT ",
    ]
    .iter()
    .any(|m| first.starts_with(m));
    if looks_http {
        let host = lines
            .find(|l| l.to_ascii_lowercase().starts_with("host:"))
            .map(|l| format!(", Host: {}", l[5..].trim()))
            .unwrap_or_default();
        let line: String = first.chars().take(200).collect();
        return Some(format!("HTTP {line:?}{host}"));
    }
    Some(format!("{} bytes", b.len()))
}

/// The server name of a TLS ClientHello.
pub fn tls_sni(b: &[u8]) -> Option<String> {
    // Record header (5) + handshake header (4) + version (2) + random (32).
    if b.len() < 43 || b[0] != 0x16 || b[5] != 0x01 {
        return None;
    }
    let mut off = 43;
    let sid = *b.get(off)? as usize;
    off += 1 + sid;
    let suites = u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]) as usize;
    off += 2 + suites;
    let comp = *b.get(off)? as usize;
    off += 1 + comp;
    let ext_end = off + 2 + u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]) as usize;
    off += 2;
    while off + 4 <= ext_end.min(b.len()) {
        let kind = u16::from_be_bytes([b[off], b[off + 1]]);
        let len = u16::from_be_bytes([b[off + 2], b[off + 3]]) as usize;
        let body = b.get(off + 4..off + 4 + len)?;
        if kind == 0 && body.len() >= 5 && body[2] == 0 {
            let name_len = u16::from_be_bytes([body[3], body[4]]) as usize;
            return body
                .get(5..5 + name_len)
                .map(|n| String::from_utf8_lossy(n).into_owned());
        }
        off += 4 + len;
    }
    None
}

/// The observer over a running service.
pub struct NetObserver {
    handle: Option<NetHandle>,
    ports: Vec<u16>,
    /// The port of a server that speaks HTTP: hintcheck's own connections to it (made on the
    /// sandbox's loopback) are not the server's network activity.
    harness_port: Option<u16>,
}

impl NetObserver {
    /// An observer whose listeners are on `ports`.
    pub fn new(ports: Vec<u16>) -> Self {
        Self {
            handle: None,
            ports,
            harness_port: None,
        }
    }

    /// Leaves out connections to `port` on loopback: hintcheck's own, to a server that speaks
    /// HTTP there.
    pub fn ignoring_harness_port(mut self, port: Option<u16>) -> Self {
        self.harness_port = port;
        self
    }
}

impl Observer for NetObserver {
    fn server_started(&mut self, start: &ServerStart) {
        if let Some(old) = self.handle.take() {
            old.stop();
            // Closing its packet socket waits for the network's grace period (5 to 15 ms
            // here): the last reference goes on a thread of its own, off the run's path.
            let _ = std::thread::Builder::new()
                .name("hintcheck-net-close".into())
                .spawn(move || drop(old));
        }
        self.handle = start.network.clone();
    }

    fn checkpoint(&mut self) -> Result<Vec<Observation>, ObserveError> {
        let Some(h) = &self.handle else {
            return Ok(Vec::new());
        };
        // A connection still being read belongs to this window (its client sent it here):
        // wait for it, as long as one connection may take at most.
        let until = std::time::Instant::now() + CONNECTION_TIME;
        while h.connections.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        h.drain_packets();
        let events = std::mem::take(&mut *h.events.lock().unwrap_or_else(|p| p.into_inner()));
        h.carried_kept.store(0, Ordering::SeqCst);
        let harness = |e: &NetEvent| {
            e.loopback
                && e.kind == NetKind::Connect
                && e.port.is_some()
                && e.port == self.harness_port
        };
        Ok(events
            .into_iter()
            .filter(|e| !harness(e))
            .map(Observation::Network)
            .collect())
    }

    fn status(&self) -> ObserverStatus {
        ObserverStatus {
            name: "lo-local network".into(),
            covers: format!(
                "DNS questions (answered with addresses of our own; malformed ones too), every outgoing TCP SYN and every packet of any other IP protocol on lo, whatever its port or payload (UDP including non-DNS datagrams to port 53, UDP-Lite, SCTP, ICMP, raw protocols; a packet socket, where the sandbox could make one), and what TCP connections to ports {} send, and to any other port past loopback through a listener opened for the connect (64 a run; TLS SNI; HTTP requests with their headers and bodies, inside TLS too, answered like a small ordinary site; other protocols until they pause; 3 s a connection at most); names, requests and datagrams are searched for the run's planted secrets",
                self.ports
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            blind_spots: vec![
                "what TCP connections to other ports send past the first 64 such listeners, or without a sandbox (their attempts are still seen by seccomp and the packet socket; the connection is refused)".into(),
                format!("request bodies past {} MiB, other protocols past {} KiB", 1, MAX_RAW_READ >> 10),
            ],
        }
    }

    fn take_notes(&mut self) -> Vec<String> {
        let unscanned = self
            .handle
            .as_ref()
            .map_or(0, |h| h.unscanned.swap(0, Ordering::SeqCst));
        if unscanned == 0 {
            return Vec::new();
        }
        vec![format!(
            "the server sent more than {} MiB between two checkpoints: {unscanned} bytes of it were not searched for planted secrets",
            CARRIED_BUDGET >> 20
        )]
    }
}

impl Drop for NetObserver {
    fn drop(&mut self) {
        if let Some(h) = &self.handle {
            h.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&1u16.to_be_bytes());
        q
    }

    #[test]
    fn dns_queries_are_parsed_and_answered_with_stable_fake_addresses() {
        let q = query("API.Example.test", 1);
        let (asked, qtype, end) = parse_query(&q).expect("query");
        assert_eq!(
            (asked.as_str(), qtype, end),
            ("API.Example.test", 1, q.len())
        );
        let name = asked.to_ascii_lowercase();
        let mut names = FakeNames::default();
        let ip = names.v4(&name);
        assert_eq!(ip, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(names.v4(&name), ip, "stable");
        assert_eq!(
            names.name_of(IpAddr::V6(ip.to_ipv6_mapped())),
            Some(name.clone())
        );
        let r = build_reply(&q[..end], Some(IpAddr::V4(ip)));
        assert_eq!(&r[0..2], &[0x12, 0x34]);
        assert_eq!(u16::from_be_bytes([r[6], r[7]]), 1, "one answer");
        assert_eq!(&r[r.len() - 4..], &[198, 18, 0, 1]);
        assert!(parse_query(&[0u8; 5]).is_none());
    }

    #[test]
    fn a_querys_other_questions_and_records_are_kept_for_the_secret_scan() {
        let mut q = query("first.test", 1);
        q[5] = 3; // three questions
        for name in ["second.test", "third.test"] {
            for label in name.split('.') {
                q.push(label.len() as u8);
                q.extend_from_slice(label.as_bytes());
            }
            q.extend_from_slice(&[0, 0, 1, 0, 1]);
        }
        q.extend_from_slice(b"\x00\x00\x29EDNS-OPTION-DATA");
        let (asked, _, end) = parse_query(&q).expect("query");
        assert_eq!(asked, "first.test");
        let rest = rest_of_query(&q, end);
        let rest = String::from_utf8_lossy(&rest);
        assert!(rest.starts_with("second.test\nthird.test\n"), "{rest}");
        assert!(rest.ends_with("EDNS-OPTION-DATA"), "{rest}");
        let plain = query("only.test", 1);
        let (_, _, plain_end) = parse_query(&plain).expect("query");
        assert!(rest_of_query(&plain, plain_end).is_empty());
    }

    #[test]
    fn a_client_that_trickles_its_request_holds_a_connection_only_so_long() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = std::thread::spawn(move || {
            let mut c = std::net::TcpStream::connect(addr).expect("connect");
            let _ = c.write_all(b"POST /slow HTTP/1.1\r\nHost: slow.test\r\n");
            // A header byte every 200 ms for 20 s, never ending the head.
            for _ in 0..100 {
                std::thread::sleep(Duration::from_millis(200));
                if c.write_all(b"x").is_err() {
                    break;
                }
            }
        });
        let (conn, _) = listener.accept().expect("accept");
        let state = NetState::default();
        let started = std::time::Instant::now();
        serve_connection(conn, 80, &state);
        let took = started.elapsed();
        // Its time (3 s) and a last read; far from the client's 20 s.
        assert!(took < Duration::from_secs(10), "{took:?}");
        let events = state.events.lock().expect("events");
        assert_eq!(events.len(), 1, "{events:?}");
        assert!(
            events[0].carried.bytes().starts_with(b"POST /slow"),
            "{:?}",
            events[0]
        );
        drop(events);
        let _ = client.join();
    }

    #[test]
    fn what_a_client_sends_after_its_answer_joins_its_request_and_an_honest_one_costs_nothing() {
        let serve = |second: Option<&'static [u8]>| {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let addr = listener.local_addr().expect("addr");
            let client = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).expect("connect");
                let _ = c.write_all(b"GET /a HTTP/1.1\r\nHost: site.test\r\n\r\n");
                let mut answer = [0u8; 4096];
                let _ = c.read(&mut answer);
                // A second request on the connection, the answer's `close` ignored; an
                // honest client closes.
                if let Some(bytes) = second {
                    let _ = c.write_all(bytes);
                    std::thread::sleep(Duration::from_millis(400));
                }
            });
            let (conn, _) = listener.accept().expect("accept");
            let state = NetState::default();
            let started = std::time::Instant::now();
            serve_connection(conn, 80, &state);
            let took = started.elapsed();
            let _ = client.join();
            let events = state.events.lock().expect("events").clone();
            (events, took)
        };
        let (events, _) = serve(Some(b"POST /b HTTP/1.1\r\nContent-Length: 6\r\n\r\nsecret"));
        assert_eq!(events.len(), 1, "{events:?}");
        let carried = String::from_utf8_lossy(events[0].carried.bytes()).into_owned();
        assert!(
            carried.starts_with("GET /a") && carried.ends_with("secret"),
            "{carried}"
        );
        let (events, took) = serve(None);
        assert!(
            events[0].carried.bytes().ends_with(b"\r\n\r\n"),
            "{events:?}"
        );
        assert!(
            took < AFTER_ANSWER_PATIENCE,
            "an honest client's close ends it: {took:?}"
        );
    }

    #[test]
    fn payloads_are_described() {
        let http = b"GET /collect?token=abc HTTP/1.1\r\nHost: tracker.example.test\r\n\r\n";
        assert_eq!(
            describe_payload(http).as_deref(),
            Some("HTTP \"GET /collect?token=abc HTTP/1.1\", Host: tracker.example.test")
        );
        let hello = client_hello("secret.example.test");
        assert_eq!(tls_sni(&hello).as_deref(), Some("secret.example.test"));
        assert_eq!(
            describe_payload(&hello).as_deref(),
            Some("TLS ClientHello, SNI secret.example.test")
        );
        assert_eq!(describe_payload(b"\x00\x01").as_deref(), Some("2 bytes"));
    }

    #[test]
    fn packets_are_read_by_version_and_transport() {
        // IPv4 (header of 24 bytes: with options), UDP 40000 -> 192.0.2.41:9998.
        let mut v4 = vec![
            0x46, 0, 0, 40, 0, 0, 0, 0, 64, 17, 0, 0, 127, 0, 0, 1, 192, 0, 2, 41,
        ];
        v4.extend_from_slice(&[0, 0, 0, 0]);
        v4.extend_from_slice(&[0x9c, 0x40, 0x27, 0x0e, 0, 13, 0, 0]);
        assert_eq!(
            parse_packet(&v4),
            Some(Packet {
                protocol: 17,
                source_port: Some(40000),
                destination: "192.0.2.41".parse().expect("ip"),
                port: Some(9998),
                icmp_type: None,
                dns_query: false,
                data: Vec::new(),
            })
        );
        // IPv6 TCP to [2001:db8::7]:443.
        let mut v6 = vec![0x60, 0, 0, 0, 0, 20, 6, 64];
        v6.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        v6.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().expect("ip").octets());
        v6.extend_from_slice(&[0xc3, 0x50, 0x01, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0x02]);
        let p = parse_packet(&v6).expect("v6");
        assert_eq!(p.protocol, 6);
        assert_eq!(
            (p.destination.to_string().as_str(), p.port),
            ("2001:db8::7", Some(443))
        );
        // ICMP carries its type and no ports; truncated packets and other versions are none.
        let mut icmp = v4[..24].to_vec();
        icmp[9] = 1;
        icmp.extend_from_slice(&[8, 0, 0, 0]);
        let p = parse_packet(&icmp).expect("icmp");
        assert_eq!((p.icmp_type, p.port), (Some(8), None));
        assert_eq!(parse_packet(&v4[..22]), None);
        assert_eq!(parse_packet(&[0x20; 60]), None);
        assert_eq!(parse_packet(&[]), None);
    }

    #[test]
    fn every_protocol_a_server_can_send_is_an_event_but_dns_queries_and_icmp_errors() {
        let state = NetState::default();
        let packet = |protocol: u8, port: Option<u16>, icmp_type: Option<u8>, dns: bool| Packet {
            protocol,
            source_port: port.map(|_| 40000),
            destination: "192.0.2.60".parse().expect("ip"),
            port,
            icmp_type,
            dns_query: dns,
            data: Vec::new(),
        };
        let described = |p: Packet| packet_event(&p, &state).map(|e| e.describe());
        assert_eq!(
            described(packet(17, Some(53), None, true)),
            None,
            "DNS query"
        );
        assert_eq!(
            described(packet(17, Some(53), None, false)).as_deref(),
            Some("sent a non-DNS datagram to 192.0.2.60:53")
        );
        assert_eq!(
            described(packet(136, Some(7000), None, false)).as_deref(),
            Some("sent a UDP-Lite datagram to 192.0.2.60:7000")
        );
        assert_eq!(
            described(packet(132, Some(9), None, false)).as_deref(),
            Some("connected to 192.0.2.60:9: SCTP")
        );
        assert_eq!(
            described(packet(1, None, Some(8), false)).as_deref(),
            Some("sent an ICMP echo request to 192.0.2.60")
        );
        assert_eq!(
            described(packet(1, None, Some(3), false)),
            None,
            "port unreachable"
        );
        assert_eq!(
            described(packet(58, None, Some(1), false)),
            None,
            "ICMPv6 error"
        );
        assert_eq!(
            described(packet(255, None, None, false)).as_deref(),
            Some("sent a packet of IP protocol 255 to 192.0.2.60")
        );
        let mut query = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
        assert!(looks_like_dns_query(&query));
        query[2] = 0x81;
        assert!(!looks_like_dns_query(&query), "a response");
        assert!(!looks_like_dns_query(b"not dns at all"));
    }

    #[test]
    fn a_packet_already_seen_by_seccomp_or_a_listener_is_not_repeated() {
        let state = NetState::default();
        let packet = |destination: &str, port: u16, udp: bool| {
            Observation::Network(
                packet_event(
                    &Packet {
                        protocol: if udp { 17 } else { 6 },
                        source_port: Some(40000),
                        destination: destination.parse().expect("ip"),
                        port: Some(port),
                        icmp_type: None,
                        dns_query: false,
                        data: Vec::new(),
                    },
                    &state,
                )
                .expect("event"),
            )
        };
        // DNS travels as datagrams too: the stub reports it, the packet is no event.
        assert!(
            packet_event(
                &Packet {
                    protocol: 17,
                    source_port: Some(40000),
                    destination: "192.0.2.53".parse().expect("ip"),
                    port: Some(53),
                    icmp_type: None,
                    dns_query: true,
                    data: Vec::new(),
                },
                &state
            )
            .is_none()
        );
        let seccomp = Observation::Network(NetEvent {
            kind: NetKind::Connect,
            destination: "192.0.2.10".into(),
            port: Some(443),
            name: None,
            loopback: false,
            mechanism: Mechanism::Attempt,
            payload: None,
            carried: Default::default(),
        });
        let mut batch = vec![
            seccomp.clone(),
            packet("::ffff:192.0.2.10", 443, false),
            packet("192.0.2.41", 9998, true),
        ];
        drop_repeated_packets(&mut batch);
        let described: Vec<String> = batch.iter().map(Observation::describe).collect();
        assert_eq!(
            described,
            [
                "connected to 192.0.2.10:443",
                "sent a datagram to 192.0.2.41:9998"
            ]
        );
    }

    /// A minimal TLS 1.2 ClientHello with one SNI extension.
    pub(crate) fn client_hello(name: &str) -> Vec<u8> {
        let n = name.as_bytes();
        let mut sni = vec![0, 0];
        let list_len = (n.len() + 3) as u16;
        let ext_len = list_len + 2;
        sni.extend_from_slice(&ext_len.to_be_bytes());
        sni.extend_from_slice(&list_len.to_be_bytes());
        sni.push(0);
        sni.extend_from_slice(&(n.len() as u16).to_be_bytes());
        sni.extend_from_slice(n);
        let mut body = vec![0x03, 0x03];
        body.extend_from_slice(&[0u8; 32]);
        body.push(0); // session id
        body.extend_from_slice(&[0, 2, 0x13, 0x01]); // one cipher suite
        body.extend_from_slice(&[1, 0]); // compression
        body.extend_from_slice(&(sni.len() as u16).to_be_bytes());
        body.extend_from_slice(&sni);
        let mut hs = vec![0x01];
        hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        hs.extend_from_slice(&body);
        let mut rec = vec![0x16, 0x03, 0x01];
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend_from_slice(&hs);
        rec
    }
}
