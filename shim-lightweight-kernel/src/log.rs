//! Log records of the node build: one line each on standard error.

use stormpi_core::platform::Level;

/// Emits one record of process `rank` (`u32::MAX` before the job is known).
pub fn record(level: Level, rank: u32, args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = if rank == u32::MAX {
        writeln!(err, "stormpi: {}: {}", level.name(), args)
    } else {
        writeln!(err, "stormpi: rank {rank}: {}: {}", level.name(), args)
    };
}
