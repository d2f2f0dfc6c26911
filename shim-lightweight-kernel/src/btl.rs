//! The Portals BTL: fragments as puts into large pre-posted receive blocks (the Red Storm design).
//!
//! Receiving: portal table entry [`pt::BTL`] holds `btl_portals_blocks` blocks of
//! `btl_portals_block_bytes` on its priority list, each a persistent, locally managed entry
//! (`PTL_ME_MANAGE_LOCAL`: every put lands after the previous one) that unlinks itself when less
//! than a fragment's room is left (`min_free`). Behind them sits the *reject* entry: zero bytes,
//! truncating, accepting anything. A fragment that finds every block full lands there with
//! `mlength` 0; the sender sees that in its acknowledgment and sends the fragment again later.
//! A block is posted again (before the reject entry, which is re-appended behind it) once it has
//! unlinked and every fragment in it has been taken by the engine.
//!
//! Sending: fragments are packed into send slots of one registered slab (copy-in, as the BTL
//! interface wants) and put with an acknowledgment request; a slot is free again when the
//! acknowledgment says the whole fragment landed, and is queued for retransmission when it says
//! the fragment was rejected (or not delivered). Out of slots is back-pressure (`reserve` says
//! `None`).
//!
//! Flow control: the portal is allocated with `PTL_PT_FLOWCTRL`, so when the receive event queue
//! has no room the interface disables the portal and refuses puts (`PTL_NI_PT_DISABLED`) instead
//! of dropping an event, which would lose the fragment it reports. The receiver takes its events
//! and enables the portal again in the same progress call; the refused fragments go again like
//! rejected ones.
//!
//! Order: ob1 numbers each peer's messages in a 16-bit space and holds early arrivals, so a
//! peer's fragments may overtake each other only by less than half of it. A refused fragment
//! starts a *recovery* for its peer: until every refused fragment to that peer has landed, new
//! fragments to it wait behind them. So what overtakes a refused fragment was already in flight
//! when it was refused: at most `btl_portals_send_slots` fragments.
//!
//! RDMA get (messages of `btl_portals_get_min` bytes and more): the sender's PML registers the
//! message ([`Btl::register`]), which appends a persistent match entry over it on
//! [`pt::BTL_READ`] with a fresh key as its match bits, readable only by the destination and
//! raising no events; the receiver's PML reads it straight into its buffer ([`Btl::get`]:
//! `PtlGet` with the key as match bits), and its `PTL_EVENT_REPLY` completes the read. The
//! sender unlinks the entry when the receiver's FIN comes ([`Btl::deregister`]).
//!
//! Two event queues, as in the Red Storm port: one for the receive side (puts into blocks, block
//! unlinks), one for the send side (acknowledgments of puts, replies of gets).

use std::collections::VecDeque;
use std::ptr;

use portals4_sys::*;
use stormpi_core::btl::{
    AmTag, Btl, BtlAttrs, BtlFlags, DataRef, Delivery, DestRef, Endpoint, Modex, PeerInfo,
    RemoteKey, Sink, Token,
};
use stormpi_core::error::{Error, ErrorClass, Reason, Result};
use stormpi_core::params::{Default, Kind, ParamDef, Params};
use stormpi_core::platform::Level;
use stormpi_core::rte::ProcId;

use crate::ptl::{self, check, pt};

/// `btl_portals_eager_limit`.
pub static EAGER_LIMIT: ParamDef = ParamDef {
    name: "btl_portals_eager_limit",
    kind: Kind::Int {
        min: 64,
        max: 1 << 20,
    },
    default: Default::Int(8192),
    description: "Largest eager fragment of the Portals BTL, header included",
};

/// `btl_portals_max_send_size`.
pub static MAX_SEND_SIZE: ParamDef = ParamDef {
    name: "btl_portals_max_send_size",
    kind: Kind::Int {
        min: 256,
        max: 1 << 22,
    },
    default: Default::Int(65536),
    description: "Largest fragment of the Portals BTL, header included",
};

/// `btl_portals_blocks`.
pub static BLOCKS: ParamDef = ParamDef {
    name: "btl_portals_blocks",
    kind: Kind::Int { min: 1, max: 1024 },
    default: Default::Int(8),
    description: "Receive blocks the Portals BTL keeps posted",
};

/// `btl_portals_block_bytes`.
pub static BLOCK_BYTES: ParamDef = ParamDef {
    name: "btl_portals_block_bytes",
    kind: Kind::Int {
        min: 1024,
        max: 1 << 30,
    },
    default: Default::Int(1 << 20),
    description:
        "Bytes of each receive block of the Portals BTL (at least twice the largest fragment)",
};

