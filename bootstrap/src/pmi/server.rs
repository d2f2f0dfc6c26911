//! A PMI-1 server for the ranks of one job: local ranks each over their own
//! socketpair, remote ranks over TCP (`PMI_PORT`, see [`super::port`]).
//!
//! A TCP connection is first *pending*: it must identify as a rank with
//! `cmd=initack pmiid=<rank>` within [`IDENTIFY_TIMEOUT`], and the rank must
//! be one the launcher announced as remote ([`PmiServer::expect_remote`])
//! that has not connected before. Anything else is refused, closed and
//! reported as [`ServerEvent::Rejected`]; the job goes on.
//!
//! With a job key ([`PmiServer::require_key`], as stormrun always sets), a
//! TCP connection must also prove it holds the key of the rank it claims
//! (the challenge–response of [`super::port`]) before any command is served;
//! a rank's identity is bound at that moment. On a socketpair, stormpi's
//! client proves it the same way, and a failed proof closes the socket; a
//! client that does not try (MPICH's) is served as the rank whose socketpair
//! it holds, since only the process the launcher started for that rank
//! inherited it.
//!
//! The server does no waiting of its own: the launcher polls the descriptors
//! it exposes and calls [`PmiServer::on_readable`] / [`PmiServer::on_writable`],
//! collecting the [`ServerEvent`]s that need the launcher's attention (abort,
//! finalize, a misbehaving rank). Nothing a rank sends can make it panic: bad
//! input gets an error reply and an event for the launcher to log.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use super::names::Names;
use super::port::{self, Challenged};
use super::spawn::{self, SpawnCommand};
use super::transport::Transport;
use super::wire::{self, excerpt, Message, MAX_LINE};
use crate::auth::Key;

/// Limits announced in the `maxes` reply (Hydra's values; each counts a NUL).
pub const KVSNAME_MAX: usize = 256;
/// Longest key plus one.
pub const KEYLEN_MAX: usize = 64;
/// Longest value plus one.
pub const VALLEN_MAX: usize = 1024;

/// Replies queued for a rank that does not read them are capped here; a rank
/// past it is disconnected rather than growing the launcher without bound.
const MAX_QUEUED_OUTPUT: usize = 1 << 20;

/// Time a TCP connection has to identify itself with `initack` and prove its key (a real
/// rank does both at once as it connects).
pub const IDENTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// TCP connections waiting to identify, at most; a new one past that closes
/// the oldest, so that a flood of strangers can neither exhaust the launcher's
/// descriptors nor keep a rank out.
const MAX_PENDING: usize = 64;
/// The `initack` line is short; a connection that sends more than this
/// without a newline is not a PMI client.
const MAX_IDENTIFY_LINE: usize = 256;
/// Connections accepted per call of [`PmiServer::on_acceptable`] (the rest
/// wait for the next poll round, so other descriptors get their turn).
const ACCEPTS_PER_CALL: usize = 16;

/// Something the launcher must act on or report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// The rank asked to abort the job (`cmd=abort`).
    Abort {
        /// The rank that asked.
        rank: u32,
        /// The exit code it asked for.
        code: i32,
        /// Its message, if it sent one.
        message: Option<String>,
    },
    /// The rank completed PMI finalize.
    Finalized {
        /// The rank.
        rank: u32,
    },
    /// The rank sent something invalid; it got an error reply. For logging.
    ProtocolError {
        /// The rank.
        rank: u32,
        /// What was wrong.
        detail: String,
    },
    /// The rank's connection closed (it exited, or closed the socket).
    Disconnected {
        /// The rank.
        rank: u32,
    },
    /// The rank asked to start processes as a new job (`mcmd=spawn`, see
    /// [`super::spawn`]); the launcher answers with [`PmiServer::answer_spawn`].
    Spawn {
        /// The rank.
        rank: u32,
        /// The commands, in order.
        commands: Vec<SpawnCommand>,
    },
    /// A TCP connection was refused: it did not identify as a remote rank
    /// that is still expected. It has been closed. For logging.
    Rejected {
        /// The peer's address.
        peer: String,
        /// Why.
        reason: String,
    },
}

/// Per-rank connection state.
#[derive(Debug, Default)]
struct Conn {
    /// Our end of the socketpair or the rank's TCP connection; `None` before
    /// the rank is connected and after it disconnected.
    stream: Option<Transport>,
    /// Received bytes not yet forming a complete line.
    inbuf: Vec<u8>,
    /// Replies not yet accepted by the socket.
    outbuf: Vec<u8>,
    /// Skipping the rest of an over-long line up to its newline.
    discarding: bool,
    /// The rank sent PMI `init`: it is an MPI process, which must finalize before it exits.
    initialized: bool,
    finalized: bool,
    in_barrier: bool,
    /// The rank connects over TCP (it runs on another host).
    remote: bool,
    /// A TCP connection has identified as this rank; another one will be
    /// refused, even after this one closes.
    claimed: bool,
    /// Where the connection is in proving who it is.
    auth: Auth,
    /// The lines of a spawn block being received (after `mcmd=`, before `endcmd`).
    mcmd: Option<Vec<(String, String)>>,
    /// The commands of a spawn request whose last block has not come yet.
    spawn_commands: Vec<SpawnCommand>,
    /// Skipping the rest of a refused spawn block, up to its `endcmd`.
    mcmd_skip: bool,
}

/// How far a connection has come in proving which rank it is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Auth {
    /// Proven (or the server requires no proof): commands are served.
    #[default]
    Done,
    /// Nothing received yet; `initack` with a nonce must come first.
    Expected,
    /// Challenged; the response must come next.
    Challenged(Challenged),
}

/// What the next line of an identifying connection leads to.
enum Step {
    /// Send this challenge and wait for the response.
    Challenge(Vec<u8>, Challenged),
    /// It is this rank's connection from now on.
    Adopt(u32),
    /// Refuse it, for this reason.
    Refuse(String),
}

/// A TCP connection that has not identified itself yet.
#[derive(Debug)]
struct Pending {
    id: u64,
    stream: TcpStream,
    peer: SocketAddr,
    inbuf: Vec<u8>,
    deadline: Instant,
    /// Sent the challenge for an `initack`, waiting for the response.
    challenged: Option<Challenged>,
}

/// The PMI-1 server of one job: one key-value space, one barrier.
#[derive(Debug)]
pub struct PmiServer {
    kvsname: String,
    appnums: Vec<u32>,
    conns: Vec<Conn>,
    kvs: HashMap<String, String>,
    barrier_waiting: usize,
    listener: Option<TcpListener>,
    pending: Vec<Pending>,
    next_pending_id: u64,
    /// The job's key, when connections must prove they hold their rank's key.
    key: Option<Key>,
    /// Serve TCP connections that identify without a proof, despite the key.
    unauthenticated: bool,
    /// Published service names (`publish_name`, `lookup_name`, `unpublish_name`).
    names: Names,
}

impl PmiServer {
    /// A server for `appnums.len()` ranks; `appnums[r]` is the application
    /// context (MPMD program index) of rank `r`. `kvsname` names the job's
    /// key-value space (at most [`KVSNAME_MAX`]` - 1` bytes, no spaces).
    pub fn new(kvsname: &str, appnums: Vec<u32>) -> PmiServer {
        assert!(kvsname.len() < KVSNAME_MAX && !kvsname.is_empty() && !kvsname.contains(' '));
        let conns = appnums.iter().map(|_| Conn::default()).collect();
        PmiServer {
            kvsname: kvsname.to_string(),
            appnums,
            conns,
            kvs: HashMap::new(),
            barrier_waiting: 0,
            listener: None,
            pending: Vec::new(),
            next_pending_id: 0,
            key: None,
            unauthenticated: false,
            names: Names::default(),
        }
    }

    /// Requires every connection to prove it holds its rank's key, derived
    /// from `job` (give each rank `job.derive(port::RANK_KEYS, rank)`). Call
    /// before [`connect_rank`](Self::connect_rank).
    pub fn require_key(&mut self, job: Key) {
        self.key = Some(job);
    }

    /// With `yes`, a TCP connection that identifies without trying to prove
    /// its key (another MPI's PMI client) is served as the rank it claims,
    /// if that rank has not connected yet — as a server without a key does.
    /// One that tries must still succeed.
    pub fn allow_unauthenticated(&mut self, yes: bool) {
        self.unauthenticated = yes;
    }

