//! ob1's blocking receive: an `MPI_Recv` posted while nothing is queued on its communicator
//! waits in one slot of the PML rather than in a pooled request.
//!
//! Arriving messages look at the slot before the posted queue. That keeps the standard's
//! matching order: the queue was empty when the slot was taken, so any receive posted later
//! (another thread's) comes after it. A whole eager message is received into the slot's
//! convertor and its status kept there; a rendezvous needs a request for its protocol, so the
//! slot then becomes a pooled request and the wait goes on with that. Only one blocking
//! receive uses the slot at a time; another (a second thread's `MPI_Recv`) takes a request.
//! Saved against a request: the pool slot, the posted queue's link and unlink, the request's
//! completion and the test that frees it.

use super::recvfrag::Payload;
use super::unexpected::UnexKind;
use super::Ob1;
use crate::btl::Delivery;
use crate::comm::{CommId, CommTable};
use crate::datatype::convertor::Unpacker;
use crate::datatype::table::TypeTable;
use crate::error::{Error, Result};
use crate::pml::request::{ReqId, Source, Status, TagSel};
use crate::rte::ProcId;
use crate::wire::Envelope;

/// Where the blocking receive stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// No blocking receive is under way.
    Free,
    /// Posted, not matched.
    Waiting,
    /// Received (or failed): its status is [`Blocking::status`].
    Done,
    /// Matched by a rendezvous: continued as this request.
    Request(ReqId),
}

/// The blocking receive's slot. Its parts stay in place from posting to the caller's status
/// (written once each, never moved: a convertor is a few hundred bytes).
pub(crate) struct Blocking {
    state: State,
    comm: CommId,
    src: Source,
    tag: TagSel,
    /// The receive's convertor while it waits (an empty one otherwise).
    conv: Unpacker,
    status: Status,
}

impl Blocking {
    /// Frees the slot for the next blocking receive. The convertor is left for the next
    /// posting to replace, unless it keeps a derived type alive; of the status only the error
    /// is not rewritten by every receive.
    #[inline(always)]
    fn free(&mut self) {
        self.state = State::Free;
        self.status.error = None;
        if self.conv.retains_type() {
            self.conv = Unpacker::empty();
        }
    }

    /// A free slot.
    pub(crate) fn new() -> Blocking {
        Blocking {
            state: State::Free,
            comm: CommId(0),
            src: Source::Any,
            tag: TagSel::Any,
            conv: Unpacker::empty(),
            status: Status::EMPTY,
        }
    }
}

impl Ob1 {
    /// Whether a receive of what `(comm, src, tag)` accepts may be the blocking receive: the
    /// slot is free and nothing on `comm` comes before it (no receive posted, no unexpected
    /// message it accepts). Otherwise it takes a request.
    #[inline]
    pub(crate) fn recv_free(
        &self,
        comms: &CommTable,
        comm: CommId,
        src: Source,
        tag: TagSel,
    ) -> Result<bool> {
        if self.blocking.state != State::Free {
            return Ok(false);
        }
        comms.get_in_use(comm)?;
        Ok(self.comms[comm.0 as usize].posted.is_empty()
            && self.find_unexpected(comm, src, tag).is_none())
    }

    /// Posts the blocking receive (after [`Ob1::recv_free`] said yes) into the convertor `make`
    /// builds.
    #[inline(always)]
    pub(crate) fn recv_post(
        &mut self,
        make: impl FnOnce() -> Unpacker,
        comm: CommId,
        src: Source,
        tag: TagSel,
    ) {
        let b = &mut self.blocking;
        b.conv = make();
        (b.state, b.comm, b.src, b.tag) = (State::Waiting, comm, src, tag);
    }

    /// Whether the blocking receive waits for a message with `env` on `comm`.
    #[inline(always)]
    pub(super) fn blocking_accepts(&self, comm: CommId, env: &Envelope) -> bool {
        let b = &self.blocking;
        b.state == State::Waiting
            && b.comm == comm
            && b.src.accepts(env.src)
            && b.tag.accepts(env.tag)
    }

