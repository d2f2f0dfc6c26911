//! The `cm` path of the PML over a matching transport, with an in-memory MTL that matches like a
//! network would (posted receives in order, unexpected messages in arrival order): sends,
//! receives, wildcards, truncation, probes, matched probes, cancel, synchronous sends, and the
//! parameter that chooses the path.

use std::collections::VecDeque;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, Ordering};

use stormpi_core::btl::Token;
use stormpi_core::comm::CommId;
use stormpi_core::datatype::convertor::{Packer, Unpacker};
use stormpi_core::datatype::table::TypeTable;
use stormpi_core::engine::{Engine, Init};
use stormpi_core::error::{ErrorClass, Result};
use stormpi_core::mtl::{
    MatchBits, Mtl, MtlAttrs, MtlData, MtlEnvelope, MtlMatch, MtlMessage, MtlPlaced, MtlSelector,
    MtlSink,
};
use stormpi_core::params::Params;
use stormpi_core::platform::{Level, Platform};
use stormpi_core::pml::request::{SendMode, ANY_SOURCE, ANY_TAG, PROC_NULL};
use stormpi_core::rte::{ProcId, Rte, Singleton};

struct Plat;

impl Platform for Plat {
    fn now_ns(&self) -> u64 {
        0
    }
    fn relax(&self, _idle: u32) {}
    fn log(&self, level: Level, args: std::fmt::Arguments<'_>) {
        eprintln!("{}: {args}", level.name());
    }
    fn grant(&self, bytes: usize) -> Option<&'static mut [std::mem::MaybeUninit<u8>]> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), 64).ok()?;
        // SAFETY: the layout's size is not zero.
        let p = unsafe { std::alloc::alloc(layout) };
        // SAFETY: `p` (checked) points at `bytes` freshly allocated bytes, never freed: the
        // core's for the rest of the process.
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts_mut(p.cast(), bytes) })
    }
}

static PLAT: Plat = Plat;

/// A platform that remembers the longest idle run a wait reported (one test uses it alone).
struct CountingPlat(AtomicU32);

impl Platform for CountingPlat {
    fn now_ns(&self) -> u64 {
        0
    }
    fn relax(&self, idle: u32) {
        self.0.fetch_max(idle, Ordering::Relaxed);
    }
    fn log(&self, level: Level, args: std::fmt::Arguments<'_>) {
        eprintln!("{}: {args}", level.name());
    }
    fn grant(&self, bytes: usize) -> Option<&'static mut [std::mem::MaybeUninit<u8>]> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), 64).ok()?;
        // SAFETY: the layout's size is not zero.
        let p = unsafe { std::alloc::alloc(layout) };
        // SAFETY: `p` (checked) points at `bytes` freshly allocated bytes, never freed: the
        // core's for the rest of the process.
        (!p.is_null()).then(|| unsafe { std::slice::from_raw_parts_mut(p.cast(), bytes) })
    }
}

static COUNTING: CountingPlat = CountingPlat(AtomicU32::new(0));

/// A message in flight or waiting.
struct Msg {
    bits: u64,
    data: Vec<u8>,
    /// The send's token, completed when matched (synchronous sends).
    sync: Option<Token>,
}

/// A one-process MTL: every send goes to this process, matched by match bits.
#[derive(Default)]
struct LoopMtl {
    /// Posted receives: match bits, ignore bits, capacity, token.
    posted: Vec<(u64, u64, usize, Token)>,
    unexpected: VecDeque<Msg>,
    taken: Vec<Option<Msg>>,
    /// Finished receives: token, the bytes for the convertor (cut to its capacity), match.
    done_recv: VecDeque<(Token, Vec<u8>, MtlMatch)>,
    done_send: VecDeque<Token>,
    /// Polls that find nothing before a finished receive is reported, as when a peer's message
    /// is still on its way (0: at once).
    delay: u32,
    /// Polls left before the next report.
    wait: u32,
}

const ATTRS: MtlAttrs = MtlAttrs {
    component: "loop",
    max_contexts: MatchBits::MAX_CONTEXTS,
    max_ranks: MatchBits::MAX_RANKS,
};

impl LoopMtl {
    fn deliver(&mut self, m: Msg, cap: usize, token: Token) {
        let env = MatchBits::decode(m.bits);
        if let Some(t) = m.sync {
            self.done_send.push_back(t);
        }
        let len = m.data.len() as u64;
        let mut data = m.data;
        data.truncate(cap);
        self.done_recv.push_back((
            token,
            data,
            MtlMatch {
                src: env.src,
                tag: env.tag,
                len,
            },
        ));
    }

