//! Jobs started by a real Slurm: two nodes (two `slurmd -N`) on this host, `srun --mpi=pmi2`
//! (the library's PMI-2 client), `srun --mpi=pmix` (the system's libpmix, loaded at run time)
//! and `srun --mpi=none` (no PMI at all), and `MPI_Comm_spawn` under `--mpi=pmi2` (the
//! children a step of their own). Skipped, loudly, where
//! Slurm cannot run (not installed, not root); `STORMPI_REQUIRE_SLURM=1` makes that a failure.

use std::time::{Duration, Instant};

use stormpi_tests::slurm::Slurm;
use stormpi_tests::Output;

/// Longest any one srun may take (a job here takes about a second).
const JOB_LIMIT: Duration = Duration::from_secs(40);

fn srun(slurm: &Slurm, args: &[&str], program: &std::path::Path, prog_args: &[&str]) -> Output {
    srun_with(slurm, args, program, prog_args, &[])
}

/// [`srun`] with `env` set for the ranks.
fn srun_with(
    slurm: &Slurm,
    args: &[&str],
    program: &std::path::Path,
    prog_args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let mut cmd = slurm.srun();
    cmd.args(["--time=1", "--kill-on-bad-exit=1"])
        .args(args)
        .arg(program)
        .args(prog_args);
    // What the test's own environment may carry from another launcher must not reach the ranks.
    for v in [
        "PMI_FD",
        "PMI_PORT",
        "PMI_RANK",
        "PMI_SIZE",
        "PMI_JOBID",
        "STORMPI_PMI",
        "STORMPI_PMI_KEY",
        "STORMPI_JOBID",
        "STORMPI_NODE",
    ] {
        cmd.env_remove(v);
    }
    cmd.envs(env.iter().copied());
    stormpi_tests::run(cmd, JOB_LIMIT)
}

