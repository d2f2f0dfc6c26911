//! Shared-memory collectives: Barrier, and the small forms of Bcast, Gather, Scatter, Allgather,
//! Alltoall, Reduce, Allreduce and Reduce_scatter_block, on a communicator whose members all
//! share this node, through flags and buffers in node-shared memory instead of messages.
//!
//! Every process has an *area* of node-shared memory (the `sm` BTL puts it in the process's
//! segment, [`crate::btl::Btl::coll_area`]) that only it writes and its node's other processes
//! read: one *cell* per context id below `coll_sm_contexts`. A communicator's cell in each
//! member's area is the one of its context id (a context id names one communicator at every
//! member, so the cells of communicators alive at once never meet):
//!
//! ```text
//! 0              epoch: u64 (an AtomicU64), alone on its cache line
//! 64             SLOTS slots of SLOT_BYTES
//! ```
//!
//! The epoch counts the member's shared-memory collectives on the communicator, from a *base*
//! (its value when the communicator first used the cells: it is never reset, see below). The
//! `k`-th call at a member stores `base + k` with Release when the member has done its part; the
//! others wait, with Acquire, for the epochs they need:
//!
//! - **Barrier**: store, then wait for every member's `k`.
//! - **Bcast**, **Scatter**: the root packs (all blocks) into its slot `(base + k) mod SLOTS`
//!   and stores, then returns; the others wait for the root's `k`, unpack (their block) from
//!   that slot, then store their own.
//! - **Gather**, **Reduce**: the others pack their input into their slot and store, then
//!   return; the root stores, waits for every member's `k` and reads (combines) their slots.
//! - **Allgather**, **Alltoall** (a block per member in the slot), **Allreduce**,
//!   **Reduce_scatter_block**: pack the input into one's slot, store, wait for every member's
//!   `k`, then read (combine) every member's slot.
//!
//! Reductions combine the members' inputs in rank order from member 0, so every member computes
//! the same bits. A member writes a slot again [`SLOTS`] calls later. Before it writes at call
//! `k` it waits until every member has reached `k - SLOTS + 1` (usually long since true): a
//! member stores that epoch only after it has read everything of call `k - SLOTS`, so nothing
//! still reads the slot. A root that only writes (broadcast, scatter) or members that only
//! write (gather, reduce) thus run up to `SLOTS - 1` calls ahead of the slowest reader, as eager
//! messages would let them.
//!
//! **Choice.** All members decide alike from the call's arguments, the communicator and the
//! parameters: `coll_sm` `on`, or `auto` and no `coll_<name>_algorithm` forcing an algorithm;
//! a blocking call of an intracommunicator whose members are all on this node (at most
//! [`MAX_MEMBERS`]); a context id below `coll_sm_contexts`; what one member puts in its slot at
//! most [`SLOT_BYTES`] packed bytes (a Bcast's buffer; a Gather's or Allgather's block; all
//! blocks of a Scatter or Alltoall; a reduction's input, of a predefined operation on a
//! contiguous predefined type). The first
//! such call on a communicator *binds* it: every member learns whether it can map every other
//! member's area, and an allgather over point-to-point agrees on the answer and exchanges the
//! bases. A communicator that cannot (a member on another architecture, a peer's memory
//! refused, ...) keeps the point-to-point algorithms for good.
//!
//! **Reuse.** When a bound communicator is freed, each member stores one more epoch, meaning "I
//! am done with these cells", and remembers the others' final epochs. The next communicator to
//! get that context id binds only if every member of the old one has stored that last epoch
//! (looked at, never waited for: a member of the old one may never free it); otherwise it stays
//! on point-to-point. So a cell is never written while a member of its last communicator may
//! still be reading it.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use super::exec::Red;
use super::Colls;
use super::{
    parse, small_reduction, AllgatherAlg, AllreduceAlg, AlltoallAlg, BarrierAlg, BcastAlg, Buf,
    Call, GatherAlg, Grp, LayerMode, ReduceAlg, ReduceScatterAlg, ScatterAlg,
};
use crate::arena::{Arena, Sizer};
use crate::btl::AreaState;
use crate::comm::CommId;
use crate::datatype::Datatype;
use crate::error::{Error, Result};
use crate::op::Op;
use crate::params::{Default, Kind, ParamDef, Params};
use crate::platform::Level;
use crate::shared::Inside;

