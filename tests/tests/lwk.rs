//! The lightweight-kernel node build (`cargo test lwk` selects these): the C test programs and
//! the heat2d demo linked statically against `libstormpi_lwk.a`, started with environment
//! variables only, each rank in an empty network namespace under a seccomp filter that forbids
//! sockets and new processes (see `stormpi_tests::lwk`), over both transports: the Portals MTL
//! (`pml=cm`, the node default) and the ordinary PML over the Portals BTL (`pml=ob1`).

use std::path::PathBuf;

use stormpi_tests::lwk::{node_program, LwkJob, Pml, Sandbox, Target};
use stormpi_tests::{c_extra_source, c_source, workspace_dir};

fn program(name: &str) -> PathBuf {
    node_program(&Target::host(), &c_source(name), &[])
}

fn args(name: &str) -> &'static [&'static str] {
    match name {
        "allpairs" => &["1048576"],
        _ => &[],
    }
}

fn check(name: &str, np: u32, pml: Pml) {
    LwkJob::new(np, pml)
        .run(&program(name), args(name))
        .assert_ok(name);
}

macro_rules! lwk_c_tests {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            use super::*;
            #[test]
            fn lwk_cm_np3() {
                check(stringify!($name), 3, Pml::Cm);
            }
            #[test]
            fn lwk_ob1_np3() {
                check(stringify!($name), 3, Pml::Ob1);
            }
        }
    )*};
}

lwk_c_tests! {
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
}

#[test]
fn lwk_cm_np8_allpairs_and_wildcard() {
    check("wildcard", 8, Pml::Cm);
    LwkJob::new(8, Pml::Cm)
        .run(&program("allpairs"), &["65536"])
        .assert_ok("allpairs");
}

#[test]
fn lwk_ob1_np8_wildcard() {
    check("wildcard", 8, Pml::Ob1);
}

#[test]
fn lwk_sandbox_forbids_sockets_and_processes() {
    let prog = node_program(&Target::host(), &c_extra_source("lwk_forbidden"), &[]);
    let out = LwkJob::new(1, Pml::Cm).run(&prog, &[]);
    out.assert_ok("lwk_forbidden");
    // And without the sandbox the same program fails: the checks are real.
    let mut free = LwkJob::new(1, Pml::Cm);
    free.sandbox = Sandbox {
        netns: false,
        seccomp: false,
    };
    assert!(!free.run(&prog, &[]).success());
}

#[test]
fn lwk_cm_flow_control_recovers() {
    // Overflow blocks for a handful of eager messages, at most two: unexpected traffic disables
    // the portal again and again (the unexpected messages move out of the blocks, refused ones
    // are sent again); every message must still arrive, in order, probes must still see them.
    for prog in ["wildcard", "many_requests", "probe", "allpairs"] {
        LwkJob::new(4, Pml::Cm)
            .param("mtl_portals_eager_limit", "512")
            .param("mtl_portals_block_bytes", "2048")
            .param("mtl_portals_blocks", "1")
            .param("mtl_portals_max_blocks", "2")
            .run(
                &program(prog),
                &["65536"][..usize::from(prog == "allpairs")],
            )
            .assert_ok(prog);
    }
}

#[test]
fn lwk_ob1_rejected_fragments_are_retransmitted() {
    // One receive block with room for a few fragments: the reject entry takes the rest, and the
    // senders retransmit.
    for prog in ["wildcard", "allpairs"] {
        LwkJob::new(4, Pml::Ob1)
            .param("btl_portals_max_send_size", "1024")
            .param("btl_portals_eager_limit", "512")
            .param("btl_portals_block_bytes", "4096")
            .param("btl_portals_blocks", "1")
            .run(&program(prog), &["65536"])
            .assert_ok(prog);
    }
}

