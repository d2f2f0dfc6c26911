//! `stormrun`, the job launcher.
//!
//! # Where ranks run
//!
//! Without `--host`/`--hostfile`/`--rankfile`, every rank runs on this
//! machine. With a host list, ranks are placed in rank order, filling each
//! host's slots before the next host, or as `--map-by` says (see [`hosts`]);
//! each is bound on its host as [`bind`] describes. A host named `localhost`,
//! `127.0.0.1` or this machine's host name runs its ranks here by
//! fork/exec; any other host runs them through the launch agent (see
//! [`agent`]): `<agent> <host> env VAR=VALUE... <stormrun> --exec-with-pmi-key
//! <program> <args>`.
//!
//! # What a rank gets
//!
//! Every local rank inherits stormrun's environment (minus any `PMI_*`
//! variables of a launcher above it); a remote rank gets whatever
//! environment the agent gives it. Then, for every rank, the `-x` and
//! `--mca` settings and:
//!
//! | variable | value |
//! |---|---|
//! | `PMI_FD` | local ranks: descriptor of the rank's PMI-1 socket (see [`crate::pmi`]) |
//! | `PMI_PORT`, `PMI_ID` | remote ranks: `ADDR:PORT` of stormrun's PMI server, and the id to send in `cmd=initack` (the rank) — see [`crate::pmi::port`] and [`address`] |
//! | `STORMPI_PMI_KEY` | the rank's PMI key (see [`crate::pmi::port`]); a remote rank gets it on its agent's stdin instead, and stormrun's exec helper on its host puts it here (see [`agent`]) |
//! | `PMI_RANK`, `PMI_SIZE` | rank in the job, number of ranks |
//! | `STORMPI_JOBID` | job id: `<stormrun pid>-<8 hex digits>`, only `[0-9a-f-]` |
//! | `STORMPI_NODE` | the node the rank runs on: the host name as given for remote ranks, this machine's host name for local ones. Ranks with the same value share a node (the library's node layout follows it, so network namespaces of one machine count as separate nodes) |
//! | `STORMPI_LOCAL_RANK`, `STORMPI_LOCAL_SIZE` | rank and rank count on this node |
//! | `STORMPI_NUM_CORES` | cores usable on the rank's host before binding (for a remote rank set by the exec helper there) |
//! | `STORMPI_BIND_REQUEST` | remote ranks: how the exec helper binds them (see [`bind`]); removed before the program runs |
//! | `STORMPI_MCA_<NAME>` | value of `--mca NAME VALUE` |
//! | `STORMPI_PARENT_PORT` | ranks of a job started by `MPI_Comm_spawn`: the port their parents wait at (see [`spawned`]) |
//! | `STORMPI_MCA_CMDLINE` | the NAMEs of those, comma-separated (the library reports their source as the command line) |
//!
//! Each rank (for a remote rank: its agent) runs in its own process group;
//! stdin is `/dev/null` except for rank 0, which inherits stormrun's stdin
//! when that is not a terminal (a remote rank's stdin is a pipe that starts
//! with its key; a remote rank 0's then carries stormrun's stdin).
//!
//! # Shared memory
//!
//! Every file a job creates in `/dev/shm` must be named
//! `stormpi-<STORMPI_JOBID>-<anything>`. stormrun deletes all such files
//! on this machine when the job ends, however it ends (short of stormrun
//! itself being SIGKILLed). Files on other hosts are not removed.
//!
//! # Output and failure
//!
//! Output is forwarded a whole line at a time (`--tag-output` prefixes
//! `[1,RANK]<stdout>:` / `[1,RANK]<stderr>:` as Open MPI does); a remote
//! rank's output arrives through its agent's stdout and stderr. The first
//! rank to exit non-zero, die of a signal or call abort through PMI ends the
//! job: the others get SIGTERM, then SIGKILL after one second, stormrun
//! prints one line naming the rank (and its host, if remote) and the cause,
//! and exits with that rank's status (128+N for signal N, the abort code for
//! an abort — 1 if that code is 0 mod 256). A remote rank's status is what
//! its agent exits with (ssh passes the remote status on; `ip netns exec`
//! *is* the rank). `--timeout` ends a job with status 124.

