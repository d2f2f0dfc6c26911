//! The verbs BTL module: one RC queue pair per peer over one device port.
//!
//! **Receiving.** One shared receive queue holds `btl_verbs_receive_buffers` registered buffers
//! of `btl_verbs_max_send_size` bytes; each arrival is handed to the engine straight from its
//! buffer, which is posted again once the engine has taken the fragment (a fragment the engine
//! cannot take yet is held, with everything that arrives behind it, until it can).
//!
//! **Sending and credits.** Fragments are written into registered send slots (copy-in) and sent
//! with immediate data: the kind of message, the active-message tag, and the low 16 bits of the
//! count of the peer's fragments this side has consumed (the piggy-backed credit return). A peer
//! is granted `btl_verbs_credits` receive buffers: a sender never has more fragments outstanding
//! to it than that, so the shared queue never runs dry and no send meets receiver-not-ready.
//! When no traffic goes back to carry the count, the receiver RDMA-writes the full count into
//! the sender's *credit mailbox* (one `u64` per peer, published in the business card) once half
//! the credits are owed: a credit return consumes no receive buffer. Fragments up to the device's
//! inline size go inline, their slot free again at once.
//!
//! **RGET.** [`Btl::register`] registers the user's buffer for remote read and sends the peer an
//! *announcement* (key, address, length, rkey) ahead of the upper layer's own message on the same
//! in-order queue pair, so the 64-bit key the upper layer carries needs to name only the
//! announcement; [`Btl::get`] registers the destination and posts RDMA reads (split at the port's
//! largest message); [`Btl::deregister`] deregisters and tells the peer to forget the key.
//!
//! **Errors.** A completion with an error status moves the peer's queue pair to the error state,
//! logs the peer's rank and the status, fails its reads and reports the peer unreachable to the
//! engine; fragments for it are dropped from then on.

use core::ffi::c_int;
use core::ptr;
use std::collections::{HashMap, VecDeque};

use stormpi_core::btl::{
    AmTag, Btl, BtlAttrs, BtlFlags, DataRef, Delivery, DestRef, Endpoint, Modex, ModexPut,
    PeerInfo, RemoteKey, Sink, Token,
};
use stormpi_core::error::{Error, ErrorClass, Reason, Result};
use stormpi_core::params::Params;
use stormpi_core::platform::{Level, Platform};
use stormpi_core::rte::ProcId;
use verbs_sys::*;

use crate::device::{self, Device};
use crate::endpoint::{self, Card, QpSizes, Retry, CARD_KEY, QPNS_PER_KEY};
use crate::library::Library;
use crate::osc::VerbsRdma;
use crate::params::*;
use crate::rcache::{self, Bounds, Lease, RegCache, Registrar};

/// Message kinds in the immediate data's top byte.
const FRAG: u32 = 0;
const ANNOUNCE: u32 = 1;
const WITHDRAW: u32 = 2;
/// An announcement of a buffer the sender writes from (pipeline protocol): no rkey.
const ANNOUNCE_PIPE: u32 = 3;
/// A receiver's request to write a range of an announced buffer into its registered memory.
const PULL: u32 = 4;
/// The sender's answer once the writes of a pull are posted (they land before it: RC order).
const PULLED: u32 = 5;
/// Bytes of an announcement: key, address, length (u64 each), rkey (u32).
const ANNOUNCE_LEN: usize = 28;
/// Bytes of a pull: key, offset, length, destination (u64 each), rkey, read slot (u32 each).
const PULL_LEN: usize = 40;
/// Bytes of a pulled: read slot, status (u32 each).
const PULLED_LEN: usize = 8;
/// Bytes sent through the receive queue at the start of a pull (`rdma_pipeline_send_length`):
/// read slot (u32), padding, offset in the pull's destination (u64), then the bytes.
const PUSH: u32 = 6;
const PUSH_HDR: usize = 16;

/// Work request kinds in a send-side `wr_id`'s top byte.
const WR_SEND: u64 = 1;
const WR_CREDIT: u64 = 2;
const WR_READ: u64 = 3;
const WR_WRITE: u64 = 4;
const WR_PUSH: u64 = 5;
/// `wr_id` slot index of an inline send (its slot was freed at once).
const NO_SLOT: u32 = u32::MAX;

/// Inline bytes asked of each queue pair.
const INLINE_WANTED: u32 = 256;
/// Completions taken per poll.
const POLL_BATCH: usize = 32;

fn wr_id(kind: u64, ep: u32, idx: u32) -> u64 {
    (kind << 56) | (u64::from(ep) << 32) | u64::from(idx)
}

fn imm(kind: u32, tag: u8, credits: u64) -> u32 {
    (kind << 24) | (u32::from(tag) << 16) | (credits & 0xffff) as u32
}

/// The count of returned messages a peer's piggy-backed low 16 bits `low` stand for, given the
/// count known so far (`returned`), the messages sent to it (`sent`) and the grant: the count is
/// never ahead of `returned` by more than the grant nor of `sent`; a stale value (an older count
/// than one already taken from the mailbox) leaves `returned` as it is.
fn widen_returned(returned: u64, sent: u64, credits: u64, low: u16) -> u64 {
    let delta = u64::from(low.wrapping_sub(returned as u16));
    if delta <= credits && returned + delta <= sent {
        returned + delta
    } else {
        returned
    }
}

/// Counters, logged at finalize (`mpi_log_level` 2).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    /// Fragments sent (of which inline).
    pub frags: u64,
    pub inline: u64,
    /// Receive buffers posted again.
    pub reposts: u64,
    /// Credit counts written into peers' mailboxes.
    pub credit_writes: u64,
    /// Times a send waited for credits.
    pub credit_stalls: u64,
    /// RDMA reads completed and their bytes.
    pub gets: u64,
    pub get_bytes: u64,
    /// RDMA writes of the pipeline protocol completed and their bytes.
    pub puts: u64,
    pub put_bytes: u64,
    /// Fragments (and bytes) of the pipeline protocol sent through the receive queue.
    pub pushes: u64,
    pub push_bytes: u64,
    /// Nanoseconds with a large-message transfer under way here (RDMA reads or writes posted,
    /// pushes in flight, a pull waiting for its writes).
    pub transfer_ns: u64,
    /// Nanoseconds registering while a transfer was under way (hidden behind it), and while
    /// none was (in the message's path).
    pub reg_hidden_ns: u64,
    pub reg_exposed_ns: u64,
}

/// How messages from `btl_verbs_get_min` bytes on move (`btl_verbs_large_protocol`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Large {
    /// The receiver RDMA-reads the sender's registered buffer.
    Rget,
    /// The sender RDMA-writes registered fragments into the receiver's registered buffer.
    Pipeline,
    /// Fragments through the receive queue.
    Send,
}

/// A buffer announced to a peer.
struct Announced {
    ep: u32,
    /// Its registration (RGET); none for the pipeline, whose fragments register as written.
    lease: Option<Lease>,
    addr: u64,
    len: u64,
}

/// A pull being served: fragments of `[src, src + len)` written to `dest` at the peer.
struct PutJob {
    ep: u32,
    src: u64,
    len: u64,
    dest: u64,
    rkey: u32,
    slot: u32,
    /// Bytes sent through the receive queue so far, of `[0, push_end)`.
    pushed: u64,
    push_end: u64,
    /// Bytes written: RDMA covers `[push_end, len)`.
    posted: u64,
    /// The next fragment, registered ahead while the previous ones are written.
    next: Option<(Lease, u32, u64)>,
    failed: bool,
}

/// What this process knows of one peer.
struct Peer {
    qp: *mut ibv_qp,
    proc: ProcId,
    connected: bool,
    failed: bool,
    /// Buffer-consuming messages sent to the peer, and how many of them it has returned.
    sent: u64,
    returned: u64,
    /// The peer's messages consumed here, and the count last told to it.
    consumed: u64,
    told: u64,
    credit_write: bool,
    /// Send work requests outstanding on the queue pair.
    sq: u32,
    mailbox: u64,
    mailbox_rkey: u32,
    /// The peer's announced buffers: key → (address, length, rkey; none: written by the peer).
    remote: HashMap<u64, (u64, u64, Option<u32>)>,
}

/// A fragment the engine could not take yet.
struct Held {
    buf: u32,
    len: usize,
    from: u32,
    tag: u8,
}

/// The device as the registration cache sees it.
struct Registering<'a> {
    lib: &'a Library,
    dev: &'a Device,
}

