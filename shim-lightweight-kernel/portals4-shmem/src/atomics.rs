//! Portals atomic operations on a target buffer. The software NI runs them inside the target
//! process, one message at a time, so they are atomic with respect to every other Portals
//! operation on the interface (the guarantee the specification makes).

use crate::types::*;

/// Bytes of one element of `dt`, for the datatypes implemented here.
pub fn elem_size(dt: ptl_datatype_t) -> Option<usize> {
    Some(match dt {
        PTL_INT8_T | PTL_UINT8_T => 1,
        PTL_INT16_T | PTL_UINT16_T => 2,
        PTL_INT32_T | PTL_UINT32_T | PTL_FLOAT => 4,
        PTL_INT64_T | PTL_UINT64_T | PTL_DOUBLE => 8,
        _ => return None,
    })
}

/// Whether `op` takes an operand (the compare-and-swap family and swap under mask).
pub fn needs_operand(op: ptl_op_t) -> bool {
    (PTL_CSWAP..=PTL_MSWAP).contains(&op)
}

macro_rules! int_ops {
    ($t:ty, $op:expr, $tgt:expr, $src:expr, $opnd:expr) => {{
        let (t, s, c): ($t, $t, $t) = ($tgt, $src, $opnd);
        match $op {
            PTL_MIN => Some(t.min(s)),
            PTL_MAX => Some(t.max(s)),
            PTL_SUM => Some(t.wrapping_add(s)),
            PTL_PROD => Some(t.wrapping_mul(s)),
            PTL_LOR => Some(((t != 0) || (s != 0)) as $t),
            PTL_LAND => Some(((t != 0) && (s != 0)) as $t),
            PTL_BOR => Some(t | s),
            PTL_BAND => Some(t & s),
            PTL_LXOR => Some(((t != 0) ^ (s != 0)) as $t),
            PTL_BXOR => Some(t ^ s),
            PTL_SWAP => Some(s),
            PTL_CSWAP => Some(if c == t { s } else { t }),
            PTL_CSWAP_NE => Some(if c != t { s } else { t }),
            PTL_CSWAP_LE => Some(if c <= t { s } else { t }),
            PTL_CSWAP_LT => Some(if c < t { s } else { t }),
            PTL_CSWAP_GE => Some(if c >= t { s } else { t }),
            PTL_CSWAP_GT => Some(if c > t { s } else { t }),
            PTL_MSWAP => Some((t & !c) | (s & c)),
            _ => None,
        }
    }};
}

macro_rules! float_ops {
    ($t:ty, $op:expr, $tgt:expr, $src:expr, $opnd:expr) => {{
        let (t, s, c): ($t, $t, $t) = ($tgt, $src, $opnd);
        match $op {
            PTL_MIN => Some(t.min(s)),
            PTL_MAX => Some(t.max(s)),
            PTL_SUM => Some(t + s),
            PTL_PROD => Some(t * s),
            PTL_SWAP => Some(s),
            PTL_CSWAP => Some(if c == t { s } else { t }),
            PTL_CSWAP_NE => Some(if c != t { s } else { t }),
            PTL_CSWAP_LE => Some(if c <= t { s } else { t }),
            PTL_CSWAP_LT => Some(if c < t { s } else { t }),
            PTL_CSWAP_GE => Some(if c >= t { s } else { t }),
            PTL_CSWAP_GT => Some(if c > t { s } else { t }),
            _ => None,
        }
    }};
}

/// Whether `op` is defined on `dt`.
pub fn valid(op: ptl_op_t, dt: ptl_datatype_t) -> bool {
    match elem_size(dt) {
        Some(n) => {
            let mut t = [0u8; 8];
            apply(op, dt, &mut t[..n], &[0u8; 8][..n], &[0u8; 8]).is_ok()
        }
        None => false,
    }
}

/// An operation or datatype the software NI does not implement, or lengths that do not fit.
#[derive(Debug, PartialEq, Eq)]
pub struct Unsupported;

/// The first `N` bytes of `b`, zero-padded when it is shorter (the callers pass chunks of
/// exactly the element size).
fn bytes_of<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    let n = b.len().min(N);
    a[..n].copy_from_slice(&b[..n]);
    a
}

/// `target[i] = op(target[i], src[i])` element by element (`operand`: the comparand or mask).
pub fn apply(
    op: ptl_op_t,
    dt: ptl_datatype_t,
    target: &mut [u8],
    src: &[u8],
    operand: &[u8],
) -> Result<(), Unsupported> {
    let size = elem_size(dt).ok_or(Unsupported)?;
    if target.len() != src.len() || !target.len().is_multiple_of(size) {
        return Err(Unsupported);
    }
    macro_rules! each {
        ($t:ty, $ops:ident) => {{
            let c = if operand.len() >= size {
                <$t>::from_ne_bytes(bytes_of(operand))
            } else {
                <$t>::from_ne_bytes([0u8; std::mem::size_of::<$t>()])
            };
            for (tc, sc) in target.chunks_exact_mut(size).zip(src.chunks_exact(size)) {
                let t = <$t>::from_ne_bytes(bytes_of(tc));
                let s = <$t>::from_ne_bytes(bytes_of(sc));
                let r = $ops!($t, op, t, s, c).ok_or(Unsupported)?;
                tc.copy_from_slice(&r.to_ne_bytes());
            }
            Ok(())
        }};
    }
    match dt {
        PTL_INT8_T => each!(i8, int_ops),
        PTL_UINT8_T => each!(u8, int_ops),
        PTL_INT16_T => each!(i16, int_ops),
        PTL_UINT16_T => each!(u16, int_ops),
        PTL_INT32_T => each!(i32, int_ops),
        PTL_UINT32_T => each!(u32, int_ops),
        PTL_INT64_T => each!(i64, int_ops),
        PTL_UINT64_T => each!(u64, int_ops),
        PTL_FLOAT => each!(f32, float_ops),
        PTL_DOUBLE => each!(f64, float_ops),
        _ => Err(Unsupported),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lwk_atomic_sum_min_cswap() {
        let mut t: Vec<u8> = [5i32, -3].iter().flat_map(|v| v.to_ne_bytes()).collect();
        let s: Vec<u8> = [2i32, 10].iter().flat_map(|v| v.to_ne_bytes()).collect();
        apply(PTL_SUM, PTL_INT32_T, &mut t, &s, &[]).unwrap();
        assert_eq!(t[..4], 7i32.to_ne_bytes());
        assert_eq!(t[4..], 7i32.to_ne_bytes());
        let mut m = 4.0f64.to_ne_bytes().to_vec();
        apply(PTL_MIN, PTL_DOUBLE, &mut m, &1.5f64.to_ne_bytes(), &[]).unwrap();
        assert_eq!(m, 1.5f64.to_ne_bytes());
        let mut c = 9u64.to_ne_bytes().to_vec();
        apply(
            PTL_CSWAP,
            PTL_UINT64_T,
            &mut c,
            &1u64.to_ne_bytes(),
            &8u64.to_ne_bytes(),
        )
        .unwrap();
        assert_eq!(c, 9u64.to_ne_bytes());
        apply(
            PTL_CSWAP,
            PTL_UINT64_T,
            &mut c,
            &1u64.to_ne_bytes(),
            &9u64.to_ne_bytes(),
        )
        .unwrap();
        assert_eq!(c, 1u64.to_ne_bytes());
        assert!(!valid(PTL_BXOR, PTL_DOUBLE));
        assert!(valid(PTL_BXOR, PTL_UINT16_T));
        assert!(!valid(PTL_SUM, PTL_LONG_DOUBLE));
    }
}
