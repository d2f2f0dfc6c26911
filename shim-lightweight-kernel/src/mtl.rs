//! The Portals MTL: MPI matching done by Portals match lists (the `cm` path; the node default).
//!
//! Envelopes are match bits ([`MatchBits`]: context id, source rank, tag, protocol flags).
//!
//! - **Receives** are use-once match entries on the priority list of [`pt::MTL`] over the user's
//!   buffer (a bounce buffer for a non-contiguous type): an expected message lands directly in
//!   it. Appending one that an unexpected message already matches yields
//!   `PTL_EVENT_PUT_OVERFLOW` instead, and the bytes are copied from the overflow block.
//! - **Unexpected** messages land in the overflow list: blocks of `mtl_portals_block_bytes`,
//!   locally managed, unlinking themselves when less than an eager message's room is left; a
//!   block is reused after `PTL_EVENT_AUTO_FREE` (every message in it taken), and more are
//!   allocated, up to `mtl_portals_max_blocks`, when the list runs short.
//! - **Short** messages (up to `mtl_portals_eager_limit`) are one put; the data is copied first,
//!   so the send is complete for MPI at once.
//! - **Long** and synchronous messages put their first eager-limit bytes with the `LONG` flag
//!   and `hdr_data` = (key << 40) | length, and expose the whole message as a use-once entry on
//!   [`pt::MTL_READ`] with the key as match bits, readable only by the destination. The receiver,
//!   once matched, gets the rest (or zero bytes, when it already has all it wants) with
//!   `PtlGet`; that get is what completes the send — for a synchronous send, the proof of the
//!   match.
//! - **Probes** are `PtlMESearch` (`PTL_SEARCH_ONLY`; `PTL_SEARCH_DELETE` for a matched probe,
//!   whose bytes are copied out at once).
//! - **Flow control.** [`pt::MTL`] is flow-controlled, and puts carry no acknowledgment: a
//!   sender keeps each message (its copy, or the user's buffer of a long one) until it is known
//!   to be accepted — by the acknowledgment of a zero-byte *confirmation* put (flag `CONTROL`,
//!   taken by a sink entry no receive can match, first on the overflow list) sent after every
//!   128 puts to a peer (sooner when their copies reach 256 KiB) and for the tail of a burst
//!   (after `TAIL_POLLS` polls without a put), by the receiver's get of a long message, or by a
//!   recovery's count. An accepted put proves every earlier one to that peer accepted: a
//!   disabled entry refuses everything until the sender has drained. When this process's entry
//!   is disabled (no overflow room, or a full event queue), it moves its unexpected messages out
//!   of the overflow blocks (deleting searches, oldest first, into a list receives and probes
//!   look at first), posts more blocks and sends `DISABLED(epoch)` on [`pt::MTL_CTRL`] to every
//!   rank. A sender holds further messages to it and answers `DRAINED` at once — messages
//!   between a pair stay in order, so everything it sent before arrives before that answer. With
//!   every answer in, the receiver counts the messages it accepted from each sender (its put
//!   events, also on the overflow blocks), calls `PtlPTEnable` and sends `ENABLED(epoch,
//!   count)`; each sender drops the first `count` kept messages as delivered and sends the rest
//!   again, then what it held, in the original order. So nothing is lost and no message
//!   overtakes another.

use std::collections::VecDeque;
use std::ptr;

use portals4_sys::*;
use stormpi_core::btl::{PeerInfo, Token};
use stormpi_core::datatype::convertor::{Packer, Unpacker};
use stormpi_core::datatype::table::TypeTable;
use stormpi_core::error::{Error, ErrorClass, Reason, Result};
use stormpi_core::mtl::{
    MatchBits, Mtl, MtlAttrs, MtlData, MtlEnvelope, MtlMatch, MtlMessage, MtlPlaced, MtlSelector,
    MtlSink, BLOCKING,
};
use stormpi_core::params::{Default, Kind, ParamDef, Params};
use stormpi_core::pml::request::SendMode;
use stormpi_core::rte::ProcId;

use crate::ptl::{self, check, pt};

/// `mtl_portals_eager_limit`.
pub static EAGER_LIMIT: ParamDef = ParamDef {
    name: "mtl_portals_eager_limit",
    kind: Kind::Int { min: 0, max: 1 << 20 },
    default: Default::Int(8192),
    description: "Messages up to this many bytes are sent whole in one put (copied, so the send completes at once); longer ones put this much and the receiver gets the rest",
};

/// `mtl_portals_block_bytes`.
pub static BLOCK_BYTES: ParamDef = ParamDef {
    name: "mtl_portals_block_bytes",
    kind: Kind::Int {
        min: 1024,
        max: 1 << 30,
    },
    default: Default::Int(1 << 20),
    description:
        "Bytes of each overflow block for unexpected messages (at least twice the eager limit)",
};

/// `mtl_portals_blocks`.
pub static BLOCKS: ParamDef = ParamDef {
    name: "mtl_portals_blocks",
    kind: Kind::Int { min: 1, max: 4096 },
    default: Default::Int(4),
    description: "Overflow blocks kept posted",
};

/// `mtl_portals_max_blocks`.
pub static MAX_BLOCKS: ParamDef = ParamDef {
    name: "mtl_portals_max_blocks",
    kind: Kind::Int { min: 1, max: 1 << 16 },
    default: Default::Int(256),
    description: "Most overflow blocks allocated (unexpected messages beyond them wait at their senders: flow control)",
};

/// `mtl_portals_eq_len`.
pub static EQ_LEN: ParamDef = ParamDef {
    name: "mtl_portals_eq_len",
    kind: Kind::Int {
        min: 64,
        max: 1 << 22,
    },
    default: Default::Int(16384),
    description: "Slots of each event queue of the Portals MTL (a full receive queue disables the portal: flow control)",
};

/// Parameters of the Portals MTL.
pub static PARAMS: [&ParamDef; 5] = [&EAGER_LIMIT, &BLOCK_BYTES, &BLOCKS, &MAX_BLOCKS, &EQ_LEN];

const K_CONFIRM: usize = 0;
const K_READ: usize = 1;
const K_GET: usize = 2;
const K_RECV: usize = 3;
const K_BLOCK: usize = 4;
const K_SEARCH: usize = 5;
const K_CTRL: usize = 6;
const K_BITS: u32 = 3;
/// Ids of operations whose events are ignored.
const NO_OP: usize = (usize::MAX >> K_BITS) - 1;
/// The id of the PML's blocking receive ([`BLOCKING`]): it has a slot of its own
/// (`PortalsMtl::blocking`), so posting and finishing it is a store each, no slab slot.
const BLOCKING_OP: usize = NO_OP - 1;

/// Puts to a peer between two confirmation requests. Each request costs a put with an
/// acknowledgment and its handling on both sides, shared by the puts it covers: at 32 it was
/// ~30 instructions on every small message.
const CONFIRM_EVERY: u32 = 128;

/// Bytes of short-message copies to a peer between two confirmation requests (what the copies
/// kept for flow control may add up to, besides those a pending request covers): many large
/// short messages ask sooner than `CONFIRM_EVERY`.
const CONFIRM_BYTES: usize = 256 << 10;

/// Short-message copies kept for reuse once confirmed: enough for the copies a confirmation
/// releases at once (`CONFIRM_EVERY` to a peer, twice over), so that a steady stream of small
/// messages allocates nothing; at most `CONFIRM_BYTES` of them.
const SPARE_BUFS: usize = 2 * CONFIRM_EVERY as usize;

/// Polls between two looks at the control queue (flow-control messages; every poll while a
/// recovery is under way). Each look is an interface call: in a ping-pong a poll is a few dozen
/// nanoseconds, so a look every few polls would be a good part of the latency.
const CTRL_POLLS: u32 = 256;

/// Polls without a put after which the tail of a burst (puts since the last confirmation) gets
/// its confirmation. Counting idle polls, not all polls, keeps confirmations off a steady
/// exchange (a ping-pong polls a few times per message), where `CONFIRM_EVERY` covers them.
const TAIL_POLLS: u32 = 512;

/// Receive-queue events one [`Mtl::progress`] call handles at most (a window of a halo
/// exchange's receives; more waits for the next call, so one call stays bounded).
const PROGRESS_EVENTS: u32 = 64;

const LEN_BITS: u32 = 40;
const LEN_MASK: u64 = (1 << LEN_BITS) - 1;

const CTRL_DISABLED: u64 = 1;
const CTRL_DRAINED: u64 = 2;
const CTRL_ENABLED: u64 = 3;

fn uptr(id: usize, kind: usize) -> *mut std::ffi::c_void {
    ((id << K_BITS) | kind) as *mut _
}

fn split(p: *mut std::ffi::c_void) -> (usize, usize) {
    let v = p as usize;
    (v >> K_BITS, v & ((1 << K_BITS) - 1))
}

/// A long or synchronous send (short ones are [`Kept::Bytes`], no operation).
struct SendOp {
    token: Token,
    dest: u32,
    bits: u64,
    hdr: u64,
    data: *const u8,
    put_len: usize,
    read_me: bool,
    /// The packed bounce buffer of a non-contiguous type (`data` points into it), kept until
    /// done.
    _buf: Vec<u8>,
    /// The user's data (a held type), kept until done. Boxed: a convertor inline would make
    /// every operation hundreds of bytes to move.
    _conv: Box<Packer>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RecvState {
    Posted,
    Getting,
}

/// A receive: where its bytes go (the convertor stays with the PML's request).
struct RecvOp {
    token: Token,
    buf: *mut u8,
    cap: usize,
    bounce: Vec<u8>,
    me: ptl_handle_me_t,
    state: RecvState,
    got: usize,
    m: MtlMatch,
}

enum Op {
    Send(SendOp),
    Recv(RecvOp),
}

struct Block {
    mem: Box<[u8]>,
    me: ptl_handle_me_t,
}

/// A message taken by a matched probe.
struct Taken {
    bits: u64,
    hdr: u64,
    rlength: u64,
    from: u32,
    data: Vec<u8>,
}

/// A send kept until the receiver is known to have accepted it (flow control may refuse it and
/// it is then put again). Plain data (its bytes are in [`Copies`]), so a confirmation lets a
/// whole run of them go by moving the queue's front.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// A short message, complete for MPI: its match bits and the slot of its copy
    /// ([`Copies::NONE`] for zero bytes) — no operation and no request: the common small send
    /// costs a queue entry, no slab slot.
    Bytes { bits: u64, copy: u32 },
    /// A long or synchronous send (operation id).
    Op(u32),
}

#[derive(Default)]
struct Peer {
    // ---- as a sender to this peer
    /// Puts to the peer so far, in the numbering the peer counts in.
    sent: u32,
    /// Puts not known to be accepted, in order; their numbers are consecutive and the last is
    /// `sent - 1` (see [`Peer::first`]).
    unconfirmed: VecDeque<Kept>,
    /// Puts since the last confirmation request.
    since_confirm: u32,
    /// Bytes of short-message copies put since the last confirmation request.
    since_confirm_bytes: usize,
    /// A confirmation put is unacknowledged: it covers numbers below `confirm_upto`.
    confirm_pending: bool,
    confirm_upto: u32,
    confirm_gen: u32,
    /// Incremented at every recovery the peer ends (stale confirmations are ignored).
    gen: u32,
    /// Sends are held: the peer is recovering.
    blocked: bool,
    /// Sends held while blocked, in order.
    queued: VecDeque<Kept>,
    // ---- as a receiver from this peer
    /// Messages from the peer this process's portal accepted.
    accepted: u32,
}

