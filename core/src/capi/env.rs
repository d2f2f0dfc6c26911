//! Starting, ending and describing the MPI environment.

use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::Ordering;

use super::abi;
use super::errors::{report, report_ref, write_cstr};
use super::handles::{self, out};
use super::state::{self, FINALIZED, INITIALIZED, STATE};
use super::Hooks;
use crate::api::ENGINE;
use crate::comm::CommId;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::shared::Inside;

/// Runs `f` inside the engine (which it may wait in); an error is reported as raised by `func`
/// on `comm`, once the engine is let go (a user's error handler may call MPI).
#[inline(always)]
pub(crate) fn run_inside<T>(
    func: &'static str,
    comm: Option<CommId>,
    f: impl FnOnce(&mut Inside) -> Result<T>,
) -> core::result::Result<T, c_int> {
    let r = match ENGINE.enter() {
        Some(mut cx) if state::active() => f(&mut cx),
        _ => Err(Error::new(ErrorClass::Other, Reason::NotInitialized)),
    };
    // The error is reported where it lies: moved into a call, it was copied on every return.
    match r {
        Ok(v) => Ok(v),
        Err(ref err) => Err(report_ref(func, comm, err)),
    }
}

/// Runs `f` on the engine (a call that does not wait); errors as for [`run_inside`].
#[inline(always)]
pub(crate) fn run<T>(
    func: &'static str,
    comm: Option<CommId>,
    f: impl FnOnce(&mut Engine) -> Result<T>,
) -> core::result::Result<T, c_int> {
    run_inside(func, comm, |cx| f(cx.e()))
}

/// Runs `f` on the engine and communicator handle `comm`.
#[inline(always)]
pub(crate) fn run_comm<T>(
    func: &'static str,
    comm: abi::MPI_Comm,
    f: impl FnOnce(&mut Engine, CommId) -> Result<T>,
) -> core::result::Result<T, c_int> {
    run_comm_inside(func, comm, |cx, c| f(cx.e(), c))
}

/// Runs `f` inside the engine with communicator handle `comm` (a call that may wait).
#[inline(always)]
pub(crate) fn run_comm_inside<T>(
    func: &'static str,
    comm: abi::MPI_Comm,
    f: impl FnOnce(&mut Inside, CommId) -> Result<T>,
) -> core::result::Result<T, c_int> {
    match handles::comm(comm) {
        Ok(c) => run_inside(func, Some(c), |cx| f(cx, c)),
        Err(err) => Err(report(func, None, err)),
    }
}

/// `MPI_SUCCESS` or the reported code.
pub(crate) fn code(r: core::result::Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => abi::MPI_SUCCESS,
        Err(c) => c,
    }
}

/// The body of `MPI_Init` and `MPI_Init_thread` (`required` is `None` for `MPI_Init`), also
/// used by the Rust API of a shim so that C and Rust share one engine.
///
/// # Safety
/// `provided` is NULL or points to an `int`.
pub unsafe fn init(hooks: &'static Hooks, required: Option<c_int>, provided: *mut c_int) -> c_int {
    if INITIALIZED.load(Ordering::Acquire) {
        let what = if FINALIZED.load(Ordering::Acquire) {
            "MPI cannot be initialized again after MPI_Finalize"
        } else {
            "MPI is already initialized"
        };
        return report(
            "MPI_Init",
            None,
            Error::new(ErrorClass::Other, Reason::BadArgument { what }),
        );
    }
    // Every level is provided; only MPI_THREAD_MULTIPLE takes the engine's lock.
    let level = required.map_or(abi::MPI_THREAD_SINGLE, |r| {
        r.clamp(abi::MPI_THREAD_SINGLE, abi::MPI_THREAD_MULTIPLE)
    });
    let level = match bring_up("MPI_Init", hooks, level) {
        Ok(l) => l,
        Err(code) => return code,
    };
    INITIALIZED.store(true, Ordering::Release);
    // A spawned job meets its parents before MPI_Init returns (collective over the world).
    let parent = run_comm_inside("MPI_Init", abi::MPI_COMM_WORLD, |cx, world| {
        let timeout_ms = u64::from(cx.e().params().u32(&crate::engine::DPM_TIMEOUT)) * 1000;
        crate::comm::create::connect_parent(cx, world, timeout_ms)
    });
    match parent {
        Ok(Some(c)) => state::PARENT.store(handles::comm_handle(c), Ordering::Release),
        Ok(None) => {}
        Err(code) => return code,
    }
    if !provided.is_null() {
        // SAFETY: checked non-null; MPI requires it to point to an int.
        unsafe { *provided = level };
    }
    abi::MPI_SUCCESS
}

