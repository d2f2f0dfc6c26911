//! Attribute caching (keyvals; communicator, datatype and window attributes, the deprecated
//! `MPI_Keyval_*`/`MPI_Attr_*` forms), the predefined attributes, object names, and the hooks
//! that run copy and delete callbacks when communicators and datatypes are duplicated and freed,
//! and when `MPI_Finalize` deletes `MPI_COMM_SELF`'s attributes.
//!
//! The table is the engine's ([`crate::attr::AttrTable`]); callbacks are the user's C functions
//! and may call MPI, so they run with no lock held: each step takes the engine, reads what to
//! call, lets it go, calls, and takes it again to store the result.
//!
//! A callback's error code fails the call that ran it, through the object's error handler: a
//! copy callback fails the duplication (the copies already made are deleted and the new object
//! freed); a delete callback fails `MPI_*_delete_attr`, a `MPI_*_set_attr` that replaces a value,
//! and `MPI_Comm_free`/`MPI_Type_free` (the object and the attribute stay).
//!
//! Keyval handles are direct keyval handles that name the object kind in bits 22–25, as the
//! predefined ones do: `index | gen << 16 | kind << 22`.

use core::ffi::{c_char, c_int, c_void, CStr};
use core::ptr::null_mut;
use core::sync::atomic::{AtomicI32, Ordering};

use super::abi::{self, HandleKind, ObjectKind};
use super::env::{code, run, run_comm};
use super::errors::{report, report_code, write_bytes};
use super::handles::{self, datatype, datatype_handle, out};
use crate::api::ENGINE;
use crate::attr::{Callbacks, CopyFn, DeleteFn, KeyvalId, ObjKind, Object, KEYVAL_GENS};
use crate::comm::{CommHints, CommId};
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::info::InfoId;
use crate::pml::request::TAG_UB;

/// Runs `f` on the engine, if there is one (no error reporting: for the callback steps).
fn with_engine<T>(f: impl FnOnce(&mut Engine) -> T) -> Option<T> {
    ENGINE.enter().map(|mut cx| f(cx.e()))
}

// ---- keyval handles ---------------------------------------------------------------------------

const KEYVAL_DIRECT: c_int = abi::make_handle(HandleKind::Direct, ObjectKind::Keyval, 0);

fn kind_bits(kind: ObjKind) -> u32 {
    match kind {
        ObjKind::Comm => ObjectKind::Comm as u32,
        ObjKind::Type => ObjectKind::Datatype as u32,
        ObjKind::Win => ObjectKind::Win as u32,
    }
}

/// The handle of keyval `kv` of objects of `kind`.
fn keyval_handle(kv: KeyvalId, kind: ObjKind) -> c_int {
    KEYVAL_DIRECT
        | (kind_bits(kind) << abi::KEYVAL_OBJECT_SHIFT) as c_int
        | (c_int::from(kv.gen) << 16)
        | c_int::from(kv.index)
}

/// The keyval a user's handle names, which must be one of objects of `kind` (the table checks
/// that it is live).
fn keyval(h: c_int, kind: ObjKind) -> Result<KeyvalId> {
    let bad = |what| Error::new(ErrorClass::Keyval, Reason::BadArgument { what });
    if abi::builtin_keyval_object(h).is_some() {
        return Err(bad(
            "a predefined attribute's keyval cannot be used here (it cannot be set, deleted or freed)",
        ));
    }
    if abi::handle_kind(h) != HandleKind::Direct
        || abi::handle_object(h) != Some(ObjectKind::Keyval)
    {
        return Err(bad("not an attribute keyval"));
    }
    let i = abi::handle_index(h);
    if (i & abi::KEYVAL_OBJECT_MASK) >> abi::KEYVAL_OBJECT_SHIFT != kind_bits(kind) {
        return Err(bad("the keyval belongs to another kind of object"));
    }
    let gen = (i >> 16) & 0x3f;
    debug_assert!(gen < u32::from(KEYVAL_GENS));
    Ok(KeyvalId {
        index: (i & 0xffff) as u16,
        gen: gen as u8,
    })
}

// ---- callbacks --------------------------------------------------------------------------------

