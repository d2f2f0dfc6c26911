//! Memory hooks: the library's own `free`, `realloc`, `munmap`, `mremap` and `madvise`, which
//! take the place of the C library's for the whole program (the dynamic linker finds
//! `libmpi.so`'s before `libc.so.6`'s), tell the verbs registration cache which ranges stop being
//! the memory they were ([`stormpi_verbs::rcache::unmapped`]), and then do what the C library's
//! would.
//!
//! Why `free` and `realloc` too: glibc's allocator returns large blocks with its internal
//! `munmap` (and shrinks its heaps with `brk` and `madvise`), which no symbol interposes; a freed
//! block of a page or more is reported before it goes back (a freed block may be unmapped, or
//! handed out again to hold other data). `mremap` reports the old range, `madvise` the ranges
//! whose pages it drops (`MADV_DONTNEED`, `MADV_FREE`, `MADV_REMOVE`). A program calling `brk`
//! or `sbrk` to shrink its heap itself is not seen.
//!
//! The hooks run inside the allocator and in any thread: they only append to the cache's
//! lock-free log, and do nothing but one load until a registration cache is in use. They call
//! glibc's allocator by its public `__libc_*` names and the kernel directly, so no `dlsym` (which
//! may allocate) is needed.
//!
//! In `libmpi.a` these names cannot stay global: a fully static link pulls in `libc.a`'s
//! `malloc.o`, whose `free` and `realloc` would collide with them, so `stormcc
//! --localize-library` makes them local. Each hook is also exported as `stormpi_memhook_<name>`
//! (an MPI-prefixed name the localized library keeps), and a static link against the C library
//! shared (stormcc's default) defines the C names as those with `-Wl,--defsym=free=
//! stormpi_memhook_free,...`: the program then defines `free` itself, the linker exports it
//! because `libc.so.6` refers to it, and it interposes for every shared library as `libmpi.so`'s
//! does. A fully static link (`-static`) keeps the C library's: there the cache sees no frees
//! and `mpi_leave_pinned auto` leaves it off.

use core::ffi::{c_int, c_void};

use stormpi_verbs::rcache::{armed, unmapped, MIN_FREE};

extern "C" {
    fn __libc_free(p: *mut c_void);
    fn __libc_realloc(p: *mut c_void, n: usize) -> *mut c_void;
    fn malloc_usable_size(p: *mut c_void) -> usize;
}

/// Reports the block at `p` (if a page or more) as going away.
///
/// # Safety
/// `p` is null or a live block of the C library's allocator.
unsafe fn report_block(p: *mut c_void) {
    if p.is_null() || !armed() {
        return;
    }
    // SAFETY: a live block of the allocator (the caller's contract).
    let n = unsafe { malloc_usable_size(p) };
    if n >= MIN_FREE {
        unmapped(p as usize, n);
    }
}

/// `free(3)`, reporting the block first.
///
/// # Safety
/// As `free(3)`.
#[no_mangle]
pub unsafe extern "C" fn stormpi_memhook_free(p: *mut c_void) {
    // SAFETY: the caller's block, as free(3) requires.
    unsafe {
        report_block(p);
        __libc_free(p)
    }
}

/// `realloc(3)`, reporting the old block first (it may move, or grow by remapping).
///
/// # Safety
/// As `realloc(3)`.
#[no_mangle]
pub unsafe extern "C" fn stormpi_memhook_realloc(p: *mut c_void, n: usize) -> *mut c_void {
    // SAFETY: the caller's block, as realloc(3) requires.
    unsafe {
        report_block(p);
        __libc_realloc(p, n)
    }
}

/// `munmap(2)`, reporting the range once unmapped.
///
/// # Safety
/// As `munmap(2)`.
#[no_mangle]
pub unsafe extern "C" fn stormpi_memhook_munmap(addr: *mut c_void, len: usize) -> c_int {
    // SAFETY: the system call with the caller's arguments; the C library's wrapper sets errno.
    let rc = unsafe { libc::syscall(libc::SYS_munmap, addr, len) } as c_int;
    if rc == 0 {
        unmapped(addr as usize, len);
    }
    rc
}

