//! The `cm` path: point-to-point over a matching transport ([`crate::mtl::Mtl`]).
//!
//! With `pml` = `cm` the engine keeps its request pool, scopes, waits and tests, but sends,
//! receives, probes and cancels go to the MTL, which matches in the network (Portals match
//! lists) and reports completions back ([`MtlSink`]). The ob1 machinery — sequence numbers, the
//! posted and unexpected queues, protocols over the BTLs — is not used then. The entry points of
//! [`Ob1`] call into this module first when an MTL is in use, so every caller (the MPI layer,
//! collectives, communicator construction) runs over either path unchanged.

use super::recvfrag::finish_status;
use super::request::{Op, RecvReq, RecvState, ReqId, Request, SendMode, SendReq, SendState};
use super::request::{Source, Status, TagSel};
use super::unexpected::{Held, UnexKind, UnexMsg};
use super::{MsgId, Ob1};
use crate::btl::{PeerInfo, Token};
use crate::comm::{CommId, CommTable, ContextId};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::table::TypeTable;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::list::Link;
use crate::mtl::{Mtl, MtlData, MtlEnvelope, MtlMatch, MtlMessage, MtlSelector, MtlSink};
use crate::pool::Key;
use crate::rte::ProcId;
use crate::wire::Envelope;

/// The token of the blocking receive ([`Ob1::cm_recv_post`]): no pool key has it (pool indices
/// stay far below `u32::MAX`).
const BLOCKING: Token = Token(u64::MAX);

/// What one round of the blocking receive's wait did ([`Ob1::cm_wait_round`]).
pub(crate) enum WaitRound {
    /// The receive finished with this status.
    Done(Status),
    /// It has not (yet); this much else happened.
    Moved(usize),
}

/// A blocking receive over the MTL: `MPI_Recv` waits for it with the engine held, so it needs
/// none of a request's bookkeeping (pool slot, scope, cancel, the per-communicator count that
/// keeps a communicator from being freed under a receive).
pub(crate) struct BlockingRecv {
    conv: Unpacker,
    /// Set when the MTL reports it.
    status: Option<Status>,
}

fn bad_request() -> Error {
    Error::new(ErrorClass::Request, Reason::InvalidRequest)
}

