//! Making communicators: duplicates, subsets, splits, intercommunicators and their merge.
//!
//! A new communicator needs a context id free at every one of its members. The members OR their
//! bitmaps of used ids together and take the lowest id clear in the result ([`Engine::agree_cid`]),
//! so no central server is asked and ids freed anywhere become usable again. Disjoint
//! communicators made by one split share an id: no process belongs to two of them.
//!
//! The few collective steps construction needs (OR-reduce, gather, broadcast) run here over a
//! *member list* of a parent communicator rather than over a communicator, because
//! `MPI_Comm_create_group` and intercommunicator construction involve only part of a parent, or
//! the union of two groups. They use their own internal tags.

use super::{Comm, CommId, CommTable, ContextId};
use crate::arena::{Arena, Sizer};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::group::Group;
use crate::rte::ProcId;

/// Internal tags of construction (apart from those of the collectives).
const TAG_CID: i32 = -0x101;
const TAG_SPLIT: i32 = -0x102;
const TAG_INTER: i32 = -0x103;
/// `MPI_Comm_create_group` folds the user's tag into this range, so that concurrent calls on
/// overlapping members with different tags (as the standard requires them to use) do not meet.
const TAG_GROUP_BASE: i32 = i32::MIN;

/// Words of the context-id bitmap exchanged, plus one for "no room here".
const CID_WORDS: usize = (1 << 16) / 64 + 1;

/// `MPI_UNDEFINED` as a split color: the caller gets no communicator.
pub const UNDEFINED: i32 = -32766;

/// Per-process memory for construction: three ints per process of the job (a split's
/// (color, key, rank) triples; an intercommunicator's two process lists).
pub struct Scratch {
    ints: &'static mut [i32],
}

impl Scratch {
    /// Arena bytes for a job of `procs` processes.
    pub fn size(sizer: &mut Sizer, procs: u32) {
        sizer.slice::<i32>(3 * procs as usize);
    }

    /// Scratch for a job of `procs` processes.
    pub fn new(arena: &mut Arena, procs: u32) -> Result<Scratch> {
        Ok(Scratch {
            ints: arena.slice(3 * procs as usize, |_| 0)?,
        })
    }
}

/// Which ranks of a parent communicator take part in a construction step, in "virtual rank"
/// order: virtual rank `v` is member `(v + root) % n` of `group` (or of the parent).
#[derive(Clone, Copy)]
struct Members {
    comm: CommId,
    /// The members, or `None` for all of the parent in order.
    group: Option<Group>,
    /// Member with virtual rank 0.
    root: u32,
    /// Number of members.
    n: u32,
    /// My virtual rank.
    me: u32,
    tag: i32,
}

/// How the leaders of an intercommunicator's two sides reach each other: rank `peer` of `comm`
/// under `tag` (the user's tag on the peer communicator during `MPI_Intercomm_create`).
#[derive(Clone, Copy)]
struct Channel {
    comm: CommId,
    peer: u32,
    tag: i32,
}

/// What kind of communicator `MPI_Comm_split_type` makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitType {
    /// `MPI_COMM_TYPE_SHARED`: the processes sharing this node's memory.
    Shared,
}

impl Engine {
    /// Posts a receive on a leaders' channel (user tags are ordinary receives).
    fn post_recv(&mut self, conv: Unpacker, ch: Channel) -> Result<crate::pml::request::ReqId> {
        if ch.tag >= 0 {
            self.irecv(conv, ch.peer as i32, ch.tag, ch.comm, 0)
        } else {
            self.irecv_internal(conv, ch.peer, ch.tag, ch.comm)
        }
    }

    /// Sends on a leaders' channel.
    fn send_on(&mut self, conv: Packer, ch: Channel) -> Result<()> {
        if ch.tag >= 0 {
            self.send(
                conv,
                ch.peer as i32,
                ch.tag,
                ch.comm,
                crate::pml::request::SendMode::Standard,
            )
        } else {
            self.send_internal(conv, ch.peer, ch.tag, ch.comm)
        }
    }