/// The handle an object's callbacks get.
fn object_handle(obj: Object) -> c_int {
    match obj.kind {
        ObjKind::Comm => handles::comm_handle(CommId(obj.id)),
        ObjKind::Type => datatype_handle(Datatype::from_index(obj.id)),
        ObjKind::Win => abi::make_handle(HandleKind::Direct, ObjectKind::Win, obj.id),
    }
}

/// The communicator whose error handler reports errors about `obj`.
fn error_comm(obj: Object) -> Option<CommId> {
    match obj.kind {
        ObjKind::Comm => Some(CommId(obj.id)),
        _ => None,
    }
}

/// Runs the delete callback of `a` (set on `obj`); its code if it failed.
fn call_delete(obj: Object, a: &crate::attr::AttrRef) -> c_int {
    match a.cb.delete {
        None => abi::MPI_SUCCESS,
        // SAFETY: the user's callback, called as MPI calls it; no lock is held.
        Some(d) => unsafe {
            d(
                object_handle(obj),
                keyval_handle(a.keyval, obj.kind),
                a.value as *mut c_void,
                a.cb.extra as *mut c_void,
            )
        },
    }
}

/// How [`delete_all`] treats a failing delete callback.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OnError {
    /// Stop and report it (the attribute and the later-set ones stay).
    Stop,
    /// Report it, keep the attribute and go on with the others.
    Report,
    /// Go on silently (undoing a failed duplication).
    Ignore,
}

/// Deletes every attribute of `obj`, latest set first, running delete callbacks.
fn delete_all(
    func: &'static str,
    obj: Object,
    on_error: OnError,
) -> core::result::Result<(), c_int> {
    let mut before = u64::MAX;
    let mut failed = None;
    while let Some(a) = with_engine(|e| e.objects.attrs.last_before(obj, before)).flatten() {
        before = a.seq;
        let rc = call_delete(obj, &a);
        if rc != abi::MPI_SUCCESS {
            if on_error == OnError::Ignore {
                continue;
            }
            let code = report_code(
                func,
                error_comm(obj),
                rc,
                "an attribute delete callback failed",
            );
            if on_error == OnError::Stop {
                return Err(code);
            }
            failed.get_or_insert(code);
            continue;
        }
        with_engine(|e| {
            // Unless the callback itself replaced or deleted it.
            if e.objects
                .attrs
                .find(obj, a.keyval)
                .is_some_and(|x| x.seq == a.seq)
            {
                e.objects.attrs.remove(obj, a.keyval);
            }
        });
    }
    failed.map_or(Ok(()), Err)
}

/// Runs the copy callbacks of `from`'s attributes, in the order they were set, and caches the
/// copies they make on `to`. On failure the copies made so far are deleted and the reported
/// code is returned.
fn copy_all(func: &'static str, from: Object, to: Object) -> core::result::Result<(), c_int> {
    let mut after = 0;
    while let Some(a) = with_engine(|e| e.objects.attrs.next_after(from, after)).flatten() {
        after = a.seq;
        let Some(copy) = a.cb.copy else { continue };
        let mut value: *mut c_void = null_mut();
        let mut flag: c_int = 0;
        // SAFETY: the user's callback, called as MPI calls it; no lock is held.
        let rc = unsafe {
            copy(
                object_handle(from),
                keyval_handle(a.keyval, from.kind),
                a.cb.extra as *mut c_void,
                a.value as *mut c_void,
                (&mut value as *mut *mut c_void).cast(),
                &mut flag,
            )
        };
        if rc != abi::MPI_SUCCESS {
            let _ = delete_all(func, to, OnError::Ignore);
            return Err(report_code(
                func,
                error_comm(from),
                rc,
                "an attribute copy callback failed",
            ));
        }
        if flag == 0 {
            continue;
        }
        let stored = with_engine(|e| e.objects.attrs.set_copy(to, a.keyval, value as usize));
        if let Some(Err(err)) = stored {
            // No room for the copy: undo it as well as the earlier ones.
            let made = crate::attr::AttrRef {
                value: value as usize,
                ..a
            };
            call_delete(to, &made);
            let _ = delete_all(func, to, OnError::Ignore);
            return Err(report(func, error_comm(from), err));
        }
    }
    Ok(())
}