/// Bytes of each of a cell's slots: the most one member's part of a call may take.
pub const SLOT_BYTES: usize = 1024;
/// Slots of a cell, used in turn.
pub const SLOTS: u64 = 8;
/// The epoch's cache line.
const LINE: usize = 64;
/// Bytes of one cell.
pub const CELL_BYTES: usize = LINE + SLOTS as usize * SLOT_BYTES;
/// Most members of a communicator served.
pub const MAX_MEMBERS: usize = 16;

/// `coll_sm`.
pub static SM: ParamDef = ParamDef {
    name: "coll_sm",
    kind: Kind::Str,
    default: Default::Str("auto"),
    description: "Barrier and small Bcast and Allreduce through node-shared memory on \
                  communicators within one node: auto (unless coll_<name>_algorithm forces an \
                  algorithm), on, off",
};

/// `coll_sm_contexts`.
pub static CONTEXTS: ParamDef = ParamDef {
    name: "coll_sm_contexts",
    kind: Kind::Int { min: 1, max: 4096 },
    default: Default::Int(64),
    description: "Context ids (lowest first) whose communicators may use node-shared memory \
                  collectives; each takes a cell of about 8 KiB in every process's segment (fixed at init: the cells live in shared memory the other processes map)",
};

/// Bytes of the area every process offers: one cell per context id served, none when `coll_sm`
/// is `off`.
pub fn area_bytes(params: &Params) -> usize {
    match LayerMode::parse(params.str(&SM)) {
        Some(LayerMode::Off) => 0,
        _ => params.usize(&CONTEXTS) * CELL_BYTES,
    }
}

/// A member's cell of one communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cell(NonNull<u8>);

impl Cell {
    fn epoch(&self) -> &AtomicU64 {
        // SAFETY: a cell starts 64-byte aligned inside an area that stays mapped for the
        // engine's life ([`crate::btl::Area`]); its first 8 bytes are only ever accessed as this
        // atomic, by every process of the node.
        unsafe { self.0.cast::<AtomicU64>().as_ref() }
    }

    /// The slot of epoch `e`.
    fn slot(&self, e: u64) -> *mut u8 {
        self.0
            .as_ptr()
            .wrapping_add(LINE + (e % SLOTS) as usize * SLOT_BYTES)
    }
}

/// The members' cells of a bound communicator and where their epochs stand.
#[derive(Clone, Copy, Debug)]
struct Members {
    n: u32,
    /// Each member's cell; those past `n` repeat member 0's (never read).
    cells: [Cell; MAX_MEMBERS],
    /// Each member's epoch when the communicator bound.
    base: [u64; MAX_MEMBERS],
    /// Shared-memory collectives run on the communicator so far.
    calls: u64,
    /// A call every member is known to have passed (so that a root need not look at the others'
    /// epochs, lines they write, before every write of its slot).
    floor: u64,
}

impl Members {
    fn cell(&self, r: u32) -> Cell {
        self.cells[r as usize]
    }

    fn reached(&self, r: u32, k: u64) -> bool {
        self.cell(r).epoch().load(Ordering::Acquire) >= self.base[r as usize] + k
    }

    /// The last call every member has passed, as their epochs say now.
    fn passed(&self) -> u64 {
        (0..self.n)
            .map(|r| {
                let e = self.cell(r).epoch().load(Ordering::Acquire);
                e.saturating_sub(self.base[r as usize])
            })
            .min()
            .unwrap_or(0)
    }
}

/// What a context id's cells serve now.
// Entries of a fixed table carved at init: there is no heap to box the large variant into.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Copy, Debug)]
enum Binding {
    /// No communicator has asked since the last one was freed.
    Free,
    /// `comm` stays on point-to-point.
    Off(CommId),
    /// `comm` runs its collectives here.
    On(CommId, Members),
}

/// The shared-memory collectives' state: per context id served, the binding and the final
/// epochs of the communicator that had it before.
pub(crate) struct SmState {
    mode: LayerMode,
    bind: &'static mut [Binding],
    /// The last bound communicator's members and the epochs each stores when it frees it
    /// (`base` holds those targets).
    retired: &'static mut [Option<Members>],
}

impl SmState {
    fn contexts(params: &Params) -> usize {
        match LayerMode::parse(params.str(&SM)) {
            Some(LayerMode::Off) => 0,
            _ => params.usize(&CONTEXTS),
        }
    }

    /// Arena bytes of the state.
    pub(crate) fn size(params: &Params, sizer: &mut Sizer) {
        let n = SmState::contexts(params);
        sizer.slice::<Binding>(n).slice::<Option<Members>>(n);
    }

