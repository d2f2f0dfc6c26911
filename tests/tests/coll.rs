//! The collectives: `tests/c/coll.c` (every collective, blocking and non-blocking, against local
//! references; see the program's header) at 1, 2, 3, 4, 5 and 8 ranks (8 oversubscribed on a
//! 2-core machine), with each algorithm forced in turn through `STORMPI_MCA_coll_*_algorithm`,
//! and with tiny segments so that reductions run in many segments and pipelines in many windows.

use stormpi_tests::{c_program, run_job};

const SIZES: [u32; 6] = [1, 2, 3, 4, 5, 8];

/// Runs coll.c (its group `only`, or everything) at every size with stormrun `options`.
fn coll(options: &[&str], only: Option<&str>) {
    let prog = c_program("coll");
    let args: Vec<&str> = match only {
        Some(g) => vec!["--only", g],
        None => vec![],
    };
    for np in SIZES {
        let out = run_job(np, options, &prog, &args);
        assert!(
            out.success() && out.has_line("OK coll") && out.leftover_shm.is_empty(),
            "coll {options:?} {args:?} at {np} ranks:\n{}",
            out.report()
        );
    }
}

/// Every group with the automatic choice.
#[test]
fn coll_all_automatic() {
    coll(&[], None);
}

/// On a split of world too (ranks reordered, one rank alone), with a duplicate freed while a
/// non-blocking allreduce on it is pending: it completes, and the communicator goes after.
#[test]
fn coll_on_a_split_with_a_communicator_freed_while_busy() {
    let prog = c_program("coll");
    for np in [2, 3, 5] {
        let args = ["--split", "--free-pending", "--large", "65536"];
        let out = run_job(np, &[], &prog, &args);
        assert!(
            out.success() && out.has_line("OK coll") && out.leftover_shm.is_empty(),
            "coll {args:?} at {np} ranks:\n{}",
            out.report()
        );
    }
}

/// The shared-memory collectives (`tests/c/coll_sm.c`: context ids reused communicator after
/// communicator, more communicators than cells, a broadcasting root running ahead, sizes on both
/// sides of the slot, unlike receive types, a non-blocking broadcast in flight across them) at
/// 2, 3, 4 and 8 ranks; the log shows communicators bound to shared memory. With `coll_sm` off
/// the same program passes and none is.
#[test]
fn coll_shared_memory_reuse_run_ahead_and_mixed() {
    let prog = c_program("coll_sm");
    const BOUND: &str = "runs its small collectives in shared memory";
    for np in [2, 3, 4, 8] {
        // Fewer cells than the 60 duplicates the program holds at once.
        let options = [
            "--mca",
            "mpi_log_level",
            "2",
            "--mca",
            "coll_sm_contexts",
            "16",
        ];
        let out = run_job(np, &options, &prog, &[]);
        assert!(
            out.success()
                && out.has_line("OK coll_sm")
                && out.leftover_shm.is_empty()
                && out.stderr.contains(BOUND),
            "coll_sm at {np} ranks:\n{}",
            out.report()
        );
    }
    let options = ["--mca", "mpi_log_level", "2", "--mca", "coll_sm", "off"];
    let out = run_job(4, &options, &prog, &["20"]);
    assert!(
        out.success() && out.has_line("OK coll_sm") && !out.stderr.contains("coll sm:"),
        "coll_sm with coll_sm off:\n{}",
        out.report()
    );
}

/// Reductions cut into many segments (4 KiB of scratch per buffer) and pipelines into 1 KiB
/// windows, set through `--mca`.
#[test]
fn coll_small_segments() {
    coll(
        &[
            "--mca",
            "coll_segment_bytes",
            "4096",
            "--mca",
            "coll_pipeline_bytes",
            "1024",
        ],
        None,
    );
}

/// Forces `coll_<param>_algorithm=<alg>` through the environment and runs the group `only`.
fn forced(param: &str, alg: &str, only: &str) {
    let var = format!("STORMPI_MCA_coll_{param}_algorithm={alg}");
    coll(&["-x", &var], Some(only));
}

