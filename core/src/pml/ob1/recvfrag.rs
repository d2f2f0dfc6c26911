//! Arriving fragments: parse, validate, order, match.
//!
//! Everything a peer sends is checked before it is obeyed: header codes and lengths (by
//! [`Header::parse`]), the context id, that the claimed source rank is the process the fragment
//! came from, the sequence number, and that a request id echoed in an ACK or fragment names a
//! live request in the matching state, talking to that peer, with the offsets inside the message.
//! A fragment that fails is logged and dropped; the job goes on.

use super::unexpected::{unex_link, Chunks, UnexKind, UnexMsg};
use super::Ob1;
use crate::btl::{AmTag, Delivery, Placement, Sink, Token};
use crate::comm::{CommId, CommTable, ContextId};
use crate::datatype::convertor::Unpacker;
use crate::datatype::repr::Repr;
use crate::datatype::table::TypeTable;
use crate::error::{Error, ErrorClass, Reason};
use crate::list::Link;
use crate::pml::request::{work_link, Op, ReadStep, RecvState, Request, SendState};
use crate::pool::{Key, Pool};
use crate::rte::ProcId;
use crate::wire::{Envelope, Header};

/// Where an arriving message's payload is.
#[derive(Clone, Copy)]
pub(crate) enum Payload<'a> {
    /// Still in the transport's fragment.
    Frag(&'a [u8]),
    /// Already in unexpected record `idx` (a replay from the out-of-order or orphan list).
    Stored(u32),
}

/// Which list a held message goes on.
#[derive(Clone, Copy)]
enum Hold {
    Orphan,
    Unexpected(CommId),
    OutOfOrder(CommId),
}

/// The sink the BTLs deliver into: the PML with read access to the communicators.
pub struct Incoming<'a> {
    /// The PML.
    pub pml: &'a mut Ob1,
    /// The communicators.
    pub comms: &'a CommTable,
    /// The datatypes (convertors walk their descriptions).
    pub types: &'a TypeTable,
}

impl Sink for Incoming<'_> {
    fn unreachable(&mut self, peer: ProcId) {
        self.pml.unreachable.get_or_insert(peer);
    }

    fn deliver(&mut self, from: ProcId, tag: AmTag, frag: &[u8]) -> Delivery {
        if tag != AmTag::PML {
            return self
                .pml
                .reject(from, "fragment for an unknown active-message tag");
        }
        if let Some((env, payload)) = Header::parse_native_match(frag) {
            return self.pml.arrive_inline(
                self.comms,
                self.types,
                from,
                env,
                UnexKind::Eager,
                Payload::Frag(payload),
            );
        }
        match Header::parse(frag) {
            Err(e) => {
                self.pml.warn(format_args!(
                    "dropping fragment from process {}: {}",
                    from.0, e
                ));
                self.pml.stats.rejected += 1;
                Delivery::Consumed
            }
            Ok((Header::Match(env), payload)) => self.pml.arrive(
                self.comms,
                self.types,
                from,
                env,
                UnexKind::Eager,
                Payload::Frag(payload),
            ),
            Ok((Header::Rndv { env, msg_len, sreq }, payload)) => {
                self.rndv(from, env, msg_len, sreq, None, payload)
            }
            Ok((
                Header::Rget {
                    env,
                    msg_len,
                    sreq,
                    key,
                },
                payload,
            )) => self.rndv(from, env, msg_len, sreq, Some(key), payload),
            Ok((Header::Ack { sreq, dreq, offset }, _)) => {
                self.pml.on_ack(from, sreq, dreq, offset)
            }
            Ok((Header::Frag { offset, dreq }, payload)) => {
                self.pml.on_frag(self.types, from, offset, dreq, payload)
            }
            Ok((Header::Fin { sreq, failed }, _)) => self.pml.on_fin(from, sreq, failed),
        }
    }

    fn completed(&mut self, token: Token, result: crate::error::Result<()>) {
        let key = Key::from_u64(token.0);
        match self.pml.requests.pool.get(key).map(|r| &r.op) {
            Some(Op::Recv(_)) => self.pml.on_read_done(token, result),
            _ => self.pml.on_send_done(token, result),
        }
    }

    fn place(&mut self, from: ProcId, tag: AmTag, head: &[u8], len: usize) -> Option<Placement> {
        if tag != AmTag::PML {
            return None;
        }
        // Messages that match a posted receive now, and rendezvous fragments; anything else
        // (and anything that does not check out) goes the usual way, which logs what is wrong.
        let (hdr, payload) = Header::parse(head).ok()?;
        let skip = head.len() - payload.len();
        let n = len.checked_sub(skip)?;
        match hdr {
            Header::Frag { offset, dreq } => self.pml.place_frag(from, offset, dreq, skip, n),
            Header::Match(env) => {
                self.pml
                    .place_msg(self.comms, self.types, from, env, UnexKind::Eager, skip, n)
            }
            Header::Rndv { env, msg_len, sreq } => self.pml.place_msg(
                self.comms,
                self.types,
                from,
                env,
                UnexKind::Rndv {
                    msg_len,
                    sreq,
                    read: None,
                },
                skip,
                n,
            ),
            Header::Ack { .. } | Header::Rget { .. } | Header::Fin { .. } => None,
        }
    }

    fn placed(&mut self, from: ProcId, token: Token, len: usize, result: crate::error::Result<()>) {
        self.pml.on_placed(from, token, len, result);
    }
}

