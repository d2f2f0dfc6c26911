//! The incoming side of connections: reading the handshake of a new connection, then frames.
//!
//! A new connection gets nothing but a 36-byte buffer until its handshake checks out, and a
//! deadline to send it by, so a stranger can hold neither memory nor the module. An authenticated
//! connection reads into one buffer of at least one largest frame plus its header; each complete
//! frame is handed to the sink straight from that buffer. When the sink answers `Retry`, the
//! frame stays where it is and the connection is not read until the sink takes it: the socket's
//! receive buffer fills, and TCP's flow control stops the sender. An incomplete large frame is
//! offered to the sink's placement once its head is in: if the sink names a destination, the
//! rest of the frame is read straight there (with what follows it into the buffer, so that a
//! short read still tells that the socket is drained).

use std::io::{self, IoSliceMut};
use std::os::fd::RawFd;

#[cfg(test)]
use stormpi_core::btl::Placement;
use stormpi_core::btl::{AmTag, Delivery, Sink, Token, PLACE_HEAD};
use stormpi_core::rte::ProcId;

use super::sys;
use super::wire::{self, Frame, FrameError, FRAME_LEN, PAD_MAX};

/// The challenge (`N` = [`wire::CHALLENGE_LEN`]) or handshake (`N` = [`wire::HANDSHAKE_LEN`])
/// at the start of a connection, as far as it has arrived.
pub struct HsBuf<const N: usize> {
    buf: [u8; N],
    got: usize,
}

/// What reading a challenge or handshake gave.
pub enum HandshakeRead<const N: usize> {
    /// Not all of it yet.
    Partial,
    /// All of it (still to be checked against the job).
    Complete([u8; N]),
    /// The first bytes are not a stormpi handshake.
    Garbage,
    /// The connection closed first.
    Closed,
}

impl<const N: usize> HsBuf<N> {
    /// Nothing read yet.
    pub fn new() -> HsBuf<N> {
        HsBuf {
            buf: [0; N],
            got: 0,
        }
    }

    /// Reads what has arrived of the handshake from `fd`, and not a byte past it (the frames
    /// behind it stay in the socket for the [`Reader`]).
    pub fn read(&mut self, fd: RawFd) -> io::Result<HandshakeRead<N>> {
        loop {
            match sys::recv(fd, &mut self.buf[self.got..]) {
                Ok(0) => return Ok(HandshakeRead::Closed),
                Ok(n) => {
                    self.got += n;
                    if !wire::plausible_prefix(&self.buf[..self.got]) {
                        return Ok(HandshakeRead::Garbage);
                    }
                    if self.got == N {
                        return Ok(HandshakeRead::Complete(self.buf));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Ok(HandshakeRead::Partial)
                }
                Err(e) => return Err(e),
            }
        }
    }
}

/// Why an authenticated connection ended.
#[derive(Debug)]
pub enum ReadEnd {
    /// The peer closed it between frames (normal at finalize).
    Closed,
    /// The peer closed it in the middle of a frame.
    Truncated,
    /// A frame header was refused.
    Frame(FrameError),
    /// The socket failed.
    Io(io::Error),
}

impl std::fmt::Display for ReadEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadEnd::Closed => f.write_str("closed"),
            ReadEnd::Truncated => f.write_str("closed in the middle of a fragment"),
            ReadEnd::Frame(e) => write!(f, "sent {e}"),
            ReadEnd::Io(e) => write!(f, "connection error: {e}"),
        }
    }
}

/// Frames at least this big are read to their end and at most [`READ_AHEAD`] bytes further
/// (so little of a next frame is ever moved); they are also offered to the sink for placement.
const READ_TO_END: usize = 4096;
/// Most bytes read into the buffer beyond the start of a frame that is small or not known yet:
/// a large frame behind it is then mostly still in the socket, from where it can be read
/// straight into its destination.
const READ_AHEAD: usize = 16 << 10;
/// Bytes one connection may read in one progress call before others get their turn.
const READ_BUDGET: usize = 1 << 20;

