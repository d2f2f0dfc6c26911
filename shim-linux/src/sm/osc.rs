//! Single-copy one-sided operations between processes of a node (`osc_sm_single_copy`): the
//! `sm` BTL's put and get for the core's windows ([`stormpi_core::btl::Btl::rdma`]), as Open
//! MPI's `osc/rdma` drives a BTL with CMA.
//!
//! A window over the user's memory (`MPI_Win_create`) cannot be mapped by its peers, but on one
//! node its memory can be written and read by the kernel on a peer's behalf: a put is
//! `process_vm_writev` into the target at its part's address plus the offset, a get is
//! `process_vm_readv`. Both are done when the call returns, so a flush has nothing to wait for.
//! A part's card is the owner's process id and the part's address; an origin trusts a peer's
//! process id only after reading the start of the peer's sm segment header through it and
//! finding what the peer wrote in its segment file (the check of the BTL's single-copy reads,
//! here against the file so that it does not depend on the BTL having mapped the segment).
//! There are no atomics: accumulates, fetch-and-op and compare-and-swap stay active messages,
//! applied by the target's library. Windows the engine allocates on one node keep their shared
//! segment and never come here.
//!
//! Off by default: on the machines at hand one `process_vm_writev` costs about 2 µs, whatever
//! the size up to a page, against 0.2-1 µs for an active message through the sm rings, and large
//! transfers measured slower too (see the README's one-sided benchmark).
//!
//! A call the kernel refuses later (permission withdrawn, an unmapped address) fails the
//! operation with an error naming the cause; a refusal by policy also sends every window
//! created afterwards by active messages.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use stormpi_core::error::{Error, ErrorClass, Reason, Result};
use stormpi_core::osc::rdma::{AtomicOp, Elem, Rdma};
use stormpi_core::params::{Default, Kind, ParamDef};
use stormpi_core::platform::{Level, Platform};

use super::cma;
use super::segment::recorded_origin;

/// `osc_sm_single_copy`.
pub static OSC_SM_SINGLE_COPY: ParamDef = ParamDef {
    name: "osc_sm_single_copy",
    kind: Kind::Str,
    default: Default::Str("off"),
    description: "Windows over the user's memory (MPI_Win_create) whose processes are all on \
                  this node put and get with process_vm_writev/readv: auto (where the kernel \
                  allows it), on (start fails if it does not) or off (the default: active \
                  messages through the rings measured faster, see the README)",
};

/// Whether origins may reach a local peer's memory.
enum Reach {
    /// Not checked yet; its sm segment file.
    Unchecked(PathBuf),
    /// Checked: its memory is reached through this process id.
    Pid(u32),
    /// Refused (logged once).
    Refused,
}

/// One window's origin side: its operations done and each member's card (process id, part
/// address).
#[derive(Default)]
struct Counter {
    done: u64,
    cards: HashMap<u32, (u32, u64)>,
}

#[derive(Default)]
struct State {
    peers: HashMap<u32, Reach>,
    exposures: HashMap<u64, u64>,
    next_exposure: u64,
    counters: HashMap<u64, Counter>,
    next_counter: u64,
    /// Set when the kernel refused a call by policy: no new window comes here.
    refused: bool,
    writes: u64,
    reads: u64,
    bytes: u64,
    closed: bool,
}

/// The sm BTL's single-copy one-sided operations (one per process, shared by its windows).
pub struct SmRdma {
    state: Mutex<State>,
    me: u32,
    pid: u32,
    platform: &'static dyn Platform,
}

