//! Error codes, messages and error handlers.
//!
//! An error code is its class, as Open MPI returns them: programs that compare a return value
//! with `MPI_ERR_TRUNCATE` work. The specific message of the latest error of each class — e.g.
//! "MPI_Send: MPI_ERR_RANK: rank 7 is out of range (communicator size 4)" — is kept, and
//! `MPI_Error_string` gives it rather than only the class's description.

use core::ffi::{c_char, c_int};
use core::fmt::Write;

use super::abi;
use super::env::{code, run, run_comm};
use super::handles::{self, out};
use super::state::{self, STATE};
use crate::api::ENGINE;
use crate::comm::{CommId, CommTable, ErrHandler};
use crate::engine::Engine;
use crate::errhandler::{CommErrhandlerFn, ErrhId, HandlerKind, FIRST_USER_CODE};
use crate::error::{Error, ErrorClass, Reason, Result};

const CLASSES: usize = 80;

/// The latest message of each error class.
pub(crate) struct ErrorRing {
    last: [heapless::String<256>; CLASSES],
}

impl ErrorRing {
    pub(crate) const fn new() -> ErrorRing {
        ErrorRing {
            last: [const { heapless::String::new() }; CLASSES],
        }
    }

    /// Remembers `text` as the latest error of `class`; returns the code.
    fn record(&mut self, class: ErrorClass, text: &str) -> c_int {
        self.record_code(class.code(), text)
    }

    /// Remembers `text` as the latest error of predefined class `code` (others are not kept).
    fn record_code(&mut self, code: c_int, text: &str) -> c_int {
        if !(0..CLASSES as c_int).contains(&code) {
            return code;
        }
        let e = &mut self.last[code as usize];
        e.clear();
        let _ = e.push_str(&text[..floor_char_boundary(text, e.capacity())]);
        code
    }

    fn lookup(&self, code: c_int) -> Option<&str> {
        let e = self.last.get(code as usize)?;
        (!e.is_empty()).then_some(e.as_str())
    }
}

fn floor_char_boundary(s: &str, max: usize) -> usize {
    let mut n = s.len().min(max);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    n
}

/// The class of an error code, if it is one: a predefined class, or a class or code the
/// program added (`MPI_Add_error_class`/`_code`).
pub(crate) fn class_of(code: c_int) -> Option<c_int> {
    if abi::error_class_name(code).is_some() {
        return Some(code);
    }
    if code < FIRST_USER_CODE {
        return None;
    }
    ENGINE.enter()?.e().objects.errh.class_of(code)
}

/// Records `err` raised by `func` without invoking an error handler; returns its code (for the
/// per-request codes of multiple-completion calls).
pub(crate) fn record(func: &str, err: Error) -> c_int {
    let mut text: heapless::String<256> = heapless::String::new();
    let _ = write!(text, "{func}: {err}");
    STATE.lock().errors.record(err.class, &text)
}

/// Reports `err` raised by `func` (on `comm`, or `MPI_COMM_WORLD` if none applies): records it
/// and invokes the communicator's error handler — returns its code (`MPI_ERRORS_RETURN`, or
/// after a user's handler returned) or ends the job (`MPI_ERRORS_ARE_FATAL`).
pub(crate) fn report(func: &str, comm: Option<CommId>, err: Error) -> c_int {
    report_ref(func, comm, &err)
}

/// [`report`] of an error left where it lies.
#[cold]
#[inline(never)]
pub(crate) fn report_ref(func: &str, comm: Option<CommId>, err: &Error) -> c_int {
    let mut text: heapless::String<256> = heapless::String::new();
    let _ = write!(text, "{func}: {err}");
    let code = STATE.lock().errors.record(err.class, &text);
    raise(comm, code, &text)
}

/// Reports error code `code` (any class or code, e.g. one a user's callback returned) raised by
/// `func` on `comm`, described by `what`.
pub(crate) fn report_code(func: &str, comm: Option<CommId>, code: c_int, what: &str) -> c_int {
    let mut text: heapless::String<256> = heapless::String::new();
    let _ = write!(text, "{func}: {what} (error code {code})");
    STATE.lock().errors.record_code(code, &text);
    raise(comm, code, &text)
}

/// What an error handler does.
enum Action {
    Return,
    Fatal,
    User(CommErrhandlerFn, CommId),
}

