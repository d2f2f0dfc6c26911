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

use super::{Comm, CommId, CommTable, ContextId, ErrHandler, Levels};
use crate::arena::{Arena, Sizer};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::group::Group;
use crate::p2p::P2p;
use crate::pml::request::{ReqId, Status};
use crate::rte::ProcId;
use crate::shared::Inside;
use core::ptr::NonNull;

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

/// `MPI_Intercomm_create_from_groups` folds its string tag into this range (apart from
/// `MPI_Comm_create_group`'s), for the local group's construction and the leaders' exchange.
const TAG_FROM_GROUPS_BASE: i32 = i32::MIN + 0x1_0000;

/// `MPI_Comm_create_from_group` folds its string tag into this range (apart from the two above).
const TAG_FROM_GROUP_BASE: i32 = i32::MIN + 0x2_0000;

/// Per-process memory for construction: three ints per process of the job (a split's
/// (color, key, rank) triples; an intercommunicator's two process lists), the `MPI_Comm_idup`s
/// in flight, and the state of the blocking context-id agreements under way.
pub struct Scratch {
    ints: &'static mut [i32],
    /// A construction (another thread's, under `MPI_THREAD_MULTIPLE`) is using `ints`.
    ints_busy: bool,
    /// Non-blocking duplications in flight, in segments that never move (their buffers are
    /// in flight in allreduces): the first of [`IDUPS_INITIAL`] slots, each further one as
    /// large as all before it ([`crate::pool::locate`]).
    idups: [&'static mut [Option<Idup>]; IDUP_SEGMENTS],
    /// Segments held.
    idup_segs: usize,
    /// Slots in them.
    idup_cap: u32,
    /// How many slots are in use.
    idups_active: u32,
    /// Where further segments come from (the engine's memory account).
    // Reached only from the C API.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    account: Option<&'static crate::memory::Memory>,
    /// The blocking agreement that owns this process's context-id mask for its current round
    /// (see [`agree_cid`]), by its key.
    owner: Option<u64>,
    /// The keys of the blocking agreements under way here (several only when threads construct
    /// communicators at once).
    agreeing: heapless::Vec<u64, MAX_AGREEING>,
}

/// Most blocking context-id agreements under way at once in one process (one per thread that
/// constructs a communicator at that moment).
const MAX_AGREEING: usize = 64;

impl Scratch {
    /// Arena bytes for a job of `procs` processes.
    pub fn size(sizer: &mut Sizer, procs: u32) {
        sizer
            .slice::<i32>(3 * procs as usize)
            .slice::<Option<Idup>>(IDUPS_INITIAL as usize);
    }

    /// Scratch for a job of `procs` processes.
    pub fn new(arena: &mut Arena, procs: u32) -> Result<Scratch> {
        Ok(Scratch {
            ints: arena.slice(3 * procs as usize, |_| 0)?,
            ints_busy: false,
            idups: {
                let mut segs: [&'static mut [Option<Idup>]; IDUP_SEGMENTS] =
                    core::array::from_fn(|_| <&mut [Option<Idup>]>::default());
                segs[0] = arena.slice(IDUPS_INITIAL as usize, |_| None)?;
                segs
            },
            idup_segs: 1,
            idup_cap: IDUPS_INITIAL,
            idups_active: 0,
            account: arena.account(),
            owner: None,
            agreeing: heapless::Vec::new(),
        })
    }
}

/// A construction's scratch ints: the process's buffer, or one from the platform while
/// another construction holds that.
#[derive(Clone, Copy)]
struct Ints {
    ptr: NonNull<i32>,
    len: usize,
    /// From the platform (given back to it), not the process's buffer.
    lent: bool,
}

/// Runs `f` with scratch ints of its own (three per process of the job).
fn with_ints<R>(
    cx: &mut Inside,
    f: impl FnOnce(&mut Inside, &mut [i32]) -> Result<R>,
) -> Result<R> {
    let held = claim_ints(cx.e())?;
    // SAFETY: the buffer is this construction's alone until `release_ints` below (the busy
    // flag, or memory nobody else has), `len` ints long and aligned for i32; the engine's
    // buffer lives as long as the engine.
    let ints = unsafe { core::slice::from_raw_parts_mut(held.ptr.as_ptr(), held.len) };
    let r = f(cx, ints);
    release_ints(cx.e(), held);
    r
}

fn claim_ints(e: &mut Engine) -> Result<Ints> {
    let c = &mut e.creation;
    let len = c.ints.len();
    if !c.ints_busy {
        c.ints_busy = true;
        return Ok(Ints {
            ptr: NonNull::from(&mut *c.ints).cast(),
            len,
            lent: false,
        });
    }
    let bytes = len.max(1) * size_of::<i32>();
    match e
        .platform
        .alloc_mem(bytes)
        .and_then(|p| NonNull::new(p.cast::<i32>()))
    {
        // SAFETY: fresh memory of `bytes` bytes, aligned for any C type.
        Some(ptr) => {
            unsafe { core::ptr::write_bytes(ptr.as_ptr(), 0, len) };
            Ok(Ints {
                ptr,
                len,
                lent: true,
            })
        }
        None => Err(Error::new(
            ErrorClass::NoMem,
            Reason::BadArgument {
                what:
                    "no memory for a communicator construction while another thread's is under way",
            },
        )),
    }
}

fn release_ints(e: &mut Engine, held: Ints) {
    if held.lent {
        // SAFETY: the memory came from this platform's `alloc_mem` in `claim_ints`.
        unsafe { e.platform.free_mem(held.ptr.as_ptr().cast()) };
    } else {
        e.creation.ints_busy = false;
    }
}

/// `MPI_Comm_idup`s in flight in one process with room at init; more grow the store by
/// segments within `mpi_memory_max` (no limit of their own).
pub const IDUPS_INITIAL: u32 = 16;
/// Most segments of that store (2^24 times the first segment's slots).
const IDUP_SEGMENTS: usize = 25;

impl Scratch {
    /// Slot `i` of the idups in flight.
    fn idup(&self, i: u32) -> &Option<Idup> {
        let (k, off) = crate::pool::locate(i, IDUPS_INITIAL.trailing_zeros());
        &self.idups[k][off]
    }

    fn idup_slot(&mut self, i: u32) -> &mut Option<Idup> {
        let (k, off) = crate::pool::locate(i, IDUPS_INITIAL.trailing_zeros());
        &mut self.idups[k][off]
    }

    /// Every slot, in order.
    fn idup_slots(&self) -> impl Iterator<Item = &Option<Idup>> + '_ {
        self.idups[..self.idup_segs].iter().flat_map(|s| s.iter())
    }

    /// A free slot, growing the store by a segment when every slot is in use.
    // Reached only from the C API.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    fn free_idup_slot(&mut self) -> Result<u32> {
        if let Some(i) = (0..self.idup_cap).find(|&i| self.idup(i).is_none()) {
            return Ok(i);
        }
        let what = "MPI_Comm_idup requests in flight";
        let k = self.idup_segs;
        let Some(account) = self.account.filter(|_| k < IDUP_SEGMENTS) else {
            return Err(Error::exhausted(
                what,
                self.idup_cap,
                "(compile-time IDUP_SEGMENTS)",
            ));
        };
        // Segment k holds as many slots as all before it.
        let n = self.idup_cap as usize;
        let mut sizer = Sizer::default();
        sizer.slice::<Option<Idup>>(n);
        let region = account.take(sizer.bytes()).map_err(|_| {
            Error::new(
                ErrorClass::NoMem,
                Reason::MemoryBound {
                    what,
                    max: account.max(),
                    param: crate::memory::MEMORY_MAX.name,
                },
            )
        })?;
        self.idups[k] = Arena::new(region).slice(n, |_| None)?;
        self.idup_segs += 1;
        let first = self.idup_cap;
        self.idup_cap += n as u32;
        Ok(first)
    }
}

/// A proposal of "no id free here from the start on".
const NO_CID: u64 = u64::MAX;

/// Where an [`Idup`]'s agreement stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Round {
    /// Every member proposes the lowest id free here from `start` on and holds it; the
    /// maximum is the candidate.
    Propose,
    /// Every member holds the candidate if it is free here and says whether it could.
    Confirm,
}

/// An `MPI_Comm_idup` in flight: a context-id agreement that never blocks, run as rounds of
/// non-blocking MAX-allreduces (the engine's collectives) started from progress.
///
/// The blocking agreement ORs bitmaps and takes the lowest id free everywhere, which is only
/// right if nothing else takes ids in between; with agreements in flight that start and end at
/// different times at each member that no longer holds. So, in the manner of Open MPI's
/// non-blocking id allocation, each member *holds* ids locally for an agreement (no other
/// agreement here may take them): in a propose round each member holds the lowest id free here
/// from `start` on and the maximum becomes the candidate; in a confirm round each holds the
/// candidate if it can, and the agreement succeeds when every member could. When one could not,
/// all try again from the candidate + 1 (ids only go up, so the agreement ends). A blocking
/// agreement here includes held ids in its bitmap, and while one is under way the non-blocking
/// rounds here neither hold nor confirm anything (they say "busy", and the round is repeated),
/// so the two never choose the same id at a member.
///
/// Tags: each round's allreduce uses tags taken from the parent's collective sequence at the
/// user's call (rounds start from progress, at different moments at each member, so they
/// cannot take sequence numbers then); rounds of one agreement run one after the other at each
/// member, so they share them.
#[derive(Clone, Copy)]
pub(crate) struct Idup {
    parent: CommId,
    /// The reserved slot of the new communicator (its handle is the user's at the call).
    new: CommId,
    /// The user's request.
    req: ReqId,
    /// Tags: the parent's (an intercommunicator's remote phases), its local communicator's
    /// (local phases), the local group's own allreduce, the hidden local side's agreement.
    tags: [i32; 4],
    round: Round,
    /// 0: the new communicator's id; 1: (intercommunicators) its hidden local side's.
    stage: u8,
    start: u64,
    /// The candidate of the confirm round.
    candidate: u64,
    /// The id held here for the current agreement.
    held: Option<u16>,
    /// Stage 1: the id agreed in stage 0, still held.
    main: Option<u16>,
    input: [u64; 2],
    out: [[u64; 2]; 2],
    reqs: [Option<ReqId>; 2],
    /// A round's allreduce failed: the agreement ends with this once the other has finished
    /// (its buffers are this slot's).
    failed: Option<Error>,
    /// Freed before it was made (a failed attribute copy at the call): freed once installed.
    discard: bool,
}