/// A fragment whose payload is being read straight into its destination ([`Sink::place`]).
struct Placing {
    dest: *mut u8,
    /// Payload bytes in all.
    len: usize,
    /// Payload bytes written.
    done: usize,
    token: Token,
}

// SAFETY: `dest` is a loan of user memory for the life of a request (Sink::place's contract),
// written by whichever thread progresses the module.
unsafe impl Send for Placing {}

/// The reading side of an authenticated connection.
pub struct Reader {
    /// The process at the other end.
    pub peer: ProcId,
    buf: sys::PageBuf,
    start: usize,
    end: usize,
    max: u32,
    /// The sink refused the frame at `start`; nothing is read until it takes it.
    pub paused: bool,
    /// The peer closed its end; what is buffered is still delivered.
    pub eof: bool,
    /// Reading stopped at the budget: the socket may hold more (epoll, edge-triggered, will
    /// not say so again).
    pub more: bool,
    /// The payload of the frame under way goes straight to its destination.
    placing: Option<Placing>,
    /// The sink did not place the frame at `start`: it is read into the buffer.
    declined: bool,
}

/// What one [`Reader::pump`] did.
#[derive(Debug)]
pub struct Pumped {
    /// Frames delivered (or placed).
    pub delivered: usize,
    /// Set when the connection is finished (closed by the peer, refused, failed) and everything
    /// buffered has been delivered.
    pub end: Option<ReadEnd>,
}

impl Reader {
    /// A reader for frames of at most `max` bytes, with a buffer of `buf_bytes` (raised to one
    /// largest frame, header and pad); `None` when no buffer can be that large.
    pub fn new(peer: ProcId, max: u32, buf_bytes: usize) -> Option<Reader> {
        let bytes = buf_bytes.max(FRAME_LEN + PAD_MAX as usize + max as usize);
        Some(Reader {
            peer,
            buf: sys::PageBuf::new(bytes)?,
            start: 0,
            end: 0,
            max,
            paused: false,
            eof: false,
            more: false,
            placing: None,
            declined: false,
        })
    }

    /// The frame at `start`, if its header has arrived.
    fn current(&self) -> Result<Option<Frame>, FrameError> {
        let Some(h) = self.buf[self.start..self.end].first_chunk::<FRAME_LEN>() else {
            return Ok(None);
        };
        Frame::parse(h, self.max).map(Some)
    }

    /// Whether a frame of `total` bytes at `start` may still be offered for placement.
    fn placeable(&self, total: usize) -> bool {
        total >= READ_TO_END && !self.declined
    }

    /// Delivers buffered frames until one is incomplete or refused; offers an incomplete large
    /// one for placement.
    fn deliver(&mut self, sink: &mut dyn Sink, delivered: &mut usize) -> Result<(), FrameError> {
        while let Some(f) = self.current()? {
            let total = f.total();
            if self.end - self.start < total {
                if self.placeable(total) {
                    self.offer(sink, f);
                }
                break;
            }
            let frag = &self.buf[self.start + f.skip()..self.start + total];
            let tag = AmTag(f.tag);
            if sink.deliver(self.peer, tag, frag) == Delivery::Retry {
                self.paused = true;
                return Ok(());
            }
            self.start += total;
            self.declined = false;
            *delivered += 1;
        }
        self.paused = false;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(())
    }

    /// Offers the incomplete frame `f` at `start` to the sink's placement, once its head is
    /// buffered.
    fn offer(&mut self, sink: &mut dyn Sink, f: Frame) {
        let frag_len = f.len as usize;
        let have = (self.end - self.start).saturating_sub(f.skip());
        if have < PLACE_HEAD {
            // `frag_len` is above PLACE_HEAD: the head is still on its way.
            return;
        }
        let tag = AmTag(f.tag);
        let at = self.start + f.skip();
        let Some(p) = sink.place(self.peer, tag, &self.buf[at..at + PLACE_HEAD], frag_len) else {
            self.declined = true;
            return;
        };
        debug_assert!(
            p.skip <= PLACE_HEAD,
            "tcp: placement skips more than its head"
        );
        let skip = p.skip.min(PLACE_HEAD);
        let buffered = have - skip;
        // SAFETY: Sink::place's contract makes `dest` writable for `frag_len - skip` bytes, more
        // than the `buffered` ones (the frame is incomplete); the buffer is ours, not the loan.
        unsafe {
            std::ptr::copy_nonoverlapping(self.buf[at + skip..].as_ptr(), p.dest, buffered);
        }
        self.placing = Some(Placing {
            dest: p.dest,
            len: frag_len - skip,
            done: buffered,
            token: p.token,
        });
        self.start = 0;
        self.end = 0;
    }