impl Registrar for Registering<'_> {
    type Handle = *mut ibv_mr;
    fn register(&mut self, addr: usize, len: usize, access: i32) -> Option<*mut ibv_mr> {
        self.dev.register(self.lib, addr as *mut u8, len, access)
    }
    fn deregister(&mut self, mr: *mut ibv_mr) {
        // SAFETY: a registration of this device, no operation left on it (the cache's contract).
        unsafe { (self.lib.dereg_mr)(mr) };
    }
}

/// An RDMA read under way.
struct GetOp {
    token: Token,
    lease: Lease,
    ep: u32,
    parts: u32,
    /// The destination (pushed bytes of a pull are copied there).
    dest: u64,
    len: u64,
    error: Option<u32>,
    /// Written by the peer (pipeline): done when its `PULLED` comes.
    pulled: bool,
}

/// The verbs BTL module.
pub struct VerbsBtl {
    attrs: BtlAttrs,
    lib: Library,
    dev: Device,
    platform: &'static dyn Platform,
    rank: u32,
    credits: u64,
    /// Queue pairs' send queue depth and inline size.
    qp_depth: u32,
    inline: u32,
    retry: Retry,
    peers: Vec<Option<Peer>>,
    by_qpn: HashMap<u32, u32>,
    psn: u32,
    buf_size: usize,
    recv: Box<[u8]>,
    recv_mr: *mut ibv_mr,
    recv_count: usize,
    send: Box<[u8]>,
    send_mr: *mut ibv_mr,
    free_slots: Vec<u32>,
    reserved: Option<u32>,
    /// Send work requests outstanding on all queue pairs, within `send_cap`.
    in_flight: usize,
    send_cap: usize,
    /// Credit mailbox (`[0, n)`, written by peers) and the counts written from (`[n, 2n)`).
    mailbox: Box<[u64]>,
    mailbox_mr: *mut ibv_mr,
    held: VecDeque<Held>,
    /// Registrations of user memory, kept for reuse (`mpi_leave_pinned`).
    cache: RegCache<*mut ibv_mr>,
    /// Announced buffers by key.
    regs: HashMap<u64, Announced>,
    large: Large,
    frag_len: u64,
    depth: usize,
    /// Smaller pipeline-protocol messages go by RGET.
    min_pipeline: u64,
    /// Bytes an RGET offer carries (`btl_verbs_rndv_eager_limit`).
    rndv_eager: usize,
    /// Bytes of a pull sent through the receive queue (`btl_verbs_rdma_pipeline_send_length`).
    send_length: u64,
    /// Pushes in flight, and since when a transfer has been under way.
    pushing: u32,
    busy_since: Option<std::time::Instant>,
    /// Pulls being served, in arrival order.
    puts: VecDeque<PutJob>,
    /// Registrations of fragments being written: write id → (lease, bytes).
    writing: HashMap<u32, (Lease, u64)>,
    next_write: u32,
    next_key: u64,
    withdraws: VecDeque<(u32, u64)>,
    gets: Vec<Option<GetOp>>,
    free_gets: Vec<u32>,
    done: VecDeque<(Token, Result<()>)>,
    unreachable: Vec<ProcId>,
    /// Put, get and atomics for one-sided windows (`osc_verbs`), and whether they are required.
    osc: Option<&'static VerbsRdma>,
    osc_required: bool,
    /// Counters.
    pub stats: Stats,
}

// SAFETY: the raw pointers are this module's own verbs objects and memory, used only through
// `&mut self`.
unsafe impl Send for VerbsBtl {}

/// Why the component did not come up: no library or device (the component steps aside unless
/// asked for by name), or a failure of a present device.
#[derive(Debug)]
pub enum Unavailable {
    /// No libibverbs, or no device with an active port.
    Absent(String),
    /// The device is there but could not be set up.
    Failed(String),
}

fn transport(what: &'static str) -> Error {
    Error::new(ErrorClass::Other, Reason::Transport { btl: "verbs", what })
}

impl VerbsBtl {
    /// Loads the library, opens the first active port and sets up a job of `size` processes
    /// as process `rank`: the receive buffers, send slots, mailbox and a queue pair per peer.
    pub fn new(
        params: &Params,
        rank: u32,
        size: u32,
        platform: &'static dyn Platform,
    ) -> core::result::Result<VerbsBtl, Unavailable> {
        let path = params.str(&LIBRARY).to_string();
        let lib = Library::open(&path)
            .map_err(|e| Unavailable::Absent(format!("cannot load {path} ({e})")))?;
        let only = params.str(&DEVICE).trim().to_string();
        let dev = device::open(&lib, &only, params.u32(&GID_INDEX) as u8)
            .map_err(Unavailable::Failed)?
            .ok_or_else(|| match only.as_str() {
                "" => Unavailable::Absent(format!("{path} has no device with an active port")),
                // A device asked for by name and not there is the user's error, not an absence.
                d => Unavailable::Failed(format!(
                    "{path} has no device {d} with an active port (btl_verbs_device)"
                )),
            })?;
        let max_send = params.usize(&MAX_SEND_SIZE);
        let eager = params.usize(&EAGER_LIMIT).min(max_send);
        let credits = params.usize(&CREDITS);
        let peers = size.saturating_sub(1).max(1) as usize;
        let wanted = credits * peers;
        let recv_count = match params.usize(&RECEIVE_BUFFERS) {
            0 => wanted,
            n if n < wanted => {
                return Err(Unavailable::Failed(format!(
                    "btl_verbs_receive_buffers={n} is fewer than btl_verbs_credits={credits} for each of {peers} peers ({wanted}): raise btl_verbs_receive_buffers or lower btl_verbs_credits"
                )))
            }
            n => n,
        };
        let slots = params.usize(&SEND_SLOTS);
        let max_gets = params.usize(&MAX_GETS);
        let get_min = params.usize(&GET_MIN);
        // Every send-side work request: slots, inline sends (bounded by the credits), reads,
        // one credit write per peer.
        let send_cap = slots + credits + max_gets + peers;
        let qp_depth = (send_cap.min(dev.attr.max_qp_wr.max(1) as usize)) as u32;
        let leave = match params
            .str(&LEAVE_PINNED)
            .trim()
            .to_ascii_lowercase()
            .as_str()
        {
            "auto" | "-1" | "" => None,
            "on" | "1" | "true" | "yes" => Some(true),
            "off" | "0" | "false" | "no" => Some(false),
            v => {
                return Err(Unavailable::Failed(format!(
                    "mpi_leave_pinned={v} is not on, off or auto"
                )))
            }
        };
        // Registrations may be kept only where freed memory is seen (the library's hooks).
        let hooks = leave != Some(false) && rcache::hooks_work();
        if leave == Some(true) && !hooks {
            return Err(Unavailable::Failed(
                "mpi_leave_pinned=on, but the program's frees and unmaps do not reach the library's memory hooks (link with libmpi.so, or with libmpi.a by stormcc without -static), so a cached registration could outlive its memory; use mpi_leave_pinned=auto or off".into(),
            ));
        }
        let bounds = Bounds {
            registrations: params.usize(&MAX_REGISTRATIONS),
            bytes: params.usize(&MAX_BYTES),
        };
        let broad = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
        let large = match params.str(&LARGE_PROTOCOL).trim() {
            "rget" => Large::Rget,
            "pipeline" => Large::Pipeline,
            "send" => Large::Send,
            v => {
                return Err(Unavailable::Failed(format!(
                    "btl_verbs_large_protocol={v} is not rget, pipeline or send"
                )))
            }
        };
        let flags = if get_min > 0 && large != Large::Send {
            BtlFlags::SEND.union(BtlFlags::GET)
        } else {
            BtlFlags::SEND
        };
        let mut b = VerbsBtl {
            attrs: BtlAttrs {
                component: "verbs",
                eager_limit: eager,
                max_send_size: max_send,
                latency_ns: 2_000,
                bandwidth_mbps: 100_000,
                exclusivity: EXCLUSIVITY,
                flags,
                get_min: if get_min > 0 { get_min } else { usize::MAX },
            },
            lib,
            dev,
            platform,
            rank,
            credits: credits as u64,
            qp_depth,
            inline: 0,
            retry: Retry {
                timeout: params.u32(&TIMEOUT) as u8,
                count: params.u32(&RETRY_COUNT) as u8,
            },
            peers: Vec::new(),
            by_qpn: HashMap::new(),
            // A per-process first sequence number (24 bits): stale packets of an earlier job on
            // the same QP numbers do not match.
            psn: (std::process::id().wrapping_mul(2_654_435_761)) & 0xff_ffff,
            buf_size: max_send,
            recv: vec![0u8; recv_count * max_send].into_boxed_slice(),
            recv_mr: ptr::null_mut(),
            recv_count,
            send: vec![0u8; slots * max_send].into_boxed_slice(),
            send_mr: ptr::null_mut(),
            free_slots: (0..slots as u32).rev().collect(),
            reserved: None,
            in_flight: 0,
            send_cap,
            mailbox: vec![0u64; 2 * size as usize].into_boxed_slice(),
            mailbox_mr: ptr::null_mut(),
            held: VecDeque::new(),
            cache: RegCache::new(hooks, bounds, broad),
            regs: HashMap::new(),
            large,
            frag_len: params.usize(&PIPELINE_FRAG_LENGTH) as u64,
            depth: params.usize(&PIPELINE_DEPTH),
            min_pipeline: params.usize(&MIN_PIPELINE_SIZE) as u64,
            rndv_eager: params.usize(&RNDV_EAGER_LIMIT),
            send_length: params.usize(&PIPELINE_SEND_LENGTH) as u64,
            pushing: 0,
            busy_since: None,
            puts: VecDeque::new(),
            writing: HashMap::new(),
            next_write: 0,
            next_key: 1,
            withdraws: VecDeque::new(),
            gets: (0..max_gets).map(|_| None).collect(),
            free_gets: (0..max_gets as u32).rev().collect(),
            done: VecDeque::new(),
            unreachable: Vec::new(),
            osc: None,
            osc_required: false,
            stats: Stats::default(),
        };
        b.setup(size).map_err(|e| {
            b.release();
            Unavailable::Failed(e)
        })?;
        let osc_wanted = crate::osc::wanted(params).map_err(|e| {
            b.release();
            Unavailable::Failed(e.to_string())
        })?;
        if let Some(required) = osc_wanted {
            b.osc_required = required;
            match VerbsRdma::new(&b.lib, &b.dev, rank, size, hooks, bounds, platform) {
                // One per process, for the life of the process (windows hold it).
                Ok(r) => b.osc = Some(Box::leak(Box::new(r))),
                Err(e) if required => {
                    b.release();
                    return Err(Unavailable::Failed(format!("osc_verbs=on: {e}")));
                }
                Err(e) => b.log(
                    Level::Info,
                    format_args!("verbs BTL: one-sided windows go by messages: {e}"),
                ),
            }
        }
        Ok(b)
    }