/// Invokes the error handler of `comm` (`MPI_COMM_WORLD` if none applies or it is not a live
/// communicator) for `code`. A user's handler is called with no lock held (it may call MPI) and
/// gets the communicator's handle and the code; the code is returned when it returns.
pub(crate) fn raise(comm: Option<CommId>, code: c_int, text: &str) -> c_int {
    let action = {
        let mut guard = ENGINE.enter();
        match guard.as_mut().map(|cx| cx.e()) {
            Some(e) if state::active() => {
                let (id, handler) = comm
                    .and_then(|c| e.comm(c).ok().map(|x| (c, x.errhandler)))
                    .or_else(|| {
                        e.comm(CommId::WORLD)
                            .ok()
                            .map(|x| (CommId::WORLD, x.errhandler))
                    })
                    .unwrap_or((CommId::WORLD, ErrHandler::Fatal));
                match handler {
                    ErrHandler::Return => Action::Return,
                    ErrHandler::Fatal | ErrHandler::Abort => Action::Fatal,
                    ErrHandler::User(i) => match e.objects.errh.func(i) {
                        Some(f) => Action::User(f, id),
                        None => Action::Fatal,
                    },
                }
            }
            // Before init or after finalize there is no job to end: return the code.
            _ => Action::Return,
        }
    };
    match action {
        Action::Return => code,
        Action::Fatal => fatal(code, text),
        Action::User(f, id) => {
            let mut handle = handles::comm_handle(id);
            let mut c = code;
            // SAFETY: a handler the user registered, called as MPI calls it: with the addresses
            // of the communicator handle and the code. No lock is held.
            unsafe { f(&mut handle, &mut c) };
            code
        }
    }
}

/// Prints `text` and ends the whole job.
pub(crate) fn fatal(code: c_int, text: &str) -> ! {
    let mut line: heapless::String<320> = heapless::String::new();
    let rank = ENGINE.enter().map(|mut cx| cx.e().rank());
    match rank {
        Some(r) => {
            let _ = write!(
                line,
                "stormpi: rank {r}: {text} (MPI_ERRORS_ARE_FATAL: aborting the job)"
            );
        }
        None => {
            let _ = write!(line, "stormpi: {text}");
        }
    }
    let hooks = state::hooks();
    if let Some(h) = hooks {
        (h.eprint)(&line);
    }
    // An exit status is 8 bits: a code that would read as success (or an added code, above
    // MPI_ERR_LASTCODE) ends the job with 1.
    let status = if (1..=255).contains(&code) { code } else { 1 };
    let mut guard = ENGINE.enter();
    match (guard.as_mut().map(|cx| cx.e()), hooks) {
        (Some(e), _) => e.abort(status, text),
        (None, Some(h)) => (h.exit)(status),
        (None, None) => loop {
            core::hint::spin_loop();
        },
    }
}

/// `MPI_ERR_UNSUPPORTED_OPERATION` for a function stormpi does not implement yet.
pub(crate) fn unsupported(func: &'static str) -> c_int {
    // MPI-IO and the tools interface report errors by return code, never through handlers.
    if func.starts_with("MPI_File_")
        || func.starts_with("MPI_T_")
        || func.starts_with("MPI_Register_datarep")
    {
        if func.starts_with("MPI_T_") {
            return abi::MPI_T_ERR_NOT_SUPPORTED;
        }
        // Recorded, so that `MPI_Error_string` of the code names this function, not the last
        // one that reported the class.
        return record(
            func,
            Error::new(
                ErrorClass::UnsupportedOperation,
                Reason::Unsupported { what: func },
            ),
        );
    }
    report(
        func,
        None,
        Error::new(
            ErrorClass::UnsupportedOperation,
            Reason::Unsupported { what: func },
        ),
    )
}

/// Copies `text` as a C string into `out` (which holds `cap` bytes), setting `*len`.
pub(crate) unsafe fn write_cstr(text: &str, out: *mut c_char, cap: usize, len: *mut c_int) {
    // SAFETY: the caller's contract.
    unsafe { write_bytes(text.as_bytes(), out, cap, len) }
}

