//! The network interface's state and its semantics: portal tables with priority and overflow
//! lists, matching, the unexpected list, event queues, counting events, memory descriptors, the
//! initiator's operations, and progress.
//!
//! # How data moves
//!
//! There is no NIC, so the *target* process performs the target side of every operation, inside
//! any Portals call it makes (`PtlEQGet`, `PtlEQWait`, `PtlCTGet`, `PtlCTWait`, ... all run
//! [`State::progress`]): it consumes the records its peers wrote into its inbound rings, matches
//! them against its own lists (private memory, so no lock is shared between processes), copies
//! the data, posts events and answers with ACK and REPLY records. An initiator's request is one
//! record when it fits; a larger one is streamed in fragments that the target stages until the
//! message is complete, or — from `STORMPI_PTL_CMA_THRESHOLD` bytes on, where the kernel allows
//! it — names the initiator's buffer, which the target reads (or, for a get, writes) directly
//! with cross-memory attach (`process_vm_readv/writev`). Either way the target matches a message once, when it has all of it, so
//! an entry appended meanwhile sees either the whole message or none of it. Records from one
//! initiator are consumed in order, so messages between a pair are delivered in order.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::atomics;
use crate::job::{Config, Job};
use crate::region::{self, Region};
use crate::shm::{flag, kind, Consumer, Geometry, Hdr, Producer, Segment};
use crate::types::*;

/// Interfaces per process: logical matching, logical non-matching, physical matching, physical
/// non-matching.
pub const NIS: usize = 4;
/// Largest portal table index.
pub const MAX_PT_INDEX: u32 = 255;
/// Largest atomic operation (bytes).
pub const MAX_ATOMIC: u64 = 4096;
const MAX_OBJECTS: usize = 0xfff0;
/// A slot index no slab reaches ([`Slab::at_mut`] finds nothing there).
const NO_SLOT: u32 = u32::MAX;

/// Handle kinds (top three bits of a handle).
pub mod hk {
    pub const NI: u32 = 1;
    pub const EQ: u32 = 2;
    pub const CT: u32 = 3;
    pub const MD: u32 = 4;
    pub const ME: u32 = 5;
    pub const LE: u32 = 6;
    pub const OP: u32 = 7;
}

/// A handle: kind, interface, generation, slot.
pub fn handle(kind: u32, ni: usize, idx: u32, gen: u16) -> u32 {
    kind << 29 | (ni as u32) << 27 | (gen as u32 & 0x7ff) << 16 | idx
}

/// The parts of a handle: (kind, interface, slot, generation).
pub fn split(h: u32) -> (u32, usize, u32, u16) {
    (
        h >> 29,
        ((h >> 27) & 3) as usize,
        h & 0xffff,
        ((h >> 16) & 0x7ff) as u16,
    )
}

/// Objects with generation-checked keys.
///
/// Free slots form a list threaded through the slots themselves, so freeing one is two stores
/// (no vector to grow on the path that unlinks a matched receive).
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    /// The most recently freed slot ([`NO_SLOT`] when none is free).
    free_head: u32,
    /// The kind and interface bits of this slab's handles (0: none, [`Slab::by_handle_mut`]
    /// not used).
    tag: u16,
}

/// One slot of a [`Slab`].
struct Slot<T> {
    gen: u16,
    /// In a tagged slab, while the slot is live: its handles' top 16 bits (kind, interface,
    /// generation), so one comparison checks a handle; 0 when free (no handle has kind 0).
    key: u16,
    /// The next free slot, while this one is free.
    next: u32,
    val: Option<T>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free_head: NO_SLOT,
            tag: 0,
        }
    }
}

impl<T> Slab<T> {
    /// A slab of handles of kind `kind` on interface `ni` ([`Slab::by_handle_mut`] works).
    pub fn tagged(kind: u32, ni: usize) -> Self {
        Slab {
            tag: (handle(kind, ni, 0, 0) >> 16) as u16,
            ..Slab::default()
        }
    }
    /// The live object handle `h` names, checked with one comparison: the kind, the interface
    /// and the generation are the slot's key (a tagged slab's).
    #[inline(always)]
    pub fn by_handle_mut(&mut self, h: u32) -> Option<&mut T> {
        debug_assert!(self.tag != 0);
        match self.slots.get_mut((h & 0xffff) as usize) {
            Some(s) if s.key == (h >> 16) as u16 => s.val.as_mut(),
            _ => None,
        }
    }
    #[inline(always)]
    pub fn insert(&mut self, v: T) -> Option<(u32, u16)> {
        if let Some(s) = self.slots.get_mut(self.free_head as usize) {
            let i = self.free_head;
            self.free_head = s.next;
            s.gen = (s.gen + 1) & 0x7ff;
            s.key = self.tag | s.gen;
            // A free slot is empty (`free` and `remove` empty it): filled without the drop
            // glue of its old value, a call on this path.
            let old = s.val.replace(v);
            debug_assert!(old.is_none());
            std::mem::forget(old);
            return Some((i, s.gen));
        }
        if self.slots.len() >= MAX_OBJECTS {
            return None;
        }
        self.slots.push(Slot {
            gen: 0,
            key: self.tag,
            next: NO_SLOT,
            val: Some(v),
        });
        Some(((self.slots.len() - 1) as u32, 0))
    }
    pub fn get(&self, idx: u32, gen: u16) -> Option<&T> {
        match self.slots.get(idx as usize) {
            Some(Slot {
                gen: g,
                val: Some(v),
                ..
            }) if *g == gen => Some(v),
            _ => None,
        }
    }
    pub fn get_mut(&mut self, idx: u32, gen: u16) -> Option<&mut T> {
        match self.slots.get_mut(idx as usize) {
            Some(Slot {
                gen: g,
                val: Some(v),
                ..
            }) if *g == gen => Some(v),
            _ => None,
        }
    }
    /// The live object in slot `idx`, whatever its generation.
    #[inline(always)]
    pub fn at(&self, idx: u32) -> Option<&T> {
        self.slots.get(idx as usize).and_then(|s| s.val.as_ref())
    }
    #[inline(always)]
    pub fn at_mut(&mut self, idx: u32) -> Option<&mut T> {
        self.slots
            .get_mut(idx as usize)
            .and_then(|s| s.val.as_mut())
    }
    pub fn gen_of(&self, idx: u32) -> u16 {
        self.slots.get(idx as usize).map(|s| s.gen).unwrap_or(0)
    }
    /// Puts emptied slot `idx` on the free list.
    #[inline(always)]
    fn push_free(&mut self, idx: u32) {
        self.slots[idx as usize].key = 0;
        self.slots[idx as usize].next = self.free_head;
        self.free_head = idx;
    }
    /// Drops the live object in slot `idx`, whatever its generation.
    #[inline(always)]
    pub fn free(&mut self, idx: u32) {
        if let Some(s) = self.slots.get_mut(idx as usize) {
            if s.val.is_some() {
                // Dropped where it is, not moved out first.
                s.val = None;
                s.key = 0;
                s.next = self.free_head;
                self.free_head = idx;
            }
        }
    }
    pub fn remove(&mut self, idx: u32, gen: u16) -> Option<T> {
        match self.slots.get_mut(idx as usize) {
            Some(s) if s.gen == gen && s.val.is_some() => {
                let v = s.val.take();
                self.push_free(idx);
                v
            }
            _ => None,
        }
    }
}

impl Slab<Entry> {
    /// [`Slab::free`] for a list entry: one with a contiguous region owns nothing, so its slot
    /// is emptied without the drop glue's call (this is every use-once receive's unlink). The
    /// entries' slab is not tagged (MEs and LEs share it): its keys are not kept.
    #[inline(always)]
    fn free_entry(&mut self, idx: u32) {
        let Some(s) = self.slots.get_mut(idx as usize) else {
            return;
        };
        match &s.val {
            Some(e) if e.region.contig().is_some() => std::mem::forget(s.val.take()),
            Some(_) => drop_cold(s.val.take()),
            None => return,
        }
        s.next = self.free_head;
        self.free_head = idx;
    }
}

/// Drops `v` out of line: a cold call does not make its caller keep values out of registers on
/// the path that does not call.
#[cold]
#[inline(never)]
fn drop_cold<T>(v: T) {
    drop(v);
}

/// An event queue: a ring of full events.
///
/// The ring's length is a power of two (an index wraps with a mask); it starts small and doubles
/// when full, up to the queue's capacity plus its reserve, so a large `PtlEQAlloc` costs no
/// memory until events fill it. Events are written in place in their slot and read in place.
pub struct Eq {
    cap: usize,
    /// Slots kept for `PTL_EVENT_PT_DISABLED` (one per flow-controlled portal table entry).
    reserve: usize,
    ring: Vec<ptl_event_t>,
    /// The oldest event's slot.
    head: usize,
    /// Events queued.
    len: usize,
    dropped: bool,
}

impl Eq {
    /// Slots the ring starts with (at most).
    const FIRST_RING: usize = 64;

    fn new(cap: usize) -> Eq {
        Eq {
            cap,
            reserve: 0,
            ring: vec![blank(); cap.clamp(1, Self::FIRST_RING).next_power_of_two()],
            head: 0,
            len: 0,
            dropped: false,
        }
    }

    /// The slot of a new event, at the back: when the queue is full (capacity and reserve),
    /// the oldest event is dropped for it and the next take says `PTL_EQ_DROPPED`. The caller
    /// fills every field.
    #[inline(always)]
    fn push_slot(&mut self) -> &mut ptl_event_t {
        if self.len >= self.cap + self.reserve {
            self.head = (self.head + 1) & (self.ring.len() - 1);
            self.len -= 1;
            self.dropped = true;
        } else if self.len == self.ring.len() {
            self.grow();
        }
        let at = (self.head + self.len) & (self.ring.len() - 1);
        self.len += 1;
        &mut self.ring[at]
    }

    /// Doubles the ring, the events in order from slot 0.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let n = self.ring.len();
        let mut ring = Vec::with_capacity(2 * n);
        ring.extend_from_slice(&self.ring[self.head..]);
        ring.extend_from_slice(&self.ring[..self.head]);
        ring.resize(2 * n, blank());
        self.ring = ring;
        self.head = 0;
    }

    /// The oldest event, taken out of the queue (its slot is reused by a later push).
    #[inline(always)]
    fn pop(&mut self) -> Option<&ptl_event_t> {
        if self.len == 0 {
            return None;
        }
        let at = self.head;
        self.head = (at + 1) & (self.ring.len() - 1);
        self.len -= 1;
        Some(&self.ring[at])
    }

    /// Slots free outside the reserve.
    #[inline(always)]
    fn room(&self) -> usize {
        self.cap.saturating_sub(self.len)
    }
}

/// A memory descriptor.
pub struct Md {
    region: Region,
    options: u32,
    eq: u32,
    ct: u32,
    /// Operations still using it (`PtlMDRelease` answers `PTL_IN_USE`).
    pending: u32,
}

/// A list entry or match list entry.
pub struct Entry {
    region: Region,
    ct: u32,
    uid: u32,
    options: u32,
    match_id: ptl_process_t,
    match_bits: u64,
    ignore_bits: u64,
    min_free: u64,
    local_offset: u64,
    user_ptr: usize,
    pt: u32,
    list: u8,
    linked: bool,
    /// Unexpected headers still pointing into this (overflow) entry's memory.
    unexp_refs: u32,
    /// Unlinked automatically while headers pointed into it: `PTL_EVENT_AUTO_FREE` is due when
    /// the last one goes.
    free_due: bool,
    is_me: bool,
}

/// A message that landed in an overflow entry and waits in the unexpected list.
#[derive(Clone, Copy)]
struct Unexp {
    event: ptl_event_kind_t,
    initiator: ptl_process_t,
    match_bits: u64,
    rlength: u64,
    mlength: u64,
    remote_offset: u64,
    hdr_data: u64,
    start: usize,
    uid: u32,
    entry: u32,
    op: u8,
    dt: u8,
}

/// A priority or overflow list: the slots of its entries, in order.
///
/// The front entry — the one an arrival usually matches — is unlinked in O(1): the list starts
/// at `head` of the vector, whose earlier slots are gone (reclaimed when the list empties, or
/// when they are half the vector).
#[derive(Default)]
struct List {
    v: Vec<u32>,
    head: usize,
}

impl List {
    fn is_empty(&self) -> bool {
        self.v.len() == self.head
    }

    #[inline(always)]
    fn push_back(&mut self, idx: u32) {
        self.v.push(idx);
    }

    #[inline(always)]
    fn front(&self) -> Option<&u32> {
        self.v.get(self.head)
    }

    /// The entries, front first.
    fn as_slice(&self) -> &[u32] {
        &self.v[self.head..]
    }

    /// Unlinks the front entry (the list is not empty).
    #[inline(always)]
    fn pop_front(&mut self) {
        self.head += 1;
        if self.head >= self.v.len() {
            self.v.clear();
            self.head = 0;
        } else if self.head >= Self::COMPACT_AT && 2 * self.head >= self.v.len() {
            self.compact();
        }
    }

    /// Gone slots at the front worth moving the rest for.
    const COMPACT_AT: usize = 64;

    #[inline(never)]
    fn compact(&mut self) {
        self.v.drain(..self.head);
        self.head = 0;
    }

    /// Unlinks the entry `pos` places from the front.
    fn remove(&mut self, pos: usize) {
        if pos == 0 {
            self.pop_front();
        } else {
            self.v.remove(self.head + pos);
        }
    }

    /// Keeps the entries `f` approves, in order.
    fn retain(&mut self, f: impl FnMut(&u32) -> bool) {
        self.compact();
        self.v.retain(f);
    }
}

/// A portal table entry.
pub struct Pt {
    options: u32,
    eq: u32,
    /// The slot of `eq` in the interface's queues, looked up once at `PtlPTAlloc` for the
    /// arrival path ([`NO_SLOT`] for none). Always names the live queue: `PtlEQFree` clears it
    /// in every entry that names the queue.
    eq_slot: u32,
    enabled: bool,
    priority: List,
    overflow: List,
    unexpected: VecDeque<Unexp>,
}

/// A network interface.
pub struct Ni {
    pub options: u32,
    refs: u32,
    pub limits: ptl_ni_limits_t,
    pts: Vec<Option<Pt>>,
    eqs: Slab<Eq>,
    cts: Slab<ptl_ct_event_t>,
    mds: Slab<Md>,
    entries: Slab<Entry>,
    /// Logical rank -> job rank.
    map: Vec<u32>,
    /// Job rank -> logical rank.
    rev: Vec<u32>,
    sr: [i32; 3],
}

impl Ni {
    fn matching(&self) -> bool {
        self.options & PTL_NI_MATCHING != 0
    }
    fn logical(&self) -> bool {
        self.options & PTL_NI_LOGICAL != 0
    }
}

