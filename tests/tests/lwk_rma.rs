//! One-sided communication on the node build (issue 19): the self-checking C programs
//! `tests/c/rma_*.c` linked against `libstormpi_lwk.a`, each rank confined like a node (no
//! sockets, no new processes), with windows moving data by Portals puts, gets and atomics
//! (`osc_portals=on`) and by active messages only (`osc_portals=off`), at 2 and 4 ranks over the
//! Portals MTL (`pml=cm`), and at 3 over the Portals BTL (`pml=ob1`) with Portals windows.

use stormpi_tests::c_source;
use stormpi_tests::lwk::{node_program, LwkJob, Pml, Target};

fn check(name: &str, np: u32, portals: &str) {
    check_on(name, np, portals, Pml::Cm);
}

fn check_on(name: &str, np: u32, portals: &str, pml: Pml) {
    let prog = node_program(&Target::host(), &c_source(name), &[]);
    LwkJob::new(np, pml)
        .param("osc_portals", portals)
        .run(&prog, &[])
        .assert_ok(name);
}

macro_rules! lwk_rma_tests {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn lwk_portals_np2() {
                super::check(stringify!($name), 2, "on");
            }
            #[test]
            fn lwk_portals_np4() {
                super::check(stringify!($name), 4, "on");
            }
            #[test]
            fn lwk_portals_ob1_np3() {
                super::check_on(stringify!($name), 3, "on", super::Pml::Ob1);
            }
            #[test]
            fn lwk_am_np2() {
                super::check(stringify!($name), 2, "off");
            }
            #[test]
            fn lwk_am_np4() {
                super::check(stringify!($name), 4, "off");
            }
        }
    )*};
}

lwk_rma_tests! {
    rma_fence,
    rma_lock,
    rma_pscw,
    rma_accumulate,
    rma_dynamic,
    rma_large_count,
    rma_atomics,
}

/// Runs `rma_passive_nic` at 2 ranks (rank 1 sleeps 2 s outside MPI while rank 0's epoch on its
/// window runs) with `osc_portals` and the software NI's offload thread (`STORMPI_PTL_OFFLOAD`,
/// the part a NIC plays) as given; `stalls`: check that the epoch waited for the sleeper.
fn passive(portals: &str, offload: bool, stalls: bool) {
    let name = "rma_passive_nic";
    let prog = node_program(&Target::host(), &c_source(name), &[]);
    let mut job = LwkJob::new(2, Pml::Cm).param("osc_portals", portals);
    if offload {
        job.env.push(("STORMPI_PTL_OFFLOAD".into(), "50".into()));
    }
    let args: &[&str] = if stalls { &["stalls"] } else { &[] };
    job.run(&prog, args).assert_ok(name);
}

/// Puts, gets, accumulates, fetch-and-op and compare-and-swap by Portals complete while the
/// target sleeps: the network applies them, not the target's MPI library.
#[test]
fn lwk_portals_passive_target_needs_no_target_progress() {
    passive("on", true, false);
}

/// The same epoch by active messages waits for the sleeper (so the check above can fail, and
/// it is the Portals path that makes it pass).
#[test]
fn lwk_active_messages_wait_for_the_sleeping_target() {
    passive("off", true, true);
}

/// And by Portals on an NI that works only inside its process's calls (the software NI without
/// its offload thread), too: it is the NI, not MPI, that serves the operations.
#[test]
fn lwk_portals_without_offload_waits_for_the_sleeping_target() {
    passive("on", false, true);
}
