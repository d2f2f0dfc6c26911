//! Communicators: groups of processes with a private context for their messages.
//!
//! Each communicator has a context id that every member agreed on, carried in every match header,
//! so traffic on a duplicate never meets traffic on its parent. Ids are agreed collectively
//! without a central server (an OR-reduction of every member's used-id bitmap picks the lowest id
//! free at all of them — see [`crate::engine::Engine::comm_dup`]), are bounded by a parameter, and
//! are reused after free.

pub mod create;

use crate::arena::{Arena, Sizer};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::group::{Group, GroupTable};
use crate::params::{Default, Kind, ParamDef};
use crate::rte::ProcId;
use crate::topo::table::{TopoId, TopoTable};

/// `comm_max`.
pub static COMM_MAX: ParamDef = ParamDef {
    name: "comm_max",
    kind: Kind::Int {
        min: 2,
        max: 1 << 16,
    },
    default: Default::Int(64),
    description: "Most communicators that can exist at once in a process (fixed at init: the point-to-point layer keeps per-communicator arrays of sequence numbers, communicators times processes)",
};

/// `comm_max_cids`.
pub static MAX_CIDS: ParamDef = ParamDef {
    name: "comm_max_cids",
    kind: Kind::Int {
        min: 64,
        // The last id stays free: `ContextId::PENDING` marks slots of communicators being made.
        max: (1 << 16) - 64,
    },
    default: Default::Int(1024),
    description:
        "Size of the context-id space (a multiple of 64); bounds communicators alive across the job (fixed at init: the bitmaps the context-id agreement ORs across members are this long)",
};

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

/// The process's communicators and the context ids in use.
pub struct CommTable {
    /// The groups communicators and user handles refer to.
    pub groups: GroupTable,
    /// The topologies communicators carry.
    pub topos: TopoTable,
    slots: &'static mut [Option<Comm>],
    levels: &'static mut [Levels],
    /// Per slot: collectives started on the communicator (their tags derive from it).
    coll_seq: &'static mut [u32],
    by_cid: &'static mut [u16],
    used: &'static mut [u64],
}

impl CommTable {
    /// Arena bytes for `capacity` communicators and `max_cids` context ids.
    pub fn size(sizer: &mut Sizer, capacity: u32, max_cids: u32) {
        sizer
            .slice::<Option<Comm>>(capacity as usize)
            .slice::<Levels>(capacity as usize)
            .slice::<u32>(capacity as usize)
            .slice::<u16>(max_cids as usize)
            .slice::<u64>(max_cids.div_ceil(64) as usize);
    }

    /// An empty table using `groups`.
    pub fn new(
        arena: &mut Arena,
        capacity: u32,
        max_cids: u32,
        groups: GroupTable,
        topos: TopoTable,
    ) -> Result<CommTable> {
        Ok(CommTable {
            groups,
            topos,
            slots: arena.slice(capacity as usize, |_| None)?,
            levels: arena.slice(capacity as usize, |_| Levels::Unknown)?,
            coll_seq: arena.slice(capacity as usize, |_| 0)?,
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
        self.slots.get(id.0 as usize).and_then(Option::as_ref)
    }

    /// The live communicator `id`, mutably.
    pub fn get_mut(&mut self, id: CommId) -> Result<&mut Comm> {
        self.slots
            .get_mut(id.0 as usize)
            .and_then(Option::as_mut)
            .filter(|c| !c.freed)
            .ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))
    }

    /// The node levels of communicator `id` as known so far.
    pub fn levels(&self, id: CommId) -> Levels {
        self.levels
            .get(id.0 as usize)
            .copied()
            .unwrap_or(Levels::Flat)
    }

    /// Numbers the next collective on communicator `id` (every member starts collectives in
    /// the same order, so they agree on the number).
    pub fn next_coll_seq(&mut self, id: CommId) -> u32 {
        match self.coll_seq.get_mut(id.0 as usize) {
            Some(s) => {
                *s = s.wrapping_add(1);
                *s
            }
            None => 0,
        }
    }

    /// Records the node levels of communicator `id`.
    pub fn set_levels(&mut self, id: CommId, l: Levels) {
        if let Some(s) = self.levels.get_mut(id.0 as usize) {
            *s = l;
        }
    }

    /// Communicators freed by the user that still hold their slot.
    pub fn draining(&self) -> impl Iterator<Item = CommId> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.as_ref()
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

    /// Whether a slot is free for a new communicator.
    pub fn has_room(&self) -> bool {
        self.slots.iter().any(Option::is_none)
    }

    /// Installs `comm` in slot `at` (for the predefined communicators) or the first free slot.
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
            None => self
                .slots
                .iter()
                .position(Option::is_none)
                .ok_or(Error::exhausted(
                    "communicator table",
                    self.slots.len() as u32,
                    COMM_MAX.name,
                ))?,
        };
        if self.slots[slot].is_some() {
            return Err(Error::new(
                ErrorClass::Intern,
                Reason::BadArgument {
                    what: "communicator slot in use",
                },
            ));
        }
        self.slots[slot] = Some(comm);
        self.levels[slot] = Levels::Unknown;
        self.coll_seq[slot] = 0;
        self.by_cid[cid] = slot as u16;
        self.used[cid / 64] |= 1 << (cid % 64);
        Ok(CommId(slot as u32))
    }

    /// Reserves a slot for a communicator still being made (`MPI_Comm_idup` hands out its handle
    /// at the call). The slot holds `placeholder` marked with [`ContextId::PENDING`] and freed, so
    /// that nothing can use it, nor reap it, until [`CommTable::fill`] installs the communicator.
    /// The placeholder's groups are not referenced: they are never released.
    pub fn reserve(&mut self, placeholder: Comm) -> Result<CommId> {
        let slot = self
            .slots
            .iter()
            .position(Option::is_none)
            .ok_or(Error::exhausted(
                "communicator table",
                self.slots.len() as u32,
                COMM_MAX.name,
            ))?;
        self.slots[slot] = Some(Comm {
            cid: ContextId::PENDING,
            freed: true,
            ..placeholder
        });
        Ok(CommId(slot as u32))
    }

    /// Whether `id` is a slot reserved by [`CommTable::reserve`] and not yet filled.
    pub fn is_reserved(&self, id: CommId) -> bool {
        self.get_any(id)
            .is_some_and(|c| c.cid == ContextId::PENDING)
    }

    /// Installs `comm` in reserved slot `id`.
    pub fn fill(&mut self, id: CommId, comm: Comm) -> Result<()> {
        if !self.is_reserved(id) {
            return Err(Error::new(
                ErrorClass::Intern,
                Reason::BadArgument {
                    what: "filling a communicator slot that is not reserved",
                },
            ));
        }
        self.slots[id.0 as usize] = None;
        self.insert(comm, Some(id)).map(|_| ())
    }

    /// Gives a reserved slot back unused.
    pub fn unreserve(&mut self, id: CommId) {
        if self.is_reserved(id) {
            self.slots[id.0 as usize] = None;
        }
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
            .and_then(Option::take)
            .ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))?;
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

    /// Number of slots.
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Communicators alive.
    pub fn count(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::tests::leak;

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

    #[test]
    fn lowest_free_spans_words() {
        assert_eq!(
            CommTable::lowest_free(&[u64::MAX, 0b1011]),
            Some(ContextId(66))
        );
        assert_eq!(CommTable::lowest_free(&[u64::MAX]), None);
    }
}