    fn setup(&mut self, size: u32) -> core::result::Result<(), String> {
        let lib = &self.lib;
        self.dev
            .setup(lib, self.recv_count + self.send_cap + 16, self.recv_count)?;
        let local = IBV_ACCESS_LOCAL_WRITE;
        self.recv_mr = self
            .dev
            .register(lib, self.recv.as_mut_ptr(), self.recv.len(), local)
            .ok_or("registering the receive buffers failed (btl_verbs_receive_buffers)")?;
        if !self.send.is_empty() {
            self.send_mr = self
                .dev
                .register(lib, self.send.as_mut_ptr(), self.send.len(), local)
                .ok_or("registering the send slots failed (btl_verbs_send_slots)")?;
        }
        self.mailbox_mr = self
            .dev
            .register(
                lib,
                self.mailbox.as_mut_ptr().cast(),
                self.mailbox.len() * 8,
                local | IBV_ACCESS_REMOTE_WRITE,
            )
            .ok_or("registering the credit mailbox failed")?;
        for i in 0..self.recv_count as u32 {
            self.post_recv(i)?;
        }
        let sizes = QpSizes {
            send_wr: self.qp_depth,
            inline: INLINE_WANTED,
        };
        let mut inline = u32::MAX;
        for r in 0..size {
            if r == self.rank {
                self.peers.push(None);
                continue;
            }
            let (qp, granted) = endpoint::create_qp(&self.lib, &self.dev, sizes)?;
            inline = inline.min(granted);
            // SAFETY: a live QP.
            let qpn = unsafe { (*qp).qp_num };
            self.by_qpn.insert(qpn, r);
            self.peers.push(Some(Peer {
                qp,
                proc: ProcId(r),
                connected: false,
                failed: false,
                sent: 0,
                returned: 0,
                consumed: 0,
                told: 0,
                credit_write: false,
                sq: 0,
                mailbox: 0,
                mailbox_rkey: 0,
                remote: HashMap::new(),
            }));
        }
        self.inline = if inline == u32::MAX { 0 } else { inline };
        self.log(
            Level::Info,
            format_args!(
                "verbs BTL: {} port {} (LID {}), {} receive buffers of {} bytes, {} credits per peer, inline up to {} bytes, registration cache {}",
                self.dev.name, self.dev.port, self.dev.lid, self.recv_count, self.buf_size, self.credits, self.inline,
                if self.cache.enabled() { "on" } else { "off" }
            ),
        );
        Ok(())
    }

    fn log(&self, level: Level, args: core::fmt::Arguments<'_>) {
        if self.platform.log_enabled(level) {
            self.platform.log(level, args);
        }
    }