impl Ob1 {
    /// Hands point-to-point traffic to `mtl` (the `cm` PML) for a job of `peers`.
    /// `max_cids` is the size of the context-id space (`comm_max_cids`).
    pub fn use_mtl(
        &mut self,
        mtl: &'static mut dyn Mtl,
        peers: &[PeerInfo],
        max_cids: u32,
    ) -> Result<()> {
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
                },
            ));
        }
        mtl.add_procs(peers)?;
        self.mtl = Some(mtl);
        Ok(())
    }

    /// Whether point-to-point traffic goes through an MTL.
    pub fn uses_mtl(&self) -> bool {
        self.mtl.is_some()
    }

    /// Runs the MTL's progress; returns how much happened.
    pub fn progress_mtl(&mut self, types: &TypeTable) -> usize {
        let Some(mtl) = self.mtl.take() else {
            return 0;
        };
        let n = mtl.progress(types, self);
        self.mtl = Some(mtl);
        n
    }

    fn cm_envelope(
        comms: &CommTable,
        comm: CommId,
        dest: u32,
        tag: i32,
    ) -> Result<(MtlEnvelope, ProcId)> {
        let c = comms.get_in_use(comm)?;
        let env = MtlEnvelope {
            ctx: c.cid.0,
            src: c.rank,
            tag,
        };
        Ok((env, comms.peer_proc(c, dest)))
    }

    fn cm_selector(
        comms: &CommTable,
        comm: CommId,
        src: Source,
        tag: TagSel,
    ) -> Result<MtlSelector> {
        let c = comms.get_in_use(comm)?;
        Ok(MtlSelector {
            ctx: c.cid.0,
            src,
            tag,
        })
    }

    /// `send_now` over the MTL: done at once if the MTL can copy the message now.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cm_send_now(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        conv: &Packer,
        dest: u32,
        tag: i32,
        comm: CommId,
    ) -> Result<bool> {
        let (env, proc) = Ob1::cm_envelope(comms, comm, dest, tag)?;
        self.cm_send_env(types, proc, env, conv)
    }

    /// `send_now` over the MTL of the message `conv` for a caller that has the envelope and the
    /// process (the engine's blocking send, which read both while checking the destination).
    #[inline]
    pub(crate) fn cm_send_env(
        &mut self,
        types: &TypeTable,
        proc: ProcId,
        env: MtlEnvelope,
        conv: &Packer,
    ) -> Result<bool> {
        let mtl = self.mtl.as_mut().expect("cm path");
        mtl.send_now(types, proc, env, conv)
    }

    /// [`Ob1::cm_send_env`] of a message that is `data` as it stands (no convertor).
    #[inline]
    pub(crate) fn cm_send_bytes(
        &mut self,
        types: &TypeTable,
        proc: ProcId,
        env: MtlEnvelope,
        data: &[u8],
    ) -> Result<bool> {
        let mtl = self.mtl.as_mut().expect("cm path");
        mtl.send_bytes_now(types, proc, env, data)
    }

    /// `isend` over the MTL.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cm_isend(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        conv: Packer,
        dest: u32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
        scope: u32,
    ) -> Result<ReqId> {
        let (env, proc) = Ob1::cm_envelope(comms, comm, dest, tag)?;
        let send = SendReq {
            conv: Packer::from_slice(&[]),
            proc,
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
        let key = self.insert(Request::new(Op::Send(send), scope))?;
        let mtl = self.mtl.as_mut().expect("cm path");
        match mtl.isend(types, proc, env, conv, mode, Token(key.to_u64())) {
            Ok(true) => self.complete(key.index),
            Ok(false) => {}
            Err(e) => {
                self.requests.discard(key);
                return Err(e);
            }
        }
        Ok(ReqId(key))
    }

    /// `irecv` over the MTL, into the convertor `make` builds in the request's slot.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn cm_irecv(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        make: impl FnOnce() -> Unpacker,
        src: Source,
        tag: TagSel,
        comm: CommId,
        scope: u32,
    ) -> Result<ReqId> {
        let sel = Ob1::cm_selector(comms, comm, src, tag)?;
        // The convertor stays in the request; the MTL borrows it to learn where to write.
        let key = self.insert_recv(make, src, tag, comm, scope)?;
        self.cm_posted[comm.0 as usize] += 1;
        let mtl = self.mtl.as_mut().expect("cm path");
        let Some(Request {
            op: Op::Recv(r), ..
        }) = self.requests.get(key)
        else {
            unreachable!("just inserted");
        };
        if let Err(e) = mtl.irecv(types, sel, &r.conv, Token(key.to_u64())) {
            self.cm_posted[comm.0 as usize] -= 1;
            self.requests.discard(key);
            return Err(e);
        }
        Ok(ReqId(key))
    }

    /// Whether the blocking receive is free (it is, unless a receive is posted from inside a
    /// blocking receive's wait, which nothing does today).
    #[inline]
    pub(crate) fn cm_blocking_free(&self) -> bool {
        self.cm_blocking.is_none()
    }

    /// Posts the blocking receive (`MPI_Recv`) over the MTL for messages `sel` accepts, into the
    /// convertor `make` builds (in place: a convertor is a few hundred bytes);
    /// [`Ob1::cm_recv_done`] says when it has finished. The caller checked
    /// [`Ob1::cm_blocking_free`] and built `sel` from a live communicator.
    #[inline]
    pub(crate) fn cm_recv_post(
        &mut self,
        types: &TypeTable,
        make: impl FnOnce() -> Unpacker,
        sel: MtlSelector,
    ) -> Result<()> {
        debug_assert!(self.cm_blocking.is_none());
        let b = self.cm_blocking.insert(BlockingRecv {
            conv: make(),
            status: None,
        });
        let mtl = self.mtl.as_mut().expect("cm path");
        if let Err(e) = mtl.irecv(types, sel, &b.conv, BLOCKING) {
            self.cm_blocking = None;
            return Err(e);
        }
        Ok(())
    }

    /// One MTL round of the blocking receive's wait. When the round completes the receive with
    /// its bytes in place, the MTL hands it back here instead of through
    /// [`MtlSink::recv_done`], and its status comes straight back (the receive is forgotten);
    /// otherwise says how much happened (a completion through the sink is then for
    /// [`Ob1::cm_recv_done`]).
    #[inline]
    pub(crate) fn cm_wait_round(&mut self, types: &TypeTable) -> WaitRound {
        let Some(mtl) = self.mtl.take() else {
            return WaitRound::Moved(0);
        };
        let mut placed = None;
        let n = mtl.progress_waiting(types, self, BLOCKING, &mut placed);
        self.mtl = Some(mtl);
        if let Some(p) = placed {
            if let Some(b) = self.cm_blocking.as_mut().filter(|b| b.status.is_none()) {
                let st = recv_status(types, &mut b.conv, MtlData::Placed(p.got), p.m, None);
                self.cm_blocking = None;
                return WaitRound::Done(st);
            }
        }
        WaitRound::Moved(n)
    }

    /// The status of the blocking receive once it has finished (it is then forgotten).
    #[inline]
    pub(crate) fn cm_recv_done(&mut self) -> Option<Status> {
        let status = self.cm_blocking.as_ref()?.status?;
        self.cm_blocking = None;
        Some(status)
    }

    /// `iprobe` over the MTL.
    pub(crate) fn cm_iprobe(
        &mut self,
        comms: &CommTable,
        src: Source,
        tag: TagSel,
        comm: CommId,
    ) -> Result<Option<Status>> {
        let sel = Ob1::cm_selector(comms, comm, src, tag)?;
        let mtl = self.mtl.as_mut().expect("cm path");
        Ok(mtl.iprobe(sel)?.map(|m| probe_status(&m)))
    }

    /// `improbe` over the MTL: the taken message is kept as a claimed record of the unexpected
    /// pool (so the C API's message handles work as with ob1), naming the MTL's message.
    pub(crate) fn cm_improbe(
        &mut self,
        comms: &CommTable,
        src: Source,
        tag: TagSel,
        comm: CommId,
    ) -> Result<Option<(MsgId, Status)>> {
        let sel = Ob1::cm_selector(comms, comm, src, tag)?;
        // The MTL's message cannot be put back: make sure the record has a slot first.
        if !self.unex.reserve() {
            return Err(self
                .unex
                .exhausted("unexpected-message records", super::UNEX_MSGS.name));
        }
        let mtl = self.mtl.as_mut().expect("cm path");
        let Some((msg, m)) = mtl.improbe(sel)? else {
            return Ok(None);
        };
        let rec = UnexMsg {
            proc: ProcId(0),
            env: Envelope {
                ctx: sel.ctx,
                src: m.src as i32,
                tag: m.tag,
                seq: 0,
            },
            kind: UnexKind::Rndv {
                msg_len: m.len,
                sreq: msg.0,
                read: None,
            },
            len: 0,
            data: Held::NONE,
            claimed: true,
            link: Link::default(),
            hlink: Link::default(),
        };
        let key = self.unex.insert(rec).map_err(|_| {
            self.unex
                .exhausted("unexpected-message records", super::UNEX_MSGS.name)
        })?;
        Ok(Some((MsgId(key), probe_status(&m))))
    }

    /// `imrecv` over the MTL.
    pub(crate) fn cm_imrecv(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        conv: Unpacker,
        msg: MsgId,
        scope: u32,
    ) -> Result<ReqId> {
        let bad = Error::new(
            ErrorClass::Request,
            Reason::BadArgument {
                what: "message handle is not a matched message",
            },
        );
        let m = self.unex.get(msg.0).filter(|m| m.claimed).ok_or(bad)?;
        let UnexKind::Rndv { sreq, .. } = m.kind else {
            return Err(bad);
        };
        let env = m.env;
        let comm = comms.by_cid(ContextId(env.ctx)).ok_or(bad)?;
        self.unex.remove(msg.0);
        let recv = RecvReq {
            conv,
            comm,
            src: Source::Rank(env.src as u32),
            tag: TagSel::Tag(env.tag),
            // Not cancellable (the MTL has no posted entry for it), completes when it is done.
            state: RecvState::Posted,
            post: 0,
        };
        let key = self.insert(Request::new(Op::Recv(recv), scope))?;
        self.cm_posted[comm.0 as usize] += 1;
        let mtl = self.mtl.as_mut().expect("cm path");
        let Some(Request {
            op: Op::Recv(r), ..
        }) = self.requests.get(key)
        else {
            unreachable!("just inserted");
        };
        if let Err(e) = mtl.imrecv(types, MtlMessage(sreq), &r.conv, Token(key.to_u64())) {
            self.cm_posted[comm.0 as usize] -= 1;
            self.requests.discard(key);
            return Err(e);
        }
        Ok(ReqId(key))
    }

    /// `cancel` over the MTL: a receive the MTL has not matched is cancelled.
    pub(crate) fn cm_cancel(&mut self, id: ReqId) -> Result<()> {
        let req = self.requests.get(id.0).ok_or(bad_request())?;
        let Op::Recv(r) = &req.op else { return Ok(()) };
        if r.state != RecvState::Posted || req.complete {
            return Ok(());
        }
        let comm = r.comm;
        let mtl = self.mtl.as_mut().expect("cm path");
        if !mtl.cancel(Token(id.0.to_u64())) {
            return Ok(());
        }
        self.cm_posted[comm.0 as usize] -= 1;
        let req = self.requests.get_mut(id.0).expect("checked above");
        if let Op::Recv(r) = &mut req.op {
            r.state = RecvState::Done;
        }
        req.status = Status {
            cancelled: true,
            ..Status::EMPTY
        };
        self.complete(id.0.index);
        Ok(())
    }

    /// Whether the MTL still has sends in flight.
    pub(crate) fn cm_busy(&self) -> bool {
        self.mtl.as_ref().is_some_and(|m| m.busy())
    }
}

/// Accounts or unpacks what a receive got into `conv`; the receive's status.
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
    finish_status(&mut status, m.len, conv);
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

impl MtlSink for Ob1 {
    fn send_done(&mut self, token: Token, result: Result<()>) {
        let key = Key::from_u64(token.0);
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        if req.complete {
            return;
        }
        if let Err(e) = result {
            req.status.error = Some(e);
        }
        self.complete(key.index);
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
            if let Some(b) = self.cm_blocking.as_mut().filter(|b| b.status.is_none()) {
                b.status = Some(recv_status(types, &mut b.conv, data, m, error));
            }
            return;
        }
        let key = Key::from_u64(token.0);
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        let Op::Recv(r) = &mut req.op else { return };
        if r.state == RecvState::Done || req.complete {
            return;
        }
        r.state = RecvState::Done;
        let comm = r.comm;
        req.status = recv_status(types, &mut r.conv, data, m, error);
        if let Some(n) = self.cm_posted.get_mut(comm.0 as usize) {
            *n = n.saturating_sub(1);
        }
        self.complete(key.index);
    }
}
