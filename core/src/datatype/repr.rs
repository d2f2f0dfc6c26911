//! Data representations and the conversion of basic elements between them.
//!
//! A message travels in its sender's representation ("receiver makes right"): between peers of
//! the same architecture nothing is converted. A [`Repr`] says what a stream's elements look like
//! — byte order, and the sizes that differ between machines (`long`, `MPI_AINT`, C `bool`,
//! Fortran `LOGICAL`, `long double`). `external32`, the canonical format of `MPI_Pack_external`,
//! is one more representation.
//!
//! Conversion is per basic element ([`Elem`]): integers are re-encoded to the destination's width
//! and byte order, and a value that does not fit is reported ([`Fault::Overflow`]) rather than silently
//! truncated; floating point is byte-swapped (IEEE formats are the same everywhere); `long double`
//! is converted between the x87 extended, IEEE binary128 and binary64 formats; booleans keep
//! their truth value across widths.

use crate::arch::{Arch, ArchInfo, Endian, LongDouble};

/// The kind of a basic element, as far as conversion cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// Bytes that are never converted (`MPI_BYTE`, `MPI_PACKED`, `MPI_CHAR`).
    Byte,
    /// A signed integer.
    Int(Width),
    /// An unsigned integer.
    Uint(Width),
    /// An IEEE float of this many bytes (4, 8; 16 is binary128).
    Float(u8),
    /// C `long double`.
    LongDouble,
    /// C `bool`.
    Bool,
    /// Fortran `LOGICAL`.
    Logical,
}

/// Width of an integer element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// The same number of bytes everywhere.
    Fixed(u8),
    /// C `long`.
    Long,
    /// `MPI_Aint` (an address: pointer-sized).
    Aint,
}

/// What the elements of a stream look like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repr {
    /// Byte order.
    pub endian: Endian,
    /// Bytes of `long`.
    pub long: u8,
    /// Bytes of `MPI_Aint`.
    pub aint: u8,
    /// Bytes of C `bool`.
    pub bool_: u8,
    /// Bytes of Fortran `LOGICAL`.
    pub logical: u8,
    /// Format of `long double`.
    pub long_double: LongDouble,
}

/// IEEE binary128, as `external32` and most 64-bit non-x86 machines store `long double`.
const QUAD: LongDouble = LongDouble {
    storage_bytes: 16,
    exponent_bits: 15,
    mantissa_bits: 113,
    intel: false,
};

impl Repr {
    /// This process's representation.
    pub const NATIVE: Repr = Repr {
        endian: Endian::NATIVE,
        long: ArchInfo::LOCAL.long_bytes,
        aint: core::mem::size_of::<usize>() as u8,
        bool_: ArchInfo::LOCAL.bool_bytes,
        logical: ArchInfo::LOCAL.logical_bytes,
        long_double: ArchInfo::LOCAL.long_double,
    };

    /// `external32` (MPI-3.1 §13.5.2): big-endian, `long` of 4 bytes, addresses of 8, `long
    /// double` as binary128.
    pub const EXTERNAL32: Repr = Repr {
        endian: Endian::Big,
        long: 4,
        aint: 8,
        bool_: 1,
        logical: 4,
        long_double: QUAD,
    };

    /// The representation of a peer with architecture descriptor `arch`. Addresses are as wide
    /// as `long` on every data model stormpi meets (LP64, ILP32).
    pub fn of(arch: Arch) -> Option<Repr> {
        let info = arch.decode()?;
        Some(Repr {
            endian: info.endian,
            long: info.long_bytes,
            aint: info.long_bytes,
            bool_: info.bool_bytes,
            logical: info.logical_bytes,
            long_double: info.long_double,
        })
    }

    /// Bytes one `elem` takes in this representation.
    #[inline]
    pub fn size(&self, elem: Elem) -> usize {
        match elem {
            Elem::Byte => 1,
            Elem::Int(w) | Elem::Uint(w) => self.width(w),
            Elem::Float(n) => n as usize,
            Elem::LongDouble => self.long_double.storage_bytes as usize,
            Elem::Bool => self.bool_ as usize,
            Elem::Logical => self.logical as usize,
        }
    }

