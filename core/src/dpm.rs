//! Dynamic process management: what the core needs from a platform for MPI's ports.
//!
//! A port (`MPI_Open_port`) is a network address where a process will accept connections from
//! another job; its name is the capability to connect (it carries a secret the connecting side
//! must prove it holds). The platform owns the sockets; the core hands names through.
//! Accepting and connecting over a port (`MPI_Comm_accept`/`MPI_Comm_connect`) are not built yet.

use crate::error::Result;

/// A platform's ports.
pub trait Ports: Sync {
    /// Opens a port, writes its name (no NUL) into `out` and returns the name's length; the
    /// name fits in `MPI_MAX_PORT_NAME - 1` bytes.
    fn open(&self, out: &mut [u8]) -> Result<usize>;
    /// Closes the port `name` opened by this process: `MPI_ERR_PORT` if there is none.
    fn close(&self, name: &[u8]) -> Result<()>;
}
