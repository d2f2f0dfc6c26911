//! Point-to-point communication as a value: the PML, the BML under it, and the communicators
//! and datatypes every message refers to. The MPI layer checks its arguments here and starts
//! operations; collectives, communicator construction and topologies borrow it to move their
//! own messages.
//!
//! A send takes a checked [`Dest`] and its data either as the user's elements of a predefined
//! contiguous type ([`Elements`], which the common path sends without building a convertor) or
//! as a convertor ([`Packer`]), both through [`SendData`]; a receive takes a checked
//! [`RecvSel`] and a [`RecvData`]. `MPI_Send` of a small message over ob1 runs
//! `PMPI_Send` → [`P2p::send`] → [`Ob1::send`] → `send_head` → [`Btl::reserve`].
//!
//! [`Ob1::send`]: crate::pml::Ob1::send
//! [`Btl::reserve`]: crate::btl::Btl::reserve

use crate::arch::Arch;
use crate::bml::Bml;
use crate::btl::PeerInfo;
use crate::comm::{Comm, CommHints, CommId, CommTable, Peers};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::repr::Repr;
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::mtl::MtlSelector;
use crate::pml::cm::WaitRound;
use crate::pml::request::{
    Dest, RecvSel, ReqId, SendMode, Source, Status, TagSel, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB,
};
use crate::pml::{Incoming, MsgId, Pml};
use crate::rte::ProcId;

/// A message's data as the user's elements of a predefined contiguous type: no convertor is
/// built unless the path needs one.
#[derive(Clone, Copy)]
pub struct Elements {
    ptr: *const u8,
    count: usize,
    dt: Datatype,
}

impl Elements {
    /// `count` elements of the predefined contiguous type `dt` at `ptr`.
    ///
    /// # Safety
    /// `dt` is contiguous, `count * dt.size()` fits the address space, and the bytes stay valid
    /// and unchanged (for a receive: writable and otherwise unused) until the operation that
    /// takes them completes.
    #[inline(always)]
    pub unsafe fn new(ptr: *const u8, count: usize, dt: Datatype) -> Elements {
        Elements { ptr, count, dt }
    }

    /// The bytes.
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        let len = self.count * self.dt.size();
        if len == 0 {
            &[]
        } else {
            // SAFETY: `new`'s contract.
            unsafe { core::slice::from_raw_parts(self.ptr, len) }
        }
    }
}

/// What a send takes: [`Elements`] or a [`Packer`].
pub trait SendData {
    /// The message as bytes in user memory, when it is that.
    fn bytes(&self) -> Option<&[u8]>;
    /// The message as a convertor.
    fn packer(self) -> Packer;
}

impl SendData for Elements {
    #[inline(always)]
    fn bytes(&self) -> Option<&[u8]> {
        Some(Elements::bytes(self))
    }
    #[inline(always)]
    fn packer(self) -> Packer {
        // SAFETY: `Elements::new`'s contract is `Packer::elements`'s.
        unsafe { Packer::elements(self.ptr, self.count, self.dt) }
    }
}

impl SendData for Packer {
    #[inline(always)]
    fn bytes(&self) -> Option<&[u8]> {
        None
    }
    #[inline(always)]
    fn packer(self) -> Packer {
        self
    }
}

/// Bytes in user memory as they stand, and how to build their convertor when the path needs
/// one (for callers that keep their own description of the bytes).
pub struct Bytes<'a, F: FnOnce() -> Packer> {
    /// The message.
    pub data: &'a [u8],
    /// Builds the convertor over the same bytes.
    pub make: F,
}

impl<F: FnOnce() -> Packer> SendData for Bytes<'_, F> {
    #[inline(always)]
    fn bytes(&self) -> Option<&[u8]> {
        Some(self.data)
    }
    #[inline(always)]
    fn packer(self) -> Packer {
        (self.make)()
    }
}

/// A receive's convertor built by a closure, in the request's slot.
pub struct Make<F: FnOnce() -> Unpacker>(pub F);

impl<F: FnOnce() -> Unpacker> RecvData for Make<F> {
    #[inline(always)]
    fn unpacker(self) -> Unpacker {
        (self.0)()
    }
}

