//! Payloads a transport places straight into the receive buffer (`Sink::place`), and heads sent
//! through `Btl::send_inline`.

mod common;

use std::sync::atomic::Ordering;

use common::{leak_buf, pattern, Cluster, FabricConfig};
use stormpi_core::comm::CommId;
use stormpi_core::datatype::convertor::{Packer, Unpacker};
use stormpi_core::engine::Engine;
use stormpi_core::error::ErrorClass;
use stormpi_core::pml::request::{ReqId, SendMode};

fn isend(e: &mut Engine, data: &'static [u8], dest: i32) -> ReqId {
    // SAFETY: `data` is leaked and never written.
    let conv = unsafe { Packer::contiguous(data.as_ptr(), data.len()) };
    e.isend(conv, dest, 1, CommId::WORLD, SendMode::Standard, 0)
        .unwrap()
}

fn irecv(e: &mut Engine, buf: &mut [u8], src: i32) -> ReqId {
    // SAFETY: every buffer in these tests is leaked, so it outlives the request.
    let conv = unsafe { Unpacker::contiguous(buf.as_mut_ptr(), buf.len()) };
    e.irecv(conv, src, 1, CommId::WORLD, 0).unwrap()
}

fn cluster(cfg: FabricConfig) -> Cluster {
    Cluster::new(2, cfg)
}

/// Sends `len` bytes from 0 to 1 into a buffer of `cap` bytes; the receive's status.
fn transfer(c: &mut Cluster, n: u32, len: usize, cap: usize) -> stormpi_core::pml::request::Status {
    let data = leak_buf(len, |i| pattern(0, n, i));
    let buf = leak_buf(cap, |_| 0);
    let r = irecv(&mut c.e[1], buf, 0);
    let s = isend(&mut c.e[0], data, 1);
    let st = c.wait(1, r);
    c.wait(0, s);
    let k = len.min(cap);
    assert!(buf[..k] == data[..k], "content of the {len}-byte message");
    st
}

#[test]
fn posted_receives_take_every_payload_in_place() {
    let mut c = cluster(FabricConfig {
        place: true,
        ..FabricConfig::default()
    });
    // Eager, one fragment after the rendezvous, many fragments, odd lengths.
    for (n, len) in [1usize, 100, 4000, 4096, 5000, 16384, 70_001, 300_000]
        .into_iter()
        .enumerate()
    {
        let before = c.fabric.placed.load(Ordering::Relaxed);
        let st = transfer(&mut c, n as u32, len, len);
        assert_eq!((st.bytes, st.message_bytes), (len as u64, len as u64));
        assert!(st.error.is_none(), "{:?}", st.error);
        let placed = c.fabric.placed.load(Ordering::Relaxed) - before;
        assert_eq!(placed, len as u64, "{len}-byte message");
    }
    // Synchronous: the rendezvous carries all of it, and its ACK completes the send.
    let data = leak_buf(500, |i| pattern(0, 99, i));
    let buf = leak_buf(500, |_| 0);
    let r = irecv(&mut c.e[1], buf, 0);
    // SAFETY: `data` is leaked and never written.
    let conv = unsafe { Packer::contiguous(data.as_ptr(), data.len()) };
    let s = c.e[0]
        .isend(conv, 1, 1, CommId::WORLD, SendMode::Synchronous, 0)
        .unwrap();
    assert_eq!(c.wait(1, r).bytes, 500);
    c.wait(0, s);
    assert_eq!(&buf[..], &data[..]);
    assert!(
        c.platform.warnings().is_empty(),
        "{:?}",
        c.platform.warnings()
    );
}

