//! Non-blocking requests and the scopes that bound them.

use core::marker::PhantomData;
use core::mem::ManuallyDrop;

use super::{Result, Status, Universe};
use crate::pml::request::ReqId;

/// A scope for non-blocking operations; see [`Universe::scope`].
pub struct Scope<'s, 'env: 's> {
    pub(crate) universe: &'env Universe,
    pub(crate) id: u32,
    // Invariant in both lifetimes, as `std::thread::Scope`: buffers must outlive the scope.
    _scope: PhantomData<&'s mut &'s ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

impl<'s, 'env> Scope<'s, 'env> {
    pub(crate) fn new(universe: &'env Universe, id: u32) -> Scope<'s, 'env> {
        Scope {
            universe,
            id,
            _scope: PhantomData,
            _env: PhantomData,
        }
    }
}

/// Closes a scope when dropped: waits for and frees every request started in it.
pub(crate) struct CloseOnDrop<'u> {
    pub(crate) universe: &'u Universe,
    pub(crate) id: u32,
}

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        let id = self.id;
        let _ = self.universe.inside(|cx| cx.close_scope(id));
    }
}

/// A non-blocking operation in flight. Its buffer is borrowed for the scope `'s`.
#[must_use = "a request must be waited for (dropping it waits)"]
pub struct Request<'s> {
    universe: &'s Universe,
    id: ReqId,
    capacity: Option<usize>,
}

impl<'s> Request<'s> {
    pub(crate) fn new(universe: &'s Universe, id: ReqId, capacity: Option<usize>) -> Request<'s> {
        Request {
            universe,
            id,
            capacity,
        }
    }

    fn finish(&self, status: Status) -> Result<Status> {
        match self.capacity {
            Some(cap) => super::checked(status, cap),
            None => Ok(status),
        }
    }

    /// Waits for the operation to complete (`MPI_Wait`). A truncated receive is an error.
    pub fn wait(self) -> Result<Status> {
        // Waited for here: dropping must not wait again.
        let this = ManuallyDrop::new(self);
        let id = this.id;
        let status = this.universe.block(|e| e.test(id))?;
        this.finish(status)
    }

    /// Completes the operation if it is done (`MPI_Test`); otherwise hands the request back.
    pub fn test(self) -> Result<core::result::Result<Status, Request<'s>>> {
        let id = self.id;
        match self.universe.with(|e| e.test(id))? {
            Some(status) => {
                // Complete and freed: dropping must not wait.
                let this = ManuallyDrop::new(self);
                this.finish(status).map(Ok)
            }
            None => Ok(Err(self)),
        }
    }

    /// Asks for the operation to be cancelled (`MPI_Cancel`): a receive not yet matched is;
    /// anything else completes normally. Wait for the request afterwards; its status says.
    pub fn cancel(&self) -> Result<()> {
        let id = self.id;
        self.universe.with(|e| e.cancel(id))
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        let id = self.id;
        let _ = self.universe.block(|e| e.test(id));
    }
}
