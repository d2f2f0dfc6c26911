//! The page frames behind a registered region, so the device can tell a region still backed by
//! the pages it registered from one whose memory was unmapped (or `MADV_DONTNEED`ed) and mapped
//! again at the same address.
//!
//! An adapter pins the pages at `ibv_reg_mr` and keeps moving data to and from *those* pages,
//! whatever the process maps at the address afterwards: a registration cache that misses an
//! unmap makes the adapter read stale data or write where nobody looks. The device has no pin;
//! it faults the region in at registration (writable where the mapping allows, so a copy-on-write
//! zero page is not what gets recorded) and records the frame numbers from
//! `/proc/self/pagemap`; every later RDMA read or write of the region compares the frames of the
//! pages it touches.
//! A change is a stale registration, failed as a protection error, so such a bug fails loudly.
//!
//! The frame numbers read as zero without `CAP_SYS_ADMIN`: then nothing is recorded and regions
//! are not checked (`STORMPI_VERBS_CHECK_FRAMES=0` turns checking off too). The kernel may move
//! an unpinned page (swap, compaction, huge-page collapse); on a test machine that is rare, and
//! it would show as a false stale registration.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

const PAGE: u64 = 4096;
/// Bits 0-54 of a pagemap entry: the frame number of a present page.
const PFN_MASK: u64 = (1 << 55) - 1;
const PRESENT: u64 = 1 << 63;

/// `/proc/self/pagemap`, when it gives frame numbers and checking is on.
fn pagemap() -> Option<&'static File> {
    static MAP: OnceLock<Option<File>> = OnceLock::new();
    MAP.get_or_init(|| {
        if std::env::var("STORMPI_VERBS_CHECK_FRAMES").is_ok_and(|v| v.trim() == "0") {
            return None;
        }
        let f = File::open("/proc/self/pagemap").ok()?;
        // Frame numbers are visible only with CAP_SYS_ADMIN: probe a page of our own.
        let probe = Box::new([1u8; PAGE as usize]);
        let at = probe.as_ptr() as u64;
        let mut e = [0u8; 8];
        f.read_exact_at(&mut e, at / PAGE * 8).ok()?;
        let v = u64::from_ne_bytes(e);
        (v & PRESENT != 0 && v & PFN_MASK != 0).then_some(f)
    })
    .as_ref()
}

/// The frames of the pages of `[addr, addr + len)` at registration.
#[derive(Debug)]
pub struct Frames {
    first_page: u64,
    pfns: Vec<u64>,
}

fn read(map: &File, first_page: u64, pages: usize) -> Option<Vec<u64>> {
    let mut raw = vec![0u8; pages * 8];
    map.read_exact_at(&mut raw, first_page * 8).ok()?;
    Some(
        raw.chunks_exact(8)
            .map(|c| {
                let v = u64::from_ne_bytes(c.try_into().unwrap_or_default());
                if v & PRESENT != 0 {
                    v & PFN_MASK
                } else {
                    0
                }
            })
            .collect(),
    )
}

impl Frames {
    /// Faults `[addr, addr + len)` in and records its frames; `None` when frames are not
    /// visible (the region is then never found stale).
    pub fn record(addr: u64, len: u64) -> Option<Frames> {
        let map = pagemap()?;
        if len == 0 {
            return None;
        }
        let first_page = addr / PAGE;
        let end_page = (addr + len).div_ceil(PAGE);
        let (start, bytes) = (first_page * PAGE, (end_page - first_page) * PAGE);
        // SAFETY: the range is mapped (checked by the caller); populating changes no contents.
        unsafe {
            let p = start as usize as *mut libc::c_void;
            if libc::madvise(p, bytes as usize, libc::MADV_POPULATE_WRITE) != 0 {
                libc::madvise(p, bytes as usize, libc::MADV_POPULATE_READ);
            }
        }
        let pfns = read(map, first_page, (end_page - first_page) as usize)?;
        Some(Frames { first_page, pfns })
    }

    /// Whether the pages of `[addr, addr + len)` (inside the region) are still the frames
    /// recorded.
    pub fn still(&self, addr: u64, len: u64) -> bool {
        let Some(map) = pagemap() else { return true };
        if len == 0 {
            return true;
        }
        let first = addr / PAGE;
        let end = (addr + len).div_ceil(PAGE);
        let Some(from) = first.checked_sub(self.first_page) else {
            return false;
        };
        let n = (end - first) as usize;
        let Some(want) = self.pfns.get(from as usize..from as usize + n) else {
            return false;
        };
        read(map, first, n).is_some_and(|now| now == want)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_mapped_again_is_told_apart_from_one_written() {
        if pagemap().is_none() {
            eprintln!("frame numbers are not visible here (no CAP_SYS_ADMIN): nothing to check");
            return;
        }
        let len = 16 * PAGE as usize;
        // SAFETY: a fresh anonymous mapping, unmapped and mapped again at the same address.
        unsafe {
            let prot = libc::PROT_READ | libc::PROT_WRITE;
            let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
            let p = libc::mmap(std::ptr::null_mut(), len, prot, flags, -1, 0);
            assert_ne!(p, libc::MAP_FAILED);
            let f = Frames::record(p as u64, len as u64).expect("frames");
            std::ptr::write_bytes(p.cast::<u8>(), 7, len);
            assert!(f.still(p as u64 + 100, 3 * PAGE), "writes keep the frames");
            assert_eq!(libc::munmap(p, len), 0);
            let q = libc::mmap(p, len, prot, flags | libc::MAP_FIXED, -1, 0);
            assert_eq!(q, p);
            std::ptr::write_bytes(q.cast::<u8>(), 9, len);
            assert!(
                !f.still(p as u64, len as u64),
                "new pages are another region"
            );
            libc::munmap(q, len);
        }
    }
}
