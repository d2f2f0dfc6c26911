//! MPI-IO's C functions (`MPI_File_*`) over [`crate::io`].
//!
//! An `MPI_File` is a pointer in MPICH's ABI; stormpi's is never dereferenced by anyone: it
//! carries a handle of object kind *file* whose index names the slot of the file table (bits
//! 0–19) and the low bits of the slot's generation (bits 20–25), so a closed file's stale
//! handle is recognised. Errors go to the file's error handler (`MPI_ERRORS_RETURN` unless
//! changed), and errors of `MPI_File_open`/`MPI_File_delete` to `MPI_FILE_NULL`'s.

use core::ffi::{c_char, c_int, c_void, CStr};
use core::fmt::Write;

use super::abi::{self, HandleKind, ObjectKind};
use super::errors::{self, fatal, handler, handler_handle, Handler, ERRH_DIRECT};
use super::handles::{self, out, put_status, EMPTY_STATUS};
use super::state;
use crate::api::ENGINE;
use crate::comm::ErrHandler;
use crate::datatype::Datatype;
use crate::errhandler::{CommErrhandlerFn, HandlerKind};
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::io::{self, amode, shared, twophase, view, Dir, FileId, Memory};
use crate::pml::request::Status;
use crate::shared::Inside;

const FILE_DIRECT: c_int = abi::make_handle(HandleKind::Direct, ObjectKind::File, 0);
const SLOT_BITS: u32 = 20;
const GEN_MASK: u32 = 0x3f;

/// The C handle of file `id`.
fn file_handle(id: FileId) -> abi::MPI_File {
    let bits = FILE_DIRECT | (((id.0.gen & GEN_MASK) << SLOT_BITS) | id.0.index) as c_int;
    // Through u32: the handle's top bits are set, and sign extension would make it another value.
    bits as u32 as usize as abi::MPI_File
}

/// The table slot and generation bits a file handle carries, if it is one.
fn decode(h: abi::MPI_File) -> Option<(u32, u32)> {
    let v = h as usize;
    if v > u32::MAX as usize {
        return None;
    }
    let bits = v as u32 as c_int;
    if abi::handle_kind(bits) != HandleKind::Direct
        || abi::handle_object(bits) != Some(ObjectKind::File)
    {
        return None;
    }
    let i = abi::handle_index(bits);
    Some((i & ((1 << SLOT_BITS) - 1), i >> SLOT_BITS))
}

/// The open file a handle names.
fn file(e: &crate::engine::Engine, h: abi::MPI_File) -> Result<FileId> {
    let (index, gen) = decode(h).ok_or_else(io::bad_file)?;
    e.io.at(index)
        .filter(|id| id.0.gen & GEN_MASK == gen)
        .ok_or_else(io::bad_file)
}

/// `MPI_File_c2f`: the handle's bits are its Fortran integer.
pub(crate) fn c2f(fh: abi::MPI_File) -> abi::MPI_Fint {
    fh as usize as u32 as abi::MPI_Fint
}

/// `MPI_File_f2c`.
pub(crate) fn f2c(f: abi::MPI_Fint) -> abi::MPI_File {
    f as u32 as usize as abi::MPI_File
}

/// Reports `err` of `func` through error handler `eh`, with `fh` the file's handle (what a
/// user's handler gets).
fn report(func: &str, fh: abi::MPI_File, eh: ErrHandler, err: Error) -> c_int {
    let code = errors::record(func, err);
    let mut text: heapless::String<256> = heapless::String::new();
    let _ = write!(text, "{func}: {err}");
    match eh {
        ErrHandler::Return => code,
        ErrHandler::Fatal | ErrHandler::Abort => fatal(code, &text),
        ErrHandler::User(i) => {
            let f = ENGINE
                .enter()
                .and_then(|mut cx| cx.e().objects.errh.func(i));
            match f {
                Some(f) => {
                    let mut handle = fh;
                    let mut c = code;
                    // SAFETY: a handler the user made with MPI_File_create_errhandler, called as
                    // MPI calls it (the file handle's and the code's addresses); stored with the
                    // communicator handlers' type, which differs only in the first pointer's
                    // pointee. No lock is held.
                    unsafe {
                        let f: FileErrhandlerFn =
                            core::mem::transmute::<CommErrhandlerFn, FileErrhandlerFn>(f);
                        f(&mut handle, &mut c)
                    };
                    code
                }
                None => fatal(code, &text),
            }
        }
    }
}

type FileErrhandlerFn = unsafe extern "C" fn(*mut abi::MPI_File, *mut c_int, ...);

/// Runs `f` inside the engine on file `fh`; an error goes to the file's handler.
fn on_file<T>(
    func: &'static str,
    fh: abi::MPI_File,
    f: impl FnOnce(&mut Inside, FileId) -> Result<T>,
) -> core::result::Result<T, c_int> {
    let (r, eh) = match ENGINE.enter() {
        Some(mut cx) if state::active() => match file(cx.e(), fh) {
            Ok(id) => {
                if waits_for_collectives(func) {
                    io::nbc::drain(&mut cx, id);
                }
                let r = f(&mut cx, id);
                let e = cx.e();
                let eh = e.io.get(id).map_or(e.io.null_errhandler, |x| x.errhandler);
                (r, eh)
            }
            Err(err) => (Err(err), cx.e().io.null_errhandler),
        },
        _ => (
            Err(Error::new(ErrorClass::Other, Reason::NotInitialized)),
            ErrHandler::Return,
        ),
    };
    r.map_err(|err| report(func, fh, eh, err))
}

/// Runs `f` inside the engine for a call that has no file yet (errors go to `MPI_FILE_NULL`'s
/// handler).
pub(super) fn on_null<T>(
    func: &'static str,
    f: impl FnOnce(&mut Inside) -> Result<T>,
) -> core::result::Result<T, c_int> {
    let (r, eh) = match ENGINE.enter() {
        Some(mut cx) if state::active() => {
            let r = f(&mut cx);
            (r, cx.e().io.null_errhandler)
        }
        _ => (
            Err(Error::new(ErrorClass::Other, Reason::NotInitialized)),
            ErrHandler::Return,
        ),
    };
    r.map_err(|err| report(func, abi::MPI_FILE_NULL, eh, err))
}

pub(super) fn code(r: core::result::Result<(), c_int>) -> c_int {
    r.err().unwrap_or(abi::MPI_SUCCESS)
}