/// `btl_portals_send_slots`.
pub static SEND_SLOTS: ParamDef = ParamDef {
    name: "btl_portals_send_slots",
    kind: Kind::Int {
        min: 2,
        max: 1 << 14,
    },
    default: Default::Int(128),
    description: "Fragments the Portals BTL can have unacknowledged at once (below half of ob1's 16-bit sequence space, so a retransmitted fragment is never overtaken by more)",
};

/// `btl_portals_get_min`.
pub static GET_MIN: ParamDef = ParamDef {
    name: "btl_portals_get_min",
    kind: Kind::Int {
        min: 0,
        max: 1 << 40,
    },
    default: Default::Int(65536),
    description: "Messages of at least this many bytes are read by the receiver with PtlGet (the RDMA get protocol) instead of sent in fragments; 0 turns gets off",
};

/// `btl_portals_event_queue_size`.
pub static EVENT_QUEUE_SIZE: ParamDef = ParamDef {
    name: "btl_portals_event_queue_size",
    kind: Kind::Int {
        min: 0,
        max: 1 << 24,
    },
    default: Default::Int(0),
    description: "Events the Portals BTL's receive queue holds (0: one per 64 bytes of its blocks); when it is full the portal is disabled and senders retransmit",
};

/// Parameters of the Portals BTL.
pub static PARAMS: [&ParamDef; 7] = [
    &EAGER_LIMIT,
    &MAX_SEND_SIZE,
    &BLOCKS,
    &BLOCK_BYTES,
    &SEND_SLOTS,
    &GET_MIN,
    &EVENT_QUEUE_SIZE,
];

/// `user_ptr` of the reject entry's events.
const REJECT: usize = usize::MAX;
/// Top bit of a send-side `user_ptr`: a get (the rest is its slot), not a put's send slot.
const GET_BIT: usize = 1 << (usize::BITS - 1);
/// Gets one module has under way at once.
const MAX_GETS: usize = 64;

struct Block {
    mem: Box<[u8]>,
    me: ptl_handle_me_t,
    linked: bool,
    /// Fragments in the block the engine has not taken yet.
    held: u32,
}

/// A fragment the engine could not take yet.
struct Held {
    block: usize,
    at: *const u8,
    len: usize,
    from: ProcId,
    tag: AmTag,
}

