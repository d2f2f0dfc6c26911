//! Process binding: which CPUs each rank may run on.
//!
//! A rank is bound on the host it runs on, by the process that starts it
//! there: stormrun itself for local ranks (between fork and exec), stormrun's
//! exec helper for remote ones (see [`super::agent`]), which gets the request
//! in [`REQUEST_ENV`]. Both read the host's topology the same way
//! ([`Topology::probe`]): the CPUs the starting process may use (its affinity
//! mask, so a cpuset given by Slurm, a container or `taskset` is respected),
//! grouped into cores, sockets and NUMA nodes from sysfs.
//!
//! Ranks are mapped to cores in local-rank order: local rank `i` takes the
//! `cpus_per_rank` cores from core `i * cpus_per_rank` on, and is bound to
//! the objects of the binding level that hold them (the cores themselves,
//! their first hardware threads, or their whole sockets or NUMA nodes). A
//! rankfile names the cores of each rank instead.
//!
//! By default ranks are bound to cores when a node's ranks fit its cores (as
//! Open MPI does) and left unbound when they do not: oversubscribed ranks
//! must be free to run wherever a core is idle.

use std::fmt::Write as _;

/// The environment variable that carries a remote rank's binding request to
/// stormrun's exec helper on its host (see [`Request::to_env`]).
pub const REQUEST_ENV: &str = "STORMPI_BIND_REQUEST";

/// What ranks are bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Level {
    /// Cores when the node's ranks fit its cores, otherwise nothing.
    #[default]
    Auto,
    /// Not bound.
    None,
    /// One hardware thread per core taken.
    HwThread,
    /// Whole cores.
    Core,
    /// The sockets holding the cores taken.
    Socket,
    /// The NUMA nodes holding the cores taken.
    Numa,
}

impl Level {
    /// Parses `--bind-to`'s value.
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "none" => Level::None,
            "hwthread" => Level::HwThread,
            "core" => Level::Core,
            "socket" | "package" => Level::Socket,
            "numa" => Level::Numa,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Level::Auto => "auto",
            Level::None => "none",
            Level::HwThread => "hwthread",
            Level::Core => "core",
            Level::Socket => "socket",
            Level::Numa => "numa",
        }
    }
}

/// A rankfile entry's CPUs: cores by index among the host's usable cores,
/// or `socket:core` pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Slots {
    /// Cores by logical index (`slot=0-1`).
    Cores(Vec<u32>),
    /// Cores by socket and core index within the socket (`slot=1:0-1`).
    SocketCores(u32, Vec<u32>),
}

/// How one rank is to be bound, as stormrun decides it before knowing the
/// host's topology.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The binding level.
    pub level: Level,
    /// The rank's index among its host's ranks, and their number.
    pub local_rank: u32,
    /// Ranks on the host.
    pub local_size: u32,
    /// Cores per rank (`--cpus-per-rank`).
    pub cpus_per_rank: u32,
    /// Several ranks may share a core (`--bind-to core:overload-allowed`).
    pub overload: bool,
    /// The rankfile's cores for this rank, if a rankfile was given.
    pub slots: Option<Slots>,
    /// Print the binding (`--report-bindings`).
    pub report: bool,
}

impl Request {
    /// The request as one environment value, for a remote rank's helper.
    pub fn to_env(&self) -> String {
        let slots = match &self.slots {
            None => String::new(),
            Some(Slots::Cores(c)) => list_text(c),
            Some(Slots::SocketCores(s, c)) => format!("{s}:{}", list_text(c)),
        };
        format!(
            "{};{};{};{};{};{};{}",
            self.level.name(),
            self.local_rank,
            self.local_size,
            self.cpus_per_rank,
            u8::from(self.overload),
            u8::from(self.report),
            slots
        )
    }

    /// Parses [`Request::to_env`]'s text.
    pub fn from_env(text: &str) -> Option<Request> {
        let f: Vec<&str> = text.split(';').collect();
        if f.len() != 7 {
            return None;
        }
        let level = match f[0] {
            "auto" => Level::Auto,
            other => Level::parse(other)?,
        };
        let flag = |s: &str| match s {
            "0" => Some(false),
            "1" => Some(true),
            _ => None,
        };
        Some(Request {
            level,
            local_rank: f[1].parse().ok()?,
            local_size: f[2].parse().ok()?,
            cpus_per_rank: f[3].parse().ok().filter(|&n| n > 0)?,
            overload: flag(f[4])?,
            report: flag(f[5])?,
            slots: if f[6].is_empty() {
                None
            } else {
                Some(parse_slots(f[6]).ok()?)
            },
        })
    }
}

