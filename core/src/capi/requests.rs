//! Completing requests (wait and test in every form), cancelling and freeing them, and
//! persistent requests.
//!
//! Every request handle names a request of the engine's request core, persistent ones included,
//! and every form treats it the same way: [`Requests::current`] says which operation completing
//! it waits for (none for an inactive persistent request: empty status at once), the form waits
//! for or tests that operation, and [`Requests::retire`] says whether the handle's request went
//! with it (an ordinary request: the handle becomes `MPI_REQUEST_NULL`) or stays, inactive (a
//! persistent one).
//!
//! [`Requests::current`]: crate::pml::requests::Requests::current
//! [`Requests::retire`]: crate::pml::requests::Requests::retire

use core::ffi::{c_int, c_void};

use super::abi;
use super::env::{code, run, run_comm, run_inside};
use super::errors::{record, report};
use super::handles::{self, out, put_status, status_at, EMPTY_STATUS};
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::p2p::Elements;
use crate::pml::request::{P2pInit, P2pStart, PersistentKind, ReqId, SendMode, Status};
use crate::pml::requests::Current;
use crate::shared::Inside;

/// What completing the request handle `h` means now. The completed send's handle
/// ([`handles::REQUEST_SENT`]) waits for nothing, like an inactive request; its callers make it
/// `MPI_REQUEST_NULL` when it is completed or freed.
#[inline]
fn current(e: &Engine, h: abi::MPI_Request) -> Result<Current> {
    if h == handles::REQUEST_SENT {
        return Ok(Current::Inactive);
    }
    match handles::request(e, h)? {
        None => Ok(Current::Inactive),
        Some(id) => e.p2p.pml.requests().current(id),
    }
}

/// Completes the request at `h` if done (`block`: wait until it is).
unsafe fn complete(
    cx: &mut Inside,
    h: *mut abi::MPI_Request,
    block: bool,
) -> Result<Option<(Status, Option<CommId>)>> {
    // SAFETY: the caller's contract.
    unsafe { complete_with(cx, h, block, |st, comm| (*st, comm)) }
}

/// [`complete`] handing the status to `f` (a request that progress already finished hands it
/// where it lies, without copying it out first); `f`'s result.
#[inline(always)]
unsafe fn complete_with<R>(
    cx: &mut Inside,
    h: *mut abi::MPI_Request,
    block: bool,
    f: impl FnOnce(&Status, Option<CommId>) -> R,
) -> Result<Option<R>> {
    if h.is_null() {
        return Err(Error::bad_arg("request is NULL"));
    }
    // SAFETY: checked non-null; MPI requires it to point to an MPI_Request.
    if unsafe { *h } == handles::REQUEST_SENT {
        // SAFETY: as above.
        unsafe { *h = abi::MPI_REQUEST_NULL };
        return Ok(Some(f(&EMPTY_STATUS, None)));
    }
    // SAFETY: as above.
    let id = handles::request(cx.e(), unsafe { *h })?;
    let mut f = Some(f);
    if let Some(done) = id.and_then(|id| {
        cx.e()
            .p2p
            .pml
            .requests_mut()
            .take_finished_with(id, |st, comm| f.take().map(|f| f(st, comm)))
    }) {
        // SAFETY: as above.
        unsafe { *h = abi::MPI_REQUEST_NULL };
        return Ok(done);
    }
    let Some(f) = f else {
        return Err(Error::internal(
            "a request's status was taken but not handed back",
        ));
    };
    // SAFETY: the caller's contract.
    unsafe {
        match id {
            Some(id) if cx.e().p2p.pml.requests().is_p2p(id) => complete_p2p(cx, h, id, block, f),
            _ => complete_other(cx, h, id, block, f),
        }
    }
}

/// [`complete_with`] for what is not a send or receive: the current start of a persistent
/// request directly, everything else the general way. Out of line, so that the common case's
/// code keeps its registers.
///
/// # Safety
/// As for [`complete_with`].
#[inline(never)]
unsafe fn complete_other<R>(
    cx: &mut Inside,
    h: *mut abi::MPI_Request,
    id: Option<ReqId>,
    block: bool,
    f: impl FnOnce(&Status, Option<CommId>) -> R,
) -> Result<Option<R>> {
    if let Some((op, Some(p))) = id.and_then(|id| cx.e().p2p.pml.requests().current_op(id)) {
        return complete_persistent(cx, p, op, block, f);
    }
    // SAFETY: the caller's contract.
    let general = unsafe { complete_general(cx, h, id, block) }?;
    Ok(general.map(|(st, comm)| f(&st, comm)))
}

