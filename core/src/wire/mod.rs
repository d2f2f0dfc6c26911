//! On-the-wire headers of the point-to-point protocols.
//!
//! Each header is a `#[repr(C)]` struct whose every field sits at an offset that is a multiple of
//! its own size, with the padding written out as fields: zerocopy's derives refuse implicit
//! padding at compile time, so the layout is the same on every architecture. A sender writes its
//! headers in its own byte order and says which in the [`flags::BIG_ENDIAN`] bit; a receiver of the
//! other order swaps the fields (nothing is swapped between peers of the same order).
//!
//! Raw structs are the wire form; [`Header`] is the parsed, validated form. Bytes from a peer only
//! ever enter through [`Header::parse`], which checks lengths and codes and never panics.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::arch::Endian;

/// Header type codes (first byte of every header).
pub mod kind {
    /// Eager message: match header, then the whole payload.
    pub const MATCH: u8 = 1;
    /// Rendezvous start: match header, length, sender's request, then the first chunk.
    pub const RNDV: u8 = 2;
    /// Receiver's answer to a rendezvous: go on from `offset`.
    pub const ACK: u8 = 3;
    /// A later fragment of a rendezvous message.
    pub const FRAG: u8 = 4;
    /// Rendezvous start offering the whole message for the receiver to read (RDMA get): match
    /// header, length, sender's request, the key the sender's transport registered it under.
    pub const RGET: u8 = 5;
    /// Receiver's answer to an `RGET` once it has read the message (or failed to).
    pub const FIN: u8 = 6;
}

/// Bits of the second byte of every header.
pub mod flags {
    /// The header's multi-byte fields are big-endian.
    pub const BIG_ENDIAN: u8 = 0x01;
    /// Every flag bit this version knows.
    pub const KNOWN: u8 = BIG_ENDIAN;
}

const NATIVE_FLAGS: u8 = match Endian::NATIVE {
    Endian::Big => flags::BIG_ENDIAN,
    Endian::Little => 0,
};

/// Match header: the envelope of an eager message. 16 bytes: the small-message path lives on it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct MatchHdr {
    /// [`kind::MATCH`] (or [`kind::RNDV`] inside a [`RndvHdr`]).
    pub kind: u8,
    /// [`flags`].
    pub flags: u8,
    /// Context id of the communicator.
    pub ctx: u16,
    /// Sender's rank in the communicator.
    pub src: i32,
    /// Tag.
    pub tag: i32,
    /// Per-(communicator, sender→receiver) sequence number.
    pub seq: u16,
    /// Explicit padding to 16 bytes.
    pub pad: [u8; 2],
}

/// Rendezvous header: envelope, total length and the sender's request id. 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct RndvHdr {
    /// Envelope with `kind` = [`kind::RNDV`].
    pub m: MatchHdr,
    /// Bytes in the whole message (packed form).
    pub msg_len: u64,
    /// Sender's request id, echoed in the ACK.
    pub sreq: u64,
}

/// Acknowledgement of a rendezvous by the receiver. 32 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct AckHdr {
    /// [`kind::ACK`].
    pub kind: u8,
    /// [`flags`].
    pub flags: u8,
    /// Explicit padding so the ids are 8-aligned.
    pub pad: [u8; 6],
    /// The sender's request id, from the rendezvous header.
    pub sreq: u64,
    /// The receiver's request id, for the fragments.
    pub dreq: u64,
    /// Bytes the receiver already has; the sender continues from here.
    pub offset: u64,
}

/// A fragment of a rendezvous message after the ACK. 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct FragHdr {
    /// [`kind::FRAG`].
    pub kind: u8,
    /// [`flags`].
    pub flags: u8,
    /// Explicit padding so the fields are 8-aligned.
    pub pad: [u8; 6],
    /// Byte offset of this fragment's payload in the packed message.
    pub offset: u64,
    /// The receiver's request id, from the ACK.
    pub dreq: u64,
}

/// Rendezvous offering the message for reading. 40 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct RgetHdr {
    /// Envelope with `kind` = [`kind::RGET`], length and sender's request id.
    pub r: RndvHdr,
    /// The key of the sender's registration, for the receiver's transport.
    pub key: u64,
}

/// The receiver has read an `RGET` message. 24 bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct FinHdr {
    /// [`kind::FIN`].
    pub kind: u8,
    /// [`flags`].
    pub flags: u8,
    /// Explicit padding so the fields are 8-aligned.
    pub pad: [u8; 6],
    /// The sender's request id, from the `RGET` header.
    pub sreq: u64,
    /// 0: every byte read; 1: the read failed.
    pub failed: u64,
}

