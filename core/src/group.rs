//! Process groups: ordered sets of processes, as `MPI_Group` and as the members of communicators.
//!
//! The common shapes need no storage: the empty group, all processes in job order (the world and
//! its duplicates) and a single process. Any other list of members lives in a fixed store shared
//! by all groups, sized by parameters, with a reference count per entry (user handles and the
//! communicators built on it). Since every member is a process of the job, set operations use one
//! job-sized bitmap and cost linear time.

use crate::arena::{Arena, Sizer};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::params::{Default, Kind, ParamDef};
use crate::ranges::{Ranges, Store};
use crate::rte::ProcId;

/// `group_max`.
pub static GROUP_MAX: ParamDef = ParamDef {
    name: "group_max",
    kind: Kind::Int {
        min: 4,
        max: 1 << 16,
    },
    default: Default::Int(1 << 16),
    description: "Most groups (user handles and communicators' member lists) alive at once; the \
                  table starts at 64 and grows within mpi_memory_max; at most 2^16 (a group's id \
                  is 16 bits)",
};

/// `group_max_members`.
pub static GROUP_MAX_MEMBERS: ParamDef = ParamDef {
    name: "group_max_members",
    kind: Kind::Int {
        min: 64,
        max: u32::MAX as i64,
    },
    default: Default::Int(u32::MAX as i64),
    description: "Most member slots over all stored groups (the world, single processes and the \
                  empty group need none); the store starts at 4096 and grows within \
                  mpi_memory_max",
};

/// Parameters of this module.
pub static PARAMS: [&ParamDef; 2] = [&GROUP_MAX, &GROUP_MAX_MEMBERS];

/// An entry of the group table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GroupId(pub u16);

/// A group of processes: rank `i` of the group is its `i`-th member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// No members (`MPI_GROUP_EMPTY`).
    Empty,
    /// All processes, rank = process (`MPI_COMM_WORLD`'s group).
    World {
        /// Number of processes.
        size: u32,
    },
    /// One process (`MPI_COMM_SELF`'s group).
    Single(ProcId),
    /// Members listed in the group table.
    Listed {
        /// The entry.
        id: GroupId,
        /// Number of members.
        len: u32,
    },
}

impl Group {
    /// Number of members.
    #[inline]
    pub fn size(&self) -> u32 {
        match *self {
            Group::Empty => 0,
            Group::World { size } => size,
            Group::Single(_) => 1,
            Group::Listed { len, .. } => len,
        }
    }
}

/// How two groups compare (`MPI_Group_compare`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Similarity {
    /// Same members in the same order.
    Ident,
    /// Same members, other order.
    Similar,
    /// Different members.
    Unequal,
}

/// A stored entry: members kept as a shape (for user handles to the common shapes) or listed.
#[derive(Clone, Copy, Debug)]
enum Members {
    Shape(Group),
    Range { at: u32, len: u32 },
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    members: Members,
    refs: u32,
}

/// Group entries carved at init (the table grows from there).
const ENTRIES_INITIAL: usize = 64;
/// Member slots carved at init.
const MEMBERS_INITIAL: usize = 4096;

/// All groups of the process.
pub struct GroupTable {
    entries: Store<Option<Entry>>,
    store: Store<ProcId>,
    ranges: Ranges,
    /// One bit per process of the job, clear between operations.
    marks: &'static mut [u64],
    world: u32,
}

fn rank_error(rank: i64, size: u32) -> Error {
    Error::new(
        ErrorClass::Rank,
        Reason::RankOutOfRange {
            rank: rank.clamp(i32::MIN as i64, i32::MAX as i64) as i32,
            size,
        },
    )
}

impl GroupTable {
    /// Arena bytes (the initial sizes) for a job of `procs` processes and at most `entries`
    /// groups of `members` member slots in all.
    pub fn size(sizer: &mut Sizer, entries: u32, members: u32, procs: u32) {
        Store::<Option<Entry>>::size(sizer, ENTRIES_INITIAL, entries as usize);
        Store::<ProcId>::size(sizer, MEMBERS_INITIAL, members as usize);
        sizer.slice::<u64>(procs.div_ceil(64) as usize);
    }

