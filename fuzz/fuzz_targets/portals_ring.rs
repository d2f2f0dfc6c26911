//! The software Portals NI fed any bytes as a peer's inbound ring. A job of two: rank 0 is the
//! NI under test (matching and non-matching interfaces, portal table entries with and without
//! flow control, match list entries over buffers of the target's, contiguous and scatter/gather,
//! a get, a fetching atomic and an acknowledged put of its own in flight to rank 1); rank 1's
//! segment is mapped here and its ring toward rank 0 filled with the input, either verbatim
//! (whatever the first words say about kinds and lengths) or as records framed with their true
//! payload lengths (so the fuzzer reaches the semantics behind the framing). Rank 0 then
//! consumes it through the production path (`State::progress`: `Consumer::peek`, `on_record`,
//! matching, deposits, events, responses). It never panics, never reads or writes outside the
//! ring and the buffers it was given (AddressSanitizer), and every event's data lies inside the
//! entry's buffer; what it answers into rank 1's ring is well formed.
//!
//! Cross-memory attach is off here, and rank 1's segment names a process that has exited (a
//! zombie child) as its owner, so a record asking for a cross-memory transfer fails the way
//! one to a vanished peer does instead of writing into this process.
#![no_main]

use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use portals4_shmem::engine::State;
use portals4_shmem::job::Job;
use portals4_shmem::shm::{kind, record_bytes, Consumer, Geometry, Segment, HDR};
use portals4_shmem::types::*;
use stormpi_fuzz::Input;

/// Ring bytes (the smallest the NI takes, so inputs fill it).
const RING: usize = 16 << 10;
/// Offset of the owner's process id in a segment's header (`shm::H_PID`).
const H_PID: u64 = 16;

static SEQ: AtomicU64 = AtomicU64::new(0);

/// A child that has exited and is never waited for: its pid stays taken, and cross-memory
/// transfers to it fail.
fn zombie() -> u32 {
    static PID: OnceLock<u32> = OnceLock::new();
    *PID.get_or_init(|| {
        // Set once, before any Portals state reads them.
        std::env::set_var("STORMPI_PTL_RING_BYTES", RING.to_string());
        std::env::set_var("STORMPI_PTL_CMA", "0");
        std::env::set_var("STORMPI_PTL_SPIN", "0");
        let child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        std::mem::forget(child);
        std::thread::sleep(std::time::Duration::from_millis(20));
        pid
    })
}

/// A buffer of the target's that entries describe.
struct Buf {
    mem: Vec<u8>,
}

fn inside(bufs: &[Buf], start: usize, len: u64) -> bool {
    len == 0
        || bufs.iter().any(|b| {
            let lo = b.mem.as_ptr() as usize;
            start >= lo && start as u128 + len as u128 <= (lo + b.mem.len()) as u128
        })
}