    /// A message arrives: the first posted receive that accepts it takes it, or it waits.
    fn arrive(&mut self, m: Msg) {
        let hit = self
            .posted
            .iter()
            .position(|(b, i, _, _)| MatchBits::matches(m.bits, *b, *i));
        match hit {
            Some(p) => {
                let (_, _, cap, t) = self.posted.remove(p);
                self.deliver(m, cap, t);
            }
            None => self.unexpected.push_back(m),
        }
    }

    fn find(&self, sel: &MtlSelector) -> Option<usize> {
        let (bits, ignore) = MatchBits::selector(sel);
        self.unexpected
            .iter()
            .position(|m| MatchBits::matches(m.bits, bits, ignore))
    }
}

impl Mtl for LoopMtl {
    fn attrs(&self) -> &MtlAttrs {
        &ATTRS
    }

    fn isend(
        &mut self,
        types: &TypeTable,
        _dest: ProcId,
        env: MtlEnvelope,
        mut conv: Packer,
        mode: SendMode,
        token: Token,
    ) -> Result<bool> {
        let mut data = vec![0u8; conv.packed_len()];
        let n = conv.pack(types, 0, &mut data);
        data.truncate(n);
        let sync = mode == SendMode::Synchronous;
        self.arrive(Msg {
            bits: MatchBits::encode(&env),
            data,
            sync: sync.then_some(token),
        });
        Ok(!sync)
    }

    /// Takes a contiguous message at once, as the Portals MTL does with short ones.
    fn send_now(
        &mut self,
        _types: &TypeTable,
        _dest: ProcId,
        env: MtlEnvelope,
        conv: &Packer,
    ) -> Result<bool> {
        let len = conv.packed_len();
        let Some(d) = conv.data_ref(0, len) else {
            return Ok(false);
        };
        // SAFETY: the packer's loan of `len` bytes, valid for this call.
        let data = unsafe { std::slice::from_raw_parts(d.as_ptr(), len) }.to_vec();
        self.arrive(Msg {
            bits: MatchBits::encode(&env),
            data,
            sync: None,
        });
        Ok(true)
    }

    fn irecv(
        &mut self,
        _types: &TypeTable,
        sel: MtlSelector,
        conv: &Unpacker,
        token: Token,
    ) -> Result<()> {
        match self.find(&sel) {
            Some(i) => {
                let m = self.unexpected.remove(i).unwrap();
                self.deliver(m, conv.capacity(), token);
            }
            None => {
                let (b, i) = MatchBits::selector(&sel);
                self.posted.push((b, i, conv.capacity(), token));
            }
        }
        Ok(())
    }

    fn iprobe(&mut self, sel: MtlSelector) -> Result<Option<MtlMatch>> {
        Ok(self.find(&sel).map(|i| {
            let m = &self.unexpected[i];
            let env = MatchBits::decode(m.bits);
            MtlMatch {
                src: env.src,
                tag: env.tag,
                len: m.data.len() as u64,
            }
        }))
    }

    fn improbe(&mut self, sel: MtlSelector) -> Result<Option<(MtlMessage, MtlMatch)>> {
        let Some(found) = self.iprobe(sel)? else {
            return Ok(None);
        };
        let m = self.unexpected.remove(self.find(&sel).unwrap()).unwrap();
        self.taken.push(Some(m));
        Ok(Some((MtlMessage(self.taken.len() as u64 - 1), found)))
    }

    fn imrecv(
        &mut self,
        _types: &TypeTable,
        msg: MtlMessage,
        conv: &Unpacker,
        token: Token,
    ) -> Result<()> {
        let m = self.taken[msg.0 as usize].take().unwrap();
        self.deliver(m, conv.capacity(), token);
        Ok(())
    }

    fn cancel(&mut self, token: Token) -> bool {
        let Some(p) = self.posted.iter().position(|(_, _, _, t)| *t == token) else {
            return false;
        };
        self.posted.remove(p);
        true
    }

