//! The procedures whose Fortran form differs from the C one beyond what the generator converts:
//! `MPI_INIT` (no `argc`/`argv`), the functions that return values, attributes (Fortran passes
//! attribute values, C pointers), keyvals, generalized requests and data representations with
//! Fortran callbacks,
//! `MPI_BUFFER_DETACH`, `MPI_INFO_GET_STRING`, `MPI_SESSION_GET_NTH_PSET`, and the Fortran-only
//! predefined callbacks.
//!
//! Each takes the Fortran procedure's arguments (references, `ierror` last, hidden string
//! lengths after it) and `PMPI` says whether to call the profiling C functions.

use core::ffi::{c_char, c_int, c_void};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use stormpi_core::error::{Error, ErrorClass, Reason};

use crate::bindings::c;
use crate::rt::{self, MpiAint};

macro_rules! call {
    ($p:ident, $mpi:ident, $pmpi:ident ( $($a:expr),* $(,)? )) => {{
        // (Callers inside unsafe blocks of their own, and arguments that read references.)
        #[allow(unused_unsafe)]
        // SAFETY: a C function of the library, with the arguments its prototype takes.
        let rc = unsafe { if $p { c::$pmpi($($a),*) } else { c::$mpi($($a),*) } };
        rc
    }};
}

/// `MPI_INIT(IERROR)`.
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn init<const PMPI: bool>(ierror: *mut c_int) {
    let rc = call!(PMPI, MPI_Init, PMPI_Init(null_mut(), null_mut()));
    // SAFETY: the caller's contract.
    unsafe { *ierror = rc };
}

/// `MPI_INIT_THREAD(REQUIRED, PROVIDED, IERROR)`.
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn init_thread<const PMPI: bool>(
    required: *mut c_int,
    provided: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: the caller's contract.
    let rc = call!(
        PMPI,
        MPI_Init_thread,
        PMPI_Init_thread(
            null_mut(),
            null_mut(),
            unsafe { *required },
            provided.cast()
        )
    );
    // SAFETY: the caller's contract.
    unsafe { *ierror = rc };
}

/// `DOUBLE PRECISION MPI_WTIME()`.
///
/// # Safety
/// None beyond the C function's.
pub unsafe fn wtime<const PMPI: bool>() -> f64 {
    call!(PMPI, MPI_Wtime, PMPI_Wtime())
}

/// `DOUBLE PRECISION MPI_WTICK()`.
///
/// # Safety
/// None beyond the C function's.
pub unsafe fn wtick<const PMPI: bool>() -> f64 {
    call!(PMPI, MPI_Wtick, PMPI_Wtick())
}

/// `INTEGER(KIND=MPI_ADDRESS_KIND) MPI_AINT_ADD(BASE, DISP)`.
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn aint_add<const PMPI: bool>(base: *mut MpiAint, disp: *mut MpiAint) -> MpiAint {
    // SAFETY: the caller's contract.
    call!(
        PMPI,
        MPI_Aint_add,
        PMPI_Aint_add(unsafe { *base }, unsafe { *disp })
    )
}

/// `INTEGER(KIND=MPI_ADDRESS_KIND) MPI_AINT_DIFF(ADDR1, ADDR2)`.
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn aint_diff<const PMPI: bool>(addr1: *mut MpiAint, addr2: *mut MpiAint) -> MpiAint {
    // SAFETY: the caller's contract.
    call!(
        PMPI,
        MPI_Aint_diff,
        PMPI_Aint_diff(unsafe { *addr1 }, unsafe { *addr2 })
    )
}

/// `MPI_PCONTROL(LEVEL)` (no `IERROR`).
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn pcontrol<const PMPI: bool>(level: *mut c_int) {
    // SAFETY: the caller's contract.
    let level = unsafe { *level };
    call!(PMPI, MPI_Pcontrol, PMPI_Pcontrol(level));
}

// --- attributes ------------------------------------------------------------------------------

/// What a predefined keyval's C attribute points to.
#[derive(Clone, Copy)]
enum Predefined {
    /// An `int` (`MPI_TAG_UB`, ...).
    Int,
    /// An `MPI_Aint` (`MPI_WIN_SIZE`).
    Aint,
    /// The value is the address itself (`MPI_WIN_BASE`).
    Address,
}

/// A Fortran keyval as the C one: the Fortran twin of a predefined C keyval (odd) is the next
/// value; the C attribute is then a pointer the Fortran value is read through.
fn c_keyval(keyval: c_int) -> (c_int, Option<Predefined>) {
    const COMM: core::ops::RangeInclusive<c_int> = 0x6440_0002..=0x6440_000e;
    const WIN: core::ops::RangeInclusive<c_int> = 0x6600_0002..=0x6600_000a;
    if keyval % 2 == 0 && COMM.contains(&keyval) {
        (keyval - 1, Some(Predefined::Int))
    } else if keyval % 2 == 0 && WIN.contains(&keyval) {
        let kind = match keyval {
            0x6600_0002 => Predefined::Address,
            0x6600_0004 => Predefined::Aint,
            _ => Predefined::Int,
        };
        (keyval - 1, Some(kind))
    } else {
        (keyval, None)
    }
}

/// Which object kind an attribute function is for.
#[derive(Clone, Copy)]
enum Kind {
    Comm,
    Type,
    Win,
}

unsafe fn set_attr<const PMPI: bool>(
    kind: Kind,
    obj: c_int,
    keyval: c_int,
    value: MpiAint,
) -> c_int {
    let (k, _) = c_keyval(keyval);
    let v = value as *mut c_void;
    match kind {
        Kind::Comm => call!(PMPI, MPI_Comm_set_attr, PMPI_Comm_set_attr(obj, k, v)),
        Kind::Type => call!(PMPI, MPI_Type_set_attr, PMPI_Type_set_attr(obj, k, v)),
        Kind::Win => call!(PMPI, MPI_Win_set_attr, PMPI_Win_set_attr(obj, k, v)),
    }
}

/// The attribute's Fortran value and whether it is set.
unsafe fn get_attr<const PMPI: bool>(
    kind: Kind,
    obj: c_int,
    keyval: c_int,
) -> (c_int, Option<MpiAint>) {
    let (k, predefined) = c_keyval(keyval);
    let mut v: *mut c_void = null_mut();
    let mut flag: c_int = 0;
    let out = (&mut v as *mut *mut c_void).cast::<c_void>();
    let f = (&mut flag as *mut c_int).cast::<c_void>();
    let rc = match kind {
        Kind::Comm => call!(PMPI, MPI_Comm_get_attr, PMPI_Comm_get_attr(obj, k, out, f)),
        Kind::Type => call!(PMPI, MPI_Type_get_attr, PMPI_Type_get_attr(obj, k, out, f)),
        Kind::Win => call!(PMPI, MPI_Win_get_attr, PMPI_Win_get_attr(obj, k, out, f)),
    };
    if rc != rt::SUCCESS || flag == 0 {
        return (rc, None);
    }
    let value = match predefined {
        None | Some(Predefined::Address) => v as MpiAint,
        // SAFETY: the library's predefined attributes point to an int or an MPI_Aint.
        Some(Predefined::Int) if !v.is_null() => unsafe { *v.cast::<c_int>() as MpiAint },
        Some(Predefined::Aint) if !v.is_null() => unsafe { *v.cast::<MpiAint>() },
        Some(_) => 0,
    };
    (rc, Some(value))
}

