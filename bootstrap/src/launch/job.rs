//! Running one job: start the ranks (here, or on other hosts through the
//! launch agent), serve PMI, forward stdio and signals, notice the first
//! failure, tear the job down, clean up.
//!
//! Everything happens in one poll loop: the signal pipe, the ranks' output
//! pipes, their PMI sockets (socketpairs for local ranks, TCP connections
//! for remote ones), the PMI listening socket and the TCP connections that
//! have yet to identify. Every wait is bounded: teardown escalates from
//! SIGTERM to SIGKILL after [`GRACE`], gives up on unkillable processes
//! after [`KILL_WAIT`] more, and stops reading output pipes held open by
//! leftover grandchildren after [`DRAIN`]; an unidentified TCP connection
//! is dropped after [`crate::pmi::IDENTIFY_TIMEOUT`].

use std::ffi::{OsStr, OsString};
use std::io::{IsTerminal, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::agent::{self, LaunchAgent};
use super::args::Sessions;
use super::bind;
use super::shm;
use super::signals::SignalPipe;
use super::spawned::{self, Inherited, Spawned};
use super::stdio::{self, Dest, Forwarder};
use crate::auth::Key;
use crate::pmi::spawn::SpawnCommand;
use crate::pmi::{port, PmiServer, ServerEvent};
use crate::sys::{self, Exit};

/// Time ranks get to exit after SIGTERM (or a forwarded SIGINT) before
/// they are sent SIGKILL.
pub const GRACE: Duration = Duration::from_secs(1);
/// Time allowed after SIGKILL before stormrun gives up waiting.
pub const KILL_WAIT: Duration = Duration::from_secs(3);
/// Time output pipes are still read after the last rank exited.
pub const DRAIN: Duration = Duration::from_secs(1);
/// Children are polled for exit at least this often, in case a SIGCHLD
/// notification was lost (the signal pipe was full).
const REAP_TICK: Duration = Duration::from_millis(200);

/// Exit status when `--timeout` expires (as coreutils' `timeout`).
pub const TIMEOUT_EXIT: i32 = 124;

/// One program of the job with its resolved rank count.
#[derive(Debug, Clone)]
pub struct App {
    /// Program to execute.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Number of ranks running it.
    pub np: u32,
}

/// Everything needed to run a job.
#[derive(Debug, Clone)]
pub struct JobConfig {
    /// The job id (see [`crate::launch`] for its form).
    pub jobid: String,
    /// The programs, in rank order.
    pub apps: Vec<App>,
    /// Extra environment for every rank (`-x`, `--mca`), applied before the
    /// launcher's own variables.
    pub env: Vec<(OsString, OsString)>,
    /// Prefix output lines with `[1,RANK]<stream>:`.
    pub tag_output: bool,
    /// Kill the job after this long.
    pub timeout: Option<Duration>,
    /// `--output-filename`: per-rank output files under this directory, and
    /// whether output also goes to stormrun's own.
    pub output_dir: Option<(PathBuf, bool)>,
    /// `--wdir`: the ranks' working directory.
    pub wdir: Option<PathBuf>,
    /// `--path`: directories searched for the program before `PATH`.
    pub path: Option<OsString>,
    /// Print each local rank's binding as it starts (remote ones: their
    /// exec helper prints it).
    pub report_bindings: bool,
    /// Whether local ranks lead sessions of their own.
    pub sessions: Sessions,
    /// Cores of this node, passed to ranks as `STORMPI_NUM_CORES`.
    pub cores: u32,
    /// Directory holding the job's shared-memory files (`/dev/shm`).
    pub shm_dir: OsString,
    /// Where each rank runs, in rank order.
    pub placement: Vec<Placement>,
    /// How remote ranks are started; `None` when every rank is local.
    pub remote: Option<RemoteLaunch>,
    /// Messages for the user about the configuration (printed at start).
    pub notes: Vec<String>,
}

/// Where one rank runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Its `STORMPI_NODE`.
    pub node: String,
    /// Set for a rank started through the launch agent.
    pub remote: Option<Remote>,
    /// Its `STORMPI_LOCAL_RANK`.
    pub local_rank: u32,
    /// Its `STORMPI_LOCAL_SIZE`.
    pub local_size: u32,
    /// Where it may run.
    pub binding: Binding,
}

/// A rank's binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Binding {
    /// A local rank: these CPUs, or unbound.
    Local(Option<Vec<u32>>),
    /// A remote rank: bound by stormrun's exec helper on its host, as asked.
    Remote(bind::Request),
}

/// A rank on another host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remote {
    /// The host, as given (passed to the agent).
    pub host: String,
    /// The address its PMI client connects to (`PMI_PORT`'s address).
    pub pmi_ip: IpAddr,
}

