//! Point-to-point communication, probes, counts and the buffered-send buffer.

use core::ffi::{c_int, c_void};

use super::abi;
use super::env::{code, run, run_comm, run_comm_inside, run_inside};
use super::handles::{self, out, put_status, status_code};
use super::state;
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::p2p::{Elements, Posted, RecvData};
use crate::pml::bsend;
use crate::pml::request::{ReqId, SendMode, Status};
use crate::shared::Inside;

// The engine's buffered sends take exactly what programs reserve for them.
const _: () = assert!(abi::MPI_BSEND_OVERHEAD as usize == bsend::OVERHEAD);

/// A packer over a user's send buffer. A predefined contiguous type (the common small-message
/// case) needs no look at the type table: the layout is `count` elements from `buf`.
///
/// # Safety
/// As for [`handles::packer`].
#[inline]
unsafe fn packer(
    e: &Engine,
    buf: *const c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
) -> Result<Packer> {
    match contiguous(buf, count, dt) {
        // SAFETY: the caller's contract; `n` elements of `d` are `count * d.size()` bytes.
        Some((d, n)) => Ok(unsafe { Packer::elements(buf.cast(), n, d) }),
        // SAFETY: the caller's contract.
        None => unsafe { handles::packer(e.types(), buf, count, dt) },
    }
}

/// An unpacker over a user's receive buffer, without the type table for a predefined
/// contiguous type (see [`packer`]).
///
/// # Safety
/// As for [`handles::unpacker`].
#[inline]
unsafe fn unpacker(
    e: &Engine,
    buf: *mut c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
) -> Result<Unpacker> {
    match contiguous(buf, count, dt) {
        // SAFETY: as in `packer`.
        Some((d, n)) => Ok(unsafe { Unpacker::elements(buf.cast(), n, d) }),
        // SAFETY: the caller's contract.
        None => unsafe { handles::unpacker(e.types(), buf, count, dt) },
    }
}

/// `(type, count)` when `dt` is a valid predefined contiguous type and the call's buffer and
/// count are valid for it; `None` sends every other case (errors included) to the general
/// constructors, which check in the standard's order and report.
#[inline]
fn contiguous(
    buf: *const c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
) -> Option<(crate::datatype::Datatype, usize)> {
    let (d, size) = handles::dense_type(dt)?;
    if buf.is_null() && count > 0 {
        return None;
    }
    // Elements of a predefined type are never empty, so a NULL buffer with a count is the
    // general path's MPI_ERR_BUFFER; the size must fit the address space (32-bit targets).
    let n = usize::try_from(count).ok()?;
    n.checked_mul(size)?;
    Some((d, n))
}

/// Starts a send of the user's buffer (checked in the standard's order: the buffer and type,
/// then the destination and tag): `None` if it went at once or to `MPI_PROC_NULL`, else its
/// request.
///
/// # Safety
/// MPI's rule for send buffers: `buf` holds `count` instances of `dt`, unchanged until the
/// operation completes.
#[inline(always)]
unsafe fn start_send(
    e: &mut Engine,
    buf: *const c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    dest: c_int,
    tag: c_int,
    c: CommId,
    mode: SendMode,
) -> Result<Option<Option<ReqId>>> {
    match contiguous(buf, count, dt) {
        Some((d, n)) => {
            let Some(to) = e.p2p.check_send(c, dest, tag)? else {
                return Ok(None);
            };
            // SAFETY: the caller's contract; `contiguous` checked the type and the size.
            let data = unsafe { Elements::new(buf.cast(), n, d) };
            e.p2p.send(&to, tag, data, mode, 0).map(Some)
        }
        None => {
            // SAFETY: the caller's contract.
            let conv = unsafe { handles::packer(e.types(), buf, count, dt)? };
            let Some(to) = e.p2p.check_send(c, dest, tag)? else {
                return Ok(None);
            };
            e.p2p.send(&to, tag, conv, mode, 0).map(Some)
        }
    }
}

unsafe fn send(
    func: &'static str,
    buf: *const c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::MPI_Comm,
    mode: SendMode,
) -> c_int {
    // The contiguous case apart from the general one: together in one body, the general
    // case's live values made the common one spill.
    match contiguous(buf, count, dt) {
        Some((d, n)) => code(run_comm_inside(func, comm, |cx, c| {
            let Some(to) = cx.e().p2p.check_send(c, dest, tag)? else {
                return Ok(());
            };
            // SAFETY: MPI lends the send buffer for the call, which waits for a request below;
            // `contiguous` checked the type and the size.
            let data = unsafe { Elements::new(buf.cast(), n, d) };
            match cx.e().p2p.send(&to, tag, data, mode, 0)? {
                Some(id) => wait_send(cx, id),
                None => Ok(()),
            }
        })),
        // SAFETY: the caller's contract.
        None => unsafe { send_typed(func, buf, count, dt, dest, tag, comm, mode) },
    }
}

