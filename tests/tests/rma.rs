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
