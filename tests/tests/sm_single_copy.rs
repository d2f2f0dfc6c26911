//! Issue 23: the `sm` BTL's single copy (`process_vm_readv`). Large messages (64 KiB–16 MiB,
//! contiguous, a contiguous derived type, strided on either side) between every pair of ranks of
//! one node, every byte checked (tests/c-extra/sm_single_copy.c): read by the receiver when the
//! kernel allows it, through the rings when `btl_sm_single_copy=off`, when a seccomp filter
//! refuses the call from the start, and when it starts refusing midway (no message lost).

use stormpi_tests::{c_extra_program, run_job};

fn job(np: u32, options: &[&str], mode: &str) -> stormpi_tests::Output {
    run_job(np, options, &c_extra_program("sm_single_copy"), &[mode])
}

#[test]
fn large_messages_are_read_by_single_copy() {
    for np in [2, 3] {
        job(np, &["--mca", "btl", "sm,self"], "read").assert_ok("sm_single_copy");
    }
}

#[test]
fn single_copy_on_by_request() {
    job(2, &["--mca", "btl_sm_single_copy", "on"], "read").assert_ok("sm_single_copy");
}

#[test]
fn single_copy_off_sends_everything_through_the_rings() {
    for np in [2, 3] {
        job(np, &["--mca", "btl_sm_single_copy", "off"], "ring").assert_ok("sm_single_copy");
    }
}

#[test]
fn a_kernel_that_refuses_from_the_start_leaves_the_rings() {
    let out = job(2, &[], "deny-before");
    out.assert_ok("sm_single_copy");
}

#[test]
fn on_fails_the_start_when_the_kernel_refuses() {
    let out = job(2, &["--mca", "btl_sm_single_copy", "on"], "deny-before");
    out.assert_failed_with(&["btl_sm_single_copy=on", "process_vm_readv"]);
}

#[test]
fn a_kernel_that_refuses_midway_loses_no_message() {
    for np in [2, 3] {
        let out = job(np, &[], "deny-after");
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
    let out = job(2, &["--mca", "btl_sm_single_copy", "sometimes"], "read");
    out.assert_failed_with(&["btl_sm_single_copy"]);
}
