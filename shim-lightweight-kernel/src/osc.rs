//! Portals 4's one-sided operations for the core's windows (`osc_portals`; the core's
//! `osc::rdma` says which operations go this way).
//!
//! A window's part is one persistent match entry on the portal [`pt::OSC`] with the window's key
//! as match bits, over exactly its memory, so the origin's offsets are the target's offsets from
//! the part's start (`PTL_ME_MANAGE_LOCAL` off) and no address is exchanged. The entry has no
//! events and refuses what does not fit (`PTL_ME_NO_TRUNCATE`: the origin sees a failure).
//!
//! Each window has a counting event and a memory descriptor over the whole address space bound
//! to it (offsets are addresses): puts and atomics ask for a counted acknowledgment, gets,
//! fetching atomics and swaps count their reply, so each operation adds exactly one when it is
//! complete at the target, and a flush waits for the count.

use std::ffi::c_void;
use std::ptr;
use std::sync::OnceLock;

use portals4_sys::*;
use stormpi_core::error::{Allowed, Error, ErrorClass, Reason, Result};
use stormpi_core::osc::rdma::{AtomicOp, Elem, Rdma};
use stormpi_core::params::{Default, Kind, ParamDef, Params};

use crate::ptl::pt;

/// `osc_portals`.
pub static OSC_PORTALS: ParamDef = ParamDef {
    name: "osc_portals",
    kind: Kind::Str,
    default: Default::Str("auto"),
    description: "One-sided windows move data by Portals puts, gets and atomics: auto (when the \
                  interface has atomics), on (an error at MPI_Init if it cannot), off (every \
                  operation is an active message)",
};

/// Parameters of the one-sided component.
pub static PARAMS: [&ParamDef; 1] = [&OSC_PORTALS];

/// The memory descriptor's start: its offsets are addresses less this (a descriptor cannot
/// start at address 0).
const MD_START: usize = 1;

/// This process's Portals one-sided operations.
struct PortalsRma {
    ni: ptl_handle_ni_t,
    max_atomic: usize,
    /// Where a replace's old contents go (it is a swap, whose reply nobody reads):
    /// `max_atomic` bytes.
    scratch: usize,
}

static RMA: OnceLock<PortalsRma> = OnceLock::new();

/// The operations, once [`open`] set them up.
pub fn get() -> Option<&'static dyn Rdma> {
    RMA.get().map(|r| r as &'static dyn Rdma)
}

fn failed(what: &'static str) -> Error {
    Error::new(ErrorClass::Other, Reason::BadArgument { what })
}

fn check(rc: i32, what: &'static str) -> Result<()> {
    if rc == PTL_OK {
        Ok(())
    } else {
        crate::node_log!(Warn, "{=str}: Portals return code {=i32}", what, rc);
        Err(failed(what))
    }
}

/// Sets up the portal of windows on `ni` as `osc_portals` says (`max_atomic`: the interface's
/// `max_atomic_size`).
pub fn open(params: &Params, ni: ptl_handle_ni_t, max_atomic: u64) -> Result<()> {
    let want = params.str(&OSC_PORTALS);
    let required = match want.trim() {
        "off" | "0" | "no" | "false" => return Ok(()),
        "on" | "1" | "yes" | "true" => true,
        "auto" => false,
        _ => return Err(OSC_PORTALS.refused_with(Allowed::Text("auto, on or off"))),
    };
    // Every element of an atomic is at most 8 bytes.
    if max_atomic < 8 {
        return if required {
            Err(failed(
                "osc_portals=on, but the Portals interface has no atomics (max_atomic_size < 8)",
            ))
        } else {
            Ok(())
        };
    }
    let mut idx = 0;
    // SAFETY: a plain Portals call with a valid out-pointer.
    check(
        unsafe { PtlPTAlloc(ni, 0, PTL_EQ_NONE, pt::OSC, &mut idx) },
        "PtlPTAlloc (one-sided windows)",
    )?;
    let max_atomic = max_atomic.min(1 << 16) as usize;
    let scratch = Box::leak(vec![0u8; max_atomic].into_boxed_slice());
    let _ = RMA.set(PortalsRma {
        ni,
        max_atomic,
        scratch: scratch.as_mut_ptr() as usize,
    });
    Ok(())
}

fn target(proc_: u32) -> ptl_process_t {
    ptl_process_t::from_rank(proc_)
}

/// A memory descriptor offset for address `p`.
fn at(p: *const u8) -> ptl_size_t {
    (p as usize).wrapping_sub(MD_START) as ptl_size_t
}

