//! Multi-host launch with network namespaces standing in for hosts: stormrun starts ranks inside
//! them with `--launch-agent 'ip netns exec'`, the ranks reach its PMI server over TCP across a
//! bridge, and `STORMPI_NODE` follows the host list.
//!
//! Needs root; without it (or without kernel support) each test prints `SKIPPED: ...` and
//! returns. The tests of this file run one at a time (they share the namespace names), each
//! with namespaces of its own that are removed however the test ends.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use stormpi_tests::netns::NetnsHosts;
use stormpi_tests::{artifact, run_stormrun, shm_files, stormrun, Output, JOB_TIMEOUT};

/// Serialises the tests of this binary: they use the same namespace names.
static SERIAL: Mutex<()> = Mutex::new(());

/// Two namespaces, or `None` after printing why the test is skipped.
fn two_hosts(test: &str) -> Option<NetnsHosts> {
    match NetnsHosts::create(2) {
        Ok(h) => Some(h),
        Err(why) => {
            eprintln!("\n*** SKIPPED: {test}: {why} ***\n");
            None
        }
    }
}

fn pmi_test_rank() -> PathBuf {
    artifact("pmi-test-rank")
}

/// `stormrun --host HOSTS --launch-agent 'ip netns exec' --pmi-address BRIDGE --timeout 60 ARGS`.
fn stormrun_on(hosts: &NetnsHosts, host_list: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(stormrun());
    cmd.args(["--host", host_list])
        .args(["--launch-agent", "ip netns exec"])
        .args(["--pmi-address", &hosts.bridge_addr])
        .args(["--timeout", &JOB_TIMEOUT.as_secs().to_string()])
        .args(args);
    cmd
}

/// Asserts that nothing runs in the namespaces any more (allowing a moment for the kernel to
/// finish reaping).
fn assert_namespaces_empty(hosts: &NetnsHosts, out: &Output) {
    for ns in &hosts.names {
        let mut left = NetnsHosts::pids_in(ns);
        for _ in 0..50 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
            left = NetnsHosts::pids_in(ns);
        }
        assert!(
            left.is_empty(),
            "processes {left:?} still run in {ns}\n{}",
            out.report()
        );
    }
}

/// Four ranks on two "hosts": each rank connects to stormrun's PMI server over TCP, publishes
/// its node, reads everyone's, checks `STORMPI_NODE`/`STORMPI_LOCAL_*` against them, and
/// exchanges values with every rank. Each rank also reports the network namespace it runs in.
#[test]
fn pmi_exchange_across_namespaces() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(hosts) = two_hosts("pmi_exchange_across_namespaces") else {
        return;
    };
    let (h1, h2) = (&hosts.names[0], &hosts.names[1]);
    let rank = pmi_test_rank();
    let list = format!("{h1}:2,{h2}:2");
    let out = run_stormrun(stormrun_on(
        &hosts,
        &list,
        &["-n", "4", rank.to_str().unwrap(), "nodes"],
    ));
    assert!(
        out.success() && out.leftover_shm.is_empty(),
        "{}",
        out.report()
    );
    for (r, ns) in [(0, h1), (1, h1), (2, h2), (3, h2)] {
        let line = format!(
            "rank {r}/4 node {ns} local {}/2 pmi port net:[{}]: nodes ok",
            r % 2,
            NetnsHosts::inode(ns)
        );
        assert!(out.has_line(&line), "missing `{line}`\n{}", out.report());
        let line = format!("rank {r}/4 appnum 0: exchange ok (1000-byte values)");
        assert!(out.has_line(&line), "missing `{line}`\n{}", out.report());
    }
    assert!(
        !out.stderr.contains("stormrun:"),
        "stormrun complained\n{}",
        out.report()
    );
    assert!(out.elapsed < Duration::from_secs(10), "{}", out.report());
    assert_namespaces_empty(&hosts, &out);
}

/// `--map-by node` deals ranks to the hosts in turn, and each remote rank is bound on its host by
/// stormrun's exec helper there (`--report-bindings` lines come from that host).
#[test]
fn map_by_node_and_remote_binding() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(hosts) = two_hosts("map_by_node_and_remote_binding") else {
        return;
    };
    let (h1, h2) = (&hosts.names[0], &hosts.names[1]);
    let rank = pmi_test_rank();
    let list = format!("{h1}:2,{h2}:2");
    let out = run_stormrun(stormrun_on(
        &hosts,
        &list,
        &[
            "-n",
            "4",
            "--map-by",
            "node",
            "--report-bindings",
            rank.to_str().unwrap(),
            "nodes",
        ],
    ));
    assert!(out.success(), "{}", out.report());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut cpus = Vec::new();
    for (r, ns, local) in [(0, h1, 0), (1, h2, 0), (2, h1, 1), (3, h2, 1)] {
        let line = format!(
            "rank {r}/4 node {ns} local {local}/2 pmi port net:[{}]: nodes ok",
            NetnsHosts::inode(ns)
        );
        assert!(out.has_line(&line), "missing `{line}`\n{}", out.report());
        let prefix = format!("stormrun: rank {r} on ");
        let report = out
            .stderr
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no binding report for rank {r}\n{}", out.report()));
        if cores >= 2 {
            let set = report
                .split_once("bound to cpus ")
                .and_then(|(_, rest)| rest.split(' ').next())
                .unwrap_or_else(|| panic!("rank {r} not bound: {report}"));
            cpus.push(set.to_string());
        } else {
            assert!(report.ends_with("not bound"), "rank {r}: {report}");
        }
    }
    if cores >= 2 {
        // The two ranks of a host on different cores.
        assert_ne!(cpus[0], cpus[2], "{}", out.report());
        assert_ne!(cpus[1], cpus[3], "{}", out.report());
    }
    assert_namespaces_empty(&hosts, &out);
}

