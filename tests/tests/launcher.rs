//! Failures of a job as stormrun reports them: a rank killed, MPI_Abort, a rank exiting non-zero,
//! errors under MPI_ERRORS_ARE_FATAL; and a program started without a launcher.

use std::time::{Duration, Instant};

use stormpi_tests::{
    c_extra_program, c_program, environment_of, is_alive, run, run_job, shm_files,
    stormrun_command, Proc, JOB_TIMEOUT,
};

/// Parses the `READY <rank> <pid>` lines of kill_victim.
fn ready_pids(stdout: &str) -> Vec<(u32, i32)> {
    stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("READY ")?.split_whitespace();
            Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect()
}

/// SIGKILL one rank of a running job: stormrun must end the job within 5 s, exit non-zero, name
/// the rank, and leave neither processes nor shared-memory files behind.
#[test]
fn killed_rank_ends_the_job() {
    const NP: usize = 4;
    const VICTIM: u32 = 2;
    let prog = c_program("kill_victim");
    let mut job = Proc::spawn(
        stormrun_command(NP as u32, &[], &prog, &[]),
        JOB_TIMEOUT + Duration::from_secs(20),
    );
    let all_ready = job.wait_for_stdout(Duration::from_secs(30), |s| ready_pids(s).len() == NP);
    assert!(
        all_ready,
        "not every rank printed READY\nstdout:\n{}\nstderr:\n{}",
        job.stdout(),
        job.stderr()
    );
    let ranks = ready_pids(&job.stdout());
    let victim = ranks.iter().find(|(r, _)| *r == VICTIM).unwrap().1;

    // The job's segment files, found through its id in a rank's environment: they must exist
    // now for their absence afterwards to mean anything.
    let jobid = environment_of(victim, "STORMPI_JOBID").expect("STORMPI_JOBID of a rank");
    let prefix = format!("stormpi-{jobid}-");
    let files = shm_files(&prefix);
    // One segment per rank and the launcher's mark.
    assert_eq!(files.len(), NP + 1, "files of job {jobid}: {files:?}");

    // Let the ranks get into their Sendrecv/Barrier loop.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(victim, libc::SIGKILL) }, 0);
    let killed = Instant::now();
    let exited = job.wait_timeout(Duration::from_secs(5)).is_some();
    let took = killed.elapsed();
    // The whole output (read to its end), and the job killed if it is still running.
    let out = job.wait();
    assert!(
        exited,
        "stormrun still running 5 s after rank {VICTIM} was killed\n{}",
        out.report()
    );
    eprintln!("stormrun ended {took:?} after the kill");
    let named = format!("rank {VICTIM} (pid {victim}");
    out.assert_failed_with(&[&named, "signal 9"]);
    assert_eq!(
        shm_files(&prefix),
        Default::default(),
        "files left in /dev/shm"
    );
    // stormrun has reaped its ranks before exiting.
    let alive: Vec<_> = ranks.iter().filter(|(_, p)| is_alive(*p)).collect();
    assert!(alive.is_empty(), "ranks still alive: {alive:?}");
}

/// The same program with an iteration count ends by itself: kill_victim is a working program,
/// so the failure above is the kill's doing.
#[test]
fn kill_victim_runs_when_not_killed() {
    let out = run_job(4, &[], &c_program("kill_victim"), &["200"]);
    out.assert_ok("kill_victim");
    assert_eq!(ready_pids(&out.stdout).len(), 4, "{}", out.report());
}

/// MPI_Abort(MPI_COMM_WORLD, 7) on rank 1 while the others block: the job ends promptly with
/// status 7, naming the rank and the abort.
#[test]
fn abort_ends_the_job_with_its_code() {
    for np in [2, 4] {
        let out = run_job(np, &[], &c_program("abort"), &[]);
        out.assert_failed_with(&[
            "rank 1 calling MPI_Abort(7)",
            "stormrun: rank 1 (pid ",
            "MPI_Abort",
        ]);
        assert_eq!(out.code(), Some(7), "{}", out.report());
        assert!(!out.stderr.contains("FAIL abort"), "{}", out.report());
        assert!(out.elapsed < Duration::from_secs(10), "{}", out.report());
    }
}

/// A rank that exits with status 3 (no MPI_Finalize) ends the job with that status, named.
#[test]
fn rank_exiting_nonzero_is_named() {
    let out = run_job(3, &[], &c_extra_program("exit_code"), &[]);
    out.assert_failed_with(&["stormrun: rank 1 (pid ", "exited with status 3"]);
    assert_eq!(out.code(), Some(3), "{}", out.report());
    assert!(!out.stderr.contains("FAIL exit_code"), "{}", out.report());
}

