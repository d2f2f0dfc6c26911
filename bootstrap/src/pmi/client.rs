//! The PMI client the MPI library uses to learn its rank and exchange
//! business cards (the modex) with its peers.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use super::error::PmiError;
use super::names::{self, NameFault};
use super::pmix;
use super::port;
use super::spawn::{SpawnCommand, PARENT_PORT_ENV, PARENT_PORT_KEY};
use super::transport::{LineChannel, Transport};
use super::v1;
use super::v2;
use super::value::{self, Head};
use crate::auth::Key;

/// How long `abort` waits for the launcher to react before exiting by itself.
const ABORT_WAIT: Duration = Duration::from_secs(5);

/// The protocol spoken with the server; one variant per PMI version.
#[derive(Debug)]
enum Protocol {
    V1(v1::Session),
    V2(v2::Session),
    Pmix(Box<pmix::Session>),
}

/// The environment variable that chooses the PMI protocol: `pmi1`, `pmi2`, `pmix`, `singleton`
/// (run as a job of one whatever the launcher set), or `auto` (the default; see
/// [`PmiClient::from_env`]).
pub const PROTOCOL_ENV: &str = "STORMPI_PMI";

/// How [`PmiClient::from_env`] reaches the launcher, decided from the environment alone.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Plan {
    /// No launcher: a job of one.
    Singleton,
    /// PMI-1 over the inherited socket.
    V1Fd,
    /// PMI-2 over the inherited socket, with Slurm's `PMI_JOBID` when set.
    V2Fd(Option<String>),
    /// PMI-1 over TCP to `PMI_PORT`.
    Port,
    /// PMIx, through the system's libpmix.
    Pmix,
}

/// Chooses the protocol from the environment (`get` reads a variable).
///
/// * `STORMPI_PMI=pmi1|pmi2|singleton` forces one.
/// * Otherwise, with `PMI_FD`: PMI-2 when `PMI_JOBID` is set too — Slurm's `--mpi=pmi2` sets it,
///   and its `fullinit` needs it; Hydra does not set it and serves both versions, stormrun
///   serves PMI-1 — and PMI-1 otherwise, or always when stormrun gave a key (its
///   authentication is PMI-1's).
/// * With `PMI_PORT`: PMI-1 (stormrun's remote ranks, MPICH's port form).
/// * With `PMIX_NAMESPACE` (Slurm's `--mpi=pmix`, Open MPI's `mpirun`, PRRTE): PMIx.
/// * With none of these: a singleton, unless `srun` started this process as one of several tasks
///   without PMI (`--mpi=none`): that is an error that says what to do, not a job of one per
///   task that would compute alone.
fn plan(get: &dyn Fn(&str) -> Option<String>) -> Result<Plan, PmiError> {
    #[derive(PartialEq)]
    enum Force {
        Auto,
        V1,
        V2,
    }
    let pmix = get("PMIX_NAMESPACE").is_some();
    let force = match get(PROTOCOL_ENV).as_deref().map(str::trim) {
        None | Some("") | Some("auto") => Force::Auto,
        Some("pmi1") => Force::V1,
        Some("pmi2") => Force::V2,
        Some("singleton") => return Ok(Plan::Singleton),
        Some("pmix") if pmix => return Ok(Plan::Pmix),
        Some("pmix") => {
            return Err(PmiError::Env {
                var: "PMIX_NAMESPACE",
                problem: format!("is not set, but {PROTOCOL_ENV}=pmix asks for a PMIx launcher"),
            })
        }
        Some(other) => {
            return Err(PmiError::Env {
                var: PROTOCOL_ENV,
                problem: format!("is `{other}`, not one of pmi1, pmi2, pmix, singleton, auto"),
            })
        }
    };
    let keyed = get(port::KEY_ENV).is_some();
    if get("PMI_FD").is_some() {
        let jobid = get("PMI_JOBID").filter(|j| !j.is_empty());
        return match force {
            Force::V2 if keyed => Err(PmiError::Unsupported(format!(
                "{PROTOCOL_ENV}=pmi2, but stormrun's PMI server speaks PMI-1 only"
            ))),
            Force::V2 => Ok(Plan::V2Fd(jobid)),
            Force::V1 => Ok(Plan::V1Fd),
            Force::Auto if jobid.is_some() && !keyed => Ok(Plan::V2Fd(jobid)),
            Force::Auto => Ok(Plan::V1Fd),
        };
    }
    if get("PMI_PORT").is_some() {
        return match force {
            Force::V2 => Err(PmiError::Unsupported(format!(
                "{PROTOCOL_ENV}=pmi2, but PMI-2 over PMI_PORT is not supported (only over PMI_FD)"
            ))),
            _ => Ok(Plan::Port),
        };
    }
    if pmix && force == Force::Auto {
        return Ok(Plan::Pmix);
    }
    if force != Force::Auto {
        return Err(PmiError::Env {
            var: "PMI_FD",
            problem: format!(
                "is not set (nor PMI_PORT), but {PROTOCOL_ENV} asks for a PMI launcher"
            ),
        });
    }
    let srun_tasks = get("SLURM_STEP_NUM_TASKS").and_then(|n| n.trim().parse::<u32>().ok());
    match srun_tasks {
        Some(n) if n > 1 => Err(PmiError::Unsupported(format!(
            "srun started this process as one of {n} tasks without PMI (srun --mpi=none); \
             start the job with `srun --mpi=pmi2`, or set {PROTOCOL_ENV}=singleton to run each \
             task as a job of its own"
        ))),
        _ => Ok(Plan::Singleton),
    }
}

fn no_pmix_names() -> PmiError {
    PmiError::Unsupported(
        "name publishing under a PMIx launcher is not supported yet (use stormrun)".into(),
    )
}

/// A refused name-service request as [`PmiError::Name`]: the fault the server named (stormrun
/// spells them as [`NameFault::wire`]; Hydra says `key_already_present` or
/// `duplicate_service_<name>`), else `otherwise` when given, else the refusal as is.
fn name_error(service: &str, e: PmiError, otherwise: Option<NameFault>) -> PmiError {
    match e {
        PmiError::Refused { ref msg, .. } => {
            let duplicate = (msg.contains("already") || msg.contains("duplicate"))
                .then_some(NameFault::AlreadyPublished);
            match NameFault::from_wire(msg).or(duplicate).or(otherwise) {
                Some(fault) => PmiError::Name {
                    service: service.to_string(),
                    fault,
                },
                None => e,
            }
        }
        e => e,
    }
}

/// A connection to the job's PMI server (stormrun, Hydra, ...).
///
/// Keys are scoped per rank: `put(key, ..)` by rank `r` is read back with
/// `get(r, key, ..)`. Values are arbitrary bytes of any length; they are
/// encoded and, if longer than the server allows, split over several PMI
/// keys (see the `value` module). Puts become visible to other ranks after
/// the next [`fence`](PmiClient::fence).
#[derive(Debug)]
pub struct PmiClient {
    proto: Protocol,
    rank: u32,
    size: u32,
    /// The node of each rank, when the server says.
    nodes: Option<Vec<u32>>,
}