impl Peer {
    /// The number of the oldest unconfirmed put.
    fn first(&self) -> u32 {
        self.sent.wrapping_sub(self.unconfirmed.len() as u32)
    }
}

struct Recovery {
    epoch: u64,
    drained: Vec<bool>,
    left: u32,
}

enum Done {
    Send(Token, Result<()>),
    Recv(usize),
}

/// Counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct MtlStats {
    /// Messages put.
    pub puts: u64,
    /// Puts refused by a disabled portal and sent again.
    pub refused: u64,
    /// Confirmation puts.
    pub confirms: u64,
    /// Times this process's portal was disabled and recovered.
    pub recoveries: u64,
    /// Receives matched from the overflow list.
    pub unexpected: u64,
    /// Gets issued by receives.
    pub gets: u64,
}

/// The Portals MTL.
pub struct PortalsMtl {
    attrs: MtlAttrs,
    ni: ptl_handle_ni_t,
    rank: u32,
    size: u32,
    md: ptl_handle_md_t,
    eqs: [ptl_handle_eq_t; 3],
    eager: usize,
    ops: Vec<Option<Op>>,
    free_ops: Vec<usize>,
    /// The blocking receive ([`BLOCKING_OP`]), while it is posted.
    blocking: Option<RecvOp>,
    /// Where [`Mtl::poll_waiting`] takes an event of the receive queue; `stashed` when it left
    /// it for the [`Mtl::progress_waiting`] that follows.
    stash: ptl_event_t,
    stashed: bool,
    /// [`Mtl::poll_waiting`] polled in this round and left the rest to the
    /// [`Mtl::progress_waiting`] that follows: what it counted so far.
    pending: Option<usize>,
    /// Short sends kept (unconfirmed or held): complete for MPI, still in flight.
    kept: u32,
    blocks: Vec<Block>,
    spare: Vec<usize>,
    linked: usize,
    want_linked: usize,
    max_blocks: usize,
    block_bytes: usize,
    peers: Vec<Peer>,
    recovery: Option<Recovery>,
    epoch: u64,
    done: VecDeque<Done>,
    /// Results of searches, by search number (a search may run inside another's wait: a
    /// recovery starting there moves messages out with searches of its own).
    searches: Vec<(usize, ptl_event_t, Option<Vec<u8>>)>,
    next_search: usize,
    taken: Vec<Option<Taken>>,
    /// Unexpected messages moved out of the overflow blocks by a flow-control recovery, oldest
    /// first; all older than any still in the interface's unexpected list.
    moved: VecDeque<Taken>,
    /// Calls of `poll`.
    polls: u32,
    /// `polls` at the last put.
    last_put: u32,
    /// Receives waiting for their get.
    getting: u32,
    /// Confirmation puts unacknowledged.
    confirming: u32,
    /// Peers our sends are held for.
    blocked: u32,
    /// Long sends not finished (their gets complete them: the send queue must be read).
    long_sends: u32,
    /// Slots of each event queue.
    eq_len: u64,
    /// Short sends' copies.
    copies: Copies,
    /// Counters.
    pub stats: MtlStats,
}

// SAFETY: the raw pointers are loans of user memory for the life of requests (the convertors'
// contract) and this module's own buffers.
unsafe impl Send for PortalsMtl {}

/// Short sends' copies, in the slots of a slab: a kept message names its copy by slot, and a
/// confirmed one's slot comes back to the free list with its buffer (up to `SPARE_BUFS` spare
/// buffers of at most an eager message's size, `CONFIRM_BYTES` in all, keep their memory), so a
/// stream of small messages allocates nothing.
#[derive(Default)]
struct Copies {
    slots: Vec<Vec<u8>>,
    /// Free slots without memory.
    free: Vec<u32>,
    /// Free slots whose buffer kept its memory, the last freed last (taken first); the oldest
    /// give theirs up when a newly freed one needs the room.
    spares: Vec<u32>,
    /// The spares' capacities summed.
    spare_bytes: usize,
}

impl Copies {
    /// No copy (a zero-byte message).
    const NONE: u32 = u32::MAX;

    /// A free slot (a new one when none is), its buffer empty; the slot's index.
    #[inline(always)]
    fn take(&mut self) -> (u32, &mut Vec<u8>) {
        let i = match self.spares.pop() {
            Some(i) => {
                self.spare_bytes -= self.slots[i as usize].capacity();
                i
            }
            None => match self.free.pop() {
                Some(i) => i,
                None => {
                    self.slots.push(Vec::new());
                    (self.slots.len() - 1) as u32
                }
            },
        };
        (i, &mut self.slots[i as usize])
    }

    /// A slot holding a copy of `data`.
    #[inline(always)]
    fn put_bytes(&mut self, data: &[u8]) -> u32 {
        let (i, b) = self.take();
        b.extend_from_slice(data);
        i
    }

    /// A slot holding `len` bytes that `fill` writes (it returns how many it wrote; the copy is
    /// that long).
    #[inline(always)]
    fn put(&mut self, len: usize, fill: impl FnOnce(&mut [u8]) -> usize) -> u32 {
        let (i, b) = self.take();
        b.resize(len, 0);
        let n = fill(b);
        b.truncate(n);
        i
    }

    /// The bytes in slot `i` (none for [`Copies::NONE`]).
    #[inline(always)]
    fn get(&self, i: u32) -> &[u8] {
        self.slots.get(i as usize).map_or(&[], |b| b.as_slice())
    }

    /// Frees slot `i` (nothing for [`Copies::NONE`]), keeping its buffer's memory for the next
    /// copy if it is worth keeping; the oldest spares give up theirs to make room. (Keeping the
    /// old ones instead starved a change of size: after a run of 4 KiB copies had filled
    /// `CONFIRM_BYTES`, every 8 KiB copy was a fresh allocation whose release trimmed the heap,
    /// two `brk` calls per message, and `bench-lwk.sh`'s 8 KiB offload latency 0.95 -> 1.6 us.)
    #[inline(always)]
    fn release(&mut self, eager: usize, i: u32) {
        let Some(b) = self.slots.get_mut(i as usize) else {
            return;
        };
        let cap = b.capacity();
        if cap > 0
            && cap <= eager.max(64)
            && self.spares.len() < SPARE_BUFS
            && self.spare_bytes + cap <= CONFIRM_BYTES
        {
            b.clear();
            self.spares.push(i);
            self.spare_bytes += cap;
        } else {
            self.release_making_room(eager, i, cap);
        }
    }

    /// [`Copies::release`] of a buffer without memory, too large to keep, or one the spares
    /// have no room for (until the oldest give theirs up).
    #[cold]
    #[inline(never)]
    fn release_making_room(&mut self, eager: usize, i: u32, cap: usize) {
        if cap == 0 || cap > eager.clamp(64, CONFIRM_BYTES) {
            self.slots[i as usize] = Vec::new();
            self.free.push(i);
            return;
        }
        // The oldest spares give up their memory until this one fits (it does once all have:
        // it is at most `CONFIRM_BYTES`).
        let mut n = 0;
        while n < self.spares.len()
            && (self.spares.len() - n >= SPARE_BUFS || self.spare_bytes + cap > CONFIRM_BYTES)
        {
            self.spare_bytes -= self.slots[self.spares[n] as usize].capacity();
            n += 1;
        }
        for old in self.spares.drain(..n) {
            self.slots[old as usize] = Vec::new();
            self.free.push(old);
        }
        self.slots[i as usize].clear();
        self.spares.push(i);
        self.spare_bytes += cap;
    }
}

fn ptl_fail(what: &'static str, e: ptl::PtlError) -> Error {
    crate::platform::eprint_line(&format!("stormpi: Portals MTL: {e}"));
    Error::new(ErrorClass::Intern, Reason::Runtime { what })
}

impl PortalsMtl {
    /// Sets up the MTL's portal table entries, overflow blocks and event queues on `ni`.
    pub fn new(params: &Params, ni: ptl_handle_ni_t, rank: u32, size: u32) -> Result<PortalsMtl> {
        let eager = params.usize(&EAGER_LIMIT);
        let block_bytes = params.usize(&BLOCK_BYTES).max(2 * eager + 1024);
        let eq_len = params.u32(&EQ_LEN) as u64;
        let e = |e| ptl_fail("Portals MTL set-up", e);
        let mut m = PortalsMtl {
            attrs: MtlAttrs {
                component: "portals4",
                max_contexts: MatchBits::MAX_CONTEXTS,
                max_ranks: MatchBits::MAX_RANKS,
            },
            ni,
            rank,
            size,
            md: PTL_INVALID_HANDLE,
            eqs: [PTL_EQ_NONE; 3],
            eager,
            ops: Vec::new(),
            free_ops: Vec::new(),
            blocking: None,
            stash: ptl_event_t::default(),
            stashed: false,
            pending: None,
            kept: 0,
            blocks: Vec::new(),
            spare: Vec::new(),
            linked: 0,
            want_linked: params.usize(&BLOCKS),
            max_blocks: params.usize(&MAX_BLOCKS).max(params.usize(&BLOCKS)),
            block_bytes,
            peers: (0..size).map(|_| Peer::default()).collect(),
            recovery: None,
            epoch: 0,
            done: VecDeque::new(),
            searches: Vec::new(),
            next_search: 0,
            taken: Vec::new(),
            moved: VecDeque::new(),
            polls: 0,
            last_put: 0,
            getting: 0,
            confirming: 0,
            blocked: 0,
            long_sends: 0,
            eq_len,
            copies: Copies::default(),
            stats: MtlStats::default(),
        };
        // SAFETY: Portals calls with valid out-pointers; entries over memory this module owns.
        unsafe {
            for (i, len) in [eq_len, eq_len, (4 * size as u64 + 64).max(256)]
                .into_iter()
                .enumerate()
            {
                check(PtlEQAlloc(ni, len, &mut m.eqs[i]), "PtlEQAlloc (MTL)").map_err(e)?;
            }
            let mut idx = 0;
            check(
                PtlPTAlloc(ni, PTL_PT_FLOWCTRL, m.eqs[1], pt::MTL, &mut idx),
                "PtlPTAlloc (MTL, flow-controlled)",
            )
            .map_err(e)?;
            check(
                PtlPTAlloc(ni, 0, m.eqs[0], pt::MTL_READ, &mut idx),
                "PtlPTAlloc (MTL read)",
            )
            .map_err(e)?;
            check(
                PtlPTAlloc(ni, 0, m.eqs[2], pt::MTL_CTRL, &mut idx),
                "PtlPTAlloc (MTL control)",
            )
            .map_err(e)?;
            let ctrl = ptl_me_t {
                start: ptr::null_mut(),
                length: 0,
                ct_handle: PTL_CT_NONE,
                uid: PTL_UID_ANY,
                options: PTL_ME_OP_PUT | PTL_ME_EVENT_LINK_DISABLE,
                match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
                match_bits: 0,
                ignore_bits: !0,
                min_free: 0,
            };
            let mut h = PTL_INVALID_HANDLE;
            check(
                PtlMEAppend(
                    ni,
                    pt::MTL_CTRL,
                    &ctrl,
                    PTL_PRIORITY_LIST,
                    uptr(0, K_CTRL),
                    &mut h,
                ),
                "PtlMEAppend (MTL control)",
            )
            .map_err(e)?;
        }
        m.md = ptl::bind_all(ni, m.eqs[0], PTL_MD_EVENT_SEND_DISABLE).map_err(e)?;
        // The sink of confirmation puts (`CONTROL` set, which no receive matches), zero bytes,
        // no events, no unexpected header: first on the overflow list, ahead of the blocks, so
        // a data message, matched against the priority list, never looks at it.
        let sink = ptl_me_t {
            start: ptr::null_mut(),
            length: 0,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT
                | PTL_ME_EVENT_COMM_DISABLE
                | PTL_ME_EVENT_LINK_DISABLE
                | PTL_ME_UNEXPECTED_HDR_DISABLE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: MatchBits::CONTROL,
            ignore_bits: !MatchBits::CONTROL,
            min_free: 0,
        };
        let mut h = PTL_INVALID_HANDLE;
        // SAFETY: a zero-length entry.
        check(
            unsafe {
                PtlMEAppend(
                    ni,
                    pt::MTL,
                    &sink,
                    PTL_OVERFLOW_LIST,
                    ptr::null_mut(),
                    &mut h,
                )
            },
            "PtlMEAppend (MTL confirmation sink)",
        )
        .map_err(e)?;
        for _ in 0..m.want_linked {
            m.add_block().map_err(e)?;
        }
        Ok(m)
    }

