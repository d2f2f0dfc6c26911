//! Multi-process checks of the software Portals NI: `lwk-ptl-check SCENARIO`, started once per
//! rank with `STORMPI_RANK`, `STORMPI_SIZE` and `STORMPI_JOBID` in the environment (the test in
//! `tests/lwk_multiproc.rs` does that). Exits 0 when the scenario held on this rank; a failed
//! check panics (exit code 101) with what was wrong.

mod common;

use common::*;
use std::ffi::c_void;
use std::ptr;

const PT: u32 = 5;

fn main() {
    let scenario = std::env::args().nth(1).unwrap_or_default();
    let mut c = Ctx::new();
    match scenario.as_str() {
        "pingpong" => pingpong(&mut c),
        "get" => get(&mut c),
        "overflow" => overflow(&mut c),
        "use-once-manage-local" => use_once_manage_local(&mut c),
        "truncate" => truncate(&mut c),
        "flow-control" => flow_control(&mut c),
        "counting" => counting(&mut c),
        "atomic" => atomic(&mut c),
        "offload" => offload(&mut c),
        "all-to-all" => all_to_all(&mut c),
        "physical" => physical(&mut c),
        other => panic!("unknown scenario {other:?}"),
    }
    c.fini();
}

/// Put ping-pong with match bits between ranks 0 and 1, every size class (inline, cross-memory
/// or staged fragments), checking data and the events of both sides.
fn pingpong(c: &mut Ctx) {
    let sizes = [
        0usize,
        1,
        8,
        63,
        64,
        1000,
        4096,
        20_000,
        70_000,
        300_000,
        1 << 20,
    ];
    if c.rank > 1 {
        // Bystanders: only the barriers.
        for _ in 0..sizes.len() + 2 {
            c.barrier();
        }
        return;
    }
    let peer = 1 - c.rank;
    let eq = eq_alloc(c.ni, 256);
    pt_alloc(c.ni, 0, eq, PT);
    let max = *sizes.last().unwrap();
    let mut rbuf = vec![0u8; max];
    let mut sbuf = vec![0u8; max];
    let md = md_bind(c.ni, sbuf.as_mut_ptr(), max, eq, PTL_CT_NONE, 0);
    c.barrier();
    for (i, &n) in sizes.iter().enumerate() {
        let bits = 0x1000 + i as u64;
        // The receive for this round, use-once, exact bits (posted before the barrier).
        let me = me_desc(
            rbuf.as_mut_ptr(),
            max,
            PTL_ME_OP_PUT | PTL_ME_USE_ONCE,
            bits,
            0,
        );
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, 77);
        c.barrier();
        let data = pattern(bits + c.rank as u64, n);
        if c.rank == 0 {
            sbuf[..n].copy_from_slice(&data);
            put(
                md,
                0,
                n as u64,
                PTL_ACK_REQ,
                peer,
                PT,
                bits,
                0,
                5,
                0xabc0 + i as u64,
            );
            expect(eq, PTL_EVENT_SEND);
            let ack = expect(eq, PTL_EVENT_ACK);
            assert_eq!(ack.ni_fail_type, PTL_NI_OK);
            assert_eq!(ack.mlength, n as u64);
            assert_eq!(ack.user_ptr as usize, 5);
        }
        // Receive (rank 1 first, rank 0 after rank 1 answered).
        let ev = expect(eq, PTL_EVENT_PUT);
        assert_eq!(ev.match_bits, bits);
        assert_eq!(ev.rlength, n as u64);
        assert_eq!(ev.mlength, n as u64);
        assert_eq!(ev.initiator.rank(), peer);
        assert_eq!(ev.hdr_data, 0xabc0 + i as u64);
        assert_eq!(ev.user_ptr as usize, 77);
        assert_eq!(ev.start as usize, rbuf.as_ptr() as usize);
        assert_eq!(&rbuf[..n], &pattern(bits + peer as u64, n)[..]);
        expect(eq, PTL_EVENT_AUTO_UNLINK);
        if c.rank == 1 {
            sbuf[..n].copy_from_slice(&data);
            put(
                md,
                0,
                n as u64,
                PTL_ACK_REQ,
                peer,
                PT,
                bits,
                0,
                6,
                0xabc0 + i as u64,
            );
            expect(eq, PTL_EVENT_SEND);
            assert_eq!(expect(eq, PTL_EVENT_ACK).mlength, n as u64);
        }
    }
    c.barrier();
    ok(PtlMDRelease(md));
}

