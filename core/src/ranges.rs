//! A first-fit allocator of ranges within a fixed store (datatype descriptions, group members).
//!
//! Only the holes are tracked, in address order, so that freed neighbours merge back.

use heapless::Vec;

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
            // A full list of holes loses this range rather than fail a free.
            (false, false) => {
                let _ = self.free.insert(i, (start, n));
            }
        }
    }
}
