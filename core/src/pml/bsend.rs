//! The buffer attached for buffered sends (`MPI_Buffer_attach`), and the sends using it.
//!
//! A buffered send copies its message into the attached buffer and sends it from there; the part
//! it took is free again once that send has completed. Users size the buffer as the standard
//! tells them — each message's packed size plus `MPI_BSEND_OVERHEAD` ([`OVERHEAD`]) — so a
//! message fits exactly when its size plus `OVERHEAD` does, with no rounding, and space is taken
//! first-fit from the buffer's start (a buffer of exactly the sum of its messages' needs always
//! takes them all).
//!
//! The overhead is what the standard reserves for bookkeeping, and the bookkeeping lives there:
//! each part starts with a [`Record`] — the offset of the next part, the message's length, the
//! request sending it — and the records form a list in offset order. So sends in flight are
//! limited by the buffer alone, and the engine holds nothing per send but the send's request.
//!
//! A part, at offset `at`:
//!
//! ```text
//! at            at + HEADER        at + HEADER + len              at + len + OVERHEAD
//! | Record      | packed message    | (rest of the overhead)      |
//! ```
//!
//! The records are in user memory, which a faulty program could overwrite while it is attached,
//! so a record is read only through [`Record::parse`] (as a peer's bytes are through
//! `wire::Header::parse`): its check word must match its fields and its part must lie inside the
//! buffer after the part before it. A bad record is an `MPI_ERR_BUFFER` error, never a read or
//! write outside the buffer, and the walk over the list always ends (offsets only grow).

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use super::request::ReqId;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::pool::Key;

/// Bytes a buffered send takes in the attached buffer beyond its packed message: MPICH's
/// `MPI_BSEND_OVERHEAD` (96 on LP64 targets, 56 on ILP32), which programs size buffers with.
pub const OVERHEAD: usize = if cfg!(target_pointer_width = "64") {
    96
} else {
    56
};

/// A buffered send's record, at the start of its part of the attached buffer (native byte
/// order; read and written unaligned, since parts start wherever the one before ended).
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
#[repr(C)]
pub struct Record {
    /// Offset of the next part, or [`END`].
    next: u64,
    /// Packed bytes of the message, which follow the record.
    len: u64,
    /// The request sending them ([`Key::to_u64`]).
    req: u64,
    /// [`Record::check_word`] of the fields above.
    check: u64,
}

/// Bytes of a record.
pub const HEADER: usize = core::mem::size_of::<Record>();
const _: () = assert!(HEADER == 32 && HEADER <= OVERHEAD);

/// `next` of the last record.
const END: u64 = u64::MAX;

/// A record read and checked: where its part is and what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Part {
    at: usize,
    len: usize,
    next: Option<usize>,
    req: ReqId,
}

impl Part {
    /// Where the part ends (the next part may start there).
    fn end(&self) -> usize {
        self.at + self.len + OVERHEAD
    }
}

fn overwritten() -> Error {
    Error::new(
        ErrorClass::Buffer,
        Reason::BadArgument {
            what: "the attached buffer was written to while buffered sends used it",
        },
    )
}

fn no_room() -> Error {
    Error::new(
        ErrorClass::Buffer,
        Reason::BadArgument {
            what: "the attached buffer has no room for this buffered send (MPI_Buffer_attach a \
                   larger one)",
        },
    )
}

impl Record {
    /// A value that a record's fields determine and a stray write is unlikely to keep.
    fn check_word(next: u64, len: u64, req: u64) -> u64 {
        const SALT: u64 = 0x6273_656e_6472_6563;
        (next ^ SALT).rotate_left(13) ^ len.rotate_left(29) ^ req.rotate_left(47)
    }

    fn new(next: Option<usize>, len: usize, req: ReqId) -> Record {
        let next = next.map_or(END, |n| n as u64);
        let (len, req) = (len as u64, req.0.to_u64());
        Record {
            next,
            len,
            req,
            check: Record::check_word(next, len, req),
        }
    }

