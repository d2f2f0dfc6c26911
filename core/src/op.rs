//! Reduction operators: the predefined operations on the predefined types.
//!
//! `apply(op, datatype, inout, input)` computes `inout[i] = input[i] op inout[i]` element by
//! element, as MPI defines a reduction step. Which operation applies to which type follows the
//! standard's table (integers, floating point, complex, logical, byte, pairs), plus what Open MPI
//! and MPICH both accept beyond it (`MPI_MAX`, `MPI_MIN`, `MPI_SUM`, `MPI_PROD` on `MPI_CHAR`);
//! any other combination is an `MPI_ERR_OP` error naming both.

use crate::datatype::{Datatype, Num, Scalar};
use crate::error::{Error, ErrorClass, Reason, Result};

/// A predefined reduction operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `MPI_MAX`
    Max,
    /// `MPI_MIN`
    Min,
    /// `MPI_SUM`
    Sum,
    /// `MPI_PROD`
    Prod,
    /// `MPI_LAND`
    Land,
    /// `MPI_BAND`
    Band,
    /// `MPI_LOR`
    Lor,
    /// `MPI_BOR`
    Bor,
    /// `MPI_LXOR`
    Lxor,
    /// `MPI_BXOR`
    Bxor,
    /// `MPI_MINLOC`
    Minloc,
    /// `MPI_MAXLOC`
    Maxloc,
    /// `MPI_REPLACE` (one-sided accumulate only)
    Replace,
    /// `MPI_NO_OP` (one-sided accumulate only)
    NoOp,
    /// A user-defined operation (`MPI_Op_create`): slot of the engine's table, which holds the
    /// function and whether it commutes.
    User(u16),
}

impl Op {
    /// The name the standard gives it.
    pub const fn name(self) -> &'static str {
        match self {
            Op::Max => "MPI_MAX",
            Op::Min => "MPI_MIN",
            Op::Sum => "MPI_SUM",
            Op::Prod => "MPI_PROD",
            Op::Land => "MPI_LAND",
            Op::Band => "MPI_BAND",
            Op::Lor => "MPI_LOR",
            Op::Bor => "MPI_BOR",
            Op::Lxor => "MPI_LXOR",
            Op::Bxor => "MPI_BXOR",
            Op::Minloc => "MPI_MINLOC",
            Op::Maxloc => "MPI_MAXLOC",
            Op::Replace => "MPI_REPLACE",
            Op::NoOp => "MPI_NO_OP",
            Op::User(_) => "a user-defined operation",
        }
    }

    /// Whether `a op b == b op a` for a predefined operation (every one is); a user-defined
    /// operation says so when it is created (ask the engine: `Engine::op_commutative`).
    pub const fn is_commutative(self) -> bool {
        !matches!(self, Op::User(_))
    }
}

fn not_defined() -> Error {
    Error::new(
        ErrorClass::Op,
        Reason::BadArgument {
            what: "reduction operation is not defined for this datatype",
        },
    )
}

/// A fixed-size element stored in `N` unaligned bytes.
trait Elem<const N: usize>: Copy {
    fn from_bytes(b: [u8; N]) -> Self;
    fn to_bytes(self) -> [u8; N];
}

macro_rules! elem {
    ($($t:ty),*) => {$(
        impl Elem<{ core::mem::size_of::<$t>() }> for $t {
            #[inline(always)]
            fn from_bytes(b: [u8; core::mem::size_of::<$t>()]) -> Self {
                <$t>::from_ne_bytes(b)
            }
            #[inline(always)]
            fn to_bytes(self) -> [u8; core::mem::size_of::<$t>()] {
                self.to_ne_bytes()
            }
        }
    )*};
}
elem!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

/// The element at the front of `b`; `None` if `b` is too short to hold one.
#[inline(always)]
fn front<T: Elem<N>, const N: usize>(b: &[u8]) -> Option<T> {
    b.first_chunk().map(|a| T::from_bytes(*a))
}