/// [`complete_with`] for a send or receive in flight (`id`), without the general path's
/// look-ups of what the request is: a test (a polling loop's every call) takes one progress
/// round and another look; a wait hands the status, where it lies when the request finishes,
/// to `f`. A finished request's handle becomes `MPI_REQUEST_NULL`.
///
/// # Safety
/// As for [`complete_with`].
#[inline(always)]
unsafe fn complete_p2p<R>(
    cx: &mut Inside,
    h: *mut abi::MPI_Request,
    id: ReqId,
    block: bool,
    f: impl FnOnce(&Status, Option<CommId>) -> R,
) -> Result<Option<R>> {
    let done = if block {
        let comm = cx.e().p2p.pml.requests().comm_of(id);
        Some(cx.wait_with(id, |st| f(st, comm))?)
    } else {
        cx.e().progress();
        cx.e().p2p.pml.requests_mut().take_finished_with(id, f)
    };
    if done.is_some() {
        // SAFETY: the caller's contract (`h` points to the request's handle).
        unsafe { *h = abi::MPI_REQUEST_NULL };
    }
    Ok(done)
}

/// [`complete_p2p`] for the current start `op` of persistent request `p` (a send, a receive, or
/// a plain operation: see `Requests::current_op`): once it completes, `p` stays, inactive. Its
/// status is reported on the persistent request's communicator, as the general path does.
#[inline(always)]
fn complete_persistent<R>(
    cx: &mut Inside,
    p: ReqId,
    op: ReqId,
    block: bool,
    f: impl FnOnce(&Status, Option<CommId>) -> R,
) -> Result<Option<R>> {
    let comm = cx
        .e()
        .p2p
        .pml
        .requests()
        .persistent_kind(p)
        .map(|k| k.comm());
    let done = if block {
        Some(cx.wait_with(op, |st| f(st, comm))?)
    } else {
        if !cx.e().p2p.pml.requests().done(op) {
            cx.e().progress();
        }
        cx.e()
            .p2p
            .pml
            .requests_mut()
            .test_with(op, |st| f(st, comm))?
    };
    if done.is_some() {
        cx.e().p2p.pml.requests_mut().deactivate(p);
    }
    Ok(done)
}

/// [`complete`] for what `Requests::take_finished_with` does not take: requests still in
/// flight, persistent, generalized and joined ones.
unsafe fn complete_general(
    cx: &mut Inside,
    h: *mut abi::MPI_Request,
    id: Option<ReqId>,
    block: bool,
) -> Result<Option<(Status, Option<CommId>)>> {
    let cur = match id {
        None => Current::Inactive,
        Some(id) => cx.e().p2p.pml.requests().current(id)?,
    };
    let Current::Op { op, comm, .. } = cur else {
        return Ok(Some((EMPTY_STATUS, None)));
    };
    let greq = cx.e().p2p.pml.requests().generalized_of(op);
    let st = if block {
        Some(cx.wait(op)?)
    } else {
        cx.e().test(op)?
    };
    if st.is_some() && cx.e().p2p.pml.requests_mut().retire(cur) {
        // SAFETY: as above.
        unsafe { *h = abi::MPI_REQUEST_NULL };
    }
    match (st, greq) {
        // A generalized request's status is what its query function says; then it is freed.
        (Some(_), Some((w, _))) => {
            let st = cx.outside(|| {
                // SAFETY: the words came from MPI_Grequest_start.
                let g = unsafe { Greq::of(w) };
                let st = g.query();
                let freed = g.free();
                st.and_then(|st| freed.map(|()| st))
            })?;
            Ok(Some((st, None)))
        }
        (st, _) => Ok(st.map(|s| (s, comm))),
    }
}

/// A generalized request's callbacks and their state, as `MPI_Grequest_start` got them.
#[derive(Clone, Copy)]
struct Greq {
    query: Option<abi::MPI_Grequest_query_function>,
    free: Option<abi::MPI_Grequest_free_function>,
    cancel: Option<abi::MPI_Grequest_cancel_function>,
    extra: *mut c_void,
}

// The request core keeps them as words: a function pointer fits one, and `None` is 0.
const _: () = assert!(
    core::mem::size_of::<Option<abi::MPI_Grequest_query_function>>()
        == core::mem::size_of::<usize>()
);

impl Greq {
    fn words(self) -> [usize; 4] {
        [
            self.query.map_or(0, |f| f as usize),
            self.free.map_or(0, |f| f as usize),
            self.cancel.map_or(0, |f| f as usize),
            self.extra as usize,
        ]
    }

    /// # Safety
    /// `w` came from [`Greq::words`].
    unsafe fn of(w: [usize; 4]) -> Greq {
        // SAFETY: each word is 0 (`None`) or a function pointer of the same type, made by
        // `words`; `Option<fn>` has the pointer's size with 0 for `None`.
        unsafe {
            Greq {
                query: core::mem::transmute::<usize, Option<abi::MPI_Grequest_query_function>>(
                    w[0],
                ),
                free: core::mem::transmute::<usize, Option<abi::MPI_Grequest_free_function>>(w[1]),
                cancel: core::mem::transmute::<usize, Option<abi::MPI_Grequest_cancel_function>>(
                    w[2],
                ),
                extra: w[3] as *mut c_void,
            }
        }
    }

