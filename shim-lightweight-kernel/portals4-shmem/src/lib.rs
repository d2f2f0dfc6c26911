//! A software Portals 4 network interface over shared memory.
//!
//! It exports the C symbols of the Portals 4.1 API (`PtlInit`, `PtlNIInit`, `PtlMEAppend`,
//! `PtlPut`, `PtlEQWait`, ...) with the semantics the specification gives them, so code written
//! for a Portals NIC — stormpi's Portals transports among it — runs unchanged on any Linux
//! machine, for tests and for trying the node build without the hardware. Link it as an rlib
//! (through `portals4-sys`, the default) or as `libportals4_shmem.a` from C.
//!
//! **The job** comes from the launcher's environment only ([`job`]): every process of a job is
//! one rank of logical interfaces, `nid` 0 and `pid` = rank on physical ones.
//!
//! **The wire** is one shared-memory segment per process with an inbound ring per source
//! ([`shm`]); **the semantics** — portal tables, priority and overflow lists, matching, the
//! unexpected list, events, counting events, flow control — live in [`engine`]. The target side
//! of an operation runs in the target process whenever it calls into Portals (there is no NIC to
//! do it meanwhile), so a process waiting for something must wait in a Portals call
//! (`PtlEQWait`, `PtlCTWait`, `PtlEQPoll`, ...), as Portals programs do.
//!
//! Run-time settings (environment): `STORMPI_PTL_RING_BYTES` (bytes of each inbound ring,
//! default 256 KiB), `STORMPI_PTL_CMA` (`0` turns cross-memory attach off: large messages are
//! streamed through the rings instead), `STORMPI_PTL_CMA_THRESHOLD` (bytes from which a transfer
//! uses cross-memory attach, default 4 MiB: on the development VM the rings were faster up to
//! 1 MiB — 80 us against 99 us — and cross-memory attach spares the receiver a message-sized
//! staging buffer), `STORMPI_PTL_SPIN` (polls before a waiting call yields the processor),
//! `STORMPI_PTL_OFFLOAD` (µs between rounds of the thread that plays the NIC's part; unset or 0:
//! none, the target side of operations runs only inside the process's Portals calls).
//!
//! Not implemented: triggered operations (`max_triggered_ops` is 0; the calls return
//! `PTL_ARG_INVALID`), gets and fetching atomics matched in an overflow list (they match the
//! priority list only), complex and `long double` atomics, access control by job id, status
//! registers beyond drop count and violations.

//!
//! # Safety of the C interface
//!
//! The exported functions that take pointers are `unsafe extern "C"`: a caller passes what the
//! Portals 4.1 specification says each argument points to (valid for the reads and writes the
//! call makes; descriptors' and entries' memory valid while bound or linked). They check every
//! handle, index, length and option they are given and return a Portals error code
//! (`PTL_ARG_INVALID`, `PTL_NO_SPACE`, `PTL_FAIL`, ...) for what is wrong; they do not panic.

#![allow(non_snake_case, clippy::missing_safety_doc)]

#[path = "../../portals4-sys/src/types.rs"]
#[allow(dead_code)]
pub mod types;

pub mod atomics;
pub mod engine;
pub mod job;
pub mod region;
pub mod shm;

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use engine::{handle, hk, split, State};
use shm::kind;
use types::*;

/// The process's interface state behind a spin lock: every Portals call takes it, nearly always
/// uncontended, and a waiting call releases it between polls. Taking it is one atomic exchange and
/// releasing it one store (a `Mutex` pays a second atomic operation to release, on every call); a
/// thread that finds it taken spins a little, then yields.
struct StateLock {
    held: AtomicBool,
    state: UnsafeCell<Option<State>>,
}

// SAFETY: `state` is only reached through a `Guard`, and `held` lets one guard exist at a time.
unsafe impl Sync for StateLock {}

struct Guard(&'static StateLock);

impl Deref for Guard {
    type Target = Option<State>;
    fn deref(&self) -> &Option<State> {
        // SAFETY: the guard holds the lock.
        unsafe { &*self.0.state.get() }
    }
}

impl DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Option<State> {
        // SAFETY: the guard holds the lock.
        unsafe { &mut *self.0.state.get() }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
    }
}

static STATE: StateLock = StateLock {
    held: AtomicBool::new(false),
    state: UnsafeCell::new(None),
};

#[inline]
fn lock() -> Guard {
    if STATE.held.swap(true, Ordering::Acquire) {
        lock_contended();
    }
    Guard(&STATE)
}

