//! Log records of the node build.
//!
//! Without the `defmt` feature a record is one line on standard error. With it, records are
//! defmt frames: the format strings are interned in the program's `.defmt` section and only
//! indices and arguments are written — what a node with a thin console link wants. Frames go to
//! `$STORMPI_DEFMT_LOG.<rank>` when that variable is set, else to standard error; decode them
//! with the program's ELF (`defmt-print -e PROGRAM < FILE`).
//!
//! [`node_log!`] is for the shim's own records with defmt's argument syntax; it compiles to
//! nothing without the feature. Records of the engine (`fmt::Arguments`) are formatted into a
//! bounded buffer and sent as one `{=str}` argument.

use std::sync::atomic::{AtomicU32, Ordering};

use stormpi_core::platform::Level;

/// Records up to this level are emitted (`mpi_log_level`).
pub static LEVEL: AtomicU32 = AtomicU32::new(1);

/// Whether records of `level` are wanted.
pub fn enabled(level: Level) -> bool {
    (level as u32) <= LEVEL.load(Ordering::Relaxed)
}

/// A record of the shim with defmt arguments: `node_log!(Info, "rank {=u32}", r)`.
#[macro_export]
macro_rules! node_log {
    ($level:ident, $($arg:tt)+) => {{
        #[cfg(feature = "defmt")]
        if $crate::log::enabled(stormpi_core::platform::Level::$level) {
            $crate::node_log!(@emit $level, $($arg)+);
        }
    }};
    (@emit Error, $($arg:tt)+) => { defmt::error!($($arg)+) };
    (@emit Warn, $($arg:tt)+) => { defmt::warn!($($arg)+) };
    (@emit Info, $($arg:tt)+) => { defmt::info!($($arg)+) };
    (@emit Debug, $($arg:tt)+) => { defmt::debug!($($arg)+) };
}

/// Emits one record of process `rank` (`u32::MAX` before the job is known).
pub fn record(level: Level, rank: u32, args: std::fmt::Arguments<'_>) {
    #[cfg(feature = "defmt")]
    {
        let mut text = heapless::String::<256>::new();
        let _ = std::fmt::Write::write_fmt(&mut text, args);
        let s = text.as_str();
        match level {
            Level::Error => defmt::error!("rank {=u32}: {=str}", rank, s),
            Level::Warn => defmt::warn!("rank {=u32}: {=str}", rank, s),
            Level::Info => defmt::info!("rank {=u32}: {=str}", rank, s),
            Level::Debug => defmt::debug!("rank {=u32}: {=str}", rank, s),
        }
    }
    #[cfg(not(feature = "defmt"))]
    {
        use std::io::Write;
        let mut err = std::io::stderr().lock();
        let _ = if rank == u32::MAX {
            writeln!(err, "stormpi: {}: {}", level.name(), args)
        } else {
            writeln!(err, "stormpi: rank {rank}: {}: {}", level.name(), args)
        };
    }
}

/// Where frames go: `$STORMPI_DEFMT_LOG.<rank>` if set (no-op without the feature).
pub fn open_output(rank: u32) {
    #[cfg(feature = "defmt")]
    frames::open(rank);
    let _ = rank;
}

#[cfg(feature = "defmt")]
mod frames {
    use std::cell::UnsafeCell;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

    static TAKEN: AtomicBool = AtomicBool::new(false);
    static FD: AtomicI32 = AtomicI32::new(2);

    struct Enc(UnsafeCell<defmt::Encoder>);
    // SAFETY: the encoder is only touched between acquire and release, which TAKEN serialises.
    unsafe impl Sync for Enc {}
    static ENCODER: Enc = Enc(UnsafeCell::new(defmt::Encoder::new()));

    pub fn open(rank: u32) {
        let Some(base) = std::env::var_os("STORMPI_DEFMT_LOG") else {
            return;
        };
        let mut path = base.into_encoded_bytes();
        path.extend_from_slice(format!(".{rank}\0").as_bytes());
        // SAFETY: a NUL-terminated path.
        let fd = unsafe {
            libc::open(
                path.as_ptr().cast(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
                0o644,
            )
        };
        if fd >= 0 {
            FD.store(fd, Ordering::Relaxed);
        }
    }

    fn write(mut bytes: &[u8]) {
        let fd = FD.load(Ordering::Relaxed);
        while !bytes.is_empty() {
            // SAFETY: writing a valid slice to a file descriptor.
            let n = unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
            if n <= 0 {
                return;
            }
            bytes = &bytes[n as usize..];
        }
    }

    #[defmt::global_logger]
    struct Logger;

    // SAFETY: acquire/release pair up around every frame and exclude each other (TAKEN).
    unsafe impl defmt::Logger for Logger {
        fn acquire() {
            while TAKEN.swap(true, Ordering::Acquire) {
                std::hint::spin_loop();
            }
            // SAFETY: exclusive between acquire and release.
            unsafe { (*ENCODER.0.get()).start_frame(write) }
        }

        unsafe fn flush() {}

        unsafe fn release() {
            // SAFETY: as in acquire.
            unsafe { (*ENCODER.0.get()).end_frame(write) };
            TAKEN.store(false, Ordering::Release);
        }

        unsafe fn write(bytes: &[u8]) {
            // SAFETY: as in acquire.
            unsafe { (*ENCODER.0.get()).write(bytes, write) }
        }
    }
}
