//! What the tcp BTL puts on the wire and in the modex: frame headers, the connection handshake
//! and the published address record.
//!
//! Every layout is fixed, every multi-byte field is in network byte order (big-endian), and every
//! field sits at an offset that is a multiple of its size, so a peer of any architecture reads the
//! same bytes the same way. Bytes from a peer enter only through the `parse` functions, which check
//! lengths and reserved fields first and never panic.

use std::net::Ipv4Addr;

use stormpi_bootstrap::auth::{self, Key, Nonce, Proof};

/// Bytes of a frame header.
pub const FRAME_LEN: usize = 8;

/// Frame header: `[u32 length][u8 active-message tag][u8 pad][2 bytes zero]`, then `pad` bytes
/// to skip, then `length` bytes of fragment (the PML's header and payload).
///
/// The pad lets a sender put a payload it writes straight from user memory at the same offset
/// within a 64-byte line as the user's buffer: this CPU's copy (`rep movsb`, in the kernel's
/// socket copies too) runs many times slower when the destination is 1 to 31 bytes past the
/// source's offset within a page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Bytes of fragment after the header and pad.
    pub len: u32,
    /// Active-message tag.
    pub tag: u8,
    /// Bytes between the header and the fragment (at most [`PAD_MAX`]).
    pub pad: u8,
}

/// Most pad bytes a frame carries.
pub const PAD_MAX: u8 = 63;

/// Why a frame header was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The reserved bytes are not zero, or the pad is above [`PAD_MAX`]: the stream is
    /// corrupt or out of step.
    Padding,
    /// The length is above what this receiver accepts.
    TooLong {
        /// Claimed length.
        len: u32,
        /// Largest accepted.
        max: u32,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Padding => {
                f.write_str("corrupt frame header (reserved bytes set, or pad too long)")
            }
            FrameError::TooLong { len, max } => write!(
                f,
                "a fragment of {len} bytes, above btl_tcp_max_send_size ({max})"
            ),
        }
    }
}

impl Frame {
    /// Writes the header into the first [`FRAME_LEN`] bytes of `out`.
    pub fn emit(&self, out: &mut [u8]) {
        let [l0, l1, l2, l3] = self.len.to_be_bytes();
        out[..FRAME_LEN].copy_from_slice(&[l0, l1, l2, l3, self.tag, self.pad, 0, 0]);
    }

    /// Bytes from the start of the header to the fragment.
    pub fn skip(&self) -> usize {
        FRAME_LEN + self.pad as usize
    }

    /// Bytes of the whole frame.
    pub fn total(&self) -> usize {
        self.skip() + self.len as usize
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> [u8; FRAME_LEN] {
        let mut b = [0; FRAME_LEN];
        self.emit(&mut b);
        b
    }

    /// Reads a header whose fragment may be at most `max` bytes.
    pub fn parse(b: &[u8; FRAME_LEN], max: u32) -> Result<Frame, FrameError> {
        let [l0, l1, l2, l3, tag, pad, z0, z1] = *b;
        let len = u32::from_be_bytes([l0, l1, l2, l3]);
        if [z0, z1] != [0; 2] || pad > PAD_MAX {
            return Err(FrameError::Padding);
        }
        if len > max {
            return Err(FrameError::TooLong { len, max });
        }
        Ok(Frame { len, tag, pad })
    }
}

/// Bytes of the challenge.
pub const CHALLENGE_LEN: usize = 24;
/// Bytes of the handshake.
pub const HANDSHAKE_LEN: usize = 68;
/// First four bytes of every connection, in each direction: "STCP".
pub const MAGIC: [u8; 4] = *b"STCP";
/// The protocol version this build speaks (3: challenge and proofs instead of the bare secret).
pub const VERSION: u16 = 3;
/// Bytes of the job secret.
pub const SECRET_LEN: usize = auth::KEY_LEN;
/// Bytes of the handshake that its proof covers (all before the proof).
const SIGNED_LEN: usize = 36;

/// The role of a connecting process's handshake in its proof.
pub const CONNECT: &str = "stormpi tcp connect";
/// The role of the handshake with which an accepting process answers on the connection.
pub const ANSWER: &str = "stormpi tcp answer";

/// The first bytes an accepting process sends, before it reads anything: its nonce, which the
/// connecting process's proof must cover.
///
/// | offset | size | field |
/// | --- | --- | --- |
/// | 0 | 4 | magic `STCP` |
/// | 4 | 2 | protocol version |
/// | 6 | 2 | zero |
/// | 8 | 16 | the acceptor's nonce |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Challenge {
    /// The acceptor's nonce.
    pub nonce: Nonce,
}

