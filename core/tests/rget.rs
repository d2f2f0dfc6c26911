//! The RDMA get protocol: large messages offered by an `RGET` header and read by the receiver
//! straight into its buffer (`Btl::register`, `Btl::get`), the FIN that completes the send, and
//! the fall-backs to fragments.

mod common;

use std::sync::atomic::Ordering;

use common::{leak_buf, pattern, Cluster, FabricConfig};
use stormpi_core::comm::CommId;
use stormpi_core::datatype::convertor::{Packer, Unpacker};
use stormpi_core::engine::Engine;
use stormpi_core::error::ErrorClass;
use stormpi_core::pml::request::{ReqId, SendMode, Status};
use stormpi_core::wire::{Envelope, Header};

const GET_MIN: usize = 8192;

fn cluster() -> Cluster {
    Cluster::new(
        2,
        FabricConfig {
            get_min: Some(GET_MIN),
            ..FabricConfig::default()
        },
    )
}

fn isend(e: &mut Engine, data: &'static [u8], mode: SendMode) -> ReqId {
    // SAFETY: `data` is leaked and never written.
    let conv = unsafe { Packer::contiguous(data.as_ptr(), data.len()) };
    e.isend(conv, 1, 1, CommId::WORLD, mode, 0).unwrap()
}

fn irecv(e: &mut Engine, buf: &'static mut [u8]) -> ReqId {
    // SAFETY: every buffer in these tests is leaked, so it outlives the request.
    let conv = unsafe { Unpacker::contiguous(buf.as_mut_ptr(), buf.len()) };
    e.irecv(conv, 0, 1, CommId::WORLD, 0).unwrap()
}

/// Sends `len` bytes from 0 to 1 into a buffer of `cap` bytes, the receive posted first or
/// the message left unexpected; checks the bytes and returns both statuses.
fn transfer(c: &mut Cluster, n: u32, len: usize, cap: usize, posted: bool) -> (Status, Status) {
    let data = leak_buf(len, |i| pattern(0, n, i));
    let buf = leak_buf(cap, |_| 0);
    let bufp = buf.as_ptr();
    let (r, s) = if posted {
        let r = irecv(&mut c.e[1], buf);
        (r, isend(&mut c.e[0], data, SendMode::Standard))
    } else {
        let s = isend(&mut c.e[0], data, SendMode::Standard);
        for _ in 0..10 {
            c.step();
        }
        (irecv(&mut c.e[1], buf), s)
    };
    let rs = c.wait(1, r);
    let ss = c.wait(0, s);
    let k = len.min(cap);
    // SAFETY: the receive is complete; the leaked buffer holds `cap` bytes.
    let got = unsafe { std::slice::from_raw_parts(bufp, k) };
    assert!(got == &data[..k], "content of the {len}-byte message");
    (rs, ss)
}

#[test]
fn large_messages_are_read_by_the_receiver_posted_or_unexpected() {
    let mut c = cluster();
    for posted in [true, false] {
        for (n, len) in [5000usize, GET_MIN, 70_001, 1 << 20]
            .into_iter()
            .enumerate()
        {
            let (got, sent) = (
                c.fabric.got.load(Ordering::Relaxed),
                c.fabric.bytes.load(Ordering::Relaxed),
            );
            let (rs, ss) = transfer(&mut c, n as u32, len, len, posted);
            assert_eq!((rs.bytes, rs.message_bytes), (len as u64, len as u64));
            assert!(rs.error.is_none() && ss.error.is_none(), "{rs:?} {ss:?}");
            let read = c.fabric.got.load(Ordering::Relaxed) - got;
            let carried = c.fabric.bytes.load(Ordering::Relaxed) - sent;
            if len >= GET_MIN {
                // Every byte read; on the wire only the RGET and the FIN.
                assert_eq!(read, len as u64, "{len} bytes, posted {posted}");
                assert_eq!(carried, 40 + 24, "{len} bytes, posted {posted}");
            } else {
                assert_eq!(read, 0, "{len} bytes: below the module's get_min");
            }
            assert_eq!(c.fabric.registered(), 0, "registration withdrawn");
        }
    }
    let (s, r) = (c.e[0].stats(), c.e[1].stats());
    assert_eq!((s.rget_sent, r.reads), (6, 6));
    assert!(
        c.platform.warnings().is_empty(),
        "{:?}",
        c.platform.warnings()
    );
}

#[test]
fn a_synchronous_send_completes_only_once_its_message_is_read() {
    let mut c = cluster();
    let data = leak_buf(50_000, |i| pattern(0, 3, i));
    let s = isend(&mut c.e[0], data, SendMode::Synchronous);
    for _ in 0..20 {
        c.step();
    }
    assert!(
        c.e[0].test(s).unwrap().is_none(),
        "complete before a receive"
    );
    let buf = leak_buf(50_000, |_| 0);
    let bufp = buf.as_ptr();
    let r = irecv(&mut c.e[1], buf);
    assert!(c.wait(1, r).error.is_none());
    assert!(c.wait(0, s).error.is_none());
    // SAFETY: the receive is complete.
    assert!(unsafe { std::slice::from_raw_parts(bufp, 50_000) } == &data[..]);
    assert_eq!(c.fabric.got.load(Ordering::Relaxed), 50_000);
}

