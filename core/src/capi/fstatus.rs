//! Status conversions between the C and the Fortran bindings (`MPI_Status_c2f`, `f2c`, `c2f08`,
//! `f082c`, `f2f08`, `f082f`). In MPICH's ABI the three forms hold the same five integers in the
//! same order (`count_lo`, `count_hi_and_cancelled`, `MPI_SOURCE`, `MPI_TAG`, `MPI_ERROR`), so
//! each conversion is a copy; what the functions check is that neither side is an "ignore"
//! sentinel, which the standard makes erroneous.

use core::ffi::{c_int, c_void};

use super::abi;
use super::errors::report;
use crate::error::Error;

/// Integers in every form of a status.
const WORDS: usize = 5;

/// Copies a status between two forms, refusing NULL and the ignore sentinels.
///
/// # Safety
/// Non-sentinel pointers point to `WORDS` integers.
unsafe fn convert(func: &'static str, from: *const c_int, to: *mut c_int) -> c_int {
    let ignored = |p: *const c_void| {
        p.is_null()
            || p == abi::MPI_STATUS_IGNORE as *const c_void
            || p == abi::MPI_STATUSES_IGNORE as *const c_void
            || p == super::env::MPI_F_STATUS_IGNORE.0
            || p == super::env::MPI_F_STATUSES_IGNORE.0
            || p == super::env::MPI_F08_STATUS_IGNORE.0
            || p == super::env::MPI_F08_STATUSES_IGNORE.0
    };
    if ignored(from.cast()) || ignored(to.cast_const().cast()) {
        return report(
            func,
            None,
            Error::bad_arg("a status argument is NULL or an MPI_*STATUS*_IGNORE sentinel"),
        );
    }
    // SAFETY: both point to WORDS integers (the caller's contract, sentinels excluded above);
    // `copy` allows the two to be the same status.
    unsafe { core::ptr::copy(from, to, WORDS) };
    abi::MPI_SUCCESS
}

super::mpi! {
    fn MPI_Status_c2f / PMPI_Status_c2f(c_status: *const abi::MPI_Status, f_status: *mut abi::MPI_Fint) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { convert("MPI_Status_c2f", c_status.cast(), f_status) }
    }

    fn MPI_Status_f2c / PMPI_Status_f2c(f_status: *const abi::MPI_Fint, c_status: *mut abi::MPI_Status) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { convert("MPI_Status_f2c", f_status, c_status.cast()) }
    }

    fn MPI_Status_c2f08 / PMPI_Status_c2f08(c_status: *const abi::MPI_Status, f08_status: *mut abi::MPI_Status) {
        // SAFETY: forwarded under MPI's rules; MPI_F08_status has MPI_Status's layout.
        unsafe { convert("MPI_Status_c2f08", c_status.cast(), f08_status.cast()) }
    }

    fn MPI_Status_f082c / PMPI_Status_f082c(f08_status: *const abi::MPI_Status, c_status: *mut abi::MPI_Status) {
        // SAFETY: as above.
        unsafe { convert("MPI_Status_f082c", f08_status.cast(), c_status.cast()) }
    }

    fn MPI_Status_f2f08 / PMPI_Status_f2f08(f_status: *const abi::MPI_Fint, f08_status: *mut abi::MPI_Status) {
        // SAFETY: as above.
        unsafe { convert("MPI_Status_f2f08", f_status, f08_status.cast()) }
    }

    fn MPI_Status_f082f / PMPI_Status_f082f(f08_status: *const abi::MPI_Status, f_status: *mut abi::MPI_Fint) {
        // SAFETY: as above.
        unsafe { convert("MPI_Status_f082f", f08_status.cast(), f_status) }
    }
}