    /// The parent rank of virtual rank `v`.
    fn member_rank(&self, m: &Members, v: u32) -> u32 {
        let i = (v + m.root) % m.n;
        match m.group {
            None => i,
            Some(g) => {
                let p = self.comms.groups.proc_of(g, i);
                let c = self.comms.get_any(m.comm).expect("parent is live");
                self.comms
                    .groups
                    .rank_of(c.peers(), p)
                    .expect("member of the parent")
            }
        }
    }

    /// ORs `words` over the members; every member gets the result (binomial reduce to member 0,
    /// binomial broadcast back).
    fn or_among(&mut self, m: &Members, words: &mut [u64]) -> Result<()> {
        let mut tmp = [0u64; CID_WORDS];
        let tmp = &mut tmp[..words.len()];
        let mut mask = 1;
        while mask < m.n {
            if m.me & mask != 0 {
                let to = self.member_rank(m, m.me - mask);
                // SAFETY: `words` is borrowed until the send completes.
                let conv = unsafe {
                    Packer::elements(words.as_ptr().cast(), words.len(), Datatype::UINT64_T)
                };
                self.send_internal(conv, to, m.tag, m.comm)?;
                break;
            }
            if m.me + mask < m.n {
                let from = self.member_rank(m, m.me + mask);
                // SAFETY: `tmp` is borrowed until the receive completes.
                let conv = unsafe {
                    Unpacker::elements(tmp.as_mut_ptr().cast(), tmp.len(), Datatype::UINT64_T)
                };
                self.recv_internal(conv, from, m.tag, m.comm)?;
                words.iter_mut().zip(tmp.iter()).for_each(|(w, t)| *w |= *t);
            }
            mask <<= 1;
        }
        // SAFETY: `words` holds `len` u64 and is borrowed for the call.
        unsafe {
            self.bcast_among(
                m,
                words.as_mut_ptr().cast(),
                words.len(),
                Datatype::UINT64_T,
            )
        }
    }

