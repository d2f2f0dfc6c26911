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
use super::{small_reduction, AllreduceAlg, BcastAlg, Call, Grp, SMALL_REDUCTION};
use crate::comm::CommId;
use crate::error::Result;
use crate::shared::Inside;

/// The staging of a peer's input to a small allreduce (on the caller's stack: any thread's
/// blocking collective has its own).
#[repr(C, align(64))]
struct Stage([u8; SMALL_REDUCTION as usize]);

/// Runs blocking `call` on `comm` of two ranks (`g`) if it is a barrier, a broadcast or a small
/// allreduce that the planner would run as the one step above; false (nothing done) for any
/// other call, or for arguments the planner must report. `tag`: as for [`super::blocking`].
///
/// # Safety
/// As for [`super::collective`].
pub(super) unsafe fn blocking(
    cx: &mut Inside,
    comm: CommId,
    g: Grp,
    call: &Call,
    tag: Option<i32>,
) -> Result<bool> {
    debug_assert_eq!(g.size, 2);
    let peer = 1 - g.rank;
    let mut colls = cx.e().colls();
    let tune = colls.coll.tune;
    match *call {
        Call::Barrier => {
            // Every barrier algorithm is one empty exchange at two ranks.
            let tag = colls.coll_tag_for(comm, tag);
            let e = Span::empty();
            // SAFETY: empty spans.
            unsafe { exchange(cx, e, e, peer, tag, comm)? };
            Ok(true)
        }
        Call::Bcast { buf, root } => {
            let binomial = matches!(tune.bcast, BcastAlg::Auto | BcastAlg::Binomial);
            if !binomial
                || !(0..2).contains(&root)
                || colls.p2p.types.check_committed(buf.dt).is_err()
            {
                return Ok(false);
            }
            let tag = colls.coll_tag_for(comm, tag);
            if buf.count * exec::type_size(&colls.p2p.types, buf.dt) == 0 {
                return Ok(true);
            }
            let sp = Span::new(buf.ptr, buf.count, buf.dt);
            let id = if g.rank == root as u32 {
                // SAFETY: the caller's buffer, unchanged until the send is waited for.
                unsafe { colls.isend_span(sp, peer, tag, comm)? }
            } else {
                // SAFETY: the caller's buffer, untouched until the receive is waited for.
                Some(unsafe { colls.irecv_span(sp, peer, tag, comm)? })
            };
            if let Some(id) = id {
                if let Some(e) = cx.wait(id)?.error {
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
            let tag = colls.coll_tag_for(comm, tag);
            let bytes = (count * red.size) as usize;
            if let Some(s) = send.filter(|&s| !core::ptr::eq(s, recv.cast_const())) {
                // SAFETY: MPI's rules: `count` elements at each, not overlapping.
                unsafe { core::ptr::copy_nonoverlapping(s, recv, bytes) };
            }
            // The peer's input lands on the stack (SMALL_REDUCTION bytes at most).
            let mut stage = core::mem::MaybeUninit::<Stage>::uninit();
            let tmp = stage.as_mut_ptr().cast::<u8>();
            // SAFETY: `recv` is the caller's buffer, `tmp` holds at least `bytes` (written by the
            // receive before the reduction reads them).
            unsafe {
                exchange(
                    cx,
                    red.span(recv, count),
                    red.span(tmp, count),
                    peer,
                    tag,
                    comm,
                )?;
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
    cx: &mut Inside,
    out: Span,
    into: Span,
    peer: u32,
    tag: i32,
    comm: CommId,
) -> Result<()> {
    let mut colls = cx.e().colls();
    // The send goes first: posting the receive overlaps its flight (arrivals are taken in
    // only by progress, after the receive is posted).
    // SAFETY: the caller's contract.
    let sent = unsafe { colls.isend_span(out, peer, tag, comm)? };
    // SAFETY: the caller's contract.
    let recvd = unsafe { colls.irecv_span(into, peer, tag, comm)? };
    let st = cx.wait(recvd)?;
    if let Some(id) = sent {
        cx.wait(id)?;
    }
    st.error.map_or(Ok(()), Err)
}