    /// The status the query function writes (called with the engine let go).
    fn query(self) -> Result<Status> {
        let mut cs = abi::MPI_Status {
            MPI_SOURCE: abi::MPI_ANY_SOURCE,
            MPI_TAG: abi::MPI_ANY_TAG,
            MPI_ERROR: abi::MPI_SUCCESS,
            ..Default::default()
        };
        if let Some(q) = self.query {
            // SAFETY: the user's callback with the state it was given and a status to fill.
            user_code(
                unsafe { q(self.extra, &mut cs) },
                "the query function failed",
            )?;
        }
        let bytes = cs.count_bytes().max(0) as u64;
        Ok(Status {
            source: cs.MPI_SOURCE,
            tag: cs.MPI_TAG,
            bytes,
            message_bytes: bytes,
            error: user_code(cs.MPI_ERROR, "set in the status by the query function").err(),
            cancelled: cs.cancelled(),
        })
    }

    /// Calls the free function (with the engine let go).
    fn free(self) -> Result<()> {
        match self.free {
            // SAFETY: the user's callback with the state it was given.
            Some(f) => user_code(unsafe { f(self.extra) }, "the free function failed"),
            None => Ok(()),
        }
    }

    /// Calls the cancel function (with the engine let go).
    fn cancel(self, complete: bool) -> Result<()> {
        match self.cancel {
            // SAFETY: the user's callback with the state it was given.
            Some(f) => user_code(
                unsafe { f(self.extra, complete as c_int) },
                "the cancel function failed",
            ),
            None => Ok(()),
        }
    }
}

/// A code a user callback returned, as a result.
fn user_code(rc: c_int, what: &'static str) -> Result<()> {
    if rc == abi::MPI_SUCCESS {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::from_code(rc).unwrap_or(ErrorClass::Other),
        Reason::BadArgument { what },
    ))
}

/// Whether the request at `h` is in flight.
unsafe fn is_active(e: &Engine, h: *const abi::MPI_Request) -> Result<bool> {
    // SAFETY: MPI requires `h` to point into the caller's request array.
    let h = unsafe { *h };
    Ok(h == handles::REQUEST_SENT || matches!(current(e, h)?, Current::Op { .. }))
}

/// Writes the status of a completed request that carries no error, where the request holds it;
/// a failed one is copied out instead, to be reported once the engine is left (the error
/// handler may call MPI).
///
/// # Safety
/// `status` is ignored or points to an `MPI_Status`.
#[inline(always)]
unsafe fn put_unless_failed(
    status: *mut abi::MPI_Status,
    st: &Status,
    comm: Option<CommId>,
) -> Option<(Status, Option<CommId>)> {
    match st.error {
        None => {
            // SAFETY: the caller's contract.
            unsafe { put_status(status, st, abi::MPI_SUCCESS) };
            None
        }
        Some(_) => Some((*st, comm)),
    }
}

/// Writes the status of a completed request and says whether it carries an error.
unsafe fn put(func: &'static str, status: *mut abi::MPI_Status, st: &Status) -> bool {
    let rc = match st.error {
        None => abi::MPI_SUCCESS,
        Some(e) => record(func, e),
    };
    // SAFETY: forwarded from the caller's status argument.
    unsafe { put_status(status, st, rc) };
    rc != abi::MPI_SUCCESS
}

/// A multiple-completion call whose requests carried errors: `MPI_ERR_IN_STATUS`.
fn in_status(func: &'static str) -> c_int {
    report(
        func,
        None,
        Error::new(
            ErrorClass::InStatus,
            Reason::BadArgument {
                what: "a request failed; see the statuses",
            },
        ),
    )
}

fn relax(cx: &mut Inside) {
    cx.round();
}

fn array<'a>(p: *mut abi::MPI_Request, n: c_int) -> Result<&'a mut [abi::MPI_Request]> {
    if n < 0 {
        return Err(Error::new(
            ErrorClass::Count,
            Reason::NegativeCount { count: n as i64 },
        ));
    }
    if n > 0 && p.is_null() {
        return Err(Error::bad_arg("array of requests is NULL"));
    }
    if n == 0 {
        return Ok(&mut []);
    }
    // SAFETY: MPI requires the array to hold `n` requests.
    Ok(unsafe { core::slice::from_raw_parts_mut(p, n as usize) })
}

/// Starts the persistent request `h` names (`MPI_Start`).
///
/// # Safety
/// MPI's rule for persistent requests: the buffer given when the request was made stays lent
/// until it is freed.
unsafe fn start_one(e: &mut Engine, h: abi::MPI_Request) -> Result<()> {
    let id = handles::request(e, h)?.ok_or(Error::new(
        ErrorClass::Request,
        Reason::BadArgument {
            what: "MPI_Start needs a persistent request",
        },
    ))?;
    let op = match e.p2p.pml.requests().to_start(id)? {
        // SAFETY: the caller's contract.
        PersistentKind::P2p(p) => unsafe { start_p2p(e, &p)? },
        // SAFETY: the caller's contract (the collective's buffers and arrays, lent until the
        // request is freed).
        PersistentKind::Coll(c) => unsafe { e.colls().start_persistent(&c)? },
        PersistentKind::Part(p) => e.part.start(&mut e.p2p, p.chan)?,
    };
    e.p2p.pml.requests_mut().started(id, op)
}