#[derive(Clone, Copy, Default)]
struct Slot {
    ep: u32,
    len: u32,
    tag: u8,
    /// Place in the order fragments were committed: retransmissions keep it.
    order: u64,
    /// Refused at least once (counted in its peer's recovery until it lands).
    retry: bool,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct BtlStats {
    /// Fragments put.
    pub puts: u64,
    /// Fragments that came back rejected (or undelivered) and were sent again.
    pub retransmits: u64,
    /// Blocks posted again.
    pub reposts: u64,
    /// Gets issued.
    pub gets: u64,
    /// Times the receive queue filled and the interface disabled the portal.
    pub disables: u64,
}

/// The Portals BTL module.
pub struct PortalsBtl {
    attrs: BtlAttrs,
    ni: ptl_handle_ni_t,
    recv_eq: ptl_handle_eq_t,
    send_eq: ptl_handle_eq_t,
    md: ptl_handle_md_t,
    blocks: Vec<Block>,
    reject: ptl_handle_me_t,
    held: VecDeque<Held>,
    slab: Box<[u8]>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    reserved: Option<u32>,
    /// Fragments to send again, in the order they were committed (so a peer's fragments never
    /// overtake each other: ob1 holds an early arrival, and a fragment starved behind newer
    /// ones would let them run a whole sequence-number space ahead of it).
    resend: VecDeque<u32>,
    /// Fragments committed so far (the next [`Slot::order`]).
    committed: u64,
    /// Per peer (by endpoint): refused fragments not yet landed. New fragments to a peer in
    /// recovery wait in `resend`.
    recovering: Vec<u32>,
    /// Progress calls so far, and the one from which rejected fragments may go again.
    pass: u64,
    resend_at: u64,
    rank: u32,
    /// Registrations: key (match bits) → entry.
    regs: std::collections::HashMap<u64, ptl_handle_me_t>,
    next_key: u64,
    /// Gets under way: slot → (token, length); free slots.
    gets: Vec<Option<(Token, u64)>>,
    free_gets: Vec<usize>,
    /// Counters.
    pub stats: BtlStats,
}

// SAFETY: the raw pointers in `held` point into this module's own blocks.
unsafe impl Send for PortalsBtl {}

fn ptl_err(e: ptl::PtlError) -> Error {
    crate::platform::eprint_line(&format!("stormpi: Portals BTL: {e}"));
    Error::new(
        ErrorClass::Intern,
        Reason::Runtime {
            what: "Portals BTL set-up",
        },
    )
}

impl PortalsBtl {
    /// Allocates the BTL's portal table entry, posts its blocks and the reject entry.
    pub fn new(params: &Params, ni: ptl_handle_ni_t, rank: u32) -> Result<PortalsBtl> {
        let max_send = params.usize(&MAX_SEND_SIZE);
        let eager = params.usize(&EAGER_LIMIT).min(max_send);
        let block_bytes = params.usize(&BLOCK_BYTES).max(2 * max_send);
        let nblocks = params.usize(&BLOCKS);
        let nslots = params.usize(&SEND_SLOTS);
        let get_min = params.usize(&GET_MIN);
        let eq_len = params.usize(&EVENT_QUEUE_SIZE);
        let flags = if get_min > 0 {
            BtlFlags::SEND.union(BtlFlags::GET)
        } else {
            BtlFlags::SEND
        };
        let mut b = PortalsBtl {
            attrs: BtlAttrs {
                component: "portals",
                eager_limit: eager,
                max_send_size: max_send,
                latency_ns: 500,
                bandwidth_mbps: 40_000,
                exclusivity: 500,
                flags,
                get_min: if get_min > 0 { get_min } else { usize::MAX },
            },
            ni,
            recv_eq: PTL_EQ_NONE,
            send_eq: PTL_EQ_NONE,
            md: PTL_INVALID_HANDLE,
            blocks: Vec::new(),
            reject: PTL_INVALID_HANDLE,
            held: VecDeque::new(),
            slab: vec![0u8; nslots * max_send].into_boxed_slice(),
            slots: vec![Slot::default(); nslots],
            free: (0..nslots as u32).rev().collect(),
            reserved: None,
            resend: VecDeque::new(),
            committed: 0,
            recovering: Vec::new(),
            pass: 0,
            resend_at: 0,
            rank,
            regs: std::collections::HashMap::new(),
            next_key: 1,
            gets: vec![None; MAX_GETS],
            free_gets: (0..MAX_GETS).rev().collect(),
            stats: BtlStats::default(),
        };
        // SAFETY: Portals calls with valid out-pointers.
        unsafe {
            // Enough for blocks of 64-byte fragments; smaller ones can fill it, and then flow
            // control disables the portal rather than lose an event.
            let recv_eq_len = if eq_len > 0 {
                eq_len
            } else {
                (nblocks * (block_bytes / 64 + 2)).clamp(256, 1 << 20)
            };
            check(
                PtlEQAlloc(ni, recv_eq_len as u64, &mut b.recv_eq),
                "PtlEQAlloc (BTL receive)",
            )
            .map_err(ptl_err)?;
            check(
                PtlEQAlloc(ni, (2 * nslots + MAX_GETS + 16) as u64, &mut b.send_eq),
                "PtlEQAlloc (BTL send)",
            )
            .map_err(ptl_err)?;
            let mut idx = 0;
            check(
                PtlPTAlloc(ni, PTL_PT_FLOWCTRL, b.recv_eq, pt::BTL, &mut idx),
                "PtlPTAlloc (BTL)",
            )
            .map_err(ptl_err)?;
            check(
                PtlPTAlloc(ni, 0, PTL_EQ_NONE, pt::BTL_READ, &mut idx),
                "PtlPTAlloc (BTL read)",
            )
            .map_err(ptl_err)?;
        }
        b.md = ptl::bind_all(ni, b.send_eq, PTL_MD_EVENT_SEND_DISABLE).map_err(ptl_err)?;
        for i in 0..nblocks {
            b.blocks.push(Block {
                mem: vec![0u8; block_bytes].into_boxed_slice(),
                me: PTL_INVALID_HANDLE,
                linked: false,
                held: 0,
            });
            b.post_block(i).map_err(ptl_err)?;
        }
        b.post_reject().map_err(ptl_err)?;
        Ok(b)
    }

