//! The Rust API, with each rank on its own thread over the in-process fabric.

mod common;

use std::time::Duration;

use common::{spawn_ranks, FabricConfig};
use stormpi_core::api::{Equivalence, ErrorClass, Universe};

const T: Duration = Duration::from_secs(60);

fn run(n: u32, f: impl Fn(Universe) + Send + Sync + 'static) {
    spawn_ranks(n, FabricConfig::default(), &[], T, f);
}

#[test]
fn ring_of_typed_slices() {
    run(4, |u| {
        let world = u.world();
        let (rank, size) = (world.rank(), world.size());
        let next = world.process_at_rank((rank + 1) % size);
        let prev = world.process_at_rank((rank + size - 1) % size);
        let mut token = [0u64; 3];
        if rank == 0 {
            next.send(&[1u64, 2, 3]).unwrap();
            prev.receive_into(&mut token).unwrap();
            assert_eq!(token, [1 + 3, 2 + 3, 3 + 3]);
        } else {
            let st = prev.receive_into(&mut token).unwrap();
            assert_eq!(
                (st.source_rank(), st.count(u64::DATATYPE)),
                (rank - 1, Some(3))
            );
            next.send(&token.map(|t| t + 1)).unwrap();
        }
        world.barrier().unwrap();
    });
}

#[test]
fn immediate_operations_in_a_scope() {
    run(2, |u| {
        let world = u.world();
        let peer = world.process_at_rank(1 - world.rank());
        let out: Vec<f64> = (0..100_000)
            .map(|i| i as f64 * world.rank() as f64)
            .collect();
        let mut inb = vec![0.0f64; 100_000];
        u.scope(|s| {
            let r = peer.immediate_receive_into(s, &mut inb[..], 3).unwrap();
            let w = peer.immediate_send_with_tag(s, &out[..], 3).unwrap();
            w.wait().unwrap();
            let st = r.wait().unwrap();
            assert_eq!(st.count(f64::DATATYPE), Some(100_000));
        });
        let other = (1 - world.rank()) as f64;
        assert!(inb.iter().enumerate().all(|(i, v)| *v == i as f64 * other));
    });
}

#[test]
fn scope_waits_for_a_forgotten_request() {
    run(2, |u| {
        let world = u.world();
        let mut buf = [0i32; 4];
        if world.rank() == 0 {
            u.scope(|s| {
                let r = world
                    .process_at_rank(1)
                    .immediate_receive_into(s, &mut buf[..], 0)
                    .unwrap();
                // Leaking the request must not let the buffer go while the engine still owns it.
                std::mem::forget(r);
                world.process_at_rank(1).send(&[1u8]).unwrap();
            });
            // The scope returned only after the receive completed.
            assert_eq!(buf, [7, 8, 9, 10]);
        } else {
            let mut go = [0u8];
            world.process_at_rank(0).receive_into(&mut go).unwrap();
            world.process_at_rank(0).send(&[7i32, 8, 9, 10]).unwrap();
        }
        u.with(|e| assert_eq!(e.requests_in_use(), 0));
    });
}

#[test]
fn test_hands_back_an_unfinished_request_and_drop_waits() {
    run(2, |u| {
        let world = u.world();
        if world.rank() == 0 {
            let mut buf = [0u16; 2];
            u.scope(|s| {
                let mut r = world
                    .process_at_rank(1)
                    .immediate_receive_into(s, &mut buf[..], 5)
                    .unwrap();
                r = match r.test().unwrap() {
                    Ok(_) => panic!("completed before anything was sent"),
                    Err(r) => r,
                };
                world.process_at_rank(1).send(&[0u8]).unwrap();
                drop(r); // waits
            });
            assert_eq!(buf, [5, 6]);
        } else {
            let mut go = [0u8];
            world.process_at_rank(0).receive_into(&mut go).unwrap();
            world
                .process_at_rank(0)
                .send_with_tag(&[5u16, 6], 5)
                .unwrap();
        }
    });
}