    /// Broadcasts `count` elements of predefined `ty` at `buf` from member 0 (binomial).
    ///
    /// # Safety
    /// `buf` holds `count` elements of `ty`, not otherwise accessed during the call.
    unsafe fn bcast_among(
        &mut self,
        m: &Members,
        buf: *mut u8,
        count: usize,
        ty: Datatype,
    ) -> Result<()> {
        let mut mask = 1;
        while mask < m.n {
            if m.me & mask != 0 {
                let from = self.member_rank(m, m.me - mask);
                // SAFETY: the caller's contract; the receive completes before this returns.
                let conv = unsafe { Unpacker::elements(buf, count, ty) };
                self.recv_internal(conv, from, m.tag, m.comm)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if m.me + mask < m.n && m.me & (mask * 2 - 1) == 0 {
                let to = self.member_rank(m, m.me + mask);
                // SAFETY: the caller's contract; the send completes before this returns.
                let conv = unsafe { Packer::elements(buf, count, ty) };
                self.send_internal(conv, to, m.tag, m.comm)?;
            }
            mask >>= 1;
        }
        Ok(())
    }

    /// A context id free at every member — and, when `inter` is given, at the members of an
    /// intercommunicator's other side, whose leader this side's leader reaches over the channel
    /// (`Some` at the leader); fails at all members alike when one has no room.
    fn agree_cid(&mut self, m: &Members, inter: Option<Option<Channel>>) -> Result<ContextId> {
        let nw = self.comms.used_cids().len();
        let mut words = [0u64; CID_WORDS];
        words[..nw].copy_from_slice(self.comms.used_cids());
        words[nw] = u64::from(!self.comms.has_room());
        self.or_among(m, &mut words[..nw + 1])?;
        if let Some(channel) = inter {
            // Leaders swap their side's result, then share it.
            if let Some(ch) = channel {
                let mut theirs = [0u64; CID_WORDS];
                self.exchange_words(ch, &words[..nw + 1], &mut theirs[..nw + 1])?;
                words
                    .iter_mut()
                    .zip(theirs.iter())
                    .for_each(|(w, t)| *w |= *t);
            }
            // SAFETY: `words` holds nw + 1 u64 and is borrowed for the call.
            unsafe { self.bcast_among(m, words.as_mut_ptr().cast(), nw + 1, Datatype::UINT64_T)? };
        }
        if words[nw] != 0 {
            return Err(Error::exhausted(
                "communicator table",
                self.comms.capacity(),
                super::COMM_MAX.name,
            ));
        }
        CommTable::lowest_free(&words[..nw]).ok_or(Error::exhausted(
            "context ids",
            (nw * 64) as u32,
            super::MAX_CIDS.name,
        ))
    }

    /// Sends `mine` to and receives `theirs` from the other leader.
    fn exchange_words(&mut self, ch: Channel, mine: &[u64], theirs: &mut [u64]) -> Result<()> {
        // SAFETY: `theirs` is borrowed until the receive completes.
        let conv = unsafe {
            Unpacker::elements(theirs.as_mut_ptr().cast(), theirs.len(), Datatype::UINT64_T)
        };
        let r = self.post_recv(conv, ch)?;
        // SAFETY: `mine` is borrowed until the send completes.
        let conv =
            unsafe { Packer::elements(mine.as_ptr().cast(), mine.len(), Datatype::UINT64_T) };
        self.send_on(conv, ch)?;
        self.wait(r).map(|_| ())
    }

    /// Installs a new communicator; takes over one reference on each group.
    fn install(&mut self, comm: Comm) -> Result<CommId> {
        let (group, remote) = (comm.group, comm.remote);
        match self.comms.insert(comm, None) {
            Ok(id) => {
                self.pml.comm_added(&self.comms, &self.types, id);
                Ok(id)
            }
            Err(e) => {
                self.comms.groups.release(group);
                if let Some(r) = remote {
                    self.comms.groups.release(r);
                }
                Err(e)
            }
        }
    }

    fn whole(&self, comm: CommId, tag: i32) -> Result<Members> {
        let c = self.check_comm(comm)?;
        Ok(Members {
            comm,
            group: None,
            root: 0,
            n: c.size(),
            me: c.rank,
            tag,
        })
    }

    /// Duplicates communicator `id` (`MPI_Comm_dup`, collective).
    pub fn comm_dup(&mut self, id: CommId) -> Result<CommId> {
        let parent = self.check_comm(id)?.clone();
        let cid = match parent.local_comm {
            None => self.agree_cid(&self.whole(id, TAG_CID)?, None)?,
            Some(local) => {
                let m = self.whole(local, TAG_CID)?;
                let ch = Channel {
                    comm: id,
                    peer: 0,
                    tag: TAG_INTER,
                };
                self.agree_cid(&m, Some((m.me == 0).then_some(ch)))?
            }
        };
        let group = self.comms.groups.for_comm(parent.group);
        let remote = parent.remote.map(|r| self.comms.groups.for_comm(r));
        if let Some(t) = parent.topo {
            self.comms.topos.retain(t);
        }
        let new = self.install(Comm {
            cid,
            group,
            remote,
            local_comm: None,
            hidden: false,
            freed: false,
            ..parent
        })?;
        if let Some(local) = parent.local_comm {
            self.attach_local_comm(new, local)?;
        }
        Ok(new)
    }

    /// The group of `comm` (`MPI_Comm_group`; the local group of an intercommunicator), with a
    /// reference for the caller.
    pub fn comm_group(&mut self, comm: CommId) -> Result<Group> {
        let g = self.check_comm(comm)?.group;
        self.comms.groups.handle_for(g)
    }

    /// The remote group of intercommunicator `comm`, with a reference for the caller.
    pub fn comm_remote_group(&mut self, comm: CommId) -> Result<Group> {
        let g = self.check_comm(comm)?.remote.ok_or(not_inter())?;
        self.comms.groups.handle_for(g)
    }

    /// `MPI_Comm_split`: members with the same `color` form a communicator, ranked by `key`
    /// (ties by rank in `comm`); `color` [`UNDEFINED`] gets none. Collective over `comm`.
    pub fn comm_split(&mut self, comm: CommId, color: i32, key: i32) -> Result<Option<CommId>> {
        if color < 0 && color != UNDEFINED {
            return Err(Error::bad_arg(
                "a split color must be non-negative or MPI_UNDEFINED",
            ));
        }
        let c = self.check_comm(comm)?;
        if c.is_inter() {
            return Err(Error::unsupported("MPI_Comm_split on an intercommunicator"));
        }
        let m = self.whole(comm, TAG_SPLIT)?;
        self.split_members(comm, &m, color, key)
    }

    /// Splits `comm` after every member's (color, key) is known to all.
    fn split_members(
        &mut self,
        comm: CommId,
        m: &Members,
        color: i32,
        key: i32,
    ) -> Result<Option<CommId>> {
        let n = m.n as usize;
        let me = 3 * m.me as usize;
        self.creation.ints[me..me + 3].copy_from_slice(&[color, key, m.me as i32]);
        self.allgather_triples(m)?;
        let cid = self.agree_cid(&Members { tag: TAG_CID, ..*m }, None)?;
        if color == UNDEFINED {
            return Ok(None);
        }
        let triples = self.creation.ints[..3 * n].as_chunks_mut::<3>().0;
        triples.sort_unstable_by_key(|e| (e[0] != color, e[1], e[2]));
        let len = triples.iter().take_while(|e| e[0] == color).count();
        let rank = triples[..len]
            .iter()
            .position(|e| e[2] as u32 == m.me)
            .expect("own entry") as u32;
        let parent = self.check_comm(comm)?.group;
        let eh = self.check_comm(comm)?.errhandler;
        let ints = &*self.creation.ints;
        let group = self.comms.groups.gather(len as u32, |t, i| {
            t.proc_of(parent, ints[3 * i as usize + 2] as u32)
        })?;
        self.install(Comm {
            cid,
            group,
            remote: None,
            local_comm: None,
            hidden: false,
            topo: None,
            rank,
            errhandler: eh,
            freed: false,
        })
        .map(Some)
    }

    /// Every member's triple at every member (gather to member 0, then broadcast).
    fn allgather_triples(&mut self, m: &Members) -> Result<()> {
        let n = m.n as usize;
        if m.me == 0 {
            for v in 1..m.n {
                let from = self.member_rank(m, v);
                let e = &mut self.creation.ints[3 * v as usize..3 * v as usize + 3];
                // SAFETY: the triple is borrowed until the receive completes.
                let conv = unsafe { Unpacker::elements(e.as_mut_ptr().cast(), 3, Datatype::INT) };
                self.recv_internal(conv, from, m.tag, m.comm)?;
            }
        } else {
            let to = self.member_rank(m, 0);
            let at = 3 * m.me as usize;
            let e: [i32; 3] = self.creation.ints[at..at + 3]
                .try_into()
                .expect("three ints");
            // SAFETY: `e` lives until the send completes.
            let conv = unsafe { Packer::elements(e.as_ptr().cast(), 3, Datatype::INT) };
            self.send_internal(conv, to, m.tag, m.comm)?;
        }
        let all = self.creation.ints[..3 * n].as_mut_ptr();
        // SAFETY: the first `3 n` ints are borrowed for the call.
        unsafe { self.bcast_among(m, all.cast(), 3 * n, Datatype::INT) }
    }

    /// `MPI_Comm_split_type`: the members sharing a node of the kind `how`, ranked by `key`.
    pub fn comm_split_type(
        &mut self,
        comm: CommId,
        how: Option<SplitType>,
        key: i32,
    ) -> Result<Option<CommId>> {
        let color = match how {
            None => UNDEFINED,
            Some(SplitType::Shared) => {
                let node = self.procs[self.me.0 as usize].node;
                (node & 0x7fff_ffff) as i32
            }
        };
        self.comm_split(comm, color, key)
    }

    /// `MPI_Comm_create`: a communicator over `group` (a subset of `comm`'s members; disjoint
    /// subsets may pass different groups); non-members get none. Collective over `comm`.
    pub fn comm_create(&mut self, comm: CommId, group: Group) -> Result<Option<CommId>> {
        let group = self.comms.groups.check(group)?;
        let c = self.check_comm(comm)?;
        if c.is_inter() {
            return Err(Error::unsupported(
                "MPI_Comm_create on an intercommunicator",
            ));
        }
        let parent = c.group;
        let me = self.me;
        let my_rank = self.comms.groups.rank_of(group, me);
        // Every member must belong to the parent.
        for p in self.comms.groups.members(group) {
            if self.comms.groups.rank_of(parent, p).is_none() {
                return Err(group_not_subset());
            }
        }
        // A split whose color names the group by its first process: disjoint groups differ.
        let color = match my_rank {
            Some(_) => self.comms.groups.proc_of(group, 0).0 as i32,
            None => UNDEFINED,
        };
        let key = my_rank.map_or(0, |r| r as i32);
        let m = self.whole(comm, TAG_SPLIT)?;
        self.split_members(comm, &m, color, key)
    }

    /// `MPI_Comm_create_group`: a communicator over `group` (a subset of `comm`), collective
    /// over the members of `group` only; `tag` separates concurrent calls.
    pub fn comm_create_group(&mut self, comm: CommId, group: Group, tag: i32) -> Result<CommId> {
        let group = self.comms.groups.check(group)?;
        let c = self.check_comm(comm)?;
        if c.is_inter() {
            return Err(Error::unsupported(
                "MPI_Comm_create_group on an intercommunicator",
            ));
        }
        if !(0..=crate::pml::request::TAG_UB).contains(&tag) {
            return Err(Error::new(
                ErrorClass::Tag,
                Reason::TagOutOfRange {
                    tag,
                    ub: crate::pml::request::TAG_UB,
                },
            ));
        }
        let parent = c.group;
        let eh = c.errhandler;
        let me = self.comms.groups.rank_of(group, self.me).ok_or(Error::new(
            ErrorClass::Group,
            Reason::BadArgument {
                what: "the calling process is not in the group",
            },
        ))?;
        for p in self.comms.groups.members(group) {
            if self.comms.groups.rank_of(parent, p).is_none() {
                return Err(group_not_subset());
            }
        }
        let m = Members {
            comm,
            group: Some(group),
            root: 0,
            n: group.size(),
            me,
            tag: TAG_GROUP_BASE + (tag & 0xffff),
        };
        let cid = self.agree_cid(&m, None)?;
        let g = self.comms.groups.for_comm(group);
        self.install(Comm {
            cid,
            group: g,
            remote: None,
            local_comm: None,
            hidden: false,
            topo: None,
            rank: me,
            errhandler: eh,
            freed: false,
        })
    }

    /// `MPI_Intercomm_create`: joins the group of `local` (led by its rank `local_leader`) with
    /// the group led by rank `remote_leader` of `peer` (which matters at the local leader only).
    /// The leaders swap their groups over `peer` with the user's `tag`, as the standard defines.
    pub fn intercomm_create(
        &mut self,
        local: CommId,
        local_leader: i32,
        peer: Option<CommId>,
        remote_leader: i32,
        tag: i32,
    ) -> Result<CommId> {
        let c = self.check_comm(local)?.clone();
        if c.is_inter() {
            return Err(not_intra());
        }
        let size = c.size();
        if local_leader < 0 || local_leader as u32 >= size {
            return Err(Error::new(
                ErrorClass::Rank,
                Reason::RankOutOfRange {
                    rank: local_leader,
                    size,
                },
            ));
        }
        let leader = local_leader as u32;
        let m = Members {
            comm: local,
            group: None,
            root: leader,
            n: size,
            me: (c.rank + size - leader) % size,
            tag: TAG_INTER,
        };
        let world = self.procs.len();
        // At the leader: own processes in ints[..size], the remote ones into ints[world..].
        let mut k = [0i32; 1];
        let mut channel = None;
        if m.me == 0 {
            let peer = peer.ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))?;
            let psize = self.check_comm(peer)?.peers().size();
            if remote_leader < 0 || remote_leader as u32 >= psize {
                return Err(Error::new(
                    ErrorClass::Rank,
                    Reason::RankOutOfRange {
                        rank: remote_leader,
                        size: psize,
                    },
                ));
            }
            let ch = Channel {
                comm: peer,
                peer: remote_leader as u32,
                tag,
            };
            self.swap_ints(ch, 0, &[size as i32], &mut k)?;
            if k[0] <= 0 || k[0] as usize > world {
                k[0] = -1;
            } else {
                for r in 0..size {
                    self.creation.ints[r as usize] = self.comms.groups.proc_of(c.group, r).0 as i32;
                }
                self.swap_ints(ch, size as usize, &[], &mut [])?;
            }
            channel = Some(ch);
        }
        // SAFETY: `k` is borrowed for the call.
        unsafe { self.bcast_among(&m, k.as_mut_ptr().cast(), 1, Datatype::INT)? };
        if k[0] <= 0 {
            return Err(Error::bad_arg("the remote group's size is not valid"));
        }
        let k = k[0] as u32;
        let list = self.creation.ints[world..world + k as usize].as_mut_ptr();
        // SAFETY: `k` ints of the scratch are borrowed for the call.
        unsafe { self.bcast_among(&m, list.cast(), k as usize, Datatype::INT)? };
        let remote_list = &self.creation.ints[world..world + k as usize];
        let valid = remote_list.iter().all(|&p| {
            p >= 0
                && (p as usize) < world
                && self
                    .comms
                    .groups
                    .rank_of(c.group, ProcId(p as u32))
                    .is_none()
        });
        if !valid {
            return Err(Error::new(
                ErrorClass::Group,
                Reason::BadArgument {
                    what: "the remote group names a process outside the job or of the local group",
                },
            ));
        }
        let ints = &*self.creation.ints;
        let remote = self
            .comms
            .groups
            .gather(k, |_, i| ProcId(ints[world + i as usize] as u32))?;
        let cid = match self.agree_cid(&Members { tag: TAG_CID, ..m }, Some(channel)) {
            Ok(cid) => cid,
            Err(e) => {
                self.comms.groups.release(remote);
                return Err(e);
            }
        };
        let group = self.comms.groups.for_comm(c.group);
        let inter = self.install(Comm {
            cid,
            group,
            remote: Some(remote),
            local_comm: None,
            hidden: false,
            topo: None,
            rank: c.rank,
            errhandler: c.errhandler,
            freed: false,
        })?;
        self.attach_local_comm(inter, local)?;
        Ok(inter)
    }

    /// Gives intercommunicator `inter` its hidden intracommunicator: a duplicate of `local`.
    /// Made after `inter` is installed, so that the two context ids differ.
    fn attach_local_comm(&mut self, inter: CommId, local: CommId) -> Result<()> {
        match self.comm_dup(local) {
            Ok(l) => {
                self.comms.get_mut(l)?.hidden = true;
                self.comms.get_mut(inter)?.local_comm = Some(l);
                Ok(())
            }
            Err(e) => {
                let _ = self.comm_free(inter);
                Err(e)
            }
        }
    }

    /// `MPI_Intercomm_merge`: an intracommunicator over both groups of `inter`, the side that
    /// passed `high` = false first (when both sides pass the same, the side whose leader is the
    /// lower process goes first).
    pub fn intercomm_merge(&mut self, inter: CommId, high: bool) -> Result<CommId> {
        let c = self.check_comm(inter)?.clone();
        let (Some(local), Some(remote)) = (c.local_comm, c.remote) else {
            return Err(not_inter());
        };
        let m = self.whole(local, TAG_INTER)?;
        let ch = Channel {
            comm: inter,
            peer: 0,
            tag: TAG_INTER,
        };
        let my_leader = self.comms.groups.proc_of(c.group, 0).0 as i32;
        let mut theirs = [0i32; 2];
        if m.me == 0 {
            self.swap_ints(ch, 0, &[high as i32, my_leader], &mut theirs)?;
        }
        // SAFETY: `theirs` is borrowed for the call.
        unsafe { self.bcast_among(&m, theirs.as_mut_ptr().cast(), 2, Datatype::INT)? };
        let me_first = if high != (theirs[0] != 0) {
            !high
        } else {
            my_leader < theirs[1]
        };
        let cid = self.agree_cid(
            &Members { tag: TAG_CID, ..m },
            Some((m.me == 0).then_some(ch)),
        )?;
        let (a, b) = if me_first {
            (c.group, remote)
        } else {
            (remote, c.group)
        };
        let n = a.size() + b.size();
        let group = self.comms.groups.gather(n, |t, i| {
            if i < a.size() {
                t.proc_of(a, i)
            } else {
                t.proc_of(b, i - a.size())
            }
        })?;
        let rank = if me_first {
            c.rank
        } else {
            remote.size() + c.rank
        };
        self.install(Comm {
            cid,
            group,
            remote: None,
            local_comm: None,
            hidden: false,
            topo: None,
            rank,
            errhandler: c.errhandler,
            freed: false,
        })
    }

    /// With the other leader: swaps `mine` for `theirs` when `list` is 0, else sends the first
    /// `list` ints of the scratch and receives the other side's list after the job's size.
    fn swap_ints(
        &mut self,
        ch: Channel,
        list: usize,
        mine: &[i32],
        theirs: &mut [i32],
    ) -> Result<()> {
        let world = self.procs.len();
        let r = if list == 0 {
            // SAFETY: `theirs` is borrowed until the receive completes.
            let conv = unsafe {
                Unpacker::elements(theirs.as_mut_ptr().cast(), theirs.len(), Datatype::INT)
            };
            let r = self.post_recv(conv, ch)?;
            // SAFETY: `mine` is borrowed until the send completes.
            let conv = unsafe { Packer::elements(mine.as_ptr().cast(), mine.len(), Datatype::INT) };
            self.send_on(conv, ch)?;
            r
        } else {
            let at = self.creation.ints[world..].as_mut_ptr();
            // SAFETY: the scratch after `world` is borrowed until the receive completes; the
            // sender's count is at most `world` (checked by the size swap).
            let conv = unsafe { Unpacker::elements(at.cast(), world, Datatype::INT) };
            let r = self.post_recv(conv, ch)?;
            let at = self.creation.ints.as_ptr();
            // SAFETY: the first `list` ints are borrowed until the send completes.
            let conv = unsafe { Packer::elements(at.cast(), list, Datatype::INT) };
            self.send_on(conv, ch)?;
            r
        };
        let status = self.wait(r)?;
        match status.error {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

fn not_inter() -> Error {
    Error::new(
        ErrorClass::Comm,
        Reason::BadArgument {
            what: "not an intercommunicator",
        },
    )
}

fn not_intra() -> Error {
    Error::new(
        ErrorClass::Comm,
        Reason::BadArgument {
            what: "an intracommunicator is required",
        },
    )
}

fn group_not_subset() -> Error {
    Error::new(
        ErrorClass::Group,
        Reason::BadArgument {
            what: "the group is not a subset of the communicator's group",
        },
    )
}
