//! A first-fit allocator of ranges within a store (datatype descriptions, group members), and a
//! store that grows.
//!
//! Only the holes are tracked, in address order, so that freed neighbours merge back.
//!
//! A [`Store`] is the array the ranges index. It starts at an initial size carved at init and,
//! when no hole is large enough, moves to a grant of the engine's memory account at least twice
//! as large, giving the old one back (its items are addressed by index through the store, never
//! by pointer, so they may move).

use core::ops::{Deref, DerefMut};

use heapless::Vec;

use crate::arena::{Arena, Sizer};
use crate::array::Array;
use crate::error::{Error, Result};

/// A first-fit allocator of ranges in a store, with coalescing.
pub struct Ranges {
    free: Vec<(u32, u32), 256>,
}

impl Ranges {
    /// A store of `cap` units, all free.
    pub fn new(cap: u32) -> Ranges {
        let mut free = Vec::new();
        if cap > 0 {
            let _ = free.push((0, cap));
        }
        Ranges { free }
    }

    /// The start of `n` free units, now taken; `None` if no hole is large enough.
    pub fn alloc(&mut self, n: u32) -> Option<u32> {
        if n == 0 {
            return Some(0);
        }
        let i = self.free.iter().position(|&(_, len)| len >= n)?;
        let (start, len) = self.free[i];
        if len == n {
            self.free.remove(i);
        } else {
            self.free[i] = (start + n, len - n);
        }
        Some(start)
    }

    /// Gives back `n` units at `start`.
    pub fn release(&mut self, start: u32, n: u32) {
        if n == 0 {
            return;
        }
        let i = self
            .free
            .iter()
            .position(|&(s, _)| s > start)
            .unwrap_or(self.free.len());
        // Merge with the neighbours where they touch.
        let merge_prev = i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == start;
        let merge_next = i < self.free.len() && start + n == self.free[i].0;
        match (merge_prev, merge_next) {
            (true, true) => {
                self.free[i - 1].1 += n + self.free[i].1;
                self.free.remove(i);
            }
            (true, false) => self.free[i - 1].1 += n,
            (false, true) => {
                self.free[i].0 = start;
                self.free[i].1 += n;
            }
            // A full list of holes loses its smallest hole rather than fail a free.
            (false, false) => {
                if self.free.is_full() {
                    let smallest = (0..self.free.len()).min_by_key(|&k| self.free[k].1);
                    match smallest {
                        Some(k) if self.free[k].1 < n => {
                            self.free.remove(k);
                        }
                        _ => return,
                    }
                }
                let i = self
                    .free
                    .iter()
                    .position(|&(s, _)| s > start)
                    .unwrap_or(self.free.len());
                let _ = self.free.insert(i, (start, n));
            }
        }
    }
}

/// The array a [`Ranges`] allocates in, growing by moving to a larger grant.
pub struct Store<T: Copy + 'static> {
    items: Array<T>,
    fill: T,
}

impl<T: Copy> Store<T> {
    /// Arena bytes for a store of `initial` items.
    pub fn size(sizer: &mut Sizer, initial: usize, max: usize) {
        Array::<T>::size(sizer, initial, max);
    }

    /// A store of `initial` items set to `fill`, carved from `arena`, growing through its
    /// memory account up to `max` items; the ranges over it.
    pub fn new(
        arena: &mut Arena,
        initial: usize,
        max: usize,
        fill: T,
    ) -> Result<(Store<T>, Ranges)> {
        let max = max.min(u32::MAX as usize);
        let items = Array::new(arena, initial, max, |_| fill)?;
        let n = items.len() as u32;
        Ok((Store { items, fill }, Ranges::new(n)))
    }

    /// `n` items from `ranges`, growing the store when no hole is large enough; running out
    /// names `what` and `param` (the store's maximum) or `mpi_memory_max`.
    pub fn alloc(
        &mut self,
        ranges: &mut Ranges,
        n: u32,
        what: &'static str,
        param: &'static str,
    ) -> Result<u32> {
        if let Some(start) = ranges.alloc(n) {
            return Ok(start);
        }
        self.grow(Some(&mut *ranges), n as usize, what, param)?;
        ranges
            .alloc(n)
            .ok_or(Error::exhausted(what, self.items.len() as u32, param))
    }

