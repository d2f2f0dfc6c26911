//! Every collective of the Rust API (the `mpi` crate of stormpi-linux) against values computed
//! locally, run by `tests/tests/rust_programs.rs` under stormrun at 1 to 8 ranks.
//!
//! On MPI_COMM_WORLD, on a duplicate, and on the halves of a split (odd and even ranks, so the
//! ranks of a half are not those of the world): barrier and immediate barrier, broadcast from
//! every root, reduce to every root, allreduce (blocking and immediate), gather and scatter at
//! every root, allgather, all-to-all, scan, exclusive scan and reduce-scatter-block — with 0, 1,
//! 7 and 300,000 elements (2.4 MB of `f64` or `u64`, past every eager limit). Rank 0 prints
//! `OK rust_coll <size>`; a rank that sees a wrong value prints `FAIL rust_coll: rank R: ...` and
//! exits 1.

use mpi::{Communicator, Op};

/// Element counts: empty, one, odd, and large.
const COUNTS: [usize; 4] = [0, 1, 7, 300_000];

fn fail(rank: i32, what: String) -> ! {
    eprintln!("FAIL rust_coll: rank {rank}: {what}");
    std::process::exit(1);
}

/// Unwraps an MPI result or fails with what was being done.
fn check<T>(rank: i32, what: &str, r: mpi::Result<T>) -> T {
    r.unwrap_or_else(|e| fail(rank, format!("{what}: {e}")))
}

/// Element `i` of rank `r`'s contribution in test `seq`: distinct per rank, element and test.
fn value(seq: u64, r: i32, i: usize) -> u64 {
    seq.wrapping_mul(0x9e37_79b9)
        .wrapping_add((r as u64 + 1) * 1_000_003)
        .wrapping_add(i as u64 * 7919)
        % 1_000_000
}

fn values(seq: u64, r: i32, n: usize) -> Vec<u64> {
    (0..n).map(|i| value(seq, r, i)).collect()
}

/// Compares `got` with `want`, failing with the first difference.
fn same<T: PartialEq + std::fmt::Debug>(me: i32, what: &str, got: &[T], want: &[T]) {
    if got.len() != want.len() {
        fail(
            me,
            format!("{what}: {} elements, expected {}", got.len(), want.len()),
        );
    }
    if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
        fail(
            me,
            format!(
                "{what}: element {i} is {:?}, expected {:?}",
                got[i], want[i]
            ),
        );
    }
}