    fn width(&self, w: Width) -> usize {
        match w {
            Width::Fixed(n) => n as usize,
            Width::Long => self.long as usize,
            Width::Aint => self.aint as usize,
        }
    }

    /// Whether data in `self` needs no conversion to be read as `other`.
    #[inline]
    pub fn same_as(&self, other: &Repr) -> bool {
        self == other
    }

    /// Whether this representation's `long double` can be converted to and from others.
    pub fn long_double_known(&self) -> bool {
        ld_format(self.long_double).is_some()
    }
}

/// Why some elements of a conversion did not come out as their values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// A value did not fit its destination (e.g. a 64-bit `long` above 2^31 sent to a peer whose
    /// `long` has 32 bits); it holds its value truncated to the destination width.
    Overflow,
    /// A `long double` between formats stormpi cannot convert (e.g. IBM double-double and x87
    /// extended); the destination holds zero.
    LongDoubleFormat,
}

/// Checks that every element kind can be converted between `from` and `to`.
pub fn check(from: &Repr, to: &Repr) -> Result<(), Fault> {
    if from.long_double != to.long_double && !(from.long_double_known() && to.long_double_known()) {
        return Err(Fault::LongDoubleFormat);
    }
    Ok(())
}

/// Converts `n` elements of kind `elem` from `src` (in `from`) to `dst` (in `to`). The slices
/// hold exactly `n` elements in their representations. Every element is written; the result says
/// whether some did not fit (those hold their value truncated to the destination width).
pub fn convert(
    elem: Elem,
    from: &Repr,
    src: &[u8],
    to: &Repr,
    dst: &mut [u8],
    n: usize,
) -> Result<(), Fault> {
    let (ws, wd) = (from.size(elem), to.size(elem));
    debug_assert!(src.len() >= n * ws && dst.len() >= n * wd);
    let swap = from.endian != to.endian;
    if ws == wd && (!swap || ws == 1 || elem == Elem::Byte) && elem != Elem::LongDouble {
        let bytes = n * ws;
        dst[..bytes].copy_from_slice(&src[..bytes]);
        return Ok(());
    }
    match elem {
        Elem::Byte => {
            dst[..n].copy_from_slice(&src[..n]);
            Ok(())
        }
        Elem::Float(_) => {
            swap_each(ws, &src[..n * ws], &mut dst[..n * wd]);
            Ok(())
        }
        Elem::Int(_) | Elem::Uint(_) if ws == wd => {
            swap_each(ws, &src[..n * ws], &mut dst[..n * wd]);
            Ok(())
        }
        Elem::Int(_) | Elem::Uint(_) => {
            let signed = matches!(elem, Elem::Int(_));
            let mut ok = true;
            for i in 0..n {
                let v = read_int(&src[i * ws..(i + 1) * ws], from.endian, signed);
                ok &= fits(v, wd, signed);
                write_int(v, &mut dst[i * wd..(i + 1) * wd], to.endian);
            }
            if ok {
                Ok(())
            } else {
                Err(Fault::Overflow)
            }
        }
        Elem::Bool | Elem::Logical => {
            for i in 0..n {
                let truth = src[i * ws..(i + 1) * ws].iter().any(|&b| b != 0);
                write_int(truth as i128, &mut dst[i * wd..(i + 1) * wd], to.endian);
            }
            Ok(())
        }
        Elem::LongDouble => {
            let (fs, ft) = (ld_format(from.long_double), ld_format(to.long_double));
            for i in 0..n {
                let s = &src[i * ws..(i + 1) * ws];
                let d = &mut dst[i * wd..(i + 1) * wd];
                match (fs, ft) {
                    (Some(a), Some(b)) => {
                        let v = ld_decode(a, s, from.endian);
                        ld_encode(b, v, d, to.endian);
                    }
                    // Same unknown format on both sides: byte order is all that can differ.
                    _ if from.long_double == to.long_double => {
                        swap_or_copy(s, d, from.endian != to.endian)
                    }
                    _ => d.fill(0),
                }
            }
            match (fs, ft) {
                (None, _) | (_, None) if from.long_double != to.long_double && n > 0 => {
                    Err(Fault::LongDoubleFormat)
                }
                _ => Ok(()),
            }
        }
    }
}