/// How ranks on other hosts are started and reach the PMI server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteLaunch {
    /// The launch agent.
    pub agent: LaunchAgent,
    /// Where the PMI server listens (port 0: any free port).
    pub pmi_bind: SocketAddr,
    /// Serve remote ranks that do not prove the job's key (`--pmi-unauthenticated`).
    pub unauthenticated: bool,
}

/// A rank's process and the pipes of its output.
#[derive(Debug)]
struct Rank {
    /// Process id; 0 if it was never started.
    pid: i32,
    program: String,
    /// The host of a remote rank.
    host: Option<String>,
    exit: Option<Exit>,
    stdout: Option<Forwarder>,
    stderr: Option<Forwarder>,
}

impl Rank {
    fn running(&self) -> bool {
        self.pid > 0 && self.exit.is_none()
    }
}

/// Why the job ended early: printed once, at the end.
#[derive(Debug)]
struct Failure {
    message: String,
    exit_code: i32,
}

/// Progress of killing the job.
#[derive(Debug)]
struct Teardown {
    sigkill_at: Instant,
    sigkill_sent: bool,
    give_up_at: Instant,
}

/// What a polled descriptor belongs to.
#[derive(Debug, Clone, Copy)]
enum Source {
    Signals,
    Pmi(u32),
    PmiListener,
    PmiPending(u64),
    Output(u32, Dest),
}

struct Job {
    jobid: String,
    shm_dir: OsString,
    ranks: Vec<Rank>,
    server: PmiServer,
    signals: SignalPipe,
    failure: Option<Failure>,
    teardown: Option<Teardown>,
    timeout: Option<(Duration, Instant)>,
    drain_until: Option<Instant>,
    next_reap: Instant,
    /// The port remote ranks connect to (0 when none are remote).
    pmi_port: u16,
    /// This job's locked mark file in the shared-memory directory (see
    /// [`shm::mark_launcher`]), held until the launcher exits.
    _mark: Option<std::fs::File>,
    /// Jobs the ranks started with `MPI_Comm_spawn` (see [`spawned`]).
    spawned: Vec<Spawned>,
    /// What those jobs inherit from this one.
    inherited: Inherited,
    /// This job was spawned: its parents wait for every rank to meet them in `MPI_Init`.
    is_spawned: bool,
}

/// Runs the job to completion and returns stormrun's exit status: 0 when
/// every rank exited 0, otherwise the status of the first failure.
pub fn run(cfg: JobConfig, signals: SignalPipe) -> i32 {
    let appnums: Vec<u32> = cfg
        .apps
        .iter()
        .enumerate()
        .flat_map(|(i, app)| std::iter::repeat_n(i as u32, app.np as usize))
        .collect();
    let size = appnums.len() as u32;
    let now = Instant::now();
    let shm_dir = Path::new(&cfg.shm_dir);
    // What launchers killed outright left behind goes now; then this job's own
    // mark, so that its files go the same way if this launcher is killed.
    let _ = shm::remove_stale_jobs(shm_dir);
    let mark = shm::mark_launcher(shm_dir, &cfg.jobid).ok();
    let mut job = Job {
        _mark: mark,
        jobid: cfg.jobid.clone(),
        shm_dir: cfg.shm_dir.clone(),
        ranks: Vec::with_capacity(appnums.len()),
        server: PmiServer::new(&format!("kvs_{}", cfg.jobid), appnums.clone()),
        signals,
        failure: None,
        teardown: None,
        timeout: cfg.timeout.map(|t| (t, now + t)),
        drain_until: None,
        next_reap: now,
        pmi_port: 0,
        spawned: Vec::new(),
        inherited: Inherited {
            env: cfg.env.clone(),
            tag_output: cfg.tag_output,
            wdir: cfg.wdir.clone(),
        },
        is_spawned: std::env::var_os(crate::pmi::spawn::PARENT_PORT_ENV).is_some(),
    };

    match Key::generate() {
        Ok(key) => job.server.require_key(key),
        Err(e) => {
            job.fail(
                format!("no random bytes for the job's key: {e}; job aborted"),
                1,
            );
            return job.finish();
        }
    }
    if let Some(remote) = &cfg.remote {
        job.server.allow_unauthenticated(remote.unauthenticated);
        match job.server.listen(remote.pmi_bind) {
            Ok(bound) => job.pmi_port = bound.port(),
            Err(e) => {
                job.fail(
                    format!(
                        "cannot listen for PMI connections of remote ranks on {}: {e}; \
                         job aborted (see --pmi-address)",
                        remote.pmi_bind
                    ),
                    1,
                );
                return job.finish();
            }
        }
    }
    for rank in 0..size {
        let app = &cfg.apps[appnums[rank as usize] as usize];
        match job.spawn(&cfg, app, rank, size) {
            Ok(r) => job.ranks.push(r),
            Err(e) => {
                let code = match e.kind() {
                    std::io::ErrorKind::NotFound => 127,
                    std::io::ErrorKind::PermissionDenied => 126,
                    _ => 1,
                };
                let what = match cfg.placement[rank as usize]
                    .remote
                    .as_ref()
                    .zip(cfg.remote.as_ref())
                {
                    Some((r, launch)) => format!(
                        "rank {rank} on {} (`{}` through the launch agent `{}`)",
                        r.host,
                        app.program.to_string_lossy(),
                        launch.agent.words.join(" ")
                    ),
                    None => format!("rank {rank} (`{}`)", app.program.to_string_lossy()),
                };
                job.fail(format!("cannot start {what}: {e}; job aborted"), code);
                break;
            }
        }
    }
    job.supervise();
    job.finish()
}

