//! Windows in memory shared by the processes of a node: the segment, its layout, and the lock
//! words that let origins synchronise with no part played by the target.
//!
//! ```text
//! 0                 one control line (CTL bytes) per rank: its lock word, its accumulate word
//! ctl_len (a page)  rank 0's part, then rank 1's, ... (contiguous: each right after the one
//!                   before; with `alloc_shared_noncontig`: each on a page boundary of its own)
//! ```
//!
//! One process creates the segment through the platform ([`Platform::shared_create`]), its name
//! goes to the others by a broadcast on the window's communicator, they map it, all agree that
//! every one did (an allreduce), and the creator removes the name. A window of one process needs
//! no platform support: its segment is a grant of the engine's memory.
//!
//! *Lock word* (passive target): bit 31 an exclusive holder, the bits below the count of shared
//! holders; taken with compare-exchange (Acquire), left with Release. *Accumulate word*: a
//! spinlock every accumulate to that rank's part takes (`MPI_Accumulate`, `MPI_Get_accumulate`,
//! `MPI_Fetch_and_op`, `MPI_Compare_and_swap`) for the elements that are not CPU atomics'
//! ([`super::atomic`]: aligned integers never need it), so accumulates are atomic element-wise
//! with respect to each other whatever their type, count or alignment, as the standard asks.

use core::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::platform::SegmentName;

/// Bytes of each rank's control line (a cache line: ranks' words do not share one).
const CTL: usize = 64;
/// Lock word: an exclusive holder.
const WRITER: u32 = 1 << 31;

/// The memory of a shared window.
#[derive(Debug)]
pub(super) struct Segment {
    ptr: *mut u8,
    len: usize,
    /// A grant of the engine's (a window of one process) rather than a platform mapping.
    grant: Option<Grant>,
}

/// Lays out a segment of `n` control lines and the parts `(size, offset)`: writes each part's
/// offset; returns the total length (`None` past the address space).
fn layout<'a>(
    n: usize,
    parts: impl Iterator<Item = (u64, &'a mut usize)>,
    page: usize,
    noncontig: bool,
) -> Option<usize> {
    let round = |v: usize| v.checked_next_multiple_of(page.max(1));
    let mut at = round(n.checked_mul(CTL)?)?;
    for (size, offset) in parts {
        if noncontig {
            at = round(at)?;
        }
        *offset = at;
        at = at.checked_add(usize::try_from(size).ok()?)?;
    }
    Some(at)
}

fn shared_err(what: &'static str) -> Error {
    Error::new(ErrorClass::RmaShared, Reason::BadArgument { what })
}

/// A full memory barrier for the shared segment: this process's loads and stores to it are
/// ordered against every later one. On x86-64 a locked read-modify-write of the stack's top word
/// (`or` with 0: it changes nothing) rather than `mfence`: both order every load and store to
/// write-back memory, and the locked operation costs a fraction (18 ns against 2.5 ns per
/// barrier on this machine's EPYC). Copies with non-temporal stores (glibc's large `memcpy`)
/// end with their own `sfence`.
#[inline(always)]
pub(super) fn full_barrier() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `[rsp]` is this thread's own stack, readable and writable; or-ing 0 leaves it as
    // it was. The block clobbers flags and is a compiler barrier (memory not excluded).
    unsafe {
        core::arch::asm!("lock or qword ptr [rsp], 0");
    }
    #[cfg(not(target_arch = "x86_64"))]
    core::sync::atomic::fence(Ordering::SeqCst);
}

/// Copies `len` bytes from `from` to `to` for a put or get on a shared window (the two may
/// overlap: a put from the window into itself). A copy longer than [`bulk::CHUNK`] whose ranges
/// are apart goes through [`bulk::copy_apart`] (a vector loop, not glibc's `rep movsb`, which is
/// slow on this machine for some distances; the module says why).
///
/// # Safety
/// `from..+len` is readable and `to..+len` writable.
#[inline(always)]
pub(super) unsafe fn copy(from: *const u8, to: *mut u8, len: usize) {
    if len <= bulk::CHUNK {
        // SAFETY: the caller's contract; `copy` allows the overlap.
        unsafe { core::ptr::copy(from, to, len) };
    } else {
        // SAFETY: the caller's contract.
        unsafe { copy_long(from, to, len) };
    }
}