    /// The key connections of `rank` must prove, if any: the launcher gives
    /// it to the rank.
    pub fn rank_key(&self, rank: u32) -> Option<Key> {
        self.key.as_ref().map(|k| k.derive(port::RANK_KEYS, rank))
    }

    /// Number of ranks served.
    pub fn size(&self) -> u32 {
        self.conns.len() as u32
    }

    /// The key-value space name.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }

    /// Creates the socketpair for `rank`, keeps the server's end and returns
    /// the rank's end, to be inherited by the rank's process as `PMI_FD`.
    /// Both ends are close-on-exec; the launcher clears that flag for the
    /// returned one in the child only.
    pub fn connect_rank(&mut self, rank: u32) -> io::Result<OwnedFd> {
        let (ours, theirs) = UnixStream::pair()?;
        ours.set_nonblocking(true)?;
        let conn = &mut self.conns[rank as usize];
        *conn = Conn {
            stream: Some(Transport::Unix(ours)),
            auth: if self.key.is_some() {
                Auth::Expected
            } else {
                Auth::Done
            },
            ..Conn::default()
        };
        Ok(OwnedFd::from(theirs))
    }

    /// Starts accepting TCP connections on `addr` (port 0: any free port)
    /// and returns the address actually bound. The listening socket is
    /// close-on-exec, so ranks do not inherit it.
    pub fn listen(&mut self, addr: SocketAddr) -> io::Result<SocketAddr> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let bound = listener.local_addr()?;
        self.listener = Some(listener);
        Ok(bound)
    }

    /// Announces that `rank` will connect over TCP and identify with
    /// `initack` (it has no socketpair).
    pub fn expect_remote(&mut self, rank: u32) {
        self.conns[rank as usize].remote = true;
    }

    /// The listening socket to poll for readability, while listening.
    pub fn listener_fd(&self) -> Option<RawFd> {
        self.listener.as_ref().map(|l| l.as_raw_fd())
    }

    /// Stops accepting connections and drops those not yet identified
    /// (when the job is being torn down).
    pub fn stop_listening(&mut self) {
        self.listener = None;
        self.pending.clear();
    }

    /// Accepts waiting TCP connections; they become pending until they
    /// identify (see [`pending_fds`](Self::pending_fds)).
    pub fn on_acceptable(&mut self, events: &mut Vec<ServerEvent>) {
        let Some(listener) = &self.listener else {
            return;
        };
        for _ in 0..ACCEPTS_PER_CALL {
            match listener.accept() {
                Ok((stream, peer)) => {
                    // A rank identifies as it connects, so only idle strangers grow old here:
                    // the oldest makes room, and a flood never turns a real rank away.
                    if self.pending.len() >= MAX_PENDING {
                        let old = self.pending.remove(0);
                        refuse(
                            old,
                            format!(
                                "did not identify while {MAX_PENDING} newer connections waited"
                            ),
                            events,
                        );
                    }
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    self.next_pending_id += 1;
                    self.pending.push(Pending {
                        id: self.next_pending_id,
                        stream,
                        peer,
                        inbuf: Vec::new(),
                        deadline: Instant::now() + IDENTIFY_TIMEOUT,
                        challenged: None,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // The peer gave up before we got to it: nothing to do.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                // Out of descriptors or memory: the listener would stay
                // readable and spin the poll loop, so stop listening. The
                // remote ranks still to connect then fail, and so does the
                // job, with a message saying why.
                Err(e) => {
                    events.push(ServerEvent::Rejected {
                        peer: "(unknown peer)".into(),
                        reason: format!(
                            "could not be accepted ({e}); no longer accepting PMI connections"
                        ),
                    });
                    self.listener = None;
                    break;
                }
            }
        }
    }

    /// The TCP connections waiting to identify, as (id, descriptor to poll
    /// for readability).
    pub fn pending_fds(&self) -> impl Iterator<Item = (u64, RawFd)> + '_ {
        self.pending.iter().map(|p| (p.id, p.stream.as_raw_fd()))
    }

    /// When the oldest pending connection's time to identify runs out.
    pub fn next_pending_deadline(&self) -> Option<Instant> {
        self.pending.iter().map(|p| p.deadline).min()
    }

    /// Refuses the pending connections whose time to identify is over.
    pub fn expire_pending(&mut self, now: Instant, events: &mut Vec<ServerEvent>) {
        while let Some(i) = self.pending.iter().position(|p| p.deadline <= now) {
            let p = self.pending.swap_remove(i);
            let reason = format!(
                "did not identify with cmd=initack within {} s",
                IDENTIFY_TIMEOUT.as_secs()
            );
            refuse(p, reason, events);
        }
    }

    /// Reads from the pending connection `id`; on a complete first line,
    /// either makes it the connection of the rank it names or refuses it.
    pub fn on_pending_readable(&mut self, id: u64, events: &mut Vec<ServerEvent>) {
        let Some(i) = self.pending.iter().position(|p| p.id == id) else {
            return;
        };
        let p = &mut self.pending[i];
        let mut chunk = [0u8; 512];
        let failure = loop {
            match p.stream.read(&mut chunk) {
                Ok(0) => break Some("closed the connection before identifying".to_string()),
                Ok(n) => {
                    p.inbuf.extend_from_slice(&chunk[..n]);
                    if p.inbuf.contains(&b'\n') || p.inbuf.len() > MAX_IDENTIFY_LINE {
                        break None;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break None,
                Err(e) => break Some(format!("connection failed before identifying: {e}")),
            }
        };
        if let Some(reason) = failure {
            refuse(self.pending.swap_remove(i), reason, events);
            return;
        }
        while let Some(line) = wire::take_line(&mut self.pending[i].inbuf) {
            match self.identify(self.pending[i].challenged.as_ref(), &line, None) {
                Step::Challenge(out, state) => {
                    let p = &mut self.pending[i];
                    p.challenged = Some(state);
                    // The first bytes on the connection: they fit its send buffer.
                    if let Err(e) = p.stream.write_all(&out) {
                        let reason = format!("connection failed while identifying: {e}");
                        refuse(self.pending.swap_remove(i), reason, events);
                        return;
                    }
                }
                Step::Refuse(reason) => {
                    refuse(self.pending.swap_remove(i), reason, events);
                    return;
                }
                Step::Adopt(rank) => {
                    let p = self.pending.swap_remove(i);
                    self.adopt(rank, p, events);
                    return;
                }
            }
        }
        let p = &self.pending[i];
        if p.inbuf.len() > MAX_IDENTIFY_LINE {
            let reason = format!(
                "sent {} bytes without a newline instead of cmd=initack",
                p.inbuf.len()
            );
            refuse(self.pending.swap_remove(i), reason, events);
        }
    }

    /// Serves one line of a connection that has not yet proven which rank
    /// it is. `challenged` is its challenge, once sent; `socket_of` the rank
    /// whose socketpair it is (`None`: a TCP connection, which may claim any
    /// remote rank not yet connected).
    fn identify(
        &self,
        challenged: Option<&Challenged>,
        line: &[u8],
        socket_of: Option<u32>,
    ) -> Step {
        let Some(state) = challenged else {
            let req = match port::parse_initack_request(line) {
                Ok(r) => r,
                Err(e) => return Step::Refuse(e),
            };
            let rank = match socket_of {
                None => match self.claimable(req.id) {
                    Ok(r) => r,
                    Err(e) => return Step::Refuse(e),
                },
                Some(r) if r == req.id => r,
                Some(r) => {
                    return Step::Refuse(format!(
                        "identified as rank {} on rank {r}'s socket",
                        req.id
                    ))
                }
            };
            return match (self.rank_key(rank), req.nonce) {
                (None, _) => Step::Adopt(rank),
                (Some(_), None) if self.unauthenticated => Step::Adopt(rank),
                (Some(_), None) => Step::Refuse(format!(
                    "identified as rank {rank} without proving the job's key (another MPI's \
                     PMI client? see stormrun --pmi-unauthenticated)"
                )),
                (Some(key), Some(nonce)) => match Challenged::start(&key, rank, nonce) {
                    Ok((out, state)) => Step::Challenge(out, state),
                    Err(e) => Step::Refuse(format!("no random bytes for a challenge: {e}")),
                },
            };
        };
        let Some(key) = self.rank_key(state.rank) else {
            return Step::Refuse("challenged without a key".into());
        };
        if let Err(e) = state.check(&key, line) {
            return Step::Refuse(e);
        }
        // Another connection may have proven the same rank meanwhile.
        if socket_of.is_none() {
            if let Err(e) = self.claimable(state.rank) {
                return Step::Refuse(e);
            }
        }
        Step::Adopt(state.rank)
    }

    /// Whether a TCP connection may become rank `id`'s.
    fn claimable(&self, id: u32) -> Result<u32, String> {
        let Some(c) = self.conns.get(id as usize) else {
            return Err(format!(
                "identified as rank {id}, but the job has {} rank(s)",
                self.size()
            ));
        };
        if !c.remote {
            return Err(format!(
                "identified as rank {id}, which is not a remote rank"
            ));
        }
        if c.claimed {
            return Err(format!(
                "identified as rank {id}, which has connected already"
            ));
        }
        Ok(id)
    }

    /// Makes `p` the connection of `rank` and answers its `initack`.
    fn adopt(&mut self, rank: u32, p: Pending, events: &mut Vec<ServerEvent>) {
        let size = self.size();
        let c = &mut self.conns[rank as usize];
        c.stream = Some(Transport::Tcp(p.stream));
        c.claimed = true;
        c.outbuf.extend_from_slice(&port::initack_reply(rank, size));
        // Once every remote rank is in, nobody else has business here.
        if self.conns.iter().all(|c| !c.remote || c.claimed) {
            self.listener = None;
        }
        // A client may have sent its first PMI-1 command right behind the
        // initack line: serve it too.
        self.receive(rank, &p.inbuf, events);
        self.flush(rank, events);
    }

    /// The descriptor to poll for `rank`, while it is connected.
    pub fn fd(&self, rank: u32) -> Option<RawFd> {
        self.conns[rank as usize]
            .stream
            .as_ref()
            .map(|s| s.as_raw_fd())
    }

    /// Whether replies for `rank` wait for the socket to become writable.
    pub fn wants_write(&self, rank: u32) -> bool {
        let c = &self.conns[rank as usize];
        c.stream.is_some() && !c.outbuf.is_empty()
    }

    /// Whether `rank` has finalized.
    pub fn is_finalized(&self, rank: u32) -> bool {
        self.conns[rank as usize].finalized
    }

    /// Whether `rank` initialized PMI (it called `MPI_Init`) and has not finalized it.
    pub fn is_active(&self, rank: u32) -> bool {
        let c = &self.conns[rank as usize];
        c.initialized && !c.finalized
    }

    /// Number of ranks currently waiting in the barrier.
    pub fn barrier_waiting(&self) -> usize {
        self.barrier_waiting
    }

    /// While some ranks wait in the barrier, returns a rank that can never
    /// join it: one that has finalized or that `gone` says has exited.
    /// `None` when no barrier is pending or it can still complete.
    pub fn barrier_blocked_by(&self, gone: impl Fn(u32) -> bool) -> Option<u32> {
        if self.barrier_waiting == 0 {
            return None;
        }
        (0..self.size()).find(|&r| {
            let c = &self.conns[r as usize];
            !c.in_barrier && (c.finalized || gone(r))
        })
    }

    /// Ranks currently waiting in the barrier.
    pub fn barrier_waiters(&self) -> Vec<u32> {
        (0..self.size())
            .filter(|&r| self.conns[r as usize].in_barrier)
            .collect()
    }

    /// Closes the server's end for `rank` (the launcher calls this when the
    /// rank's process is gone; EOF does it too).
    pub fn disconnect(&mut self, rank: u32) {
        let c = &mut self.conns[rank as usize];
        c.stream = None;
        c.inbuf = Vec::new();
        c.outbuf = Vec::new();
    }

    /// Whether `rank` is served over TCP.
    pub fn is_remote(&self, rank: u32) -> bool {
        self.conns[rank as usize].remote
    }

    /// Reads and serves whatever `rank` has sent.
    pub fn on_readable(&mut self, rank: u32, events: &mut Vec<ServerEvent>) {
        let mut chunk = [0u8; 16 * 1024];
        // Bounded per call so that one chatty rank cannot starve the others;
        // poll reports the rest next round.
        for _ in 0..16 {
            let Some(stream) = self.conns[rank as usize].stream.as_mut() else {
                return;
            };
            match stream.read(&mut chunk) {
                Ok(0) => {
                    self.disconnect(rank);
                    events.push(ServerEvent::Disconnected { rank });
                    return;
                }
                Ok(n) => self.receive(rank, &chunk[..n], events),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.disconnect(rank);
                    events.push(ServerEvent::Disconnected { rank });
                    return;
                }
            }
        }
        self.flush(rank, events);
    }

    /// Writes queued replies for `rank`.
    pub fn on_writable(&mut self, rank: u32, events: &mut Vec<ServerEvent>) {
        self.flush(rank, events);
    }

    /// Splits received bytes into lines and serves each.
    fn receive(&mut self, rank: u32, bytes: &[u8], events: &mut Vec<ServerEvent>) {
        let conn = &mut self.conns[rank as usize];
        conn.inbuf.extend_from_slice(bytes);
        loop {
            let conn = &mut self.conns[rank as usize];
            if conn.discarding {
                match conn.inbuf.iter().position(|&b| b == b'\n') {
                    Some(end) => {
                        conn.inbuf.drain(..=end);
                        conn.discarding = false;
                    }
                    None => {
                        conn.inbuf.clear();
                        return;
                    }
                }
            }
            match wire::take_line(&mut conn.inbuf) {
                Some(line) => self.serve_line(rank, &line, events),
                None => {
                    if conn.inbuf.len() > MAX_LINE {
                        conn.inbuf.clear();
                        conn.discarding = true;
                        self.reply_error(rank, "line too long");
                        events.push(ServerEvent::ProtocolError {
                            rank,
                            detail: format!("sent a line longer than {MAX_LINE} bytes"),
                        });
                    }
                    return;
                }
            }
        }
    }

    /// Serves one line from `rank`: a line of a spawn request's block, or a command.
    fn serve_line(&mut self, rank: u32, line: &[u8], events: &mut Vec<ServerEvent>) {
        let r = rank as usize;
        let conn = &mut self.conns[r];
        if conn.mcmd_skip {
            conn.mcmd_skip = line != b"endcmd";
            return;
        }
        let starts = line.starts_with(b"mcmd=") && conn.auth == Auth::Done;
        if conn.mcmd.is_none() && !starts {
            return self.handle_line(rank, line, events);
        }
        let mut block = conn.mcmd.take().unwrap_or_default();
        let refused = if line == b"endcmd" {
            match spawn::parse_block(&block) {
                Ok(b) if b.index == conn.spawn_commands.len() + 1 => {
                    conn.spawn_commands.push(b.command);
                    if b.index == b.total {
                        let commands = std::mem::take(&mut conn.spawn_commands);
                        events.push(ServerEvent::Spawn { rank, commands });
                    }
                    None
                }
                Ok(b) => Some(format!(
                    "spawn block {} came after {} blocks",
                    b.index,
                    conn.spawn_commands.len()
                )),
                Err(why) => Some(why),
            }
        } else if block.len() >= spawn::MAX_BLOCK_LINES {
            Some(format!(
                "a spawn block is longer than {} lines",
                spawn::MAX_BLOCK_LINES
            ))
        } else {
            match spawn::split_line(line) {
                Ok(kv) => {
                    block.push(kv);
                    conn.mcmd = Some(block);
                    None
                }
                Err(why) => Some(why),
            }
        };
        if let Some(why) = refused {
            // The rest of a refused block is not served as commands: it ends at `endcmd`.
            let conn = &mut self.conns[r];
            conn.mcmd_skip = line != b"endcmd";
            conn.spawn_commands.clear();
            self.answer_spawn(rank, Err(why.clone()), events);
            events.push(ServerEvent::ProtocolError {
                rank,
                detail: format!("sent a malformed spawn request: {why}"),
            });
        }
    }

    /// Answers `rank`'s spawn request: started (`Ok`), or refused for the reason given.
    pub fn answer_spawn(
        &mut self,
        rank: u32,
        result: Result<(), String>,
        events: &mut Vec<ServerEvent>,
    ) {
        let reply = match result {
            Ok(()) => Message::new("spawn_result").arg("rc", 0),
            Err(why) => Message::new("spawn_result")
                .arg("rc", -1)
                .arg("msg", why.replace(' ', "_")),
        };
        self.reply(rank, &reply);
        self.flush(rank, events);
    }

    /// Serves one complete command line from `rank`.
    fn handle_line(&mut self, rank: u32, line: &[u8], events: &mut Vec<ServerEvent>) {
        match self.conns[rank as usize].auth {
            Auth::Done => {}
            Auth::Expected if line.starts_with(b"cmd=initack ") => {
                return self.authenticate(rank, None, line, events);
            }
            // A client that does not authenticate (MPICH's, say) is the rank
            // whose socketpair it holds: only that rank's process can have it.
            Auth::Expected if Message::parse(line).is_ok() => {
                self.conns[rank as usize].auth = Auth::Done
            }
            Auth::Expected => {}
            Auth::Challenged(state) => {
                return self.authenticate(rank, Some(state), line, events);
            }
        }
        let msg = match Message::parse(line) {
            Ok(m) => m,
            Err(e) => {
                self.reply_error(rank, "malformed command");
                events.push(ServerEvent::ProtocolError {
                    rank,
                    detail: format!("sent a malformed PMI command ({e}): `{}`", excerpt(line)),
                });
                return;
            }
        };
        let r = rank as usize;
        match msg.cmd.as_str() {
            "init" => {
                let ok = msg.get("pmi_version") == Some("1");
                self.conns[r].initialized |= ok;
                let mut reply = Message::new("response_to_init")
                    .arg("pmi_version", 1)
                    .arg("pmi_subversion", 1)
                    .arg("rc", if ok { 0 } else { -1 });
                if !ok {
                    reply = reply.arg("msg", "only_PMI-1_is_served");
                    events.push(ServerEvent::ProtocolError {
                        rank,
                        detail: format!(
                            "asked for PMI version {}; stormrun serves PMI-1 only",
                            msg.get("pmi_version").unwrap_or("(none)")
                        ),
                    });
                }
                self.reply(rank, &reply);
            }
            "get_maxes" => {
                let reply = Message::new("maxes")
                    .arg("kvsname_max", KVSNAME_MAX)
                    .arg("keylen_max", KEYLEN_MAX)
                    .arg("vallen_max", VALLEN_MAX);
                self.reply(rank, &reply);
            }
            "get_appnum" => {
                let reply = Message::new("appnum").arg("appnum", self.appnums[r]);
                self.reply(rank, &reply);
            }
            "get_my_kvsname" => {
                let reply = Message::new("my_kvsname").arg("kvsname", &self.kvsname);
                self.reply(rank, &reply);
            }
            "get_universe_size" => {
                let reply = Message::new("universe_size").arg("size", self.size());
                self.reply(rank, &reply);
            }
            "put" => {
                let reply = match self.put(&msg) {
                    Ok(()) => Message::new("put_result")
                        .arg("rc", 0)
                        .arg("msg", "success"),
                    Err(why) => Message::new("put_result").arg("rc", -1).arg("msg", why),
                };
                self.reply(rank, &reply);
            }
            "get" => {
                let reply = match self.get(&msg) {
                    Ok(value) => Message::new("get_result")
                        .arg("rc", 0)
                        .arg("msg", "success")
                        .arg("value", value),
                    Err(why) => Message::new("get_result").arg("rc", -1).arg("msg", why),
                };
                self.reply(rank, &reply);
            }
            "barrier_in" => self.barrier_in(rank, events),
            "finalize" => {
                self.conns[r].finalized = true;
                self.reply(rank, &Message::new("finalize_ack"));
                events.push(ServerEvent::Finalized { rank });
            }
            "abort" => {
                let code = msg.get("exitcode").map_or(Ok(1), str::parse::<i32>);
                let code = code.unwrap_or_else(|_| {
                    events.push(ServerEvent::ProtocolError {
                        rank,
                        detail: format!("sent abort with a bad exitcode: `{}`", excerpt(line)),
                    });
                    1
                });
                let message = msg.get("message").map(str::to_string);
                events.push(ServerEvent::Abort {
                    rank,
                    code,
                    message,
                });
            }
            "publish_name" | "unpublish_name" | "lookup_name" => {
                let reply = self.name_service(&msg);
                self.reply(rank, &reply);
            }
            "spawn" => {
                let reply = Message::new("spawn_result")
                    .arg("rc", -1)
                    .arg("msg", "stormrun_serves_spawn_as_mcmd_blocks_only");
                self.reply(rank, &reply);
                events.push(ServerEvent::ProtocolError {
                    rank,
                    detail: "sent `cmd=spawn`; stormrun serves spawn in MPICH's multi-line \
                             `mcmd=spawn` form only"
                        .into(),
                });
            }
            other => {
                let detail = format!(
                    "sent an unknown PMI command `{}`",
                    excerpt(other.as_bytes())
                );
                self.reply_error(rank, "unknown command");
                events.push(ServerEvent::ProtocolError { rank, detail });
            }
        }
        self.flush(rank, events);
    }

    /// Serves a name-service request: `publish_name service= port=`, `lookup_name service=`,
    /// `unpublish_name service=`, answered as MPICH's simple PMI expects (`<verb>_result` with
    /// `rc`, and `info=ok` on success; a refusal's `msg` is a [`NameFault`]'s wire spelling).
    fn name_service(&mut self, msg: &Message) -> Message {
        let verb = msg.cmd.trim_end_matches("_name");
        let service = msg.get("service").unwrap_or("");
        let done = match msg.cmd.as_str() {
            "publish_name" => self
                .names
                .publish(service, msg.get("port").unwrap_or(""))
                .map(|()| None),
            "lookup_name" => self.names.lookup(service).map(Some),
            _ => self.names.unpublish(service).map(|()| None),
        };
        let reply = Message::new(&format!("{verb}_result"));
        match done {
            Ok(port) => {
                let reply = reply.arg("rc", 0).arg("info", "ok");
                match port {
                    Some(p) => reply.arg("port", p),
                    None => reply,
                }
            }
            Err(fault) => reply
                .arg("rc", -1)
                .arg("info", "failed")
                .arg("msg", fault.wire()),
        }
    }

    fn check_kvsname(&self, msg: &Message) -> Result<(), String> {
        match msg.get("kvsname") {
            None => Ok(()),
            Some(name) if name == self.kvsname => Ok(()),
            Some(_) => Err("unknown_kvsname".into()),
        }
    }

    fn put(&mut self, msg: &Message) -> Result<(), String> {
        self.check_kvsname(msg)?;
        let key = match msg.get("key") {
            Some(k) if !k.is_empty() => k,
            _ => return Err("missing_key".into()),
        };
        let value = match msg.get("value") {
            Some(v) if !v.is_empty() => v,
            _ => return Err("missing_value".into()),
        };
        if key.len() >= KEYLEN_MAX {
            return Err("key_too_long".into());
        }
        if value.len() >= VALLEN_MAX {
            return Err("value_too_long".into());
        }
        // Like Hydra, a second put of the same key replaces the value.
        self.kvs.insert(key.to_string(), value.to_string());
        Ok(())
    }

    fn get(&self, msg: &Message) -> Result<String, String> {
        self.check_kvsname(msg)?;
        let key = match msg.get("key") {
            Some(k) if !k.is_empty() => k,
            _ => return Err("missing_key".into()),
        };
        self.kvs
            .get(key)
            .cloned()
            .ok_or_else(|| format!("key_{key}_not_found"))
    }

    fn barrier_in(&mut self, rank: u32, events: &mut Vec<ServerEvent>) {
        let conn = &mut self.conns[rank as usize];
        if conn.in_barrier {
            events.push(ServerEvent::ProtocolError {
                rank,
                detail: "entered the PMI barrier twice".into(),
            });
            return;
        }
        conn.in_barrier = true;
        self.barrier_waiting += 1;
        if self.barrier_waiting == self.conns.len() {
            self.barrier_waiting = 0;
            let out = Message::new("barrier_out").to_line();
            for r in 0..self.size() {
                let c = &mut self.conns[r as usize];
                c.in_barrier = false;
                if c.stream.is_some() {
                    c.outbuf.extend_from_slice(&out);
                }
                self.flush(r, events);
            }
        }
    }

    /// Serves a line of a socketpair that has not proven it is `rank`'s:
    /// nothing but the authenticating `initack` is served.
    fn authenticate(
        &mut self,
        rank: u32,
        challenged: Option<Challenged>,
        line: &[u8],
        events: &mut Vec<ServerEvent>,
    ) {
        let size = self.size();
        let step = self.identify(challenged.as_ref(), line, Some(rank));
        let c = &mut self.conns[rank as usize];
        match step {
            Step::Challenge(out, state) => {
                c.auth = Auth::Challenged(state);
                c.outbuf.extend_from_slice(&out);
            }
            Step::Adopt(_) => {
                c.auth = Auth::Done;
                c.outbuf.extend_from_slice(&port::initack_reply(rank, size));
            }
            Step::Refuse(reason) => {
                if let Some(stream) = c.stream.as_mut() {
                    let _ = stream.write(&port::initack_refusal(&reason));
                }
                self.disconnect(rank);
                events.push(ServerEvent::ProtocolError {
                    rank,
                    detail: format!("refused on its PMI socket: {reason}"),
                });
                events.push(ServerEvent::Disconnected { rank });
            }
        }
    }

    fn reply_error(&mut self, rank: u32, why: &str) {
        let reply = Message::new("error")
            .arg("rc", -1)
            .arg("msg", why.replace(' ', "_"));
        self.reply(rank, &reply);
    }

    fn reply(&mut self, rank: u32, msg: &Message) {
        let c = &mut self.conns[rank as usize];
        if c.stream.is_some() {
            c.outbuf.extend_from_slice(&msg.to_line());
        }
    }

    fn flush(&mut self, rank: u32, events: &mut Vec<ServerEvent>) {
        let c = &mut self.conns[rank as usize];
        let Some(stream) = c.stream.as_mut() else {
            return;
        };
        while !c.outbuf.is_empty() {
            match stream.write(&c.outbuf) {
                Ok(0) => break,
                Ok(n) => {
                    c.outbuf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.disconnect(rank);
                    events.push(ServerEvent::Disconnected { rank });
                    return;
                }
            }
        }
        if c.outbuf.len() > MAX_QUEUED_OUTPUT {
            self.disconnect(rank);
            events.push(ServerEvent::ProtocolError {
                rank,
                detail: "does not read its PMI replies; disconnected".into(),
            });
            events.push(ServerEvent::Disconnected { rank });
        }
    }
}

/// Tells a pending connection why it is refused (best effort: it may not
/// read), closes it and reports it.
fn refuse(mut p: Pending, reason: String, events: &mut Vec<ServerEvent>) {
    let _ = p.stream.write(&port::initack_refusal(&reason));
    events.push(ServerEvent::Rejected {
        peer: p.peer.to_string(),
        reason,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    /// A server with `n` ranks, each with the rank's end of its socketpair.
    fn setup(n: u32) -> (PmiServer, Vec<BufReader<UnixStream>>) {
        let mut server = PmiServer::new("kvs_test", (0..n).map(|r| r % 2).collect());
        let clients = (0..n)
            .map(|r| {
                let s = UnixStream::from(server.connect_rank(r).unwrap());
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                BufReader::new(s)
            })
            .collect();
        (server, clients)
    }

    fn send(
        server: &mut PmiServer,
        clients: &mut [BufReader<UnixStream>],
        rank: u32,
        bytes: &[u8],
    ) -> Vec<ServerEvent> {
        clients[rank as usize].get_mut().write_all(bytes).unwrap();
        let mut events = Vec::new();
        server.on_readable(rank, &mut events);
        events
    }

    fn recv(clients: &mut [BufReader<UnixStream>], rank: u32) -> String {
        let mut line = String::new();
        clients[rank as usize].read_line(&mut line).unwrap();
        line
    }

    #[test]
    fn serves_the_startup_sequence() {
        let (mut s, mut c) = setup(3);
        send(
            &mut s,
            &mut c,
            1,
            b"cmd=init pmi_version=1 pmi_subversion=1\n",
        );
        assert_eq!(
            recv(&mut c, 1),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n"
        );
        // Several commands in one read are served in order.
        send(
            &mut s,
            &mut c,
            1,
            b"cmd=get_maxes\ncmd=get_appnum\ncmd=get_my_kvsname\ncmd=get_universe_size\n",
        );
        assert_eq!(
            recv(&mut c, 1),
            "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n"
        );
        assert_eq!(recv(&mut c, 1), "cmd=appnum appnum=1\n");
        assert_eq!(recv(&mut c, 1), "cmd=my_kvsname kvsname=kvs_test\n");
        assert_eq!(recv(&mut c, 1), "cmd=universe_size size=3\n");
    }

    #[test]
    fn put_get_and_missing_key() {
        let (mut s, mut c) = setup(2);
        send(
            &mut s,
            &mut c,
            0,
            b"cmd=put kvsname=kvs_test key=a-0 value=x0102\n",
        );
        assert_eq!(recv(&mut c, 0), "cmd=put_result rc=0 msg=success\n");
        send(&mut s, &mut c, 1, b"cmd=get kvsname=kvs_test key=a-0\n");
        assert_eq!(
            recv(&mut c, 1),
            "cmd=get_result rc=0 msg=success value=x0102\n"
        );
        send(&mut s, &mut c, 1, b"cmd=get kvsname=kvs_test key=b-0\n");
        assert_eq!(
            recv(&mut c, 1),
            "cmd=get_result rc=-1 msg=key_b-0_not_found\n"
        );
        send(&mut s, &mut c, 1, b"cmd=get kvsname=other key=a-0\n");
        assert_eq!(
            recv(&mut c, 1),
            "cmd=get_result rc=-1 msg=unknown_kvsname\n"
        );
        send(&mut s, &mut c, 1, b"cmd=put kvsname=kvs_test key=a-1\n");
        assert_eq!(recv(&mut c, 1), "cmd=put_result rc=-1 msg=missing_value\n");
        let long_value = format!("cmd=put key=k value={}\n", "v".repeat(VALLEN_MAX));
        send(&mut s, &mut c, 1, long_value.as_bytes());
        assert_eq!(recv(&mut c, 1), "cmd=put_result rc=-1 msg=value_too_long\n");
        let long_key = format!("cmd=put key={} value=1\n", "k".repeat(KEYLEN_MAX));
        send(&mut s, &mut c, 1, long_key.as_bytes());
        assert_eq!(recv(&mut c, 1), "cmd=put_result rc=-1 msg=key_too_long\n");
    }

    #[test]
    fn barrier_releases_only_when_all_arrive() {
        let (mut s, mut c) = setup(3);
        send(&mut s, &mut c, 0, b"cmd=barrier_in\n");
        send(&mut s, &mut c, 2, b"cmd=barrier_in\n");
        assert_eq!(s.barrier_waiting(), 2);
        assert_eq!(s.barrier_waiters(), vec![0, 2]);
        assert_eq!(s.barrier_blocked_by(|_| false), None);
        assert_eq!(s.barrier_blocked_by(|r| r == 1), Some(1));
        assert!(!s.wants_write(0));
        send(&mut s, &mut c, 1, b"cmd=barrier_in\n");
        for r in 0..3 {
            assert_eq!(recv(&mut c, r), "cmd=barrier_out\n");
        }
        assert_eq!(s.barrier_waiting(), 0);
        assert_eq!(s.barrier_blocked_by(|_| true), None);
        // A second round works the same.
        for r in 0..3 {
            send(&mut s, &mut c, r, b"cmd=barrier_in\n");
        }
        for r in 0..3 {
            assert_eq!(recv(&mut c, r), "cmd=barrier_out\n");
        }
    }

    #[test]
    fn finalized_rank_blocks_a_later_barrier() {
        let (mut s, mut c) = setup(2);
        let ev = send(&mut s, &mut c, 1, b"cmd=finalize\n");
        assert_eq!(ev, vec![ServerEvent::Finalized { rank: 1 }]);
        assert_eq!(recv(&mut c, 1), "cmd=finalize_ack\n");
        assert!(s.is_finalized(1));
        send(&mut s, &mut c, 0, b"cmd=barrier_in\n");
        assert_eq!(s.barrier_blocked_by(|_| false), Some(1));
    }

    #[test]
    fn abort_is_reported() {
        let (mut s, mut c) = setup(2);
        let ev = send(
            &mut s,
            &mut c,
            1,
            b"cmd=abort exitcode=7 message=bad\\ input\n",
        );
        assert_eq!(
            ev,
            vec![ServerEvent::Abort {
                rank: 1,
                code: 7,
                message: Some("bad input".into())
            }]
        );
        // MPICH 4.0 sends no message.
        let ev = send(&mut s, &mut c, 0, b"cmd=abort exitcode=3\n");
        assert_eq!(
            ev,
            vec![ServerEvent::Abort {
                rank: 0,
                code: 3,
                message: None
            }]
        );
        let ev = send(&mut s, &mut c, 0, b"cmd=abort exitcode=lots\n");
        assert!(matches!(ev[0], ServerEvent::ProtocolError { rank: 0, .. }));
        assert!(matches!(
            ev[1],
            ServerEvent::Abort {
                rank: 0,
                code: 1,
                ..
            }
        ));
    }

    #[test]
    fn names_published_by_one_rank_are_seen_by_another() {
        let (mut s, mut c) = setup(2);
        let ev = send(
            &mut s,
            &mut c,
            0,
            b"cmd=publish_name service=ocean port=tcp://10.0.0.1:4000#ab\n",
        );
        assert!(ev.is_empty(), "{ev:?}");
        assert_eq!(recv(&mut c, 0), "cmd=publish_result rc=0 info=ok\n");
        send(&mut s, &mut c, 1, b"cmd=lookup_name service=ocean\n");
        assert_eq!(
            recv(&mut c, 1),
            "cmd=lookup_result rc=0 info=ok port=tcp://10.0.0.1:4000#ab\n"
        );
        send(
            &mut s,
            &mut c,
            1,
            b"cmd=publish_name service=ocean port=x\n",
        );
        assert_eq!(
            recv(&mut c, 1),
            "cmd=publish_result rc=-1 info=failed msg=service_already_published\n"
        );
        send(&mut s, &mut c, 1, b"cmd=unpublish_name service=ocean\n");
        assert_eq!(recv(&mut c, 1), "cmd=unpublish_result rc=0 info=ok\n");
        send(&mut s, &mut c, 0, b"cmd=unpublish_name service=ocean\n");
        assert_eq!(
            recv(&mut c, 0),
            "cmd=unpublish_result rc=-1 info=failed msg=service_not_published\n"
        );
        send(&mut s, &mut c, 0, b"cmd=publish_name service=lake\n");
        assert_eq!(
            recv(&mut c, 0),
            "cmd=publish_result rc=-1 info=failed msg=bad_service_or_port_name\n"
        );
    }

    #[test]
    fn spawn_blocks_become_one_event_and_get_one_answer() {
        use crate::pmi::spawn::{encode, SpawnCommand};
        let (mut s, mut c) = setup(2);
        let cmds = vec![
            SpawnCommand {
                command: "a".into(),
                args: vec!["x y".into()],
                maxprocs: 2,
                info: vec![("wdir".into(), "/tmp".into())],
                preput: vec![("k".into(), "v".into())],
            },
            SpawnCommand {
                command: "b".into(),
                maxprocs: 1,
                ..SpawnCommand::default()
            },
        ];
        let wire = encode(&cmds).unwrap();
        // Split anywhere: blocks are framed by lines, not by reads.
        let (head, tail) = wire.split_at(wire.len() / 2);
        assert!(send(&mut s, &mut c, 1, head).is_empty());
        let ev = send(&mut s, &mut c, 1, tail);
        assert_eq!(
            ev,
            vec![ServerEvent::Spawn {
                rank: 1,
                commands: cmds
            }]
        );
        let mut events = Vec::new();
        s.answer_spawn(1, Ok(()), &mut events);
        assert_eq!(recv(&mut c, 1), "cmd=spawn_result rc=0\n");
        s.answer_spawn(1, Err("no such program".into()), &mut events);
        assert_eq!(
            recv(&mut c, 1),
            "cmd=spawn_result rc=-1 msg=no_such_program\n"
        );
        // A block without its program is refused once, and commands after it are served.
        let ev = send(
            &mut s,
            &mut c,
            0,
            b"mcmd=spawn\nnprocs=1\ntotspawns=1\nspawnssofar=1\nargcnt=0\npreput_num=0\ninfo_num=0\nendcmd\n",
        );
        assert!(
            matches!(&ev[..], [ServerEvent::ProtocolError { rank: 0, detail }] if detail.contains("execname")),
            "{ev:?}"
        );
        assert!(recv(&mut c, 0).starts_with("cmd=spawn_result rc=-1 msg="));
        send(&mut s, &mut c, 0, b"cmd=get_maxes\n");
        assert!(recv(&mut c, 0).starts_with("cmd=maxes "));
    }

    #[test]
    fn garbage_gets_an_error_reply_and_an_event() {
        let (mut s, mut c) = setup(1);
        let ev = send(&mut s, &mut c, 0, b"\x00\xffhello there\n");
        assert_eq!(recv(&mut c, 0), "cmd=error rc=-1 msg=malformed_command\n");
        match &ev[..] {
            [ServerEvent::ProtocolError { rank: 0, detail }] => {
                assert!(detail.contains("\\x00\\xffhello"), "{detail}")
            }
            other => panic!("{other:?}"),
        }
        let ev = send(&mut s, &mut c, 0, b"cmd=frobnicate now=1\n");
        assert_eq!(recv(&mut c, 0), "cmd=error rc=-1 msg=unknown_command\n");
        assert_eq!(ev.len(), 1);
        let ev = send(
            &mut s,
            &mut c,
            0,
            b"cmd=init pmi_version=2 pmi_subversion=0\n",
        );
        assert_eq!(
            recv(&mut c, 0),
            "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1 msg=only_PMI-1_is_served\n"
        );
        assert_eq!(ev.len(), 1);
        send(&mut s, &mut c, 0, b"cmd=spawn nprocs=1\n");
        assert_eq!(
            recv(&mut c, 0),
            "cmd=spawn_result rc=-1 msg=stormrun_serves_spawn_as_mcmd_blocks_only\n"
        );
        send(&mut s, &mut c, 0, b"cmd=lookup_name service=x\n");
        assert_eq!(
            recv(&mut c, 0),
            "cmd=lookup_result rc=-1 info=failed msg=service_not_published\n"
        );
        // The connection still works afterwards.
        send(&mut s, &mut c, 0, b"cmd=get_appnum\n");
        assert_eq!(recv(&mut c, 0), "cmd=appnum appnum=0\n");
    }

    #[test]
    fn overlong_line_is_discarded_up_to_its_newline() {
        let (mut s, mut c) = setup(1);
        let mut events = Vec::new();
        let junk = vec![b'j'; MAX_LINE + 10];
        // Feed through `receive` directly: the socket buffer is smaller than
        // the line, so going through the socket would need a writer thread.
        s.receive(0, &junk, &mut events);
        s.flush(0, &mut events);
        assert_eq!(recv(&mut c, 0), "cmd=error rc=-1 msg=line_too_long\n");
        s.receive(0, b"more junk\ncmd=get_appnum\n", &mut events);
        s.flush(0, &mut events);
        assert_eq!(recv(&mut c, 0), "cmd=appnum appnum=0\n");
        assert_eq!(events.len(), 1, "{events:?}");
    }

    #[test]
    fn eof_disconnects() {
        let (mut s, c) = setup(2);
        let mut c = c;
        let closed = c.remove(1);
        drop(closed);
        let mut events = Vec::new();
        s.on_readable(1, &mut events);
        assert_eq!(events, vec![ServerEvent::Disconnected { rank: 1 }]);
        assert_eq!(s.fd(1), None);
        assert!(s.fd(0).is_some());
    }

    /// A server for `n` ranks listening on loopback; rank 0 is local, the
    /// others are remote.
    fn tcp_setup(n: u32) -> (PmiServer, SocketAddr, UnixStream) {
        let mut s = PmiServer::new("kvs_test", vec![0; n as usize]);
        let addr = s.listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let local = UnixStream::from(s.connect_rank(0).unwrap());
        for r in 1..n {
            s.expect_remote(r);
        }
        (s, addr, local)
    }

    /// Connects to the server and sends `first`.
    fn tcp_client(addr: SocketAddr, first: &[u8]) -> BufReader<TcpStream> {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(first).unwrap();
        BufReader::new(c)
    }

    /// Lets the server accept and read until `done` says so (or 5 s pass).
    fn pump(
        s: &mut PmiServer,
        events: &mut Vec<ServerEvent>,
        done: impl Fn(&PmiServer, &[ServerEvent]) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !done(s, events) {
            assert!(
                Instant::now() < deadline,
                "server did not get there: {events:?}"
            );
            s.on_acceptable(events);
            let ids: Vec<u64> = s.pending_fds().map(|(id, _)| id).collect();
            for id in ids {
                s.on_pending_readable(id, events);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn read_all(c: &mut BufReader<TcpStream>) -> String {
        let mut s = String::new();
        let _ = c.read_to_string(&mut s);
        s
    }

    #[test]
    fn remote_rank_identifies_then_speaks_pmi() {
        let (mut s, addr, _local) = tcp_setup(3);
        // The first PMI-1 command may follow the initack line at once.
        let mut c = tcp_client(addr, b"cmd=initack pmiid=2\ncmd=get_appnum\n");
        let mut events = Vec::new();
        pump(&mut s, &mut events, |s, _| s.fd(2).is_some());
        assert!(events.is_empty(), "{events:?}");
        assert!(s.is_remote(2) && !s.is_remote(0));
        let mut got = String::new();
        for _ in 0..5 {
            c.read_line(&mut got).unwrap();
        }
        assert_eq!(
            got,
            "cmd=initack rc=0\ncmd=set size=3\ncmd=set rank=2\ncmd=set debug=0\n\
             cmd=appnum appnum=0\n"
        );
        c.get_mut().write_all(b"cmd=get_my_kvsname\n").unwrap();
        assert_eq!(
            serve_until_reply(&mut s, 2, &mut c),
            "cmd=my_kvsname kvsname=kvs_test\n"
        );
    }

    /// Serves `rank` until its client `c` has a reply line to read.
    fn serve_until_reply(s: &mut PmiServer, rank: u32, c: &mut BufReader<TcpStream>) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut events = Vec::new();
        c.get_mut()
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        loop {
            s.on_readable(rank, &mut events);
            let mut line = String::new();
            if c.read_line(&mut line).is_ok() && line.ends_with('\n') {
                assert!(events.is_empty(), "{events:?}");
                return line;
            }
            assert!(Instant::now() < deadline, "no reply from the server");
        }
    }

    /// 200 connections that never speak, then a remote rank: it is served.
    #[test]
    fn a_flood_of_idle_connections_never_keeps_a_rank_out() {
        let (mut s, addr, _local) = tcp_setup(2);
        let mut events = Vec::new();
        let mut idle = Vec::new();
        for _ in 0..200 {
            idle.push(TcpStream::connect(addr).unwrap());
            // Accepted as they come, as the launcher's loop does.
            s.on_acceptable(&mut events);
        }
        pump(&mut s, &mut events, |s, ev| {
            s.pending_fds().count() == MAX_PENDING && ev.len() >= 200 - MAX_PENDING
        });
        let mut rank = tcp_client(addr, b"cmd=initack pmiid=1\n");
        pump(&mut s, &mut events, |s, _| s.fd(1).is_some());
        let mut got = String::new();
        rank.read_line(&mut got).unwrap();
        assert_eq!(got, "cmd=initack rc=0\n");
        assert!(events
            .iter()
            .all(|e| matches!(e, ServerEvent::Rejected { .. })));
        drop(idle);
    }

    #[test]
    fn strangers_are_refused_and_the_job_goes_on() {
        let (mut s, addr, _local) = tcp_setup(3);
        let mut events = Vec::new();
        let mut good = tcp_client(addr, b"cmd=initack pmiid=1\n");
        pump(&mut s, &mut events, |s, _| s.fd(1).is_some());
        let cases: &[(&[u8], &str, &str)] = &[
            (
                b"cmd=initack pmiid=1\n",
                "rank 1, which has connected already",
                "cmd=initack rc=-1 msg=identified_as_rank_1,_which_has_connected_already\n",
            ),
            (
                b"cmd=initack pmiid=0\n",
                "rank 0, which is not a remote rank",
                "cmd=initack rc=-1 msg=identified_as_rank_0,_which_is_not_a_remote_rank\n",
            ),
            (
                b"cmd=initack pmiid=3\n",
                "the job has 3 rank(s)",
                "cmd=initack rc=-1 msg=identified_as_rank_3,_but_the_job_has_3_rank(s)\n",
            ),
            (
                b"cmd=init pmi_version=1 pmi_subversion=1\n",
                "instead of cmd=initack",
                "",
            ),
            (b"GET / HTTP/1.0\r\n", "instead of cmd=initack", ""),
            (&[b'x'; 300], "300 bytes without a newline", ""),
        ];
        for &(first, reason, reply) in cases {
            let mut c = tcp_client(addr, first);
            let before = events.len();
            pump(&mut s, &mut events, |_, ev| ev.len() > before);
            match &events[before..] {
                [ServerEvent::Rejected { peer, reason: why }] => {
                    assert!(why.contains(reason), "{why}");
                    assert!(peer.starts_with("127.0.0.1:"), "{peer}");
                }
                other => panic!("{first:?}: {other:?}"),
            }
            let answer = read_all(&mut c);
            if !reply.is_empty() {
                assert_eq!(answer, reply);
            } else {
                assert!(answer.starts_with("cmd=initack rc=-1 msg="), "{answer}");
            }
        }
        // A connection that closes without a word, and one that never speaks.
        drop(TcpStream::connect(addr).unwrap());
        let before = events.len();
        pump(&mut s, &mut events, |_, ev| ev.len() > before);
        assert!(
            matches!(&events[before], ServerEvent::Rejected { reason, .. } if reason.contains("closed")),
            "{events:?}"
        );
        let silent = TcpStream::connect(addr).unwrap();
        pump(&mut s, &mut events, |s, _| s.pending_fds().count() == 1);
        assert!(s.next_pending_deadline().is_some());
        let before = events.len();
        s.expire_pending(Instant::now(), &mut events);
        assert_eq!(events.len(), before, "not yet");
        s.expire_pending(Instant::now() + IDENTIFY_TIMEOUT, &mut events);
        assert!(
            matches!(&events[before..], [ServerEvent::Rejected { reason, .. }] if reason.contains("within 5 s")),
            "{events:?}"
        );
        assert_eq!(s.pending_fds().count(), 0);
        drop(silent);
        // The accepted rank is still served.
        let mut got = String::new();
        for _ in 0..4 {
            good.read_line(&mut got).unwrap();
        }
        assert!(got.ends_with("cmd=set rank=1\ncmd=set debug=0\n"), "{got}");
        good.get_mut().write_all(b"cmd=get_appnum\n").unwrap();
        assert_eq!(
            serve_until_reply(&mut s, 1, &mut good),
            "cmd=appnum appnum=0\n"
        );
    }

    use crate::auth::Nonce;
    use crate::pmi::PmiError;

    /// A server with a job key, rank 0 local and the others remote.
    fn keyed_setup(n: u32) -> (PmiServer, SocketAddr, Key) {
        let mut s = PmiServer::new("kvs_test", vec![0; n as usize]);
        let job = Key::from_bytes([42; crate::auth::KEY_LEN]);
        s.require_key(job.clone());
        let addr = s.listen("127.0.0.1:0".parse().unwrap()).unwrap();
        for r in 1..n {
            s.expect_remote(r);
        }
        (s, addr, job)
    }

    /// Reads lines from `c` while pumping `s`, until one arrives.
    fn pump_line(
        s: &mut PmiServer,
        events: &mut Vec<ServerEvent>,
        c: &mut BufReader<TcpStream>,
    ) -> String {
        c.get_mut()
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        let mut line = String::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !line.ends_with('\n') {
            assert!(
                Instant::now() < deadline,
                "no line; got `{line}`, {events:?}"
            );
            s.on_acceptable(events);
            let ids: Vec<u64> = s.pending_fds().map(|(id, _)| id).collect();
            for id in ids {
                s.on_pending_readable(id, events);
            }
            let _ = c.read_line(&mut line);
        }
        line
    }

    /// The forger's side: claims `rank` with `nonce`, returns the server's nonce.
    fn challenged(
        s: &mut PmiServer,
        events: &mut Vec<ServerEvent>,
        addr: SocketAddr,
        rank: u32,
        nonce: &Nonce,
    ) -> (BufReader<TcpStream>, Nonce) {
        let first = port::initack_request(rank, Some(nonce)).to_line();
        let mut c = tcp_client(addr, &first);
        let line = pump_line(s, events, &mut c);
        let m = Message::parse(line.trim_end().as_bytes()).unwrap();
        assert_eq!(m.cmd, "challenge", "{line}");
        (c, Nonce::from_hex(m.get("nonce").unwrap()).unwrap())
    }

    /// Strangers who race a rank for its identity at the PMI port: without a proof, with a
    /// wrong one, with one replayed from another exchange, with an abort instead of one. Each
    /// is refused, nothing they send is obeyed, and the real rank then proves itself.
    #[test]
    fn identity_needs_the_rank_key_and_cannot_be_replayed_or_claimed_twice() {
        use crate::auth;
        let (mut s, addr, job) = keyed_setup(3);
        let key1 = job.derive(port::RANK_KEYS, 1);
        let ctx = b"stormpi pmi initack 1";
        let mut events = Vec::new();
        let refused = |events: &[ServerEvent], want: &str| {
            assert!(
                events.iter().any(
                    |e| matches!(e, ServerEvent::Rejected { reason, .. } if reason.contains(want))
                ),
                "{want}: {events:?}"
            );
            assert!(
                !events
                    .iter()
                    .any(|e| matches!(e, ServerEvent::Abort { .. })),
                "{events:?}"
            );
        };

        // No proof offered.
        let mut c = tcp_client(addr, b"cmd=initack pmiid=1\n");
        let line = pump_line(&mut s, &mut events, &mut c);
        assert!(line.starts_with("cmd=initack rc=-1 msg="), "{line}");
        refused(&events, "without proving the job's key");

        // A proof made with another rank's key, and one made up.
        let key2 = job.derive(port::RANK_KEYS, 2);
        for (i, key) in [key2, Key::from_bytes([1; auth::KEY_LEN])]
            .iter()
            .enumerate()
        {
            let n = Nonce([i as u8; auth::NONCE_LEN]);
            let (mut c, theirs) = challenged(&mut s, &mut events, addr, 1, &n);
            let proof = key.prove("client", ctx, &n, &theirs);
            let resp = format!("cmd=response proof={}\n", auth::hex(&proof));
            c.get_mut().write_all(resp.as_bytes()).unwrap();
            let line = pump_line(&mut s, &mut events, &mut c);
            assert!(line.starts_with("cmd=initack rc=-1 msg="), "{line}");
            refused(&events, "failed to prove it holds rank 1's key");
        }

        // An abort instead of the response.
        let n = Nonce([7; auth::NONCE_LEN]);
        let (mut c, _) = challenged(&mut s, &mut events, addr, 1, &n);
        c.get_mut().write_all(b"cmd=abort exitcode=42\n").unwrap();
        pump_line(&mut s, &mut events, &mut c);
        refused(&events, "instead of cmd=response");

        // A right proof for one exchange, replayed on the next with the same client nonce:
        // the server's nonce differs, so it proves nothing.
        let n = Nonce([9; auth::NONCE_LEN]);
        let (first, ns1) = challenged(&mut s, &mut events, addr, 1, &n);
        let recorded = key1.prove("client", ctx, &n, &ns1);
        drop(first);
        let (mut c, ns2) = challenged(&mut s, &mut events, addr, 1, &n);
        assert_ne!(ns1, ns2);
        let resp = format!("cmd=response proof={}\n", auth::hex(&recorded));
        c.get_mut().write_all(resp.as_bytes()).unwrap();
        pump_line(&mut s, &mut events, &mut c);
        refused(&events, "replayed");
        assert!(s.fd(1).is_none());

        // The real rank: stormpi's client with rank 1's key.
        let client = std::thread::spawn(move || {
            let stream = port::connect(&addr.to_string()).unwrap();
            let mut chan = crate::pmi::transport::LineChannel::new(Transport::Tcp(stream));
            chan.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            port::handshake(&mut chan, 1, Some(&key1))
        });
        pump(&mut s, &mut events, |s, _| s.fd(1).is_some());
        assert_eq!(client.join().unwrap().unwrap(), (1, 3));

        // Identity is bound: a new claim for rank 1 is refused before any proof.
        let n = Nonce([3; auth::NONCE_LEN]);
        let first = port::initack_request(1, Some(&n)).to_line();
        let mut c = tcp_client(addr, &first);
        let line = pump_line(&mut s, &mut events, &mut c);
        assert!(line.contains("which_has_connected_already"), "{line}");
    }

    /// stormpi's client checks the server too: one that cannot prove the key is not believed.
    #[test]
    fn client_refuses_a_server_without_the_key() {
        let (mut s, addr, _job) = keyed_setup(2);
        let wrong = Key::from_bytes([5; crate::auth::KEY_LEN]);
        let client = std::thread::spawn(move || {
            let stream = port::connect(&addr.to_string()).unwrap();
            let mut chan = crate::pmi::transport::LineChannel::new(Transport::Tcp(stream));
            chan.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            port::handshake(&mut chan, 1, Some(&wrong))
        });
        let mut events = Vec::new();
        pump(&mut s, &mut events, |_, ev| !ev.is_empty());
        match client.join().unwrap() {
            Err(PmiError::Malformed(m)) => assert!(m.contains("failed to prove"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(s.fd(1).is_none());
    }

    /// Over a socketpair, stormpi's client proves its key; a wrong proof closes the socket.
    #[test]
    fn socketpair_clients_prove_their_key() {
        let mut s = PmiServer::new("kvs_test", vec![0; 2]);
        let job = Key::from_bytes([11; crate::auth::KEY_LEN]);
        s.require_key(job.clone());
        let mut events = Vec::new();
        let sock = UnixStream::from(s.connect_rank(0).unwrap());
        let key = job.derive(port::RANK_KEYS, 0);
        let client = std::thread::spawn(move || {
            let mut chan = crate::pmi::transport::LineChannel::new(Transport::Unix(sock));
            chan.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            port::handshake(&mut chan, 0, Some(&key))
        });
        let deadline = Instant::now() + Duration::from_secs(5);
        while !client.is_finished() {
            assert!(Instant::now() < deadline);
            s.on_readable(0, &mut events);
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(client.join().unwrap().unwrap(), (0, 2));
        assert!(events.is_empty(), "{events:?}");

        // Rank 1's socket, answering the challenge with a proof it cannot have made.
        let mut c = [BufReader::new(UnixStream::from(s.connect_rank(1).unwrap()))];
        c[0].get_mut()
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let n = Nonce([1; crate::auth::NONCE_LEN]);
        let first = port::initack_request(1, Some(&n)).to_line();
        c[0].get_mut().write_all(&first).unwrap();
        s.on_readable(1, &mut events);
        let mut line = String::new();
        c[0].read_line(&mut line).unwrap();
        assert!(line.starts_with("cmd=challenge nonce="), "{line}");
        let bogus = format!("cmd=response proof={}\n", "ab".repeat(32));
        c[0].get_mut().write_all(bogus.as_bytes()).unwrap();
        s.on_readable(1, &mut events);
        assert!(
            events.iter().any(|e| matches!(e,
                ServerEvent::ProtocolError { rank: 1, detail } if detail.contains("rank 1's key"))),
            "{events:?}"
        );
        assert!(s.fd(1).is_none());
    }
}