impl Job {
    /// Starts one rank: locally by fork/exec with a PMI socketpair, or
    /// through the launch agent with PMI over TCP.
    fn spawn(&mut self, cfg: &JobConfig, app: &App, rank: u32, size: u32) -> std::io::Result<Rank> {
        let place = &cfg.placement[rank as usize];
        // -x and --mca first: the launcher's own variables win.
        let mut env: Vec<(OsString, OsString)> = cfg.env.clone();
        let mut set = |k: &str, v: String| env.push((k.into(), v.into()));
        let mut pmi_fd: Option<OwnedFd> = None;
        let remote = match (&place.remote, &cfg.remote) {
            (Some(r), Some(launch)) => {
                self.server.expect_remote(rank);
                set(
                    "PMI_PORT",
                    SocketAddr::new(r.pmi_ip, self.pmi_port).to_string(),
                );
                set("PMI_ID", rank.to_string());
                Some((r, &launch.agent))
            }
            _ => {
                let fd = self.server.connect_rank(rank)?;
                set("PMI_FD", fd.as_raw_fd().to_string());
                pmi_fd = Some(fd);
                None
            }
        };
        let key = self.server.rank_key(rank);
        if let (Some(key), None) = (&key, &remote) {
            set(port::KEY_ENV, key.to_hex());
        }
        set("PMI_RANK", rank.to_string());
        set("PMI_SIZE", size.to_string());
        set("STORMPI_JOBID", cfg.jobid.clone());
        set("STORMPI_NODE", place.node.clone());
        set("STORMPI_LOCAL_RANK", place.local_rank.to_string());
        set("STORMPI_LOCAL_SIZE", place.local_size.to_string());
        if remote.is_none() {
            // Another host's core count is its own business: the exec
            // helper there says it.
            set("STORMPI_NUM_CORES", cfg.cores.to_string());
        }
        let cpus = match &place.binding {
            Binding::Local(cpus) => cpus.as_deref(),
            Binding::Remote(req) => {
                set(bind::REQUEST_ENV, req.to_env());
                None
            }
        };
        if cfg.report_bindings && remote.is_none() {
            let topo = bind::Topology::probe();
            eprintln!(
                "stormrun: {}",
                bind::report_line(&rank.to_string(), &topo, cpus)
            );
        }
        let cpu_set = cpus.map(bind::CpuSet::new);
        if remote.is_some() {
            // The exec helper on the far side applies these there.
            if let Some(dir) = &cfg.wdir {
                set(agent::WDIR_ENV, dir.to_string_lossy().into_owned());
            }
            if let Some(dirs) = &cfg.path {
                set(agent::PATH_ENV, dirs.to_string_lossy().into_owned());
            }
        }
        let mut cmd = match remote {
            None => {
                let program = match &cfg.wdir {
                    // Relative to where stormrun was started, not to --wdir.
                    Some(_) => remote_program(&app.program),
                    None => app.program.clone(),
                };
                let mut cmd = Command::new(program);
                cmd.args(&app.args).envs(env.iter().map(|(k, v)| (k, v)));
                if let Some(dir) = &cfg.wdir {
                    cmd.current_dir(dir);
                }
                if let Some(dirs) = &cfg.path {
                    cmd.env("PATH", agent::search_path(dirs));
                }
                cmd
            }
            Some((r, agent)) => {
                // The key travels on stdin, through stormrun's exec helper there.
                let mut args = vec![agent::KEY_HELPER_FLAG.into(), remote_program(&app.program)];
                args.extend(app.args.iter().cloned());
                let helper = std::env::current_exe()?;
                let argv = agent.command_line(&r.host, &env, helper.as_os_str(), &args);
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..]);
                cmd
            }
        };
        // A launcher above us (Hydra, Slurm) may have left its own PMI
        // variables in our environment; they must not reach our ranks (nor
        // an agent that passes its environment on, as `ip netns exec` does).
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("PMI_") && !env.iter().any(|(k, _)| *k == key) {
                cmd.env_remove(key);
            }
        }
        // Rank 0 gets our stdin unless it is a terminal: the ranks run in
        // their own process groups (where reading the terminal would stop
        // them) or sessions (without the terminal, which the shell reads).
        let stdin_ok = rank == 0 && !std::io::stdin().is_terminal();
        cmd.stdin(if remote.is_some() {
            Stdio::piped()
        } else if stdin_ok {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        // SAFETY: getpid is async-signal-safe and has no preconditions.
        let launcher_pid = unsafe { libc::getpid() };
        let raw_pmi_fd = pmi_fd.as_ref().map(|fd| fd.as_raw_fd());
        // Oversubscribed ranks hand their cores to each other with `sched_yield`, which under
        // EEVDF gives the core away only inside the yielder's session's autogroup. In sessions
        // of their own they sleep when idle instead (`mpi_idle_sleep`), which hands the core to
        // any process but waits a sleep per handoff: 4 ranks on 2 cores, an 8-byte allreduce
        // 45-120 µs against 15-26 µs in one session (2.2 ms yielding). So they stay in
        // stormrun's session unless `--own-sessions` trades latency for the machine share (a
        // 1 GiB collective read 0.96x the best of Open MPI and MPICH instead of 0.47x).
        let own_session = remote.is_some()
            || match cfg.sessions {
                Sessions::Auto => place.local_size <= cfg.cores,
                Sessions::Own => true,
                Sessions::Same => false,
            };
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe system calls (setsid or setpgid, prctl, getppid,
        // sched_setaffinity, fcntl); it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                // A session of its own (so also a process group of its own,
                // numbered by its pid): the kernel's autogroup scheduling
                // shares the CPU between sessions first, so each rank gets a
                // share of a loaded machine as MPICH's Hydra's ranks do, not
                // one share between all. Else a process group of its own.
                // Signals to the group reach anything the rank starts; a
                // terminal's Ctrl-C reaches only stormrun, which forwards it.
                // The fork made a new process that leads no group, so
                // neither call can fail.
                let r = if own_session {
                    libc::setsid()
                } else {
                    libc::setpgid(0, 0)
                };
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // If stormrun dies without tearing the job down (SIGKILL),
                // the kernel kills the rank (or its agent) instead of
                // leaving it behind.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != launcher_pid {
                    return Err(std::io::Error::other("launcher exited during spawn"));
                }
                if let Some(set) = &cpu_set {
                    set.apply()?;
                }
                match raw_pmi_fd {
                    Some(fd) => sys::clear_cloexec(fd),
                    None => Ok(()),
                }
            });
        }
        let mut child = cmd.spawn()?;
        drop(pmi_fd); // the rank holds its end now
        if let (Some(mut pipe), Some(key)) = (child.stdin.take(), key) {
            // A short line into an empty pipe: it does not block. An agent that already exited
            // (it could not reach the host) closed the pipe: its exit status, read with the
            // others', says what went wrong, so a broken pipe here is no error of its own.
            match pipe.write_all(format!("{}\n", key.to_hex()).as_bytes()) {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                r => r?,
            }
            if stdin_ok {
                // The rest of the agent's stdin is ours (closed when ours ends).
                std::thread::spawn(move || std::io::copy(&mut std::io::stdin().lock(), &mut pipe));
            }
        }
        let files = match &cfg.output_dir {
            Some((dir, copy)) => Some((stdio::rank_files(dir, rank)?, *copy)),
            None => None,
        };
        let forwarder = |pipe: Option<OwnedFd>, dest: Dest| -> std::io::Result<Option<Forwarder>> {
            let prefix = if cfg.tag_output {
                stdio::tag(rank, dest)
            } else {
                Vec::new()
            };
            let tee = files.as_ref().map(|((out, err), copy)| {
                let file = match dest {
                    Dest::Stdout => out,
                    Dest::Stderr => err,
                };
                (file.try_clone(), *copy)
            });
            let tee = match tee {
                Some((file, copy)) => Some((file?, copy)),
                None => None,
            };
            pipe.map(|p| Forwarder::new(p, prefix, dest, tee))
                .transpose()
        };
        let stdout = forwarder(child.stdout.take().map(OwnedFd::from), Dest::Stdout)?;
        let stderr = forwarder(child.stderr.take().map(OwnedFd::from), Dest::Stderr)?;
        // The Child handle is dropped without waiting: ranks are reaped by
        // pid in `reap`.
        Ok(Rank {
            pid: child.id() as i32,
            program: app.program.to_string_lossy().into_owned(),
            host: place.remote.as_ref().map(|r| r.host.clone()),
            exit: None,
            stdout,
            stderr,
        })
    }

    /// The poll loop; returns when every rank has exited and its output is
    /// drained, or when a bounded wait runs out.
    fn supervise(&mut self) {
        let mut fds = Vec::new();
        let mut sources = Vec::new();
        let mut events = Vec::new();
        loop {
            let now = Instant::now();
            if now >= self.next_reap {
                self.reap();
                self.next_reap = now + REAP_TICK;
            }
            self.check_barrier();
            if self.check_timers(now) {
                return;
            }
            // Spawned jobs outlive their parents' ranks, not their parents' launcher.
            if self.ranks.iter().all(|r| !r.running()) && !self.spawned.iter().any(Spawned::running)
            {
                let until = *self.drain_until.get_or_insert(now + DRAIN);
                let output_open = self
                    .ranks
                    .iter()
                    .any(|r| r.stdout.is_some() || r.stderr.is_some());
                if !output_open || now >= until {
                    return;
                }
            }

            self.server.expire_pending(now, &mut events);
            for ev in events.drain(..) {
                self.on_pmi_event(ev);
            }

            fds.clear();
            sources.clear();
            fds.push(sys::pollfd(self.signals.fd(), libc::POLLIN));
            sources.push(Source::Signals);
            if let Some(fd) = self.server.listener_fd() {
                fds.push(sys::pollfd(fd, libc::POLLIN));
                sources.push(Source::PmiListener);
            }
            for (id, fd) in self.server.pending_fds() {
                fds.push(sys::pollfd(fd, libc::POLLIN));
                sources.push(Source::PmiPending(id));
            }
            for (i, r) in self.ranks.iter().enumerate() {
                let rank = i as u32;
                if let Some(fd) = self.server.fd(rank) {
                    let mut ev = libc::POLLIN;
                    if self.server.wants_write(rank) {
                        ev |= libc::POLLOUT;
                    }
                    fds.push(sys::pollfd(fd, ev));
                    sources.push(Source::Pmi(rank));
                }
                if let Some(f) = &r.stdout {
                    fds.push(sys::pollfd(f.fd(), libc::POLLIN));
                    sources.push(Source::Output(rank, Dest::Stdout));
                }
                if let Some(f) = &r.stderr {
                    fds.push(sys::pollfd(f.fd(), libc::POLLIN));
                    sources.push(Source::Output(rank, Dest::Stderr));
                }
            }
            let wait = self.next_wakeup(now).saturating_duration_since(now);
            if let Err(e) = sys::poll(&mut fds, wait) {
                eprintln!("stormrun: poll failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }

            for (pfd, source) in fds.iter().zip(&sources) {
                let rev = pfd.revents;
                if rev == 0 {
                    continue;
                }
                match *source {
                    Source::Signals => {
                        for sig in self.signals.drain() {
                            self.on_signal(sig);
                        }
                    }
                    Source::Output(rank, dest) => {
                        let r = &mut self.ranks[rank as usize];
                        let slot = match dest {
                            Dest::Stdout => &mut r.stdout,
                            Dest::Stderr => &mut r.stderr,
                        };
                        if let Some(f) = slot {
                            if !f.on_readable() {
                                *slot = None;
                            }
                        }
                    }
                    Source::PmiListener => self.server.on_acceptable(&mut events),
                    Source::PmiPending(id) => self.server.on_pending_readable(id, &mut events),
                    Source::Pmi(rank) => {
                        if rev & libc::POLLOUT != 0 {
                            self.server.on_writable(rank, &mut events);
                        }
                        if rev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                            self.server.on_readable(rank, &mut events);
                        }
                    }
                }
            }
            for ev in events.drain(..) {
                self.on_pmi_event(ev);
            }
        }
    }

    /// The earliest moment the loop must look at its timers again.
    fn next_wakeup(&self, now: Instant) -> Instant {
        let mut at = self.next_reap;
        if let (Some((_, deadline)), None) = (self.timeout, &self.failure) {
            at = at.min(deadline);
        }
        if let Some(t) = &self.teardown {
            if !t.sigkill_sent {
                at = at.min(t.sigkill_at);
            } else if self.ranks.iter().any(Rank::running)
                || self.spawned.iter().any(Spawned::running)
            {
                at = at.min(t.give_up_at);
            }
        }
        if let Some(d) = self.drain_until {
            at = at.min(d);
        }
        if let Some(d) = self.server.next_pending_deadline() {
            at = at.min(d);
        }
        at.max(now)
    }

    /// Handles `--timeout` and teardown escalation. Returns true when
    /// supervision must stop now (ranks that survive SIGKILL).
    fn check_timers(&mut self, now: Instant) -> bool {
        if let Some((limit, deadline)) = self.timeout {
            if now >= deadline && self.failure.is_none() {
                let running = self.running_list();
                self.fail(
                    format!(
                        "job timed out after {} with rank(s) {running} still running; job aborted",
                        seconds(limit)
                    ),
                    TIMEOUT_EXIT,
                );
            }
        }
        let Some(t) = self.teardown.as_mut() else {
            return false;
        };
        if !t.sigkill_sent && now >= t.sigkill_at {
            t.sigkill_sent = true;
            self.signal_running(libc::SIGKILL);
            return false;
        }
        let spawned_running = self.spawned.iter().any(Spawned::running);
        if t.sigkill_sent
            && now >= t.give_up_at
            && (self.ranks.iter().any(Rank::running) || spawned_running)
        {
            let stuck: Vec<String> = self
                .ranks
                .iter()
                .enumerate()
                .filter(|(_, r)| r.running())
                .map(|(i, r)| format!("rank {i} (pid {})", r.pid))
                .chain(
                    self.spawned
                        .iter()
                        .filter(|s| s.running())
                        .map(|s| format!("the spawned job's stormrun (pid {})", s.pid)),
                )
                .collect();
            eprintln!(
                "stormrun: {} did not exit after SIGKILL; giving up on waiting",
                stuck.join(", ")
            );
            return true;
        }
        false
    }

    fn on_signal(&mut self, sig: i32) {
        match sig {
            libc::SIGCHLD => {
                self.reap();
                self.next_reap = Instant::now() + REAP_TICK;
            }
            libc::SIGUSR1 | libc::SIGUSR2 | libc::SIGCONT => self.signal_running(sig),
            libc::SIGTSTP => {
                // Ctrl-Z: stop the ranks, then ourselves; SIGCONT (`fg`)
                // reaches us and is forwarded to them.
                self.signal_running(libc::SIGSTOP);
                // SAFETY: raise has no preconditions.
                unsafe { libc::raise(libc::SIGSTOP) };
            }
            _ => {
                if self.teardown.is_some() {
                    // A second Ctrl-C: no more patience.
                    if let Some(t) = &mut self.teardown {
                        t.sigkill_at = Instant::now();
                    }
                    return;
                }
                let name = sys::signal_name(sig);
                self.record_failure(
                    format!("received {name}; forwarded it to all ranks; job aborted"),
                    128 + sig,
                );
                self.start_teardown(sig);
            }
        }
    }

    fn on_pmi_event(&mut self, ev: ServerEvent) {
        match ev {
            ServerEvent::Abort {
                rank,
                code,
                message,
            } => {
                let who = self.describe(rank);
                let msg = match message {
                    Some(m) if !m.is_empty() => format!(": {m}"),
                    _ => String::new(),
                };
                // An abort always ends the job with a failure status; an
                // abort code of 0 (or a multiple of 256) would hide that.
                let status = match code.rem_euclid(256) {
                    0 => 1,
                    c => c,
                };
                self.fail(
                    format!("{who} called MPI_Abort with error code {code}{msg}; job aborted"),
                    status,
                );
            }
            ServerEvent::ProtocolError { rank, detail } => {
                eprintln!("stormrun: {} {detail}", self.describe(rank));
            }
            ServerEvent::Rejected { peer, reason } => {
                eprintln!("stormrun: refused a PMI connection from {peer}: it {reason}");
            }
            ServerEvent::Spawn { rank, commands } => self.on_spawn(rank, &commands),
            ServerEvent::Finalized { .. } | ServerEvent::Disconnected { .. } => {}
        }
    }

    /// Starts the job a rank asked for with `MPI_Comm_spawn`, and answers the rank: started, or
    /// refused (the reason printed here; the rank gets `MPI_ERR_SPAWN`).
    fn on_spawn(&mut self, rank: u32, commands: &[SpawnCommand]) {
        let started = if self.teardown.is_some() {
            Err("the job is ending".to_string())
        } else {
            std::env::current_exe()
                .map_err(|e| format!("cannot find stormrun's own program: {e}"))
                .and_then(|me| spawned::start(&me, commands, &self.inherited))
        };
        let answer = match started {
            Ok(job) => {
                self.spawned.push(job);
                Ok(())
            }
            Err(why) => {
                eprintln!(
                    "stormrun: {} asked to spawn `{}`: {why}",
                    self.describe(rank),
                    commands
                        .iter()
                        .map(|c| c.command.as_str())
                        .collect::<Vec<_>>()
                        .join("`, `")
                );
                Err(why)
            }
        };
        let mut events = Vec::new();
        self.server.answer_spawn(rank, answer, &mut events);
        for ev in events {
            self.on_pmi_event(ev);
        }
    }

    /// Collects the exit of every rank and spawned job that has ended.
    fn reap(&mut self) {
        self.reap_spawned();
        for i in 0..self.ranks.len() {
            if !self.ranks[i].running() {
                continue;
            }
            let Some(exit) = sys::try_reap(self.ranks[i].pid) else {
                continue;
            };
            self.ranks[i].exit = Some(exit);
            let rank = i as u32;
            // An abort sent just before exiting explains the exit better
            // than the exit status does: read it first.
            let mut events = Vec::new();
            self.server.on_readable(rank, &mut events);
            self.server.disconnect(rank);
            for ev in events {
                self.on_pmi_event(ev);
            }
            let who = self.describe(rank);
            match exit {
                // An MPI process that ends without MPI_Finalize leaves its peers waiting for
                // it forever: a failure, whatever its status says.
                Exit::Code(0) if self.server.is_active(rank) => self.fail(
                    format!("{who} exited with status 0 before MPI_Finalize; job aborted"),
                    1,
                ),
                // A spawned job's parents wait for all of it in MPI_Comm_spawn.
                Exit::Code(0)
                    if self.is_spawned
                        && !self.server.is_finalized(rank)
                        && self.ranks[i].host.is_none() =>
                {
                    self.fail(
                        format!(
                            "{who} exited before MPI_Init, but a spawned program must be an MPI \
                             program (its parents wait for it); job aborted"
                        ),
                        1,
                    )
                }
                Exit::Code(0) => {}
                // ssh's status when it cannot reach or log in to the host; the
                // rank never got to MPI_Init.
                Exit::Code(255)
                    if self.ranks[i].host.is_some()
                        && !self.server.is_active(rank)
                        && !self.server.is_finalized(rank) =>
                {
                    self.fail(
                        format!(
                            "{who}: the launch agent could not start it (exit status 255; its \
                             own message is above: is the host reachable, and can this user log \
                             in there without a password?); job aborted"
                        ),
                        255,
                    )
                }
                Exit::Code(code) => self.fail(
                    format!("{who} exited with status {code}; job aborted"),
                    code,
                ),
                Exit::Signal(sig) => self.fail(
                    format!(
                        "{who} was killed by signal {sig} ({}); job aborted",
                        sys::signal_name(sig)
                    ),
                    128 + sig,
                ),
                Exit::Unknown => self.fail(
                    format!(
                        "{who} vanished (its exit status was collected elsewhere); job aborted"
                    ),
                    1,
                ),
            }
        }
    }

    /// Collects the exit of every spawned job that has ended: a failed one ends this job too,
    /// as Open MPI ends every job of a run when one fails.
    fn reap_spawned(&mut self) {
        for i in 0..self.spawned.len() {
            if !self.spawned[i].running() {
                continue;
            }
            let Some(exit) = sys::try_reap(self.spawned[i].pid) else {
                continue;
            };
            self.spawned[i].exit = Some(exit);
            let who = format!(
                "the job spawned as `{}` (stormrun pid {})",
                self.spawned[i].what, self.spawned[i].pid
            );
            match exit {
                Exit::Code(0) => {}
                Exit::Code(code) => {
                    self.fail(format!("{who} failed (status {code}); job aborted"), code)
                }
                Exit::Signal(sig) => self.fail(
                    format!(
                        "{who} was killed by signal {sig} ({}); job aborted",
                        sys::signal_name(sig)
                    ),
                    128 + sig,
                ),
                Exit::Unknown => {}
            }
        }
    }

    /// A barrier that can never complete is a failure, not a hang.
    fn check_barrier(&mut self) {
        if self.failure.is_some() {
            return;
        }
        let ranks = &self.ranks;
        let gone = |r: u32| ranks.get(r as usize).is_none_or(|rank| rank.exit.is_some());
        let Some(blocker) = self.server.barrier_blocked_by(gone) else {
            return;
        };
        let waiters = rank_list(&self.server.barrier_waiters());
        let who = self.describe(blocker);
        let exited = self
            .ranks
            .get(blocker as usize)
            .is_none_or(|r| r.exit.is_some());
        let what = match (exited, self.server.is_finalized(blocker)) {
            (true, false) => "exited without finalizing PMI",
            (true, true) => "finalized PMI and exited",
            (false, _) => "finalized PMI",
        };
        self.fail(
            format!(
                "{who} {what} while rank(s) {waiters} wait for it in a PMI barrier \
                 (fence); job aborted"
            ),
            1,
        );
    }

    /// Records the first failure and starts the teardown.
    fn fail(&mut self, message: String, exit_code: i32) {
        if self.record_failure(message, exit_code) {
            self.start_teardown(libc::SIGTERM);
        }
    }

    /// Keeps only the first failure; returns whether this one was it.
    fn record_failure(&mut self, message: String, exit_code: i32) -> bool {
        if self.failure.is_some() {
            return false;
        }
        self.failure = Some(Failure { message, exit_code });
        true
    }

    fn start_teardown(&mut self, sig: i32) {
        if self.teardown.is_some() {
            return;
        }
        let now = Instant::now();
        self.teardown = Some(Teardown {
            sigkill_at: now + GRACE,
            sigkill_sent: false,
            give_up_at: now + GRACE + KILL_WAIT,
        });
        self.signal_running(sig);
        // Signals reach a remote rank only if its agent passes them on
        // (ssh does not). Closing its PMI connection makes its next PMI
        // call fail, so an MPI rank ends even then.
        self.server.stop_listening();
        for rank in 0..self.ranks.len() as u32 {
            if self.server.is_remote(rank) {
                self.server.disconnect(rank);
            }
        }
    }

    /// Signals the process group of every rank not yet reaped. Groups of
    /// reaped ranks are left alone: once reaped, the pid may be reused.
    fn signal_running(&self, sig: i32) {
        for r in self.ranks.iter().filter(|r| r.running()) {
            sys::signal_group(r.pid, sig);
        }
        for s in self.spawned.iter().filter(|s| s.running()) {
            sys::signal_group(s.pid, sig);
        }
    }

    fn describe(&self, rank: u32) -> String {
        match self.ranks.get(rank as usize) {
            Some(Rank {
                host: Some(host),
                pid,
                program,
                ..
            }) => format!("rank {rank} on {host} (pid {pid}, {program})"),
            Some(r) => format!("rank {rank} (pid {}, {})", r.pid, r.program),
            None => format!("rank {rank}"),
        }
    }

    fn running_list(&self) -> String {
        let running: Vec<u32> = (0..self.ranks.len() as u32)
            .filter(|&r| self.ranks[r as usize].running())
            .collect();
        rank_list(&running)
    }

    /// Flushes output, removes the job's shared-memory files, reports the
    /// failure and returns the exit status.
    fn finish(mut self) -> i32 {
        for r in &mut self.ranks {
            for f in [r.stdout.as_mut(), r.stderr.as_mut()].into_iter().flatten() {
                f.finish();
            }
        }
        match shm::remove_job_files(Path::new(&self.shm_dir), &self.jobid) {
            Ok(_) => {}
            Err(e) => eprintln!("stormrun: could not remove the job's shared-memory files: {e}"),
        }
        match self.failure {
            Some(f) => {
                eprintln!("stormrun: {}", f.message);
                f.exit_code
            }
            None => 0,
        }
    }
}