macro_rules! attr_procs {
    ($($set:ident, $get:ident, $kind:expr;)*) => {$(
        #[doc = concat!("`MPI_", stringify!($set), "(OBJ, KEYVAL, ATTRIBUTE_VAL, IERROR)`, the value an `INTEGER(KIND=MPI_ADDRESS_KIND)`.")]
        ///
        /// # Safety
        /// Fortran's arguments: valid references.
        pub unsafe fn $set<const PMPI: bool>(obj: *mut c_int, keyval: *mut c_int, value: *mut MpiAint, ierror: *mut c_int) {
            // SAFETY: the caller's contract.
            unsafe { *ierror = set_attr::<PMPI>($kind, *obj, *keyval, *value) };
        }
        #[doc = concat!("`MPI_", stringify!($get), "(OBJ, KEYVAL, ATTRIBUTE_VAL, FLAG, IERROR)`: a predefined attribute's value, not its address.")]
        ///
        /// # Safety
        /// Fortran's arguments: valid references.
        pub unsafe fn $get<const PMPI: bool>(obj: *mut c_int, keyval: *mut c_int, value: *mut MpiAint, flag: *mut c_int, ierror: *mut c_int) {
            // SAFETY: the caller's contract.
            unsafe {
                let (rc, v) = get_attr::<PMPI>($kind, *obj, *keyval);
                if rc == rt::SUCCESS {
                    if let Some(v) = v {
                        *value = v;
                    }
                    *flag = if v.is_some() { rt::TRUE } else { rt::FALSE };
                }
                *ierror = rc;
            }
        }
    )*};
}

attr_procs! {
    comm_set_attr, comm_get_attr, Kind::Comm;
    type_set_attr, type_get_attr, Kind::Type;
    win_set_attr, win_get_attr, Kind::Win;
}

/// `MPI_ATTR_PUT(COMM, KEYVAL, ATTRIBUTE_VAL, IERROR)` (MPI-1: a default `INTEGER` value).
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn attr_put<const PMPI: bool>(
    comm: *mut c_int,
    keyval: *mut c_int,
    value: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: the caller's contract.
    unsafe { *ierror = set_attr::<PMPI>(Kind::Comm, *comm, *keyval, *value as MpiAint) };
}

/// `MPI_ATTR_GET(COMM, KEYVAL, ATTRIBUTE_VAL, FLAG, IERROR)` (MPI-1: a default `INTEGER` value).
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn attr_get<const PMPI: bool>(
    comm: *mut c_int,
    keyval: *mut c_int,
    value: *mut c_int,
    flag: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: the caller's contract.
    unsafe {
        let (rc, v) = get_attr::<PMPI>(Kind::Comm, *comm, *keyval);
        if rc == rt::SUCCESS {
            if let Some(v) = v {
                *value = v as c_int;
            }
            *flag = if v.is_some() { rt::TRUE } else { rt::FALSE };
        }
        *ierror = rc;
    }
}

// --- keyvals with Fortran callbacks ----------------------------------------------------------

/// A Fortran copy callback: `(OLDOBJ, KEYVAL, EXTRA_STATE, ATTRIBUTE_VAL_IN, ATTRIBUTE_VAL_OUT,
/// FLAG, IERROR)`, values `INTEGER(KIND=MPI_ADDRESS_KIND)` (MPI-1's: `INTEGER`).
type FortranCopy = unsafe extern "C" fn(
    *mut c_int,
    *mut c_int,
    *mut c_void,
    *mut c_void,
    *mut c_void,
    *mut c_int,
    *mut c_int,
);
/// A Fortran delete callback: `(OBJ, KEYVAL, ATTRIBUTE_VAL, EXTRA_STATE, IERROR)`.
type FortranDelete =
    unsafe extern "C" fn(*mut c_int, *mut c_int, *mut c_void, *mut c_void, *mut c_int);

/// A keyval created from Fortran: its callbacks and extra state. The C library holds its
/// address as the keyval's extra state and calls the trampolines below.
pub struct KeyvalSlot {
    copy: AtomicUsize,
    delete: AtomicUsize,
    extra: AtomicUsize,
    /// MPI-1's `MPI_KEYVAL_CREATE`: values are default `INTEGER`s.
    mpi1: AtomicUsize,
}

/// How many keyvals Fortran programs can create (slots are not reused: attributes made with a
/// freed keyval still call its callbacks).
pub const KEYVALS: usize = 1024;

