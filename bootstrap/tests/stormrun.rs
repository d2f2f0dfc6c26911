//! End-to-end tests: the built `stormrun` runs jobs of `pmi-test-rank`
//! (and of MPICH's Hydra, for the client). Every job runs under both
//! stormrun's own `--timeout` (where the test is not about timing) and a
//! test-side limit that kills it, so no test can hang.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const STORMRUN: &str = env!("CARGO_BIN_EXE_stormrun");
const RANK: &str = env!("CARGO_BIN_EXE_pmi-test-rank");

/// Test-side limit for any job.
const LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Outcome {
    /// Lines stormrun itself printed to stderr.
    fn stormrun_lines(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|l| l.starts_with("stormrun:"))
            .collect()
    }
}

fn stormrun(args: &[&str]) -> Command {
    let mut cmd = Command::new(STORMRUN);
    cmd.args(args);
    cmd
}

fn reader(mut pipe: impl Read + Send + 'static) -> thread::JoinHandle<String> {
    thread::spawn(move || {
        let mut s = String::new();
        let _ = pipe.read_to_string(&mut s);
        s
    })
}

/// Runs `cmd` to completion, killing it (and failing the test) after `limit`.
fn run_with_limit(cmd: &mut Command, limit: Duration) -> Outcome {
    let start = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = reader(child.stdout.take().unwrap());
    let err = reader(child.stderr.take().unwrap());
    let status = wait_with_limit(&mut child, limit);
    let outcome = Outcome {
        code: status.and_then(|s| s.code()),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        elapsed: start.elapsed(),
    };
    assert!(
        status.is_some(),
        "job still running after {limit:?}: {outcome:#?}"
    );
    outcome
}

