//! The `tcp` BTL: fragments between processes over TCP/IPv4, one module per network interface.
//!
//! **Modules.** [`modules`] opens one module per usable interface ([`iface::select`]: every
//! interface that is up except loopback, or loopback when nothing else is; `btl_tcp_if_include`
//! / `btl_tcp_if_exclude` choose by name or CIDR). Each module listens on its interface's address
//! with a non-blocking socket and publishes that address ([`wire::AddrRecord`]) in the modex.
//! Rank 0 also publishes a 32-byte secret from the kernel's random source; every connection
//! proves it holds it, so only members of the job can feed fragments into it.
//!
//! **Reachability.** A peer is reachable by a module if it published an address in the module's
//! subnet (loopback addresses only between processes of one node); the endpoint remembers that
//! address. Malformed modex entries are logged and ignored.
//!
//! **Connections.** Opened lazily by the first send (a non-blocking connect, given a moment to
//! complete so the first fragment leaves at once, else completed by progress). The acceptor
//! speaks first: a [`wire::Challenge`] with a fresh nonce. The connecting side answers with its
//! [`wire::Handshake`] (magic, version, its own nonce, both ranks, largest fragment, and a proof
//! of the secret over all of it and the challenge's nonce), and its frames follow at once; until
//! the challenge arrives they wait in its queue (the first send waits a millisecond for it, so
//! a peer in progress gets the first frame at once). The acceptor checks all of it and refuses
//! anything else with one log line, without harm to the job. Strangers get a 68-byte buffer and
//! a deadline; at most [`MAX_PENDING`] of them are held at a time, and a new connection past
//! that closes the one that has waited longest. A connecting side that finds its peer gave up
//! on it before its handshake went out (it was not in progress for `btl_tcp_connect_timeout`)
//! connects again with the same queue.
//!
//! A process sends to a peer on exactly one connection, chosen at its first send and kept: its
//! own, or — if the peer has connected to it already — the peer's, after answering with its own
//! handshake, whose proof covers the peer's nonce (which the peer checks in turn). So a conversation runs over one connection in both
//! directions, and TCP acknowledgements ride on the replies: on loopback that saves about a third
//! of the small-message latency over one connection per direction (where every data segment
//! costs a pure acknowledgement).
//! Two processes that start talking at the same moment (both ranks of a barrier, say) open a
//! connection each; then the higher rank moves its sending onto the lower rank's connection: it
//! answers there with a handshake marked "follows", drains its own connection and closes it,
//! and the lower rank holds the frames of the new path until the old connection has ended. So
//! frames from one peer are always delivered in the order they were sent, and every pair settles
//! on one connection.
//!
//! **Frames.** `[u32 length][u8 tag][u8 pad][2 zero bytes]`, `pad` bytes, then the fragment
//! ([`wire::Frame`]; the pad puts a payload sent from user memory at the user buffer's offset
//! within a 64-byte line, where this CPU's copies run at full speed).
//! `reserve`/`commit` copy into a bounded ring per connection; `send_ref` queues the headers and
//! a reference to the user's payload, which `sendmsg` gathers straight from user memory
//! (`send::SendQueue`); `send_inline` (eager messages and the start of a rendezvous) writes
//! header and user data with one `sendmsg` when nothing else waits, and copies into the ring
//! only what the socket did not take. All are written at once when the socket has room
//! (lowest latency); what is left goes out when epoll says the socket is writable, and
//! zero-copy frames are then reported through [`Sink::completed`].
//!
//! **Receiving** (`recv::Reader`): frames are read into a buffer per connection and handed to
//! the sink from there. A large frame whose header has arrived but not its payload is first
//! offered to [`Sink::place`]: when the PML knows where the payload goes (a matched receive's
//! contiguous buffer), the rest of the frame is read straight into it, and the sink learns
//! through [`Sink::placed`] — so the payload crosses memory once, from the kernel to the user's
//! buffer. A read beyond a frame's start takes at most 16 KiB, so little of a large frame lands
//! in the buffer first.
//!
//! **Back-pressure.** Every queue is bounded: a full send queue makes `reserve`/`send_ref` return
//! `None`; a sink answering [`Delivery::Retry`] leaves the frame in the connection's buffer and
//! stops reading that connection, so the kernel's buffers fill and TCP's flow control holds the
//! sender (`recv::Reader`).
//!
//! **Progress.** One epoll instance per module (edge-triggered), polled without waiting. A
//! module with no connection at all polls at most every [`IDLE_POLL_INTERVAL`] (and looks at the
//! clock only every [`IDLE_CHECK_EVERY`]th call), so a process whose peers are all served by
//! shared memory pays almost nothing for having TCP too, while a first connection is still
//! noticed within a fraction of a millisecond (counting calls alone is not enough: on an
//! oversubscribed node a progress call can take a whole time slice).

pub mod iface;
mod recv;
mod send;
pub mod sys;
pub mod wire;