/// Copies `text` as a C string into `out` (which holds `cap` bytes), setting `*len`.
pub(crate) unsafe fn write_bytes(text: &[u8], out: *mut c_char, cap: usize, len: *mut c_int) {
    let n = text.len().min(cap.saturating_sub(1));
    if !out.is_null() {
        // SAFETY: MPI requires `out` to hold `cap` bytes; `n < cap` leaves room for the NUL.
        unsafe {
            core::ptr::copy_nonoverlapping(text.as_ptr(), out.cast::<u8>(), n);
            *out.add(n) = 0;
        }
    }
    if !len.is_null() {
        // SAFETY: MPI requires `len` to point to an int.
        unsafe { *len = n as c_int };
    }
}

super::mpi! {
    fn MPI_Error_class / PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) {
        match class_of(errorcode) {
            Some(c) if !errorclass.is_null() => {
                // SAFETY: checked non-null; MPI requires it to point to an int.
                unsafe { *errorclass = c };
                abi::MPI_SUCCESS
            }
            _ => report("MPI_Error_class", None, Error::bad_arg("not an error code")),
        }
    }

    fn MPI_Error_string / PMPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) {
        let Some(class) = class_of(errorcode) else {
            return report("MPI_Error_string", None, Error::bad_arg("not an error code"));
        };
        if errorcode >= FIRST_USER_CODE {
            // An added code: the string the program gave it (empty if none).
            let mut buf = [0u8; abi::MPI_MAX_ERROR_STRING as usize];
            let n = {
                let mut guard = ENGINE.enter();
                let text = guard.as_mut().and_then(|cx| cx.e().objects.errh.string(errorcode)).unwrap_or(&[]);
                let n = text.len().min(buf.len() - 1);
                buf[..n].copy_from_slice(&text[..n]);
                n
            };
            // SAFETY: MPI requires `string` to hold MPI_MAX_ERROR_STRING bytes.
            unsafe { write_bytes(&buf[..n], string, abi::MPI_MAX_ERROR_STRING as usize, resultlen) };
            return abi::MPI_SUCCESS;
        }
        let guard = STATE.lock();
        let text = match guard.errors.lookup(errorcode) {
            Some(t) => t,
            None => match ErrorClass::from_code(class) {
                Some(c) => c.description(),
                None if class == 0 => "no error",
                None => abi::error_class_name(class).unwrap_or("unknown error"),
            },
        };
        // SAFETY: MPI requires `string` to hold MPI_MAX_ERROR_STRING bytes.
        unsafe { write_cstr(text, string, abi::MPI_MAX_ERROR_STRING as usize, resultlen) };
        abi::MPI_SUCCESS
    }
}

// ---- error handlers -------------------------------------------------------------------------

pub(super) const ERRH_DIRECT: c_int =
    abi::make_handle(abi::HandleKind::Direct, abi::ObjectKind::Errhandler, 0);

/// What an error-handler handle names.
pub(super) enum Handler {
    Predefined(ErrHandler),
    User(ErrhId),
}

pub(super) fn handler(h: abi::MPI_Errhandler) -> Result<Handler> {
    Ok(match h {
        abi::MPI_ERRORS_ARE_FATAL => Handler::Predefined(ErrHandler::Fatal),
        abi::MPI_ERRORS_RETURN => Handler::Predefined(ErrHandler::Return),
        abi::MPI_ERRORS_ABORT => Handler::Predefined(ErrHandler::Abort),
        _ if abi::handle_kind(h) == abi::HandleKind::Direct
            && abi::handle_object(h) == Some(abi::ObjectKind::Errhandler) =>
        {
            let i = abi::handle_index(h);
            Handler::User(ErrhId {
                index: (i & 0xffff) as u16,
                gen: (i >> 16) as u16,
            })
        }
        _ => return Err(Error::bad_arg("not an error handler")),
    })
}

pub(super) fn handler_handle(e: &mut Engine, h: ErrHandler) -> Result<abi::MPI_Errhandler> {
    Ok(match h {
        ErrHandler::Fatal => abi::MPI_ERRORS_ARE_FATAL,
        ErrHandler::Return => abi::MPI_ERRORS_RETURN,
        ErrHandler::Abort => abi::MPI_ERRORS_ABORT,
        ErrHandler::User(i) => {
            let id = e.objects.errh.retain(i)?;
            ERRH_DIRECT | (c_int::from(id.gen) << 16) | c_int::from(id.index)
        }
    })
}

