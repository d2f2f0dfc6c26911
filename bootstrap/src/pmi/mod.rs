//! The Process Management Interface: how MPI processes learn their rank and
//! exchange addresses through the launcher.
//!
//! * [`PmiClient`] — used by the MPI library in each rank; speaks PMI-1 or PMI-2 to
//!   stormrun, MPICH's Hydra or Slurm over the socket the launcher passed in
//!   `PMI_FD`, or over TCP to the address in `PMI_PORT` (ranks on other
//!   hosts; see the `port` module for the handshake).
//! * [`PmiServer`] — hosted by stormrun; serves the ranks it starts, local
//!   ones over socketpairs and remote ones over TCP, in one poll loop.
//!
//! Layering: `wire` is the PMI-1 line format, `transport` the byte stream
//! (inherited socket or TCP) and its framing (lines, or PMI-2's
//! length-prefixed commands), `port` the `PMI_PORT` address and `initack`
//! handshake, `v1` the PMI-1 client exchange, `v2` PMI-2's wire format and
//! client exchange (Slurm's `--mpi=pmi2`), `value` the encoding of binary
//! values into PMI's text space, `names` the launcher's table of published
//! service names, `spawn` the spawn request's multi-line form, `client` the public API over those and the
//! choice of protocol.

mod client;
mod error;
pub mod names;
mod pmix;
pub mod port;
mod server;
pub mod spawn;
mod transport;
mod v1;
pub mod v2;
mod value;
pub mod wire;

pub use client::{PmiClient, PROTOCOL_ENV};
pub use error::PmiError;
pub use server::{PmiServer, ServerEvent, IDENTIFY_TIMEOUT, KEYLEN_MAX, KVSNAME_MAX, VALLEN_MAX};
pub use transport::Transport;
