//! MPI datatypes: predefined and derived, their flattened descriptions, conversion between data
//! representations, and the convertors that move a message's bytes by position.
//!
//! - [`table`]: every type's entry — info, description, constructor arguments — and all the
//!   constructors (contiguous, vector, indexed, struct, subarray, darray, resized, dup...).
//! - [`desc`]: the description a committed type is flattened into (runs and loops).
//! - [`repr`]: data representations (native, a peer's, external32) and element conversion.
//! - [`convertor`]: packing and unpacking from any byte position, converting where needed.

pub mod convertor;
pub mod desc;
pub mod repr;
pub mod table;

use core::ffi::c_long;
use core::mem::size_of;

/// A number inside a pair type (`MPI_2INT`, `MPI_DOUBLE_INT`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Num {
    /// `short`.
    I16,
    /// `int` / Fortran `INTEGER`.
    I32,
    /// `long` (64-bit targets).
    I64,
    /// `float` / Fortran `REAL`.
    F32,
    /// `double` / Fortran `DOUBLE PRECISION`.
    F64,
    /// `long double`.
    LongDouble,
}

/// What a predefined type's elements are, for reductions and (later) conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// Signed integer of the given bytes.
    Int(u8),
    /// Unsigned integer of the given bytes.
    Uint(u8),
    /// Fortran integer of the given bytes (`MPI_INTEGER`, `MPI_INTEGER8`, ...).
    FortranInt(u8),
    /// IEEE float of the given bytes (4 or 8; 16 is quad precision, no arithmetic).
    Float(u8),
    /// C `long double` (format per architecture; no arithmetic in Rust).
    LongDouble,
    /// C `bool` / `_Bool` / C++ `bool`.
    Bool,
    /// Fortran `LOGICAL` of the given bytes.
    Logical(u8),
    /// Character data (no arithmetic).
    Char,
    /// Raw bytes (`MPI_BYTE`, `MPI_PACKED`): never converted.
    Byte,
    /// Complex of two floats of the given bytes each (4, 8; 16 for long double parts).
    Complex(u8),
    /// A (value, index) pair for `MPI_MINLOC`/`MPI_MAXLOC`.
    Pair {
        /// The value.
        value: Num,
        /// The index.
        index: Num,
        /// Byte offset of the index in one pair.
        index_at: u8,
    },
    /// A marker without data (`MPI_LB`, `MPI_UB`).
    Marker,
}

/// An MPI datatype handle: predefined types are constants (codes below
/// [`table::PREDEFINED`]); derived types are entries of the engine's [`table::TypeTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Datatype(u32);

struct Predef {
    name: &'static str,
    size: usize,
    extent: usize,
    scalar: Scalar,
}

macro_rules! predefined {
    ($( $id:ident = $code:expr, $name:expr, $size:expr, $extent:expr, $scalar:expr; )*) => {
        impl Datatype {
            $(
                #[doc = concat!("`", $name, "`")]
                pub const $id: Datatype = Datatype($code);
            )*
        }
        const PREDEFINED: &[Predef] = &[
            $( Predef { name: $name, size: $size, extent: $extent, scalar: $scalar }, )*
        ];
    };
}

const LONG: u8 = size_of::<c_long>() as u8;

// The type table gives the predefined types the first entries, one per code.
const _: () = assert!(PREDEFINED.len() == table::PREDEFINED as usize);