/// Rendezvous: the target exposes a buffer under a key (match bits); the initiator gets it.
fn get(c: &mut Ctx) {
    let eq = eq_alloc(c.ni, 64);
    pt_alloc(c.ni, 0, eq, PT);
    let sizes = [0usize, 5, 4000, 40_000, 600_000];
    let mut exposed: Vec<Vec<u8>> = sizes.iter().map(|&n| pattern(n as u64, n)).collect();
    if c.rank == 1 {
        for (i, b) in exposed.iter_mut().enumerate() {
            let me = me_desc(
                b.as_mut_ptr(),
                b.len(),
                PTL_ME_OP_GET | PTL_ME_USE_ONCE,
                0x77_0000 + i as u64,
                0,
            );
            append(c.ni, PT, &me, PTL_PRIORITY_LIST, i);
        }
    }
    c.barrier();
    if c.rank == 0 {
        let mut dst = vec![0u8; 1 << 20];
        let md = md_bind(c.ni, dst.as_mut_ptr(), dst.len(), eq, PTL_CT_NONE, 0);
        for (i, &n) in sizes.iter().enumerate() {
            ok(PtlGet(
                md,
                100,
                n as u64,
                ptl_process_t::from_rank(1),
                PT,
                0x77_0000 + i as u64,
                0,
                i as *mut c_void,
            ));
            let ev = expect(eq, PTL_EVENT_REPLY);
            assert_eq!(ev.ni_fail_type, PTL_NI_OK);
            assert_eq!(ev.mlength, n as u64);
            assert_eq!(ev.user_ptr as usize, i);
            assert_eq!(&dst[100..100 + n], &pattern(n as u64, n)[..]);
        }
        // A key nobody exposes: the reply says so.
        ok(PtlGet(
            md,
            0,
            8,
            ptl_process_t::from_rank(1),
            PT,
            0xdead,
            0,
            ptr::null_mut(),
        ));
        assert_eq!(expect(eq, PTL_EVENT_REPLY).ni_fail_type, PTL_NI_DROPPED);
        ok(PtlMDRelease(md));
    } else if c.rank == 1 {
        for (i, &n) in sizes.iter().enumerate() {
            let ev = expect(eq, PTL_EVENT_GET);
            assert_eq!(ev.user_ptr as usize, i);
            assert_eq!(ev.mlength, n as u64);
            assert_eq!(ev.initiator.rank(), 0);
            expect(eq, PTL_EVENT_AUTO_UNLINK);
        }
    }
    c.barrier();
}

