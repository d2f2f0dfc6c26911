//! What the generated procedures share: the sentinels' common blocks and the conversions of
//! sentinels, `LOGICAL` values, indices and strings.

use core::cell::UnsafeCell;
use core::ffi::{c_char, c_int, c_void};

use stormpi_core::error::{Error, ErrorClass, Reason};

/// C `MPI_Aint`, Fortran `INTEGER(KIND=MPI_ADDRESS_KIND)`.
pub type MpiAint = isize;

/// `MPI_SUCCESS`.
pub const SUCCESS: c_int = 0;
/// gfortran's `.TRUE.` and `.FALSE.` as `LOGICAL(4)`.
pub const TRUE: c_int = 1;
/// gfortran's `.FALSE.`.
pub const FALSE: c_int = 0;
/// The longest string a procedure takes in, with its NUL (names are at most 255 bytes, info
/// values 1024).
pub const STRING_IN_MAX: usize = 4097;
/// The longest info value handed out (`MPI_MAX_INFO_VAL`).
pub const INFO_VALUE_MAX: c_int = 1024;

/// A Fortran common block defined here: Fortran code writes it, the library only compares
/// addresses with it.
///
/// The blocks are MPICH's (names, variables, order) with padding at the end to 16 or 32 bytes,
/// the alignment gfortran gives common blocks of those sizes: a program compiled with stormpi's
/// `mpif.h` (which declares the padding) links statically without `ld` warnings about the size
/// or alignment of the library's definitions. A program compiled with MPICH's `mpif.h` defines
/// the blocks in its own executable (the library's references bind to them), so their smaller
/// size there does not matter.
#[repr(transparent)]
pub struct Common<T>(UnsafeCell<T>);

// SAFETY: the library never reads or writes the contents (Fortran programs may); it only takes
// the address.
unsafe impl<T> Sync for Common<T> {}

impl<T> Common<T> {
    const fn new(v: T) -> Common<T> {
        Common(UnsafeCell::new(v))
    }

    fn addr(&self) -> usize {
        self.0.get() as usize
    }
}

/// `COMMON /MPIPRIV1/ MPI_BOTTOM, MPI_IN_PLACE, MPI_STATUS_IGNORE` (MPICH's layout).
#[repr(C, align(32))]
pub struct Priv1 {
    bottom: c_int,
    in_place: c_int,
    status_ignore: [c_int; 5],
}

/// `COMMON /MPIPRIV2/ MPI_STATUSES_IGNORE, MPI_ERRCODES_IGNORE`.
#[repr(C, align(32))]
pub struct Priv2 {
    statuses_ignore: [c_int; 5],
    errcodes_ignore: [c_int; 1],
}

/// `COMMON /MPIPRIVC/ MPI_ARGVS_NULL, MPI_ARGV_NULL`.
#[repr(C, align(16))]
pub struct PrivC {
    argvs_null: [u8; 1],
    argv_null: [u8; 1],
}

/// `COMMON /MPIFCMB5/ MPI_UNWEIGHTED`, `COMMON /MPIFCMB9/ MPI_WEIGHTS_EMPTY`.
#[repr(C, align(16))]
pub struct OneInt(c_int);

/// `/MPIPRIV1/`, as gfortran names common blocks.
#[no_mangle]
pub static mpipriv1_: Common<Priv1> = Common::new(Priv1 {
    bottom: 0,
    in_place: 0,
    status_ignore: [0; 5],
});
/// `/MPIPRIV2/`.
#[no_mangle]
pub static mpipriv2_: Common<Priv2> = Common::new(Priv2 {
    statuses_ignore: [0; 5],
    errcodes_ignore: [0],
});
/// `/MPIPRIVC/`.
#[no_mangle]
pub static mpiprivc_: Common<PrivC> = Common::new(PrivC {
    argvs_null: [0],
    argv_null: [0],
});
/// `/MPIFCMB5/`.
#[no_mangle]
pub static mpifcmb5_: Common<OneInt> = Common::new(OneInt(0));
/// `/MPIFCMB9/`.
#[no_mangle]
pub static mpifcmb9_: Common<OneInt> = Common::new(OneInt(0));

/// The `mpi` module's sentinels (`include/mpi.f90`: `BIND(C)` variables of these names, exact
/// sizes, so that a program linked against `libmpi.so` may hold copies of them).
#[repr(C)]
pub struct Sentinel<T>(UnsafeCell<T>);

// SAFETY: as for `Common`: only the address is used.
unsafe impl<T> Sync for Sentinel<T> {}

impl<T> Sentinel<T> {
    const fn new(v: T) -> Sentinel<T> {
        Sentinel(UnsafeCell::new(v))
    }