    fn post_recv(&mut self, buf: u32) -> core::result::Result<(), String> {
        let mut sge = ibv_sge {
            // SAFETY: `buf` < recv_count: inside the receive slab.
            addr: unsafe { self.recv.as_mut_ptr().add(buf as usize * self.buf_size) } as u64,
            length: self.buf_size as u32,
            // SAFETY: registered in setup.
            lkey: unsafe { (*self.recv_mr).lkey },
        };
        let mut wr = ibv_recv_wr {
            wr_id: u64::from(buf),
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: a live SRQ; the buffer is registered and not posted elsewhere.
        let rc = unsafe { ibv_post_srq_recv(self.dev.srq, &mut wr, &mut bad) };
        if rc != 0 {
            return Err(format!(
                "posting a receive buffer failed (errno {rc}): more than the device allows? lower btl_verbs_receive_buffers"
            ));
        }
        Ok(())
    }

    fn peer(&mut self, ep: u32) -> Option<&mut Peer> {
        self.peers.get_mut(ep as usize)?.as_mut()
    }

    /// Whether a buffer-consuming message to `ep` can go now (credit and send-queue room).
    fn can_send(&mut self, ep: u32) -> bool {
        let room = self.in_flight < self.send_cap;
        let (credits, depth) = (self.credits, self.qp_depth);
        let Some(p) = self.peer(ep) else {
            return false;
        };
        if p.failed {
            return room;
        }
        let ok = p.connected && p.sent - p.returned < credits && p.sq < depth && room;
        if !ok && p.sent - p.returned >= credits {
            self.stats.credit_stalls += 1;
        }
        ok
    }

    /// Sends `len` bytes at `at` (in slot `slot`, or any memory when inline) to `ep`.
    fn post_send(&mut self, ep: u32, kind: u32, tag: u8, at: *const u8, len: usize, slot: u32) {
        let inline = len <= self.inline as usize;
        let Some(p) = self.peers.get_mut(ep as usize).and_then(Option::as_mut) else {
            return;
        };
        if p.failed {
            if slot != NO_SLOT {
                self.free_slots.push(slot);
            }
            return;
        }
        p.told = p.consumed;
        let mut sge = ibv_sge {
            addr: at as u64,
            length: len as u32,
            // SAFETY: registered in setup (unused by the device for inline data).
            lkey: if self.send_mr.is_null() {
                0
            } else {
                unsafe { (*self.send_mr).lkey }
            },
        };
        // SAFETY: all-zero is a valid ibv_send_wr (null pointers, zero opcode fields).
        let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
        let wk = if kind == PUSH { WR_PUSH } else { WR_SEND };
        wr.wr_id = wr_id(wk, ep, if inline { NO_SLOT } else { slot });
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.send_flags = IBV_SEND_SIGNALED | if inline { IBV_SEND_INLINE } else { 0 };
        wr.imm_data = imm(kind, tag, p.consumed).to_be();
        let mut bad = ptr::null_mut();
        // SAFETY: a connected QP; the bytes are registered (or copied now, inline).
        let rc = unsafe { ibv_post_send(p.qp, &mut wr, &mut bad) };
        if rc != 0 {
            if slot != NO_SLOT {
                self.free_slots.push(slot);
            }
            self.fail_peer(ep, format!("posting a send failed (errno {rc})"));
            return;
        }
        p.sent += 1;
        p.sq += 1;
        self.in_flight += 1;
        self.stats.frags += 1;
        if kind == PUSH {
            self.pushing += 1;
        }
        if inline {
            self.stats.inline += 1;
            if slot != NO_SLOT {
                self.free_slots.push(slot);
            }
        }
    }

    /// Sends a small control message (announcement, withdrawal) to `ep`; false if it cannot go
    /// now.
    fn send_control(&mut self, ep: u32, kind: u32, bytes: &[u8]) -> bool {
        if !self.can_send(ep) {
            return false;
        }
        if bytes.len() <= self.inline as usize {
            self.post_send(ep, kind, 0, bytes.as_ptr(), bytes.len(), NO_SLOT);
            return true;
        }
        let Some(s) = self.free_slots.pop() else {
            return false;
        };
        let at = s as usize * self.buf_size;
        self.send[at..at + bytes.len()].copy_from_slice(bytes);
        let p = self.send[at..].as_ptr();
        self.post_send(ep, kind, 0, p, bytes.len(), s);
        true
    }

    /// Marks `ep`'s connection failed: its queue pair goes to error (what is outstanding on it
    /// is flushed), the cause is logged, and the engine hears that the peer is unreachable.
    fn fail_peer(&mut self, ep: u32, why: String) {
        let name = self.dev.name.clone();
        let Some(p) = self.peers.get_mut(ep as usize).and_then(Option::as_mut) else {
            return;
        };
        if p.failed {
            return;
        }
        p.failed = true;
        p.remote.clear();
        // Writes the peer will never announce done: failed here.
        let waiting: Vec<u32> = self
            .gets
            .iter()
            .enumerate()
            .filter(|(_, g)| g.as_ref().is_some_and(|g| g.pulled && g.ep == ep))
            .map(|(i, _)| i as u32)
            .collect();
        for g in waiting {
            self.read_done(g, IBV_WC_GENERAL_ERR);
        }
        let Some(p) = self.peers.get_mut(ep as usize).and_then(Option::as_mut) else {
            return;
        };
        let (qp, proc) = (p.qp, p.proc);
        endpoint::to_error(&self.lib, qp);
        self.unreachable.push(proc);
        self.platform.log(
            Level::Error,
            format_args!("verbs BTL: the connection to rank {ep} on {name} failed: {why}"),
        );
    }

    /// Writes the count of `ep`'s messages consumed here into its mailbox.
    fn write_credits(&mut self, ep: u32) {
        let me = self.rank as usize;
        let n = self.peers.len();
        let inline = self.inline >= 8;
        let Some(p) = self.peers.get_mut(ep as usize).and_then(Option::as_mut) else {
            return;
        };
        self.mailbox[n + ep as usize] = p.consumed;
        let mut sge = ibv_sge {
            addr: &self.mailbox[n + ep as usize] as *const u64 as u64,
            length: 8,
            // SAFETY: registered in setup.
            lkey: unsafe { (*self.mailbox_mr).lkey },
        };
        // SAFETY: all-zero is a valid ibv_send_wr.
        let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
        wr.wr_id = wr_id(WR_CREDIT, ep, 0);
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED | if inline { IBV_SEND_INLINE } else { 0 };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: p.mailbox + 8 * me as u64,
            rkey: p.mailbox_rkey,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: a connected QP; the source is registered.
        let rc = unsafe { ibv_post_send(p.qp, &mut wr, &mut bad) };
        if rc != 0 {
            self.fail_peer(ep, format!("posting a credit write failed (errno {rc})"));
            return;
        }
        p.told = p.consumed;
        p.credit_write = true;
        p.sq += 1;
        self.in_flight += 1;
        self.stats.credit_writes += 1;
    }

    /// Returns credits where half of a peer's grant is owed and nothing else carried them.
    fn return_credits(&mut self) {
        let threshold = (self.credits / 2).max(1);
        for ep in 0..self.peers.len() as u32 {
            let due = match self.peer(ep) {
                Some(p) => {
                    p.connected && !p.failed && !p.credit_write && p.consumed - p.told >= threshold
                }
                None => false,
            };
            if due && self.in_flight < self.send_cap {
                self.write_credits(ep);
            }
        }
    }

    /// Takes credits peers wrote into the mailbox.
    fn read_mailbox(&mut self) {
        for (ep, slot) in self.peers.iter_mut().enumerate() {
            let Some(p) = slot else { continue };
            // SAFETY: an aligned u64 of our mailbox, written by the device on the peer's behalf.
            let v = unsafe { ptr::read_volatile(&self.mailbox[ep]) };
            if v > p.returned && v <= p.sent {
                p.returned = v;
            }
        }
    }

    fn read_done(&mut self, g: u32, status: u32) {
        let Some(op) = self.gets.get_mut(g as usize).and_then(Option::as_mut) else {
            return;
        };
        op.parts -= 1;
        if status != IBV_WC_SUCCESS && op.error.is_none() {
            op.error = Some(status);
        }
        if op.parts > 0 {
            return;
        }
        let Some(op) = self.gets[g as usize].take() else {
            return;
        };
        self.free_gets.push(g);
        // No read left on the destination's registration.
        let mut r = Registering {
            lib: &self.lib,
            dev: &self.dev,
        };
        self.cache.release(&mut r, op.lease);
        let result = match op.error {
            None => {
                if !op.pulled {
                    self.stats.gets += 1;
                    self.stats.get_bytes += op.len;
                }
                Ok(())
            }
            Some(_) => Err(transport("an RDMA read from a peer failed")),
        };
        let _ = op.ep;
        self.done.push_back((op.token, result));
    }

    /// Handles a send-side completion.
    fn send_done(&mut self, wc: &ibv_wc) {
        let kind = wc.wr_id >> 56;
        let ep = ((wc.wr_id >> 32) & 0xff_ffff) as u32;
        let idx = wc.wr_id as u32;
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(p) = self.peer(ep) {
            p.sq = p.sq.saturating_sub(1);
            if kind == WR_CREDIT {
                p.credit_write = false;
            }
        }
        match kind {
            WR_SEND if idx != NO_SLOT => self.free_slots.push(idx),
            WR_PUSH => {
                self.pushing = self.pushing.saturating_sub(1);
                if idx != NO_SLOT {
                    self.free_slots.push(idx);
                }
            }
            WR_READ => self.read_done(idx, wc.status),
            WR_WRITE => {
                if let Some((lease, n)) = self.writing.remove(&idx) {
                    if wc.status == IBV_WC_SUCCESS {
                        self.stats.puts += 1;
                        self.stats.put_bytes += n;
                    }
                    let mut r = Registering {
                        lib: &self.lib,
                        dev: &self.dev,
                    };
                    self.cache.release(&mut r, lease);
                }
            }
            _ => {}
        }
        if wc.status != IBV_WC_SUCCESS {
            let what = match kind {
                WR_READ => "an RDMA read",
                WR_WRITE => "an RDMA write",
                WR_CREDIT => "a credit write",
                WR_PUSH => "a pipeline send",
                _ => "a send",
            };
            let status = self.lib.status(wc.status);
            self.fail_peer(ep, format!("{what} completed with {status}"));
        }
    }

    /// Handles an arrival; false when the engine asked to stop (or to retry).
    fn arrived(&mut self, wc: &ibv_wc, sink: &mut dyn Sink, deliver: &mut bool) -> usize {
        let buf = wc.wr_id as u32;
        let Some(&ep) = self.by_qpn.get(&wc.qp_num) else {
            let _ = self.post_recv(buf);
            return 0;
        };
        if wc.status != IBV_WC_SUCCESS {
            let status = self.lib.status(wc.status);
            let _ = self.post_recv(buf);
            if wc.status != IBV_WC_WR_FLUSH_ERR {
                self.fail_peer(ep, format!("a receive completed with {status}"));
            }
            return 0;
        }
        let im = u32::from_be(wc.imm_data);
        let credits = self.credits;
        let Some(p) = self.peer(ep) else { return 0 };
        p.returned = widen_returned(p.returned, p.sent, credits, im as u16);
        let len = wc.byte_len as usize;
        let at = buf as usize * self.buf_size;
        match im >> 24 {
            FRAG => {
                let tag = (im >> 16) as u8;
                if *deliver {
                    let frag = &self.recv[at..at + len];
                    match sink.deliver(ProcId(ep), AmTag(tag), frag) {
                        Delivery::Retry => *deliver = false,
                        Delivery::Consumed => {
                            self.consumed(ep, buf);
                            return 1;
                        }
                        Delivery::Satisfied => {
                            self.consumed(ep, buf);
                            *deliver = false;
                            return 1;
                        }
                    }
                }
                self.held.push_back(Held {
                    buf,
                    len,
                    from: ep,
                    tag,
                });
                return 1;
            }
            ANNOUNCE | ANNOUNCE_PIPE if len == ANNOUNCE_LEN => {
                let b = &self.recv[at..at + len];
                let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
                let (key, addr, n) = (word(0), word(8), word(16));
                let rkey = u32::from_le_bytes(b[24..28].try_into().unwrap_or([0; 4]));
                let rkey = (im >> 24 == ANNOUNCE).then_some(rkey);
                if let Some(p) = self.peer(ep) {
                    p.remote.insert(key, (addr, n, rkey));
                }
            }
            PULL if len == PULL_LEN => {
                let b = &self.recv[at..at + len];
                let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
                let half = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap_or([0; 4]));
                let (key, offset, n, dest, rkey, slot) =
                    (word(0), word(8), word(16), word(24), half(32), half(36));
                self.pulled(ep, key, offset, n, dest, rkey, slot);
            }
            PUSH if len >= PUSH_HDR => self.pushed_here(ep, at, len),
            PULLED if len == PULLED_LEN => {
                let b = &self.recv[at..at + len];
                let slot = u32::from_le_bytes(b[0..4].try_into().unwrap_or([0; 4]));
                let status = u32::from_le_bytes(b[4..8].try_into().unwrap_or([0; 4]));
                let ours = self
                    .gets
                    .get(slot as usize)
                    .and_then(Option::as_ref)
                    .is_some_and(|g| g.pulled && g.ep == ep);
                if ours {
                    self.read_done(slot, status);
                }
            }
            WITHDRAW if len == 8 => {
                let key = u64::from_le_bytes(self.recv[at..at + 8].try_into().unwrap_or([0; 8]));
                if let Some(p) = self.peer(ep) {
                    p.remote.remove(&key);
                }
            }
            _ => self.log(
                Level::Warn,
                format_args!(
                    "verbs BTL: dropped a malformed message of {len} bytes from rank {ep}"
                ),
            ),
        }
        self.consumed(ep, buf);
        1
    }

