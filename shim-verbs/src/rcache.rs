//! The registration cache (`mpi_leave_pinned`): memory registrations kept after the message that
//! made them and reused for any later message inside the same pages.
//!
//! Registering memory with an adapter costs a system call and a page-table walk per page; a
//! program that sends from the same buffers again and again pays it once with the cache. A
//! registration is made for whole pages and found again for any sub-range of them
//! ([`RegCache::acquire`]); it is counted while in use and, once unused, kept in least-recently-
//! used order, evicted when `mpool_max_registrations` or `mpool_max_bytes` would be exceeded. When
//! every registration is in use and a bound is hit, the message registers its own memory and
//! deregisters it after ([`CacheStats::uncached`]), never an error.
//!
//! **Invalidation.** A registration must die with its memory: an adapter keeps using the pages
//! it pinned, so a buffer freed and allocated again at the same address would otherwise be sent
//! from (or received into) the old pages. The Linux library intercepts `free`, `realloc`,
//! `munmap`, `mremap` and `madvise` (`shim-linux`'s `memhooks`) and records the range in a
//! fixed, lock-free log ([`unmapped`]): it runs inside the allocator, so it must neither allocate
//! nor lock. The cache reads the log before every lookup and drops the registrations overlapping
//! a range — at once when unused, when released otherwise — so they are never found again. A log
//! overrun (more ranges than it holds between two lookups) drops every registration.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Registrations are made for whole pages.
pub const PAGE: usize = 4096;

/// What registers and deregisters memory (the device; a fake in tests).
pub trait Registrar {
    /// A registration.
    type Handle: Copy;
    /// Registers `[addr, addr + len)` with `access`; `None` when the device refuses.
    fn register(&mut self, addr: usize, len: usize, access: i32) -> Option<Self::Handle>;
    /// Deregisters.
    fn deregister(&mut self, h: Self::Handle);
}

/// The cache's bounds (0: no bound).
#[derive(Clone, Copy, Debug, Default)]
pub struct Bounds {
    /// `mpool_max_registrations`.
    pub registrations: usize,
    /// `mpool_max_bytes`.
    pub bytes: usize,
}

/// Counters (logged at finalize).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found a registration.
    pub hits: u64,
    /// Lookups that registered (cached or not).
    pub misses: u64,
    /// Unused registrations deregistered to stay within the bounds.
    pub evictions: u64,
    /// Registrations dropped because their memory was freed or unmapped.
    pub invalidated: u64,
    /// Registrations made for one use because a bound could not be met (or the cache is off).
    pub uncached: u64,
    /// Time spent registering, in nanoseconds (what a hit saves, and what the pipeline hides).
    pub register_ns: u64,
}

/// A registration in use, to be given back with [`RegCache::release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Lease(u64);

struct Entry<H> {
    start: usize,
    end: usize,
    access: i32,
    handle: H,
    refs: u32,
    /// Counted in the bounds and findable until invalidated.
    cached: bool,
    valid: bool,
    /// Position in the LRU order while unused.
    stamp: u64,
}

/// The registration cache of one device.
pub struct RegCache<H: Copy> {
    enabled: bool,
    bounds: Bounds,
    /// Access every cached registration is made with (so one serves every use), when allowed.
    broad: i32,
    entries: HashMap<u64, Entry<H>>,
    /// Valid cached entries by (start, id): the interval index.
    by_start: BTreeSet<(usize, u64)>,
    /// The longest entry ever indexed: an entry overlapping `[a, b)` starts after `a - max_len`.
    max_len: usize,
    /// Unused valid cached entries, least recently used first.
    lru: BTreeMap<u64, u64>,
    count: usize,
    bytes: usize,
    next_id: u64,
    clock: u64,
    /// Position in the invalidation log read up to.
    seen: u64,
    /// Counters.
    pub stats: CacheStats,
}

impl<H: Copy> RegCache<H> {
    /// A cache; `enabled == false` registers every use afresh (`mpi_leave_pinned` off). `broad`:
    /// the access cached registrations ask for.
    pub fn new(enabled: bool, bounds: Bounds, broad: i32) -> RegCache<H> {
        RegCache {
            enabled,
            bounds,
            broad,
            entries: HashMap::new(),
            by_start: BTreeSet::new(),
            max_len: 0,
            lru: BTreeMap::new(),
            count: 0,
            bytes: 0,
            next_id: 1,
            clock: 0,
            seen: log_position(),
            stats: CacheStats::default(),
        }
    }