/// Begins one start of a persistent send or receive: the request of its operation.
///
/// # Safety
/// `p.buf` holds `p.count` instances of `p.datatype` (for a receive: room for them), lent until
/// the operation completes.
unsafe fn start_p2p(e: &mut Engine, p: &P2pInit) -> Result<ReqId> {
    // A predefined dense type: the user's elements as they stand, no convertor built per start
    // (as `MPI_Isend`/`MPI_Irecv` take them).
    if let Some(n) = p.dense {
        // SAFETY: the caller's contract; the type is predefined and dense, `n` of its elements
        // fit the address space.
        let data = unsafe { Elements::new(p.buf.cast_const(), n, p.datatype) };
        match p.start {
            P2pStart::Send(mode) => return e.isend(data, p.peer, p.tag, p.comm, mode, 0),
            P2pStart::Recv => return e.irecv(data, p.peer, p.tag, p.comm, 0),
            P2pStart::Bsend => {}
        }
    }
    match p.start {
        P2pStart::Send(mode) => {
            // SAFETY: the caller's contract; the type is retained, so its entry is there.
            let conv = unsafe { Packer::new(p.buf, p.count, p.datatype, e.types())? };
            e.isend(conv, p.peer, p.tag, p.comm, mode, 0)
        }
        P2pStart::Bsend => {
            // SAFETY: as above.
            unsafe {
                super::p2p::bsend_typed(e, p.buf, p.count, p.datatype, p.peer, p.tag, p.comm)?
            };
            // The message is copied out: this start is complete at once.
            e.completed_request(EMPTY_STATUS)
        }
        P2pStart::Recv => {
            // SAFETY: as above.
            let conv = unsafe { Unpacker::new(p.buf, p.count, p.datatype, e.types())? };
            e.irecv(conv, p.peer, p.tag, p.comm, 0)
        }
    }
}

/// Lets go of request `id` (`MPI_Request_free`), and of the datatype a persistent one retained.
fn free(e: &mut Engine, id: ReqId) -> Result<()> {
    let requests = e.p2p.pml.requests_mut();
    let kind = requests.persistent_kind(id);
    requests.release(id)?;
    match kind {
        Some(PersistentKind::P2p(p)) => e.types_mut().release(p.datatype),
        Some(PersistentKind::Coll(c)) => e.colls().unpersist(&c),
        Some(PersistentKind::Part(p)) => e.part.free(&mut e.p2p, p.chan)?,
        None => {}
    }
    Ok(())
}

unsafe fn init(
    func: &'static str,
    start: P2pStart,
    buf: *const c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    peer: c_int,
    tag: c_int,
    comm: abi::MPI_Comm,
    request: *mut abi::MPI_Request,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        if request.is_null() {
            return Err(Error::bad_arg("request is NULL"));
        }
        e.comm(c)?;
        let (datatype, count) = handles::typed(e.types(), buf, count, dt)?;
        let b = datatype.dense_bytes();
        let dense = usize::try_from(count)
            .ok()
            .filter(|&n| b > 0 && n.checked_mul(b).is_some());
        let id = e
            .p2p
            .pml
            .requests_mut()
            .persistent(PersistentKind::P2p(P2pInit {
                start,
                buf: buf as *mut u8,
                count,
                datatype,
                peer,
                tag,
                comm: c,
                dense,
            }))?;
        // The type stays usable by every start, even if the user frees it meanwhile.
        e.types_mut().retain(datatype);
        // SAFETY: checked non-null above.
        unsafe { out(request, handles::request_handle(id)) }
    }))
}