    /// Moves to a store at least `more` items larger (and at least twice as large), for a
    /// store that is not allocated in ranges (a table of entries).
    pub fn extend(&mut self, more: usize, what: &'static str, param: &'static str) -> Result<()> {
        self.grow(None, more, what, param)
    }

    /// Moves to a store at least `more` items larger (and at least twice as large), its new
    /// items free in `ranges` if it has them.
    #[cold]
    fn grow(
        &mut self,
        ranges: Option<&mut Ranges>,
        more: usize,
        what: &'static str,
        param: &'static str,
    ) -> Result<()> {
        let len = self.items.len();
        if len >= self.items.max() {
            return Err(Error::exhausted(what, len as u32, param));
        }
        // A free tail of the old store joins the new part, so the maximum may still do.
        let new_len = len
            .saturating_mul(2)
            .max(len.saturating_add(more))
            .min(self.items.max());
        let fill = self.fill;
        self.items.grow_to(new_len, |_| fill, what, param)?;
        if let Some(ranges) = ranges {
            ranges.release(len as u32, (new_len - len) as u32);
        }
        Ok(())
    }
}

impl<T: Copy> Deref for Store<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.items
    }
}

impl<T: Copy> DerefMut for Store<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.items
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;
    use crate::error::{ErrorClass, Reason};
    use crate::memory::tests::account;

    #[test]
    fn freed_neighbours_merge() {
        let mut r = Ranges::new(100);
        let a = r.alloc(10).unwrap();
        let b = r.alloc(10).unwrap();
        let c = r.alloc(10).unwrap();
        r.release(a, 10);
        r.release(c, 10);
        r.release(b, 10);
        assert_eq!(r.alloc(100), Some(0), "everything merged back");
    }

    #[test]
    fn a_full_hole_list_keeps_the_larger_holes() {
        let mut r = Ranges::new(2000);
        let starts: std::vec::Vec<u32> = (0..600).map(|_| r.alloc(3).unwrap()).collect();
        // Every other range freed: 300 separate holes, more than the list keeps.
        for s in starts.iter().step_by(2) {
            r.release(*s, 3);
        }
        let big = r.alloc(200).unwrap();
        r.release(big, 200);
        assert_eq!(r.alloc(200), Some(big), "a large hole is not the one lost");
    }

    fn store(initial: usize, max: usize, bound: usize) -> (Store<u64>, Ranges) {
        let mut a = Arena::new(leak(1 << 12));
        a.set_account(account(bound));
        Store::new(&mut a, initial, max, 0).unwrap()
    }

    #[test]
    fn a_store_grows_and_keeps_its_contents() {
        let (mut s, mut r) = store(8, 1000, 1 << 20);
        let a = s.alloc(&mut r, 6, "items", "test_max").unwrap();
        for (i, v) in s[a as usize..a as usize + 6].iter_mut().enumerate() {
            *v = 100 + i as u64;
        }
        let b = s.alloc(&mut r, 20, "items", "test_max").unwrap();
        assert!(s.len() >= 26);
        assert_eq!(
            &s[a as usize..a as usize + 6],
            &[100, 101, 102, 103, 104, 105]
        );
        assert!(b as usize + 20 <= s.len());
        r.release(a, 6);
        r.release(b, 20);
        assert_eq!(
            r.alloc(s.len() as u32),
            Some(0),
            "the grown part merged with the rest"
        );
    }

    #[test]
    fn a_store_at_its_maximum_names_the_parameter() {
        let (mut s, mut r) = store(8, 16, 1 << 20);
        s.alloc(&mut r, 16, "items", "test_max").unwrap();
        let e = s.alloc(&mut r, 1, "items", "test_max").unwrap_err();
        assert_eq!(e.class, ErrorClass::NoMem);
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "test_max",
                ..
            }
        ));
    }

    #[test]
    fn a_store_past_the_memory_bound_names_mpi_memory_max() {
        let (mut s, mut r) = store(8, 1 << 20, 100);
        let e = s.alloc(&mut r, 100, "items", "test_max").unwrap_err();
        crate::memory::tests::assert_names_memory_max(&e);
    }
}
