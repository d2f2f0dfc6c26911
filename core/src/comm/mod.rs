//! Communicators: groups of processes with a private context for their messages.
//!
//! Each communicator has a context id that every member agreed on, carried in every match header,
//! so traffic on a duplicate never meets traffic on its parent. Ids are agreed collectively
//! without a central server (an OR-reduction of every member's used-id bitmap picks the lowest id
//! free at all of them — see [`crate::engine::Engine::comm_dup`]), are bounded by a parameter, and
//! are reused after free.

pub mod create;
pub mod hints;

pub use hints::CommHints;

use crate::arena::{Arena, Sizer};
use crate::array::Array;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::group::{Group, GroupTable};
use crate::params::{Default, Kind, ParamDef, Params};
use crate::rte::ProcId;
use crate::topo::table::{TopoId, TopoTable};

/// `comm_max`.
pub static COMM_MAX: ParamDef = ParamDef {
    name: "comm_max",
    kind: Kind::Int {
        min: 0,
        // A slot number is kept in 16 bits beside each context id; the last value means none.
        max: u16::MAX as i64,
    },
    default: Default::Int(0),
    description: "Most communicators that can exist at once in a process, hidden ones included \
                  (0: as many as comm_max_cids allows); the communicator table and the \
                  point-to-point layer's per-communicator state start with room for 16 and grow \
                  within mpi_memory_max",
};

/// `comm_max_cids`.
pub static MAX_CIDS: ParamDef = ParamDef {
    name: "comm_max_cids",
    kind: Kind::Int {
        min: 64,
        // The last id stays free: `ContextId::PENDING` marks slots of communicators being made.
        max: (1 << 16) - 64,
    },
    // MPICH's context-id space (2048 prefixes: 2046 user communicators); cm over Portals names
    // at most 2^14.
    default: Default::Int(2048),
    description: "Size of the context-id space (a multiple of 64; 2048, MPICH's); bounds \
                  communicators alive across the job (fixed at init: the members of every new \
                  communicator OR bitmaps of this many bits)",
};

/// Communicators the table and the point-to-point layers' per-communicator state have room
/// for at init (they grow from there).
pub const COMMS_INITIAL: u32 = 16;

/// Most communicators alive at once in a process with `params`: `comm_max`, or the context-id
/// space's size when it is 0 (at least the two predefined ones).
pub fn comm_limit(params: &Params) -> u32 {
    match params.u32(&COMM_MAX) {
        0 => params.u32(&MAX_CIDS),
        n => n.max(2),
    }
}

/// Parameters of this module.
pub static PARAMS: [&ParamDef; 2] = [&COMM_MAX, &MAX_CIDS];

/// A communicator handle: the slot in the process's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CommId(pub u32);

impl CommId {
    /// `MPI_COMM_WORLD`.
    pub const WORLD: CommId = CommId(0);
    /// `MPI_COMM_SELF`.
    pub const SELF: CommId = CommId(1);
}

/// A context id, agreed by all members and carried in match headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ContextId(pub u16);

impl ContextId {
    /// No context id yet: the placeholder in a slot reserved for a communicator still being made
    /// (`MPI_Comm_idup`), outside the context-id space.
    pub const PENDING: ContextId = ContextId(u16::MAX);
}

/// How two communicators compare (`MPI_Comm_compare`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommSimilarity {
    /// The same communicator.
    Ident,
    /// Same members in the same order, another context.
    Congruent,
    /// Same members, other order.
    Similar,
    /// Different members.
    Unequal,
}

/// What happens when an MPI call on a communicator fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrHandler {
    /// Abort the job with the error's message (`MPI_ERRORS_ARE_FATAL`, the default).
    Fatal,
    /// Return the error to the caller (`MPI_ERRORS_RETURN`).
    Return,
    /// Abort the processes of the communicator (`MPI_ERRORS_ABORT`); stormpi ends the job.
    Abort,
    /// A user's handler: its slot in [`crate::errhandler::ErrhTable`].
    User(u16),
}

