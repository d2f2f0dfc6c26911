//! Matching by exact envelope, for communicators that assert `mpi_assert_no_any_source` and
//! `mpi_assert_no_any_tag`.
//!
//! On such a communicator a receive (or probe) names one source and one tag, so it can only
//! take a message with that (source, tag), and the first one posted or arrived of that key is
//! the one MPI's ordering asks for. One process-wide hash table keyed by (communicator, source,
//! tag) holds the posted receives and the unexpected messages of every such communicator (the
//! communicator is its slot for a receive, its context id for a message: the two lists of a
//! bucket are apart, and each entry carries its own key for rehashing). It
//! doubles (through the memory account) whenever it holds more entries than buckets, so a match
//! looks at about one entry however deep the queues are; the per-communicator queues of
//! [`super::matching`] have 64 buckets per set, and a queue of depth `n` scans `n / 64`.
//!
//! A bucket is a list in posting (or arrival) order, and all entries of one key share a bucket,
//! so the first entry of a key in its bucket is its earliest. Doubling splits bucket `b` into
//! `b` and `b + old_len` by walking it in order, which keeps that order.

use super::unexpected::{hash_link, UnexMsg};
use crate::arena::{Arena, Sizer};
use crate::array::Array;
use crate::error::Result;
use crate::list::List;
use crate::pml::request::{queue_link, Request, Source, TagSel};
use crate::pool::Pool;
use crate::wire::Envelope;

/// Buckets carved at init (a power of two).
pub const INITIAL: usize = 256;
/// Most buckets (a power of two): past it the table stops growing and its chains lengthen.
pub const MAX: usize = 1 << 22;

/// Which communicator a queue in exact mode belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ExactKey {
    /// Its slot in the communicator table (what posted receives record).
    pub slot: u32,
    /// Its context id (what arriving messages carry).
    pub ctx: u16,
}

/// Posted receives and unexpected messages of one hash bucket.
#[derive(Default)]
pub(crate) struct Bucket {
    posted: List,
    unex: List,
}

/// The process-wide table.
pub(crate) struct ExactIndex {
    buckets: Array<Bucket>,
    /// Entries of both kinds.
    entries: u32,
    /// Length past which growing is not tried again (the account refused it once).
    stuck_at: usize,
}

