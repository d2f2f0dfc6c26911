//! A small MPI program written against the Rust API (the `mpi` crate of stormpi-linux), run by
//! `tests/tests/rust_programs.rs` under stormrun and under MPICH's Hydra.
//!
//! A token goes around the ring twice (blocking receive, non-blocking send in a scope), then a
//! larger buffer goes once around the other way (past the eager limit), then an allreduce of the
//! ranks and a barrier. Rank 0 prints `OK rust_ring <size>`; any rank that sees a wrong value
//! prints `FAIL rust_ring: rank R: ...` and exits 1.
//!
//! usage: rust_ring [elements of the large message, default 65536]

use mpi::Op;

fn fail(rank: i32, what: String) -> ! {
    eprintln!("FAIL rust_ring: rank {rank}: {what}");
    std::process::exit(1);
}

/// Unwraps an MPI result or fails with what was being done.
fn check<T>(rank: i32, what: &str, r: mpi::Result<T>) -> T {
    r.unwrap_or_else(|e| fail(rank, format!("{what}: {e}")))
}

fn main() {
    let large: usize = std::env::args()
        .nth(1)
        .map_or(65536, |s| s.parse().expect("element count"));
    let universe = mpi::initialize().unwrap_or_else(|| fail(-1, "mpi::initialize failed".into()));
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let right = (rank + 1) % size;
    let left = (rank + size - 1) % size;

    // Token ring: rank 0 starts with 0, every hop adds the sender's rank plus one.
    let mut token = [0u64];
    for lap in 0..2u64 {
        if rank == 0 {
            let start = [lap * 1000];
            universe.scope(|s| {
                let req = check(
                    rank,
                    "isend",
                    world.process_at_rank(right).immediate_send(s, &start),
                );
                let st = check(
                    rank,
                    "receive",
                    world.process_at_rank(left).receive_into(&mut token),
                );
                check(rank, "wait", req.wait());
                if st.source != left {
                    fail(rank, format!("token from {} instead of {left}", st.source));
                }
            });
            let expected = lap * 1000 + (0..size as u64).sum::<u64>();
            if token[0] != expected {
                fail(
                    rank,
                    format!("lap {lap}: token came back as {} not {expected}", token[0]),
                );
            }
        } else {
            check(
                rank,
                "receive",
                world.process_at_rank(left).receive_into(&mut token),
            );
            let next = [token[0] + left as u64 + 1];
            universe.scope(|s| {
                let req = check(
                    rank,
                    "isend",
                    world.process_at_rank(right).immediate_send(s, &next),
                );
                check(rank, "wait", req.wait());
            });
        }
    }

    // A large buffer once around the other way, contents checked at every hop.
    let pattern = |from: i32, i: usize| (from as f64) * 1e6 + i as f64;
    let mine: Vec<f64> = (0..large).map(|i| pattern(rank, i)).collect();
    let mut got = vec![0.0f64; large];
    universe.scope(|s| {
        let req = check(
            rank,
            "isend",
            world.process_at_rank(left).immediate_send(s, &mine),
        );
        check(
            rank,
            "receive",
            world.process_at_rank(right).receive_into(&mut got),
        );
        check(rank, "wait", req.wait());
    });
    if let Some(i) = (0..large).find(|&i| got[i] != pattern(right, i)) {
        fail(
            rank,
            format!("large message from {right}: element {i} is {}", got[i]),
        );
    }

    let mut sum = [0i64];
    check(
        rank,
        "allreduce",
        world.all_reduce_into(&[rank as i64], &mut sum, Op::Sum),
    );
    let expected = (0..size as i64).sum::<i64>();
    if sum[0] != expected {
        fail(rank, format!("allreduce sum {} not {expected}", sum[0]));
    }
    check(rank, "barrier", world.barrier());
    if rank == 0 {
        println!("OK rust_ring {size}");
    }
}
