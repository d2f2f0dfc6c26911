//! The outgoing side of one connection: a bounded queue of frames waiting for the socket.
//!
//! Frames are copied (`reserve`/`commit`: header and payload in a byte ring) or referenced
//! (`send_ref`: frame and PML header kept inline, payload read from user memory). Both kinds share
//! one FIFO of descriptors, so frames leave in the order they were queued. [`SendQueue::flush`]
//! gathers as many queued bytes as fit in one `sendmsg` — handshake, copied frames, inline
//! headers and user payload alike — so a zero-copy payload is never copied by us, and a burst of
//! small frames costs one system call. Nothing grows: the ring, the descriptor queue and the list
//! of completions are allocated when the connection is set up; a full queue is back-pressure
//! (`None`).

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::os::fd::RawFd;

use stormpi_core::btl::{DataRef, Token};

use super::sys;
use super::wire::{Frame, FRAME_LEN, HANDSHAKE_LEN, PAD_MAX};

/// Most PML header bytes a zero-copy frame keeps inline (the PML's fragment header is 24).
pub const INLINE_HEADER: usize = 56;
/// Bytes of a frame header, pad and inline PML header at most.
const HEAD_MAX: usize = FRAME_LEN + PAD_MAX as usize + INLINE_HEADER;
/// Payloads written from user memory from this size on are padded to the user buffer's offset
/// within a 64-byte line ([`Frame::pad`]).
const PAD_MIN_DATA: usize = 1024;

/// The pad that puts a payload at `data`, behind `head` bytes of frame and PML header, at
/// the same offset within a 64-byte line in the stream as in user memory: when the kernel
/// starts the write at a page boundary (it does whenever it can reuse its page), its copy from
/// user memory then runs at full speed, and so does the receiver's copy into an equally
/// aligned buffer (see `wire::Frame`).
fn pad_for(head: usize, data: *const u8, len: usize) -> u8 {
    if len < PAD_MIN_DATA {
        return 0;
    }
    ((data as usize).wrapping_sub(head) & PAD_MAX as usize) as u8
}
/// Most buffers one `sendmsg` gathers.
const MAX_IOV: usize = 64;

/// What a descriptor sends.
enum Item {
    /// Bytes `start..start + len` of the ring: one or more whole copied frames.
    Copy { start: usize, len: usize },
    /// Frame header, pad and PML header, then the user's payload.
    Ref {
        head: [u8; HEAD_MAX],
        head_len: u8,
        data: DataRef,
        token: Token,
    },
}

struct Desc {
    item: Item,
    /// Bytes of it already sent.
    sent: usize,
}

impl Desc {
    fn len(&self) -> usize {
        match &self.item {
            Item::Copy { len, .. } => *len,
            Item::Ref { head_len, data, .. } => *head_len as usize + data.len(),
        }
    }
}

/// A reservation waiting for its commit.
#[derive(Clone, Copy)]
struct Slot {
    pos: usize,
    len: usize,
    wraps: bool,
}

/// What a flush did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flushed {
    /// Bytes written.
    pub bytes: usize,
    /// The socket took less than was queued (it will report writable later).
    pub blocked: bool,
}

/// The bounded queue of frames towards one peer.
pub struct SendQueue {
    ring: sys::PageBuf,
    /// Oldest byte not yet sent.
    head: usize,
    /// End of the newest committed frame.
    tail: usize,
    /// When the data wrapped to the ring's start: the end of the data before the wrap.
    wrap_at: Option<usize>,
    reserved: Option<Slot>,
    descs: VecDeque<Desc>,
    max_descs: usize,
    /// Zero-copy frames queued plus those written but not reported yet.
    refs: usize,
    max_refs: usize,
    /// Zero-copy frames fully written, to be reported through the sink.
    done: Vec<Token>,
    /// The handshake, sent before any frame.
    prefix: [u8; HANDSHAKE_LEN],
    /// The handshake is known: nothing is written before it is (see [`SendQueue::set_prefix`]).
    prefix_ready: bool,
    prefix_sent: usize,
    /// The frame queued last is a zero-copy one.
    last_is_ref: bool,
}

