//! cm: point-to-point over a matching transport ([`crate::mtl::Mtl`]).
//!
//! With `pml` = `cm` sends, receives, probes and cancels go to the MTL, which matches in the
//! network (Portals match lists) and reports completions back ([`MtlSink`]). None of ob1's
//! machinery — sequence numbers, the posted and unexpected queues, protocols over the BTLs — is
//! used then; requests, tests and waits are the request core's ([`Requests`]), as on ob1.
//!
//! A blocking receive (`MPI_Recv`) needs none of a request's bookkeeping (pool slot, scope,
//! cancel): it is the PML's one *blocking receive* ([`Cm::recv_post`]), waited for by the caller,
//! whose rounds poll the MTL alone ([`Cm::wait_round`]). Only one is under way at a time; a
//! second thread's `MPI_Recv` meanwhile takes a pooled request.

use super::request::{Dest, Op, RecvReq, RecvState, ReqId, Request, SendMode, SendReq};
use super::request::{SendState, Status};
use super::requests::Requests;
use super::{MsgId, Stats};
use crate::arena::{Arena, Sizer};
use crate::array::Array;
use crate::btl::{PeerInfo, Token};
use crate::comm::{CommId, CommTable, COMMS_INITIAL, COMM_MAX};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::table::TypeTable;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::mtl::{
    Mtl, MtlData, MtlEnvelope, MtlMatch, MtlMessage, MtlPlaced, MtlSelector, MtlSink, BLOCKING,
};
use crate::params::Params;
use crate::pool::{Capacity, Key, Pool};
use crate::wire::Envelope;

/// What one round of the blocking receive's wait did ([`Cm::wait_round`]). Small on purpose:
/// the status is built once, by [`Cm::recv_status`], where the waiter returns it (a status is
/// ten words, and carrying it through each round's result cost more than building it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum WaitRound {
    /// The receive finished.
    Done,
    /// It has not (yet); this much else happened.
    Moved(usize),
}

/// The blocking receive over the MTL.
struct BlockingRecv {
    conv: Unpacker,
    /// Set when it finishes through the sink (a bounce buffer unpacked, a long message's get,
    /// a failure); a receive the MTL hands back from the waiter's round is [`Cm::placed`].
    status: Option<Status>,
}

/// A message a matched probe took, for `MPI_Mrecv`.
#[derive(Clone, Copy)]
struct Probed {
    comm: CommId,
    msg: MtlMessage,
    m: MtlMatch,
}

fn bad_request() -> Error {
    Error::new(ErrorClass::Request, Reason::InvalidRequest)
}

fn not_matched() -> Error {
    Error::new(
        ErrorClass::Request,
        Reason::BadArgument {
            what: "message handle is not a matched message",
        },
    )
}

/// The cm PML.
pub struct Cm {
    /// Every request of the process.
    pub(crate) requests: Requests,
    mtl: &'static mut dyn Mtl,
    /// Per communicator slot: receives posted in the MTL and not finished (a freed
    /// communicator keeps its slot until they are). Grows with the communicator table.
    posted: Array<u32>,
    blocking: Option<BlockingRecv>,
    /// The blocking receive finished in the waiter's round, its bytes in place: what arrived.
    /// The MTL writes it here directly ([`Mtl::progress_waiting`]).
    placed: Option<MtlPlaced>,
    probed: Pool<Probed>,
    /// Counters.
    pub stats: Stats,
}

/// The MTL's sink: the parts of [`Cm`] its completions touch.
struct CmSink<'a> {
    requests: &'a mut Requests,
    posted: &'a mut [u32],
    blocking: &'a mut Option<BlockingRecv>,
}

impl Cm {
    /// Arena bytes for the configured capacities (per-communicator state for the first
    /// [`COMMS_INITIAL`] of at most `comms` communicators).
    pub fn size(params: &Params, sizer: &mut Sizer, comms: u32) {
        Requests::size(params, sizer);
        Pool::<Probed>::size(sizer, Cm::probed_capacity(params));
        Array::<u32>::size(sizer, COMMS_INITIAL as usize, comms as usize);
    }