/// The long case of [`copy`], out of line so the short one stays small in the lean entries.
///
/// # Safety
/// As for [`copy`].
#[inline(never)]
unsafe fn copy_long(from: *const u8, to: *mut u8, len: usize) {
    if (to as usize).abs_diff(from as usize) < len {
        // SAFETY: the caller's contract; `copy` allows the overlap.
        unsafe { core::ptr::copy(from, to, len) };
    } else {
        // SAFETY: the caller's contract; the ranges are apart (checked above).
        unsafe { bulk::copy_apart(from, to, len) };
    }
}

impl Segment {
    /// Sets up the segment of a window over `comm` (collective) whose members' sizes are in
    /// `peers`: maps it and records where each part is (`Peer::at`).
    pub(super) fn setup(
        cx: &mut Inside,
        comm: CommId,
        rank: u32,
        peers: &mut [Peer],
        noncontig: bool,
    ) -> Result<Segment> {
        let platform = cx.e().platform;
        let mem = cx.e().osc.memory;
        let n = peers.len();
        // `at` holds each part's offset until the segment is mapped.
        let total = layout(
            n,
            peers.iter_mut().map(|p| (p.size, &mut p.at)),
            platform.page_size(),
            noncontig,
        )
        .ok_or_else(too_big)?;
        let seg = if n == 1 {
            let g = Grant::take(mem, total, "shared window memory (MPI_Win_allocate_shared)")?;
            // SAFETY: the grant is fresh and the window's alone; zeroed so the lock words start
            // free (and the memory, like a platform segment's, starts zero).
            unsafe { core::ptr::write_bytes(g.ptr, 0, total) };
            Segment {
                ptr: g.ptr,
                len: total,
                grant: Some(g),
            }
        } else {
            Segment::map(cx, comm, rank, total)?
        };
        for p in peers.iter_mut() {
            // SAFETY: `layout` put every part inside the `total` bytes mapped.
            p.at = unsafe { seg.ptr.add(p.at) } as usize;
        }
        Ok(seg)
    }

    /// Creates (rank 0) or maps (the others) a platform segment of `total` bytes (collective).
    fn map(cx: &mut Inside, comm: CommId, rank: u32, total: usize) -> Result<Segment> {
        let platform = cx.e().platform;
        let mut name = SegmentName::NONE;
        let mut mine: Option<*mut u8> = None;
        if rank == 0 {
            if let Some((n, p)) = platform.shared_create(total) {
                name = n;
                mine = Some(p);
            }
        }
        let call = crate::coll::Call::Bcast {
            buf: crate::coll::Buf {
                ptr: (&mut name as *mut SegmentName).cast(),
                count: core::mem::size_of::<SegmentName>() as u64,
                dt: Datatype::BYTE,
            },
            root: 0,
        };
        // SAFETY: `name` is a plain repr(C) value of that many bytes, live across the call.
        let r = unsafe { crate::coll::collective(cx, comm, call, crate::coll::Mode::Blocking) };
        let undo = |p: Option<*mut u8>| {
            if let Some(p) = p {
                // SAFETY: the mapping just made, of `total` bytes, which nothing uses yet.
                unsafe { platform.shared_detach(p, total) };
            }
        };
        if let Err(e) = r {
            undo(mine);
            if rank == 0 {
                platform.shared_unlink(&name);
            }
            return Err(e);
        }
        if name.len == 0 {
            return Err(shared_err(
                "this platform has no memory shared between processes (MPI_Win_allocate_shared \
                 of more than one process)",
            ));
        }
        if rank != 0 {
            mine = platform.shared_attach(&name, total);
        }
        // Everyone must have it before the name goes, and before anyone uses it.
        let ok = [i32::from(mine.is_some())];
        let mut all = [0i32];
        let call = crate::coll::Call::Allreduce {
            send: Some(ok.as_ptr().cast()),
            recv: all.as_mut_ptr().cast(),
            count: 1,
            dt: Datatype::INT,
            op: Op::Min,
        };
        // SAFETY: one int each way, live across the call.
        let r = unsafe { crate::coll::collective(cx, comm, call, crate::coll::Mode::Blocking) };
        if rank == 0 {
            platform.shared_unlink(&name);
        }
        match (r, mine) {
            (Ok(_), Some(ptr)) if all[0] == 1 => Ok(Segment {
                ptr,
                len: total,
                grant: None,
            }),
            (r, p) => {
                undo(p);
                r?;
                Err(shared_err(
                    "a process of the window could not map the shared segment",
                ))
            }
        }
    }

