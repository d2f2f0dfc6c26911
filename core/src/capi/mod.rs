//! The MPI C ABI: `extern "C"` `MPI_*` functions, each with its `PMPI_*` twin, over the engine.
//!
//! Handles and constants are MPICH's (see [`abi`] and `include/mpi.h`), so programs compiled
//! against MPICH's header run unchanged. Every function validates its arguments, runs on the
//! process's engine ([`crate::api::ENGINE`]) and reports errors through the communicator's error
//! handler: `MPI_ERRORS_ARE_FATAL` (the default) prints the message and ends the job,
//! `MPI_ERRORS_RETURN` returns an error code whose class is the standard's and whose
//! `MPI_Error_string` is the specific message. Functions not implemented yet return
//! `MPI_ERR_UNSUPPORTED_OPERATION` naming themselves.
//!
//! The few functions that need the platform (`MPI_Init`, `MPI_Init_thread`, `MPI_Wtime`,
//! `MPI_Wtick`, `MPI_T_init_thread`) are defined by the shim through [`bind_platform!`], which hands over its
//! [`Hooks`]; everything else lives here.
//!
//! The profiling interface: each `PMPI_X` holds the implementation and `MPI_X` calls it, so a
//! tool loaded before the library (`LD_PRELOAD`) can interpose on `MPI_X` and call `PMPI_X`.
#![allow(non_snake_case, clippy::missing_safety_doc, clippy::too_many_arguments)]

pub mod abi;
pub mod names;

mod attr;
mod coll;
mod comm;
mod datarep;
mod datatype;
mod dynproc;
mod env;
mod errors;
mod file;
mod fstatus;
mod group;
mod handles;
mod info;
mod p2p;
mod requests;
mod session;
mod state;
mod tools;
mod topo;
mod unsupported;
mod win;

pub use env::{finalize, init, wtick, wtime};
pub use session::session_init;
pub use tools::{init_thread as tools_init_thread, ToolWrites, TOOL_WRITES};

/// For a binding over the C API (the Fortran one, `fortran/`): reports `err` of `func` as the C
/// functions do (through `MPI_COMM_WORLD`'s error handler, the message kept for
/// `MPI_Error_string`) and returns its code.
pub fn report_error(func: &'static str, err: crate::error::Error) -> core::ffi::c_int {
    errors::report(func, None, err)
}

/// For a binding over the C API: `MPI_ERR_UNSUPPORTED_OPERATION` for `func`, reported as the C
/// functions stormpi lacks report it.
pub fn unsupported(func: &'static str) -> core::ffi::c_int {
    errors::unsupported(func)
}

use crate::engine::Engine;
use crate::error::Result;

/// What the C API needs from the platform shim.
pub struct Hooks {
    /// Brings up this process's engine (parameters, runtime, BTLs, memory) for `MPI_Init`.
    pub init: fn() -> Result<Engine>,
    /// Every parameter of the build with its value from the platform's sources, as `MPI_Init`
    /// would take them (for the tools interface, usable before `MPI_Init`).
    pub params: fn() -> Result<crate::params::Params>,
    /// Monotonic clock in nanoseconds, usable before `MPI_Init`.
    pub now_ns: fn() -> u64,
    /// Resolution of that clock in nanoseconds.
    pub tick_ns: fn() -> u64,
    /// An id of the calling thread, distinct among the process's live threads.
    pub thread_id: fn() -> u64,
    /// Writes one line to standard error.
    pub eprint: fn(&str),
    /// Ends the process (when no runtime exists to end the job).
    pub exit: fn(i32) -> !,
    /// Temporary memory for operations that need a whole message twice (`MPI_Sendrecv_replace`
    /// of a large message); `None` when the platform has none to give.
    pub temp_alloc: fn(usize) -> Option<*mut u8>,
    /// Returns memory from `temp_alloc`.
    pub temp_free: fn(*mut u8, usize),
}

