//! Storage for messages that arrived before a receive wanted them.
//!
//! A record holds the envelope; its payload (an eager message, or the first chunk of a
//! rendezvous) is kept in the record when it is at most [`INLINE`] bytes, else copied into a
//! chain of fixed-size chunks. Records and chunks come from pools that grow within the engine's
//! memory bound up to their parameters' maxima; when either cannot grow, the arriving fragment
//! is refused with [`crate::btl::Delivery::Retry`] and stays in its transport — back-pressure,
//! not loss.

use crate::arena::{Arena, Sizer};
use crate::datatype::convertor::Unpacker;
use crate::datatype::table::TypeTable;
use crate::error::Result;
use crate::list::Link;
use crate::memory::Memory;
use crate::pool::{locate, Capacity, SEGMENTS};
use crate::rte::ProcId;
use crate::wire::Envelope;

const NIL: u32 = u32::MAX;

/// What kind of message a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnexKind {
    /// A whole eager message.
    Eager,
    /// The start of a rendezvous.
    Rndv {
        /// Total packed length.
        msg_len: u64,
        /// Sender's request id.
        sreq: u64,
        /// The sender's registration of the whole message, when it offers it for reading
        /// (an `RGET`; the receiver may still ask for fragments).
        read: Option<u64>,
    },
}

/// A message waiting for a receive (or for its turn, or for its communicator).
pub struct UnexMsg {
    /// Sending process.
    pub proc: ProcId,
    /// Envelope.
    pub env: Envelope,
    /// Kind.
    pub kind: UnexKind,
    /// Payload bytes held.
    pub len: usize,
    /// The payload.
    pub data: Held,
    /// Taken by a matched probe: invisible to receives and probes.
    pub claimed: bool,
    /// Link on a communicator's unexpected or out-of-order list, or the orphan list.
    pub link: Link,
    /// Link on the unexpected queue's bucket of its (source, tag).
    pub hlink: Link,
}

impl UnexMsg {
    /// Length of the whole message in packed bytes.
    pub fn msg_len(&self) -> u64 {
        match self.kind {
            UnexKind::Eager => self.len as u64,
            UnexKind::Rndv { msg_len, .. } => msg_len,
        }
    }
}

pub(crate) fn unex_link(m: &UnexMsg) -> &Link {
    &m.link
}

pub(crate) fn hash_link(m: &UnexMsg) -> &Link {
    &m.hlink
}

/// Payload bytes a record keeps in itself: a message this short takes no chunk (a flood of
/// small unexpected messages costs one record each).
pub const INLINE: usize = 16;

/// Where a held payload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// In the record itself (the first `len` bytes).
    Inline([u8; INLINE]),
    /// In a chain of chunks, from its first (`u32::MAX`: none).
    Chain(u32),
}

impl Held {
    /// No payload.
    pub const NONE: Held = Held::Chain(NIL);
}

/// One segment of chunk storage: the chunks' bytes and their chain links.
struct Segment {
    data: &'static mut [u8],
    next: &'static mut [u32],
}

impl Segment {
    fn empty() -> Segment {
        Segment {
            data: &mut [],
            next: &mut [],
        }
    }
}

/// A pool of fixed-size chunks for payloads, growing in segments like [`crate::pool::Pool`]
/// (segment 0 from the init region, each later one as large as all before it, granted by the
/// memory account), up to a maximum number of chunks.
pub struct Chunks {
    segs: [Segment; SEGMENTS + 1],
    /// Segments held, the first included.
    held: u32,
    /// Chunks in segment 0 (a power of two when the pool may grow: its log2 is `shift`).
    first: u32,
    shift: u32,
    chunk: usize,
    free: u32,
    nfree: u32,
    cap: u32,
    max: u32,
    account: Option<&'static Memory>,
}

impl Chunks {
    /// Arena bytes for the first segment of `count` chunks of `chunk` bytes.
    pub fn size(sizer: &mut Sizer, count: impl Into<Capacity>, chunk: usize) {
        let n = count.into().first() as usize;
        sizer.slice::<u8>(n * chunk).slice::<u32>(n);
    }

