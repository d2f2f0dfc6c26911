//! One-sided communication (MPI RMA): windows and their operations (Open MPI's `osc`).
//!
//! This first component, like Open MPI's `osc/pt2pt` and MPICH's CH3 RMA, carries every
//! operation as an *active message* through the point-to-point engine, so it works over every
//! transport (`self`, `sm`, `tcp`, the node's Portals) without asking anything of them:
//!
//! - A window is an object in a pool ([`WinId`]), over a *hidden* duplicate of the user's
//!   communicator, so its traffic never meets the user's messages. Its memory is the user's
//!   (`MPI_Win_create`), the engine's (`MPI_Win_allocate`, counted against `mpi_memory_max`), or
//!   whatever the user attaches (`MPI_Win_create_dynamic`).
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
//! now, with one path to test; the faster paths (loads, stores and CPU atomics in shared memory
//! for windows on one node, the BTLs' RDMA put/get, Portals' native atomics) are to be added as
//! alternatives chosen per window and per peer, with this one as the fallback.

pub mod apply;
pub mod wire;

use core::mem::MaybeUninit;

use heapless::Vec;

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
}

// SAFETY: a window's raw pointers are into grants it owns (or the user's memory, lent for the
// window's life by MPI's rules); the engine that holds it is reached by one thread at a time.
unsafe impl Send for Window {}

