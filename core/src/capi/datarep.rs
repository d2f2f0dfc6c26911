//! User data representations: `MPI_Register_datarep` and the conversions of views that name one.
//!
//! A registered representation is a name and three callbacks. At `MPI_File_set_view` the
//! extent callback is asked the file size of every predefined type of the etype and filetype:
//! if all are native the file has the native layout, else the view is laid out in those sizes
//! (`io::layout`: element displacements scaled, byte displacements as given) and its stream
//! counts file bytes. An access converts in chunks of whole memory-type instances through a
//! staging buffer from the platform: a write calls the write conversion (memory → staging,
//! file representation, `count` items back to back in their file sizes) and writes the staged
//! bytes through the view; a read reads them and calls the read conversion (staging → memory). The callbacks'
//! `count` and `position` count predefined data items, as the standard says. A null conversion
//! (`MPI_CONVERSION_FN_NULL`) moves native bytes unconverted. Callbacks run as user code
//! (`Shared::user_callback`), so they may call MPI (e.g. `MPI_Type_size`).

use core::ffi::{c_char, c_int, c_void, CStr};

use super::abi;
use super::file::{code, on_null};
use super::handles;
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::io::layout::{Sizes, MAX_LEAVES};
use crate::io::{self, Dir, FileId, Memory};
use crate::shared::Inside;

/// Representations a process may register (the table is fixed: no heap in the core).
pub const MAX_DATAREPS: usize = 16;
/// Bytes of a name, NUL excluded (`MPI_MAX_DATAREP_STRING` holds the NUL too).
const NAME_MAX: usize = abi::MPI_MAX_DATAREP_STRING as usize - 1;
/// Bytes of file data converted per callback call at most (one memory-type instance at least).
const CHUNK: u64 = 1 << 20;

/// A conversion callback, in its `int` or large-count (`_c`) form.
#[derive(Clone, Copy)]
enum Conv {
    Int(abi::MPI_Datarep_conversion_function),
    Large(abi::MPI_Datarep_conversion_function_c),
}

#[derive(Clone, Copy)]
struct Rep {
    name: [u8; NAME_MAX],
    len: usize,
    read: Option<Conv>,
    write: Option<Conv>,
    extent: abi::MPI_Datarep_extent_function,
    /// The user's `extra_state`, kept as an address (the table is shared between threads).
    extra: usize,
}

struct Table {
    reps: [Option<Rep>; MAX_DATAREPS],
}

/// Registrations last for the process (the standard has no way to remove one).
static TABLE: spin::Mutex<Table> = spin::Mutex::new(Table {
    reps: [None; MAX_DATAREPS],
});

/// The slot of the representation called `name`, if one is registered.
pub fn find(name: &[u8]) -> Option<u8> {
    let t = TABLE.lock();
    t.reps
        .iter()
        .position(|r| r.is_some_and(|r| &r.name[..r.len] == name))
        .map(|i| i as u8)
}

/// The name of registered representation `slot` into `out` (NUL-terminated); false if none.
pub fn name_of(slot: u8, out: &mut [u8; abi::MPI_MAX_DATAREP_STRING as usize]) -> bool {
    let t = TABLE.lock();
    match t.reps.get(slot as usize).copied().flatten() {
        Some(r) => {
            out[..r.len].copy_from_slice(&r.name[..r.len]);
            out[r.len] = 0;
            true
        }
        None => false,
    }
}

fn rep(slot: u8) -> Result<Rep> {
    TABLE
        .lock()
        .reps
        .get(slot as usize)
        .copied()
        .flatten()
        .ok_or(Error::new(
            ErrorClass::Intern,
            Reason::BadArgument {
                what: "a view names a data representation that is not registered",
            },
        ))
}

/// A code a user callback returned, as a result.
fn user_code(rc: c_int, what: &'static str) -> Result<()> {
    if rc == abi::MPI_SUCCESS {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::from_code(rc).unwrap_or(ErrorClass::Other),
        Reason::BadArgument { what },
    ))
}

/// Adds a representation; `MPI_ERR_DUP_DATAREP` if the name is taken (the predefined ones
/// included).
///
/// # Safety
/// `datarep` is NULL or a NUL-terminated string.
unsafe fn register(
    datarep: *const c_char,
    read: Option<Conv>,
    write: Option<Conv>,
    extent: Option<abi::MPI_Datarep_extent_function>,
    extra: *mut c_void,
) -> Result<()> {
    if datarep.is_null() {
        return Err(Error::bad_arg("datarep is NULL"));
    }
    // SAFETY: the caller's contract.
    let name = unsafe { CStr::from_ptr(datarep) }.to_bytes();
    if name.is_empty() || name.len() > NAME_MAX {
        return Err(Error::bad_arg(
            "datarep must be a name of 1 to MPI_MAX_DATAREP_STRING - 1 characters",
        ));
    }
    let Some(extent) = extent else {
        return Err(Error::bad_arg("dtype_file_extent_fn is NULL"));
    };
    let dup = Error::new(
        ErrorClass::DupDatarep,
        Reason::BadArgument {
            what: "a data representation of this name is already defined",
        },
    );
    if [&b"native"[..], b"internal", b"external32"]
        .iter()
        .any(|p| p.eq_ignore_ascii_case(name))
    {
        return Err(dup);
    }
    let mut t = TABLE.lock();
    if t.reps
        .iter()
        .any(|r| r.is_some_and(|r| &r.name[..r.len] == name))
    {
        return Err(dup);
    }
    let Some(free) = t.reps.iter_mut().find(|r| r.is_none()) else {
        return Err(Error::exhausted(
            "registered data representations",
            MAX_DATAREPS as u32,
            "datarep (the table of MPI_Register_datarep is fixed)",
        ));
    };
    let mut r = Rep {
        name: [0; NAME_MAX],
        len: name.len(),
        read,
        write,
        extent,
        extra: extra as usize,
    };
    r.name[..name.len()].copy_from_slice(name);
    *free = Some(r);
    Ok(())
}