    fn progress(&mut self, types: &TypeTable, sink: &mut dyn MtlSink) -> usize {
        if self.late() {
            return 0;
        }
        let mut n = 0;
        while let Some(t) = self.done_send.pop_front() {
            sink.send_done(t, Ok(()));
            n += 1;
        }
        while let Some((t, data, m)) = self.done_recv.pop_front() {
            sink.recv_done(types, t, MtlData::Packed(&data), m, None);
            n += 1;
        }
        n
    }

    /// Hands a finished empty receive `token` back in place, as the Portals MTL does for a
    /// blocking receive whose bytes are already in its buffer.
    fn progress_waiting(
        &mut self,
        types: &TypeTable,
        sink: &mut dyn MtlSink,
        token: Token,
        placed: &mut Option<MtlPlaced>,
    ) -> usize {
        if self.late() {
            return 0;
        }
        match self.done_recv.front() {
            Some((t, data, m)) if *t == token && data.is_empty() => {
                *placed = Some(MtlPlaced { got: 0, m: *m });
                self.done_recv.pop_front();
                1
            }
            _ => self.progress(types, sink),
        }
    }
}

impl LoopMtl {
    /// Whether this poll finds nothing because the next report is not due yet.
    fn late(&mut self) -> bool {
        if self.done_recv.is_empty() {
            self.wait = self.delay;
            return false;
        }
        if self.wait > 0 {
            self.wait -= 1;
            return true;
        }
        self.wait = self.delay;
        false
    }
}

fn no_abort(code: i32, msg: &str) -> ! {
    panic!("abort {code}: {msg}")
}

fn engine(pml: &str, with_mtl: bool) -> Result<Engine> {
    engine_on(pml, with_mtl, &PLAT, 0)
}

/// [`engine`] on `platform`, its MTL reporting each finished receive `delay` polls late.
fn engine_on(
    pml: &str,
    with_mtl: bool,
    platform: &'static dyn Platform,
    delay: u32,
) -> Result<Engine> {
    let mut params = Params::new(&[]);
    Engine::register_params(&mut params)?;
    params.set("pml", pml)?;
    let memory: &'static mut [MaybeUninit<u8>] = Box::leak(
        vec![MaybeUninit::uninit(); Engine::memory_needed(&params, 1)].into_boxed_slice(),
    );
    let rte: &'static mut dyn Rte = Box::leak(Box::new(Singleton::<8>::new(no_abort)));
    let mtl: Option<&'static mut dyn Mtl> = if with_mtl {
        Some(Box::leak(Box::new(LoopMtl {
            delay,
            ..LoopMtl::default()
        })))
    } else {
        None
    };
    Engine::with_mtl(
        Init {
            memory,
            params,
            platform,
            rte,
            btls: heapless::Vec::new(),
        },
        mtl,
    )
}

fn send(
    e: &mut Engine,
    data: &'static [u8],
    tag: i32,
    mode: SendMode,
) -> stormpi_core::pml::request::ReqId {
    e.isend(Packer::from_slice(data), 0, tag, CommId::WORLD, mode, 0)
        .unwrap()
}

fn recv_into(
    e: &mut Engine,
    buf: &'static mut [u8],
    src: i32,
    tag: i32,
) -> stormpi_core::pml::request::ReqId {
    e.irecv(Unpacker::from_slice(buf), src, tag, CommId::WORLD, 0)
        .unwrap()
}

fn leak(n: usize) -> &'static mut [u8] {
    Box::leak(vec![0u8; n].into_boxed_slice())
}

#[test]
fn cm_sends_and_receives_match_in_order_with_wildcards() {
    let mut e = engine("cm", true).unwrap();
    // Unexpected first, then receives: per-tag order, ANY_TAG takes the earliest.
    let a = send(&mut e, b"first", 5, SendMode::Standard);
    let b = send(&mut e, b"second", 6, SendMode::Standard);
    let c = send(&mut e, b"third", 5, SendMode::Standard);
    for id in [a, b, c] {
        e.wait(id).unwrap();
    }
    let r1 = leak(16);
    let p1 = r1.as_ptr();
    let id = recv_into(&mut e, r1, 0, 5);
    let st = e.wait(id).unwrap();
    assert_eq!((st.source, st.tag, st.bytes), (0, 5, 5));
    // SAFETY: the receive completed; the buffer is leaked.
    assert_eq!(unsafe { std::slice::from_raw_parts(p1, 5) }, b"first");
    let id = recv_into(&mut e, leak(16), ANY_SOURCE, ANY_TAG);
    assert_eq!(e.wait(id).unwrap().tag, 6);
    let id = recv_into(&mut e, leak(16), 0, ANY_TAG);
    assert_eq!(e.wait(id).unwrap().bytes, 5);
    // Posted first: the earliest posted matching receive takes the message.
    let any = recv_into(&mut e, leak(16), ANY_SOURCE, ANY_TAG);
    let seven = recv_into(&mut e, leak(16), 0, 7);
    let s = send(&mut e, b"x", 7, SendMode::Standard);
    e.wait(s).unwrap();
    assert_eq!(e.wait(any).unwrap().tag, 7);
    assert!(e.test(seven).unwrap().is_none());
    e.cancel(seven).unwrap();
    assert!(e.wait(seven).unwrap().cancelled);
    assert_eq!(e.requests_in_use(), 0);
}