/// One usable CPU (hardware thread) of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cpu {
    /// The kernel's CPU number.
    pub id: u32,
    /// Socket (physical package).
    pub socket: u32,
    /// Core id within the socket, as the kernel numbers it.
    pub core: u32,
    /// NUMA node.
    pub numa: u32,
}

/// The usable CPUs of a host, ordered by CPU number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    /// Usable CPUs.
    pub cpus: Vec<Cpu>,
}

impl Topology {
    /// The CPUs this process may run on, with their places from sysfs (each
    /// CPU its own core of socket 0 and NUMA node 0 where sysfs says nothing).
    pub fn probe() -> Topology {
        let allowed = allowed_cpus();
        let numa_of = numa_nodes();
        let read = |cpu: u32, what: &str| -> Option<u32> {
            let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/{what}");
            std::fs::read_to_string(path).ok()?.trim().parse().ok()
        };
        let cpus = allowed
            .into_iter()
            .map(|id| Cpu {
                id,
                socket: read(id, "physical_package_id").unwrap_or(0),
                core: read(id, "core_id").unwrap_or(id),
                numa: numa_of
                    .iter()
                    .find(|(_, cpus)| cpus.contains(&id))
                    .map_or(0, |(n, _)| *n),
            })
            .collect();
        Topology { cpus }
    }

    /// The cores, each as its CPUs, in order of their first CPU.
    pub fn cores(&self) -> Vec<Vec<Cpu>> {
        let mut cores: Vec<Vec<Cpu>> = Vec::new();
        for &cpu in &self.cpus {
            match cores
                .iter_mut()
                .find(|c| c[0].socket == cpu.socket && c[0].core == cpu.core)
            {
                Some(core) => core.push(cpu),
                None => cores.push(vec![cpu]),
            }
        }
        cores
    }

    /// The CPUs `req` binds its rank to, or `None` for no binding. An error
    /// says why the binding asked for cannot be made.
    pub fn cpus_for(&self, req: &Request) -> Result<Option<Vec<u32>>, String> {
        let cores = self.cores();
        if cores.is_empty() {
            return Ok(None);
        }
        let n = cores.len() as u64;
        let need = u64::from(req.local_size) * u64::from(req.cpus_per_rank);
        let taken: Vec<&Vec<Cpu>> = match &req.slots {
            Some(slots) => self.rankfile_cores(&cores, slots)?,
            None => {
                match req.level {
                    Level::None => return Ok(None),
                    Level::Auto if need > n => return Ok(None),
                    Level::Auto => {}
                    _ if need > n && !req.overload => {
                        return Err(format!(
                        "cannot bind {} rank(s) × {} core(s) to this host's {n} usable core(s): \
                             run fewer ranks, pass --bind-to none, or allow sharing with \
                             --bind-to {}:overload-allowed",
                        req.local_size,
                        req.cpus_per_rank,
                        req.level.name()
                    ))
                    }
                    _ => {}
                }
                let first = u64::from(req.local_rank) * u64::from(req.cpus_per_rank);
                (0..u64::from(req.cpus_per_rank))
                    .map(|k| &cores[((first + k) % n) as usize])
                    .collect()
            }
        };
        let level = match req.level {
            // A rankfile without --bind-to binds to its cores.
            Level::Auto | Level::None => Level::Core,
            l => l,
        };
        let mut out: Vec<u32> = Vec::new();
        for core in taken {
            let c = core[0];
            let add: Vec<u32> = match level {
                Level::HwThread => vec![c.id],
                Level::Socket => self
                    .cpus
                    .iter()
                    .filter(|x| x.socket == c.socket)
                    .map(|x| x.id)
                    .collect(),
                Level::Numa => self
                    .cpus
                    .iter()
                    .filter(|x| x.numa == c.numa)
                    .map(|x| x.id)
                    .collect(),
                _ => core.iter().map(|x| x.id).collect(),
            };
            out.extend(add);
        }
        out.sort_unstable();
        out.dedup();
        Ok(Some(out))
    }

