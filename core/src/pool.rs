//! Pools with generation-checked keys that grow up to a bound.
//!
//! A pool is a freelist of slots in one array. The array is carved at init from the platform's
//! memory at [`Capacity::initial`] slots (small, so that `MPI_Init` stays cheap); when every slot
//! is taken, an insert moves the slots to a grant of the engine's memory account
//! ([`crate::memory`]) twice as large and gives the old array back, until the pool holds
//! [`Capacity::max`] slots or the account's bound is reached. Then inserting hands the value back
//! (nothing is lost; the caller progresses and retries, or reports the exhaustion with
//! [`Pool::exhausted`], which names what to raise).
//!
//! A slot's *index* never changes: intrusive lists ([`crate::list`]) link slots by index, and
//! keys travel on the wire. Its *address* may: nothing keeps a pointer into a pool across an
//! insert (the borrow checker sees to safe code; the values stored — requests, unexpected
//! records, collectives, datatype entries — hold no pointers into themselves or each other).
//! Why one array rather than segments that never move: the small-message path reaches the
//! request pool some twenty times per message, and a lookup that may fall through to a second
//! segment, even untaken, cost it ~75 instructions of ~1 800 (it changed what the optimiser
//! inlines); a move costs one copy per doubling, amortised O(1) per insert. Stores whose
//! elements must stay put (the datatypes' operation counters, unexpected payload chunks) grow
//! in segments instead, with [`locate`].
//!
//! Keys carry a generation so a stale key — a freed request, or an id echoed back by a confused
//! peer — is recognised instead of aliasing a newer occupant.

use core::mem::{align_of, size_of, MaybeUninit};

use crate::arena::{Arena, Sizer};
use crate::error::{Error, Result};
use crate::memory::{Memory, Refusal, GRANT_ALIGN};

const NIL: u32 = u32::MAX;

/// Most segments a segmented store grows by (its first segment's size times 2^24 elements).
pub const SEGMENTS: usize = 24;

/// A key to a pool slot: index and generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    /// Slot index.
    pub index: u32,
    /// Generation of the occupant.
    pub gen: u32,
}

impl Key {
    /// Packs the key into 64 bits, for wire ids that a peer echoes back.
    pub const fn to_u64(self) -> u64 {
        ((self.gen as u64) << 32) | self.index as u64
    }

    /// Unpacks a key packed by [`Key::to_u64`].
    pub const fn from_u64(v: u64) -> Key {
        Key {
            index: v as u32,
            gen: (v >> 32) as u32,
        }
    }
}

/// How many elements a pool or store holds: `initial` from the init region, growing up to `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Elements carved at init.
    pub initial: u32,
    /// Most elements.
    pub max: u32,
}

impl Capacity {
    /// Exactly `n` elements, carved at init; never grows.
    pub const fn fixed(n: u32) -> Capacity {
        Capacity { initial: n, max: n }
    }

    /// `initial` elements at init, growing up to `max` (within the memory account's bound).
    pub const fn growing(initial: u32, max: u32) -> Capacity {
        Capacity { initial, max }
    }

    /// Elements carved at init: all of them for a store that cannot grow past `initial`, else
    /// `initial` rounded down to a power of two (so a segmented store's index arithmetic is a
    /// shift; see [`locate`]).
    pub const fn first(self) -> u32 {
        if self.max <= self.initial {
            self.max
        } else if self.initial <= 1 {
            1
        } else {
            1 << (31 - self.initial.leading_zeros())
        }
    }
}

impl From<u32> for Capacity {
    fn from(n: u32) -> Capacity {
        Capacity::fixed(n)
    }
}

/// Where index `i` lies in a segmented store whose first segment holds `2^shift` elements and
/// whose segment `k >= 1` holds indices `2^(shift+k-1) .. 2^(shift+k)` (each as large as all
/// before it): the segment and the offset in it.
#[inline]
pub const fn locate(i: u32, shift: u32) -> (usize, usize) {
    let k = u32::BITS - (i >> shift).leading_zeros();
    let start = if k == 0 { 0 } else { 1u32 << (shift + k - 1) };
    (k as usize, (i - start) as usize)
}

/// What stopped a pool growing the last time it tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limit {
    /// Its own maximum (or it cannot grow at all).
    Max,
    /// The memory account.
    Memory(Refusal),
}

struct Slot<T> {
    gen: u32,
    next_free: u32,
    value: Option<T>,
}

/// A pool of `T`.
pub struct Pool<T: 'static> {
    slots: &'static mut [Slot<T>],
    free: u32,
    len: u32,
    max: u32,
    account: Option<&'static Memory>,
    /// The slots are a grant of the account (not the init region): they go back when moved.
    granted: bool,
    limit: Limit,
}