impl SmRdma {
    /// For process `me`, whose own single-copy probe succeeded.
    pub(crate) fn new(me: u32, platform: &'static dyn Platform) -> SmRdma {
        SmRdma {
            state: Mutex::new(State::default()),
            me,
            pid: std::process::id(),
            platform,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics under the lock; the state stays usable if something did.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the other processes of this node and their sm segment files.
    pub(crate) fn add_peers(&self, peers: impl Iterator<Item = (u32, PathBuf)>) {
        let mut s = self.lock();
        for (proc, path) in peers {
            if proc != self.me {
                s.peers.insert(proc, Reach::Unchecked(path));
            }
        }
    }

    /// Logs what went by single copy (at finalize).
    pub(crate) fn close(&self) {
        let mut s = self.lock();
        if s.closed {
            return;
        }
        s.closed = true;
        if self.platform.log_enabled(Level::Info) {
            self.platform.log(
                Level::Info,
                format_args!(
                    "sm one-sided: {} single-copy writes, {} single-copy reads ({} bytes)",
                    s.writes, s.reads, s.bytes
                ),
            );
        }
    }

    /// Checks peer `proc`'s process id: the start of its segment header read through it must be
    /// what its segment file holds.
    fn check(&self, proc: u32, path: &Path) -> Reach {
        let refuse = |what: &str, e: Option<io::Error>| {
            if self.platform.log_enabled(Level::Info) {
                let e = e.map(|e| format!(" ({e})")).unwrap_or_default();
                self.platform.log(
                    Level::Info,
                    format_args!(
                        "sm one-sided: no single copy to rank {proc}: {what}{e}; its windows \
                         use active messages"
                    ),
                );
            }
            Reach::Refused
        };
        let (pid, base, want) = match recorded_origin(path) {
            Ok(Some(x)) => x,
            Ok(None) => return refuse("its segment is not ready", None),
            Err(e) => return refuse("its segment file cannot be read", Some(e)),
        };
        let mut got = [0u8; 64];
        let n = want.len().min(got.len());
        // SAFETY: `got` is ours and holds `n` bytes.
        match unsafe { cma::read(pid, base, got.as_mut_ptr(), n) } {
            Ok(()) if got[..n] == want[..n] => Reach::Pid(pid),
            Ok(()) => refuse(
                "its recorded process id names another process here (pid namespace?)",
                None,
            ),
            Err(e) => refuse("process_vm_readv of its segment header failed", Some(e)),
        }
    }

    /// The error of a refused call, naming the cause; logs the system's text.
    fn failure(&self, s: &mut State, write: bool, proc: u32, len: usize, e: &io::Error) -> Error {
        let call = if write {
            "process_vm_writev"
        } else {
            "process_vm_readv"
        };
        self.platform.log(
            Level::Error,
            format_args!("sm one-sided: {call} of {len} bytes at rank {proc}'s window failed: {e}"),
        );
        if cma::is_policy(e) {
            s.refused = true;
        }
        let what = match (write, e.raw_os_error()) {
            (true, Some(libc::EPERM) | Some(libc::EACCES)) => {
                "one-sided put: process_vm_writev was refused (EPERM): permission withdrawn"
            }
            (false, Some(libc::EPERM) | Some(libc::EACCES)) => {
                "one-sided get: process_vm_readv was refused (EPERM): permission withdrawn"
            }
            (true, Some(libc::EFAULT)) => {
                "one-sided put: process_vm_writev hit an unwritable address in the target's \
                 window (EFAULT)"
            }
            (false, Some(libc::EFAULT)) => {
                "one-sided get: process_vm_readv hit an unreadable address in the target's \
                 window (EFAULT)"
            }
            (_, Some(libc::ESRCH)) => "one-sided operation: the target process is gone (ESRCH)",
            (true, _) => "one-sided put: process_vm_writev failed",
            (false, _) => "one-sided get: process_vm_readv failed",
        };
        Error::new(ErrorClass::Other, Reason::Transport { btl: "sm", what })
    }

    /// Where `proc`'s part of counter `ct`'s window is: (process id, address).
    fn card(s: &State, ct: u64, proc: u32) -> Result<(u32, u64)> {
        s.counters
            .get(&ct)
            .and_then(|c| c.cards.get(&proc))
            .copied()
            .filter(|&(_, base)| base != 0)
            .ok_or(Error::new(
                ErrorClass::Other,
                Reason::Transport {
                    btl: "sm",
                    what: "one-sided operation to a process whose window part is unknown",
                },
            ))
    }

    fn count(s: &mut State, ct: u64) {
        if let Some(c) = s.counters.get_mut(&ct) {
            c.done += 1;
        }
    }
}

impl Rdma for SmRdma {
    fn max_atomic(&self) -> usize {
        8
    }

    fn has_atomic(&self, _: AtomicOp, _: Elem) -> bool {
        false
    }

    fn has_compare_swap(&self, _: Elem) -> bool {
        false
    }

    fn atomic_get(&self) -> bool {
        // Accumulates are applied by the target's library: a read is not atomic with them.
        false
    }

    fn reaches(&self, proc: u32) -> bool {
        if proc == self.me {
            return !self.lock().refused;
        }
        let mut s = self.lock();
        if s.refused {
            return false;
        }
        let path = match s.peers.get(&proc) {
            Some(Reach::Pid(_)) => return true,
            Some(Reach::Refused) | None => return false,
            Some(Reach::Unchecked(path)) => path.clone(),
        };
        let r = self.check(proc, &path);
        let ok = matches!(r, Reach::Pid(_));
        s.peers.insert(proc, r);
        ok
    }

    fn expose(&self, _key: u64, base: *mut u8, _len: usize) -> Result<u64> {
        let mut s = self.lock();
        s.next_exposure += 1;
        let h = s.next_exposure;
        s.exposures.insert(h, base as u64);
        Ok(h)
    }

    fn withdraw(&self, handle: u64) {
        self.lock().exposures.remove(&handle);
    }

    fn card(&self, handle: Option<u64>) -> (u32, u64) {
        match handle.and_then(|h| self.lock().exposures.get(&h).copied()) {
            Some(base) => (self.pid, base),
            None => (0, 0),
        }
    }

    fn learn(&self, ct: u64, proc: u32, card: (u32, u64)) -> Result<()> {
        let mut s = self.lock();
        // The process id checked against the peer's segment, not the one it believes it has.
        let pid = match s.peers.get(&proc) {
            Some(Reach::Pid(pid)) => *pid,
            _ => card.0,
        };
        match s.counters.get_mut(&ct) {
            Some(c) => {
                c.cards.insert(proc, (pid, card.1));
                Ok(())
            }
            None => Err(Error::bad_arg("sm one-sided: unknown window counter")),
        }
    }

    fn counter(&self) -> Result<u64> {
        let mut s = self.lock();
        s.next_counter += 1;
        let ct = s.next_counter;
        s.counters.insert(ct, Counter::default());
        Ok(ct)
    }

    fn release_counter(&self, ct: u64) {
        self.lock().counters.remove(&ct);
    }

    fn completed(&self, ct: u64) -> Result<u64> {
        Ok(self.lock().counters.get(&ct).map_or(0, |c| c.done))
    }

    unsafe fn put(
        &self,
        ct: u64,
        proc: u32,
        _key: u64,
        off: u64,
        src: *const u8,
        len: usize,
    ) -> Result<()> {
        let mut s = self.lock();
        let (pid, base) = Self::card(&s, ct, proc)?;
        let at = base.wrapping_add(off);
        if proc == self.me {
            // SAFETY: the core checked `off + len` against this process's part, which MPI lends
            // the window; the origin buffer may overlap it (a put to oneself), hence a move.
            unsafe { core::ptr::copy(src, at as *mut u8, len) };
        } else {
            // SAFETY: the caller lends `src` for reading `len` bytes.
            if let Err(e) = unsafe { cma::write(pid, at, src, len) } {
                return Err(self.failure(&mut s, true, proc, len, &e));
            }
        }
        s.writes += 1;
        s.bytes += len as u64;
        Self::count(&mut s, ct);
        Ok(())
    }

    unsafe fn get(
        &self,
        ct: u64,
        proc: u32,
        _key: u64,
        off: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        let mut s = self.lock();
        let (pid, base) = Self::card(&s, ct, proc)?;
        let at = base.wrapping_add(off);
        if proc == self.me {
            // SAFETY: as in `put`, the other way round.
            unsafe { core::ptr::copy(at as *const u8, dst, len) };
        } else {
            // SAFETY: the caller lends `dst` for writing `len` bytes.
            if let Err(e) = unsafe { cma::read(pid, at, dst, len) } {
                return Err(self.failure(&mut s, false, proc, len, &e));
            }
        }
        s.reads += 1;
        s.bytes += len as u64;
        Self::count(&mut s, ct);
        Ok(())
    }

    unsafe fn atomic(
        &self,
        _: u64,
        _: u32,
        _: u64,
        _: u64,
        _: *const u8,
        _: Option<*mut u8>,
        _: usize,
        _: AtomicOp,
        _: Elem,
    ) -> Result<()> {
        Err(Error::unsupported(
            "sm one-sided: no atomics by single copy (accumulates are active messages)",
        ))
    }

    unsafe fn compare_swap(
        &self,
        _: u64,
        _: u32,
        _: u64,
        _: u64,
        _: *const u8,
        _: *const u8,
        _: *mut u8,
        _: Elem,
    ) -> Result<()> {
        Err(Error::unsupported(
            "sm one-sided: no compare-and-swap by single copy (an active message)",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::LinuxPlatform;

    static PLATFORM: LinuxPlatform = LinuxPlatform::new();

    /// A window of this process seen as two members: itself (rank 0) and "rank 1", whose card
    /// names this process too, at `base`.
    fn window(r: &SmRdma, mine: &mut [u8], base: u64) -> u64 {
        let ct = r.counter().unwrap();
        let h = r.expose(7, mine.as_mut_ptr(), mine.len()).unwrap();
        r.learn(ct, 0, r.card(Some(h))).unwrap();
        r.learn(ct, 1, (std::process::id(), base)).unwrap();
        ct
    }

    #[test]
    fn puts_and_gets_complete_at_once() {
        if cma::probe_self().is_err() {
            eprintln!("SKIPPED: process_vm_readv is not permitted on this machine");
            return;
        }
        let r = SmRdma::new(0, &PLATFORM);
        let mut mine = [0u8; 16];
        let mut theirs = [0u8; 16];
        let ct = window(&r, &mut mine, theirs.as_mut_ptr() as u64);
        let src = *b"single-copy put!";
        let mut back = [0u8; 8];
        // SAFETY: the buffers are locals that outlive the calls, which complete at once.
        unsafe {
            r.put(ct, 1, 7, 0, src.as_ptr(), 16).unwrap();
            r.put(ct, 0, 7, 4, src.as_ptr(), 4).unwrap();
            r.get(ct, 1, 7, 7, back.as_mut_ptr(), 8).unwrap();
        }
        assert_eq!(r.completed(ct).unwrap(), 3);
        assert_eq!(&theirs, b"single-copy put!");
        assert_eq!(&mine[4..8], b"sing");
        assert_eq!(&back, b"copy put");
    }

    #[test]
    fn a_refused_write_is_an_error_naming_the_cause() {
        if cma::probe_self().is_err() {
            eprintln!("SKIPPED: process_vm_readv is not permitted on this machine");
            return;
        }
        let r = SmRdma::new(0, &PLATFORM);
        let mut mine = [0u8; 8];
        // Page 1 is never mapped: the kernel answers EFAULT.
        let ct = window(&r, &mut mine, 4096);
        let src = [1u8; 8];
        // SAFETY: `src` is a local that outlives the call.
        let e = unsafe { r.put(ct, 1, 7, 0, src.as_ptr(), 8) }.unwrap_err();
        assert_eq!(e.class, ErrorClass::Other);
        assert!(format!("{e}").contains("EFAULT"), "{e}");
        assert_eq!(r.completed(ct).unwrap(), 0);
    }

    #[test]
    fn there_are_no_atomics() {
        let r = SmRdma::new(0, &PLATFORM);
        assert!(!r.has_atomic(AtomicOp::Sum, Elem::Int(8)));
        assert!(!r.has_compare_swap(Elem::Uint(8)));
        assert!(!r.atomic_get());
        assert!(r.reaches(0) && !r.reaches(1));
    }
}
