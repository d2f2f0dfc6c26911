//! Point-to-point behaviour of the engine: engines in one process, over `self` and the fabric.

mod common;

use common::{leak_buf, pattern, Cluster, FabricConfig};
use stormpi_core::comm::CommId;
use stormpi_core::datatype::convertor::{Packer, Unpacker};
use stormpi_core::engine::Engine;
use stormpi_core::error::{ErrorClass, Reason};
use stormpi_core::pml::request::{ReqId, SendMode, ANY_SOURCE, ANY_TAG, PROC_NULL};
use stormpi_core::wire::{Envelope, Header, MATCH_LEN};

const W: CommId = CommId::WORLD;

fn isend(e: &mut Engine, data: &'static [u8], dest: i32, tag: i32, mode: SendMode) -> ReqId {
    // SAFETY: `data` is leaked and never written.
    let conv = unsafe { Packer::contiguous(data.as_ptr(), data.len()) };
    e.isend(conv, dest, tag, W, mode, 0).unwrap()
}

fn irecv(e: &mut Engine, buf: &mut [u8], src: i32, tag: i32) -> ReqId {
    // SAFETY: every buffer in these tests is leaked, so it outlives the request.
    let conv = unsafe { Unpacker::contiguous(buf.as_mut_ptr(), buf.len()) };
    e.irecv(conv, src, tag, W, 0).unwrap()
}

fn message(from: u32, n: u32, len: usize) -> &'static [u8] {
    leak_buf(len, |i| pattern(from, n, i))
}

/// Sizes around the eager limit `limit` (header included) and well past it.
fn sizes(limit: usize, max_send: usize) -> Vec<usize> {
    let at = limit - MATCH_LEN;
    vec![
        0,
        1,
        7,
        64,
        at - 1,
        at,
        at + 1,
        limit,
        max_send,
        3 * max_send + 5,
        1 << 20,
    ]
}

#[test]
fn eager_and_rendezvous_sizes_to_self() {
    let mut c = Cluster::new(1, FabricConfig::default());
    let e = &mut c.e[0];
    let limit = e
        .btls()
        .find(|b| b.attrs().component == "self")
        .unwrap()
        .attrs()
        .eager_limit;
    for (n, len) in sizes(limit, 65536).into_iter().enumerate() {
        let before = e.stats();
        let data = message(0, n as u32, len);
        let s = isend(e, data, 0, 5, SendMode::Standard);
        let buf = leak_buf(len, |_| 0);
        let r = irecv(e, buf, 0, 5);
        let st = e.wait(r).unwrap();
        e.wait(s).unwrap();
        assert_eq!(&buf[..], data, "size {len}");
        assert_eq!(
            (st.source, st.tag, st.bytes, st.error),
            (0, 5, len as u64, None)
        );
        let after = e.stats();
        let eager = len + MATCH_LEN <= limit;
        assert_eq!(
            after.eager_sent - before.eager_sent,
            eager as u64,
            "size {len}: eager?"
        );
        assert_eq!(
            after.rndv_sent - before.rndv_sent,
            !eager as u64,
            "size {len}: rendezvous?"
        );
    }
    assert_eq!(e.requests_in_use(), 0);
}

#[test]
fn eager_and_rendezvous_sizes_between_engines_expected_and_unexpected() {
    let cfg = FabricConfig::default();
    let (limit, max_send) = (cfg.eager_limit, cfg.max_send_size);
    let mut c = Cluster::new(2, cfg);
    for (n, len) in sizes(limit, max_send).into_iter().enumerate() {
        for recv_first in [true, false] {
            let data = message(0, n as u32, len);
            let back = message(1, n as u32, len);
            let (b0, b1) = (leak_buf(len, |_| 0xee), leak_buf(len, |_| 0xee));
            let mut post = |c: &mut Cluster| {
                (
                    irecv(&mut c.e[1], &mut b1[..], 0, 9),
                    irecv(&mut c.e[0], &mut b0[..], 1, 9),
                )
            };
            let early = recv_first.then(|| post(&mut c));
            let s0 = isend(&mut c.e[0], data, 1, 9, SendMode::Standard);
            let s1 = isend(&mut c.e[1], back, 0, 9, SendMode::Standard);
            let (r1, r0) = match early {
                Some(r) => r,
                None => {
                    for _ in 0..3 {
                        c.step();
                    }
                    post(&mut c)
                }
            };
            let st1 = c.wait(1, r1);
            let st0 = c.wait(0, r0);
            c.wait(0, s0);
            c.wait(1, s1);
            assert_eq!(&b1[..], data, "size {len} recv_first {recv_first}");
            assert_eq!(&b0[..], back, "size {len} recv_first {recv_first}");
            assert_eq!((st1.source, st1.bytes), (0, len as u64));
            assert_eq!((st0.source, st0.bytes), (1, len as u64));
        }
    }
    let st = c.e[1].stats();
    assert!(
        st.unexpected > 0 && st.frags_sent > 0 && st.acks_sent > 0,
        "{st:?}"
    );
    assert_eq!(c.e[0].requests_in_use() + c.e[1].requests_in_use(), 0);
}

