//! The request core: the pool every operation's request lives in, completion, test, release and
//! the Rust API's scopes. Both paths of the PML ([`super::Ob1`], [`super::Cm`]) keep their
//! requests here, and so do non-blocking collectives and communicator duplications (a request
//! of their own that their machinery finishes), so every Wait/Test form completes any of them.
//!
//! A request is built in its slot (a receive carries its convertor, a few hundred bytes, which a
//! move would copy once more), completed where it lies, and dropped in place once its owner has
//! seen it complete. An owner that lets go of an unfinished request (`MPI_Request_free`) leaves
//! it *detached*: its slot is freed when it completes.

use super::request::{Op, RecvReq, RecvState, ReqId, Request, Source, Status, TagSel};
use crate::arena::{Arena, Sizer};
use crate::comm::CommId;
use crate::datatype::convertor::Unpacker;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::params::{Default, Kind, ParamDef, Params};
use crate::pool::{Capacity, Key, Pool};

/// Requests carved at init (the pool grows from there).
pub const REQUESTS_INITIAL: u32 = 256;

/// `pml_max_requests`.
pub static MAX_REQUESTS: ParamDef = ParamDef {
    name: "pml_max_requests",
    // The C ABI encodes a request's slot in 22 bits of its handle.
    kind: Kind::Int {
        min: 4,
        max: super::HANDLE_SLOTS as i64,
    },
    default: Default::Int(super::HANDLE_SLOTS as i64),
    description: "Most point-to-point requests outstanding at once in a process (the pool starts \
                  at 256 and grows within mpi_memory_max; at most 2^22, what a C handle encodes)",
};

/// The requests of one process.
pub struct Requests {
    /// The slots; the PML's queues link them by index.
    pub(crate) pool: Pool<Request>,
    /// The last scope id handed out.
    next_scope: u32,
}

fn bad_request() -> Error {
    Error::new(ErrorClass::Request, Reason::InvalidRequest)
}

impl Requests {
    fn capacity(params: &Params) -> Capacity {
        Capacity::growing(REQUESTS_INITIAL, params.u32(&MAX_REQUESTS))
    }

    /// Arena bytes for the initial pool.
    pub fn size(params: &Params, sizer: &mut Sizer) {
        Pool::<Request>::size(sizer, Requests::capacity(params));
    }

    /// The pool, carved from `arena` (it grows through `arena`'s memory account).
    pub fn new(params: &Params, arena: &mut Arena) -> Result<Requests> {
        Ok(Requests {
            pool: Pool::new(arena, Requests::capacity(params))?,
            next_scope: 0,
        })
    }

    /// The error of a full pool.
    #[cold]
    pub(crate) fn exhausted(&self) -> Error {
        self.pool.exhausted("request pool", MAX_REQUESTS.name)
    }

    /// Stores the request `make` builds, built in its slot rather than moved there.
    #[inline(always)]
    pub(crate) fn insert_with(&mut self, make: impl FnOnce() -> Request) -> Result<Key> {
        match self.pool.insert_with(make) {
            Some(key) => Ok(key),
            None => Err(self.exhausted()),
        }
    }

    /// A posted receive for `src`/`tag` on `comm` into the convertor `make` builds, in its slot.
    #[inline(always)]
    pub(crate) fn insert_recv(
        &mut self,
        make: impl FnOnce() -> Unpacker,
        src: Source,
        tag: TagSel,
        comm: CommId,
        scope: u32,
    ) -> Result<Key> {
        self.insert_with(|| {
            let recv = RecvReq {
                conv: make(),
                comm,
                src,
                tag,
                state: RecvState::Posted,
                post: 0,
            };
            Request::new(Op::Recv(recv), scope)
        })
    }

    /// A request that is complete from the start with `status` (an operation with
    /// `MPI_PROC_NULL`, a send that went at once).
    pub fn completed(&mut self, status: Status, scope: u32) -> Result<ReqId> {
        let key = self.insert_with(|| {
            let mut req = Request::new(Op::Null, scope);
            req.complete = true;
            req.status = status;
            req
        })?;
        Ok(ReqId(key))
    }