#[test]
fn srun_over_two_nodes() {
    let started = Instant::now();
    let program = stormpi_tests::c_program_from(
        &stormpi_tests::workspace_dir().join("tests/c-extra/slurm_nodes.c"),
    );
    let hello = stormpi_tests::c_program("hello");
    let slurm = match Slurm::start_nodes(&["n1", "n2"]) {
        Ok(s) => s,
        Err(why) => {
            assert!(
                std::env::var_os("STORMPI_REQUIRE_SLURM").is_none(),
                "Slurm cannot start: {why}"
            );
            eprintln!("*** SKIPPED srun_over_two_nodes: Slurm cannot start here: {why} ***");
            return;
        }
    };
    let logs = || slurm.slurmd_logs();

    // 2 nodes x 2 ranks over PMI-2: node-local peers over sm, the other node over tcp.
    let out = srun(
        &slurm,
        &["-N", "2", "-n", "4", "--mpi=pmi2"],
        &program,
        &["4", "2"],
    );
    assert!(
        out.success() && out.has_line("OK slurm_nodes"),
        "srun --mpi=pmi2:\n{}\n{}",
        out.report(),
        logs()
    );
    for r in 0..4 {
        let node = r / 2;
        let line = format!("rank {r} of 4 on node {node} (local {} of 2)", r % 2);
        assert!(out.has_line(&line), "no `{line}`:\n{}", out.report());
    }

    // The heat2d demo over both nodes computes what it computes alone.
    let heat = stormpi_tests::c_program_from(
        &stormpi_tests::workspace_dir().join("examples/heat2d/heat2d.c"),
    );
    let args = ["-n", "64", "-i", "20000", "-t", "1e-4"];
    let answer = |out: &Output| -> Vec<String> {
        out.stdout
            .lines()
            .filter(|l| {
                l.starts_with("iterations:")
                    || l.starts_with("residual:")
                    || l.starts_with("checksum (fixed-point):")
            })
            .map(str::to_string)
            .collect()
    };
    let mut alone = std::process::Command::new(&heat);
    alone.args(args);
    let alone = stormpi_tests::run(alone, JOB_LIMIT);
    assert!(alone.success(), "heat2d alone:\n{}", alone.report());
    let out = srun(&slurm, &["-N", "2", "-n", "4", "--mpi=pmi2"], &heat, &args);
    assert!(
        out.success() && answer(&out).len() == 3 && answer(&out) == answer(&alone),
        "heat2d under srun --mpi=pmi2 (alone: {:?}):\n{}\n{}",
        answer(&alone),
        out.report(),
        logs()
    );

    // Slurm's PMI-2 plugin serves PMI-1 clients too, and its process mapping as a PMI-1 key:
    // forced to PMI-1, the library still tells the two nodes on one host apart.
    let out = srun_with(
        &slurm,
        &["-N", "2", "-n", "4", "--mpi=pmi2"],
        &program,
        &["4", "2"],
        &[("STORMPI_PMI", "pmi1")],
    );
    assert!(
        out.success() && out.has_line("OK slurm_nodes"),
        "srun --mpi=pmi2 with STORMPI_PMI=pmi1:\n{}\n{}",
        out.report(),
        logs()
    );

    // MPI_Abort from rank 1 ends the step at once. Slurm's PMI-2 server ignores the code and
    // kills the step (srun exits 137); the library tells the code on stderr.
    let out = srun(
        &slurm,
        &["-N", "2", "-n", "4", "--mpi=pmi2"],
        &program,
        &["4", "2", "abort", "5"],
    );
    assert!(
        !out.success()
            && out.elapsed < Duration::from_secs(10)
            && out.stderr.contains("rank 1 calling MPI_Abort(5)")
            && out
                .stderr
                .contains("stormpi: rank 1 aborts the job with code 5")
            && !out.stderr.contains("FAIL"),
        "srun --mpi=pmi2 with MPI_Abort(5):\n{}\n{}",
        out.report(),
        logs()
    );

    // PMIx (`--mpi=pmix`): Slurm's PMIx server, reached through the system's libpmix loaded
    // at run time.
    let out = srun(
        &slurm,
        &["-N", "2", "-n", "4", "--mpi=pmix"],
        &program,
        &["4", "2"],
    );
    assert!(
        out.success() && out.has_line("OK slurm_nodes"),
        "srun --mpi=pmix:\n{}\n{}",
        out.report(),
        logs()
    );
    for r in 0..4 {
        let line = format!("rank {r} of 4 on node {} (local {} of 2)", r / 2, r % 2);
        assert!(out.has_line(&line), "no `{line}`:\n{}", out.report());
    }

    let out = srun(
        &slurm,
        &["-N", "2", "-n", "4", "--mpi=pmix"],
        &program,
        &["4", "2", "abort", "6"],
    );
    assert!(
        !out.success()
            && out.elapsed < Duration::from_secs(15)
            && out
                .stderr
                .contains("stormpi: rank 1 aborts the job with code 6")
            && !out.stderr.contains("FAIL"),
        "srun --mpi=pmix with MPI_Abort(6):\n{}\n{}",
        out.report(),
        logs()
    );

    // Allowed only sm and self, ranks cannot reach the other node: an error that names the
    // peer, not a hang.
    let out = srun_with(
        &slurm,
        &["-N", "2", "-n", "4", "--mpi=pmi2"],
        &program,
        &["4", "2"],
        &[("STORMPI_MCA_btl", "sm,self")],
    );
    assert!(
        !out.success()
            && out.elapsed < Duration::from_secs(20)
            && out.stderr.contains("no transport can reach process"),
        "srun --mpi=pmi2 with btl sm,self over two nodes:\n{}\n{}",
        out.report(),
        logs()
    );

    // Without PMI several tasks cannot form a job: a clear error rather than N jobs of one.
    let out = srun(&slurm, &["-n", "2", "--mpi=none"], &hello, &[]);
    assert!(
        !out.success() && out.stderr.contains("srun --mpi=pmi2"),
        "srun --mpi=none:\n{}",
        out.report()
    );
    // ... unless asked for: STORMPI_PMI=singleton runs each task as a job of its own.
    let mut cmd = slurm.srun();
    cmd.args(["--time=1", "-n", "2", "--mpi=none"])
        .arg(&hello)
        .env("STORMPI_PMI", "singleton");
    let out = stormpi_tests::run(cmd, JOB_LIMIT);
    assert!(
        out.success() && out.stdout.matches("OK hello").count() == 2,
        "srun --mpi=none with STORMPI_PMI=singleton:\n{}",
        out.report()
    );

    // MPI_Comm_spawn under --mpi=pmi2: Slurm's PMI-2 plugin starts the children as a new step
    // of the job (an srun of its own), whose stepd gives them the parents' port as a preput
    // value; two parents spawn two children twice (data both ways, disconnect). The job is
    // allocated four tasks with salloc and the parents' step takes two with --overlap (a step
    // takes every CPU of its nodes by default, and the children's step would wait for them).
    let spawn = stormpi_tests::c_extra_program("spawn");
    let mut cmd = slurm.salloc();
    cmd.args(["--time=1", "-N", "2", "-n", "4"])
        .args(["srun", "-N", "2", "-n", "2", "--overlap", "--mpi=pmi2"])
        .arg(&spawn)
        .args(["loop", "2"]);
    for v in [
        "PMI_FD",
        "PMI_PORT",
        "PMI_RANK",
        "PMI_SIZE",
        "PMI_JOBID",
        "STORMPI_PMI",
    ] {
        cmd.env_remove(v);
    }
    let out = stormpi_tests::run(cmd, JOB_LIMIT);
    assert!(
        out.success() && out.has_line("OK spawn-loop"),
        "MPI_Comm_spawn under srun --mpi=pmi2:\n{}\n{}",
        out.report(),
        logs()
    );

    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(120),
        "the Slurm jobs took {took:?}"
    );
}