// A grant is aligned to GRANT_ALIGN: slots carved from one start at its first byte, so the
// slots are exactly the grant and can be given back as it.
const fn check_align<T>() {
    assert!(align_of::<Slot<T>>() <= GRANT_ALIGN);
}

impl<T> Pool<T> {
    /// A pool of `capacity` (a `u32` is a fixed capacity) carved from `arena`; it grows through
    /// the arena's memory account, if it has one.
    pub fn new(arena: &mut Arena, capacity: impl Into<Capacity>) -> Result<Pool<T>> {
        const { check_align::<T>() };
        let capacity = capacity.into();
        let n = capacity.initial.min(capacity.max);
        let slots = arena.slice(n as usize, |i| Slot {
            gen: 0,
            next_free: if i + 1 < n as usize {
                i as u32 + 1
            } else {
                NIL
            },
            value: None,
        })?;
        Ok(Pool {
            slots,
            free: if n > 0 { 0 } else { NIL },
            len: 0,
            max: capacity.max.max(n),
            account: arena.account().filter(|_| capacity.max > n),
            granted: false,
            limit: Limit::Max,
        })
    }

    /// Bytes of arena a pool of `capacity` needs at init.
    pub fn size(sizer: &mut Sizer, capacity: impl Into<Capacity>) {
        let c = capacity.into();
        sizer.slice::<Slot<T>>(c.initial.min(c.max) as usize);
    }

    /// Slots held now.
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Most slots it may grow to.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Occupied slots.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether no slot is occupied.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether every slot is occupied and the pool cannot grow (its maximum, or the memory
    /// account's bound, is reached).
    pub fn is_full(&self) -> bool {
        self.free == NIL
            && !matches!(
                (self.next_size(), self.account),
                (Some((_, bytes)), Some(m)) if m.room(bytes)
            )
    }

    /// Makes sure the next insert succeeds (growing the pool if every slot is taken); whether
    /// it will.
    pub fn reserve(&mut self) -> bool {
        self.free != NIL || self.grow()
    }

    /// The error of a pool that handed a value back: `what` ran out; `param` (the pool's
    /// maximum) or `mpi_memory_max` is what to raise.
    #[cold]
    pub fn exhausted(&self, what: &'static str, param: &'static str) -> Error {
        match (self.limit, self.account) {
            (Limit::Memory(why), Some(m)) => m.refused(what, why),
            _ => Error::exhausted(what, self.capacity(), param),
        }
    }

    /// Stores `value`; hands it back when the pool is full and cannot grow.
    pub fn insert(&mut self, value: T) -> core::result::Result<Key, T> {
        if self.free == NIL && !self.grow() {
            return Err(value);
        }
        let index = self.free;
        let slot = &mut self.slots[index as usize];
        self.free = slot.next_free;
        slot.value = Some(value);
        self.len += 1;
        Ok(Key {
            index,
            gen: slot.gen,
        })
    }

    /// Inserts the value `make` builds, built in its slot rather than moved there (for large
    /// values on hot paths); `None` when the pool is full and cannot grow (`make` is not
    /// called).
    #[inline(always)]
    pub fn insert_with(&mut self, make: impl FnOnce() -> T) -> Option<Key> {
        if self.free == NIL && !self.grow() {
            return None;
        }
        let index = self.free;
        let slot = &mut self.slots[index as usize];
        self.free = slot.next_free;
        // A free slot holds `None`: nothing to drop, so the value can be built where it lies.
        slot.value.get_or_insert_with(make);
        self.len += 1;
        Some(Key {
            index,
            gen: slot.gen,
        })
    }

    /// Removes and returns the value under `key`, if `key` is current.
    pub fn remove(&mut self, key: Key) -> Option<T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.gen != key.gen {
            return None;
        }
        let value = slot.value.take()?;
        self.free_slot(key.index);
        Some(value)
    }

    /// Removes and returns the occupant of slot `index` if `done` (given it first) says so.
    pub fn remove_at_if(&mut self, index: u32, done: impl FnOnce(&mut T) -> bool) -> Option<T> {
        let slot = self.slots.get_mut(index as usize)?;
        if !done(slot.value.as_mut()?) {
            return None;
        }
        let value = slot.value.take();
        self.free_slot(index);
        value
    }