static SLOTS: [KeyvalSlot; KEYVALS] = [const {
    KeyvalSlot {
        copy: AtomicUsize::new(0),
        delete: AtomicUsize::new(0),
        extra: AtomicUsize::new(0),
        mpi1: AtomicUsize::new(0),
    }
}; KEYVALS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

/// The C copy callback of every Fortran keyval.
unsafe extern "C" fn copy_trampoline(
    oldobj: c_int,
    keyval: c_int,
    extra_state: *mut c_void,
    attribute_val_in: *mut c_void,
    attribute_val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: the C library passes back the slot address given at creation, and the pointers
    // the copy-callback prototype promises; the slot holds a Fortran procedure of this type.
    unsafe {
        let slot = &*extra_state.cast::<KeyvalSlot>();
        let copy: FortranCopy =
            core::mem::transmute::<usize, FortranCopy>(slot.copy.load(Ordering::Acquire));
        let (mut o, mut k, mut ierr, mut f) = (oldobj, keyval, rt::SUCCESS, rt::FALSE);
        let mut extra = slot.extra.load(Ordering::Relaxed) as MpiAint;
        let mut input = attribute_val_in as MpiAint;
        let mut out: MpiAint = 0;
        if slot.mpi1.load(Ordering::Relaxed) != 0 {
            let (mut e, mut i, mut o32) = (extra as c_int, input as c_int, 0 as c_int);
            copy(
                &mut o,
                &mut k,
                (&mut e as *mut c_int).cast(),
                (&mut i as *mut c_int).cast(),
                (&mut o32 as *mut c_int).cast(),
                &mut f,
                &mut ierr,
            );
            out = o32 as MpiAint;
        } else {
            copy(
                &mut o,
                &mut k,
                (&mut extra as *mut MpiAint).cast(),
                (&mut input as *mut MpiAint).cast(),
                (&mut out as *mut MpiAint).cast(),
                &mut f,
                &mut ierr,
            );
        }
        if ierr == rt::SUCCESS {
            *flag = rt::logical_in(f);
            if f != 0 {
                *attribute_val_out.cast::<*mut c_void>() = out as *mut c_void;
            }
        }
        ierr
    }
}

/// The C delete callback of every Fortran keyval.
unsafe extern "C" fn delete_trampoline(
    obj: c_int,
    keyval: c_int,
    attribute_val: *mut c_void,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: as in copy_trampoline.
    unsafe {
        let slot = &*extra_state.cast::<KeyvalSlot>();
        let delete: FortranDelete =
            core::mem::transmute::<usize, FortranDelete>(slot.delete.load(Ordering::Acquire));
        let (mut o, mut k, mut ierr) = (obj, keyval, rt::SUCCESS);
        let mut extra = slot.extra.load(Ordering::Relaxed) as MpiAint;
        let mut value = attribute_val as MpiAint;
        if slot.mpi1.load(Ordering::Relaxed) != 0 {
            let (mut e, mut v) = (extra as c_int, value as c_int);
            delete(
                &mut o,
                &mut k,
                (&mut v as *mut c_int).cast(),
                (&mut e as *mut c_int).cast(),
                &mut ierr,
            );
        } else {
            delete(
                &mut o,
                &mut k,
                (&mut value as *mut MpiAint).cast(),
                (&mut extra as *mut MpiAint).cast(),
                &mut ierr,
            );
        }
        ierr
    }
}

/// Takes a slot for a new Fortran keyval, or reports that none is left.
fn new_slot(
    func: &'static str,
    copy: *const c_void,
    delete: *const c_void,
    extra: MpiAint,
    mpi1: bool,
) -> Result<&'static KeyvalSlot, c_int> {
    let i = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
    let Some(slot) = SLOTS.get(i) else {
        return Err(stormpi_core::capi::report_error(
            func,
            Error::new(
                ErrorClass::NoMem,
                Reason::BadArgument {
                    what: "the Fortran binding's 1024 keyvals with callbacks are all used",
                },
            ),
        ));
    };
    slot.extra.store(extra as usize, Ordering::Relaxed);
    slot.mpi1.store(mpi1 as usize, Ordering::Relaxed);
    slot.delete.store(delete as usize, Ordering::Relaxed);
    slot.copy.store(copy as usize, Ordering::Release);
    Ok(slot)
}

unsafe fn create_keyval<const PMPI: bool>(
    func: &'static str,
    kind: Option<Kind>,
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: MpiAint,
) -> c_int {
    let slot = match new_slot(func, copy, delete, extra, kind.is_none()) {
        Ok(s) => s,
        Err(rc) => return rc,
    };
    let c_copy = copy_trampoline as *mut c_void;
    let c_delete = delete_trampoline as *mut c_void;
    let state = (slot as *const KeyvalSlot).cast_mut().cast::<c_void>();
    let k = keyval.cast::<c_void>();
    match kind {
        Some(Kind::Comm) => call!(
            PMPI,
            MPI_Comm_create_keyval,
            PMPI_Comm_create_keyval(c_copy, c_delete, k, state)
        ),
        Some(Kind::Type) => call!(
            PMPI,
            MPI_Type_create_keyval,
            PMPI_Type_create_keyval(c_copy, c_delete, k, state)
        ),
        Some(Kind::Win) => call!(
            PMPI,
            MPI_Win_create_keyval,
            PMPI_Win_create_keyval(c_copy, c_delete, k, state)
        ),
        None => call!(
            PMPI,
            MPI_Keyval_create,
            PMPI_Keyval_create(c_copy, c_delete, k, state)
        ),
    }
}

macro_rules! keyval_procs {
    ($($name:ident, $kind:expr, $fname:literal;)*) => {$(
        #[doc = concat!("`", $fname, "(COPY_FN, DELETE_FN, KEYVAL, EXTRA_STATE, IERROR)` with Fortran callbacks.")]
        ///
        /// # Safety
        /// Fortran's arguments: valid references, procedures of the callbacks' interfaces.
        pub unsafe fn $name<const PMPI: bool>(copy: *const c_void, delete: *const c_void, keyval: *mut c_int, extra: *mut MpiAint, ierror: *mut c_int) {
            // SAFETY: the caller's contract.
            unsafe { *ierror = create_keyval::<PMPI>($fname, Some($kind), copy, delete, keyval, *extra) };
        }
    )*};
}

keyval_procs! {
    comm_create_keyval, Kind::Comm, "MPI_COMM_CREATE_KEYVAL";
    type_create_keyval, Kind::Type, "MPI_TYPE_CREATE_KEYVAL";
    win_create_keyval, Kind::Win, "MPI_WIN_CREATE_KEYVAL";
}

/// `MPI_KEYVAL_CREATE(COPY_FN, DELETE_FN, KEYVAL, EXTRA_STATE, IERROR)` (MPI-1: `INTEGER`
/// values).
///
/// # Safety
/// Fortran's arguments: valid references, procedures of the callbacks' interfaces.
pub unsafe fn keyval_create<const PMPI: bool>(
    copy: *const c_void,
    delete: *const c_void,
    keyval: *mut c_int,
    extra: *mut c_int,
    ierror: *mut c_int,
) {
    // SAFETY: the caller's contract.
    unsafe {
        *ierror = create_keyval::<PMPI>(
            "MPI_KEYVAL_CREATE",
            None,
            copy,
            delete,
            keyval,
            *extra as MpiAint,
        )
    };
}

// --- generalized requests with Fortran callbacks ----------------------------------------------

/// `QUERY_FN(EXTRA_STATE, STATUS, IERROR)`.
type FortranQuery = unsafe extern "C" fn(*mut MpiAint, *mut c_int, *mut c_int);
/// `FREE_FN(EXTRA_STATE, IERROR)`.
type FortranFree = unsafe extern "C" fn(*mut MpiAint, *mut c_int);
/// `CANCEL_FN(EXTRA_STATE, COMPLETE, IERROR)`, `COMPLETE` a `LOGICAL`.
type FortranCancel = unsafe extern "C" fn(*mut MpiAint, *mut c_int, *mut c_int);

/// A generalized request started from Fortran: its callbacks and extra state, the C library's
/// extra state for the request. Free again once the free callback has run (the C library calls
/// it once per request).
pub struct GrequestSlot {
    in_use: AtomicBool,
    query: AtomicUsize,
    free: AtomicUsize,
    cancel: AtomicUsize,
    extra: AtomicUsize,
}

/// How many generalized requests started from Fortran can be alive at once.
pub const GREQUESTS: usize = 1024;

