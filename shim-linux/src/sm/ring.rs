//! A single-producer single-consumer ring of variable-size records in memory shared by two
//! processes.
//!
//! The cross-process, lock-free sibling of the core's `self` BTL queue. One ring carries the
//! fragments of one sender to one receiver; it lives in the receiver's segment.
//!
//! ```text
//! control block (CTL_BYTES):  +0    tail: AtomicU64   bytes ever published; written by the producer
//!                             +128  head: AtomicU64   bytes ever released;  written by the consumer
//! data area (cap bytes, a power of two), records back to back, 8-aligned:
//!     [header word: u64 = VALID (bit 63) | tag (bits 32..40) | len (bits 0..32)][payload, padded to 8]
//!     [WRAP word: u64 = VALID | u32::MAX] — the rest up to the end of the data area is unused; the
//!                                   next record starts at offset 0 (records are never split)
//! ```
//!
//! `tail` and `head` are free-running byte counters (they never wrap in practice: 2^64 bytes), so
//! `tail - head` is the bytes in use and `counter % cap` the position.
//!
//! The consumer finds new records by their header word alone — one cache line, which for a small
//! message also holds its payload — not by reading the producer's `tail`: a header is published
//! when its VALID bit is set. Where the next header will go, the producer has always zeroed the
//! word first (it reserves those 8 bytes with each record), so the consumer never mistakes stale
//! payload of an earlier lap for a header. The producer re-reads `head` only when its cached copy
//! says "full".
//!
//! Memory ordering: the producer writes the payload and zeroes the next header word, then stores
//! the header word (or, when the record wraps to the start, the wrap marker) with Release; the
//! consumer loads the header word with Acquire before reading the record. The consumer is done
//! with a record (the sink returned) before it stores `head` with Release; the producer loads
//! `head` with Acquire before it reuses that space.
//!
//! Everything read from shared memory is checked before it is used as a length or position: a
//! corrupt (or hostile) peer can make this ring stop, never make this process read or write
//! outside the data area.

use core::fmt;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU64, Ordering};

use stormpi_core::btl::{AmTag, Delivery};

/// Bytes of a ring's control block: `tail` and `head`, each on its own 128-byte stretch (two
/// cache lines, so the adjacent-line prefetcher does not make them share either).
pub(crate) const CTL_BYTES: usize = 256;
const TAIL_OFF: usize = 0;
const HEAD_OFF: usize = 128;
/// Bytes of a record header.
pub(crate) const REC_HDR: usize = 8;
/// Bit of a header word saying it is published.
const VALID: u64 = 1 << 63;
/// The header word of a wrap marker.
const WRAP: u64 = VALID | u32::MAX as u64;
/// Most records one poll delivers from one ring, so a busy sender cannot hold up the others.
const POLL_BATCH: usize = 256;

/// `n` rounded up to a multiple of 8.
pub(crate) const fn round8(n: usize) -> usize {
    (n + 7) & !7
}

/// Bytes a record of `len` payload bytes occupies in the ring.
pub(crate) const fn record_bytes(len: usize) -> usize {
    REC_HDR + round8(len)
}

/// Smallest data area for records of up to `max_len` bytes: any record must fit even when it
/// has to skip the end of the ring (worst case, almost one record's worth), with the next header
/// word after it.
pub(crate) const fn min_ring_bytes(max_len: usize) -> usize {
    (2 * record_bytes(max_len) + REC_HDR).next_power_of_two()
}

/// Something impossible read from a ring's shared memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Corrupt {
    /// The consumer's `head` is unaligned, ahead of `tail`, or more than the ring behind it.
    Head {
        /// The head read.
        head: u64,
        /// The producer's tail.
        tail: u64,
    },
    /// A record header with an impossible length or stray bits.
    Record {
        /// Stream offset of the record.
        at: u64,
        /// Its header word.
        word: u64,
    },
}

impl fmt::Display for Corrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Corrupt::Head { head, tail } => {
                write!(f, "impossible head {head} (tail {tail})")
            }
            Corrupt::Record { at, word } => {
                write!(f, "impossible record header {word:#018x} at offset {at}")
            }
        }
    }
}

/// Where one ring lives: its control block and data area.
#[derive(Clone, Copy)]
pub(crate) struct RingMem {
    ctl: NonNull<u8>,
    data: NonNull<u8>,
    cap: usize,
}

