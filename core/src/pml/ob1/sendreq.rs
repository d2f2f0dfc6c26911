//! The send side: starting sends, answering rendezvous, scheduling fragments.

use super::Ob1;
use crate::bml::Bml;
use crate::btl::{AmTag, Btl, BtlFlags, DestRef, Endpoint, RemoteKey, Sent, Token};
use crate::datatype::convertor::Packer;
use crate::datatype::repr::Repr;
use crate::datatype::table::TypeTable;
use crate::error::{Error, Result};
use crate::list::List;
use crate::pml::request::{
    work_link, Dest, Op, ReadStep, RecvState, ReqId, Request, SendMode, SendReq, SendState,
};
use crate::pool::Key;
use crate::rte::ProcId;
use crate::wire::{Envelope, Header, ACK_LEN, FIN_LEN, FRAG_LEN, MATCH_LEN, RGET_LEN, RNDV_LEN};

/// What an attempt to put something on the wire did.
enum Attempt {
    /// No room in the route now.
    Blocked,
    /// Sent; the request is not finished.
    Sent,
    /// Everything handed to the BTLs; some zero-copy fragments are not reported complete yet.
    Issued,
    /// Sent; the request is now finished.
    Finished,
    /// An invariant of stormpi's own failed (it says which): the request, if any, completes
    /// with [`Error::internal`]. (Not an `Error`: an `Attempt` stays two words, returned in
    /// registers.)
    Failed(&'static str),
}

/// Fragments at least this big go zero-copy where the BTL can (smaller ones are cheaper to copy).
const ZERO_COPY_MIN: usize = 4096;
/// Message heads at least this big go through `Btl::send_inline` where the BTL saves a copy
/// that way (smaller ones are as cheap to copy).
const INLINE_MIN: usize = 1024;

/// Sends `header` and packed bytes `0..want` of `conv` as one fragment: gathered from the
/// user's memory by modules that can ([`BtlFlags::SEND_INLINE`]), else packed into reserved
/// space. How many bytes went (fewer than `want` to end on an element), or `None`: no room.
#[inline(always)]
fn send_head(
    btl: &mut dyn Btl,
    ep: Endpoint,
    header: &[u8],
    conv: &mut Packer,
    types: &TypeTable,
    want: usize,
) -> Option<usize> {
    if want >= INLINE_MIN && btl.attrs().flags.contains(BtlFlags::SEND_INLINE) {
        if let Some(d) = conv.data_ref(0, want) {
            // SAFETY: DataRef's contract: the bytes are readable while the packer's loan lasts,
            // which spans this call; send_inline is done with them when it returns.
            let data = unsafe { core::slice::from_raw_parts(d.as_ptr(), d.len()) };
            return btl
                .send_inline(ep, AmTag::PML, header, data)
                .then_some(want);
        }
    }
    let h = header.len();
    let space = btl.reserve(ep, h + want)?;
    space[..h].copy_from_slice(header);
    let n = conv.pack(types, 0, &mut space[h..h + want]);
    btl.commit(ep, AmTag::PML, h + n);
    Some(n)
}

impl Ob1 {
    /// The envelope of the next message to `d` with `tag`, and its sequence slot.
    #[inline(always)]
    fn envelope(&self, d: &Dest, tag: i32) -> (Envelope, usize) {
        let si = self.seq_index(d.comm, d.rank);
        let env = Envelope {
            ctx: d.ctx,
            src: d.me as i32,
            tag,
            seq: self.seqs[si].send,
        };
        (env, si)
    }

    /// Sends `conv`'s message to `d` at once, without a request, if it fits the eager protocol
    /// and its route has room; whether it did.
    #[inline(always)]
    pub fn send(
        &mut self,
        bml: &mut Bml,
        types: &TypeTable,
        d: &Dest,
        tag: i32,
        conv: &mut Packer,
    ) -> Result<bool> {
        let (env, si) = self.envelope(d, tag);
        self.send_eager(bml, types, conv, env, d.proc, si)
    }