    /// The record of the part at `at` in a buffer of `size` bytes whose previous part ends at
    /// `from`: checked, or `None`.
    fn parse(self, at: usize, from: usize, size: usize) -> Option<Part> {
        if self.check != Record::check_word(self.next, self.len, self.req) || at < from {
            return None;
        }
        let len = usize::try_from(self.len).ok()?;
        let end = at.checked_add(len)?.checked_add(OVERHEAD)?;
        if end > size {
            return None;
        }
        let next = match self.next {
            END => None,
            n => Some(usize::try_from(n).ok()?),
        };
        Some(Part {
            at,
            len,
            next,
            req: ReqId(Key::from_u64(self.req)),
        })
    }
}

/// Where a reserved message goes, from [`BsendBuffer::reserve`] to [`BsendBuffer::commit`]
/// (nothing else may use the buffer in between).
#[derive(Clone, Copy, Debug)]
pub struct Place {
    at: usize,
    len: usize,
    /// The part before it, which will point at it (`None`: it becomes the first).
    prev: Option<Part>,
    /// The part after it.
    next: Option<usize>,
}

/// The attached buffer.
struct Attached {
    base: *mut u8,
    size: usize,
    /// Offset of the first part in use.
    head: Option<usize>,
    /// Parts in use.
    live: usize,
}

// SAFETY: the buffer is the user's loan until MPI_Buffer_detach, used only under the engine's
// lock (whichever thread holds it), as a convertor's loan is.
unsafe impl Send for Attached {}

impl Attached {
    /// Reads and checks the record at `at`, whose part must start at or after `from`.
    fn part(&self, at: usize, from: usize) -> Result<Part> {
        if at.checked_add(HEADER).is_none_or(|end| end > self.size) {
            return Err(overwritten());
        }
        let mut bytes = [0u8; HEADER];
        // SAFETY: `at + HEADER <= size` (checked above), and `attach`'s contract makes the
        // buffer valid for reads of its `size` bytes; nothing else writes a record's bytes while
        // the engine runs (sends read only their messages' bytes).
        unsafe { core::ptr::copy_nonoverlapping(self.base.add(at), bytes.as_mut_ptr(), HEADER) };
        Record::read_from_bytes(&bytes)
            .ok()
            .and_then(|r| r.parse(at, from, self.size))
            .ok_or_else(overwritten)
    }

    /// Writes the record of a part (whose place was found in bounds by a walk).
    fn write(&mut self, at: usize, record: Record) {
        debug_assert!(at + OVERHEAD <= self.size);
        let bytes = record.as_bytes();
        // SAFETY: `at` is the start of a part found by `reserve` or read by `part`, so
        // `at + OVERHEAD <= size` and HEADER <= OVERHEAD; `attach`'s contract makes the buffer
        // valid for writes, and a record's bytes are never part of a message a send reads.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(at), HEADER) };
    }
}

/// The buffer of buffered sends: none, or the one attached, with the sends using it.
pub struct BsendBuffer {
    attached: Option<Attached>,
}

impl Default for BsendBuffer {
    fn default() -> BsendBuffer {
        BsendBuffer::new()
    }
}

impl BsendBuffer {
    /// No buffer attached.
    pub const fn new() -> BsendBuffer {
        BsendBuffer { attached: None }
    }

    /// Attaches `size` bytes at `base` (`MPI_Buffer_attach`).
    ///
    /// # Safety
    /// The bytes stay valid for reads and writes, and untouched by anyone else, until
    /// [`BsendBuffer::detach`] gives them back.
    pub unsafe fn attach(&mut self, base: *mut u8, size: usize) -> Result<()> {
        if self.attached.is_some() {
            return Err(Error::new(
                ErrorClass::Buffer,
                Reason::BadArgument {
                    what: "a buffer is already attached",
                },
            ));
        }
        self.attached = Some(Attached {
            base,
            size,
            head: None,
            live: 0,
        });
        Ok(())
    }