    /// An empty table for a job of `procs` processes, growing through `arena`'s memory account
    /// up to `entries` groups of `members` member slots in all.
    pub fn new(arena: &mut Arena, entries: u32, members: u32, procs: u32) -> Result<GroupTable> {
        GroupTable::with_slots(arena, entries, members, procs, procs)
    }

    /// [`GroupTable::new`] for a world of `procs` processes in a process table of `slots`
    /// (the world and the processes of other jobs that may join later).
    pub fn with_slots(
        arena: &mut Arena,
        entries: u32,
        members: u32,
        procs: u32,
        slots: u32,
    ) -> Result<GroupTable> {
        let (entries, _) = Store::new(arena, ENTRIES_INITIAL, entries as usize, None)?;
        let (store, ranges) = Store::new(arena, MEMBERS_INITIAL, members as usize, ProcId(0))?;
        Ok(GroupTable {
            entries,
            store,
            ranges,
            marks: arena.slice(slots.max(procs).div_ceil(64) as usize, |_| 0)?,
            world: procs,
        })
    }

    /// The group of all processes.
    pub fn world(&self) -> Group {
        Group::World { size: self.world }
    }

    /// The process with rank `rank` of `g` (which must be below its size).
    #[inline(always)]
    pub fn proc_of(&self, g: Group, rank: u32) -> ProcId {
        // The world's rank is the process: every message on MPI_COMM_WORLD asks, twice.
        if let Group::World { .. } = g {
            return ProcId(rank);
        }
        self.proc_of_other(g, rank)
    }

    /// [`GroupTable::proc_of`] of a group other than the world's.
    fn proc_of_other(&self, g: Group, rank: u32) -> ProcId {
        match g {
            Group::World { .. } => ProcId(rank),
            Group::Single(p) => p,
            Group::Empty => ProcId(u32::MAX),
            Group::Listed { id, .. } => match self.entries[id.0 as usize] {
                Some(Entry {
                    members: Members::Range { at, .. },
                    ..
                }) => self.store[(at + rank) as usize],
                Some(Entry {
                    members: Members::Shape(s),
                    ..
                }) => self.proc_of(s, rank),
                None => ProcId(u32::MAX),
            },
        }
    }

    /// The rank of `proc` in `g`, if it is a member.
    pub fn rank_of(&self, g: Group, proc: ProcId) -> Option<u32> {
        match self.shape(g) {
            Group::Empty => None,
            Group::World { size } => (proc.0 < size).then_some(proc.0),
            Group::Single(p) => (p == proc).then_some(0),
            Group::Listed { .. } => self
                .listed(g)
                .iter()
                .position(|&p| p == proc)
                .map(|i| i as u32),
        }
    }

