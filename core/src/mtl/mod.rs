//! The Matching Transport Layer: transports that do MPI matching themselves.
//!
//! Beside the ob1 PML (matching in the engine, byte movers below it) Open MPI has the `cm` PML:
//! a thin layer over an MTL, a transport whose network does the tag matching — Portals 4 match
//! lists, PSM, MX. stormpi has the same split: with the parameter `pml` set to `cm` the engine
//! hands point-to-point operations to an [`Mtl`] the platform supplies, instead of matching them
//! itself over the BTLs ([`crate::pml::Ob1`] then only keeps the requests).
//!
//! An MTL gets whole messages: an envelope ([`MtlEnvelope`]: context id, sender's rank in the
//! communicator, tag), a convertor over the user's data and a [`Token`] naming the request. It
//! reports completions through an [`MtlSink`] from [`Mtl::progress`]. A send's convertor it owns
//! while it works on it; a receive's stays in the PML's request, lent for the call: the MTL takes
//! the memory it may write ([`Unpacker::dest_ref`]) or makes a bounce buffer, and reports what
//! arrived ([`MtlData`]) for the PML to account or unpack (a convertor is hundreds of bytes:
//! moving it in and out on every receive was a good part of the path's cost). Contiguous data
//! goes straight between user buffers and the network (`Packer::data_ref`,
//! `Unpacker::dest_ref`), anything else is packed into a bounce buffer first or unpacked from one
//! afterwards. It never refuses an operation for lack of room: what it cannot start now it queues
//! and starts from `progress`.
//!
//! [`MatchBits`] is the usual packing of an envelope into 64 match bits (the Portals 4 MTL's, also
//! how Open MPI's portals4 MTL does it): tag in the low 32 bits, the source rank in the next 16,
//! the context id in the next 14, two protocol bits on top (`LONG`, which receives ignore, and
//! `CONTROL`, which they do not). A receive's selector becomes match and ignore bits; `MPI_ANY_TAG` ignores the tag's low 31 bits but not its sign, so library
//! tags (negative) never match it.

use crate::btl::{PeerInfo, Token};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::table::TypeTable;
use crate::error::{Error, Result};
use crate::pml::request::{SendMode, Source, TagSel};
use crate::rte::ProcId;

/// What a message carries for matching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtlEnvelope {
    /// Context id of the communicator.
    pub ctx: u16,
    /// Sender's rank in the communicator (the receiver's view: a rank of the remote group of an
    /// intercommunicator).
    pub src: u32,
    /// Tag (negative for the library's own messages).
    pub tag: i32,
}

/// Which messages a receive or probe accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtlSelector {
    /// Context id of the communicator.
    pub ctx: u16,
    /// Accepted senders (communicator ranks).
    pub src: Source,
    /// Accepted tags.
    pub tag: TagSel,
}

impl MtlSelector {
    /// Whether a message with `env` is accepted.
    pub fn accepts(&self, env: &MtlEnvelope) -> bool {
        env.ctx == self.ctx && self.src.accepts(env.src as i32) && self.tag.accepts(env.tag)
    }
}

/// What a probe or a completed receive learned of a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtlMatch {
    /// Sender's communicator rank.
    pub src: u32,
    /// Tag.
    pub tag: i32,
    /// Length of the message as sent, in packed bytes.
    pub len: u64,
}

/// What a finished receive brought, for its convertor.
#[derive(Clone, Copy, Debug)]
pub enum MtlData<'a> {
    /// This many bytes were written where the convertor's [`Unpacker::dest_ref`] said.
    Placed(usize),
    /// These packed bytes are to be unpacked (a bounce buffer).
    Packed(&'a [u8]),
}

/// A receive that [`Mtl::progress_waiting`] found complete, its bytes already where the
/// receive's convertor said ([`MtlData::Placed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtlPlaced {
    /// Bytes written into the receive's memory.
    pub got: usize,
    /// The message it matched.
    pub m: MtlMatch,
}

/// The token of the PML's *blocking receive* (`MPI_Recv`): at most one is under way at a time,
/// and its poster waits for it at once through [`Mtl::progress_waiting`]. No pool key has it
/// (pool indices stay far below `u32::MAX`), so an MTL may keep that receive in a slot of its own.
pub const BLOCKING: Token = Token(u64::MAX);

/// A message taken by [`Mtl::improbe`], for [`Mtl::imrecv`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtlMessage(pub u64);

/// Limits of an MTL.
#[derive(Clone, Copy, Debug)]
pub struct MtlAttrs {
    /// Component name (`portals4`).
    pub component: &'static str,
    /// Largest context id plus one it can carry.
    pub max_contexts: u32,
    /// Largest communicator size it can carry.
    pub max_ranks: u32,
}

/// Receiver of an MTL's completions: the PML.
pub trait MtlSink {
    /// The send `token` finished: its buffer may be reused (and, for a synchronous send, the
    /// receive has matched), or it failed.
    fn send_done(&mut self, token: Token, result: Result<()>);

