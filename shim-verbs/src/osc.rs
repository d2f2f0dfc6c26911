//! Put, get and atomics over verbs for the core's one-sided windows (`osc_verbs`): the BTL
//! interface's RDMA operations ([`stormpi_core::btl::Btl::rdma`]) that the core's `osc::rdma`
//! drives, as Open MPI's `osc/rdma` drives its BTLs'.
//!
//! **Queue pairs of their own.** One RC queue pair per peer beside the BTL's, on a completion
//! queue of its own, connected from the same business card (their numbers under the
//! `btl.verbs.oscqpn.*` modex keys) with remote atomic rights: the BTL's credits and send slots
//! never meet them, and waiting for a window's operations polls only their queue.
//!
//! **Windows.** A part is one memory region (local write, remote read, write and atomic); its
//! card — rkey and address — is gathered from every member at window creation
//! ([`Rdma::card`], [`Rdma::learn`]), so an origin's offset is the target's `address + offset`.
//! Puts and gets of dense buffers are RDMA writes and reads straight from the user's buffer,
//! registered through a registration cache of the module's own (`mpi_leave_pinned`), split at
//! the port's largest message. `MPI_SUM` on 64-bit integers is `IBV_WR_ATOMIC_FETCH_AND_ADD` and
//! 8-byte compare-and-swap `IBV_WR_ATOMIC_CMP_AND_SWP` (all verbs has), at 8-byte-aligned
//! targets; the old value lands in a registered scratch word and is copied to the user's buffer
//! at completion. Every other accumulate stays an active message. Atomics are used only when the
//! device's are atomic against the CPU's (`IBV_ATOMIC_GLOB`), because an operation on the
//! process's own part is done by its CPU (there is no queue pair to oneself).
//!
//! **Completion.** Every work request is signalled; an operation adds one to its window's
//! counter when its last part completes. An error completion fails the counter (the peer and the
//! status are logged) and breaks that queue pair. On the software device the target's side runs
//! when the target calls into the device — in any MPI call that polls the BTL.

use core::ffi::c_int;
use core::ptr;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use stormpi_core::error::Allowed;
use stormpi_core::error::{Error, ErrorClass, Reason, Result};
use stormpi_core::osc::rdma::{AtomicOp, Elem, Rdma};
use stormpi_core::params::{Default, Kind, ParamDef, Params};
use stormpi_core::platform::{Level, Platform};
use verbs_sys::*;

use crate::device::Device;
use crate::endpoint::{self, Card, QpSizes, Retry};
use crate::library::Library;
use crate::rcache::{Bounds, Lease, RegCache, Registrar};

/// `osc_verbs`.
pub static OSC_VERBS: ParamDef = ParamDef {
    name: "osc_verbs",
    kind: Kind::Str,
    default: Default::Str("auto"),
    description: "One-sided windows over the verbs BTL move data by RDMA writes, reads and verbs atomics: auto (when the one-sided queue pairs come up), on (an error at MPI_Init if they cannot), off (every operation is an active message)",
};

/// Operations in flight at once (each has a scratch word for an atomic's old value).
const SLOTS: usize = 4096;
/// Completions taken per poll.
const POLL_BATCH: usize = 32;
/// Send queue depth asked of each queue pair.
const QP_DEPTH: u32 = 512;

/// The modex key of the entry with peer `rank`'s one-sided QPN.
pub fn osc_qpn_key(rank: u32) -> String {
    format!(
        "btl.verbs.oscqpn.{}",
        rank as usize / endpoint::QPNS_PER_KEY
    )
}

/// What `osc_verbs` asks for: `None` off, `Some(required)`.
pub fn wanted(params: &Params) -> Result<Option<bool>> {
    match params.str(&OSC_VERBS).trim() {
        "off" | "0" | "no" | "false" => Ok(None),
        "on" | "1" | "yes" | "true" => Ok(Some(true)),
        "auto" | "" => Ok(Some(false)),
        _ => Err(OSC_VERBS.refused_with(Allowed::Text("auto, on or off"))),
    }
}

struct Qp {
    qp: *mut ibv_qp,
    connected: bool,
    failed: bool,
    /// Work requests outstanding on it.
    sq: u32,
}

