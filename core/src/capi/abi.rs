//! The MPICH ABI, as Rust items: the same facts as `core/include/mpi.h`, under the same names.
//!
//! stormpi's C interface is binary-compatible with MPICH 4.0.2 (MPI 4.0): handles are `int`s with
//! MPICH's encodings, constants have MPICH's values and [`MPI_Status`] has MPICH's layout, so a
//! program compiled against MPICH's `mpi.h` runs on stormpi unchanged. The `extern "C"` functions
//! of `capi` are written against this module. `tests/abi/check.sh` prints every constant of this
//! module and compares it with what `mpi.h` and MPICH's own header say.
//!
//! Only `core::` items are used, so the module builds for `no_std` targets.
//!
//! # Handle encoding
//!
//! A handle is a 32-bit `int`, read as an unsigned bit pattern:
//!
//! ```text
//!  31 30 | 29 .. 26 | 25 ....................................... 0
//!  kind  | object   | index (meaning depends on kind and object)
//! ```
//!
//! * **kind** (bits 30–31, [`HandleKind`]): `0` invalid — null handles such as `MPI_COMM_NULL`
//!   (`0x0400_0000`) and `MPI_KEYVAL_INVALID`; `1` builtin — predefined objects
//!   (`MPI_COMM_WORLD` = `0x4400_0000`); `2` direct — an index into a preallocated table; `3`
//!   indirect — a block and an index into dynamically allocated storage. A null handle still
//!   carries its object bits, so `MPI_COMM_NULL != MPI_GROUP_NULL`.
//! * **object** (bits 26–29, [`ObjectKind`]): communicator `1`, group `2`, datatype `3`, file
//!   `4`, error handler `5`, operator `6`, info `7`, window `8`, keyval `9`, attribute `0xa`,
//!   request `0xb` (messages are requests: `MPI_MESSAGE_NULL == MPI_REQUEST_NULL`), session `0xe`.
//! * **builtin datatypes** (kind 1, object 3): bits 8–15 are the size of the type in bytes, bits
//!   0–7 a unique index. `MPI_INT` = `0x4c00_0405`: builtin, datatype, 4 bytes, index 5. Hence
//!   the handles of `MPI_LONG`, `MPI_AINT`, `MPI_LONG_DOUBLE` and the complex types built on
//!   `long double` depend on the target ([`builtin_datatype_size`] decodes the size).
//!   `MPI_LB`/`MPI_UB` are builtin with size 0.
//! * **predefined pair types** `MPI_FLOAT_INT`, `MPI_DOUBLE_INT`, `MPI_LONG_INT`, `MPI_SHORT_INT`
//!   and `MPI_LONG_DOUBLE_INT` (`0x8c00_0000`..`0x8c00_0004`) are *direct* datatype handles with
//!   indices 0–4 (they are derived types, without size bits); `MPI_2INT` is an ordinary builtin.
//! * **builtin keyvals** (kind 1, object 9): bits 22–25 name the object kind the attribute belongs
//!   to (`1` communicator, `8` window); the index of a C keyval is odd and the Fortran keyval is the
//!   next value (`MPI_TAG_UB` = `0x6440_0001`).
//!
//! Programs compiled against MPICH never decode handles (the c2f/f2c macros are identities), so
//! only the predefined values are ABI. stormpi gives the objects it creates direct or indirect
//! handles with the right object bits, so that every handle can be classified with
//! [`handle_kind`] and [`handle_object`]; how the low 26 bits index the objects is stormpi's own
//! business.
//!
//! # Target dependence
//!
//! `MPI_Aint`, `MPI_Offset`, `MPI_Count`, `MPI_LONG`, `MPI_UNSIGNED_LONG`, `MPI_AINT` and
//! `MPI_BSEND_OVERHEAD` follow `target_pointer_width` (LP64 or ILP32, as MPICH's configure
//! decides them on x86_64/aarch64/s390x and on i686); the `long double` types follow
//! [`LONG_DOUBLE_SIZE`].
#![allow(
    missing_docs,
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code
)]

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::ptr::{null_mut, without_provenance_mut};

// ------------------------------------------------------------------------------------------------
// Version
// ------------------------------------------------------------------------------------------------

/// The version of the MPI standard the interface implements.
pub const MPI_VERSION: c_int = 4;
pub const MPI_SUBVERSION: c_int = 0;

// ------------------------------------------------------------------------------------------------
// Integer types and handles
// ------------------------------------------------------------------------------------------------

/// A Fortran `INTEGER`.
pub type MPI_Fint = c_int;

pub type MPI_Comm = c_int;
pub type MPI_Group = c_int;
pub type MPI_Datatype = c_int;
pub type MPI_Op = c_int;
pub type MPI_Errhandler = c_int;
pub type MPI_Info = c_int;
pub type MPI_Request = c_int;
pub type MPI_Message = c_int;
pub type MPI_Win = c_int;
pub type MPI_Session = c_int;

/// Declares opaque C structs that pointer handles point to. The names are MPICH's struct tags
/// (see `mpi.h`); stormpi casts its own objects to and from these pointers.
macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident;)*) => {$(
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            _opaque: [u8; 0],
        }
    )*};
}

opaque! {
    /// What an [`MPI_File`] points to.
    ADIOI_FileD;
    /// What an [`MPI_T_enum`] points to.
    MPIR_T_enum_s;
    /// What an [`MPI_T_cvar_handle`] points to.
    MPIR_T_cvar_handle_s;
    /// What an [`MPI_T_pvar_handle`] points to.
    MPIR_T_pvar_handle_s;
    /// What an [`MPI_T_pvar_session`] points to.
    MPIR_T_pvar_session_s;
    /// What an [`MPI_T_event_registration`] points to.
    MPIR_T_event_registration_s;
    /// What an [`MPI_T_event_instance`] points to.
    MPIR_T_event_instance_s;
}

pub type MPI_File = *mut ADIOI_FileD;
pub type MPI_T_enum = *mut MPIR_T_enum_s;
pub type MPI_T_cvar_handle = *mut MPIR_T_cvar_handle_s;
pub type MPI_T_pvar_handle = *mut MPIR_T_pvar_handle_s;
pub type MPI_T_pvar_session = *mut MPIR_T_pvar_session_s;
pub type MPI_T_event_registration = *mut MPIR_T_event_registration_s;
pub type MPI_T_event_instance = *mut MPIR_T_event_instance_s;

/// C enum `MPI_T_cb_safety` (GCC gives an enum without negative values the type `unsigned int`).
pub type MPI_T_cb_safety = c_uint;
/// C enum `MPI_T_source_order`.
pub type MPI_T_source_order = c_uint;

/// Items whose value depends on the pointer width (LP64 targets).
#[cfg(target_pointer_width = "64")]
mod data_model {
    use super::MPI_Datatype;
    use core::ffi::{c_int, c_long};

    /// An address or address difference (C `long`).
    pub type MPI_Aint = c_long;
    /// A file offset (C `long`).
    pub type MPI_Offset = c_long;
    /// A large count (C `long`).
    pub type MPI_Count = c_long;

    pub const MPI_LONG: MPI_Datatype = 0x4c00_0807;
    pub const MPI_UNSIGNED_LONG: MPI_Datatype = 0x4c00_0808;
    pub const MPI_AINT: MPI_Datatype = 0x4c00_0843;
    /// Per-message space to add to `MPI_Buffer_attach` buffers.
    pub const MPI_BSEND_OVERHEAD: c_int = 96;
}

/// Items whose value depends on the pointer width (ILP32 targets).
#[cfg(target_pointer_width = "32")]
mod data_model {
    use super::MPI_Datatype;
    use core::ffi::{c_int, c_longlong};

    /// An address or address difference (C `int`).
    pub type MPI_Aint = c_int;
    /// A file offset (C `long long`).
    pub type MPI_Offset = c_longlong;
    /// A large count (C `long long`).
    pub type MPI_Count = c_longlong;

    pub const MPI_LONG: MPI_Datatype = 0x4c00_0407;
    pub const MPI_UNSIGNED_LONG: MPI_Datatype = 0x4c00_0408;
    pub const MPI_AINT: MPI_Datatype = 0x4c00_0443;
    /// Per-message space to add to `MPI_Buffer_attach` buffers.
    pub const MPI_BSEND_OVERHEAD: c_int = 56;
}

pub use data_model::*;

/// Size of C `long double` on the target: 12 on i686, 8 where it is `double` (32-bit Arm, MIPS),
/// 16 elsewhere (x86_64, aarch64, s390x, powerpc64, riscv64, ...).
#[cfg(target_arch = "x86")]
pub const LONG_DOUBLE_SIZE: usize = 12;
#[cfg(any(target_arch = "arm", target_arch = "mips"))]
pub const LONG_DOUBLE_SIZE: usize = 8;
#[cfg(not(any(target_arch = "x86", target_arch = "arm", target_arch = "mips")))]
pub const LONG_DOUBLE_SIZE: usize = 16;