/// What a receive takes: [`Elements`] (of writable memory) or an [`Unpacker`].
pub trait RecvData {
    /// The receive's convertor.
    fn unpacker(self) -> Unpacker;
}

impl RecvData for Elements {
    #[inline(always)]
    fn unpacker(self) -> Unpacker {
        // SAFETY: `Elements::new`'s contract (writable memory, for a receive) is
        // `Unpacker::elements`'s.
        unsafe { Unpacker::elements(self.ptr.cast_mut(), self.count, self.dt) }
    }
}

impl RecvData for Unpacker {
    #[inline(always)]
    fn unpacker(self) -> Unpacker {
        self
    }
}

/// A receive under way: a request, or the PML's one blocking receive (`MPI_Recv`'s, when free).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Posted {
    /// A pooled request.
    Req(ReqId),
    /// The blocking receive ([`P2p::recv_round`] waits for it).
    Blocking,
}

/// What one round of waiting for a receive found. No status: [`P2p::recv_finished`] gives it,
/// once (a status is ten words, and carrying it through every round's result cost more than
/// building it where the waiter returns it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvRound {
    /// It finished.
    Done,
    /// Not yet; this much else moved.
    Moved(usize),
}

/// Point-to-point communication.
pub struct P2p {
    /// The PML (ob1 or cm).
    pub pml: Pml,
    /// Per-peer routes over the BTLs.
    pub bml: Bml,
    /// The communicators.
    pub comms: CommTable,
    /// The datatypes.
    pub types: TypeTable,
    /// What is known of every process: the job's (`..world`), then the slots of processes of
    /// other jobs, filled as they join ([`P2p::add_procs`]).
    pub procs: &'static mut [PeerInfo],
    /// Processes in `MPI_COMM_WORLD`.
    pub world: u32,
    /// Slots of `procs` in use: the world and the processes that joined since.
    pub(crate) joined: u32,
    /// This process.
    pub me: ProcId,
    /// Every process published this process's architecture: no peer needs a check (the
    /// common job, whose receives skip looking the sender up).
    uniform_arch: bool,
    /// `MPI_Finalize` has run.
    pub(crate) finalized: bool,
}

/// The node number of a process slot no process holds: one kept for processes of other jobs
/// that is not taken, or was given back.
pub(crate) const FREE_SLOT: u32 = u32::MAX;

fn bad_tag(tag: i32) -> Error {
    Error::new(ErrorClass::Tag, Reason::TagOutOfRange { tag, ub: TAG_UB })
}

impl P2p {
    /// Point-to-point over `pml` and `bml` for the job `procs`.
    pub fn new(
        pml: Pml,
        bml: Bml,
        comms: CommTable,
        types: TypeTable,
        procs: &'static mut [PeerInfo],
        world: u32,
        me: ProcId,
    ) -> P2p {
        let world = world.min(procs.len() as u32);
        let uniform_arch = procs[..world as usize]
            .iter()
            .all(|p| p.arch.is_some_and(|a| a.same_as(Arch::LOCAL)));
        let mut p = P2p {
            pml,
            bml,
            comms,
            types,
            procs,
            world,
            joined: world,
            me,
            uniform_arch,
            finalized: false,
        };
        for i in 0..world as usize {
            let info = p.procs[i];
            if let Some(repr) = info.arch.and_then(Repr::of) {
                p.pml.set_repr(info.proc, repr);
            }
        }
        p
    }

    /// Takes note of the architectures of the processes of another job in slots
    /// `first..end`.
    pub(crate) fn joined_procs(&mut self, first: u32, end: u32) {
        for slot in first..end {
            let info = self.procs[slot as usize];
            if let Some(repr) = info.arch.and_then(Repr::of) {
                self.pml.set_repr(info.proc, repr);
            }
            if !info.arch.is_some_and(|a| a.same_as(Arch::LOCAL)) {
                self.uniform_arch = false;
            }
        }
    }

