//! Real MPI jobs across "hosts" made of network namespaces: stormrun starts the ranks with
//! `--launch-agent 'ip netns exec'`, the ranks reach its PMI server over the bridge of
//! [`NetnsHosts`] (the management network, left out of the tcp BTL with
//! `btl_tcp_if_exclude eth0`), and their MPI traffic runs over veth pairs joining the hosts
//! directly ([`NetnsHosts::add_link`]), each a subnet of its own.
//!
//! Which network carried a job's data is read from the interfaces' byte counters inside the
//! namespaces (`/proc/net/dev`) before and after the job: the C programs move megabytes, while
//! an unused veth sees at most a few hundred bytes of IPv6 neighbour discovery.
//!
//! Needs root; without it (or without kernel support) each test prints `SKIPPED: ...` and
//! returns. The tests of this file run one at a time (a 4-rank job on a 2-core machine is
//! oversubscribed already), each with namespaces of its own that are removed however the test
//! ends, and every job runs under stormrun's `--timeout` and the test's own deadline.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use stormpi_bootstrap::auth::{Key, Nonce};

use stormpi_tests::netns::{
    in_netns, interface_bytes, socket_inodes, tcp_sockets, Link, NetnsHosts, Traffic, TCP_LISTEN,
};
use stormpi_tests::{
    c_extra_program, c_program, run_stormrun, scratch_subdir, Output, Proc, JOB_TIMEOUT,
};

/// Serialises the tests of this binary.
static SERIAL: Mutex<()> = Mutex::new(());

const MIB: u64 = 1 << 20;
/// Most bytes an interface may send in a job that is not meant to use it (IPv6 neighbour and
/// multicast-listener chatter of a fresh veth is a few hundred bytes; PMI over the management
/// network some kilobytes).
const IDLE_BYTES: u64 = 256 << 10;

/// Keeps the data networks to themselves: the bridge (`eth0`) carries PMI only.
const NO_MGMT: (&str, &str) = ("btl_tcp_if_exclude", "eth0");

/// `n` namespaces, or `None` after printing why the test is skipped.
fn hosts(test: &str, n: usize) -> Option<NetnsHosts> {
    NetnsHosts::create_or_skip(test, n)
}

/// A job on `hosts` (see [`NetnsHosts::stormrun`]).
fn stormrun_on(
    hosts: &NetnsHosts,
    host_list: &str,
    np: u32,
    mca: &[(&str, &str)],
    program: &Path,
    args: &[&str],
) -> Command {
    hosts.stormrun(host_list, np, false, mca, program, args)
}