use std::net::{SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use stormpi_core::btl::{
    AmTag, Btl, BtlAttrs, BtlFlags, DataRef, Delivery, Endpoint, Modex, ModexPut, PeerInfo, Sent,
    Sink, Token,
};
use stormpi_core::error::{Allowed, Error, ErrorClass, Reason, Result};
use stormpi_core::params::{Default, Kind, ParamDef, Params};
use stormpi_core::rte::ProcId;

use iface::Interface;
use recv::{HandshakeRead, HsBuf, ReadEnd, Reader};
use send::{SendQueue, INLINE_HEADER};
use stormpi_bootstrap::auth::{Key, Nonce};
use wire::{AddrRecord, Challenge, Handshake, CHALLENGE_LEN, FRAME_LEN, HANDSHAKE_LEN, SECRET_LEN};

/// `btl_tcp_if_include`.
pub static IF_INCLUDE: ParamDef = ParamDef {
    name: "btl_tcp_if_include",
    kind: Kind::Str,
    default: Default::Str(""),
    description: "Interfaces the tcp BTL uses, by name or CIDR (e.g. 'veth-a,10.7.0.0/24'); \
                  wins over btl_tcp_if_exclude; naming lo or 127.0.0.0/8 enables loopback",
};

/// `btl_tcp_if_exclude`.
pub static IF_EXCLUDE: ParamDef = ParamDef {
    name: "btl_tcp_if_exclude",
    kind: Kind::Str,
    default: Default::Str(""),
    description: "Interfaces the tcp BTL leaves alone, by name or CIDR (loopback is left alone \
                  anyway unless no other interface is usable)",
};

/// `btl_tcp_eager_limit`.
pub static EAGER_LIMIT: ParamDef = ParamDef {
    name: "btl_tcp_eager_limit",
    kind: Kind::Int {
        min: 64,
        max: 1 << 26,
    },
    default: Default::Int(64 << 10),
    description: "Largest message (header included) the tcp BTL sends eagerly, in one fragment",
};

/// `btl_tcp_max_send_size`.
pub static MAX_SEND_SIZE: ParamDef = ParamDef {
    name: "btl_tcp_max_send_size",
    kind: Kind::Int {
        min: 64,
        max: 1 << 26,
    },
    // Larger than Open MPI's 128 KiB: on loopback a 1 MiB message moves about a third faster in
    // 512 KiB fragments than in 128 KiB ones (fewer frames, system calls and completions), and
    // the buffers that size implies are touched only as far as they are used.
    default: Default::Int(512 << 10),
    description: "Largest fragment of the tcp BTL, header included (the same at every rank)",
};

/// `btl_tcp_bandwidth`.
pub static BANDWIDTH: ParamDef = ParamDef {
    name: "btl_tcp_bandwidth",
    kind: Kind::Str,
    default: Default::Str(""),
    description: "Bandwidth in Mbit/s per interface, 'ifname:value' list (a bare value applies \
                  to the rest); default: the link speed Linux reports, else 10000",
};

/// `btl_tcp_latency`.
pub static LATENCY: ParamDef = ParamDef {
    name: "btl_tcp_latency",
    kind: Kind::Str,
    default: Default::Str(""),
    description: "Latency in ns per interface, 'ifname:value' list (a bare value applies to the \
                  rest); default 20000",
};

/// `btl_tcp_port_min`.
pub static PORT_MIN: ParamDef = ParamDef {
    name: "btl_tcp_port_min",
    kind: Kind::Int { min: 0, max: 65535 },
    default: Default::Int(0),
    description: "First port the tcp BTL tries to listen on; 0 lets the kernel choose",
};

/// `btl_tcp_port_range`.
pub static PORT_RANGE: ParamDef = ParamDef {
    name: "btl_tcp_port_range",
    kind: Kind::Int { min: 1, max: 65535 },
    default: Default::Int(100),
    description: "Number of ports from btl_tcp_port_min the tcp BTL tries",
};

/// `btl_tcp_sndbuf`.
pub static SNDBUF: ParamDef = ParamDef {
    name: "btl_tcp_sndbuf",
    kind: Kind::Int {
        min: 0,
        max: 1 << 30,
    },
    default: Default::Int(0),
    description: "SO_SNDBUF of the tcp BTL's sockets in bytes; 0 keeps the kernel's automatic \
                  tuning",
};

/// `btl_tcp_rcvbuf`.
pub static RCVBUF: ParamDef = ParamDef {
    name: "btl_tcp_rcvbuf",
    kind: Kind::Int {
        min: 0,
        max: 1 << 30,
    },
    default: Default::Int(0),
    description: "SO_RCVBUF of the tcp BTL's sockets in bytes; 0 keeps the kernel's automatic \
                  tuning",
};

/// `btl_tcp_send_buffer`.
pub static SEND_BUFFER: ParamDef = ParamDef {
    name: "btl_tcp_send_buffer",
    kind: Kind::Int {
        min: 4096,
        max: 1 << 30,
    },
    default: Default::Int(256 << 10),
    description: "Bytes of copied fragments the tcp BTL queues per connection when the socket \
                  is full (raised to one largest fragment)",
};

/// `btl_tcp_send_queue`.
pub static SEND_QUEUE: ParamDef = ParamDef {
    name: "btl_tcp_send_queue",
    kind: Kind::Int { min: 1, max: 4096 },
    default: Default::Int(64),
    description: "Zero-copy fragments the tcp BTL queues per connection when the socket is full",
};

/// `btl_tcp_recv_buffer`.
pub static RECV_BUFFER: ParamDef = ParamDef {
    name: "btl_tcp_recv_buffer",
    kind: Kind::Int {
        min: 0,
        max: 1 << 30,
    },
    default: Default::Int(0),
    description: "Bytes of the tcp BTL's receive buffer per connection; 0 means twice the \
                  largest fragment",
};

/// `btl_tcp_connect_timeout`.
pub static CONNECT_TIMEOUT: ParamDef = ParamDef {
    name: "btl_tcp_connect_timeout",
    kind: Kind::Int {
        min: 1,
        max: 3_600_000,
    },
    default: Default::Int(10_000),
    description: "Milliseconds a tcp connection may take to be established (outgoing) or to \
                  present its handshake (incoming)",
};

/// `btl_tcp_finalize_timeout`.
pub static FINALIZE_TIMEOUT: ParamDef = ParamDef {
    name: "btl_tcp_finalize_timeout",
    kind: Kind::Int {
        min: 0,
        max: 3_600_000,
    },
    default: Default::Int(30_000),
    description: "Milliseconds finalize waits for queued tcp fragments to leave",
};

/// `btl_tcp_user_timeout`.
pub static USER_TIMEOUT: ParamDef = ParamDef {
    name: "btl_tcp_user_timeout",
    kind: Kind::Int {
        min: 0,
        max: 3_600_000,
    },
    default: Default::Int(30_000),
    description: "Milliseconds sent data may stay unacknowledged before the tcp BTL declares the \
                  network to that peer failed and ends the job (TCP_USER_TIMEOUT; 0 keeps the \
                  kernel's limit of about 15 minutes)",
};

/// Parameters of the tcp BTL.
pub static PARAMS: [&ParamDef; 16] = [
    &IF_INCLUDE,
    &IF_EXCLUDE,
    &EAGER_LIMIT,
    &MAX_SEND_SIZE,
    &BANDWIDTH,
    &LATENCY,
    &PORT_MIN,
    &PORT_RANGE,
    &SNDBUF,
    &RCVBUF,
    &SEND_BUFFER,
    &SEND_QUEUE,
    &RECV_BUFFER,
    &CONNECT_TIMEOUT,
    &FINALIZE_TIMEOUT,
    &USER_TIMEOUT,
];

/// Exclusivity of tcp modules: below `sm` (1000), so node-local peers use shared memory.
pub const EXCLUSIVITY: u32 = 100;
/// Latency assumed for an interface no parameter describes, ns.
pub const DEFAULT_LATENCY_NS: u32 = 20_000;
/// Bandwidth assumed for an interface whose link speed Linux does not report, Mbit/s.
pub const DEFAULT_BANDWIDTH_MBPS: u32 = 10_000;
/// Most connections accepted but not yet authenticated; more wait in the listen backlog.
pub const MAX_PENDING: usize = 64;
/// Least time between two polls of a module that has no connection at all.
pub const IDLE_POLL_INTERVAL: Duration = Duration::from_micros(500);
/// Progress calls of an idle module between two looks at the clock.
pub const IDLE_CHECK_EVERY: u32 = 32;
/// How long the first send to a peer waits for its connection to be established before leaving
/// the rest to progress, ms. A connect on a working network completes in well under this, and
/// then the first fragment leaves at once instead of waiting for the sender's next progress call
/// (which may be far away: the sender may be computing).
const CONNECT_WAIT_MS: i32 = 100;
/// How long the first send to a peer waits for the challenge on its new connection: a peer in
/// progress sends it within microseconds; one that is computing is not waited for (the frames
/// leave when the challenge arrives, at a later progress call).
const CHALLENGE_WAIT_MS: i32 = 1;
/// Times our connection to a peer is opened again when the peer closed it before our
/// handshake went out (it gave up waiting for a handshake while we were not in progress).
const MAX_REOPENS: u8 = 3;
/// Most addresses read from one peer's modex entries.
const MAX_PEER_MODULES: u32 = 64;
/// Rejected connections logged one by one before the log falls silent.
const MAX_REJECT_LOGS: u32 = 100;
/// Events taken from epoll per call.
const EVENTS: usize = 32;

/// Epoll token of the listening socket; connections use `generation << 32 | slot`.
const LISTENER: u64 = u64::MAX;
/// Generations wrap below this, so no connection token equals [`LISTENER`].
const GEN_MASK: u32 = 0x7fff_ffff;

fn conn_token(slot: usize, gen: u32) -> u64 {
    u64::from(gen & GEN_MASK) << 32 | slot as u64
}

/// What a connection is watched for: everything, edge-triggered.
const CONN_EVENTS: u32 = sys::IN | sys::OUT | sys::RDHUP | sys::ET;

/// Settings read once from the parameters.
#[derive(Clone, Copy, Debug)]
struct Config {
    sndbuf: usize,
    send_ring: usize,
    send_refs: usize,
    recv_buf: usize,
    connect_timeout: Duration,
    finalize_timeout: Duration,
    user_timeout_ms: u32,
}

/// The reading side of a connection.
enum Rx {
    /// Our own connection, waiting for the acceptor's challenge (our handshake waits for it).
    Challenge(HsBuf<CHALLENGE_LEN>),
    /// Waiting for the other side's handshake: on an accepted connection before anything else;
    /// on our own connection before the peer answers on it (if it ever does).
    Handshake(HsBuf<HANDSHAKE_LEN>),
    /// Authenticated: frames from the peer.
    Frames(Reader),
}

/// One TCP connection, in either direction.
struct Conn {
    stream: TcpStream,
    /// The other end's address (for log lines).
    from: SocketAddr,
    /// We opened it (else we accepted it).
    initiated: bool,
    /// The peer's endpoint: known from the start on our own connections, after the handshake on
    /// accepted ones.
    ep: Option<usize>,
    /// Established (our own connections may still be connecting).
    connected: bool,
    /// Until when an accepted connection may take to present its handshake, or our own to
    /// connect.
    deadline: Option<Instant>,
    rx: Rx,
    /// Our frames to the peer, when this is the connection we send on.
    tx: Option<SendQueue>,
    /// Listed in `Tcp::to_report`.
    listed: bool,
    /// Frames from the peer here wait until its older connection to us has ended.
    hold: bool,
    /// Our connection that lost to the peer's (see the module docs): closed once its queue is
    /// written.
    retiring: bool,
    /// Epoll said the peer shut its side (or the connection failed): reads go on to the end of
    /// stream, however short the last one (that edge will not come again).
    hup: bool,
    /// Our nonce in this connection's exchange (in our handshake, or our challenge).
    own_nonce: Nonce,
    /// The other side's nonce, once its challenge or handshake has arrived.
    peer_nonce: Option<Nonce>,
}

impl Conn {
    /// Whether the reader waits for a later progress call (sink full, or read budget spent).
    fn stalled(&self) -> bool {
        matches!(&self.rx, Rx::Frames(r) if r.paused || r.more)
    }

    /// Whether this is an accepted connection whose handshake has not arrived.
    fn pending(&self) -> bool {
        !self.initiated && matches!(self.rx, Rx::Handshake(_))
    }
}

struct Slot {
    gen: u32,
    conn: Option<Box<Conn>>,
}

/// How we send to a peer.
enum Tx {
    /// Not yet: the first send picks a connection.
    Idle,
    /// On the connection in this slot.
    On(usize),
    /// That connection ended; `why` is logged once when someone tries to send again.
    Down { why: String, logged: bool },
}

/// A peer this module reaches.
struct Peer {
    proc: ProcId,
    addr: SocketAddrV4,
    tx: Tx,
    /// The connection the peer opened to us, once authenticated.
    accepted: Option<usize>,
    /// That connection has ended (there is only ever one).
    accepted_ended: bool,
    /// Our connection whose frames from the peer wait for `accepted` to end.
    held: Option<usize>,
    /// Times our connection was opened again (see [`MAX_REOPENS`]).
    reopens: u8,
    /// The secret both prove: the job's (`None`), or for a process of another job the link's
    /// its side met ours over.
    key: Option<Key>,
    /// A process of another job no communicator reaches any more ([`Btl::del_later`]): its
    /// entry waits for its last connection to close, then serves the next one to join.
    gone: bool,
    /// This process's id in the peer's table (our rank, for a peer of this job).
    me_there: u32,
    /// The peer's id in its own table (its rank in its job).
    rank_there: u32,
    /// Of two connections both opened at once, ours moves onto the peer's (see the module
    /// docs: the higher rank's does; for a process of another job, the higher address's).
    yields: bool,
}

/// One tcp BTL module: one interface of this process.
pub struct Tcp {
    attrs: BtlAttrs,
    me: ProcId,
    iface: Interface,
    index: usize,
    count: usize,
    cfg: Config,
    listener: Option<TcpListener>,
    port: u16,
    epoll: sys::Epoll,
    /// The secret this process generated (rank 0), to publish.
    own_secret: Option<Key>,
    /// The job's secret, from rank 0's modex entry.
    secret: Option<Key>,
    peers: Vec<Peer>,
    /// Endpoint of each rank, or `NO_EP`.
    ep_of: Vec<u32>,
    conns: Vec<Slot>,
    free: Vec<usize>,
    /// Live connections; none means the module is idle.
    active: usize,
    /// Accepted connections without a handshake yet.
    pending: usize,
    /// Our connections still being established.
    connecting: usize,
    /// Readers waiting for a later progress call.
    stalled: usize,
    idle_calls: u32,
    next_idle_poll: Instant,
    /// Connections with zero-copy completions nobody reported yet.
    to_report: Vec<usize>,
    /// Zero-copy frames of closed connections: written (reported as done) or not (failed).
    failed: Vec<(Token, bool)>,
    /// Placements of closed connections, to be reported as failed.
    lost: Vec<(ProcId, Token, usize)>,
    /// Peers whose connection the network failed under, to be reported to the sink.
    unreachable: Vec<ProcId>,
    rejects: u32,
    added: bool,
    finalized: bool,
}

const NO_EP: u32 = u32::MAX;

fn transport(what: &'static str) -> Error {
    Error::new(ErrorClass::Other, Reason::Transport { btl: "tcp", what })
}

fn bad_param(def: &'static ParamDef, msg: &str) -> Error {
    eprintln!("stormpi: tcp: parameter {}: {msg}", def.name);
    // The description says what the value may be; the message above what was wrong with it.
    def.refused_with(Allowed::Text(def.description))
}

/// Creates one module per usable interface for process `me` (at most `max` of them).
///
/// No usable interface is not an error: the result is empty.
pub fn modules(params: &Params, me: ProcId, max: usize) -> Result<Vec<Tcp>> {
    let all = iface::system().map_err(|e| {
        eprintln!("stormpi: tcp: cannot list network interfaces: {e}");
        transport("getifaddrs failed")
    })?;
    let mut chosen = iface::select(&all, params.str(&IF_INCLUDE), params.str(&IF_EXCLUDE))
        .map_err(|m| bad_param(&IF_INCLUDE, &format!("(or btl_tcp_if_exclude) {m}")))?;
    if chosen.len() > max {
        eprintln!(
            "stormpi: tcp: {} usable interfaces, using the first {max}",
            chosen.len()
        );
        chosen.truncate(max);
    }
    let secret = if me == ProcId(0) && !chosen.is_empty() {
        Some(Key::generate().map_err(|e| {
            eprintln!("stormpi: tcp: no random bytes for the job secret: {e}");
            transport("getrandom failed")
        })?)
    } else {
        None
    };
    let count = chosen.len();
    chosen
        .into_iter()
        .enumerate()
        .map(|(i, ifc)| Tcp::new(params, ifc, me, i, count, secret.clone()))
        .collect()
}

impl Tcp {
    /// A descriptor readable when this module has an event (its epoll instance), for the
    /// passive-target progress thread ([`crate::progress`]).
    pub fn event_fd(&self) -> std::os::fd::RawFd {
        self.epoll.raw_fd()
    }

    /// A module on interface `iface` for process `me`: module `index` of the `count` this
    /// process opens. `secret` is the job secret this process publishes (rank 0 only).
    pub fn new(
        params: &Params,
        iface: Interface,
        me: ProcId,
        index: usize,
        count: usize,
        secret: Option<Key>,
    ) -> Result<Tcp> {
        let max_send = params.usize(&MAX_SEND_SIZE);
        let eager = params.usize(&EAGER_LIMIT).min(max_send);
        let bandwidth = iface::per_interface(params.str(&BANDWIDTH), &iface.name)
            .map_err(|m| bad_param(&BANDWIDTH, &m))?
            .or_else(|| iface::link_speed_mbps(&iface.name))
            .unwrap_or(DEFAULT_BANDWIDTH_MBPS);
        let latency = iface::per_interface(params.str(&LATENCY), &iface.name)
            .map_err(|m| bad_param(&LATENCY, &m))?
            .unwrap_or(DEFAULT_LATENCY_NS);
        let recv_buf = match params.usize(&RECV_BUFFER) {
            0 => 2 * (FRAME_LEN + max_send),
            n => n.max(FRAME_LEN + max_send),
        };
        let cfg = Config {
            sndbuf: params.usize(&SNDBUF),
            send_ring: params.usize(&SEND_BUFFER).max(FRAME_LEN + max_send),
            send_refs: params.usize(&SEND_QUEUE),
            recv_buf,
            connect_timeout: Duration::from_millis(params.int(&CONNECT_TIMEOUT) as u64),
            finalize_timeout: Duration::from_millis(params.int(&FINALIZE_TIMEOUT) as u64),
            user_timeout_ms: params.u32(&USER_TIMEOUT),
        };
        let port_min = params.u32(&PORT_MIN) as u16;
        let ports = if port_min == 0 {
            0..=0
        } else {
            let last = (u32::from(port_min) + params.u32(&PORT_RANGE) - 1).min(65535);
            port_min..=last as u16
        };
        let listener =
            sys::listen(iface.addr, ports.clone(), params.usize(&RCVBUF)).map_err(|e| {
                eprintln!(
                    "stormpi: tcp (rank {}): cannot listen on {} ({}, ports {ports:?}): {e}",
                    me.0, iface.addr, iface.name
                );
                transport("cannot listen")
            })?;
        let port = listener
            .local_addr()
            .map_err(|_| transport("no local address"))?
            .port();
        let epoll = sys::Epoll::new().map_err(|e| {
            eprintln!("stormpi: tcp: epoll_create1: {e}");
            transport("epoll_create1 failed")
        })?;
        epoll
            .add(listener.as_raw_fd(), sys::IN, LISTENER)
            .map_err(|_| transport("epoll_ctl failed"))?;
        Ok(Tcp {
            attrs: BtlAttrs {
                component: "tcp",
                eager_limit: eager,
                max_send_size: max_send,
                latency_ns: latency,
                bandwidth_mbps: bandwidth,
                exclusivity: EXCLUSIVITY,
                flags: BtlFlags::SEND
                    .union(BtlFlags::SEND_REF)
                    .union(BtlFlags::SEND_INLINE),
                get_min: usize::MAX,
            },
            me,
            iface,
            index,
            count,
            cfg,
            listener: Some(listener),
            port,
            epoll,
            own_secret: secret,
            secret: None,
            peers: Vec::new(),
            ep_of: Vec::new(),
            conns: Vec::new(),
            free: Vec::new(),
            active: 0,
            pending: 0,
            connecting: 0,
            stalled: 0,
            idle_calls: 0,
            next_idle_poll: Instant::now(),
            to_report: Vec::new(),
            failed: Vec::new(),
            unreachable: Vec::new(),
            lost: Vec::new(),
            rejects: 0,
            added: false,
            finalized: false,
        })
    }

    /// The interface this module uses.
    pub fn interface(&self) -> &Interface {
        &self.iface
    }

    /// The address this module listens on.
    pub fn local_addr(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.iface.addr, self.port)
    }

    /// Open connections: (opened by us, accepted and authenticated) — for tests and tools.
    pub fn connections(&self) -> (usize, usize) {
        let live = || self.conns.iter().filter_map(|s| s.conn.as_deref());
        (
            live().filter(|c| c.initiated).count(),
            live()
                .filter(|c| !c.initiated && matches!(c.rx, Rx::Frames(_)))
                .count(),
        )
    }

    fn log(&self, msg: std::fmt::Arguments<'_>) {
        eprintln!(
            "stormpi: tcp (rank {}, {}): {msg}",
            self.me.0, self.iface.name
        );
    }

    fn conn(&mut self, slot: usize) -> Option<&mut Conn> {
        self.conns.get_mut(slot)?.conn.as_deref_mut()
    }

    fn rank_of(&self, ep: Option<usize>) -> String {
        match ep.and_then(|e| self.peers.get(e)) {
            Some(p) => format!("rank {}", p.proc.0),
            None => "an unauthenticated peer".into(),
        }
    }

    /// Reads peer `p`'s address in this module's subnet, if it published one.
    fn peer_address(
        &self,
        p: &PeerInfo,
        my_node: u32,
        modex: &mut dyn Modex,
    ) -> Result<Option<SocketAddrV4>> {
        let mut buf = [0u8; 64];
        let count = match modex.get(p.proc, wire::COUNT_KEY, &mut buf)? {
            None => return Ok(None),
            Some(4) => {
                let [a, b, c, d, ..] = buf;
                u32::from_be_bytes([a, b, c, d])
            }
            Some(n) => {
                self.log(format_args!(
                    "rank {} published a malformed {} ({n} bytes); not using tcp to it",
                    p.proc.0,
                    wire::COUNT_KEY
                ));
                return Ok(None);
            }
        };
        if count > MAX_PEER_MODULES {
            self.log(format_args!(
                "rank {} claims {count} tcp addresses; reading the first {MAX_PEER_MODULES}",
                p.proc.0
            ));
        }
        for i in 0..count.min(MAX_PEER_MODULES) as usize {
            let key = wire::addr_key(i);
            let rec = match modex.get(p.proc, &key, &mut buf)? {
                None => {
                    self.log(format_args!(
                        "rank {} published no {key} (it announced {count} addresses)",
                        p.proc.0
                    ));
                    continue;
                }
                Some(n) => match AddrRecord::parse(&buf[..n]) {
                    Ok(r) => r,
                    Err(e) => {
                        self.log(format_args!(
                            "ignoring rank {}'s malformed {key}: {e}",
                            p.proc.0
                        ));
                        continue;
                    }
                },
            };
            if !self.iface.same_subnet(rec.addr) {
                continue;
            }
            // A loopback address means "this machine": only a process of this node is there.
            if (rec.addr.is_loopback() || self.iface.addr.is_loopback()) && p.node != my_node {
                continue;
            }
            return Ok(Some(SocketAddrV4::new(rec.addr, rec.port)));
        }
        Ok(None)
    }

    /// Our handshake towards the peer of endpoint `ep`, in `role`, for the exchange of
    /// nonces `own` (ours) and `theirs`.
    fn handshake_to(
        &self,
        ep: usize,
        secret: &Key,
        role: &str,
        (own, theirs): (Nonce, Nonce),
        follows: bool,
    ) -> [u8; HANDSHAKE_LEN] {
        Handshake {
            nonce: own,
            from: self.peers[ep].me_there,
            to: self.peers[ep].rank_there,
            max_frag: self.attrs.max_send_size as u32,
            follows,
            proof: [0; stormpi_bootstrap::auth::PROOF_LEN],
        }
        .sign(secret, role, &theirs)
        .to_bytes()
    }

    /// The secret the peer of `ep` and this process prove to each other.
    fn key_of(&self, ep: usize) -> Option<&Key> {
        let peer = self.peers.get(ep)?;
        peer.key.as_ref().or(self.secret.as_ref())
    }

    /// Our answer on connection `slot`, which the peer of `ep` opened and authenticated.
    fn answer_on(&self, slot: usize, ep: usize, follows: bool) -> Option<[u8; HANDSHAKE_LEN]> {
        let secret = self.key_of(ep)?;
        let c = self.conns.get(slot)?.conn.as_deref()?;
        let nonces = (c.own_nonce, c.peer_nonce?);
        Some(self.handshake_to(ep, secret, wire::ANSWER, nonces, follows))
    }

    /// Files a new connection and watches it.
    fn insert(&mut self, conn: Conn) -> std::io::Result<usize> {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.conns.push(Slot { gen: 0, conn: None });
            self.conns.len() - 1
        });
        let gen = self.conns[slot].gen;
        if let Err(e) = self
            .epoll
            .add(conn.stream.as_raw_fd(), CONN_EVENTS, conn_token(slot, gen))
        {
            self.free.push(slot);
            return Err(e);
        }
        self.pending += usize::from(conn.pending());
        self.connecting += usize::from(conn.initiated && !conn.connected);
        self.conns[slot].conn = Some(Box::new(conn));
        self.active += 1;
        Ok(slot)
    }

    /// Unfiles a connection (closing its socket when the result is dropped).
    fn remove(&mut self, slot: usize) -> Option<Box<Conn>> {
        let s = self.conns.get_mut(slot)?;
        let mut c = s.conn.take()?;
        s.gen = s.gen.wrapping_add(1) & GEN_MASK;
        self.free.push(slot);
        self.active -= 1;
        self.pending -= usize::from(c.pending());
        self.connecting -= usize::from(c.initiated && !c.connected);
        self.stalled -= usize::from(c.stalled());
        if let Some(ep) = c.ep {
            if self.peers[ep].accepted == Some(slot) {
                self.peers[ep].accepted = None;
                self.peers[ep].accepted_ended = true;
                if let Some(held) = self.peers[ep].held.take() {
                    self.release(held);
                }
            }
            if self.peers[ep].held == Some(slot) {
                self.peers[ep].held = None;
            }
        }
        if let Rx::Frames(r) = &mut c.rx {
            if let Some((token, len)) = r.abandon() {
                self.lost.push((r.peer, token, len));
            }
        }
        Some(c)
    }

    /// Lets the frames held on connection `slot` through (at the next progress call).
    fn release(&mut self, slot: usize) {
        let Some(c) = self.conn(slot) else {
            return;
        };
        c.hold = false;
        if let Rx::Frames(r) = &mut c.rx {
            // Epoll will not report what arrived while held: read it as if the budget had run
            // out.
            if !(r.paused || r.more) {
                r.more = true;
                self.stalled += 1;
            }
        }
    }

    /// The peer of `ep` opened a connection to us while we send on our own to it, and it has the
    /// lower rank: its connection wins. Answer on it (marked "follows") and retire ours.
    fn switch(&mut self, ep: usize, winner: usize) {
        let Tx::On(own) = self.peers[ep].tx else {
            return;
        };
        let Some(c) = self.conn(own) else {
            return;
        };
        // Only our own connection on which the peer never answered (it cannot have: it had its
        // own) is retired.
        if !c.initiated || !matches!(c.rx, Rx::Handshake(_) | Rx::Challenge(_)) {
            return;
        }
        let Some(hs) = self.answer_on(winner, ep, true) else {
            return;
        };
        let Some(q) = SendQueue::new(self.cfg.send_ring, self.cfg.send_refs, Some(hs)) else {
            return;
        };
        if let Some(c) = self.conn(own) {
            c.retiring = true;
        }
        let Some(w) = self.conn(winner) else {
            return;
        };
        w.tx = Some(q);
        self.peers[ep].tx = Tx::On(winner);
        self.flush(winner);
        // Ours goes as soon as what it holds is written.
        self.flush(own);
    }

    /// Closes a connection. If it was the one we send on, sending to that peer ends with `why`,
    /// logged now if frames were still queued or `loud` (an error, not the peer's finalize).
    fn close(&mut self, slot: usize, why: &str, loud: bool) {
        let Some(mut c) = self.remove(slot) else {
            return;
        };
        let queued = c.tx.as_ref().is_some_and(|q| !q.is_empty());
        let who = self.rank_of(c.ep);
        if loud || queued {
            let detail = if queued {
                " (fragments to it were still queued)"
            } else {
                ""
            };
            self.log(format_args!("connection with {who}: {why}{detail}"));
        }
        if let Some(ep) = c.ep {
            if matches!(self.peers[ep].tx, Tx::On(s) if s == slot) {
                self.peers[ep].tx = Tx::Down {
                    why: why.to_string(),
                    logged: loud || queued,
                };
            }
        }
        if let Some(q) = &mut c.tx {
            self.failed.extend(q.abandon());
        }
    }

    /// Closes connection `slot` after `what` failed with `e`; a network failure under a
    /// connection with a job peer makes that peer unreachable (the engine ends the job).
    fn fail(&mut self, slot: usize, what: &str, e: &std::io::Error) {
        if sys::network_failed(e) {
            let ep = self.conn(slot).and_then(|c| c.ep);
            if let Some(p) = ep.and_then(|ep| self.peers.get(ep)).filter(|p| !p.gone) {
                self.unreachable.push(p.proc);
            }
        }
        self.close(slot, &format!("{what}: {e}"), true);
    }

    /// The connection to send to endpoint `ep` on, choosing one at the first send.
    #[inline]
    fn tx_slot(&mut self, ep: usize) -> Option<usize> {
        match self.peers.get(ep)?.tx {
            Tx::On(slot) => Some(slot),
            _ => self.start_tx(ep),
        }
    }

    /// The first send to `ep`: answer on the peer's connection if it opened one, else open ours.
    #[cold]
    #[inline(never)]
    fn start_tx(&mut self, ep: usize) -> Option<usize> {
        self.key_of(ep)?;
        match &self.peers[ep].tx {
            Tx::On(slot) => return Some(*slot),
            Tx::Down { why, logged } => {
                if !logged {
                    let (why, proc) = (why.clone(), self.peers[ep].proc);
                    self.log(format_args!(
                        "cannot send to rank {}: the connection ended ({why})",
                        proc.0
                    ));
                    if let Tx::Down { logged, .. } = &mut self.peers[ep].tx {
                        *logged = true;
                    }
                }
                return None;
            }
            Tx::Idle => {}
        }
        if let Some(slot) = self.peers[ep].accepted {
            // Our handshake goes first, so the peer knows who answers on its connection.
            let hs = self.answer_on(slot, ep, false)?;
            let q = SendQueue::new(self.cfg.send_ring, self.cfg.send_refs, Some(hs))?;
            let c = self.conn(slot)?;
            c.tx = Some(q);
            self.peers[ep].tx = Tx::On(slot);
            self.flush(slot);
            return Some(slot);
        }
        // Our handshake waits for the acceptor's challenge; frames queue behind it.
        let q = SendQueue::new(self.cfg.send_ring, self.cfg.send_refs, None)?;
        self.open(ep, q)
    }

    /// Opens our connection to the peer of `ep`, to send what `q` holds.
    fn open(&mut self, ep: usize, q: SendQueue) -> Option<usize> {
        let addr = self.peers[ep].addr;
        let proc = self.peers[ep].proc;
        let user_timeout = self.cfg.user_timeout_ms;
        let started = sys::connect(self.iface.addr, addr, self.cfg.sndbuf).and_then(|(s, c)| {
            sys::set_user_timeout(s.as_raw_fd(), user_timeout)?;
            if c || !sys::wait_writable(s.as_raw_fd(), CONNECT_WAIT_MS)? {
                return Ok((s, c));
            }
            match s.take_error()? {
                None => Ok((s, true)),
                Some(e) => Err(e),
            }
        });
        let conn = started.and_then(|(stream, connected)| {
            let own_nonce = Nonce::generate()?;
            self.insert(Conn {
                stream,
                from: SocketAddr::V4(addr),
                initiated: true,
                ep: Some(ep),
                connected,
                deadline: (!connected).then(|| Instant::now() + self.cfg.connect_timeout),
                rx: Rx::Challenge(HsBuf::new()),
                tx: Some(q),
                listed: false,
                hold: false,
                retiring: false,
                hup: false,
                own_nonce,
                peer_nonce: None,
            })
        });
        match conn {
            Ok(slot) => {
                self.peers[ep].tx = Tx::On(slot);
                // A peer in progress answers at once: then the handshake and the first frame
                // leave now; else when the challenge arrives.
                let fd = self
                    .conn(slot)
                    .filter(|c| c.connected)
                    .map(|c| c.stream.as_raw_fd());
                if fd.is_some_and(|fd| sys::wait_readable(fd, CHALLENGE_WAIT_MS).unwrap_or(false)) {
                    self.take_challenge(slot);
                }
                match self.peers[ep].tx {
                    Tx::On(slot) => Some(slot),
                    _ => None,
                }
            }
            Err(e) => {
                self.log(format_args!(
                    "cannot connect to rank {} at {addr}: {e}",
                    proc.0
                ));
                self.peers[ep].tx = Tx::Down {
                    why: format!("connect failed: {e}"),
                    logged: true,
                };
                // Nothing sent to it will arrive, and nothing it would answer: whoever waits
                // for it (a receive, an agreement with another job) must not wait on.
                self.unreachable.push(proc);
                None
            }
        }
    }

    /// Writes what connection `slot` has queued, as far as the socket takes it.
    fn flush(&mut self, slot: usize) {
        let Some(c) = self.conns.get_mut(slot).and_then(|s| s.conn.as_deref_mut()) else {
            return;
        };
        if !c.connected {
            return;
        }
        let Some(q) = &mut c.tx else {
            return;
        };
        match q.flush(c.stream.as_raw_fd()) {
            Ok(_) if c.retiring && q.is_empty() => {
                // Everything is in the kernel, which sends it before the end of stream that
                // closing the socket sends; the peer waits for that end.
                let done = q.abandon();
                self.failed.extend(done);
                self.remove(slot);
            }
            Ok(_) => {
                if q.has_done() && !c.listed {
                    c.listed = true;
                    self.to_report.push(slot);
                }
            }
            Err(e) => self.fail(slot, "write failed", &e),
        }
    }

    /// Reports connection `slot`'s finished zero-copy frames.
    fn report(&mut self, slot: usize, sink: &mut dyn Sink) -> usize {
        let Some(c) = self.conn(slot) else {
            return 0;
        };
        c.listed = false;
        let Some(q) = &mut c.tx else {
            return 0;
        };
        let mut n = 0;
        for t in q.drain_done() {
            sink.completed(t, Ok(()));
            n += 1;
        }
        n
    }

    /// Reports completions recorded outside progress.
    fn report_pending(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        for (t, written) in self.failed.drain(..) {
            let result = if written {
                Ok(())
            } else {
                Err(transport("connection lost"))
            };
            sink.completed(t, result);
            n += 1;
        }
        for (from, t, len) in self.lost.drain(..) {
            sink.placed(from, t, len, Err(transport("connection lost")));
            n += 1;
        }
        for peer in self.unreachable.drain(..) {
            sink.unreachable(peer);
            n += 1;
        }
        while let Some(slot) = self.to_report.pop() {
            n += self.report(slot, sink);
        }
        n
    }

    fn log_reject(&mut self, from: SocketAddr, why: std::fmt::Arguments<'_>) {
        self.rejects += 1;
        if self.rejects <= MAX_REJECT_LOGS {
            self.log(format_args!("rejected a connection from {from}: {why}"));
            if self.rejects == MAX_REJECT_LOGS {
                self.log(format_args!("further rejected connections are not logged"));
            }
        }
    }

    /// Drops an accepted connection that did not authenticate.
    fn reject(&mut self, slot: usize, why: std::fmt::Arguments<'_>) {
        if let Some(c) = self.remove(slot) {
            self.log_reject(c.from, why);
        }
    }

    /// The accepted connection that has waited longest without a handshake.
    fn oldest_pending(&self) -> Option<usize> {
        self.conns
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.conn.as_deref()?)))
            .filter(|(_, c)| c.pending())
            .min_by_key(|(_, c)| c.deadline)
            .map(|(i, _)| i)
    }

    /// Accepts what waits in the listen backlog. When the handshake table is full, the
    /// connection that has waited longest without presenting a handshake makes room: a peer's
    /// handshake comes with its connection, so only idle strangers age there, and however many
    /// of them there are, a real peer's connection is served at the next progress.
    fn accept(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        // Bounded per call, so that a flood cannot keep progress here.
        for _ in 0..MAX_PENDING {
            let Some(listener) = &self.listener else {
                return n;
            };
            let (stream, from) = match listener.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // E.g. out of descriptors: the connection waits in the backlog.
                    self.log(format_args!("accept failed: {e}"));
                    return n;
                }
            };
            n += 1;
            if self.pending >= MAX_PENDING {
                if let Some(old) = self.oldest_pending() {
                    self.reject(
                        old,
                        format_args!("no handshake while newer connections wait"),
                    );
                }
            }
            // We may answer on it: no Nagle delay for small frames here either.
            let ready = stream
                .set_nonblocking(true)
                .and_then(|_| stream.set_nodelay(true))
                .and_then(|_| sys::set_user_timeout(stream.as_raw_fd(), self.cfg.user_timeout_ms));
            // The challenge first: the connecting side's proof must cover our fresh nonce.
            let conn = ready.and_then(|_| {
                let own_nonce = Nonce::generate()?;
                let challenge = Challenge { nonce: own_nonce }.to_bytes();
                // A fresh socket's buffer takes these few bytes whole.
                let n =
                    sys::send_vectored(stream.as_raw_fd(), &[std::io::IoSlice::new(&challenge)])?;
                if n != CHALLENGE_LEN {
                    return Err(std::io::Error::other("the challenge did not fit"));
                }
                self.insert(Conn {
                    stream,
                    from,
                    initiated: false,
                    ep: None,
                    connected: true,
                    deadline: Some(Instant::now() + self.cfg.connect_timeout),
                    rx: Rx::Handshake(HsBuf::new()),
                    tx: None,
                    listed: false,
                    hold: false,
                    retiring: false,
                    hup: false,
                    own_nonce,
                    peer_nonce: None,
                })
            });
            match conn {
                // The handshake usually arrives with the connection.
                Ok(slot) => n += self.read(slot, sink),
                Err(e) => self.log(format_args!("cannot set up an accepted connection: {e}")),
            }
        }
        n
    }

    /// Checks the handshake of an accepted connection whose challenge carried `ours`; the
    /// endpoint of the peer it authenticates, and the peer's nonce.
    fn check_handshake(
        &self,
        b: &[u8; HANDSHAKE_LEN],
        ours: &Nonce,
    ) -> std::result::Result<(usize, Nonce), String> {
        let hs = Handshake::parse(b).map_err(|e| e.to_string())?;
        let ep = self.ep_of.get(hs.from as usize).copied().unwrap_or(NO_EP);
        // A known peer proves its own secret (the job's, or its link's); anyone else the job's.
        let secret = match ep {
            NO_EP => self.secret.as_ref(),
            ep => self.key_of(ep as usize),
        }
        .ok_or("no job secret known yet")?;
        if !hs.verify(secret, wire::CONNECT, ours) {
            return Err(
                "wrong proof of the job secret (a stranger, or a replayed handshake)".into(),
            );
        }
        if hs.to != self.me.0 {
            return Err(format!(
                "addressed to rank {}, this is rank {}",
                hs.to, self.me.0
            ));
        }
        if ep == NO_EP {
            return Err(format!(
                "unknown rank {} (not a peer of this interface)",
                hs.from
            ));
        }
        self.check_size(&hs)?;
        if self.peers[ep as usize].accepted.is_some() {
            return Err(format!("rank {} is connected already", hs.from));
        }
        Ok((ep as usize, hs.nonce))
    }

    /// Checks the handshake with which the peer of `ep` answers on our connection, in the
    /// exchange of nonces `ours` and `theirs` (from its challenge); whether its frames follow
    /// those of its own connection to us.
    fn check_answer(
        &self,
        b: &[u8; HANDSHAKE_LEN],
        ep: usize,
        ours: &Nonce,
        theirs: Option<Nonce>,
    ) -> std::result::Result<bool, String> {
        let hs = Handshake::parse(b).map_err(|e| e.to_string())?;
        let secret = self.key_of(ep).ok_or("no job secret known")?;
        if theirs != Some(hs.nonce) || !hs.verify(secret, wire::ANSWER, ours) {
            return Err("wrong proof of the job secret".into());
        }
        let want = self.peers[ep].proc.0;
        if hs.from != want || hs.to != self.me.0 {
            return Err(format!(
                "it says it is rank {} talking to rank {}, expected rank {want} talking to \
                 rank {}",
                hs.from, hs.to, self.me.0
            ));
        }
        self.check_size(&hs)?;
        Ok(hs.follows)
    }

    fn check_size(&self, hs: &Handshake) -> std::result::Result<(), String> {
        if hs.max_frag as usize > self.attrs.max_send_size {
            return Err(format!(
                "rank {} sends fragments of up to {} bytes, this rank takes {} (set \
                 btl_tcp_max_send_size alike at every rank)",
                hs.from, hs.max_frag, self.attrs.max_send_size
            ));
        }
        Ok(())
    }

    /// Something happened on connection `slot`.
    fn on_event(&mut self, slot: usize, events: u32, sink: &mut dyn Sink) -> usize {
        let Some(c) = self.conn(slot) else {
            return 0;
        };
        let mut n = 0;
        if c.initiated && !c.connected {
            if events & (sys::OUT | sys::ERR_HUP) == 0 {
                return 0;
            }
            match c.stream.take_error() {
                Ok(None) if events & sys::ERR_HUP == 0 => {
                    c.connected = true;
                    c.deadline = None;
                    self.connecting -= 1;
                    n += 1;
                }
                Ok(None) => {
                    self.close(slot, "connect failed", true);
                    return 1;
                }
                Ok(Some(e)) | Err(e) => {
                    self.close(slot, &format!("connect failed: {e}"), true);
                    return 1;
                }
            }
        }
        if events & sys::OUT != 0 {
            self.flush(slot);
            n += self.report(slot, sink);
        }
        if events & (sys::IN | sys::RDHUP | sys::ERR_HUP) != 0 {
            if events & (sys::RDHUP | sys::ERR_HUP) != 0 {
                if let Some(c) = self.conn(slot) {
                    c.hup = true;
                }
            }
            n += self.read(slot, sink);
        }
        n
    }

    /// Reads what connection `slot` has: the handshake, then frames.
    fn read(&mut self, slot: usize, sink: &mut dyn Sink) -> usize {
        let Some(c) = self.conn(slot) else {
            return 0;
        };
        let fd = c.stream.as_raw_fd();
        let got = match &mut c.rx {
            Rx::Frames(_) if c.hold => return 0,
            Rx::Frames(r) if r.paused => return 0,
            Rx::Frames(_) => return self.pump(slot, sink),
            Rx::Challenge(_) => return self.take_challenge(slot) + self.read_answer(slot, sink),
            Rx::Handshake(h) => h.read(fd),
        };
        let (initiated, ep, own_nonce, peer_nonce) = (c.initiated, c.ep, c.own_nonce, c.peer_nonce);
        let b = match got {
            Ok(HandshakeRead::Partial) => return 0,
            Ok(HandshakeRead::Complete(b)) => b,
            Ok(HandshakeRead::Closed) if initiated => {
                // The peer closed the connection we opened without ever answering on it:
                // its finalize.
                self.close(slot, "closed by the peer", false);
                return 1;
            }
            Ok(HandshakeRead::Closed) => {
                self.reject(slot, format_args!("closed before its handshake"));
                return 1;
            }
            Ok(HandshakeRead::Garbage) if initiated => {
                let who = self.rank_of(ep);
                self.close(slot, &format!("{who} answered with garbage"), true);
                return 1;
            }
            Ok(HandshakeRead::Garbage) => {
                self.reject(slot, format_args!("bad magic (not a stormpi connection)"));
                return 1;
            }
            Err(e) if initiated => {
                self.fail(slot, "read failed", &e);
                return 1;
            }
            Err(e) => {
                self.reject(slot, format_args!("error before its handshake: {e}"));
                return 1;
            }
        };
        let mut hold = false;
        let ep = if initiated {
            let Some(ep) = ep else {
                // Connections we open are opened to a peer: an internal error, not its fault.
                self.close(
                    slot,
                    "internal error: a connection we opened has no peer",
                    true,
                );
                return 1;
            };
            match self.check_answer(&b, ep, &own_nonce, peer_nonce) {
                Ok(follows) => {
                    // Its frames here come after those on its own connection to us.
                    hold = follows && !self.peers[ep].accepted_ended;
                    if hold {
                        self.peers[ep].held = Some(slot);
                    }
                }
                Err(why) => {
                    let who = self.rank_of(Some(ep));
                    self.close(slot, &format!("{who} answered wrongly: {why}"), true);
                    return 1;
                }
            }
            ep
        } else {
            match self.check_handshake(&b, &own_nonce) {
                Ok((ep, theirs)) => {
                    self.pending -= 1;
                    self.peers[ep].accepted = Some(slot);
                    if let Some(c) = self.conn(slot) {
                        c.peer_nonce = Some(theirs);
                    }
                    ep
                }
                Err(why) => {
                    self.reject(slot, format_args!("{why}"));
                    return 1;
                }
            }
        };
        let reader = Reader::new(
            self.peers[ep].proc,
            self.attrs.max_send_size as u32,
            self.cfg.recv_buf,
        );
        let Some(reader) = reader else {
            self.close(slot, "no memory for its receive buffer", true);
            return 1;
        };
        let Some(c) = self.conn(slot) else {
            return 1;
        };
        c.ep = Some(ep);
        c.deadline = None;
        c.rx = Rx::Frames(reader);
        c.hold = hold;
        if !initiated && self.peers[ep].yields {
            // Both of us opened a connection: the lower rank's carries both directions.
            self.switch(ep, slot);
        }
        1 + self.pump(slot, sink)
    }

    /// Reads the acceptor's challenge on our connection `slot`; once it is there, completes our
    /// handshake with the proof over its nonce and writes what waits. Counts events.
    fn take_challenge(&mut self, slot: usize) -> usize {
        let Some(c) = self.conn(slot) else {
            return 0;
        };
        let fd = c.stream.as_raw_fd();
        let Rx::Challenge(h) = &mut c.rx else {
            return 0;
        };
        let b = match h.read(fd) {
            Ok(HandshakeRead::Partial) => return 0,
            Ok(HandshakeRead::Complete(b)) => b,
            Ok(HandshakeRead::Closed) => {
                self.close(slot, "closed by the peer before its challenge", true);
                return 1;
            }
            Ok(HandshakeRead::Garbage) => {
                self.close(slot, "the peer's challenge is garbage", true);
                return 1;
            }
            Err(e) => {
                self.fail(slot, "read failed", &e);
                return 1;
            }
        };
        let ch = match Challenge::parse(&b) {
            Ok(ch) => ch,
            Err(e) => {
                self.close(slot, &format!("the peer's challenge: {e}"), true);
                return 1;
            }
        };
        let (ep, own) = (c.ep, c.own_nonce);
        let Some((ep, secret)) = ep.and_then(|ep| Some((ep, self.key_of(ep)?))) else {
            return 0;
        };
        if sys::peer_closed(fd) {
            return self.reopen(slot, ep);
        }
        let hs = self.handshake_to(ep, secret, wire::CONNECT, (own, ch.nonce), false);
        let Some(c) = self.conn(slot) else {
            return 0;
        };
        c.peer_nonce = Some(ch.nonce);
        c.rx = Rx::Handshake(HsBuf::new());
        if let Some(q) = &mut c.tx {
            q.set_prefix(hs);
        }
        self.flush(slot);
        1
    }

    /// The peer closed our connection `slot` right after its challenge: it waited longer than
    /// its `btl_tcp_connect_timeout` for our handshake (we were not in progress), or made room
    /// for newer connections. Nothing of ours was written on it, so open another with the same
    /// queue.
    fn reopen(&mut self, slot: usize, ep: usize) -> usize {
        if self.peers[ep].reopens >= MAX_REOPENS {
            self.close(
                slot,
                "the peer closed each connection before our handshake went out",
                true,
            );
            return 1;
        }
        self.peers[ep].reopens += 1;
        let Some(q) = self.remove(slot).and_then(|mut c| c.tx.take()) else {
            return 0;
        };
        self.peers[ep].tx = Tx::Idle;
        self.open(ep, q);
        1
    }

    /// After the challenge: an answer that may have come with it (edge-triggered epoll will
    /// not report those bytes again).
    fn read_answer(&mut self, slot: usize, sink: &mut dyn Sink) -> usize {
        match self.conn(slot) {
            Some(c) if matches!(c.rx, Rx::Handshake(_)) => self.read(slot, sink),
            _ => 0,
        }
    }

    /// Delivers what authenticated connection `slot` has; closes it when it ended.
    fn pump(&mut self, slot: usize, sink: &mut dyn Sink) -> usize {
        let Some(c) = self.conn(slot) else {
            return 0;
        };
        if c.hold {
            return 0;
        }
        let was = c.stalled();
        let fd = c.stream.as_raw_fd();
        let Rx::Frames(r) = &mut c.rx else {
            return 0;
        };
        let p = r.pump(fd, sink, c.hup);
        let now = c.stalled();
        if now != was {
            if now {
                self.stalled += 1;
            } else {
                self.stalled -= 1;
            }
        }
        match p.end {
            None => {}
            // The peer's finalize: quiet unless we still had frames for it.
            Some(ReadEnd::Closed) => self.close(slot, "closed by the peer", false),
            Some(ReadEnd::Io(e)) => self.fail(slot, "read failed", &e),
            Some(end) => self.close(slot, &format!("{end}; closing it"), true),
        }
        p.delivered
    }

    /// Retries readers the sink pushed back, and reads on where the budget stopped.
    fn resume_stalled(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        for slot in 0..self.conns.len() {
            if self.conns[slot].conn.as_ref().is_some_and(|c| c.stalled()) {
                n += self.pump(slot, sink);
                if self.stalled == 0 {
                    break;
                }
            }
        }
        n
    }

    /// Drops connections whose handshake is overdue, and connects that take too long.
    fn expire(&mut self) {
        let now = Instant::now();
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].conn.as_deref() else {
                continue;
            };
            if c.deadline.is_some_and(|d| now >= d) {
                if c.initiated {
                    self.close(slot, "connect timed out", true);
                } else {
                    self.reject(slot, format_args!("no handshake in time"));
                }
            }
        }
    }

    /// The idle module's look at its listener, at most every [`IDLE_POLL_INTERVAL`].
    #[inline(never)]
    fn idle_poll(&mut self, sink: &mut dyn Sink) -> usize {
        self.idle_calls = 0;
        let now = Instant::now();
        if now < self.next_idle_poll {
            return 0;
        }
        self.next_idle_poll = now + IDLE_POLL_INTERVAL;
        self.poll(sink, 0)
    }

    /// One round of progress: completions, pushed-back frames, deadlines, then what epoll
    /// reports (waiting up to `timeout_ms` for it).
    fn poll(&mut self, sink: &mut dyn Sink, timeout_ms: i32) -> usize {
        let mut n = 0;
        if !self.failed.is_empty()
            || !self.to_report.is_empty()
            || !self.lost.is_empty()
            || !self.unreachable.is_empty()
        {
            n += self.report_pending(sink);
        }
        if self.stalled > 0 {
            n += self.resume_stalled(sink);
        }
        if self.pending > 0 || self.connecting > 0 {
            self.expire();
        }
        let mut evs = [sys::NO_EVENT; EVENTS];
        let k = match self.epoll.wait(&mut evs, timeout_ms) {
            Ok(k) => k,
            Err(e) => {
                self.log(format_args!("epoll_wait: {e}"));
                return n;
            }
        };
        for ev in &evs[..k] {
            let (token, events) = (ev.u64, ev.events);
            if token == LISTENER {
                n += self.accept(sink);
                continue;
            }
            let slot = (token & 0xffff_ffff) as usize;
            let gen = (token >> 32) as u32;
            if self.conns.get(slot).is_some_and(|s| s.gen == gen) {
                n += self.on_event(slot, events, sink);
            }
        }
        n
    }
}

