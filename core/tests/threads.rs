//! Several threads in one engine at once (`MPI_THREAD_MULTIPLE`): ranks on threads of their own
//! over the in-process fabric, each rank's work split over more threads that call the engine
//! concurrently through the Rust API (which always takes the engine's lock). These are also the
//! tests ThreadSanitizer runs (`ci/tsan.sh`).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{spawn_ranks, FabricConfig};
use stormpi_core::api::{Communicator, Op, Universe};

const T: Duration = Duration::from_secs(120);
const THREADS: usize = 3;

fn run(n: u32, f: impl Fn(Universe) + Send + Sync + 'static) {
    spawn_ranks(n, FabricConfig::default(), &[], T, f);
}

/// Per-thread duplicates of world, made before the threads start (collective in order).
fn dups<'u>(u: &'u Universe) -> Vec<Communicator<'u>> {
    (0..THREADS)
        .map(|_| u.world().duplicate().unwrap())
        .collect()
}

/// Payload of round `i` of thread `t` from rank `r`: `len` words, checkable.
fn payload(r: i32, t: usize, i: usize, len: usize) -> Vec<u64> {
    (0..len)
        .map(|k| ((r as u64) << 48) ^ ((t as u64) << 40) ^ ((i as u64) << 20) ^ k as u64)
        .collect()
}

#[test]
fn threads_ping_pong_each_on_its_own_communicator() {
    run(2, |u| {
        let comms = dups(&u);
        std::thread::scope(|s| {
            for (t, c) in comms.iter().enumerate() {
                s.spawn(move || {
                    let (me, peer) = (c.rank(), 1 - c.rank());
                    let p = c.process_at_rank(peer);
                    for i in 0..200 {
                        // Sizes from empty past the eager limit.
                        let len = [0, 1, 7, 100, 3000][i % 5];
                        let mut got = vec![0u64; len];
                        if me == 0 {
                            p.send_with_tag(&payload(me, t, i, len), 5).unwrap();
                            p.receive_into_with_tag(&mut got, 6).unwrap();
                        } else {
                            p.receive_into_with_tag(&mut got, 5).unwrap();
                            p.send_with_tag(&payload(me, t, i, len), 6).unwrap();
                        }
                        assert_eq!(got, payload(peer, t, i, len), "thread {t} round {i}");
                    }
                });
            }
        });
    });
}

#[test]
fn a_thread_blocked_in_a_receive_does_not_stop_the_others() {
    run(2, |u| {
        let world = u.world();
        let comms = dups(&u);
        let others_done = AtomicBool::new(false);
        std::thread::scope(|s| {
            if world.rank() == 0 {
                // Blocks until rank 1 sends, which it does only after the others are through.
                s.spawn(|| {
                    let mut v = [0u32; 1];
                    let st = world
                        .any_process()
                        .receive_into_with_tag(&mut v, 99)
                        .unwrap();
                    assert_eq!((v[0], st.source_rank()), (42, 1));
                });
            }
            for (t, c) in comms.iter().enumerate() {
                s.spawn(move || {
                    let peer = c.process_at_rank(1 - c.rank());
                    for i in 0..100 {
                        let mut got = [0u64; 4];
                        let mine = payload(c.rank(), t, i, 4);
                        if c.rank() == 0 {
                            peer.send(&mine[..]).unwrap();
                            peer.receive_into(&mut got).unwrap();
                        } else {
                            peer.receive_into(&mut got).unwrap();
                            peer.send(&mine[..]).unwrap();
                        }
                        assert_eq!(&got[..], &payload(1 - c.rank(), t, i, 4)[..]);
                    }
                });
            }
            if world.rank() == 1 {
                s.spawn(|| {
                    // The other threads' traffic is all done once everyone's last round is.
                    for c in comms.iter() {
                        c.barrier().unwrap();
                    }
                    others_done.store(true, Ordering::Release);
                    world
                        .process_at_rank(0)
                        .send_with_tag(&[42u32], 99)
                        .unwrap();
                });
            } else {
                s.spawn(|| {
                    for c in comms.iter() {
                        c.barrier().unwrap();
                    }
                });
            }
        });
        if world.rank() == 1 {
            assert!(others_done.load(Ordering::Acquire));
        }
    });
}

#[test]
fn communicators_made_and_freed_from_several_threads_at_once() {
    run(2, |u| {
        let parents = dups(&u);
        std::thread::scope(|s| {
            for (t, p) in parents.iter().enumerate() {
                s.spawn(move || {
                    for i in 0..20 {
                        let d = p.duplicate().unwrap();
                        let color = (d.rank() + i) % 2;
                        let sp = d.split_by_color(Some(color)).unwrap().unwrap();
                        let mut sum = [0u64];
                        d.all_reduce_into(&[(t + 1) as u64], &mut sum, Op::Sum)
                            .unwrap();
                        assert_eq!(sum[0], 2 * (t as u64 + 1));
                        let mut one = [0u64];
                        sp.all_reduce_into(&[1u64], &mut one, Op::Sum).unwrap();
                        assert_eq!(one[0], sp.size() as u64);
                        assert_ne!(d.id(), sp.id());
                    }
                });
            }
        });
    });
}

#[test]
fn collectives_on_distinct_communicators_from_threads_at_once() {
    run(3, |u| {
        let comms = dups(&u);
        let me = u.world().rank();
        std::thread::scope(|s| {
            for (t, c) in comms.iter().enumerate() {
                s.spawn(move || {
                    for i in 0..30u64 {
                        let mut b = [if me == 0 { i + t as u64 } else { 0 }];
                        c.process_at_rank(0).broadcast_into(&mut b).unwrap();
                        assert_eq!(b[0], i + t as u64);
                        let mut all = [0u64; 3];
                        c.all_gather_into(&[me as u64 * 10 + i], &mut all).unwrap();
                        assert_eq!(all, [i, 10 + i, 20 + i]);
                        c.barrier().unwrap();
                    }
                });
            }
        });
    });
}
