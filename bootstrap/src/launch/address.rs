//! The address remote ranks reach stormrun's PMI server at.
//!
//! The rule, per remote host:
//!
//! 1. `--pmi-address ADDR[:PORT]` given: listen on that address (and port,
//!    else any free one) and tell every host that address.
//! 2. Else resolve the host's name (at most [`RESOLVE_TIMEOUT`]) and ask the
//!    kernel which source address it would use to send to it (a UDP
//!    `connect`, which sends nothing). For a host on a directly attached
//!    subnet that is the address of the interface on that subnet; for a
//!    routed host, the address of the interface the route leaves through.
//! 3. A host whose name does not resolve (e.g. a network namespace, or a
//!    name only ssh's configuration knows) gets the first non-loopback
//!    address of an interface that is up (IPv4 before IPv6), with a note on
//!    stderr suggesting `--pmi-address`.
//!
//! When every host gets the same address, the server listens on that
//! address only; otherwise on all addresses (`0.0.0.0`, or `::` if any host
//! needs IPv6).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::Duration;

use crate::sys;

/// Longest wait for a host name to resolve.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Where to listen, and what each remote host is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PmiListen {
    /// The address to bind (port 0: any free port).
    pub bind: SocketAddr,
    /// For each host (in the order given), the address its ranks connect to.
    pub advertise: Vec<IpAddr>,
    /// Things the user should know (a guessed address).
    pub notes: Vec<String>,
}

/// Parses `--pmi-address`: an IPv4 or IPv6 address, optionally with a port
/// (`10.0.0.1:4000`, `[fe80::1]:4000`).
pub fn parse_pmi_address(text: &str) -> Result<SocketAddr, String> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, 0));
    }
    text.parse::<SocketAddr>().map_err(|_| {
        format!(
            "`--pmi-address {text}`: not an IP address of this machine (with an optional :PORT)"
        )
    })
}

/// Applies the rule of this module to `hosts` (names as given).
pub fn choose(given: Option<SocketAddr>, hosts: &[&str]) -> Result<PmiListen, String> {
    choose_with(given, hosts, route_to, fallback_address)
}

