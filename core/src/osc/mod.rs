//! One-sided communication (MPI RMA): windows and their operations (Open MPI's `osc`).
//!
//! This first component, like Open MPI's `osc/pt2pt` and MPICH's CH3 RMA, carries every
//! operation as an *active message* through the point-to-point engine, so it works over every
//! transport (`self`, `sm`, `tcp`, the node's Portals) without asking anything of them:
//!
//! - A window is an object in a pool ([`WinId`]), over a *hidden* duplicate of the user's
//!   communicator, so its traffic never meets the user's messages. Its memory is the user's
//!   (`MPI_Win_create`), the engine's (`MPI_Win_allocate`, counted against `mpi_memory_max`, or a
//!   shared segment on one node), a segment shared by the node's processes
//!   (`MPI_Win_allocate_shared`), or whatever the user attaches (`MPI_Win_create_dynamic`).
//! - An origin's `MPI_Put`, `MPI_Get`, `MPI_Accumulate`, ... is one message to the target on tag
//!   [`TAG_AM`]: a header, the target datatype's flattened description, the data packed
//!   ([`wire`]). Operations that fetch post their reply's receive (into the user's buffer,
//!   with the user's datatype) before the request goes out, on a tag of their own.
//! - The target applies messages in arrival order under the engine's progress ([`apply`]) — a
//!   target inside any MPI call makes progress — one message at a time, so each operation is
//!   atomic with respect to every other on that target.
//! - Synchronisation rides the same ordered channel: a `FLUSH` message is answered once every
//!   earlier message from that origin has been applied, so `MPI_Win_flush`, `MPI_Win_unlock`
//!   and `MPI_Win_fence` (a flush of every target touched, then a barrier) complete by waiting
//!   for answers. Locks are granted by the target (`LOCK`/`UNLOCK`, waiters granted in rank
//!   order after the holder leaves); post/start/complete/wait is a `POST` message from each
//!   target to each origin, and a `DONE` message through the channel from each origin.
//!
//! Memory: a window holds one grant for its per-peer table and attributes, its memory if
//! allocated, and a small cache of message buffers (grants reused between operations); all
//! come from the engine's memory account and go back at `MPI_Win_free`.
//!
//! *Why active messages first:* they need nothing of a transport, so every transport has RMA
//! now, with one path to test. Windows whose memory the node's processes share
//! (`MPI_Win_allocate_shared`, and `MPI_Win_allocate` on one node) take the first faster path
//! ([`shm`]): the origin applies the same message itself to the target's part, so operations are
//! loads and stores with no target involvement. Where the platform has a network's own
//! one-sided operations (Portals 4 on the node build, [`rdma`]), a window reached by messages
//! moves the data of the operations that suit them with those, counted at the origin, with
//! active messages as the fallback for the rest.

pub mod apply;
mod atomic;
mod bulk;
pub mod lean;
mod origin;
pub mod rdma;
mod shm;
mod sync;
mod window;
pub mod wire;

pub use origin::{issue, Buffer, RmaOp, Target};
pub use shm::shared_query;
pub use sync::{
    complete, fence, flush, flush_local, lock, lock_all, post, start, sync, unlock, unlock_all,
    wait,
};
pub use window::{attach, create, detach, free, WinMemory};

use core::mem::MaybeUninit;

use heapless::Vec;

use crate::arch::Endian;
use crate::arena::{Arena, Sizer};
use crate::comm::{CommId, ErrHandler};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::table::TypeTable;
use crate::datatype::{Datatype, Scalar};
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::memory::Memory;
use crate::op::Op;
use crate::p2p::P2p;
use crate::platform::{Level, Platform};
use crate::pml::request::{ReqId, SendMode, Source, Status};
use crate::pool::{Capacity, Key, Pool};
use crate::shared::Inside;
use apply::{Exposed, Fault, Span};
use wire::{kind, Am, AmHdr, WireNode, HDR_LEN, NODE_LEN};

/// Tag of active messages on a window's hidden communicator.
pub const TAG_AM: i32 = 1;
/// Tag of a target's notice that it posted an exposure epoch (`MPI_Win_post`).
pub const TAG_POST: i32 = 2;
/// First reply tag; replies cycle through `[TAG_REPLY, i32::MAX]`.
pub const TAG_REPLY: i32 = 16;