    fn rankfile_cores<'a>(
        &self,
        cores: &'a [Vec<Cpu>],
        slots: &Slots,
    ) -> Result<Vec<&'a Vec<Cpu>>, String> {
        match slots {
            Slots::Cores(list) => list
                .iter()
                .map(|&i| {
                    cores.get(i as usize).ok_or_else(|| {
                        format!(
                            "rankfile slot {i}: this host has {} usable core(s)",
                            cores.len()
                        )
                    })
                })
                .collect(),
            Slots::SocketCores(socket, list) => {
                let mine: Vec<&Vec<Cpu>> =
                    cores.iter().filter(|c| c[0].socket == *socket).collect();
                list.iter()
                    .map(|&i| {
                        mine.get(i as usize).copied().ok_or_else(|| {
                            format!(
                                "rankfile slot {socket}:{i}: socket {socket} has {} usable core(s)",
                                mine.len()
                            )
                        })
                    })
                    .collect()
            }
        }
    }

    /// How a report names `cpus`: the cores and sockets they cover.
    pub fn describe(&self, cpus: &[u32]) -> String {
        let mut cores: Vec<(u32, u32)> = Vec::new();
        for c in self.cpus.iter().filter(|c| cpus.contains(&c.id)) {
            if !cores.contains(&(c.socket, c.core)) {
                cores.push((c.socket, c.core));
            }
        }
        let mut s = format!("cpus {}", list_text(cpus));
        let _ = write!(s, " (");
        for (i, (socket, core)) in cores.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(s, "socket {socket} core {core}");
        }
        s.push(')');
        s
    }
}

/// A CPU set for `sched_setaffinity`, built before fork so the child only
/// makes the system call.
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The set of `cpus` (numbers past the set's capacity are left out).
    pub fn new(cpus: &[u32]) -> CpuSet {
        // SAFETY: cpu_set_t is plain bits; all zeroes is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            if (c as usize) < libc::CPU_SETSIZE as usize {
                // SAFETY: `c` is below CPU_SETSIZE, checked above.
                unsafe { libc::CPU_SET(c as usize, &mut set) };
            }
        }
        CpuSet(set)
    }

    /// Binds the calling process. Async-signal-safe: one system call.
    pub fn apply(&self) -> std::io::Result<()> {
        // SAFETY: the set is a valid cpu_set_t of the size passed; pid 0 is
        // the caller.
        let rc =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// The CPUs the calling process may run on.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: as in CpuSet::new.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is writable and of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        return (0..n).collect();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect()
}

/// NUMA nodes and their CPUs, from sysfs (empty where it says nothing).
fn numa_nodes() -> Vec<(u32, Vec<u32>)> {
    let Ok(dir) = std::fs::read_dir("/sys/devices/system/node") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_prefix("node"))
            .and_then(|s| s.parse().ok())
        else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(entry.path().join("cpulist")) {
            if let Ok(cpus) = parse_list(text.trim()) {
                out.push((n, cpus));
            }
        }
    }
    out
}

