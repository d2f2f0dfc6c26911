//! Every self-checking C program of `tests/c` (see its README), built with stormcc and run under
//! stormrun at 2, 3 and 8 ranks (8 is oversubscribed on a 2-core machine), and the choice of BTLs
//! with `--mca btl`.

use stormpi_tests::{c_extra_program, c_program, c_program_from, run_job, workspace_dir};

/// Program arguments: allpairs goes up to 8 MiB per message by default; with 8 ranks on two
/// cores that is 64 pairs, so the largest size is capped there to keep the run to seconds.
fn args(name: &str, np: u32) -> &'static [&'static str] {
    match (name, np) {
        ("allpairs", 8) => &["1048576"],
        // Enough polled operations that spinning ranks sharing cores run past the timeout.
        ("nbc_polled", 10) => &["20000"],
        _ => &[],
    }
}

fn check(name: &str, np: u32) {
    let out = run_job(np, &[], &c_program(name), args(name, np));
    out.assert_ok(name);
}

macro_rules! c_tests {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn np2() {
                super::check(stringify!($name), 2);
            }
            #[test]
            fn np3() {
                super::check(stringify!($name), 3);
            }
            #[test]
            fn np8() {
                super::check(stringify!($name), 8);
            }
        }
    )*};
}

c_tests! {
    hello,
    ring,
    allpairs,
    wildcard,
    ssend,
    persistent,
    waitsome,
    probe,
    truncate,
    errors,
    rsend,
    dup,
    collectives,
    sendrecv_replace,
    cancel,
    many_requests,
    bsend,
    groups,
    topo,
    blacs_combine,
    // issue 27: what rsmpi and mpi4py hit
    self_comm,
    get_parent,
    create_group_empty,
    cart_map_zero,
    finalize_attrs,
    ibarrier_many,
    reduce_user,
    status_conv,
    // issue 18: large counts and persistent collectives
    large_count,
    persistent_coll,
    neighbor_nb,
    isendrecv,
    // issue 18: partitioned point-to-point
    partitioned,
    // issue 18: sessions
    sessions,
    sessions_only,
    // issue 20: MPI-IO
    io_basic,
    io_view,
    io_shared,
    io_errors,
    io_external32,
    io_large_count,
    io_twophase,
    io_sieve,
    // issue 18: communicator info assertions
    comm_hints,
    hints_deep,
    // issue 20: data representations
    io_datarep,
    io_external32_long,
    io_datarep_extent,
    io_external32_holes,
    io_external32_darray,
    // issue 20: non-blocking accesses in the background
    io_nonblocking,
}

/// Issue 20: non-blocking collective accesses with collective buffering progress after their
/// start (4 ranks, as the issue asks, and 3); the program prints when the starts returned and
/// when the computing rank reached its wait.
#[test]
fn io_nbcoll() {
    for np in [4, 3] {
        let out = run_job(np, &[], &c_program("io_nbcoll"), &[]);
        out.assert_ok("io_nbcoll");
        println!("np {np}: {}", out.stdout.trim());
    }
}

/// Issue 20: a darray view of `MPI_LONG` in external32 at 4 ranks (a 2 x 2 grid; the other
/// counts run a 2 x 1, 3 x 1 and 4 x 2 one above).
#[test]
fn io_external32_darray_np4() {
    let out = run_job(4, &[], &c_program("io_external32_darray"), &[]);
    out.assert_ok("io_external32_darray");
}

/// Issue 18: the tools interface. The eager limit comes from the environment, which the
/// program must see through MPI_T before MPI_Init and after it.
#[test]
fn mpi_t() {
    for np in [2, 3] {
        let mut cmd = stormpi_tests::stormrun_command(np, &[], &c_program("mpi_t"), &["8192"]);
        cmd.env("STORMPI_MCA_btl_sm_eager_limit", "8192");
        stormpi_tests::run_stormrun(cmd).assert_ok("mpi_t");
    }
}

/// Issue 18: a 3 GiB message between two ranks on one node (`MPI_Send_c` of 3 * 2^30 bytes),
/// then the same memory as 3 * 2^27 doubles through `MPI_Bcast_c` and `MPI_Allreduce_c`,
/// sampled. About 3 GiB per rank: skipped, loudly, on a machine of less than 16 GiB.
#[test]
fn a_3_gib_message_and_collectives_over_2_gib() {
    let total_kib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
        })
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    if total_kib < 16 << 20 {
        eprintln!(
            "SKIPPED a_3_gib_message_and_collectives_over_2_gib: this machine has {} MiB of \
             memory, the test needs 16 GiB",
            total_kib >> 10
        );
        return;
    }
    // Filling and checking 3 GiB takes ~12 s alone; a longer deadline than the ordinary
    // jobs' keeps a loaded machine from failing it.
    let mut cmd = std::process::Command::new(stormpi_tests::stormrun());
    cmd.args(["-n", "2", "--timeout", "300"])
        .arg(c_program("large_message"));
    stormpi_tests::run(cmd, std::time::Duration::from_secs(330)).assert_ok("large_message");
}