/// Whether a communicator (live or draining) uses user handler slot `index`.
pub(super) fn handler_in_use(comms: &CommTable, index: u16) -> bool {
    super::session::uses_handler(index)
        || (0..comms.capacity()).any(|i| {
            comms
                .get_any(CommId(i))
                .is_some_and(|c| c.errhandler == ErrHandler::User(index))
        })
}

unsafe fn create_errhandler(
    func: &'static str,
    f: Option<CommErrhandlerFn>,
    eh: *mut abi::MPI_Errhandler,
) -> c_int {
    code(run(func, None, |e| {
        let f = f.ok_or(Error::bad_arg("the error handler function is NULL"))?;
        if eh.is_null() {
            return Err(Error::bad_arg("errhandler is NULL"));
        }
        let comms = &e.p2p.comms;
        let files = &e.io;
        let osc = &e.osc;
        let id = e.objects.errh.create(HandlerKind::Comm, f, |i| {
            handler_in_use(comms, i)
                || files.uses_handler(i)
                || osc.iter().any(|w| w.errhandler == ErrHandler::User(i))
        })?;
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Errhandler.
        unsafe {
            out(
                eh,
                ERRH_DIRECT | (c_int::from(id.gen) << 16) | c_int::from(id.index),
            )
        }
    }))
}

fn set_errhandler(func: &'static str, comm: abi::MPI_Comm, eh: abi::MPI_Errhandler) -> c_int {
    code(run_comm(func, comm, |e, c| {
        let h = comm_handler(e, eh)?;
        e.set_errhandler(c, h)
    }))
}

/// The handle of user handler `id`.
pub(super) fn errh_handle(id: ErrhId) -> abi::MPI_Errhandler {
    ERRH_DIRECT | (c_int::from(id.gen) << 16) | c_int::from(id.index)
}

/// The error handler `eh` names for objects of `kind` (a predefined one or a live user handler
/// made for them).
pub(super) fn handler_for(
    e: &Engine,
    eh: abi::MPI_Errhandler,
    kind: HandlerKind,
) -> Result<ErrHandler> {
    Ok(match handler(eh)? {
        Handler::Predefined(h) => h,
        Handler::User(id) => {
            e.objects.errh.check(id, kind)?;
            ErrHandler::User(id.index)
        }
    })
}

/// The communicator error handler `eh` names (a predefined one or a live user handler made for
/// communicators).
pub(super) fn comm_handler(e: &Engine, eh: abi::MPI_Errhandler) -> Result<ErrHandler> {
    Ok(match handler(eh)? {
        Handler::Predefined(h) => h,
        Handler::User(id) => {
            e.objects.errh.check(id, HandlerKind::Comm)?;
            ErrHandler::User(id.index)
        }
    })
}

unsafe fn get_errhandler(
    func: &'static str,
    comm: abi::MPI_Comm,
    eh: *mut abi::MPI_Errhandler,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        if eh.is_null() {
            return Err(Error::bad_arg("errhandler is NULL"));
        }
        let h = e.p2p.comms.errhandler(c)?;
        let handle = handler_handle(e, h)?;
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Errhandler.
        unsafe { out(eh, handle) }
    }))
}