super::mpi! {
    fn MPI_Wait / PMPI_Wait(request: *mut abi::MPI_Request, status: *mut abi::MPI_Status) {
        // SAFETY: MPI's rule for the status argument.
        let finish = |st: &Status, comm| unsafe { put_unless_failed(status, st, comm) };
        match run_inside("MPI_Wait", None, |cx| complete_with(cx, request, true, finish)) {
            Ok(Some(None)) => abi::MPI_SUCCESS,
            Ok(Some(Some((st, comm)))) => {
                let rc = handles::status_code("MPI_Wait", comm, &st);
                put_status(status, &st, rc);
                rc
            }
            Ok(None) => report(
                "MPI_Wait",
                None,
                Error::new(
                    ErrorClass::Intern,
                    Reason::BadArgument {
                        what: "a blocking wait returned before its request completed",
                    },
                ),
            ),
            Err(rc) => rc,
        }
    }

    fn MPI_Test / PMPI_Test(request: *mut abi::MPI_Request, flag: *mut c_int, status: *mut abi::MPI_Status) {
        // SAFETY: MPI's rule for the status argument.
        let finish = |st: &Status, comm| unsafe { put_unless_failed(status, st, comm) };
        match run_inside("MPI_Test", None, |cx| {
            let r = complete_with(cx, request, false, finish)?;
            out(flag, r.is_some() as c_int)?;
            if r.is_none() {
                cx.polled_idle();
            }
            Ok(r.flatten())
        }) {
            Ok(Some((st, comm))) => {
                let rc = handles::status_code("MPI_Test", comm, &st);
                put_status(status, &st, rc);
                rc
            }
            Ok(None) => abi::MPI_SUCCESS,
            Err(rc) => rc,
        }
    }

    fn MPI_Waitall / PMPI_Waitall(count: c_int, requests: *mut abi::MPI_Request, statuses: *mut abi::MPI_Status) {
        match run_inside("MPI_Waitall", None, |cx| {
            let reqs = array(requests, count)?;
            let mut failed = false;
            for (i, h) in reqs.iter_mut().enumerate() {
                let at = status_at(statuses, i);
                // SAFETY: `at` is the caller's status for this request, or ignored.
                let put_here = |st: &Status, _| unsafe { put("MPI_Waitall", at, st) };
                failed |= complete_with(cx, h, true, put_here)?.unwrap_or(false);
            }
            Ok(failed)
        }) {
            Ok(false) => abi::MPI_SUCCESS,
            Ok(true) => in_status("MPI_Waitall"),
            Err(rc) => rc,
        }
    }

    fn MPI_Testall / PMPI_Testall(count: c_int, requests: *mut abi::MPI_Request, flag: *mut c_int, statuses: *mut abi::MPI_Status) {
        match run_inside("MPI_Testall", None, |cx| {
            let reqs = array(requests, count)?;
            let e = cx.e();
            e.progress();
            // Either all complete (and are completed now) or none is touched.
            for h in reqs.iter() {
                if let Current::Op { op, .. } = current(e, *h)? {
                    if !e.is_complete(op)? {
                        out(flag, 0)?;
                        cx.polled_idle();
                        return Ok(false);
                    }
                }
            }
            out(flag, 1)?;
            let mut failed = false;
            for (i, h) in reqs.iter_mut().enumerate() {
                let Some((st, _)) = complete(cx, h, true)? else { continue };
                failed |= put("MPI_Testall", status_at(statuses, i), &st);
            }
            Ok(failed)
        }) {
            Ok(false) => abi::MPI_SUCCESS,
            Ok(true) => in_status("MPI_Testall"),
            Err(rc) => rc,
        }
    }

    fn MPI_Waitany / PMPI_Waitany(count: c_int, requests: *mut abi::MPI_Request, index: *mut c_int, status: *mut abi::MPI_Status) {
        any("MPI_Waitany", count, requests, index, core::ptr::null_mut(), status, true)
    }

    fn MPI_Testany / PMPI_Testany(count: c_int, requests: *mut abi::MPI_Request, index: *mut c_int, flag: *mut c_int, status: *mut abi::MPI_Status) {
        any("MPI_Testany", count, requests, index, flag, status, false)
    }

    fn MPI_Waitsome / PMPI_Waitsome(incount: c_int, requests: *mut abi::MPI_Request, outcount: *mut c_int, indices: *mut c_int, statuses: *mut abi::MPI_Status) {
        some("MPI_Waitsome", incount, requests, outcount, indices, statuses, true)
    }

    fn MPI_Testsome / PMPI_Testsome(incount: c_int, requests: *mut abi::MPI_Request, outcount: *mut c_int, indices: *mut c_int, statuses: *mut abi::MPI_Status) {
        some("MPI_Testsome", incount, requests, outcount, indices, statuses, false)
    }

    fn MPI_Request_free / PMPI_Request_free(request: *mut abi::MPI_Request) {
        code(run_inside("MPI_Request_free", None, |cx| {
            if request.is_null() {
                return Err(Error::bad_arg("request is NULL"));
            }
            let mut greq = None;
            if *request != handles::REQUEST_SENT {
                let e = cx.e();
                match handles::request(e, *request)? {
                    None => return Err(Error::new(ErrorClass::Request, Reason::BadArgument { what: "MPI_REQUEST_NULL cannot be freed" })),
                    Some(id) => {
                        // A complete generalized request is freed now, its free function
                        // with it; an incomplete one when MPI_Grequest_complete is called.
                        let requests = e.p2p.pml.requests();
                        if let Some((w, _)) = requests.generalized_of(id) {
                            greq = requests.is_complete(id)?.then_some(w);
                        }
                        free(e, id)?
                    }
                }
            }
            *request = abi::MPI_REQUEST_NULL;
            match greq {
                // SAFETY (`Greq::of`, here and below): the words are a generalized request's,
                // made by MPI_Grequest_start.
                Some(w) => cx.outside(|| Greq::of(w).free()),
                None => Ok(()),
            }
        }))
    }

    fn MPI_Cancel / PMPI_Cancel(request: *mut abi::MPI_Request) {
        code(run_inside("MPI_Cancel", None, |cx| {
            if request.is_null() {
                return Err(Error::bad_arg("request is NULL"));
            }
            if *request == handles::REQUEST_SENT {
                // Complete already: too late to cancel, which is no error.
                return Ok(());
            }
            let e = cx.e();
            match current(e, *request)? {
                Current::Op { op, .. } => match e.p2p.pml.requests().generalized_of(op) {
                    // The user's operation: its cancel function is told whether it completed.
                    Some((w, _)) => {
                        let complete = e.is_complete(op)?;
                        // SAFETY: as in MPI_Request_free.
                        cx.outside(|| Greq::of(w).cancel(complete))
                    }
                    None => e.cancel(op),
                },
                Current::Inactive => Err(Error::new(ErrorClass::Request, Reason::BadArgument { what: "cannot cancel a null or inactive request" })),
            }
        }))
    }

    fn MPI_Grequest_start / PMPI_Grequest_start(query_fn: Option<abi::MPI_Grequest_query_function>, free_fn: Option<abi::MPI_Grequest_free_function>, cancel_fn: Option<abi::MPI_Grequest_cancel_function>, extra_state: *mut c_void, request: *mut abi::MPI_Request) {
        code(run("MPI_Grequest_start", None, |e| {
            if request.is_null() {
                return Err(Error::bad_arg("request is NULL"));
            }
            let g = Greq { query: query_fn, free: free_fn, cancel: cancel_fn, extra: extra_state };
            let id = e.p2p.pml.requests_mut().generalized(g.words())?;
            out(request, handles::request_handle(id))
        }))
    }

    fn MPI_Grequest_complete / PMPI_Grequest_complete(request: abi::MPI_Request) {
        code(run_inside("MPI_Grequest_complete", None, |cx| {
            let e = cx.e();
            let not_greq = Error::new(ErrorClass::Request, Reason::BadArgument { what: "not a generalized request" });
            let id = handles::request(e, request)?.ok_or(not_greq)?;
            let requests = e.p2p.pml.requests_mut();
            let (w, detached) = requests.generalized_of(id).ok_or(not_greq)?;
            if requests.is_complete(id)? {
                return Err(Error::new(ErrorClass::Request, Reason::BadArgument { what: "the generalized request is complete already" }));
            }
            // Freed already by MPI_Request_free: it goes now (`finish` drops a detached
            // request), and its free function is called here.
            requests.finish(id, EMPTY_STATUS);
            match detached {
                // SAFETY: as in MPI_Request_free.
                true => cx.outside(|| Greq::of(w).free()),
                false => Ok(()),
            }
        }))
    }

    fn MPI_Request_get_status / PMPI_Request_get_status(request: abi::MPI_Request, flag: *mut c_int, status: *mut abi::MPI_Status) {
        // MPI_Test that leaves the request as it is: not freed, the handle not reset (mpi4py's
        // tests call it on an MPI_Issend they cancel).
        match run_inside("MPI_Request_get_status", None, |cx| {
            if flag.is_null() {
                return Err(Error::bad_arg("flag is NULL"));
            }
            let e = cx.e();
            let op = match current(e, request)? {
                Current::Op { op, .. } => op,
                Current::Inactive => return Ok(Some(EMPTY_STATUS)),
            };
            e.progress();
            let requests = e.p2p.pml.requests();
            let greq = requests.generalized_of(op);
            match (requests.peek(op)?, greq) {
                (None, _) => Ok(None),
                // The request stays: only the query function is called.
                // SAFETY: as in MPI_Request_free.
                (Some(_), Some((w, _))) => cx.outside(|| Greq::of(w).query()).map(Some),
                (Some(st), None) => Ok(Some(st)),
            }
        }) {
            Ok(None) => {
                *flag = 0;
                abi::MPI_SUCCESS
            }
            Ok(Some(st)) => {
                *flag = 1;
                let rc = handles::status_code("MPI_Request_get_status", None, &st);
                put_status(status, &st, rc);
                rc
            }
            Err(rc) => rc,
        }
    }

    fn MPI_Status_set_cancelled / PMPI_Status_set_cancelled(status: *mut abi::MPI_Status, flag: c_int) {
        if status.is_null() || core::ptr::eq(status, abi::MPI_STATUS_IGNORE) {
            return report("MPI_Status_set_cancelled", None, Error::bad_arg("status is NULL or MPI_STATUS_IGNORE"));
        }
        (*status).set_cancelled(flag != 0);
        abi::MPI_SUCCESS
    }

    fn MPI_Status_set_elements / PMPI_Status_set_elements(status: *mut abi::MPI_Status, datatype: abi::MPI_Datatype, count: c_int) {
        super::datatype::set_elements("MPI_Status_set_elements", status, datatype, count as abi::MPI_Count)
    }

    fn MPI_Status_set_elements_x / PMPI_Status_set_elements_x(status: *mut abi::MPI_Status, datatype: abi::MPI_Datatype, count: abi::MPI_Count) {
        super::datatype::set_elements("MPI_Status_set_elements_x", status, datatype, count)
    }

    fn MPI_Test_cancelled / PMPI_Test_cancelled(status: *const abi::MPI_Status, flag: *mut c_int) {
        if status.is_null() || core::ptr::eq(status, abi::MPI_STATUS_IGNORE) {
            return report("MPI_Test_cancelled", None, Error::bad_arg("status is NULL or MPI_STATUS_IGNORE"));
        }
        code(out(flag, (*status).cancelled() as c_int).map_err(|e| report("MPI_Test_cancelled", None, e)))
    }

    fn MPI_Start / PMPI_Start(request: *mut abi::MPI_Request) {
        code(run("MPI_Start", None, |e| {
            if request.is_null() {
                return Err(Error::bad_arg("request is NULL"));
            }
            start_one(e, *request)
        }))
    }

    fn MPI_Startall / PMPI_Startall(count: c_int, requests: *mut abi::MPI_Request) {
        code(run("MPI_Startall", None, |e| array(requests, count)?.iter().try_for_each(|h| start_one(e, *h))))
    }

    fn MPI_Send_init / PMPI_Send_init(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Send_init", P2pStart::Send(SendMode::Standard), buf, count.into(), datatype, dest, tag, comm, request)
    }

    fn MPI_Send_init_c / PMPI_Send_init_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Send_init_c", P2pStart::Send(SendMode::Standard), buf, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Ssend_init / PMPI_Ssend_init(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Ssend_init", P2pStart::Send(SendMode::Synchronous), buf, count.into(), datatype, dest, tag, comm, request)
    }

    fn MPI_Ssend_init_c / PMPI_Ssend_init_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Ssend_init_c", P2pStart::Send(SendMode::Synchronous), buf, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Rsend_init / PMPI_Rsend_init(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Rsend_init", P2pStart::Send(SendMode::Ready), buf, count.into(), datatype, dest, tag, comm, request)
    }

    fn MPI_Rsend_init_c / PMPI_Rsend_init_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Rsend_init_c", P2pStart::Send(SendMode::Ready), buf, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Bsend_init / PMPI_Bsend_init(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Bsend_init", P2pStart::Bsend, buf, count.into(), datatype, dest, tag, comm, request)
    }

    fn MPI_Bsend_init_c / PMPI_Bsend_init_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Bsend_init_c", P2pStart::Bsend, buf, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, source: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Recv_init", P2pStart::Recv, buf, count.into(), datatype, source, tag, comm, request)
    }

    fn MPI_Recv_init_c / PMPI_Recv_init_c(buf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, source: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Recv_init_c", P2pStart::Recv, buf, count, datatype, source, tag, comm, request)
    }

    fn MPI_Psend_init / PMPI_Psend_init(buf: *const c_void, partitions: c_int, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        part_init("MPI_Psend_init", true, buf as *mut c_void, partitions, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Precv_init / PMPI_Precv_init(buf: *mut c_void, partitions: c_int, count: abi::MPI_Count, datatype: abi::MPI_Datatype, source: c_int, tag: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        part_init("MPI_Precv_init", false, buf, partitions, count, datatype, source, tag, comm, request)
    }

    fn MPI_Pready / PMPI_Pready(partition: c_int, request: abi::MPI_Request) {
        code(run("MPI_Pready", None, |e| {
            let chan = part_of(e, request)?;
            e.part.ready(&mut e.p2p, chan, partition.into())
        }))
    }

    fn MPI_Pready_range / PMPI_Pready_range(partition_low: c_int, partition_high: c_int, request: abi::MPI_Request) {
        code(run("MPI_Pready_range", None, |e| {
            let chan = part_of(e, request)?;
            if partition_low > partition_high {
                return Err(Error::bad_arg("partition_low is above partition_high"));
            }
            for i in partition_low..=partition_high {
                e.part.ready(&mut e.p2p, chan, i.into())?;
            }
            Ok(())
        }))
    }

    fn MPI_Pready_list / PMPI_Pready_list(length: c_int, array_of_partitions: *const c_int, request: abi::MPI_Request) {
        code(run("MPI_Pready_list", None, |e| {
            let chan = part_of(e, request)?;
            if length < 0 {
                return Err(Error::new(ErrorClass::Count, Reason::NegativeCount { count: length.into() }));
            }
            if length > 0 && array_of_partitions.is_null() {
                return Err(Error::bad_arg("array_of_partitions is NULL"));
            }
            for k in 0..length as usize {
                // SAFETY: MPI requires the array to hold `length` ints; checked non-null.
                let i = unsafe { *array_of_partitions.add(k) };
                e.part.ready(&mut e.p2p, chan, i.into())?;
            }
            Ok(())
        }))
    }

    fn MPI_Parrived / PMPI_Parrived(request: abi::MPI_Request, partition: c_int, flag: *mut c_int) {
        code(run("MPI_Parrived", None, |e| {
            let chan = part_of(e, request)?;
            let mut yes = e.part.arrived(&mut e.p2p, chan, partition.into())?;
            if !yes {
                // A polling call: drive progress once, as MPI_Test does.
                e.progress();
                yes = e.part.arrived(&mut e.p2p, chan, partition.into())?;
                if !yes {
                    e.polled_idle();
                }
            }
            // SAFETY: MPI requires `flag` to point to an int.
            unsafe { out(flag, yes as c_int) }
        }))
    }

}

/// The channel of partitioned request handle `h`.
fn part_of(e: &Engine, h: abi::MPI_Request) -> Result<crate::pool::Key> {
    match handles::request(e, h)?.and_then(|id| e.p2p.pml.requests().persistent_kind(id)) {
        Some(PersistentKind::Part(p)) => Ok(p.chan),
        _ => Err(Error::new(
            ErrorClass::Request,
            Reason::BadArgument {
                what: "not a partitioned request",
            },
        )),
    }
}

/// `MPI_Psend_init` and `MPI_Precv_init`.
#[allow(clippy::too_many_arguments)]
unsafe fn part_init(
    func: &'static str,
    send: bool,
    buf: *mut c_void,
    partitions: c_int,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    peer: c_int,
    tag: c_int,
    comm: abi::MPI_Comm,
    request: *mut abi::MPI_Request,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        if request.is_null() {
            return Err(Error::bad_arg("request is NULL"));
        }
        if partitions < 1 {
            return Err(Error::bad_arg("partitions must be at least 1"));
        }
        let total = (partitions as abi::MPI_Count).saturating_mul(count.max(0));
        handles::typed(e.types(), buf, total, dt)?;
        let (datatype, count) = handles::typed(e.types(), buf, count, dt)?;
        let chan = e.part.init(
            &mut e.p2p,
            crate::part::PartArgs {
                send,
                buf: buf.cast(),
                partitions: partitions as u32,
                count,
                datatype,
                peer,
                tag,
                comm: c,
            },
        )?;
        let kind = PersistentKind::Part(crate::pml::request::PartInit { comm: c, chan });
        let id = match e.p2p.pml.requests_mut().persistent(kind) {
            Ok(id) => id,
            Err(err) => {
                let _ = e.part.free(&mut e.p2p, chan);
                return Err(err);
            }
        };
        // SAFETY: checked non-null above.
        unsafe { out(request, handles::request_handle(id)) }
    }))
}