/// Issue 17: 100,000 MPI_Isend/MPI_Irecv pairs outstanding at once in each of 2 ranks (receives
/// posted first, then sends first), with the defaults MPICH and Open MPI run it at: the request
/// pool grows past what a 16-bit handle slot could name.
#[test]
fn many_outstanding_requests_with_default_parameters() {
    check("many_outstanding", 2);
}

/// Issue 17: 10,000 derived datatypes alive at once, each nested 6 deep (resized over struct
/// over hvector over resized over vector over struct), every one carrying a message and checked
/// byte by byte, with the default parameters: the type table grows.
#[test]
fn many_datatypes_nested_six_deep_with_default_parameters() {
    check("many_types", 2);
}

/// Issue 17: 1,000,000 unexpected 8-byte messages (sent before the receiver posts anything),
/// drained in order and checked, with the default parameters: the unexpected pool grows and
/// keeps short payloads in its records.
#[test]
fn a_million_unexpected_messages_with_default_parameters() {
    check("many_unexpected", 2);
}

/// Issue 17: 2,000 communicators alive at once in every process (dups and splits of the world,
/// of each other), a message exchanged and an Allreduce on each, all freed; then creation/free
/// cycles past the context-id space, so ids are reused; with the defaults MPICH and Open MPI run
/// it at: the communicator table and the point-to-point layer's per-communicator state grow.
#[test]
fn many_communicators_with_default_parameters() {
    for np in [2, 3] {
        check("many_comms", np);
    }
}

/// Issue 17: more than 1024 buffered sends in flight at once (messages past the eager limit, sent
/// before the receiver posts anything, into a buffer of exactly the standard's size) and more than
/// 1024 persistent requests alive at once (6,000: Send_init, Recv_init and Bsend_init), started
/// again over three rounds and completed with Waitall, Waitsome and Testsome; every status, handle
/// and byte checked. Neither is capped any more but by the request pool and the attached buffer.
#[test]
fn many_persistent_requests_and_buffered_sends() {
    for np in [2, 3, 8] {
        check("many_persistent", np);
    }
}

/// Issue 7: creating and freeing 100,000 communicators (a dup and a split of it, freed, per
/// cycle) neither leaks context ids or groups nor runs out.
#[test]
fn communicators_created_and_freed_100000_times() {
    run_job(2, &[], &c_program("groups"), &["50000"]).assert_ok("groups");
}

/// Issue 7: every collective on intercommunicators, blocking and non-blocking, checked against
/// locally computed values (tests/c/intercoll.c), with groups of 1 + 1, 1 + 2, 1 + 4 and 2 + 6
/// (and odd/even splits); np 8 is oversubscribed.
#[test]
fn intercoll() {
    for np in [2, 3, 5, 8] {
        check("intercoll", np);
    }
}

/// Intercommunicator collectives with their local phases forced through other paths: reductions
/// cut into many segments (4 KiB), pipelined reduce and broadcast in 1 KiB windows.
#[test]
fn intercoll_small_segments_and_pipelines() {
    let opts = [
        "-x",
        "STORMPI_MCA_coll_segment_bytes=4096",
        "-x",
        "STORMPI_MCA_coll_pipeline_bytes=1024",
        "-x",
        "STORMPI_MCA_coll_bcast_algorithm=pipeline",
        "-x",
        "STORMPI_MCA_coll_reduce_algorithm=pipeline",
    ];
    run_job(5, &opts, &c_program("intercoll"), &[]).assert_ok("intercoll");
}

/// Issue 7: MPI_Comm_idup and MPI_Comm_idup_with_info (tests/c/idup.c): of world, a split and
/// an intercommunicator; a send overlapping one rank's idup; several in flight; across blocking
/// constructions; attributes as at the call.
#[test]
fn idup() {
    for np in [2, 4] {
        check("idup", np);
    }
}