impl PmiClient {
    /// Connects to the launcher named by the environment.
    ///
    /// * `PMI_FD` (a launcher on this host): the inherited socket; rank and
    ///   size from `PMI_RANK` and `PMI_SIZE`; PMI-2 or PMI-1 as [`PROTOCOL_ENV`]
    ///   and the launcher's variables say (PMI-2 under Slurm's `--mpi=pmi2`).
    /// * else `PMI_PORT=<host>:<port>` (a launcher on another host): a TCP
    ///   connection; with `PMI_ID` set, the `initack` handshake (see
    ///   [`port`](super::port)) tells the rank and size, else `PMI_RANK` and
    ///   `PMI_SIZE` do, as in MPICH's client.
    ///
    /// Returns `None` when no PMI launcher started this process (neither
    /// `PMI_FD` nor `PMI_PORT` is set) or `STORMPI_PMI=singleton`: the
    /// caller then runs as a singleton. Malformed variables are errors that
    /// name the variable; so is a process `srun` started without PMI as one
    /// of several tasks.
    pub fn from_env() -> Option<Result<PmiClient, PmiError>> {
        let get = |var: &str| std::env::var_os(var).map(|v| v.to_string_lossy().into_owned());
        let plan = match plan(&get) {
            Ok(plan) => plan,
            Err(e) => return Some(Err(e)),
        };
        let fd = || get("PMI_FD").unwrap_or_default();
        match plan {
            Plan::Singleton => None,
            Plan::V1Fd => Some(Self::from_fd_env(&fd())),
            Plan::V2Fd(jobid) => Some(Self::from_fd_env_v2(&fd(), jobid.as_deref())),
            Plan::Port => {
                let port = get("PMI_PORT").unwrap_or_default();
                Some(Self::from_port_env(&port, get("PMI_ID").as_deref()))
            }
            Plan::Pmix => Some(pmix::Session::init().map(|mut s| PmiClient {
                rank: s.rank,
                size: s.size,
                nodes: s.nodes.take(),
                proto: Protocol::Pmix(Box::new(s)),
            })),
        }
    }

    /// The PMI-2 path: `PMI_FD` is `fd_text`, `pmi_jobid` Slurm's `PMI_JOBID`.
    fn from_fd_env_v2(fd_text: &str, pmi_jobid: Option<&str>) -> Result<PmiClient, PmiError> {
        let fd: i32 = fd_text.trim().parse().map_err(|_| PmiError::Env {
            var: "PMI_FD",
            problem: format!("is `{fd_text}`, not a file descriptor number"),
        })?;
        let (rank, size) = rank_and_size()?;
        let stream = adopt_socket(fd)?;
        Self::connect_v2(Transport::Unix(stream), rank, Some(size), pmi_jobid)
    }

    /// Runs the PMI-2 start-up over an already connected stream as `rank`; `size`, when
    /// known, is checked against the server's.
    fn connect_v2(
        transport: Transport,
        rank: u32,
        size: Option<u32>,
        pmi_jobid: Option<&str>,
    ) -> Result<PmiClient, PmiError> {
        let mut session = v2::Session::init(LineChannel::new(transport), rank, pmi_jobid)?;
        if let Some(size) = size.filter(|&s| s != session.size) {
            return Err(PmiError::Malformed(format!(
                "the PMI-2 server says a job of {}, the environment {size}",
                session.size
            )));
        }
        Ok(PmiClient {
            rank: session.rank,
            size: session.size,
            nodes: session.nodes.take(),
            proto: Protocol::V2(session),
        })
    }

    /// The `PMI_PORT` path: `port_text` is `PMI_PORT`, `id` is `PMI_ID`.
    fn from_port_env(port_text: &str, id: Option<&str>) -> Result<PmiClient, PmiError> {
        // Check everything the environment says before touching the network.
        port::parse_port(port_text)?;
        let id = id
            .map(|text| {
                text.trim().parse::<u32>().map_err(|_| PmiError::Env {
                    var: "PMI_ID",
                    problem: format!("is `{text}`, not a non-negative number"),
                })
            })
            .transpose()?;
        // Who we are: told by the server (MPICH's `PMI_ID` handshake) or by
        // the environment.
        let identity = match id {
            Some(id) => Identity::Handshake(id),
            None => {
                let (rank, size) = rank_and_size()?;
                Identity::Env(rank, size)
            }
        };
        let stream = port::connect(port_text)?;
        let mut chan = LineChannel::new(Transport::Tcp(stream));
        let (rank, size) = match identity {
            Identity::Env(rank, size) => (rank, size),
            Identity::Handshake(id) => {
                let io = |source| PmiError::Io {
                    op: "set a socket timeout",
                    source,
                };
                chan.set_read_timeout(Some(port::HANDSHAKE_TIMEOUT))
                    .map_err(io)?;
                let rs = port::handshake(&mut chan, id, key_from_env()?.as_ref())?;
                // PMI waits (barriers) may take as long as the job's
                // slowest rank: no timeout after the handshake.
                chan.set_read_timeout(None).map_err(io)?;
                rs
            }
        };
        let session = v1::Session::init_on(chan)?;
        Self::over_v1(session, rank, size)
    }

    fn from_fd_env(fd_text: &str) -> Result<PmiClient, PmiError> {
        let fd: i32 = fd_text.trim().parse().map_err(|_| PmiError::Env {
            var: "PMI_FD",
            problem: format!("is `{fd_text}`, not a file descriptor number"),
        })?;
        let (rank, size) = rank_and_size()?;
        let stream = adopt_socket(fd)?;
        let Some(key) = key_from_env()? else {
            return Self::connect(Transport::Unix(stream), rank, size);
        };
        // stormrun's server serves nothing before we prove who we are.
        let mut chan = LineChannel::new(Transport::Unix(stream));
        let told = port::handshake(&mut chan, rank, Some(&key))?;
        if told != (rank, size) {
            return Err(PmiError::Malformed(format!(
                "the PMI server says rank {} of {}, the environment rank {rank} of {size}",
                told.0, told.1
            )));
        }
        let session = v1::Session::init_on(chan)?;
        Self::over_v1(session, rank, size)
    }

    /// A client over an initialized PMI-1 session, with the node layout from the server's
    /// `PMI_process_mapping` when it has one (Hydra, Slurm).
    fn over_v1(mut session: v1::Session, rank: u32, size: u32) -> Result<PmiClient, PmiError> {
        let nodes = session
            .get("PMI_process_mapping")?
            .map(|text| {
                v2::parse_process_mapping(&text, size).map_err(|why| {
                    PmiError::Malformed(format!("PMI_process_mapping=`{text}`: {why}"))
                })
            })
            .transpose()?;
        Ok(PmiClient {
            proto: Protocol::V1(session),
            rank,
            size,
            nodes,
        })
    }

    /// Runs the PMI-1 handshake over an already connected stream, for a
    /// process that knows its rank and the job size by other means.
    pub fn connect(transport: Transport, rank: u32, size: u32) -> Result<PmiClient, PmiError> {
        let session = v1::Session::init(transport)?;
        Self::over_v1(session, rank, size)
    }