    /// A buffer of `ep`'s is free: post it again and count it for the credit return.
    fn consumed(&mut self, ep: u32, buf: u32) {
        if let Err(e) = self.post_recv(buf) {
            self.platform
                .log(Level::Error, format_args!("verbs BTL: {e}"));
        }
        self.stats.reposts += 1;
        if let Some(p) = self.peer(ep) {
            p.consumed += 1;
        }
    }

    fn drain_held(&mut self, sink: &mut dyn Sink) -> (bool, usize) {
        let mut n = 0;
        while let Some(h) = self.held.front() {
            let at = h.buf as usize * self.buf_size;
            let (from, tag, buf) = (h.from, h.tag, h.buf);
            let d = sink.deliver(ProcId(from), AmTag(tag), &self.recv[at..at + h.len]);
            if d == Delivery::Retry {
                return (false, n);
            }
            self.held.pop_front();
            self.consumed(from, buf);
            n += 1;
            if d == Delivery::Satisfied {
                return (false, n);
            }
        }
        (true, n)
    }

    /// The receiver's side of the pipeline: registers `dest` for remote write and asks the peer
    /// to write `[offset, offset + len)` of its buffer `key` there; done when its `PULLED` comes.
    fn pull(&mut self, ep: u32, key: u64, offset: u64, dest: DestRef, token: Token) -> bool {
        if !self.can_send(ep) {
            return false;
        }
        let Some(g) = self.free_gets.pop() else {
            return false;
        };
        let mut r = Registering {
            lib: &self.lib,
            dev: &self.dev,
        };
        let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        let (busy, before) = (self.transferring(), self.cache.stats.register_ns);
        let got = self
            .cache
            .acquire(&mut r, dest.as_ptr() as usize, dest.len(), access);
        self.registered(busy, before);
        let Some((lease, mr)) = got else {
            self.free_gets.push(g);
            return false;
        };
        let mut msg = [0u8; PULL_LEN];
        msg[0..8].copy_from_slice(&key.to_le_bytes());
        msg[8..16].copy_from_slice(&offset.to_le_bytes());
        msg[16..24].copy_from_slice(&(dest.len() as u64).to_le_bytes());
        msg[24..32].copy_from_slice(&(dest.as_ptr() as u64).to_le_bytes());
        // SAFETY: the registration just acquired.
        msg[32..36].copy_from_slice(&unsafe { (*mr).rkey }.to_le_bytes());
        msg[36..40].copy_from_slice(&g.to_le_bytes());
        if !self.send_control(ep, PULL, &msg) {
            let mut r = Registering {
                lib: &self.lib,
                dev: &self.dev,
            };
            self.cache.release(&mut r, lease);
            self.free_gets.push(g);
            return false;
        }
        self.gets[g as usize] = Some(GetOp {
            token,
            lease,
            ep,
            parts: 1,
            dest: dest.as_ptr() as u64,
            len: dest.len() as u64,
            error: None,
            pulled: true,
        });
        self.note_transfer();
        true
    }

    /// A peer's pull of a buffer announced to it: queued, served in progress.
    #[allow(clippy::too_many_arguments)]
    fn pulled(&mut self, ep: u32, key: u64, offset: u64, n: u64, dest: u64, rkey: u32, slot: u32) {
        let src = self.regs.get(&key).and_then(|a| {
            let inside = a.ep == ep && offset.checked_add(n).is_some_and(|e| e <= a.len);
            inside.then_some(a.addr + offset)
        });
        self.puts.push_back(PutJob {
            ep,
            src: src.unwrap_or(0),
            len: n,
            dest,
            rkey,
            slot,
            pushed: 0,
            push_end: self.send_length.min(n),
            posted: self.send_length.min(n),
            next: None,
            failed: src.is_none(),
        });
        if src.is_none() {
            self.log(
                Level::Error,
                format_args!("verbs BTL: rank {ep} pulled {n} bytes of key {key}, which it was not announced"),
            );
        }
    }

    /// Whether a large-message transfer is under way here: RDMA reads or writes posted, pushes
    /// in flight, or a pull whose writes the peer is making.
    fn transferring(&self) -> bool {
        !self.writing.is_empty() || self.pushing > 0 || self.gets.iter().any(Option::is_some)
    }

    /// Counts the registering time since the cache's count was `before` as hidden behind a
    /// transfer (`busy`) or in the message's path.
    fn registered(&mut self, busy: bool, before: u64) {
        let spent = self.cache.stats.register_ns.saturating_sub(before);
        if busy {
            self.stats.reg_hidden_ns += spent;
        } else {
            self.stats.reg_exposed_ns += spent;
        }
    }

    /// Starts or stops the transfer clock as transfers begin or all end.
    fn note_transfer(&mut self) {
        match (self.busy_since, self.transferring()) {
            (None, true) => self.busy_since = Some(std::time::Instant::now()),
            (Some(t), false) => {
                self.stats.transfer_ns += t.elapsed().as_nanos() as u64;
                self.busy_since = None;
            }
            _ => {}
        }
    }

    /// A push of `ep`'s in receive buffer bytes `[at, at + len)`: copied into the destination
    /// of the pull it names, if it fits there.
    fn pushed_here(&mut self, ep: u32, at: usize, len: usize) {
        let b = &self.recv[at..at + len];
        let slot = u32::from_le_bytes(b[0..4].try_into().unwrap_or([0; 4]));
        let offset = u64::from_le_bytes(b[8..16].try_into().unwrap_or([0; 8]));
        let n = (len - PUSH_HDR) as u64;
        let dest = self
            .gets
            .get(slot as usize)
            .and_then(Option::as_ref)
            .filter(|g| g.pulled && g.ep == ep)
            .filter(|g| offset.checked_add(n).is_some_and(|e| e <= g.len))
            .map(|g| g.dest + offset);
        let Some(dest) = dest else {
            self.log(
                Level::Warn,
                format_args!("verbs BTL: dropped a pipeline send of {n} bytes from rank {ep} that fits no pull"),
            );
            return;
        };
        // SAFETY: `dest..dest + n` lies inside the destination of a pull under way (checked
        // above), which the upper layer keeps alive until the pull completes; the source is
        // this receive buffer, which is not posted while it is read.
        unsafe { ptr::copy_nonoverlapping(b[PUSH_HDR..].as_ptr(), dest as *mut u8, n as usize) };
    }