/// Info objects, attributes with copy/delete callbacks across dup and free, names, user error
/// handlers and error codes, MPI_Alloc_mem (tests/c/attrs_info.c), alone and with peers.
#[test]
fn attrs_info() {
    for np in [1, 2, 4] {
        check("attrs_info", np);
    }
}

/// Naming the shared-memory and self BTLs explicitly is the same as the default.
#[test]
fn btl_sm_self() {
    for (name, np) in [("ring", 3), ("allpairs", 2)] {
        run_job(np, &["--mca", "btl", "sm,self"], &c_program(name), &[]).assert_ok(name);
    }
}

/// With only the self BTL, ranks have no path to each other: the first send to another rank
/// must end the job with an error that names the unreachable process, not hang. (In ring, rank
/// 0 sends first, to rank 1; rank 1 only receives until then.)
#[test]
fn btl_self_alone_cannot_reach_peers() {
    let out = run_job(2, &["--mca", "btl", "self"], &c_program("ring"), &[]);
    out.assert_failed_with(&["no transport can reach process 1", "stormrun: rank 0"]);
}

/// A single rank needs no transport but self.
#[test]
fn btl_self_is_enough_for_one_rank() {
    run_job(1, &["--mca", "btl", "self"], &c_program("ring"), &[]).assert_ok("ring");
}

/// examples/heat2d computes the same field whatever the decomposition: the iteration count,
/// the residual and the fixed-point checksum are identical from 1 to 4 ranks, in 2-D blocks and
/// in 1-D strips.
#[test]
fn heat2d_gives_the_same_answer_on_any_rank_count() {
    let prog = c_program_from(&workspace_dir().join("examples/heat2d/heat2d.c"));
    let answer = |np: u32, extra: &[&str]| {
        let mut args = vec!["-n", "64", "-i", "20000", "-t", "1e-4"];
        args.extend(extra);
        let out = run_job(np, &[], &prog, &args);
        assert!(
            out.success() && out.leftover_shm.is_empty(),
            "{}",
            out.report()
        );
        let lines: Vec<String> = out
            .stdout
            .lines()
            .filter(|l| {
                l.starts_with("iterations:")
                    || l.starts_with("residual:")
                    || l.starts_with("checksum (fixed-point):")
            })
            .map(str::to_string)
            .collect();
        assert_eq!(lines.len(), 3, "{}", out.report());
        lines
    };
    let one = answer(1, &[]);
    assert!(
        one[0].contains("(converged"),
        "the run should converge: {one:?}"
    );
    for (np, extra) in [(2, &[][..]), (4, &[][..]), (3, &["-d", "1"][..])] {
        assert_eq!(answer(np, extra), one, "{np} ranks {extra:?}");
    }
}

/// Issue 24: arguments that used to give a wrong success — a 2^63- or 2^65-byte datatype (its
/// size wrapped), MPI_Pack/MPI_Unpack at a negative position (taken as 0), a reduction whose
/// input and output are one buffer — each come back as an error, and the job goes on.
#[test]
fn bad_arguments_are_errors_not_wrong_results() {
    for np in [2, 3] {
        let out = run_job(np, &[], &c_extra_program("bad_args"), &[]);
        out.assert_ok("bad_args");
    }
}

/// Issue 25: every kind of non-blocking collective, with and without MPI_IN_PLACE (the ignored
/// arguments passed as -1, MPI_DATATYPE_NULL, NULL), all in flight on one communicator and
/// completed by one MPI_Waitall, at the rank counts the conformance suite hung at.
#[test]
fn nonblocking_collectives_of_every_kind_in_flight_at_once() {
    for np in [4, 5, 10] {
        check("nbc_all_in_flight", np);
    }
}

/// Issue 25: MPI_Get_address gives addresses whose differences are field offsets, usable as
/// struct displacements (relative, and absolute from MPI_BOTTOM).
#[test]
fn get_address_builds_struct_types() {
    for np in [2, 3] {
        check("get_address", np);
    }
}

/// Issue 25: MPI_Comm_split and MPI_Comm_create on an intercommunicator (colors one side lacks
/// and MPI_UNDEFINED give MPI_COMM_NULL; keys reorder) and MPI_Intercomm_create_from_groups,
/// each new intercommunicator checked by sizes, a message across and an Allreduce.
#[test]
fn intercommunicators_split_created_and_made_from_groups() {
    for np in [2, 3, 5, 8] {
        check("intercomm_split", np);
    }
}