#[test]
fn messages_match_in_send_order_when_fragments_arrive_reordered() {
    let cfg = FabricConfig {
        reorder: true,
        seed: 0x5eed,
        ..FabricConfig::default()
    };
    let mut c = Cluster::new(2, cfg);
    let count = 300u32;
    let lens: Vec<usize> = (0..count)
        .map(|n| [0, 5, 100, 4000, 9000, 40000][n as usize % 6])
        .collect();
    let sends: Vec<ReqId> = (0..count)
        .map(|n| {
            let tag = (n % 3) as i32;
            isend(
                &mut c.e[0],
                message(0, n, lens[n as usize]),
                1,
                tag,
                SendMode::Standard,
            )
        })
        .collect();
    // Receive with ANY_TAG: the n-th receive must get the n-th message.
    for n in 0..count {
        let buf = leak_buf(40000, |_| 0);
        let r = irecv(&mut c.e[1], buf, 0, ANY_TAG);
        let st = c.wait(1, r);
        let len = lens[n as usize];
        assert_eq!(st.bytes, len as u64, "message {n}");
        assert_eq!(st.tag, (n % 3) as i32, "message {n}");
        assert_eq!(&buf[..len], message(0, n, len), "message {n} content");
    }
    for s in sends {
        c.wait(0, s);
    }
    assert!(c.e[1].stats().out_of_order > 0, "the fabric did reorder");
}

#[test]
fn wildcards_match_any_source_and_any_tag_but_not_internal_tags() {
    let mut c = Cluster::new(3, FabricConfig::default());
    let s1 = isend(&mut c.e[1], message(1, 0, 10), 0, 11, SendMode::Standard);
    let s2 = isend(&mut c.e[2], message(2, 0, 20), 0, 22, SendMode::Standard);
    let mut seen = Vec::new();
    for _ in 0..2 {
        let buf = leak_buf(32, |_| 0);
        let r = irecv(&mut c.e[0], buf, ANY_SOURCE, ANY_TAG);
        let st = c.wait(0, r);
        assert_eq!(st.tag, st.source * 11, "tag belongs to its source");
        assert_eq!(
            &buf[..st.bytes as usize],
            message(st.source as u32, 0, st.bytes as usize)
        );
        seen.push(st.source);
    }
    seen.sort();
    assert_eq!(seen, [1, 2]);
    c.wait(1, s1);
    c.wait(2, s2);
    // A specific-source receive with ANY_TAG takes only that source's messages.
    let s = isend(&mut c.e[2], message(2, 1, 3), 0, 7, SendMode::Standard);
    let s_other = isend(&mut c.e[1], message(1, 1, 3), 0, 7, SendMode::Standard);
    let buf = leak_buf(3, |_| 0);
    let r = irecv(&mut c.e[0], buf, 2, ANY_TAG);
    assert_eq!(c.wait(0, r).source, 2);
    c.wait(2, s);
    // The library's own negative tags never match ANY_TAG: an internal (collective) message
    // sent after rank 1's tag-7 message stays invisible to wildcard receives and probes.
    let internal = Header::Match(Envelope {
        ctx: 0,
        src: 1,
        tag: -10,
        seq: 2,
    });
    let mut frag = vec![0u8; MATCH_LEN];
    internal.emit(&mut frag);
    c.fabric.inject(1, 0, &frag);
    let buf = leak_buf(3, |_| 0);
    let r = irecv(&mut c.e[0], buf, ANY_SOURCE, ANY_TAG);
    let st = c.wait(0, r);
    assert_eq!((st.source, st.tag), (1, 7));
    c.wait(1, s_other);
    c.run_until(|c| c.fabric.queued(0) == 0);
    assert_eq!(
        c.e[0].iprobe(ANY_SOURCE, ANY_TAG, W).unwrap(),
        None,
        "internal tag matched ANY_TAG"
    );
    assert_eq!(
        c.e[0].iprobe(1, -10, W).unwrap_err().class,
        ErrorClass::Tag,
        "users cannot name it"
    );
    assert_eq!(c.e[0].stats().rejected, 0);
}