fn wait_with_limit(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() >= deadline {
            // stormrun's ranks die with it (parent-death signal).
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

fn run(args: &[&str]) -> Outcome {
    run_with_limit(&mut stormrun(args), LIMIT)
}

fn shm_files_of(jobid: &str) -> Vec<String> {
    let prefix = format!("stormpi-{jobid}-");
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// The job id a `fail`-mode job printed, after checking that every rank
/// created its shared-memory file.
fn jobid_of(o: &Outcome, ranks: u32) -> String {
    let jobid = o
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("jobid="))
        .unwrap_or_else(|| panic!("no jobid in output: {o:#?}"))
        .to_string();
    for r in 0..ranks {
        let line = format!("rank {r} created /dev/shm/stormpi-{jobid}-test-{r}");
        assert!(o.stdout.contains(&line), "missing `{line}`: {o:#?}");
    }
    jobid
}

fn cores() -> usize {
    thread::available_parallelism().unwrap().get()
}

#[test]
fn four_ranks_exchange_through_pmi() {
    let o = run(&[
        "--timeout",
        "20",
        "--oversubscribe",
        "-n",
        "4",
        RANK,
        "exchange",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    for r in 0..4 {
        let line = format!("rank {r}/4 appnum 0: exchange ok (3000-byte values)");
        assert!(
            o.stdout.lines().any(|l| l == line),
            "missing `{line}`: {o:#?}"
        );
    }
    assert!(o.stormrun_lines().is_empty(), "{o:#?}");
}

#[test]
fn client_works_under_hydra() {
    if Command::new("mpiexec.mpich")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("\n*** SKIPPED client_works_under_hydra: mpiexec.mpich is not installed ***\n");
        return;
    }
    let mut cmd = Command::new("mpiexec.mpich");
    cmd.args(["-n", "3", RANK, "exchange"]);
    let o = run_with_limit(&mut cmd, LIMIT);
    assert_eq!(o.code, Some(0), "{o:#?}");
    for r in 0..3 {
        let line = format!("rank {r}/3 appnum 0: exchange ok (3000-byte values)");
        assert!(
            o.stdout.lines().any(|l| l == line),
            "missing `{line}`: {o:#?}"
        );
    }

    // Hydra ends the job with the code our client's abort sends.
    let mut cmd = Command::new("mpiexec.mpich");
    cmd.args(["-n", "2", RANK, "fail", "1", "abort:5", "fence"]);
    let o = run_with_limit(&mut cmd, LIMIT);
    assert_eq!(o.code, Some(5), "{o:#?}");
    assert!(!o.stdout.contains("was not killed"), "{o:#?}");
}

#[test]
fn mpmd_contexts_get_their_appnum() {
    let o = run(&[
        "--timeout",
        "20",
        "--oversubscribe",
        "-n",
        "2",
        RANK,
        "exchange",
        "100",
        ":",
        "-n",
        "1",
        RANK,
        "exchange",
        "100",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    for (r, app) in [(0, 0), (1, 0), (2, 1)] {
        let line = format!("rank {r}/3 appnum {app}: exchange ok (100-byte values)");
        assert!(
            o.stdout.lines().any(|l| l == line),
            "missing `{line}`: {o:#?}"
        );
    }
}

#[test]
fn output_lines_stay_whole() {
    const COUNT: usize = 2000;
    const LEN: usize = 300;
    let o = run(&[
        "--timeout",
        "20",
        "--oversubscribe",
        "-n",
        "4",
        RANK,
        "lines",
        "2000",
        "300",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    let mut seen = HashSet::new();
    for line in o.stdout.lines() {
        // r<rank>:<i>:<fill>. with the fill letter determined by i.
        let mut parts = line.splitn(3, ':');
        let (rank, i, body) = (parts.next(), parts.next(), parts.next());
        let (Some(rank), Some(i), Some(body)) = (rank, i, body) else {
            panic!("torn line `{line}`");
        };
        let i: usize = i.parse().unwrap_or_else(|_| panic!("torn line `{line}`"));
        let letter = char::from(b'a' + (i % 26) as u8);
        assert_eq!(line.len(), LEN, "torn line `{line}`");
        assert!(body.ends_with('.'), "torn line `{line}`");
        assert!(
            body[..body.len() - 1].chars().all(|c| c == letter),
            "torn line `{line}`"
        );
        assert!(
            seen.insert((rank.to_string(), i)),
            "duplicate line `{line}`"
        );
    }
    assert_eq!(seen.len(), 4 * COUNT);
    // stderr went to stderr.
    for r in 0..4 {
        assert!(
            o.stderr.lines().any(|l| l == format!("r{r}: done")),
            "{o:#?}"
        );
    }
}

#[test]
fn tagged_output_and_partial_last_line() {
    let o = run(&[
        "--timeout",
        "20",
        "--tag-output",
        "-n",
        "2",
        "sh",
        "-c",
        "echo out $PMI_RANK; echo err $PMI_RANK >&2; printf 'no newline'",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    for r in 0..2 {
        assert!(
            o.stdout.contains(&format!("[1,{r}]<stdout>:out {r}\n")),
            "{o:#?}"
        );
        assert!(
            o.stdout.contains(&format!("[1,{r}]<stdout>:no newline\n")),
            "{o:#?}"
        );
        assert!(
            o.stderr.contains(&format!("[1,{r}]<stderr>:err {r}\n")),
            "{o:#?}"
        );
    }
}

#[test]
fn killed_rank_tears_the_job_down() {
    let o = run(&[
        "--oversubscribe",
        "-n",
        "4",
        RANK,
        "fail",
        "1",
        "kill",
        "fence",
    ]);
    assert_eq!(o.code, Some(128 + 9), "{o:#?}");
    assert!(o.elapsed < Duration::from_secs(5), "took {:?}", o.elapsed);
    let lines = o.stormrun_lines();
    assert_eq!(lines.len(), 1, "want one message: {o:#?}");
    assert!(lines[0].starts_with("stormrun: rank 1 (pid "), "{o:#?}");
    assert!(
        lines[0].contains("was killed by signal 9 (SIGKILL)"),
        "{o:#?}"
    );
    assert!(!o.stdout.contains("was not killed"), "{o:#?}");
    let jobid = jobid_of(&o, 4);
    assert_eq!(shm_files_of(&jobid), Vec::<String>::new());
}

#[test]
fn nonzero_exit_status_is_returned() {
    let o = run(&[
        "--oversubscribe",
        "-n",
        "3",
        RANK,
        "fail",
        "1",
        "exit:3",
        "sleep",
    ]);
    assert_eq!(o.code, Some(3), "{o:#?}");
    assert!(o.elapsed < Duration::from_secs(5), "took {:?}", o.elapsed);
    let lines = o.stormrun_lines();
    assert_eq!(lines.len(), 1, "{o:#?}");
    assert!(lines[0].contains("rank 1 (pid "), "{o:#?}");
    assert!(lines[0].contains("exited with status 3"), "{o:#?}");
    assert_eq!(shm_files_of(&jobid_of(&o, 3)), Vec::<String>::new());
}

#[test]
fn pmi_abort_kills_the_others() {
    let o = run(&[
        "--oversubscribe",
        "-n",
        "3",
        RANK,
        "fail",
        "2",
        "abort:7",
        "fence",
    ]);
    assert_eq!(o.code, Some(7), "{o:#?}");
    assert!(o.elapsed < Duration::from_secs(5), "took {:?}", o.elapsed);
    let lines = o.stormrun_lines();
    assert_eq!(lines.len(), 1, "{o:#?}");
    assert!(
        lines[0].contains("rank 2 (pid ")
            && lines[0].contains("called MPI_Abort with error code 7: test abort from rank 2"),
        "{o:#?}"
    );
    assert!(!o.stdout.contains("was not killed"), "{o:#?}");
    assert_eq!(shm_files_of(&jobid_of(&o, 3)), Vec::<String>::new());
}

#[test]
fn timeout_kills_a_hung_job() {
    let o = run(&["--timeout", "1", "-n", "2", RANK, "hang"]);
    assert_eq!(o.code, Some(124), "{o:#?}");
    assert!(o.elapsed >= Duration::from_secs(1), "{o:#?}");
    assert!(o.elapsed < Duration::from_secs(5), "took {:?}", o.elapsed);
    let lines = o.stormrun_lines();
    assert_eq!(
        lines,
        ["stormrun: job timed out after 1 s with rank(s) 0-1 still running; job aborted"]
    );
}

#[test]
fn exports_and_mca_reach_the_ranks() {
    let o = run_with_limit(
        stormrun(&[
            "--timeout",
            "20",
            "-x",
            "SET_HERE=a b=c",
            "-x",
            "FROM_ENV",
            "--mca",
            "btl",
            "sm,self",
            "-n",
            "2",
            RANK,
            "env",
            "SET_HERE",
            "FROM_ENV",
            "STORMPI_MCA_btl",
            "STORMPI_MCA_CMDLINE",
            "STORMPI_LOCAL_RANK",
            "STORMPI_LOCAL_SIZE",
            "STORMPI_NUM_CORES",
            "PMI_SIZE",
            "STORMPI_JOBID",
            "PMI_PORT",
        ])
        .env("FROM_ENV", "inherited")
        .env("PMI_PORT", "stale:1"),
        LIMIT,
    );
    assert_eq!(o.code, Some(0), "{o:#?}");
    let cores = cores();
    let mut jobids = HashSet::new();
    for r in 0..2 {
        for want in [
            format!("rank {r} SET_HERE=a b=c"),
            format!("rank {r} FROM_ENV=inherited"),
            format!("rank {r} STORMPI_MCA_btl=sm,self"),
            format!("rank {r} STORMPI_MCA_CMDLINE=btl"),
            format!("rank {r} STORMPI_LOCAL_RANK={r}"),
            format!("rank {r} STORMPI_LOCAL_SIZE=2"),
            format!("rank {r} STORMPI_NUM_CORES={cores}"),
            format!("rank {r} PMI_SIZE=2"),
            // A launcher above us must not leak its PMI settings to ranks.
            format!("rank {r} PMI_PORT=(unset)"),
        ] {
            assert!(
                o.stdout.lines().any(|l| l == want),
                "missing `{want}`: {o:#?}"
            );
        }
        let id = o
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("rank {r} STORMPI_JOBID=")))
            .unwrap();
        assert!(
            !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{id}"
        );
        jobids.insert(id.to_string());
    }
    assert_eq!(jobids.len(), 1, "one job id per job");
}

/// Each rank's CPU list, from `pmi-test-rank cpus` output.
fn cpus_of(o: &Outcome, ranks: u32) -> Vec<String> {
    (0..ranks)
        .map(|r| {
            o.stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("rank {r} cpus ")))
                .unwrap_or_else(|| panic!("rank {r} did not report: {o:#?}"))
                .to_string()
        })
        .collect()
}

#[test]
fn ranks_are_bound_to_cores_when_they_fit_and_not_when_oversubscribed() {
    let n = cores() as u32;
    let o = run(&["--timeout", "20", "--report-bindings", RANK, "cpus"]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    let cpus = cpus_of(&o, n);
    for (r, c) in cpus.iter().enumerate() {
        assert!(!c.contains(['-', ',']), "rank {r} bound to one cpu: {o:#?}");
        assert!(
            o.stderr.contains(&format!("stormrun: rank {r} on ")),
            "{o:#?}"
        );
    }
    let mut distinct = cpus.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), cpus.len(), "one core each: {o:#?}");
    let over = (n + 1).to_string();
    let o = run(&[
        "--timeout",
        "20",
        "--oversubscribe",
        "-n",
        &over,
        RANK,
        "cpus",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    let all = stormpi_bootstrap::launch::bind::list_text(
        &stormpi_bootstrap::launch::bind::allowed_cpus(),
    );
    assert!(cpus_of(&o, n + 1).iter().all(|c| *c == all), "{o:#?}");
    // Asked for explicitly, a binding that cannot be made is an error before
    // anything starts.
    let o = run(&[
        "--timeout",
        "20",
        "--oversubscribe",
        "--bind-to",
        "core",
        "-n",
        &over,
        RANK,
        "cpus",
    ]);
    assert_eq!(o.code, Some(2), "{o:#?}");
    assert!(o.stderr.contains("--bind-to none"), "{o:#?}");
    assert!(o.stdout.is_empty(), "{o:#?}");
}

#[test]
fn the_launchers_own_cpu_set_is_respected() {
    // Like a cpuset from Slurm or a container: stormrun started on cpu 0
    // alone binds its one rank there and sees two ranks as oversubscribed.
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", env!("CARGO_BIN_EXE_stormrun")]).args([
        "--timeout",
        "20",
        "-n",
        "1",
        RANK,
        "cpus",
    ]);
    let o = run_with_limit(&mut cmd, LIMIT);
    assert_eq!(o.code, Some(0), "{o:#?}");
    assert_eq!(cpus_of(&o, 1), ["0"], "{o:#?}");
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", env!("CARGO_BIN_EXE_stormrun")]).args([
        "--timeout",
        "20",
        "-n",
        "2",
        RANK,
        "cpus",
    ]);
    let o = run_with_limit(&mut cmd, LIMIT);
    assert_eq!(o.code, Some(2), "{o:#?}");
    assert!(o.stderr.contains("only 1 core"), "{o:#?}");
}

#[test]
fn cpus_per_rank_rankfile_and_none() {
    if cores() < 2 {
        eprintln!("SKIPPED: needs 2 cores");
        return;
    }
    let o = run(&[
        "--timeout",
        "20",
        "-n",
        "1",
        "--cpus-per-rank",
        "2",
        RANK,
        "cpus",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    assert_eq!(cpus_of(&o, 1), ["0-1"], "{o:#?}");
    let o = run(&[
        "--timeout",
        "20",
        "-n",
        "2",
        "--bind-to",
        "none",
        RANK,
        "cpus",
    ]);
    assert_eq!(cpus_of(&o, 2), ["0-1", "0-1"], "{o:#?}");
    let dir = std::env::temp_dir().join(format!("stormrun-rankfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rf = dir.join("rankfile");
    std::fs::write(&rf, "rank 0=localhost slot=1\nrank 1=localhost slot=0\n").unwrap();
    let o = run(&[
        "--timeout",
        "20",
        "--rankfile",
        rf.to_str().unwrap(),
        RANK,
        "cpus",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    assert_eq!(cpus_of(&o, 2), ["1", "0"], "{o:#?}");
    std::fs::write(&rf, "rank 0=localhost slot=7\n").unwrap();
    let o = run(&[
        "--timeout",
        "20",
        "--rankfile",
        rf.to_str().unwrap(),
        RANK,
        "cpus",
    ]);
    assert_eq!(o.code, Some(2), "{o:#?}");
    assert!(o.stderr.contains("rankfile slot 7"), "{o:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("stormrun-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn output_files_per_rank_with_and_without_a_copy() {
    let dir = scratch("output");
    let d = dir.to_str().unwrap();
    let o = run(&[
        "--timeout",
        "20",
        "-n",
        "2",
        "--output-filename",
        d,
        RANK,
        "env",
        "PMI_RANK",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    for r in 0..2 {
        let file = dir.join(format!("1/rank.{r}/stdout"));
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(text, format!("rank {r} PMI_RANK={r}\n"), "{file:?}");
        assert!(o.stdout.contains(&text), "copied to the terminal: {o:#?}");
        assert!(dir.join(format!("1/rank.{r}/stderr")).exists());
    }
    let nocopy = format!("{d}:nocopy");
    let o = run(&[
        "--timeout",
        "20",
        "-n",
        "1",
        "--output-filename",
        &nocopy,
        RANK,
        "env",
        "X",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    assert!(o.stdout.is_empty(), "{o:#?}");
    assert_eq!(
        std::fs::read_to_string(dir.join("1/rank.0/stdout")).unwrap(),
        "rank 0 X=(unset)\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn wdir_path_and_mpiexec_timeout() {
    let dir = scratch("wdir");
    let canonical = dir.canonicalize().unwrap();
    let o = run(&[
        "--timeout",
        "20",
        "-n",
        "1",
        "--wdir",
        dir.to_str().unwrap(),
        "pwd",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    assert_eq!(o.stdout.trim(), canonical.to_str().unwrap(), "{o:#?}");
    let o = run(&["-n", "1", "--wdir", "/nonexistent/dir", "pwd"]);
    assert_eq!(o.code, Some(2), "{o:#?}");
    assert!(o.stderr.contains("not a directory"), "{o:#?}");
    let script = dir.join("stormrun-path-probe");
    std::fs::write(&script, "#!/bin/sh\necho found by --path\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = run(&[
        "--timeout",
        "20",
        "-n",
        "1",
        "--path",
        dir.to_str().unwrap(),
        "stormrun-path-probe",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    assert_eq!(o.stdout.trim(), "found by --path", "{o:#?}");
    let o = run_with_limit(
        stormrun(&["-n", "1", RANK, "hang"]).env("MPIEXEC_TIMEOUT", "1"),
        LIMIT,
    );
    assert_eq!(o.code, Some(124), "{o:#?}");
    let o = run_with_limit(
        stormrun(&["-n", "1", RANK, "hang"]).env("MPIEXEC_TIMEOUT", "soon"),
        LIMIT,
    );
    assert_eq!(o.code, Some(2), "{o:#?}");
    assert!(o.stderr.contains("MPIEXEC_TIMEOUT"), "{o:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A process's state letter from /proc (`T` stopped, `S` sleeping, ...).
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

#[test]
fn ctrl_z_stops_the_ranks_and_fg_continues_them() {
    let mut child = stormrun(&["--timeout", "30", "-n", "2", RANK, "hang"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let ranks = || -> Vec<u32> {
        let out = Command::new("pgrep")
            .args(["-P", &pid.to_string()])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    };
    let deadline = Instant::now() + LIMIT;
    while ranks().len() < 2 {
        assert!(Instant::now() < deadline, "ranks did not start");
        thread::sleep(Duration::from_millis(20));
    }
    let wait_state = |want: char| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let states: Vec<Option<char>> = ranks().into_iter().map(proc_state).collect();
            if states.len() == 2 && states.iter().all(|s| *s == Some(want)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "ranks not in state {want}: {states:?}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    };
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGTSTP) };
    wait_state('T');
    assert_eq!(proc_state(pid), Some('T'), "stormrun stops too");
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    wait_state('S');
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn an_unreachable_host_is_named_as_such() {
    // An agent failing as ssh does when it cannot reach the host.
    let o = run(&[
        "--timeout",
        "20",
        "--host",
        "faraway:1",
        "--pmi-address",
        "127.0.0.1",
        "--launch-agent",
        "sh -c 'echo ssh: connect to host faraway: No route to host >&2; exit 255'",
        RANK,
        "exchange",
    ]);
    assert_eq!(o.code, Some(255), "{o:#?}");
    assert!(o.stderr.contains("No route to host"), "{o:#?}");
    assert!(
        o.stderr.contains("rank 0 on faraway (pid ")
            && o.stderr.contains("the launch agent could not start it"),
        "{o:#?}"
    );
}

#[test]
fn oversubscription_needs_the_flag() {
    let n = (cores() + 1).to_string();
    let o = run(&["--timeout", "20", "-n", &n, RANK, "exchange"]);
    assert_eq!(o.code, Some(2), "{o:#?}");
    assert!(o.stderr.contains("--oversubscribe"), "{o:#?}");
    assert!(o.stderr.contains(&format!("{n} ranks requested")), "{o:#?}");
    assert!(o.stdout.is_empty(), "nothing may start: {o:#?}");
}

#[test]
fn rank_leaving_a_barrier_alone_does_not_hang_the_job() {
    let o = run(&[
        "--timeout",
        "20",
        "--oversubscribe",
        "-n",
        "3",
        RANK,
        "barrier-exit",
        "1",
    ]);
    assert_eq!(o.code, Some(1), "{o:#?}");
    assert!(o.elapsed < Duration::from_secs(5), "took {:?}", o.elapsed);
    let lines = o.stormrun_lines();
    assert_eq!(lines.len(), 1, "{o:#?}");
    // A rank that initialized PMI and leaves without finalizing ends the job as it exits,
    // before the barrier it left could be found blocked.
    assert!(
        lines[0].contains("rank 1 (pid ")
            && lines[0].contains("exited with status 0 before MPI_Finalize"),
        "{o:#?}"
    );
    assert!(!o.stdout.contains("passed a fence"), "{o:#?}");
}

#[test]
fn garbage_from_a_rank_is_answered_and_logged() {
    let o = run(&["--timeout", "20", "-n", "2", RANK, "garbage"]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    for r in 0..2 {
        assert!(
            o.stdout
                .contains(&format!("rank {r}/2 appnum 0: exchange ok")),
            "{o:#?}"
        );
    }
    assert_eq!(
        o.stdout.matches("garbage reply: cmd=error rc=-1").count(),
        2,
        "{o:#?}"
    );
    assert_eq!(
        o.stderr.matches("sent a malformed PMI command").count(),
        2,
        "{o:#?}"
    );
}

#[test]
fn early_clean_exit_is_not_a_failure() {
    let o = run(&[
        "--timeout",
        "20",
        "-n",
        "2",
        "sh",
        "-c",
        "if [ $PMI_RANK = 0 ]; then exit 0; fi; sleep 0.5; echo late",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    assert_eq!(o.stdout, "late\n");
    assert!(o.stormrun_lines().is_empty(), "{o:#?}");
}

#[test]
fn sigint_is_forwarded_and_ends_the_job() {
    let mut child = stormrun(&[
        "--timeout",
        "20",
        "-n",
        "2",
        RANK,
        "fail",
        "9",
        "none",
        "sleep",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let err = reader(child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let out = thread::spawn(move || {
        let mut all = String::new();
        for line in stdout.lines() {
            let line = line.unwrap();
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // Wait until both ranks are up (they print after creating their file).
    let mut started = 0;
    let deadline = Instant::now() + LIMIT;
    while started < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(" created ") => started += 1,
            Ok(_) => {}
            Err(_) => {
                let _ = child.kill();
                panic!("ranks did not start");
            }
        }
    }
    let sent_at = Instant::now();
    // SAFETY: plain system call on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_with_limit(&mut child, LIMIT);
    let elapsed = sent_at.elapsed();
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(130),
        "{stdout}\n{stderr}"
    );
    assert!(elapsed < Duration::from_secs(5), "took {elapsed:?}");
    assert!(
        stderr.contains("stormrun: received SIGINT; forwarded it to all ranks; job aborted"),
        "{stderr}"
    );
    assert!(!stdout.contains("was not killed"), "{stdout}");
    let jobid = stdout
        .lines()
        .find_map(|l| l.strip_prefix("jobid="))
        .unwrap();
    assert_eq!(shm_files_of(jobid), Vec::<String>::new());
}

/// Runs `ranks` ranks of `session` mode with stormrun's `flags` under a stormrun that leads a
/// process group of its own, as a shell's foreground job does; then sends the group SIGINT, as a
/// terminal's Ctrl-C does (the group holds stormrun but no rank), and checks that it ends every
/// rank. Returns each rank's pid, process group and session, and stormrun's session.
fn session_job(ranks: usize, flags: &[&str]) -> (Vec<(i32, i32, i32)>, i32) {
    let n = ranks.to_string();
    let mut args = vec!["--timeout", "20", "-n", &n];
    args.extend(flags);
    args.extend([RANK, "session"]);
    let mut child = stormrun(&args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id() as i32;
    let err = reader(child.stderr.take().unwrap());
    let (tx, rx) = mpsc::channel();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let out = thread::spawn(move || {
        let mut all = String::new();
        for line in stdout.lines() {
            let line = line.unwrap();
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let mut seen: Vec<(i32, i32, i32)> = Vec::new();
    let deadline = Instant::now() + LIMIT;
    while seen.len() < ranks {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let words: Vec<&str> = line.split_whitespace().collect();
                if let ["rank", _, "pid", pid, "pgid", pgid, "sid", sid] = words[..] {
                    seen.push((
                        pid.parse().unwrap(),
                        pgid.parse().unwrap(),
                        sid.parse().unwrap(),
                    ));
                }
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("ranks did not start: {}", err.join().unwrap());
            }
        }
    }
    // SAFETY: getsid has no memory effects.
    let launcher_sid = unsafe { libc::getsid(launcher) };
    // SAFETY: signals the process group of our own child, which it leads.
    unsafe { libc::kill(-launcher, libc::SIGINT) };
    let status = wait_with_limit(&mut child, LIMIT);
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(130),
        "{stdout}\n{stderr}"
    );
    assert!(
        stderr.contains("stormrun: received SIGINT; forwarded it to all ranks; job aborted"),
        "{stderr}"
    );
    assert!(!stdout.contains("was not killed"), "{stdout}");
    for &(pid, _, _) in &seen {
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0;
        assert!(!alive, "rank pid {pid} outlived the job");
    }
    (seen, launcher_sid)
}

/// Ranks that fit the cores each lead a session of its own, as under MPICH's Hydra (the
/// kernel's autogroup scheduling gives each session its share of the CPU), and a Ctrl-C still
/// ends them all.
#[test]
fn ranks_lead_their_own_sessions_and_ctrl_c_still_ends_them() {
    let (ranks, launcher_sid) = session_job(cores().min(3), &[]);
    for &(pid, pgid, sid) in &ranks {
        assert_eq!(
            (pgid, sid),
            (pid, pid),
            "rank {pid} leads no session of its own"
        );
        assert_ne!(sid, launcher_sid);
    }
}

/// Oversubscribed ranks hand cores to each other with `sched_yield`, which works only inside a
/// session's autogroup: they stay in stormrun's session, each in a process group of its own,
/// unless `--own-sessions` asks for sessions of their own (their idle waits then sleep).
#[test]
fn oversubscribed_ranks_share_the_launchers_session() {
    let (ranks, launcher_sid) = session_job(cores() + 1, &["--oversubscribe"]);
    for &(pid, pgid, sid) in &ranks {
        assert_eq!(pgid, pid, "rank {pid} leads no process group of its own");
        assert_eq!(sid, launcher_sid, "rank {pid} left stormrun's session");
    }
    let flags = ["--oversubscribe", "--own-sessions"];
    let (ranks, launcher_sid) = session_job(cores() + 1, &flags);
    for &(pid, pgid, sid) in &ranks {
        assert_eq!(
            (pgid, sid),
            (pid, pid),
            "rank {pid} leads no session of its own"
        );
        assert_ne!(sid, launcher_sid);
    }
}

/// `--same-session` keeps ranks that fit the cores in stormrun's session too.
#[test]
fn same_session_keeps_ranks_in_the_launchers_session() {
    let (ranks, launcher_sid) = session_job(cores().min(3), &["--same-session"]);
    for &(pid, pgid, sid) in &ranks {
        assert_eq!(pgid, pid, "rank {pid} leads no process group of its own");
        assert_eq!(sid, launcher_sid, "rank {pid} left stormrun's session");
    }
}

#[test]
fn missing_program_is_reported() {
    let o = run(&["--timeout", "20", "-n", "1", "/nonexistent/stormpi-prog"]);
    assert_eq!(o.code, Some(127), "{o:#?}");
    let lines = o.stormrun_lines();
    assert_eq!(lines.len(), 1, "{o:#?}");
    assert!(
        lines[0].contains("cannot start rank 0 (`/nonexistent/stormpi-prog`)"),
        "{o:#?}"
    );
}

#[test]
fn usage_errors_and_help() {
    let o = run(&["--bogus", "x"]);
    assert_eq!(o.code, Some(2), "{o:#?}");
    assert!(o.stderr.contains("unknown option `--bogus`"), "{o:#?}");
    let o = run(&["--help"]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    assert!(o.stdout.starts_with("Usage: stormrun"), "{o:#?}");
}

#[test]
fn no_launcher_means_singleton() {
    let o = run_with_limit(
        Command::new(RANK)
            .arg("singleton")
            .env_remove("PMI_FD")
            .env_remove("PMI_PORT"),
        LIMIT,
    );
    assert_eq!(o.code, Some(0), "{o:#?}");
    assert_eq!(o.stdout, "singleton\n");
    let o = run(&["--timeout", "20", "-n", "1", RANK, "singleton"]);
    assert_eq!(o.stdout, "pmi rank 0 of 1\n", "{o:#?}");
}

/// A program built with MPICH (whose own PMI-1 client then talks to our
/// server) runs, and its MPI_Abort is reported.
#[test]
fn mpich_program_runs_under_stormrun() {
    const SOURCE: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    int rank, size, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("mpich rank %d of %d sum %d\n", rank, size, sum);
    fflush(stdout);
    if (argc > 1 && rank == 1) MPI_Abort(MPI_COMM_WORLD, atoi(argv[1]));
    MPI_Finalize();
    return 0;
}
"#;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("stormrun_mpich_hello.c");
    let exe = dir.join("stormrun_mpich_hello");
    std::fs::write(&src, SOURCE).unwrap();
    let built = Command::new("mpicc.mpich")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output();
    match built {
        Err(_) => {
            eprintln!("\n*** SKIPPED mpich_program_runs_under_stormrun: mpicc.mpich is not installed ***\n");
            return;
        }
        Ok(out) => assert!(out.status.success(), "mpicc.mpich failed: {out:?}"),
    }
    let exe = exe.to_str().unwrap();

    let o = run(&["--timeout", "20", "-n", "2", exe]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    for r in 0..2 {
        let line = format!("mpich rank {r} of 2 sum 1");
        assert!(
            o.stdout.lines().any(|l| l == line),
            "missing `{line}`: {o:#?}"
        );
    }

    let o = run(&["--timeout", "20", "-n", "2", exe, "9"]);
    assert_eq!(o.code, Some(9), "{o:#?}");
    let lines = o.stormrun_lines();
    assert_eq!(lines.len(), 1, "{o:#?}");
    assert!(
        lines[0].contains("rank 1 (pid ")
            && lines[0].contains("called MPI_Abort with error code 9"),
        "{o:#?}"
    );

    // Ranks 1 and 2 "remote": MPICH's own client does the PMI_PORT/PMI_ID
    // handshake with our TCP server, but cannot prove the job's key: refused,
    // with a message saying what to do, unless the user allows it.
    let remote = |extra: &[&str]| {
        let mut args = vec![
            "--timeout",
            "20",
            "--host",
            "localhost:1,fakehost:2",
            "--launch-agent",
            LOCAL_AGENT,
            "--pmi-address",
            "127.0.0.1",
        ];
        args.extend(extra);
        args.extend(["-n", "3", exe]);
        run(&args)
    };
    let o = remote(&[]);
    assert_ne!(o.code, Some(0), "{o:#?}");
    assert!(
        o.stderr.contains("without proving the job's key")
            && o.stderr.contains("--pmi-unauthenticated"),
        "{o:#?}"
    );
    let o = remote(&["--pmi-unauthenticated"]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    for r in 0..3 {
        let line = format!("mpich rank {r} of 3 sum 3");
        assert!(
            o.stdout.lines().any(|l| l == line),
            "missing `{line}`: {o:#?}"
        );
    }
}

#[test]
fn successful_job_removes_its_shm_files() {
    let o = run(&[
        "--timeout",
        "20",
        "-n",
        "2",
        "sh",
        "-c",
        "f=/dev/shm/stormpi-$STORMPI_JOBID-seg$PMI_RANK; touch $f && echo $STORMPI_JOBID",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    let jobid = o.stdout.lines().next().unwrap();
    assert!(o.stdout.lines().all(|l| l == jobid), "{o:#?}");
    assert_eq!(shm_files_of(jobid), Vec::<String>::new());
}

/// A launch agent that runs the command on this machine: `sh -c 'shift; exec "$@"' agent HOST
/// CMD...` drops the host and execs the rest, as `ip netns exec HOST` would in a namespace. It
/// exercises the whole remote path (agent command line, PMI over TCP) without root.
const LOCAL_AGENT: &str = r#"sh -c 'shift; exec "$@"' agent"#;

/// Strangers race a slow launch agent for the remote ranks' identities at the PMI port:
/// claiming a rank without a proof, and sending an abort. Each is refused and nothing they send
/// is obeyed; the real ranks, which prove their keys, run the job. The key never appears on the
/// agent's command line.
#[test]
fn forged_pmi_clients_racing_a_slow_agent_are_refused() {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let argv_file = dir.join(format!("slow-agent-argv-{port}"));
    let _ = std::fs::remove_file(&argv_file);
    let agent = format!(
        r#"sh -c 'echo "$@" >> {}; sleep 1; shift; exec "$@"' agent"#,
        argv_file.display()
    );
    let done = Arc::new(AtomicBool::new(false));
    let stop = done.clone();
    let forger = std::thread::spawn(move || {
        let mut answers = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            for rank in [1, 2] {
                let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
                    continue;
                };
                c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let forged = format!("cmd=initack pmiid={rank}\ncmd=abort exitcode=42\n");
                let _ = c.write_all(forged.as_bytes());
                let mut answer = String::new();
                let _ = c.read_to_string(&mut answer);
                answers.push(answer);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        answers
    });
    let pmi_address = format!("127.0.0.1:{port}");
    let o = run(&[
        "--timeout",
        "20",
        "--host",
        "localhost:1,fakehost:2",
        "--launch-agent",
        &agent,
        "--pmi-address",
        &pmi_address,
        "-n",
        "3",
        RANK,
        "nodes",
    ]);
    done.store(true, Ordering::Relaxed);
    let answers = forger.join().unwrap();
    assert_eq!(o.code, Some(0), "{o:#?}");
    for r in 0..3 {
        let line = format!("rank {r}/3 appnum 0: exchange ok (1000-byte values)");
        assert!(o.stdout.lines().any(|l| l == line), "{o:#?}");
    }
    let refused: Vec<&String> = answers
        .iter()
        .filter(|a| a.starts_with("cmd=initack rc=-1 msg="))
        .collect();
    assert!(
        !refused.is_empty(),
        "the forger never got through to the port: {answers:?}"
    );
    assert!(
        answers.iter().all(|a| !a.contains("rc=0")),
        "a forger was served: {answers:?}"
    );
    // Refused for lack of a proof, or — once the real rank is in — as a second claim.
    for line in o.stormrun_lines() {
        assert!(
            line.starts_with("stormrun: refused a PMI connection from 127.0.0.1:")
                && (line.contains("without proving the job's key")
                    || line.contains("which has connected already")),
            "{o:#?}"
        );
    }
    let argv = std::fs::read_to_string(&argv_file).unwrap();
    assert!(argv.contains("--exec-with-pmi-key"), "{argv}");
    assert!(
        !argv.contains("STORMPI_PMI_KEY"),
        "the key is on the command line: {argv}"
    );
}

#[test]
fn remote_ranks_use_pmi_over_tcp() {
    let o = run(&[
        "--timeout",
        "20",
        "--host",
        "localhost:1,fakehost:2",
        "--launch-agent",
        LOCAL_AGENT,
        "--pmi-address",
        "127.0.0.1",
        "-n",
        "3",
        RANK,
        "nodes",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for (r, node, local, via) in [
        (0, hostname.trim(), "0/1", "fd"),
        (1, "fakehost", "0/2", "port"),
        (2, "fakehost", "1/2", "port"),
    ] {
        let head = format!("rank {r}/3 node {node} local {local} pmi {via} ");
        assert!(
            o.stdout
                .lines()
                .any(|l| l.starts_with(&head) && l.ends_with(": nodes ok")),
            "missing `{head}...`: {o:#?}"
        );
        let line = format!("rank {r}/3 appnum 0: exchange ok (1000-byte values)");
        assert!(o.stdout.lines().any(|l| l == line), "{o:#?}");
    }
    assert!(o.stormrun_lines().is_empty(), "{o:#?}");

    // A failing remote rank is named with its host.
    let o = run(&[
        "--timeout",
        "20",
        "--host",
        "fakehost:2",
        "--launch-agent",
        LOCAL_AGENT,
        "--pmi-address",
        "127.0.0.1",
        RANK,
        "fail",
        "1",
        "abort:6",
        "sleep",
    ]);
    assert_eq!(o.code, Some(6), "{o:#?}");
    let lines = o.stormrun_lines();
    assert_eq!(lines.len(), 1, "{o:#?}");
    assert!(
        lines[0].starts_with("stormrun: rank 1 on fakehost (pid ")
            && lines[0].contains("called MPI_Abort with error code 6"),
        "{o:#?}"
    );
    assert!(o.elapsed < Duration::from_secs(5), "{o:#?}");
}

/// Connections to the PMI port that do not identify as an expected remote rank are refused and
/// logged; the job completes.
#[test]
fn strangers_on_the_pmi_port_are_refused() {
    use std::io::Write;
    use std::net::TcpStream;
    let script = format!("echo PORT=$PMI_PORT; sleep 1.5; exec {RANK} exchange 10");
    let mut child = stormrun(&[
        "--timeout",
        "20",
        "--host",
        "fakehost:2",
        "--launch-agent",
        LOCAL_AGENT,
        "--pmi-address",
        "127.0.0.1",
        "sh",
        "-c",
        &script,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Killed if an assertion fails before it ends (its ranks die with it).
    struct KillOnDrop(Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let err = reader(child.stderr.take().unwrap());
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut child = KillOnDrop(child);
    let (tx, rx) = mpsc::channel();
    let out = thread::spawn(move || {
        let mut all = String::new();
        for line in stdout.lines().map_while(Result::ok) {
            let _ = tx.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let port = loop {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => {
                if let Some(p) = line.strip_prefix("PORT=") {
                    break p.to_string();
                }
            }
            Err(_) => panic!("no PORT= line from the ranks"),
        }
    };
    let mut replies = Vec::new();
    for first in [&b"cmd=initack pmiid=99\n"[..], b"hello\n"] {
        let mut c = TcpStream::connect(&port).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(first).unwrap();
        let mut reply = String::new();
        let _ = c.read_to_string(&mut reply);
        replies.push(reply);
    }
    let status = wait_with_limit(&mut child.0, LIMIT);
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{stdout}\n{stderr}");
    assert_eq!(
        replies[0],
        "cmd=initack rc=-1 msg=identified_as_rank_99,_but_the_job_has_2_rank(s)\n"
    );
    assert!(
        replies[1].starts_with("cmd=initack rc=-1 msg=sent_`hello`"),
        "{replies:?}"
    );
    let refused: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("stormrun: refused a PMI connection from 127.0.0.1:"))
        .collect();
    assert_eq!(refused.len(), 2, "{stderr}");
    assert!(refused[0].ends_with("it identified as rank 99, but the job has 2 rank(s)"));
    for r in 0..2 {
        let line = format!("rank {r}/2 appnum 0: exchange ok (10-byte values)");
        assert!(stdout.lines().any(|l| l == line), "{stdout}\n{stderr}");
    }
}

/// Broken PMI_PORT/PMI_ID settings are clear errors, not hangs or panics.
#[test]
fn bad_pmi_port_settings_are_reported() {
    for (port, id, needle) in [
        ("nonsense", None, "PMI_PORT is `nonsense`, not HOST:PORT"),
        (
            "127.0.0.1:0",
            None,
            "PMI_PORT is `127.0.0.1:0`, not HOST:PORT",
        ),
        (
            "127.0.0.1:1",
            Some("x"),
            "PMI_ID is `x`, not a non-negative number",
        ),
        (
            "127.0.0.1:1",
            Some("0"),
            "connect to PMI_PORT failed: 127.0.0.1:1",
        ),
    ] {
        let mut cmd = Command::new(RANK);
        cmd.arg("singleton")
            .env_remove("PMI_FD")
            .env_remove("PMI_ID")
            .env("PMI_PORT", port);
        if let Some(id) = id {
            cmd.env("PMI_ID", id);
        }
        let o = run_with_limit(&mut cmd, LIMIT);
        assert_eq!(o.code, Some(99), "{o:#?}");
        assert!(o.stderr.contains(needle), "want {needle:?}: {o:#?}");
    }
}

#[test]
fn host_slots_limit_the_job() {
    let o = run(&["--host", "localhost:1", "-n", "2", RANK, "exchange"]);
    assert_eq!(o.code, Some(2), "{o:#?}");
    assert!(
        o.stderr
            .contains("2 ranks requested but the hosts have only 1 slot(s)"),
        "{o:#?}"
    );
    // Local hosts: fork/exec as without a host list, and STORMPI_NODE is the machine's name.
    let o = run(&[
        "--timeout",
        "20",
        "--host",
        "localhost:2",
        RANK,
        "env",
        "STORMPI_NODE",
        "PMI_PORT",
        "STORMPI_LOCAL_SIZE",
    ]);
    assert_eq!(o.code, Some(0), "{o:#?}");
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for r in 0..2 {
        for want in [
            format!("rank {r} STORMPI_NODE={}", hostname.trim()),
            format!("rank {r} PMI_PORT=(unset)"),
            format!("rank {r} STORMPI_LOCAL_SIZE=2"),
        ] {
            assert!(
                o.stdout.lines().any(|l| l == want),
                "missing {want}: {o:#?}"
            );
        }
    }
}