    /// The eager send of [`Ob1::send`] once the envelope is known.
    #[inline(always)]
    fn send_eager(
        &mut self,
        bml: &mut Bml,
        types: &TypeTable,
        conv: &mut Packer,
        env: Envelope,
        proc: ProcId,
        si: usize,
    ) -> Result<bool> {
        if self.queued[proc.0 as usize] > 0 {
            return Ok(false);
        }
        let Some(route) = bml.eager(proc) else {
            return bml.reachable(proc).map(|_| false);
        };
        let btl = bml.btl(route.btl);
        let len = MATCH_LEN + conv.packed_len();
        if len > btl.attrs().eager_limit {
            return Ok(false);
        }
        let hdr = Header::match_bytes(&env);
        let Some(n) = send_head(btl, route.ep, &hdr, conv, types, len - MATCH_LEN) else {
            self.stats.send_stalls += 1;
            return Ok(false);
        };
        self.seqs[si].send = env.seq.wrapping_add(1);
        self.stats.eager_sent += 1;
        self.stats.sent(route.btl, MATCH_LEN + n);
        Ok(true)
    }

    /// Starts a send of `conv`'s message to `d` through a request.
    #[allow(clippy::too_many_arguments)]
    pub fn isend(
        &mut self,
        bml: &mut Bml,
        types: &TypeTable,
        d: &Dest,
        tag: i32,
        mut conv: Packer,
        mode: SendMode,
        scope: u32,
    ) -> Result<ReqId> {
        let (env, si) = self.envelope(d, tag);
        let proc = d.proc;
        bml.reachable(proc)?;
        if !self.same_form(proc) {
            // The receiver converts element by element: no fragment may split one.
            conv.whole_elements();
        }
        let send = SendReq {
            conv,
            proc,
            env,
            mode,
            state: SendState::Queued,
            stripe: crate::bml::Stripe::default(),
            inflight: 0,
            reg: None,
        };
        let key = self
            .requests
            .insert_with(|| Request::new(Op::Send(send), scope))?;
        self.seqs[si].send = env.seq.wrapping_add(1);
        let p = proc.0 as usize;
        if self.queued[p] == 0 {
            match self.start(bml, types, key.index) {
                Attempt::Finished => {
                    self.requests.complete(key.index);
                    return Ok(ReqId(key));
                }
                Attempt::Sent | Attempt::Issued => return Ok(ReqId(key)),
                Attempt::Failed(what) => {
                    self.fail(key.index, what);
                    return Ok(ReqId(key));
                }
                Attempt::Blocked => self.stats.send_stalls += 1,
            }
        }
        self.queued_peers += u32::from(self.queued[p] == 0);
        self.queued[p] += 1;
        self.pending_start
            .push_back(&self.requests.pool, key.index, work_link);
        Ok(ReqId(key))
    }

