//! Dynamic processes: name publishing through stormrun's name service, and opening and closing
//! ports, connecting two jobs, and spawning jobs.

use stormpi_tests::netns::NetnsHosts;
use stormpi_tests::{
    c_extra_program, in_path, run, run_job, run_stormrun, stormrun_command, JOB_TIMEOUT,
};

/// A service rank 0 publishes is found by every rank, through the PMI server; a second publish,
/// unknown services and lookups after the unpublish fail with MPI's error classes.
#[test]
fn published_name_is_seen_by_every_rank_until_unpublished() {
    let prog = c_extra_program("names");
    for np in [1, 3] {
        run_job(np, &[], &prog, &[]).assert_ok("names");
    }
}

/// Ports listen while open and not after `MPI_Close_port`; a port name survives publishing.
#[test]
fn ports_listen_until_closed() {
    let prog = c_extra_program("ports");
    run_job(2, &[], &prog, &[]).assert_ok("ports");
    // A singleton opens ports too (they need no launcher; it has no name service).
    let mut cmd = std::process::Command::new(&prog);
    cmd.arg("singleton");
    run(cmd, JOB_TIMEOUT).assert_ok("ports");
}

/// A process started without a launcher has no name service: publishing says so.
#[test]
fn singleton_has_no_name_service() {
    let prog = c_extra_program("names");
    let mut cmd = std::process::Command::new(&prog);
    cmd.arg("singleton");
    run(cmd, JOB_TIMEOUT).assert_ok("names-singleton");
}

/// Under MPICH's Hydra, over PMI-1 and PMI-2: its name service keeps the names (the client's
/// encoding gets a port name with a space through Hydra's PMI-1, which cuts values at spaces).
#[test]
fn names_under_hydra() {
    const MPIEXEC: &str = "mpiexec.mpich";
    if !in_path(MPIEXEC) {
        eprintln!("\n*** SKIPPED: {MPIEXEC} is not installed (apt-get install mpich) ***\n");
        return;
    }
    let prog = c_extra_program("names");
    for protocol in ["pmi1", "pmi2"] {
        let mut cmd = std::process::Command::new(MPIEXEC);
        cmd.args(["-n", "3"])
            .arg(&prog)
            .env("STORMPI_PMI", protocol);
        let out = run(cmd, JOB_TIMEOUT);
        assert!(
            out.success() && out.has_line("OK names"),
            "STORMPI_PMI={protocol}: {}",
            out.report()
        );
    }
}

/// On two "hosts" (network namespaces; the remote ranks reach stormrun's PMI server over TCP):
/// every rank sees the names rank 0 published, and reaches rank 0's port across the hosts.
#[test]
fn names_and_ports_across_hosts() {
    let Some(hosts) = NetnsHosts::create_or_skip("names_and_ports_across_hosts", 2) else {
        return;
    };
    let list = format!("{}:2,{}:2", hosts.names[0], hosts.names[1]);
    for name in ["names", "ports"] {
        let prog = c_extra_program(name);
        run_stormrun(hosts.stormrun(&list, 4, false, &[], &prog, &[])).assert_ok(name);
    }
}

/// The jobs that meet other jobs keep to loopback: the netns tests of this file, running at the
/// same time, add bridge addresses to this host's namespace and take them away again, and a
/// business card naming one would go stale under the other job.
const LOOPBACK: &[&str] = &["--mca", "btl_tcp_if_include", "lo"];