/// Parses a list like `0,2-4` (empty: no numbers).
pub fn parse_list(s: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    if s.is_empty() {
        return Ok(out);
    }
    for part in s.split(',') {
        let num = |t: &str| {
            t.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{s}` is not a list of numbers like 0,2-3"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a || b - a > 65536 {
                    return Err(format!("`{part}` is not a range"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    Ok(out)
}

/// Parses a rankfile's `slot=` value: `0-1` (cores) or `1:0-1` (socket:cores).
pub fn parse_slots(s: &str) -> Result<Slots, String> {
    match s.split_once(':') {
        Some((socket, cores)) => Ok(Slots::SocketCores(
            socket
                .parse()
                .map_err(|_| format!("slot `{s}`: `{socket}` is not a socket number"))?,
            parse_list(cores)?,
        )),
        None => Ok(Slots::Cores(parse_list(s)?)),
    }
    .and_then(|slots| match &slots {
        Slots::Cores(c) | Slots::SocketCores(_, c) if c.is_empty() => {
            Err(format!("slot `{s}` names no core"))
        }
        _ => Ok(slots),
    })
}

/// `0-2,5` for `[0, 1, 2, 5]`.
pub fn list_text(v: &[u32]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if !s.is_empty() {
            s.push(',');
        }
        if j > i {
            let _ = write!(s, "{}-{}", v[i], v[j]);
        } else {
            let _ = write!(s, "{}", v[i]);
        }
        i = j + 1;
    }
    s
}

/// Binds the calling process as `req` asks, on this host (the exec helper's
/// side). Returns the report line to print, if one was asked for.
pub fn bind_self(req: &Request, rank: &str) -> Result<Option<String>, String> {
    let topo = Topology::probe();
    let cpus = topo.cpus_for(req)?;
    if let Some(cpus) = &cpus {
        CpuSet::new(cpus)
            .apply()
            .map_err(|e| format!("cannot bind to cpus {}: {e}", list_text(cpus)))?;
    }
    Ok(req
        .report
        .then(|| report_line(rank, &topo, cpus.as_deref())))
}

/// `--report-bindings`' line for one rank.
pub fn report_line(rank: &str, topo: &Topology, cpus: Option<&[u32]>) -> String {
    let host = super::hosts::local_hostname();
    match cpus {
        Some(c) => format!("rank {rank} on {host} bound to {}", topo.describe(c)),
        None => format!("rank {rank} on {host} not bound"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topo(sockets: u32, cores: u32, threads: u32) -> Topology {
        // Linux numbers the first thread of every core before the second ones.
        let mut cpus = Vec::new();
        for t in 0..threads {
            for s in 0..sockets {
                for c in 0..cores {
                    cpus.push(Cpu {
                        id: t * sockets * cores + s * cores + c,
                        socket: s,
                        core: c,
                        numa: s,
                    });
                }
            }
        }
        cpus.sort_by_key(|c| c.id);
        Topology { cpus }
    }

    fn req(level: Level, local_rank: u32, local_size: u32) -> Request {
        Request {
            level,
            local_rank,
            local_size,
            cpus_per_rank: 1,
            overload: false,
            slots: None,
            report: false,
        }
    }

    #[test]
    fn auto_binds_to_cores_when_the_ranks_fit_and_not_otherwise() {
        let t = topo(1, 2, 1);
        assert_eq!(t.cpus_for(&req(Level::Auto, 1, 2)), Ok(Some(vec![1])));
        assert_eq!(t.cpus_for(&req(Level::Auto, 1, 3)), Ok(None));
    }

    #[test]
    fn a_core_holds_both_its_hardware_threads_and_hwthread_takes_the_first() {
        let t = topo(1, 4, 2);
        assert_eq!(t.cpus_for(&req(Level::Core, 1, 4)), Ok(Some(vec![1, 5])));
        assert_eq!(t.cpus_for(&req(Level::HwThread, 1, 4)), Ok(Some(vec![1])));
    }

    #[test]
    fn socket_and_numa_levels_take_the_whole_object_of_the_mapped_core() {
        let t = topo(2, 2, 1);
        assert_eq!(t.cpus_for(&req(Level::Socket, 2, 4)), Ok(Some(vec![2, 3])));
        assert_eq!(t.cpus_for(&req(Level::Numa, 0, 4)), Ok(Some(vec![0, 1])));
    }

    #[test]
    fn cpus_per_rank_takes_consecutive_cores() {
        let t = topo(1, 8, 1);
        let mut r = req(Level::Core, 1, 4);
        r.cpus_per_rank = 2;
        assert_eq!(t.cpus_for(&r), Ok(Some(vec![2, 3])));
    }

    #[test]
    fn explicit_binding_of_too_many_ranks_is_an_error_unless_overload_is_allowed() {
        let t = topo(1, 2, 1);
        let e = t.cpus_for(&req(Level::Core, 0, 3)).unwrap_err();
        assert!(
            e.contains("overload-allowed") && e.contains("--bind-to none"),
            "{e}"
        );
        let mut r = req(Level::Core, 2, 3);
        r.overload = true;
        assert_eq!(t.cpus_for(&r), Ok(Some(vec![0])));
    }

    #[test]
    fn rankfile_slots_name_cores_or_socket_cores() {
        let t = topo(2, 2, 1);
        let mut r = req(Level::Auto, 0, 1);
        r.slots = Some(parse_slots("1:1").unwrap());
        assert_eq!(t.cpus_for(&r), Ok(Some(vec![3])));
        r.slots = Some(parse_slots("0-1").unwrap());
        assert_eq!(t.cpus_for(&r), Ok(Some(vec![0, 1])));
        r.slots = Some(parse_slots("9").unwrap());
        assert!(t.cpus_for(&r).unwrap_err().contains("4 usable core(s)"));
        assert!(parse_slots("x:1").is_err() && parse_slots("").is_err());
    }

    #[test]
    fn requests_survive_the_environment() {
        let mut r = req(Level::Numa, 3, 7);
        r.cpus_per_rank = 2;
        r.report = true;
        r.slots = Some(Slots::SocketCores(1, vec![0, 1, 2]));
        assert_eq!(Request::from_env(&r.to_env()), Some(r.clone()));
        r.slots = None;
        r.level = Level::Auto;
        assert_eq!(Request::from_env(&r.to_env()), Some(r));
        assert_eq!(Request::from_env("core;1;2;0;0;0;"), None);
        assert_eq!(Request::from_env("core;1;2"), None);
    }

    #[test]
    fn lists_parse_and_print() {
        assert_eq!(parse_list("0,2-4"), Ok(vec![0, 2, 3, 4]));
        assert_eq!(list_text(&[0, 2, 3, 4, 7]), "0,2-4,7");
        assert!(parse_list("3-1").is_err() && parse_list("a").is_err());
    }

    #[test]
    fn this_process_has_at_least_one_cpu() {
        assert!(!Topology::probe().cpus.is_empty());
    }
}