/// `host1:SLOTS,host2:SLOTS,...`.
fn host_list(hosts: &NetnsHosts, slots: u32) -> String {
    hosts
        .names
        .iter()
        .map(|h| format!("{h}:{slots}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Every interface's counters in every namespace, host by host.
fn counters(hosts: &NetnsHosts) -> Vec<HashMap<String, Traffic>> {
    hosts.names.iter().map(|ns| interface_bytes(ns)).collect()
}

/// Bytes per (host, interface) sent between two snapshots.
struct Sent(Vec<HashMap<String, u64>>);

impl Sent {
    fn between(before: &[HashMap<String, Traffic>], after: &[HashMap<String, Traffic>]) -> Sent {
        Sent(
            before
                .iter()
                .zip(after)
                .map(|(b, a)| {
                    a.iter()
                        .map(|(name, t)| {
                            let was = b.get(name).map_or(0, |t| t.tx_bytes);
                            (name.clone(), t.tx_bytes.saturating_sub(was))
                        })
                        .collect()
                })
                .collect(),
        )
    }

    /// Bytes host `host` sent through `iface`.
    fn by(&self, host: usize, iface: &str) -> u64 {
        self.0[host].get(iface).copied().unwrap_or(0)
    }

    /// Asserts that host `host` sent at least `min` bytes through `iface`.
    #[track_caller]
    fn assert_at_least(&self, host: usize, iface: &str, min: u64, out: &Output) {
        let n = self.by(host, iface);
        assert!(
            n >= min,
            "host {} sent {n} bytes through {iface}, expected at least {min}; all: {:?}\n{}",
            host + 1,
            self.0,
            out.report()
        );
    }

    /// Asserts that host `host` sent (next to) nothing through `iface`.
    #[track_caller]
    fn assert_idle(&self, host: usize, iface: &str, out: &Output) {
        let n = self.by(host, iface);
        assert!(
            n < IDLE_BYTES,
            "host {} sent {n} bytes through {iface}, which the job was not to use; all: {:?}\n{}",
            host + 1,
            self.0,
            out.report()
        );
    }

    /// `host1 n1=12.3MiB eth0=0.0MiB ...`, for the log.
    fn summary(&self) -> String {
        let mut parts = Vec::new();
        for (h, m) in self.0.iter().enumerate() {
            let mut ifs: Vec<_> = m.iter().filter(|(_, &n)| n > 0).collect();
            ifs.sort();
            let ifs: Vec<String> = ifs
                .iter()
                .map(|(name, &n)| format!("{name}={:.1}MiB", n as f64 / MIB as f64))
                .collect();
            parts.push(format!("host{} {}", h + 1, ifs.join(" ")));
        }
        parts.join("; ")
    }
}

/// Runs a job and returns its output with the bytes each interface sent meanwhile. Asserts that
/// it printed `OK <name>` and exited 0 without leaving shared memory or processes behind.
fn run_ok(hosts: &NetnsHosts, what: &str, cmd: Command, name: &str) -> (Output, Sent) {
    let before = counters(hosts);
    let out = run_stormrun(cmd);
    let sent = Sent::between(&before, &counters(hosts));
    out.assert_ok(name);
    assert_no_complaints(&out);
    assert_namespaces_empty(hosts, &out);
    eprintln!(
        "multihost_mpi: {what}: OK in {:.2} s; sent: {}",
        out.elapsed.as_secs_f64(),
        sent.summary()
    );
    (out, sent)
}

/// Asserts that neither the library nor stormrun said anything on stderr.
#[track_caller]
fn assert_no_complaints(out: &Output) {
    assert!(
        !out.stderr.contains("stormpi:") && !out.stderr.contains("stormrun:"),
        "unexpected messages on stderr\n{}",
        out.report()
    );
}

/// Asserts that nothing runs in the namespaces any more (allowing a moment for the kernel to
/// finish reaping).
#[track_caller]
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

/// Two hosts joined by one veth pair (`n1`), two ranks on each. With `--mca btl tcp,self` every
/// pair of ranks talks TCP — across the link, and inside a host over the host's own `n1`
/// address (which the kernel carries over `lo`); `allpairs` sends every size from 0 B to 8 MiB
/// between all of them (the sizes around the 4–64 KiB protocol limits included), and `ring`
/// passes a token and a 64 KiB buffer around. Then the same with the default BTLs: `sm` between
/// the two ranks of a host, `tcp` between hosts — one rank reaches its peers over different BTL
/// sets. The counters show the split: with `tcp,self` the hosts' `lo` carried megabytes, with
/// the defaults next to nothing; `n1` carried the cross-host megabytes both times.
#[test]
fn every_message_size_across_two_hosts() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut hosts) = hosts("every_message_size_across_two_hosts", 2) else {
        return;
    };
    let n1 = hosts.add_link("n1", 0, 1);
    let list = host_list(&hosts, 2);
    let allpairs = c_program("allpairs");
    let ring = c_program("ring");
    // Each rank sends every size to each of the two ranks on the other host at least four times
    // (four ways of posting): 8 MiB x 4 x 2 peers x 2 ranks per host.
    let cross_host = 128 * MIB;
    for (btls, mca) in [
        ("tcp,self", vec![("btl", "tcp,self"), NO_MGMT]),
        ("default BTLs", vec![NO_MGMT]),
    ] {
        let (out, sent) = run_ok(
            &hosts,
            &format!("allpairs, 4 ranks on 2 hosts, {btls}"),
            stormrun_on(&hosts, &list, 4, &mca, &allpairs, &[]),
            "allpairs",
        );
        for h in 0..2 {
            sent.assert_at_least(h, &n1.name, cross_host, &out);
            sent.assert_idle(h, "eth0", &out);
            if btls == "tcp,self" {
                // The two ranks of a host exchanged 8 MiB x 4 each way over TCP.
                sent.assert_at_least(h, "lo", 64 * MIB, &out);
            } else {
                sent.assert_idle(h, "lo", &out);
            }
        }
        let (out, sent) = run_ok(
            &hosts,
            &format!("ring, 4 ranks on 2 hosts, {btls}"),
            stormrun_on(&hosts, &list, 4, &mca, &ring, &[]),
            "ring",
        );
        // The 64 KiB token crossed between the hosts twice per lap of the reverse ring.
        for h in 0..2 {
            sent.assert_at_least(h, &n1.name, 64 << 10, &out);
        }
    }
}

/// Three hosts, every pair joined by a network of its own: host 1 and 2 by `n1`, 2 and 3 by
/// `n2`, 1 and 3 by `n3` (three subnets), one rank per host — so each rank reaches each peer
/// through another interface, and each tcp module of a rank reaches exactly one peer.
/// `allpairs` (0 B .. 8 MiB) and `collectives` (every root, every type and operation) pass, and
/// every link carried megabytes in both directions while the management network carried none of
/// it.
#[test]
fn every_pair_on_a_different_network() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut hosts) = hosts("every_pair_on_a_different_network", 3) else {
        return;
    };
    let links: Vec<Link> = vec![
        hosts.add_link("n1", 0, 1),
        hosts.add_link("n2", 1, 2),
        hosts.add_link("n3", 0, 2),
    ];
    let list = host_list(&hosts, 1);
    let (out, sent) = run_ok(
        &hosts,
        "allpairs, 3 hosts pairwise on 3 networks",
        stormrun_on(&hosts, &list, 3, &[NO_MGMT], &c_program("allpairs"), &[]),
        "allpairs",
    );
    for l in &links {
        for h in l.hosts {
            // 8 MiB four times, at least, to the one peer at the other end.
            sent.assert_at_least(h, &l.name, 32 * MIB, &out);
        }
    }
    for h in 0..3 {
        sent.assert_idle(h, "eth0", &out);
    }
    let (out, sent) = run_ok(
        &hosts,
        "collectives, 3 hosts pairwise on 3 networks",
        stormrun_on(&hosts, &list, 3, &[NO_MGMT], &c_program("collectives"), &[]),
        "collectives",
    );
    for h in 0..3 {
        sent.assert_idle(h, "eth0", &out);
    }
    let used: usize = links
        .iter()
        .map(|l| usize::from(l.hosts.iter().any(|&h| sent.by(h, &l.name) > IDLE_BYTES)))
        .sum();
    eprintln!("multihost_mpi: collectives used {used} of the 3 links");
}

