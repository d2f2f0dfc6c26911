//! Collective operations, blocking and non-blocking, and user-defined reduction operations.
//!
//! Every collective builds an engine [`Call`] from its C arguments (checking counts and types;
//! arguments significant only at the root are not looked at elsewhere) and runs it blocking, or
//! starts it and hands back a request that the `MPI_Wait`/`MPI_Test` family completes.

use core::ffi::{c_int, c_void};

use super::abi;
use super::env::{code, run, run_comm_inside};
use super::handles::{self, out};
use crate::coll::{Buf, Call, Mode, UserOp, VBuf, WBuf};
use crate::comm::CommId;
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::op::Op;

fn in_place(p: *const c_void) -> bool {
    core::ptr::eq(p, abi::MPI_IN_PLACE)
}

/// A reduction's input and output may not be one buffer: MPI asks for `MPI_IN_PLACE` then
/// (the operation would read what it already overwrote).
fn not_aliased(sb: *const c_void, rb: *const c_void, count: c_int) -> Result<()> {
    if count > 0 && !in_place(sb) && !sb.is_null() && sb == rb {
        return Err(Error::new(
            ErrorClass::Buffer,
            Reason::BadArgument {
                what: "sendbuf and recvbuf are the same buffer (pass MPI_IN_PLACE as sendbuf)",
            },
        ));
    }
    Ok(())
}

/// A typed buffer from C arguments, checked (count, committed type, NULL with data).
fn buf(e: &Engine, p: *const c_void, count: c_int, dt: abi::MPI_Datatype) -> Result<Buf> {
    let (d, n) = handles::typed(e.types(), p, count, dt)?;
    Ok(Buf {
        ptr: p as *mut u8,
        count: n,
        dt: d,
    })
}

/// A send buffer, `None` for `MPI_IN_PLACE`.
fn send_buf(
    e: &Engine,
    p: *const c_void,
    count: c_int,
    dt: abi::MPI_Datatype,
) -> Result<Option<Buf>> {
    if in_place(p) {
        return Ok(None);
    }
    buf(e, p, count, dt).map(Some)
}

fn vbuf(
    e: &Engine,
    p: *const c_void,
    counts: *const c_int,
    displs: *const c_int,
    dt: abi::MPI_Datatype,
) -> Result<VBuf> {
    let d = handles::datatype(dt)?;
    e.types().check_committed(d)?;
    if counts.is_null() || displs.is_null() {
        return Err(Error::bad_arg("array of counts or displacements is NULL"));
    }
    Ok(VBuf {
        ptr: p as *mut u8,
        counts,
        displs,
        dt: d,
    })
}

fn map_type(h: i32) -> Datatype {
    handles::datatype(h).unwrap_or(Datatype::BYTE)
}

fn check_type(t: &TypeTable, h: i32) -> Result<Datatype> {
    let d = handles::datatype(h)?;
    t.check_committed(d)?;
    Ok(d)
}

fn wbuf(
    p: *const c_void,
    counts: *const c_int,
    displs: *const c_int,
    types: *const abi::MPI_Datatype,
) -> WBuf {
    WBuf {
        ptr: p as *mut u8,
        counts,
        displs,
        types,
        map: map_type,
        check: check_type,
    }
}

/// The reduction buffers' datatype and count, checked.
fn red_args(
    e: &Engine,
    count: c_int,
    dt: abi::MPI_Datatype,
    bufs: &[*const c_void],
) -> Result<(Datatype, u64)> {
    let mut r = None;
    for &b in bufs {
        // The type and count need checking once; a further buffer only for being NULL.
        if !in_place(b) && (r.is_none() || b.is_null()) {
            r = Some(handles::typed(e.types(), b, count, dt)?);
        }
    }
    match r {
        Some(x) => Ok(x),
        None => handles::typed(e.types(), core::ptr::null(), 0, dt)
            .map(|(d, _)| (d, count.max(0) as u64)),
    }
}

fn send_ptr(p: *const c_void) -> Option<*const u8> {
    (!in_place(p)).then_some(p.cast())
}

/// Where this process stands in a rooted collective.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// The root (`MPI_ROOT` on an intercommunicator).
    Root,
    /// Another participant (on an intercommunicator: a member of the other group).
    Other,
    /// `MPI_PROC_NULL` on an intercommunicator: a member of the root's group that takes no part;
    /// none of its buffer arguments is significant.
    Idle,
}