impl Window {
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
        self.pending.push(p).map_err(|_| {
            Error::new(
                ErrorClass::Intern,
                Reason::BadArgument {
                    what: "one-sided operations in flight past the window's table",
                },
            )
        })
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
        let n = hdr.emit(&[], unsafe { buf.bytes(HDR_LEN) });
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
                Error::new(
                    ErrorClass::Intern,
                    Reason::BadArgument {
                        what: "one-sided replies in flight past the window's table",
                    },
                )
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
    pub fn progress(&mut self, p2p: &mut P2p, platform: &dyn Platform) -> usize {
        if self.live == 0 {
            return 0;
        }
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

    fn insert(&mut self, w: Window) -> Result<WinId> {
        if self.wins.is_none() {
            let cap = Capacity::growing(4, MAX_WINDOWS);
            let mut s = Sizer::default();
            Pool::<Window>::size(&mut s, cap);
            let region = self
                .memory
                .take(s.bytes())
                .map_err(|why| self.memory.refused("windows", why))?;
            let mut arena = Arena::new(region);
            arena.set_account(self.memory);
            self.wins = Some(Pool::new(&mut arena, cap)?);
        }
        let pool = self.wins.as_mut().ok_or_else(no_win)?;
        if !pool.reserve() {
            return Err(pool.exhausted("windows", "MAX_WINDOWS"));
        }
        match pool.insert(w) {
            Ok(k) => {
                self.live += 1;
                Ok(k)
            }
            Err(_) => Err(pool.exhausted("windows", "MAX_WINDOWS")),
        }
    }
}

// ---- creation and freeing ---------------------------------------------------------------------

/// What the memory of a new window is.
#[derive(Clone, Copy, Debug)]
pub enum WinMemory {
    /// The user's `len` bytes at `base` (`MPI_Win_create`).
    User {
        /// Address.
        base: usize,
        /// Bytes.
        len: usize,
    },
    /// `len` bytes the engine allocates (`MPI_Win_allocate`).
    Allocate {
        /// Bytes.
        len: usize,
    },
    /// None yet (`MPI_Win_create_dynamic`).
    Dynamic,
}

/// Creates a window over `comm` (collective): returns it and the address of its memory.
pub fn create(
    cx: &mut Inside,
    comm: CommId,
    memory: WinMemory,
    unit: u32,
) -> Result<(WinId, usize)> {
    let c = cx.e().p2p.comm(comm)?;
    if c.is_inter() {
        return Err(Error::new(
            ErrorClass::Comm,
            Reason::BadArgument {
                what: "windows over intercommunicators are not supported",
            },
        ));
    }
    if !cx.e().p2p.comm_homogeneous(comm)? {
        return Err(Error::unsupported(
            "windows over processes of different data representations",
        ));
    }
    let mem = cx.e().osc.memory;
    let (flavor, owned, base, len) = match memory {
        WinMemory::User { base, len } => (Flavor::Create, None, base, len),
        WinMemory::Allocate { len } => {
            if len == 0 {
                (Flavor::Allocate, None, 0, 0)
            } else {
                let g = Grant::take(mem, len, "window memory (MPI_Win_allocate)")?;
                (Flavor::Allocate, Some(g), g.ptr as usize, len)
            }
        }
        WinMemory::Dynamic => (Flavor::Dynamic, None, 0, 0),
    };
    let r = build(cx, comm, flavor, owned, base, len, unit);
    if r.is_err() {
        if let Some(g) = owned {
            g.give_back(mem);
        }
    }
    r.map(|id| (id, base))
}

fn build(
    cx: &mut Inside,
    comm: CommId,
    flavor: Flavor,
    owned: Option<Grant>,
    base: usize,
    len: usize,
    unit: u32,
) -> Result<WinId> {
    let mem = cx.e().osc.memory;
    let size = cx.e().p2p.comm(comm)?.size();
    let rank = cx.e().p2p.comm(comm)?.rank;
    // Everyone's size and unit, for the origin's range checks.
    let mut s = Sizer::default();
    s.slice::<WinAttrs>(1)
        .slice::<Peer>(size as usize)
        .slice::<u64>(2 * size as usize);
    let table = Grant::take(mem, s.bytes(), "window tables")?;
    // SAFETY: the grant is fresh and the window's alone; the arena carves it into the values.
    let region =
        unsafe { core::slice::from_raw_parts_mut(table.ptr.cast::<MaybeUninit<u8>>(), table.len) };
    let mut arena = Arena::new(region);
    let carve = (|| -> Result<_> {
        let attrs = arena.one(WinAttrs {
            size: len as isize,
            disp_unit: unit as i32,
            flavor: flavor as i32,
            model: 2,
        })?;
        let peers = arena.slice(size as usize, |_| Peer::default())?;
        let all = arena.slice(2 * size as usize, |_| 0u64)?;
        Ok((attrs as *mut WinAttrs, peers, all))
    })();
    let (attrs, peers, all) = match carve {
        Ok(x) => x,
        Err(e) => {
            table.give_back(mem);
            return Err(e);
        }
    };
    let mine = [len as u64, unit as u64];
    let call = crate::coll::Call::Allgather {
        send: Some(crate::coll::Buf {
            ptr: mine.as_ptr() as *mut u8,
            count: 2,
            dt: Datatype::UINT64_T,
        }),
        recv: crate::coll::Buf {
            ptr: all.as_mut_ptr().cast(),
            count: 2,
            dt: Datatype::UINT64_T,
        },
    };
    // SAFETY: `mine` holds 2 and `all` 2 per member u64s, both live across the blocking call.
    let r = unsafe { crate::coll::collective(cx, comm, call, crate::coll::Mode::Blocking) };
    if let Err(e) = r {
        table.give_back(mem);
        return Err(e);
    }
    for (i, p) in peers.iter_mut().enumerate() {
        p.size = all[2 * i];
        p.unit = all[2 * i + 1];
    }
    let hidden = match crate::comm::create::dup(cx, comm) {
        Ok(h) => h,
        Err(e) => {
            table.give_back(mem);
            return Err(e);
        }
    };
    if let Ok(c) = cx.e().p2p.comms.get_mut(hidden) {
        c.hidden = true;
    }
    let mut regions = Vec::new();
    if flavor != Flavor::Dynamic && len > 0 {
        let _ = regions.push((base, len));
    }
    let w = Window {
        comm: hidden,
        rank,
        size,
        base,
        len,
        unit,
        flavor,
        errhandler: ErrHandler::Fatal,
        name: [0; 128],
        name_len: 0,
        info: None,
        owned,
        regions,
        table,
        attrs,
        peers: peers.as_mut_ptr(),
        pending: Vec::new(),
        replies: Vec::new(),
        incoming: None,
        data_in: None,
        cache: Vec::new(),
        next_tag: TAG_REPLY,
        shared: 0,
        exclusive: false,
        fence: false,
        lock_all: false,
        access: false,
        exposure: None,
        done: 0,
    };
    match cx.e().osc.insert(w) {
        Ok(id) => Ok(id),
        Err(e) => {
            table.give_back(mem);
            let _ = crate::comm::create::free(cx, hidden);
            Err(e)
        }
    }
}

/// Frees window `id` (`MPI_Win_free`, collective): waits for this process's operations and for
/// every process to arrive, then returns its memory. Gives back the user's info, if any.
pub fn free(cx: &mut Inside, id: WinId) -> Result<Option<crate::info::InfoId>> {
    {
        let w = cx.e().osc.get(id)?;
        if w.lock_all
            || w.access
            || w.exposure.is_some()
            || (0..w.size).any(|r| w.peer(r).locked != 0)
        {
            return Err(sync_err("MPI_Win_free with an epoch still open"));
        }
    }
    wait_settled(cx, id, None)?;
    let comm = cx.e().osc.get(id)?.comm;
    crate::coll::barrier(cx, comm)?;
    // Replies this target still sends must leave before their buffers go.
    cx.block(|e| {
        let Engine { osc, p2p, .. } = e;
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        w.reap(p2p, mem);
        Ok((w.replies.is_empty() && w.incoming.is_none() && w.data_in.is_none()).then_some(()))
    })?;
    let e = cx.e();
    let mem = e.osc.memory;
    let pool = e.osc.wins.as_mut().ok_or_else(no_win)?;
    let mut w = pool.remove(id).ok_or_else(no_win)?;
    e.osc.live -= 1;
    for g in w.cache.drain(..) {
        g.give_back(mem);
    }
    if let Some(g) = w.owned.take() {
        g.give_back(mem);
    }
    w.table.give_back(mem);
    crate::comm::create::free(cx, comm)?;
    Ok(w.info)
}

/// Attaches `len` bytes at `base` to dynamic window `id`.
pub fn attach(e: &mut Engine, id: WinId, base: usize, len: usize) -> Result<()> {
    let w = e.osc.get_mut(id)?;
    if w.flavor != Flavor::Dynamic {
        return Err(Error::new(
            ErrorClass::RmaFlavor,
            Reason::BadArgument {
                what: "memory is attached only to a dynamic window",
            },
        ));
    }
    if len == 0 {
        return Ok(());
    }
    w.regions.push((base, len)).map_err(|_| {
        Error::new(
            ErrorClass::RmaAttach,
            Reason::BadArgument {
                what: "more memory ranges attached to a window than stormpi keeps (64)",
            },
        )
    })
}

/// Detaches the range starting at `base` from dynamic window `id`.
pub fn detach(e: &mut Engine, id: WinId, base: usize) -> Result<()> {
    let w = e.osc.get_mut(id)?;
    if w.flavor != Flavor::Dynamic {
        return Err(Error::new(
            ErrorClass::RmaFlavor,
            Reason::BadArgument {
                what: "memory is detached only from a dynamic window",
            },
        ));
    }
    match w.regions.iter().position(|r| r.0 == base) {
        Some(i) => {
            w.regions.swap_remove(i);
            Ok(())
        }
        None => Err(Error::new(
            ErrorClass::RmaAttach,
            Reason::BadArgument {
                what: "no memory attached at that address",
            },
        )),
    }
}

// ---- operations -------------------------------------------------------------------------------

/// A buffer of the user's: `count` instances of `ty` at `addr`.
#[derive(Clone, Copy, Debug)]
pub struct Buffer {
    /// Address.
    pub addr: *mut u8,
    /// Instances.
    pub count: u64,
    /// Datatype.
    pub ty: Datatype,
}

/// Where an operation goes: `count` instances of `ty` at displacement `disp` of rank `rank`.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// Rank in the window's group (or `MPI_PROC_NULL`).
    pub rank: i32,
    /// Displacement, in the target's units.
    pub disp: i64,
    /// Instances.
    pub count: u64,
    /// Datatype.
    pub ty: Datatype,
}

