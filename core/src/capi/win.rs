//! One-sided communication: windows, their operations and synchronisation (see [`crate::osc`]),
//! their names, info, groups, attributes and error handlers.
//!
//! A window handle is MPICH's: a direct handle of object kind `Win` whose index holds the pool
//! slot (16 bits) and the low 10 bits of the slot's generation, so a freed window's handle is
//! recognised. Errors go to the window's error handler (`MPI_ERRORS_ARE_FATAL` by default).

use core::ffi::{c_char, c_int, c_void};
use core::fmt::Write as _;
use core::sync::atomic::{AtomicU32, Ordering};

use super::abi::{self, HandleKind, ObjectKind};
use super::errors;
use super::handles::{self, out};
use super::state;
use crate::api::ENGINE;
use crate::comm::{CommId, ErrHandler};
use crate::engine::Engine;
use crate::errhandler::{CommErrhandlerFn, HandlerKind};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::op::Op;
use crate::osc::{self, Buffer, LockKind, RmaOp, Target, WinId, WinMemory};
use crate::platform::Platform;
use crate::pml::request::Status;
use crate::shared::Inside;

const GEN_BITS: u32 = 10;

/// The handle of window `id`.
pub(crate) fn win_handle(id: WinId) -> abi::MPI_Win {
    let gen = id.gen & ((1 << GEN_BITS) - 1);
    abi::make_handle(HandleKind::Direct, ObjectKind::Win, (gen << 16) | id.index)
}

fn bad_win() -> Error {
    Error::new(
        ErrorClass::Win,
        Reason::BadArgument {
            what: "not a live window",
        },
    )
}

/// The live window a handle names.
pub(crate) fn win_id(e: &Engine, h: abi::MPI_Win) -> Result<WinId> {
    if abi::handle_kind(h) != HandleKind::Direct || abi::handle_object(h) != Some(ObjectKind::Win) {
        return Err(bad_win());
    }
    let i = abi::handle_index(h);
    let key = e.osc.at(i & 0xffff).ok_or_else(bad_win)?;
    if key.gen & ((1 << GEN_BITS) - 1) != (i >> 16) {
        return Err(bad_win());
    }
    Ok(key)
}

/// Reports `err` raised by `func` on window `win` through its error handler.
fn report_win(func: &str, win: Option<(WinId, abi::MPI_Win)>, err: Error) -> c_int {
    let Some((id, handle)) = win else {
        return errors::report(func, None, err);
    };
    let mut text: heapless::String<256> = heapless::String::new();
    let _ = write!(text, "{func}: {err}");
    let code = errors::record(func, err);
    raise_win(id, handle, code, &text)
}

/// Invokes window `id`'s error handler for `code`.
fn raise_win(id: WinId, handle: abi::MPI_Win, code: c_int, text: &str) -> c_int {
    let action: Option<Option<CommErrhandlerFn>> = {
        let mut guard = ENGINE.enter();
        match guard.as_mut().map(|cx| cx.e()) {
            Some(e) if state::active() => match e.osc.get(id).map(|w| w.errhandler) {
                Ok(ErrHandler::Return) => None,
                Ok(ErrHandler::User(i)) => Some(e.objects.errh.func(i)),
                _ => Some(None),
            },
            _ => None,
        }
    };
    match action {
        None => code,
        Some(None) => errors::fatal(code, text),
        Some(Some(f)) => {
            let mut h = handle;
            let mut c = code;
            // SAFETY: a handler the user registered for windows, called as MPI calls it: with the
            // addresses of the window handle and the code. No lock is held.
            unsafe { f(&mut h, &mut c) };
            code
        }
    }
}

/// Runs `f` inside the engine on window handle `win`; errors go to the window's handler.
// Out of line: the lean paths that come first in the callers then need few registers.
#[inline(never)]
fn run_win<T>(
    func: &'static str,
    win: abi::MPI_Win,
    f: impl FnOnce(&mut Inside, WinId) -> Result<T>,
) -> core::result::Result<T, c_int> {
    let mut id = None;
    let r = match ENGINE.enter() {
        Some(mut cx) if state::active() => match win_id(cx.e(), win) {
            Ok(w) => {
                id = Some((w, win));
                f(&mut cx, w)
            }
            Err(e) => Err(e),
        },
        _ => Err(Error::new(ErrorClass::Other, Reason::NotInitialized)),
    };
    r.map_err(|err| report_win(func, id, err))
}

fn code(r: core::result::Result<(), c_int>) -> c_int {
    r.err().unwrap_or(abi::MPI_SUCCESS)
}

fn aint(v: abi::MPI_Aint, what: &'static str) -> Result<usize> {
    usize::try_from(v).map_err(|_| Error::new(ErrorClass::Size, Reason::BadArgument { what }))
}

