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
//!
//! Beyond the bridge (which carries the launcher's PMI traffic, like a management network),
//! [`NetnsHosts::add_link`] joins two hosts directly by a veth pair with a subnet of its own, so
//! a test can build any topology of networks between the hosts. Both ends live inside the
//! namespaces and go away with them. To look inside a namespace from the test —
//! [`in_netns`] (run code on a thread that entered it: its sockets belong there),
//! [`interface_bytes`] (the byte counters of its interfaces, `/proc/net/dev`) and
//! [`tcp_sockets`] (its TCP sockets, `/proc/net/tcp`), with [`socket_inodes`] to tell which
//! process holds which socket.

use std::collections::{HashMap, HashSet};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
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
    /// The direct links between hosts made by [`NetnsHosts::add_link`], in order.
    pub links: Vec<Link>,
    bridge: String,
    /// The root namespace's ends of the hosts' bridge ports.
    veths: Vec<String>,
}

/// A network of its own between two hosts: a veth pair whose two ends have the same name, one in
/// each namespace, with `<subnet>.1/24` on the first host's end and `<subnet>.2/24` on the
/// second's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// The interface name at both ends.
    pub name: String,
    /// The two hosts (indices into [`NetnsHosts::names`]).
    pub hosts: [usize; 2],
    /// Their addresses on the link, in the same order.
    pub addrs: [Ipv4Addr; 2],
    /// The link's subnet as CIDR (`192.168.K.0/24`), e.g. for `btl_tcp_if_include`.
    pub cidr: String,
}

impl Link {
    /// The address of host `host` on this link, if it is one of its ends.
    pub fn addr_of(&self, host: usize) -> Option<Ipv4Addr> {
        self.hosts
            .iter()
            .position(|&h| h == host)
            .map(|i| self.addrs[i])
    }
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
    /// `n` namespaces, or `None` after printing loudly why `test` is skipped.
    pub fn create_or_skip(test: &str, n: usize) -> Option<NetnsHosts> {
        match NetnsHosts::create(n) {
            Ok(h) => Some(h),
            Err(why) => {
                eprintln!("\n*** SKIPPED: {test}: {why} ***\n");
                None
            }
        }
    }

    /// `stormrun --host LIST --launch-agent 'ip netns exec' --pmi-address BRIDGE --timeout 60
    /// [--oversubscribe] -n NP [--mca K V]... PROGRAM ARGS`.
    pub fn stormrun(
        &self,
        host_list: &str,
        np: u32,
        oversubscribe: bool,
        mca: &[(&str, &str)],
        program: &std::path::Path,
        args: &[&str],
    ) -> Command {
        let mut cmd = Command::new(crate::stormrun());
        cmd.args(["--host", host_list])
            .args(["--launch-agent", "ip netns exec"])
            .args(["--pmi-address", &self.bridge_addr])
            .args(["--timeout", &crate::JOB_TIMEOUT.as_secs().to_string()]);
        if oversubscribe {
            cmd.arg("--oversubscribe");
        }
        cmd.args(["-n", &np.to_string()]);
        for (k, v) in mca {
            cmd.args(["--mca", k, v]);
        }
        cmd.arg(program).args(args);
        cmd
    }

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
            links: Vec::new(),
            bridge: format!("{BRIDGE_PREFIX}{pid}"),
            veths: Vec::new(),
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
            hosts.veths.push(veth.clone());
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