    /// A request that completes when [`Requests::finish`] says (a non-blocking collective's, a
    /// communicator duplication's).
    pub fn pending(&mut self, scope: u32) -> Result<ReqId> {
        Ok(ReqId(self.insert_with(|| Request::new(Op::Null, scope))?))
    }

    /// Completes a request made by [`Requests::pending`] with `status`.
    pub fn finish(&mut self, id: ReqId, status: Status) {
        if let Some(req) = self.pool.get_mut(id.0) {
            req.status = status;
            self.complete(id.0.index);
        }
    }

    /// Marks slot `idx` complete, freeing it if its owner already let go of it. The request
    /// must be off every queue.
    #[inline]
    pub(crate) fn complete(&mut self, idx: u32) {
        let Some(key) = self.pool.key_at(idx) else {
            return;
        };
        let Some(req) = self.pool.get_mut(key) else {
            return;
        };
        debug_assert!(!req.work.is_linked() && !req.queue.is_linked());
        req.complete = true;
        if req.detached {
            self.pool.discard(key);
        }
    }

    /// If request `id` is complete, frees it and returns its status.
    #[inline]
    pub fn test(&mut self, id: ReqId) -> Result<Option<Status>> {
        let req = self.pool.get(id.0).ok_or_else(bad_request)?;
        if !req.complete {
            return Ok(None);
        }
        let status = req.status;
        self.pool.discard(id.0);
        Ok(Some(status))
    }

    /// Whether request `id` is a send or receive (which point-to-point progress alone finishes).
    #[inline]
    pub fn is_p2p(&self, id: ReqId) -> bool {
        matches!(
            self.pool.get(id.0).map(|r| &r.op),
            Some(Op::Send(_) | Op::Recv(_))
        )
    }

    /// Whether request `id` is complete, without freeing it.
    pub fn is_complete(&self, id: ReqId) -> Result<bool> {
        self.pool
            .get(id.0)
            .map(|r| r.complete)
            .ok_or_else(bad_request)
    }

    /// Lets go of request `id`: freed now if complete, else when it completes.
    pub fn release(&mut self, id: ReqId) -> Result<()> {
        let req = self.pool.get_mut(id.0).ok_or_else(bad_request)?;
        if req.complete {
            self.pool.discard(id.0);
        } else {
            req.detached = true;
        }
        Ok(())
    }

    /// The current request in slot `index`, if any.
    pub fn at(&self, index: u32) -> Option<ReqId> {
        self.pool.key_at(index).map(ReqId)
    }

    /// The communicator a receive request is on.
    pub fn comm_of(&self, id: ReqId) -> Option<CommId> {
        match &self.pool.get(id.0)?.op {
            Op::Recv(r) => Some(r.comm),
            _ => None,
        }
    }

    /// Requests in use.
    pub fn len(&self) -> u32 {
        self.pool.len()
    }

    /// Whether no request is in use.
    pub fn is_empty(&self) -> bool {
        self.pool.is_empty()
    }

    /// A new scope id for the requests started inside one `scope` call of the Rust API.
    pub fn open_scope(&mut self) -> u32 {
        self.next_scope = self.next_scope.wrapping_add(1).max(1);
        self.next_scope
    }

    /// The requests of `scope` still held (complete or not).
    pub fn of_scope(&self, scope: u32) -> impl Iterator<Item = ReqId> + '_ {
        self.pool
            .iter()
            .filter(move |(_, r)| r.scope == scope)
            .map(|(k, _)| ReqId(k))
    }

    /// The first request of `scope` not complete yet.
    pub fn scope_pending(&self, scope: u32) -> Option<ReqId> {
        self.pool
            .iter()
            .find(|(_, r)| r.scope == scope && !r.complete)
            .map(|(k, _)| ReqId(k))
    }

    /// Frees every complete request of `scope` (the scope has ended: nobody holds them).
    pub fn close_scope(&mut self, scope: u32) {
        loop {
            let found = self
                .pool
                .iter()
                .find(|(_, r)| r.scope == scope && r.complete)
                .map(|(k, _)| k);
            match found {
                Some(key) => {
                    self.pool.discard(key);
                }
                None => return,
            }
        }
    }
}