static GREQUEST_SLOTS: [GrequestSlot; GREQUESTS] = [const {
    GrequestSlot {
        in_use: AtomicBool::new(false),
        query: AtomicUsize::new(0),
        free: AtomicUsize::new(0),
        cancel: AtomicUsize::new(0),
        extra: AtomicUsize::new(0),
    }
}; GREQUESTS];

unsafe extern "C" fn grequest_query(extra_state: *mut c_void, status: *mut c_void) -> c_int {
    // SAFETY: the C library passes back the slot given at the start and a status (five ints,
    // Fortran's INTEGER(MPI_STATUS_SIZE)); the slot holds a Fortran procedure of this type.
    unsafe {
        let slot = &*extra_state.cast::<GrequestSlot>();
        let f = core::mem::transmute::<usize, FortranQuery>(slot.query.load(Ordering::Acquire));
        let mut extra = slot.extra.load(Ordering::Relaxed) as MpiAint;
        let mut ierr = rt::SUCCESS;
        f(&mut extra, status.cast(), &mut ierr);
        ierr
    }
}

unsafe extern "C" fn grequest_free(extra_state: *mut c_void) -> c_int {
    // SAFETY: as in grequest_query.
    unsafe {
        let slot = &*extra_state.cast::<GrequestSlot>();
        let f = core::mem::transmute::<usize, FortranFree>(slot.free.load(Ordering::Acquire));
        let mut extra = slot.extra.load(Ordering::Relaxed) as MpiAint;
        let mut ierr = rt::SUCCESS;
        f(&mut extra, &mut ierr);
        slot.in_use.store(false, Ordering::Release);
        ierr
    }
}

unsafe extern "C" fn grequest_cancel(extra_state: *mut c_void, complete: c_int) -> c_int {
    // SAFETY: as in grequest_query.
    unsafe {
        let slot = &*extra_state.cast::<GrequestSlot>();
        let f = core::mem::transmute::<usize, FortranCancel>(slot.cancel.load(Ordering::Acquire));
        let mut extra = slot.extra.load(Ordering::Relaxed) as MpiAint;
        let mut complete = rt::logical_in(complete);
        let mut ierr = rt::SUCCESS;
        f(&mut extra, &mut complete, &mut ierr);
        ierr
    }
}

/// `MPI_GREQUEST_START(QUERY_FN, FREE_FN, CANCEL_FN, EXTRA_STATE, REQUEST, IERROR)` with
/// Fortran callbacks, through C trampolines.
///
/// # Safety
/// Fortran's arguments: valid references, procedures of the callbacks' interfaces.
pub unsafe fn grequest_start<const PMPI: bool>(
    query: *const c_void,
    free: *const c_void,
    cancel: *const c_void,
    extra: *mut MpiAint,
    request: *mut c_int,
    ierror: *mut c_int,
) {
    let taken = GREQUEST_SLOTS.iter().find(|s| {
        s.in_use
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    });
    let Some(slot) = taken else {
        let rc = stormpi_core::capi::report_error(
            "MPI_GREQUEST_START",
            Error::new(
                ErrorClass::NoMem,
                Reason::BadArgument {
                    what: "the Fortran binding's 1024 generalized requests are all alive",
                },
            ),
        );
        // SAFETY: the caller's contract.
        unsafe { *ierror = rc };
        return;
    };
    // SAFETY: the caller's contract.
    slot.extra
        .store(unsafe { *extra } as usize, Ordering::Relaxed);
    slot.free.store(free as usize, Ordering::Relaxed);
    slot.cancel.store(cancel as usize, Ordering::Relaxed);
    slot.query.store(query as usize, Ordering::Release);
    let state = (slot as *const GrequestSlot).cast_mut().cast::<c_void>();
    let rc = call!(
        PMPI,
        MPI_Grequest_start,
        PMPI_Grequest_start(
            grequest_query as *mut c_void,
            grequest_free as *mut c_void,
            grequest_cancel as *mut c_void,
            state,
            request.cast()
        )
    );
    if rc != rt::SUCCESS {
        slot.in_use.store(false, Ordering::Release);
    }
    // SAFETY: the caller's contract.
    unsafe { *ierror = rc };
}

// --- data representations with Fortran conversions ------------------------------------------

/// A Fortran conversion callback: `(USERBUF, DATATYPE, COUNT, FILEBUF, POSITION, EXTRA_STATE,
/// IERROR)`, `COUNT` a default `INTEGER`.
type FortranConversion = unsafe extern "C" fn(
    *mut c_void,
    *mut c_int,
    *mut c_int,
    *mut c_void,
    *mut i64,
    *mut MpiAint,
    *mut c_int,
);
/// The large-count form (`mpi_f08`'s `MPI_Datarep_conversion_function_c`): `COUNT` an
/// `INTEGER(KIND=MPI_COUNT_KIND)`.
type FortranConversionC = unsafe extern "C" fn(
    *mut c_void,
    *mut c_int,
    *mut i64,
    *mut c_void,
    *mut i64,
    *mut MpiAint,
    *mut c_int,
);
/// `DTYPE_FILE_EXTENT_FN(DATATYPE, EXTENT, EXTRA_STATE, IERROR)`.
type FortranExtent = unsafe extern "C" fn(*mut c_int, *mut MpiAint, *mut MpiAint, *mut c_int);

extern "C" {
    fn MPI_Register_datarep_c(
        datarep: *mut c_void,
        read: *mut c_void,
        write: *mut c_void,
        extent: *mut c_void,
        extra: *mut c_void,
    ) -> c_int;
    fn PMPI_Register_datarep_c(
        datarep: *mut c_void,
        read: *mut c_void,
        write: *mut c_void,
        extent: *mut c_void,
        extra: *mut c_void,
    ) -> c_int;
}

/// A data representation registered from Fortran: its callbacks and extra state. The C library
/// holds its address as the representation's extra state and calls the trampolines below.
pub struct DatarepSlot {
    in_use: AtomicBool,
    read: AtomicUsize,
    write: AtomicUsize,
    extent: AtomicUsize,
    extra: AtomicUsize,
    /// Registered by `MPI_Register_datarep_c`: the conversions take a large count.
    large: AtomicBool,
}

/// How many data representations Fortran programs can register (as many as the C library
/// has; registrations last for the process).
pub const DATAREPS: usize = 16;

static DATAREP_SLOTS: [DatarepSlot; DATAREPS] = [const {
    DatarepSlot {
        in_use: AtomicBool::new(false),
        read: AtomicUsize::new(0),
        write: AtomicUsize::new(0),
        extent: AtomicUsize::new(0),
        extra: AtomicUsize::new(0),
        large: AtomicBool::new(false),
    }
}; DATAREPS];

