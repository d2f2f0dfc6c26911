//! What the `mpi_f08` procedures share: Fortran 2018 C descriptors (`CFI_cdesc_t`) for choice
//! buffers and strings, array sections described by derived datatypes, and the optional
//! `IERROR`.
//!
//! The `mpi_f08` module declares every procedure `BIND(C)`, so gfortran (and any Fortran 2018
//! compiler) hands an assumed-type assumed-rank buffer (`TYPE(*), DIMENSION(..)`) and an
//! assumed-length string (`CHARACTER(LEN=*)`) as a pointer to a C descriptor, an absent optional
//! argument as a null pointer, and everything else by reference — handles (`TYPE(MPI_Comm)`,
//! one `INTEGER`) and statuses (`TYPE(MPI_Status)`, five) in the layouts of C's handles and
//! `MPI_Status`, which is why they pass through unchanged.
//!
//! A non-contiguous section (`a(1:n:2)`, `b(2:3, 1:4:2)`) arrives as its first element's
//! address with a byte stride per dimension. When the buffer has a `count` and a `datatype` of
//! its own, [`Section::paired`] describes the section with a derived datatype (one `datatype`
//! per array element, nested `MPI_Type_create_hvector`s along the strides) and the C function
//! gets `1` of it; the type is freed when the call returns (C keeps what a pending request
//! needs). Elsewhere — a datatype shared by two buffers (reductions), vectors of counts or
//! datatypes, buffers without a datatype — a non-contiguous section is `MPI_ERR_BUFFER`
//! ([`contiguous`]), never silently misread.

use core::ffi::{c_char, c_int, c_void};

use stormpi_core::error::{Error, ErrorClass, Reason};

use crate::bindings::c;
use crate::rt::{self, MpiAint};

/// `CFI_dim_t`: one dimension of a C descriptor.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CfiDim {
    /// Lower bound (0 for a dummy argument's descriptor).
    pub lower_bound: isize,
    /// Number of elements along this dimension.
    pub extent: isize,
    /// Distance in bytes between neighbours along this dimension.
    pub sm: isize,
}

/// `CFI_cdesc_t` of ISO_Fortran_binding.h, followed by `rank` [`CfiDim`]s.
#[repr(C)]
#[derive(Debug)]
pub struct Cdesc {
    /// The first element (of the section).
    pub base_addr: *mut c_void,
    /// Bytes per element (a string's length).
    pub elem_len: usize,
    /// `CFI_VERSION`.
    pub version: c_int,
    /// 0 for a scalar.
    pub rank: i8,
    /// `CFI_attribute_other` for a dummy argument.
    pub attribute: i8,
    /// `CFI_type_*`.
    pub type_: i16,
    /// The dimensions (`rank` of them).
    pub dim: [CfiDim; 0],
}

/// The largest rank Fortran allows (`CFI_MAX_RANK`).
const MAX_RANK: usize = 15;

/// The dimensions of `d`.
///
/// # Safety
/// `d` points to a descriptor the Fortran compiler built.
unsafe fn dims<'a>(d: *const Cdesc) -> &'a [CfiDim] {
    // SAFETY: the caller's contract: `rank` dimensions follow the header; rank is at most 15.
    unsafe {
        let rank = ((*d).rank.max(0) as usize).min(MAX_RANK);
        core::slice::from_raw_parts(core::ptr::addr_of!((*d).dim).cast::<CfiDim>(), rank)
    }
}

/// Whether the elements of `d` lie next to each other in array element order.
///
/// # Safety
/// `d` points to a descriptor the Fortran compiler built.
pub unsafe fn is_contiguous(d: *const Cdesc) -> bool {
    // SAFETY: the caller's contract.
    let (dims, elem) = unsafe { (dims(d), (*d).elem_len as isize) };
    let mut want = elem;
    for dim in dims {
        if dim.extent > 1 && dim.sm != want {
            return false;
        }
        want = want.saturating_mul(dim.extent.max(0));
    }
    true
}