/// Creates a window and writes its handle (and, for `MPI_Win_allocate`, its base).
unsafe fn create(
    func: &'static str,
    comm: abi::MPI_Comm,
    info: abi::MPI_Info,
    memory: WinMemory,
    unit: abi::MPI_Aint,
    win: *mut abi::MPI_Win,
    baseptr: *mut *mut c_void,
) -> c_int {
    let r = super::env::run_comm_inside(func, comm, |cx, c| {
        if win.is_null() {
            return Err(Error::bad_arg("win is NULL"));
        }
        let Some(unit) = u32::try_from(unit).ok().filter(|&u| u > 0) else {
            return Err(Error::new(
                ErrorClass::Disp,
                Reason::BadArgument {
                    what: "the displacement unit must be positive (and below 2^32)",
                },
            ));
        };
        let hints = super::info::info_or_null(info)?;
        let mut memory = memory;
        if let Some(i) = hints {
            cx.e().objects.infos.check(i)?;
            if let WinMemory::Shared { noncontig, .. } = &mut memory {
                *noncontig = cx.e().objects.infos.get(i, b"alloc_shared_noncontig")?
                    == Some(b"true".as_slice());
            }
        }
        let (id, base) = osc::create(cx, c, memory, unit)?;
        let kept = match hints {
            Some(i) => cx.e().objects.infos.dup(i).ok(),
            None => None,
        };
        if let Ok(w) = cx.e().osc.get_mut(id) {
            w.info = kept;
        }
        if !baseptr.is_null() {
            // SAFETY: MPI_Win_allocate's `baseptr` points to a `void *`.
            unsafe { *baseptr = base as *mut c_void };
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Win.
        unsafe { out(win, win_handle(id))? };
        let by_messages = cx.e().osc.get(id).is_ok_and(|w| w.by_messages());
        Ok((id, by_messages, cx.e().platform()))
    });
    code(r.map(|(id, by_messages, platform)| {
        if by_messages {
            passive_start(id, platform);
        }
    }))
}

/// Windows for which the platform's passive-target progress thread runs.
static PASSIVE_WINDOWS: AtomicU32 = AtomicU32::new(0);

/// Asks the platform for its passive-target progress thread for window `id` (just created, its
/// peers reached by messages). Called with the engine let go: the thread may take its lock at
/// once, so from here on every call takes it (before, a single-threaded program's did not).
fn passive_start(id: WinId, platform: &'static dyn Platform) {
    ENGINE.allow_threads();
    if platform.passive_progress_start(passive_round) {
        PASSIVE_WINDOWS.fetch_add(1, Ordering::AcqRel);
        if let Some(mut cx) = ENGINE.enter() {
            if let Ok(w) = cx.e().osc.get_mut(id) {
                w.passive = true;
            }
        }
    }
}

/// A window the thread ran for is gone: the last one stops it (with the engine let go).
fn passive_stop(platform: &'static dyn Platform) {
    if PASSIVE_WINDOWS.fetch_sub(1, Ordering::AcqRel) == 1 {
        platform.passive_progress_stop();
    }
}

/// Stops the passive-target progress thread if windows left it running (`MPI_Finalize` with
/// windows not freed), before the transports close.
pub(crate) fn passive_stop_all() {
    if PASSIVE_WINDOWS.swap(0, Ordering::AcqRel) == 0 {
        return;
    }
    let platform = match ENGINE.enter() {
        Some(mut cx) => cx.e().platform(),
        None => return,
    };
    platform.passive_progress_stop();
}

/// One round of the engine's progress, for the platform's passive-target progress thread: the
/// thread takes the engine's lock like any caller.
fn passive_round() -> usize {
    match ENGINE.enter() {
        Some(mut cx) if state::active() => cx.e().progress(),
        _ => 0,
    }
}

/// `MPI_Win_allocate_shared` and its large-count form.
unsafe fn allocate_shared(
    func: &'static str,
    size: abi::MPI_Aint,
    unit: abi::MPI_Aint,
    info: abi::MPI_Info,
    comm: abi::MPI_Comm,
    baseptr: *mut c_void,
    win: *mut abi::MPI_Win,
) -> c_int {
    let len = match aint(size, "a window's size must not be negative") {
        Ok(l) => l,
        Err(err) => return errors::report(func, None, err),
    };
    if baseptr.is_null() {
        return errors::report(func, None, Error::bad_arg("baseptr is NULL"));
    }
    let memory = WinMemory::Shared {
        len,
        noncontig: false,
    };
    // SAFETY: forwarded under MPI's rules (`baseptr` is a `void **`).
    unsafe { create(func, comm, info, memory, unit, win, baseptr.cast()) }
}

/// Writes a shared part's size and address (`baseptr` is a `void **`).
///
/// # Safety
/// `size` points to an `MPI_Aint` and `baseptr` to a `void *`.
unsafe fn shared_out(
    len: u64,
    size: *mut abi::MPI_Aint,
    at: usize,
    baseptr: *mut c_void,
) -> Result<()> {
    let len = abi::MPI_Aint::try_from(len).map_err(|_| {
        Error::new(
            ErrorClass::Size,
            Reason::BadArgument {
                what: "the part's size does not fit in an MPI_Aint",
            },
        )
    })?;
    // SAFETY: the caller's contract.
    unsafe {
        out(size, len)?;
        out(baseptr.cast::<*mut c_void>(), at as *mut c_void)
    }
}

/// An origin buffer argument.
fn buffer(
    e: &Engine,
    addr: *const c_void,
    count: impl Into<abi::MPI_Count>,
    dt: abi::MPI_Datatype,
) -> Result<Buffer> {
    let (ty, count) = handles::typed(e.types(), addr, count, dt)?;
    Ok(Buffer {
        addr: addr as *mut u8,
        count,
        ty,
    })
}

fn target(
    e: &Engine,
    rank: c_int,
    disp: abi::MPI_Aint,
    count: impl Into<abi::MPI_Count>,
    dt: abi::MPI_Datatype,
) -> Result<Target> {
    // No address to check: the target's memory is not ours.
    let count = handles::check_count(count.into())?;
    let ty = handles::datatype(dt)?;
    e.types().check_committed(ty)?;
    Ok(Target {
        rank,
        // MPI_Aint is `long`: 64 bits on LP64 (a no-op there), 32 bits on ILP32.
        #[allow(clippy::useless_conversion)]
        disp: i64::from(disp),
        count,
        ty,
    })
}

/// Starts an operation; writes the request of a request-based one.
// Out of line: the lean paths that come first in the callers then need few registers.
#[inline(never)]
fn rma(
    func: &'static str,
    win: abi::MPI_Win,
    request: Option<*mut abi::MPI_Request>,
    make: impl FnOnce(&Engine) -> Result<(RmaOp, Target)>,
) -> c_int {
    code(run_win(func, win, |cx, id| {
        if request.is_some_and(|r| r.is_null()) {
            return Err(Error::bad_arg("request is NULL"));
        }
        let (op, t) = make(cx.e())?;
        let r = osc::issue(cx, id, op, t, request.is_some())?;
        if let (Some(p), Some(r)) = (request, r) {
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Request.
            unsafe { out(p, handles::request_handle(r))? };
        }
        Ok(())
    }))
}

fn acc_op(h: abi::MPI_Op) -> Result<Op> {
    handles::op(h)
}

/// Ranks of group `g` in window `id`'s group.
fn ranks_of(
    e: &mut Engine,
    id: WinId,
    g: abi::MPI_Group,
    out_: &mut heapless::Vec<u32, 1024>,
) -> Result<()> {
    let grp = super::group::group_of(e, g)?;
    let comm = e.osc.get(id)?.comm;
    let wg = e.comm(comm)?.group;
    for r in 0..grp.size() {
        let t = e.groups().translate(grp, r as i32, wg)?.ok_or(Error::new(
            ErrorClass::Group,
            Reason::BadArgument {
                what: "a group member outside the window's group",
            },
        ))?;
        out_.push(t)
            .map_err(|_| Error::unsupported("post/start groups of more than 1024 processes"))?;
    }
    Ok(())
}

fn lock_kind(t: c_int) -> Result<LockKind> {
    match t {
        abi::MPI_LOCK_SHARED => Ok(LockKind::Shared),
        abi::MPI_LOCK_EXCLUSIVE => Ok(LockKind::Exclusive),
        _ => Err(Error::new(
            ErrorClass::Locktype,
            Reason::BadArgument {
                what: "neither MPI_LOCK_SHARED nor MPI_LOCK_EXCLUSIVE",
            },
        )),
    }
}

/// `MPI_Win_get_attr` of the predefined window attributes; `None` for another keyval.
pub(crate) fn builtin_attr(win: abi::MPI_Win, keyval: c_int) -> Option<Result<*mut c_void>> {
    if !matches!(
        keyval,
        abi::MPI_WIN_BASE
            | abi::MPI_WIN_SIZE
            | abi::MPI_WIN_DISP_UNIT
            | abi::MPI_WIN_CREATE_FLAVOR
            | abi::MPI_WIN_MODEL
    ) {
        return None;
    }
    let mut guard = ENGINE.enter();
    let Some(e) = guard.as_mut().map(|cx| cx.e()) else {
        return Some(Err(Error::new(ErrorClass::Other, Reason::NotInitialized)));
    };
    let r = win_id(e, win).and_then(|id| e.osc.get(id)).map(|w| {
        let a = w.attrs();
        // SAFETY: `attrs` points into the window's table grant, which never moves while the
        // window lives; only field addresses are taken here.
        unsafe {
            match keyval {
                abi::MPI_WIN_BASE => w.base as *mut c_void,
                abi::MPI_WIN_SIZE => core::ptr::addr_of_mut!((*a).size).cast(),
                abi::MPI_WIN_DISP_UNIT => core::ptr::addr_of_mut!((*a).disp_unit).cast(),
                abi::MPI_WIN_CREATE_FLAVOR => core::ptr::addr_of_mut!((*a).flavor).cast(),
                _ => core::ptr::addr_of_mut!((*a).model).cast(),
            }
        }
    });
    Some(r)
}

/// Runs a lean entry (`osc::lean`) inside the engine on the window `win` names: `false` when MPI
/// is not active or `win` is not a live window, and whatever `f` says otherwise; on `false` the
/// caller takes the general path, which reports what is wrong.
#[inline(always)]
fn lean(win: abi::MPI_Win, f: impl FnOnce(&mut Engine, WinId) -> bool) -> bool {
    let Some(mut cx) = ENGINE.enter() else {
        return false;
    };
    if !state::active() {
        return false;
    }
    let e = cx.e();
    match win_id(e, win) {
        Ok(id) => f(e, id),
        Err(_) => false,
    }
}

/// Runs a lean entry as [`lean`] does for a request-based operation (`MPI_Rput`, ...): only in a
/// passive-target epoch to `rank` (the general path reports any other), and an operation done
/// yields a request complete from the start, stored at `request`. The request is made before
/// the operation, so an operation done is never left without one (nor done twice).
#[inline(always)]
fn lean_request(
    win: abi::MPI_Win,
    request: *mut abi::MPI_Request,
    rank: c_int,
    f: impl FnOnce(&mut Engine, WinId) -> bool,
) -> bool {
    if request.is_null() {
        return false;
    }
    lean(win, |e, id| {
        if !osc::lean::passive(e, id, rank) {
            return false;
        }
        let Ok(r) = e.p2p.pml.requests_mut().completed(Status::PROC_NULL, 0) else {
            return false;
        };
        if !f(e, id) {
            let _ = e.p2p.pml.requests_mut().release(r);
            return false;
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Request.
        unsafe { request.write(handles::request_handle(r)) };
        true
    })
}

/// Runs a lean entry, through [`lean_request`] when `request` is given, else [`lean`].
#[inline(always)]
fn lean_maybe_request(
    win: abi::MPI_Win,
    request: Option<*mut abi::MPI_Request>,
    rank: c_int,
    f: impl FnOnce(&mut Engine, WinId) -> bool,
) -> bool {
    match request {
        Some(r) => lean_request(win, r, rank, f),
        None => lean(win, f),
    }
}

/// The datatype of a lean operation and the bytes `count` of it span: a positive count of a
/// predefined type whose elements are dense (not a pair type with a gap).
#[inline(always)]
fn lean_type(
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
) -> Option<(crate::datatype::Datatype, usize)> {
    let n = usize::try_from(count).ok().filter(|&n| n > 0)?;
    let (d, size) = handles::dense_type(dt)?;
    Some((d, n.checked_mul(size)?))
}

/// `MPI_Put`/`MPI_Get` and their request and large-count forms by the lean path: origin and
/// target are the same count of the same predefined type. Whether it was done.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn put_get_lean(
    get: bool,
    origin_addr: *const c_void,
    origin_count: abi::MPI_Count,
    origin_datatype: abi::MPI_Datatype,
    target_rank: c_int,
    target_disp: abi::MPI_Aint,
    target_count: abi::MPI_Count,
    target_datatype: abi::MPI_Datatype,
    win: abi::MPI_Win,
    request: Option<*mut abi::MPI_Request>,
) -> bool {
    if origin_count != target_count || origin_datatype != target_datatype || origin_addr.is_null() {
        return false;
    }
    let Some((_, len)) = lean_type(origin_count, origin_datatype) else {
        return false;
    };
    let disp = aint_disp(target_disp);
    lean_maybe_request(
        win,
        request,
        target_rank,
        // Inlined: an out-of-line closure would cost the stores of its captures.
        #[inline(always)]
        |e, id| {
            // SAFETY: MPI lends the origin buffer of `count` elements of the type for the call.
            unsafe { osc::lean::copy(e, id, get, origin_addr as *mut u8, target_rank, disp, len) }
        },
    )
}

/// `MPI_Accumulate` (`result_addr` null) or `MPI_Get_accumulate` and their request and
/// large-count forms by the lean path: origin, result and target are the same count of the same
/// predefined type and the operation a predefined one. Whether it was done.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn acc_lean(
    origin_addr: *const c_void,
    origin_count: abi::MPI_Count,
    origin_datatype: abi::MPI_Datatype,
    result_addr: *mut c_void,
    target_rank: c_int,
    target_disp: abi::MPI_Aint,
    target_count: abi::MPI_Count,
    target_datatype: abi::MPI_Datatype,
    op: abi::MPI_Op,
    win: abi::MPI_Win,
    request: Option<*mut abi::MPI_Request>,
) -> bool {
    if origin_count != target_count || origin_datatype != target_datatype {
        return false;
    }
    let (Some((d, len)), Ok(how)) = (lean_type(target_count, target_datatype), acc_op(op)) else {
        return false;
    };
    if origin_addr.is_null() && how != Op::NoOp {
        return false;
    }
    let disp = aint_disp(target_disp);
    lean_maybe_request(
        win,
        request,
        target_rank,
        // Inlined: an out-of-line closure would cost the stores of its captures.
        #[inline(always)]
        |e, id| {
            // SAFETY: MPI lends the origin buffer (unless MPI_NO_OP) and the result buffer (when
            // given) of `count` elements of the type for the call.
            unsafe {
                osc::lean::accumulate(
                    e,
                    id,
                    how,
                    d,
                    origin_addr.cast(),
                    result_addr.cast(),
                    target_rank,
                    disp,
                    len,
                )
            }
        },
    )
}

