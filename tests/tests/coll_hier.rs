//! The node-aware collectives (`core/src/coll/hier.rs`) on real multi-node jobs: "hosts" are
//! network namespaces ([`NetnsHosts`]), started with `stormrun --launch-agent 'ip netns exec'`,
//! so ranks of one host share memory (`sm`) and ranks of different hosts talk `tcp` over veth
//! links. The management network (`eth0`, the bridge) carries PMI only.
//!
//! - `coll.c --split` (every collective, blocking and non-blocking — many in flight at once, on
//!   two communicators — against local references, on world, a duplicate and a
//!   split in reverse rank order without world rank 1) on two hosts (2+2 and the uneven 3+1
//!   ranks by host, 2+2 round robin) and three hosts (2+1+2), with `coll_hier` on and off.
//! - The hierarchy is used: the bytes six ranks' allreduces of 1 MiB send over the link between
//!   two hosts, with three ranks per host. Flat, every rank's ring or recursive-doubling traffic
//!   that crosses the link counts; node-aware, only the two leaders exchange one vector.
//!
//! - The same collectives on the lightweight-kernel node build (`libstormpi_lwk.a`, both
//!   Portals transports), whose node layout comes from `STORMPI_NIDS`: no namespaces needed, so
//!   this one always runs.
//!
//! Needs root; without it (or kernel support for namespaces) each test prints `SKIPPED: ...`
//! and returns. The tests run one at a time, each job under stormrun's `--timeout`.

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use stormpi_tests::lwk::{node_program, LwkJob, Pml, Target};
use stormpi_tests::netns::{interface_bytes, NetnsHosts, Traffic};
use stormpi_tests::{c_extra_program, c_program, c_source, run_stormrun, Output};

/// Serialises the tests of this binary.
static SERIAL: Mutex<()> = Mutex::new(());

const MIB: u64 = 1 << 20;

/// A `--mca` parameter and its value.
type Mca = (&'static str, &'static str);

/// Keeps the data networks to themselves: the bridge (`eth0`) carries PMI only.
const NO_MGMT: Mca = ("btl_tcp_if_exclude", "eth0");

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
    hosts.stormrun(host_list, np, true, mca, program, args)
}

/// `host1:s1,host2:s2,...`.
fn host_list(hosts: &NetnsHosts, slots: &[u32]) -> String {
    hosts
        .names
        .iter()
        .zip(slots)
        .map(|(h, s)| format!("{h}:{s}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn tx(hosts: &NetnsHosts) -> Vec<HashMap<String, Traffic>> {
    hosts.names.iter().map(|ns| interface_bytes(ns)).collect()
}

/// Bytes host `h` sent through `iface` between two snapshots.
fn sent(
    before: &[HashMap<String, Traffic>],
    after: &[HashMap<String, Traffic>],
    h: usize,
    iface: &str,
) -> u64 {
    let was = before[h].get(iface).map_or(0, |t| t.tx_bytes);
    after[h]
        .get(iface)
        .map_or(0, |t| t.tx_bytes)
        .saturating_sub(was)
}

/// Runs `cmd`, asserts `OK <name>`, a clean stderr and no leftover shared memory.
#[track_caller]
fn run_ok(cmd: Command, name: &str, what: &str) -> Output {
    let out = run_stormrun(cmd);
    out.assert_ok(name);
    assert!(
        !out.stderr.contains("stormpi:") && !out.stderr.contains("stormrun:"),
        "{what}: unexpected messages on stderr\n{}",
        out.report()
    );
    eprintln!(
        "coll_hier: {what}: OK in {:.2} s",
        out.elapsed.as_secs_f64()
    );
    out
}

/// `coll.c`'s arguments: `--split` on a 64K-int large size, and `--free-pending` (a
/// communicator freed while an Iallreduce on it is pending).
fn split_args() -> Vec<&'static str> {
    vec!["--split", "--large", "65536", "--free-pending"]
}

/// Every collective of `coll.c` (world, duplicate, split; blocking and non-blocking) against its
/// references, with the node layer on and off, on two hosts with 2+2 and 3+1 ranks placed by host
/// and 2+2 round robin.
#[test]
fn collectives_on_two_hosts_even_and_uneven() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut hosts) = hosts("collectives_on_two_hosts_even_and_uneven", 2) else {
        return;
    };
    hosts.add_link("n1", 0, 1);
    let prog = c_program("coll");
    // [1, 1]: four ranks round robin (wrapping around), so nodes hold ranks 0, 2 and 1, 3.
    for slots in [[2, 2], [3, 1], [1, 1]] {
        let list = host_list(&hosts, &slots);
        for hier in ["on", "off"] {
            run_ok(
                stormrun_on(
                    &hosts,
                    &list,
                    4,
                    &[NO_MGMT, ("coll_hier", hier)],
                    &prog,
                    &split_args(),
                ),
                "coll",
                &format!("coll.c --split on {list}, coll_hier={hier}"),
            );
        }
    }
}