/// [`send`] of a derived type, or of arguments the general checks report (`contiguous` said
/// no already: straight to the packer, checked in the standard's order as in `start_send`).
#[inline(never)]
unsafe fn send_typed(
    func: &'static str,
    buf: *const c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::MPI_Comm,
    mode: SendMode,
) -> c_int {
    code(run_comm_inside(func, comm, |cx, c| {
        let e = cx.e();
        // SAFETY: MPI lends the send buffer for the call, which waits for a request below.
        let conv = unsafe { handles::packer(e.types(), buf, count, dt)? };
        let Some(to) = e.p2p.check_send(c, dest, tag)? else {
            return Ok(());
        };
        match e.p2p.send(&to, tag, conv, mode, 0)? {
            Some(id) => wait_send(cx, id),
            None => Ok(()),
        }
    }))
}

/// Waits for a blocking send that did not go at once (rendezvous, synchronous, back-pressure).
/// Out of line: the wait loop inlined here made the eager send's own code worse.
#[cold]
#[inline(never)]
fn wait_send(cx: &mut Inside, id: ReqId) -> Result<()> {
    cx.wait(id).map(|_| ())
}

unsafe fn isend(
    func: &'static str,
    buf: *const c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::MPI_Comm,
    mode: SendMode,
    request: *mut abi::MPI_Request,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        if request.is_null() {
            return Err(Error::bad_arg("request is NULL"));
        }
        // SAFETY: MPI lends the send buffer until the request completes.
        let h = match unsafe { start_send(e, buf, count, dt, dest, tag, c, mode)? } {
            Some(Some(id)) => handles::request_handle(id),
            Some(None) => handles::REQUEST_SENT,
            None => {
                handles::request_handle(e.p2p.pml.requests_mut().completed(Status::PROC_NULL, 0)?)
            }
        };
        // SAFETY: checked non-null above.
        unsafe { out(request, h) }
    }))
}

/// Posts a receive into the user's buffer (checked in the standard's order, as sends are):
/// `None` for `MPI_PROC_NULL`. `blocking`: the caller waits at once (`MPI_Recv`), so the PML
/// may use its blocking receive.
///
/// # Safety
/// MPI's rule for receive buffers: `buf` holds room for `count` instances of `dt`, otherwise
/// untouched until the operation completes.
#[inline(always)]
unsafe fn start_recv(
    e: &mut Engine,
    buf: *mut c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    source: c_int,
    tag: c_int,
    c: CommId,
    blocking: bool,
) -> Result<Option<Posted>> {
    match contiguous(buf, count, dt) {
        Some((d, n)) => {
            let Some(s) = e.p2p.check_recv(c, source, tag)? else {
                return Ok(None);
            };
            // SAFETY: the caller's contract; `contiguous` checked the type and the size.
            let data = unsafe { Elements::new(buf.cast_const().cast(), n, d) };
            if blocking {
                e.p2p.recv(&s, data).map(Some)
            } else {
                e.p2p.irecv(&s, data, 0).map(|id| Some(Posted::Req(id)))
            }
        }
        None => {
            // SAFETY: the caller's contract.
            let conv = unsafe { handles::unpacker(e.types(), buf, count, dt)? };
            let Some(s) = e.p2p.check_recv(c, source, tag)? else {
                return Ok(None);
            };
            if blocking {
                e.p2p.recv(&s, conv).map(Some)
            } else {
                e.p2p.irecv(&s, conv, 0).map(|id| Some(Posted::Req(id)))
            }
        }
    }
}

/// Packs a message into the attached buffer and starts sending it from there (`MPI_Bsend`).
///
/// # Safety
/// `buf` holds `count` instances of `dt` (MPI's rule for send buffers).
pub(crate) unsafe fn bsend(
    e: &mut Engine,
    buf: *const c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: CommId,
) -> Result<()> {
    let (d, n) = handles::typed(e.types(), buf, count, dt)?;
    // SAFETY: the caller's contract.
    unsafe { bsend_typed(e, buf.cast(), n, d, dest, tag, comm) }
}

