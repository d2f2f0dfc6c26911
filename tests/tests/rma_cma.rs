//! Issue 19: windows over the user's memory (`MPI_Win_create`) on one node, put and get by
//! single copy (`process_vm_writev`/`readv`, `osc_sm_single_copy`, off by default). The self-checking C
//! programs `tests/c/rma_*.c` that create such windows run at 2 and 3 ranks with the parameter
//! `on` and `off`, and under a seccomp filter that refuses the calls (`auto`: active messages;
//! `on`: the start fails naming the parameter). The finalize line `sm one-sided: W single-copy
//! writes, R single-copy reads` (at `mpi_log_level` 2) shows what went by single copy; windows
//! the engine allocates keep their shared segment and put nothing through it.

use stormpi_tests::{c_extra_program, c_program, run_job, Output};

/// Runs `name` at `np` ranks with `osc_sm_single_copy` as given, under the filter that refuses
/// cross-memory attach when `deny`.
fn job(name: &str, np: u32, mode: &str, deny: bool) -> Output {
    let opts = [
        "--mca",
        "osc_sm_single_copy",
        mode,
        "--mca",
        "mpi_log_level",
        "2",
    ];
    let prog = c_program(name);
    if deny {
        let wrapper = c_extra_program("deny_cma_exec");
        let prog = prog.to_string_lossy();
        run_job(np, &opts, &wrapper, &[&prog])
    } else {
        run_job(np, &opts, &prog, &[])
    }
}

/// Every rank's `sm one-sided: W single-copy writes, R single-copy reads` line, as
/// (writes, reads).
fn single_copies(out: &Output) -> Vec<(u64, u64)> {
    let num = |line: &str, before: &str| -> u64 {
        let head = line[..line.find(before).expect("a counter")].trim_end();
        let start = head
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        head[start..].parse().expect("a number")
    };
    out.stderr
        .lines()
        .filter(|l| l.contains("sm one-sided: ") && l.contains(" single-copy writes"))
        .map(|l| (num(l, " single-copy writes"), num(l, " single-copy reads")))
        .collect()
}

fn check(name: &str, np: u32, mode: &str) {
    let out = job(name, np, mode, false);
    out.assert_ok(name);
    let c = single_copies(&out);
    if mode == "off" {
        assert!(c.is_empty(), "off creates nothing\n{}", out.report());
    } else {
        assert_eq!(c.len(), np as usize, "a line per rank\n{}", out.report());
        let total: u64 = c.iter().map(|(w, r)| w + r).sum();
        assert!(
            total > 0,
            "puts and gets went by single copy\n{}",
            out.report()
        );
    }
}

macro_rules! cma_tests {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn cma_on_np2() {
                super::check(stringify!($name), 2, "on");
            }
            #[test]
            fn cma_on_np3() {
                super::check(stringify!($name), 3, "on");
            }
            #[test]
            fn cma_off_np3() {
                super::check(stringify!($name), 3, "off");
            }
            #[test]
            fn cma_denied_np3() {
                let out = super::job(stringify!($name), 3, "auto", true);
                out.assert_ok(stringify!($name));
                assert!(
                    super::single_copies(&out).is_empty(),
                    "a refused probe leaves windows to messages\n{}",
                    out.report()
                );
            }
        }
    )*};
}

cma_tests! {
    rma_fence,
    rma_pscw,
    rma_large_count,
}

/// `MPI_Win_allocate` windows on one node stay in the shared segment: nothing goes by single
/// copy even with it on.
#[test]
fn allocated_windows_keep_the_segment() {
    let out = job("rma_lock", 3, "on", false);
    out.assert_ok("rma_lock");
    let c = single_copies(&out);
    assert_eq!(c.len(), 3, "a line per rank\n{}", out.report());
    assert!(
        c.iter().all(|&(w, r)| w == 0 && r == 0),
        "no single copy for allocated windows\n{}",
        out.report()
    );
}

/// `auto` uses single copy where the kernel allows it.
#[test]
fn auto_uses_single_copy_where_allowed() {
    check("rma_fence", 2, "auto");
}

/// `on` where the kernel refuses: the start fails, naming the parameter.
#[test]
fn on_fails_the_start_when_the_kernel_refuses() {
    let out = job("rma_fence", 2, "on", true);
    out.assert_failed_with(&["osc_sm_single_copy=on", "process_vm_readv"]);
}

/// By default (off) nothing goes by single copy.
#[test]
fn off_by_default() {
    let prog = c_program("rma_fence");
    let out = run_job(2, &["--mca", "mpi_log_level", "2"], &prog, &[]);
    out.assert_ok("rma_fence");
    assert!(single_copies(&out).is_empty(), "{}", out.report());
}

/// A value that is not auto, on or off is an error naming the parameter.
#[test]
fn a_bad_value_is_an_error_naming_the_parameter() {
    let out = job("rma_fence", 2, "sometimes", false);
    out.assert_failed_with(&["osc_sm_single_copy"]);
}

/// Each rank's `verbs one-sided: W RDMA writes, R RDMA reads` line, as (writes, reads).
fn verbs_ops(out: &Output) -> Vec<(u64, u64)> {
    out.stderr
        .lines()
        .filter(|l| l.contains("verbs one-sided: "))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let at = |w: &str| -> u64 {
                let i = words.iter().position(|x| *x == w).expect("a counter");
                words[i - 2].parse().expect("a number")
            };
            (at("writes,"), at("reads"))
        })
        .collect()
}

/// With both sm (single copy on) and verbs offering network operations, a window across two
/// nodes goes by verbs, which reaches every member, not by sm, which reaches only the node.
#[test]
fn a_window_across_nodes_takes_the_btl_that_reaches_every_member() {
    let lib = stormpi_tests::artifact("libverbs_shmem.so");
    let lib = lib.to_string_lossy();
    let opts = [
        "--mca",
        "btl",
        "self,sm,verbs",
        "--mca",
        "btl_verbs_library",
        &lib,
        "--mca",
        "osc_verbs",
        "on",
        "--mca",
        "osc_sm_single_copy",
        "on",
        "--mca",
        "mpi_log_level",
        "2",
    ];
    let prog = c_program("rma_fence");
    let prog = prog.to_string_lossy();
    // Two ranks on each of two nodes (the launcher sets STORMPI_NODE; the shell overrides it).
    let args = [
        "-c",
        "STORMPI_NODE=cma-node-$((PMI_RANK / 2)) exec \"$0\" \"$@\"",
        &prog,
    ];
    let out = run_job(4, &opts, std::path::Path::new("/bin/sh"), &args);
    out.assert_ok("rma_fence");
    let sm = single_copies(&out);
    assert_eq!(sm.len(), 4, "a line per rank\n{}", out.report());
    assert!(
        sm.iter().all(|&(w, r)| w == 0 && r == 0),
        "{}",
        out.report()
    );
    let v = verbs_ops(&out);
    assert_eq!(v.len(), 4, "a line per rank\n{}", out.report());
    assert!(v.iter().all(|&(w, r)| w > 0 && r > 0), "{}", out.report());
}