    fn addr(&self) -> usize {
        self.0.get() as usize
    }
}

/// `MPI_BOTTOM` of the `mpi` module.
#[no_mangle]
pub static stormpi_f_bottom: Sentinel<c_int> = Sentinel::new(0);
/// `MPI_IN_PLACE` of the `mpi` module.
#[no_mangle]
pub static stormpi_f_in_place: Sentinel<c_int> = Sentinel::new(0);
/// `MPI_STATUS_IGNORE` of the `mpi` module.
#[no_mangle]
pub static stormpi_f_status_ignore: Sentinel<[c_int; 5]> = Sentinel::new([0; 5]);
/// `MPI_STATUSES_IGNORE` of the `mpi` module.
#[no_mangle]
pub static stormpi_f_statuses_ignore: Sentinel<[c_int; 5]> = Sentinel::new([0; 5]);
/// `MPI_ERRCODES_IGNORE` of the `mpi` module.
#[no_mangle]
pub static stormpi_f_errcodes_ignore: Sentinel<[c_int; 1]> = Sentinel::new([0]);
/// `MPI_UNWEIGHTED` of the `mpi` module.
#[no_mangle]
pub static stormpi_f_unweighted: Sentinel<c_int> = Sentinel::new(0);
/// `MPI_WEIGHTS_EMPTY` of the `mpi` module.
#[no_mangle]
pub static stormpi_f_weights_empty: Sentinel<c_int> = Sentinel::new(0);
/// `MPI_ARGVS_NULL` of the `mpi` module.
#[no_mangle]
pub static stormpi_f_argvs_null: Sentinel<[u8; 1]> = Sentinel::new([0]);
/// `MPI_ARGV_NULL` of the `mpi` module.
#[no_mangle]
pub static stormpi_f_argv_null: Sentinel<[u8; 1]> = Sentinel::new([0]);

extern "C" {
    static MPI_UNWEIGHTED: *mut c_int;
    static MPI_WEIGHTS_EMPTY: *mut c_int;
    fn PMPI_File_f2c(file: c_int) -> *mut c_void;
    fn PMPI_File_c2f(file: *mut c_void) -> c_int;
}

fn priv1() -> usize {
    mpipriv1_.addr()
}

/// C's `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE`: `(MPI_Status *)1`.
const C_STATUS_IGNORE: *mut c_void = core::ptr::without_provenance_mut(1);

/// A choice buffer: `MPI_BOTTOM` is C's null, `MPI_IN_PLACE` C's -1.
pub fn buffer(p: *mut c_void) -> *mut c_void {
    let a = p as usize;
    let base = priv1();
    if a == base + core::mem::offset_of!(Priv1, bottom) || a == stormpi_f_bottom.addr() {
        core::ptr::null_mut()
    } else if a == base + core::mem::offset_of!(Priv1, in_place) || a == stormpi_f_in_place.addr() {
        core::ptr::without_provenance_mut(usize::MAX)
    } else {
        p
    }
}

/// A status argument: `MPI_STATUS_IGNORE` is C's `(MPI_Status *)1`.
pub fn status(p: *mut c_int) -> *mut c_void {
    let a = p as usize;
    if a == priv1() + core::mem::offset_of!(Priv1, status_ignore)
        || a == stormpi_f_status_ignore.addr()
    {
        C_STATUS_IGNORE
    } else {
        p.cast()
    }
}

/// An array of statuses: `MPI_STATUSES_IGNORE` is C's `(MPI_Status *)1`.
pub fn statuses(p: *mut c_int) -> *mut c_void {
    let a = p as usize;
    if a == mpipriv2_.addr() + core::mem::offset_of!(Priv2, statuses_ignore)
        || a == stormpi_f_statuses_ignore.addr()
    {
        C_STATUS_IGNORE
    } else {
        p.cast()
    }
}

/// `MPI_ERRCODES_IGNORE` is C's null.
pub fn errcodes(p: *mut c_int) -> *mut c_void {
    let a = p as usize;
    if a == mpipriv2_.addr() + core::mem::offset_of!(Priv2, errcodes_ignore)
        || a == stormpi_f_errcodes_ignore.addr()
    {
        core::ptr::null_mut()
    } else {
        p.cast()
    }
}

/// Whether `p` is `MPI_ARGV_NULL` (of `mpif.h` or of the modules).
pub fn argv_null(p: *const c_char) -> bool {
    let a = p as usize;
    a == mpiprivc_.addr() + core::mem::offset_of!(PrivC, argv_null)
        || a == stormpi_f_argv_null.addr()
}