    /// Posts a spare block, or a new one while under the limit; false if neither.
    fn add_block(&mut self) -> std::result::Result<bool, ptl::PtlError> {
        let b = match self.spare.pop() {
            Some(b) => b,
            None if self.blocks.len() < self.max_blocks => {
                self.blocks.push(Block {
                    mem: vec![0u8; self.block_bytes].into_boxed_slice(),
                    me: PTL_INVALID_HANDLE,
                });
                self.blocks.len() - 1
            }
            None => return Ok(false),
        };
        let blk = &mut self.blocks[b];
        let me = ptl_me_t {
            start: blk.mem.as_mut_ptr().cast(),
            length: blk.mem.len() as u64,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT
                | PTL_ME_MANAGE_LOCAL
                | PTL_ME_NO_TRUNCATE
                | PTL_ME_EVENT_LINK_DISABLE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: 0,
            ignore_bits: !0,
            min_free: self.eager as u64 + 64,
        };
        // SAFETY: the block lives as long as the module and is posted only when free.
        check(
            unsafe {
                PtlMEAppend(
                    self.ni,
                    pt::MTL,
                    &me,
                    PTL_OVERFLOW_LIST,
                    uptr(b, K_BLOCK),
                    &mut blk.me,
                )
            },
            "PtlMEAppend (MTL overflow block)",
        )?;
        self.linked += 1;
        Ok(true)
    }

    fn new_op(&mut self, op: Op) -> usize {
        if let Op::Send(_) = &op {
            self.long_sends += 1;
        }
        match self.free_ops.pop() {
            Some(i) => {
                self.ops[i] = Some(op);
                i
            }
            None => {
                self.ops.push(Some(op));
                self.ops.len() - 1
            }
        }
    }

    fn free_op(&mut self, id: usize) -> Option<Op> {
        let op = self.ops.get_mut(id)?.take()?;
        self.free_ops.push(id);
        if let Op::Send(_) = &op {
            self.long_sends -= 1;
        }
        Some(op)
    }

    fn send_op(&mut self, id: usize) -> Option<&mut SendOp> {
        match self.ops.get_mut(id)? {
            Some(Op::Send(s)) => Some(s),
            _ => None,
        }
    }

    fn recv_op(&mut self, id: usize) -> Option<&mut RecvOp> {
        if id == BLOCKING_OP {
            return self.blocking.as_mut();
        }
        match self.ops.get_mut(id)? {
            Some(Op::Recv(r)) => Some(r),
            _ => None,
        }
    }

    /// Receive `id`, read only.
    #[inline(always)]
    fn recv_ref(&self, id: usize) -> Option<&RecvOp> {
        if id == BLOCKING_OP {
            return self.blocking.as_ref();
        }
        match self.ops.get(id)? {
            Some(Op::Recv(r)) => Some(r),
            _ => None,
        }
    }

    /// Forgets finished (or never posted) receive `id`.
    #[inline(always)]
    fn free_recv(&mut self, id: usize) {
        if id == BLOCKING_OP {
            self.blocking = None;
        } else if let Some(slot) = self.ops.get_mut(id) {
            *slot = None;
            self.free_ops.push(id);
        }
    }

    /// A control message: `kind` << 56 | (`epoch` mod 2^24) << 32 | `count`.
    fn ctrl(&mut self, to: u32, kind: u64, epoch: u64, count: u32) {
        // SAFETY: a zero-length put.
        unsafe {
            PtlPut(
                self.md,
                0,
                0,
                PTL_NO_ACK_REQ,
                ptl_process_t::from_rank(to),
                pt::MTL_CTRL,
                0,
                0,
                ptr::null_mut(),
                (kind << 56) | ((epoch & 0xff_ffff) << 32) | count as u64,
            )
        };
    }

    /// Asks peer `dest` to acknowledge a zero-byte put on the matching entry: accepted, it proves
    /// every earlier put to the peer accepted (a disabled entry refuses everything until the
    /// sender has drained), so their copies can go.
    #[inline(never)]
    fn confirm(&mut self, dest: u32) {
        let p = &mut self.peers[dest as usize];
        // Not while the peer recovers: sent after our DRAINED, it could be accepted after the
        // peer re-enables and seem to vouch for puts that were refused.
        if p.confirm_pending || p.blocked || p.unconfirmed.is_empty() {
            return;
        }
        p.confirm_pending = true;
        p.confirm_upto = p.sent;
        p.confirm_gen = p.gen;
        p.since_confirm = 0;
        p.since_confirm_bytes = 0;
        self.confirming += 1;
        self.stats.confirms += 1;
        // SAFETY: a zero-length put.
        unsafe {
            PtlPut(
                self.md,
                0,
                0,
                PTL_ACK_REQ,
                ptl_process_t::from_rank(dest),
                pt::MTL,
                MatchBits::CONTROL,
                0,
                uptr(dest as usize, K_CONFIRM),
                0,
            )
        };
    }

    /// The first `k` unconfirmed puts to `dest` were accepted: short sends are done (their
    /// copies' slots are freed); long ones finish with the receiver's get.
    fn accepted(&mut self, dest: usize, k: usize) {
        let q = &mut self.peers[dest].unconfirmed;
        let k = k.min(q.len());
        // This runs for every message, in batches: one pass over the entries as two slices,
        // then the front moves past them (they are plain data: nothing to drop).
        let (a, b) = q.as_slices();
        let (a, b) = if k <= a.len() {
            (&a[..k], &b[..0])
        } else {
            (a, &b[..k - a.len()])
        };
        let (copies, eager) = (&mut self.copies, self.eager);
        let mut shorts = 0;
        let mut done = |part: &[Kept]| {
            for e in part {
                if let Kept::Bytes { copy, .. } = *e {
                    shorts += 1;
                    if copy != Copies::NONE {
                        copies.release(eager, copy);
                    }
                }
            }
        };
        done(a);
        done(b);
        q.drain(..k);
        self.kept -= shorts;
    }

    /// Starts long send `id`, or holds it behind earlier sends to a blocked peer.
    fn start(&mut self, id: usize) -> Result<()> {
        // Long sends end with an event on the send queue: never let them outgrow it.
        if self.long_sends as u64 > self.eq_len / 2 {
            self.drain_eq(0, false);
        }
        let dest = match self.send_op(id) {
            Some(s) => s.dest as usize,
            None => return Ok(()),
        };
        let p = &mut self.peers[dest];
        if p.blocked || !p.queued.is_empty() {
            p.queued.push_back(Kept::Op(id as u32));
            return Ok(());
        }
        self.put(id)
    }

    /// Puts long send `id`'s first part, exposing the whole message for the receiver's get.
    fn put(&mut self, id: usize) -> Result<()> {
        let ni = self.ni;
        let Some(s) = self.send_op(id) else {
            return Err(Error::internal("a long send to put has no op"));
        };
        if !s.read_me {
            let me = ptl_me_t {
                start: s.data as *mut _,
                length: s.hdr & LEN_MASK,
                ct_handle: PTL_CT_NONE,
                uid: PTL_UID_ANY,
                options: PTL_ME_OP_GET
                    | PTL_ME_USE_ONCE
                    | PTL_ME_EVENT_LINK_DISABLE
                    | PTL_ME_EVENT_UNLINK_DISABLE,
                match_id: ptl_process_t::from_rank(s.dest),
                match_bits: id as u64,
                ignore_bits: 0,
                min_free: 0,
            };
            let mut h = PTL_INVALID_HANDLE;
            // SAFETY: the data stays valid until the get completes the send (the convertor's
            // contract, or the bounce buffer the op owns).
            check(
                unsafe {
                    PtlMEAppend(
                        ni,
                        pt::MTL_READ,
                        &me,
                        PTL_PRIORITY_LIST,
                        uptr(id, K_READ),
                        &mut h,
                    )
                },
                "PtlMEAppend (MTL read)",
            )
            .map_err(|e| ptl_fail("Portals MTL send", e))?;
            s.read_me = true;
        }
        let (dest, data, len, bits, hdr) = (s.dest, s.data, s.put_len, s.bits, s.hdr);
        // SAFETY: the op keeps the bytes until the receiver's get.
        unsafe { self.put_raw(dest, data, len, bits, hdr) }?;
        self.sent(dest, Kept::Op(id as u32), 0);
        Ok(())
    }

    /// One put on the matching entry, no acknowledgment: the sender keeps what it put until a
    /// confirmation (or the receiver's get, or a recovery's count) says it was accepted.
    ///
    /// # Safety
    /// `data..data + len` stays valid until then.
    #[inline(always)]
    unsafe fn put_raw(
        &mut self,
        dest: u32,
        data: *const u8,
        len: usize,
        bits: u64,
        hdr: u64,
    ) -> Result<()> {
        // SAFETY: the caller's promise.
        let rc = unsafe {
            PtlPut(
                self.md,
                ptl::offset_of(data, len),
                len as u64,
                PTL_NO_ACK_REQ,
                ptl_process_t::from_rank(dest),
                pt::MTL,
                bits,
                0,
                ptr::null_mut(),
                hdr,
            )
        };
        if rc != PTL_OK {
            return Err(ptl_fail(
                "Portals MTL send",
                ptl::PtlError {
                    what: "PtlPut (MTL)",
                    rc,
                },
            ));
        }
        self.stats.puts += 1;
        self.last_put = self.polls;
        Ok(())
    }