#[test]
fn truncation_is_reported_and_nothing_is_written_past_the_buffer() {
    let mut c = Cluster::new(2, FabricConfig::default());
    for (n, len) in [100usize, 5000, 100_000].into_iter().enumerate() {
        let cap = len / 2;
        let region = leak_buf(len + 64, |_| 0xab);
        let s = isend(
            &mut c.e[0],
            message(0, n as u32, len),
            1,
            1,
            SendMode::Standard,
        );
        let r = irecv(&mut c.e[1], &mut region[..cap], 0, 1);
        let st = c.wait(1, r);
        c.wait(0, s);
        assert_eq!(
            st.error.map(|e| e.class),
            Some(ErrorClass::Truncate),
            "len {len}"
        );
        assert_eq!((st.bytes, st.message_bytes), (cap as u64, len as u64));
        assert_eq!(&region[..cap], &message(0, n as u32, len)[..cap]);
        assert!(
            region[cap..].iter().all(|&b| b == 0xab),
            "len {len}: bytes written past the buffer"
        );
    }
    // The blocking receive reports the same error; the communicator keeps working.
    let s = isend(&mut c.e[0], message(0, 9, 10), 1, 2, SendMode::Standard);
    let mut small = [0u8; 4];
    c.run_until(|c| c.fabric.queued(1) == 0 && c.e[0].is_complete(s).unwrap());
    let st = c.e[1]
        .recv(Unpacker::from_slice(&mut small), 0, 2, W)
        .unwrap();
    assert_eq!(st.error.map(|e| e.class), Some(ErrorClass::Truncate));
    let s = isend(&mut c.e[0], message(0, 10, 10), 1, 2, SendMode::Standard);
    let buf = leak_buf(10, |_| 0);
    let r = irecv(&mut c.e[1], buf, 0, 2);
    assert_eq!(c.wait(1, r).error, None);
    c.wait(0, s);
}

#[test]
fn probe_sees_a_message_without_receiving_it_and_matched_probe_takes_it() {
    let mut c = Cluster::new(2, FabricConfig::default());
    assert_eq!(c.e[1].iprobe(0, 4, W).unwrap(), None);
    let s = isend(&mut c.e[0], message(0, 0, 20_000), 1, 4, SendMode::Standard);
    c.run_until(|c| c.e[1].iprobe(0, 4, W).unwrap().is_some());
    let st = c.e[1].iprobe(ANY_SOURCE, ANY_TAG, W).unwrap().unwrap();
    assert_eq!((st.source, st.tag, st.bytes), (0, 4, 20_000));
    assert!(
        c.e[1].iprobe(0, 4, W).unwrap().is_some(),
        "probe does not consume"
    );
    // A matched probe takes it: no longer visible to probes or receives.
    let (msg, st) = c.e[1].improbe(0, 4, W).unwrap().unwrap();
    assert_eq!(st.bytes, 20_000);
    assert_eq!(c.e[1].iprobe(0, 4, W).unwrap(), None);
    let buf = leak_buf(20_000, |_| 0);
    let r = {
        // SAFETY: leaked buffer.
        let conv = unsafe { Unpacker::contiguous(buf.as_mut_ptr(), buf.len()) };
        c.e[1].imrecv(conv, msg, 0).unwrap()
    };
    assert_eq!(c.wait(1, r).bytes, 20_000);
    c.wait(0, s);
    assert_eq!(&buf[..], message(0, 0, 20_000));
    // Probing MPI_PROC_NULL answers at once.
    assert_eq!(
        c.e[1]
            .iprobe(PROC_NULL, ANY_TAG, W)
            .unwrap()
            .unwrap()
            .source,
        PROC_NULL
    );
}

#[test]
fn cancel_of_a_pending_receive() {
    let mut c = Cluster::new(2, FabricConfig::default());
    let buf = leak_buf(8, |_| 0);
    let r = irecv(&mut c.e[1], buf, 0, 3);
    c.e[1].cancel(r).unwrap();
    let st = c.e[1].test(r).unwrap().unwrap();
    assert!(st.cancelled);
    // A message with that tag now goes to the next receive.
    let s = isend(&mut c.e[0], message(0, 0, 8), 1, 3, SendMode::Standard);
    let buf2 = leak_buf(8, |_| 0);
    let r2 = irecv(&mut c.e[1], buf2, 0, 3);
    let st = c.wait(1, r2);
    assert!(!st.cancelled);
    c.e[1].cancel(r2).ok(); // cancelling a freed request is an error or no-op, never a crash
    c.wait(0, s);
    assert_eq!(buf, &[0u8; 8], "the cancelled receive got nothing");
}