/// An initiator's operation in flight.
struct Op {
    ni: usize,
    kind: u8,
    md: u32,
    /// Get and fetch operations: where the reply goes.
    get_md: u32,
    local_offset: u64,
    get_offset: u64,
    length: u64,
    user_ptr: usize,
    ack_req: u8,
    target: ptl_process_t,
    pt_index: u32,
    match_bits: u64,
    hdr_data: u64,
    /// `PTL_EVENT_SEND` posted (or due with the response, for cross-memory puts).
    sent: bool,
    /// An ACK or REPLY record will come back.
    awaits: bool,
    /// The target reads the data directly: `PTL_EVENT_SEND` waits for its acknowledgment.
    cma_put: bool,
    /// The target's job rank: only its ACK or REPLY records may complete the operation.
    peer: u32,
}

enum Payload {
    Empty,
    Mem { region: Region, off: u64 },
    Bytes(Vec<u8>),
}

/// What a `PTL_EVENT_SEND` reports.
struct SendInfo {
    md: u32,
    user_ptr: usize,
    length: u64,
    off: u64,
    target: ptl_process_t,
    pt_index: u32,
    match_bits: u64,
    hdr_data: u64,
}

/// The arguments of a put ([`State::put_now`]), as `PtlPut` names them.
pub struct Put {
    /// The memory descriptor's handle.
    pub md_h: u32,
    /// Offset of the data in the descriptor.
    pub local_offset: u64,
    /// Bytes to put.
    pub length: u64,
    /// The target process.
    pub target: ptl_process_t,
    /// The target's portal table entry.
    pub pt_index: u32,
    /// Match bits.
    pub match_bits: u64,
    /// Offset asked for at the target.
    pub remote_offset: u64,
    /// The initiator's value for the send event.
    pub user_ptr: usize,
    /// Header data (64 bits delivered with the message).
    pub hdr_data: u64,
}

/// A record (or fragmented message) waiting for ring space.
struct Tx {
    hdr: Hdr,
    kind: u8,
    flags: u8,
    payload: Payload,
    len: u64,
    sent: u64,
    /// Post `PTL_EVENT_SEND` for this operation when all is written.
    op: u32,
}

/// A fragmented message being staged by its receiver.
struct Staged {
    hdr: Hdr,
    buf: Vec<u8>,
    /// Replies: the fragments go straight to the initiator's MD.
    reply: bool,
    got: u64,
    /// Payload bytes the message carries in all (at most, for a reply).
    total: u64,
}

/// Bytes of staging reserved up front for a fragmented message (the rest grows as fragments
/// arrive): the announced length is the peer's word, not an allocation size.
const STAGE_RESERVE: u64 = 1 << 20;

/// Payload bytes a request described by `h` carries in all (its records together), as the
/// initiator writes it; `None` for a request no initiator writes (an atomic beyond
/// [`MAX_ATOMIC`]).
fn request_bytes(h: &Hdr) -> Option<u64> {
    match h.kind() {
        kind::PUT if h.flags() & flag::CMA != 0 => Some(0),
        kind::PUT => Some(h.length),
        kind::GET => Some(0),
        kind::ATOMIC | kind::FETCH if h.length <= MAX_ATOMIC => {
            let (op, dt) = (h.extra as u8, (h.extra >> 8) as u8);
            // As the target splits it: the operand (compare-and-swap family), then the data.
            let olen = if atomics::needs_operand(op) {
                atomics::elem_size(dt).unwrap_or(0)
            } else {
                0
            };
            Some(h.length + olen as u64)
        }
        _ => None,
    }
}

/// Everything about one peer (a job rank).
#[derive(Default)]
struct Peer {
    seg: Option<Segment>,
    prod: Producer,
    txq: VecDeque<Tx>,
    cons: Consumer,
    staged: Option<Staged>,
    /// Malformed records from this peer, dropped (the first one is reported on stderr).
    bad: u64,
}

/// The process's Portals state.
pub struct State {
    pub job: Job,
    pub cfg: Config,
    pub inits: u32,
    own: Option<Segment>,
    peers: Vec<Peer>,
    pub nis: [Option<Ni>; NIS],
    ops: Slab<Op>,
    max_payload: usize,
    sent_done: Vec<u32>,
    uid: u32,
}

// SAFETY: the raw pointers inside are addresses of the user's memory (regions, user_ptr values,
// event start addresses), never dereferenced by another thread except under the state's lock.
unsafe impl Send for State {}

/// An `ptl_event_t` with nothing in it.
fn blank() -> ptl_event_t {
    ptl_event_t::default()
}

/// The target's full event of a successful operation described by `h`: `mlength` bytes at
/// `start` of the entry with `user_ptr`, on list `list`, from `init`.
#[inline(always)]
fn target_event(
    type_: ptl_event_kind_t,
    h: &Hdr,
    start: *mut u8,
    user_ptr: usize,
    mlength: u64,
    init: ptl_process_t,
    list: ptl_list_t,
) -> ptl_event_t {
    ptl_event_t {
        type_,
        start: start.cast(),
        user_ptr: user_ptr as *mut c_void,
        hdr_data: h.hdr_data,
        match_bits: h.match_bits,
        rlength: h.length,
        mlength,
        remote_offset: h.offset,
        initiator: init,
        uid: h.uid,
        pt_index: h.pt_index,
        ptl_list: list,
        ni_fail_type: PTL_NI_OK,
        atomic_operation: h.extra as u8,
        atomic_type: (h.extra >> 8) as u8,
    }
}

/// Whether this is the first malformed record of the process (the one reported on stderr: a
/// hostile peer must not be able to flood it).
fn first_report() -> bool {
    static REPORTED: AtomicBool = AtomicBool::new(false);
    !REPORTED.swap(true, Ordering::Relaxed)
}

/// Portal table entry `i` of `ni`, if allocated.
fn pt_mut(ni: &mut Ni, i: u32) -> Option<&mut Pt> {
    ni.pts.get_mut(i as usize).and_then(|p| p.as_mut())
}

/// The event queue of portal table entry `i` ([`PTL_EQ_NONE`] if there is no such entry).
fn pt_eq(ni: &Ni, i: u32) -> u32 {
    ni.pts
        .get(i as usize)
        .and_then(|p| p.as_ref())
        .map_or(PTL_EQ_NONE, |p| p.eq)
}

/// Adds one to status register `reg` of `ni` (it wraps, as a hardware counter does).
fn count_sr(ni: &mut Ni, reg: ptl_sr_index_t) {
    if let Some(r) = ni.sr.get_mut(reg as usize) {
        *r = r.wrapping_add(1);
    }
}

/// A message dropped at `ni`.
fn count_drop(ni: &mut Ni) {
    count_sr(ni, PTL_SR_DROP_COUNT);
}

fn ni_slot(options: u32) -> usize {
    let matching = options & PTL_NI_MATCHING != 0;
    let physical = options & PTL_NI_PHYSICAL != 0;
    (!matching as usize) + 2 * physical as usize
}

/// The source of a message's data at the target.
enum Src<'a> {
    Bytes(&'a [u8]),
    Cma { pid: libc::pid_t, addr: u64 },
}

impl Src<'_> {
    /// Copies `n` bytes starting at `at` of the message into `region` at `off`.
    #[inline]
    fn deposit(&self, region: &Region, off: u64, at: u64, n: u64) -> bool {
        if n == 0 {
            return true;
        }
        match self {
            // SAFETY: the entry's memory is the user's promise; the range is inside it
            // (mlength was clipped to it); the message bytes are inside the slice.
            Src::Bytes(b) => unsafe {
                region.write_at(off, b.as_ptr().add(at as usize), n);
                true
            },
            Src::Cma { pid, addr } => region::cma(*pid, region, off, addr + at, n, true),
        }
    }
}

impl State {
    pub fn new(job: Job) -> State {
        let cfg = Config::from_env(&job);
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        State {
            max_payload: Producer::max_payload(cfg.ring_bytes),
            job,
            cfg,
            inits: 0,
            own: None,
            peers: Vec::new(),
            nis: [None, None, None, None],
            ops: Slab::default(),
            sent_done: Vec::new(),
            uid,
        }
    }

    fn geometry(&self) -> Geometry {
        Geometry {
            ranks: self.job.size as usize,
            ring_bytes: self.cfg.ring_bytes,
        }
    }

    // ------------------------------------------------------------------ interfaces

    /// `PtlNIInit`.
    pub fn ni_init(
        &mut self,
        options: u32,
        pid: u32,
        desired: Option<&ptl_ni_limits_t>,
    ) -> Result<(usize, ptl_ni_limits_t), i32> {
        let m = options & (PTL_NI_MATCHING | PTL_NI_NO_MATCHING);
        let a = options & (PTL_NI_LOGICAL | PTL_NI_PHYSICAL);
        if options & !PTL_NI_INIT_OPTIONS_MASK != 0
            || m == 0
            || m == PTL_NI_MATCHING | PTL_NI_NO_MATCHING
            || a == 0
            || a == PTL_NI_LOGICAL | PTL_NI_PHYSICAL
        {
            return Err(PTL_ARG_INVALID);
        }
        if pid != PTL_PID_ANY && pid != self.job.rank {
            return Err(PTL_PID_IN_USE);
        }
        let slot = ni_slot(options);
        if let Some(ni) = self.nis[slot].as_mut() {
            ni.refs += 1;
            return Ok((slot, ni.limits));
        }
        if self.own.is_none() {
            let geo = self.geometry();
            match Segment::create(&self.job.id, self.job.rank, geo) {
                Ok(seg) => self.own = Some(seg),
                Err(e) => {
                    eprintln!(
                        "portals4-shmem: cannot create the segment of rank {} of job {}: {e}",
                        self.job.rank, self.job.id
                    );
                    return Err(PTL_NO_SPACE);
                }
            }
            self.peers = (0..self.job.size).map(|_| Peer::default()).collect();
        }
        let mut limits = ptl_ni_limits_t {
            max_entries: MAX_OBJECTS as i32,
            max_unexpected_headers: 1 << 20,
            max_mds: MAX_OBJECTS as i32,
            max_cts: MAX_OBJECTS as i32,
            max_eqs: MAX_OBJECTS as i32,
            max_pt_index: MAX_PT_INDEX as i32,
            max_iovecs: 1 << 16,
            max_list_size: MAX_OBJECTS as i32,
            max_triggered_ops: 0,
            max_msg_size: u32::MAX as u64,
            max_atomic_size: MAX_ATOMIC,
            max_fetch_atomic_size: MAX_ATOMIC,
            max_waw_ordered_size: u32::MAX as u64,
            max_war_ordered_size: u32::MAX as u64,
            max_volatile_size: self.max_payload as u64,
            features: 0,
        };
        if let Some(d) = desired {
            // Smaller limits than ours are granted as asked; larger ones are capped.
            let cap = |want: i32, have: i32| if want > 0 { want.min(have) } else { have };
            limits.max_pt_index = cap(d.max_pt_index, limits.max_pt_index).max(63);
            limits.max_eqs = cap(d.max_eqs, limits.max_eqs);
            limits.max_cts = cap(d.max_cts, limits.max_cts);
            limits.max_mds = cap(d.max_mds, limits.max_mds);
            limits.max_entries = cap(d.max_entries, limits.max_entries);
            limits.max_list_size = cap(d.max_list_size, limits.max_list_size);
            limits.max_unexpected_headers =
                cap(d.max_unexpected_headers, limits.max_unexpected_headers);
        }
        let n = self.job.size;
        self.nis[slot] = Some(Ni {
            options,
            refs: 1,
            limits,
            pts: (0..=limits.max_pt_index).map(|_| None).collect(),
            eqs: Slab::tagged(hk::EQ, slot),
            cts: Slab::default(),
            mds: Slab::default(),
            entries: Slab::default(),
            map: (0..n).collect(),
            rev: (0..n).collect(),
            sr: [0; 3],
        });
        Ok((slot, limits))
    }

    /// `PtlNIFini`.
    pub fn ni_fini(&mut self, slot: usize) -> i32 {
        match self.nis[slot].as_mut() {
            None => PTL_ARG_INVALID,
            Some(ni) => {
                ni.refs -= 1;
                if ni.refs == 0 {
                    self.nis[slot] = None;
                }
                PTL_OK
            }
        }
    }

    /// Drops everything (last `PtlFini`): the segment's name goes; mappings go.
    pub fn shutdown(&mut self) {
        // Give queued records a last chance (acknowledgments peers may wait for).
        for _ in 0..1000 {
            self.progress();
            if self.peers.iter().all(|p| p.txq.is_empty()) {
                break;
            }
            std::thread::yield_now();
        }
        self.nis = [None, None, None, None];
        if self.own.take().is_some() {
            Segment::unlink(&self.job.id, self.job.rank);
        }
        self.peers.clear();
        self.ops = Slab::default();
    }

    pub fn ni(&self, slot: usize) -> Result<&Ni, i32> {
        self.nis
            .get(slot)
            .and_then(|n| n.as_ref())
            .ok_or(PTL_ARG_INVALID)
    }

    pub fn ni_mut(&mut self, slot: usize) -> Result<&mut Ni, i32> {
        self.nis
            .get_mut(slot)
            .and_then(|n| n.as_mut())
            .ok_or(PTL_ARG_INVALID)
    }

    /// `PtlSetMap`: entry `i` is the physical id of logical rank `i`.
    pub fn set_map(&mut self, slot: usize, map: &[ptl_process_t]) -> i32 {
        let size = self.job.size;
        let ni = match self.ni_mut(slot) {
            Ok(n) => n,
            Err(e) => return e,
        };
        if !ni.logical() {
            return PTL_ARG_INVALID;
        }
        let mut m = Vec::with_capacity(map.len());
        let mut rev = vec![u32::MAX; size as usize];
        for (i, p) in map.iter().enumerate() {
            let ph = p.phys();
            if ph.pid >= size || (ph.nid != 0 && ph.nid != PTL_NID_ANY) {
                return PTL_ARG_INVALID;
            }
            m.push(ph.pid);
            if rev[ph.pid as usize] == u32::MAX {
                rev[ph.pid as usize] = i as u32;
            }
        }
        ni.map = m;
        ni.rev = rev;
        PTL_OK
    }

    /// `PtlGetMap`.
    pub fn get_map(&self, slot: usize, out: &mut [ptl_process_t]) -> Result<u64, i32> {
        let ni = self.ni(slot)?;
        if !ni.logical() {
            return Err(PTL_ARG_INVALID);
        }
        for (o, &pid) in out.iter_mut().zip(ni.map.iter()) {
            *o = ptl_process_t::from_phys(0, pid);
        }
        Ok(ni.map.len() as u64)
    }

    /// `PtlGetId` (logical: our rank; physical: nid 0, pid = job rank).
    pub fn get_id(&self, slot: usize, physical: bool) -> Result<ptl_process_t, i32> {
        let ni = self.ni(slot)?;
        if ni.logical() && !physical {
            let r = ni
                .rev
                .get(self.job.rank as usize)
                .copied()
                .unwrap_or(u32::MAX);
            Ok(ptl_process_t::from_rank(r))
        } else {
            Ok(ptl_process_t::from_phys(0, self.job.rank))
        }
    }