fuzz_target!(|data: &[u8]| {
    let zpid = zombie();
    let mut inp = Input::new(data);
    let mode = inp.u8();
    let id = format!(
        "fz{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );

    // The target's memory: declared before the state, so it outlives every region naming it.
    let mut bufs: Vec<Buf> = (0..4)
        .map(|i| Buf {
            mem: vec![i as u8; inp.u16() as usize % 700],
        })
        .collect();
    let mut iov: Vec<ptl_iovec_t> = Vec::new();
    for b in bufs.iter_mut().take(3) {
        let half = b.mem.len() / 2;
        iov.push(ptl_iovec_t {
            iov_base: b.mem.as_mut_ptr().cast(),
            iov_len: half as u64,
        });
    }
    let mut own = vec![0x5au8; 256];

    let mut st = State::new(Job {
        rank: 0,
        size: 2,
        id: id.clone(),
    });
    let Ok((slot, _)) = st.ni_init(PTL_NI_MATCHING | PTL_NI_LOGICAL, PTL_PID_ANY, None) else {
        return;
    };
    let (nslot, _) = st
        .ni_init(PTL_NI_NO_MATCHING | PTL_NI_PHYSICAL, PTL_PID_ANY, None)
        .expect("a second interface");
    let geo = Geometry {
        ranks: 2,
        ring_bytes: st.cfg.ring_bytes,
    };
    let peer = Segment::create(&id, 1, geo).expect("rank 1's segment");
    std::fs::OpenOptions::new()
        .write(true)
        .open(format!("/dev/shm/stormpi-{id}-ptl-1"))
        .and_then(|f| f.write_all_at(&(zpid as u64).to_ne_bytes(), H_PID))
        .expect("rank 1's owner");

    let eq = st.eq_alloc(slot, 1 + inp.u8() as u64 % 8).expect("a queue");
    let ct = st.ct_alloc(slot).expect("a counter");
    let fc = if inp.u8().is_multiple_of(2) {
        PTL_PT_FLOWCTRL
    } else {
        0
    };
    st.pt_alloc(slot, fc, eq, 0).expect("entry 0");
    st.pt_alloc(slot, 0, PTL_EQ_NONE, 1).expect("entry 1");
    let neq = st.eq_alloc(nslot, 4).expect("a queue");
    st.pt_alloc(nslot, 0, neq, 0).expect("entry 0");
    let mut scattered = false;
    for (i, b) in bufs.iter_mut().enumerate() {
        let pt = inp.u8() as u32 % 2;
        let list = inp.u8() % 2;
        let opts =
            inp.u32() & PTL_ME_APPEND_OPTIONS_MASK & !PTL_IOVEC | PTL_ME_OP_PUT | PTL_ME_OP_GET;
        let iovec = i == 3 && inp.u8().is_multiple_of(2);
        scattered |= iovec;
        let (start, length, opts) = if iovec {
            (iov.as_mut_ptr().cast(), iov.len() as u64, opts | PTL_IOVEC)
        } else {
            (b.mem.as_mut_ptr().cast(), b.mem.len() as u64, opts)
        };
        let me = ptl_me_t {
            start,
            length,
            ct_handle: if inp.u8().is_multiple_of(2) {
                ct
            } else {
                PTL_CT_NONE
            },
            uid: PTL_UID_ANY,
            options: opts,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: inp.u8() as u64,
            ignore_bits: inp.u8() as u64,
            min_free: inp.u8() as u64,
        };
        let _ = st.append(slot, pt, &me, list, 100 + i, true);
    }
    let le = ptl_me_t {
        start: bufs[0].mem.as_mut_ptr().cast(),
        length: bufs[0].mem.len() as u64,
        ct_handle: PTL_CT_NONE,
        uid: PTL_UID_ANY,
        options: PTL_ME_OP_PUT | PTL_ME_OP_GET,
        match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
        match_bits: 0,
        ignore_bits: 0,
        min_free: 0,
    };
    let _ = st.append(nslot, 0, &le, PTL_PRIORITY_LIST, 200, false);
    let iovec_entry = 103;

    // Operations of rank 0's own in flight to rank 1: their ACK and REPLY records may come.
    let md = ptl_md_t {
        start: own.as_mut_ptr().cast(),
        length: own.len() as u64,
        options: 0,
        eq_handle: eq,
        ct_handle: PTL_CT_NONE,
    };
    let md = st.md_bind(slot, &md).expect("a descriptor");
    let to = ptl_process_t::from_rank(1);
    let none = PTL_INVALID_HANDLE;
    let _ = st.initiate(
        kind::GET,
        md,
        0,
        md,
        0,
        128,
        0,
        to,
        0,
        1,
        0,
        1,
        0,
        (0, 0),
        None,
    );
    let _ = st.initiate(
        kind::PUT,
        md,
        0,
        none,
        0,
        64,
        PTL_ACK_REQ,
        to,
        0,
        2,
        0,
        2,
        0,
        (0, 0),
        None,
    );
    let _ = st.initiate(
        kind::FETCH,
        md,
        128,
        md,
        192,
        8,
        0,
        to,
        0,
        3,
        0,
        3,
        0,
        (PTL_SUM, PTL_INT64_T),
        None,
    );

    // Rank 1 "writes" its ring toward rank 0.
    let mut ring = Vec::with_capacity(RING);
    if mode.is_multiple_of(2) {
        ring.extend_from_slice(inp.rest());
    } else {
        while !inp.is_empty() {
            let mut h = [0u8; HDR];
            let hb = inp.bytes(HDR);
            h[..hb.len()].copy_from_slice(hb);
            let want = inp.u16() as usize % 1200;
            let payload = inp.bytes(want);
            let rec = record_bytes(payload.len());
            if ring.len() + rec + 64 > RING {
                break;
            }
            // The first word says the true payload length; a zero kind would end the ring.
            let mut w = u64::from_ne_bytes(h[..8].try_into().expect("8 bytes"));
            w = (w & 0xffff_ffff) | (payload.len() as u64) << 32;
            if w as u8 == 0 || w as u8 == kind::WRAP {
                w = (w & !0xff) | kind::PUT as u64;
            }
            h[..8].copy_from_slice(&w.to_ne_bytes());
            let at = ring.len();
            ring.extend_from_slice(&h);
            ring.extend_from_slice(payload);
            ring.resize(at + rec, 0);
        }
    }
    ring.truncate(RING);
    st.write_inbound(1, &ring);

    // Rank 0 runs; what it answers into rank 1's ring is read back.
    let mut answers = Consumer::default();
    for _ in 0..6 {
        st.progress();
        while let Some((h, _)) = answers.peek(&peer, 0) {
            assert!(
                matches!(
                    h.kind(),
                    kind::PUT | kind::GET | kind::FETCH | kind::DATA | kind::ACK | kind::REPLY
                ),
                "rank 0 wrote a record of kind {}",
                h.kind()
            );
            answers.advance(&peer, 0, &h);
        }
        assert!(!answers.broken(), "rank 0 wrote a malformed record");
    }
    for q in [eq, neq] {
        while let Ok(Some((ev, _))) = st.eq_take(q) {
            let data = matches!(
                ev.type_,
                PTL_EVENT_PUT
                    | PTL_EVENT_GET
                    | PTL_EVENT_ATOMIC
                    | PTL_EVENT_FETCH_ATOMIC
                    | PTL_EVENT_PUT_OVERFLOW
                    | PTL_EVENT_ATOMIC_OVERFLOW
            );
            // (A scatter/gather entry's data may run over several of the buffers.)
            if data && !(scattered && ev.user_ptr as usize == iovec_entry) {
                assert!(
                    inside(&bufs, ev.start as usize, ev.mlength),
                    "event {} says {} bytes at {:p}, outside the entry",
                    ev.type_,
                    ev.mlength,
                    ev.start
                );
            }
        }
    }
    st.shutdown();
    drop(peer);
    Segment::unlink(&id, 1);
});
