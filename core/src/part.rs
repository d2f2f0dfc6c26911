//! Partitioned point-to-point communication (`MPI_Psend_init`, `MPI_Precv_init`, `MPI_Pready`,
//! `MPI_Parrived`), built on the ordinary point-to-point engine, like Open MPI's `part/persist`.
//!
//! A partitioned request is a *channel*: a persistent request whose starts are rounds. Each
//! side's channel lives in [`Parts`], the request core keeps a persistent request naming it
//! ([`PersistentKind::Part`]), and each start's operation is a pending request that
//! [`Parts::progress`] finishes when the round's messages are all done.
//!
//! - **Matching.** The sender's `MPI_Psend_init` sends a small *handshake* (its user tag,
//!   partition count, channel index and total bytes) to the receiver with a library-internal
//!   tag folded from the user's tag; the receiver's `MPI_Precv_init` posts the receive for it.
//!   Point-to-point order between one pair on one communicator and tag makes the i-th send
//!   channel meet the i-th receive channel with the same (communicator, source, tag): matching in
//!   init order, once, as the standard asks. The fold keeps the low 28 bits of the tag; two
//!   channels whose tags differ but share those bits are told apart by the handshake's full tag,
//!   and a receive that meets the wrong one fails with a clear error rather than mixing data.
//! - **Data.** Every send partition is one message with its own internal tag (the sender's
//!   channel index and the partition number), sent by `MPI_Pready` at once. The receiver, once
//!   matched, posts one receive per *send* partition straight into its buffer at that
//!   partition's byte offset, so the two sides may partition differently; receive partition `j`
//!   has arrived once every send partition overlapping its bytes has. Rounds reuse the same tags:
//!   per-tag order keeps round `k`'s messages with round `k`'s receives.
//!
//! Internal tags: the handshake range and the data range lie between the collectives'
//! (`-(2^20)` down by `2^30`) and the construction ranges near `i32::MIN`.

use core::mem::MaybeUninit;

use crate::arena::{Arena, Sizer};
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::Datatype;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::memory::Memory;
use crate::p2p::P2p;
use crate::pml::request::{ReqId, SendMode, Source, Status, PROC_NULL};
use crate::pool::{Capacity, Key, Pool};

/// Most partitioned requests alive at once in one process (the channel index is 10 bits of the
/// data tag).
pub const MAX_CHANNELS: u32 = 1 << CHAN_BITS;
/// Most partitions of one partitioned request.
pub const MAX_PARTITIONS: u32 = 1 << PART_BITS;

const CHAN_BITS: u32 = 10;
const PART_BITS: u32 = 19;
/// Data tags: `DATA_BASE - (channel << 19 | partition)`.
const DATA_BASE: i32 = -(1 << 30) - (1 << 21);
/// Handshake tags: `HS_BASE - (user tag mod 2^28)`.
const HS_BASE: i32 = DATA_BASE - (1 << (CHAN_BITS + PART_BITS));
const HS_FOLD: i32 = (1 << 28) - 1;

// The ranges stay clear of the construction tags near `i32::MIN` (up to `i32::MIN + 0x3_0000`).
const _: () = assert!((HS_BASE as i64) - (HS_FOLD as i64) > i32::MIN as i64 + 0x3_0000);

/// The handshake: magic, user tag, partitions, channel index, total bytes (little-endian).
pub const HS_LEN: usize = 24;
const HS_MAGIC: u32 = 0x5041_5254;

fn data_tag(chan: u32, partition: u32) -> i32 {
    DATA_BASE - ((chan << PART_BITS) | partition) as i32
}

fn hs_tag(tag: i32) -> i32 {
    HS_BASE - (tag & HS_FOLD)
}

/// What a handshake says: the receiver's first message to the sender of a partitioned pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handshake {
    /// The user's tag.
    pub tag: i32,
    /// The receiver's partitions.
    pub partitions: u32,
    /// The channel the pair's data tags use.
    pub chan: u32,
    /// The receiver's total bytes.
    pub total: u64,
}

