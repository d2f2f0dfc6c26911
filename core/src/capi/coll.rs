//! Collective operations, blocking and non-blocking, and user-defined reduction operations.
//!
//! Every collective builds an engine [`Call`] from its C arguments (checking counts and types;
//! arguments significant only at the root are not looked at elsewhere) and runs it blocking, or
//! starts it and hands back a request that the `MPI_Wait`/`MPI_Test` family completes.

use core::ffi::{c_int, c_void};

use super::abi;
use super::env::{code, run, run_comm_inside};
use super::handles::{self, out};
use crate::coll::ints::Ints;
use crate::coll::{Buf, Call, Mode, NBlocks, UserOp, VBuf, WBuf};
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
fn not_aliased(sb: *const c_void, rb: *const c_void, count: abi::MPI_Count) -> Result<()> {
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
fn buf(e: &Engine, p: *const c_void, count: abi::MPI_Count, dt: abi::MPI_Datatype) -> Result<Buf> {
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
    count: abi::MPI_Count,
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
    counts: Ints,
    displs: Ints,
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

fn wbuf(p: *const c_void, counts: Ints, displs: Ints, types: *const abi::MPI_Datatype) -> WBuf {
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
    count: abi::MPI_Count,
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
        counts: Ints::NULL,
        displs: Ints::NULL,
        dt: Datatype::BYTE,
    }
}

/// How a collective entry runs its call.
#[derive(Clone, Copy)]
enum How {
    /// To its end (`MPI_Bcast`).
    Blocking,
    /// Started, its request written here (`MPI_Ibcast`).
    NonBlocking(*mut abi::MPI_Request),
    /// Made into an inactive persistent request, written here (`MPI_Bcast_init`); each
    /// `MPI_Start` begins it as the non-blocking form would.
    Persistent(*mut abi::MPI_Request),
}

/// Runs collective `func` blocking, starts it or makes it a persistent request, as `how`
/// says, writing the request.
unsafe fn start(
    func: &'static str,
    comm: abi::MPI_Comm,
    how: How,
    build: impl FnOnce(&Engine, CommId) -> Result<Call>,
) -> c_int {
    code(run_comm_inside(func, comm, |cx, c| {
        let request = match how {
            How::Blocking => None,
            How::NonBlocking(r) | How::Persistent(r) => Some(r),
        };
        if request.is_some_and(|r| r.is_null()) {
            return Err(Error::bad_arg("request is NULL"));
        }
        let call = build(cx.e(), c)?;
        let id = match how {
            // SAFETY: MPI's rules for collective buffers and arrays (for a persistent request:
            // lent until it is freed), which the caller follows.
            How::Persistent(_) => Some(unsafe { cx.e().colls().persist(c, call)? }),
            // SAFETY: as above.
            How::NonBlocking(_) => unsafe {
                crate::coll::collective(cx, c, call, Mode::NonBlocking { scope: 0 })?
            },
            // SAFETY: as above.
            How::Blocking => unsafe { crate::coll::collective(cx, c, call, Mode::Blocking)? },
        };
        if let (Some(r), Some(id)) = (request, id) {
            // SAFETY: checked non-null above.
            unsafe { *r = handles::request_handle(id) };
        }
        Ok(())
    }))
}

unsafe fn barrier(func: &'static str, comm: abi::MPI_Comm, rq: How) -> c_int {
    start(func, comm, rq, |_, _| Ok(Call::Barrier))
}

unsafe fn bcast(
    func: &'static str,
    b: *mut c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: How,
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
    sc: abi::MPI_Count,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rc: abi::MPI_Count,
    rt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: How,
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
    sc: abi::MPI_Count,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: Ints,
    displs: Ints,
    rt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: How,
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
    sc: abi::MPI_Count,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rc: abi::MPI_Count,
    rt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: How,
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
    scs: Ints,
    displs: Ints,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rc: abi::MPI_Count,
    rt: abi::MPI_Datatype,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: How,
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
    sc: abi::MPI_Count,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rc: abi::MPI_Count,
    rt: abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: How,
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
    sc: abi::MPI_Count,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: Ints,
    displs: Ints,
    rt: abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: How,
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
    scs: Ints,
    sd: Ints,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: Ints,
    rd: Ints,
    rt: abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: How,
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
    scs: Ints,
    sd: Ints,
    sts: *const abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: Ints,
    rd: Ints,
    rts: *const abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: How,
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
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    op: abi::MPI_Op,
    comm: abi::MPI_Comm,
    rq: How,
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
                i64::try_from(n).unwrap_or(i64::MAX),
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
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    op: abi::MPI_Op,
    root: c_int,
    comm: abi::MPI_Comm,
    rq: How,
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
    counts: Ints,
    dt: abi::MPI_Datatype,
    op: abi::MPI_Op,
    comm: abi::MPI_Comm,
    rq: How,
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

/// The neighbourhood collectives' shapes.
#[derive(Clone, Copy)]
enum NShape {
    Allgather,
    Alltoall,
}

/// `MPI_(I)neighbor_allgather` and `alltoall`, every form.
#[allow(clippy::too_many_arguments)]
unsafe fn neighbor(
    func: &'static str,
    shape: NShape,
    sb: *const c_void,
    sc: abi::MPI_Count,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rc: abi::MPI_Count,
    rt: abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: How,
) -> c_int {
    start(func, comm, rq, |e, _| {
        let send = buf(e, sb, sc, st)?;
        Ok(Call::Neighbor {
            send: match shape {
                NShape::Allgather => NBlocks::Same(send),
                NShape::Alltoall => NBlocks::Each(send),
            },
            recv: NBlocks::Each(buf(e, rb, rc, rt)?),
        })
    })
}

/// `MPI_(I)neighbor_allgatherv`, every form.
#[allow(clippy::too_many_arguments)]
unsafe fn neighbor_allgatherv(
    func: &'static str,
    sb: *const c_void,
    sc: abi::MPI_Count,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: Ints,
    displs: Ints,
    rt: abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: How,
) -> c_int {
    start(func, comm, rq, |e, _| {
        Ok(Call::Neighbor {
            send: NBlocks::Same(buf(e, sb, sc, st)?),
            recv: NBlocks::V(vbuf(e, rb, rcs, displs, rt)?),
        })
    })
}

/// `MPI_(I)neighbor_alltoallv`, every form.
#[allow(clippy::too_many_arguments)]
unsafe fn neighbor_alltoallv(
    func: &'static str,
    sb: *const c_void,
    scs: Ints,
    sd: Ints,
    st: abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: Ints,
    rd: Ints,
    rt: abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: How,
) -> c_int {
    start(func, comm, rq, |e, _| {
        Ok(Call::Neighbor {
            send: NBlocks::V(vbuf(e, sb, scs, sd, st)?),
            recv: NBlocks::V(vbuf(e, rb, rcs, rd, rt)?),
        })
    })
}

/// `MPI_(I)neighbor_alltoallw`, every form.
#[allow(clippy::too_many_arguments)]
unsafe fn neighbor_alltoallw(
    func: &'static str,
    sb: *const c_void,
    scs: Ints,
    sd: Ints,
    sts: *const abi::MPI_Datatype,
    rb: *mut c_void,
    rcs: Ints,
    rd: Ints,
    rts: *const abi::MPI_Datatype,
    comm: abi::MPI_Comm,
    rq: How,
) -> c_int {
    start(func, comm, rq, |_, _| {
        Ok(Call::Neighbor {
            send: NBlocks::W(wbuf(sb, scs, sd, sts)),
            recv: NBlocks::W(wbuf(rb, rcs, rd, rts)),
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

/// Calls a C `MPI_User_function_c` (`func`, from `MPI_Op_create_c`) for the engine: as
/// [`call_user`], with an `MPI_Count` length.
unsafe fn call_user_c(func: usize, input: *const u8, inout: *mut u8, len: i32, dt: Datatype) {
    // SAFETY: `func` was an `MPI_User_function_c` when MPI_Op_create_c stored it.
    let f: abi::MPI_User_function_c = unsafe { core::mem::transmute(func) };
    let mut len = len as abi::MPI_Count;
    let mut h = handles::datatype_handle(dt);
    crate::api::ENGINE.user_callback(|| {
        // SAFETY: the engine passes `len` elements of `dt` at both pointers, as the user's
        // function expects.
        unsafe { f(input as *mut c_void, inout.cast(), &mut len, &mut h) }
    });
}

/// `MPI_Reduce_local(_c)`.
unsafe fn reduce_local(
    func: &'static str,
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: abi::MPI_Count,
    datatype: abi::MPI_Datatype,
    op: abi::MPI_Op,
) -> c_int {
    code(run(func, None, |e| {
        let op = handles::op(op)?;
        if in_place(inbuf) || in_place(inoutbuf) {
            return Err(Error::new(
                ErrorClass::Buffer,
                Reason::BadArgument {
                    what: "MPI_IN_PLACE is not allowed in MPI_Reduce_local",
                },
            ));
        }
        let (d, n) = handles::typed(e.types(), inoutbuf, count, datatype)?;
        handles::typed(e.types(), inbuf, count, datatype)?;
        // SAFETY: MPI requires both buffers to hold `count` instances of the type.
        unsafe {
            e.colls()
                .reduce_local(inbuf.cast(), inoutbuf.cast(), n, d, op)
        }
    }))
}

fn op_handle(op: Op) -> abi::MPI_Op {
    match op {
        Op::User(i) => abi::make_handle(abi::HandleKind::Direct, abi::ObjectKind::Op, i as u32),
        _ => abi::MPI_OP_NULL,
    }
}

super::mpi! {
    fn MPI_Barrier / PMPI_Barrier(comm: abi::MPI_Comm) {
        barrier("MPI_Barrier", comm, How::Blocking)
    }

    fn MPI_Ibarrier / PMPI_Ibarrier(comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        barrier("MPI_Ibarrier", comm, How::NonBlocking(request))
    }

    fn MPI_Barrier_init / PMPI_Barrier_init(comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        barrier("MPI_Barrier_init", comm, How::Persistent(request))
    }

    fn MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        bcast("MPI_Bcast", buffer, count.into(), datatype, root, comm, How::Blocking)
    }

    fn MPI_Bcast_c / PMPI_Bcast_c(buffer: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        bcast("MPI_Bcast_c", buffer, count, datatype, root, comm, How::Blocking)
    }

    fn MPI_Ibcast / PMPI_Ibcast(buffer: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        bcast("MPI_Ibcast", buffer, count.into(), datatype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Ibcast_c / PMPI_Ibcast_c(buffer: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        bcast("MPI_Ibcast_c", buffer, count, datatype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Bcast_init / PMPI_Bcast_init(buffer: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        bcast("MPI_Bcast_init", buffer, count.into(), datatype, root, comm, How::Persistent(request))
    }

    fn MPI_Bcast_init_c / PMPI_Bcast_init_c(buffer: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        bcast("MPI_Bcast_init_c", buffer, count, datatype, root, comm, How::Persistent(request))
    }

    fn MPI_Gather / PMPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        gather("MPI_Gather", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, How::Blocking)
    }

    fn MPI_Gather_c / PMPI_Gather_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        gather("MPI_Gather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, How::Blocking)
    }

    fn MPI_Igather / PMPI_Igather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        gather("MPI_Igather", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Igather_c / PMPI_Igather_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        gather("MPI_Igather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Gather_init / PMPI_Gather_init(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        gather("MPI_Gather_init", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, How::Persistent(request))
    }

    fn MPI_Gather_init_c / PMPI_Gather_init_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        gather("MPI_Gather_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, How::Persistent(request))
    }

    fn MPI_Gatherv / PMPI_Gatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        gatherv("MPI_Gatherv", sendbuf, sendcount.into(), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(displs), recvtype, root, comm, How::Blocking)
    }

    fn MPI_Gatherv_c / PMPI_Gatherv_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        gatherv("MPI_Gatherv_c", sendbuf, sendcount, sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(displs), recvtype, root, comm, How::Blocking)
    }

    fn MPI_Igatherv / PMPI_Igatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        gatherv("MPI_Igatherv", sendbuf, sendcount.into(), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(displs), recvtype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Igatherv_c / PMPI_Igatherv_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        gatherv("MPI_Igatherv_c", sendbuf, sendcount, sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(displs), recvtype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Gatherv_init / PMPI_Gatherv_init(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        gatherv("MPI_Gatherv_init", sendbuf, sendcount.into(), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(displs), recvtype, root, comm, How::Persistent(request))
    }

    fn MPI_Gatherv_init_c / PMPI_Gatherv_init_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        gatherv("MPI_Gatherv_init_c", sendbuf, sendcount, sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(displs), recvtype, root, comm, How::Persistent(request))
    }

    fn MPI_Scatter / PMPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        scatter("MPI_Scatter", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, How::Blocking)
    }

    fn MPI_Scatter_c / PMPI_Scatter_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        scatter("MPI_Scatter_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, How::Blocking)
    }

    fn MPI_Iscatter / PMPI_Iscatter(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        scatter("MPI_Iscatter", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Iscatter_c / PMPI_Iscatter_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        scatter("MPI_Iscatter_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Scatter_init / PMPI_Scatter_init(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        scatter("MPI_Scatter_init", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, How::Persistent(request))
    }

    fn MPI_Scatter_init_c / PMPI_Scatter_init_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        scatter("MPI_Scatter_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, How::Persistent(request))
    }

    fn MPI_Scatterv / PMPI_Scatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        scatterv("MPI_Scatterv", sendbuf, Ints::Int(sendcounts), Ints::Int(displs), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, How::Blocking)
    }

    fn MPI_Scatterv_c / PMPI_Scatterv_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm) {
        scatterv("MPI_Scatterv_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(displs), sendtype, recvbuf, recvcount, recvtype, root, comm, How::Blocking)
    }

    fn MPI_Iscatterv / PMPI_Iscatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        scatterv("MPI_Iscatterv", sendbuf, Ints::Int(sendcounts), Ints::Int(displs), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Iscatterv_c / PMPI_Iscatterv_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        scatterv("MPI_Iscatterv_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(displs), sendtype, recvbuf, recvcount, recvtype, root, comm, How::NonBlocking(request))
    }

    fn MPI_Scatterv_init / PMPI_Scatterv_init(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        scatterv("MPI_Scatterv_init", sendbuf, Ints::Int(sendcounts), Ints::Int(displs), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, How::Persistent(request))
    }

    fn MPI_Scatterv_init_c / PMPI_Scatterv_init_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        scatterv("MPI_Scatterv_init_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(displs), sendtype, recvbuf, recvcount, recvtype, root, comm, How::Persistent(request))
    }

    fn MPI_Allgather / PMPI_Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        allgather("MPI_Allgather", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::Blocking, false)
    }

    fn MPI_Allgather_c / PMPI_Allgather_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        allgather("MPI_Allgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::Blocking, false)
    }

    fn MPI_Iallgather / PMPI_Iallgather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        allgather("MPI_Iallgather", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::NonBlocking(request), false)
    }

    fn MPI_Iallgather_c / PMPI_Iallgather_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        allgather("MPI_Iallgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::NonBlocking(request), false)
    }

    fn MPI_Allgather_init / PMPI_Allgather_init(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        allgather("MPI_Allgather_init", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::Persistent(request), false)
    }

    fn MPI_Allgather_init_c / PMPI_Allgather_init_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        allgather("MPI_Allgather_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::Persistent(request), false)
    }

    fn MPI_Allgatherv / PMPI_Allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        allgatherv("MPI_Allgatherv", sendbuf, sendcount.into(), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(displs), recvtype, comm, How::Blocking)
    }

    fn MPI_Allgatherv_c / PMPI_Allgatherv_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        allgatherv("MPI_Allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(displs), recvtype, comm, How::Blocking)
    }

    fn MPI_Iallgatherv / PMPI_Iallgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        allgatherv("MPI_Iallgatherv", sendbuf, sendcount.into(), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(displs), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Iallgatherv_c / PMPI_Iallgatherv_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        allgatherv("MPI_Iallgatherv_c", sendbuf, sendcount, sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(displs), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Allgatherv_init / PMPI_Allgatherv_init(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        allgatherv("MPI_Allgatherv_init", sendbuf, sendcount.into(), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(displs), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        allgatherv("MPI_Allgatherv_init_c", sendbuf, sendcount, sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(displs), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Alltoall / PMPI_Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        allgather("MPI_Alltoall", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::Blocking, true)
    }

    fn MPI_Alltoall_c / PMPI_Alltoall_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        allgather("MPI_Alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::Blocking, true)
    }

    fn MPI_Ialltoall / PMPI_Ialltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        allgather("MPI_Ialltoall", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::NonBlocking(request), true)
    }

    fn MPI_Ialltoall_c / PMPI_Ialltoall_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        allgather("MPI_Ialltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::NonBlocking(request), true)
    }

    fn MPI_Alltoall_init / PMPI_Alltoall_init(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        allgather("MPI_Alltoall_init", sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::Persistent(request), true)
    }

    fn MPI_Alltoall_init_c / PMPI_Alltoall_init_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        allgather("MPI_Alltoall_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::Persistent(request), true)
    }

    fn MPI_Alltoallv / PMPI_Alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        alltoallv("MPI_Alltoallv", sendbuf, Ints::Int(sendcounts), Ints::Int(sdispls), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(rdispls), recvtype, comm, How::Blocking)
    }

    fn MPI_Alltoallv_c / PMPI_Alltoallv_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        alltoallv("MPI_Alltoallv_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtype, comm, How::Blocking)
    }

    fn MPI_Ialltoallv / PMPI_Ialltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        alltoallv("MPI_Ialltoallv", sendbuf, Ints::Int(sendcounts), Ints::Int(sdispls), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(rdispls), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Ialltoallv_c / PMPI_Ialltoallv_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        alltoallv("MPI_Ialltoallv_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Alltoallv_init / PMPI_Alltoallv_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        alltoallv("MPI_Alltoallv_init", sendbuf, Ints::Int(sendcounts), Ints::Int(sdispls), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(rdispls), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        alltoallv("MPI_Alltoallv_init_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Alltoallw / PMPI_Alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm) {
        alltoallw("MPI_Alltoallw", sendbuf, Ints::Int(sendcounts), Ints::Int(sdispls), sendtypes, recvbuf, Ints::Int(recvcounts), Ints::Int(rdispls), recvtypes, comm, How::Blocking)
    }

    fn MPI_Alltoallw_c / PMPI_Alltoallw_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm) {
        alltoallw("MPI_Alltoallw_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtypes, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtypes, comm, How::Blocking)
    }

    fn MPI_Ialltoallw / PMPI_Ialltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        alltoallw("MPI_Ialltoallw", sendbuf, Ints::Int(sendcounts), Ints::Int(sdispls), sendtypes, recvbuf, Ints::Int(recvcounts), Ints::Int(rdispls), recvtypes, comm, How::NonBlocking(request))
    }

    fn MPI_Ialltoallw_c / PMPI_Ialltoallw_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        alltoallw("MPI_Ialltoallw_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtypes, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtypes, comm, How::NonBlocking(request))
    }

    fn MPI_Alltoallw_init / PMPI_Alltoallw_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        alltoallw("MPI_Alltoallw_init", sendbuf, Ints::Int(sendcounts), Ints::Int(sdispls), sendtypes, recvbuf, Ints::Int(recvcounts), Ints::Int(rdispls), recvtypes, comm, How::Persistent(request))
    }

    fn MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        alltoallw("MPI_Alltoallw_init_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtypes, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtypes, comm, How::Persistent(request))
    }

    fn MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, root: c_int, comm: abi::MPI_Comm) {
        reduce("MPI_Reduce", sendbuf, recvbuf, count.into(), datatype, op, root, comm, How::Blocking)
    }

    fn MPI_Reduce_c / PMPI_Reduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, root: c_int, comm: abi::MPI_Comm) {
        reduce("MPI_Reduce_c", sendbuf, recvbuf, count, datatype, op, root, comm, How::Blocking)
    }

    fn MPI_Ireduce / PMPI_Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduce("MPI_Ireduce", sendbuf, recvbuf, count.into(), datatype, op, root, comm, How::NonBlocking(request))
    }

    fn MPI_Ireduce_c / PMPI_Ireduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, root: c_int, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduce("MPI_Ireduce_c", sendbuf, recvbuf, count, datatype, op, root, comm, How::NonBlocking(request))
    }

    fn MPI_Reduce_init / PMPI_Reduce_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduce("MPI_Reduce_init", sendbuf, recvbuf, count.into(), datatype, op, root, comm, How::Persistent(request))
    }

    fn MPI_Reduce_init_c / PMPI_Reduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, root: c_int, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduce("MPI_Reduce_init_c", sendbuf, recvbuf, count, datatype, op, root, comm, How::Persistent(request))
    }

    fn MPI_Allreduce / PMPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Allreduce", RedCall::Allreduce, sendbuf, recvbuf, count.into(), datatype, op, comm, How::Blocking)
    }

    fn MPI_Allreduce_c / PMPI_Allreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Allreduce_c", RedCall::Allreduce, sendbuf, recvbuf, count, datatype, op, comm, How::Blocking)
    }

    fn MPI_Iallreduce / PMPI_Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Iallreduce", RedCall::Allreduce, sendbuf, recvbuf, count.into(), datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Iallreduce_c / PMPI_Iallreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Iallreduce_c", RedCall::Allreduce, sendbuf, recvbuf, count, datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Allreduce_init / PMPI_Allreduce_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduction("MPI_Allreduce_init", RedCall::Allreduce, sendbuf, recvbuf, count.into(), datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Allreduce_init_c / PMPI_Allreduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduction("MPI_Allreduce_init_c", RedCall::Allreduce, sendbuf, recvbuf, count, datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Scan / PMPI_Scan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Scan", RedCall::Scan, sendbuf, recvbuf, count.into(), datatype, op, comm, How::Blocking)
    }

    fn MPI_Scan_c / PMPI_Scan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Scan_c", RedCall::Scan, sendbuf, recvbuf, count, datatype, op, comm, How::Blocking)
    }

    fn MPI_Iscan / PMPI_Iscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Iscan", RedCall::Scan, sendbuf, recvbuf, count.into(), datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Iscan_c / PMPI_Iscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Iscan_c", RedCall::Scan, sendbuf, recvbuf, count, datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Scan_init / PMPI_Scan_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduction("MPI_Scan_init", RedCall::Scan, sendbuf, recvbuf, count.into(), datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Scan_init_c / PMPI_Scan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduction("MPI_Scan_init_c", RedCall::Scan, sendbuf, recvbuf, count, datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Exscan / PMPI_Exscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Exscan", RedCall::Exscan, sendbuf, recvbuf, count.into(), datatype, op, comm, How::Blocking)
    }

    fn MPI_Exscan_c / PMPI_Exscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Exscan_c", RedCall::Exscan, sendbuf, recvbuf, count, datatype, op, comm, How::Blocking)
    }

    fn MPI_Iexscan / PMPI_Iexscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Iexscan", RedCall::Exscan, sendbuf, recvbuf, count.into(), datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Iexscan_c / PMPI_Iexscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Iexscan_c", RedCall::Exscan, sendbuf, recvbuf, count, datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Exscan_init / PMPI_Exscan_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduction("MPI_Exscan_init", RedCall::Exscan, sendbuf, recvbuf, count.into(), datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Exscan_init_c / PMPI_Exscan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduction("MPI_Exscan_init_c", RedCall::Exscan, sendbuf, recvbuf, count, datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Reduce_scatter_block", RedCall::ReduceScatterBlock, sendbuf, recvbuf, recvcount.into(), datatype, op, comm, How::Blocking)
    }

    fn MPI_Reduce_scatter_block_c / PMPI_Reduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduction("MPI_Reduce_scatter_block_c", RedCall::ReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, comm, How::Blocking)
    }

    fn MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Ireduce_scatter_block", RedCall::ReduceScatterBlock, sendbuf, recvbuf, recvcount.into(), datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Ireduce_scatter_block_c / PMPI_Ireduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduction("MPI_Ireduce_scatter_block_c", RedCall::ReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduction("MPI_Reduce_scatter_block_init", RedCall::ReduceScatterBlock, sendbuf, recvbuf, recvcount.into(), datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Reduce_scatter_block_init_c / PMPI_Reduce_scatter_block_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduction("MPI_Reduce_scatter_block_init_c", RedCall::ReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Reduce_scatter / PMPI_Reduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduce_scatter("MPI_Reduce_scatter", sendbuf, recvbuf, Ints::Int(recvcounts), datatype, op, comm, How::Blocking)
    }

    fn MPI_Reduce_scatter_c / PMPI_Reduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm) {
        reduce_scatter("MPI_Reduce_scatter_c", sendbuf, recvbuf, Ints::Wide(recvcounts), datatype, op, comm, How::Blocking)
    }

    fn MPI_Ireduce_scatter / PMPI_Ireduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduce_scatter("MPI_Ireduce_scatter", sendbuf, recvbuf, Ints::Int(recvcounts), datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Ireduce_scatter_c / PMPI_Ireduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        reduce_scatter("MPI_Ireduce_scatter_c", sendbuf, recvbuf, Ints::Wide(recvcounts), datatype, op, comm, How::NonBlocking(request))
    }

    fn MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduce_scatter("MPI_Reduce_scatter_init", sendbuf, recvbuf, Ints::Int(recvcounts), datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        reduce_scatter("MPI_Reduce_scatter_init_c", sendbuf, recvbuf, Ints::Wide(recvcounts), datatype, op, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_allgather_c / PMPI_Neighbor_allgather_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        neighbor("MPI_Neighbor_allgather_c", NShape::Allgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::Blocking)
    }

    fn MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor("MPI_Ineighbor_allgather", NShape::Allgather, sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Ineighbor_allgather_c / PMPI_Ineighbor_allgather_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor("MPI_Ineighbor_allgather_c", NShape::Allgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor("MPI_Neighbor_allgather_init", NShape::Allgather, sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_allgather_init_c / PMPI_Neighbor_allgather_init_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor("MPI_Neighbor_allgather_init_c", NShape::Allgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        neighbor_allgatherv("MPI_Neighbor_allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(displs), recvtype, comm, How::Blocking)
    }

    fn MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor_allgatherv("MPI_Ineighbor_allgatherv", sendbuf, sendcount.into(), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(displs), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor_allgatherv("MPI_Ineighbor_allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(displs), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor_allgatherv("MPI_Neighbor_allgatherv_init", sendbuf, sendcount.into(), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(displs), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, displs: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor_allgatherv("MPI_Neighbor_allgatherv_init_c", sendbuf, sendcount, sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(displs), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_alltoall_c / PMPI_Neighbor_alltoall_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        neighbor("MPI_Neighbor_alltoall_c", NShape::Alltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::Blocking)
    }

    fn MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor("MPI_Ineighbor_alltoall", NShape::Alltoall, sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Ineighbor_alltoall_c / PMPI_Ineighbor_alltoall_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor("MPI_Ineighbor_alltoall_c", NShape::Alltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init(sendbuf: *const c_void, sendcount: c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor("MPI_Neighbor_alltoall_init", NShape::Alltoall, sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_alltoall_init_c / PMPI_Neighbor_alltoall_init_c(sendbuf: *const c_void, sendcount: abi::MPI_Count, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcount: abi::MPI_Count, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor("MPI_Neighbor_alltoall_init_c", NShape::Alltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm) {
        neighbor_alltoallv("MPI_Neighbor_alltoallv_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtype, comm, How::Blocking)
    }

    fn MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor_alltoallv("MPI_Ineighbor_alltoallv", sendbuf, Ints::Int(sendcounts), Ints::Int(sdispls), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(rdispls), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor_alltoallv("MPI_Ineighbor_alltoallv_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtype, comm, How::NonBlocking(request))
    }

    fn MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor_alltoallv("MPI_Neighbor_alltoallv_init", sendbuf, Ints::Int(sendcounts), Ints::Int(sdispls), sendtype, recvbuf, Ints::Int(recvcounts), Ints::Int(rdispls), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtype: abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtype: abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor_alltoallv("MPI_Neighbor_alltoallv_init_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtype, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtype, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm) {
        neighbor_alltoallw("MPI_Neighbor_alltoallw_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtypes, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtypes, comm, How::Blocking)
    }

    fn MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const abi::MPI_Aint, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const abi::MPI_Aint, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor_alltoallw("MPI_Ineighbor_alltoallw", sendbuf, Ints::Int(sendcounts), Ints::aint(sdispls), sendtypes, recvbuf, Ints::Int(recvcounts), Ints::aint(rdispls), recvtypes, comm, How::NonBlocking(request))
    }

    fn MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm, request: *mut abi::MPI_Request) {
        neighbor_alltoallw("MPI_Ineighbor_alltoallw_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtypes, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtypes, comm, How::NonBlocking(request))
    }

    fn MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const abi::MPI_Aint, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const abi::MPI_Aint, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor_alltoallw("MPI_Neighbor_alltoallw_init", sendbuf, Ints::Int(sendcounts), Ints::aint(sdispls), sendtypes, recvbuf, Ints::Int(recvcounts), Ints::aint(rdispls), recvtypes, comm, How::Persistent(request))
    }

    fn MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const abi::MPI_Count, sdispls: *const abi::MPI_Aint, sendtypes: *const abi::MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const abi::MPI_Count, rdispls: *const abi::MPI_Aint, recvtypes: *const abi::MPI_Datatype, comm: abi::MPI_Comm, info: abi::MPI_Info, request: *mut abi::MPI_Request) {
        let _ = info;
        neighbor_alltoallw("MPI_Neighbor_alltoallw_init_c", sendbuf, Ints::Wide(sendcounts), Ints::aint(sdispls), sendtypes, recvbuf, Ints::Wide(recvcounts), Ints::aint(rdispls), recvtypes, comm, How::Persistent(request))
    }

    fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: abi::MPI_Datatype, op: abi::MPI_Op) {
        reduce_local("MPI_Reduce_local", inbuf, inoutbuf, count.into(), datatype, op)
    }

    fn MPI_Reduce_local_c / PMPI_Reduce_local_c(inbuf: *const c_void, inoutbuf: *mut c_void, count: abi::MPI_Count, datatype: abi::MPI_Datatype, op: abi::MPI_Op) {
        reduce_local("MPI_Reduce_local_c", inbuf, inoutbuf, count, datatype, op)
    }

    fn MPI_Op_create_c / PMPI_Op_create_c(user_fn: Option<abi::MPI_User_function_c>, commute: c_int, op: *mut abi::MPI_Op) {
        code(run("MPI_Op_create_c", None, |e| {
            let f = user_fn.ok_or(Error::bad_arg("user function is NULL"))?;
            if op.is_null() {
                return Err(Error::bad_arg("op is NULL"));
            }
            let o = e.colls().op_create(UserOp { call: call_user_c, func: f as usize, commute: commute != 0 })?;
            out(op, op_handle(o))
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