    /// The receive `token` finished: `data` is what arrived of the message `m` for the receive's
    /// convertor, or the receive failed with `error`.
    fn recv_done(
        &mut self,
        types: &TypeTable,
        token: Token,
        data: MtlData<'_>,
        m: MtlMatch,
        error: Option<Error>,
    );
}

/// A matching transport module.
pub trait Mtl: Send {
    /// Limits.
    fn attrs(&self) -> &MtlAttrs;

    /// Learns the job's processes (after the engine's modex fence).
    fn add_procs(&mut self, peers: &[PeerInfo]) -> Result<()> {
        let _ = peers;
        Ok(())
    }

    /// Sends `conv`'s message to process `dest` now if that needs no request: the MTL copies it
    /// (a short message) and takes care of it from here. `Ok(false)`: not done, `conv` untouched
    /// (the PML then starts it with [`Mtl::isend`]).
    fn send_now(
        &mut self,
        types: &TypeTable,
        dest: ProcId,
        env: MtlEnvelope,
        conv: &Packer,
    ) -> Result<bool> {
        let _ = (types, dest, env, conv);
        Ok(false)
    }

    /// [`Mtl::send_now`] of a message that is `data` as it stands (a predefined contiguous type
    /// in the user's buffer): a blocking send gives it without building a convertor. The default
    /// wraps it in one.
    fn send_bytes_now(
        &mut self,
        types: &TypeTable,
        dest: ProcId,
        env: MtlEnvelope,
        data: &[u8],
    ) -> Result<bool> {
        self.send_now(types, dest, env, &Packer::from_slice(data))
    }

    /// Starts sending `conv`'s message to process `dest` with envelope `env`. `Ok(true)`: done
    /// already (the data was copied; nothing is reported later); `Ok(false)`: the sink's
    /// [`MtlSink::send_done`] reports `token` later. A synchronous send completes only once the
    /// receive has matched.
    fn isend(
        &mut self,
        types: &TypeTable,
        dest: ProcId,
        env: MtlEnvelope,
        conv: Packer,
        mode: SendMode,
        token: Token,
    ) -> Result<bool>;

    /// Posts a receive into `conv`'s memory for messages `sel` accepts; [`MtlSink::recv_done`]
    /// reports it. The caller keeps `conv` (and its memory) unchanged until then.
    fn irecv(
        &mut self,
        types: &TypeTable,
        sel: MtlSelector,
        conv: &Unpacker,
        token: Token,
    ) -> Result<()>;

    /// The first message `sel` accepts that no receive has taken, without taking it.
    fn iprobe(&mut self, sel: MtlSelector) -> Result<Option<MtlMatch>>;

    /// Like [`Mtl::iprobe`], but takes the message for a later [`Mtl::imrecv`].
    fn improbe(&mut self, sel: MtlSelector) -> Result<Option<(MtlMessage, MtlMatch)>>;

    /// Receives a message taken by [`Mtl::improbe`] into `conv`'s memory (kept as for
    /// [`Mtl::irecv`]).
    fn imrecv(
        &mut self,
        types: &TypeTable,
        msg: MtlMessage,
        conv: &Unpacker,
        token: Token,
    ) -> Result<()>;

    /// Cancels receive `token` if it has not matched: true then (nothing is reported later);
    /// false if it matched (it completes normally).
    fn cancel(&mut self, token: Token) -> bool;

    /// Moves messages; reports completions to `sink`. Returns how much happened.
    fn progress(&mut self, types: &TypeTable, sink: &mut dyn MtlSink) -> usize;

    /// [`Mtl::progress`] for a caller that waits for the one receive `token` (a blocking
    /// `MPI_Recv`): when this round completes that receive with its bytes already in place, it
    /// is written to `placed` instead of reported to `sink`, so the waiter builds its status
    /// without a stop in the PML. Everything else goes to `sink` as with `progress`; the return
    /// value counts both. The default is `progress`.
    fn progress_waiting(
        &mut self,
        types: &TypeTable,
        sink: &mut dyn MtlSink,
        token: Token,
        placed: &mut Option<MtlPlaced>,
    ) -> usize {
        let _ = (token, placed);
        self.progress(types, sink)
    }

    /// The first step of [`Mtl::progress_waiting`] for the blocking receive ([`BLOCKING`]), in
    /// a call that needs no sink: `Some(n)` when the round is over — the receive handed back in
    /// `placed`, or nothing else to do — and `None` when it must go on through
    /// `progress_waiting` at once (which then starts with what this look found). The waiter's
    /// every round is this call, and nearly every one ends here, so what it keeps across its
    /// call into the network is as little as possible. The default always goes on.
    fn poll_waiting(&mut self, placed: &mut Option<MtlPlaced>) -> Option<usize> {
        let _ = placed;
        None
    }

    /// Whether sends that completed for MPI are still in flight (unacknowledged), so the process
    /// must keep progressing before it leaves.
    fn busy(&self) -> bool {
        false
    }
}

/// The packing of envelopes into 64 Portals match bits.
pub struct MatchBits;

