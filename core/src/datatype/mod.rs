//! MPI datatypes.
//!
//! This first version knows the predefined contiguous types; derived types (vector, struct, ...)
//! and heterogeneous conversion come with the datatype-engine issue and live here too. Everything
//! above this module moves data through a [`convertor`], which asks for bytes by position, so
//! non-contiguous types will slot in without touching the protocols.

pub mod convertor;

use core::ffi::{c_long, c_longlong, c_short, c_ulong};
use core::mem::size_of;

/// What a predefined type's elements are, for reductions and (later) conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// Signed integer of the given bytes.
    Int(u8),
    /// Unsigned integer of the given bytes.
    Uint(u8),
    /// IEEE float of the given bytes (4 or 8).
    Float(u8),
    /// C `long double` (format per architecture).
    LongDouble,
    /// C `bool` / `_Bool`.
    Bool,
    /// Character data (no arithmetic).
    Char,
    /// Raw bytes (`MPI_BYTE`, `MPI_PACKED`): never converted.
    Byte,
    /// Complex of two floats of the given bytes each.
    Complex(u8),
}

/// An MPI datatype handle. Predefined types are constants; derived types will be table entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Datatype(u16);

struct Predef {
    name: &'static str,
    size: usize,
    scalar: Scalar,
}

macro_rules! predefined {
    ($( $id:ident = $code:expr, $name:expr, $size:expr, $scalar:expr; )*) => {
        impl Datatype {
            $(
                #[doc = concat!("`", $name, "`")]
                pub const $id: Datatype = Datatype($code);
            )*
        }
        const PREDEFINED: &[Predef] = &[
            $( Predef { name: $name, size: $size, scalar: $scalar }, )*
        ];
    };
}

const LONG: u8 = size_of::<c_long>() as u8;

predefined! {
    CHAR = 0, "MPI_CHAR", 1, Scalar::Char;
    SIGNED_CHAR = 1, "MPI_SIGNED_CHAR", 1, Scalar::Int(1);
    UNSIGNED_CHAR = 2, "MPI_UNSIGNED_CHAR", 1, Scalar::Uint(1);
    BYTE = 3, "MPI_BYTE", 1, Scalar::Byte;
    WCHAR = 4, "MPI_WCHAR", 4, Scalar::Int(4);
    SHORT = 5, "MPI_SHORT", size_of::<c_short>(), Scalar::Int(2);
    UNSIGNED_SHORT = 6, "MPI_UNSIGNED_SHORT", 2, Scalar::Uint(2);
    INT = 7, "MPI_INT", 4, Scalar::Int(4);
    UNSIGNED = 8, "MPI_UNSIGNED", 4, Scalar::Uint(4);
    LONG = 9, "MPI_LONG", LONG as usize, Scalar::Int(LONG);
    UNSIGNED_LONG = 10, "MPI_UNSIGNED_LONG", size_of::<c_ulong>(), Scalar::Uint(LONG);
    LONG_LONG = 11, "MPI_LONG_LONG", size_of::<c_longlong>(), Scalar::Int(8);
    UNSIGNED_LONG_LONG = 12, "MPI_UNSIGNED_LONG_LONG", 8, Scalar::Uint(8);
    FLOAT = 13, "MPI_FLOAT", 4, Scalar::Float(4);
    DOUBLE = 14, "MPI_DOUBLE", 8, Scalar::Float(8);
    LONG_DOUBLE = 15, "MPI_LONG_DOUBLE", LONG_DOUBLE_SIZE, Scalar::LongDouble;
    INT8_T = 16, "MPI_INT8_T", 1, Scalar::Int(1);
    INT16_T = 17, "MPI_INT16_T", 2, Scalar::Int(2);
    INT32_T = 18, "MPI_INT32_T", 4, Scalar::Int(4);
    INT64_T = 19, "MPI_INT64_T", 8, Scalar::Int(8);
    UINT8_T = 20, "MPI_UINT8_T", 1, Scalar::Uint(1);
    UINT16_T = 21, "MPI_UINT16_T", 2, Scalar::Uint(2);
    UINT32_T = 22, "MPI_UINT32_T", 4, Scalar::Uint(4);
    UINT64_T = 23, "MPI_UINT64_T", 8, Scalar::Uint(8);
    C_BOOL = 24, "MPI_C_BOOL", 1, Scalar::Bool;
    AINT = 25, "MPI_AINT", size_of::<usize>(), Scalar::Int(size_of::<usize>() as u8);
    OFFSET = 26, "MPI_OFFSET", 8, Scalar::Int(8);
    COUNT = 27, "MPI_COUNT", 8, Scalar::Int(8);
    PACKED = 28, "MPI_PACKED", 1, Scalar::Byte;
    C_FLOAT_COMPLEX = 29, "MPI_C_FLOAT_COMPLEX", 8, Scalar::Complex(4);
    C_DOUBLE_COMPLEX = 30, "MPI_C_DOUBLE_COMPLEX", 16, Scalar::Complex(8);
}

const LONG_DOUBLE_SIZE: usize = crate::arch::ArchInfo::LOCAL.long_double.storage_bytes as usize;

impl Datatype {
    /// Size in bytes of one element.
    pub fn size(self) -> usize {
        PREDEFINED[self.0 as usize].size
    }

    /// The element kind.
    pub fn scalar(self) -> Scalar {
        PREDEFINED[self.0 as usize].scalar
    }

    /// The name the standard gives it.
    pub fn name(self) -> &'static str {
        PREDEFINED[self.0 as usize].name
    }

    /// Whether the type's data is one contiguous run of bytes (true for every predefined type).
    pub fn is_contiguous(self) -> bool {
        true
    }

    /// The predefined type with this code, if any (codes are dense from 0).
    pub fn from_code(code: u16) -> Option<Datatype> {
        ((code as usize) < PREDEFINED.len()).then_some(Datatype(code))
    }

    /// This type's code.
    pub fn code(self) -> u16 {
        self.0
    }

    /// Every predefined type.
    pub fn predefined() -> impl Iterator<Item = Datatype> {
        (0..PREDEFINED.len() as u16).map(Datatype)
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
        for d in Datatype::predefined() {
            assert!(d.size() > 0, "{}", d.name());
            assert_eq!(Datatype::from_code(d.code()), Some(d));
        }
        assert_eq!(Datatype::from_code(999), None);
    }
}