/// A communicator's node levels for the node-aware collectives (`coll/hier.rs`), kept beside
/// it in the [`CommTable`] rather than in [`Comm`] (a duplicate must not inherit them).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Levels {
    /// Not looked at yet: decided at the first blocking collective that could use them, which
    /// every member reaches at the same point.
    #[default]
    Unknown,
    /// The collectives stay flat: one node, no node with two members, a hidden communicator, or
    /// `coll_hier` off.
    Flat,
    /// Hidden communicators over the members on this process's node (its leader, the member of
    /// lowest rank, is rank 0 there) and, at a leader, over the leaders of all nodes in rank
    /// order.
    Nodes {
        /// This node's members, in the communicator's rank order.
        node: CommId,
        /// The leaders, at a leader.
        leaders: Option<CommId>,
        /// Each node's members have consecutive ranks (a node's blocks of an allgather are
        /// one stretch of the buffer).
        blocked: bool,
    },
}

/// A communicator.
#[derive(Clone, Debug)]
pub struct Comm {
    /// Context id.
    pub cid: ContextId,
    /// Members (the local group of an intercommunicator).
    pub group: Group,
    /// The remote group, for an intercommunicator.
    pub remote: Option<Group>,
    /// An intercommunicator's private intracommunicator over its local group (for collectives
    /// and communicator construction); hidden from the user.
    pub local_comm: Option<CommId>,
    /// Hidden: made by the library for its own use (an intercommunicator's local side).
    pub hidden: bool,
    /// The process topology attached (shared with duplicates).
    pub topo: Option<TopoId>,
    /// My rank.
    pub rank: u32,
    /// Error handler.
    pub errhandler: ErrHandler,
    /// Freed by the user but still draining posted receives: no longer usable, context id held.
    pub freed: bool,
    /// The info assertions in force (`MPI_Comm_set_info` and friends).
    pub hints: CommHints,
}

impl Comm {
    /// Number of members (of the local group, for an intercommunicator).
    #[inline]
    pub fn size(&self) -> u32 {
        self.group.size()
    }

    /// The group point-to-point ranks name: the remote group of an intercommunicator, else the
    /// members.
    #[inline]
    pub fn peers(&self) -> Group {
        self.remote.unwrap_or(self.group)
    }

    /// Whether this is an intercommunicator.
    #[inline]
    pub fn is_inter(&self) -> bool {
        self.remote.is_some()
    }
}

const NO_SLOT: u16 = u16::MAX;

/// What every send and receive reads of a communicator's peers (the group its ranks name),
/// kept beside it when it is installed: a group's size and rank-to-process map take a match
/// over its kind each time.
#[derive(Clone, Copy, Debug, Default)]
pub struct Peers {
    /// Number of peers.
    pub size: u32,
    /// Rank = process (the world's group).
    pub world: bool,
}

impl Peers {
    fn of(comm: &Comm) -> Peers {
        let g = comm.peers();
        Peers {
            size: g.size(),
            world: matches!(g, Group::World { .. }),
        }
    }
}

/// One slot of the [`CommTable`]: a communicator (or a reservation) and what is kept beside it.
#[derive(Default)]
struct Slot {
    comm: Option<Comm>,
    /// Its [`Peers`] (installed communicators only).
    peers: Peers,
    levels: Levels,
    /// Collectives started on the communicator (their tags derive from it).
    coll_seq: u32,
}

/// The process's communicators and the context ids in use.
///
/// The slots start with room for [`COMMS_INITIAL`] communicators and grow, doubling, within
/// `mpi_memory_max` up to [`comm_limit`] when a communicator is made beyond the room there is
/// ([`CommTable::make_room`]); a slot's number — the communicator's handle — never changes.
/// The context-id map and bitmap keep their size: the id space is fixed at init.
pub struct CommTable {
    /// The groups communicators and user handles refer to.
    pub groups: GroupTable,
    /// The topologies communicators carry.
    pub topos: TopoTable,
    slots: Array<Slot>,
    /// Slots holding a communicator or a reservation.
    occupied: u32,
    /// No slot below this one is free (where the search for a free slot starts).
    free_hint: u32,
    by_cid: &'static mut [u16],
    used: &'static mut [u64],
}

