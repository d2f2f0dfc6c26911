//! A software verbs device over shared memory.
//!
//! It exports the C symbols of libibverbs's API (`ibv_get_device_list`, `ibv_open_device`,
//! `ibv_reg_mr`, `ibv_create_qp`, `ibv_modify_qp`, ...) and fills each context's operation table
//! (`post_send`, `post_recv`, `post_srq_recv`, `poll_cq`), which the inline functions of
//! rdma-core's `<infiniband/verbs.h>` call. So a program written against that header links
//! against `libverbs_shmem.a` instead of `-libverbs` unchanged, and stormpi's verbs code runs on
//! any Linux machine — as the software Portals NI stands in for a Portals NIC.
//!
//! **What it is:** one device, `swverbs0`, one port (active, IB link layer, MTU 4096), a LID per
//! process on a *fabric* (the processes that see each other: the job by default; see
//! [`config::Config`]), a GID naming the LID. Protection domains; memory regions with keys and
//! access rights; completion queues polled by the program; shared receive queues; RC queue pairs
//! with the RESET → INIT → RTR → RTS state machine, connected by the QP number, LID (or GID) and
//! PSN the programs exchange out of band; send and receive (with inline data and immediate
//! data), RDMA write and RDMA read, each moving the bytes of a large message with one copy
//! between the two processes (`process_vm_readv`/`process_vm_writev`) after the responder checked
//! the rkey, bounds and access rights; and the two atomics of verbs, `IBV_WR_ATOMIC_FETCH_AND_ADD`
//! and `IBV_WR_ATOMIC_CMP_AND_SWP` on 8-byte-aligned 8-byte words, which the responder applies
//! with the CPU's atomic instructions on its own memory (so the device reports
//! `IBV_ATOMIC_GLOB`) and whose old value it writes into the requester's buffer like a read's
//! data. Its errors are an adapter's ([`device`]).
//!
//! **What it is not:** no UD/UC/XRC QPs, no memory windows, no completion channels or
//! asynchronous events (`ibv_create_cq` refuses a channel), no SRQ limit event. The responder
//! side runs only while the target process calls into the device (there is no adapter to run
//! it), so a process waiting for remote operations on its memory must poll a CQ. Large transfers
//! need cross-memory attach between the processes (same user, ptrace scope 0).
//!
//! # Safety of the C interface
//! The exported functions take what libibverbs's functions take: objects this library created
//! and not yet destroyed, and buffers valid for the access the call makes. They check what they
//! can (null pointers, sizes, states, keys) and return `errno` values (or NULL with `errno` set)
//! for what is wrong; they do not panic.

#![allow(non_snake_case, clippy::missing_safety_doc)]

#[path = "../../verbs-sys/src/types.rs"]
pub mod types;

pub mod cma;
pub mod config;
pub mod device;
pub mod frames;
pub mod ring;

use std::ffi::{c_char, c_int, c_void};
use std::ptr;
use std::sync::{Mutex, MutexGuard, OnceLock};

use device::{Config, Device, Errno};
use types::*;

/// The process's device state; `None` until the first `ibv_open_device`.
struct Global {
    dev: Option<Device>,
    opened: usize,
}

static STATE: Mutex<Global> = Mutex::new(Global {
    dev: None,
    opened: 0,
});

fn lock() -> MutexGuard<'static, Global> {
    // A panic never happens while the lock is held; if one did, the state is still consistent
    // enough to keep serving.
    STATE.lock().unwrap_or_else(|e| e.into_inner())
}

fn set_errno(e: Errno) {
    // SAFETY: errno is thread-local.
    unsafe { *libc::__errno_location() = e };
}

/// The one device (allocated once, never freed: pointers to it stay valid after
/// `ibv_free_device_list`, as a program may keep them).
struct DevicePtr(*mut ibv_device);
// SAFETY: the device struct is written once, before the pointer is shared, and only read after.
unsafe impl Send for DevicePtr {}
// SAFETY: as above.
unsafe impl Sync for DevicePtr {}