    /// Gives back the slots of processes of other jobs that no communicator or stored group
    /// names any more (after `MPI_Comm_disconnect`, or the free of the last communicator
    /// reaching them): their routes go, the modules close their connections, and the slots
    /// serve the next processes to join ([`P2p::free_slots`]).
    pub(crate) fn release_unreached(&mut self) {
        if self.joined == self.world {
            return;
        }
        let (procs, bml) = (&mut *self.procs, &mut self.bml);
        self.comms.unreached(self.world, self.joined, |p| {
            let info = &mut procs[p.0 as usize];
            if info.node != FREE_SLOT {
                bml.del_later(p);
                *info = PeerInfo {
                    proc: p,
                    arch: None,
                    node: FREE_SLOT,
                };
            }
        });
        let world = self.world as usize;
        self.joined = self.procs[world..self.joined as usize]
            .iter()
            .rposition(|i| i.node != FREE_SLOT)
            .map_or(self.world, |i| (world + i + 1) as u32);
    }

    /// The slots the next processes of another job take: the start and length of the longest
    /// run of free slots (the first such run), since a side's processes take consecutive ones.
    pub fn free_slots(&self) -> (u32, u32) {
        let (mut best, mut run) = ((self.world, 0), (self.world, 0));
        for (i, info) in self.procs.iter().enumerate().skip(self.world as usize) {
            if info.node == FREE_SLOT {
                if run.1 == 0 {
                    run.0 = i as u32;
                }
                run.1 += 1;
                if run.1 > best.1 {
                    best = run;
                }
            } else {
                run.1 = 0;
            }
        }
        best
    }

    /// Whether the slots `first..end` exist and are all free.
    pub(crate) fn slots_free(&self, first: u32, end: u32) -> bool {
        first >= self.world
            && self
                .procs
                .get(first as usize..end as usize)
                .is_some_and(|s| s.iter().all(|i| i.node == FREE_SLOT))
    }

    /// Makes sure a new communicator has room: a free slot in the communicator table and its
    /// point-to-point state, growing both within `mpi_memory_max` (the table up to
    /// `comm_max`). Running out is an error naming the parameter to raise.
    pub fn comm_room(&mut self) -> Result<()> {
        self.comms.make_room()?;
        self.pml.comm_room(self.comms.capacity())
    }

    /// The datatypes.
    #[inline(always)]
    pub fn types(&self) -> &TypeTable {
        &self.types
    }

    // ---- checks -------------------------------------------------------------------------------

    /// Communicator `comm`, if it is live (and MPI is).
    #[inline(always)]
    pub fn comm(&self, comm: CommId) -> Result<&Comm> {
        if self.finalized {
            return Err(Error::new(ErrorClass::Other, Reason::NotInitialized));
        }
        self.comms.get(comm)
    }

    /// [`P2p::comm`] with the communicator's [`Peers`].
    #[inline(always)]
    fn comm_with_peers(&self, comm: CommId) -> Result<(&Comm, Peers)> {
        if self.finalized {
            return Err(Error::new(ErrorClass::Other, Reason::NotInitialized));
        }
        self.comms.get_with_peers(comm)
    }

    /// Checks a send's destination rank and tag: `None` for `MPI_PROC_NULL`. The one look at
    /// the communicator reads what a message to the rank carries.
    #[inline(always)]
    pub fn check_send(&self, comm: CommId, dest: i32, tag: i32) -> Result<Option<Dest>> {
        if !(0..=TAG_UB).contains(&tag) {
            return Err(bad_tag(tag));
        }
        let (c, peers) = self.comm_with_peers(comm)?;
        if dest == PROC_NULL {
            return Ok(None);
        }
        let size = peers.size;
        if dest < 0 || dest as u32 >= size {
            return Err(Error::new(
                ErrorClass::Rank,
                Reason::RankOutOfRange { rank: dest, size },
            ));
        }
        let proc = self.comms.peer_proc_of(c, peers, dest as u32);
        if !self.uniform_arch {
            self.check_arch(proc)?;
        }
        Ok(Some(Dest {
            comm,
            rank: dest as u32,
            proc,
            ctx: c.cid.0,
            me: c.rank,
        }))
    }

    /// Sets the info assertions of communicator `comm` (live or still being made), and the
    /// matching queues up for them.
    pub fn set_hints(&mut self, comm: CommId, hints: CommHints) -> Result<()> {
        self.comms.set_hints(comm, hints)?;
        // A communicator still being made takes its hints in when it is added.
        if !self.comms.is_reserved(comm) {
            if let Pml::Ob1(ob1) = &mut self.pml {
                ob1.hints_changed(&self.comms, comm);
            }
        }
        Ok(())
    }