/// Brings the engine up at thread level `level` unless it is up already (a session or the
/// world model came first: then its level stands, and is returned).
pub(crate) fn bring_up(
    func: &'static str,
    hooks: &'static Hooks,
    level: c_int,
) -> core::result::Result<c_int, c_int> {
    static BRINGING: spin::Mutex<()> = spin::Mutex::new(());
    let _one = BRINGING.lock();
    if state::active() {
        return Ok(STATE.lock().thread_level);
    }
    if state::TORN_DOWN.load(Ordering::Acquire) {
        return Err(report(
            func,
            None,
            Error::new(
                ErrorClass::Other,
                Reason::BadArgument {
                    what: "MPI cannot be brought up again in a process after the world model \
                           and every session were finalized",
                },
            ),
        ));
    }
    STATE.lock().hooks = Some(hooks);
    match (hooks.init)() {
        Ok(engine) => {
            let main = engine.platform().thread_id();
            ENGINE.install(engine, level == abi::MPI_THREAD_MULTIPLE);
            let mut st = STATE.lock();
            st.thread_level = level;
            st.main_thread = main;
        }
        Err(err) => {
            let mut line: heapless::String<320> = heapless::String::new();
            let _ = core::fmt::write(&mut line, format_args!("stormpi: {func} failed: {err}"));
            (hooks.eprint)(&line);
            (hooks.exit)(1);
        }
    }
    super::info::fill_env(level);
    state::UP.store(true, Ordering::Release);
    Ok(level)
}

/// Tears the engine down if nothing uses it any more: neither the world model nor a session.
pub(crate) fn tear_down_if_unused(func: &'static str) -> core::result::Result<(), c_int> {
    if state::world_active() || super::session::live() > 0 || !state::active() {
        return Ok(());
    }
    super::win::passive_stop_all();
    let r = run_inside(func, None, |cx| cx.finalize());
    state::UP.store(false, Ordering::Release);
    state::TORN_DOWN.store(true, Ordering::Release);
    r
}

/// `MPI_Finalize`, for the Rust API of a shim.
pub fn finalize() -> c_int {
    // SAFETY: PMPI_Finalize takes no arguments.
    unsafe { PMPI_Finalize() }
}

/// `MPI_Wtime`.
pub fn wtime(hooks: &'static Hooks) -> f64 {
    (hooks.now_ns)() as f64 * 1e-9
}

/// `MPI_Wtick`.
pub fn wtick(hooks: &'static Hooks) -> f64 {
    (hooks.tick_ns)() as f64 * 1e-9
}

/// Library version string.
pub(crate) const LIBRARY_VERSION: &str =
    concat!("stormpi ", env!("CARGO_PKG_VERSION"), " (MPICH ABI)");