const _: () = assert!(core::mem::size_of::<MatchHdr>() == 16);
const _: () = assert!(core::mem::size_of::<RgetHdr>() == 40);
const _: () = assert!(core::mem::size_of::<FinHdr>() == 24);
const _: () = assert!(core::mem::size_of::<RndvHdr>() == 32);
const _: () = assert!(core::mem::size_of::<AckHdr>() == 32);
const _: () = assert!(core::mem::size_of::<FragHdr>() == 24);

/// Bytes of each header.
pub const MATCH_LEN: usize = core::mem::size_of::<MatchHdr>();
/// Bytes of a rendezvous header.
pub const RNDV_LEN: usize = core::mem::size_of::<RndvHdr>();
/// Bytes of an ACK header.
pub const ACK_LEN: usize = core::mem::size_of::<AckHdr>();
/// Bytes of a fragment header.
pub const FRAG_LEN: usize = core::mem::size_of::<FragHdr>();
/// Bytes of an `RGET` header.
pub const RGET_LEN: usize = core::mem::size_of::<RgetHdr>();
/// Bytes of a `FIN` header.
pub const FIN_LEN: usize = core::mem::size_of::<FinHdr>();

/// The matching envelope of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Context id.
    pub ctx: u16,
    /// Sender's rank in the communicator.
    pub src: i32,
    /// Tag.
    pub tag: i32,
    /// Sequence number.
    pub seq: u16,
}

/// A parsed, byte-order-corrected header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Header {
    /// Eager message.
    Match(Envelope),
    /// Rendezvous start.
    Rndv {
        /// Envelope.
        env: Envelope,
        /// Total packed length.
        msg_len: u64,
        /// Sender's request id.
        sreq: u64,
    },
    /// Rendezvous acknowledgement.
    Ack {
        /// Sender's request id.
        sreq: u64,
        /// Receiver's request id.
        dreq: u64,
        /// Bytes the receiver already has.
        offset: u64,
    },
    /// Rendezvous fragment.
    Frag {
        /// Offset of the payload.
        offset: u64,
        /// Receiver's request id.
        dreq: u64,
    },
    /// Rendezvous offering the message for reading.
    Rget {
        /// Envelope.
        env: Envelope,
        /// Total packed length.
        msg_len: u64,
        /// Sender's request id.
        sreq: u64,
        /// Key of the sender's registration.
        key: u64,
    },
    /// The receiver read an `RGET` message.
    Fin {
        /// Sender's request id.
        sreq: u64,
        /// Whether the read failed.
        failed: bool,
    },
}

/// Why a fragment was rejected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than its header.
    Short {
        /// Header type.
        kind: u8,
        /// Bytes present.
        len: usize,
    },
    /// Unknown header type.
    UnknownKind(u8),
    /// Flag bits this version does not know.
    UnknownFlags(u8),
    /// Empty fragment.
    Empty,
}

impl core::fmt::Display for WireError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            WireError::Short { kind, len } => {
                write!(f, "header of type {kind} truncated to {len} bytes")
            }
            WireError::UnknownKind(k) => write!(f, "unknown header type {k}"),
            WireError::UnknownFlags(fl) => write!(f, "unknown header flags {fl:#04x}"),
            WireError::Empty => f.write_str("empty fragment"),
        }
    }
}

#[inline]
fn swapped(flags: u8) -> bool {
    (flags & flags::BIG_ENDIAN) != NATIVE_FLAGS
}

impl MatchHdr {
    #[inline]
    fn envelope(&self, swap: bool) -> Envelope {
        if swap {
            Envelope {
                ctx: self.ctx.swap_bytes(),
                src: self.src.swap_bytes(),
                tag: self.tag.swap_bytes(),
                seq: self.seq.swap_bytes(),
            }
        } else {
            Envelope {
                ctx: self.ctx,
                src: self.src,
                tag: self.tag,
                seq: self.seq,
            }
        }
    }

    /// A match header for `env`, in this machine's byte order.
    #[inline]
    pub fn new(kind: u8, env: &Envelope) -> MatchHdr {
        MatchHdr {
            kind,
            flags: NATIVE_FLAGS,
            ctx: env.ctx,
            src: env.src,
            tag: env.tag,
            seq: env.seq,
            pad: [0; 2],
        }
    }
}

