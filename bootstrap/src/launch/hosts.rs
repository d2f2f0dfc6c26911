//! Host lists (`--host`, `--hostfile`) and the placement of ranks on them.
//!
//! A host has *slots*: the number of ranks it takes before the next host is
//! used. Ranks are placed in rank order, filling each host's slots before
//! moving to the next host (Open MPI's "by slot" mapping); MPMD contexts
//! simply continue where the previous one stopped. More ranks than slots is
//! an error unless oversubscription is allowed, in which case placement
//! wraps around to the first host and fills the slots again.
//!
//! A host listed more than once (in either form) has the sum of its slots,
//! at the position of its first appearance.

/// One host and its slot count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The name as given: what the launch agent is passed and what the
    /// ranks see as `STORMPI_NODE`.
    pub name: String,
    /// Ranks the host takes per round of placement (at least 1).
    pub slots: u32,
}

/// Parses a `--host` value: comma-separated `NAME` or `NAME:SLOTS` (a host
/// without a count has one slot).
pub fn parse_host_list(text: &str) -> Result<Vec<Host>, String> {
    text.split(',')
        .map(|item| {
            let item = item.trim();
            if item.is_empty() {
                return Err(format!("`--host {text}`: empty host name"));
            }
            let (name, slots) = split_slots(item).map_err(|e| format!("`--host {text}`: {e}"))?;
            Ok(Host {
                name: name.to_string(),
                slots: slots.unwrap_or(1),
            })
        })
        .collect()
}

/// Parses a host file: one host per line, `NAME`, `NAME slots=N` or
/// `NAME:N`; `#` starts a comment; blank lines are ignored. `max_slots=N`
/// (Open MPI's limit on oversubscription) is accepted and ignored. Errors
/// name the line.
pub fn parse_hostfile(text: &str) -> Result<Vec<Host>, String> {
    let mut hosts = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("");
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else {
            // A blank line, or only a comment.
            continue;
        };
        let at = |e: String| format!("line {}: {e}", i + 1);
        let (name, mut slots) = split_slots(first).map_err(at)?;
        for word in words {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| at(format!("`{word}` is not `slots=N`")))?;
            match key {
                "slots" => {
                    if slots.is_some() {
                        return Err(at(format!("`{name}` has its slots given twice")));
                    }
                    slots = Some(parse_slots(value).map_err(at)?);
                }
                "max_slots" | "max-slots" => {
                    parse_slots(value).map_err(at)?;
                }
                _ => return Err(at(format!("unknown attribute `{key}` (only slots=N)"))),
            }
        }
        hosts.push(Host {
            name: name.to_string(),
            slots: slots.unwrap_or(1),
        });
    }
    if hosts.is_empty() {
        return Err("it names no host".into());
    }
    Ok(hosts)
}

/// `NAME` or `NAME:SLOTS`, with the name checked.
fn split_slots(item: &str) -> Result<(&str, Option<u32>), String> {
    let (name, slots) = match item.split_once(':') {
        Some((name, count)) => (name, Some(parse_slots(count)?)),
        None => (item, None),
    };
    check_name(name)?;
    Ok((name, slots))
}