    /// This process's rank in the job (`MPI_COMM_WORLD`).
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of processes in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Index of this process's application context (MPMD launches number
    /// the `:`-separated programs from 0).
    pub fn appnum(&self) -> u32 {
        match &self.proto {
            Protocol::V1(s) => s.appnum,
            Protocol::V2(s) => s.appnum,
            Protocol::Pmix(s) => s.appnum,
        }
    }

    /// The key-value space of the job: the same name for every rank of one job, so it also
    /// serves as a job id where the launcher gives none.
    pub fn kvsname(&self) -> &str {
        match &self.proto {
            Protocol::V1(s) => &s.kvsname,
            Protocol::V2(s) => &s.jobid,
            Protocol::Pmix(s) => &s.nspace,
        }
    }

    /// The server's universe size, when it knows one.
    pub fn universe_size(&self) -> Option<u32> {
        match &self.proto {
            Protocol::V1(s) => s.universe_size,
            Protocol::V2(s) => s.universe_size,
            Protocol::Pmix(s) => s.universe_size,
        }
    }

    /// The PMI protocol in use: 1 or 2, or 3 for PMIx.
    pub fn version(&self) -> u32 {
        match &self.proto {
            Protocol::V1(_) => 1,
            Protocol::V2(_) => 2,
            Protocol::Pmix(_) => 3,
        }
    }

    /// The node of every rank (ranks with the same number share a node), when the launcher
    /// says (its `PMI_process_mapping`: a PMI-2 job attribute, a PMI-1 key of Hydra and Slurm);
    /// `None` otherwise (stormrun, which gives `STORMPI_NODE` instead).
    pub fn nodes(&self) -> Option<&[u32]> {
        self.nodes.as_deref()
    }

    /// Publishes `value` under `key` for this rank.
    ///
    /// `key` may hold ASCII letters, digits and `_ - . : / + @`.
    pub fn put(&mut self, key: &str, value: &[u8]) -> Result<(), PmiError> {
        let wire_key = scoped_key(key, self.rank)?;
        if let Protocol::Pmix(s) = &mut self.proto {
            // PMIx takes bytes of any length: no encoding, no chunks.
            return s.put(&wire_key, value);
        }
        let (max_key, max_value) = self.limits();
        let longest = value::longest_key(&wire_key, value.len(), max_value);
        if longest > max_key {
            return Err(PmiError::InvalidKey {
                key: key.to_string(),
                reason: format!(
                    "with rank suffix it is {longest} characters; the server allows {max_key}"
                ),
            });
        }
        for (k, v) in value::encode(&wire_key, value, max_value) {
            match &mut self.proto {
                Protocol::V1(s) => s.put(&k, &v)?,
                Protocol::V2(s) => s.put(&k, &v)?,
                Protocol::Pmix(s) => s.put(&k, v.as_bytes())?,
            }
        }
        Ok(())
    }

    /// Commits this rank's puts and waits for every rank to do the same;
    /// afterwards every rank's puts are visible to `get`.
    pub fn fence(&mut self) -> Result<(), PmiError> {
        match &mut self.proto {
            // PMI-1 commits each put at once, so the barrier alone suffices.
            Protocol::V1(s) => s.barrier(),
            Protocol::V2(s) => s.fence(),
            Protocol::Pmix(s) => s.fence(),
        }
    }

    /// Reads the value `rank` published under `key` into `out` (replacing
    /// its contents).
    pub fn get(&mut self, rank: u32, key: &str, out: &mut Vec<u8>) -> Result<(), PmiError> {
        out.clear();
        let wire_key = scoped_key(key, rank)?;
        let not_found = || PmiError::KeyNotFound {
            key: key.to_string(),
            rank,
        };
        if let Protocol::Pmix(s) = &mut self.proto {
            *out = s.get(rank, &wire_key)?.ok_or_else(not_found)?;
            return Ok(());
        }
        let head = self.get_raw(rank, &wire_key)?.ok_or_else(not_found)?;
        match value::decode_head(&wire_key, &head)? {
            Head::Inline(bytes) => *out = bytes,
            Head::Chunked(n) => {
                for i in 0..n {
                    let chunk_key = value::chunk_wire_key(&wire_key, i);
                    let chunk =
                        self.get_raw(rank, &chunk_key)?
                            .ok_or_else(|| PmiError::CorruptValue {
                                key: wire_key.clone(),
                                detail: format!("chunk {i} of {n} is missing"),
                            })?;
                    value::decode_chunk(&chunk_key, &chunk, out)?;
                }
            }
        }
        Ok(())
    }

    /// Waits until every rank of the job has called `barrier` (or `fence`).
    pub fn barrier(&mut self) -> Result<(), PmiError> {
        match &mut self.proto {
            Protocol::V1(s) => s.barrier(),
            // PMI-2 has no barrier of its own; a fence without puts is one.
            Protocol::V2(s) => s.fence(),
            Protocol::Pmix(s) => s.barrier(),
        }
    }