/// A C string argument as bytes.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn name<'a>(p: *const c_char, what: &'static str) -> Result<&'a [u8]> {
    if p.is_null() {
        return Err(Error::new(
            ErrorClass::BadFile,
            Reason::BadArgument { what },
        ));
    }
    // SAFETY: the caller's contract.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

fn nonneg(v: abi::MPI_Offset, what: &'static str) -> Result<u64> {
    u64::try_from(v).map_err(|_| Error::bad_arg(what))
}

/// Where an access starts.
#[derive(Clone, Copy)]
enum At {
    /// An explicit offset, in etypes.
    Offset(abi::MPI_Offset),
    /// The individual file pointer.
    Individual,
    /// The shared file pointer.
    Shared,
    /// The shared pointer, in rank order (collective).
    Ordered,
}

/// What to do with the access's result.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Fill the status.
    Status,
    /// Keep it for the split collective's end.
    Split,
    /// Make a complete request.
    Request,
}

/// MPI names its collective data-access functions (apart from the ordered ones, which go
/// through the shared pointer) `..._all...`: `read_all`, `write_at_all_begin`, `iread_at_all`.
fn collective(func: &str) -> bool {
    func.contains("_all") && !func.contains("ordered")
}

/// Whether `func` is a blocking collective call on a file: it waits for the file's non-blocking
/// collective accesses, which every member started before it (collective calls on a file
/// handle are ordered), so that the collectives of both take one order on the file's
/// communicator. A split collective's end waits for its own access only.
fn waits_for_collectives(func: &str) -> bool {
    let started =
        func.starts_with("MPI_File_i") || func.contains("_begin") || func.contains("_end");
    !started
        && (func.contains("_all")
            || func.contains("_ordered")
            || matches!(
                func,
                "MPI_File_close"
                    | "MPI_File_set_size"
                    | "MPI_File_preallocate"
                    | "MPI_File_set_info"
                    | "MPI_File_set_view"
                    | "MPI_File_sync"
                    | "MPI_File_set_atomicity"
                    | "MPI_File_seek_shared"
            ))
}

/// Checks an access and finds where it starts: (view-stream byte, memory, etype size).
///
/// # Safety
/// MPI's rule for `buf`: `count` instances of `dt` valid during the call.
fn prepare(
    cx: &mut Inside,
    id: FileId,
    at: At,
    dir: Dir,
    buf: *mut c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
) -> Result<(u64, Memory, u64)> {
    let e = cx.e();
    let (d, n) = handles::typed(&e.p2p.types, buf, count, dt)?;
    let f = e.io.get(id)?;
    io::check_access(f, dir)?;
    if f.amode & amode::SEQUENTIAL != 0 && matches!(at, At::Offset(_)) {
        return Err(Error::unsupported(
            "explicit-offset access to a file opened with MPI_MODE_SEQUENTIAL",
        ));
    }
    let esize = f.view.etype_size;
    let bytes = io::access_bytes(e, id, n, d)?;
    let etypes = bytes / esize;
    let start = match at {
        At::Offset(o) => nonneg(o, "the offset is negative")? * esize,
        At::Individual => e.io.get(id)?.pos * esize,
        At::Shared => shared::fetch_add(e, id, etypes)? * esize,
        At::Ordered => io::ordered_start(cx, id, etypes)? * esize,
    };
    let mem = Memory {
        buf: buf.cast(),
        count: n,
        dt: d,
    };
    Ok((start, mem, esize))
}

/// `MPI_DISPLACEMENT_CURRENT` (files opened with `MPI_MODE_SEQUENTIAL` only): the file byte the
/// shared pointer is at under the current view. Every member reads it before any resets it
/// (`set_view` does, after): hence the barrier, which makes it collective like `set_view`.
fn displacement_current(cx: &mut Inside, id: FileId) -> Result<u64> {
    let e = cx.e();
    let f = e.io.get(id)?;
    if f.amode & amode::SEQUENTIAL == 0 {
        return Err(Error::bad_arg(
            "MPI_DISPLACEMENT_CURRENT is only for files opened with MPI_MODE_SEQUENTIAL",
        ));
    }
    let (view, comm) = (f.view, f.comm);
    let pos = shared::get(e, id)? * view.etype_size;
    let nodes = e.p2p.types.nodes(view.layout)?;
    let at = view::byte_offset(nodes, &view, pos)?;
    crate::coll::barrier(cx, comm)?;
    Ok(at)
}

/// One access: checks, moves the data (collective accesses through [`twophase`]), updates the
/// pointer; returns the status.
///
/// # Safety
/// MPI's rule for `buf`: `count` instances of `dt` valid during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn access(
    cx: &mut Inside,
    id: FileId,
    at: At,
    dir: Dir,
    buf: *mut c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    all: bool,
) -> Result<Status> {
    let prep = prepare(cx, id, at, dir, buf, count, dt);
    // SAFETY: the caller's contract.
    unsafe { access_prepared(cx, id, at, dir, prep, dt, all) }
}

/// [`access`] once [`prepare`] has run (and its outcome is this member's part).
///
/// # Safety
/// As [`access`]'s.
unsafe fn access_prepared(
    cx: &mut Inside,
    id: FileId,
    at: At,
    dir: Dir,
    prep: Result<(u64, Memory, u64)>,
    dt: abi::MPI_Datatype,
    all: bool,
) -> Result<Status> {
    let view = cx.e().io.get(id)?.view;
    // A memory type whose size the representation changes: (file bytes, native bytes).
    let scaled = match (view.external32 || view.sizes.is_some(), prep) {
        (true, Ok((_, mem, _))) => {
            let (file, native) = io::file_and_native_bytes(cx.e(), &view, mem.count, mem.dt)?;
            (file != native).then_some((file, native, mem))
        }
        _ => None,
    };
    let moved = if let Some(slot) = view.datarep {
        // Converted independently: every member converts its own data, so the collective
        // forms need no exchange (their members all called, as MPI requires).
        let (start, mem, _) = prep?;
        // SAFETY: the caller's contract.
        unsafe { super::datarep::transfer(cx, id, dir, start, mem, dt, slot)? }
    } else if all && scaled.is_none() && matches!(at, At::Offset(_) | At::Individual) {
        // A member whose arguments were bad still takes part, so the others learn of it.
        let mine = prep.map(|(start, mem, _)| (start, mem));
        // SAFETY: the caller's contract.
        unsafe { twophase::access(cx, id, dir, mine)? }
    } else {
        let (start, mem, _) = prep?;
        // SAFETY: the caller's contract.
        unsafe { io::transfer(cx.e(), id, dir, start, mem)? }
    };
    let (start, _, esize) = prep?;
    if let At::Individual = at {
        cx.e().io.get_mut(id)?.pos = start / esize + moved / esize;
    }
    // The status counts memory bytes; the file's were in the file's representation.
    let bytes = match scaled {
        Some((file, native, mem)) => native_bytes(cx, mem, moved, file, native, view.external32)?,
        None => moved,
    };
    Ok(Status {
        bytes,
        message_bytes: bytes,
        ..EMPTY_STATUS
    })
}