    pub fn uid(&self) -> u32 {
        self.uid
    }

    pub fn status(&self, slot: usize, reg: i32) -> Result<i32, i32> {
        let ni = self.ni(slot)?;
        ni.sr
            .get(usize::try_from(reg).map_err(|_| PTL_ARG_INVALID)?)
            .copied()
            .ok_or(PTL_ARG_INVALID)
    }

    // ------------------------------------------------------------------ portal table

    pub fn pt_alloc(&mut self, slot: usize, options: u32, eq: u32, req: u32) -> Result<u32, i32> {
        let ni = self.ni_mut(slot)?;
        if options & !PTL_PT_ALLOC_OPTIONS_MASK != 0 {
            return Err(PTL_ARG_INVALID);
        }
        let eq_key = if eq == PTL_EQ_NONE {
            None
        } else {
            let (k, s, i, g) = split(eq);
            if k != hk::EQ || s != slot || ni.eqs.get(i, g).is_none() {
                return Err(PTL_ARG_INVALID);
            }
            Some((i, g))
        };
        if options & PTL_PT_FLOWCTRL != 0 && eq_key.is_none() {
            return Err(PTL_PT_EQ_NEEDED);
        }
        let idx = if req == PTL_PT_ANY {
            ni.pts.iter().position(|p| p.is_none()).ok_or(PTL_PT_FULL)? as u32
        } else {
            let p = ni.pts.get(req as usize).ok_or(PTL_ARG_INVALID)?;
            if p.is_some() {
                return Err(PTL_PT_IN_USE);
            }
            req
        };
        if let (Some((i, g)), true) = (eq_key, options & PTL_PT_FLOWCTRL != 0) {
            if let Some(e) = ni.eqs.get_mut(i, g) {
                e.reserve += 1;
            }
        }
        ni.pts[idx as usize] = Some(Pt {
            options,
            eq,
            eq_slot: eq_key.map_or(NO_SLOT, |(i, _)| i),
            enabled: true,
            priority: List::default(),
            overflow: List::default(),
            unexpected: VecDeque::new(),
        });
        Ok(idx)
    }

    pub fn pt_free(&mut self, slot: usize, idx: u32) -> i32 {
        let ni = match self.ni_mut(slot) {
            Ok(n) => n,
            Err(e) => return e,
        };
        let pt = match ni.pts.get(idx as usize).and_then(|p| p.as_ref()) {
            Some(p) => p,
            None => return PTL_ARG_INVALID,
        };
        if !pt.priority.is_empty() || !pt.overflow.is_empty() {
            return PTL_IN_USE;
        }
        let (eq, fc) = (pt.eq, pt.options & PTL_PT_FLOWCTRL != 0);
        let unexpected = ni
            .pts
            .get_mut(idx as usize)
            .and_then(Option::take)
            .map(|p| p.unexpected)
            .unwrap_or_default();
        for u in unexpected {
            Self::drop_unexp_ref(ni, u.entry, None);
        }
        if fc {
            let (_, _, i, g) = split(eq);
            if let Some(e) = ni.eqs.get_mut(i, g) {
                e.reserve = e.reserve.saturating_sub(1);
            }
        }
        PTL_OK
    }

    pub fn pt_enable(&mut self, slot: usize, idx: u32, on: bool) -> i32 {
        if !on {
            // Everything already arrived is processed first (the call "blocks until all
            // messages being processed are completed").
            self.progress();
        }
        let ni = match self.ni_mut(slot) {
            Ok(n) => n,
            Err(e) => return e,
        };
        match ni.pts.get_mut(idx as usize).and_then(|p| p.as_mut()) {
            Some(p) => {
                p.enabled = on;
                PTL_OK
            }
            None => PTL_ARG_INVALID,
        }
    }

    // ------------------------------------------------------------------ EQ, CT, MD

    pub fn eq_alloc(&mut self, slot: usize, count: u64) -> Result<u32, i32> {
        let ni = self.ni_mut(slot)?;
        let cap = count.clamp(1, 1 << 24) as usize;
        let (i, g) = ni.eqs.insert(Eq::new(cap)).ok_or(PTL_NO_SPACE)?;
        Ok(handle(hk::EQ, slot, i, g))
    }

    pub fn eq_free(&mut self, h: u32) -> i32 {
        let (k, s, i, g) = split(h);
        match self.ni_mut(s) {
            Ok(ni) if k == hk::EQ => match ni.eqs.remove(i, g) {
                Some(_) => {
                    // The slot may hold another queue later: no portal table entry keeps it.
                    for pt in ni.pts.iter_mut().flatten() {
                        if pt.eq_slot == i {
                            pt.eq_slot = NO_SLOT;
                        }
                    }
                    PTL_OK
                }
                None => PTL_ARG_INVALID,
            },
            _ => PTL_ARG_INVALID,
        }
    }

    /// Takes the next event of `h`: `Ok(None)` when empty; `Ok(Some((ev, dropped)))`.
    pub fn eq_take(&mut self, h: u32) -> Result<Option<(ptl_event_t, bool)>, i32> {
        let eq = self.nis[(h >> 27 & 3) as usize]
            .as_mut()
            .ok_or(PTL_ARG_INVALID)?
            .eqs
            .by_handle_mut(h)
            .ok_or(PTL_ARG_INVALID)?;
        Ok(eq.pop().copied().map(|ev| {
            let d = std::mem::take(&mut eq.dropped);
            (ev, d)
        }))
    }

    /// [`State::eq_take`] straight into `out`: `PTL_OK`, `PTL_EQ_DROPPED`, `PTL_EQ_EMPTY` or
    /// `PTL_ARG_INVALID` (the event is not copied through a return value on the polling path).
    ///
    /// # Safety
    /// `out` must be valid for a write.
    #[inline]
    pub unsafe fn eq_take_into(&mut self, h: u32, out: *mut ptl_event_t) -> i32 {
        // The queue's slab checks the kind, interface and generation at once.
        let Some(eq) = self.nis[(h >> 27 & 3) as usize]
            .as_mut()
            .and_then(|n| n.eqs.by_handle_mut(h))
        else {
            return PTL_ARG_INVALID;
        };
        match eq.pop() {
            Some(ev) => {
                // SAFETY: the caller's promise.
                unsafe { out.write(*ev) };
                if std::mem::take(&mut eq.dropped) {
                    PTL_EQ_DROPPED
                } else {
                    PTL_OK
                }
            }
            None => PTL_EQ_EMPTY,
        }
    }

    pub fn ct_alloc(&mut self, slot: usize) -> Result<u32, i32> {
        let ni = self.ni_mut(slot)?;
        let (i, g) = ni
            .cts
            .insert(ptl_ct_event_t::default())
            .ok_or(PTL_NO_SPACE)?;
        Ok(handle(hk::CT, slot, i, g))
    }

    pub fn ct_mut(&mut self, h: u32) -> Result<&mut ptl_ct_event_t, i32> {
        let (k, s, i, g) = split(h);
        if k != hk::CT {
            return Err(PTL_ARG_INVALID);
        }
        self.ni_mut(s)?.cts.get_mut(i, g).ok_or(PTL_ARG_INVALID)
    }

    pub fn ct_free(&mut self, h: u32) -> i32 {
        let (k, s, i, g) = split(h);
        match self.ni_mut(s) {
            Ok(ni) if k == hk::CT => match ni.cts.remove(i, g) {
                Some(_) => PTL_OK,
                None => PTL_ARG_INVALID,
            },
            _ => PTL_ARG_INVALID,
        }
    }

    fn check_eq_ct(ni: &Ni, slot: usize, eq: u32, ct: u32) -> bool {
        let eq_ok = eq == PTL_EQ_NONE || {
            let (k, s, i, g) = split(eq);
            k == hk::EQ && s == slot && ni.eqs.get(i, g).is_some()
        };
        let ct_ok = ct == PTL_CT_NONE || {
            let (k, s, i, g) = split(ct);
            k == hk::CT && s == slot && ni.cts.get(i, g).is_some()
        };
        eq_ok && ct_ok
    }

    pub fn md_bind(&mut self, slot: usize, md: &ptl_md_t) -> Result<u32, i32> {
        let ni = self.ni_mut(slot)?;
        if md.options & !PTL_MD_OPTIONS_MASK != 0
            || !Self::check_eq_ct(ni, slot, md.eq_handle, md.ct_handle)
            || (md.start.is_null() && md.length > 0 && md.options & PTL_IOVEC == 0)
        {
            return Err(PTL_ARG_INVALID);
        }
        // SAFETY: the user's descriptor; an iovec array is read (and copied) now.
        let region =
            unsafe { Region::new(md.start as *mut u8, md.length, md.options & PTL_IOVEC != 0) };
        let (i, g) = ni
            .mds
            .insert(Md {
                region,
                options: md.options,
                eq: md.eq_handle,
                ct: md.ct_handle,
                pending: 0,
            })
            .ok_or(PTL_NO_SPACE)?;
        Ok(handle(hk::MD, slot, i, g))
    }

    pub fn md_release(&mut self, h: u32) -> i32 {
        let (k, s, i, g) = split(h);
        let ni = match self.ni_mut(s) {
            Ok(n) if k == hk::MD => n,
            _ => return PTL_ARG_INVALID,
        };
        match ni.mds.get(i, g) {
            None => PTL_ARG_INVALID,
            Some(md) if md.pending > 0 => PTL_IN_USE,
            Some(_) => {
                ni.mds.remove(i, g);
                PTL_OK
            }
        }
    }

    // ------------------------------------------------------------------ events

    /// Posts a full event to `eq` (if any).
    #[inline(always)]
    fn post(ni: &mut Ni, eq: u32, ev: ptl_event_t) {
        if eq == PTL_EQ_NONE {
            return;
        }
        let (_, _, i, g) = split(eq);
        if let Some(e) = ni.eqs.get_mut(i, g) {
            *e.push_slot() = ev;
        }
    }

    /// Counts on `ct`: a success adds `bytes` (byte counting) or one; a failure adds one.
    fn count(ni: &mut Ni, ct: u32, ok: bool, bytes: Option<u64>) {
        if ct == PTL_CT_NONE {
            return;
        }
        let (_, _, i, g) = split(ct);
        if let Some(c) = ni.cts.get_mut(i, g) {
            // Counters wrap, as a NIC's do (a peer decides how many bytes arrive).
            if ok {
                c.success = c.success.wrapping_add(bytes.unwrap_or(1));
            } else {
                c.failure = c.failure.wrapping_add(1);
            }
        }
    }

    // ------------------------------------------------------------------ list entries

    /// `PtlMEAppend` / `PtlLEAppend`.
    #[allow(clippy::too_many_arguments)]
    pub fn append(
        &mut self,
        slot: usize,
        pt_index: u32,
        me: &ptl_me_t,
        list: u8,
        user_ptr: usize,
        is_me: bool,
    ) -> Result<u32, i32> {
        let ni = self.ni_mut(slot)?;
        if ni.matching() != is_me || list > PTL_OVERFLOW_LIST {
            return Err(PTL_ARG_INVALID);
        }
        let mask = if is_me {
            PTL_ME_APPEND_OPTIONS_MASK
        } else {
            PTL_LE_APPEND_OPTIONS_MASK
        };
        if me.options & !mask != 0 || !Self::check_eq_ct(ni, slot, PTL_EQ_NONE, me.ct_handle) {
            return Err(PTL_ARG_INVALID);
        }
        let Some(pt) = ni.pts.get(pt_index as usize).and_then(|p| p.as_ref()) else {
            return Err(PTL_ARG_INVALID);
        };
        // A priority entry searches the unexpected list first (when there is one).
        let sweep = list == PTL_PRIORITY_LIST && !pt.unexpected.is_empty();
        // SAFETY: the user's entry description; an iovec array is copied now.
        let region =
            unsafe { Region::new(me.start as *mut u8, me.length, me.options & PTL_IOVEC != 0) };
        let entry = Entry {
            region,
            ct: me.ct_handle,
            uid: me.uid,
            options: me.options,
            match_id: me.match_id,
            match_bits: me.match_bits,
            ignore_bits: me.ignore_bits,
            min_free: me.min_free,
            local_offset: 0,
            user_ptr,
            pt: pt_index,
            list,
            // Linked below, unless the sweep consumes it (it is removed then).
            linked: true,
            unexp_refs: 0,
            free_due: false,
            is_me,
        };
        let logical = ni.logical();
        let (idx, gen) = ni.entries.insert(entry).ok_or(PTL_NO_SPACE)?;
        let h = handle(if is_me { hk::ME } else { hk::LE }, slot, idx, gen);
        // Every match in the unexpected list is an overflow event; a use-once entry takes one
        // and is never linked.
        if sweep && Self::sweep_unexpected(ni, pt_index, idx, logical, true) {
            if let Some(e) = ni.entries.remove(idx, gen) {
                Self::unlink_event(ni, pt_index, &e);
            }
            return Ok(h);
        }
        let Some(pt) = pt_mut(ni, pt_index) else {
            // Checked above and nothing between frees it; never leave the entry behind.
            ni.entries.remove(idx, gen);
            return Err(PTL_FAIL);
        };
        if list == PTL_PRIORITY_LIST {
            pt.priority.push_back(idx);
        } else {
            pt.overflow.push_back(idx);
        }
        if me.options & PTL_ME_EVENT_LINK_DISABLE == 0 {
            let eq = pt.eq;
            let ev = ptl_event_t {
                type_: PTL_EVENT_LINK,
                user_ptr: user_ptr as *mut c_void,
                pt_index,
                ptl_list: list,
                ni_fail_type: PTL_NI_OK,
                ..blank()
            };
            Self::post(ni, eq, ev);
        }
        Ok(h)
    }

    /// Matches the entry in slot `idx` against the unexpected list of `pt_index`, delivering an
    /// overflow event for each match (`deliver`; else a search event). Returns whether a
    /// use-once entry was consumed.
    fn sweep_unexpected(
        ni: &mut Ni,
        pt_index: u32,
        idx: u32,
        logical: bool,
        deliver: bool,
    ) -> bool {
        let Some(once) = ni.entries.at(idx).map(|e| e.options & PTL_ME_USE_ONCE != 0) else {
            return false;
        };
        let mut i = 0;
        let mut consumed = false;
        // (The field, not `pt_mut`: the entries are borrowed beside it.)
        while let Some(pt) = ni.pts.get_mut(pt_index as usize).and_then(|p| p.as_mut()) {
            let Some(&u) = pt.unexpected.get(i) else {
                break;
            };
            let Some(e) = ni.entries.at(idx) else {
                break;
            };
            if !Self::id_bits_match(e, &u.initiator, u.match_bits, logical) {
                i += 1;
                continue;
            }
            if deliver {
                pt.unexpected.remove(i);
            } else {
                i += 1;
            }
            Self::overflow_event(ni, pt_index, idx, &u, deliver);
            if deliver {
                Self::drop_unexp_ref(ni, u.entry, Some(pt_index));
            }
            if once {
                consumed = true;
                break;
            }
        }
        consumed
    }