    /// The cm PML over `mtl` for a job of `peers`, up to `comms` communicators and `max_cids`
    /// context ids (`comm_max_cids`).
    pub fn new(
        params: &Params,
        arena: &mut Arena,
        comms: u32,
        mtl: &'static mut dyn Mtl,
        peers: &[PeerInfo],
        max_cids: u32,
    ) -> Result<Cm> {
        let a = *mtl.attrs();
        if peers.len() as u64 > a.max_ranks as u64 {
            return Err(Error::new(
                ErrorClass::Arg,
                Reason::BadArgument {
                    what:
                        "the job has more processes than the MTL's match bits can name; use pml ob1",
                },
            ));
        }
        if max_cids > a.max_contexts {
            return Err(Error::new(
                ErrorClass::Arg,
                Reason::BadParam {
                    name: crate::comm::MAX_CIDS.name,
                    allowed: crate::error::Allowed::Range {
                        min: 64,
                        max: a.max_contexts as i64,
                    },
                },
            ));
        }
        mtl.add_procs(peers)?;
        Ok(Cm {
            requests: Requests::new(params, arena)?,
            mtl,
            posted: Array::new(arena, COMMS_INITIAL as usize, comms as usize, |_| 0)?,
            blocking: None,
            placed: None,
            probed: Pool::new(arena, Cm::probed_capacity(params))?,
            stats: Stats::default(),
        })
    }

    fn probed_capacity(params: &Params) -> Capacity {
        Capacity::growing(
            super::ob1::UNEX_MSGS_INITIAL,
            params.u32(&super::ob1::UNEX_MSGS),
        )
    }

    fn sink(&mut self) -> (&mut dyn Mtl, CmSink<'_>) {
        (
            &mut *self.mtl,
            CmSink {
                requests: &mut self.requests,
                posted: &mut self.posted,
                blocking: &mut self.blocking,
            },
        )
    }

    /// Runs the MTL's progress; returns how much happened.
    pub fn progress(&mut self, types: &TypeTable) -> usize {
        let (mtl, mut sink) = self.sink();
        mtl.progress(types, &mut sink)
    }

    /// Sends `data` (a contiguous message in the user's memory) to `d` at once if the MTL can
    /// copy it now; whether it did.
    #[inline]
    pub fn send_bytes(
        &mut self,
        types: &TypeTable,
        d: &Dest,
        tag: i32,
        data: &[u8],
    ) -> Result<bool> {
        self.mtl
            .send_bytes_now(types, d.proc, envelope(d, tag), data)
    }

    /// [`Cm::send_bytes`] of `conv`'s message.
    #[inline]
    pub fn send(&mut self, types: &TypeTable, d: &Dest, tag: i32, conv: &Packer) -> Result<bool> {
        self.mtl.send_now(types, d.proc, envelope(d, tag), conv)
    }

    /// Starts a send of `conv`'s message to `d` through a request.
    pub fn isend(
        &mut self,
        types: &TypeTable,
        d: &Dest,
        tag: i32,
        conv: Packer,
        mode: SendMode,
        scope: u32,
    ) -> Result<ReqId> {
        let env = envelope(d, tag);
        let send = SendReq {
            conv: Packer::from_slice(&[]),
            proc: d.proc,
            env: Envelope {
                ctx: env.ctx,
                src: env.src as i32,
                tag,
                seq: 0,
            },
            mode,
            state: SendState::Done,
            stripe: crate::bml::Stripe::default(),
            inflight: 0,
            reg: None,
        };
        let key = self
            .requests
            .insert_with(|| Request::new(Op::Send(send), scope))?;
        match self
            .mtl
            .isend(types, d.proc, env, conv, mode, Token(key.to_u64()))
        {
            Ok(true) => self.requests.complete(key.index),
            Ok(false) => {}
            Err(e) => {
                self.requests.pool.discard(key);
                return Err(e);
            }
        }
        Ok(ReqId(key))
    }