    /// Records a put to `dest` as unconfirmed (`copied` bytes of copies kept for it); asks for a
    /// confirmation every `CONFIRM_EVERY` puts or `CONFIRM_BYTES` bytes of copies.
    #[inline(always)]
    fn sent(&mut self, dest: u32, k: Kept, copied: usize) {
        let p = &mut self.peers[dest as usize];
        p.since_confirm_bytes += copied;
        p.unconfirmed.push_back(k);
        p.sent = p.sent.wrapping_add(1);
        p.since_confirm += 1;
        if p.since_confirm >= CONFIRM_EVERY || p.since_confirm_bytes >= CONFIRM_BYTES {
            self.confirm(dest);
        }
    }

    /// Puts a kept message (again, after a recovery). A short one whose put failed is dropped
    /// (it is complete for MPI, nobody waits for it).
    #[inline]
    fn put_kept(&mut self, dest: u32, k: Kept) -> Result<()> {
        match k {
            Kept::Op(id) => self.put(id as usize),
            Kept::Bytes { bits, copy } => {
                let data = self.copies.get(copy);
                let (at, len) = (data.as_ptr(), data.len());
                // SAFETY: the copy stays in its slot until the put is confirmed.
                match unsafe { self.put_raw(dest, at, len, bits, len as u64) } {
                    Ok(()) => {
                        self.sent(dest, k, len);
                        Ok(())
                    }
                    Err(e) => {
                        self.kept -= 1;
                        self.copies.release(self.eager, copy);
                        Err(e)
                    }
                }
            }
        }
    }

    /// A short send: copy and put; done for MPI.
    fn send_copy(
        &mut self,
        types: &TypeTable,
        dest: ProcId,
        env: MtlEnvelope,
        conv: &mut Packer,
    ) -> Result<()> {
        let len = conv.packed_len();
        let copy = if len == 0 {
            Copies::NONE
        } else {
            self.copies.put(len, |b| conv.pack(types, 0, b))
        };
        self.send_kept(dest.0, MatchBits::encode(&env), copy)
    }

    /// A short send of the copy in slot `copy` (kept until the put is accepted), complete for
    /// MPI.
    #[inline]
    fn send_kept(&mut self, dest: u32, bits: u64, copy: u32) -> Result<()> {
        self.kept += 1;
        let p = &mut self.peers[dest as usize];
        if p.blocked || !p.queued.is_empty() {
            p.queued.push_back(Kept::Bytes { bits, copy });
            return Ok(());
        }
        self.put_kept(dest, Kept::Bytes { bits, copy })
    }

    fn finish_send(&mut self, id: usize) {
        if let Some(Op::Send(s)) = self.free_op(id) {
            self.done.push_back(Done::Send(s.token, Ok(())));
        }
    }

    /// A receive matched a message with match bits `bits` and `hdr_data` `hdr` from `from`;
    /// `got` bytes are in its buffer; `rlength` is what the put carried.
    fn matched(&mut self, id: usize, bits: u64, hdr: u64, rlength: u64, from: u32, got: usize) {
        let (md, ni) = (self.md, self.ni);
        let Some(r) = self.recv_op(id) else { return };
        let env = MatchBits::decode(bits);
        r.me = PTL_INVALID_HANDLE;
        r.got = got;
        r.m = MtlMatch {
            src: env.src,
            tag: env.tag,
            len: if bits & MatchBits::LONG != 0 {
                hdr & LEN_MASK
            } else {
                rlength
            },
        };
        if bits & MatchBits::LONG == 0 {
            self.done.push_back(Done::Recv(id));
            return;
        }
        let want = (r.m.len as usize).min(r.cap);
        let key = hdr >> LEN_BITS;
        let (at, len) = (r.buf.wrapping_add(got), want.saturating_sub(got));
        let done_now = len == 0;
        if !done_now {
            r.state = RecvState::Getting;
            self.getting += 1;
        }
        let _ = ni;
        // The get fetches the rest, or (zero bytes) tells the sender it may finish.
        // SAFETY: `at..at+len` is inside the receive buffer, which the op keeps.
        let rc = unsafe {
            PtlGet(
                md,
                ptl::offset_of(at, len),
                len as u64,
                ptl_process_t::from_rank(from),
                pt::MTL_READ,
                key,
                got as u64,
                uptr(if done_now { NO_OP } else { id }, K_GET),
            )
        };
        self.stats.gets += 1;
        if rc != PTL_OK {
            crate::platform::eprint_line(&format!(
                "stormpi: Portals MTL: PtlGet: {}",
                ptl_rc_name(rc)
            ));
        }
        if done_now {
            self.done.push_back(Done::Recv(id));
        }
    }

    #[inline(never)]
    fn on_event(&mut self, ev: &ptl_event_t) {
        let (id, kind) = split(ev.user_ptr);
        // The common event first: a receive's message arrived (short ones are complete).
        if ev.type_ == PTL_EVENT_PUT && kind == K_RECV {
            let from = ev.initiator.rank();
            if let Some(p) = self.peers.get_mut(from as usize) {
                p.accepted = p.accepted.wrapping_add(1);
            }
            if ev.match_bits & MatchBits::LONG == 0 {
                if let Some(r) = self.recv_op(id) {
                    let env = MatchBits::decode(ev.match_bits);
                    r.me = PTL_INVALID_HANDLE;
                    r.got = ev.mlength as usize;
                    r.m = MtlMatch {
                        src: env.src,
                        tag: env.tag,
                        len: ev.rlength,
                    };
                    self.done.push_back(Done::Recv(id));
                }
                return;
            }
            return self.matched(
                id,
                ev.match_bits,
                ev.hdr_data,
                ev.rlength,
                from,
                ev.mlength as usize,
            );
        }
        match (ev.type_, kind) {
            (PTL_EVENT_ACK, K_CONFIRM) => {
                let dest = id;
                let Some(p) = self.peers.get_mut(dest) else {
                    return;
                };
                if !p.confirm_pending {
                    return;
                }
                p.confirm_pending = false;
                self.confirming -= 1;
                if ev.ni_fail_type != PTL_NI_OK || p.confirm_gen != p.gen {
                    // Refused (a recovery will say what was accepted) or from before one.
                    return;
                }
                let k = p.confirm_upto.wrapping_sub(p.first()) as usize;
                self.accepted(dest, k);
            }
            (PTL_EVENT_GET, K_READ) => {
                // The receiver matched it: it and everything sent to that receiver before it
                // were accepted.
                let Some(dest) = self.send_op(id).map(|s| s.dest as usize) else {
                    return;
                };
                if let Some(k) = self.peers[dest]
                    .unconfirmed
                    .iter()
                    .position(|o| *o == Kept::Op(id as u32))
                {
                    self.accepted(dest, k + 1);
                }
                self.finish_send(id);
            }
            (PTL_EVENT_REPLY, K_GET) if id != NO_OP => {
                if let Some(r) = self.recv_op(id) {
                    r.got += ev.mlength as usize;
                    self.getting -= 1;
                    self.done.push_back(Done::Recv(id));
                }
            }
            (PTL_EVENT_PUT, K_BLOCK) => {
                // An unexpected message accepted into the overflow list.
                let from = ev.initiator.rank() as usize;
                if let Some(p) = self.peers.get_mut(from) {
                    p.accepted = p.accepted.wrapping_add(1);
                }
            }
            (PTL_EVENT_PUT_OVERFLOW, K_RECV) => {
                self.stats.unexpected += 1;
                let Some(r) = self.recv_op(id) else { return };
                r.me = PTL_INVALID_HANDLE;
                let n = (ev.mlength as usize).min(r.cap);
                // SAFETY: the NI says `mlength` bytes of the message are at `start` (in an
                // overflow block not reused before this event is handled); the buffer holds `cap`.
                unsafe { ptr::copy_nonoverlapping(ev.start as *const u8, r.buf, n) };
                self.matched(
                    id,
                    ev.match_bits,
                    ev.hdr_data,
                    ev.rlength,
                    ev.initiator.rank(),
                    n,
                );
            }
            (PTL_EVENT_AUTO_UNLINK, K_BLOCK) => {
                self.linked -= 1;
                if self.linked < self.want_linked {
                    let _ = self.add_block();
                }
            }
            (PTL_EVENT_AUTO_FREE, K_BLOCK) => {
                self.spare.push(id);
                if self.linked < self.want_linked {
                    let _ = self.add_block();
                }
            }
            (PTL_EVENT_PT_DISABLED, _) => self.disabled(),
            // A deleting search reports what it takes as an overflow event (4.1, PtlMESearch),
            // a search that takes nothing or only looks as a search event.
            (PTL_EVENT_SEARCH | PTL_EVENT_PUT_OVERFLOW, K_SEARCH) => {
                let data = (ev.ni_fail_type == PTL_NI_OK && !ev.start.is_null()).then(|| {
                    // SAFETY: a deleting search's bytes, valid until the next call into the NI.
                    unsafe {
                        std::slice::from_raw_parts(ev.start as *const u8, ev.mlength as usize)
                    }
                    .to_vec()
                });
                self.searches.push((id, *ev, data));
            }
            (PTL_EVENT_PUT, K_CTRL) => {
                let from = ev.initiator.rank();
                let h = ev.hdr_data;
                self.on_ctrl(from, h >> 56, (h >> 32) & 0xff_ffff, h as u32);
            }
            _ => {}
        }
    }

    /// This process's portal was disabled: move the unexpected messages out of the overflow
    /// blocks (so the blocks come back), post more room, ask everyone to drain.
    fn disabled(&mut self) {
        if self.recovery.is_some() {
            return;
        }
        self.stats.recoveries += 1;
        self.epoch += 1;
        crate::node_log!(
            Debug,
            "rank {=u32}: portal disabled, flow-control recovery {=u64}",
            self.rank,
            self.epoch
        );
        self.recovery = Some(Recovery {
            epoch: self.epoch,
            drained: vec![false; self.size as usize],
            left: self.size,
        });
        // Every unexpected message, oldest first: a deleting search matching anything.
        let all = ptl_me_t {
            start: ptr::null_mut(),
            length: 0,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT | PTL_ME_USE_ONCE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: 0,
            ignore_bits: !0,
            min_free: 0,
        };
        while let Ok(Some((ev, data))) = self.search_me(&all, PTL_SEARCH_DELETE) {
            self.moved.push_back(Taken {
                bits: ev.match_bits,
                hdr: ev.hdr_data,
                rlength: ev.rlength,
                from: ev.initiator.rank(),
                data: data.unwrap_or_default(),
            });
        }
        // More overflow room: the usual cause is unexpected messages filling it.
        for _ in 0..2 {
            if !matches!(self.add_block(), Ok(true)) {
                break;
            }
        }
        for p in 0..self.size {
            self.ctrl(p, CTRL_DISABLED, self.epoch, 0);
        }
    }