/// Calls a slot's read (or write) conversion with Fortran's arguments.
///
/// # Safety
/// `extra_state` is a slot given to the C library; the buffers are the C library's.
unsafe fn convert(
    write: bool,
    userbuf: *mut c_void,
    datatype: c_int,
    count: i64,
    filebuf: *mut c_void,
    position: i64,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: the caller's contract; the slot holds a Fortran procedure of the interface its
    // `large` flag says (set before the registration published the slot to C).
    unsafe {
        let slot = &*extra_state.cast::<DatarepSlot>();
        let f = if write { &slot.write } else { &slot.read }.load(Ordering::Acquire);
        let (mut dt, mut pos, mut ierr) = (datatype, position, rt::SUCCESS);
        let mut extra = slot.extra.load(Ordering::Relaxed) as MpiAint;
        if slot.large.load(Ordering::Relaxed) {
            let mut n = count;
            let conv = core::mem::transmute::<usize, FortranConversionC>(f);
            conv(
                userbuf, &mut dt, &mut n, filebuf, &mut pos, &mut extra, &mut ierr,
            );
        } else {
            let mut n = count as c_int;
            let conv = core::mem::transmute::<usize, FortranConversion>(f);
            conv(
                userbuf, &mut dt, &mut n, filebuf, &mut pos, &mut extra, &mut ierr,
            );
        }
        ierr
    }
}

unsafe extern "C" fn read_conversion(
    userbuf: *mut c_void,
    datatype: c_int,
    count: c_int,
    filebuf: *mut c_void,
    position: i64,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: the C library passes back the slot given at registration and its buffers.
    unsafe {
        convert(
            false,
            userbuf,
            datatype,
            count as i64,
            filebuf,
            position,
            extra_state,
        )
    }
}

unsafe extern "C" fn write_conversion(
    userbuf: *mut c_void,
    datatype: c_int,
    count: c_int,
    filebuf: *mut c_void,
    position: i64,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: as in read_conversion.
    unsafe {
        convert(
            true,
            userbuf,
            datatype,
            count as i64,
            filebuf,
            position,
            extra_state,
        )
    }
}

unsafe extern "C" fn read_conversion_c(
    userbuf: *mut c_void,
    datatype: c_int,
    count: i64,
    filebuf: *mut c_void,
    position: i64,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: as in read_conversion.
    unsafe {
        convert(
            false,
            userbuf,
            datatype,
            count,
            filebuf,
            position,
            extra_state,
        )
    }
}

unsafe extern "C" fn write_conversion_c(
    userbuf: *mut c_void,
    datatype: c_int,
    count: i64,
    filebuf: *mut c_void,
    position: i64,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: as in read_conversion.
    unsafe {
        convert(
            true,
            userbuf,
            datatype,
            count,
            filebuf,
            position,
            extra_state,
        )
    }
}

unsafe extern "C" fn file_extent(
    datatype: c_int,
    extent: *mut MpiAint,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: the C library passes back the slot given at registration and a place for the
    // extent; the slot holds a Fortran procedure of this type.
    unsafe {
        let slot = &*extra_state.cast::<DatarepSlot>();
        let f = core::mem::transmute::<usize, FortranExtent>(slot.extent.load(Ordering::Acquire));
        let (mut dt, mut ierr) = (datatype, rt::SUCCESS);
        let mut extra = slot.extra.load(Ordering::Relaxed) as MpiAint;
        f(&mut dt, extent, &mut extra, &mut ierr);
        ierr
    }
}

/// Whether a Fortran conversion argument is `MPI_CONVERSION_FN_NULL` (or `_C`) under any of
/// its link names: then the C library gets its null conversion and moves native bytes.
fn is_null_conversion(f: *const c_void) -> bool {
    use crate::bindings as b;
    let nulls: [*const c_void; 9] = [
        b::mpi_conversion_fn_null_ as *const c_void,
        b::mpi_conversion_fn_null__ as *const c_void,
        b::mpi_conversion_fn_null as *const c_void,
        b::MPI_CONVERSION_FN_NULL as *const c_void,
        b::pmpi_conversion_fn_null_ as *const c_void,
        b::pmpi_conversion_fn_null__ as *const c_void,
        b::pmpi_conversion_fn_null as *const c_void,
        b::PMPI_CONVERSION_FN_NULL as *const c_void,
        mpi_conversion_fn_null_c_ as *const c_void,
    ];
    f.is_null() || nulls.contains(&f)
}

/// Registers a data representation with Fortran callbacks through a slot and the trampolines
/// of its count kind.
///
/// # Safety
/// `name` is NUL-terminated; the procedures are of the callbacks' interfaces.
unsafe fn register_datarep_slot<const PMPI: bool>(
    func: &'static str,
    large: bool,
    name: *mut c_void,
    read: *const c_void,
    write: *const c_void,
    extent: *const c_void,
    extra: MpiAint,
) -> c_int {
    let taken = DATAREP_SLOTS.iter().find(|s| {
        s.in_use
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    });
    let Some(slot) = taken else {
        return stormpi_core::capi::report_error(
            func,
            Error::new(
                ErrorClass::NoMem,
                Reason::BadArgument {
                    what: "the Fortran binding's 16 data representations are all registered",
                },
            ),
        );
    };
    slot.extra.store(extra as usize, Ordering::Relaxed);
    slot.large.store(large, Ordering::Relaxed);
    slot.extent.store(extent as usize, Ordering::Relaxed);
    slot.read.store(read as usize, Ordering::Relaxed);
    slot.write.store(write as usize, Ordering::Release);
    let (c_read, c_write): (*mut c_void, *mut c_void) = if large {
        (
            read_conversion_c as *mut c_void,
            write_conversion_c as *mut c_void,
        )
    } else {
        (
            read_conversion as *mut c_void,
            write_conversion as *mut c_void,
        )
    };
    let c_read = if is_null_conversion(read) {
        null_mut()
    } else {
        c_read
    };
    let c_write = if is_null_conversion(write) {
        null_mut()
    } else {
        c_write
    };
    let c_extent = if extent.is_null() {
        null_mut()
    } else {
        file_extent as *mut c_void
    };
    let state = (slot as *const DatarepSlot).cast_mut().cast::<c_void>();
    let rc = if large {
        // SAFETY: the C functions of the library, with the arguments their prototype takes.
        unsafe {
            if PMPI {
                PMPI_Register_datarep_c(name, c_read, c_write, c_extent, state)
            } else {
                MPI_Register_datarep_c(name, c_read, c_write, c_extent, state)
            }
        }
    } else {
        call!(
            PMPI,
            MPI_Register_datarep,
            PMPI_Register_datarep(name, c_read, c_write, c_extent, state)
        )
    };
    if rc != rt::SUCCESS {
        slot.in_use.store(false, Ordering::Release);
    }
    rc
}