#[test]
fn unexpected_messages_and_their_fragments_take_the_usual_way() {
    let mut c = cluster(FabricConfig {
        place: true,
        ..FabricConfig::default()
    });
    for (n, len) in [100usize, 3000, 60_000].into_iter().enumerate() {
        let data = leak_buf(len, |i| pattern(0, n as u32, i));
        let buf = leak_buf(len, |_| 0);
        let s = isend(&mut c.e[0], data, 1);
        // Let the message arrive before its receive is posted.
        for _ in 0..10 {
            c.step();
        }
        let before = c.fabric.placed.load(Ordering::Relaxed);
        let r = irecv(&mut c.e[1], buf, 0);
        assert_eq!(c.wait(1, r).bytes, len as u64);
        c.wait(0, s);
        assert!(buf[..] == data[..], "content of the {len}-byte message");
        // Only the fragments after a rendezvous (the receive exists by then) are placed.
        let placed = c.fabric.placed.load(Ordering::Relaxed) - before;
        let head = 4096 - stormpi_core::wire::RNDV_LEN;
        assert_eq!(
            placed,
            len.saturating_sub(head) as u64 * u64::from(len > 4000)
        );
    }
}

#[test]
fn a_truncating_receive_takes_its_fragments_the_usual_way() {
    let mut c = cluster(FabricConfig {
        place: true,
        ..FabricConfig::default()
    });
    let st = transfer(&mut c, 1, 60_000, 40_000);
    assert_eq!((st.bytes, st.message_bytes), (40_000, 60_000));
    assert_eq!(st.error.map(|e| e.class), Some(ErrorClass::Truncate));
    // The fragments inside the buffer were placed; the one across its end and those beyond it
    // were not.
    let placed = c.fabric.placed.load(Ordering::Relaxed);
    assert!(placed > 0 && placed < 40_000, "{placed}");
    // An eager message larger than the buffer is not placed at all.
    let before = c.fabric.placed.load(Ordering::Relaxed);
    let st = transfer(&mut c, 2, 3000, 1000);
    assert_eq!((st.bytes, st.message_bytes), (1000, 3000));
    assert_eq!(c.fabric.placed.load(Ordering::Relaxed), before);
}

#[test]
fn a_failed_placement_completes_the_receive_with_the_transport_error() {
    for len in [3000usize, 50_000] {
        let mut c = cluster(FabricConfig {
            place: true,
            place_fails: true,
            ..FabricConfig::default()
        });
        let data = leak_buf(len, |i| pattern(0, 7, i));
        let buf = leak_buf(len, |_| 0);
        let r = irecv(&mut c.e[1], buf, 0);
        let s = isend(&mut c.e[0], data, 1);
        let st = c.wait(1, r);
        let e = st.error.expect("the receive reports the lost placement");
        assert_eq!(e.class, ErrorClass::Other);
        // The rendezvous head failed: its ACK still goes out, so the send finishes too.
        c.wait(0, s);
        // The engine goes on: an unexpected message is not placed, so it arrives.
        let data = leak_buf(1000, |i| pattern(0, 8, i));
        let buf = leak_buf(1000, |_| 0);
        let s = isend(&mut c.e[0], data, 1);
        for _ in 0..10 {
            c.step();
        }
        let r = irecv(&mut c.e[1], buf, 0);
        assert!(c.wait(1, r).error.is_none());
        c.wait(0, s);
        assert_eq!(&buf[..], &data[..]);
    }
}

#[test]
fn inline_heads_arrive_like_copied_ones() {
    for place in [false, true] {
        let mut c = cluster(FabricConfig {
            send_inline: true,
            place,
            ..FabricConfig::default()
        });
        for (n, len) in [0usize, 1023, 1024, 4000, 4080, 4081, 9000, 100_000]
            .into_iter()
            .enumerate()
        {
            let st = transfer(&mut c, n as u32, len, len);
            assert_eq!(st.bytes, len as u64);
            assert!(st.error.is_none());
        }
        // Blocking sends take the request-less path.
        let data = leak_buf(3000, |i| pattern(1, 1, i));
        let buf = leak_buf(3000, |_| 0);
        let r = irecv(&mut c.e[1], buf, 0);
        // SAFETY: `data` is leaked and never written.
        let conv = unsafe { Packer::contiguous(data.as_ptr(), data.len()) };
        c.e[0]
            .send(conv, 1, 1, CommId::WORLD, SendMode::Standard)
            .unwrap();
        c.wait(1, r);
        assert_eq!(&buf[..], &data[..]);
        assert!(
            c.platform.warnings().is_empty(),
            "{:?}",
            c.platform.warnings()
        );
    }
}
