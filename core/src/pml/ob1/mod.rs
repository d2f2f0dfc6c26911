//! ob1: MPI point-to-point semantics over the BTLs (matching and protocols in this process).
//!
//! - `sendreq`: starting sends (eager, rendezvous), answering ACKs, scheduling fragments.
//! - `recvreq`: posting receives, matching the unexpected queue, probes, matched probes.
//! - `recvfrag`: arriving fragments: parsing, validation, per-peer ordering, matching.
//! - [`unexpected`]: storage for messages that arrived before their receive.
//!
//! Ordering: every (communicator, sender, receiver) triple numbers its messages. A receiver
//! matches a sender's messages strictly in that order; one that arrives early (over another BTL,
//! or reordered) waits on the communicator's out-of-order list until its turn. Messages for a
//! communicator this process has not created yet (a faster peer already uses a new duplicate)
//! wait on the orphan list.
//!
//! Protocols: a message whose header and payload fit the first route's eager limit goes in one
//! fragment. Larger ones, and synchronous sends of any size, send a rendezvous header with as
//! much payload as fits; the receiver, once matched, answers with an ACK carrying its request id
//! and how much it already has; the sender then sends the rest as fragments, taking the send-list
//! routes in turn. A synchronous send completes at the ACK.
//!
//! Nothing here calls an allocator: requests (the core's [`Requests`]), unexpected records and
//! their payload chunks come from pools that start small and grow by grants of the engine's
//! memory account, up to their parameters' maxima and `mpi_memory_max`. Running out of requests
//! is an `MPI_ERR_NO_MEM` naming the parameter to raise; running out of unexpected storage makes
//! arriving fragments wait in their transport.

pub mod unexpected;

mod blocking;
mod exact;
mod matching;
mod recvfrag;
mod recvreq;
mod sendreq;

pub use recvfrag::Incoming;

use super::request::{Op, RecvState, ReqId, Status};
use super::requests::Requests;
use super::{MsgId, Stats};
use crate::arena::{Arena, Sizer};
use crate::array::Array;
use crate::comm::{Comm, CommHints, CommId, CommTable, COMMS_INITIAL, COMM_MAX};
use crate::datatype::repr::Repr;
use crate::datatype::table::TypeTable;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::list::List;
use crate::params::{Default, Kind, ParamDef, Params};
use crate::platform::{Level, Platform};
use crate::pool::{Capacity, Pool};
use unexpected::{unex_link, Chunks, UnexMsg};

/// Unexpected-message records carved at init.
pub const UNEX_MSGS_INITIAL: u32 = 1024;
/// Receives and messages queued on a communicator past which its no-wildcard hints put it in
/// exact mode (the per-communicator queues' bucket count).
pub const EXACT_DEPTH: u32 = matching::BUCKETS as u32;
/// Unexpected payload chunks carved at init.
pub const UNEX_CHUNKS_INITIAL: u32 = 128;

/// `pml_unexpected_msgs`.
pub static UNEX_MSGS: ParamDef = ParamDef {
    name: "pml_unexpected_msgs",
    // A matched-probe message handle of the C ABI encodes the slot in 22 bits.
    kind: Kind::Int {
        min: 4,
        max: crate::pml::HANDLE_SLOTS as i64,
    },
    default: Default::Int(crate::pml::HANDLE_SLOTS as i64),
    description: "Most messages held before a matching receive is posted (or out of order); \
                  starts at 1024 and grows within mpi_memory_max; at most 2^22, what a C handle \
                  encodes",
};

/// `pml_unexpected_chunk_size`.
pub static UNEX_CHUNK_SIZE: ParamDef = ParamDef {
    name: "pml_unexpected_chunk_size",
    kind: Kind::Int {
        min: 64,
        max: 1 << 20,
    },
    default: Default::Int(512),
    description: "Bytes per chunk of unexpected-message payload storage (payloads of 16 bytes or \
                  less stay in the message's record)",
};

/// `pml_unexpected_chunks`.
pub static UNEX_CHUNKS: ParamDef = ParamDef {
    name: "pml_unexpected_chunks",
    kind: Kind::Int {
        min: 4,
        max: 1 << 30,
    },
    default: Default::Int(1 << 30),
    description: "Most chunks of unexpected-message payload storage (times the chunk size = \
                  bytes); starts at 128 and grows within mpi_memory_max",
};

/// ob1's view of one communicator.
#[derive(Default)]
pub(crate) struct PmlComm {
    /// Posted receives.
    posted: matching::PostedQueue,
    /// In-order messages not yet matched.
    unexpected: matching::UnexQueue,
    /// Messages that arrived ahead of their sequence number.
    cant_match: List,
    /// The hints the queues were last set up for ([`Ob1::follow_hints`]).
    seen: CommHints,
    /// The hints rule out both wildcards: exact mode once the queues are deep
    /// ([`Ob1::deepen`]); the communicator's key in the [`exact::ExactIndex`] then.
    exact_wanted: Option<exact::ExactKey>,
    /// The hints rule out both wildcards (exact mode wanted or entered).
    hinted: bool,
}

