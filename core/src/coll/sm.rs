//! Shared-memory collectives: Barrier, and Bcast and Allreduce of small messages, on a
//! communicator whose members all share this node, through flags and buffers in node-shared
//! memory instead of messages.
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
//! - **Bcast**: the root packs into its slot `(base + k) mod SLOTS` and stores, then returns;
//!   the others wait for the root's `k`, unpack from that slot, then store their own.
//! - **Allreduce**: write the input into one's slot, store, wait for every member's `k`, then
//!   combine every member's slot in rank order (so every member computes the same bits).
//!
//! A member writes a slot again [`SLOTS`] calls later. Before it writes at call `k` it waits
//! until every member has reached `k - SLOTS + 1` (usually long since true): a member stores
//! that epoch only after it has read everything of call `k - SLOTS`, so nothing still reads the
//! slot. A broadcasting root thus runs up to `SLOTS - 1` calls ahead of the slowest member, as
//! eager messages would let it.
//!
//! **Choice.** All members decide alike from the call's arguments, the communicator and the
//! parameters: `coll_sm` `on`, or `auto` and no `coll_<name>_algorithm` forcing an algorithm;
//! a blocking call of an intracommunicator
//! whose members are all on this node (at most [`MAX_MEMBERS`]); a context id below
//! `coll_sm_contexts`; a Bcast of at most [`SLOT_BYTES`] packed bytes, an Allreduce of a
//! predefined operation on a contiguous predefined type of at most [`SLOT_BYTES`]. The first
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

use super::{parse, small_reduction, AllreduceAlg, BarrierAlg, BcastAlg, Buf, Call, Grp, Mode};
use crate::arena::{Arena, Sizer};
use crate::btl::AreaState;
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::Result;
use crate::params::{Default, Kind, ParamDef, Params};
use crate::platform::Level;

/// Bytes of each of a cell's slots: the largest Bcast or Allreduce taken.
pub const SLOT_BYTES: usize = 256;
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
                  collectives; each takes a cell of about 2 KiB in every process's segment",
};

/// Whether the shared-memory collectives run (`coll_sm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SmMode {
    Auto,
    On,
    Off,
}

impl SmMode {
    fn parse(text: &str) -> Option<SmMode> {
        match text.trim() {
            "" | "auto" => Some(SmMode::Auto),
            "on" | "1" | "yes" | "true" => Some(SmMode::On),
            "off" | "0" | "no" | "false" => Some(SmMode::Off),
            _ => None,
        }
    }
}