super::mpi! {
    fn MPI_Finalize / PMPI_Finalize() {
        if !state::world_active() {
            return report("MPI_Finalize", None, Error::new(ErrorClass::Other, Reason::NotInitialized));
        }
        // First of all, MPI_COMM_SELF's attributes are deleted (latest set first), then
        // MPI_COMM_WORLD's, while MPI is still fully usable from their callbacks.
        super::attr::finalize_attributes();
        super::p2p::detach_all();
        FINALIZED.store(true, Ordering::Release);
        // The engine stays up while a session uses it; the last session's finalize ends it.
        code(tear_down_if_unused("MPI_Finalize"))
    }

    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) {
        // SAFETY: MPI requires `flag` to point to an int.
        code(unsafe { out(flag, INITIALIZED.load(Ordering::Acquire) as c_int) }.map_err(|e| report("MPI_Initialized", None, e)))
    }

    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) {
        // SAFETY: MPI requires `flag` to point to an int.
        code(unsafe { out(flag, FINALIZED.load(Ordering::Acquire) as c_int) }.map_err(|e| report("MPI_Finalized", None, e)))
    }

    fn MPI_Abort / PMPI_Abort(comm: abi::MPI_Comm, errorcode: c_int) {
        let name = match comm {
            abi::MPI_COMM_WORLD => "MPI_COMM_WORLD",
            abi::MPI_COMM_SELF => "MPI_COMM_SELF",
            _ => "a communicator",
        };
        let Some(mut cx) = ENGINE.enter() else {
            if let Some(h) = state::hooks() {
                (h.exit)(errorcode)
            }
            return errorcode;
        };
        let e = cx.e();
        let mut msg: heapless::String<128> = heapless::String::new();
        let _ = core::fmt::write(&mut msg, format_args!("MPI_Abort({name}, {errorcode}) called by rank {}", e.rank()));
        e.abort(errorcode, &msg)
    }

    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) {
        let level = STATE.lock().thread_level;
        // SAFETY: MPI requires `provided` to point to an int.
        code(unsafe { out(provided, level) }.map_err(|e| report("MPI_Query_thread", None, e)))
    }

    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) {
        // The thread that initialised MPI is the main thread.
        let main = STATE.lock().main_thread;
        let me = state::hooks().map(|h| (h.thread_id)());
        // SAFETY: MPI requires `flag` to point to an int.
        code(unsafe { out(flag, (me == Some(main)) as c_int) }.map_err(|e| report("MPI_Is_thread_main", None, e)))
    }

    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) {
        code(run("MPI_Get_processor_name", None, |e| {
            let mut buf = [0u8; abi::MPI_MAX_PROCESSOR_NAME as usize];
            let n = e.processor_name(&mut buf);
            let text = core::str::from_utf8(&buf[..n]).unwrap_or("localhost");
            // SAFETY: MPI requires `name` to hold MPI_MAX_PROCESSOR_NAME bytes.
            unsafe { write_cstr(text, name, abi::MPI_MAX_PROCESSOR_NAME as usize, resultlen) };
            Ok(())
        }))
    }

    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) {
        // SAFETY: MPI requires both to point to ints.
        let r = unsafe { out(version, abi::MPI_VERSION).and_then(|_| out(subversion, abi::MPI_SUBVERSION)) };
        code(r.map_err(|e| report("MPI_Get_version", None, e)))
    }

    fn MPI_Get_library_version / PMPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) {
        // SAFETY: MPI requires `version` to hold MPI_MAX_LIBRARY_VERSION_STRING bytes.
        unsafe { write_cstr(LIBRARY_VERSION, version, abi::MPI_MAX_LIBRARY_VERSION_STRING as usize, resultlen) };
        abi::MPI_SUCCESS
    }
}

/// `MPI_Pcontrol` (variadic in C; the level is passed alike on the supported ABIs). Profiling
/// control is a no-op here.
#[no_mangle]
pub extern "C" fn PMPI_Pcontrol(_level: c_int) -> c_int {
    abi::MPI_SUCCESS
}
/// `MPI_Pcontrol`.
#[no_mangle]
pub extern "C" fn MPI_Pcontrol(level: c_int) -> c_int {
    PMPI_Pcontrol(level)
}