impl Btl for Tcp {
    fn attrs(&self) -> &BtlAttrs {
        &self.attrs
    }

    fn publish(&mut self, modex: &mut dyn ModexPut) -> Result<()> {
        // The business card, and for the job's own peers its secret.
        self.card(modex)?;
        if self.index == 0 {
            if let Some(s) = &self.own_secret {
                modex.put(wire::SECRET_KEY, s.as_bytes())?;
            }
        }
        Ok(())
    }

    fn card(&mut self, card: &mut dyn ModexPut) -> Result<()> {
        // The addresses, never the job's secret: the other job proves the link's.
        let rec = AddrRecord {
            addr: self.iface.addr,
            prefix: self.iface.prefix,
            port: self.port,
        };
        card.put(&wire::addr_key(self.index), &rec.to_bytes())?;
        if self.index == 0 {
            card.put(wire::COUNT_KEY, &(self.count as u32).to_be_bytes())?;
        }
        Ok(())
    }

    fn add_later(
        &mut self,
        peers: &[PeerInfo],
        modex: &mut dyn Modex,
        endpoints: &mut [Option<Endpoint>],
    ) -> Result<()> {
        if self.finalized || peers.len() != endpoints.len() {
            return Err(Error::bad_arg(
                "tcp: add_later after finalize, or tables of different lengths",
            ));
        }
        endpoints.fill(None);
        let mut buf = [0u8; 64];
        let mut word = |modex: &mut dyn Modex, p: ProcId, key: &str| -> Result<Option<u32>> {
            Ok(match modex.get(p, key, &mut buf)? {
                Some(4) => Some(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]])),
                _ => None,
            })
        };
        for (p, ep) in peers.iter().zip(endpoints.iter_mut()) {
            let (Some(me_there), Some(rank_there)) = (
                word(modex, p.proc, stormpi_core::dpm::KEY_ME_THERE)?,
                word(modex, p.proc, stormpi_core::dpm::KEY_RANK)?,
            ) else {
                continue;
            };
            let mut key = [0u8; SECRET_LEN];
            if modex.get(p.proc, stormpi_core::dpm::KEY_SECRET, &mut key)? != Some(SECRET_LEN) {
                continue;
            }
            let mut same = [0u8; 1];
            let same_host = modex.get(p.proc, stormpi_core::dpm::KEY_SAME_HOST, &mut same)?
                == Some(1)
                && same[0] == 1;
            // Loopback addresses serve a process of another job on this host only.
            let seen = PeerInfo {
                node: u32::from(!same_host),
                ..*p
            };
            let Some(addr) = self.peer_address(&seen, 0, modex)? else {
                continue;
            };
            let slot = p.proc.0 as usize;
            if self.ep_of.len() <= slot {
                self.ep_of.resize(slot + 1, NO_EP);
            }
            if self.ep_of[slot] != NO_EP {
                return Err(Error::bad_arg("tcp: a process was added twice"));
            }
            // The entry of a process that left, once none of its connections is open.
            let reuse = (0..self.peers.len()).find(|&e| {
                self.peers[e].gone
                    && !self
                        .conns
                        .iter()
                        .any(|s| s.conn.as_ref().is_some_and(|c| c.ep == Some(e)))
            });
            let i = reuse.unwrap_or(self.peers.len());
            self.ep_of[slot] = i as u32;
            // Both sides order the pair alike by their listening addresses.
            let yields = (self.iface.addr, self.port) > (*addr.ip(), addr.port());
            let peer = Peer {
                proc: p.proc,
                addr,
                tx: Tx::Idle,
                accepted: None,
                accepted_ended: false,
                held: None,
                reopens: 0,
                key: Some(Key::from_bytes(key)),
                me_there,
                rank_there,
                yields,
                gone: false,
            };
            match reuse {
                Some(e) => self.peers[e] = peer,
                None => self.peers.push(peer),
            }
            *ep = Some(Endpoint(i as u32));
        }
        Ok(())
    }

    fn del_later(&mut self, proc: ProcId, ep: Endpoint) {
        let i = ep.0 as usize;
        if self.peers.get(i).is_none_or(|p| p.proc != proc || p.gone) {
            return;
        }
        if let Some(e) = self.ep_of.get_mut(proc.0 as usize) {
            *e = NO_EP;
        }
        let p = &mut self.peers[i];
        p.gone = true;
        p.held = None;
        p.tx = Tx::Down {
            why: "disconnected".to_string(),
            logged: true,
        };
        for slot in 0..self.conns.len() {
            let Some(c) = self.conns[slot].conn.as_deref_mut() else {
                continue;
            };
            if c.ep != Some(i) {
                continue;
            }
            // Frames still queued (the last of the disconnecting barrier, say) leave first;
            // nothing more is read from the peer meanwhile.
            let queued = c.tx.as_ref().is_some_and(|q| !q.is_empty());
            if queued && c.connected && matches!(c.rx, Rx::Frames(_)) {
                let was = c.stalled();
                if let Rx::Frames(r) = &mut c.rx {
                    r.paused = false;
                    r.more = false;
                }
                c.hold = true;
                c.retiring = true;
                self.stalled -= usize::from(was);
            } else {
                self.remove(slot);
            }
        }
    }

    fn add_procs(
        &mut self,
        peers: &[PeerInfo],
        modex: &mut dyn Modex,
        endpoints: &mut [Option<Endpoint>],
    ) -> Result<()> {
        if self.added || self.finalized {
            return Err(Error::bad_arg(
                "tcp: add_procs called twice, or after finalize",
            ));
        }
        if peers.len() != endpoints.len() {
            return Err(Error::bad_arg(
                "tcp: peer and endpoint tables differ in length",
            ));
        }
        self.added = true;
        endpoints.fill(None);
        let my_node = peers
            .iter()
            .find(|p| p.proc == self.me)
            .ok_or(Error::bad_arg(
                "tcp: the own process is not in the peer table",
            ))?
            .node;
        let mut buf = [0u8; 64];
        self.secret = match modex.get(ProcId(0), wire::SECRET_KEY, &mut buf)? {
            Some(SECRET_LEN) => {
                let mut k = [0; SECRET_LEN];
                k.copy_from_slice(&buf[..SECRET_LEN]);
                Some(Key::from_bytes(k))
            }
            other => {
                if peers.len() > 1 {
                    self.log(format_args!(
                        "rank 0 published no valid job secret ({}); not using tcp",
                        match other {
                            None => "none".to_string(),
                            Some(n) => format!("{n} bytes"),
                        }
                    ));
                }
                return Ok(());
            }
        };
        let max_rank = peers.iter().map(|p| p.proc.0).max().unwrap_or(0) as usize;
        self.ep_of = vec![NO_EP; max_rank + 1];
        for (p, ep) in peers.iter().zip(endpoints.iter_mut()) {
            if p.proc == self.me {
                continue;
            }
            if let Some(addr) = self.peer_address(p, my_node, modex)? {
                if self.ep_of[p.proc.0 as usize] != NO_EP {
                    return Err(Error::bad_arg(
                        "tcp: a process appears twice in the peer table",
                    ));
                }
                let i = self.peers.len() as u32;
                self.ep_of[p.proc.0 as usize] = i;
                self.peers.push(Peer {
                    proc: p.proc,
                    addr,
                    tx: Tx::Idle,
                    accepted: None,
                    accepted_ended: false,
                    held: None,
                    reopens: 0,
                    key: None,
                    me_there: self.me.0,
                    rank_there: p.proc.0,
                    yields: self.me > p.proc,
                    gone: false,
                });
                *ep = Some(Endpoint(i));
            }
        }
        Ok(())
    }

    #[inline]
    fn reserve(&mut self, ep: Endpoint, len: usize) -> Option<&mut [u8]> {
        debug_assert!(
            len <= self.attrs.max_send_size,
            "tcp: fragment above max_send_size"
        );
        if len > self.attrs.max_send_size {
            return None;
        }
        let slot = self.tx_slot(ep.0 as usize)?;
        self.conn(slot)?.tx.as_mut()?.reserve(len)
    }

    #[inline]
    fn commit(&mut self, ep: Endpoint, tag: AmTag, len: usize) {
        let slot = match self.peers.get(ep.0 as usize).map(|p| &p.tx) {
            Some(Tx::On(slot)) => *slot,
            _ => {
                debug_assert!(false, "tcp: commit to an endpoint without a reservation");
                return;
            }
        };
        let Some(q) = self.conn(slot).and_then(|c| c.tx.as_mut()) else {
            return;
        };
        let was_empty = q.is_empty();
        q.commit(tag.0, len);
        // Write at once unless earlier frames wait for room (epoll will say when there is).
        if was_empty {
            self.flush(slot);
        }
    }

    fn send_inline(&mut self, ep: Endpoint, tag: AmTag, header: &[u8], data: &[u8]) -> bool {
        let total = header.len() + data.len();
        if total > self.attrs.max_send_size {
            debug_assert!(false, "tcp: fragment above max_send_size");
            return false;
        }
        if header.len() > INLINE_HEADER {
            // Not the PML's header: copy the whole fragment.
            let Some(space) = self.reserve(ep, total) else {
                return false;
            };
            space[..header.len()].copy_from_slice(header);
            space[header.len()..].copy_from_slice(data);
            self.commit(ep, tag, total);
            return true;
        }
        let Some(slot) = self.tx_slot(ep.0 as usize) else {
            return false;
        };
        let Some(c) = self.conn(slot) else {
            return false;
        };
        let fd = c.connected.then(|| c.stream.as_raw_fd());
        let Some(q) = c.tx.as_mut() else {
            return false;
        };
        match q.send_inline(fd, tag.0, header, data) {
            Ok(taken) => taken,
            Err(e) => {
                // The frame is the module's now; it fails with the connection.
                self.fail(slot, "write failed", &e);
                true
            }
        }
    }

    fn send_ref(
        &mut self,
        ep: Endpoint,
        tag: AmTag,
        header: &[u8],
        data: DataRef,
        token: Token,
    ) -> Option<Sent> {
        let total = header.len() + data.len();
        if total > self.attrs.max_send_size {
            debug_assert!(false, "tcp: fragment above max_send_size");
            return None;
        }
        if header.len() > INLINE_HEADER {
            // A header this long is not the PML's: copy the whole fragment instead.
            let space = self.reserve(ep, total)?;
            space[..header.len()].copy_from_slice(header);
            // SAFETY: DataRef's contract: `data` is readable for its length until we say Done.
            let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr(), data.len()) };
            space[header.len()..].copy_from_slice(bytes);
            self.commit(ep, tag, total);
            return Some(Sent::Done);
        }
        let slot = self.tx_slot(ep.0 as usize)?;
        let q = self.conn(slot)?.tx.as_mut()?;
        let was_empty = q.is_empty();
        if !q.queue_ref(tag.0, header, data, token) {
            return None;
        }
        if !was_empty {
            return Some(Sent::Pending);
        }
        self.flush(slot);
        match self.conn(slot).and_then(|c| c.tx.as_mut()) {
            Some(q) => match q.take_if_last_done() {
                Some(t) => {
                    debug_assert_eq!(t, token);
                    Some(Sent::Done)
                }
                None => Some(Sent::Pending),
            },
            // The connection failed during the write: the frame is reported with an error.
            None => Some(Sent::Pending),
        }
    }

    #[inline]
    fn progress(&mut self, sink: &mut dyn Sink) -> usize {
        if !self.added || self.finalized {
            return 0;
        }
        if self.active == 0 && self.failed.is_empty() && self.lost.is_empty() {
            // No connection: every progress round of a job on one node comes here.
            self.idle_calls += 1;
            if self.idle_calls < IDLE_CHECK_EVERY {
                return 0;
            }
            return self.idle_poll(sink);
        }
        self.poll(sink, 0)
    }

    fn finalize(&mut self) {
        if self.finalized {
            return;
        }
        // Fragments committed before finalize must still leave (the last ones of the closing
        // barrier, for one), also on connections still being set up. Keep accepting and
        // reading too (into a sink that drops everything), so that a peer flushing to us is
        // never stuck behind our finalize.
        if self.added {
            let deadline = Instant::now() + self.cfg.finalize_timeout;
            let mut discard = Discard;
            loop {
                let mut waiting = 0;
                for slot in 0..self.conns.len() {
                    self.flush(slot);
                    if let Some(c) = self.conns[slot].conn.as_deref() {
                        waiting += usize::from(c.tx.as_ref().is_some_and(|q| !q.is_empty()));
                    }
                }
                if waiting == 0 {
                    break;
                }
                if Instant::now() >= deadline {
                    self.log(format_args!(
                        "finalize: fragments to {waiting} peers still queued after {} ms; \
                         dropping them",
                        self.cfg.finalize_timeout.as_millis()
                    ));
                    break;
                }
                self.poll(&mut discard, 10);
            }
        }
        self.finalized = true;
        self.peers.clear();
        self.conns.clear();
        self.free.clear();
        self.to_report.clear();
        self.failed.clear();
        self.lost.clear();
        self.listener = None;
        self.active = 0;
        self.pending = 0;
        self.connecting = 0;
        self.stalled = 0;
    }
}

/// Takes every fragment and drops it (reading during finalize).
struct Discard;

impl Sink for Discard {
    fn deliver(&mut self, _from: ProcId, _tag: AmTag, _frag: &[u8]) -> Delivery {
        Delivery::Consumed
    }
}

#[cfg(test)]
mod tests;
