//! `MPI_Comm_spawn` and `MPI_Comm_spawn_multiple`: a new job, and an intercommunicator with it.
//!
//! The parents' root opens a port and asks the runtime to start the children as a job of their
//! own, telling them the port's name ([`Rte::spawn`](crate::rte::Rte::spawn)); it broadcasts
//! the outcome (the error class if the runtime refused) and the number of processes asked for.
//! Then the parents accept at the port while the children's root connects to it from their
//! `MPI_Init` ([`connect_parent`]): the meeting of [`connect_accept`], so the children join
//! the parents' engines as any other job's processes do (and the parents join theirs). The root
//! closes the port after the meeting, whatever its outcome.

use super::*;
use crate::info::{InfoId, InfoTable};
use crate::rte::SpawnRequest;

/// A spawn request as the MPI layer has it: commands with their info objects by id.
pub trait SpawnArgs {
    /// Number of commands.
    fn commands(&self) -> usize;
    /// Command `i`'s program.
    fn command(&self, i: usize) -> Result<&str>;
    /// Calls `each` with command `i`'s arguments in order.
    fn args(&self, i: usize, each: &mut dyn FnMut(&str) -> Result<()>) -> Result<()>;
    /// How many processes run command `i`.
    fn maxprocs(&self, i: usize) -> u32;
    /// Command `i`'s info object, if any.
    fn info(&self, i: usize) -> Result<Option<InfoId>>;
}

/// A request for the runtime: the MPI layer's arguments with the info objects read out.
struct Request<'a> {
    args: &'a dyn SpawnArgs,
    infos: &'a InfoTable,
}

impl SpawnRequest for Request<'_> {
    fn commands(&self) -> usize {
        self.args.commands()
    }

    fn command(&self, i: usize) -> Result<&str> {
        self.args.command(i)
    }

    fn args(&self, i: usize, each: &mut dyn FnMut(&str) -> Result<()>) -> Result<()> {
        self.args.args(i, each)
    }

    fn maxprocs(&self, i: usize) -> u32 {
        self.args.maxprocs(i)
    }

    fn info(&self, i: usize, each: &mut dyn FnMut(&str, &str) -> Result<()>) -> Result<()> {
        let Some(id) = self.args.info(i)? else {
            return Ok(());
        };
        let bad = || {
            Error::new(
                ErrorClass::Info,
                Reason::BadArgument {
                    what: "a spawn info key or value is not UTF-8",
                },
            )
        };
        for k in 0..self.infos.nkeys(id)? {
            let key = self.infos.nthkey(id, k)?;
            let value = self.infos.get(id, key)?.unwrap_or(&[]);
            let key = core::str::from_utf8(key).map_err(|_| bad())?;
            let value = core::str::from_utf8(value).map_err(|_| bad())?;
            each(key, value)?;
        }
        Ok(())
    }
}

/// Most bytes of a port name (`MPI_MAX_PORT_NAME`, without the NUL).
const MAX_PORT: usize = 255;

