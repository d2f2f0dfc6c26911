//! Runtimes on Linux: PMI (under stormrun, Hydra or Slurm) or a singleton.

use std::sync::OnceLock;

use stormpi_bootstrap::pmi::names::NameFault;
use stormpi_bootstrap::pmi::spawn::{SpawnCommand, PARENT_PORT_KEY};
use stormpi_bootstrap::pmi::{PmiClient, PmiError};
use stormpi_core::error::{Error, ErrorClass, Reason, Result};
use stormpi_core::rte::{ProcId, Rte, Singleton, SpawnRequest};

fn pmi_error(what: &'static str, e: PmiError) -> Error {
    eprintln!("stormpi: PMI: {what}: {e}");
    Error::new(ErrorClass::Intern, Reason::Runtime { what })
}

/// The MPI error for a failed name-service request: the class MPI gives each refusal
/// (`MPI_ERR_NAME` for a lookup of an unpublished service, `MPI_ERR_SERVICE` for publishing a
/// published one or unpublishing an unpublished one), an unsupported launcher as
/// `MPI_ERR_UNSUPPORTED_OPERATION`, anything else as a runtime failure.
fn name_error(what: &'static str, e: PmiError) -> Error {
    let (class, why): (ErrorClass, &'static str) = match &e {
        PmiError::Name { fault, .. } => match fault {
            NameFault::NotPublished if what.starts_with("looking") => {
                (ErrorClass::Name, "no service of that name is published")
            }
            NameFault::NotPublished => {
                (ErrorClass::Service, "no service of that name is published")
            }
            NameFault::AlreadyPublished => {
                (ErrorClass::Service, "the service is published already")
            }
            NameFault::Full => (
                ErrorClass::Service,
                "the launcher holds too many published services",
            ),
            NameFault::BadName => (
                ErrorClass::Arg,
                "the service or port name is empty or too long",
            ),
        },
        PmiError::Unsupported(_) => {
            eprintln!("stormpi: PMI: {what}: {e}");
            return Error::unsupported("name publishing under this launcher");
        }
        _ => return pmi_error(what, e),
    };
    Error::new(class, Reason::BadArgument { what: why })
}

/// A runtime over a PMI client.
pub struct PmiRte {
    client: Option<PmiClient>,
    rank: u32,
    size: u32,
    host: String,
    nodes: OnceLock<Vec<u32>>,
    /// For a process a spawn started, the port its parents wait at.
    parent_port: Option<String>,
}

impl PmiRte {
    /// Wraps `client` and learns the node layout: from the launcher's process mapping when it
    /// gives one (`PMI_process_mapping`, from Slurm and Hydra, PMI-1 or PMI-2 — the launcher
    /// knows its nodes even when several share one machine, as two slurmds on one host do),
    /// else by publishing this process's node name: the one the launcher gives in
    /// `STORMPI_NODE` (stormrun knows which of its hosts started the rank — several "hosts" may
    /// share one machine, e.g. network namespaces), else the host name.
    pub fn new(mut client: PmiClient) -> Result<PmiRte> {
        let host = std::env::var("STORMPI_NODE")
            .ok()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(hostname);
        let nodes = OnceLock::new();
        match client.nodes() {
            Some(map) if map.len() == client.size() as usize => {
                let _ = nodes.set(first_appearance(map));
            }
            _ => client
                .put("host", host.as_bytes())
                .map_err(|e| pmi_error("publishing the host name", e))?,
        }
        let parent_port = client
            .parent_port()
            .map_err(|e| pmi_error("reading the port of the parents that spawned this job", e))?;
        Ok(PmiRte {
            parent_port,
            rank: client.rank(),
            size: client.size(),
            client: Some(client),
            host,
            nodes,
        })
    }

    /// The job's key-value space name (shared by all its ranks).
    pub fn kvsname(&self) -> Option<&str> {
        self.client.as_ref().map(PmiClient::kvsname)
    }

    /// The PMI client, which lives until `finalize`.
    fn client(&mut self) -> Result<&mut PmiClient> {
        self.client
            .as_mut()
            .ok_or(Error::new(ErrorClass::Other, Reason::NotInitialized))
    }

    /// Fills in the node numbers of every process: processes with the same host name share a
    /// number, in order of first appearance. Called after the modex fence.
    fn fill_nodes(&mut self) {
        if self.nodes.get().is_none() {
            let mut hosts: Vec<Vec<u8>> = Vec::new();
            let mut nodes = Vec::with_capacity(self.size as usize);
            let mut buf = Vec::new();
            for p in 0..self.size {
                let name = if p == self.rank {
                    self.host.as_bytes().to_vec()
                } else {
                    match self.client.as_mut().map(|c| c.get(p, "host", &mut buf)) {
                        Some(Ok(())) => buf.clone(),
                        _ => format!("unknown-{p}").into_bytes(),
                    }
                };
                let id = hosts.iter().position(|h| *h == name).unwrap_or_else(|| {
                    hosts.push(name);
                    hosts.len() - 1
                });
                nodes.push(id as u32);
            }
            let _ = self.nodes.set(nodes);
        }
    }
}

/// Renumbers node ids `0, 1, ...` in order of first appearance (as host names are numbered), so
/// that ids stay small whatever numbers the launcher used.
fn first_appearance(map: &[u32]) -> Vec<u32> {
    let mut seen: Vec<u32> = Vec::new();
    map.iter()
        .map(|n| {
            let id = seen.iter().position(|s| s == n).unwrap_or_else(|| {
                seen.push(*n);
                seen.len() - 1
            });
            id as u32
        })
        .collect()
}