/// `MPI_REGISTER_DATAREP(DATAREP, READ_CONVERSION_FN, WRITE_CONVERSION_FN,
/// DTYPE_FILE_EXTENT_FN, EXTRA_STATE, IERROR)` with Fortran callbacks, through C trampolines.
///
/// # Safety
/// Fortran's arguments: valid references, a string of the hidden length, procedures of the
/// callbacks' interfaces.
#[allow(clippy::too_many_arguments)]
pub unsafe fn register_datarep<const PMPI: bool>(
    datarep: *mut c_char,
    read: *const c_void,
    write: *const c_void,
    extent: *const c_void,
    extra: *mut MpiAint,
    ierror: *mut c_int,
    datarep_len: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        *ierror =
            register_datarep_any::<PMPI>(false, datarep, read, write, extent, extra, datarep_len)
    };
}

/// `MPI_Register_datarep_c` of `mpi_f08`: as [`register_datarep`], the conversions taking an
/// `INTEGER(KIND=MPI_COUNT_KIND)` count.
///
/// # Safety
/// As [`register_datarep`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn register_datarep_c<const PMPI: bool>(
    datarep: *mut c_char,
    read: *const c_void,
    write: *const c_void,
    extent: *const c_void,
    extra: *mut MpiAint,
    ierror: *mut c_int,
    datarep_len: usize,
) {
    // SAFETY: the caller's contract.
    unsafe {
        *ierror =
            register_datarep_any::<PMPI>(true, datarep, read, write, extent, extra, datarep_len)
    };
}

/// # Safety
/// As [`register_datarep`].
unsafe fn register_datarep_any<const PMPI: bool>(
    large: bool,
    datarep: *mut c_char,
    read: *const c_void,
    write: *const c_void,
    extent: *const c_void,
    extra: *mut MpiAint,
    datarep_len: usize,
) -> c_int {
    let func = if large {
        "MPI_Register_datarep_c"
    } else {
        "MPI_REGISTER_DATAREP"
    };
    let mut name = [0u8; rt::STRING_IN_MAX];
    // SAFETY: the caller's contract.
    unsafe {
        if !rt::string_in(datarep, datarep_len, &mut name) {
            return rt::string_too_long(func);
        }
        register_datarep_slot::<PMPI>(
            func,
            large,
            name.as_mut_ptr().cast(),
            read,
            write,
            extent,
            *extra,
        )
    }
}

/// `MPI_CONVERSION_FN_NULL_C` of `mpi_f08`: names the null large-count conversion (never
/// called as one: [`register_datarep_c`] hands C its null conversion instead).
///
/// # Safety
/// Fortran's arguments: valid references.
#[no_mangle]
pub unsafe extern "C" fn mpi_conversion_fn_null_c_(
    _userbuf: *mut c_void,
    _datatype: *mut c_int,
    _count: *mut i64,
    _filebuf: *mut c_void,
    _position: *mut i64,
    _extra: *mut MpiAint,
    ierror: *mut c_int,
) {
    // SAFETY: the caller's contract.
    unsafe { *ierror = rt::SUCCESS };
}

// --- the predefined callbacks, Fortran's forms -----------------------------------------------

macro_rules! copy_fns {
    ($($name:ident, $ty:ty, $dup:expr;)*) => {$(
        #[doc = concat!("`MPI_", stringify!($name), "`: the predefined copy callback, Fortran's form.")]
        ///
        /// # Safety
        /// Fortran's arguments: valid references.
        pub unsafe fn $name<const PMPI: bool>(_oldobj: *mut c_int, _keyval: *mut c_int, _extra: *mut $ty, input: *mut $ty, out: *mut $ty, flag: *mut c_int, ierror: *mut c_int) {
            // SAFETY: the caller's contract.
            unsafe {
                if $dup {
                    *out = *input;
                    *flag = rt::TRUE;
                } else {
                    *flag = rt::FALSE;
                }
                *ierror = rt::SUCCESS;
            }
        }
    )*};
}

copy_fns! {
    comm_dup_fn, MpiAint, true;
    comm_null_copy_fn, MpiAint, false;
    type_dup_fn, MpiAint, true;
    type_null_copy_fn, MpiAint, false;
    win_dup_fn, MpiAint, true;
    win_null_copy_fn, MpiAint, false;
    dup_fn, c_int, true;
    null_copy_fn, c_int, false;
}

macro_rules! delete_fns {
    ($($name:ident, $ty:ty;)*) => {$(
        #[doc = concat!("`MPI_", stringify!($name), "`: the predefined delete callback, Fortran's form.")]
        ///
        /// # Safety
        /// Fortran's arguments: valid references.
        pub unsafe fn $name<const PMPI: bool>(_obj: *mut c_int, _keyval: *mut c_int, _value: *mut $ty, _extra: *mut $ty, ierror: *mut c_int) {
            // SAFETY: the caller's contract.
            unsafe { *ierror = rt::SUCCESS };
        }
    )*};
}

delete_fns! {
    comm_null_delete_fn, MpiAint;
    type_null_delete_fn, MpiAint;
    win_null_delete_fn, MpiAint;
    null_delete_fn, c_int;
}

/// `MPI_CONVERSION_FN_NULL`: names the null conversion (never called as one:
/// [`register_datarep`] hands C its null conversion instead).
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn conversion_fn_null<const PMPI: bool>(
    _userbuf: *mut c_void,
    _datatype: *mut c_int,
    _count: *mut c_int,
    _filebuf: *mut c_void,
    _position: *mut i64,
    _extra: *mut MpiAint,
    ierror: *mut c_int,
) {
    // SAFETY: the caller's contract.
    unsafe { *ierror = rt::SUCCESS };
}

/// `MPI_F_SYNC_REG(BUF)`: makes the compiler assume `buf` changed; the call itself does that.
///
/// # Safety
/// None.
pub unsafe fn f_sync_reg<const PMPI: bool>(buf: *mut c_void) {
    core::hint::black_box(buf);
}

/// `MPI_INFO_CREATE_ENV(INFO, IERROR)`: Fortran passes no arguments of the program.
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn info_create_env<const PMPI: bool>(info: *mut c_int, ierror: *mut c_int) {
    let rc = call!(
        PMPI,
        MPI_Info_create_env,
        PMPI_Info_create_env(0, null_mut(), info.cast())
    );
    // SAFETY: the caller's contract.
    unsafe { *ierror = rc };
}

// --- the rest ----------------------------------------------------------------------------------

/// `MPI_BUFFER_DETACH(BUFFER_ADDR, SIZE, IERROR)`: the address C hands back has no Fortran use.
///
/// # Safety
/// Fortran's arguments: valid references.
pub unsafe fn buffer_detach<const PMPI: bool>(
    _buffer: *mut c_void,
    size: *mut c_int,
    ierror: *mut c_int,
) {
    let mut addr: *mut c_void = null_mut();
    let a = (&mut addr as *mut *mut c_void).cast::<c_void>();
    let rc = call!(PMPI, MPI_Buffer_detach, PMPI_Buffer_detach(a, size.cast()));
    // SAFETY: the caller's contract.
    unsafe { *ierror = rc };
}

