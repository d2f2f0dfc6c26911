//! Moving bytes between this process's buffers and another's with one cross-memory-attach copy
//! (`process_vm_readv`/`process_vm_writev`), and within this process from a ring record.

/// Whether `process_vm_readv` works here: Yama's ptrace scope allows it and a probe on this
/// process succeeds (seccomp or a container may forbid the call).
pub fn cma_allowed() -> bool {
    if let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        if s.trim() != "0" {
            return false;
        }
    }
    let src = [0x5au8; 8];
    let mut dst = [0u8; 8];
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    cma(
        me,
        &[(dst.as_mut_ptr() as u64, 8)],
        &[(src.as_ptr() as u64, 8)],
        false,
    ) && dst == src
}

/// Copies `len` bytes from `src` into the local buffers `dst`, in order.
///
/// # Safety
/// `src` is readable for `len` bytes; `dst` are writable buffers of this process.
pub unsafe fn scatter(src: *const u8, len: usize, dst: &[(u64, u64)]) {
    let mut off = 0usize;
    for &(a, l) in dst {
        if off >= len {
            break;
        }
        let n = (l as usize).min(len - off);
        std::ptr::copy_nonoverlapping(src.add(off), a as usize as *mut u8, n);
        off += n;
    }
}

/// One cross-memory-attach copy between local buffers and process `pid`'s buffers: into the
/// remote ones (`to_remote`, an RDMA read's answer) or out of them. Lengths may differ between
/// the two lists as long as the remote total fits; `true` when every byte moved.
pub fn cma(pid: libc::pid_t, local: &[(u64, u64)], remote: &[(u64, u64)], to_remote: bool) -> bool {
    let total: u64 = remote.iter().map(|r| r.1).sum();
    let iov = |v: &[(u64, u64)]| -> Vec<libc::iovec> {
        v.iter()
            .map(|&(a, l)| libc::iovec {
                iov_base: a as usize as *mut libc::c_void,
                iov_len: l as usize,
            })
            .collect()
    };
    // The local side cut to the message's length (a receive may be larger than the message).
    let mut left = total;
    let mut cut = Vec::new();
    for &(a, l) in local {
        if left == 0 {
            break;
        }
        let n = l.min(left);
        cut.push((a, n));
        left -= n;
    }
    let (l, r) = (iov(&cut), iov(remote));
    let mut done = 0u64;
    // Large transfers may move in several calls (the kernel stops at page boundaries it cannot
    // reach only on error; a short count with no error is continued).
    while done < total {
        let (lv, rv) = (skip(&l, done), skip(&r, done));
        // SAFETY: local iovecs lie in this process's registered memory (checked by the caller);
        // the kernel checks the remote ones against the peer's address space.
        let n = unsafe {
            if to_remote {
                libc::process_vm_writev(
                    pid,
                    lv.as_ptr(),
                    lv.len() as _,
                    rv.as_ptr(),
                    rv.len() as _,
                    0,
                )
            } else {
                libc::process_vm_readv(
                    pid,
                    lv.as_ptr(),
                    lv.len() as _,
                    rv.as_ptr(),
                    rv.len() as _,
                    0,
                )
            }
        };
        if n <= 0 {
            return false;
        }
        done += n as u64;
    }
    true
}

/// `v` without its first `off` bytes (at most 1024 entries, the kernel's IOV_MAX).
fn skip(v: &[libc::iovec], mut off: u64) -> Vec<libc::iovec> {
    let mut out = Vec::new();
    for e in v {
        if off >= e.iov_len as u64 {
            off -= e.iov_len as u64;
            continue;
        }
        out.push(libc::iovec {
            // SAFETY: stays inside the entry.
            iov_base: unsafe { (e.iov_base as *mut u8).add(off as usize) }.cast(),
            iov_len: e.iov_len - off as usize,
        });
        off = 0;
        if out.len() == 1024 {
            break;
        }
    }
    out
}
