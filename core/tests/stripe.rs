//! Striping one message over several routes, and zero-copy fragments.

mod common;

use std::sync::atomic::Ordering;

use common::{leak_buf, pattern, Cluster, FabricConfig};
use stormpi_core::bml::{Route, Stripe, StripePolicy, MIN_SHARE};
use stormpi_core::btl::Endpoint;
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
    let cfg = FabricConfig {
        send_ref,
        ..FabricConfig::default()
    };
    two_links_with(a, b, cfg, overrides)
}

/// Two fabrics as [`two_links`], both otherwise configured as `cfg`.
fn two_links_with(
    a: (u32, u32),
    b: (u32, u32),
    cfg: FabricConfig,
    overrides: &[(&str, &str)],
) -> Cluster {
    let link = |(mbps, lat): (u32, u32)| FabricConfig {
        bandwidth_mbps: mbps,
        latency_ns: lat,
        ..cfg.clone()
    };
    Cluster::with_fabrics(2, vec![link(a), link(b)], overrides)
}

/// Route `i` of a synthetic plan.
fn route(i: u8) -> Route {
    Route {
        btl: i,
        ep: Endpoint(0),
    }
}

/// Bytes planned per route of `plan(routes, bytes, policy)`, by module index.
fn shares(routes: &[(u32, u32)], bytes: u64, policy: StripePolicy) -> Vec<(u8, u64)> {
    let routes: Vec<(Route, u32, u32)> = routes
        .iter()
        .enumerate()
        .map(|(i, &(mbps, lat))| (route(i as u8), mbps, lat))
        .collect();
    let plan = Stripe::plan(&routes, bytes, policy);
    let out: Vec<(u8, u64)> = plan.shares().map(|(r, n)| (r.btl, n)).collect();
    assert_eq!(
        out.iter().map(|&(_, n)| n).sum::<u64>(),
        bytes,
        "shares of {bytes} bytes over {routes:?}: {out:?}"
    );
    out
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

#[test]
fn shares_follow_bandwidth_however_large_the_fragments() {
    // tcp's fragments are 512 KiB, so a 1 MiB message is two of them: handing out whole
    // fragments to whichever route would finish one first gave B half of it (and B, at half
    // A's rate, then took a third longer than striping should). Each route takes its share.
    let cfg = FabricConfig {
        eager_limit: 64 << 10,
        max_send_size: 512 << 10,
        send_ref: true,
        ..FabricConfig::default()
    };
    let mut c = two_links_with((400, 20_000), (200, 20_000), cfg, &[]);
    for (n, len) in [(1usize << 20), 3 << 20, (8 << 20) + 12345, 200 << 10]
        .into_iter()
        .enumerate()
    {
        let (a, b) = transfer(&mut c, n as u32, len);
        // The rendezvous carried only what A moves in a round trip (2 x 20 us at 400 Mbit/s
        // = 2000 bytes), not the eager limit: nearly all of the message is striped.
        let share = b as f64 / len as f64;
        assert!(
            (share - 1.0 / 3.0).abs() < 0.005,
            "{len} bytes: A carried {a}, B {b}: B's share {share:.3} is not 1/3"
        );
    }
}

#[test]
fn a_full_route_does_not_hand_its_share_to_the_other() {
    // One fragment in flight per route: when A is full the send waits for A rather than
    // pushing A's bytes onto B (which would then finish last).
    let cfg = FabricConfig {
        max_send_size: 8192,
        capacity: 1,
        ..FabricConfig::default()
    };
    let mut c = two_links_with((400, 20_000), (200, 20_000), cfg, &[]);
    let (a, b) = transfer(&mut c, 0, 2 << 20);
    let share = a as f64 / (a + b) as f64;
    assert!(
        (share - 2.0 / 3.0).abs() < 0.01,
        "A carried {a}, B {b}: A's share {share:.3} is not 2/3"
    );
}

#[test]
fn odd_lengths_in_small_fragments_arrive_whole() {
    // Shares that are no multiple of the fragment size, and a last fragment of a few bytes.
    let cfg = FabricConfig {
        max_send_size: 5000,
        ..FabricConfig::default()
    };
    let mut c = two_links_with((300, 20_000), (100, 20_000), cfg, &[]);
    for (n, len) in [1_000_003usize, 77_777, 4099].into_iter().enumerate() {
        let (a, b) = transfer(&mut c, n as u32, len);
        assert!(a + b >= len as u64);
    }
}

#[test]
fn plans_share_bytes_so_that_routes_finish_together() {
    use StripePolicy::*;
    // Equal latencies: in proportion to bandwidth; rounding goes to the biggest share.
    assert_eq!(
        shares(&[(400, 20_000), (200, 20_000)], 3 << 20, Auto),
        [(0, 2 << 20), (1, 1 << 20)]
    );
    assert_eq!(
        shares(&[(400, 20_000), (200, 20_000)], 1_000_001, Auto),
        [(0, 666_668), (1, 333_333)]
    );
    // Given slowest first: planned fastest first.
    assert_eq!(
        shares(&[(100, 5_000), (300, 5_000)], 400_000, Auto),
        [(1, 300_000), (0, 100_000)]
    );
    // B starts 1 ms later: it gets less, and both end at the same time (A: 1.6 ms of 1 Gbit/s =
    // 200 kB; B: 0.6 ms of 1 Gbit/s = 75 kB).
    assert_eq!(
        shares(&[(1000, 0), (1000, 1_000_000)], 275_000, Auto),
        [(0, 200_000), (1, 75_000)]
    );
    // Too little for a second route: below MIN_SHARE it is dropped.
    let small = 2 * MIN_SHARE;
    assert_eq!(
        shares(&[(400, 20_000), (200, 20_000)], small, Auto),
        [(0, small)]
    );
    assert_eq!(
        shares(&[(400, 20_000), (200, 20_000)], 3 * MIN_SHARE, Auto),
        [(0, 2 * MIN_SHARE), (1, MIN_SHARE)]
    );
    // Three routes, the slowest far away: striping over the two near ones pays, adding the
    // third does not (20 ms before its first byte arrives; the two take 42 ms together).
    assert_eq!(
        shares(
            &[(400, 20_000), (200, 20_000), (100, 20_000_000)],
            3 << 20,
            Auto
        ),
        [(0, 2 << 20), (1, 1 << 20)]
    );
    // never: the one best route; always: every route, by bandwidth alone.
    assert_eq!(
        shares(&[(200, 20_000), (400, 20_000)], 3 << 20, Never),
        [(1, 3 << 20)]
    );
    assert_eq!(
        shares(&[(1000, 0), (1000, 1_000_000)], 200_000, Always),
        [(0, 100_000), (1, 100_000)]
    );
    // One route, or none.
    assert_eq!(shares(&[(200, 20_000)], 5, Auto), [(0, 5)]);
    assert!(Stripe::plan(&[], 5, Auto).is_empty());
}

#[test]
fn fragments_take_turns_and_no_lane_exceeds_its_share() {
    let routes = [(route(0), 400, 20_000), (route(1), 200, 20_000)];
    let total: u64 = 3 << 20;
    let mut plan = Stripe::plan(&routes, total, StripePolicy::Auto);
    let mut left = total;
    let mut lanes = Vec::new();
    while left > 0 {
        let (lane, most) = plan.next(left)[0];
        let n = most.min(512 << 10).min(left);
        plan.account(lane, n as usize);
        lanes.push(plan.route(lane).btl);
        left -= n;
    }
    let taken: Vec<u64> = plan.assigned().map(|(_, n)| n).collect();
    assert_eq!(taken, [2 << 20, 1 << 20]);
    // Both routes start at once (the slower first), then take turns by bandwidth.
    assert_eq!(lanes, [1, 0, 0, 1, 0, 0], "{lanes:?}");
    // When the shares are used up but bytes are left (element boundaries), every lane may
    // take them.
    assert_eq!(plan.next(10).len(), 2);
    assert!(plan.next(10).iter().all(|&(_, n)| n == 10));
}