    /// Joins hosts `a` and `b` (indices into `names`) by a veth pair named `name` at both ends
    /// (at most 15 characters, not `lo` or `eth0`), on a subnet of its own: the K-th link made
    /// gets `192.168.K.0/24` (K from 1), which nothing else in the namespaces uses (the bridge's
    /// subnet is a /24 between 10.64.0.0 and 10.191.255.255). Both ends are up when this
    /// returns.
    ///
    /// # Panics
    /// If `ip` fails, or on bad arguments; [`Drop`] still removes everything.
    pub fn add_link(&mut self, name: &str, a: usize, b: usize) -> Link {
        assert!(a != b && a < self.names.len() && b < self.names.len());
        assert!(
            !name.is_empty() && name.len() <= 15 && name != "lo" && name != "eth0",
            "bad link name {name:?}"
        );
        assert!(
            self.links
                .iter()
                .all(|l| l.name != name || !l.hosts.contains(&a) && !l.hosts.contains(&b)),
            "a host has an interface {name} already"
        );
        let k = self.links.len() + 1;
        assert!(k < 255, "too many links");
        let (na, nb) = (self.names[a].clone(), self.names[b].clone());
        // Both ends are created inside the namespaces, so they vanish with them.
        ip_ok(&[
            "link", "add", name, "netns", &na, "type", "veth", "peer", "name", name, "netns", &nb,
        ]);
        let addrs = [
            Ipv4Addr::new(192, 168, k as u8, 1),
            Ipv4Addr::new(192, 168, k as u8, 2),
        ];
        for (ns, addr) in [(&na, addrs[0]), (&nb, addrs[1])] {
            ip_ok(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", name]);
            ip_ok(&["-n", ns, "link", "set", name, "up"]);
        }
        let link = Link {
            name: name.to_string(),
            hosts: [a, b],
            addrs,
            cidr: format!("192.168.{k}.0/24"),
        };
        self.links.push(link.clone());
        link
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

/// Runs `f` on a thread of its own that has entered the network namespace `ns` (one of
/// `/run/netns/`), and returns what `f` returns. Sockets `f` creates belong to `ns`, and
/// `/proc/thread-self/net/` describes `ns`; the other threads of the process stay where they are.
///
/// # Panics
/// If the namespace cannot be entered, or when `f` panics (with its panic).
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::scope(|s| {
        s.spawn(move || {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns with a descriptor we own; entering a network namespace changes only
            // the calling thread, which ends when `f` returns.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(
                rc,
                0,
                "setns({path}, CLONE_NEWNET): {}",
                std::io::Error::last_os_error()
            );
            f()
        })
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// Bytes an interface has received and sent since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Received bytes.
    pub rx_bytes: u64,
    /// Sent bytes.
    pub tx_bytes: u64,
}

/// The byte counters of every interface in namespace `ns`, by name.
pub fn interface_bytes(ns: &str) -> HashMap<String, Traffic> {
    let text = in_netns(ns, || std::fs::read_to_string("/proc/thread-self/net/dev"))
        .unwrap_or_else(|e| panic!("/proc/net/dev of {ns}: {e}"));
    parse_net_dev(&text)
}

/// Reads `/proc/net/dev`: two header lines, then `name: rx_bytes rx_packets ... (8 receive
/// fields) tx_bytes ...`.
fn parse_net_dev(text: &str) -> HashMap<String, Traffic> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let f: Vec<u64> = rest
                .split_whitespace()
                .map(|w| w.parse().ok())
                .collect::<Option<_>>()?;
            Some((
                name.trim().to_string(),
                Traffic {
                    rx_bytes: *f.first()?,
                    tx_bytes: *f.get(8)?,
                },
            ))
        })
        .collect()
}

/// `st` of a listening socket in `/proc/net/tcp`.
pub const TCP_LISTEN: u8 = 0x0a;
/// `st` of an established connection.
pub const TCP_ESTABLISHED: u8 = 0x01;

/// One IPv4 TCP socket of a namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSocket {
    /// Local address.
    pub local: SocketAddrV4,
    /// Remote address (`0.0.0.0:0` for a listener).
    pub remote: SocketAddrV4,
    /// The kernel's state number ([`TCP_LISTEN`], [`TCP_ESTABLISHED`], ...).
    pub state: u8,
    /// The socket's inode (`socket:[INODE]` among a holder's `/proc/<pid>/fd`); 0 for sockets no
    /// process holds any more (e.g. `TIME_WAIT`).
    pub inode: u64,
}