/// Most windows at once (a window handle has 16 bits for the slot).
pub const MAX_WINDOWS: u32 = 1 << 16;
/// Operations an origin keeps in flight on one window before it waits for some to finish.
const MAX_PENDING: usize = 256;
/// Replies a target keeps in flight on one window before it stops taking messages.
const MAX_REPLIES: usize = 64;
/// Message buffers a window keeps for reuse.
const CACHE: usize = 8;
/// Largest buffer the cache keeps (larger ones go back at once).
const CACHE_MAX: usize = 1 << 20;
/// Most memory ranges attached to a dynamic window at once.
pub const MAX_ATTACHED: usize = 64;
/// From this many bytes, a put to one run of the target's memory sends its data as a message of
/// its own, received straight into the window: no copy into a message buffer at either end.
pub const PUT_SPLIT: u64 = 8192;
/// Most nodes of a target datatype's description an operation can carry.
pub const MAX_NODES: usize = 4096;

/// `MPI_MODE_NOCHECK`.
pub const MODE_NOCHECK: i32 = 1024;
/// `MPI_MODE_NOSTORE`.
pub const MODE_NOSTORE: i32 = 2048;
/// `MPI_MODE_NOPUT`.
pub const MODE_NOPUT: i32 = 4096;
/// `MPI_MODE_NOPRECEDE`.
pub const MODE_NOPRECEDE: i32 = 8192;
/// `MPI_MODE_NOSUCCEED`.
pub const MODE_NOSUCCEED: i32 = 16384;
const MODES: i32 = MODE_NOCHECK | MODE_NOSTORE | MODE_NOPUT | MODE_NOPRECEDE | MODE_NOSUCCEED;

/// A window's key in the pool.
pub type WinId = Key;

/// How a window's memory came to be (`MPI_WIN_CREATE_FLAVOR`'s values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// `MPI_Win_create`: the user's memory.
    Create = 1,
    /// `MPI_Win_allocate`: the engine's.
    Allocate = 2,
    /// `MPI_Win_create_dynamic`: whatever is attached.
    Dynamic = 3,
    /// `MPI_Win_allocate_shared`: the engine's, in memory the node's processes share.
    Shared = 4,
}

/// Lock kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// `MPI_LOCK_SHARED`.
    Shared,
    /// `MPI_LOCK_EXCLUSIVE`.
    Exclusive,
}

/// What a window reports through `MPI_Win_get_attr`: kept in memory that never moves, since the
/// standard hands out pointers to these values.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WinAttrs {
    /// `MPI_WIN_SIZE` (an `MPI_Aint`).
    pub size: isize,
    /// `MPI_WIN_DISP_UNIT`.
    pub disp_unit: i32,
    /// `MPI_WIN_CREATE_FLAVOR`.
    pub flavor: i32,
    /// `MPI_WIN_MODEL` (`MPI_WIN_UNIFIED`: one copy of the memory).
    pub model: i32,
}

/// What one process of the window knows about each peer (origin and target roles).
#[derive(Clone, Copy, Debug, Default)]
struct Peer {
    /// The peer's window size in bytes and displacement unit (0 for a dynamic window).
    size: u64,
    unit: u64,
    /// Origin: operations went to it since the last flush.
    dirty: bool,
    /// Origin: the lock this process holds at that target (0 none, 1 shared, 2 exclusive), and
    /// whether it was taken with `MPI_MODE_NOCHECK` (no message).
    locked: u8,
    nocheck: bool,
    /// Origin: the target is in this process's access group (`MPI_Win_start`).
    started: bool,
    /// Target: the lock the peer holds here, and the lock it waits for with its reply tag.
    holds: u8,
    wants: u8,
    wants_tag: i32,
    /// Shared windows: the address of the peer's part in this process's mapping.
    at: usize,
    /// The peer's process (its job-wide index), which network operations address.
    proc_: u32,
    /// The peer's data representation when it differs from this process's (only its byte
    /// order or `long double` format can, see `window::reprs`): requests to it are written in
    /// its order and their data packed in its representation.
    repr: Option<crate::datatype::repr::Repr>,
}

/// A memory grant held by a window.
#[derive(Clone, Copy, Debug)]
struct Grant {
    ptr: *mut u8,
    len: usize,
}

impl Grant {
    fn take(mem: &Memory, bytes: usize, what: &'static str) -> Result<Grant> {
        let r = mem.take(bytes).map_err(|why| mem.refused(what, why))?;
        Ok(Grant {
            ptr: r.as_mut_ptr().cast(),
            len: r.len(),
        })
    }

    fn give_back(self, mem: &Memory) {
        // SAFETY: `ptr..ptr+len` is exactly the region one `Memory::take` returned, and the
        // window that held it keeps no reference into it any more (it gives each grant back once).
        let region = unsafe {
            core::slice::from_raw_parts_mut(self.ptr.cast::<MaybeUninit<u8>>(), self.len)
        };
        mem.give_back(region);
    }