    /// The overflow (or search) event of entry `idx` for unexpected message `u`.
    fn overflow_event(ni: &mut Ni, pt_index: u32, idx: u32, u: &Unexp, deliver: bool) {
        let Some(e) = ni.entries.at(idx) else {
            return;
        };
        let (opts, ct, user_ptr) = (e.options, e.ct, e.user_ptr);
        let eq = pt_eq(ni, pt_index);
        let ev = ptl_event_t {
            type_: if deliver { u.event } else { PTL_EVENT_SEARCH },
            start: u.start as *mut c_void,
            user_ptr: user_ptr as *mut c_void,
            hdr_data: u.hdr_data,
            match_bits: u.match_bits,
            rlength: u.rlength,
            mlength: u.mlength,
            remote_offset: u.remote_offset,
            initiator: u.initiator,
            uid: u.uid,
            pt_index,
            ptl_list: PTL_OVERFLOW_LIST,
            ni_fail_type: PTL_NI_OK,
            atomic_operation: u.op,
            atomic_type: u.dt,
        };
        let quiet = opts & (PTL_ME_EVENT_COMM_DISABLE | PTL_ME_EVENT_SUCCESS_DISABLE) != 0
            || (deliver && opts & PTL_ME_EVENT_OVER_DISABLE != 0);
        if !quiet {
            Self::post(ni, eq, ev);
        }
        if deliver && opts & PTL_ME_EVENT_CT_OVERFLOW != 0 {
            let bytes = (opts & PTL_ME_EVENT_CT_BYTES != 0).then_some(u.mlength);
            Self::count(ni, ct, true, bytes);
        }
    }

    /// One unexpected header pointing into overflow entry `idx` is gone.
    fn drop_unexp_ref(ni: &mut Ni, idx: u32, pt_index: Option<u32>) {
        let gen = ni.entries.gen_of(idx);
        let free = match ni.entries.at_mut(idx) {
            Some(e) => {
                e.unexp_refs = e.unexp_refs.saturating_sub(1);
                e.unexp_refs == 0 && e.free_due
            }
            None => false,
        };
        if free {
            let Some(e) = ni.entries.remove(idx, gen) else {
                return;
            };
            if let Some(p) = pt_index {
                if e.options & PTL_ME_EVENT_UNLINK_DISABLE == 0 {
                    let eq = pt_eq(ni, p);
                    let ev = ptl_event_t {
                        type_: PTL_EVENT_AUTO_FREE,
                        user_ptr: e.user_ptr as *mut c_void,
                        pt_index: p,
                        ptl_list: PTL_OVERFLOW_LIST,
                        ..blank()
                    };
                    Self::post(ni, eq, ev);
                }
            }
        }
    }

    fn unlink_event(ni: &mut Ni, pt_index: u32, e: &Entry) {
        if e.options & PTL_ME_EVENT_UNLINK_DISABLE != 0 {
            return;
        }
        let eq = pt_eq(ni, pt_index);
        let ev = ptl_event_t {
            type_: PTL_EVENT_AUTO_UNLINK,
            user_ptr: e.user_ptr as *mut c_void,
            pt_index,
            ptl_list: e.list,
            ..blank()
        };
        Self::post(ni, eq, ev);
    }

    /// Source and match bits (the part of matching an unexpected header is checked against).
    #[inline(always)]
    fn id_bits_match(e: &Entry, init: &ptl_process_t, bits: u64, logical: bool) -> bool {
        if e.is_me && ((bits ^ e.match_bits) & !e.ignore_bits) != 0 {
            return false;
        }
        if !e.is_me {
            return true;
        }
        if logical {
            let r = e.match_id.rank();
            r == PTL_RANK_ANY || r == init.rank()
        } else {
            let (m, p) = (e.match_id.phys(), init.phys());
            (m.nid == PTL_NID_ANY || m.nid == p.nid) && (m.pid == PTL_PID_ANY || m.pid == p.pid)
        }
    }

    /// `PtlMEUnlink` / `PtlLEUnlink`.
    pub fn unlink(&mut self, h: u32) -> i32 {
        let (k, s, i, g) = split(h);
        let ni = match self.ni_mut(s) {
            Ok(n) if k == hk::ME || k == hk::LE => n,
            _ => return PTL_ARG_INVALID,
        };
        let (pt, list, refs) = match ni.entries.get(i, g) {
            Some(e) if e.linked => (e.pt, e.list, e.unexp_refs),
            _ => return PTL_ARG_INVALID,
        };
        if let Some(p) = ni.pts.get_mut(pt as usize).and_then(|p| p.as_mut()) {
            let l = if list == PTL_PRIORITY_LIST {
                &mut p.priority
            } else {
                &mut p.overflow
            };
            l.retain(|&x| x != i);
        }
        if refs > 0 {
            // Unexpected headers still point into it; the slot lives until they are gone,
            // without an event (it was not unlinked automatically).
            if let Some(e) = ni.entries.get_mut(i, g) {
                e.linked = false;
                e.free_due = true;
                e.options |= PTL_ME_EVENT_UNLINK_DISABLE;
            }
        } else {
            ni.entries.remove(i, g);
        }
        PTL_OK
    }

    /// `PtlMESearch` / `PtlLESearch`.
    pub fn search(
        &mut self,
        slot: usize,
        pt_index: u32,
        me: &ptl_me_t,
        op: u8,
        user_ptr: usize,
        is_me: bool,
    ) -> i32 {
        let ni = match self.ni_mut(slot) {
            Ok(n) => n,
            Err(e) => return e,
        };
        if ni.matching() != is_me
            || op > PTL_SEARCH_DELETE
            || ni
                .pts
                .get(pt_index as usize)
                .and_then(|p| p.as_ref())
                .is_none()
        {
            return PTL_ARG_INVALID;
        }
        let logical = ni.logical();
        let entry = Entry {
            region: Region::Contig {
                ptr: std::ptr::null_mut(),
                len: 0,
            },
            ct: me.ct_handle,
            uid: me.uid,
            options: me.options,
            match_id: me.match_id,
            match_bits: me.match_bits,
            ignore_bits: me.ignore_bits,
            min_free: 0,
            local_offset: 0,
            user_ptr,
            pt: pt_index,
            list: PTL_PRIORITY_LIST,
            linked: false,
            unexp_refs: 0,
            free_due: false,
            is_me,
        };
        let (idx, gen) = match ni.entries.insert(entry) {
            Some(k) => k,
            None => return PTL_NO_SPACE,
        };
        let unexpected = |ni: &Ni| {
            ni.pts
                .get(pt_index as usize)
                .and_then(|p| p.as_ref())
                .map_or(0, |p| p.unexpected.len())
        };
        let before = unexpected(ni);
        let delete = op == PTL_SEARCH_DELETE;
        let found = if delete {
            Self::sweep_unexpected(ni, pt_index, idx, logical, true);
            unexpected(ni) < before
        } else {
            let n = Self::count_search(ni, pt_index, idx, logical);
            n > 0
        };
        let Some(e) = ni.entries.remove(idx, gen) else {
            return PTL_FAIL;
        };
        if !found {
            let eq = pt_eq(ni, pt_index);
            if e.options & PTL_ME_EVENT_COMM_DISABLE == 0 {
                let ev = ptl_event_t {
                    type_: PTL_EVENT_SEARCH,
                    user_ptr: user_ptr as *mut c_void,
                    pt_index,
                    ni_fail_type: PTL_NI_NO_MATCH,
                    ..blank()
                };
                Self::post(ni, eq, ev);
            }
        }
        PTL_OK
    }

    /// Search events (no removal) for entry `idx`; returns how many matched.
    fn count_search(ni: &mut Ni, pt_index: u32, idx: u32, logical: bool) -> usize {
        let Some(once) = ni.entries.at(idx).map(|e| e.options & PTL_ME_USE_ONCE != 0) else {
            return 0;
        };
        let list: Vec<Unexp> = ni
            .pts
            .get(pt_index as usize)
            .and_then(|p| p.as_ref())
            .map(|p| p.unexpected.iter().copied().collect())
            .unwrap_or_default();
        let mut n = 0;
        for u in list {
            if ni
                .entries
                .at(idx)
                .is_some_and(|e| Self::id_bits_match(e, &u.initiator, u.match_bits, logical))
            {
                Self::overflow_event(ni, pt_index, idx, &u, false);
                n += 1;
                if once {
                    break;
                }
            }
        }
        n
    }

    // ------------------------------------------------------------------ initiator

    /// Resolves a target id to a job rank.
    fn target_rank(&self, slot: usize, t: &ptl_process_t) -> Result<u32, i32> {
        let ni = self.ni(slot)?;
        if ni.logical() {
            ni.map
                .get(t.rank() as usize)
                .copied()
                .ok_or(PTL_ARG_INVALID)
        } else {
            let p = t.phys();
            if p.pid < self.job.size && (p.nid == 0 || p.nid == PTL_NID_ANY) {
                Ok(p.pid)
            } else {
                Err(PTL_ARG_INVALID)
            }
        }
    }

    /// Starts a put, get or atomic. `operand`: the swap operand, if any.
    #[allow(clippy::too_many_arguments)]
    pub fn initiate(
        &mut self,
        kind_: u8,
        md_h: u32,
        local_offset: u64,
        get_md_h: u32,
        get_offset: u64,
        length: u64,
        ack_req: u8,
        target: ptl_process_t,
        pt_index: u32,
        match_bits: u64,
        remote_offset: u64,
        user_ptr: usize,
        hdr_data: u64,
        atomic: (u8, u8),
        operand: Option<&[u8]>,
    ) -> i32 {
        let (k, slot, i, g) = split(md_h);
        if k != hk::MD {
            return PTL_ARG_INVALID;
        }
        let dest = match self.target_rank(slot, &target) {
            Ok(d) => d,
            Err(e) => return e,
        };
        if ack_req > PTL_OC_ACK_REQ || pt_index > MAX_PT_INDEX {
            return PTL_ARG_INVALID;
        }
        let Some(ni) = self.nis.get_mut(slot).and_then(|n| n.as_mut()) else {
            return PTL_ARG_INVALID;
        };
        let md = match ni.mds.get(i, g) {
            Some(m) => m,
            None => return PTL_ARG_INVALID,
        };
        let needs_src = kind_ != kind::GET;
        if needs_src
            && local_offset
                .checked_add(length)
                .is_none_or(|e| e > md.region.len())
        {
            return PTL_ARG_INVALID;
        }
        let (gk, gs, gi, gg) = split(get_md_h);
        let reply_region = if kind_ == kind::GET || kind_ == kind::FETCH {
            let gm = if gk == hk::MD && gs == slot {
                ni.mds.get(gi, gg)
            } else {
                None
            };
            match gm {
                Some(m)
                    if get_offset
                        .checked_add(length)
                        .is_some_and(|e| e <= m.region.len()) =>
                {
                    Some(m.region.clone())
                }
                _ => return PTL_ARG_INVALID,
            }
        } else {
            None
        };
        if kind_ == kind::ATOMIC || kind_ == kind::FETCH {
            let (op, dt) = atomic;
            let size = atomics::elem_size(dt).unwrap_or(0) as u64;
            if length > MAX_ATOMIC
                || !atomics::valid(op, dt)
                || size == 0
                || !length.is_multiple_of(size)
                || (kind_ == kind::ATOMIC && atomics::needs_operand(op))
                || (atomics::needs_operand(op) && length != size)
            {
                return PTL_ARG_INVALID;
            }
        }
        let src_region = md.region.clone();
        let cma_ok = self.cfg.cma && length as usize >= self.cfg.cma_threshold;
        let cma_put = kind_ == kind::PUT && cma_ok && src_region.contig().is_some();
        let cma_get = kind_ == kind::GET
            && cma_ok
            && reply_region.as_ref().and_then(|r| r.contig()).is_some();
        let awaits = match kind_ {
            kind::PUT | kind::ATOMIC => ack_req != PTL_NO_ACK_REQ || cma_put,
            _ => true,
        };
        if kind_ == kind::PUT
            && !awaits
            && length <= self.max_payload as u64
            && self.peers[dest as usize].txq.is_empty()
            && self.attach(dest as usize)
        {
            // An unacknowledged put that fits one record: no operation to track; the send
            // event is due as soon as the record is written.
            let mut h = Hdr::new(kind::PUT, 0, slot as u8, ack_req);
            h.match_bits = match_bits;
            h.hdr_data = hdr_data;
            h.length = length;
            h.offset = remote_offset;
            h.pt_index = pt_index;
            h.uid = self.uid;
            let me = self.job.rank as usize;
            let peer = &mut self.peers[dest as usize];
            let pushed = peer.seg.as_ref().is_some_and(|seg| {
                peer.prod
                    .push(seg, me, &h, kind::PUT, 0, length as usize, |dst| {
                        // SAFETY: range checked above; `dst` has room for `length` bytes.
                        unsafe { src_region.read_at(local_offset, dst, length) }
                    })
            });
            if pushed {
                let si = SendInfo {
                    md: md_h,
                    user_ptr,
                    length,
                    off: local_offset,
                    target,
                    pt_index,
                    match_bits,
                    hdr_data,
                };
                self.send_event(slot, &si, PTL_NI_OK);
                return PTL_OK;
            }
        }
        // Both descriptors were found above, and nothing since has released them.
        let Some(ni) = self.nis.get_mut(slot).and_then(|n| n.as_mut()) else {
            return PTL_FAIL;
        };
        match ni.mds.get_mut(i, g) {
            Some(m) => m.pending += 1,
            None => return PTL_FAIL,
        }
        if kind_ == kind::FETCH && get_md_h != md_h {
            match ni.mds.get_mut(gi, gg) {
                Some(m) => m.pending += 1,
                None => {
                    self.release_md_refs(slot, md_h, md_h, kind::PUT);
                    return PTL_FAIL;
                }
            }
        }
        let op = Op {
            ni: slot,
            kind: kind_,
            md: md_h,
            get_md: get_md_h,
            local_offset,
            get_offset,
            length,
            user_ptr,
            ack_req,
            target,
            pt_index,
            match_bits,
            hdr_data,
            sent: kind_ == kind::GET,
            awaits,
            cma_put,
            peer: dest,
        };
        let (oi, og) = match self.ops.insert(op) {
            Some(k) => k,
            None => {
                self.release_md_refs(slot, md_h, get_md_h, kind_);
                return PTL_NO_SPACE;
            }
        };
        let op_id = handle(hk::OP, 0, oi, og);
        let mut flags = 0;
        let mut h = Hdr::new(kind_, 0, slot as u8, ack_req);
        h.match_bits = match_bits;
        h.hdr_data = hdr_data;
        h.length = length;
        h.offset = remote_offset;
        h.op = op_id;
        h.pt_index = pt_index;
        h.uid = self.uid;
        h.extra = atomic.0 as u32 | (atomic.1 as u32) << 8;
        let payload = match kind_ {
            kind::PUT if cma_put => {
                flags |= flag::CMA;
                h.addr = src_region.addr_at(local_offset) as u64;
                Payload::Empty
            }
            kind::PUT => Payload::Mem {
                region: src_region,
                off: local_offset,
            },
            kind::GET => {
                if let (true, Some(r)) = (cma_get, reply_region.as_ref()) {
                    flags |= flag::CMA;
                    h.addr = r.addr_at(get_offset) as u64;
                }
                Payload::Empty
            }
            _ => {
                let mut v = operand.map(|o| o.to_vec()).unwrap_or_default();
                let at = v.len();
                v.resize(at + length as usize, 0);
                // SAFETY: range checked above.
                unsafe { src_region.read_at(local_offset, v.as_mut_ptr().add(at), length) };
                Payload::Bytes(v)
            }
        };
        let len = match &payload {
            Payload::Empty => 0,
            Payload::Mem { .. } => length,
            Payload::Bytes(b) => b.len() as u64,
        };
        let tx = Tx {
            hdr: h,
            kind: kind_,
            flags,
            payload,
            len,
            sent: 0,
            op: if kind_ == kind::GET { 0 } else { op_id },
        };
        let backed_up = !self.peers[dest as usize].txq.is_empty();
        self.peers[dest as usize].txq.push_back(tx);
        self.flush(dest as usize);
        self.finish_sends();
        if backed_up {
            // The peer may be waiting for room in our rings before it can take ours.
            self.progress();
        }
        PTL_OK
    }

