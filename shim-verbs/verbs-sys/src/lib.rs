//! libibverbs FFI: the part of rdma-core's verbs API a BTL needs — device and port discovery,
//! protection domains, memory registration, completion queues, shared receive queues, reliable
//! connected queue pairs and their data path.
//!
//! The structs have the layouts of Debian's rdma-core `<infiniband/verbs.h>` ([`types`], checked
//! against the header by `tests/layout.rs`). The header's data-path calls (`ibv_post_send`,
//! `ibv_post_recv`, `ibv_post_srq_recv`, `ibv_poll_cq`) are `static inline` functions that call
//! through the context's operation table; they are written here in Rust the same way.
//! `ibv_query_port` is a macro over an inline function in the header; [`ibv_query_port`] here
//! calls the library's compatibility symbol the way that inline function does for a
//! non-extended context (it fills every field but the last two, `flags` and
//! `port_cap_flags2`, which stay zero).
//!
//! **Which library:** with the `shmem` feature the software verbs device (`verbs-shmem`, one
//! device over shared memory, a Rust dependency exporting the same symbols; this crate's tests
//! and examples link it as a dev-dependency); with the `vendor` feature, or `STORMPI_VERBS_LIB`
//! set at build time, rdma-core's `libibverbs` (see `build.rs`); with neither, nothing is linked:
//! the types and the inline data-path calls serve a user that loads the library itself (the
//! verbs BTL, `dlopen`).

#![allow(non_camel_case_types, clippy::missing_safety_doc)]

pub mod types;

use core::ffi::{c_char, c_int, c_void};

pub use types::*;

#[cfg(all(feature = "shmem", not(verbs_vendor)))]
use verbs_shmem as _;

extern "C" {
    /// The devices present, NULL-terminated; `num_devices` (may be NULL) receives their count.
    pub fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device;
    pub fn ibv_free_device_list(list: *mut *mut ibv_device);
    pub fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char;
    pub fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context;
    pub fn ibv_close_device(context: *mut ibv_context) -> c_int;
    pub fn ibv_query_device(context: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int;
    #[link_name = "ibv_query_port"]
    fn ibv_query_port_compat(context: *mut ibv_context, port: u8, attr: *mut c_void) -> c_int;
    pub fn ibv_query_gid(
        context: *mut ibv_context,
        port: u8,
        index: c_int,
        gid: *mut ibv_gid,
    ) -> c_int;
    pub fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd;
    pub fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
    pub fn ibv_reg_mr(
        pd: *mut ibv_pd,
        addr: *mut c_void,
        length: usize,
        access: c_int,
    ) -> *mut ibv_mr;
    pub fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int;
    pub fn ibv_create_cq(
        context: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut c_void,
        channel: *mut ibv_comp_channel,
        comp_vector: c_int,
    ) -> *mut ibv_cq;
    pub fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int;
    pub fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq;
    pub fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int;
    pub fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
    pub fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> c_int;
    pub fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
    /// A completion status as text.
    pub fn ibv_wc_status_str(status: u32) -> *const c_char;
}

/// Port properties, as the header's `ibv_query_port` gives them to a program: the structure is
/// cleared, then the library's `ibv_query_port` symbol fills it.
///
/// # Safety
/// `context` is an open device; `attr` is valid for writes.
pub unsafe fn ibv_query_port(
    context: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    core::ptr::write_bytes(attr, 0, 1);
    ibv_query_port_compat(context, port, attr.cast())
}

/// Posts a list of send work requests (the header's inline function: through the operation table).
///
/// # Safety
/// `qp` is a live queue pair; `wr` a valid list; `bad_wr` valid for a write.
#[inline]
pub unsafe fn ibv_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    match (*(*qp).context).ops.post_send {
        Some(f) => f(qp, wr, bad_wr),
        None => libc::EOPNOTSUPP,
    }
}

/// Posts a list of receive work requests to a queue pair's own receive queue.
///
/// # Safety
/// As [`ibv_post_send`].
#[inline]
pub unsafe fn ibv_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    match (*(*qp).context).ops.post_recv {
        Some(f) => f(qp, wr, bad_wr),
        None => libc::EOPNOTSUPP,
    }
}

/// Posts a list of receive work requests to a shared receive queue.
///
/// # Safety
/// `srq` is a live SRQ; otherwise as [`ibv_post_send`].
#[inline]
pub unsafe fn ibv_post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    match (*(*srq).context).ops.post_srq_recv {
        Some(f) => f(srq, wr, bad_wr),
        None => libc::EOPNOTSUPP,
    }
}

/// Takes up to `num_entries` completions into `wc`: their count, or a negative value on error.
///
/// # Safety
/// `cq` is a live CQ; `wc` is valid for `num_entries` writes.
#[inline]
pub unsafe fn ibv_poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    match (*(*cq).context).ops.poll_cq {
        Some(f) => f(cq, num_entries, wc),
        None => -libc::EOPNOTSUPP,
    }
}
