//! Helpers of the check and benchmark programs: set-up, a barrier over Portals, event waits.

#![allow(dead_code)]

pub use portals4_shmem::types::*;
pub use portals4_shmem::*;
use std::ffi::c_void;
use std::ptr;

/// Portal table index of the barrier.
pub const BARRIER_PT: u32 = 60;

pub fn rc_name(rc: i32) -> &'static str {
    const N: [&str; 16] = [
        "PTL_OK",
        "PTL_ARG_INVALID",
        "PTL_CT_NONE_REACHED",
        "PTL_EQ_DROPPED",
        "PTL_EQ_EMPTY",
        "PTL_FAIL",
        "PTL_IGNORED",
        "PTL_IN_USE",
        "PTL_INTERRUPTED",
        "PTL_LIST_TOO_LONG",
        "PTL_NO_INIT",
        "PTL_NO_SPACE",
        "PTL_PID_IN_USE",
        "PTL_PT_FULL",
        "PTL_PT_EQ_NEEDED",
        "PTL_PT_IN_USE",
    ];
    N.get(rc as usize).copied().unwrap_or("?")
}

#[track_caller]
pub fn ok(rc: i32) {
    if rc != PTL_OK {
        panic!("Portals call failed: {} ({rc})", rc_name(rc));
    }
}

/// One interface of this process plus the barrier's resources.
pub struct Ctx {
    pub ni: ptl_handle_ni_t,
    pub rank: u32,
    pub size: u32,
    bar_eq: ptl_handle_eq_t,
    bar_ct: ptl_handle_ct_t,
    bar_md: ptl_handle_md_t,
    rounds: u64,
}

impl Ctx {
    /// `PtlInit`, a logical matching interface, the barrier's entry.
    pub fn new() -> Ctx {
        Self::with_options(PTL_NI_MATCHING | PTL_NI_LOGICAL)
    }

    pub fn with_options(options: u32) -> Ctx {
        ok(PtlInit());
        let mut ni = 0;
        let mut lim = ptl_ni_limits_t::default();
        unsafe {
            ok(PtlNIInit(
                PTL_IFACE_DEFAULT,
                options,
                PTL_PID_ANY,
                ptr::null(),
                &mut lim,
                &mut ni,
            ))
        };
        let mut id = ptl_process_t::default();
        let mut map_size = 0u64;
        unsafe {
            ok(PtlGetId(ni, &mut id));
            ok(PtlGetMap(ni, 0, ptr::null_mut(), &mut map_size));
        }
        let mut c = Ctx {
            ni,
            rank: id.rank(),
            size: map_size as u32,
            bar_eq: PTL_EQ_NONE,
            bar_ct: PTL_CT_NONE,
            bar_md: PTL_INVALID_HANDLE,
            rounds: 0,
        };
        unsafe {
            ok(PtlEQAlloc(ni, 64, &mut c.bar_eq));
            ok(PtlCTAlloc(ni, &mut c.bar_ct));
            let mut pt = 0;
            ok(PtlPTAlloc(ni, 0, PTL_EQ_NONE, BARRIER_PT, &mut pt));
            let mut me = me_desc(
                ptr::null_mut(),
                0,
                PTL_ME_OP_PUT | PTL_ME_EVENT_CT_COMM,
                0,
                !0,
            );
            me.ct_handle = c.bar_ct;
            let mut h = 0;
            ok(PtlMEAppend(
                ni,
                BARRIER_PT,
                &me,
                PTL_PRIORITY_LIST,
                ptr::null_mut(),
                &mut h,
            ));
            c.bar_md = md_bind(ni, ptr::null_mut(), 0, c.bar_eq, PTL_CT_NONE, 0);
        }
        c
    }

