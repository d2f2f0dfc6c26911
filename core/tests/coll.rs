//! Collectives through the Rust API: every rank on its own thread over the in-process fabric.

mod common;

use std::time::Duration;

use common::{spawn_ranks, FabricConfig};
use stormpi_core::api::{ErrorClass, Op};

const T: Duration = Duration::from_secs(120);

#[test]
fn broadcast_from_every_root_at_several_sizes() {
    for n in [1u32, 2, 3, 5] {
        spawn_ranks(n, FabricConfig::default(), &[], T, |u| {
            let world = u.world();
            for root in 0..world.size() {
                for len in [0usize, 1, 7, 1000, 300_000] {
                    let mut buf: Vec<u32> = if world.rank() == root {
                        (0..len as u32).map(|i| i ^ root as u32).collect()
                    } else {
                        vec![0; len]
                    };
                    world
                        .process_at_rank(root)
                        .broadcast_into(&mut buf)
                        .unwrap();
                    assert!(
                        buf.iter()
                            .enumerate()
                            .all(|(i, v)| *v == i as u32 ^ root as u32),
                        "root {root} len {len}"
                    );
                }
            }
        });
    }
}

#[test]
fn allreduce_and_reduce_match_a_local_reference() {
    // Segments of 4 KiB force many segments for the large counts.
    spawn_ranks(
        4,
        FabricConfig::default(),
        &[("coll_segment_bytes", "4096")],
        T,
        |u| {
            let world = u.world();
            let r = world.rank() as i64;
            let size = world.size() as i64;
            for count in [0usize, 1, 13, 5000, 140_000] {
                let mine: Vec<i64> = (0..count as i64).map(|i| i * (r + 1) - r).collect();
                let mut sum = vec![0i64; count];
                world.all_reduce_into(&mine, &mut sum, Op::Sum).unwrap();
                let mut max = vec![0i64; count];
                world.all_reduce_into(&mine, &mut max, Op::Max).unwrap();
                for i in 0..count as i64 {
                    let want: i64 = (0..size).map(|q| i * (q + 1) - q).sum();
                    assert_eq!(sum[i as usize], want, "sum count {count} at {i}");
                    let want_max = (0..size).map(|q| i * (q + 1) - q).max().unwrap();
                    assert_eq!(max[i as usize], want_max, "max count {count} at {i}");
                }
                let xs: Vec<f64> = (0..count)
                    .map(|i| (i as f64 + 1.0) * (r as f64 + 0.5))
                    .collect();
                let root = world.process_at_rank((count % 4) as i32);
                if world.rank() == root.rank() {
                    let mut prod = vec![0.0f64; count];
                    root.reduce_into_root(&xs, &mut prod, Op::Prod).unwrap();
                    for (i, p) in prod.iter().enumerate() {
                        let want: f64 = (0..size)
                            .map(|q| (i as f64 + 1.0) * (q as f64 + 0.5))
                            .product();
                        assert!(
                            (p - want).abs() <= want.abs() * 1e-12,
                            "prod count {count} at {i}"
                        );
                    }
                } else {
                    root.reduce_into(&xs, Op::Prod).unwrap();
                }
            }
        },
    );
}

#[test]
fn invalid_root_and_operation_are_errors() {
    spawn_ranks(2, FabricConfig::default(), &[], T, |u| {
        let world = u.world();
        let mut b = [0u8; 4];
        assert_eq!(
            world
                .process_at_rank(2)
                .broadcast_into(&mut b)
                .unwrap_err()
                .class,
            ErrorClass::Root
        );
        let x = [1.0f64];
        let mut y = [0.0f64];
        assert_eq!(
            world
                .all_reduce_into(&x, &mut y, Op::Band)
                .unwrap_err()
                .class,
            ErrorClass::Op
        );
        world.barrier().unwrap();
    });
}
