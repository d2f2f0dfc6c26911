//! The incoming side of connections: reading the handshake of a new connection, then frames.
//!
//! A new connection gets nothing but a 36-byte buffer until its handshake checks out, and a
//! deadline to send it by, so a stranger can hold neither memory nor the module. An authenticated
//! connection reads into one buffer of at least one largest frame plus its header; each complete
//! frame is handed to the sink straight from that buffer. When the sink answers `Retry`, the
//! frame stays where it is and the connection is not read until the sink takes it: the socket's
//! receive buffer fills, and TCP's flow control stops the sender.

use std::io;
use std::os::fd::RawFd;

use stormpi_core::btl::{AmTag, Delivery, Sink};
use stormpi_core::rte::ProcId;

use super::sys;
use super::wire::{Frame, FrameError, Handshake, FRAME_LEN, HANDSHAKE_LEN};

/// The handshake of a connection, as far as it has arrived.
pub struct HsBuf {
    buf: [u8; HANDSHAKE_LEN],
    got: usize,
}

/// What reading a handshake gave.
pub enum HandshakeRead {
    /// Not all of it yet.
    Partial,
    /// All of it (still to be checked against the job).
    Complete([u8; HANDSHAKE_LEN]),
    /// The first bytes are not a stormpi handshake.
    Garbage,
    /// The connection closed first.
    Closed,
}

impl HsBuf {
    /// Nothing read yet.
    pub fn new() -> HsBuf {
        HsBuf {
            buf: [0; HANDSHAKE_LEN],
            got: 0,
        }
    }