/// `mremap(2)`, reporting the old range once remapped. Declared with the optional fifth
/// argument (read only with `MREMAP_FIXED`, as the kernel does).
///
/// # Safety
/// As `mremap(2)`.
#[no_mangle]
pub unsafe extern "C" fn stormpi_memhook_mremap(
    old: *mut c_void,
    old_len: usize,
    new_len: usize,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    let to = if flags & libc::MREMAP_FIXED != 0 {
        new_addr
    } else {
        core::ptr::null_mut()
    };
    // SAFETY: the system call with the caller's arguments.
    let r = unsafe { libc::syscall(libc::SYS_mremap, old, old_len, new_len, flags, to) };
    let r = r as *mut c_void;
    if r != libc::MAP_FAILED {
        unmapped(old as usize, old_len);
    }
    r
}

/// `madvise(2)`, reporting the ranges whose pages it drops.
///
/// # Safety
/// As `madvise(2)`.
#[no_mangle]
pub unsafe extern "C" fn stormpi_memhook_madvise(
    addr: *mut c_void,
    len: usize,
    advice: c_int,
) -> c_int {
    // SAFETY: the system call with the caller's arguments.
    let rc = unsafe { libc::syscall(libc::SYS_madvise, addr, len, advice) } as c_int;
    let drops = matches!(
        advice,
        libc::MADV_DONTNEED | libc::MADV_FREE | libc::MADV_REMOVE
    );
    if rc == 0 && drops {
        unmapped(addr as usize, len);
    }
    rc
}

/// The C names `libmpi.so` defines (and the static library holds as local names): the hooks.
mod c_names {
    use core::ffi::{c_int, c_void};

    /// `free(3)`: [`super::stormpi_memhook_free`].
    ///
    /// # Safety
    /// As `free(3)`.
    #[no_mangle]
    pub unsafe extern "C" fn free(p: *mut c_void) {
        // SAFETY: the caller's contract, passed on.
        unsafe { super::stormpi_memhook_free(p) }
    }

    /// `realloc(3)`: [`super::stormpi_memhook_realloc`].
    ///
    /// # Safety
    /// As `realloc(3)`.
    #[no_mangle]
    pub unsafe extern "C" fn realloc(p: *mut c_void, n: usize) -> *mut c_void {
        // SAFETY: the caller's contract, passed on.
        unsafe { super::stormpi_memhook_realloc(p, n) }
    }

    /// `munmap(2)`: [`super::stormpi_memhook_munmap`].
    ///
    /// # Safety
    /// As `munmap(2)`.
    #[no_mangle]
    pub unsafe extern "C" fn munmap(addr: *mut c_void, len: usize) -> c_int {
        // SAFETY: the caller's contract, passed on.
        unsafe { super::stormpi_memhook_munmap(addr, len) }
    }

    /// `mremap(2)`: [`super::stormpi_memhook_mremap`].
    ///
    /// # Safety
    /// As `mremap(2)`.
    #[no_mangle]
    pub unsafe extern "C" fn mremap(
        old: *mut c_void,
        old_len: usize,
        new_len: usize,
        flags: c_int,
        new_addr: *mut c_void,
    ) -> *mut c_void {
        // SAFETY: the caller's contract, passed on.
        unsafe { super::stormpi_memhook_mremap(old, old_len, new_len, flags, new_addr) }
    }

    /// `madvise(2)`: [`super::stormpi_memhook_madvise`].
    ///
    /// # Safety
    /// As `madvise(2)`.
    #[no_mangle]
    pub unsafe extern "C" fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int {
        // SAFETY: the caller's contract, passed on.
        unsafe { super::stormpi_memhook_madvise(addr, len, advice) }
    }
}