#[test]
fn lwk_failed_rank_tears_the_job_down() {
    let prog = node_program(&Target::host(), &c_extra_source("bad_rank"), &[]);
    let started = std::time::Instant::now();
    let mut job = LwkJob::new(3, Pml::Cm);
    job.timeout = std::time::Duration::from_secs(30);
    let out = job.run(&prog, &[]);
    assert!(!out.success(), "{}", out.report());
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

fn heat2d(np: u32, pml: Pml) -> String {
    let src = workspace_dir().join("examples/heat2d/heat2d.c");
    let prog = node_program(&Target::host(), &src, &[]);
    let out = LwkJob::new(np, pml).run(&prog, &["-n", "256", "-i", "200"]);
    assert!(out.success(), "heat2d over {pml:?}:\n{}", out.report());
    out.ranks[0]
        .stdout
        .lines()
        .find(|l| l.starts_with("checksum (fixed-point)"))
        .unwrap_or_else(|| panic!("no checksum line:\n{}", out.report()))
        .to_string()
}

#[test]
fn lwk_heat2d_demo_both_transports() {
    let cm = heat2d(4, Pml::Cm);
    let ob1 = heat2d(4, Pml::Ob1);
    let one = heat2d(1, Pml::Cm);
    assert_eq!(cm, ob1);
    assert_eq!(cm, one);
}

/// The C programs cross-built statically for a musl target, over both transports.
fn cross(triple: &'static str, np: u32, programs: &[&str]) {
    let Some(t) = Target::musl(triple) else {
        return;
    };
    for name in programs {
        let prog = node_program(&t, &c_source(name), &[]);
        for pml in [Pml::Cm, Pml::Ob1] {
            LwkJob::new(np, pml)
                .on(&t)
                .run(&prog, args(name))
                .assert_ok(name);
        }
    }
}

#[test]
fn lwk_musl_x86_64_programs() {
    cross(
        "x86_64-unknown-linux-musl",
        3,
        &[
            "hello",
            "ring",
            "wildcard",
            "ssend",
            "probe",
            "truncate",
            "collectives",
        ],
    );
}

#[test]
fn lwk_aarch64_qemu_programs() {
    cross(
        "aarch64-unknown-linux-musl",
        2,
        &["hello", "ring", "wildcard", "ssend", "probe", "truncate"],
    );
}

#[test]
fn lwk_aarch64_qemu_heat2d() {
    let Some(t) = Target::musl("aarch64-unknown-linux-musl") else {
        return;
    };
    let src = workspace_dir().join("examples/heat2d/heat2d.c");
    let prog = node_program(&t, &src, &[]);
    let native = heat2d(2, Pml::Cm);
    let out = LwkJob::new(2, Pml::Cm)
        .on(&t)
        .run(&prog, &["-n", "256", "-i", "200"]);
    assert!(out.success(), "{}", out.report());
    assert!(
        out.ranks[0].stdout.lines().any(|l| l == native),
        "aarch64 heat2d differs from x86_64 ({native}):\n{}",
        out.report()
    );
}

/// A real vendor launcher: a one-host Slurm started by the test, `srun -n 4 --mpi=none`, so only
/// Slurm's variables reach the ranks (each confined by `lwk-confine`).
#[test]
fn lwk_slurm_srun() {
    let slurm = match stormpi_tests::slurm::Slurm::start() {
        Ok(s) => s,
        Err(why) => {
            assert!(
                std::env::var_os("STORMPI_REQUIRE_SLURM").is_none(),
                "Slurm cannot start: {why}"
            );
            eprintln!("SKIPPED lwk_slurm_srun: Slurm cannot start here: {why}");
            return;
        }
    };
    let confine = stormpi_tests::artifact("lwk-confine");
    for (name, pml) in [
        ("ring", Pml::Cm),
        ("wildcard", Pml::Ob1),
        ("hello", Pml::Cm),
    ] {
        let mut cmd = slurm.srun();
        cmd.args([
            "-n",
            "4",
            "-O",
            "--mpi=none",
            "--time=2",
            "--kill-on-bad-exit=1",
        ])
        .arg(&confine)
        .arg(program(name))
        .env("STORMPI_MCA_pml", pml.name());
        for v in [
            "STORMPI_RANK",
            "STORMPI_SIZE",
            "STORMPI_JOBID",
            "PMI_RANK",
            "PMI_SIZE",
        ] {
            cmd.env_remove(v);
        }
        let out = stormpi_tests::run(cmd, std::time::Duration::from_secs(120));
        assert!(
            out.success() && out.has_line(&format!("OK {name}")),
            "srun {name} over {pml:?}:\n{}\nslurmd log:\n{}",
            out.report(),
            std::fs::read_to_string(slurm.dir().join("slurmd.log")).unwrap_or_default()
        );
    }
}