fn swap_or_copy(s: &[u8], d: &mut [u8], swap: bool) {
    d.copy_from_slice(s);
    if swap {
        d.reverse();
    }
}

/// Byte-swaps every `w`-byte element of `src` into `dst`.
#[inline]
fn swap_each(w: usize, src: &[u8], dst: &mut [u8]) {
    // Whole 64-bit words, four at a time (what the compiler turns into the fastest loop here):
    // 2- and 4-byte elements are swapped inside the word by masks or a rotate.
    let head = match w {
        2 => swap_words(src, dst, |v| {
            let m = 0x00ff_00ff_00ff_00ff;
            ((v >> 8) & m) | ((v & m) << 8)
        }),
        4 => swap_words(src, dst, |v| v.swap_bytes().rotate_left(32)),
        8 => swap_words(src, dst, u64::swap_bytes),
        _ => 0,
    };
    let (src, dst) = (&src[head..], &mut dst[head..]);
    match w {
        2 => {
            for (d, s) in dst.chunks_exact_mut(2).zip(src.chunks_exact(2)) {
                d.copy_from_slice(&u16::from_ne_bytes([s[0], s[1]]).swap_bytes().to_ne_bytes());
            }
        }
        4 => {
            let (d, s) = (dst.as_chunks_mut::<4>().0, src.as_chunks::<4>().0);
            for (d, s) in d.iter_mut().zip(s) {
                *d = u32::from_ne_bytes(*s).swap_bytes().to_ne_bytes();
            }
        }
        8 => {
            let (d, s) = (dst.as_chunks_mut::<8>().0, src.as_chunks::<8>().0);
            for (d, s) in d.iter_mut().zip(s) {
                *d = u64::from_ne_bytes(*s).swap_bytes().to_ne_bytes();
            }
        }
        _ => {
            for (d, s) in dst.chunks_exact_mut(w).zip(src.chunks_exact(w)) {
                d.copy_from_slice(s);
                d.reverse();
            }
        }
    }
}

/// Applies `word` to every 64-bit word of the leading multiple of 32 bytes; returns its length.
#[inline(always)]
fn swap_words(src: &[u8], dst: &mut [u8], word: impl Fn(u64) -> u64) -> usize {
    let n = src.len().min(dst.len()) / 32 * 32;
    let (s, _) = src[..n].as_chunks::<32>();
    let (d, _) = dst[..n].as_chunks_mut::<32>();
    for (d, s) in d.iter_mut().zip(s) {
        for k in 0..4 {
            let mut x = [0u8; 8];
            x.copy_from_slice(&s[k * 8..k * 8 + 8]);
            d[k * 8..k * 8 + 8].copy_from_slice(&word(u64::from_ne_bytes(x)).to_ne_bytes());
        }
    }
    n
}

fn read_int(b: &[u8], endian: Endian, signed: bool) -> i128 {
    let mut v: u128 = 0;
    match endian {
        Endian::Big => b.iter().for_each(|&x| v = v << 8 | x as u128),
        Endian::Little => b.iter().rev().for_each(|&x| v = v << 8 | x as u128),
    }
    let bits = 8 * b.len() as u32;
    if signed && bits < 128 && v >> (bits - 1) & 1 == 1 {
        (v | !0u128 << bits) as i128
    } else {
        v as i128
    }
}

fn fits(v: i128, bytes: usize, signed: bool) -> bool {
    let bits = 8 * bytes as u32;
    if bits >= 128 {
        return true;
    }
    if signed {
        let half = 1i128 << (bits - 1);
        (-half..half).contains(&v)
    } else {
        (0..1i128 << bits).contains(&v)
    }
}

fn write_int(v: i128, d: &mut [u8], endian: Endian) {
    let bytes = (v as u128).to_le_bytes();
    let n = d.len();
    for (i, b) in d.iter_mut().enumerate() {
        *b = match endian {
            Endian::Little => bytes[i],
            Endian::Big => bytes[n - 1 - i],
        };
    }
}