#[inline]
fn fix64(v: u64, swap: bool) -> u64 {
    if swap {
        v.swap_bytes()
    } else {
        v
    }
}

impl Header {
    /// The envelope and payload of `frag` if it is an eager message from a peer of this byte
    /// order — what [`Header::parse`] returns for it — and `None` for anything else, which
    /// `parse` then takes. The receive path tries this first: nearly every small message is one.
    #[inline(always)]
    pub fn parse_native_match(frag: &[u8]) -> Option<(Envelope, &[u8])> {
        match frag {
            [kind::MATCH, NATIVE_FLAGS, ..] => {
                let (h, payload) = MatchHdr::read_from_prefix(frag).ok()?;
                Some((h.envelope(false), payload))
            }
            _ => None,
        }
    }

    /// Parses the header at the start of `frag`; returns it and the payload after it.
    #[inline]
    pub fn parse(frag: &[u8]) -> Result<(Header, &[u8]), WireError> {
        let (&kind, rest) = frag.split_first().ok_or(WireError::Empty)?;
        let fl = *rest.first().ok_or(WireError::Short {
            kind,
            len: frag.len(),
        })?;
        if fl & !flags::KNOWN != 0 {
            return Err(WireError::UnknownFlags(fl));
        }
        let short = WireError::Short {
            kind,
            len: frag.len(),
        };
        let swap = swapped(fl);
        match kind {
            kind::MATCH => {
                let (h, payload) = MatchHdr::read_from_prefix(frag).map_err(|_| short)?;
                Ok((Header::Match(h.envelope(swap)), payload))
            }
            kind::RNDV => {
                let (h, payload) = RndvHdr::read_from_prefix(frag).map_err(|_| short)?;
                Ok((
                    Header::Rndv {
                        env: h.m.envelope(swap),
                        msg_len: fix64(h.msg_len, swap),
                        sreq: fix64(h.sreq, swap),
                    },
                    payload,
                ))
            }
            kind::ACK => {
                let (h, payload) = AckHdr::read_from_prefix(frag).map_err(|_| short)?;
                Ok((
                    Header::Ack {
                        sreq: fix64(h.sreq, swap),
                        dreq: fix64(h.dreq, swap),
                        offset: fix64(h.offset, swap),
                    },
                    payload,
                ))
            }
            kind::FRAG => {
                let (h, payload) = FragHdr::read_from_prefix(frag).map_err(|_| short)?;
                Ok((
                    Header::Frag {
                        offset: fix64(h.offset, swap),
                        dreq: fix64(h.dreq, swap),
                    },
                    payload,
                ))
            }
            kind::RGET => {
                let (h, payload) = RgetHdr::read_from_prefix(frag).map_err(|_| short)?;
                Ok((
                    Header::Rget {
                        env: h.r.m.envelope(swap),
                        msg_len: fix64(h.r.msg_len, swap),
                        sreq: fix64(h.r.sreq, swap),
                        key: fix64(h.key, swap),
                    },
                    payload,
                ))
            }
            kind::FIN => {
                let (h, payload) = FinHdr::read_from_prefix(frag).map_err(|_| short)?;
                Ok((
                    Header::Fin {
                        sreq: fix64(h.sreq, swap),
                        failed: h.failed != 0,
                    },
                    payload,
                ))
            }
            k => Err(WireError::UnknownKind(k)),
        }
    }

    /// Bytes this header takes on the wire.
    pub const fn len(&self) -> usize {
        match self {
            Header::Match(_) => MATCH_LEN,
            Header::Rndv { .. } => RNDV_LEN,
            Header::Ack { .. } => ACK_LEN,
            Header::Frag { .. } => FRAG_LEN,
            Header::Rget { .. } => RGET_LEN,
            Header::Fin { .. } => FIN_LEN,
        }
    }

    /// Always false: no header is empty. (Present because `len` is.)
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// The bytes of an eager message's match header for `env`, in this machine's byte order:
    /// [`Header::emit`] of a `Header::Match`, built in place for the small-message path.
    #[inline(always)]
    pub fn match_bytes(env: &Envelope) -> [u8; MATCH_LEN] {
        zerocopy::transmute!(MatchHdr::new(kind::MATCH, env))
    }