    /// Gives the memory back (after every process stopped using it: `MPI_Win_free`'s barrier).
    pub(super) fn release(self, mem: &Memory, platform: &dyn Platform) {
        match self.grant {
            Some(g) => g.give_back(mem),
            // SAFETY: the mapping this segment made, of `len` bytes; the window that held it is
            // gone and every process passed the barrier after its last access.
            None => unsafe { platform.shared_detach(self.ptr, self.len) },
        }
    }

    fn word(&self, rank: u32, which: usize) -> &AtomicU32 {
        // SAFETY: the control lines of every rank lie at the start of the segment (`layout`),
        // each CTL bytes, so `rank * CTL + which * 4 + 4 <= len`; the segment is page (or
        // GRANT_ALIGN) aligned, so the word is 4-aligned; it is only ever accessed atomically,
        // by every process mapping the segment.
        unsafe { AtomicU32::from_ptr(self.ptr.add(rank as usize * CTL + which * 4).cast()) }
    }

    /// Takes `rank`'s lock of `kind` if it is free; whether it did.
    pub(super) fn try_lock(&self, rank: u32, kind: LockKind) -> bool {
        let w = self.word(rank, 0);
        match kind {
            LockKind::Exclusive => w
                .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
                .is_ok(),
            LockKind::Shared => {
                let v = w.load(Ordering::Relaxed);
                v & WRITER == 0
                    && w.compare_exchange(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
            }
        }
    }

    /// Leaves `rank`'s lock of `kind`, taken by [`Segment::try_lock`].
    pub(super) fn unlock(&self, rank: u32, kind: LockKind) {
        let w = self.word(rank, 0);
        match kind {
            LockKind::Exclusive => w.store(0, Ordering::Release),
            LockKind::Shared => {
                w.fetch_sub(1, Ordering::Release);
            }
        }
    }

    /// Runs `f` holding `rank`'s accumulate word (spinning, yielding through `platform`, while
    /// another process holds it: it holds it only for one operation's loads and stores).
    pub(super) fn atomically<T>(
        &self,
        rank: u32,
        platform: &dyn Platform,
        f: impl FnOnce() -> T,
    ) -> T {
        let w = self.word(rank, 1);
        let mut idle = 0u32;
        while w
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            idle = idle.saturating_add(1);
            platform.relax(idle);
        }
        let r = f();
        w.store(0, Ordering::Release);
        r
    }
}

fn too_big() -> Error {
    Error::new(
        ErrorClass::Size,
        Reason::BadArgument {
            what: "the shared window's parts do not fit in the address space",
        },
    )
}

