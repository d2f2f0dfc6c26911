//! MPI-4 sessions: `MPI_Session_init`/`finalize`, process sets, session error handlers,
//! `MPI_Group_from_session_pset` and `MPI_Comm_create_from_group`.
//!
//! A session is a slot of a small table here (its error handler and thread level); the engine
//! under it is the one the world model uses. Whichever comes first — `MPI_Init` or the first
//! `MPI_Session_init` — brings the engine up; it is torn down when the last user is gone
//! (`MPI_Finalize` done and every session finalized). `MPI_Initialized`/`MPI_Finalized` speak of
//! the world model only, as the standard says. Every process of a job is in the one job-wide
//! process set, so the psets are `mpi://WORLD` and `mpi://SELF` (names compared
//! case-insensitively), and a communicator from a group is agreed over the world's context with
//! a tag folded from the string tag, as `MPI_Comm_create_group` does.

use core::ffi::{c_char, c_int, CStr};
use core::fmt::Write;
use core::sync::atomic::{AtomicU32, Ordering};

use super::abi;
use super::env::{bring_up, code, run, run_inside, tear_down_if_unused};
use super::errors::{self, record, write_cstr};
use super::handles::out;
use super::state;
use super::Hooks;
use crate::api::ENGINE;
use crate::comm::{CommId, ErrHandler};
use crate::errhandler::{CommErrhandlerFn, HandlerKind};
use crate::error::{Error, ErrorClass, Reason, Result};

/// Most sessions alive at once in one process.
const MAX_SESSIONS: usize = 64;

/// The process sets every process has.
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// Handles: `MPI_SESSION_NULL`'s bits with the direct kind, a generation and the slot.
const DIRECT: c_int = abi::make_handle(abi::HandleKind::Direct, abi::ObjectKind::Session, 0);

#[derive(Clone, Copy)]
struct Slot {
    live: bool,
    gen: u16,
    errhandler: ErrHandler,
    thread_level: c_int,
}

const EMPTY: Slot = Slot {
    live: false,
    gen: 0,
    errhandler: ErrHandler::Return,
    thread_level: abi::MPI_THREAD_SINGLE,
};

static SESSIONS: spin::Mutex<[Slot; MAX_SESSIONS]> = spin::Mutex::new([EMPTY; MAX_SESSIONS]);
static LIVE: AtomicU32 = AtomicU32::new(0);

/// Sessions alive now.
pub(super) fn live() -> u32 {
    LIVE.load(Ordering::Acquire)
}

/// Whether a live session uses user error handler slot `index`.
pub(super) fn uses_handler(index: u16) -> bool {
    SESSIONS
        .lock()
        .iter()
        .any(|s| s.live && s.errhandler == ErrHandler::User(index))
}

fn bad_session() -> Error {
    Error::new(
        ErrorClass::Session,
        Reason::BadArgument {
            what: "not a live session",
        },
    )
}

fn handle(index: usize, gen: u16) -> abi::MPI_Session {
    DIRECT | (c_int::from(gen & 0xfff) << 8) | index as c_int
}

/// The slot of session handle `h`.
fn slot(h: abi::MPI_Session) -> Result<usize> {
    if abi::handle_kind(h) != abi::HandleKind::Direct
        || abi::handle_object(h) != Some(abi::ObjectKind::Session)
    {
        return Err(bad_session());
    }
    let i = (abi::handle_index(h) & 0xff) as usize;
    let gen = ((abi::handle_index(h) >> 8) & 0xfff) as u16;
    match SESSIONS.lock().get(i) {
        Some(s) if s.live && s.gen & 0xfff == gen => Ok(i),
        _ => Err(bad_session()),
    }
}

/// Reports `err` raised by `func` on session `h` (if live) through its error handler.
fn report(func: &str, h: abi::MPI_Session, err: Error) -> c_int {
    let mut text: heapless::String<256> = heapless::String::new();
    let _ = write!(text, "{func}: {err}");
    let code = record(func, err);
    raise(h, code, &text)
}