pub const MPI_LONG_DOUBLE: MPI_Datatype = datatype_with_size(0x4c00_000c, LONG_DOUBLE_SIZE);
pub const MPI_C_LONG_DOUBLE_COMPLEX: MPI_Datatype =
    datatype_with_size(0x4c00_0042, 2 * LONG_DOUBLE_SIZE);
pub const MPI_CXX_LONG_DOUBLE_COMPLEX: MPI_Datatype =
    datatype_with_size(0x4c00_0036, 2 * LONG_DOUBLE_SIZE);

/// Puts `size` into the size bits of a builtin datatype handle.
const fn datatype_with_size(handle: u32, size: usize) -> MPI_Datatype {
    (handle | ((size as u32) << DATATYPE_SIZE_SHIFT)) as MPI_Datatype
}

// ------------------------------------------------------------------------------------------------
// Status
// ------------------------------------------------------------------------------------------------

/// `MPI_Status`, laid out as MPICH does.
///
/// `count_lo` and `count_hi_and_cancelled` are private to the library: together they hold the
/// received size in bytes (low 32 bits in `count_lo`, the higher bits in bits 1.. of
/// `count_hi_and_cancelled`) and the cancelled flag (bit 0 of `count_hi_and_cancelled`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MPI_Status {
    pub count_lo: c_int,
    pub count_hi_and_cancelled: c_int,
    pub MPI_SOURCE: c_int,
    pub MPI_TAG: c_int,
    pub MPI_ERROR: c_int,
}

impl MPI_Status {
    /// The received size in bytes.
    pub const fn count_bytes(&self) -> MPI_Count {
        let hi = (self.count_hi_and_cancelled as u32 >> 1) as u64;
        ((hi << 32) | self.count_lo as u32 as u64) as MPI_Count
    }

    /// Stores the received size in bytes (0 ..= 2^63 - 1), keeping the cancelled flag.
    pub fn set_count_bytes(&mut self, bytes: MPI_Count) {
        let bytes = bytes as u64;
        self.count_lo = bytes as u32 as c_int;
        let cancelled = self.count_hi_and_cancelled as u32 & 1;
        self.count_hi_and_cancelled = (((bytes >> 32) as u32) << 1 | cancelled) as c_int;
    }

    pub const fn cancelled(&self) -> bool {
        self.count_hi_and_cancelled & 1 != 0
    }

    pub fn set_cancelled(&mut self, cancelled: bool) {
        self.count_hi_and_cancelled = (self.count_hi_and_cancelled & !1) | cancelled as c_int;
    }
}

/// The status as the Fortran 2008 bindings see it (same layout as [`MPI_Status`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MPI_F08_status {
    pub count_lo: MPI_Fint,
    pub count_hi_and_cancelled: MPI_Fint,
    pub MPI_SOURCE: MPI_Fint,
    pub MPI_TAG: MPI_Fint,
    pub MPI_ERROR: MPI_Fint,
}

const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<MPI_Status>() == 20);
    assert!(align_of::<MPI_Status>() == 4);
    assert!(offset_of!(MPI_Status, count_lo) == 0);
    assert!(offset_of!(MPI_Status, count_hi_and_cancelled) == 4);
    assert!(offset_of!(MPI_Status, MPI_SOURCE) == 8);
    assert!(offset_of!(MPI_Status, MPI_TAG) == 12);
    assert!(offset_of!(MPI_Status, MPI_ERROR) == 16);
    assert!(size_of::<MPI_F08_status>() == size_of::<MPI_Status>());
    assert!(size_of::<MPI_Aint>() == size_of::<usize>());
    assert!(size_of::<MPI_Offset>() == 8);
    assert!(size_of::<MPI_Count>() == 8);
};

/// A Fortran status as an array of `MPI_Fint`, and the index of each public field in it.
pub const MPI_F_STATUS_SIZE: c_int = 5;
pub const MPI_F_SOURCE: c_int = 2;
pub const MPI_F_TAG: c_int = 3;
pub const MPI_F_ERROR: c_int = 4;

// ------------------------------------------------------------------------------------------------
// Null handles
// ------------------------------------------------------------------------------------------------

pub const MPI_COMM_NULL: MPI_Comm = 0x0400_0000;
pub const MPI_GROUP_NULL: MPI_Group = 0x0800_0000;
pub const MPI_DATATYPE_NULL: MPI_Datatype = 0x0c00_0000;
pub const MPI_ERRHANDLER_NULL: MPI_Errhandler = 0x1400_0000;
pub const MPI_OP_NULL: MPI_Op = 0x1800_0000;
pub const MPI_INFO_NULL: MPI_Info = 0x1c00_0000;
pub const MPI_WIN_NULL: MPI_Win = 0x2000_0000;
pub const MPI_REQUEST_NULL: MPI_Request = 0x2c00_0000;
pub const MPI_MESSAGE_NULL: MPI_Message = 0x2c00_0000;
pub const MPI_SESSION_NULL: MPI_Session = 0x3800_0000;
pub const MPI_FILE_NULL: MPI_File = null_mut();

pub const MPI_T_ENUM_NULL: MPI_T_enum = null_mut();
pub const MPI_T_CVAR_HANDLE_NULL: MPI_T_cvar_handle = null_mut();
pub const MPI_T_PVAR_HANDLE_NULL: MPI_T_pvar_handle = null_mut();
pub const MPI_T_PVAR_SESSION_NULL: MPI_T_pvar_session = null_mut();

// ------------------------------------------------------------------------------------------------
// Predefined objects
// ------------------------------------------------------------------------------------------------

pub const MPI_COMM_WORLD: MPI_Comm = 0x4400_0000;
pub const MPI_COMM_SELF: MPI_Comm = 0x4400_0001;
pub const MPI_GROUP_EMPTY: MPI_Group = 0x4800_0000;

/// The message a matched probe of `MPI_PROC_NULL` returns.
pub const MPI_MESSAGE_NO_PROC: MPI_Message = 0x6c00_0000;

/// The info object holding the environment the process was started with.
pub const MPI_INFO_ENV: MPI_Info = 0x5c00_0001;

pub const MPI_ERRORS_ARE_FATAL: MPI_Errhandler = 0x5400_0000;
pub const MPI_ERRORS_RETURN: MPI_Errhandler = 0x5400_0001;
pub const MPI_ERRORS_ABORT: MPI_Errhandler = 0x5400_0003;

pub const MPI_MAX: MPI_Op = 0x5800_0001;
pub const MPI_MIN: MPI_Op = 0x5800_0002;
pub const MPI_SUM: MPI_Op = 0x5800_0003;
pub const MPI_PROD: MPI_Op = 0x5800_0004;
pub const MPI_LAND: MPI_Op = 0x5800_0005;
pub const MPI_BAND: MPI_Op = 0x5800_0006;
pub const MPI_LOR: MPI_Op = 0x5800_0007;
pub const MPI_BOR: MPI_Op = 0x5800_0008;
pub const MPI_LXOR: MPI_Op = 0x5800_0009;
pub const MPI_BXOR: MPI_Op = 0x5800_000a;
pub const MPI_MINLOC: MPI_Op = 0x5800_000b;
pub const MPI_MAXLOC: MPI_Op = 0x5800_000c;
pub const MPI_REPLACE: MPI_Op = 0x5800_000d;
pub const MPI_NO_OP: MPI_Op = 0x5800_000e;

/// The predefined reduction operators, with their names.
pub const PREDEFINED_OPS: &[(MPI_Op, &str)] = &[
    (MPI_MAX, "MPI_MAX"),
    (MPI_MIN, "MPI_MIN"),
    (MPI_SUM, "MPI_SUM"),
    (MPI_PROD, "MPI_PROD"),
    (MPI_LAND, "MPI_LAND"),
    (MPI_BAND, "MPI_BAND"),
    (MPI_LOR, "MPI_LOR"),
    (MPI_BOR, "MPI_BOR"),
    (MPI_LXOR, "MPI_LXOR"),
    (MPI_BXOR, "MPI_BXOR"),
    (MPI_MINLOC, "MPI_MINLOC"),
    (MPI_MAXLOC, "MPI_MAXLOC"),
    (MPI_REPLACE, "MPI_REPLACE"),
    (MPI_NO_OP, "MPI_NO_OP"),
];

// ------------------------------------------------------------------------------------------------
// Predefined datatypes (MPI_LONG, MPI_UNSIGNED_LONG, MPI_AINT and the long double types are
// above, with the target-dependent items)
// ------------------------------------------------------------------------------------------------