/// Per (communicator, peer) sequence numbers.
#[derive(Clone, Copy, Default)]
struct PeerSeq {
    /// Next sequence number to send to the peer.
    send: u16,
    /// Next sequence number expected from the peer.
    expect: u16,
}

/// The ob1 PML.
pub struct Ob1 {
    /// Every request of the process.
    pub(crate) requests: Requests,
    unex: Pool<UnexMsg>,
    chunks: Chunks,
    /// Per communicator slot: the matching queues.
    comms: Array<PmlComm>,
    /// The exact-mode queues of every communicator whose hints rule out wildcards.
    exact: exact::ExactIndex,
    /// Per communicator slot and peer rank (`comm * world + rank`: a communicator's numbers
    /// are one stretch, so growing is a plain move).
    seqs: Array<PeerSeq>,
    world: u32,
    orphans: List,
    pending_start: List,
    pending_ack: List,
    pending_frags: List,
    /// Per process: sends waiting on `pending_start` (later sends queue behind them).
    queued: &'static mut [u32],
    /// Processes with sends waiting on `pending_start`.
    queued_peers: u32,
    /// Per process: the progress pass in which a send to it last found its route full.
    blocked: &'static mut [u32],
    pass: u32,
    /// Zero-copy fragments handed to BTLs and not yet reported complete, over all sends.
    inflight: u32,
    /// Per process: the form its data takes (receiver makes right).
    reprs: &'static mut [Repr],
    /// Processes whose form differs from ours: none in most jobs, and then no arriving message
    /// needs its convertor told where it comes from.
    foreign: u32,
    platform: &'static dyn Platform,
    /// Counters.
    pub stats: Stats,
    /// The first peer a BTL reported unreachable ([`crate::btl::Sink::unreachable`]): the
    /// engine ends the job at its next progress.
    pub unreachable: Option<crate::rte::ProcId>,
    /// The blocking receive (`MPI_Recv`) waiting outside the posted queue ([`blocking`]).
    blocking: blocking::Blocking,
}

impl Ob1 {
    /// Arena bytes for the configured capacities (per-communicator state for the first
    /// [`COMMS_INITIAL`] of at most `comms` communicators).
    pub fn size(params: &Params, sizer: &mut Sizer, world: u32, comms: u32) {
        let (unex, chunks) = Ob1::capacities(params);
        Requests::size(params, sizer);
        Pool::<UnexMsg>::size(sizer, unex);
        Chunks::size(sizer, chunks, params.usize(&UNEX_CHUNK_SIZE));
        let (initial, max) = (COMMS_INITIAL.min(comms) as usize, comms as usize);
        Array::<PmlComm>::size(sizer, initial, max);
        exact::ExactIndex::size(sizer);
        Array::<PeerSeq>::size(
            sizer,
            initial * world as usize,
            max.saturating_mul(world as usize),
        );
        sizer
            .slice::<u32>(world as usize * 2)
            .slice::<Repr>(world as usize);
    }

    /// The unexpected-record and payload-chunk pools' capacities.
    fn capacities(params: &Params) -> (Capacity, Capacity) {
        (
            Capacity::growing(UNEX_MSGS_INITIAL, params.u32(&UNEX_MSGS)),
            Capacity::growing(UNEX_CHUNKS_INITIAL, params.u32(&UNEX_CHUNKS)),
        )
    }

    /// A PML for a job of `world` processes and up to `comms` communicators; its pools and
    /// per-communicator state grow through `arena`'s memory account.
    pub fn new(
        params: &Params,
        arena: &mut Arena,
        world: u32,
        comms: u32,
        platform: &'static dyn Platform,
    ) -> Result<Ob1> {
        let (unex, chunks) = Ob1::capacities(params);
        let (initial, max) = (COMMS_INITIAL.min(comms) as usize, comms as usize);
        Ok(Ob1 {
            requests: Requests::new(params, arena)?,
            unex: Pool::new(arena, unex)?,
            chunks: Chunks::new(arena, chunks, params.usize(&UNEX_CHUNK_SIZE))?,
            comms: Array::new(arena, initial, max, |_| PmlComm::default())?,
            exact: exact::ExactIndex::new(arena)?,
            seqs: Array::new(
                arena,
                initial * world as usize,
                max.saturating_mul(world as usize),
                |_| PeerSeq::default(),
            )?,
            world,
            orphans: List::default(),
            pending_start: List::default(),
            pending_ack: List::default(),
            pending_frags: List::default(),
            queued: arena.slice(world as usize, |_| 0)?,
            queued_peers: 0,
            blocked: arena.slice(world as usize, |_| 0)?,
            pass: 1,
            inflight: 0,
            reprs: arena.slice(world as usize, |_| Repr::NATIVE)?,
            foreign: 0,
            platform,
            stats: Stats::default(),
            unreachable: None,
            blocking: blocking::Blocking::new(),
        })
    }