    /// Posts a receive for messages `sel` accepts on `comm` into the convertor `make` builds in
    /// the request's slot.
    #[inline]
    pub fn irecv(
        &mut self,
        types: &TypeTable,
        make: impl FnOnce() -> Unpacker,
        comm: CommId,
        sel: MtlSelector,
        scope: u32,
    ) -> Result<ReqId> {
        // The convertor stays in the request; the MTL borrows it to learn where to write.
        let key = self
            .requests
            .insert_recv(make, sel.src, sel.tag, comm, scope)?;
        self.posted[comm.0 as usize] += 1;
        let Some(Request {
            op: Op::Recv(r), ..
        }) = self.requests.pool.get(key)
        else {
            return Err(bad_request());
        };
        if let Err(e) = self.mtl.irecv(types, sel, &r.conv, Token(key.to_u64())) {
            self.posted[comm.0 as usize] -= 1;
            self.requests.pool.discard(key);
            return Err(e);
        }
        Ok(ReqId(key))
    }

    /// Whether the blocking receive is free (another thread's `MPI_Recv` may hold it).
    #[inline]
    pub(crate) fn blocking_free(&self) -> bool {
        self.blocking.is_none()
    }

    /// Posts the blocking receive (`MPI_Recv`) for messages `sel` accepts, into the convertor
    /// `make` builds (in place); [`Cm::recv_done`] says when it has finished. The caller checked
    /// [`Cm::blocking_free`] and built `sel` from a live communicator.
    #[inline]
    pub(crate) fn recv_post(
        &mut self,
        types: &TypeTable,
        make: impl FnOnce() -> Unpacker,
        sel: MtlSelector,
    ) -> Result<()> {
        debug_assert!(self.blocking.is_none() && self.placed.is_none());
        // The wait that took the last hand-back cleared it; cleared again so that nothing of an
        // earlier receive can ever finish this one.
        self.placed = None;
        let b = self.blocking.insert(BlockingRecv {
            conv: make(),
            status: None,
        });
        if let Err(e) = self.mtl.irecv(types, sel, &b.conv, BLOCKING) {
            self.blocking = None;
            return Err(e);
        }
        Ok(())
    }

    /// One MTL round of the blocking receive's wait: `Done` once it has finished (then
    /// [`Cm::recv_status`] gives its status), else how much happened. When the round completes
    /// the receive with its bytes in place, the MTL hands it back here instead of through
    /// [`MtlSink::recv_done`].
    #[inline(always)]
    pub(crate) fn wait_round(&mut self, types: &TypeTable) -> WaitRound {
        if let Some(n) = self.mtl.poll_waiting(&mut self.placed) {
            return self.waited(n);
        }
        self.wait_round_sink(types)
    }

    /// The rest of [`Cm::wait_round`], when the MTL's quick look needs the sink.
    #[inline(never)]
    fn wait_round_sink(&mut self, types: &TypeTable) -> WaitRound {
        let (mtl, mut sink) = (
            &mut *self.mtl,
            CmSink {
                requests: &mut self.requests,
                posted: &mut self.posted,
                blocking: &mut self.blocking,
            },
        );
        let n = mtl.progress_waiting(types, &mut sink, BLOCKING, &mut self.placed);
        self.waited(n)
    }

    /// What a round of the blocking receive's wait that moved `n` did.
    #[inline(always)]
    fn waited(&self, n: usize) -> WaitRound {
        // Handed back from this round; or finished through the sink, in this round or by
        // another thread's progress meanwhile.
        if self.recv_finished() {
            return WaitRound::Done;
        }
        WaitRound::Moved(n)
    }