pub mod address;
pub mod agent;
pub mod args;
pub mod bind;
pub mod hosts;
pub mod job;
pub mod shm;
pub mod signals;
pub mod spawned;
pub mod stdio;

use std::ffi::OsString;
use std::hash::{BuildHasher, Hasher};

use args::{Command, Export, LaunchSpec};
use hosts::{Host, MapBy};

/// Exit status for command-line errors.
pub const USAGE_EXIT: i32 = 2;

/// Runs stormrun with the given arguments (without the program name) and
/// returns its exit status. Installs signal handlers: call it once, from the
/// process's main thread.
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    let spec = match args::parse(argv) {
        Ok(Command::Run(spec)) => *spec,
        Ok(Command::Help) => {
            print!("{}", args::help_text());
            return 0;
        }
        Ok(Command::Version) => {
            println!("stormrun (stormpi) {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Err(e) => {
            eprintln!("stormrun: {e}");
            eprintln!("Usage: stormrun [options] [-n N] PROGRAM [ARGS...]  (see stormrun --help)");
            return USAGE_EXIT;
        }
    };
    let machine = Machine {
        cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
        hostname: hosts::local_hostname(),
        topology: bind::Topology::probe(),
    };
    let config = match configure(&spec, &machine, new_jobid()) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("stormrun: {msg}");
            return USAGE_EXIT;
        }
    };
    for note in &config.notes {
        eprintln!("stormrun: {note}");
    }
    let signals = match signals::SignalPipe::install(&[
        libc::SIGCHLD,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGTSTP,
        libc::SIGCONT,
    ]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("stormrun: cannot set up signal handling: {e}");
            return 1;
        }
    };
    // The launcher holds three descriptors per rank (PMI socket, stdout and
    // stderr pipes), a few of its own, and with remote ranks a listening
    // socket and up to 64 connections that have yet to identify.
    let ranks: u64 = config.apps.iter().map(|a| u64::from(a.np)).sum();
    crate::sys::ensure_fd_limit(3 * ranks + 128);
    job::run(config, signals)
}

/// What stormrun knows about the machine it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    /// Usable cores.
    pub cores: u32,
    /// Host name (the local ranks' `STORMPI_NODE`).
    pub hostname: String,
    /// The CPUs stormrun may use, for binding local ranks.
    pub topology: bind::Topology,
}