/// Collects the predefined types `t` is made of into `out` (distinct), to `depth` levels.
fn leaves(
    types: &TypeTable,
    t: Datatype,
    out: &mut heapless::Vec<Datatype, 32>,
    depth: u32,
) -> Result<()> {
    if t.is_predefined() {
        if !out.contains(&t) && out.push(t).is_err() {
            return Err(Error::new(
                ErrorClass::UnsupportedDatarep,
                Reason::BadArgument {
                    what: "a type of more than 32 distinct predefined types with a user data representation",
                },
            ));
        }
        return Ok(());
    }
    if depth == 0 {
        return Err(Error::new(
            ErrorClass::Type,
            Reason::BadArgument {
                what: "a datatype nested too deeply",
            },
        ));
    }
    for old in types.old_types(t)? {
        leaves(types, old, out, depth - 1)?;
    }
    Ok(())
}

/// The file sizes of the predefined types of `of` in representation `slot`, asked of its
/// extent callback: `None` when every one is its native size (the file then has the native
/// layout), else the table the view's layout is built with ([`io::layout`]).
pub fn file_sizes(cx: &mut Inside, slot: u8, of: &[Datatype]) -> Result<Option<Sizes>> {
    let r = rep(slot)?;
    let mut list = heapless::Vec::<Datatype, 32>::new();
    let mut sizes = heapless::Vec::<u64, 32>::new();
    {
        let types = &cx.e().p2p.types;
        for &t in of {
            leaves(types, t, &mut list, 64)?;
        }
        for &d in &list {
            // Pushes as many as `list` holds: cannot fail.
            let _ = sizes.push(types.info(d)?.size);
        }
    }
    let mut table = [(Datatype::BYTE, 0u32); MAX_LEAVES];
    let mut native = true;
    for (k, (&d, &size)) in list.iter().zip(sizes.iter()).enumerate() {
        let mut ext: abi::MPI_Aint = 0;
        let h = handles::datatype_handle(d);
        // SAFETY: the user's callback, called as MPI calls it, with the state it gave.
        let rc = crate::api::ENGINE
            .user_callback(|| unsafe { (r.extent)(h, &mut ext, r.extra as *mut c_void) });
        user_code(rc, "the data representation's dtype_file_extent_fn failed")?;
        let Ok(file) = u32::try_from(ext) else {
            return Err(Error::bad_arg(
                "the data representation's dtype_file_extent_fn gave a negative extent or one of 4 GiB or more",
            ));
        };
        native &= u64::from(file) == size;
        let Some(slot) = table.get_mut(k) else {
            return Err(Error::new(
                ErrorClass::UnsupportedDatarep,
                Reason::BadArgument {
                    what: "a view of more than 16 distinct predefined types (MAX_LEAVES) in a user data representation",
                },
            ));
        };
        *slot = (d, file);
    }
    if native {
        return Ok(None);
    }
    Ok(Some(Sizes::Table {
        n: list.len() as u8,
        of: table,
    }))
}