/// What hints a duplicated communicator gets.
pub(crate) enum Hints {
    /// Its parent's (`MPI_Comm_dup`).
    Inherit,
    /// These (`MPI_Comm_dup_with_info`; `None` for `MPI_INFO_NULL`).
    Set(Option<InfoId>),
}

/// Completes a duplication `old` → `new` the engine made: the new communicator gets no name, its
/// hints, and copies of `old`'s attributes made by their copy callbacks; its handle is written
/// to `newcomm`. When a copy callback fails, `new` is freed again and `newcomm` is
/// `MPI_COMM_NULL`.
///
/// # Safety
/// `newcomm` points to an `MPI_Comm`.
pub(crate) unsafe fn comm_duplicated(
    func: &'static str,
    old: CommId,
    new: CommId,
    hints: Hints,
    newcomm: *mut abi::MPI_Comm,
) -> c_int {
    let to = Object::comm(new.0);
    with_engine(|e| {
        // Whatever a communicator that had this slot before left behind (one freed through the
        // Rust API, say) is not this one's.
        e.objects.attrs.purge(to);
        // Hints may be ignored: when there is no room to keep them, they are dropped.
        let _ = match hints {
            Hints::Inherit => Ok(e.objects.infos.copy_comm_hints(old.0, new.0)),
            Hints::Set(info) => {
                // The new communicator's assertions are those `info` names, not its parent's.
                let flags = match info {
                    Some(i) => super::info::hints_from(&e.objects.infos, CommHints::empty(), i)
                        .unwrap_or_default(),
                    None => CommHints::empty(),
                };
                let _ = e.p2p.set_hints(new, flags);
                e.objects.infos.set_comm_hints(new.0, info)
            }
        };
    });
    match copy_all(func, Object::comm(old.0), to) {
        Ok(()) => {
            // SAFETY: the caller's contract.
            unsafe { *newcomm = handles::comm_handle(new) };
            abi::MPI_SUCCESS
        }
        Err(code) => {
            with_engine(|e| {
                let _ = e.comm_free(new);
                comm_freed(e, new);
            });
            // SAFETY: the caller's contract.
            unsafe { *newcomm = abi::MPI_COMM_NULL };
            code
        }
    }
}

/// Runs the delete callbacks of the attributes of communicator handle `h` before
/// `MPI_Comm_free` frees it (only when the free can succeed: a live, non-predefined
/// communicator). A failing callback fails the free.
pub(crate) fn comm_freeing(
    func: &'static str,
    h: abi::MPI_Comm,
) -> core::result::Result<(), c_int> {
    let Ok(c) = handles::comm(h) else {
        return Ok(());
    };
    let live = with_engine(|e| e.comm(c).is_ok()).unwrap_or(false);
    if c == CommId::WORLD || c == CommId::SELF || !live {
        return Ok(());
    }
    delete_all(func, Object::comm(c.0), OnError::Stop)
}

/// Forgets the attributes, name and hints of freed communicator `c` (its delete callbacks ran).
pub(crate) fn comm_freed(e: &mut Engine, c: CommId) {
    e.objects.attrs.purge(Object::comm(c.0));
    e.objects.infos.drop_comm_hints(c.0);
}

/// Completes `MPI_Type_dup` of `old` into the type whose handle is at `newtype`: copies the
/// attributes; when a copy callback fails, frees the new type and writes `MPI_DATATYPE_NULL`.
///
/// # Safety
/// `newtype` points to the new type's handle.
pub(crate) unsafe fn type_duplicated(
    func: &'static str,
    old: abi::MPI_Datatype,
    newtype: *mut abi::MPI_Datatype,
) -> c_int {
    // SAFETY: the caller's contract.
    let new = unsafe { *newtype };
    let (Ok(o), Ok(n)) = (datatype(old), datatype(new)) else {
        return abi::MPI_SUCCESS;
    };
    let to = Object::datatype(n.index());
    with_engine(|e| e.objects.attrs.purge(to));
    match copy_all(func, Object::datatype(o.index()), to) {
        Ok(()) => abi::MPI_SUCCESS,
        Err(code) => {
            with_engine(|e| {
                let _ = e.types_mut().free(n);
                e.objects.attrs.purge(to);
            });
            // SAFETY: the caller's contract.
            unsafe { *newtype = abi::MPI_DATATYPE_NULL };
            code
        }
    }
}

