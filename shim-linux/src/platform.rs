//! The Linux platform: monotonic clock, relaxing in wait loops, logging, host name, and memory
//! for the core's pools as they grow (from the heap).

use std::io::Write;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};

use stormpi_core::memory::GRANT_ALIGN;
use stormpi_core::params::{Default, Kind, ParamDef};
use stormpi_core::platform::{Level, Platform, SegmentName};

/// `mpi_yield_when_idle`.
pub static YIELD_WHEN_IDLE: ParamDef = ParamDef {
    name: "mpi_yield_when_idle",
    kind: Kind::Int { min: -1, max: 1 },
    default: Default::Int(-1),
    description:
        "Yield the core in wait loops: 1 at once, 0 after mpi_spin_rounds idle rounds, -1 \
         as 0 but after mpi_oversubscribed_spin_rounds when ranks outnumber cores",
};

/// `mpi_log_level`.
pub static LOG_LEVEL: ParamDef = ParamDef {
    name: "mpi_log_level",
    kind: Kind::Int { min: 0, max: 3 },
    default: Default::Int(1),
    description: "Log records printed to stderr: 0 errors, 1 warnings, 2 info, 3 debug",
};

/// `mpi_spin_rounds`.
pub static SPIN_ROUNDS: ParamDef = ParamDef {
    name: "mpi_spin_rounds",
    kind: Kind::Int { min: 0, max: 1 << 30 },
    // A reply from a peer on another core comes within a few rounds; a peer that shares our core
    // (an oversubscribed or busy machine) needs us to yield, and every round spun is lost.
    default: Default::Int(100),
    description: "Idle progress rounds a wait spins before it starts yielding the core (when not yielding at once)",
};

/// `mpi_oversubscribed_spin_rounds`.
pub static OVERSUBSCRIBED_SPIN_ROUNDS: ParamDef = ParamDef {
    name: "mpi_oversubscribed_spin_rounds",
    kind: Kind::Int {
        min: 0,
        max: 1 << 30,
    },
    // With more ranks than cores, a peer on another core still answers within a few rounds,
    // sooner than a yield comes back; a longer spin keeps the core from a rank that shares it
    // and has work. A few rounds (well under a microsecond) measured fastest on 2 cores.
    default: Default::Int(8),
    description: "Idle progress rounds a wait spins before yielding the core when ranks outnumber \
                  cores (mpi_yield_when_idle -1)",
};

/// `mpi_idle_sleep`.
pub static IDLE_SLEEP: ParamDef = ParamDef {
    name: "mpi_idle_sleep",
    kind: Kind::Int { min: -1, max: 1 },
    default: Default::Int(-1),
    description: "Sleep (mpi_idle_sleep_ns) instead of yielding the core once a wait has spun: \
                  1 always, 0 never, -1 when ranks outnumber cores and this rank leads a session \
                  of its own (where a yield hands the core to no other rank)",
};

/// `mpi_idle_sleep_ns`.
pub static IDLE_SLEEP_NS: ParamDef = ParamDef {
    name: "mpi_idle_sleep_ns",
    kind: Kind::Int {
        min: 1,
        max: 1_000_000,
    },
    // Measured on 2 cores (Linux 6.18, EEVDF, other jobs running), 4 ranks in sessions of their
    // own: sleeps under ~10 µs left the ranks waiting milliseconds for the core (a 4-rank
    // allreduce 4-12 ms), 10-20 µs gave the fastest collectives (48-95 µs), longer ones slower.
    default: Default::Int(IDLE_SLEEP_NS_DEFAULT as i64),
    description: "Nanoseconds one idle sleep lasts (mpi_idle_sleep)",
};

/// Default of `mpi_idle_sleep_ns`.
pub const IDLE_SLEEP_NS_DEFAULT: u32 = 20_000;

/// Parameters of the Linux platform.
pub static PARAMS: [&ParamDef; 6] = [
    &YIELD_WHEN_IDLE,
    &LOG_LEVEL,
    &SPIN_ROUNDS,
    &OVERSUBSCRIBED_SPIN_ROUNDS,
    &IDLE_SLEEP,
    &IDLE_SLEEP_NS,
];

/// What a wait does once it has spun its rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// `sched_yield`: hands the core over, but under EEVDF only to a process of the same
    /// session's autogroup.
    Yield,
    /// Sleeps this many nanoseconds: the thread leaves the run queue, so a process of any
    /// session (a rank that shares the core and has work) runs, and the timer brings it back.
    Sleep(u32),
}