    /// Puts the first fragment of send slot `idx` on the wire.
    fn start(&mut self, bml: &mut Bml, types: &TypeTable, idx: u32) -> Attempt {
        let Some((
            key,
            Request {
                op: Op::Send(s), ..
            },
        )) = self.requests.pool.entry_at_mut(idx)
        else {
            return Attempt::Failed("a send to start is not in its slot");
        };
        // Reachability was checked at isend.
        let Some(route) = bml.eager(s.proc) else {
            return Attempt::Failed("no route to a peer checked reachable");
        };
        let btl = bml.btl(route.btl);
        let eager_limit = btl.attrs().eager_limit;
        let len = s.conv.packed_len();
        if s.mode != SendMode::Synchronous && MATCH_LEN + len <= eager_limit {
            let hdr = Header::match_bytes(&s.env);
            let Some(n) = send_head(btl, route.ep, &hdr, &mut s.conv, types, len) else {
                return Attempt::Blocked;
            };
            s.state = SendState::Done;
            self.stats.eager_sent += 1;
            self.stats.sent(route.btl, MATCH_LEN + n);
            return Attempt::Finished;
        }
        let attrs = *btl.attrs();
        if attrs.flags.contains(BtlFlags::GET)
            && len >= attrs.get_min
            && self.reprs[s.proc.0 as usize].same_as(&Repr::NATIVE)
        {
            // Offer the whole message for reading where it lies (the Red Storm paper's RDMA get
            // protocol); a module that cannot register it now gets a plain rendezvous.
            if let Some(k) = s
                .conv
                .data_ref(0, len)
                .and_then(|d| btl.register(route.ep, d))
            {
                // The module's first bytes travel with the offer (fewer where an element
                // ends); the receiver reads the rest.
                let first = btl
                    .rndv_eager()
                    .min(eager_limit.saturating_sub(RGET_LEN))
                    .min(len.saturating_sub(1));
                let mut hdr = [0u8; RGET_LEN];
                Header::Rget {
                    env: s.env,
                    msg_len: len as u64,
                    sreq: key.to_u64(),
                    key: k.0,
                }
                .emit(&mut hdr);
                let Some(n) = send_head(btl, route.ep, &hdr, &mut s.conv, types, first) else {
                    btl.deregister(k);
                    return Attempt::Blocked;
                };
                s.reg = Some((route.btl, k.0));
                s.state = SendState::AwaitFin;
                self.stats.rget_sent += 1;
                self.stats.sent(route.btl, RGET_LEN + n);
                return Attempt::Sent;
            }
        }
        let mut first = len.min(eager_limit.saturating_sub(RNDV_LEN));
        if let Some(head) = bml.rndv_head(s.proc, len as u64) {
            // The rest will be striped: the data the rendezvous carries delays the ACK, and
            // with it every other route.
            first = first.min(head);
        }
        let btl = bml.btl(route.btl);
        let mut hdr = [0u8; RNDV_LEN];
        Header::Rndv {
            env: s.env,
            msg_len: len as u64,
            sreq: key.to_u64(),
        }
        .emit(&mut hdr);
        let Some(n) = send_head(btl, route.ep, &hdr, &mut s.conv, types, first) else {
            return Attempt::Blocked;
        };
        s.state = SendState::AwaitAck;
        self.stats.rndv_sent += 1;
        self.stats.sent(route.btl, RNDV_LEN + n);
        Attempt::Sent
    }

    /// Answers the rendezvous matched by receive slot `idx`: reads an `RGET` message or sends
    /// its FIN ([`Ob1::answer_read`]), else sends the ACK.
    fn send_ack(&mut self, bml: &mut Bml, idx: u32) -> Attempt {
        let reading = matches!(
            self.requests.pool.at(idx).map(|q| &q.op),
            Some(Op::Recv(r)) if matches!(r.state, RecvState::Reading { .. })
        );
        if let Some(a) = reading.then(|| self.answer_read(bml, idx)).flatten() {
            return a;
        }
        let Some((key, req)) = self.requests.pool.entry_at_mut(idx) else {
            return Attempt::Failed("a receive to ack is not in its slot");
        };
        let Op::Recv(r) = &mut req.op else {
            return Attempt::Failed("a request to ack is not a receive");
        };
        let RecvState::Matched {
            proc,
            msg_len,
            received,
            sreq,
            acked,
            ..
        } = &mut r.state
        else {
            return Attempt::Failed("a receive to ack is not matched");
        };
        let Some(route) = bml.eager(*proc) else {
            // The sender reached us, so we reach it; a one-way route is a setup error.
            return Attempt::Failed("no route back to a sender");
        };
        let btl = bml.btl(route.btl);
        let Some(space) = btl.reserve(route.ep, ACK_LEN) else {
            return Attempt::Blocked;
        };
        Header::Ack {
            sreq: *sreq,
            dreq: key.to_u64(),
            offset: *received,
        }
        .emit(space);
        btl.commit(route.ep, AmTag::PML, ACK_LEN);
        *acked = true;
        self.stats.acks_sent += 1;
        self.stats.sent(route.btl, ACK_LEN);
        if *received == *msg_len {
            let total = *msg_len;
            r.state = RecvState::Done;
            req.status.finish(total, &r.conv);
            return Attempt::Finished;
        }
        Attempt::Sent
    }

