//! Communicator queries, duplication and freeing (error handlers are in `errors`, attributes
//! and names in `attr`).

use core::ffi::c_int;

use super::abi;
use super::env::{code, run_comm};
use super::errors::report;
use super::handles::out;
use crate::error::Error;

super::mpi! {
    fn MPI_Comm_rank / PMPI_Comm_rank(comm: abi::MPI_Comm, rank: *mut c_int) {
        code(run_comm("MPI_Comm_rank", comm, |e, c| {
            let r = e.comm(c)?.rank as c_int;
            // SAFETY: MPI requires `rank` to point to an int.
            unsafe { out(rank, r) }
        }))
    }

    fn MPI_Comm_size / PMPI_Comm_size(comm: abi::MPI_Comm, size: *mut c_int) {
        code(run_comm("MPI_Comm_size", comm, |e, c| {
            let s = e.comm(c)?.size() as c_int;
            // SAFETY: MPI requires `size` to point to an int.
            unsafe { out(size, s) }
        }))
    }

    fn MPI_Comm_dup / PMPI_Comm_dup(comm: abi::MPI_Comm, newcomm: *mut abi::MPI_Comm) {
        let r = run_comm("MPI_Comm_dup", comm, |e, c| {
            if newcomm.is_null() {
                return Err(Error::bad_arg("newcomm is NULL"));
            }
            Ok((c, e.comm_dup(c)?))
        });
        match r {
            // Attributes are copied with no lock held (copy callbacks may call MPI); that writes
            // the new handle. SAFETY: `newcomm` was checked non-null.
            Ok((c, new)) => unsafe { super::attr::comm_duplicated("MPI_Comm_dup", c, new, super::attr::Hints::Inherit, newcomm) },
            Err(code) => code,
        }
    }

    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut abi::MPI_Comm) {
        if comm.is_null() {
            return report("MPI_Comm_free", None, Error::bad_arg("comm is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Comm.
        let h = unsafe { *comm };
        // Attribute delete callbacks run first, with no lock held; one that fails fails the free.
        if let Err(code) = super::attr::comm_freeing("MPI_Comm_free", h) {
            return code;
        }
        let r = run_comm("MPI_Comm_free", h, |e, c| {
            e.comm_free(c)?;
            super::attr::comm_freed(e, c);
            Ok(())
        });
        if r.is_ok() {
            // SAFETY: as above.
            unsafe { *comm = abi::MPI_COMM_NULL };
        }
        code(r)
    }
}