    /// Every process of the job has reached the same barrier. A put that finds no entry yet (the
    /// peer has not set up) fails in its acknowledgment and is sent again.
    pub fn barrier(&mut self) {
        self.rounds += 1;
        let mut pending: Vec<u32> = (0..self.size).filter(|&r| r != self.rank).collect();
        while !pending.is_empty() {
            for &r in &pending {
                ok(PtlPut(
                    self.bar_md,
                    0,
                    0,
                    PTL_ACK_REQ,
                    ptl_process_t::from_rank(r),
                    BARRIER_PT,
                    0,
                    0,
                    r as usize as *mut c_void,
                    0,
                ));
            }
            let mut failed = Vec::new();
            let mut acks = 0;
            while acks < pending.len() {
                let ev = wait(self.bar_eq);
                if ev.type_ == PTL_EVENT_ACK {
                    acks += 1;
                    if ev.ni_fail_type != PTL_NI_OK {
                        failed.push(ev.user_ptr as usize as u32);
                    }
                }
            }
            if !failed.is_empty() {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            pending = failed;
        }
        let mut ct = ptl_ct_event_t::default();
        unsafe {
            ok(PtlCTWait(
                self.bar_ct,
                self.rounds * (self.size as u64 - 1),
                &mut ct,
            ))
        };
    }

    pub fn fini(mut self) {
        self.barrier();
        ok(PtlNIFini(self.ni));
        PtlFini();
    }
}

pub fn me_desc(start: *mut u8, len: usize, options: u32, bits: u64, ignore: u64) -> ptl_me_t {
    ptl_me_t {
        start: start.cast(),
        length: len as u64,
        ct_handle: PTL_CT_NONE,
        uid: PTL_UID_ANY,
        options,
        match_id: ptl_process_t::from_rank(PTL_RANK_ANY),
        match_bits: bits,
        ignore_bits: ignore,
        min_free: 0,
    }
}

pub fn append(
    ni: ptl_handle_ni_t,
    pt: u32,
    me: &ptl_me_t,
    list: u8,
    user: usize,
) -> ptl_handle_me_t {
    let mut h = 0;
    unsafe { ok(PtlMEAppend(ni, pt, me, list, user as *mut c_void, &mut h)) };
    h
}

pub fn md_bind(
    ni: ptl_handle_ni_t,
    start: *mut u8,
    len: usize,
    eq: ptl_handle_eq_t,
    ct: ptl_handle_ct_t,
    options: u32,
) -> ptl_handle_md_t {
    let md = ptl_md_t {
        start: start.cast(),
        length: len as u64,
        options,
        eq_handle: eq,
        ct_handle: ct,
    };
    let mut h = 0;
    unsafe { ok(PtlMDBind(ni, &md, &mut h)) };
    h
}

pub fn eq_alloc(ni: ptl_handle_ni_t, n: u64) -> ptl_handle_eq_t {
    let mut h = 0;
    unsafe { ok(PtlEQAlloc(ni, n, &mut h)) };
    h
}

pub fn ct_alloc(ni: ptl_handle_ni_t) -> ptl_handle_ct_t {
    let mut h = 0;
    unsafe { ok(PtlCTAlloc(ni, &mut h)) };
    h
}

pub fn pt_alloc(ni: ptl_handle_ni_t, options: u32, eq: ptl_handle_eq_t, idx: u32) -> u32 {
    let mut pt = 0;
    unsafe { ok(PtlPTAlloc(ni, options, eq, idx, &mut pt)) };
    pt
}

/// The next event of `eq` other than `PTL_EVENT_LINK`.
pub fn wait(eq: ptl_handle_eq_t) -> ptl_event_t {
    loop {
        let mut ev = ptl_event_t::default();
        let rc = unsafe { PtlEQWait(eq, &mut ev) };
        if rc != PTL_OK && rc != PTL_EQ_DROPPED {
            panic!("PtlEQWait: {}", rc_name(rc));
        }
        if ev.type_ != PTL_EVENT_LINK {
            return ev;
        }
    }
}

/// The next event of `eq` (not a link event), which must be of `kind`.
#[track_caller]
pub fn expect(eq: ptl_handle_eq_t, kind: u8) -> ptl_event_t {
    let ev = wait(eq);
    assert_eq!(
        ev.type_, kind,
        "expected event {kind}, got {} (fail {})",
        ev.type_, ev.ni_fail_type
    );
    ev
}

/// Waits for an event of `kind`, skipping others.
pub fn wait_for(eq: ptl_handle_eq_t, kind: u8) -> ptl_event_t {
    loop {
        let ev = wait(eq);
        if ev.type_ == kind {
            return ev;
        }
    }
}

/// `PtlEQGet` that must find nothing (after letting progress happen).
#[track_caller]
pub fn expect_empty(eq: ptl_handle_eq_t) {
    let mut ev = ptl_event_t::default();
    loop {
        let rc = unsafe { PtlEQGet(eq, &mut ev) };
        if rc == PTL_EQ_EMPTY {
            return;
        }
        assert!(
            ev.type_ == PTL_EVENT_LINK,
            "unexpected event {} (fail {})",
            ev.type_,
            ev.ni_fail_type
        );
    }
}

#[allow(clippy::too_many_arguments)]
pub fn put(
    md: ptl_handle_md_t,
    off: u64,
    len: u64,
    ack: u8,
    to: u32,
    pt: u32,
    bits: u64,
    roff: u64,
    user: usize,
    hdr: u64,
) {
    ok(PtlPut(
        md,
        off,
        len,
        ack,
        ptl_process_t::from_rank(to),
        pt,
        bits,
        roff,
        user as *mut c_void,
        hdr,
    ));
}

/// A deterministic byte pattern.
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
