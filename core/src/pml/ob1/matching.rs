//! The matching queues of one communicator: posted receives and unexpected messages.
//!
//! MPI matching is "first posted receive that accepts the message" and "first arrived message
//! that the receive accepts". One list per queue gives that order for free but makes a message
//! walk past every posted receive of another tag; here the queues are hashed instead:
//!
//! - posted receives go to one of four bucket sets by the kind of selector — exact (source and
//!   tag), any source, any tag, any both — and carry a posting number; an arriving message looks
//!   at the one bucket of each set it could match and takes the candidate posted first;
//! - unexpected messages are kept both in arrival order (for wildcard receives) and in a bucket
//!   by (source, tag) (for exact receives, the common case).
//!
//! A bucket keeps posting/arrival order, so the first acceptable entry of a bucket is the
//! earliest one of its kind.
//!
//! A communicator whose hints rule out both wildcards puts its exact receives and its messages'
//! (source, tag) links in the process-wide [`ExactIndex`] instead (exact mode), whose buckets
//! grow with the queues; the arrival list stays here in both modes.

use super::exact::{ExactIndex, ExactKey};
use super::unexpected::{hash_link, unex_link, UnexMsg};
use crate::list::List;
use crate::pml::request::{queue_link, Request, Source, TagSel};
use crate::pool::Pool;
use crate::wire::Envelope;

/// Buckets per set (a power of two).
pub const BUCKETS: usize = 64;

#[inline]
fn bucket(a: u32, b: u32) -> usize {
    (a.wrapping_mul(0x9e37_79b1) ^ b.wrapping_mul(0x85eb_ca6b)).rotate_left(7) as usize
        & (BUCKETS - 1)
}

/// Which bucket set and bucket a receive selector lives in.
#[derive(Clone, Copy)]
enum Slot {
    Exact(usize),
    AnySource(usize),
    AnyTag(usize),
    Any,
}

fn slot(src: Source, tag: TagSel) -> Slot {
    match (src, tag) {
        (Source::Rank(s), TagSel::Tag(t)) => Slot::Exact(bucket(s, t as u32)),
        (Source::Any, TagSel::Tag(t)) => Slot::AnySource(bucket(u32::MAX, t as u32)),
        (Source::Rank(s), TagSel::Any) => Slot::AnyTag(bucket(s, u32::MAX)),
        (Source::Any, TagSel::Any) => Slot::Any,
    }
}

/// Posted receives of one communicator.
pub(crate) struct PostedQueue {
    exact: [List; BUCKETS],
    any_source: [List; BUCKETS],
    any_tag: [List; BUCKETS],
    any: List,
    next_post: u64,
    len: u32,
    /// Receives posted per set (exact, any source, any tag): most programs never use the
    /// wildcard sets, and an arrival skips the empty ones.
    count: [u32; 3],
    /// In exact mode: the communicator, whose receives are in the [`ExactIndex`].
    pub(super) index: Option<ExactKey>,
}

impl Default for PostedQueue {
    fn default() -> PostedQueue {
        PostedQueue {
            exact: core::array::from_fn(|_| List::default()),
            any_source: core::array::from_fn(|_| List::default()),
            any_tag: core::array::from_fn(|_| List::default()),
            any: List::default(),
            next_post: 0,
            len: 0,
            count: [0; 3],
            index: None,
        }
    }
}

impl PostedQueue {
    fn counter(&mut self, s: Slot) -> Option<&mut u32> {
        match s {
            Slot::Exact(_) => Some(&mut self.count[0]),
            Slot::AnySource(_) => Some(&mut self.count[1]),
            Slot::AnyTag(_) => Some(&mut self.count[2]),
            Slot::Any => None,
        }
    }

    fn list(&mut self, s: Slot) -> &mut List {
        match s {
            Slot::Exact(b) => &mut self.exact[b],
            Slot::AnySource(b) => &mut self.any_source[b],
            Slot::AnyTag(b) => &mut self.any_tag[b],
            Slot::Any => &mut self.any,
        }
    }

    /// Whether no receive is posted.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Receives posted now.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Posts receive slot `idx` (its selector is set, its posting number is set here).
    #[inline]
    pub fn push(&mut self, reqs: &mut Pool<Request>, idx: u32, ix: &mut ExactIndex) {
        let post = self.next_post;
        self.next_post += 1;
        let Some(rr) = reqs.at_mut(idx).and_then(Request::recv_mut) else {
            return;
        };
        rr.post = post;
        let s = slot(rr.src, rr.tag);
        self.len += 1;
        if let Some(c) = self.counter(s) {
            *c += 1;
        }
        match (self.index, s) {
            (Some(k), Slot::Exact(_)) => {
                ix.push_posted(reqs, k, idx);
            }
            // The library's own traffic may use MPI_ANY_SOURCE on any communicator: such a
            // receive stays in its set here, ordered against the indexed ones by posting number.
            _ => self.list(s).push_back(reqs, idx, queue_link),
        }
    }