/// An operation.
#[derive(Clone, Copy, Debug)]
pub enum RmaOp {
    /// `MPI_Put`.
    Put {
        /// What goes.
        origin: Buffer,
    },
    /// `MPI_Get`.
    Get {
        /// Where it comes to.
        origin: Buffer,
    },
    /// `MPI_Accumulate`.
    Acc {
        /// What is combined in.
        origin: Buffer,
        /// How.
        op: Op,
    },
    /// `MPI_Get_accumulate` (`MPI_Fetch_and_op` is one element of it).
    GetAcc {
        /// What is combined in (ignored for `MPI_NO_OP`).
        origin: Buffer,
        /// Where the old contents come to.
        result: Buffer,
        /// How.
        op: Op,
    },
    /// `MPI_Compare_and_swap` of one element of `result.ty`.
    Cas {
        /// The new value.
        origin: *const u8,
        /// The value compared with.
        compare: *const u8,
        /// Where the old value comes to.
        result: Buffer,
    },
}

/// The one predefined type a datatype is made of, as accumulates require.
fn element_type(types: &TypeTable, t: Datatype) -> Result<Datatype> {
    if t.is_predefined() {
        return Ok(t);
    }
    let mut found: Option<Datatype> = None;
    let mut stack: Vec<Datatype, 32> = Vec::new();
    let _ = stack.push(t);
    while let Some(x) = stack.pop() {
        if x.is_predefined() {
            if found.is_some_and(|f| f != x) {
                return Err(Error::new(
                    ErrorClass::Type,
                    Reason::BadArgument {
                        what: "an accumulate's datatypes must be built of one predefined type",
                    },
                ));
            }
            found = Some(x);
            continue;
        }
        for o in types.old_types(x)? {
            stack.push(o).map_err(|_| {
                Error::new(
                    ErrorClass::Type,
                    Reason::BadArgument {
                        what: "an accumulate's datatype is nested too deeply",
                    },
                )
            })?;
        }
    }
    found.ok_or(Error::new(ErrorClass::Type, Reason::InvalidDatatype))
}