/// Turns a parsed command line into a job: rank counts, placement on hosts
/// (with the oversubscription check), the PMI address for remote ranks, and
/// the environment for the ranks.
pub fn configure(
    spec: &LaunchSpec,
    machine: &Machine,
    jobid: String,
) -> Result<job::JobConfig, String> {
    let opts = &spec.options;
    let hosts = host_list(spec)?;
    let rankfile = match &opts.rankfile {
        None => None,
        Some(_) if !hosts.is_empty() => {
            return Err(
                "--rankfile names each rank's host; do not combine it with --host or \
                        --hostfile"
                    .into(),
            )
        }
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read rankfile {}: {e}", path.display()))?;
            Some(
                hosts::parse_rankfile(&text)
                    .map_err(|e| format!("rankfile {}: {e}", path.display()))?,
            )
        }
    };
    let default_np = match (&rankfile, opts.map_by) {
        (Some(rf), _) => rf.len() as u32,
        (None, MapBy::PerNode(n)) => n.saturating_mul(hosts.len().max(1) as u32),
        (None, _) if hosts.is_empty() => machine.cores,
        (None, _) => u32::try_from(hosts::total_slots(&hosts)).unwrap_or(u32::MAX),
    };
    let counts = spec.rank_counts(default_np).map_err(|e| e.0)?;
    let total: u64 = counts.iter().map(|&n| u64::from(n)).sum();
    if total > u64::from(u32::MAX) {
        return Err(format!("{total} ranks are too many"));
    }
    let total = total as u32;
    let Layout {
        mut placement,
        remote,
        notes,
    } = if let Some(rf) = &rankfile {
        if total as usize != rf.len() {
            return Err(format!(
                "the rankfile places {} rank(s) but {total} were requested",
                rf.len()
            ));
        }
        let named = hosts::merge(
            rf.iter()
                .map(|e| Host {
                    name: e.host.clone(),
                    slots: 1,
                })
                .collect(),
        );
        let at = rf
            .iter()
            .map(|e| named.iter().position(|h| h.name == e.host).unwrap_or(0))
            .collect();
        place_at(spec, machine, &named, at)?
    } else if hosts.is_empty() {
        if let MapBy::PerNode(n) = opts.map_by {
            if total > n {
                return Err(format!(
                    "{total} ranks requested but ppr:{n}:node on this one node places {n}"
                ));
            }
        }
        if total > machine.cores && !opts.oversubscribe {
            return Err(format!(
                "{total} ranks requested but this node has only {} core(s); \
                 pass --oversubscribe to run more ranks than cores",
                machine.cores
            ));
        }
        let here = job::Placement {
            node: machine.hostname.clone(),
            remote: None,
            local_rank: 0,
            local_size: total,
            binding: job::Binding::Local(None),
        };
        let placement = (0..total)
            .map(|r| job::Placement {
                local_rank: r,
                ..here.clone()
            })
            .collect();
        Layout {
            placement,
            remote: None,
            notes: Vec::new(),
        }
    } else {
        let at = hosts::place(&hosts, total, opts.oversubscribe, opts.map_by)?;
        place_at(spec, machine, &hosts, at)?
    };
    for (rank, p) in placement.iter_mut().enumerate() {
        let req = bind::Request {
            level: opts.bind_to,
            local_rank: p.local_rank,
            local_size: p.local_size,
            cpus_per_rank: opts.cpus_per_rank.unwrap_or(1),
            overload: opts.bind_overload,
            slots: rankfile.as_ref().map(|rf| rf[rank].slots.clone()),
            report: opts.report_bindings,
        };
        p.binding = if p.remote.is_some() {
            job::Binding::Remote(req)
        } else {
            job::Binding::Local(
                machine
                    .topology
                    .cpus_for(&req)
                    .map_err(|e| format!("rank {rank}: {e}"))?,
            )
        };
    }

    if let Some(dir) = &opts.wdir {
        if placement.iter().any(|p| p.remote.is_none()) && !dir.is_dir() {
            return Err(format!("--wdir {}: not a directory here", dir.display()));
        }
    }
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    for export in &opts.exports {
        match export {
            Export::Set(var, value) => env.push((var.into(), value.clone())),
            Export::Inherit(var) => match std::env::var_os(var) {
                Some(value) => env.push((var.into(), value)),
                None => eprintln!("stormrun: warning: -x {var}: {var} is not set; not exported"),
            },
        }
    }
    for (name, value) in &opts.mca {
        env.push((format!("STORMPI_MCA_{name}").into(), value.clone()));
    }
    if !opts.mca.is_empty() {
        // So the library reports these values as set on the command line.
        let names: Vec<&str> = opts.mca.iter().map(|(n, _)| n.as_str()).collect();
        env.push(("STORMPI_MCA_CMDLINE".into(), names.join(",").into()));
    }
    let apps = spec
        .apps
        .iter()
        .zip(&counts)
        .map(|(app, &np)| job::App {
            program: app.program.clone(),
            args: app.args.clone(),
            np,
        })
        .collect();
    Ok(job::JobConfig {
        jobid,
        apps,
        env,
        tag_output: opts.tag_output,
        timeout: match opts.timeout {
            Some(t) => Some(t),
            None => env_timeout()?,
        },
        output_dir: opts.output_dir.clone(),
        wdir: opts.wdir.clone(),
        path: opts.path.clone(),
        report_bindings: opts.report_bindings,
        sessions: opts.sessions,
        cores: machine.cores,
        shm_dir: shm::SHM_DIR.into(),
        placement,
        remote,
        notes,
    })
}