    /// Sends the next bytes of the front pull's `[0, push_end)` through the receive queue;
    /// false when there is no credit or slot now.
    fn push_fragment(&mut self, ep: u32) -> bool {
        if !self.can_send(ep) {
            return false;
        }
        let Some(s) = self.free_slots.pop() else {
            return false;
        };
        let j = &self.puts[0];
        let n = (j.push_end - j.pushed).min((self.buf_size - PUSH_HDR) as u64) as usize;
        let (src, offset, slot) = (j.src + j.pushed, j.pushed, j.slot);
        let at = s as usize * self.buf_size;
        let out = &mut self.send[at..at + PUSH_HDR + n];
        out[0..4].copy_from_slice(&slot.to_le_bytes());
        out[4..8].fill(0);
        out[8..16].copy_from_slice(&offset.to_le_bytes());
        // SAFETY: `src..src + n` lies inside the buffer announced for this pull (checked when
        // the pull came), which the upper layer keeps until the peer's FIN, after the pull.
        let data = unsafe { core::slice::from_raw_parts(src as *const u8, n) };
        out[PUSH_HDR..].copy_from_slice(data);
        let p = out.as_ptr();
        self.post_send(ep, PUSH, 0, p, PUSH_HDR + n, s);
        self.puts[0].pushed += n as u64;
        self.stats.pushes += 1;
        self.stats.push_bytes += n as u64;
        true
    }

    /// Registers the fragment of `job` that starts at `posted`.
    fn register_fragment(&mut self, job: usize) -> Option<(Lease, u32, u64)> {
        let j = self.puts.get(job)?;
        let n = (j.len - j.posted).min(self.frag_len);
        let at = (j.src + j.posted) as usize;
        let mut r = Registering {
            lib: &self.lib,
            dev: &self.dev,
        };
        let (busy, before) = (self.transferring(), self.cache.stats.register_ns);
        let got = self.cache.acquire(&mut r, at, n as usize, 0);
        self.registered(busy, before);
        let (lease, mr) = got?;
        // SAFETY: the registration just acquired.
        Some((lease, unsafe { (*mr).lkey }, n))
    }

    /// Posts the RDMA write of the front pull's next fragment (registered ahead, or now) and
    /// registers the one after it while this one is written; false when nothing could be done
    /// now (all written, the pipeline full, no room on the queue pair).
    fn write_fragment(&mut self, ep: u32) -> bool {
        let j = &self.puts[0];
        if j.failed || j.posted >= j.len {
            return false;
        }
        if self.writing.len() >= self.depth || self.in_flight >= self.send_cap {
            return false;
        }
        let depth = self.qp_depth;
        if self.peer(ep).is_none_or(|p| p.sq >= depth) {
            return false;
        }
        let frag = match self.puts[0].next.take() {
            Some(f) => Some(f),
            None => self.register_fragment(0),
        };
        let Some((lease, lkey, n)) = frag else {
            // The device refused: the peer hears the pull failed.
            self.puts[0].failed = true;
            return true;
        };
        let j = &self.puts[0];
        let id = self.next_write;
        self.next_write = self.next_write.wrapping_add(1);
        let mut sge = ibv_sge {
            addr: j.src + j.posted,
            length: n as u32,
            lkey,
        };
        // SAFETY: all-zero is a valid ibv_send_wr.
        let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
        wr.wr_id = wr_id(WR_WRITE, ep, id);
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: j.dest + j.posted,
            rkey: j.rkey,
        };
        let Some(p) = self.peers.get_mut(ep as usize).and_then(Option::as_mut) else {
            return false;
        };
        let mut bad = ptr::null_mut();
        // SAFETY: a connected QP; the source fragment is registered.
        let rc = unsafe { ibv_post_send(p.qp, &mut wr, &mut bad) };
        if rc != 0 {
            let mut r = Registering {
                lib: &self.lib,
                dev: &self.dev,
            };
            self.cache.release(&mut r, lease);
            self.fail_peer(ep, format!("posting an RDMA write failed (errno {rc})"));
            return true;
        }
        p.sq += 1;
        self.in_flight += 1;
        self.writing.insert(id, (lease, n));
        self.puts[0].posted += n;
        // Overlap: the next fragment is registered while this one is written.
        if self.puts[0].posted < self.puts[0].len {
            self.puts[0].next = self.register_fragment(0);
        }
        true
    }

    /// Serves the pulls in order: the first `btl_verbs_rdma_pipeline_send_length` bytes sent
    /// through the receive queue, the rest in fragments, each registered, RDMA-written, and the
    /// next one registered while up to `btl_verbs_rdma_pipeline_depth` writes (and the sends)
    /// are under way; once all of a pull's bytes are posted, its `PULLED` follows them on the
    /// queue pair.
    fn serve_pulls(&mut self) {
        while !self.puts.is_empty() {
            let ep = self.puts[0].ep;
            let (failed_peer, connected) = match self.peer(ep) {
                Some(p) => (p.failed, p.connected),
                None => (true, false),
            };
            if failed_peer || !connected {
                if let Some(j) = self.puts.pop_front() {
                    if let Some((lease, _, _)) = j.next {
                        let mut r = Registering {
                            lib: &self.lib,
                            dev: &self.dev,
                        };
                        self.cache.release(&mut r, lease);
                    }
                }
                continue;
            }
            let j = &self.puts[0];
            if !j.failed && (j.pushed < j.push_end || j.posted < j.len) {
                // The first bytes go through the receive queue, the first RDMA fragment
                // registering while they travel.
                let pushed = j.pushed < j.push_end && self.push_fragment(ep);
                if !self.write_fragment(ep) && !pushed {
                    return;
                }
                continue;
            }
            // Every write posted (or the pull failed): tell the peer.
            let j = &self.puts[0];
            let status = if j.failed {
                IBV_WC_REM_ACCESS_ERR
            } else {
                IBV_WC_SUCCESS
            };
            let mut msg = [0u8; PULLED_LEN];
            msg[0..4].copy_from_slice(&j.slot.to_le_bytes());
            msg[4..8].copy_from_slice(&status.to_le_bytes());
            if !self.send_control(ep, PULLED, &msg) {
                return;
            }
            if let Some(j) = self.puts.pop_front() {
                if let Some((lease, _, _)) = j.next {
                    let mut r = Registering {
                        lib: &self.lib,
                        dev: &self.dev,
                    };
                    self.cache.release(&mut r, lease);
                }
            }
        }
    }

    /// Releases every verbs object (queue pairs, registrations, device).
    /// Connects the one-sided queue pair to `proc` (a peer without one is not reached by
    /// windows' RDMA: they go by messages), unless `osc_verbs=on`.
    fn connect_osc(
        &mut self,
        osc: &VerbsRdma,
        proc: ProcId,
        card: &Card,
        modex: &mut dyn Modex,
    ) -> Result<()> {
        let mut buf = [0u8; stormpi_core::rte::MAX_MODEX_VALUE];
        let i = (self.rank as usize % QPNS_PER_KEY) * 4;
        let why = match modex.get(proc, &crate::osc::osc_qpn_key(self.rank), &mut buf)? {
            Some(n) if n >= i + 4 => {
                let dest = u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
                match osc.connect(&self.dev, proc.0, card, dest, self.psn, self.retry) {
                    Ok(()) => return Ok(()),
                    Err(e) => e,
                }
            }
            _ => "it published no one-sided queue pair (osc_verbs=off there)".to_string(),
        };
        let level = if self.osc_required {
            Level::Error
        } else {
            Level::Info
        };
        self.log(
            level,
            format_args!("verbs BTL: one-sided queue pair to rank {}: {why}", proc.0),
        );
        if self.osc_required {
            return Err(transport(
                "osc_verbs=on, but a one-sided queue pair cannot connect",
            ));
        }
        Ok(())
    }

    fn release(&mut self) {
        if let Some(osc) = self.osc {
            osc.close();
        }
        let lib = &self.lib;
        for p in self.peers.iter_mut().flatten() {
            if !p.qp.is_null() {
                // SAFETY: our QP, destroyed once.
                unsafe { (lib.destroy_qp)(p.qp) };
                p.qp = ptr::null_mut();
            }
        }
        self.regs.clear();
        self.cache.clear(&mut Registering {
            lib,
            dev: &self.dev,
        });
        for mr in [&mut self.recv_mr, &mut self.send_mr, &mut self.mailbox_mr] {
            if !mr.is_null() {
                // SAFETY: our registration, deregistered once.
                unsafe { (lib.dereg_mr)(*mr) };
                *mr = ptr::null_mut();
            }
        }
        self.dev.close(lib);
    }
}