    /// The next step of receive slot `idx`, which matched an `RGET`: start the get, or send
    /// the FIN once it is over. `None` when the message cannot be read here (a buffer that does
    /// not take the bytes as they are, no get on the route back): the receive is then an
    /// ordinary matched rendezvous, and its ACK asks for fragments.
    fn answer_read(&mut self, bml: &mut Bml, idx: u32) -> Option<Attempt> {
        let Some((key, req)) = self.requests.pool.entry_at_mut(idx) else {
            return Some(Attempt::Failed("a receive to read is not in its slot"));
        };
        let Op::Recv(r) = &mut req.op else {
            return Some(Attempt::Failed("a request to read is not a receive"));
        };
        let RecvState::Reading {
            proc,
            msg_len,
            head,
            sreq,
            key: rkey,
            step,
        } = r.state
        else {
            return Some(Attempt::Failed("a receive to read is not reading"));
        };
        let Some(route) = bml.eager(proc) else {
            return Some(Attempt::Failed("no route back to a sender"));
        };
        let btl = bml.btl(route.btl);
        match step {
            ReadStep::Start => {
                // The offer's own bytes (`head`) are in place; the get reads the rest.
                let dest = usize::try_from(msg_len - head)
                    .ok()
                    .filter(|_| btl.attrs().flags.contains(BtlFlags::GET))
                    .and_then(|n| Some((r.conv.dest_ref(head as usize, n)?, n)));
                let Some((dest, n)) = dest else {
                    r.state = RecvState::Matched {
                        proc,
                        msg_len,
                        received: head,
                        placing: 0,
                        sreq,
                        acked: false,
                    };
                    return None;
                };
                // SAFETY: `dest_ref` says the receive's buffer takes the `n` bytes at `dest` as
                // they are; the receive cannot complete, nor its buffer be released, before the
                // module reports the get.
                let d = unsafe { DestRef::new(dest, n) };
                if !btl.get(route.ep, RemoteKey(rkey), head, d, Token(key.to_u64())) {
                    return Some(Attempt::Blocked);
                }
                if let RecvState::Reading { step, .. } = &mut r.state {
                    *step = ReadStep::Reading;
                }
                Some(Attempt::Sent)
            }
            // Back on the list only when the get is over.
            ReadStep::Reading => Some(Attempt::Sent),
            ReadStep::Fin { failed } => {
                let Some(space) = btl.reserve(route.ep, FIN_LEN) else {
                    return Some(Attempt::Blocked);
                };
                Header::Fin { sreq, failed }.emit(space);
                btl.commit(route.ep, AmTag::PML, FIN_LEN);
                self.stats.sent(route.btl, FIN_LEN);
                r.state = RecvState::Done;
                req.status.finish(msg_len, &r.conv);
                Some(Attempt::Finished)
            }
        }
    }