/// The handshake: the first bytes a connecting process sends once it has the challenge, and
/// those an accepting process sends first when it answers on the connection.
///
/// | offset | size | field |
/// | --- | --- | --- |
/// | 0 | 4 | magic `STCP` |
/// | 4 | 2 | protocol version |
/// | 6 | 2 | flags: bit 0 [`FLAG_FOLLOWS`], the others zero |
/// | 8 | 16 | the sender's nonce |
/// | 24 | 4 | sender's rank |
/// | 28 | 4 | receiver's rank (who the sender means to reach) |
/// | 32 | 4 | sender's largest fragment (`btl_tcp_max_send_size`) |
/// | 36 | 32 | proof: HMAC-SHA-256 under the job secret of bytes 0..36, the sender's role ([`CONNECT`] or [`ANSWER`]), its nonce and the other side's |
///
/// The secret itself never crosses the wire, and each proof covers the other side's fresh
/// nonce, so a recorded handshake is refused on any other connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handshake {
    /// The sender's nonce.
    pub nonce: Nonce,
    /// Sender's rank.
    pub from: u32,
    /// Receiver's rank.
    pub to: u32,
    /// Largest fragment the sender sends.
    pub max_frag: u32,
    /// The sender's frames on this connection come after those on another connection it opened
    /// to the receiver earlier, which it is closing: deliver them once that one has ended.
    pub follows: bool,
    /// The proof (see [`Handshake::sign`]).
    pub proof: Proof,
}

/// Handshake flag: see [`Handshake::follows`].
pub const FLAG_FOLLOWS: u16 = 1;

mod hs_field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: Range<usize> = 4..6;
    pub const FLAGS: Range<usize> = 6..8;
    pub const NONCE: Range<usize> = 8..24;
    pub const FROM: Range<usize> = 24..28;
    pub const TO: Range<usize> = 28..32;
    pub const MAX_FRAG: Range<usize> = 32..36;
    pub const PROOF: Range<usize> = 36..68;
}

/// Why a challenge or handshake was refused (the acceptor's own checks of ranks and proof come
/// after this).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// Not a stormpi tcp connection.
    BadMagic,
    /// Another protocol version.
    Version(u16),
    /// Flags this build does not know.
    Flags(u16),
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::BadMagic => f.write_str("bad magic (not a stormpi tcp connection)"),
            HandshakeError::Version(v) => {
                write!(f, "protocol version {v} (this build speaks {VERSION})")
            }
            HandshakeError::Flags(x) => write!(f, "unknown handshake flags {x:#06x}"),
        }
    }
}

/// Checks magic, version and flags (the first 8 bytes of both messages); the flags.
fn parse_head(b: &[u8]) -> Result<u16, HandshakeError> {
    if b[hs_field::MAGIC] != MAGIC {
        return Err(HandshakeError::BadMagic);
    }
    let version = u16::from_be_bytes([b[4], b[5]]);
    if version != VERSION {
        return Err(HandshakeError::Version(version));
    }
    Ok(u16::from_be_bytes([b[6], b[7]]))
}

/// Whether the first `prefix.len()` bytes of a connection can still be a challenge or handshake:
/// lets either side drop garbage before it has read a whole one.
pub fn plausible_prefix(prefix: &[u8]) -> bool {
    let n = prefix.len().min(MAGIC.len());
    prefix[..n] == MAGIC[..n]
}

impl Challenge {
    /// The challenge as bytes.
    pub fn to_bytes(&self) -> [u8; CHALLENGE_LEN] {
        let mut b = [0; CHALLENGE_LEN];
        b[hs_field::MAGIC].copy_from_slice(&MAGIC);
        b[hs_field::VERSION].copy_from_slice(&VERSION.to_be_bytes());
        b[hs_field::NONCE].copy_from_slice(&self.nonce.0);
        b
    }

    /// Reads a challenge.
    pub fn parse(b: &[u8; CHALLENGE_LEN]) -> Result<Challenge, HandshakeError> {
        match parse_head(b)? {
            0 => {}
            flags => return Err(HandshakeError::Flags(flags)),
        }
        let mut nonce = [0; auth::NONCE_LEN];
        nonce.copy_from_slice(&b[hs_field::NONCE]);
        Ok(Challenge {
            nonce: Nonce(nonce),
        })
    }
}

