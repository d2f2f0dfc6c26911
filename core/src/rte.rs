//! What the core needs from a runtime environment.
//!
//! A runtime tells a process its place in the job and carries the modex — the business cards
//! (architecture descriptor, BTL addresses) each process publishes before the first message. It is
//! implemented by the bootstrap's PMI clients (under stormrun, Hydra or Slurm), by the
//! lightweight-kernel shim (launcher environment only, no modex), and by [`Singleton`] for a
//! process started without a launcher.

use crate::error::{Error, ErrorClass, Reason, Result};

/// Index of a process in the job: its rank in `MPI_COMM_WORLD`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcId(pub u32);

/// Most bytes in one modex value.
pub const MAX_MODEX_VALUE: usize = 256;

/// A process's runtime.
pub trait Rte: Send {
    /// My rank in the job.
    fn rank(&self) -> ProcId;
    /// Number of processes in the job.
    fn size(&self) -> u32;
    /// Identifier of the node `proc` runs on (equal for processes sharing memory).
    fn node_of(&self, proc: ProcId) -> u32;
    /// Publishes `value` under `key` for every other process.
    fn modex_put(&mut self, key: &str, value: &[u8]) -> Result<()>;
    /// Makes every process's puts visible to every process (collective).
    fn modex_fence(&mut self) -> Result<()>;
    /// Reads what `proc` published under `key` into `out`; returns its length, or `None` if it
    /// published nothing there.
    fn modex_get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>>;
    /// Waits until every process has called it (collective, out of band).
    fn barrier(&mut self) -> Result<()>;
    /// Which program of a multi-program (MPMD) launch this process runs, if the launcher says.
    fn appnum(&self) -> Option<u32> {
        None
    }
    /// Publishes `port` under `service` in the launcher's name service (`MPI_Publish_name`).
    /// `MPI_ERR_SERVICE` if the service is published already.
    fn publish_name(&mut self, service: &str, port: &str) -> Result<()> {
        let _ = (service, port);
        Err(no_name_service())
    }
    /// Copies the port published under `service` into `out` and returns its length
    /// (`MPI_Lookup_name`); `MPI_ERR_NAME` if none is.
    fn lookup_name(&mut self, service: &str, out: &mut [u8]) -> Result<usize> {
        let _ = (service, out);
        Err(no_name_service())
    }
    /// Withdraws `service` (`MPI_Unpublish_name`); `MPI_ERR_SERVICE` if it is not published.
    fn unpublish_name(&mut self, service: &str) -> Result<()> {
        let _ = service;
        Err(no_name_service())
    }
    /// Starts the processes `req` describes as a new job (`MPI_Comm_spawn`,
    /// `MPI_Comm_spawn_multiple`), telling them `parent_port`, the port their root connects to.
    /// Returns once the launcher has started them (or refused: `MPI_ERR_SPAWN`).
    fn spawn(&mut self, req: &dyn SpawnRequest, parent_port: &str) -> Result<()> {
        let _ = (req, parent_port);
        Err(Error::unsupported(
            "MPI_Comm_spawn without a launcher that starts jobs (start with stormrun)",
        ))
    }
    /// For a process started by a spawn: copies the port its parents wait at into `out` and
    /// returns its length; `None` for a process that was not spawned.
    fn parent_port(&self, out: &mut [u8]) -> Option<usize> {
        let _ = out;
        None
    }
    /// Ends the whole job with `code`, telling the launcher why.
    fn abort(&mut self, code: i32, msg: &str) -> !;
    /// Leaves the runtime at MPI_Finalize.
    fn finalize(&mut self) -> Result<()> {
        Ok(())
    }
}

/// What an `MPI_Comm_spawn(_multiple)` asks a runtime to start: one or more commands, each
/// with its arguments, process count and info (the keys the launcher acts on, e.g. `wdir`).
pub trait SpawnRequest {
    /// Number of commands.
    fn commands(&self) -> usize;
    /// Command `i`'s program.
    fn command(&self, i: usize) -> Result<&str>;
    /// Calls `each` with command `i`'s arguments in order (not the program name).
    fn args(&self, i: usize, each: &mut dyn FnMut(&str) -> Result<()>) -> Result<()>;
    /// How many processes run command `i`.
    fn maxprocs(&self, i: usize) -> u32;
    /// Calls `each` with every (key, value) of command `i`'s info.
    fn info(&self, i: usize, each: &mut dyn FnMut(&str, &str) -> Result<()>) -> Result<()>;
}

/// The error of a runtime without a name service (a singleton, the node build).
fn no_name_service() -> Error {
    Error::unsupported("name publishing without a launcher that keeps names (start with stormrun)")
}

/// The runtime of a process started without a launcher: a job of one.
pub struct Singleton<const N: usize = 8> {
    modex: heapless::Vec<(heapless::String<32>, heapless::Vec<u8, MAX_MODEX_VALUE>), N>,
    abort: fn(i32, &str) -> !,
}

impl<const N: usize> Singleton<N> {
    /// A singleton that ends the process through `abort`.
    pub const fn new(abort: fn(i32, &str) -> !) -> Singleton<N> {
        Singleton {
            modex: heapless::Vec::new(),
            abort,
        }
    }
}

fn modex_err(what: &'static str) -> Error {
    Error::new(ErrorClass::Intern, Reason::Runtime { what })
}

impl<const N: usize> Rte for Singleton<N> {
    fn rank(&self) -> ProcId {
        ProcId(0)
    }
    fn size(&self) -> u32 {
        1
    }
    fn node_of(&self, _proc: ProcId) -> u32 {
        0
    }
    fn modex_put(&mut self, key: &str, value: &[u8]) -> Result<()> {
        let k = heapless::String::try_from(key).map_err(|_| modex_err("modex key too long"))?;
        let v = heapless::Vec::from_slice(value).map_err(|_| modex_err("modex value too long"))?;
        self.modex.retain(|(ek, _)| ek != &k);
        self.modex
            .push((k, v))
            .map_err(|_| modex_err("singleton modex full"))
    }
    fn modex_fence(&mut self) -> Result<()> {
        Ok(())
    }
    fn modex_get(&mut self, proc: ProcId, key: &str, out: &mut [u8]) -> Result<Option<usize>> {
        if proc != ProcId(0) {
            return Err(modex_err("singleton has one process"));
        }
        let Some((_, v)) = self.modex.iter().find(|(k, _)| k.as_str() == key) else {
            return Ok(None);
        };
        let n = v.len().min(out.len());
        out[..n].copy_from_slice(&v[..n]);
        Ok(Some(n))
    }
    fn barrier(&mut self) -> Result<()> {
        Ok(())
    }
    fn abort(&mut self, code: i32, msg: &str) -> ! {
        (self.abort)(code, msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_abort(_: i32, _: &str) -> ! {
        panic!("abort")
    }

    #[test]
    fn singleton_modex_round_trips() {
        let mut s: Singleton = Singleton::new(no_abort);
        assert_eq!(s.size(), 1);
        s.modex_put("arch", &[1, 2, 3, 4]).unwrap();
        s.modex_put("arch", &[5, 6]).unwrap();
        let mut out = [0u8; 8];
        assert_eq!(s.modex_get(ProcId(0), "arch", &mut out).unwrap(), Some(2));
        assert_eq!(&out[..2], &[5, 6]);
        assert_eq!(s.modex_get(ProcId(0), "none", &mut out).unwrap(), None);
        assert!(s.modex_get(ProcId(1), "arch", &mut out).is_err());
    }
}
