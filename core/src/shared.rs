//! The engine shared by a process's threads, and a thread inside it.
//!
//! One lock guards the whole engine (MPICH's global critical section, Open MPI's lock around
//! its progress engine): a thread takes it for each MPI call, and every wait lets it go between
//! progress rounds that moved nothing, so a thread blocked in `MPI_Recv`, `MPI_Wait` or a
//! collective never keeps another from sending, receiving or progressing — whichever thread
//! waits moves everyone's messages, and a request another thread's progress completed is seen
//! by its owner at its next look. Code that waits is written against [`Inside`]: it reaches the
//! engine through [`Inside::e`] between waits, and waits with [`Inside::wait`],
//! [`Inside::block`] or [`Inside::idle`]. Since `Inside::idle` takes the `Inside` mutably, no
//! borrow of the engine can live across it; whatever a waiting operation keeps between rounds
//! is on its own stack or in its own slot, and each step looks the engine up afresh.
//!
//! A program that asked for less than `MPI_THREAD_MULTIPLE` takes no lock at all: MPI promises
//! that only one thread calls at a time then, so entering is one load of a flag.

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::engine::Engine;
use crate::error::Result;
use crate::platform::Platform;
use crate::pml::request::{ReqId, Status};

/// While a thread waits for a point-to-point operation, every how many rounds one is the whole
/// progress round (everything else keeps moving, at this fraction of the rounds).
pub(crate) const FULL_ROUND_EVERY: u32 = 16;

/// A ticket lock that yields the core while it waits (threads may outnumber cores). Threads get
/// it in the order they asked, so a thread that lets it go and takes it again — a wait between
/// rounds — goes behind everyone already waiting: no thread starves while another keeps busy.
pub struct Lock {
    /// The next ticket to hand out.
    next: AtomicU32,
    /// The ticket that holds the lock.
    serving: AtomicU32,
}

impl Lock {
    /// An unlocked lock.
    pub const fn new() -> Lock {
        Lock {
            next: AtomicU32::new(0),
            serving: AtomicU32::new(0),
        }
    }