/// `MPI_Get_accumulate` and its request and large-count forms by the lean path: result and
/// target (and origin, unless the operation is `MPI_NO_OP`, which reads none) are the same count
/// of the same predefined type. Whether it was done.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn get_acc_lean(
    origin_addr: *const c_void,
    origin_count: abi::MPI_Count,
    origin_datatype: abi::MPI_Datatype,
    result_addr: *mut c_void,
    result_count: abi::MPI_Count,
    result_datatype: abi::MPI_Datatype,
    target_rank: c_int,
    target_disp: abi::MPI_Aint,
    target_count: abi::MPI_Count,
    target_datatype: abi::MPI_Datatype,
    op: abi::MPI_Op,
    win: abi::MPI_Win,
    request: Option<*mut abi::MPI_Request>,
) -> bool {
    let no_op = op == abi::MPI_NO_OP;
    if result_count != target_count
        || result_datatype != target_datatype
        || result_addr.is_null()
        || !no_op && (origin_count != target_count || origin_datatype != target_datatype)
    {
        return false;
    }
    let origin = if no_op {
        core::ptr::null()
    } else {
        origin_addr
    };
    acc_lean(
        origin,
        target_count,
        target_datatype,
        result_addr,
        target_rank,
        target_disp,
        target_count,
        target_datatype,
        op,
        win,
        request,
    )
}