/// `MPI_INFO_GET_STRING(INFO, KEY, BUFLEN, VALUE, FLAG, IERROR)`: `BUFLEN` is Fortran's length
/// of `VALUE` in, the value's length out (no NUL in either).
///
/// # Safety
/// Fortran's arguments: valid references, strings of the hidden lengths.
#[allow(clippy::too_many_arguments)]
pub unsafe fn info_get_string<const PMPI: bool>(
    info: *mut c_int,
    key: *mut c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
    ierror: *mut c_int,
    key_len: usize,
    value_len: usize,
) {
    let mut k = [0u8; rt::STRING_IN_MAX];
    let mut v = [0u8; rt::INFO_VALUE_MAX as usize + 1];
    // SAFETY: the caller's contract.
    unsafe {
        if !rt::info_string_in(key, key_len, &mut k) {
            *ierror = rt::string_too_long("MPI_INFO_GET_STRING");
            return;
        }
        let cap = (*buflen)
            .clamp(0, rt::INFO_VALUE_MAX)
            .min(value_len as c_int);
        let mut c_len: c_int = cap + 1;
        let mut f: c_int = 0;
        let rc = call!(
            PMPI,
            MPI_Info_get_string,
            PMPI_Info_get_string(
                *info,
                k.as_mut_ptr().cast(),
                (&mut c_len as *mut c_int).cast(),
                v.as_mut_ptr().cast(),
                (&mut f as *mut c_int).cast(),
            )
        );
        if rc == rt::SUCCESS {
            if f != 0 {
                rt::string_out(value, value_len, &v);
                *buflen = (c_len - 1).max(0);
            }
            *flag = rt::logical_in(f);
        }
        *ierror = rc;
    }
}

/// `MPI_SESSION_GET_NTH_PSET(SESSION, INFO, N, PSET_LEN, PSET_NAME, IERROR)`: `PSET_LEN` is
/// Fortran's length of `PSET_NAME` in (0: only ask the length), the name's length out; neither
/// counts a NUL, and C is never handed more room than the buffer here has.
///
/// # Safety
/// Fortran's arguments: valid references, a string of the hidden length.
pub unsafe fn session_get_nth_pset<const PMPI: bool>(
    session: *mut c_int,
    info: *mut c_int,
    n: *mut c_int,
    pset_len: *mut c_int,
    pset_name: *mut c_char,
    ierror: *mut c_int,
    pset_name_len: usize,
) {
    let mut name = [0u8; rt::STRING_IN_MAX];
    // SAFETY: the caller's contract.
    unsafe {
        let want = (*pset_len).max(0);
        let mut c_len: c_int = if want == 0 {
            0
        } else {
            want.min(name.len() as c_int - 1) + 1
        };
        let rc = call!(
            PMPI,
            MPI_Session_get_nth_pset,
            PMPI_Session_get_nth_pset(
                *session,
                *info,
                *n,
                (&mut c_len as *mut c_int).cast(),
                name.as_mut_ptr().cast(),
            )
        );
        if rc == rt::SUCCESS {
            if want > 0 {
                rt::string_out(pset_name, pset_name_len, &name);
            }
            *pset_len = (c_len - 1).max(0);
        }
        *ierror = rc;
    }
}

/// Bytes of the strings (program names and arguments, each with its NUL) one spawn call hands
/// to C, and how many arguments of all its commands.
const SPAWN_BYTES: usize = 32 * 1024;
const SPAWN_ARGS: usize = 1024;
/// Most commands of one `MPI_COMM_SPAWN_MULTIPLE` (as stormrun's PMI server takes).
const SPAWN_COMMANDS: usize = 64;

/// The C strings and argument lists of one spawn call, built from Fortran's blank-padded rows
/// in fixed room (the binding allocates nothing).
struct SpawnText {
    bytes: [u8; SPAWN_BYTES],
    used: usize,
    args: [*mut c_char; SPAWN_ARGS],
    nargs: usize,
}

impl SpawnText {
    fn new() -> SpawnText {
        SpawnText {
            bytes: [0; SPAWN_BYTES],
            used: 0,
            args: [null_mut(); SPAWN_ARGS],
            nargs: 0,
        }
    }

    /// Copies Fortran string `s` of `len` bytes without its trailing blanks; its offset.
    ///
    /// # Safety
    /// `s` points to `len` readable bytes.
    unsafe fn push(&mut self, s: *const c_char, len: usize) -> Result<usize, &'static str> {
        let at = self.used;
        // SAFETY: the caller's contract.
        if !unsafe { rt::string_in(s, len, &mut self.bytes[at..]) } {
            return Err(
                "the program names and arguments of a spawn exceed the Fortran binding's 32 KiB",
            );
        }
        let n = self.bytes[at..].iter().position(|&b| b == 0).unwrap_or(0);
        self.used = at + n + 1;
        Ok(at)
    }

    /// Appends the argument list of rows `row(0)`, `row(1)`, ... (each `len` bytes) up to the
    /// first blank one, then a null; the index of its first pointer. A pointer is the offset
    /// into `bytes` until [`SpawnText::fix`].
    ///
    /// # Safety
    /// Every row up to the first blank one is readable (the standard's terminator).
    unsafe fn push_list(
        &mut self,
        len: usize,
        row: impl Fn(usize) -> *const c_char,
    ) -> Result<usize, &'static str> {
        let first = self.nargs;
        let mut j = 0;
        loop {
            let r = row(j);
            // SAFETY: the caller's contract.
            let blank = len == 0
                || unsafe { core::slice::from_raw_parts(r.cast::<u8>(), len) }
                    .iter()
                    .all(|&b| b == b' ');
            if self.nargs + 1 >= SPAWN_ARGS {
                return Err("the arguments of a spawn exceed the Fortran binding's 1024");
            }
            if blank {
                self.args[self.nargs] = null_mut();
                self.nargs += 1;
                return Ok(first);
            }
            // SAFETY: as above.
            let at = unsafe { self.push(r, len)? };
            self.args[self.nargs] = core::ptr::without_provenance_mut(at + 1);
            self.nargs += 1;
            j += 1;
        }
    }

    /// Turns the offsets the lists hold (plus one, so that 0 stays the terminator) into
    /// pointers, once no string moves any more.
    fn fix(&mut self) {
        let base = self.bytes.as_mut_ptr();
        for p in &mut self.args[..self.nargs] {
            if !p.is_null() {
                // SAFETY: every offset is inside `bytes` (push returned it).
                *p = unsafe { base.add(p.addr() - 1) }.cast();
            }
        }
    }

    fn string(&mut self, at: usize) -> *mut c_char {
        // SAFETY: `at` came from push.
        unsafe { self.bytes.as_mut_ptr().add(at) }.cast()
    }
}

