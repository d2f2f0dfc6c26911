//! The Rust API, in the manner of rsmpi (the `mpi` crate).
//!
//! ```ignore
//! let universe = stormpi::initialize()?;          // from a platform shim
//! let world = universe.world();
//! if world.rank() == 0 {
//!     world.process_at_rank(1).send(&[1.0f64, 2.0])?;
//! } else if world.rank() == 1 {
//!     let mut buf = [0.0f64; 2];
//!     let status = world.process_at_rank(0).receive_into(&mut buf)?;
//! }
//! universe.scope(|s| {
//!     let req = world.process_at_rank(peer).immediate_send(s, &data)?;
//!     // ... overlap ...
//!     req.wait()
//! })?;
//! world.barrier()?;
//! ```
//!
//! Non-blocking operations live in a [`Universe::scope`], like threads in `std::thread::scope`:
//! their buffers must outlive the scope, and the scope does not return before every request
//! started in it has completed — even one that was leaked with `mem::forget` — so a buffer can
//! never be freed or reused while the engine still reads or writes it. Dropping an unfinished
//! [`Request`] waits for it.

mod communicator;
mod request;

pub use communicator::{AnyProcess, Communicator, Message, Process};
pub use request::{Request, Scope};

pub use crate::datatype::{Datatype, Equivalence};
pub use crate::error::{Error, ErrorClass, Result};
pub use crate::op::Op;
pub use crate::pml::request::Status;

use crate::comm::CommId;
use crate::engine::Engine;

/// A rank in a communicator.
pub type Rank = i32;
/// A message tag.
pub type Tag = i32;

/// The lock an engine lives behind when the Rust API (or the C API) drives it.
pub type EngineLock = spin::Mutex<Option<Engine>>;

/// The process's engine, shared by the C API and the Rust API of a platform shim.
pub static ENGINE: EngineLock = spin::Mutex::new(None);

/// An initialised MPI environment.
pub struct Universe {
    engine: &'static EngineLock,
}

impl Universe {
    /// The universe of an initialised engine.
    pub fn new(engine: &'static EngineLock) -> Result<Universe> {
        if engine.lock().as_ref().is_none_or(Engine::is_finalized) {
            return Err(Error::new(
                ErrorClass::Other,
                crate::error::Reason::NotInitialized,
            ));
        }
        Ok(Universe { engine })
    }

    /// `MPI_COMM_WORLD`.
    pub fn world(&self) -> Communicator<'_> {
        Communicator::predefined(self, CommId::WORLD)
    }

    /// `MPI_COMM_SELF`.
    pub fn self_comm(&self) -> Communicator<'_> {
        Communicator::predefined(self, CommId::SELF)
    }

    /// Seconds since an arbitrary point (`MPI_Wtime`).
    pub fn wtime(&self) -> f64 {
        self.with(|e| e.wtime())
    }

    /// Runs `f` with a scope for non-blocking operations; returns once every request started in
    /// the scope has completed.
    pub fn scope<'env, F, R>(&'env self, f: F) -> R
    where
        F: for<'s> FnOnce(&'s Scope<'s, 'env>) -> R,
    {
        let id = self.with(|e| e.open_scope());
        // Declared before the scope so it is dropped after it — also when `f` panics.
        let _close = request::CloseOnDrop { universe: self, id };
        let scope = Scope::new(self, id);
        f(&scope)
    }

    /// Shuts MPI down (`MPI_Finalize`).
    pub fn finalize(&self) -> Result<()> {
        self.with(|e| e.finalize())
    }

    /// Runs `f` on the engine.
    pub fn with<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        let mut guard = self.engine.lock();
        f(guard
            .as_mut()
            .expect("Universe exists only for an initialised engine"))
    }

    /// Polls `poll` until it yields, progressing and relaxing in between. The engine's lock is
    /// released while relaxing, so other threads can make progress too.
    pub(crate) fn block<R>(
        &self,
        mut poll: impl FnMut(&mut Engine) -> Result<Option<R>>,
    ) -> Result<R> {
        loop {
            let platform = {
                let mut guard = self.engine.lock();
                let e = guard.as_mut().expect("initialised");
                if let Some(r) = poll(e)? {
                    return Ok(r);
                }
                if e.progress() > 0 {
                    continue;
                }
                e.relax_count()
            };
            platform.0.relax(platform.1);
        }
    }
}

/// A receive status that carries an error (a message that did not fit, a value that did not
/// convert) becomes that error.
pub(crate) fn checked(status: Status, _capacity: usize) -> Result<Status> {
    match status.error {
        None => Ok(status),
        Some(e) => Err(e),
    }
}