/// [`bsend`] of `count` instances of a checked, committed (or retained) type.
///
/// # Safety
/// As for [`bsend`].
pub(crate) unsafe fn bsend_typed(
    e: &mut Engine,
    buf: *const u8,
    count: u64,
    d: crate::datatype::Datatype,
    dest: c_int,
    tag: c_int,
    comm: CommId,
) -> Result<()> {
    let bytes = e.types().info(d)?.size.checked_mul(count);
    let len = bytes
        .and_then(|b| usize::try_from(b).ok())
        .ok_or(Error::new(
            ErrorClass::Buffer,
            Reason::BadArgument {
                what: "a buffered send larger than the address space",
            },
        ))?;
    if e.p2p.pml.requests().bsend().in_flight() > 0 {
        // Earlier buffered sends move on, so that the parts of those that complete are free.
        e.progress();
    }
    let requests = e.p2p.pml.requests_mut();
    requests.reclaim_bsends()?;
    let place = requests.bsend().reserve(len)?;
    let dst = requests.bsend().data(&place);
    let types = e.types();
    // SAFETY: `reserve` found `len` bytes at `dst` inside the attached buffer, which the user
    // lent until MPI_Buffer_detach and no send in flight uses; the user's buffer holds the
    // message (the caller's contract). The copy is then sent from there, and its part of the
    // buffer is not given out again before that send completes (`reclaim_bsends`).
    let copy = unsafe {
        let out = match len {
            0 => &mut [][..],
            _ => core::slice::from_raw_parts_mut(dst, len),
        };
        Packer::new(buf, count, d, types)?.pack(types, 0, out);
        Packer::packed(dst, count, d, types)?
    };
    let req = e.isend(copy, dest, tag, comm, SendMode::Standard, 0)?;
    e.p2p.pml.requests_mut().bsend_mut().commit(place, req);
    Ok(())
}

/// `MPI_Buffer_attach(_c)`: lends `size` bytes at `buf` to buffered sends.
unsafe fn buffer_attach(func: &'static str, buf: *mut c_void, size: abi::MPI_Count) -> c_int {
    code(run(func, None, |e| {
        if size < 0 {
            return Err(Error::new(
                ErrorClass::Count,
                Reason::NegativeCount { count: size },
            ));
        }
        if buf.is_null() && size > 0 {
            return Err(Error::new(ErrorClass::Buffer, Reason::NullBuffer));
        }
        let size = usize::try_from(size)
            .map_err(|_| Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
        // SAFETY: MPI lends the buffer to the library until MPI_Buffer_detach returns it.
        unsafe {
            e.p2p
                .pml
                .requests_mut()
                .bsend_mut()
                .attach(buf.cast(), size)
        }
    }))
}

/// Waits for every buffered send and lets go of the attached buffer; returns it.
pub(crate) fn detach(cx: &mut Inside) -> Result<Option<(*mut u8, usize)>> {
    if !cx.e().p2p.pml.requests().bsend().is_attached() {
        return Ok(None);
    }
    let settled = cx.block(|e| {
        let requests = e.p2p.pml.requests_mut();
        requests.reclaim_bsends()?;
        Ok((requests.bsend().in_flight() == 0).then_some(()))
    });
    // Given back even if a record was found overwritten (an erroneous program): the error says
    // so, and a new buffer may be attached.
    let buffer = cx.e().p2p.pml.requests_mut().bsend_mut().detach();
    settled.map(|()| buffer)
}

/// At MPI_Finalize: buffered sends still in flight complete first.
pub(crate) fn detach_all() {
    let _ = run_inside("MPI_Finalize", None, |cx| detach(cx).map(|_| ()));
}

/// `MPI_Bsend` and `MPI_Bsend_c`: one body, the count widened.
unsafe fn bsend_entry(
    func: &'static str,
    buf: *const c_void,
    count: abi::MPI_Count,
    datatype: abi::MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::MPI_Comm,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        // SAFETY: MPI lends the send buffer for the call.
        unsafe { bsend(e, buf, count, datatype, dest, tag, c) }
    }))
}

/// `MPI_Ibsend` and `MPI_Ibsend_c`: one body, the count widened.
unsafe fn ibsend_entry(
    func: &'static str,
    buf: *const c_void,
    count: abi::MPI_Count,
    datatype: abi::MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: abi::MPI_Comm,
    request: *mut abi::MPI_Request,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        if request.is_null() {
            return Err(Error::bad_arg("request is NULL"));
        }
        // SAFETY: MPI lends the send buffer for the call.
        unsafe { bsend(e, buf, count, datatype, dest, tag, c)? };
        // The data is copied: the user's request is complete at once.
        let id = e.completed_request(handles::EMPTY_STATUS)?;
        // SAFETY: checked non-null above.
        unsafe { out(request, handles::request_handle(id)) }
    }))
}

/// `MPI_Recv` and `MPI_Recv_c`: one body, the count widened.
unsafe fn recv_entry(
    func: &'static str,
    buf: *mut c_void,
    count: abi::MPI_Count,
    datatype: abi::MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::MPI_Comm,
    status: *mut abi::MPI_Status,
) -> c_int {
    let r = run_comm_inside(func, comm, |cx, c| {
        // SAFETY: MPI lends the receive buffer for the call, which waits for it here.
        let st = match unsafe { start_recv(cx.e(), buf, count, datatype, source, tag, c, true)? } {
            Some(r) => cx.wait_recv(r)?,
            None => Status::PROC_NULL,
        };
        Ok((st, c))
    });
    match r {
        Ok((st, c)) => {
            let rc = status_code(func, Some(c), &st);
            put_status(status, &st, rc);
            rc
        }
        Err(rc) => rc,
    }
}