fn at(e: &Engine, c: CommId, root: c_int) -> Result<At> {
    let comm = e.comm(c)?;
    Ok(match (comm.is_inter(), root) {
        (true, abi::MPI_ROOT) => At::Root,
        (true, abi::MPI_PROC_NULL) => At::Idle,
        (true, _) => At::Other,
        (false, r) if comm.rank as c_int == r => At::Root,
        (false, _) => At::Other,
    })
}

/// A buffer of nothing (arguments that are not significant).
fn nothing() -> Buf {
    Buf {
        ptr: core::ptr::null_mut(),
        count: 0,
        dt: Datatype::BYTE,
    }
}

/// A v-buffer of nothing.
fn vnothing() -> VBuf {
    VBuf {
        ptr: core::ptr::null_mut(),
        counts: core::ptr::null(),
        displs: core::ptr::null(),
        dt: Datatype::BYTE,
    }
}

/// Runs collective `func` blocking (`request` NULL) or starts it, writing its request.
unsafe fn start(
    func: &'static str,
    comm: abi::MPI_Comm,
    request: Option<*mut abi::MPI_Request>,
    build: impl FnOnce(&Engine, CommId) -> Result<Call>,
) -> c_int {
    code(run_comm_inside(func, comm, |cx, c| {
        if request.is_some_and(|r| r.is_null()) {
            return Err(Error::bad_arg("request is NULL"));
        }
        let call = build(cx.e(), c)?;
        let mode = match request {
            Some(_) => Mode::NonBlocking { scope: 0 },
            None => Mode::Blocking,
        };
        // SAFETY: MPI's rules for collective buffers and arrays, which the caller follows.
        let id = unsafe { crate::coll::collective(cx, c, call, mode)? };
        if let (Some(r), Some(id)) = (request, id) {
            // SAFETY: checked non-null above.
            unsafe { *r = handles::request_handle(id) };
        }
        Ok(())
    }))
}

unsafe fn barrier(
    func: &'static str,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |_, _| Ok(Call::Barrier))
}