super::mpi! {
    fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(f: Option<CommErrhandlerFn>, eh: *mut abi::MPI_Errhandler) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { create_errhandler("MPI_Comm_create_errhandler", f, eh) }
    }

    fn MPI_Errhandler_create / PMPI_Errhandler_create(f: Option<CommErrhandlerFn>, eh: *mut abi::MPI_Errhandler) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { create_errhandler("MPI_Errhandler_create", f, eh) }
    }

    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: abi::MPI_Comm, eh: abi::MPI_Errhandler) {
        set_errhandler("MPI_Comm_set_errhandler", comm, eh)
    }

    fn MPI_Errhandler_set / PMPI_Errhandler_set(comm: abi::MPI_Comm, eh: abi::MPI_Errhandler) {
        set_errhandler("MPI_Errhandler_set", comm, eh)
    }

    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: abi::MPI_Comm, eh: *mut abi::MPI_Errhandler) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { get_errhandler("MPI_Comm_get_errhandler", comm, eh) }
    }

    fn MPI_Errhandler_get / PMPI_Errhandler_get(comm: abi::MPI_Comm, eh: *mut abi::MPI_Errhandler) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { get_errhandler("MPI_Errhandler_get", comm, eh) }
    }

    fn MPI_Errhandler_free / PMPI_Errhandler_free(eh: *mut abi::MPI_Errhandler) {
        if eh.is_null() {
            return report("MPI_Errhandler_free", None, Error::bad_arg("errhandler is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_Errhandler.
        let h = unsafe { *eh };
        let r = match handler(h) {
            // Predefined handlers live forever; the caller's handle is nulled as the standard says.
            Ok(Handler::Predefined(_)) => Ok(()),
            Ok(Handler::User(id)) => run("MPI_Errhandler_free", None, |e| {
                let comms = &e.p2p.comms;
                let osc = &e.osc;
                let files = &e.io;
                let kind = e.objects.errh.kind_of(id.index).unwrap_or(HandlerKind::Comm);
                e.objects.errh.release(id, kind, |i| {
                    handler_in_use(comms, i)
                        || osc.iter().any(|w| w.errhandler == ErrHandler::User(i))
                        || files.uses_handler(i)
                })
            }),
            Err(err) => Err(report("MPI_Errhandler_free", None, err)),
        };
        if r.is_ok() {
            // SAFETY: as above.
            unsafe { *eh = abi::MPI_ERRHANDLER_NULL };
        }
        code(r)
    }

    fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: abi::MPI_Comm, errorcode: c_int) {
        let c = match run_comm("MPI_Comm_call_errhandler", comm, |e, c| e.comm(c).map(|_| c)) {
            Ok(c) => c,
            Err(code) => return code,
        };
        if class_of(errorcode).is_none() {
            return report("MPI_Comm_call_errhandler", Some(c), Error::bad_arg("not an error code"));
        }
        report_code("MPI_Comm_call_errhandler", Some(c), errorcode, "error raised by the program");
        // The handler returned (or was MPI_ERRORS_RETURN): the call itself succeeded.
        abi::MPI_SUCCESS
    }

    fn MPI_Add_error_class / PMPI_Add_error_class(errorclass: *mut c_int) {
        code(run("MPI_Add_error_class", None, |e| {
            if errorclass.is_null() {
                return Err(Error::bad_arg("errorclass is NULL"));
            }
            let c = e.objects.errh.add_class()?;
            // SAFETY: checked non-null; MPI requires it to point to an int.
            unsafe { out(errorclass, c) }
        }))
    }

    fn MPI_Add_error_code / PMPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) {
        code(run("MPI_Add_error_code", None, |e| {
            if errorcode.is_null() {
                return Err(Error::bad_arg("errorcode is NULL"));
            }
            if errorclass < FIRST_USER_CODE && abi::error_class_name(errorclass).is_none() {
                return Err(Error::bad_arg("not an error class"));
            }
            let c = e.objects.errh.add_code(errorclass)?;
            // SAFETY: checked non-null; MPI requires it to point to an int.
            unsafe { out(errorcode, c) }
        }))
    }

    fn MPI_Add_error_string / PMPI_Add_error_string(errorcode: c_int, string: *const c_char) {
        code(run("MPI_Add_error_string", None, |e| {
            if string.is_null() {
                return Err(Error::bad_arg("string is NULL"));
            }
            // SAFETY: MPI requires a NUL-terminated string.
            let text = unsafe { core::ffi::CStr::from_ptr(string) }.to_bytes();
            e.objects.errh.set_string(errorcode, text)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_classes_and_keep_the_latest_message() {
        let mut r = ErrorRing::new();
        let a = r.record(ErrorClass::Rank, "MPI_Send: rank 7");
        assert_eq!(a, ErrorClass::Rank.code());
        assert_eq!(class_of(a), Some(a));
        assert_eq!(r.lookup(a), Some("MPI_Send: rank 7"));
        r.record(ErrorClass::Rank, "MPI_Recv: rank 9");
        assert_eq!(r.lookup(a), Some("MPI_Recv: rank 9"));
        assert_eq!(r.lookup(ErrorClass::Tag.code()), None);
        assert_eq!(class_of(-1), None);
        assert_eq!(class_of(abi::MPI_ERR_LASTCODE), None);
    }
}