/// `MPIEXEC_TIMEOUT` (seconds), which mpiexec implementations read when no
/// timeout option is given.
fn env_timeout() -> Result<Option<std::time::Duration>, String> {
    match std::env::var("MPIEXEC_TIMEOUT") {
        Err(_) => Ok(None),
        Ok(v) => match v.trim().parse::<f64>() {
            Ok(s) if s > 0.0 && s.is_finite() && s < 1e9 => {
                Ok(Some(std::time::Duration::from_secs_f64(s)))
            }
            _ => Err(format!(
                "MPIEXEC_TIMEOUT must be a positive number of seconds, not `{v}`"
            )),
        },
    }
}

/// The merged host list of `--host` or `--hostfile` (empty if neither).
fn host_list(spec: &LaunchSpec) -> Result<Vec<Host>, String> {
    let opts = &spec.options;
    let list = match (&opts.hostfile, opts.hosts.is_empty()) {
        (None, _) => opts.hosts.clone(),
        (Some(_), false) => {
            return Err("--host and --hostfile cannot be combined; give one host list".into())
        }
        (Some(path), true) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read hostfile {}: {e}", path.display()))?;
            hosts::parse_hostfile(&text).map_err(|e| format!("hostfile {}: {e}", path.display()))?
        }
    };
    Ok(hosts::merge(list))
}

/// Where the ranks of a job run.
struct Layout {
    placement: Vec<job::Placement>,
    remote: Option<job::RemoteLaunch>,
    notes: Vec<String>,
}

/// The placement of ranks on `hosts` (`at`: each rank's host index), and
/// how to reach the remote ones.
fn place_at(
    spec: &LaunchSpec,
    machine: &Machine,
    hosts: &[Host],
    at: Vec<usize>,
) -> Result<Layout, String> {
    let opts = &spec.options;
    let local: Vec<bool> = hosts
        .iter()
        .map(|h| hosts::is_local(&h.name, &machine.hostname))
        .collect();
    // Remote hosts that actually get ranks, in host-list order.
    let used_remote: Vec<usize> = (0..hosts.len())
        .filter(|&i| !local[i] && at.contains(&i))
        .collect();
    let mut notes = Vec::new();
    let mut pmi_ip = vec![None; hosts.len()];
    let remote = if used_remote.is_empty() {
        None
    } else {
        let names: Vec<&str> = used_remote
            .iter()
            .map(|&i| hosts[i].name.as_str())
            .collect();
        let listen = address::choose(opts.pmi_address, &names)?;
        for (&i, &ip) in used_remote.iter().zip(&listen.advertise) {
            pmi_ip[i] = Some(ip);
        }
        notes.extend(listen.notes);
        let text = opts.launch_agent.as_deref().unwrap_or(agent::DEFAULT_AGENT);
        Some(job::RemoteLaunch {
            agent: agent::LaunchAgent::new(text, opts.agent_quote)?,
            pmi_bind: listen.bind,
            unauthenticated: opts.pmi_unauthenticated,
        })
    };
    // Every local host entry is this one machine: one node.
    let node_of = |i: usize| -> &str {
        if local[i] {
            &machine.hostname
        } else {
            &hosts[i].name
        }
    };
    let mut seen: Vec<(&str, u32)> = Vec::new();
    let mut local_rank = Vec::with_capacity(at.len());
    for &i in &at {
        let node = node_of(i);
        match seen.iter_mut().find(|(n, _)| *n == node) {
            Some((_, count)) => {
                local_rank.push(*count);
                *count += 1;
            }
            None => {
                local_rank.push(0);
                seen.push((node, 1));
            }
        }
    }
    let placement = at
        .iter()
        .zip(local_rank)
        .map(|(&i, local_rank)| {
            let node = node_of(i);
            job::Placement {
                node: node.to_string(),
                remote: pmi_ip[i].map(|ip| job::Remote {
                    host: hosts[i].name.clone(),
                    pmi_ip: ip,
                }),
                local_rank,
                local_size: seen.iter().find(|(n, _)| *n == node).map_or(1, |s| s.1),
                binding: job::Binding::Local(None),
            }
        })
        .collect();
    Ok(Layout {
        placement,
        remote,
        notes,
    })
}

