//! Communicator queries, duplication (blocking and non-blocking) and freeing (error handlers
//! are in `errors`, attributes and names in `attr`).

use core::ffi::c_int;

use super::abi;
use super::env::{code, run, run_comm, run_comm_inside};
use super::errors::report;
use super::handles::out;
use crate::comm::CommId;
use crate::error::Error;
use crate::info::InfoId;

/// `MPI_Comm_idup` and `MPI_Comm_idup_with_info` (`hints`: `None` to inherit the parent's).
///
/// The new handle is written at the call (usable once the request completes), and the
/// attributes are copied at the call too: MPI-4 §7.4.2 makes `MPI_Comm_idup` behave as if
/// `MPI_Comm_dup` ran at the time of the call, so attributes set later are not copied.
///
/// # Safety
/// `newcomm` and `request` are NULL or point to an `MPI_Comm` and an `MPI_Request`.
unsafe fn idup(
    func: &'static str,
    comm: abi::MPI_Comm,
    hints: Option<abi::MPI_Info>,
    newcomm: *mut abi::MPI_Comm,
    request: *mut abi::MPI_Request,
) -> c_int {
    let r = run_comm(func, comm, |e, c| {
        if newcomm.is_null() || request.is_null() {
            return Err(Error::bad_arg("newcomm or request is NULL"));
        }
        let hints = match hints {
            None => None,
            Some(h) => {
                let id: Option<InfoId> = super::info::info_or_null(h)?;
                if let Some(i) = id {
                    e.objects.infos.check(i)?;
                }
                Some(id)
            }
        };
        let (new, req): (CommId, _) = e.building().comm_idup(c, 0)?;
        // SAFETY: checked non-null above.
        unsafe { *request = super::handles::request_handle(req) };
        Ok((c, hints, new))
    });
    match r {
        Ok((c, hints, new)) => {
            let hints = match hints {
                None => super::attr::Hints::Inherit,
                Some(h) => super::attr::Hints::Set(h),
            };
            // Attributes are copied with no lock held (copy callbacks may call MPI); that
            // writes the new handle. SAFETY: `newcomm` was checked non-null.
            unsafe { super::attr::comm_duplicated(func, c, new, hints, newcomm) }
        }
        Err(code) => code,
    }
}

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
        let r = run_comm_inside("MPI_Comm_dup", comm, |cx, c| {
            if newcomm.is_null() {
                return Err(Error::bad_arg("newcomm is NULL"));
            }
            Ok((c, crate::comm::create::dup(cx, c)?))
        });
        match r {
            // Attributes are copied with no lock held (copy callbacks may call MPI); that writes
            // the new handle. SAFETY: `newcomm` was checked non-null.
            Ok((c, new)) => unsafe { super::attr::comm_duplicated("MPI_Comm_dup", c, new, super::attr::Hints::Inherit, newcomm) },
            Err(code) => code,
        }
    }

    fn MPI_Comm_idup / PMPI_Comm_idup(comm: abi::MPI_Comm, newcomm: *mut abi::MPI_Comm, request: *mut abi::MPI_Request) {
        // SAFETY: MPI's contract for the pointers; `idup` checks them for NULL.
        unsafe { idup("MPI_Comm_idup", comm, None, newcomm, request) }
    }

    fn MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(comm: abi::MPI_Comm, info_: abi::MPI_Info, newcomm: *mut abi::MPI_Comm, request: *mut abi::MPI_Request) {
        // SAFETY: as above.
        unsafe { idup("MPI_Comm_idup_with_info", comm, Some(info_), newcomm, request) }
    }

    fn MPI_Comm_get_parent / PMPI_Comm_get_parent(parent: *mut abi::MPI_Comm) {
        // MPI_COMM_NULL for a process that was not spawned, or once the parent is freed.
        code(run("MPI_Comm_get_parent", None, |_| {
            let h = super::state::PARENT.load(core::sync::atomic::Ordering::Acquire);
            // SAFETY: MPI requires `parent` to point to an MPI_Comm (`out` refuses NULL).
            unsafe { out(parent, h) }
        }))
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
        let r = run_comm_inside("MPI_Comm_free", h, |cx, c| {
            crate::comm::create::free(cx, c)?;
            super::attr::comm_freed(cx.e(), c);
            Ok(())
        });
        if r.is_ok() {
            // A freed parent is gone for MPI_Comm_get_parent too (its handle may be reused).
            let _ = super::state::PARENT.compare_exchange(
                h,
                abi::MPI_COMM_NULL,
                core::sync::atomic::Ordering::AcqRel,
                core::sync::atomic::Ordering::Acquire,
            );
            // SAFETY: as above.
            unsafe { *comm = abi::MPI_COMM_NULL };
        }
        code(r)
    }

    fn MPI_Comm_disconnect / PMPI_Comm_disconnect(comm: *mut abi::MPI_Comm) {
        if comm.is_null() {
            return report("MPI_Comm_disconnect", None, Error::bad_arg("comm is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Comm.
        let h = unsafe { *comm };
        let valid = code(run_comm("MPI_Comm_disconnect", h, |_, _| Ok(())));
        if valid != abi::MPI_SUCCESS {
            return valid;
        }
        // Collective, and returns once the members' communication on it is done: MPI asks that
        // every request on it be complete, so what is left is in the transports, and a barrier
        // behind it (messages between two processes stay in order) sees it delivered. This holds
        // for an intercommunicator with another job too (its processes keep their slots).
        // SAFETY: a valid handle, checked above.
        let rc = unsafe { super::coll::PMPI_Barrier(h) };
        if rc != abi::MPI_SUCCESS {
            return rc;
        }
        // SAFETY: as above.
        unsafe { PMPI_Comm_free(comm) }
    }
}