    /// Gives the blocking receive the message it accepts (its turn has come). An eager
    /// message finishes it; a rendezvous turns it into a request, or waits in its transport
    /// while no request can be had.
    #[inline(always)]
    pub(super) fn deliver_blocking(
        &mut self,
        types: &TypeTable,
        comm: CommId,
        from: ProcId,
        env: Envelope,
        kind: UnexKind,
        payload: Payload<'_>,
    ) -> Delivery {
        if !matches!(kind, UnexKind::Eager) {
            return self.blocking_to_request(types, from, env, kind, payload);
        }
        let b = &mut self.blocking;
        let from_repr = (self.foreign > 0).then(|| &self.reprs[from.0 as usize]);
        let len = Ob1::unpack_matched_parts(
            &self.unex,
            &self.chunks,
            from_repr,
            types,
            &mut b.conv,
            payload,
        );
        b.status.source = env.src;
        b.status.tag = env.tag;
        b.status.finish(len as u64, &b.conv);
        b.state = State::Done;
        self.drop_payload(payload);
        if self.comms[comm.0 as usize].posted.is_empty() {
            Delivery::Satisfied
        } else {
            Delivery::Consumed
        }
    }

    /// A rendezvous for the blocking receive: it continues as a pooled request.
    #[cold]
    #[inline(never)]
    fn blocking_to_request(
        &mut self,
        types: &TypeTable,
        from: ProcId,
        env: Envelope,
        kind: UnexKind,
        payload: Payload<'_>,
    ) -> Delivery {
        if !self.requests.pool.reserve() {
            // The rendezvous waits in its transport until a request is free.
            return Delivery::Retry;
        }
        let b = &mut self.blocking;
        let conv = core::mem::replace(&mut b.conv, Unpacker::empty());
        match self.requests.insert_recv(|| conv, b.src, b.tag, b.comm, 0) {
            Ok(key) => {
                b.state = State::Request(ReqId(key));
                if self
                    .deliver_matched(types, key.index, from, env, kind, payload)
                    .is_none()
                {
                    // Inserted above as a receive: cannot happen, and the receive fails if it did.
                    self.requests.pool.discard(key);
                    let b = &mut self.blocking;
                    b.status.error =
                        Some(Error::internal("a receive just posted is not in its slot"));
                    b.state = State::Done;
                    self.drop_payload(payload);
                }
                Delivery::Consumed
            }
            // Reserved above: cannot happen, and the receive is lost if it did.
            Err(e) => {
                b.status.error = Some(e);
                b.state = State::Done;
                self.drop_payload(payload);
                Delivery::Consumed
            }
        }
    }

    /// Whether the blocking receive has finished (its status is then
    /// [`Ob1::recv_finished`]'s).
    #[inline(always)]
    pub(crate) fn recv_done(&self) -> bool {
        match self.blocking.state {
            State::Done => true,
            State::Request(id) => self.requests.done(id),
            _ => false,
        }
    }

    /// The blocking receive's status, once it has finished; the slot is then free.
    #[cfg(test)]
    pub(crate) fn recv_finished(&mut self) -> Result<Option<Status>> {
        self.recv_finished_with(|st| *st)
    }

    /// Hands the blocking receive's status to `f` where it lies, once it has finished; the
    /// slot is then free.
    #[inline(always)]
    pub(crate) fn recv_finished_with<R>(
        &mut self,
        f: impl FnOnce(&Status) -> R,
    ) -> Result<Option<R>> {
        let b = &mut self.blocking;
        let r = match b.state {
            State::Done => f(&b.status),
            State::Request(id) => match self.requests.test_with(id, f)? {
                Some(r) => r,
                None => return Ok(None),
            },
            _ => return Ok(None),
        };
        b.free();
        Ok(Some(r))
    }

    /// Forgets a blocking receive on `comm`, which is being freed under it (an erroneous
    /// program: the receive is left waiting by its caller).
    pub(super) fn blocking_comm_removed(&mut self, comm: CommId) {
        if self.blocking_on(comm) {
            self.blocking.free();
        }
    }

    /// Whether the blocking receive waits on `comm`.
    pub(super) fn blocking_on(&self, comm: CommId) -> bool {
        self.blocking.state == State::Waiting && self.blocking.comm == comm
    }

    /// Whether the blocking receive goes on as a request (a rendezvous matched it).
    #[cfg(test)]
    pub(super) fn blocking_is_request(&self) -> bool {
        matches!(self.blocking.state, State::Request(_))
    }
}