    /// Takes the lock, relaxing through `platform` while other threads have it or are ahead.
    #[inline]
    pub fn lock(&self, platform: &dyn Platform) {
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        if self.serving.load(Ordering::Acquire) != ticket {
            self.wait_for(ticket, platform);
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_for(&self, ticket: u32, platform: &dyn Platform) {
        let mut tries = 0u32;
        while self.serving.load(Ordering::Acquire) != ticket {
            tries = tries.saturating_add(1);
            // A few spins for a holder on another core, then give the core away: the holder
            // (or the thread whose turn comes first) may need it.
            platform.relax(tries.saturating_mul(16));
        }
    }

    /// Releases the lock (held by this thread).
    #[inline]
    pub fn unlock(&self) {
        // Only the holder writes `serving`.
        let t = self.serving.load(Ordering::Relaxed);
        self.serving.store(t.wrapping_add(1), Ordering::Release);
    }

    /// Whether another thread is waiting for the lock (asked by its holder).
    #[inline]
    pub fn contended(&self) -> bool {
        let next = self.next.load(Ordering::Relaxed);
        let serving = self.serving.load(Ordering::Relaxed);
        next.wrapping_sub(serving) > 1
    }
}

impl Default for Lock {
    fn default() -> Lock {
        Lock::new()
    }
}

/// The process's engine, shared by its threads.
pub struct Shared {
    lock: Lock,
    /// Whether threads may call at once (`MPI_THREAD_MULTIPLE`, or the Rust API, whose
    /// handles are `Sync`): only then is the lock taken.
    threads: AtomicBool,
    platform: spin::Once<&'static dyn Platform>,
    engine: UnsafeCell<Option<Engine>>,
    /// 1 + the id of the thread running a user's function from inside the engine with the lock
    /// held (a user-defined reduction), 0 when none is: MPI calls that function makes (mpi4py's
    /// reductions ask for the datatype's extent) re-enter instead of waiting for the lock
    /// their own thread holds.
    callback: AtomicU64,
}

// SAFETY: the engine is only reached through `enter`, which takes the lock whenever threads may
// call at once; when they may not, MPI's thread levels make the program call from one thread at
// a time (and `SERIALIZED` programs order their calls, which orders the memory they touch).
unsafe impl Sync for Shared {}

impl Shared {
    /// No engine yet.
    pub const fn new() -> Shared {
        Shared {
            lock: Lock::new(),
            threads: AtomicBool::new(false),
            platform: spin::Once::new(),
            engine: UnsafeCell::new(None),
            callback: AtomicU64::new(0),
        }
    }

    /// Runs `f`, a user's function called from inside the engine, so that MPI calls it makes
    /// from this thread enter the engine as the thread already inside it (as every call of a
    /// single-threaded program does) rather than wait for the lock it holds. Other threads
    /// still wait for the lock.
    pub fn user_callback<R>(&self, f: impl FnOnce() -> R) -> R {
        let Some(platform) = self.platform.get().filter(|_| self.threads()) else {
            return f();
        };
        let me = platform.thread_id().wrapping_add(1);
        // Only this thread reads back its own id: Relaxed suffices (the lock orders the rest).
        let before = self.callback.swap(me, Ordering::Relaxed);
        let r = f();
        self.callback.store(before, Ordering::Relaxed);
        r
    }

    /// A shared engine made from `engine` (for a driver that keeps it elsewhere than a static).
    pub fn with(engine: Engine, threads: bool) -> Shared {
        let s = Shared::new();
        s.install(engine, threads);
        s
    }

    /// Installs the engine (`MPI_Init`); `threads` says whether threads may call at once.
    pub fn install(&self, engine: Engine, threads: bool) {
        let platform = engine.platform();
        self.platform.call_once(|| platform);
        self.lock.lock(platform);
        // SAFETY: the lock is held, and no `Inside` exists yet (nothing was installed).
        unsafe { *self.engine.get() = Some(engine) };
        if threads {
            self.threads.store(true, Ordering::Release);
        }
        self.lock.unlock();
    }

    /// From now on threads may call at once (the Rust API's universe is `Sync`).
    pub fn allow_threads(&self) {
        self.threads.store(true, Ordering::Release);
    }

    /// Whether threads may call at once.
    pub fn threads(&self) -> bool {
        self.threads.load(Ordering::Relaxed)
    }

    /// Enters the engine: `None` before it is installed.
    #[inline(always)]
    pub fn enter(&self) -> Option<Inside<'_>> {
        if self.threads.load(Ordering::Relaxed) {
            return self.enter_locked();
        }
        // SAFETY: threads may not call at once, so only one thread calls (see `Sync` above).
        // The pointer stays valid: the engine is never removed.
        let engine = unsafe { (*self.engine.get()).as_mut() }?;
        Some(Inside {
            engine: NonNull::from(engine),
            lock: None,
            _life: PhantomData,
        })
    }

    /// [`Shared::enter`] when threads may call at once: takes the lock. Out of line, so that a
    /// single-threaded program's calls, which inline `enter`, keep few registers live.
    #[inline(never)]
    fn enter_locked(&self) -> Option<Inside<'_>> {
        let platform = *self.platform.get()?;
        let cb = self.callback.load(Ordering::Relaxed);
        let lock = if cb != 0 && cb == platform.thread_id().wrapping_add(1) {
            // This thread holds the lock and is in a user's function (`user_callback`).
            None
        } else {
            self.lock.lock(platform);
            Some(&self.lock)
        };
        // SAFETY: the lock is held, or this thread holds it already and re-enters from a user's
        // function called from inside the engine. The pointer stays valid: the engine is never
        // removed.
        let engine = unsafe { (*self.engine.get()).as_mut() };
        match engine {
            Some(e) => Some(Inside {
                engine: NonNull::from(e),
                lock,
                _life: PhantomData,
            }),
            None => {
                if let Some(l) = lock {
                    l.unlock();
                }
                None
            }
        }
    }
}

impl Default for Shared {
    fn default() -> Shared {
        Shared::new()
    }
}

/// A thread inside the engine: holds the lock (when threads may call at once) until dropped,
/// and lets it go while a wait has nothing to do.
pub struct Inside<'a> {
    engine: NonNull<Engine>,
    lock: Option<&'a Lock>,
    _life: PhantomData<&'a mut Engine>,
}