    /// Sends fragments of send slot `idx` until it is done or its routes are full; first
    /// withdraws the registration of an `RGET` offer the receiver answered.
    fn send_frags(&mut self, bml: &mut Bml, types: &TypeTable, idx: u32) -> Attempt {
        let Some((
            key,
            Request {
                op: Op::Send(s), ..
            },
        )) = self.requests.pool.entry_at_mut(idx)
        else {
            return Attempt::Failed("a send to fragment is not in its slot");
        };
        if let Some((b, k)) = s.reg.take() {
            bml.btl(b).deregister(RemoteKey(k));
        }
        if s.state == SendState::Done {
            return if s.inflight == 0 {
                Attempt::Finished
            } else {
                Attempt::Issued
            };
        }
        let SendState::Frags { dreq, mut offset } = s.state else {
            return Attempt::Failed("a send to fragment has no fragments");
        };
        let len = s.conv.packed_len();
        if s.stripe.is_empty() {
            s.stripe = bml.stripe(s.proc, (len - offset) as u64);
        }
        loop {
            if offset >= len {
                s.state = SendState::Done;
                return if s.inflight == 0 {
                    Attempt::Finished
                } else {
                    Attempt::Issued
                };
            }
            // The lane that would finish the next fragment first, or the next one with room;
            // no lane takes more than its share.
            let mut sent = None;
            for (lane, share) in s.stripe.next((len - offset) as u64) {
                let route = s.stripe.route(lane);
                let btl = bml.btl(route.btl);
                let attrs = *btl.attrs();
                let most =
                    (attrs.max_send_size - FRAG_LEN).min(share.min(usize::MAX as u64) as usize);
                let n = s.conv.fragment_len(offset, most);
                let header = Header::Frag {
                    offset: offset as u64,
                    dreq,
                };
                let zero_copy = attrs.flags.contains(BtlFlags::SEND_REF) && n >= ZERO_COPY_MIN;
                if let Some(data) = s.conv.data_ref(offset, n).filter(|_| zero_copy) {
                    // Header copied, payload read straight from the user's buffer.
                    let mut hdr = [0u8; FRAG_LEN];
                    header.emit(&mut hdr);
                    match btl.send_ref(route.ep, AmTag::PML, &hdr, data, Token(key.to_u64())) {
                        None => continue,
                        Some(Sent::Done) => {}
                        Some(Sent::Pending) => {
                            s.inflight += 1;
                            self.inflight += 1;
                        }
                    }
                } else {
                    let Some(space) = btl.reserve(route.ep, FRAG_LEN + n) else {
                        continue;
                    };
                    header.emit(space);
                    let n = s
                        .conv
                        .pack(types, offset, &mut space[FRAG_LEN..FRAG_LEN + n]);
                    btl.commit(route.ep, AmTag::PML, FRAG_LEN + n);
                    sent = Some((lane, n));
                    break;
                }
                sent = Some((lane, n));
                break;
            }
            let Some((lane, n)) = sent else {
                return Attempt::Blocked;
            };
            self.stats.sent(s.stripe.route(lane).btl, FRAG_LEN + n);
            s.stripe.account(lane, n);
            offset += n;
            s.state = SendState::Frags { dreq, offset };
            self.stats.frags_sent += 1;
        }
    }

    /// Completes request slot `idx`, off every work list, with the internal error `what` (if
    /// the slot holds a request).
    #[cold]
    fn fail(&mut self, idx: u32, what: &'static str) {
        let e = Error::internal(what);
        self.warn(format_args!("request slot {idx}: {e}"));
        if let Some(req) = self.requests.pool.at_mut(idx) {
            req.status.error.get_or_insert(e);
        }
        self.requests.complete(idx);
    }

    /// A zero-copy fragment of send `token` left the BTL (or failed).
    pub(crate) fn on_send_done(&mut self, token: Token, result: Result<()>) {
        let key = Key::from_u64(token.0);
        let Some(req) = self.requests.pool.get_mut(key) else {
            self.warn(format_args!("completion for no live send ({:#x})", token.0));
            return;
        };
        let Op::Send(s) = &mut req.op else {
            self.warn(format_args!(
                "send completion for a request that is not a send"
            ));
            return;
        };
        if s.inflight == 0 {
            self.warn(format_args!("more send completions than sends in flight"));
            return;
        }
        s.inflight -= 1;
        self.inflight -= 1;
        if let Err(e) = result {
            req.status.error = Some(e);
        }
        if s.inflight == 0 && s.state == SendState::Done && !req.work.is_linked() {
            self.requests.complete(key.index);
        }
    }