#[test]
fn many_outstanding_requests_complete() {
    let mut c = Cluster::new(2, FabricConfig::default());
    let n = 3000u32;
    let bufs: Vec<&'static mut [u8]> = (0..n).map(|_| leak_buf(64, |_| 0)).collect();
    let mut recvs = Vec::new();
    // Posted in reverse tag order, sent in forward order.
    for (i, b) in bufs.into_iter().enumerate().rev() {
        recvs.push((
            i as u32,
            irecv(&mut c.e[1], &mut b[..], 0, i as i32),
            b as *const [u8],
        ));
    }
    let sends: Vec<ReqId> = (0..n)
        .map(|i| {
            isend(
                &mut c.e[0],
                message(0, i, 64),
                1,
                i as i32,
                SendMode::Standard,
            )
        })
        .collect();
    for (i, r, b) in recvs {
        let st = c.wait(1, r);
        assert_eq!(st.tag, i as i32);
        // SAFETY: the request completed; the leaked buffer is only read now.
        assert_eq!(unsafe { &*b }, message(0, i, 64));
    }
    for s in sends {
        c.wait(0, s);
    }
    assert_eq!(c.e[0].requests_in_use() + c.e[1].requests_in_use(), 0);
}

#[test]
fn exhausted_unexpected_storage_and_full_transport_are_back_pressure_not_failure() {
    let cfg = FabricConfig {
        capacity: 4,
        ..FabricConfig::default()
    };
    let small = [
        ("pml_unexpected_msgs", "8"),
        ("pml_unexpected_chunks", "8"),
        ("pml_unexpected_chunk_size", "256"),
    ];
    let mut c = Cluster::with_params(2, cfg, &small);
    let n = 400u32;
    let sends: Vec<ReqId> = (0..n)
        .map(|i| isend(&mut c.e[0], message(0, i, 300), 1, 0, SendMode::Standard))
        .collect();
    for _ in 0..50 {
        c.step();
    }
    // Nothing can be lost: only 8 are held at the receiver, the rest wait in the sender.
    assert!(c.e[1].stats().refused > 0, "receiver refused when full");
    assert!(
        c.e[0].stats().send_stalls > 0,
        "sender waited for the transport"
    );
    for i in 0..n {
        let buf = leak_buf(300, |_| 0);
        let r = irecv(&mut c.e[1], buf, 0, 0);
        assert_eq!(c.wait(1, r).bytes, 300);
        assert_eq!(&buf[..], message(0, i, 300), "message {i}");
    }
    for s in sends {
        c.wait(0, s);
    }
}

#[test]
fn exhausted_request_pool_is_a_clear_error_naming_the_parameter() {
    let mut c = Cluster::with_params(1, FabricConfig::default(), &[("pml_max_requests", "4")]);
    let mut held = Vec::new();
    for t in 0..4 {
        held.push(irecv(&mut c.e[0], leak_buf(1, |_| 0), 0, t));
    }
    let buf = leak_buf(1, |_| 0);
    // SAFETY: leaked buffer.
    let conv = unsafe { Unpacker::contiguous(buf.as_mut_ptr(), 1) };
    let err = c.e[0].irecv(conv, 0, 9, W, 0).unwrap_err();
    assert_eq!(err.class, ErrorClass::NoMem);
    assert!(matches!(
        err.reason,
        Reason::Exhausted {
            param: "pml_max_requests",
            ..
        }
    ));
    assert!(err.to_string().contains("pml_max_requests"), "{err}");
    for r in held {
        c.e[0].cancel(r).unwrap();
        assert!(c.e[0].test(r).unwrap().unwrap().cancelled);
    }
    assert!(
        c.e[0].irecv(conv_of(buf), 0, 9, W, 0).is_ok(),
        "slots are reusable"
    );
}

fn conv_of(buf: &mut [u8]) -> Unpacker {
    // SAFETY: callers pass leaked buffers.
    unsafe { Unpacker::contiguous(buf.as_mut_ptr(), buf.len()) }
}