/// The program path a remote rank is started with: a relative path with a
/// directory part (`./ring`, `bin/app`) is made absolute against our
/// working directory, which the agent's side may not share (ssh starts in
/// the home directory); a bare name is left for the remote `PATH`.
fn remote_program(program: &OsStr) -> OsString {
    let path = Path::new(program);
    if path.is_relative() && path.components().count() > 1 {
        if let Ok(cwd) = std::env::current_dir() {
            return cwd
                .join(path.strip_prefix(".").unwrap_or(path))
                .into_os_string();
        }
    }
    program.to_os_string()
}

/// `0-3,5,7-8` for a sorted list of ranks.
fn rank_list(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let start = ranks[i];
        let mut end = start;
        while i + 1 < ranks.len() && ranks[i + 1] == end + 1 {
            i += 1;
            end = ranks[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    if parts.is_empty() {
        "(none)".to_string()
    } else {
        parts.join(",")
    }
}

/// `2 s` or `2.5 s`.
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_lists_are_compact() {
        assert_eq!(rank_list(&[]), "(none)");
        assert_eq!(rank_list(&[3]), "3");
        assert_eq!(rank_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
    }

    #[test]
    fn remote_programs_get_absolute_paths() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(remote_program(OsStr::new("./ring")), cwd.join("ring"));
        assert_eq!(remote_program(OsStr::new("bin/app")), cwd.join("bin/app"));
        assert_eq!(remote_program(OsStr::new("hostname")), "hostname");
        assert_eq!(remote_program(OsStr::new("/bin/true")), "/bin/true");
    }

    #[test]
    fn seconds_read_naturally() {
        assert_eq!(seconds(Duration::from_secs(10)), "10 s");
        assert_eq!(seconds(Duration::from_millis(2500)), "2.5 s");
    }
}
