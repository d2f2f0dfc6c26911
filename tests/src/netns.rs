//! Network namespaces as stand-in hosts for multi-host tests.
//!
//! [`NetnsHosts::create`] makes `n` namespaces `stormpi-h<i>-<pid>` (i from 1), each with `lo`
//! up and an `eth0` that is one end of a veth pair; the other ends (`stv<i>-<pid>`) are enslaved
//! to a bridge `stbr<pid>` in the root namespace. The bridge has `10.<x>.<y>.1/24` (x and y from
//! the pid, so concurrent test processes get different subnets), host i has `10.<x>.<y>.<i+1>`.
//! Interface names stay within Linux's 15 characters for any pid.
//!
//! Everything is removed when the value is dropped — on success, on a failed assertion, on a
//! panic — after the processes still running inside the namespaces are killed. Leftovers of
//! earlier test processes that died without cleaning up (their pid no longer runs) are removed
//! before anything is created.
//!
//! Creating namespaces needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and kernel support; when
//! `ip netns add` is refused, [`NetnsHosts::create`] returns the reason, and the test says
//! `SKIPPED` and returns.

use std::os::unix::fs::MetadataExt;
use std::process::Command;
use std::time::Duration;

use crate::{is_alive, run, Output};

/// Name prefix of every namespace these helpers create.
pub const PREFIX: &str = "stormpi-h";
/// Name prefix of the bridges.
const BRIDGE_PREFIX: &str = "stbr";
/// Longest any `ip` command may take.
const IP_TIMEOUT: Duration = Duration::from_secs(10);

/// Network namespaces connected through a bridge; see the module documentation.
#[derive(Debug)]
pub struct NetnsHosts {
    /// The namespaces (the hosts' names), in order.
    pub names: Vec<String>,
    /// Each namespace's address on the bridge's subnet.
    pub addrs: Vec<String>,
    /// The bridge's address in the root namespace (where the launcher runs).
    pub bridge_addr: String,
    bridge: String,
}

/// Runs `ip ARGS` (under a deadline); returns its output.
pub fn ip(args: &[&str]) -> Output {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    run(cmd, IP_TIMEOUT)
}

/// Runs `ip ARGS` and panics (with the output) if it fails.
#[track_caller]
fn ip_ok(args: &[&str]) {
    let out = ip(args);
    assert!(out.success(), "ip {args:?} failed\n{}", out.report());
}

impl NetnsHosts {
    /// Creates `n` connected namespaces, or says why it cannot (no root, no kernel support, no
    /// `ip`): the caller skips its test then.
    ///
    /// # Panics
    /// If creation fails after the first namespace was made (something is broken, not merely
    /// unsupported); what was made is removed first.
    pub fn create(n: usize) -> Result<NetnsHosts, String> {
        assert!((1..=200).contains(&n));
        if !crate::in_path("ip") && !std::path::Path::new("/usr/sbin/ip").exists() {
            return Err("the `ip` command (iproute2) is not installed".into());
        }
        remove_leftovers();
        let pid = std::process::id();
        let subnet = format!("10.{}.{}", 64 + (pid / 256) % 128, pid % 256);
        let mut hosts = NetnsHosts {
            names: Vec::new(),
            addrs: Vec::new(),
            bridge_addr: format!("{subnet}.1"),
            bridge: format!("{BRIDGE_PREFIX}{pid}"),
        };
        // The first namespace tells whether we may do this at all.
        let first = format!("{PREFIX}1-{pid}");
        let out = ip(&["netns", "add", &first]);
        if !out.success() {
            return Err(format!(
                "`ip netns add {first}` was refused (needs root and network namespace support): {}",
                out.stderr.trim()
            ));
        }
        hosts.names.push(first);
        for i in 2..=n {
            let name = format!("{PREFIX}{i}-{pid}");
            ip_ok(&["netns", "add", &name]);
            hosts.names.push(name);
        }
        // From here on, a failure panics and Drop removes everything.
        let bridge = hosts.bridge.clone();
        ip_ok(&["link", "add", &bridge, "type", "bridge"]);
        ip_ok(&[
            "addr",
            "add",
            &format!("{}/24", hosts.bridge_addr),
            "dev",
            &bridge,
        ]);
        ip_ok(&["link", "set", &bridge, "up"]);
        for (i, ns) in hosts.names.clone().iter().enumerate() {
            let veth = format!("stv{}-{pid}", i + 1);
            let addr = format!("{subnet}.{}", i + 2);
            ip_ok(&[
                "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
            ]);
            ip_ok(&["link", "set", &veth, "master", &bridge, "up"]);
            ip_ok(&[
                "-n",
                ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ]);
            ip_ok(&["-n", ns, "link", "set", "eth0", "up"]);
            ip_ok(&["-n", ns, "link", "set", "lo", "up"]);
            hosts.addrs.push(addr);
        }
        Ok(hosts)
    }

