//! The engine's memory account: one bound on everything the core holds.
//!
//! At init the platform hands the engine one region, sized for the pools' *initial* capacities
//! (small, so `MPI_Init` stays cheap). Pools and tables that fill up later ask for more here:
//! [`Memory::take`] counts the bytes against the bound `mpi_memory_max` and has the platform
//! grant them ([`Platform::grant`]: the heap on Linux, a region reserved at init on a node). The
//! core never calls an allocator itself. A grant is `'static`: what is placed in it stays there
//! until the core gives the grant back ([`Memory::give_back`]: a pool that moved to a larger
//! one). Going past the bound is an error naming `mpi_memory_max` (or back-pressure where the
//! caller can wait), never a crash.
//!
//! The count is atomic: the engine may be entered from several threads, and although it runs
//! under the engine's lock, the account should not depend on that.

use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{Error, ErrorClass, Reason};
use crate::params::{Default, Kind, ParamDef, Params};
use crate::platform::Platform;

/// `mpi_memory_max`.
pub static MEMORY_MAX: ParamDef = ParamDef {
    name: "mpi_memory_max",
    kind: Kind::Int {
        min: 0,
        max: i64::MAX,
    },
    default: Default::Int(0),
    description: "Most bytes the engine holds for its pools and tables (they start small and grow \
                  in chunks up to this); 0: the platform's default (Linux: half the node's memory \
                  shared among its ranks, at least 4 GiB)",
};

/// Parameters of the memory account.
pub static PARAMS: [&ParamDef; 1] = [&MEMORY_MAX];

/// Alignment of every grant (a cache line: pools of any element type can be carved from it).
pub const GRANT_ALIGN: usize = 64;

/// Why memory could not be had.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The bytes would take the engine past `mpi_memory_max`.
    Bound,
    /// The platform has no more memory to grant.
    Platform,
}

/// The engine's memory account.
pub struct Memory {
    platform: &'static dyn Platform,
    used: AtomicUsize,
    max: usize,
}

impl Memory {
    /// The bound `params` ask for: `mpi_memory_max`, or the platform's default when it is 0.
    pub fn bound(params: &Params, platform: &dyn Platform) -> usize {
        match params.int(&MEMORY_MAX) {
            // A value past the address space (a 32-bit target) is no bound at all.
            v if v > 0 => usize::try_from(v).unwrap_or(usize::MAX),
            _ => platform.memory_default(),
        }
    }

    /// An account of at most `max` bytes that starts with `initial` bytes already held (the
    /// region the platform handed over at init); memory beyond it comes from `platform`.
    pub const fn new(platform: &'static dyn Platform, max: usize, initial: usize) -> Memory {
        Memory {
            platform,
            used: AtomicUsize::new(initial),
            max,
        }
    }

    /// The bound in bytes.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes held: the init region and every grant.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Whether `bytes` more would stay within the bound (the platform may still refuse them).
    pub fn room(&self, bytes: usize) -> bool {
        self.used()
            .checked_add(bytes)
            .is_some_and(|total| total <= self.max)
    }

