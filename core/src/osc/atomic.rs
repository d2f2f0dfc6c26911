//! CPU atomics on a shared window's memory: accumulates, fetch-and-op and compare-and-swap of
//! integer elements applied by one atomic read-modify-write each, with no lock.
//!
//! Which path an element takes depends only on its type and address ([`width`]): an element of
//! a predefined integer type (C, unsigned and Fortran integers of 1, 2, 4 or 8 bytes) at an
//! address aligned to its size is *always* updated by one CPU atomic — by a single-element
//! `MPI_Fetch_and_op` and by the 100th element of a long `MPI_Accumulate` alike — and every
//! other element (floats, complex, pairs, logicals, misaligned integers) *always* under the
//! target's accumulate word ([`super::shm`]). Two accumulates on the same element with the same
//! type therefore both go through the CPU's atomics or both through the word, and the standard's
//! element-wise atomicity holds whichever mix of single- and multi-element operations, ops
//! (`MPI_SUM` against `MPI_REPLACE`, ...) and origins meets there.
//!
//! `MPI_SUM`, `MPI_BAND`, `MPI_BOR`, `MPI_BXOR`, `MPI_MIN`, `MPI_MAX`, `MPI_REPLACE` and
//! `MPI_NO_OP` are the CPU's own fetch-add, fetch-and/or/xor, fetch-min/max, swap and load;
//! `MPI_PROD` and the logical operations are a compare-exchange loop around the reduction the
//! rest of the engine uses ([`crate::op::apply`]), so both paths compute the same values.

use core::sync::atomic::{AtomicI16, AtomicI32, AtomicI64, AtomicI8};
use core::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

use super::apply::{self, Fault};
use crate::datatype::{Datatype, Scalar};
use crate::op::Op;

/// Bytes of one element of `dt` at `addr` if it is updated by a CPU atomic, `None` if it goes
/// under the accumulate word (see the module's documentation: both paths ask this).
pub fn width(dt: Datatype, addr: usize) -> Option<usize> {
    let b = match dt.scalar() {
        Scalar::Int(b) | Scalar::Uint(b) | Scalar::FortranInt(b) => b as usize,
        _ => return None,
    };
    (matches!(b, 1 | 2 | 4 | 8) && addr.is_multiple_of(b)).then_some(b)
}

fn signed(dt: Datatype) -> bool {
    matches!(dt.scalar(), Scalar::Int(_) | Scalar::FortranInt(_))
}

macro_rules! rmw_width {
    ($name:ident, $cas:ident, $A:ty, $U:ty, $SA:ty, $S:ty) => {
        /// One element's atomic read-modify-write at this width.
        ///
        /// # Safety
        /// As for [`rmw`].
        unsafe fn $name(
            op: Op,
            dt: Datatype,
            addr: *mut u8,
            src: *const u8,
            old: *mut u8,
        ) -> Result<(), Fault> {
            // SAFETY: the caller gives an aligned element of shared memory that every process
            // accesses only by atomics of this width while the window lives.
            let a = unsafe { <$A>::from_ptr(addr.cast()) };
            let v: $U = if op == Op::NoOp {
                0
            } else {
                // SAFETY: the caller gives one element of the operand at `src`.
                unsafe { src.cast::<$U>().read_unaligned() }
            };
            let o = Ordering::AcqRel;
            let prev: $U = match op {
                Op::NoOp => a.load(Ordering::Acquire),
                Op::Replace => a.swap(v, o),
                Op::Sum => a.fetch_add(v, o),
                Op::Band => a.fetch_and(v, o),
                Op::Bor => a.fetch_or(v, o),
                Op::Bxor => a.fetch_xor(v, o),
                Op::Max | Op::Min if signed(dt) => {
                    // SAFETY: the same element, seen as the signed integer it holds.
                    let s = unsafe { <$SA>::from_ptr(addr.cast()) };
                    let p = if op == Op::Max {
                        s.fetch_max(v as $S, o)
                    } else {
                        s.fetch_min(v as $S, o)
                    };
                    p as $U
                }
                Op::Max => a.fetch_max(v, o),
                Op::Min => a.fetch_min(v, o),
                _ => {
                    let mut cur = a.load(Ordering::Relaxed);
                    loop {
                        let mut new = cur.to_ne_bytes();
                        apply::combine(op, dt, &mut new, &v.to_ne_bytes())?;
                        match a.compare_exchange_weak(
                            cur,
                            <$U>::from_ne_bytes(new),
                            o,
                            Ordering::Relaxed,
                        ) {
                            Ok(p) => break p,
                            Err(c) => cur = c,
                        }
                    }
                }
            };
            if !old.is_null() {
                // SAFETY: the caller gives room for one element at `old`.
                unsafe { old.cast::<$U>().write_unaligned(prev) };
            }
            Ok(())
        }

        /// One element's atomic compare-and-swap at this width.
        ///
        /// # Safety
        /// As for [`cas`].
        unsafe fn $cas(addr: *mut u8, new: *const u8, compare: *const u8, old: *mut u8) {
            // SAFETY: as in the read-modify-write above; `new`, `compare` and `old` each hold one
            // element (the caller's contract).
            unsafe {
                let a = <$A>::from_ptr(addr.cast());
                let n = new.cast::<$U>().read_unaligned();
                let c = compare.cast::<$U>().read_unaligned();
                let p = match a.compare_exchange(c, n, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(p) | Err(p) => p,
                };
                old.cast::<$U>().write_unaligned(p);
            }
        }
    };
}