/// Defines the platform-bound C entry points (`MPI_Init`, `MPI_Init_thread`, `MPI_Wtime`,
/// `MPI_Wtick` and their `PMPI_` twins) over a shim's `static` [`Hooks`].
#[macro_export]
macro_rules! bind_platform {
    ($hooks:path) => {
        /// `MPI_Init`.
        #[no_mangle]
        pub unsafe extern "C" fn PMPI_Init(
            _argc: *mut core::ffi::c_int,
            _argv: *mut *mut *mut core::ffi::c_char,
        ) -> core::ffi::c_int {
            $crate::capi::init(&$hooks, None, core::ptr::null_mut())
        }
        /// `MPI_Init`.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Init(
            argc: *mut core::ffi::c_int,
            argv: *mut *mut *mut core::ffi::c_char,
        ) -> core::ffi::c_int {
            PMPI_Init(argc, argv)
        }
        /// `MPI_Init_thread`.
        #[no_mangle]
        pub unsafe extern "C" fn PMPI_Init_thread(
            _argc: *mut core::ffi::c_int,
            _argv: *mut *mut *mut core::ffi::c_char,
            required: core::ffi::c_int,
            provided: *mut core::ffi::c_int,
        ) -> core::ffi::c_int {
            $crate::capi::init(&$hooks, Some(required), provided)
        }
        /// `MPI_Init_thread`.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Init_thread(
            argc: *mut core::ffi::c_int,
            argv: *mut *mut *mut core::ffi::c_char,
            required: core::ffi::c_int,
            provided: *mut core::ffi::c_int,
        ) -> core::ffi::c_int {
            PMPI_Init_thread(argc, argv, required, provided)
        }
        /// `MPI_T_init_thread`.
        #[no_mangle]
        pub unsafe extern "C" fn PMPI_T_init_thread(
            required: core::ffi::c_int,
            provided: *mut core::ffi::c_int,
        ) -> core::ffi::c_int {
            $crate::capi::tools_init_thread(&$hooks, required, provided)
        }
        /// `MPI_T_init_thread`.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_T_init_thread(
            required: core::ffi::c_int,
            provided: *mut core::ffi::c_int,
        ) -> core::ffi::c_int {
            PMPI_T_init_thread(required, provided)
        }
        /// `MPI_Session_init`.
        #[no_mangle]
        pub unsafe extern "C" fn PMPI_Session_init(
            info: $crate::capi::abi::MPI_Info,
            errhandler: $crate::capi::abi::MPI_Errhandler,
            session: *mut $crate::capi::abi::MPI_Session,
        ) -> core::ffi::c_int {
            $crate::capi::session_init(&$hooks, info, errhandler, session)
        }
        /// `MPI_Session_init`.
        #[no_mangle]
        pub unsafe extern "C" fn MPI_Session_init(
            info: $crate::capi::abi::MPI_Info,
            errhandler: $crate::capi::abi::MPI_Errhandler,
            session: *mut $crate::capi::abi::MPI_Session,
        ) -> core::ffi::c_int {
            PMPI_Session_init(info, errhandler, session)
        }
        /// `MPI_Wtime`.
        #[no_mangle]
        pub extern "C" fn PMPI_Wtime() -> f64 {
            $crate::capi::wtime(&$hooks)
        }
        /// `MPI_Wtime`.
        #[no_mangle]
        pub extern "C" fn MPI_Wtime() -> f64 {
            PMPI_Wtime()
        }
        /// `MPI_Wtick`.
        #[no_mangle]
        pub extern "C" fn PMPI_Wtick() -> f64 {
            $crate::capi::wtick(&$hooks)
        }
        /// `MPI_Wtick`.
        #[no_mangle]
        pub extern "C" fn MPI_Wtick() -> f64 {
            PMPI_Wtick()
        }
    };
}

/// Defines `PMPI_X` with the body and `MPI_X` calling it.
macro_rules! mpi {
    ($(
        $(#[$m:meta])*
        fn $name:ident / $pname:ident ( $($arg:ident : $ty:ty),* $(,)? ) $body:block
    )*) => {$(
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($arg: $ty),*) -> core::ffi::c_int $body
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> core::ffi::c_int {
            $pname($($arg),*)
        }
    )*};
}
pub(crate) use mpi;