#[test]
fn cm_truncation_probes_and_matched_probes() {
    let mut e = engine("cm", true).unwrap();
    let s = send(&mut e, b"0123456789", 1, SendMode::Standard);
    e.wait(s).unwrap();
    let st = e.iprobe(ANY_SOURCE, 1, CommId::WORLD).unwrap().unwrap();
    assert_eq!((st.tag, st.bytes), (1, 10));
    assert!(e.iprobe(0, 2, CommId::WORLD).unwrap().is_none());
    let id = recv_into(&mut e, leak(4), 0, 1);
    let st = e.wait(id).unwrap();
    assert_eq!(st.error.map(|e| e.class), Some(ErrorClass::Truncate));
    assert_eq!((st.bytes, st.message_bytes), (4, 10));

    let s = send(&mut e, b"matched", 3, SendMode::Standard);
    e.wait(s).unwrap();
    let (msg, st) = e
        .improbe(ANY_SOURCE, ANY_TAG, CommId::WORLD)
        .unwrap()
        .unwrap();
    assert_eq!((st.tag, st.bytes), (3, 7));
    // Taken: no longer visible to probes.
    assert!(e
        .iprobe(ANY_SOURCE, ANY_TAG, CommId::WORLD)
        .unwrap()
        .is_none());
    let buf = leak(8);
    let p = buf.as_ptr();
    let id = e.imrecv(Unpacker::from_slice(buf), msg, 0).unwrap();
    assert_eq!(e.wait(id).unwrap().bytes, 7);
    // SAFETY: the receive completed.
    assert_eq!(unsafe { std::slice::from_raw_parts(p, 7) }, b"matched");
}

#[test]
fn cm_synchronous_send_completes_at_the_match() {
    let mut e = engine("cm", true).unwrap();
    let s = send(&mut e, b"sync", 9, SendMode::Synchronous);
    for _ in 0..10 {
        e.progress();
    }
    assert!(
        e.test(s).unwrap().is_none(),
        "a synchronous send completed before its match"
    );
    let r = recv_into(&mut e, leak(8), 0, 9);
    e.wait(r).unwrap();
    e.wait(s).unwrap();
    // The blocking forms and a collective (barrier over the PML) run over the MTL too.
    e.send(
        Packer::from_slice(b"blocking"),
        0,
        4,
        CommId::WORLD,
        SendMode::Standard,
    )
    .unwrap();
    let st = e
        .recv(Unpacker::from_slice(leak(8)), 0, 4, CommId::WORLD)
        .unwrap();
    assert_eq!(st.bytes, 8);
    e.barrier(CommId::WORLD).unwrap();
}