/// `--wdir` and `--path` reach a remote rank through the exec helper on its host.
#[test]
fn remote_wdir_and_path() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(hosts) = two_hosts("remote_wdir_and_path") else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("stormpi-remote-wdir-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("stormpi-path-probe");
    std::fs::write(&script, "#!/bin/sh\necho probe in $(pwd)\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let d = dir.to_str().unwrap();
    let list = format!("{}:1", hosts.names[0]);
    let out = run_stormrun(stormrun_on(
        &hosts,
        &list,
        &["-n", "1", "--wdir", "/", "--path", d, "stormpi-path-probe"],
    ));
    assert!(out.success(), "{}", out.report());
    assert!(out.has_line("probe in /"), "{}", out.report());
    let out = run_stormrun(stormrun_on(
        &hosts,
        &list,
        &["-n", "1", "--wdir", "/nonexistent", "pwd"],
    ));
    assert!(!out.success(), "{}", out.report());
    assert!(
        out.stderr
            .contains("--wdir /nonexistent: not a directory on"),
        "{}",
        out.report()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_namespaces_empty(&hosts, &out);
}

/// Local and remote ranks in one job: `localhost` runs by fork/exec with PMI over its socket
/// (node: this machine's name), the namespaces through the agent with PMI over TCP; one
/// key-value space for all. MPMD contexts continue over the host list.
#[test]
fn local_and_remote_ranks_share_a_job() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(hosts) = two_hosts("local_and_remote_ranks_share_a_job") else {
        return;
    };
    let (h1, h2) = (&hosts.names[0], &hosts.names[1]);
    let rank = pmi_test_rank();
    let rank = rank.to_str().unwrap();
    let list = format!("localhost:1,{h1}:1,{h2}:1");
    let out = run_stormrun(stormrun_on(
        &hosts,
        &list,
        &["-n", "2", rank, "nodes", ":", "-n", "1", rank, "nodes"],
    ));
    assert!(out.success(), "{}", out.report());
    let here = std::fs::read_link("/proc/self/ns/net").unwrap();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let expect = [
        (
            0,
            hostname.trim().to_string(),
            "fd",
            here.to_string_lossy().into_owned(),
        ),
        (
            1,
            h1.clone(),
            "port",
            format!("net:[{}]", NetnsHosts::inode(h1)),
        ),
        (
            2,
            h2.clone(),
            "port",
            format!("net:[{}]", NetnsHosts::inode(h2)),
        ),
    ];
    for (r, node, via, netns) in expect {
        let line = format!("rank {r}/3 node {node} local 0/1 pmi {via} {netns}: nodes ok");
        assert!(out.has_line(&line), "missing `{line}`\n{}", out.report());
    }
    assert!(out.has_line("rank 2/3 appnum 1: exchange ok (1000-byte values)"));
    assert_namespaces_empty(&hosts, &out);
}

/// A remote rank exits 3 while the others sleep: stormrun names it and its host, exits 3 at
/// once, and nothing of the job is left running in the namespaces or in /dev/shm.
#[test]
fn remote_failure_ends_the_job() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(hosts) = two_hosts("remote_failure_ends_the_job") else {
        return;
    };
    let (h1, h2) = (&hosts.names[0], &hosts.names[1]);
    let rank = pmi_test_rank();
    let list = format!("{h1}:2,{h2}:2");
    let out = run_stormrun(stormrun_on(
        &hosts,
        &list,
        &[
            "-n",
            "4",
            rank.to_str().unwrap(),
            "fail",
            "3",
            "exit:3",
            "sleep",
        ],
    ));
    assert_eq!(out.code(), Some(3), "{}", out.report());
    out.assert_failed_with(&[
        &format!("stormrun: rank 3 on {h2} (pid "),
        "exited with status 3; job aborted",
    ]);
    let stormrun_lines = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("stormrun:"))
        .count();
    assert_eq!(stormrun_lines, 1, "{}", out.report());
    assert!(!out.stdout.contains("was not killed"), "{}", out.report());
    assert!(out.elapsed < Duration::from_secs(10), "{}", out.report());
    // Every rank had created its shared-memory file; the launcher removed them.
    let jobid = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("jobid="))
        .unwrap_or_else(|| panic!("no jobid line\n{}", out.report()));
    assert!(
        shm_files(&format!("stormpi-{jobid}-")).is_empty(),
        "{}",
        out.report()
    );
    assert_namespaces_empty(&hosts, &out);
}
