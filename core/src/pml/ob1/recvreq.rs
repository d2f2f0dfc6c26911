//! The receive side: posting receives, the unexpected queue, probes and matched probes.

use super::recvfrag::Payload;
use super::Ob1;
use crate::comm::{CommId, CommTable};
use crate::datatype::convertor::Unpacker;
use crate::datatype::table::TypeTable;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::pml::request::{
    Op, RecvReq, RecvSel, RecvState, ReqId, Request, Source, Status, TagSel,
};
use crate::pml::MsgId;

impl Ob1 {
    /// First unclaimed unexpected message on `comm` that `src`/`tag` accept.
    #[inline(always)]
    pub(super) fn find_unexpected(&self, comm: CommId, src: Source, tag: TagSel) -> Option<u32> {
        self.comms[comm.0 as usize]
            .unexpected
            .find(&self.unex, src, tag, &self.exact)
    }

    /// Posts a receive of what `s` accepts into the convertor `make` builds (in the request's
    /// slot: a convertor is a few hundred bytes, and moving it costs more than the rest of the
    /// posting), matching an unexpected message at once if one is there.
    #[inline(always)]
    pub fn irecv(
        &mut self,
        types: &TypeTable,
        make: impl FnOnce() -> Unpacker,
        s: &RecvSel,
        scope: u32,
    ) -> Result<ReqId> {
        // The selector's communicator was checked where it was made (`P2p::check_recv`/`sel`).
        let RecvSel { comm, src, tag, .. } = *s;
        let key = self.requests.insert_recv(make, src, tag, comm, scope)?;
        match self.find_unexpected(comm, src, tag) {
            Some(m) => {
                let Some(msg) = self.unex.at(m) else {
                    self.requests.pool.discard(key);
                    return Err(Error::internal(
                        "a queued unexpected message's slot is free",
                    ));
                };
                let (from, env, kind) = (msg.proc, msg.env, msg.kind);
                self.comms[comm.0 as usize]
                    .unexpected
                    .remove(&self.unex, m, &mut self.exact);
                let payload = Payload::Stored(m);
                if self
                    .deliver_matched(types, key.index, from, env, kind, payload)
                    .is_none()
                {
                    return Err(Error::internal("a receive just posted is not in its slot"));
                }
            }
            None => {
                self.comms[comm.0 as usize].posted.push(
                    &mut self.requests.pool,
                    key.index,
                    &mut self.exact,
                );
                self.queued(comm);
            }
        }
        Ok(ReqId(key))
    }

    /// The status of the first unexpected message `s` accepts, without taking it.
    pub fn iprobe(&mut self, comms: &CommTable, s: &RecvSel) -> Result<Option<Status>> {
        comms.get_in_use(s.comm)?;
        self.find_unexpected(s.comm, s.src, s.tag)
            .map(|i| probe_status(self, i))
            .transpose()
    }

    /// Like [`Ob1::iprobe`], but takes the message off the queue for a later [`Ob1::imrecv`].
    pub fn improbe(&mut self, comms: &CommTable, s: &RecvSel) -> Result<Option<(MsgId, Status)>> {
        comms.get_in_use(s.comm)?;
        let Some(i) = self.find_unexpected(s.comm, s.src, s.tag) else {
            return Ok(None);
        };
        let status = probe_status(self, i)?;
        self.comms[s.comm.0 as usize]
            .unexpected
            .remove(&self.unex, i, &mut self.exact);
        let Some((key, m)) = self.unex.entry_at_mut(i) else {
            return Err(Error::internal(
                "a queued unexpected message's slot is free",
            ));
        };
        m.claimed = true;
        Ok(Some((MsgId(key), status)))
    }

    /// Receives the message a matched probe took into `conv`.
    pub fn imrecv(
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
        let (from, env, kind) = (m.proc, m.env, m.kind);
        let comm = comms.by_cid(crate::comm::ContextId(env.ctx)).ok_or(bad)?;
        let recv = RecvReq {
            conv,
            comm,
            src: Source::Rank(env.src as u32),
            tag: TagSel::Tag(env.tag),
            state: RecvState::Posted,
            post: 0,
        };
        let key = self
            .requests
            .insert_with(|| Request::new(Op::Recv(recv), scope))?;
        let payload = Payload::Stored(msg.0.index);
        if self
            .deliver_matched(types, key.index, from, env, kind, payload)
            .is_none()
        {
            return Err(Error::internal("a receive just posted is not in its slot"));
        }
        Ok(ReqId(key))
    }
}

fn probe_status(pml: &Ob1, i: u32) -> Result<Status> {
    let Some(m) = pml.unex.at(i) else {
        return Err(Error::internal(
            "a queued unexpected message's slot is free",
        ));
    };
    Ok(Status {
        source: m.env.src,
        tag: m.env.tag,
        bytes: m.msg_len(),
        message_bytes: m.msg_len(),
        error: None,
        cancelled: false,
    })
}