impl Incoming<'_> {
    /// The start of a rendezvous (`read`: the key of an `RGET`, whose payload, if any, is the
    /// message's first bytes and never all of them).
    fn rndv(
        &mut self,
        from: ProcId,
        env: Envelope,
        msg_len: u64,
        sreq: u64,
        read: Option<u64>,
        payload: &[u8],
    ) -> Delivery {
        if read.is_some() && payload.len() as u64 >= msg_len {
            return self.pml.reject(from, "RGET carries all of its message");
        }
        if payload.len() as u64 > msg_len {
            return self
                .pml
                .reject(from, "rendezvous carries more than its message length");
        }
        let kind = UnexKind::Rndv {
            msg_len,
            sreq,
            read,
        };
        self.pml.arrive(
            self.comms,
            self.types,
            from,
            env,
            kind,
            Payload::Frag(payload),
        )
    }
}

impl Ob1 {
    pub(crate) fn reject(&mut self, from: ProcId, why: &str) -> Delivery {
        self.warn(format_args!(
            "dropping fragment from process {}: {}",
            from.0, why
        ));
        self.stats.rejected += 1;
        Delivery::Consumed
    }

    /// Frees a stored record that is being dropped.
    /// Unpacks a matched message's payload (still in its fragment, or stored unexpected) into
    /// `conv`, told first where the message comes from when forms differ; the payload's length.
    #[inline(always)]
    pub(super) fn unpack_matched_parts(
        unex: &Pool<UnexMsg>,
        chunks: &Chunks,
        reprs: Option<&Repr>,
        types: &TypeTable,
        conv: &mut Unpacker,
        payload: Payload<'_>,
    ) -> usize {
        if let Some(r) = reprs {
            let _ = conv.set_source(types, r);
        }
        match payload {
            Payload::Frag(bytes) => {
                conv.unpack(types, 0, bytes);
                bytes.len()
            }
            Payload::Stored(i) => match unex.at(i) {
                Some(m) => {
                    chunks.unpack(types, m.data, m.len, conv);
                    m.len
                }
                None => 0,
            },
        }
    }

    pub(super) fn drop_payload(&mut self, payload: Payload<'_>) {
        if let Payload::Stored(i) = payload {
            if let Some(m) = self.unex.remove_at(i) {
                self.chunks.free(m.data);
            }
        }
    }

    /// A message (eager or rendezvous start) from `from`: order it, then match it or hold it.
    #[inline(never)]
    pub(crate) fn arrive(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        from: ProcId,
        env: Envelope,
        kind: UnexKind,
        payload: Payload<'_>,
    ) -> Delivery {
        self.arrive_inline(comms, types, from, env, kind, payload)
    }