    /// Retries the work that waited for room in the BTLs; returns how much got done.
    #[inline]
    pub fn progress_work(&mut self, bml: &mut Bml, types: &TypeTable) -> usize {
        // Every progress round asks; nearly always there is nothing (and never on the cm path).
        if self.pending_ack.is_empty()
            && self.pending_start.is_empty()
            && self.pending_frags.is_empty()
        {
            return 0;
        }
        self.progress_lists(bml, types)
    }

    #[inline(never)]
    fn progress_lists(&mut self, bml: &mut Bml, types: &TypeTable) -> usize {
        let mut done = 0;
        if !self.pending_ack.is_empty() {
            let mut cur = self.pending_ack.head();
            while let Some(i) = cur {
                cur = List::next(&self.requests.pool, i, work_link);
                match self.send_ack(bml, i) {
                    Attempt::Blocked => {}
                    Attempt::Sent | Attempt::Issued => {
                        self.pending_ack.remove(&self.requests.pool, i, work_link);
                        done += 1;
                    }
                    Attempt::Finished => {
                        self.pending_ack.remove(&self.requests.pool, i, work_link);
                        self.requests.complete(i);
                        done += 1;
                    }
                    Attempt::Failed(what) => {
                        self.pending_ack.remove(&self.requests.pool, i, work_link);
                        self.fail(i, what);
                        done += 1;
                    }
                }
            }
        }
        if !self.pending_start.is_empty() {
            self.next_pass();
            // Once every peer with sends waiting is blocked, the rest of the list (perhaps
            // 100,000 sends to one peer) has nothing to try this pass.
            let mut blocked = 0;
            let mut cur = self.pending_start.head();
            while let Some(i) = cur {
                if blocked == self.queued_peers {
                    break;
                }
                cur = List::next(&self.requests.pool, i, work_link);
                let Some(Op::Send(s)) = self.requests.pool.at(i).map(|r| &r.op) else {
                    continue;
                };
                let p = s.proc.0 as usize;
                // Sends to one peer leave in order: once one waits, the rest wait behind it.
                if self.blocked[p] == self.pass {
                    continue;
                }
                match self.start(bml, types, i) {
                    Attempt::Blocked => {
                        self.blocked[p] = self.pass;
                        blocked += 1;
                    }
                    a => {
                        self.pending_start.remove(&self.requests.pool, i, work_link);
                        self.queued[p] -= 1;
                        self.queued_peers -= u32::from(self.queued[p] == 0);
                        match a {
                            Attempt::Finished => self.requests.complete(i),
                            Attempt::Failed(what) => self.fail(i, what),
                            _ => {}
                        }
                        done += 1;
                    }
                }
            }
        }
        if !self.pending_frags.is_empty() {
            // Fragments sent count as progress even when a request is not finished.
            let before = self.stats.frags_sent;
            let mut cur = self.pending_frags.head();
            while let Some(i) = cur {
                cur = List::next(&self.requests.pool, i, work_link);
                match self.send_frags(bml, types, i) {
                    Attempt::Finished => {
                        self.pending_frags.remove(&self.requests.pool, i, work_link);
                        self.requests.complete(i);
                        done += 1;
                    }
                    Attempt::Issued => {
                        // Completes when the last zero-copy fragment is reported.
                        self.pending_frags.remove(&self.requests.pool, i, work_link);
                        done += 1;
                    }
                    Attempt::Failed(what) => {
                        self.pending_frags.remove(&self.requests.pool, i, work_link);
                        self.fail(i, what);
                        done += 1;
                    }
                    Attempt::Blocked | Attempt::Sent => {}
                }
            }
            done += (self.stats.frags_sent - before) as usize;
        }
        done
    }
}