#[inline(always)]
fn each<T: Elem<N>, const N: usize>(inout: &mut [u8], input: &[u8], f: impl Fn(T, T) -> T) {
    let (inout, _) = inout.as_chunks_mut::<N>();
    let (input, _) = input.as_chunks::<N>();
    for (o, i) in inout.iter_mut().zip(input) {
        *o = f(T::from_bytes(*i), T::from_bytes(*o)).to_bytes();
    }
}

macro_rules! int_op {
    ($t:ty, $op:expr, $inout:expr, $input:expr) => {{
        let (inout, input) = ($inout, $input);
        const N: usize = core::mem::size_of::<$t>();
        match $op {
            Op::Max => each::<$t, N>(inout, input, |a, b| a.max(b)),
            Op::Min => each::<$t, N>(inout, input, |a, b| a.min(b)),
            Op::Sum => each::<$t, N>(inout, input, |a, b| a.wrapping_add(b)),
            Op::Prod => each::<$t, N>(inout, input, |a, b| a.wrapping_mul(b)),
            Op::Land => each::<$t, N>(inout, input, |a, b| ((a != 0) && (b != 0)) as $t),
            Op::Lor => each::<$t, N>(inout, input, |a, b| ((a != 0) || (b != 0)) as $t),
            Op::Lxor => each::<$t, N>(inout, input, |a, b| ((a != 0) != (b != 0)) as $t),
            Op::Band => each::<$t, N>(inout, input, |a, b| a & b),
            Op::Bor => each::<$t, N>(inout, input, |a, b| a | b),
            Op::Bxor => each::<$t, N>(inout, input, |a, b| a ^ b),
            _ => return Err(not_defined()),
        }
    }};
}

macro_rules! float_op {
    ($t:ty, $op:expr, $inout:expr, $input:expr) => {{
        let (inout, input) = ($inout, $input);
        const N: usize = core::mem::size_of::<$t>();
        match $op {
            // MPI leaves NaN handling open; these follow C's fmax/fmin.
            Op::Max => each::<$t, N>(inout, input, |a, b| a.max(b)),
            Op::Min => each::<$t, N>(inout, input, |a, b| a.min(b)),
            Op::Sum => each::<$t, N>(inout, input, |a, b| a + b),
            Op::Prod => each::<$t, N>(inout, input, |a, b| a * b),
            _ => return Err(not_defined()),
        }
    }};
}

/// One function per element type: each stays small enough for the compiler to inline its
/// loops' iterators (one function holding every type's loops did not, for a call per element run).
macro_rules! per_type {
    ($mac:ident: $($name:ident = $t:ty),*) => {$(
        #[inline(never)]
        fn $name(op: Op, inout: &mut [u8], input: &[u8]) -> Result<()> {
            $mac!($t, op, inout, input);
            Ok(())
        }
    )*};
}
per_type!(int_op: i8s = i8, i16s = i16, i32s = i32, i64s = i64);
per_type!(int_op: u8s = u8, u16s = u16, u32s = u32, u64s = u64);
per_type!(float_op: f32s = f32, f64s = f64);

fn signed(op: Op, bytes: u8, inout: &mut [u8], input: &[u8]) -> Result<()> {
    match bytes {
        1 => i8s(op, inout, input),
        2 => i16s(op, inout, input),
        4 => i32s(op, inout, input),
        8 => i64s(op, inout, input),
        _ => Err(not_defined()),
    }
}

fn unsigned(op: Op, bytes: u8, inout: &mut [u8], input: &[u8]) -> Result<()> {
    match bytes {
        1 => u8s(op, inout, input),
        2 => u16s(op, inout, input),
        4 => u32s(op, inout, input),
        8 => u64s(op, inout, input),
        _ => Err(not_defined()),
    }
}

fn complex<
    T: Elem<N> + core::ops::Add<Output = T> + core::ops::Sub<Output = T> + core::ops::Mul<Output = T>,
    const N: usize,
