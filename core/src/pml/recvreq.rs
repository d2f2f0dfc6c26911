//! The receive side: posting receives, the unexpected queue, probes and matched probes.

use super::recvfrag::Payload;
use super::request::{Op, RecvReq, RecvState, ReqId, Request, Source, Status, TagSel};
use super::Ob1;
use crate::comm::{CommId, CommTable};
use crate::datatype::convertor::Unpacker;
use crate::datatype::table::TypeTable;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::pool::Key;

/// A message taken off the unexpected queue by a matched probe, for `MPI_Mrecv`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsgId(pub Key);

impl Ob1 {
    /// First unclaimed unexpected message on `comm` that `src`/`tag` accept.
    fn find_unexpected(&self, comm: CommId, src: Source, tag: TagSel) -> Option<u32> {
        self.comms[comm.0 as usize]
            .unexpected
            .find(&self.unex, src, tag)
    }

    /// Posts a receive into `conv` on `comm`, matching an unexpected message at once if one is
    /// there. Source and tag must be validated by the caller.
    #[allow(clippy::too_many_arguments)]
    pub fn irecv(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        conv: Unpacker,
        src: Source,
        tag: TagSel,
        comm: CommId,
        scope: u32,
    ) -> Result<ReqId> {
        self.irecv_with(comms, types, || conv, src, tag, comm, scope)
    }

    /// [`Ob1::irecv`] into the convertor `make` builds, built in the request's slot (a
    /// convertor is a few hundred bytes; moving it costs more than the rest of the posting).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub fn irecv_with(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        make: impl FnOnce() -> Unpacker,
        src: Source,
        tag: TagSel,
        comm: CommId,
        scope: u32,
    ) -> Result<ReqId> {
        if self.mtl.is_some() {
            return self.cm_irecv(comms, types, make, src, tag, comm, scope);
        }
        comms.get_in_use(comm)?;
        let key = self.insert_recv(make, src, tag, comm, scope)?;
        match self.find_unexpected(comm, src, tag) {
            Some(m) => {
                self.comms[comm.0 as usize].unexpected.remove(&self.unex, m);
                let msg = self.unex.at(m).expect("occupied");
                let (from, env, kind) = (msg.proc, msg.env, msg.kind);
                self.deliver_matched(types, key.index, from, env, kind, Payload::Stored(m));
            }
            None => self.comms[comm.0 as usize]
                .posted
                .push(&mut self.requests, key.index),
        }
        Ok(ReqId(key))
    }

    /// A posted receive request for `src`/`tag` on `comm` into the convertor `make` builds,
    /// built in its pool slot (shared by both paths' `irecv`).
    #[inline(always)]
    pub(crate) fn insert_recv(
        &mut self,
        make: impl FnOnce() -> Unpacker,
        src: Source,
        tag: TagSel,
        comm: CommId,
        scope: u32,
    ) -> Result<Key> {
        let make = || {
            let recv = RecvReq {
                conv: make(),
                comm,
                src,
                tag,
                state: RecvState::Posted,
                post: 0,
            };
            Request::new(Op::Recv(recv), scope)
        };
        self.requests
            .insert_with(make)
            .ok_or_else(|| self.requests_exhausted())
    }

    /// The status of the first unexpected message `src`/`tag` accept on `comm`, without taking it.
    pub fn iprobe(
        &mut self,
        comms: &CommTable,
        src: Source,
        tag: TagSel,
        comm: CommId,
    ) -> Result<Option<Status>> {
        if self.mtl.is_some() {
            return self.cm_iprobe(comms, src, tag, comm);
        }
        comms.get_in_use(comm)?;
        Ok(self
            .find_unexpected(comm, src, tag)
            .map(|i| probe_status(self, i)))
    }

    /// Like [`Ob1::iprobe`], but takes the message off the queue for a later [`Ob1::imrecv`].
    pub fn improbe(
        &mut self,
        comms: &CommTable,
        src: Source,
        tag: TagSel,
        comm: CommId,
    ) -> Result<Option<(MsgId, Status)>> {
        if self.mtl.is_some() {
            return self.cm_improbe(comms, src, tag, comm);
        }
        comms.get_in_use(comm)?;
        let Some(i) = self.find_unexpected(comm, src, tag) else {
            return Ok(None);
        };
        let status = probe_status(self, i);
        self.comms[comm.0 as usize].unexpected.remove(&self.unex, i);
        let key = self.unex.key_at(i).expect("occupied");
        self.unex.get_mut(key).expect("occupied").claimed = true;
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
        if self.mtl.is_some() {
            return self.cm_imrecv(comms, types, conv, msg, scope);
        }
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
        let key = self.insert(Request::new(Op::Recv(recv), scope))?;
        self.deliver_matched(
            types,
            key.index,
            from,
            env,
            kind,
            Payload::Stored(msg.0.index),
        );
        Ok(ReqId(key))
    }
}

fn probe_status(pml: &Ob1, i: u32) -> Status {
    let m = pml.unex.at(i).expect("occupied");
    Status {
        source: m.env.src,
        tag: m.env.tag,
        bytes: m.msg_len(),
        message_bytes: m.msg_len(),
        error: None,
        cancelled: false,
    }
}
