//! The node platform: monotonic clock, spinning (or yielding when ranks share cores), logging.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

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
        }
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

    fn alloc_mem(&self, bytes: usize) -> Option<*mut u8> {
        // SAFETY: malloc has no preconditions.
        let p = unsafe { libc::malloc(bytes.max(1)) };
        (!p.is_null()).then_some(p.cast())
    }

    unsafe fn free_mem(&self, ptr: *mut u8) {
        // SAFETY: the caller's contract: `ptr` came from `alloc_mem`.
        unsafe { libc::free(ptr.cast()) }
    }
}

/// Writes one line to standard error (no buffering: a node may die right after).
pub fn eprint_line(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}