    /// Writes the header, in this machine's byte order, at the start of `out`; returns its length.
    /// `out` must be at least [`Header::len`] bytes.
    pub fn emit(&self, out: &mut [u8]) -> usize {
        let res = match *self {
            Header::Match(env) => MatchHdr::new(kind::MATCH, &env)
                .write_to_prefix(out)
                .is_ok(),
            Header::Rndv { env, msg_len, sreq } => RndvHdr {
                m: MatchHdr::new(kind::RNDV, &env),
                msg_len,
                sreq,
            }
            .write_to_prefix(out)
            .is_ok(),
            Header::Ack { sreq, dreq, offset } => AckHdr {
                kind: kind::ACK,
                flags: NATIVE_FLAGS,
                pad: [0; 6],
                sreq,
                dreq,
                offset,
            }
            .write_to_prefix(out)
            .is_ok(),
            Header::Frag { offset, dreq } => FragHdr {
                kind: kind::FRAG,
                flags: NATIVE_FLAGS,
                pad: [0; 6],
                offset,
                dreq,
            }
            .write_to_prefix(out)
            .is_ok(),
            Header::Rget {
                env,
                msg_len,
                sreq,
                key,
            } => RgetHdr {
                r: RndvHdr {
                    m: MatchHdr::new(kind::RGET, &env),
                    msg_len,
                    sreq,
                },
                key,
            }
            .write_to_prefix(out)
            .is_ok(),
            Header::Fin { sreq, failed } => FinHdr {
                kind: kind::FIN,
                flags: NATIVE_FLAGS,
                pad: [0; 6],
                sreq,
                failed: failed as u64,
            }
            .write_to_prefix(out)
            .is_ok(),
        };
        assert!(res, "emit into a buffer shorter than the header");
        self.len()
    }
}

