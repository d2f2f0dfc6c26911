//! stormpi on lightweight-kernel compute nodes (Catamount and its successors).
//!
//! No TCP stack, no `fork`, no runtime daemon: the vendor's launcher (yod, aprun, srun) starts
//! every rank and hands it its place in the job through the environment ([`env`]), and the
//! network is Portals 4 ([`ptl`]; on a Linux machine without a Portals NIC, the software
//! interface `portals4-shmem` answers the same calls). Two transports, chosen by the parameter
//! `pml`:
//!
//! - `cm` (the default here): the Portals MTL ([`mtl`]) — MPI matching done by Portals match
//!   lists, expected messages straight into user buffers, the overflow list for unexpected ones,
//!   flow-control recovery;
//! - `ob1`: the Portals BTL ([`btl`], the Red Storm design) under the ordinary PML.
//!
//! Built as `libstormpi_lwk.a` (install it as `libmpi.a`) with the same `mpi.h` as every other
//! stormpi build; the C API's `MPI_Init` comes from [`init`]. Nothing in this crate opens a socket
//! or creates a process.

pub mod btl;
pub mod env;
/// The POSIX file system for MPI-IO: the same source as the Linux shim's (the node build's file
/// calls are POSIX on the Linux stand-in; a vendor's node runtime forwards them to I/O nodes).
#[path = "../../shim-linux/src/fs.rs"]
pub mod fs;
/// Its staging of transfers whose kernel copy would alias (the same source as the Linux shim's).
#[path = "../../shim-linux/src/fs_staged.rs"]
pub mod fs_staged;
pub mod init;
pub mod log;
pub mod mtl;
pub mod osc;
pub mod platform;
pub mod ptl;
pub mod rte;