/// Invokes session `h`'s error handler for `code` (an invalid session: the world's rule, as
/// for errors not tied to an object).
fn raise(h: abi::MPI_Session, code: c_int, text: &str) -> c_int {
    let Ok(i) = slot(h) else {
        return errors::raise(None, code, text);
    };
    let eh = SESSIONS.lock()[i].errhandler;
    let f: Option<CommErrhandlerFn> = match eh {
        ErrHandler::Return => return code,
        ErrHandler::Fatal | ErrHandler::Abort => None,
        ErrHandler::User(u) => match ENGINE.enter() {
            Some(mut cx) if state::active() => cx.e().objects.errh.func(u),
            _ => None,
        },
    };
    match f {
        None => errors::fatal(code, text),
        Some(f) => {
            let mut handle = h;
            let mut c = code;
            // SAFETY: a handler the user registered for sessions, called as MPI calls it: with
            // the addresses of the session handle and the code. No lock is held.
            unsafe { f(&mut handle, &mut c) };
            code
        }
    }
}

/// Runs `f` on the engine for session handle `h`; errors go to the session's handler.
fn run_session<T>(
    func: &'static str,
    h: abi::MPI_Session,
    f: impl FnOnce(&mut crate::shared::Inside, usize) -> Result<T>,
) -> core::result::Result<T, c_int> {
    let r = match (slot(h), ENGINE.enter()) {
        (Err(e), _) => Err(e),
        (Ok(i), Some(mut cx)) if state::active() => f(&mut cx, i),
        _ => Err(Error::new(ErrorClass::Other, Reason::NotInitialized)),
    };
    r.map_err(|err| report(func, h, err))
}

/// The name of a thread level.
fn level_name(level: c_int) -> &'static str {
    match level {
        abi::MPI_THREAD_SINGLE => "MPI_THREAD_SINGLE",
        abi::MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
        abi::MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
        _ => "MPI_THREAD_MULTIPLE",
    }
}

/// The pset `name` (case-insensitive), as an index of [`PSETS`].
fn pset(name: *const c_char) -> Result<usize> {
    if name.is_null() {
        return Err(Error::bad_arg("pset_name is NULL"));
    }
    // SAFETY: checked non-null; MPI requires a NUL-terminated string.
    let n = unsafe { CStr::from_ptr(name) }.to_bytes();
    PSETS
        .iter()
        .position(|p| p.as_bytes().eq_ignore_ascii_case(n))
        .ok_or(Error::bad_arg(
            "unknown process set (stormpi has mpi://WORLD and mpi://SELF)",
        ))
}

/// `MPI_Session_init`, bound to a platform's hooks by `bind_platform!`: brings the engine up
/// if neither the world model nor another session has.
///
/// # Safety
/// `session` is NULL or points to an `MPI_Session`.
pub unsafe fn session_init(
    hooks: &'static Hooks,
    info: abi::MPI_Info,
    errhandler: abi::MPI_Errhandler,
    session: *mut abi::MPI_Session,
) -> c_int {
    const F: &str = "MPI_Session_init";
    if session.is_null() {
        return errors::report(F, None, Error::bad_arg("session is NULL"));
    }
    // A session asks for MPI_THREAD_SINGLE unless its info says otherwise; an engine already up
    // keeps its level.
    let level = match bring_up(F, hooks, abi::MPI_THREAD_SINGLE) {
        Ok(l) => l,
        Err(c) => return c,
    };
    let r = (|| -> Result<abi::MPI_Session> {
        let mut cx = ENGINE
            .enter()
            .ok_or(Error::new(ErrorClass::Other, Reason::NotInitialized))?;
        let e = cx.e();
        let mut level = level;
        if let Some(id) = super::info::info_or_null(info)? {
            // A request for more than the engine gives is answered with what it gives.
            if let Some(v) = e.objects.infos.get(id, b"thread_level")? {
                let want = [
                    abi::MPI_THREAD_SINGLE,
                    abi::MPI_THREAD_FUNNELED,
                    abi::MPI_THREAD_SERIALIZED,
                    abi::MPI_THREAD_MULTIPLE,
                ]
                .into_iter()
                .find(|&l| level_name(l).as_bytes().eq_ignore_ascii_case(v))
                .ok_or(Error::bad_arg(
                    "info key thread_level names no thread level",
                ))?;
                level = want.min(level);
            }
        }
        let eh = errors::handler_for(e, errhandler, HandlerKind::Session)?;
        let mut t = SESSIONS.lock();
        let i = t.iter().position(|s| !s.live).ok_or(Error::new(
            ErrorClass::Session,
            Reason::Exhausted {
                what: "sessions",
                capacity: MAX_SESSIONS as u32,
                param: "MAX_SESSIONS",
            },
        ))?;
        let gen = t[i].gen.wrapping_add(1) & 0xfff;
        t[i] = Slot {
            live: true,
            gen,
            errhandler: eh,
            thread_level: level,
        };
        LIVE.fetch_add(1, Ordering::AcqRel);
        Ok(handle(i, gen))
    })();
    match r {
        Ok(h) => {
            // SAFETY: checked non-null above.
            unsafe { *session = h };
            abi::MPI_SUCCESS
        }
        Err(err) => {
            let c = errors::report(F, None, err);
            // An engine brought up for nothing goes again.
            let _ = tear_down_if_unused(F);
            c
        }
    }
}