rmw_width!(rmw8, cas8, AtomicU8, u8, AtomicI8, i8);
rmw_width!(rmw16, cas16, AtomicU16, u16, AtomicI16, i16);
rmw_width!(rmw32, cas32, AtomicU32, u32, AtomicI32, i32);
rmw_width!(rmw64, cas64, AtomicU64, u64, AtomicI64, i64);

/// `*addr = *src op *addr` for one element of `dt`, atomically; the old value goes to `old`
/// unless it is null. `src` is not read for `MPI_NO_OP`.
///
/// # Safety
/// `addr` is an element of `dt` in a shared window for which [`width`] answered `Some(w)`;
/// `src` (unless the op is `MPI_NO_OP`) and `old` (unless null) hold `w` bytes each.
pub unsafe fn rmw(
    op: Op,
    dt: Datatype,
    w: usize,
    addr: *mut u8,
    src: *const u8,
    old: *mut u8,
) -> Result<(), Fault> {
    // SAFETY: the caller's contract, at the element's own width.
    unsafe {
        match w {
            1 => rmw8(op, dt, addr, src, old),
            2 => rmw16(op, dt, addr, src, old),
            4 => rmw32(op, dt, addr, src, old),
            8 => rmw64(op, dt, addr, src, old),
            _ => Err(Fault::Op),
        }
    }
}

macro_rules! fetch_width {
    ($op:expr, $A:ty, $U:ty, $addr:expr, $src:expr, $old:expr) => {{
        // SAFETY: the caller gives an aligned element of shared memory that every process
        // accesses only by atomics of this width while the window lives, one operand element
        // at `src` (unless the op is MPI_NO_OP) and room for one at `old`.
        unsafe {
            let a = <$A>::from_ptr($addr.cast());
            let prev = match $op {
                Op::Sum => a.fetch_add($src.cast::<$U>().read_unaligned(), Ordering::AcqRel),
                Op::Replace => a.swap($src.cast::<$U>().read_unaligned(), Ordering::AcqRel),
                _ => a.load(Ordering::Acquire),
            };
            $old.cast::<$U>().write_unaligned(prev);
        }
        true
    }};
}