    /// Records the data representation of process `proc` (from its architecture descriptor).
    pub fn set_repr(&mut self, proc: crate::rte::ProcId, repr: Repr) {
        let was = self.reprs[proc.0 as usize].same_as(&Repr::NATIVE);
        let is = repr.same_as(&Repr::NATIVE);
        self.foreign = self.foreign + u32::from(was && !is) - u32::from(!was && is);
        self.reprs[proc.0 as usize] = repr;
    }

    /// Whether process `proc` stores data as this process does.
    pub fn same_form(&self, proc: crate::rte::ProcId) -> bool {
        self.reprs[proc.0 as usize].same_as(&Repr::NATIVE)
    }

    fn seq_index(&self, comm: CommId, rank: u32) -> usize {
        comm.0 as usize * self.world as usize + rank as usize
    }

    /// The message a matched probe took, in slot `index`, if any.
    pub fn message_at(&self, index: u32) -> Option<MsgId> {
        let key = self.unex.key_at(index)?;
        self.unex.get(key).filter(|m| m.claimed).map(|_| MsgId(key))
    }

    /// Cancels request `id` if it is a receive not yet matched; otherwise it completes normally.
    pub fn cancel(&mut self, id: ReqId) -> Result<()> {
        let req = self
            .requests
            .pool
            .get(id.0)
            .ok_or(Error::new(ErrorClass::Request, Reason::InvalidRequest))?;
        let Op::Recv(r) = &req.op else { return Ok(()) };
        if r.state != RecvState::Posted || req.complete {
            return Ok(());
        }
        let comm = r.comm;
        self.comms[comm.0 as usize]
            .posted
            .remove(&self.requests.pool, id.0.index, &mut self.exact);
        let Some(req) = self.requests.pool.get_mut(id.0) else {
            return Ok(());
        };
        if let Op::Recv(r) = &mut req.op {
            r.state = RecvState::Done;
        }
        req.status = Status {
            cancelled: true,
            ..Status::EMPTY
        };
        self.requests.complete(id.0.index);
        Ok(())
    }

    /// Whether any protocol work (queued sends, ACKs, fragments) is still pending.
    pub fn has_pending_work(&self) -> bool {
        !(self.pending_start.is_empty()
            && self.pending_ack.is_empty()
            && self.pending_frags.is_empty()
            && self.inflight == 0)
    }

    /// Makes room for the state of `slots` communicators (the communicator table's room),
    /// moving what there is to larger arrays. Running out is an error naming `mpi_memory_max`
    /// (or `comm_max`, which the table checks first); nothing changes then.
    pub(crate) fn comm_room(&mut self, slots: u32) -> Result<()> {
        let n = slots as usize;
        if n <= self.comms.len() {
            return Ok(());
        }
        const WHAT: &str = "point-to-point state of communicators";
        // Sequence numbers first: should the queues then fail to grow, the longer sequence
        // array is merely unused.
        self.seqs.grow_to(
            n.saturating_mul(self.world as usize),
            |_| PeerSeq::default(),
            WHAT,
            COMM_MAX.name,
        )?;
        self.comms
            .grow_to(n, |_| PmlComm::default(), WHAT, COMM_MAX.name)
    }

    /// Resets the state of a new communicator in slot `comm` (making room for the table's
    /// slots first), then takes in the messages that arrived for it before it existed.
    pub(crate) fn comm_added(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        comm: CommId,
    ) -> Result<()> {
        if comm.0 as usize >= self.comms.len() {
            self.comm_room(comms.capacity().max(comm.0 + 1))?;
        }
        self.comms[comm.0 as usize] = PmlComm::default();
        let base = self.seq_index(comm, 0);
        self.seqs[base..base + self.world as usize].fill(PeerSeq::default());
        let Ok(c) = comms.get_in_use(comm) else {
            return Ok(());
        };
        self.follow_hints(comm, c);
        let cid = c.cid.0;
        let mut cur = self.orphans.head();
        while let Some(i) = cur {
            cur = List::next(&self.unex, i, unex_link);
            let Some(m) = self.unex.at(i) else { break };
            if m.env.ctx == cid {
                self.orphans.remove(&self.unex, i, unex_link);
                let (from, env, kind) = (m.proc, m.env, m.kind);
                self.arrive(comms, types, from, env, kind, recvfrag::Payload::Stored(i));
            }
        }
        Ok(())
    }