/// Runs every collective on `comm`; `name` says which communicator in messages.
fn exercise(universe: &mpi::Universe, comm: &Communicator<'_>, world_rank: i32, name: &str) {
    let (rank, size) = (comm.rank(), comm.size());
    let me = world_rank;
    check(me, "barrier", comm.barrier());
    universe.scope(|s| {
        let req = check(me, "immediate barrier", comm.immediate_barrier(s));
        check(me, "immediate barrier wait", req.wait());
    });
    let mut seq = 0u64;
    for n in COUNTS {
        let what = |op: &str| format!("{name}: {op} of {n}");

        // Broadcast and reduce from every root.
        for root in 0..size {
            seq += 1;
            let mut buf = if rank == root {
                values(seq, root, n)
            } else {
                vec![0; n]
            };
            check(
                me,
                &what("broadcast"),
                comm.process_at_rank(root).broadcast_into(&mut buf[..]),
            );
            same(me, &what("broadcast"), &buf, &values(seq, root, n));

            seq += 1;
            let mine = values(seq, rank, n);
            let p = comm.process_at_rank(root);
            if rank == root {
                let mut out = vec![0u64; n];
                check(
                    me,
                    &what("reduce"),
                    p.reduce_into_root(&mine, &mut out, Op::Sum),
                );
                let want: Vec<u64> = (0..n)
                    .map(|i| (0..size).map(|r| value(seq, r, i)).sum())
                    .collect();
                same(me, &what("reduce"), &out, &want);
            } else {
                check(me, &what("reduce"), p.reduce_into(&mine, Op::Sum));
            }

            // Gather and scatter at this root.
            seq += 1;
            let mine = values(seq, rank, n);
            if rank == root {
                let mut all = vec![0u64; n * size as usize];
                check(me, &what("gather"), p.gather_into_root(&mine, &mut all));
                let want: Vec<u64> = (0..size).flat_map(|r| values(seq, r, n)).collect();
                same(me, &what("gather"), &all, &want);
            } else {
                check(me, &what("gather"), p.gather_into(&mine));
            }
            seq += 1;
            let mut got = vec![0u64; n];
            if rank == root {
                let all: Vec<u64> = (0..size).flat_map(|r| values(seq, r, n)).collect();
                check(me, &what("scatter"), p.scatter_into_root(&all, &mut got));
            } else {
                check(me, &what("scatter"), p.scatter_into(&mut got));
            }
            same(me, &what("scatter"), &got, &values(seq, rank, n));
        }

        // Allreduce of doubles (max) and of integers (sum), blocking and immediate.
        seq += 1;
        let mine: Vec<f64> = values(seq, rank, n).iter().map(|&v| v as f64).collect();
        let mut out = vec![0f64; n];
        check(
            me,
            &what("allreduce"),
            comm.all_reduce_into(&mine, &mut out, Op::Max),
        );
        let want: Vec<f64> = (0..n)
            .map(|i| (0..size).map(|r| value(seq, r, i)).max().unwrap() as f64)
            .collect();
        same(me, &what("allreduce"), &out, &want);
        seq += 1;
        let mine = values(seq, rank, n);
        let mut out = vec![0u64; n];
        universe.scope(|s| {
            let req = check(
                me,
                &what("immediate allreduce"),
                comm.immediate_all_reduce_into(s, &mine, &mut out, Op::Sum),
            );
            check(me, &what("immediate allreduce wait"), req.wait());
        });
        let want: Vec<u64> = (0..n)
            .map(|i| (0..size).map(|r| value(seq, r, i)).sum())
            .collect();
        same(me, &what("immediate allreduce"), &out, &want);

        // Allgather.
        seq += 1;
        let mut all = vec![0u64; n * size as usize];
        check(
            me,
            &what("allgather"),
            comm.all_gather_into(&values(seq, rank, n), &mut all),
        );
        let want: Vec<u64> = (0..size).flat_map(|r| values(seq, r, n)).collect();
        same(me, &what("allgather"), &all, &want);

        // All-to-all: block j of rank r's send buffer is value(seq, r * 64 + j, ...).
        seq += 1;
        let send: Vec<u64> = (0..size)
            .flat_map(|j| values(seq, rank * 64 + j, n))
            .collect();
        let mut recv = vec![0u64; n * size as usize];
        check(
            me,
            &what("all-to-all"),
            comm.all_to_all_into(&send, &mut recv),
        );
        let want: Vec<u64> = (0..size)
            .flat_map(|r| values(seq, r * 64 + rank, n))
            .collect();
        same(me, &what("all-to-all"), &recv, &want);

        // Scan and exclusive scan (sum); rank 0's exclusive result is left as it was.
        seq += 1;
        let mine = values(seq, rank, n);
        let mut out = vec![0u64; n];
        check(me, &what("scan"), comm.scan_into(&mine, &mut out, Op::Sum));
        let prefix = |upto: i32| -> Vec<u64> {
            (0..n)
                .map(|i| (0..upto).map(|r| value(seq, r, i)).sum())
                .collect()
        };
        same(me, &what("scan"), &out, &prefix(rank + 1));
        let mut out = vec![42u64; n];
        check(
            me,
            &what("exclusive scan"),
            comm.exclusive_scan_into(&mine, &mut out, Op::Sum),
        );
        if rank == 0 {
            same(me, &what("exclusive scan at rank 0"), &out, &vec![42u64; n]);
        } else {
            same(me, &what("exclusive scan"), &out, &prefix(rank));
        }

        // Reduce-scatter-block (min): every rank gets its block of the elementwise minimum.
        seq += 1;
        let send = values(seq, rank, n * size as usize);
        let mut out = vec![0u64; n];
        check(
            me,
            &what("reduce-scatter-block"),
            comm.reduce_scatter_block_into(&send, &mut out, Op::Min),
        );
        let base = rank as usize * n;
        let want: Vec<u64> = (0..n)
            .map(|i| (0..size).map(|r| value(seq, r, base + i)).min().unwrap())
            .collect();
        same(me, &what("reduce-scatter-block"), &out, &want);
    }

    // Lengths that do not fit are refused, and nothing hangs: every rank refuses alike.
    let mut short = vec![0u64; 1];
    if comm.all_gather_into(&[1u64, 2], &mut short).is_ok() {
        fail(
            me,
            format!("{name}: allgather into a buffer too short was accepted"),
        );
    }
}

fn main() {
    let universe = mpi::initialize().unwrap_or_else(|| fail(-1, "mpi::initialize failed".into()));
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    exercise(&universe, &world, rank, "world");
    let dup = check(rank, "duplicate", world.duplicate());
    exercise(&universe, &dup, rank, "duplicate");
    let half = check(rank, "split", world.split_by_color(Some(rank % 2)));
    let half = half.unwrap_or_else(|| fail(rank, "split gave no communicator".into()));
    exercise(&universe, &half, rank, "half");
    drop(half);
    drop(dup);
    check(rank, "final barrier", world.barrier());
    if rank == 0 {
        println!("OK rust_coll {size}");
    }
}
