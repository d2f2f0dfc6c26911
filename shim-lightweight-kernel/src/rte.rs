//! The node runtime: the job from the environment, a barrier over Portals, no modex server.
//!
//! Nothing is published or fetched: Portals addresses are ranks, and the architecture
//! descriptors are taken to be this process's own (a machine's compute nodes are one
//! architecture). A value this process put is returned to itself; other keys of other processes
//! are absent.

use stormpi_core::arch::Arch;
use stormpi_core::error::{Error, ErrorClass, Reason, Result};
use stormpi_core::rte::{ProcId, Rte};

use crate::env::JobEnv;
use crate::ptl::Portals;

/// The runtime of a node process.
pub struct LwkRte {
    job: JobEnv,
    portals: Portals,
    own: Vec<(String, Vec<u8>)>,
}

fn runtime(what: &'static str, e: impl std::fmt::Display) -> Error {
    crate::platform::eprint_line(&format!("stormpi: {what}: {e}"));
    Error::new(ErrorClass::Intern, Reason::Runtime { what })
}

impl LwkRte {
    /// A runtime for `job` over `portals`.
    pub fn new(job: JobEnv, portals: Portals) -> LwkRte {
        LwkRte {
            job,
            portals,
            own: Vec::new(),
        }
    }

    /// The job.
    pub fn job(&self) -> &JobEnv {
        &self.job
    }
}

impl Rte for LwkRte {
    fn rank(&self) -> ProcId {
        ProcId(self.job.rank)
    }

    fn size(&self) -> u32 {
        self.job.size
    }

    fn node_of(&self, proc: ProcId) -> u32 {
        self.job.nodes.get(proc.0 as usize).copied().unwrap_or(0)
    }

    fn modex_put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        self.own.retain(|(k, _)| k != key);
        self.own.push((key.to_string(), value.to_vec()));
        Ok(())
    }

    fn modex_fence(&mut self) -> Result<()> {
        // Every transport has set up its entries before this: after it, peers may send.
        self.barrier()
    }

    fn modex_get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>> {
        let value = if proc.0 == self.job.rank || key == "arch" {
            self.own
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone())
        } else {
            None
        };
        let value = match (value, key) {
            (None, "arch") => Some(Arch::LOCAL.to_wire().to_vec()),
            (v, _) => v,
        };
        Ok(value.map(|v| {
            let n = v.len().min(out.len());
            out[..n].copy_from_slice(&v[..n]);
            n
        }))
    }

    fn barrier(&mut self) -> Result<()> {
        self.portals
            .barrier()
            .map_err(|e| runtime("barrier over Portals", e))
    }

    fn abort(&mut self, code: i32, msg: &str) -> ! {
        // The launcher ends the job when a rank exits with an error.
        crate::platform::eprint_line(&format!("stormpi: rank {}: {msg}", self.job.rank));
        std::process::exit(if code == 0 { 1 } else { code })
    }

    fn finalize(&mut self) -> Result<()> {
        // Nobody leaves while a peer may still be sending to it.
        let r = self.barrier();
        self.portals.close();
        r
    }
}
