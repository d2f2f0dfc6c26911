//! Bulk data movement of shared-window operations: long copies (puts and gets) and the sum of
//! runs of doubles (the accumulate codes make most), by 256-bit vector loops where the CPU and
//! the operating system have AVX, by the C library otherwise.
//!
//! Why an own copy loop: glibc's `memcpy` moves blocks from 2 KiB up by `rep movsb`, which on
//! this machine's AMD EPYC runs 25-50 times slower when the destination lies 1-31 bytes past the
//! source modulo 4 KiB (a get from a page-aligned window part into a `malloc`ed buffer, whose
//! data starts 16 bytes into a page, is that case), and is ~10% slower than a vector loop
//! (8-256 KiB) when the source is not aligned. A loop of unaligned 32-byte loads and aligned
//! 32-byte stores runs at the cache's speed whatever the distance, with one call per copy
//! rather than a call per chunk. Without AVX (or on a target built without SSE, the node
//! build's no-OS one) a long copy goes as `memcpy` calls of [`CHUNK`] bytes, under glibc's
//! `rep movsb` threshold.
//!
//! The sum adds element by element as the scalar loop does (one IEEE addition per element, no
//! reassociation), so the result is bit-identical; only the width of the instruction changes.

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
use core::sync::atomic::{AtomicU8, Ordering};

/// Bytes per `memcpy` of a long copy without AVX: under glibc's smallest threshold for copying
/// by `rep movsb` (2112 bytes with fast short `rep movsb`, more otherwise).
pub(super) const CHUNK: usize = 2016;

/// Copies `len` bytes from `from` to `to`, which do not overlap; meant for `len` above
/// [`CHUNK`] (shorter copies are one `memcpy` call, which serves them well).
///
/// # Safety
/// `from..+len` is readable, `to..+len` writable, and the two ranges are disjoint.
#[inline]
pub(super) unsafe fn copy_apart(from: *const u8, to: *mut u8, len: usize) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if len >= 64 && has_avx() {
        // SAFETY: the caller's contract; AVX is there (`has_avx`), and `len >= 64`.
        unsafe { copy_avx(from, to, len) };
        return;
    }
    let mut done = 0;
    while done < len {
        // An opaque length per call: the compiler would otherwise fold the loop back into one
        // `memcpy` of the whole (which is the slow case).
        let n = core::hint::black_box(CHUNK.min(len - done));
        // SAFETY: `done + n <= len`, within both ranges, which do not overlap (the contract).
        unsafe { core::ptr::copy_nonoverlapping(from.add(done), to.add(done), n) };
        done += n;
    }
}

/// Adds the doubles of `data` into those of `target` (native byte order, any alignment), as
/// `MPI_SUM` on `MPI_DOUBLE` does. Both are a whole number of doubles, of the same length.
pub fn add_f64(target: &mut [u8], data: &[u8]) {
    debug_assert_eq!(target.len(), data.len());
    let n = target.len().min(data.len()) / 8;
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if n >= 4 && has_avx() {
        // SAFETY: `n` doubles lie in each slice (borrowed apart, so disjoint); AVX is there.
        unsafe { add_f64_avx(target.as_mut_ptr(), data.as_ptr(), n) };
        return;
    }
    for (t, d) in target[..8 * n]
        .chunks_exact_mut(8)
        .zip(data[..8 * n].chunks_exact(8))
    {
        let mut a = [0u8; 8];
        a.copy_from_slice(t);
        let mut b = [0u8; 8];
        b.copy_from_slice(d);
        t.copy_from_slice(&(f64::from_ne_bytes(a) + f64::from_ne_bytes(b)).to_ne_bytes());
    }
}

/// Whether this CPU has AVX and the operating system saves its registers (checked once).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn has_avx() -> bool {
    /// 0 not asked yet, 1 no, 2 yes.
    static AVX: AtomicU8 = AtomicU8::new(0);
    match AVX.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            let yes = detect_avx();
            AVX.store(if yes { 2 } else { 1 }, Ordering::Relaxed);
            yes
        }
    }
}

/// CPUID leaf 1's AVX and OSXSAVE bits, then XCR0's SSE and AVX state bits (the OS saves the
/// upper halves of the registers on a context switch).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[cold]
fn detect_avx() -> bool {
    use core::arch::x86_64::__cpuid;
    let leaf1 = __cpuid(1);
    let osxsave = leaf1.ecx & (1 << 27) != 0;
    let avx = leaf1.ecx & (1 << 28) != 0;
    if !(osxsave && avx) {
        return false;
    }
    // SAFETY: OSXSAVE set means XGETBV is available and XCR0 readable at any privilege.
    let xcr0 = unsafe { xcr0() };
    xcr0 & 0b110 == 0b110
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    core::arch::x86_64::_xgetbv(0)
}