    /// Whether registrations are kept.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Registrations held by the cache (in use or not) and their bytes.
    pub fn held(&self) -> (usize, usize) {
        (self.count, self.bytes)
    }

    /// A registration covering `[addr, addr + len)` with at least `access`: a cached one, or a
    /// new one; `None` when the device refuses to register the memory.
    pub fn acquire<R: Registrar<Handle = H>>(
        &mut self,
        reg: &mut R,
        addr: usize,
        len: usize,
        access: i32,
    ) -> Option<(Lease, H)> {
        let t0 = std::time::Instant::now();
        if !self.enabled {
            self.stats.misses += 1;
            self.stats.uncached += 1;
            let h = reg.register(addr, len, access);
            self.stats.register_ns += t0.elapsed().as_nanos() as u64;
            let h = h?;
            return Some(self.insert(addr, addr + len, access, h, false));
        }
        self.drain(reg);
        let start = addr & !(PAGE - 1);
        let end = addr.checked_add(len)?.checked_next_multiple_of(PAGE)?;
        if let Some(id) = self.find(start, end, access) {
            self.stats.hits += 1;
            let e = self.entries.get_mut(&id)?;
            if e.refs == 0 {
                self.lru.remove(&e.stamp);
            }
            e.refs += 1;
            return Some((Lease(id), e.handle));
        }
        self.stats.misses += 1;
        let n = end - start;
        let fits = self.make_room(reg, n);
        let wanted = self.broad | access;
        let made = reg
            .register(start, n, wanted)
            .map(|h| (h, wanted))
            .or_else(|| reg.register(start, n, access).map(|h| (h, access)))
            .or_else(|| {
                // The device may be out of registrations: give it back the unused ones.
                self.evict_unused(reg);
                reg.register(start, n, access).map(|h| (h, access))
            });
        self.stats.register_ns += t0.elapsed().as_nanos() as u64;
        let (h, got) = made?;
        if !fits {
            self.stats.uncached += 1;
        }
        Some(self.insert(start, end, got, h, fits))
    }

    /// Gives a registration back: an unused cached one is kept (most recently used), any other
    /// deregistered.
    pub fn release<R: Registrar<Handle = H>>(&mut self, reg: &mut R, lease: Lease) {
        let Some(e) = self.entries.get_mut(&lease.0) else {
            return;
        };
        e.refs = e.refs.saturating_sub(1);
        if e.refs > 0 {
            return;
        }
        if e.cached && e.valid && self.enabled {
            self.clock += 1;
            e.stamp = self.clock;
            self.lru.insert(self.clock, lease.0);
        } else {
            self.remove(reg, lease.0);
        }
    }

    /// Deregisters everything, in use or not (the device is closing).
    pub fn clear<R: Registrar<Handle = H>>(&mut self, reg: &mut R) {
        let ids: Vec<u64> = self.entries.keys().copied().collect();
        for id in ids {
            self.remove(reg, id);
        }
    }

    fn insert(&mut self, start: usize, end: usize, access: i32, h: H, cached: bool) -> (Lease, H) {
        let id = self.next_id;
        self.next_id += 1;
        if cached {
            self.by_start.insert((start, id));
            self.max_len = self.max_len.max(end - start);
            self.count += 1;
            self.bytes += end - start;
        }
        self.entries.insert(
            id,
            Entry {
                start,
                end,
                access,
                handle: h,
                refs: 1,
                cached,
                valid: true,
                stamp: 0,
            },
        );
        (Lease(id), h)
    }

    /// A valid entry covering `[start, end)` with `access`.
    fn find(&self, start: usize, end: usize, access: i32) -> Option<u64> {
        let lo = end.saturating_sub(self.max_len);
        if lo > start {
            // Longer than every entry.
            return None;
        }
        self.by_start
            .range((lo, 0)..=(start, u64::MAX))
            .rev()
            .map(|&(_, id)| id)
            .find(|id| {
                self.entries
                    .get(id)
                    .is_some_and(|e| e.end >= end && e.access & access == access)
            })
    }