    /// Communicator `comm`'s queues: receives posted, unexpected messages queued, and the most
    /// unexpected messages queued at once since it was made.
    pub fn queue_lengths(&self, comm: CommId) -> Option<(u32, u32, u32)> {
        let c = self.comms.get(comm.0 as usize)?;
        let (unex, high) = c.unexpected.lengths();
        Some((c.posted.len(), unex, high))
    }

    /// Whether communicator `comm` still has receives posted.
    pub(crate) fn comm_busy(&self, comm: CommId) -> bool {
        self.comms
            .get(comm.0 as usize)
            .is_some_and(|c| !c.posted.is_empty())
            || self.blocking_on(comm)
    }

    /// Drops the messages still held for communicator `comm`, which is being freed.
    pub(crate) fn comm_removed(&mut self, comm: CommId) {
        self.blocking_comm_removed(comm);
        let Some(c) = self.comms.get_mut(comm.0 as usize) else {
            return;
        };
        c.posted.leave_exact(&self.requests.pool, &mut self.exact);
        while let Some(i) = c
            .unexpected
            .pop(&self.unex, &mut self.exact)
            .or_else(|| c.cant_match.pop_front(&self.unex, unex_link))
        {
            if let Some(key) = self.unex.key_at(i) {
                if let Some(m) = self.unex.remove(key) {
                    self.chunks.free(m.data);
                }
            }
        }
    }

    /// Sets communicator `comm`'s queues up for its hints if they changed (through
    /// [`crate::p2p::P2p::set_hints`]), moving whatever is queued over in order.
    pub(crate) fn hints_changed(&mut self, comms: &CommTable, comm: CommId) {
        if let Ok(c) = comms.get_in_use(comm) {
            self.follow_hints(comm, c);
        }
    }

    /// Sets communicator `comm`'s queues up for its hints `c.hints` if they changed since last
    /// seen: when they are set, and when the communicator is added with hints it was made with.
    fn follow_hints(&mut self, comm: CommId, c: &Comm) {
        if self.comms[comm.0 as usize].seen != c.hints {
            self.apply_hints(comm, c.hints, c.cid.0);
        }
    }

    #[cold]
    fn apply_hints(&mut self, comm: CommId, hints: CommHints, ctx: u16) {
        let want = hints.contains(CommHints::NO_ANY_SOURCE | CommHints::NO_ANY_TAG);
        let pc = &mut self.comms[comm.0 as usize];
        pc.seen = hints;
        pc.hinted = want;
        if want {
            pc.exact_wanted = Some(exact::ExactKey { slot: comm.0, ctx });
            self.deepen(comm);
        } else {
            pc.exact_wanted = None;
            pc.posted.leave_exact(&self.requests.pool, &mut self.exact);
            pc.unexpected.leave_exact(&self.unex, &mut self.exact);
        }
    }

    /// An entry joined communicator `comm`'s queues: only a communicator whose hints rule out
    /// wildcards has anything to do (one test of a flag on the shallow path of every other).
    #[inline(always)]
    fn queued(&mut self, comm: CommId) {
        let pc = &self.comms[comm.0 as usize];
        // Shallow queues outside exact mode have nothing to do either.
        if pc.hinted
            && (pc.posted.index.is_some()
                || pc.posted.len() + pc.unexpected.lengths().0 > EXACT_DEPTH)
        {
            self.queued_hinted(comm);
        }
    }

    #[inline(never)]
    fn queued_hinted(&mut self, comm: CommId) {
        self.exact.grow_if_loaded(&self.requests.pool, &self.unex);
        self.deepen(comm);
    }

    /// Puts communicator `comm`'s queues in exact mode ([`exact`]) if its hints allow and they
    /// are deeper than [`EXACT_DEPTH`]: below that the per-communicator buckets hold about one
    /// entry each and cost fewer instructions than the shared table; past it their chains grow
    /// with the depth, the table's do not. Once entered, exact mode lasts while the hints do.
    #[inline(always)]
    fn deepen(&mut self, comm: CommId) {
        let pc = &mut self.comms[comm.0 as usize];
        if let Some(k) = pc.exact_wanted {
            if pc.posted.len() + pc.unexpected.lengths().0 > EXACT_DEPTH {
                self.enter_exact(comm, k);
            }
        }
    }

    #[cold]
    fn enter_exact(&mut self, comm: CommId, k: exact::ExactKey) {
        let pc = &mut self.comms[comm.0 as usize];
        pc.exact_wanted = None;
        pc.posted
            .enter_exact(&self.requests.pool, &mut self.exact, k);
        pc.unexpected.enter_exact(&self.unex, &mut self.exact, k);
        self.exact.grow_if_loaded(&self.requests.pool, &self.unex);
    }

