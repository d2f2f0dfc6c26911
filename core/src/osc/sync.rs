//! Synchronisation: fence, locks, flushes, post/start/complete/wait, sync.

use super::*;

/// Waits until nothing of this origin's is in flight to `target` (to anyone for `None`).
pub(super) fn wait_settled(cx: &mut Inside, id: WinId, target: Option<u32>) -> Result<()> {
    cx.block(|e| {
        let Engine { osc, p2p, .. } = e;
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        w.reap(p2p, mem);
        Ok((w.settled(target) && w.net_settled()?).then_some(()))
    })
}

/// Waits until every network operation this origin issued on window `id` is complete at its
/// target: before a message that tells a target the epoch is over (unlock, complete), which the
/// target may act on at once.
pub(super) fn wait_net(cx: &mut Inside, id: WinId) -> Result<()> {
    if cx.e().osc.get(id)?.net.is_none() {
        return Ok(());
    }
    cx.block(|e| Ok(e.osc.get_mut(id)?.net_settled()?.then_some(())))
}

/// Sends `FLUSH` (answered) to every target touched (or just `only`), then waits for the answers
/// and everything else in flight to them.
fn flush_targets(cx: &mut Inside, id: WinId, only: Option<u32>) -> Result<()> {
    // Loads and stores to a shared window are complete once issued: ordering them before what
    // follows is all a flush has to do for them.
    fence_memory();
    wait_net(cx, id)?;
    {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        for r in 0..w.size {
            if only.is_some_and(|o| o != r) || !w.peer(r).dirty {
                continue;
            }
            w.control(p2p, mem, r, AmHdr::new(kind::FLUSH), true)?;
            if let Some(p) = w.peer_mut(r) {
                p.dirty = false;
            }
        }
    }
    wait_settled(cx, id, only)
}

/// Completes this origin's operations to `target` (a flush without its epoch checks).
pub(super) fn flush_one(cx: &mut Inside, id: WinId, target: u32) -> Result<()> {
    flush_targets(cx, id, Some(target))
}

fn check_assert(assert: i32) -> Result<()> {
    if assert & !MODES != 0 {
        return Err(Error::new(
            ErrorClass::Assert,
            Reason::BadArgument {
                what: "an assertion that is not a combination of MPI_MODE_* values",
            },
        ));
    }
    Ok(())
}

/// `MPI_Win_fence`.
pub fn fence(cx: &mut Inside, id: WinId, assert: i32) -> Result<()> {
    check_assert(assert)?;
    {
        let w = cx.e().osc.get(id)?;
        if w.lock_all
            || w.access
            || w.exposure.is_some()
            || (0..w.size).any(|r| w.peer(r).locked != 0)
        {
            return Err(sync_err("MPI_Win_fence inside another kind of epoch"));
        }
    }
    flush_targets(cx, id, None)?;
    let comm = cx.e().osc.get(id)?.comm;
    crate::coll::barrier(cx, comm)?;
    // What others stored into this process's part before the barrier is seen after it.
    fence_memory();
    cx.e().osc.get_mut(id)?.fence = assert & MODE_NOSUCCEED == 0;
    Ok(())
}

/// `MPI_Win_lock`.
pub fn lock(cx: &mut Inside, id: WinId, kind_: LockKind, rank: i32, assert: i32) -> Result<()> {
    check_assert(assert)?;
    let t = {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if rank == crate::pml::request::PROC_NULL {
            return Ok(());
        }
        if rank < 0 || rank as u32 >= w.size {
            return Err(Error::new(
                ErrorClass::Rank,
                Reason::RankOutOfRange { rank, size: w.size },
            ));
        }
        let t = rank as u32;
        if w.peer(t).locked != 0 || w.lock_all {
            return Err(sync_err("MPI_Win_lock of a target already locked"));
        }
        let nocheck = assert & MODE_NOCHECK != 0;
        if !nocheck && w.seg.is_none() {
            let mut h = AmHdr::new(kind::LOCK);
            h.lock = match kind_ {
                LockKind::Shared => wire::lock::SHARED,
                LockKind::Exclusive => wire::lock::EXCLUSIVE,
            };
            w.control(p2p, mem, t, h, true)?;
        }
        if let Some(p) = w.peer_mut(t) {
            p.locked = if kind_ == LockKind::Shared { 1 } else { 2 };
            p.nocheck = nocheck;
        }
        t
    };
    if assert & MODE_NOCHECK == 0 {
        take_locks(cx, id, kind_, Some(t))?;
    }
    wait_settled(cx, id, Some(t))
}

/// Shared windows: takes the lock word of `only` (of every target for `None`) in the segment,
/// waiting (with progress) while another process holds it. Other windows: nothing.
fn take_locks(cx: &mut Inside, id: WinId, kind_: LockKind, only: Option<u32>) -> Result<()> {
    let size = cx.e().osc.get(id)?.size;
    for r in 0..size {
        if only.is_some_and(|o| o != r) {
            continue;
        }
        cx.block(|e| {
            let w = e.osc.get(id)?;
            Ok(w.seg
                .as_ref()
                .is_none_or(|s| s.try_lock(r, kind_))
                .then_some(()))
        })?;
    }
    Ok(())
}