/// Stores `rc` in the optional `IERROR` (null when the caller left it out).
///
/// # Safety
/// `ierror` is null or points to a writable `INTEGER`.
pub unsafe fn set_ierror(ierror: *mut c_int, rc: c_int) {
    if !ierror.is_null() {
        // SAFETY: the caller's contract.
        unsafe { *ierror = rc };
    }
}

fn buffer_error(func: &'static str, what: &'static str) -> c_int {
    stormpi_core::capi::report_error(
        func,
        Error::new(ErrorClass::Buffer, Reason::BadArgument { what }),
    )
}

/// A buffer the C function takes as one block of memory: its address (`MPI_BOTTOM` and
/// `MPI_IN_PLACE` converted), or `MPI_ERR_BUFFER` for a non-contiguous section.
///
/// # Safety
/// `d` points to a descriptor the Fortran compiler built.
pub unsafe fn contiguous(d: *const Cdesc, func: &'static str) -> Result<*mut c_void, c_int> {
    // SAFETY: the caller's contract.
    unsafe {
        if is_contiguous(d) {
            Ok(rt::buffer((*d).base_addr))
        } else {
            Err(buffer_error(
                func,
                "a non-contiguous array section where this binding needs a contiguous buffer \
                 (MPI_SUBARRAYS_SUPPORTED is .FALSE.: pass a contiguous copy)",
            ))
        }
    }
}

/// The address of the first element, contiguous or not (`MPI_GET_ADDRESS`).
///
/// # Safety
/// `d` points to a descriptor the Fortran compiler built.
pub unsafe fn address(d: *const Cdesc) -> *mut c_void {
    // SAFETY: the caller's contract.
    rt::buffer(unsafe { (*d).base_addr })
}

/// A string argument: its bytes and length.
///
/// # Safety
/// `d` points to a descriptor the Fortran compiler built.
pub unsafe fn string(d: *const Cdesc) -> (*mut c_char, usize) {
    // SAFETY: the caller's contract.
    unsafe { ((*d).base_addr.cast(), (*d).elem_len) }
}

/// The datatype made for one non-contiguous buffer of a call, freed when the call is over.
#[derive(Debug, Default)]
pub struct Section {
    made: Option<c_int>,
}

impl Section {
    /// No datatype made yet.
    pub const fn new() -> Section {
        Section { made: None }
    }

    /// The buffer, count and datatype the C function gets for `count` elements of `datatype`
    /// in the array (section) `d`: the same when it is contiguous, else `1` of a datatype
    /// describing the first `count` elements of the section.
    ///
    /// # Safety
    /// `d` points to a descriptor the Fortran compiler built.
    pub unsafe fn paired(
        &mut self,
        d: *const Cdesc,
        count: i64,
        datatype: c_int,
        func: &'static str,
    ) -> Result<(*mut c_void, i64, c_int), c_int> {
        // SAFETY: the caller's contract.
        let (base, elem, dims) = unsafe { ((*d).base_addr, (*d).elem_len, dims(d)) };
        // SAFETY: the caller's contract.
        if count <= 0 || unsafe { is_contiguous(d) } {
            return Ok((rt::buffer(base), count, datatype));
        }
        // One datatype per element: its extent must be the element's size.
        let (mut lb, mut extent): (MpiAint, MpiAint) = (0, 0);
        // SAFETY: both outputs are valid; a bad datatype is C's error to report.
        let rc = unsafe {
            c::PMPI_Type_get_extent(
                datatype,
                (&mut lb as *mut MpiAint).cast(),
                (&mut extent as *mut MpiAint).cast(),
            )
        };
        if rc != rt::SUCCESS {
            return Err(rc);
        }
        if extent as usize != elem {
            return Err(buffer_error(
                func,
                "a non-contiguous array section whose elements are not one datatype each \
                 (the datatype's extent differs from the array element's size)",
            ));
        }
        let total: i64 = dims.iter().map(|x| x.extent.max(0) as i64).product();
        if count > total {
            return Err(buffer_error(
                func,
                "count is larger than the number of elements of the array section",
            ));
        }
        // Wrap the datatype once per dimension until `count` elements are covered: whole
        // rows of the dimensions below, then part of the next.
        let mut ty = datatype;
        let mut covered: i64 = 1; // elements per instance of `ty`
        for dim in dims {
            if count % covered != 0 {
                self.release(ty, datatype);
                return Err(buffer_error(
                    func,
                    "count does not end at the end of a row of the array section",
                ));
            }
            let n = (count / covered).min(dim.extent as i64);
            let mut next: c_int = 0;
            // SAFETY: `next` is a valid output; the stride is the section's own.
            let rc = unsafe {
                c::PMPI_Type_create_hvector(
                    n as c_int,
                    1,
                    dim.sm as MpiAint,
                    ty,
                    (&mut next as *mut c_int).cast(),
                )
            };
            self.release(ty, datatype);
            if rc != rt::SUCCESS {
                return Err(rc);
            }
            ty = next;
            if covered * n == count {
                break;
            }
            covered *= dim.extent as i64;
        }
        // SAFETY: `ty` is the type just made.
        let rc = unsafe { c::PMPI_Type_commit((&mut ty as *mut c_int).cast()) };
        self.made = Some(ty);
        if rc != rt::SUCCESS {
            return Err(rc);
        }
        Ok((base, 1, ty))
    }