impl SendQueue {
    /// A queue with a ring of `ring_bytes` (at least one largest frame) and room for `max_refs`
    /// zero-copy frames, that first sends `handshake`; with `None`, frames queue but nothing is
    /// written until [`SendQueue::set_prefix`] gives the handshake.
    pub fn new(
        ring_bytes: usize,
        max_refs: usize,
        handshake: Option<[u8; HANDSHAKE_LEN]>,
    ) -> Option<SendQueue> {
        let max_refs = max_refs.max(1);
        // Copied frames between two zero-copy ones merge into one descriptor, and so do the
        // frames on each side of a wrap: 2 per reference and 2 more bound the count.
        let max_descs = 2 * max_refs + 2;
        Some(SendQueue {
            ring: sys::PageBuf::new(ring_bytes)?,
            head: 0,
            tail: 0,
            wrap_at: None,
            reserved: None,
            descs: VecDeque::with_capacity(max_descs),
            max_descs,
            refs: 0,
            max_refs,
            done: Vec::with_capacity(max_refs),
            prefix: handshake.unwrap_or([0; HANDSHAKE_LEN]),
            prefix_ready: handshake.is_some(),
            prefix_sent: 0,
            last_is_ref: false,
        })
    }

    /// Gives the handshake of a queue made without one; it goes before every frame queued.
    pub fn set_prefix(&mut self, handshake: [u8; HANDSHAKE_LEN]) {
        debug_assert!(!self.prefix_ready, "tcp: the handshake is set once");
        self.prefix = handshake;
        self.prefix_ready = true;
    }

    /// Whether nothing waits to be written.
    pub fn is_empty(&self) -> bool {
        self.descs.is_empty() && self.prefix_sent == HANDSHAKE_LEN
    }

    /// Whether nothing waits to be written or reported.
    #[cfg(test)]
    pub fn is_idle(&self) -> bool {
        self.is_empty() && self.done.is_empty()
    }

    /// Whether written zero-copy frames wait to be reported.
    pub fn has_done(&self) -> bool {
        !self.done.is_empty()
    }

    /// Where a frame of `total` bytes (header included) would go, if it fits now.
    fn place(&mut self, total: usize) -> Option<Slot> {
        if self.wrap_at.is_none() && self.head == self.tail {
            // Empty: start over at the front, so the largest frame always fits an empty ring.
            self.head = 0;
            self.tail = 0;
        }
        let cap = self.ring.len();
        let slot = match self.wrap_at {
            None if self.tail + total <= cap => Slot {
                pos: self.tail,
                len: total,
                wraps: false,
            },
            None if total <= self.head => Slot {
                pos: 0,
                len: total,
                wraps: true,
            },
            Some(_) if self.tail + total <= self.head => Slot {
                pos: self.tail,
                len: total,
                wraps: false,
            },
            _ => return None,
        };
        // A frame right behind the last copied one extends its descriptor; else it needs one.
        let merges = matches!(
            self.descs.back(),
            Some(Desc { item: Item::Copy { start, len }, .. }) if start + len == slot.pos
        );
        if !merges && self.descs.len() >= self.max_descs {
            return None;
        }
        Some(slot)
    }

    /// Space for a fragment of `len` bytes, or `None` when the queue is full.
    pub fn reserve(&mut self, len: usize) -> Option<&mut [u8]> {
        let slot = self.place(FRAME_LEN + len)?;
        self.reserved = Some(slot);
        Some(&mut self.ring[slot.pos + FRAME_LEN..slot.pos + slot.len])
    }

    /// Queues the first `len` bytes of the space just reserved as a frame tagged `tag`.
    pub fn commit(&mut self, tag: u8, len: usize) {
        let Some(slot) = self.reserved.take() else {
            debug_assert!(false, "tcp: commit without a reservation");
            return;
        };
        debug_assert!(
            FRAME_LEN + len <= slot.len,
            "tcp: commit beyond the reservation"
        );
        let len = len.min(slot.len - FRAME_LEN);
        Frame {
            len: len as u32,
            tag,
            pad: 0,
        }
        .emit(&mut self.ring[slot.pos..slot.pos + FRAME_LEN]);
        self.queue_slot(slot, FRAME_LEN + len, 0);
    }

