//! The Portals network interface of a node process, and the runtime's barrier over it.
//!
//! One logical, matching interface per process: its rank is the job rank, so a peer's Portals
//! address is its rank and nothing is exchanged at start-up. Portal table indices are fixed per
//! user ([`pt`]); each transport allocates its own and its own event queues.

use std::ffi::c_void;
use std::ptr;

use portals4_sys::*;

/// Portal table indices.
pub mod pt {
    /// The Portals BTL's receive blocks.
    pub const BTL: u32 = 8;
    /// The Portals BTL's registrations, read by peers' gets (match bits: the key).
    pub const BTL_READ: u32 = 9;
    /// The MTL's matching entry (priority: posted receives; overflow: unexpected blocks).
    pub const MTL: u32 = 16;
    /// The MTL's long-message sources (read by the receiver's get).
    pub const MTL_READ: u32 = 17;
    /// The MTL's flow-control messages.
    pub const MTL_CTRL: u32 = 18;
    /// One-sided windows' memory (match bits: the window's key).
    pub const OSC: u32 = 20;
    /// The runtime's barrier.
    pub const BARRIER: u32 = 24;
}

/// A Portals call failed.
#[derive(Debug)]
pub struct PtlError {
    /// What was being done.
    pub what: &'static str,
    /// The return code.
    pub rc: i32,
}

impl std::fmt::Display for PtlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, ptl_rc_name(self.rc))
    }
}

/// `Ok` for `PTL_OK`, else the error naming `what`.
pub fn check(rc: i32, what: &'static str) -> Result<(), PtlError> {
    if rc == PTL_OK {
        Ok(())
    } else {
        Err(PtlError { what, rc })
    }
}

/// Most dissemination rounds (jobs up to 2^32 ranks).
const MAX_ROUNDS: usize = 32;

/// This process's interface.
pub struct Portals {
    /// The interface.
    pub ni: ptl_handle_ni_t,
    /// Rank of this process (its logical Portals address).
    pub rank: u32,
    /// Ranks in the job.
    pub size: u32,
    /// The interface's `max_atomic_size`.
    pub max_atomic: u64,
    bar_eq: ptl_handle_eq_t,
    bar_md: ptl_handle_md_t,
    bar_ct: heapless::Vec<ptl_handle_ct_t, MAX_ROUNDS>,
    epoch: u64,
    closed: bool,
}

impl Portals {
    /// `PtlInit`, the logical matching interface, and the barrier's entries. `rank` and `size`
    /// are what the environment said; the interface must agree.
    pub fn open(rank: u32, size: u32) -> Result<Portals, String> {
        let e = |e: PtlError| e.to_string();
        // SAFETY: plain Portals calls with valid out-pointers.
        unsafe {
            check(PtlInit(), "PtlInit").map_err(e)?;
            let mut ni = PTL_INVALID_HANDLE;
            let mut lim = ptl_ni_limits_t::default();
            check(
                PtlNIInit(
                    PTL_IFACE_DEFAULT,
                    PTL_NI_MATCHING | PTL_NI_LOGICAL,
                    PTL_PID_ANY,
                    ptr::null(),
                    &mut lim,
                    &mut ni,
                ),
                "PtlNIInit (logical, matching)",
            )
            .map_err(e)?;
            let mut id = ptl_process_t::default();
            check(PtlGetId(ni, &mut id), "PtlGetId").map_err(e)?;
            let mut map = 0u64;
            check(PtlGetMap(ni, 0, ptr::null_mut(), &mut map), "PtlGetMap").map_err(e)?;
            if id.rank() != rank || map != size as u64 {
                return Err(format!(
                    "the Portals interface says rank {} of {map}, the environment rank {rank} of {size}",
                    id.rank()
                ));
            }
            let mut p = Portals {
                ni,
                rank,
                size,
                max_atomic: lim.max_atomic_size,
                bar_eq: PTL_EQ_NONE,
                bar_md: PTL_INVALID_HANDLE,
                bar_ct: heapless::Vec::new(),
                epoch: 0,
                closed: false,
            };
            check(PtlEQAlloc(ni, 64, &mut p.bar_eq), "PtlEQAlloc (barrier)").map_err(e)?;
            let mut idx = 0;
            check(
                PtlPTAlloc(ni, 0, PTL_EQ_NONE, pt::BARRIER, &mut idx),
                "PtlPTAlloc (barrier)",
            )
            .map_err(e)?;
            for r in 0..rounds(size) {
                let mut ct = PTL_CT_NONE;
                check(PtlCTAlloc(ni, &mut ct), "PtlCTAlloc (barrier)").map_err(e)?;
                let me = ptl_me_t {
                    start: ptr::null_mut(),
                    length: 0,
                    ct_handle: ct,
                    uid: PTL_UID_ANY,
                    options: PTL_ME_OP_PUT
                        | PTL_ME_EVENT_CT_COMM
                        | PTL_ME_EVENT_COMM_DISABLE
                        | PTL_ME_EVENT_LINK_DISABLE
                        | PTL_ME_EVENT_UNLINK_DISABLE,
                    match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
                    match_bits: r as u64,
                    ignore_bits: 0,
                    min_free: 0,
                };
                let mut h = PTL_INVALID_HANDLE;
                check(
                    PtlMEAppend(
                        ni,
                        pt::BARRIER,
                        &me,
                        PTL_PRIORITY_LIST,
                        ptr::null_mut(),
                        &mut h,
                    ),
                    "PtlMEAppend (barrier)",
                )
                .map_err(e)?;
                let _ = p.bar_ct.push(ct);
            }
            let md = ptl_md_t {
                start: ptr::null_mut(),
                length: 0,
                options: 0,
                eq_handle: p.bar_eq,
                ct_handle: PTL_CT_NONE,
            };
            check(PtlMDBind(ni, &md, &mut p.bar_md), "PtlMDBind (barrier)").map_err(e)?;
            Ok(p)
        }
    }

