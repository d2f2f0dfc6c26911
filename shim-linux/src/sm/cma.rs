//! Single copy between processes of a node: the receiver reads the sender's buffer with
//! `process_vm_readv` (Linux cross-memory attach, CMA) straight into its own.
//!
//! The kernel may forbid it: Yama's ptrace scope, a seccomp policy (containers), other users.
//! [`probe_self`] tells at start whether the call works at all; [`check_peer`] tells, on first
//! use towards a peer, whether the process id the peer recorded in its segment is that peer
//! as we see it (pid namespaces): it reads the segment header at the address the peer recorded
//! and compares it with the header mapped here.

use std::io;

use stormpi_core::error::{Allowed, Error, ErrorClass, Reason, Result};

use super::segment::Segment;

/// How `btl_sm_single_copy` asks for single copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Use it if the probe at start says the kernel allows it.
    Auto,
    /// Use it; start fails if the kernel forbids it.
    On,
    /// Never: every message goes through the rings.
    Off,
}

impl Mode {
    /// Parses the parameter's text.
    pub(crate) fn parse(name: &'static str, text: &str) -> Result<Mode> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(Mode::Auto),
            "on" | "1" | "true" | "yes" | "cma" => Ok(Mode::On),
            "off" | "0" | "false" | "no" | "none" => Ok(Mode::Off),
            _ => Err(Error::new(
                ErrorClass::Arg,
                Reason::BadParam {
                    name,
                    allowed: Allowed::Text("auto, on (1) or off (0)"),
                },
            )),
        }
    }
}

/// Reads `len` bytes at `remote` in process `pid` into `dest`.
///
/// # Safety
/// `dest` must be valid for writes of `len` bytes, and not accessed by anyone else meanwhile.
pub(crate) unsafe fn read(pid: u32, remote: u64, dest: *mut u8, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            // SAFETY: `done < len`, inside the caller's destination.
            iov_base: unsafe { dest.add(done) }.cast(),
            iov_len: len - done,
        };
        let from = remote
            .checked_add(done as u64)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
        let far = libc::iovec {
            iov_base: from as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: one local iovec over memory the caller lent us for writing; the remote iovec
        // is only read by the kernel, in the other process, which checks it.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &far, 1, 0) };
        match n {
            n if n > 0 => done += n as usize,
            // A short read stops at the first page it cannot read: nothing more will come.
            0 => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
            _ => {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}

/// Whether `process_vm_readv` works at all here: reads a word of our own memory through it.
pub(crate) fn probe_self() -> io::Result<()> {
    let word: u64 = 0x5354_4f52_4d50_4931;
    let mut got = 0u64;
    // SAFETY: `got` is a local of 8 bytes we own; `word` stays alive during the call.
    unsafe {
        read(
            std::process::id(),
            &word as *const u64 as u64,
            (&mut got as *mut u64).cast(),
            8,
        )?
    };
    if got != word {
        return Err(io::Error::other("the probe read different bytes"));
    }
    Ok(())
}

/// The process id under which a peer's memory is read, after checking that reading its
/// segment header through it gives the header we map: `Err` says why not (a static text for
/// the error, and the system's error if there was one).
pub(crate) fn check_peer(seg: &Segment) -> std::result::Result<u32, (&'static str, io::Error)> {
    let (pid, base) = seg.origin();
    let want = seg.header_start();
    let mut got = [0u8; 64];
    let n = want.len().min(got.len());
    // SAFETY: `got` is ours, `n` bytes long at most.
    unsafe { read(pid, base, got.as_mut_ptr(), n) }.map_err(|e| {
        let what = match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => {
                "process_vm_readv was refused (EPERM): not permitted by ptrace scope, seccomp or \
                 container policy"
            }
            Some(libc::ENOSYS) => "process_vm_readv is not available in this kernel",
            Some(libc::ESRCH) => "the peer's process id is not visible here (pid namespace?)",
            _ => "process_vm_readv of the peer's segment header failed",
        };
        (what, e)
    })?;
    if got[..n] != want[..n] {
        return Err((
            "the peer's recorded process id names another process here (pid namespace?)",
            io::Error::other("header mismatch"),
        ));
    }
    Ok(pid)
}

/// Whether `e` says the kernel forbids the call (for every peer, not just one).
pub(crate) fn is_policy(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM) | Some(libc::EACCES) | Some(libc::ENOSYS)
    )
}

/// The error a failed single-copy read completes with: names the cause.
pub(crate) fn failure(e: &io::Error) -> Error {
    let what = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "process_vm_readv was refused (EPERM): permission withdrawn"
        }
        Some(libc::EFAULT) => "process_vm_readv hit an unreadable address (EFAULT)",
        Some(libc::ESRCH) => "process_vm_readv: the sender is gone (ESRCH)",
        Some(libc::ENOMEM) => "process_vm_readv ran out of memory (ENOMEM)",
        _ => "process_vm_readv failed",
    };
    Error::new(ErrorClass::Other, Reason::Transport { btl: "sm", what })
}

/// Writes `len` bytes from `src` to `remote` in process `pid`.
///
/// # Safety
/// `src` must be valid for reads of `len` bytes.
pub(crate) unsafe fn write(pid: u32, remote: u64, src: *const u8, len: usize) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec {
            // SAFETY: `done < len`, inside the caller's source.
            iov_base: unsafe { src.add(done) } as *mut libc::c_void,
            iov_len: len - done,
        };
        let to = remote
            .checked_add(done as u64)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
        let far = libc::iovec {
            iov_base: to as *mut libc::c_void,
            iov_len: len - done,
        };
        // SAFETY: one local iovec over memory the caller lent us for reading; the remote iovec
        // is written by the kernel in the other process, which checks it.
        let n = unsafe { libc::process_vm_writev(pid as libc::pid_t, &local, 1, &far, 1, 0) };
        match n {
            n if n > 0 => done += n as usize,
            // A short write stops at the first page it cannot write: nothing more will go.
            0 => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
            _ => {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(e);
                }
            }
        }
    }
    Ok(())
}