    /// Evicts unused entries until one of `n` more bytes fits the bounds; false when it cannot.
    fn make_room<R: Registrar<Handle = H>>(&mut self, reg: &mut R, n: usize) -> bool {
        let over = |c: &Self| {
            (c.bounds.registrations > 0 && c.count + 1 > c.bounds.registrations)
                || (c.bounds.bytes > 0 && c.bytes + n > c.bounds.bytes)
        };
        if self.bounds.bytes > 0 && n > self.bounds.bytes {
            return false;
        }
        while over(self) {
            let Some((_, id)) = self.lru.pop_first() else {
                return false;
            };
            self.stats.evictions += 1;
            self.remove(reg, id);
        }
        true
    }

    fn evict_unused<R: Registrar<Handle = H>>(&mut self, reg: &mut R) {
        while let Some((_, id)) = self.lru.pop_first() {
            self.stats.evictions += 1;
            self.remove(reg, id);
        }
    }

    /// Deregisters and forgets an entry.
    fn remove<R: Registrar<Handle = H>>(&mut self, reg: &mut R, id: u64) {
        let Some(e) = self.entries.remove(&id) else {
            return;
        };
        if e.refs == 0 && e.cached && e.valid {
            self.lru.remove(&e.stamp);
        }
        if e.cached {
            self.by_start.remove(&(e.start, id));
            self.count -= 1;
            self.bytes -= e.end - e.start;
        }
        reg.deregister(e.handle);
    }

    /// Drops the registrations overlapping `[a, b)`: never found again, deregistered once unused.
    pub fn invalidate<R: Registrar<Handle = H>>(&mut self, reg: &mut R, a: usize, b: usize) {
        let lo = a.saturating_sub(self.max_len);
        if lo >= b {
            return;
        }
        let hit: Vec<u64> = self
            .by_start
            .range((lo, 0)..(b, 0))
            .map(|&(_, id)| id)
            .filter(|id| self.entries.get(id).is_some_and(|e| e.end > a))
            .collect();
        for id in hit {
            self.stats.invalidated += 1;
            let Some(e) = self.entries.get_mut(&id) else {
                continue;
            };
            if e.refs == 0 {
                self.remove(reg, id);
            } else {
                e.valid = false;
                let start = e.start;
                self.by_start.remove(&(start, id));
            }
        }
    }

    /// Applies the ranges freed or unmapped since the last call.
    pub fn drain<R: Registrar<Handle = H>>(&mut self, reg: &mut R) {
        loop {
            match read_log(self.seen) {
                LogRead::Range(a, b) => {
                    self.seen += 1;
                    self.invalidate(reg, a, b);
                }
                LogRead::Nothing => return,
                LogRead::Overrun => {
                    self.seen = log_position();
                    self.invalidate(reg, 0, usize::MAX);
                    return;
                }
            }
        }
    }
}

/// Ranges the log holds between two reads of a cache.
const LOG_SLOTS: usize = 1024;

struct Slot {
    /// Position + 1 of the range in the slot (0: never written).
    seq: AtomicU64,
    start: AtomicUsize,
    end: AtomicUsize,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    seq: AtomicU64::new(0),
    start: AtomicUsize::new(0),
    end: AtomicUsize::new(0),
};
static LOG: [Slot; LOG_SLOTS] = [EMPTY; LOG_SLOTS];
static NEXT: AtomicU64 = AtomicU64::new(0);
static ARMED: AtomicBool = AtomicBool::new(false);

/// Frees smaller than this are not recorded: no registration is made for them (the smallest
/// message registered is above the eager limit) and a block this small shares its pages.
pub const MIN_FREE: usize = PAGE;

/// Records that `[addr, addr + len)` was freed or unmapped. Called by the memory hooks inside
/// the allocator and from any thread: it takes no lock and allocates nothing. Does nothing
/// until a cache is in use ([`arm`]).
#[inline]
pub fn unmapped(addr: usize, len: usize) {
    if !ARMED.load(Ordering::Relaxed) || len == 0 {
        return;
    }
    let i = NEXT.fetch_add(1, Ordering::AcqRel);
    let s = &LOG[(i % LOG_SLOTS as u64) as usize];
    s.seq.store(0, Ordering::Release);
    s.start.store(addr, Ordering::Relaxed);
    s.end.store(addr.saturating_add(len), Ordering::Relaxed);
    s.seq.store(i + 1, Ordering::Release);
}