/// The `long double` formats conversion knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LdFormat {
    /// IEEE binary64 (`long double` == `double`).
    Binary64,
    /// x87 80-bit extended, in 10 of 12 or 16 bytes of storage.
    X87,
    /// IEEE binary128.
    Binary128,
}

fn ld_format(ld: LongDouble) -> Option<LdFormat> {
    match (ld.exponent_bits, ld.mantissa_bits, ld.intel) {
        (11, 53, false) => Some(LdFormat::Binary64),
        (15, 64, true) => Some(LdFormat::X87),
        (15, 113, false) => Some(LdFormat::Binary128),
        _ => None,
    }
}

/// A floating-point value in a common form: sign, unbiased exponent class, 112-bit fraction
/// (the bits after the leading one, left-aligned).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ld {
    Zero {
        neg: bool,
    },
    Inf {
        neg: bool,
    },
    Nan {
        neg: bool,
        payload: u128,
    },
    /// `(-1)^neg * 1.frac * 2^exp`, with `frac` in the top 112 of 128 bits.
    Normal {
        neg: bool,
        exp: i32,
        frac: u128,
    },
}

fn ld_bits(s: &[u8], endian: Endian, bytes: usize) -> u128 {
    let mut v: u128 = 0;
    match endian {
        Endian::Big => s[..bytes].iter().for_each(|&x| v = v << 8 | x as u128),
        Endian::Little => s[..bytes]
            .iter()
            .rev()
            .for_each(|&x| v = v << 8 | x as u128),
    }
    v
}

/// Normalises a significand whose leading one is somewhere in `m` (bit `top` = value 1.0):
/// returns (exponent adjustment, fraction left-aligned to 112 bits).
fn normalise(m: u128, top: u32) -> (i32, u128) {
    let lead = 127 - m.leading_zeros();
    let frac = m & !(1u128 << lead);
    let frac = if lead >= 112 {
        frac >> (lead - 112)
    } else {
        frac << (112 - lead)
    };
    (lead as i32 - top as i32, frac)
}

fn ld_decode(f: LdFormat, s: &[u8], endian: Endian) -> Ld {
    match f {
        LdFormat::Binary64 => {
            let v = ld_bits(s, endian, 8) as u64;
            let neg = v >> 63 == 1;
            let e = (v >> 52 & 0x7ff) as i32;
            let m = (v & ((1 << 52) - 1)) as u128;
            match (e, m) {
                (0, 0) => Ld::Zero { neg },
                (0, m) => {
                    let (adj, frac) = normalise(m, 52);
                    Ld::Normal {
                        neg,
                        exp: -1022 + adj,
                        frac,
                    }
                }
                (0x7ff, 0) => Ld::Inf { neg },
                (0x7ff, m) => Ld::Nan {
                    neg,
                    payload: m << 60,
                },
                (e, m) => Ld::Normal {
                    neg,
                    exp: e - 1023,
                    frac: m << 60,
                },
            }
        }
        LdFormat::X87 => {
            // The 80 significant bits sit in the low-addressed 10 bytes (little-endian machines)
            // or the high ones (big-endian storage of the same value).
            let v = match endian {
                Endian::Little => ld_bits(s, endian, 10),
                Endian::Big => ld_bits(&s[s.len() - 10..], endian, 10),
            };
            let neg = v >> 79 & 1 == 1;
            let e = (v >> 64 & 0x7fff) as i32;
            let m = v & 0xffff_ffff_ffff_ffff;
            match (e, m) {
                (0, 0) => Ld::Zero { neg },
                (0, m) => {
                    let (adj, frac) = normalise(m, 63);
                    Ld::Normal {
                        neg,
                        exp: -16382 + adj,
                        frac,
                    }
                }
                // The explicit integer bit (63) is not part of the fraction.
                (0x7fff, m) if m & 0x7fff_ffff_ffff_ffff == 0 => Ld::Inf { neg },
                (0x7fff, m) => Ld::Nan {
                    neg,
                    payload: (m & 0x7fff_ffff_ffff_ffff) << 49,
                },
                (e, m) if m >> 63 == 0 => {
                    // Unnormal: treat by its value.
                    let (adj, frac) = normalise(m.max(1), 63);
                    Ld::Normal {
                        neg,
                        exp: e - 16383 + adj,
                        frac,
                    }
                }
                (e, m) => Ld::Normal {
                    neg,
                    exp: e - 16383,
                    frac: (m << 1 & 0xffff_ffff_ffff_ffff) << 48,
                },
            }
        }
        LdFormat::Binary128 => {
            let v = ld_bits(s, endian, 16);
            let neg = v >> 127 == 1;
            let e = (v >> 112 & 0x7fff) as i32;
            let m = v & ((1u128 << 112) - 1);
            match (e, m) {
                (0, 0) => Ld::Zero { neg },
                (0, m) => {
                    let (adj, frac) = normalise(m, 112);
                    Ld::Normal {
                        neg,
                        exp: -16382 + adj,
                        frac,
                    }
                }
                (0x7fff, 0) => Ld::Inf { neg },
                (0x7fff, m) => Ld::Nan { neg, payload: m },
                (e, m) => Ld::Normal {
                    neg,
                    exp: e - 16383,
                    frac: m,
                },
            }
        }
    }
}