/// `MPI_Irecv` and `MPI_Irecv_c`: one body, the count widened.
unsafe fn irecv_entry(
    func: &'static str,
    buf: *mut c_void,
    count: abi::MPI_Count,
    datatype: abi::MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: abi::MPI_Comm,
    request: *mut abi::MPI_Request,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        if request.is_null() {
            return Err(Error::bad_arg("request is NULL"));
        }
        // SAFETY: MPI lends the receive buffer until the request completes.
        let id = match unsafe { start_recv(e, buf, count, datatype, source, tag, c, false)? } {
            Some(Posted::Req(id)) => id,
            _ => e.p2p.pml.requests_mut().completed(Status::PROC_NULL, 0)?,
        };
        // SAFETY: checked non-null above.
        unsafe { out(request, handles::request_handle(id)) }
    }))
}

/// `MPI_Sendrecv` and `MPI_Sendrecv_c`: one body, the count widened.
unsafe fn sendrecv_entry(
    func: &'static str,
    sendbuf: *const c_void,
    sendcount: abi::MPI_Count,
    sendtype: abi::MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: abi::MPI_Count,
    recvtype: abi::MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: abi::MPI_Comm,
    status: *mut abi::MPI_Status,
) -> c_int {
    let r = run_comm_inside(func, comm, |cx, c| {
        // SAFETY: MPI lends both buffers for the call; both are waited for in `sendrecv`.
        let st = unsafe {
            let send = packer(cx.e(), sendbuf, sendcount, sendtype)?;
            match contiguous(recvbuf, recvcount, recvtype) {
                Some((d, n)) => {
                    let recv = Elements::new(recvbuf.cast_const().cast(), n, d);
                    sendrecv(cx, c, send, dest, sendtag, recv, source, recvtag)?
                }
                None => {
                    let recv = handles::unpacker(cx.e().types(), recvbuf, recvcount, recvtype)?;
                    sendrecv(cx, c, send, dest, sendtag, recv, source, recvtag)?
                }
            }
        };
        Ok((st, c))
    });
    match r {
        Ok((st, c)) => {
            let rc = status_code(func, Some(c), &st);
            put_status(status, &st, rc);
            rc
        }
        Err(rc) => rc,
    }
}

/// `MPI_Sendrecv`'s exchange, its buffers' types checked: both halves' envelopes are checked
/// before anything starts (an error leaves nothing under way); the send starts, the receive is
/// posted as `MPI_Recv`'s (the PML's blocking receive when free, which a pooled request and
/// its wait cost half the call more than), then both are waited for.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn sendrecv(
    cx: &mut Inside,
    c: CommId,
    send: Packer,
    dest: c_int,
    sendtag: c_int,
    recv: impl RecvData,
    source: c_int,
    recvtag: c_int,
) -> Result<Status> {
    let e = cx.e();
    let from = e.p2p.check_recv(c, source, recvtag)?;
    let sent = match e.p2p.check_send(c, dest, sendtag)? {
        Some(to) => e.p2p.send(&to, sendtag, send, SendMode::Standard, 0)?,
        None => None,
    };
    let posted = match from.map(|s| cx.e().p2p.recv(&s, recv)).transpose() {
        Ok(p) => p,
        Err(err) => {
            // The send may be reading the user's buffer still: it goes on to its end first.
            if let Some(s) = sent {
                cx.wait(s)?;
            }
            return Err(err);
        }
    };
    let st = match posted {
        Some(r) => cx.wait_recv(r)?,
        None => Status::PROC_NULL,
    };
    if let Some(s) = sent {
        cx.wait(s)?;
    }
    Ok(st)
}

/// `MPI_Sendrecv_replace` and `MPI_Sendrecv_replace_c`: one body, the count widened.
unsafe fn sendrecv_replace_entry(
    func: &'static str,
    buf: *mut c_void,
    count: abi::MPI_Count,
    datatype: abi::MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: abi::MPI_Comm,
    status: *mut abi::MPI_Status,
) -> c_int {
    let r = run_comm_inside(func, comm, |cx, c| {
        let e = cx.e();
        let (d, count64) = handles::typed(e.types(), buf, count, datatype)?;
        let n = (e.types().info(d)?.size * count64) as usize;
        let mut small = [0u8; 4096];
        let (tmp, heap) = if n <= small.len() {
            (small.as_mut_ptr(), false)
        } else {
            let alloc = state::hooks().and_then(|h| (h.temp_alloc)(n));
            (
                alloc.ok_or(Error::new(
                    ErrorClass::NoMem,
                    Reason::BadArgument {
                        what: "no temporary memory for MPI_Sendrecv_replace",
                    },
                ))?,
                true,
            )
        };
        let result = (|| {
            // SAFETY: the message is packed out of the user's buffer into `tmp` (`n` bytes
            // until freed below, after both operations completed), then the buffer
            // receives the reply.
            let e = cx.e();
            let (send, recv) = unsafe {
                let packed = core::slice::from_raw_parts_mut(tmp, n);
                Packer::new(buf.cast(), count64, d, e.types())?.pack(e.types(), 0, packed);
                (
                    Packer::packed(tmp, count64, d, e.types())?,
                    Unpacker::new(buf.cast(), count64, d, e.types())?,
                )
            };
            sendrecv(cx, c, send, dest, sendtag, recv, source, recvtag)
        })();
        if heap {
            if let Some(h) = state::hooks() {
                (h.temp_free)(tmp, n);
            }
        }
        Ok((result?, c))
    });
    match r {
        Ok((st, c)) => {
            let rc = status_code(func, Some(c), &st);
            put_status(status, &st, rc);
            rc
        }
        Err(rc) => rc,
    }
}