/// This machine's host name.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is writable for its length.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let n = buf.iter().position(|&b| b == 0).unwrap_or(0);
    if ok && n > 0 {
        String::from_utf8_lossy(&buf[..n]).into_owned()
    } else {
        "localhost".into()
    }
}

impl Rte for PmiRte {
    fn rank(&self) -> ProcId {
        ProcId(self.rank)
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn node_of(&self, proc: ProcId) -> u32 {
        // `nodes` needs `&mut self` for PMI; callers ask after the fence, through `&self`, so
        // the table is filled by `modex_fence`.
        self.nodes
            .get()
            .and_then(|n| n.get(proc.0 as usize).copied())
            .unwrap_or(0)
    }

    fn modex_put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.client()?
            .put(key, value)
            .map_err(|e| pmi_error("modex put", e))
    }

    fn modex_fence(&mut self) -> Result<()> {
        self.client()?
            .fence()
            .map_err(|e| pmi_error("modex fence", e))?;
        self.fill_nodes();
        Ok(())
    }

    fn modex_get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>> {
        let mut buf = Vec::new();
        match self.client()?.get(proc.0, key, &mut buf) {
            Ok(()) => {
                let n = buf.len().min(out.len());
                out[..n].copy_from_slice(&buf[..n]);
                Ok(Some(n))
            }
            Err(PmiError::KeyNotFound { .. }) => Ok(None),
            Err(e) => Err(pmi_error("modex get", e)),
        }
    }

    fn barrier(&mut self) -> Result<()> {
        self.client()?
            .barrier()
            .map_err(|e| pmi_error("barrier", e))
    }

    fn appnum(&self) -> Option<u32> {
        self.client.as_ref().map(PmiClient::appnum)
    }

    fn publish_name(&mut self, service: &str, port: &str) -> Result<()> {
        self.client()?
            .publish_name(service, port)
            .map_err(|e| name_error("publishing a service name", e))
    }

    fn lookup_name(&mut self, service: &str, out: &mut [u8]) -> Result<usize> {
        let port = self
            .client()?
            .lookup_name(service)
            .map_err(|e| name_error("looking up a service name", e))?;
        let n = port.len().min(out.len());
        out[..n].copy_from_slice(&port.as_bytes()[..n]);
        Ok(n)
    }

    fn unpublish_name(&mut self, service: &str) -> Result<()> {
        self.client()?
            .unpublish_name(service)
            .map_err(|e| name_error("unpublishing a service name", e))
    }

    fn spawn(&mut self, req: &dyn SpawnRequest, parent_port: &str) -> Result<()> {
        let mut cmds = Vec::with_capacity(req.commands());
        for i in 0..req.commands() {
            let mut cmd = SpawnCommand {
                command: req.command(i)?.to_string(),
                maxprocs: req.maxprocs(i),
                preput: vec![(PARENT_PORT_KEY.to_string(), parent_port.to_string())],
                ..SpawnCommand::default()
            };
            req.args(i, &mut |a| {
                cmd.args.push(a.to_string());
                Ok(())
            })?;
            req.info(i, &mut |k, v| {
                cmd.info.push((k.to_string(), v.to_string()));
                Ok(())
            })?;
            cmds.push(cmd);
        }
        self.client()?.spawn(&cmds).map_err(|e| match e {
            PmiError::Unsupported(_) => {
                eprintln!("stormpi: MPI_Comm_spawn: {e}");
                Error::unsupported(
                    "MPI_Comm_spawn under this launcher (stormrun, Hydra and Slurm's --mpi=pmi2 \
                     serve it)",
                )
            }
            // The launcher printed why it refused.
            PmiError::Refused { .. } => Error::new(
                ErrorClass::Spawn,
                Reason::BadArgument {
                    what: "the launcher could not start the processes (its message says why)",
                },
            ),
            PmiError::Malformed(ref why) if why.contains("line break") => Error::new(
                ErrorClass::Spawn,
                Reason::BadArgument {
                    what: "a spawn command, argument or info value holds a line break",
                },
            ),
            e => pmi_error("spawn", e),
        })
    }

    fn parent_port(&self, out: &mut [u8]) -> Option<usize> {
        let port = self.parent_port.as_deref()?;
        let n = port.len().min(out.len());
        out[..n].copy_from_slice(&port.as_bytes()[..n]);
        Some(n)
    }

    fn abort(&mut self, code: i32, msg: &str) -> ! {
        match self.client.as_mut() {
            Some(c) => c.abort(code, msg),
            None => singleton_abort(code, msg),
        }
    }

    fn finalize(&mut self) -> Result<()> {
        match self.client.take() {
            Some(c) => c.finalize().map_err(|e| pmi_error("finalize", e)),
            None => Ok(()),
        }
    }
}

fn singleton_abort(code: i32, msg: &str) -> ! {
    eprintln!("stormpi: {msg}");
    std::process::exit(if code == 0 { 1 } else { code })
}

/// The runtime of a process started without a launcher.
pub fn singleton() -> Singleton<8> {
    Singleton::new(singleton_abort)
}

#[cfg(test)]
mod tests {
    use super::first_appearance;

    #[test]
    fn launcher_node_ids_become_small_ids_in_order() {
        assert_eq!(first_appearance(&[7, 7, 3, 3, 7]), vec![0, 0, 1, 1, 0]);
        assert_eq!(first_appearance(&[]), Vec::<u32>::new());
    }
}