impl Window {
    /// Applies the operation `msg` (an active message, as it would go to `target`) straight to
    /// `target`'s part of the segment; a fetch's old contents go to `result`. Accumulates hold
    /// the target's accumulate word.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn local(
        &mut self,
        mem: &Memory,
        types: &TypeTable,
        platform: &dyn Platform,
        target: u32,
        msg: &[u8],
        result: Option<Buffer>,
        image_: bool,
    ) -> Result<()> {
        let am = Am::parse(msg).map_err(|_| local_err(Why::Malformed))?;
        let h = am.hdr;
        let len = h.len as usize;
        let fetches = matches!(h.kind, kind::GET | kind::GET_ACC | kind::CAS);
        let mut out = if fetches {
            Some(self.buffer(mem, len)?)
        } else {
            None
        };
        let p = *self.peer(target);
        let regions = [(p.at, p.size as usize)];
        let x = Exposed {
            base: p.at,
            unit: p.unit.max(1) as usize,
            regions: &regions,
        };
        let apply = |out: Option<&mut [u8]>| -> core::result::Result<(), Why> {
            match (h.kind, out) {
                (kind::PUT, _) => {
                    let t = span(&am);
                    apply::check(&x, &t, h.len)?;
                    let data = am.data.get(..len).ok_or(Why::Malformed)?;
                    // SAFETY: the target's part of the segment, which MPI lets origins write in
                    // an epoch; `check` put every run inside it.
                    unsafe { apply::put(&x, &t, data) }?;
                    Ok(())
                }
                (kind::ACC, _) => {
                    let (op, dt) = acc_args(&h)?;
                    let data = am.data.get(..len).ok_or(Why::Malformed)?;
                    if h.flags & wire::flags::IMAGE != 0 {
                        apply::combine(op, dt, image(&x, &h)?, data)?;
                    } else {
                        let t = span(&am);
                        apply::check(&x, &t, h.len)?;
                        // SAFETY: as for a put.
                        unsafe { accumulate_runs(&x, &t, op, dt, Some(data), None) }?;
                    }
                    Ok(())
                }
                (kind::GET_ACC, Some(o)) if h.flags & wire::flags::IMAGE == 0 => {
                    let (op, dt) = acc_args(&h)?;
                    let data = if op == Op::NoOp {
                        None
                    } else {
                        Some(am.data.get(..len).ok_or(Why::Malformed)?)
                    };
                    let t = span(&am);
                    apply::check(&x, &t, h.len)?;
                    // SAFETY: as for a put.
                    unsafe { accumulate_runs(&x, &t, op, dt, data, Some(o)) }?;
                    Ok(())
                }
                (kind::CAS, Some(o)) if h.flags & wire::flags::IMAGE == 0 => {
                    let t = span(&am);
                    apply::check(&x, &t, h.len)?;
                    let dt = Datatype::from_code(h.basic).ok_or(Why::Op)?;
                    // SAFETY: as for a put.
                    match unsafe { compare_and_swap(dt, &x, &t, am.data, o) }? {
                        true => Ok(()),
                        false => fetch(&x, &am, o),
                    }
                }
                (_, Some(o)) => fetch(&x, &am, o),
                _ => Err(Why::Malformed),
            }
        };
        let o = match out.as_mut() {
            // SAFETY: the grant was just taken; the window alone holds it.
            Some(g) => Some(unsafe { g.bytes(len) }),
            None => None,
        };
        let seg = self.seg.as_ref().ok_or(local_err(Why::Malformed))?;
        let r = if h.kind == kind::PUT || h.kind == kind::GET {
            apply(o)
        } else {
            seg.atomically(target, platform, || apply(o))
        };
        let r = r.map_err(local_err).and_then(|()| match (out, result) {
            (Some(mut g), Some(res)) => {
                // SAFETY: filled above; the window alone holds the grant.
                let data: &[u8] = unsafe { g.bytes(len) };
                if image_ {
                    // SAFETY: MPI lends the result buffer, `len` bytes of the pair type.
                    unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), res.addr, len) };
                } else {
                    // SAFETY: MPI lends the result buffer for `count` instances of its type;
                    // the unpacker lives only here.
                    let mut u = unsafe { Unpacker::new(res.addr, res.count, res.ty, types) }?;
                    u.unpack(types, 0, data);
                }
                Ok(())
            }
            _ => Ok(()),
        });
        if let Some(g) = out {
            self.release(mem, g);
        }
        r
    }
}