#[test]
fn synchronous_send_completes_only_after_the_receive_matches() {
    let mut c = Cluster::new(2, FabricConfig::default());
    for len in [0usize, 8, 100_000] {
        let s = isend(&mut c.e[0], message(0, 0, len), 1, 6, SendMode::Synchronous);
        for _ in 0..100 {
            c.step();
        }
        assert!(
            !c.e[0].is_complete(s).unwrap(),
            "len {len}: completed before the receive"
        );
        let buf = leak_buf(len, |_| 0);
        let r = irecv(&mut c.e[1], buf, 0, 6);
        c.wait(1, r);
        c.wait(0, s);
        assert_eq!(&buf[..], message(0, 0, len));
    }
}

#[test]
fn corrupt_and_hostile_fragments_are_rejected_and_the_job_goes_on() {
    let mut c = Cluster::new(3, FabricConfig::default());
    let env = |ctx: u16, src: i32, seq: u16| Envelope {
        ctx,
        src,
        tag: 1,
        seq,
    };
    let hdr = |h: Header, extra: &[u8]| {
        let mut b = vec![0u8; h.len()];
        h.emit(&mut b);
        b.extend_from_slice(extra);
        b
    };
    let bad: Vec<Vec<u8>> = vec![
        vec![],                                                  // empty
        vec![1, 0, 0],                                           // short
        vec![77, 0, 0, 0, 0, 0, 0, 0],                           // unknown type
        vec![1, 0xf0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // unknown flags
        hdr(Header::Match(env(0, 2, 0)), b"x"),                  // claims rank 2, is rank 1
        hdr(Header::Match(env(0, 99, 0)), b"x"),                 // rank out of range
        hdr(Header::Match(env(60_000, 1, 0)), b"x"),             // context id out of range
        hdr(Header::Match(env(0, 1, 0xf000)), b"x"),             // stale sequence number
        hdr(
            Header::Ack {
                sreq: 12345,
                dreq: 1,
                offset: 0,
            },
            &[],
        ), // ACK for no request
        hdr(
            Header::Frag {
                offset: 0,
                dreq: 0xdead_0000_0001,
            },
            b"zz",
        ), // fragment for no request
        hdr(
            Header::Rndv {
                env: env(0, 1, 0),
                msg_len: 1,
                sreq: 5,
            },
            b"too long",
        ), // inline > length
    ];
    for b in &bad {
        c.fabric.inject(1, 0, b);
    }
    c.run_until(|c| c.fabric.queued(0) == 0);
    assert_eq!(c.e[0].stats().rejected, bad.len() as u64);
    assert_eq!(
        c.platform.warnings().len(),
        bad.len(),
        "one warning each: {:?}",
        c.platform.warnings()
    );
    // Real traffic from the same peer still works, and sequence 0 was not consumed.
    let s = isend(&mut c.e[1], message(1, 0, 5000), 0, 1, SendMode::Standard);
    let buf = leak_buf(5000, |_| 0);
    let r = irecv(&mut c.e[0], buf, 1, 1);
    assert_eq!(c.wait(0, r).bytes, 5000);
    c.wait(1, s);
    assert_eq!(&buf[..], message(1, 0, 5000));
}

#[test]
fn headers_in_the_other_byte_order_are_understood() {
    let cfg = FabricConfig {
        foreign_headers: true,
        ..FabricConfig::default()
    };
    let mut c = Cluster::new(2, cfg);
    for (n, len) in [0usize, 100, 50_000].into_iter().enumerate() {
        let s = isend(
            &mut c.e[0],
            message(0, n as u32, len),
            1,
            70_000,
            SendMode::Synchronous,
        );
        let buf = leak_buf(len, |_| 0);
        let r = irecv(&mut c.e[1], buf, 0, 70_000);
        let st = c.wait(1, r);
        c.wait(0, s);
        assert_eq!((st.tag, st.bytes), (70_000, len as u64));
        assert_eq!(&buf[..], message(0, n as u32, len));
    }
    assert_eq!(c.e[1].stats().rejected, 0);
}

#[test]
fn proc_null_and_bad_arguments() {
    let mut c = Cluster::new(2, FabricConfig::default());
    let e = &mut c.e[0];
    let s = isend(e, message(0, 0, 4), PROC_NULL, 0, SendMode::Standard);
    assert_eq!(e.test(s).unwrap().unwrap().source, PROC_NULL);
    let r = irecv(e, leak_buf(4, |_| 0), PROC_NULL, ANY_TAG);
    let st = e.test(r).unwrap().unwrap();
    assert_eq!((st.source, st.tag, st.bytes), (PROC_NULL, ANY_TAG, 0));
    let data = [0u8; 4];
    assert_eq!(
        e.send(Packer::from_slice(&data), 2, 0, W, SendMode::Standard)
            .unwrap_err()
            .class,
        ErrorClass::Rank
    );
    assert_eq!(
        e.send(Packer::from_slice(&data), -5, 0, W, SendMode::Standard)
            .unwrap_err()
            .class,
        ErrorClass::Rank
    );
    assert_eq!(
        e.send(Packer::from_slice(&data), 1, -1, W, SendMode::Standard)
            .unwrap_err()
            .class,
        ErrorClass::Tag
    );
    assert_eq!(
        e.send(
            Packer::from_slice(&data),
            1,
            0,
            CommId(40),
            SendMode::Standard
        )
        .unwrap_err()
        .class,
        ErrorClass::Comm
    );
    let mut b = [0u8; 4];
    assert_eq!(
        e.recv(Unpacker::from_slice(&mut b), 0, -7, W)
            .unwrap_err()
            .class,
        ErrorClass::Tag
    );
    assert_eq!(
        e.recv(Unpacker::from_slice(&mut b), 9, 0, W)
            .unwrap_err()
            .class,
        ErrorClass::Rank
    );
    assert_eq!(e.iprobe(0, -3, W).unwrap_err().class, ErrorClass::Tag);
    let stale = s;
    assert_eq!(e.test(stale).unwrap_err().class, ErrorClass::Request);
    assert_eq!(
        e.comm_free(CommId::WORLD).unwrap_err().class,
        ErrorClass::Comm
    );
}

#[test]
fn blocking_send_to_self_then_receive() {
    let mut c = Cluster::new(1, FabricConfig::default());
    let e = &mut c.e[0];
    e.send(Packer::from_slice(b"hello"), 0, 1, W, SendMode::Standard)
        .unwrap();
    e.send(
        Packer::from_slice(b"world!"),
        0,
        1,
        CommId::SELF,
        SendMode::Standard,
    )
    .unwrap();
    let mut b = [0u8; 16];
    let st = e
        .recv(Unpacker::from_slice(&mut b), 0, 1, CommId::SELF)
        .unwrap();
    assert_eq!(
        &b[..st.bytes as usize],
        b"world!",
        "SELF and WORLD traffic stay apart"
    );
    let st = e
        .recv(Unpacker::from_slice(&mut b), ANY_SOURCE, 1, W)
        .unwrap();
    assert_eq!(&b[..st.bytes as usize], b"hello");
}

#[test]
fn the_earliest_posted_receive_wins_across_wildcard_kinds() {
    // Post all four kinds of selector that accept (source 1, tag 5), in every rotation of order;
    // each arriving message must go to the earliest posted of the remaining ones.
    let kinds = [(1, 5), (ANY_SOURCE, 5), (1, ANY_TAG), (ANY_SOURCE, ANY_TAG)];
    let mut c = Cluster::new(2, FabricConfig::default());
    for rot in 0..4 {
        let order: Vec<(i32, i32)> = (0..4).map(|i| kinds[(i + rot) % 4]).collect();
        let bufs: Vec<&'static mut [u8]> = (0..4).map(|_| leak_buf(1, |_| 0)).collect();
        let mut reqs = Vec::new();
        for ((src, tag), b) in order.iter().zip(bufs) {
            reqs.push((irecv(&mut c.e[0], b, *src, *tag), b as *const [u8]));
        }
        for n in 0..4u8 {
            let s = isend(&mut c.e[1], leak_buf(1, |_| n), 0, 5, SendMode::Standard);
            c.wait(1, s);
            let (r, b) = reqs[n as usize];
            c.wait(0, r);
            // SAFETY: the request completed; the leaked buffer is only read now.
            assert_eq!(
                unsafe { &*b },
                &[n],
                "rotation {rot}: message {n} went to the wrong receive"
            );
        }
    }
    // A message of another tag or source skips receives that do not accept it, however early.
    let r_other = irecv(&mut c.e[0], leak_buf(1, |_| 0), 1, 6);
    let r_any = irecv(&mut c.e[0], leak_buf(1, |_| 0), ANY_SOURCE, 5);
    let s = isend(&mut c.e[1], leak_buf(1, |_| 9), 0, 5, SendMode::Standard);
    c.wait(0, r_any);
    c.wait(1, s);
    assert!(!c.e[0].is_complete(r_other).unwrap());
    c.e[0].cancel(r_other).unwrap();
}
