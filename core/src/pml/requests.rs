//! The request core: the pool every operation's request lives in, completion, test, release and
//! the Rust API's scopes. Both paths of the PML ([`super::Ob1`], [`super::Cm`]) keep their
//! requests here, and so do non-blocking collectives and communicator duplications (a request
//! of their own that their machinery finishes), so every Wait/Test form completes any of them.
//!
//! A request is built in its slot (a receive carries its convertor, a few hundred bytes, which a
//! move would copy once more), completed where it lies, and dropped in place once its owner has
//! seen it complete. An owner that lets go of an unfinished request (`MPI_Request_free`) leaves
//! it *detached*: its slot is freed when it completes.
//!
//! A persistent request (`MPI_Send_init`, ...) is a slot of its own kind ([`Op::Persistent`]):
//! it keeps what each start does and, while active, the request of its current start's
//! operation, an ordinary one that the PML runs and completes. It grows with the pool like any
//! request, and every Wait/Test form treats all kinds alike: [`Requests::current`] names the
//! operation to complete (none for an inactive persistent request, which completes at once
//! with the empty status), the form waits for or tests that operation as for any request, and
//! [`Requests::retire`] then says whether the handle's request went with it (an ordinary one) or
//! stays, inactive (a persistent one). The fast path of an ordinary request is unchanged by
//! this: `current` is the one look at the slot that finding a receive's communicator took
//! before, the wait is [`Requests::test`] in a loop as before, and `retire` a branch.
//!
//! The buffer attached for buffered sends lives here too ([`BsendBuffer`]): its parts are taken
//! by sends whose requests are in this pool, and are free again when those complete.

use super::bsend::BsendBuffer;
use super::request::{
    Joined, Op, Persistent, PersistentKind, RecvReq, RecvState, ReqId, Request, Source, Status,
    TagSel,
};
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
    /// The buffer attached for buffered sends, and the sends using it.
    bsend: BsendBuffer,
    /// Joined requests not complete yet (`MPI_Isendrecv`): progress looks for them only then.
    joined: u32,
}

