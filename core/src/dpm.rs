//! Dynamic process management: processes of other jobs joining an engine after init, and what
//! the core needs from a platform for MPI's ports.
//!
//! **Ports.** A port (`MPI_Open_port`) is a network address where a process will accept
//! connections from another job; its name is the capability to connect (it carries a secret the
//! connecting side must prove it holds). The platform owns the sockets ([`Ports`]); the core
//! hands names through and talks over the proven connection ([`LinkId`]).
//!
//! **Business cards.** A process of another job is added to the engine with its card
//! ([`Card`]): its rank in its own job, the first process slot its side gives this side's
//! members (so each process knows its own id in the other's table: that base plus its index on
//! its side), its architecture descriptor, its host name, and the entries its BTL modules
//! publish for such peers ([`crate::btl::Btl::card`]). Cards are plain bytes, bounded by
//! [`MAX_CARD`]; [`CardModex`] answers a module's modex questions about the joining processes
//! from them, plus the keys below that the engine adds.

use crate::arch::Arch;
use crate::btl::{Modex, ModexPut};
use crate::error::{Error, Result};
use crate::rte::ProcId;

/// A proven byte connection between the roots of two jobs, held by the platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkId(pub u32);

/// A platform's ports.
pub trait Ports: Sync {
    /// Opens a port, writes its name (no NUL) into `out` and returns the name's length; the
    /// name fits in `MPI_MAX_PORT_NAME - 1` bytes.
    fn open(&self, out: &mut [u8]) -> Result<usize>;
    /// Closes the port `name` opened by this process: `MPI_ERR_PORT` if there is none.
    fn close(&self, name: &[u8]) -> Result<()>;
    /// Waits at the open port `name` for a side that proves the port's secret (strangers are
    /// refused and the port keeps serving), at most `timeout_ms`; the link to it and the
    /// port's secret. `MPI_ERR_PORT` if this process has no such port open.
    fn accept(&self, name: &[u8], timeout_ms: u64) -> Result<(LinkId, [u8; 32])>;
    /// Goes to the port `name` of another job and proves its secret, at most `timeout_ms`;
    /// the link and the port's secret. `MPI_ERR_PORT` if the name is not a port or the other
    /// side refuses the proof.
    fn connect(&self, name: &[u8], timeout_ms: u64) -> Result<(LinkId, [u8; 32])>;
    /// The link over the already connected socket `fd` (`MPI_Comm_join`): the socket is the
    /// capability, so nothing is proven; the two sides draw the link's secret together and
    /// which of them acts as the accepting side (the third value: this one). The caller's
    /// descriptor stays open and its own.
    fn join(&self, fd: i32, timeout_ms: u64) -> Result<(LinkId, [u8; 32], bool)> {
        let _ = (fd, timeout_ms);
        Err(Error::unsupported("MPI_Comm_join on this platform"))
    }
    /// Sends one message on `link`.
    fn send(&self, link: LinkId, msg: &[u8]) -> Result<()>;
    /// Receives one message on `link` into `out` (a longer one is an error), at most
    /// `timeout_ms`; returns its length.
    fn recv(&self, link: LinkId, out: &mut [u8], timeout_ms: u64) -> Result<usize>;
    /// Ends `link`.
    fn end(&self, link: LinkId);
}

/// Most bytes of one business card.
pub const MAX_CARD: usize = 512;

/// Most modex entries on one card.
pub const MAX_ENTRIES: usize = 16;

/// Most bytes of a card's host name.
pub const MAX_HOST: usize = 64;

/// Engine key: the secret of the link the processes met over, for their transports to prove.
pub const KEY_SECRET: &str = "dpm.secret";
/// Engine key: this process's id in the joining process's table (a big-endian `u32`).
pub const KEY_ME_THERE: &str = "dpm.me_there";
/// Engine key: the joining process's rank in its own job (a big-endian `u32`).
pub const KEY_RANK: &str = "dpm.rank";
/// Engine key: 1 if the joining process runs on this host (same host name), else 0.
pub const KEY_SAME_HOST: &str = "dpm.same_host";

fn card_error(what: &'static str) -> Error {
    Error::internal(what)
}

/// Writes a card into a buffer.
pub struct CardWriter<'a> {
    out: &'a mut [u8],
    len: usize,
    count_at: usize,
}

