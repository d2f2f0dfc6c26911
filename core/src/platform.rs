//! What a shim provides to the core.
//!
//! The core runs on Linux, on lightweight-kernel nodes and in tests; everything that differs
//! between them is behind this trait and [`crate::rte::Rte`]. A shim implements both once and
//! hands them to [`crate::engine::Engine::new`] with the memory for the pools and its BTL modules.

use core::fmt;
use core::mem::MaybeUninit;

/// Severity of a log record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// The job cannot go on as asked.
    Error,
    /// Something was wrong but was handled (e.g. a corrupt fragment dropped).
    Warn,
    /// Setup facts.
    Info,
    /// Protocol tracing.
    Debug,
}

impl Level {
    /// Lower-case name.
    pub const fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warning",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

/// Services of the machine the engine runs on.
pub trait Platform: Sync {
    /// Monotonic time in nanoseconds (MPI_Wtime's source).
    fn now_ns(&self) -> u64;

    /// Resolution of [`Platform::now_ns`] in nanoseconds.
    fn tick_ns(&self) -> u64 {
        1
    }

    /// Called in every wait loop that made no progress; `idle` counts the consecutive rounds
    /// without progress. Spins while a reply may be a few microseconds away; yields the core when
    /// ranks outnumber cores, or once the wait has been idle long enough that another process
    /// (perhaps the peer it waits for) should run.
    fn relax(&self, idle: u32);

    /// An id of the calling thread, distinct among the process's live threads (which thread
    /// initialised MPI, for `MPI_Is_thread_main`).
    fn thread_id(&self) -> u64 {
        0
    }

    /// Emits a log record.
    fn log(&self, level: Level, args: fmt::Arguments<'_>);

    /// Whether records of `level` are wanted (so callers can skip building them).
    fn log_enabled(&self, level: Level) -> bool {
        level <= Level::Warn
    }

    /// Writes this processor's name into `out`; returns its length.
    fn processor_name(&self, out: &mut [u8]) -> usize {
        let name = b"localhost";
        let n = name.len().min(out.len());
        out[..n].copy_from_slice(&name[..n]);
        n
    }

    /// What the platform knows about how the process was started, for `MPI_INFO_ENV`: `key` is
    /// `"command"` (the program), `"argv"` (its arguments, separated by spaces) or `"wdir"` (the
    /// working directory). Writes the value into `out` (cut to fit); its length, or `None` when
    /// unknown.
    fn env_info(&self, key: &str, out: &mut [u8]) -> Option<usize> {
        let _ = (key, out);
        None
    }

    /// Memory for `MPI_Alloc_mem`: `bytes` (0 allowed) aligned for any C type, or `None` when
    /// there is none (the default: the core itself has no allocator).
    fn alloc_mem(&self, bytes: usize) -> Option<*mut u8> {
        let _ = bytes;
        None
    }

    /// More memory for the core's pools and tables: `bytes` aligned to
    /// [`crate::memory::GRANT_ALIGN`], the core's until it hands it to [`Platform::release`]
    /// (perhaps never), or `None` when the platform has none. The core asks only within its
    /// bound (`mpi_memory_max`, see [`crate::memory`]), for arrays that double a pool's size, so
    /// grants are few. The default has none: the pools keep their initial sizes.
    fn grant(&self, bytes: usize) -> Option<&'static mut [MaybeUninit<u8>]> {
        let _ = bytes;
        None
    }

    /// Takes back a grant the core no longer uses; whether the memory went back (the default
    /// keeps it: the core then goes on counting it against its bound).
    ///
    /// # Safety
    /// `region` is exactly what one call of [`Platform::grant`] of this platform returned, and
    /// the core keeps no reference into it.
    unsafe fn release(&self, region: &'static mut [MaybeUninit<u8>]) -> bool {
        let _ = region;
        false
    }

    /// The bound on the engine's memory when `mpi_memory_max` is 0 (its default).
    fn memory_default(&self) -> usize {
        1 << 30
    }

    /// The file system MPI-IO reads and writes through, if the platform has one (the default
    /// has none: `MPI_File_open` then answers `MPI_ERR_UNSUPPORTED_OPERATION`).
    fn file_system(&self) -> Option<&'static dyn crate::io::fs::FileSystem> {
        None
    }