    /// Asks the launcher to abort the whole job with exit status `code`,
    /// reporting `msg`; then exits this process with `code`.
    ///
    /// Waits a few seconds for the launcher to kill us first, so that it
    /// reports the abort rather than this process's exit.
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        if let Protocol::V2(_) | Protocol::Pmix(_) = self.proto {
            // A PMI-2 abort carries the code, but Slurm's server ignores it and kills the step
            // (srun then exits 137): the code is told here, where it is known.
            let sep = if msg.is_empty() { "" } else { ": " };
            eprintln!(
                "stormpi: rank {} aborts the job with code {code}{sep}{msg}",
                self.rank
            );
        }
        let sent = match &mut self.proto {
            Protocol::V1(s) => s.abort(code, msg),
            Protocol::V2(s) => s.abort(code, msg),
            Protocol::Pmix(s) => s.abort(code, msg),
        };
        if sent.is_ok() {
            match &mut self.proto {
                Protocol::V1(s) => s.wait_for_close(ABORT_WAIT),
                Protocol::V2(s) => s.wait_for_close(ABORT_WAIT),
                // PMIx_Abort returns once the server has the request; give it the same time
                // to end the job before exiting by ourselves.
                Protocol::Pmix(_) => std::thread::sleep(ABORT_WAIT),
            }
        }
        std::process::exit(code)
    }

    /// Publishes `port` under `service` in the launcher's name service (`MPI_Publish_name`):
    /// every process the launcher started can look it up. Both names travel
    /// [encoded](names::encode), as launchers differ in what they let through a PMI value.
    pub fn publish_name(&mut self, service: &str, port: &str) -> Result<(), PmiError> {
        let (wire_service, wire_port) = (names::encode(service), names::encode(port));
        let r = match &mut self.proto {
            Protocol::V1(s) => s.publish_name(&wire_service, &wire_port),
            Protocol::V2(s) => s.name_publish(&wire_service, &wire_port),
            Protocol::Pmix(_) => return Err(no_pmix_names()),
        };
        r.map_err(|e| name_error(service, e, None))
    }

    /// The port published under `service` (`MPI_Lookup_name`).
    pub fn lookup_name(&mut self, service: &str) -> Result<String, PmiError> {
        let not_published = PmiError::Name {
            service: service.to_string(),
            fault: NameFault::NotPublished,
        };
        let wire_service = names::encode(service);
        let r = match &mut self.proto {
            Protocol::V1(s) => s.lookup_name(&wire_service),
            Protocol::V2(s) => match s.name_lookup(&wire_service) {
                Ok(Some(p)) => Ok(p),
                Ok(None) => return Err(not_published),
                Err(e) => Err(e),
            },
            Protocol::Pmix(_) => return Err(no_pmix_names()),
        };
        // Servers other than stormrun say "not found" in words of their own.
        let port = r.map_err(|e| name_error(service, e, Some(NameFault::NotPublished)))?;
        names::decode(&port).ok_or_else(|| {
            PmiError::Malformed(format!(
                "published port name `{port}` is not in our encoding"
            ))
        })
    }

    /// Withdraws `service` from the launcher's name service (`MPI_Unpublish_name`).
    pub fn unpublish_name(&mut self, service: &str) -> Result<(), PmiError> {
        let wire_service = names::encode(service);
        let r = match &mut self.proto {
            Protocol::V1(s) => s.unpublish_name(&wire_service),
            Protocol::V2(s) => s.name_unpublish(&wire_service),
            Protocol::Pmix(_) => return Err(no_pmix_names()),
        };
        r.map_err(|e| name_error(service, e, Some(NameFault::NotPublished)))
    }

    /// Asks the launcher to start `cmds` as a new job (`MPI_Comm_spawn`): stormrun's and
    /// Hydra's PMI-1 servers (`mcmd=spawn`), Hydra's and Slurm's PMI-2 ones (`spawn`); the
    /// children find the preput values in their key-value space ([`PmiClient::parent_port`]).
    /// Under PMIx `PmiError::Unsupported` says why.
    pub fn spawn(&mut self, cmds: &[SpawnCommand]) -> Result<(), PmiError> {
        match &mut self.proto {
            Protocol::V1(s) => s.spawn(cmds),
            Protocol::V2(s) => s.spawn(cmds),
            Protocol::Pmix(_) => Err(PmiError::Unsupported(
                "spawn through PMIx (Slurm's --mpi=pmix serves no PMIx_Spawn)".into(),
            )),
        }
    }

    /// For a process a spawn started, the port its parents wait at; `None` for any other.
    /// stormrun passes it in the environment ([`PARENT_PORT_ENV`]); under Hydra and Slurm it
    /// is the preput value [`PARENT_PORT_KEY`] of the job's key-value space, read when the
    /// launcher says the job was spawned (Hydra's PMI-1 sets `PMI_SPAWNED=1`; PMI-2 servers
    /// name the spawning job in `fullinit`'s answer).
    pub fn parent_port(&mut self) -> Result<Option<String>, PmiError> {
        if let Some(p) = std::env::var(PARENT_PORT_ENV)
            .ok()
            .filter(|p| !p.is_empty())
        {
            return Ok(Some(p));
        }
        let spawned = match &self.proto {
            Protocol::V1(_) => std::env::var("PMI_SPAWNED").is_ok_and(|v| v.trim() == "1"),
            Protocol::V2(s) => s.spawned,
            Protocol::Pmix(_) => false,
        };
        if !spawned {
            return Ok(None);
        }
        match self.get_raw(self.rank, PARENT_PORT_KEY)? {
            Some(p) if !p.is_empty() => Ok(Some(p)),
            _ => Err(PmiError::Malformed(format!(
                "the launcher says this job was spawned, but its key-value space holds no \
                 {PARENT_PORT_KEY} (a spawn by another MPI?)"
            ))),
        }
    }

    /// Leaves the job. Call once, after the last `get`/`fence`.
    pub fn finalize(self) -> Result<(), PmiError> {
        match self.proto {
            Protocol::V1(s) => s.finalize(),
            Protocol::V2(s) => s.finalize(),
            Protocol::Pmix(s) => s.finalize(),
        }
    }

    fn get_raw(&mut self, rank: u32, wire_key: &str) -> Result<Option<String>, PmiError> {
        match &mut self.proto {
            Protocol::V1(s) => s.get(wire_key),
            Protocol::V2(s) => s.get(rank, wire_key),
            Protocol::Pmix(s) => s
                .get(rank, wire_key)
                .map(|v| v.map(|b| String::from_utf8_lossy(&b).into_owned())),
        }
    }

    /// Usable (key, value) lengths: the server's maxima count a NUL.
    fn limits(&self) -> (usize, usize) {
        match &self.proto {
            Protocol::V1(s) => (s.maxes.keylen_max - 1, s.maxes.vallen_max - 1),
            Protocol::V2(_) => (v2::KEYLEN_MAX - 1, v2::VALLEN_MAX - 1),
            Protocol::Pmix(_) => (pmix::KEYLEN_MAX, usize::MAX),
        }
    }
}