/// Memory bytes of the first `moved` of `file` file bytes of `mem` (`native` bytes in
/// memory): whole instances, and in `external32` whole elements of a last partial one of a
/// uniform type (user conversions move whole instances only).
fn native_bytes(
    cx: &mut Inside,
    mem: Memory,
    moved: u64,
    file: u64,
    native: u64,
    external32: bool,
) -> Result<u64> {
    if moved >= file || mem.count == 0 {
        return Ok(native);
    }
    let types = &cx.e().p2p.types;
    let (fi, ni) = (file / mem.count, native / mem.count);
    let whole = moved.checked_div(fi).unwrap_or(0);
    let mut bytes = whole * ni;
    if let (true, Some(b)) = (external32, types.info(mem.dt)?.uniform) {
        let ext = crate::datatype::repr::Repr::EXTERNAL32.size(b.elem) as u64;
        bytes += (moved - whole * fi) / ext.max(1) * b.size as u64;
    }
    Ok(bytes)
}

/// The C body of every data-access function, `int` and large-count (`_c`) forms alike (the
/// count widened).
///
/// # Safety
/// MPI's rules for the pointers.
unsafe fn data(
    func: &'static str,
    fh: abi::MPI_File,
    at: At,
    dir: Dir,
    buf: *mut c_void,
    count: abi::MPI_Count,
    dt: abi::MPI_Datatype,
    then: Then,
    status: *mut abi::MPI_Status,
    request: *mut abi::MPI_Request,
) -> c_int {
    code(on_file(func, fh, |cx, id| {
        if then == Then::Request && request.is_null() {
            return Err(Error::bad_arg("request is NULL"));
        }
        if then == Then::Split && cx.e().io.get(id)?.split.is_some() {
            return Err(Error::new(
                ErrorClass::Other,
                Reason::BadArgument {
                    what: "a split collective is already active on this file",
                },
            ));
        }
        if then != Then::Status && collective(func) && matches!(at, At::Offset(_) | At::Individual)
        {
            let view = cx.e().io.get(id)?.view;
            let prep = prepare(cx, id, at, dir, buf, count, dt);
            // Size-changing external32 and user representations take the general path.
            let plain = view.datarep.is_none()
                && match (view.external32, &prep) {
                    (true, Ok((_, mem, _))) => {
                        let (file, native) =
                            io::file_and_native_bytes(cx.e(), &view, mem.count, mem.dt)?;
                        file == native
                    }
                    _ => true,
                };
            let r = if plain {
                let mine = prep.map(|(start, mem, _)| (start, mem));
                // SAFETY: MPI's rule for a non-blocking access's buffer.
                let (r, moved) = unsafe { io::nbc::start(cx, id, dir, mine)? };
                let (start, _, esize) = match prep {
                    Ok(p) => p,
                    Err(err) => {
                        // This member's access takes part only to tell the others.
                        let _ = cx.e().p2p.pml.requests_mut().release(r);
                        return Err(err);
                    }
                };
                if let At::Individual = at {
                    cx.e().io.get_mut(id)?.pos = start / esize + moved / esize;
                }
                r
            } else {
                // SAFETY: the caller's contract.
                let st = unsafe { access_prepared(cx, id, at, dir, prep, dt, true)? };
                cx.e().p2p.pml.requests_mut().completed(st, 0)?
            };
            match then {
                Then::Split => cx.e().io.get_mut(id)?.split = Some(r),
                // SAFETY: checked non-null above.
                _ => unsafe { *request = handles::request_handle(r) },
            }
            return Ok(());
        }
        if then == Then::Request && !collective(func) {
            let prep = prepare(cx, id, at, dir, buf, count, dt)?;
            let (start, mem, esize) = prep;
            // SAFETY: MPI's rule for a non-blocking access's buffer.
            if let Some((r, total)) = unsafe { io::background::start(cx.e(), id, dir, start, mem)? }
            {
                if let At::Individual = at {
                    cx.e().io.get_mut(id)?.pos = start / esize + total / esize;
                }
                // SAFETY: checked non-null above.
                unsafe { *request = handles::request_handle(r) };
                return Ok(());
            }
            // SAFETY: the caller's contract.
            let st = unsafe { access_prepared(cx, id, at, dir, Ok(prep), dt, false)? };
            let r = cx.e().p2p.pml.requests_mut().completed(st, 0)?;
            // SAFETY: checked non-null above.
            unsafe { *request = handles::request_handle(r) };
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let st = unsafe { access(cx, id, at, dir, buf, count, dt, collective(func))? };
        match then {
            // SAFETY: MPI's rule for the status pointer.
            Then::Status => unsafe { put_status(status, &st, abi::MPI_SUCCESS) },
            Then::Split => {
                let r = cx.e().p2p.pml.requests_mut().completed(st, 0)?;
                cx.e().io.get_mut(id)?.split = Some(r);
            }
            Then::Request => {
                let r = cx.e().p2p.pml.requests_mut().completed(st, 0)?;
                // SAFETY: checked non-null above.
                unsafe { *request = handles::request_handle(r) };
            }
        }
        Ok(())
    }))
}

/// The end of a split collective.
unsafe fn split_end(func: &'static str, fh: abi::MPI_File, status: *mut abi::MPI_Status) -> c_int {
    code(on_file(func, fh, |cx, id| {
        let r = cx.e().io.get_mut(id)?.split.take().ok_or(Error::new(
            ErrorClass::Other,
            Reason::BadArgument {
                what: "no split collective is active on this file",
            },
        ))?;
        let st = cx.wait(r)?;
        if let Some(err) = st.error {
            return Err(err);
        }
        // SAFETY: MPI's rule for the status pointer.
        unsafe { put_status(status, &st, abi::MPI_SUCCESS) };
        Ok(())
    }))
}

/// `MPI_File_create_errhandler`'s body.
unsafe fn create_errhandler(f: Option<CommErrhandlerFn>, eh: *mut abi::MPI_Errhandler) -> c_int {
    code(on_null("MPI_File_create_errhandler", |cx| {
        let e = cx.e();
        let f = f.ok_or(Error::bad_arg("the error handler function is NULL"))?;
        if eh.is_null() {
            return Err(Error::bad_arg("errhandler is NULL"));
        }
        let comms = &e.p2p.comms;
        let files = &e.io;
        let osc = &e.osc;
        let id = e.objects.errh.create(HandlerKind::File, f, |i| {
            files.uses_handler(i)
                || osc.iter().any(|w| w.errhandler == ErrHandler::User(i))
                || (0..comms.capacity()).any(|c| {
                    comms
                        .get_any(crate::comm::CommId(c))
                        .is_some_and(|x| x.errhandler == ErrHandler::User(i))
                })
        })?;
        // SAFETY: checked non-null.
        unsafe {
            out(
                eh,
                ERRH_DIRECT | (c_int::from(id.gen) << 16) | c_int::from(id.index),
            )
        }
    }))
}

/// The file error handler `eh` names.
fn file_handler(e: &crate::engine::Engine, eh: abi::MPI_Errhandler) -> Result<ErrHandler> {
    Ok(match handler(eh)? {
        Handler::Predefined(h) => h,
        Handler::User(id) => {
            e.objects.errh.check(id, HandlerKind::File)?;
            ErrHandler::User(id.index)
        }
    })
}

fn datatype_out(e: &mut crate::engine::Engine, d: Datatype) -> Result<abi::MPI_Datatype> {
    // Derived types come back as new types the caller frees, as MPI_File_get_view says.
    let d = if d.is_predefined() {
        d
    } else {
        e.p2p.types.dup(d)?
    };
    Ok(handles::datatype_handle(d))
}

super::mpi! {
    fn MPI_File_open / PMPI_File_open(comm: abi::MPI_Comm, filename: *const c_char, amode_: c_int, info: abi::MPI_Info, fh: *mut abi::MPI_File) {
        code(on_null("MPI_File_open", |cx| {
            if fh.is_null() {
                return Err(Error::bad_arg("fh is NULL"));
            }
            let c = handles::comm(comm)?;
            // SAFETY: MPI's rule: a NUL-terminated name.
            let path = unsafe { name(filename, "the file name is NULL")? };
            let hints = super::info::info_or_null(info)?;
            if let Some(i) = hints {
                cx.e().objects.infos.check(i)?;
            }
            let id = io::open(cx, c, path, amode_, hints)?;
            // SAFETY: checked non-null.
            unsafe { *fh = file_handle(id) };
            Ok(())
        }))
    }

    fn MPI_File_close / PMPI_File_close(fh: *mut abi::MPI_File) {
        if fh.is_null() {
            return code(on_null("MPI_File_close", |_| Err(Error::bad_arg("fh is NULL"))));
        }
        // SAFETY: checked non-null; MPI requires it to point to an MPI_File.
        let h = unsafe { *fh };
        let r = on_file("MPI_File_close", h, io::close);
        if r.is_ok() {
            // SAFETY: as above.
            unsafe { *fh = abi::MPI_FILE_NULL };
        }
        code(r)
    }

    fn MPI_File_delete / PMPI_File_delete(filename: *const c_char, info: abi::MPI_Info) {
        code(on_null("MPI_File_delete", |cx| {
            // SAFETY: MPI's rule: a NUL-terminated name.
            let path = unsafe { name(filename, "the file name is NULL")? };
            let _ = super::info::info_or_null(info)?;
            let fs = io::file_system(cx.e())?;
            fs.delete(path).map_err(|e| e.to_error("deleting the file"))
        }))
    }

    fn MPI_File_set_size / PMPI_File_set_size(fh: abi::MPI_File, size: abi::MPI_Offset) {
        code(on_file("MPI_File_set_size", fh, |cx, id| {
            let size = nonneg(size, "the size is negative")?;
            io::resize(cx, id, size, false)
        }))
    }

    fn MPI_File_preallocate / PMPI_File_preallocate(fh: abi::MPI_File, size: abi::MPI_Offset) {
        code(on_file("MPI_File_preallocate", fh, |cx, id| {
            let size = nonneg(size, "the size is negative")?;
            io::resize(cx, id, size, true)
        }))
    }

    fn MPI_File_get_size / PMPI_File_get_size(fh: abi::MPI_File, size: *mut abi::MPI_Offset) {
        code(on_file("MPI_File_get_size", fh, |cx, id| {
            let e = cx.e();
            let fs = io::file_system(e)?;
            let s = fs.size(e.io.get(id)?.fd).map_err(|e| e.to_error("the file's size"))?;
            // SAFETY: MPI's rule for the output pointer.
            unsafe { out(size, s as abi::MPI_Offset) }
        }))
    }

    fn MPI_File_get_amode / PMPI_File_get_amode(fh: abi::MPI_File, amode_: *mut c_int) {
        code(on_file("MPI_File_get_amode", fh, |cx, id| {
            let m = cx.e().io.get(id)?.amode;
            // SAFETY: MPI's rule for the output pointer.
            unsafe { out(amode_, m) }
        }))
    }

    fn MPI_File_get_group / PMPI_File_get_group(fh: abi::MPI_File, group: *mut abi::MPI_Group) {
        code(on_file("MPI_File_get_group", fh, |cx, id| {
            let e = cx.e();
            let c = e.io.get(id)?.comm;
            let g = crate::comm::create::group(&mut e.p2p, c)?;
            super::group::give(e, g, group)
        }))
    }

    fn MPI_File_set_info / PMPI_File_set_info(fh: abi::MPI_File, info: abi::MPI_Info) {
        code(on_file("MPI_File_set_info", fh, |cx, id| {
            let e = cx.e();
            let Some(from) = super::info::info_or_null(info)? else {
                return Ok(());
            };
            e.objects.infos.check(from)?;
            let mine = match e.io.get(id)?.info {
                Some(m) => m,
                None => {
                    let m = e.objects.infos.create()?;
                    e.io.get_mut(id)?.info = Some(m);
                    m
                }
            };
            let infos = &mut e.objects.infos;
            for k in 0..infos.nkeys(from)? {
                let mut key = [0u8; 256];
                let mut val = [0u8; 1024];
                let kk = infos.nthkey(from, k)?;
                let kl = kk.len().min(key.len());
                key[..kl].copy_from_slice(&kk[..kl]);
                let vv = infos.get(from, &key[..kl])?.unwrap_or(&[]);
                let vl = vv.len().min(val.len());
                val[..vl].copy_from_slice(&vv[..vl]);
                infos.set(mine, &key[..kl], &val[..vl])?;
            }
            io::apply_hints(cx, id)
        }))
    }

    fn MPI_File_get_info / PMPI_File_get_info(fh: abi::MPI_File, info_used: *mut abi::MPI_Info) {
        code(on_file("MPI_File_get_info", fh, |cx, id| {
            if info_used.is_null() {
                return Err(Error::bad_arg("info_used is NULL"));
            }
            let e = cx.e();
            let new = match e.io.get(id)?.info {
                Some(m) => e.objects.infos.dup(m)?,
                None => e.objects.infos.create()?,
            };
            // SAFETY: checked non-null.
            unsafe { *info_used = super::info::info_handle(new) };
            Ok(())
        }))
    }

    fn MPI_File_set_view / PMPI_File_set_view(fh: abi::MPI_File, disp: abi::MPI_Offset, etype: abi::MPI_Datatype, filetype: abi::MPI_Datatype, datarep: *const c_char, info: abi::MPI_Info) {
        code(on_file("MPI_File_set_view", fh, |cx, id| {
            if datarep.is_null() {
                return Err(Error::bad_arg("datarep is NULL"));
            }
            // SAFETY: MPI's rule: a NUL-terminated name.
            let rep = unsafe { CStr::from_ptr(datarep) }.to_bytes();
            let external32 = rep.eq_ignore_ascii_case(b"external32");
            let user = super::datarep::find(rep);
            if !external32 && user.is_none() && !rep.eq_ignore_ascii_case(b"native") && !rep.eq_ignore_ascii_case(b"internal") {
                return Err(Error::new(ErrorClass::UnsupportedDatarep, Reason::BadArgument {
                    what: "no data representation of this name: native, internal, external32 or one registered with MPI_Register_datarep",
                }));
            }
            let _ = super::info::info_or_null(info)?;
            let et = handles::datatype(etype)?;
            let ft = handles::datatype(filetype)?;
            let disp = if disp == abi::MPI_DISPLACEMENT_CURRENT as abi::MPI_Offset {
                displacement_current(cx, id)?
            } else {
                nonneg(disp, "the displacement is negative")?
            };
            let sizes = match user {
                Some(slot) => super::datarep::file_sizes(cx, slot, &[et, ft])?,
                None => None,
            };
            io::set_view(cx, id, disp, et, ft, external32, user, sizes)
        }))
    }

    fn MPI_File_get_view / PMPI_File_get_view(fh: abi::MPI_File, disp: *mut abi::MPI_Offset, etype: *mut abi::MPI_Datatype, filetype: *mut abi::MPI_Datatype, datarep: *mut c_char) {
        code(on_file("MPI_File_get_view", fh, |cx, id| {
            if disp.is_null() || etype.is_null() || filetype.is_null() {
                return Err(Error::bad_arg("an output argument is NULL"));
            }
            let e = cx.e();
            let v = e.io.get(id)?.view;
            let eh = datatype_out(e, v.etype)?;
            let fth = datatype_out(e, v.filetype)?;
            // SAFETY: checked non-null; MPI's rule for the outputs (datarep holds
            // MPI_MAX_DATAREP_STRING bytes).
            unsafe {
                *disp = v.disp as abi::MPI_Offset;
                *etype = eh;
                *filetype = fth;
                if !datarep.is_null() {
                    let mut user = [0u8; abi::MPI_MAX_DATAREP_STRING as usize];
                    let rep: &[u8] = match v.datarep {
                        Some(slot) if super::datarep::name_of(slot, &mut user) => &user,
                        _ if v.external32 => b"external32\0",
                        _ => b"native\0",
                    };
                    let n = rep.iter().position(|&b| b == 0).map_or(rep.len(), |n| n + 1);
                    core::ptr::copy_nonoverlapping(rep.as_ptr().cast::<c_char>(), datarep, n);
                }
            }
            Ok(())
        }))
    }

    fn MPI_File_get_type_extent / PMPI_File_get_type_extent(fh: abi::MPI_File, datatype: abi::MPI_Datatype, extent: *mut abi::MPI_Aint) {
        code(on_file("MPI_File_get_type_extent", fh, |cx, id| {
            let d = handles::datatype(datatype)?;
            let e = cx.e();
            let view = e.io.get(id)?.view;
            let x = io::file_extent(e, &view, d)?;
            // SAFETY: MPI's rule for the output pointer.
            unsafe { out(extent, x as abi::MPI_Aint) }
        }))
    }

    fn MPI_File_get_type_extent_c / PMPI_File_get_type_extent_c(fh: abi::MPI_File, datatype: abi::MPI_Datatype, extent: *mut abi::MPI_Count) {
        code(on_file("MPI_File_get_type_extent_c", fh, |cx, id| {
            let d = handles::datatype(datatype)?;
            let e = cx.e();
            let view = e.io.get(id)?.view;
            let x = io::file_extent(e, &view, d)?;
            // SAFETY: MPI's rule for the output pointer.
            unsafe { out(extent, x as abi::MPI_Count) }
        }))
    }

    fn MPI_File_get_byte_offset / PMPI_File_get_byte_offset(fh: abi::MPI_File, offset: abi::MPI_Offset, disp: *mut abi::MPI_Offset) {
        code(on_file("MPI_File_get_byte_offset", fh, |cx, id| {
            let e = cx.e();
            let off = nonneg(offset, "the offset is negative")?;
            let v = e.io.get(id)?.view;
            let nodes = e.p2p.types.nodes(v.layout)?;
            let b = view::byte_offset(nodes, &v, off * v.etype_size)?;
            // SAFETY: MPI's rule for the output pointer.
            unsafe { out(disp, b as abi::MPI_Offset) }
        }))
    }

    fn MPI_File_seek / PMPI_File_seek(fh: abi::MPI_File, offset: abi::MPI_Offset, whence: c_int) {
        code(on_file("MPI_File_seek", fh, |cx, id| {
            let at = io::seek_target(cx.e(), id, offset, whence, false)?;
            cx.e().io.get_mut(id)?.pos = at;
            Ok(())
        }))
    }

    fn MPI_File_get_position / PMPI_File_get_position(fh: abi::MPI_File, offset: *mut abi::MPI_Offset) {
        code(on_file("MPI_File_get_position", fh, |cx, id| {
            let p = cx.e().io.get(id)?.pos;
            // SAFETY: MPI's rule for the output pointer.
            unsafe { out(offset, p as abi::MPI_Offset) }
        }))
    }

    fn MPI_File_seek_shared / PMPI_File_seek_shared(fh: abi::MPI_File, offset: abi::MPI_Offset, whence: c_int) {
        code(on_file("MPI_File_seek_shared", fh, |cx, id| {
            let at = io::seek_target(cx.e(), id, offset, whence, true)?;
            io::seek_shared(cx, id, at)
        }))
    }

    fn MPI_File_get_position_shared / PMPI_File_get_position_shared(fh: abi::MPI_File, offset: *mut abi::MPI_Offset) {
        code(on_file("MPI_File_get_position_shared", fh, |cx, id| {
            let p = shared::get(cx.e(), id)?;
            // SAFETY: MPI's rule for the output pointer.
            unsafe { out(offset, p as abi::MPI_Offset) }
        }))
    }

    fn MPI_File_set_atomicity / PMPI_File_set_atomicity(fh: abi::MPI_File, flag: c_int) {
        code(on_file("MPI_File_set_atomicity", fh, |cx, id| {
            cx.e().io.get_mut(id)?.atomic = flag != 0;
            let c = cx.e().io.get(id)?.comm;
            crate::coll::barrier(cx, c)
        }))
    }

    fn MPI_File_get_atomicity / PMPI_File_get_atomicity(fh: abi::MPI_File, flag: *mut c_int) {
        code(on_file("MPI_File_get_atomicity", fh, |cx, id| {
            let a = cx.e().io.get(id)?.atomic;
            // SAFETY: MPI's rule for the output pointer.
            unsafe { out(flag, a as c_int) }
        }))
    }

    fn MPI_File_sync / PMPI_File_sync(fh: abi::MPI_File) {
        code(on_file("MPI_File_sync", fh, |cx, id| {
            let e = cx.e();
            let fs = io::file_system(e)?;
            let f = e.io.get(id)?;
            if f.amode & amode::RDONLY == 0 {
                fs.sync(f.fd).map_err(|e| e.to_error("syncing the file"))?;
            }
            let c = f.comm;
            crate::coll::barrier(cx, c)
        }))
    }

    fn MPI_File_create_errhandler / PMPI_File_create_errhandler(f: Option<CommErrhandlerFn>, eh: *mut abi::MPI_Errhandler) {
        // SAFETY: forwarded under MPI's rules.
        unsafe { create_errhandler(f, eh) }
    }

    fn MPI_File_set_errhandler / PMPI_File_set_errhandler(fh: abi::MPI_File, eh: abi::MPI_Errhandler) {
        if fh == abi::MPI_FILE_NULL {
            return code(on_null("MPI_File_set_errhandler", |cx| {
                let h = file_handler(cx.e(), eh)?;
                cx.e().io.null_errhandler = h;
                Ok(())
            }));
        }
        code(on_file("MPI_File_set_errhandler", fh, |cx, id| {
            let h = file_handler(cx.e(), eh)?;
            cx.e().io.get_mut(id)?.errhandler = h;
            Ok(())
        }))
    }

    fn MPI_File_get_errhandler / PMPI_File_get_errhandler(fh: abi::MPI_File, eh: *mut abi::MPI_Errhandler) {
        let get = |cx: &mut Inside, id: Option<FileId>| {
            if eh.is_null() {
                return Err(Error::bad_arg("errhandler is NULL"));
            }
            let e = cx.e();
            let h = match id {
                Some(id) => e.io.get(id)?.errhandler,
                None => e.io.null_errhandler,
            };
            let handle = handler_handle(e, h)?;
            // SAFETY: checked non-null.
            unsafe { out(eh, handle) }
        };
        if fh == abi::MPI_FILE_NULL {
            return code(on_null("MPI_File_get_errhandler", |cx| get(cx, None)));
        }
        code(on_file("MPI_File_get_errhandler", fh, |cx, id| get(cx, Some(id))))
    }

    fn MPI_File_call_errhandler / PMPI_File_call_errhandler(fh: abi::MPI_File, errorcode: c_int) {
        let eh = match ENGINE.enter() {
            Some(mut cx) if state::active() => {
                let e = cx.e();
                if fh == abi::MPI_FILE_NULL {
                    Ok(e.io.null_errhandler)
                } else {
                    file(e, fh).and_then(|id| Ok(e.io.get(id)?.errhandler))
                }
            }
            _ => Err(Error::new(ErrorClass::Other, Reason::NotInitialized)),
        };
        match eh {
            Err(err) => report("MPI_File_call_errhandler", abi::MPI_FILE_NULL, ErrHandler::Return, err),
            Ok(h) => {
                let mut text: heapless::String<96> = heapless::String::new();
                let _ = write!(text, "MPI_File_call_errhandler: error code {errorcode}");
                match h {
                    ErrHandler::Return => {}
                    ErrHandler::Fatal | ErrHandler::Abort => fatal(errorcode, &text),
                    ErrHandler::User(i) => {
                        let f = ENGINE.enter().and_then(|mut cx| cx.e().objects.errh.func(i));
                        if let Some(f) = f {
                            let mut handle = fh;
                            let mut c = errorcode;
                            // SAFETY: the user's file error handler, called as MPI calls it;
                            // no lock is held.
                            unsafe {
                                let f = core::mem::transmute::<CommErrhandlerFn, FileErrhandlerFn>(f);
                                f(&mut handle, &mut c)
                            };
                        }
                    }
                }
                abi::MPI_SUCCESS
            }
        }
    }

    fn MPI_File_read_all_end / PMPI_File_read_all_end(fh: abi::MPI_File, _buf: *mut c_void, status: *mut abi::MPI_Status) {
        // SAFETY: MPI's rules for the pointers.
        unsafe { split_end("MPI_File_read_all_end", fh, status) }
    }
    fn MPI_File_write_all_end / PMPI_File_write_all_end(fh: abi::MPI_File, _buf: *const c_void, status: *mut abi::MPI_Status) {
        // SAFETY: as above.
        unsafe { split_end("MPI_File_write_all_end", fh, status) }
    }
    fn MPI_File_read_at_all_end / PMPI_File_read_at_all_end(fh: abi::MPI_File, _buf: *mut c_void, status: *mut abi::MPI_Status) {
        // SAFETY: as above.
        unsafe { split_end("MPI_File_read_at_all_end", fh, status) }
    }
    fn MPI_File_write_at_all_end / PMPI_File_write_at_all_end(fh: abi::MPI_File, _buf: *const c_void, status: *mut abi::MPI_Status) {
        // SAFETY: as above.
        unsafe { split_end("MPI_File_write_at_all_end", fh, status) }
    }
    fn MPI_File_read_ordered_end / PMPI_File_read_ordered_end(fh: abi::MPI_File, _buf: *mut c_void, status: *mut abi::MPI_Status) {
        // SAFETY: as above.
        unsafe { split_end("MPI_File_read_ordered_end", fh, status) }
    }
    fn MPI_File_write_ordered_end / PMPI_File_write_ordered_end(fh: abi::MPI_File, _buf: *const c_void, status: *mut abi::MPI_Status) {
        // SAFETY: as above.
        unsafe { split_end("MPI_File_write_ordered_end", fh, status) }
    }
}

/// Defines data-access functions: `name / pname (at-args) => at, dir, then`.
macro_rules! accesses {
    ($(
        $name:ident / $pname:ident ( $($off:ident)? ; $buf:ty ; $count:ty ; $tail:tt ) => $at:expr, $dir:expr, $then:expr;
    )*) => {
        super::mpi! {$(
            #[doc = concat!("`", stringify!($name), "`.")]
            fn $name / $pname(fh: abi::MPI_File, $($off: abi::MPI_Offset,)? buf: $buf, count: $count, datatype: abi::MPI_Datatype, out_: accesses!(@tail $tail)) {
                let (status, request) = accesses!(@split $tail out_);
                // SAFETY: MPI's rules for the pointers.
                unsafe { data(stringify!($name), fh, $at, $dir, buf as *mut c_void, count.into(), datatype, $then, status, request) }
            }
        )*}
    };
    (@tail status) => { *mut abi::MPI_Status };
    (@tail request) => { *mut abi::MPI_Request };
    (@tail none) => { *mut c_void };
    (@split status $o:ident) => { ($o, core::ptr::null_mut()) };
    (@split request $o:ident) => { (abi::MPI_STATUS_IGNORE, $o) };
    (@split none $o:ident) => {{ let _ = $o; (abi::MPI_STATUS_IGNORE, core::ptr::null_mut()) }};
}

// The split-collective begins take no last argument: `out_` is declared for the macro's sake
// and those are defined by hand below.
accesses! {
    MPI_File_read / PMPI_File_read(; *mut c_void; c_int; status) => At::Individual, Dir::Read, Then::Status;
    MPI_File_write / PMPI_File_write(; *const c_void; c_int; status) => At::Individual, Dir::Write, Then::Status;
    MPI_File_read_all / PMPI_File_read_all(; *mut c_void; c_int; status) => At::Individual, Dir::Read, Then::Status;
    MPI_File_write_all / PMPI_File_write_all(; *const c_void; c_int; status) => At::Individual, Dir::Write, Then::Status;
    MPI_File_read_at / PMPI_File_read_at(offset; *mut c_void; c_int; status) => At::Offset(offset), Dir::Read, Then::Status;
    MPI_File_write_at / PMPI_File_write_at(offset; *const c_void; c_int; status) => At::Offset(offset), Dir::Write, Then::Status;
    MPI_File_read_at_all / PMPI_File_read_at_all(offset; *mut c_void; c_int; status) => At::Offset(offset), Dir::Read, Then::Status;
    MPI_File_write_at_all / PMPI_File_write_at_all(offset; *const c_void; c_int; status) => At::Offset(offset), Dir::Write, Then::Status;
    MPI_File_read_shared / PMPI_File_read_shared(; *mut c_void; c_int; status) => At::Shared, Dir::Read, Then::Status;
    MPI_File_write_shared / PMPI_File_write_shared(; *const c_void; c_int; status) => At::Shared, Dir::Write, Then::Status;
    MPI_File_read_ordered / PMPI_File_read_ordered(; *mut c_void; c_int; status) => At::Ordered, Dir::Read, Then::Status;
    MPI_File_write_ordered / PMPI_File_write_ordered(; *const c_void; c_int; status) => At::Ordered, Dir::Write, Then::Status;
    MPI_File_iread / PMPI_File_iread(; *mut c_void; c_int; request) => At::Individual, Dir::Read, Then::Request;
    MPI_File_iwrite / PMPI_File_iwrite(; *const c_void; c_int; request) => At::Individual, Dir::Write, Then::Request;
    MPI_File_iread_all / PMPI_File_iread_all(; *mut c_void; c_int; request) => At::Individual, Dir::Read, Then::Request;
    MPI_File_iwrite_all / PMPI_File_iwrite_all(; *const c_void; c_int; request) => At::Individual, Dir::Write, Then::Request;
    MPI_File_iread_at / PMPI_File_iread_at(offset; *mut c_void; c_int; request) => At::Offset(offset), Dir::Read, Then::Request;
    MPI_File_iwrite_at / PMPI_File_iwrite_at(offset; *const c_void; c_int; request) => At::Offset(offset), Dir::Write, Then::Request;
    MPI_File_iread_at_all / PMPI_File_iread_at_all(offset; *mut c_void; c_int; request) => At::Offset(offset), Dir::Read, Then::Request;
    MPI_File_iwrite_at_all / PMPI_File_iwrite_at_all(offset; *const c_void; c_int; request) => At::Offset(offset), Dir::Write, Then::Request;
    MPI_File_iread_shared / PMPI_File_iread_shared(; *mut c_void; c_int; request) => At::Shared, Dir::Read, Then::Request;
    MPI_File_iwrite_shared / PMPI_File_iwrite_shared(; *const c_void; c_int; request) => At::Shared, Dir::Write, Then::Request;
    MPI_File_read_c / PMPI_File_read_c(; *mut c_void; abi::MPI_Count; status) => At::Individual, Dir::Read, Then::Status;
    MPI_File_write_c / PMPI_File_write_c(; *const c_void; abi::MPI_Count; status) => At::Individual, Dir::Write, Then::Status;
    MPI_File_read_all_c / PMPI_File_read_all_c(; *mut c_void; abi::MPI_Count; status) => At::Individual, Dir::Read, Then::Status;
    MPI_File_write_all_c / PMPI_File_write_all_c(; *const c_void; abi::MPI_Count; status) => At::Individual, Dir::Write, Then::Status;
    MPI_File_read_at_c / PMPI_File_read_at_c(offset; *mut c_void; abi::MPI_Count; status) => At::Offset(offset), Dir::Read, Then::Status;
    MPI_File_write_at_c / PMPI_File_write_at_c(offset; *const c_void; abi::MPI_Count; status) => At::Offset(offset), Dir::Write, Then::Status;
    MPI_File_read_at_all_c / PMPI_File_read_at_all_c(offset; *mut c_void; abi::MPI_Count; status) => At::Offset(offset), Dir::Read, Then::Status;
    MPI_File_write_at_all_c / PMPI_File_write_at_all_c(offset; *const c_void; abi::MPI_Count; status) => At::Offset(offset), Dir::Write, Then::Status;
    MPI_File_read_shared_c / PMPI_File_read_shared_c(; *mut c_void; abi::MPI_Count; status) => At::Shared, Dir::Read, Then::Status;
    MPI_File_write_shared_c / PMPI_File_write_shared_c(; *const c_void; abi::MPI_Count; status) => At::Shared, Dir::Write, Then::Status;
    MPI_File_read_ordered_c / PMPI_File_read_ordered_c(; *mut c_void; abi::MPI_Count; status) => At::Ordered, Dir::Read, Then::Status;
    MPI_File_write_ordered_c / PMPI_File_write_ordered_c(; *const c_void; abi::MPI_Count; status) => At::Ordered, Dir::Write, Then::Status;
    MPI_File_iread_c / PMPI_File_iread_c(; *mut c_void; abi::MPI_Count; request) => At::Individual, Dir::Read, Then::Request;
    MPI_File_iwrite_c / PMPI_File_iwrite_c(; *const c_void; abi::MPI_Count; request) => At::Individual, Dir::Write, Then::Request;
    MPI_File_iread_all_c / PMPI_File_iread_all_c(; *mut c_void; abi::MPI_Count; request) => At::Individual, Dir::Read, Then::Request;
    MPI_File_iwrite_all_c / PMPI_File_iwrite_all_c(; *const c_void; abi::MPI_Count; request) => At::Individual, Dir::Write, Then::Request;
    MPI_File_iread_at_c / PMPI_File_iread_at_c(offset; *mut c_void; abi::MPI_Count; request) => At::Offset(offset), Dir::Read, Then::Request;
    MPI_File_iwrite_at_c / PMPI_File_iwrite_at_c(offset; *const c_void; abi::MPI_Count; request) => At::Offset(offset), Dir::Write, Then::Request;
    MPI_File_iread_at_all_c / PMPI_File_iread_at_all_c(offset; *mut c_void; abi::MPI_Count; request) => At::Offset(offset), Dir::Read, Then::Request;
    MPI_File_iwrite_at_all_c / PMPI_File_iwrite_at_all_c(offset; *const c_void; abi::MPI_Count; request) => At::Offset(offset), Dir::Write, Then::Request;
    MPI_File_iread_shared_c / PMPI_File_iread_shared_c(; *mut c_void; abi::MPI_Count; request) => At::Shared, Dir::Read, Then::Request;
    MPI_File_iwrite_shared_c / PMPI_File_iwrite_shared_c(; *const c_void; abi::MPI_Count; request) => At::Shared, Dir::Write, Then::Request;
}

/// Defines the split-collective begins (no status or request argument).
macro_rules! begins {
    ($(
        $name:ident / $pname:ident ( $($off:ident)? ; $buf:ty ; $count:ty ) => $at:expr, $dir:expr;
    )*) => {
        super::mpi! {$(
            #[doc = concat!("`", stringify!($name), "`: the access happens here; the end reports it.")]
            fn $name / $pname(fh: abi::MPI_File, $($off: abi::MPI_Offset,)? buf: $buf, count: $count, datatype: abi::MPI_Datatype) {
                // SAFETY: MPI's rules for the pointers.
                unsafe { data(stringify!($name), fh, $at, $dir, buf as *mut c_void, count.into(), datatype, Then::Split, abi::MPI_STATUS_IGNORE, core::ptr::null_mut()) }
            }
        )*}
    };
}

begins! {
    MPI_File_read_all_begin / PMPI_File_read_all_begin(; *mut c_void; c_int) => At::Individual, Dir::Read;
    MPI_File_write_all_begin / PMPI_File_write_all_begin(; *const c_void; c_int) => At::Individual, Dir::Write;
    MPI_File_read_at_all_begin / PMPI_File_read_at_all_begin(offset; *mut c_void; c_int) => At::Offset(offset), Dir::Read;
    MPI_File_write_at_all_begin / PMPI_File_write_at_all_begin(offset; *const c_void; c_int) => At::Offset(offset), Dir::Write;
    MPI_File_read_ordered_begin / PMPI_File_read_ordered_begin(; *mut c_void; c_int) => At::Ordered, Dir::Read;
    MPI_File_write_ordered_begin / PMPI_File_write_ordered_begin(; *const c_void; c_int) => At::Ordered, Dir::Write;
    MPI_File_read_all_begin_c / PMPI_File_read_all_begin_c(; *mut c_void; abi::MPI_Count) => At::Individual, Dir::Read;
    MPI_File_write_all_begin_c / PMPI_File_write_all_begin_c(; *const c_void; abi::MPI_Count) => At::Individual, Dir::Write;
    MPI_File_read_at_all_begin_c / PMPI_File_read_at_all_begin_c(offset; *mut c_void; abi::MPI_Count) => At::Offset(offset), Dir::Read;
    MPI_File_write_at_all_begin_c / PMPI_File_write_at_all_begin_c(offset; *const c_void; abi::MPI_Count) => At::Offset(offset), Dir::Write;
    MPI_File_read_ordered_begin_c / PMPI_File_read_ordered_begin_c(; *mut c_void; abi::MPI_Count) => At::Ordered, Dir::Read;
    MPI_File_write_ordered_begin_c / PMPI_File_write_ordered_begin_c(; *const c_void; abi::MPI_Count) => At::Ordered, Dir::Write;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Key;

    #[test]
    fn file_handles_round_trip_and_are_not_null() {
        for index in [0, 1, 77, (1 << SLOT_BITS) - 1] {
            for gen in [0, 1, 63, 64, 1000] {
                let h = file_handle(FileId(Key { index, gen }));
                assert_ne!(h, abi::MPI_FILE_NULL);
                assert_eq!(decode(h), Some((index, gen & GEN_MASK)));
                assert_eq!(f2c(c2f(h)), h, "Fortran integer round trip");
            }
        }
    }

    #[test]
    fn other_values_are_not_file_handles() {
        assert_eq!(decode(abi::MPI_FILE_NULL), None);
        assert_eq!(decode(0x1234 as abi::MPI_File), None);
        assert_eq!(decode(usize::MAX as abi::MPI_File), None);
        let comm = abi::MPI_COMM_WORLD as u32 as usize as abi::MPI_File;
        assert_eq!(decode(comm), None);
    }
}
