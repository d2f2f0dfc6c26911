//! The meeting of two jobs at a port: the socket exchange under `MPI_Comm_accept` and
//! `MPI_Comm_connect`.
//!
//! **Proof.** The port's secret is in its name; both sides prove they hold it, over fresh nonces
//! from each (as every other connection of stormpi does), before anything else is said:
//!
//! 1. acceptor → connector: [`MAGIC`], its nonce;
//! 2. connector → acceptor: [`MAGIC`], its nonce, its proof (role `connect`);
//! 3. acceptor → connector: its proof (role `accept`).
//!
//! The acceptor drops a connection whose proof is wrong (or that says nothing in time) and goes
//! on waiting, so a stranger at the port does no harm; the connector refuses an acceptor that
//! cannot prove the secret, so it hands nothing to an impostor that took over the address.
//!
//! **Messages.** After the proofs, a [`Channel`] carries length-prefixed messages (a big-endian
//! `u32` length, then the bytes) — the group sizes and business cards of the two sides; a
//! receiver names the most it takes, and a longer message is an error, not an allocation.

use std::io::{self, Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use stormpi_bootstrap::auth::{Key, Nonce, NONCE_LEN, PROOF_LEN};

/// What opens the exchange, from both sides.
pub const MAGIC: &[u8; 8] = b"STPORT01";

/// How long one connection may take to prove itself to an acceptor.
pub const PROOF_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a rendezvous failed.
#[derive(Debug)]
pub enum RendezvousError {
    /// A socket call failed.
    Io(io::Error),
    /// Nobody came (acceptor), or the other side did not answer (connector), in time.
    Timeout,
    /// The other side does not speak this protocol.
    NotOurs,
    /// The other side could not prove it holds the port's secret.
    BadProof,
    /// A message longer than the receiver takes.
    TooLarge {
        /// Its announced length.
        len: usize,
        /// The most the receiver takes.
        max: usize,
    },
}

impl std::fmt::Display for RendezvousError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RendezvousError::Io(e) => write!(f, "socket error: {e}"),
            RendezvousError::Timeout => f.write_str("timed out"),
            RendezvousError::NotOurs => f.write_str("the other side is not a stormpi port"),
            RendezvousError::BadProof => {
                f.write_str("the other side could not prove it holds the port's secret")
            }
            RendezvousError::TooLarge { len, max } => {
                write!(f, "a message of {len} bytes, more than the {max} expected")
            }
        }
    }
}

impl From<io::Error> for RendezvousError {
    fn from(e: io::Error) -> RendezvousError {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => RendezvousError::Timeout,
            io::ErrorKind::UnexpectedEof => RendezvousError::NotOurs,
            _ => RendezvousError::Io(e),
        }
    }
}

/// A connection between the two sides, proven.
#[derive(Debug)]
pub struct Channel {
    stream: TcpStream,
}

impl Channel {
    /// A channel over a stream the caller trusts (`MPI_Comm_join`'s socket: nothing to prove).
    pub fn over(stream: TcpStream) -> Channel {
        Channel { stream }
    }

    /// Sends one message.
    pub fn send(&mut self, msg: &[u8]) -> Result<(), RendezvousError> {
        let len = u32::try_from(msg.len()).map_err(|_| RendezvousError::TooLarge {
            len: msg.len(),
            max: u32::MAX as usize,
        })?;
        self.stream.write_all(&len.to_be_bytes())?;
        self.stream.write_all(msg)?;
        Ok(())
    }

    /// Receives one message of at most `max` bytes, waiting at most `timeout`.
    pub fn recv(&mut self, max: usize, timeout: Duration) -> Result<Vec<u8>, RendezvousError> {
        self.stream
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let len = u32::from_be_bytes(len) as usize;
        if len > max {
            return Err(RendezvousError::TooLarge { len, max });
        }
        let mut msg = vec![0u8; len];
        self.stream.read_exact(&mut msg)?;
        Ok(msg)
    }
}

