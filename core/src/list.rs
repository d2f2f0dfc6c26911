//! Intrusive doubly-linked lists over pool slots.
//!
//! Queues of the PML (posted receives, unexpected messages, pending work) link pool slots by
//! index, so being on a queue costs no memory beyond the slot and no queue can outgrow its pool.
//!
//! An index that names no occupied slot ends a list: `NIL`, which no pool reaches, and — should
//! a list ever link a freed slot — that slot (debug builds assert it never happens).

use core::cell::Cell;

use crate::pool::Pool;

const NIL: u32 = u32::MAX;

/// The links one list threads through an element.
#[derive(Debug)]
pub struct Link {
    prev: Cell<u32>,
    next: Cell<u32>,
    linked: Cell<bool>,
}

impl Default for Link {
    fn default() -> Link {
        Link {
            prev: Cell::new(NIL),
            next: Cell::new(NIL),
            linked: Cell::new(false),
        }
    }
}

impl Link {
    /// Whether the element is on a list through this link.
    pub fn is_linked(&self) -> bool {
        self.linked.get()
    }
}

/// A list of pool slots in insertion order.
#[derive(Debug)]
pub struct List {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for List {
    fn default() -> List {
        List {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

/// Selects which of an element's links a list uses.
pub type LinkOf<T> = fn(&T) -> &Link;

impl List {
    /// Number of elements.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the first element.
    pub fn head(&self) -> Option<u32> {
        (self.head != NIL).then_some(self.head)
    }

    /// Index of the element after `index`.
    pub fn next<T>(pool: &Pool<T>, index: u32, link: LinkOf<T>) -> Option<u32> {
        let n = link(pool.at(index)?).next.get();
        (n != NIL).then_some(n)
    }

    /// Appends the element at `index`. It must not be on a list through `link`; a free slot
    /// holds nothing to append.
    pub fn push_back<T>(&mut self, pool: &Pool<T>, index: u32, link: LinkOf<T>) {
        let Some(elem) = pool.at(index) else {
            debug_assert!(false, "push_back of a free slot");
            return;
        };
        let l = link(elem);
        debug_assert!(!l.linked.get(), "element already on a list");
        l.prev.set(self.tail);
        l.next.set(NIL);
        l.linked.set(true);
        match pool.at(self.tail) {
            Some(tail) => link(tail).next.set(index),
            None => {
                debug_assert!(self.tail == NIL, "list tail is free");
                self.head = index;
            }
        }
        self.tail = index;
        self.len += 1;
    }

    /// Unlinks the element at `index`; does nothing if it is not linked.
    pub fn remove<T>(&mut self, pool: &Pool<T>, index: u32, link: LinkOf<T>) {
        let Some(elem) = pool.at(index) else { return };
        let l = link(elem);
        if !l.linked.get() {
            return;
        }
        let (prev, next) = (l.prev.get(), l.next.get());
        match pool.at(prev) {
            Some(p) => link(p).next.set(next),
            None => {
                debug_assert!(prev == NIL, "linked prev is free");
                self.head = next;
            }
        }
        match pool.at(next) {
            Some(n) => link(n).prev.set(prev),
            None => {
                debug_assert!(next == NIL, "linked next is free");
                self.tail = prev;
            }
        }
        l.prev.set(NIL);
        l.next.set(NIL);
        l.linked.set(false);
        self.len -= 1;
    }

    /// Removes and returns the first element.
    pub fn pop_front<T>(&mut self, pool: &Pool<T>, link: LinkOf<T>) -> Option<u32> {
        let h = self.head()?;
        self.remove(pool, h, link);
        Some(h)
    }

    /// Index of the first element satisfying `pred`.
    pub fn find<T>(
        &self,
        pool: &Pool<T>,
        link: LinkOf<T>,
        mut pred: impl FnMut(&T) -> bool,
    ) -> Option<u32> {
        let mut cur = self.head;
        while let Some(elem) = pool.at(cur) {
            if pred(elem) {
                return Some(cur);
            }
            cur = link(elem).next.get();
        }
        debug_assert!(cur == NIL, "linked slot is free");
        None
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::{tests::leak, Arena};
    use std::vec::Vec;

    struct Item {
        v: u32,
        link: Link,
    }

    fn link(i: &Item) -> &Link {
        &i.link
    }

    fn collect(l: &List, p: &Pool<Item>) -> Vec<u32> {
        let mut out = Vec::new();
        let mut cur = l.head();
        while let Some(i) = cur {
            out.push(p.at(i).unwrap().v);
            cur = List::next(p, i, link);
        }
        out
    }

    #[test]
    fn push_remove_pop_keep_order() {
        let mut p: Pool<Item> = Pool::new(&mut Arena::new(leak(4096)), 8).unwrap();
        let mut l = List::default();
        let keys: Vec<_> = (0..5)
            .map(|v| {
                p.insert(Item {
                    v,
                    link: Link::default(),
                })
                .ok()
                .unwrap()
            })
            .collect();
        for k in &keys {
            l.push_back(&p, k.index, link);
        }
        assert_eq!(collect(&l, &p), [0, 1, 2, 3, 4]);
        l.remove(&p, keys[2].index, link);
        l.remove(&p, keys[2].index, link); // second remove is a no-op
        assert_eq!(collect(&l, &p), [0, 1, 3, 4]);
        assert_eq!(l.pop_front(&p, link), Some(keys[0].index));
        l.remove(&p, keys[4].index, link);
        assert_eq!(collect(&l, &p), [1, 3]);
        assert_eq!(l.len(), 2);
        assert_eq!(l.find(&p, link, |i| i.v == 3), Some(keys[3].index));
        l.push_back(&p, keys[0].index, link);
        assert_eq!(collect(&l, &p), [1, 3, 0]);
    }
}