    fn on_ctrl(&mut self, from: u32, kind: u64, epoch: u64, count: u32) {
        if from >= self.size {
            return;
        }
        match kind {
            CTRL_DISABLED => {
                // Hold further sends; everything sent so far reaches the peer before this answer
                // (messages between a pair stay in order), so the peer can count what it took.
                let p = &mut self.peers[from as usize];
                if !p.blocked {
                    p.blocked = true;
                    self.blocked += 1;
                }
                self.ctrl(from, CTRL_DRAINED, epoch, 0);
            }
            CTRL_DRAINED => {
                let Some(r) = self.recovery.as_mut() else {
                    return;
                };
                if r.epoch & 0xff_ffff != epoch || r.drained[from as usize] {
                    return;
                }
                r.drained[from as usize] = true;
                r.left -= 1;
                if r.left == 0 {
                    self.recovery = None;
                    // Count every accepted message: their events are queued by now.
                    self.drain_eq(1, false);
                    // SAFETY: our own portal table entry.
                    unsafe { PtlPTEnable(self.ni, pt::MTL) };
                    for q in 0..self.size {
                        let n = self.peers[q as usize].accepted;
                        self.ctrl(q, CTRL_ENABLED, epoch, n);
                    }
                }
            }
            CTRL_ENABLED => {
                // The peer took the first `count` of our puts to it: the rest were refused.
                let dest = from as usize;
                let k = count.wrapping_sub(self.peers[dest].first()) as usize;
                self.accepted(dest, k);
                let p = &mut self.peers[dest];
                p.gen = p.gen.wrapping_add(1);
                p.sent = count;
                p.since_confirm = 0;
                p.since_confirm_bytes = 0;
                if p.blocked {
                    p.blocked = false;
                    self.blocked -= 1;
                }
                let mut again: VecDeque<Kept> = p.unconfirmed.drain(..).collect();
                self.stats.refused += again.len() as u64;
                again.append(&mut p.queued);
                for k in again {
                    if self.peers[dest].blocked {
                        // Disabled again meanwhile: keep the order.
                        self.peers[dest].queued.push_back(k);
                        continue;
                    }
                    let op = match k {
                        Kept::Op(id) => Some(id as usize),
                        Kept::Bytes { .. } => None,
                    };
                    if let (Err(e), Some(id)) = (self.put_kept(from, k), op) {
                        self.fail_send(id, e);
                    }
                }
            }
            _ => {}
        }
    }

    fn fail_send(&mut self, id: usize, e: Error) {
        if let Some(Op::Send(s)) = self.free_op(id) {
            self.done.push_back(Done::Send(s.token, Err(e)));
        }
    }

    /// Handles the events of queue `q` (0 send, 1 receive, 2 control); returns how many. With
    /// `quick`, stops at the first event that completes an operation: its request goes back to
    /// the waiter one interface call sooner, and the rest waits for the next poll.
    #[inline(always)]
    fn drain_eq(&mut self, q: usize, quick: bool) -> usize {
        let mut n = 0;
        let eq = self.eqs[q];
        loop {
            let mut ev = std::mem::MaybeUninit::<ptl_event_t>::uninit();
            // SAFETY: a valid event queue and out-pointer.
            match unsafe { PtlEQGet(eq, ev.as_mut_ptr()) } {
                PTL_OK | PTL_EQ_DROPPED => {
                    n += 1;
                    // SAFETY: an event was written.
                    self.on_event(unsafe { ev.assume_init_ref() });
                    if quick && !self.done.is_empty() {
                        return n;
                    }
                }
                _ => return n,
            }
        }
    }

    /// Handles queued events; returns how many. Every call into the interface moves its traffic,
    /// so one queue read per call is the fast path: the receive queue always, the send queue
    /// while something there completes a request (long sends, gets, confirmations), the control
    /// queue every so often and while flow control is at work. Now and then, peers with
    /// unconfirmed puts and no confirmation under way get one (the tail of a burst).
    #[inline(always)]
    fn poll(&mut self) -> usize {
        self.polls = self.polls.wrapping_add(1);
        let n = self.drain_eq(1, true);
        if self.rare_due() {
            return n + self.poll_rest();
        }
        n
    }

    /// [`PortalsMtl::poll`] for [`Mtl::progress`], which has the sink: the receive queue's
    /// events (a waiter's round: the next one; else up to [`PROGRESS_EVENTS`]), each short
    /// message for a posted receive reported at once from the receive's slot, with no stop in
    /// the completion queue — or, when it completes the receive `want` with its bytes in place,
    /// returned instead ([`Mtl::progress_waiting`]).
    #[inline(always)]
    fn poll_to(
        &mut self,
        types: &TypeTable,
        sink: &mut dyn MtlSink,
        want: Option<Token>,
        placed: &mut Option<MtlPlaced>,
    ) -> usize {
        self.polls = self.polls.wrapping_add(1);
        let mut ev = std::mem::MaybeUninit::<ptl_event_t>::uninit();
        let mut n = 0;
        // A waiter takes one event per round (its own comes back one interface call sooner);
        // plain progress takes what the queue holds, up to a window's worth: an
        // `MPI_Waitall` over a window of receives then finds the rest finished, instead of a
        // wait of its own per request.
        let most = if want.is_some() { 1 } else { PROGRESS_EVENTS };
        for _ in 0..most {
            // SAFETY: a valid event queue and out-pointer.
            let (PTL_OK | PTL_EQ_DROPPED) = (unsafe { PtlEQGet(self.eqs[1], ev.as_mut_ptr()) })
            else {
                break;
            };
            // SAFETY: an event was written.
            let ev = unsafe { ev.assume_init_ref() };
            n += 1;
            if want != Some(BLOCKING) || !self.blocking_arrived(ev, placed) {
                n += self.recv_queue_event(types, sink, want, placed, ev);
            }
            // Flow control at work: its own queues come first.
            if self.recovery.is_some() || self.blocked > 0 {
                break;
            }
        }
        if self.rare_due() {
            n += self.poll_rest();
        }
        n
    }

    /// The event every blocking `MPI_Recv` of a short message waits for, taken in the waiter's
    /// round: the message landed in the blocking receive's memory (no bounce buffer), so the
    /// receive is finished with `placed` and forgotten. False, having done nothing, for any other
    /// event.
    #[inline(always)]
    fn blocking_arrived(&mut self, ev: &ptl_event_t, placed: &mut Option<MtlPlaced>) -> bool {
        let Some((_, got)) = self.blocking_short(ev, PTL_EVENT_PUT) else {
            return false;
        };
        if let Some(p) = self.peers.get_mut(ev.initiator.rank() as usize) {
            p.accepted = p.accepted.wrapping_add(1);
        }
        self.blocking_placed(ev, got, placed);
        true
    }

    /// [`PortalsMtl::blocking_arrived`] for a short message that had come before the blocking
    /// receive (its overflow block counted it in when it came): copied from there, in the
    /// sink's round (kept out of the quick look, whose registers the arrival a ping-pong waits
    /// for needs).
    #[inline(never)]
    fn blocking_overflowed(&mut self, ev: &ptl_event_t, placed: &mut Option<MtlPlaced>) -> bool {
        let Some((buf, got)) = self.blocking_short(ev, PTL_EVENT_PUT_OVERFLOW) else {
            return false;
        };
        // SAFETY: the NI says `mlength` bytes of the message are at `start`, in an overflow
        // block not reused before this event is handled; the receive's memory holds `got`.
        unsafe { ptr::copy_nonoverlapping(ev.start as *const u8, buf, got) };
        self.stats.unexpected += 1;
        self.blocking_placed(ev, got, placed);
        true
    }

    /// When `ev` is an event of type `kind` of a short message for the blocking receive (one
    /// without a bounce buffer): where the receive's bytes go and how many of the message it
    /// takes. `None` for any other event.
    #[inline(always)]
    fn blocking_short(&self, ev: &ptl_event_t, kind: ptl_event_kind_t) -> Option<(*mut u8, usize)> {
        if ev.user_ptr != uptr(BLOCKING_OP, K_RECV)
            || ev.type_ != kind
            || ev.match_bits & MatchBits::LONG != 0
        {
            return None;
        }
        let r = self.blocking.as_ref().filter(|r| r.bounce.is_empty())?;
        Some((r.buf, (ev.mlength as usize).min(r.cap)))
    }

    /// Hands the blocking receive's arrival (`got` bytes in its memory) back and forgets it.
    #[inline(always)]
    fn blocking_placed(&mut self, ev: &ptl_event_t, got: usize, placed: &mut Option<MtlPlaced>) {
        let env = MatchBits::decode(ev.match_bits);
        *placed = Some(MtlPlaced {
            got,
            m: MtlMatch {
                src: env.src,
                tag: env.tag,
                len: ev.rlength,
            },
        });
        self.blocking = None;
    }

    /// Any other event of the receive queue (see [`PortalsMtl::poll_to`]); returns how many more
    /// events it handled.
    #[inline(never)]
    fn recv_queue_event(
        &mut self,
        types: &TypeTable,
        sink: &mut dyn MtlSink,
        want: Option<Token>,
        placed: &mut Option<MtlPlaced>,
        ev: &ptl_event_t,
    ) -> usize {
        let (id, kind) = split(ev.user_ptr);
        if ev.type_ == PTL_EVENT_PUT && kind == K_RECV && ev.match_bits & MatchBits::LONG == 0 {
            if let Some(p) = self.peers.get_mut(ev.initiator.rank() as usize) {
                p.accepted = p.accepted.wrapping_add(1);
            }
            if let Some(r) = self.recv_ref(id) {
                let got = (ev.mlength as usize).min(r.cap);
                let env = MatchBits::decode(ev.match_bits);
                let m = MtlMatch {
                    src: env.src,
                    tag: env.tag,
                    len: ev.rlength,
                };
                if r.bounce.is_empty() && want == Some(r.token) {
                    *placed = Some(MtlPlaced { got, m });
                } else {
                    let data = if r.bounce.is_empty() {
                        MtlData::Placed(got)
                    } else {
                        MtlData::Packed(&r.bounce[..got])
                    };
                    sink.recv_done(types, r.token, data, m, None);
                }
                self.free_recv(id);
            }
            return 0;
        }
        self.on_event(ev);
        if self.done.is_empty() {
            self.drain_eq(1, true)
        } else {
            0
        }
    }

    /// Reports the completions `poll` queued to `sink` — but returns the receive `want`'s, if
    /// it is among them with its bytes in place. Returns how many there were.
    #[inline(never)]
    fn report(
        &mut self,
        types: &TypeTable,
        sink: &mut dyn MtlSink,
        want: Option<Token>,
        placed: &mut Option<MtlPlaced>,
    ) -> usize {
        let mut n = 0;
        while let Some(d) = self.done.pop_front() {
            n += 1;
            match d {
                Done::Send(t, r) => sink.send_done(t, r),
                Done::Recv(id) => {
                    // Reported from its slot, then freed (not moved out first).
                    let Some(r) = self.recv_ref(id) else {
                        continue;
                    };
                    let got = r.got.min(r.cap);
                    if r.bounce.is_empty() && want == Some(r.token) {
                        *placed = Some(MtlPlaced { got, m: r.m });
                    } else {
                        let data = if r.bounce.is_empty() {
                            MtlData::Placed(got)
                        } else {
                            MtlData::Packed(&r.bounce[..got])
                        };
                        sink.recv_done(types, r.token, data, r.m, None);
                    }
                    self.free_recv(id);
                }
            }
        }
        n
    }

    /// Whether a poll has work beyond the receive queue ([`PortalsMtl::poll_rest`]): one test
    /// of a few words, so that a poll that has none returns at once.
    #[inline(always)]
    fn rare_due(&self) -> bool {
        (self.long_sends | self.getting | self.confirming | self.blocked) != 0
            || self.polls.is_multiple_of(CTRL_POLLS)
            || self.recovery.is_some()
    }

