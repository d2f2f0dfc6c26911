//! Network interfaces: discovery with `getifaddrs`, selection by the include/exclude
//! parameters, link speed from sysfs, and per-interface value lists.
//!
//! Selection works on a plain list of [`Interface`]s, so it is tested on synthetic lists.

use std::net::Ipv4Addr;

/// An IPv4 address of a network interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Interface name, e.g. `eth0`.
    pub name: String,
    /// The address.
    pub addr: Ipv4Addr,
    /// Prefix length of its subnet.
    pub prefix: u8,
    /// Whether the interface is up.
    pub up: bool,
    /// Whether it is a loopback interface.
    pub loopback: bool,
}

impl Interface {
    /// Whether `other` lies in this interface's subnet.
    pub fn same_subnet(&self, other: Ipv4Addr) -> bool {
        in_net(other, self.addr, self.prefix)
    }
}

fn mask(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

/// Whether `a` is in the network `net/prefix`.
pub fn in_net(a: Ipv4Addr, net: Ipv4Addr, prefix: u8) -> bool {
    (u32::from(a) ^ u32::from(net)) & mask(prefix) == 0
}

fn prefix_of(netmask: Ipv4Addr) -> u8 {
    u32::from(netmask).leading_ones() as u8
}

/// Every IPv4 address of every interface of this machine, in the order the kernel lists them.
pub fn system() -> std::io::Result<Vec<Interface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid out-pointer; on success the list is freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not freed yet.
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: `ifa_addr` points to a sockaddr whose family field is always readable.
        if i32::from(unsafe { (*ifa.ifa_addr).sa_family }) != libc::AF_INET {
            continue;
        }
        // SAFETY: an AF_INET address is a sockaddr_in; its netmask, when present, too.
        let (addr, netmask) = unsafe {
            let a = &*ifa.ifa_addr.cast::<libc::sockaddr_in>();
            let m = if ifa.ifa_netmask.is_null() {
                u32::MAX.to_be()
            } else {
                (*ifa.ifa_netmask.cast::<libc::sockaddr_in>())
                    .sin_addr
                    .s_addr
            };
            (a.sin_addr.s_addr, m)
        };
        // SAFETY: `ifa_name` is a NUL-terminated string owned by the list.
        let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        out.push(Interface {
            name,
            // s_addr is in network order: its in-memory bytes are the octets.
            addr: Ipv4Addr::from(addr.to_ne_bytes()),
            prefix: prefix_of(Ipv4Addr::from(netmask.to_ne_bytes())),
            up: ifa.ifa_flags & libc::IFF_UP as libc::c_uint != 0,
            loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as libc::c_uint != 0,
        });
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// One entry of an include or exclude list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// An interface name.
    Name(String),
    /// Every address in `net/prefix`.
    Net(Ipv4Addr, u8),
}

impl Pattern {
    fn matches(&self, i: &Interface) -> bool {
        match self {
            Pattern::Name(n) => *n == i.name,
            Pattern::Net(net, p) => in_net(i.addr, *net, *p),
        }
    }
}

/// Parses a comma list of interface names and CIDRs (`eth0,10.7.0.0/24`); a bare address is a /32.
pub fn parse_patterns(text: &str) -> Result<Vec<Pattern>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let first = item.chars().next().unwrap_or(' ');
        if first.is_ascii_digit() {
            let (a, p) = item.split_once('/').unwrap_or((item, "32"));
            let addr: Ipv4Addr = a
                .parse()
                .map_err(|_| format!("'{item}' is not an IPv4 address or CIDR"))?;
            let prefix: u8 = p
                .parse()
                .ok()
                .filter(|p| *p <= 32)
                .ok_or_else(|| format!("'{item}' has a bad prefix length"))?;
            out.push(Pattern::Net(addr, prefix));
        } else if item.len() > 15 || item.contains(['/', ' ', ':']) {
            return Err(format!("'{item}' is not an interface name"));
        } else {
            out.push(Pattern::Name(item.to_string()));
        }
    }
    Ok(out)
}