/// A target displacement as the engine takes it.
#[inline(always)]
fn aint_disp(disp: abi::MPI_Aint) -> i64 {
    // MPI_Aint is `long`: 64 bits on LP64 (a no-op there), 32 bits on ILP32.
    #[allow(clippy::useless_conversion)]
    i64::from(disp)
}

/// `MPI_Put`/`MPI_Get` and their request and large-count forms (`get`: which).
// Out of line: the lean paths that come first in the callers then need few registers.
#[inline(never)]
fn put_get(
    func: &'static str,
    get: bool,
    origin_addr: *const c_void,
    origin_count: abi::MPI_Count,
    origin_datatype: abi::MPI_Datatype,
    target_rank: c_int,
    target_disp: abi::MPI_Aint,
    target_count: abi::MPI_Count,
    target_datatype: abi::MPI_Datatype,
    win: abi::MPI_Win,
    request: Option<*mut abi::MPI_Request>,
) -> c_int {
    rma(func, win, request, |e| {
        let origin = buffer(e, origin_addr, origin_count, origin_datatype)?;
        let op = if get {
            RmaOp::Get { origin }
        } else {
            RmaOp::Put { origin }
        };
        Ok((
            op,
            target(e, target_rank, target_disp, target_count, target_datatype)?,
        ))
    })
}

/// `MPI_Accumulate` and its request and large-count forms.
// Out of line: the lean paths that come first in the callers then need few registers.
#[inline(never)]
fn accumulate(
    func: &'static str,
    origin_addr: *const c_void,
    origin_count: abi::MPI_Count,
    origin_datatype: abi::MPI_Datatype,
    target_rank: c_int,
    target_disp: abi::MPI_Aint,
    target_count: abi::MPI_Count,
    target_datatype: abi::MPI_Datatype,
    op: abi::MPI_Op,
    win: abi::MPI_Win,
    request: Option<*mut abi::MPI_Request>,
) -> c_int {
    rma(func, win, request, |e| {
        Ok((
            RmaOp::Acc {
                origin: buffer(e, origin_addr, origin_count, origin_datatype)?,
                op: acc_op(op)?,
            },
            target(e, target_rank, target_disp, target_count, target_datatype)?,
        ))
    })
}

/// `MPI_Get_accumulate` and its request and large-count forms.
fn get_accumulate(
    func: &'static str,
    origin_addr: *const c_void,
    origin_count: abi::MPI_Count,
    origin_datatype: abi::MPI_Datatype,
    result_addr: *mut c_void,
    result_count: abi::MPI_Count,
    result_datatype: abi::MPI_Datatype,
    target_rank: c_int,
    target_disp: abi::MPI_Aint,
    target_count: abi::MPI_Count,
    target_datatype: abi::MPI_Datatype,
    op: abi::MPI_Op,
    win: abi::MPI_Win,
    request: Option<*mut abi::MPI_Request>,
) -> c_int {
    rma(func, win, request, |e| {
        let op = acc_op(op)?;
        let origin = if op == Op::NoOp {
            Buffer {
                addr: core::ptr::null_mut(),
                count: 0,
                ty: crate::datatype::Datatype::BYTE,
            }
        } else {
            buffer(e, origin_addr, origin_count, origin_datatype)?
        };
        Ok((
            RmaOp::GetAcc {
                origin,
                result: buffer(e, result_addr, result_count, result_datatype)?,
                op,
            },
            target(e, target_rank, target_disp, target_count, target_datatype)?,
        ))
    })
}