/// Runs the delete callbacks of the attributes of datatype handle `h` before `MPI_Type_free`
/// frees it (only for a derived type that exists). A failing callback fails the free.
pub(crate) fn type_freeing(
    func: &'static str,
    h: abi::MPI_Datatype,
) -> core::result::Result<(), c_int> {
    let Ok(d) = datatype(h) else { return Ok(()) };
    let live = with_engine(|e| e.types().info(d).is_ok()).unwrap_or(false);
    if d.is_predefined() || !live {
        return Ok(());
    }
    delete_all(func, Object::datatype(d.index()), OnError::Stop)
}

/// The start of `MPI_Win_free`: runs the delete callbacks of window `h`'s attributes (none
/// of which may fail for the free to go on).
pub(crate) fn win_freeing(func: &'static str, h: abi::MPI_Win) -> core::result::Result<(), c_int> {
    let live = with_engine(|e| super::win::win_id(e, h).is_ok()).unwrap_or(false);
    if !live {
        return Ok(());
    }
    delete_all(func, Object::win(abi::handle_index(h)), OnError::Stop)
}

/// Forgets the attributes of freed window `h`.
pub(crate) fn win_freed(e: &mut Engine, h: abi::MPI_Win) {
    e.objects.attrs.purge(Object::win(abi::handle_index(h)));
}

fn win_object(e: &Engine, h: abi::MPI_Win) -> Result<Object> {
    super::win::win_id(e, h)?;
    Ok(Object::win(abi::handle_index(h)))
}

/// Forgets the attributes and name of freed datatype `d`.
pub(crate) fn type_freed(e: &mut Engine, d: Datatype) {
    e.objects.attrs.purge(Object::datatype(d.index()));
}

/// The start of `MPI_Finalize`: deletes `MPI_COMM_SELF`'s attributes, in the reverse order of
/// their setting, while MPI is still fully usable (the standard's rule), then `MPI_COMM_WORLD`'s
/// the same way (as MPICH and Open MPI do: programs free resources in those callbacks). A failing
/// callback is reported; the others still run.
pub(crate) fn finalize_attributes() {
    for comm in [CommId::SELF, CommId::WORLD] {
        let _ = delete_all("MPI_Finalize", Object::comm(comm.0), OnError::Report);
    }
}

// ---- attribute functions ----------------------------------------------------------------------

// Values the predefined attributes point to; C reads them through `*(int **)attribute_val`.
static TAG_UB_VALUE: c_int = TAG_UB;
static HOST_VALUE: c_int = abi::MPI_PROC_NULL;
static IO_VALUE: c_int = abi::MPI_ANY_SOURCE;
static WTIME_IS_GLOBAL_VALUE: c_int = 0;
static LASTUSEDCODE: AtomicI32 = AtomicI32::new(abi::MPI_ERR_LASTCODE);
static UNIVERSE_SIZE: AtomicI32 = AtomicI32::new(0);
static APPNUM: AtomicI32 = AtomicI32::new(0);

/// The value of a predefined communicator attribute: `Ok(None)` when it is not set (e.g.
/// `MPI_APPNUM` outside an MPMD job, or a window attribute); `Err` when `keyval` is not
/// predefined.
fn predefined(e: &Engine, keyval: c_int) -> core::result::Result<Option<*const c_int>, ()> {
    UNIVERSE_SIZE.store(e.size() as i32, Ordering::Relaxed);
    let appnum = e.appnum();
    APPNUM.store(appnum.unwrap_or(0) as i32, Ordering::Relaxed);
    LASTUSEDCODE.store(
        e.objects.errh.last_used(abi::MPI_ERR_LASTCODE),
        Ordering::Relaxed,
    );
    Ok(match keyval {
        abi::MPI_TAG_UB => Some(&TAG_UB_VALUE),
        abi::MPI_HOST => Some(&HOST_VALUE),
        abi::MPI_IO => Some(&IO_VALUE),
        abi::MPI_WTIME_IS_GLOBAL => Some(&WTIME_IS_GLOBAL_VALUE),
        abi::MPI_LASTUSEDCODE => Some(LASTUSEDCODE.as_ptr() as *const c_int),
        abi::MPI_UNIVERSE_SIZE => Some(UNIVERSE_SIZE.as_ptr() as *const c_int),
        abi::MPI_APPNUM => appnum.map(|_| APPNUM.as_ptr() as *const c_int),
        k if abi::builtin_keyval_object(k).is_some() => None,
        _ => return Err(()),
    })
}