/// Converts a header written by this machine into the other byte order, as a peer of the other
/// order would have written it. Used by tests and by the heterogeneous test BTL.
pub fn to_foreign_order(frag: &mut [u8]) -> Result<(), WireError> {
    let (h, _) = Header::parse(frag)?;
    let foreign = NATIVE_FLAGS ^ flags::BIG_ENDIAN;
    match h {
        Header::Match(env) | Header::Rndv { env, .. } | Header::Rget { env, .. } => {
            let m = MatchHdr {
                kind: frag[0],
                flags: foreign,
                ctx: env.ctx.swap_bytes(),
                src: env.src.swap_bytes(),
                tag: env.tag.swap_bytes(),
                seq: env.seq.swap_bytes(),
                pad: [0; 2],
            };
            m.write_to_prefix(frag).map_err(|_| WireError::Empty)?;
            if let Header::Rndv { msg_len, sreq, .. } | Header::Rget { msg_len, sreq, .. } = h {
                frag[16..24].copy_from_slice(&msg_len.swap_bytes().to_ne_bytes());
                frag[24..32].copy_from_slice(&sreq.swap_bytes().to_ne_bytes());
            }
            if let Header::Rget { key, .. } = h {
                frag[32..40].copy_from_slice(&key.swap_bytes().to_ne_bytes());
            }
        }
        Header::Ack { sreq, dreq, offset } => {
            frag[1] = foreign;
            frag[8..16].copy_from_slice(&sreq.swap_bytes().to_ne_bytes());
            frag[16..24].copy_from_slice(&dreq.swap_bytes().to_ne_bytes());
            frag[24..32].copy_from_slice(&offset.swap_bytes().to_ne_bytes());
        }
        Header::Frag { offset, dreq } => {
            frag[1] = foreign;
            frag[8..16].copy_from_slice(&offset.swap_bytes().to_ne_bytes());
            frag[16..24].copy_from_slice(&dreq.swap_bytes().to_ne_bytes());
        }
        Header::Fin { sreq, failed } => {
            frag[1] = foreign;
            frag[8..16].copy_from_slice(&sreq.swap_bytes().to_ne_bytes());
            frag[16..24].copy_from_slice(&(failed as u64).swap_bytes().to_ne_bytes());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENV: Envelope = Envelope {
        ctx: 0x0102,
        src: 3,
        tag: 0x0a0b0c0d,
        seq: 0x0506,
    };

    #[test]
    fn little_endian_match_header_fixture_parses() {
        // type 1, flags 0 (little-endian), ctx 0x0102, src 3, tag 0x0a0b0c0d, seq 0x0506, pad, payload "hi"
        let bytes = [
            1, 0, 0x02, 0x01, 3, 0, 0, 0, 0x0d, 0x0c, 0x0b, 0x0a, 0x06, 0x05, 0, 0, b'h', b'i',
        ];
        let (h, payload) = Header::parse(&bytes).unwrap();
        assert_eq!(h, Header::Match(ENV));
        assert_eq!(payload, b"hi");
    }

    #[test]
    fn match_bytes_are_the_emitted_match_header() {
        let mut out = [0xffu8; MATCH_LEN];
        assert_eq!(Header::Match(ENV).emit(&mut out), MATCH_LEN);
        let bytes = Header::match_bytes(&ENV);
        assert_eq!(bytes, out);
        let (h, payload) = Header::parse(&bytes).unwrap();
        assert_eq!(h, Header::Match(ENV));
        assert!(payload.is_empty());
    }

    #[test]
    fn big_endian_match_header_fixture_parses() {
        let bytes = [
            1, 1, 0x01, 0x02, 0, 0, 0, 3, 0x0a, 0x0b, 0x0c, 0x0d, 0x05, 0x06, 0, 0,
        ];
        let (h, payload) = Header::parse(&bytes).unwrap();
        assert_eq!(h, Header::Match(ENV));
        assert!(payload.is_empty());
    }

    #[test]
    fn every_header_round_trips_in_both_orders() {
        let headers = [
            Header::Match(ENV),
            Header::Rndv {
                env: ENV,
                msg_len: 1 << 40,
                sreq: 0x1122_3344_5566_7788,
            },
            Header::Ack {
                sreq: 1,
                dreq: 2,
                offset: 3 << 33,
            },
            Header::Frag {
                offset: 4096,
                dreq: u64::MAX - 1,
            },
            Header::Rget {
                env: ENV,
                msg_len: 1 << 20,
                sreq: 0x0102_0304_0506_0708,
                key: 0xa1b2_c3d4_e5f6_0718,
            },
            Header::Fin {
                sreq: 0x1122_3344_5566_7788,
                failed: true,
            },
            Header::Fin {
                sreq: 5,
                failed: false,
            },
        ];
        for h in headers {
            let mut buf = [0u8; 40];
            let n = h.emit(&mut buf);
            assert_eq!(n, h.len());
            assert_eq!(Header::parse(&buf[..n]).unwrap().0, h);
            to_foreign_order(&mut buf[..n]).unwrap();
            assert_ne!(buf[1] & flags::BIG_ENDIAN, NATIVE_FLAGS, "flag flipped");
            assert_eq!(
                Header::parse(&buf[..n]).unwrap().0,
                h,
                "foreign order parses the same"
            );
        }
    }

    #[test]
    fn the_eager_fast_path_agrees_with_parse() {
        let mut buf = [0u8; 40];
        for h in [
            Header::Match(ENV),
            Header::Rndv {
                env: ENV,
                msg_len: 7,
                sreq: 8,
            },
            Header::Fin {
                sreq: 5,
                failed: false,
            },
        ] {
            let n = h.emit(&mut buf);
            let want = match Header::parse(&buf[..n + 3]).unwrap() {
                (Header::Match(env), payload) => Some((env, payload)),
                _ => None,
            };
            assert_eq!(Header::parse_native_match(&buf[..n + 3]), want);
            // A foreign-order match goes the long way (parse swaps it).
            to_foreign_order(&mut buf[..n]).unwrap();
            assert_eq!(Header::parse_native_match(&buf[..n]), None);
        }
        for bad in [&[][..], &[1], &[1, 0, 0], &[1, 0x80, 0, 0]] {
            assert_eq!(Header::parse_native_match(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn corrupt_fragments_are_rejected_not_panicking() {
        assert_eq!(Header::parse(&[]), Err(WireError::Empty));
        assert_eq!(
            Header::parse(&[1]),
            Err(WireError::Short { kind: 1, len: 1 })
        );
        assert_eq!(
            Header::parse(&[1, 0, 0]),
            Err(WireError::Short { kind: 1, len: 3 })
        );
        assert_eq!(Header::parse(&[9, 0, 0, 0]), Err(WireError::UnknownKind(9)));
        assert_eq!(
            Header::parse(&[1, 0x80]),
            Err(WireError::UnknownFlags(0x80))
        );
        let mut buf = [0u8; 32];
        Header::Ack {
            sreq: 1,
            dreq: 2,
            offset: 3,
        }
        .emit(&mut buf);
        assert!(Header::parse(&buf[..31]).is_err());
        // every prefix of every header is rejected or parsed, never a panic
        for k in 0..=7u8 {
            for len in 0..40 {
                let mut b = [0u8; 40];
                b[0] = k;
                let _ = Header::parse(&b[..len]);
            }
        }
    }
}