/// The IPv4 TCP sockets of namespace `ns` now.
pub fn tcp_sockets(ns: &str) -> Vec<TcpSocket> {
    let text = in_netns(ns, || std::fs::read_to_string("/proc/thread-self/net/tcp"))
        .unwrap_or_else(|e| panic!("/proc/net/tcp of {ns}: {e}"));
    parse_proc_net_tcp(&text)
}

/// Reads `/proc/net/tcp`: a header line, then `sl: LOCAL REMOTE st queues timer retransmits uid
/// timeout inode ...`, addresses as `HEX8:HEX4` (the address as the kernel stores it, in network
/// order, printed as a native word; the port as a number).
fn parse_proc_net_tcp(text: &str) -> Vec<TcpSocket> {
    fn addr(s: &str) -> Option<SocketAddrV4> {
        let (a, p) = s.split_once(':')?;
        let a = u32::from_str_radix(a, 16).ok()?;
        let p = u16::from_str_radix(p, 16).ok()?;
        Some(SocketAddrV4::new(Ipv4Addr::from(a.to_ne_bytes()), p))
    }
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            Some(TcpSocket {
                local: addr(f.get(1)?)?,
                remote: addr(f.get(2)?)?,
                state: u8::from_str_radix(f.get(3)?, 16).ok()?,
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// The inodes of the sockets process `pid` holds open (empty if it is gone).
pub fn socket_inodes(pid: i32) -> HashSet<u64> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return HashSet::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let target = std::fs::read_link(e.path()).ok()?;
            let t = target.to_str()?;
            t.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        // The bridge ports first: the kernel deletes a namespace's interfaces some time after
        // `ip netns del` returns, and the next test of this process reuses these names.
        for veth in &self.veths {
            let _ = ip(&["link", "del", veth]);
        }
        for ns in &self.names {
            remove_namespace(ns);
        }
        // The links went with their namespace ends; the bridge is ours to remove.
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

    #[test]
    fn net_dev_is_parsed() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     140       2    0    0    0     0          0         0      140       2    0    0    0     0       0          0
    n1: 9437184    6000    0    0    0     0          0         0 12345678    7000    0    0    0     0       0          0
";
        let m = parse_net_dev(text);
        assert_eq!(m.len(), 2);
        assert_eq!(
            m["n1"],
            Traffic {
                rx_bytes: 9437184,
                tx_bytes: 12345678
            }
        );
        assert_eq!(m["lo"].tx_bytes, 140);
    }

    #[test]
    fn proc_net_tcp_is_parsed() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0101A8C0:A1B2 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0
   1: 0101A8C0:9C40 0201A8C0:A1B2 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0000000000000000 20 4 30 10 -1
";
        let v = parse_proc_net_tcp(text);
        assert_eq!(v.len(), 2);
        if cfg!(target_endian = "little") {
            assert_eq!(v[0].local, "192.168.1.1:41394".parse().unwrap());
            assert_eq!(v[1].remote, "192.168.1.2:41394".parse().unwrap());
        }
        assert_eq!(v[0].state, TCP_LISTEN);
        assert_eq!(v[0].remote, "0.0.0.0:0".parse().unwrap());
        assert_eq!((v[1].state, v[1].inode), (TCP_ESTABLISHED, 4343));
    }

    #[test]
    fn own_sockets_are_found() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let text = std::fs::read_to_string("/proc/thread-self/net/tcp").unwrap();
        let mine = socket_inodes(std::process::id() as i32);
        assert!(
            parse_proc_net_tcp(&text)
                .iter()
                .any(|s| s.state == TCP_LISTEN
                    && s.local == SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)
                    && mine.contains(&s.inode)),
            "no listener on port {port} among {text}"
        );
    }
}