/// `MPI_Aint_add`.
#[no_mangle]
pub extern "C" fn PMPI_Aint_add(base: abi::MPI_Aint, disp: abi::MPI_Aint) -> abi::MPI_Aint {
    base.wrapping_add(disp)
}
/// `MPI_Aint_add`.
#[no_mangle]
pub extern "C" fn MPI_Aint_add(base: abi::MPI_Aint, disp: abi::MPI_Aint) -> abi::MPI_Aint {
    PMPI_Aint_add(base, disp)
}
/// `MPI_Aint_diff`.
#[no_mangle]
pub extern "C" fn PMPI_Aint_diff(a: abi::MPI_Aint, b: abi::MPI_Aint) -> abi::MPI_Aint {
    a.wrapping_sub(b)
}
/// `MPI_Aint_diff`.
#[no_mangle]
pub extern "C" fn MPI_Aint_diff(a: abi::MPI_Aint, b: abi::MPI_Aint) -> abi::MPI_Aint {
    PMPI_Aint_diff(a, b)
}
/// `MPI_Get_address`: the address of `location` as an `MPI_Aint`, so that displacements are
/// differences of addresses (`MPI_BOTTOM` is 0 in this ABI). Needs no engine: programs build
/// struct types' displacements with it at any time.
#[no_mangle]
pub extern "C" fn PMPI_Get_address(location: *const c_void, address: *mut abi::MPI_Aint) -> c_int {
    // SAFETY: MPI requires `address` to point to an MPI_Aint; `out` refuses NULL.
    let r = unsafe { out(address, location as usize as abi::MPI_Aint) };
    code(r.map_err(|e| report("MPI_Get_address", None, e)))
}
/// `MPI_Get_address`.
#[no_mangle]
pub extern "C" fn MPI_Get_address(location: *const c_void, address: *mut abi::MPI_Aint) -> c_int {
    PMPI_Get_address(location, address)
}
/// `MPI_Address` (deprecated in MPI 2, removed in MPI 3; MPICH still defines it): as
/// `MPI_Get_address`.
#[no_mangle]
pub extern "C" fn PMPI_Address(location: *const c_void, address: *mut abi::MPI_Aint) -> c_int {
    PMPI_Get_address(location, address)
}
/// `MPI_Address`.
#[no_mangle]
pub extern "C" fn MPI_Address(location: *const c_void, address: *mut abi::MPI_Aint) -> c_int {
    PMPI_Get_address(location, address)
}
/// `MPI_File_c2f`: a file handle's bits are its Fortran integer (`MPI_FILE_NULL` is 0).
#[no_mangle]
pub extern "C" fn PMPI_File_c2f(file: *mut c_void) -> abi::MPI_Fint {
    super::file::c2f(file.cast())
}
/// `MPI_File_c2f`.
#[no_mangle]
pub extern "C" fn MPI_File_c2f(file: *mut c_void) -> abi::MPI_Fint {
    PMPI_File_c2f(file)
}
/// `MPI_File_f2c`: the handle whose bits are `file`.
#[no_mangle]
pub extern "C" fn PMPI_File_f2c(file: abi::MPI_Fint) -> *mut c_void {
    super::file::f2c(file).cast()
}
/// `MPI_File_f2c`.
#[no_mangle]
pub extern "C" fn MPI_File_f2c(file: abi::MPI_Fint) -> *mut c_void {
    PMPI_File_f2c(file)
}

/// The predefined attribute-copy callback: copies the attribute value, keeps the attribute.
unsafe extern "C" fn dup_fn(out_val: *mut c_void, in_val: *mut c_void, flag: *mut c_int) -> c_int {
    if !out_val.is_null() {
        // SAFETY: MPI passes `attribute_val_out` as a `void **`.
        unsafe { *out_val.cast::<*mut c_void>() = in_val };
    }
    if !flag.is_null() {
        // SAFETY: MPI passes `flag` as an `int *`.
        unsafe { *flag = 1 };
    }
    abi::MPI_SUCCESS
}

macro_rules! dup_callbacks {
    ($($name:ident),*) => {$(
        /// Predefined attribute-copy callback (copies the value).
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            _old: c_int,
            _keyval: c_int,
            _extra: *mut c_void,
            attribute_val_in: *mut c_void,
            attribute_val_out: *mut c_void,
            flag: *mut c_int,
        ) -> c_int {
            // SAFETY: forwarded from MPI, which guarantees the pointers.
            unsafe { dup_fn(attribute_val_out, attribute_val_in, flag) }
        }
    )*};
}
dup_callbacks!(
    MPI_COMM_DUP_FN,
    MPI_DUP_FN,
    MPI_TYPE_DUP_FN,
    MPI_WIN_DUP_FN,
    MPIR_Dup_fn
);

/// A pointer-valued library object (`extern int *const MPI_UNWEIGHTED;` and the like).
#[repr(transparent)]
pub struct Object(pub(crate) *const c_void);

// SAFETY: the objects are immutable addresses that C code only compares, never writes through.
unsafe impl Sync for Object {}

static MARKERS: [c_int; 8] = [0; 8];

macro_rules! objects {
    ($($name:ident = $i:expr),*) => {$(
        /// Library object of `mpi.h`: a distinct address.
        #[no_mangle]
        pub static $name: Object = Object(&MARKERS[$i] as *const c_int as *const c_void);
    )*};
}
objects!(
    MPI_UNWEIGHTED = 0,
    MPI_WEIGHTS_EMPTY = 1,
    MPI_F_STATUS_IGNORE = 2,
    MPI_F_STATUSES_IGNORE = 3,
    MPI_F08_STATUS_IGNORE = 4,
    MPI_F08_STATUSES_IGNORE = 5,
    MPI_T_PVAR_ALL_HANDLES = 6
);
