//! Device discovery and the per-process verbs objects: the first device with an active port,
//! its protection domain, one completion queue for everything, and the shared receive queue.

use core::ffi::c_int;
use core::ptr;
use std::ffi::CStr;

use verbs_sys::*;

use crate::library::Library;

/// An opened device and port with the objects every queue pair shares.
pub struct Device {
    pub ctx: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    /// Device name, for messages.
    pub name: String,
    /// Port number (1-based).
    pub port: u8,
    pub lid: u16,
    pub gid: [u8; 16],
    /// Index of `gid` in the port's table (`btl_verbs_gid_index`).
    pub gid_index: u8,
    /// `IBV_LINK_LAYER_*`: on Ethernet (RoCE) queue pairs are addressed by GID.
    pub link_layer: u8,
    /// `IBV_MTU_*` of the port.
    pub mtu: u32,
    /// Largest single message (a read of more is split).
    pub max_msg: u64,
    /// Outstanding RDMA reads a queue pair may have.
    pub max_rd_atomic: u8,
    pub attr: ibv_device_attr,
}

/// The first device with an active port (the one named `only`, if not empty), opened, with its
/// GID of index `gid_index`; `Ok(None)` when there is none.
pub fn open(lib: &Library, only: &str, gid_index: u8) -> Result<Option<Device>, String> {
    let mut n: c_int = 0;
    // SAFETY: out-pointer valid; the list is freed below after the chosen device is opened.
    let list = unsafe { (lib.get_device_list)(&mut n) };
    if list.is_null() {
        return Ok(None);
    }
    let mut found = None;
    for i in 0..n.max(0) as usize {
        // SAFETY: `list` has `n` entries.
        let dev = unsafe { *list.add(i) };
        if dev.is_null() {
            break;
        }
        // SAFETY: a device of the list.
        let name = unsafe {
            let p = (lib.get_device_name)(dev);
            if p.is_null() {
                format!("device {i}")
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        if !only.is_empty() && name != only {
            continue;
        }
        // SAFETY: a device of the list.
        let ctx = unsafe { (lib.open_device)(dev) };
        if ctx.is_null() {
            continue;
        }
        // SAFETY: all-zero is a valid value of this plain C struct; ctx is open.
        let mut attr: ibv_device_attr = unsafe { core::mem::zeroed() };
        if unsafe { (lib.query_device)(ctx, &mut attr) } != 0 {
            // SAFETY: opened above.
            unsafe { (lib.close_device)(ctx) };
            continue;
        }
        let port = (1..=attr.phys_port_cnt).find_map(|p| {
            // SAFETY: ctx is open.
            let a = unsafe { lib.query_port(ctx, p) }?;
            (a.state == IBV_PORT_ACTIVE).then_some((p, a))
        });
        let Some((port, pa)) = port else {
            // SAFETY: opened above.
            unsafe { (lib.close_device)(ctx) };
            continue;
        };
        let mut gid = ibv_gid { raw: [0; 16] };
        // SAFETY: ctx open, out-pointer valid. A port without GIDs (InfiniBand addressed by
        // LID) leaves it zero; on Ethernet the GID is the address and must exist.
        let rc = unsafe { (lib.query_gid)(ctx, port, c_int::from(gid_index), &mut gid) };
        if rc != 0 && pa.link_layer == IBV_LINK_LAYER_ETHERNET {
            // SAFETY: opened above.
            unsafe { (lib.close_device)(ctx) };
            // SAFETY: the list is still ours.
            unsafe { (lib.free_device_list)(list) };
            return Err(format!(
                "{name} port {port} has no GID of index {gid_index} (btl_verbs_gid_index)"
            ));
        }
        found = Some(Device {
            ctx,
            pd: ptr::null_mut(),
            cq: ptr::null_mut(),
            srq: ptr::null_mut(),
            name,
            port,
            lid: pa.lid,
            // SAFETY: every bit pattern is a valid byte array.
            gid: unsafe { gid.raw },
            gid_index,
            link_layer: pa.link_layer,
            mtu: pa.active_mtu,
            max_msg: u64::from(pa.max_msg_sz).max(1 << 16),
            max_rd_atomic: attr.max_qp_rd_atom.clamp(1, 16) as u8,
            attr,
        });
        break;
    }
    // SAFETY: the list from get_device_list; the opened context stays valid after it is freed.
    unsafe { (lib.free_device_list)(list) };
    Ok(found)
}

impl Device {
    /// Allocates the protection domain, a completion queue of `cqe` entries and a shared receive
    /// queue of `srq_wr` receives.
    pub fn setup(&mut self, lib: &Library, cqe: usize, srq_wr: usize) -> Result<(), String> {
        if cqe > self.attr.max_cqe.max(0) as usize {
            return Err(format!(
                "a completion queue of {cqe} entries is more than {} allows ({}): lower btl_verbs_receive_buffers, btl_verbs_send_slots or btl_verbs_max_gets",
                self.name, self.attr.max_cqe
            ));
        }
        if srq_wr > self.attr.max_srq_wr.max(0) as usize {
            return Err(format!(
                "a shared receive queue of {srq_wr} buffers is more than {} allows ({}): lower btl_verbs_receive_buffers",
                self.name, self.attr.max_srq_wr
            ));
        }
        // SAFETY: ctx is open; the objects are destroyed in `close`.
        unsafe {
            self.pd = (lib.alloc_pd)(self.ctx);
            if self.pd.is_null() {
                return Err(format!("ibv_alloc_pd on {} failed", self.name));
            }
            self.cq = (lib.create_cq)(self.ctx, cqe as c_int, ptr::null_mut(), ptr::null_mut(), 0);
            if self.cq.is_null() {
                return Err(format!("ibv_create_cq({cqe}) on {} failed", self.name));
            }
            let mut sa = ibv_srq_init_attr {
                srq_context: ptr::null_mut(),
                attr: ibv_srq_attr {
                    max_wr: srq_wr as u32,
                    max_sge: 1,
                    srq_limit: 0,
                },
            };
            self.srq = (lib.create_srq)(self.pd, &mut sa);
            if self.srq.is_null() {
                return Err(format!("ibv_create_srq({srq_wr}) on {} failed", self.name));
            }
        }
        Ok(())
    }

    /// Registers `len` bytes at `addr` with `access`.
    pub fn register(
        &self,
        lib: &Library,
        addr: *mut u8,
        len: usize,
        access: c_int,
    ) -> Option<*mut ibv_mr> {
        // SAFETY: the PD is live; the caller keeps the memory mapped while registered.
        let mr = unsafe { (lib.reg_mr)(self.pd, addr.cast(), len, access) };
        (!mr.is_null()).then_some(mr)
    }

    /// Destroys the shared objects and closes the device (queue pairs and registrations first).
    pub fn close(&mut self, lib: &Library) {
        // SAFETY: our own objects, each destroyed once (nulled after).
        unsafe {
            if !self.srq.is_null() {
                (lib.destroy_srq)(self.srq);
            }
            if !self.cq.is_null() {
                (lib.destroy_cq)(self.cq);
            }
            if !self.pd.is_null() {
                (lib.dealloc_pd)(self.pd);
            }
            if !self.ctx.is_null() {
                (lib.close_device)(self.ctx);
            }
        }
        self.srq = ptr::null_mut();
        self.cq = ptr::null_mut();
        self.pd = ptr::null_mut();
        self.ctx = ptr::null_mut();
    }
}
