//! Completing requests (wait and test in every form), cancelling them, and persistent requests.

use core::ffi::{c_int, c_void};

use super::abi;
use super::env::{code, run, run_comm, run_inside};
use super::errors::{record, report};
use super::handles::{self, out, put_status, status_at, Req, EMPTY_STATUS};
use super::state::{Persistent, PersistentOp, MAX_PERSISTENT, STATE};
use crate::comm::CommId;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::pml::request::{ReqId, SendMode, Status};
use crate::shared::Inside;

/// A request handle, looked up.
#[derive(Clone, Copy)]
enum Slot {
    /// `MPI_REQUEST_NULL` or an inactive persistent request: completes at once, empty status.
    Inactive,
    /// An operation in flight; `persistent` is its table slot, if it is one.
    Active {
        id: ReqId,
        comm: Option<CommId>,
        persistent: Option<usize>,
    },
}

fn bad_request() -> Error {
    Error::new(ErrorClass::Request, Reason::InvalidRequest)
}

fn slot(e: &Engine, h: abi::MPI_Request) -> Result<Slot> {
    Ok(match handles::request(e, h)? {
        Req::Null => Slot::Inactive,
        Req::Plain(id) => Slot::Active {
            id,
            comm: e.request_comm(id),
            persistent: None,
        },
        Req::Persistent(i) => {
            let st = STATE.lock();
            let p = st
                .persistent
                .get(i)
                .and_then(|p| p.as_ref())
                .ok_or(bad_request())?;
            match p.active {
                None => Slot::Inactive,
                Some(id) => Slot::Active {
                    id,
                    comm: Some(p.comm),
                    persistent: Some(i),
                },
            }
        }
    })
}

/// Marks a completed request done: ordinary handles become `MPI_REQUEST_NULL`, persistent ones
/// inactive.
unsafe fn retire(h: *mut abi::MPI_Request, persistent: Option<usize>) {
    match persistent {
        Some(i) => {
            if let Some(p) = STATE.lock().persistent[i].as_mut() {
                p.active = None;
            }
        }
        // SAFETY: the caller passes the user's request slot, which MPI requires to be valid.
        None => unsafe { *h = abi::MPI_REQUEST_NULL },
    }
}

/// Completes the request at `h` if done (`block`: wait until it is).
unsafe fn complete(
    cx: &mut Inside,
    h: *mut abi::MPI_Request,
    block: bool,
) -> Result<Option<(Status, Option<CommId>)>> {
    if h.is_null() {
        return Err(Error::bad_arg("request is NULL"));
    }
    // SAFETY: checked non-null; MPI requires it to point to an MPI_Request.
    match slot(cx.e(), unsafe { *h })? {
        Slot::Inactive => Ok(Some((EMPTY_STATUS, None))),
        Slot::Active {
            id,
            comm,
            persistent,
        } => {
            let st = if block {
                Some(cx.wait(id)?)
            } else {
                cx.e().test(id)?
            };
            if st.is_some() {
                // SAFETY: as above.
                unsafe { retire(h, persistent) };
            }
            Ok(st.map(|s| (s, comm)))
        }
    }
}