    /// The ports of `MPI_Open_port`, if the platform has a network (the default has none:
    /// `MPI_Open_port` then answers `MPI_ERR_UNSUPPORTED_OPERATION`).
    fn ports(&self) -> Option<&'static dyn crate::dpm::Ports> {
        None
    }

    /// The network's own one-sided operations, when the platform has them and they are wanted
    /// (the default has none: windows reached by messages stay active messages).
    fn rdma(&self) -> Option<&'static dyn crate::osc::rdma::Rdma> {
        None
    }

    /// Creates a memory segment of `bytes` (zero-filled, page-aligned) that the other processes
    /// on this node can map by its name ([`Platform::shared_attach`]), and maps it here. The
    /// name lives until [`Platform::shared_unlink`]; the mapping until
    /// [`Platform::shared_detach`]. The default has no shared memory (`None`): windows then share
    /// memory only within one process (`MPI_Win_allocate_shared` of one process).
    fn shared_create(&self, bytes: usize) -> Option<(SegmentName, *mut u8)> {
        let _ = bytes;
        None
    }

    /// Maps the `bytes` of the segment another process of this node created as `name`; `None`
    /// when it cannot (no such segment, another size, no shared memory on this platform).
    fn shared_attach(&self, name: &SegmentName, bytes: usize) -> Option<*mut u8> {
        let _ = (name, bytes);
        None
    }

    /// Removes the name of a segment (every process that needs it has mapped it; the memory stays
    /// until the last mapping goes).
    fn shared_unlink(&self, name: &SegmentName) {
        let _ = name;
    }

    /// Unmaps a segment mapped by [`Platform::shared_create`] or [`Platform::shared_attach`].
    ///
    /// # Safety
    /// `ptr` and `bytes` are exactly what one of those calls mapped, and nothing uses the mapping
    /// any more.
    unsafe fn shared_detach(&self, ptr: *mut u8, bytes: usize) {
        let _ = (ptr, bytes);
    }

    /// Bytes of a memory page (the alignment of each process's part of a shared window with the
    /// info `alloc_shared_noncontig`).
    fn page_size(&self) -> usize {
        4096
    }

    /// Returns memory from [`Platform::alloc_mem`] (`MPI_Free_mem`).
    ///
    /// # Safety
    /// `ptr` came from `alloc_mem` of this platform and was not returned yet.
    unsafe fn free_mem(&self, ptr: *mut u8) {
        let _ = ptr;
    }

    /// Makes sure a thread runs `progress` (one round of the engine's progress, which takes the
    /// engine's lock) whenever the transports have events, so that one-sided operations on this
    /// process's windows complete while it computes outside MPI (passive-target progress).
    /// Called with the engine let go and its lock in use; returns whether such a thread runs.
    /// A platform without threads has none.
    fn passive_progress_start(&self, progress: fn() -> usize) -> bool {
        let _ = progress;
        false
    }

    /// Stops the thread [`Platform::passive_progress_start`] started and waits for it to end
    /// (called with the engine let go).
    fn passive_progress_stop(&self) {}
}

/// The name of a shared memory segment, as it travels between the processes of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct SegmentName {
    /// Bytes of `bytes` in use.
    pub len: u32,
    /// The name (the platform's; a path on Linux).
    pub bytes: [u8; SEGMENT_NAME_MAX],
}

/// Longest [`SegmentName`].
pub const SEGMENT_NAME_MAX: usize = 124;

impl SegmentName {
    /// No name (how a process that failed to create a segment tells the others).
    pub const NONE: SegmentName = SegmentName {
        len: 0,
        bytes: [0; SEGMENT_NAME_MAX],
    };

    /// The name `b`, or `None` when it is too long.
    pub fn new(b: &[u8]) -> Option<SegmentName> {
        let mut n = SegmentName::NONE;
        n.bytes.get_mut(..b.len())?.copy_from_slice(b);
        n.len = b.len() as u32;
        Some(n)
    }

    /// The name's bytes (empty for [`SegmentName::NONE`], or a corrupt length).
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len as usize).unwrap_or(&[])
    }
}

/// Logs through a platform: `log!(platform, Level::Warn, "dropped {} bytes", n)`.
#[macro_export]
macro_rules! log {
    ($plat:expr, $level:expr, $($arg:tt)+) => {{
        let p: &dyn $crate::platform::Platform = $plat;
        if p.log_enabled($level) {
            p.log($level, format_args!($($arg)+));
        }
    }};
}