    /// Removes receive slot `idx` (e.g. cancelled).
    pub fn remove(&mut self, reqs: &Pool<Request>, idx: u32, ix: &mut ExactIndex) {
        let Some(rr) = reqs.at(idx).and_then(Request::recv) else {
            return;
        };
        if !reqs.at(idx).is_some_and(|r| r.queue.is_linked()) {
            return;
        }
        let s = slot(rr.src, rr.tag);
        match (self.index, s) {
            (Some(k), Slot::Exact(_)) => {
                ix.remove_posted(reqs, k, idx);
            }
            _ => self.list(s).remove(reqs, idx, queue_link),
        }
        self.len -= 1;
        if let Some(c) = self.counter(s) {
            *c -= 1;
        }
    }

    /// Takes the earliest-posted receive that accepts `env`.
    #[inline(always)]
    pub fn take_match(
        &mut self,
        reqs: &Pool<Request>,
        env: &Envelope,
        ix: &mut ExactIndex,
    ) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        if self.count[0] == self.len {
            // Only exact receives posted (the common case): one bucket to look in.
            let i = match self.index {
                Some(k) => ix.take_posted(reqs, k, env)?,
                None => {
                    let e = bucket(env.src as u32, env.tag as u32);
                    let accepts = |r: &Request| r.recv().is_some_and(|rr| rr.accepts(env));
                    let i = self.exact[e].find(reqs, queue_link, accepts)?;
                    self.exact[e].remove(reqs, i, queue_link);
                    i
                }
            };
            self.len -= 1;
            self.count[0] -= 1;
            return Some(i);
        }
        let (s, i) = self.best_match(reqs, env, ix)?;
        match (self.index, s) {
            (Some(k), Slot::Exact(_)) => {
                ix.remove_posted(reqs, k, i);
            }
            _ => self.list(s).remove(reqs, i, queue_link),
        }
        self.len -= 1;
        if let Some(c) = self.counter(s) {
            *c -= 1;
        }
        Some(i)
    }

    /// The receive [`PostedQueue::take_match`] would take, left posted.
    pub fn find_match(&self, reqs: &Pool<Request>, env: &Envelope, ix: &ExactIndex) -> Option<u32> {
        self.best_match(reqs, env, ix).map(|(_, i)| i)
    }

    /// Moves the exact receives into `ix` as communicator `k`'s (exact mode).
    pub fn enter_exact(&mut self, reqs: &Pool<Request>, ix: &mut ExactIndex, k: ExactKey) {
        if self.index.is_some() {
            return;
        }
        for list in self.exact.iter_mut() {
            while let Some(i) = list.pop_front(reqs, queue_link) {
                ix.push_posted(reqs, k, i);
            }
        }
        self.index = Some(k);
    }

    /// Moves the exact receives back from `ix` (the hints no longer rule out wildcards).
    pub fn leave_exact(&mut self, reqs: &Pool<Request>, ix: &mut ExactIndex) {
        let Some(k) = self.index.take() else { return };
        if self.count[0] == 0 {
            return;
        }
        let buckets = &mut self.exact;
        ix.drain_posted(reqs, k, |i| {
            if let Some(rr) = reqs.at(i).and_then(Request::recv) {
                if let Slot::Exact(b) = slot(rr.src, rr.tag) {
                    buckets[b].push_back(reqs, i, queue_link);
                }
            }
        });
    }

    fn best_match(
        &self,
        reqs: &Pool<Request>,
        env: &Envelope,
        ix: &ExactIndex,
    ) -> Option<(Slot, u32)> {
        if self.len == 0 {
            return None;
        }
        let src = env.src as u32;
        let accepts = |r: &Request| r.recv().is_some_and(|rr| rr.accepts(env));
        let mut best: Option<(u64, Slot, u32)> = None;
        let mut offer = |s: Slot, i: u32| {
            let post = reqs
                .at(i)
                .and_then(Request::recv)
                .map_or(u64::MAX, |rr| rr.post);
            if best.is_none_or(|(p, _, _)| post < p) {
                best = Some((post, s, i));
            }
        };
        let consider = |s: Slot, list: &List, offer: &mut dyn FnMut(Slot, u32)| {
            if list.is_empty() {
                return;
            }
            if let Some(i) = list.find(reqs, queue_link, accepts) {
                offer(s, i);
            }
        };
        if self.count[0] > 0 {
            let e = bucket(src, env.tag as u32);
            match self.index {
                Some(k) => {
                    if let Some(i) = ix.find_posted(reqs, k, env) {
                        offer(Slot::Exact(e), i);
                    }
                }
                None => consider(Slot::Exact(e), &self.exact[e], &mut offer),
            }
        }
        if self.count[1] > 0 {
            let a = bucket(u32::MAX, env.tag as u32);
            consider(Slot::AnySource(a), &self.any_source[a], &mut offer);
        }
        if env.tag >= 0 {
            if self.count[2] > 0 {
                let t = bucket(src, u32::MAX);
                consider(Slot::AnyTag(t), &self.any_tag[t], &mut offer);
            }
            consider(Slot::Any, &self.any, &mut offer);
        }
        best.map(|(_, s, i)| (s, i))
    }
}