predefined! {
    CHAR = 0, "MPI_CHAR", 1, 1, Scalar::Char;
    SIGNED_CHAR = 1, "MPI_SIGNED_CHAR", 1, 1, Scalar::Int(1);
    UNSIGNED_CHAR = 2, "MPI_UNSIGNED_CHAR", 1, 1, Scalar::Uint(1);
    BYTE = 3, "MPI_BYTE", 1, 1, Scalar::Byte;
    WCHAR = 4, "MPI_WCHAR", WCHAR_SIZE, WCHAR_SIZE, Scalar::Char;
    SHORT = 5, "MPI_SHORT", 2, 2, Scalar::Int(2);
    UNSIGNED_SHORT = 6, "MPI_UNSIGNED_SHORT", 2, 2, Scalar::Uint(2);
    INT = 7, "MPI_INT", 4, 4, Scalar::Int(4);
    UNSIGNED = 8, "MPI_UNSIGNED", 4, 4, Scalar::Uint(4);
    LONG = 9, "MPI_LONG", LONG as usize, LONG as usize, Scalar::Int(LONG);
    UNSIGNED_LONG = 10, "MPI_UNSIGNED_LONG", LONG as usize, LONG as usize, Scalar::Uint(LONG);
    LONG_LONG = 11, "MPI_LONG_LONG", 8, 8, Scalar::Int(8);
    UNSIGNED_LONG_LONG = 12, "MPI_UNSIGNED_LONG_LONG", 8, 8, Scalar::Uint(8);
    FLOAT = 13, "MPI_FLOAT", 4, 4, Scalar::Float(4);
    DOUBLE = 14, "MPI_DOUBLE", 8, 8, Scalar::Float(8);
    LONG_DOUBLE = 15, "MPI_LONG_DOUBLE", LD, LD, Scalar::LongDouble;
    INT8_T = 16, "MPI_INT8_T", 1, 1, Scalar::Int(1);
    INT16_T = 17, "MPI_INT16_T", 2, 2, Scalar::Int(2);
    INT32_T = 18, "MPI_INT32_T", 4, 4, Scalar::Int(4);
    INT64_T = 19, "MPI_INT64_T", 8, 8, Scalar::Int(8);
    UINT8_T = 20, "MPI_UINT8_T", 1, 1, Scalar::Uint(1);
    UINT16_T = 21, "MPI_UINT16_T", 2, 2, Scalar::Uint(2);
    UINT32_T = 22, "MPI_UINT32_T", 4, 4, Scalar::Uint(4);
    UINT64_T = 23, "MPI_UINT64_T", 8, 8, Scalar::Uint(8);
    C_BOOL = 24, "MPI_C_BOOL", 1, 1, Scalar::Bool;
    AINT = 25, "MPI_AINT", PTR, PTR, Scalar::Int(PTR as u8);
    OFFSET = 26, "MPI_OFFSET", 8, 8, Scalar::Int(8);
    COUNT = 27, "MPI_COUNT", 8, 8, Scalar::Int(8);
    PACKED = 28, "MPI_PACKED", 1, 1, Scalar::Byte;
    C_FLOAT_COMPLEX = 29, "MPI_C_FLOAT_COMPLEX", 8, 8, Scalar::Complex(4);
    C_DOUBLE_COMPLEX = 30, "MPI_C_DOUBLE_COMPLEX", 16, 16, Scalar::Complex(8);
    C_LONG_DOUBLE_COMPLEX = 31, "MPI_C_LONG_DOUBLE_COMPLEX", 2 * LD, 2 * LD, Scalar::Complex(16);
    CXX_BOOL = 32, "MPI_CXX_BOOL", 1, 1, Scalar::Bool;
    CXX_FLOAT_COMPLEX = 33, "MPI_CXX_FLOAT_COMPLEX", 8, 8, Scalar::Complex(4);
    CXX_DOUBLE_COMPLEX = 34, "MPI_CXX_DOUBLE_COMPLEX", 16, 16, Scalar::Complex(8);
    CXX_LONG_DOUBLE_COMPLEX = 35, "MPI_CXX_LONG_DOUBLE_COMPLEX", 2 * LD, 2 * LD, Scalar::Complex(16);
    INTEGER = 36, "MPI_INTEGER", 4, 4, Scalar::FortranInt(4);
    REAL = 37, "MPI_REAL", 4, 4, Scalar::Float(4);
    DOUBLE_PRECISION = 38, "MPI_DOUBLE_PRECISION", 8, 8, Scalar::Float(8);
    LOGICAL = 39, "MPI_LOGICAL", 4, 4, Scalar::Logical(4);
    CHARACTER = 40, "MPI_CHARACTER", 1, 1, Scalar::Char;
    COMPLEX = 41, "MPI_COMPLEX", 8, 8, Scalar::Complex(4);
    DOUBLE_COMPLEX = 42, "MPI_DOUBLE_COMPLEX", 16, 16, Scalar::Complex(8);
    INTEGER1 = 43, "MPI_INTEGER1", 1, 1, Scalar::FortranInt(1);
    INTEGER2 = 44, "MPI_INTEGER2", 2, 2, Scalar::FortranInt(2);
    INTEGER4 = 45, "MPI_INTEGER4", 4, 4, Scalar::FortranInt(4);
    INTEGER8 = 46, "MPI_INTEGER8", 8, 8, Scalar::FortranInt(8);
    REAL4 = 47, "MPI_REAL4", 4, 4, Scalar::Float(4);
    REAL8 = 48, "MPI_REAL8", 8, 8, Scalar::Float(8);
    REAL16 = 49, "MPI_REAL16", 16, 16, Scalar::Float(16);
    COMPLEX8 = 50, "MPI_COMPLEX8", 8, 8, Scalar::Complex(4);
    COMPLEX16 = 51, "MPI_COMPLEX16", 16, 16, Scalar::Complex(8);
    COMPLEX32 = 52, "MPI_COMPLEX32", 32, 32, Scalar::Complex(16);
    TWO_INT = 53, "MPI_2INT", 8, 8, Scalar::Pair { value: Num::I32, index: Num::I32, index_at: 4 };
    FLOAT_INT = 54, "MPI_FLOAT_INT", 8, 8, Scalar::Pair { value: Num::F32, index: Num::I32, index_at: 4 };
    TWO_INTEGER = 55, "MPI_2INTEGER", 8, 8, Scalar::Pair { value: Num::I32, index: Num::I32, index_at: 4 };
    TWO_REAL = 56, "MPI_2REAL", 8, 8, Scalar::Pair { value: Num::F32, index: Num::F32, index_at: 4 };
    TWO_DOUBLE_PRECISION = 57, "MPI_2DOUBLE_PRECISION", 16, 16, Scalar::Pair { value: Num::F64, index: Num::F64, index_at: 8 };
    DOUBLE_INT = 58, "MPI_DOUBLE_INT", 12, size_of::<DoubleInt>(), Scalar::Pair { value: Num::F64, index: Num::I32, index_at: 8 };
    LONG_INT = 59, "MPI_LONG_INT", LONG as usize + 4, size_of::<LongInt>(), Scalar::Pair { value: LONG_NUM, index: Num::I32, index_at: LONG };
    SHORT_INT = 60, "MPI_SHORT_INT", 6, 8, Scalar::Pair { value: Num::I16, index: Num::I32, index_at: 4 };
    LONG_DOUBLE_INT = 61, "MPI_LONG_DOUBLE_INT", LD + 4, (LD + 4).next_multiple_of(LD_ALIGN), Scalar::Pair { value: Num::LongDouble, index: Num::I32, index_at: LD as u8 };
    LB = 62, "MPI_LB", 0, 0, Scalar::Marker;
    UB = 63, "MPI_UB", 0, 0, Scalar::Marker;
}

