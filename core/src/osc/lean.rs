//! The lean entries of a shared window: what the C binding calls for a contiguous operation of
//! one predefined type (`MPI_Put`, `MPI_Get`, `MPI_Accumulate`, `MPI_Fetch_and_op`,
//! `MPI_Compare_and_swap`) and for `MPI_Win_flush`, before it decodes anything else.
//!
//! Each entry either does the whole call — the window is a shared segment, the target is in an
//! access epoch and in range, nothing else is in flight — and says so, or does nothing at all
//! and leaves the call to the general path ([`super::issue`], [`super::flush`]), which makes
//! every check the standard asks for and reports what fails. So no error is decided here, and
//! a call that fails any check costs one more pass than before, not a different answer.

use super::*;

/// `MPI_Put` (`get` false) or `MPI_Get` of `len` dense bytes at `addr` to or from target
/// `rank`'s displacement `disp` in shared window `id`. Whether it was done.
///
/// # Safety
/// `addr..+len` is the user's origin buffer, lent by MPI for the call (readable for a put,
/// writable for a get).
#[inline]
pub unsafe fn copy(
    e: &Engine,
    id: WinId,
    get: bool,
    addr: *mut u8,
    rank: i32,
    disp: i64,
    len: usize,
) -> bool {
    let Some(remote) = e
        .osc
        .get(id)
        .ok()
        .and_then(|w| w.lean_target(rank, disp, len))
    else {
        return false;
    };
    // SAFETY: `remote..+len` lies in the target's part of the segment this process maps
    // (`lean_target`), which MPI lets origins read and write in an access epoch; the origin
    // buffer is the caller's contract. `copy` allows the overlap of a put from the window into
    // itself.
    unsafe {
        let (from, to) = if get { (remote, addr) } else { (addr, remote) };
        // One word moves by a load and a store (read whole before written, so an overlap is
        // fine too) rather than a call to memmove.
        match len {
            8 => to
                .cast::<u64>()
                .write_unaligned(from.cast::<u64>().read_unaligned()),
            4 => to
                .cast::<u32>()
                .write_unaligned(from.cast::<u32>().read_unaligned()),
            _ => shm::copy(from, to, len),
        }
    }
    true
}

/// `MPI_Accumulate` (`old` null) or `MPI_Fetch_and_op` (`old` the result buffer) of `len`
/// bytes of elements of the predefined type `dt` at `src` (not read for `MPI_NO_OP`) into
/// target `rank`'s displacement `disp` in shared window `id`: integers by CPU atomics, other
/// types under the target's accumulate word. Whether it was done; nothing is when `op` is not
/// defined on `dt` (the general path says so).
///
/// # Safety
/// `src` (unless the op is `MPI_NO_OP`) and `old` (unless null) are the user's buffers of
/// `len` bytes, lent by MPI for the call and apart from the window (the standard says so).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn accumulate(
    e: &Engine,
    id: WinId,
    op: Op,
    dt: Datatype,
    src: *const u8,
    old: *mut u8,
    rank: i32,
    disp: i64,
    len: usize,
) -> bool {
    if matches!(op, Op::User(_) | Op::Minloc | Op::Maxloc) {
        return false;
    }
    let Ok(w) = e.osc.get(id) else {
        return false;
    };
    let Some(remote) = w.lean_target(rank, disp, len) else {
        return false;
    };
    if let Some(width) = atomic::width(dt, remote as usize) {
        // SAFETY: `remote..+len` lies in the target's part of the segment (`lean_target`),
        // whose integer elements every process updates only by CPU atomics (`atomic::width`);
        // the buffers are the caller's contract. An operation not defined on the type fails at
        // the first element, before anything is written.
        return unsafe {
            if len == width {
                atomic::rmw(op, dt, width, remote, src, old)
            } else {
                atomic::combine_run(op, dt, remote, src, old, len).map(|_| ())
            }
        }
        .is_ok();
    }
    // SAFETY: as above; the word-held path checks the operation against the type itself.
    unsafe { under_word(e, w, op, dt, src, old, remote, rank as u32, len) }
}

/// `MPI_Fetch_and_op` of one integer element of `width` bytes with `MPI_SUM`, `MPI_REPLACE` or
/// `MPI_NO_OP` ([`atomic::fetch`]) at target `rank`'s displacement `disp` in shared window `id`.
/// Whether it was done (an element not aligned to its size, which goes under the accumulate
/// word, or another operation, is [`accumulate`]'s).
///
/// # Safety
/// `src` (unless the op is `MPI_NO_OP`) and `old` are the user's buffers of one element, lent
/// by MPI for the call and apart from the window.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn fetch_op(
    e: &Engine,
    id: WinId,
    op: Op,
    width: usize,
    src: *const u8,
    old: *mut u8,
    rank: i32,
    disp: i64,
) -> bool {
    let Some(remote) = e
        .osc
        .get(id)
        .ok()
        .and_then(|w| w.lean_target(rank, disp, width))
    else {
        return false;
    };
    if !(remote as usize).is_multiple_of(width) {
        return false;
    }
    // SAFETY: `remote` is one aligned integer element in the target's part of the segment
    // (`lean_target`), which every process updates only by CPU atomics (`atomic::width` says
    // so for its type and address); the buffers are the caller's contract.
    unsafe { atomic::fetch(op, width, remote, src, old) }
}