/// Unexpected messages of one communicator.
#[derive(Default)]
pub(crate) struct UnexQueue {
    arrival: List,
    buckets: BucketLists,
    /// Messages queued now.
    len: u32,
    /// Most messages queued at once since the communicator was made (for the tools interface).
    high_water: u32,
    /// In exact mode: the communicator, whose messages' (source, tag) links are in the
    /// [`ExactIndex`] instead of `buckets`.
    pub(super) index: Option<ExactKey>,
}

struct BucketLists([List; BUCKETS]);

impl Default for BucketLists {
    fn default() -> BucketLists {
        BucketLists(core::array::from_fn(|_| List::default()))
    }
}

impl UnexQueue {
    /// Appends message slot `idx`.
    pub fn push(&mut self, msgs: &Pool<UnexMsg>, idx: u32, ix: &mut ExactIndex) {
        let Some(m) = msgs.at(idx) else { return };
        let b = bucket(m.env.src as u32, m.env.tag as u32);
        self.arrival.push_back(msgs, idx, unex_link);
        match self.index {
            Some(k) => ix.push_unex(msgs, k, idx),
            None => self.buckets.0[b].push_back(msgs, idx, hash_link),
        }
        self.len += 1;
        self.high_water = self.high_water.max(self.len);
    }

    /// Messages queued now, and the most queued at once so far.
    pub fn lengths(&self) -> (u32, u32) {
        (self.len, self.high_water)
    }

    /// Removes message slot `idx`.
    pub fn remove(&mut self, msgs: &Pool<UnexMsg>, idx: u32, ix: &mut ExactIndex) {
        let Some(m) = msgs.at(idx) else { return };
        let b = bucket(m.env.src as u32, m.env.tag as u32);
        self.arrival.remove(msgs, idx, unex_link);
        match self.index {
            Some(k) => ix.remove_unex(msgs, k, idx),
            None => self.buckets.0[b].remove(msgs, idx, hash_link),
        }
        self.len -= 1;
    }

    /// The first-arrived unclaimed message that `src`/`tag` accept.
    #[inline(always)]
    pub fn find(
        &self,
        msgs: &Pool<UnexMsg>,
        src: Source,
        tag: TagSel,
        ix: &ExactIndex,
    ) -> Option<u32> {
        // Every message is on the arrival list too; nearly every posting finds it empty.
        if self.arrival.is_empty() {
            return None;
        }
        self.find_queued(msgs, src, tag, ix)
    }

    #[inline(never)]
    fn find_queued(
        &self,
        msgs: &Pool<UnexMsg>,
        src: Source,
        tag: TagSel,
        ix: &ExactIndex,
    ) -> Option<u32> {
        let ok = |m: &UnexMsg| !m.claimed && src.accepts(m.env.src) && tag.accepts(m.env.tag);
        match (src, tag, self.index) {
            (Source::Rank(s), TagSel::Tag(t), Some(k)) => ix.find_unex(msgs, k, s, t),
            (Source::Rank(s), TagSel::Tag(t), None) => {
                self.buckets.0[bucket(s, t as u32)].find(msgs, hash_link, ok)
            }
            // A wildcard (which the hints of an exact-mode communicator rule out) scans.
            _ => self.arrival.find(msgs, unex_link, ok),
        }
    }

    /// Removes and returns the first message.
    pub fn pop(&mut self, msgs: &Pool<UnexMsg>, ix: &mut ExactIndex) -> Option<u32> {
        let i = self.arrival.head()?;
        self.remove(msgs, i, ix);
        Some(i)
    }

    /// Moves the messages' (source, tag) links into `ix` as communicator `k`'s, in arrival order.
    pub fn enter_exact(&mut self, msgs: &Pool<UnexMsg>, ix: &mut ExactIndex, k: ExactKey) {
        if self.index.is_some() {
            return;
        }
        let mut cur = self.arrival.head();
        while let Some(i) = cur {
            cur = List::next(msgs, i, unex_link);
            if let Some(m) = msgs.at(i) {
                self.buckets.0[bucket(m.env.src as u32, m.env.tag as u32)]
                    .remove(msgs, i, hash_link);
                ix.push_unex(msgs, k, i);
            }
        }
        self.index = Some(k);
    }

    /// Moves the messages' (source, tag) links back from `ix`, in arrival order.
    pub fn leave_exact(&mut self, msgs: &Pool<UnexMsg>, ix: &mut ExactIndex) {
        let Some(k) = self.index.take() else { return };
        let mut cur = self.arrival.head();
        while let Some(i) = cur {
            cur = List::next(msgs, i, unex_link);
            if let Some(m) = msgs.at(i) {
                ix.remove_unex(msgs, k, i);
                self.buckets.0[bucket(m.env.src as u32, m.env.tag as u32)]
                    .push_back(msgs, i, hash_link);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_spread_tags_of_one_source() {
        let mut used = [0u32; BUCKETS];
        for tag in 0..1000u32 {
            used[bucket(3, tag)] += 1;
        }
        let max = *used.iter().max().unwrap();
        assert!(
            max <= 3 * 1000 / BUCKETS as u32,
            "worst bucket holds {max} of 1000"
        );
    }
}