/// Whether the request at `h` is in flight.
unsafe fn is_active(e: &Engine, h: *const abi::MPI_Request) -> Result<bool> {
    // SAFETY: MPI requires `h` to point into the caller's request array.
    Ok(matches!(slot(e, unsafe { *h })?, Slot::Active { .. }))
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

unsafe fn start_one(e: &mut Engine, h: abi::MPI_Request) -> Result<()> {
    let Req::Persistent(i) = handles::request(e, h)? else {
        return Err(Error::new(
            ErrorClass::Request,
            Reason::BadArgument {
                what: "MPI_Start needs a persistent request",
            },
        ));
    };
    let p = STATE
        .lock()
        .persistent
        .get(i)
        .copied()
        .flatten()
        .ok_or(bad_request())?;
    if p.active.is_some() {
        return Err(Error::new(
            ErrorClass::Request,
            Reason::BadArgument {
                what: "persistent request is already active",
            },
        ));
    }
    let id = match p.op {
        PersistentOp::Send(mode) => {
            // SAFETY: MPI lends the buffer of a persistent request until it is freed.
            let conv = unsafe { handles::packer(e.types(), p.buf.cast(), p.count, p.datatype)? };
            e.isend(conv, p.peer, p.tag, p.comm, mode, 0)?
        }
        PersistentOp::Bsend => {
            // SAFETY: as above.
            unsafe {
                super::p2p::bsend(e, p.buf.cast(), p.count, p.datatype, p.peer, p.tag, p.comm)?
            };
            e.completed_request(EMPTY_STATUS)?
        }
        PersistentOp::Recv => {
            // SAFETY: as above.
            let conv = unsafe { handles::unpacker(e.types(), p.buf.cast(), p.count, p.datatype)? };
            e.irecv(conv, p.peer, p.tag, p.comm, 0)?
        }
    };
    if let Some(slot) = STATE.lock().persistent[i].as_mut() {
        slot.active = Some(id);
    }
    Ok(())
}

unsafe fn init(
    func: &'static str,
    op: PersistentOp,
    buf: *const c_void,
    count: c_int,
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
        let (d, _) = handles::typed(e.types(), buf, count, dt)?;
        let mut st = STATE.lock();
        let i = st
            .persistent
            .iter()
            .position(Option::is_none)
            .ok_or(Error::exhausted(
                "persistent requests",
                MAX_PERSISTENT as u32,
                "(compile-time MAX_PERSISTENT)",
            ))?;
        st.persistent[i] = Some(Persistent {
            op,
            buf: buf as *mut u8,
            count,
            datatype: dt,
            peer,
            tag,
            comm: c,
            active: None,
        });
        // The type stays usable by every start, even if the user frees it meanwhile.
        e.types_mut().retain(d);
        // SAFETY: checked non-null above.
        unsafe { out(request, handles::persistent_handle(i)) }
    }))
}

super::mpi! {
    fn MPI_Wait / PMPI_Wait(request: *mut abi::MPI_Request, status: *mut abi::MPI_Status) {
        match run_inside("MPI_Wait", None, |cx| complete(cx, request, true)) {
            Ok(Some((st, comm))) => {
                let rc = handles::status_code("MPI_Wait", comm, &st);
                put_status(status, &st, rc);
                rc
            }
            Ok(None) => unreachable!("a blocking wait completes"),
            Err(rc) => rc,
        }
    }

    fn MPI_Test / PMPI_Test(request: *mut abi::MPI_Request, flag: *mut c_int, status: *mut abi::MPI_Status) {
        match run_inside("MPI_Test", None, |cx| {
            let r = complete(cx, request, false)?;
            out(flag, r.is_some() as c_int)?;
            Ok(r)
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
                let Some((st, _)) = complete(cx, h, true)? else { continue };
                failed |= put("MPI_Waitall", status_at(statuses, i), &st);
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
                if let Slot::Active { id, .. } = slot(e, *h)? {
                    if !e.is_complete(id)? {
                        out(flag, 0)?;
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
        code(run("MPI_Request_free", None, |e| {
            if request.is_null() {
                return Err(Error::bad_arg("request is NULL"));
            }
            match handles::request(e, *request)? {
                Req::Null => return Err(Error::new(ErrorClass::Request, Reason::BadArgument { what: "MPI_REQUEST_NULL cannot be freed" })),
                Req::Plain(id) => e.request_free(id)?,
                Req::Persistent(i) => {
                    let p = STATE.lock().persistent.get_mut(i).and_then(Option::take).ok_or(bad_request())?;
                    if let Some(id) = p.active {
                        e.request_free(id)?;
                    }
                    if let Ok(d) = handles::datatype(p.datatype) {
                        e.types_mut().release(d);
                    }
                }
            }
            *request = abi::MPI_REQUEST_NULL;
            Ok(())
        }))
    }

    fn MPI_Cancel / PMPI_Cancel(request: *mut abi::MPI_Request) {
        code(run("MPI_Cancel", None, |e| {
            if request.is_null() {
                return Err(Error::bad_arg("request is NULL"));
            }
            match slot(e, *request)? {
                Slot::Active { id, .. } => e.cancel(id),
                Slot::Inactive => Err(Error::new(ErrorClass::Request, Reason::BadArgument { what: "cannot cancel a null or inactive request" })),
            }
        }))
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
        init("MPI_Send_init", PersistentOp::Send(SendMode::Standard), buf, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Ssend_init / PMPI_Ssend_init(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Ssend_init", PersistentOp::Send(SendMode::Synchronous), buf, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Rsend_init / PMPI_Rsend_init(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Rsend_init", PersistentOp::Send(SendMode::Ready), buf, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Bsend_init / PMPI_Bsend_init(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Bsend_init", PersistentOp::Bsend, buf, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Recv_init / PMPI_Recv_init(buf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, source: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        init("MPI_Recv_init", PersistentOp::Recv, buf, count, datatype, source, tag, comm, request)
    }
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