    /// [`Ob1::arrive`], built into its caller: the eager fragment's path from the transport's
    /// poll to the matched receive is one function (three calls' register saves less a message).
    #[inline(always)]
    pub(crate) fn arrive_inline(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        from: ProcId,
        env: Envelope,
        kind: UnexKind,
        payload: Payload<'_>,
    ) -> Delivery {
        let cid = ContextId(env.ctx);
        let Some(comm) = comms.by_cid(cid) else {
            if !comms.cid_in_range(cid) {
                self.drop_payload(payload);
                return self.reject(from, "context id out of range");
            }
            return self.hold(Hold::Orphan, from, env, kind, payload);
        };
        let Some((c, peers)) = comms.get_any_with_peers(comm) else {
            self.drop_payload(payload);
            return self.reject(from, "context id of no communicator");
        };
        if env.src < 0
            || env.src as u32 >= peers.size
            || comms.peer_proc_of(c, peers, env.src as u32) != from
        {
            self.drop_payload(payload);
            return self.reject(from, "source rank does not match the sending process");
        }
        let si = self.seq_index(comm, env.src as u32);
        let expect = self.seqs[si].expect;
        if env.seq != expect {
            if env.seq.wrapping_sub(expect) < 0x8000 {
                let d = self.hold(Hold::OutOfOrder(comm), from, env, kind, payload);
                if d == Delivery::Consumed {
                    self.stats.out_of_order += 1;
                }
                return d;
            }
            self.drop_payload(payload);
            return self.reject(from, "stale or duplicate sequence number");
        }
        let d = self.accept_in_order(types, comm, from, env, kind, payload);
        if d == Delivery::Retry {
            return Delivery::Retry;
        }
        self.seqs[si].expect = expect.wrapping_add(1);
        self.drain_out_of_order(types, comm, env.src);
        d
    }

    /// Messages from `src` that were waiting for their turn, now that it has come.
    #[inline]
    fn drain_out_of_order(&mut self, types: &TypeTable, comm: CommId, src: i32) {
        if !self.comms[comm.0 as usize].cant_match.is_empty() {
            self.drain_held(types, comm, src);
        }
    }

    // Out of line: messages overtake each other only across several BTLs.
    #[inline(never)]
    fn drain_held(&mut self, types: &TypeTable, comm: CommId, src: i32) {
        let si = self.seq_index(comm, src as u32);
        loop {
            let expect = self.seqs[si].expect;
            let list = &mut self.comms[comm.0 as usize].cant_match;
            let Some(i) = list.find(&self.unex, unex_link, |m| {
                m.env.src == src && m.env.seq == expect
            }) else {
                return;
            };
            list.remove(&self.unex, i, unex_link);
            // `find` gave an occupied slot.
            let Some(m) = self.unex.at(i) else { return };
            let (from, env, kind) = (m.proc, m.env, m.kind);
            // A stored message never needs new storage, so it is always accepted.
            self.accept_in_order(types, comm, from, env, kind, Payload::Stored(i));
            self.seqs[si].expect = expect.wrapping_add(1);
        }
    }

    /// A message whose turn it is: hand it to the first posted receive that accepts it, or hold it.
    #[inline(always)]
    fn accept_in_order(
        &mut self,
        types: &TypeTable,
        comm: CommId,
        from: ProcId,
        env: Envelope,
        kind: UnexKind,
        payload: Payload<'_>,
    ) -> Delivery {
        if self.blocking_accepts(comm, &env) {
            return self.deliver_blocking(types, comm, from, env, kind, payload);
        }
        let posted = &mut self.comms[comm.0 as usize].posted;
        let found = posted.take_match(&self.requests.pool, &env, &mut self.exact);
        // Receives still posted here may take what follows in this poll (a window of
        // `MPI_Irecv`s drains in one); with none left, the next message waits for the receive
        // the program posts next rather than being stored as unexpected.
        let more = !posted.is_empty();
        match found.map(|r| self.deliver_matched_inline(types, r, from, env, kind, payload)) {
            Some(Some(true)) if !more => Delivery::Satisfied,
            Some(Some(_)) => Delivery::Consumed,
            // Not matched after all (a posted slot that held no receive): kept as unexpected.
            Some(None) | None => {
                let d = self.hold(Hold::Unexpected(comm), from, env, kind, payload);
                if d == Delivery::Consumed {
                    self.stats.unexpected += 1;
                }
                d
            }
        }
    }