fn range_err() -> Error {
    Error::new(
        ErrorClass::RmaRange,
        Reason::BadArgument {
            what: "the target memory lies outside the target's window",
        },
    )
}

/// Starts operation `op` on `target` of window `id`; `user` asks for a request the user will
/// complete (`MPI_Rput`, ...). Returns that request.
pub fn issue(
    cx: &mut Inside,
    id: WinId,
    op: RmaOp,
    target: Target,
    user: bool,
) -> Result<Option<ReqId>> {
    // Room for one more operation in flight.
    if cx.e().osc.get(id)?.pending.len() + 2 > MAX_PENDING {
        cx.block(|e| {
            let Engine { osc, p2p, .. } = e;
            let mem = osc.memory;
            let w = osc.get_mut(id)?;
            w.reap(p2p, mem);
            Ok((w.pending.len() + 2 <= MAX_PENDING).then_some(()))
        })?;
    }
    let e = cx.e();
    let Engine { osc, p2p, .. } = e;
    let mem = osc.memory;
    let w = osc.get_mut(id)?;
    if target.rank == crate::pml::request::PROC_NULL {
        return if user {
            p2p.pml
                .requests_mut()
                .completed(Status::PROC_NULL, 0)
                .map(Some)
        } else {
            Ok(None)
        };
    }
    if target.rank < 0 || target.rank as u32 >= w.size {
        return Err(Error::new(
            ErrorClass::Rank,
            Reason::RankOutOfRange {
                rank: target.rank,
                size: w.size,
            },
        ));
    }
    let t = target.rank as u32;
    if !w.may_access(t) {
        return Err(sync_err(
            "an RMA operation outside an access epoch to that target",
        ));
    }
    if user && !(w.lock_all || w.peer(t).locked != 0) {
        return Err(sync_err(
            "request-based RMA operations are allowed only in passive-target epochs",
        ));
    }
    let types = &p2p.types;
    let ti = *types.check_committed(target.ty)?;
    let tbytes = target
        .count
        .checked_mul(ti.size)
        .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
    // Range: what the target type touches must lie in the target's window.
    let peer = *w.peer(t);
    if w.flavor != Flavor::Dynamic && target.count > 0 && ti.size > 0 {
        let unit = peer.unit as i128;
        let lo = target.disp as i128 * unit + ti.true_lb as i128;
        let hi = target.disp as i128 * unit
            + (target.count as i128 - 1) * ti.extent as i128
            + ti.true_lb as i128
            + ti.true_extent as i128;
        if lo < 0 || hi > peer.size as i128 {
            return Err(range_err());
        }
    }
    // What goes with the message, and where a reply lands.
    let (kind_, origin, result, acc) = match op {
        RmaOp::Put { origin } => (kind::PUT, Some(origin), None, None),
        RmaOp::Get { origin } => (kind::GET, None, Some(origin), None),
        RmaOp::Acc { origin, op } => (kind::ACC, Some(origin), None, Some(op)),
        RmaOp::GetAcc { origin, result, op } => (
            kind::GET_ACC,
            (op != Op::NoOp).then_some(origin),
            Some(result),
            Some(op),
        ),
        RmaOp::Cas { result, .. } => (kind::CAS, None, Some(result), None),
    };
    let mut hdr = AmHdr::new(kind_);
    hdr.disp = target.disp;
    let mut image_ = false;
    if let Some(op) = acc {
        let dt = element_type(types, target.ty)?;
        if let Some(o) = origin {
            if element_type(types, o.ty)? != dt {
                return Err(Error::new(
                    ErrorClass::Type,
                    Reason::BadArgument {
                        what: "an accumulate's origin and target types differ in their element",
                    },
                ));
            }
        }
        if !matches!(op, Op::Replace | Op::NoOp) {
            if let Op::User(_) = op {
                return Err(Error::new(
                    ErrorClass::Op,
                    Reason::BadArgument {
                        what: "one-sided accumulates take predefined operations only",
                    },
                ));
            }
            crate::op::check(op, dt)?;
        }
        if matches!(dt.scalar(), Scalar::Pair { .. }) {
            // Pair types (MINLOC/MAXLOC) travel as memory images of the predefined type.
            let same = |b: Option<Buffer>| b.is_none_or(|b| b.ty == dt);
            if target.ty != dt || !same(origin) || !same(result) {
                return Err(Error::unsupported(
                    "one-sided accumulates of pair types other than the predefined pair itself",
                ));
            }
            image_ = true;
            hdr.flags |= wire::flags::IMAGE;
        }
        hdr.op = wire::op_code(op);
        hdr.basic = dt.code();
    }
    if let RmaOp::Cas { .. } = op {
        if !target.ty.is_predefined() || target.count != 1 {
            return Err(Error::new(ErrorClass::Type, Reason::InvalidDatatype));
        }
    }
    // The target's description.
    let mut one = [WireNode::bytes(0)];
    let nodes_src: Option<&[crate::datatype::desc::Node]>;
    if image_ {
        let n = target.count * dt_extent(target.ty) as u64;
        one[0] = WireNode::bytes(n);
        hdr.count = 1;
        hdr.extent = 0;
        hdr.len = n;
        nodes_src = None;
    } else if let (Some(at), true) = (ti.dense_at, ti.extent as u64 == ti.size) {
        one[0] = WireNode::bytes(tbytes);
        one[0].disp = at as i64;
        hdr.count = 1;
        hdr.extent = 0;
        hdr.len = tbytes;
        nodes_src = None;
    } else {
        let nodes = types.nodes(target.ty)?;
        if nodes.len() > MAX_NODES {
            return Err(Error::unsupported(
                "one-sided target datatypes of more than 4096 description nodes",
            ));
        }
        hdr.count = target.count;
        hdr.extent = ti.extent as i64;
        hdr.len = tbytes;
        nodes_src = Some(nodes);
    }
    let ndesc = nodes_src.map_or(1, |n| n.len());
    hdr.ndesc = ndesc as u32;
    // Sizes must agree: what the origin gives (or takes) and what the target holds.
    let stream = |b: &Buffer| -> Result<u64> {
        if image_ {
            return Ok(b.count * dt_extent(b.ty) as u64);
        }
        let i = types.check_committed(b.ty)?;
        b.count
            .checked_mul(i.size)
            .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))
    };
    let data_len = match op {
        RmaOp::Cas { .. } => 2 * hdr.len,
        _ => match origin {
            Some(o) => {
                let n = stream(&o)?;
                if n != hdr.len {
                    return Err(size_mismatch());
                }
                n
            }
            None => 0,
        },
    };
    if let Some(r) = result {
        if stream(&r)? < hdr.len {
            return Err(size_mismatch());
        }
    }
    if result.is_some() {
        hdr.reply_tag = w.tag();
    }
    let split = kind_ == kind::PUT && nodes_src.is_none() && !image_ && data_len >= PUT_SPLIT;
    if split {
        hdr.flags |= wire::flags::DATA_FOLLOWS;
        hdr.reply_tag = w.tag();
    }
    let head = HDR_LEN + ndesc * NODE_LEN;
    let total = head + if split { 0 } else { data_len as usize };
    let mut buf = w.buffer(mem, total)?;
    {
        // SAFETY: the grant was just taken or reused; nothing else refers to it.
        let bytes = unsafe { buf.bytes(total) };
        let (h, rest) = bytes.split_at_mut(HDR_LEN);
        // Nodes first, then the header (emitting both at once needs them in one slice).
        let (nbytes, data) = rest.split_at_mut(ndesc * NODE_LEN);
        match nodes_src {
            None => nbytes.copy_from_slice(zerocopy::IntoBytes::as_bytes(&one[..])),
            Some(nodes) => {
                for (k, n) in nodes.iter().enumerate() {
                    nbytes[k * NODE_LEN..(k + 1) * NODE_LEN]
                        .copy_from_slice(zerocopy::IntoBytes::as_bytes(&WireNode::of(n)));
                }
            }
        }
        h.copy_from_slice(zerocopy::IntoBytes::as_bytes(&hdr));
        let packed = if split {
            Ok(0)
        } else {
            match op {
                RmaOp::Cas {
                    origin,
                    compare,
                    result,
                } => {
                    let n = hdr.len as usize;
                    let _ = result;
                    // SAFETY: MPI requires `origin` and `compare` to hold one element of the type.
                    unsafe {
                        core::ptr::copy_nonoverlapping(origin, data.as_mut_ptr(), n);
                        core::ptr::copy_nonoverlapping(compare, data.as_mut_ptr().add(n), n);
                    }
                    Ok(2 * n)
                }
                _ => match origin {
                    Some(o) if image_ => {
                        // SAFETY: MPI requires the origin buffer to hold `count` instances.
                        unsafe {
                            core::ptr::copy_nonoverlapping(o.addr, data.as_mut_ptr(), data.len())
                        };
                        Ok(data.len())
                    }
                    // SAFETY: MPI requires the origin buffer to hold `count` instances of its type,
                    // unchanged during the call; the packer lives only here.
                    Some(o) => unsafe { Packer::new(o.addr, o.count, o.ty, types) }
                        .map(|mut p| p.pack(types, 0, data)),
                    None => Ok(0),
                },
            }
        };
        match packed {
            Ok(n) if n == data.len() => {}
            Ok(_) => {
                w.release(mem, buf);
                return Err(size_mismatch());
            }
            Err(e) => {
                w.release(mem, buf);
                return Err(e);
            }
        }
    }
    // The reply's receive goes up before the request leaves.
    let mut user_req = None;
    if let Some(r) = result {
        let tag = hdr.reply_tag;
        let conv = if image_ {
            // SAFETY: MPI lends the result buffer until the operation completes.
            unsafe { Unpacker::contiguous(r.addr, hdr.len as usize) }
        } else {
            // SAFETY: as above, for `count` instances of the result type.
            match unsafe { Unpacker::new(r.addr, r.count, r.ty, &p2p.types) } {
                Ok(c) => c,
                Err(e) => {
                    w.release(mem, buf);
                    return Err(e);
                }
            }
        };
        let s = p2p.sel(w.comm, Source::Rank(t), tag)?;
        let req = p2p.irecv(&s, conv, 0)?;
        w.track(Pending {
            req,
            target: t,
            buf: None,
            user,
        })?;
        if user {
            user_req = Some(req);
        }
    }
    if let Some(p) = w.peer_mut(t) {
        p.dirty = true;
    }
    let mut sent = w.send(
        p2p,
        mem,
        t,
        buf,
        total,
        user && user_req.is_none() && !split,
    )?;
    if let (true, Some(o)) = (split, origin) {
        // The data straight from the user's buffer, behind the header (same peer, same
        // communicator: it arrives after it).
        let d = p2p.dest(w.comm, t)?;
        // SAFETY: MPI lends the origin buffer, unchanged, until the put completes locally; the
        // request is tracked, and every completion call waits for it.
        let conv = unsafe { Packer::new(o.addr, o.count, o.ty, &p2p.types)? };
        sent = p2p.send(&d, hdr.reply_tag, conv, SendMode::Standard, 0)?;
        if let Some(req) = sent {
            w.track(Pending {
                req,
                target: t,
                buf: None,
                user,
            })?;
        }
    }
    if !user {
        return Ok(None);
    }
    match (user_req, sent) {
        (Some(r), _) => Ok(Some(r)),
        (None, Some(r)) => Ok(Some(r)),
        (None, None) => p2p
            .pml
            .requests_mut()
            .completed(Status::PROC_NULL, 0)
            .map(Some),
    }
}