    /// The state, carved from `arena`.
    pub(crate) fn new(params: &Params, arena: &mut Arena) -> Result<SmState> {
        let mode = parse(params, &SM, LayerMode::parse)?;
        let n = SmState::contexts(params);
        Ok(SmState {
            mode,
            bind: arena.slice(n, |_| Binding::Free)?,
            retired: arena.slice(n, |_| None)?,
        })
    }
}

/// One call's place in the protocol: the communicator's members, the call's number `k`, this
/// member and the member count.
struct Step<'m> {
    m: &'m Members,
    k: u64,
    me: u32,
    n: u32,
    /// The members' floor, raised as their epochs are read.
    floor: core::cell::Cell<u64>,
}

impl Step<'_> {
    /// Stores our epoch of this call: our part is done.
    fn arrive(&self) {
        let me = self.me as usize;
        self.m
            .cell(self.me)
            .epoch()
            .store(self.m.base[me] + self.k, Ordering::Release);
    }

    /// Whether every member has passed call `k` (reading their epochs only when the floor does
    /// not already say so).
    fn all_passed(&self, k: u64) -> bool {
        if self.floor.get() < k {
            self.floor.set(self.floor.get().max(self.m.passed()));
        }
        self.floor.get() >= k
    }

    /// Whether everyone is done with what our slot of this call last held.
    fn slots_free(&self) -> bool {
        self.all_passed(self.k.saturating_sub(SLOTS - 1))
    }

    /// Byte `i * bb` of our slot of this call.
    fn out(&self, i: u32, bb: usize) -> *mut u8 {
        let e = self.m.base[self.me as usize] + self.k;
        self.m.cell(self.me).slot(e).wrapping_add(i as usize * bb)
    }

    /// Byte `i * bb` of member `r`'s slot of this call.
    fn input(&self, r: u32, i: u32, bb: usize) -> *const u8 {
        let e = self.m.base[r as usize] + self.k;
        self.m
            .cell(r)
            .slot(e)
            .wrapping_add(i as usize * bb)
            .cast_const()
    }
}

/// Rank `r`'s block of `b` (blocks of `b.count` instances, `ext` bytes apart each).
fn block(b: Buf, r: u32, ext: isize) -> Buf {
    Buf {
        ptr: b.ptr.wrapping_offset(r as isize * b.count as isize * ext),
        ..b
    }
}

/// Epoch stored by a member that frees a bound communicator after `calls` calls.
fn final_call(calls: u64) -> u64 {
    calls + 1
}

/// Runs blocking `call` on intracommunicator `comm` (`g`) in shared memory if it should (see
/// the module doc); false (nothing done) when the point-to-point layer is to run it — also
/// for every call whose arguments are wrong, so that it reports the error as it always does.
///
/// # Safety
/// As for [`super::collective`].
pub(super) unsafe fn blocking(cx: &mut Inside, comm: CommId, g: Grp, call: &Call) -> Result<bool> {
    let colls = cx.e().colls();
    if colls.coll.sm.mode == LayerMode::Off || g.size < 2 || g.size as usize > MAX_MEMBERS {
        return Ok(false);
    }
    let Some(call) = colls.sm_eligible(g, call) else {
        return Ok(false);
    };
    let Some(cid) = members(cx, comm)? else {
        return Ok(false);
    };
    let Some(Binding::On(_, m)) = cx.e().coll.sm.bind.get(cid) else {
        return Ok(false);
    };
    // One copy, which the steps read: they need the engine too.
    let m = *m;
    let k = m.calls + 1;
    let s = Step {
        m: &m,
        k,
        me: g.rank,
        n: g.size,
        floor: core::cell::Cell::new(m.floor),
    };
    // SAFETY: the caller's contract covers the call's buffers; the steps keep to the slots'
    // protocol (module doc).
    unsafe { run(cx, &s, call)? };
    if let Binding::On(_, b) = &mut cx.e().coll.sm.bind[cid] {
        b.calls = k;
        b.floor = s.floor.get();
    }
    Ok(true)
}

/// A call [`Colls::sm_eligible`] admitted, as its steps take it (at this member).
#[derive(Clone, Copy, Debug)]
enum SmCall {
    Barrier,
    Bcast {
        buf: Buf,
        root: u32,
    },
    /// A gather, at a member other than the root.
    GatherFrom {
        send: Buf,
    },
    /// A gather, at the root (`send` is `None` for MPI_IN_PLACE).
    GatherAt {
        send: Option<Buf>,
        recv: Buf,
    },
    /// A scatter, at the root (`recv` is `None` for MPI_IN_PLACE).
    ScatterFrom {
        send: Buf,
        recv: Option<Buf>,
    },
    /// A scatter, at a member other than the root.
    ScatterTo {
        recv: Buf,
        root: u32,
    },
    Allgather {
        send: Option<Buf>,
        recv: Buf,
    },
    Alltoall {
        send: Option<Buf>,
        recv: Buf,
    },
    Allreduce {
        send: Option<*const u8>,
        recv: *mut u8,
        count: u64,
        red: Red,
    },
    Reduce {
        send: Option<*const u8>,
        recv: *mut u8,
        count: u64,
        red: Red,
        root: u32,
    },
    ReduceScatterBlock {
        send: Option<*const u8>,
        recv: *mut u8,
        count: u64,
        red: Red,
    },
}