    /// The send and control queues' share of a poll.
    #[inline(never)]
    fn poll_rest(&mut self) -> usize {
        let mut n = 0;
        if self.long_sends | self.getting | self.confirming != 0 {
            n += self.drain_eq(0, false);
        }
        // Rare work behind one test: the control queue and the tail of a burst are looked at
        // every `CTRL_POLLS` polls (the control queue at every poll while flow control works).
        if self.polls.is_multiple_of(CTRL_POLLS) || self.recovery.is_some() || self.blocked > 0 {
            n += self.drain_eq(2, false);
            if self.kept > 0
                && self.polls.is_multiple_of(CTRL_POLLS)
                && self.polls.wrapping_sub(self.last_put) >= TAIL_POLLS
            {
                for p in 0..self.size {
                    self.confirm(p);
                }
            }
        }
        n
    }

    /// The first moved message `sel` accepts: its index in `moved`.
    fn find_moved(&self, sel: &MtlSelector) -> Option<usize> {
        let (bits, ignore) = MatchBits::selector(sel);
        self.moved
            .iter()
            .position(|t| MatchBits::matches(t.bits, bits, ignore))
    }

    fn search(
        &mut self,
        sel: &MtlSelector,
        op: ptl_search_op_t,
    ) -> Result<Option<(ptl_event_t, Option<Vec<u8>>)>> {
        let (bits, ignore) = MatchBits::selector(sel);
        let me = ptl_me_t {
            start: ptr::null_mut(),
            length: 0,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT | PTL_ME_USE_ONCE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: bits,
            ignore_bits: ignore,
            min_free: 0,
        };
        self.search_me(&me, op)
    }

    fn search_me(
        &mut self,
        me: &ptl_me_t,
        op: ptl_search_op_t,
    ) -> Result<Option<(ptl_event_t, Option<Vec<u8>>)>> {
        let id = self.next_search;
        self.next_search = (self.next_search + 1) % (1 << 40);
        // SAFETY: a search entry, copied by the call.
        check(
            unsafe { PtlMESearch(self.ni, pt::MTL, me, op, uptr(id, K_SEARCH)) },
            "PtlMESearch",
        )
        .map_err(|e| ptl_fail("Portals MTL probe", e))?;
        loop {
            self.poll();
            if let Some(i) = self.searches.iter().position(|s| s.0 == id) {
                let (_, ev, data) = self.searches.swap_remove(i);
                return Ok((ev.ni_fail_type == PTL_NI_OK).then_some((ev, data)));
            }
        }
    }

    /// Receives a message already taken off the interface into `conv`.
    fn receive_taken(&mut self, types: &TypeTable, t: Taken, conv: &Unpacker, token: Token) {
        let id = self.recv_op_new(types, conv, token);
        let Some(r) = self.recv_op(id) else { return };
        let n = t.data.len().min(r.cap);
        // SAFETY: the buffer holds `cap` bytes.
        unsafe { ptr::copy_nonoverlapping(t.data.as_ptr(), r.buf, n) };
        self.stats.unexpected += 1;
        self.matched(id, t.bits, t.hdr, t.rlength, t.from, n);
    }

    /// A new receive into `conv`'s memory (the blocking receive in its own slot); its id.
    #[inline(always)]
    fn recv_op_new(&mut self, types: &TypeTable, conv: &Unpacker, token: Token) -> usize {
        let _ = types;
        let cap = conv.capacity();
        let (buf, bounce) = match conv.dest_ref(0, cap) {
            Some(p) => (p, Vec::new()),
            None => {
                let mut b = vec![0u8; cap];
                (b.as_mut_ptr(), b)
            }
        };
        let r = RecvOp {
            token,
            buf,
            cap,
            bounce,
            me: PTL_INVALID_HANDLE,
            state: RecvState::Posted,
            got: 0,
            m: MtlMatch {
                src: 0,
                tag: 0,
                len: 0,
            },
        };
        if token == BLOCKING {
            self.blocking = Some(r);
            return BLOCKING_OP;
        }
        self.new_op(Op::Recv(r))
    }
}

fn taken_match(t: &Taken) -> MtlMatch {
    let env = MatchBits::decode(t.bits);
    MtlMatch {
        src: env.src,
        tag: env.tag,
        len: if t.bits & MatchBits::LONG != 0 {
            t.hdr & LEN_MASK
        } else {
            t.rlength
        },
    }
}

impl Mtl for PortalsMtl {
    fn attrs(&self) -> &MtlAttrs {
        &self.attrs
    }

    fn add_procs(&mut self, peers: &[PeerInfo]) -> Result<()> {
        if peers.len() != self.size as usize {
            return Err(Error::new(
                ErrorClass::Intern,
                Reason::Runtime {
                    what: "the job's size differs from the Portals interface's",
                },
            ));
        }
        let _ = self.rank;
        Ok(())
    }

    fn send_now(
        &mut self,
        types: &TypeTable,
        dest: ProcId,
        env: MtlEnvelope,
        conv: &Packer,
    ) -> Result<bool> {
        let len = conv.packed_len();
        if len > self.eager {
            return Ok(false);
        }
        // A packer is only read: contiguous data is copied straight from the user's buffer.
        let Some(d) = conv.data_ref(0, len) else {
            return Ok(false);
        };
        // SAFETY: the packer's loan of `len` bytes, valid for this call.
        let data = unsafe { std::slice::from_raw_parts(d.as_ptr(), len) };
        self.send_bytes_now(types, dest, env, data)
    }

    fn send_bytes_now(
        &mut self,
        types: &TypeTable,
        dest: ProcId,
        env: MtlEnvelope,
        data: &[u8],
    ) -> Result<bool> {
        let _ = types;
        let len = data.len();
        if len > self.eager {
            return Ok(false);
        }
        let (copy, at) = if len == 0 {
            (Copies::NONE, data.as_ptr())
        } else {
            let copy = self.copies.put_bytes(data);
            (copy, self.copies.get(copy).as_ptr())
        };
        // The common case in one piece (no helper layers: this is every small MPI_Send): the
        // peer looked up once, its record written after the put (`put_raw` and `sent` as one).
        let (dest, bits, md) = (dest.0, MatchBits::encode(&env), self.md);
        let k = Kept::Bytes { bits, copy };
        self.kept += 1;
        let p = &mut self.peers[dest as usize];
        if p.blocked || !p.queued.is_empty() {
            p.queued.push_back(k);
            return Ok(true);
        }
        // SAFETY: the copy stays in its slot until the put is confirmed (zero bytes: nothing
        // is read).
        let rc = unsafe {
            PtlPut(
                md,
                ptl::offset_of(at, len),
                len as u64,
                PTL_NO_ACK_REQ,
                ptl_process_t::from_rank(dest),
                pt::MTL,
                bits,
                0,
                ptr::null_mut(),
                len as u64,
            )
        };
        if rc != PTL_OK {
            self.kept -= 1;
            self.copies.release(self.eager, copy);
            return Err(ptl_fail(
                "Portals MTL send",
                ptl::PtlError {
                    what: "PtlPut (MTL)",
                    rc,
                },
            ));
        }
        p.since_confirm_bytes += len;
        p.unconfirmed.push_back(k);
        p.sent = p.sent.wrapping_add(1);
        p.since_confirm += 1;
        let due = p.since_confirm >= CONFIRM_EVERY || p.since_confirm_bytes >= CONFIRM_BYTES;
        self.stats.puts += 1;
        self.last_put = self.polls;
        if due {
            self.confirm(dest);
        }
        Ok(true)
    }

    fn isend(
        &mut self,
        types: &TypeTable,
        dest: ProcId,
        env: MtlEnvelope,
        mut conv: Packer,
        mode: SendMode,
        token: Token,
    ) -> Result<bool> {
        let len = conv.packed_len();
        if mode != SendMode::Synchronous && len <= self.eager {
            self.send_copy(types, dest, env, &mut conv)?;
            return Ok(true);
        }
        if len as u64 > LEN_MASK {
            return Err(Error::unsupported(
                "a message of 2^40 bytes or more over Portals",
            ));
        }
        let (data, buf) = match conv.data_ref(0, len) {
            Some(d) => (d.as_ptr(), Vec::new()),
            None => {
                let mut b = vec![0u8; len];
                let n = conv.pack(types, 0, &mut b);
                b.truncate(n);
                (b.as_ptr(), b)
            }
        };
        let op = SendOp {
            token,
            dest: dest.0,
            bits: MatchBits::encode(&env) | MatchBits::LONG,
            hdr: 0,
            data,
            put_len: len.min(self.eager),
            read_me: false,
            _buf: buf,
            _conv: Box::new(conv),
        };
        let id = self.new_op(Op::Send(op));
        if let Some(s) = self.send_op(id) {
            s.hdr = ((id as u64) << LEN_BITS) | len as u64;
        }
        if id as u64 >= 1 << (64 - LEN_BITS) {
            self.free_op(id);
            return Err(Error::exhausted(
                "Portals MTL operations",
                1 << (64 - LEN_BITS),
                "(the key bits of hdr_data)",
            ));
        }
        if let Err(e) = self.start(id) {
            self.free_op(id);
            return Err(e);
        }
        Ok(false)
    }

    fn irecv(
        &mut self,
        types: &TypeTable,
        sel: MtlSelector,
        conv: &Unpacker,
        token: Token,
    ) -> Result<()> {
        if !self.moved.is_empty() {
            if let Some(t) = self.find_moved(&sel).and_then(|i| self.moved.remove(i)) {
                self.receive_taken(types, t, conv, token);
                return Ok(());
            }
        }
        let id = self.recv_op_new(types, conv, token);
        let (bits, ignore) = MatchBits::selector(&sel);
        let ni = self.ni;
        let Some(r) = self.recv_ref(id) else {
            return Err(Error::new(
                ErrorClass::Intern,
                Reason::Runtime {
                    what: "Portals MTL: a receive just made is gone",
                },
            ));
        };
        let me = ptl_me_t {
            start: r.buf.cast(),
            length: r.cap as u64,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT
                | PTL_ME_USE_ONCE
                | PTL_ME_EVENT_LINK_DISABLE
                | PTL_ME_EVENT_UNLINK_DISABLE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: bits,
            ignore_bits: ignore,
            min_free: 0,
        };
        let mut h = PTL_INVALID_HANDLE;
        // SAFETY: the buffer stays valid until the receive completes (the convertor's contract,
        // or the op's bounce buffer).
        let rc = unsafe {
            PtlMEAppend(
                ni,
                pt::MTL,
                &me,
                PTL_PRIORITY_LIST,
                uptr(id, K_RECV),
                &mut h,
            )
        };
        if rc == PTL_NO_SPACE {
            // Posted receives are the NI's match entries: its limit, not the engine's pools.
            self.free_recv(id);
            return Err(Error::new(
                ErrorClass::NoMem,
                Reason::Runtime {
                    what: "the Portals NI's match list is full (its max_entries): post fewer \
                           receives at once, or use pml ob1, which matches in the engine",
                },
            ));
        }
        if rc != PTL_OK {
            self.free_recv(id);
            return Err(ptl_fail(
                "Portals MTL receive",
                ptl::PtlError {
                    what: "PtlMEAppend (receive)",
                    rc,
                },
            ));
        }
        // Events are handled only in `poll`: a match found by the append itself is still queued.
        if let Some(r) = self.recv_op(id) {
            r.me = h;
        }
        Ok(())
    }