    /// The members of `g` in rank order.
    pub fn members(&self, g: Group) -> impl Iterator<Item = ProcId> + '_ {
        (0..g.size()).map(move |r| self.proc_of(g, r))
    }

    /// `g` itself, or the common shape a stored entry stands for.
    fn shape(&self, g: Group) -> Group {
        match g {
            Group::Listed { id, .. } => match self.entries.get(id.0 as usize).copied().flatten() {
                Some(Entry {
                    members: Members::Shape(s),
                    ..
                }) => s,
                _ => g,
            },
            g => g,
        }
    }

    fn listed(&self, g: Group) -> &[ProcId] {
        match g {
            Group::Listed { id, .. } => match self.entries.get(id.0 as usize).copied().flatten() {
                Some(Entry {
                    members: Members::Range { at, len },
                    ..
                }) => &self.store[at as usize..(at + len) as usize],
                _ => &[],
            },
            _ => &[],
        }
    }

    /// Checks that `g` is a live group.
    pub fn check(&self, g: Group) -> Result<Group> {
        match g {
            Group::Listed { id, len } => match self.entries.get(id.0 as usize).copied().flatten() {
                Some(e) => {
                    let real = match e.members {
                        Members::Shape(s) => s.size(),
                        Members::Range { len, .. } => len,
                    };
                    if real == len {
                        Ok(g)
                    } else {
                        Err(invalid())
                    }
                }
                None => Err(invalid()),
            },
            g => Ok(g),
        }
    }

    /// The group stored as entry `id`, as a handle would name it.
    pub fn by_id(&self, id: GroupId) -> Result<Group> {
        match self.entries.get(id.0 as usize).copied().flatten() {
            Some(e) => Ok(Group::Listed {
                id,
                len: match e.members {
                    Members::Shape(s) => s.size(),
                    Members::Range { len, .. } => len,
                },
            }),
            None => Err(invalid()),
        }
    }

    /// Takes a reference on `g` (stored groups only; shapes need none).
    pub fn retain(&mut self, g: Group) {
        if let Group::Listed { id, .. } = g {
            if let Some(Some(e)) = self.entries.get_mut(id.0 as usize) {
                e.refs += 1;
            }
        }
    }

    /// Drops a reference on `g`; the last one frees its entry and members.
    pub fn release(&mut self, g: Group) {
        let Group::Listed { id, .. } = g else { return };
        let Some(slot) = self.entries.get_mut(id.0 as usize) else {
            return;
        };
        let Some(e) = slot else { return };
        e.refs -= 1;
        if e.refs == 0 {
            if let Members::Range { at, len } = e.members {
                self.ranges.release(at, len);
            }
            *slot = None;
        }
    }

    /// A stored entry (one reference) for `g`, so that a user handle can name it.
    pub fn handle_for(&mut self, g: Group) -> Result<Group> {
        match g {
            Group::Listed { .. } => {
                self.retain(g);
                Ok(g)
            }
            Group::Empty => Ok(Group::Empty),
            shape => {
                let id = self.free_entry()?;
                self.entries[id.0 as usize] = Some(Entry {
                    members: Members::Shape(shape),
                    refs: 1,
                });
                Ok(Group::Listed {
                    id,
                    len: shape.size(),
                })
            }
        }
    }

    /// The communicator form of `g`: its shape when it is one, else `g` with a new reference.
    pub fn for_comm(&mut self, g: Group) -> Group {
        let s = self.shape(g);
        self.retain(s);
        s
    }

    fn free_entry(&mut self) -> Result<GroupId> {
        let i = match self.entries.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                let i = self.entries.len();
                self.entries.extend(1, "group table", GROUP_MAX.name)?;
                i
            }
        };
        Ok(GroupId(i as u16))
    }

    /// A new group (one reference) of the `n` processes `procs` yields, which must be distinct
    /// processes of the job; common shapes are recognised and stored as such.
    pub fn create(&mut self, n: u32, procs: impl Iterator<Item = ProcId>) -> Result<Group> {
        if n == 0 {
            return Ok(Group::Empty);
        }
        let (id, at) = self.alloc(n)?;
        for (i, p) in procs.take(n as usize).enumerate() {
            self.store[at as usize + i] = p;
        }
        self.finish(id, at, n)
    }

    fn alloc(&mut self, n: u32) -> Result<(GroupId, u32)> {
        let id = self.free_entry()?;
        let at = self.store.alloc(
            &mut self.ranges,
            n,
            "group member store",
            GROUP_MAX_MEMBERS.name,
        )?;
        Ok((id, at))
    }

    /// Runs `f` with the bitmap marking the members of `g`, then clears it.
    fn with_marks<T>(&mut self, g: Group, f: impl FnOnce(&mut GroupTable) -> T) -> T {
        for r in 0..g.size() {
            let p = self.proc_of(g, r).0 as usize;
            self.marks[p / 64] |= 1 << (p % 64);
        }
        let out = f(self);
        for r in 0..g.size() {
            let p = self.proc_of(g, r).0 as usize;
            self.marks[p / 64] &= !(1 << (p % 64));
        }
        out
    }

    fn marked(&self, p: ProcId) -> bool {
        let p = p.0 as usize;
        self.marks[p / 64] & (1 << (p % 64)) != 0
    }

    /// Collects the members of `g` selected by `keep`, in `g`'s order, then those of `extra`
    /// selected by `keep_extra`, into a new group.
    fn select(
        &mut self,
        g: Group,
        keep: impl Fn(&GroupTable, ProcId) -> bool,
        extra: Group,
        keep_extra: impl Fn(&GroupTable, ProcId) -> bool,
    ) -> Result<Group> {
        let n = (self.members(g).filter(|&p| keep(self, p)).count()
            + self.members(extra).filter(|&p| keep_extra(self, p)).count()) as u32;
        if n == 0 {
            return Ok(Group::Empty);
        }
        let (id, at) = self.alloc(n)?;
        let mut k = at as usize;
        for (src, pred) in [
            (g, &keep as &dyn Fn(&GroupTable, ProcId) -> bool),
            (extra, &keep_extra),
        ] {
            for r in 0..src.size() {
                let p = self.proc_of(src, r);
                if pred(self, p) {
                    self.store[k] = p;
                    k += 1;
                }
            }
        }
        self.finish(id, at, n)
    }

    /// `MPI_Group_incl`: the members at `ranks` of `g`, in that order.
    pub fn incl(&mut self, g: Group, ranks: &[i32]) -> Result<Group> {
        let size = g.size();
        for &r in ranks {
            if r < 0 || r as u32 >= size {
                return Err(rank_error(r as i64, size));
            }
        }
        // Distinct ranks name distinct processes: check with the bitmap.
        let mut dup = false;
        for &r in ranks {
            let p = self.proc_of(g, r as u32);
            if self.marked(p) {
                dup = true;
            }
            let i = p.0 as usize;
            self.marks[i / 64] |= 1 << (i % 64);
        }
        for &r in ranks {
            let i = self.proc_of(g, r as u32).0 as usize;
            self.marks[i / 64] &= !(1 << (i % 64));
        }
        if dup {
            return Err(Error::new(
                ErrorClass::Rank,
                Reason::BadArgument {
                    what: "a rank appears twice in the list",
                },
            ));
        }
        self.gather(ranks.len() as u32, |t, i| {
            t.proc_of(g, ranks[i as usize] as u32)
        })
    }

    /// `MPI_Group_excl`: `g` without the members at `ranks`.
    pub fn excl(&mut self, g: Group, ranks: &[i32]) -> Result<Group> {
        let size = g.size();
        for &r in ranks {
            if r < 0 || r as u32 >= size {
                return Err(rank_error(r as i64, size));
            }
        }
        let mut dup = false;
        for &r in ranks {
            let p = self.proc_of(g, r as u32);
            dup |= self.marked(p);
            let i = p.0 as usize;
            self.marks[i / 64] |= 1 << (i % 64);
        }
        let out = if dup {
            Err(Error::new(
                ErrorClass::Rank,
                Reason::BadArgument {
                    what: "a rank appears twice in the list",
                },
            ))
        } else {
            self.select(g, |t, p| !t.marked(p), Group::Empty, |_, _| false)
        };
        for &r in ranks {
            let i = self.proc_of(g, r as u32).0 as usize;
            self.marks[i / 64] &= !(1 << (i % 64));
        }
        out
    }

    /// The ranks that `MPI_Group_range_incl`'s triplets name, in order; checked.
    fn range_ranks(
        size: u32,
        triplets: &[[i32; 3]],
        mut each: impl FnMut(u32) -> Result<()>,
    ) -> Result<()> {
        for &[first, last, stride] in triplets {
            if stride == 0 {
                return Err(Error::bad_arg("a range has stride 0"));
            }
            for r in [first, last] {
                if r < 0 || r as u32 >= size {
                    return Err(rank_error(r as i64, size));
                }
            }
            if (stride > 0 && first > last) || (stride < 0 && first < last) {
                continue;
            }
            let mut r = first as i64;
            while (stride > 0 && r <= last as i64) || (stride < 0 && r >= last as i64) {
                each(r as u32)?;
                r += stride as i64;
            }
        }
        Ok(())
    }

    /// `MPI_Group_range_incl`.
    pub fn range_incl(&mut self, g: Group, triplets: &[[i32; 3]]) -> Result<Group> {
        let size = g.size();
        let mut n = 0u32;
        let mut dup = false;
        let r = Self::range_ranks(size, triplets, |r| {
            let p = self.proc_of(g, r).0 as usize;
            dup |= self.marks[p / 64] & (1 << (p % 64)) != 0;
            self.marks[p / 64] |= 1 << (p % 64);
            n += 1;
            Ok(())
        });
        self.clear_marks();
        r?;
        if dup {
            return Err(Error::new(
                ErrorClass::Rank,
                Reason::BadArgument {
                    what: "the ranges name a rank twice",
                },
            ));
        }
        if n == 0 {
            return Ok(Group::Empty);
        }
        let (id, at) = self.alloc(n)?;
        let mut k = at as usize;
        Self::range_ranks(size, triplets, |r| {
            self.store[k] = self.proc_of(g, r);
            k += 1;
            Ok(())
        })?;
        self.finish(id, at, n)
    }

    /// `MPI_Group_range_excl`.
    pub fn range_excl(&mut self, g: Group, triplets: &[[i32; 3]]) -> Result<Group> {
        let size = g.size();
        let mut dup = false;
        let r = Self::range_ranks(size, triplets, |r| {
            let p = self.proc_of(g, r).0 as usize;
            dup |= self.marks[p / 64] & (1 << (p % 64)) != 0;
            self.marks[p / 64] |= 1 << (p % 64);
            Ok(())
        });
        let out = match (r, dup) {
            (Err(e), _) => Err(e),
            (Ok(()), true) => Err(Error::new(
                ErrorClass::Rank,
                Reason::BadArgument {
                    what: "the ranges name a rank twice",
                },
            )),
            (Ok(()), false) => self.select(g, |t, p| !t.marked(p), Group::Empty, |_, _| false),
        };
        self.clear_marks();
        out
    }

    fn clear_marks(&mut self) {
        self.marks.iter_mut().for_each(|w| *w = 0);
    }

    /// `MPI_Group_union`: members of `a`, then members of `b` not in `a`.
    pub fn union(&mut self, a: Group, b: Group) -> Result<Group> {
        self.with_marks(a, |t| t.select(a, |_, _| true, b, |t, p| !t.marked(p)))
    }

    /// `MPI_Group_intersection`: members of `a` also in `b`, in `a`'s order.
    pub fn intersection(&mut self, a: Group, b: Group) -> Result<Group> {
        self.with_marks(b, |t| {
            t.select(a, |t, p| t.marked(p), Group::Empty, |_, _| false)
        })
    }

    /// `MPI_Group_difference`: members of `a` not in `b`, in `a`'s order.
    pub fn difference(&mut self, a: Group, b: Group) -> Result<Group> {
        self.with_marks(b, |t| {
            t.select(a, |t, p| !t.marked(p), Group::Empty, |_, _| false)
        })
    }

    /// `MPI_Group_compare`.
    pub fn compare(&mut self, a: Group, b: Group) -> Similarity {
        if a.size() != b.size() {
            return Similarity::Unequal;
        }
        if (0..a.size()).all(|r| self.proc_of(a, r) == self.proc_of(b, r)) {
            return Similarity::Ident;
        }
        let all = self.with_marks(a, |t| t.members(b).all(|p| t.marked(p)));
        if all {
            Similarity::Similar
        } else {
            Similarity::Unequal
        }
    }

    /// `MPI_Group_translate_ranks` for one rank: its rank in `b`, if a member.
    pub fn translate(&self, a: Group, rank: i32, b: Group) -> Result<Option<u32>> {
        if rank < 0 || rank as u32 >= a.size() {
            return Err(rank_error(rank as i64, a.size()));
        }
        Ok(self.rank_of(b, self.proc_of(a, rank as u32)))
    }

    /// A new group of `n` members, the `i`-th being `pick(self, i)`.
    pub fn gather(&mut self, n: u32, pick: impl Fn(&GroupTable, u32) -> ProcId) -> Result<Group> {
        if n == 0 {
            return Ok(Group::Empty);
        }
        let (id, at) = self.alloc(n)?;
        for i in 0..n {
            let p = pick(self, i);
            self.store[(at + i) as usize] = p;
        }
        self.finish(id, at, n)
    }

    fn finish(&mut self, id: GroupId, at: u32, n: u32) -> Result<Group> {
        let list = &self.store[at as usize..(at + n) as usize];
        let shape = if n == 1 {
            Some(Group::Single(list[0]))
        } else if n == self.world && list.iter().enumerate().all(|(i, p)| p.0 == i as u32) {
            Some(Group::World { size: n })
        } else {
            None
        };
        let members = match shape {
            Some(s) => {
                self.ranges.release(at, n);
                Members::Shape(s)
            }
            None => Members::Range { at, len: n },
        };
        self.entries[id.0 as usize] = Some(Entry { members, refs: 1 });
        Ok(Group::Listed { id, len: n })
    }

    /// Marks the members of `g` in `from..to` (processes of other jobs, whose slots are given
    /// back once nothing names them; see [`GroupTable::take_mark`]).
    pub fn mark_members(&mut self, g: Group, from: u32, to: u32) {
        if matches!(self.shape(g), Group::Empty | Group::World { .. }) {
            return;
        }
        for r in 0..g.size() {
            let p = self.proc_of(g, r).0;
            if (from..to).contains(&p) {
                self.marks[p as usize / 64] |= 1 << (p % 64);
            }
        }
    }

    /// Marks the members in `from..to` of every stored group (user handles among them).
    pub fn mark_stored(&mut self, from: u32, to: u32) {
        for i in 0..self.entries.len() {
            if let Some(e) = self.entries[i] {
                let g = match e.members {
                    Members::Shape(s) => s,
                    Members::Range { len, .. } => Group::Listed {
                        id: GroupId(i as u16),
                        len,
                    },
                };
                self.mark_members(g, from, to);
            }
        }
    }

    /// Whether [`GroupTable::mark_members`] marked `p`, clearing the mark: the marks are
    /// clear again once every marked process has been taken.
    pub fn take_mark(&mut self, p: ProcId) -> bool {
        let p = p.0 as usize;
        let bit = 1u64 << (p % 64);
        let marked = self.marks.get(p / 64).is_some_and(|w| w & bit != 0);
        if marked {
            self.marks[p / 64] &= !bit;
        }
        marked
    }

    /// Groups alive (for leak checks).
    pub fn count(&self) -> usize {
        self.entries.iter().filter(|e| e.is_some()).count()
    }
}