/// Moves `mem` (C handle `dt`) to or from view-stream byte `start` of file `id`, whose view is
/// in registered representation `slot`, converting through its callbacks; bytes moved.
///
/// # Safety
/// MPI's rule for the buffer, as for [`io::transfer`].
pub unsafe fn transfer(
    cx: &mut Inside,
    id: FileId,
    dir: Dir,
    start: u64,
    mem: Memory,
    dt: abi::MPI_Datatype,
    slot: u8,
) -> Result<u64> {
    let r = rep(slot)?;
    let conv = match dir {
        Dir::Write => r.write,
        Dir::Read => r.read,
    };
    let Some(conv) = conv else {
        // MPI_CONVERSION_FN_NULL: the file holds native bytes.
        // SAFETY: the caller's contract.
        return unsafe { io::transfer(cx.e(), id, dir, start, mem) };
    };
    let info = *cx.e().p2p.types.check_committed(mem.dt)?;
    let elems = info.elems;
    let view = cx.e().io.get(id)?.view;
    let (size, native) = match view.sizes {
        // The view fixed the file sizes of its types; the memory type is made of them.
        Some(_) => io::file_and_native_bytes(cx.e(), &view, 1, mem.dt)?,
        // A native layout: every type of the memory must keep its native size too.
        None => match file_sizes(cx, slot, &[mem.dt])? {
            None => (info.size, info.size),
            Some(_) => {
                return Err(Error::new(
                    ErrorClass::UnsupportedDatarep,
                    Reason::BadArgument {
                        what: "the memory datatype has a type whose file extent in this data representation differs from its native size, and the view's etype and filetype have none",
                    },
                ))
            }
        },
    };
    if size == 0 || mem.count == 0 || native == 0 {
        return Ok(0);
    }
    let per = (CHUNK / size).clamp(1, mem.count);
    let bytes = usize::try_from(per * size).map_err(|_| Error::bad_arg("datatype too large"))?;
    let platform = cx.e().platform;
    let Some(stage) = platform.alloc_mem(bytes) else {
        return Err(Error::new(
            ErrorClass::NoMem,
            Reason::PlatformOutOfMemory {
                what: "the staging buffer of a data representation conversion",
            },
        ));
    };
    let mut moved = 0u64;
    let mut i = 0u64;
    let result = loop {
        if i >= mem.count {
            break Ok(moved);
        }
        let n = per.min(mem.count - i);
        let staged = Memory {
            buf: stage,
            count: n * size,
            dt: Datatype::BYTE,
        };
        let at = start + i * size;
        let step = match dir {
            Dir::Write => {
                convert(conv, &r, mem.buf, dt, n * elems, stage, i * elems).and_then(|()| {
                    // SAFETY: `stage` holds `n * size` bytes, ours until freed below.
                    unsafe { io::transfer(cx.e(), id, dir, at, staged) }
                })
            }
            Dir::Read => {
                // SAFETY: as above.
                let got = unsafe { io::transfer(cx.e(), id, dir, at, staged) };
                got.and_then(|got| {
                    // Only whole instances are converted at the end of the file.
                    let whole = got / size;
                    if whole > 0 {
                        convert(conv, &r, mem.buf, dt, whole * elems, stage, i * elems)?;
                    }
                    Ok(whole * size)
                })
            }
        };
        match step {
            Ok(got) => {
                moved += got;
                if got < n * size {
                    break Ok(moved);
                }
            }
            Err(e) => break Err(e),
        }
        i += n;
    };
    // SAFETY: `stage` came from this platform's alloc_mem above and is given back once.
    unsafe { platform.free_mem(stage) };
    result
}

/// Calls a conversion callback for `count` data items from item `position` of `userbuf`.
fn convert(
    conv: Conv,
    r: &Rep,
    userbuf: *mut u8,
    dt: abi::MPI_Datatype,
    count: u64,
    filebuf: *mut u8,
    position: u64,
) -> Result<()> {
    let pos = abi::MPI_Offset::try_from(position)
        .map_err(|_| Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
    let extra = r.extra as *mut c_void;
    let rc = match conv {
        Conv::Int(f) => {
            let n = c_int::try_from(count)
                .map_err(|_| Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
            // SAFETY: the user's callback, called as MPI calls it: `filebuf` holds `count`
            // items in the file representation, `userbuf` is the access's buffer.
            crate::api::ENGINE
                .user_callback(|| unsafe { f(userbuf.cast(), dt, n, filebuf.cast(), pos, extra) })
        }
        Conv::Large(f) => {
            let n = abi::MPI_Count::try_from(count)
                .map_err(|_| Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
            // SAFETY: as above.
            crate::api::ENGINE
                .user_callback(|| unsafe { f(userbuf.cast(), dt, n, filebuf.cast(), pos, extra) })
        }
    };
    user_code(rc, "the data representation's conversion function failed")
}

super::mpi! {
    fn MPI_Register_datarep / PMPI_Register_datarep(datarep: *const c_char, read_conversion_fn: Option<abi::MPI_Datarep_conversion_function>, write_conversion_fn: Option<abi::MPI_Datarep_conversion_function>, dtype_file_extent_fn: Option<abi::MPI_Datarep_extent_function>, extra_state: *mut c_void) {
        code(on_null("MPI_Register_datarep", |_| {
            // SAFETY: MPI's rule: a NUL-terminated name.
            unsafe {
                register(datarep, read_conversion_fn.map(Conv::Int), write_conversion_fn.map(Conv::Int), dtype_file_extent_fn, extra_state)
            }
        }))
    }

    fn MPI_Register_datarep_c / PMPI_Register_datarep_c(datarep: *const c_char, read_conversion_fn: Option<abi::MPI_Datarep_conversion_function_c>, write_conversion_fn: Option<abi::MPI_Datarep_conversion_function_c>, dtype_file_extent_fn: Option<abi::MPI_Datarep_extent_function>, extra_state: *mut c_void) {
        code(on_null("MPI_Register_datarep_c", |_| {
            // SAFETY: MPI's rule: a NUL-terminated name.
            unsafe {
                register(datarep, read_conversion_fn.map(Conv::Large), write_conversion_fn.map(Conv::Large), dtype_file_extent_fn, extra_state)
            }
        }))
    }
}
