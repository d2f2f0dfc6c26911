//! libibverbs loaded at run time: the entry points the BTL calls, looked up with `dlsym` in the
//! library `btl_verbs_library` names (rdma-core's `libibverbs.so.1` by default, or the software
//! device `libverbs_shmem.so`). The data-path calls (`ibv_post_send`, `ibv_poll_cq`, ...) are not
//! here: they go through the operation table of the opened context, as the header's inline
//! functions do ([`verbs_sys::ibv_post_send`] and friends).

use core::ffi::{c_char, c_int, c_void};
use std::ffi::{CStr, CString};

use verbs_sys::*;

/// The libibverbs functions the BTL calls outside the data path.
#[derive(Clone, Copy)]
pub struct Library {
    pub get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device,
    pub free_device_list: unsafe extern "C" fn(*mut *mut ibv_device),
    pub get_device_name: unsafe extern "C" fn(*mut ibv_device) -> *const c_char,
    pub open_device: unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context,
    pub close_device: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    pub query_device: unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int,
    query_port_compat: unsafe extern "C" fn(*mut ibv_context, u8, *mut c_void) -> c_int,
    pub query_gid: unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int,
    pub alloc_pd: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd,
    pub dealloc_pd: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
    pub reg_mr: unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr,
    pub dereg_mr: unsafe extern "C" fn(*mut ibv_mr) -> c_int,
    pub create_cq: unsafe extern "C" fn(
        *mut ibv_context,
        c_int,
        *mut c_void,
        *mut ibv_comp_channel,
        c_int,
    ) -> *mut ibv_cq,
    pub destroy_cq: unsafe extern "C" fn(*mut ibv_cq) -> c_int,
    pub create_srq: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_srq_init_attr) -> *mut ibv_srq,
    pub destroy_srq: unsafe extern "C" fn(*mut ibv_srq) -> c_int,
    pub create_qp: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp,
    pub modify_qp: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int,
    pub destroy_qp: unsafe extern "C" fn(*mut ibv_qp) -> c_int,
    wc_status_str: unsafe extern "C" fn(u32) -> *const c_char,
}

// SAFETY: the handle and function pointers are process-wide and immutable once loaded. The
// library stays loaded for the life of the process (never `dlclose`d: a verbs provider may keep
// threads or thread-local state).
unsafe impl Send for Library {}

/// Looks `name` up in `handle` as a function of type `T` (a function pointer type).
///
/// # Safety
/// `handle` is a live `dlopen` handle and `T` is the symbol's true C signature.
unsafe fn symbol<T: Copy>(handle: *mut c_void, name: &CStr) -> Result<T, String> {
    let p = libc::dlsym(handle, name.as_ptr());
    if p.is_null() {
        return Err(format!("it has no symbol {}", name.to_string_lossy()));
    }
    debug_assert_eq!(size_of::<T>(), size_of::<*mut c_void>());
    Ok(core::mem::transmute_copy::<*mut c_void, T>(&p))
}

/// The last `dlerror` text.
fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            "unknown dlopen error".into()
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

impl Library {
    /// Loads `path` (a file name the dynamic linker searches for, or a path).
    pub fn open(path: &str) -> Result<Library, String> {
        let c = CString::new(path).map_err(|_| "the name has a NUL byte".to_string())?;
        // SAFETY: a NUL-terminated name; RTLD_LOCAL keeps its symbols out of the global scope.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(dlerror());
        }
        // SAFETY: each type below is the C signature of the libibverbs symbol of that name.
        let lib = unsafe {
            (|| {
                Ok(Library {
                    get_device_list: symbol(handle, c"ibv_get_device_list")?,
                    free_device_list: symbol(handle, c"ibv_free_device_list")?,
                    get_device_name: symbol(handle, c"ibv_get_device_name")?,
                    open_device: symbol(handle, c"ibv_open_device")?,
                    close_device: symbol(handle, c"ibv_close_device")?,
                    query_device: symbol(handle, c"ibv_query_device")?,
                    query_port_compat: symbol(handle, c"ibv_query_port")?,
                    query_gid: symbol(handle, c"ibv_query_gid")?,
                    alloc_pd: symbol(handle, c"ibv_alloc_pd")?,
                    dealloc_pd: symbol(handle, c"ibv_dealloc_pd")?,
                    reg_mr: symbol(handle, c"ibv_reg_mr")?,
                    dereg_mr: symbol(handle, c"ibv_dereg_mr")?,
                    create_cq: symbol(handle, c"ibv_create_cq")?,
                    destroy_cq: symbol(handle, c"ibv_destroy_cq")?,
                    create_srq: symbol(handle, c"ibv_create_srq")?,
                    destroy_srq: symbol(handle, c"ibv_destroy_srq")?,
                    create_qp: symbol(handle, c"ibv_create_qp")?,
                    modify_qp: symbol(handle, c"ibv_modify_qp")?,
                    destroy_qp: symbol(handle, c"ibv_destroy_qp")?,
                    wc_status_str: symbol(handle, c"ibv_wc_status_str")?,
                })
            })()
        };
        if lib.is_err() {
            // SAFETY: our own handle, no symbol of it kept.
            unsafe { libc::dlclose(handle) };
        }
        lib
    }

    /// Port properties as the header's `ibv_query_port` gives them: cleared, then filled by the
    /// library's compatibility symbol.
    ///
    /// # Safety
    /// `ctx` is an open device of this library.
    pub unsafe fn query_port(&self, ctx: *mut ibv_context, port: u8) -> Option<ibv_port_attr> {
        let mut attr = ibv_port_attr::default();
        let rc = (self.query_port_compat)(ctx, port, (&mut attr as *mut ibv_port_attr).cast());
        (rc == 0).then_some(attr)
    }

    /// A completion status as text.
    pub fn status(&self, status: u32) -> String {
        // SAFETY: ibv_wc_status_str returns a static string for any value.
        unsafe {
            let s = (self.wc_status_str)(status);
            if s.is_null() {
                format!("status {status}")
            } else {
                format!("{} ({status})", CStr::from_ptr(s).to_string_lossy())
            }
        }
    }
}
