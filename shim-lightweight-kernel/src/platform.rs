//! The node platform: monotonic clock, spinning (or yielding when ranks share cores), logging,
//! and the engine's memory from one region reserved at init.
//!
//! Memory: a node has no overcommitting heap to lean on, so at init the shim reserves the whole
//! bound (`mpi_memory_max`) as one anonymous mapping without swap reservation (`MAP_NORESERVE`:
//! address space only; pages are committed as they are first touched) and hands the engine its
//! init region and every later grant from it by bumping an offset — no system call after init.

use std::io::Write;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use stormpi_core::memory::GRANT_ALIGN;
use stormpi_core::params::{Default, Kind, ParamDef};
use stormpi_core::platform::{Level, Platform};

/// `mpi_yield_when_idle`.
pub static YIELD_WHEN_IDLE: ParamDef = ParamDef {
    name: "mpi_yield_when_idle",
    kind: Kind::Int { min: -1, max: 1 },
    default: Default::Int(-1),
    description:
        "Yield the core in wait loops: 1 always, 0 never (spin), -1 when ranks on the node outnumber cores",
};

/// `mpi_log_level`.
pub static LOG_LEVEL: ParamDef = ParamDef {
    name: "mpi_log_level",
    kind: Kind::Int { min: 0, max: 3 },
    default: Default::Int(1),
    description: "Log records emitted: 0 errors, 1 warnings, 2 info, 3 debug",
};

/// `mpi_spin_rounds`.
pub static SPIN_ROUNDS: ParamDef = ParamDef {
    name: "mpi_spin_rounds",
    kind: Kind::Int {
        min: 0,
        max: 1 << 30,
    },
    default: Default::Int(100),
    description: "Idle progress rounds a wait spins before it starts yielding the core",
};

/// Parameters of the node platform.
pub static PARAMS: [&ParamDef; 3] = [&YIELD_WHEN_IDLE, &LOG_LEVEL, &SPIN_ROUNDS];

/// The node platform.
pub struct LwkPlatform {
    rank: AtomicU32,
    node: AtomicU32,
    yield_when_idle: AtomicBool,
    log_level: AtomicU32,
    spin_rounds: AtomicU32,
    /// The reserved region: start address (0 before [`LwkPlatform::reserve`]), length, bytes
    /// handed out.
    region: AtomicUsize,
    region_len: AtomicUsize,
    region_used: AtomicUsize,
    memory_default: AtomicUsize,
}

/// The smallest default bound on an engine's memory on a node.
pub const MEMORY_DEFAULT_MIN: usize = 2 << 30;

/// The default bound on one engine's memory: half the node's memory shared among the ranks on
/// it, at least [`MEMORY_DEFAULT_MIN`].
pub fn memory_default(local_ranks: usize) -> usize {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let physical = if pages > 0 && page > 0 {
        (pages as usize).saturating_mul(page as usize)
    } else {
        0
    };
    (physical / 2 / local_ranks.max(1)).max(MEMORY_DEFAULT_MIN)
}

impl LwkPlatform {
    /// A platform that knows nothing yet.
    pub const fn new() -> LwkPlatform {
        LwkPlatform {
            rank: AtomicU32::new(u32::MAX),
            node: AtomicU32::new(0),
            yield_when_idle: AtomicBool::new(false),
            log_level: AtomicU32::new(1),
            spin_rounds: AtomicU32::new(100),
            region: AtomicUsize::new(0),
            region_len: AtomicUsize::new(0),
            region_used: AtomicUsize::new(0),
            memory_default: AtomicUsize::new(MEMORY_DEFAULT_MIN),
        }
    }

    /// Sets the default bound on the engine's memory (see [`memory_default`]).
    pub fn set_memory_default(&self, bytes: usize) {
        self.memory_default.store(bytes, Ordering::Relaxed);
    }

    /// Reserves the region every grant comes from (once; later calls do nothing): `bytes` of
    /// address space. Whether there is a region.
    pub fn reserve(&self, bytes: usize) -> bool {
        if self.region.load(Ordering::Acquire) != 0 {
            return true;
        }
        // SAFETY: an anonymous private mapping has no preconditions; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes.max(1),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return false;
        }
        self.region_len.store(bytes, Ordering::Relaxed);
        self.region_used.store(0, Ordering::Relaxed);
        // Release: a thread that sees the address sees the length too.
        self.region.store(p as usize, Ordering::Release);
        true
    }

    /// Sets what is known once the job is known.
    pub fn configure(
        &self,
        rank: u32,
        node: u32,
        yield_when_idle: bool,
        log_level: u32,
        spin: u32,
    ) {
        self.rank.store(rank, Ordering::Relaxed);
        self.node.store(node, Ordering::Relaxed);
        self.yield_when_idle
            .store(yield_when_idle, Ordering::Relaxed);
        self.log_level.store(log_level, Ordering::Relaxed);
        crate::log::LEVEL.store(log_level, Ordering::Relaxed);
        self.spin_rounds.store(spin, Ordering::Relaxed);
    }
}