impl Idup {
    /// The order of agreements in flight: its parent's context id, then the tag taken at the
    /// call (alike at every member, and unique among agreements under way).
    fn key(&self, p2p: &P2p) -> u64 {
        let cid = p2p.comms.get_any(self.parent).map_or(u16::MAX, |c| c.cid.0);
        (u64::from(cid) << 32) | u64::from(self.tags[0] as u32)
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
    /// `MPI_COMM_TYPE_SHARED`, or `MPI_COMM_TYPE_HW_GUIDED` with the resource type
    /// `mpi_shared_memory`: the processes sharing this node's memory.
    Shared,
    /// `MPI_COMM_TYPE_HW_UNGUIDED`: the processes of this node when that is a strict subset of
    /// the communicator, else none. (Nodes are the only hardware level the library knows.)
    Unguided,
}

/// The parent rank of virtual rank `v`.
fn member_rank(p2p: &P2p, m: &Members, v: u32) -> Result<u32> {
    let i = (v + m.root) % m.n;
    let Some(g) = m.group else {
        return Ok(i);
    };
    let p = p2p.comms.groups.proc_of(g, i);
    p2p.comms
        .get_any(m.comm)
        .and_then(|c| p2p.comms.groups.rank_of(c.peers(), p))
        .ok_or(Error::internal(
            "a member of a communicator being made is not in its live parent",
        ))
}

/// Installs a new communicator; takes over one reference on each group (and of its topology).
fn install(p2p: &mut P2p, comm: Comm) -> Result<CommId> {
    let (group, remote, topo) = (comm.group, comm.remote, comm.topo);
    // The agreement made sure of room at every member; another thread may have taken it since.
    let installed = p2p.comm_room().and_then(|()| p2p.comms.insert(comm, None));
    match installed {
        Ok(id) => match p2p.pml.comm_added(&p2p.comms, &p2p.types, id) {
            Ok(()) => Ok(id),
            Err(e) => {
                // Removing it drops its references again.
                let _ = p2p.comms.remove(id);
                Err(e)
            }
        },
        Err(e) => {
            p2p.comms.groups.release(group);
            if let Some(r) = remote {
                p2p.comms.groups.release(r);
            }
            if let Some(t) = topo {
                p2p.comms.topos.release(t);
            }
            Err(e)
        }
    }
}

fn whole(p2p: &P2p, comm: CommId, tag: i32) -> Result<Members> {
    let c = p2p.comm(comm)?;
    Ok(Members {
        comm,
        group: None,
        root: 0,
        n: c.size(),
        me: c.rank,
        tag,
    })
}

/// The group of `comm` (`MPI_Comm_group`; the local group of an intercommunicator), with a
/// reference for the caller.
pub fn group(p2p: &mut P2p, comm: CommId) -> Result<Group> {
    let g = p2p.comm(comm)?.group;
    p2p.comms.groups.handle_for(g)
}

/// The remote group of intercommunicator `comm`, with a reference for the caller.
pub fn remote_group(p2p: &mut P2p, comm: CommId) -> Result<Group> {
    let g = p2p.comm(comm)?.remote.ok_or(not_inter())?;
    p2p.comms.groups.handle_for(g)
}

/// Installs a hidden intracommunicator of the library's own (flat itself; errors go back to
/// the call that used it).
fn install_hidden(p2p: &mut P2p, cid: ContextId, group: Group, rank: u32) -> Result<CommId> {
    let id = install(
        p2p,
        Comm {
            cid,
            group,
            remote: None,
            local_comm: None,
            hidden: true,
            topo: None,
            rank,
            errhandler: ErrHandler::Return,
            freed: false,
            hints: crate::comm::CommHints::empty(),
        },
    )?;
    p2p.comms.set_levels(id, Levels::Flat);
    Ok(id)
}

/// Posts a receive on a leaders' channel (user tags are ordinary receives).
fn post_recv(cx: &mut Inside, conv: Unpacker, ch: Channel) -> Result<crate::pml::request::ReqId> {
    if ch.tag >= 0 {
        cx.e().irecv(conv, ch.peer as i32, ch.tag, ch.comm, 0)
    } else {
        cx.e().irecv_internal(conv, ch.peer, ch.tag, ch.comm)
    }
}

/// Sends on a leaders' channel.
fn send_on(cx: &mut Inside, conv: Packer, ch: Channel) -> Result<()> {
    if ch.tag >= 0 {
        cx.send(
            conv,
            ch.peer as i32,
            ch.tag,
            ch.comm,
            crate::pml::request::SendMode::Standard,
        )
    } else {
        cx.send_internal(conv, ch.peer, ch.tag, ch.comm)
    }
}

/// ORs `words` over the members; every member gets the result (binomial reduce to member 0,
/// binomial broadcast back).
fn or_among(cx: &mut Inside, m: &Members, words: &mut [u64]) -> Result<()> {
    let mut tmp = [0u64; CID_WORDS + 1];
    let tmp = &mut tmp[..words.len()];
    let mut mask = 1;
    while mask < m.n {
        if m.me & mask != 0 {
            let to = member_rank(&cx.e().p2p, m, m.me - mask)?;
            // SAFETY: `words` is borrowed until the send completes.
            let conv =
                unsafe { Packer::elements(words.as_ptr().cast(), words.len(), Datatype::UINT64_T) };
            cx.send_internal(conv, to, m.tag, m.comm)?;
            break;
        }
        if m.me + mask < m.n {
            let from = member_rank(&cx.e().p2p, m, m.me + mask)?;
            // SAFETY: `tmp` is borrowed until the receive completes.
            let conv = unsafe {
                Unpacker::elements(tmp.as_mut_ptr().cast(), tmp.len(), Datatype::UINT64_T)
            };
            cx.recv_internal(conv, from, m.tag, m.comm)?;
            words.iter_mut().zip(tmp.iter()).for_each(|(w, t)| *w |= *t);
        }
        mask <<= 1;
    }
    // SAFETY: `words` holds `len` u64 and is borrowed for the call.
    unsafe {
        bcast_among(
            cx,
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
    cx: &mut Inside,
    m: &Members,
    buf: *mut u8,
    count: usize,
    ty: Datatype,
) -> Result<()> {
    let mut mask = 1;
    while mask < m.n {
        if m.me & mask != 0 {
            let from = member_rank(&cx.e().p2p, m, m.me - mask)?;
            // SAFETY: the caller's contract; the receive completes before this returns.
            let conv = unsafe { Unpacker::elements(buf, count, ty) };
            cx.recv_internal(conv, from, m.tag, m.comm)?;
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if m.me + mask < m.n && m.me & (mask * 2 - 1) == 0 {
            let to = member_rank(&cx.e().p2p, m, m.me + mask)?;
            // SAFETY: the caller's contract; the send completes before this returns.
            let conv = unsafe { Packer::elements(buf, count, ty) };
            cx.send_internal(conv, to, m.tag, m.comm)?;
        }
        mask >>= 1;
    }
    Ok(())
}

/// A context id free at every member — and, when `inter` is given, at the members of an
/// intercommunicator's other side, whose leader this side's leader reaches over the channel
/// (`Some` at the leader); fails at all members alike when one has no room.
///
/// The members OR their bitmaps of used ids and take the lowest id clear in the result. Other
/// agreements may run in this process meanwhile (threads constructing other communicators under
/// `MPI_THREAD_MULTIPLE`), so a member contributes its ids only while its agreement owns the
/// process's mask, for one round; a member whose agreement does not own it contributes "none
/// free, try again", and the round is repeated at every member. The mask goes to the agreement
/// under way here with the lowest key (its communicator's context id and tag), so the lowest
/// key of the whole job owns the mask at all its members within a round or two and succeeds,
/// then the next (MPICH's scheme for multi-threaded context-id allocation). A process that
/// constructs one communicator at a time owns the mask at once: one round, as before threads.
fn agree_cid(cx: &mut Inside, m: &Members, inter: Option<Option<Channel>>) -> Result<ContextId> {
    agree_cid_with(cx, m, inter.map(|ch| ch.map(Leaders::Comm)))
}

/// How the leaders of the two sides of a context-id agreement reach each other.
#[derive(Clone, Copy)]
enum Leaders {
    /// Over a communicator both belong to.
    Comm(Channel),
    /// Over a platform's link between two jobs, waiting at most the time given (ms).
    Link(&'static dyn crate::dpm::Ports, crate::dpm::LinkId, u64),
}

/// [`agree_cid`] with leaders that may reach each other over a link between jobs.
fn agree_cid_with(
    cx: &mut Inside,
    m: &Members,
    inter: Option<Option<Leaders>>,
) -> Result<ContextId> {
    let e = cx.e();
    let key = agreement_key(&e.p2p, m);
    if e.creation.agreeing.push(key).is_err() {
        return Err(Error::exhausted(
            "context-id agreements under way at once",
            MAX_AGREEING as u32,
            "(compile-time MAX_AGREEING)",
        ));
    }
    let r = agree_rounds(cx, m, inter, key);
    let c = &mut cx.e().creation;
    if let Some(i) = c.agreeing.iter().position(|&k| k == key) {
        c.agreeing.swap_remove(i);
    }
    if c.owner == Some(key) {
        c.owner = None;
    }
    r
}

/// "No room here" in a context-id agreement: the communicator table is at its maximum.
const NO_ROOM_TABLE: u64 = 1;
/// "No room here": the table or the per-communicator state could not grow within
/// `mpi_memory_max`.
const NO_ROOM_MEMORY: u64 = 2;

/// The error of a member whose own room was made when another member had none (`why`: the
/// OR of the members' `NO_ROOM_*` words).
#[cold]
fn no_room_at_a_member(e: &Engine, why: u64) -> Error {
    const WHAT: &str = "communicator table (at another member)";
    if why & NO_ROOM_TABLE != 0 {
        return Error::exhausted(WHAT, e.p2p.comms.capacity(), e.p2p.comms.limit_param());
    }
    Error::new(
        ErrorClass::NoMem,
        Reason::MemoryBound {
            what: WHAT,
            max: e.memory_held().1,
            param: crate::memory::MEMORY_MAX.name,
        },
    )
}

/// The key of an agreement among `m`: its communicator's context id, then its tag (unique
/// among agreements under way, since MPI orders collective calls on one communicator).
fn agreement_key(p2p: &P2p, m: &Members) -> u64 {
    let cid = p2p.comms.get_any(m.comm).map_or(u16::MAX, |c| c.cid.0);
    (u64::from(cid) << 32) | u64::from(m.tag as u32)
}

/// Whether the agreement `key` owns the mask for its next round (taking it if it is free and
/// no agreement under way here has a lower key).
fn take_mask(c: &mut Scratch, key: u64) -> bool {
    match c.owner {
        Some(k) => k == key,
        None if c.agreeing.iter().all(|&k| k >= key) => {
            c.owner = Some(key);
            true
        }
        None => false,
    }
}

/// The rounds of [`agree_cid`] until one decides.
fn agree_rounds(
    cx: &mut Inside,
    m: &Members,
    inter: Option<Option<Leaders>>,
    key: u64,
) -> Result<ContextId> {
    loop {
        let e = cx.e();
        let own = take_mask(&mut e.creation, key);
        let nw = e.p2p.comms.used_cids().len();
        // Used ids, then "no room here" (why: `NO_ROOM_*`), then "an agreement did not own its
        // mask".
        let mut words = [0u64; CID_WORDS + 1];
        // Room for the new communicator is made before the id is chosen, so that installing
        // it cannot fail at one member after all have agreed.
        let mut room = Ok(());
        if own {
            words[..nw].copy_from_slice(e.p2p.comms.used_cids());
            // Ids held by non-blocking agreements here are not free.
            for c in e.building().held_cids() {
                if (c as usize) < nw * 64 {
                    words[c as usize / 64] |= 1 << (c % 64);
                }
            }
            room = e.p2p.comm_room();
            words[nw] = match &room {
                Ok(()) => 0,
                Err(Error {
                    reason: Reason::Exhausted { .. },
                    ..
                }) => NO_ROOM_TABLE,
                Err(_) => NO_ROOM_MEMORY,
            };
        } else {
            words[..nw].fill(u64::MAX);
            words[nw + 1] = 1;
        }
        let r = or_then_share(cx, m, inter, &mut words[..nw + 2]);
        if own {
            cx.e().creation.owner = None;
        }
        r?;
        if words[nw + 1] != 0 {
            // Some member's agreement did not own its mask: every member tries again, after
            // the other threads here have had their turn.
            cx.share();
            continue;
        }
        if words[nw] != 0 {
            return Err(match room {
                Err(e) => e,
                Ok(()) => no_room_at_a_member(cx.e(), words[nw]),
            });
        }
        return CommTable::lowest_free(&words[..nw]).ok_or(Error::exhausted(
            "context ids",
            (nw * 64) as u32,
            super::MAX_CIDS.name,
        ));
    }
}

/// ORs `words` over the members and, for an intercommunicator, with the other side's (the
/// leaders swap their sides' results, then share them).
fn or_then_share(
    cx: &mut Inside,
    m: &Members,
    inter: Option<Option<Leaders>>,
    words: &mut [u64],
) -> Result<()> {
    or_among(cx, m, words)?;
    if let Some(channel) = inter {
        if let Some(ch) = channel {
            let mut theirs = [0u64; CID_WORDS + 1];
            let theirs = &mut theirs[..words.len()];
            exchange_words(cx, ch, words, theirs)?;
            words
                .iter_mut()
                .zip(theirs.iter())
                .for_each(|(w, t)| *w |= *t);
        }
        // SAFETY: `words` is borrowed for the call.
        unsafe {
            bcast_among(
                cx,
                m,
                words.as_mut_ptr().cast(),
                words.len(),
                Datatype::UINT64_T,
            )?
        };
    }
    Ok(())
}

/// Sends `mine` to and receives `theirs` from the other leader.
fn exchange_words(cx: &mut Inside, ch: Leaders, mine: &[u64], theirs: &mut [u64]) -> Result<()> {
    let ch = match ch {
        Leaders::Comm(ch) => ch,
        Leaders::Link(ports, link, timeout_ms) => {
            let mut buf = [0u8; 8 * (CID_WORDS + 2)];
            let n = 8 * mine.len();
            for (b, w) in buf.chunks_exact_mut(8).zip(mine) {
                b.copy_from_slice(&w.to_be_bytes());
            }
            ports.send(link, &buf[..n])?;
            if ports.recv(link, &mut buf[..8 * theirs.len()], timeout_ms)? != 8 * theirs.len() {
                return Err(Error::bad_arg(
                    "the other job's context-id words differ in number (max_cids differs)",
                ));
            }
            for (w, b) in theirs.iter_mut().zip(buf.chunks_exact(8)) {
                let mut x = [0u8; 8];
                x.copy_from_slice(b);
                *w = u64::from_be_bytes(x);
            }
            return Ok(());
        }
    };
    // SAFETY: `theirs` is borrowed until the receive completes.
    let conv =
        unsafe { Unpacker::elements(theirs.as_mut_ptr().cast(), theirs.len(), Datatype::UINT64_T) };
    let r = post_recv(cx, conv, ch)?;
    // SAFETY: `mine` is borrowed until the send completes.
    let conv = unsafe { Packer::elements(mine.as_ptr().cast(), mine.len(), Datatype::UINT64_T) };
    send_on(cx, conv, ch)?;
    cx.wait(r).map(|_| ())
}

mod connect;
pub use connect::{connect_accept, Meet};
mod spawn;
pub use spawn::{connect_parent, spawn, SpawnArgs};

/// Duplicates communicator `id` (`MPI_Comm_dup`, collective).
pub fn dup(cx: &mut Inside, id: CommId) -> Result<CommId> {
    let parent = cx.e().check_comm(id)?.clone();
    let cid = match parent.local_comm {
        None => {
            let m = whole(&cx.e().p2p, id, TAG_CID)?;
            agree_cid(cx, &m, None)?
        }
        Some(local) => {
            let m = whole(&cx.e().p2p, local, TAG_CID)?;
            let ch = Channel {
                comm: id,
                peer: 0,
                tag: TAG_INTER,
            };
            agree_cid(cx, &m, Some((m.me == 0).then_some(ch)))?
        }
    };
    let group = cx.e().p2p.comms.groups.for_comm(parent.group);
    let remote = parent.remote.map(|r| cx.e().p2p.comms.groups.for_comm(r));
    if let Some(t) = parent.topo {
        cx.e().p2p.comms.topos.retain(t);
    }
    let new = install(
        &mut cx.e().p2p,
        Comm {
            cid,
            group,
            remote,
            local_comm: None,
            hidden: false,
            freed: false,
            // MPI-4.1 §7.4.2: a duplicate keeps its parent's hints.
            ..parent
        },
    )?;
    if let Some(local) = parent.local_comm {
        attach_local_comm(cx, new, local)?;
    }
    Ok(new)
}

/// `MPI_Comm_split`: members with the same `color` form a communicator, ranked by `key`
/// (ties by rank in `comm`); `color` [`UNDEFINED`] gets none. Collective over `comm`.
pub fn split(cx: &mut Inside, comm: CommId, color: i32, key: i32) -> Result<Option<CommId>> {
    if color < 0 && color != UNDEFINED {
        return Err(Error::bad_arg(
            "a split color must be non-negative or MPI_UNDEFINED",
        ));
    }
    let c = cx.e().check_comm(comm)?;
    if c.is_inter() {
        return with_ints(cx, |cx, ints| split_inter(cx, ints, comm, color, key));
    }
    let m = whole(&cx.e().p2p, comm, TAG_SPLIT)?;
    split_members(cx, comm, &m, color, key)
}

/// `MPI_Comm_split` on intercommunicator `inter`: the members of each side with one color form
/// a new intercommunicator with the other side's members of that color, each side ranked by
/// key (ties by rank); a color that only one side has gives `None` there. Collective over both
/// sides.
///
/// Each side gathers its (color, key, rank) triples over the hidden local communicator, the
/// leaders swap their sides' lists, and each leader broadcasts the other side's; so every
/// member knows both sides and computes both groups itself. Two context ids are agreed: one
/// among the local side for the new hidden local communicator (disjoint colors share it, as
/// in an ordinary split), then one among both sides for the intercommunicator (as `dup` does).
fn split_inter(
    cx: &mut Inside,
    ints: &mut [i32],
    inter: CommId,
    color: i32,
    key: i32,
) -> Result<Option<CommId>> {
    let c = cx.e().check_comm(inter)?.clone();
    let (Some(local), Some(remote)) = (c.local_comm, c.remote) else {
        return Err(not_inter());
    };
    let m = whole(&cx.e().p2p, local, TAG_SPLIT)?;
    let (n, k) = (m.n as usize, remote.size() as usize);
    // This side's triples in ints[..3n], the other side's after them; the sides are disjoint,
    // so both fit in the three ints per process of the job.
    ints[3 * m.me as usize..3 * m.me as usize + 3].copy_from_slice(&[color, key, m.me as i32]);
    allgather_triples(cx, &m, ints)?;
    let ch = Channel {
        comm: inter,
        peer: 0,
        tag: TAG_SPLIT,
    };
    if m.me == 0 {
        let (mine, theirs) = ints.split_at_mut(3 * n);
        // SAFETY: `theirs` is borrowed until the receive completes.
        let conv = unsafe { Unpacker::elements(theirs.as_mut_ptr().cast(), 3 * k, Datatype::INT) };
        let r = post_recv(cx, conv, ch)?;
        // SAFETY: `mine` is borrowed until the send completes.
        let conv = unsafe { Packer::elements(mine.as_ptr().cast(), 3 * n, Datatype::INT) };
        send_on(cx, conv, ch)?;
        cx.wait(r)?;
    }
    let at = ints[3 * n..].as_mut_ptr();
    // SAFETY: `3 k` ints after this side's triples are borrowed for the call.
    unsafe { bcast_among(cx, &m, at.cast(), 3 * k, Datatype::INT)? };
    let (mine, theirs) = ints.split_at_mut(3 * n);
    let mine = mine.as_chunks_mut::<3>().0;
    let theirs = theirs[..3 * k].as_chunks_mut::<3>().0;
    // Members of `color` first, by key, then rank.
    mine.sort_unstable_by_key(|e| (e[0] != color, e[1], e[2]));
    theirs.sort_unstable_by_key(|e| (e[0] != color, e[1], e[2]));
    let count = |t: &[[i32; 3]]| t.iter().take_while(|e| e[0] == color).count();
    let (len, rlen) = (count(mine), count(theirs));
    let joined = color != UNDEFINED && rlen > 0;

    let lcid = agree_cid(cx, &Members { tag: TAG_CID, ..m }, None)?;
    let mut new_local = None;
    if joined {
        let rank = mine[..len]
            .iter()
            .position(|e| e[2] as u32 == m.me)
            .ok_or(Error::internal(
                "own entry missing from the members' triples",
            ))? as u32;
        let g = c.group;
        let group = cx
            .e()
            .p2p
            .comms
            .groups
            .gather(len as u32, |t, i| t.proc_of(g, mine[i as usize][2] as u32))?;
        new_local = Some((install_hidden(&mut cx.e().p2p, lcid, group, rank)?, rank));
    }
    let leader_ch = Channel {
        comm: inter,
        peer: 0,
        tag: TAG_INTER,
    };
    let icid = agree_cid(
        cx,
        &Members { tag: TAG_CID, ..m },
        Some((m.me == 0).then_some(leader_ch)),
    );
    let (icid, (l, rank)) = match (icid, new_local) {
        (Err(e), Some((l, _))) => {
            let _ = free(cx, l);
            return Err(e);
        }
        (Err(e), None) => return Err(e),
        (Ok(_), None) => return Ok(None),
        (Ok(cid), Some(lr)) => (cid, lr),
    };
    let r = cx.e().p2p.comms.groups.gather(rlen as u32, |t, i| {
        t.proc_of(remote, theirs[i as usize][2] as u32)
    });
    let installed = r.and_then(|rg| {
        let lg = cx.e().p2p.comm(l)?.group;
        let group = cx.e().p2p.comms.groups.for_comm(lg);
        install(
            &mut cx.e().p2p,
            Comm {
                cid: icid,
                group,
                remote: Some(rg),
                local_comm: Some(l),
                hidden: false,
                topo: None,
                rank,
                errhandler: c.errhandler,
                freed: false,
                hints: crate::comm::CommHints::empty(),
            },
        )
    });
    match installed {
        Ok(id) => Ok(Some(id)),
        Err(e) => {
            let _ = free(cx, l);
            Err(e)
        }
    }
}

/// Splits `comm` after every member's (color, key) is known to all.
fn split_members(
    cx: &mut Inside,
    comm: CommId,
    m: &Members,
    color: i32,
    key: i32,
) -> Result<Option<CommId>> {
    with_ints(cx, |cx, ints| split_into(cx, ints, comm, m, color, key))
}

/// [`split_members`] with the triples in `ints`.
fn split_into(
    cx: &mut Inside,
    ints: &mut [i32],
    comm: CommId,
    m: &Members,
    color: i32,
    key: i32,
) -> Result<Option<CommId>> {
    let n = m.n as usize;
    let me = 3 * m.me as usize;
    ints[me..me + 3].copy_from_slice(&[color, key, m.me as i32]);
    allgather_triples(cx, m, ints)?;
    let cid = agree_cid(cx, &Members { tag: TAG_CID, ..*m }, None)?;
    if color == UNDEFINED {
        return Ok(None);
    }
    let triples = ints[..3 * n].as_chunks_mut::<3>().0;
    triples.sort_unstable_by_key(|e| (e[0] != color, e[1], e[2]));
    let len = triples.iter().take_while(|e| e[0] == color).count();
    let rank = triples[..len]
        .iter()
        .position(|e| e[2] as u32 == m.me)
        .ok_or(Error::internal(
            "own entry missing from the members' triples",
        ))? as u32;
    let parent = cx.e().check_comm(comm)?.group;
    let eh = cx.e().check_comm(comm)?.errhandler;
    let ints = &*ints;
    let group = cx.e().p2p.comms.groups.gather(len as u32, |t, i| {
        t.proc_of(parent, ints[3 * i as usize + 2] as u32)
    })?;
    install(
        &mut cx.e().p2p,
        Comm {
            cid,
            group,
            remote: None,
            local_comm: None,
            hidden: false,
            topo: None,
            rank,
            errhandler: eh,
            freed: false,
            hints: crate::comm::CommHints::empty(),
        },
    )
    .map(Some)
}

/// Every member's triple at every member (gather to member 0, then broadcast).
fn allgather_triples(cx: &mut Inside, m: &Members, ints: &mut [i32]) -> Result<()> {
    let n = m.n as usize;
    if m.me == 0 {
        for v in 1..m.n {
            let from = member_rank(&cx.e().p2p, m, v)?;
            let e = &mut ints[3 * v as usize..3 * v as usize + 3];
            // SAFETY: the triple is borrowed until the receive completes.
            let conv = unsafe { Unpacker::elements(e.as_mut_ptr().cast(), 3, Datatype::INT) };
            cx.recv_internal(conv, from, m.tag, m.comm)?;
        }
    } else {
        let to = member_rank(&cx.e().p2p, m, 0)?;
        let at = 3 * m.me as usize;
        let e: [i32; 3] = [ints[at], ints[at + 1], ints[at + 2]];
        // SAFETY: `e` lives until the send completes.
        let conv = unsafe { Packer::elements(e.as_ptr().cast(), 3, Datatype::INT) };
        cx.send_internal(conv, to, m.tag, m.comm)?;
    }
    let all = ints[..3 * n].as_mut_ptr();
    // SAFETY: the first `3 n` ints are borrowed for the call.
    unsafe { bcast_among(cx, m, all.cast(), 3 * n, Datatype::INT) }
}

/// `MPI_Comm_split_type`: the members sharing a node of the kind `how`, ranked by `key`.
pub fn split_type(
    cx: &mut Inside,
    comm: CommId,
    how: Option<SplitType>,
    key: i32,
) -> Result<Option<CommId>> {
    let p2p = &cx.e().p2p;
    let node_of = |p: ProcId| (p2p.procs[p.0 as usize].node & 0x7fff_ffff) as i32;
    let mine = node_of(p2p.me);
    let color = match how {
        None => UNDEFINED,
        Some(SplitType::Shared) => mine,
        Some(SplitType::Unguided) => {
            // Every member decides alike: the members span several nodes or they do not.
            let c = p2p.comm(comm)?;
            let g = c.group;
            let groups = &p2p.comms.groups;
            let spans = (0..c.size()).any(|r| node_of(groups.proc_of(g, r)) != mine);
            if spans {
                mine
            } else {
                UNDEFINED
            }
        }
    };
    split(cx, comm, color, key)
}

/// The node levels of `comm` for the node-aware collectives: hidden communicators over each
/// node's members and over the nodes' leaders, made the first time this is asked (every
/// member asks at the same collective call, so all agree on their context ids) and freed with
/// `comm`. They are made only when the members span more than one node and some node holds
/// more than one of them; otherwise, and when no context id or slot is left, the answer is
/// [`Levels::Flat`] (alike at every member: the agreement fails everywhere or nowhere).
///
/// The node layout comes from [`crate::btl::PeerInfo::node`], known to every process, so
/// the groups are computed locally; only the two context ids are agreed.
pub(crate) fn levels(cx: &mut Inside, comm: CommId) -> Result<Levels> {
    let known = cx.e().p2p.comms.levels(comm);
    if known != Levels::Unknown {
        return Ok(known);
    }
    with_ints(cx, |cx, ints| levels_into(cx, ints, comm))
}

/// Whether a failed agreement ran out of room (ids, table, memory): every member learns that
/// alike, so each may go flat on its own. Any other failure (a peer that cannot be reached) is
/// this member's alone and must surface, or the others would wait for it.
fn no_room(e: &Error) -> bool {
    matches!(
        e.reason,
        Reason::Exhausted { .. } | Reason::MemoryBound { .. }
    )
}

/// [`levels`] of a communicator not asked before, with the triples in `ints`.
fn levels_into(cx: &mut Inside, ints: &mut [i32], comm: CommId) -> Result<Levels> {
    let c = cx.e().check_comm(comm)?;
    if c.is_inter() || c.hidden || c.size() < 3 {
        cx.e().p2p.comms.set_levels(comm, Levels::Flat);
        return Ok(Levels::Flat);
    }
    let (g, n, me) = (c.group, c.size() as usize, c.rank as i32);
    // Processes of other jobs have no node numbers both jobs share, so the sides would not
    // see one layout: a communicator with any of them stays flat (at every member alike, as
    // each sees the other side's processes as of another job).
    let world = cx.e().p2p.world;
    if (0..n as u32).any(|r| cx.e().p2p.comms.groups.proc_of(g, r).0 >= world) {
        cx.e().p2p.comms.set_levels(comm, Levels::Flat);
        return Ok(Levels::Flat);
    }
    // (node, rank) sorted: each node's members form a run, in rank order.
    for r in 0..n {
        let p = cx.e().p2p.comms.groups.proc_of(g, r as u32);
        let node = cx.e().p2p.procs[p.0 as usize].node as i32;
        ints[3 * r..3 * r + 3].copy_from_slice(&[node, r as i32, 0]);
    }
    let triples = ints[..3 * n].as_chunks_mut::<3>().0;
    // Runs of one node in rank order; as many as nodes when each node's ranks are one run.
    let runs = 1 + triples.windows(2).filter(|w| w[0][0] != w[1][0]).count();
    let Some((start, len, node_rank)) = node_runs(triples, me) else {
        cx.e().p2p.comms.set_levels(comm, Levels::Flat);
        return Ok(Levels::Flat);
    };
    let m = whole(&cx.e().p2p, comm, TAG_CID)?;
    let cid = match agree_cid(cx, &m, None) {
        Ok(cid) => cid,
        Err(e) if no_room(&e) => {
            cx.e().p2p.comms.set_levels(comm, Levels::Flat);
            return Ok(Levels::Flat);
        }
        Err(e) => return Err(e),
    };
    let group = {
        let ints = &*ints;
        cx.e().p2p.comms.groups.gather(len as u32, |t, i| {
            t.proc_of(g, ints[3 * (start + i as usize) + 1] as u32)
        })?
    };
    let node = install_hidden(&mut cx.e().p2p, cid, group, node_rank as u32)?;
    let k = leaders_in_order(&mut ints[..3 * n]);
    let leader_rank = ints[..k].iter().position(|&r| r == me);
    let cid = match agree_cid(cx, &m, None) {
        Ok(cid) => cid,
        Err(e) if no_room(&e) => {
            free(cx, node)?;
            cx.e().p2p.comms.set_levels(comm, Levels::Flat);
            return Ok(Levels::Flat);
        }
        Err(e) => return Err(e),
    };
    let leaders = match leader_rank {
        Some(lr) => {
            let ints = &*ints;
            let group = cx
                .e()
                .p2p
                .comms
                .groups
                .gather(k as u32, |t, i| t.proc_of(g, ints[i as usize] as u32))?;
            Some(install_hidden(&mut cx.e().p2p, cid, group, lr as u32)?)
        }
        None => None,
    };
    let l = Levels::Nodes {
        node,
        leaders,
        blocked: runs == k,
    };
    cx.e().p2p.comms.set_levels(comm, l);
    Ok(l)
}

/// `MPI_Comm_create`: a communicator over `group` (a subset of `comm`'s members; disjoint
/// subsets may pass different groups); non-members get none. Collective over `comm`.
pub fn create(cx: &mut Inside, comm: CommId, group: Group) -> Result<Option<CommId>> {
    let group = cx.e().p2p.comms.groups.check(group)?;
    let c = cx.e().check_comm(comm)?;
    if c.is_inter() {
        // The local group's members in `group` face the remote side's members in its group:
        // a split with one color, ranked by the place in `group`.
        let parent = c.group;
        let p2p = &cx.e().p2p;
        let groups = &p2p.comms.groups;
        if groups
            .members(group)
            .any(|p| groups.rank_of(parent, p).is_none())
        {
            return Err(group_not_subset());
        }
        let my_rank = groups.rank_of(group, p2p.me);
        let color = if my_rank.is_some() { 0 } else { UNDEFINED };
        let key = my_rank.map_or(0, |r| r as i32);
        return with_ints(cx, |cx, ints| split_inter(cx, ints, comm, color, key));
    }
    let parent = c.group;
    let me = cx.e().p2p.me;
    let my_rank = cx.e().p2p.comms.groups.rank_of(group, me);
    // Every member must belong to the parent.
    let groups = &cx.e().p2p.comms.groups;
    for p in groups.members(group) {
        if groups.rank_of(parent, p).is_none() {
            return Err(group_not_subset());
        }
    }
    // A split whose color names the group by its first process: disjoint groups differ.
    let color = match my_rank {
        Some(_) => cx.e().p2p.comms.groups.proc_of(group, 0).0 as i32,
        None => UNDEFINED,
    };
    let key = my_rank.map_or(0, |r| r as i32);
    let m = whole(&cx.e().p2p, comm, TAG_SPLIT)?;
    split_members(cx, comm, &m, color, key)
}

/// `MPI_Comm_create_group`: a communicator over `group` (a subset of `comm`), collective
/// over the members of `group` only; `tag` separates concurrent calls. A process outside
/// `group` (an empty group, for one) gets no communicator (`MPI_COMM_NULL`) at once, as the
/// standard says.
pub fn create_group(
    cx: &mut Inside,
    comm: CommId,
    group: Group,
    tag: i32,
) -> Result<Option<CommId>> {
    let group = cx.e().p2p.comms.groups.check(group)?;
    let c = cx.e().check_comm(comm)?;
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
    // A process outside `group` (an empty group, for one) takes no part: no communicator.
    let parent = cx.e().check_comm(comm)?.group;
    let p2p = &cx.e().p2p;
    if p2p.comms.groups.rank_of(group, p2p.me).is_none() {
        let groups = &p2p.comms.groups;
        if groups
            .members(group)
            .any(|p| groups.rank_of(parent, p).is_none())
        {
            return Err(group_not_subset());
        }
        return Ok(None);
    }
    group_comm(cx, comm, group, TAG_GROUP_BASE + (tag & 0xffff)).map(Some)
}

/// A communicator over `group`, a checked subset of `comm`'s group that holds the caller,
/// agreed among its members only under internal tag `tag`.
fn group_comm(cx: &mut Inside, comm: CommId, group: Group, tag: i32) -> Result<CommId> {
    let c = cx.e().check_comm(comm)?;
    let (parent, eh) = (c.group, c.errhandler);
    let p2p = &cx.e().p2p;
    let me = p2p.comms.groups.rank_of(group, p2p.me).ok_or(Error::new(
        ErrorClass::Group,
        Reason::BadArgument {
            what: "the calling process is not in the group",
        },
    ))?;
    let groups = &p2p.comms.groups;
    if groups
        .members(group)
        .any(|p| groups.rank_of(parent, p).is_none())
    {
        return Err(group_not_subset());
    }
    let m = Members {
        comm,
        group: Some(group),
        root: 0,
        n: group.size(),
        me,
        tag,
    };
    let cid = agree_cid(cx, &m, None)?;
    let g = cx.e().p2p.comms.groups.for_comm(group);
    install(
        &mut cx.e().p2p,
        Comm {
            cid,
            group: g,
            remote: None,
            local_comm: None,
            hidden: false,
            topo: None,
            rank: me,
            errhandler: eh,
            freed: false,
            hints: crate::comm::CommHints::empty(),
        },
    )
}

/// `MPI_Comm_create_from_group`: a communicator over `group`, collective over its members only;
/// `tag` (from the user's string tag) tells concurrent calls apart. A process outside the group
/// gets none. As for [`intercomm_from_groups`], the world carries the agreement (every process
/// of a job is a member of it, sessions or not).
pub fn comm_from_group(cx: &mut Inside, group: Group, tag: u32) -> Result<Option<CommId>> {
    let group = cx.e().p2p.comms.groups.check(group)?;
    let p2p = &cx.e().p2p;
    if p2p.comms.groups.rank_of(group, p2p.me).is_none() {
        return Ok(None);
    }
    let tag = TAG_FROM_GROUP_BASE + (tag & 0xffff) as i32;
    group_comm(cx, CommId::WORLD, group, tag).map(Some)
}

/// `MPI_Intercomm_create_from_groups`: an intercommunicator between `local` (led by its rank
/// `local_leader`) and `remote` (led by its rank `remote_leader`), collective over both groups
/// only; `tag` (from the user's string tag) tells concurrent calls apart.
///
/// Every process of a job here is a member of `MPI_COMM_WORLD` (there is no spawn), so the
/// world carries the construction: the local group becomes a temporary communicator as in
/// `MPI_Comm_create_group`, whose leader reaches the remote leader over the world with an
/// internal tag, as `MPI_Intercomm_create` with the world as peer.
pub fn intercomm_from_groups(
    cx: &mut Inside,
    local: Group,
    local_leader: i32,
    remote: Group,
    remote_leader: i32,
    tag: u32,
) -> Result<CommId> {
    let groups = &cx.e().p2p.comms.groups;
    let local = groups.check(local)?;
    let remote = groups.check(remote)?;
    if remote_leader < 0 || remote_leader as u32 >= remote.size() {
        return Err(Error::new(
            ErrorClass::Rank,
            Reason::RankOutOfRange {
                rank: remote_leader,
                size: remote.size(),
            },
        ));
    }
    let leader_proc = groups.proc_of(remote, remote_leader as u32);
    let world_group = cx.e().check_comm(CommId::WORLD)?.group;
    let peer_rank = cx
        .e()
        .p2p
        .comms
        .groups
        .rank_of(world_group, leader_proc)
        .ok_or(Error::bad_arg(
            "the remote leader is not a process of this job",
        ))?;
    let tag = TAG_FROM_GROUPS_BASE + (tag & 0xffff) as i32;
    let l = group_comm(cx, CommId::WORLD, local, tag)?;
    let r = with_ints(cx, |cx, ints| {
        intercomm_into(
            cx,
            ints,
            l,
            local_leader,
            Some(CommId::WORLD),
            peer_rank as i32,
            tag,
        )
    });
    let freed = free(cx, l);
    let inter = r?;
    freed.map(|()| inter)
}

/// `MPI_Intercomm_create`: joins the group of `local` (led by its rank `local_leader`) with
/// the group led by rank `remote_leader` of `peer` (which matters at the local leader only).
/// The leaders swap their groups over `peer` with the user's `tag`, as the standard defines.
pub fn intercomm_create(
    cx: &mut Inside,
    local: CommId,
    local_leader: i32,
    peer: Option<CommId>,
    remote_leader: i32,
    tag: i32,
) -> Result<CommId> {
    with_ints(cx, |cx, ints| {
        intercomm_into(cx, ints, local, local_leader, peer, remote_leader, tag)
    })
}

/// [`intercomm_create`] with the process lists in `ints`.
fn intercomm_into(
    cx: &mut Inside,
    ints: &mut [i32],
    local: CommId,
    local_leader: i32,
    peer: Option<CommId>,
    remote_leader: i32,
    tag: i32,
) -> Result<CommId> {
    let c = cx.e().check_comm(local)?.clone();
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
    let world = cx.e().p2p.procs.len();
    // At the leader: own processes in ints[..size], the remote ones into ints[world..].
    let mut k = [0i32; 1];
    let mut channel = None;
    if m.me == 0 {
        let peer = peer.ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))?;
        let psize = cx.e().check_comm(peer)?.peers().size();
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
        swap_ints(cx, ch, 0, &[size as i32], &mut k, ints)?;
        if k[0] <= 0 || k[0] as usize > world {
            k[0] = -1;
        } else {
            for r in 0..size {
                ints[r as usize] = cx.e().p2p.comms.groups.proc_of(c.group, r).0 as i32;
            }
            swap_ints(cx, ch, size as usize, &[], &mut [], ints)?;
        }
        channel = Some(ch);
    }
    // SAFETY: `k` is borrowed for the call.
    unsafe { bcast_among(cx, &m, k.as_mut_ptr().cast(), 1, Datatype::INT)? };
    if k[0] <= 0 {
        return Err(Error::bad_arg("the remote group's size is not valid"));
    }
    let k = k[0] as u32;
    let list = ints[world..world + k as usize].as_mut_ptr();
    // SAFETY: `k` ints of the scratch are borrowed for the call.
    unsafe { bcast_among(cx, &m, list.cast(), k as usize, Datatype::INT)? };
    let remote_list = &ints[world..world + k as usize];
    let groups = &cx.e().p2p.comms.groups;
    let valid = remote_list.iter().all(|&p| {
        p >= 0 && (p as usize) < world && groups.rank_of(c.group, ProcId(p as u32)).is_none()
    });
    if !valid {
        return Err(Error::new(
            ErrorClass::Group,
            Reason::BadArgument {
                what: "the remote group names a process outside the job or of the local group",
            },
        ));
    }
    let remote = {
        let ints = &*ints;
        cx.e()
            .p2p
            .comms
            .groups
            .gather(k, |_, i| ProcId(ints[world + i as usize] as u32))?
    };
    let cid = match agree_cid(cx, &Members { tag: TAG_CID, ..m }, Some(channel)) {
        Ok(cid) => cid,
        Err(e) => {
            cx.e().p2p.comms.groups.release(remote);
            return Err(e);
        }
    };
    install_inter(cx, &c, cid, remote, local)
}

/// Installs the intercommunicator of local communicator `c` (slot `local`) with the remote
/// group `remote` under the agreed context id `cid`, and its hidden intracommunicator.
pub(super) fn install_inter(
    cx: &mut Inside,
    c: &Comm,
    cid: ContextId,
    remote: Group,
    local: CommId,
) -> Result<CommId> {
    let group = cx.e().p2p.comms.groups.for_comm(c.group);
    let inter = install(
        &mut cx.e().p2p,
        Comm {
            cid,
            group,
            remote: Some(remote),
            local_comm: None,
            hidden: false,
            topo: None,
            rank: c.rank,
            errhandler: c.errhandler,
            freed: false,
            hints: crate::comm::CommHints::empty(),
        },
    )?;
    attach_local_comm(cx, inter, local)?;
    Ok(inter)
}

/// Gives intercommunicator `inter` its hidden intracommunicator: a duplicate of `local`.
/// Made after `inter` is installed, so that the two context ids differ.
fn attach_local_comm(cx: &mut Inside, inter: CommId, local: CommId) -> Result<()> {
    match dup(cx, local) {
        Ok(l) => {
            cx.e().p2p.comms.get_mut(l)?.hidden = true;
            cx.e().p2p.comms.get_mut(inter)?.local_comm = Some(l);
            Ok(())
        }
        Err(e) => {
            let _ = free(cx, inter);
            Err(e)
        }
    }
}

/// `MPI_Intercomm_merge`: an intracommunicator over both groups of `inter`, the side that
/// passed `high` = false first (when both sides pass the same, the side whose leader is the
/// lower process goes first; across two jobs, the side whose leader's business card is lower).
pub fn intercomm_merge(cx: &mut Inside, inter: CommId, high: bool) -> Result<CommId> {
    let c = cx.e().check_comm(inter)?.clone();
    let (Some(local), Some(remote)) = (c.local_comm, c.remote) else {
        return Err(not_inter());
    };
    let m = whole(&cx.e().p2p, local, TAG_INTER)?;
    let ch = Channel {
        comm: inter,
        peer: 0,
        tag: TAG_INTER,
    };
    let my_leader = cx.e().p2p.comms.groups.proc_of(c.group, 0).0 as i32;
    let mut theirs = [0i32; 2];
    if m.me == 0 {
        swap_ints(cx, ch, 0, &[high as i32, my_leader], &mut theirs, &mut [])?;
    }
    // SAFETY: `theirs` is borrowed for the call.
    unsafe { bcast_among(cx, &m, theirs.as_mut_ptr().cast(), 2, Datatype::INT)? };
    // Leaders of two jobs number their processes apart, so their ids cannot order the sides:
    // both sides see the other job's leader past their world, and order by the leaders'
    // business cards instead.
    let other_job = cx.e().p2p.comms.groups.proc_of(remote, 0).0 >= cx.e().p2p.world;
    let me_first = if high != (theirs[0] != 0) {
        !high
    } else if other_job {
        leader_card_first(cx, &m, ch)?
    } else {
        my_leader < theirs[1]
    };
    let cid = agree_cid(
        cx,
        &Members { tag: TAG_CID, ..m },
        Some((m.me == 0).then_some(ch)),
    )?;
    let (a, b) = if me_first {
        (c.group, remote)
    } else {
        (remote, c.group)
    };
    let n = a.size() + b.size();
    let group = cx.e().p2p.comms.groups.gather(n, |t, i| {
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
    install(
        &mut cx.e().p2p,
        Comm {
            cid,
            group,
            remote: None,
            local_comm: None,
            hidden: false,
            topo: None,
            rank,
            errhandler: c.errhandler,
            freed: false,
            hints: crate::comm::CommHints::empty(),
        },
    )
}

/// Whether this side of an intercommunicator with another job goes first in a merge whose
/// two sides passed the same `high`: the leaders swap their business cards
/// ([`crate::dpm::Card`], written with base 0) and the side with the lower card goes first.
/// Two live processes that reach each other never have the same card: their tcp listening
/// addresses differ. Collective over the local group `m`; the leaders talk over `ch`.
fn leader_card_first(cx: &mut Inside, m: &Members, ch: Channel) -> Result<bool> {
    const WORDS: usize = 1 + crate::dpm::MAX_CARD / 4;
    let mut verdict = [0i32; 1];
    if m.me == 0 {
        let mut card = [0u8; crate::dpm::MAX_CARD];
        let n = cx.e().write_card(0, &mut card)?;
        let mut mine = [0i32; WORDS];
        mine[0] = n as i32;
        for (w, chunk) in mine[1..].iter_mut().zip(card.chunks(4)) {
            let mut b = [0u8; 4];
            b[..chunk.len()].copy_from_slice(chunk);
            // Big-endian words compare as the bytes do.
            *w = i32::from_be_bytes(b);
        }
        let mut theirs = [0i32; WORDS];
        swap_ints(cx, ch, 0, &mine, &mut theirs, &mut [])?;
        let key = |w: &[i32; WORDS]| {
            let mut bytes = [0u8; crate::dpm::MAX_CARD];
            for (out, word) in bytes.chunks_mut(4).zip(&w[1..]) {
                out.copy_from_slice(&word.to_be_bytes());
            }
            let len = (w[0].max(0) as usize).min(crate::dpm::MAX_CARD);
            (bytes, len)
        };
        let ((a, la), (b, lb)) = (key(&mine), key(&theirs));
        verdict[0] = match a[..la].cmp(&b[..lb]) {
            core::cmp::Ordering::Less => 1,
            core::cmp::Ordering::Greater => 0,
            core::cmp::Ordering::Equal => -1,
        };
    }
    // SAFETY: `verdict` is borrowed for the call.
    unsafe { bcast_among(cx, m, verdict.as_mut_ptr().cast(), 1, Datatype::INT)? };
    match verdict[0] {
        1 => Ok(true),
        0 => Ok(false),
        _ => Err(Error::unsupported(
            "MPI_Intercomm_merge with the same `high` at both sides: the two jobs' leaders \
             cannot be told apart (pass different values)",
        )),
    }
}

/// With the other leader: swaps `mine` for `theirs` when `list` is 0, else sends the first
/// `list` of `ints` and receives the other side's list after the job's size.
fn swap_ints(
    cx: &mut Inside,
    ch: Channel,
    list: usize,
    mine: &[i32],
    theirs: &mut [i32],
    ints: &mut [i32],
) -> Result<()> {
    let world = cx.e().p2p.procs.len();
    let r = if list == 0 {
        // SAFETY: `theirs` is borrowed until the receive completes.
        let conv =
            unsafe { Unpacker::elements(theirs.as_mut_ptr().cast(), theirs.len(), Datatype::INT) };
        let r = post_recv(cx, conv, ch)?;
        // SAFETY: `mine` is borrowed until the send completes.
        let conv = unsafe { Packer::elements(mine.as_ptr().cast(), mine.len(), Datatype::INT) };
        send_on(cx, conv, ch)?;
        r
    } else {
        let at = ints[world..].as_mut_ptr();
        // SAFETY: the scratch after `world` is borrowed until the receive completes; the
        // sender's count is at most `world` (checked by the size swap).
        let conv = unsafe { Unpacker::elements(at.cast(), world, Datatype::INT) };
        let r = post_recv(cx, conv, ch)?;
        let at = ints.as_ptr();
        // SAFETY: the first `list` ints are borrowed until the send completes.
        let conv = unsafe { Packer::elements(at.cast(), list, Datatype::INT) };
        send_on(cx, conv, ch)?;
        r
    };
    let status = cx.wait(r)?;
    match status.error {
        None => Ok(()),
        Some(e) => Err(e),
    }
}

/// Sorts `(node, rank, _)` triples by node, then rank, so that each node's members form a run;
/// `None` unless they span more than one node with more than one member on some node, else
/// where rank `me`'s run starts, its length, and `me`'s place in it.
fn node_runs(triples: &mut [[i32; 3]], me: i32) -> Option<(usize, usize, usize)> {
    triples.sort_unstable_by_key(|e| (e[0], e[1]));
    let (mut nodes, mut widest, mut run) = (0, 0, 0);
    let (mut start, mut node_rank) = (0, 0);
    for i in 0..triples.len() {
        if i == 0 || triples[i][0] != triples[i - 1][0] {
            nodes += 1;
            run = 0;
        }
        run += 1;
        widest = widest.max(run);
        if triples[i][1] == me {
            (start, node_rank) = (i + 1 - run, run - 1);
        }
    }
    if nodes < 2 || widest < 2 {
        return None;
    }
    let len = triples[start..]
        .iter()
        .take_while(|e| e[0] == triples[start][0])
        .count();
    Some((start, len, node_rank))
}

/// Given the triples [`node_runs`] sorted (flattened), writes the ranks of the runs' first
/// members — the nodes' leaders — in ascending order to the front; returns how many.
fn leaders_in_order(ints: &mut [i32]) -> usize {
    let mut k = 0;
    let mut prev = None;
    for i in 0..ints.len() / 3 {
        // Read before the write: `k <= i <= 3 i`, so no unread triple is overwritten.
        let (nd, r) = (ints[3 * i], ints[3 * i + 1]);
        if prev != Some(nd) {
            ints[k] = r;
            k += 1;
        }
        prev = Some(nd);
    }
    ints[..k].sort_unstable();
    k
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

// ---- freeing, and MPI_Comm_idup ---------------------------------------------------------------

/// Frees communicator `id` (`MPI_Comm_free`). Receives still posted on it complete normally;
/// its slot and context id are released once they have. Its hidden node levels go with it,
/// once the non-blocking node-aware collectives still to start phases on them have.
pub fn free(cx: &mut Inside, id: CommId) -> Result<()> {
    if let Levels::Nodes { node, leaders, .. } = cx.e().p2p.comms.levels(id) {
        crate::coll::drain(cx, node, leaders);
    }
    cx.e().building().free(id)
}

/// Communicator construction that runs without waiting — `MPI_Comm_idup` from progress, and
/// freeing — with point-to-point and the collectives borrowed.
pub(crate) struct Building<'a> {
    pub(crate) p2p: &'a mut P2p,
    pub(crate) coll: &'a mut crate::coll::CollState,
    pub(crate) creation: &'a mut Scratch,
    /// Some freed communicator waits for its receives or collectives to end.
    pub(crate) draining: &'a mut bool,
}

impl Building<'_> {
    fn colls(&mut self) -> crate::coll::Colls<'_> {
        crate::coll::Colls {
            p2p: self.p2p,
            coll: self.coll,
        }
    }

    /// Frees communicator `id` whose node levels no collective still needs (see [`free`]).
    pub(crate) fn free(&mut self, id: CommId) -> Result<()> {
        // A communicator an MPI_Comm_idup is still making is freed when it is made.
        if self.p2p.comms.is_reserved(id) && self.idup_discard(id) {
            return Ok(());
        }
        let local = self.p2p.comm(id)?.local_comm;
        if id == CommId::WORLD || id == CommId::SELF {
            return Err(Error::new(
                ErrorClass::Comm,
                Reason::BadArgument {
                    what: "predefined communicators cannot be freed",
                },
            ));
        }
        // Done with its shared-memory collectives' cells (while its context id is still its).
        self.colls().sm_release(id);
        if self.p2p.pml.comm_busy(id) || self.colls().coll_uses(id) {
            self.p2p.comms.get_mut(id)?.freed = true;
            *self.draining = true;
        } else {
            self.p2p.pml.comm_removed(id);
            self.p2p.comms.remove(id)?;
        }
        if let Some(l) = local {
            self.free(l)?;
        }
        // The hidden node levels go with it (every member frees them at the same call).
        if let Levels::Nodes { node, leaders, .. } = self.p2p.comms.levels(id) {
            self.p2p.comms.set_levels(id, Levels::Flat);
            for c in leaders.into_iter().chain([node]) {
                self.free(c)?;
            }
        }
        self.reap();
        // The processes of another job this reached may be reached by nothing now.
        self.p2p.release_unreached();
        Ok(())
    }

    /// Releases freed communicators whose receives and non-blocking collectives have all
    /// completed.
    pub(crate) fn reap(&mut self) {
        let mut cur = 0;
        let mut removed = false;
        loop {
            let Some(id) = self.p2p.comms.draining().find(|c| c.0 >= cur) else {
                break;
            };
            cur = id.0 + 1;
            if !self.p2p.pml.comm_busy(id) && !self.colls().coll_uses(id) {
                self.p2p.pml.comm_removed(id);
                let _ = self.p2p.comms.remove(id);
                removed = true;
            }
        }
        if removed {
            self.p2p.release_unreached();
        }
        *self.draining = self.p2p.comms.draining().next().is_some();
    }

    /// Ids held by the non-blocking agreements in flight here.
    fn held_cids(&self) -> impl Iterator<Item = u16> + '_ {
        self.creation
            .idup_slots()
            .flatten()
            .flat_map(|d| [d.held, d.main])
            .flatten()
    }

    /// Whether id `c` is free here: not in use, not held by an agreement.
    fn cid_free_here(&self, c: u64) -> bool {
        let used = self.p2p.comms.used_cids();
        (c as usize) < used.len() * 64
            && used[c as usize / 64] & (1 << (c % 64)) == 0
            && self.held_cids().all(|h| h as u64 != c)
    }

    /// `MPI_Comm_idup`: starts duplicating `parent` (intra- or intercommunicator) and returns
    /// at once with the new communicator's handle — usable only once the request (of `scope`)
    /// has completed — and the request. The agreement on the new context id never blocks (see
    /// `Idup` in this module); the engine's progress runs it. Collective over `parent`, in the
    /// same order as its other collectives.
    // Reached only from the C API.
    #[cfg_attr(not(feature = "capi"), allow(dead_code))]
    pub fn comm_idup(&mut self, parent: CommId, scope: u32) -> Result<(CommId, ReqId)> {
        let p = self.p2p.comm(parent)?.clone();
        let slot = self.creation.free_idup_slot()?;
        // Tags: taken now, in the user's order of collectives on the parent (see `Idup`).
        let tags = match p.local_comm {
            None => [self.colls().next_coll_tag(parent), 0, 0, 0],
            Some(l) => [
                self.colls().next_coll_tag(parent),
                self.colls().next_coll_tag(l),
                self.colls().next_coll_tag(l),
                self.colls().next_coll_tag(l),
            ],
        };
        self.p2p.comm_room()?;
        let new = self.p2p.comms.reserve(Comm {
            local_comm: None,
            hidden: false,
            ..p
        })?;
        let req = match self.p2p.pml.requests_mut().pending(scope) {
            Ok(r) => r,
            Err(e) => {
                self.p2p.comms.unreserve(new);
                return Err(e);
            }
        };
        *self.creation.idup_slot(slot) = Some(Idup {
            parent,
            new,
            req,
            tags,
            round: Round::Propose,
            stage: 0,
            start: 0,
            candidate: 0,
            held: None,
            main: None,
            input: [0; 2],
            out: [[0; 2]; 2],
            reqs: [None; 2],
            failed: None,
            discard: false,
        });
        self.creation.idups_active += 1;
        self.idup_round(slot);
        Ok((new, req))
    }

    /// Advances the `MPI_Comm_idup`s in flight; returns how many rounds or agreements ended.
    #[inline(always)]
    pub(crate) fn idup_progress(&mut self) -> usize {
        if self.creation.idups_active == 0 {
            return 0;
        }
        self.idup_progress_busy()
    }

    #[inline(never)]
    fn idup_progress_busy(&mut self) -> usize {
        let mut n = 0;
        for i in 0..self.creation.idup_cap {
            let Some(d) = *self.creation.idup(i) else {
                continue;
            };
            let mut err = None;
            let mut pending = false;
            for k in 0..2 {
                let Some(id) = d.reqs[k] else { continue };
                match self.p2p.pml.requests_mut().test(id) {
                    Ok(None) => pending = true,
                    Ok(Some(st)) => {
                        self.idup_edit(i, |x| x.reqs[k] = None);
                        err = err.or(st.error);
                    }
                    Err(e) => {
                        self.idup_edit(i, |x| x.reqs[k] = None);
                        err = err.or(Some(e));
                    }
                }
            }
            let failed = d.failed.or(err);
            if let Some(e) = err {
                self.idup_edit(i, |x| {
                    x.failed.get_or_insert(e);
                });
            }
            if pending {
                continue;
            }
            n += 1;
            match failed {
                Some(e) => self.idup_end(i, Err(e)),
                None => self.idup_next(i),
            }
        }
        n
    }

    /// Edits agreement `i`. Only `idup_end` empties its slot, after which nothing is left to
    /// edit.
    fn idup_edit(&mut self, i: u32, edit: impl FnOnce(&mut Idup)) {
        if let Some(x) = self.creation.idup_slot(i) {
            edit(x);
        }
    }

    /// The members' answer to the round that has just ended: the maximum of both results.
    fn idup_next(&mut self, i: u32) {
        let Some(d) = *self.creation.idup(i) else {
            return;
        };
        let inter = d.stage == 0 && self.p2p.comms.get_any(d.parent).is_some_and(Comm::is_inter);
        let r = if inter {
            [d.out[0][0].max(d.out[1][0]), d.out[0][1].max(d.out[1][1])]
        } else {
            d.out[0]
        };
        let busy = r[1] != 0;
        match d.round {
            Round::Propose if busy => {
                self.idup_release(i);
            }
            Round::Propose if r[0] == NO_CID => {
                let nw = self.p2p.comms.used_cids().len();
                self.idup_end(
                    i,
                    Err(Error::exhausted(
                        "context ids",
                        (nw * 64) as u32,
                        super::MAX_CIDS.name,
                    )),
                );
                return;
            }
            Round::Propose => {
                self.idup_edit(i, |x| {
                    x.candidate = r[0];
                    x.round = Round::Confirm;
                });
            }
            Round::Confirm if busy => {
                self.idup_release(i);
                self.idup_edit(i, |x| x.round = Round::Propose);
            }
            Round::Confirm if r[0] != 0 => {
                self.idup_release(i);
                self.idup_edit(i, |x| {
                    x.start = d.candidate + 1;
                    x.round = Round::Propose;
                });
            }
            Round::Confirm => {
                let inter_parent = self.p2p.comms.get_any(d.parent).is_some_and(Comm::is_inter);
                if d.stage == 0 && inter_parent {
                    // The intercommunicator's id is agreed and stays held; now its hidden
                    // local side's, among the local group.
                    self.idup_edit(i, |x| {
                        x.main = x.held.take();
                        x.stage = 1;
                        x.start = 0;
                        x.round = Round::Propose;
                    });
                } else {
                    let r = self.idup_install(i);
                    self.idup_end(i, r);
                    return;
                }
            }
        }
        self.idup_round(i);
    }

    /// Lets go of the id held for the current agreement.
    fn idup_release(&mut self, i: u32) {
        self.idup_edit(i, |x| x.held = None);
    }

    /// Starts agreement `i`'s current round: this member's contribution, then the allreduce(s).
    fn idup_round(&mut self, i: u32) {
        let Some(d) = *self.creation.idup(i) else {
            return;
        };
        // Only the agreement with the lowest key here holds ids: with several holding at once,
        // members hold different ids in different orders, confirm rounds fail and the ids
        // tried only climb, until some agreement ran out of ids with most of them free. The
        // lowest key of the job is lowest at all its members, so it always goes on.
        let key = d.key(self.p2p);
        let lower = self
            .creation
            .idup_slots()
            .flatten()
            .any(|o| o.key(self.p2p) < key);
        let busy = lower || !self.creation.agreeing.is_empty();
        let input = match d.round {
            _ if busy => [0, 1],
            Round::Propose => {
                let nw = self.p2p.comms.used_cids().len() as u64 * 64;
                match (d.start..nw).find(|&c| self.cid_free_here(c)) {
                    Some(c) => {
                        self.idup_edit(i, |x| x.held = Some(c as u16));
                        [c, 0]
                    }
                    None => [NO_CID, 0],
                }
            }
            Round::Confirm => {
                let ok = if d.held == Some(d.candidate as u16) {
                    true
                } else {
                    self.idup_release(i);
                    let free = self.cid_free_here(d.candidate);
                    if free {
                        self.idup_edit(i, |x| x.held = Some(d.candidate as u16));
                    }
                    free
                };
                [u64::from(!ok), 0]
            }
        };
        let Some(x) = self.creation.idup_slot(i) else {
            return;
        };
        x.input = input;
        let inp = x.input.as_ptr();
        let out0 = x.out[0].as_mut_ptr();
        let out1 = x.out[1].as_mut_ptr();
        let allreduce = |recv: *mut u64| crate::coll::Call::Allreduce {
            send: Some(inp.cast()),
            recv: recv.cast(),
            count: 2,
            dt: Datatype::UINT64_T,
            op: crate::op::Op::Max,
        };
        let parent = self.p2p.comms.get_any(d.parent).cloned();
        let started = (|| -> Result<[Option<ReqId>; 2]> {
            let parent = parent.ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))?;
            // SAFETY: the buffers are the idup slot's, which stays put until both allreduces
            // have completed (the slot is only emptied after its requests are tested done).
            unsafe {
                match (d.stage, parent.local_comm) {
                    (0, None) => Ok([
                        Some(self.colls().collective_tagged(
                            d.parent,
                            allreduce(out0),
                            0,
                            d.tags[0],
                            0,
                        )?),
                        None,
                    ]),
                    // Across the groups (each gets the other's maximum) and within this one.
                    (0, Some(l)) => Ok([
                        Some(self.colls().collective_tagged(
                            d.parent,
                            allreduce(out0),
                            0,
                            d.tags[0],
                            d.tags[1],
                        )?),
                        Some(self.colls().collective_tagged(
                            l,
                            allreduce(out1),
                            0,
                            d.tags[2],
                            0,
                        )?),
                    ]),
                    (_, Some(l)) => Ok([
                        Some(self.colls().collective_tagged(
                            l,
                            allreduce(out0),
                            0,
                            d.tags[3],
                            0,
                        )?),
                        None,
                    ]),
                    (_, None) => Err(Error::new(
                        ErrorClass::Intern,
                        Reason::BadArgument {
                            what: "idup of an intracommunicator in its second stage",
                        },
                    )),
                }
            }
        })();
        match started {
            Ok(reqs) => self.idup_edit(i, |x| x.reqs = reqs),
            Err(e) => self.idup_end(i, Err(e)),
        }
    }