#[test]
fn probe_then_receive_of_unknown_size_and_matched_probe() {
    run(2, |u| {
        let world = u.world();
        if world.rank() == 0 {
            world
                .process_at_rank(1)
                .send_with_tag(&[3u32; 1234], 8)
                .unwrap();
            world
                .process_at_rank(1)
                .send_with_tag(&[4u32; 77], 9)
                .unwrap();
        } else {
            let any = world.any_process();
            let st = any.probe().unwrap();
            assert_eq!((st.source_rank(), st.tag()), (0, 8));
            let mut buf = vec![0u32; st.count(u32::DATATYPE).unwrap() as usize];
            world
                .process_at_rank(0)
                .receive_into_with_tag(&mut buf, 8)
                .unwrap();
            assert_eq!(buf, vec![3u32; 1234]);
            let (msg, st) = any.matched_probe().unwrap();
            let mut buf = vec![0u32; st.count(u32::DATATYPE).unwrap() as usize];
            msg.matched_receive_into(&mut buf).unwrap();
            assert_eq!(buf, vec![4u32; 77]);
        }
    });
}

#[test]
fn errors_are_results_with_the_standard_class() {
    run(2, |u| {
        let world = u.world();
        let e = world.process_at_rank(5).send(&[1u8]).unwrap_err();
        assert_eq!(e.class, ErrorClass::Rank);
        assert!(e.to_string().contains("rank 5 is out of range"), "{e}");
        assert_eq!(
            world
                .process_at_rank(0)
                .send_with_tag(&[1u8], -3)
                .unwrap_err()
                .class,
            ErrorClass::Tag
        );
        if world.rank() == 0 {
            world.process_at_rank(1).send(&[1u64; 10]).unwrap();
        } else {
            let mut small = [0u64; 4];
            let e = world
                .process_at_rank(0)
                .receive_into(&mut small)
                .unwrap_err();
            assert_eq!(e.class, ErrorClass::Truncate);
            assert!(
                e.to_string().contains("80 bytes truncated to the 32-byte"),
                "{e}"
            );
        }
    });
}

#[test]
fn synchronous_send_and_duplicate_communicators_keep_traffic_apart() {
    run(3, |u| {
        let world = u.world();
        let dup = world.duplicate().unwrap();
        assert_eq!((dup.rank(), dup.size()), (world.rank(), world.size()));
        if world.rank() == 0 {
            // Same tag on both communicators; the receiver takes the dup's first.
            world.process_at_rank(1).send(&[1i64]).unwrap();
            dup.process_at_rank(1).synchronous_send(&[2i64]).unwrap();
        } else if world.rank() == 1 {
            let mut v = [0i64];
            dup.process_at_rank(0).receive_into(&mut v).unwrap();
            assert_eq!(v, [2]);
            world.process_at_rank(0).receive_into(&mut v).unwrap();
            assert_eq!(v, [1]);
        }
        dup.barrier().unwrap();
    });
}

#[test]
fn creating_and_freeing_communicators_reuses_context_ids() {
    // Far more duplicates than context ids: ids must come back after free.
    run(2, |u| {
        let world = u.world();
        for i in 0..3000u32 {
            let dup = world.duplicate().unwrap();
            let peer = dup.process_at_rank(1 - dup.rank());
            if dup.rank() == 0 {
                peer.send(&[i]).unwrap();
            } else {
                let mut v = [0u32];
                peer.receive_into(&mut v).unwrap();
                assert_eq!(v, [i]);
            }
        }
        u.with(|e| {
            assert_eq!(e.requests_in_use(), 0);
            assert!(
                e.comm(stormpi_core::comm::CommId(2)).is_err(),
                "no communicator left behind"
            );
        });
    });
}