    /// Checks a receive's source and tag: `None` for `MPI_PROC_NULL`; a wildcard the
    /// communicator's assertions rule out is an error.
    #[inline(always)]
    pub fn check_recv(&self, comm: CommId, src: i32, tag: i32) -> Result<Option<RecvSel>> {
        let tag = match tag {
            ANY_TAG => TagSel::Any,
            t if (0..=TAG_UB).contains(&t) => TagSel::Tag(t),
            t => return Err(bad_tag(t)),
        };
        let (c, peers) = self.comm_with_peers(comm)?;
        if !c.hints.is_empty() {
            check_assertions(c.hints, src, tag == TagSel::Any)?;
        }
        let src = match src {
            PROC_NULL => return Ok(None),
            ANY_SOURCE => Source::Any,
            s if s >= 0 && (s as u32) < peers.size => {
                if !self.uniform_arch {
                    self.check_arch(self.comms.peer_proc_of(c, peers, s as u32))?;
                }
                Source::Rank(s as u32)
            }
            s => {
                return Err(Error::new(
                    ErrorClass::Rank,
                    Reason::RankOutOfRange {
                        rank: s,
                        size: peers.size,
                    },
                ))
            }
        };
        Ok(Some(RecvSel {
            comm,
            ctx: c.cid.0,
            src,
            tag,
        }))
    }

    /// The destination of a library-internal message to rank `rank` of `comm` (a collective's,
    /// a construction's: ranks the library computed itself).
    #[inline]
    pub fn dest(&self, comm: CommId, rank: u32) -> Result<Dest> {
        let c = self.comms.get_in_use(comm)?;
        Ok(Dest {
            comm,
            rank,
            proc: self.comms.peer_proc(c, rank),
            ctx: c.cid.0,
            me: c.rank,
        })
    }

    /// The selector of a library-internal receive from `src` with `tag` on `comm`.
    #[inline]
    pub fn sel(&self, comm: CommId, src: Source, tag: i32) -> Result<RecvSel> {
        let c = self.comms.get_in_use(comm)?;
        Ok(RecvSel {
            comm,
            ctx: c.cid.0,
            src,
            tag: TagSel::Tag(tag),
        })
    }

    /// A peer of another architecture is served by converting its data (a `long double` in a
    /// format that cannot be converted is an error of the receive that meets it); one whose
    /// descriptor is missing or undecodable gets a clear error at its first message.
    #[inline(always)]
    fn check_arch(&self, proc: ProcId) -> Result<()> {
        if self.procs[proc.0 as usize]
            .arch
            .is_some_and(|a| a.same_as(Arch::LOCAL))
        {
            return Ok(());
        }
        self.check_other_arch(proc)
    }

    /// [`P2p::check_arch`] for a peer not like this process (out of line: rare).
    #[inline(never)]
    fn check_other_arch(&self, proc: ProcId) -> Result<()> {
        match self.procs[proc.0 as usize].arch.and_then(Repr::of) {
            None => Err(Error::unsupported(
                "communication with a process whose architecture descriptor is missing or unknown",
            )),
            Some(_) => Ok(()),
        }
    }

    /// Whether every member of `comm` stores data as this process does (then `MPI_Pack` may use
    /// the native form; otherwise it packs `external32`, which every member reads).
    pub fn comm_homogeneous(&self, comm: CommId) -> Result<bool> {
        let c = self.comm(comm)?;
        Ok([Some(c.group), c.remote].into_iter().flatten().all(|g| {
            self.comms.groups.members(g).all(|p| {
                self.procs[p.0 as usize]
                    .arch
                    .is_some_and(|a| a.same_as(Arch::LOCAL))
            })
        }))
    }

    // ---- operations ---------------------------------------------------------------------------