/// The steps of `call` (on a bound communicator).
///
/// # Safety
/// As for [`super::collective`].
unsafe fn run(cx: &mut Inside, s: &Step, call: SmCall) -> Result<()> {
    let (m, k, me, n) = (s.m, s.k, s.me, s.n);
    match call {
        SmCall::Barrier => {
            s.arrive();
            wait(cx, || s.all_passed(k));
        }
        SmCall::Bcast { buf, root } => {
            if me == root {
                wait(cx, || s.slots_free());
                // SAFETY: the caller's buffer (MPI's rules); our free slot.
                unsafe { cx.e().colls().sm_pack(buf, s.out(0, 0))? };
                s.arrive();
            } else {
                wait(cx, || m.reached(root, k));
                // SAFETY: the root's slot of this call, filled before its epoch was stored.
                unsafe { cx.e().colls().sm_unpack(s.input(root, 0, 0), buf)? };
                s.arrive();
            }
        }
        SmCall::GatherFrom { send } => {
            wait(cx, || s.slots_free());
            // SAFETY: as for Bcast.
            unsafe { cx.e().colls().sm_pack(send, s.out(0, 0))? };
            s.arrive();
        }
        SmCall::GatherAt { send, recv } => {
            let ext = super::extent(&cx.e().p2p.types, recv.dt)?;
            if let Some(send) = send {
                let (from, to) = (send.span(), block(recv, me, ext).span());
                let len = cx.e().colls().packed_bytes(send) as u64;
                // SAFETY: the caller's buffers (MPI's rules: same signature, apart).
                unsafe { super::exec::copy_stream(&cx.e().p2p.types, to, 0, from, 0, len)? };
            }
            // Arrive first: the wait below counts us too.
            s.arrive();
            wait(cx, || s.all_passed(k));
            for r in (0..n).filter(|&r| r != me) {
                // SAFETY: member r's slot of this call, filled before its epoch.
                unsafe {
                    cx.e()
                        .colls()
                        .sm_unpack(s.input(r, 0, 0), block(recv, r, ext))?
                };
            }
        }
        SmCall::ScatterFrom { send, recv } => {
            let ext = super::extent(&cx.e().p2p.types, send.dt)?;
            let bb = cx.e().colls().packed_bytes(block(send, 0, ext));
            wait(cx, || s.slots_free());
            for r in 0..n {
                // SAFETY: the caller's buffer; our free slot (n blocks fit: eligible).
                unsafe { cx.e().colls().sm_pack(block(send, r, ext), s.out(r, bb))? };
            }
            if let Some(recv) = recv {
                // SAFETY: our own block, just written.
                unsafe { cx.e().colls().sm_unpack(s.input(me, me, bb), recv)? };
            }
            s.arrive();
        }
        SmCall::ScatterTo { recv, root } => {
            let bb = cx.e().colls().packed_bytes(recv);
            wait(cx, || m.reached(root, k));
            // SAFETY: the root's slot of this call.
            unsafe { cx.e().colls().sm_unpack(s.input(root, me, bb), recv)? };
            s.arrive();
        }
        SmCall::Allgather { send, recv } => {
            let ext = super::extent(&cx.e().p2p.types, recv.dt)?;
            let mine = send.unwrap_or(block(recv, me, ext));
            wait(cx, || s.slots_free());
            // SAFETY: the caller's buffer; our free slot.
            unsafe { cx.e().colls().sm_pack(mine, s.out(0, 0))? };
            s.arrive();
            wait(cx, || s.all_passed(k));
            for r in 0..n {
                // SAFETY: member r's slot of this call.
                unsafe {
                    cx.e()
                        .colls()
                        .sm_unpack(s.input(r, 0, 0), block(recv, r, ext))?
                };
            }
        }
        SmCall::Alltoall { send, recv } => {
            let rext = super::extent(&cx.e().p2p.types, recv.dt)?;
            let bb = cx.e().colls().packed_bytes(block(recv, 0, rext));
            let (src, sext) = match send {
                Some(b) => (b, super::extent(&cx.e().p2p.types, b.dt)?),
                None => (recv, rext),
            };
            wait(cx, || s.slots_free());
            for r in 0..n {
                // SAFETY: the caller's buffer; our free slot (n blocks fit: eligible).
                unsafe { cx.e().colls().sm_pack(block(src, r, sext), s.out(r, bb))? };
            }
            s.arrive();
            wait(cx, || s.all_passed(k));
            for r in 0..n {
                // SAFETY: member r's slot of this call.
                unsafe {
                    cx.e()
                        .colls()
                        .sm_unpack(s.input(r, me, bb), block(recv, r, rext))?
                };
            }
        }
        SmCall::Allreduce {
            send,
            recv,
            count,
            red,
        } => {
            // SAFETY: the caller's buffers (`count` elements each).
            unsafe { contribute(cx, s, send, recv, count, red.w)? };
            wait(cx, || s.all_passed(k));
            // SAFETY: every member's slot of this call; `recv` takes `count` elements.
            unsafe { sm_combine(s, recv, count, &red, 0) }?;
        }
        SmCall::Reduce {
            send,
            recv,
            count,
            red,
            root,
        } => {
            // SAFETY: the caller's buffers; the input is `count` elements (in `recv` at
            // the root for MPI_IN_PLACE).
            unsafe { contribute(cx, s, send, recv, count, red.w)? };
            if me == root {
                wait(cx, || s.all_passed(k));
                // SAFETY: as for Allreduce.
                unsafe { sm_combine(s, recv, count, &red, 0) }?;
            }
        }
        SmCall::ReduceScatterBlock {
            send,
            recv,
            count,
            red,
        } => {
            // SAFETY: the caller's buffers: `n * count` elements of input.
            unsafe { contribute(cx, s, send, recv, n as u64 * count, red.w)? };
            wait(cx, || s.all_passed(k));
            // SAFETY: every member's slot of this call; our block of it into `recv`.
            unsafe { sm_combine(s, recv, count, &red, me as u64 * count) }?;
        }
    }
    Ok(())
}