fn dt_extent(t: Datatype) -> usize {
    t.extent()
}

fn size_mismatch() -> Error {
    Error::new(
        ErrorClass::Type,
        Reason::BadArgument {
            what: "the origin and target buffers hold different amounts of data",
        },
    )
}

// ---- synchronisation ------------------------------------------------------------------------

/// Waits until nothing of this origin's is in flight to `target` (to anyone for `None`).
fn wait_settled(cx: &mut Inside, id: WinId, target: Option<u32>) -> Result<()> {
    cx.block(|e| {
        let Engine { osc, p2p, .. } = e;
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        w.reap(p2p, mem);
        Ok(w.settled(target).then_some(()))
    })
}

/// Sends `FLUSH` (answered) to every target touched (or just `only`), then waits for the answers
/// and everything else in flight to them.
fn flush_targets(cx: &mut Inside, id: WinId, only: Option<u32>) -> Result<()> {
    {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        for r in 0..w.size {
            if only.is_some_and(|o| o != r) || !w.peer(r).dirty {
                continue;
            }
            w.control(p2p, mem, r, AmHdr::new(kind::FLUSH), true)?;
            if let Some(p) = w.peer_mut(r) {
                p.dirty = false;
            }
        }
    }
    wait_settled(cx, id, only)
}