/// `MPI_Mrecv` and `MPI_Mrecv_c`: one body, the count widened.
unsafe fn mrecv_entry(
    func: &'static str,
    buf: *mut c_void,
    count: abi::MPI_Count,
    datatype: abi::MPI_Datatype,
    message: *mut abi::MPI_Message,
    status: *mut abi::MPI_Status,
) -> c_int {
    let r = run_inside(func, None, |cx| {
        let e = cx.e();
        if message.is_null() {
            return Err(Error::bad_arg("message is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Message.
        let m = handles::message(e, unsafe { *message })?;
        // SAFETY: MPI lends the receive buffer for the call; it is waited for below.
        let conv = unsafe { unpacker(e, buf, count, datatype)? };
        let id = e.imrecv(conv, m, 0)?;
        let comm = e.request_comm(id);
        // SAFETY: as above.
        unsafe { *message = abi::MPI_MESSAGE_NULL };
        Ok((cx.wait(id)?, comm))
    });
    match r {
        Ok((st, comm)) => {
            let rc = status_code(func, comm, &st);
            put_status(status, &st, rc);
            rc
        }
        Err(rc) => rc,
    }
}

/// `MPI_Imrecv` and `MPI_Imrecv_c`: one body, the count widened.
unsafe fn imrecv_entry(
    func: &'static str,
    buf: *mut c_void,
    count: abi::MPI_Count,
    datatype: abi::MPI_Datatype,
    message: *mut abi::MPI_Message,
    request: *mut abi::MPI_Request,
) -> c_int {
    code(run(func, None, |e| {
        if message.is_null() || request.is_null() {
            return Err(Error::bad_arg("message or request is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Message.
        let m = handles::message(e, unsafe { *message })?;
        // SAFETY: MPI lends the receive buffer until the request completes.
        let conv = unsafe { unpacker(e, buf, count, datatype)? };
        let id = e.imrecv(conv, m, 0)?;
        // SAFETY: both checked non-null above.
        unsafe {
            *message = abi::MPI_MESSAGE_NULL;
            out(request, handles::request_handle(id))
        }
    }))
}

/// `MPI_Isendrecv(_c)`: the receive is posted, then the send started; the request completes
/// when both have (a joined request of the request core), with the receive's status.
#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv_entry(
    func: &'static str,
    sendbuf: *const c_void,
    sendcount: abi::MPI_Count,
    sendtype: abi::MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: abi::MPI_Count,
    recvtype: abi::MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: abi::MPI_Comm,
    request: *mut abi::MPI_Request,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        if request.is_null() {
            return Err(Error::bad_arg("request is NULL"));
        }
        // SAFETY: MPI lends both buffers until the request completes.
        let (send, recv) = unsafe {
            (
                packer(e, sendbuf, sendcount, sendtype)?,
                unpacker(e, recvbuf, recvcount, recvtype)?,
            )
        };
        // SAFETY: as above.
        unsafe {
            joined(
                e, c, send, dest, sendtag, recv, source, recvtag, None, request,
            )
        }
    }))
}

/// Posts `recv`, starts `send` and writes the request that joins them.
///
/// # Safety
/// The convertors' buffers stay lent until the request completes.
#[allow(clippy::too_many_arguments)]
unsafe fn joined(
    e: &mut Engine,
    c: CommId,
    send: Packer,
    dest: c_int,
    sendtag: c_int,
    recv: Unpacker,
    source: c_int,
    recvtag: c_int,
    release: Option<crate::pml::request::Release>,
    request: *mut abi::MPI_Request,
) -> Result<()> {
    // The destination and tag are checked before anything is posted.
    let to = e.p2p.check_send(c, dest, sendtag)?;
    let r = e.irecv(recv, source, recvtag, c, 0)?;
    let s = match to {
        Some(to) => match e.p2p.send(&to, sendtag, send, SendMode::Standard, 0) {
            Ok(s) => s,
            Err(err) => {
                let _ = e.p2p.pml.requests_mut().release(r);
                return Err(err);
            }
        },
        None => None,
    };
    let id = e.p2p.pml.requests_mut().joined(Some(r), s, release)?;
    // SAFETY: checked non-null by the caller.
    unsafe { out(request, handles::request_handle(id)) }
}

/// `MPI_Isendrecv_replace(_c)`: the message is packed into temporary memory (given back when
/// the request completes), then sent from there while the buffer receives the reply.
#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv_replace_entry(
    func: &'static str,
    buf: *mut c_void,
    count: abi::MPI_Count,
    datatype: abi::MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: abi::MPI_Comm,
    request: *mut abi::MPI_Request,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        if request.is_null() {
            return Err(Error::bad_arg("request is NULL"));
        }
        let (d, count64) = handles::typed(e.types(), buf, count, datatype)?;
        let n = e
            .types()
            .info(d)?
            .size
            .checked_mul(count64)
            .and_then(|b| usize::try_from(b).ok())
            .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
        let hooks = state::hooks().ok_or(Error::new(ErrorClass::Other, Reason::NotInitialized))?;
        let tmp = match n {
            0 => core::ptr::NonNull::dangling().as_ptr(),
            _ => (hooks.temp_alloc)(n).ok_or(Error::new(
                ErrorClass::NoMem,
                Reason::BadArgument {
                    what: "no temporary memory for MPI_Isendrecv_replace",
                },
            ))?,
        };
        let release = (n > 0).then_some((hooks.temp_free, tmp, n));
        // SAFETY: the message is packed out of the user's buffer into `tmp` (`n` bytes, ours
        // until the request completes and gives it back), then the buffer receives the reply.
        let r = unsafe {
            (|| {
                let packed = match n {
                    0 => &mut [][..],
                    _ => core::slice::from_raw_parts_mut(tmp, n),
                };
                Packer::new(buf.cast(), count64, d, e.types())?.pack(e.types(), 0, packed);
                let send = Packer::packed(tmp, count64, d, e.types())?;
                let recv = Unpacker::new(buf.cast(), count64, d, e.types())?;
                joined(
                    e, c, send, dest, sendtag, recv, source, recvtag, release, request,
                )
            })()
        };
        if r.is_err() && n > 0 {
            (hooks.temp_free)(tmp, n);
        }
        r
    }))
}