/// Counter handle: the counting event in the low half, the descriptor bound to it in the high.
fn split(ct: u64) -> (ptl_handle_ct_t, ptl_handle_md_t) {
    (ct as u32, (ct >> 32) as u32)
}

fn datatype(e: Elem) -> Option<ptl_datatype_t> {
    Some(match e {
        Elem::Int(1) => PTL_INT8_T,
        Elem::Uint(1) => PTL_UINT8_T,
        Elem::Int(2) => PTL_INT16_T,
        Elem::Uint(2) => PTL_UINT16_T,
        Elem::Int(4) => PTL_INT32_T,
        Elem::Uint(4) => PTL_UINT32_T,
        Elem::Int(8) => PTL_INT64_T,
        Elem::Uint(8) => PTL_UINT64_T,
        Elem::Float(4) => PTL_FLOAT,
        Elem::Float(8) => PTL_DOUBLE,
        _ => return None,
    })
}

fn operation(op: AtomicOp) -> ptl_op_t {
    match op {
        AtomicOp::Min => PTL_MIN,
        AtomicOp::Max => PTL_MAX,
        AtomicOp::Sum => PTL_SUM,
        AtomicOp::Prod => PTL_PROD,
        AtomicOp::Lor => PTL_LOR,
        AtomicOp::Land => PTL_LAND,
        AtomicOp::Lxor => PTL_LXOR,
        AtomicOp::Bor => PTL_BOR,
        AtomicOp::Band => PTL_BAND,
        AtomicOp::Bxor => PTL_BXOR,
        AtomicOp::Swap => PTL_SWAP,
    }
}

impl Rdma for PortalsRma {
    fn max_atomic(&self) -> usize {
        self.max_atomic
    }

    fn expose(&self, key: u64, base: *mut u8, len: usize) -> Result<u64> {
        let me = ptl_me_t {
            start: base.cast(),
            length: len as ptl_size_t,
            ct_handle: PTL_CT_NONE,
            uid: PTL_UID_ANY,
            options: PTL_ME_OP_PUT
                | PTL_ME_OP_GET
                | PTL_ME_NO_TRUNCATE
                | PTL_ME_EVENT_COMM_DISABLE
                | PTL_ME_EVENT_LINK_DISABLE
                | PTL_ME_EVENT_UNLINK_DISABLE,
            match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
            match_bits: key,
            ignore_bits: 0,
            min_free: 0,
        };
        let mut h = PTL_INVALID_HANDLE;
        // SAFETY: the entry describes the window's memory, which MPI lends the window until
        // `MPI_Win_free` withdraws the entry.
        check(
            unsafe {
                PtlMEAppend(
                    self.ni,
                    pt::OSC,
                    &me,
                    PTL_PRIORITY_LIST,
                    ptr::null_mut(),
                    &mut h,
                )
            },
            "PtlMEAppend (a window's memory)",
        )?;
        Ok(h as u64)
    }

    fn withdraw(&self, handle: u64) {
        // SAFETY: a plain Portals call on a handle `expose` returned.
        let rc = unsafe { PtlMEUnlink(handle as ptl_handle_me_t) };
        let _ = check(rc, "PtlMEUnlink (a window's memory)");
    }

    fn counter(&self) -> Result<u64> {
        let mut ct = PTL_CT_NONE;
        // SAFETY: a plain Portals call with a valid out-pointer.
        check(
            unsafe { PtlCTAlloc(self.ni, &mut ct) },
            "PtlCTAlloc (a window)",
        )?;
        let md = ptl_md_t {
            start: MD_START as *mut c_void,
            length: (isize::MAX as usize - MD_START) as ptl_size_t,
            options: PTL_MD_EVENT_CT_ACK
                | PTL_MD_EVENT_CT_REPLY
                | PTL_MD_EVENT_SUCCESS_DISABLE
                | PTL_MD_EVENT_SEND_DISABLE,
            eq_handle: PTL_EQ_NONE,
            ct_handle: ct,
        };
        let mut h = PTL_INVALID_HANDLE;
        // SAFETY: the descriptor spans the address space; the interface touches only the
        // ranges operations name, which their callers lend (`Rdma`'s contract).
        if let Err(e) = check(
            unsafe { PtlMDBind(self.ni, &md, &mut h) },
            "PtlMDBind (a window)",
        ) {
            // SAFETY: the counter allocated just above, used by nothing.
            let _ = unsafe { PtlCTFree(ct) };
            return Err(e);
        }
        Ok(ct as u64 | (h as u64) << 32)
    }