super::mpi! {
    fn MPI_Session_finalize / PMPI_Session_finalize(session: *mut abi::MPI_Session) {
        const F: &str = "MPI_Session_finalize";
        if session.is_null() {
            return errors::report(F, None, Error::bad_arg("session is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Session.
        let h = unsafe { *session };
        let i = match slot(h) {
            Ok(i) => i,
            Err(e) => return report(F, h, e),
        };
        // Messages of the session's communicators must be done (the user frees those
        // communicators first, as the standard asks).
        let r = run_inside(F, None, |cx| cx.block(|e| Ok((!e.p2p.pml.has_pending_work()).then_some(()))));
        if let Err(c) = r {
            return c;
        }
        SESSIONS.lock()[i].live = false;
        LIVE.fetch_sub(1, Ordering::AcqRel);
        // SAFETY: as above.
        unsafe { *session = abi::MPI_SESSION_NULL };
        code(tear_down_if_unused(F))
    }

    fn MPI_Session_get_num_psets / PMPI_Session_get_num_psets(session: abi::MPI_Session, info: abi::MPI_Info, npset_names: *mut c_int) {
        let _ = info;
        code(run_session("MPI_Session_get_num_psets", session, |_, _| {
            // SAFETY: MPI requires `npset_names` to point to an int; `out` refuses NULL.
            unsafe { out(npset_names, PSETS.len() as c_int) }
        }))
    }

    fn MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset(session: abi::MPI_Session, info: abi::MPI_Info, n: c_int, pset_len: *mut c_int, pset_name: *mut c_char) {
        let _ = info;
        code(run_session("MPI_Session_get_nth_pset", session, |_, _| {
            let name = usize::try_from(n).ok().and_then(|n| PSETS.get(n)).ok_or(Error::bad_arg("n is not the index of a process set"))?;
            if pset_len.is_null() {
                return Err(Error::bad_arg("pset_len is NULL"));
            }
            // SAFETY: checked non-null; MPI requires it to point to an int.
            let cap = unsafe { *pset_len };
            if cap <= 0 {
                // The length with the terminating NUL, for the caller to size its buffer.
                // SAFETY: as above.
                unsafe { *pset_len = name.len() as c_int + 1 };
                return Ok(());
            }
            if pset_name.is_null() {
                return Err(Error::bad_arg("pset_name is NULL"));
            }
            let mut len = 0;
            // SAFETY: MPI requires `pset_name` to hold `*pset_len` bytes.
            unsafe { write_cstr(name, pset_name, cap as usize, &mut len) };
            // SAFETY: as above.
            unsafe { *pset_len = name.len() as c_int + 1 };
            Ok(())
        }))
    }

    fn MPI_Session_get_pset_info / PMPI_Session_get_pset_info(session: abi::MPI_Session, pset_name: *const c_char, info: *mut abi::MPI_Info) {
        code(run_session("MPI_Session_get_pset_info", session, |cx, _| {
            let p = pset(pset_name)?;
            if info.is_null() {
                return Err(Error::bad_arg("info is NULL"));
            }
            let e = cx.e();
            let size = if p == 0 { e.size() } else { 1 };
            let mut v: heapless::String<16> = heapless::String::new();
            let _ = write!(v, "{size}");
            let id = e.objects.infos.create()?;
            if let Err(err) = e.objects.infos.set(id, b"mpi_size", v.as_bytes()) {
                let _ = e.objects.infos.free(id);
                return Err(err);
            }
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Info.
            unsafe { out(info, super::info::info_handle(id)) }
        }))
    }

    fn MPI_Session_get_info / PMPI_Session_get_info(session: abi::MPI_Session, info_used: *mut abi::MPI_Info) {
        code(run_session("MPI_Session_get_info", session, |cx, i| {
            if info_used.is_null() {
                return Err(Error::bad_arg("info_used is NULL"));
            }
            let level = SESSIONS.lock()[i].thread_level;
            let e = cx.e();
            let id = e.objects.infos.create()?;
            if let Err(err) = e.objects.infos.set(id, b"thread_level", level_name(level).as_bytes()) {
                let _ = e.objects.infos.free(id);
                return Err(err);
            }
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Info.
            unsafe { out(info_used, super::info::info_handle(id)) }
        }))
    }

    fn MPI_Session_create_errhandler / PMPI_Session_create_errhandler(f: Option<CommErrhandlerFn>, errhandler: *mut abi::MPI_Errhandler) {
        code(run("MPI_Session_create_errhandler", None, |e| {
            let f = f.ok_or(Error::bad_arg("the error handler function is NULL"))?;
            if errhandler.is_null() {
                return Err(Error::bad_arg("errhandler is NULL"));
            }
            let crate::engine::Engine { objects, osc, p2p, io, .. } = e;
            let comms = &p2p.comms;
            let id = objects.errh.create(HandlerKind::Session, f, |i| {
                osc.iter().any(|w| w.errhandler == ErrHandler::User(i))
                    || errors::handler_in_use(comms, i)
                    || io.uses_handler(i)
            })?;
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Errhandler.
            unsafe { out(errhandler, errors::errh_handle(id)) }
        }))
    }

    fn MPI_Session_set_errhandler / PMPI_Session_set_errhandler(session: abi::MPI_Session, errhandler: abi::MPI_Errhandler) {
        code(run_session("MPI_Session_set_errhandler", session, |cx, i| {
            let h = errors::handler_for(cx.e(), errhandler, HandlerKind::Session)?;
            SESSIONS.lock()[i].errhandler = h;
            Ok(())
        }))
    }

    fn MPI_Session_get_errhandler / PMPI_Session_get_errhandler(session: abi::MPI_Session, errhandler: *mut abi::MPI_Errhandler) {
        code(run_session("MPI_Session_get_errhandler", session, |cx, i| {
            if errhandler.is_null() {
                return Err(Error::bad_arg("errhandler is NULL"));
            }
            let h = SESSIONS.lock()[i].errhandler;
            let handle = errors::handler_handle(cx.e(), h)?;
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Errhandler.
            unsafe { out(errhandler, handle) }
        }))
    }

    fn MPI_Session_call_errhandler / PMPI_Session_call_errhandler(session: abi::MPI_Session, errorcode: c_int) {
        if let Err(c) = run_session("MPI_Session_call_errhandler", session, |_, _| Ok(())) {
            return c;
        }
        let mut text: heapless::String<96> = heapless::String::new();
        let _ = write!(text, "MPI_Session_call_errhandler: error code {errorcode}");
        raise(session, errorcode, &text);
        abi::MPI_SUCCESS
    }

    fn MPI_Group_from_session_pset / PMPI_Group_from_session_pset(session: abi::MPI_Session, pset_name: *const c_char, newgroup: *mut abi::MPI_Group) {
        code(run_session("MPI_Group_from_session_pset", session, |cx, _| {
            let p = pset(pset_name)?;
            let e = cx.e();
            let comm = if p == 0 { CommId::WORLD } else { CommId::SELF };
            super::group::comm_group_out(e, comm, newgroup)
        }))
    }

    fn MPI_Comm_create_from_group / PMPI_Comm_create_from_group(group: abi::MPI_Group, stringtag: *const c_char, info: abi::MPI_Info, errhandler: abi::MPI_Errhandler, newcomm: *mut abi::MPI_Comm) {
        code(run_inside("MPI_Comm_create_from_group", None, |cx| {
            if stringtag.is_null() {
                return Err(Error::bad_arg("stringtag is NULL"));
            }
            if newcomm.is_null() {
                return Err(Error::bad_arg("newcomm is NULL"));
            }
            // SAFETY: checked non-null; MPI requires a NUL-terminated string.
            let tag = unsafe { CStr::from_ptr(stringtag) }.to_bytes();
            let eh = errors::comm_handler(cx.e(), errhandler)?;
            let g = super::group::group_of(cx.e(), group)?;
            let new = crate::comm::create::comm_from_group(cx, g, super::group::tag_hash(tag))?;
            let r = match new {
                Some(c) => super::info::new_comm_hints(cx.e(), c, info)
                    .and_then(|()| cx.e().set_errhandler(c, eh))
                    .map(|()| super::handles::comm_handle(c)),
                None => Ok(abi::MPI_COMM_NULL),
            };
            // SAFETY: checked non-null; MPI requires it to point to an MPI_Comm.
            unsafe { out(newcomm, r?) }
        }))
    }
}