/// Issue 25: generalized requests (MPI_Grequest_start/complete with query, free and cancel
/// callbacks, completed by every form), MPI_Request_get_status, MPI_Status_set_cancelled and
/// MPI_Status_set_elements(_x).
#[test]
fn generalized_requests_and_status_setters() {
    for np in [1, 2, 3] {
        check("grequest", np);
    }
}

/// Issue 25: MPI_Mprobe and MPI_Improbe leave the MPI_ERROR field of their status as the
/// caller set it (so do MPI_Probe and MPI_Iprobe here).
#[test]
fn matched_probes_leave_the_status_error_field_alone() {
    for np in [2, 3] {
        check("probe_status_error", np);
    }
}

/// Issue 25: 64 MPI_Comm_idup in flight per process (no limit of 16 any more), of three
/// parents, overlapping blocking MPI_Comm_dup and MPI_Comm_split of the same parents; every
/// agreement ends with a distinct communicator (it could run out of context ids under overlap).
#[test]
fn many_idups_in_flight_overlapping_other_constructions() {
    for np in [2, 3, 5, 8] {
        check("many_idups", np);
    }
}

/// Issue 25: every predefined datatype's MPI_Type_get_name as MPICH names it (aliases of one
/// handle under MPICH's name: MPI_C_COMPLEX, MPI_LONG_LONG_INT).
#[test]
fn predefined_type_names_are_mpichs() {
    check("type_names", 1);
}

/// Issue 25: reductions on MPI_LONG_DOUBLE (sum, product, max, min; Allreduce, Reduce, Scan,
/// Reduce_local), MPI_C_LONG_DOUBLE_COMPLEX (sum, product) and MPI_LONG_DOUBLE_INT (MAXLOC,
/// MINLOC) with values that differ only past a double's precision.
#[test]
fn long_double_reductions() {
    for np in [1, 2, 3, 8] {
        check("long_double_reduce", np);
    }
}

/// Issue 25: MPI_Comm_split_type with MPI_COMM_TYPE_SHARED, MPI_COMM_TYPE_HW_GUIDED
/// (mpi_shared_memory, and an unknown resource type: MPI_COMM_NULL), MPI_COMM_TYPE_HW_UNGUIDED
/// (a strict subset or MPI_COMM_NULL), MPICH's MPIX_COMM_TYPE_NEIGHBORHOOD and MPI_UNDEFINED.
#[test]
fn split_type_of_every_kind() {
    for np in [1, 2, 3] {
        check("split_type", np);
    }
}

/// Issue 25 (the non-blocking collectives "hang"): 20000 non-blocking collectives and
/// point-to-point pairs, up to 20 in flight on four communicators, completed by every Wait and
/// Test form (Test ones polled in loops), at 10 ranks on 2 cores. A poll that found nothing kept
/// its core, starving the ranks it waited for: past the 60 s timeout before, ~4 s now.
#[test]
fn polled_nonblocking_collectives_with_more_ranks_than_cores() {
    for np in [3, 10] {
        check("nbc_polled", np);
    }
}

/// Issue 27: an MPI_Ireduce_scatter whose counts array its caller overwrites once the call has
/// returned (as mpi4py's int-count fallback does) still gives every rank its block: the counts
/// are read when it starts, as MPICH and Open MPI do.
#[test]
fn reduce_scatter_counts_are_read_at_the_start() {
    for np in [2, 3] {
        let out = run_job(np, &[], &c_extra_program("counts_reused"), &[]);
        out.assert_ok("counts_reused");
    }
}

/// Idle waits that sleep (as oversubscribed ranks in sessions of their own do; `mpi_idle_sleep`
/// 1 forces it) miss no message: rounds of ping-pong, a 64 KiB ring, allreduce and polled
/// barriers with late senders, in sessions of their own and in stormrun's; at 4 ranks with 1 ms
/// sleeps too. A lost wakeup hangs the job past its timeout; a wrong value fails it.
#[test]
fn idle_waits_that_sleep_miss_no_message() {
    let own = ["--own-sessions"];
    let sleep = ["--mca", "mpi_idle_sleep", "1"];
    let long = ["--own-sessions", "--mca", "mpi_idle_sleep_ns", "1000000"];
    let runs: [(u32, &[&str], &str); 5] = [
        (4, &own, "2000"),
        (5, &own, "1000"),
        (2, &sleep, "2000"),
        (4, &sleep, "1000"),
        (4, &long, "200"),
    ];
    for (np, opts, rounds) in runs {
        let out = run_job(np, opts, &c_program("idle_wait"), &[rounds]);
        out.assert_ok("idle_wait");
    }
}