impl<'a> CardWriter<'a> {
    /// A card of the process of rank `rank` in its job, whose side gives the other side's
    /// members slots from `base`, of architecture `arch` on host `host`.
    pub fn new(
        out: &'a mut [u8],
        rank: u32,
        base: u32,
        arch: Arch,
        host: &[u8],
    ) -> Result<CardWriter<'a>> {
        let host = &host[..host.len().min(MAX_HOST)];
        let mut w = CardWriter {
            out,
            len: 0,
            count_at: 0,
        };
        w.bytes(&rank.to_be_bytes())?;
        w.bytes(&base.to_be_bytes())?;
        w.bytes(&arch.to_wire())?;
        w.bytes(&[host.len() as u8])?;
        w.bytes(host)?;
        w.count_at = w.len;
        w.bytes(&[0])?;
        Ok(w)
    }

    fn bytes(&mut self, b: &[u8]) -> Result<()> {
        let end = self.len + b.len();
        if end > self.out.len() || end > MAX_CARD {
            return Err(card_error("a business card is longer than MAX_CARD bytes"));
        }
        self.out[self.len..end].copy_from_slice(b);
        self.len = end;
        Ok(())
    }

    /// The card's length so far.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is written (never: a card has a fixed head).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl ModexPut for CardWriter<'_> {
    fn put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        if key.len() > u8::MAX as usize || value.len() > u16::MAX as usize {
            return Err(card_error("a business card entry is too long"));
        }
        if self.out[self.count_at] as usize >= MAX_ENTRIES {
            return Err(card_error("a business card has too many entries"));
        }
        self.bytes(&[key.len() as u8])?;
        self.bytes(key.as_bytes())?;
        self.bytes(&(value.len() as u16).to_be_bytes())?;
        self.bytes(value)?;
        self.out[self.count_at] += 1;
        Ok(())
    }
}

/// A card read from bytes (untrusted: every length is checked).
#[derive(Clone, Copy, Debug)]
pub struct Card<'a> {
    /// Rank in its own job.
    pub rank: u32,
    /// First slot its side gives the members of the other side.
    pub base: u32,
    /// Its architecture, if the descriptor is valid.
    pub arch: Option<Arch>,
    /// Its host name.
    pub host: &'a [u8],
    entries: &'a [u8],
    count: u8,
}

fn take<'a>(b: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
    if b.len() < n {
        return Err(card_error("a business card is cut short"));
    }
    let (head, rest) = b.split_at(n);
    *b = rest;
    Ok(head)
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl<'a> Card<'a> {
    /// Reads a card.
    /// Only what [`CardWriter`] could have written is accepted: at most [`MAX_CARD`] bytes, a
    /// host name of at most [`MAX_HOST`], at most [`MAX_ENTRIES`] entries, nothing after the last.
    pub fn parse(mut b: &'a [u8]) -> Result<Card<'a>> {
        if b.len() > MAX_CARD {
            return Err(card_error("a business card is longer than MAX_CARD bytes"));
        }
        let rank = be32(take(&mut b, 4)?);
        let base = be32(take(&mut b, 4)?);
        let a = take(&mut b, 4)?;
        let arch = Arch::from_wire([a[0], a[1], a[2], a[3]]).ok();
        let hl = take(&mut b, 1)?[0] as usize;
        if hl > MAX_HOST {
            return Err(card_error("a business card's host name is too long"));
        }
        let host = take(&mut b, hl)?;
        let count = take(&mut b, 1)?[0];
        if count as usize > MAX_ENTRIES {
            return Err(card_error("a business card has too many entries"));
        }
        let card = Card {
            rank,
            base,
            arch,
            host,
            entries: b,
            count,
        };
        // Walk the entries once, so that later lookups cannot fail.
        let mut e = b;
        for _ in 0..count {
            let kl = take(&mut e, 1)?[0] as usize;
            take(&mut e, kl)?;
            let vl = take(&mut e, 2)?;
            take(&mut e, u16::from_be_bytes([vl[0], vl[1]]) as usize)?;
        }
        if !e.is_empty() {
            return Err(card_error("a business card has bytes after its last entry"));
        }
        Ok(card)
    }

    /// The value of entry `key`.
    pub fn get(&self, key: &str) -> Option<&'a [u8]> {
        self.entries()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|(_, v)| v)
    }

    /// The modex entries, as (key, value), in the order they were written.
    pub fn entries(&self) -> Entries<'a> {
        Entries {
            rest: self.entries,
            left: self.count,
        }
    }
}

/// The entries of a [`Card`] (checked when the card was parsed).
#[derive(Clone, Debug)]
pub struct Entries<'a> {
    rest: &'a [u8],
    left: u8,
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a [u8], &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let e = &mut self.rest;
        let kl = take(e, 1).ok()?[0] as usize;
        let k = take(e, kl).ok()?;
        let vl = take(e, 2).ok()?;
        let v = take(e, u16::from_be_bytes([vl[0], vl[1]]) as usize).ok()?;
        Some((k, v))
    }
}

/// A list of cards: each a big-endian `u16` length, then the card.
#[derive(Clone, Copy, Debug)]
pub struct Cards<'a> {
    bytes: &'a [u8],
    count: u32,
}

