//! Storage for messages that arrived before a receive wanted them.
//!
//! A record holds the envelope; its payload (an eager message, or the first chunk of a
//! rendezvous) is copied into a chain of fixed-size chunks. Records and chunks come from pools
//! sized by parameters; when either runs out, the arriving fragment is refused with
//! [`crate::btl::Delivery::Retry`] and stays in its transport — back-pressure, not loss.

use crate::arena::{Arena, Sizer};
use crate::datatype::convertor::Unpacker;
use crate::datatype::table::TypeTable;
use crate::error::Result;
use crate::list::Link;
use crate::rte::ProcId;
use crate::wire::Envelope;

const NIL: u32 = u32::MAX;

/// What kind of message a record holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnexKind {
    /// A whole eager message.
    Eager,
    /// The start of a rendezvous.
    Rndv {
        /// Total packed length.
        msg_len: u64,
        /// Sender's request id.
        sreq: u64,
        /// The sender's registration of the whole message, when it offers it for reading
        /// (an `RGET`; the receiver may still ask for fragments).
        read: Option<u64>,
    },
}

/// A message waiting for a receive (or for its turn, or for its communicator).
pub struct UnexMsg {
    /// Sending process.
    pub proc: ProcId,
    /// Envelope.
    pub env: Envelope,
    /// Kind.
    pub kind: UnexKind,
    /// Payload bytes held.
    pub len: usize,
    /// First chunk of the payload.
    pub data: u32,
    /// Taken by a matched probe: invisible to receives and probes.
    pub claimed: bool,
    /// Link on a communicator's unexpected or out-of-order list, or the orphan list.
    pub link: Link,
    /// Link on the unexpected queue's bucket of its (source, tag).
    pub hlink: Link,
}

impl UnexMsg {
    /// Length of the whole message in packed bytes.
    pub fn msg_len(&self) -> u64 {
        match self.kind {
            UnexKind::Eager => self.len as u64,
            UnexKind::Rndv { msg_len, .. } => msg_len,
        }
    }
}

pub(crate) fn unex_link(m: &UnexMsg) -> &Link {
    &m.link
}

pub(crate) fn hash_link(m: &UnexMsg) -> &Link {
    &m.hlink
}

/// A pool of fixed-size chunks for payloads.
pub struct Chunks {
    data: &'static mut [u8],
    next: &'static mut [u32],
    chunk: usize,
    free: u32,
    nfree: u32,
}

impl Chunks {
    /// Arena bytes for `count` chunks of `chunk` bytes.
    pub fn size(sizer: &mut Sizer, count: u32, chunk: usize) {
        sizer
            .slice::<u8>(count as usize * chunk)
            .slice::<u32>(count as usize);
    }

    /// `count` chunks of `chunk` bytes.
    pub fn new(arena: &mut Arena, count: u32, chunk: usize) -> Result<Chunks> {
        Ok(Chunks {
            data: arena.slice(count as usize * chunk, |_| 0)?,
            next: arena.slice(count as usize, |i| {
                if i + 1 < count as usize {
                    i as u32 + 1
                } else {
                    NIL
                }
            })?,
            chunk,
            free: if count > 0 { 0 } else { NIL },
            nfree: count,
        })
    }

    /// Chunks needed for `len` bytes.
    fn needed(&self, len: usize) -> u32 {
        len.div_ceil(self.chunk) as u32
    }

    /// Whether `len` bytes can be stored now.
    pub fn fits(&self, len: usize) -> bool {
        self.needed(len) <= self.nfree
    }

    /// Stores `bytes`, returning the chain's first chunk (`u32::MAX` for no bytes), or `None` if
    /// there are not enough free chunks.
    pub fn store(&mut self, bytes: &[u8]) -> Option<u32> {
        let need = self.needed(bytes.len());
        if need > self.nfree {
            return None;
        }
        let mut head = NIL;
        let mut prev = NIL;
        for piece in bytes.chunks(self.chunk) {
            let c = self.free;
            self.free = self.next[c as usize];
            self.nfree -= 1;
            let at = c as usize * self.chunk;
            self.data[at..at + piece.len()].copy_from_slice(piece);
            self.next[c as usize] = NIL;
            if prev == NIL {
                head = c;
            } else {
                self.next[prev as usize] = c;
            }
            prev = c;
        }
        Some(head)
    }

    /// Unpacks the `len` bytes of chain `head` at message offset 0; returns bytes written.
    pub fn unpack(&self, types: &TypeTable, head: u32, len: usize, conv: &mut Unpacker) -> usize {
        let mut c = head;
        let mut pos = 0;
        let mut written = 0;
        while pos < len && c != NIL {
            let n = self.chunk.min(len - pos);
            let at = c as usize * self.chunk;
            written += conv.unpack(types, pos, &self.data[at..at + n]);
            pos += n;
            c = self.next[c as usize];
        }
        written
    }

    /// Returns chain `head` to the pool.
    pub fn free(&mut self, head: u32) {
        let mut c = head;
        while c != NIL {
            let n = self.next[c as usize];
            self.next[c as usize] = self.free;
            self.free = c;
            self.nfree += 1;
            c = n;
        }
    }

    /// Free chunks.
    pub fn available(&self) -> u32 {
        self.nfree
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;
    use std::vec::Vec;

    #[test]
    fn store_unpack_free_round_trip() {
        let mut c = Chunks::new(&mut Arena::new(leak(1 << 16)), 8, 16).unwrap();
        let msg: Vec<u8> = (0..100u8).collect();
        assert!(!c.fits(200));
        let head = c.store(&msg).unwrap();
        assert_eq!(c.available(), 1);
        assert!(c.store(&msg[..17]).is_none(), "needs two, one free");
        let mut out = [0u8; 100];
        // SAFETY: `out` outlives the unpacker and is untouched meanwhile.
        let mut u = unsafe { Unpacker::contiguous(out.as_mut_ptr(), 60) };
        let types = crate::datatype::table::tests::table();
        assert_eq!(
            c.unpack(&types, head, 100, &mut u),
            60,
            "clipped to capacity"
        );
        assert_eq!(&out[..60], &msg[..60]);
        assert_eq!(out[60], 0);
        c.free(head);
        assert_eq!(c.available(), 8);
        assert_eq!(c.store(&[]), Some(NIL));
    }
}