    /// Reads what has arrived of the handshake from `fd`, and not a byte past it (the frames
    /// behind it stay in the socket for the [`Reader`]).
    pub fn read(&mut self, fd: RawFd) -> io::Result<HandshakeRead> {
        loop {
            match sys::recv(fd, &mut self.buf[self.got..]) {
                Ok(0) => return Ok(HandshakeRead::Closed),
                Ok(n) => {
                    self.got += n;
                    if !Handshake::plausible_prefix(&self.buf[..self.got]) {
                        return Ok(HandshakeRead::Garbage);
                    }
                    if self.got == HANDSHAKE_LEN {
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

/// Frames at least this big are read to their end and no further, so the next frame starts at
/// the front of the buffer and is never moved.
const READ_TO_END: usize = 4096;
/// Bytes one connection may read in one progress call before others get their turn.
const READ_BUDGET: usize = 1 << 20;

/// The reading side of an authenticated connection.
pub struct Reader {
    /// The process at the other end.
    pub peer: ProcId,
    buf: Box<[u8]>,
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
}

/// What one [`Reader::pump`] did.
#[derive(Debug)]
pub struct Pumped {
    /// Frames delivered.
    pub delivered: usize,
    /// Set when the connection is finished (closed by the peer, refused, failed) and everything
    /// buffered has been delivered.
    pub end: Option<ReadEnd>,
}

impl Reader {
    /// A reader for frames of at most `max` bytes, with a buffer of `buf_bytes` (raised to one
    /// largest frame and header).
    pub fn new(peer: ProcId, max: u32, buf_bytes: usize) -> Reader {
        let bytes = buf_bytes.max(FRAME_LEN + max as usize);
        Reader {
            peer,
            buf: vec![0; bytes].into_boxed_slice(),
            start: 0,
            end: 0,
            max,
            paused: false,
            eof: false,
            more: false,
        }
    }

    /// Length of the frame at `start` with its header, if its header has arrived.
    fn current(&self) -> Result<Option<usize>, FrameError> {
        if self.end - self.start < FRAME_LEN {
            return Ok(None);
        }
        let h: &[u8; FRAME_LEN] = self.buf[self.start..self.start + FRAME_LEN]
            .try_into()
            .expect("8 bytes");
        Frame::parse(h, self.max).map(|f| Some(FRAME_LEN + f.len as usize))
    }

    /// Delivers buffered frames until one is incomplete or refused.
    fn deliver(&mut self, sink: &mut dyn Sink, delivered: &mut usize) -> Result<(), FrameError> {
        while let Some(total) = self.current()? {
            if self.end - self.start < total {
                break;
            }
            let tag = AmTag(self.buf[self.start + 4]);
            let frag = &self.buf[self.start + FRAME_LEN..self.start + total];
            if sink.deliver(self.peer, tag, frag) == Delivery::Retry {
                self.paused = true;
                return Ok(());
            }
            self.start += total;
            *delivered += 1;
        }
        self.paused = false;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(())
    }

    /// Delivers what is buffered, then reads from `fd` and delivers until the socket is drained
    /// (unless the sink refuses a frame, or the budget runs out: then [`Reader::more`] is set).
    pub fn pump(&mut self, fd: RawFd, sink: &mut dyn Sink) -> Pumped {
        let mut out = Pumped {
            delivered: 0,
            end: None,
        };
        let mut budget = READ_BUDGET;
        let mut drained = false;
        self.more = false;
        loop {
            if let Err(e) = self.deliver(sink, &mut out.delivered) {
                out.end = Some(ReadEnd::Frame(e));
                return out;
            }
            if self.paused {
                return out;
            }
            if self.eof {
                out.end = Some(if self.start == self.end {
                    ReadEnd::Closed
                } else {
                    ReadEnd::Truncated
                });
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
            // Room for the frame under way, and how far to read.
            let need = match self.current() {
                Ok(Some(total)) => total,
                Ok(None) => FRAME_LEN,
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
            let limit = if need >= READ_TO_END {
                self.start + need
            } else {
                self.buf.len()
            };
            let want = (limit - self.end).min(budget);
            match sys::recv(fd, &mut self.buf[self.end..self.end + want]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.end += n;
                    budget -= n;
                    // A short read means the socket is empty now.
                    drained = n < want;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => drained = true,
                Err(e) => {
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
            let p = r.pump(fd.as_raw_fd(), s);
            if p.end.is_some() {
                return p.end;
            }
        }
        None
    }

    #[test]
    fn handshake_is_read_exactly() {
        let (mut a, b) = pair();
        let mut p = HsBuf::new();
        assert!(matches!(
            p.read(b.as_raw_fd()).unwrap(),
            HandshakeRead::Partial
        ));
        let hs = Handshake {
            secret: [1; 16],
            from: 1,
            to: 0,
            max_frag: 100,
            follows: false,
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
        let mut r = Reader::new(ProcId(3), 100, 0);
        let mut s = Sink1::default();
        assert!(pump_until(&mut r, &b, &mut s, 1).is_none());
        assert_eq!(s.got, [(1, b"x".to_vec())]);
    }

    #[test]
    fn garbage_and_early_close_are_recognised() {
        let (mut a, b) = pair();
        let mut p = HsBuf::new();
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
        let mut p = HsBuf::new();
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
        let mut r = Reader::new(ProcId(3), max, 0);
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
            if let Some(end) = r.pump(b.as_raw_fd(), &mut s).end {
                assert!(matches!(end, ReadEnd::Closed), "{end}");
                break;
            }
        }
    }

    #[test]
    fn retry_keeps_the_frame_and_stops_reading() {
        let (mut a, b) = pair();
        let mut r = Reader::new(ProcId(3), 100, 0);
        a.write_all(&frame(1, b"a")).unwrap();
        a.write_all(&frame(2, b"b")).unwrap();
        let mut s = Sink1 {
            refuse: 3,
            ..Default::default()
        };
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while s.refuse > 0 {
            assert!(Instant::now() < deadline);
            let p = r.pump(b.as_raw_fd(), &mut s);
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
        let mut r = Reader::new(ProcId(3), 100, 0);
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
        let mut r = Reader::new(ProcId(3), 100, 0);
        a.write_all(&[0, 0, 0, 1, 1, 9, 0, 0]).unwrap();
        let end = pump_until(&mut r, &b, &mut Sink1::default(), 1).expect("refused");
        assert!(matches!(end, ReadEnd::Frame(FrameError::Padding)), "{end}");

        let (mut a, b) = pair();
        let mut r = Reader::new(ProcId(3), 100, 0);
        a.write_all(&frame(1, b"abc")[..6]).unwrap();
        drop(a);
        let end = pump_until(&mut r, &b, &mut Sink1::default(), 1).expect("ended");
        assert!(matches!(end, ReadEnd::Truncated), "{end}");
    }
}