    /// Frees an intermediate type (never the caller's own).
    fn release(&mut self, ty: c_int, callers: c_int) {
        if ty != callers {
            let mut t = ty;
            // SAFETY: `t` is a type this section made and nothing else refers to by handle.
            unsafe { c::PMPI_Type_free((&mut t as *mut c_int).cast()) };
        }
    }
}

impl Drop for Section {
    fn drop(&mut self) {
        if let Some(mut t) = self.made.take() {
            // SAFETY: the type was made by `paired`; a pending request keeps what it needs.
            unsafe { c::PMPI_Type_free((&mut t as *mut c_int).cast()) };
        }
    }
}

/// `MPI_SIZEOF(x, size, ierror)`: the storage size of one element of `x`, which the compiler
/// puts in the descriptor. One link name per intrinsic type and kind of the generic interface
/// (`stormpi_sizeof_i4`, `stormpi_sizeof_r8`, ...), in `mpi` and `mpi_f08` alike.
macro_rules! sizeof_procedures {
    ($($name:ident),* $(,)?) => {$(
        /// One specific procedure of `MPI_SIZEOF`.
        ///
        /// # Safety
        /// The arguments are what the Fortran compiler passes for the interface.
        #[no_mangle]
        pub unsafe extern "C" fn $name(x: *const Cdesc, size: *mut c_int, ierror: *mut c_int) {
            // SAFETY: the caller's contract; an element is far smaller than 2^31 bytes.
            unsafe {
                *size = (*x).elem_len as c_int;
                set_ierror(ierror, rt::SUCCESS);
            }
        }
    )*};
}

sizeof_procedures!(
    stormpi_sizeof_i1,
    stormpi_sizeof_i2,
    stormpi_sizeof_i4,
    stormpi_sizeof_i8,
    stormpi_sizeof_i16,
    stormpi_sizeof_r4,
    stormpi_sizeof_r8,
    stormpi_sizeof_r10,
    stormpi_sizeof_r16,
    stormpi_sizeof_c4,
    stormpi_sizeof_c8,
    stormpi_sizeof_c10,
    stormpi_sizeof_c16,
    stormpi_sizeof_l1,
    stormpi_sizeof_l2,
    stormpi_sizeof_l4,
    stormpi_sizeof_l8,
);

// `MPI_Buffer_detach` of `mpi_f08`: `TYPE(C_PTR), INTENT(OUT) :: buffer_addr` arrives by
// reference, the place C's `MPI_Buffer_detach` writes the buffer's address to (its `void *`
// argument), so the call passes it through. (The large-count form is not among the `mpi`
// binding's C functions.)
extern "C" {
    fn MPI_Buffer_detach_c(buffer_addr: *mut c_void, size: *mut c_void) -> c_int;
    fn PMPI_Buffer_detach_c(buffer_addr: *mut c_void, size: *mut c_void) -> c_int;
}