    /// `bytes` more memory, aligned to [`GRANT_ALIGN`], counted against the bound.
    pub fn take(
        &self,
        bytes: usize,
    ) -> core::result::Result<&'static mut [MaybeUninit<u8>], Refusal> {
        // Reserve first, so two threads cannot both pass the bound.
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.max)
            })
            .map_err(|_| Refusal::Bound)?;
        match self.platform.grant(bytes) {
            Some(region) if region.len() >= bytes => Ok(region),
            _ => {
                self.used.fetch_sub(bytes, Ordering::Relaxed);
                Err(Refusal::Platform)
            }
        }
    }

    /// Gives back a grant the core no longer uses (a pool's array after it moved to a larger
    /// one); it stops counting once the platform takes it.
    pub fn give_back(&self, region: &'static mut [MaybeUninit<u8>]) {
        let len = region.len();
        // SAFETY: every grant comes from `take`, i.e. from this platform's `grant`, and the
        // caller hands over its only reference.
        if unsafe { self.platform.release(region) } {
            self.used.fetch_sub(len, Ordering::Relaxed);
        }
    }

    /// The error for `what` that could not grow because of `why`.
    pub fn refused(&self, what: &'static str, why: Refusal) -> Error {
        match why {
            Refusal::Bound => Error::new(
                ErrorClass::NoMem,
                Reason::MemoryBound {
                    what,
                    max: self.max,
                    param: MEMORY_MAX.name,
                },
            ),
            Refusal::Platform => {
                Error::new(ErrorClass::NoMem, Reason::PlatformOutOfMemory { what })
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    extern crate std;
    use super::*;
    use std::boxed::Box;
    use std::vec;

    /// A platform that grants from the heap (leaked), as the Linux shim does.
    pub struct HeapPlatform;

    impl Platform for HeapPlatform {
        fn now_ns(&self) -> u64 {
            0
        }
        fn relax(&self, _idle: u32) {}
        fn log(&self, _level: crate::platform::Level, _args: core::fmt::Arguments<'_>) {}
        fn grant(&self, bytes: usize) -> Option<&'static mut [MaybeUninit<u8>]> {
            // Over-allocate so the grant can start on a GRANT_ALIGN boundary.
            let raw = Box::leak(
                vec![MaybeUninit::<u8>::uninit(); bytes + GRANT_ALIGN].into_boxed_slice(),
            );
            let pad = raw.as_ptr().align_offset(GRANT_ALIGN);
            Some(&mut raw[pad..pad + bytes])
        }
        unsafe fn release(&self, _region: &'static mut [MaybeUninit<u8>]) -> bool {
            // Leaked, not freed: a test does not care, but the account should stop counting.
            true
        }
    }

    /// Asserts that `e` is a growth refused by the memory bound, naming `mpi_memory_max`.
    #[track_caller]
    pub fn assert_names_memory_max(e: &crate::error::Error) {
        assert!(
            matches!(
                e.reason,
                crate::error::Reason::MemoryBound {
                    param: "mpi_memory_max",
                    ..
                }
            ),
            "{e:?}"
        );
    }

    /// An account of `max` bytes over the heap, for tests.
    pub fn account(max: usize) -> &'static Memory {
        Box::leak(Box::new(Memory::new(&HeapPlatform, max, 0)))
    }

    #[test]
    fn grants_are_counted_and_aligned() {
        let m = account(1000);
        let r = m.take(100).unwrap();
        assert_eq!(r.len(), 100);
        assert_eq!(r.as_ptr() as usize % GRANT_ALIGN, 0);
        assert_eq!(m.used(), 100);
        assert!(m.room(900));
        assert!(!m.room(901));
    }

    #[test]
    fn the_bound_refuses_and_counts_nothing() {
        let m = account(1000);
        m.take(600).unwrap();
        assert_eq!(m.take(500).unwrap_err(), Refusal::Bound);
        assert_eq!(m.used(), 600, "a refused request holds nothing");
        let e = m.refused("request pool", Refusal::Bound);
        assert_eq!(e.class, ErrorClass::NoMem);
        let text = std::format!("{}", e.reason);
        assert!(text.contains("mpi_memory_max"), "{text}");
        assert!(text.contains("request pool"), "{text}");
    }

    #[test]
    fn a_platform_without_memory_is_a_refusal_too() {
        struct Stingy;
        impl Platform for Stingy {
            fn now_ns(&self) -> u64 {
                0
            }
            fn relax(&self, _idle: u32) {}
            fn log(&self, _level: crate::platform::Level, _args: core::fmt::Arguments<'_>) {}
        }
        let m = Memory::new(&Stingy, usize::MAX, 10);
        assert_eq!(m.take(8).unwrap_err(), Refusal::Platform);
        assert_eq!(m.used(), 10);
    }

    #[test]
    fn the_bound_defaults_to_the_platform_s_choice() {
        let mut p = Params::new(&[]);
        p.register(&MEMORY_MAX).unwrap();
        assert_eq!(
            Memory::bound(&p, &HeapPlatform),
            HeapPlatform.memory_default()
        );
        p.set("mpi_memory_max", "1g").unwrap();
        assert_eq!(Memory::bound(&p, &HeapPlatform), 1 << 30);
    }
}