fn invalid() -> Error {
    Error::new(
        ErrorClass::Group,
        Reason::BadArgument {
            what: "not a valid group",
        },
    )
}

#[cfg(test)]
mod tests {
    extern crate std;

    use super::*;
    use crate::arena::tests::leak;

    fn table(world: u32) -> GroupTable {
        GroupTable::new(&mut Arena::new(leak(1 << 16)), 16, 256, world).unwrap()
    }

    fn procs(t: &GroupTable, g: Group) -> std::vec::Vec<u32> {
        t.members(g).map(|p| p.0).collect()
    }

    #[test]
    fn the_table_and_its_member_store_grow_past_their_initial_sizes() {
        let mut a = Arena::new(leak(1 << 16));
        a.set_account(crate::memory::tests::account(1 << 30));
        let mut t = GroupTable::new(&mut a, 1000, 1 << 20, 4096).unwrap();
        // 500 groups of 100 members: past 64 entries and 4096 member slots.
        let groups: std::vec::Vec<Group> = (0..500u32)
            .map(|g| {
                t.create(100, (0..100).map(|i| ProcId((g * 7 + i * 13) % 4096)))
                    .unwrap()
            })
            .collect();
        assert_eq!(t.count(), 500);
        for (g, grp) in groups.iter().enumerate() {
            let want: std::vec::Vec<u32> =
                (0..100).map(|i| (g as u32 * 7 + i * 13) % 4096).collect();
            assert_eq!(procs(&t, *grp), want, "group {g}");
        }
        for grp in groups {
            t.release(grp);
        }
        assert_eq!(t.count(), 0);
    }