#[test]
fn cm_blocking_receive_keeps_order_status_and_truncation_without_a_request() {
    let mut e = engine("cm", true).unwrap();
    // A receive posted earlier takes the first message; the blocking one the next.
    let early = recv_into(&mut e, leak(8), 0, 5);
    for (data, tag) in [
        (&b"one"[..], 5),
        (b"two", 5),
        (b"three", 6),
        (b"0123456789", 7),
    ] {
        let s = send(&mut e, data, tag, SendMode::Standard);
        e.wait(s).unwrap();
    }
    let buf = leak(8);
    let p = buf.as_ptr();
    let st = e
        .recv(Unpacker::from_slice(buf), 0, 5, CommId::WORLD)
        .unwrap();
    assert_eq!((st.source, st.tag, st.bytes, st.error), (0, 5, 3, None));
    // SAFETY: the receive completed; the buffer is leaked.
    assert_eq!(unsafe { std::slice::from_raw_parts(p, 3) }, b"two");
    assert_eq!(e.wait(early).unwrap().bytes, 3);
    // Wildcards report the message's source and tag.
    let st = e
        .recv(
            Unpacker::from_slice(leak(8)),
            ANY_SOURCE,
            ANY_TAG,
            CommId::WORLD,
        )
        .unwrap();
    assert_eq!((st.source, st.tag, st.bytes), (0, 6, 5));
    // Truncation is the status's error, with what was received and what was sent.
    let st = e
        .recv(Unpacker::from_slice(leak(4)), 0, 7, CommId::WORLD)
        .unwrap();
    assert_eq!(st.error.map(|e| e.class), Some(ErrorClass::Truncate));
    assert_eq!((st.bytes, st.message_bytes), (4, 10));
    // MPI_PROC_NULL: done at once with the empty status; a bad tag or rank is an error.
    let st = e
        .recv(Unpacker::from_slice(leak(4)), -1, 3, CommId::WORLD)
        .unwrap();
    assert_eq!((st.source, st.bytes), (-1, 0));
    let err = e
        .recv(Unpacker::from_slice(leak(4)), 0, -5, CommId::WORLD)
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Tag);
    let err = e
        .recv(Unpacker::from_slice(leak(4)), 3, 1, CommId::WORLD)
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Rank);
    // A synchronous send completes when the blocking receive matches it.
    let s = send(&mut e, b"sync", 9, SendMode::Synchronous);
    assert!(e.test(s).unwrap().is_none());
    assert_eq!(
        e.recv(Unpacker::from_slice(leak(8)), 0, 9, CommId::WORLD)
            .unwrap()
            .bytes,
        4
    );
    e.wait(s).unwrap();
    // Nothing was left behind, and the next receive still works.
    assert_eq!(e.requests_in_use(), 0);
    let s = send(&mut e, b"again", 1, SendMode::Standard);
    e.wait(s).unwrap();
    assert_eq!(
        e.recv(Unpacker::from_slice(leak(8)), 0, 1, CommId::WORLD)
            .unwrap()
            .bytes,
        5
    );
}

#[test]
fn cm_is_chosen_by_the_pml_parameter() {
    // ob1 ignores an MTL; cm without one is an error naming the way out; junk is a bad value.
    let mut e = engine("ob1", true).unwrap();
    let s = send(&mut e, b"ob1", 1, SendMode::Standard);
    let r = recv_into(&mut e, leak(4), 0, 1);
    e.wait(s).unwrap();
    assert_eq!(e.wait(r).unwrap().bytes, 3);
    let err = engine("cm", false).err().expect("cm without an MTL");
    assert!(err.to_string().contains("pml ob1"), "{err}");
    assert!(engine("fast", true).is_err());
    // Empty: the platform's choice (cm when it brings an MTL, ob1 otherwise).
    assert!(engine("", false).is_ok());
    assert!(engine("", true).is_ok());
}

#[test]
fn cm_blocking_receives_each_spin_afresh_before_yielding() {
    // Each receive waits five idle polls for its message. The idle count, which decides when a
    // wait starts yielding the core, must start again at every receive — also when the MTL
    // hands the receive straight back — not pile up over a stream of receives.
    const LATE: u32 = 5;
    let mut e = engine_on("cm", true, &COUNTING, LATE).unwrap();
    for i in 0..50 {
        let s = send(&mut e, b"", 4, SendMode::Standard);
        e.wait(s).unwrap();
        let st = e
            .recv(Unpacker::from_slice(leak(0)), 0, 4, CommId::WORLD)
            .unwrap();
        assert_eq!((st.tag, st.bytes), (4, 0), "receive {i}");
    }
    let longest = COUNTING.0.load(Ordering::Relaxed);
    assert!(
        (LATE..=LATE + 1).contains(&longest),
        "longest idle run {longest}, each wait had {LATE}"
    );
}