    /// The common put, done at once: valid arguments, no acknowledgment, a record's worth of
    /// data (below the cross-memory threshold) and room in the target's ring behind nothing
    /// queued. Writes the record and the send event and returns true; false (nothing done) sends
    /// the put through [`State::initiate`]'s general path, which checks and reports the rest.
    #[inline]
    pub fn put_now(&mut self, p: &Put) -> bool {
        let (k, slot, i, g) = split(p.md_h);
        if k != hk::MD
            || p.pt_index > MAX_PT_INDEX
            || p.length > self.max_payload as u64
            || (self.cfg.cma && p.length as usize >= self.cfg.cma_threshold)
        {
            return false;
        }
        let Some(ni) = self.nis[slot].as_ref() else {
            return false;
        };
        let dest = if ni.logical() {
            match ni.map.get(p.target.rank() as usize) {
                Some(&d) => d as usize,
                None => return false,
            }
        } else {
            let ph = p.target.phys();
            if ph.pid < self.job.size && (ph.nid == 0 || ph.nid == PTL_NID_ANY) {
                ph.pid as usize
            } else {
                return false;
            }
        };
        let Some(md) = ni.mds.get(i, g) else {
            return false;
        };
        if p.local_offset
            .checked_add(p.length)
            .is_none_or(|e| e > md.region.len())
        {
            return false;
        }
        let peer = &mut self.peers[dest];
        let Some(seg) = peer.seg.as_ref() else {
            return false;
        };
        if !peer.txq.is_empty() {
            return false;
        }
        let mut h = Hdr::new(kind::PUT, 0, slot as u8, PTL_NO_ACK_REQ);
        h.match_bits = p.match_bits;
        h.hdr_data = p.hdr_data;
        h.length = p.length;
        h.offset = p.remote_offset;
        h.pt_index = p.pt_index;
        h.uid = self.uid;
        let region = &md.region;
        let pushed = peer.prod.push(
            seg,
            self.job.rank as usize,
            &h,
            kind::PUT,
            0,
            p.length as usize,
            |dst| {
                // SAFETY: range checked above; `dst` has room for `length` bytes.
                unsafe { region.read_at(p.local_offset, dst, p.length) }
            },
        );
        if !pushed {
            return false;
        }
        let (eq, ct, opts, start) = (md.eq, md.ct, md.options, md.region.addr_at(p.local_offset));
        let Some(ni) = self.nis[slot].as_mut() else {
            // Found above; the record is written, so the put is done either way.
            return true;
        };
        if opts & (PTL_MD_EVENT_SEND_DISABLE | PTL_MD_EVENT_SUCCESS_DISABLE) == 0 {
            let ev = ptl_event_t {
                type_: PTL_EVENT_SEND,
                start: start.cast(),
                user_ptr: p.user_ptr as *mut c_void,
                hdr_data: p.hdr_data,
                match_bits: p.match_bits,
                rlength: p.length,
                mlength: p.length,
                initiator: p.target,
                pt_index: p.pt_index,
                ni_fail_type: PTL_NI_OK,
                ..blank()
            };
            Self::post(ni, eq, ev);
        }
        if opts & PTL_MD_EVENT_CT_SEND != 0 {
            let bytes = (opts & PTL_MD_EVENT_CT_BYTES != 0).then_some(p.length);
            Self::count(ni, ct, true, bytes);
        }
        true
    }

    fn release_md_refs(&mut self, slot: usize, md: u32, get_md: u32, kind_: u8) {
        if let Some(ni) = self.nis[slot].as_mut() {
            let (_, _, i, g) = split(md);
            if let Some(m) = ni.mds.get_mut(i, g) {
                m.pending = m.pending.saturating_sub(1);
            }
            if kind_ == kind::FETCH && get_md != md {
                let (_, _, i, g) = split(get_md);
                if let Some(m) = ni.mds.get_mut(i, g) {
                    m.pending = m.pending.saturating_sub(1);
                }
            }
        }
    }

    /// Maps peer `p`'s segment if not yet done. `false`: not there yet.
    fn attach(&mut self, p: usize) -> bool {
        if self.peers[p].seg.is_some() {
            return true;
        }
        match Segment::attach(&self.job.id, p as u32, self.geometry()) {
            Ok(Some(s)) => {
                self.peers[p].seg = Some(s);
                true
            }
            _ => false,
        }
    }

    /// Writes as much of peer `p`'s queue as its ring takes.
    fn flush(&mut self, p: usize) {
        if self.peers[p].txq.is_empty() || !self.attach(p) {
            return;
        }
        let me = self.job.rank as usize;
        let maxp = self.max_payload as u64;
        let peer = &mut self.peers[p];
        let Some(seg) = peer.seg.as_ref() else {
            return;
        };
        while let Some(tx) = peer.txq.front_mut() {
            let first = tx.sent == 0;
            let chunk = (tx.len - tx.sent).min(maxp);
            let more = tx.sent + chunk < tx.len;
            let (k, fl) = if first {
                (tx.kind, tx.flags | if more { flag::MORE } else { 0 })
            } else {
                (kind::DATA, if more { flag::MORE } else { 0 })
            };
            let at = tx.sent;
            let payload = &tx.payload;
            let ok = peer
                .prod
                .push(seg, me, &tx.hdr, k, fl, chunk as usize, |dst| {
                    // SAFETY: `dst` has room for `chunk` bytes; sources are in range.
                    unsafe {
                        match payload {
                            Payload::Empty => {}
                            Payload::Mem { region, off } => region.read_at(off + at, dst, chunk),
                            Payload::Bytes(b) => std::ptr::copy_nonoverlapping(
                                b.as_ptr().add(at as usize),
                                dst,
                                chunk as usize,
                            ),
                        }
                    }
                });
            if !ok {
                break;
            }
            tx.sent += chunk;
            if !more {
                let op = tx.op;
                peer.txq.pop_front();
                if op != 0 {
                    self.sent_done.push(op);
                }
            }
        }
    }

    /// Posts the `PTL_EVENT_SEND`s of operations whose data has fully left.
    fn finish_sends(&mut self) {
        while let Some(op_id) = self.sent_done.pop() {
            let (_, _, oi, og) = split(op_id);
            match self.ops.get(oi, og) {
                Some(o) if !o.sent && !o.cma_put => {}
                _ => continue,
            }
            self.post_send(op_id, PTL_NI_OK);
        }
    }

    /// `PTL_EVENT_SEND` for `op_id`; frees the operation if nothing else is due.
    fn post_send(&mut self, op_id: u32, fail: u8) {
        let (_, _, oi, og) = split(op_id);
        let (slot, md_h, user_ptr, length, off, awaits, target, pt_index, match_bits, hdr_data) = {
            let o = match self.ops.get_mut(oi, og) {
                Some(o) => o,
                None => return,
            };
            o.sent = true;
            (
                o.ni,
                o.md,
                o.user_ptr,
                o.length,
                o.local_offset,
                o.awaits,
                o.target,
                o.pt_index,
                o.match_bits,
                o.hdr_data,
            )
        };
        let ev = SendInfo {
            md: md_h,
            user_ptr,
            length,
            off,
            target,
            pt_index,
            match_bits,
            hdr_data,
        };
        self.send_event(slot, &ev, fail);
        if !awaits {
            self.retire(op_id);
        }
    }

    /// `PTL_EVENT_SEND` (and its count) on the MD of a put or atomic.
    fn send_event(&mut self, slot: usize, si: &SendInfo, fail: u8) {
        let (md_h, user_ptr, length, off, target, pt_index, match_bits, hdr_data) = (
            si.md,
            si.user_ptr,
            si.length,
            si.off,
            si.target,
            si.pt_index,
            si.match_bits,
            si.hdr_data,
        );
        if let Some(ni) = self.nis[slot].as_mut() {
            let (_, _, i, g) = split(md_h);
            if let Some(md) = ni.mds.get(i, g) {
                let (eq, ct, opts) = (md.eq, md.ct, md.options);
                let start = md.region.addr_at(off);
                let ok = fail == PTL_NI_OK;
                let quiet = opts & PTL_MD_EVENT_SEND_DISABLE != 0
                    || (ok && opts & PTL_MD_EVENT_SUCCESS_DISABLE != 0);
                if !quiet {
                    let ev = ptl_event_t {
                        type_: PTL_EVENT_SEND,
                        start: start.cast(),
                        user_ptr: user_ptr as *mut c_void,
                        hdr_data,
                        match_bits,
                        rlength: length,
                        mlength: length,
                        initiator: target,
                        pt_index,
                        ni_fail_type: fail,
                        ..blank()
                    };
                    Self::post(ni, eq, ev);
                }
                if opts & PTL_MD_EVENT_CT_SEND != 0 {
                    let bytes = (opts & PTL_MD_EVENT_CT_BYTES != 0).then_some(length);
                    Self::count(ni, ct, ok, bytes);
                }
            }
        }
    }

    /// Frees an operation and its MD references.
    fn retire(&mut self, op_id: u32) {
        let (_, _, oi, og) = split(op_id);
        if let Some(o) = self.ops.remove(oi, og) {
            self.release_md_refs(o.ni, o.md, o.get_md, o.kind);
        }
    }

    // ------------------------------------------------------------------ progress

    /// Consumes every inbound record and writes queued outbound ones.
    ///
    /// Every Portals call runs this, and most find nothing: the look at each ring is one load
    /// ([`Consumer::ready`]), and the work is out of line.
    #[inline]
    pub fn progress(&mut self) {
        if self.progress_due() {
            self.progress_work();
        }
    }

    /// Whether [`State::progress`] has work: a record in an inbound ring, a record waiting for
    /// ring space, or a send event due.
    #[inline(always)]
    fn progress_due(&mut self) -> bool {
        let Some(own) = self.own.as_ref() else {
            return false;
        };
        let mut busy = !self.sent_done.is_empty();
        for (src, p) in self.peers.iter_mut().enumerate() {
            busy |= p.cons.ready(own, src) || !p.txq.is_empty();
        }
        busy
    }

    /// `PtlEQGet` under the lock: progress, then [`State::eq_take_into`]. The progress work is
    /// a call of its own with the take after it, so the round that finds nothing (a waiting
    /// poller's) keeps its values out of the registers a call must save.
    ///
    /// # Safety
    /// `out` must be valid for a write.
    #[inline(always)]
    pub unsafe fn eq_get(&mut self, h: u32, out: *mut ptl_event_t) -> i32 {
        if self.progress_due() {
            // SAFETY: the caller's promise.
            return unsafe { self.progress_then_take(h, out) };
        }
        // SAFETY: the caller's promise.
        unsafe { self.eq_take_into(h, out) }
    }

    /// # Safety
    /// `out` must be valid for a write.
    #[inline(never)]
    unsafe fn progress_then_take(&mut self, h: u32, out: *mut ptl_event_t) -> i32 {
        self.progress_work();
        // SAFETY: the caller's promise.
        unsafe { self.eq_take_into(h, out) }
    }

    #[inline(never)]
    fn progress_work(&mut self) {
        let n = self.peers.len();
        for src in 0..n {
            // At most a ring's worth from each peer per call: a peer that keeps its ring full
            // (or a broken one whose old records come round again) cannot hold the call, or
            // the other peers, for ever.
            let mut budget = self.cfg.ring_bytes;
            loop {
                if budget == 0 {
                    break;
                }
                let (h, data) = {
                    let Some(own) = self.own.as_ref() else {
                        return;
                    };
                    match self.peers[src].cons.peek(own, src) {
                        Some(x) => x,
                        None => break,
                    }
                };
                // SAFETY: `peek` checked that the payload lies inside the ring, and it stays in
                // place until `advance` below.
                let payload = unsafe { std::slice::from_raw_parts(data, h.payload()) };
                self.on_record(src, &h, payload);
                let Some(own) = self.own.as_ref() else {
                    return;
                };
                self.peers[src].cons.advance(own, src, &h);
                budget = budget.saturating_sub(crate::shm::record_bytes(h.payload()));
            }
            if self.peers[src].cons.broken() && self.peers[src].bad == 0 {
                self.peers[src].bad = 1;
                if first_report() {
                    eprintln!(
                        "portals4-shmem: rank {}: the ring from rank {src} holds a record no \
                         producer writes (past the ring's end, or a misplaced wrap); it is no \
                         longer read, and later malformed records are only counted",
                        self.job.rank
                    );
                }
            }
        }
        for p in 0..n {
            if !self.peers[p].txq.is_empty() {
                self.flush(p);
            }
        }
        if !self.sent_done.is_empty() {
            self.finish_sends();
        }
    }

    /// Malformed records dropped so far, over all peers (a broken ring counts once).
    #[doc(hidden)]
    pub fn malformed_records(&self) -> u64 {
        self.peers.iter().map(|p| p.bad).sum()
    }

    /// Writes `bytes` into this process's inbound ring from `src`, where its consumer reads next
    /// (up to the end of the ring), as a peer's producer would; returns the bytes written. For
    /// fuzzing and tests of what a broken or hostile peer can write: the next
    /// [`State::progress`] consumes them through the production path.
    #[doc(hidden)]
    pub fn write_inbound(&mut self, src: usize, bytes: &[u8]) -> usize {
        let (Some(own), Some(peer)) = (self.own.as_ref(), self.peers.get_mut(src)) else {
            return 0;
        };
        peer.cons.write_raw(own, src, bytes)
    }