>(
    op: Op,
    inout: &mut [u8],
    input: &[u8],
) -> Result<()> {
    let (inout, _) = inout.as_chunks_mut::<N>();
    let (input, _) = input.as_chunks::<N>();
    // Each element is two parts: real, imaginary.
    for (o, i) in inout.chunks_exact_mut(2).zip(input.chunks_exact(2)) {
        let (ar, ai) = (T::from_bytes(i[0]), T::from_bytes(i[1]));
        let (br, bi) = (T::from_bytes(o[0]), T::from_bytes(o[1]));
        let (r, im) = match op {
            Op::Sum => (ar + br, ai + bi),
            Op::Prod => (ar * br - ai * bi, ar * bi + ai * br),
            _ => return Err(not_defined()),
        };
        o[0] = r.to_bytes();
        o[1] = im.to_bytes();
    }
    Ok(())
}

/// Reads a pair member as a comparable value; `None` for a type that is not one, or if `b` is
/// too short to hold it.
fn num(n: Num, b: &[u8]) -> Option<f64> {
    Some(match n {
        Num::I16 => front::<i16, 2>(b)? as f64,
        Num::I32 => front::<i32, 4>(b)? as f64,
        Num::I64 => return None,
        Num::F32 => front::<f32, 4>(b)? as f64,
        Num::F64 => front::<f64, 8>(b)?,
        Num::LongDouble => return None,
    })
}

/// The error of a pair type whose members do not fit its extent as they should.
#[cold]
fn bad_pair() -> Error {
    Error::internal("a pair type's members do not fit its extent")
}

fn pair_loc(
    op: Op,
    value: Num,
    index: Num,
    index_at: usize,
    extent: usize,
    inout: &mut [u8],
    input: &[u8],
) -> Result<()> {
    let max = match op {
        Op::Maxloc => true,
        Op::Minloc => false,
        _ => return Err(not_defined()),
    };
    let vsize = match value {
        Num::I16 => 2,
        Num::I32 | Num::F32 => 4,
        Num::I64 | Num::F64 => 8,
        Num::LongDouble => return Err(Error::unsupported("MINLOC/MAXLOC on MPI_LONG_DOUBLE_INT")),
    };
    let isize = match index {
        Num::I32 | Num::F32 => 4,
        Num::F64 => 8,
        _ => return Err(not_defined()),
    };
    for (o, i) in inout
        .chunks_exact_mut(extent)
        .zip(input.chunks_exact(extent))
    {
        let (take, tie) = if value == Num::I64 {
            let (Some(a), Some(b)) = (front::<i64, 8>(i), front::<i64, 8>(o)) else {
                return Err(bad_pair());
            };
            (if max { a > b } else { a < b }, a == b)
        } else {
            let (Some(a), Some(b)) = (num(value, i), num(value, o)) else {
                return Err(bad_pair());
            };
            (if max { a > b } else { a < b }, a == b)
        };
        let (Some(ia), Some(ib)) = (num(index, &i[index_at..]), num(index, &o[index_at..])) else {
            return Err(bad_pair());
        };
        if take {
            o[..vsize].copy_from_slice(&i[..vsize]);
            o[index_at..index_at + isize].copy_from_slice(&i[index_at..index_at + isize]);
        } else if tie && ia < ib {
            o[index_at..index_at + isize].copy_from_slice(&i[index_at..index_at + isize]);
        }
    }
    Ok(())
}

/// `long double` arithmetic, done by the platform's C compiler (Rust has no such type):
/// `(op, kind, inout, input, count, element size, stride, index offset) -> 0 | 1 (undefined) |
/// 2 (the element size is not the compiler's)`. Kinds: 0 `long double`, 1 its complex, 2 the
/// `{long double; int}` pair; ops: sum, prod, max, min, maxloc, minloc (0..=5).
pub type LongDoubleFn = unsafe extern "C" fn(
    op: core::ffi::c_int,
    kind: core::ffi::c_int,
    inout: *mut u8,
    input: *const u8,
    n: usize,
    elem: usize,
    stride: usize,
    index_at: usize,
) -> core::ffi::c_int;

static LONG_DOUBLE: spin::Once<LongDoubleFn> = spin::Once::new();

/// Registers the platform's `long double` arithmetic (once; a platform without one leaves the
/// reductions on `long double` unsupported).
pub fn set_long_double(f: LongDoubleFn) {
    LONG_DOUBLE.call_once(|| f);
}