impl std::default::Default for LwkPlatform {
    fn default() -> Self {
        LwkPlatform::new()
    }
}

/// The calling thread's id (`pthread_self`: distinct among the process's live threads).
pub fn thread_id() -> u64 {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as u64 }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Resolution of `CLOCK_MONOTONIC` in nanoseconds.
pub fn tick_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as for `now_ns`.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64).max(1)
}

impl Platform for LwkPlatform {
    fn thread_id(&self) -> u64 {
        thread_id()
    }

    fn now_ns(&self) -> u64 {
        now_ns()
    }

    fn tick_ns(&self) -> u64 {
        tick_ns()
    }

    fn relax(&self, idle: u32) {
        if self.yield_when_idle.load(Ordering::Relaxed)
            || idle > self.spin_rounds.load(Ordering::Relaxed)
        {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }

    fn log(&self, level: Level, args: std::fmt::Arguments<'_>) {
        crate::log::record(level, self.rank.load(Ordering::Relaxed), args);
    }

    fn log_enabled(&self, level: Level) -> bool {
        (level as u32) <= self.log_level.load(Ordering::Relaxed)
    }

    fn processor_name(&self, out: &mut [u8]) -> usize {
        let mut name = heapless::String::<16>::new();
        let _ = std::fmt::Write::write_fmt(
            &mut name,
            format_args!("nid{:05}", self.node.load(Ordering::Relaxed)),
        );
        let n = name.len().min(out.len());
        out[..n].copy_from_slice(&name.as_bytes()[..n]);
        n
    }

    fn grant(&self, bytes: usize) -> Option<&'static mut [MaybeUninit<u8>]> {
        let base = self.region.load(Ordering::Acquire);
        if base == 0 {
            return None;
        }
        let len = self.region_len.load(Ordering::Relaxed);
        // Every grant starts on a GRANT_ALIGN boundary (the mapping is page-aligned).
        let size = bytes.checked_next_multiple_of(GRANT_ALIGN)?;
        let at = self
            .region_used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(size).filter(|&end| end <= len)
            })
            .ok()?;
        // SAFETY: `base..base + len` is the mapping `reserve` made, readable and writable and
        // never unmapped; `at..at + size` lies inside it and was claimed by this call alone (the
        // offset only grows), so the slice is exclusively the caller's for the rest of the
        // process.
        Some(unsafe { std::slice::from_raw_parts_mut((base + at) as *mut MaybeUninit<u8>, bytes) })
    }

    unsafe fn release(&self, region: &'static mut [MaybeUninit<u8>]) -> bool {
        // A bump region takes back only its last grant (a pool that just moved to a larger
        // array was usually not the last); the rest stays counted by the core.
        let base = self.region.load(Ordering::Acquire);
        let Some(size) = region.len().checked_next_multiple_of(GRANT_ALIGN) else {
            return false;
        };
        let at = (region.as_ptr() as usize).wrapping_sub(base);
        self.region_used
            .compare_exchange(at + size, at, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    fn memory_default(&self) -> usize {
        self.memory_default.load(Ordering::Relaxed)
    }

    fn alloc_mem(&self, bytes: usize) -> Option<*mut u8> {
        // SAFETY: malloc has no preconditions.
        let p = unsafe { libc::malloc(bytes.max(1)) };
        (!p.is_null()).then_some(p.cast())
    }

    unsafe fn free_mem(&self, ptr: *mut u8) {
        // SAFETY: the caller's contract: `ptr` came from `alloc_mem`.
        unsafe { libc::free(ptr.cast()) }
    }

    fn rdma(&self) -> Option<&'static dyn stormpi_core::osc::rdma::Rdma> {
        crate::osc::get()
    }

    fn file_system(&self) -> Option<&'static dyn stormpi_core::io::fs::FileSystem> {
        Some(&crate::fs::POSIX_FS)
    }
}

/// Writes one line to standard error (no buffering: a node may die right after).
pub fn eprint_line(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}