const LD: usize = crate::arch::ArchInfo::LOCAL.long_double.storage_bytes as usize;

// The pair types' extents are those of the C structs `{double; int}`, `{long; int}` and
// `{long double; int}` here: i386 aligns `double` and `long double` to 4 bytes in structs.
#[repr(C)]
struct DoubleInt(f64, i32);
#[repr(C)]
struct LongInt(c_long, i32);
/// Alignment of C `long double` in a struct.
const LD_ALIGN: usize = if cfg!(target_arch = "x86") {
    4
} else if cfg!(target_arch = "s390x") {
    8
} else {
    LD
};
const PTR: usize = size_of::<usize>();
const WCHAR_SIZE: usize = 4;
const LONG_NUM: Num = if LONG == 8 { Num::I64 } else { Num::I32 };

impl Datatype {
    fn predef(self) -> Option<&'static Predef> {
        PREDEFINED.get(self.0 as usize)
    }

    /// Whether this is a predefined type.
    pub fn is_predefined(self) -> bool {
        self.predef().is_some()
    }

    /// Index of the type's entry in the type table.
    pub fn index(self) -> u32 {
        self.0
    }

    /// Size in bytes of one element (predefined types; 0 for derived ones — ask the table).
    pub fn size(self) -> usize {
        self.predef().map_or(0, |p| p.size)
    }

    /// Bytes of one element of a predefined integer type (C, unsigned or Fortran integer), 0
    /// for every other type (usable in constants: the C binding's one-sided lean entries
    /// tabulate it by handle).
    pub const fn integer_bytes(self) -> usize {
        if self.0 as usize >= PREDEFINED.len() {
            return 0;
        }
        match PREDEFINED[self.0 as usize].scalar {
            Scalar::Int(b) | Scalar::Uint(b) | Scalar::FortranInt(b) => b as usize,
            _ => 0,
        }
    }

    /// Bytes of one element of a predefined type whose elements are dense (size equal to
    /// extent, not a marker), 0 for every other type (usable in constants, as
    /// [`Datatype::integer_bytes`]).
    pub const fn dense_bytes(self) -> usize {
        if self.0 as usize >= PREDEFINED.len() {
            return 0;
        }
        let p = &PREDEFINED[self.0 as usize];
        if p.size == p.extent && !matches!(p.scalar, Scalar::Marker) {
            p.size
        } else {
            0
        }
    }

    /// The element kind (predefined types; `Marker` for derived ones).
    pub fn scalar(self) -> Scalar {
        self.predef().map_or(Scalar::Marker, |p| p.scalar)
    }

    /// The name the standard gives it (predefined types).
    pub fn name(self) -> &'static str {
        self.predef().map_or("a derived datatype", |p| p.name)
    }

    /// Bytes from one element to the next in an array (predefined types).
    pub fn extent(self) -> usize {
        self.predef().map_or(0, |p| p.extent)
    }

    /// Whether `count` elements are one run of `count * size` bytes with no gaps. Pair types with
    /// padding (`MPI_DOUBLE_INT`, ...) are not; they need the datatype engine's pack/unpack.
    pub fn is_contiguous(self) -> bool {
        self.predef()
            .is_some_and(|p| p.size == p.extent && p.scalar != Scalar::Marker)
    }

    /// The type in entry `index` of the type table (whether that entry is live is the table's
    /// to say).
    pub fn from_index(index: u32) -> Datatype {
        Datatype(index)
    }

    /// The predefined type with this code, if any (codes are dense from 0).
    pub fn from_code(code: u16) -> Option<Datatype> {
        ((code as usize) < PREDEFINED.len()).then_some(Datatype(code as u32))
    }

    /// This type's code.
    pub fn code(self) -> u16 {
        self.0 as u16
    }

    /// Every predefined type.
    pub fn predefined() -> impl Iterator<Item = Datatype> {
        (0..PREDEFINED.len() as u32).map(Datatype)
    }
}