/// Writes an attribute lookup's result: `*flag`, and `*(void **)attribute_val` when found.
unsafe fn put_value(
    attribute_val: *mut c_void,
    flag: *mut c_int,
    value: Option<usize>,
) -> Result<()> {
    // SAFETY: MPI requires `flag` to point to an int and `attribute_val` to a `void *`.
    unsafe {
        out(flag, value.is_some() as c_int)?;
        if let Some(v) = value {
            out(attribute_val.cast::<usize>(), v)?;
        }
    }
    Ok(())
}

unsafe fn comm_get_attr(
    func: &'static str,
    comm: abi::MPI_Comm,
    keyval_: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    code(run_comm(func, comm, |e, c| {
        e.comm(c)?;
        let value = match predefined(e, keyval_) {
            Ok(v) => v.map(|p| p as usize),
            Err(()) => e
                .objects
                .attrs
                .get(Object::comm(c.0), keyval(keyval_, ObjKind::Comm)?)?,
        };
        // SAFETY: the caller's contract.
        unsafe { put_value(attribute_val, flag, value) }
    }))
}

/// Sets an attribute, running the delete callback of the value it replaces first.
fn set_attr(
    func: &'static str,
    comm: Option<CommId>,
    resolve: impl FnOnce(&Engine) -> Result<Object>,
    keyval_: c_int,
    kind: ObjKind,
    value: *mut c_void,
) -> c_int {
    let r = run(func, comm, |e| {
        let obj = resolve(e)?;
        let kv = keyval(keyval_, kind)?;
        e.objects.attrs.check_keyval(kv, kind)?;
        // Fail before any callback runs.
        e.objects.attrs.check_room(obj, kv)?;
        Ok((obj, kv, e.objects.attrs.find(obj, kv)))
    });
    let (obj, kv, old) = match r {
        Ok(x) => x,
        Err(code) => return code,
    };
    if let Some(old) = old {
        let rc = call_delete(obj, &old);
        if rc != abi::MPI_SUCCESS {
            return report_code(
                func,
                comm,
                rc,
                "the delete callback of the replaced attribute failed",
            );
        }
    }
    code(run(func, comm, |e| {
        e.objects.attrs.set(obj, kv, value as usize)
    }))
}

/// Deletes an attribute, running its delete callback first (nothing happens if it is not set).
fn delete_attr(
    func: &'static str,
    comm: Option<CommId>,
    resolve: impl FnOnce(&Engine) -> Result<Object>,
    keyval_: c_int,
    kind: ObjKind,
) -> c_int {
    let r = run(func, comm, |e| {
        let obj = resolve(e)?;
        let kv = keyval(keyval_, kind)?;
        e.objects.attrs.check_keyval(kv, kind)?;
        Ok((obj, e.objects.attrs.find(obj, kv)))
    });
    let (obj, a) = match r {
        Ok((obj, Some(a))) => (obj, a),
        Ok((_, None)) => return abi::MPI_SUCCESS,
        Err(code) => return code,
    };
    let rc = call_delete(obj, &a);
    if rc != abi::MPI_SUCCESS {
        return report_code(func, comm, rc, "the attribute's delete callback failed");
    }
    with_engine(|e| {
        if e.objects
            .attrs
            .find(obj, a.keyval)
            .is_some_and(|x| x.seq == a.seq)
        {
            e.objects.attrs.remove(obj, a.keyval);
        }
    });
    abi::MPI_SUCCESS
}