/// Two hosts joined by two veth pairs on two subnets (`n1`, `n2`), two ranks on each, default
/// BTLs. `btl_tcp_if_include n1` (by name) puts all cross-host traffic on `n1`;
/// `btl_tcp_if_include <n2's subnet>` (by CIDR) puts it on `n2`; with both networks (only the
/// management network excluded) each rank has two tcp modules to each remote peer, the job
/// still passes, and both networks carry a good share of the data (large messages are striped
/// over both). In the one-network runs the other network must stay idle.
#[test]
fn two_networks_between_two_hosts() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut hosts) = hosts("two_networks_between_two_hosts", 2) else {
        return;
    };
    let n1 = hosts.add_link("n1", 0, 1);
    let n2 = hosts.add_link("n2", 0, 1);
    let list = host_list(&hosts, 2);
    let allpairs = c_program("allpairs");
    // Cross-host traffic of allpairs at 4 ranks, per host (see every_message_size_across_...).
    let cross_host = 128 * MIB;
    for (what, include, used, idle) in [
        ("n1 by name", n1.name.as_str(), Some(&n1), Some(&n2)),
        ("n2 by CIDR", n2.cidr.as_str(), Some(&n2), Some(&n1)),
        ("both", "", None, None),
    ] {
        let mca: Vec<(&str, &str)> = if include.is_empty() {
            vec![NO_MGMT]
        } else {
            vec![("btl_tcp_if_include", include)]
        };
        let (out, sent) = run_ok(
            &hosts,
            &format!("allpairs, 2 hosts joined twice, {what}"),
            stormrun_on(&hosts, &list, 4, &mca, &allpairs, &[]),
            "allpairs",
        );
        for h in 0..2 {
            sent.assert_idle(h, "eth0", &out);
            match (used, idle) {
                (Some(used), Some(idle)) => {
                    sent.assert_at_least(h, &used.name, cross_host, &out);
                    sent.assert_idle(h, &idle.name, &out);
                }
                _ => {
                    // Rendezvous fragments are striped over both modules in turn.
                    let total = sent.by(h, &n1.name) + sent.by(h, &n2.name);
                    assert!(
                        total >= cross_host,
                        "host {} sent {total} bytes over n1 and n2, expected at least \
                         {cross_host}\n{}",
                        h + 1,
                        out.report()
                    );
                    sent.assert_at_least(h, &n1.name, cross_host / 8, &out);
                    sent.assert_at_least(h, &n2.name, cross_host / 8, &out);
                }
            }
        }
    }
}