/// Waits on `listener` until a connection proves it holds `secret` (strangers are dropped), at
/// most `timeout` in all.
pub fn accept(
    listener: &TcpListener,
    secret: &Key,
    timeout: Duration,
) -> Result<Channel, RendezvousError> {
    let deadline = Instant::now() + timeout;
    listener.set_nonblocking(true)?;
    loop {
        match listener.accept() {
            Ok((stream, from)) => match prove_acceptor(stream, secret, deadline) {
                Ok(ch) => return Ok(ch),
                Err(e) => eprintln!("stormpi: port: refused a connection from {from}: {e}"),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e.into()),
        }
        if Instant::now() >= deadline {
            return Err(RendezvousError::Timeout);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Connects to the port at `addr` whose secret is `secret`, at most `timeout` in all.
pub fn connect(
    addr: SocketAddrV4,
    secret: &Key,
    timeout: Duration,
) -> Result<Channel, RendezvousError> {
    let mut stream = TcpStream::connect_timeout(&addr.into(), timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    let mut hello = [0u8; 8 + NONCE_LEN];
    stream.read_exact(&mut hello)?;
    if &hello[..8] != MAGIC {
        return Err(RendezvousError::NotOurs);
    }
    let theirs = Nonce(nonce_at(&hello[8..]));
    let own = Nonce::generate()?;
    let proof = secret.prove("connect", MAGIC, &own, &theirs);
    let mut out = Vec::with_capacity(8 + NONCE_LEN + PROOF_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&own.0);
    out.extend_from_slice(&proof);
    stream.write_all(&out)?;
    let mut answer = [0u8; PROOF_LEN];
    // An acceptor that refuses our proof closes the connection: say so rather than "not ours".
    stream.read_exact(&mut answer).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset => RendezvousError::BadProof,
        _ => e.into(),
    })?;
    if !secret.verify(&answer, "accept", MAGIC, &theirs, &own) {
        return Err(RendezvousError::BadProof);
    }
    Ok(Channel { stream })
}

fn nonce_at(bytes: &[u8]) -> [u8; NONCE_LEN] {
    let mut n = [0u8; NONCE_LEN];
    n.copy_from_slice(&bytes[..NONCE_LEN]);
    n
}

/// The acceptor's side of the proofs on one connection.
fn prove_acceptor(
    mut stream: TcpStream,
    secret: &Key,
    deadline: Instant,
) -> Result<Channel, RendezvousError> {
    stream.set_nonblocking(false)?;
    let left = deadline
        .saturating_duration_since(Instant::now())
        .min(PROOF_TIMEOUT)
        .max(Duration::from_millis(1));
    stream.set_read_timeout(Some(left))?;
    stream.set_nodelay(true)?;
    let own = Nonce::generate()?;
    let mut hello = Vec::with_capacity(8 + NONCE_LEN);
    hello.extend_from_slice(MAGIC);
    hello.extend_from_slice(&own.0);
    stream.write_all(&hello)?;
    let mut reply = [0u8; 8 + NONCE_LEN + PROOF_LEN];
    stream.read_exact(&mut reply)?;
    if &reply[..8] != MAGIC {
        return Err(RendezvousError::NotOurs);
    }
    let theirs = Nonce(nonce_at(&reply[8..]));
    if !secret.verify(&reply[8 + NONCE_LEN..], "connect", MAGIC, &theirs, &own) {
        return Err(RendezvousError::BadProof);
    }
    stream.write_all(&secret.prove("accept", MAGIC, &own, &theirs))?;
    Ok(Channel { stream })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddr};

    const T: Duration = Duration::from_secs(10);

    fn listener() -> (TcpListener, SocketAddrV4) {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let SocketAddr::V4(a) = l.local_addr().unwrap() else {
            panic!("not IPv4")
        };
        (l, a)
    }

    #[test]
    fn both_sides_prove_the_secret_and_exchange_messages_both_ways() {
        let (l, addr) = listener();
        let key = Key::from_bytes([7; 32]);
        let k2 = key.clone();
        let acceptor = std::thread::spawn(move || {
            let mut ch = accept(&l, &k2, T).unwrap();
            let got = ch.recv(64, T).unwrap();
            ch.send(b"cards of the accepting side").unwrap();
            got
        });
        let mut ch = connect(addr, &key, T).unwrap();
        ch.send(b"cards of the connecting side").unwrap();
        assert_eq!(ch.recv(64, T).unwrap(), b"cards of the accepting side");
        assert_eq!(acceptor.join().unwrap(), b"cards of the connecting side");
    }

    #[test]
    fn a_stranger_is_refused_and_the_acceptor_waits_on() {
        let (l, addr) = listener();
        let key = Key::from_bytes([7; 32]);
        let k2 = key.clone();
        let acceptor = std::thread::spawn(move || {
            let mut ch = accept(&l, &k2, T).unwrap();
            ch.recv(16, T).unwrap()
        });
        let wrong = Key::from_bytes([8; 32]);
        assert!(matches!(
            connect(addr, &wrong, T),
            Err(RendezvousError::BadProof)
        ));
        // Someone who speaks another protocol: says garbage and leaves.
        let mut junk = TcpStream::connect(addr).unwrap();
        junk.write_all(&[0u8; 56]).unwrap();
        drop(junk);
        let mut ch = connect(addr, &key, T).unwrap();
        ch.send(b"member").unwrap();
        assert_eq!(acceptor.join().unwrap(), b"member");
    }

    #[test]
    fn a_connector_refuses_an_impostor_acceptor() {
        let (l, addr) = listener();
        let impostor = std::thread::spawn(move || {
            // Holds another secret: cannot check the connector, answers with its own proof.
            let (mut s, _) = l.accept().unwrap();
            let own = Nonce([1; NONCE_LEN]);
            let mut hello = MAGIC.to_vec();
            hello.extend_from_slice(&own.0);
            s.write_all(&hello).unwrap();
            let mut reply = [0u8; 8 + NONCE_LEN + PROOF_LEN];
            s.read_exact(&mut reply).unwrap();
            let theirs = Nonce(nonce_at(&reply[8..]));
            let fake = Key::from_bytes([9; 32]).prove("accept", MAGIC, &own, &theirs);
            s.write_all(&fake).unwrap();
        });
        let key = Key::from_bytes([7; 32]);
        assert!(matches!(
            connect(addr, &key, T),
            Err(RendezvousError::BadProof)
        ));
        impostor.join().unwrap();
    }

    #[test]
    fn nobody_coming_is_a_timeout_and_long_messages_are_refused() {
        let (l, addr) = listener();
        let key = Key::from_bytes([7; 32]);
        assert!(matches!(
            accept(&l, &key, Duration::from_millis(50)),
            Err(RendezvousError::Timeout)
        ));
        let k2 = key.clone();
        let acceptor = std::thread::spawn(move || {
            let mut ch = accept(&l, &k2, T).unwrap();
            ch.recv(4, T).map(drop)
        });
        let mut ch = connect(addr, &key, T).unwrap();
        ch.send(b"too long").unwrap();
        assert!(matches!(
            acceptor.join().unwrap(),
            Err(RendezvousError::TooLarge { len: 8, max: 4 })
        ));
    }
}
