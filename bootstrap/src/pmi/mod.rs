//! The Process Management Interface: how MPI processes learn their rank and
//! exchange addresses through the launcher.
//!
//! * [`PmiClient`] — used by the MPI library in each rank; speaks PMI-1 to
//!   stormrun, MPICH's Hydra or Slurm over the socket the launcher passed in
//!   `PMI_FD`.
//! * [`PmiServer`] — hosted by stormrun; serves the ranks it starts.
//!
//! Layering: `wire` is the PMI-1 line format, `transport` the byte stream
//! (inherited socket or TCP) and line framing, `v1` the PMI-1 client
//! exchange, `value` the encoding of binary values into PMI's text space,
//! `client` the public API over those. A PMI-2 client would add a `v2`
//! module and a variant of the client's protocol enum.

mod client;
mod error;
mod server;
mod transport;
mod v1;
mod value;
pub mod wire;

pub use client::PmiClient;
pub use error::PmiError;
pub use server::{PmiServer, ServerEvent, KEYLEN_MAX, KVSNAME_MAX, VALLEN_MAX};
pub use transport::Transport;