impl Handshake {
    /// Writes the record.
    pub fn emit(&self, out: &mut [u8; HS_LEN]) {
        out[0..4].copy_from_slice(&HS_MAGIC.to_le_bytes());
        out[4..8].copy_from_slice(&self.tag.to_le_bytes());
        out[8..12].copy_from_slice(&self.partitions.to_le_bytes());
        out[12..16].copy_from_slice(&self.chan.to_le_bytes());
        out[16..24].copy_from_slice(&self.total.to_le_bytes());
    }

    /// Reads a record; `None` for one no peer writes (bad magic, partitions or channel).
    pub fn parse(b: &[u8; HS_LEN]) -> Option<Handshake> {
        let w = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if w(0) != HS_MAGIC {
            return None;
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&b[16..24]);
        let h = Handshake {
            tag: w(4) as i32,
            partitions: w(8),
            chan: w(12),
            total: u64::from_le_bytes(t),
        };
        (h.partitions >= 1 && h.partitions <= MAX_PARTITIONS && h.chan < MAX_CHANNELS).then_some(h)
    }
}

/// The per-partition state of a round.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// The message's request while in flight.
    req: Option<ReqId>,
    /// Sender: marked ready this round. Receiver: its receive is posted this round.
    begun: bool,
    /// Its message is done this round.
    done: bool,
}

/// Memory from the account: the handshake's bytes or a slot array.
#[derive(Clone, Copy, Debug)]
struct Grant {
    ptr: *mut u8,
    len: usize,
}

impl Grant {
    fn take(mem: &Memory, bytes: usize) -> Result<Grant> {
        let r = mem
            .take(bytes.max(1))
            .map_err(|why| mem.refused("partitioned requests", why))?;
        Ok(Grant {
            ptr: r.as_mut_ptr().cast(),
            len: r.len(),
        })
    }

    /// A grant holding `n` slots, each empty.
    fn slots(mem: &Memory, n: u32) -> Result<Grant> {
        let g = Grant::take(mem, n as usize * core::mem::size_of::<Slot>())?;
        let p = g.ptr.cast::<Slot>();
        for i in 0..n as usize {
            // SAFETY: the grant holds `n` slots and is aligned to GRANT_ALIGN, more than a
            // slot's alignment (a slot is words of 4 bytes and flags).
            unsafe { p.add(i).write(Slot::default()) };
        }
        Ok(g)
    }

    fn give_back(self, mem: &Memory) {
        // SAFETY: `ptr..ptr+len` is exactly the region one `Memory::take` returned; its channel
        // is gone, and no request still uses it (checked by the caller).
        let region = unsafe {
            core::slice::from_raw_parts_mut(self.ptr.cast::<MaybeUninit<u8>>(), self.len)
        };
        mem.give_back(region);
    }
}

/// A partitioned request's state.
struct Channel {
    send: bool,
    comm: CommId,
    /// The peer's rank, or `PROC_NULL`.
    peer: i32,
    tag: i32,
    buf: *mut u8,
    partitions: u32,
    /// Instances of `datatype` per partition.
    count: u64,
    datatype: Datatype,
    extent: isize,
    /// Packed bytes of one instance.
    size: u64,
    /// The handshake's bytes (sent or received).
    hs_mem: Grant,
    /// The handshake's request while in flight.
    hs: Option<ReqId>,
    /// Receiver: the matched sender's handshake.
    remote: Option<Handshake>,
    /// Sender: one slot per partition; receiver: one per *send* partition, once matched.
    slots: Option<(Grant, u32)>,
    /// The current round's operation, until it is finished.
    round: Option<ReqId>,
    /// The first error of the current round (or of matching).
    error: Option<Error>,
    /// Freed by the user: dropped once nothing is in flight.
    freed: bool,
}

// SAFETY: the pointers are the user's buffer (lent for the request's life, as MPI requires) and
// grants this channel alone owns; the channel is only touched under the engine's lock.
unsafe impl Send for Channel {}

impl Channel {
    fn total(&self) -> u64 {
        self.partitions as u64 * self.count * self.size
    }