    fn iprobe(&mut self, sel: MtlSelector) -> Result<Option<MtlMatch>> {
        if let Some(i) = self.find_moved(&sel) {
            return Ok(Some(taken_match(&self.moved[i])));
        }
        Ok(self.search(&sel, PTL_SEARCH_ONLY)?.map(|(ev, _)| {
            let env = MatchBits::decode(ev.match_bits);
            MtlMatch {
                src: env.src,
                tag: env.tag,
                len: if ev.match_bits & MatchBits::LONG != 0 {
                    ev.hdr_data & LEN_MASK
                } else {
                    ev.rlength
                },
            }
        }))
    }

    fn improbe(&mut self, sel: MtlSelector) -> Result<Option<(MtlMessage, MtlMatch)>> {
        let t = match self.find_moved(&sel).and_then(|i| self.moved.remove(i)) {
            Some(t) => t,
            None => {
                let Some((ev, data)) = self.search(&sel, PTL_SEARCH_DELETE)? else {
                    return Ok(None);
                };
                Taken {
                    bits: ev.match_bits,
                    hdr: ev.hdr_data,
                    rlength: ev.rlength,
                    from: ev.initiator.rank(),
                    data: data.unwrap_or_default(),
                }
            }
        };
        let m = taken_match(&t);
        let i = match self.taken.iter().position(Option::is_none) {
            Some(i) => {
                self.taken[i] = Some(t);
                i
            }
            None => {
                self.taken.push(Some(t));
                self.taken.len() - 1
            }
        };
        Ok(Some((MtlMessage(i as u64), m)))
    }

    fn imrecv(
        &mut self,
        types: &TypeTable,
        msg: MtlMessage,
        conv: &Unpacker,
        token: Token,
    ) -> Result<()> {
        let Some(t) = self.taken.get_mut(msg.0 as usize).and_then(Option::take) else {
            return Err(Error::new(
                ErrorClass::Request,
                Reason::BadArgument {
                    what: "message handle is not a matched message",
                },
            ));
        };
        self.receive_taken(types, t, conv, token);
        Ok(())
    }

    fn cancel(&mut self, token: Token) -> bool {
        let Some(id) = self.ops.iter().position(|o| {
            matches!(o, Some(Op::Recv(r)) if r.token == token && r.state == RecvState::Posted
                && r.me != PTL_INVALID_HANDLE)
        }) else {
            return false;
        };
        let Some(me) = self.recv_op(id).map(|r| r.me) else {
            return false;
        };
        // SAFETY: our own entry; it is linked until it matches.
        if unsafe { PtlMEUnlink(me) } != PTL_OK {
            return false;
        }
        self.free_op(id).is_some()
    }

    fn progress(&mut self, types: &TypeTable, sink: &mut dyn MtlSink) -> usize {
        let mut none = None;
        let n = self.poll_to(types, sink, None, &mut none);
        if self.done.is_empty() {
            return n;
        }
        n + self.report(types, sink, None, &mut none)
    }

    fn progress_waiting(
        &mut self,
        types: &TypeTable,
        sink: &mut dyn MtlSink,
        token: Token,
        placed: &mut Option<MtlPlaced>,
    ) -> usize {
        let n = match self.pending.take() {
            // `poll_waiting` polled in this round: the event it left, the rest of the round.
            Some(mut n) => {
                if std::mem::take(&mut self.stashed) {
                    let ev = self.stash;
                    n += 1;
                    if token != BLOCKING || !self.blocking_overflowed(&ev, placed) {
                        n += self.recv_queue_event(types, sink, Some(token), placed, &ev);
                    }
                    if self.rare_due() {
                        n += self.poll_rest();
                    }
                }
                n
            }
            None => self.poll_to(types, sink, Some(token), placed),
        };
        if self.done.is_empty() {
            return n;
        }
        n + self.report(types, sink, Some(token), placed)
    }

    fn poll_waiting(&mut self, placed: &mut Option<MtlPlaced>) -> Option<usize> {
        self.polls = self.polls.wrapping_add(1);
        // SAFETY: a valid event queue and out-pointer (a field: the event needs no room on
        // this call's stack).
        let rc = unsafe { PtlEQGet(self.eqs[1], &mut self.stash) };
        let mut n = 0;
        if let PTL_OK | PTL_EQ_DROPPED = rc {
            let ev = self.stash;
            if !self.blocking_arrived(&ev, placed) {
                // Anything else is the sink's: left for `progress_waiting`.
                self.stashed = true;
                self.pending = Some(0);
                return None;
            }
            n = 1;
        }
        if self.rare_due() {
            n += self.poll_rest();
        }
        if !self.done.is_empty() {
            // Completions to report: the sink's.
            self.pending = Some(n);
            return None;
        }
        Some(n)
    }

