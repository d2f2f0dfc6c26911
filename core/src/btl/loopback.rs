//! The `self` BTL: messages a process sends to itself.
//!
//! Fragments are copied into a ring of variable-size records carved from the engine's memory and
//! handed to the sink at the next progress call. It has the highest exclusivity, so the own
//! process is never reached through any other module.

use core::sync::atomic::{AtomicU32, Ordering};

use super::{AmTag, Btl, BtlAttrs, BtlFlags, Delivery, Endpoint, Modex, PeerInfo, Sink};
use crate::arena::{Arena, Sizer};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::params::{Default, Kind, ParamDef, Params};
use crate::rte::ProcId;

/// `btl_self_eager_limit`.
pub static EAGER_LIMIT: ParamDef = ParamDef {
    name: "btl_self_eager_limit",
    kind: Kind::Int {
        min: 64,
        max: 1 << 30,
    },
    default: Default::Int(64 << 10),
    description: "Largest message (header included) the self BTL sends eagerly",
};

/// `btl_self_max_send_size`.
pub static MAX_SEND_SIZE: ParamDef = ParamDef {
    name: "btl_self_max_send_size",
    kind: Kind::Int {
        min: 64,
        max: 1 << 30,
    },
    default: Default::Int(64 << 10),
    description: "Largest fragment of the self BTL, header included",
};

/// `btl_self_queue_bytes`.
pub static QUEUE_BYTES: ParamDef = ParamDef {
    name: "btl_self_queue_bytes",
    kind: Kind::Int {
        min: 1 << 10,
        max: 1 << 34,
    },
    default: Default::Int(1 << 20),
    description: "Bytes of the self BTL's queue of undelivered fragments (fixed at init: a ring; a full one is back-pressure)",
};

/// Parameters of the self BTL.
pub static PARAMS: [&ParamDef; 3] = [&EAGER_LIMIT, &MAX_SEND_SIZE, &QUEUE_BYTES];

const REC_HDR: usize = 8;
const WRAP: u32 = u32::MAX;

const fn round8(n: usize) -> usize {
    (n + 7) & !7
}

/// The `self` BTL module.
pub struct Loopback {
    attrs: BtlAttrs,
    me: ProcId,
    ring: &'static mut [u8],
    head: usize,
    tail: usize,
    /// Where the reserved record goes, and bytes skipped at the end of the ring before it.
    reserved: Option<(usize, usize)>,
    /// The BML's wake word and this module's bit in it.
    wake: Option<(&'static AtomicU32, u32)>,
}

fn queue_len(params: &Params) -> usize {
    round8(params.usize(&QUEUE_BYTES))
}

impl Loopback {
    /// Tells the BML this module has work for its next poll.
    #[inline]
    fn raise(&self) {
        if let Some((wake, bit)) = self.wake {
            wake.fetch_or(bit, Ordering::Relaxed);
        }
    }

    /// Arena bytes the module needs.
    pub fn size(params: &Params, sizer: &mut Sizer) {
        sizer.slice::<u64>(queue_len(params) / 8);
    }

    /// Creates the module for process `me`.
    pub fn new(params: &Params, me: ProcId, arena: &mut Arena) -> Result<Loopback> {
        let max_send = params.usize(&MAX_SEND_SIZE);
        let eager = params.usize(&EAGER_LIMIT).min(max_send);
        let len = queue_len(params);
        if len < 2 * (REC_HDR + round8(max_send)) {
            return Err(Error::new(
                ErrorClass::Arg,
                Reason::BadParam {
                    name: QUEUE_BYTES.name,
                    allowed: crate::error::Allowed::Text(
                        "at least twice btl_self_max_send_size plus two record headers",
                    ),
                },
            ));
        }
        // Carve as u64 for 8-byte alignment of the record headers.
        let words = arena.slice(len / 8, |_| 0u64)?;
        let ring = zerocopy::IntoBytes::as_mut_bytes(words);
        Ok(Loopback {
            attrs: BtlAttrs {
                component: "self",
                eager_limit: eager,
                max_send_size: max_send,
                latency_ns: 0,
                bandwidth_mbps: 100_000,
                exclusivity: u32::MAX,
                flags: BtlFlags::SEND.union(BtlFlags::POLL_ON_WAKE),
                get_min: usize::MAX,
            },
            me,
            ring,
            head: 0,
            tail: 0,
            reserved: None,
            wake: None,
        })
    }

    fn cap(&self) -> usize {
        self.ring.len()
    }

    /// Hands the queued records to `sink` (out of line, so that `progress`'s empty check stays
    /// cheap).
    #[inline(never)]
    fn deliver(&mut self, sink: &mut dyn Sink) -> usize {
        let mut n = 0;
        while self.head < self.tail {
            let pos = self.head % self.cap();
            // Records start at multiples of 8 in a ring of a multiple of 8 bytes: every one has
            // its header. Were that broken, the records would stay queued.
            let Some((&[l0, l1, l2, l3, tag, ..], rest)) =
                self.ring[pos..].split_first_chunk::<REC_HDR>()
            else {
                debug_assert!(false, "self: record header past the ring's end");
                break;
            };
            let len = u32::from_ne_bytes([l0, l1, l2, l3]);
            if len == WRAP {
                self.head += self.cap() - pos;
                continue;
            }
            let len = len as usize;
            let tag = AmTag(tag);
            let frag = &rest[..len];
            let d = sink.deliver(self.me, tag, frag);
            if d == Delivery::Retry {
                break;
            }
            self.head += REC_HDR + round8(len);
            n += 1;
            if d == Delivery::Satisfied {
                break;
            }
        }
        if self.head == self.tail {
            // Empty: restart at the front so large records rarely need to wrap.
            self.head = 0;
            self.tail = 0;
        }
        n
    }
}

impl Btl for Loopback {
    fn attrs(&self) -> &BtlAttrs {
        &self.attrs
    }