/// Combines `data` (`None`: `MPI_NO_OP`) into the runs of `t` with `op`, the old contents to
/// `old`: runs of integer elements by CPU atomics ([`atomic::combine_run`]), the rest plainly
/// (the caller holds the target's accumulate word, which every plain update takes).
///
/// # Safety
/// As for [`apply::put`]; the runs were checked ([`apply::check`]) and `data` and `old` hold
/// their bytes.
unsafe fn accumulate_runs(
    x: &Exposed,
    t: &Span,
    op: Op,
    dt: Datatype,
    data: Option<&[u8]>,
    mut old: Option<&mut [u8]>,
) -> core::result::Result<(), Fault> {
    let size = dt.size();
    if size == 0 {
        return Err(Fault::Op);
    }
    let mut pos = 0usize;
    apply::walk(t.nodes, t.count, t.extent, &mut |off, bytes| {
        if !bytes.is_multiple_of(size) {
            return Err(Fault::Malformed);
        }
        let dst = x.locate(t.disp, off, bytes).ok_or(Fault::Range)? as *mut u8;
        let src = match data {
            Some(d) => Some(d.get(pos..pos + bytes).ok_or(Fault::Malformed)?),
            None => None,
        };
        let mut o = match old.as_deref_mut() {
            Some(o) => Some(o.get_mut(pos..pos + bytes).ok_or(Fault::Malformed)?),
            None => None,
        };
        pos += bytes;
        let src_ptr = src.map_or(core::ptr::null(), |s| s.as_ptr());
        let old_ptr = o.as_mut().map_or(core::ptr::null_mut(), |o| o.as_mut_ptr());
        // SAFETY: `locate` put the run inside the window; `src` and `o` are the message's and
        // the result grant's bytes of this run, elsewhere.
        if unsafe { atomic::combine_run(op, dt, dst, src_ptr, old_ptr, bytes) }? {
            return Ok(());
        }
        // SAFETY: as above; under the accumulate word nothing else writes these bytes.
        let target = unsafe { core::slice::from_raw_parts_mut(dst, bytes) };
        if let Some(o) = o {
            o.copy_from_slice(target);
        }
        match src {
            Some(s) => apply::combine(op, dt, target, s),
            None => Ok(()),
        }
    })
}

/// A compare-and-swap whose one element [`atomic::width`] takes, by the CPU's; whether it was
/// one (`false`: the caller does it under the accumulate word). `dt` is the element's type
/// (the header's `basic`, which `issue` sets for a compare-and-swap).
///
/// # Safety
/// As for [`accumulate_runs`]; `data` holds the new value then the compared one.
unsafe fn compare_and_swap(
    dt: Datatype,
    x: &Exposed,
    t: &Span,
    data: &[u8],
    old: &mut [u8],
) -> core::result::Result<bool, Fault> {
    let n = old.len();
    let (Some(new), Some(cmp), [node]) = (data.get(..n), data.get(n..2 * n), t.nodes) else {
        return Ok(false);
    };
    let Some(dst) = x.locate(t.disp, node.disp, n) else {
        return Err(Fault::Range);
    };
    match atomic::width(dt, dst) {
        Some(w) if node.loop_ == 0 && t.count == 1 => {
            // SAFETY: the caller's contract; one element of `w` bytes in each buffer.
            unsafe {
                atomic::cas(
                    w,
                    dst as *mut u8,
                    new.as_ptr(),
                    cmp.as_ptr(),
                    old.as_mut_ptr(),
                )
            };
            Ok(true)
        }
        _ => Ok(false),
    }
}

fn local_err(why: Why) -> Error {
    let class = match why {
        Why::Range => ErrorClass::RmaRange,
        Why::Op => ErrorClass::Op,
        Why::NoMem => ErrorClass::NoMem,
        Why::Malformed | Why::Send => ErrorClass::Intern,
    };
    Error::new(
        class,
        Reason::BadArgument {
            what: "a load/store operation on a shared window could not be applied",
        },
    )
}