/// Whether frees and unmaps are being recorded.
pub fn armed() -> bool {
    ARMED.load(Ordering::Relaxed)
}

/// Starts recording frees and unmaps (and keeps on: a second cache may come).
pub fn arm() {
    ARMED.store(true, Ordering::Release);
}

fn log_position() -> u64 {
    NEXT.load(Ordering::Acquire)
}

enum LogRead {
    Range(usize, usize),
    Nothing,
    Overrun,
}

fn read_log(pos: u64) -> LogRead {
    let next = NEXT.load(Ordering::Acquire);
    if pos >= next {
        return LogRead::Nothing;
    }
    if next - pos > LOG_SLOTS as u64 {
        return LogRead::Overrun;
    }
    let s = &LOG[(pos % LOG_SLOTS as u64) as usize];
    let seq = s.seq.load(Ordering::Acquire);
    if seq == pos + 1 {
        let (a, b) = (
            s.start.load(Ordering::Relaxed),
            s.end.load(Ordering::Relaxed),
        );
        // Overwritten while read: a writer lapped the reader.
        if s.seq.load(Ordering::Acquire) != pos + 1 {
            return LogRead::Overrun;
        }
        LogRead::Range(a, b)
    } else if seq > pos + 1 {
        LogRead::Overrun
    } else {
        // Reserved by a writer still filling it in: read it next time.
        LogRead::Nothing
    }
}