    fn post_block(&mut self, i: usize) -> std::result::Result<(), ptl::PtlError> {
        let blk = &mut self.blocks[i];
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
            min_free: self.attrs.max_send_size as u64,
        };
        // SAFETY: the block lives as long as the module; it is posted only while unlinked.
        check(
            unsafe {
                PtlMEAppend(
                    self.ni,
                    pt::BTL,
                    &me,
                    PTL_PRIORITY_LIST,
                    i as *mut _,
                    &mut blk.me,
                )
            },
            "PtlMEAppend (BTL block)",
        )?;
        blk.linked = true;
        Ok(())
    }

    fn post_reject(&mut self) -> std::result::Result<(), ptl::PtlError> {
        let me = ptl_me_t {
            start: ptr::null_mut(),
            length: 0,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT | PTL_ME_EVENT_COMM_DISABLE | PTL_ME_EVENT_LINK_DISABLE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: 0,
            ignore_bits: !0,
            min_free: 0,
        };
        // SAFETY: a zero-length entry.
        check(
            unsafe {
                PtlMEAppend(
                    self.ni,
                    pt::BTL,
                    &me,
                    PTL_PRIORITY_LIST,
                    REJECT as *mut _,
                    &mut self.reject,
                )
            },
            "PtlMEAppend (BTL reject entry)",
        )
    }

    /// Posts block `i` again, in front of the reject entry.
    fn repost(&mut self, i: usize) {
        self.stats.reposts += 1;
        let ok = self.post_block(i).is_ok();
        // SAFETY: the reject entry's handle is ours.
        unsafe { PtlMEUnlink(self.reject) };
        if self.post_reject().is_err() || !ok {
            crate::platform::eprint_line("stormpi: Portals BTL: cannot post a receive block again");
        }
    }

    fn slot_ptr(&mut self, s: u32) -> *mut u8 {
        let max = self.attrs.max_send_size;
        self.slab[s as usize * max..].as_mut_ptr()
    }

    /// Puts the fragment in slot `s`; false if Portals refused it (the caller keeps it).
    fn put(&mut self, s: u32) -> bool {
        let slot = self.slots[s as usize];
        let p = self.slot_ptr(s);
        self.stats.puts += 1;
        // SAFETY: the slot's bytes stay in the slab until the acknowledgment frees the slot.
        let rc = unsafe {
            PtlPut(
                self.md,
                ptl::offset_of(p, slot.len as usize),
                slot.len as u64,
                PTL_ACK_REQ,
                ptl_process_t::from_rank(slot.ep),
                pt::BTL,
                0,
                0,
                s as usize as *mut _,
                slot.tag as u64,
            )
        };
        rc == PTL_OK
    }

    /// Fragment `s` was refused: its peer is in recovery until it lands.
    fn refused(&mut self, s: u32) {
        let slot = &mut self.slots[s as usize];
        if !slot.retry {
            slot.retry = true;
            let ep = slot.ep as usize;
            if self.recovering.len() <= ep {
                self.recovering.resize(ep + 1, 0);
            }
            self.recovering[ep] += 1;
        }
    }

    /// Fragment `s` landed.
    fn landed(&mut self, s: u32) {
        let slot = &mut self.slots[s as usize];
        if slot.retry {
            slot.retry = false;
            if let Some(n) = self.recovering.get_mut(slot.ep as usize) {
                *n -= 1;
            }
        }
        self.free.push(s);
    }

    fn in_recovery(&self, ep: u32) -> bool {
        self.recovering.get(ep as usize).is_some_and(|&n| n > 0)
    }

    /// Queues a fragment to be sent again, in commit order.
    fn queue_resend(&mut self, s: u32) {
        let order = self.slots[s as usize].order;
        let slots = &self.slots;
        let at = self
            .resend
            .partition_point(|&r| slots[r as usize].order < order);
        self.resend.insert(at, s);
    }

    /// Sends what waits in `resend`, in commit order: refused fragments, and new ones to peers
    /// no longer in recovery. Stops at the first put Portals refuses.
    fn retransmit(&mut self) {
        let waiting = std::mem::take(&mut self.resend);
        let mut stopped = false;
        for s in waiting {
            let slot = self.slots[s as usize];
            let go = !stopped && (slot.retry || !self.in_recovery(slot.ep));
            if go && self.put(s) {
                continue;
            }
            if go {
                stopped = true;
                self.refused(s);
            }
            self.resend.push_back(s);
        }
    }