/// Rust types that correspond to an MPI datatype and whose every bit pattern is a valid value,
/// so received bytes can be written into them safely.
pub trait Equivalence:
    zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable + Copy
{
    /// The matching MPI datatype.
    const DATATYPE: Datatype;
}

macro_rules! equivalence {
    ($($t:ty => $d:ident),* $(,)?) => {
        $( impl Equivalence for $t { const DATATYPE: Datatype = Datatype::$d; } )*
    };
}

equivalence! {
    u8 => UINT8_T, i8 => INT8_T, u16 => UINT16_T, i16 => INT16_T,
    u32 => UINT32_T, i32 => INT32_T, u64 => UINT64_T, i64 => INT64_T,
    f32 => FLOAT, f64 => DOUBLE,
}

#[cfg(target_pointer_width = "64")]
equivalence! { usize => UINT64_T, isize => INT64_T }
#[cfg(target_pointer_width = "32")]
equivalence! { usize => UINT32_T, isize => INT32_T }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_sizes_match_c() {
        assert_eq!(Datatype::INT.size(), 4);
        assert_eq!(Datatype::LONG.size(), size_of::<c_long>());
        assert_eq!(Datatype::DOUBLE.size(), 8);
        assert_eq!(Datatype::C_DOUBLE_COMPLEX.size(), 16);
        assert_eq!(<f64 as Equivalence>::DATATYPE, Datatype::DOUBLE);
        assert!(!Datatype::DOUBLE_INT.is_contiguous() && Datatype::TWO_INT.is_contiguous());
        assert_eq!(
            (Datatype::SHORT_INT.size(), Datatype::SHORT_INT.extent()),
            (6, 8)
        );
        for d in Datatype::predefined() {
            assert!(d.size() > 0 || d.scalar() == Scalar::Marker, "{}", d.name());
            assert_eq!(Datatype::from_code(d.code()), Some(d));
        }
        assert_eq!(Datatype::from_code(999), None);
    }
}
