//! Issue 23: one-sided windows over the verbs BTL's put, get and atomics (`osc_verbs`), on the
//! software verbs device with `btl=self,verbs`. The self-checking C programs `tests/c/rma_*.c`
//! run at 2 and 3 ranks with `osc_verbs=on` (RDMA writes and reads, verbs fetch-and-add and
//! compare-and-swap for 64-bit integers, the rest active messages) and `off` (all active
//! messages). Each rank is told it is on a node of its own (`STORMPI_NODE`), so
//! `MPI_Win_allocate` windows are not the node's shared-memory windows but reached through the
//! network; the finalize line `verbs one-sided: ...` shows what went over verbs.

use std::path::Path;

use stormpi_tests::{artifact, c_program, run_job, Output};

/// Runs `name` at `np` ranks over verbs with `osc_verbs` as given, every rank on a node of its
/// own.
fn job(name: &str, np: u32, osc: &str) -> Output {
    let lib = artifact("libverbs_shmem.so");
    let lib = lib.to_string_lossy();
    let opts = [
        "--mca",
        "btl",
        "self,verbs",
        "--mca",
        "btl_verbs_library",
        &lib,
        "--mca",
        "osc_verbs",
        osc,
        "--mca",
        "mpi_log_level",
        "2",
    ];
    let prog = c_program(name);
    let prog = prog.to_string_lossy();
    // The launcher sets STORMPI_NODE; the shell gives each rank its own before MPI starts.
    let args = [
        "-c",
        "STORMPI_NODE=verbs-node-$PMI_RANK exec \"$0\" \"$@\"",
        &prog,
    ];
    run_job(np, &opts, Path::new("/bin/sh"), &args)
}

/// Every rank's `verbs one-sided: W RDMA writes, R RDMA reads (B bytes), A atomics` line, as
/// (writes, reads, atomics).
fn one_sided(out: &Output) -> Vec<(u64, u64, u64)> {
    let num = |line: &str, before: &str| -> u64 {
        let head = line[..line.find(before).expect("a counter")].trim_end();
        let start = head
            .rfind(|c: char| !c.is_ascii_digit())
            .map_or(0, |i| i + 1);
        head[start..].parse().expect("a number")
    };
    out.stderr
        .lines()
        .filter(|l| l.contains("verbs one-sided: "))
        .map(|l| {
            (
                num(l, " RDMA writes"),
                num(l, " RDMA reads"),
                num(l, " atomics"),
            )
        })
        .collect()
}

fn check(name: &str, np: u32, osc: &str) {
    let out = job(name, np, osc);
    out.assert_ok(name);
    let c = one_sided(&out);
    if osc == "off" {
        assert!(
            c.is_empty(),
            "osc_verbs=off creates nothing\n{}",
            out.report()
        );
    } else {
        assert_eq!(c.len(), np as usize, "a line per rank\n{}", out.report());
    }
}

macro_rules! verbs_rma_tests {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn verbs_np2() {
                super::check(stringify!($name), 2, "on");
            }
            #[test]
            fn verbs_np3() {
                super::check(stringify!($name), 3, "on");
            }
            #[test]
            fn am_np2() {
                super::check(stringify!($name), 2, "off");
            }
            #[test]
            fn am_np3() {
                super::check(stringify!($name), 3, "off");
            }
        }
    )*};
}

verbs_rma_tests! {
    rma_fence,
    rma_lock,
    rma_pscw,
    rma_accumulate,
    rma_dynamic,
    rma_large_count,
    rma_atomics,
    rma_lean,
}

/// The programs' puts and gets went as RDMA writes and reads, and `rma_atomics`' 64-bit sums and
/// compare-and-swaps as verbs atomics (so the checks above ran the verbs path).
#[test]
fn puts_gets_and_atomics_go_over_verbs() {
    let out = job("rma_fence", 2, "on");
    out.assert_ok("rma_fence");
    let c = one_sided(&out);
    assert!(
        c.iter().all(|&(w, r, _)| w > 0 && r > 0),
        "RDMA writes and reads on every rank: {c:?}\n{}",
        out.report()
    );
    let out = job("rma_atomics", 3, "on");
    out.assert_ok("rma_atomics");
    let c = one_sided(&out);
    assert!(
        c.iter().any(|&(_, _, a)| a > 0),
        "verbs atomics: {c:?}\n{}",
        out.report()
    );
}

/// `osc_verbs` takes auto, on or off only.
#[test]
fn a_bad_osc_verbs_value_is_refused() {
    let out = job("rma_fence", 2, "sometimes");
    assert!(
        !out.success() && out.stderr.contains("osc_verbs"),
        "{}",
        out.report()
    );
}