    fn busy(&self) -> bool {
        self.kept > 0 || self.long_sends > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;
    use stormpi_core::arena::{Arena, Sizer};
    use stormpi_core::pml::request::{Source, TagSel};

    /// Collects what the MTL reports.
    #[derive(Default)]
    struct Sink {
        recvs: Vec<(Token, usize, MtlMatch)>,
    }

    impl MtlSink for Sink {
        fn send_done(&mut self, _token: Token, _result: Result<()>) {}

        fn recv_done(
            &mut self,
            _types: &TypeTable,
            token: Token,
            data: MtlData<'_>,
            m: MtlMatch,
            error: Option<Error>,
        ) {
            assert!(error.is_none());
            let n = match data {
                MtlData::Placed(n) => n,
                MtlData::Packed(b) => b.len(),
            };
            self.recvs.push((token, n, m));
        }
    }

    /// Freed copies' slots come back for reuse, their buffers keeping memory up to `SPARE_BUFS`
    /// buffers and `CONFIRM_BYTES` of capacity; oversized ones lose it; a slot holds what was
    /// put in it until it is freed; zero-byte messages take no slot.
    #[test]
    fn lwk_mtl_copies_are_reused_and_bounded() {
        let eager = 4096;
        let mut c = Copies::default();
        let spare = |c: &Copies| {
            assert!(c.free.iter().all(|&i| c.slots[i as usize].capacity() == 0));
            c.spares
                .iter()
                .map(|&i| c.slots[i as usize].capacity())
                .sum::<usize>()
        };
        let slots: Vec<u32> = (0..SPARE_BUFS as u32 + 10)
            .map(|i| {
                c.put(4, |b| {
                    b.copy_from_slice(&i.to_le_bytes());
                    4
                })
            })
            .collect();
        for (i, &s) in slots.iter().enumerate() {
            assert_eq!(c.get(s), (i as u32).to_le_bytes());
        }
        for &s in &slots {
            c.release(eager, s);
        }
        assert_eq!(c.spares.len(), SPARE_BUFS);
        assert_eq!(c.spare_bytes, spare(&c));
        assert_eq!(c.free.len() + c.spares.len(), slots.len());
        // Reused: no new slot, and a short copy is as long as it was written.
        let s = c.put(8, |b| {
            b[..3].copy_from_slice(&[1, 2, 3]);
            3
        });
        assert!(slots.contains(&s));
        assert_eq!(c.get(s), [1, 2, 3]);
        assert_eq!(c.slots.len(), slots.len());
        assert_eq!(c.spare_bytes, spare(&c));
        c.release(eager, s);
        // Oversized: freed without its memory.
        let big = c.put(eager + 1, |_| eager + 1);
        c.release(eager, big);
        assert_eq!(c.slots[big as usize].capacity(), 0);
        assert!(c.get(Copies::NONE).is_empty());
        c.release(eager, Copies::NONE);
        // Eager-sized buffers: their bytes bound what is kept.
        let mut e = Copies::default();
        let all: Vec<u32> = (0..SPARE_BUFS).map(|_| e.put(eager, |_| eager)).collect();
        for &s in &all {
            e.release(eager, s);
        }
        assert!(e.spare_bytes <= CONFIRM_BYTES);
        assert_eq!(e.spares.len(), CONFIRM_BYTES / eager);
        assert_eq!(e.spare_bytes, spare(&e));
    }

    /// When copies grow (a run of small messages, then eager-sized ones), the newly freed
    /// buffers take the room of the oldest: the larger copies reuse memory at once instead of
    /// each allocating afresh.
    #[test]
    fn lwk_mtl_copies_follow_a_change_of_size() {
        let eager = 8192;
        let mut c = Copies::default();
        let small: Vec<u32> = (0..SPARE_BUFS).map(|_| c.put(4096, |_| 4096)).collect();
        for &s in &small {
            c.release(eager, s);
        }
        assert_eq!(c.spare_bytes, CONFIRM_BYTES);
        // Each round: one eager copy taken (a small spare grown) and freed again.
        for _ in 0..4 {
            let s = c.put(eager, |_| eager);
            c.release(eager, s);
        }
        let s = c.put(eager, |_| eager);
        assert!(c.slots[s as usize].capacity() >= eager);
        c.release(eager, s);
        // A burst of eager copies: the spares end up eager-sized, within the bound.
        let burst: Vec<u32> = (0..CONFIRM_BYTES / eager)
            .map(|_| c.put(eager, |_| eager))
            .collect();
        for &s in &burst {
            c.release(eager, s);
        }
        assert!(c.spare_bytes <= CONFIRM_BYTES);
        assert_eq!(c.spares.len(), CONFIRM_BYTES / eager);
        assert!(c
            .spares
            .iter()
            .all(|&i| c.slots[i as usize].capacity() == eager));
    }

    /// The envelope of a message to this rank with `tag` on context 0, and the selector of a
    /// receive that takes it.
    fn to_self(tag: i32) -> (MtlEnvelope, MtlSelector) {
        let env = MtlEnvelope {
            ctx: 0,
            src: 0,
            tag,
        };
        let sel = MtlSelector {
            ctx: 0,
            src: Source::Rank(0),
            tag: TagSel::Tag(tag),
        };
        (env, sel)
    }

    /// One job at a time in this test process (the interface is process-wide).
    static ONE_JOB: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// A one-rank job of this process (job id from `name`): a type table, the interface and an
    /// MTL over it.
    fn one_rank_job(name: &str) -> (TypeTable, crate::ptl::Portals, PortalsMtl) {
        std::env::set_var("STORMPI_RANK", "0");
        std::env::set_var("STORMPI_SIZE", "1");
        std::env::set_var(
            "STORMPI_JOBID",
            format!("mtltest{}-{name}", std::process::id()),
        );
        let params = crate::init::params().expect("parameters");
        let mut sizer = Sizer::default();
        TypeTable::size(&params, &mut sizer);
        let mem: &'static mut [MaybeUninit<u8>] =
            Box::leak(vec![MaybeUninit::uninit(); sizer.bytes()].into_boxed_slice());
        let types = TypeTable::new(&params, &mut Arena::new(mem)).expect("type table");
        let portals = crate::ptl::Portals::open(0, 1).expect("Portals");
        let mtl = PortalsMtl::new(&params, portals.ni, 0, 1).expect("MTL");
        (types, portals, mtl)
    }

    /// A one-rank job of this process: a steady exchange (each message waited for over several
    /// polls, as a ping-pong does) asks for one confirmation per `CONFIRM_EVERY` puts and no
    /// more; the tail of the burst is confirmed once the process idles, which lets `busy` clear.
    #[test]
    fn lwk_mtl_confirmations_stay_off_a_steady_exchange() {
        let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
        let (types, mut portals, mut mtl) = one_rank_job("confirm");
        let (env, sel) = to_self(7);
        let mut sink = Sink::default();
        let msgs = 3 * CONFIRM_EVERY as u64 + 5;
        let mut rbuf = [0u8; 4];
        let sbuf = [1u8, 2, 3, 4];
        for i in 0..msgs {
            // SAFETY: both buffers outlive the operations (each is waited for below).
            let (conv, send) = unsafe {
                (
                    Unpacker::contiguous(rbuf.as_mut_ptr(), rbuf.len()),
                    Packer::contiguous(sbuf.as_ptr(), (i % 5) as usize),
                )
            };
            mtl.irecv(&types, sel, &conv, Token(i)).expect("irecv");
            assert!(mtl
                .send_now(&types, ProcId(0), env, &send)
                .expect("send_now"));
            let mut polls = 0;
            while sink.recvs.len() as u64 <= i {
                mtl.progress(&types, &mut sink);
                polls += 1;
                assert!(polls < 1_000_000, "message {i} never arrived");
            }
            // Poll on a while, as a ping-pong's wait for the answer does.
            for _ in 0..20 {
                mtl.progress(&types, &mut sink);
            }
            let (t, n, m) = sink.recvs[i as usize];
            assert_eq!((t, n, m.len, m.tag), (Token(i), (i % 5) as usize, i % 5, 7));
        }
        assert_eq!(&rbuf[..4], &sbuf[..4]);
        // Short sends are no operations: the one slot is the receives', reused each time.
        assert_eq!(mtl.ops.len(), 1, "a short send took an operation slot");
        assert!(mtl.kept > 0 && mtl.kept < CONFIRM_EVERY);
        assert_eq!(mtl.stats.confirms, msgs / CONFIRM_EVERY as u64);
        assert!(mtl.busy(), "the tail of the burst is not confirmed yet");
        let mut polls = 0;
        while mtl.busy() {
            mtl.progress(&types, &mut sink);
            polls += 1;
            assert!(polls <= 4 * TAIL_POLLS, "the tail was never confirmed");
        }
        assert_eq!(mtl.stats.confirms, msgs / CONFIRM_EVERY as u64 + 1);
        assert_eq!(mtl.kept, 0);
        assert_eq!(mtl.stats.unexpected, 0);
        portals.close();
    }
    /// [`Mtl::progress_waiting`]: the receive waited for comes back from the round that
    /// completes it — from the arrival event when it was posted first, from the completion
    /// queue when its message was unexpected — and never through the sink; other receives
    /// completing in the same rounds still go to the sink.
    #[test]
    fn lwk_mtl_waiting_receive_comes_back_from_the_event() {
        let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
        let (types, mut portals, mut mtl) = one_rank_job("waiting");
        let env = |tag| MtlEnvelope {
            ctx: 0,
            src: 0,
            tag,
        };
        let sel = |tag| MtlSelector {
            ctx: 0,
            src: Source::Rank(0),
            tag: TagSel::Tag(tag),
        };
        let mut sink = Sink::default();
        let (mut a, mut b, mut c) = ([0u8; 4], [0u8; 4], [0u8; 2]);
        let sbuf = [5u8, 6, 7];
        // SAFETY: every buffer outlives its operation (each is waited for below).
        let (ra, rb, rc, send) = unsafe {
            (
                Unpacker::contiguous(a.as_mut_ptr(), a.len()),
                Unpacker::contiguous(b.as_mut_ptr(), b.len()),
                Unpacker::contiguous(c.as_mut_ptr(), c.len()),
                Packer::contiguous(sbuf.as_ptr(), sbuf.len()),
            )
        };
        let wait = |mtl: &mut PortalsMtl, sink: &mut Sink, token| {
            let mut placed = None;
            for _ in 0..1_000_000 {
                mtl.progress_waiting(&types, sink, token, &mut placed);
                if let Some(p) = placed {
                    return p;
                }
            }
            panic!("the waited-for receive never completed");
        };
        // Posted first, completed by a message sent after another receive's.
        mtl.irecv(&types, sel(7), &ra, Token(1)).expect("irecv");
        mtl.irecv(&types, sel(8), &rb, Token(2)).expect("irecv");
        assert!(mtl
            .send_now(&types, ProcId(0), env(8), &send)
            .expect("send"));
        assert!(mtl
            .send_now(&types, ProcId(0), env(7), &send)
            .expect("send"));
        let p = wait(&mut mtl, &mut sink, Token(1));
        assert_eq!((p.got, p.m.src, p.m.tag, p.m.len), (3, 0, 7, 3));
        assert_eq!(&a[..3], &sbuf);
        while sink.recvs.is_empty() {
            mtl.progress(&types, &mut sink);
        }
        assert_eq!(sink.recvs.len(), 1);
        assert_eq!((sink.recvs[0].0, sink.recvs[0].1), (Token(2), 3));
        // Unexpected (in the overflow list before the receive), and truncated: the receive
        // gets what fits, the match says what was sent.
        assert!(mtl
            .send_now(&types, ProcId(0), env(9), &send)
            .expect("send"));
        for _ in 0..100 {
            mtl.progress(&types, &mut sink);
        }
        mtl.irecv(&types, sel(9), &rc, Token(3)).expect("irecv");
        let p = wait(&mut mtl, &mut sink, Token(3));
        assert_eq!((p.got, p.m.tag, p.m.len), (2, 9, 3));
        assert_eq!(c, [5, 6]);
        assert_eq!(
            sink.recvs.len(),
            1,
            "the waited-for receive went to the sink"
        );
        assert_eq!(mtl.stats.unexpected, 1);
        while mtl.busy() {
            mtl.progress(&types, &mut sink);
        }
        portals.close();
    }
    /// The blocking receive's waiter ([`BLOCKING`]) as the cm PML drives it: each round is
    /// [`Mtl::poll_waiting`], and [`Mtl::progress_waiting`] only when the quick look says so.
    /// Its arrival comes back from the quick look; another receive's arrival in the same queue
    /// is left for the following `progress_waiting`, which reports it through the sink; an
    /// unexpected (and truncated) message for it comes back through the completion queue; the
    /// receive then leaves its slot and nothing is left pending.
    #[test]
    fn lwk_mtl_quick_look_hands_back_the_blocking_receive_and_leaves_the_rest() {
        let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
        let (types, mut portals, mut mtl) = one_rank_job("quick");
        let env = |tag| MtlEnvelope {
            ctx: 0,
            src: 0,
            tag,
        };
        let sel = |tag| MtlSelector {
            ctx: 0,
            src: Source::Rank(0),
            tag: TagSel::Tag(tag),
        };
        let mut sink = Sink::default();
        let (mut a, mut b, mut c) = ([0u8; 4], [0u8; 4], [0u8; 2]);
        let sbuf = [5u8, 6, 7];
        // SAFETY: every buffer outlives its operation (each is waited for below).
        let (ra, rb, rc, send) = unsafe {
            (
                Unpacker::contiguous(a.as_mut_ptr(), a.len()),
                Unpacker::contiguous(b.as_mut_ptr(), b.len()),
                Unpacker::contiguous(c.as_mut_ptr(), c.len()),
                Packer::contiguous(sbuf.as_ptr(), sbuf.len()),
            )
        };
        // Rounds until the blocking receive is handed back; how many went past the quick look.
        let wait = |mtl: &mut PortalsMtl, sink: &mut Sink| {
            let mut placed = None;
            let mut slow = 0;
            for _ in 0..1_000_000 {
                if mtl.poll_waiting(&mut placed).is_none() {
                    slow += 1;
                    mtl.progress_waiting(&types, sink, BLOCKING, &mut placed);
                }
                if let Some(p) = placed {
                    assert!(mtl.pending.is_none() && !mtl.stashed);
                    assert!(mtl.blocking.is_none(), "the blocking receive kept its slot");
                    return (p, slow);
                }
            }
            panic!("the blocking receive never completed");
        };
        mtl.irecv(&types, sel(7), &ra, BLOCKING).expect("irecv");
        mtl.irecv(&types, sel(8), &rb, Token(2)).expect("irecv");
        assert!(mtl
            .send_now(&types, ProcId(0), env(8), &send)
            .expect("send"));
        assert!(mtl
            .send_now(&types, ProcId(0), env(7), &send)
            .expect("send"));
        let (p, slow) = wait(&mut mtl, &mut sink);
        assert_eq!((p.got, p.m.src, p.m.tag, p.m.len), (3, 0, 7, 3));
        assert_eq!(&a[..3], &sbuf);
        assert!(
            slow >= 1,
            "the other receive's event never left the quick look"
        );
        assert_eq!(sink.recvs.len(), 1);
        assert_eq!((sink.recvs[0].0, sink.recvs[0].1), (Token(2), 3));
        assert_eq!(&b[..3], &sbuf);
        // Unexpected and truncated: the overflow block's bytes, through the completion queue.
        assert!(mtl
            .send_now(&types, ProcId(0), env(9), &send)
            .expect("send"));
        for _ in 0..100 {
            mtl.progress(&types, &mut sink);
        }
        mtl.irecv(&types, sel(9), &rc, BLOCKING).expect("irecv");
        let (p, _) = wait(&mut mtl, &mut sink);
        assert_eq!((p.got, p.m.tag, p.m.len), (2, 9, 3));
        assert_eq!(c, [5, 6]);
        assert_eq!(sink.recvs.len(), 1, "the blocking receive went to the sink");
        while mtl.busy() {
            mtl.progress(&types, &mut sink);
        }
        portals.close();
    }

    /// Copies kept for flow control stay bounded in bytes: eager-sized messages ask for a
    /// confirmation every `CONFIRM_BYTES`, long before `CONFIRM_EVERY` puts.
    #[test]
    fn lwk_mtl_large_short_messages_confirm_by_bytes() {
        let _one = ONE_JOB.lock().unwrap_or_else(|e| e.into_inner());
        let (types, mut portals, mut mtl) = one_rank_job("bytes");
        let (env, sel) = to_self(3);
        let mut sink = Sink::default();
        let len = mtl.eager;
        let per = (CONFIRM_BYTES / len) as u64;
        assert!(per < CONFIRM_EVERY as u64);
        let sbuf = vec![9u8; len];
        let mut rbuf = vec![0u8; len];
        for i in 0..per + 1 {
            // SAFETY: both buffers outlive the operations (each is waited for below).
            let (conv, send) = unsafe {
                (
                    Unpacker::contiguous(rbuf.as_mut_ptr(), len),
                    Packer::contiguous(sbuf.as_ptr(), len),
                )
            };
            mtl.irecv(&types, sel, &conv, Token(i)).expect("irecv");
            assert!(mtl
                .send_now(&types, ProcId(0), env, &send)
                .expect("send_now"));
            while sink.recvs.len() as u64 <= i {
                mtl.progress(&types, &mut sink);
            }
            let want = if i + 1 >= per { 1 } else { 0 };
            assert_eq!(mtl.stats.confirms, want, "after message {i}");
        }
        assert_eq!(rbuf, sbuf);
        while mtl.busy() {
            mtl.progress(&types, &mut sink);
        }
        portals.close();
    }
}