impl MatchBits {
    /// Bits of the tag.
    pub const TAG_BITS: u32 = 32;
    /// Bits of the source rank.
    pub const SRC_BITS: u32 = 16;
    /// Bits of the context id.
    pub const CTX_BITS: u32 = 14;
    const SRC_SHIFT: u32 = Self::TAG_BITS;
    const CTX_SHIFT: u32 = Self::TAG_BITS + Self::SRC_BITS;
    /// Protocol flag: the message is longer than what the put carried (or synchronous): the
    /// receiver fetches the rest (possibly nothing) from the sender with a get.
    pub const LONG: u64 = 1 << 63;
    /// The transport's own messages (never matched by a receive: receives do not ignore it).
    pub const CONTROL: u64 = 1 << 62;
    /// Both protocol flags.
    pub const FLAGS: u64 = Self::LONG | Self::CONTROL;
    const SRC_MASK: u64 = ((1 << Self::SRC_BITS) - 1) << Self::SRC_SHIFT;
    const CTX_MASK: u64 = ((1 << Self::CTX_BITS) - 1) << Self::CTX_SHIFT;

    /// Largest context id plus one.
    pub const MAX_CONTEXTS: u32 = 1 << Self::CTX_BITS;
    /// Largest communicator size.
    pub const MAX_RANKS: u32 = 1 << Self::SRC_BITS;

    /// The match bits of a message (no protocol flags).
    pub const fn encode(env: &MtlEnvelope) -> u64 {
        ((env.ctx as u64) << Self::CTX_SHIFT) & Self::CTX_MASK
            | ((env.src as u64) << Self::SRC_SHIFT) & Self::SRC_MASK
            | env.tag as u32 as u64
    }

    /// The envelope in `bits` (protocol flags ignored).
    pub const fn decode(bits: u64) -> MtlEnvelope {
        MtlEnvelope {
            ctx: ((bits & Self::CTX_MASK) >> Self::CTX_SHIFT) as u16,
            src: ((bits & Self::SRC_MASK) >> Self::SRC_SHIFT) as u32,
            tag: bits as u32 as i32,
        }
    }

    /// Match and ignore bits of a receive with selector `sel`.
    pub const fn selector(sel: &MtlSelector) -> (u64, u64) {
        let mut bits = ((sel.ctx as u64) << Self::CTX_SHIFT) & Self::CTX_MASK;
        let mut ignore = Self::LONG;
        match sel.src {
            Source::Rank(r) => bits |= ((r as u64) << Self::SRC_SHIFT) & Self::SRC_MASK,
            Source::Any => ignore |= Self::SRC_MASK,
        }
        match sel.tag {
            TagSel::Tag(t) => bits |= t as u32 as u64,
            // The sign bit must be 0: user tags only.
            TagSel::Any => ignore |= 0x7fff_ffff,
        }
        (bits, ignore)
    }

    /// Whether a message with match bits `msg` is accepted by match/ignore bits `(bits, ignore)`.
    pub const fn matches(msg: u64, bits: u64, ignore: u64) -> bool {
        (msg ^ bits) & !ignore == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip_through_match_bits() {
        for env in [
            MtlEnvelope {
                ctx: 0,
                src: 0,
                tag: 0,
            },
            MtlEnvelope {
                ctx: 16383,
                src: 65535,
                tag: i32::MAX,
            },
            MtlEnvelope {
                ctx: 7,
                src: 3,
                tag: -5,
            },
        ] {
            let b = MatchBits::encode(&env);
            assert_eq!(b & MatchBits::FLAGS, 0);
            assert_eq!(MatchBits::decode(b | MatchBits::LONG), env);
        }
    }

    #[test]
    fn selectors_match_like_the_pml() {
        let envs = [
            MtlEnvelope {
                ctx: 1,
                src: 2,
                tag: 5,
            },
            MtlEnvelope {
                ctx: 1,
                src: 3,
                tag: 5,
            },
            MtlEnvelope {
                ctx: 1,
                src: 2,
                tag: -7,
            },
            MtlEnvelope {
                ctx: 2,
                src: 2,
                tag: 5,
            },
            MtlEnvelope {
                ctx: 1,
                src: 2,
                tag: 0,
            },
        ];
        let srcs = [Source::Rank(2), Source::Rank(3), Source::Any];
        let tags = [TagSel::Tag(5), TagSel::Tag(-7), TagSel::Any, TagSel::Tag(0)];
        for src in srcs {
            for tag in tags {
                let sel = MtlSelector { ctx: 1, src, tag };
                let (bits, ignore) = MatchBits::selector(&sel);
                for env in &envs {
                    let msg = MatchBits::encode(env) | MatchBits::LONG;
                    assert_eq!(
                        MatchBits::matches(msg, bits, ignore),
                        sel.accepts(env),
                        "{sel:?} against {env:?}"
                    );
                    let control = MatchBits::encode(env) | MatchBits::CONTROL;
                    assert!(!MatchBits::matches(control, bits, ignore));
                }
            }
        }
    }
}
