//! Jobs started by Open MPI's `mpirun`, whose PMIx server the library reaches through the
//! system's libpmix (loaded at run time): the job's size, ranks, node and modex come from PMIx,
//! and MPI_Abort ends the job with its code. Skipped, loudly, without Open MPI's launcher.

use std::process::Command;
use std::time::Duration;

use stormpi_tests::{c_program, in_path, Output, JOB_TIMEOUT};

const MPIRUN: &str = "mpirun.openmpi";

fn mpirun(np: u32, program: &std::path::Path, args: &[&str]) -> Option<Output> {
    if !in_path(MPIRUN) {
        assert!(
            std::env::var_os("STORMPI_REQUIRE_CROSS").is_none(),
            "{MPIRUN} is not installed"
        );
        eprintln!("\n*** SKIPPED: {MPIRUN} is not installed; PMIx was NOT tested ***\n");
        return None;
    }
    let mut cmd = Command::new(MPIRUN);
    cmd.args([
        "-n",
        &np.to_string(),
        "--oversubscribe",
        "--bind-to",
        "none",
    ])
    .arg(program)
    .args(args)
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    for v in [
        "PMI_FD",
        "PMI_PORT",
        "STORMPI_PMI",
        "STORMPI_PMI_KEY",
        "STORMPI_NODE",
    ] {
        cmd.env_remove(v);
    }
    Some(stormpi_tests::run(cmd, JOB_TIMEOUT))
}

#[test]
fn programs_run_under_open_mpis_launcher() {
    for (name, np) in [("collectives", 3), ("ring", 4), ("split_type", 2)] {
        let Some(out) = mpirun(np, &c_program(name), &[]) else {
            return;
        };
        assert!(
            out.success() && out.has_line(&format!("OK {name}")),
            "{name} at {np} under {MPIRUN}:\n{}",
            out.report()
        );
    }
}

#[test]
fn abort_ends_the_job_with_its_code() {
    let Some(out) = mpirun(2, &c_program("abort"), &[]) else {
        return;
    };
    assert_eq!(out.code(), Some(7), "{}", out.report());
    assert!(
        out.stderr
            .contains("stormpi: rank 1 aborts the job with code 7")
            && out.elapsed < Duration::from_secs(15),
        "{}",
        out.report()
    );
}