    /// A record from `src` that no correct peer writes: dropped, counted in the interface's drop
    /// count (when it names one) and in [`State::malformed_records`], reported on stderr the
    /// first time in the process.
    #[cold]
    #[inline(never)]
    fn bad_record(&mut self, src: usize, h: &Hdr, why: &str) {
        if let Some(ni) = self.nis.get_mut(h.ni() as usize).and_then(|n| n.as_mut()) {
            count_drop(ni);
        }
        let Some(peer) = self.peers.get_mut(src) else {
            return;
        };
        peer.bad += 1;
        if first_report() {
            eprintln!(
                "portals4-shmem: rank {}: dropped a malformed record (kind {}) from rank {src}: \
                 {why}; later ones are only counted",
                self.job.rank,
                h.kind()
            );
        }
    }

    fn on_record(&mut self, src: usize, h: &Hdr, payload: &[u8]) {
        let more = h.flags() & flag::MORE != 0;
        let len = payload.len() as u64;
        match h.kind() {
            kind::DATA => {
                let Some(st) = self.peers[src].staged.as_mut() else {
                    return self.bad_record(src, h, "a fragment of no message");
                };
                let (reply, hdr, at) = (st.reply, st.hdr, st.got);
                let got = match at.checked_add(len) {
                    Some(g) if g <= st.total && (more || reply || g == st.total) => g,
                    _ => {
                        self.peers[src].staged = None;
                        return self.bad_record(src, h, "fragments do not add up to the message");
                    }
                };
                if !reply {
                    if st.buf.try_reserve(payload.len()).is_err() {
                        self.peers[src].staged = None;
                        self.respond_fail(src, &hdr, PTL_NI_UNDELIVERABLE);
                        return;
                    }
                    st.buf.extend_from_slice(payload);
                }
                st.got = got;
                if reply {
                    self.reply_data(src, &hdr, at, payload);
                }
                if !more {
                    if let Some(st) = self.peers[src].staged.take() {
                        if st.reply {
                            self.reply_done(src, &st.hdr);
                        } else {
                            self.on_request(src, &st.hdr, Src::Bytes(&st.buf));
                        }
                    }
                }
            }
            kind::PUT | kind::GET | kind::ATOMIC | kind::FETCH => {
                if self.peers[src].staged.is_some() {
                    self.peers[src].staged = None;
                    self.bad_record(src, h, "a message started inside another");
                }
                let total = request_bytes(h);
                if more {
                    let Some(total) = total.filter(|&t| t > len && h.flags() & flag::CMA == 0)
                    else {
                        self.bad_record(src, h, "a fragmented request of the wrong length");
                        return self.respond_fail(src, h, PTL_NI_UNDELIVERABLE);
                    };
                    let mut buf = Vec::new();
                    if buf.try_reserve(total.min(STAGE_RESERVE) as usize).is_err() {
                        return self.respond_fail(src, h, PTL_NI_UNDELIVERABLE);
                    }
                    buf.extend_from_slice(payload);
                    self.peers[src].staged = Some(Staged {
                        hdr: *h,
                        buf,
                        reply: false,
                        got: len,
                        total,
                    });
                } else if total != Some(len) {
                    self.bad_record(src, h, "a request whose payload is not its length");
                    self.respond_fail(src, h, PTL_NI_UNDELIVERABLE);
                } else if h.flags() & flag::CMA != 0 && h.kind() == kind::PUT {
                    if !self.attach(src) {
                        self.respond_fail(src, h, PTL_NI_UNDELIVERABLE);
                        return;
                    }
                    let pid = self.peers[src].seg.as_ref().map_or(0, |s| s.owner_pid());
                    self.on_request(src, h, Src::Cma { pid, addr: h.addr });
                } else if !self.put_fast(src, h, payload) {
                    self.on_request(src, h, Src::Bytes(payload));
                }
            }
            kind::ACK => self.on_ack(src, h),
            kind::REPLY => {
                if len > h.length {
                    return self.bad_record(src, h, "a reply longer than its length");
                }
                self.reply_data(src, h, 0, payload);
                if more {
                    if self.peers[src].staged.is_some() {
                        self.bad_record(src, h, "a message started inside another");
                    }
                    self.peers[src].staged = Some(Staged {
                        hdr: *h,
                        buf: Vec::new(),
                        reply: true,
                        got: len,
                        total: h.length,
                    });
                } else {
                    self.reply_done(src, h);
                }
            }
            _ => self.bad_record(src, h, "an unknown kind"),
        }
    }

    /// The common arrival at once: an unacknowledged put whose bytes are here, matching the
    /// first entry of the priority list, which is not locally managed — a posted receive.
    /// Returns false, having done nothing, for anything else ([`State::on_request`] then runs
    /// the general path, which also reports every failure). Its effects are the general path's:
    /// the bytes, the event, the count, the use-once unlink and its event. (A function of its
    /// own: inside `on_request` it would pay that function's frame and spills.)
    #[inline(never)]
    fn put_fast(&mut self, src: usize, h: &Hdr, data: &[u8]) -> bool {
        if h.kind() != kind::PUT || h.flags() & flag::CMA != 0 || h.ack_req() != PTL_NO_ACK_REQ {
            return false;
        }
        let Some(ni) = self.nis.get_mut(h.ni() as usize).and_then(|n| n.as_mut()) else {
            return false;
        };
        let logical = ni.logical();
        let pti = h.pt_index as usize;
        let Some(pt) = ni.pts.get_mut(pti).and_then(|p| p.as_mut()) else {
            return false;
        };
        let Some(&idx) = pt.priority.front() else {
            return false;
        };
        if !pt.enabled {
            return false;
        }
        let Some(e) = ni.entries.at(idx) else {
            return false;
        };
        let init = if logical {
            ptl_process_t::from_rank(ni.rev.get(src).copied().unwrap_or(PTL_RANK_ANY))
        } else {
            ptl_process_t::from_phys(0, src as u32)
        };
        let opts = e.options;
        let avail = e.region.len().saturating_sub(h.offset);
        if (e.is_me && opts & PTL_ME_MANAGE_LOCAL != 0)
            || opts & PTL_ME_OP_PUT == 0
            || (e.uid != PTL_UID_ANY && e.uid != h.uid)
            || !Self::id_bits_match(e, &init, h.match_bits, logical)
            || (e.is_me && opts & PTL_ME_NO_TRUNCATE != 0 && h.length > avail)
        {
            return false;
        }
        // Flow control: a full queue disables the entry (the general path does it).
        let eq_slot = pt.eq_slot;
        if pt.options & PTL_PT_FLOWCTRL != 0 && ni.eqs.at(eq_slot).is_some_and(|q| q.room() == 0) {
            return false;
        }
        let mlength = h.length.min(avail);
        if mlength > 0 {
            // SAFETY: the entry's memory is the user's promise; the range is inside it
            // (mlength clipped to it); the message bytes are inside the slice.
            unsafe { e.region.write_at(h.offset, data.as_ptr(), mlength) };
        }
        let (ct, user_ptr, start) = (e.ct, e.user_ptr, e.region.addr_at(h.offset));
        let unlink = opts & PTL_ME_USE_ONCE != 0;
        // Unlinked before the events are written: fewer values live across the writes.
        if unlink {
            pt.priority.pop_front();
            ni.entries.free_entry(idx);
        }
        if let Some(q) = ni.eqs.at_mut(eq_slot) {
            if opts & (PTL_ME_EVENT_COMM_DISABLE | PTL_ME_EVENT_SUCCESS_DISABLE) == 0 {
                *q.push_slot() = target_event(
                    PTL_EVENT_PUT,
                    h,
                    start,
                    user_ptr,
                    mlength,
                    init,
                    PTL_PRIORITY_LIST,
                );
            }
            if unlink && opts & PTL_ME_EVENT_UNLINK_DISABLE == 0 {
                *q.push_slot() = ptl_event_t {
                    type_: PTL_EVENT_AUTO_UNLINK,
                    user_ptr: user_ptr as *mut c_void,
                    pt_index: h.pt_index,
                    ptl_list: PTL_PRIORITY_LIST,
                    ..blank()
                };
            }
        }
        if opts & PTL_ME_EVENT_CT_COMM != 0 {
            let bytes = (opts & PTL_ME_EVENT_CT_BYTES != 0).then_some(mlength);
            Self::count(ni, ct, true, bytes);
        }
        true
    }

    /// A request whose data is all here (or reachable): the target side of the operation.
    ///
    /// This runs for every message a process receives, so it looks each object up once, borrows
    /// the entry's region instead of copying it (a get's reply is the exception), and builds an
    /// acknowledgment only when one is due.
    fn on_request(&mut self, src: usize, h: &Hdr, data: Src) {
        let slot = h.ni() as usize;
        let kind_ = h.kind();
        let Some(ni) = self.nis.get_mut(slot).and_then(|n| n.as_mut()) else {
            return self.respond_fail(src, h, PTL_NI_UNDELIVERABLE);
        };
        let logical = ni.logical();
        let init = if logical {
            ptl_process_t::from_rank(ni.rev.get(src).copied().unwrap_or(PTL_RANK_ANY))
        } else {
            ptl_process_t::from_phys(0, src as u32)
        };
        let pti = h.pt_index as usize;
        let mut room = usize::MAX;
        let (flowctrl, eq) = match ni.pts.get(pti).and_then(|p| p.as_ref()) {
            Some(p) if p.enabled => (p.options & PTL_PT_FLOWCTRL != 0, p.eq),
            _ => {
                count_drop(ni);
                return self.respond_fail(src, h, PTL_NI_PT_DISABLED);
            }
        };
        if flowctrl {
            let (_, _, i, g) = split(eq);
            room = ni.eqs.get(i, g).map_or(usize::MAX, |e| e.room());
            if room == 0 {
                Self::disable_pt(ni, h.pt_index);
                return self.respond_fail(src, h, PTL_NI_PT_DISABLED);
            }
        }
        let is_put = kind_ == kind::PUT || kind_ == kind::ATOMIC;
        let need = match kind_ {
            kind::PUT | kind::ATOMIC => PTL_ME_OP_PUT,
            kind::GET => PTL_ME_OP_GET,
            _ => PTL_ME_OP_PUT | PTL_ME_OP_GET,
        };
        // Priority list first, then (puts and atomics) the overflow list.
        let found = {
            let fits = |idx: u32| {
                let Some(e) = ni.entries.at(idx) else {
                    return false;
                };
                if !Self::id_bits_match(e, &init, h.match_bits, logical) {
                    return false;
                }
                if e.options & PTL_ME_NO_TRUNCATE != 0 && e.is_me {
                    let off = if e.options & PTL_ME_MANAGE_LOCAL != 0 {
                        e.local_offset
                    } else {
                        h.offset
                    };
                    if h.length > e.region.len().saturating_sub(off) {
                        return false;
                    }
                }
                true
            };
            let pick = |list: ptl_list_t, entries: &[u32]| {
                let pos = entries.iter().position(|&i| fits(i))?;
                Some((list, pos, entries[pos]))
            };
            ni.pts.get(pti).and_then(|p| p.as_ref()).and_then(|pt| {
                pick(PTL_PRIORITY_LIST, pt.priority.as_slice()).or_else(|| {
                    is_put
                        .then(|| pick(PTL_OVERFLOW_LIST, pt.overflow.as_slice()))
                        .flatten()
                })
            })
        };
        let Some((list, pos, idx, e)) =
            found.and_then(|(l, p, i)| Some((l, p, i, ni.entries.at(i)?)))
        else {
            count_drop(ni);
            if flowctrl {
                Self::disable_pt(ni, h.pt_index);
                return self.respond_fail(src, h, PTL_NI_PT_DISABLED);
            }
            return self.respond_fail(src, h, PTL_NI_DROPPED);
        };
        // A request that unlinks its entry raises two events (its own and the unlink): with one
        // slot left the second would push out the oldest event, so that is full too.
        if flowctrl && room < 2 && e.is_me {
            let left = e
                .region
                .len()
                .saturating_sub(match e.options & PTL_ME_MANAGE_LOCAL {
                    0 => h.offset,
                    _ => e.local_offset,
                });
            let unlinks = e.options & PTL_ME_USE_ONCE != 0
                || (e.options & PTL_ME_MANAGE_LOCAL != 0
                    && e.min_free > 0
                    && left.saturating_sub(h.length) < e.min_free);
            if unlinks && e.options & PTL_ME_EVENT_UNLINK_DISABLE == 0 {
                count_drop(ni);
                Self::disable_pt(ni, h.pt_index);
                return self.respond_fail(src, h, PTL_NI_PT_DISABLED);
            }
        }
        // An overflow entry's arrival keeps a header in the unexpected list: no more than the
        // interface's limit (peers cannot grow it without bound); past it, as with no entry.
        if list == PTL_OVERFLOW_LIST && e.options & PTL_ME_UNEXPECTED_HDR_DISABLE == 0 {
            let held = ni
                .pts
                .get(pti)
                .and_then(|p| p.as_ref())
                .map_or(0, |p| p.unexpected.len());
            if held >= ni.limits.max_unexpected_headers.max(0) as usize {
                count_drop(ni);
                if flowctrl {
                    Self::disable_pt(ni, h.pt_index);
                    return self.respond_fail(src, h, PTL_NI_PT_DISABLED);
                }
                return self.respond_fail(src, h, PTL_NI_DROPPED);
            }
        }
        if e.uid != PTL_UID_ANY && e.uid != h.uid {
            count_sr(ni, PTL_SR_PERMISSION_VIOLATIONS);
            return self.respond_fail(src, h, PTL_NI_PERM_VIOLATION);
        }
        if e.options & need != need {
            count_sr(ni, PTL_SR_OPERATION_VIOLATIONS);
            return self.respond_fail(src, h, PTL_NI_OP_VIOLATION);
        }
        let manage_local = e.is_me && e.options & PTL_ME_MANAGE_LOCAL != 0;
        let off = if manage_local {
            e.local_offset
        } else {
            h.offset
        };
        let mlength = h.length.min(e.region.len().saturating_sub(off));
        let (opts, ct, user_ptr) = (e.options, e.ct, e.user_ptr);
        let start = e.region.addr_at(off);

        // Move the data.
        let mut fail = PTL_NI_OK;
        let mut reply: Option<Vec<u8>> = None;
        let mut reply_cma = false;
        match kind_ {
            kind::PUT => {
                // (A zero-byte put, the common control message, skips the call.)
                if mlength > 0 && !data.deposit(&e.region, off, 0, mlength) {
                    fail = PTL_NI_UNDELIVERABLE;
                }
            }
            kind::GET if h.flags() & flag::CMA != 0 => {
                let region = e.region.clone();
                let pid = if self.attach(src) {
                    self.peers[src].seg.as_ref().map_or(0, |s| s.owner_pid())
                } else {
                    0
                };
                if pid == 0 || !region::cma(pid, &region, off, h.addr, mlength, false) {
                    fail = PTL_NI_UNDELIVERABLE;
                }
                reply_cma = true;
            }
            kind::GET => {
                let mut v = vec![0u8; mlength as usize];
                // SAFETY: inside the entry (mlength clipped).
                unsafe { e.region.read_at(off, v.as_mut_ptr(), mlength) };
                reply = Some(v);
            }
            _ => {
                let (op, dt) = (h.extra as u8, (h.extra >> 8) as u8);
                let bytes = match &data {
                    Src::Bytes(b) => *b,
                    Src::Cma { .. } => &[][..],
                };
                let olen = if atomics::needs_operand(op) {
                    atomics::elem_size(dt).unwrap_or(0)
                } else {
                    0
                };
                let size = atomics::elem_size(dt).unwrap_or(1) as u64;
                let n = mlength - mlength % size;
                let mut cur = vec![0u8; n as usize];
                // SAFETY: inside the entry.
                unsafe { e.region.read_at(off, cur.as_mut_ptr(), n) };
                let old = (kind_ == kind::FETCH).then(|| cur.clone());
                if bytes.len() >= olen + n as usize
                    && atomics::apply(
                        op,
                        dt,
                        &mut cur,
                        &bytes[olen..olen + n as usize],
                        &bytes[..olen],
                    )
                    .is_ok()
                {
                    // SAFETY: as above.
                    unsafe { e.region.write_at(off, cur.as_ptr(), n) };
                } else {
                    fail = PTL_NI_OP_VIOLATION;
                }
                reply = old;
            }
        }
        if fail == PTL_NI_OK {
            // Both were found above; moving the data touched neither.
            let Some(ni) = self.nis.get_mut(slot).and_then(|n| n.as_mut()) else {
                return;
            };
            let Some(e) = ni.entries.at_mut(idx) else {
                return;
            };
            if manage_local {
                e.local_offset = off + mlength;
            }
            let unlink = opts & PTL_ME_USE_ONCE != 0
                || (manage_local
                    && e.min_free > 0
                    && e.region.len().saturating_sub(e.local_offset) < e.min_free);
            if opts & (PTL_ME_EVENT_COMM_DISABLE | PTL_ME_EVENT_SUCCESS_DISABLE) == 0 {
                let type_ = match kind_ {
                    kind::PUT => PTL_EVENT_PUT,
                    kind::GET => PTL_EVENT_GET,
                    kind::ATOMIC => PTL_EVENT_ATOMIC,
                    _ => PTL_EVENT_FETCH_ATOMIC,
                };
                let ev = target_event(type_, h, start, user_ptr, mlength, init, list);
                Self::post(ni, eq, ev);
            }
            if opts & PTL_ME_EVENT_CT_COMM != 0 {
                let bytes = (opts & PTL_ME_EVENT_CT_BYTES != 0).then_some(mlength);
                Self::count(ni, ct, true, bytes);
            }
            let mut refs = 0;
            if list == PTL_OVERFLOW_LIST && opts & PTL_ME_UNEXPECTED_HDR_DISABLE == 0 {
                let u = Unexp {
                    event: if kind_ == kind::PUT {
                        PTL_EVENT_PUT_OVERFLOW
                    } else {
                        PTL_EVENT_ATOMIC_OVERFLOW
                    },
                    initiator: init,
                    match_bits: h.match_bits,
                    rlength: h.length,
                    mlength,
                    remote_offset: h.offset,
                    hdr_data: h.hdr_data,
                    start: start as usize,
                    uid: h.uid,
                    entry: idx,
                    op: h.extra as u8,
                    dt: (h.extra >> 8) as u8,
                };
                if let Some(e) = ni.entries.at_mut(idx) {
                    e.unexp_refs = e.unexp_refs.saturating_add(1);
                    refs = e.unexp_refs;
                }
                if let Some(pt) = pt_mut(ni, h.pt_index) {
                    pt.unexpected.push_back(u);
                }
            } else if list == PTL_OVERFLOW_LIST {
                refs = ni.entries.at(idx).map_or(0, |e| e.unexp_refs);
            }
            if unlink {
                if let Some(pt) = pt_mut(ni, h.pt_index) {
                    let l = if list == PTL_PRIORITY_LIST {
                        &mut pt.priority
                    } else {
                        &mut pt.overflow
                    };
                    l.remove(pos);
                }
                if refs > 0 {
                    if let Some(e) = ni.entries.at_mut(idx) {
                        e.linked = false;
                        e.free_due = true;
                    }
                } else {
                    ni.entries.free_entry(idx);
                }
                if opts & PTL_ME_EVENT_UNLINK_DISABLE == 0 {
                    let ev = ptl_event_t {
                        type_: PTL_EVENT_AUTO_UNLINK,
                        user_ptr: user_ptr as *mut c_void,
                        pt_index: h.pt_index,
                        ptl_list: list,
                        ..blank()
                    };
                    Self::post(ni, eq, ev);
                }
            }
        }
        // Answer the initiator.
        let cma_put = h.flags() & flag::CMA != 0;
        if is_put && h.ack_req() == PTL_NO_ACK_REQ && !cma_put {
            return;
        }
        let mut r = Hdr::new(
            if is_put { kind::ACK } else { kind::REPLY },
            0,
            slot as u8,
            h.ack_req(),
        );
        r.op = h.op;
        r.length = if fail == PTL_NI_OK { mlength } else { 0 };
        r.offset = off;
        r.pt_index = h.pt_index;
        r.match_bits = h.match_bits;
        r.extra = (fail as u32) << 16;
        if is_put {
            let fl = if opts & PTL_ME_ACK_DISABLE != 0 {
                flag::ACK_DISABLED
            } else {
                0
            };
            self.respond(src, r, fl, Payload::Empty, 0);
        } else {
            let fl = if reply_cma { flag::CMA } else { 0 };
            let (p, len) = match reply {
                Some(v) if fail == PTL_NI_OK => {
                    let l = v.len() as u64;
                    (Payload::Bytes(v), l)
                }
                _ => (Payload::Empty, 0),
            };
            self.respond(src, r, fl, p, len);
        }
    }