/// [`choose`] with the lookups passed in (for tests): `route(host)` is the
/// source address for reaching `host`, `fallback()` a guess for hosts
/// without one.
pub fn choose_with(
    given: Option<SocketAddr>,
    hosts: &[&str],
    route: impl Fn(&str) -> Option<IpAddr>,
    fallback: impl Fn() -> Option<IpAddr>,
) -> Result<PmiListen, String> {
    if let Some(addr) = given {
        return Ok(PmiListen {
            bind: addr,
            advertise: vec![addr.ip(); hosts.len()],
            notes: Vec::new(),
        });
    }
    let mut advertise = Vec::with_capacity(hosts.len());
    let mut unrouted = Vec::new();
    for &host in hosts {
        match route(host) {
            Some(ip) => advertise.push(ip),
            None => {
                unrouted.push(host);
                advertise.push(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            }
        }
    }
    let mut notes = Vec::new();
    if !unrouted.is_empty() {
        let Some(guess) = fallback() else {
            return Err(format!(
                "cannot tell at which address host(s) {} can reach this machine, and this \
                 machine has no non-loopback address; pass --pmi-address",
                unrouted.join(", ")
            ));
        };
        for (a, &host) in advertise.iter_mut().zip(hosts) {
            if unrouted.contains(&host) {
                *a = guess;
            }
        }
        notes.push(format!(
            "note: cannot resolve host(s) {}; their ranks will reach the PMI server at {guess} \
             (pass --pmi-address to choose)",
            unrouted.join(", ")
        ));
    }
    let bind_ip = match advertise.first() {
        Some(&first) if advertise.iter().all(|&a| a == first) => first,
        _ if advertise.iter().any(IpAddr::is_ipv6) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        _ => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
    };
    Ok(PmiListen {
        bind: SocketAddr::new(bind_ip, 0),
        advertise,
        notes,
    })
}

/// The source address this machine uses to reach `host` (a name as given
/// to `--host`, possibly `user@name`), if the name resolves in time.
fn route_to(host: &str) -> Option<IpAddr> {
    let name = host.rsplit('@').next().unwrap_or(host).to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    // getaddrinfo cannot be interrupted: a slow resolver is left behind in
    // its thread rather than waited for.
    std::thread::spawn(move || {
        let addrs: Vec<IpAddr> = (name.as_str(), 9)
            .to_socket_addrs()
            .map(|it| it.map(|a| a.ip()).collect())
            .unwrap_or_default();
        let _ = tx.send(addrs);
    });
    let mut addrs = rx.recv_timeout(RESOLVE_TIMEOUT).ok()?;
    // IPv4 first: it is what clusters mostly use, and an IPv6 link-local
    // address would need a scope.
    addrs.sort_by_key(IpAddr::is_ipv6);
    addrs.into_iter().find_map(source_address_for)
}

/// The kernel's choice of source address for sending to `dest`.
fn source_address_for(dest: IpAddr) -> Option<IpAddr> {
    let any: SocketAddr = match dest {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let socket = UdpSocket::bind(any).ok()?;
    socket.connect((dest, 9)).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

/// The first non-loopback address of an interface that is up, IPv4 first.
fn fallback_address() -> Option<IpAddr> {
    let all = sys::interface_addresses();
    let usable = |v6: bool| {
        all.iter()
            .filter(|a| !a.loopback && !a.addr.is_loopback() && a.addr.is_ipv6() == v6)
            .find(|a| match a.addr {
                // Link-local IPv6 addresses need a scope id to be reached.
                IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 != 0xfe80,
                IpAddr::V4(_) => true,
            })
            .map(|a| a.addr)
    };
    usable(false).or_else(|| usable(true))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn pmi_address_syntax() {
        assert_eq!(
            parse_pmi_address("10.1.2.1").unwrap(),
            "10.1.2.1:0".parse().unwrap()
        );
        assert_eq!(
            parse_pmi_address("10.1.2.1:4000").unwrap(),
            "10.1.2.1:4000".parse().unwrap()
        );
        assert_eq!(
            parse_pmi_address("fe80::1").unwrap(),
            "[fe80::1]:0".parse().unwrap()
        );
        assert_eq!(
            parse_pmi_address("[::1]:7").unwrap(),
            "[::1]:7".parse().unwrap()
        );
        for bad in ["", "node1", "10.1.2", "10.1.2.1:x", "10.1.2.1:70000"] {
            assert!(parse_pmi_address(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn given_address_is_used_for_all() {
        let given = "10.9.8.1:0".parse().unwrap();
        let l = choose_with(Some(given), &["a", "b"], |_| panic!(), || panic!()).unwrap();
        assert_eq!(l.bind, given);
        assert_eq!(l.advertise, [ip("10.9.8.1"), ip("10.9.8.1")]);
        assert!(l.notes.is_empty());
    }

    #[test]
    fn routes_decide_per_host() {
        let route = |h: &str| match h {
            "a" | "b" => Some(ip("10.0.0.1")),
            "c" => Some(ip("192.168.1.5")),
            "v6" => Some(ip("2001:db8::1")),
            _ => None,
        };
        let fallback = || Some(ip("172.16.0.9"));
        let l = choose_with(None, &["a", "b"], route, fallback).unwrap();
        assert_eq!(
            l.bind,
            "10.0.0.1:0".parse().unwrap(),
            "one address: bind it"
        );
        assert!(l.notes.is_empty());
        let l = choose_with(None, &["a", "c"], route, fallback).unwrap();
        assert_eq!(l.bind, "0.0.0.0:0".parse().unwrap());
        assert_eq!(l.advertise, [ip("10.0.0.1"), ip("192.168.1.5")]);
        let l = choose_with(None, &["a", "v6"], route, fallback).unwrap();
        assert_eq!(l.bind, "[::]:0".parse().unwrap());
        let l = choose_with(None, &["a", "ns1"], route, fallback).unwrap();
        assert_eq!(l.advertise, [ip("10.0.0.1"), ip("172.16.0.9")]);
        assert!(l.notes[0].contains("ns1") && l.notes[0].contains("--pmi-address"));
        let e = choose_with(None, &["ns1"], route, || None).unwrap_err();
        assert!(e.contains("ns1") && e.contains("--pmi-address"), "{e}");
    }

    #[test]
    fn real_lookups() {
        assert_eq!(route_to("localhost").map(|a| a.is_loopback()), Some(true));
        assert_eq!(route_to("no-such-host.invalid"), None);
        assert_eq!(source_address_for(ip("127.0.0.1")), Some(ip("127.0.0.1")));
    }
}
