//! Collectives of two processes: barriers, broadcasts and small allreduces as the one exchange
//! (or the one message) they are between two ranks, without planning.
//!
//! At two ranks the general algorithms reduce to a single step — recursive doubling and
//! dissemination barriers swap one empty message, the binomial broadcast sends the buffer once,
//! recursive-doubling allreduce swaps the inputs and combines — so the messages here are the same,
//! with the same tag, as the planned path sends: a rank may take either (one whose call the
//! conditions below turn away plans it). Planning and the step machinery are most of a small
//! collective's cost at this size, which is what two ranks on a node run.

use super::exec::{self, Span};
use super::{small_reduction, AllreduceAlg, BcastAlg, Call, Grp};
use crate::comm::CommId;
use crate::engine::Engine;
use crate::error::Result;

impl Engine {
    /// Runs blocking `call` on `comm` of two ranks (`g`) if it is a barrier, a broadcast or a small
    /// allreduce that the planner would run as the one step above; false (nothing done) for any
    /// other call, or for arguments the planner must report.
    ///
    /// # Safety
    /// As for [`Engine::collective`].
    pub(super) unsafe fn pair_collective(
        &mut self,
        comm: CommId,
        g: Grp,
        call: &Call,
    ) -> Result<bool> {
        debug_assert_eq!(g.size, 2);
        let peer = 1 - g.rank;
        let tune = self.coll.tune;
        match *call {
            Call::Barrier => {
                // Every barrier algorithm is one empty exchange at two ranks.
                let tag = self.coll_tag_for(comm);
                let e = Span::empty();
                // SAFETY: empty spans.
                unsafe { self.exchange(e, e, peer, tag, comm)? };
                Ok(true)
            }
            Call::Bcast { buf, root } => {
                let binomial = matches!(tune.bcast, BcastAlg::Auto | BcastAlg::Binomial);
                if !binomial
                    || !(0..2).contains(&root)
                    || self.p2p.types.check_committed(buf.dt).is_err()
                {
                    return Ok(false);
                }
                let tag = self.coll_tag_for(comm);
                if buf.count * exec::type_size(&self.p2p.types, buf.dt) == 0 {
                    return Ok(true);
                }
                let sp = Span::new(buf.ptr, buf.count, buf.dt);
                let id = if g.rank == root as u32 {
                    // SAFETY: the caller's buffer, unchanged until the send is waited for.
                    unsafe { self.isend_span(sp, peer, tag, comm)? }
                } else {
                    // SAFETY: the caller's buffer, untouched until the receive is waited for.
                    Some(unsafe { self.irecv_span(sp, peer, tag, comm)? })
                };
                if let Some(id) = id {
                    if let Some(e) = self.wait(id)?.error {
                        return Err(e);
                    }
                }
                Ok(true)
            }
            Call::Allreduce {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                let Some(red) = small_reduction(dt, op, count) else {
                    return Ok(false);
                };
                if !matches!(tune.allreduce, AllreduceAlg::Auto | AllreduceAlg::RecDbl)
                    || !red.op.commutes()
                {
                    return Ok(false);
                }
                let tag = self.coll_tag_for(comm);
                let bytes = (count * red.size) as usize;
                if let Some(s) = send.filter(|&s| !core::ptr::eq(s, recv.cast_const())) {
                    // SAFETY: MPI's rules: `count` elements at each, not overlapping.
                    unsafe { core::ptr::copy_nonoverlapping(s, recv, bytes) };
                }
                // The peer's input lands in the blocking scratch region (SMALL_REDUCTION bytes
                // fit in it).
                let tmp = self.coll.blocking;
                // SAFETY: `recv` is the caller's buffer, `tmp` scratch of at least `bytes`.
                unsafe {
                    self.exchange(red.span(recv, count), red.span(tmp, count), peer, tag, comm)?;
                    red.apply(recv, tmp, count)?;
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Sends `out` to `peer` and receives `into` from it, both with `tag`.
    ///
    /// # Safety
    /// `out` stays readable and `into` writable, neither otherwise used, for the call.
    #[inline(always)]
    unsafe fn exchange(
        &mut self,
        out: Span,
        into: Span,
        peer: u32,
        tag: i32,
        comm: CommId,
    ) -> Result<()> {
        // The send goes first: posting the receive overlaps its flight (arrivals are taken in
        // only by progress, after the receive is posted).
        // SAFETY: the caller's contract.
        let sent = unsafe { self.isend_span(out, peer, tag, comm)? };
        // SAFETY: the caller's contract.
        let recvd = unsafe { self.irecv_span(into, peer, tag, comm)? };
        let st = self.wait(recvd)?;
        if let Some(id) = sent {
            self.wait(id)?;
        }
        st.error.map_or(Ok(()), Err)
    }
}