    /// Keeps a message on a list, copying its payload into unexpected storage if it is still in
    /// the transport. Refuses (back-pressure) when storage is full.
    fn hold(
        &mut self,
        at: Hold,
        from: ProcId,
        env: Envelope,
        kind: UnexKind,
        payload: Payload<'_>,
    ) -> Delivery {
        let idx = match payload {
            Payload::Stored(i) => i,
            Payload::Frag(bytes) => {
                let Some(data) = self.chunks.store(bytes) else {
                    self.stats.refused += 1;
                    return Delivery::Retry;
                };
                let msg = UnexMsg {
                    proc: from,
                    env,
                    kind,
                    len: bytes.len(),
                    data,
                    claimed: false,
                    link: Link::default(),
                    hlink: Link::default(),
                };
                match self.unex.insert(msg) {
                    Ok(k) => k.index,
                    Err(msg) => {
                        self.chunks.free(msg.data);
                        self.stats.refused += 1;
                        return Delivery::Retry;
                    }
                }
            }
        };
        match at {
            Hold::Orphan => self.orphans.push_back(&self.unex, idx, unex_link),
            Hold::Unexpected(c) => {
                self.comms[c.0 as usize]
                    .unexpected
                    .push(&self.unex, idx, &mut self.exact);
                self.queued(c);
            }
            Hold::OutOfOrder(c) => self.comms[c.0 as usize]
                .cant_match
                .push_back(&self.unex, idx, unex_link),
        }
        Delivery::Consumed
    }

    /// Gives a matched message to receive request slot `r`; whether that completed it, or
    /// `None` (the payload untouched) if the slot holds no receive.
    #[inline(never)]
    pub(crate) fn deliver_matched(
        &mut self,
        types: &TypeTable,
        r: u32,
        from: ProcId,
        env: Envelope,
        kind: UnexKind,
        payload: Payload<'_>,
    ) -> Option<bool> {
        self.deliver_matched_inline(types, r, from, env, kind, payload)
    }

    /// [`Ob1::deliver_matched`], built into [`Ob1::arrive_inline`]'s caller.
    #[inline(always)]
    fn deliver_matched_inline(
        &mut self,
        types: &TypeTable,
        r: u32,
        from: ProcId,
        env: Envelope,
        kind: UnexKind,
        payload: Payload<'_>,
    ) -> Option<bool> {
        // Only an offer to read asks (eager messages skip the look).
        let readable = matches!(kind, UnexKind::Rndv { read: Some(_), .. })
            && (self.foreign == 0 || self.same_form(from));
        let Some(Request {
            op: Op::Recv(rr),
            status,
            ..
        }) = self.requests.pool.at_mut(r)
        else {
            return None;
        };
        // The message is in its sender's form; converting (if needed) starts here. (A convertor
        // starts out native: nothing to tell it in a job of one form.)
        let from_repr = (self.foreign > 0).then(|| &self.reprs[from.0 as usize]);
        let len = Ob1::unpack_matched_parts(
            &self.unex,
            &self.chunks,
            from_repr,
            types,
            &mut rr.conv,
            payload,
        );
        status.source = env.src;
        status.tag = env.tag;
        match kind {
            UnexKind::Eager => {
                rr.state = RecvState::Done;
                status.finish(len as u64, &rr.conv);
                self.drop_payload(payload);
                self.requests.complete(r);
                Some(true)
            }
            UnexKind::Rndv {
                msg_len,
                sreq,
                read: Some(key),
            } if (len as u64) < msg_len && readable => {
                // Offered for reading: the answer (`Ob1::send_ack`) reads the rest straight into
                // the buffer if the buffer and the route allow, else asks for fragments.
                rr.state = RecvState::Reading {
                    proc: from,
                    msg_len,
                    head: len as u64,
                    sreq,
                    key,
                    step: ReadStep::Start,
                };
                self.drop_payload(payload);
                self.pending_ack
                    .push_back(&self.requests.pool, r, work_link);
                Some(false)
            }
            UnexKind::Rndv { msg_len, sreq, .. } => {
                rr.state = RecvState::Matched {
                    proc: from,
                    msg_len,
                    received: len as u64,
                    placing: 0,
                    sreq,
                    acked: false,
                };
                self.drop_payload(payload);
                self.pending_ack
                    .push_back(&self.requests.pool, r, work_link);
                Some(false)
            }
        }
    }