/// The lock if no other thread holds it.
#[inline(always)]
fn try_lock() -> Option<Guard> {
    if STATE.held.swap(true, Ordering::Acquire) {
        // Held by another thread: no guard (one dropped here would release its lock).
        return None;
    }
    Some(Guard(&STATE))
}

/// The wait for a lock another thread holds: out of line, so a call that takes the lock at once
/// keeps its values in scratch registers (nothing of it lives across this call's yields).
#[cold]
#[inline(never)]
fn lock_contended() {
    let mut spins = 0u32;
    loop {
        while STATE.held.load(Ordering::Relaxed) {
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        if !STATE.held.swap(true, Ordering::Acquire) {
            return;
        }
    }
}

/// Runs `f` on the initialised state (`PTL_NO_INIT` otherwise).
fn with<R>(f: impl FnOnce(&mut State) -> Result<R, c_int>) -> Result<R, c_int> {
    let mut g = lock();
    match g.as_mut() {
        Some(s) if s.inits > 0 => f(s),
        _ => Err(PTL_NO_INIT),
    }
}

fn rc(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => PTL_OK,
        Err(e) => e,
    }
}

fn ni_slot(h: ptl_handle_ni_t) -> Result<usize, c_int> {
    let (k, s, i, g) = split(h);
    if k == hk::NI && i == 0 && g == 0 {
        Ok(s)
    } else {
        Err(PTL_ARG_INVALID)
    }
}