    fn add_procs(
        &mut self,
        peers: &[PeerInfo],
        _modex: &mut dyn Modex,
        endpoints: &mut [Option<Endpoint>],
    ) -> Result<()> {
        for (p, ep) in peers.iter().zip(endpoints.iter_mut()) {
            *ep = (p.proc == self.me).then_some(Endpoint(0));
        }
        Ok(())
    }

    fn reserve(&mut self, _ep: Endpoint, len: usize) -> Option<&mut [u8]> {
        debug_assert!(len <= self.attrs.max_send_size);
        let rec = REC_HDR + round8(len);
        let free = self.cap() - (self.tail - self.head);
        let pos = self.tail % self.cap();
        let at_end = self.cap() - pos;
        let (start, skip) = if rec <= at_end { (pos, 0) } else { (0, at_end) };
        if skip + rec > free {
            self.reserved = None;
            return None;
        }
        self.reserved = Some((start, skip));
        Some(&mut self.ring[start + REC_HDR..start + REC_HDR + len])
    }

    fn commit(&mut self, _ep: Endpoint, tag: AmTag, len: usize) {
        let Some((start, skip)) = self.reserved.take() else {
            debug_assert!(false, "self: commit without reserve");
            return;
        };
        if skip > 0 {
            let pos = self.tail % self.cap();
            self.ring[pos..pos + 4].copy_from_slice(&WRAP.to_ne_bytes());
        }
        self.ring[start..start + 4].copy_from_slice(&(len as u32).to_ne_bytes());
        self.ring[start + 4] = tag.0;
        self.tail += skip + REC_HDR + round8(len);
        self.raise();
    }

    fn set_wake(&mut self, wake: &'static AtomicU32, bit: u32) {
        self.wake = Some((wake, bit));
    }

    #[inline]
    fn progress(&mut self, sink: &mut dyn Sink) -> usize {
        // Every progress round of every wait asks; nearly always the ring is empty.
        if self.head == self.tail {
            return 0;
        }
        let n = self.deliver(sink);
        if self.head != self.tail {
            // Left for later (a batch's end, or the sink's back-pressure): poll again.
            self.raise();
        }
        n
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;
    use std::vec::Vec;

    struct Collect {
        got: Vec<(ProcId, u8, Vec<u8>)>,
        refuse_after: usize,
    }

    impl Sink for Collect {
        fn deliver(&mut self, from: ProcId, tag: AmTag, frag: &[u8]) -> Delivery {
            if self.got.len() >= self.refuse_after {
                return Delivery::Retry;
            }
            self.got.push((from, tag.0, frag.to_vec()));
            Delivery::Consumed
        }
    }

    struct NoModex;
    impl Modex for NoModex {
        fn get(&mut self, _: ProcId, _: &str, _: &mut [u8]) -> Result<Option<usize>> {
            Ok(None)
        }
    }

    fn module(queue: &str, max: &str) -> Loopback {
        let mut p = Params::new(&[]);
        p.register_all(&PARAMS).unwrap();
        p.set(QUEUE_BYTES.name, queue).unwrap();
        p.set(MAX_SEND_SIZE.name, max).unwrap();
        Loopback::new(&p, ProcId(3), &mut Arena::new(leak(1 << 20))).unwrap()
    }

    fn send(m: &mut Loopback, data: &[u8]) -> bool {
        match m.reserve(Endpoint(0), data.len()) {
            Some(space) => {
                space.copy_from_slice(data);
                m.commit(Endpoint(0), AmTag::PML, data.len());
                true
            }
            None => false,
        }
    }

    #[test]
    fn reaches_only_itself() {
        let mut m = module("4096", "512");
        let peers = [2, 3, 4].map(|p| PeerInfo {
            proc: ProcId(p),
            arch: None,
            node: 0,
        });
        let mut eps = [None; 3];
        m.add_procs(&peers, &mut NoModex, &mut eps).unwrap();
        assert_eq!(eps, [None, Some(Endpoint(0)), None]);
    }

    #[test]
    fn delivers_in_order_with_wraparound_and_backpressure() {
        let mut m = module("2048", "512");
        let mut sink = Collect {
            got: Vec::new(),
            refuse_after: usize::MAX,
        };
        let mut sent = Vec::new();
        let mut next = 0u32;
        for round in 0..50 {
            // fill until back-pressure
            loop {
                let len = (next as usize * 37) % 500 + 1;
                let data: Vec<u8> = (0..len).map(|i| (i as u32 + next) as u8).collect();
                if !send(&mut m, &data) {
                    break;
                }
                sent.push(data);
                next += 1;
            }
            assert!(!sent.is_empty());
            sink.refuse_after = sink.got.len() + 1 + round % 3;
            m.progress(&mut sink);
            sink.refuse_after = usize::MAX;
        }
        m.progress(&mut sink);
        assert_eq!(sink.got.len(), sent.len());
        for ((from, tag, got), want) in sink.got.iter().zip(&sent) {
            assert_eq!((*from, *tag), (ProcId(3), 1));
            assert_eq!(got, want);
        }
    }

    #[test]
    fn too_small_queue_is_refused() {
        let mut p = Params::new(&[]);
        p.register_all(&PARAMS).unwrap();
        p.set(QUEUE_BYTES.name, "1024").unwrap();
        assert!(Loopback::new(&p, ProcId(0), &mut Arena::new(leak(1 << 20))).is_err());
    }
}