/// `<pid>-<8 hex digits>`: unique among concurrent jobs (pid) and across
/// pid reuse (random part), short, and safe in file names.
pub fn new_jobid() -> String {
    // RandomState is seeded from the OS's randomness for each process.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("{}-{:08x}", std::process::id(), h.finish() as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(cores: u32) -> Machine {
        Machine {
            cores,
            hostname: "vm".into(),
            topology: bind::Topology {
                cpus: (0..cores)
                    .map(|id| bind::Cpu {
                        id,
                        socket: 0,
                        core: id,
                        numa: 0,
                    })
                    .collect(),
            },
        }
    }

    fn spec(args: &[&str]) -> LaunchSpec {
        match args::parse(args.iter().map(OsString::from)).unwrap() {
            Command::Run(s) => *s,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn jobids_are_short_and_safe() {
        let a = new_jobid();
        let b = new_jobid();
        assert_ne!(a, b);
        assert!(a.len() <= 20, "{a}");
        assert!(
            a.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'),
            "{a}"
        );
        assert!(a.starts_with(&format!("{}-", std::process::id())));
    }

    #[test]
    fn oversubscription_is_refused_unless_asked() {
        let e = configure(&spec(&["-n", "3", "a"]), &machine(2), "j".into()).unwrap_err();
        assert!(
            e.contains("3 ranks requested") && e.contains("--oversubscribe"),
            "{e}"
        );
        let e = configure(
            &spec(&["-n", "2", "a", ":", "-n", "1", "b"]),
            &machine(2),
            "j".into(),
        );
        assert!(e.is_err());
        assert!(configure(
            &spec(&["--oversubscribe", "-n", "3", "a"]),
            &machine(2),
            "j".into()
        )
        .is_ok());
        let c = configure(&spec(&["a"]), &machine(2), "j".into()).unwrap();
        assert_eq!(c.apps[0].np, 2, "default is one rank per core");
    }

    #[test]
    fn mca_and_exports_become_environment() {
        let c = configure(
            &spec(&[
                "-x",
                "A=1",
                "--mca",
                "btl",
                "sm,self",
                "-x",
                "STORMPI_SURELY_UNSET_VAR",
                "p",
            ]),
            &machine(4),
            "j".into(),
        )
        .unwrap();
        assert_eq!(
            c.env,
            vec![
                (OsString::from("A"), OsString::from("1")),
                (OsString::from("STORMPI_MCA_btl"), OsString::from("sm,self")),
                (OsString::from("STORMPI_MCA_CMDLINE"), OsString::from("btl")),
            ]
        );
    }

    /// (node, remote host, local rank, local size) of each rank.
    fn layout(c: &job::JobConfig) -> Vec<(String, Option<String>, u32, u32)> {
        c.placement
            .iter()
            .map(|p| {
                (
                    p.node.clone(),
                    p.remote.as_ref().map(|r| r.host.clone()),
                    p.local_rank,
                    p.local_size,
                )
            })
            .collect()
    }

    fn row(node: &str, remote: bool, lr: u32, ls: u32) -> (String, Option<String>, u32, u32) {
        (node.into(), remote.then(|| node.to_string()), lr, ls)
    }

    #[test]
    fn ranks_without_hosts_are_local() {
        let c = configure(&spec(&["-n", "2", "a"]), &machine(2), "j".into()).unwrap();
        assert_eq!(layout(&c), [row("vm", false, 0, 2), row("vm", false, 1, 2)]);
        assert!(c.remote.is_none());
    }

    #[test]
    fn mpmd_contexts_continue_over_the_hosts() {
        let c = configure(
            &spec(&[
                "--host",
                "h1:2,localhost:1,h2:2",
                "--pmi-address",
                "10.1.2.1",
                "-n",
                "3",
                "a",
                ":",
                "-n",
                "2",
                "b",
            ]),
            &machine(1),
            "j".into(),
        )
        .unwrap();
        assert_eq!(
            layout(&c),
            [
                row("h1", true, 0, 2),
                row("h1", true, 1, 2),
                row("vm", false, 0, 1),
                row("h2", true, 0, 2),
                row("h2", true, 1, 2),
            ]
        );
        let remote = c.remote.as_ref().unwrap();
        assert_eq!(remote.pmi_bind, "10.1.2.1:0".parse().unwrap());
        assert_eq!(remote.agent.words, ["ssh"]);
        assert!(remote.agent.quote);
        assert_eq!(
            c.placement[0].remote.as_ref().unwrap().pmi_ip,
            "10.1.2.1".parse::<std::net::IpAddr>().unwrap()
        );
        assert_eq!(c.apps.iter().map(|a| a.np).collect::<Vec<_>>(), [3, 2]);
    }

    #[test]
    fn slots_limit_ranks_unless_oversubscribed() {
        let args = |extra: &[&'static str]| {
            let mut v = vec!["--host", "localhost:2,vm:1", "-n", "4"];
            v.splice(0..0, extra.iter().copied());
            v.push("a");
            spec(&v)
        };
        let e = configure(&args(&[]), &machine(64), "j".into()).unwrap_err();
        assert!(e.contains("only 3 slot(s)"), "{e}");
        let c = configure(&args(&["--oversubscribe"]), &machine(1), "j".into()).unwrap();
        // localhost and the machine's name are one node; all local.
        assert_eq!(
            layout(&c),
            (0..4).map(|r| row("vm", false, r, 4)).collect::<Vec<_>>()
        );
        assert!(c.remote.is_none());
        // Without -n: one rank per slot.
        let c = configure(
            &spec(&["--host", "localhost:3", "a"]),
            &machine(1),
            "j".into(),
        )
        .unwrap();
        assert_eq!(c.apps[0].np, 3);
    }

    #[test]
    fn hostfiles_are_read() {
        let dir = std::env::temp_dir().join(format!("stormpi-hostfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("hosts");
        std::fs::write(&file, "# test\nlocalhost slots=2\nh9:1\n").unwrap();
        let path = file.to_str().unwrap();
        let c = configure(
            &spec(&[
                "--hostfile",
                path,
                "--launch-agent",
                "ip netns exec",
                "--pmi-address",
                "127.0.0.1",
                "a",
            ]),
            &machine(1),
            "j".into(),
        )
        .unwrap();
        assert_eq!(
            layout(&c),
            [
                row("vm", false, 0, 2),
                row("vm", false, 1, 2),
                row("h9", true, 0, 1)
            ]
        );
        assert!(!c.remote.as_ref().unwrap().agent.quote);
        std::fs::write(&file, "h1 slots=x\n").unwrap();
        let e = configure(&spec(&["--hostfile", path, "a"]), &machine(1), "j".into()).unwrap_err();
        assert!(e.contains("line 1"), "{e}");
        let e = configure(
            &spec(&["--hostfile", path, "--host", "a", "a"]),
            &machine(1),
            "j".into(),
        )
        .unwrap_err();
        assert!(e.contains("cannot be combined"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
        let e = configure(&spec(&["--hostfile", path, "a"]), &machine(1), "j".into()).unwrap_err();
        assert!(e.contains("cannot read hostfile"), "{e}");
    }
}