    /// Drops the value under `key` where it lies (no move out, for large values on hot paths);
    /// whether `key` was current.
    #[inline]
    pub fn discard(&mut self, key: Key) -> bool {
        let Some(slot) = self.slots.get_mut(key.index as usize) else {
            return false;
        };
        if slot.gen != key.gen || slot.value.is_none() {
            return false;
        }
        slot.value = None;
        self.free_slot(key.index);
        true
    }

    /// Puts emptied slot `index` on the free list; its old keys go stale.
    #[inline(always)]
    fn free_slot(&mut self, index: u32) {
        let slot = &mut self.slots[index as usize];
        slot.gen = slot.gen.wrapping_add(1);
        slot.next_free = self.free;
        self.free = index;
        self.len -= 1;
    }

    /// The value under `key`, if `key` is current.
    pub fn get(&self, key: Key) -> Option<&T> {
        let slot = self.slots.get(key.index as usize)?;
        if slot.gen != key.gen {
            return None;
        }
        slot.value.as_ref()
    }

    /// The value under `key`, mutably, if `key` is current.
    pub fn get_mut(&mut self, key: Key) -> Option<&mut T> {
        let slot = self.slots.get_mut(key.index as usize)?;
        if slot.gen != key.gen {
            return None;
        }
        slot.value.as_mut()
    }

    /// The current key of an occupied slot.
    pub fn key_at(&self, index: u32) -> Option<Key> {
        let slot = self.slots.get(index as usize)?;
        slot.value.as_ref().map(|_| Key {
            index,
            gen: slot.gen,
        })
    }

    /// The current key and the occupant of slot `index`, mutably.
    #[inline]
    pub fn entry_at_mut(&mut self, index: u32) -> Option<(Key, &mut T)> {
        let slot = self.slots.get_mut(index as usize)?;
        let gen = slot.gen;
        slot.value.as_mut().map(|v| (Key { index, gen }, v))
    }

    /// Removes and returns the occupant of slot `index`, whatever its generation.
    pub fn remove_at(&mut self, index: u32) -> Option<T> {
        let value = self.slots.get_mut(index as usize)?.value.take()?;
        self.free_slot(index);
        Some(value)
    }

    /// The occupant of slot `index`, whatever its generation.
    pub fn at(&self, index: u32) -> Option<&T> {
        self.slots.get(index as usize)?.value.as_ref()
    }

    /// The occupant of slot `index`, mutably.
    pub fn at_mut(&mut self, index: u32) -> Option<&mut T> {
        self.slots.get_mut(index as usize)?.value.as_mut()
    }