/// How idle waits relax, from `mpi_idle_sleep` (`setting`), whether the node's ranks outnumber
/// its cores and whether this process leads its session (as under Hydra or stormrun, not
/// Open MPI's mpirun or `stormrun --same-session`, whose ranks share the launcher's).
pub fn idle_mode(setting: i64, oversubscribed: bool, session_leader: bool, sleep_ns: u32) -> Idle {
    match setting {
        0 => Idle::Yield,
        1 => Idle::Sleep(sleep_ns),
        _ if oversubscribed && session_leader => Idle::Sleep(sleep_ns),
        _ => Idle::Yield,
    }
}

/// Whether this process leads its session (so its autogroup holds no other rank).
pub fn session_leader() -> bool {
    // SAFETY: getsid(0) and getpid have no preconditions.
    unsafe { libc::getsid(0) == libc::getpid() }
}

/// The Linux platform.
pub struct LinuxPlatform {
    rank: AtomicU32,
    yield_when_idle: AtomicBool,
    log_level: AtomicU32,
    spin_rounds: AtomicU32,
    /// Nanoseconds an idle wait sleeps once it has spun, 0 to yield instead.
    sleep_ns: AtomicU32,
    /// The bound on the engine's memory when `mpi_memory_max` is 0.
    memory_default: AtomicUsize,
    /// The passive-target progress thread of one-sided windows.
    pub passive: crate::progress::PassiveProgress,
}

/// The smallest default bound on an engine's memory: a program that runs under Open MPI and
/// MPICH at their defaults (10^5 requests outstanding, 10^6 unexpected messages) fits in it.
pub const MEMORY_DEFAULT_MIN: usize = 4 << 30;

/// The node's physical memory in bytes (0 if unknown).
pub fn physical_memory() -> usize {
    // SAFETY: sysconf has no preconditions; it returns -1 for an unknown name.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    if pages <= 0 || page <= 0 {
        return 0;
    }
    (pages as usize).saturating_mul(page as usize)
}

/// The default bound on one engine's memory: half the node's memory shared among the ranks on
/// it, at least [`MEMORY_DEFAULT_MIN`] (the heap refuses, and says so, if a node is smaller).
pub fn memory_default(local_ranks: usize) -> usize {
    (physical_memory() / 2 / local_ranks.max(1)).max(MEMORY_DEFAULT_MIN)
}

impl LinuxPlatform {
    /// A platform that yields in wait loops when `yield_when_idle`.
    pub const fn new() -> LinuxPlatform {
        LinuxPlatform {
            rank: AtomicU32::new(u32::MAX),
            yield_when_idle: AtomicBool::new(false),
            log_level: AtomicU32::new(1),
            spin_rounds: AtomicU32::new(100),
            sleep_ns: AtomicU32::new(0),
            memory_default: AtomicUsize::new(MEMORY_DEFAULT_MIN),
            passive: crate::progress::PassiveProgress::new(),
        }
    }

    /// Sets the default bound on the engine's memory (see [`memory_default`]).
    pub fn set_memory_default(&self, bytes: usize) {
        self.memory_default.store(bytes, Ordering::Relaxed);
    }

    /// Sets what is known once the runtime is up.
    pub fn configure(
        &self,
        rank: u32,
        yield_when_idle: bool,
        log_level: u32,
        spin_rounds: u32,
        idle: Idle,
    ) {
        self.rank.store(rank, Ordering::Relaxed);
        self.yield_when_idle
            .store(yield_when_idle, Ordering::Relaxed);
        self.log_level.store(log_level, Ordering::Relaxed);
        self.spin_rounds.store(spin_rounds, Ordering::Relaxed);
        let ns = match idle {
            Idle::Yield => 0,
            Idle::Sleep(ns) => ns.max(1),
        };
        self.sleep_ns.store(ns, Ordering::Relaxed);
    }

    /// What idle waits do once they have spun.
    pub fn idle(&self) -> Idle {
        match self.sleep_ns.load(Ordering::Relaxed) {
            0 => Idle::Yield,
            ns => Idle::Sleep(ns),
        }
    }
}