impl CommTable {
    /// Arena bytes for up to `max` communicators (the initial room of [`COMMS_INITIAL`]) and
    /// `max_cids` context ids.
    pub fn size(sizer: &mut Sizer, max: u32, max_cids: u32) {
        Array::<Slot>::size(sizer, COMMS_INITIAL as usize, max as usize);
        sizer
            .slice::<u16>(max_cids as usize)
            .slice::<u64>(max_cids.div_ceil(64) as usize);
    }

    /// An empty table using `groups`, growing through `arena`'s memory account up to `max`
    /// communicators.
    pub fn new(
        arena: &mut Arena,
        max: u32,
        max_cids: u32,
        groups: GroupTable,
        topos: TopoTable,
    ) -> Result<CommTable> {
        Ok(CommTable {
            groups,
            topos,
            slots: Array::new(arena, COMMS_INITIAL as usize, max as usize, |_| {
                Slot::default()
            })?,
            occupied: 0,
            free_hint: 0,
            by_cid: arena.slice(max_cids as usize, |_| NO_SLOT)?,
            used: arena.slice(max_cids.div_ceil(64) as usize, |_| 0)?,
        })
    }

    /// The communicator `id`, if it is live (not freed).
    #[inline]
    pub fn get(&self, id: CommId) -> Result<&Comm> {
        self.get_any(id)
            .filter(|c| !c.freed)
            .ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))
    }

    /// The communicator `id`, if it is live, and its [`Peers`].
    #[inline]
    pub fn get_with_peers(&self, id: CommId) -> Result<(&Comm, Peers)> {
        self.slots
            .get(id.0 as usize)
            .and_then(|s| s.comm.as_ref().filter(|c| !c.freed).map(|c| (c, s.peers)))
            .ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))
    }

    /// [`CommTable::get_any`] with the communicator's [`Peers`].
    #[inline]
    pub fn get_any_with_peers(&self, id: CommId) -> Option<(&Comm, Peers)> {
        let s = self.slots.get(id.0 as usize)?;
        s.comm.as_ref().map(|c| (c, s.peers))
    }

    /// The communicator `id`, live or draining: for the protocol work of operations started
    /// before it was freed (a user's call is checked with [`CommTable::get`] first).
    #[inline]
    pub fn get_in_use(&self, id: CommId) -> Result<&Comm> {
        self.get_any(id)
            .ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))
    }

    /// The communicator `id`, live or draining.
    #[inline]
    pub fn get_any(&self, id: CommId) -> Option<&Comm> {
        self.slots.get(id.0 as usize).and_then(|s| s.comm.as_ref())
    }

    /// The live communicator `id`, mutably. Its groups stay as installed: the [`Peers`] kept
    /// beside it are theirs.
    pub fn get_mut(&mut self, id: CommId) -> Result<&mut Comm> {
        self.slots
            .get_mut(id.0 as usize)
            .and_then(|s| s.comm.as_mut())
            .filter(|c| !c.freed)
            .ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))
    }

    /// The node levels of communicator `id` as known so far.
    pub fn levels(&self, id: CommId) -> Levels {
        self.slots
            .get(id.0 as usize)
            .map_or(Levels::Flat, |s| s.levels)
    }

    /// Numbers the next collective on communicator `id` (every member starts collectives in
    /// the same order, so they agree on the number).
    pub fn next_coll_seq(&mut self, id: CommId) -> u32 {
        match self.slots.get_mut(id.0 as usize) {
            Some(s) => {
                s.coll_seq = s.coll_seq.wrapping_add(1);
                s.coll_seq
            }
            None => 0,
        }
    }

    /// Records the node levels of communicator `id`.
    pub fn set_levels(&mut self, id: CommId, l: Levels) {
        if let Some(s) = self.slots.get_mut(id.0 as usize) {
            s.levels = l;
        }
    }

    /// Calls `f` with every process in `from..to` (the slots of processes of other jobs) that
    /// no communicator — live, freed but still draining, or being made — and no stored group
    /// names any more.
    pub fn unreached(&mut self, from: u32, to: u32, mut f: impl FnMut(ProcId)) {
        for s in self.slots.iter() {
            if let Some(c) = &s.comm {
                self.groups.mark_members(c.group, from, to);
                if let Some(r) = c.remote {
                    self.groups.mark_members(r, from, to);
                }
            }
        }
        self.groups.mark_stored(from, to);
        for p in from..to {
            if !self.groups.take_mark(ProcId(p)) {
                f(ProcId(p));
            }
        }
    }

    /// Communicators freed by the user that still hold their slot.
    pub fn draining(&self) -> impl Iterator<Item = CommId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.comm
                    .as_ref()
                    .is_some_and(|c| c.freed && c.cid != ContextId::PENDING)
            })
            .map(|(i, _)| CommId(i as u32))
    }

    /// The communicator using context id `cid` here, if any.
    #[inline]
    pub fn by_cid(&self, cid: ContextId) -> Option<CommId> {
        match self.by_cid.get(cid.0 as usize) {
            Some(&s) if s != NO_SLOT => Some(CommId(s as u32)),
            _ => None,
        }
    }

    /// Whether `cid` lies inside the context-id space.
    pub fn cid_in_range(&self, cid: ContextId) -> bool {
        (cid.0 as usize) < self.by_cid.len()
    }

    /// Bitmap of context ids in use here (bit `i` of word `i / 64`).
    pub fn used_cids(&self) -> &[u64] {
        self.used
    }

    /// The lowest context id free in `used` (an OR of members' bitmaps).
    pub fn lowest_free(used: &[u64]) -> Option<ContextId> {
        used.iter()
            .enumerate()
            .find(|(_, w)| **w != u64::MAX)
            .map(|(i, w)| ContextId((i * 64 + w.trailing_ones() as usize) as u16))
    }

    /// The parameter that bounds the table: `comm_max`, or `comm_max_cids` when the table may
    /// hold as many communicators as there are context ids (the default), since then raising
    /// `comm_max` alone gives no room.
    pub fn limit_param(&self) -> &'static str {
        if self.slots.max() >= self.by_cid.len() {
            MAX_CIDS.name
        } else {
            COMM_MAX.name
        }
    }

    /// Makes sure a slot is free for a new communicator, growing the table (to twice its
    /// room, at most its maximum) when every slot is taken. Past the maximum it is an error
    /// naming [`CommTable::limit_param`]; past the engine's memory bound, one naming
    /// `mpi_memory_max`.
    pub fn make_room(&mut self) -> Result<()> {
        let len = self.slots.len();
        if (self.occupied as usize) < len {
            return Ok(());
        }
        let param = self.limit_param();
        if len >= self.slots.max() {
            return Err(Error::exhausted("communicator table", len as u32, param));
        }
        let want = len.saturating_mul(2).clamp(len + 1, self.slots.max());
        self.slots
            .grow_to(want, |_| Slot::default(), "communicator table", param)
    }

    /// The lowest free slot, growing the table if none is.
    fn free_slot(&mut self) -> Result<usize> {
        self.make_room()?;
        let from = self.free_hint as usize;
        let i = self.slots[from..]
            .iter()
            .position(|s| s.comm.is_none())
            .map(|i| from + i)
            .ok_or(Error::exhausted(
                "communicator table",
                self.slots.len() as u32,
                self.limit_param(),
            ))?;
        self.free_hint = i as u32;
        Ok(i)
    }

    /// Marks slot `slot` free again.
    fn vacate(&mut self, slot: usize) {
        self.occupied -= 1;
        self.free_hint = self.free_hint.min(slot as u32);
    }

    /// Installs `comm` in slot `at` (for the predefined communicators) or the lowest free slot
    /// (growing the table if none is).
    pub fn insert(&mut self, comm: Comm, at: Option<CommId>) -> Result<CommId> {
        let cid = comm.cid.0 as usize;
        if cid >= self.by_cid.len() || self.by_cid[cid] != NO_SLOT {
            return Err(Error::new(
                ErrorClass::Intern,
                Reason::BadArgument {
                    what: "context id already in use",
                },
            ));
        }
        let slot = match at {
            Some(id) => id.0 as usize,
            None => self.free_slot()?,
        };
        let Some(s) = self.slots.get_mut(slot).filter(|s| s.comm.is_none()) else {
            return Err(Error::new(
                ErrorClass::Intern,
                Reason::BadArgument {
                    what: "communicator slot in use",
                },
            ));
        };
        *s = Slot {
            peers: Peers::of(&comm),
            comm: Some(comm),
            levels: Levels::Unknown,
            coll_seq: 0,
        };
        self.occupied += 1;
        self.by_cid[cid] = slot as u16;
        self.used[cid / 64] |= 1 << (cid % 64);
        Ok(CommId(slot as u32))
    }

    /// Reserves a slot for a communicator still being made (`MPI_Comm_idup` hands out its handle
    /// at the call). The slot holds `placeholder` marked with [`ContextId::PENDING`] and freed, so
    /// that nothing can use it, nor reap it, until [`CommTable::fill`] installs the communicator.
    /// The placeholder's groups are not referenced: they are never released.
    pub fn reserve(&mut self, placeholder: Comm) -> Result<CommId> {
        let slot = self.free_slot()?;
        self.slots[slot].comm = Some(Comm {
            cid: ContextId::PENDING,
            freed: true,
            ..placeholder
        });
        self.occupied += 1;
        Ok(CommId(slot as u32))
    }

    /// Whether `id` is a slot reserved by [`CommTable::reserve`] and not yet filled.
    pub fn is_reserved(&self, id: CommId) -> bool {
        self.get_any(id)
            .is_some_and(|c| c.cid == ContextId::PENDING)
    }

    /// Installs `comm` in reserved slot `id`, with the error handler the placeholder holds (set
    /// on the new handle while it was being made, or else the parent's).
    pub fn fill(&mut self, id: CommId, mut comm: Comm) -> Result<()> {
        let Some(placeholder) = self.get_any(id).filter(|_| self.is_reserved(id)) else {
            return Err(Error::new(
                ErrorClass::Intern,
                Reason::BadArgument {
                    what: "filling a communicator slot that is not reserved",
                },
            ));
        };
        comm.errhandler = placeholder.errhandler;
        comm.hints = placeholder.hints;
        self.unreserve(id);
        self.insert(comm, Some(id)).map(|_| ())
    }

    /// Sets the info assertions of communicator `id`, live or still being made (an
    /// `MPI_Comm_idup_with_info` sets them on the reserved slot, which passes them on at
    /// [`CommTable::fill`]).
    pub fn set_hints(&mut self, id: CommId, hints: CommHints) -> Result<()> {
        let reserved = self.is_reserved(id);
        match self
            .slots
            .get_mut(id.0 as usize)
            .and_then(|s| s.comm.as_mut())
        {
            Some(c) if reserved || !c.freed => {
                c.hints = hints;
                Ok(())
            }
            _ => Err(Error::new(ErrorClass::Comm, Reason::InvalidComm)),
        }
    }

    /// The error handler of communicator `id`, live or still being made.
    pub fn errhandler(&self, id: CommId) -> Result<ErrHandler> {
        match self.get(id) {
            Ok(c) => Ok(c.errhandler),
            Err(e) => match self.get_any(id).filter(|_| self.is_reserved(id)) {
                Some(c) => Ok(c.errhandler),
                None => Err(e),
            },
        }
    }

    /// Sets the error handler of communicator `id`, live or still being made: programs set
    /// the handle `MPI_Comm_idup` gave before its request completes (mpi4py does, for every
    /// new communicator), which MPICH and Open MPI accept, and the handler holds once it does.
    pub fn set_errhandler(&mut self, id: CommId, eh: ErrHandler) -> Result<()> {
        let reserved = self.is_reserved(id);
        let slot = self
            .slots
            .get_mut(id.0 as usize)
            .and_then(|s| s.comm.as_mut());
        match slot {
            Some(c) if !c.freed || reserved => {
                c.errhandler = eh;
                Ok(())
            }
            _ => Err(Error::new(ErrorClass::Comm, Reason::InvalidComm)),
        }
    }

    /// Gives a reserved slot back unused.
    pub fn unreserve(&mut self, id: CommId) {
        if self.is_reserved(id) {
            self.slots[id.0 as usize].comm = None;
            self.vacate(id.0 as usize);
        }
    }

    /// [`CommTable::peer_proc`] knowing the communicator's [`Peers`].
    #[inline(always)]
    pub fn peer_proc_of(&self, comm: &Comm, peers: Peers, rank: u32) -> ProcId {
        if peers.world {
            return ProcId(rank);
        }
        self.peer_proc(comm, rank)
    }

    /// The process with point-to-point rank `rank` of `comm` (below its peers' size).
    #[inline]
    pub fn peer_proc(&self, comm: &Comm, rank: u32) -> ProcId {
        self.groups.proc_of(comm.peers(), rank)
    }

    /// Removes communicator `id`, freeing its context id and dropping its groups.
    pub fn remove(&mut self, id: CommId) -> Result<Comm> {
        let comm = self
            .slots
            .get_mut(id.0 as usize)
            .and_then(|s| s.comm.take())
            .ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))?;
        self.vacate(id.0 as usize);
        let cid = comm.cid.0 as usize;
        self.by_cid[cid] = NO_SLOT;
        self.used[cid / 64] &= !(1 << (cid % 64));
        self.groups.release(comm.group);
        if let Some(r) = comm.remote {
            self.groups.release(r);
        }
        if let Some(t) = comm.topo {
            self.topos.release(t);
        }
        Ok(comm)
    }

    /// Number of slots (the room there is now: the table grows when a communicator is made
    /// beyond it).
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Most slots the table may grow to.
    pub fn max(&self) -> u32 {
        self.slots.max() as u32
    }

    /// Communicators alive (and reservations).
    pub fn count(&self) -> usize {
        self.occupied as usize
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;
    use core::mem::size_of;

    fn table(capacity: u32, cids: u32) -> Result<CommTable> {
        let mut arena = Arena::new(leak(16384));
        let groups = GroupTable::new(&mut arena, 8, 64, 4)?;
        let topos = TopoTable::new(&mut arena, 2, 64)?;
        CommTable::new(&mut arena, capacity, cids, groups, topos)
    }

    fn comm(cid: u16) -> Comm {
        Comm {
            cid: ContextId(cid),
            group: Group::World { size: 4 },
            remote: None,
            local_comm: None,
            hidden: false,
            topo: None,
            rank: 1,
            errhandler: ErrHandler::Fatal,
            freed: false,
            hints: crate::comm::CommHints::empty(),
        }
    }

    #[test]
    fn cids_are_tracked_and_reused() {
        let mut t = table(4, 128).unwrap();
        let a = t.insert(comm(0), Some(CommId::WORLD)).unwrap();
        t.insert(comm(1), Some(CommId::SELF)).unwrap();
        assert_eq!(CommTable::lowest_free(t.used_cids()), Some(ContextId(2)));
        let c = t.insert(comm(2), None).unwrap();
        assert_eq!(t.by_cid(ContextId(2)), Some(c));
        assert!(t.insert(comm(2), None).is_err(), "cid in use");
        t.remove(c).unwrap();
        assert_eq!(t.by_cid(ContextId(2)), None);
        assert_eq!(CommTable::lowest_free(t.used_cids()), Some(ContextId(2)));
        assert!(t.get(c).is_err());
        assert_eq!(t.get(a).unwrap().rank, 1);
    }

    #[test]
    fn table_exhaustion_names_the_parameter() {
        let mut t = table(2, 64).unwrap();
        t.insert(comm(0), None).unwrap();
        t.insert(comm(1), None).unwrap();
        let e = t.insert(comm(2), None).unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "comm_max",
                ..
            }
        ));
    }

    /// Hints set on a reserved slot (`MPI_Comm_idup_with_info`) hold once it is filled; a
    /// freed or empty slot takes none.
    #[test]
    fn hints_set_while_reserved_survive_the_fill() {
        let mut t = table(4, 128).unwrap();
        t.insert(comm(0), Some(CommId::WORLD)).unwrap();
        let r = t.reserve(comm(0)).unwrap();
        let h = CommHints::NO_ANY_SOURCE | CommHints::EXACT_LENGTH;
        t.set_hints(r, h).unwrap();
        t.fill(r, comm(5)).unwrap();
        assert_eq!(t.get(r).unwrap().hints, h);
        t.set_hints(r, CommHints::empty()).unwrap();
        assert!(t.get(r).unwrap().hints.is_empty());
        assert!(t.set_hints(CommId(3), h).is_err(), "an empty slot");
    }

    /// A slot reserved for a communicator being made (MPI_Comm_idup) is unusable and never
    /// reaped until filled; unreserved, it is free again.
    #[test]
    fn reserved_slots_are_held_until_filled() {
        let mut t = table(4, 128).unwrap();
        t.insert(comm(0), Some(CommId::WORLD)).unwrap();
        let r = t.reserve(comm(0)).unwrap();
        assert!(t.is_reserved(r));
        assert!(t.get(r).is_err(), "not usable before it is filled");
        assert_eq!(
            t.draining().count(),
            0,
            "not taken for a freed communicator"
        );
        assert_eq!(
            t.by_cid(ContextId(0)),
            Some(CommId::WORLD),
            "cid map untouched"
        );
        assert!(
            t.fill(CommId::WORLD, comm(5)).is_err(),
            "only reserved slots are filled"
        );
        t.fill(r, comm(5)).unwrap();
        assert!(!t.is_reserved(r));
        assert_eq!(t.by_cid(ContextId(5)), Some(r));
        assert_eq!(t.get(r).unwrap().cid, ContextId(5));
        let r2 = t.reserve(comm(0)).unwrap();
        t.unreserve(r2);
        assert!(t.get_any(r2).is_none());
        assert_eq!(t.reserve(comm(0)).unwrap(), r2, "the slot is free again");
    }

    /// A table of up to `max` communicators over an account of `bound` bytes.
    fn growing(max: u32, bound: usize) -> CommTable {
        let mut arena = Arena::new(leak(1 << 16));
        arena.set_account(crate::memory::tests::account(bound));
        let groups = GroupTable::new(&mut arena, 8, 64, 4).unwrap();
        let topos = TopoTable::new(&mut arena, 2, 64).unwrap();
        CommTable::new(&mut arena, max, 1024, groups, topos).unwrap()
    }

    #[test]
    fn the_table_grows_and_keeps_its_communicators() {
        let mut t = growing(1000, 1 << 20);
        assert_eq!(t.capacity(), COMMS_INITIAL);
        let mut ids = std::vec::Vec::new();
        for cid in 0..100u16 {
            let id = t.insert(comm(cid), None).unwrap();
            assert_eq!(id, CommId(cid as u32), "the lowest free slot");
            // Per-slot state set before the table moves must move with it.
            for _ in 0..cid {
                t.next_coll_seq(id);
            }
            t.set_levels(id, Levels::Flat);
            ids.push(id);
        }
        assert_eq!(t.capacity(), 128, "doubled from 16");
        assert_eq!(t.count(), 100);
        for (cid, id) in ids.iter().enumerate() {
            assert_eq!(t.get(*id).unwrap().cid, ContextId(cid as u16));
            assert_eq!(t.by_cid(ContextId(cid as u16)), Some(*id));
            assert_eq!(t.levels(*id), Levels::Flat);
            assert_eq!(t.next_coll_seq(*id), cid as u32 + 1);
        }
        // Freed slots are reused, lowest first, before the table grows again.
        t.remove(ids[7]).unwrap();
        t.remove(ids[3]).unwrap();
        assert_eq!(t.insert(comm(500), None).unwrap(), CommId(3));
        assert_eq!(t.insert(comm(501), None).unwrap(), CommId(7));
        assert_eq!(t.next_coll_seq(CommId(3)), 1, "a reused slot starts afresh");
        assert_eq!(t.levels(CommId(7)), Levels::Unknown);
        assert_eq!(t.capacity(), 128);
        let r = t.reserve(comm(0)).unwrap();
        assert_eq!(r, CommId(100));
    }

    #[test]
    fn growth_stops_at_comm_max() {
        let mut t = growing(20, 1 << 20);
        for cid in 0..20u16 {
            t.insert(comm(cid), None).unwrap();
        }
        assert_eq!(t.capacity(), 20, "the last growth stops at the maximum");
        let e = t.insert(comm(20), None).unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "comm_max",
                capacity: 20,
                ..
            }
        ));
        assert!(t.reserve(comm(0)).is_err());
        assert!(t.make_room().is_err());
    }

    #[test]
    fn a_table_as_large_as_the_id_space_names_comm_max_cids() {
        let mut arena = Arena::new(leak(1 << 16));
        let groups = GroupTable::new(&mut arena, 8, 64, 4).unwrap();
        let topos = TopoTable::new(&mut arena, 2, 64).unwrap();
        let mut t = CommTable::new(&mut arena, 64, 64, groups, topos).unwrap();
        for cid in 0..COMMS_INITIAL as u16 {
            t.insert(comm(cid), None).unwrap();
        }
        // No memory account: the table cannot grow, and says what bounds it.
        assert_eq!(t.limit_param(), "comm_max_cids");
        let e = t.insert(comm(60), None).unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "comm_max_cids",
                ..
            }
        ));
    }

    #[test]
    fn growth_past_the_memory_bound_names_mpi_memory_max() {
        // Room for the first growth (to 32 slots) but not the second (64 slots).
        let bytes = size_of::<Slot>();
        let mut t = growing(1000, 40 * bytes);
        for cid in 0..32u16 {
            t.insert(comm(cid), None).unwrap();
        }
        let e = t.insert(comm(32), None).unwrap_err();
        crate::memory::tests::assert_names_memory_max(&e);
        assert_eq!(t.count(), 32);
        assert_eq!(
            t.get(CommId(31)).unwrap().cid,
            ContextId(31),
            "nothing lost"
        );
        t.remove(CommId(5)).unwrap();
        assert_eq!(t.insert(comm(32), None).unwrap(), CommId(5));
    }

    #[test]
    fn the_limit_follows_the_context_id_space_unless_set() {
        let mut p = Params::new(&[]);
        p.register(&COMM_MAX).unwrap();
        p.register(&MAX_CIDS).unwrap();
        assert_eq!(comm_limit(&p), 2048);
        p.set("comm_max_cids", "4096").unwrap();
        assert_eq!(comm_limit(&p), 4096);
        p.set("comm_max", "100").unwrap();
        assert_eq!(comm_limit(&p), 100);
        p.set("comm_max", "1").unwrap();
        assert_eq!(comm_limit(&p), 2, "room for the predefined ones");
    }

    #[test]
    fn lowest_free_spans_words() {
        assert_eq!(
            CommTable::lowest_free(&[u64::MAX, 0b1011]),
            Some(ContextId(66))
        );
        assert_eq!(CommTable::lowest_free(&[u64::MAX]), None);
    }
}