/// `MPI_Fetch_and_op` of one integer element of `w` bytes with `MPI_SUM`, `MPI_REPLACE` or
/// `MPI_NO_OP` — the operations it is mostly called with, the same for signed and unsigned
/// integers — as the CPU's fetch-add, swap or load straight away, without [`rmw`]'s dispatch
/// over every operation (the same instructions, so the two paths mix atomically). The old
/// value goes to `old`. Whether it was done: nothing is for another operation or width.
///
/// # Safety
/// As for [`rmw`], with `old` not null.
#[inline(always)]
pub unsafe fn fetch(op: Op, w: usize, addr: *mut u8, src: *const u8, old: *mut u8) -> bool {
    if !matches!(op, Op::Sum | Op::Replace | Op::NoOp) {
        return false;
    }
    match w {
        8 => fetch_width!(op, AtomicU64, u64, addr, src, old),
        4 => fetch_width!(op, AtomicU32, u32, addr, src, old),
        2 => fetch_width!(op, AtomicU16, u16, addr, src, old),
        1 => fetch_width!(op, AtomicU8, u8, addr, src, old),
        _ => false,
    }
}

/// `MPI_Compare_and_swap` of one element: `*addr = *new` if `*addr == *compare` (bit for bit);
/// the old value goes to `old`.
///
/// # Safety
/// As for [`rmw`], with `new`, `compare` and `old` of `w` bytes each.
pub unsafe fn cas(w: usize, addr: *mut u8, new: *const u8, compare: *const u8, old: *mut u8) {
    // SAFETY: the caller's contract, at the element's own width.
    unsafe {
        match w {
            1 => cas8(addr, new, compare, old),
            2 => cas16(addr, new, compare, old),
            4 => cas32(addr, new, compare, old),
            _ => cas64(addr, new, compare, old),
        }
    }
}