unsafe fn any(
    func: &'static str,
    count: c_int,
    requests: *mut abi::MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut abi::MPI_Status,
    block: bool,
) -> c_int {
    let r = run_inside(func, None, |cx| {
        let reqs = array(requests, count)?;
        loop {
            let mut active = false;
            for (i, h) in reqs.iter_mut().enumerate() {
                if !is_active(cx.e(), h)? {
                    continue;
                }
                active = true;
                if let Some((st, comm)) = complete(cx, h, false)? {
                    out(index, i as c_int)?;
                    if !flag.is_null() {
                        *flag = 1;
                    }
                    return Ok(Some((st, comm)));
                }
            }
            if !active {
                out(index, abi::MPI_UNDEFINED)?;
                if !flag.is_null() {
                    *flag = 1;
                }
                return Ok(Some((EMPTY_STATUS, None)));
            }
            if !block {
                out(flag, 0)?;
                out(index, abi::MPI_UNDEFINED)?;
                cx.polled_idle();
                return Ok(None);
            }
            relax(cx);
        }
    });
    match r {
        Ok(Some((st, comm))) => {
            let rc = handles::status_code(func, comm, &st);
            put_status(status, &st, rc);
            rc
        }
        Ok(None) => abi::MPI_SUCCESS,
        Err(rc) => rc,
    }
}

unsafe fn some(
    func: &'static str,
    incount: c_int,
    requests: *mut abi::MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut abi::MPI_Status,
    block: bool,
) -> c_int {
    let r = run_inside(func, None, |cx| {
        let reqs = array(requests, incount)?;
        loop {
            let (mut active, mut done, mut failed) = (false, 0usize, false);
            for (i, h) in reqs.iter_mut().enumerate() {
                if !is_active(cx.e(), h)? {
                    continue;
                }
                active = true;
                if let Some((st, _)) = complete(cx, h, false)? {
                    if indices.is_null() {
                        return Err(Error::bad_arg("indices is NULL"));
                    }
                    *indices.add(done) = i as c_int;
                    failed |= put(func, status_at(statuses, done), &st);
                    done += 1;
                }
            }
            if !active {
                out(outcount, abi::MPI_UNDEFINED)?;
                return Ok(false);
            }
            if done > 0 || !block {
                out(outcount, done as c_int)?;
                if done == 0 {
                    cx.polled_idle();
                }
                return Ok(failed);
            }
            relax(cx);
        }
    });
    match r {
        Ok(false) => abi::MPI_SUCCESS,
        Ok(true) => in_status(func),
        Err(rc) => rc,
    }
}