/// A rank that returns 0 from `main` without MPI_Finalize while the others wait for it ends the
/// job (it used to hang until killed): failed, that rank named with what it did.
#[test]
fn rank_leaving_without_finalize_ends_the_job() {
    for np in [2, 3] {
        let out = run_job(np, &[], &c_extra_program("early_exit"), &["0"]);
        out.assert_failed_with(&[
            "stormrun: rank 1 (pid ",
            "exited with status 0 before MPI_Finalize",
        ]);
        assert_eq!(out.code(), Some(1), "{}", out.report());
        assert!(!out.stderr.contains("FAIL early_exit"), "{}", out.report());
        eprintln!("np {np}: the job ended after {:?}", out.elapsed);
    }
}

/// Lines the ranks printed without flushing reach stormrun's output although another rank's
/// failure ended them (a rank's stdout is a pipe, which the C library would buffer in blocks).
#[test]
fn unflushed_output_survives_the_teardown() {
    let out = run_job(3, &[], &c_extra_program("early_exit"), &["3"]);
    out.assert_failed_with(&["stormrun: rank 1 (pid ", "exited with status 3"]);
    for rank in [0, 2] {
        let line = format!("unflushed line from rank {rank}");
        assert!(out.has_line(&line), "`{line}` lost\n{}", out.report());
    }
}

/// stormrun killed with SIGKILL takes its ranks with it; the shared-memory files its job left
/// are gone once the next job on the host has started.
#[test]
fn killed_launcher_leaves_nothing_behind() {
    let prog = c_program("kill_victim");
    let mut job = Proc::spawn(
        stormrun_command(2, &[], &prog, &[]),
        JOB_TIMEOUT + Duration::from_secs(20),
    );
    let all_ready = job.wait_for_stdout(Duration::from_secs(30), |s| ready_pids(s).len() == 2);
    assert!(all_ready, "not every rank printed READY\n{}", job.stderr());
    let ranks = ready_pids(&job.stdout());
    let jobid = environment_of(ranks[0].1, "STORMPI_JOBID").expect("STORMPI_JOBID of a rank");
    let prefix = format!("stormpi-{jobid}-");
    // Two segments and the launcher's mark.
    assert_eq!(shm_files(&prefix).len(), 3, "{:?}", shm_files(&prefix));
    // SAFETY: kill has no memory-safety preconditions.
    assert_eq!(unsafe { libc::kill(job.pid() as i32, libc::SIGKILL) }, 0);
    let _ = job.wait_timeout(Duration::from_secs(5));
    let gone = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(100));
        ranks.iter().all(|(_, p)| !is_alive(*p))
    });
    assert!(gone, "ranks outlived their launcher: {ranks:?}");
    // The ranks died by SIGKILL too, so nobody else removed the files (unless another test's
    // launch, running meanwhile, already did what the next one here must do).
    run_job(1, &[], &c_program("hello"), &[]).assert_ok("hello");
    assert_eq!(
        shm_files(&prefix),
        Default::default(),
        "files left in /dev/shm"
    );
}

/// MPI_Send to rank `size` under MPI_ERRORS_ARE_FATAL: the job ends, and the message names the
/// function, the error class and the bad rank.
#[test]
fn fatal_error_names_the_call_and_the_rank() {
    let out = run_job(3, &[], &c_extra_program("bad_rank"), &[]);
    out.assert_failed_with(&[
        "MPI_Send",
        "MPI_ERR_RANK",
        "rank 3",
        "stormrun: rank 0 (pid ",
    ]);
    assert!(out.has_line("sending to rank 3"), "{}", out.report());
    assert!(!out.stderr.contains("FAIL bad_rank"), "{}", out.report());
}

/// A function stormpi does not implement ends the job with a message saying so.
#[test]
fn unsupported_function_is_named() {
    let out = run_job(2, &[], &c_extra_program("unsupported"), &[]);
    out.assert_failed_with(&["MPI_Ineighbor_allgather", "not supported"]);
    assert!(!out.stderr.contains("FAIL unsupported"), "{}", out.report());
}

/// Started without a launcher, a program is a job of one.
#[test]
fn singleton_is_a_job_of_one() {
    let hello = c_program("hello");
    let out = run(std::process::Command::new(&hello), JOB_TIMEOUT);
    out.assert_ok("hello");
    assert!(
        out.stdout.contains("hello from rank 0 of 1 "),
        "{}",
        out.report()
    );
    // A singleton also runs the sm-free paths of a real program.
    let ring = c_program("ring");
    run(std::process::Command::new(&ring), JOB_TIMEOUT).assert_ok("ring");
}