    /// Flow control: the entry stops accepting messages and says so.
    fn disable_pt(ni: &mut Ni, pt_index: u32) {
        count_drop(ni);
        let Some(pt) = pt_mut(ni, pt_index) else {
            return;
        };
        if !pt.enabled {
            return;
        }
        pt.enabled = false;
        let eq = pt.eq;
        let ev = ptl_event_t {
            type_: PTL_EVENT_PT_DISABLED,
            pt_index,
            ni_fail_type: PTL_NI_PT_DISABLED,
            ..blank()
        };
        Self::post(ni, eq, ev);
    }

    /// A failed request: ACK or REPLY with the failure (when the initiator expects an answer).
    fn respond_fail(&mut self, src: usize, h: &Hdr, fail: u8) {
        let is_put = h.kind() == kind::PUT || h.kind() == kind::ATOMIC;
        if is_put && h.ack_req() == PTL_NO_ACK_REQ && h.flags() & flag::CMA == 0 {
            return;
        }
        let mut r = Hdr::new(
            if is_put { kind::ACK } else { kind::REPLY },
            0,
            h.ni(),
            h.ack_req(),
        );
        r.op = h.op;
        r.pt_index = h.pt_index;
        r.match_bits = h.match_bits;
        r.extra = (fail as u32) << 16;
        self.respond(src, r, 0, Payload::Empty, 0);
    }

    fn respond(&mut self, dest: usize, h: Hdr, flags: u8, payload: Payload, len: u64) {
        let k = h.kind();
        self.peers[dest].txq.push_back(Tx {
            hdr: h,
            kind: k,
            flags,
            payload,
            len,
            sent: 0,
            op: 0,
        });
        self.flush(dest);
    }

    /// An acknowledgment arrived for one of our puts or atomics.
    fn on_ack(&mut self, src: usize, h: &Hdr) {
        let (_, _, oi, og) = split(h.op);
        let (sent, slot, md_h, user_ptr, ack_req, target) = match self.ops.get(oi, og) {
            Some(o) if o.peer as usize == src && o.kind != kind::GET && o.kind != kind::FETCH => {
                (o.sent, o.ni, o.md, o.user_ptr, o.ack_req, o.target)
            }
            Some(_) => return self.bad_record(src, h, "an acknowledgment of another's operation"),
            None => return,
        };
        let fail = (h.extra >> 16) as u8;
        if !sent {
            // Cross-memory put: the target has read the buffer.
            let f = if fail == PTL_NI_UNDELIVERABLE {
                fail
            } else {
                PTL_NI_OK
            };
            self.post_send(h.op, f);
        }
        let ack_disabled = h.flags() & flag::ACK_DISABLED != 0;
        if let Some(ni) = self.nis[slot].as_mut() {
            let (_, _, i, g) = split(md_h);
            if let Some(md) = ni.mds.get(i, g) {
                let (eq, ct, opts) = (md.eq, md.ct, md.options);
                let ok = fail == PTL_NI_OK;
                if ack_req == PTL_ACK_REQ
                    && !ack_disabled
                    && !(ok && opts & PTL_MD_EVENT_SUCCESS_DISABLE != 0)
                {
                    let ev = ptl_event_t {
                        type_: PTL_EVENT_ACK,
                        user_ptr: user_ptr as *mut c_void,
                        match_bits: h.match_bits,
                        mlength: h.length,
                        rlength: h.length,
                        remote_offset: h.offset,
                        initiator: target,
                        pt_index: h.pt_index,
                        ni_fail_type: fail,
                        ..blank()
                    };
                    Self::post(ni, eq, ev);
                }
                if opts & PTL_MD_EVENT_CT_ACK != 0 && !ack_disabled {
                    match ack_req {
                        PTL_ACK_REQ | PTL_CT_ACK_REQ => {
                            let bytes = (opts & PTL_MD_EVENT_CT_BYTES != 0).then_some(h.length);
                            Self::count(ni, ct, ok, bytes);
                        }
                        PTL_OC_ACK_REQ => Self::count(ni, ct, true, None),
                        _ => {}
                    }
                }
            }
        }
        self.retire(h.op);
    }

    /// The get or fetching atomic a REPLY record from `src` answers: one of ours, sent there.
    fn reply_op(&self, src: usize, h: &Hdr) -> Option<&Op> {
        let (_, _, oi, og) = split(h.op);
        self.ops
            .get(oi, og)
            .filter(|o| o.peer as usize == src && (o.kind == kind::GET || o.kind == kind::FETCH))
    }

    /// Reply bytes for one of our gets (at `at` of the reply).
    fn reply_data(&mut self, src: usize, h: &Hdr, at: u64, payload: &[u8]) {
        if payload.is_empty() {
            return;
        }
        let (slot, gmd, goff, length) = match self.reply_op(src, h) {
            Some(o) => (o.ni, o.get_md, o.get_offset, o.length),
            None => return,
        };
        if let Some(ni) = self.nis[slot].as_ref() {
            let (_, _, i, g) = split(gmd);
            if let Some(md) = ni.mds.get(i, g) {
                // The reply's own length is the peer's word: clip to the get's.
                let n = (payload.len() as u64).min(length.saturating_sub(at));
                if n > 0 {
                    // SAFETY: `[goff, goff + length)` was checked to be inside the MD when the
                    // get started, and `at + n <= length`; `payload` holds `n` bytes.
                    unsafe { md.region.write_at(goff + at, payload.as_ptr(), n) };
                }
            }
        }
    }

