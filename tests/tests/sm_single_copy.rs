//! Issue 23: the `sm` BTL's single copy (`process_vm_readv`). Large messages (64 KiB–16 MiB,
//! contiguous, a contiguous derived type, strided on either side) between every pair of ranks of
//! one node, every byte checked (tests/c-extra/sm_single_copy.c): read by the receiver when
//! single copy is on, and by default when the ranks outnumber the cores; through the rings when
//! `btl_sm_single_copy=off`, when a seccomp filter refuses the call from the start, and when it
//! starts refusing midway (no message lost).

use std::process::Command;

use stormpi_tests::{c_extra_program, run_job, run_stormrun, stormrun};

fn job(np: u32, options: &[&str], mode: &str) -> stormpi_tests::Output {
    run_job(np, options, &c_extra_program("sm_single_copy"), &[mode])
}

const ON: [&str; 2] = ["--mca", "btl_sm_single_copy"];

#[test]
fn large_messages_are_read_by_single_copy_when_on() {
    for np in [2, 3] {
        job(np, &[ON[0], ON[1], "on", "--mca", "btl", "sm,self"], "read")
            .assert_ok("sm_single_copy");
    }
}

/// Two ranks with the default parameters on one core (the launcher counts the cores it may use).
fn on_one_core(mode: &str) -> stormpi_tests::Output {
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0"])
        .arg(stormrun())
        .args(["-n", "2", "--oversubscribe", "--timeout", "60"])
        .arg(c_extra_program("sm_single_copy"))
        .arg(mode);
    run_stormrun(cmd)
}

#[test]
fn by_default_ranks_sharing_a_core_read_by_single_copy() {
    on_one_core("read").assert_ok("sm_single_copy");
}

#[test]
fn by_default_ranks_with_a_core_each_use_the_rings() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cores < 2 {
        eprintln!("SKIPPED: one core only");
        return;
    }
    job(2, &[], "ring").assert_ok("sm_single_copy");
}

#[test]
fn single_copy_off_sends_everything_through_the_rings() {
    for np in [2, 3] {
        job(np, &[ON[0], ON[1], "off"], "ring").assert_ok("sm_single_copy");
    }
}

#[test]
fn a_kernel_that_refuses_from_the_start_leaves_the_rings() {
    on_one_core("deny-before").assert_ok("sm_single_copy");
}

#[test]
fn on_fails_the_start_when_the_kernel_refuses() {
    let out = job(2, &[ON[0], ON[1], "on"], "deny-before");
    out.assert_failed_with(&["btl_sm_single_copy=on", "process_vm_readv"]);
}

#[test]
fn a_kernel_that_refuses_midway_loses_no_message() {
    for np in [2, 3] {
        let out = job(np, &[ON[0], ON[1], "on"], "deny-after");
        out.assert_ok("sm_single_copy");
        assert!(
            out.stderr.contains("process_vm_readv was refused (EPERM)")
                || out.stderr.contains("Operation not permitted"),
            "the cause is named\n{}",
            out.report()
        );
        assert!(
            out.stderr.contains("asking for fragments instead"),
            "the engine fell back\n{}",
            out.report()
        );
    }
}

#[test]
fn a_bad_single_copy_value_is_an_error_naming_the_parameter() {
    let out = job(2, &[ON[0], ON[1], "sometimes"], "read");
    out.assert_failed_with(&["btl_sm_single_copy"]);
}