impl RingMem {
    /// A ring over `ctl` (its control block) and `data` (its data area of `cap` bytes).
    ///
    /// # Safety
    /// `ctl` must be valid for reads and writes of [`CTL_BYTES`] bytes, `data` of `cap` bytes, both
    /// 8-aligned, for as long as any [`Producer`] or [`Consumer`] made from this value is used;
    /// `cap` must be a power of two and at least 16. Other parties may touch that memory only as
    /// the one other end of this ring (one producer, one consumer) — or arbitrarily, if they are
    /// corrupt, which the ring detects as far as it matters to its own bounds.
    pub(crate) unsafe fn new(ctl: *mut u8, data: *mut u8, cap: usize) -> RingMem {
        debug_assert!(cap.is_power_of_two() && cap >= 16);
        debug_assert!((ctl as usize | data as usize) & 7 == 0);
        // SAFETY: the caller's contract: both point to valid memory, so neither is null.
        let (ctl, data) = unsafe { (NonNull::new_unchecked(ctl), NonNull::new_unchecked(data)) };
        RingMem { ctl, data, cap }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: the control block is valid, 8-aligned and shared only through atomics (new's
        // contract); TAIL_OFF + 8 <= CTL_BYTES.
        unsafe { AtomicU64::from_ptr(self.ctl.as_ptr().add(TAIL_OFF).cast()) }
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: as in `tail`; HEAD_OFF + 8 <= CTL_BYTES.
        unsafe { AtomicU64::from_ptr(self.ctl.as_ptr().add(HEAD_OFF).cast()) }
    }

    /// The 8-byte word at data offset `pos`, which callers keep 8-aligned and below `cap`.
    #[inline]
    fn word(&self, pos: usize) -> &AtomicU64 {
        debug_assert!(pos & 7 == 0 && pos < self.cap);
        // Masking rather than checking: this runs a few times per message, and the mask makes
        // the bound hold whatever `pos` is (cap is a power of two).
        let pos = pos & (self.cap - 1) & !7;
        // SAFETY: pos < cap (masked) and 8-aligned (data is 8-aligned, pos masked), so inside the
        // data area. Header words are accessed only atomically while they are headers.
        unsafe { AtomicU64::from_ptr(self.data.as_ptr().add(pos).cast()) }
    }
}

/// The sending end of a ring.
pub(crate) struct Producer {
    mem: RingMem,
    /// Our tail: the only writer of the shared one.
    tail: u64,
    /// Last value of the consumer's head we read.
    head_cache: u64,
    /// Where the record being written goes (data offset) and the bytes skipped at the end of the
    /// ring before it.
    pending: Option<(usize, usize)>,
    /// Length of the pending reservation.
    pending_len: usize,
    /// Set when the consumer's head was found impossible: the ring is refused from then on.
    broken: Option<Corrupt>,
}

// SAFETY: a Producer is an exclusive handle on the producing end of the ring; the memory it
// points into is kept alive by its owner (RingMem::new's contract), not by the thread.
unsafe impl Send for Producer {}

impl Producer {
    /// The producing end of `mem`, continuing from whatever the ring holds.
    pub(crate) fn new(mem: RingMem) -> Result<Producer, Corrupt> {
        let tail = mem.tail().load(Ordering::Relaxed);
        let head = mem.head().load(Ordering::Acquire);
        if !plausible(head, tail, mem.cap) {
            return Err(Corrupt::Head { head, tail });
        }
        Ok(Producer {
            mem,
            tail,
            head_cache: head,
            pending: None,
            pending_len: 0,
            broken: None,
        })
    }

    /// Space for a record of `len` bytes, straight in the ring, or `None` while the ring is
    /// full (or broken). The record is sent by [`Producer::commit`].
    #[inline]
    pub(crate) fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        let cap = self.mem.cap;
        let rec = record_bytes(len);
        let pos = self.tail as usize & (cap - 1);
        let at_end = cap - pos;
        let (start, skip) = if rec <= at_end { (pos, 0) } else { (0, at_end) };
        // The record, and the next header word, which commit zeroes.
        let need = (skip + rec + REC_HDR) as u64;
        if self.broken.is_some() || need > cap as u64 {
            return None;
        }
        if self.tail - self.head_cache + need > cap as u64 {
            // Looks full: see how far the consumer really is.
            let head = self.mem.head().load(Ordering::Acquire);
            if !plausible(head, self.tail, cap) {
                self.broken = Some(Corrupt::Head {
                    head,
                    tail: self.tail,
                });
                return None;
            }
            self.head_cache = head;
            if self.tail - head + need > cap as u64 {
                return None;
            }
        }
        self.pending = Some((start, skip));
        self.pending_len = len;
        // SAFETY: start + REC_HDR + len <= start + rec <= cap (rec fits at `start` by the choice
        // above), so the slice is inside the data area; the consumer does not touch bytes between
        // head and head + cap - (tail - head) until we publish them, and `&mut self` keeps this the
        // only slice we hand out.
        Some(unsafe {
            core::slice::from_raw_parts_mut(self.mem.data.as_ptr().add(start + REC_HDR), len)
        })
    }