unsafe fn bcast(
    func: &'static str,
    b: *mut c_void,
    count: c_int,
    dt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, c| {
        let buf = match at(e, c, root)? {
            At::Idle => nothing(),
            _ => buf(e, b, count, dt)?,
        };
        Ok(Call::Bcast { buf, root })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn gather(
    func: &'static str,
    sb: *const c_void,
    sc: c_int,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rc: c_int,
    rt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, c| {
        let (send, recv) = match at(e, c, root)? {
            At::Idle => (Some(nothing()), nothing()),
            At::Root if e.comm(c)?.is_inter() => (Some(nothing()), buf(e, rb, rc, rt)?),
            At::Root => (send_buf(e, sb, sc, st)?, buf(e, rb, rc, rt)?),
            At::Other => (send_buf(e, sb, sc, st)?, nothing()),
        };
        Ok(Call::Gather { send, recv, root })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn gatherv(
    func: &'static str,
    sb: *const c_void,
    sc: c_int,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: *const c_int,
    displs: *const c_int,
    rt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, c| {
        let (send, recv) = match at(e, c, root)? {
            At::Idle => (Some(nothing()), vnothing()),
            At::Root if e.comm(c)?.is_inter() => (Some(nothing()), vbuf(e, rb, rcs, displs, rt)?),
            At::Root => (send_buf(e, sb, sc, st)?, vbuf(e, rb, rcs, displs, rt)?),
            At::Other => (send_buf(e, sb, sc, st)?, vnothing()),
        };
        Ok(Call::Gatherv { send, recv, root })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn scatter(
    func: &'static str,
    sb: *const c_void,
    sc: c_int,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rc: c_int,
    rt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, c| {
        let (send, recv) = match at(e, c, root)? {
            At::Idle => (nothing(), Some(nothing())),
            At::Root if e.comm(c)?.is_inter() => (buf(e, sb, sc, st)?, Some(nothing())),
            At::Root => (buf(e, sb, sc, st)?, send_buf(e, rb, rc, rt)?),
            At::Other => (nothing(), send_buf(e, rb, rc, rt)?),
        };
        Ok(Call::Scatter { send, recv, root })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn scatterv(
    func: &'static str,
    sb: *const c_void,
    scs: *const c_int,
    displs: *const c_int,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rc: c_int,
    rt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, c| {
        let (send, recv) = match at(e, c, root)? {
            At::Idle => (vnothing(), Some(nothing())),
            At::Root if e.comm(c)?.is_inter() => (vbuf(e, sb, scs, displs, st)?, Some(nothing())),
            At::Root => (vbuf(e, sb, scs, displs, st)?, send_buf(e, rb, rc, rt)?),
            At::Other => (vnothing(), send_buf(e, rb, rc, rt)?),
        };
        Ok(Call::Scatterv { send, recv, root })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn allgather(
    func: &'static str,
    sb: *const c_void,
    sc: c_int,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rc: c_int,
    rt: abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
    alltoall: bool,
) -> c_int {
    start(func, comm, rq, |e, _| {
        let send = send_buf(e, sb, sc, st)?;
        let recv = buf(e, rb, rc, rt)?;
        Ok(if alltoall {
            Call::Alltoall { send, recv }
        } else {
            Call::Allgather { send, recv }
        })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn allgatherv(
    func: &'static str,
    sb: *const c_void,
    sc: c_int,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: *const c_int,
    displs: *const c_int,
    rt: abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, _| {
        Ok(Call::Allgatherv {
            send: send_buf(e, sb, sc, st)?,
            recv: vbuf(e, rb, rcs, displs, rt)?,
        })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallv(
    func: &'static str,
    sb: *const c_void,
    scs: *const c_int,
    sd: *const c_int,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: *const c_int,
    rd: *const c_int,
    rt: abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, _| {
        let send = if in_place(sb) {
            None
        } else {
            Some(vbuf(e, sb, scs, sd, st)?)
        };
        Ok(Call::Alltoallv {
            send,
            recv: vbuf(e, rb, rcs, rd, rt)?,
        })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallw(
    func: &'static str,
    sb: *const c_void,
    scs: *const c_int,
    sd: *const c_int,
    sts: *const abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: *const c_int,
    rd: *const c_int,
    rts: *const abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |_, _| {
        let send = (!in_place(sb)).then(|| wbuf(sb, scs, sd, sts));
        Ok(Call::Alltoallw {
            send,
            recv: wbuf(rb, rcs, rd, rts),
        })
    })
}

/// The reductions that share one argument list.
#[derive(Clone, Copy)]
enum RedCall {
    Allreduce,
    Scan,
    Exscan,
    ReduceScatterBlock,
}

#[allow(clippy::too_many_arguments)]
unsafe fn reduction(
    func: &'static str,
    which: RedCall,
    sb: *const c_void,
    rb: *mut c_void,
    count: c_int,
    dt: abi::MPI_Datatype,
    op: abi::MPI_Op,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, c| {
        let op = handles::op(op)?;
        not_aliased(sb, rb.cast_const(), count)?;
        let (dt, count) = red_args(e, count, dt, &[sb, rb])?;
        if let (RedCall::ReduceScatterBlock, true) = (which, in_place(sb)) {
            // In place, the input is the whole vector in the receive buffer.
            let n = count * e.comm(c)?.size() as u64;
            handles::typed(
                e.types(),
                rb,
                i32::try_from(n).unwrap_or(i32::MAX),
                handles::datatype_handle(dt),
            )?;
        }
        let (send, recv) = (send_ptr(sb), rb.cast::<u8>());
        Ok(match which {
            RedCall::Allreduce => Call::Allreduce {
                send,
                recv,
                count,
                dt,
                op,
            },
            RedCall::Scan => Call::Scan {
                send,
                recv,
                count,
                dt,
                op,
            },
            RedCall::Exscan => Call::Exscan {
                send,
                recv,
                count,
                dt,
                op,
            },
            RedCall::ReduceScatterBlock => Call::ReduceScatterBlock {
                send,
                recv,
                count,
                dt,
                op,
            },
        })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn reduce(
    func: &'static str,
    sb: *const c_void,
    rb: *mut c_void,
    count: c_int,
    dt: abi::MPI_Datatype,
    op: abi::MPI_Op,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, c| {
        let at = at(e, c, root)?;
        let inter = e.comm(c)?.is_inter();
        if at == At::Idle {
            return Ok(Call::Reduce {
                send: Some(core::ptr::null()),
                recv: core::ptr::null_mut(),
                count: 0,
                dt: Datatype::BYTE,
                op: Op::Sum,
                root,
            });
        }
        let op = handles::op(op)?;
        let at_root = at == At::Root;
        if at_root && !inter {
            not_aliased(sb, rb.cast_const(), count)?;
        }
        let bufs: &[*const c_void] = match (at_root, inter) {
            (true, true) => &[rb],
            (true, false) => &[sb, rb],
            (false, _) => &[sb],
        };
        let (dt, count) = red_args(e, count, dt, bufs)?;
        Ok(Call::Reduce {
            send: if at_root && inter {
                Some(core::ptr::null())
            } else {
                send_ptr(sb)
            },
            recv: if at_root {
                rb.cast()
            } else {
                core::ptr::null_mut()
            },
            count,
            dt,
            op,
            root,
        })
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn reduce_scatter(
    func: &'static str,
    sb: *const c_void,
    rb: *mut c_void,
    counts: *const c_int,
    dt: abi::MPI_Datatype,
    op: abi::MPI_Op,
    comm: abi::MPI_Comm,
    rq: Option<*mut abi::MPI_Request>,
) -> c_int {
    start(func, comm, rq, |e, _| {
        let op = handles::op(op)?;
        let (dt, _) = red_args(e, 0, dt, &[])?;
        if counts.is_null() {
            return Err(Error::bad_arg("array of counts is NULL"));
        }
        Ok(Call::ReduceScatter {
            send: send_ptr(sb),
            recv: rb.cast(),
            counts,
            dt,
            op,
        })
    })
}

/// Calls a C `MPI_User_function` (`func`) for the engine.
unsafe fn call_user(func: usize, input: *const u8, inout: *mut u8, len: i32, dt: Datatype) {
    // SAFETY: `func` was an `MPI_User_function` when MPI_Op_create stored it.
    let f: abi::MPI_User_function = unsafe { core::mem::transmute(func) };
    let mut len = len;
    let mut h = handles::datatype_handle(dt);
    // The engine's lock is held here; the function may call MPI (mpi4py's ask for the type's
    // extent), which must not wait for that lock.
    crate::api::ENGINE.user_callback(|| {
        // SAFETY: the engine passes `len` elements of `dt` at both pointers, as the user's
        // function expects.
        unsafe { f(input as *mut c_void, inout.cast(), &mut len, &mut h) }
    });
}

fn op_handle(op: Op) -> abi::MPI_Op {
    match op {
        Op::User(i) => abi::make_handle(abi::HandleKind::Direct, abi::ObjectKind::Op, i as u32),
        _ => abi::MPI_OP_NULL,
    }
}

super::mpi! {
    fn MPI_Barrier / PMPI_Barrier(comm: abi::MPI_Comm) {
        barrier("MPI_Barrier", comm, None)
    }

    fn MPI_Ibarrier / PMPI_Ibarrier(comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        barrier("MPI_Ibarrier", comm, Some(request))
    }

    fn MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        bcast("MPI_Bcast", buffer, count, datatype, root, comm, None)
    }

    fn MPI_Ibcast / PMPI_Ibcast(buffer: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        bcast("MPI_Ibcast", buffer, count, datatype, root, comm, Some(request))
    }

    fn MPI_Gather / PMPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        gather("MPI_Gather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, None)
    }

    fn MPI_Igather / PMPI_Igather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        gather("MPI_Igather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Some(request))
    }

    fn MPI_Gatherv / PMPI_Gatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        gatherv("MPI_Gatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, None)
    }

    fn MPI_Igatherv / PMPI_Igatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        gatherv("MPI_Igatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, Some(request))
    }

    fn MPI_Scatter / PMPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        scatter("MPI_Scatter", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, None)
    }

    fn MPI_Iscatter / PMPI_Iscatter(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        scatter("MPI_Iscatter", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Some(request))
    }

    fn MPI_Scatterv / PMPI_Scatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        scatterv("MPI_Scatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, None)
    }

    fn MPI_Iscatterv / PMPI_Iscatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        scatterv("MPI_Iscatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, Some(request))
    }

    fn MPI_Allgather / PMPI_Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        allgather("MPI_Allgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, None, false)
    }

    fn MPI_Iallgather / PMPI_Iallgather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        allgather("MPI_Iallgather", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Some(request), false)
    }

    fn MPI_Allgatherv / PMPI_Allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        allgatherv("MPI_Allgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, None)
    }

    fn MPI_Iallgatherv / PMPI_Iallgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        allgatherv("MPI_Iallgatherv", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Some(request))
    }

    fn MPI_Alltoall / PMPI_Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        allgather("MPI_Alltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, None, true)
    }

    fn MPI_Ialltoall / PMPI_Ialltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        allgather("MPI_Ialltoall", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Some(request), true)
    }

    fn MPI_Alltoallv / PMPI_Alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        alltoallv("MPI_Alltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, None)
    }

    fn MPI_Ialltoallv / PMPI_Ialltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        alltoallv("MPI_Ialltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Some(request))
    }

    fn MPI_Alltoallw / PMPI_Alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm) {
        alltoallw("MPI_Alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, None)
    }

    fn MPI_Ialltoallw / PMPI_Ialltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        alltoallw("MPI_Ialltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Some(request))
    }

    fn MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, root: c_int, comm: abi::MPI_Comm) {
        reduce("MPI_Reduce", sendbuf, recvbuf, count, datatype, op, root, comm, None)
    }

    fn MPI_Ireduce / PMPI_Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduce("MPI_Ireduce", sendbuf, recvbuf, count, datatype, op, root, comm, Some(request))
    }

    fn MPI_Allreduce / PMPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Allreduce", RedCall::Allreduce, sendbuf, recvbuf, count, datatype, op, comm, None)
    }

    fn MPI_Iallreduce / PMPI_Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Iallreduce", RedCall::Allreduce, sendbuf, recvbuf, count, datatype, op, comm, Some(request))
    }

    fn MPI_Scan / PMPI_Scan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Scan", RedCall::Scan, sendbuf, recvbuf, count, datatype, op, comm, None)
    }

    fn MPI_Iscan / PMPI_Iscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Iscan", RedCall::Scan, sendbuf, recvbuf, count, datatype, op, comm, Some(request))
    }

    fn MPI_Exscan / PMPI_Exscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Exscan", RedCall::Exscan, sendbuf, recvbuf, count, datatype, op, comm, None)
    }

    fn MPI_Iexscan / PMPI_Iexscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Iexscan", RedCall::Exscan, sendbuf, recvbuf, count, datatype, op, comm, Some(request))
    }

    fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Reduce_scatter_block", RedCall::ReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, comm, None)
    }

    fn MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Ireduce_scatter_block", RedCall::ReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, comm, Some(request))
    }

    fn MPI_Reduce_scatter / PMPI_Reduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduce_scatter("MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm, None)
    }

    fn MPI_Ireduce_scatter / PMPI_Ireduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduce_scatter("MPI_Ireduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm, Some(request))
    }

    fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op) {
        code(run("MPI_Reduce_local", None, |e| {
            let op = handles::op(op)?;
            if in_place(inbuf) || in_place(inoutbuf) {
                return Err(Error::new(ErrorClass::Buffer, Reason::BadArgument { what: "MPI_IN_PLACE is not allowed in MPI_Reduce_local" }));
            }
            let (d, n) = handles::typed(e.types(), inoutbuf, count, datatype)?;
            handles::typed(e.types(), inbuf, count, datatype)?;
            // SAFETY: MPI requires both buffers to hold `count` instances of the type.
            e.colls().reduce_local(inbuf.cast(), inoutbuf.cast(), n, d, op)
        }))
    }

    fn MPI_Op_create / PMPI_Op_create(user_fn: Option<abi::MPI_User_function>, commute: c_int, op: *mut abi::MPI_Op) {
        code(run("MPI_Op_create", None, |e| {
            let f = user_fn.ok_or(Error::bad_arg("user function is NULL"))?;
            if op.is_null() {
                return Err(Error::bad_arg("op is NULL"));
            }
            let o = e.colls().op_create(UserOp { call: call_user, func: f as usize, commute: commute != 0 })?;
            out(op, op_handle(o))
        }))
    }

    fn MPI_Op_free / PMPI_Op_free(op: *mut abi::MPI_Op) {
        code(run("MPI_Op_free", None, |e| {
            if op.is_null() {
                return Err(Error::bad_arg("op is NULL"));
            }
            match handles::op(*op)? {
                o @ Op::User(_) => e.colls().op_free(o)?,
                _ => return Err(Error::new(ErrorClass::Op, Reason::BadArgument { what: "predefined operations cannot be freed" })),
            }
            *op = abi::MPI_OP_NULL;
            Ok(())
        }))
    }

    fn MPI_Op_commutative / PMPI_Op_commutative(op: abi::MPI_Op, commute: *mut c_int) {
        code(run("MPI_Op_commutative", None, |e| {
            let c = e.colls().op_commutative(handles::op(op)?)?;
            out(commute, c as c_int)
        }))
    }
}