#[test]
fn duplicates_beyond_the_table_fail_together_with_a_clear_error() {
    spawn_ranks(2, FabricConfig::default(), &[("comm_max", "4")], T, |u| {
        let world = u.world();
        let a = world.duplicate().unwrap();
        let b = world.duplicate().unwrap();
        let e = world.duplicate().err().expect("table is full");
        assert_eq!(e.class, ErrorClass::NoMem);
        assert!(e.to_string().contains("comm_max"), "{e}");
        drop((a, b));
        world.duplicate().unwrap();
    });
}

#[test]
fn barrier_synchronises_every_rank() {
    use std::sync::atomic::{AtomicU32, Ordering};
    static ARRIVED: AtomicU32 = AtomicU32::new(0);
    run(5, |u| {
        let world = u.world();
        for round in 1..=20u32 {
            ARRIVED.fetch_add(1, Ordering::SeqCst);
            world.barrier().unwrap();
            assert!(
                ARRIVED.load(Ordering::SeqCst) >= round * 5,
                "left the barrier early"
            );
            world.barrier().unwrap();
        }
    });
}

#[test]
fn messages_on_a_new_duplicate_may_arrive_before_it_exists_here() {
    // With a reordering fabric, traffic on the fresh duplicate often overtakes the last message
    // of the context-id agreement; such messages must wait, not be lost or rejected.
    let cfg = FabricConfig {
        reorder: true,
        seed: 99,
        ..FabricConfig::default()
    };
    spawn_ranks(3, cfg, &[], T, |u| {
        let world = u.world();
        for i in 0..200u32 {
            let dup = world.duplicate().unwrap();
            if dup.rank() == 0 {
                for r in 1..dup.size() {
                    dup.process_at_rank(r).send(&[i, r as u32]).unwrap();
                }
            } else {
                let mut v = [0u32; 2];
                dup.process_at_rank(0).receive_into(&mut v).unwrap();
                assert_eq!(v, [i, dup.rank() as u32]);
            }
        }
        u.with(|e| assert_eq!(e.stats().rejected, 0));
    });
}

#[test]
fn split_and_cartesian_communicators_rank_as_asked() {
    run(6, |u| {
        let world = u.world();
        let r = world.rank();
        // Rows of three: rank within the row reversed by the key.
        let row = world
            .split_by_color_with_key(Some(r / 3), -r)
            .unwrap()
            .expect("every rank has a color");
        assert_eq!((row.size(), row.rank()), (3, 2 - r % 3));
        let peer = row.process_at_rank((row.rank() + 1) % 3);
        let mut got = [0i32; 1];
        u.scope(|s| {
            let q = row.process_at_rank((row.rank() + 2) % 3);
            let req = q.immediate_receive_into(s, &mut got[..], 1)?;
            peer.send_with_tag(&[r], 1)?;
            req.wait()
        })
        .unwrap();
        let from_row_rank = (row.rank() + 2) % 3;
        assert_eq!(
            got[0],
            (r / 3) * 3 + (2 - from_row_rank),
            "message from the row"
        );
        assert!(world.split_by_color(None).unwrap().is_none());
        assert_eq!(world.split_shared(0).unwrap().size(), 6);
        // A 2 x 2 grid, periodic in the first dimension: ranks 4 and 5 are left out.
        let grid = world.create_cartesian(&[2, 2], &[true, false]).unwrap();
        match grid {
            None => assert!(r >= 4),
            Some(g) => {
                assert_eq!(&g.cartesian_coordinates(3).unwrap()[..], &[1, 1]);
                let (down, up) = g.cartesian_shift(0, 1).unwrap();
                assert_eq!((down, up), (Some((r + 2) % 4), Some((r + 2) % 4)));
                let (left, right) = g.cartesian_shift(1, 1).unwrap();
                assert_eq!(left, (r % 2 == 1).then_some(r - 1));
                assert_eq!(right, (r % 2 == 0).then_some(r + 1));
            }
        }
    });
}