/// `MPI_Buffer_detach(buffer_addr, size, ierror)` of `mpi_f08`.
///
/// # Safety
/// Fortran's arguments: valid references, `ierror` null when left out.
#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_detach_f08(
    buffer_addr: *mut *mut c_void,
    size: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: the caller's contract; C writes a pointer and an int.
    unsafe {
        set_ierror(
            ierror,
            c::MPI_Buffer_detach(buffer_addr.cast(), size.cast()),
        )
    }
}

/// `PMPI_Buffer_detach_f08`.
///
/// # Safety
/// As `MPI_Buffer_detach_f08`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_detach_f08(
    buffer_addr: *mut *mut c_void,
    size: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: as above.
    unsafe {
        set_ierror(
            ierror,
            c::PMPI_Buffer_detach(buffer_addr.cast(), size.cast()),
        )
    }
}

/// `MPI_Buffer_detach(buffer_addr, size, ierror)` of `mpi_f08` with an
/// `INTEGER(KIND=MPI_COUNT_KIND)` size.
///
/// # Safety
/// As `MPI_Buffer_detach_f08`.
#[no_mangle]
pub unsafe extern "C" fn MPI_Buffer_detach_c_f08(
    buffer_addr: *mut *mut c_void,
    size: *mut i64,
    ierror: *mut c_int,
) {
    // SAFETY: as above; C writes a pointer and an MPI_Count.
    unsafe { set_ierror(ierror, MPI_Buffer_detach_c(buffer_addr.cast(), size.cast())) }
}

/// `PMPI_Buffer_detach_c_f08`.
///
/// # Safety
/// As `MPI_Buffer_detach_f08`.
#[no_mangle]
pub unsafe extern "C" fn PMPI_Buffer_detach_c_f08(
    buffer_addr: *mut *mut c_void,
    size: *mut i64,
    ierror: *mut c_int,
) {
    // SAFETY: as above.
    unsafe {
        set_ierror(
            ierror,
            PMPI_Buffer_detach_c(buffer_addr.cast(), size.cast()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    struct Desc2 {
        head: Cdesc,
        dims: [CfiDim; 2],
    }

    fn desc(elem: usize, dims: &[(isize, isize)]) -> Desc2 {
        let mut d = Desc2 {
            head: Cdesc {
                base_addr: core::ptr::null_mut(),
                elem_len: elem,
                version: 1,
                rank: dims.len() as i8,
                attribute: 2,
                type_: 0,
                dim: [],
            },
            dims: [CfiDim {
                lower_bound: 0,
                extent: 0,
                sm: 0,
            }; 2],
        };
        for (i, &(extent, sm)) in dims.iter().enumerate() {
            d.dims[i] = CfiDim {
                lower_bound: 0,
                extent,
                sm,
            };
        }
        d
    }

    #[test]
    fn whole_arrays_and_scalars_are_contiguous_and_strided_sections_are_not() {
        unsafe {
            assert!(is_contiguous(&desc(8, &[]).head));
            assert!(is_contiguous(&desc(8, &[(10, 8)]).head));
            assert!(is_contiguous(&desc(8, &[(4, 8), (3, 32)]).head));
            // a(1:10:2) and b(2:3, :) of a 4x4 array.
            assert!(!is_contiguous(&desc(8, &[(5, 16)]).head));
            assert!(!is_contiguous(&desc(8, &[(2, 8), (4, 32)]).head));
            // One element, whatever its stride; a column of a row section.
            assert!(is_contiguous(&desc(8, &[(1, 800)]).head));
            assert!(is_contiguous(&desc(4, &[(1, 4), (3, 4)]).head));
        }
    }

    #[test]
    fn a_missing_ierror_is_left_alone() {
        unsafe { set_ierror(core::ptr::null_mut(), 3) };
        let mut e = 0;
        unsafe { set_ierror(&mut e, 3) };
        assert_eq!(e, 3);
    }

    #[test]
    fn the_descriptor_has_iso_fortran_bindings_layout() {
        assert_eq!(size_of::<Cdesc>(), 24);
        assert_eq!(size_of::<CfiDim>(), 24);
        assert_eq!(core::mem::offset_of!(Desc2, dims), 24);
    }
}