#[inline]
fn mix(comm: u32, src: u32, tag: u32) -> u64 {
    // A multiply-xorshift of the packed key: consecutive tags (the usual halo and task
    // pattern) land in consecutive-looking but well spread buckets.
    let k = (u64::from(comm) << 48) ^ (u64::from(src) << 24) ^ u64::from(tag);
    let h = k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

impl ExactIndex {
    /// Arena bytes for the first buckets.
    pub fn size(sizer: &mut Sizer) {
        Array::<Bucket>::size(sizer, INITIAL, MAX);
    }

    /// An empty table carved from `arena`, growing through its memory account.
    pub fn new(arena: &mut Arena) -> Result<ExactIndex> {
        Ok(ExactIndex {
            buckets: Array::new(arena, INITIAL, MAX, |_| Bucket::default())?,
            entries: 0,
            stuck_at: MAX,
        })
    }

    #[inline]
    fn at(&self, comm: u32, src: u32, tag: u32) -> usize {
        (mix(comm, src, tag) as usize) & (self.buckets.len() - 1)
    }

    /// Buckets now.
    #[cfg(test)]
    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// Entries of both kinds now.
    #[cfg(test)]
    pub fn entries(&self) -> u32 {
        self.entries
    }

    /// Posts receive slot `idx` of communicator `k`; `false` (nothing done) unless it names
    /// one source and one tag.
    #[inline]
    pub fn push_posted(&mut self, reqs: &Pool<Request>, k: ExactKey, idx: u32) -> bool {
        let Some(rr) = reqs.at(idx).and_then(Request::recv) else {
            return false;
        };
        let (Source::Rank(s), TagSel::Tag(t)) = (rr.src, rr.tag) else {
            return false;
        };
        let b = self.at(k.slot, s, t as u32);
        self.buckets[b].posted.push_back(reqs, idx, queue_link);
        self.entries += 1;
        true
    }

    /// Removes posted receive slot `idx` (an exact one of communicator `k`); whether it was there.
    pub fn remove_posted(&mut self, reqs: &Pool<Request>, k: ExactKey, idx: u32) -> bool {
        let Some(rr) = reqs.at(idx).and_then(Request::recv) else {
            return false;
        };
        let (Source::Rank(s), TagSel::Tag(t)) = (rr.src, rr.tag) else {
            return false;
        };
        if !reqs.at(idx).is_some_and(|r| r.queue.is_linked()) {
            return false;
        }
        let b = self.at(k.slot, s, t as u32);
        self.buckets[b].posted.remove(reqs, idx, queue_link);
        self.entries -= 1;
        true
    }

    /// The earliest receive of communicator `k` posted for `env`, left posted.
    #[inline]
    pub fn find_posted(&self, reqs: &Pool<Request>, k: ExactKey, env: &Envelope) -> Option<u32> {
        let b = self.at(k.slot, env.src as u32, env.tag as u32);
        self.buckets[b].posted.find(reqs, queue_link, |r| {
            r.recv()
                .is_some_and(|rr| rr.comm.0 == k.slot && rr.accepts(env))
        })
    }

    /// Takes the earliest receive of communicator `k` posted for `env`.
    #[inline]
    pub fn take_posted(
        &mut self,
        reqs: &Pool<Request>,
        k: ExactKey,
        env: &Envelope,
    ) -> Option<u32> {
        let b = self.at(k.slot, env.src as u32, env.tag as u32);
        let i = self.buckets[b].posted.find(reqs, queue_link, |r| {
            r.recv()
                .is_some_and(|rr| rr.comm.0 == k.slot && rr.accepts(env))
        })?;
        self.buckets[b].posted.remove(reqs, i, queue_link);
        self.entries -= 1;
        Some(i)
    }

    /// Queues unexpected message slot `idx` of communicator `k`.
    pub fn push_unex(&mut self, msgs: &Pool<UnexMsg>, k: ExactKey, idx: u32) {
        let Some(m) = msgs.at(idx) else { return };
        let b = self.at(u32::from(k.ctx), m.env.src as u32, m.env.tag as u32);
        self.buckets[b].unex.push_back(msgs, idx, hash_link);
        self.entries += 1;
    }

    /// Removes unexpected message slot `idx` of communicator `k`.
    pub fn remove_unex(&mut self, msgs: &Pool<UnexMsg>, k: ExactKey, idx: u32) {
        let Some(m) = msgs.at(idx).filter(|m| m.hlink.is_linked()) else {
            return;
        };
        let b = self.at(u32::from(k.ctx), m.env.src as u32, m.env.tag as u32);
        self.buckets[b].unex.remove(msgs, idx, hash_link);
        self.entries -= 1;
    }

    /// The first-arrived unclaimed message of communicator `k` from `src` with `tag`.
    #[inline]
    pub fn find_unex(&self, msgs: &Pool<UnexMsg>, k: ExactKey, src: u32, tag: i32) -> Option<u32> {
        let b = self.at(u32::from(k.ctx), src, tag as u32);
        self.buckets[b].unex.find(msgs, hash_link, |m| {
            !m.claimed && m.env.ctx == k.ctx && m.env.src as u32 == src && m.env.tag == tag
        })
    }

    /// Moves every posted receive of communicator `k` out of the table, in posting order per
    /// (source, tag), handing each to `put` (a communicator leaving exact mode; rare, so a walk
    /// of the whole table is affordable).
    pub fn drain_posted(&mut self, reqs: &Pool<Request>, k: ExactKey, mut put: impl FnMut(u32)) {
        for b in 0..self.buckets.len() {
            let list = &mut self.buckets[b].posted;
            let mut cur = list.head();
            while let Some(i) = cur {
                cur = List::next(reqs, i, queue_link);
                if reqs
                    .at(i)
                    .and_then(Request::recv)
                    .is_some_and(|rr| rr.comm.0 == k.slot)
                {
                    list.remove(reqs, i, queue_link);
                    self.entries -= 1;
                    put(i);
                }
            }
        }
    }

    /// Doubles the table when it holds more entries than buckets (and the memory account
    /// allows: else it keeps its size, and matching stays correct, only slower).
    #[inline]
    pub fn grow_if_loaded(&mut self, reqs: &Pool<Request>, msgs: &Pool<UnexMsg>) {
        let n = self.buckets.len();
        if (self.entries as usize) > n && n < self.stuck_at {
            self.grow(reqs, msgs);
        }
    }

    #[cold]
    fn grow(&mut self, reqs: &Pool<Request>, msgs: &Pool<UnexMsg>) {
        let n = self.buckets.len();
        if self
            .buckets
            .grow_to(
                2 * n,
                |_| Bucket::default(),
                "exact-match buckets",
                "mpi_memory_max",
            )
            .is_err()
        {
            self.stuck_at = n;
            return;
        }
        // Every entry of old bucket `b` goes to `b` or `b + n`, taken in order.
        for b in 0..n {
            let mut posted = core::mem::take(&mut self.buckets[b].posted);
            while let Some(i) = posted.pop_front(reqs, queue_link) {
                let to = reqs
                    .at(i)
                    .and_then(Request::recv)
                    .and_then(|rr| match (rr.src, rr.tag) {
                        (Source::Rank(s), TagSel::Tag(t)) => Some(self.at(rr.comm.0, s, t as u32)),
                        _ => None,
                    })
                    .unwrap_or(b);
                self.buckets[to].posted.push_back(reqs, i, queue_link);
            }
            let mut unex = core::mem::take(&mut self.buckets[b].unex);
            while let Some(i) = unex.pop_front(msgs, hash_link) {
                let to = msgs.at(i).map_or(b, |m| {
                    self.at(u32::from(m.env.ctx), m.env.src as u32, m.env.tag as u32)
                });
                self.buckets[to].unex.push_back(msgs, i, hash_link);
            }
        }
    }
}