    /// A reply is complete: `PTL_EVENT_REPLY`.
    fn reply_done(&mut self, src: usize, h: &Hdr) {
        let (slot, gmd, goff, user_ptr, target) = match self.reply_op(src, h) {
            Some(o) => (o.ni, o.get_md, o.get_offset, o.user_ptr, o.target),
            None => return,
        };
        let fail = (h.extra >> 16) as u8;
        if let Some(ni) = self.nis[slot].as_mut() {
            let (_, _, i, g) = split(gmd);
            if let Some(md) = ni.mds.get(i, g) {
                let (eq, ct, opts) = (md.eq, md.ct, md.options);
                let start = md.region.addr_at(goff);
                let ok = fail == PTL_NI_OK;
                if !(ok && opts & PTL_MD_EVENT_SUCCESS_DISABLE != 0) {
                    let ev = ptl_event_t {
                        type_: PTL_EVENT_REPLY,
                        start: start.cast(),
                        user_ptr: user_ptr as *mut c_void,
                        match_bits: h.match_bits,
                        rlength: h.length,
                        mlength: h.length,
                        remote_offset: h.offset,
                        initiator: target,
                        pt_index: h.pt_index,
                        ni_fail_type: fail,
                        ..blank()
                    };
                    Self::post(ni, eq, ev);
                }
                if opts & PTL_MD_EVENT_CT_REPLY != 0 {
                    let bytes = (opts & PTL_MD_EVENT_CT_BYTES != 0).then_some(h.length);
                    Self::count(ni, ct, ok, bytes);
                }
            }
        }
        self.retire(h.op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(q: &mut Eq, n: u64) {
        *q.push_slot() = ptl_event_t {
            type_: PTL_EVENT_PUT,
            mlength: n,
            ..blank()
        };
    }

    fn take(q: &mut Eq) -> Option<u64> {
        q.pop().map(|e| e.mlength)
    }

    #[test]
    fn lwk_eq_ring_wraps_grows_and_drops_the_oldest() {
        // Wrapping in the first ring (4 slots for a capacity of 3).
        let mut q = Eq::new(3);
        push(&mut q, 1);
        push(&mut q, 2);
        assert_eq!(take(&mut q), Some(1));
        push(&mut q, 3);
        push(&mut q, 4);
        assert_eq!(q.room(), 0);
        // Full: the oldest goes, and the queue says so.
        push(&mut q, 5);
        assert!(q.dropped);
        assert_eq!(
            (take(&mut q), take(&mut q), take(&mut q)),
            (Some(3), Some(4), Some(5))
        );
        assert_eq!(take(&mut q), None);

        // Growing past the first ring keeps the order, from a head in the middle.
        let mut q = Eq::new(1000);
        for n in 0..50 {
            push(&mut q, n);
        }
        for n in 0..40 {
            assert_eq!(take(&mut q), Some(n));
        }
        for n in 50..500 {
            push(&mut q, n);
        }
        assert!(!q.dropped);
        assert_eq!(q.room(), 1000 - 460);
        for n in 40..500 {
            assert_eq!(take(&mut q), Some(n));
        }
        assert_eq!(take(&mut q), None);

        // The reserve holds events beyond the capacity (a flow-controlled entry's
        // PTL_EVENT_PT_DISABLED); room counts the capacity alone.
        let mut q = Eq::new(2);
        q.reserve = 1;
        for n in 0..3 {
            push(&mut q, n);
        }
        assert!(!q.dropped);
        assert_eq!(q.room(), 0);
        push(&mut q, 3);
        assert!(q.dropped);
        assert_eq!(take(&mut q), Some(1));
    }

    #[test]
    fn lwk_slab_reuses_freed_slots_with_a_new_generation() {
        let mut s: Slab<u32> = Slab::default();
        let (a, ga) = s.insert(10).unwrap();
        let (b, _) = s.insert(11).unwrap();
        let (c, _) = s.insert(12).unwrap();
        s.free(a);
        assert_eq!(s.remove(c, 0), Some(12));
        // Freeing an empty slot again changes nothing.
        s.free(a);
        assert_eq!(s.get(a, ga), None);
        // Last freed, first reused; each reuse is a new generation.
        assert_eq!(s.insert(20), Some((c, 1)));
        assert_eq!(s.insert(21), Some((a, 1)));
        assert_eq!(s.insert(22), Some((3, 0)));
        assert_eq!(
            (s.get(a, 1), s.at(b), s.at(c)),
            (Some(&21), Some(&11), Some(&20))
        );
    }

    #[test]
    fn lwk_tagged_slab_checks_kind_interface_and_generation_at_once() {
        let mut s: Slab<u32> = Slab::tagged(hk::EQ, 2);
        let (i, g) = s.insert(1).unwrap();
        let h = handle(hk::EQ, 2, i, g);
        assert_eq!(s.by_handle_mut(h), Some(&mut 1));
        assert_eq!(s.by_handle_mut(handle(hk::CT, 2, i, g)), None);
        assert_eq!(s.by_handle_mut(handle(hk::EQ, 1, i, g)), None);
        assert_eq!(s.by_handle_mut(handle(hk::EQ, 2, i + 1, g)), None);
        s.free(i);
        assert_eq!(s.by_handle_mut(h), None);
        let (j, g2) = s.insert(2).unwrap();
        assert_eq!((j, g2), (i, g + 1));
        assert_eq!(s.by_handle_mut(h), None);
        assert_eq!(s.by_handle_mut(handle(hk::EQ, 2, j, g2)), Some(&mut 2));
        assert_eq!(s.remove(j, g2), Some(2));
        assert_eq!(s.by_handle_mut(handle(hk::EQ, 2, j, g2)), None);
    }

    #[test]
    fn lwk_list_unlinks_at_the_front_and_anywhere_in_order() {
        let mut l = List::default();
        assert!(l.is_empty());
        l.pop_front();
        assert!(l.is_empty());
        for i in 0..200 {
            l.push_back(i);
        }
        for i in 0..150 {
            assert_eq!(l.front(), Some(&i));
            l.pop_front();
        }
        // The gone front slots are reclaimed once they are half the vector.
        assert!(l.v.len() < 200 && l.head < List::COMPACT_AT);
        assert_eq!(l.as_slice(), (150..200).collect::<Vec<_>>().as_slice());
        l.remove(1);
        l.remove(0);
        l.retain(|&x| x % 2 == 0);
        assert_eq!(l.front(), Some(&152));
        assert_eq!(l.as_slice().len(), 24);
        l.push_back(7);
        assert_eq!(l.as_slice().last(), Some(&7));
        while !l.is_empty() {
            l.pop_front();
        }
        assert_eq!((l.v.len(), l.head), (0, 0));
    }

    /// A job of one, with a matching logical interface, a portal table entry on an event queue
    /// and a descriptor over `buf`.
    fn loopback(id: &str, buf: &mut [u8; 8]) -> (State, usize, u32, u32) {
        let mut st = State::new(Job {
            rank: 0,
            size: 1,
            id: format!("{id}-{}", std::process::id()),
        });
        let (slot, _) = st
            .ni_init(PTL_NI_MATCHING | PTL_NI_LOGICAL, PTL_PID_ANY, None)
            .unwrap();
        let eq = st.eq_alloc(slot, 16).unwrap();
        assert_eq!(st.pt_alloc(slot, PTL_PT_FLOWCTRL, eq, 0), Ok(0));
        let md = ptl_md_t {
            start: buf.as_mut_ptr().cast(),
            length: 8,
            options: 0,
            eq_handle: PTL_EQ_NONE,
            ct_handle: PTL_CT_NONE,
        };
        let md = st.md_bind(slot, &md).unwrap();
        (st, slot, eq, md)
    }

    fn receive(st: &mut State, slot: usize, buf: &mut [u8; 8]) -> u32 {
        let me = ptl_me_t {
            start: buf.as_mut_ptr().cast(),
            length: 8,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT | PTL_ME_USE_ONCE | PTL_ME_EVENT_LINK_DISABLE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: 5,
            ignore_bits: 0,
            min_free: 0,
        };
        st.append(slot, 0, &me, PTL_PRIORITY_LIST, 77, true)
            .unwrap()
    }

    fn put(st: &mut State, md: u32) {
        let p = Put {
            md_h: md,
            local_offset: 0,
            length: 8,
            target: ptl_process_t::from_rank(0),
            pt_index: 0,
            match_bits: 5,
            remote_offset: 0,
            user_ptr: 0,
            hdr_data: 9,
        };
        // The first put attaches to the peer's segment (the general path).
        if !st.put_now(&p) {
            let r = st.initiate(
                kind::PUT,
                md,
                0,
                PTL_INVALID_HANDLE,
                0,
                8,
                PTL_NO_ACK_REQ,
                p.target,
                0,
                5,
                0,
                0,
                9,
                (0, 0),
                None,
            );
            assert_eq!(r, PTL_OK);
        }
        st.progress();
    }

    const HDR_LEN: usize = crate::shm::HDR;

    /// One record as a producer lays it in a ring: `h` with `kind`, `flags` and the payload
    /// length `announced` in its first word, then `payload`, padded to 64 bytes.
    fn record(h: &Hdr, kind_: u8, flags: u8, announced: u64, payload: &[u8]) -> Vec<u8> {
        let mut h = *h;
        h.word = (h.word & 0xffff_0000) | kind_ as u64 | (flags as u64) << 8 | announced << 32;
        let mut v = h.to_bytes().to_vec();
        v.extend_from_slice(payload);
        v.resize(crate::shm::record_bytes(payload.len()), 0);
        v
    }

    /// A job of one with a receive of 64 zero bytes (match bits 5) on portal table entry 0.
    fn target(id: &str, buf: &mut [u8; 64]) -> (State, usize, u32) {
        let mut src = [0u8; 8];
        let (mut st, slot, eq, _) = loopback(id, &mut src);
        let me = ptl_me_t {
            start: buf.as_mut_ptr().cast(),
            length: 64,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT | PTL_ME_OP_GET | PTL_ME_EVENT_LINK_DISABLE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: 5,
            ignore_bits: 0,
            min_free: 0,
        };
        st.append(slot, 0, &me, PTL_PRIORITY_LIST, 77, true)
            .unwrap();
        (st, slot, eq)
    }

    fn put_hdr(slot: usize, length: u64) -> Hdr {
        let mut h = Hdr::new(kind::PUT, 0, slot as u8, PTL_NO_ACK_REQ);
        h.match_bits = 5;
        h.length = length;
        h
    }

    #[test]
    fn lwk_a_put_longer_than_its_payload_is_dropped_not_read_past() {
        let mut buf = [0u8; 64];
        let (mut st, slot, eq) = target("short-put", &mut buf);
        // 64 bytes announced, 8 carried: the target used to copy 56 bytes of whatever followed
        // in the ring into the receive buffer.
        let mut bytes = record(&put_hdr(slot, 64), kind::PUT, 0, 8, &[7; 8]);
        bytes[HDR_LEN + 8..].fill(0xaa);
        bytes.extend(record(&put_hdr(slot, 8), kind::PUT, 0, 8, &[9; 8]));
        assert_eq!(st.write_inbound(0, &bytes), bytes.len());
        st.progress();
        assert_eq!(st.malformed_records(), 1);
        assert_eq!(st.status(slot, PTL_SR_DROP_COUNT), Ok(1));
        // The well-formed put behind it is delivered, and only its 8 bytes.
        assert_eq!(&buf[..8], &[9; 8]);
        assert_eq!(&buf[8..], &[0; 56]);
        let (ev, _) = st.eq_take(eq).unwrap().unwrap();
        assert_eq!((ev.type_, ev.mlength), (PTL_EVENT_PUT, 8));
        assert!(matches!(st.eq_take(eq), Ok(None)));
        st.shutdown();
    }

    #[test]
    fn lwk_a_fragmented_request_of_2_62_bytes_reserves_little_and_must_add_up() {
        let mut buf = [0u8; 64];
        let (mut st, slot, _) = target("huge-stage", &mut buf);
        // The first fragment of a put announcing 2^62 bytes: staging used to reserve them all
        // (a capacity overflow, so a panic across the C interface).
        let mut bytes = record(&put_hdr(slot, 1 << 62), kind::PUT, flag::MORE, 8, &[1; 8]);
        // Its last fragment ends 2^62 - 16 bytes short: the message is dropped.
        bytes.extend(record(&Hdr::default(), kind::DATA, 0, 8, &[2; 8]));
        // A fragment of no message.
        bytes.extend(record(&Hdr::default(), kind::DATA, 0, 8, &[3; 8]));
        st.write_inbound(0, &bytes);
        st.progress();
        assert_eq!(st.malformed_records(), 2);
        assert_eq!(buf, [0; 64]);
        st.shutdown();
    }

    #[test]
    fn lwk_a_record_past_the_ring_s_end_or_a_wrap_at_its_start_breaks_the_ring() {
        let mut buf = [0u8; 64];
        let (mut st, slot, _) = target("past-end", &mut buf);
        let ring = st.cfg.ring_bytes as u64;
        let bytes = record(&put_hdr(slot, ring), kind::PUT, 0, ring, &[]);
        st.write_inbound(0, &bytes);
        st.progress();
        assert_eq!(st.malformed_records(), 1);
        // Nothing behind it is read (a good record where the consumer stands is not taken).
        let good = record(&put_hdr(slot, 8), kind::PUT, 0, 8, &[9; 8]);
        st.write_inbound(0, &good);
        st.progress();
        assert_eq!(buf, [0; 64]);
        st.shutdown();

        // A wrap marker at offset 0 used to send the consumer round the ring forever.
        let (mut st, _, _) = target("wrap-at-0", &mut buf);
        st.write_inbound(0, &(kind::WRAP as u64).to_ne_bytes());
        st.progress();
        assert_eq!(st.malformed_records(), 1);
        st.shutdown();
    }

    #[test]
    fn lwk_unexpected_headers_stop_at_the_interface_s_limit() {
        let mut st = State::new(Job {
            rank: 0,
            size: 1,
            id: format!("unexp-limit-{}", std::process::id()),
        });
        let want = ptl_ni_limits_t {
            max_unexpected_headers: 2,
            ..ptl_ni_limits_t::default()
        };
        let (slot, limits) = st
            .ni_init(PTL_NI_MATCHING | PTL_NI_LOGICAL, PTL_PID_ANY, Some(&want))
            .unwrap();
        assert_eq!(limits.max_unexpected_headers, 2);
        let eq = st.eq_alloc(slot, 16).unwrap();
        assert_eq!(st.pt_alloc(slot, 0, eq, 0), Ok(0));
        let mut buf = [0u8; 64];
        let me = ptl_me_t {
            start: buf.as_mut_ptr().cast(),
            length: 64,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT | PTL_ME_MANAGE_LOCAL | PTL_ME_EVENT_LINK_DISABLE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: 5,
            ignore_bits: 0,
            min_free: 0,
        };
        st.append(slot, 0, &me, PTL_OVERFLOW_LIST, 1, true).unwrap();
        let mut bytes = Vec::new();
        for b in 1..=3u8 {
            bytes.extend(record(&put_hdr(slot, 8), kind::PUT, 0, 8, &[b; 8]));
        }
        st.write_inbound(0, &bytes);
        st.progress();
        // Two headers kept; the third message dropped, its bytes not written.
        assert_eq!(&buf[..24], &[[1u8; 8], [2; 8], [0; 8]].concat()[..]);
        assert_eq!(st.status(slot, PTL_SR_DROP_COUNT), Ok(1));
        let mut overflow = 0;
        while let Ok(Some((ev, _))) = st.eq_take(eq) {
            overflow += (ev.ptl_list == PTL_OVERFLOW_LIST) as u32;
        }
        assert_eq!(overflow, 2);
        st.shutdown();
    }

    #[test]
    fn lwk_records_that_come_round_again_do_not_hold_progress() {
        let mut buf = [0u8; 64];
        let (mut st, slot, eq) = target("replay", &mut buf);
        // A put, then a wrap marker: the consumer goes back to offset 0, where the put still
        // lies (its producer never cleared it), and round again. Each call takes at most a
        // ring's worth and returns.
        let mut bytes = record(&put_hdr(slot, 8), kind::PUT, 0, 8, &[4; 8]);
        bytes.extend((kind::WRAP as u64).to_ne_bytes());
        st.write_inbound(0, &bytes);
        st.progress();
        st.progress();
        assert_eq!(st.malformed_records(), 0);
        assert_eq!(&buf[..8], &[4; 8]);
        // The queue (16 events, flow controlled) filled and the entry was disabled.
        let mut puts = 0;
        while let Ok(Some((ev, _))) = st.eq_take(eq) {
            puts += (ev.type_ == PTL_EVENT_PUT) as u32;
        }
        assert!(puts >= 15, "{puts} puts");
        st.shutdown();
    }

    #[test]
    fn lwk_fast_put_posts_to_the_cached_queue_and_notices_it_freed() {
        let (mut src, mut dst) = ([1u8; 8], [0u8; 8]);
        let (mut st, slot, eq, md) = loopback("cached-eq", &mut src);
        let me = receive(&mut st, slot, &mut dst);
        put(&mut st, md);
        let (ev, dropped) = st.eq_take(eq).unwrap().unwrap();
        assert!(!dropped);
        assert_eq!(
            (ev.type_, ev.user_ptr as usize, ev.mlength, ev.hdr_data),
            (PTL_EVENT_PUT, 77, 8, 9)
        );
        assert_eq!(ev.ptl_list, PTL_PRIORITY_LIST);
        // The use-once entry is gone (and its unlink event follows the put's).
        assert_eq!(st.unlink(me), PTL_ARG_INVALID);
        assert_eq!(
            st.eq_take(eq).unwrap().unwrap().0.type_,
            PTL_EVENT_AUTO_UNLINK
        );
        assert_eq!(dst, [1; 8]);

        // The queue freed, a new one takes its slot: the entry's arrivals post to neither.
        assert_eq!(st.eq_free(eq), PTL_OK);
        let eq2 = st.eq_alloc(slot, 16).unwrap();
        assert_eq!(split(eq2).2, split(eq).2);
        let ni = st.ni(slot).unwrap();
        assert_eq!(ni.pts[0].as_ref().unwrap().eq_slot, NO_SLOT);
        dst = [0; 8];
        let me = receive(&mut st, slot, &mut dst);
        put(&mut st, md);
        assert_eq!(dst, [1; 8]);
        assert_eq!(st.unlink(me), PTL_ARG_INVALID);
        assert!(matches!(st.eq_take(eq2), Ok(None)));
        assert!(matches!(st.eq_take(eq), Err(PTL_ARG_INVALID)));
        st.shutdown();
    }
}