/// Whether `p` is `MPI_ARGVS_NULL` (of `mpif.h` or of the modules).
pub fn argvs_null(p: *const c_char) -> bool {
    let a = p as usize;
    a == mpiprivc_.addr() + core::mem::offset_of!(PrivC, argvs_null)
        || a == stormpi_f_argvs_null.addr()
}

/// Graph weights: `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` are the C library's objects.
pub fn weights(p: *mut c_int) -> *mut c_void {
    let a = p as usize;
    // SAFETY: the C library defines both objects, set before any call.
    unsafe {
        if a == mpifcmb5_.addr() || a == stormpi_f_unweighted.addr() {
            MPI_UNWEIGHTED.cast()
        } else if a == mpifcmb9_.addr() || a == stormpi_f_weights_empty.addr() {
            MPI_WEIGHTS_EMPTY.cast()
        } else {
            p.cast()
        }
    }
}

/// A Fortran file handle (an `INTEGER`, `MPI_FILE_NULL` = 0) as C's `MPI_File` pointer.
pub fn file_in(f: c_int) -> *mut c_void {
    // SAFETY: a conversion of values; C accepts any integer (a bad one names no file, which
    // the called function reports).
    unsafe { PMPI_File_f2c(f) }
}

/// C's `MPI_File` as the Fortran `INTEGER`.
// C's MPI_File_c2f reads the handle's bits; it never dereferences the pointer.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn file_out(h: *mut c_void) -> c_int {
    // SAFETY: a conversion of values; C's handles fit a Fortran `INTEGER`.
    unsafe { PMPI_File_c2f(h) }
}

/// A Fortran `LOGICAL` argument as the C library's int.
pub fn logical_in(v: c_int) -> c_int {
    if v != 0 {
        1
    } else {
        0
    }
}

/// Makes the C library's int at `p` a gfortran `LOGICAL`.
///
/// # Safety
/// `p` points to an int.
pub unsafe fn logical_out(p: *mut c_int) {
    // SAFETY: the caller's contract.
    unsafe { *p = if *p != 0 { TRUE } else { FALSE } };
}

/// A C index (from 0) as a Fortran one (from 1); `MPI_UNDEFINED` (negative) stays.
///
/// # Safety
/// `p` points to an int.
pub unsafe fn index_out(p: *mut c_int) {
    // SAFETY: the caller's contract.
    unsafe {
        if *p >= 0 {
            *p += 1;
        }
    }
}

/// The first `*outcount` indices at `p` from C's count to Fortran's.
///
/// # Safety
/// `outcount` points to an int, `p` to at least that many.
pub unsafe fn indices_out(p: *mut c_int, outcount: *mut c_int) {
    // SAFETY: the caller's contract; MPI_UNDEFINED (negative) leaves nothing to convert.
    unsafe {
        for i in 0..(*outcount).max(0) as usize {
            *p.add(i) += 1;
        }
    }
}

/// Copies the Fortran string `s` of `len` bytes, trailing blanks dropped, into `out` with a
/// NUL; false when it does not fit.
///
/// # Safety
/// `s` points to `len` bytes.
pub unsafe fn string_in(s: *const c_char, len: usize, out: &mut [u8]) -> bool {
    let bytes: &[u8] = if s.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's contract.
        unsafe { core::slice::from_raw_parts(s.cast::<u8>(), len) }
    };
    let n = bytes.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    if n >= out.len() {
        return false;
    }
    out[..n].copy_from_slice(&bytes[..n]);
    out[n] = 0;
    true
}

/// An info key or value from Fortran: as [`string_in`], leading blanks dropped as well (MPI
/// 4.1: the Fortran info procedures ignore leading and trailing blanks of keys and values).
///
/// # Safety
/// `s` points to `len` bytes.
pub unsafe fn info_string_in(s: *const c_char, len: usize, out: &mut [u8]) -> bool {
    let lead = if s.is_null() {
        0
    } else {
        // SAFETY: the caller's contract.
        let bytes = unsafe { core::slice::from_raw_parts(s.cast::<u8>(), len) };
        bytes.iter().take_while(|&&b| b == b' ').count()
    };
    // SAFETY: the caller's contract; lead <= len.
    unsafe { string_in(s.wrapping_add(lead), len - lead, out) }
}

/// Copies the NUL-terminated string in `c` into the Fortran string `s` of `len` bytes,
/// blank-padded (cut at `len`).
///
/// # Safety
/// `s` points to `len` writable bytes.
pub unsafe fn string_out(s: *mut c_char, len: usize, c: &[u8]) {
    if s.is_null() {
        return;
    }
    let n = c.iter().position(|&b| b == 0).unwrap_or(c.len()).min(len);
    // SAFETY: the caller's contract; n <= len.
    unsafe {
        core::ptr::copy_nonoverlapping(c.as_ptr(), s.cast::<u8>(), n);
        core::ptr::write_bytes(s.cast::<u8>().add(n), b' ', len - n);
    }
}