/// One window's origin side: its operations' count and failure, and every member's card.
struct Counter {
    done: u64,
    failed: bool,
    cards: HashMap<u32, (u32, u64)>,
}

/// An operation in flight.
struct Op {
    ct: u64,
    proc: u32,
    parts: u32,
    lease: Option<Lease>,
    /// Where an atomic's old value goes (from the slot's scratch word).
    fetch: Option<*mut u8>,
    status: u32,
}

struct Exposure {
    mr: *mut ibv_mr,
    base: u64,
}

struct Registering<'a> {
    lib: &'a Library,
    pd: *mut ibv_pd,
}

impl Registrar for Registering<'_> {
    type Handle = *mut ibv_mr;
    fn register(&mut self, addr: usize, len: usize, access: i32) -> Option<*mut ibv_mr> {
        // SAFETY: a live PD; the caller keeps the memory mapped while registered (the cache's
        // invalidation log sees it go).
        let mr = unsafe { (self.lib.reg_mr)(self.pd, addr as *mut _, len, access) };
        (!mr.is_null()).then_some(mr)
    }
    fn deregister(&mut self, mr: *mut ibv_mr) {
        // SAFETY: a registration of this PD with no operation left on it.
        unsafe { (self.lib.dereg_mr)(mr) };
    }
}

struct State {
    lib: Library,
    pd: *mut ibv_pd,
    cq: *mut ibv_cq,
    qps: Vec<Option<Qp>>,
    rank: u32,
    max_msg: u64,
    /// Send queue depth of each queue pair.
    depth: u32,
    exposures: HashMap<u64, Exposure>,
    next_exposure: u64,
    counters: HashMap<u64, Counter>,
    next_counter: u64,
    ops: Vec<Option<Op>>,
    free: Vec<u32>,
    scratch: Box<[u64]>,
    scratch_mr: *mut ibv_mr,
    cache: RegCache<*mut ibv_mr>,
    closed: bool,
    /// Counters, logged at close.
    puts: u64,
    gets: u64,
    atomics: u64,
    bytes: u64,
}

/// The verbs BTL's one-sided operations (one per process, shared by its windows).
pub struct VerbsRdma {
    state: Mutex<State>,
    atomics: bool,
    platform: &'static dyn Platform,
}

// SAFETY: the raw pointers are this module's verbs objects and the memory windows lend it; the
// state is used only under the mutex (and the engine's lock besides).
unsafe impl Send for State {}
// SAFETY: as above: every access goes through the mutex.
unsafe impl Sync for VerbsRdma {}

fn failed(what: &'static str) -> Error {
    Error::new(ErrorClass::Other, Reason::Transport { btl: "verbs", what })
}