/// Combines the elements at `data` into the `len` bytes at `target` with `op`, element by
/// element with CPU atomics (a run whose elements [`width`] takes); the old contents go to `old`
/// unless it is null. Whether it did: `false` leaves the run to the accumulate word.
///
/// # Safety
/// `target..+len` lies in a shared window; `data` (unless the op is `MPI_NO_OP`) and `old`
/// (unless null) hold `len` bytes that do not overlap it.
pub unsafe fn combine_run(
    op: Op,
    dt: Datatype,
    target: *mut u8,
    data: *const u8,
    old: *mut u8,
    len: usize,
) -> Result<bool, Fault> {
    let Some(w) = width(dt, target as usize) else {
        return Ok(false);
    };
    if !len.is_multiple_of(w) {
        return Err(Fault::Malformed);
    }
    for k in (0..len).step_by(w) {
        // SAFETY: element `k / w` of the run, aligned as its first is; the caller's contract
        // for the buffers, at the same offset.
        unsafe {
            rmw(
                op,
                dt,
                w,
                target.add(k),
                if data.is_null() { data } else { data.add(k) },
                if old.is_null() { old } else { old.add(k) },
            )
        }?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one<T: Copy>(op: Op, dt: Datatype, start: T, operand: T) -> (T, T) {
        let mut cell = start;
        let mut old = operand;
        let w = width(dt, &cell as *const T as usize).unwrap();
        // SAFETY: a local, aligned element not otherwise borrowed during the call.
        unsafe {
            rmw(
                op,
                dt,
                w,
                (&mut cell as *mut T).cast(),
                (&operand as *const T).cast(),
                (&mut old as *mut T).cast(),
            )
            .unwrap()
        };
        (cell, old)
    }

    /// The same operation through `op::apply`, as the accumulate word's path computes it.
    fn reference<T: Copy>(op: Op, dt: Datatype, start: T, operand: T) -> T {
        let mut cell = start;
        // SAFETY: plain local values viewed as their bytes.
        let (c, o) = unsafe {
            (
                core::slice::from_raw_parts_mut((&mut cell as *mut T).cast::<u8>(), size_of::<T>()),
                core::slice::from_raw_parts((&operand as *const T).cast::<u8>(), size_of::<T>()),
            )
        };
        apply::combine(op, dt, c, o).unwrap();
        cell
    }

    #[test]
    fn every_op_on_every_integer_width_matches_the_reduction() {
        let ops = [
            Op::Sum,
            Op::Prod,
            Op::Max,
            Op::Min,
            Op::Band,
            Op::Bor,
            Op::Bxor,
            Op::Land,
            Op::Lor,
            Op::Lxor,
            Op::Replace,
        ];
        for op in ops {
            for (a, b) in [(-7i64, 3i64), (5, -9), (0, 4), (i64::MAX, 2)] {
                let r = one(op, Datatype::INT64_T, a, b);
                assert_eq!(
                    r,
                    (reference(op, Datatype::INT64_T, a, b), a),
                    "{op:?} {a} {b}"
                );
                let (a32, b32) = (a as i32, b as i32);
                let r = one(op, Datatype::INT, a32, b32);
                assert_eq!(r, (reference(op, Datatype::INT, a32, b32), a32), "{op:?}");
                let (a16, b16) = (a as u16, b as u16);
                let r = one(op, Datatype::UINT16_T, a16, b16);
                assert_eq!(r, (reference(op, Datatype::UINT16_T, a16, b16), a16));
                let (a8, b8) = (a as i8, b as i8);
                let r = one(op, Datatype::INT8_T, a8, b8);
                assert_eq!(r, (reference(op, Datatype::INT8_T, a8, b8), a8));
            }
        }
        assert_eq!(one(Op::NoOp, Datatype::LONG, 42i64, 0), (42, 42));
    }

    #[test]
    fn fetch_matches_the_general_read_modify_write() {
        for op in [Op::Sum, Op::Replace, Op::NoOp] {
            for (a, b) in [(-7i64, 3i64), (i64::MAX, 2), (0, -1)] {
                let (mut cell, mut old) = (a, 0i64);
                // SAFETY: a local, aligned element and locals for the operands.
                let done = unsafe {
                    fetch(
                        op,
                        8,
                        (&mut cell as *mut i64).cast(),
                        (&b as *const i64).cast(),
                        (&mut old as *mut i64).cast(),
                    )
                };
                assert!(done);
                assert_eq!((cell, old), one(op, Datatype::LONG, a, b), "{op:?} {a} {b}");
                let (mut c32, mut o32) = (a as u32, 0u32);
                // SAFETY: as above.
                unsafe {
                    fetch(
                        op,
                        4,
                        (&mut c32 as *mut u32).cast(),
                        (&(b as u32) as *const u32).cast(),
                        (&mut o32 as *mut u32).cast(),
                    )
                };
                assert_eq!((c32, o32), one(op, Datatype::UNSIGNED, a as u32, b as u32));
            }
        }
        let (mut cell, mut old) = (5i64, 0i64);
        // SAFETY: as above.
        let done = unsafe {
            fetch(
                Op::Max,
                8,
                (&mut cell as *mut i64).cast(),
                (&9i64 as *const i64).cast(),
                (&mut old as *mut i64).cast(),
            )
        };
        assert!(!done && cell == 5, "MPI_MAX is rmw's, fetch leaves it");
    }

    #[test]
    fn floats_and_misaligned_integers_stay_under_the_word() {
        assert_eq!(width(Datatype::DOUBLE, 0), None);
        assert_eq!(width(Datatype::INT, 2), None);
        assert_eq!(width(Datatype::INT, 8), Some(4));
    }

    #[test]
    fn compare_and_swap_swaps_only_on_equal() {
        let mut cell = 5u32;
        let (new, mut old) = (9u32, 0u32);
        let p = (&mut cell as *mut u32).cast();
        // SAFETY: a local, aligned element and locals for the operands.
        unsafe {
            cas(
                4,
                p,
                (&new as *const u32).cast(),
                (&4u32 as *const u32).cast(),
                (&mut old as *mut u32).cast(),
            );
            assert_eq!((cell, old), (5, 5));
            cas(
                4,
                p,
                (&new as *const u32).cast(),
                (&5u32 as *const u32).cast(),
                (&mut old as *mut u32).cast(),
            );
            assert_eq!((cell, old), (9, 5));
        }
    }
}