    /// Whether the blocking receive has finished (its status is then [`Cm::recv_status`]'s).
    #[inline]
    pub(crate) fn recv_finished(&self) -> bool {
        self.placed.is_some() || self.blocking.as_ref().is_some_and(|b| b.status.is_some())
    }

    /// The finished blocking receive's status; it is forgotten. The caller saw
    /// [`Cm::recv_finished`] (or [`WaitRound::Done`]); otherwise an internal error's status.
    #[inline(never)]
    pub(crate) fn recv_status(&mut self, types: &TypeTable) -> Status {
        let st = match (self.placed.take(), self.blocking.as_mut()) {
            (Some(p), Some(b)) => {
                recv_status(types, &mut b.conv, MtlData::Placed(p.got), p.m, None)
            }
            (
                None,
                Some(BlockingRecv {
                    status: Some(st), ..
                }),
            ) => *st,
            _ => Status {
                error: Some(Error::new(
                    ErrorClass::Intern,
                    Reason::BadArgument {
                        what: "the blocking receive's status before it finished",
                    },
                )),
                ..Status::EMPTY
            },
        };
        self.blocking = None;
        st
    }

    /// The first message `sel` accepts that no receive took, without taking it.
    pub fn iprobe(&mut self, sel: MtlSelector) -> Result<Option<Status>> {
        Ok(self.mtl.iprobe(sel)?.map(|m| probe_status(&m)))
    }

    /// Like [`Cm::iprobe`], but takes the message for a later [`Cm::imrecv`].
    pub fn improbe(&mut self, comm: CommId, sel: MtlSelector) -> Result<Option<(MsgId, Status)>> {
        // The MTL's message cannot be put back: make sure its record has a slot first.
        if !self.probed.reserve() {
            return Err(self
                .probed
                .exhausted("matched-probe messages", super::ob1::UNEX_MSGS.name));
        }
        let Some((msg, m)) = self.mtl.improbe(sel)? else {
            return Ok(None);
        };
        let key = self.probed.insert(Probed { comm, msg, m }).map_err(|_| {
            self.probed
                .exhausted("matched-probe messages", super::ob1::UNEX_MSGS.name)
        })?;
        Ok(Some((MsgId(key), probe_status(&m))))
    }

    /// The message a matched probe took, in slot `index`, if any.
    pub fn message_at(&self, index: u32) -> Option<MsgId> {
        self.probed.key_at(index).map(MsgId)
    }

    /// Receives the message a matched probe took into `conv`.
    pub fn imrecv(
        &mut self,
        types: &TypeTable,
        conv: Unpacker,
        msg: MsgId,
        scope: u32,
    ) -> Result<ReqId> {
        let p = self.probed.get(msg.0).copied().ok_or_else(not_matched)?;
        self.probed.remove(msg.0);
        let recv = RecvReq {
            conv,
            comm: p.comm,
            src: super::request::Source::Rank(p.m.src),
            tag: super::request::TagSel::Tag(p.m.tag),
            // Not cancellable (the MTL has no posted entry for it), completes when it is done.
            state: RecvState::Posted,
            post: 0,
        };
        let key = self
            .requests
            .insert_with(|| Request::new(Op::Recv(recv), scope))?;
        self.posted[p.comm.0 as usize] += 1;
        let Some(Request {
            op: Op::Recv(r), ..
        }) = self.requests.pool.get(key)
        else {
            return Err(bad_request());
        };
        if let Err(e) = self.mtl.imrecv(types, p.msg, &r.conv, Token(key.to_u64())) {
            self.posted[p.comm.0 as usize] -= 1;
            self.requests.pool.discard(key);
            return Err(e);
        }
        Ok(ReqId(key))
    }