impl Handshake {
    /// The handshake as bytes.
    pub fn to_bytes(&self) -> [u8; HANDSHAKE_LEN] {
        let mut b = [0; HANDSHAKE_LEN];
        b[..SIGNED_LEN].copy_from_slice(&self.signed());
        b[hs_field::PROOF].copy_from_slice(&self.proof);
        b
    }

    /// The bytes the proof covers.
    fn signed(&self) -> [u8; SIGNED_LEN] {
        let mut b = [0; SIGNED_LEN];
        b[hs_field::MAGIC].copy_from_slice(&MAGIC);
        b[hs_field::VERSION].copy_from_slice(&VERSION.to_be_bytes());
        let flags = if self.follows { FLAG_FOLLOWS } else { 0 };
        b[hs_field::FLAGS].copy_from_slice(&flags.to_be_bytes());
        b[hs_field::NONCE].copy_from_slice(&self.nonce.0);
        b[hs_field::FROM].copy_from_slice(&self.from.to_be_bytes());
        b[hs_field::TO].copy_from_slice(&self.to.to_be_bytes());
        b[hs_field::MAX_FRAG].copy_from_slice(&self.max_frag.to_be_bytes());
        b
    }

    /// Sets the proof that the sender, in `role`, holds `secret`, for the exchange in which
    /// the other side's nonce is `theirs`.
    pub fn sign(mut self, secret: &Key, role: &str, theirs: &Nonce) -> Handshake {
        self.proof = secret.prove(role, &self.signed(), &self.nonce, theirs);
        self
    }

    /// Whether the proof is right for a sender in `role` holding `secret`, where the receiver's
    /// own nonce in the exchange is `ours`.
    pub fn verify(&self, secret: &Key, role: &str, ours: &Nonce) -> bool {
        secret.verify(&self.proof, role, &self.signed(), &self.nonce, ours)
    }

    /// Reads a handshake (its proof still to be verified).
    pub fn parse(b: &[u8; HANDSHAKE_LEN]) -> Result<Handshake, HandshakeError> {
        let flags = parse_head(b)?;
        if flags & !FLAG_FOLLOWS != 0 {
            return Err(HandshakeError::Flags(flags));
        }
        let be32 = |r: std::ops::Range<usize>| {
            u32::from_be_bytes([b[r.start], b[r.start + 1], b[r.start + 2], b[r.start + 3]])
        };
        let mut nonce = [0; auth::NONCE_LEN];
        nonce.copy_from_slice(&b[hs_field::NONCE]);
        let mut proof = [0; auth::PROOF_LEN];
        proof.copy_from_slice(&b[hs_field::PROOF]);
        Ok(Handshake {
            nonce: Nonce(nonce),
            from: be32(hs_field::FROM),
            to: be32(hs_field::TO),
            max_frag: be32(hs_field::MAX_FRAG),
            follows: flags & FLAG_FOLLOWS != 0,
            proof,
        })
    }
}

/// Bytes of a published address.
pub const ADDR_LEN: usize = 8;
/// Version of the address record.
pub const ADDR_VERSION: u8 = 1;

/// A module's address as published in the modex under `btl.tcp.<index>`:
///
/// | offset | size | field |
/// | --- | --- | --- |
/// | 0 | 1 | record version (1) |
/// | 1 | 1 | prefix length of the interface's subnet (0..=32) |
/// | 2 | 2 | port |
/// | 4 | 4 | IPv4 address |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddrRecord {
    /// Interface address.
    pub addr: Ipv4Addr,
    /// Subnet prefix length.
    pub prefix: u8,
    /// Listening port.
    pub port: u16,
}

/// Why a published address was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddrError {
    /// Not [`ADDR_LEN`] bytes.
    Length(usize),
    /// Another record version.
    Version(u8),
    /// Prefix length above 32.
    Prefix(u8),
    /// Port 0.
    Port,
    /// An unspecified, multicast or broadcast address.
    Address(Ipv4Addr),
}

impl std::fmt::Display for AddrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AddrError::Length(n) => write!(f, "{n} bytes instead of {ADDR_LEN}"),
            AddrError::Version(v) => write!(f, "record version {v} (expected {ADDR_VERSION})"),
            AddrError::Prefix(p) => write!(f, "prefix length {p}"),
            AddrError::Port => f.write_str("port 0"),
            AddrError::Address(a) => write!(f, "unusable address {a}"),
        }
    }
}

impl AddrRecord {
    /// The record as bytes.
    pub fn to_bytes(&self) -> [u8; ADDR_LEN] {
        let mut b = [0; ADDR_LEN];
        b[0] = ADDR_VERSION;
        b[1] = self.prefix;
        b[2..4].copy_from_slice(&self.port.to_be_bytes());
        b[4..8].copy_from_slice(&self.addr.octets());
        b
    }