/// Unexpected messages land in overflow entries; a later priority entry finds them
/// (`PTL_EVENT_PUT_OVERFLOW`), so does `PtlMESearch`; a drained, unlinked overflow entry is freed.
fn overflow(c: &mut Ctx) {
    let eq = eq_alloc(c.ni, 64);
    pt_alloc(c.ni, 0, eq, PT);
    let mut block = vec![0u8; 4096];
    if c.rank == 1 {
        // One overflow block, locally managed, unlinked when less than 1000 bytes are left.
        let mut me = me_desc(
            block.as_mut_ptr(),
            3300,
            PTL_ME_OP_PUT | PTL_ME_MANAGE_LOCAL,
            0,
            !0,
        );
        me.min_free = 1000;
        append(c.ni, PT, &me, PTL_OVERFLOW_LIST, 900);
    }
    c.barrier();
    let mut drops0 = 0;
    unsafe { ok(PtlNIStatus(c.ni, PTL_SR_DROP_COUNT, &mut drops0)) };
    let msgs: [(u64, usize); 4] = [(0x10, 100), (0x20, 2000), (0x10, 300), (0x30, 50)];
    if c.rank == 0 {
        let mut s = vec![0u8; 4096];
        let md = md_bind(c.ni, s.as_mut_ptr(), s.len(), eq, PTL_CT_NONE, 0);
        for (k, &(bits, n)) in msgs.iter().enumerate() {
            s[..n].copy_from_slice(&pattern(k as u64, n));
            put(md, 0, n as u64, PTL_ACK_REQ, 1, PT, bits, 0, k, k as u64);
            expect(eq, PTL_EVENT_SEND);
            let a = expect(eq, PTL_EVENT_ACK);
            if k < 3 {
                assert_eq!((a.ni_fail_type, a.mlength), (PTL_NI_OK, n as u64));
            } else {
                // The overflow block unlinked itself: nothing takes the fourth message.
                assert_eq!(a.ni_fail_type, PTL_NI_DROPPED);
            }
        }
        ok(PtlMDRelease(md));
    }
    c.barrier();
    if c.rank == 1 {
        // The deposits: PUT events from the overflow list, at consecutive offsets.
        let mut off = 0;
        for (k, &(_, n)) in msgs.iter().enumerate() {
            let ev = expect(eq, PTL_EVENT_PUT);
            assert_eq!(ev.ptl_list, PTL_OVERFLOW_LIST);
            assert_eq!(ev.user_ptr as usize, 900);
            assert_eq!(ev.start as usize, block.as_ptr() as usize + off);
            assert_eq!(ev.hdr_data, k as u64);
            off += n;
            if k == 2 {
                // 2400 of 3300 bytes used: less than 1000 left.
                let u = expect(eq, PTL_EVENT_AUTO_UNLINK);
                assert_eq!(u.user_ptr as usize, 900);
                break;
            }
        }
        // The fourth message found no entry (dropped: not a flow-controlled entry).
        // Probe: bits 0x10 twice in the unexpected list; SEARCH_ONLY reports without removing.
        let probe = me_desc(ptr::null_mut(), 0, PTL_ME_OP_PUT | PTL_ME_USE_ONCE, 0x10, 0);
        unsafe {
            ok(PtlMESearch(
                c.ni,
                PT,
                &probe,
                PTL_SEARCH_ONLY,
                11 as *mut c_void,
            ))
        };
        let s = expect(eq, PTL_EVENT_SEARCH);
        assert_eq!(
            (s.ni_fail_type, s.mlength, s.user_ptr as usize),
            (PTL_NI_OK, 100, 11)
        );
        // A use-once receive for 0x10 takes the first 0x10 message only.
        let mut rb = vec![0u8; 64];
        let me = me_desc(
            rb.as_mut_ptr(),
            64,
            PTL_ME_OP_PUT | PTL_ME_USE_ONCE,
            0x10,
            0,
        );
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, 21);
        let ev = expect(eq, PTL_EVENT_PUT_OVERFLOW);
        assert_eq!(
            (ev.user_ptr as usize, ev.rlength, ev.mlength),
            (21, 100, 100)
        );
        assert_eq!(ev.start as usize, block.as_ptr() as usize);
        let got = unsafe { std::slice::from_raw_parts(ev.start as *const u8, 100) };
        assert_eq!(got, &pattern(0, 100)[..]);
        assert_eq!(expect(eq, PTL_EVENT_AUTO_UNLINK).user_ptr as usize, 21);
        // A persistent receive with ignore bits sweeps the rest (0x20, 0x10); then the overflow
        // block has no more headers: AUTO_FREE.
        let me = me_desc(rb.as_mut_ptr(), 64, PTL_ME_OP_PUT, 0, 0xff);
        let h = append(c.ni, PT, &me, PTL_PRIORITY_LIST, 22);
        let a = expect(eq, PTL_EVENT_PUT_OVERFLOW);
        assert_eq!(
            (a.match_bits, a.mlength, a.start as usize),
            (0x20, 2000, block.as_ptr() as usize + 100)
        );
        let b = expect(eq, PTL_EVENT_PUT_OVERFLOW);
        assert_eq!(
            (b.match_bits, b.mlength, b.start as usize),
            (0x10, 300, block.as_ptr() as usize + 2100)
        );
        let f = expect(eq, PTL_EVENT_AUTO_FREE);
        assert_eq!(f.user_ptr as usize, 900);
        ok(PtlMEUnlink(h));
        // Nothing left: a search reports no match.
        unsafe {
            ok(PtlMESearch(
                c.ni,
                PT,
                &probe,
                PTL_SEARCH_DELETE,
                12 as *mut c_void,
            ))
        };
        let s = expect(eq, PTL_EVENT_SEARCH);
        assert_eq!((s.ni_fail_type, s.user_ptr as usize), (PTL_NI_NO_MATCH, 12));
        let mut drops = 0;
        unsafe { ok(PtlNIStatus(c.ni, PTL_SR_DROP_COUNT, &mut drops)) };
        assert_eq!(drops - drops0, 1);
    }
    c.barrier();
}

/// A use-once entry takes one message; a locally managed entry packs messages one after the
/// other and unlinks itself when less than `min_free` is left.
fn use_once_manage_local(c: &mut Ctx) {
    let eq = eq_alloc(c.ni, 64);
    pt_alloc(c.ni, 0, eq, PT);
    let mut block = vec![0u8; 1000];
    let mut once = vec![0u8; 100];
    if c.rank == 1 {
        let mut me = me_desc(
            block.as_mut_ptr(),
            1000,
            PTL_ME_OP_PUT | PTL_ME_MANAGE_LOCAL,
            1,
            0,
        );
        me.min_free = 200;
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, 1);
        let me = me_desc(
            once.as_mut_ptr(),
            100,
            PTL_ME_OP_PUT | PTL_ME_USE_ONCE,
            2,
            0,
        );
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, 2);
    }
    c.barrier();
    if c.rank == 0 {
        let s = pattern(9, 1000);
        let md = md_bind(c.ni, s.as_ptr() as *mut u8, 1000, eq, PTL_CT_NONE, 0);
        for k in 0..3u64 {
            put(md, k * 300, 300, PTL_ACK_REQ, 1, PT, 1, 0, 0, 0);
            expect(eq, PTL_EVENT_SEND);
            let a = expect(eq, PTL_EVENT_ACK);
            assert_eq!(
                (a.ni_fail_type, a.mlength, a.remote_offset),
                (PTL_NI_OK, 300, k * 300)
            );
        }
        // The locally managed entry is gone: a fourth message finds nothing.
        put(md, 0, 10, PTL_ACK_REQ, 1, PT, 1, 0, 0, 0);
        expect(eq, PTL_EVENT_SEND);
        assert_eq!(expect(eq, PTL_EVENT_ACK).ni_fail_type, PTL_NI_DROPPED);
        put(md, 0, 50, PTL_ACK_REQ, 1, PT, 2, 0, 0, 0);
        expect(eq, PTL_EVENT_SEND);
        assert_eq!(expect(eq, PTL_EVENT_ACK).ni_fail_type, PTL_NI_OK);
        put(md, 0, 50, PTL_ACK_REQ, 1, PT, 2, 0, 0, 0);
        expect(eq, PTL_EVENT_SEND);
        assert_eq!(expect(eq, PTL_EVENT_ACK).ni_fail_type, PTL_NI_DROPPED);
        ok(PtlMDRelease(md));
    }
    c.barrier();
    if c.rank == 1 {
        for k in 0..3 {
            let ev = expect(eq, PTL_EVENT_PUT);
            assert_eq!(ev.start as usize, block.as_ptr() as usize + k * 300);
            assert_eq!(ev.mlength, 300);
        }
        assert_eq!(expect(eq, PTL_EVENT_AUTO_UNLINK).user_ptr as usize, 1);
        assert_eq!(block[..900], pattern(9, 1000)[..900]);
        let ev = expect(eq, PTL_EVENT_PUT);
        assert_eq!(ev.user_ptr as usize, 2);
        assert_eq!(expect(eq, PTL_EVENT_AUTO_UNLINK).user_ptr as usize, 2);
        assert_eq!(once[..50], pattern(9, 1000)[..50]);
        expect_empty(eq);
    }
    c.barrier();
}