unsafe fn create_keyval(
    func: &'static str,
    kind: ObjKind,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval_: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    code(run(func, None, |e| {
        if keyval_.is_null() {
            return Err(Error::bad_arg("keyval is NULL"));
        }
        let kv = e.objects.attrs.create_keyval(
            kind,
            Callbacks {
                copy,
                delete,
                extra: extra as usize,
            },
        )?;
        // SAFETY: checked non-null; MPI requires it to point to an int.
        unsafe { out(keyval_, keyval_handle(kv, kind)) }
    }))
}

unsafe fn free_keyval(func: &'static str, kind: ObjKind, keyval_: *mut c_int) -> c_int {
    code(run(func, None, |e| {
        if keyval_.is_null() {
            return Err(Error::bad_arg("keyval is NULL"));
        }
        // SAFETY: checked non-null; MPI requires it to point to an int.
        let kv = keyval(unsafe { *keyval_ }, kind)?;
        e.objects.attrs.free_keyval(kv, kind)?;
        // SAFETY: as above.
        unsafe { *keyval_ = abi::MPI_KEYVAL_INVALID };
        Ok(())
    }))
}

fn comm_object(e: &Engine, c: CommId) -> Result<Object> {
    e.comm(c)?;
    Ok(Object::comm(c.0))
}

fn type_object(e: &Engine, h: abi::MPI_Datatype) -> Result<Object> {
    let d = datatype(h)?;
    e.types().info(d)?;
    Ok(Object::datatype(d.index()))
}

/// Decodes a communicator handle, reporting a bad one.
fn comm_arg(func: &'static str, comm: abi::MPI_Comm) -> core::result::Result<CommId, c_int> {
    handles::comm(comm).map_err(|err| report(func, None, err))
}