fn parse_slots(text: &str) -> Result<u32, String> {
    match text.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{text}` is not a slot count (a positive number)")),
    }
}

/// Host names reach the launch agent's command line, so only what a host
/// name (or ssh's `user@host`) can hold is allowed; in particular a leading
/// `-` would turn the name into an option of the agent.
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("empty host name".into());
    }
    if name.starts_with('-') {
        return Err(format!("host name `{name}` starts with `-`"));
    }
    if let Some(c) = name
        .chars()
        .find(|&c| !(c.is_ascii_alphanumeric() || "._-@".contains(c)))
    {
        return Err(format!(
            "host name `{name}` contains `{c}` (allowed: letters, digits, `.`, `_`, `-`, `@`)"
        ));
    }
    Ok(())
}

/// Merges repeated names (summing their slots), keeping the order of first
/// appearance.
pub fn merge(hosts: Vec<Host>) -> Vec<Host> {
    let mut out: Vec<Host> = Vec::with_capacity(hosts.len());
    for h in hosts {
        match out.iter_mut().find(|o| o.name == h.name) {
            Some(o) => o.slots = o.slots.saturating_add(h.slots),
            None => out.push(h),
        }
    }
    out
}

/// Total slots of a host list.
pub fn total_slots(hosts: &[Host]) -> u64 {
    hosts.iter().map(|h| u64::from(h.slots)).sum()
}

/// How ranks are placed on hosts (`--map-by`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MapBy {
    /// Fill each host's slots before the next (`slot`, `core`).
    #[default]
    Slot,
    /// One rank per host in turn, within their slots (`node`).
    Node,
    /// N ranks on each host (`ppr:N:node`, `-N N`).
    PerNode(u32),
}

impl MapBy {
    /// Parses `--map-by`'s value.
    pub fn parse(s: &str) -> Option<MapBy> {
        match s {
            "slot" | "core" => Some(MapBy::Slot),
            "node" => Some(MapBy::Node),
            _ => {
                let n = s.strip_prefix("ppr:")?.strip_suffix(":node")?;
                n.parse().ok().filter(|&n| n > 0).map(MapBy::PerNode)
            }
        }
    }
}

/// The host (an index into `hosts`) of each of `ranks` ranks, in rank order.
pub fn place(
    hosts: &[Host],
    ranks: u32,
    oversubscribe: bool,
    map_by: MapBy,
) -> Result<Vec<usize>, String> {
    let slots = total_slots(hosts);
    if slots == 0 {
        return Err("the host list is empty".into());
    }
    if let MapBy::PerNode(n) = map_by {
        let room = u64::from(n) * hosts.len() as u64;
        if u64::from(ranks) > room {
            return Err(format!(
                "{ranks} ranks requested but ppr:{n}:node on {} host(s) places {room}",
                hosts.len()
            ));
        }
        if let Some(h) = hosts.iter().find(|h| h.slots < n) {
            if !oversubscribe {
                return Err(format!(
                    "ppr:{n}:node puts {n} ranks on {} but it has only {} slot(s); \
                     pass --oversubscribe to place more ranks than slots",
                    h.name, h.slots
                ));
            }
        }
        return Ok((0..ranks as usize).map(|r| r / n as usize).collect());
    }
    if u64::from(ranks) > slots && !oversubscribe {
        return Err(format!(
            "{ranks} ranks requested but the hosts have only {slots} slot(s); \
             pass --oversubscribe to place more ranks than slots"
        ));
    }
    let mut out = Vec::with_capacity(ranks as usize);
    match map_by {
        MapBy::Node => {
            // Round robin over hosts with free slots; once all are full
            // (oversubscribed), round robin over all of them.
            let mut used = vec![0u32; hosts.len()];
            while out.len() < ranks as usize {
                let full = hosts.iter().zip(&used).all(|(h, &u)| u >= h.slots);
                for (i, h) in hosts.iter().enumerate() {
                    if out.len() == ranks as usize {
                        break;
                    }
                    if full || used[i] < h.slots {
                        used[i] += 1;
                        out.push(i);
                    }
                }
            }
        }
        _ => 'fill: loop {
            for (i, h) in hosts.iter().enumerate() {
                for _ in 0..h.slots {
                    if out.len() == ranks as usize {
                        break 'fill;
                    }
                    out.push(i);
                }
            }
        },
    }
    Ok(out)
}

/// One line of a rankfile: `rank R=HOST slot=CORES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankfileEntry {
    /// The rank.
    pub rank: u32,
    /// Its host.
    pub host: String,
    /// Its cores there.
    pub slots: super::bind::Slots,
}

/// Parses a rankfile: one `rank R=HOST slot=CORES` per line, `#` comments;
/// every rank from 0 to the largest must appear once. Returns the entries in
/// rank order.
pub fn parse_rankfile(text: &str) -> Result<Vec<RankfileEntry>, String> {
    let mut entries: Vec<RankfileEntry> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| format!("line {}: {why} (`{line}`)", n + 1);
        let rest = line
            .strip_prefix("rank")
            .ok_or_else(|| bad("lines read `rank R=HOST slot=CORES`"))?;
        let (rank, rest) = rest
            .trim_start()
            .split_once('=')
            .ok_or_else(|| bad("no `=` after the rank"))?;
        let rank: u32 = rank.trim().parse().map_err(|_| bad("not a rank number"))?;
        let mut words = rest.split_whitespace();
        let host = words.next().ok_or_else(|| bad("no host"))?;
        check_name(host).map_err(|e| bad(&e))?;
        let slot = words
            .next()
            .and_then(|w| w.strip_prefix("slot="))
            .ok_or_else(|| bad("no `slot=CORES` after the host"))?;
        if words.next().is_some() {
            return Err(bad("unexpected text after slot="));
        }
        let slots = super::bind::parse_slots(slot).map_err(|e| bad(&e))?;
        if entries.iter().any(|e| e.rank == rank) {
            return Err(bad(&format!("rank {rank} appears twice")));
        }
        entries.push(RankfileEntry {
            rank,
            host: host.to_string(),
            slots,
        });
    }
    entries.sort_by_key(|e| e.rank);
    if let Some(gap) = entries
        .iter()
        .enumerate()
        .find(|(i, e)| e.rank != *i as u32)
    {
        return Err(format!("rank {} is missing", gap.0));
    }
    if entries.is_empty() {
        return Err("no ranks in it".into());
    }
    Ok(entries)
}