    /// Sends `data` to `d`: at once when the path can (an eager message with room in its
    /// route, a short message the MTL copies), `None` then; else through a request of `scope`,
    /// returned. Synchronous sends always take a request.
    #[inline(always)]
    pub fn send(
        &mut self,
        d: &Dest,
        tag: i32,
        data: impl SendData,
        mode: SendMode,
        scope: u32,
    ) -> Result<Option<ReqId>> {
        let P2p {
            pml, bml, types, ..
        } = self;
        match pml {
            Pml::Ob1(ob1) => {
                let mut conv = data.packer();
                if mode != SendMode::Synchronous && ob1.send(bml, types, d, tag, &mut conv)? {
                    return Ok(None);
                }
                ob1.isend(bml, types, d, tag, conv, mode, scope).map(Some)
            }
            Pml::Cm(cm) => {
                let conv = match data.bytes() {
                    Some(bytes) if mode != SendMode::Synchronous => {
                        if cm.send_bytes(types, d, tag, bytes)? {
                            return Ok(None);
                        }
                        data.packer()
                    }
                    _ => {
                        let conv = data.packer();
                        if mode != SendMode::Synchronous && cm.send(types, d, tag, &conv)? {
                            return Ok(None);
                        }
                        conv
                    }
                };
                cm.isend(types, d, tag, conv, mode, scope).map(Some)
            }
        }
    }

    /// [`P2p::send`] for `MPI_Isend` and its kind: always a request (a complete one when the
    /// message went at once).
    #[inline(always)]
    pub fn isend(
        &mut self,
        d: &Dest,
        tag: i32,
        data: impl SendData,
        mode: SendMode,
        scope: u32,
    ) -> Result<ReqId> {
        match self.send(d, tag, data, mode, scope)? {
            Some(id) => Ok(id),
            None => self.pml.requests_mut().completed(Status::EMPTY, scope),
        }
    }

    /// Posts a receive of what `s` accepts into `data` (built in the request's slot).
    #[inline(always)]
    pub fn irecv(&mut self, s: &RecvSel, data: impl RecvData, scope: u32) -> Result<ReqId> {
        let P2p { pml, types, .. } = self;
        match pml {
            Pml::Ob1(ob1) => ob1.irecv(types, || data.unpacker(), s, scope),
            Pml::Cm(cm) => cm.irecv(types, || data.unpacker(), s.comm, mtl_sel(s), scope),
        }
    }

    /// Posts a receive that the caller waits for at once (`MPI_Recv`): the PML's blocking
    /// receive when it is free (no pooled request; on ob1 also only when nothing is queued on
    /// the communicator), else a request.
    #[inline(always)]
    pub fn recv(&mut self, s: &RecvSel, data: impl RecvData) -> Result<Posted> {
        match &mut self.pml {
            Pml::Cm(cm) => {
                if cm.blocking_free() {
                    cm.recv_post(&self.types, || data.unpacker(), mtl_sel(s))?;
                    return Ok(Posted::Blocking);
                }
            }
            Pml::Ob1(ob1) => {
                if ob1.recv_free(&self.comms, s.comm, s.src, s.tag)? {
                    ob1.recv_post(|| data.unpacker(), s.comm, s.src, s.tag);
                    return Ok(Posted::Blocking);
                }
            }
        }
        self.irecv(s, data, 0).map(Posted::Req)
    }

    /// One round of waiting for the receive `r` without the rest of progress: the MTL's round
    /// for cm's blocking receive, point-to-point progress for ob1's, a look at a request. `Moved(0)` when nothing happened; after
    /// `Done`, [`P2p::recv_finished`] gives the status.
    #[inline(always)]
    pub fn recv_round(&mut self, r: Posted) -> Result<RecvRound> {
        match (r, &mut self.pml) {
            (Posted::Blocking, Pml::Cm(cm)) => Ok(match cm.wait_round(&self.types) {
                WaitRound::Done => RecvRound::Done,
                WaitRound::Moved(n) => RecvRound::Moved(n),
            }),
            (Posted::Req(id), pml) => Ok(match pml.requests().is_complete(id)? {
                true => RecvRound::Done,
                false => RecvRound::Moved(0),
            }),
            (Posted::Blocking, Pml::Ob1(ob1)) => Ok(match ob1.recv_done() {
                true => RecvRound::Done,
                false => {
                    let n = self.progress();
                    match &self.pml {
                        Pml::Ob1(ob1) if ob1.recv_done() => RecvRound::Done,
                        _ => RecvRound::Moved(n),
                    }
                }
            }),
        }
    }