/// Exclusivity: below `sm` (1000) on one node, above `tcp` (100).
pub const EXCLUSIVITY: u32 = 500;

impl Btl for VerbsBtl {
    fn attrs(&self) -> &BtlAttrs {
        &self.attrs
    }

    fn publish(&mut self, modex: &mut dyn ModexPut) -> Result<()> {
        let card = Card {
            lid: self.dev.lid,
            link_layer: self.dev.link_layer,
            mtu: self.dev.mtu as u8,
            gid: self.dev.gid,
            psn: self.psn,
            mailbox: self.mailbox.as_ptr() as u64,
            // SAFETY: registered in setup.
            mailbox_rkey: unsafe { (*self.mailbox_mr).rkey },
        };
        modex.put(CARD_KEY, &card.to_bytes())?;
        let qpns: Vec<u32> = self
            .peers
            .iter()
            // SAFETY: live QPs.
            .map(|p| p.as_ref().map_or(0, |p| unsafe { (*p.qp).qp_num }))
            .collect();
        for (i, chunk) in qpns.chunks(QPNS_PER_KEY).enumerate() {
            let bytes: Vec<u8> = chunk.iter().flat_map(|q| q.to_le_bytes()).collect();
            modex.put(&endpoint::qpn_key((i * QPNS_PER_KEY) as u32), &bytes)?;
        }
        if let Some(osc) = self.osc {
            for (i, chunk) in osc.qpns().chunks(QPNS_PER_KEY).enumerate() {
                let bytes: Vec<u8> = chunk.iter().flat_map(|q| q.to_le_bytes()).collect();
                modex.put(&crate::osc::osc_qpn_key((i * QPNS_PER_KEY) as u32), &bytes)?;
            }
        }
        Ok(())
    }

    fn add_procs(
        &mut self,
        peers: &[PeerInfo],
        modex: &mut dyn Modex,
        endpoints: &mut [Option<Endpoint>],
    ) -> Result<()> {
        let mut buf = [0u8; stormpi_core::rte::MAX_MODEX_VALUE];
        for (info, out) in peers.iter().zip(endpoints.iter_mut()) {
            let r = info.proc.0;
            *out = None;
            if r == self.rank || self.peer(r).is_none() {
                continue;
            }
            let Some(n) = modex.get(info.proc, CARD_KEY, &mut buf)? else {
                continue;
            };
            let Some(card) = Card::from_bytes(&buf[..n]) else {
                self.log(
                    Level::Warn,
                    format_args!(
                        "verbs BTL: rank {r} published a malformed card; not using verbs to it"
                    ),
                );
                continue;
            };
            let Some(n) = modex.get(info.proc, &endpoint::qpn_key(self.rank), &mut buf)? else {
                continue;
            };
            let i = (self.rank as usize % QPNS_PER_KEY) * 4;
            if n < i + 4 {
                continue;
            }
            let dest_qpn = u32::from_le_bytes([buf[i], buf[i + 1], buf[i + 2], buf[i + 3]]);
            let (psn, retry) = (self.psn, self.retry);
            let qp = match self.peer(r) {
                Some(p) => p.qp,
                None => continue,
            };
            if let Err(e) =
                endpoint::connect(&self.lib, &self.dev, qp, &card, dest_qpn, psn, retry, false)
            {
                self.platform.log(
                    Level::Error,
                    format_args!(
                        "verbs BTL: connecting to rank {r} on {}: {e}",
                        self.dev.name
                    ),
                );
                return Err(transport("connecting a queue pair failed"));
            }
            if let Some(p) = self.peer(r) {
                p.connected = true;
                p.mailbox = card.mailbox;
                p.mailbox_rkey = card.mailbox_rkey;
            }
            *out = Some(Endpoint(r));
            if let Some(osc) = self.osc {
                self.connect_osc(osc, info.proc, &card, modex)?;
            }
        }
        Ok(())
    }

    fn reserve(&mut self, ep: Endpoint, len: usize) -> Option<&mut [u8]> {
        if len > self.attrs.max_send_size || !self.can_send(ep.0) {
            return None;
        }
        let s = match self.reserved {
            Some(s) => s,
            None => self.free_slots.pop()?,
        };
        self.reserved = Some(s);
        let at = s as usize * self.buf_size;
        Some(&mut self.send[at..at + len])
    }

    fn commit(&mut self, ep: Endpoint, tag: AmTag, len: usize) {
        let Some(s) = self.reserved.take() else {
            return;
        };
        let p = self.send[s as usize * self.buf_size..].as_ptr();
        self.post_send(ep.0, FRAG, tag.0, p, len, s);
    }

    fn register(&mut self, ep: Endpoint, data: DataRef) -> Option<RemoteKey> {
        if data.is_empty() || self.peer(ep.0).is_none_or(|p| p.failed) || !self.can_send(ep.0) {
            return None;
        }
        let (addr, len) = (data.as_ptr() as u64, data.len() as u64);
        let key = self.next_key;
        let mut msg = [0u8; ANNOUNCE_LEN];
        msg[0..8].copy_from_slice(&key.to_le_bytes());
        msg[8..16].copy_from_slice(&addr.to_le_bytes());
        msg[16..24].copy_from_slice(&len.to_le_bytes());
        let (kind, lease) = if self.large == Large::Pipeline && len >= self.min_pipeline {
            // Nothing registered yet: the fragments are, as the peer pulls them.
            (ANNOUNCE_PIPE, None)
        } else {
            let mut r = Registering {
                lib: &self.lib,
                dev: &self.dev,
            };
            let (busy, before) = (self.transferring(), self.cache.stats.register_ns);
            let got =
                self.cache
                    .acquire(&mut r, addr as usize, len as usize, IBV_ACCESS_REMOTE_READ);
            self.registered(busy, before);
            let (lease, mr) = got?;
            // SAFETY: the registration just acquired.
            msg[24..28].copy_from_slice(&unsafe { (*mr).rkey }.to_le_bytes());
            (ANNOUNCE, Some(lease))
        };
        if !self.send_control(ep.0, kind, &msg) {
            if let Some(lease) = lease {
                let mut r = Registering {
                    lib: &self.lib,
                    dev: &self.dev,
                };
                self.cache.release(&mut r, lease);
            }
            return None;
        }
        self.next_key += 1;
        self.regs.insert(
            key,
            Announced {
                ep: ep.0,
                lease,
                addr,
                len,
            },
        );
        Some(RemoteKey(key))
    }

    fn deregister(&mut self, key: RemoteKey) {
        let Some(a) = self.regs.remove(&key.0) else {
            return;
        };
        let ep = a.ep;
        // The peer's read of it is over (its FIN came): the cache may keep it or deregister it.
        if let Some(lease) = a.lease {
            let mut r = Registering {
                lib: &self.lib,
                dev: &self.dev,
            };
            self.cache.release(&mut r, lease);
        }
        if !self.send_control(ep, WITHDRAW, &key.0.to_le_bytes()) {
            self.withdraws.push_back((ep, key.0));
        }
    }