/// The AVX copy: the first 32 bytes unaligned, then aligned stores of 128 and 32 bytes from
/// the destination's next 32-byte boundary, the last 32 bytes unaligned (overlapping stores of
/// the same bytes, harmless as the ranges are disjoint).
///
/// # Safety
/// As for [`copy_apart`], with `len >= 64` and AVX available.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "avx")]
unsafe fn copy_avx(from: *const u8, to: *mut u8, len: usize) {
    use core::arch::x86_64::{__m256i, _mm256_loadu_si256};
    use core::arch::x86_64::{_mm256_store_si256, _mm256_storeu_si256};
    // SAFETY: every access is within `from..+len` or `to..+len` (offsets below `len`, 32-byte
    // accesses ending at most at `len`); stores through `d` are 32-byte aligned by
    // construction of `skip`.
    unsafe {
        let head = _mm256_loadu_si256(from.cast::<__m256i>());
        let tail = _mm256_loadu_si256(from.add(len - 32).cast::<__m256i>());
        let skip = 32 - (to as usize & 31);
        let mut s = from.add(skip);
        let mut d = to.add(skip);
        let mut left = len - skip;
        while left >= 128 {
            let x0 = _mm256_loadu_si256(s.cast::<__m256i>());
            let x1 = _mm256_loadu_si256(s.add(32).cast::<__m256i>());
            let x2 = _mm256_loadu_si256(s.add(64).cast::<__m256i>());
            let x3 = _mm256_loadu_si256(s.add(96).cast::<__m256i>());
            _mm256_store_si256(d.cast::<__m256i>(), x0);
            _mm256_store_si256(d.add(32).cast::<__m256i>(), x1);
            _mm256_store_si256(d.add(64).cast::<__m256i>(), x2);
            _mm256_store_si256(d.add(96).cast::<__m256i>(), x3);
            s = s.add(128);
            d = d.add(128);
            left -= 128;
        }
        while left >= 32 {
            _mm256_store_si256(d.cast::<__m256i>(), _mm256_loadu_si256(s.cast::<__m256i>()));
            s = s.add(32);
            d = d.add(32);
            left -= 32;
        }
        _mm256_storeu_si256(to.cast::<__m256i>(), head);
        _mm256_storeu_si256(to.add(len - 32).cast::<__m256i>(), tail);
    }
}

/// The AVX sum of `n` doubles of `data` into `target`, four per instruction, the rest one by
/// one.
///
/// # Safety
/// `target..+8n` writable, `data..+8n` readable, disjoint; AVX available.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "avx")]
unsafe fn add_f64_avx(target: *mut u8, data: *const u8, n: usize) {
    use core::arch::x86_64::{_mm256_add_pd, _mm256_loadu_pd, _mm256_storeu_pd};
    // SAFETY: every access is of doubles `i..i+4` (or `i`) with `i + 4 <= n` (or `i < n`),
    // inside both ranges; unaligned forms throughout.
    unsafe {
        let t = target.cast::<f64>();
        let d = data.cast::<f64>();
        let mut i = 0;
        while i + 8 <= n {
            let a0 = _mm256_add_pd(_mm256_loadu_pd(t.add(i)), _mm256_loadu_pd(d.add(i)));
            let a1 = _mm256_add_pd(_mm256_loadu_pd(t.add(i + 4)), _mm256_loadu_pd(d.add(i + 4)));
            _mm256_storeu_pd(t.add(i), a0);
            _mm256_storeu_pd(t.add(i + 4), a1);
            i += 8;
        }
        if i + 4 <= n {
            let a = _mm256_add_pd(_mm256_loadu_pd(t.add(i)), _mm256_loadu_pd(d.add(i)));
            _mm256_storeu_pd(t.add(i), a);
            i += 4;
        }
        while i < n {
            t.add(i)
                .write_unaligned(t.add(i).read_unaligned() + d.add(i).read_unaligned());
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    #[test]
    fn copies_match_the_source_at_every_length_and_alignment_near_the_edges() {
        let src: Vec<u8> = (0..9000).map(|i| (i * 7 % 251) as u8).collect();
        for len in [64, 65, 95, 96, 127, 128, 129, 255, 2017, 4096, 4133, 8192] {
            for from_off in [0usize, 1, 16, 31] {
                for to_off in [0usize, 1, 16, 31, 32] {
                    let mut dst = std::vec![0xaau8; len + 80];
                    // SAFETY: `src` holds `from_off + len` bytes, `dst` `to_off + len`; apart.
                    unsafe {
                        copy_apart(
                            src.as_ptr().add(from_off),
                            dst.as_mut_ptr().add(to_off),
                            len,
                        )
                    };
                    assert!(
                        dst[to_off..to_off + len] == src[from_off..from_off + len],
                        "copy of {len} bytes from +{from_off} to +{to_off}"
                    );
                    assert!(dst[..to_off].iter().all(|&b| b == 0xaa), "bytes before");
                    assert!(
                        dst[to_off + len..].iter().all(|&b| b == 0xaa),
                        "bytes after"
                    );
                }
            }
        }
    }

    #[test]
    fn sums_of_doubles_equal_the_scalar_sums_bit_for_bit() {
        for n in 0..40usize {
            for off in [0usize, 3] {
                let t: Vec<f64> = (0..n).map(|i| 0.1 * i as f64 - 1.7).collect();
                let d: Vec<f64> = (0..n).map(|i| 1e-3 / (i as f64 + 0.3)).collect();
                let mut tb = std::vec![0u8; off];
                tb.extend(t.iter().flat_map(|x| x.to_ne_bytes()));
                let db: Vec<u8> = d.iter().flat_map(|x| x.to_ne_bytes()).collect();
                add_f64(&mut tb[off..], &db);
                for i in 0..n {
                    let got =
                        f64::from_ne_bytes(tb[off + 8 * i..off + 8 * i + 8].try_into().unwrap());
                    assert_eq!(got.to_bits(), (t[i] + d[i]).to_bits(), "element {i} of {n}");
                }
            }
        }
    }
}