/// Truncation, `PTL_ME_NO_TRUNCATE`, and the Red Storm reject entry: a last entry of length 0
/// that matches everything, so a message without room is truncated to zero bytes and the
/// sender learns from its acknowledgment (`mlength` 0) that it must send again.
fn truncate(c: &mut Ctx) {
    let eq = eq_alloc(c.ni, 64);
    pt_alloc(c.ni, 0, eq, PT);
    let mut small = vec![0u8; 100];
    let mut strict = vec![0u8; 100];
    if c.rank == 1 {
        let me = me_desc(
            strict.as_mut_ptr(),
            100,
            PTL_ME_OP_PUT | PTL_ME_NO_TRUNCATE,
            7,
            0,
        );
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, 1);
        let me = me_desc(
            small.as_mut_ptr(),
            100,
            PTL_ME_OP_PUT | PTL_ME_USE_ONCE,
            8,
            0,
        );
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, 2);
        let reject = me_desc(ptr::null_mut(), 0, PTL_ME_OP_PUT, 0, !0);
        append(c.ni, PT, &reject, PTL_PRIORITY_LIST, 3);
    }
    c.barrier();
    if c.rank == 0 {
        let s = pattern(3, 500);
        let md = md_bind(c.ni, s.as_ptr() as *mut u8, 500, eq, PTL_CT_NONE, 0);
        // 500 bytes into a 100-byte truncating entry: 100 land.
        put(md, 0, 500, PTL_ACK_REQ, 1, PT, 8, 0, 0, 0);
        expect(eq, PTL_EVENT_SEND);
        let a = expect(eq, PTL_EVENT_ACK);
        assert_eq!((a.ni_fail_type, a.mlength), (PTL_NI_OK, 100));
        // 500 bytes at the strict entry: it does not match; the reject entry takes it, 0 bytes.
        put(md, 0, 500, PTL_ACK_REQ, 1, PT, 7, 0, 0, 0);
        expect(eq, PTL_EVENT_SEND);
        let a = expect(eq, PTL_EVENT_ACK);
        assert_eq!((a.ni_fail_type, a.mlength), (PTL_NI_OK, 0));
        // 60 bytes fit the strict entry.
        put(md, 0, 60, PTL_ACK_REQ, 1, PT, 7, 0, 0, 0);
        expect(eq, PTL_EVENT_SEND);
        let a = expect(eq, PTL_EVENT_ACK);
        assert_eq!((a.ni_fail_type, a.mlength), (PTL_NI_OK, 60));
        ok(PtlMDRelease(md));
    }
    c.barrier();
    if c.rank == 1 {
        let e = expect(eq, PTL_EVENT_PUT);
        assert_eq!((e.user_ptr as usize, e.rlength, e.mlength), (2, 500, 100));
        expect(eq, PTL_EVENT_AUTO_UNLINK);
        assert_eq!(small[..], pattern(3, 500)[..100]);
        let e = expect(eq, PTL_EVENT_PUT);
        assert_eq!((e.user_ptr as usize, e.rlength, e.mlength), (3, 500, 0));
        let e = expect(eq, PTL_EVENT_PUT);
        assert_eq!((e.user_ptr as usize, e.mlength), (1, 60));
        assert_eq!(strict[..60], pattern(3, 500)[..60]);
    }
    c.barrier();
}