/// Shared windows: leaves the lock word of `rank` taken by [`take_locks`] (after the operations
/// of the epoch: they are complete, being loads and stores).
fn leave_lock(w: &Window, rank: u32, held: u8) {
    if let Some(s) = w.seg.as_ref() {
        fence_memory();
        let k = if held == 1 {
            LockKind::Shared
        } else {
            LockKind::Exclusive
        };
        s.unlock(rank, k);
    }
}

/// A full memory barrier: this process's loads and stores to shared memory are ordered against
/// every later one (and against the messages that announce them).
fn fence_memory() {
    super::shm::full_barrier();
}

/// `MPI_Win_unlock`.
pub fn unlock(cx: &mut Inside, id: WinId, rank: i32) -> Result<()> {
    if rank == crate::pml::request::PROC_NULL {
        return Ok(());
    }
    wait_net(cx, id)?;
    let t = {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if rank < 0 || rank as u32 >= w.size || w.peer(rank as u32).locked == 0 {
            return Err(sync_err("MPI_Win_unlock of a target not locked"));
        }
        let t = rank as u32;
        let p = *w.peer(t);
        if w.seg.is_some() {
            if !p.nocheck {
                leave_lock(w, t, p.locked);
            }
        } else if !p.nocheck || p.dirty {
            // A lock taken without a message leaves without one, unless messages of this epoch
            // still need their flush (the network's operations were waited for above).
            let kind_ = if p.nocheck { kind::FLUSH } else { kind::UNLOCK };
            w.control(p2p, mem, t, AmHdr::new(kind_), true)?;
        }
        if let Some(p) = w.peer_mut(t) {
            p.locked = 0;
            p.dirty = false;
        }
        t
    };
    wait_settled(cx, id, Some(t))
}

/// `MPI_Win_lock_all`: a shared lock at every target.
pub fn lock_all(cx: &mut Inside, id: WinId, assert: i32) -> Result<()> {
    check_assert(assert)?;
    {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if w.lock_all || (0..w.size).any(|r| w.peer(r).locked != 0) {
            return Err(sync_err("MPI_Win_lock_all with a lock already held"));
        }
        let nocheck = assert & MODE_NOCHECK != 0;
        for r in 0..w.size {
            if !nocheck && w.seg.is_none() {
                let mut h = AmHdr::new(kind::LOCK);
                h.lock = wire::lock::SHARED;
                w.control(p2p, mem, r, h, true)?;
            }
            if let Some(p) = w.peer_mut(r) {
                p.nocheck = nocheck;
            }
        }
        w.lock_all = true;
    }
    if assert & MODE_NOCHECK == 0 {
        take_locks(cx, id, LockKind::Shared, None)?;
    }
    wait_settled(cx, id, None)
}

/// `MPI_Win_unlock_all`.
pub fn unlock_all(cx: &mut Inside, id: WinId) -> Result<()> {
    wait_net(cx, id)?;
    {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if !w.lock_all {
            return Err(sync_err("MPI_Win_unlock_all without MPI_Win_lock_all"));
        }
        for r in 0..w.size {
            let nocheck = w.peer(r).nocheck;
            if w.seg.is_some() {
                if !nocheck {
                    leave_lock(w, r, 1);
                }
            } else if !nocheck || w.peer(r).dirty {
                let kind_ = if nocheck { kind::FLUSH } else { kind::UNLOCK };
                w.control(p2p, mem, r, AmHdr::new(kind_), true)?;
            }
            if let Some(p) = w.peer_mut(r) {
                p.dirty = false;
                p.nocheck = false;
            }
        }
        w.lock_all = false;
    }
    wait_settled(cx, id, None)
}

/// `MPI_Win_flush` (`Some(rank)`) and `MPI_Win_flush_all` (`None`): remote completion.
pub fn flush(cx: &mut Inside, id: WinId, rank: Option<i32>) -> Result<()> {
    let only = passive_target(cx.e(), id, rank)?;
    if only == Some(u32::MAX) {
        return Ok(());
    }
    // A shared window's operations are done when issued: with no message in flight, ordering
    // them before what follows is the whole flush.
    let w = cx.e().osc.get(id)?;
    let quiet = |r: u32| only.is_some_and(|o| o != r) || !w.peer(r).dirty;
    if w.seg.is_some() && w.pending.is_empty() && (0..w.size).all(quiet) {
        fence_memory();
        return Ok(());
    }
    flush_targets(cx, id, only)
}

/// `MPI_Win_flush_local` and `MPI_Win_flush_local_all`: local completion (the origin buffers
/// may be reused; a get's data is there).
pub fn flush_local(cx: &mut Inside, id: WinId, rank: Option<i32>) -> Result<()> {
    let only = passive_target(cx.e(), id, rank)?;
    if only == Some(u32::MAX) {
        return Ok(());
    }
    wait_settled(cx, id, only)
}

