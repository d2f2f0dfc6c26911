//! Carving typed storage out of the memory the platform hands over at init.
//!
//! The core never calls an allocator: at init the platform gives it one `'static` byte region,
//! and every pool, table and queue is cut from it here, at its initial size. An arena also
//! carries the engine's memory account ([`crate::memory::Memory`]), so the pools built from it
//! can grow later by grants counted against `mpi_memory_max`; a grant is carved by an arena of
//! its own. Nothing is ever freed; the pools recycle their slots.

use core::mem::{align_of, size_of, MaybeUninit};

use crate::error::{Error, ErrorClass, Reason, Result};
use crate::memory::Memory;

/// A bump allocator over the platform's memory (the init region, or one grant).
pub struct Arena {
    rest: &'static mut [MaybeUninit<u8>],
    given: usize,
    account: Option<&'static Memory>,
}

/// Counts the bytes a sequence of carvings needs, so the platform can size the region first.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sizer {
    bytes: usize,
}

impl Sizer {
    /// Adds room for `n` values of `T`, with worst-case alignment padding.
    pub fn slice<T>(&mut self, n: usize) -> &mut Self {
        self.bytes = self
            .bytes
            .saturating_add(size_of::<T>().saturating_mul(n))
            .saturating_add(align_of::<T>() - 1);
        self
    }

    /// Bytes needed.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Adds `n` bytes measured by another sizer (already padded for alignment).
    pub fn bytes_of(&mut self, n: usize) -> &mut Self {
        self.bytes = self.bytes.saturating_add(n);
        self
    }
}

impl Arena {
    /// An arena over `memory`.
    pub fn new(memory: &'static mut [MaybeUninit<u8>]) -> Arena {
        let given = memory.len();
        Arena {
            rest: memory,
            given,
            account: None,
        }
    }

    /// Lets the pools and tables built from this arena grow through `account`.
    pub fn set_account(&mut self, account: &'static Memory) {
        self.account = Some(account);
    }

    /// The memory account growth draws on (`None`: what is built here keeps its initial size).
    pub fn account(&self) -> Option<&'static Memory> {
        self.account
    }

    /// Bytes not yet carved.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Carves `n` values of `T`, initialising element `i` to `init(i)`.
    pub fn slice<T>(
        &mut self,
        n: usize,
        mut init: impl FnMut(usize) -> T,
    ) -> Result<&'static mut [T]> {
        let base = self.carve::<T>(n)?;
        // SAFETY: `carve`'s contract: `base` is aligned and owns room for `n` values for
        // `'static`. `MaybeUninit<T>` needs no initialisation.
        let slots: &'static mut [MaybeUninit<T>] =
            unsafe { core::slice::from_raw_parts_mut(base, n) };
        for (i, slot) in slots.iter_mut().enumerate() {
            slot.write(init(i));
        }
        // SAFETY: every element was initialised by the loop above; `MaybeUninit<T>` has `T`'s layout.
        Ok(unsafe { &mut *(slots as *mut [MaybeUninit<T>] as *mut [T]) })
    }

    /// Carves one value.
    pub fn one<T>(&mut self, value: T) -> Result<&'static mut T> {
        let base = self.carve::<T>(1)?;
        // SAFETY: `carve`'s contract: `base` is aligned and owns room for one value for `'static`.
        let slot: &'static mut MaybeUninit<T> = unsafe { &mut *base };
        Ok(slot.write(value))
    }

    /// Room for `n` values of `T`: aligned for `T`, `n * size_of::<T>()` bytes that this arena
    /// owns exclusively for `'static` (split off `rest`, never handed out again), uninitialised.
    fn carve<T>(&mut self, n: usize) -> Result<*mut MaybeUninit<T>> {
        let pad = self.rest.as_ptr().align_offset(align_of::<T>());
        let bytes = size_of::<T>()
            .checked_mul(n)
            .and_then(|b| b.checked_add(pad))
            .ok_or(Error::new(ErrorClass::NoMem, Reason::CountTooLarge))?;
        if bytes > self.rest.len() {
            let needed = self.given - self.rest.len() + bytes;
            return Err(Error::new(
                ErrorClass::NoMem,
                Reason::MemoryTooSmall {
                    needed,
                    given: self.given,
                },
            ));
        }
        let rest = core::mem::take(&mut self.rest);
        let (head, tail) = rest.split_at_mut(bytes);
        self.rest = tail;
        // Aligned for `T` by `pad` (align_offset above).
        Ok(head[pad..].as_mut_ptr().cast::<MaybeUninit<T>>())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use std::boxed::Box;
    use std::vec;

    /// Leaks a region of `bytes` for tests.
    pub fn leak(bytes: usize) -> &'static mut [MaybeUninit<u8>] {
        Box::leak(vec![MaybeUninit::<u8>::uninit(); bytes].into_boxed_slice())
    }

    #[test]
    fn carved_slices_are_aligned_and_initialised() {
        let mut a = Arena::new(leak(1024));
        let bytes = a.slice(3, |i| i as u8).unwrap();
        let words = a.slice(4, |i| i as u64 * 10).unwrap();
        assert_eq!(bytes, &[0, 1, 2]);
        assert_eq!(words, &[0, 10, 20, 30]);
        assert_eq!(words.as_ptr() as usize % align_of::<u64>(), 0);
    }

    #[test]
    fn running_out_reports_what_was_needed() {
        let mut a = Arena::new(leak(64));
        let e = a.slice(100, |_| 0u32).unwrap_err();
        assert_eq!(e.class, ErrorClass::NoMem);
        assert!(matches!(e.reason, Reason::MemoryTooSmall { given: 64, .. }));
    }

    #[test]
    fn sizer_covers_worst_case() {
        let mut s = Sizer::default();
        s.slice::<u8>(3).slice::<u64>(4);
        let mut a = Arena::new(leak(s.bytes()));
        a.slice(3, |_| 0u8).unwrap();
        a.slice(4, |_| 0u64).unwrap();
    }
}