fn check_assert(assert: i32) -> Result<()> {
    if assert & !MODES != 0 {
        return Err(Error::new(
            ErrorClass::Assert,
            Reason::BadArgument {
                what: "an assertion that is not a combination of MPI_MODE_* values",
            },
        ));
    }
    Ok(())
}

/// `MPI_Win_fence`.
pub fn fence(cx: &mut Inside, id: WinId, assert: i32) -> Result<()> {
    check_assert(assert)?;
    {
        let w = cx.e().osc.get(id)?;
        if w.lock_all
            || w.access
            || w.exposure.is_some()
            || (0..w.size).any(|r| w.peer(r).locked != 0)
        {
            return Err(sync_err("MPI_Win_fence inside another kind of epoch"));
        }
    }
    flush_targets(cx, id, None)?;
    let comm = cx.e().osc.get(id)?.comm;
    crate::coll::barrier(cx, comm)?;
    cx.e().osc.get_mut(id)?.fence = assert & MODE_NOSUCCEED == 0;
    Ok(())
}

/// `MPI_Win_lock`.
pub fn lock(cx: &mut Inside, id: WinId, kind_: LockKind, rank: i32, assert: i32) -> Result<()> {
    check_assert(assert)?;
    let t = {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if rank == crate::pml::request::PROC_NULL {
            return Ok(());
        }
        if rank < 0 || rank as u32 >= w.size {
            return Err(Error::new(
                ErrorClass::Rank,
                Reason::RankOutOfRange { rank, size: w.size },
            ));
        }
        let t = rank as u32;
        if w.peer(t).locked != 0 || w.lock_all {
            return Err(sync_err("MPI_Win_lock of a target already locked"));
        }
        let nocheck = assert & MODE_NOCHECK != 0;
        if !nocheck {
            let mut h = AmHdr::new(kind::LOCK);
            h.lock = match kind_ {
                LockKind::Shared => wire::lock::SHARED,
                LockKind::Exclusive => wire::lock::EXCLUSIVE,
            };
            w.control(p2p, mem, t, h, true)?;
        }
        if let Some(p) = w.peer_mut(t) {
            p.locked = if kind_ == LockKind::Shared { 1 } else { 2 };
            p.nocheck = nocheck;
        }
        t
    };
    wait_settled(cx, id, Some(t))
}