/// Whether the program's `free` and `munmap` — the ones the dynamic linker gives it, which are
/// the library's memory hooks when the program links `libmpi.so`, or `libmpi.a` through stormcc
/// without `-static` (which defines them as the hooks) — reach [`unmapped`]: a
/// large block is freed and a mapping unmapped through them and looked for in the log.
pub fn hooks_work() -> bool {
    arm();
    // SAFETY: dlsym with the default scope and NUL-terminated names; the pointers found are
    // the C functions of these names with these signatures, or null.
    let (free, munmap) = unsafe {
        (
            libc::dlsym(libc::RTLD_DEFAULT, c"free".as_ptr()),
            libc::dlsym(libc::RTLD_DEFAULT, c"munmap".as_ptr()),
        )
    };
    if free.is_null() || munmap.is_null() {
        return false;
    }
    // SAFETY: as above: free(3) and munmap(2).
    let (free, munmap) = unsafe {
        (
            core::mem::transmute::<*mut libc::c_void, unsafe extern "C" fn(*mut libc::c_void)>(
                free,
            ),
            core::mem::transmute::<
                *mut libc::c_void,
                unsafe extern "C" fn(*mut libc::c_void, usize) -> libc::c_int,
            >(munmap),
        )
    };
    let seen = |f: &dyn Fn() -> usize| {
        let from = log_position();
        let p = f();
        let to = log_position();
        p != 0 && (from..to).any(|i| matches!(read_log(i), LogRead::Range(a, b) if a <= p && b > p))
    };
    let n = 1 << 20;
    // SAFETY: a block allocated and freed at once, never used.
    let freed = seen(&|| unsafe {
        let p = libc::malloc(n);
        if !p.is_null() {
            free(p);
        }
        p as usize
    });
    // SAFETY: a fresh mapping unmapped at once, never used.
    let unmapped = seen(&|| unsafe {
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        let p = libc::mmap(core::ptr::null_mut(), n, libc::PROT_READ, flags, -1, 0);
        if p == libc::MAP_FAILED {
            return 0;
        }
        munmap(p, n);
        p as usize
    });
    freed && unmapped
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Registrations as (addr, len, access), with a count of live ones.
    #[derive(Default)]
    struct Fake {
        live: HashMap<u32, (usize, usize, i32)>,
        next: u32,
        refuse_broad: bool,
        limit: Option<usize>,
    }

    impl Registrar for Fake {
        type Handle = u32;
        fn register(&mut self, addr: usize, len: usize, access: i32) -> Option<u32> {
            if (self.refuse_broad && access != 1)
                || self.limit.is_some_and(|l| self.live.len() >= l)
            {
                return None;
            }
            self.next += 1;
            self.live.insert(self.next, (addr, len, access));
            Some(self.next)
        }
        fn deregister(&mut self, h: u32) {
            assert!(self.live.remove(&h).is_some(), "deregistered twice");
        }
    }

    const ALL: i32 = 1 | 2 | 4;

    fn cache(regs: usize, bytes: usize) -> RegCache<u32> {
        RegCache::new(
            true,
            Bounds {
                registrations: regs,
                bytes,
            },
            ALL,
        )
    }

    #[test]
    fn a_sub_range_of_a_registration_is_a_hit() {
        let (mut f, mut c) = (Fake::default(), cache(0, 0));
        // Longer than any entry yet (none): a miss, not a bad range.
        let (l1, h1) = c.acquire(&mut f, 0x10_0100, 3 * PAGE, 1).unwrap();
        assert_eq!(f.live[&h1], (0x10_0000, 4 * PAGE, ALL), "page-aligned");
        c.release(&mut f, l1);
        let (l2, h2) = c.acquire(&mut f, 0x10_2000, 100, 4).unwrap();
        assert_eq!(h2, h1);
        assert_eq!((c.stats.hits, c.stats.misses), (1, 1));
        // Past the end: a new registration.
        let (l3, h3) = c.acquire(&mut f, 0x10_3000, PAGE + 1, 1).unwrap();
        assert_ne!(h3, h1);
        // Longer than every entry: a miss.
        let (l4, h4) = c.acquire(&mut f, 0x20_0000, 64 * PAGE, 1).unwrap();
        assert!(h4 != h1 && h4 != h3);
        c.invalidate(&mut f, 5, 5);
        for l in [l2, l3, l4] {
            c.release(&mut f, l);
        }
        assert_eq!(f.live.len(), 3, "all kept");
    }

    #[test]
    fn a_longer_registration_elsewhere_covers_a_later_short_one() {
        let (mut f, mut c) = (Fake::default(), cache(0, 0));
        let (l1, big) = c.acquire(&mut f, 0, 64 * PAGE, 1).unwrap();
        let (l2, _) = c.acquire(&mut f, 70 * PAGE, PAGE, 1).unwrap();
        // Starts far below the short one's start: found through max_len.
        let (l3, h) = c.acquire(&mut f, 60 * PAGE, 2 * PAGE, 1).unwrap();
        assert_eq!(h, big);
        for l in [l1, l2, l3] {
            c.release(&mut f, l);
        }
    }

    #[test]
    fn unused_registrations_are_evicted_least_recently_used_first() {
        let (mut f, mut c) = (Fake::default(), cache(2, 0));
        let (a, ha) = c.acquire(&mut f, 0, PAGE, 1).unwrap();
        let (b, hb) = c.acquire(&mut f, 10 * PAGE, PAGE, 1).unwrap();
        c.release(&mut f, a);
        c.release(&mut f, b);
        // Touch a: b is now the least recently used.
        let (a, _) = c.acquire(&mut f, 0, PAGE, 1).unwrap();
        c.release(&mut f, a);
        let (x, _) = c.acquire(&mut f, 20 * PAGE, PAGE, 1).unwrap();
        assert!(f.live.contains_key(&ha) && !f.live.contains_key(&hb));
        assert_eq!(c.stats.evictions, 1);
        assert_eq!(c.held().0, 2);
        c.release(&mut f, x);
    }

    #[test]
    fn a_bound_met_only_by_registrations_in_use_falls_back_to_one_use() {
        let (mut f, mut c) = (Fake::default(), cache(1, 0));
        let (a, _) = c.acquire(&mut f, 0, PAGE, 1).unwrap();
        let (b, hb) = c.acquire(&mut f, 10 * PAGE, PAGE, 1).unwrap();
        assert_eq!(c.stats.uncached, 1);
        assert_eq!(c.held(), (1, PAGE));
        c.release(&mut f, b);
        assert!(
            !f.live.contains_key(&hb),
            "a one-use registration is deregistered after"
        );
        c.release(&mut f, a);
        assert_eq!(f.live.len(), 1);
        // The byte bound: larger than the bound itself, never cached.
        let mut c2 = cache(0, 4 * PAGE);
        let (l, h) = c2.acquire(&mut f, 100 * PAGE, 5 * PAGE, 1).unwrap();
        c2.release(&mut f, l);
        assert!(!f.live.contains_key(&h));
    }

    #[test]
    fn invalidation_drops_unused_at_once_and_in_use_on_release() {
        let (mut f, mut c) = (Fake::default(), cache(0, 0));
        let (a, ha) = c.acquire(&mut f, 0, 4 * PAGE, 1).unwrap();
        c.release(&mut f, a);
        let (b, hb) = c.acquire(&mut f, 10 * PAGE, 4 * PAGE, 1).unwrap();
        // One byte of each.
        c.invalidate(&mut f, 3 * PAGE + 5, 10 * PAGE + 1);
        assert!(!f.live.contains_key(&ha), "unused: deregistered at once");
        assert!(f.live.contains_key(&hb), "in use: kept until released");
        // Never found again.
        let (b2, hb2) = c.acquire(&mut f, 10 * PAGE, PAGE, 1).unwrap();
        assert_ne!(hb2, hb);
        c.release(&mut f, b);
        assert!(!f.live.contains_key(&hb));
        c.release(&mut f, b2);
        assert_eq!(c.stats.invalidated, 2);
        // A range touching neither.
        c.invalidate(&mut f, 0, 10 * PAGE);
        assert_eq!(f.live.len(), 1);
    }

    #[test]
    fn off_registers_every_use() {
        let mut f = Fake::default();
        let mut c: RegCache<u32> = RegCache::new(false, Bounds::default(), ALL);
        for _ in 0..3 {
            let (l, _) = c.acquire(&mut f, 0x1234, 100, 1).unwrap();
            assert_eq!(
                f.live.values().next(),
                Some(&(0x1234, 100, 1)),
                "exact, needed access"
            );
            c.release(&mut f, l);
            assert!(f.live.is_empty());
        }
        assert_eq!((c.stats.hits, c.stats.misses), (0, 3));
    }

    #[test]
    fn a_refused_broad_registration_is_retried_with_what_is_needed() {
        let mut f = Fake {
            refuse_broad: true,
            ..Fake::default()
        };
        let mut c = cache(0, 0);
        let (l, h) = c.acquire(&mut f, 0, PAGE, 1).unwrap();
        assert_eq!(f.live[&h].2, 1);
        c.release(&mut f, l);
        // It cannot serve a use needing more, which this device refuses altogether.
        assert!(c.acquire(&mut f, 0, PAGE, 2).is_none());
        assert_eq!(
            c.stats.evictions, 1,
            "the unused one went back to the device first"
        );
    }

    #[test]
    fn a_device_out_of_registrations_gets_the_unused_ones_back() {
        let mut f = Fake {
            limit: Some(2),
            ..Fake::default()
        };
        let mut c = cache(0, 0);
        let (a, _) = c.acquire(&mut f, 0, PAGE, 1).unwrap();
        let (b, _) = c.acquire(&mut f, 10 * PAGE, PAGE, 1).unwrap();
        c.release(&mut f, a);
        let (x, _) = c.acquire(&mut f, 20 * PAGE, PAGE, 1).unwrap();
        assert_eq!(c.stats.evictions, 1);
        c.release(&mut f, b);
        c.release(&mut f, x);
        c.clear(&mut f);
        assert!(f.live.is_empty());
    }

    #[test]
    fn the_log_carries_ranges_to_the_cache_and_an_overrun_drops_everything() {
        arm();
        let (mut f, mut c) = (Fake::default(), cache(0, 0));
        // Addresses no other test uses (the log is process-wide; tests run in threads).
        let base = 1usize << 44;
        let (a, ha) = c.acquire(&mut f, base, PAGE, 1).unwrap();
        c.release(&mut f, a);
        unmapped(base + 10, 1);
        let (a, h2) = c.acquire(&mut f, base, PAGE, 1).unwrap();
        assert!(!f.live.contains_key(&ha) && h2 != ha);
        c.release(&mut f, a);
        for i in 0..LOG_SLOTS + 1 {
            unmapped((1 << 45) + i * PAGE, 1);
        }
        c.drain(&mut f);
        assert!(f.live.is_empty(), "an overrun drops every registration");
    }
}
