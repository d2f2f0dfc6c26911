//! A user's array of counts or displacements, in either width the C API passes: `int`
//! (`MPI_Gatherv`, ...) or 64 bits (`MPI_Count` counts and `MPI_Aint` displacements of the
//! large-count `_c` forms, `MPI_Aint` displacements of `MPI_Alltoallw`).
//!
//! Why one type for both: the collectives read these arrays while they run (a non-blocking
//! one long after the call returned), so they keep the user's pointer rather than a copy; one
//! read that widens to `i64` lets every algorithm serve both forms without a second path.

/// A pointer to an array of `int`s or of 64-bit integers (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ints {
    /// C `int`s.
    Int(*const i32),
    /// `MPI_Count`s, or `MPI_Aint`s on a 64-bit target.
    Wide(*const i64),
}

impl Ints {
    /// No array (arguments that are not significant).
    pub const NULL: Ints = Ints::Int(core::ptr::null());

    /// An array of `MPI_Aint` (`T`, as wide as an address: 32 bits on a 32-bit target).
    pub fn aint<T>(p: *const T) -> Ints {
        if size_of::<T>() == size_of::<i64>() {
            Ints::Wide(p.cast())
        } else {
            Ints::Int(p.cast())
        }
    }

    /// Whether the pointer is NULL.
    pub fn is_null(&self) -> bool {
        match *self {
            Ints::Int(p) => p.is_null(),
            Ints::Wide(p) => p.is_null(),
        }
    }

    /// Element `i`, widened.
    ///
    /// # Safety
    /// The array has more than `i` elements (the collective's contract: arrays of the
    /// communicator's size, valid until it completes).
    #[inline]
    pub unsafe fn get(&self, i: usize) -> i64 {
        // SAFETY: the caller's contract.
        unsafe {
            match *self {
                Ints::Int(p) => *p.add(i) as i64,
                Ints::Wide(p) => *p.add(i),
            }
        }
    }

    /// The array from element `k` on.
    pub fn offset(&self, k: usize) -> Ints {
        match *self {
            Ints::Int(p) => Ints::Int(p.wrapping_add(k)),
            Ints::Wide(p) => Ints::Wide(p.wrapping_add(k)),
        }
    }

    /// Bytes that `n` elements take.
    pub fn bytes(&self, n: usize) -> usize {
        match self {
            Ints::Int(_) => n * size_of::<i32>(),
            Ints::Wide(_) => n * size_of::<i64>(),
        }
    }

    /// Copies the first `n` elements to `dst` (aligned for them, [`Ints::bytes`] long); the
    /// copy, of the same width.
    ///
    /// # Safety
    /// The array has `n` elements; `dst` is writable for them and used by nothing else.
    pub unsafe fn copy_to(&self, dst: *mut u8, n: usize) -> Ints {
        // SAFETY: the caller's contract.
        unsafe {
            match *self {
                Ints::Int(p) => {
                    core::ptr::copy_nonoverlapping(p, dst.cast(), n);
                    Ints::Int(dst.cast_const().cast())
                }
                Ints::Wide(p) => {
                    core::ptr::copy_nonoverlapping(p, dst.cast(), n);
                    Ints::Wide(dst.cast_const().cast())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_widths_read_alike() {
        let a = [3i32, -1, 7];
        let b = [3i64, -1, 7, 1 << 40];
        let (x, y) = (Ints::Int(a.as_ptr()), Ints::Wide(b.as_ptr()));
        for i in 0..3 {
            // SAFETY: three elements each.
            assert_eq!(unsafe { x.get(i) }, unsafe { y.get(i) });
        }
        // SAFETY: four elements.
        assert_eq!(unsafe { y.offset(1).get(2) }, 1 << 40);
    }

    #[test]
    fn a_copy_keeps_width_and_values() {
        let b = [5i64, 1 << 33];
        let mut dst = [0u64; 2];
        // SAFETY: two elements, sixteen bytes of aligned room.
        let c = unsafe { Ints::Wide(b.as_ptr()).copy_to(dst.as_mut_ptr().cast(), 2) };
        // SAFETY: as above.
        assert_eq!(unsafe { c.get(1) }, 1 << 33);
        assert!(Ints::NULL.is_null());
        assert_eq!(
            Ints::aint(core::ptr::null::<isize>()).bytes(2),
            2 * size_of::<isize>()
        );
    }
}