fn put_bits(v: u128, d: &mut [u8], endian: Endian, bytes: usize) {
    let le = v.to_le_bytes();
    for i in 0..bytes {
        d[match endian {
            Endian::Little => i,
            Endian::Big => bytes - 1 - i,
        }] = le[i];
    }
}

/// Rounds a 112-bit fraction to `bits`, to nearest even; returns (fraction, carried into the
/// exponent).
fn round_frac(frac: u128, bits: u32) -> (u128, bool) {
    let drop = 112 - bits;
    if drop == 0 {
        return (frac, false);
    }
    let kept = frac >> drop;
    let rest = frac & ((1u128 << drop) - 1);
    let half = 1u128 << (drop - 1);
    let up = rest > half || (rest == half && kept & 1 == 1);
    let kept = kept + up as u128;
    if kept >> bits == 1 {
        (0, true)
    } else {
        (kept, false)
    }
}

fn ld_encode(f: LdFormat, v: Ld, d: &mut [u8], endian: Endian) {
    d.iter_mut().for_each(|b| *b = 0);
    let (exp_bits, frac_bits, explicit_one) = match f {
        LdFormat::Binary64 => (11u32, 52u32, false),
        LdFormat::X87 => (15, 63, true),
        LdFormat::Binary128 => (15, 112, false),
    };
    let bias = (1i32 << (exp_bits - 1)) - 1;
    let max_e = (1u128 << exp_bits) - 1;
    let (neg, e, m): (bool, u128, u128) = match v {
        Ld::Zero { neg } => (neg, 0, 0),
        Ld::Inf { neg } => (neg, max_e, if explicit_one { 1 << 63 } else { 0 }),
        Ld::Nan { neg, payload } => {
            let p = (payload >> (112 - frac_bits)).max(1);
            (neg, max_e, p | if explicit_one { 1 << 63 } else { 0 })
        }
        Ld::Normal { neg, exp, frac } => {
            let (mut frac, carry) = round_frac(frac, frac_bits);
            let exp = exp + carry as i32;
            let biased = exp + bias;
            if biased >= max_e as i32 {
                (neg, max_e, if explicit_one { 1 << 63 } else { 0 })
            } else if biased <= 0 {
                // Subnormal (or underflow to zero): shift the significand right.
                let shift = (1 - biased) as u32;
                let sig = (1u128 << frac_bits) | frac;
                frac = if shift > frac_bits + 1 {
                    0
                } else {
                    sig >> shift
                };
                (neg, 0, frac)
            } else {
                (
                    neg,
                    biased as u128,
                    frac | if explicit_one { 1 << 63 } else { 0 },
                )
            }
        }
    };
    match f {
        LdFormat::Binary64 => {
            let bits = (neg as u128) << 63 | e << 52 | m;
            put_bits(bits, d, endian, 8);
        }
        LdFormat::X87 => {
            let bits = (neg as u128) << 79 | e << 64 | m;
            match endian {
                Endian::Little => put_bits(bits, d, endian, 10),
                Endian::Big => {
                    let n = d.len();
                    put_bits(bits, &mut d[n - 10..], endian, 10);
                }
            }
        }
        LdFormat::Binary128 => {
            let bits = (neg as u128) << 127 | e << 112 | m;
            put_bits(bits, d, endian, 16);
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    #[test]
    fn swapping_whole_words_matches_swapping_each_element() {
        // Lengths around the 32-byte blocks of the word loop, every element width.
        for w in [2usize, 4, 8, 16] {
            for n in [0usize, 1, 3, 4, 5, 15, 16, 17, 100] {
                let src: Vec<u8> = (0..n * w).map(|i| (i * 31 + 7) as u8).collect();
                let mut dst = vec![0u8; n * w];
                swap_each(w, &src, &mut dst);
                for (d, s) in dst.chunks(w).zip(src.chunks(w)) {
                    let mut want = s.to_vec();
                    want.reverse();
                    assert_eq!(d, &want[..], "width {w}, {n} elements");
                }
            }
        }
    }

    const BIG64: Repr = Repr {
        endian: Endian::Big,
        ..Repr::NATIVE
    };
    const LE32: Repr = Repr {
        endian: Endian::Little,
        long: 4,
        aint: 4,
        ..Repr::NATIVE
    };

    fn conv(
        elem: Elem,
        from: &Repr,
        src: &[u8],
        to: &Repr,
        n: usize,
    ) -> (std::vec::Vec<u8>, Result<(), Fault>) {
        let mut out = vec![0u8; n * to.size(elem)];
        let r = convert(elem, from, src, to, &mut out, n);
        (out, r)
    }

    #[test]
    fn integers_swap_and_change_width() {
        let le = Repr {
            endian: Endian::Little,
            long: 8,
            ..Repr::NATIVE
        };
        let src = [0x01u8, 0x02, 0x03, 0x04];
        assert_eq!(
            conv(Elem::Int(Width::Fixed(4)), &le, &src, &BIG64, 1).0,
            [4, 3, 2, 1]
        );
        // -2 as a 32-bit little-endian long into a 64-bit big-endian long.
        let (out, r) = conv(
            Elem::Int(Width::Long),
            &LE32,
            &(-2i32).to_le_bytes(),
            &BIG64,
            1,
        );
        assert_eq!((out, r), ((-2i64).to_be_bytes().to_vec(), Ok(())));
        // 2^40 as a 64-bit long into a 32-bit long: reported.
        let (_, r) = conv(
            Elem::Int(Width::Long),
            &le,
            &(1i64 << 40).to_le_bytes(),
            &LE32,
            1,
        );
        assert_eq!(r, Err(Fault::Overflow));
        // Unsigned 0xffff_ffff fits 32 bits; as signed it would not.
        let src = 0xffff_ffffu64.to_le_bytes();
        assert_eq!(conv(Elem::Uint(Width::Long), &le, &src, &LE32, 1).1, Ok(()));
        assert_eq!(
            conv(Elem::Int(Width::Long), &le, &src, &LE32, 1).1,
            Err(Fault::Overflow)
        );
    }

    #[test]
    fn floats_swap_and_booleans_keep_truth() {
        let x = 1.5f64;
        let (out, _) = conv(Elem::Float(8), &Repr::NATIVE, &x.to_ne_bytes(), &BIG64, 1);
        assert_eq!(out, x.to_be_bytes());
        let wide = Repr {
            logical: 1,
            ..Repr::NATIVE
        };
        let (out, _) = conv(
            Elem::Logical,
            &Repr {
                logical: 4,
                ..Repr::NATIVE
            },
            &[0, 0, 2, 0, 0, 0, 0, 0],
            &wide,
            2,
        );
        assert_eq!(out, [1, 0]);
    }

    fn ld_roundtrip(f: LdFormat, v: Ld) -> Ld {
        let mut b = [0u8; 16];
        ld_encode(f, v, &mut b, Endian::Little);
        ld_decode(f, &b, Endian::Little)
    }

    #[test]
    fn long_double_formats_convert() {
        // 1.5 in binary64 -> x87 -> binary128 -> binary64.
        let d = ld_decode(LdFormat::Binary64, &1.5f64.to_le_bytes(), Endian::Little);
        assert_eq!(
            d,
            Ld::Normal {
                neg: false,
                exp: 0,
                frac: 1 << 111
            }
        );
        for f in [LdFormat::Binary64, LdFormat::X87, LdFormat::Binary128] {
            assert_eq!(ld_roundtrip(f, d), d, "{f:?}");
        }
        // x87 bytes of -3.0: sign 1, exponent 16384, significand 0xc000...
        let mut x87 = [0u8; 16];
        x87[7] = 0xc0;
        x87[8] = 0x00;
        x87[9] = 0xc0;
        assert_eq!(
            ld_decode(LdFormat::X87, &x87, Endian::Little),
            Ld::Normal {
                neg: true,
                exp: 1,
                frac: 1 << 111
            }
        );
        // A value only binary128 can hold rounds to nearest in x87.
        let fine = Ld::Normal {
            neg: false,
            exp: 0,
            frac: 1 | 1 << 60,
        };
        assert_eq!(
            ld_roundtrip(LdFormat::X87, fine),
            Ld::Normal {
                neg: false,
                exp: 0,
                frac: 1 << 60
            }
        );
        assert_eq!(ld_roundtrip(LdFormat::Binary128, fine), fine);
        // Specials.
        for v in [Ld::Zero { neg: true }, Ld::Inf { neg: false }] {
            for f in [LdFormat::Binary64, LdFormat::X87, LdFormat::Binary128] {
                assert_eq!(ld_roundtrip(f, v), v, "{f:?} {v:?}");
            }
        }
        assert!(matches!(
            ld_roundtrip(
                LdFormat::X87,
                Ld::Nan {
                    neg: false,
                    payload: 1 << 100
                }
            ),
            Ld::Nan { .. }
        ));
        // Overflow into binary64 becomes infinity; a tiny value becomes subnormal or zero.
        let huge = Ld::Normal {
            neg: false,
            exp: 5000,
            frac: 0,
        };
        assert_eq!(
            ld_roundtrip(LdFormat::Binary64, huge),
            Ld::Inf { neg: false }
        );
        let tiny = Ld::Normal {
            neg: false,
            exp: -1030,
            frac: 0,
        };
        assert_eq!(
            ld_roundtrip(LdFormat::Binary64, tiny),
            tiny,
            "subnormal keeps an exact power of two"
        );
    }

    #[test]
    fn long_double_between_real_layouts() {
        // x86_64 (x87 in 16 bytes, little-endian) to s390x (binary128, big-endian) and back.
        let x86 = Repr {
            endian: Endian::Little,
            long_double: LongDouble {
                storage_bytes: 16,
                exponent_bits: 15,
                mantissa_bits: 64,
                intel: true,
            },
            ..Repr::NATIVE
        };
        let s390 = Repr {
            endian: Endian::Big,
            long_double: QUAD,
            ..Repr::NATIVE
        };
        let mut src = [0u8; 16];
        ld_encode(
            LdFormat::X87,
            Ld::Normal {
                neg: false,
                exp: 3,
                frac: 0x5 << 108,
            },
            &mut src,
            Endian::Little,
        );
        let (mid, _) = conv(Elem::LongDouble, &x86, &src, &s390, 1);
        let (back, _) = conv(Elem::LongDouble, &s390, &mid, &x86, 1);
        assert_eq!(&back[..10], &src[..10]);
        assert!(check(&x86, &s390).is_ok());
        let ibm = Repr {
            long_double: LongDouble {
                storage_bytes: 16,
                exponent_bits: 11,
                mantissa_bits: 106,
                intel: false,
            },
            ..s390
        };
        assert_eq!(check(&x86, &ibm), Err(Fault::LongDoubleFormat));
    }
}