    /// Publishes the first `len` bytes of the space just reserved as a record tagged `tag`.
    #[inline]
    pub(crate) fn commit(&mut self, tag: AmTag, len: usize) {
        let Some((start, skip)) = self.pending.take() else {
            debug_assert!(false, "sm: commit without reserve");
            return;
        };
        debug_assert!(len <= self.pending_len, "sm: commit longer than reserved");
        let len = len.min(self.pending_len);
        let cap = self.mem.cap;
        let rec = record_bytes(len);
        // Where the next header goes: zero it before publishing this record, so the consumer
        // reading there later finds "nothing yet" rather than stale bytes of an earlier lap.
        // (It cannot be this record's own header or wrap marker: reserve left room for it.)
        self.mem
            .word((start + rec) & (cap - 1))
            .store(0, Ordering::Relaxed);
        let header = VALID | (tag.0 as u64) << 32 | len as u64;
        // Release: the payload and the zeroed next word happen-before the consumer's reads.
        if skip > 0 {
            self.mem.word(start).store(header, Ordering::Relaxed);
            let pos = self.tail as usize & (cap - 1);
            self.mem.word(pos).store(WRAP, Ordering::Release);
        } else {
            self.mem.word(start).store(header, Ordering::Release);
        }
        self.tail += (skip + rec) as u64;
        // Informational: the consumer does not read it.
        self.mem.tail().store(self.tail, Ordering::Relaxed);
    }

    /// What made this ring unusable, if something did: the consumer's head was found impossible,
    /// and the ring is refused for good.
    pub(crate) fn fault(&self) -> Option<Corrupt> {
        self.broken
    }
}

/// Why [`Consumer::poll`] stopped reading a ring for good.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    /// Records delivered by this call before the corruption was found.
    pub delivered: usize,
    /// What was wrong.
    pub corrupt: Corrupt,
}

/// The receiving end of a ring.
pub(crate) struct Consumer {
    mem: RingMem,
    /// Our head: the only writer of the shared one.
    head: u64,
    /// Longest payload a record may have.
    max_len: usize,
    broken: bool,
}

// SAFETY: as for Producer: an exclusive handle on the consuming end; the memory is kept alive by
// the owner.
unsafe impl Send for Consumer {}

impl Consumer {
    /// The consuming end of `mem`, accepting records of up to `max_len` bytes, continuing from
    /// whatever the ring holds.
    pub(crate) fn new(mem: RingMem, max_len: usize) -> Consumer {
        let head = mem.head().load(Ordering::Relaxed);
        Consumer {
            mem,
            head,
            max_len,
            // Records start 8-aligned: a head that is not was not written by a consumer.
            broken: head & 7 != 0,
        }
    }

