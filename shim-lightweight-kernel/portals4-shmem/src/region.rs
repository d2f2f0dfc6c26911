//! User memory that an MD or an entry describes: one contiguous range, or a scatter/gather list
//! (`PTL_IOVEC`, copied at bind/append time as the specification allows). Offsets address the
//! region as if it were contiguous.

use crate::types::ptl_iovec_t;

/// A memory region of the user's.
#[derive(Clone, Debug)]
pub enum Region {
    Contig {
        ptr: *mut u8,
        len: u64,
    },
    Iov {
        segs: Box<[(*mut u8, u64)]>,
        len: u64,
    },
}

// SAFETY: a region only names memory; the user keeps it valid while Portals owns it.
unsafe impl Send for Region {}

impl Region {
    /// # Safety
    /// With `iovec`, `start` must point to `length` valid `ptl_iovec_t`s.
    #[inline]
    pub unsafe fn new(start: *mut u8, length: u64, iovec: bool) -> Region {
        if !iovec {
            return Region::Contig {
                ptr: start,
                len: length,
            };
        }
        Self::from_iovecs(start as *const ptl_iovec_t, length as usize)
    }

    /// A scatter/gather region from `n` iovecs (copied; empty ones left out).
    ///
    /// # Safety
    /// `v` must point to `n` valid `ptl_iovec_t`s.
    #[inline(never)]
    unsafe fn from_iovecs(v: *const ptl_iovec_t, n: usize) -> Region {
        let v = std::slice::from_raw_parts(v, n);
        let segs: Box<[(*mut u8, u64)]> = v
            .iter()
            .filter(|s| s.iov_len > 0)
            .map(|s| (s.iov_base as *mut u8, s.iov_len))
            .collect();
        let len = segs.iter().map(|s| s.1).sum();
        Region::Iov { segs, len }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> u64 {
        match self {
            Region::Contig { len, .. } | Region::Iov { len, .. } => *len,
        }
    }

    /// The address of byte `off` (for events' `start`), or the end of the region.
    pub fn addr_at(&self, off: u64) -> *mut u8 {
        match self {
            Region::Contig { ptr, .. } => ptr.wrapping_add(off as usize),
            Region::Iov { segs, .. } => {
                let mut o = off;
                for &(p, l) in segs.iter() {
                    if o < l {
                        return p.wrapping_add(o as usize);
                    }
                    o -= l;
                }
                segs.last()
                    .map(|&(p, l)| p.wrapping_add(l as usize))
                    .unwrap_or(std::ptr::null_mut())
            }
        }
    }

    /// The start address when the region is one contiguous range.
    pub fn contig(&self) -> Option<*mut u8> {
        match self {
            Region::Contig { ptr, .. } => Some(*ptr),
            Region::Iov { .. } => None,
        }
    }

    /// Calls `f(address, bytes)` for the pieces of `[off, off + n)`.
    fn pieces(&self, off: u64, n: u64, mut f: impl FnMut(*mut u8, usize)) {
        match self {
            Region::Contig { ptr, .. } => {
                if n > 0 {
                    f(ptr.wrapping_add(off as usize), n as usize)
                }
            }
            Region::Iov { segs, .. } => {
                let (mut o, mut left) = (off, n);
                for &(p, l) in segs.iter() {
                    if left == 0 {
                        break;
                    }
                    if o >= l {
                        o -= l;
                        continue;
                    }
                    let take = (l - o).min(left);
                    f(p.wrapping_add(o as usize), take as usize);
                    left -= take;
                    o = 0;
                }
            }
        }
    }

    /// Copies `n` bytes from `src` into the region at `off`.
    ///
    /// # Safety
    /// The region's memory must be valid and `[off, off + n)` inside it; `src` readable.
    pub unsafe fn write_at(&self, off: u64, src: *const u8, n: u64) {
        let mut s = src;
        self.pieces(off, n, |d, l| {
            std::ptr::copy_nonoverlapping(s, d, l);
            s = s.add(l);
        });
    }

    /// Copies `n` bytes of the region at `off` to `dst`.
    ///
    /// # Safety
    /// As [`Region::write_at`], with `dst` writable.
    pub unsafe fn read_at(&self, off: u64, dst: *mut u8, n: u64) {
        let mut d = dst;
        self.pieces(off, n, |s, l| {
            std::ptr::copy_nonoverlapping(s, d, l);
            d = d.add(l);
        });
    }

    /// The pieces of `[off, off + n)` as `iovec`s (for cross-memory attach).
    pub fn iovecs(&self, off: u64, n: u64) -> Vec<libc::iovec> {
        let mut v = Vec::new();
        self.pieces(off, n, |p, l| {
            v.push(libc::iovec {
                iov_base: p.cast(),
                iov_len: l,
            })
        });
        v
    }
}

/// Moves `n` bytes between our region and another process's contiguous buffer at `remote`.
/// `read`: from the remote into the region; else from the region to the remote. `false` on
/// failure (the process is gone, or the kernel refuses).
pub fn cma(pid: libc::pid_t, region: &Region, off: u64, remote: u64, n: u64, read: bool) -> bool {
    let local = region.iovecs(off, n);
    let mut done: u64 = 0;
    let mut li = 0usize;
    let mut lskip = 0usize;
    while done < n {
        // Build the remaining local vector (at most IOV_MAX pieces per call).
        let mut lv: Vec<libc::iovec> = Vec::with_capacity((local.len() - li).min(1024));
        for (k, v) in local[li..].iter().enumerate().take(1024) {
            let skip = if k == 0 { lskip } else { 0 };
            lv.push(libc::iovec {
                iov_base: (v.iov_base as *mut u8).wrapping_add(skip).cast(),
                iov_len: v.iov_len - skip,
            });
        }
        let want: usize = lv.iter().map(|v| v.iov_len).sum();
        let rv = libc::iovec {
            // (A peer's address: the kernel checks it; wrapping, it cannot panic here.)
            iov_base: (remote as usize).wrapping_add(done as usize) as *mut libc::c_void,
            iov_len: want,
        };
        // SAFETY: local iovecs describe our live region; the remote side is checked by the
        // kernel.
        let got = unsafe {
            if read {
                libc::process_vm_readv(pid, lv.as_ptr(), lv.len() as _, &rv, 1, 0)
            } else {
                libc::process_vm_writev(pid, lv.as_ptr(), lv.len() as _, &rv, 1, 0)
            }
        };
        if got <= 0 {
            return false;
        }
        let mut got = got as usize;
        done += got as u64;
        while got > 0 && li < local.len() {
            let avail = local[li].iov_len - lskip;
            if got >= avail {
                got -= avail;
                li += 1;
                lskip = 0;
            } else {
                lskip += got;
                got = 0;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lwk_region_iovec_copies() {
        let mut a = [0u8; 3];
        let mut b = [0u8; 5];
        let v = [
            ptl_iovec_t {
                iov_base: a.as_mut_ptr().cast(),
                iov_len: 3,
            },
            ptl_iovec_t {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: 5,
            },
        ];
        let r = unsafe { Region::new(v.as_ptr() as *mut u8, 2, true) };
        assert_eq!(r.len(), 8);
        let src = [1u8, 2, 3, 4, 5, 6];
        unsafe { r.write_at(1, src.as_ptr(), 6) };
        assert_eq!(a, [0, 1, 2]);
        assert_eq!(b, [3, 4, 5, 6, 0]);
        let mut out = [0u8; 4];
        unsafe { r.read_at(2, out.as_mut_ptr(), 4) };
        assert_eq!(out, [2, 3, 4, 5]);
        assert_eq!(r.addr_at(4), b.as_mut_ptr().wrapping_add(1));
        assert_eq!(r.iovecs(2, 4).len(), 2);
    }
}