    fn slot_slice(&mut self) -> &mut [Slot] {
        match self.slots {
            // SAFETY: the grant holds `n` initialised slots, owned by this channel alone.
            Some((g, n)) => unsafe {
                core::slice::from_raw_parts_mut(g.ptr.cast::<Slot>(), n as usize)
            },
            None => &mut [],
        }
    }

    fn hs_bytes(&mut self) -> &mut [u8; HS_LEN] {
        // SAFETY: the grant holds at least HS_LEN bytes, owned by this channel; taken zeroed
        // or written before it is read.
        unsafe { &mut *self.hs_mem.ptr.cast::<[u8; HS_LEN]>() }
    }

    fn in_flight(&self) -> bool {
        if self.hs.is_some() {
            return true;
        }
        match self.slots {
            Some((g, n)) => {
                // SAFETY: as in `slot_slice`.
                let s = unsafe { core::slice::from_raw_parts(g.ptr.cast::<Slot>(), n as usize) };
                s.iter().any(|s| s.req.is_some())
            }
            None => false,
        }
    }

    /// The round's status, once every message is done.
    fn status(&self) -> Status {
        let bytes = match (self.send, self.remote) {
            (false, Some(h)) => h.total.min(self.total()),
            _ => self.total(),
        };
        Status {
            source: if self.send { PROC_NULL } else { self.peer },
            tag: self.tag,
            bytes,
            message_bytes: bytes,
            error: self.error,
            cancelled: false,
        }
    }
}

/// What makes a partitioned request.
#[derive(Clone, Copy, Debug)]
pub struct PartArgs {
    /// `MPI_Psend_init` (else `MPI_Precv_init`).
    pub send: bool,
    /// The user's buffer.
    pub buf: *mut u8,
    /// Partitions.
    pub partitions: u32,
    /// Instances per partition.
    pub count: u64,
    /// The datatype (committed; retained by the caller for the request's life).
    pub datatype: Datatype,
    /// Destination or source rank (or `PROC_NULL`).
    pub peer: i32,
    /// The user's tag.
    pub tag: i32,
    /// The communicator.
    pub comm: CommId,
}

/// The partitioned requests of the process.
pub struct Parts {
    chans: Option<Pool<Channel>>,
    memory: &'static Memory,
}

fn no_chan() -> Error {
    Error::new(
        ErrorClass::Request,
        Reason::BadArgument {
            what: "not a live partitioned request",
        },
    )
}

fn bad(class: ErrorClass, what: &'static str) -> Error {
    Error::new(class, Reason::BadArgument { what })
}

impl Parts {
    /// No partitioned requests yet; their pool is made with the first.
    pub fn new(memory: &'static Memory) -> Parts {
        Parts {
            chans: None,
            memory,
        }
    }

    fn pool(&mut self) -> Result<&mut Pool<Channel>> {
        self.chans.as_mut().ok_or_else(no_chan)
    }

    fn chan(&mut self, key: Key) -> Result<&mut Channel> {
        self.pool()?.get_mut(key).ok_or_else(no_chan)
    }

