//! The C API's own state: init flags, thread level, the main thread, the error ring.
//!
//! Everything that operations touch — requests (persistent ones included) and the buffer
//! attached for buffered sends — lives in the engine, under its lock when threads may call at
//! once; what is left here is set at init or only recorded.

use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use super::errors::ErrorRing;
use super::Hooks;

pub(crate) static INITIALIZED: AtomicBool = AtomicBool::new(false);
pub(crate) static FINALIZED: AtomicBool = AtomicBool::new(false);

/// The engine is up: brought up by `MPI_Init` or the first `MPI_Session_init`, not yet torn
/// down (that happens when the world model and every session are finalized).
pub(crate) static UP: AtomicBool = AtomicBool::new(false);
/// The engine was torn down: it cannot come up again in this process.
pub(crate) static TORN_DOWN: AtomicBool = AtomicBool::new(false);

/// The intercommunicator with the parents of a spawned process (`MPI_Comm_get_parent`), made
/// in `MPI_Init`; `MPI_COMM_NULL` for a process that was not spawned and after it is freed or
/// disconnected.
pub(crate) static PARENT: AtomicI32 = AtomicI32::new(super::abi::MPI_COMM_NULL);

/// Whether MPI calls may run: the engine is up (for the world model or a session).
pub(crate) fn active() -> bool {
    UP.load(Ordering::Acquire)
}

/// Whether the world model is in use: `MPI_Init` has run and `MPI_Finalize` has not.
pub(crate) fn world_active() -> bool {
    INITIALIZED.load(Ordering::Acquire) && !FINALIZED.load(Ordering::Acquire)
}

pub(crate) struct State {
    pub hooks: Option<&'static Hooks>,
    pub thread_level: c_int,
    /// The platform's id of the thread that initialised MPI (`MPI_Is_thread_main`).
    pub main_thread: u64,
    pub errors: ErrorRing,
}

pub(crate) static STATE: spin::Mutex<State> = spin::Mutex::new(State {
    hooks: None,
    thread_level: super::abi::MPI_THREAD_SINGLE,
    main_thread: 0,
    errors: ErrorRing::new(),
});

/// The platform hooks, once `MPI_Init` has bound them.
pub(crate) fn hooks() -> Option<&'static Hooks> {
    STATE.lock().hooks
}