    fn next_pass(&mut self) {
        self.pass = self.pass.wrapping_add(1).max(1);
    }

    fn warn(&self, args: core::fmt::Arguments<'_>) {
        crate::log!(self.platform, Level::Warn, "{}", args);
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;
    use crate::comm::{Comm, ContextId, ErrHandler};
    use crate::datatype::convertor::Unpacker;
    use crate::group::{Group, GroupTable};
    use crate::memory::tests::{account, HeapPlatform};
    use crate::pml::request::ReqId;
    use crate::pml::request::{RecvSel, Source, TagSel};
    use crate::rte::ProcId;
    use crate::topo::TopoTable;
    use crate::wire::Envelope;
    use std::vec;
    use unexpected::UnexKind;

    static PLATFORM: HeapPlatform = HeapPlatform;

    /// Process 0 of a job of two: its communicator table (up to `max` communicators) and its
    /// ob1, both growing within 64 MiB.
    fn setup(max: u32) -> (CommTable, TypeTable, Ob1) {
        let mut params = Params::new(&[]);
        for d in crate::pml::PARAMS
            .iter()
            .chain(crate::datatype::table::PARAMS.iter())
        {
            params.register(d).unwrap();
        }
        let mut arena = Arena::new(leak(16 << 20));
        arena.set_account(account(64 << 20));
        let groups = GroupTable::new(&mut arena, 8, 64, 2).unwrap();
        let topos = TopoTable::new(&mut arena, 2, 64).unwrap();
        let comms = CommTable::new(&mut arena, max, 1024, groups, topos).unwrap();
        let types = TypeTable::new(&params, &mut arena).unwrap();
        let ob1 = Ob1::new(&params, &mut arena, 2, max, &PLATFORM).unwrap();
        (comms, types, ob1)
    }

    /// Makes a duplicate of the world with context id `cid`, as `P2p::comm_room` and
    /// `install` do.
    fn add(comms: &mut CommTable, types: &TypeTable, ob1: &mut Ob1, cid: u16) -> CommId {
        comms.make_room().unwrap();
        ob1.comm_room(comms.capacity()).unwrap();
        let id = comms
            .insert(
                Comm {
                    cid: ContextId(cid),
                    group: Group::World { size: 2 },
                    remote: None,
                    local_comm: None,
                    hidden: false,
                    topo: None,
                    rank: 0,
                    errhandler: ErrHandler::Return,
                    freed: false,
                    hints: crate::comm::CommHints::empty(),
                },
                None,
            )
            .unwrap();
        ob1.comm_added(comms, types, id).unwrap();
        id
    }

    fn env(ctx: u16, tag: i32, seq: u16) -> Envelope {
        Envelope {
            ctx,
            src: 1,
            tag,
            seq,
        }
    }

    fn sel(comm: CommId, ctx: u16, tag: i32) -> RecvSel {
        RecvSel {
            comm,
            ctx,
            src: Source::Rank(1),
            tag: TagSel::Tag(tag),
        }
    }

    const FROM: ProcId = ProcId(1);

    /// Sequence numbers, unexpected messages, posted receives and messages for communicators
    /// not made yet all survive the per-communicator arrays moving to larger ones.
    #[test]
    fn per_communicator_state_survives_growth() {
        let (mut comms, types, mut ob1) = setup(1000);
        assert_eq!(ob1.comms.len(), COMMS_INITIAL as usize);
        let ids: std::vec::Vec<CommId> = (0..4)
            .map(|cid| add(&mut comms, &types, &mut ob1, cid))
            .collect();
        // Communicator 1: numbers sent and expected so far.
        let si = ob1.seq_index(ids[1], 1);
        ob1.seqs[si] = PeerSeq { send: 7, expect: 0 };
        // Communicator 2: a message waits for its receive.
        ob1.arrive(
            &comms,
            &types,
            FROM,
            env(2, 5, 0),
            UnexKind::Eager,
            recvfrag::Payload::Frag(b"abcd"),
        );
        // Communicator 3: a receive waits for its message.
        let buf = vec![0u8; 8].leak();
        let posted = ob1
            .irecv(&types, || Unpacker::from_slice(buf), &sel(ids[3], 3, 9), 0)
            .unwrap();
        // Context id 500: a faster peer's message for a communicator not made here yet.
        ob1.arrive(
            &comms,
            &types,
            FROM,
            env(500, 1, 0),
            UnexKind::Eager,
            recvfrag::Payload::Frag(b"xy"),
        );

        let more: std::vec::Vec<CommId> = (4..200)
            .map(|cid| add(&mut comms, &types, &mut ob1, cid))
            .collect();
        assert!(ob1.comms.len() >= 200 && ob1.seqs.len() == ob1.comms.len() * 2);

        assert_eq!(ob1.seqs[ob1.seq_index(ids[1], 1)].send, 7);
        let st = ob1
            .iprobe(&comms, &sel(ids[2], 2, 5))
            .unwrap()
            .expect("the unexpected message is still queued");
        assert_eq!((st.source, st.bytes), (1, 4));
        ob1.arrive(
            &comms,
            &types,
            FROM,
            env(3, 9, 0),
            UnexKind::Eager,
            recvfrag::Payload::Frag(b"hello"),
        );
        let st = ob1
            .requests
            .test(posted)
            .unwrap()
            .expect("the posted receive matched");
        assert_eq!((st.tag, st.bytes), (9, 5));
        assert_eq!(&buf[..5], b"hello");
        // A communicator made after the growth starts afresh ...
        let last = *more.last().unwrap();
        assert_eq!(ob1.seqs[ob1.seq_index(last, 1)].send, 0);
        assert!(!ob1.comm_busy(last));
        // ... and the one the early message was for takes it in.
        let late = add(&mut comms, &types, &mut ob1, 500);
        let st = ob1.iprobe(&comms, &sel(late, 500, 1)).unwrap();
        assert_eq!(st.map(|s| s.bytes), Some(2));
    }

    /// Posts a receive of 4 bytes from rank 1 with `tag` on `comm` (context `ctx`).
    fn post4(
        ob1: &mut Ob1,
        types: &TypeTable,
        comm: CommId,
        ctx: u16,
        tag: i32,
    ) -> (ReqId, &'static mut [u8]) {
        let buf: &'static mut [u8] = vec![0u8; 4].leak();
        let p = buf.as_mut_ptr();
        // SAFETY: `buf` is leaked: it outlives the receive, and the test reads it only after
        // the receive completed.
        let make = move || unsafe { Unpacker::contiguous(p, 4) };
        let id = ob1.irecv(types, make, &sel(comm, ctx, tag), 0).unwrap();
        (id, buf)
    }

    const NO_WILDCARDS: CommHints = CommHints::NO_ANY_SOURCE.union(CommHints::NO_ANY_TAG);

    /// Deep queues of distinct tags match by exact envelope under the no-wildcard hints, and
    /// switching the hints on or off with messages and receives queued loses and misorders
    /// nothing.
    #[test]
    fn exact_mode_matches_deep_queues_across_hint_changes() {
        let (mut comms, types, mut ob1) = setup(16);
        let c = add(&mut comms, &types, &mut ob1, 7);
        let mut seq = 0u16;
        let mut send = |ob1: &mut Ob1, comms: &CommTable, tag: i32, val: u32| {
            ob1.arrive(
                comms,
                &types,
                FROM,
                env(7, tag, seq),
                UnexKind::Eager,
                recvfrag::Payload::Frag(&val.to_le_bytes()),
            );
            seq = seq.wrapping_add(1);
        };
        // Unexpected first: 300 messages before the hints, 300 after (tags 0..600; tag 5 twice).
        for t in 0..300 {
            send(&mut ob1, &comms, t, t as u32);
        }
        send(&mut ob1, &comms, 5, 1005);
        comms.set_hints(c, NO_WILDCARDS).unwrap();
        ob1.hints_changed(&comms, c);
        for t in 300..600 {
            send(&mut ob1, &comms, t, t as u32);
        }
        assert!(
            ob1.comms[c.0 as usize].unexpected.index.is_some(),
            "exact mode"
        );
        assert_eq!(ob1.exact.entries(), 601);
        assert!(ob1.exact.buckets() >= 601, "the table grew with the queue");
        for t in (0..600).rev() {
            let (id, buf) = post4(&mut ob1, &types, c, 7, t);
            let st = ob1.requests.test(id).unwrap().expect("matched at once");
            assert_eq!(
                (st.tag, u32::from_le_bytes(buf[..4].try_into().unwrap())),
                (t, t as u32)
            );
        }
        let (id, buf) = post4(&mut ob1, &types, c, 7, 5);
        assert!(ob1.requests.test(id).unwrap().is_some());
        assert_eq!(
            u32::from_le_bytes(buf[..4].try_into().unwrap()),
            1005,
            "second of tag 5 second"
        );
        assert_eq!(ob1.exact.entries(), 0);

        // Posted first: 400 receives under the hints (tag 9 twice), then the hints go with
        // them still posted, then the messages come in reverse.
        let mut posted = std::vec::Vec::new();
        for t in 0..400 {
            posted.push((t, post4(&mut ob1, &types, c, 7, t)));
        }
        posted.push((9, post4(&mut ob1, &types, c, 7, 9)));
        assert_eq!(ob1.exact.entries(), 401);
        comms.set_hints(c, CommHints::ALLOW_OVERTAKING).unwrap();
        ob1.hints_changed(&comms, c);
        for t in (200..400).rev() {
            send(&mut ob1, &comms, t, 10_000 + t as u32);
        }
        assert!(
            ob1.comms[c.0 as usize].posted.index.is_none(),
            "back to the sets"
        );
        assert_eq!(ob1.exact.entries(), 0);
        // And on again for the rest.
        comms.set_hints(c, NO_WILDCARDS).unwrap();
        ob1.hints_changed(&comms, c);
        for t in (0..200).rev() {
            send(&mut ob1, &comms, t, 10_000 + t as u32);
        }
        send(&mut ob1, &comms, 9, 77);
        for (i, (t, (id, buf))) in posted.iter().enumerate() {
            let st = ob1.requests.test(*id).unwrap().expect("matched");
            let want = if i == 400 { 77 } else { 10_000 + *t as u32 };
            assert_eq!(
                (st.tag, u32::from_le_bytes(buf[..4].try_into().unwrap())),
                (*t, want)
            );
        }
        assert!(ob1.comms[c.0 as usize].posted.is_empty());
    }

    /// A wildcard receive (posted before the hints, or the library's own, which may use
    /// `MPI_ANY_SOURCE` on any communicator) stays in its set in exact mode and is matched in
    /// posting order against the indexed exact ones.
    #[test]
    fn exact_mode_orders_wildcard_receives_by_posting() {
        let (mut comms, types, mut ob1) = setup(16);
        let c = add(&mut comms, &types, &mut ob1, 7);
        let post_any = |ob1: &mut Ob1| {
            let buf: &'static mut [u8] = vec![0u8; 4].leak();
            let p = buf.as_mut_ptr();
            // SAFETY: `buf` is leaked and read only after the receive completed.
            let make = move || unsafe { Unpacker::contiguous(p, 4) };
            let s = RecvSel {
                src: Source::Any,
                ..sel(c, 7, 3)
            };
            (ob1.irecv(&types, make, &s, 0).unwrap(), buf)
        };
        let msg = |ob1: &mut Ob1, comms: &CommTable, seq: u16| {
            ob1.arrive(
                comms,
                &types,
                FROM,
                env(7, 3, seq),
                UnexKind::Eager,
                recvfrag::Payload::Frag(&[seq as u8 + 1, 0, 0, 0]),
            );
        };
        let (any1, b1) = post_any(&mut ob1);
        comms.set_hints(c, NO_WILDCARDS).unwrap();
        ob1.hints_changed(&comms, c);
        let _ = ob1.iprobe(&comms, &sel(c, 7, 3)).unwrap();
        assert!(
            ob1.comms[c.0 as usize].posted.index.is_none(),
            "shallow queues stay in their sets"
        );
        // Deep enough for exact mode: receives of other tags.
        for t in 0..EXACT_DEPTH as i32 {
            post4(&mut ob1, &types, c, 7, 1000 + t);
        }
        let (ex1, b2) = post4(&mut ob1, &types, c, 7, 3);
        let (any2, b3) = post_any(&mut ob1);
        let (ex2, b4) = post4(&mut ob1, &types, c, 7, 3);
        assert!(ob1.comms[c.0 as usize].posted.index.is_some(), "exact mode");
        assert_eq!(ob1.exact.entries(), EXACT_DEPTH + 2, "indexed");
        for (seq, id) in [any1, ex1, any2, ex2].into_iter().enumerate() {
            msg(&mut ob1, &comms, seq as u16);
            assert!(
                ob1.requests.test(id).unwrap().is_some(),
                "message {seq} to the receive posted {seq}th"
            );
        }
        assert_eq!((b1[0], b2[0], b3[0], b4[0]), (1, 2, 3, 4));
        assert_eq!(ob1.comms[c.0 as usize].posted.len(), EXACT_DEPTH);
        assert_eq!(ob1.exact.entries(), EXACT_DEPTH);
    }

    #[test]
    fn growth_past_the_memory_bound_names_mpi_memory_max() {
        let (_comms, _types, mut ob1) = setup(1 << 15);
        // 2^15 communicators' queues (some 3 KiB each) pass the 64 MiB account.
        let e = ob1.comm_room(1 << 15).unwrap_err();
        crate::memory::tests::assert_names_memory_max(&e);
        assert_eq!(ob1.comms.len(), COMMS_INITIAL as usize, "nothing changed");
        ob1.comm_room(64).unwrap();
        assert_eq!(ob1.comms.len(), 64);
    }

    /// Arrives an eager message of `bytes` from rank 1 on context `ctx`.
    fn eager(ob1: &mut Ob1, comms: &CommTable, types: &TypeTable, e: Envelope, bytes: &[u8]) {
        let d = ob1.arrive(
            comms,
            types,
            FROM,
            e,
            UnexKind::Eager,
            recvfrag::Payload::Frag(bytes),
        );
        assert_ne!(d, crate::btl::Delivery::Retry);
    }

    /// Takes the blocking receive of 4 bytes from rank 1 with `tag` on `comm`.
    fn blocking4(ob1: &mut Ob1, comms: &CommTable, comm: CommId, tag: i32) -> &'static [u8] {
        let buf: &'static mut [u8] = vec![0u8; 4].leak();
        let p = buf.as_mut_ptr();
        assert!(ob1
            .recv_free(comms, comm, Source::Rank(1), TagSel::Tag(tag))
            .unwrap());
        // SAFETY: as in `post4`.
        ob1.recv_post(
            move || unsafe { Unpacker::contiguous(p, 4) },
            comm,
            Source::Rank(1),
            TagSel::Tag(tag),
        );
        buf
    }