impl<'a> Cards<'a> {
    /// Reads `count` cards from `bytes`, checking each; nothing may follow the last.
    pub fn parse(bytes: &'a [u8], count: u32) -> Result<Cards<'a>> {
        let cards = Cards { bytes, count };
        let mut b = bytes;
        for _ in 0..count {
            let l = take(&mut b, 2)?;
            Card::parse(take(&mut b, u16::from_be_bytes([l[0], l[1]]) as usize)?)?;
        }
        if !b.is_empty() {
            return Err(card_error(
                "a list of business cards has bytes after its last card",
            ));
        }
        Ok(cards)
    }

    /// How many cards.
    pub fn len(&self) -> u32 {
        self.count
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Card `i`.
    pub fn get(&self, i: u32) -> Option<Card<'a>> {
        let mut b = self.bytes;
        for j in 0..self.count {
            let l = take(&mut b, 2).ok()?;
            let c = take(&mut b, u16::from_be_bytes([l[0], l[1]]) as usize).ok()?;
            if j == i {
                return Card::parse(c).ok();
            }
        }
        None
    }
}

/// Appends `card` to a card list in `out` at `at`; returns the new end.
pub fn push_card(out: &mut [u8], at: usize, card: &[u8]) -> Result<usize> {
    let end = at + 2 + card.len();
    if end > out.len() {
        return Err(card_error("the business cards do not fit their buffer"));
    }
    out[at..at + 2].copy_from_slice(&(card.len() as u16).to_be_bytes());
    out[at + 2..end].copy_from_slice(card);
    Ok(end)
}

/// The modex of processes joining from another job: their cards, slots from `first` on.
pub struct CardModex<'a> {
    /// The joining processes' cards, in the order of their slots.
    pub cards: Cards<'a>,
    /// The slot of the first card.
    pub first: ProcId,
    /// This process's index among its own side's members (its id there is the card's base
    /// plus this).
    pub my_index: u32,
    /// The link's secret.
    pub secret: [u8; 32],
    /// This process's host name.
    pub host: &'a [u8],
}

impl Modex for CardModex<'_> {
    fn get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>> {
        let Some(card) = proc
            .0
            .checked_sub(self.first.0)
            .and_then(|i| self.cards.get(i))
        else {
            return Ok(None);
        };
        let mut word = [0u8; 4];
        let value: &[u8] = match key {
            KEY_SECRET => &self.secret,
            KEY_ME_THERE => {
                word = card.base.saturating_add(self.my_index).to_be_bytes();
                &word
            }
            KEY_RANK => {
                word = card.rank.to_be_bytes();
                &word
            }
            KEY_SAME_HOST => {
                word[0] = (card.host == self.host) as u8;
                &word[..1]
            }
            "arch" => match card.arch {
                Some(a) => {
                    word = a.to_wire();
                    &word
                }
                None => return Ok(None),
            },
            _ => match card.get(key) {
                Some(v) => v,
                None => return Ok(None),
            },
        };
        let n = value.len().min(out.len());
        out[..n].copy_from_slice(&value[..n]);
        Ok(Some(n))
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    #[test]
    fn cards_round_trip_and_cut_ones_are_refused() {
        let mut buf = [0u8; MAX_CARD];
        let mut w = CardWriter::new(&mut buf, 3, 70, Arch::LOCAL, b"nodeA").unwrap();
        w.put("tcp.addr.0", &[1, 2, 3]).unwrap();
        w.put("x", &[]).unwrap();
        let n = w.len();
        let mut list = [0u8; 2 * MAX_CARD];
        let end = push_card(&mut list, 0, &buf[..n]).unwrap();
        let end = push_card(&mut list, end, &buf[..n]).unwrap();
        let cards = Cards::parse(&list[..end], 2).unwrap();
        let c = cards.get(1).unwrap();
        assert_eq!((c.rank, c.base, c.host), (3, 70, &b"nodeA"[..]));
        assert_eq!(c.get("tcp.addr.0"), Some(&[1u8, 2, 3][..]));
        assert_eq!(c.get("x"), Some(&[][..]));
        assert_eq!(c.get("y"), None);
        let mut m = CardModex {
            cards,
            first: ProcId(10),
            my_index: 2,
            secret: [5; 32],
            host: b"nodeA",
        };
        let mut out = [0u8; 32];
        assert_eq!(m.get(ProcId(11), KEY_ME_THERE, &mut out).unwrap(), Some(4));
        assert_eq!(be32(&out), 72);
        assert_eq!(m.get(ProcId(11), KEY_SAME_HOST, &mut out).unwrap(), Some(1));
        assert_eq!(out[0], 1);
        assert_eq!(m.get(ProcId(12), "arch", &mut out).unwrap(), None);
        for cut in 0..n {
            assert!(
                Card::parse(&buf[..cut]).is_err(),
                "a card cut at {cut} parsed"
            );
        }
        assert!(Cards::parse(&list[..end - 1], 2).is_err());
        assert!(
            Cards::parse(&list[..end], 1).is_err(),
            "a trailing card was ignored"
        );
        let mut long = buf;
        long[n] = 0;
        assert!(
            Card::parse(&long[..n + 1]).is_err(),
            "a trailing byte was ignored"
        );
        let entries: std::vec::Vec<_> = c.entries().collect();
        assert_eq!(
            entries,
            [(&b"tcp.addr.0"[..], &[1u8, 2, 3][..]), (&b"x"[..], &[][..])]
        );
    }
}