/// Two separately started jobs of two ranks meet at a port whose name goes through a file:
/// a wrong secret is refused with `MPI_ERR_PORT` (and the server keeps waiting), then they
/// exchange point-to-point messages both ways, intercommunicator collectives, merge and
/// disconnect.
#[test]
fn two_jobs_connect_and_accept() {
    let prog = c_extra_program("connect_accept");
    let dir = std::env::temp_dir().join(format!("stormpi-connect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("port");
    let file_s = file.to_string_lossy().into_owned();
    let (p2, f2) = (prog.clone(), file_s.clone());
    let server = std::thread::spawn(move || run_job(2, LOOPBACK, &p2, &["server", &f2]));
    let client = run_job(2, LOOPBACK, &prog, &["client", &file_s]);
    let server = server.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        client.success() && server.success(),
        "client:\n{}\nserver:\n{}",
        client.report(),
        server.report()
    );
    client.assert_ok("connect_accept-client");
    server.assert_ok("connect_accept-server");
}

/// Two jobs of one rank connect a loopback socket themselves and join over it.
#[test]
fn two_jobs_join_over_a_socket() {
    let prog = c_extra_program("join");
    let dir = std::env::temp_dir().join(format!("stormpi-join-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("port").to_string_lossy().into_owned();
    let (p2, f2) = (prog.clone(), file.clone());
    let listener = std::thread::spawn(move || run_job(1, LOOPBACK, &p2, &["listen", &f2]));
    let connector = run_job(1, LOOPBACK, &prog, &["connect", &file]);
    let listener = listener.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    connector.assert_ok("join-connect");
    listener.assert_ok("join-listen");
}

/// A job whose process slots for other jobs (`dpm_max_procs`) are fewer than the connecting
/// job's processes refuses it: both sides fail with `MPI_ERR_NO_MEM` at every rank.
#[test]
fn a_job_without_room_refuses_a_connecting_job() {
    let prog = c_extra_program("connect_accept");
    let dir = std::env::temp_dir().join(format!("stormpi-noroom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("port").to_string_lossy().into_owned();
    let (p2, f2) = (prog.clone(), file.clone());
    let server = std::thread::spawn(move || {
        let mut cmd = stormrun_command(2, LOOPBACK, &p2, &["server", &f2, "noroom"]);
        cmd.env("STORMPI_MCA_dpm_max_procs", "1");
        run_stormrun(cmd)
    });
    let client = run_job(2, LOOPBACK, &prog, &["client", &file, "noroom"]);
    let server = server.join().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    client.assert_ok("connect_accept-client");
    server.assert_ok("connect_accept-server");
}

/// A job of two ranks spawns two children (point-to-point both ways, an intercommunicator
/// collective), the children spawn a grandchild, and each pair merges and disconnects.
#[test]
fn spawn_children_and_grandchildren() {
    let prog = c_extra_program("spawn");
    run_job(2, LOOPBACK, &prog, &["basic"]).assert_ok("spawn-basic");
}

/// The process slots of disconnected children are given back and serve the next ones: 200
/// rounds of spawning two children (data both ways, every other round a merge freed again,
/// then `MPI_Comm_disconnect`) with room for only 8 processes of other jobs.
#[test]
fn spawn_and_disconnect_reuse_process_slots() {
    let prog = c_extra_program("spawn");
    let mut cmd = stormrun_command(2, LOOPBACK, &prog, &["loop", "200"]);
    cmd.env("STORMPI_MCA_dpm_max_procs", "8");
    run_stormrun(cmd).assert_ok("spawn-loop");
}

/// `MPI_Comm_spawn_multiple` of two commands: one job, the commands' processes in order, each
/// with its `MPI_APPNUM`; a merge with the same `high` at both sides puts one side, then the
/// other, each in its order.
#[test]
fn spawn_multiple_commands() {
    let prog = c_extra_program("spawn");
    run_job(2, LOOPBACK, &prog, &["multiple"]).assert_ok("spawn-multiple");
}

/// A program that does not exist is `MPI_ERR_SPAWN` at every rank (with stormrun's message),
/// and the job goes on.
#[test]
fn spawn_of_a_missing_program_fails_with_err_spawn() {
    let prog = c_extra_program("spawn");
    let out = run_job(2, LOOPBACK, &prog, &["missing"]);
    out.assert_ok("spawn-missing");
    assert!(
        out.stderr.contains("does not exist or is not executable")
            && out.stderr.contains("not found in PATH"),
        "{}",
        out.report()
    );
}

/// The info keys `path` (where to find the program) and `wdir` (where it runs) are honoured.
#[test]
fn spawn_honours_path_and_wdir() {
    let prog = c_extra_program("spawn");
    let dir = std::env::temp_dir().join(format!("stormpi-spawn-wdir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = run_job(1, LOOPBACK, &prog, &["wdir", &dir.to_string_lossy()]);
    let _ = std::fs::remove_dir_all(&dir);
    out.assert_ok("spawn-wdir");
}

/// A spawned job that fails ends its parents' job too (as Open MPI does), with stormrun saying
/// which; so does a spawned program that never calls `MPI_Init`, whose parents would otherwise
/// wait for it until `dpm_timeout`.
#[test]
fn a_failed_spawned_job_ends_the_parents() {
    let prog = c_extra_program("spawn");
    let out = run_job(2, LOOPBACK, &prog, &["abort"]);
    out.assert_failed_with(&["called MPI_Abort with error code 3", "failed (status 3)"]);
    assert!(!out.stderr.contains("FAIL spawn"), "{}", out.report());
    let out = run_job(2, LOOPBACK, &prog, &["nompi"]);
    out.assert_failed_with(&["exited before MPI_Init", "spawned as `1 x true`"]);
    assert!(!out.stderr.contains("FAIL spawn"), "{}", out.report());
}

/// A process of another job that is gone (its connection is refused at once) ends the job
/// promptly with a message naming it, instead of leaving a send to it waiting until
/// `dpm_timeout`.
#[test]
fn a_refused_connection_to_another_jobs_process_ends_the_job_promptly() {
    let prog = c_extra_program("spawn");
    let out = run_job(2, LOOPBACK, &prog, &["gone"]);
    out.assert_failed_with(&["of another job", "failed"]);
    assert!(!out.stderr.contains("FAIL spawn"), "{}", out.report());
}

/// A process started without a launcher cannot spawn: `MPI_ERR_UNSUPPORTED_OPERATION`.
#[test]
fn spawn_without_a_launcher_is_unsupported() {
    let prog = c_extra_program("spawn");
    let mut cmd = std::process::Command::new(&prog);
    cmd.arg("unsupported");
    run(cmd, JOB_TIMEOUT).assert_ok("spawn-unsupported");
}

/// Under MPICH's Hydra, over PMI-1 (`mcmd=spawn`) and PMI-2 (`spawn`): the children come up as
/// a Hydra job of their own, find the parents' port in their key-value space, and the spawns
/// of `spawn basic` (children and a grandchild), `spawn multiple` and a loop of spawns with
/// room for only 8 processes of other jobs work as under stormrun.
#[test]
fn spawn_under_hydra() {
    const MPIEXEC: &str = "mpiexec.mpich";
    if !in_path(MPIEXEC) {
        eprintln!("\n*** SKIPPED: {MPIEXEC} is not installed (apt-get install mpich) ***\n");
        return;
    }
    let prog = c_extra_program("spawn");
    for protocol in ["pmi1", "pmi2"] {
        for args in [&["basic"][..], &["multiple"], &["loop", "20"]] {
            let mut cmd = std::process::Command::new(MPIEXEC);
            cmd.args(["-n", "2"])
                .arg(&prog)
                .args(args)
                .env("STORMPI_PMI", protocol)
                .env("STORMPI_MCA_btl_tcp_if_include", "lo")
                .env("STORMPI_MCA_dpm_max_procs", "8");
            let out = run(cmd, JOB_TIMEOUT);
            let ok = format!("OK spawn-{}", args[0]);
            assert!(
                out.success() && out.has_line(&ok),
                "STORMPI_PMI={protocol} spawn {args:?}: {}",
                out.report()
            );
        }
    }
}