    /// Waits until every rank has called it (a dissemination barrier: round `r` sends to rank
    /// `rank + 2^r` and waits for `rank - 2^r`; each round's entry counts arrivals, so a rank a
    /// barrier ahead is no problem). A put that finds no entry yet (the peer has not opened its
    /// interface) fails in its acknowledgment and is sent again.
    pub fn barrier(&mut self) -> Result<(), PtlError> {
        self.epoch += 1;
        for r in 0..rounds(self.size) {
            let to = (self.rank + (1u32 << r)) % self.size;
            let mut tries = 0u32;
            loop {
                // SAFETY: a zero-length put from the barrier's MD.
                check(
                    unsafe {
                        PtlPut(
                            self.bar_md,
                            0,
                            0,
                            PTL_ACK_REQ,
                            ptl_process_t::from_rank(to),
                            pt::BARRIER,
                            r as u64,
                            0,
                            ptr::null_mut::<c_void>(),
                            0,
                        )
                    },
                    "PtlPut (barrier)",
                )?;
                let ev = self.wait_ack()?;
                if ev.ni_fail_type == PTL_NI_OK {
                    break;
                }
                tries += 1;
                std::thread::sleep(std::time::Duration::from_micros(
                    (50u64 << tries.min(8)).min(10_000),
                ));
            }
            let mut got = ptl_ct_event_t::default();
            // SAFETY: a valid counting event and out-pointer.
            check(
                unsafe { PtlCTWait(self.bar_ct[r], self.epoch, &mut got) },
                "PtlCTWait (barrier)",
            )?;
        }
        Ok(())
    }

    fn wait_ack(&mut self) -> Result<ptl_event_t, PtlError> {
        loop {
            let mut ev = ptl_event_t::default();
            // SAFETY: a valid event queue and out-pointer.
            check(
                unsafe { PtlEQWait(self.bar_eq, &mut ev) },
                "PtlEQWait (barrier)",
            )?;
            if ev.type_ == PTL_EVENT_ACK {
                return Ok(ev);
            }
        }
    }

    /// Closes the interface (after the last barrier).
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        // SAFETY: the interface is not used after this.
        unsafe {
            PtlNIFini(self.ni);
            PtlFini();
        }
    }
}

fn rounds(size: u32) -> usize {
    (32 - (size.max(1) - 1).leading_zeros()) as usize
}

/// An MD covering all of this process's memory. Offsets are addresses minus that of a dangling
/// `u8` pointer (one): the software interface wants a non-null start.
pub fn bind_all(
    ni: ptl_handle_ni_t,
    eq: ptl_handle_eq_t,
    options: u32,
) -> Result<ptl_handle_md_t, PtlError> {
    let md = ptl_md_t {
        start: std::ptr::dangling_mut::<u8>().cast(),
        length: (usize::MAX >> 1) as u64,
        options,
        eq_handle: eq,
        ct_handle: PTL_CT_NONE,
    };
    let mut h = PTL_INVALID_HANDLE;
    // SAFETY: a valid descriptor and out-pointer.
    check(unsafe { PtlMDBind(ni, &md, &mut h) }, "PtlMDBind")?;
    Ok(h)
}

/// The offset of the `len` bytes at `p` in an MD made by [`bind_all`].
#[inline]
pub fn offset_of(p: *const u8, len: usize) -> u64 {
    if len == 0 {
        0
    } else {
        (p as usize as u64).wrapping_sub(std::ptr::dangling::<u8>() as usize as u64)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lwk_barrier_rounds() {
        assert_eq!(super::rounds(1), 0);
        assert_eq!(super::rounds(2), 1);
        assert_eq!(super::rounds(3), 2);
        assert_eq!(super::rounds(4), 2);
        assert_eq!(super::rounds(5), 3);
    }
}