/// The same on three hosts joined pairwise (2+1+2 ranks), and with a flat algorithm forced
/// inside the levels (`coll_hier=on` with `coll_allreduce_algorithm=ring`,
/// `coll_bcast_algorithm=pipeline`) and over them (`auto`, where the forced algorithm runs
/// flat).
#[test]
fn collectives_on_three_hosts() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut hosts) = hosts("collectives_on_three_hosts", 3) else {
        return;
    };
    hosts.add_link("n1", 0, 1);
    hosts.add_link("n2", 1, 2);
    hosts.add_link("n3", 0, 2);
    let prog = c_program("coll");
    let list = host_list(&hosts, &[2, 1, 2]);
    // (parameters, coll.c groups: all, or one job per group)
    let runs: [(&[Mca], &[&str]); 4] = [
        (&[NO_MGMT, ("coll_hier", "on")], &[]),
        (&[NO_MGMT, ("coll_hier", "off")], &[]),
        (
            &[
                NO_MGMT,
                ("coll_hier", "on"),
                ("coll_allreduce_algorithm", "ring"),
                ("coll_bcast_algorithm", "pipeline"),
            ],
            &["allreduce", "bcast"],
        ),
        (
            &[
                NO_MGMT,
                ("coll_hier", "auto"),
                ("coll_allreduce_algorithm", "ring"),
            ],
            &["allreduce"],
        ),
    ];
    for (mca, groups) in runs {
        let all: &[&str] = &[""];
        for g in if groups.is_empty() { all } else { groups } {
            let mut args = split_args();
            if !g.is_empty() {
                args.extend(["--only", g]);
            }
            run_ok(
                stormrun_on(&hosts, &list, 5, mca, &prog, &args),
                "coll",
                &format!("coll.c {args:?} on {list}, {mca:?}"),
            );
        }
    }
}

/// Six ranks, three per host on two hosts, run 8 allreduces of 1 MiB; the bytes each host sent
/// over the link between them are counted with the node layer on and off, with ranks placed
/// by host (0-2 | 3-5) and round robin (0,2,4 | 1,3,5). Node-aware, only the leaders cross:
/// one vector each way per call (recursive doubling or reduce-scatter + allgather between two
/// leaders), about 1 MiB per host per call. Flat, the ring of six carries 2 x 5/6 MiB per edge
/// per call and two of its six edges cross the link when placed by host (1.67 MiB per host),
/// all six round robin (5 MiB per host).
#[test]
fn allreduce_crosses_the_link_once_per_node() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let Some(mut hosts) = hosts("allreduce_crosses_the_link_once_per_node", 2) else {
        return;
    };
    let n1 = hosts.add_link("n1", 0, 1);
    let prog = c_extra_program("allreduce_loop");
    let calls = 8u64;
    let vector = MIB;
    let mut per_call = HashMap::new();
    for (placement, slots) in [("by host", [3, 3]), ("round robin", [1, 1])] {
        let list = host_list(&hosts, &slots);
        for hier in ["on", "off"] {
            let before = tx(&hosts);
            let out = run_ok(
                stormrun_on(
                    &hosts,
                    &list,
                    6,
                    &[NO_MGMT, ("coll_hier", hier)],
                    &prog,
                    &[&calls.to_string(), &(vector / 4).to_string()],
                ),
                "allreduce_loop",
                &format!("allreduce_loop, 6 ranks {placement}, coll_hier={hier}"),
            );
            let after = tx(&hosts);
            let bytes: Vec<u64> = (0..2).map(|h| sent(&before, &after, h, &n1.name)).collect();
            let mib: Vec<f64> = bytes
                .iter()
                .map(|&b| b as f64 / (calls * vector) as f64)
                .collect();
            eprintln!(
                "coll_hier: {placement}, coll_hier={hier}: sent over {} per allreduce of 1 MiB: \
                 host1 {:.2} MiB, host2 {:.2} MiB",
                n1.name, mib[0], mib[1]
            );
            per_call.insert((placement, hier), (mib, out));
        }
        let (on, out_on) = &per_call[&(placement, "on")];
        let (off, _) = &per_call[&(placement, "off")];
        for (h, &mib) in on.iter().enumerate() {
            // One vector each way, plus TCP/IP and fragment headers.
            assert!(
                (0.95..1.15).contains(&mib),
                "{placement}: node-aware, host {} sent {mib:.2} MiB per call over {}, expected \
                 about 1\n{}",
                h + 1,
                n1.name,
                out_on.report()
            );
        }
        let (flat_min, ratio) = match placement {
            "by host" => (1.5, 1.4),
            _ => (4.5, 4.0),
        };
        for (h, (&flat, &aware)) in off.iter().zip(on).enumerate() {
            assert!(
                flat >= flat_min && flat >= ratio * aware,
                "{placement}: flat, host {} sent {flat:.2} MiB per call over {} (node-aware: \
                 {aware:.2}); expected at least {flat_min} and {ratio} times the node-aware figure",
                h + 1,
                n1.name,
            );
        }
    }
}

/// `coll.c --split` on the node build, five ranks, nodes named by `STORMPI_NIDS` as the
/// launcher of a real machine would: blocked and uneven (`0*2,7,3*2`: nodes of 2, 1 and 2
/// ranks, ids not in order) and round robin (`1,0,1,0,1`), over the Portals MTL (`cm`) and the
/// Portals BTL (`ob1`), with the node layer on and off.
#[test]
fn collectives_on_the_node_build() {
    let prog = node_program(&Target::host(), &c_source("coll"), &[]);
    for pml in [Pml::Cm, Pml::Ob1] {
        for nids in ["0*2,7,3*2", "1,0,1,0,1"] {
            for hier in ["on", "off"] {
                let mut job = LwkJob::new(5, pml).param("coll_hier", hier);
                job.env.push(("STORMPI_NIDS".into(), nids.into()));
                let out = job.run(&prog, &split_args());
                out.assert_ok("coll");
                eprintln!(
                    "coll_hier: node build, pml {}, STORMPI_NIDS={nids}, coll_hier={hier}: OK",
                    pml.name()
                );
            }
        }
    }
}