/// A reduction on `long double` elements through the registered C arithmetic.
fn long_double(
    op: Op,
    kind: core::ffi::c_int,
    stride: usize,
    index_at: usize,
    inout: &mut [u8],
    input: &[u8],
) -> Result<()> {
    let Some(f) = LONG_DOUBLE.get() else {
        return Err(Error::unsupported(
            "reductions on long double without the platform's C arithmetic",
        ));
    };
    let code = match op {
        Op::Sum => 0,
        Op::Prod => 1,
        Op::Max => 2,
        Op::Min => 3,
        Op::Maxloc => 4,
        Op::Minloc => 5,
        _ => return Err(not_defined()),
    };
    let elem = crate::arch::ArchInfo::LOCAL.long_double.storage_bytes as usize;
    let n = inout.len() / stride;
    // SAFETY: both buffers hold `n` elements of `stride` bytes (`apply`'s contract); the
    // function reads `input` and writes `inout` within them.
    let rc = unsafe {
        f(
            code,
            kind,
            inout.as_mut_ptr(),
            input.as_ptr(),
            n,
            elem,
            stride,
            index_at,
        )
    };
    match rc {
        0 => Ok(()),
        1 => Err(not_defined()),
        _ => Err(Error::new(
            ErrorClass::Intern,
            Reason::BadArgument {
                what: "the C compiler's long double is not the size the library assumes",
            },
        )),
    }
}

/// Checks that `op` is defined on `datatype`, before any data moves (so that every member of a
/// collective fails alike instead of some waiting for the others).
pub fn check(op: Op, datatype: Datatype) -> Result<()> {
    if datatype.scalar() == Scalar::Marker {
        return Err(Error::new(ErrorClass::Type, Reason::InvalidDatatype));
    }
    if let Op::User(_) = op {
        return Ok(());
    }
    // The arithmetic every code uses, without a trial run (a subset of what `apply` takes).
    let arith = matches!(op, Op::Sum | Op::Prod | Op::Max | Op::Min);
    let plain = matches!(
        datatype.scalar(),
        Scalar::Int(1 | 2 | 4 | 8) | Scalar::Uint(1 | 2 | 4 | 8) | Scalar::Float(4 | 8)
    );
    if arith && plain {
        return Ok(());
    }
    apply(op, datatype, &mut [], &[])
}