    /// Sends `header` (at most [`INLINE_HEADER`] bytes) and `data` as one frame tagged `tag`:
    /// when nothing else waits and `fd` (the connected socket) is given, written at once
    /// straight from `data`; whatever the socket does not take is copied into the ring and
    /// queued. False, with nothing sent, when the ring has no room for the frame.
    pub fn send_inline(
        &mut self,
        fd: Option<RawFd>,
        tag: u8,
        header: &[u8],
        data: &[u8],
    ) -> io::Result<bool> {
        if header.len() > INLINE_HEADER {
            return Ok(false);
        }
        let pad = pad_for(FRAME_LEN + header.len(), data.as_ptr(), data.len());
        let h = FRAME_LEN + pad as usize + header.len();
        let len = header.len() + data.len();
        // Room first: what the socket does not take must fit.
        let Some(slot) = self.place(h + data.len()) else {
            return Ok(false);
        };
        self.reserved = None;
        let mut head = [0u8; HEAD_MAX];
        Frame {
            len: len as u32,
            tag,
            pad,
        }
        .emit(&mut head);
        head[h - header.len()..h].copy_from_slice(header);
        let mut sent = 0;
        if let Some(fd) = fd.filter(|_| self.is_empty()) {
            match sys::send_vectored(fd, &[IoSlice::new(&head[..h]), IoSlice::new(data)]) {
                Ok(n) => sent = n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            if sent == h + data.len() {
                self.last_is_ref = false;
                return Ok(true);
            }
        }
        // The rest goes through the ring, at the place the whole frame would have had.
        let at = slot.pos;
        if sent < h {
            self.ring[at + sent..at + h].copy_from_slice(&head[sent..h]);
        }
        let from = sent.saturating_sub(h);
        self.ring[at + h + from..at + h + data.len()].copy_from_slice(&data[from..]);
        self.queue_slot(slot, h + data.len(), sent);
        Ok(true)
    }

    /// Queues the frame of `total` bytes written at `slot`, of which `sent` bytes have left
    /// already.
    fn queue_slot(&mut self, slot: Slot, total: usize, sent: usize) {
        if slot.wraps {
            self.wrap_at = Some(self.tail);
        }
        self.last_is_ref = false;
        self.tail = slot.pos + total;
        if let Some(Desc {
            item: Item::Copy { start, len },
            ..
        }) = self.descs.back_mut()
        {
            if *start + *len == slot.pos && sent == 0 {
                *len += total;
                return;
            }
        }
        self.descs.push_back(Desc {
            item: Item::Copy {
                start: slot.pos,
                len: total,
            },
            sent,
        });
    }

    /// Whether a zero-copy frame can be queued now.
    pub fn can_queue_ref(&self) -> bool {
        self.refs < self.max_refs && self.descs.len() < self.max_descs
    }

    /// Queues `header` (copied; at most [`INLINE_HEADER`] bytes) and `data` (referenced) as one
    /// frame tagged `tag`; false when the queue is full.
    pub fn queue_ref(&mut self, tag: u8, header: &[u8], data: DataRef, token: Token) -> bool {
        if !self.can_queue_ref() || header.len() > INLINE_HEADER {
            return false;
        }
        self.reserved = None;
        let pad = pad_for(FRAME_LEN + header.len(), data.as_ptr(), data.len());
        let h = FRAME_LEN + pad as usize + header.len();
        let mut head = [0u8; HEAD_MAX];
        Frame {
            len: (header.len() + data.len()) as u32,
            tag,
            pad,
        }
        .emit(&mut head);
        head[h - header.len()..h].copy_from_slice(header);
        self.descs.push_back(Desc {
            item: Item::Ref {
                head,
                head_len: h as u8,
                data,
                token,
            },
            sent: 0,
        });
        self.refs += 1;
        self.last_is_ref = true;
        true
    }

    /// Writes queued bytes to `fd` until everything is sent or the socket takes no more.
    pub fn flush(&mut self, fd: RawFd) -> io::Result<Flushed> {
        let mut out = Flushed {
            bytes: 0,
            blocked: false,
        };
        if !self.prefix_ready {
            return Ok(out);
        }
        loop {
            let (n, wanted) = {
                let mut iov = [IoSlice::new(&[]); MAX_IOV];
                let mut k = 0;
                let mut wanted = 0;
                if self.prefix_sent < HANDSHAKE_LEN {
                    iov[0] = IoSlice::new(&self.prefix[self.prefix_sent..]);
                    wanted += iov[0].len();
                    k = 1;
                }
                for d in &self.descs {
                    if k + 2 > MAX_IOV {
                        break;
                    }
                    match &d.item {
                        Item::Copy { start, len } => {
                            iov[k] = IoSlice::new(&self.ring[start + d.sent..start + len]);
                            wanted += iov[k].len();
                            k += 1;
                        }
                        Item::Ref {
                            head,
                            head_len,
                            data,
                            ..
                        } => {
                            let hl = *head_len as usize;
                            if d.sent < hl {
                                iov[k] = IoSlice::new(&head[d.sent..hl]);
                                wanted += iov[k].len();
                                k += 1;
                            }
                            let off = d.sent.saturating_sub(hl);
                            if off < data.len() {
                                // SAFETY: the PML lends `data` until this frame is reported
                                // complete (DataRef's contract); `off < len`.
                                let rest = unsafe {
                                    std::slice::from_raw_parts(
                                        data.as_ptr().add(off),
                                        data.len() - off,
                                    )
                                };
                                iov[k] = IoSlice::new(rest);
                                wanted += rest.len();
                                k += 1;
                            }
                        }
                    }
                }
                if k == 0 {
                    return Ok(out);
                }
                match sys::send_vectored(fd, &iov[..k]) {
                    Ok(n) => (n, wanted),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        out.blocked = true;
                        return Ok(out);
                    }
                    Err(e) => return Err(e),
                }
            };
            self.consume(n);
            out.bytes += n;
            if n < wanted {
                out.blocked = true;
                return Ok(out);
            }
        }
    }

