//! Reads and writes staged through a buffer of the thread's when the kernel's copy between the
//! page cache and the caller's memory would alias.
//!
//! On this machine's AMD EPYC (Zen 3, `fsrm`), the kernel copies between the page cache and
//! user memory with `rep movsb`, which runs about 2.5 times slower when the destination lies
//! 1-31 bytes past the source modulo 4 KiB (measured on tmpfs: a 256 MiB `pread` into a page
//! offset of 16 took 0.13 s of CPU, at offset 0 or 64 0.05 s; `pwrite` from offset 4080 alike). A
//! `malloc`ed buffer's data starts 16 bytes into a page, so a read of a file's aligned ranges
//! into one is that case — the plain `MPI_File_read_at_all` of a block into such a buffer. The
//! distance between a file offset and a memory address is the same along a contiguous copy, so
//! no split of the call helps; a staging buffer placed [`SHIFT`] bytes past the file offset
//! (modulo 4 KiB) gives both copies, the kernel's and the one in user space, a distance outside
//! the slow range, and the two together cost half the CPU of the aliased copy (0.065 s for the
//! 256 MiB above, with [`STAGE`]-byte calls that keep the buffer in the L2 cache).

use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;

/// The page size the aliasing is modulo of.
const PAGE: usize = 4096;

/// Bytes a staged call moves: a multiple of [`PAGE`] (so the distance stays as chosen from call
/// to call) that fits the L2 cache with the user's bytes (64-256 KiB measured alike).
const STAGE: usize = 128 << 10;

/// Where a staged call's bytes start in the buffer, past the file offset modulo [`PAGE`]: the
/// kernel's copy then runs at distance 64 (a read) or 4032 (a write), and the user-space copy,
/// whose aliasing distance `d` was 1-31, at `d - 64` or `d + 64` modulo 4 KiB, neither in 1-31.
const SHIFT: usize = 64;

/// Transfers shorter than this go straight. The aliased copy is slow at every size measured
/// (tmpfs, cache-hot, µs per `pread` straight / staged: 128 B 1.06 / 0.76, 1 KiB 1.40 / 0.85,
/// 4 KiB 3.17 / 1.11, 64 KiB 38.9 / 11.5), so only the tiniest are left out.
pub const STAGE_MIN: usize = 256;

/// Whether a copy from `src` to `dst` has the slow distance (destination 1-31 bytes past the
/// source modulo 4 KiB).
pub fn aliases(dst: usize, src: usize) -> bool {
    (1..32).contains(&(dst.wrapping_sub(src) % PAGE))
}

/// Whether a read of `len` bytes at file `offset` into `addr` is to be staged.
pub fn read_aliases(addr: usize, offset: u64, len: usize) -> bool {
    len >= STAGE_MIN && aliases(addr, offset as usize)
}

/// Whether a write of `len` bytes from `addr` at file `offset` is to be staged.
pub fn write_aliases(addr: usize, offset: u64, len: usize) -> bool {
    len >= STAGE_MIN && aliases(offset as usize, addr)
}

/// The staging buffer's layout: `STAGE + PAGE` bytes, page-aligned. A constant: a bad layout
/// fails the build, never a run.
const LAYOUT: Layout = match Layout::from_size_align(STAGE + PAGE, PAGE) {
    Ok(l) => l,
    Err(_) => panic!("the staging buffer's layout"),
};

/// A buffer of [`LAYOUT`].
struct Stage(NonNull<u8>);

impl Stage {
    fn new() -> Option<Stage> {
        // SAFETY: the layout has a nonzero size.
        NonNull::new(unsafe { std::alloc::alloc(LAYOUT) }).map(Stage)
    }

    /// The `STAGE` bytes starting [`SHIFT`] past file `offset` modulo the page.
    fn at(&mut self, offset: u64) -> &mut [u8] {
        let start = (offset as usize).wrapping_add(SHIFT) % PAGE;
        // SAFETY: `start < PAGE`, so `start + STAGE` bytes lie within the allocation, which
        // this value owns and borrows out mutably once.
        unsafe { std::slice::from_raw_parts_mut(self.0.as_ptr().add(start), STAGE) }
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.0.as_ptr(), LAYOUT) }
    }
}

std::thread_local! {
    /// The thread's staging buffer, made at its first staged transfer.
    static STAGED: RefCell<Option<Stage>> = const { RefCell::new(None) };
}

/// Runs `f` with the thread's staging buffer; `None` when there is none (no memory, or the
/// buffer is in use further up this thread's stack), and the caller then goes straight.
fn with_stage<R>(f: impl FnOnce(&mut Stage) -> R) -> Option<R> {
    STAGED
        .try_with(|cell| {
            let mut slot = cell.try_borrow_mut().ok()?;
            if slot.is_none() {
                *slot = Stage::new();
            }
            slot.as_mut().map(f)
        })
        .ok()
        .flatten()
}