    /// Iterates over occupied slots with their keys.
    pub fn iter(&self) -> impl Iterator<Item = (Key, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.value.as_ref().map(|v| {
                (
                    Key {
                        index: i as u32,
                        gen: s.gen,
                    },
                    v,
                )
            })
        })
    }

    /// Slots and bytes of the array the pool would move to, if it may still grow.
    fn next_size(&self) -> Option<(usize, usize)> {
        let cap = self.slots.len();
        if self.account.is_none() || cap >= self.max as usize {
            return None;
        }
        let slots = cap.saturating_mul(2).clamp(cap + 1, self.max as usize);
        Some((slots, size_of::<Slot<T>>().checked_mul(slots)?))
    }

    /// Moves the slots to an array twice as large; whether it could.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) -> bool {
        let (Some((slots, bytes)), Some(account)) = (self.next_size(), self.account) else {
            self.limit = Limit::Max;
            return false;
        };
        let region = match account.take(bytes) {
            Ok(r) => r,
            Err(why) => {
                self.limit = Limit::Memory(why);
                return false;
            }
        };
        let old = core::mem::take(&mut self.slots);
        let (from, cap) = (old.as_mut_ptr(), old.len());
        let moved = Arena::new(region).slice(slots, |i| {
            if i < cap {
                // SAFETY: `from` points at `cap` initialised slots that only `old` reached, and
                // `old` is never used again: each slot is read out exactly once (a move).
                unsafe { from.add(i).read() }
            } else {
                Slot {
                    gen: 0,
                    next_free: if i + 1 < slots { i as u32 + 1 } else { NIL },
                    value: None,
                }
            }
        });
        let Ok(moved) = moved else {
            // A grant shorter than asked (the account checks the length, so this does not
            // happen): nothing was moved, the pool stays as it was.
            self.slots = old;
            self.limit = Limit::Memory(Refusal::Platform);
            return false;
        };
        self.slots = moved;
        // Every old slot was occupied (a pool grows only when none is free).
        self.free = cap as u32;
        if self.granted {
            // SAFETY: the old slots were a whole grant of `account` (see `check_align`), moved
            // out above and reachable no more.
            account.give_back(unsafe {
                core::slice::from_raw_parts_mut(
                    from.cast::<MaybeUninit<u8>>(),
                    cap * size_of::<Slot<T>>(),
                )
            });
        }
        self.granted = true;
        true
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;
    use crate::error::{ErrorClass, Reason};
    use crate::list::{Link, List};
    use crate::memory::tests::account;
    use std::vec::Vec;

    fn pool(cap: u32) -> Pool<u64> {
        Pool::new(&mut Arena::new(leak(4096)), cap).unwrap()
    }

    /// A pool of `initial` slots growing to `max`, over an account of `bound` bytes.
    fn growing<T>(initial: u32, max: u32, bound: usize) -> Pool<T> {
        let mut a = Arena::new(leak(1 << 16));
        a.set_account(account(bound));
        Pool::new(&mut a, Capacity::growing(initial, max)).unwrap()
    }

    #[test]
    fn full_pool_hands_value_back() {
        let mut p = pool(2);
        let a = p.insert(1).unwrap();
        p.insert(2).unwrap();
        assert!(p.is_full());
        assert_eq!(p.insert(3), Err(3));
        assert_eq!(p.remove(a), Some(1));
        assert!(p.insert(3).is_ok());
    }

    #[test]
    fn discarded_slots_are_free_and_their_keys_stale() {
        let mut p = pool(1);
        let a = p.insert(10).unwrap();
        assert!(p.discard(a));
        assert!(!p.discard(a), "a stale key discards nothing");
        assert_eq!((p.len(), p.get(a)), (0, None));
        let b = p.insert(20).unwrap();
        assert_eq!(a.index, b.index);
        assert!(!p.discard(a));
        assert_eq!(p.get(b), Some(&20));
    }

    #[test]
    fn stale_keys_do_not_alias() {
        let mut p = pool(1);
        let a = p.insert(10).unwrap();
        p.remove(a);
        let b = p.insert(20).unwrap();
        assert_eq!(a.index, b.index);
        assert_eq!(p.get(a), None);
        assert_eq!(p.remove(a), None);
        assert_eq!(p.get(b), Some(&20));
    }

    #[test]
    fn keys_survive_the_wire() {
        let k = Key {
            index: 7,
            gen: 0xdead_beef,
        };
        assert_eq!(Key::from_u64(k.to_u64()), k);
    }

    #[test]
    fn out_of_range_keys_are_none() {
        let mut p = pool(4);
        let bogus = Key {
            index: 1000,
            gen: 0,
        };
        assert_eq!(p.get(bogus), None);
        assert_eq!(p.get_mut(bogus), None);
        assert_eq!(p.remove(bogus), None);
        assert_eq!(p.iter().count(), 0);
        let far = Key {
            index: u32::MAX - 1,
            gen: 0,
        };
        assert_eq!(p.get(far), None);
    }

    #[test]
    fn locate_finds_each_index_in_its_doubling_segment() {
        // First segment of 4: 0..4 | 4..8 | 8..16 | 16..32 ...
        assert_eq!(locate(0, 2), (0, 0));
        assert_eq!(locate(3, 2), (0, 3));
        assert_eq!(locate(4, 2), (1, 0));
        assert_eq!(locate(7, 2), (1, 3));
        assert_eq!(locate(8, 2), (2, 0));
        assert_eq!(locate(31, 2), (3, 15));
        assert_eq!(locate(u32::MAX, 0), (32, (u32::MAX - (1 << 31)) as usize));
    }

    #[test]
    fn capacities_round_the_first_segment_to_a_power_of_two() {
        assert_eq!(Capacity::growing(1000, 1 << 20).first(), 512);
        assert_eq!(Capacity::growing(1024, 1 << 20).first(), 1024);
        assert_eq!(Capacity::growing(1024, 300).first(), 300, "never past max");
        assert_eq!(Capacity::fixed(7).first(), 7);
        assert_eq!(Capacity::growing(0, 8).first(), 1);
    }

    #[test]
    fn growth_keeps_every_key_valid() {
        let mut p: Pool<u64> = growing(4, 1000, 1 << 20);
        let keys: Vec<Key> = (0..300u64).map(|v| p.insert(v).unwrap()).collect();
        assert!(p.capacity() >= 300 && p.capacity() <= 512);
        for (v, k) in keys.iter().enumerate() {
            assert_eq!(p.get(*k), Some(&(v as u64)), "key {k:?}");
            assert_eq!(p.key_at(k.index), Some(*k));
        }
        let mut seen: Vec<u32> = keys.iter().map(|k| k.index).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 300, "indices are distinct");
        let listed: Vec<u64> = p.iter().map(|(_, v)| *v).collect();
        assert_eq!(listed.len(), 300);
        // Freed slots anywhere are reused and their old keys go stale.
        for k in keys.iter().step_by(3) {
            assert!(p.discard(*k));
            assert_eq!(p.get(*k), None);
        }
        let cap = p.capacity();
        for v in 0..100u64 {
            p.insert(1000 + v).unwrap();
        }
        assert_eq!(p.capacity(), cap, "freed slots come first");
    }

    #[test]
    fn the_pool_s_own_maximum_hands_the_value_back_and_is_named() {
        let mut p: Pool<u64> = growing(4, 10, 1 << 20);
        for v in 0..10 {
            p.insert(v).unwrap();
        }
        assert_eq!(p.capacity(), 10, "the last growth stops at the maximum");
        assert!(p.is_full());
        assert_eq!(p.insert(99), Err(99));
        let e = p.exhausted("test pool", "test_max");
        assert_eq!(e.class, ErrorClass::NoMem);
        assert!(matches!(
            e.reason,
            Reason::Exhausted {
                param: "test_max",
                capacity: 10,
                ..
            }
        ));
    }

    #[test]
    fn the_memory_bound_hands_the_value_back_and_is_named() {
        // Room for the first growth (to 8 slots of 24 bytes) but not the second (16 slots,
        // while the 8 are still held).
        let mut p: Pool<u64> = growing(4, 1 << 20, 250);
        for v in 0..8 {
            p.insert(v).unwrap();
        }
        assert!(p.is_full(), "the next array would pass the bound");
        assert_eq!(p.insert(8), Err(8));
        let e = p.exhausted("test pool", "test_max");
        crate::memory::tests::assert_names_memory_max(&e);
    }

    #[test]
    fn a_moved_array_goes_back_to_the_account() {
        let m = account(1 << 20);
        let mut a = Arena::new(leak(1 << 12));
        a.set_account(m);
        let mut p: Pool<u64> = Pool::new(&mut a, Capacity::growing(4, 1 << 10)).unwrap();
        for v in 0..600 {
            p.insert(v).unwrap();
        }
        assert_eq!(p.capacity(), 1024);
        // Only the current array is held: 1024 slots of 24 bytes (the heap platform takes back).
        assert_eq!(m.used(), 1024 * 24);
        assert_eq!(p.iter().count(), 600);
        assert!(
            p.iter().all(|(k, v)| k.index as u64 == *v),
            "values stay at their index"
        );
    }

    #[test]
    fn a_pool_without_an_account_keeps_its_initial_size() {
        let mut p: Pool<u64> =
            Pool::new(&mut Arena::new(leak(4096)), Capacity::growing(4, 100)).unwrap();
        for v in 0..4 {
            p.insert(v).unwrap();
        }
        assert!(p.is_full());
        assert_eq!(p.insert(4), Err(4));
    }

    #[test]
    fn generations_are_checked_after_growth() {
        let mut p: Pool<u64> = growing(2, 64, 1 << 20);
        let keys: Vec<Key> = (0..20).map(|v| p.insert(v).unwrap()).collect();
        let k = keys[17];
        assert!(k.index >= 2, "a slot the growth added");
        assert_eq!(p.remove(k), Some(17));
        let again = p.insert(77).unwrap();
        assert_eq!(again.index, k.index);
        assert_ne!(again.gen, k.gen);
        assert_eq!(p.get(k), None);
        assert!(!p.discard(k));
        assert_eq!(p.get(again), Some(&77));
        assert_eq!(p.at(k.index), Some(&77));
    }

    struct Item {
        v: u32,
        link: Link,
    }

    fn link(i: &Item) -> &Link {
        &i.link
    }

    #[test]
    fn lists_survive_growth() {
        let mut p: Pool<Item> = growing(2, 1024, 1 << 20);
        let mut l = List::default();
        for v in 0..100 {
            let k = p
                .insert(Item {
                    v,
                    link: Link::default(),
                })
                .map_err(|_| ())
                .unwrap();
            l.push_back(&p, k.index, link);
        }
        // Unlink every other one, then walk.
        let mut cur = l.head();
        let mut n = 0;
        while let Some(i) = cur {
            cur = List::next(&p, i, link);
            if n % 2 == 0 {
                l.remove(&p, i, link);
            }
            n += 1;
        }
        let mut got = Vec::new();
        while let Some(i) = l.pop_front(&p, link) {
            got.push(p.at(i).unwrap().v);
        }
        assert_eq!(got, (0..100).filter(|v| v % 2 == 1).collect::<Vec<_>>());
    }
}
