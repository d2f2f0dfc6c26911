//! Issue 23: the `sm` BTL's single copy (`process_vm_readv`). Large messages (64 KiB–16 MiB,
//! contiguous, a contiguous derived type, strided on either side) between every pair of ranks of
//! one node, every byte checked (tests/c-extra/sm_single_copy.c): read by the receiver when
//! `btl_sm_single_copy` is on or auto; through the rings when it is off (the default), when a
//! seccomp filter refuses the call from the start, and when it starts refusing midway (no
//! message lost).

use stormpi_tests::{c_extra_program, run_job};

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

#[test]
fn auto_reads_by_single_copy_where_the_kernel_allows_it() {
    job(3, &[ON[0], ON[1], "auto"], "read").assert_ok("sm_single_copy");
}

#[test]
fn by_default_the_rings_carry_everything() {
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
    job(2, &[ON[0], ON[1], "auto"], "deny-before").assert_ok("sm_single_copy");
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