/// `inout[i] = input[i] op inout[i]` for every element of `datatype` in the buffers (which hold
/// the same whole number of elements).
pub fn apply(op: Op, datatype: Datatype, inout: &mut [u8], input: &[u8]) -> Result<()> {
    debug_assert_eq!(inout.len(), input.len());
    if let Op::User(_) = op {
        return Err(Error::new(
            ErrorClass::Intern,
            Reason::BadArgument {
                what: "a user-defined operation is applied through the engine's table",
            },
        ));
    }
    let logical_ok = matches!(op, Op::Land | Op::Lor | Op::Lxor);
    match datatype.scalar() {
        Scalar::Int(b) | Scalar::FortranInt(b) => signed(op, b, inout, input),
        Scalar::Uint(b) => unsigned(op, b, inout, input),
        Scalar::Byte
            if matches!(op, Op::Band | Op::Bor | Op::Bxor) && datatype == Datatype::BYTE =>
        {
            unsigned(op, 1, inout, input)
        }
        // An extension both Open MPI and MPICH make, so programs written against either run:
        // MPI_CHAR is a small integer (of C's `char` signedness) for MAX, MIN, SUM and PROD.
        Scalar::Char
            if datatype == Datatype::CHAR
                && matches!(op, Op::Max | Op::Min | Op::Sum | Op::Prod) =>
        {
            if core::ffi::c_char::MIN == 0 {
                unsigned(op, 1, inout, input)
            } else {
                signed(op, 1, inout, input)
            }
        }
        Scalar::Bool if logical_ok => unsigned(op, 1, inout, input),
        Scalar::Logical(b) if logical_ok => signed(op, b, inout, input),
        Scalar::Float(4) => f32s(op, inout, input),
        Scalar::Float(8) => f64s(op, inout, input),
        Scalar::Complex(4) => complex::<f32, 4>(op, inout, input),
        Scalar::Complex(8) => complex::<f64, 8>(op, inout, input),
        Scalar::LongDouble => long_double(op, 0, datatype.extent(), 0, inout, input),
        Scalar::Complex(16)
            if datatype == Datatype::C_LONG_DOUBLE_COMPLEX
                || datatype == Datatype::CXX_LONG_DOUBLE_COMPLEX =>
        {
            long_double(op, 1, datatype.extent(), 0, inout, input)
        }
        Scalar::Pair {
            value: Num::LongDouble,
            index: Num::I32,
            index_at,
        } => long_double(op, 2, datatype.extent(), index_at as usize, inout, input),
        Scalar::Float(16) | Scalar::Complex(16) => Err(Error::unsupported(
            "reductions on quad-precision types (MPI_REAL16, MPI_COMPLEX32)",
        )),
        Scalar::Pair {
            value,
            index,
            index_at,
        } => pair_loc(
            op,
            value,
            index,
            index_at as usize,
            datatype.extent(),
            inout,
            input,
        ),
        _ => Err(not_defined()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::IntoBytes;

    #[test]
    fn check_accepts_exactly_what_apply_applies() {
        use Op::*;
        let ops = [
            Max, Min, Sum, Prod, Land, Band, Lor, Bor, Lxor, Bxor, Minloc, Maxloc, Replace,
        ];
        for dt in Datatype::predefined().filter(|d| d.scalar() != Scalar::Marker) {
            for op in ops {
                assert_eq!(
                    check(op, dt).is_ok(),
                    apply(op, dt, &mut [], &[]).is_ok(),
                    "{op:?} on {}",
                    dt.name()
                );
            }
        }
    }

    fn run<T: IntoBytes + zerocopy::FromBytes + zerocopy::Immutable + Copy>(
        op: Op,
        d: Datatype,
        a: &[T],
        b: &[T],
    ) -> Result<std::vec::Vec<T>> {
        extern crate std;
        let mut out = b.to_vec();
        apply(op, d, out.as_mut_bytes(), a.as_bytes())?;
        Ok(out)
    }
    extern crate std;

    #[test]
    fn integer_and_float_operations() {
        let (a, b) = ([1i32, -5, 7, 0], [3i32, -2, 7, 9]);
        assert_eq!(run(Op::Sum, Datatype::INT, &a, &b).unwrap(), [4, -7, 14, 9]);
        assert_eq!(run(Op::Max, Datatype::INT, &a, &b).unwrap(), [3, -2, 7, 9]);
        assert_eq!(run(Op::Min, Datatype::INT, &a, &b).unwrap(), [1, -5, 7, 0]);
        assert_eq!(
            run(Op::Prod, Datatype::INT, &a, &b).unwrap(),
            [3, 10, 49, 0]
        );
        assert_eq!(run(Op::Land, Datatype::INT, &a, &b).unwrap(), [1, 1, 1, 0]);
        assert_eq!(run(Op::Lxor, Datatype::INT, &a, &b).unwrap(), [0, 0, 0, 1]);
        assert_eq!(
            run(Op::Bxor, Datatype::UNSIGNED, &[6u32], &[3u32]).unwrap(),
            [5]
        );
        assert_eq!(
            run(Op::Sum, Datatype::DOUBLE, &[0.5f64, 1.0], &[0.25, -1.0]).unwrap(),
            [0.75, 0.0]
        );
        assert_eq!(
            run(Op::Max, Datatype::FLOAT, &[0.5f32], &[0.25]).unwrap(),
            [0.5]
        );
        assert_eq!(
            run(Op::Band, Datatype::BYTE, &[0xf0u8], &[0x3c]).unwrap(),
            [0x30]
        );
        assert_eq!(
            run(Op::Sum, Datatype::UNSIGNED_LONG_LONG, &[u64::MAX], &[2u64]).unwrap(),
            [1],
            "wraps"
        );
    }

    #[test]
    fn complex_product() {
        // (1+2i)(3+4i) = -5+10i
        assert_eq!(
            run(
                Op::Prod,
                Datatype::C_DOUBLE_COMPLEX,
                &[1.0f64, 2.0],
                &[3.0, 4.0]
            )
            .unwrap(),
            [-5.0, 10.0]
        );
    }

    #[test]
    fn minloc_and_maxloc_prefer_the_lower_index_on_ties() {
        // MPI_2INT pairs (value, index)
        let a = [5i32, 1, 9, 1, 4, 7];
        let b = [5i32, 0, 2, 3, 4, 2];
        assert_eq!(
            run(Op::Minloc, Datatype::TWO_INT, &a, &b).unwrap(),
            [5, 0, 2, 3, 4, 2]
        );
        assert_eq!(
            run(Op::Maxloc, Datatype::TWO_INT, &a, &b).unwrap(),
            [5, 0, 9, 1, 4, 2]
        );
        // MPI_DOUBLE_INT: 16-byte extent, index at 8
        let mut x = [0u8; 32];
        let mut y = [0u8; 32];
        x[..8].copy_from_slice(&2.5f64.to_ne_bytes());
        x[8..12].copy_from_slice(&3i32.to_ne_bytes());
        y[..8].copy_from_slice(&1.5f64.to_ne_bytes());
        y[8..12].copy_from_slice(&7i32.to_ne_bytes());
        apply(Op::Maxloc, Datatype::DOUBLE_INT, &mut y, &x).unwrap();
        assert_eq!(f64::from_ne_bytes(y[..8].try_into().unwrap()), 2.5);
        assert_eq!(i32::from_ne_bytes(y[8..12].try_into().unwrap()), 3);
    }

    #[test]
    fn char_reduces_as_a_small_integer_of_c_char_signedness() {
        let c = |v: i8| v as u8;
        assert_eq!(run(Op::Sum, Datatype::CHAR, &[3u8], &[4u8]).unwrap(), [7]);
        assert_eq!(run(Op::Prod, Datatype::CHAR, &[3u8], &[5u8]).unwrap(), [15]);
        let (max, min) = if core::ffi::c_char::MIN == 0 {
            (c(-1), 1)
        } else {
            (1, c(-1))
        };
        assert_eq!(run(Op::Max, Datatype::CHAR, &[c(-1)], &[1]).unwrap(), [max]);
        assert_eq!(run(Op::Min, Datatype::CHAR, &[c(-1)], &[1]).unwrap(), [min]);
        assert!(check(Op::Sum, Datatype::CHAR).is_ok());
        assert!(check(Op::Lor, Datatype::CHAR).is_err());
    }

    #[test]
    fn undefined_combinations_are_op_errors() {
        let e = run(Op::Band, Datatype::DOUBLE, &[1.0f64], &[2.0]).unwrap_err();
        assert_eq!(e.class, ErrorClass::Op);
        // MPI_CHAR takes the arithmetic Open MPI and MPICH both give it, and nothing else.
        assert_eq!(
            run(Op::Band, Datatype::CHAR, &[1u8], &[2u8])
                .unwrap_err()
                .class,
            ErrorClass::Op
        );
        assert_eq!(
            run(Op::Sum, Datatype::WCHAR, &[1u32], &[2u32])
                .unwrap_err()
                .class,
            ErrorClass::Op
        );
        assert_eq!(
            run(Op::Sum, Datatype::CHARACTER, &[1u8], &[2u8])
                .unwrap_err()
                .class,
            ErrorClass::Op
        );
        assert_eq!(
            run(Op::Maxloc, Datatype::INT, &[1i32], &[2])
                .unwrap_err()
                .class,
            ErrorClass::Op
        );
        assert_eq!(
            run(Op::Replace, Datatype::INT, &[1i32], &[2])
                .unwrap_err()
                .class,
            ErrorClass::Op
        );
        assert!(run(Op::Land, Datatype::C_BOOL, &[1u8, 0], &[1u8, 1]).is_ok());
    }
}