    /// Whether a buffer is attached.
    pub fn is_attached(&self) -> bool {
        self.attached.is_some()
    }

    /// Buffered sends still using the buffer (as last reclaimed).
    pub fn in_flight(&self) -> usize {
        self.attached.as_ref().map_or(0, |a| a.live)
    }

    fn attached(&self) -> Result<&Attached> {
        self.attached.as_ref().ok_or(Error::new(
            ErrorClass::Buffer,
            Reason::BadArgument {
                what: "buffered send without an attached buffer (call MPI_Buffer_attach)",
            },
        ))
    }

    /// Frees the parts whose sends have completed. `done(req)` says whether request `req` has
    /// completed, freeing it if so (`None`: there is no such request — a record overwritten).
    pub fn reclaim(&mut self, mut done: impl FnMut(ReqId) -> Option<bool>) -> Result<()> {
        let Some(a) = self.attached.as_mut() else {
            return Ok(());
        };
        let (mut prev, mut from, mut cur) = (None::<Part>, 0, a.head);
        while let Some(at) = cur {
            let part = a.part(at, from)?;
            cur = part.next;
            if done(part.req).ok_or_else(overwritten)? {
                a.live = a.live.saturating_sub(1);
                match prev.as_mut() {
                    Some(p) => {
                        p.next = part.next;
                        a.write(p.at, Record::new(p.next, p.len, p.req));
                    }
                    None => a.head = part.next,
                }
            } else {
                from = part.end();
                prev = Some(part);
            }
        }
        Ok(())
    }

    /// The first place, from the buffer's start, with room for a message of `len` packed bytes
    /// and its overhead.
    pub fn reserve(&self, len: usize) -> Result<Place> {
        let a = self.attached()?;
        let need = len.checked_add(OVERHEAD).ok_or_else(no_room)?;
        let (mut prev, mut from, mut cur) = (None, 0, a.head);
        while let Some(at) = cur {
            let part = a.part(at, from)?;
            if at - from >= need {
                break;
            }
            from = part.end();
            cur = part.next;
            prev = Some(part);
        }
        // After the last part, the room is what is left of the buffer.
        let room = cur.unwrap_or(a.size) - from;
        if room < need {
            return Err(no_room());
        }
        Ok(Place {
            at: from,
            len,
            prev,
            next: cur,
        })
    }

    /// Where the message of `place` goes: `place.len` bytes, inside the attached buffer.
    pub fn data(&self, place: &Place) -> *mut u8 {
        match &self.attached {
            // SAFETY: `reserve` found `at + len + OVERHEAD <= size`, so `at + HEADER` is inside
            // the buffer (or at its end, for an empty message and no further overhead).
            Some(a) => unsafe { a.base.add(place.at + HEADER) },
            None => core::ptr::NonNull::dangling().as_ptr(),
        }
    }

    /// Records that `req` sends the message of `place` (reserved just before, with nothing
    /// else done to the buffer since).
    pub fn commit(&mut self, place: Place, req: ReqId) {
        let Some(a) = self.attached.as_mut() else {
            return;
        };
        a.write(place.at, Record::new(place.next, place.len, req));
        match place.prev {
            Some(p) => a.write(p.at, Record::new(Some(place.at), p.len, p.req)),
            None => a.head = Some(place.at),
        }
        a.live += 1;
    }