static DEVICE: OnceLock<DevicePtr> = OnceLock::new();

fn c_name<const N: usize>(s: &str) -> [c_char; N] {
    let mut out = [0 as c_char; N];
    for (o, b) in out.iter_mut().zip(s.bytes().take(N - 1)) {
        *o = b as c_char;
    }
    out
}

fn the_device() -> *mut ibv_device {
    DEVICE
        .get_or_init(|| {
            DevicePtr(Box::into_raw(Box::new(ibv_device {
                _ops: [ptr::null_mut(); 2],
                node_type: IBV_NODE_CA,
                transport_type: IBV_TRANSPORT_IB,
                name: c_name("swverbs0"),
                dev_name: c_name("uverbs0"),
                dev_path: c_name("/sys/class/infiniband_verbs/uverbs0"),
                ibdev_path: c_name("/sys/class/infiniband/swverbs0"),
            })))
        })
        .0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    if !num_devices.is_null() {
        *num_devices = 1;
    }
    Box::into_raw(Box::new([the_device(), ptr::null_mut()])).cast()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    if !list.is_null() {
        drop(Box::from_raw(list as *mut [*mut ibv_device; 2]));
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char {
    if device.is_null() {
        return ptr::null();
    }
    (*device).name.as_ptr()
}

/// A `pthread_mutex_t`/`pthread_cond_t` as their static initialisers make them.
fn new_mutex() -> pthread_mutex_t {
    libc::PTHREAD_MUTEX_INITIALIZER
}
fn new_cond() -> pthread_cond_t {
    libc::PTHREAD_COND_INITIALIZER
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context {
    if device.is_null() || device != the_device() {
        set_errno(libc::ENODEV);
        return ptr::null_mut();
    }
    let mut g = lock();
    if g.dev.is_none() {
        let dev = Config::from_env().and_then(Device::open);
        match dev {
            Ok(d) => {
                if !cma::cma_allowed() {
                    eprintln!(
                        "swverbs0: cross-memory attach is not permitted here (ptrace scope, \
                         seccomp or a container): RDMA operations and sends over 8 KiB will \
                         complete with IBV_WC_REM_OP_ERR"
                    );
                }
                g.dev = Some(d)
            }
            Err(msg) => {
                eprintln!("swverbs0: cannot open the device: {msg}");
                set_errno(libc::EINVAL);
                return ptr::null_mut();
            }
        }
    }
    g.opened += 1;
    let ops = ibv_context_ops {
        poll_cq: Some(op_poll_cq),
        req_notify_cq: Some(op_req_notify_cq),
        post_srq_recv: Some(op_post_srq_recv),
        post_send: Some(op_post_send),
        post_recv: Some(op_post_recv),
        // SAFETY: the table is pointers and nullable function pointers: all-zero is valid.
        ..std::mem::zeroed()
    };
    Box::into_raw(Box::new(ibv_context {
        device,
        ops,
        cmd_fd: -1,
        async_fd: -1,
        num_comp_vectors: 1,
        mutex: new_mutex(),
        // Not an extended context: the header's inline functions use the plain symbols.
        abi_compat: ptr::null_mut(),
    }))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(context: *mut ibv_context) -> c_int {
    if context.is_null() {
        return libc::EINVAL;
    }
    let mut g = lock();
    g.opened = g.opened.saturating_sub(1);
    if g.opened == 0 {
        if let Some(d) = g.dev.take() {
            d.close();
        }
    }
    drop(Box::from_raw(context));
    0
}

/// Runs `f` on the open device, or returns `ENODEV`.
fn with<T>(f: impl FnOnce(&mut Device) -> Result<T, Errno>) -> Result<T, Errno> {
    let mut g = lock();
    match g.dev.as_mut() {
        Some(d) => f(d),
        None => Err(libc::ENODEV),
    }
}

fn rc(r: Result<(), Errno>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    context: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    if context.is_null() || attr.is_null() {
        return libc::EINVAL;
    }
    let lid = match with(|d| Ok(d.lid)) {
        Ok(l) => l,
        Err(e) => return e,
    };
    let mut a: ibv_device_attr = std::mem::zeroed();
    a.fw_ver = c_name("stormpi swverbs 1");
    a.node_guid = (0x5377_7662_0000_0000u64 | lid as u64).to_be();
    a.sys_image_guid = a.node_guid;
    a.max_mr_size = device::MAX_MSG;
    a.page_size_cap = 4096;
    a.max_qp = 1 << 16;
    a.max_qp_wr = device::MAX_WR as c_int;
    a.max_sge = device::MAX_SGE as c_int;
    a.max_sge_rd = device::MAX_SGE as c_int;
    a.max_cq = 1 << 16;
    a.max_cqe = device::MAX_CQE as c_int;
    a.max_mr = 1 << 20;
    a.max_pd = 1 << 16;
    a.max_qp_rd_atom = 16;
    a.max_res_rd_atom = 1 << 16;
    a.max_qp_init_rd_atom = 16;
    // The responder applies atomics with the CPU's atomic instructions on its own memory.
    a.atomic_cap = IBV_ATOMIC_GLOB;
    a.max_srq = 1 << 16;
    a.max_srq_wr = device::MAX_WR as c_int;
    a.max_srq_sge = device::MAX_SGE as c_int;
    a.max_pkeys = 1;
    a.phys_port_cnt = 1;
    *attr = a;
    0
}

/// The symbol the header's `ibv_query_port` inline function calls for a non-extended context
/// (`port_attr` points to the header's full `ibv_port_attr`, cleared by the caller).
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
) -> c_int {
    if context.is_null() || port_attr.is_null() || port_num != 1 {
        return libc::EINVAL;
    }
    let lid = match with(|d| Ok(d.lid)) {
        Ok(l) => l,
        Err(e) => return e,
    };
    // The compatibility structure ends before `flags`; leave those bytes as the caller set them.
    let a = &mut *port_attr;
    a.state = IBV_PORT_ACTIVE;
    a.max_mtu = IBV_MTU_4096;
    a.active_mtu = IBV_MTU_4096;
    a.gid_tbl_len = 1;
    a.max_msg_sz = device::MAX_MSG as u32;
    a.pkey_tbl_len = 1;
    a.lid = lid;
    a.sm_lid = 1;
    a.max_vl_num = 1;
    a.active_width = 1;
    a.active_speed = 1;
    a.phys_state = 5;
    a.link_layer = IBV_LINK_LAYER_INFINIBAND;
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    context: *mut ibv_context,
    port_num: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    if context.is_null() || gid.is_null() || port_num != 1 || index != 0 {
        return -1;
    }
    match with(|d| Ok(d.gid())) {
        Ok(raw) => {
            *gid = ibv_gid { raw };
            0
        }
        Err(_) => -1,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd {
    if context.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    match with(|d| {
        let id = d.id();
        d.pds.insert(id);
        Ok(id)
    }) {
        Ok(handle) => Box::into_raw(Box::new(ibv_pd { context, handle })),
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    if pd.is_null() {
        return libc::EINVAL;
    }
    let h = (*pd).handle;
    let r = with(|d| {
        if d.mrs.values().any(|m| m.pd == h) {
            return Err(libc::EBUSY);
        }
        d.pds.remove(&h).then_some(()).ok_or(libc::EINVAL)
    });
    if r.is_ok() {
        drop(Box::from_raw(pd));
    }
    rc(r)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    if pd.is_null() || (addr.is_null() && length > 0) || length as u64 > device::MAX_MSG {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // Remote write and remote atomic need local write, as the verbs specification requires.
    if access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC) != 0
        && access & IBV_ACCESS_LOCAL_WRITE == 0
    {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // An adapter pins the pages when it registers them: memory that is not mapped fails.
    if !mapped(addr as usize, length) {
        set_errno(libc::EFAULT);
        return ptr::null_mut();
    }
    let h = (*pd).handle;
    let frames = frames::Frames::record(addr as u64, length as u64);
    match with(|d| {
        if !d.pds.contains(&h) {
            return Err(libc::EINVAL);
        }
        let key = d.id();
        d.mrs.insert(
            key,
            device::Mr {
                pd: h,
                addr: addr as u64,
                len: length as u64,
                access,
                frames,
            },
        );
        Ok(key)
    }) {
        Ok(key) => Box::into_raw(Box::new(ibv_mr {
            context: (*pd).context,
            pd,
            addr,
            length,
            handle: key,
            lkey: key,
            rkey: key,
        })),
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

/// Whether every page of `[addr, addr + len)` is mapped (`mincore` fails with `ENOMEM` on a
/// hole).
fn mapped(addr: usize, len: usize) -> bool {
    if len == 0 {
        return true;
    }
    // SAFETY: sysconf cannot fail for _SC_PAGESIZE.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let start = addr & !(page - 1);
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    let pages = (end - start).div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: `vec` has one byte per page of the range, as mincore writes.
    unsafe { libc::mincore(start as *mut c_void, end - start, vec.as_mut_ptr().cast()) == 0 }
}

/// What the header's `ibv_reg_mr` macro calls when the access flags are not a constant.
#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    if iova != addr as u64 {
        // Registrations addressed by another virtual address are not supported.
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    ibv_reg_mr(pd, addr, length, access as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    if mr.is_null() {
        return libc::EINVAL;
    }
    let key = (*mr).lkey;
    let r = with(|d| d.mrs.remove(&key).map(|_| ()).ok_or(libc::EINVAL));
    if r.is_ok() {
        drop(Box::from_raw(mr));
    }
    rc(r)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    context: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    if context.is_null() || cqe <= 0 || !channel.is_null() || comp_vector != 0 {
        // Completion channels (interrupt-driven completion) are not implemented.
        set_errno(if channel.is_null() {
            libc::EINVAL
        } else {
            libc::EOPNOTSUPP
        });
        return ptr::null_mut();
    }
    match with(|d| d.create_cq(cqe as u32)) {
        Ok((handle, n)) => Box::into_raw(Box::new(ibv_cq {
            context,
            channel,
            cq_context,
            handle,
            cqe: n as c_int,
            mutex: new_mutex(),
            cond: new_cond(),
            comp_events_completed: 0,
            async_events_completed: 0,
        })),
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    if cq.is_null() {
        return libc::EINVAL;
    }
    let h = (*cq).handle;
    let r = with(|d| d.destroy_cq(h));
    if r.is_ok() {
        drop(Box::from_raw(cq));
    }
    rc(r)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> *mut ibv_srq {
    if pd.is_null() || attr.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let h = (*pd).handle;
    match with(|d| d.create_srq(h, &mut (*attr).attr)) {
        Ok(handle) => Box::into_raw(Box::new(ibv_srq {
            context: (*pd).context,
            srq_context: (*attr).srq_context,
            pd,
            handle,
            mutex: new_mutex(),
            cond: new_cond(),
            events_completed: 0,
        })),
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    if srq.is_null() {
        return libc::EINVAL;
    }
    let h = (*srq).handle;
    let r = with(|d| d.destroy_srq(h));
    if r.is_ok() {
        drop(Box::from_raw(srq));
    }
    rc(r)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    if pd.is_null() || attr.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let a = &mut *attr;
    if a.qp_type != IBV_QPT_RC {
        // Only reliable-connected QPs are implemented.
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    if a.send_cq.is_null() || a.recv_cq.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let (h, scq, rcq) = ((*pd).handle, (*a.send_cq).handle, (*a.recv_cq).handle);
    let srq = (!a.srq.is_null()).then(|| (*a.srq).handle);
    match with(|d| d.create_qp(h, scq, rcq, srq, &mut a.cap, a.sq_sig_all != 0)) {
        Ok(qpn) => Box::into_raw(Box::new(ibv_qp {
            context: (*pd).context,
            qp_context: a.qp_context,
            pd,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            handle: qpn,
            qp_num: qpn,
            state: IBV_QPS_RESET,
            qp_type: IBV_QPT_RC,
            mutex: new_mutex(),
            cond: new_cond(),
            events_completed: 0,
        })),
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    attr_mask: c_int,
) -> c_int {
    if qp.is_null() || attr.is_null() {
        return libc::EINVAL;
    }
    let qpn = (*qp).qp_num;
    match with(|d| d.modify_qp(qpn, &*attr, attr_mask)) {
        Ok(state) => {
            (*qp).state = state;
            0
        }
        Err(e) => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    if qp.is_null() {
        return libc::EINVAL;
    }
    let qpn = (*qp).qp_num;
    let r = with(|d| d.destroy_qp(qpn));
    if r.is_ok() {
        drop(Box::from_raw(qp));
    }
    rc(r)
}

#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: u32) -> *const c_char {
    let s: &'static [u8] = match status {
        IBV_WC_SUCCESS => b"success\0",
        IBV_WC_LOC_LEN_ERR => b"local length error\0",
        IBV_WC_LOC_QP_OP_ERR => b"local QP operation error\0",
        IBV_WC_LOC_PROT_ERR => b"local protection error\0",
        IBV_WC_WR_FLUSH_ERR => b"Work Request Flushed Error\0",
        IBV_WC_REM_INV_REQ_ERR => b"remote invalid request error\0",
        IBV_WC_REM_ACCESS_ERR => b"remote access error\0",
        IBV_WC_REM_OP_ERR => b"remote operation error\0",
        IBV_WC_RETRY_EXC_ERR => b"transport retry counter exceeded\0",
        IBV_WC_RNR_RETRY_EXC_ERR => b"RNR retry counter exceeded\0",
        _ => b"unknown\0",
    };
    s.as_ptr().cast()
}

/// Posts a list: stops at the first request refused, which `bad` then names.
unsafe fn post_list<W>(
    mut wr: *mut W,
    bad: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    mut post: impl FnMut(&mut Device, &W) -> Result<(), Errno>,
) -> c_int {
    let mut g = lock();
    let Some(d) = g.dev.as_mut() else {
        return libc::ENODEV;
    };
    while !wr.is_null() {
        if let Err(e) = post(d, &*wr) {
            if !bad.is_null() {
                *bad = wr;
            }
            return e;
        }
        wr = next(&*wr);
    }
    d.progress();
    0
}

unsafe extern "C" fn op_post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    if qp.is_null() {
        return libc::EINVAL;
    }
    let qpn = (*qp).qp_num;
    // SAFETY (of the closure's call): the caller passes a valid work request list.
    post_list(wr, bad, |w| w.next, |d, w| unsafe { d.post_send(qpn, w) })
}

unsafe extern "C" fn op_post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    if qp.is_null() {
        return libc::EINVAL;
    }
    let qpn = (*qp).qp_num;
    post_list(wr, bad, |w| w.next, |d, w| unsafe { d.post_recv(qpn, w) })
}

unsafe extern "C" fn op_post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    if srq.is_null() {
        return libc::EINVAL;
    }
    let h = (*srq).handle;
    post_list(wr, bad, |w| w.next, |d, w| unsafe { d.post_srq_recv(h, w) })
}

unsafe extern "C" fn op_poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    if cq.is_null() || num_entries < 0 || (wc.is_null() && num_entries > 0) {
        return -libc::EINVAL;
    }
    let h = (*cq).handle;
    let out: &mut [ibv_wc] = if num_entries == 0 {
        &mut []
    } else {
        std::slice::from_raw_parts_mut(wc, num_entries as usize)
    };
    match with(|d| d.poll_cq(h, out)) {
        Ok(n) => n as c_int,
        Err(e) => -e,
    }
}

/// Completion events need a completion channel, which is not implemented.
unsafe extern "C" fn op_req_notify_cq(_cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    libc::EOPNOTSUPP
}
