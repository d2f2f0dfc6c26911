//! Striping one message over several routes, and zero-copy fragments.

mod common;

use std::sync::atomic::Ordering;

use common::{leak_buf, pattern, Cluster, FabricConfig};
use stormpi_core::comm::CommId;
use stormpi_core::datatype::convertor::{Packer, Unpacker};
use stormpi_core::engine::Engine;
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

/// Two fabrics: A (the first) and B, with the given bandwidths and latencies.
fn two_links(a: (u32, u32), b: (u32, u32), send_ref: bool, overrides: &[(&str, &str)]) -> Cluster {
    let link = |(mbps, lat): (u32, u32)| FabricConfig {
        bandwidth_mbps: mbps,
        latency_ns: lat,
        send_ref,
        ..FabricConfig::default()
    };
    Cluster::with_fabrics(2, vec![link(a), link(b)], overrides)
}

/// Sends `len` bytes from 0 to 1, checks them, and returns the bytes each fabric carried.
fn transfer(c: &mut Cluster, n: u32, len: usize) -> (u64, u64) {
    let before: Vec<u64> = c
        .fabrics
        .iter()
        .map(|f| f.bytes.load(Ordering::Relaxed))
        .collect();
    let data = leak_buf(len, |i| pattern(0, n, i));
    let buf = leak_buf(len, |_| 0);
    let r = irecv(&mut c.e[1], buf, 0);
    let s = isend(&mut c.e[0], data, 1);
    assert_eq!(c.wait(1, r).bytes, len as u64);
    c.wait(0, s);
    assert_eq!(&buf[..], &data[..], "content of the {len}-byte message");
    let after: Vec<u64> = c
        .fabrics
        .iter()
        .map(|f| f.bytes.load(Ordering::Relaxed))
        .collect();
    (after[0] - before[0], after[1] - before[1])
}

#[test]
fn large_messages_are_striped_in_proportion_to_bandwidth() {
    let mut c = two_links((400, 50_000), (200, 50_000), false, &[]);
    let (a, b) = transfer(&mut c, 0, 8 << 20);
    let share = a as f64 / (a + b) as f64;
    assert!(
        (share - 2.0 / 3.0).abs() < 0.02,
        "A carried {a}, B {b}: A's share {share:.3} is not 2/3"
    );
}

#[test]
fn small_and_medium_messages_stay_on_the_fast_route_when_striping_does_not_pay() {
    // B is slow and far: 100 Mbit/s, 2 ms. A: 1 Gbit/s, 20 us.
    let mut c = two_links((1000, 20_000), (100, 2_000_000), false, &[]);
    for (n, len) in [100usize, 4000, 64 << 10, 1 << 20].into_iter().enumerate() {
        let (_, b) = transfer(&mut c, n as u32, len);
        assert_eq!(b, 0, "{len}-byte message used the slow route");
    }
    // Big enough that B's bandwidth outweighs its latency: 64 MiB takes 537 ms on A alone,
    // 490 ms on both.
    let (a, b) = transfer(&mut c, 9, 64 << 20);
    assert!(b > 0 && a > 5 * b, "A {a}, B {b}");
}

#[test]
fn the_policy_parameter_forces_striping_or_not() {
    let mut always = two_links(
        (1000, 20_000),
        (100, 2_000_000),
        false,
        &[("bml_stripe", "always")],
    );
    let (a, b) = transfer(&mut always, 0, 1 << 20);
    assert!(a > 0 && b > 0, "always: A {a}, B {b}");
    let mut never = two_links(
        (400, 50_000),
        (200, 50_000),
        false,
        &[("bml_stripe", "never")],
    );
    let (_, b) = transfer(&mut never, 0, 8 << 20);
    assert_eq!(b, 0, "never: B carried {b} bytes");
}

#[test]
fn zero_copy_fragments_keep_the_send_open_until_reported() {
    let mut c = two_links((400, 50_000), (200, 50_000), true, &[]);
    for (n, len) in [5000usize, 100_000, 3 << 20].into_iter().enumerate() {
        let (a, b) = transfer(&mut c, n as u32, len);
        assert!(a + b >= len as u64);
    }
    // A send whose zero-copy fragments are not reported yet is not complete: progress only the
    // receiver, so the sender never sees the completions.
    let len = 1 << 20;
    let data = leak_buf(len, |i| pattern(0, 7, i));
    let buf = leak_buf(len, |_| 0);
    let r = irecv(&mut c.e[1], buf, 0);
    let s = isend(&mut c.e[0], data, 1);
    for _ in 0..50 {
        c.step();
        if c.e[1].is_complete(r).unwrap() {
            break;
        }
    }
    assert!(c.e[1].is_complete(r).unwrap());
    // The sender handed every fragment over in its last progress call; their completions come
    // at its next one.
    assert!(
        !c.e[0].is_complete(s).unwrap(),
        "complete before the transport reported its fragments"
    );
    c.e[0].progress();
    assert!(c.e[0].is_complete(s).unwrap());
    assert_eq!(&buf[..], &data[..]);
}

#[test]
fn eager_messages_take_the_faster_of_equally_near_routes() {
    // Same latency; B (given second) is twice as fast: small messages go over B.
    let mut c = two_links((200, 50_000), (400, 50_000), false, &[]);
    let (a, b) = transfer(&mut c, 0, 1000);
    assert_eq!((a, b > 0), (0, true), "A {a}, B {b}");
}