#[test]
fn cm_isend_of_contiguous_bytes_is_complete_at_once() {
    static DATA: &[u8] = b"bytes";
    let mut e = engine("cm", true).unwrap();
    let world = CommId::WORLD;
    // `isend_contiguous` of DATA to rank 0; whether it built a convertor.
    let isend = |e: &mut Engine, tag: i32, mode: SendMode| {
        let mut made = false;
        let make = || {
            made = true;
            Packer::from_slice(DATA)
        };
        let s = e
            .isend_contiguous(DATA, make, 0, tag, world, mode, 0)
            .unwrap();
        (s, made)
    };
    // Taken by the MTL at once: the request is complete from the start, no convertor built.
    let (s, made) = isend(&mut e, 3, SendMode::Standard);
    assert!(!made);
    assert!(e.is_complete(s).unwrap());
    let st = e.wait(s).unwrap();
    assert!(st.error.is_none() && !st.cancelled);
    let buf = leak(8);
    let p = buf.as_ptr();
    let r = e
        .irecv_with(|| Unpacker::from_slice(buf), 0, 3, world, 0)
        .unwrap();
    let st = e.wait(r).unwrap();
    assert_eq!((st.source, st.tag, st.bytes), (0, 3, 5));
    // SAFETY: the receive completed; the buffer is leaked.
    assert_eq!(unsafe { std::slice::from_raw_parts(p, 5) }, DATA);
    // Synchronous: the convertor is built and the send completes at the match.
    let (s, made) = isend(&mut e, 4, SendMode::Synchronous);
    assert!(made);
    assert!(e.test(s).unwrap().is_none());
    let r = recv_into(&mut e, leak(8), 0, 4);
    assert_eq!(e.wait(r).unwrap().bytes, 5);
    e.wait(s).unwrap();
    // MPI_PROC_NULL completes at once; a bad rank or tag is an error, nothing is sent.
    let st = {
        let s = e
            .isend_contiguous(
                DATA,
                || unreachable!(),
                PROC_NULL,
                1,
                world,
                SendMode::Standard,
                0,
            )
            .unwrap();
        e.wait(s).unwrap()
    };
    assert_eq!(st.source, PROC_NULL);
    let err = e
        .isend_contiguous(DATA, || unreachable!(), 5, 1, world, SendMode::Standard, 0)
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Rank);
    let err = e
        .isend_contiguous(DATA, || unreachable!(), 0, -7, world, SendMode::Standard, 0)
        .unwrap_err();
    assert_eq!(err.class, ErrorClass::Tag);
    assert!(e.iprobe(ANY_SOURCE, ANY_TAG, world).unwrap().is_none());
    assert_eq!(e.requests_in_use(), 0);
}

/// The per-communicator count of posted receives survives the communicator table (and with it
/// cm's state) growing: a communicator freed with a receive still posted drains until the
/// receive ends, and communicators made after the growth carry messages.
#[test]
fn cm_posted_receives_survive_the_communicator_table_growing() {
    use stormpi_core::shared::Inside;
    let mut e = engine("cm", true).unwrap();
    let first = stormpi_core::comm::create::dup(&mut Inside::of(&mut e), CommId::WORLD).unwrap();
    let r = e
        .irecv(Unpacker::from_slice(leak(8)), 0, 4, first, 0)
        .unwrap();
    let before = e.p2p.comms.capacity();
    let more: Vec<CommId> = (0..100)
        .map(|_| stormpi_core::comm::create::dup(&mut Inside::of(&mut e), CommId::WORLD).unwrap())
        .collect();
    assert!(e.p2p.comms.capacity() > before, "the table grew");
    e.comm_free(first).unwrap();
    assert!(
        e.p2p.comms.draining().any(|c| c == first),
        "the receive still posted holds it"
    );
    e.cancel(r).unwrap();
    assert!(e.wait(r).unwrap().cancelled);
    // Draining communicators are looked at again when another is freed.
    let (reaper, more) = more.split_first().unwrap();
    e.comm_free(*reaper).unwrap();
    assert_eq!(
        e.p2p.comms.draining().count(),
        0,
        "reaped once the receive ended"
    );
    let last = *more.last().unwrap();
    let s = e
        .isend(
            Packer::from_slice(b"grown"),
            0,
            2,
            last,
            SendMode::Standard,
            0,
        )
        .unwrap();
    e.wait(s).unwrap();
    let buf = leak(8);
    let p = buf.as_ptr();
    let r = e.irecv(Unpacker::from_slice(buf), 0, 2, last, 0).unwrap();
    assert_eq!(e.wait(r).unwrap().bytes, 5);
    // SAFETY: the receive completed; the buffer is leaked.
    assert_eq!(unsafe { std::slice::from_raw_parts(p, 5) }, b"grown");
    for c in more {
        e.comm_free(*c).unwrap();
    }
    assert_eq!(
        e.p2p.comms.count(),
        2,
        "only the predefined communicators are left"
    );
}