super::mpi! {
    fn MPI_Win_create / PMPI_Win_create(base: *mut c_void, size: abi::MPI_Aint, disp_unit: c_int, info: abi::MPI_Info, comm: abi::MPI_Comm, win: *mut abi::MPI_Win) {
        let len = match aint(size, "a window's size must not be negative") {
            Ok(l) => l,
            Err(err) => return errors::report("MPI_Win_create", None, err),
        };
        if base.is_null() && len > 0 {
            return errors::report("MPI_Win_create", None, Error::new(ErrorClass::Base, Reason::NullBuffer));
        }
        // SAFETY: forwarded under MPI's rules.
        unsafe { create("MPI_Win_create", comm, info, WinMemory::User { base: base as usize, len }, disp_unit.into(), win, core::ptr::null_mut()) }
    }

    fn MPI_Win_allocate / PMPI_Win_allocate(size: abi::MPI_Aint, disp_unit: c_int, info: abi::MPI_Info, comm: abi::MPI_Comm, baseptr: *mut c_void, win: *mut abi::MPI_Win) {
        let len = match aint(size, "a window's size must not be negative") {
            Ok(l) => l,
            Err(err) => return errors::report("MPI_Win_allocate", None, err),
        };
        if baseptr.is_null() {
            return errors::report("MPI_Win_allocate", None, Error::bad_arg("baseptr is NULL"));
        }
        // SAFETY: forwarded under MPI's rules (`baseptr` is a `void **`).
        unsafe { create("MPI_Win_allocate", comm, info, WinMemory::Allocate { len }, disp_unit.into(), win, baseptr.cast()) }
    }

    fn MPI_Win_create_c / PMPI_Win_create_c(base: *mut c_void, size: abi::MPI_Aint, disp_unit: abi::MPI_Aint, info: abi::MPI_Info, comm: abi::MPI_Comm, win: *mut abi::MPI_Win) {
        let len = match aint(size, "a window's size must not be negative") {
            Ok(l) => l,
            Err(err) => return errors::report("MPI_Win_create_c", None, err),
        };
        if base.is_null() && len > 0 {
            return errors::report("MPI_Win_create_c", None, Error::new(ErrorClass::Base, Reason::NullBuffer));
        }
        // SAFETY: forwarded under MPI's rules.
        unsafe { create("MPI_Win_create_c", comm, info, WinMemory::User { base: base as usize, len }, disp_unit, win, core::ptr::null_mut()) }
    }

    fn MPI_Win_allocate_c / PMPI_Win_allocate_c(size: abi::MPI_Aint, disp_unit: abi::MPI_Aint, info: abi::MPI_Info, comm: abi::MPI_Comm, baseptr: *mut c_void, win: *mut abi::MPI_Win) {
        let len = match aint(size, "a window's size must not be negative") {
            Ok(l) => l,
            Err(err) => return errors::report("MPI_Win_allocate_c", None, err),
        };
        if baseptr.is_null() {
            return errors::report("MPI_Win_allocate_c", None, Error::bad_arg("baseptr is NULL"));
        }
        // SAFETY: forwarded under MPI's rules (`baseptr` is a `void **`).
        unsafe { create("MPI_Win_allocate_c", comm, info, WinMemory::Allocate { len }, disp_unit, win, baseptr.cast()) }
    }

    fn MPI_Win_allocate_shared / PMPI_Win_allocate_shared(size: abi::MPI_Aint, disp_unit: c_int, info: abi::MPI_Info, comm: abi::MPI_Comm, baseptr: *mut c_void, win: *mut abi::MPI_Win) {
        // SAFETY: forwarded under MPI's rules (`baseptr` is a `void **`).
        unsafe { allocate_shared("MPI_Win_allocate_shared", size, disp_unit.into(), info, comm, baseptr, win) }
    }

    fn MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c(size: abi::MPI_Aint, disp_unit: abi::MPI_Aint, info: abi::MPI_Info, comm: abi::MPI_Comm, baseptr: *mut c_void, win: *mut abi::MPI_Win) {
        // SAFETY: forwarded under MPI's rules (`baseptr` is a `void **`).
        unsafe { allocate_shared("MPI_Win_allocate_shared_c", size, disp_unit, info, comm, baseptr, win) }
    }

    fn MPI_Win_shared_query / PMPI_Win_shared_query(win: abi::MPI_Win, rank: c_int, size: *mut abi::MPI_Aint, disp_unit: *mut c_int, baseptr: *mut c_void) {
        code(run_win("MPI_Win_shared_query", win, |cx, id| {
            if size.is_null() || disp_unit.is_null() || baseptr.is_null() {
                return Err(Error::bad_arg("size, disp_unit or baseptr is NULL"));
            }
            let (len, unit, at) = osc::shared_query(cx.e(), id, rank)?;
            let unit = c_int::try_from(unit).map_err(|_| Error::new(ErrorClass::Disp, Reason::BadArgument { what: "the displacement unit does not fit in an int (use MPI_Win_shared_query_c)" }))?;
            // SAFETY: checked non-null; MPI requires an MPI_Aint, an int and a `void *` there.
            unsafe { shared_out(len, size, at, baseptr)?; out(disp_unit, unit) }
        }))
    }

    fn MPI_Win_shared_query_c / PMPI_Win_shared_query_c(win: abi::MPI_Win, rank: c_int, size: *mut abi::MPI_Aint, disp_unit: *mut abi::MPI_Aint, baseptr: *mut c_void) {
        code(run_win("MPI_Win_shared_query_c", win, |cx, id| {
            if size.is_null() || disp_unit.is_null() || baseptr.is_null() {
                return Err(Error::bad_arg("size, disp_unit or baseptr is NULL"));
            }
            let (len, unit, at) = osc::shared_query(cx.e(), id, rank)?;
            let unit = abi::MPI_Aint::try_from(unit).map_err(|_| Error::new(ErrorClass::Disp, Reason::BadArgument { what: "the displacement unit does not fit in an MPI_Aint" }))?;
            // SAFETY: checked non-null; MPI requires two MPI_Aints and a `void *` there.
            unsafe { shared_out(len, size, at, baseptr)?; out(disp_unit, unit) }
        }))
    }

    fn MPI_Win_create_dynamic / PMPI_Win_create_dynamic(info: abi::MPI_Info, comm: abi::MPI_Comm, win: *mut abi::MPI_Win) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { create("MPI_Win_create_dynamic", comm, info, WinMemory::Dynamic, 1, win, core::ptr::null_mut()) }
    }

    fn MPI_Win_attach / PMPI_Win_attach(win: abi::MPI_Win, base: *mut c_void, size: abi::MPI_Aint) {
        code(run_win("MPI_Win_attach", win, |cx, id| {
            let len = aint(size, "an attached size must not be negative")?;
            if base.is_null() && len > 0 {
                return Err(Error::new(ErrorClass::RmaAttach, Reason::NullBuffer));
            }
            osc::attach(cx.e(), id, base as usize, len)
        }))
    }

    fn MPI_Win_detach / PMPI_Win_detach(win: abi::MPI_Win, base: *const c_void) {
        code(run_win("MPI_Win_detach", win, |cx, id| osc::detach(cx.e(), id, base as usize)))
    }

    fn MPI_Win_free / PMPI_Win_free(win: *mut abi::MPI_Win) {
        if win.is_null() {
            return errors::report("MPI_Win_free", None, Error::bad_arg("win is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Win.
        let h = unsafe { *win };
        if let Err(c) = super::attr::win_freeing("MPI_Win_free", h) {
            return c;
        }
        let r = run_win("MPI_Win_free", h, |cx, id| {
            let passive = cx.e().osc.get(id).is_ok_and(|w| w.passive);
            let info = osc::free(cx, id)?;
            super::attr::win_freed(cx.e(), h);
            if let Some(i) = info {
                let _ = cx.e().objects.infos.free(i);
            }
            Ok(passive.then(|| cx.e().platform()))
        });
        if let Ok(Some(platform)) = r {
            passive_stop(platform);
        }
        let r = r.map(|_| ());
        if r.is_ok() {
            // SAFETY: as above.
            unsafe { *win = abi::MPI_WIN_NULL };
        }
        code(r)
    }

    fn MPI_Put / PMPI_Put(origin_addr: *const c_void, origin_count: c_int, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: c_int, target_datatype: abi::MPI_Datatype, win: abi::MPI_Win) {
        if put_get_lean(false, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win, None) {
            return abi::MPI_SUCCESS;
        }
        put_get("MPI_Put", false, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win, None)
    }

    fn MPI_Put_c / PMPI_Put_c(origin_addr: *const c_void, origin_count: abi::MPI_Count, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: abi::MPI_Count, target_datatype: abi::MPI_Datatype, win: abi::MPI_Win) {
        if put_get_lean(false, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win, None) {
            return abi::MPI_SUCCESS;
        }
        put_get("MPI_Put_c", false, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win, None)
    }

    fn MPI_Rput / PMPI_Rput(origin_addr: *const c_void, origin_count: c_int, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: c_int, target_datatype: abi::MPI_Datatype, win: abi::MPI_Win, request: *mut abi::MPI_Request) {
        if put_get_lean(false, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win, Some(request)) {
            return abi::MPI_SUCCESS;
        }
        put_get("MPI_Rput", false, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win, Some(request))
    }

    fn MPI_Rput_c / PMPI_Rput_c(origin_addr: *const c_void, origin_count: abi::MPI_Count, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: abi::MPI_Count, target_datatype: abi::MPI_Datatype, win: abi::MPI_Win, request: *mut abi::MPI_Request) {
        if put_get_lean(false, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win, Some(request)) {
            return abi::MPI_SUCCESS;
        }
        put_get("MPI_Rput_c", false, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win, Some(request))
    }

    fn MPI_Get / PMPI_Get(origin_addr: *mut c_void, origin_count: c_int, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: c_int, target_datatype: abi::MPI_Datatype, win: abi::MPI_Win) {
        if put_get_lean(true, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win, None) {
            return abi::MPI_SUCCESS;
        }
        put_get("MPI_Get", true, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win, None)
    }

    fn MPI_Get_c / PMPI_Get_c(origin_addr: *mut c_void, origin_count: abi::MPI_Count, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: abi::MPI_Count, target_datatype: abi::MPI_Datatype, win: abi::MPI_Win) {
        if put_get_lean(true, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win, None) {
            return abi::MPI_SUCCESS;
        }
        put_get("MPI_Get_c", true, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win, None)
    }

    fn MPI_Rget / PMPI_Rget(origin_addr: *mut c_void, origin_count: c_int, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: c_int, target_datatype: abi::MPI_Datatype, win: abi::MPI_Win, request: *mut abi::MPI_Request) {
        if put_get_lean(true, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win, Some(request)) {
            return abi::MPI_SUCCESS;
        }
        put_get("MPI_Rget", true, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win, Some(request))
    }

    fn MPI_Rget_c / PMPI_Rget_c(origin_addr: *mut c_void, origin_count: abi::MPI_Count, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: abi::MPI_Count, target_datatype: abi::MPI_Datatype, win: abi::MPI_Win, request: *mut abi::MPI_Request) {
        if put_get_lean(true, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win, Some(request)) {
            return abi::MPI_SUCCESS;
        }
        put_get("MPI_Rget_c", true, origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win, Some(request))
    }

    fn MPI_Accumulate / PMPI_Accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: c_int, target_datatype: abi::MPI_Datatype, op: abi::MPI_Op, win: abi::MPI_Win) {
        if acc_lean(origin_addr, origin_count.into(), origin_datatype, core::ptr::null_mut(), target_rank, target_disp, target_count.into(), target_datatype, op, win, None) {
            return abi::MPI_SUCCESS;
        }
        accumulate("MPI_Accumulate", origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, op, win, None)
    }

    fn MPI_Accumulate_c / PMPI_Accumulate_c(origin_addr: *const c_void, origin_count: abi::MPI_Count, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: abi::MPI_Count, target_datatype: abi::MPI_Datatype, op: abi::MPI_Op, win: abi::MPI_Win) {
        if acc_lean(origin_addr, origin_count, origin_datatype, core::ptr::null_mut(), target_rank, target_disp, target_count, target_datatype, op, win, None) {
            return abi::MPI_SUCCESS;
        }
        accumulate("MPI_Accumulate_c", origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, op, win, None)
    }

    fn MPI_Raccumulate / PMPI_Raccumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: c_int, target_datatype: abi::MPI_Datatype, op: abi::MPI_Op, win: abi::MPI_Win, request: *mut abi::MPI_Request) {
        if acc_lean(origin_addr, origin_count.into(), origin_datatype, core::ptr::null_mut(), target_rank, target_disp, target_count.into(), target_datatype, op, win, Some(request)) {
            return abi::MPI_SUCCESS;
        }
        accumulate("MPI_Raccumulate", origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, op, win, Some(request))
    }

    fn MPI_Raccumulate_c / PMPI_Raccumulate_c(origin_addr: *const c_void, origin_count: abi::MPI_Count, origin_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: abi::MPI_Count, target_datatype: abi::MPI_Datatype, op: abi::MPI_Op, win: abi::MPI_Win, request: *mut abi::MPI_Request) {
        if acc_lean(origin_addr, origin_count, origin_datatype, core::ptr::null_mut(), target_rank, target_disp, target_count, target_datatype, op, win, Some(request)) {
            return abi::MPI_SUCCESS;
        }
        accumulate("MPI_Raccumulate_c", origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, op, win, Some(request))
    }

    fn MPI_Get_accumulate / PMPI_Get_accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: abi::MPI_Datatype, result_addr: *mut c_void, result_count: c_int, result_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: c_int, target_datatype: abi::MPI_Datatype, op: abi::MPI_Op, win: abi::MPI_Win) {
        if get_acc_lean(origin_addr, origin_count.into(), origin_datatype, result_addr, result_count.into(), result_datatype, target_rank, target_disp, target_count.into(), target_datatype, op, win, None) {
            return abi::MPI_SUCCESS;
        }
        get_accumulate("MPI_Get_accumulate", origin_addr, origin_count.into(), origin_datatype, result_addr, result_count.into(), result_datatype, target_rank, target_disp, target_count.into(), target_datatype, op, win, None)
    }

    fn MPI_Get_accumulate_c / PMPI_Get_accumulate_c(origin_addr: *const c_void, origin_count: abi::MPI_Count, origin_datatype: abi::MPI_Datatype, result_addr: *mut c_void, result_count: abi::MPI_Count, result_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: abi::MPI_Count, target_datatype: abi::MPI_Datatype, op: abi::MPI_Op, win: abi::MPI_Win) {
        if get_acc_lean(origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype, target_rank, target_disp, target_count, target_datatype, op, win, None) {
            return abi::MPI_SUCCESS;
        }
        get_accumulate("MPI_Get_accumulate_c", origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype, target_rank, target_disp, target_count, target_datatype, op, win, None)
    }

    fn MPI_Rget_accumulate / PMPI_Rget_accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: abi::MPI_Datatype, result_addr: *mut c_void, result_count: c_int, result_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: c_int, target_datatype: abi::MPI_Datatype, op: abi::MPI_Op, win: abi::MPI_Win, request: *mut abi::MPI_Request) {
        if get_acc_lean(origin_addr, origin_count.into(), origin_datatype, result_addr, result_count.into(), result_datatype, target_rank, target_disp, target_count.into(), target_datatype, op, win, Some(request)) {
            return abi::MPI_SUCCESS;
        }
        get_accumulate("MPI_Rget_accumulate", origin_addr, origin_count.into(), origin_datatype, result_addr, result_count.into(), result_datatype, target_rank, target_disp, target_count.into(), target_datatype, op, win, Some(request))
    }

    fn MPI_Rget_accumulate_c / PMPI_Rget_accumulate_c(origin_addr: *const c_void, origin_count: abi::MPI_Count, origin_datatype: abi::MPI_Datatype, result_addr: *mut c_void, result_count: abi::MPI_Count, result_datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, target_count: abi::MPI_Count, target_datatype: abi::MPI_Datatype, op: abi::MPI_Op, win: abi::MPI_Win, request: *mut abi::MPI_Request) {
        if get_acc_lean(origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype, target_rank, target_disp, target_count, target_datatype, op, win, Some(request)) {
            return abi::MPI_SUCCESS;
        }
        get_accumulate("MPI_Rget_accumulate_c", origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype, target_rank, target_disp, target_count, target_datatype, op, win, Some(request))
    }

    fn MPI_Fetch_and_op / PMPI_Fetch_and_op(origin_addr: *const c_void, result_addr: *mut c_void, datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, op: abi::MPI_Op, win: abi::MPI_Win) {
        // SUM, REPLACE and NO_OP on an integer: the CPU's fetch-add, swap or load straight away.
        if let Some(width) = handles::builtin_int(datatype) {
            let how = match op {
                abi::MPI_SUM => Some(Op::Sum),
                abi::MPI_REPLACE => Some(Op::Replace),
                abi::MPI_NO_OP => Some(Op::NoOp),
                _ => None,
            };
            if let Some(how) = how {
                if !result_addr.is_null() && (how == Op::NoOp || !origin_addr.is_null()) && lean(win, #[inline(always)] |e, id| {
                    // SAFETY: MPI lends the origin (unless MPI_NO_OP) and result buffers of one
                    // element of the type.
                    unsafe { osc::lean::fetch_op(e, id, how, width, origin_addr.cast(), result_addr.cast(), target_rank, aint_disp(target_disp)) }
                }) {
                    return abi::MPI_SUCCESS;
                }
            }
        }
        let lean_fop = !result_addr.is_null() && match (lean_type(1, datatype), acc_op(op)) {
            (Some((d, len)), Ok(how)) if how == Op::NoOp || !origin_addr.is_null() => lean(win, |e, id| {
                // SAFETY: MPI lends the origin (unless MPI_NO_OP) and result buffers of one
                // element of the type.
                unsafe { osc::lean::accumulate(e, id, how, d, origin_addr.cast(), result_addr.cast(), target_rank, aint_disp(target_disp), len) }
            }),
            _ => false,
        };
        if lean_fop {
            return abi::MPI_SUCCESS;
        }
        rma("MPI_Fetch_and_op", win, None, |e| {
            let op = acc_op(op)?;
            let d = handles::datatype(datatype)?;
            if !d.is_predefined() {
                return Err(Error::new(ErrorClass::Type, Reason::InvalidDatatype));
            }
            let origin = if op == Op::NoOp {
                Buffer { addr: core::ptr::null_mut(), count: 0, ty: d }
            } else {
                buffer(e, origin_addr, 1, datatype)?
            };
            Ok((
                RmaOp::GetAcc { origin, result: buffer(e, result_addr, 1, datatype)?, op },
                target(e, target_rank, target_disp, 1, datatype)?,
            ))
        })
    }

    fn MPI_Compare_and_swap / PMPI_Compare_and_swap(origin_addr: *const c_void, compare_addr: *const c_void, result_addr: *mut c_void, datatype: abi::MPI_Datatype, target_rank: c_int, target_disp: abi::MPI_Aint, win: abi::MPI_Win) {
        let lean_cas = !origin_addr.is_null() && !compare_addr.is_null() && !result_addr.is_null() && match lean_type(1, datatype) {
            Some((d, _)) => lean(win, |e, id| {
                // SAFETY: MPI lends the three buffers of one element of the type.
                unsafe { osc::lean::compare_and_swap(e, id, d, origin_addr.cast(), compare_addr.cast(), result_addr.cast(), target_rank, aint_disp(target_disp)) }
            }),
            None => false,
        };
        if lean_cas {
            return abi::MPI_SUCCESS;
        }
        rma("MPI_Compare_and_swap", win, None, |e| {
            let d = handles::datatype(datatype)?;
            if !d.is_predefined() || !d.is_contiguous() {
                return Err(Error::new(ErrorClass::Type, Reason::InvalidDatatype));
            }
            if origin_addr.is_null() || compare_addr.is_null() {
                return Err(Error::new(ErrorClass::Buffer, Reason::NullBuffer));
            }
            Ok((
                RmaOp::Cas { origin: origin_addr.cast(), compare: compare_addr.cast(), result: buffer(e, result_addr, 1, datatype)? },
                target(e, target_rank, target_disp, 1, datatype)?,
            ))
        })
    }

    fn MPI_Win_fence / PMPI_Win_fence(assert: c_int, win: abi::MPI_Win) {
        code(run_win("MPI_Win_fence", win, |cx, id| osc::fence(cx, id, assert)))
    }

    fn MPI_Win_lock / PMPI_Win_lock(lock_type: c_int, rank: c_int, assert: c_int, win: abi::MPI_Win) {
        code(run_win("MPI_Win_lock", win, |cx, id| osc::lock(cx, id, lock_kind(lock_type)?, rank, assert)))
    }

    fn MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, win: abi::MPI_Win) {
        code(run_win("MPI_Win_unlock", win, |cx, id| osc::unlock(cx, id, rank)))
    }

    fn MPI_Win_lock_all / PMPI_Win_lock_all(assert: c_int, win: abi::MPI_Win) {
        code(run_win("MPI_Win_lock_all", win, |cx, id| osc::lock_all(cx, id, assert)))
    }

    fn MPI_Win_unlock_all / PMPI_Win_unlock_all(win: abi::MPI_Win) {
        code(run_win("MPI_Win_unlock_all", win, osc::unlock_all))
    }

    fn MPI_Win_flush / PMPI_Win_flush(rank: c_int, win: abi::MPI_Win) {
        if lean(win, |e, id| osc::lean::flush(e, id, rank)) {
            return abi::MPI_SUCCESS;
        }
        code(run_win("MPI_Win_flush", win, |cx, id| osc::flush(cx, id, Some(rank))))
    }

    fn MPI_Win_flush_all / PMPI_Win_flush_all(win: abi::MPI_Win) {
        code(run_win("MPI_Win_flush_all", win, |cx, id| osc::flush(cx, id, None)))
    }

    fn MPI_Win_flush_local / PMPI_Win_flush_local(rank: c_int, win: abi::MPI_Win) {
        code(run_win("MPI_Win_flush_local", win, |cx, id| osc::flush_local(cx, id, Some(rank))))
    }

    fn MPI_Win_flush_local_all / PMPI_Win_flush_local_all(win: abi::MPI_Win) {
        code(run_win("MPI_Win_flush_local_all", win, |cx, id| osc::flush_local(cx, id, None)))
    }

    fn MPI_Win_sync / PMPI_Win_sync(win: abi::MPI_Win) {
        code(run_win("MPI_Win_sync", win, |cx, id| osc::sync(cx.e(), id)))
    }

    fn MPI_Win_post / PMPI_Win_post(group: abi::MPI_Group, assert: c_int, win: abi::MPI_Win) {
        code(run_win("MPI_Win_post", win, |cx, id| {
            let mut ranks = heapless::Vec::new();
            ranks_of(cx.e(), id, group, &mut ranks)?;
            osc::post(cx, id, &ranks, assert)
        }))
    }

    fn MPI_Win_start / PMPI_Win_start(group: abi::MPI_Group, assert: c_int, win: abi::MPI_Win) {
        code(run_win("MPI_Win_start", win, |cx, id| {
            let mut ranks = heapless::Vec::new();
            ranks_of(cx.e(), id, group, &mut ranks)?;
            osc::start(cx, id, &ranks, assert)
        }))
    }

    fn MPI_Win_complete / PMPI_Win_complete(win: abi::MPI_Win) {
        code(run_win("MPI_Win_complete", win, osc::complete))
    }

    fn MPI_Win_wait / PMPI_Win_wait(win: abi::MPI_Win) {
        code(run_win("MPI_Win_wait", win, |cx, id| osc::wait(cx, id, true).map(|_| ())))
    }

    fn MPI_Win_test / PMPI_Win_test(win: abi::MPI_Win, flag: *mut c_int) {
        code(run_win("MPI_Win_test", win, |cx, id| {
            if flag.is_null() {
                return Err(Error::bad_arg("flag is NULL"));
            }
            let done = osc::wait(cx, id, false)?;
            // SAFETY: checked non-null; MPI requires it to point to an int.
            unsafe { out(flag, c_int::from(done)) }
        }))
    }

    fn MPI_Win_get_group / PMPI_Win_get_group(win: abi::MPI_Win, group: *mut abi::MPI_Group) {
        code(run_win("MPI_Win_get_group", win, |cx, id| {
            if group.is_null() {
                return Err(Error::bad_arg("group is NULL"));
            }
            let comm: CommId = cx.e().osc.get(id)?.comm;
            super::group::comm_group_out(cx.e(), comm, group)
        }))
    }

    fn MPI_Win_set_name / PMPI_Win_set_name(win: abi::MPI_Win, win_name: *const c_char) {
        code(run_win("MPI_Win_set_name", win, |cx, id| {
            if win_name.is_null() {
                return Err(Error::bad_arg("win_name is NULL"));
            }
            // SAFETY: MPI requires a NUL-terminated string.
            let s = unsafe { core::ffi::CStr::from_ptr(win_name) }.to_bytes();
            let w = cx.e().osc.get_mut(id)?;
            let n = s.len().min(w.name.len() - 1);
            w.name[..n].copy_from_slice(&s[..n]);
            w.name_len = n;
            Ok(())
        }))
    }

    fn MPI_Win_get_name / PMPI_Win_get_name(win: abi::MPI_Win, win_name: *mut c_char, resultlen: *mut c_int) {
        code(run_win("MPI_Win_get_name", win, |cx, id| {
            if win_name.is_null() || resultlen.is_null() {
                return Err(Error::bad_arg("win_name or resultlen is NULL"));
            }
            let w = cx.e().osc.get(id)?;
            // SAFETY: MPI requires room for MPI_MAX_OBJECT_NAME characters and an int.
            unsafe { errors::write_bytes(&w.name[..w.name_len], win_name, w.name.len(), resultlen) };
            Ok(())
        }))
    }

    fn MPI_Win_set_info / PMPI_Win_set_info(win: abi::MPI_Win, info: abi::MPI_Info) {
        code(run_win("MPI_Win_set_info", win, |cx, id| {
            let i = super::info::info_or_null(info)?.ok_or(Error::new(ErrorClass::Info, Reason::BadArgument { what: "MPI_INFO_NULL" }))?;
            let e = cx.e();
            let new = e.objects.infos.dup(i)?;
            let old = e.osc.get_mut(id)?.info.replace(new);
            if let Some(o) = old {
                let _ = e.objects.infos.free(o);
            }
            Ok(())
        }))
    }

    fn MPI_Win_get_info / PMPI_Win_get_info(win: abi::MPI_Win, info_used: *mut abi::MPI_Info) {
        code(run_win("MPI_Win_get_info", win, |cx, id| {
            if info_used.is_null() {
                return Err(Error::bad_arg("info_used is NULL"));
            }
            let e = cx.e();
            let new = match e.osc.get(id)?.info {
                Some(i) => e.objects.infos.dup(i)?,
                None => e.objects.infos.create()?,
            };
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Info.
            unsafe { out(info_used, super::info::info_handle(new)) }
        }))
    }

    fn MPI_Win_create_errhandler / PMPI_Win_create_errhandler(f: Option<CommErrhandlerFn>, errhandler: *mut abi::MPI_Errhandler) {
        code(super::env::run("MPI_Win_create_errhandler", None, |e| {
            let f = f.ok_or(Error::bad_arg("the error handler function is NULL"))?;
            if errhandler.is_null() {
                return Err(Error::bad_arg("errhandler is NULL"));
            }
            let Engine { objects, osc, p2p, io, .. } = e;
            let comms = &p2p.comms;
            let id = objects.errh.create(HandlerKind::Win, f, |i| {
                osc.iter().any(|w| w.errhandler == ErrHandler::User(i))
                    || errors::handler_in_use(comms, i)
                    || io.uses_handler(i)
            })?;
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Errhandler.
            unsafe { out(errhandler, errors::errh_handle(id)) }
        }))
    }

    fn MPI_Win_set_errhandler / PMPI_Win_set_errhandler(win: abi::MPI_Win, errhandler: abi::MPI_Errhandler) {
        code(run_win("MPI_Win_set_errhandler", win, |cx, id| {
            let e = cx.e();
            let h = errors::handler_for(e, errhandler, HandlerKind::Win)?;
            e.osc.get_mut(id)?.errhandler = h;
            Ok(())
        }))
    }

    fn MPI_Win_get_errhandler / PMPI_Win_get_errhandler(win: abi::MPI_Win, errhandler: *mut abi::MPI_Errhandler) {
        code(run_win("MPI_Win_get_errhandler", win, |cx, id| {
            if errhandler.is_null() {
                return Err(Error::bad_arg("errhandler is NULL"));
            }
            let e = cx.e();
            let h = e.osc.get(id)?.errhandler;
            let handle = errors::handler_handle(e, h)?;
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Errhandler.
            unsafe { out(errhandler, handle) }
        }))
    }

    fn MPI_Win_call_errhandler / PMPI_Win_call_errhandler(win: abi::MPI_Win, errorcode: c_int) {
        let id = match run_win("MPI_Win_call_errhandler", win, |_, id| Ok(id)) {
            Ok(id) => id,
            Err(c) => return c,
        };
        let mut text: heapless::String<96> = heapless::String::new();
        let _ = write!(text, "MPI_Win_call_errhandler: error code {errorcode}");
        raise_win(id, win, errorcode, &text);
        abi::MPI_SUCCESS
    }
}