    /// The receiver's ACK of one of our rendezvous sends.
    pub(crate) fn on_ack(&mut self, from: ProcId, sreq: u64, dreq: u64, offset: u64) -> Delivery {
        let key = Key::from_u64(sreq);
        let Some(req) = self.requests.pool.get_mut(key) else {
            return self.reject(from, "ACK for no live request");
        };
        let Op::Send(s) = &mut req.op else {
            return self.reject(from, "ACK for a request that is not a send");
        };
        let len = s.conv.packed_len() as u64;
        let waiting = matches!(s.state, SendState::AwaitAck | SendState::AwaitFin);
        if s.proc != from || !waiting || offset > len {
            return self.reject(from, "ACK does not fit the send it names");
        }
        if offset == len {
            s.state = SendState::Done;
            if s.reg.is_some() {
                // The offer's registration goes first (`send_frags`).
                self.pending_frags
                    .push_back(&self.requests.pool, key.index, work_link);
            } else {
                self.requests.complete(key.index);
            }
        } else {
            s.state = SendState::Frags {
                dreq,
                offset: offset as usize,
            };
            self.pending_frags
                .push_back(&self.requests.pool, key.index, work_link);
        }
        Delivery::Consumed
    }

    /// The receiver's FIN of one of our `RGET` offers: it has read the message (or failed).
    pub(crate) fn on_fin(&mut self, from: ProcId, sreq: u64, failed: bool) -> Delivery {
        let key = Key::from_u64(sreq);
        let Some(req) = self.requests.pool.get_mut(key) else {
            return self.reject(from, "FIN for no live request");
        };
        let Op::Send(s) = &mut req.op else {
            return self.reject(from, "FIN for a request that is not a send");
        };
        if s.proc != from || s.state != SendState::AwaitFin {
            return self.reject(from, "FIN does not fit the send it names");
        }
        if failed {
            req.status.error.get_or_insert(Error::new(
                ErrorClass::Other,
                Reason::Transport {
                    btl: "pml",
                    what: "the receiver could not read the message",
                },
            ));
        }
        s.state = SendState::Done;
        // Completes once its registration is withdrawn (`send_frags`).
        self.pending_frags
            .push_back(&self.requests.pool, key.index, work_link);
        Delivery::Consumed
    }

    /// The get of a receive that matched an `RGET` is over: the FIN goes next. A get that
    /// failed (the module could not read the sender's memory: permission withdrawn, a fault)
    /// loses nothing: the receive becomes an ordinary matched rendezvous whose ACK asks the
    /// sender for the rest of the message (after what the offer carried) in fragments, which
    /// overwrite whatever the get wrote.
    pub(crate) fn on_read_done(&mut self, token: Token, result: crate::error::Result<()>) {
        let key = Key::from_u64(token.0);
        let Some(req) = self.requests.pool.get_mut(key) else {
            self.warn(format_args!("read completion for no live receive"));
            return;
        };
        let Op::Recv(r) = &mut req.op else {
            self.warn(format_args!(
                "read completion for a request that is not a receive"
            ));
            return;
        };
        let RecvState::Reading {
            proc,
            msg_len,
            head,
            sreq,
            step,
            ..
        } = &mut r.state
        else {
            self.warn(format_args!(
                "read completion for a receive that is not reading"
            ));
            return;
        };
        if *step != ReadStep::Reading {
            self.warn(format_args!(
                "read completion for a receive that is not reading"
            ));
            return;
        }
        match result {
            Ok(()) => {
                r.conv.placed((*msg_len - *head) as usize);
                *step = ReadStep::Fin { failed: false };
                self.stats.reads += 1;
            }
            Err(e) => {
                let proc = *proc;
                // The offer's own bytes are in place: the fragments start after them.
                r.state = RecvState::Matched {
                    proc,
                    msg_len: *msg_len,
                    received: *head,
                    placing: 0,
                    sreq: *sreq,
                    acked: false,
                };
                self.warn(format_args!(
                    "reading a message from rank {} failed ({e}); asking for fragments instead",
                    proc.0
                ));
            }
        }
        self.pending_ack
            .push_back(&self.requests.pool, key.index, work_link);
    }

