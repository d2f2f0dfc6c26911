//! Fixed-capacity pools with generation-checked keys.
//!
//! A pool is a freelist of slots carved once from the platform's memory. Inserting into a full
//! pool hands the value back (nothing is lost; the caller progresses and retries, or reports the
//! exhaustion). Keys carry a generation so a stale key — a freed request, or an id echoed back by
//! a confused peer — is recognised instead of aliasing a newer occupant.

use crate::arena::Arena;
use crate::error::Result;

const NIL: u32 = u32::MAX;

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

struct Slot<T> {
    gen: u32,
    next_free: u32,
    value: Option<T>,
}

/// A fixed-capacity pool of `T`.
pub struct Pool<T: 'static> {
    slots: &'static mut [Slot<T>],
    free: u32,
    len: u32,
}

impl<T> Pool<T> {
    /// A pool of `capacity` slots carved from `arena`.
    pub fn new(arena: &mut Arena, capacity: u32) -> Result<Pool<T>> {
        let slots = arena.slice(capacity as usize, |i| Slot {
            gen: 0,
            next_free: if i + 1 < capacity as usize {
                i as u32 + 1
            } else {
                NIL
            },
            value: None,
        })?;
        Ok(Pool {
            slots,
            free: if capacity > 0 { 0 } else { NIL },
            len: 0,
        })
    }

    /// Bytes of arena a pool of `capacity` needs.
    pub fn size(sizer: &mut crate::arena::Sizer, capacity: u32) {
        sizer.slice::<Slot<T>>(capacity as usize);
    }

    /// Number of slots.
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Occupied slots.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether no slot is occupied.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether every slot is occupied.
    pub fn is_full(&self) -> bool {
        self.free == NIL
    }

    /// Stores `value`; hands it back when the pool is full.
    pub fn insert(&mut self, value: T) -> core::result::Result<Key, T> {
        if self.free == NIL {
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
    /// values on hot paths); `None` when the pool is full (`make` is not called).
    #[inline(always)]
    pub fn insert_with(&mut self, make: impl FnOnce() -> T) -> Option<Key> {
        if self.free == NIL {
            return None;
        }
        let index = self.free;
        let slot = &mut self.slots[index as usize];
        self.free = slot.next_free;
        slot.value = Some(make());
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arena::tests::leak;

    fn pool(cap: u32) -> Pool<u64> {
        Pool::new(&mut Arena::new(leak(4096)), cap).unwrap()
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
    }
}