    fn release_counter(&self, ct: u64) {
        let (ct, md) = split(ct);
        // SAFETY: plain Portals calls on the handles `counter` made; nothing is in flight.
        let (a, b) = unsafe { (PtlMDRelease(md), PtlCTFree(ct)) };
        let _ = check(a, "PtlMDRelease (a window)");
        let _ = check(b, "PtlCTFree (a window)");
    }

    fn completed(&self, ct: u64) -> Result<u64> {
        let mut ev = ptl_ct_event_t::default();
        // SAFETY: a plain Portals call with a valid out-pointer.
        check(
            unsafe { PtlCTGet(split(ct).0, &mut ev) },
            "PtlCTGet (a window)",
        )?;
        if ev.failure > 0 {
            return Err(failed(
                "a one-sided operation failed at its target (Portals: no entry took it)",
            ));
        }
        Ok(ev.success)
    }

    unsafe fn put(
        &self,
        ct: u64,
        proc_: u32,
        key: u64,
        off: u64,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: the caller lends `src..+len` until the operation is counted.
        let rc = unsafe {
            PtlPut(
                split(ct).1,
                at(src),
                len as ptl_size_t,
                PTL_CT_ACK_REQ,
                target(proc_),
                pt::OSC,
                key,
                off,
                ptr::null_mut(),
                0,
            )
        };
        check(rc, "PtlPut (one-sided)")
    }

    unsafe fn get(
        &self,
        ct: u64,
        proc_: u32,
        key: u64,
        off: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        // SAFETY: the caller lends `dst..+len` until the operation is counted.
        let rc = unsafe {
            PtlGet(
                split(ct).1,
                at(dst),
                len as ptl_size_t,
                target(proc_),
                pt::OSC,
                key,
                off,
                ptr::null_mut(),
            )
        };
        check(rc, "PtlGet (one-sided)")
    }

    unsafe fn atomic(
        &self,
        ct: u64,
        proc_: u32,
        key: u64,
        off: u64,
        src: *const u8,
        fetch: Option<*mut u8>,
        len: usize,
        op: AtomicOp,
        elem: Elem,
    ) -> Result<()> {
        let dt = datatype(elem).ok_or(failed("an element Portals atomics do not have"))?;
        let md = split(ct).1;
        let n = len as ptl_size_t;
        // SAFETY: the caller lends `src` and `fetch` (`len` bytes) until the operation is
        // counted; the scratch area is this interface's, written only by replies nobody reads.
        let rc = unsafe {
            match (fetch, op) {
                // A replace is a swap (Portals' atomics leave swaps to `PtlSwap`); without a fetch
                // its old contents go to the scratch area.
                (f, AtomicOp::Swap) => {
                    if len > self.max_atomic {
                        return Err(failed("a one-sided replace past max_atomic_size"));
                    }
                    let old = f.unwrap_or(self.scratch as *mut u8);
                    PtlSwap(
                        md,
                        at(old),
                        md,
                        at(src),
                        n,
                        target(proc_),
                        pt::OSC,
                        key,
                        off,
                        ptr::null_mut(),
                        0,
                        ptr::null(),
                        PTL_SWAP,
                        dt,
                    )
                }
                (Some(f), _) => PtlFetchAtomic(
                    md,
                    at(f),
                    md,
                    at(src),
                    n,
                    target(proc_),
                    pt::OSC,
                    key,
                    off,
                    ptr::null_mut(),
                    0,
                    operation(op),
                    dt,
                ),
                (None, _) => PtlAtomic(
                    md,
                    at(src),
                    n,
                    PTL_CT_ACK_REQ,
                    target(proc_),
                    pt::OSC,
                    key,
                    off,
                    ptr::null_mut(),
                    0,
                    operation(op),
                    dt,
                ),
            }
        };
        check(rc, "a Portals atomic (one-sided)")
    }

    unsafe fn compare_swap(
        &self,
        ct: u64,
        proc_: u32,
        key: u64,
        off: u64,
        new: *const u8,
        compare: *const u8,
        old: *mut u8,
        elem: Elem,
    ) -> Result<()> {
        let dt = datatype(elem).ok_or(failed("an element Portals atomics do not have"))?;
        let md = split(ct).1;
        // SAFETY: the caller lends each one-element buffer until the operation is counted.
        let rc = unsafe {
            PtlSwap(
                md,
                at(old),
                md,
                at(new),
                elem.size() as ptl_size_t,
                target(proc_),
                pt::OSC,
                key,
                off,
                ptr::null_mut(),
                0,
                compare.cast(),
                PTL_CSWAP,
                dt,
            )
        };
        check(rc, "PtlSwap (one-sided compare-and-swap)")
    }
}