    /// A fragment of a rendezvous message for one of our receives.
    pub(crate) fn on_frag(
        &mut self,
        types: &TypeTable,
        from: ProcId,
        offset: u64,
        dreq: u64,
        payload: &[u8],
    ) -> Delivery {
        let key = Key::from_u64(dreq);
        let Some(req) = self.requests.pool.get_mut(key) else {
            return self.reject(from, "fragment for no live request");
        };
        let Op::Recv(r) = &mut req.op else {
            return self.reject(from, "fragment for a request that is not a receive");
        };
        let RecvState::Matched {
            proc,
            msg_len,
            received,
            placing,
            acked,
            ..
        } = &mut r.state
        else {
            return self.reject(from, "fragment for a receive that is not matched");
        };
        let n = payload.len() as u64;
        let in_range = offset.checked_add(n).is_some_and(|end| end <= *msg_len)
            && *received + *placing + n <= *msg_len;
        if *proc != from || !*acked || !in_range {
            return self.reject(from, "fragment does not fit the receive it names");
        }
        if let Ok(pos) = usize::try_from(offset) {
            r.conv.unpack(types, pos, payload);
        }
        *received += n;
        if *received == *msg_len {
            let total = *msg_len;
            r.state = RecvState::Done;
            req.status.finish(total, &r.conv);
            self.requests.complete(key.index);
        }
        Delivery::Consumed
    }
}

impl Ob1 {
    /// Where the `n` payload bytes of a rendezvous fragment (`skip` header bytes, then data for
    /// stream offset `offset` of receive `dreq`) can go straight into the user's buffer: the
    /// same checks as [`Ob1::on_frag`], and the receive's buffer must take the range as it is.
    pub(crate) fn place_frag(
        &mut self,
        from: ProcId,
        offset: u64,
        dreq: u64,
        skip: usize,
        n: usize,
    ) -> Option<Placement> {
        let req = self.requests.pool.get_mut(Key::from_u64(dreq))?;
        let Op::Recv(r) = &mut req.op else {
            return None;
        };
        let RecvState::Matched {
            proc,
            msg_len,
            received,
            placing,
            acked,
            ..
        } = &mut r.state
        else {
            return None;
        };
        let len = n as u64;
        let in_range = offset.checked_add(len).is_some_and(|end| end <= *msg_len)
            && *received + *placing + len <= *msg_len;
        if *proc != from || !*acked || !in_range || n == 0 {
            return None;
        }
        let dest = r.conv.dest_ref(usize::try_from(offset).ok()?, n)?;
        // The receive cannot complete (and its buffer cannot be released) until these bytes
        // are reported.
        *placing += len;
        Some(Placement {
            skip,
            dest,
            token: Token(dreq),
        })
    }