/// A handshake "from rank 0 to rank `to`" answering the challenge `nonce` with a proof made with
/// a secret that is not the job's.
fn wrong_secret_handshake(to: u32, nonce: Nonce) -> Vec<u8> {
    use mpi::tcp::wire::{Handshake, CONNECT};
    Handshake {
        nonce: Nonce([0x11; 16]),
        from: 0,
        to,
        max_frag: 512 << 10,
        follows: false,
        proof: [0; 32],
    }
    .sign(&Key::from_bytes([0x5a; 32]), CONNECT, &nonce)
    .to_bytes()
    .to_vec()
}

/// What a stray connection did: where it came from, and how the rank ended it.
#[derive(Debug)]
struct Stray {
    from: SocketAddr,
    closed_after: Duration,
    ended_by: String,
}

/// Connects to `to` (in the calling thread's namespace), reads the rank's challenge, sends what
/// `answer` makes of its nonce, and waits up to 10 s for the other side to close the connection.
///
/// # Panics
/// If it cannot connect, gets no challenge, or the connection stays open.
fn stray_connection(to: SocketAddrV4, answer: impl Fn(Nonce) -> Vec<u8>) -> Stray {
    use mpi::tcp::wire::{Challenge, CHALLENGE_LEN};
    let mut s = TcpStream::connect_timeout(&to.into(), Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connecting to {to}: {e}"));
    let from = s.local_addr().unwrap();
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut challenge = [0u8; CHALLENGE_LEN];
    s.read_exact(&mut challenge)
        .unwrap_or_else(|e| panic!("no challenge from {to}: {e}"));
    let nonce = Challenge::parse(&challenge)
        .unwrap_or_else(|e| panic!("{to} sent a bad challenge: {e}"))
        .nonce;
    s.write_all(&answer(nonce))
        .unwrap_or_else(|e| panic!("writing to {to}: {e}"));
    let mut buf = [0u8; 256];
    let ended_by = loop {
        match s.read(&mut buf) {
            Ok(0) => break "end of stream".to_string(),
            Ok(n) => panic!(
                "{to} answered a stray connection with {n} bytes: {:?}",
                &buf[..n]
            ),
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                panic!("{to} kept a stray connection from {from} open for 10 s")
            }
            Err(e) => break format!("{e}"),
        }
    };
    Stray {
        from,
        closed_after: t0.elapsed(),
        ended_by,
    }
}

/// The `READY <rank> <pid>` lines of busy_until, by rank, once all `np` are there.
fn ready_pids(stdout: &str, np: usize) -> Option<Vec<i32>> {
    let mut pids = vec![None; np];
    for l in stdout.lines() {
        let mut w = l.split_whitespace();
        if w.next() != Some("READY") {
            continue;
        }
        let r: usize = w.next()?.parse().ok()?;
        let pid: i32 = w.next()?.parse().ok()?;
        *pids.get_mut(r)? = Some(pid);
    }
    pids.into_iter().collect()
}