/// Flow control: a message that finds no entry on a flow-controlled portal table entry disables
/// it (`PTL_EVENT_PT_DISABLED`); later messages are refused (`PTL_NI_PT_DISABLED` in the
/// initiator's acknowledgment) until the target re-enables it; the initiator sends them again.
/// A full event queue disables the entry the same way.
fn flow_control(c: &mut Ctx) {
    let eq = eq_alloc(c.ni, 4);
    let ieq = eq_alloc(c.ni, 64);
    pt_alloc(c.ni, PTL_PT_FLOWCTRL, eq, PT);
    let mut rb = vec![0u8; 64 * 16];
    let post = |c: &Ctx, rb: &mut Vec<u8>, k: usize| {
        let me = me_desc(
            rb[k * 64..].as_mut_ptr(),
            64,
            PTL_ME_OP_PUT
                | PTL_ME_USE_ONCE
                | PTL_ME_EVENT_LINK_DISABLE
                | PTL_ME_EVENT_UNLINK_DISABLE,
            0,
            !0,
        );
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, k);
    };
    if c.rank == 1 {
        post(c, &mut rb, 0);
    }
    c.barrier();
    let s = pattern(5, 64 * 16);
    let md = md_bind(c.ni, s.as_ptr() as *mut u8, s.len(), ieq, PTL_CT_NONE, 0);
    if c.rank == 0 {
        let mut failed = Vec::new();
        for k in 0..3u64 {
            put(md, k * 64, 64, PTL_ACK_REQ, 1, PT, 0, 0, k as usize, 0);
            expect(ieq, PTL_EVENT_SEND);
            let a = expect(ieq, PTL_EVENT_ACK);
            if k == 0 {
                assert_eq!(a.ni_fail_type, PTL_NI_OK);
            } else {
                assert_eq!(a.ni_fail_type, PTL_NI_PT_DISABLED);
                failed.push(a.user_ptr as usize as u64);
            }
        }
        c.barrier(); // the target recovers
        c.barrier();
        for k in failed {
            put(md, k * 64, 64, PTL_ACK_REQ, 1, PT, 0, 0, k as usize, 0);
            expect(ieq, PTL_EVENT_SEND);
            assert_eq!(expect(ieq, PTL_EVENT_ACK).ni_fail_type, PTL_NI_OK);
        }
        c.barrier();
        // Second round: the target does not read its 4-slot queue; the fifth message finds it
        // full and disables the entry.
        let mut refused = 0;
        for k in 0..6u64 {
            put(md, k * 64, 64, PTL_ACK_REQ, 1, PT, 0, 0, k as usize, 0);
            expect(ieq, PTL_EVENT_SEND);
            if expect(ieq, PTL_EVENT_ACK).ni_fail_type == PTL_NI_PT_DISABLED {
                refused += 1;
            }
        }
        assert_eq!(refused, 2);
        c.barrier();
    } else if c.rank == 1 {
        c.barrier();
        assert_eq!(expect(eq, PTL_EVENT_PUT).user_ptr as usize, 0);
        let d = expect(eq, PTL_EVENT_PT_DISABLED);
        assert_eq!((d.pt_index, d.ni_fail_type), (PT, PTL_NI_PT_DISABLED));
        expect_empty(eq);
        // Recovery: post receives, re-enable.
        post(c, &mut rb, 1);
        post(c, &mut rb, 2);
        ok(PtlPTEnable(c.ni, PT));
        c.barrier();
        for _ in 0..2 {
            expect(eq, PTL_EVENT_PUT);
        }
        assert_eq!(rb[64..192], s[64..192]);
        for k in 3..11 {
            post(c, &mut rb, k);
        }
        c.barrier();
        c.barrier();
        // Four events fit; the fifth message disabled the entry (its event is in the reserve).
        for _ in 0..4 {
            expect(eq, PTL_EVENT_PUT);
        }
        expect(eq, PTL_EVENT_PT_DISABLED);
        expect_empty(eq);
        ok(PtlPTEnable(c.ni, PT));
    } else {
        for _ in 0..4 {
            c.barrier();
        }
    }
    ok(PtlMDRelease(md));
}