impl VerbsRdma {
    /// Creates the completion queue, scratch words and a queue pair for every peer of a job of
    /// `size` processes (not yet connected) on the BTL's device.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        lib: &Library,
        dev: &Device,
        rank: u32,
        size: u32,
        leave_pinned: bool,
        bounds: Bounds,
        platform: &'static dyn Platform,
    ) -> core::result::Result<VerbsRdma, String> {
        let depth = QP_DEPTH.min(dev.attr.max_qp_wr.max(1) as u32);
        let cqe = SLOTS.min(dev.attr.max_cqe.max(1) as usize);
        // SAFETY: the context is open; the CQ is destroyed in `close`.
        let cq =
            unsafe { (lib.create_cq)(dev.ctx, cqe as c_int, ptr::null_mut(), ptr::null_mut(), 0) };
        if cq.is_null() {
            return Err(format!(
                "ibv_create_cq({cqe}) on {} for one-sided windows failed",
                dev.name
            ));
        }
        let broad = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
        let mut s = State {
            lib: *lib,
            pd: dev.pd,
            cq,
            qps: Vec::new(),
            rank,
            max_msg: dev.max_msg.max(1),
            depth,
            exposures: HashMap::new(),
            next_exposure: 1,
            counters: HashMap::new(),
            next_counter: 1,
            ops: (0..SLOTS).map(|_| None).collect(),
            free: (0..SLOTS as u32).rev().collect(),
            scratch: vec![0u64; SLOTS].into_boxed_slice(),
            scratch_mr: ptr::null_mut(),
            cache: RegCache::new(leave_pinned, bounds, broad),
            closed: false,
            puts: 0,
            gets: 0,
            atomics: 0,
            bytes: 0,
        };
        match dev.register(
            lib,
            s.scratch.as_mut_ptr().cast(),
            SLOTS * 8,
            IBV_ACCESS_LOCAL_WRITE,
        ) {
            Some(mr) => s.scratch_mr = mr,
            None => {
                s.close();
                return Err(format!(
                    "registering the one-sided scratch words on {} failed",
                    dev.name
                ));
            }
        }
        let sizes = QpSizes {
            send_wr: depth,
            inline: 0,
        };
        for r in 0..size {
            if r == rank {
                s.qps.push(None);
                continue;
            }
            match endpoint::create_qp_on(lib, dev, cq, ptr::null_mut(), sizes) {
                Ok((qp, _)) => s.qps.push(Some(Qp {
                    qp,
                    connected: false,
                    failed: false,
                    sq: 0,
                })),
                Err(e) => {
                    s.close();
                    return Err(e);
                }
            }
        }
        let atomics = dev.attr.atomic_cap == IBV_ATOMIC_GLOB;
        Ok(VerbsRdma {
            state: Mutex::new(s),
            atomics,
            platform,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic never happens under the lock; the state stays usable if one did.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The QPNs to publish, one per process (0 for this one).
    pub fn qpns(&self) -> Vec<u32> {
        self.lock()
            .qps
            .iter()
            // SAFETY: live QPs.
            .map(|q| q.as_ref().map_or(0, |q| unsafe { (*q.qp).qp_num }))
            .collect()
    }

    /// Connects the queue pair to peer `rank` (its card, and its QP for us `dest_qpn`).
    #[allow(clippy::too_many_arguments)]
    pub fn connect(
        &self,
        dev: &Device,
        rank: u32,
        card: &Card,
        dest_qpn: u32,
        psn: u32,
        retry: Retry,
    ) -> core::result::Result<(), String> {
        let mut s = self.lock();
        let lib = s.lib;
        let Some(Some(q)) = s.qps.get_mut(rank as usize) else {
            return Ok(());
        };
        endpoint::connect(&lib, dev, q.qp, card, dest_qpn, psn, retry, true)?;
        q.connected = true;
        Ok(())
    }

    /// Destroys everything (at the BTL's finalize, before the device closes); logs the counts.
    pub fn close(&self) {
        let mut s = self.lock();
        if s.closed {
            return;
        }
        if self.platform.log_enabled(Level::Info) {
            self.platform.log(
                Level::Info,
                format_args!(
                    "verbs one-sided: {} RDMA writes, {} RDMA reads ({} bytes), {} atomics",
                    s.puts, s.gets, s.bytes, s.atomics
                ),
            );
        }
        s.close();
    }
}

impl State {
    fn close(&mut self) {
        let lib = self.lib;
        for q in self.qps.iter_mut().flatten() {
            // SAFETY: our QP, destroyed once.
            unsafe { (lib.destroy_qp)(q.qp) };
        }
        self.qps.clear();
        let pd = self.pd;
        self.cache.clear(&mut Registering { lib: &lib, pd });
        for (_, x) in self.exposures.drain() {
            // SAFETY: our registration, deregistered once.
            unsafe { (lib.dereg_mr)(x.mr) };
        }
        if !self.scratch_mr.is_null() {
            // SAFETY: as above.
            unsafe { (lib.dereg_mr)(self.scratch_mr) };
            self.scratch_mr = ptr::null_mut();
        }
        if !self.cq.is_null() {
            // SAFETY: our CQ, its QPs gone.
            unsafe { (lib.destroy_cq)(self.cq) };
            self.cq = ptr::null_mut();
        }
        self.closed = true;
    }

    /// Takes the completions there are; logs failures with the peer's rank.
    fn poll(&mut self, platform: &dyn Platform) {
        if self.closed {
            return;
        }
        let mut wcs = [ibv_wc::default(); POLL_BATCH];
        loop {
            // SAFETY: a live CQ; `wcs` has room for POLL_BATCH entries.
            let got = unsafe { ibv_poll_cq(self.cq, POLL_BATCH as c_int, wcs.as_mut_ptr()) };
            if got <= 0 {
                break;
            }
            for wc in &wcs[..got as usize] {
                self.completed(wc, platform);
            }
            if (got as usize) < POLL_BATCH {
                break;
            }
        }
    }

    fn completed(&mut self, wc: &ibv_wc, platform: &dyn Platform) {
        let slot = wc.wr_id as usize;
        let Some(op) = self.ops.get_mut(slot).and_then(|o| o.as_mut()) else {
            return;
        };
        if wc.status != IBV_WC_SUCCESS && op.status == IBV_WC_SUCCESS {
            op.status = wc.status;
        }
        op.parts -= 1;
        let proc = op.proc;
        if let Some(Some(q)) = self.qps.get_mut(proc as usize) {
            q.sq = q.sq.saturating_sub(1);
            if wc.status != IBV_WC_SUCCESS {
                q.failed = true;
            }
        }
        if op.parts > 0 {
            return;
        }
        let Some(op) = self.ops[slot].take() else {
            return;
        };
        self.free.push(slot as u32);
        if let Some(l) = op.lease {
            let lib = self.lib;
            let pd = self.pd;
            self.cache.release(&mut Registering { lib: &lib, pd }, l);
        }
        let ok = op.status == IBV_WC_SUCCESS;
        if let (true, Some(dst)) = (ok, op.fetch) {
            let v = self.scratch[slot].to_ne_bytes();
            // SAFETY: the caller of `atomic`/`compare_swap` keeps `dst` writable for 8 bytes
            // until the operation is counted, which is now.
            unsafe { ptr::copy_nonoverlapping(v.as_ptr(), dst, 8) };
        }
        if !ok {
            let why = self.lib.status(op.status);
            platform.log(
                Level::Error,
                format_args!("verbs one-sided: an operation on rank {proc} failed: {why}"),
            );
        }
        if let Some(c) = self.counters.get_mut(&op.ct) {
            c.done += 1;
            c.failed |= !ok;
        }
    }

    /// A free operation slot, polling until one is.
    fn slot(&mut self, platform: &dyn Platform) -> u32 {
        loop {
            if let Some(s) = self.free.pop() {
                return s;
            }
            self.poll(platform);
        }
    }

    /// The target's card for counter `ct`: (rkey, address).
    fn card(&self, ct: u64, proc: u32) -> Result<(u32, u64)> {
        self.counters
            .get(&ct)
            .and_then(|c| c.cards.get(&proc).copied())
            .ok_or_else(|| {
                failed("a one-sided operation to a process whose window part is unknown")
            })
    }

    /// The queue pair to `proc`, with room for `n` more work requests (polling for it).
    fn room(&mut self, proc: u32, n: u32, platform: &dyn Platform) -> Result<*mut ibv_qp> {
        loop {
            match self.qps.get(proc as usize) {
                Some(Some(q)) if q.connected && !q.failed => {
                    if q.sq + n <= self.depth {
                        return Ok(q.qp);
                    }
                }
                _ => return Err(failed("the one-sided queue pair to a peer is not usable")),
            }
            self.poll(platform);
        }
    }

    /// Counts an operation done by the CPU on this process's own part.
    fn count_local(&mut self, ct: u64) {
        if let Some(c) = self.counters.get_mut(&ct) {
            c.done += 1;
        }
    }

    /// Posts an RDMA write or read of `len` bytes between `local` and `remote` to `proc`, in
    /// parts of at most the port's largest message, counted once on `ct`.
    #[allow(clippy::too_many_arguments)]
    fn transfer(
        &mut self,
        ct: u64,
        proc: u32,
        opcode: u32,
        local: *mut u8,
        remote: u64,
        rkey: u32,
        len: usize,
        platform: &dyn Platform,
    ) -> Result<()> {
        let parts = (len as u64).div_ceil(self.max_msg).max(1);
        if parts > u64::from(self.depth) {
            return Err(failed(
                "a one-sided transfer larger than the queue pair can carry",
            ));
        }
        let qp = self.room(proc, parts as u32, platform)?;
        let access = if opcode == IBV_WR_RDMA_READ {
            IBV_ACCESS_LOCAL_WRITE
        } else {
            0
        };
        let lib = self.lib;
        let pd = self.pd;
        let Some((lease, mr)) = self.cache.acquire(
            &mut Registering { lib: &lib, pd },
            local as usize,
            len,
            access,
        ) else {
            return Err(failed("registering a one-sided buffer failed"));
        };
        let slot = self.slot(platform);
        self.ops[slot as usize] = Some(Op {
            ct,
            proc,
            parts: 0,
            lease: Some(lease),
            fetch: None,
            status: IBV_WC_SUCCESS,
        });
        let mut at = 0u64;
        while at < len as u64 || at == 0 {
            let n = (len as u64 - at).min(self.max_msg);
            let mut sge = ibv_sge {
                addr: local as u64 + at,
                length: n as u32,
                // SAFETY: a live registration covering the buffer.
                lkey: unsafe { (*mr).lkey },
            };
            // SAFETY: all-zero is a valid work request (a plain C struct).
            let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
            wr.wr_id = u64::from(slot);
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
            wr.opcode = opcode;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.wr.rdma = ibv_send_wr_rdma {
                remote_addr: remote + at,
                rkey,
            };
            let mut bad = ptr::null_mut();
            // SAFETY: a live, connected QP; the work request and its list live across the call;
            // the buffer stays registered and lent until the operation completes.
            let rc = unsafe { ibv_post_send(qp, &mut wr, &mut bad) };
            if let Some(op) = self.ops[slot as usize].as_mut() {
                if rc == 0 {
                    op.parts += 1;
                } else if op.status == IBV_WC_SUCCESS {
                    op.status = IBV_WC_LOC_QP_OP_ERR;
                }
            }
            if rc != 0 {
                break;
            }
            if let Some(Some(q)) = self.qps.get_mut(proc as usize) {
                q.sq += 1;
            }
            at += n;
            if len == 0 {
                break;
            }
        }
        let posted = self.ops[slot as usize].as_ref().map_or(0, |o| o.parts);
        if posted == 0 {
            // Nothing went: the operation is not counted.
            if let Some(op) = self.ops[slot as usize].take() {
                if let Some(l) = op.lease {
                    self.cache.release(&mut Registering { lib: &lib, pd }, l);
                }
            }
            self.free.push(slot);
            return Err(failed("posting a one-sided RDMA operation failed"));
        }
        if opcode == IBV_WR_RDMA_READ {
            self.gets += 1;
        } else {
            self.puts += 1;
        }
        self.bytes += len as u64;
        Ok(())
    }

    /// Posts a verbs atomic on the word at `remote` of `proc`, its old value into `fetch`.
    #[allow(clippy::too_many_arguments)]
    fn atomic(
        &mut self,
        ct: u64,
        proc: u32,
        opcode: u32,
        remote: u64,
        rkey: u32,
        compare_add: u64,
        swap: u64,
        fetch: Option<*mut u8>,
        platform: &dyn Platform,
    ) -> Result<()> {
        let qp = self.room(proc, 1, platform)?;
        let slot = self.slot(platform);
        let mut sge = ibv_sge {
            addr: self.scratch.as_ptr() as u64 + 8 * u64::from(slot),
            length: 8,
            // SAFETY: registered at creation.
            lkey: unsafe { (*self.scratch_mr).lkey },
        };
        // SAFETY: all-zero is a valid work request (a plain C struct).
        let mut wr: ibv_send_wr = unsafe { core::mem::zeroed() };
        wr.wr_id = u64::from(slot);
        wr.sg_list = &mut sge;
        wr.num_sge = 1;
        wr.opcode = opcode;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.atomic = ibv_send_wr_atomic {
            remote_addr: remote,
            compare_add,
            swap,
            rkey,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: a live, connected QP; the work request and its list live across the call; the
        // scratch word is the slot's until the completion.
        let rc = unsafe { ibv_post_send(qp, &mut wr, &mut bad) };
        if rc != 0 {
            self.free.push(slot);
            return Err(failed("posting a one-sided atomic failed"));
        }
        self.ops[slot as usize] = Some(Op {
            ct,
            proc,
            parts: 1,
            lease: None,
            fetch,
            status: IBV_WC_SUCCESS,
        });
        if let Some(Some(q)) = self.qps.get_mut(proc as usize) {
            q.sq += 1;
        }
        self.atomics += 1;
        Ok(())
    }
}

/// The 8-byte word at `addr`, as an atomic (this process's own part).
///
/// # Safety
/// `addr` is 8-byte aligned inside a live exposure of this process.
unsafe fn word<'a>(addr: u64) -> &'a AtomicU64 {
    // SAFETY: the caller's contract; the device's atomics on it are atomic against ours
    // (`IBV_ATOMIC_GLOB`, required for atomics).
    unsafe { AtomicU64::from_ptr(addr as usize as *mut u64) }
}

impl Rdma for VerbsRdma {
    fn max_atomic(&self) -> usize {
        8
    }

    fn has_atomic(&self, op: AtomicOp, elem: Elem) -> bool {
        self.atomics && op == AtomicOp::Sum && matches!(elem, Elem::Int(8) | Elem::Uint(8))
    }

    fn has_compare_swap(&self, elem: Elem) -> bool {
        self.atomics && elem.size() == 8
    }

    fn atomic_get(&self) -> bool {
        // An RDMA read is not ordered with the adapter's atomics on the same word.
        false
    }

    fn atomic_align(&self) -> u64 {
        8
    }

    fn reaches(&self, proc: u32) -> bool {
        let s = self.lock();
        proc == s.rank
            || matches!(s.qps.get(proc as usize), Some(Some(q)) if q.connected && !q.failed)
    }

    fn expose(&self, key: u64, base: *mut u8, len: usize) -> Result<u64> {
        let _ = key;
        let mut s = self.lock();
        if s.closed || (self.atomics && !(base as usize).is_multiple_of(8)) {
            // A part off the atomics' alignment: the window goes by messages.
            return Err(failed("a window part the verbs atomics cannot reach"));
        }
        let mut access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
        if self.atomics {
            access |= IBV_ACCESS_REMOTE_ATOMIC;
        }
        // SAFETY: a live PD; the window keeps its memory until `withdraw`.
        let mr = unsafe { (s.lib.reg_mr)(s.pd, base.cast(), len, access) };
        if mr.is_null() {
            return Err(failed("registering a window part failed"));
        }
        let h = s.next_exposure;
        s.next_exposure += 1;
        s.exposures.insert(
            h,
            Exposure {
                mr,
                base: base as u64,
            },
        );
        Ok(h)
    }

    fn withdraw(&self, handle: u64) {
        let mut s = self.lock();
        if let Some(x) = s.exposures.remove(&handle) {
            // SAFETY: our registration, no operation in flight to it (the window's last
            // barrier).
            unsafe { (s.lib.dereg_mr)(x.mr) };
        }
    }

    fn card(&self, handle: Option<u64>) -> (u32, u64) {
        let s = self.lock();
        match handle.and_then(|h| s.exposures.get(&h)) {
            // SAFETY: a live registration.
            Some(x) => (unsafe { (*x.mr).rkey }, x.base),
            None => (0, 0),
        }
    }

    fn learn(&self, ct: u64, proc: u32, card: (u32, u64)) -> Result<()> {
        let mut s = self.lock();
        let c = s
            .counters
            .get_mut(&ct)
            .ok_or_else(|| failed("a window's counter is unknown"))?;
        c.cards.insert(proc, card);
        Ok(())
    }

    fn counter(&self) -> Result<u64> {
        let mut s = self.lock();
        if s.closed {
            return Err(failed("the verbs BTL is closed"));
        }
        let ct = s.next_counter;
        s.next_counter += 1;
        s.counters.insert(
            ct,
            Counter {
                done: 0,
                failed: false,
                cards: HashMap::new(),
            },
        );
        Ok(ct)
    }

    fn release_counter(&self, ct: u64) {
        self.lock().counters.remove(&ct);
    }

    fn completed(&self, ct: u64) -> Result<u64> {
        let mut s = self.lock();
        s.poll(self.platform);
        match s.counters.get(&ct) {
            Some(c) if c.failed => Err(failed(
                "a one-sided operation over verbs failed (see the message above)",
            )),
            Some(c) => Ok(c.done),
            None => Err(failed("a window's counter is unknown")),
        }
    }

    unsafe fn put(
        &self,
        ct: u64,
        proc: u32,
        key: u64,
        off: u64,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        let _ = key;
        let mut s = self.lock();
        let (rkey, base) = s.card(ct, proc)?;
        if proc == s.rank {
            // SAFETY: the origin checked `off + len` against the part; MPI lends `src`.
            unsafe { ptr::copy(src, (base + off) as usize as *mut u8, len) };
            s.count_local(ct);
            return Ok(());
        }
        s.transfer(
            ct,
            proc,
            IBV_WR_RDMA_WRITE,
            src as *mut u8,
            base + off,
            rkey,
            len,
            self.platform,
        )
    }

    unsafe fn get(
        &self,
        ct: u64,
        proc: u32,
        key: u64,
        off: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        let _ = key;
        let mut s = self.lock();
        let (rkey, base) = s.card(ct, proc)?;
        if proc == s.rank {
            // SAFETY: as in `put`.
            unsafe { ptr::copy((base + off) as usize as *const u8, dst, len) };
            s.count_local(ct);
            return Ok(());
        }
        s.transfer(
            ct,
            proc,
            IBV_WR_RDMA_READ,
            dst,
            base + off,
            rkey,
            len,
            self.platform,
        )
    }

    unsafe fn atomic(
        &self,
        ct: u64,
        proc: u32,
        key: u64,
        off: u64,
        src: *const u8,
        fetch: Option<*mut u8>,
        len: usize,
        op: AtomicOp,
        elem: Elem,
    ) -> Result<()> {
        let _ = key;
        if !self.has_atomic(op, elem) || len != 8 {
            return Err(failed("a verbs atomic other than an 8-byte sum"));
        }
        // SAFETY: `src` holds 8 bytes (the caller's contract).
        let add = unsafe { ptr::read_unaligned(src.cast::<u64>()) };
        let mut s = self.lock();
        let (rkey, base) = s.card(ct, proc)?;
        let at = base + off;
        if !at.is_multiple_of(8) {
            return Err(failed("a verbs atomic on a word not 8-byte aligned"));
        }
        if proc == s.rank {
            // SAFETY: aligned (checked), inside our part (the origin checked the range).
            let old = unsafe { word(at) }.fetch_add(add, Ordering::SeqCst);
            if let Some(f) = fetch {
                // SAFETY: the caller lends 8 writable bytes.
                unsafe { ptr::copy_nonoverlapping(old.to_ne_bytes().as_ptr(), f, 8) };
            }
            s.count_local(ct);
            return Ok(());
        }
        s.atomic(
            ct,
            proc,
            IBV_WR_ATOMIC_FETCH_AND_ADD,
            at,
            rkey,
            add,
            0,
            fetch,
            self.platform,
        )
    }

    unsafe fn compare_swap(
        &self,
        ct: u64,
        proc: u32,
        key: u64,
        off: u64,
        new: *const u8,
        compare: *const u8,
        old: *mut u8,
        elem: Elem,
    ) -> Result<()> {
        let _ = key;
        if !self.has_compare_swap(elem) {
            return Err(failed("a verbs compare-and-swap of other than 8 bytes"));
        }
        // SAFETY: each holds one 8-byte element (the caller's contract).
        let (new, compare) = unsafe {
            (
                ptr::read_unaligned(new.cast::<u64>()),
                ptr::read_unaligned(compare.cast::<u64>()),
            )
        };
        let mut s = self.lock();
        let (rkey, base) = s.card(ct, proc)?;
        let at = base + off;
        if !at.is_multiple_of(8) {
            return Err(failed("a verbs atomic on a word not 8-byte aligned"));
        }
        if proc == s.rank {
            let sc = Ordering::SeqCst;
            // SAFETY: as in `atomic`.
            let (Ok(v) | Err(v)) = unsafe { word(at) }.compare_exchange(compare, new, sc, sc);
            // SAFETY: the caller lends 8 writable bytes.
            unsafe { ptr::copy_nonoverlapping(v.to_ne_bytes().as_ptr(), old, 8) };
            s.count_local(ct);
            return Ok(());
        }
        s.atomic(
            ct,
            proc,
            IBV_WR_ATOMIC_CMP_AND_SWP,
            at,
            rkey,
            compare,
            new,
            Some(old),
            self.platform,
        )
    }
}