/// While a job runs (`busy_until`: two ranks on each of two hosts joined by `n1`, default BTLs,
/// sending 64 KiB + 1 around the ring until the test lets it finish), strangers connect to every
/// rank's tcp listening port (found in the namespace's `/proc/net/tcp`, matched to the rank by
/// its sockets' inodes): from host 1 (the same host for ranks 0 and 1, across `n1` for ranks 2
/// and 3) with a well-formed handshake carrying a wrong secret, from host 2 with plain garbage
/// (an HTTP request). Each rank must close each such connection without answering, log one
/// line naming the connection's address and why, and the job must go on and end with `OK`.
#[test]
fn stray_connections_are_rejected_while_a_job_runs() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut hosts) = hosts("stray_connections_are_rejected_while_a_job_runs", 2) else {
        return;
    };
    let n1 = hosts.add_link("n1", 0, 1);
    let list = host_list(&hosts, 2);
    let go = scratch_subdir("stray").join("go");
    let go_arg = go.to_str().unwrap().to_string();
    let prog = c_extra_program("busy_until");
    let cmd = stormrun_on(
        &hosts,
        &list,
        4,
        &[NO_MGMT],
        &prog,
        &[&go_arg, "65537", "40"],
    );
    let proc = Proc::spawn(cmd, JOB_TIMEOUT + Duration::from_secs(20));
    let started = Instant::now();
    let np = 4;
    assert!(
        proc.wait_for_stdout(Duration::from_secs(30), |s| ready_pids(s, np).is_some()),
        "the ranks did not all report READY\nstdout:\n{}\nstderr:\n{}",
        proc.stdout(),
        proc.stderr()
    );
    let pids = ready_pids(&proc.stdout(), np).unwrap();
    // Ranks 0 and 1 run on host 1, 2 and 3 on host 2.
    let host_of = |rank: usize| rank / 2;
    let mut ports = Vec::new();
    for (rank, &pid) in pids.iter().enumerate() {
        let h = host_of(rank);
        let addr = n1.addr_of(h).unwrap();
        let mine = socket_inodes(pid);
        let listening: Vec<SocketAddrV4> = tcp_sockets(&hosts.names[h])
            .into_iter()
            .filter(|s| s.state == TCP_LISTEN && mine.contains(&s.inode))
            .map(|s| s.local)
            .collect();
        assert!(
            listening.len() == 1 && *listening[0].ip() == addr,
            "rank {rank} (pid {pid}) listens on {listening:?}, expected one port on {addr} \
             (its n1 address)\nstderr:\n{}",
            proc.stderr()
        );
        ports.push(listening[0]);
    }
    // (line expected on stderr, how the connection ended)
    let mut expected: Vec<(String, Stray)> = Vec::new();
    let strays: Vec<(usize, Stray)> = in_netns(&hosts.names[0], || {
        (0..np)
            .map(|r| {
                (
                    r,
                    stray_connection(ports[r], |n| wrong_secret_handshake(r as u32, n)),
                )
            })
            .collect()
    });
    for (r, s) in strays {
        let line = format!(
            "stormpi: tcp (rank {r}, n1): rejected a connection from {}: wrong proof of the job secret (a stranger, or a \
             replayed handshake)",
            s.from
        );
        expected.push((line, s));
    }
    let strays: Vec<(usize, Stray)> = in_netns(&hosts.names[1], || {
        (0..np)
            .map(|r| {
                (
                    r,
                    stray_connection(ports[r], |_| b"GET / HTTP/1.0\r\n\r\n".to_vec()),
                )
            })
            .collect()
    });
    for (r, s) in strays {
        let line = format!(
            "stormpi: tcp (rank {r}, n1): rejected a connection from {}: bad magic (not a \
             stormpi connection)",
            s.from
        );
        expected.push((line, s));
    }
    // The lines come through stormrun's forwarding; give them a moment.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline
        && !expected
            .iter()
            .all(|(l, _)| proc.stderr().lines().any(|x| x == l))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let strays_done = started.elapsed();
    std::fs::write(&go, b"").unwrap();
    let out = proc.wait();
    out.assert_ok("busy_until");
    assert!(out.leftover_shm.is_empty(), "{}", out.report());
    for (line, s) in &expected {
        let n = out.stderr.lines().filter(|l| l == line).count();
        assert_eq!(
            n,
            1,
            "expected the line `{line}` once ({s:?})\n{}",
            out.report()
        );
    }
    let others: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| !expected.iter().any(|(e, _)| e == l))
        .collect();
    assert!(
        others.is_empty(),
        "other lines on stderr: {others:?}\n{}",
        out.report()
    );
    let iterations = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("iterations "))
        .unwrap_or_else(|| panic!("no iterations line\n{}", out.report()));
    assert_namespaces_empty(&hosts, &out);
    let slowest = expected.iter().map(|(_, s)| s.closed_after).max().unwrap();
    eprintln!(
        "multihost_mpi: busy_until with 8 stray connections: OK in {:.2} s ({iterations} \
         iterations; strays done after {:.2} s, each closed within {:.0} ms: {:?})",
        out.elapsed.as_secs_f64(),
        strays_done.as_secs_f64(),
        slowest.as_secs_f64() * 1000.0,
        expected
            .iter()
            .map(|(_, s)| s.ended_by.as_str())
            .collect::<Vec<_>>()
    );
}