fn spawn_error(func: &'static str, what: &'static str) -> c_int {
    stormpi_core::capi::report_error(
        func,
        Error::new(ErrorClass::Arg, Reason::BadArgument { what }),
    )
}

/// `MPI_COMM_SPAWN(COMMAND, ARGV, MAXPROCS, INFO, ROOT, COMM, INTERCOMM, ARRAY_OF_ERRCODES,
/// IERROR)`: `COMMAND` without its trailing blanks; `ARGV` rows of `argv_len` bytes up to the
/// first blank one (`MPI_ARGV_NULL`: none); `MPI_ERRCODES_IGNORE` is C's.
///
/// # Safety
/// Fortran's arguments: valid references, `ARGV` ending in a blank row.
#[allow(clippy::too_many_arguments)]
pub unsafe fn comm_spawn<const PMPI: bool>(
    command: *mut c_char,
    argv: *mut c_char,
    maxprocs: *mut c_int,
    info: *mut c_int,
    root: *mut c_int,
    comm: *mut c_int,
    intercomm: *mut c_int,
    array_of_errcodes: *mut c_int,
    ierror: *mut c_int,
    command_len: usize,
    argv_len: usize,
) {
    let mut t = SpawnText::new();
    // SAFETY: the caller's contract.
    let built = unsafe {
        t.push(command, command_len).and_then(|cmd| {
            let list = if rt::argv_null(argv) {
                None
            } else {
                Some(t.push_list(argv_len, |j| argv.add(j * argv_len).cast_const())?)
            };
            Ok((cmd, list))
        })
    };
    let (cmd, list) = match built {
        Ok(b) => b,
        Err(what) => {
            // SAFETY: the caller's contract.
            unsafe { *ierror = spawn_error("MPI_Comm_spawn", what) };
            return;
        }
    };
    t.fix();
    let argv_c: *mut c_void = match list {
        // SAFETY: `i` indexes the list push_list made.
        Some(i) => unsafe { t.args.as_mut_ptr().add(i) }.cast(),
        None => null_mut(),
    };
    let cmd = t.string(cmd);
    // The strings live in `t`; the references are the caller's (the macro's SAFETY).
    let rc = call!(
        PMPI,
        MPI_Comm_spawn,
        PMPI_Comm_spawn(
            cmd.cast(),
            argv_c,
            *maxprocs,
            *info,
            *root,
            *comm,
            intercomm.cast(),
            rt::errcodes(array_of_errcodes)
        )
    );
    // SAFETY: the caller's contract.
    unsafe { *ierror = rc };
}

/// `MPI_COMM_SPAWN_MULTIPLE(COUNT, ARRAY_OF_COMMANDS, ARRAY_OF_ARGV, ARRAY_OF_MAXPROCS,
/// ARRAY_OF_INFO, ROOT, COMM, INTERCOMM, ARRAY_OF_ERRCODES, IERROR)`: `ARRAY_OF_ARGV(I, J)` is
/// argument `J` of command `I` (column-major: rows `COUNT` apart), each command's list ending
/// at its first blank entry; `MPI_ARGVS_NULL`: no arguments for any.
///
/// # Safety
/// Fortran's arguments: valid references, each command's arguments ending in a blank entry.
#[allow(clippy::too_many_arguments)]
pub unsafe fn comm_spawn_multiple<const PMPI: bool>(
    count: *mut c_int,
    array_of_commands: *mut c_char,
    array_of_argv: *mut c_char,
    array_of_maxprocs: *mut c_int,
    array_of_info: *mut c_int,
    root: *mut c_int,
    comm: *mut c_int,
    intercomm: *mut c_int,
    array_of_errcodes: *mut c_int,
    ierror: *mut c_int,
    array_of_commands_len: usize,
    array_of_argv_len: usize,
) {
    const FUNC: &str = "MPI_Comm_spawn_multiple";
    // SAFETY: the caller's contract.
    let n = unsafe { *count };
    if n <= 0 || n as usize > SPAWN_COMMANDS {
        let what = if n <= 0 {
            "the count of commands to MPI_COMM_SPAWN_MULTIPLE is not positive"
        } else {
            "more than 64 commands to MPI_COMM_SPAWN_MULTIPLE"
        };
        // SAFETY: the caller's contract.
        unsafe { *ierror = spawn_error(FUNC, what) };
        return;
    }
    let n = n as usize;
    let mut t = SpawnText::new();
    let mut cmds = [0usize; SPAWN_COMMANDS];
    let mut lists = [0usize; SPAWN_COMMANDS];
    let no_args = rt::argvs_null(array_of_argv);
    let (cl, al) = (array_of_commands_len, array_of_argv_len);
    let mut built = Ok(());
    for i in 0..n {
        // SAFETY: the caller's contract: `count` commands, and each command's arguments up to
        // a blank entry, `count` entries apart.
        let r = unsafe {
            t.push(array_of_commands.add(i * cl), cl).and_then(|c| {
                cmds[i] = c;
                if !no_args {
                    lists[i] = t.push_list(al, |j| array_of_argv.add((i + j * n) * al))?;
                }
                Ok(())
            })
        };
        if r.is_err() {
            built = r;
            break;
        }
    }
    if let Err(what) = built {
        // SAFETY: the caller's contract.
        unsafe { *ierror = spawn_error(FUNC, what) };
        return;
    }
    t.fix();
    let mut cmd_ptrs = [null_mut::<c_char>(); SPAWN_COMMANDS];
    let mut argv_ptrs = [null_mut::<*mut c_char>(); SPAWN_COMMANDS];
    for i in 0..n {
        cmd_ptrs[i] = t.string(cmds[i]);
        if !no_args {
            // SAFETY: `lists[i]` indexes the list push_list made.
            argv_ptrs[i] = unsafe { t.args.as_mut_ptr().add(lists[i]) };
        }
    }
    let argvs: *mut c_void = if no_args {
        null_mut()
    } else {
        argv_ptrs.as_mut_ptr().cast()
    };
    // The strings live in `t`; the references are the caller's (the macro's SAFETY).
    let rc = call!(
        PMPI,
        MPI_Comm_spawn_multiple,
        PMPI_Comm_spawn_multiple(
            n as c_int,
            cmd_ptrs.as_mut_ptr().cast(),
            argvs,
            array_of_maxprocs.cast(),
            array_of_info.cast(),
            *root,
            *comm,
            intercomm.cast(),
            rt::errcodes(array_of_errcodes)
        )
    );
    // SAFETY: the caller's contract.
    unsafe { *ierror = rc };
}