/// `<key>-<rank>`; the rank never contains `-`, so distinct (key, rank) pairs
/// give distinct wire keys, and chunk keys (`.<i>` suffix) never clash with them.
fn scoped_key(key: &str, rank: u32) -> Result<String, PmiError> {
    let invalid = |reason: &str| PmiError::InvalidKey {
        key: key.to_string(),
        reason: reason.to_string(),
    };
    if key.is_empty() {
        return Err(invalid("empty"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-.:/+@".contains(c);
    if !key.chars().all(allowed) {
        return Err(invalid(
            "only ASCII letters, digits and `_ - . : / + @` are allowed",
        ));
    }
    Ok(format!("{key}-{rank}"))
}

/// This rank's PMI key, when its launcher gave it one ([`port::KEY_ENV`]).
fn key_from_env() -> Result<Option<Key>, PmiError> {
    let Some(text) = std::env::var_os(port::KEY_ENV) else {
        return Ok(None);
    };
    Key::from_hex(&text.to_string_lossy())
        .map(Some)
        .ok_or_else(|| PmiError::Env {
            var: port::KEY_ENV,
            problem: "is not a key (64 hexadecimal digits)".into(),
        })
}

/// How a `PMI_PORT` client learns its rank and the job size.
enum Identity {
    /// From the server, after identifying with this `PMI_ID`.
    Handshake(u32),
    /// From `PMI_RANK` and `PMI_SIZE`.
    Env(u32, u32),
}

/// `PMI_RANK` and `PMI_SIZE`, checked for consistency.
fn rank_and_size() -> Result<(u32, u32), PmiError> {
    let rank = env_u32("PMI_RANK")?;
    let size = env_u32("PMI_SIZE")?;
    if size == 0 || rank >= size {
        return Err(PmiError::Env {
            var: "PMI_RANK",
            problem: format!("is {rank}, outside a job of PMI_SIZE={size}"),
        });
    }
    Ok((rank, size))
}

fn env_u32(var: &'static str) -> Result<u32, PmiError> {
    let raw = std::env::var(var).map_err(|_| PmiError::Env {
        var,
        problem: "is not set (or not UTF-8)".into(),
    })?;
    raw.trim().parse().map_err(|_| PmiError::Env {
        var,
        problem: format!("is `{raw}`, not a non-negative number"),
    })
}

/// Takes ownership of the inherited PMI socket after checking that `fd`
/// really is an open socket, and marks it close-on-exec so that programs
/// this process starts do not inherit the job's PMI connection.
fn adopt_socket(fd: i32) -> Result<UnixStream, PmiError> {
    let env_err = |problem: String| PmiError::Env {
        var: "PMI_FD",
        problem,
    };
    if fd < 0 {
        return Err(env_err(format!("is {fd}")));
    }
    // SAFETY: fstat only writes into the zeroed stat buffer we pass; an
    // invalid fd makes it fail with EBADF.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(env_err(format!("is {fd}, which is not open: {e}")));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(env_err(format!("is {fd}, which is not a socket")));
    }
    // SAFETY: FD_CLOEXEC only affects exec; fd is open (checked above).
    unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    // SAFETY: the launcher handed this descriptor to us for exclusive use by
    // the PMI client; it is open and a socket (checked above). from_env is
    // the one place that adopts it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(UnixStream::from(owned))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmi::{PmiServer, ServerEvent};
    use std::io::{BufRead, BufReader, Write};
    use std::thread;

    /// Runs `ranks` client closures against an in-process `PmiServer`,
    /// driven by a small poll loop like stormrun's; returns the server's
    /// events once every client has disconnected.
    fn with_server<F>(ranks: u32, client: F) -> Vec<ServerEvent>
    where
        F: Fn(PmiClient) + Send + Sync + Clone + 'static,
    {
        let mut server = PmiServer::new("kvs_unit", vec![0; ranks as usize]);
        let mut threads = Vec::new();
        for r in 0..ranks {
            let stream = UnixStream::from(server.connect_rank(r).unwrap());
            let client = client.clone();
            threads.push(thread::spawn(move || {
                client(PmiClient::connect(Transport::Unix(stream), r, ranks).unwrap())
            }));
        }
        let mut events = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while (0..ranks).any(|r| server.fd(r).is_some()) {
            assert!(std::time::Instant::now() < deadline, "clients hang");
            let mut fds: Vec<_> = (0..ranks)
                .filter_map(|r| {
                    server
                        .fd(r)
                        .map(|fd| (r, crate::sys::pollfd(fd, libc::POLLIN)))
                })
                .collect();
            let mut pfds: Vec<_> = fds.iter().map(|(_, p)| *p).collect();
            crate::sys::poll(&mut pfds, Duration::from_millis(100)).unwrap();
            for ((r, _), p) in fds.iter_mut().zip(&pfds) {
                if p.revents != 0 {
                    server.on_readable(*r, &mut events);
                }
            }
        }
        for t in threads {
            t.join().expect("client thread panicked");
        }
        events
    }

    #[test]
    fn names_round_trip_through_stormruns_server_with_mpi_faults() {
        let events = with_server(1, |mut pmi| {
            let port = "port with space;and=more%";
            pmi.publish_name("svc one", port).unwrap();
            assert_eq!(pmi.lookup_name("svc one").unwrap(), port);
            let fault = |e: PmiError| match e {
                PmiError::Name { fault, .. } => fault,
                other => panic!("not a name fault: {other}"),
            };
            assert_eq!(
                fault(pmi.publish_name("svc one", "x").unwrap_err()),
                NameFault::AlreadyPublished
            );
            pmi.unpublish_name("svc one").unwrap();
            assert_eq!(
                fault(pmi.lookup_name("svc one").unwrap_err()),
                NameFault::NotPublished
            );
            assert_eq!(
                fault(pmi.unpublish_name("svc one").unwrap_err()),
                NameFault::NotPublished
            );
            pmi.finalize().unwrap();
        });
        assert!(
            events.iter().all(|e| matches!(
                e,
                ServerEvent::Finalized { .. } | ServerEvent::Disconnected { .. }
            )),
            "{events:?}"
        );
    }

    #[test]
    fn other_servers_refusals_become_name_faults() {
        let refused = |msg: &str| PmiError::Refused {
            request: "publish_name".into(),
            rc: 1,
            msg: msg.into(),
        };
        for (msg, otherwise, want) in [
            (
                "key_already_present",
                None,
                Some(NameFault::AlreadyPublished),
            ),
            (
                "duplicate_service_x",
                None,
                Some(NameFault::AlreadyPublished),
            ),
            ("service_not_published", None, Some(NameFault::NotPublished)),
            (
                "whatever",
                Some(NameFault::NotPublished),
                Some(NameFault::NotPublished),
            ),
            ("no_nameserver", None, None),
        ] {
            let got = match name_error("x", refused(msg), otherwise) {
                PmiError::Name { fault, .. } => Some(fault),
                _ => None,
            };
            assert_eq!(got, want, "{msg}");
        }
    }

    #[test]
    fn client_and_server_exchange_values_of_all_sizes() {
        let events = with_server(3, |mut pmi| {
            let me = pmi.rank();
            assert_eq!(
                (pmi.size(), pmi.appnum(), pmi.universe_size()),
                (3, 0, Some(3))
            );
            // Around the inline/chunked boundary (1023 chars = tag + 511 bytes)
            // and well past it.
            let sizes = [0usize, 1, 510, 511, 512, 1023, 1024, 5000];
            for &n in &sizes {
                let v: Vec<u8> = (0..n).map(|i| (i as u32 * 7 + me) as u8).collect();
                pmi.put(&format!("v{n}"), &v).unwrap();
            }
            pmi.fence().unwrap();
            let mut out = vec![1, 2, 3];
            for peer in 0..3 {
                for &n in &sizes {
                    pmi.get(peer, &format!("v{n}"), &mut out).unwrap();
                    let want: Vec<u8> = (0..n).map(|i| (i as u32 * 7 + peer) as u8).collect();
                    assert_eq!(out, want, "size {n} from {peer}");
                }
            }
            match pmi.get(0, "absent", &mut out) {
                Err(PmiError::KeyNotFound { key, rank: 0 }) => assert_eq!(key, "absent"),
                other => panic!("{other:?}"),
            }
            let long_key = "k".repeat(62);
            assert!(matches!(
                pmi.put(&long_key, b"x"),
                Err(PmiError::InvalidKey { .. })
            ));
            pmi.barrier().unwrap();
            pmi.finalize().unwrap();
        });
        let finalized = events
            .iter()
            .filter(|e| matches!(e, ServerEvent::Finalized { .. }))
            .count();
        assert_eq!(finalized, 3, "{events:?}");
    }

    /// A fake server that answers each request line with the next scripted
    /// reply (`None`: close the connection instead).
    fn scripted(replies: Vec<Option<&'static str>>) -> Result<PmiClient, PmiError> {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let server = thread::spawn(move || {
            let mut reader = BufReader::new(theirs);
            for reply in replies {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                match reply {
                    Some(r) => reader.get_mut().write_all(r.as_bytes()).unwrap(),
                    None => return,
                }
            }
        });
        let result = PmiClient::connect(Transport::Unix(ours), 0, 1);
        server.join().unwrap();
        result
    }

    const INIT_OK: &str = "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n";
    const MAXES: &str = "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n";
    const KVS: &str = "cmd=my_kvsname kvsname=k\n";
    const APPNUM: &str = "cmd=appnum appnum=0\n";

    #[test]
    fn malformed_server_replies_are_errors() {
        let cases: Vec<(Vec<Option<&'static str>>, &str)> = vec![
            (vec![Some("garbage\n")], "does not start with cmd="),
            (vec![Some("cmd=maxes\n")], "expected `response_to_init`"),
            (vec![Some("cmd=response_to_init rc=x\n")], "non-numeric rc"),
            (
                vec![Some("cmd=response_to_init pmi_version=2 rc=0\n")],
                "pmi_version",
            ),
            (
                vec![Some(INIT_OK), Some("cmd=maxes kvsname_max=256\n")],
                "lacks `keylen_max`",
            ),
            (
                vec![
                    Some(INIT_OK),
                    Some("cmd=maxes kvsname_max=1 keylen_max=2 vallen_max=3\n"),
                ],
                "too small",
            ),
            (
                vec![Some(INIT_OK), Some(MAXES), Some("cmd=my_kvsname\n")],
                "lacks `kvsname`",
            ),
            (
                vec![
                    Some(INIT_OK),
                    Some(MAXES),
                    Some(KVS),
                    Some("cmd=appnum appnum=-2\n"),
                ],
                "negative",
            ),
            (
                vec![
                    Some(INIT_OK),
                    Some(MAXES),
                    Some(KVS),
                    Some(APPNUM),
                    Some("cmd=universe_size s!ze=1\n"),
                ],
                "invalid key character",
            ),
            (
                vec![
                    Some(INIT_OK),
                    Some(MAXES),
                    Some(KVS),
                    Some(APPNUM),
                    Some("cmd=universe_size size=1\n"),
                    Some("cmd=get_result rc=0 value=(vector,(0,1))\n"),
                ],
                "PMI_process_mapping=`(vector,(0,1))`: block `(0,1)` has not three numbers",
            ),
        ];
        for (script, needle) in cases {
            match scripted(script.clone()) {
                Err(PmiError::Malformed(msg)) => assert!(msg.contains(needle), "{script:?}: {msg}"),
                other => panic!("{script:?} gave {other:?}"),
            }
        }
    }

    #[test]
    fn refusals_and_closed_connections_are_errors() {
        match scripted(vec![Some("cmd=response_to_init rc=-1 msg=go_away\n")]) {
            Err(PmiError::Refused {
                rc: -1,
                msg,
                request,
            }) => {
                assert_eq!((msg.as_str(), request.as_str()), ("go_away", "init"))
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(scripted(vec![None]), Err(PmiError::Closed)));
        assert!(matches!(
            scripted(vec![Some("cmd=response_to_init")]),
            Err(PmiError::Closed)
        ));
        let ok = scripted(vec![
            Some(INIT_OK),
            Some(MAXES),
            Some(KVS),
            Some(APPNUM),
            Some("cmd=universe_size size=-1\n"),
            Some("cmd=get_result rc=-1 msg=key_PMI_process_mapping_not_found\n"),
        ])
        .unwrap();
        assert_eq!(ok.universe_size(), None, "Hydra's -1 means unknown");
        assert_eq!(ok.nodes(), None, "stormrun has no process mapping");
        // Slurm's PMI-1 server does not number applications.
        let slurm = scripted(vec![
            Some(INIT_OK),
            Some(MAXES),
            Some(KVS),
            Some("cmd=appnum rc=0 appnum=-1\n"),
            Some("cmd=universe_size rc=0 size=4\n"),
            Some("cmd=get_result rc=0 value=(vector,(0,1,1))\n"),
        ])
        .unwrap();
        assert_eq!((slurm.appnum(), slurm.universe_size()), (0, Some(4)));
        assert_eq!(
            slurm.nodes(),
            Some(&[0][..]),
            "the mapping of a PMI-1 server"
        );
    }

    /// Frames a PMI-2 reply as Hydra does (length right-aligned).
    fn frame(body: &str) -> Vec<u8> {
        format!("{:>6}{body}", body.len()).into_bytes()
    }

    /// A fake PMI-2 server: answers the init line with `init_reply`, then each command with the
    /// next scripted reply (`None`: close instead). Returns what the client sent (the init line,
    /// then command bodies) once the script is done or the client hung up.
    fn fake_v2(
        init_reply: &'static str,
        replies: Vec<Option<String>>,
    ) -> (UnixStream, thread::JoinHandle<Vec<String>>) {
        let (ours, theirs) = UnixStream::pair().unwrap();
        let server = thread::spawn(move || {
            use std::io::Read;
            let mut seen = Vec::new();
            let mut reader = BufReader::new(theirs);
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return seen;
            }
            seen.push(line.trim_end().to_string());
            reader.get_mut().write_all(init_reply.as_bytes()).unwrap();
            for reply in replies {
                let mut len = [0u8; 6];
                if reader.read_exact(&mut len).is_err() {
                    return seen;
                }
                let n: usize = std::str::from_utf8(&len).unwrap().trim().parse().unwrap();
                let mut body = vec![0u8; n];
                reader.read_exact(&mut body).unwrap();
                seen.push(String::from_utf8(body).unwrap());
                match reply {
                    Some(r) => reader.get_mut().write_all(&frame(&r)).unwrap(),
                    None => return seen,
                }
            }
            seen
        });
        (ours, server)
    }

    const V2_INIT_OK: &str = "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n";

    /// Slurm's replies to the start-up of rank 1 of 2, two nodes of one rank each.
    fn slurm_startup() -> Vec<Option<String>> {
        [
            "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=2;appnum=-1;\
             debugged=FALSE;pmiverbose=FALSE;",
            "cmd=job-getid-response;rc=0;jobid=7.0;",
            "cmd=info-getjobattr-response;rc=0;found=TRUE;value=2;",
            "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,2,1));",
        ]
        .iter()
        .map(|r| Some(r.to_string()))
        .collect()
    }

    #[test]
    fn pmi2_session_against_a_scripted_slurm() {
        let mut script = slurm_startup();
        for r in [
            "cmd=kvs-put-response;rc=0;",
            "cmd=kvs-fence-response;rc=0;",
            "cmd=kvs-get-response;rc=0;found=TRUE;value=x6869;",
            "cmd=kvs-get-response;rc=0;found=FALSE;",
            "cmd=finalize-response;rc=0;",
        ] {
            script.push(Some(r.to_string()));
        }
        let (stream, server) = fake_v2(V2_INIT_OK, script);
        let mut pmi =
            PmiClient::connect_v2(Transport::Unix(stream), 1, Some(2), Some("7.0")).unwrap();
        assert_eq!((pmi.rank(), pmi.size(), pmi.version()), (1, 2, 2));
        assert_eq!((pmi.appnum(), pmi.kvsname()), (0, "7.0"));
        assert_eq!(pmi.universe_size(), Some(2));
        assert_eq!(pmi.nodes(), Some(&[0, 1][..]));
        pmi.put("host", b"hi").unwrap();
        pmi.fence().unwrap();
        let mut out = Vec::new();
        pmi.get(0, "host", &mut out).unwrap();
        assert_eq!(out, b"hi");
        assert!(matches!(
            pmi.get(0, "nothing", &mut out),
            Err(PmiError::KeyNotFound { rank: 0, .. })
        ));
        pmi.finalize().unwrap();
        assert_eq!(
            server.join().unwrap(),
            [
                "cmd=init pmi_version=2 pmi_subversion=0",
                "cmd=fullinit;pmijobid=7.0;pmirank=1;threaded=FALSE;",
                "cmd=job-getid;",
                "cmd=info-getjobattr;key=universeSize;",
                "cmd=info-getjobattr;key=PMI_process_mapping;",
                "cmd=kvs-put;key=host-1;value=x6869;",
                "cmd=kvs-fence;",
                "cmd=kvs-get;jobid=7.0;srcid=0;key=host-0;",
                "cmd=kvs-get;jobid=7.0;srcid=0;key=nothing-0;",
                "cmd=finalize;",
            ]
        );
    }

    /// A PMI-2 spawn goes out in the order Slurm's parser reads (counts and preput pairs, then
    /// per command its fields); a child whose `fullinit` answer names a spawner reads the
    /// parents' port from its key-value space, one that was not spawned asks nothing.
    #[test]
    fn pmi2_spawn_request_and_the_spawned_childs_parent_port() {
        let mut script = slurm_startup();
        script.push(Some("cmd=spawn-response;rc=0;jobid=7.1;nerrs=0;".into()));
        let (stream, server) = fake_v2(V2_INIT_OK, script);
        let mut pmi =
            PmiClient::connect_v2(Transport::Unix(stream), 1, Some(2), Some("7.0")).unwrap();
        assert_eq!(pmi.parent_port().unwrap(), None);
        let cmds = [
            SpawnCommand {
                command: "a.out".into(),
                args: vec!["x".into(), "y;z".into()],
                maxprocs: 2,
                info: vec![("wdir".into(), "/tmp".into())],
                preput: vec![(PARENT_PORT_KEY.into(), "stormpi-port:p".into())],
            },
            SpawnCommand {
                command: "b.out".into(),
                maxprocs: 1,
                preput: vec![(PARENT_PORT_KEY.into(), "stormpi-port:p".into())],
                ..SpawnCommand::default()
            },
        ];
        pmi.spawn(&cmds).unwrap();
        drop(pmi);
        let seen = server.join().unwrap();
        assert_eq!(
            seen.last().unwrap(),
            "cmd=spawn;ncmds=2;preputcount=1;ppkey0=PARENT_ROOT_PORT_NAME;\
             ppval0=stormpi-port:p;subcmd=a.out;maxprocs=2;argc=2;argv0=x;argv1=y;;z;\
             infokeycount=1;infokey0=wdir;infoval0=/tmp;subcmd=b.out;maxprocs=1;argc=0;\
             infokeycount=0;"
        );

        let mut script = slurm_startup();
        script[0] = Some(
            "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=2;\
             appnum=0;spawner-jobid=7.0;"
                .into(),
        );
        script.push(Some(
            "cmd=kvs-get-response;rc=0;found=TRUE;value=stormpi-port:p;".into(),
        ));
        let (stream, server) = fake_v2(V2_INIT_OK, script);
        let mut pmi =
            PmiClient::connect_v2(Transport::Unix(stream), 1, Some(2), Some("7.1")).unwrap();
        if std::env::var_os(PARENT_PORT_ENV).is_none() {
            assert_eq!(
                pmi.parent_port().unwrap().as_deref(),
                Some("stormpi-port:p")
            );
            drop(pmi);
            let seen = server.join().unwrap();
            assert_eq!(
                seen.last().unwrap(),
                "cmd=kvs-get;jobid=7.0;srcid=1;key=PARENT_ROOT_PORT_NAME;"
            );
        }
    }

    #[test]
    fn pmi2_malformed_replies_are_errors_that_say_what() {
        let start = slurm_startup();
        let with = |n: usize, last: &str| {
            let mut s: Vec<Option<String>> = start[..n].to_vec();
            s.push(Some(last.to_string()));
            s
        };
        let cases: Vec<(&'static str, Vec<Option<String>>, &str)> = vec![
            (
                "cmd=response_to_init pmi_version=1 rc=0\n",
                vec![],
                "does not speak PMI-2",
            ),
            ("cmd=maxes\n", vec![], "expected `response_to_init`"),
            ("garbage\n", vec![], "does not start with cmd="),
            (
                V2_INIT_OK,
                with(0, "cmd=fullinit-response;rc=0;size=2;"),
                "lacks `rank`",
            ),
            (
                V2_INIT_OK,
                with(0, "cmd=fullinit-response;rank=0;size=2;appnum=0;"),
                "answered with rank 0",
            ),
            (
                V2_INIT_OK,
                with(0, "cmd=fullinit-response;rank=1;size=x;"),
                "`size=x` is not a number",
            ),
            (
                V2_INIT_OK,
                with(0, "cmd=fullinit-response;rank=1;size=2;appnum=-3;"),
                "appnum -3 is negative",
            ),
            (
                V2_INIT_OK,
                with(1, "cmd=job-getid-response;rc=0;"),
                "lacks `jobid`",
            ),
            (
                V2_INIT_OK,
                with(2, "cmd=info-getjobattr-response;found=TRUE;value=many;"),
                "universeSize=`many`",
            ),
            (
                V2_INIT_OK,
                with(
                    3,
                    "cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,2));",
                ),
                "PMI_process_mapping=`(vector,(0,2))`: block `(0,2)` has not three numbers",
            ),
            (
                V2_INIT_OK,
                with(0, "no command here"),
                "no `key=value` pair at byte 2",
            ),
            (
                V2_INIT_OK,
                with(1, "cmd=kvs-fence-response;rc=0;"),
                "expected `job-getid-response`",
            ),
        ];
        for (init, script, needle) in cases {
            let (stream, server) = fake_v2(init, script.clone());
            let got = PmiClient::connect_v2(Transport::Unix(stream), 1, Some(2), Some("7.0"));
            drop(server.join());
            match got {
                Err(PmiError::Malformed(m)) | Err(PmiError::Unsupported(m)) => {
                    assert!(m.contains(needle), "{script:?}: {m}")
                }
                other => panic!("{script:?} gave {other:?}"),
            }
        }
        // A size other than the environment's, a refusal, a bad length prefix, a hang-up.
        let (stream, server) = fake_v2(V2_INIT_OK, slurm_startup());
        let got = PmiClient::connect_v2(Transport::Unix(stream), 1, Some(3), None);
        drop(server.join());
        assert!(matches!(got, Err(PmiError::Malformed(m)) if m.contains("the environment 3")));
        let (stream, server) = fake_v2(
            V2_INIT_OK,
            vec![Some(
                "cmd=fullinit-response;rc=3;errmsg=no such job;".into(),
            )],
        );
        let got = PmiClient::connect_v2(Transport::Unix(stream), 1, None, None);
        drop(server.join());
        assert!(matches!(got, Err(PmiError::Refused { rc: 3, msg, .. }) if msg == "no such job"));
        let (stream, server) = fake_v2(V2_INIT_OK, vec![None]);
        let got = PmiClient::connect_v2(Transport::Unix(stream), 1, None, None);
        drop(server.join());
        assert!(matches!(got, Err(PmiError::Closed)), "{got:?}");
        let (ours, theirs) = UnixStream::pair().unwrap();
        let server = thread::spawn(move || {
            let mut reader = BufReader::new(theirs);
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            reader.get_mut().write_all(V2_INIT_OK.as_bytes()).unwrap();
            let mut fullinit = [0u8; 6 + 38]; // `cmd=fullinit;pmirank=1;threaded=FALSE;`
            std::io::Read::read_exact(&mut reader, &mut fullinit).unwrap();
            reader.get_mut().write_all(b"12x   cmd=x;").unwrap();
        });
        let got = PmiClient::connect_v2(Transport::Unix(ours), 1, None, None);
        server.join().unwrap();
        assert!(
            matches!(&got, Err(PmiError::Malformed(m)) if m.contains("length prefix `12x   `")),
            "{got:?}"
        );
    }

    #[test]
    fn the_protocol_is_chosen_from_the_environment() {
        fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
            move |v: &str| {
                vars.iter()
                    .find(|(k, _)| *k == v)
                    .map(|(_, val)| val.to_string())
            }
        }
        let slurm_pmi2 = [
            ("PMI_FD", "5"),
            ("PMI_JOBID", "7.0"),
            ("PMI_RANK", "0"),
            ("PMI_SIZE", "2"),
        ];
        assert_eq!(
            plan(&env(&slurm_pmi2)).unwrap(),
            Plan::V2Fd(Some("7.0".into()))
        );
        // Hydra: PMI_FD without PMI_JOBID.
        let hydra = [("PMI_FD", "6"), ("PMI_RANK", "0"), ("PMI_SIZE", "1")];
        assert_eq!(plan(&env(&hydra)).unwrap(), Plan::V1Fd);
        assert_eq!(
            plan(&env(&[("PMI_FD", "6"), (PROTOCOL_ENV, "pmi2")])).unwrap(),
            Plan::V2Fd(None)
        );
        assert_eq!(
            plan(&env(&[
                ("PMI_FD", "5"),
                ("PMI_JOBID", "7.0"),
                (PROTOCOL_ENV, "pmi1")
            ]))
            .unwrap(),
            Plan::V1Fd
        );
        // stormrun's ranks carry a key: PMI-1, and PMI-2 cannot be forced.
        let stormrun = [("PMI_FD", "5"), ("PMI_JOBID", "x"), (port::KEY_ENV, "00")];
        assert_eq!(plan(&env(&stormrun)).unwrap(), Plan::V1Fd);
        let forced = [
            ("PMI_FD", "5"),
            (port::KEY_ENV, "00"),
            (PROTOCOL_ENV, "pmi2"),
        ];
        assert!(matches!(plan(&env(&forced)), Err(PmiError::Unsupported(_))));
        assert_eq!(plan(&env(&[("PMI_PORT", "h:1")])).unwrap(), Plan::Port);
        assert!(matches!(
            plan(&env(&[("PMI_PORT", "h:1"), (PROTOCOL_ENV, "pmi2")])),
            Err(PmiError::Unsupported(_))
        ));
        assert_eq!(plan(&env(&[])).unwrap(), Plan::Singleton);
        assert_eq!(
            plan(&env(&[("PMI_FD", "5"), (PROTOCOL_ENV, "singleton")])).unwrap(),
            Plan::Singleton
        );
        assert!(matches!(
            plan(&env(&[(PROTOCOL_ENV, "pmi1")])),
            Err(PmiError::Env { var: "PMI_FD", .. })
        ));
        assert!(matches!(
            plan(&env(&[(PROTOCOL_ENV, "pmix")])),
            Err(PmiError::Env {
                var: "PMIX_NAMESPACE",
                ..
            })
        ));
        assert!(matches!(
            plan(&env(&[(PROTOCOL_ENV, "pmi3")])),
            Err(PmiError::Env {
                var: PROTOCOL_ENV,
                ..
            })
        ));
        // PMIx launchers (srun --mpi=pmix, Open MPI's mpirun) set PMIX_NAMESPACE.
        let pmix = [("PMIX_NAMESPACE", "slurm.pmix.7.0"), ("PMIX_RANK", "1")];
        assert_eq!(plan(&env(&pmix)).unwrap(), Plan::Pmix);
        let forced = [("PMIX_NAMESPACE", "x"), (PROTOCOL_ENV, "pmix")];
        assert_eq!(plan(&env(&forced)).unwrap(), Plan::Pmix);
        // A PMI socket wins over PMIx variables a launcher above left behind.
        let both = [("PMIX_NAMESPACE", "x"), ("PMI_FD", "5")];
        assert_eq!(plan(&env(&both)).unwrap(), Plan::V1Fd);
        // srun --mpi=none: an error when there are several tasks, a singleton for one.
        let none = [("SLURM_STEP_NUM_TASKS", "4"), ("SLURM_PROCID", "2")];
        match plan(&env(&none)) {
            Err(PmiError::Unsupported(m)) => assert!(m.contains("srun --mpi=pmi2"), "{m}"),
            other => panic!("{other:?}"),
        }
        let one = [("SLURM_STEP_NUM_TASKS", "1"), ("SLURM_PROCID", "0")];
        assert_eq!(plan(&env(&one)).unwrap(), Plan::Singleton);
        let forced_single = [("SLURM_STEP_NUM_TASKS", "4"), (PROTOCOL_ENV, "singleton")];
        assert_eq!(plan(&env(&forced_single)).unwrap(), Plan::Singleton);
    }

    #[test]
    fn keys_are_scoped_and_checked() {
        assert_eq!(scoped_key("btl.sm", 12).unwrap(), "btl.sm-12");
        assert_eq!(scoped_key("a-1", 2).unwrap(), "a-1-2");
        for bad in ["", "a b", "a=b", "a\\b", "é", "a;b"] {
            assert!(
                matches!(scoped_key(bad, 0), Err(PmiError::InvalidKey { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn bad_pmi_fd_is_an_error_not_a_panic() {
        assert!(matches!(
            PmiClient::from_fd_env("x"),
            Err(PmiError::Env { var: "PMI_FD", .. })
        ));
        // Closed or non-socket descriptors are refused before anything is read.
        assert!(matches!(adopt_socket(987_654), Err(PmiError::Env { .. })));
        assert!(matches!(adopt_socket(-3), Err(PmiError::Env { .. })));
        let file = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsRawFd;
        match adopt_socket(file.as_raw_fd()) {
            Err(PmiError::Env { problem, .. }) => assert!(problem.contains("not a socket")),
            other => panic!("{other:?}"),
        }
    }
}