    /// `count` chunks of `chunk` bytes (a `u32` is a fixed count), the first segment carved
    /// from `arena`, growing through its memory account.
    pub fn new(arena: &mut Arena, count: impl Into<Capacity>, chunk: usize) -> Result<Chunks> {
        let count = count.into();
        let n = count.first();
        let mut segs: [Segment; SEGMENTS + 1] = core::array::from_fn(|_| Segment::empty());
        segs[0] = Segment {
            data: arena.slice(n as usize * chunk, |_| 0)?,
            next: arena.slice(n as usize, |i| {
                if i + 1 < n as usize {
                    i as u32 + 1
                } else {
                    NIL
                }
            })?,
        };
        let growable = n.is_power_of_two() && count.max > n;
        Ok(Chunks {
            segs,
            held: 1,
            first: n,
            shift: n.trailing_zeros(),
            chunk,
            free: if n > 0 { 0 } else { NIL },
            nfree: n,
            cap: n,
            max: if growable { count.max } else { n },
            account: arena.account().filter(|_| growable),
        })
    }

    /// Segment and offset of chunk `c`.
    fn locate(&self, c: u32) -> (usize, usize) {
        if c < self.first {
            (0, c as usize)
        } else {
            locate(c, self.shift)
        }
    }

    fn next_of(&self, c: u32) -> u32 {
        let (k, off) = self.locate(c);
        self.segs[k].next[off]
    }

    fn set_next(&mut self, c: u32, next: u32) {
        let (k, off) = self.locate(c);
        self.segs[k].next[off] = next;
    }

    fn bytes(&self, c: u32, n: usize) -> &[u8] {
        let (k, off) = self.locate(c);
        &self.segs[k].data[off * self.chunk..off * self.chunk + n]
    }

    /// Chunks needed for `len` bytes.
    fn needed(&self, len: usize) -> u32 {
        if len <= INLINE {
            0
        } else {
            len.div_ceil(self.chunk) as u32
        }
    }

    /// Adds a segment of free chunks; whether it could.
    #[cold]
    fn grow(&mut self) -> bool {
        let j = self.held as usize - 1;
        let Some(account) = self.account else {
            return false;
        };
        if self.cap >= self.max || j >= SEGMENTS {
            return false;
        }
        let n = (1u64 << (self.shift as usize + j)).min((self.max - self.cap) as u64) as usize;
        let mut sizer = Sizer::default();
        sizer
            .slice::<u8>(n.saturating_mul(self.chunk))
            .slice::<u32>(n);
        let Ok(region) = account.take(sizer.bytes()) else {
            return false;
        };
        let start = self.cap;
        let free = self.free;
        let mut arena = Arena::new(region);
        let (Ok(data), Ok(next)) = (
            arena.slice(n * self.chunk, |_| 0u8),
            arena.slice(n, |i| {
                if i + 1 < n {
                    start + i as u32 + 1
                } else {
                    free
                }
            }),
        ) else {
            // Sized for exactly this carving above: cannot happen.
            return false;
        };
        self.segs[j + 1] = Segment { data, next };
        self.held += 1;
        self.cap += n as u32;
        self.nfree += n as u32;
        self.free = start;
        true
    }

    /// Stores `bytes` (in the record when short, else in a chain of chunks), or `None` if there
    /// are not enough chunks and no more can be had.
    pub fn store(&mut self, bytes: &[u8]) -> Option<Held> {
        if bytes.len() <= INLINE {
            let mut inline = [0u8; INLINE];
            inline[..bytes.len()].copy_from_slice(bytes);
            return Some(Held::Inline(inline));
        }
        let need = self.needed(bytes.len());
        while need > self.nfree {
            if !self.grow() {
                return None;
            }
        }
        let mut head = NIL;
        let mut prev = NIL;
        for piece in bytes.chunks(self.chunk) {
            let c = self.free;
            self.free = self.next_of(c);
            self.nfree -= 1;
            let (k, off) = self.locate(c);
            let at = off * self.chunk;
            let seg = &mut self.segs[k];
            seg.data[at..at + piece.len()].copy_from_slice(piece);
            seg.next[off] = NIL;
            if prev == NIL {
                head = c;
            } else {
                self.set_next(prev, c);
            }
            prev = c;
        }
        Some(Held::Chain(head))
    }

    /// Unpacks the `len` bytes of `held` at message offset 0; returns bytes written.
    pub fn unpack(&self, types: &TypeTable, held: Held, len: usize, conv: &mut Unpacker) -> usize {
        let head = match held {
            Held::Inline(bytes) => return conv.unpack(types, 0, &bytes[..len.min(INLINE)]),
            Held::Chain(head) => head,
        };
        let mut c = head;
        let mut pos = 0;
        let mut written = 0;
        while pos < len && c != NIL {
            let n = self.chunk.min(len - pos);
            written += conv.unpack(types, pos, self.bytes(c, n));
            pos += n;
            c = self.next_of(c);
        }
        written
    }