/// `MPI_Win_unlock`.
pub fn unlock(cx: &mut Inside, id: WinId, rank: i32) -> Result<()> {
    if rank == crate::pml::request::PROC_NULL {
        return Ok(());
    }
    let t = {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if rank < 0 || rank as u32 >= w.size || w.peer(rank as u32).locked == 0 {
            return Err(sync_err("MPI_Win_unlock of a target not locked"));
        }
        let t = rank as u32;
        let kind_ = if w.peer(t).nocheck {
            kind::FLUSH
        } else {
            kind::UNLOCK
        };
        w.control(p2p, mem, t, AmHdr::new(kind_), true)?;
        if let Some(p) = w.peer_mut(t) {
            p.locked = 0;
            p.dirty = false;
        }
        t
    };
    wait_settled(cx, id, Some(t))
}

/// `MPI_Win_lock_all`: a shared lock at every target.
pub fn lock_all(cx: &mut Inside, id: WinId, assert: i32) -> Result<()> {
    check_assert(assert)?;
    {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if w.lock_all || (0..w.size).any(|r| w.peer(r).locked != 0) {
            return Err(sync_err("MPI_Win_lock_all with a lock already held"));
        }
        let nocheck = assert & MODE_NOCHECK != 0;
        for r in 0..w.size {
            if !nocheck {
                let mut h = AmHdr::new(kind::LOCK);
                h.lock = wire::lock::SHARED;
                w.control(p2p, mem, r, h, true)?;
            }
            if let Some(p) = w.peer_mut(r) {
                p.nocheck = nocheck;
            }
        }
        w.lock_all = true;
    }
    wait_settled(cx, id, None)
}

/// `MPI_Win_unlock_all`.
pub fn unlock_all(cx: &mut Inside, id: WinId) -> Result<()> {
    {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if !w.lock_all {
            return Err(sync_err("MPI_Win_unlock_all without MPI_Win_lock_all"));
        }
        for r in 0..w.size {
            let kind_ = if w.peer(r).nocheck {
                kind::FLUSH
            } else {
                kind::UNLOCK
            };
            w.control(p2p, mem, r, AmHdr::new(kind_), true)?;
            if let Some(p) = w.peer_mut(r) {
                p.dirty = false;
                p.nocheck = false;
            }
        }
        w.lock_all = false;
    }
    wait_settled(cx, id, None)
}

/// `MPI_Win_flush` (`Some(rank)`) and `MPI_Win_flush_all` (`None`): remote completion.
pub fn flush(cx: &mut Inside, id: WinId, rank: Option<i32>) -> Result<()> {
    let only = passive_target(cx.e(), id, rank)?;
    if only == Some(u32::MAX) {
        return Ok(());
    }
    flush_targets(cx, id, only)
}

/// `MPI_Win_flush_local` and `MPI_Win_flush_local_all`: local completion (the origin buffers
/// may be reused; a get's data is there).
pub fn flush_local(cx: &mut Inside, id: WinId, rank: Option<i32>) -> Result<()> {
    let only = passive_target(cx.e(), id, rank)?;
    if only == Some(u32::MAX) {
        return Ok(());
    }
    wait_settled(cx, id, only)
}