    fn get(
        &mut self,
        ep: Endpoint,
        key: RemoteKey,
        offset: u64,
        dest: DestRef,
        token: Token,
    ) -> bool {
        let max_msg = self.dev.max_msg;
        let (room, depth, cap) = (self.send_cap - self.in_flight, self.qp_depth, self.send_cap);
        let Some(p) = self.peer(ep.0) else {
            self.done
                .push_back((token, Err(transport("an RDMA read to an unknown peer"))));
            return true;
        };
        if p.failed {
            self.done
                .push_back((token, Err(transport("an RDMA read from a failed peer"))));
            return true;
        }
        let Some(&(addr, len, rkey)) = p.remote.get(&key.0) else {
            let r = ep.0;
            self.log(
                Level::Error,
                format_args!(
                    "verbs BTL: rank {r} announced no registration under key {}",
                    key.0
                ),
            );
            self.done
                .push_back((token, Err(transport("an RDMA read of an unannounced key"))));
            return true;
        };
        let n = dest.len() as u64;
        if offset.checked_add(n).is_none_or(|end| end > len) {
            self.done
                .push_back((token, Err(transport("an RDMA read beyond a registration"))));
            return true;
        }
        if n == 0 {
            self.done.push_back((token, Ok(())));
            return true;
        }
        let Some(rkey) = rkey else {
            return self.pull(ep.0, key.0, offset, dest, token);
        };
        let parts = n.div_ceil(max_msg) as u32;
        if parts > depth || parts as usize > cap {
            self.done.push_back((
                token,
                Err(transport(
                    "an RDMA read larger than the send queue can split",
                )),
            ));
            return true;
        }
        if parts as usize > room || p.sq + parts > depth || !p.connected {
            return false;
        }
        let qp = p.qp;
        let Some(g) = self.free_gets.pop() else {
            return false;
        };
        let mut r = Registering {
            lib: &self.lib,
            dev: &self.dev,
        };
        let (busy, before) = (self.transferring(), self.cache.stats.register_ns);
        let got = self.cache.acquire(
            &mut r,
            dest.as_ptr() as usize,
            dest.len(),
            IBV_ACCESS_LOCAL_WRITE,
        );
        self.registered(busy, before);
        let Some((lease, mr)) = got else {
            self.free_gets.push(g);
            return false;
        };
        // SAFETY: the registration just made.
        let lkey = unsafe { (*mr).lkey };
        let mut posted = 0;
        let mut failed = None;
        let mut off = 0u64;
        while off < n {
            let chunk = (n - off).min(max_msg);
            let mut sge = ibv_sge {
                addr: dest.as_ptr() as u64 + off,
                length: chunk as u32,
                lkey,
            };
            // SAFETY: all-zero is a valid ibv_send_wr.
            let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
            wr.wr_id = wr_id(WR_READ, ep.0, g);
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_RDMA_READ;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.wr.rdma = ibv_send_wr_rdma {
                remote_addr: addr + offset + off,
                rkey,
            };
            let mut bad = ptr::null_mut();
            // SAFETY: a connected QP; the destination is registered for local write.
            let rc = unsafe { ibv_post_send(qp, &mut wr, &mut bad) };
            if rc != 0 {
                failed = Some(rc);
                break;
            }
            posted += 1;
            off += chunk;
        }
        if let Some(p) = self.peer(ep.0) {
            p.sq += posted;
        }
        self.in_flight += posted as usize;
        self.gets[g as usize] = Some(GetOp {
            token,
            lease,
            ep: ep.0,
            parts: posted,
            dest: dest.as_ptr() as u64,
            len: n,
            error: failed.map(|_| IBV_WC_GENERAL_ERR),
            pulled: false,
        });
        if let Some(rc) = failed {
            self.fail_peer(ep.0, format!("posting an RDMA read failed (errno {rc})"));
            if posted == 0 {
                // Nothing will complete: finish it here.
                if let Some(op) = self.gets[g as usize].take() {
                    self.free_gets.push(g);
                    let mut r = Registering {
                        lib: &self.lib,
                        dev: &self.dev,
                    };
                    self.cache.release(&mut r, op.lease);
                    self.done
                        .push_back((token, Err(transport("posting an RDMA read failed"))));
                }
            }
        }
        self.note_transfer();
        true
    }

    fn progress(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        while let Some((token, result)) = self.done.pop_front() {
            sink.completed(token, result);
            n += 1;
        }
        for proc in core::mem::take(&mut self.unreachable) {
            sink.unreachable(proc);
        }
        let mut deliver = true;
        if !self.held.is_empty() {
            let (ok, k) = self.drain_held(sink);
            deliver = ok;
            n += k;
        }
        let mut wcs = [ibv_wc::default(); POLL_BATCH];
        loop {
            // SAFETY: a live CQ; `wcs` has room for POLL_BATCH entries.
            let got = unsafe { ibv_poll_cq(self.dev.cq, POLL_BATCH as c_int, wcs.as_mut_ptr()) };
            if got <= 0 {
                if got < 0 {
                    self.platform.log(
                        Level::Error,
                        format_args!("verbs BTL: polling the completion queue failed ({got})"),
                    );
                }
                break;
            }
            for wc in &wcs[..got as usize] {
                // By the work request's id: an error completion's opcode is undefined.
                if wc.wr_id >> 56 == 0 {
                    n += self.arrived(wc, sink, &mut deliver);
                } else {
                    self.send_done(wc);
                    n += 1;
                }
            }
            if (got as usize) < POLL_BATCH {
                break;
            }
        }
        while let Some((token, result)) = self.done.pop_front() {
            sink.completed(token, result);
            n += 1;
        }
        for proc in core::mem::take(&mut self.unreachable) {
            sink.unreachable(proc);
        }
        self.read_mailbox();
        while let Some(&(ep, key)) = self.withdraws.front() {
            if self.peer(ep).is_none_or(|p| p.failed) {
                self.withdraws.pop_front();
                continue;
            }
            if !self.send_control(ep, WITHDRAW, &key.to_le_bytes()) {
                break;
            }
            self.withdraws.pop_front();
        }
        self.serve_pulls();
        self.return_credits();
        self.note_transfer();
        n
    }

    fn rndv_eager(&self) -> usize {
        self.rndv_eager
    }

    fn rdma(&self) -> Option<&'static dyn stormpi_core::osc::rdma::Rdma> {
        self.osc
            .map(|o| o as &'static dyn stormpi_core::osc::rdma::Rdma)
    }

    fn finalize(&mut self) {
        // Outstanding sends would be lost with the queue pairs: let them complete.
        struct Discard;
        impl Sink for Discard {
            fn deliver(&mut self, _: ProcId, _: AmTag, _: &[u8]) -> Delivery {
                Delivery::Consumed
            }
        }
        // Bounded: a peer that has gone (or a dead link) never acknowledges.
        let start = std::time::Instant::now();
        while (self.in_flight > 0 || !self.puts.is_empty())
            && start.elapsed() < std::time::Duration::from_secs(5)
        {
            self.progress(&mut Discard);
        }
        let s = self.stats;
        self.log(
            Level::Info,
            format_args!(
                "verbs BTL: {} fragments sent ({} inline), {} receive buffers posted again, {} credit writes, {} sends refused for want of credits, {} RDMA reads ({} bytes), {} RDMA writes ({} bytes)",
                s.frags, s.inline, s.reposts, s.credit_writes, s.credit_stalls, s.gets, s.get_bytes, s.puts, s.put_bytes
            ),
        );
        let c = self.cache.stats;
        self.log(
            Level::Info,
            format_args!(
                "verbs BTL: registration cache {}: {} hits, {} misses, {} evictions, {} invalidated, {} uncached, {} us registering",
                if self.cache.enabled() { "on" } else { "off" },
                c.hits, c.misses, c.evictions, c.invalidated, c.uncached, c.register_ns / 1000
            ),
        );
        self.log(
            Level::Info,
            format_args!(
                "verbs BTL: {} us transferring large messages, {} us registering behind a transfer, {} us registering with none under way, {} pipeline sends ({} bytes)",
                s.transfer_ns / 1000, s.reg_hidden_ns / 1000, s.reg_exposed_ns / 1000, s.pushes, s.push_bytes
            ),
        );
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn piggy_backed_credits_widen_across_the_16_bit_wrap() {
        // 65_530 returned, 65_560 sent: the peer says 20 (65_556 mod 2^16).
        assert_eq!(widen_returned(65_530, 65_560, 32, 20), 65_556);
        assert_eq!(widen_returned(10, 40, 32, 30), 30);
        // Nothing new.
        assert_eq!(widen_returned(10, 40, 32, 10), 10);
    }

    #[test]
    fn stale_or_impossible_counts_are_ignored() {
        // An older count than the mailbox already gave: a huge wrapped delta.
        assert_eq!(widen_returned(30, 40, 32, 25), 30);
        // More than was ever sent.
        assert_eq!(widen_returned(10, 20, 32, 25), 10);
    }

    #[test]
    fn immediate_data_packs_kind_tag_and_count() {
        let i = imm(ANNOUNCE, 7, 0x1_2345);
        assert_eq!(i >> 24, ANNOUNCE);
        assert_eq!((i >> 16) as u8, 7);
        assert_eq!(i as u16, 0x2345);
        let w = wr_id(WR_READ, 5, 9);
        assert_eq!((w >> 56, (w >> 32) & 0xff_ffff, w as u32), (WR_READ, 5, 9));
    }
}