super::mpi! {
    fn MPI_Send / PMPI_Send(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm) {
        send("MPI_Send", buf, count.into(), datatype, dest, tag, comm, SendMode::Standard)
    }

    fn MPI_Send_c / PMPI_Send_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm) {
        send("MPI_Send_c", buf, count, datatype, dest, tag, comm, SendMode::Standard)
    }

    fn MPI_Ssend / PMPI_Ssend(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm) {
        send("MPI_Ssend", buf, count.into(), datatype, dest, tag, comm, SendMode::Synchronous)
    }

    fn MPI_Ssend_c / PMPI_Ssend_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm) {
        send("MPI_Ssend_c", buf, count, datatype, dest, tag, comm, SendMode::Synchronous)
    }

    fn MPI_Rsend / PMPI_Rsend(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm) {
        send("MPI_Rsend", buf, count.into(), datatype, dest, tag, comm, SendMode::Ready)
    }

    fn MPI_Rsend_c / PMPI_Rsend_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm) {
        send("MPI_Rsend_c", buf, count, datatype, dest, tag, comm, SendMode::Ready)
    }

    fn MPI_Bsend / PMPI_Bsend(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm) {
        bsend_entry("MPI_Bsend", buf, count.into(), datatype, dest, tag, comm)
    }

    fn MPI_Bsend_c / PMPI_Bsend_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm) {
        bsend_entry("MPI_Bsend_c", buf, count, datatype, dest, tag, comm)
    }

    fn MPI_Isend / PMPI_Isend(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isend("MPI_Isend", buf, count.into(), datatype, dest, tag, comm, SendMode::Standard, request)
    }

    fn MPI_Isend_c / PMPI_Isend_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isend("MPI_Isend_c", buf, count, datatype, dest, tag, comm, SendMode::Standard, request)
    }

    fn MPI_Issend / PMPI_Issend(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isend("MPI_Issend", buf, count.into(), datatype, dest, tag, comm, SendMode::Synchronous, request)
    }

    fn MPI_Issend_c / PMPI_Issend_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isend("MPI_Issend_c", buf, count, datatype, dest, tag, comm, SendMode::Synchronous, request)
    }

    fn MPI_Irsend / PMPI_Irsend(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isend("MPI_Irsend", buf, count.into(), datatype, dest, tag, comm, SendMode::Ready, request)
    }

    fn MPI_Irsend_c / PMPI_Irsend_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isend("MPI_Irsend_c", buf, count, datatype, dest, tag, comm, SendMode::Ready, request)
    }

    fn MPI_Ibsend / PMPI_Ibsend(buf: *const c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        ibsend_entry("MPI_Ibsend", buf, count.into(), datatype, dest, tag, comm, request)
    }

    fn MPI_Ibsend_c / PMPI_Ibsend_c(buf: *const c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        ibsend_entry("MPI_Ibsend_c", buf, count, datatype, dest, tag, comm, request)
    }

    fn MPI_Buffer_attach / PMPI_Buffer_attach(buf: *mut c_void, size: c_int) {
        buffer_attach("MPI_Buffer_attach", buf, size.into())
    }

    fn MPI_Buffer_attach_c / PMPI_Buffer_attach_c(buf: *mut c_void, size: abi::MPI_Count) {
        buffer_attach("MPI_Buffer_attach_c", buf, size)
    }

    fn MPI_Buffer_detach / PMPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) {
        code(run_inside("MPI_Buffer_detach", None, |cx| {
            let (p, n) = detach(cx)?.unwrap_or((core::ptr::null_mut(), 0));
            // SAFETY: MPI passes `buffer_addr` as a `void **` and `size` as an `int *`.
            unsafe {
                out(buffer_addr.cast::<*mut u8>(), p)?;
                out(size, c_int::try_from(n).unwrap_or(c_int::MAX))
            }
        }))
    }

    fn MPI_Buffer_detach_c / PMPI_Buffer_detach_c(buffer_addr: *mut c_void, size: *mut abi::MPI_Count) {
        code(run_inside("MPI_Buffer_detach_c", None, |cx| {
            let (p, n) = detach(cx)?.unwrap_or((core::ptr::null_mut(), 0));
            // SAFETY: MPI passes `buffer_addr` as a `void **` and `size` as an `MPI_Count *`.
            unsafe {
                out(buffer_addr.cast::<*mut u8>(), p)?;
                out(size, n as abi::MPI_Count)
            }
        }))
    }

    fn MPI_Recv / PMPI_Recv(buf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, source: c_int, tag: c_int, comm: abi::MPI_Comm, status: *mut abi::MPI_Status) {
        // The body of `recv_entry`, kept here: the small-message path is shorter with the
        // function's name a constant (+30 instructions a receive through the shared body).
        // A status without an error is written where the request holds it; one with an error
        // is copied out and reported after the engine is left (the error handler may call MPI).
        // (`finish` returns nothing: a status in the result cost a copy at each level.)
        let mut failed = None;
        let mut finish = |st: &Status| match st.error {
            // SAFETY: MPI's rule for the status argument.
            None => unsafe { put_status(status, st, abi::MPI_SUCCESS) },
            Some(_) => failed = Some(*st),
        };
        let r = run_comm_inside("MPI_Recv", comm, |cx, c| {
            // SAFETY: MPI lends the receive buffer for the call, which waits for it here.
            match unsafe { start_recv(cx.e(), buf, count.into(), datatype, source, tag, c, true)? } {
                Some(r) => cx.wait_recv_with(r, &mut finish)?,
                None => finish(&Status::PROC_NULL),
            };
            Ok(c)
        });
        match (r, failed) {
            (Ok(_), None) => abi::MPI_SUCCESS,
            (Ok(c), Some(st)) => {
                let rc = status_code("MPI_Recv", Some(c), &st);
                put_status(status, &st, rc);
                rc
            }
            (Err(rc), _) => rc,
        }
    }

    fn MPI_Recv_c / PMPI_Recv_c(buf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, source: c_int, tag: c_int, comm: abi::MPI_Comm, status: *mut abi::MPI_Status) {
        recv_entry("MPI_Recv_c", buf, count, datatype, source, tag, comm, status)
    }

    fn MPI_Irecv / PMPI_Irecv(buf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, source: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        irecv_entry("MPI_Irecv", buf, count.into(), datatype, source, tag, comm, request)
    }

    fn MPI_Irecv_c / PMPI_Irecv_c(buf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, source: c_int, tag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        irecv_entry("MPI_Irecv_c", buf, count, datatype, source, tag, comm, request)
    }

    fn MPI_Sendrecv / PMPI_Sendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, source: c_int, recvtag: c_int, comm: abi::MPI_Comm, status: *mut abi::MPI_Status) {
        sendrecv_entry("MPI_Sendrecv", sendbuf, sendcount.into(), sendtype, dest, sendtag, recvbuf, recvcount.into(), recvtype, source, recvtag, comm, status)
    }

    fn MPI_Sendrecv_c / PMPI_Sendrecv_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, source: c_int, recvtag: c_int, comm: abi::MPI_Comm, status: *mut abi::MPI_Status) {
        sendrecv_entry("MPI_Sendrecv_c", sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status)
    }

    fn MPI_Sendrecv_replace / PMPI_Sendrecv_replace(buf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: abi::MPI_Comm, status: *mut abi::MPI_Status) {
        sendrecv_replace_entry("MPI_Sendrecv_replace", buf, count.into(), datatype, dest, sendtag, source, recvtag, comm, status)
    }

    fn MPI_Sendrecv_replace_c / PMPI_Sendrecv_replace_c(buf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: abi::MPI_Comm, status: *mut abi::MPI_Status) {
        sendrecv_replace_entry("MPI_Sendrecv_replace_c", buf, count, datatype, dest, sendtag, source, recvtag, comm, status)
    }

    fn MPI_Isendrecv / PMPI_Isendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, source: c_int, recvtag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isendrecv_entry("MPI_Isendrecv", sendbuf, sendcount.into(), sendtype, dest, sendtag, recvbuf, recvcount.into(), recvtype, source, recvtag, comm, request)
    }

    fn MPI_Isendrecv_c / PMPI_Isendrecv_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, source: c_int, recvtag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isendrecv_entry("MPI_Isendrecv_c", sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, request)
    }

    fn MPI_Isendrecv_replace / PMPI_Isendrecv_replace(buf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isendrecv_replace_entry("MPI_Isendrecv_replace", buf, count.into(), datatype, dest, sendtag, source, recvtag, comm, request)
    }

    fn MPI_Isendrecv_replace_c / PMPI_Isendrecv_replace_c(buf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        isendrecv_replace_entry("MPI_Isendrecv_replace_c", buf, count, datatype, dest, sendtag, source, recvtag, comm, request)
    }

    fn MPI_Probe / PMPI_Probe(source: c_int, tag: c_int, comm: abi::MPI_Comm, status: *mut abi::MPI_Status) {
        match run_comm_inside("MPI_Probe", comm, |cx, c| cx.probe(source, tag, c)) {
            Ok(st) => {
                handles::put_probe_status(status, &probed(st));
                abi::MPI_SUCCESS
            }
            Err(rc) => rc,
        }
    }

    fn MPI_Iprobe / PMPI_Iprobe(source: c_int, tag: c_int, comm: abi::MPI_Comm, flag: *mut c_int, status: *mut abi::MPI_Status) {
        match run_comm("MPI_Iprobe", comm, |e, c| {
            let st = e.iprobe(source, tag, c)?;
            if st.is_none() {
                e.polled_idle();
            }
            // SAFETY: MPI requires `flag` to point to an int.
            unsafe { out(flag, st.is_some() as c_int)? };
            Ok(st)
        }) {
            Ok(Some(st)) => {
                handles::put_probe_status(status, &probed(st));
                abi::MPI_SUCCESS
            }
            Ok(None) => abi::MPI_SUCCESS,
            Err(rc) => rc,
        }
    }

    fn MPI_Mprobe / PMPI_Mprobe(source: c_int, tag: c_int, comm: abi::MPI_Comm, message: *mut abi::MPI_Message, status: *mut abi::MPI_Status) {
        match run_comm_inside("MPI_Mprobe", comm, |cx, c| {
            let (m, st) = cx.mprobe(source, tag, c)?;
            // SAFETY: MPI requires `message` to point to an MPI_Message.
            unsafe { out(message, handles::message_handle(m))? };
            Ok(st)
        }) {
            Ok(st) => {
                handles::put_probe_status(status, &probed(st));
                abi::MPI_SUCCESS
            }
            Err(rc) => rc,
        }
    }

    fn MPI_Improbe / PMPI_Improbe(source: c_int, tag: c_int, comm: abi::MPI_Comm, flag: *mut c_int, message: *mut abi::MPI_Message, status: *mut abi::MPI_Status) {
        match run_comm("MPI_Improbe", comm, |e, c| {
            let r = e.improbe(source, tag, c)?;
            if r.is_none() {
                e.polled_idle();
            }
            // SAFETY: MPI requires `flag` to point to an int, `message` to an MPI_Message.
            unsafe {
                out(flag, r.is_some() as c_int)?;
                if let Some((m, _)) = r {
                    out(message, handles::message_handle(m))?;
                }
            }
            Ok(r.map(|(_, st)| st))
        }) {
            Ok(Some(st)) => {
                handles::put_probe_status(status, &probed(st));
                abi::MPI_SUCCESS
            }
            Ok(None) => abi::MPI_SUCCESS,
            Err(rc) => rc,
        }
    }

    fn MPI_Mrecv / PMPI_Mrecv(buf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, message: *mut abi::MPI_Message, status: *mut abi::MPI_Status) {
        mrecv_entry("MPI_Mrecv", buf, count.into(), datatype, message, status)
    }

    fn MPI_Mrecv_c / PMPI_Mrecv_c(buf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, message: *mut abi::MPI_Message, status: *mut abi::MPI_Status) {
        mrecv_entry("MPI_Mrecv_c", buf, count, datatype, message, status)
    }

    fn MPI_Imrecv / PMPI_Imrecv(buf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, message: *mut abi::MPI_Message, request: *mut abi::MPI_Request) {
        imrecv_entry("MPI_Imrecv", buf, count.into(), datatype, message, request)
    }

    fn MPI_Imrecv_c / PMPI_Imrecv_c(buf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, message: *mut abi::MPI_Message, request: *mut abi::MPI_Request) {
        imrecv_entry("MPI_Imrecv_c", buf, count, datatype, message, request)
    }

}

/// A probe's status reports the whole message.
fn probed(st: Status) -> Status {
    Status {
        bytes: st.message_bytes,
        ..st
    }
}
