//! stormpi's verbs BTL: InfiniBand and RoCE through libibverbs, loaded at run time.
//!
//! - [`library`]: libibverbs's entry points found with `dlopen`/`dlsym` (`btl_verbs_library`),
//!   so the MPI library builds and runs where rdma-core is absent;
//! - [`device`]: the first device with an active port, its protection domain, completion queue
//!   and shared receive queue;
//! - [`endpoint`]: the business card and the RC queue pair set-up through the modex;
//! - [`btl`]: the module — eager fragments from registered slots over a shared receive queue with
//!   per-peer credits, and RDMA read for the `RGET` rendezvous;
//! - [`osc`]: put, get and atomics for the core's one-sided windows (`osc_verbs`);
//! - [`rcache`]: the registration cache (`mpi_leave_pinned`) and the log of freed memory
//!   that invalidates it;
//! - [`params`]: the `btl_verbs_*`, `mpi_leave_pinned` and `mpool_*` parameters.

pub mod btl;
pub mod device;
pub mod endpoint;
pub mod library;
pub mod osc;
pub mod params;
pub mod rcache;

pub use btl::{Unavailable, VerbsBtl, EXCLUSIVITY};
pub use params::PARAMS;