/// `MPI_ERR_ARG` for a string argument longer than the library takes.
pub fn string_too_long(func: &'static str) -> c_int {
    stormpi_core::capi::report_error(
        func,
        Error::new(
            ErrorClass::Arg,
            Reason::BadArgument {
                what: "a string argument is longer than 4096 characters",
            },
        ),
    )
}

/// `MPI_ERR_UNSUPPORTED_OPERATION` naming `what`.
pub fn unsupported(what: &'static str) -> c_int {
    stormpi_core::capi::unsupported(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_in_lose_trailing_blanks_and_gain_a_nul() {
        let mut out = [0xffu8; 16];
        let s = b"name   ";
        assert!(unsafe { string_in(s.as_ptr().cast(), s.len(), &mut out) });
        assert_eq!(&out[..5], b"name\0");
        // All blanks is the empty string; a string that does not fit is refused.
        assert!(unsafe { string_in(b"   ".as_ptr().cast(), 3, &mut out) });
        assert_eq!(out[0], 0);
        assert!(!unsafe { string_in([b'x'; 16].as_ptr().cast(), 16, &mut out) });
    }

    #[test]
    fn info_strings_lose_leading_and_trailing_blanks() {
        let mut out = [0xffu8; 16];
        let s = b"  key  ";
        assert!(unsafe { info_string_in(s.as_ptr().cast(), s.len(), &mut out) });
        assert_eq!(&out[..4], b"key\0");
        assert!(unsafe { info_string_in(b"    ".as_ptr().cast(), 4, &mut out) });
        assert_eq!(out[0], 0);
        assert!(unsafe { info_string_in(core::ptr::null(), 0, &mut out) });
    }

    #[test]
    fn strings_out_are_blank_padded_and_cut_at_the_fortran_length() {
        let mut f = [0u8; 8];
        unsafe { string_out(f.as_mut_ptr().cast(), f.len(), b"abc\0zzz") };
        assert_eq!(&f, b"abc     ");
        unsafe { string_out(f.as_mut_ptr().cast(), 2, b"abcdef\0") };
        assert_eq!(&f[..3], b"abc", "nothing past the length is touched");
    }

    #[test]
    fn sentinels_become_the_c_values() {
        let base = mpipriv1_.addr();
        let bottom = (base + core::mem::offset_of!(Priv1, bottom)) as *mut c_void;
        let in_place = (base + core::mem::offset_of!(Priv1, in_place)) as *mut c_void;
        let ignore = (base + core::mem::offset_of!(Priv1, status_ignore)) as *mut c_int;
        assert!(buffer(bottom).is_null());
        assert_eq!(buffer(in_place) as usize, usize::MAX);
        assert_eq!(status(ignore) as usize, 1);
        let mut x = [0 as c_int; 5];
        assert_eq!(buffer(x.as_mut_ptr().cast()), x.as_mut_ptr().cast());
        assert_eq!(status(x.as_mut_ptr()), x.as_mut_ptr().cast());
        let statuses_ignore =
            (mpipriv2_.addr() + core::mem::offset_of!(Priv2, statuses_ignore)) as *mut c_int;
        assert_eq!(statuses(statuses_ignore) as usize, 1);
        let errcodes_ignore =
            (mpipriv2_.addr() + core::mem::offset_of!(Priv2, errcodes_ignore)) as *mut c_int;
        assert!(errcodes(errcodes_ignore).is_null());
    }

    #[test]
    fn indices_count_from_one_and_undefined_stays() {
        let mut i: c_int = 0;
        unsafe { index_out(&mut i) };
        assert_eq!(i, 1);
        let mut u: c_int = -32766;
        unsafe { index_out(&mut u) };
        assert_eq!(u, -32766);
        let mut v = [0, 3, 7];
        let mut n: c_int = 2;
        unsafe { indices_out(v.as_mut_ptr(), &mut n) };
        assert_eq!(v, [1, 4, 7]);
    }

    /// The blocks are MPICH's layout, padded to the alignment gfortran gives their size.
    #[test]
    fn common_blocks_have_mpichs_layout() {
        assert_eq!(core::mem::offset_of!(Priv1, status_ignore), 8);
        assert_eq!(core::mem::offset_of!(Priv2, errcodes_ignore), 20);
        assert_eq!((size_of::<Priv1>(), align_of::<Priv1>()), (32, 32));
        assert_eq!((size_of::<Priv2>(), align_of::<Priv2>()), (32, 32));
        assert_eq!((size_of::<PrivC>(), size_of::<OneInt>()), (16, 16));
    }
}