/// Waits: spins on `poll` for a while, then yields between polls, until it returns `Some` or
/// `timeout` passes (`None` = forever).
fn wait<R>(
    timeout: Option<Duration>,
    mut poll: impl FnMut() -> Result<Option<R>, c_int>,
) -> Result<Option<R>, c_int> {
    let spin = lock().as_ref().map(|s| s.cfg.spin).unwrap_or(0);
    let start = Instant::now();
    let mut n: u32 = 0;
    loop {
        if let Some(r) = poll()? {
            return Ok(Some(r));
        }
        if let Some(t) = timeout {
            if start.elapsed() >= t {
                return Ok(None);
            }
        }
        n = n.saturating_add(1);
        if n > spin {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

fn timeout_of(t: ptl_time_t) -> Option<Duration> {
    (t != PTL_TIME_FOREVER).then(|| Duration::from_millis(t as u64))
}

// ---------------------------------------------------------------------- init

#[no_mangle]
pub extern "C" fn PtlInit() -> c_int {
    let mut g = lock();
    if g.is_none() {
        match job::Job::from_env() {
            Ok(j) => {
                *g = Some(State::new(j));
                start_offload();
            }
            Err(e) => {
                eprintln!("portals4-shmem: {e}");
                return PTL_FAIL;
            }
        }
    }
    match g.as_mut() {
        Some(s) => {
            s.inits = s.inits.saturating_add(1);
            PTL_OK
        }
        None => PTL_FAIL,
    }
}

/// With `STORMPI_PTL_OFFLOAD=<µs>` (not 0), a thread plays the NIC's part: every that many
/// microseconds it runs the target side of arrived operations (puts, gets, atomics into this
/// process's entries, with their acknowledgments and replies) when no call of the process holds
/// the interface, so peers' one-sided operations complete while the process computes or sleeps
/// outside Portals, as on hardware. It ends with the interface (`PtlFini`).
fn start_offload() {
    let us = std::env::var("STORMPI_PTL_OFFLOAD")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    if us == 0 {
        return;
    }
    let period = Duration::from_micros(us);
    let spawned = std::thread::Builder::new()
        .name("ptl-offload".into())
        .spawn(move || loop {
            std::thread::sleep(period);
            // A call of the process holds the interface: it makes the progress itself.
            let Some(mut g) = try_lock() else {
                continue;
            };
            match g.as_mut() {
                Some(s) if s.inits > 0 => s.progress(),
                _ => return,
            }
        });
    if let Err(e) = spawned {
        eprintln!("portals4-shmem: no offload thread: {e}");
    }
}

#[no_mangle]
pub extern "C" fn PtlFini() {
    let mut g = lock();
    if let Some(s) = g.as_mut() {
        if s.inits > 0 {
            s.inits -= 1;
            if s.inits == 0 {
                s.shutdown();
                *g = None;
            }
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn PtlNIInit(
    iface: ptl_interface_t,
    options: c_uint,
    pid: ptl_pid_t,
    desired: *const ptl_ni_limits_t,
    actual: *mut ptl_ni_limits_t,
    ni_handle: *mut ptl_handle_ni_t,
) -> c_int {
    if ni_handle.is_null() || (iface != 0 && iface != PTL_IFACE_DEFAULT) {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        let (slot, limits) = s.ni_init(options, pid, desired.as_ref())?;
        if !actual.is_null() {
            *actual = limits;
        }
        *ni_handle = handle(hk::NI, slot, 0, 0);
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn PtlNIFini(ni_handle: ptl_handle_ni_t) -> c_int {
    rc(with(|s| {
        let slot = ni_slot(ni_handle)?;
        s.progress();
        match s.ni_fini(slot) {
            PTL_OK => Ok(()),
            e => Err(e),
        }
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlNIStatus(
    ni_handle: ptl_handle_ni_t,
    status_register: ptl_sr_index_t,
    status: *mut ptl_sr_value_t,
) -> c_int {
    if status.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        s.progress();
        *status = s.status(ni_slot(ni_handle)?, status_register)?;
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlNIHandle(
    handle_: ptl_handle_any_t,
    ni_handle: *mut ptl_handle_ni_t,
) -> c_int {
    if ni_handle.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        let (k, slot, _, _) = split(handle_);
        if !(hk::NI..=hk::LE).contains(&k) {
            return Err(PTL_ARG_INVALID);
        }
        s.ni(slot)?;
        *ni_handle = handle(hk::NI, slot, 0, 0);
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlSetMap(
    ni_handle: ptl_handle_ni_t,
    map_size: ptl_size_t,
    mapping: *const ptl_process_t,
) -> c_int {
    if mapping.is_null() || map_size == 0 {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        let map = std::slice::from_raw_parts(mapping, map_size as usize);
        match s.set_map(ni_slot(ni_handle)?, map) {
            PTL_OK => Ok(()),
            e => Err(e),
        }
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlGetMap(
    ni_handle: ptl_handle_ni_t,
    map_size: ptl_size_t,
    mapping: *mut ptl_process_t,
    actual_map_size: *mut ptl_size_t,
) -> c_int {
    if actual_map_size.is_null() || (mapping.is_null() && map_size > 0) {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        let out: &mut [ptl_process_t] = if map_size == 0 {
            &mut []
        } else {
            std::slice::from_raw_parts_mut(mapping, map_size as usize)
        };
        *actual_map_size = s.get_map(ni_slot(ni_handle)?, out)?;
        Ok(())
    }))
}

// ---------------------------------------------------------------------- portal table

#[no_mangle]
pub unsafe extern "C" fn PtlPTAlloc(
    ni_handle: ptl_handle_ni_t,
    options: c_uint,
    eq_handle: ptl_handle_eq_t,
    pt_index_req: ptl_pt_index_t,
    pt_index: *mut ptl_pt_index_t,
) -> c_int {
    if pt_index.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        *pt_index = s.pt_alloc(ni_slot(ni_handle)?, options, eq_handle, pt_index_req)?;
        Ok(())
    }))
}

fn pt_call(ni_handle: ptl_handle_ni_t, f: impl FnOnce(&mut State, usize) -> c_int) -> c_int {
    rc(with(|s| match f(s, ni_slot(ni_handle)?) {
        PTL_OK => Ok(()),
        e => Err(e),
    }))
}

#[no_mangle]
pub extern "C" fn PtlPTFree(ni_handle: ptl_handle_ni_t, pt_index: ptl_pt_index_t) -> c_int {
    pt_call(ni_handle, |s, n| s.pt_free(n, pt_index))
}

#[no_mangle]
pub extern "C" fn PtlPTDisable(ni_handle: ptl_handle_ni_t, pt_index: ptl_pt_index_t) -> c_int {
    pt_call(ni_handle, |s, n| s.pt_enable(n, pt_index, false))
}

#[no_mangle]
pub extern "C" fn PtlPTEnable(ni_handle: ptl_handle_ni_t, pt_index: ptl_pt_index_t) -> c_int {
    pt_call(ni_handle, |s, n| s.pt_enable(n, pt_index, true))
}

// ---------------------------------------------------------------------- identities

#[no_mangle]
pub unsafe extern "C" fn PtlGetUid(ni_handle: ptl_handle_ni_t, uid: *mut ptl_uid_t) -> c_int {
    if uid.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        s.ni(ni_slot(ni_handle)?)?;
        *uid = s.uid();
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlGetId(ni_handle: ptl_handle_ni_t, id: *mut ptl_process_t) -> c_int {
    if id.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        *id = s.get_id(ni_slot(ni_handle)?, false)?;
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlGetPhysId(ni_handle: ptl_handle_ni_t, id: *mut ptl_process_t) -> c_int {
    if id.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        *id = s.get_id(ni_slot(ni_handle)?, true)?;
        Ok(())
    }))
}

// ---------------------------------------------------------------------- memory descriptors

#[no_mangle]
pub unsafe extern "C" fn PtlMDBind(
    ni_handle: ptl_handle_ni_t,
    md: *const ptl_md_t,
    md_handle: *mut ptl_handle_md_t,
) -> c_int {
    if md.is_null() || md_handle.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        *md_handle = s.md_bind(ni_slot(ni_handle)?, &*md)?;
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn PtlMDRelease(md_handle: ptl_handle_md_t) -> c_int {
    rc(with(|s| {
        s.progress();
        match s.md_release(md_handle) {
            PTL_OK => Ok(()),
            e => Err(e),
        }
    }))
}

// ---------------------------------------------------------------------- list entries

fn le_as_me(le: &ptl_le_t) -> ptl_me_t {
    ptl_me_t {
        start: le.start,
        length: le.length,
        ct_handle: le.ct_handle,
        uid: le.uid,
        options: le.options,
        ..ptl_me_t::default()
    }
}

#[no_mangle]
pub unsafe extern "C" fn PtlMEAppend(
    ni_handle: ptl_handle_ni_t,
    pt_index: ptl_pt_index_t,
    me: *const ptl_me_t,
    ptl_list: ptl_list_t,
    user_ptr: *mut c_void,
    me_handle: *mut ptl_handle_me_t,
) -> c_int {
    if me.is_null() || me_handle.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        let slot = ni_slot(ni_handle)?;
        // Messages that already arrived are seen by the unexpected-list search.
        s.progress();
        *me_handle = s.append(slot, pt_index, &*me, ptl_list, user_ptr as usize, true)?;
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlLEAppend(
    ni_handle: ptl_handle_ni_t,
    pt_index: ptl_pt_index_t,
    le: *const ptl_le_t,
    ptl_list: ptl_list_t,
    user_ptr: *mut c_void,
    le_handle: *mut ptl_handle_le_t,
) -> c_int {
    if le.is_null() || le_handle.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        let slot = ni_slot(ni_handle)?;
        s.progress();
        let me = le_as_me(&*le);
        *le_handle = s.append(slot, pt_index, &me, ptl_list, user_ptr as usize, false)?;
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn PtlMEUnlink(me_handle: ptl_handle_me_t) -> c_int {
    if split(me_handle).0 != hk::ME {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| match s.unlink(me_handle) {
        PTL_OK => Ok(()),
        e => Err(e),
    }))
}

#[no_mangle]
pub extern "C" fn PtlLEUnlink(le_handle: ptl_handle_le_t) -> c_int {
    if split(le_handle).0 != hk::LE {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| match s.unlink(le_handle) {
        PTL_OK => Ok(()),
        e => Err(e),
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlMESearch(
    ni_handle: ptl_handle_ni_t,
    pt_index: ptl_pt_index_t,
    me: *const ptl_me_t,
    ptl_search_op: ptl_search_op_t,
    user_ptr: *mut c_void,
) -> c_int {
    if me.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        let slot = ni_slot(ni_handle)?;
        s.progress();
        match s.search(slot, pt_index, &*me, ptl_search_op, user_ptr as usize, true) {
            PTL_OK => Ok(()),
            e => Err(e),
        }
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlLESearch(
    ni_handle: ptl_handle_ni_t,
    pt_index: ptl_pt_index_t,
    le: *const ptl_le_t,
    ptl_search_op: ptl_search_op_t,
    user_ptr: *mut c_void,
) -> c_int {
    if le.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        let slot = ni_slot(ni_handle)?;
        s.progress();
        let me = le_as_me(&*le);
        match s.search(slot, pt_index, &me, ptl_search_op, user_ptr as usize, false) {
            PTL_OK => Ok(()),
            e => Err(e),
        }
    }))
}

// ---------------------------------------------------------------------- counting events

#[no_mangle]
pub unsafe extern "C" fn PtlCTAlloc(
    ni_handle: ptl_handle_ni_t,
    ct_handle: *mut ptl_handle_ct_t,
) -> c_int {
    if ct_handle.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        *ct_handle = s.ct_alloc(ni_slot(ni_handle)?)?;
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn PtlCTFree(ct_handle: ptl_handle_ct_t) -> c_int {
    rc(with(|s| match s.ct_free(ct_handle) {
        PTL_OK => Ok(()),
        e => Err(e),
    }))
}

#[no_mangle]
pub extern "C" fn PtlCTCancelTriggered(ct_handle: ptl_handle_ct_t) -> c_int {
    // No triggered operation can be pending (none are accepted).
    rc(with(|s| s.ct_mut(ct_handle).map(|_| ())))
}

#[no_mangle]
pub unsafe extern "C" fn PtlCTGet(ct_handle: ptl_handle_ct_t, event: *mut ptl_ct_event_t) -> c_int {
    if event.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        s.progress();
        *event = *s.ct_mut(ct_handle)?;
        Ok(())
    }))
}

#[no_mangle]
pub unsafe extern "C" fn PtlCTWait(
    ct_handle: ptl_handle_ct_t,
    test: ptl_size_t,
    event: *mut ptl_ct_event_t,
) -> c_int {
    if event.is_null() {
        return PTL_ARG_INVALID;
    }
    let r = wait(None, || {
        with(|s| {
            s.progress();
            let c = *s.ct_mut(ct_handle)?;
            Ok((c.success + c.failure >= test).then_some(c))
        })
    });
    match r {
        Ok(Some(c)) => {
            *event = c;
            PTL_OK
        }
        Ok(None) => PTL_FAIL,
        Err(e) => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn PtlCTPoll(
    ct_handles: *const ptl_handle_ct_t,
    tests: *const ptl_size_t,
    size: c_uint,
    timeout: ptl_time_t,
    event: *mut ptl_ct_event_t,
    which: *mut c_uint,
) -> c_int {
    if ct_handles.is_null() || tests.is_null() || event.is_null() || which.is_null() || size == 0 {
        return PTL_ARG_INVALID;
    }
    let hs = std::slice::from_raw_parts(ct_handles, size as usize);
    let ts = std::slice::from_raw_parts(tests, size as usize);
    let r = wait(timeout_of(timeout), || {
        with(|s| {
            s.progress();
            for (k, (&h, &t)) in hs.iter().zip(ts).enumerate() {
                let c = *s.ct_mut(h)?;
                if c.success + c.failure >= t {
                    return Ok(Some((k, c)));
                }
            }
            Ok(None)
        })
    });
    match r {
        Ok(Some((k, c))) => {
            *event = c;
            *which = k as c_uint;
            PTL_OK
        }
        Ok(None) => PTL_CT_NONE_REACHED,
        Err(e) => e,
    }
}

#[no_mangle]
pub extern "C" fn PtlCTSet(ct_handle: ptl_handle_ct_t, new_ct: ptl_ct_event_t) -> c_int {
    rc(with(|s| {
        *s.ct_mut(ct_handle)? = new_ct;
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn PtlCTInc(ct_handle: ptl_handle_ct_t, increment: ptl_ct_event_t) -> c_int {
    rc(with(|s| {
        let c = s.ct_mut(ct_handle)?;
        c.success += increment.success;
        c.failure += increment.failure;
        Ok(())
    }))
}

// ---------------------------------------------------------------------- data movement

fn initiate_rc(f: impl FnOnce(&mut State) -> c_int) -> c_int {
    rc(with(|s| match f(s) {
        PTL_OK => Ok(()),
        e => Err(e),
    }))
}

#[no_mangle]
pub extern "C" fn PtlPut(
    md_handle: ptl_handle_md_t,
    local_offset: ptl_size_t,
    length: ptl_size_t,
    ack_req: ptl_ack_req_t,
    target_id: ptl_process_t,
    pt_index: ptl_pt_index_t,
    match_bits: ptl_match_bits_t,
    remote_offset: ptl_size_t,
    user_ptr: *mut c_void,
    hdr_data: ptl_hdr_data_t,
) -> c_int {
    // The common put (no acknowledgment, one record, room in the ring) without the general
    // path's layers: this is every small message's send.
    if ack_req == PTL_NO_ACK_REQ {
        let mut g = lock();
        match g.as_mut() {
            Some(s) if s.inits > 0 => {
                let put = engine::Put {
                    md_h: md_handle,
                    local_offset,
                    length,
                    target: target_id,
                    pt_index,
                    match_bits,
                    remote_offset,
                    user_ptr: user_ptr as usize,
                    hdr_data,
                };
                if s.put_now(&put) {
                    return PTL_OK;
                }
            }
            _ => return PTL_NO_INIT,
        }
    }
    initiate_rc(|s| {
        s.initiate(
            kind::PUT,
            md_handle,
            local_offset,
            PTL_INVALID_HANDLE,
            0,
            length,
            ack_req,
            target_id,
            pt_index,
            match_bits,
            remote_offset,
            user_ptr as usize,
            hdr_data,
            (0, 0),
            None,
        )
    })
}

#[no_mangle]
pub extern "C" fn PtlGet(
    md_handle: ptl_handle_md_t,
    local_offset: ptl_size_t,
    length: ptl_size_t,
    target_id: ptl_process_t,
    pt_index: ptl_pt_index_t,
    match_bits: ptl_match_bits_t,
    remote_offset: ptl_size_t,
    user_ptr: *mut c_void,
) -> c_int {
    initiate_rc(|s| {
        s.initiate(
            kind::GET,
            md_handle,
            local_offset,
            md_handle,
            local_offset,
            length,
            PTL_NO_ACK_REQ,
            target_id,
            pt_index,
            match_bits,
            remote_offset,
            user_ptr as usize,
            0,
            (0, 0),
            None,
        )
    })
}

#[no_mangle]
pub extern "C" fn PtlAtomic(
    md_handle: ptl_handle_md_t,
    local_offset: ptl_size_t,
    length: ptl_size_t,
    ack_req: ptl_ack_req_t,
    target_id: ptl_process_t,
    pt_index: ptl_pt_index_t,
    match_bits: ptl_match_bits_t,
    remote_offset: ptl_size_t,
    user_ptr: *mut c_void,
    hdr_data: ptl_hdr_data_t,
    operation: ptl_op_t,
    datatype: ptl_datatype_t,
) -> c_int {
    initiate_rc(|s| {
        s.initiate(
            kind::ATOMIC,
            md_handle,
            local_offset,
            PTL_INVALID_HANDLE,
            0,
            length,
            ack_req,
            target_id,
            pt_index,
            match_bits,
            remote_offset,
            user_ptr as usize,
            hdr_data,
            (operation, datatype),
            None,
        )
    })
}

#[no_mangle]
pub extern "C" fn PtlFetchAtomic(
    get_md_handle: ptl_handle_md_t,
    local_get_offset: ptl_size_t,
    put_md_handle: ptl_handle_md_t,
    local_put_offset: ptl_size_t,
    length: ptl_size_t,
    target_id: ptl_process_t,
    pt_index: ptl_pt_index_t,
    match_bits: ptl_match_bits_t,
    remote_offset: ptl_size_t,
    user_ptr: *mut c_void,
    hdr_data: ptl_hdr_data_t,
    operation: ptl_op_t,
    datatype: ptl_datatype_t,
) -> c_int {
    if atomics::needs_operand(operation) {
        return PTL_ARG_INVALID;
    }
    initiate_rc(|s| {
        s.initiate(
            kind::FETCH,
            put_md_handle,
            local_put_offset,
            get_md_handle,
            local_get_offset,
            length,
            PTL_NO_ACK_REQ,
            target_id,
            pt_index,
            match_bits,
            remote_offset,
            user_ptr as usize,
            hdr_data,
            (operation, datatype),
            None,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn PtlSwap(
    get_md_handle: ptl_handle_md_t,
    local_get_offset: ptl_size_t,
    put_md_handle: ptl_handle_md_t,
    local_put_offset: ptl_size_t,
    length: ptl_size_t,
    target_id: ptl_process_t,
    pt_index: ptl_pt_index_t,
    match_bits: ptl_match_bits_t,
    remote_offset: ptl_size_t,
    user_ptr: *mut c_void,
    hdr_data: ptl_hdr_data_t,
    operand: *const c_void,
    operation: ptl_op_t,
    datatype: ptl_datatype_t,
) -> c_int {
    if operation != PTL_SWAP && !atomics::needs_operand(operation) {
        return PTL_ARG_INVALID;
    }
    let size = match atomics::elem_size(datatype) {
        Some(n) => n,
        None => return PTL_ARG_INVALID,
    };
    let opnd = if atomics::needs_operand(operation) {
        if operand.is_null() {
            return PTL_ARG_INVALID;
        }
        Some(std::slice::from_raw_parts(operand as *const u8, size))
    } else {
        None
    };
    initiate_rc(|s| {
        s.initiate(
            kind::FETCH,
            put_md_handle,
            local_put_offset,
            get_md_handle,
            local_get_offset,
            length,
            PTL_NO_ACK_REQ,
            target_id,
            pt_index,
            match_bits,
            remote_offset,
            user_ptr as usize,
            hdr_data,
            (operation, datatype),
            opnd,
        )
    })
}

#[no_mangle]
pub extern "C" fn PtlAtomicSync() -> c_int {
    rc(with(|_| Ok(())))
}

// ---------------------------------------------------------------------- event queues

#[no_mangle]
pub unsafe extern "C" fn PtlEQAlloc(
    ni_handle: ptl_handle_ni_t,
    count: ptl_size_t,
    eq_handle: *mut ptl_handle_eq_t,
) -> c_int {
    if eq_handle.is_null() {
        return PTL_ARG_INVALID;
    }
    rc(with(|s| {
        *eq_handle = s.eq_alloc(ni_slot(ni_handle)?, count)?;
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn PtlEQFree(eq_handle: ptl_handle_eq_t) -> c_int {
    rc(with(|s| match s.eq_free(eq_handle) {
        PTL_OK => Ok(()),
        e => Err(e),
    }))
}

fn eq_result(r: Result<Option<(ptl_event_t, bool)>, c_int>, event: *mut ptl_event_t) -> c_int {
    match r {
        Ok(Some((ev, dropped))) => {
            // SAFETY: checked non-null by the callers.
            unsafe { *event = ev };
            if dropped {
                PTL_EQ_DROPPED
            } else {
                PTL_OK
            }
        }
        Ok(None) => PTL_EQ_EMPTY,
        Err(e) => e,
    }
}

#[no_mangle]
pub unsafe extern "C" fn PtlEQGet(eq_handle: ptl_handle_eq_t, event: *mut ptl_event_t) -> c_int {
    if event.is_null() {
        return PTL_ARG_INVALID;
    }
    // Contended, the call starts over out of line: nothing of this path lives across a wait,
    // so the round that finds nothing saves (almost) no registers.
    let Some(mut g) = try_lock() else {
        return eq_get_contended(eq_handle, event);
    };
    match g.as_mut() {
        Some(s) if s.inits > 0 => s.eq_get(eq_handle, event),
        _ => PTL_NO_INIT,
    }
}

/// `PtlEQGet` when the lock was held: waits for it.
///
/// # Safety
/// `event` must be valid for a write.
#[cold]
#[inline(never)]
unsafe fn eq_get_contended(eq_handle: ptl_handle_eq_t, event: *mut ptl_event_t) -> c_int {
    let mut g = lock();
    match g.as_mut() {
        Some(s) if s.inits > 0 => s.eq_get(eq_handle, event),
        _ => PTL_NO_INIT,
    }
}

#[no_mangle]
pub unsafe extern "C" fn PtlEQWait(eq_handle: ptl_handle_eq_t, event: *mut ptl_event_t) -> c_int {
    if event.is_null() {
        return PTL_ARG_INVALID;
    }
    let r = wait(None, || {
        with(|s| {
            s.progress();
            s.eq_take(eq_handle)
        })
    });
    eq_result(r, event)
}

#[no_mangle]
pub unsafe extern "C" fn PtlEQPoll(
    eq_handles: *const ptl_handle_eq_t,
    size: c_uint,
    timeout: ptl_time_t,
    event: *mut ptl_event_t,
    which: *mut c_uint,
) -> c_int {
    if eq_handles.is_null() || event.is_null() || which.is_null() || size == 0 {
        return PTL_ARG_INVALID;
    }
    let hs = std::slice::from_raw_parts(eq_handles, size as usize);
    let mut next = 0usize;
    let r = wait(timeout_of(timeout), || {
        with(|s| {
            s.progress();
            for k in 0..hs.len() {
                let i = (next + k) % hs.len();
                if let Some(x) = s.eq_take(hs[i])? {
                    next = i + 1;
                    return Ok(Some((i, x)));
                }
            }
            Ok(None)
        })
    });
    match r {
        Ok(Some((i, x))) => {
            *which = i as c_uint;
            eq_result(Ok(Some(x)), event)
        }
        Ok(None) => PTL_EQ_EMPTY,
        Err(e) => e,
    }
}

// ---------------------------------------------------------------------- the rest

#[no_mangle]
pub extern "C" fn PtlTriggeredPut(
    _md_handle: ptl_handle_md_t,
    _local_offset: ptl_size_t,
    _length: ptl_size_t,
    _ack_req: ptl_ack_req_t,
    _target_id: ptl_process_t,
    _pt_index: ptl_pt_index_t,
    _match_bits: ptl_match_bits_t,
    _remote_offset: ptl_size_t,
    _user_ptr: *mut c_void,
    _hdr_data: ptl_hdr_data_t,
    _trig_ct_handle: ptl_handle_ct_t,
    _threshold: ptl_size_t,
) -> c_int {
    triggered()
}

#[no_mangle]
pub extern "C" fn PtlTriggeredGet(
    _md_handle: ptl_handle_md_t,
    _local_offset: ptl_size_t,
    _length: ptl_size_t,
    _target_id: ptl_process_t,
    _pt_index: ptl_pt_index_t,
    _match_bits: ptl_match_bits_t,
    _remote_offset: ptl_size_t,
    _user_ptr: *mut c_void,
    _trig_ct_handle: ptl_handle_ct_t,
    _threshold: ptl_size_t,
) -> c_int {
    triggered()
}

#[no_mangle]
pub extern "C" fn PtlTriggeredAtomic(
    _md_handle: ptl_handle_md_t,
    _local_offset: ptl_size_t,
    _length: ptl_size_t,
    _ack_req: ptl_ack_req_t,
    _target_id: ptl_process_t,
    _pt_index: ptl_pt_index_t,
    _match_bits: ptl_match_bits_t,
    _remote_offset: ptl_size_t,
    _user_ptr: *mut c_void,
    _hdr_data: ptl_hdr_data_t,
    _operation: ptl_op_t,
    _datatype: ptl_datatype_t,
    _trig_ct_handle: ptl_handle_ct_t,
    _threshold: ptl_size_t,
) -> c_int {
    triggered()
}

#[no_mangle]
pub extern "C" fn PtlTriggeredCTInc(
    _ct_handle: ptl_handle_ct_t,
    _increment: ptl_ct_event_t,
    _trig_ct_handle: ptl_handle_ct_t,
    _threshold: ptl_size_t,
) -> c_int {
    triggered()
}

#[no_mangle]
pub extern "C" fn PtlTriggeredCTSet(
    _ct_handle: ptl_handle_ct_t,
    _new_ct: ptl_ct_event_t,
    _trig_ct_handle: ptl_handle_ct_t,
    _threshold: ptl_size_t,
) -> c_int {
    triggered()
}

/// Triggered operations are not implemented (`max_triggered_ops` is 0).
fn triggered() -> c_int {
    rc(with(|_| Err(PTL_ARG_INVALID)))
}

#[no_mangle]
pub extern "C" fn PtlStartBundle(ni_handle: ptl_handle_ni_t) -> c_int {
    rc(with(|s| s.ni(ni_slot(ni_handle)?).map(|_| ())))
}

#[no_mangle]
pub extern "C" fn PtlEndBundle(ni_handle: ptl_handle_ni_t) -> c_int {
    rc(with(|s| {
        s.ni(ni_slot(ni_handle)?)?;
        s.progress();
        Ok(())
    }))
}

#[no_mangle]
pub extern "C" fn PtlHandleIsEqual(handle1: ptl_handle_any_t, handle2: ptl_handle_any_t) -> c_int {
    (handle1 == handle2) as c_int
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain counter that only the state lock protects.
    struct Counter(UnsafeCell<u64>);
    // SAFETY: touched only while holding the state lock (the test's point).
    unsafe impl Sync for Counter {}
    static COUNTER: Counter = Counter(UnsafeCell::new(0));

    #[test]
    fn lwk_state_lock_excludes_threads() {
        const THREADS: u64 = 4;
        const ROUNDS: u64 = 100_000;
        let ts: Vec<_> = (0..THREADS)
            .map(|_| {
                std::thread::spawn(|| {
                    for r in 0..ROUNDS {
                        // Half the rounds as PtlEQGet takes it: try, then wait.
                        let g = if r % 2 == 0 {
                            lock()
                        } else {
                            try_lock().unwrap_or_else(lock)
                        };
                        // SAFETY: the guard is held; a read, a pause and a write that would
                        // lose updates if two threads were inside at once.
                        unsafe {
                            let v = std::ptr::read_volatile(COUNTER.0.get());
                            std::hint::spin_loop();
                            std::ptr::write_volatile(COUNTER.0.get(), v + 1);
                        }
                        drop(g);
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().expect("thread");
        }
        let _g = lock();
        // SAFETY: the guard is held.
        assert_eq!(unsafe { *COUNTER.0.get() }, THREADS * ROUNDS);
    }
}