/// Whether target `rank` of window `id` is in a passive-target epoch of this process (`lock`
/// or `lock_all`), where the request-based operations are allowed.
#[inline]
pub fn passive(e: &Engine, id: WinId, rank: i32) -> bool {
    e.osc.get(id).is_ok_and(|w| {
        rank >= 0 && (rank as u32) < w.size && (w.lock_all || w.peer(rank as u32).locked != 0)
    })
}

/// The rest of [`accumulate`]: elements that are not integers, combined under target `t`'s
/// accumulate word (out of line: the atomic path above stays small).
///
/// # Safety
/// `remote..+len` lies in `t`'s part of the segment; the buffers as for [`accumulate`].
#[allow(clippy::too_many_arguments)]
#[inline(never)]
unsafe fn under_word(
    e: &Engine,
    w: &Window,
    op: Op,
    dt: Datatype,
    src: *const u8,
    old: *mut u8,
    remote: *mut u8,
    t: u32,
    len: usize,
) -> bool {
    // Pairs (MINLOC/MAXLOC's types) and types an operation is not defined on are the general
    // path's: it knows their representations and reports the error.
    if matches!(dt.scalar(), Scalar::Pair { .. })
        || !matches!(op, Op::Replace | Op::NoOp) && crate::op::check(op, dt).is_err()
    {
        return false;
    }
    let Some(seg) = w.seg.as_ref() else {
        return false;
    };
    let platform: &dyn Platform = e.platform;
    let r = seg.atomically(t, platform, || {
        // SAFETY: as above, but these elements are updated only under the target's
        // accumulate word, which this closure holds: nothing else writes them meanwhile.
        unsafe {
            if !old.is_null() {
                core::ptr::copy_nonoverlapping(remote, old, len);
            }
            if op == Op::NoOp {
                return Ok(());
            }
            if op == Op::Sum && dt == Datatype::DOUBLE && len == 8 {
                // The accumulate most codes make, one element without the operation table's
                // dispatch (longer runs keep `combine`'s vectorised loop).
                let t = remote.cast::<f64>();
                t.write_unaligned(t.read_unaligned() + src.cast::<f64>().read_unaligned());
                return Ok(());
            }
            let tgt = core::slice::from_raw_parts_mut(remote, len);
            apply::combine(op, dt, tgt, core::slice::from_raw_parts(src, len))
        }
    });
    r.is_ok()
}

/// `MPI_Compare_and_swap` of one integer element of `dt` at target `rank`'s displacement
/// `disp` in shared window `id`, by a CPU atomic. Whether it was done (other types take the
/// general path, under the accumulate word).
///
/// # Safety
/// `new`, `compare` and `old` are the user's buffers of one element each, lent by MPI for the
/// call and apart from the window.
#[allow(clippy::too_many_arguments)]
#[inline]
pub unsafe fn compare_and_swap(
    e: &Engine,
    id: WinId,
    dt: Datatype,
    new: *const u8,
    compare: *const u8,
    old: *mut u8,
    rank: i32,
    disp: i64,
) -> bool {
    let Some(remote) = e
        .osc
        .get(id)
        .ok()
        .and_then(|w| w.lean_target(rank, disp, dt.size()))
    else {
        return false;
    };
    let Some(width) = atomic::width(dt, remote as usize) else {
        return false;
    };
    // SAFETY: `remote` is one integer element in the target's part of the segment
    // (`lean_target`), which every process updates only by CPU atomics (`atomic::width`); the
    // buffers are the caller's contract.
    unsafe { atomic::cas(width, remote, new, compare, old) };
    true
}

/// `MPI_Win_flush(rank)` on shared window `id` in a passive-target epoch to `rank` with nothing
/// in flight: the operations are done when issued, so ordering them before what follows is the
/// whole flush. Whether it was done.
#[inline]
pub fn flush(e: &Engine, id: WinId, rank: i32) -> bool {
    let Ok(w) = e.osc.get(id) else {
        return false;
    };
    if w.seg.is_none() || !w.pending.is_empty() || rank < 0 || rank as u32 >= w.size {
        return false;
    }
    let p = w.peer(rank as u32);
    if !(w.lock_all || p.locked != 0) || p.dirty {
        return false;
    }
    shm::full_barrier();
    true
}

impl Window {
    /// The address of `len` bytes at target `rank`'s displacement `disp`, when this is a
    /// shared window, the target is in an access epoch and the bytes lie in its part.
    #[inline]
    fn lean_target(&self, rank: i32, disp: i64, len: usize) -> Option<*mut u8> {
        if self.seg.is_none() || rank < 0 || rank as u32 >= self.size {
            return None;
        }
        let t = rank as u32;
        if !self.may_access(t) {
            return None;
        }
        let peer = self.peer(t);
        let off = u64::try_from(disp).ok()?.checked_mul(peer.unit)?;
        if off.checked_add(len as u64)? > peer.size {
            return None;
        }
        Some((peer.at + off as usize) as *mut u8)
    }
}