/// Reads `buf.len()` bytes from file `offset` through the staging buffer with `read(part,
/// offset)` (one positional read: bytes read, 0 at the end of the file); bytes read, fewer at
/// the end of the file. `None` when no buffer was to be had.
pub fn read<E>(
    buf: &mut [u8],
    offset: u64,
    mut read: impl FnMut(&mut [u8], u64) -> Result<usize, E>,
) -> Option<Result<usize, E>> {
    with_stage(|stage| {
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let part = stage.at(at);
            let want = part.len().min(buf.len() - done);
            let n = read(&mut part[..want], at)?;
            if n == 0 {
                break;
            }
            buf[done..done + n].copy_from_slice(&part[..n]);
            done += n;
        }
        Ok(done)
    })
}

/// Writes `buf` at file `offset` through the staging buffer with `write(part, offset)` (one
/// positional write: bytes written). `None` when no buffer was to be had.
pub fn write<E>(
    buf: &[u8],
    offset: u64,
    mut write: impl FnMut(&[u8], u64) -> Result<usize, E>,
) -> Option<Result<(), E>> {
    with_stage(|stage| {
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done as u64;
            let part = stage.at(at);
            let want = part.len().min(buf.len() - done);
            part[..want].copy_from_slice(&buf[done..done + want]);
            let mut put = 0;
            while put < want {
                put += write(&part[put..want], at + put as u64)?;
            }
            done += want;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slow_distance_is_one_to_thirty_one_bytes_forward() {
        assert!(!aliases(4096, 0));
        assert!(aliases(16, 0));
        assert!(aliases(4096 + 31, 4096));
        assert!(!aliases(32, 0));
        assert!(
            !aliases(0, 16),
            "a destination before the source is not the slow case"
        );
        assert!(aliases(5, 4096 * 7 + 4));
    }

    #[test]
    fn staged_copies_never_alias() {
        let mut stage = Stage::new().expect("memory");
        for offset in [0u64, 1, 15, 4095, 4096 + 17, 1 << 40] {
            let b = stage.at(offset).as_ptr() as usize;
            for d in 1..32usize {
                // A read into memory `d` past the offset: the kernel copies offset -> b, then b
                // -> the memory; a write from memory `d` before it: memory -> b -> offset.
                let mem_read = (offset as usize).wrapping_add(d);
                assert!(!aliases(b, offset as usize) && !aliases(mem_read, b));
                let mem_write = (offset as usize).wrapping_sub(d);
                assert!(!aliases(b, mem_write) && !aliases(offset as usize, b));
            }
        }
    }

    #[test]
    fn reads_and_writes_move_every_byte_in_calls_of_the_stage() {
        let file: Vec<u8> = (0..STAGE * 3 + 777).map(|i| (i * 7 % 251) as u8).collect();
        let mut calls = 0;
        let mut out = vec![0u8; file.len() - 100];
        let got = read::<()>(&mut out, 100, |part, off| {
            calls += 1;
            let off = off as usize;
            let n = part.len().min(file.len() - off);
            part[..n].copy_from_slice(&file[off..off + n]);
            Ok(n)
        })
        .expect("stage")
        .expect("read");
        assert_eq!(got, out.len());
        assert_eq!(&out[..], &file[100..]);
        assert_eq!(calls, out.len().div_ceil(STAGE));

        // A read past the end of the file returns what there is.
        let mut long = vec![0u8; 1000];
        let got = read::<()>(&mut long, file.len() as u64 - 10, |part, off| {
            let off = (off as usize).min(file.len());
            let n = part.len().min(file.len() - off);
            part[..n].copy_from_slice(&file[off..off + n]);
            Ok(n)
        })
        .expect("stage")
        .expect("read");
        assert_eq!(got, 10);

        // Writes, with a short write in the middle, land where they belong.
        let mut sink = vec![0u8; file.len() + 50];
        write::<()>(&file, 50, |part, off| {
            let n = part.len().min(5000);
            sink[off as usize..off as usize + n].copy_from_slice(&part[..n]);
            Ok(n)
        })
        .expect("stage")
        .expect("write");
        assert_eq!(&sink[50..], &file[..]);
    }

    #[test]
    fn an_error_stops_the_transfer() {
        let mut out = vec![0u8; STAGE * 2];
        let r = read(
            &mut out,
            0,
            |_, off| if off == 0 { Ok(STAGE) } else { Err(5) },
        );
        assert_eq!(r, Some(Err(5)));
    }
}
