//! stormpi on Linux.
//!
//! The platform shim for Linux: memory from `mmap`, `CLOCK_MONOTONIC`, parameters from
//! `STORMPI_MCA_<name>` environment variables and a config file, a runtime over PMI (under
//! `stormrun`, Hydra or Slurm) or a singleton, and the `sm` shared-memory BTL. Built as `libmpi.a`
//! and `libmpi.so`, which carry the MPI C ABI, and as the `mpi` Rust crate:
//!
//! ```no_run
//! let universe = mpi::initialize().expect("MPI init");
//! let world = universe.world();
//! println!("rank {} of {}", world.rank(), world.size());
//! ```

pub mod dpm;
pub mod fs;
pub mod fs_staged;
pub mod fs_worker;
pub mod info;
pub mod init;
pub mod memhooks;
pub mod params;
pub mod platform;
pub mod progress;
pub mod rte;
pub mod shm;
pub mod sm;
pub mod tcp;

pub use stormpi_core::api::{
    AnyProcess, Communicator, Datatype, Equivalence, Error, ErrorClass, Message, Op, Process, Rank,
    Request, Result, Scope, Status, Tag,
};

/// An initialised MPI environment; `MPI_Finalize` runs when it is dropped.
pub struct Universe(stormpi_core::api::Universe);

impl std::ops::Deref for Universe {
    type Target = stormpi_core::api::Universe;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        if !self.0.with(|e| e.is_finalized()) {
            stormpi_core::capi::finalize();
        }
    }
}

/// Initialises MPI (`MPI_Init`); `None` if it was already initialised.
pub fn initialize() -> Option<Universe> {
    // SAFETY: `provided` is NULL, which `init` accepts.
    let rc = unsafe { stormpi_core::capi::init(&init::HOOKS, None, std::ptr::null_mut()) };
    if rc != 0 {
        return None;
    }
    stormpi_core::api::Universe::new(&stormpi_core::api::ENGINE)
        .ok()
        .map(Universe)
}