    /// Hands each record published so far to `deliver`, in order, until the ring is empty,
    /// `deliver` answers [`Delivery::Retry`] (that record stays for the next call) or
    /// [`Delivery::Satisfied`] (the rest stays). Returns the
    /// number of records delivered, or the corruption that made the ring stop for good.
    #[inline]
    pub(crate) fn poll(
        &mut self,
        mut deliver: impl FnMut(AmTag, &[u8]) -> Delivery,
    ) -> Result<usize, Fault> {
        if self.broken {
            return Ok(0);
        }
        let cap = self.mem.cap;
        let mut n = 0;
        while n < POLL_BATCH {
            let pos = self.head as usize & (cap - 1);
            // Acquire: a published header's record (and the zeroed word after it) is fully
            // written before we read it.
            let word = self.mem.word(pos).load(Ordering::Acquire);
            if word & VALID == 0 {
                break;
            }
            if word == WRAP {
                self.head += (cap - pos) as u64;
                self.mem.head().store(self.head, Ordering::Release);
                continue;
            }
            let len = (word & 0xffff_ffff) as usize;
            let rec = record_bytes(len);
            if (word & !VALID) >> 40 != 0 || len > self.max_len || rec > cap - pos {
                return Err(self.fail(
                    n,
                    Corrupt::Record {
                        at: self.head,
                        word,
                    },
                ));
            }
            let tag = AmTag((word >> 32) as u8);
            // SAFETY: pos + REC_HDR + len <= pos + rec <= cap (checked above): inside the data
            // area. The producer published these bytes (Acquire on the header) and does not
            // write them again before we release them by advancing head below.
            let frag = unsafe {
                core::slice::from_raw_parts(self.mem.data.as_ptr().add(pos + REC_HDR), len)
            };
            let d = deliver(tag, frag);
            if d == Delivery::Retry {
                break;
            }
            self.head += rec as u64;
            // Release: our reads of the record happen-before the producer reuses its space.
            self.mem.head().store(self.head, Ordering::Release);
            n += 1;
            if d == Delivery::Satisfied {
                break;
            }
        }
        Ok(n)
    }

    fn fail(&mut self, delivered: usize, corrupt: Corrupt) -> Fault {
        self.broken = true;
        Fault { delivered, corrupt }
    }

    /// Whether corruption made this ring stop for good.
    #[cfg(test)]
    pub(crate) fn is_broken(&self) -> bool {
        self.broken
    }
}