/// Bytes of the area every process offers: one cell per context id served, none when `coll_sm`
/// is `off`.
pub fn area_bytes(params: &Params) -> usize {
    match SmMode::parse(params.str(&SM)) {
        Some(SmMode::Off) => 0,
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
    cells: [Option<Cell>; MAX_MEMBERS],
    /// Each member's epoch when the communicator bound.
    base: [u64; MAX_MEMBERS],
    /// Shared-memory collectives run on the communicator so far.
    calls: u64,
}

impl Members {
    fn cell(&self, r: u32) -> Cell {
        self.cells[r as usize].expect("a bound member has a cell")
    }

    /// Whether every member's epoch has reached its base plus `k`.
    fn all_reached(&self, k: u64) -> bool {
        (0..self.n).all(|r| self.reached(r, k))
    }

    fn reached(&self, r: u32, k: u64) -> bool {
        self.cell(r).epoch().load(Ordering::Acquire) >= self.base[r as usize] + k
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
    mode: SmMode,
    bind: &'static mut [Binding],
    /// The last bound communicator's members and the epochs each stores when it frees it
    /// (`base` holds those targets).
    retired: &'static mut [Option<Members>],
}

impl SmState {
    fn contexts(params: &Params) -> usize {
        match SmMode::parse(params.str(&SM)) {
            Some(SmMode::Off) => 0,
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
        let mode = parse(params, &SM, SmMode::parse)?;
        let n = SmState::contexts(params);
        Ok(SmState {
            mode,
            bind: arena.slice(n, |_| Binding::Free)?,
            retired: arena.slice(n, |_| None)?,
        })
    }
}

/// Epoch stored by a member that frees a bound communicator after `calls` calls.
fn final_call(calls: u64) -> u64 {
    calls + 1
}

impl Engine {
    /// Runs blocking `call` on intracommunicator `comm` (`g`) in shared memory if it should (see
    /// the module doc); false (nothing done) when the point-to-point layer is to run it — also
    /// for every call whose arguments are wrong, so that it reports the error as it always does.
    ///
    /// # Safety
    /// As for [`Engine::collective`].
    pub(super) unsafe fn sm_collective(
        &mut self,
        comm: CommId,
        g: Grp,
        call: &Call,
    ) -> Result<bool> {
        if self.coll.sm.mode == SmMode::Off
            || g.size < 2
            || g.size as usize > MAX_MEMBERS
            || !self.sm_eligible(g, call)
        {
            return Ok(false);
        }
        let Some((cid, m)) = self.sm_members(comm)? else {
            return Ok(false);
        };
        let k = m.calls + 1;
        let me = g.rank;
        let mine = m.cell(me);
        let my_epoch = m.base[me as usize] + k;
        match *call {
            Call::Barrier => {
                mine.epoch().store(my_epoch, Ordering::Release);
                self.sm_wait(|| m.all_reached(k));
            }
            Call::Bcast { buf, root } => {
                let bytes = super::exec::type_size(&self.types, buf.dt) * buf.count;
                let root = root as u32;
                if bytes == 0 {
                    // Nothing moves; the epochs still count the call.
                    mine.epoch().store(my_epoch, Ordering::Release);
                } else if me == root {
                    self.sm_wait(|| m.all_reached(k.saturating_sub(SLOTS - 1)));
                    // SAFETY: the caller's buffer holds `count` instances (MPI's rules); the
                    // slot is ours, SLOT_BYTES long, and no member reads it now (above).
                    unsafe {
                        let mut p = sm_packer(buf, &self.types)?;
                        let out =
                            core::slice::from_raw_parts_mut(mine.slot(my_epoch), bytes as usize);
                        p.pack(&self.types, 0, out);
                    }
                    mine.epoch().store(my_epoch, Ordering::Release);
                } else {
                    self.sm_wait(|| m.reached(root, k));
                    let from = m.cell(root);
                    let e = m.base[root as usize] + k;
                    // SAFETY: the root filled this call's slot before storing the epoch
                    // seen above and leaves it alone until we store ours; the caller's buffer
                    // takes `count` instances.
                    unsafe {
                        let mut u = sm_unpacker(buf, &self.types)?;
                        let data = core::slice::from_raw_parts(from.slot(e), bytes as usize);
                        u.unpack(&self.types, 0, data);
                    }
                    mine.epoch().store(my_epoch, Ordering::Release);
                }
            }
            Call::Allreduce {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                let red = small_reduction(dt, op, count).expect("checked eligible");
                let bytes = (count * red.size) as usize;
                self.sm_wait(|| m.all_reached(k.saturating_sub(SLOTS - 1)));
                let input = send.unwrap_or(recv.cast_const());
                // SAFETY: MPI's rules for the caller's buffers (`count` elements each); our slot
                // is free (above) and SLOT_BYTES long.
                unsafe { core::ptr::copy_nonoverlapping(input, mine.slot(my_epoch), bytes) };
                mine.epoch().store(my_epoch, Ordering::Release);
                self.sm_wait(|| m.all_reached(k));
                // In rank order from member 0, so that every member gets the same bits.
                // SAFETY: every member filled this call's slot before storing the epoch seen
                // above and leaves it alone until we have stored a later epoch; `recv`
                // takes `count` elements and is not any member's slot.
                unsafe {
                    let first = m.cell(0);
                    core::ptr::copy_nonoverlapping(
                        first.slot(m.base[0] + k).cast_const(),
                        recv,
                        bytes,
                    );
                    for r in 1..m.n {
                        let c = m.cell(r);
                        red.apply(recv, c.slot(m.base[r as usize] + k), count)?;
                    }
                }
            }
            _ => unreachable!("sm_eligible admits only these"),
        }
        if let Binding::On(_, b) = &mut self.coll.sm.bind[cid] {
            b.calls = k;
        }
        Ok(true)
    }

    /// Whether `call` may run in shared memory (before the communicator is looked at); alike at
    /// every member.
    fn sm_eligible(&self, g: Grp, call: &Call) -> bool {
        let tune = self.coll.tune;
        let auto = self.coll.sm.mode == SmMode::Auto;
        match *call {
            Call::Barrier => !(auto && tune.barrier != BarrierAlg::Auto),
            Call::Bcast { buf, root } => {
                !(auto && tune.bcast != BcastAlg::Auto)
                    && (0..g.size as i32).contains(&root)
                    && self.types.check_committed(buf.dt).is_ok()
                    && super::exec::type_size(&self.types, buf.dt) * buf.count <= SLOT_BYTES as u64
            }
            Call::Allreduce { count, dt, op, .. } => {
                !(auto && tune.allreduce != AllreduceAlg::Auto)
                    && small_reduction(dt, op, count)
                        .is_some_and(|r| r.op.commutes() && count * r.size <= SLOT_BYTES as u64)
            }
            _ => false,
        }
    }

    /// Waits until `done`, progressing the rest of the engine meanwhile.
    fn sm_wait(&mut self, mut done: impl FnMut() -> bool) {
        // A fresh wait: spin before yielding, whatever the last wait did.
        self.idle = 0;
        while !done() {
            if self.progress() == 0 {
                self.relax();
            }
        }
    }

    /// The members' cells of `comm` with its context id's index, binding it at its first call
    /// here; `None` when it stays on point-to-point.
    fn sm_members(&mut self, comm: CommId) -> Result<Option<(usize, Members)>> {
        let cid = self.check_comm(comm)?.cid.0 as usize;
        match self.coll.sm.bind.get(cid) {
            None => return Ok(None),
            Some(Binding::On(c, m)) if *c == comm => return Ok(Some((cid, *m))),
            Some(Binding::Off(c)) if *c == comm => return Ok(None),
            Some(_) => {}
        }
        let m = self.sm_bind(comm, cid)?;
        crate::log!(
            self.platform,
            Level::Info,
            "coll sm: communicator {} (context id {cid}) {}",
            comm.0,
            if m.is_some() {
                "runs its small collectives in shared memory"
            } else {
                "stays on point-to-point"
            }
        );
        self.coll.sm.bind[cid] = match m {
            Some(m) => {
                self.coll.sm.retired[cid] = None;
                Binding::On(comm, m)
            }
            None => Binding::Off(comm),
        };
        Ok(m.map(|m| (cid, m)))
    }

    /// Binds `comm` (context id index `cid`): maps every member's cell, then agrees with the
    /// others over point-to-point whether all could and exchanges the bases.
    fn sm_bind(&mut self, comm: CommId, cid: usize) -> Result<Option<Members>> {
        let c = self.check_comm(comm)?;
        let (group, n, me) = (c.group, c.size(), c.rank);
        let my_node = self.procs[self.me.0 as usize].node;
        let mut m = Members {
            n,
            cells: [None; MAX_MEMBERS],
            base: [0; MAX_MEMBERS],
            calls: 0,
        };
        // Everyone on this node: computed alike at every member (the node layout is global).
        let local = (0..n).all(|r| {
            let p = self.comms.groups.proc_of(group, r);
            self.procs[p.0 as usize].node == my_node
        });
        if !local {
            return Ok(None);
        }
        let mut ok = true;
        for r in 0..n {
            let p = self.comms.groups.proc_of(group, r);
            let area = loop {
                match self.bml.coll_area(p, self.me) {
                    AreaState::Pending => {
                        if self.progress() == 0 {
                            self.relax();
                        }
                    }
                    AreaState::Mapped(a) => break Some(a),
                    AreaState::Absent => break None,
                }
            };
            m.cells[r as usize] = area
                .filter(|a| a.len >= (cid + 1) * CELL_BYTES)
                .and_then(|a| NonNull::new(a.base.as_ptr().wrapping_add(cid * CELL_BYTES)))
                .map(Cell);
            ok &= m.cells[r as usize].is_some();
        }
        // The last communicator with this context id must be done with the cells.
        if let Some(old) = &self.coll.sm.retired[cid] {
            ok &= (0..old.n).all(|r| old.reached(r, 0));
        }
        let own = m.cells[me as usize].map_or(0, |c| c.epoch().load(Ordering::Relaxed));
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
        // MAX_MEMBERS members) and live across it; an allgather never comes back here.
        unsafe { self.collective(comm, call, Mode::Blocking)? };
        if (0..n as usize).any(|r| all[2 * r] != 1) {
            return Ok(None);
        }
        for r in 0..n as usize {
            m.base[r] = all[2 * r + 1];
        }
        Ok(Some(m))
    }

    /// Lets go of `comm`'s cells as it is freed (see the module doc).
    pub(crate) fn sm_release(&mut self, comm: CommId) {
        let Ok(c) = self.comms.get_in_use(comm) else {
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

/// A packer over the broadcast buffer.
///
/// # Safety
/// As for [`Packer::new`].
unsafe fn sm_packer(buf: Buf, types: &TypeTable) -> Result<Packer> {
    if buf.dt.is_contiguous() {
        // SAFETY: the caller's contract.
        Ok(unsafe { Packer::elements(buf.ptr, buf.count as usize, buf.dt) })
    } else {
        // SAFETY: the caller's contract.
        unsafe { Packer::new(buf.ptr, buf.count, buf.dt, types) }
    }
}

/// An unpacker into the broadcast buffer.
///
/// # Safety
/// As for [`Unpacker::new`].
unsafe fn sm_unpacker(buf: Buf, types: &TypeTable) -> Result<Unpacker> {
    if buf.dt.is_contiguous() {
        // SAFETY: the caller's contract.
        Ok(unsafe { Unpacker::elements(buf.ptr, buf.count as usize, buf.dt) })
    } else {
        // SAFETY: the caller's contract.
        unsafe { Unpacker::new(buf.ptr, buf.count, buf.dt, types) }
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
    fn members_reach_an_epoch_only_past_their_own_base() {
        let mut mem = [[0u64; CELL_BYTES / 8]; 2];
        let cells = [
            Cell(NonNull::new(mem[0].as_mut_ptr().cast()).unwrap()),
            Cell(NonNull::new(mem[1].as_mut_ptr().cast()).unwrap()),
        ];
        let mut m = Members {
            n: 2,
            cells: [None; MAX_MEMBERS],
            base: [0; MAX_MEMBERS],
            calls: 0,
        };
        m.cells[0] = Some(cells[0]);
        m.cells[1] = Some(cells[1]);
        // Member 1's cell served an earlier communicator: its base is higher.
        m.base[1] = 10;
        cells[0].epoch().store(1, Ordering::Release);
        cells[1].epoch().store(10, Ordering::Release);
        assert!(m.reached(0, 1));
        assert!(!m.reached(1, 1));
        assert!(!m.all_reached(1));
        cells[1].epoch().store(11, Ordering::Release);
        assert!(m.all_reached(1));
        assert!(!m.all_reached(2));
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