    /// Takes arrived fragments the engine refused before; false if one is refused again.
    fn drain_held(&mut self, sink: &mut dyn Sink) -> (bool, usize) {
        let mut n = 0;
        while let Some(h) = self.held.front() {
            // SAFETY: the fragment is in a block that is not posted again while it holds it.
            let frag = unsafe { std::slice::from_raw_parts(h.at, h.len) };
            if sink.deliver(h.from, h.tag, frag) == Delivery::Retry {
                return (false, n);
            }
            let b = h.block;
            self.held.pop_front();
            n += 1;
            self.release(b);
        }
        (true, n)
    }

    fn release(&mut self, b: usize) {
        let blk = &mut self.blocks[b];
        blk.held -= 1;
        if blk.held == 0 && !blk.linked {
            self.repost(b);
        }
    }
}

impl Btl for PortalsBtl {
    fn attrs(&self) -> &BtlAttrs {
        &self.attrs
    }

    fn add_procs(
        &mut self,
        peers: &[PeerInfo],
        _modex: &mut dyn Modex,
        endpoints: &mut [Option<Endpoint>],
    ) -> Result<()> {
        // The logical interface's rank is the job rank: nothing to look up.
        for (p, ep) in peers.iter().zip(endpoints.iter_mut()) {
            *ep = Some(Endpoint(p.proc.0));
        }
        Ok(())
    }

    fn reserve(&mut self, ep: Endpoint, len: usize) -> Option<&mut [u8]> {
        if len > self.attrs.max_send_size {
            return None;
        }
        let s = match self.reserved {
            Some(s) => s,
            None => self.free.pop()?,
        };
        self.reserved = Some(s);
        self.slots[s as usize].ep = ep.0;
        let max = self.attrs.max_send_size;
        Some(&mut self.slab[s as usize * max..s as usize * max + len])
    }

    fn commit(&mut self, ep: Endpoint, tag: AmTag, len: usize) {
        let Some(s) = self.reserved.take() else {
            return;
        };
        self.slots[s as usize] = Slot {
            ep: ep.0,
            len: len as u32,
            tag: tag.0,
            order: self.committed,
            retry: false,
        };
        self.committed += 1;
        // Behind the peer's refused or waiting fragments, not ahead of them.
        if self.in_recovery(ep.0)
            || (!self.resend.is_empty()
                && self
                    .resend
                    .iter()
                    .any(|&r| self.slots[r as usize].ep == ep.0))
        {
            self.resend.push_back(s);
            return;
        }
        if !self.put(s) {
            self.refused(s);
            self.resend.push_back(s);
        }
    }

    fn register(&mut self, ep: Endpoint, data: DataRef) -> Option<RemoteKey> {
        let key = self.next_key;
        let me = ptl_me_t {
            start: data.as_ptr() as *mut _,
            length: data.len() as u64,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_GET
                | PTL_ME_EVENT_COMM_DISABLE
                | PTL_ME_EVENT_LINK_DISABLE
                | PTL_ME_EVENT_UNLINK_DISABLE,
            match_id: ptl_process_t::from_rank(ep.0),
            match_bits: key,
            ignore_bits: 0,
            min_free: 0,
        };
        let mut h = PTL_INVALID_HANDLE;
        // SAFETY: DataRef's contract: the bytes stay readable until the PML withdraws the
        // registration, which unlinks the entry.
        let rc = unsafe {
            PtlMEAppend(
                self.ni,
                pt::BTL_READ,
                &me,
                PTL_PRIORITY_LIST,
                ptr::null_mut(),
                &mut h,
            )
        };
        if rc != PTL_OK {
            return None;
        }
        self.next_key += 1;
        self.regs.insert(key, h);
        Some(RemoteKey(key))
    }