/// The interfaces to open modules on, one address per interface, in `all`'s order.
///
/// Only interfaces that are up count. With a non-empty `include` list, exactly the addresses it
/// matches (loopback too, if named). Otherwise every address `exclude` does not match, without
/// loopback — unless nothing else is left, so that a job on one host without a network still
/// runs over `lo`. `include` wins over `exclude`.
pub fn select(all: &[Interface], include: &str, exclude: &str) -> Result<Vec<Interface>, String> {
    let include = parse_patterns(include)?;
    let exclude = parse_patterns(exclude)?;
    let up = all.iter().filter(|i| i.up);
    let mut chosen: Vec<&Interface> = if !include.is_empty() {
        up.filter(|i| include.iter().any(|p| p.matches(i)))
            .collect()
    } else {
        let candidates: Vec<&Interface> = up
            .filter(|i| !exclude.iter().any(|p| p.matches(i)))
            .collect();
        if candidates.iter().any(|i| !i.loopback) {
            candidates.into_iter().filter(|i| !i.loopback).collect()
        } else {
            candidates
        }
    };
    // One module per interface: its first chosen address.
    let mut seen: Vec<&str> = Vec::new();
    chosen.retain(|i| {
        if seen.contains(&i.name.as_str()) {
            false
        } else {
            seen.push(&i.name);
            true
        }
    });
    Ok(chosen.into_iter().cloned().collect())
}

/// The value for interface `name` in a list such as `veth-a:400,veth-b:200`; an entry without a
/// name (`300`) applies to every interface not named. `Ok(None)` if the list says nothing.
pub fn per_interface(text: &str, name: &str) -> Result<Option<u32>, String> {
    let mut any = None;
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (n, v) = match item.rsplit_once(':') {
            Some((n, v)) => (Some(n.trim()), v.trim()),
            None => (None, item),
        };
        let v: u32 = v
            .parse()
            .ok()
            .filter(|v| *v > 0)
            .ok_or_else(|| format!("'{item}': the value must be a positive integer"))?;
        match n {
            Some(n) if n == name => return Ok(Some(v)),
            Some(_) => {}
            None => any = Some(v),
        }
    }
    Ok(any)
}

