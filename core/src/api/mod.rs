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
use crate::shared::Inside;

/// A rank in a communicator.
pub type Rank = i32;
/// A message tag.
pub type Tag = i32;

/// Where an engine lives when the Rust API (or the C API) drives it.
pub type EngineLock = crate::shared::Shared;

/// The process's engine, shared by the C API and the Rust API of a platform shim.
pub static ENGINE: EngineLock = crate::shared::Shared::new();

/// An initialised MPI environment.
pub struct Universe {
    engine: &'static EngineLock,
}

impl Universe {
    /// The universe of an initialised engine.
    pub fn new(engine: &'static EngineLock) -> Result<Universe> {
        let live = engine.enter().is_some_and(|mut cx| !cx.e().is_finalized());
        if !live {
            return Err(Error::new(
                ErrorClass::Other,
                crate::error::Reason::NotInitialized,
            ));
        }
        // Its handles are `Send` and `Sync`: threads may call at once.
        engine.allow_threads();
        Ok(Universe { engine })
    }

    /// `MPI_COMM_WORLD` (after [`Universe::finalize`], a handle of no processes).
    pub fn world(&self) -> Communicator<'_> {
        Communicator::predefined(self, CommId::WORLD)
    }

    /// `MPI_COMM_SELF` (after [`Universe::finalize`], a handle of no processes).
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
        self.inside(|cx| cx.finalize())
    }

    /// Runs `f` on the engine.
    pub fn with<R>(&self, f: impl FnOnce(&mut Engine) -> R) -> R {
        self.inside(|cx| f(cx.e()))
    }

    /// Runs `f` inside the engine, where it may wait (letting other threads in meanwhile).
    pub fn inside<R>(&self, f: impl FnOnce(&mut Inside) -> R) -> R {
        // A universe exists only for an installed engine, which is never taken away.
        let mut cx = self
            .engine
            .enter()
            .expect("Universe exists only for an initialised engine");
        f(&mut cx)
    }

    /// Polls `poll` until it yields, progressing and relaxing in between. The engine's lock is
    /// released while relaxing, so other threads can make progress too.
    pub(crate) fn block<R>(&self, poll: impl FnMut(&mut Engine) -> Result<Option<R>>) -> Result<R> {
        self.inside(|cx| cx.block(poll))
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