    fn deregister(&mut self, key: RemoteKey) {
        if let Some(h) = self.regs.remove(&key.0) {
            // SAFETY: our own entry, linked until now.
            unsafe { PtlMEUnlink(h) };
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
        let Some(g) = self.free_gets.pop() else {
            return false;
        };
        let len = dest.len() as u64;
        // SAFETY: DestRef's contract: the bytes are ours to write until the reply is reported.
        let rc = unsafe {
            PtlGet(
                self.md,
                ptl::offset_of(dest.as_ptr(), dest.len()),
                len,
                ptl_process_t::from_rank(ep.0),
                pt::BTL_READ,
                key.0,
                offset,
                (GET_BIT | g) as *mut _,
            )
        };
        if rc != PTL_OK {
            self.free_gets.push(g);
            return false;
        }
        self.gets[g] = Some((token, len));
        self.stats.gets += 1;
        true
    }

    fn progress(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        let mut deliver = true;
        if !self.held.is_empty() {
            let (ok, k) = self.drain_held(sink);
            deliver = ok;
            n += k;
        }
        let mut ev = ptl_event_t::default();
        let mut disabled = false;
        // Receive side.
        loop {
            // SAFETY: valid event queue and out-pointer.
            match unsafe { PtlEQGet(self.recv_eq, &mut ev) } {
                PTL_OK => {}
                PTL_EQ_DROPPED => crate::platform::eprint_line(
                    "stormpi: Portals BTL: the receive event queue overflowed despite flow control; fragments are lost",
                ),
                _ => break,
            }
            let b = ev.user_ptr as usize;
            match ev.type_ {
                PTL_EVENT_PT_DISABLED => disabled = true,
                PTL_EVENT_PUT if b != REJECT && b < self.blocks.len() => {
                    n += 1;
                    let from = ProcId(ev.initiator.rank());
                    let tag = AmTag(ev.hdr_data as u8);
                    let len = ev.mlength as usize;
                    let at = ev.start as *const u8;
                    self.blocks[b].held += 1;
                    if deliver {
                        // SAFETY: the NI wrote `mlength` bytes at `start` inside block `b`.
                        let frag = unsafe { std::slice::from_raw_parts(at, len) };
                        if sink.deliver(from, tag, frag).consumed() {
                            self.release(b);
                            continue;
                        }
                        deliver = false;
                    }
                    self.held.push_back(Held {
                        block: b,
                        at,
                        len,
                        from,
                        tag,
                    });
                }
                PTL_EVENT_AUTO_UNLINK if b < self.blocks.len() => {
                    self.blocks[b].linked = false;
                    if self.blocks[b].held == 0 {
                        self.repost(b);
                    }
                }
                _ => {}
            }
        }
        if disabled {
            self.stats.disables += 1;
            // The queue is empty now: take puts again (the refused ones come back).
            // SAFETY: our own portal table entry.
            unsafe { PtlPTEnable(self.ni, pt::BTL) };
        }
        // Send side.
        // SAFETY: as above.
        while unsafe { PtlEQGet(self.send_eq, &mut ev) } == PTL_OK {
            if ev.type_ == PTL_EVENT_REPLY && ev.user_ptr as usize & GET_BIT != 0 {
                let g = ev.user_ptr as usize & !GET_BIT;
                let Some((token, len)) = self.gets.get_mut(g).and_then(Option::take) else {
                    continue;
                };
                self.free_gets.push(g);
                n += 1;
                let result = if ev.ni_fail_type == PTL_NI_OK && ev.mlength == len {
                    Ok(())
                } else {
                    Err(Error::new(
                        ErrorClass::Other,
                        Reason::Transport {
                            btl: "portals",
                            what: "a get of registered memory failed",
                        },
                    ))
                };
                sink.completed(token, result);
                continue;
            }
            if ev.type_ != PTL_EVENT_ACK {
                continue;
            }
            let s = ev.user_ptr as usize as u32;
            let Some(slot) = self.slots.get(s as usize).copied() else {
                continue;
            };
            if ev.ni_fail_type == PTL_NI_OK && ev.mlength == slot.len as u64 {
                self.landed(s);
                n += 1;
            } else {
                // Rejected (every block was full), refused (portal disabled) or not delivered:
                // send it again, after the receiver has had a moment to take its blocks back.
                self.stats.retransmits += 1;
                self.refused(s);
                self.queue_resend(s);
                self.resend_at = self.pass + 16;
            }
        }
        // Retransmit what was rejected, at most what was waiting when this call began.
        self.pass += 1;
        if self.pass < self.resend_at || self.resend.is_empty() {
            return n;
        }
        self.retransmit();
        n
    }

    fn finalize(&mut self) {
        // Unacknowledged fragments would be lost with the interface: wait for them.
        let mut spins = 0u64;
        while self.free.len() + usize::from(self.reserved.is_some()) < self.slots.len()
            && spins < 10_000_000
        {
            struct Drop;
            impl Sink for Drop {
                fn deliver(&mut self, _: ProcId, _: AmTag, _: &[u8]) -> Delivery {
                    Delivery::Consumed
                }
            }
            self.progress(&mut Drop);
            spins += 1;
        }
        let st = self.stats;
        if crate::log::enabled(Level::Info) {
            crate::log::record(
                Level::Info,
                self.rank,
                format_args!(
                    "Portals BTL: {} fragments put, {} rejected and retransmitted, {} receive blocks posted again, {} gets, {} flow-control disables",
                    st.puts, st.retransmits, st.reposts, st.gets, st.disables
                ),
            );
        }
    }
}
