//! One-sided communication (issue 19): the self-checking C programs `tests/c/rma_*.c` at 2, 3 and
//! 8 ranks (8 oversubscribed on a 2-core machine) over the default transports, and each over
//! `--mca btl tcp,self` (every message through the TCP BTL, even on one node) at 3 ranks; and
//! `rma_shared_nodes.c` on the node build, where memory cannot be shared.

use stormpi_tests::{c_program, run_job};

fn check(name: &str, np: u32, options: &[&str]) {
    run_job(np, options, &c_program(name), &[]).assert_ok(name);
}

macro_rules! rma_tests {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn np2() {
                super::check(stringify!($name), 2, &[]);
            }
            #[test]
            fn np3() {
                super::check(stringify!($name), 3, &[]);
            }
            #[test]
            fn np8() {
                super::check(stringify!($name), 8, &[]);
            }
            #[test]
            fn np3_tcp() {
                super::check(stringify!($name), 3, &["--mca", "btl", "tcp,self"]);
            }
        }
    )*};
}

rma_tests! {
    rma_fence,
    rma_lock,
    rma_pscw,
    rma_accumulate,
    rma_dynamic,
    rma_large_count,
    rma_shared,
    rma_atomics,
    rma_lean,
}

/// Shared windows where memory cannot be shared (`tests/c/rma_shared_nodes.c`): the node build,
/// whose platform has no shared segments, with four ranks on two nodes (`STORMPI_NIDS`).
#[test]
fn shared_windows_on_the_node_build() {
    use stormpi_tests::lwk::{node_program, LwkJob, Pml, Target};
    let prog = node_program(
        &Target::host(),
        &stormpi_tests::c_source("rma_shared_nodes"),
        &[],
    );
    let mut job = LwkJob::new(4, Pml::Ob1);
    job.env.push(("STORMPI_NIDS".into(), "0*2,1*2".into()));
    job.run(&prog, &[]).assert_ok("rma_shared_nodes");
}

/// Passive-target progress (`tests/c/rma_passive_progress.c`): over TCP, rank 0's
/// lock/put/flush/get/unlock epoch on rank 1's window completes while rank 1 sleeps 2 s outside
/// MPI (the program fails if the epoch took 1 s or more).
#[test]
fn passive_target_progress_over_tcp() {
    let name = "rma_passive_progress";
    let out = run_job(2, &["--mca", "btl", "tcp,self"], &c_program(name), &[]);
    out.assert_ok(name);
}

/// The same at 3 ranks with the default transports: the sleeper is reached by shared memory,
/// and the thread (there for the tcp BTL's sockets) serves it on its backstop timeout.
#[test]
fn passive_target_progress_default_transports() {
    let name = "rma_passive_progress";
    run_job(3, &[], &c_program(name), &[]).assert_ok(name);
}

/// Without the thread (`osc_progress_thread=off`) the same epoch waits for the sleeper: the
/// check above can fail, and it is the thread that makes it pass.
#[test]
fn passive_target_stalls_without_the_progress_thread() {
    let name = "rma_passive_progress";
    let options = [
        "--mca",
        "btl",
        "tcp,self",
        "--mca",
        "osc_progress_thread",
        "off",
    ];
    run_job(2, &options, &c_program(name), &["stalls"]).assert_ok(name);
}