// C types
pub const MPI_CHAR: MPI_Datatype = 0x4c00_0101;
pub const MPI_SIGNED_CHAR: MPI_Datatype = 0x4c00_0118;
pub const MPI_UNSIGNED_CHAR: MPI_Datatype = 0x4c00_0102;
pub const MPI_BYTE: MPI_Datatype = 0x4c00_010d;
/// `wchar_t` is 4 bytes on every supported target.
pub const MPI_WCHAR: MPI_Datatype = 0x4c00_040e;
pub const MPI_SHORT: MPI_Datatype = 0x4c00_0203;
pub const MPI_UNSIGNED_SHORT: MPI_Datatype = 0x4c00_0204;
pub const MPI_INT: MPI_Datatype = 0x4c00_0405;
pub const MPI_UNSIGNED: MPI_Datatype = 0x4c00_0406;
pub const MPI_LONG_LONG_INT: MPI_Datatype = 0x4c00_0809;
pub const MPI_LONG_LONG: MPI_Datatype = MPI_LONG_LONG_INT;
pub const MPI_UNSIGNED_LONG_LONG: MPI_Datatype = 0x4c00_0819;
pub const MPI_FLOAT: MPI_Datatype = 0x4c00_040a;
pub const MPI_DOUBLE: MPI_Datatype = 0x4c00_080b;
pub const MPI_PACKED: MPI_Datatype = 0x4c00_010f;

/// Bounds markers (deprecated, removed in MPI-3).
pub const MPI_LB: MPI_Datatype = 0x4c00_0010;
pub const MPI_UB: MPI_Datatype = 0x4c00_0011;

// Value-index pairs (struct { value; int index; }); the first five are direct handles.
pub const MPI_FLOAT_INT: MPI_Datatype = 0x8c00_0000_u32 as MPI_Datatype;
pub const MPI_DOUBLE_INT: MPI_Datatype = 0x8c00_0001_u32 as MPI_Datatype;
pub const MPI_LONG_INT: MPI_Datatype = 0x8c00_0002_u32 as MPI_Datatype;
pub const MPI_SHORT_INT: MPI_Datatype = 0x8c00_0003_u32 as MPI_Datatype;
pub const MPI_LONG_DOUBLE_INT: MPI_Datatype = 0x8c00_0004_u32 as MPI_Datatype;
pub const MPI_2INT: MPI_Datatype = 0x4c00_0816;

// Fortran types
pub const MPI_INTEGER: MPI_Datatype = 0x4c00_041b;
pub const MPI_REAL: MPI_Datatype = 0x4c00_041c;
pub const MPI_LOGICAL: MPI_Datatype = 0x4c00_041d;
pub const MPI_COMPLEX: MPI_Datatype = 0x4c00_081e;
pub const MPI_DOUBLE_PRECISION: MPI_Datatype = 0x4c00_081f;
pub const MPI_2INTEGER: MPI_Datatype = 0x4c00_0820;
pub const MPI_2REAL: MPI_Datatype = 0x4c00_0821;
pub const MPI_DOUBLE_COMPLEX: MPI_Datatype = 0x4c00_1022;
pub const MPI_2DOUBLE_PRECISION: MPI_Datatype = 0x4c00_1023;
pub const MPI_CHARACTER: MPI_Datatype = 0x4c00_011a;

// Fortran types of explicit size
pub const MPI_REAL4: MPI_Datatype = 0x4c00_0427;
pub const MPI_REAL8: MPI_Datatype = 0x4c00_0829;
pub const MPI_REAL16: MPI_Datatype = 0x4c00_102b;
pub const MPI_COMPLEX8: MPI_Datatype = 0x4c00_0828;
pub const MPI_COMPLEX16: MPI_Datatype = 0x4c00_102a;
pub const MPI_COMPLEX32: MPI_Datatype = 0x4c00_202c;
pub const MPI_INTEGER1: MPI_Datatype = 0x4c00_012d;
pub const MPI_INTEGER2: MPI_Datatype = 0x4c00_022f;
pub const MPI_INTEGER4: MPI_Datatype = 0x4c00_0430;
pub const MPI_INTEGER8: MPI_Datatype = 0x4c00_0831;
/// Not supported by MPICH 4.0.2's build: the null datatype.
pub const MPI_INTEGER16: MPI_Datatype = MPI_DATATYPE_NULL;

// C fixed-width integers
pub const MPI_INT8_T: MPI_Datatype = 0x4c00_0137;
pub const MPI_INT16_T: MPI_Datatype = 0x4c00_0238;
pub const MPI_INT32_T: MPI_Datatype = 0x4c00_0439;
pub const MPI_INT64_T: MPI_Datatype = 0x4c00_083a;
pub const MPI_UINT8_T: MPI_Datatype = 0x4c00_013b;
pub const MPI_UINT16_T: MPI_Datatype = 0x4c00_023c;
pub const MPI_UINT32_T: MPI_Datatype = 0x4c00_043d;
pub const MPI_UINT64_T: MPI_Datatype = 0x4c00_083e;

// C bool and complex
pub const MPI_C_BOOL: MPI_Datatype = 0x4c00_013f;
pub const MPI_C_FLOAT_COMPLEX: MPI_Datatype = 0x4c00_0840;
pub const MPI_C_COMPLEX: MPI_Datatype = MPI_C_FLOAT_COMPLEX;
pub const MPI_C_DOUBLE_COMPLEX: MPI_Datatype = 0x4c00_1041;

// MPI's own integer types (MPI_AINT is target-dependent)
pub const MPI_OFFSET: MPI_Datatype = 0x4c00_0844;
pub const MPI_COUNT: MPI_Datatype = 0x4c00_0845;

// C++ types
pub const MPI_CXX_BOOL: MPI_Datatype = 0x4c00_0133;
pub const MPI_CXX_FLOAT_COMPLEX: MPI_Datatype = 0x4c00_0834;
pub const MPI_CXX_DOUBLE_COMPLEX: MPI_Datatype = 0x4c00_1035;