/// `MPI_Comm_spawn(_multiple)` over intracommunicator `comm`, whose rank `root` passes `req`
/// (which matters at the root only), waiting at most `timeout_ms` for the children to connect.
/// Collective over `comm`. Returns the number of processes asked for (known at every member
/// once the root has broadcast it; 0 if the root failed before counting) and the
/// intercommunicator whose remote group is the children.
pub fn spawn(
    cx: &mut Inside,
    comm: CommId,
    root: i32,
    req: Option<&dyn SpawnArgs>,
    timeout_ms: u64,
) -> (u32, Result<CommId>) {
    let c = match cx.e().check_comm(comm) {
        Ok(c) => c.clone(),
        Err(e) => return (0, Err(e)),
    };
    if c.is_inter() {
        return (0, Err(not_intra()));
    }
    let size = c.size();
    if root < 0 || root as u32 >= size {
        return (
            0,
            Err(Error::new(
                ErrorClass::Root,
                Reason::RankOutOfRange { rank: root, size },
            )),
        );
    }
    let m = Members {
        comm,
        group: None,
        root: root as u32,
        n: size,
        me: (c.rank + size - root as u32) % size,
        tag: TAG_INTER,
    };

    // The root starts the children: head = ok flag, error class or 0, processes asked for.
    let mut head = [0u8; 9];
    let mut port = [0u8; MAX_PORT];
    let mut port_len = 0;
    let mut failed = None;
    if m.me == 0 {
        let mut total = 0u32;
        let r = launch(cx.e(), req, &mut port, &mut port_len, &mut total);
        head[5..].copy_from_slice(&total.to_be_bytes());
        match r {
            Ok(()) => head[0] = 1,
            Err(e) => {
                head[1..5].copy_from_slice(&(e.class as u32).to_be_bytes());
                failed = Some(e);
            }
        }
    }
    // SAFETY: `head` is borrowed for the call.
    let b = unsafe { bcast_among(cx, &m, head.as_mut_ptr(), head.len(), Datatype::BYTE) };
    let total = u32::from_be_bytes([head[5], head[6], head[7], head[8]]);
    if let Err(e) = b {
        return (total, Err(e));
    }
    if head[0] != 1 {
        let class = ErrorClass::from_code(i32::from_be_bytes([head[1], head[2], head[3], head[4]]))
            .unwrap_or(ErrorClass::Spawn);
        return (
            total,
            Err(failed.unwrap_or(Error::new(
                class,
                Reason::BadArgument {
                    what: "the root could not spawn the processes",
                },
            ))),
        );
    }

    // The parents accept the children at the port.
    let how = (m.me == 0).then_some(Meet::Accept(&port[..port_len]));
    let r = connect_accept(cx, comm, root, how, timeout_ms);
    if m.me == 0 {
        if let Some(ports) = cx.e().platform.ports() {
            let _ = ports.close(&port[..port_len]);
        }
    }
    (total, r)
}

/// The root's part: checks the request, opens the port and has the runtime start the children.
fn launch(
    e: &mut Engine,
    req: Option<&dyn SpawnArgs>,
    port: &mut [u8; MAX_PORT],
    port_len: &mut usize,
    total: &mut u32,
) -> Result<()> {
    let req = req.ok_or(Error::bad_arg("no spawn request at the root"))?;
    if req.commands() == 0 {
        return Err(Error::bad_arg("count of commands to spawn is not positive"));
    }
    for i in 0..req.commands() {
        let n = req.maxprocs(i);
        if n == 0 {
            return Err(Error::bad_arg("maxprocs is not positive"));
        }
        *total = total
            .checked_add(n)
            .ok_or(Error::bad_arg("the processes to spawn overflow a count"))?;
    }
    let max = e.params().u32(&crate::engine::DPM_MAX_PROCS);
    // Slots come back when nothing reaches their processes, but a process still connected to
    // many may have no run long enough for these.
    let (_, free) = e.free_slots();
    if *total > free {
        return Err(Error::exhausted(
            "process slots for processes of other jobs (spawned ones count)",
            max,
            crate::engine::DPM_MAX_PROCS.name,
        ));
    }
    let ports = e.platform.ports().ok_or(Error::unsupported(
        "MPI_Comm_spawn on a platform without a network",
    ))?;
    *port_len = ports.open(port)?.min(MAX_PORT);
    let name = core::str::from_utf8(&port[..*port_len])
        .map_err(|_| Error::bad_arg("a port name is not UTF-8"))?;
    let (rte, infos) = e.rte_with_infos();
    let r = rte.spawn(&Request { args: req, infos }, name);
    if r.is_err() {
        let _ = ports.close(&port[..*port_len]);
    }
    r
}

/// In a spawned job's `MPI_Init`: the intercommunicator with the parents, over `world`, whose
/// rank 0 connects to the port the runtime names; `None` for a job that was not spawned.
pub fn connect_parent(cx: &mut Inside, world: CommId, timeout_ms: u64) -> Result<Option<CommId>> {
    let mut port = [0u8; MAX_PORT];
    let Some(n) = cx.e().parent_port(&mut port) else {
        return Ok(None);
    };
    let me = cx.e().check_comm(world)?.rank;
    let how = (me == 0).then_some(Meet::Connect(&port[..n.min(MAX_PORT)]));
    connect_accept(cx, world, 0, how, timeout_ms).map(Some)
}