    /// Returns the chunks of `held` to the pool.
    pub fn free(&mut self, held: Held) {
        let Held::Chain(mut c) = held else {
            return;
        };
        while c != NIL {
            let n = self.next_of(c);
            self.set_next(c, self.free);
            self.free = c;
            self.nfree += 1;
            c = n;
        }
    }

    /// Free chunks.
    pub fn available(&self) -> u32 {
        self.nfree
    }

    /// Chunks held (free or not).
    pub fn capacity(&self) -> u32 {
        self.cap
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;
    use std::vec::Vec;

    #[test]
    fn store_unpack_free_round_trip() {
        let mut c = Chunks::new(&mut Arena::new(leak(1 << 16)), 8, 16).unwrap();
        let msg: Vec<u8> = (0..100u8).collect();
        let head = c.store(&msg).unwrap();
        assert_eq!(c.available(), 1);
        assert!(c.store(&msg[..17]).is_none(), "needs two, one free");
        let mut out = [0u8; 100];
        // SAFETY: `out` outlives the unpacker and is untouched meanwhile.
        let mut u = unsafe { Unpacker::contiguous(out.as_mut_ptr(), 60) };
        let types = crate::datatype::table::tests::table();
        assert_eq!(
            c.unpack(&types, head, 100, &mut u),
            60,
            "clipped to capacity"
        );
        assert_eq!(&out[..60], &msg[..60]);
        assert_eq!(out[60], 0);
        c.free(head);
        assert_eq!(c.available(), 8);
        assert!(matches!(c.store(&[]), Some(Held::Inline(_))));
    }

    #[test]
    fn short_payloads_take_no_chunk() {
        let mut c = Chunks::new(&mut Arena::new(leak(1 << 16)), 2, 64).unwrap();
        let held: Vec<Held> = (0..1000u32)
            .map(|i| c.store(&u64::from(i).to_le_bytes()).unwrap())
            .collect();
        assert_eq!(c.available(), 2);
        let types = crate::datatype::table::tests::table();
        for (i, h) in held.iter().enumerate() {
            let mut out = [0u8; 8];
            // SAFETY: `out` outlives the unpacker.
            let mut u = unsafe { Unpacker::contiguous(out.as_mut_ptr(), 8) };
            assert_eq!(c.unpack(&types, *h, 8, &mut u), 8);
            assert_eq!(u64::from_le_bytes(out), i as u64);
            c.free(*h);
        }
        assert_eq!(c.available(), 2);
    }

    #[test]
    fn chunks_grow_across_segments_within_their_maximum() {
        let mut a = Arena::new(leak(1 << 16));
        a.set_account(crate::memory::tests::account(1 << 24));
        let mut c = Chunks::new(&mut a, Capacity::growing(2, 100), 32).unwrap();
        let msgs: Vec<Vec<u8>> = (0..20u8)
            .map(|i| {
                (0..100)
                    .map(|j| i.wrapping_mul(31).wrapping_add(j))
                    .collect()
            })
            .collect();
        // 4 chunks each: 80 in all, across segments of 2, 2, 4, 8, 16, 32, 36.
        let held: Vec<Held> = msgs.iter().map(|m| c.store(m).unwrap()).collect();
        assert_eq!(
            c.capacity(),
            100,
            "grown to the maximum, the last segment cut"
        );
        assert!(c.store(&msgs[0]).is_some(), "80 + 4 of 100");
        let types = crate::datatype::table::tests::table();
        for (m, h) in msgs.iter().zip(&held) {
            let mut out = [0u8; 100];
            // SAFETY: `out` outlives the unpacker.
            let mut u = unsafe { Unpacker::contiguous(out.as_mut_ptr(), 100) };
            assert_eq!(c.unpack(&types, *h, 100, &mut u), 100);
            assert_eq!(&out[..], &m[..]);
        }
        let more: Vec<Held> = (0..4).map(|_| c.store(&msgs[1]).unwrap()).collect();
        assert!(c.store(&msgs[2]).is_none(), "the maximum is reached");
        for h in held.into_iter().chain(more) {
            c.free(h);
        }
        assert_eq!(c.available(), 96);
    }
}