    /// The grant's bytes.
    ///
    /// # Safety
    /// No other reference to the grant is live.
    unsafe fn bytes(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: the caller's contract; `len` is within the grant (callers pass at most `len`),
        // and the bytes may be uninitialised: they are only written, then read back.
        unsafe { core::slice::from_raw_parts_mut(self.ptr, len.min(self.len)) }
    }
}

/// A window whose data moves by the network's own operations ([`rdma`]).
#[derive(Clone, Copy)]
struct Net {
    rdma: &'static dyn rdma::Rdma,
    /// The key every member exposed its memory under (the hidden communicator's context id).
    key: u64,
    /// This process's exposure, if its part is not empty.
    exposure: Option<u64>,
    /// The counter of this process's operations, how many were issued and how many it last saw
    /// complete.
    ct: u64,
    issued: u64,
    done: u64,
}

impl core::fmt::Debug for Net {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Net")
            .field("key", &self.key)
            .field("issued", &self.issued)
            .field("done", &self.done)
            .finish()
    }
}

/// An origin's operation in flight.
#[derive(Clone, Copy, Debug)]
struct Pending {
    req: ReqId,
    target: u32,
    /// The message buffer to release when it is done.
    buf: Option<Grant>,
    /// The user holds the request (`MPI_Rget`, ...): look at it, never free it.
    user: bool,
}

/// One window.
pub struct Window {
    /// The hidden communicator under it.
    pub comm: CommId,
    /// This process's rank and the window's size in processes.
    pub rank: u32,
    /// Processes.
    pub size: u32,
    /// Address of displacement 0 (0 for a dynamic window) and its length in bytes.
    pub base: usize,
    /// Bytes.
    pub len: usize,
    /// Displacement unit.
    pub unit: u32,
    /// How its memory came to be.
    pub flavor: Flavor,
    /// Its error handler (`MPI_ERRORS_ARE_FATAL` by default, as the standard says).
    pub errhandler: ErrHandler,
    /// `MPI_Win_set_name`'s name.
    pub name: [u8; 128],
    /// Bytes of `name`.
    pub name_len: usize,
    /// The info the user gave (or set), if any: the engine's info object, retained.
    pub info: Option<crate::info::InfoId>,
    /// The memory `MPI_Win_allocate` took.
    owned: Option<Grant>,
    /// The segment of a shared window: every process's part, reached by loads and stores.
    seg: Option<shm::Segment>,
    /// Memory a message may touch: the window, or what is attached.
    regions: Vec<(usize, usize), MAX_ATTACHED>,
    /// The grant holding `attrs` and `peers`.
    table: Grant,
    attrs: *mut WinAttrs,
    peers: *mut Peer,
    pending: Vec<Pending, MAX_PENDING>,
    /// Replies being sent, with the buffer each holds (none when sent from the window itself).
    replies: Vec<(ReqId, Option<Grant>), MAX_REPLIES>,
    /// The message being received, and its buffer.
    incoming: Option<(ReqId, Grant, u32)>,
    /// The data of a split put being received into the window: no other message is applied
    /// until it is in (they may depend on it).
    data_in: Option<ReqId>,
    cache: Vec<Grant, CACHE>,
    next_tag: i32,
    /// Target: shared locks granted, and whether an exclusive one is.
    shared: u32,
    exclusive: bool,
    /// Origin: a fence opened an access epoch (closed by `MPI_MODE_NOSUCCEED`).
    fence: bool,
    /// Origin: `MPI_Win_lock_all` holds.
    lock_all: bool,
    /// Origin: `MPI_Win_start` opened an access epoch.
    access: bool,
    /// Target: `MPI_Win_post`'s group size while exposed, and `DONE`s received.
    exposure: Option<u32>,
    done: u32,
    /// The network's operations, when this window uses them.
    net: Option<Net>,
    /// The platform's passive-target progress thread runs for this window (counted by the C
    /// layer, which stops the thread at the last such window's free).
    pub passive: bool,
}

// SAFETY: a window's raw pointers are into grants it owns (or the user's memory, lent for the
// window's life by MPI's rules); the engine that holds it is reached by one thread at a time.
unsafe impl Send for Window {}

impl Window {
    /// Whether operations on this window need its targets' progress (its peers are reached by
    /// messages, not by loads and stores in a shared segment).
    pub fn by_messages(&self) -> bool {
        self.seg.is_none() && self.size > 1
    }

