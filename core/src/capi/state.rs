//! The C API's own state: init flags, thread level, persistent requests, the attached buffer.

use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, Ordering};

use super::errors::ErrorRing;
use super::Hooks;
use crate::comm::CommId;
use crate::pml::request::{ReqId, SendMode};

/// Most persistent requests alive at once.
pub(crate) const MAX_PERSISTENT: usize = 1024;
/// Most buffered sends in flight at once.
pub(crate) const MAX_BSENDS: usize = 1024;

pub(crate) static INITIALIZED: AtomicBool = AtomicBool::new(false);
pub(crate) static FINALIZED: AtomicBool = AtomicBool::new(false);

/// Whether `MPI_Init` has run and `MPI_Finalize` has not.
pub(crate) fn active() -> bool {
    INITIALIZED.load(Ordering::Acquire) && !FINALIZED.load(Ordering::Acquire)
}

/// What a persistent request does each time it is started.
#[derive(Clone, Copy)]
pub(crate) enum PersistentOp {
    /// A send in this mode.
    Send(SendMode),
    /// A buffered send (copied into the attached buffer at each start).
    Bsend,
    /// A receive.
    Recv,
}

/// A persistent request (`MPI_Send_init`, `MPI_Recv_init`, ...).
#[derive(Clone, Copy)]
pub(crate) struct Persistent {
    pub op: PersistentOp,
    /// User buffer (lent for the life of the persistent request, by MPI's rules).
    pub buf: *mut u8,
    pub count: c_int,
    /// The datatype's handle (a derived one is retained until the request is freed).
    pub datatype: crate::capi::abi::MPI_Datatype,
    pub peer: c_int,
    pub tag: c_int,
    pub comm: CommId,
    /// The operation of the current start, while active.
    pub active: Option<ReqId>,
}

// SAFETY: the buffer pointer is the user's loan under MPI's rules; the state lock serialises use.
unsafe impl Send for Persistent {}

/// A buffered send occupying part of the attached buffer.
#[derive(Clone, Copy)]
pub(crate) struct Bsent {
    pub offset: usize,
    pub len: usize,
    pub req: ReqId,
}

/// The buffer attached with `MPI_Buffer_attach`.
pub(crate) struct Attached {
    pub base: *mut u8,
    pub size: usize,
    /// Sends still using parts of it, by offset.
    pub live: heapless::Vec<Bsent, MAX_BSENDS>,
}

// SAFETY: as for `Persistent`.
unsafe impl Send for Attached {}

pub(crate) struct State {
    pub hooks: Option<&'static Hooks>,
    pub thread_level: c_int,
    /// The platform's id of the thread that initialised MPI (`MPI_Is_thread_main`).
    pub main_thread: u64,
    pub errors: ErrorRing,
    pub persistent: [Option<Persistent>; MAX_PERSISTENT],
    pub attached: Option<Attached>,
}

pub(crate) static STATE: spin::Mutex<State> = spin::Mutex::new(State {
    hooks: None,
    thread_level: super::abi::MPI_THREAD_SINGLE,
    main_thread: 0,
    errors: ErrorRing::new(),
    persistent: [None; MAX_PERSISTENT],
    attached: None,
});

/// The platform hooks, once `MPI_Init` has bound them.
pub(crate) fn hooks() -> Option<&'static Hooks> {
    STATE.lock().hooks
}