/// `out = slot_0 op slot_1 op ...` over `count` elements from element `at` of every member's
/// slot of this call, in rank order, so that every member computes the same bits.
///
/// # Safety
/// Every member has arrived; `out` takes `count` elements and is no member's slot.
unsafe fn sm_combine(s: &Step, out: *mut u8, count: u64, red: &Red, at: u64) -> Result<()> {
    let size = red.size as usize;
    let (bytes, off) = (count as usize * size, at as usize * size);
    // SAFETY: each member filled this call's slot before storing the epoch we saw and leaves it
    // alone until we have stored a later one (module doc); the caller's contract.
    unsafe {
        core::ptr::copy_nonoverlapping(s.input(0, 0, 0).add(off), out, bytes);
        for r in 1..s.n {
            red.apply(out, s.input(r, 0, 0).add(off), count)?;
        }
    }
    Ok(())
}

/// Waits until our slot of this call is free, writes a reduction's input (`send`, or
/// `recv` for MPI_IN_PLACE: `elems` elements of `dt`) into it, and arrives.
///
/// # Safety
/// The input holds `elems` elements of `dt` (a contiguous predefined type, eligible: they
/// fit a slot).
unsafe fn contribute(
    cx: &mut Inside,
    s: &Step,
    send: Option<*const u8>,
    recv: *mut u8,
    elems: u64,
    dt: Datatype,
) -> Result<()> {
    wait(cx, || s.slots_free());
    let input = send.unwrap_or(recv.cast_const());
    let bytes = elems as usize * dt.size();
    // SAFETY: the caller's contract; our slot is free (above) and holds `bytes`.
    unsafe { core::ptr::copy_nonoverlapping(input, s.out(0, 0), bytes) };
    s.arrive();
    Ok(())
}

/// Waits until `done`, progressing the rest of the engine meanwhile.
fn wait(cx: &mut Inside, mut done: impl FnMut() -> bool) {
    // A fresh wait: spin before yielding, whatever the last wait did.
    cx.e().idle = 0;
    while !done() {
        cx.round();
    }
}