/// A network that fails under a running job ends the job with a message, not a hang: two
/// hosts joined by `n1`, one rank on each sending 64 KiB + 1 back and forth (`busy_until`), with
/// `btl_tcp_user_timeout 2000`; then host 2's end of `n1` goes down. Data sent across stays
/// unacknowledged and the connection times out after 2 s (or host 2 finds the network
/// unreachable at once); the tcp BTL names the connection, the engine ends the job naming the
/// peer, and stormrun exits non-zero long before its timeout.
#[test]
fn a_network_failing_under_a_job_ends_it_with_a_message() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut hosts) = hosts("a_network_failing_under_a_job_ends_it_with_a_message", 2) else {
        return;
    };
    hosts.add_link("n1", 0, 1);
    let list = host_list(&hosts, 1);
    let go = scratch_subdir("netfail").join("go");
    let go_arg = go.to_str().unwrap().to_string();
    let prog = c_extra_program("busy_until");
    let cmd = stormrun_on(
        &hosts,
        &list,
        2,
        &[NO_MGMT, ("btl_tcp_user_timeout", "2000")],
        &prog,
        &[&go_arg, "65537", "50"],
    );
    let proc = Proc::spawn(cmd, JOB_TIMEOUT + Duration::from_secs(20));
    assert!(
        proc.wait_for_stdout(Duration::from_secs(30), |s| ready_pids(s, 2).is_some()),
        "the ranks did not both report READY\nstdout:\n{}\nstderr:\n{}",
        proc.stdout(),
        proc.stderr()
    );
    // Let the ranks connect and exchange a while first.
    std::thread::sleep(Duration::from_millis(500));
    let down = Instant::now();
    let out = stormpi_tests::netns::ip(&["-n", &hosts.names[1], "link", "set", "n1", "down"]);
    assert!(out.success(), "ip link set down failed\n{}", out.report());
    let out = proc.wait();
    let after = down.elapsed();
    assert!(
        !out.status.success() && !out.timed_out,
        "the job should have failed on its own\n{}",
        out.report()
    );
    assert!(
        after < Duration::from_secs(30),
        "the job took {after:?} to end after the network failed\n{}",
        out.report()
    );
    assert!(
        out.stderr.lines().any(|l| l.contains("tcp (rank")
            && l.contains("connection with rank")
            && (l.contains("timed out") || l.contains("unreachable"))),
        "no line from the tcp BTL naming the failed connection\n{}",
        out.report()
    );
    assert!(
        out.stderr
            .lines()
            .any(|l| l.contains("the network to rank") && l.contains("failed")),
        "no line naming the unreachable peer\n{}",
        out.report()
    );
    assert!(out.leftover_shm.is_empty(), "{}", out.report());
    assert_namespaces_empty(&hosts, &out);
    eprintln!(
        "multihost_mpi: network failure ended the job {:.1} s after the link went down",
        after.as_secs_f64()
    );
}