impl<'a> Inside<'a> {
    /// A thread inside an engine it owns outright (tests, a single-threaded driver): waits
    /// let nothing go.
    pub fn of(engine: &'a mut Engine) -> Inside<'a> {
        Inside {
            engine: NonNull::from(engine),
            lock: None,
            _life: PhantomData,
        }
    }

    /// The engine, until the next wait.
    #[inline(always)]
    pub fn e(&mut self) -> &mut Engine {
        // SAFETY: this thread holds the engine (the lock, or the only thread), and the borrow
        // is tied to `self`, so it ends before any wait lets the lock go.
        unsafe { self.engine.as_mut() }
    }

    /// Counts a round that moved nothing and relaxes the core; other threads have the engine
    /// meanwhile.
    #[inline]
    pub fn idle(&mut self) {
        let (platform, idle) = self.e().relax_count();
        match self.lock {
            None => platform.relax(idle),
            Some(l) => {
                l.unlock();
                platform.relax(idle);
                l.lock(platform);
            }
        }
    }

    /// After a polling call (`MPI_Test` and its forms) found nothing: relaxes as an idle wait
    /// round does, if its progress moved nothing. A program that polls in a loop then gives its
    /// core to the ranks it waits for when they share it (as Open MPI yields when idle) instead
    /// of spinning out its time slice: with more ranks than cores, many non-blocking
    /// collectives polled by Test loops took ~10x Open MPI's time (issue 25).
    #[inline]
    pub fn polled_idle(&mut self) {
        if !self.e().moved {
            self.idle();
        }
    }

    /// One round of a wait: progress, then relax if nothing moved, else let waiting threads in.
    #[inline]
    pub fn round(&mut self) {
        if self.e().progress() == 0 {
            self.idle();
        } else {
            self.share();
        }
    }

    /// Lets threads waiting for the engine have it before this one goes on: a waiter whose
    /// rounds keep moving messages would otherwise keep it from them.
    #[inline]
    pub fn share(&mut self) {
        if let Some(l) = self.lock {
            if l.contended() {
                let platform = self.e().platform();
                l.unlock();
                l.lock(platform);
            }
        }
    }

    /// Runs `f` with the engine let go: user callbacks (a generalized request's query, free
    /// and cancel functions) may call MPI, which enters the engine again. Nothing borrowed from
    /// the engine lives across it (`e` borrows from `self`).
    pub fn outside<R>(&mut self, f: impl FnOnce() -> R) -> R {
        match self.lock {
            None => f(),
            Some(l) => {
                let platform = self.e().platform();
                l.unlock();
                let r = f();
                l.lock(platform);
                r
            }
        }
    }

    /// Progresses until `poll` yields a value, relaxing (and letting other threads in) when a
    /// round moved nothing, and letting waiting threads in after a round that did.
    #[inline]
    pub fn block<R>(
        &mut self,
        mut poll: impl FnMut(&mut Engine) -> Result<Option<R>>,
    ) -> Result<R> {
        // A wait is where others get their turn, also when this one is over at once (a thread
        // whose every wait finds its message already in would never let them in otherwise).
        self.share();
        loop {
            if let Some(r) = poll(self.e())? {
                return Ok(r);
            }
            self.round();
        }
    }

    /// Waits for request `id` and frees it (`MPI_Wait`). A truncated message is an error in
    /// the status.
    ///
    /// A point-to-point request is finished by point-to-point progress alone (the transports
    /// and the PML's protocol work), so its rounds run just that, and the whole progress round
    /// (collectives, communicator duplications, freed communicators) only every
    /// [`FULL_ROUND_EVERY`]th: a receive's wait is mostly the round that finds nothing.
    #[inline]
    pub fn wait(&mut self, id: ReqId) -> Result<Status> {
        self.wait_with(id, |st| *st)
    }

    /// [`Inside::wait`] handing the status to `f` where it lies (a receive's status goes to
    /// the caller's `MPI_Status` without being copied out first); `f`'s result.
    #[inline(always)]
    pub fn wait_with<R>(&mut self, id: ReqId, f: impl FnOnce(&Status) -> R) -> Result<R> {
        if !self.e().p2p.pml.requests().is_p2p(id) {
            let st = self.block(|e| e.p2p.pml.requests_mut().test(id))?;
            return Ok(f(&st));
        }
        self.share();
        let mut rounds = 0u32;
        let mut f = Some(f);
        loop {
            let e = self.e();
            if e.p2p.pml.requests().done(id) {
                let requests = e.p2p.pml.requests_mut();
                if let Some(Some(r)) = requests.test_with(id, |st| f.take().map(|f| f(st)))? {
                    return Ok(r);
                }
            }
            rounds = rounds.wrapping_add(1);
            let n = if rounds.is_multiple_of(FULL_ROUND_EVERY) {
                e.progress()
            } else {
                e.p2p.progress()
            };
            if n > 0 {
                e.idle = 0;
                self.share();
            } else {
                self.idle();
            }
        }
    }
}

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.lock {
            l.unlock();
        }
    }
}