    /// The receive `r`'s status if it has finished (after a whole progress round, or a
    /// [`P2p::recv_round`] that said `Done`); a finished receive is then forgotten.
    #[inline]
    pub fn recv_finished(&mut self, r: Posted) -> Result<Option<Status>> {
        self.recv_finished_with(r, |st| *st)
    }

    /// [`P2p::recv_finished`] handing the status to `f` where it lies; `f`'s result.
    #[inline(always)]
    pub fn recv_finished_with<R>(
        &mut self,
        r: Posted,
        f: impl FnOnce(&Status) -> R,
    ) -> Result<Option<R>> {
        match (r, &mut self.pml) {
            (Posted::Blocking, Pml::Cm(cm)) => {
                Ok(cm.recv_finished().then(|| f(&cm.recv_status(&self.types))))
            }
            (Posted::Req(id), pml) => pml.requests_mut().test_with(id, f),
            (Posted::Blocking, Pml::Ob1(ob1)) => ob1.recv_finished_with(f),
        }
    }

    /// The status of the first message `s` accepts, without receiving it (`MPI_Iprobe`).
    pub fn iprobe(&mut self, s: &RecvSel) -> Result<Option<Status>> {
        match &mut self.pml {
            Pml::Ob1(ob1) => ob1.iprobe(&self.comms, s),
            Pml::Cm(cm) => cm.iprobe(mtl_sel(s)),
        }
    }

    /// Takes the first message `s` accepts for [`P2p::imrecv`] (`MPI_Improbe`).
    pub fn improbe(&mut self, s: &RecvSel) -> Result<Option<(MsgId, Status)>> {
        match &mut self.pml {
            Pml::Ob1(ob1) => ob1.improbe(&self.comms, s),
            Pml::Cm(cm) => cm.improbe(s.comm, mtl_sel(s)),
        }
    }

    /// Receives a message a matched probe took (`MPI_Imrecv`).
    pub fn imrecv(&mut self, msg: MsgId, data: impl RecvData, scope: u32) -> Result<ReqId> {
        match &mut self.pml {
            Pml::Ob1(ob1) => ob1.imrecv(&self.comms, &self.types, data.unpacker(), msg, scope),
            Pml::Cm(cm) => cm.imrecv(&self.types, data.unpacker(), msg, scope),
        }
    }

    /// Moves messages: every BTL's progress, ob1's pending protocol work or the MTL's progress.
    /// Returns how much happened. Built into the wait loops (each round's call cost a tenth of
    /// an empty round).
    #[inline(always)]
    pub fn progress(&mut self) -> usize {
        match &mut self.pml {
            Pml::Ob1(ob1) => {
                let n = self.bml.progress(&mut Incoming {
                    pml: ob1,
                    comms: &self.comms,
                    types: &self.types,
                });
                n + ob1.progress_work(&mut self.bml, &self.types)
            }
            Pml::Cm(cm) => cm.progress(&self.types),
        }
    }
}

/// The MTL's selector of a checked receive.
#[inline(always)]
fn mtl_sel(s: &RecvSel) -> MtlSelector {
    MtlSelector {
        ctx: s.ctx,
        src: s.src,
        tag: s.tag,
    }
}

/// Refuses a wildcard that an assertion of the communicator rules out (MPI-4 §7.4.4 makes such
/// a receive erroneous; the matching path relies on the assertion).
#[cold]
fn check_assertions(hints: CommHints, src: i32, any_tag: bool) -> Result<()> {
    if src == ANY_SOURCE && hints.contains(CommHints::NO_ANY_SOURCE) {
        return Err(Error::new(
            ErrorClass::Rank,
            Reason::BadArgument {
                what: "MPI_ANY_SOURCE used on a communicator with mpi_assert_no_any_source=true",
            },
        ));
    }
    if any_tag && hints.contains(CommHints::NO_ANY_TAG) {
        return Err(Error::new(
            ErrorClass::Tag,
            Reason::BadArgument {
                what: "MPI_ANY_TAG used on a communicator with mpi_assert_no_any_tag=true",
            },
        ));
    }
    Ok(())
}
