//! The byte stream a PMI client talks over, and line framing on top of it.
//!
//! Launchers on the same node hand over an inherited socket (`PMI_FD`);
//! remote ones a TCP address (`PMI_PORT`). Both carry the same protocols, so
//! the protocol code sees only a [`LineChannel`].

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;

use super::error::PmiError;
use super::wire::{self, MAX_LINE};

/// A connected stream to a PMI server.
#[derive(Debug)]
pub enum Transport {
    /// A socket inherited from the launcher (`PMI_FD`).
    Unix(UnixStream),
    /// A TCP connection to the launcher (`PMI_PORT`).
    Tcp(TcpStream),
}

impl Read for Transport {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Transport::Unix(s) => s.read(buf),
            Transport::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Transport {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Transport::Unix(s) => s.write(buf),
            Transport::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Transport::Unix(s) => s.flush(),
            Transport::Tcp(s) => s.flush(),
        }
    }
}

impl AsRawFd for Transport {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Transport::Unix(s) => s.as_raw_fd(),
            Transport::Tcp(s) => s.as_raw_fd(),
        }
    }
}

impl Transport {
    fn set_read_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        match self {
            Transport::Unix(s) => s.set_read_timeout(t),
            Transport::Tcp(s) => s.set_read_timeout(t),
        }
    }

    /// Switches the stream to non-blocking mode (for a server's poll loop).
    pub fn set_nonblocking(&self, on: bool) -> io::Result<()> {
        match self {
            Transport::Unix(s) => s.set_nonblocking(on),
            Transport::Tcp(s) => s.set_nonblocking(on),
        }
    }
}

/// Newline-framed request/reply exchange over a [`Transport`].
#[derive(Debug)]
pub(crate) struct LineChannel {
    stream: Transport,
    /// Bytes received past the end of the last line handed out.
    pending: Vec<u8>,
}

impl LineChannel {
    pub(crate) fn new(stream: Transport) -> LineChannel {
        LineChannel {
            stream,
            pending: Vec::new(),
        }
    }

    /// Bounds (or, with `None`, unbounds) the wait in [`recv`](Self::recv).
    pub(crate) fn set_read_timeout(&mut self, t: Option<std::time::Duration>) -> io::Result<()> {
        self.stream.set_read_timeout(t)
    }

    /// Sends one complete line (which must end in `\n`).
    pub(crate) fn send(&mut self, line: &[u8]) -> Result<(), PmiError> {
        debug_assert!(line.ends_with(b"\n"));
        self.send_raw(line)
    }

    /// Sends bytes as they are (a length-prefixed PMI-2 command).
    pub(crate) fn send_raw(&mut self, bytes: &[u8]) -> Result<(), PmiError> {
        self.stream
            .write_all(bytes)
            .map_err(|source| match source.kind() {
                io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset => PmiError::Closed,
                _ => PmiError::Io { op: "send", source },
            })
    }

    /// Blocks until exactly `n` bytes have arrived (after any already buffered) and returns them.
    pub(crate) fn recv_exact(&mut self, n: usize) -> Result<Vec<u8>, PmiError> {
        while self.pending.len() < n {
            self.read_more(n - self.pending.len())?;
        }
        Ok(self.pending.drain(..n).collect())
    }

    /// Reads what has arrived, at most `max` bytes, onto the pending bytes (blocking until
    /// something does).
    fn read_more(&mut self, max: usize) -> Result<(), PmiError> {
        let mut chunk = [0u8; 4096];
        let want = max.min(chunk.len());
        loop {
            match self.stream.read(&mut chunk[..want]) {
                Ok(0) => return Err(PmiError::Closed),
                Ok(got) => {
                    self.pending.extend_from_slice(&chunk[..got]);
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Err(PmiError::Closed)
                }
                Err(source) => {
                    return Err(PmiError::Io {
                        op: "receive",
                        source,
                    })
                }
            }
        }
    }

    /// Blocks until one line arrives and returns it without its `\n`.
    pub(crate) fn recv(&mut self) -> Result<Vec<u8>, PmiError> {
        loop {
            if let Some(line) = wire::take_line(&mut self.pending) {
                return Ok(line);
            }
            if self.pending.len() > MAX_LINE {
                return Err(PmiError::Malformed(format!(
                    "reply longer than {MAX_LINE} bytes without a newline"
                )));
            }
            self.read_more(usize::MAX)?;
        }
    }

    /// Waits up to `limit` for the server to close the connection, discarding
    /// anything it sends. Used after `abort`, so that the launcher learns of
    /// the abort before it sees this process exit.
    pub(crate) fn wait_for_close(&mut self, limit: std::time::Duration) {
        if self.stream.set_read_timeout(Some(limit)).is_err() {
            return;
        }
        let deadline = std::time::Instant::now() + limit;
        let mut chunk = [0u8; 256];
        while std::time::Instant::now() < deadline {
            match self.stream.read(&mut chunk) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }
}