    /// Accounts for `n` bytes written, retiring whole descriptors.
    fn consume(&mut self, mut n: usize) {
        let p = (HANDSHAKE_LEN - self.prefix_sent).min(n);
        self.prefix_sent += p;
        n -= p;
        while n > 0 {
            let Some(d) = self.descs.front_mut() else {
                debug_assert!(false, "tcp: more bytes written than queued");
                return;
            };
            let left = d.len() - d.sent;
            if n < left {
                d.sent += n;
                return;
            }
            n -= left;
            if let Some(d) = self.descs.pop_front() {
                self.retire(d.item);
            }
        }
    }

    fn retire(&mut self, item: Item) {
        match item {
            Item::Copy { start, len } => {
                self.head = start + len;
                if self.wrap_at == Some(self.head) {
                    self.head = 0;
                    self.wrap_at = None;
                }
                if self.wrap_at.is_none() && self.head == self.tail {
                    self.head = 0;
                    self.tail = 0;
                }
            }
            Item::Ref { token, .. } => self.done.push(token),
        }
    }

    /// The token of the zero-copy frame written last, if it was the last frame queued and is
    /// written now (so [`Btl::send_ref`](stormpi_core::btl::Btl::send_ref) can say `Done` and
    /// nobody reports it again).
    pub fn take_if_last_done(&mut self) -> Option<Token> {
        if !self.last_is_ref || !self.descs.is_empty() {
            return None;
        }
        let t = self.done.pop()?;
        self.refs -= 1;
        self.last_is_ref = false;
        Some(t)
    }