/// `MPI_Win_shared_query`: `rank`'s part of window `id` as this process reaches it — its size
/// in bytes, displacement unit and address. `MPI_PROC_NULL` asks for the lowest rank whose part
/// is not empty. A window not in shared memory answers for this process's own memory only
/// (others' parts: size 0 at address 0), as MPI 4.0 allows for every flavor but dynamic.
pub fn shared_query(e: &Engine, id: WinId, rank: i32) -> Result<(u64, u64, usize)> {
    let w = e.osc.get(id)?;
    if w.flavor == Flavor::Dynamic {
        return Err(Error::new(
            ErrorClass::RmaFlavor,
            Reason::BadArgument {
                what: "MPI_Win_shared_query of a dynamic window",
            },
        ));
    }
    let r = if rank == crate::pml::request::PROC_NULL {
        (0..w.size).find(|&r| w.peer(r).size > 0).unwrap_or(0)
    } else if rank < 0 || rank as u32 >= w.size {
        return Err(Error::new(
            ErrorClass::Rank,
            Reason::RankOutOfRange { rank, size: w.size },
        ));
    } else {
        rank as u32
    };
    let p = w.peer(r);
    if w.seg.is_some() {
        Ok((p.size, p.unit, p.at))
    } else if r == w.rank {
        Ok((w.len as u64, w.unit as u64, w.base))
    } else {
        Ok((0, p.unit, 0))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn lay(sizes: &[u64], noncontig: bool) -> (usize, Vec<usize>) {
        let mut o = std::vec![0usize; sizes.len()];
        let parts = sizes.iter().copied().zip(o.iter_mut());
        let total = layout(sizes.len(), parts, 4096, noncontig).unwrap();
        (total, o)
    }

    #[test]
    fn long_copies_in_chunks_and_overlapping_ones_match_memmove() {
        let n = 3 * bulk::CHUNK + 100;
        let pattern: Vec<u8> = (0..2 * n).map(|i| (i * 7 % 251) as u8).collect();
        // Apart (chunked), then overlapping forwards and backwards by 8 bytes (memmove).
        for (from, to) in [(0usize, n), (0, 8), (8, 0)] {
            let mut buf = pattern.clone();
            let mut want = pattern.clone();
            want.copy_within(from..from + n, to);
            let p = buf.as_mut_ptr();
            // SAFETY: both ranges lie in `buf` (2n bytes), which nothing else borrows.
            unsafe { copy(p.add(from), p.add(to), n) };
            assert!(buf == want, "copy of {n} bytes from {from} to {to}");
        }
    }

    #[test]
    fn contiguous_parts_follow_each_other_after_the_control_page() {
        let (total, o) = lay(&[10, 0, 7], false);
        assert_eq!(o, [4096, 4106, 4106]);
        assert_eq!(total, 4113);
    }

    #[test]
    fn noncontig_parts_start_on_pages() {
        let (total, o) = lay(&[10, 0, 7], true);
        assert_eq!(o, [4096, 8192, 8192]);
        assert_eq!(total, 8199);
    }

    #[test]
    fn control_lines_of_many_ranks_take_more_pages() {
        let (_, o) = lay(&[1; 100], false);
        assert_eq!(o[0], 8192, "100 lines of 64 bytes need two pages");
    }

    #[test]
    fn sizes_past_the_address_space_are_refused() {
        let mut o = [0usize; 2];
        let parts = [u64::MAX, 1].into_iter().zip(o.iter_mut());
        assert!(layout(2, parts, 4096, false).is_none());
    }

    fn seg(buf: &mut [u64]) -> Segment {
        Segment {
            ptr: buf.as_mut_ptr().cast(),
            len: buf.len() * 8,
            grant: None,
        }
    }

    #[test]
    fn exclusive_excludes_everyone_and_shared_only_writers() {
        let mut b = [0u64; 32];
        let s = seg(&mut b);
        assert!(s.try_lock(1, LockKind::Shared));
        assert!(s.try_lock(1, LockKind::Shared));
        assert!(!s.try_lock(1, LockKind::Exclusive), "readers hold it");
        assert!(s.try_lock(0, LockKind::Exclusive), "another rank's word");
        s.unlock(1, LockKind::Shared);
        s.unlock(1, LockKind::Shared);
        assert!(s.try_lock(1, LockKind::Exclusive));
        assert!(!s.try_lock(1, LockKind::Shared), "a writer holds it");
        assert!(!s.try_lock(1, LockKind::Exclusive));
        s.unlock(1, LockKind::Exclusive);
        assert!(s.try_lock(1, LockKind::Shared));
    }

    #[test]
    fn the_accumulate_word_is_free_again_after_each_operation() {
        let mut b = [0u64; 16];
        let s = seg(&mut b);
        let p = crate::memory::tests::HeapPlatform;
        assert_eq!(s.atomically(1, &p, || 5), 5);
        assert_eq!(
            s.atomically(1, &p, || 6),
            6,
            "a second take does not spin forever"
        );
        assert_eq!(s.word(1, 1).load(Ordering::Relaxed), 0);
    }
}
