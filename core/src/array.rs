//! An indexed array that grows by moving to a larger grant: tables indexed by a handle's slot
//! (the communicator table and the point-to-point layers' per-communicator state).
//!
//! It starts at the size carved from the init region and, asked to, moves its items to a grant
//! of the engine's memory account ([`crate::memory`]) of the length the caller chose and gives
//! the old array back, up to its maximum or the account's bound. As in a [`crate::pool::Pool`],
//! an item's *index* never changes and its *address* may: nothing keeps a reference into an
//! array across a growth (the borrow checker sees to it: growing takes the array mutably).
//! Unlike a [`crate::ranges::Store`] the items need not be `Copy`: they are moved, not copied
//! (the matching queues of a communicator are list heads that must not exist twice).

use core::mem::{align_of, size_of, size_of_val, MaybeUninit};
use core::ops::{Deref, DerefMut};

use crate::arena::{Arena, Sizer};
use crate::error::{Error, Result};
use crate::memory::{Memory, GRANT_ALIGN};

/// An array of `T` that grows by moving.
pub struct Array<T: 'static> {
    items: &'static mut [T],
    max: usize,
    account: Option<&'static Memory>,
    /// The items are a grant of the account (not the init region): they go back when moved.
    granted: bool,
}

impl<T> Array<T> {
    /// Arena bytes for an array of `initial` items (at most `max`).
    pub fn size(sizer: &mut Sizer, initial: usize, max: usize) {
        sizer.slice::<T>(initial.min(max));
    }

    /// An array of `initial` items (at most `max`), item `i` set to `fill(i)`, carved from
    /// `arena`; it grows through the arena's memory account, if it has one, up to `max` items.
    pub fn new(
        arena: &mut Arena,
        initial: usize,
        max: usize,
        fill: impl FnMut(usize) -> T,
    ) -> Result<Array<T>> {
        const { assert!(align_of::<T>() <= GRANT_ALIGN) };
        Ok(Array {
            items: arena.slice(initial.min(max), fill)?,
            max,
            account: arena.account(),
            granted: false,
        })
    }

    /// Most items it may hold.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Moves the items to an array of `len` items (more than now, at most the maximum), the
    /// new ones set to `fill(i)`. Past the maximum it is an error naming `what` and `param`;
    /// past the memory account's bound, one naming `mpi_memory_max`. On error nothing changes.
    #[cold]
    pub fn grow_to(
        &mut self,
        len: usize,
        mut fill: impl FnMut(usize) -> T,
        what: &'static str,
        param: &'static str,
    ) -> Result<()> {
        let cap = self.items.len();
        if len <= cap {
            return Ok(());
        }
        let full = || Error::exhausted(what, u32::try_from(cap).unwrap_or(u32::MAX), param);
        if len > self.max {
            return Err(full());
        }
        let account = self.account.ok_or_else(full)?;
        // Exactly the items (a grant is aligned for any of them), so the array can go back as
        // the grant it was when it moves again.
        let bytes = size_of::<T>().checked_mul(len).ok_or_else(full)?;
        let region = account
            .take(bytes)
            .map_err(|why| account.refused(what, why))?;
        let old = core::mem::take(&mut self.items);
        let (from, old_bytes) = (old.as_mut_ptr(), size_of_val::<[T]>(old));
        let moved = Arena::new(region).slice(len, |i| {
            if i < cap {
                // SAFETY: `from` points at `cap` initialised items that only `old` reached, and
                // `old` is never used again (unless the carving fails, which happens before the
                // first item is read): each item is read out exactly once, a move.
                unsafe { from.add(i).read() }
            } else {
                fill(i)
            }
        });
        let items = match moved {
            Ok(items) => items,
            Err(e) => {
                // A grant shorter than asked (the account checks the length, so this does not
                // happen): `Arena::slice` fails before it reads any item, nothing moved.
                self.items = old;
                return Err(e);
            }
        };
        self.items = items;
        if self.granted {
            // SAFETY: the old items were a whole grant of `account` (sized as above), moved out
            // and reachable no more.
            account.give_back(unsafe {
                core::slice::from_raw_parts_mut(from.cast::<MaybeUninit<u8>>(), old_bytes)
            });
        }
        self.granted = true;
        Ok(())
    }
}

impl<T> Deref for Array<T> {
    type Target = [T];
    #[inline(always)]
    fn deref(&self) -> &[T] {
        self.items
    }
}

impl<T> DerefMut for Array<T> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [T] {
        self.items
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;
    use crate::error::{ErrorClass, Reason};
    use crate::memory::tests::account;
    use std::vec::Vec;

    fn array(initial: usize, max: usize, bound: usize) -> (Array<Vec<u32>>, &'static Memory) {
        let m = account(bound);
        let mut a = Arena::new(leak(1 << 12));
        a.set_account(m);
        (
            Array::new(&mut a, initial, max, |i| std::vec![i as u32]).unwrap(),
            m,
        )
    }

    #[test]
    fn growth_moves_every_item_to_its_index() {
        let (mut a, m) = array(4, 100, 1 << 20);
        a[2].push(20);
        a.grow_to(8, |i| std::vec![i as u32 + 100], "items", "test_max")
            .unwrap();
        assert_eq!(a.len(), 8);
        assert_eq!(a[2], [2, 20], "a moved item keeps its contents");
        assert_eq!(a[7], [107], "new items come from fill");
        a.grow_to(64, |_| Vec::new(), "items", "test_max").unwrap();
        assert_eq!(a[2], [2, 20]);
        assert_eq!(a[7], [107]);
        // Only the current array is counted: the first grant went back when it moved.
        assert_eq!(m.used(), 64 * size_of::<Vec<u32>>());
    }

    #[test]
    fn a_smaller_length_changes_nothing() {
        let (mut a, m) = array(4, 100, 1 << 20);
        a.grow_to(3, |_| Vec::new(), "items", "test_max").unwrap();
        assert_eq!((a.len(), m.used()), (4, 0));
    }

    #[test]
    fn past_the_maximum_is_an_error_naming_the_parameter() {
        let (mut a, _) = array(4, 10, 1 << 20);
        let e = a
            .grow_to(11, |_| Vec::new(), "items", "test_max")
            .unwrap_err();
        assert_eq!(e.class, ErrorClass::NoMem);
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "test_max",
                capacity: 4,
                ..
            }
        ));
        a.grow_to(10, |_| Vec::new(), "items", "test_max").unwrap();
        assert_eq!(a.len(), 10);
    }

    #[test]
    fn past_the_memory_bound_is_an_error_naming_mpi_memory_max_and_keeps_the_items() {
        let (mut a, _) = array(4, 1 << 20, 100);
        a[0].push(7);
        let e = a
            .grow_to(1000, |_| Vec::new(), "items", "test_max")
            .unwrap_err();
        crate::memory::tests::assert_names_memory_max(&e);
        assert_eq!((a.len(), &a[0][..]), (4, &[0, 7][..]));
    }

    #[test]
    fn an_array_without_an_account_keeps_its_initial_size() {
        let mut a: Array<u8> = Array::new(&mut Arena::new(leak(64)), 4, 100, |_| 0).unwrap();
        assert!(a.grow_to(8, |_| 0, "items", "test_max").is_err());
        assert_eq!(a.len(), 4);
    }
}
