//! Error codes, messages and error handlers.
//!
//! An error code is its class, as Open MPI returns them: programs that compare a return value
//! with `MPI_ERR_TRUNCATE` work. The specific message of the latest error of each class — e.g.
//! "MPI_Send: MPI_ERR_RANK: rank 7 is out of range (communicator size 4)" — is kept, and
//! `MPI_Error_string` gives it rather than only the class's description.

use core::ffi::{c_char, c_int};
use core::fmt::Write;

use super::abi;
use super::state::{self, STATE};
use crate::api::ENGINE;
use crate::comm::{CommId, ErrHandler};
use crate::error::{Error, ErrorClass, Reason};

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
        let code = class.code();
        let e = &mut self.last[code as usize % CLASSES];
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

/// The class of an error code, if it is one.
pub(crate) fn class_of(code: c_int) -> Option<c_int> {
    abi::error_class_name(code).map(|_| code)
}

/// Records `err` raised by `func` without invoking an error handler; returns its code (for the
/// per-request codes of multiple-completion calls).
pub(crate) fn record(func: &str, err: Error) -> c_int {
    let mut text: heapless::String<256> = heapless::String::new();
    let _ = write!(text, "{func}: {err}");
    STATE.lock().errors.record(err.class, &text)
}

/// Reports `err` raised by `func` (on `comm`, or `MPI_COMM_WORLD` if none applies): records it
/// and either returns its code (`MPI_ERRORS_RETURN`) or ends the job (`MPI_ERRORS_ARE_FATAL`).
pub(crate) fn report(func: &str, comm: Option<CommId>, err: Error) -> c_int {
    let mut text: heapless::String<256> = heapless::String::new();
    let _ = write!(text, "{func}: {err}");
    let code = STATE.lock().errors.record(err.class, &text);
    let handler = {
        let guard = ENGINE.lock();
        match guard.as_ref() {
            Some(e) if state::active() => e
                .comm(comm.unwrap_or(CommId::WORLD))
                .or_else(|_| e.comm(CommId::WORLD))
                .map(|c| c.errhandler)
                .unwrap_or(ErrHandler::Fatal),
            // Before init or after finalize there is no job to end: return the code.
            _ => ErrHandler::Return,
        }
    };
    match handler {
        ErrHandler::Return => code,
        ErrHandler::Fatal | ErrHandler::Abort => fatal(err.class.code(), &text),
    }
}

/// Prints `text` and ends the whole job.
pub(crate) fn fatal(code: c_int, text: &str) -> ! {
    let mut line: heapless::String<320> = heapless::String::new();
    let rank = ENGINE.lock().as_ref().map(|e| e.rank());
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
    let mut guard = ENGINE.lock();
    match (guard.as_mut(), hooks) {
        (Some(e), _) => e.abort(code.max(1), text),
        (None, Some(h)) => (h.exit)(code.max(1)),
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
        return if func.starts_with("MPI_T_") {
            abi::MPI_T_ERR_NOT_SUPPORTED
        } else {
            abi::MPI_ERR_UNSUPPORTED_OPERATION
        };
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