macro_rules! forced {
    ($($name:ident: $param:literal = $alg:literal on $only:literal;)*) => {$(
        #[test]
        fn $name() {
            forced($param, $alg, $only);
        }
    )*};
}

forced! {
    coll_barrier_dissemination: "barrier" = "dissemination" on "barrier";
    coll_barrier_recursive_doubling: "barrier" = "recursive_doubling" on "barrier";
    coll_barrier_linear: "barrier" = "linear" on "barrier";
    coll_bcast_binomial: "bcast" = "binomial" on "bcast";
    coll_bcast_pipeline: "bcast" = "pipeline" on "bcast";
    coll_bcast_scatter_allgather: "bcast" = "scatter_allgather" on "bcast";
    coll_reduce_binomial: "reduce" = "binomial" on "reduce";
    coll_reduce_pipeline: "reduce" = "pipeline" on "reduce";
    coll_allreduce_recursive_doubling: "allreduce" = "recursive_doubling" on "allreduce";
    coll_allreduce_ring: "allreduce" = "ring" on "allreduce";
    coll_allreduce_rabenseifner: "allreduce" = "rabenseifner" on "allreduce";
    coll_allreduce_reduce_bcast: "allreduce" = "reduce_bcast" on "allreduce";
    coll_gather_linear: "gather" = "linear" on "gather";
    coll_gather_binomial: "gather" = "binomial" on "gather";
    coll_scatter_linear: "scatter" = "linear" on "scatter";
    coll_scatter_binomial: "scatter" = "binomial" on "scatter";
    coll_allgather_recursive_doubling: "allgather" = "recursive_doubling" on "allgather";
    coll_allgather_bruck: "allgather" = "bruck" on "allgather";
    coll_allgather_ring: "allgather" = "ring" on "allgather";
    coll_allgather_linear: "allgather" = "linear" on "allgather";
    coll_allgatherv_ring: "allgatherv" = "ring" on "allgather";
    coll_allgatherv_linear: "allgatherv" = "linear" on "allgather";
    coll_alltoall_pairwise: "alltoall" = "pairwise" on "alltoall";
    coll_alltoall_linear: "alltoall" = "linear" on "alltoall";
    coll_alltoall_bruck: "alltoall" = "bruck" on "alltoall";
    coll_alltoallv_pairwise: "alltoallv" = "pairwise" on "alltoall";
    coll_alltoallv_linear: "alltoallv" = "linear" on "alltoall";
    coll_reduce_scatter_ring: "reduce_scatter" = "ring" on "reduce_scatter";
    coll_reduce_scatter_recursive_halving: "reduce_scatter" = "recursive_halving" on "reduce_scatter";
    coll_reduce_scatter_reduce_scatter: "reduce_scatter" = "reduce_scatter" on "reduce_scatter";
    coll_scan_recursive_doubling: "scan" = "recursive_doubling" on "scan";
    coll_scan_linear: "scan" = "linear" on "scan";
}

/// The non-blocking group (many collectives in flight on two communicators) with other
/// algorithms forced than the automatic choice takes.
#[test]
fn coll_nonblocking_forced() {
    coll(
        &[
            "-x",
            "STORMPI_MCA_coll_allreduce_algorithm=ring",
            "-x",
            "STORMPI_MCA_coll_scan_algorithm=linear",
            "-x",
            "STORMPI_MCA_coll_bcast_algorithm=pipeline",
        ],
        Some("nonblocking"),
    );
}

/// An unknown algorithm name is refused at init, naming the parameter.
#[test]
fn coll_bad_algorithm_name() {
    let out = run_job(
        2,
        &["-x", "STORMPI_MCA_coll_bcast_algorithm=fastest"],
        &c_program("coll"),
        &["--only", "barrier"],
    );
    out.assert_failed_with(&["coll_bcast_algorithm"]);
}

/// More non-blocking collectives in flight than `coll_max_active` allows: the call fails with an
/// error that names the parameter.
#[test]
fn coll_exhaustion_names_the_parameter() {
    let out = run_job(
        2,
        &["--mca", "coll_max_active", "4"],
        &c_program("coll"),
        &["--only", "nonblocking"],
    );
    out.assert_failed_with(&["coll_max_active"]);
}