    /// Where the `n` payload bytes of a message (eager, or the start of a rendezvous) can go
    /// straight into the buffer of the receive it matches now: the message is next in order
    /// from its sender, in native form, and the first posted receive that accepts it takes
    /// the bytes as they are. Then it is matched at once (the payload's arrival completes the
    /// receive or sends the ACK: [`Ob1::on_placed`]); otherwise nothing changes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn place_msg(
        &mut self,
        comms: &CommTable,
        types: &TypeTable,
        from: ProcId,
        env: Envelope,
        kind: UnexKind,
        skip: usize,
        n: usize,
    ) -> Option<Placement> {
        let comm = comms.by_cid(ContextId(env.ctx))?;
        let (c, peers) = comms.get_any_with_peers(comm)?;
        if n == 0
            || env.src < 0
            || env.src as u32 >= peers.size
            || comms.peer_proc_of(c, peers, env.src as u32) != from
            || !self.same_form(from)
        {
            return None;
        }
        let (msg_len, sreq, acked) = match kind {
            UnexKind::Eager => (n as u64, 0, true),
            UnexKind::Rndv {
                msg_len,
                sreq,
                read: None,
            } if n as u64 <= msg_len => (msg_len, sreq, false),
            UnexKind::Rndv { .. } => return None,
        };
        let si = self.seq_index(comm, env.src as u32);
        // The blocking receive takes its message from the fragment (`deliver_blocking`).
        if env.seq != self.seqs[si].expect || self.blocking_accepts(comm, &env) {
            return None;
        }
        let posted = &mut self.comms[comm.0 as usize].posted;
        let r = posted.find_match(&self.requests.pool, &env, &self.exact)?;
        let Some(Op::Recv(rr)) = self.requests.pool.at(r).map(|q| &q.op) else {
            return None;
        };
        let dest = rr.conv.dest_ref(0, n)?;
        // Matched: from here on as `accept_in_order` and `deliver_matched`, but the payload is
        // on its way.
        let taken = self.comms[comm.0 as usize].posted.take_match(
            &self.requests.pool,
            &env,
            &mut self.exact,
        );
        debug_assert_eq!(taken, Some(r));
        // A receive, as checked above: taking the match changed only its links.
        let Some((
            key,
            Request {
                op: Op::Recv(rr),
                status,
                ..
            },
        )) = self.requests.pool.entry_at_mut(r)
        else {
            return None;
        };
        if self.foreign > 0 {
            let _ = rr.conv.set_source(types, &self.reprs[from.0 as usize]);
        }
        rr.state = RecvState::Matched {
            proc: from,
            msg_len,
            received: 0,
            placing: n as u64,
            sreq,
            acked,
        };
        status.source = env.src;
        status.tag = env.tag;
        self.seqs[si].expect = env.seq.wrapping_add(1);
        self.drain_out_of_order(types, comm, env.src);
        Some(Placement {
            skip,
            dest,
            token: Token(key.to_u64()),
        })
    }

    /// A transport finished (or gave up) writing a placement of [`Ob1::place_frag`] or
    /// [`Ob1::place_msg`].
    pub(crate) fn on_placed(
        &mut self,
        from: ProcId,
        token: Token,
        len: usize,
        result: crate::error::Result<()>,
    ) {
        let key = Key::from_u64(token.0);
        let Some(req) = self.requests.pool.get_mut(key) else {
            self.warn(format_args!(
                "placement for no live receive ({:#x})",
                token.0
            ));
            return;
        };
        let Op::Recv(r) = &mut req.op else {
            self.warn(format_args!(
                "placement for a request that is not a receive"
            ));
            return;
        };
        let RecvState::Matched {
            proc,
            msg_len,
            received,
            placing,
            acked,
            ..
        } = &mut r.state
        else {
            self.warn(format_args!("placement for a receive that is not matched"));
            return;
        };
        let n = len as u64;
        if *proc != from || n > *placing {
            self.warn(format_args!("placement report does not fit its receive"));
            return;
        }
        *placing -= n;
        // Bytes that will never arrive count as arrived, so the receive completes — with the
        // transport's error.
        *received += n;
        match result {
            Ok(()) => r.conv.placed(len),
            Err(e) => {
                req.status.error.get_or_insert(e);
            }
        }
        if !*acked {
            // The start of a rendezvous: the ACK says how much arrived (and completes the
            // receive if that was all).
            if *placing == 0 {
                self.pending_ack
                    .push_back(&self.requests.pool, key.index, work_link);
            }
            return;
        }
        if *received == *msg_len {
            let total = *msg_len;
            r.state = RecvState::Done;
            req.status.finish(total, &r.conv);
            self.requests.complete(key.index);
        }
    }
}