    /// Zero-copy frames written since the last call, oldest first.
    pub fn drain_done(&mut self) -> impl Iterator<Item = Token> + '_ {
        self.refs -= self.done.len();
        self.done.drain(..)
    }

    /// Gives up: every zero-copy frame, written (`true`) or not (`false`), and nothing queued
    /// any more.
    pub fn abandon(&mut self) -> Vec<(Token, bool)> {
        let mut out: Vec<(Token, bool)> = self.done.drain(..).map(|t| (t, true)).collect();
        for d in self.descs.drain(..) {
            if let Item::Ref { token, .. } = d.item {
                out.push((token, false));
            }
        }
        self.refs = 0;
        self.last_is_ref = false;
        self.head = 0;
        self.tail = 0;
        self.wrap_at = None;
        self.reserved = None;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    const HS: [u8; HANDSHAKE_LEN] = [0x5a; HANDSHAKE_LEN];

    fn put(q: &mut SendQueue, tag: u8, data: &[u8]) -> bool {
        match q.reserve(data.len()) {
            Some(s) => {
                s.copy_from_slice(data);
                q.commit(tag, data.len());
                true
            }
            None => false,
        }
    }

    fn frame(tag: u8, data: &[u8]) -> Vec<u8> {
        let mut v = Frame {
            len: data.len() as u32,
            tag,
            pad: 0,
        }
        .to_bytes()
        .to_vec();
        v.extend_from_slice(data);
        v
    }

    /// The frame of `header` and `data` sent from user memory: padded as `pad_for` says.
    fn pframe(tag: u8, header: &[u8], data: &[u8]) -> Vec<u8> {
        let pad = pad_for(FRAME_LEN + header.len(), data.as_ptr(), data.len());
        let mut v = Frame {
            len: (header.len() + data.len()) as u32,
            tag,
            pad,
        }
        .to_bytes()
        .to_vec();
        v.extend(std::iter::repeat_n(0, pad as usize));
        v.extend_from_slice(header);
        v.extend_from_slice(data);
        v
    }

    fn read_all(r: &mut UnixStream, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        r.read_exact(&mut v).unwrap();
        v
    }

    /// A socket pair whose sending side takes little before it pushes back.
    fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        sys::set_buffer(a.as_raw_fd(), libc::SO_SNDBUF, 4096).unwrap();
        (a, b)
    }

    /// Frames queued before the handshake is known wait for it, then follow it.
    #[test]
    fn nothing_leaves_before_the_handshake() {
        let (a, mut b) = pair();
        let mut q = SendQueue::new(1024, 4, None).unwrap();
        assert!(put(&mut q, 1, b"early"));
        let f = q.flush(a.as_raw_fd()).unwrap();
        assert_eq!(f.bytes, 0);
        assert!(!q.is_empty());
        q.set_prefix(HS);
        let mut want = HS.to_vec();
        want.extend(frame(1, b"early"));
        assert_eq!(q.flush(a.as_raw_fd()).unwrap().bytes, want.len());
        assert_eq!(read_all(&mut b, want.len()), want);
    }

    #[test]
    fn handshake_then_frames_in_order_in_one_send() {
        let (a, mut b) = pair();
        let mut q = SendQueue::new(1024, 4, Some(HS)).unwrap();
        assert!(!q.is_empty());
        assert!(put(&mut q, 1, b"one"));
        let user = b"zero-copy payload".to_vec();
        // SAFETY: `user` outlives the queue's use of it (flushed below).
        let r = unsafe { DataRef::new(user.as_ptr(), user.len()) };
        assert!(q.queue_ref(2, b"HDR", r, Token(9)));
        assert!(put(&mut q, 3, b""));
        assert!(put(&mut q, 4, b"four"));
        let f = q.flush(a.as_raw_fd()).unwrap();
        let mut want = HS.to_vec();
        want.extend(frame(1, b"one"));
        want.extend(frame(2, b"HDRzero-copy payload"));
        want.extend(frame(3, b""));
        want.extend(frame(4, b"four"));
        assert_eq!(
            f,
            Flushed {
                bytes: want.len(),
                blocked: false
            }
        );
        assert_eq!(read_all(&mut b, want.len()), want);
        assert!(q.is_empty() && !q.is_idle());
        // The last frame queued was a copy, so the reference is reported, not "done at once".
        assert_eq!(q.take_if_last_done(), None);
        assert_eq!(q.drain_done().collect::<Vec<_>>(), [Token(9)]);
        assert!(q.is_idle());
        // Empty again: the whole ring is free.
        assert!(q.reserve(1024 - FRAME_LEN).is_some());
    }

    #[test]
    fn ring_wraps_and_pushes_back() {
        let (a, mut b) = pair();
        let mut q = SendQueue::new(100, 2, Some(HS)).unwrap();
        let d = *b"ref";
        // SAFETY: `d` outlives the queue's use of it.
        let r = unsafe { DataRef::new(d.as_ptr(), d.len()) };
        // Frames of 30 bytes: A at 0, a reference, then B and C (merged) at 30..90.
        assert!(put(&mut q, 1, &[1; 22]));
        assert!(q.queue_ref(9, b"", r, Token(4)));
        assert!(put(&mut q, 2, &[2; 22]));
        assert!(put(&mut q, 3, &[3; 22]));
        assert_eq!(q.descs.len(), 3);
        assert!(
            q.reserve(22).is_none(),
            "10 bytes are left, none at the front"
        );
        assert!(q.reserve(2).is_some(), "10 bytes are left at the end");
        // As if the handshake, A and the reference had been written: A's 30 bytes are free.
        q.consume(HANDSHAKE_LEN + 30 + FRAME_LEN + 3);
        assert_eq!(q.head, 30);
        assert_eq!(q.drain_done().collect::<Vec<_>>(), [Token(4)]);
        // D does not fit the 10 bytes at the end: it wraps to the front.
        assert!(put(&mut q, 4, &[4; 22]));
        assert_eq!((q.wrap_at, q.tail), (Some(90), 30));
        assert!(q.reserve(0).is_none(), "full: tail meets head");
        // B, C, D leave in order.
        let out = q.flush(a.as_raw_fd()).unwrap();
        assert_eq!(
            out,
            Flushed {
                bytes: 90,
                blocked: false
            }
        );
        for i in 2..=4 {
            assert_eq!(read_all(&mut b, 30), frame(i, &[i; 22]));
        }
        assert!(q.is_idle());
        assert_eq!((q.head, q.tail, q.wrap_at), (0, 0, None));
    }

    #[test]
    fn blocked_socket_keeps_order_and_reports_references_later() {
        let (a, mut b) = pair();
        let mut q = SendQueue::new(64 << 10, 4, Some(HS)).unwrap();
        let big = vec![0xabu8; 200_000];
        // SAFETY: `big` outlives every use by the queue in this test.
        let r = unsafe { DataRef::new(big.as_ptr(), big.len()) };
        assert!(put(&mut q, 1, b"first"));
        assert!(q.queue_ref(2, &[1; 24], r, Token(5)));
        assert!(put(&mut q, 3, b"last"));
        let out = q.flush(a.as_raw_fd()).unwrap();
        assert!(out.blocked, "a 4 KiB socket buffer cannot take 200 KB");
        let total = HANDSHAKE_LEN + 13 + pframe(2, &[1u8; 24], &big).len() + 12;
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        b.set_nonblocking(true).unwrap();
        while got.len() < total {
            assert!(std::time::Instant::now() < deadline, "flush stalled");
            q.flush(a.as_raw_fd()).unwrap();
            match b.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        let mut want = HS.to_vec();
        want.extend(frame(1, b"first"));
        want.extend(pframe(2, &[1u8; 24], &big));
        want.extend(frame(3, b"last"));
        assert!(got == want, "stream differs");
        assert_eq!(q.drain_done().collect::<Vec<_>>(), [Token(5)]);
    }

    #[test]
    fn reference_limits_and_abandon() {
        let mut q = SendQueue::new(256, 2, Some(HS)).unwrap();
        let d = [0u8; 8];
        // SAFETY: `d` outlives the queue's use (nothing is ever sent).
        let r = unsafe { DataRef::new(d.as_ptr(), d.len()) };
        assert!(q.queue_ref(1, b"h", r, Token(1)));
        assert!(!q.queue_ref(1, &[0; INLINE_HEADER + 1], r, Token(9)));
        assert!(q.queue_ref(1, b"h", r, Token(2)));
        assert!(!q.can_queue_ref());
        assert!(!q.queue_ref(1, b"h", r, Token(3)));
        // Copies still fit between references up to the descriptor bound (2 * 2 + 2).
        for i in 0..4 {
            assert!(put(&mut q, 1, &[i]));
            // Distinct descriptors only when separated by a reference; these merge.
        }
        assert_eq!(q.descs.len(), 3);
        let mut got = q.abandon();
        got.sort_by_key(|(t, _)| t.0);
        assert_eq!(got, [(Token(1), false), (Token(2), false)]);
        assert!(q.can_queue_ref());
    }

    #[test]
    fn descriptor_bound_is_back_pressure() {
        let mut q = SendQueue::new(1 << 16, 1, Some(HS)).unwrap();
        let d = [0u8; 1];
        // SAFETY: `d` outlives the queue's use (nothing is ever sent).
        let r = unsafe { DataRef::new(d.as_ptr(), d.len()) };
        // copy, ref, copy: 3 descriptors; the bound is 4.
        assert!(put(&mut q, 1, b"a"));
        assert!(q.queue_ref(1, b"", r, Token(1)));
        assert!(put(&mut q, 1, b"b"));
        assert_eq!(q.descs.len(), 3);
        // Further copies merge into the last descriptor.
        assert!(put(&mut q, 1, b"c"));
        assert_eq!(q.descs.len(), 3);
    }

    #[test]
    fn inline_frames_go_at_once_or_their_rest_through_the_ring() {
        let (a, mut b) = pair();
        let mut q = SendQueue::new(64 << 10, 4, Some(HS)).unwrap();
        b.set_nonblocking(true).unwrap();
        // The handshake is still queued: the frame waits behind it, copied.
        assert!(q
            .send_inline(Some(a.as_raw_fd()), 1, b"H1", b"behind")
            .unwrap());
        assert!(!q.is_empty());
        q.flush(a.as_raw_fd()).unwrap();
        let mut want = HS.to_vec();
        want.extend(frame(1, b"H1behind"));
        assert_eq!(read_all(&mut b, want.len()), want);
        // Nothing queued: written at once, nothing left in the queue.
        assert!(q
            .send_inline(Some(a.as_raw_fd()), 2, b"H2", b"now")
            .unwrap());
        assert!(q.is_empty());
        assert_eq!(read_all(&mut b, 13), frame(2, b"H2now"));
        // Larger than the socket takes: the rest is copied and leaves on later flushes, in
        // order with what follows.
        let big: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
        assert!(q
            .send_inline(Some(a.as_raw_fd()), 3, &[9; 24], &big)
            .unwrap());
        assert!(!q.is_empty());
        assert!(put(&mut q, 4, b"after"));
        // Not connected yet: no write, all of it copied.
        assert!(q.send_inline(None, 5, b"", b"late").unwrap());
        let mut want = pframe(3, &[9u8; 24], &big);
        want.extend(frame(4, b"after"));
        want.extend(frame(5, b"late"));
        let mut got = Vec::new();
        let mut buf = vec![0u8; 65536];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while got.len() < want.len() {
            assert!(std::time::Instant::now() < deadline, "flush stalled");
            q.flush(a.as_raw_fd()).unwrap();
            match b.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
        }
        assert!(got == want, "stream differs");
        assert!(q.is_idle());
        // No room for the frame: refused, nothing written.
        assert!(!q
            .send_inline(Some(a.as_raw_fd()), 6, b"", &vec![0; 64 << 10])
            .unwrap());
        assert!(q.is_idle());
        assert_eq!(
            b.read(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }

    #[test]
    fn zero_copy_written_at_once_is_done() {
        let (a, mut b) = pair();
        let mut q = SendQueue::new(256, 2, Some(HS)).unwrap();
        let d = *b"payload";
        // SAFETY: `d` outlives the flush below.
        let r = unsafe { DataRef::new(d.as_ptr(), d.len()) };
        assert!(q.queue_ref(7, b"h", r, Token(3)));
        q.flush(a.as_raw_fd()).unwrap();
        assert_eq!(q.take_if_last_done(), Some(Token(3)));
        assert!(q.is_idle());
        let mut want = HS.to_vec();
        want.extend(frame(7, b"hpayload"));
        assert_eq!(read_all(&mut b, want.len()), want);
    }
}