    /// The blocking receive matches before receives posted after it, takes messages in their
    /// senders' order (one that arrives early waits for its turn), and is refused while
    /// something on its communicator comes before it.
    #[test]
    fn blocking_receive_keeps_matching_order() {
        let (mut comms, types, mut ob1) = setup(16);
        let c = add(&mut comms, &types, &mut ob1, 7);
        let buf = blocking4(&mut ob1, &comms, c, 3);
        assert!(!ob1.recv_free(&comms, c, Source::Any, TagSel::Any).unwrap());
        // A receive posted later by another thread comes after it.
        let (later, later_buf) = post4(&mut ob1, &types, c, 7, 3);
        // Sequence number 1 arrives first: it waits for number 0.
        eager(&mut ob1, &comms, &types, env(7, 3, 1), b"bbbb");
        assert!(!ob1.recv_done());
        eager(&mut ob1, &comms, &types, env(7, 3, 0), b"aaaa");
        assert!(ob1.recv_done());
        let st = ob1.recv_finished().unwrap().expect("finished");
        assert_eq!((st.source, st.tag, st.bytes, st.error), (1, 3, 4, None));
        assert_eq!(buf, b"aaaa");
        let st = ob1.requests.test(later).unwrap().expect("matched");
        assert_eq!((st.bytes, &later_buf[..]), (4, &b"bbbb"[..]));
        // Free again, but not while a message it accepts waits unexpected or a receive is
        // posted on the communicator.
        assert!(ob1
            .recv_free(&comms, c, Source::Rank(1), TagSel::Tag(3))
            .unwrap());
        eager(&mut ob1, &comms, &types, env(7, 3, 2), b"cccc");
        assert!(!ob1
            .recv_free(&comms, c, Source::Rank(1), TagSel::Tag(3))
            .unwrap());
        let (r, _) = post4(&mut ob1, &types, c, 7, 3);
        assert!(ob1.requests.test(r).unwrap().is_some());
        let (pending, _) = post4(&mut ob1, &types, c, 7, 4);
        assert!(!ob1
            .recv_free(&comms, c, Source::Rank(1), TagSel::Tag(3))
            .unwrap());
        ob1.cancel(pending).unwrap();
        assert!(ob1.requests.test(pending).unwrap().is_some());
        // A message longer than the buffer is a truncation error in the status.
        let _ = blocking4(&mut ob1, &comms, c, 5);
        eager(&mut ob1, &comms, &types, env(7, 5, 3), b"toolong");
        let st = ob1.recv_finished().unwrap().expect("finished");
        assert_eq!(
            st.error.map(|e| e.class),
            Some(crate::error::ErrorClass::Truncate)
        );
        assert!(ob1.recv_free(&comms, c, Source::Any, TagSel::Any).unwrap());
    }

    /// A rendezvous for the blocking receive turns it into a request that goes on with the
    /// protocol (its ACK queued).
    #[test]
    fn blocking_receive_continues_a_rendezvous_as_a_request() {
        let (mut comms, types, mut ob1) = setup(16);
        let c = add(&mut comms, &types, &mut ob1, 7);
        let _buf = blocking4(&mut ob1, &comms, c, 1);
        let d = ob1.arrive(
            &comms,
            &types,
            FROM,
            env(7, 1, 0),
            UnexKind::Rndv {
                msg_len: 4,
                sreq: 77,
                read: None,
            },
            recvfrag::Payload::Frag(b"ab"),
        );
        assert_eq!(d, crate::btl::Delivery::Consumed);
        assert!(ob1.blocking_is_request());
        assert!(!ob1.recv_done());
        assert!(!ob1.pending_ack.is_empty(), "the ACK waits to go");
        assert!(ob1.recv_finished().unwrap().is_none());
    }
}