/// Checks a flush's target: `Some(u32::MAX)` for `MPI_PROC_NULL`.
fn passive_target(e: &mut Engine, id: WinId, rank: Option<i32>) -> Result<Option<u32>> {
    let w = e.osc.get(id)?;
    match rank {
        None => {
            if !w.lock_all && !(0..w.size).any(|r| w.peer(r).locked != 0) {
                return Err(sync_err("a flush outside a passive-target epoch"));
            }
            Ok(None)
        }
        Some(crate::pml::request::PROC_NULL) => Ok(Some(u32::MAX)),
        Some(r) if r < 0 || r as u32 >= w.size => Err(Error::new(
            ErrorClass::Rank,
            Reason::RankOutOfRange {
                rank: r,
                size: w.size,
            },
        )),
        Some(r) => {
            if !w.lock_all && w.peer(r as u32).locked == 0 {
                return Err(sync_err("a flush of a target not locked"));
            }
            Ok(Some(r as u32))
        }
    }
}

/// `MPI_Win_post`: exposes the window to the `origins` (ranks in the window's group).
pub fn post(cx: &mut Inside, id: WinId, origins: &[u32], assert: i32) -> Result<()> {
    check_assert(assert)?;
    let Engine { osc, p2p, .. } = cx.e();
    let w = osc.get_mut(id)?;
    if w.exposure.is_some() {
        return Err(sync_err("MPI_Win_post while already exposed"));
    }
    w.exposure = Some(origins.len() as u32);
    w.done = 0;
    if assert & MODE_NOCHECK != 0 {
        // The matching starts say MPI_MODE_NOCHECK too and wait for no notice.
        return Ok(());
    }
    let comm = w.comm;
    for &r in origins {
        let d = p2p.dest(comm, r)?;
        let empty = Packer::from_slice(&[]);
        if let Some(req) = p2p.send(&d, TAG_POST, empty, SendMode::Standard, 0)? {
            w.track(Pending {
                req,
                target: r,
                buf: None,
                user: false,
            })?;
        }
    }
    Ok(())
}

/// `MPI_Win_start`: opens an access epoch to the `targets`, once each has posted.
pub fn start(cx: &mut Inside, id: WinId, targets: &[u32], assert: i32) -> Result<()> {
    check_assert(assert)?;
    {
        let w = cx.e().osc.get(id)?;
        if w.access || w.lock_all {
            return Err(sync_err("MPI_Win_start inside another access epoch"));
        }
    }
    let nocheck = assert & MODE_NOCHECK != 0;
    {
        let Engine { osc, p2p, .. } = cx.e();
        let w = osc.get_mut(id)?;
        let comm = w.comm;
        for &r in targets {
            if r >= w.size {
                return Err(Error::new(
                    ErrorClass::Group,
                    Reason::BadArgument {
                        what: "a start group member outside the window's group",
                    },
                ));
            }
            if !nocheck {
                let s = p2p.sel(comm, Source::Rank(r), TAG_POST)?;
                let req = p2p.irecv(&s, Unpacker::empty(), 0)?;
                w.track(Pending {
                    req,
                    target: r,
                    buf: None,
                    user: false,
                })?;
            }
            if let Some(p) = w.peer_mut(r) {
                p.started = true;
            }
        }
        w.access = true;
    }
    wait_settled(cx, id, None)
}

/// `MPI_Win_complete`: ends the access epoch of `MPI_Win_start`.
pub fn complete(cx: &mut Inside, id: WinId) -> Result<()> {
    {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if !w.access {
            return Err(sync_err("MPI_Win_complete without MPI_Win_start"));
        }
        for r in 0..w.size {
            if !w.peer(r).started {
                continue;
            }
            w.control(p2p, mem, r, AmHdr::new(kind::DONE), false)?;
            if let Some(p) = w.peer_mut(r) {
                p.started = false;
                p.dirty = false;
            }
        }
        w.access = false;
    }
    wait_settled(cx, id, None)
}

/// `MPI_Win_wait` (`block`) and `MPI_Win_test`: whether every origin of the exposure epoch
/// completed; ends the epoch when so.
pub fn wait(cx: &mut Inside, id: WinId, block: bool) -> Result<bool> {
    let n = cx.e().osc.get(id)?.exposure.ok_or(sync_err(
        "MPI_Win_wait or MPI_Win_test without MPI_Win_post",
    ))?;
    let finished = |e: &mut Engine| -> Result<bool> { Ok(e.osc.get(id)?.done >= n) };
    let done = if block {
        cx.block(|e| Ok(finished(e)?.then_some(())))?;
        true
    } else {
        if !finished(cx.e())? {
            cx.e().progress();
        }
        finished(cx.e())?
    };
    if done {
        let w = cx.e().osc.get_mut(id)?;
        w.exposure = None;
        w.done -= n;
    }
    Ok(done)
}

/// `MPI_Win_sync`: the memory of the window and this process's view of it agree (one copy in
/// the unified model: a full memory barrier).
pub fn sync(e: &mut Engine, id: WinId) -> Result<()> {
    e.osc.get(id)?;
    core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    Ok(())
}