    /// The processes running in namespace `ns` now.
    pub fn pids_in(ns: &str) -> Vec<i32> {
        ip(&["netns", "pids", ns])
            .stdout
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// The inode of namespace `ns` (what `readlink /proc/<pid>/ns/net` shows as `net:[INODE]`
    /// for a process inside it).
    pub fn inode(ns: &str) -> u64 {
        std::fs::metadata(format!("/run/netns/{ns}"))
            .unwrap_or_else(|e| panic!("/run/netns/{ns}: {e}"))
            .ino()
    }
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        for ns in &self.names {
            remove_namespace(ns);
        }
        // The veth pairs went with their namespace ends; the bridge is ours to remove.
        let _ = ip(&["link", "del", &self.bridge]);
    }
}

/// Kills what runs in `ns` and deletes it (which deletes the interfaces inside it).
fn remove_namespace(ns: &str) {
    for pid in NetnsHosts::pids_in(ns) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let _ = ip(&["netns", "del", ns]);
}

/// The pid in a name `<prefix><digits>-<pid>` or `<prefix><pid>`.
fn owner_pid(name: &str, prefix: &str, with_index: bool) -> Option<i32> {
    let rest = name.strip_prefix(prefix)?;
    let pid = if with_index {
        let (index, pid) = rest.split_once('-')?;
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        pid
    } else {
        rest
    };
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok()
}

/// Removes namespaces and bridges of test processes that no longer run.
pub fn remove_leftovers() {
    let dead = |pid: i32| pid as u32 != std::process::id() && !is_alive(pid);
    for line in ip(&["netns", "list"]).stdout.lines() {
        let Some(ns) = line.split_whitespace().next() else {
            continue;
        };
        if owner_pid(ns, PREFIX, true).is_some_and(dead) {
            remove_namespace(ns);
        }
    }
    for line in ip(&["-o", "link", "show", "type", "bridge"]).stdout.lines() {
        // `7: stbr123: <BROADCAST,...`
        let Some(name) = line.split(':').nth(1).map(str::trim) else {
            continue;
        };
        if owner_pid(name, BRIDGE_PREFIX, false).is_some_and(dead) {
            let _ = ip(&["link", "del", name]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_parsed_from_names() {
        assert_eq!(owner_pid("stormpi-h1-4242", PREFIX, true), Some(4242));
        assert_eq!(owner_pid("stormpi-h12-7", PREFIX, true), Some(7));
        assert_eq!(owner_pid("stormpi-hx-7", PREFIX, true), None);
        assert_eq!(owner_pid("stormpi-h1-", PREFIX, true), None);
        assert_eq!(owner_pid("other-h1-7", PREFIX, true), None);
        assert_eq!(owner_pid("stbr99", BRIDGE_PREFIX, false), Some(99));
        assert_eq!(owner_pid("stbr9x", BRIDGE_PREFIX, false), None);
    }
}