    #[test]
    fn a_full_group_table_names_its_parameter() {
        let mut a = Arena::new(leak(1 << 16));
        a.set_account(crate::memory::tests::account(1 << 30));
        let mut t = GroupTable::new(&mut a, 70, 1 << 20, 64).unwrap();
        for g in 0..70u32 {
            t.create(2, [ProcId(g % 64), ProcId((g + 1) % 64)].into_iter())
                .unwrap();
        }
        let e = t.create(2, [ProcId(0), ProcId(1)].into_iter()).unwrap_err();
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "group_max",
                ..
            }
        ));
    }

    #[test]
    fn incl_excl_and_ranges_pick_members_in_order() {
        let mut t = table(8);
        let w = t.world();
        let g = t.incl(w, &[6, 1, 3]).unwrap();
        assert_eq!(procs(&t, g), [6, 1, 3]);
        assert_eq!(t.rank_of(g, ProcId(1)), Some(1));
        assert_eq!(t.rank_of(g, ProcId(2)), None);
        let e = t.excl(g, &[0]).unwrap();
        assert_eq!(procs(&t, e), [1, 3]);
        let r = t.range_incl(w, &[[7, 0, -3], [2, 2, 1]]).unwrap();
        assert_eq!(procs(&t, r), [7, 4, 1, 2]);
        let x = t.range_excl(w, &[[0, 7, 2]]).unwrap();
        assert_eq!(procs(&t, x), [1, 3, 5, 7]);
    }

    #[test]
    fn bad_rank_lists_are_errors() {
        let mut t = table(4);
        let w = t.world();
        assert!(t.incl(w, &[1, 1]).is_err(), "repeated rank");
        assert!(t.incl(w, &[4]).is_err(), "rank out of range");
        assert!(t.excl(w, &[-1]).is_err());
        assert!(
            t.range_incl(w, &[[0, 3, 1], [2, 2, 1]]).is_err(),
            "ranges overlap"
        );
        assert!(t.range_incl(w, &[[0, 3, 0]]).is_err(), "stride 0");
        assert_eq!(t.count(), 0, "failed operations keep nothing");
    }

    #[test]
    fn set_operations_follow_the_standard_order() {
        let mut t = table(6);
        let w = t.world();
        let a = t.incl(w, &[5, 0, 2]).unwrap();
        let b = t.incl(w, &[2, 3, 5, 1]).unwrap();
        let u = t.union(a, b).unwrap();
        assert_eq!(procs(&t, u), [5, 0, 2, 3, 1]);
        let i = t.intersection(a, b).unwrap();
        assert_eq!(procs(&t, i), [5, 2]);
        let d = t.difference(b, a).unwrap();
        assert_eq!(procs(&t, d), [3, 1]);
        let none = t.difference(a, a).unwrap();
        assert_eq!(none, Group::Empty);
        assert_eq!(t.compare(a, a), Similarity::Ident);
        let a2 = t.incl(w, &[0, 2, 5]).unwrap();
        assert_eq!(t.compare(a, a2), Similarity::Similar);
        assert_eq!(t.compare(a, b), Similarity::Unequal);
        assert_eq!(t.translate(a, 0, b).unwrap(), Some(2));
        assert_eq!(t.translate(a, 1, b).unwrap(), None);
    }

    #[test]
    fn common_shapes_need_no_member_slots_and_everything_is_released() {
        let mut t = table(4);
        let w = t.world();
        let all = t.incl(w, &[0, 1, 2, 3]).unwrap();
        assert_eq!(t.shape(all), Group::World { size: 4 });
        let one = t.incl(w, &[2]).unwrap();
        assert_eq!(t.for_comm(one), Group::Single(ProcId(2)));
        let listed = t.incl(w, &[3, 2]).unwrap();
        t.retain(listed);
        for g in [all, one, listed, listed] {
            t.release(g);
        }
        assert_eq!(t.count(), 0);
        // The whole store is free again: a group of every slot fits.
        let mut t = table(300);
        let w = t.world();
        let ranks: std::vec::Vec<i32> = (1..257).rev().collect();
        let big = t.incl(w, &ranks).unwrap();
        assert!(t.incl(w, &[1, 0]).is_err(), "store is full");
        t.release(big);
        assert!(t.incl(w, &[1, 0]).is_ok());
    }
}