    /// Gives up the placement under way, if any: its token and payload length, for the sink's
    /// [`Sink::placed`] with an error. The destination is not touched again.
    pub fn abandon(&mut self) -> Option<(Token, usize)> {
        self.placing.take().map(|p| (p.token, p.len))
    }

    /// Delivers what is buffered, then reads from `fd` and delivers until the socket is drained
    /// (unless the sink refuses a frame, or the budget runs out: then [`Reader::more`] is set).
    /// A short read means drained, except after `hup` (the peer shut its side): then only the
    /// end of stream or `WouldBlock` does, so the end is never missed.
    pub fn pump(&mut self, fd: RawFd, sink: &mut dyn Sink, hup: bool) -> Pumped {
        let mut out = Pumped {
            delivered: 0,
            end: None,
        };
        let mut budget = READ_BUDGET;
        let mut drained = false;
        self.more = false;
        loop {
            if self.placing.is_none() {
                if let Err(e) = self.deliver(sink, &mut out.delivered) {
                    out.end = Some(ReadEnd::Frame(e));
                    return out;
                }
                if self.paused {
                    return out;
                }
            }
            if self.eof {
                out.end = Some(if self.start == self.end && self.placing.is_none() {
                    ReadEnd::Closed
                } else {
                    ReadEnd::Truncated
                });
                if let Some((token, len)) = self.abandon() {
                    sink.placed(
                        self.peer,
                        token,
                        len,
                        Err(super::transport("connection lost")),
                    );
                }
                return out;
            }
            if drained {
                // Epoll reports the next arrival.
                return out;
            }
            if budget == 0 {
                self.more = true;
                return out;
            }
            let (got, want) = if let Some(p) = &mut self.placing {
                let rest = p.len - p.done;
                let want = rest.min(budget);
                // SAFETY: Sink::place's contract: `dest` is writable for `len` bytes until we
                // report the placement; `done + want <= len`.
                let dst = unsafe { std::slice::from_raw_parts_mut(p.dest.add(p.done), want) };
                if want < rest {
                    (sys::recv(fd, dst), want)
                } else {
                    // And what follows into the (empty) buffer, so that a short read tells
                    // that the socket is drained.
                    let ahead = READ_AHEAD.min(self.buf.len());
                    let mut iov = [
                        IoSliceMut::new(dst),
                        IoSliceMut::new(&mut self.buf[..ahead]),
                    ];
                    (sys::recv_vectored(fd, &mut iov), want + ahead)
                }
            } else {
                // Room for the frame under way, and how far to read.
                let (need, skip) = match self.current() {
                    Ok(Some(f)) => (f.total(), f.skip()),
                    Ok(None) => (FRAME_LEN, FRAME_LEN),
                    Err(e) => {
                        out.end = Some(ReadEnd::Frame(e));
                        return out;
                    }
                };
                if self.start + need > self.buf.len() {
                    self.buf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                }
                let limit = if self.placeable(need) {
                    // Just the head, which decides where the rest goes.
                    self.start + skip + PLACE_HEAD
                } else if need >= READ_TO_END {
                    // To its end, and a little beyond: a short read then tells that the socket
                    // is drained.
                    (self.start + need + READ_AHEAD).min(self.buf.len())
                } else {
                    (self.start + READ_AHEAD).min(self.buf.len())
                };
                // The frame under way is incomplete (else it was delivered), and its head is
                // not all here if it was not offered.
                debug_assert!(limit > self.end, "tcp: nothing to read into");
                let want = (limit.max(self.end + 1) - self.end).min(budget);
                (
                    sys::recv(fd, &mut self.buf[self.end..self.end + want]),
                    want,
                )
            };
            match got {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    // The read-ahead behind a placed payload may take a little past the budget.
                    budget = budget.saturating_sub(n);
                    // A short read means the socket is empty now (the end of stream, which
                    // only the next read reports, aside).
                    drained = n < want && !hup;
                    match &mut self.placing {
                        Some(p) => {
                            let rest = p.len - p.done;
                            p.done += n.min(rest);
                            self.end = n.saturating_sub(rest);
                            if let Some(p) = self.placing.take_if(|p| p.done == p.len) {
                                sink.placed(self.peer, p.token, p.len, Ok(()));
                                out.delivered += 1;
                            }
                        }
                        None => self.end += n,
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => drained = true,
                Err(e) => {
                    if let Some((token, len)) = self.abandon() {
                        sink.placed(self.peer, token, len, Err(super::transport("read failed")));
                    }
                    out.end = Some(ReadEnd::Io(e));
                    return out;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::{Ipv4Addr, TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::Instant;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    #[derive(Default)]
    struct Sink1 {
        got: Vec<(u8, Vec<u8>)>,
        refuse: usize,
    }
    impl Sink for Sink1 {
        fn deliver(&mut self, from: ProcId, tag: AmTag, frag: &[u8]) -> Delivery {
            assert_eq!(from, ProcId(3));
            if self.refuse > 0 {
                self.refuse -= 1;
                return Delivery::Retry;
            }
            self.got.push((tag.0, frag.to_vec()));
            Delivery::Consumed
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

    /// Pumps until `n` frames arrived or the connection ended (bounded).
    fn pump_until(r: &mut Reader, fd: &TcpStream, s: &mut Sink1, n: usize) -> Option<ReadEnd> {
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while s.got.len() < n {
            assert!(Instant::now() < deadline, "frames did not arrive");
            let p = r.pump(fd.as_raw_fd(), s, false);
            if p.end.is_some() {
                return p.end;
            }
        }
        None
    }

    #[test]
    fn handshake_is_read_exactly() {
        let (mut a, b) = pair();
        let mut p = HsBuf::<{ wire::HANDSHAKE_LEN }>::new();
        assert!(matches!(
            p.read(b.as_raw_fd()).unwrap(),
            HandshakeRead::Partial
        ));
        let hs = wire::Handshake {
            nonce: stormpi_bootstrap::auth::Nonce([1; 16]),
            from: 1,
            to: 0,
            max_frag: 100,
            follows: false,
            proof: [2; 32],
        }
        .to_bytes();
        a.write_all(&hs[..10]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(matches!(
            p.read(b.as_raw_fd()).unwrap(),
            HandshakeRead::Partial
        ));
        // The rest, and a frame behind it that must stay in the socket.
        a.write_all(&hs[10..]).unwrap();
        a.write_all(&frame(1, b"x")).unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let got = loop {
            match p.read(b.as_raw_fd()).unwrap() {
                HandshakeRead::Complete(b) => break b,
                HandshakeRead::Partial => assert!(Instant::now() < deadline),
                _ => panic!("handshake refused"),
            }
        };
        assert_eq!(got, hs);
        let mut r = Reader::new(ProcId(3), 100, 0).unwrap();
        let mut s = Sink1::default();
        assert!(pump_until(&mut r, &b, &mut s, 1).is_none());
        assert_eq!(s.got, [(1, b"x".to_vec())]);
    }

    #[test]
    fn garbage_and_early_close_are_recognised() {
        let (mut a, b) = pair();
        let mut p = HsBuf::<{ wire::HANDSHAKE_LEN }>::new();
        a.write_all(b"SX").unwrap();
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match p.read(b.as_raw_fd()).unwrap() {
                HandshakeRead::Garbage => break,
                HandshakeRead::Partial => assert!(Instant::now() < deadline),
                _ => panic!("garbage not recognised"),
            }
        }
        let (a, b) = pair();
        let mut p = HsBuf::<{ wire::HANDSHAKE_LEN }>::new();
        drop(a);
        loop {
            match p.read(b.as_raw_fd()).unwrap() {
                HandshakeRead::Closed => break,
                HandshakeRead::Partial => assert!(Instant::now() < deadline),
                _ => panic!("close not recognised"),
            }
        }
    }

    #[test]
    fn frames_of_every_size_across_buffer_edges() {
        let (mut a, b) = pair();
        let max = 5000u32;
        // A small buffer (one frame) forces moves of partial frames to the front.
        let mut r = Reader::new(ProcId(3), max, 0).unwrap();
        let frames: Vec<Vec<u8>> = (0..300)
            .map(|i| {
                let len = (i * 37) % (max as usize + 1);
                (0..len).map(|k| (k * 7 + i) as u8).collect()
            })
            .collect();
        let writer = {
            let frames = frames.clone();
            std::thread::spawn(move || {
                for (i, f) in frames.iter().enumerate() {
                    a.write_all(&frame(i as u8, f)).unwrap();
                }
                a
            })
        };
        let mut s = Sink1::default();
        assert!(pump_until(&mut r, &b, &mut s, frames.len()).is_none());
        for (i, (tag, data)) in s.got.iter().enumerate() {
            assert_eq!(*tag, i as u8);
            assert!(*data == frames[i], "frame {i} differs");
        }
        drop(writer.join().unwrap());
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        loop {
            assert!(Instant::now() < deadline);
            if let Some(end) = r.pump(b.as_raw_fd(), &mut s, false).end {
                assert!(matches!(end, ReadEnd::Closed), "{end}");
                break;
            }
        }
    }

    #[test]
    fn padded_frames_skip_their_pad() {
        let (mut a, b) = pair();
        let mut r = Reader::new(ProcId(3), 100, 0).unwrap();
        for (pad, data) in [(0u8, &b"plain"[..]), (17, b"after 17"), (PAD_MAX, b"")] {
            let mut f = Frame {
                len: data.len() as u32,
                tag: pad,
                pad,
            }
            .to_bytes()
            .to_vec();
            f.extend(std::iter::repeat_n(0xee, pad as usize));
            f.extend_from_slice(data);
            a.write_all(&f).unwrap();
        }
        let mut s = Sink1::default();
        assert!(pump_until(&mut r, &b, &mut s, 3).is_none());
        assert_eq!(
            s.got,
            [
                (0, b"plain".to_vec()),
                (17, b"after 17".to_vec()),
                (PAD_MAX, Vec::new())
            ]
        );
    }

    #[test]
    fn retry_keeps_the_frame_and_stops_reading() {
        let (mut a, b) = pair();
        let mut r = Reader::new(ProcId(3), 100, 0).unwrap();
        a.write_all(&frame(1, b"a")).unwrap();
        a.write_all(&frame(2, b"b")).unwrap();
        let mut s = Sink1 {
            refuse: 3,
            ..Default::default()
        };
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while s.refuse > 0 {
            assert!(Instant::now() < deadline);
            let p = r.pump(b.as_raw_fd(), &mut s, false);
            assert_eq!(p.delivered, 0);
            assert!(p.end.is_none());
        }
        assert!(r.paused);
        assert!(pump_until(&mut r, &b, &mut s, 2).is_none());
        assert_eq!(s.got, [(1, b"a".to_vec()), (2, b"b".to_vec())]);
        assert!(!r.paused);
    }

    #[test]
    fn bad_frames_end_the_connection() {
        let (mut a, b) = pair();
        let mut r = Reader::new(ProcId(3), 100, 0).unwrap();
        a.write_all(&frame(1, b"ok")).unwrap();
        a.write_all(&[0, 0, 0, 101, 1, 0, 0, 0]).unwrap();
        let mut s = Sink1::default();
        let end = pump_until(&mut r, &b, &mut s, 2).expect("refused");
        assert!(
            matches!(
                end,
                ReadEnd::Frame(FrameError::TooLong { len: 101, max: 100 })
            ),
            "{end}"
        );
        assert_eq!(s.got, [(1, b"ok".to_vec())]);

        let (mut a, b) = pair();
        let mut r = Reader::new(ProcId(3), 100, 0).unwrap();
        a.write_all(&[0, 0, 0, 1, 1, 0, 9, 0]).unwrap();
        let end = pump_until(&mut r, &b, &mut Sink1::default(), 1).expect("refused");
        assert!(matches!(end, ReadEnd::Frame(FrameError::Padding)), "{end}");

        let (mut a, b) = pair();
        let mut r = Reader::new(ProcId(3), 100, 0).unwrap();
        a.write_all(&frame(1, b"abc")[..6]).unwrap();
        drop(a);
        let end = pump_until(&mut r, &b, &mut Sink1::default(), 1).expect("ended");
        assert!(matches!(end, ReadEnd::Truncated), "{end}");
    }

    /// A sink that places fragments starting with `P` (a 4-byte header, then payload) into
    /// one destination buffer, at the offset given in the header's bytes 1..4, and takes the
    /// rest as usual.
    struct Placer {
        dest: Vec<u8>,
        got: Vec<(u8, Vec<u8>)>,
        placed: Vec<(u64, usize, bool)>,
        /// Frames starting with `P`, placed (true) or delivered: offset, length.
        landed: Vec<(u64, usize, bool)>,
        offered: usize,
    }

    impl Placer {
        fn new(bytes: usize) -> Placer {
            Placer {
                dest: vec![0; bytes],
                got: Vec::new(),
                placed: Vec::new(),
                landed: Vec::new(),
                offered: 0,
            }
        }
    }

    impl Sink for Placer {
        fn deliver(&mut self, from: ProcId, tag: AmTag, frag: &[u8]) -> Delivery {
            assert_eq!(from, ProcId(3));
            if frag[0] == b'P' {
                // What the sink does with a frame it would have placed: the same bytes land.
                let at = u32::from_be_bytes([0, frag[1], frag[2], frag[3]]) as usize;
                self.dest[at..at + frag.len() - 4].copy_from_slice(&frag[4..]);
                self.landed.push((at as u64, frag.len() - 4, false));
            } else {
                self.got.push((tag.0, frag.to_vec()));
            }
            Delivery::Consumed
        }
        fn place(
            &mut self,
            from: ProcId,
            _tag: AmTag,
            head: &[u8],
            len: usize,
        ) -> Option<Placement> {
            assert_eq!(from, ProcId(3));
            assert_eq!(head.len(), PLACE_HEAD.min(len));
            self.offered += 1;
            if head[0] != b'P' {
                return None;
            }
            let at = u32::from_be_bytes([0, head[1], head[2], head[3]]) as usize;
            assert!(at + len - 4 <= self.dest.len());
            Some(Placement {
                skip: 4,
                dest: self.dest[at..].as_mut_ptr(),
                token: Token(at as u64),
            })
        }
        fn placed(
            &mut self,
            from: ProcId,
            token: Token,
            len: usize,
            result: stormpi_core::error::Result<()>,
        ) {
            assert_eq!(from, ProcId(3));
            self.placed.push((token.0, len, result.is_ok()));
            self.landed.push((token.0, len, true));
        }
    }

    fn placed_frag(at: usize, data: &[u8]) -> Vec<u8> {
        let mut f = vec![b'P', (at >> 16) as u8, (at >> 8) as u8, at as u8];
        f.extend_from_slice(data);
        f
    }

    #[test]
    fn large_frames_are_placed_and_the_rest_delivered_in_order() {
        let (mut a, b) = pair();
        let max = 400_000u32;
        let mut r = Reader::new(ProcId(3), max, 0).unwrap();
        // Placed frames of many sizes (some below the placement threshold, which are
        // delivered), declined large frames and small frames, interleaved; written in uneven
        // pieces so that every read boundary occurs.
        let mut stream = Vec::new();
        let mut expect_got = Vec::new();
        let mut expect_dest = vec![0u8; 4 << 20];
        let mut expect_landed = Vec::new();
        let mut at = 0usize;
        for i in 0..60usize {
            let len = [10, 5000, 70_000, 299_990, 4090, 17_000][i % 6] + i;
            let data: Vec<u8> = (0..len).map(|k| (k * 13 + i * 7) as u8).collect();
            if i % 4 == 3 {
                // Declined: delivered whole.
                let mut f = vec![b'D'];
                f.extend_from_slice(&data);
                stream.extend(frame(2, &f));
                expect_got.push((2, f));
            } else {
                let f = placed_frag(at, &data);
                // Some with a pad between frame header and fragment.
                let pad = (i * 13 % 64) as u8;
                let mut fr = Frame {
                    len: f.len() as u32,
                    tag: 1,
                    pad,
                }
                .to_bytes()
                .to_vec();
                fr.extend(std::iter::repeat_n(0xee, pad as usize));
                fr.extend_from_slice(&f);
                stream.extend(fr);
                expect_dest[at..at + len].copy_from_slice(&data);
                expect_landed.push((at as u64, len));
                at += len;
            }
        }
        let frames = expect_got.len() + expect_landed.len();
        let writer = std::thread::spawn(move || {
            let mut k = 0;
            let mut i = 0;
            while k < stream.len() {
                let n = [1, 7, 100, 4093, 65536, 200_000][i % 6].min(stream.len() - k);
                a.write_all(&stream[k..k + n]).unwrap();
                k += n;
                i += 1;
            }
            a
        });
        let mut s = Placer::new(4 << 20);
        let deadline = Instant::now() + std::time::Duration::from_secs(20);
        let mut delivered = 0;
        while delivered < frames {
            assert!(Instant::now() < deadline, "frames did not arrive");
            let p = r.pump(b.as_raw_fd(), &mut s, false);
            assert!(p.end.is_none());
            delivered += p.delivered;
        }
        let landed: Vec<(u64, usize)> = s.landed.iter().map(|&(a, n, _)| (a, n)).collect();
        assert_eq!(landed, expect_landed);
        assert!(s.got == expect_got, "delivered frames differ");
        assert!(s.dest == expect_dest, "placed bytes differ");
        // Only frames from READ_TO_END bytes are placed, and they are whenever they are not
        // all buffered at once (the largest never are: they exceed READ_AHEAD).
        for &(_, n, placed) in &s.landed {
            assert!(!placed || FRAME_LEN + PAD_MAX as usize + 4 + n >= READ_TO_END);
            assert!(placed || n < 200_000);
        }
        assert!(s.placed.iter().all(|p| p.2));
        drop(writer.join().unwrap());
    }

    #[test]
    fn a_connection_ending_inside_a_placed_frame_reports_the_placement_failed() {
        let (mut a, b) = pair();
        let mut r = Reader::new(ProcId(3), 100_000, 0).unwrap();
        let f = frame(1, &placed_frag(0, &[9u8; 50_000]));
        a.write_all(&f[..30_000]).unwrap();
        drop(a);
        let mut s = Placer::new(50_000);
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        let end = loop {
            assert!(Instant::now() < deadline);
            if let Some(end) = r.pump(b.as_raw_fd(), &mut s, false).end {
                break end;
            }
        };
        assert!(matches!(end, ReadEnd::Truncated), "{end}");
        assert_eq!(s.placed, [(0, 50_000, false)]);
        assert!(r.abandon().is_none());
        assert!(s.dest[..30_000 - FRAME_LEN - 4].iter().all(|&x| x == 9));

        // Given up by the module instead (the connection closed for another reason).
        let (mut a, b) = pair();
        let mut r = Reader::new(ProcId(3), 100_000, 0).unwrap();
        a.write_all(&f[..30_000]).unwrap();
        let mut s = Placer::new(50_000);
        while s.offered == 0 {
            assert!(Instant::now() < deadline);
            r.pump(b.as_raw_fd(), &mut s, false);
        }
        assert_eq!(r.abandon().map(|(t, n)| (t.0, n)), Some((0, 50_000)));
        assert!(s.placed.is_empty());
    }
}