    fn peer(&self, r: u32) -> &Peer {
        // SAFETY: `peers` holds `size` initialised entries in the window's own grant; `r` is
        // checked against `size` by every caller (ranks come from the communicator or were
        // checked), and `get` bounds it anyway.
        unsafe { core::slice::from_raw_parts(self.peers, self.size as usize) }
            .get(r as usize)
            .unwrap_or(&PEER_NONE)
    }

    fn peer_mut(&mut self, r: u32) -> Option<&mut Peer> {
        // SAFETY: as in `peer`; the window owns the grant and lends it only through `&mut self`.
        unsafe { core::slice::from_raw_parts_mut(self.peers, self.size as usize) }
            .get_mut(r as usize)
    }

    /// The attribute values (stable addresses for `MPI_Win_get_attr`).
    pub fn attrs(&self) -> *mut WinAttrs {
        self.attrs
    }

    /// Whether an access epoch lets this process reach `target` now.
    fn may_access(&self, target: u32) -> bool {
        let p = self.peer(target);
        self.fence || self.lock_all || p.locked != 0 || (self.access && p.started)
    }

    fn tag(&mut self) -> i32 {
        let t = self.next_tag;
        self.next_tag = if t == i32::MAX { TAG_REPLY } else { t + 1 };
        t
    }

    /// A message buffer of at least `n` bytes (from the cache when one fits).
    fn buffer(&mut self, mem: &Memory, n: usize) -> Result<Grant> {
        if let Some(i) = self.cache.iter().position(|g| g.len >= n) {
            return Ok(self.cache.swap_remove(i));
        }
        Grant::take(
            mem,
            n.max(256).next_power_of_two(),
            "one-sided message buffers",
        )
    }

    fn release(&mut self, mem: &Memory, g: Grant) {
        if g.len <= CACHE_MAX {
            if let Err(g) = self.cache.push(g) {
                g.give_back(mem);
            }
        } else {
            g.give_back(mem);
        }
    }