impl std::default::Default for LinuxPlatform {
    fn default() -> Self {
        LinuxPlatform::new()
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
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
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

std::thread_local! {
    /// Whether this thread's timer slack is already 1 ns.
    static EXACT_TIMERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Sleeps `ns` nanoseconds with this thread's timer slack at 1 ns (set on its first sleep): at
/// the default 50 µs slack, a 20 µs sleep would last up to ~70 µs and a reply would wait for it.
#[cold]
#[inline(never)]
fn idle_sleep(ns: u32) {
    if !EXACT_TIMERS.get() {
        // SAFETY: PR_SET_TIMERSLACK takes the slack in nanoseconds and touches only this thread.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
        EXACT_TIMERS.set(true);
    }
    let ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: ns as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; an early return (a signal) only shortens the wait, which
    // a wait loop treats as any other idle round.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

impl Platform for LinuxPlatform {
    fn thread_id(&self) -> u64 {
        thread_id()
    }

    fn passive_progress_start(&self, progress: fn() -> usize) -> bool {
        self.passive.start(progress)
    }

    fn passive_progress_stop(&self) {
        self.passive.stop()
    }

    fn now_ns(&self) -> u64 {
        now_ns()
    }

    fn tick_ns(&self) -> u64 {
        tick_ns()
    }

    fn relax(&self, idle: u32) {
        // More ranks than cores, or a wait long enough that the peer may be off its core: give
        // the core to a process that has work. Otherwise spin, for the lowest latency.
        if self.yield_when_idle.load(Ordering::Relaxed)
            || idle > self.spin_rounds.load(Ordering::Relaxed)
        {
            match self.sleep_ns.load(Ordering::Relaxed) {
                0 => std::thread::yield_now(),
                ns => idle_sleep(ns),
            }
        } else {
            std::hint::spin_loop();
        }
    }

    fn log(&self, level: Level, args: std::fmt::Arguments<'_>) {
        let rank = self.rank.load(Ordering::Relaxed);
        let mut err = std::io::stderr().lock();
        let _ = if rank == u32::MAX {
            writeln!(err, "stormpi: {}: {}", level.name(), args)
        } else {
            writeln!(err, "stormpi: rank {rank}: {}: {}", level.name(), args)
        };
    }

    fn log_enabled(&self, level: Level) -> bool {
        (level as u32) <= self.log_level.load(Ordering::Relaxed)
    }

    fn processor_name(&self, out: &mut [u8]) -> usize {
        let mut buf = [0u8; 256];
        // SAFETY: `buf` is writable for its length; gethostname NUL-terminates within it.
        let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
        let name: &[u8] = if ok {
            let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            &buf[..n]
        } else {
            b"localhost"
        };
        let n = name.len().min(out.len());
        out[..n].copy_from_slice(&name[..n]);
        n
    }

    fn env_info(&self, key: &str, out: &mut [u8]) -> Option<usize> {
        let value: Vec<u8> = match key {
            "command" | "argv" => {
                // The command line as the kernel keeps it: NUL-separated arguments.
                let line = std::fs::read("/proc/self/cmdline").ok()?;
                let mut args = line.split(|&b| b == 0).filter(|a| !a.is_empty());
                let command = args.next()?;
                if key == "command" {
                    command.to_vec()
                } else {
                    let rest = args.collect::<Vec<_>>().join(&b' ');
                    if rest.is_empty() {
                        return None;
                    }
                    rest
                }
            }
            "wdir" => {
                use std::os::unix::ffi::OsStrExt;
                std::env::current_dir()
                    .ok()?
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            }
            _ => return None,
        };
        let n = value.len().min(out.len());
        out[..n].copy_from_slice(&value[..n]);
        Some(n)
    }

    fn grant(&self, bytes: usize) -> Option<&'static mut [MaybeUninit<u8>]> {
        let layout = std::alloc::Layout::from_size_align(bytes.max(1), GRANT_ALIGN).ok()?;
        // SAFETY: the layout's size is not zero. Large grants come from mmap inside the
        // allocator, so their pages are only touched as the pool uses them.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` points at `bytes` (or more) bytes this call just allocated, aligned to
        // GRANT_ALIGN; the core owns them for the rest of the process (a grant is never freed,
        // so the region is `'static`), and `MaybeUninit<u8>` needs no initialisation.
        Some(unsafe { std::slice::from_raw_parts_mut(p.cast::<MaybeUninit<u8>>(), bytes) })
    }

    unsafe fn release(&self, region: &'static mut [MaybeUninit<u8>]) -> bool {
        let Ok(layout) = std::alloc::Layout::from_size_align(region.len().max(1), GRANT_ALIGN)
        else {
            return false;
        };
        // SAFETY: the caller's contract: `region` is one whole grant, allocated above with this
        // very layout (its length, at least 1, and GRANT_ALIGN), and no longer used.
        unsafe { std::alloc::dealloc(region.as_mut_ptr().cast(), layout) };
        true
    }

    fn memory_default(&self) -> usize {
        self.memory_default.load(Ordering::Relaxed)
    }

    fn alloc_mem(&self, bytes: usize) -> Option<*mut u8> {
        // SAFETY: malloc has no preconditions; one byte for a size of 0 gives a distinct pointer
        // that MPI_Free_mem can return.
        let p = unsafe { libc::malloc(bytes.max(1)) };
        (!p.is_null()).then_some(p.cast())
    }

    unsafe fn free_mem(&self, ptr: *mut u8) {
        // SAFETY: the caller's contract: `ptr` came from `alloc_mem`, i.e. from malloc.
        unsafe { libc::free(ptr.cast()) }
    }

    fn file_system(&self) -> Option<&'static dyn stormpi_core::io::fs::FileSystem> {
        Some(&crate::fs_worker::FS)
    }

    fn ports(&self) -> Option<&'static dyn stormpi_core::dpm::Ports> {
        Some(&crate::dpm::PORTS)
    }

    fn shared_create(&self, bytes: usize) -> Option<(SegmentName, *mut u8)> {
        crate::shm::create(bytes)
    }

    fn shared_attach(&self, name: &SegmentName, bytes: usize) -> Option<*mut u8> {
        crate::shm::attach(name, bytes)
    }

    fn shared_unlink(&self, name: &SegmentName) {
        crate::shm::unlink(name)
    }

    unsafe fn shared_detach(&self, ptr: *mut u8, bytes: usize) {
        // SAFETY: the caller's contract, passed on.
        unsafe { crate::shm::detach(ptr, bytes) }
    }

    fn page_size(&self) -> usize {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_mode_sleeps_when_forced_or_oversubscribed() {
        assert_eq!(idle_mode(1, false, false, 2000), Idle::Sleep(2000));
        assert_eq!(idle_mode(1, true, false, 5), Idle::Sleep(5));
        assert_eq!(idle_mode(0, true, true, 2000), Idle::Yield);
        assert_eq!(idle_mode(0, false, true, 2000), Idle::Yield);
        assert_eq!(idle_mode(-1, true, true, 2000), Idle::Sleep(2000));
        // In a session shared with other ranks a yield hands the core over: no sleep.
        assert_eq!(idle_mode(-1, true, false, 2000), Idle::Yield);
        assert_eq!(idle_mode(-1, false, true, 2000), Idle::Yield);
    }

    #[test]
    fn configure_sets_the_idle_mode() {
        let p = LinuxPlatform::new();
        assert_eq!(p.idle(), Idle::Yield);
        p.configure(0, false, 1, 8, Idle::Sleep(3000));
        assert_eq!(p.idle(), Idle::Sleep(3000));
        p.configure(0, false, 1, 8, Idle::Sleep(0));
        assert_eq!(
            p.idle(),
            Idle::Sleep(1),
            "a zero sleep still sleeps, not yields"
        );
        p.configure(0, false, 1, 8, Idle::Yield);
        assert_eq!(p.idle(), Idle::Yield);
    }

    /// Past its spin rounds a sleeping wait leaves the core for at least its sleep (nanosleep
    /// never returns early but for a signal), and within the rounds it only spins.
    #[test]
    fn relax_sleeps_past_the_spin_rounds() {
        let p = LinuxPlatform::new();
        p.configure(0, false, 1, 8, Idle::Sleep(300_000));
        let t = std::time::Instant::now();
        for _ in 0..4 {
            p.relax(9);
        }
        assert!(t.elapsed() >= std::time::Duration::from_micros(1200));
        let mut exact = false;
        EXACT_TIMERS.with(|e| exact = e.get());
        assert!(exact, "the sleeping thread's timer slack was not set");
        // SAFETY: PR_GET_TIMERSLACK has no arguments and reads this thread's slack.
        let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK) };
        assert_eq!(slack, 1);
    }
}