#[test]
fn a_receive_that_cannot_take_the_bytes_as_they_are_asks_for_fragments() {
    let mut c = cluster();
    // A buffer shorter than the message: fragments, the truncation reported as usual.
    let (rs, ss) = transfer(&mut c, 1, 60_000, 40_000, true);
    assert_eq!((rs.bytes, rs.message_bytes), (40_000, 60_000));
    assert_eq!(rs.error.map(|e| e.class), Some(ErrorClass::Truncate));
    assert!(ss.error.is_none());
    assert_eq!(c.fabric.got.load(Ordering::Relaxed), 0);
    assert_eq!(
        c.fabric.registered(),
        0,
        "registration withdrawn on the ACK"
    );
    assert_eq!(c.e[1].stats().acks_sent, 1);
    // The engine goes on reading the next one.
    let (rs, _) = transfer(&mut c, 2, 30_000, 30_000, true);
    assert!(rs.error.is_none());
    assert_eq!(c.fabric.got.load(Ordering::Relaxed), 30_000);
}

#[test]
fn a_failed_read_falls_back_to_fragments_and_loses_nothing() {
    let mut c = Cluster::new(
        2,
        FabricConfig {
            get_min: Some(GET_MIN),
            get_fails: true,
            ..FabricConfig::default()
        },
    );
    let data = leak_buf(20_000, |i| pattern(0, 4, i));
    let buf = leak_buf(20_000, |_| 0);
    let bufp = buf.as_ptr();
    let r = irecv(&mut c.e[1], buf);
    let s = isend(&mut c.e[0], data, SendMode::Standard);
    assert!(c.wait(1, r).error.is_none());
    assert!(c.wait(0, s).error.is_none());
    // SAFETY: the receive is complete; the leaked buffer holds 20 000 bytes.
    let got = unsafe { std::slice::from_raw_parts(bufp, 20_000) };
    assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(0, 4, i)));
    assert_eq!(c.fabric.registered(), 0);
    assert_eq!(c.e[1].stats().reads, 0);
    assert_eq!(c.e[1].stats().acks_sent, 1, "the ACK asked for fragments");
    let w = c.platform.warnings();
    assert!(
        w.iter().any(|l| l.contains("asking for fragments instead")),
        "{w:?}"
    );
    // Small messages still go.
    let (rs, ss) = transfer(&mut c, 5, 1000, 1000, true);
    assert!(rs.error.is_none() && ss.error.is_none());
}

#[test]
fn corrupt_offers_and_answers_are_rejected() {
    let mut c = cluster();
    let env = Envelope {
        ctx: 0,
        src: 0,
        tag: 1,
        seq: 0,
    };
    let mut frag = [0u8; 48];
    let n = Header::Rget {
        env,
        msg_len: 8,
        sreq: 77,
        key: 5,
    }
    .emit(&mut frag);
    // An RGET carrying its whole message after its header (it may carry the first bytes, never
    // all of them: then there is nothing to read).
    c.fabric.inject(0, 1, &frag[..n + 8]);
    // A FIN naming no live send, and one from a process the send is not to.
    let n = Header::Fin {
        sreq: 12345,
        failed: false,
    }
    .emit(&mut frag);
    c.fabric.inject(1, 0, &frag[..n]);
    for _ in 0..5 {
        c.step();
    }
    let w = c.platform.warnings();
    assert!(
        w.iter()
            .any(|l| l.contains("RGET carries all of its message")),
        "{w:?}"
    );
    assert!(
        w.iter().any(|l| l.contains("FIN for no live request")),
        "{w:?}"
    );
    assert_eq!((c.e[0].stats().rejected, c.e[1].stats().rejected), (1, 1));
    // Nothing was matched or lost: a real exchange goes through.
    let (rs, _) = transfer(&mut c, 6, 20_000, 20_000, true);
    assert!(rs.error.is_none());
}

#[test]
fn a_strided_receive_of_an_offer_takes_fragments_instead() {
    let mut c = cluster();
    // 4096 ints sent contiguous, received every other int of a buffer twice as long.
    let n = 4096usize;
    let data = leak_buf(4 * n, |i| pattern(0, 8, i));
    let buf = leak_buf(8 * n, |_| 0);
    let bufp = buf.as_ptr();
    let types = c.e[1].types_mut();
    let every_other = types
        .vector(
            n as i64,
            1,
            Some(2),
            None,
            stormpi_core::datatype::Datatype::INT,
        )
        .unwrap();
    types.commit(every_other).unwrap();
    // SAFETY: the leaked buffer covers the vector's extent.
    let conv = unsafe { Unpacker::new(buf.as_mut_ptr(), 1, every_other, c.e[1].types()) }
        .expect("committed type");
    let r = c.e[1].irecv(conv, 0, 1, CommId::WORLD, 0).unwrap();
    let s = isend(&mut c.e[0], data, SendMode::Standard);
    let rs = c.wait(1, r);
    assert!(rs.error.is_none() && c.wait(0, s).error.is_none());
    assert_eq!(rs.bytes, 4 * n as u64);
    // SAFETY: the receive is complete.
    let got = unsafe { std::slice::from_raw_parts(bufp, 8 * n) };
    for i in 0..n {
        assert_eq!(&got[8 * i..8 * i + 4], &data[4 * i..4 * i + 4], "int {i}");
        assert_eq!(&got[8 * i + 4..8 * i + 8], &[0; 4], "gap after int {i}");
    }
    assert_eq!(c.fabric.got.load(Ordering::Relaxed), 0, "nothing read");
    assert_eq!(c.fabric.registered(), 0);
}