/// Link speed in Mbit/s as Linux reports it in sysfs, where it does (not for loopback, and not for
/// many virtual devices).
pub fn link_speed_mbps(name: &str) -> Option<u32> {
    if name.contains('/') || name.starts_with('.') {
        return None;
    }
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/speed")).ok()?;
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|s| *s > 0)
        .map(|s| s.min(u32::MAX as i64) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, addr: [u8; 4], prefix: u8, up: bool) -> Interface {
        Interface {
            name: name.into(),
            addr: addr.into(),
            prefix,
            up,
            loopback: name == "lo",
        }
    }

    fn machine() -> Vec<Interface> {
        vec![
            iface("lo", [127, 0, 0, 1], 8, true),
            iface("eth0", [192, 0, 2, 2], 24, true),
            iface("veth-a", [10, 7, 0, 1], 24, true),
            iface("veth-b", [10, 8, 0, 1], 24, true),
            iface("veth-b", [10, 9, 0, 1], 24, true),
            iface("down0", [10, 10, 0, 1], 24, false),
        ]
    }

    fn names(v: &[Interface]) -> Vec<String> {
        v.iter().map(|i| format!("{}={}", i.name, i.addr)).collect()
    }

    #[test]
    fn default_takes_every_up_interface_but_loopback() {
        let got = select(&machine(), "", "").unwrap();
        assert_eq!(
            names(&got),
            ["eth0=192.0.2.2", "veth-a=10.7.0.1", "veth-b=10.8.0.1"]
        );
    }

    #[test]
    fn loopback_only_when_nothing_else_is_usable() {
        let lo_only = vec![
            iface("lo", [127, 0, 0, 1], 8, true),
            iface("eth0", [192, 0, 2, 2], 24, false),
        ];
        assert_eq!(names(&select(&lo_only, "", "").unwrap()), ["lo=127.0.0.1"]);
        // Excluding every other interface leaves loopback too.
        assert_eq!(
            names(&select(&machine(), "", "eth0,10.0.0.0/8").unwrap()),
            ["lo=127.0.0.1"]
        );
        // ... unless loopback is excluded as well.
        assert!(select(&machine(), "", "eth0,veth-a,veth-b,lo")
            .unwrap()
            .is_empty());
        assert!(select(&[], "", "").unwrap().is_empty());
    }

    #[test]
    fn exclude_by_name_and_cidr() {
        assert_eq!(
            names(&select(&machine(), "", "veth-a, 192.0.2.0/24").unwrap()),
            ["veth-b=10.8.0.1"]
        );
        // Excluding one address of veth-b leaves its other one.
        assert_eq!(
            names(&select(&machine(), "", "10.8.0.0/16,eth0,veth-a").unwrap()),
            ["veth-b=10.9.0.1"]
        );
    }

    #[test]
    fn include_by_name_and_cidr_and_it_wins() {
        assert_eq!(
            names(&select(&machine(), "veth-a,10.9.0.0/24", "").unwrap()),
            ["veth-a=10.7.0.1", "veth-b=10.9.0.1"]
        );
        assert_eq!(
            names(&select(&machine(), "veth-a", "veth-a").unwrap()),
            ["veth-a=10.7.0.1"]
        );
        assert_eq!(
            names(&select(&machine(), "lo", "").unwrap()),
            ["lo=127.0.0.1"]
        );
        assert_eq!(
            names(&select(&machine(), "127.0.0.0/8,eth0", "").unwrap()),
            ["lo=127.0.0.1", "eth0=192.0.2.2"]
        );
        // A down interface stays out even when named; so does a name that matches nothing.
        assert!(select(&machine(), "down0,nosuch", "").unwrap().is_empty());
        // A bare address is a /32.
        assert_eq!(
            names(&select(&machine(), "10.8.0.1", "").unwrap()),
            ["veth-b=10.8.0.1"]
        );
    }

    #[test]
    fn bad_lists_are_errors() {
        for bad in [
            "10.0.0.0/33",
            "10.0.0/8",
            "300.1.1.1",
            "a:b",
            "x/y",
            "1.2.3.4/x",
        ] {
            assert!(select(&machine(), bad, "").is_err(), "{bad}");
            assert!(select(&machine(), "", bad).is_err(), "{bad}");
        }
        assert_eq!(
            parse_patterns(" eth0 ,, 10.0.0.0/8 ").unwrap(),
            [
                Pattern::Name("eth0".into()),
                Pattern::Net([10, 0, 0, 0].into(), 8)
            ]
        );
    }

    #[test]
    fn subnets() {
        let i = iface("veth-a", [10, 7, 0, 1], 24, true);
        assert!(i.same_subnet([10, 7, 0, 200].into()));
        assert!(!i.same_subnet([10, 7, 1, 1].into()));
        assert!(in_net([1, 2, 3, 4].into(), [9, 9, 9, 9].into(), 0));
        assert!(in_net([9, 9, 9, 9].into(), [9, 9, 9, 9].into(), 32));
        assert!(!in_net([9, 9, 9, 8].into(), [9, 9, 9, 9].into(), 32));
        assert_eq!(prefix_of([255, 255, 255, 0].into()), 24);
        assert_eq!(prefix_of([255, 0, 0, 0].into()), 8);
        assert_eq!(prefix_of([0, 0, 0, 0].into()), 0);
    }

    #[test]
    fn value_lists() {
        let l = "veth-a:400, veth-b:200";
        assert_eq!(per_interface(l, "veth-a"), Ok(Some(400)));
        assert_eq!(per_interface(l, "veth-b"), Ok(Some(200)));
        assert_eq!(per_interface(l, "eth0"), Ok(None));
        assert_eq!(per_interface("", "eth0"), Ok(None));
        assert_eq!(per_interface("900,eth0:5", "eth0"), Ok(Some(5)));
        assert_eq!(per_interface("900,eth0:5", "lo"), Ok(Some(900)));
        assert!(per_interface("eth0:fast", "eth0").is_err());
        assert!(per_interface("eth0:0", "lo").is_err());
    }

    #[test]
    fn this_machine_lists_loopback() {
        // Every Linux machine has `lo` with 127.0.0.1 (it may be down in an empty namespace).
        let all = system().unwrap();
        let lo = all.iter().find(|i| i.name == "lo").expect("lo");
        assert_eq!(lo.addr, Ipv4Addr::LOCALHOST);
        assert_eq!(lo.prefix, 8);
        assert!(lo.loopback);
        assert_eq!(link_speed_mbps("lo"), None);
        assert_eq!(link_speed_mbps("../../etc"), None);
    }
}