    /// Reads a record.
    pub fn parse(b: &[u8]) -> Result<AddrRecord, AddrError> {
        if b.len() != ADDR_LEN {
            return Err(AddrError::Length(b.len()));
        }
        if b[0] != ADDR_VERSION {
            return Err(AddrError::Version(b[0]));
        }
        if b[1] > 32 {
            return Err(AddrError::Prefix(b[1]));
        }
        let port = u16::from_be_bytes([b[2], b[3]]);
        if port == 0 {
            return Err(AddrError::Port);
        }
        let addr = Ipv4Addr::new(b[4], b[5], b[6], b[7]);
        if addr.is_unspecified() || addr.is_multicast() || addr.is_broadcast() {
            return Err(AddrError::Address(addr));
        }
        Ok(AddrRecord {
            addr,
            prefix: b[1],
            port,
        })
    }
}

/// Modex key of module `index`'s address.
pub fn addr_key(index: usize) -> String {
    format!("btl.tcp.{index}")
}

/// Modex key of the number of modules a process published (a `u32`, network order).
pub const COUNT_KEY: &str = "btl.tcp.count";
/// Modex key of the job secret (published by rank 0).
pub const SECRET_KEY: &str = "btl.tcp.secret";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_header_fixture() {
        let f = Frame {
            len: 0x0102_0304,
            tag: 0xab,
            pad: 0,
        };
        let bytes = [0x01, 0x02, 0x03, 0x04, 0xab, 0, 0, 0];
        assert_eq!(f.to_bytes(), bytes);
        assert_eq!(Frame::parse(&bytes, u32::MAX), Ok(f));
        assert_eq!(
            Frame::parse(&[0, 0, 0, 0, 1, 0, 0, 0], 0),
            Ok(Frame {
                len: 0,
                tag: 1,
                pad: 0
            })
        );
        let padded = Frame {
            len: 5,
            tag: 1,
            pad: 40,
        };
        assert_eq!(padded.to_bytes(), [0, 0, 0, 5, 1, 40, 0, 0]);
        assert_eq!(Frame::parse(&padded.to_bytes(), 5), Ok(padded));
        assert_eq!((padded.skip(), padded.total()), (48, 53));
    }

    #[test]
    fn frame_header_checks() {
        assert_eq!(
            Frame::parse(&[0, 0, 0, 9, 1, 0, 0, 0], 8),
            Err(FrameError::TooLong { len: 9, max: 8 })
        );
        assert_eq!(Frame::parse(&[0, 0, 0, 8, 1, 0, 0, 0], 8).unwrap().len, 8);
        for i in 6..8 {
            let mut b = [0, 0, 0, 1, 1, 0, 0, 0];
            b[i] = 1;
            assert_eq!(Frame::parse(&b, 8), Err(FrameError::Padding));
        }
        assert_eq!(
            Frame::parse(&[0, 0, 0, 1, 1, PAD_MAX + 1, 0, 0], 8),
            Err(FrameError::Padding)
        );
        // Emit writes zero reserved bytes over whatever was there.
        let mut b = [0xff; 8];
        Frame {
            len: 3,
            tag: 2,
            pad: 0,
        }
        .emit(&mut b);
        assert_eq!(b, [0, 0, 0, 3, 2, 0, 0, 0]);
    }

    const HS: [u8; HANDSHAKE_LEN] = [
        b'S', b'T', b'C', b'P', // magic
        0x00, 0x03, // version
        0x00, 0x00, // flags
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, // nonce
        0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, //
        0x00, 0x00, 0x01, 0x02, // from 258
        0x00, 0x00, 0x00, 0x07, // to 7
        0x00, 0x02, 0x00, 0x00, // max fragment 128 KiB
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, // proof
        17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, //
    ];

    fn hs() -> Handshake {
        Handshake {
            nonce: Nonce([
                0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
                0xee, 0xff,
            ]),
            from: 258,
            to: 7,
            max_frag: 128 << 10,
            follows: false,
            proof: core::array::from_fn(|i| i as u8 + 1),
        }
    }

    #[test]
    fn handshake_fixture() {
        assert_eq!(hs().to_bytes(), HS);
        assert_eq!(Handshake::parse(&HS), Ok(hs()));
        let mut follows = HS;
        follows[7] = 0x01;
        let h = Handshake {
            follows: true,
            ..hs()
        };
        assert_eq!(h.to_bytes(), follows);
        assert_eq!(Handshake::parse(&follows), Ok(h));
    }

    #[test]
    fn challenge_fixture() {
        let c = Challenge {
            nonce: Nonce([0xab; 16]),
        };
        let mut b = [0xab; CHALLENGE_LEN];
        b[..8].copy_from_slice(&[b'S', b'T', b'C', b'P', 0, 3, 0, 0]);
        assert_eq!(c.to_bytes(), b);
        assert_eq!(Challenge::parse(&b), Ok(c));
        b[7] = 1;
        assert_eq!(Challenge::parse(&b), Err(HandshakeError::Flags(1)));
        b[7] = 0;
        b[0] = b'G';
        assert_eq!(Challenge::parse(&b), Err(HandshakeError::BadMagic));
    }

    #[test]
    fn handshake_checks() {
        let mut b = HS;
        b[0] = b'X';
        assert_eq!(Handshake::parse(&b), Err(HandshakeError::BadMagic));
        let mut b = HS;
        b[5] = 2;
        assert_eq!(Handshake::parse(&b), Err(HandshakeError::Version(2)));
        let mut b = HS;
        b[6] = 0x80;
        assert_eq!(Handshake::parse(&b), Err(HandshakeError::Flags(0x8000)));
        b[6] = 0;
        b[7] = 0x03;
        assert_eq!(Handshake::parse(&b), Err(HandshakeError::Flags(0x0003)));
        assert!(plausible_prefix(b""));
        assert!(plausible_prefix(b"ST"));
        assert!(plausible_prefix(&HS));
        assert!(!plausible_prefix(b"GET / HTTP/1.1"));
        assert!(!plausible_prefix(b"SX"));
    }

    /// A proof holds only for its secret, role, fields and the other side's nonce.
    #[test]
    fn proofs_bind_secret_role_fields_and_nonce() {
        let secret = Key::from_bytes([3; SECRET_LEN]);
        let ours = Nonce([9; 16]);
        let h = hs().sign(&secret, CONNECT, &ours);
        assert!(h.verify(&secret, CONNECT, &ours));
        let back = Handshake::parse(&h.to_bytes()).unwrap();
        assert!(back.verify(&secret, CONNECT, &ours));
        assert!(!h.verify(&secret, ANSWER, &ours));
        assert!(!h.verify(&secret, CONNECT, &Nonce([8; 16])));
        assert!(!h.verify(&Key::from_bytes([4; SECRET_LEN]), CONNECT, &ours));
        for changed in [
            Handshake { from: 1, ..h },
            Handshake { to: 1, ..h },
            Handshake { max_frag: 1, ..h },
            Handshake { follows: true, ..h },
            Handshake {
                nonce: Nonce([1; 16]),
                ..h
            },
        ] {
            assert!(!changed.verify(&secret, CONNECT, &ours), "{changed:?}");
        }
    }

    #[test]
    fn addr_record_fixture() {
        let r = AddrRecord {
            addr: Ipv4Addr::new(10, 7, 0, 2),
            prefix: 24,
            port: 0x1234,
        };
        let bytes = [1, 24, 0x12, 0x34, 10, 7, 0, 2];
        assert_eq!(r.to_bytes(), bytes);
        assert_eq!(AddrRecord::parse(&bytes), Ok(r));
    }

    #[test]
    fn addr_record_checks() {
        let ok = [1, 8, 0, 80, 127, 0, 0, 1];
        assert!(AddrRecord::parse(&ok).is_ok());
        assert_eq!(AddrRecord::parse(&ok[..7]), Err(AddrError::Length(7)));
        assert_eq!(
            AddrRecord::parse(&[ok, ok].concat()),
            Err(AddrError::Length(16))
        );
        let mut b = ok;
        b[0] = 2;
        assert_eq!(AddrRecord::parse(&b), Err(AddrError::Version(2)));
        let mut b = ok;
        b[1] = 33;
        assert_eq!(AddrRecord::parse(&b), Err(AddrError::Prefix(33)));
        let mut b = ok;
        b[3] = 0;
        assert_eq!(AddrRecord::parse(&b), Err(AddrError::Port));
        for a in [[0, 0, 0, 0], [224, 0, 0, 1], [255, 255, 255, 255]] {
            let mut b = ok;
            b[4..].copy_from_slice(&a);
            assert_eq!(AddrRecord::parse(&b), Err(AddrError::Address(a.into())));
        }
    }

    #[test]
    fn keys() {
        assert_eq!(addr_key(0), "btl.tcp.0");
        assert_eq!(addr_key(3), "btl.tcp.3");
    }
}