/// Checks a flush's target: `Some(u32::MAX)` for `MPI_PROC_NULL`.
fn passive_target(e: &mut Engine, id: WinId, rank: Option<i32>) -> Result<Option<u32>> {
    let w = e.osc.get(id)?;
    match rank {
        None => {
            if !w.lock_all && !(0..w.size).any(|r| w.peer(r).locked != 0) {
                return Err(sync_err("a flush outside a passive-target epoch"));
            }
            Ok(None)
        }
        Some(crate::pml::request::PROC_NULL) => Ok(Some(u32::MAX)),
        Some(r) if r < 0 || r as u32 >= w.size => Err(Error::new(
            ErrorClass::Rank,
            Reason::RankOutOfRange {
                rank: r,
                size: w.size,
            },
        )),
        Some(r) => {
            if !w.lock_all && w.peer(r as u32).locked == 0 {
                return Err(sync_err("a flush of a target not locked"));
            }
            Ok(Some(r as u32))
        }
    }
}

/// `MPI_Win_post`: exposes the window to the `origins` (ranks in the window's group).
pub fn post(cx: &mut Inside, id: WinId, origins: &[u32], assert: i32) -> Result<()> {
    check_assert(assert)?;
    let Engine { osc, p2p, .. } = cx.e();
    let w = osc.get_mut(id)?;
    if w.exposure.is_some() {
        return Err(sync_err("MPI_Win_post while already exposed"));
    }
    w.exposure = Some(origins.len() as u32);
    w.done = 0;
    if assert & MODE_NOCHECK != 0 {
        // The matching starts say MPI_MODE_NOCHECK too and wait for no notice.
        return Ok(());
    }
    let comm = w.comm;
    for &r in origins {
        let d = p2p.dest(comm, r)?;
        let empty = Packer::from_slice(&[]);
        if let Some(req) = p2p.send(&d, TAG_POST, empty, SendMode::Standard, 0)? {
            w.track(Pending {
                req,
                target: r,
                buf: None,
                user: false,
            })?;
        }
    }
    Ok(())
}

/// `MPI_Win_start`: opens an access epoch to the `targets`, once each has posted.
pub fn start(cx: &mut Inside, id: WinId, targets: &[u32], assert: i32) -> Result<()> {
    check_assert(assert)?;
    {
        let w = cx.e().osc.get(id)?;
        if w.access || w.lock_all {
            return Err(sync_err("MPI_Win_start inside another access epoch"));
        }
    }
    let nocheck = assert & MODE_NOCHECK != 0;
    {
        let Engine { osc, p2p, .. } = cx.e();
        let w = osc.get_mut(id)?;
        let comm = w.comm;
        for &r in targets {
            if r >= w.size {
                return Err(Error::new(
                    ErrorClass::Group,
                    Reason::BadArgument {
                        what: "a start group member outside the window's group",
                    },
                ));
            }
            if !nocheck {
                let s = p2p.sel(comm, Source::Rank(r), TAG_POST)?;
                let req = p2p.irecv(&s, Unpacker::empty(), 0)?;
                w.track(Pending {
                    req,
                    target: r,
                    buf: None,
                    user: false,
                })?;
            }
            if let Some(p) = w.peer_mut(r) {
                p.started = true;
            }
        }
        w.access = true;
    }
    wait_settled(cx, id, None)
}

/// `MPI_Win_complete`: ends the access epoch of `MPI_Win_start`.
pub fn complete(cx: &mut Inside, id: WinId) -> Result<()> {
    wait_net(cx, id)?;
    {
        let Engine { osc, p2p, .. } = cx.e();
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        if !w.access {
            return Err(sync_err("MPI_Win_complete without MPI_Win_start"));
        }
        // Stores to shared targets come before the DONE that announces them.
        fence_memory();
        for r in 0..w.size {
            if !w.peer(r).started {
                continue;
            }
            w.control(p2p, mem, r, AmHdr::new(kind::DONE), false)?;
            if let Some(p) = w.peer_mut(r) {
                p.started = false;
                p.dirty = false;
            }
        }
        w.access = false;
    }
    wait_settled(cx, id, None)
}

/// `MPI_Win_wait` (`block`) and `MPI_Win_test`: whether every origin of the exposure epoch
/// completed; ends the epoch when so.
pub fn wait(cx: &mut Inside, id: WinId, block: bool) -> Result<bool> {
    let n = cx.e().osc.get(id)?.exposure.ok_or(sync_err(
        "MPI_Win_wait or MPI_Win_test without MPI_Win_post",
    ))?;
    let finished = |e: &mut Engine| -> Result<bool> { Ok(e.osc.get(id)?.done >= n) };
    let done = if block {
        cx.block(|e| Ok(finished(e)?.then_some(())))?;
        true
    } else {
        if !finished(cx.e())? {
            cx.e().progress();
        }
        finished(cx.e())?
    };
    if done {
        fence_memory();
        let w = cx.e().osc.get_mut(id)?;
        w.exposure = None;
        w.done -= n;
    }
    Ok(done)
}

/// `MPI_Win_sync`: the memory of the window and this process's view of it agree (one copy in
/// the unified model: a full memory barrier).
pub fn sync(e: &mut Engine, id: WinId) -> Result<()> {
    e.osc.get(id)?;
    super::shm::full_barrier();
    Ok(())
}