    /// Cancels a receive the MTL has not matched; anything else completes normally.
    pub fn cancel(&mut self, id: ReqId) -> Result<()> {
        let req = self.requests.pool.get(id.0).ok_or_else(bad_request)?;
        let Op::Recv(r) = &req.op else { return Ok(()) };
        if r.state != RecvState::Posted || req.complete {
            return Ok(());
        }
        let comm = r.comm;
        if !self.mtl.cancel(Token(id.0.to_u64())) {
            return Ok(());
        }
        self.posted[comm.0 as usize] -= 1;
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

    /// Whether the MTL still has sends in flight.
    pub fn busy(&self) -> bool {
        self.mtl.busy()
    }

    /// Whether communicator `comm` still has receives posted.
    pub(crate) fn comm_busy(&self, comm: CommId) -> bool {
        self.posted.get(comm.0 as usize).is_some_and(|&n| n > 0)
    }

    /// Makes room for the state of `slots` communicators (the communicator table's room).
    /// Running out is an error naming `mpi_memory_max`; nothing changes then.
    pub(crate) fn comm_room(&mut self, slots: u32) -> Result<()> {
        self.posted.grow_to(
            slots as usize,
            |_| 0,
            "point-to-point state of communicators",
            COMM_MAX.name,
        )
    }

    /// A new communicator in slot `comm` of `comms` (making room for the table's slots first).
    pub(crate) fn comm_added(&mut self, comms: &CommTable, comm: CommId) -> Result<()> {
        if comm.0 as usize >= self.posted.len() {
            self.comm_room(comms.capacity().max(comm.0 + 1))?;
        }
        self.posted[comm.0 as usize] = 0;
        Ok(())
    }
}

/// The envelope of a message to `d` with `tag`.
#[inline(always)]
fn envelope(d: &Dest, tag: i32) -> MtlEnvelope {
    MtlEnvelope {
        ctx: d.ctx,
        src: d.me,
        tag,
    }
}

/// Accounts or unpacks what a receive got into `conv`; the receive's status.
#[inline(always)]
fn recv_status(
    types: &TypeTable,
    conv: &mut Unpacker,
    data: MtlData<'_>,
    m: MtlMatch,
    error: Option<Error>,
) -> Status {
    match data {
        MtlData::Placed(n) => conv.placed(n),
        MtlData::Packed(b) => {
            conv.unpack(types, 0, b);
        }
    }
    let mut status = Status {
        source: m.src as i32,
        tag: m.tag,
        ..Status::EMPTY
    };
    status.finish(m.len, conv);
    if let Some(e) = error {
        status.error = Some(e);
    }
    status
}

fn probe_status(m: &MtlMatch) -> Status {
    Status {
        source: m.src as i32,
        tag: m.tag,
        bytes: m.len,
        message_bytes: m.len,
        error: None,
        cancelled: false,
    }
}

impl MtlSink for CmSink<'_> {
    fn send_done(&mut self, token: Token, result: Result<()>) {
        let key = Key::from_u64(token.0);
        let Some(req) = self.requests.pool.get_mut(key) else {
            return;
        };
        if req.complete {
            return;
        }
        if let Err(e) = result {
            req.status.error = Some(e);
        }
        self.requests.complete(key.index);
    }

    fn recv_done(
        &mut self,
        types: &TypeTable,
        token: Token,
        data: MtlData<'_>,
        m: MtlMatch,
        error: Option<Error>,
    ) {
        if token == BLOCKING {
            if let Some(b) = self.blocking.as_mut().filter(|b| b.status.is_none()) {
                b.status = Some(recv_status(types, &mut b.conv, data, m, error));
            }
            return;
        }
        let key = Key::from_u64(token.0);
        let Some(req) = self.requests.pool.get_mut(key) else {
            return;
        };
        let Op::Recv(r) = &mut req.op else { return };
        if r.state == RecvState::Done || req.complete {
            return;
        }
        r.state = RecvState::Done;
        let comm = r.comm;
        req.status = recv_status(types, &mut r.conv, data, m, error);
        if let Some(n) = self.posted.get_mut(comm.0 as usize) {
            *n = n.saturating_sub(1);
        }
        self.requests.complete(key.index);
    }
}