/// What completing a request handle means now (for the Wait and Test forms), as
/// [`Requests::current`] finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Current {
    /// Nothing in flight: an inactive persistent request (or, to the C layer,
    /// `MPI_REQUEST_NULL`). It completes at once, with the empty status.
    Inactive,
    /// An operation in flight, or complete and not yet seen.
    Op {
        /// Its request.
        op: ReqId,
        /// The communicator to report its errors on, where the request knows one.
        comm: Option<CommId>,
        /// The persistent request whose current start `op` is: left inactive (its handle
        /// stays) when `op` completes. `None`: the handle's request is `op` itself, freed then.
        persistent: Option<ReqId>,
    },
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
            bsend: BsendBuffer::new(),
            joined: 0,
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

    /// A request completed when receive `recv` and send `send` (if any: `None` went at once)
    /// both have (`MPI_Isendrecv`); `release` is called when it completes.
    pub fn joined(
        &mut self,
        recv: Option<ReqId>,
        send: Option<ReqId>,
        release: Option<crate::pml::request::Release>,
    ) -> Result<ReqId> {
        let j = Joined {
            recv,
            send,
            status: Status::PROC_NULL,
            send_error: None,
            release,
        };
        let id = ReqId(self.insert_with(|| Request::new(Op::Joined(j), 0))?);
        self.joined += 1;
        self.joined_progress();
        Ok(id)
    }

    /// Takes in the parts of joined requests that completed, and completes those whose parts
    /// all have. Looks through the pool only while some joined request is incomplete.
    #[inline(always)]
    pub fn joined_progress(&mut self) {
        if self.joined != 0 {
            self.joined_progress_busy();
        }
    }

    #[inline(never)]
    fn joined_progress_busy(&mut self) {
        for idx in 0..self.pool.capacity() {
            let Some(Request {
                op: Op::Joined(j),
                complete: false,
                ..
            }) = self.pool.at(idx)
            else {
                continue;
            };
            let mut j = *j;
            if let Some(r) = j.recv.filter(|&r| self.done(r)) {
                j.status = match self.test(r) {
                    Ok(Some(st)) => st,
                    _ => Status {
                        error: Some(bad_request()),
                        ..Status::PROC_NULL
                    },
                };
                j.recv = None;
            }
            if let Some(s) = j.send.filter(|&s| self.done(s)) {
                j.send_error = match self.test(s) {
                    Ok(Some(st)) => st.error,
                    _ => Some(bad_request()),
                };
                j.send = None;
            }
            let finished = j.recv.is_none() && j.send.is_none();
            let Some(req) = self.pool.at_mut(idx) else {
                continue;
            };
            req.op = Op::Joined(j);
            if finished {
                if let Some((f, p, n)) = j.release {
                    f(p, n);
                }
                req.status = Status {
                    error: j.status.error.or(j.send_error),
                    ..j.status
                };
                self.joined -= 1;
                self.complete(idx);
            }
        }
    }

    /// A generalized request keeping `words` for the MPI layer, pending until
    /// [`Requests::finish`].
    pub fn generalized(&mut self, words: [usize; 4]) -> Result<ReqId> {
        Ok(ReqId(
            self.insert_with(|| Request::new(Op::Generalized(words), 0))?,
        ))
    }

    /// The words of generalized request `id`, and whether its owner let go of it; `None` for
    /// any other request.
    pub fn generalized_of(&self, id: ReqId) -> Option<([usize; 4], bool)> {
        match self.pool.get(id.0) {
            Some(Request {
                op: Op::Generalized(w),
                detached,
                ..
            }) => Some((*w, *detached)),
            _ => None,
        }
    }

    /// The status of request `id` if it is complete, leaving it in place
    /// (`MPI_Request_get_status`).
    pub fn peek(&self, id: ReqId) -> Result<Option<Status>> {
        let req = self.pool.get(id.0).ok_or_else(bad_request)?;
        Ok(req.complete.then_some(req.status))
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
        self.test_with(id, |st| *st)
    }

    /// [`Requests::test`] handing the status to `f` where it lies; `f`'s result.
    #[inline(always)]
    pub fn test_with<R>(&mut self, id: ReqId, f: impl FnOnce(&Status) -> R) -> Result<Option<R>> {
        let req = self.pool.get(id.0).ok_or_else(bad_request)?;
        if !req.complete {
            return Ok(None);
        }
        let r = f(&req.status);
        self.pool.discard(id.0);
        Ok(Some(r))
    }

    /// If request `id` is a send or receive that has completed, frees it and returns its status
    /// and, for a receive, its communicator; `None` for anything else (not complete, another
    /// kind, a stale id), which the caller completes the general way. The Wait forms' look at
    /// a request that progress already finished (most of a `MPI_Waitall`'s).
    #[inline]
    pub fn take_finished(&mut self, id: ReqId) -> Option<(Status, Option<CommId>)> {
        self.take_finished_with(id, |st, comm| (*st, comm))
    }

    /// [`Requests::take_finished`] handing the status to `f` where it lies (no copy of it on
    /// the way to the caller's `MPI_Status`); `f`'s result, or `None` as there.
    #[inline(always)]
    pub fn take_finished_with<R>(
        &mut self,
        id: ReqId,
        f: impl FnOnce(&Status, Option<CommId>) -> R,
    ) -> Option<R> {
        let req = self.pool.get(id.0)?;
        if !req.complete {
            return None;
        }
        let comm = match &req.op {
            Op::Recv(r) => Some(r.comm),
            Op::Send(_) => None,
            _ => return None,
        };
        let r = f(&req.status, comm);
        self.pool.discard(id.0);
        Some(r)
    }

    /// Whether request `id` is complete; `true` for a stale id too, so that the caller's
    /// [`Requests::test`] reports it. The wait loops' cheap look between progress rounds: it
    /// copies no status.
    #[inline(always)]
    pub fn done(&self, id: ReqId) -> bool {
        self.pool.get(id.0).is_none_or(|r| r.complete)
    }

    /// The operation completing request `id` waits for, when no callback or parts are involved:
    /// `id` itself for a send, a receive or a plain operation (`Op::Null`: one that completed as
    /// it started, a non-blocking collective's), or such an operation as the current start of a
    /// persistent request — then with `id`, which stays, inactive, once it completes. `None` for
    /// generalized and joined requests and an inactive persistent one.
    #[inline]
    pub fn current_op(&self, id: ReqId) -> Option<(ReqId, Option<ReqId>)> {
        let plain = |op: &Op| matches!(op, Op::Send(_) | Op::Recv(_) | Op::Null);
        match &self.pool.get(id.0)?.op {
            op if plain(op) => Some((id, None)),
            Op::Persistent(Persistent {
                active: Some(op), ..
            }) => {
                let cur = &self.pool.get(op.0)?.op;
                plain(cur).then_some((*op, Some(id)))
            }
            _ => None,
        }
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

    /// Lets go of request `id`: freed now if complete, else when it completes. A persistent
    /// request is freed now, and the operation of its current start, if any, let go of so: it
    /// finishes on its own. (Whatever its maker retained for it — the datatype of
    /// [`PersistentKind::P2p`] — is the maker's to release: see [`Requests::persistent_kind`].)
    pub fn release(&mut self, id: ReqId) -> Result<()> {
        let req = self.pool.get_mut(id.0).ok_or_else(bad_request)?;
        if req.complete {
            self.pool.discard(id.0);
        } else if let Op::Persistent(p) = &req.op {
            let active = p.active;
            self.pool.discard(id.0);
            if let Some(op) = active {
                self.release(op)?;
            }
        } else {
            req.detached = true;
        }
        Ok(())
    }

    // ---- the Wait and Test forms, for every kind of request ----------------------------------

    /// What completing request `id` means now: its own operation, the operation of a persistent
    /// request's current start, or nothing (an inactive persistent request).
    #[inline]
    pub fn current(&self, id: ReqId) -> Result<Current> {
        let req = self.pool.get(id.0).ok_or_else(bad_request)?;
        Ok(match &req.op {
            Op::Recv(r) => Current::Op {
                op: id,
                comm: Some(r.comm),
                persistent: None,
            },
            Op::Persistent(p) => match p.active {
                None => Current::Inactive,
                Some(op) => Current::Op {
                    op,
                    comm: Some(p.kind.comm()),
                    persistent: Some(id),
                },
            },
            Op::Send(_) | Op::Null | Op::Generalized(_) | Op::Joined(_) => Current::Op {
                op: id,
                comm: None,
                persistent: None,
            },
        })
    }

    /// Records that the operation of `cur` was seen complete (and freed: [`Requests::test`],
    /// or a wait): a persistent request whose current start it was becomes inactive. Returns
    /// whether the handle's own request is gone with it (an ordinary request, whose handle is
    /// now null), not a persistent one that stays.
    #[inline]
    pub fn retire(&mut self, cur: Current) -> bool {
        match cur {
            Current::Op {
                persistent: Some(p),
                ..
            } => {
                self.deactivate(p);
                false
            }
            Current::Op {
                persistent: None, ..
            } => true,
            Current::Inactive => false,
        }
    }

    /// Marks persistent request `id` inactive (its current start has been seen complete).
    pub fn deactivate(&mut self, id: ReqId) {
        if let Some(Request {
            op: Op::Persistent(p),
            ..
        }) = self.pool.get_mut(id.0)
        {
            p.active = None;
        }
    }

    // ---- persistent requests ----------------------------------------------------------------

    /// A new persistent request, inactive, whose starts begin what `kind` says.
    pub fn persistent(&mut self, kind: PersistentKind) -> Result<ReqId> {
        let key = self
            .insert_with(|| Request::new(Op::Persistent(Persistent { kind, active: None }), 0))?;
        Ok(ReqId(key))
    }

    /// What persistent request `id` begins at a start; `None` if `id` is not one.
    pub fn persistent_kind(&self, id: ReqId) -> Option<PersistentKind> {
        match &self.pool.get(id.0)?.op {
            Op::Persistent(p) => Some(p.kind),
            _ => None,
        }
    }

    /// What to begin to start request `id` (`MPI_Start`): it must be an inactive persistent
    /// request. Once begun, [`Requests::started`] records the operation.
    pub fn to_start(&self, id: ReqId) -> Result<PersistentKind> {
        let req = self.pool.get(id.0).ok_or_else(bad_request)?;
        let what = match &req.op {
            Op::Persistent(Persistent { kind, active: None }) => return Ok(*kind),
            Op::Persistent(_) => "persistent request is already active",
            _ => "MPI_Start needs a persistent request",
        };
        Err(Error::new(
            ErrorClass::Request,
            Reason::BadArgument { what },
        ))
    }

    /// Records `op` as the operation of persistent request `id`'s current start: it is active
    /// until a Wait or Test form sees `op` complete.
    pub fn started(&mut self, id: ReqId, op: ReqId) -> Result<()> {
        match self.pool.get_mut(id.0).map(|r| &mut r.op) {
            Some(Op::Persistent(p)) if p.active.is_none() => {
                p.active = Some(op);
                Ok(())
            }
            _ => Err(bad_request()),
        }
    }

    // ---- buffered sends ---------------------------------------------------------------------

    /// The buffer attached for buffered sends.
    pub fn bsend(&self) -> &BsendBuffer {
        &self.bsend
    }

    /// The buffer attached for buffered sends, to attach, reserve and record in.
    pub fn bsend_mut(&mut self) -> &mut BsendBuffer {
        &mut self.bsend
    }

    /// Frees the parts of the attached buffer whose sends have completed, and their requests.
    pub fn reclaim_bsends(&mut self) -> Result<()> {
        let pool = &mut self.pool;
        self.bsend.reclaim(|id| {
            let complete = pool.get(id.0)?.complete;
            if complete {
                pool.discard(id.0);
            }
            Some(complete)
        })
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

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::arena::tests::leak;
    use crate::datatype::Datatype;
    use crate::memory::tests::account;
    use crate::pml::request::{P2pInit, P2pStart};

    /// A request core whose pool grows (within 256 MiB) past its 256 initial slots.
    fn requests() -> Requests {
        let mut params = Params::new(&[]);
        params.register(&MAX_REQUESTS).unwrap();
        let mut arena = Arena::new(leak(1 << 20));
        arena.set_account(account(256 << 20));
        Requests::new(&params, &mut arena).unwrap()
    }

    fn release_marker(p: *mut u8, n: usize) {
        // SAFETY: the test passes a pointer to its own counter.
        unsafe { *p.cast::<usize>() += n };
    }

    #[test]
    fn a_joined_request_completes_when_both_parts_have_with_the_receive_s_status() {
        let mut r = requests();
        let (recv, send) = (r.pending(0).unwrap(), r.pending(0).unwrap());
        let mut released = 0usize;
        let j = r
            .joined(
                Some(recv),
                Some(send),
                Some((release_marker, (&raw mut released).cast(), 5)),
            )
            .unwrap();
        r.finish(
            recv,
            Status {
                source: 3,
                tag: 9,
                bytes: 12,
                ..Status::EMPTY
            },
        );
        r.joined_progress();
        assert!(!r.is_complete(j).unwrap(), "the send is still in flight");
        assert_eq!(released, 0);
        r.finish(send, Status::EMPTY);
        r.joined_progress();
        let st = r.test(j).unwrap().expect("complete");
        assert_eq!((st.source, st.tag, st.bytes), (3, 9, 12));
        assert_eq!(released, 5, "the temporary copy is given back once");
        assert!(
            r.test(recv).is_err() && r.test(send).is_err(),
            "parts are freed"
        );
        r.joined_progress();
        assert_eq!(released, 5);
    }

    fn recv_init(tag: i32) -> PersistentKind {
        PersistentKind::P2p(P2pInit {
            start: P2pStart::Recv,
            buf: core::ptr::null_mut(),
            count: 0,
            datatype: Datatype::INT,
            peer: 1,
            tag,
            comm: CommId::WORLD,
            dense: None,
        })
    }

    fn tagged(tag: i32) -> Status {
        Status {
            source: 1,
            tag,
            ..Status::EMPTY
        }
    }

    #[test]
    fn a_persistent_request_completes_its_starts_and_stays_inactive_in_between() {
        let mut r = requests();
        let p = r.persistent(recv_init(7)).unwrap();
        // Inactive: nothing to complete, and it stays.
        assert_eq!(r.current(p).unwrap(), Current::Inactive);
        assert!(!r.retire(Current::Inactive));
        assert_eq!(r.current(p).unwrap(), Current::Inactive);
        for round in 0..3 {
            assert!(matches!(r.to_start(p).unwrap(), PersistentKind::P2p(i) if i.tag == 7));
            let op = r.pending(0).unwrap();
            r.started(p, op).unwrap();
            let cur = r.current(p).unwrap();
            assert_eq!(
                cur,
                Current::Op {
                    op,
                    comm: Some(CommId::WORLD),
                    persistent: Some(p)
                }
            );
            // Active: a second start is refused, and the operation is not done yet.
            assert_eq!(r.to_start(p).unwrap_err().class, ErrorClass::Request);
            assert_eq!(r.test(op).unwrap(), None);
            r.finish(op, tagged(round));
            assert_eq!(r.test(op).unwrap(), Some(tagged(round)));
            assert!(!r.retire(cur), "the handle stays");
            // The operation is freed, the persistent request is inactive again.
            assert!(r.is_complete(op).is_err());
            assert_eq!(r.current(p).unwrap(), Current::Inactive);
            assert_eq!(r.len(), 1);
        }
        r.release(p).unwrap();
        assert!(r.current(p).is_err());
        assert!(r.is_empty());
    }

    #[test]
    fn freeing_an_active_persistent_request_lets_its_operation_finish() {
        let mut r = requests();
        let p = r.persistent(recv_init(1)).unwrap();
        let op = r.pending(0).unwrap();
        r.started(p, op).unwrap();
        r.release(p).unwrap();
        assert!(r.current(p).is_err(), "the persistent request is gone");
        assert!(!r.is_complete(op).unwrap(), "its operation goes on");
        r.finish(op, tagged(1));
        assert!(r.is_empty(), "and is freed when it completes");
    }

    #[test]
    fn only_persistent_requests_start_and_ordinary_ones_are_their_own_operation() {
        let mut r = requests();
        let op = r.pending(0).unwrap();
        assert_eq!(r.to_start(op).unwrap_err().class, ErrorClass::Request);
        assert!(r.persistent_kind(op).is_none());
        let cur = r.current(op).unwrap();
        assert_eq!(
            cur,
            Current::Op {
                op,
                comm: None,
                persistent: None
            }
        );
        r.finish(op, tagged(3));
        assert_eq!(r.test(op).unwrap(), Some(tagged(3)));
        assert!(r.retire(cur), "the handle's request is gone");
        assert!(r.is_empty());
    }

    #[test]
    fn persistent_requests_grow_with_the_pool() {
        let mut r = requests();
        let n = 5000;
        let ids: std::vec::Vec<ReqId> = (0..n)
            .map(|i| r.persistent(recv_init(i)).unwrap())
            .collect();
        assert_eq!(r.len(), n as u32);
        for (i, &p) in ids.iter().enumerate() {
            assert!(
                matches!(r.persistent_kind(p), Some(PersistentKind::P2p(k)) if k.tag == i as i32)
            );
            let op = r.pending(0).unwrap();
            r.started(p, op).unwrap();
        }
        for &p in &ids {
            r.release(p).unwrap();
        }
        assert_eq!(r.len(), n as u32, "the operations are still running");
    }

    #[test]
    fn reclaiming_frees_the_parts_and_requests_of_completed_buffered_sends() {
        let mut r = requests();
        let size = 3 * (10 + crate::pml::bsend::OVERHEAD);
        let mem: &'static mut [u8] = std::boxed::Box::leak(std::vec![0u8; size].into_boxed_slice());
        // SAFETY: the leaked buffer lives for ever and is touched by nothing else.
        unsafe { r.bsend_mut().attach(mem.as_mut_ptr(), size).unwrap() };
        let mut ops = [ReqId(Key { index: 0, gen: 0 }); 3];
        for op in ops.iter_mut() {
            let place = r.bsend().reserve(10).unwrap();
            *op = r.pending(0).unwrap();
            r.bsend_mut().commit(place, *op);
        }
        assert!(r.bsend().reserve(0).is_err());
        r.finish(ops[1], Status::EMPTY);
        r.reclaim_bsends().unwrap();
        assert_eq!(r.bsend().in_flight(), 2);
        assert!(r.is_complete(ops[1]).is_err(), "its request is freed");
        assert!(r.bsend().reserve(10).is_ok());
        r.finish(ops[0], Status::EMPTY);
        r.finish(ops[2], Status::EMPTY);
        r.reclaim_bsends().unwrap();
        assert_eq!((r.bsend().in_flight(), r.len()), (0, 0));
        assert_eq!(r.bsend_mut().detach(), Some((mem.as_mut_ptr(), size)));
    }
}
