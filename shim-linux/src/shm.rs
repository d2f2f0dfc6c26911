//! Shared memory segments for one-sided windows on a node (`MPI_Win_allocate_shared`).
//!
//! One process creates a file under `/dev/shm` (mode 0600, `O_EXCL`, its pages reserved so a
//! full tmpfs is an error now rather than a SIGBUS later) and maps it; the core sends the name to
//! the other processes of the window, which map it too, and then the creator removes the name:
//! the memory lives until the last process unmaps it, and a crash leaves no file behind once
//! creation is over (and under stormrun, the name begins with the job's id, so the launcher's
//! cleanup after a crashed job removes it too).

use std::fs::{OpenOptions, Permissions};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use stormpi_core::platform::SegmentName;

/// Directory of the segment files (a tmpfs on every Linux with POSIX shared memory).
const DIR: &str = "/dev/shm";

/// Segments this process created, to make each name distinct.
static SERIAL: AtomicU32 = AtomicU32::new(0);

fn path_of(name: &SegmentName) -> Option<&Path> {
    let b = name.as_bytes();
    // Only names this module made: under DIR, no way out of it.
    let ok = b.starts_with(DIR.as_bytes()) && !b.windows(2).any(|w| w == b"..");
    ok.then(|| Path::new(std::ffi::OsStr::from_bytes(b)))
}

/// Maps `len` bytes of `file` shared, read-write.
fn map(file: &std::fs::File, len: usize) -> Option<*mut u8> {
    // SAFETY: a new mapping at an address the kernel picks aliases no Rust object; the fd is open
    // for the duration of the call, and the file holds at least `len` bytes (callers sized or
    // checked it).
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len.max(1),
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    (p != libc::MAP_FAILED && !p.is_null()).then_some(p.cast())
}

/// Creates and maps a segment of `bytes`; its name and address.
pub fn create(bytes: usize) -> Option<(SegmentName, *mut u8)> {
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    // Under stormrun the job id leads the name, as the sm BTL's segments do: a launcher that
    // cleans up after a crashed job removes a segment caught between creation and unlink too.
    let job: String = std::env::var("STORMPI_JOBID")
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_hexdigit() || *c == '-')
        .take(40)
        .collect();
    let pid = std::process::id();
    let path = PathBuf::from(if job.is_empty() {
        format!("{DIR}/stormpi-win-{pid}-{serial}")
    } else {
        format!("{DIR}/stormpi-{job}-win-{pid}-{serial}")
    });
    let name = SegmentName::new(path.as_os_str().as_bytes())?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .ok()?;
    let made = (|| {
        // The umask may have taken owner bits; the peers (same user) need read-write.
        file.set_permissions(Permissions::from_mode(0o600)).ok()?;
        file.set_len(bytes.max(1) as u64).ok()?;
        crate::sm::segment::reserve_space(&file, bytes.max(1)).ok()?;
        map(&file, bytes)
    })();
    match made {
        Some(p) => Some((name, p)),
        None => {
            let _ = std::fs::remove_file(&path);
            None
        }
    }
}

/// Maps the segment `name` of `bytes`, if it is there with that size.
pub fn attach(name: &SegmentName, bytes: usize) -> Option<*mut u8> {
    let path = path_of(name)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .ok()?;
    // A file of another size is not the segment the creator announced: mapping past its end
    // would fault on the first touch.
    if file.metadata().ok()?.len() != bytes.max(1) as u64 {
        return None;
    }
    map(&file, bytes)
}

/// Removes the segment's name.
pub fn unlink(name: &SegmentName) {
    if let Some(p) = path_of(name) {
        let _ = std::fs::remove_file(p);
    }
}

/// Unmaps a segment.
///
/// # Safety
/// `ptr`, `bytes` are one mapping of [`create`] or [`attach`], no longer used.
pub unsafe fn detach(ptr: *mut u8, bytes: usize) {
    // SAFETY: the caller's contract: exactly one whole mapping, unused from now on.
    unsafe { libc::munmap(ptr.cast(), bytes.max(1)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_is_shared_between_mappings_and_outlives_its_name() {
        let (name, a) = create(8192).expect("create");
        let b = attach(&name, 8192).expect("attach");
        assert_ne!(a, b, "two mappings");
        unlink(&name);
        assert!(attach(&name, 8192).is_none(), "the name is gone");
        // SAFETY: both mappings hold 8192 bytes and are used only here.
        unsafe {
            assert_eq!(*b.add(4000), 0, "zero-filled");
            *a.add(4000) = 42;
            assert_eq!(
                *b.add(4000),
                42,
                "a store through one mapping shows in the other"
            );
            detach(a, 8192);
            assert_eq!(*b.add(4000), 42, "the memory lives while one mapping does");
            detach(b, 8192);
        }
    }

    #[test]
    fn attach_refuses_another_size_and_foreign_names() {
        let (name, a) = create(4096).expect("create");
        assert!(attach(&name, 8192).is_none());
        unlink(&name);
        // SAFETY: the mapping of `create`, unused afterwards.
        unsafe { detach(a, 4096) };
        assert!(attach(&SegmentName::new(b"/etc/passwd").unwrap(), 4096).is_none());
        assert!(attach(&SegmentName::new(b"/dev/shm/../etc/x").unwrap(), 4096).is_none());
        assert!(attach(&SegmentName::NONE, 4096).is_none());
    }
}