/// Counting events: bytes and operations on the target entry, sends and acknowledgments on the
/// initiator's MD (`PTL_CT_ACK_REQ`: counted, no full event).
fn counting(c: &mut Ctx) {
    let ct = ct_alloc(c.ni);
    pt_alloc(c.ni, 0, PTL_EQ_NONE, PT);
    let mut rb = vec![0u8; 64 * 1024];
    if c.rank == 1 {
        let mut me = me_desc(
            rb.as_mut_ptr(),
            rb.len(),
            PTL_ME_OP_PUT | PTL_ME_MANAGE_LOCAL | PTL_ME_EVENT_CT_COMM | PTL_ME_EVENT_CT_BYTES,
            0,
            !0,
        );
        me.ct_handle = ct;
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, 0);
    }
    c.barrier();
    if c.rank == 0 {
        let s = pattern(1, 64);
        let md = md_bind(
            c.ni,
            s.as_ptr() as *mut u8,
            64,
            PTL_EQ_NONE,
            ct,
            PTL_MD_EVENT_CT_SEND | PTL_MD_EVENT_CT_ACK,
        );
        for _ in 0..10 {
            put(md, 0, 64, PTL_CT_ACK_REQ, 1, PT, 0, 0, 0, 0);
        }
        let mut v = ptl_ct_event_t::default();
        unsafe { ok(PtlCTWait(ct, 20, &mut v)) };
        assert_eq!(
            v,
            ptl_ct_event_t {
                success: 20,
                failure: 0
            }
        );
        ok(PtlCTSet(ct, ptl_ct_event_t::default()));
        ok(PtlCTInc(
            ct,
            ptl_ct_event_t {
                success: 0,
                failure: 2,
            },
        ));
        unsafe { ok(PtlCTGet(ct, &mut v)) };
        assert_eq!(
            v,
            ptl_ct_event_t {
                success: 0,
                failure: 2
            }
        );
        // Poll with a timeout on a count that will not be reached.
        let mut which = 9;
        let rc = unsafe { PtlCTPoll(&ct, &100u64, 1, 20, &mut v, &mut which) };
        assert_eq!(rc, PTL_CT_NONE_REACHED);
        ok(PtlMDRelease(md));
    } else if c.rank == 1 {
        let mut v = ptl_ct_event_t::default();
        unsafe { ok(PtlCTWait(ct, 640, &mut v)) };
        assert_eq!(v.success, 640);
        assert_eq!(rb[576..640], pattern(1, 64)[..]);
    }
    c.barrier();
}

/// Atomics: every rank adds to rank 1's counters; fetch-and-add and compare-and-swap.
fn atomic(c: &mut Ctx) {
    let eq = eq_alloc(c.ni, 64);
    pt_alloc(c.ni, 0, eq, PT);
    let mut target = [0i64; 4];
    if c.rank == 1 {
        let me = me_desc(
            target.as_mut_ptr().cast(),
            32,
            PTL_ME_OP_PUT | PTL_ME_OP_GET | PTL_ME_EVENT_COMM_DISABLE,
            0,
            0,
        );
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, 0);
    }
    c.barrier();
    let add = [c.rank as i64 + 1, 10, -1, 0];
    let md = md_bind(c.ni, add.as_ptr() as *mut u8, 32, eq, PTL_CT_NONE, 0);
    for _ in 0..5 {
        ok(PtlAtomic(
            md,
            0,
            24,
            PTL_ACK_REQ,
            ptl_process_t::from_rank(1),
            PT,
            0,
            0,
            ptr::null_mut(),
            0,
            PTL_SUM,
            PTL_INT64_T,
        ));
        expect(eq, PTL_EVENT_SEND);
        assert_eq!(expect(eq, PTL_EVENT_ACK).ni_fail_type, PTL_NI_OK);
    }
    c.barrier();
    let n = c.size as i64;
    if c.rank == 1 {
        assert_eq!(target[0], 5 * n * (n + 1) / 2);
        assert_eq!(target[1], 50 * n);
        assert_eq!(target[2], -5 * n);
    }
    c.barrier();
    if c.rank == 0 {
        let mut old = [0i64; 1];
        let getmd = md_bind(c.ni, old.as_mut_ptr().cast(), 8, eq, PTL_CT_NONE, 0);
        ok(PtlFetchAtomic(
            getmd,
            0,
            md,
            8,
            8,
            ptl_process_t::from_rank(1),
            PT,
            0,
            16,
            ptr::null_mut(),
            0,
            PTL_SUM,
            PTL_INT64_T,
        ));
        expect(eq, PTL_EVENT_SEND);
        expect(eq, PTL_EVENT_REPLY);
        assert_eq!(old[0], -5 * n);
        // Compare-and-swap the last word: 0 -> 42 succeeds, 0 -> 43 then fails.
        let swap = [42i64, 43];
        let smd = md_bind(c.ni, swap.as_ptr() as *mut u8, 16, eq, PTL_CT_NONE, 0);
        let zero = 0i64;
        for (k, expect_old) in [(0u64, 0i64), (8, 42)] {
            unsafe {
                ok(PtlSwap(
                    getmd,
                    0,
                    smd,
                    k,
                    8,
                    ptl_process_t::from_rank(1),
                    PT,
                    0,
                    24,
                    ptr::null_mut(),
                    0,
                    (&zero as *const i64).cast(),
                    PTL_CSWAP,
                    PTL_INT64_T,
                ))
            };
            expect(eq, PTL_EVENT_SEND);
            expect(eq, PTL_EVENT_REPLY);
            assert_eq!(old[0], expect_old);
        }
        ok(PtlMDRelease(getmd));
        ok(PtlMDRelease(smd));
    }
    c.barrier();
    if c.rank == 1 {
        assert_eq!(target[2], -5 * n + 10);
        assert_eq!(target[3], 42);
    }
    ok(PtlMDRelease(md));
    c.barrier();
}