    fn exposed(&self) -> Exposed<'_> {
        Exposed {
            base: self.base,
            unit: self.unit.max(1) as usize,
            regions: &self.regions,
        }
    }

    /// Frees what finished: sends' buffers, the library's own replies and requests.
    fn reap(&mut self, p2p: &mut P2p, mem: &Memory) -> usize {
        let mut n = 0;
        let mut i = 0;
        while i < self.pending.len() {
            let p = self.pending[i];
            let finished = if p.user {
                p2p.pml.requests().done(p.req)
            } else {
                match p2p.pml.requests_mut().test(p.req) {
                    Ok(Some(_)) | Err(_) => true,
                    Ok(None) => false,
                }
            };
            if finished {
                self.pending.swap_remove(i);
                if let Some(b) = p.buf {
                    self.release(mem, b);
                }
                n += 1;
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i < self.replies.len() {
            let (req, b) = self.replies[i];
            match p2p.pml.requests_mut().test(req) {
                Ok(None) => i += 1,
                _ => {
                    self.replies.swap_remove(i);
                    if let Some(b) = b {
                        self.release(mem, b);
                    }
                    n += 1;
                }
            }
        }
        n
    }

    /// Whether every network operation this origin issued is complete (an error if one failed).
    fn net_settled(&mut self) -> Result<bool> {
        match self.net.as_mut() {
            None => Ok(true),
            Some(n) if n.done >= n.issued => Ok(true),
            Some(n) => {
                n.done = n.rdma.completed(n.ct)?;
                Ok(n.done >= n.issued)
            }
        }
    }

    /// Whether nothing of this origin's is in flight to `target` (to anyone for `None`).
    fn settled(&self, target: Option<u32>) -> bool {
        self.pending
            .iter()
            .all(|p| target.is_some_and(|t| p.target != t))
    }

    /// Sends `len` bytes of `buf` to `target` as an active message; the buffer goes back when
    /// sent.
    fn send(
        &mut self,
        p2p: &mut P2p,
        mem: &Memory,
        target: u32,
        buf: Grant,
        len: usize,
        user: bool,
    ) -> Result<Option<ReqId>> {
        let d = p2p.dest(self.comm, target)?;
        // SAFETY: the grant is the window's until the send's request completes (`reap` releases
        // it then), and nothing writes it meanwhile.
        let conv = unsafe { Packer::contiguous(buf.ptr, len) };
        match p2p.send(&d, TAG_AM, conv, SendMode::Standard, 0)? {
            None => {
                self.release(mem, buf);
                Ok(None)
            }
            Some(req) => {
                self.track(Pending {
                    req,
                    target,
                    buf: Some(buf),
                    user,
                })?;
                Ok(Some(req))
            }
        }
    }

    fn track(&mut self, p: Pending) -> Result<()> {
        self.pending
            .push(p)
            .map_err(|_| Error::internal("one-sided operations in flight past the window's table"))
    }

    /// Sends a header-only message of `kind` to `target`; with `reply`, posts the receive of the
    /// empty answer first and tracks it.
    fn control(
        &mut self,
        p2p: &mut P2p,
        mem: &Memory,
        target: u32,
        mut hdr: AmHdr,
        reply: bool,
    ) -> Result<()> {
        if reply {
            let tag = self.tag();
            hdr.reply_tag = tag;
            let s = p2p.sel(self.comm, Source::Rank(target), tag)?;
            let req = p2p.irecv(&s, Unpacker::empty(), 0)?;
            self.track(Pending {
                req,
                target,
                buf: None,
                user: false,
            })?;
        }
        let mut buf = self.buffer(mem, HDR_LEN)?;
        // SAFETY: the grant was just taken or reused; nothing else refers to it.
        let order = self.peer(target).repr.map_or(Endian::NATIVE, |r| r.endian);
        let n = hdr.in_order(order).emit(&[], unsafe { buf.bytes(HDR_LEN) });
        let n = n.ok_or(Error::bad_arg("one-sided message buffer too small"))?;
        self.send(p2p, mem, target, buf, n, false).map(|_| ())
    }

    /// Target: takes and applies the messages that arrived; returns how many.
    fn serve(&mut self, p2p: &mut P2p, mem: &Memory, platform: &dyn Platform) -> Result<usize> {
        let mut n = 0;
        for _ in 0..64 {
            if self.replies.is_full() {
                break;
            }
            if let Some(r) = self.data_in {
                if p2p.pml.requests_mut().test(r)?.is_none() {
                    break;
                }
                self.data_in = None;
                n += 1;
            }
            let (req, buf, len) = match self.incoming {
                Some(x) => x,
                None => {
                    let s = p2p.sel(self.comm, Source::Any, TAG_AM)?;
                    let Some((msg, st)) = p2p.improbe(&s)? else {
                        break;
                    };
                    let len = st.message_bytes.max(st.bytes) as usize;
                    let buf = self.buffer(mem, len.max(HDR_LEN))?;
                    // SAFETY: the grant is the window's until `incoming` is cleared below, and
                    // nothing else touches it meanwhile.
                    let conv = unsafe { Unpacker::contiguous(buf.ptr, len) };
                    let req = p2p.imrecv(msg, conv, 0)?;
                    self.incoming = Some((req, buf, len as u32));
                    (req, buf, len as u32)
                }
            };
            let Some(st) = p2p.pml.requests_mut().test(req)? else {
                break;
            };
            self.incoming = None;
            let mut b = buf;
            // SAFETY: the receive into the grant completed; the window alone holds it.
            let msg: &[u8] = unsafe { b.bytes(len as usize) };
            let r = self.apply(p2p, mem, st.source as u32, msg);
            self.release(mem, buf);
            if let Err(why) = r {
                platform.log(
                    Level::Error,
                    format_args!("one-sided message from rank {} dropped: {}", st.source, why),
                );
            }
            n += 1;
        }
        Ok(n)
    }

    /// Applies one message from `src`.
    fn apply(
        &mut self,
        p2p: &mut P2p,
        mem: &Memory,
        src: u32,
        msg: &[u8],
    ) -> core::result::Result<(), Why> {
        let am = Am::parse(msg).map_err(|_| Why::Malformed)?;
        let h = am.hdr;
        let t = span(&am);
        match h.kind {
            kind::PUT if h.flags & wire::flags::DATA_FOLLOWS != 0 => {
                let x = self.exposed();
                let len = h.len as usize;
                let ok = apply::check(&x, &t, h.len);
                let at = match (ok, t.nodes) {
                    (Ok(()), [n]) if n.loop_ == 0 && t.count == 1 => x.locate(h.disp, n.disp, len),
                    _ => None,
                };
                let conv = match at {
                    // SAFETY: `locate` put the range inside the window's memory, which MPI lends
                    // the window for its life; no other message is applied until this is in.
                    Some(a) => unsafe { Unpacker::contiguous(a as *mut u8, len) },
                    // The data must still be taken off the wire: into nothing (truncated).
                    None => Unpacker::empty(),
                };
                let s = p2p
                    .sel(self.comm, Source::Rank(src), h.reply_tag)
                    .map_err(|_| Why::Send)?;
                self.data_in = Some(p2p.irecv(&s, conv, 0).map_err(|_| Why::Send)?);
                if at.is_none() {
                    return Err(Why::Range);
                }
            }
            kind::PUT => {
                let x = self.exposed();
                apply::check(&x, &t, h.len)?;
                let data = am.data.get(..h.len as usize).ok_or(Why::Malformed)?;
                // SAFETY: the window's memory, exposed by MPI's rules for the window's life.
                unsafe { apply::put(&x, &t, data) }?;
            }
            kind::ACC => {
                let x = self.exposed();
                let (op, dt) = acc_args(&h)?;
                let data = am.data.get(..h.len as usize).ok_or(Why::Malformed)?;
                if h.flags & wire::flags::IMAGE != 0 {
                    let t = image(&x, &h)?;
                    apply::combine(op, dt, t, data)?;
                } else {
                    apply::check(&x, &t, h.len)?;
                    // SAFETY: as for a put.
                    unsafe { apply::accumulate(&x, &t, op, dt, data) }?;
                }
            }
            kind::GET if t.count == 1 && matches!(t.nodes, [n] if n.loop_ == 0) => {
                // One run of the window: the reply goes from there, without a copy (the window
                // outlives the send: `MPI_Win_free` waits for its replies).
                let len = h.len as usize;
                let x = self.exposed();
                let at = match x.locate(h.disp, t.nodes[0].disp, len) {
                    Some(a) if len > 0 => a,
                    _ if len == 0 => 0,
                    _ => {
                        let _ = self.answer(p2p, mem, src, h.reply_tag);
                        return Err(Why::Range);
                    }
                };
                // SAFETY: `locate` put the range inside the window's memory, which stays valid
                // until the reply's request completes (see above).
                let conv = unsafe { Packer::contiguous(at as *const u8, len) };
                self.reply_from(p2p, mem, src, h.reply_tag, conv, None)
                    .map_err(|_| Why::Send)?;
            }
            kind::GET | kind::GET_ACC | kind::CAS => {
                let len = h.len as usize;
                let mut out = self.buffer(mem, len).map_err(|_| Why::NoMem)?;
                // SAFETY: the grant was just taken; the window alone holds it.
                let o = unsafe { out.bytes(len) };
                let r = fetch(&self.exposed(), &am, o);
                let sent = match r {
                    Ok(()) => self.reply(p2p, mem, src, h.reply_tag, out, len),
                    Err(w) => {
                        // The origin waits for an answer: an empty one, with the error logged.
                        let _ = self.reply(p2p, mem, src, h.reply_tag, out, 0);
                        return Err(w);
                    }
                };
                sent.map_err(|_| Why::Send)?;
            }
            kind::LOCK => {
                let want = if h.lock == wire::lock::EXCLUSIVE {
                    2
                } else {
                    1
                };
                if let Some(p) = self.peer_mut(src) {
                    p.wants = want;
                    p.wants_tag = h.reply_tag;
                }
                self.grant_waiters(p2p, mem, src)?;
            }
            kind::UNLOCK => {
                let held = self.peer(src).holds;
                match held {
                    1 => self.shared = self.shared.saturating_sub(1),
                    2 => self.exclusive = false,
                    _ => {}
                }
                if let Some(p) = self.peer_mut(src) {
                    p.holds = 0;
                }
                self.answer(p2p, mem, src, h.reply_tag)?;
                self.grant_waiters(p2p, mem, (src + 1) % self.size.max(1))?;
            }
            kind::FLUSH => self.answer(p2p, mem, src, h.reply_tag)?,
            kind::DONE => self.done += 1,
            _ => return Err(Why::Malformed),
        }
        Ok(())
    }

    fn reply(
        &mut self,
        p2p: &mut P2p,
        mem: &Memory,
        dst: u32,
        tag: i32,
        buf: Grant,
        len: usize,
    ) -> Result<()> {
        // SAFETY: the grant stays the window's until the send completes (`reap`).
        let conv = unsafe { Packer::contiguous(buf.ptr, len) };
        self.reply_from(p2p, mem, dst, tag, conv, Some(buf))
    }

    /// Sends `conv` to `dst` on `tag`, keeping `buf` (if any) until it is sent.
    fn reply_from(
        &mut self,
        p2p: &mut P2p,
        mem: &Memory,
        dst: u32,
        tag: i32,
        conv: Packer,
        buf: Option<Grant>,
    ) -> Result<()> {
        let d = p2p.dest(self.comm, dst)?;
        match p2p.send(&d, tag, conv, SendMode::Standard, 0)? {
            None => {
                if let Some(b) = buf {
                    self.release(mem, b);
                }
                Ok(())
            }
            Some(req) => self.replies.push((req, buf)).map_err(|_| {
                Error::internal("one-sided replies in flight past the window's table")
            }),
        }
    }

    /// An empty answer to `dst` on `tag`.
    fn answer(
        &mut self,
        p2p: &mut P2p,
        mem: &Memory,
        dst: u32,
        tag: i32,
    ) -> core::result::Result<(), Why> {
        let b = self.buffer(mem, 0).map_err(|_| Why::NoMem)?;
        self.reply(p2p, mem, dst, tag, b, 0).map_err(|_| Why::Send)
    }

    /// Grants waiting locks, looking at ranks from `from` on.
    fn grant_waiters(
        &mut self,
        p2p: &mut P2p,
        mem: &Memory,
        from: u32,
    ) -> core::result::Result<(), Why> {
        let n = self.size;
        for k in 0..n {
            let r = (from + k) % n;
            let p = *self.peer(r);
            let ok = match p.wants {
                1 => !self.exclusive,
                2 => !self.exclusive && self.shared == 0,
                _ => false,
            };
            if !ok {
                if p.wants == 2 {
                    // An exclusive waiter is not overtaken by later shared ones.
                    break;
                }
                continue;
            }
            if p.wants == 1 {
                self.shared += 1;
            } else {
                self.exclusive = true;
            }
            if let Some(q) = self.peer_mut(r) {
                q.holds = p.wants;
                q.wants = 0;
            }
            self.answer(p2p, mem, r, p.wants_tag)?;
        }
        Ok(())
    }
}

static PEER_NONE: Peer = Peer {
    size: 0,
    unit: 0,
    dirty: false,
    locked: 0,
    nocheck: false,
    started: false,
    holds: 0,
    wants: 0,
    wants_tag: 0,
    at: 0,
    proc_: 0,
    repr: None,
};

/// Why a target dropped a message (logged; the origin's checks make these rare).
#[derive(Clone, Copy, Debug)]
enum Why {
    Malformed,
    Range,
    Op,
    NoMem,
    Send,
}

impl From<Fault> for Why {
    fn from(f: Fault) -> Why {
        match f {
            Fault::Range => Why::Range,
            Fault::Malformed => Why::Malformed,
            Fault::Op => Why::Op,
        }
    }
}

impl core::fmt::Display for Why {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Why::Malformed => "malformed",
            Why::Range => "target memory outside the window (MPI_ERR_RMA_RANGE)",
            Why::Op => "operation not defined on the datatype",
            Why::NoMem => "no memory for the reply (mpi_memory_max)",
            Why::Send => "the reply could not be sent",
        })
    }
}