/// The index of `comm`'s context id, whose binding holds the members' cells, binding it at its
/// first call here; `None` when it stays on point-to-point.
fn members(cx: &mut Inside, comm: CommId) -> Result<Option<usize>> {
    let e = cx.e();
    let cid = e.check_comm(comm)?.cid.0 as usize;
    match e.coll.sm.bind.get(cid) {
        None => return Ok(None),
        Some(Binding::On(c, _)) if *c == comm => return Ok(Some(cid)),
        Some(Binding::Off(c)) if *c == comm => return Ok(None),
        Some(_) => {}
    }
    // Off while binding: the agreement's own allgather runs on point-to-point.
    e.coll.sm.bind[cid] = Binding::Off(comm);
    let m = bind(cx, comm, cid)?;
    let e = cx.e();
    crate::log!(
        e.platform,
        Level::Info,
        "coll sm: communicator {} (context id {cid}) {}",
        comm.0,
        if m.is_some() {
            "runs its small collectives in shared memory"
        } else {
            "stays on point-to-point"
        }
    );
    e.coll.sm.bind[cid] = match m {
        Some(m) => {
            e.coll.sm.retired[cid] = None;
            Binding::On(comm, m)
        }
        None => Binding::Off(comm),
    };
    Ok(m.map(|_| cid))
}

/// Binds `comm` (context id index `cid`): maps every member's cell, then agrees with the
/// others over point-to-point whether all could and exchanges the bases.
fn bind(cx: &mut Inside, comm: CommId, cid: usize) -> Result<Option<Members>> {
    let e = cx.e();
    let c = e.check_comm(comm)?;
    let (group, n, me) = (c.group, c.size(), c.rank);
    let my_node = e.p2p.procs[e.p2p.me.0 as usize].node;
    let mut found: [Option<Cell>; MAX_MEMBERS] = [None; MAX_MEMBERS];
    // Everyone on this node: computed alike at every member (the node layout is global).
    let local = (0..n).all(|r| {
        let p = e.p2p.comms.groups.proc_of(group, r);
        e.p2p.procs[p.0 as usize].node == my_node
    });
    if !local {
        return Ok(None);
    }
    let mut ok = true;
    for r in 0..n {
        let area = loop {
            let e = cx.e();
            let p = e.p2p.comms.groups.proc_of(group, r);
            match e.p2p.bml.coll_area(p, e.p2p.me) {
                AreaState::Pending => {
                    cx.round();
                }
                AreaState::Mapped(a) => break Some(a),
                AreaState::Absent => break None,
            }
        };
        found[r as usize] = area
            .filter(|a| a.len >= (cid + 1) * CELL_BYTES)
            .and_then(|a| NonNull::new(a.base.as_ptr().wrapping_add(cid * CELL_BYTES)))
            .map(Cell);
        ok &= found[r as usize].is_some();
    }
    // The last communicator with this context id must be done with the cells.
    if let Some(old) = &cx.e().coll.sm.retired[cid] {
        ok &= (0..old.n).all(|r| old.reached(r, 0));
    }
    let own = found[me as usize].map_or(0, |c| c.epoch().load(Ordering::Relaxed));
    let mut out = [u64::from(ok), own];
    let mut all = [0u64; 2 * MAX_MEMBERS];
    let call = Call::Allgather {
        send: Some(Buf {
            ptr: out.as_mut_ptr().cast(),
            count: 2,
            dt: Datatype::UINT64_T,
        }),
        recv: Buf {
            ptr: all.as_mut_ptr().cast(),
            count: 2,
            dt: Datatype::UINT64_T,
        },
    };
    // SAFETY: both arrays hold what the call describes (two u64 per member, at most
    // MAX_MEMBERS members) and live across it; it runs on point-to-point (the binding is
    // Off meanwhile), so it does not come back here.
    unsafe { super::blocking(cx, comm, call, None)? };
    if (0..n as usize).any(|r| all[2 * r] != 1) {
        return Ok(None);
    }
    // Every member mapped every cell, this one too (or it would not have agreed).
    let Some(first) = found[0] else {
        return Err(Error::internal("coll sm: bound without member 0's cell"));
    };
    let mut m = Members {
        n,
        cells: [first; MAX_MEMBERS],
        base: [0; MAX_MEMBERS],
        calls: 0,
        floor: 0,
    };
    for r in 0..n as usize {
        let Some(c) = found[r] else {
            return Err(Error::internal("coll sm: bound without a member's cell"));
        };
        m.cells[r] = c;
        m.base[r] = all[2 * r + 1];
    }
    Ok(Some(m))
}