/// What MPI's one-sided operations ask of the NI, while the target makes no Portals call: rank 1
/// exposes words (no events) and sleeps 2 s; rank 0 moves data with one descriptor counted on
/// one counting event (acknowledgments and replies) — a put, a 64-bit sum, a double sum and a
/// fetching double max, a byte swap with its old value, a replace by `PtlSwap` and a 32-bit
/// compare-and-swap — and waits for the count with a 1 s limit. With `STORMPI_PTL_OFFLOAD` (the
/// offload thread plays the NIC) that is met; with the argument `stalls` (no offload) the count
/// must not be reached in that time. Rank 1 checks the words after it wakes.
fn offload(c: &mut Ctx) {
    let stalls = std::env::args().nth(2).as_deref() == Some("stalls");
    pt_alloc(c.ni, 0, PTL_EQ_NONE, PT);
    // [0..4) i64, [4] f64, [5] f64, [6] 8 bytes, [7] two i32.
    let mut target = [0u64; 8];
    target[4] = 1.5f64.to_bits();
    target[5] = 2.0f64.to_bits();
    target[6] = u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8]);
    target[7] = 7;
    if c.rank == 1 {
        let me = me_desc(
            target.as_mut_ptr().cast(),
            64,
            PTL_ME_OP_PUT | PTL_ME_OP_GET | PTL_ME_NO_TRUNCATE | PTL_ME_EVENT_COMM_DISABLE,
            0x77,
            0,
        );
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, 0);
    }
    c.barrier();
    if c.rank == 1 {
        std::thread::sleep(std::time::Duration::from_secs(2));
    } else if c.rank == 0 {
        let ct = ct_alloc(c.ni);
        // One descriptor over a scratch area: sources first, results after.
        let mut mem = [0u64; 16];
        mem[0] = 10;
        mem[1] = 20;
        mem[2] = 3;
        mem[3] = 2.25f64.to_bits();
        mem[4] = 8.0f64.to_bits();
        mem[5] = u64::from_le_bytes([9; 8]);
        mem[6] = 0xdead_0000_0000_0063;
        let cmp: u32 = 7;
        let base = mem.as_mut_ptr() as *mut u8;
        let md = md_bind(
            c.ni,
            base,
            128,
            PTL_EQ_NONE,
            ct,
            PTL_MD_EVENT_CT_ACK | PTL_MD_EVENT_CT_REPLY,
        );
        let to = ptl_process_t::from_rank(1);
        // Rank 1 may still be in the barrier's last call: let it fall asleep first.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let t0 = std::time::Instant::now();
        ok(PtlPut(
            md,
            0,
            16,
            PTL_CT_ACK_REQ,
            to,
            PT,
            0x77,
            0,
            ptr::null_mut(),
            0,
        ));
        ok(PtlAtomic(
            md,
            16,
            8,
            PTL_CT_ACK_REQ,
            to,
            PT,
            0x77,
            8,
            ptr::null_mut(),
            0,
            PTL_SUM,
            PTL_INT64_T,
        ));
        ok(PtlAtomic(
            md,
            24,
            8,
            PTL_CT_ACK_REQ,
            to,
            PT,
            0x77,
            32,
            ptr::null_mut(),
            0,
            PTL_SUM,
            PTL_DOUBLE,
        ));
        ok(PtlFetchAtomic(
            md,
            64,
            md,
            32,
            8,
            to,
            PT,
            0x77,
            40,
            ptr::null_mut(),
            0,
            PTL_MAX,
            PTL_DOUBLE,
        ));
        // SAFETY: the operand is unused by a plain swap; the compare value outlives the call.
        unsafe {
            ok(PtlSwap(
                md,
                72,
                md,
                40,
                8,
                to,
                PT,
                0x77,
                48,
                ptr::null_mut(),
                0,
                ptr::null(),
                PTL_SWAP,
                PTL_UINT8_T,
            ));
            ok(PtlSwap(
                md,
                80,
                md,
                48,
                4,
                to,
                PT,
                0x77,
                56,
                ptr::null_mut(),
                0,
                (&cmp as *const u32).cast(),
                PTL_CSWAP,
                PTL_UINT32_T,
            ));
        }
        let mut v = ptl_ct_event_t::default();
        let rc = unsafe { PtlCTWait(ct, 6, &mut v) };
        let took = t0.elapsed().as_secs_f64();
        ok(rc);
        assert_eq!(v.failure, 0);
        if stalls {
            assert!(
                took > 1.0,
                "the operations completed in {took:.3} s without the target"
            );
        } else {
            assert!(
                took < 1.0,
                "the operations took {took:.3} s: they waited for the target"
            );
        }
        assert_eq!(f64::from_bits(mem[8]), 2.0, "fetched max");
        assert_eq!(
            mem[9],
            u64::from_le_bytes([1, 2, 3, 4, 5, 6, 7, 8]),
            "swapped out"
        );
        assert_eq!(mem[10] as u32, 7, "compare-and-swap old value");
        ok(PtlMDRelease(md));
        println!("offload: 6 operations on a sleeping target took {took:.3} s");
    }
    c.barrier();
    if c.rank == 1 {
        assert_eq!(&target[..3], &[10, 20 + 3, 0]);
        assert_eq!(f64::from_bits(target[4]), 1.5 + 2.25);
        assert_eq!(f64::from_bits(target[5]), 8.0);
        assert_eq!(target[6], u64::from_le_bytes([9; 8]));
        assert_eq!(target[7] as u32, 0x63, "compare-and-swap's new value");
    }
    c.barrier();
}