super::mpi! {
    fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(copy: Option<CopyFn>, delete: Option<DeleteFn>, comm_keyval: *mut c_int, extra_state: *mut c_void) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { create_keyval("MPI_Comm_create_keyval", ObjKind::Comm, copy, delete, comm_keyval, extra_state) }
    }

    fn MPI_Keyval_create / PMPI_Keyval_create(copy: Option<CopyFn>, delete: Option<DeleteFn>, keyval_: *mut c_int, extra_state: *mut c_void) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { create_keyval("MPI_Keyval_create", ObjKind::Comm, copy, delete, keyval_, extra_state) }
    }

    fn MPI_Type_create_keyval / PMPI_Type_create_keyval(copy: Option<CopyFn>, delete: Option<DeleteFn>, type_keyval: *mut c_int, extra_state: *mut c_void) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { create_keyval("MPI_Type_create_keyval", ObjKind::Type, copy, delete, type_keyval, extra_state) }
    }

    fn MPI_Win_create_keyval / PMPI_Win_create_keyval(copy: Option<CopyFn>, delete: Option<DeleteFn>, win_keyval: *mut c_int, extra_state: *mut c_void) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { create_keyval("MPI_Win_create_keyval", ObjKind::Win, copy, delete, win_keyval, extra_state) }
    }

    fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(comm_keyval: *mut c_int) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { free_keyval("MPI_Comm_free_keyval", ObjKind::Comm, comm_keyval) }
    }

    fn MPI_Keyval_free / PMPI_Keyval_free(keyval_: *mut c_int) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { free_keyval("MPI_Keyval_free", ObjKind::Comm, keyval_) }
    }

    fn MPI_Type_free_keyval / PMPI_Type_free_keyval(type_keyval: *mut c_int) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { free_keyval("MPI_Type_free_keyval", ObjKind::Type, type_keyval) }
    }

    fn MPI_Win_free_keyval / PMPI_Win_free_keyval(win_keyval: *mut c_int) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { free_keyval("MPI_Win_free_keyval", ObjKind::Win, win_keyval) }
    }

    fn MPI_Comm_get_attr / PMPI_Comm_get_attr(comm: abi::MPI_Comm, comm_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { comm_get_attr("MPI_Comm_get_attr", comm, comm_keyval, attribute_val, flag) }
    }

    fn MPI_Attr_get / PMPI_Attr_get(comm: abi::MPI_Comm, keyval_: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { comm_get_attr("MPI_Attr_get", comm, keyval_, attribute_val, flag) }
    }

    fn MPI_Comm_set_attr / PMPI_Comm_set_attr(comm: abi::MPI_Comm, comm_keyval: c_int, attribute_val: *mut c_void) {
        match comm_arg("MPI_Comm_set_attr", comm) {
            Ok(c) => set_attr("MPI_Comm_set_attr", Some(c), |e| comm_object(e, c), comm_keyval, ObjKind::Comm, attribute_val),
            Err(code) => code,
        }
    }

    fn MPI_Attr_put / PMPI_Attr_put(comm: abi::MPI_Comm, keyval_: c_int, attribute_val: *mut c_void) {
        match comm_arg("MPI_Attr_put", comm) {
            Ok(c) => set_attr("MPI_Attr_put", Some(c), |e| comm_object(e, c), keyval_, ObjKind::Comm, attribute_val),
            Err(code) => code,
        }
    }

    fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(comm: abi::MPI_Comm, comm_keyval: c_int) {
        match comm_arg("MPI_Comm_delete_attr", comm) {
            Ok(c) => delete_attr("MPI_Comm_delete_attr", Some(c), |e| comm_object(e, c), comm_keyval, ObjKind::Comm),
            Err(code) => code,
        }
    }

    fn MPI_Attr_delete / PMPI_Attr_delete(comm: abi::MPI_Comm, keyval_: c_int) {
        match comm_arg("MPI_Attr_delete", comm) {
            Ok(c) => delete_attr("MPI_Attr_delete", Some(c), |e| comm_object(e, c), keyval_, ObjKind::Comm),
            Err(code) => code,
        }
    }

    fn MPI_Type_get_attr / PMPI_Type_get_attr(datatype_: abi::MPI_Datatype, type_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        code(run("MPI_Type_get_attr", None, |e| {
            let obj = type_object(e, datatype_)?;
            let value = e.objects.attrs.get(obj, keyval(type_keyval, ObjKind::Type)?)?;
            // SAFETY: MPI requires `flag` to point to an int and `attribute_val` to a `void *`.
            unsafe { put_value(attribute_val, flag, value) }
        }))
    }

    fn MPI_Type_set_attr / PMPI_Type_set_attr(datatype_: abi::MPI_Datatype, type_keyval: c_int, attribute_val: *mut c_void) {
        set_attr("MPI_Type_set_attr", None, |e| type_object(e, datatype_), type_keyval, ObjKind::Type, attribute_val)
    }

    fn MPI_Type_delete_attr / PMPI_Type_delete_attr(datatype_: abi::MPI_Datatype, type_keyval: c_int) {
        delete_attr("MPI_Type_delete_attr", None, |e| type_object(e, datatype_), type_keyval, ObjKind::Type)
    }

    fn MPI_Win_get_attr / PMPI_Win_get_attr(win: abi::MPI_Win, win_keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        match super::win::builtin_attr(win, win_keyval) {
            Some(Ok(v)) => {
                if attribute_val.is_null() || flag.is_null() {
                    return report("MPI_Win_get_attr", None, Error::bad_arg("attribute_val or flag is NULL"));
                }
                // SAFETY: MPI requires `attribute_val` to point to a `void *` and `flag` to an int.
                unsafe {
                    *attribute_val.cast::<*mut c_void>() = v;
                    *flag = 1;
                }
                abi::MPI_SUCCESS
            }
            Some(Err(err)) => report("MPI_Win_get_attr", None, err),
            None => code(run("MPI_Win_get_attr", None, |e| {
                let obj = win_object(e, win)?;
                let value = e.objects.attrs.get(obj, keyval(win_keyval, ObjKind::Win)?)?;
                // SAFETY: MPI requires `flag` to point to an int and `attribute_val` to a `void *`.
                unsafe { put_value(attribute_val, flag, value) }
            })),
        }
    }

    fn MPI_Win_set_attr / PMPI_Win_set_attr(win: abi::MPI_Win, win_keyval: c_int, attribute_val: *mut c_void) {
        set_attr("MPI_Win_set_attr", None, |e| win_object(e, win), win_keyval, ObjKind::Win, attribute_val)
    }

    fn MPI_Win_delete_attr / PMPI_Win_delete_attr(win: abi::MPI_Win, win_keyval: c_int) {
        delete_attr("MPI_Win_delete_attr", None, |e| win_object(e, win), win_keyval, ObjKind::Win)
    }

    fn MPI_Comm_set_name / PMPI_Comm_set_name(comm: abi::MPI_Comm, comm_name: *const c_char) {
        code(run_comm("MPI_Comm_set_name", comm, |e, c| {
            let obj = comm_object(e, c)?;
            if comm_name.is_null() {
                return Err(Error::bad_arg("comm_name is NULL"));
            }
            // SAFETY: MPI requires a NUL-terminated string.
            let name = unsafe { CStr::from_ptr(comm_name) }.to_bytes();
            e.objects.attrs.set_name(obj, name)
        }))
    }

    fn MPI_Comm_get_name / PMPI_Comm_get_name(comm: abi::MPI_Comm, comm_name: *mut c_char, resultlen: *mut c_int) {
        code(run_comm("MPI_Comm_get_name", comm, |e, c| {
            let obj = comm_object(e, c)?;
            if comm_name.is_null() || resultlen.is_null() {
                return Err(Error::bad_arg("comm_name or resultlen is NULL"));
            }
            let name: &[u8] = match (e.objects.attrs.name(obj), c) {
                (Some(n), _) => n,
                (None, CommId::WORLD) => b"MPI_COMM_WORLD",
                (None, CommId::SELF) => b"MPI_COMM_SELF",
                (None, _) => b"",
            };
            // SAFETY: MPI requires `comm_name` to hold MPI_MAX_OBJECT_NAME chars.
            unsafe { write_bytes(name, comm_name, abi::MPI_MAX_OBJECT_NAME as usize, resultlen) };
            Ok(())
        }))
    }

    fn MPI_Type_set_name / PMPI_Type_set_name(datatype_: abi::MPI_Datatype, type_name: *const c_char) {
        code(run("MPI_Type_set_name", None, |e| {
            let obj = type_object(e, datatype_)?;
            if type_name.is_null() {
                return Err(Error::bad_arg("type_name is NULL"));
            }
            // SAFETY: MPI requires a NUL-terminated string.
            let name = unsafe { CStr::from_ptr(type_name) }.to_bytes();
            e.objects.attrs.set_name(obj, name)
        }))
    }
}