impl Colls<'_> {
    /// Packed bytes of `b`.
    fn packed_bytes(&self, b: Buf) -> usize {
        (super::exec::type_size(&self.p2p.types, b.dt) * b.count) as usize
    }

    /// Packs all of `b` to `dst`.
    ///
    /// # Safety
    /// `b` is readable as MPI's rules say; `dst` takes its packed bytes.
    unsafe fn sm_pack(&self, b: Buf, dst: *mut u8) -> Result<()> {
        let len = self.packed_bytes(b);
        if len == 0 {
            return Ok(());
        }
        if b.dt.is_contiguous() {
            // A predefined contiguous type's packed bytes are its own: no packer to build.
            // SAFETY: the caller's contract, for `len` bytes at each side.
            unsafe { core::ptr::copy_nonoverlapping(b.ptr.cast_const(), dst, len) };
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe {
            let mut p = super::exec::packer(&self.p2p.types, b.span())?;
            p.pack(
                &self.p2p.types,
                0,
                core::slice::from_raw_parts_mut(dst, len),
            );
        }
        Ok(())
    }

    /// Unpacks `b`'s packed bytes from `src` into `b`.
    ///
    /// # Safety
    /// `b` is writable as MPI's rules say; `src` holds its packed bytes, unchanged meanwhile.
    unsafe fn sm_unpack(&self, src: *const u8, b: Buf) -> Result<()> {
        let len = self.packed_bytes(b);
        if len == 0 {
            return Ok(());
        }
        if b.dt.is_contiguous() {
            // As in `sm_pack`.
            // SAFETY: the caller's contract, for `len` bytes at each side.
            unsafe { core::ptr::copy_nonoverlapping(src, b.ptr, len) };
            return Ok(());
        }
        // SAFETY: the caller's contract.
        unsafe {
            let mut u = super::exec::unpacker(&self.p2p.types, b.span())?;
            u.unpack(&self.p2p.types, 0, core::slice::from_raw_parts(src, len));
        }
        Ok(())
    }

    /// `call` as it runs in shared memory, if it may (before the communicator is looked at);
    /// alike at every member (each derives the block size from its own buffers, which MPI's
    /// rules make agree).
    fn sm_eligible(&self, g: Grp, call: &Call) -> Option<SmCall> {
        let tune = self.coll.tune;
        let auto = self.coll.sm.mode == LayerMode::Auto;
        let (n, me) = (g.size as u64, g.rank);
        let slot = SLOT_BYTES as u64;
        let ok = |b: &Buf| self.p2p.types.check_committed(b.dt).is_ok();
        let bytes = |b: &Buf| super::exec::type_size(&self.p2p.types, b.dt) * b.count;
        let root_of = |root: i32| (0..g.size as i32).contains(&root).then_some(root as u32);
        let red = |count: u64, dt: Datatype, op: Op, per_slot: u64| {
            small_reduction(dt, op, count).filter(|r| r.op.commutes() && per_slot * r.size <= slot)
        };
        match *call {
            Call::Barrier => {
                (!(auto && tune.barrier != BarrierAlg::Auto)).then_some(SmCall::Barrier)
            }
            Call::Bcast { buf, root } => {
                let root = root_of(root)?;
                (!(auto && tune.bcast != BcastAlg::Auto) && ok(&buf) && bytes(&buf) <= slot)
                    .then_some(SmCall::Bcast { buf, root })
            }
            Call::Gather { send, recv, root } => {
                let root = root_of(root)?;
                if auto && tune.gather != GatherAlg::Auto {
                    None
                } else if me == root {
                    (ok(&recv) && bytes(&recv) <= slot && send.is_none_or(|b| ok(&b)))
                        .then_some(SmCall::GatherAt { send, recv })
                } else {
                    let send = send.filter(|b| ok(b) && bytes(b) <= slot)?;
                    Some(SmCall::GatherFrom { send })
                }
            }
            Call::Scatter { send, recv, root } => {
                let root = root_of(root)?;
                if auto && tune.scatter != ScatterAlg::Auto {
                    None
                } else if me == root {
                    (ok(&send) && n * bytes(&send) <= slot && recv.is_none_or(|b| ok(&b)))
                        .then_some(SmCall::ScatterFrom { send, recv })
                } else {
                    let recv = recv.filter(|b| ok(b) && n * bytes(b) <= slot)?;
                    Some(SmCall::ScatterTo { recv, root })
                }
            }
            Call::Allgather { send, recv } => (!(auto && tune.allgather != AllgatherAlg::Auto)
                && ok(&recv)
                && bytes(&recv) <= slot
                && send.is_none_or(|b| ok(&b)))
            .then_some(SmCall::Allgather { send, recv }),
            Call::Alltoall { send, recv } => (!(auto && tune.alltoall != AlltoallAlg::Auto)
                && ok(&recv)
                && n * bytes(&recv) <= slot
                && send.is_none_or(|b| ok(&b)))
            .then_some(SmCall::Alltoall { send, recv }),
            Call::Allreduce {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                if auto && tune.allreduce != AllreduceAlg::Auto {
                    return None;
                }
                let red = red(count, dt, op, count)?;
                Some(SmCall::Allreduce {
                    send,
                    recv,
                    count,
                    red,
                })
            }
            Call::Reduce {
                send,
                recv,
                count,
                dt,
                op,
                root,
            } => {
                let root = root_of(root)?;
                // MPI_IN_PLACE only at the root, which needs a receive buffer.
                let buffers = if me == root {
                    !recv.is_null()
                } else {
                    send.is_some()
                };
                if (auto && tune.reduce != ReduceAlg::Auto) || !buffers {
                    return None;
                }
                let red = red(count, dt, op, count)?;
                Some(SmCall::Reduce {
                    send,
                    recv,
                    count,
                    red,
                    root,
                })
            }
            Call::ReduceScatterBlock {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                if auto && tune.reduce_scatter != ReduceScatterAlg::Auto {
                    return None;
                }
                let red = red(count, dt, op, n * count)?;
                Some(SmCall::ReduceScatterBlock {
                    send,
                    recv,
                    count,
                    red,
                })
            }
            _ => None,
        }
    }

    /// Lets go of `comm`'s cells as it is freed (see the module doc).
    pub(crate) fn sm_release(&mut self, comm: CommId) {
        let Ok(c) = self.p2p.comms.get_in_use(comm) else {
            return;
        };
        let (cid, me) = (c.cid.0 as usize, c.rank);
        let Some(b) = self.coll.sm.bind.get_mut(cid) else {
            return;
        };
        match *b {
            Binding::On(owner, mut m) if owner == comm => {
                let last = final_call(m.calls);
                for r in 0..m.n as usize {
                    m.base[r] += last;
                }
                m.cell(me)
                    .epoch()
                    .store(m.base[me as usize], Ordering::Release);
                self.coll.sm.retired[cid] = Some(m);
                *b = Binding::Free;
            }
            Binding::Off(owner) if owner == comm => *b = Binding::Free,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cell_holds_its_epoch_line_and_its_slots() {
        assert_eq!(CELL_BYTES % LINE, 0, "cells stay 64-byte aligned");
        let mut mem = [0u64; CELL_BYTES / 8];
        let c = Cell(NonNull::new(mem.as_mut_ptr().cast()).unwrap());
        let base = c.0.as_ptr() as usize;
        assert_eq!(c.slot(SLOTS) as usize, base + LINE);
        assert_eq!(c.slot(SLOTS + 1) as usize, base + LINE + SLOT_BYTES);
        assert!(c.slot(SLOTS - 1) as usize + SLOT_BYTES == base + CELL_BYTES);
        c.epoch().store(7, Ordering::Release);
        assert_eq!(mem[0], 7);
    }

    #[test]
    fn members_pass_a_call_only_past_their_own_base() {
        let mut mem = [[0u64; CELL_BYTES / 8]; 2];
        let cells = [
            Cell(NonNull::new(mem[0].as_mut_ptr().cast()).unwrap()),
            Cell(NonNull::new(mem[1].as_mut_ptr().cast()).unwrap()),
        ];
        let mut m = Members {
            n: 2,
            cells: [cells[0]; MAX_MEMBERS],
            base: [0; MAX_MEMBERS],
            calls: 0,
            floor: 0,
        };
        m.cells[1] = cells[1];
        // Member 1's cell served an earlier communicator: its base is higher.
        m.base[1] = 10;
        cells[0].epoch().store(1, Ordering::Release);
        cells[1].epoch().store(10, Ordering::Release);
        assert!(m.reached(0, 1));
        assert!(!m.reached(1, 1));
        assert_eq!(m.passed(), 0);
        cells[1].epoch().store(11, Ordering::Release);
        assert_eq!(m.passed(), 1);
        cells[1].epoch().store(13, Ordering::Release);
        assert_eq!(m.passed(), 1, "member 0 is still at call 1");
    }

    #[test]
    fn the_area_is_one_cell_per_context_and_none_when_off() {
        let mut p = Params::new(&[]);
        p.register_all(&[&SM, &CONTEXTS]).unwrap();
        assert_eq!(area_bytes(&p), 64 * CELL_BYTES);
        p.set(CONTEXTS.name, "8").unwrap();
        assert_eq!(area_bytes(&p), 8 * CELL_BYTES);
        p.set(SM.name, "off").unwrap();
        assert_eq!(area_bytes(&p), 0);
    }
}