/// Every rank sends to every rank (itself included) with a wildcard receive per source; the
/// initiator field and header data say who sent.
fn all_to_all(c: &mut Ctx) {
    let eq = eq_alloc(c.ni, 1024);
    pt_alloc(c.ni, 0, eq, PT);
    let n = c.size as usize;
    let mut rb = vec![0u8; n * 256];
    for src in 0..n {
        let mut me = me_desc(
            rb[src * 256..].as_mut_ptr(),
            256,
            PTL_ME_OP_PUT | PTL_ME_USE_ONCE,
            0x5000,
            0xff,
        );
        me.match_id = ptl_process_t::from_rank(src as u32);
        append(c.ni, PT, &me, PTL_PRIORITY_LIST, src);
    }
    c.barrier();
    let s = pattern(c.rank as u64, 256);
    let md = md_bind(c.ni, s.as_ptr() as *mut u8, 256, eq, PTL_CT_NONE, 0);
    for dst in 0..n as u32 {
        put(
            md,
            0,
            256,
            PTL_NO_ACK_REQ,
            (c.rank + dst) % n as u32,
            PT,
            0x5000 | dst as u64,
            0,
            0,
            c.rank as u64,
        );
    }
    let mut got = vec![false; n];
    let mut sends = 0;
    while got.iter().any(|g| !g) || sends < n {
        let ev = wait(eq);
        match ev.type_ {
            PTL_EVENT_SEND => sends += 1,
            PTL_EVENT_PUT => {
                let src = ev.initiator.rank() as usize;
                assert_eq!(ev.hdr_data, src as u64);
                assert_eq!(ev.user_ptr as usize, src);
                assert!(!got[src]);
                got[src] = true;
                assert_eq!(rb[src * 256..(src + 1) * 256], pattern(src as u64, 256)[..]);
            }
            PTL_EVENT_AUTO_UNLINK => {}
            t => panic!("unexpected event {t}"),
        }
    }
    c.barrier();
    ok(PtlMDRelease(md));
}

/// A physical, non-matching interface beside the logical one: list entries, (nid, pid) ids.
fn physical(c: &mut Ctx) {
    let mut ni = 0;
    unsafe {
        ok(PtlNIInit(
            PTL_IFACE_DEFAULT,
            PTL_NI_NO_MATCHING | PTL_NI_PHYSICAL,
            PTL_PID_ANY,
            ptr::null(),
            ptr::null_mut(),
            &mut ni,
        ));
    }
    let mut id = ptl_process_t::default();
    unsafe { ok(PtlGetPhysId(ni, &mut id)) };
    assert_eq!(id.phys().pid, c.rank);
    let eq = eq_alloc(ni, 16);
    let mut pt = 0;
    unsafe { ok(PtlPTAlloc(ni, 0, eq, PTL_PT_ANY, &mut pt)) };
    let mut rb = vec![0u8; 32];
    let le = ptl_le_t {
        start: rb.as_mut_ptr().cast(),
        length: 32,
        ct_handle: PTL_CT_NONE,
        uid: PTL_UID_ANY,
        options: PTL_LE_OP_PUT | PTL_LE_USE_ONCE,
    };
    let mut h = 0;
    unsafe {
        ok(PtlLEAppend(
            ni,
            pt,
            &le,
            PTL_PRIORITY_LIST,
            3 as *mut c_void,
            &mut h,
        ))
    };
    c.barrier();
    let peer = (c.rank + 1) % c.size;
    let s = pattern(c.rank as u64, 32);
    let md = md_bind(ni, s.as_ptr() as *mut u8, 32, eq, PTL_CT_NONE, 0);
    ok(PtlPut(
        md,
        0,
        32,
        PTL_ACK_REQ,
        ptl_process_t::from_phys(0, peer),
        pt,
        0,
        0,
        ptr::null_mut(),
        0,
    ));
    let mut seen = 0;
    while seen < 3 {
        let ev = wait(eq);
        match ev.type_ {
            PTL_EVENT_SEND | PTL_EVENT_AUTO_UNLINK => seen += 1,
            PTL_EVENT_ACK => assert_eq!(ev.ni_fail_type, PTL_NI_OK),
            PTL_EVENT_PUT => {
                let from = (c.rank + c.size - 1) % c.size;
                assert_eq!(ev.initiator.phys().pid, from);
                assert_eq!(rb[..], pattern(from as u64, 32)[..]);
                seen += 1;
            }
            t => panic!("unexpected event {t}"),
        }
    }
    c.barrier();
    ok(PtlMDRelease(md));
    ok(PtlNIFini(ni));
}
