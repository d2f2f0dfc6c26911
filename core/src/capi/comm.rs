//! Communicator queries, duplication, error handlers and predefined attributes.

use core::ffi::{c_int, c_void};

use super::abi;
use super::env::{code, run_comm};
use super::errors::report;
use super::handles::{self, out};
use crate::comm::{ErrHandler, Group};
use crate::error::{Error, ErrorClass, Reason};
use crate::pml::request::TAG_UB;

fn errhandler(h: abi::MPI_Errhandler) -> Option<ErrHandler> {
    match h {
        abi::MPI_ERRORS_ARE_FATAL => Some(ErrHandler::Fatal),
        abi::MPI_ERRORS_RETURN => Some(ErrHandler::Return),
        abi::MPI_ERRORS_ABORT => Some(ErrHandler::Abort),
        _ => None,
    }
}

fn errhandler_handle(e: ErrHandler) -> abi::MPI_Errhandler {
    match e {
        ErrHandler::Fatal => abi::MPI_ERRORS_ARE_FATAL,
        ErrHandler::Return => abi::MPI_ERRORS_RETURN,
        ErrHandler::Abort => abi::MPI_ERRORS_ABORT,
    }
}

// Values the predefined attributes point to; C reads them through `*(int **)attribute_val`.
static TAG_UB_VALUE: c_int = TAG_UB;
static HOST_VALUE: c_int = abi::MPI_PROC_NULL;
static IO_VALUE: c_int = abi::MPI_ANY_SOURCE;
static WTIME_IS_GLOBAL_VALUE: c_int = 0;
static LASTUSEDCODE_VALUE: c_int = abi::MPI_ERR_LASTCODE;
static UNIVERSE_SIZE: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);
static APPNUM: core::sync::atomic::AtomicI32 = core::sync::atomic::AtomicI32::new(0);

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
        code(run_comm("MPI_Comm_dup", comm, |e, c| {
            if newcomm.is_null() {
                return Err(Error::bad_arg("newcomm is NULL"));
            }
            let new = e.comm_dup(c)?;
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Comm.
            unsafe { out(newcomm, handles::comm_handle(new)) }
        }))
    }

    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut abi::MPI_Comm) {
        if comm.is_null() {
            return report("MPI_Comm_free", None, Error::bad_arg("comm is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Comm.
        let h = unsafe { *comm };
        let r = run_comm("MPI_Comm_free", h, |e, c| e.comm_free(c));
        if r.is_ok() {
            // SAFETY: as above.
            unsafe { *comm = abi::MPI_COMM_NULL };
        }
        code(r)
    }

    fn MPI_Comm_compare / PMPI_Comm_compare(comm1: abi::MPI_Comm, comm2: abi::MPI_Comm, result: *mut c_int) {
        code(run_comm("MPI_Comm_compare", comm1, |e, c1| {
            let c2 = handles::comm(comm2)?;
            let (a, b) = (e.comm(c1)?.clone(), e.comm(c2)?.clone());
            let same_members = match (a.group, b.group) {
                (x, y) if x == y => true,
                (Group::World { size: 1 }, Group::Single(p)) | (Group::Single(p), Group::World { size: 1 }) => p.0 == 0,
                _ => false,
            };
            let r = if c1 == c2 {
                abi::MPI_IDENT
            } else if same_members {
                abi::MPI_CONGRUENT
            } else {
                abi::MPI_UNEQUAL
            };
            // SAFETY: MPI requires `result` to point to an int.
            unsafe { out(result, r) }
        }))
    }

    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: abi::MPI_Comm, eh: abi::MPI_Errhandler) {
        code(run_comm("MPI_Comm_set_errhandler", comm, |e, c| {
            let h = errhandler(eh).ok_or_else(|| {
                if abi::handle_object(eh) == Some(abi::ObjectKind::Errhandler) && eh != abi::MPI_ERRHANDLER_NULL {
                    Error::unsupported("user-defined error handlers")
                } else {
                    Error::bad_arg("not an error handler")
                }
            })?;
            e.set_errhandler(c, h)
        }))
    }

    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: abi::MPI_Comm, eh: *mut abi::MPI_Errhandler) {
        code(run_comm("MPI_Comm_get_errhandler", comm, |e, c| {
            let h = e.comm(c)?.errhandler;
            // SAFETY: MPI requires `eh` to point to an MPI_Errhandler.
            unsafe { out(eh, errhandler_handle(h)) }
        }))
    }

    fn MPI_Errhandler_free / PMPI_Errhandler_free(eh: *mut abi::MPI_Errhandler) {
        if eh.is_null() {
            return report("MPI_Errhandler_free", None, Error::bad_arg("errhandler is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Errhandler.
        if errhandler(unsafe { *eh }).is_none() {
            return report("MPI_Errhandler_free", None, Error::bad_arg("not an error handler"));
        }
        // Predefined handlers live forever; the caller's handle is nulled as the standard says.
        // SAFETY: as above.
        unsafe { *eh = abi::MPI_ERRHANDLER_NULL };
        abi::MPI_SUCCESS
    }

    fn MPI_Comm_get_attr / PMPI_Comm_get_attr(comm: abi::MPI_Comm, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        code(run_comm("MPI_Comm_get_attr", comm, |e, c| {
            e.comm(c)?;
            UNIVERSE_SIZE.store(e.size() as i32, core::sync::atomic::Ordering::Relaxed);
            let appnum = e.appnum();
            APPNUM.store(appnum.unwrap_or(0) as i32, core::sync::atomic::Ordering::Relaxed);
            let value: Option<*const c_int> = match keyval {
                abi::MPI_TAG_UB => Some(&TAG_UB_VALUE),
                abi::MPI_HOST => Some(&HOST_VALUE),
                abi::MPI_IO => Some(&IO_VALUE),
                abi::MPI_WTIME_IS_GLOBAL => Some(&WTIME_IS_GLOBAL_VALUE),
                abi::MPI_LASTUSEDCODE => Some(&LASTUSEDCODE_VALUE),
                abi::MPI_UNIVERSE_SIZE => Some(UNIVERSE_SIZE.as_ptr()),
                abi::MPI_APPNUM => appnum.map(|_| APPNUM.as_ptr() as *const c_int),
                k if abi::builtin_keyval_object(k).is_some() => None,
                k if abi::handle_object(k) == Some(abi::ObjectKind::Keyval) && abi::handle_kind(k) != abi::HandleKind::Invalid => {
                    return Err(Error::unsupported("user-defined attribute keys"))
                }
                _ => return Err(Error::new(ErrorClass::Keyval, Reason::BadArgument { what: "not an attribute key" })),
            };
            // SAFETY: MPI requires `flag` to point to an int and `attribute_val` to a `void *`.
            unsafe {
                out(flag, value.is_some() as c_int)?;
                if let Some(v) = value {
                    out(attribute_val.cast::<*const c_int>(), v)?;
                }
            }
            Ok(())
        }))
    }

    fn MPI_Comm_test_inter / PMPI_Comm_test_inter(comm: abi::MPI_Comm, flag: *mut c_int) {
        code(run_comm("MPI_Comm_test_inter", comm, |e, c| {
            e.comm(c)?;
            // SAFETY: MPI requires `flag` to point to an int.
            unsafe { out(flag, 0) }
        }))
    }
}