/// The name given to datatype `d` with `MPI_Type_set_name`, copied into `buf`; its length.
pub(crate) fn type_name(e: &Engine, d: Datatype, buf: &mut [u8]) -> Option<usize> {
    let n = e.objects.attrs.name(Object::datatype(d.index()))?;
    let len = n.len().min(buf.len());
    buf[..len].copy_from_slice(&n[..len]);
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyval_handles_round_trip_and_name_their_kind() {
        for kind in [ObjKind::Comm, ObjKind::Type, ObjKind::Win] {
            for (index, gen) in [(0, 0), (5, 63), (65535, 17)] {
                let kv = KeyvalId { index, gen };
                let h = keyval_handle(kv, kind);
                assert_eq!(abi::handle_kind(h), HandleKind::Direct);
                assert_eq!(abi::handle_object(h), Some(ObjectKind::Keyval));
                assert_ne!(h, abi::MPI_KEYVAL_INVALID);
                assert_eq!(keyval(h, kind).unwrap(), kv);
            }
        }
        let h = keyval_handle(KeyvalId { index: 1, gen: 0 }, ObjKind::Comm);
        assert_eq!(
            keyval(h, ObjKind::Type).unwrap_err().class,
            ErrorClass::Keyval
        );
        assert_eq!(
            keyval(abi::MPI_TAG_UB, ObjKind::Comm).unwrap_err().class,
            ErrorClass::Keyval
        );
        assert_eq!(
            keyval(abi::MPI_KEYVAL_INVALID, ObjKind::Comm)
                .unwrap_err()
                .class,
            ErrorClass::Keyval
        );
    }
}