    /// The requests of the sends still using the buffer, in offset order (stops at a bad
    /// record).
    #[cfg(test)]
    fn requests(&self) -> impl Iterator<Item = ReqId> + '_ {
        let a = self.attached.as_ref();
        let mut cur = a.and_then(|a| a.head);
        let mut from = 0;
        core::iter::from_fn(move || {
            let part = a?.part(cur?, from).ok()?;
            from = part.end();
            cur = part.next;
            Some(part.req)
        })
    }

    /// Lets go of the buffer (`MPI_Buffer_detach`, once its sends are done): its address and
    /// size, or `None` if none was attached.
    pub fn detach(&mut self) -> Option<(*mut u8, usize)> {
        self.attached.take().map(|a| (a.base, a.size))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::collections::BTreeSet;
    use std::vec;
    use std::vec::Vec;

    fn req(i: u32) -> ReqId {
        ReqId(Key { index: i, gen: 7 })
    }

    /// A buffer of `size` bytes attached to a fresh `BsendBuffer` (the vector must outlive it).
    fn attached(mem: &mut Vec<u8>) -> BsendBuffer {
        let mut b = BsendBuffer::new();
        // SAFETY: the tests keep `mem` alive and untouched while `b` uses it.
        unsafe { b.attach(mem.as_mut_ptr(), mem.len()).unwrap() };
        b
    }

    /// Places a message of `len` bytes filled with `fill`, sent by `req(id)`; its offset.
    fn put(b: &mut BsendBuffer, len: usize, id: u32, fill: u8) -> Result<usize> {
        let place = b.reserve(len)?;
        let at = place.at;
        // SAFETY: `data` points at `len` bytes of the attached buffer.
        unsafe { core::ptr::write_bytes(b.data(&place), fill, len) };
        b.commit(place, req(id));
        Ok(at)
    }

    #[test]
    fn messages_sized_exactly_with_the_overhead_all_fit_and_one_byte_more_does_not() {
        let lens = [0usize, 8, 4000, 12, 1, 700];
        let mut mem = vec![0u8; lens.iter().map(|l| l + OVERHEAD).sum()];
        let mut b = attached(&mut mem);
        for (i, &l) in lens.iter().enumerate() {
            put(&mut b, l, i as u32, i as u8).unwrap();
        }
        assert_eq!(b.in_flight(), lens.len());
        let e = b.reserve(0).unwrap_err();
        assert_eq!(e.class, ErrorClass::Buffer);
        // The messages are where the records say, unharmed by the records after them.
        let mut at = 0;
        for (i, &l) in lens.iter().enumerate() {
            assert!(mem[at + HEADER..at + HEADER + l]
                .iter()
                .all(|&x| x == i as u8));
            at += l + OVERHEAD;
        }
    }

    #[test]
    fn completed_sends_free_their_parts_and_first_fit_reuses_the_holes() {
        let mut mem = vec![0u8; 3 * (100 + OVERHEAD)];
        let mut b = attached(&mut mem);
        let a0 = put(&mut b, 100, 0, 1).unwrap();
        let a1 = put(&mut b, 100, 1, 2).unwrap();
        let a2 = put(&mut b, 100, 2, 3).unwrap();
        assert_eq!((a0, a1, a2), (0, 100 + OVERHEAD, 2 * (100 + OVERHEAD)));
        assert!(b.reserve(1).is_err());
        // The middle send completes: its part is the only hole.
        b.reclaim(|r| Some(r == req(1))).unwrap();
        assert_eq!(b.in_flight(), 2);
        assert!(b.reserve(101).is_err(), "a hole of 100 bytes takes no more");
        assert_eq!(put(&mut b, 60, 3, 4).unwrap(), a1);
        assert!(
            b.reserve(0).is_err(),
            "the 40 bytes left of the hole hold no overhead"
        );
        // The first one completes: the next message goes to the start.
        b.reclaim(|r| Some(r == req(0))).unwrap();
        assert_eq!(put(&mut b, 10, 5, 6).unwrap(), 0);
        let live: BTreeSet<u32> = b.requests().map(|r| r.0.index).collect();
        assert!(live.contains(&5) && live.contains(&3) && live.contains(&2));
        assert!(!live.contains(&0) && !live.contains(&1));
        // Everything completes: the whole buffer is free again.
        b.reclaim(|_| Some(true)).unwrap();
        assert_eq!(b.in_flight(), 0);
        assert_eq!(
            put(&mut b, 3 * (100 + OVERHEAD) - OVERHEAD, 9, 0).unwrap(),
            0
        );
    }

    #[test]
    fn thousands_of_sends_in_flight_are_limited_by_the_buffer_alone() {
        let n = 5000;
        let mut mem = vec![0u8; n * (16 + OVERHEAD)];
        let mut b = attached(&mut mem);
        for i in 0..n {
            put(&mut b, 16, i as u32, i as u8).unwrap();
        }
        assert_eq!(b.in_flight(), n);
        assert_eq!(b.requests().count(), n);
        assert!(b.reserve(0).is_err());
        // Every other one completes, in any order of offsets: the list stays in offset order.
        b.reclaim(|r| Some(r.0.index % 2 == 1)).unwrap();
        assert_eq!(b.in_flight(), n / 2);
        let left: Vec<u32> = b.requests().map(|r| r.0.index).collect();
        assert_eq!(left, (0..n as u32).step_by(2).collect::<Vec<_>>());
        b.reclaim(|_| Some(true)).unwrap();
        assert_eq!(b.detach(), Some((mem.as_mut_ptr(), mem.len())));
    }

    #[test]
    fn an_overwritten_record_is_an_error_and_nothing_is_written_outside_the_buffer() {
        // Scribble over each byte of the second record in turn, with values that keep or break
        // its bounds: every walk either accepts an unchanged record or fails cleanly.
        for byte in 0..HEADER {
            for value in [0u8, 0xff, 0x01, 0x80] {
                let size = 2 * (50 + OVERHEAD);
                let mut mem = vec![0u8; size + 64];
                let (inside, guard) = mem.split_at_mut(size);
                guard.fill(0xA5);
                let base = inside.as_mut_ptr();
                let mut b = BsendBuffer::new();
                // SAFETY: `inside` outlives `b` and is touched only through `base` below, to
                // play a faulty program, which is what the test is about.
                unsafe { b.attach(base, size).unwrap() };
                let mut place = b.reserve(50).unwrap();
                b.commit(place, req(0));
                place = b.reserve(50).unwrap();
                let at = place.at;
                b.commit(place, req(1));
                // SAFETY: `at + byte` is inside the record, inside the buffer.
                let changed = unsafe {
                    let p = base.add(at + byte);
                    let before = *p;
                    *p = value;
                    before != value
                };
                let walked = b.reclaim(|r| Some(r == req(1)));
                assert_eq!(walked.is_err(), changed, "byte {byte} = {value:#x}");
                if changed {
                    assert_eq!(walked.unwrap_err().class, ErrorClass::Buffer);
                    assert!(b.reserve(1).is_err());
                }
                assert!(mem[size..].iter().all(|&x| x == 0xA5));
            }
        }
    }

    #[test]
    fn a_request_that_is_not_there_means_an_overwritten_record() {
        let mut mem = vec![0u8; 100 + OVERHEAD];
        let mut b = attached(&mut mem);
        put(&mut b, 10, 3, 0).unwrap();
        assert_eq!(b.reclaim(|_| None).unwrap_err().class, ErrorClass::Buffer);
    }

    #[test]
    fn no_buffer_attached_is_an_error_and_a_second_attach_too() {
        let mut b = BsendBuffer::new();
        assert_eq!(b.reserve(0).unwrap_err().class, ErrorClass::Buffer);
        assert_eq!(b.detach(), None);
        let mut mem = vec![0u8; 10];
        let mut b = attached(&mut mem);
        assert!(b.reserve(0).is_err(), "10 bytes hold no overhead");
        // SAFETY: as in `attached`.
        let again = unsafe { b.attach(mem.as_mut_ptr(), 10) };
        assert_eq!(again.unwrap_err().class, ErrorClass::Buffer);
    }
}