    /// Makes a partitioned request (`MPI_Psend_init`, `MPI_Precv_init`): checks the arguments,
    /// and sends or posts the receive of the matching handshake. Returns the channel's key.
    pub fn init(&mut self, p2p: &mut P2p, a: PartArgs) -> Result<Key> {
        if a.partitions < 1 || a.partitions > MAX_PARTITIONS {
            return Err(bad(
                ErrorClass::Arg,
                "partitions must be at least 1 and at most 2^19",
            ));
        }
        let info = *p2p.types.check_committed(a.datatype)?;
        let peer = if a.send {
            p2p.check_send(a.comm, a.peer, a.tag)?.map(|d| d.rank)
        } else {
            if a.peer == crate::pml::request::ANY_SOURCE {
                return Err(bad(
                    ErrorClass::Rank,
                    "partitioned receives take no MPI_ANY_SOURCE",
                ));
            }
            if a.tag == crate::pml::request::ANY_TAG {
                return Err(bad(
                    ErrorClass::Tag,
                    "partitioned receives take no MPI_ANY_TAG",
                ));
            }
            p2p.check_recv(a.comm, a.peer, a.tag)?
                .map(|_| a.peer as u32)
        };
        let total = (a.partitions as u64)
            .checked_mul(a.count)
            .and_then(|n| n.checked_mul(info.size))
            .ok_or(bad(ErrorClass::Count, "partitioned buffer is too large"))?;
        if self.chans.is_none() {
            let cap = Capacity::growing(4, MAX_CHANNELS);
            let mut s = Sizer::default();
            Pool::<Channel>::size(&mut s, cap);
            let region = self
                .memory
                .take(s.bytes())
                .map_err(|why| self.memory.refused("partitioned requests", why))?;
            let mut arena = Arena::new(region);
            arena.set_account(self.memory);
            self.chans = Some(Pool::new(&mut arena, cap)?);
        }
        let memory = self.memory;
        let hs_mem = Grant::take(memory, HS_LEN)?;
        let slots = if a.send {
            match Grant::slots(memory, a.partitions) {
                Ok(g) => Some((g, a.partitions)),
                Err(e) => {
                    hs_mem.give_back(memory);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let ch = Channel {
            send: a.send,
            comm: a.comm,
            peer: peer.map_or(PROC_NULL, |r| r as i32),
            tag: a.tag,
            buf: a.buf,
            partitions: a.partitions,
            count: a.count,
            datatype: a.datatype,
            extent: info.extent,
            size: info.size,
            hs_mem,
            hs: None,
            remote: None,
            slots,
            round: None,
            error: None,
            freed: false,
        };
        let pool = self.pool()?;
        let key = if pool.reserve() {
            pool.insert(ch).map_err(|ch| {
                drop_grants(&ch, memory);
                no_room()
            })?
        } else {
            drop_grants(&ch, memory);
            // The bound is the tag space's, not a parameter's: say so rather than name one.
            return Err(if pool.capacity() >= MAX_CHANNELS {
                bad(
                    ErrorClass::NoMem,
                    "too many partitioned requests alive at once (1024, a fixed bound of the internal tag space; free some with MPI_Request_free)",
                )
            } else {
                pool.exhausted("partitioned requests", crate::memory::MEMORY_MAX.name)
            });
        };
        // The type stays usable by every round, even if the user frees it meanwhile.
        p2p.types.retain(a.datatype);
        if let Err(e) = self.handshake(p2p, key, total) {
            let _ = self.free(p2p, key);
            return Err(e);
        }
        Ok(key)
    }

    /// Sends (sender) or posts the receive of (receiver) channel `key`'s handshake.
    fn handshake(&mut self, p2p: &mut P2p, key: Key, total: u64) -> Result<()> {
        let ch = self.chan(key)?;
        if ch.peer == PROC_NULL {
            return Ok(());
        }
        let peer = ch.peer as u32;
        let (comm, tag) = (ch.comm, hs_tag(ch.tag));
        let ptr = ch.hs_mem.ptr;
        let id = if ch.send {
            Handshake {
                tag: ch.tag,
                partitions: ch.partitions,
                chan: key.index,
                total,
            }
            .emit(ch.hs_bytes());
            let d = p2p.dest(comm, peer)?;
            // SAFETY: the handshake's grant lives until its send is done (see `in_flight`).
            let conv = unsafe { Packer::contiguous(ptr, HS_LEN) };
            p2p.isend(&d, tag, conv, SendMode::Standard, 0)?
        } else {
            let s = p2p.sel(comm, Source::Rank(peer), tag)?;
            // SAFETY: as above, for the receive.
            let conv = unsafe { Unpacker::contiguous(ptr, HS_LEN) };
            p2p.irecv(&s, conv, 0)?
        };
        self.chan(key)?.hs = Some(id);
        Ok(())
    }

    /// Begins a round of channel `key` (`MPI_Start`): its operation's request.
    pub fn start(&mut self, p2p: &mut P2p, key: Key) -> Result<ReqId> {
        let op = p2p.pml.requests_mut().pending(0)?;
        let ch = self.chan(key)?;
        ch.round = Some(op);
        ch.error = None;
        for s in ch.slot_slice() {
            *s = Slot::default();
        }
        if !ch.send && ch.remote.is_some() {
            self.post(p2p, key)?;
        }
        self.check(p2p, key);
        Ok(op)
    }

    /// Marks partition `i` of send channel `key` ready and sends it (`MPI_Pready`).
    pub fn ready(&mut self, p2p: &mut P2p, key: Key, i: i64) -> Result<()> {
        let ch = self.chan(key)?;
        if !ch.send {
            return Err(bad(
                ErrorClass::Request,
                "MPI_Pready needs a partitioned send request",
            ));
        }
        if ch.round.is_none() {
            return Err(bad(
                ErrorClass::Request,
                "MPI_Pready on a partitioned request that is not started",
            ));
        }
        if i < 0 || i >= ch.partitions as i64 {
            return Err(bad(ErrorClass::Arg, "partition out of range"));
        }
        let i = i as usize;
        let peer = ch.peer;
        let slot = ch.slot_slice()[i];
        if slot.begun {
            return Err(bad(
                ErrorClass::Arg,
                "partition already marked ready in this round",
            ));
        }
        ch.slot_slice()[i].begun = true;
        if peer == PROC_NULL {
            ch.slot_slice()[i].done = true;
            self.check(p2p, key);
            return Ok(());
        }
        let inst = (i as u64 * ch.count) as isize;
        let base = ch.buf.wrapping_offset(inst.wrapping_mul(ch.extent));
        let (count, dt, comm) = (ch.count, ch.datatype, ch.comm);
        let tag = data_tag(key.index, i as u32);
        let d = p2p.dest(comm, peer as u32)?;
        // SAFETY: MPI's rule for partitioned sends: the partition is not touched from
        // `MPI_Pready` until the round completes, and the buffer is lent for the request's life.
        let conv = unsafe { Packer::new(base, count, dt, &p2p.types)? };
        let id = p2p.isend(&d, tag, conv, SendMode::Standard, 0)?;
        self.chan(key)?.slot_slice()[i].req = Some(id);
        self.check(p2p, key);
        Ok(())
    }

    /// Whether receive partition `j` of channel `key` has arrived (`MPI_Parrived`).
    pub fn arrived(&mut self, p2p: &mut P2p, key: Key, j: i64) -> Result<bool> {
        self.check(p2p, key);
        let ch = self.chan(key)?;
        if ch.send {
            return Err(bad(
                ErrorClass::Request,
                "MPI_Parrived needs a partitioned receive request",
            ));
        }
        if j < 0 || j >= ch.partitions as i64 {
            return Err(bad(ErrorClass::Arg, "partition out of range"));
        }
        if ch.round.is_none() {
            // Not started, or the round's operation is done: everything is in.
            return Ok(true);
        }
        if ch.peer == PROC_NULL {
            return Ok(true);
        }
        let Some(h) = ch.remote else {
            return Ok(false);
        };
        let part = ch.count * ch.size;
        let (lo, hi) = (j as u64 * part, (j as u64 + 1) * part);
        let sp = h.total / h.partitions as u64;
        if sp == 0 || lo >= hi {
            // No bytes to wait for: the sender's partitions of the same share of the index
            // range say it (their empty messages arrive when marked ready).
            let (rp, hp) = (ch.partitions as u64, h.partitions as u64);
            let first = (j as u64 * hp / rp) as usize;
            let last = ((((j as u64 + 1) * hp).div_ceil(rp)) as usize)
                .saturating_sub(1)
                .clamp(first, hp as usize - 1);
            return Ok(ch.slot_slice()[first..=last].iter().all(|s| s.done));
        }
        let first = (lo / sp) as usize;
        let last = (((hi - 1) / sp) as usize).min(h.partitions as usize - 1);
        Ok(ch.slot_slice()[first..=last].iter().all(|s| s.done))
    }

    /// Posts the receives of the current round of matched receive channel `key`.
    fn post(&mut self, p2p: &mut P2p, key: Key) -> Result<()> {
        let ch = self.chan(key)?;
        let Some(h) = ch.remote else {
            return Ok(());
        };
        if ch.error.is_some() {
            for s in ch.slot_slice() {
                s.begun = true;
                s.done = true;
            }
            return Ok(());
        }
        let sp = h.total / h.partitions as u64;
        let (buf, size, extent, dt, comm, peer) = (
            ch.buf,
            ch.size,
            ch.extent,
            ch.datatype,
            ch.comm,
            ch.peer as u32,
        );
        for i in 0..h.partitions {
            let off = i as u64 * sp;
            let inst = off / size.max(1);
            let base = buf.wrapping_offset((inst as isize).wrapping_mul(extent));
            let n = sp / size.max(1);
            let s = p2p.sel(comm, Source::Rank(peer), data_tag(h.chan, i))?;
            // SAFETY: MPI's rule for partitioned receives: the buffer is lent for the request's
            // life, and a partition is not read before `MPI_Parrived` says it is in.
            let conv = unsafe { Unpacker::new(base, n, dt, &p2p.types)? };
            let id = p2p.irecv(&s, conv, 0)?;
            let slot = &mut self.chan(key)?.slot_slice()[i as usize];
            slot.begun = true;
            slot.req = Some(id);
        }
        Ok(())
    }

    /// Takes in channel `key`'s messages that completed; finishes its round when all have.
    fn check(&mut self, p2p: &mut P2p, key: Key) {
        let memory = self.memory;
        let Ok(ch) = self.chan(key) else {
            return;
        };
        let requests = p2p.pml.requests_mut();
        if let Some(hs) = ch.hs {
            if requests.done(hs) {
                ch.hs = None;
                let st = requests.test(hs).ok().flatten();
                if !ch.send && !ch.freed {
                    if let Err(e) = match_with(ch, st, memory) {
                        ch.error = Some(e);
                    }
                    if ch.round.is_some() {
                        let _ = self.post(p2p, key);
                    }
                }
            }
        }
        let Ok(ch) = self.chan(key) else {
            return;
        };
        let requests = p2p.pml.requests_mut();
        let mut first_error = None;
        for s in ch.slot_slice() {
            if let Some(id) = s.req {
                if requests.done(id) {
                    s.req = None;
                    s.done = true;
                    if let Ok(Some(st)) = requests.test(id) {
                        if st.error.is_some() && first_error.is_none() {
                            first_error = st.error;
                        }
                    }
                }
            }
        }
        if ch.error.is_none() {
            ch.error = first_error;
        }
        // A receive from MPI_PROC_NULL is complete at once; a send to it once every partition
        // is marked ready, as any other send.
        let complete = ch.round.is_some()
            && ((!ch.send && ch.peer == PROC_NULL)
                || (ch.error.is_some() && !ch.in_flight() && (ch.send || ch.hs.is_none()))
                || (ch.slots.is_some() && ch.slot_slice().iter().all(|s| s.done)));
        if complete {
            if let Some(op) = ch.round.take() {
                let st = ch.status();
                requests.finish(op, st);
            }
        }
        if ch.freed && !ch.in_flight() {
            self.drop_chan(p2p, key);
        }
    }

    /// Progress: takes in the messages of every channel; returns how many rounds finished.
    #[inline(always)]
    pub fn progress(&mut self, p2p: &mut P2p) -> usize {
        match self.chans.as_ref() {
            Some(pool) if !pool.is_empty() => self.progress_chans(p2p),
            _ => 0,
        }
    }

    #[inline(never)]
    fn progress_chans(&mut self, p2p: &mut P2p) -> usize {
        let mut n = 0;
        for idx in 0..pool_capacity(self) {
            let Some(key) = self.chans.as_ref().and_then(|p| p.key_at(idx)) else {
                continue;
            };
            let was = self
                .chans
                .as_ref()
                .and_then(|p| p.get(key))
                .map(|c| c.round.is_some());
            self.check(p2p, key);
            let now = self
                .chans
                .as_ref()
                .and_then(|p| p.get(key))
                .map(|c| c.round.is_some());
            if was == Some(true) && now != Some(true) {
                n += 1;
            }
        }
        n
    }

    /// Lets go of channel `key` (`MPI_Request_free`): now if nothing is in flight, else once
    /// its messages are done. An unmatched receive's handshake receive is cancelled.
    pub fn free(&mut self, p2p: &mut P2p, key: Key) -> Result<()> {
        let ch = self.chan(key)?;
        ch.freed = true;
        ch.round = None;
        if let (false, Some(hs)) = (ch.send, ch.hs) {
            p2p.pml.cancel(hs)?;
        }
        self.check(p2p, key);
        Ok(())
    }

    fn drop_chan(&mut self, p2p: &mut P2p, key: Key) {
        let memory = self.memory;
        if let Some(ch) = self.chans.as_mut().and_then(|p| p.remove(key)) {
            drop_grants(&ch, memory);
            p2p.types.release(ch.datatype);
        }
    }
}

fn pool_capacity(p: &Parts) -> u32 {
    p.chans.as_ref().map_or(0, |p| p.capacity())
}

fn no_room() -> Error {
    bad(ErrorClass::NoMem, "no room for another partitioned request")
}

fn drop_grants(ch: &Channel, memory: &Memory) {
    ch.hs_mem.give_back(memory);
    if let Some((g, _)) = ch.slots {
        g.give_back(memory);
    }
}

/// Matches receive channel `ch` with the handshake it received (status `st`).
fn match_with(ch: &mut Channel, st: Option<Status>, memory: &Memory) -> Result<()> {
    let st = st.ok_or(no_chan())?;
    if let Some(e) = st.error {
        return Err(e);
    }
    if st.cancelled {
        return Err(bad(ErrorClass::Request, "partitioned receive was freed"));
    }
    let h = Handshake::parse(ch.hs_bytes()).ok_or(bad(
        ErrorClass::Intern,
        "partitioned handshake is malformed",
    ))?;
    ch.remote = Some(h);
    if h.tag != ch.tag {
        return Err(bad(
            ErrorClass::Tag,
            "partitioned requests whose tags agree in their low 28 bits met; use tags below 2^28",
        ));
    }
    if h.total > ch.total() {
        return Err(Error::new(
            ErrorClass::Truncate,
            Reason::Truncated {
                message_bytes: h.total,
                buffer_bytes: ch.total(),
            },
        ));
    }
    let sp = h.total / h.partitions as u64;
    if sp * h.partitions as u64 != h.total || (ch.size > 0 && !sp.is_multiple_of(ch.size)) {
        return Err(bad(
            ErrorClass::Type,
            "the sender's partitions do not fall on whole instances of the receive datatype",
        ));
    }
    ch.slots = Some((Grant::slots(memory, h.partitions)?, h.partitions));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_round_trips_and_rejects_bad_bytes() {
        let h = Handshake {
            tag: 77,
            partitions: 8,
            chan: 3,
            total: 4096,
        };
        let mut b = [0u8; HS_LEN];
        h.emit(&mut b);
        assert_eq!(Handshake::parse(&b), Some(h));
        let mut bad = b;
        bad[0] ^= 1;
        assert_eq!(Handshake::parse(&bad), None);
        let mut zero_parts = b;
        zero_parts[8..12].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(Handshake::parse(&zero_parts), None);
    }

    #[test]
    fn tags_stay_in_their_ranges() {
        assert!(data_tag(0, 0) < -(1 << 20) - 0x3fff_ffff);
        assert!(data_tag(MAX_CHANNELS - 1, MAX_PARTITIONS - 1) > hs_tag(0));
        assert!(hs_tag(i32::MAX) > i32::MIN + 0x3_0000);
        assert_ne!(data_tag(1, 0), data_tag(0, 1));
    }
}