/// Every predefined datatype with its name, for `MPI_Type_get_name` and handle validation.
/// Aliases (one handle, two names) are listed under the name MPICH reports for them
/// (`MPI_LONG_LONG_INT`, `MPI_C_COMPLEX`);
/// `MPI_INTEGER16` is the null datatype and not listed.
pub const PREDEFINED_DATATYPES: &[(MPI_Datatype, &str)] = &[
    (MPI_CHAR, "MPI_CHAR"),
    (MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR"),
    (MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR"),
    (MPI_BYTE, "MPI_BYTE"),
    (MPI_WCHAR, "MPI_WCHAR"),
    (MPI_SHORT, "MPI_SHORT"),
    (MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT"),
    (MPI_INT, "MPI_INT"),
    (MPI_UNSIGNED, "MPI_UNSIGNED"),
    (MPI_LONG, "MPI_LONG"),
    (MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG"),
    (MPI_LONG_LONG_INT, "MPI_LONG_LONG_INT"),
    (MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG"),
    (MPI_FLOAT, "MPI_FLOAT"),
    (MPI_DOUBLE, "MPI_DOUBLE"),
    (MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE"),
    (MPI_PACKED, "MPI_PACKED"),
    (MPI_LB, "MPI_LB"),
    (MPI_UB, "MPI_UB"),
    (MPI_FLOAT_INT, "MPI_FLOAT_INT"),
    (MPI_DOUBLE_INT, "MPI_DOUBLE_INT"),
    (MPI_LONG_INT, "MPI_LONG_INT"),
    (MPI_SHORT_INT, "MPI_SHORT_INT"),
    (MPI_2INT, "MPI_2INT"),
    (MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT"),
    (MPI_INTEGER, "MPI_INTEGER"),
    (MPI_REAL, "MPI_REAL"),
    (MPI_LOGICAL, "MPI_LOGICAL"),
    (MPI_COMPLEX, "MPI_COMPLEX"),
    (MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION"),
    (MPI_2INTEGER, "MPI_2INTEGER"),
    (MPI_2REAL, "MPI_2REAL"),
    (MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX"),
    (MPI_2DOUBLE_PRECISION, "MPI_2DOUBLE_PRECISION"),
    (MPI_CHARACTER, "MPI_CHARACTER"),
    (MPI_REAL4, "MPI_REAL4"),
    (MPI_REAL8, "MPI_REAL8"),
    (MPI_REAL16, "MPI_REAL16"),
    (MPI_COMPLEX8, "MPI_COMPLEX8"),
    (MPI_COMPLEX16, "MPI_COMPLEX16"),
    (MPI_COMPLEX32, "MPI_COMPLEX32"),
    (MPI_INTEGER1, "MPI_INTEGER1"),
    (MPI_INTEGER2, "MPI_INTEGER2"),
    (MPI_INTEGER4, "MPI_INTEGER4"),
    (MPI_INTEGER8, "MPI_INTEGER8"),
    (MPI_INT8_T, "MPI_INT8_T"),
    (MPI_INT16_T, "MPI_INT16_T"),
    (MPI_INT32_T, "MPI_INT32_T"),
    (MPI_INT64_T, "MPI_INT64_T"),
    (MPI_UINT8_T, "MPI_UINT8_T"),
    (MPI_UINT16_T, "MPI_UINT16_T"),
    (MPI_UINT32_T, "MPI_UINT32_T"),
    (MPI_UINT64_T, "MPI_UINT64_T"),
    (MPI_C_BOOL, "MPI_C_BOOL"),
    // One handle with MPI_C_COMPLEX; MPICH names it so.
    (MPI_C_FLOAT_COMPLEX, "MPI_C_COMPLEX"),
    (MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"),
    (MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX"),
    (MPI_AINT, "MPI_AINT"),
    (MPI_OFFSET, "MPI_OFFSET"),
    (MPI_COUNT, "MPI_COUNT"),
    (MPI_CXX_BOOL, "MPI_CXX_BOOL"),
    (MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX"),
    (MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX"),
    (MPI_CXX_LONG_DOUBLE_COMPLEX, "MPI_CXX_LONG_DOUBLE_COMPLEX"),
];

// Type classes for MPI_Type_match_size
pub const MPI_TYPECLASS_REAL: c_int = 1;
pub const MPI_TYPECLASS_INTEGER: c_int = 2;
pub const MPI_TYPECLASS_COMPLEX: c_int = 3;

// Combiners reported by MPI_Type_get_envelope
pub const MPI_COMBINER_NAMED: c_int = 1;
pub const MPI_COMBINER_DUP: c_int = 2;
pub const MPI_COMBINER_CONTIGUOUS: c_int = 3;
pub const MPI_COMBINER_VECTOR: c_int = 4;
pub const MPI_COMBINER_HVECTOR_INTEGER: c_int = 5;
pub const MPI_COMBINER_HVECTOR: c_int = 6;
pub const MPI_COMBINER_INDEXED: c_int = 7;
pub const MPI_COMBINER_HINDEXED_INTEGER: c_int = 8;
pub const MPI_COMBINER_HINDEXED: c_int = 9;
pub const MPI_COMBINER_INDEXED_BLOCK: c_int = 10;
pub const MPI_COMBINER_STRUCT_INTEGER: c_int = 11;
pub const MPI_COMBINER_STRUCT: c_int = 12;
pub const MPI_COMBINER_SUBARRAY: c_int = 13;
pub const MPI_COMBINER_DARRAY: c_int = 14;
pub const MPI_COMBINER_F90_REAL: c_int = 15;
pub const MPI_COMBINER_F90_COMPLEX: c_int = 16;
pub const MPI_COMBINER_F90_INTEGER: c_int = 17;
pub const MPI_COMBINER_RESIZED: c_int = 18;
pub const MPI_COMBINER_HINDEXED_BLOCK: c_int = 19;

// Array order and distributions for subarray and darray types
pub const MPI_ORDER_C: c_int = 56;
pub const MPI_ORDER_FORTRAN: c_int = 57;
pub const MPI_DISTRIBUTE_BLOCK: c_int = 121;
pub const MPI_DISTRIBUTE_CYCLIC: c_int = 122;
pub const MPI_DISTRIBUTE_NONE: c_int = 123;
pub const MPI_DISTRIBUTE_DFLT_DARG: c_int = -49767;

// ------------------------------------------------------------------------------------------------
// Special values
// ------------------------------------------------------------------------------------------------

pub const MPI_PROC_NULL: c_int = -1;
pub const MPI_ANY_SOURCE: c_int = -2;
pub const MPI_ROOT: c_int = -3;
pub const MPI_ANY_TAG: c_int = -1;
pub const MPI_UNDEFINED: c_int = -32766;

pub const MPI_BOTTOM: *mut c_void = null_mut();
pub const MPI_IN_PLACE: *mut c_void = without_provenance_mut(usize::MAX);
pub const MPI_STATUS_IGNORE: *mut MPI_Status = without_provenance_mut(1);
pub const MPI_STATUSES_IGNORE: *mut MPI_Status = without_provenance_mut(1);
pub const MPI_ERRCODES_IGNORE: *mut c_int = null_mut();
pub const MPI_ARGV_NULL: *mut *mut c_char = null_mut();
pub const MPI_ARGVS_NULL: *mut *mut *mut c_char = null_mut();

// String lengths, including the terminating NUL
pub const MPI_MAX_PROCESSOR_NAME: c_int = 128;
pub const MPI_MAX_LIBRARY_VERSION_STRING: c_int = 8192;
pub const MPI_MAX_ERROR_STRING: c_int = 512;
pub const MPI_MAX_PORT_NAME: c_int = 256;
pub const MPI_MAX_OBJECT_NAME: c_int = 128;
pub const MPI_MAX_INFO_KEY: c_int = 255;
pub const MPI_MAX_INFO_VAL: c_int = 1024;
pub const MPI_MAX_DATAREP_STRING: c_int = 128;
pub const MPI_MAX_STRINGTAG_LEN: c_int = 256;
pub const MPI_MAX_PSET_NAME_LEN: c_int = 256;

// Results of comparing groups and communicators
pub const MPI_IDENT: c_int = 0;
pub const MPI_CONGRUENT: c_int = 1;
pub const MPI_SIMILAR: c_int = 2;
pub const MPI_UNEQUAL: c_int = 3;

// Thread support levels
pub const MPI_THREAD_SINGLE: c_int = 0;
pub const MPI_THREAD_FUNNELED: c_int = 1;
pub const MPI_THREAD_SERIALIZED: c_int = 2;
pub const MPI_THREAD_MULTIPLE: c_int = 3;

// Topology types
pub const MPI_GRAPH: c_int = 1;
pub const MPI_CART: c_int = 2;
pub const MPI_DIST_GRAPH: c_int = 3;

// Split types for MPI_Comm_split_type
pub const MPI_COMM_TYPE_SHARED: c_int = 1;
pub const MPI_COMM_TYPE_HW_GUIDED: c_int = 2;
pub const MPI_COMM_TYPE_HW_UNGUIDED: c_int = 3;

// ------------------------------------------------------------------------------------------------
// Attributes
// ------------------------------------------------------------------------------------------------

pub const MPI_KEYVAL_INVALID: c_int = 0x2400_0000;

// Communicator attributes (on MPI_COMM_WORLD)
pub const MPI_TAG_UB: c_int = 0x6440_0001;
pub const MPI_HOST: c_int = 0x6440_0003;
pub const MPI_IO: c_int = 0x6440_0005;
pub const MPI_WTIME_IS_GLOBAL: c_int = 0x6440_0007;
pub const MPI_UNIVERSE_SIZE: c_int = 0x6440_0009;
pub const MPI_LASTUSEDCODE: c_int = 0x6440_000b;
pub const MPI_APPNUM: c_int = 0x6440_000d;

// Window attributes
pub const MPI_WIN_BASE: c_int = 0x6600_0001;
pub const MPI_WIN_SIZE: c_int = 0x6600_0003;
pub const MPI_WIN_DISP_UNIT: c_int = 0x6600_0005;
pub const MPI_WIN_CREATE_FLAVOR: c_int = 0x6600_0007;
pub const MPI_WIN_MODEL: c_int = 0x6600_0009;

// ------------------------------------------------------------------------------------------------
// One-sided communication
// ------------------------------------------------------------------------------------------------

pub const MPI_WIN_FLAVOR_CREATE: c_int = 1;
pub const MPI_WIN_FLAVOR_ALLOCATE: c_int = 2;
pub const MPI_WIN_FLAVOR_DYNAMIC: c_int = 3;
pub const MPI_WIN_FLAVOR_SHARED: c_int = 4;
pub const MPI_WIN_SEPARATE: c_int = 1;
pub const MPI_WIN_UNIFIED: c_int = 2;

pub const MPI_LOCK_EXCLUSIVE: c_int = 234;
pub const MPI_LOCK_SHARED: c_int = 235;

pub const MPI_MODE_NOCHECK: c_int = 1024;
pub const MPI_MODE_NOSTORE: c_int = 2048;
pub const MPI_MODE_NOPUT: c_int = 4096;
pub const MPI_MODE_NOPRECEDE: c_int = 8192;
pub const MPI_MODE_NOSUCCEED: c_int = 16384;

// ------------------------------------------------------------------------------------------------
// File I/O
// ------------------------------------------------------------------------------------------------

pub const MPI_MODE_CREATE: c_int = 1;
pub const MPI_MODE_RDONLY: c_int = 2;
pub const MPI_MODE_WRONLY: c_int = 4;
pub const MPI_MODE_RDWR: c_int = 8;
pub const MPI_MODE_DELETE_ON_CLOSE: c_int = 16;
pub const MPI_MODE_UNIQUE_OPEN: c_int = 32;
pub const MPI_MODE_EXCL: c_int = 64;
pub const MPI_MODE_APPEND: c_int = 128;
pub const MPI_MODE_SEQUENTIAL: c_int = 256;

pub const MPI_SEEK_SET: c_int = 600;
pub const MPI_SEEK_CUR: c_int = 602;
pub const MPI_SEEK_END: c_int = 604;
pub const MPI_DISPLACEMENT_CURRENT: c_int = -54278278;

// ------------------------------------------------------------------------------------------------
// Error classes
// ------------------------------------------------------------------------------------------------

pub const MPI_SUCCESS: c_int = 0;
pub const MPI_ERR_BUFFER: c_int = 1;
pub const MPI_ERR_COUNT: c_int = 2;
pub const MPI_ERR_TYPE: c_int = 3;
pub const MPI_ERR_TAG: c_int = 4;
pub const MPI_ERR_COMM: c_int = 5;
pub const MPI_ERR_RANK: c_int = 6;
pub const MPI_ERR_ROOT: c_int = 7;
pub const MPI_ERR_GROUP: c_int = 8;
pub const MPI_ERR_OP: c_int = 9;
pub const MPI_ERR_TOPOLOGY: c_int = 10;
pub const MPI_ERR_DIMS: c_int = 11;
pub const MPI_ERR_ARG: c_int = 12;
pub const MPI_ERR_UNKNOWN: c_int = 13;
pub const MPI_ERR_TRUNCATE: c_int = 14;
pub const MPI_ERR_OTHER: c_int = 15;
pub const MPI_ERR_INTERN: c_int = 16;
pub const MPI_ERR_IN_STATUS: c_int = 17;
pub const MPI_ERR_PENDING: c_int = 18;
pub const MPI_ERR_REQUEST: c_int = 19;
pub const MPI_ERR_ACCESS: c_int = 20;
pub const MPI_ERR_AMODE: c_int = 21;
pub const MPI_ERR_BAD_FILE: c_int = 22;
pub const MPI_ERR_CONVERSION: c_int = 23;
pub const MPI_ERR_DUP_DATAREP: c_int = 24;
pub const MPI_ERR_FILE_EXISTS: c_int = 25;
pub const MPI_ERR_FILE_IN_USE: c_int = 26;
pub const MPI_ERR_FILE: c_int = 27;
pub const MPI_ERR_INFO: c_int = 28;
pub const MPI_ERR_INFO_KEY: c_int = 29;
pub const MPI_ERR_INFO_VALUE: c_int = 30;
pub const MPI_ERR_INFO_NOKEY: c_int = 31;
pub const MPI_ERR_IO: c_int = 32;
pub const MPI_ERR_NAME: c_int = 33;
pub const MPI_ERR_NO_MEM: c_int = 34;
pub const MPI_ERR_NOT_SAME: c_int = 35;
pub const MPI_ERR_NO_SPACE: c_int = 36;
pub const MPI_ERR_NO_SUCH_FILE: c_int = 37;
pub const MPI_ERR_PORT: c_int = 38;
pub const MPI_ERR_QUOTA: c_int = 39;
pub const MPI_ERR_READ_ONLY: c_int = 40;
pub const MPI_ERR_SERVICE: c_int = 41;
pub const MPI_ERR_SPAWN: c_int = 42;
pub const MPI_ERR_UNSUPPORTED_DATAREP: c_int = 43;
pub const MPI_ERR_UNSUPPORTED_OPERATION: c_int = 44;
pub const MPI_ERR_WIN: c_int = 45;
pub const MPI_ERR_BASE: c_int = 46;
pub const MPI_ERR_LOCKTYPE: c_int = 47;
pub const MPI_ERR_KEYVAL: c_int = 48;
pub const MPI_ERR_RMA_CONFLICT: c_int = 49;
pub const MPI_ERR_RMA_SYNC: c_int = 50;
pub const MPI_ERR_SIZE: c_int = 51;
pub const MPI_ERR_DISP: c_int = 52;
pub const MPI_ERR_ASSERT: c_int = 53;
pub const MPI_ERR_RMA_RANGE: c_int = 55;
pub const MPI_ERR_RMA_ATTACH: c_int = 56;
pub const MPI_ERR_RMA_SHARED: c_int = 57;
pub const MPI_ERR_RMA_FLAVOR: c_int = 58;
pub const MPI_T_ERR_MEMORY: c_int = 59;
pub const MPI_T_ERR_NOT_INITIALIZED: c_int = 60;
pub const MPI_T_ERR_CANNOT_INIT: c_int = 61;
pub const MPI_T_ERR_INVALID_INDEX: c_int = 62;
pub const MPI_T_ERR_INVALID_ITEM: c_int = 63;
pub const MPI_T_ERR_INVALID_HANDLE: c_int = 64;
pub const MPI_T_ERR_OUT_OF_HANDLES: c_int = 65;
pub const MPI_T_ERR_OUT_OF_SESSIONS: c_int = 66;
pub const MPI_T_ERR_INVALID_SESSION: c_int = 67;
pub const MPI_T_ERR_CVAR_SET_NOT_NOW: c_int = 68;
pub const MPI_T_ERR_CVAR_SET_NEVER: c_int = 69;
pub const MPI_T_ERR_PVAR_NO_STARTSTOP: c_int = 70;
pub const MPI_T_ERR_PVAR_NO_WRITE: c_int = 71;
pub const MPI_T_ERR_PVAR_NO_ATOMIC: c_int = 72;
pub const MPI_T_ERR_INVALID_NAME: c_int = 73;
pub const MPI_T_ERR_INVALID: c_int = 74;
pub const MPI_ERR_SESSION: c_int = 75;
pub const MPI_ERR_PROC_ABORTED: c_int = 76;
pub const MPI_ERR_VALUE_TOO_LARGE: c_int = 77;
pub const MPI_T_ERR_NOT_SUPPORTED: c_int = 78;

/// The largest error code or class a user may see from a predefined class.
pub const MPI_ERR_LASTCODE: c_int = 0x3fff_ffff;

/// Every predefined error class (value 54 is unused), with its name, in increasing order.
pub const ERROR_CLASSES: &[(c_int, &str)] = &[
    (MPI_SUCCESS, "MPI_SUCCESS"),
    (MPI_ERR_BUFFER, "MPI_ERR_BUFFER"),
    (MPI_ERR_COUNT, "MPI_ERR_COUNT"),
    (MPI_ERR_TYPE, "MPI_ERR_TYPE"),
    (MPI_ERR_TAG, "MPI_ERR_TAG"),
    (MPI_ERR_COMM, "MPI_ERR_COMM"),
    (MPI_ERR_RANK, "MPI_ERR_RANK"),
    (MPI_ERR_ROOT, "MPI_ERR_ROOT"),
    (MPI_ERR_GROUP, "MPI_ERR_GROUP"),
    (MPI_ERR_OP, "MPI_ERR_OP"),
    (MPI_ERR_TOPOLOGY, "MPI_ERR_TOPOLOGY"),
    (MPI_ERR_DIMS, "MPI_ERR_DIMS"),
    (MPI_ERR_ARG, "MPI_ERR_ARG"),
    (MPI_ERR_UNKNOWN, "MPI_ERR_UNKNOWN"),
    (MPI_ERR_TRUNCATE, "MPI_ERR_TRUNCATE"),
    (MPI_ERR_OTHER, "MPI_ERR_OTHER"),
    (MPI_ERR_INTERN, "MPI_ERR_INTERN"),
    (MPI_ERR_IN_STATUS, "MPI_ERR_IN_STATUS"),
    (MPI_ERR_PENDING, "MPI_ERR_PENDING"),
    (MPI_ERR_REQUEST, "MPI_ERR_REQUEST"),
    (MPI_ERR_ACCESS, "MPI_ERR_ACCESS"),
    (MPI_ERR_AMODE, "MPI_ERR_AMODE"),
    (MPI_ERR_BAD_FILE, "MPI_ERR_BAD_FILE"),
    (MPI_ERR_CONVERSION, "MPI_ERR_CONVERSION"),
    (MPI_ERR_DUP_DATAREP, "MPI_ERR_DUP_DATAREP"),
    (MPI_ERR_FILE_EXISTS, "MPI_ERR_FILE_EXISTS"),
    (MPI_ERR_FILE_IN_USE, "MPI_ERR_FILE_IN_USE"),
    (MPI_ERR_FILE, "MPI_ERR_FILE"),
    (MPI_ERR_INFO, "MPI_ERR_INFO"),
    (MPI_ERR_INFO_KEY, "MPI_ERR_INFO_KEY"),
    (MPI_ERR_INFO_VALUE, "MPI_ERR_INFO_VALUE"),
    (MPI_ERR_INFO_NOKEY, "MPI_ERR_INFO_NOKEY"),
    (MPI_ERR_IO, "MPI_ERR_IO"),
    (MPI_ERR_NAME, "MPI_ERR_NAME"),
    (MPI_ERR_NO_MEM, "MPI_ERR_NO_MEM"),
    (MPI_ERR_NOT_SAME, "MPI_ERR_NOT_SAME"),
    (MPI_ERR_NO_SPACE, "MPI_ERR_NO_SPACE"),
    (MPI_ERR_NO_SUCH_FILE, "MPI_ERR_NO_SUCH_FILE"),
    (MPI_ERR_PORT, "MPI_ERR_PORT"),
    (MPI_ERR_QUOTA, "MPI_ERR_QUOTA"),
    (MPI_ERR_READ_ONLY, "MPI_ERR_READ_ONLY"),
    (MPI_ERR_SERVICE, "MPI_ERR_SERVICE"),
    (MPI_ERR_SPAWN, "MPI_ERR_SPAWN"),
    (MPI_ERR_UNSUPPORTED_DATAREP, "MPI_ERR_UNSUPPORTED_DATAREP"),
    (
        MPI_ERR_UNSUPPORTED_OPERATION,
        "MPI_ERR_UNSUPPORTED_OPERATION",
    ),
    (MPI_ERR_WIN, "MPI_ERR_WIN"),
    (MPI_ERR_BASE, "MPI_ERR_BASE"),
    (MPI_ERR_LOCKTYPE, "MPI_ERR_LOCKTYPE"),
    (MPI_ERR_KEYVAL, "MPI_ERR_KEYVAL"),
    (MPI_ERR_RMA_CONFLICT, "MPI_ERR_RMA_CONFLICT"),
    (MPI_ERR_RMA_SYNC, "MPI_ERR_RMA_SYNC"),
    (MPI_ERR_SIZE, "MPI_ERR_SIZE"),
    (MPI_ERR_DISP, "MPI_ERR_DISP"),
    (MPI_ERR_ASSERT, "MPI_ERR_ASSERT"),
    (MPI_ERR_RMA_RANGE, "MPI_ERR_RMA_RANGE"),
    (MPI_ERR_RMA_ATTACH, "MPI_ERR_RMA_ATTACH"),
    (MPI_ERR_RMA_SHARED, "MPI_ERR_RMA_SHARED"),
    (MPI_ERR_RMA_FLAVOR, "MPI_ERR_RMA_FLAVOR"),
    (MPI_T_ERR_MEMORY, "MPI_T_ERR_MEMORY"),
    (MPI_T_ERR_NOT_INITIALIZED, "MPI_T_ERR_NOT_INITIALIZED"),
    (MPI_T_ERR_CANNOT_INIT, "MPI_T_ERR_CANNOT_INIT"),
    (MPI_T_ERR_INVALID_INDEX, "MPI_T_ERR_INVALID_INDEX"),
    (MPI_T_ERR_INVALID_ITEM, "MPI_T_ERR_INVALID_ITEM"),
    (MPI_T_ERR_INVALID_HANDLE, "MPI_T_ERR_INVALID_HANDLE"),
    (MPI_T_ERR_OUT_OF_HANDLES, "MPI_T_ERR_OUT_OF_HANDLES"),
    (MPI_T_ERR_OUT_OF_SESSIONS, "MPI_T_ERR_OUT_OF_SESSIONS"),
    (MPI_T_ERR_INVALID_SESSION, "MPI_T_ERR_INVALID_SESSION"),
    (MPI_T_ERR_CVAR_SET_NOT_NOW, "MPI_T_ERR_CVAR_SET_NOT_NOW"),
    (MPI_T_ERR_CVAR_SET_NEVER, "MPI_T_ERR_CVAR_SET_NEVER"),
    (MPI_T_ERR_PVAR_NO_STARTSTOP, "MPI_T_ERR_PVAR_NO_STARTSTOP"),
    (MPI_T_ERR_PVAR_NO_WRITE, "MPI_T_ERR_PVAR_NO_WRITE"),
    (MPI_T_ERR_PVAR_NO_ATOMIC, "MPI_T_ERR_PVAR_NO_ATOMIC"),
    (MPI_T_ERR_INVALID_NAME, "MPI_T_ERR_INVALID_NAME"),
    (MPI_T_ERR_INVALID, "MPI_T_ERR_INVALID"),
    (MPI_ERR_SESSION, "MPI_ERR_SESSION"),
    (MPI_ERR_PROC_ABORTED, "MPI_ERR_PROC_ABORTED"),
    (MPI_ERR_VALUE_TOO_LARGE, "MPI_ERR_VALUE_TOO_LARGE"),
    (MPI_T_ERR_NOT_SUPPORTED, "MPI_T_ERR_NOT_SUPPORTED"),
];

/// The largest predefined error class; classes added with `MPI_Add_error_class` start above it.
pub const LAST_ERROR_CLASS: c_int = MPI_T_ERR_NOT_SUPPORTED;

/// The name of a predefined error class, or `None`.
pub const fn error_class_name(class: c_int) -> Option<&'static str> {
    let mut i = 0;
    while i < ERROR_CLASSES.len() {
        if ERROR_CLASSES[i].0 == class {
            return Some(ERROR_CLASSES[i].1);
        }
        i += 1;
    }
    None
}

// ------------------------------------------------------------------------------------------------
// Tool information interface
// ------------------------------------------------------------------------------------------------

// Verbosity levels, in increasing order
pub const MPI_T_VERBOSITY_USER_BASIC: c_int = 221;
pub const MPI_T_VERBOSITY_USER_DETAIL: c_int = 222;
pub const MPI_T_VERBOSITY_USER_ALL: c_int = 223;
pub const MPI_T_VERBOSITY_TUNER_BASIC: c_int = 224;
pub const MPI_T_VERBOSITY_TUNER_DETAIL: c_int = 225;
pub const MPI_T_VERBOSITY_TUNER_ALL: c_int = 226;
pub const MPI_T_VERBOSITY_MPIDEV_BASIC: c_int = 227;
pub const MPI_T_VERBOSITY_MPIDEV_DETAIL: c_int = 228;
pub const MPI_T_VERBOSITY_MPIDEV_ALL: c_int = 229;

// Object kinds a variable may be bound to
pub const MPI_T_BIND_NO_OBJECT: c_int = 9700;
pub const MPI_T_BIND_MPI_COMM: c_int = 9701;
pub const MPI_T_BIND_MPI_DATATYPE: c_int = 9702;
pub const MPI_T_BIND_MPI_ERRHANDLER: c_int = 9703;
pub const MPI_T_BIND_MPI_FILE: c_int = 9704;
pub const MPI_T_BIND_MPI_GROUP: c_int = 9705;
pub const MPI_T_BIND_MPI_OP: c_int = 9706;
pub const MPI_T_BIND_MPI_REQUEST: c_int = 9707;
pub const MPI_T_BIND_MPI_WIN: c_int = 9708;
pub const MPI_T_BIND_MPI_MESSAGE: c_int = 9709;
pub const MPI_T_BIND_MPI_INFO: c_int = 9710;

// Scopes of control variables
pub const MPI_T_SCOPE_CONSTANT: c_int = 60438;
pub const MPI_T_SCOPE_READONLY: c_int = 60439;
pub const MPI_T_SCOPE_LOCAL: c_int = 60440;
pub const MPI_T_SCOPE_GROUP: c_int = 60441;
pub const MPI_T_SCOPE_GROUP_EQ: c_int = 60442;
pub const MPI_T_SCOPE_ALL: c_int = 60443;
pub const MPI_T_SCOPE_ALL_EQ: c_int = 60444;

// Classes of performance variables
pub const MPI_T_PVAR_CLASS_STATE: c_int = 240;
pub const MPI_T_PVAR_CLASS_LEVEL: c_int = 241;
pub const MPI_T_PVAR_CLASS_SIZE: c_int = 242;
pub const MPI_T_PVAR_CLASS_PERCENTAGE: c_int = 243;
pub const MPI_T_PVAR_CLASS_HIGHWATERMARK: c_int = 244;
pub const MPI_T_PVAR_CLASS_LOWWATERMARK: c_int = 245;
pub const MPI_T_PVAR_CLASS_COUNTER: c_int = 246;
pub const MPI_T_PVAR_CLASS_AGGREGATE: c_int = 247;
pub const MPI_T_PVAR_CLASS_TIMER: c_int = 248;
pub const MPI_T_PVAR_CLASS_GENERIC: c_int = 249;

// Values of MPI_T_cb_safety
pub const MPI_T_CB_REQUIRE_NONE: MPI_T_cb_safety = 0;
pub const MPI_T_CB_REQUIRE_MPI_RESTRICTED: MPI_T_cb_safety = 1;
pub const MPI_T_CB_REQUIRE_THREAD_SAFE: MPI_T_cb_safety = 2;
pub const MPI_T_CB_REQUIRE_ASYNC_SIGNAL_SAFE: MPI_T_cb_safety = 3;

// Values of MPI_T_source_order
pub const MPI_T_SOURCE_ORDERED: MPI_T_source_order = 0;
pub const MPI_T_SOURCE_UNORDERED: MPI_T_source_order = 1;

// ------------------------------------------------------------------------------------------------
// Callback function types. A C argument of one of these types may be NULL: take it as
// `Option<...>`.
// ------------------------------------------------------------------------------------------------

/// User-defined reduction operator.
pub type MPI_User_function = unsafe extern "C" fn(
    invec: *mut c_void,
    inoutvec: *mut c_void,
    len: *mut c_int,
    datatype: *mut MPI_Datatype,
);
/// User-defined reduction operator with a large count.
pub type MPI_User_function_c = unsafe extern "C" fn(
    invec: *mut c_void,
    inoutvec: *mut c_void,
    len: *mut MPI_Count,
    datatype: *mut MPI_Datatype,
);

/// Copies a communicator attribute when the communicator is duplicated.
pub type MPI_Comm_copy_attr_function = unsafe extern "C" fn(
    oldcomm: MPI_Comm,
    comm_keyval: c_int,
    extra_state: *mut c_void,
    attribute_val_in: *mut c_void,
    attribute_val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int;
/// Deletes a communicator attribute.
pub type MPI_Comm_delete_attr_function = unsafe extern "C" fn(
    comm: MPI_Comm,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
    extra_state: *mut c_void,
) -> c_int;
/// Copies a datatype attribute when the datatype is duplicated.
pub type MPI_Type_copy_attr_function = unsafe extern "C" fn(
    oldtype: MPI_Datatype,
    type_keyval: c_int,
    extra_state: *mut c_void,
    attribute_val_in: *mut c_void,
    attribute_val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int;
/// Deletes a datatype attribute.
pub type MPI_Type_delete_attr_function = unsafe extern "C" fn(
    datatype: MPI_Datatype,
    type_keyval: c_int,
    attribute_val: *mut c_void,
    extra_state: *mut c_void,
) -> c_int;
/// Copies a window attribute (windows are never duplicated; the type exists for symmetry).
pub type MPI_Win_copy_attr_function = unsafe extern "C" fn(
    oldwin: MPI_Win,
    win_keyval: c_int,
    extra_state: *mut c_void,
    attribute_val_in: *mut c_void,
    attribute_val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int;
/// Deletes a window attribute.
pub type MPI_Win_delete_attr_function = unsafe extern "C" fn(
    win: MPI_Win,
    win_keyval: c_int,
    attribute_val: *mut c_void,
    extra_state: *mut c_void,
) -> c_int;
/// MPI-1 attribute copy function (deprecated).
pub type MPI_Copy_function = MPI_Comm_copy_attr_function;
/// MPI-1 attribute delete function (deprecated).
pub type MPI_Delete_function = MPI_Comm_delete_attr_function;

/// Error handler of a communicator.
pub type MPI_Comm_errhandler_function =
    unsafe extern "C" fn(comm: *mut MPI_Comm, error_code: *mut c_int, ...);
/// Error handler of a file.
pub type MPI_File_errhandler_function =
    unsafe extern "C" fn(file: *mut MPI_File, error_code: *mut c_int, ...);
/// Error handler of a window.
pub type MPI_Win_errhandler_function =
    unsafe extern "C" fn(win: *mut MPI_Win, error_code: *mut c_int, ...);
/// Error handler of a session.
pub type MPI_Session_errhandler_function =
    unsafe extern "C" fn(session: *mut MPI_Session, error_code: *mut c_int, ...);
/// MPI-1 error handler (deprecated).
pub type MPI_Handler_function = MPI_Comm_errhandler_function;
pub type MPI_Comm_errhandler_fn = MPI_Comm_errhandler_function;
pub type MPI_File_errhandler_fn = MPI_File_errhandler_function;
pub type MPI_Win_errhandler_fn = MPI_Win_errhandler_function;
pub type MPI_Session_errhandler_fn = MPI_Session_errhandler_function;

/// Fills in the status of a generalized request.
pub type MPI_Grequest_query_function =
    unsafe extern "C" fn(extra_state: *mut c_void, status: *mut MPI_Status) -> c_int;
/// Frees the state of a generalized request.
pub type MPI_Grequest_free_function = unsafe extern "C" fn(extra_state: *mut c_void) -> c_int;
/// Cancels a generalized request.
pub type MPI_Grequest_cancel_function =
    unsafe extern "C" fn(extra_state: *mut c_void, complete: c_int) -> c_int;

/// Converts between a user buffer and a file's data representation.
pub type MPI_Datarep_conversion_function = unsafe extern "C" fn(
    userbuf: *mut c_void,
    datatype: MPI_Datatype,
    count: c_int,
    filebuf: *mut c_void,
    position: MPI_Offset,
    extra_state: *mut c_void,
) -> c_int;
/// Large-count variant of [`MPI_Datarep_conversion_function`].
pub type MPI_Datarep_conversion_function_c = unsafe extern "C" fn(
    userbuf: *mut c_void,
    datatype: MPI_Datatype,
    count: MPI_Count,
    filebuf: *mut c_void,
    position: MPI_Offset,
    extra_state: *mut c_void,
) -> c_int;
/// Reports the extent of a datatype in a file's data representation.
pub type MPI_Datarep_extent_function = unsafe extern "C" fn(
    datatype: MPI_Datatype,
    file_extent: *mut MPI_Aint,
    extra_state: *mut c_void,
) -> c_int;

/// Receives a tool interface event.
pub type MPI_T_event_cb_function = unsafe extern "C" fn(
    event_instance: MPI_T_event_instance,
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    user_data: *mut c_void,
);
/// Called when an event registration is freed.
pub type MPI_T_event_free_cb_function = unsafe extern "C" fn(
    event_registration: MPI_T_event_registration,
    cb_safety: MPI_T_cb_safety,
    user_data: *mut c_void,
);
/// Reports events dropped by a source.
pub type MPI_T_event_dropped_cb_function = unsafe extern "C" fn(
    count: MPI_Count,
    event_registration: MPI_T_event_registration,
    source_index: c_int,
    cb_safety: MPI_T_cb_safety,
    user_data: *mut c_void,
);

// Predefined null callbacks. The dup callbacks (MPI_DUP_FN, MPI_COMM_DUP_FN, MPI_TYPE_DUP_FN,
// MPI_WIN_DUP_FN, and MPICH's MPIR_Dup_fn) are functions the library defines, and
// MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY, MPI_F_STATUS(ES)_IGNORE, MPI_F08_STATUS(ES)_IGNORE and
// MPI_T_PVAR_ALL_HANDLES are statics it defines: see `names::CALLBACK_FUNCTIONS`,
// `names::MPICH_COMPAT_FUNCTIONS` and `names::LIBRARY_OBJECTS`.
pub const MPI_NULL_COPY_FN: Option<MPI_Copy_function> = None;
pub const MPI_NULL_DELETE_FN: Option<MPI_Delete_function> = None;
pub const MPI_COMM_NULL_COPY_FN: Option<MPI_Comm_copy_attr_function> = None;
pub const MPI_COMM_NULL_DELETE_FN: Option<MPI_Comm_delete_attr_function> = None;
pub const MPI_TYPE_NULL_COPY_FN: Option<MPI_Type_copy_attr_function> = None;
pub const MPI_TYPE_NULL_DELETE_FN: Option<MPI_Type_delete_attr_function> = None;
pub const MPI_WIN_NULL_COPY_FN: Option<MPI_Win_copy_attr_function> = None;
pub const MPI_WIN_NULL_DELETE_FN: Option<MPI_Win_delete_attr_function> = None;
pub const MPI_CONVERSION_FN_NULL: Option<MPI_Datarep_conversion_function> = None;
pub const MPI_CONVERSION_FN_NULL_C: Option<MPI_Datarep_conversion_function_c> = None;

// ------------------------------------------------------------------------------------------------
// Handle encoding
// ------------------------------------------------------------------------------------------------

pub const HANDLE_KIND_SHIFT: u32 = 30;
pub const HANDLE_KIND_MASK: u32 = 0xc000_0000;
pub const HANDLE_OBJECT_SHIFT: u32 = 26;
pub const HANDLE_OBJECT_MASK: u32 = 0x3c00_0000;
pub const HANDLE_INDEX_MASK: u32 = 0x03ff_ffff;
pub const DATATYPE_SIZE_SHIFT: u32 = 8;
pub const DATATYPE_SIZE_MASK: u32 = 0x0000_ff00;
pub const KEYVAL_OBJECT_SHIFT: u32 = 22;
pub const KEYVAL_OBJECT_MASK: u32 = 0x03c0_0000;

/// Bits 30–31 of a handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum HandleKind {
    /// A null handle (or garbage).
    Invalid = 0,
    /// A predefined object.
    Builtin = 1,
    /// An object in a preallocated table; the index is bits 0–25.
    Direct = 2,
    /// An object in dynamically allocated storage.
    Indirect = 3,
}

/// Bits 26–29 of a handle: the kind of object it refers to (MPICH's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ObjectKind {
    Comm = 0x1,
    Group = 0x2,
    Datatype = 0x3,
    File = 0x4,
    Errhandler = 0x5,
    Op = 0x6,
    Info = 0x7,
    Win = 0x8,
    Keyval = 0x9,
    Attr = 0xa,
    /// Requests and messages.
    Request = 0xb,
    /// MPICH-internal (virtual connections); not used by stormpi.
    Vconn = 0xc,
    /// Generalized request classes (an MPICH extension).
    GreqClass = 0xd,
    Session = 0xe,
    /// MPICH-internal (streams); not used by stormpi.
    Stream = 0xf,
}

/// The kind of a handle.
pub const fn handle_kind(h: c_int) -> HandleKind {
    match (h as u32 & HANDLE_KIND_MASK) >> HANDLE_KIND_SHIFT {
        0 => HandleKind::Invalid,
        1 => HandleKind::Builtin,
        2 => HandleKind::Direct,
        _ => HandleKind::Indirect,
    }
}

/// The object kind a handle refers to (null handles included), or `None` for object bits 0.
pub const fn handle_object(h: c_int) -> Option<ObjectKind> {
    object_kind_from_bits((h as u32 & HANDLE_OBJECT_MASK) >> HANDLE_OBJECT_SHIFT)
}

/// Bits 0–25 of a handle.
pub const fn handle_index(h: c_int) -> u32 {
    h as u32 & HANDLE_INDEX_MASK
}

/// Builds a handle from its parts; `index` must fit in 26 bits.
pub const fn make_handle(kind: HandleKind, object: ObjectKind, index: u32) -> c_int {
    assert!(index <= HANDLE_INDEX_MASK);
    (((kind as u32) << HANDLE_KIND_SHIFT) | ((object as u32) << HANDLE_OBJECT_SHIFT) | index)
        as c_int
}

/// The null handle of an object kind (e.g. `MPI_COMM_NULL` for [`ObjectKind::Comm`]).
pub const fn null_handle(object: ObjectKind) -> c_int {
    make_handle(HandleKind::Invalid, object, 0)
}

/// The size in bytes encoded in a builtin datatype handle (`Some(0)` for `MPI_LB`/`MPI_UB`);
/// `None` if the handle is not a builtin datatype (null, pair types, derived types).
pub const fn builtin_datatype_size(h: MPI_Datatype) -> Option<usize> {
    match (handle_kind(h), handle_object(h)) {
        (HandleKind::Builtin, Some(ObjectKind::Datatype)) => {
            Some(((h as u32 & DATATYPE_SIZE_MASK) >> DATATYPE_SIZE_SHIFT) as usize)
        }
        _ => None,
    }
}

/// The object kind a builtin keyval belongs to (communicator for `MPI_TAG_UB`, window for
/// `MPI_WIN_BASE`); `None` if `h` is not a builtin keyval.
pub const fn builtin_keyval_object(h: c_int) -> Option<ObjectKind> {
    match (handle_kind(h), handle_object(h)) {
        (HandleKind::Builtin, Some(ObjectKind::Keyval)) => {
            object_kind_from_bits((h as u32 & KEYVAL_OBJECT_MASK) >> KEYVAL_OBJECT_SHIFT)
        }
        _ => None,
    }
}

const fn object_kind_from_bits(bits: u32) -> Option<ObjectKind> {
    Some(match bits {
        0x1 => ObjectKind::Comm,
        0x2 => ObjectKind::Group,
        0x3 => ObjectKind::Datatype,
        0x4 => ObjectKind::File,
        0x5 => ObjectKind::Errhandler,
        0x6 => ObjectKind::Op,
        0x7 => ObjectKind::Info,
        0x8 => ObjectKind::Win,
        0x9 => ObjectKind::Keyval,
        0xa => ObjectKind::Attr,
        0xb => ObjectKind::Request,
        0xc => ObjectKind::Vconn,
        0xd => ObjectKind::GreqClass,
        0xe => ObjectKind::Session,
        0xf => ObjectKind::Stream,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_handles_follow_the_encoding() {
        assert_eq!(null_handle(ObjectKind::Comm), MPI_COMM_NULL);
        assert_eq!(null_handle(ObjectKind::Group), MPI_GROUP_NULL);
        assert_eq!(null_handle(ObjectKind::Datatype), MPI_DATATYPE_NULL);
        assert_eq!(null_handle(ObjectKind::Errhandler), MPI_ERRHANDLER_NULL);
        assert_eq!(null_handle(ObjectKind::Op), MPI_OP_NULL);
        assert_eq!(null_handle(ObjectKind::Info), MPI_INFO_NULL);
        assert_eq!(null_handle(ObjectKind::Win), MPI_WIN_NULL);
        assert_eq!(null_handle(ObjectKind::Request), MPI_REQUEST_NULL);
        assert_eq!(null_handle(ObjectKind::Request), MPI_MESSAGE_NULL);
        assert_eq!(null_handle(ObjectKind::Session), MPI_SESSION_NULL);
        assert_eq!(null_handle(ObjectKind::Keyval), MPI_KEYVAL_INVALID);
    }

    #[test]
    fn predefined_handles_decode() {
        assert_eq!(handle_kind(MPI_COMM_WORLD), HandleKind::Builtin);
        assert_eq!(handle_object(MPI_COMM_WORLD), Some(ObjectKind::Comm));
        assert_eq!(handle_index(MPI_COMM_SELF), 1);
        assert_eq!(
            make_handle(HandleKind::Builtin, ObjectKind::Comm, 1),
            MPI_COMM_SELF
        );
        assert_eq!(handle_object(MPI_GROUP_EMPTY), Some(ObjectKind::Group));
        assert_eq!(handle_object(MPI_INFO_ENV), Some(ObjectKind::Info));
        assert_eq!(
            handle_object(MPI_ERRORS_RETURN),
            Some(ObjectKind::Errhandler)
        );
        assert_eq!(
            handle_object(MPI_MESSAGE_NO_PROC),
            Some(ObjectKind::Request)
        );
        assert_eq!(handle_kind(MPI_COMM_NULL), HandleKind::Invalid);
        assert_eq!(handle_kind(MPI_FLOAT_INT), HandleKind::Direct);
        assert_eq!(handle_object(MPI_FLOAT_INT), Some(ObjectKind::Datatype));
        for &(op, _) in PREDEFINED_OPS {
            assert_eq!(handle_kind(op), HandleKind::Builtin);
            assert_eq!(handle_object(op), Some(ObjectKind::Op));
        }
    }

    #[test]
    fn datatype_sizes_decode() {
        assert_eq!(builtin_datatype_size(MPI_CHAR), Some(1));
        assert_eq!(builtin_datatype_size(MPI_INT), Some(4));
        assert_eq!(builtin_datatype_size(MPI_DOUBLE), Some(8));
        assert_eq!(builtin_datatype_size(MPI_2INT), Some(8));
        assert_eq!(builtin_datatype_size(MPI_DOUBLE_COMPLEX), Some(16));
        assert_eq!(
            builtin_datatype_size(MPI_LONG),
            Some(core::mem::size_of::<core::ffi::c_long>())
        );
        assert_eq!(
            builtin_datatype_size(MPI_AINT),
            Some(core::mem::size_of::<MPI_Aint>())
        );
        assert_eq!(builtin_datatype_size(MPI_OFFSET), Some(8));
        assert_eq!(builtin_datatype_size(MPI_COUNT), Some(8));
        assert_eq!(
            builtin_datatype_size(MPI_LONG_DOUBLE),
            Some(LONG_DOUBLE_SIZE)
        );
        assert_eq!(
            builtin_datatype_size(MPI_C_LONG_DOUBLE_COMPLEX),
            Some(2 * LONG_DOUBLE_SIZE)
        );
        assert_eq!(builtin_datatype_size(MPI_LB), Some(0));
        assert_eq!(builtin_datatype_size(MPI_DATATYPE_NULL), None);
        assert_eq!(builtin_datatype_size(MPI_DOUBLE_INT), None);
        assert_eq!(builtin_datatype_size(MPI_COMM_WORLD), None);
        for &(t, name) in PREDEFINED_DATATYPES {
            assert_ne!(t, MPI_DATATYPE_NULL, "{name}");
            assert_eq!(handle_object(t), Some(ObjectKind::Datatype), "{name}");
        }
    }

    #[test]
    fn predefined_datatypes_are_distinct() {
        for (i, &(a, na)) in PREDEFINED_DATATYPES.iter().enumerate() {
            for &(b, nb) in &PREDEFINED_DATATYPES[i + 1..] {
                assert_ne!(a, b, "{na} and {nb}");
            }
        }
    }

    #[test]
    fn keyvals_decode() {
        assert_eq!(builtin_keyval_object(MPI_TAG_UB), Some(ObjectKind::Comm));
        assert_eq!(builtin_keyval_object(MPI_APPNUM), Some(ObjectKind::Comm));
        assert_eq!(builtin_keyval_object(MPI_WIN_MODEL), Some(ObjectKind::Win));
        assert_eq!(builtin_keyval_object(MPI_KEYVAL_INVALID), None);
        assert_eq!(builtin_keyval_object(MPI_COMM_WORLD), None);
        assert_eq!(MPI_TAG_UB & 1, 1);
    }

    #[test]
    fn error_classes_are_ordered_and_named() {
        assert!(ERROR_CLASSES.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(ERROR_CLASSES.last().map(|e| e.0), Some(LAST_ERROR_CLASS));
        assert_eq!(error_class_name(MPI_ERR_TRUNCATE), Some("MPI_ERR_TRUNCATE"));
        assert_eq!(error_class_name(54), None);
        assert_eq!(error_class_name(MPI_ERR_LASTCODE), None);
    }

    #[test]
    fn status_count_and_cancelled() {
        let mut s = MPI_Status::default();
        s.set_cancelled(true);
        s.set_count_bytes(0x1_2345_6789);
        assert_eq!(s.count_bytes(), 0x1_2345_6789);
        assert!(s.cancelled());
        assert_eq!(s.count_lo, 0x2345_6789);
        assert_eq!(s.count_hi_and_cancelled, 0b11);
        s.set_cancelled(false);
        assert_eq!(s.count_bytes(), 0x1_2345_6789);
        s.set_count_bytes(i64::MAX as MPI_Count);
        assert_eq!(s.count_bytes(), i64::MAX as MPI_Count);
        assert!(!s.cancelled());
    }
}
