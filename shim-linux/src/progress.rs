//! Passive-target progress: a thread that drives the engine while the process computes outside
//! MPI, so that another process's `MPI_Win_lock`/`MPI_Win_flush` on this process's windows
//! complete without waiting for this one's next MPI call.
//!
//! One-sided operations on windows whose peers are reached by messages (TCP) are applied by the
//! target's progress. The core asks for this thread when such a window is created and gives it
//! up at the last one's free ([`Platform::passive_progress_start`]); the thread sleeps in
//! `poll(2)` on the TCP modules' epoll descriptors (readable when a socket of theirs has an
//! event), plus an eventfd that ends it, with a timeout as a backstop, and runs one round of the
//! engine's progress — under the engine's lock, like any thread of an `MPI_THREAD_MULTIPLE`
//! program — after each wake. It never spins: a wake whose round moved nothing (a transport that
//! looks at its idle sockets only now and then) is followed by a short sleep.
//!
//! [`Platform::passive_progress_start`]: stormpi_core::platform::Platform::passive_progress_start

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use stormpi_core::error::{Allowed, Result};
use stormpi_core::params::{Default, Kind, ParamDef};

/// `osc_progress_thread`.
pub static OSC_PROGRESS_THREAD: ParamDef = ParamDef {
    name: "osc_progress_thread",
    kind: Kind::Str,
    default: Default::Str("auto"),
    description: "Passive-target progress thread for one-sided windows whose peers are reached \
                  by messages: auto (when the tcp BTL is in use), on (also without it: then it \
                  looks every 20 ms), off",
};

/// Longest sleep in `poll` (the backstop for an event the transports' edge-triggered epoll
/// reported to a round that did not take it).
const POLL_MS: i32 = 20;

const AUTO: u8 = 0;
const ON: u8 = 1;
const OFF: u8 = 2;

/// The mode of `osc_progress_thread`'s value.
pub fn mode_of(text: &str) -> Result<u8> {
    match text {
        "auto" => Ok(AUTO),
        "on" | "1" | "true" | "yes" => Ok(ON),
        "off" | "0" | "false" | "no" => Ok(OFF),
        _ => Err(OSC_PROGRESS_THREAD.refused_with(Allowed::Text("auto, on or off"))),
    }
}

/// A running thread.
struct Running {
    handle: JoinHandle<()>,
    stop: Arc<AtomicBool>,
    wake: OwnedFd,
}

/// The process's passive-target progress thread, when one runs, and what it waits on.
pub struct PassiveProgress {
    mode: AtomicU8,
    /// The TCP modules' epoll descriptors (the modules live as long as the process).
    sources: Mutex<Vec<RawFd>>,
    running: Mutex<Option<Running>>,
}

impl PassiveProgress {
    /// None running, mode `auto`, no sources.
    pub const fn new() -> PassiveProgress {
        PassiveProgress {
            mode: AtomicU8::new(AUTO),
            sources: Mutex::new(Vec::new()),
            running: Mutex::new(None),
        }
    }

    /// Sets the mode (a value of [`mode_of`]).
    pub fn set_mode(&self, mode: u8) {
        self.mode.store(mode, Ordering::Relaxed);
    }

    /// Adds a descriptor that is readable when a transport has an event (an epoll instance).
    pub fn add_source(&self, fd: RawFd) {
        if let Ok(mut s) = self.sources.lock() {
            s.push(fd);
        }
    }

    /// Starts the thread unless it runs or the mode says not to; whether it runs.
    pub fn start(&self, progress: fn() -> usize) -> bool {
        let fds = match self.sources.lock() {
            Ok(s) => s.clone(),
            Err(_) => return false,
        };
        match self.mode.load(Ordering::Relaxed) {
            OFF => return false,
            AUTO if fds.is_empty() => return false,
            _ => {}
        }
        let Ok(mut running) = self.running.lock() else {
            return false;
        };
        if running.is_some() {
            return true;
        }
        // SAFETY: no pointers; the result is checked and owned at once.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            eprintln!(
                "stormpi: osc: eventfd: {}; no passive-target progress thread",
                std::io::Error::last_os_error()
            );
            return false;
        }
        // SAFETY: `efd` is a fresh descriptor nobody else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&stop);
        let wake_fd = wake.as_raw_fd();
        let spawned = std::thread::Builder::new()
            .name("stormpi-osc".into())
            .spawn(move || run(&fds, wake_fd, &seen, progress));
        match spawned {
            Ok(handle) => {
                *running = Some(Running { handle, stop, wake });
                true
            }
            Err(e) => {
                eprintln!("stormpi: osc: cannot start the passive-target progress thread: {e}");
                false
            }
        }
    }

    /// Stops the thread, if one runs, and waits for it to end.
    pub fn stop(&self) {
        let r = match self.running.lock() {
            Ok(mut r) => r.take(),
            Err(_) => None,
        };
        let Some(r) = r else { return };
        r.stop.store(true, Ordering::Release);
        let one = 1u64.to_ne_bytes();
        // SAFETY: `one` is 8 readable bytes, an eventfd's write unit; the descriptor is open
        // (owned by `r`).
        let _ = unsafe { libc::write(r.wake.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        let _ = r.handle.join();
    }
}

impl std::default::Default for PassiveProgress {
    fn default() -> Self {
        PassiveProgress::new()
    }
}

/// The thread: sleep until a transport has an event (or the backstop), then one round.
fn run(fds: &[RawFd], wake: RawFd, stop: &AtomicBool, progress: fn() -> usize) {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .chain([wake].iter())
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut backoff = 0u64;
    loop {
        // SAFETY: `pfds` is a valid array of `len` pollfds for the call.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, POLL_MS) };
        if stop.load(Ordering::Acquire) {
            return;
        }
        let moved = progress();
        if n > 0 && moved == 0 {
            // An event the round did not take: wait a little rather than poll it again at once.
            backoff = (backoff * 2).clamp(1, POLL_MS as u64);
            std::thread::sleep(Duration::from_millis(backoff));
        } else {
            backoff = 0;
        }
    }
}