/// Fills `out` for a fetching message (and applies its update).
fn fetch(x: &Exposed, am: &Am, out: &mut [u8]) -> core::result::Result<(), Why> {
    let h = am.hdr;
    let image_ = h.flags & wire::flags::IMAGE != 0;
    if image_ {
        let t = image(x, &h)?;
        out.copy_from_slice(t);
        if h.kind == kind::GET_ACC {
            let (op, dt) = acc_args(&h)?;
            if op == Op::NoOp {
                return Ok(());
            }
            let data = am.data.get(..h.len as usize).ok_or(Why::Malformed)?;
            apply::combine(op, dt, t, data)?;
        }
        return Ok(());
    }
    let t = span(am);
    apply::check(x, &t, h.len)?;
    // SAFETY: the window's memory, exposed by MPI's rules for the window's life.
    unsafe { apply::get(x, &t, out) }?;
    match h.kind {
        kind::GET_ACC => {
            let (op, dt) = acc_args(&h)?;
            if op == Op::NoOp {
                // An atomic read: no data came with it.
                return Ok(());
            }
            let data = am.data.get(..h.len as usize).ok_or(Why::Malformed)?;
            // SAFETY: as above.
            unsafe { apply::accumulate(x, &t, op, dt, data) }?;
        }
        kind::CAS => {
            let len = h.len as usize;
            let new = am.data.get(..len).ok_or(Why::Malformed)?;
            let compare = am.data.get(len..2 * len).ok_or(Why::Malformed)?;
            if out == compare {
                // SAFETY: as above.
                unsafe { apply::put(x, &t, new) }?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn span<'a>(am: &Am<'a>) -> Span<'a> {
    Span {
        nodes: am.nodes,
        disp: am.hdr.disp,
        count: am.hdr.count,
        extent: am.hdr.extent,
    }
}

fn acc_args(h: &AmHdr) -> core::result::Result<(Op, Datatype), Why> {
    let op = wire::op_of(h.op).ok_or(Why::Op)?;
    let dt = Datatype::from_code(h.basic).ok_or(Why::Op)?;
    Ok((op, dt))
}

/// The contiguous target memory of an image message (pair types).
fn image<'a>(x: &Exposed, h: &AmHdr) -> core::result::Result<&'a mut [u8], Why> {
    let len = h.len as usize;
    if len == 0 {
        return Ok(&mut []);
    }
    let addr = x.locate(h.disp, 0, len).ok_or(Why::Range)?;
    // SAFETY: `locate` put `addr..addr+len` inside the window's exposed memory, which MPI lends
    // the window for its life; the slice lives only while this message is applied.
    Ok(unsafe { core::slice::from_raw_parts_mut(addr as *mut u8, len) })
}

/// Every window of the process.
pub struct Osc {
    wins: Option<Pool<Window>>,
    live: u32,
    memory: &'static Memory,
}

fn no_win() -> Error {
    Error::new(
        ErrorClass::Win,
        Reason::BadArgument {
            what: "not a live window",
        },
    )
}

fn sync_err(what: &'static str) -> Error {
    Error::new(ErrorClass::RmaSync, Reason::BadArgument { what })
}

impl Osc {
    /// No windows yet; their pool is made with the first.
    pub fn new(memory: &'static Memory) -> Osc {
        Osc {
            wins: None,
            live: 0,
            memory,
        }
    }

    /// Window `id`.
    pub fn get(&self, id: WinId) -> Result<&Window> {
        self.wins
            .as_ref()
            .and_then(|p| p.get(id))
            .ok_or_else(no_win)
    }

    /// Window `id`, to change.
    pub fn get_mut(&mut self, id: WinId) -> Result<&mut Window> {
        self.wins
            .as_mut()
            .and_then(|p| p.get_mut(id))
            .ok_or_else(no_win)
    }

    /// Every live window.
    pub fn iter(&self) -> impl Iterator<Item = &Window> {
        self.wins.iter().flat_map(|p| p.iter().map(|(_, w)| w))
    }

    /// The live window in slot `index`.
    pub fn at(&self, index: u32) -> Option<WinId> {
        self.wins.as_ref()?.key_at(index)
    }

    /// Serves every window's incoming messages and frees what finished; returns how much moved.
    #[inline(always)]
    pub fn progress(&mut self, p2p: &mut P2p, platform: &dyn Platform) -> usize {
        if self.live == 0 {
            return 0;
        }
        self.progress_live(p2p, platform)
    }

    #[inline(never)]
    fn progress_live(&mut self, p2p: &mut P2p, platform: &dyn Platform) -> usize {
        let mem = self.memory;
        let Some(pool) = self.wins.as_mut() else {
            return 0;
        };
        let mut n = 0;
        for i in 0..pool.capacity() {
            if let Some(w) = pool.at_mut(i) {
                n += w.reap(p2p, mem);
                match w.serve(p2p, mem, platform) {
                    Ok(k) => n += k,
                    Err(e) => platform.log(
                        Level::Error,
                        format_args!("one-sided progress on a window failed: {e}"),
                    ),
                }
            }
        }
        n
    }

    /// Keeps window `w`; when there is no room, hands back with the error its segment (a
    /// mapping dropping the window would not undo).
    fn insert(&mut self, w: Window) -> core::result::Result<WinId, (Error, Option<shm::Segment>)> {
        let mut w = w;
        if self.wins.is_none() {
            let cap = Capacity::growing(4, MAX_WINDOWS);
            let mut s = Sizer::default();
            Pool::<Window>::size(&mut s, cap);
            let region = match self.memory.take(s.bytes()) {
                Ok(r) => r,
                Err(why) => return Err((self.memory.refused("windows", why), w.seg.take())),
            };
            let mut arena = Arena::new(region);
            arena.set_account(self.memory);
            match Pool::new(&mut arena, cap) {
                Ok(p) => self.wins = Some(p),
                Err(e) => return Err((e, w.seg.take())),
            }
        }
        let Some(pool) = self.wins.as_mut() else {
            return Err((no_win(), w.seg.take()));
        };
        if !pool.reserve() {
            return Err((pool.exhausted("windows", "MAX_WINDOWS"), w.seg.take()));
        }
        match pool.insert(w) {
            Ok(k) => {
                self.live += 1;
                Ok(k)
            }
            Err(mut w) => Err((pool.exhausted("windows", "MAX_WINDOWS"), w.seg.take())),
        }
    }
}