/// Whether `name` means this machine: `localhost`, a loopback address, or
/// this machine's host name (`hostname`), also without its domain.
pub fn is_local(name: &str, hostname: &str) -> bool {
    if name == "localhost" || name == "127.0.0.1" || name == hostname {
        return true;
    }
    // `node1` and `node1.cluster.example` name the same machine; addresses
    // and `user@host` (another account, so run through the agent) do not
    // compare this way.
    let is_address = |n: &str| n.parse::<std::net::IpAddr>().is_ok();
    let short = |n: &str| n.split('.').next().unwrap_or(n).to_string();
    !hostname.is_empty()
        && !name.contains('@')
        && !is_address(name)
        && !is_address(hostname)
        && short(name) == short(hostname)
}

/// This machine's host name ("localhost" if it has none).
pub fn local_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let n = buf.iter().position(|&b| b == 0).unwrap_or(0);
    match std::str::from_utf8(&buf[..n]) {
        Ok(name) if ok && !name.is_empty() => name.to_string(),
        _ => "localhost".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, slots: u32) -> Host {
        Host {
            name: name.into(),
            slots,
        }
    }

    #[test]
    fn host_lists() {
        assert_eq!(parse_host_list("a").unwrap(), vec![h("a", 1)]);
        assert_eq!(
            parse_host_list("h1:2,h2:3, node-7.example.org ,me@h3:1").unwrap(),
            vec![
                h("h1", 2),
                h("h2", 3),
                h("node-7.example.org", 1),
                h("me@h3", 1)
            ]
        );
        for (bad, needle) in [
            ("", "empty host name"),
            ("a,,b", "empty host name"),
            ("a:0", "not a slot count"),
            ("a:x", "not a slot count"),
            ("a:-1", "not a slot count"),
            (":2", "empty host name"),
            ("a:2:3", "not a slot count"),
            ("-oProxyCommand=x", "starts with `-`"),
            ("a b", "contains ` `"),
            ("a;rm", "contains `;`"),
        ] {
            let e = parse_host_list(bad).unwrap_err();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }

    #[test]
    fn hostfiles() {
        let text = "# cluster\n\
                    h1 slots=2\n\
                    \n\
                    h2:3   # three\n\
                    h3\n\
                    \t h4  slots=4 max_slots=8 \n";
        assert_eq!(
            parse_hostfile(text).unwrap(),
            vec![h("h1", 2), h("h2", 3), h("h3", 1), h("h4", 4)]
        );
        for (bad, needle) in [
            ("h1 slots=0\n", "line 1: `0` is not a slot count"),
            ("# x\nh1 slots=two\n", "line 2:"),
            ("h1 cpus=2\n", "line 1: unknown attribute `cpus`"),
            ("h1 2\n", "`2` is not `slots=N`"),
            ("h1:2 slots=3\n", "given twice"),
            ("ok\nb@d!\n", "line 2: host name `b@d!` contains `!`"),
            ("# nothing\n\n", "names no host"),
        ] {
            let e = parse_hostfile(bad).unwrap_err();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }

    #[test]
    fn repeated_hosts_merge() {
        assert_eq!(
            merge(vec![h("a", 1), h("b", 2), h("a", 3)]),
            vec![h("a", 4), h("b", 2)]
        );
    }

    #[test]
    fn placement_fills_slots_in_order() {
        let hosts = [h("h1", 2), h("h2", 3)];
        assert_eq!(
            place(&hosts, 5, false, MapBy::Slot).unwrap(),
            [0, 0, 1, 1, 1]
        );
        assert_eq!(place(&hosts, 3, false, MapBy::Slot).unwrap(), [0, 0, 1]);
        let e = place(&hosts, 6, false, MapBy::Slot).unwrap_err();
        assert!(
            e.contains("6 ranks requested")
                && e.contains("5 slot(s)")
                && e.contains("--oversubscribe"),
            "{e}"
        );
        // Oversubscribed: wrap around and fill the slots again.
        assert_eq!(
            place(&hosts, 8, true, MapBy::Slot).unwrap(),
            [0, 0, 1, 1, 1, 0, 0, 1]
        );
        assert_eq!(
            place(&[h("a", 1)], 3, true, MapBy::Slot).unwrap(),
            [0, 0, 0]
        );
        assert!(place(&[], 1, true, MapBy::Slot).is_err());
    }

    #[test]
    fn local_names() {
        for name in ["localhost", "127.0.0.1", "vm", "vm.example.org"] {
            assert!(is_local(name, "vm"), "{name}");
        }
        assert!(is_local("node1", "node1.cluster"));
        for name in ["vm2", "me@vm", "10.0.0.1", "stormpi-h1-7"] {
            assert!(!is_local(name, "vm"), "{name}");
        }
    }

    #[test]
    fn map_by_node_goes_round_robin_within_slots_then_over_all() {
        let hosts = [h("a", 3), h("b", 1)];
        assert_eq!(place(&hosts, 4, false, MapBy::Node).unwrap(), [0, 1, 0, 0]);
        assert_eq!(
            place(&hosts, 6, true, MapBy::Node).unwrap(),
            [0, 1, 0, 0, 0, 1]
        );
    }

    #[test]
    fn ppr_puts_n_on_each_host_and_checks_slots() {
        let hosts = [h("a", 2), h("b", 2)];
        assert_eq!(
            place(&hosts, 3, false, MapBy::PerNode(2)).unwrap(),
            [0, 0, 1]
        );
        assert!(place(&hosts, 5, true, MapBy::PerNode(2))
            .unwrap_err()
            .contains("places 4"));
        assert!(place(&hosts, 2, false, MapBy::PerNode(3))
            .unwrap_err()
            .contains("--oversubscribe"));
        assert_eq!(MapBy::parse("ppr:2:node"), Some(MapBy::PerNode(2)));
        assert_eq!(MapBy::parse("ppr:0:node"), None);
        assert_eq!(MapBy::parse("core"), Some(MapBy::Slot));
    }

    #[test]
    fn rankfiles_give_each_rank_a_host_and_cores() {
        use crate::launch::bind::Slots;
        let rf = parse_rankfile("# two hosts\nrank 1=b slot=1:0\n rank 0=a slot=0-1 \n").unwrap();
        assert_eq!(rf.len(), 2);
        assert_eq!(
            (rf[0].host.as_str(), &rf[0].slots),
            ("a", &Slots::Cores(vec![0, 1]))
        );
        assert_eq!(rf[1].slots, Slots::SocketCores(1, vec![0]));
        for (text, why) in [
            ("rank 0=a slot=0\nrank 2=a slot=1", "rank 1 is missing"),
            ("rank 0=a slot=0\nrank 0=a slot=1", "twice"),
            ("rank 0=a", "slot="),
            ("rank x=a slot=0", "not a rank"),
            ("host a", "rank R=HOST"),
            ("rank 0=-a slot=0", "starts with `-`"),
            ("", "no ranks"),
        ] {
            let e = parse_rankfile(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }
}