/// Whether a `tail` can follow `head` in a ring of `cap` bytes.
fn plausible(head: u64, tail: u64, cap: usize) -> bool {
    (head | tail) & 7 == 0 && tail >= head && tail - head <= cap as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};
    use std::vec::Vec;

    /// A ring in ordinary heap memory, with the shared layout.
    struct HeapRing {
        ctl: Vec<u64>,
        data: Vec<u64>,
    }

    impl HeapRing {
        fn new(cap: usize) -> HeapRing {
            HeapRing {
                ctl: vec![0; CTL_BYTES / 8],
                data: vec![0; cap / 8],
            }
        }

        fn mem(&mut self) -> RingMem {
            // SAFETY: both buffers are 8-aligned, of the right sizes, and outlive every use in
            // these tests (the rings are dropped before the buffers).
            unsafe {
                RingMem::new(
                    self.ctl.as_mut_ptr().cast(),
                    self.data.as_mut_ptr().cast(),
                    self.data.len() * 8,
                )
            }
        }
    }

    /// xorshift64*: seeded, reproducible sizes and contents.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    fn fill(seq: u64, buf: &mut [u8]) {
        let mut r = Rng(seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        for chunk in buf.chunks_mut(8) {
            let w = r.next().to_ne_bytes();
            chunk.copy_from_slice(&w[..chunk.len()]);
        }
    }

    fn send(p: &mut Producer, tag: u8, data: &[u8]) -> bool {
        match p.reserve(data.len()) {
            Some(space) => {
                space.copy_from_slice(data);
                p.commit(AmTag(tag), data.len());
                true
            }
            None => false,
        }
    }

    #[test]
    fn two_threads_100k_records_with_wraparound_in_order() {
        const N: u64 = 100_000;
        const MAX: usize = 3000;
        let mut ring = HeapRing::new(16 << 10);
        let mem = ring.mem();
        let deadline = Instant::now() + Duration::from_secs(60);
        std::thread::scope(|s| {
            let mut p = Producer::new(mem).unwrap();
            s.spawn(move || {
                let mut sizes = Rng(7);
                let mut buf = vec![0u8; MAX];
                for seq in 0..N {
                    let len = (sizes.next() % (MAX as u64 + 1)) as usize;
                    fill(seq, &mut buf[..len]);
                    while !send(&mut p, (seq % 251) as u8, &buf[..len]) {
                        assert!(Instant::now() < deadline, "producer stuck at {seq}");
                        std::thread::yield_now();
                    }
                }
            });
            let mut c = Consumer::new(mem, MAX);
            let mut sizes = Rng(7);
            let mut want = vec![0u8; MAX];
            let mut seq = 0u64;
            while seq < N {
                assert!(Instant::now() < deadline, "consumer stuck at {seq}");
                let got = c
                    .poll(|tag, frag| {
                        let len = (sizes.next() % (MAX as u64 + 1)) as usize;
                        fill(seq, &mut want[..len]);
                        assert_eq!(tag.0, (seq % 251) as u8, "tag of record {seq}");
                        assert_eq!(frag, &want[..len], "content of record {seq}");
                        seq += 1;
                        Delivery::Consumed
                    })
                    .unwrap();
                if got == 0 {
                    std::thread::yield_now();
                }
            }
            // Wrapped many times over.
            assert!(c.head > 100 * (16 << 10));
        });
    }

    #[test]
    fn full_ring_pushes_back_until_consumed() {
        let mut ring = HeapRing::new(1024);
        let mut p = Producer::new(ring.mem()).unwrap();
        let mut c = Consumer::new(ring.mem(), 512);
        let mut sent = 0;
        while send(&mut p, 1, &[sent as u8; 100]) {
            sent += 1;
            assert!(sent < 100, "never pushed back");
        }
        // 112 bytes per record, and 8 more for the next header word: 9 fit in 1024.
        assert_eq!(sent, 9);
        assert!(!send(&mut p, 1, &[0; 100]), "still full");
        let mut got = 0;
        assert_eq!(
            c.poll(|_, frag| {
                assert_eq!(frag, &[got as u8; 100]);
                got += 1;
                if got <= 2 {
                    Delivery::Consumed
                } else {
                    Delivery::Retry
                }
            }),
            Ok(2)
        );
        // Two records' space came back (the third was refused): enough for one more record,
        // which has to skip the 16 bytes left at the end of the ring.
        assert!(send(&mut p, 1, &[9; 100]));
        assert!(!send(&mut p, 1, &[0; 100]));
        let mut all = Vec::new();
        c.poll(|_, frag| {
            all.push(frag[0]);
            Delivery::Consumed
        })
        .unwrap();
        assert_eq!(all, (2..=9).collect::<Vec<u8>>());
        assert!(send(&mut p, 1, &[0; 100]));
    }

    #[test]
    fn retry_leaves_the_record_in_place() {
        let mut ring = HeapRing::new(1024);
        let mut p = Producer::new(ring.mem()).unwrap();
        let mut c = Consumer::new(ring.mem(), 512);
        assert!(send(&mut p, 5, b"first"));
        assert!(send(&mut p, 6, b"second"));
        let mut seen = Vec::new();
        for _ in 0..3 {
            let n = c
                .poll(|tag, frag| {
                    seen.push((tag.0, frag.to_vec()));
                    Delivery::Retry
                })
                .unwrap();
            assert_eq!(n, 0);
        }
        assert_eq!(seen, vec![(5, b"first".to_vec()); 3]);
        seen.clear();
        let n = c
            .poll(|tag, frag| {
                seen.push((tag.0, frag.to_vec()));
                Delivery::Consumed
            })
            .unwrap();
        assert_eq!(n, 2);
        assert_eq!(seen, vec![(5, b"first".to_vec()), (6, b"second".to_vec())]);
        assert_eq!(c.poll(|_, _| Delivery::Consumed), Ok(0));
    }

    #[test]
    fn zero_length_and_exactly_fitting_records() {
        let mut ring = HeapRing::new(min_ring_bytes(24));
        let mut p = Producer::new(ring.mem()).unwrap();
        let mut c = Consumer::new(ring.mem(), 24);
        let mut got = Vec::new();
        for round in 0..20u8 {
            // 8 + 24 = 32 bytes, then an empty record, then one that must wrap or wait.
            assert!(send(&mut p, 1, &[round; 24]));
            assert!(send(&mut p, 2, &[]));
            c.poll(|tag, frag| {
                got.push((tag.0, frag.len()));
                Delivery::Consumed
            })
            .unwrap();
        }
        assert_eq!(got.len(), 40);
        assert!(got.chunks(2).all(|w| w == [(1, 24), (2, 0)]));
    }

    #[test]
    fn corrupt_length_is_refused_for_good() {
        let mut ring = HeapRing::new(1024);
        let mut p = Producer::new(ring.mem()).unwrap();
        assert!(send(&mut p, 1, b"good"));
        assert!(send(&mut p, 1, b"bad"));
        assert!(send(&mut p, 1, b"after"));
        // The second record's length now claims more than a fragment may have.
        let second = record_bytes(4) / 8;
        ring.data[second] = VALID | 100_000;
        let mut c = Consumer::new(ring.mem(), 512);
        let mut got = Vec::new();
        let r = c.poll(|_, frag| {
            got.push(frag.to_vec());
            Delivery::Consumed
        });
        assert_eq!(
            r,
            Err(Fault {
                delivered: 1,
                corrupt: Corrupt::Record {
                    at: record_bytes(4) as u64,
                    word: VALID | 100_000
                }
            })
        );
        assert_eq!(got, vec![b"good".to_vec()]);
        assert!(c.is_broken());
        assert_eq!(c.poll(|_, _| panic!("delivered from a broken ring")), Ok(0));
    }

    #[test]
    fn records_running_past_the_end_or_with_stray_bits_are_refused() {
        // A length within max_len that would cross the end of the data area.
        let mut ring = HeapRing::new(256);
        ring.ctl[HEAD_OFF / 8] = 128;
        ring.data[128 / 8] = VALID | 200;
        let mut c = Consumer::new(ring.mem(), 1024);
        assert!(matches!(
            c.poll(|_, _| Delivery::Consumed),
            Err(Fault {
                corrupt: Corrupt::Record { .. },
                ..
            })
        ));
        // A length within the ring but above the largest fragment.
        let mut ring = HeapRing::new(1024);
        let mut p = Producer::new(ring.mem()).unwrap();
        assert!(send(&mut p, 1, &[0; 100]));
        let mut c = Consumer::new(ring.mem(), 64);
        assert_eq!(
            c.poll(|_, _| Delivery::Consumed),
            Err(Fault {
                delivered: 0,
                corrupt: Corrupt::Record {
                    at: 0,
                    word: VALID | 1 << 32 | 100
                }
            })
        );
        // Stray bits above the tag.
        let mut ring = HeapRing::new(256);
        ring.data[0] = VALID | 1 << 45;
        let mut c = Consumer::new(ring.mem(), 1024);
        assert!(c.poll(|_, _| Delivery::Consumed).is_err());
        // A word without the valid bit is "nothing yet", whatever else it holds.
        let mut ring = HeapRing::new(256);
        ring.data[0] = 1 << 45 | 12345;
        let mut c = Consumer::new(ring.mem(), 1024);
        assert_eq!(
            c.poll(|_, _| panic!("delivered an unpublished word")),
            Ok(0)
        );
    }

    #[test]
    fn stale_payload_of_an_earlier_lap_is_never_taken_for_a_header() {
        // Payloads made of words that look like published headers, in records whose sizes make
        // later headers land in the middle of earlier payloads: the zeroed next word keeps the
        // consumer from reading any of them as a record.
        let mut ring = HeapRing::new(min_ring_bytes(200));
        let mut p = Producer::new(ring.mem()).unwrap();
        let mut c = Consumer::new(ring.mem(), 200);
        let lie = (VALID | 1 << 32 | 8).to_ne_bytes().repeat(25);
        let mut sizes = Rng(3);
        for round in 0..2000u32 {
            let len = 8 * (1 + (sizes.next() % 25) as usize);
            assert!(send(&mut p, 7, &lie[..len]), "round {round}");
            let mut got = Vec::new();
            c.poll(|tag, frag| {
                got.push((tag.0, frag.len()));
                Delivery::Consumed
            })
            .unwrap();
            assert_eq!(got, vec![(7, len)], "round {round}");
        }
    }

    #[test]
    fn impossible_counters_are_refused() {
        // A producer attaching to a ring whose head is ahead of its tail.
        let mut ring = HeapRing::new(256);
        ring.ctl[HEAD_OFF / 8] = 64;
        assert!(Producer::new(ring.mem()).is_err());
        // A consumer attaching to a ring whose head is not a record boundary reads nothing.
        let mut ring = HeapRing::new(256);
        ring.ctl[HEAD_OFF / 8] = 12;
        let mut c = Consumer::new(ring.mem(), 64);
        assert!(c.is_broken());
        assert_eq!(c.poll(|_, _| panic!("delivered from a broken ring")), Ok(0));
        // A head that jumps ahead of the tail later breaks the producer, which then refuses
        // (it reads the head once the ring looks full).
        let mut ring = HeapRing::new(64);
        let mut p = Producer::new(ring.mem()).unwrap();
        assert!(send(&mut p, 1, &[0; 16]));
        assert!(send(&mut p, 1, &[0; 16]));
        ring.ctl[HEAD_OFF / 8] = 4096;
        assert!(!send(&mut p, 1, &[0; 16]));
        assert_eq!(
            p.fault(),
            Some(Corrupt::Head {
                head: 4096,
                tail: 48
            })
        );
    }
}