    /// Installs agreement `i`'s communicator (and an intercommunicator's hidden local side).
    fn idup_install(&mut self, i: u32) -> Result<()> {
        let Some(d) = *self.creation.idup(i) else {
            return Err(Error::internal("an idup being installed has no slot"));
        };
        let parent = self
            .p2p
            .comms
            .get_any(d.parent)
            .cloned()
            .ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))?;
        let (cid, local_cid) = match d.main {
            Some(m) => (m, d.held),
            None => (
                d.held.ok_or(Error::internal(
                    "an idup confirmed without a held context id",
                ))?,
                None,
            ),
        };
        let local = match (parent.local_comm, local_cid) {
            (Some(l), Some(lc)) => {
                let lp = self
                    .p2p
                    .comms
                    .get_any(l)
                    .cloned()
                    .ok_or(Error::new(ErrorClass::Comm, Reason::InvalidComm))?;
                let group = self.p2p.comms.groups.for_comm(lp.group);
                Some(install(
                    self.p2p,
                    Comm {
                        cid: ContextId(lc),
                        group,
                        remote: None,
                        local_comm: None,
                        hidden: true,
                        topo: None,
                        freed: false,
                        hints: crate::comm::CommHints::empty(),
                        ..lp
                    },
                )?)
            }
            _ => None,
        };
        let group = self.p2p.comms.groups.for_comm(parent.group);
        let remote = parent.remote.map(|r| self.p2p.comms.groups.for_comm(r));
        if let Some(t) = parent.topo {
            self.p2p.comms.topos.retain(t);
        }
        let comm = Comm {
            cid: ContextId(cid),
            group,
            remote,
            local_comm: local,
            hidden: false,
            freed: false,
            hints: crate::comm::CommHints::empty(),
            ..parent
        };
        self.idup_edit(i, |x| {
            x.held = None;
            x.main = None;
        });
        if let Err(e) = self.p2p.comms.fill(d.new, comm) {
            self.p2p.comms.groups.release(group);
            if let Some(r) = remote {
                self.p2p.comms.groups.release(r);
            }
            if let Some(t) = parent.topo {
                self.p2p.comms.topos.release(t);
            }
            if let Some(l) = local {
                let _ = self.free(l);
            }
            return Err(e);
        }
        // The reservation made the slot's state room (`comm_idup`), so this does not fail.
        self.p2p
            .pml
            .comm_added(&self.p2p.comms, &self.p2p.types, d.new)
    }

    /// Marks the idup making `new` to free it once made (`MPI_Comm_free` of its handle before
    /// then); false if no idup is making it.
    pub(crate) fn idup_discard(&mut self, new: CommId) -> bool {
        match self
            .creation
            .idups
            .iter_mut()
            .flat_map(|s| s.iter_mut())
            .flatten()
            .find(|d| d.new == new)
        {
            Some(d) => {
                d.discard = true;
                true
            }
            None => false,
        }
    }

    /// Ends agreement `i`: completes the user's request with `r`; on failure the reserved
    /// slot is given back.
    fn idup_end(&mut self, i: u32, r: Result<()>) {
        let Some(d) = self.creation.idup_slot(i).take() else {
            return;
        };
        self.creation.idups_active -= 1;
        if r.is_err() {
            self.p2p.comms.unreserve(d.new);
        } else if d.discard {
            let _ = self.free(d.new);
        }
        self.p2p.pml.requests_mut().finish(
            d.req,
            Status {
                error: r.err(),
                ..Status::EMPTY
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn triples<const N: usize>(nodes: [i32; N]) -> [[i32; 3]; N] {
        core::array::from_fn(|r| [nodes[r], r as i32, 0])
    }

    #[test]
    fn runs_of_an_interleaved_layout() {
        // Ranks 0..6 round robin over nodes 7 and 3: node 3 holds 1, 3, 5.
        let mut t = triples([7, 3, 7, 3, 7, 3]);
        assert_eq!(node_runs(&mut t, 3), Some((0, 3, 1)));
        assert_eq!(node_runs(&mut t, 4), Some((3, 3, 2)));
        let flat = t.as_flattened_mut();
        assert_eq!(leaders_in_order(flat), 2);
        assert_eq!(&flat[..2], &[0, 1]);
    }

    #[test]
    fn uneven_and_three_nodes() {
        // 3 + 1: the lone member is its node's leader.
        let mut t = triples([0, 0, 0, 1]);
        assert_eq!(node_runs(&mut t, 3), Some((3, 1, 0)));
        assert_eq!(node_runs(&mut t, 2), Some((0, 3, 2)));
        let flat = t.as_flattened_mut();
        assert_eq!(leaders_in_order(flat), 2);
        assert_eq!(&flat[..2], &[0, 3]);
        // Nodes listed out of order: leaders are still in rank order.
        let mut t = triples([5, 2, 9, 2, 5, 9, 9]);
        assert_eq!(node_runs(&mut t, 6), Some((4, 3, 2)));
        let flat = t.as_flattened_mut();
        assert_eq!(leaders_in_order(flat), 3);
        assert_eq!(&flat[..3], &[0, 1, 2]);
    }

    #[test]
    fn no_levels_on_one_node_or_one_member_per_node() {
        assert_eq!(node_runs(&mut triples([4, 4, 4]), 0), None);
        assert_eq!(node_runs(&mut triples([1, 2, 3, 4]), 2), None);
    }
}
