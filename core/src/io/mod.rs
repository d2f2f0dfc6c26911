//! MPI-IO: files opened by a group of processes, views, and reads and writes through them.
//!
//! Shape (after Open MPI's OMPIO, much reduced for a first slice):
//! - [`fs`]: the file-system layer the platform provides (POSIX on Linux);
//! - [`view`]: file views — a filetype's description walked into file byte ranges;
//! - [`layout`]: filetypes rebuilt in the file's sizes, for representations that change them;
//! - this module: the table of open files ([`Files`], a pool growing within `mpi_memory_max`
//!   up to `io_max_files`), collective open and close, and the data path ([`transfer`]) that
//!   moves a memory buffer of any datatype to or from a view range through the datatype
//!   engine's convertor — straight between user memory and the file where the memory is
//!   contiguous, through a staging buffer of `io_buffer_bytes` otherwise;
//! - [`shared`]: the shared file pointer, a counter in a hidden side file under a byte-range
//!   lock, so processes on any host sharing the file system agree on it;
//! - [`twophase`]: two-phase collective buffering of the collective forms, and the hints.
//!
//! Every operation runs to its end in the call (non-blocking forms complete at their start;
//! collective forms go through aggregators when their accesses interleave, else each process
//! moves its own data).

pub mod background;
pub mod fs;
pub mod layout;
pub mod nbc;
pub mod shared;
pub mod twophase;
pub mod view;

use crate::arena::{Arena, Sizer};
use crate::comm::{CommId, ErrHandler};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::info::InfoId;
use crate::params::{Default, Kind, ParamDef, Params};
use crate::pool::{Capacity, Key, Pool};
use crate::shared::Inside;
use fs::{Fd, FileSystem, OpenHow};
use view::View;

/// `io_max_files`.
pub static IO_MAX_FILES: ParamDef = ParamDef {
    name: "io_max_files",
    kind: Kind::Int {
        min: 1,
        max: 1 << 20,
    },
    default: Default::Int(1 << 16),
    description: "Most MPI files open at once in a process (the table grows within mpi_memory_max)",
};

/// `io_buffer_bytes`.
pub static IO_BUFFER_BYTES: ParamDef = ParamDef {
    name: "io_buffer_bytes",
    kind: Kind::Int {
        min: 0,
        max: 1 << 30,
    },
    default: Default::Int(4 << 20),
    description: "Staging buffer of an open file, for memory datatypes that are not contiguous (0: none; such accesses then fail)",
};

/// `io_cb`: the default of the `romio_cb_read` and `romio_cb_write` hints.
pub static IO_CB: ParamDef = ParamDef {
    name: "io_cb",
    kind: Kind::Str,
    default: Default::Str("automatic"),
    description: "Two-phase collective buffering of collective accesses by default: enable, disable or automatic (when the members' accesses interleave)",
};

/// `io_cb_small_pieces`.
pub static IO_CB_SMALL_PIECES: ParamDef = ParamDef {
    name: "io_cb_small_pieces",
    kind: Kind::Int {
        min: 1,
        max: 1 << 30,
    },
    default: Default::Int(16 << 10),
    description: "Automatic collective buffering only when the members' contiguous file pieces average fewer bytes than this (hint stormpi_cb_small_pieces)",
};

/// `io_cb_nodes`.
pub static IO_CB_NODES: ParamDef = ParamDef {
    name: "io_cb_nodes",
    kind: Kind::Int {
        min: 0,
        max: 1 << 24,
    },
    default: Default::Int(0),
    description: "Aggregators of collective buffering by default (hint cb_nodes; 0: io_cb_per_node on each node)",
};

/// `io_cb_per_node`.
pub static IO_CB_PER_NODE: ParamDef = ParamDef {
    name: "io_cb_per_node",
    kind: Kind::Int {
        min: 1,
        max: 1 << 16,
    },
    default: Default::Int(4),
    description: "Aggregators per node when cb_nodes is 0 (hint stormpi_cb_per_node; a node with fewer members has them all)",
};

/// `io_cb_buffer_size`.
pub static IO_CB_BUFFER_SIZE: ParamDef = ParamDef {
    name: "io_cb_buffer_size",
    kind: Kind::Int {
        min: 1,
        max: 1 << 30,
    },
    default: Default::Int(16 << 20),
    description: "Bytes an aggregator handles per round of collective buffering by default (hint cb_buffer_size)",
};

/// `io_striping_unit`.
pub static IO_STRIPING_UNIT: ParamDef = ParamDef {
    name: "io_striping_unit",
    kind: Kind::Int {
        min: 1,
        max: 1 << 30,
    },
    default: Default::Int(1 << 20),
    description: "File domains of collective buffering start at multiples of this by default (hint striping_unit)",
};

/// `io_ind_wr_buffer_size`.
pub static IO_IND_WR_BUFFER_SIZE: ParamDef = ParamDef {
    name: "io_ind_wr_buffer_size",
    kind: Kind::Int {
        min: 1,
        max: 1 << 30,
    },
    default: Default::Int(512 << 10),
    description:
        "Window of sieved non-contiguous independent writes by default (hint ind_wr_buffer_size)",
};

/// Parameters of the I/O layer.
pub static PARAMS: [&ParamDef; 9] = [
    &IO_MAX_FILES,
    &IO_BUFFER_BYTES,
    &IO_CB,
    &IO_CB_SMALL_PIECES,
    &IO_CB_NODES,
    &IO_CB_PER_NODE,
    &IO_CB_BUFFER_SIZE,
    &IO_STRIPING_UNIT,
    &IO_IND_WR_BUFFER_SIZE,
];

/// Access-mode bits (MPI's values, the same in every ABI stormpi speaks).
pub mod amode {
    /// `MPI_MODE_CREATE`.
    pub const CREATE: i32 = 1;
    /// `MPI_MODE_RDONLY`.
    pub const RDONLY: i32 = 2;
    /// `MPI_MODE_WRONLY`.
    pub const WRONLY: i32 = 4;
    /// `MPI_MODE_RDWR`.
    pub const RDWR: i32 = 8;
    /// `MPI_MODE_DELETE_ON_CLOSE`.
    pub const DELETE_ON_CLOSE: i32 = 16;
    /// `MPI_MODE_UNIQUE_OPEN`.
    pub const UNIQUE_OPEN: i32 = 32;
    /// `MPI_MODE_EXCL`.
    pub const EXCL: i32 = 64;
    /// `MPI_MODE_APPEND`.
    pub const APPEND: i32 = 128;
    /// `MPI_MODE_SEQUENTIAL`.
    pub const SEQUENTIAL: i32 = 256;
    /// Every bit MPI defines.
    pub const ALL: i32 = 511;
}

/// Longest file name kept (Linux's `PATH_MAX`).
pub const PATH_MAX: usize = 4096;

/// An open file.
pub struct File {
    /// The platform's descriptor.
    pub fd: Fd,
    /// A private duplicate of the communicator the file was opened on (collective steps run
    /// on it, apart from the user's traffic).
    pub comm: CommId,
    /// The access mode.
    pub amode: i32,
    /// Atomic mode (`MPI_File_set_atomicity`).
    pub atomic: bool,
    /// The current view.
    pub view: View,
    /// The individual file pointer, in etypes of the view.
    pub pos: u64,
    /// The file's error handler.
    pub errhandler: ErrHandler,
    /// Hints given at open or with `MPI_File_set_info` (an info object the file owns).
    pub info: Option<InfoId>,
    /// Staging buffer (address, bytes) from the platform, 0 bytes when none.
    stage: (usize, usize),
    /// The shared file pointer's side file, once a shared access opened it.
    pub shared_fd: Option<Fd>,
    /// The request of a split collective begun and not yet ended.
    pub split: Option<crate::pml::request::ReqId>,
    /// The hints in force (rank 0's, the same at every member).
    pub hints: twophase::Hints,
    path: [u8; PATH_MAX],
    path_len: usize,
}

impl File {
    /// The name the file was opened with.
    pub fn path(&self) -> &[u8] {
        &self.path[..self.path_len]
    }
}

/// A file's key in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId(pub Key);

/// The open files of a process.
pub struct Files {
    files: Pool<File>,
    /// The error handler of `MPI_FILE_NULL`: what failed opens use (`MPI_ERRORS_RETURN` by
    /// default, as the standard says for files).
    pub null_errhandler: ErrHandler,
    buffer_bytes: usize,
    /// The hints a file starts with (from the parameters).
    pub defaults: twophase::Hints,
    /// Non-blocking accesses in flight.
    pub background: background::Background,
    /// Non-blocking collective accesses queued.
    pub nbc: nbc::Queue,
}

impl Files {
    /// Arena bytes for the table at init.
    pub fn size(params: &Params, sizer: &mut Sizer) {
        Pool::<File>::size(sizer, capacity(params));
    }

    /// An empty table.
    pub fn new(params: &Params, arena: &mut Arena) -> Result<Files> {
        Ok(Files {
            files: Pool::new(arena, capacity(params))?,
            null_errhandler: ErrHandler::Return,
            buffer_bytes: params.usize(&IO_BUFFER_BYTES),
            defaults: default_hints(params),
            background: background::Background::new(),
            nbc: nbc::Queue::new(),
        })
    }

    /// The live file `id` names.
    pub fn get(&self, id: FileId) -> Result<&File> {
        self.files.get(id.0).ok_or_else(bad_file)
    }

    /// The live file `id` names, to change.
    pub fn get_mut(&mut self, id: FileId) -> Result<&mut File> {
        self.files.get_mut(id.0).ok_or_else(bad_file)
    }

    /// The file in slot `index`, if one is open there.
    pub fn at(&self, index: u32) -> Option<FileId> {
        self.files.key_at(index).map(FileId)
    }

    /// Whether an open file uses user error handler `index`.
    pub fn uses_handler(&self, index: u16) -> bool {
        self.files
            .iter()
            .any(|(_, f)| f.errhandler == ErrHandler::User(index))
    }
}

fn default_hints(params: &Params) -> twophase::Hints {
    let cb = twophase::CbMode::parse(params.str(&IO_CB).as_bytes())
        .unwrap_or(twophase::CbMode::Automatic);
    twophase::Hints {
        cb_read: cb,
        cb_write: cb,
        cb_nodes: params.int(&IO_CB_NODES) as u64,
        cb_buffer_size: params.int(&IO_CB_BUFFER_SIZE) as u64,
        striping_unit: params.int(&IO_STRIPING_UNIT) as u64,
        striping_factor: 1,
        ind_wr_buffer_size: params.int(&IO_IND_WR_BUFFER_SIZE) as u64,
        cb_small_pieces: params.int(&IO_CB_SMALL_PIECES) as u64,
        cb_per_node: params.int(&IO_CB_PER_NODE) as u64,
    }
}

/// Takes the hints of file `id`'s info object over those in force, agrees them (rank 0's
/// win), and writes the values in force back into the info object (collective).
pub fn apply_hints(cx: &mut Inside, id: FileId) -> Result<()> {
    let e = cx.e();
    let f = e.io.get(id)?;
    let (fc, info) = (f.comm, f.info);
    let mut h = f.hints;
    if let Some(i) = info {
        h = h.with_info(&e.objects.infos, i);
    }
    let h = h.agree(cx, fc)?;
    let n = twophase::aggregator_count(cx, fc, &h)?;
    let e = cx.e();
    let info = match e.io.get(id)?.info {
        Some(i) => i,
        None => {
            let i = e.objects.infos.create()?;
            e.io.get_mut(id)?.info = Some(i);
            i
        }
    };
    h.put(&mut e.objects.infos, info, n)?;
    e.io.get_mut(id)?.hints = h;
    Ok(())
}

fn capacity(params: &Params) -> Capacity {
    let max = params.u32(&IO_MAX_FILES);
    Capacity {
        initial: 2.min(max),
        max,
    }
}

/// `MPI_ERR_FILE`: not an open file.
pub fn bad_file() -> Error {
    Error::new(
        ErrorClass::File,
        Reason::BadArgument {
            what: "not an open file",
        },
    )
}

fn amode_error(what: &'static str) -> Error {
    Error::new(ErrorClass::Amode, Reason::BadArgument { what })
}

/// Checks an access mode as the standard asks.
pub fn check_amode(mode: i32) -> Result<()> {
    use amode::*;
    if mode & !ALL != 0 {
        return Err(amode_error("the access mode has bits MPI does not define"));
    }
    let rw = [RDONLY, WRONLY, RDWR]
        .iter()
        .filter(|b| mode & **b != 0)
        .count();
    if rw != 1 {
        return Err(amode_error(
            "the access mode needs exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY, MPI_MODE_RDWR",
        ));
    }
    if mode & RDONLY != 0 && mode & (CREATE | EXCL) != 0 {
        return Err(amode_error(
            "MPI_MODE_RDONLY cannot go with MPI_MODE_CREATE or MPI_MODE_EXCL",
        ));
    }
    if mode & RDWR != 0 && mode & SEQUENTIAL != 0 {
        return Err(amode_error(
            "MPI_MODE_RDWR cannot go with MPI_MODE_SEQUENTIAL",
        ));
    }
    Ok(())
}

/// The platform's file system, or the error saying there is none.
pub fn file_system(e: &Engine) -> Result<&'static dyn FileSystem> {
    e.platform.file_system().ok_or(Error::unsupported(
        "MPI-IO on this platform (it provides no file system)",
    ))
}

/// Agrees an outcome across `comm`: the largest error class any member had (0: none).
fn agree(cx: &mut Inside, comm: CommId, mine: i32) -> Result<i32> {
    let input = mine.to_ne_bytes();
    let mut out = [0u8; 4];
    crate::coll::allreduce(
        cx,
        Some(&input),
        &mut out,
        1,
        Datatype::INT,
        crate::op::Op::Max,
        comm,
    )?;
    Ok(i32::from_ne_bytes(out))
}

/// An error of class `code` another member met, as this member reports it.
fn remote_error(code: i32, what: &'static str) -> Error {
    Error::new(
        ErrorClass::from_code(code).unwrap_or(ErrorClass::Io),
        Reason::BadArgument { what },
    )
}

/// `MPI_File_open`: collective over `comm`. Rank 0 creates the file (so `MPI_MODE_EXCL` has
/// one winner), then the others open it; every member learns whether all succeeded.
pub fn open(
    cx: &mut Inside,
    comm: CommId,
    path: &[u8],
    mode: i32,
    info: Option<InfoId>,
) -> Result<FileId> {
    let fs = file_system(cx.e())?;
    if cx.e().comm(comm)?.is_inter() {
        return Err(Error::new(
            ErrorClass::Comm,
            Reason::BadArgument {
                what: "files cannot be opened on an intercommunicator",
            },
        ));
    }
    // What this member finds wrong by itself; every member learns whether anyone did before
    // any of them goes on, so a member with a bad argument cannot leave the others waiting.
    let local = check_amode(mode).and_then(|()| {
        if path.is_empty() || path.len() > PATH_MAX {
            return Err(Error::new(
                ErrorClass::BadFile,
                Reason::BadArgument {
                    what: "the file name is empty or longer than 4096 bytes",
                },
            ));
        }
        Ok(())
    });
    // One MAX-allreduce of (mode, -mode, error class) gives the largest and the smallest mode
    // and the worst local error.
    let mut mine = [0u8; 12];
    mine[..4].copy_from_slice(&mode.to_ne_bytes());
    mine[4..8].copy_from_slice(&mode.wrapping_neg().to_ne_bytes());
    let class = local.err().map_or(0, |e| e.class.code());
    mine[8..].copy_from_slice(&class.to_ne_bytes());
    let mut all = [0u8; 12];
    crate::coll::allreduce(
        cx,
        Some(&mine),
        &mut all,
        3,
        Datatype::INT,
        crate::op::Op::Max,
        comm,
    )?;
    let word = |i: usize| i32::from_ne_bytes([all[i], all[i + 1], all[i + 2], all[i + 3]]);
    local?;
    if word(8) != 0 {
        return Err(remote_error(
            word(8),
            "another member passed a bad access mode or file name",
        ));
    }
    if word(0) != word(4).wrapping_neg() {
        return Err(Error::new(
            ErrorClass::NotSame,
            Reason::BadArgument {
                what: "the members of the communicator opened the file with different access modes",
            },
        ));
    }
    let fc = crate::comm::create::dup(cx, comm)?;
    match open_on(cx, fs, fc, path, mode, info) {
        Ok(id) => {
            // Every member opened: the hints are agreed on the file's own communicator.
            apply_hints(cx, id)?;
            Ok(id)
        }
        Err(err) => {
            let _ = crate::comm::create::free(cx, fc);
            Err(err)
        }
    }
}

fn open_on(
    cx: &mut Inside,
    fs: &'static dyn FileSystem,
    fc: CommId,
    path: &[u8],
    mode: i32,
    info: Option<InfoId>,
) -> Result<FileId> {
    use amode::*;
    let rank = cx.e().comm(fc)?.rank;
    let how = OpenHow {
        read: mode & (RDONLY | RDWR) != 0,
        write: mode & (WRONLY | RDWR) != 0,
        create: false,
        exclusive: false,
    };
    let first = OpenHow {
        create: mode & CREATE != 0,
        exclusive: mode & EXCL != 0,
        ..how
    };
    // Rank 0 first: it alone creates, and it removes a shared-pointer side file a job before
    // left behind (no member can use it before this open returns).
    let mut fd = None;
    let mut err = None;
    if rank == 0 {
        match fs.open(path, first) {
            Ok(f) => {
                fd = Some(f);
                shared::remove_side_file(fs, path);
            }
            Err(e) => err = Some(e),
        }
    }
    let code0 = agree(cx, fc, err.map_or(0, |e| e.class_code()))?;
    if code0 != 0 {
        return Err(match err {
            Some(e) => e.to_error("opening the file"),
            None => remote_error(code0, "rank 0 could not open or create the file"),
        });
    }
    if rank != 0 {
        match fs.open(path, how) {
            Ok(f) => fd = Some(f),
            Err(e) => err = Some(e),
        }
    }
    let code = agree(cx, fc, err.map_or(0, |e| e.class_code()))?;
    let fd = match (fd, code) {
        (Some(fd), 0) => fd,
        (fd, _) => {
            if let Some(fd) = fd {
                let _ = fs.close(fd);
            }
            return Err(match err {
                Some(e) => e.to_error("opening the file"),
                None => remote_error(code, "another member could not open the file"),
            });
        }
    };
    let e = cx.e();
    let hints = match info {
        Some(i) => match e.objects.infos.dup(i) {
            Ok(d) => Some(d),
            Err(err) => {
                let _ = fs.close(fd);
                return Err(err);
            }
        },
        None => None,
    };
    let bytes = e.io.buffer_bytes;
    let stage = match bytes {
        0 => (0, 0),
        n => e.platform.alloc_mem(n).map_or((0, 0), |p| (p as usize, n)),
    };
    let pos = if mode & APPEND != 0 {
        fs.size(fd).unwrap_or(0)
    } else {
        0
    };
    let mut file = File {
        fd,
        comm: fc,
        amode: mode,
        atomic: false,
        view: View::bytes(),
        pos,
        errhandler: e.io.null_errhandler,
        info: hints,
        stage,
        shared_fd: None,
        split: None,
        hints: e.io.defaults,
        path: [0; PATH_MAX],
        path_len: path.len(),
    };
    file.path[..path.len()].copy_from_slice(path);
    let key = match e.io.files.insert(file) {
        Ok(k) => k,
        Err(file) => {
            let _ = fs.close(file.fd);
            release_stage(e, file.stage);
            if let Some(h) = file.info {
                let _ = e.objects.infos.free(h);
            }
            return Err(e.io.files.exhausted("open files", IO_MAX_FILES.name));
        }
    };
    if mode & APPEND != 0 && rank == 0 {
        // The shared pointer starts at the end too.
        let id = FileId(key);
        if let Err(err) = shared::set(e, id, pos) {
            let _ = close_local(e, id);
            return Err(err);
        }
    }
    Ok(FileId(key))
}

fn release_stage(e: &Engine, stage: (usize, usize)) {
    if stage.1 > 0 {
        // SAFETY: the address came from this platform's alloc_mem at open and is given back
        // once, as its file leaves the table.
        unsafe { e.platform.free_mem(stage.0 as *mut u8) };
    }
}

/// Takes a file out of the table and closes what it holds, here only.
fn close_local(e: &mut Engine, id: FileId) -> Result<File> {
    let fs = file_system(e)?;
    // Its descriptor must outlive the transfers using it (MPI asks the program to have
    // completed them; a program that did not still loses nothing).
    background::drain(e, id);
    let file = e.io.files.remove(id.0).ok_or_else(bad_file)?;
    release_stage(e, file.stage);
    if let Some(r) = file.split {
        let _ = e.p2p.pml.requests_mut().release(r);
    }
    if let Some(h) = file.info {
        let _ = e.objects.infos.free(h);
    }
    release_view(e, &file.view);
    if let Some(s) = file.shared_fd {
        let _ = fs.close(s);
    }
    fs.close(file.fd)
        .map_err(|err| err.to_error("closing the file"))?;
    Ok(file)
}

/// `MPI_File_close`: collective. Every member closes; then rank 0 deletes the shared-pointer
/// side file, and the file itself if it was opened with `MPI_MODE_DELETE_ON_CLOSE`.
pub fn close(cx: &mut Inside, id: FileId) -> Result<()> {
    let fc = cx.e().io.get(id)?.comm;
    // The file's collective accesses go on its communicator first (they started earlier).
    nbc::drain(cx, id);
    // Everyone's accesses end before anyone deletes.
    crate::coll::barrier(cx, fc)?;
    let rank = cx.e().comm(fc)?.rank;
    let e = cx.e();
    let fs = file_system(e)?;
    let file = close_local(e, id);
    let mut result = file.as_ref().map(|_| ()).map_err(|e| *e);
    if let Ok(file) = &file {
        if rank == 0 {
            shared::remove_side_file(fs, file.path());
            if file.amode & amode::DELETE_ON_CLOSE != 0 {
                result = fs
                    .delete(file.path())
                    .map_err(|err| err.to_error("deleting the file at close"));
            }
        }
    }
    let freed = crate::comm::create::free(cx, fc);
    result.and(freed)
}

/// Which way data moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// From the file into memory.
    Read,
    /// From memory into the file.
    Write,
}

/// Checks that the file's mode allows `dir`.
pub fn check_access(f: &File, dir: Dir) -> Result<()> {
    match dir {
        Dir::Read if f.amode & amode::WRONLY != 0 => Err(Error::new(
            ErrorClass::Access,
            Reason::BadArgument {
                what: "the file was opened MPI_MODE_WRONLY: it cannot be read",
            },
        )),
        Dir::Write if f.amode & amode::RDONLY != 0 => Err(Error::new(
            ErrorClass::ReadOnly,
            Reason::BadArgument {
                what: "the file was opened MPI_MODE_RDONLY: it cannot be written",
            },
        )),
        _ => Ok(()),
    }
}

/// A memory buffer: `count` instances of `dt` at `buf`.
#[derive(Clone, Copy, Debug)]
pub struct Memory {
    /// Start (`MPI_BOTTOM` is null).
    pub buf: *mut u8,
    /// Instances.
    pub count: u64,
    /// Their type (committed).
    pub dt: Datatype,
}

/// Moves `mem` to or from the view-stream bytes of file `id` starting at byte `start`;
/// returns how many bytes moved (a read stops at the end of the file). Small nearby ranges of a
/// read are sieved ([`Sieve`]).
///
/// # Safety
/// MPI's rule for the buffer: every byte `count` instances of the type touch is valid (for
/// writing, when reading from the file) during the call.
pub unsafe fn transfer(
    e: &mut Engine,
    id: FileId,
    dir: Dir,
    start: u64,
    mem: Memory,
) -> Result<u64> {
    let fs = file_system(e)?;
    let (fd, view, atomic, stage, sieve_cap) = {
        let f = e.io.get(id)?;
        check_access(f, dir)?;
        // Write sieving reads the window first: not for a file opened write-only.
        let cap = match f.amode & amode::WRONLY {
            0 => (f.stage.1 as u64).min(f.hints.ind_wr_buffer_size) as usize,
            _ => 0,
        };
        (f.fd, f.view, f.atomic, f.stage, cap)
    };
    let types = &e.p2p.types;
    let nodes = types.nodes(view.layout)?;
    // SAFETY: `stage` is the file's own buffer from the platform, used by nothing else while
    // the engine is held; an empty slice when there is none.
    let stage: &mut [u8] = match stage.1 {
        0 => &mut [],
        n => unsafe { core::slice::from_raw_parts_mut(stage.0 as *mut u8, n) },
    };
    let no_stage = || {
        Error::new(
            ErrorClass::NoMem,
            Reason::BadArgument {
                what: "a non-contiguous memory datatype needs the staging buffer, and io_buffer_bytes is 0 or the platform had no memory for it",
            },
        )
    };
    let io = |err: fs::IoError| err.to_error("file access");
    if atomic {
        // Atomic mode: accesses by different processes to overlapping bytes must not mix, so
        // each holds the whole file for its duration (shared for reads).
        fs.lock(fd, 0, 0, dir == Dir::Write).map_err(io)?;
    }
    let result = match dir {
        Dir::Write => {
            let mut p = if view.external32 {
                // SAFETY: the caller's contract.
                unsafe {
                    Packer::external(
                        mem.buf,
                        mem.count,
                        mem.dt,
                        types,
                        crate::datatype::repr::Repr::EXTERNAL32,
                    )?
                }
            } else {
                // SAFETY: the caller's contract.
                unsafe { Packer::new(mem.buf, mem.count, mem.dt, types)? }
            };
            let total = p.packed_len() as u64;
            let mut pos = 0usize;
            let mut sieve = Sieve::new();
            // Under a whole-file lock already (atomic mode), a range lock of its own would
            // release part of it at the end.
            let lock = !atomic;
            let r = view::runs(nodes, &view, start, total, &mut |off, n| {
                if sieve.take(off, n, sieve_cap) {
                    return Ok(());
                }
                sieve.flush_write(fs, fd, stage, &mut p, types, &mut pos, lock)?;
                if sieve.take(off, n, sieve_cap) {
                    return Ok(());
                }
                let mut done = 0u64;
                while done < n {
                    let want = (n - done) as usize;
                    if let Some(d) = p.data_ref(pos, want) {
                        // SAFETY: the packer's loan of user memory, valid for the call.
                        let src = unsafe { core::slice::from_raw_parts(d.as_ptr(), d.len()) };
                        fs.write_at(fd, src, off + done).map_err(io)?;
                        pos += want;
                        done += want as u64;
                        continue;
                    }
                    if stage.is_empty() {
                        return Err(no_stage());
                    }
                    let m = want.min(stage.len());
                    let got = p.pack(types, pos, &mut stage[..m]);
                    if got == 0 {
                        return Err(Error::new(
                            ErrorClass::Intern,
                            Reason::BadArgument {
                                what: "the memory datatype ended before the view range",
                            },
                        ));
                    }
                    fs.write_at(fd, &stage[..got], off + done).map_err(io)?;
                    pos += got;
                    done += got as u64;
                }
                Ok(())
            });
            r.and_then(|()| sieve.flush_write(fs, fd, stage, &mut p, types, &mut pos, lock))
                .and_then(|()| match p.overflowed() {
                    true => Err(Error::new(
                        ErrorClass::Conversion,
                        Reason::BadArgument {
                            what:
                                "a value does not fit its external32 representation (written cut)",
                        },
                    )),
                    false => Ok(total),
                })
        }
        Dir::Read => {
            // SAFETY: the caller's contract.
            let mut u = unsafe { Unpacker::new(mem.buf, mem.count, mem.dt, types)? };
            if view.external32 {
                u.set_source(types, &crate::datatype::repr::Repr::EXTERNAL32)?;
            }
            let total = u.capacity() as u64;
            let mut pos = 0usize;
            let mut eof = false;
            let mut sieve = Sieve::new();
            let r = view::runs(nodes, &view, start, total, &mut |off, n| {
                if eof {
                    return Ok(());
                }
                if sieve.take(off, n, stage.len()) {
                    return Ok(());
                }
                // Not for the window: read what it holds first, then this range.
                sieve.flush(fs, fd, stage, &mut u, types, &mut pos, &mut eof)?;
                if sieve.take(off, n, stage.len()) || eof {
                    return Ok(());
                }
                let mut done = 0u64;
                while done < n && !eof {
                    let want = (n - done) as usize;
                    if let Some(d) = u.dest_ref(pos, want) {
                        // SAFETY: the unpacker's loan of user memory, valid for the call.
                        let dst = unsafe { core::slice::from_raw_parts_mut(d, want) };
                        let got = fs.read_at(fd, dst, off + done).map_err(io)?;
                        u.placed(got);
                        pos += got;
                        done += got as u64;
                        eof = got < want;
                        continue;
                    }
                    if stage.is_empty() {
                        return Err(no_stage());
                    }
                    let m = want.min(stage.len());
                    let got = fs.read_at(fd, &mut stage[..m], off + done).map_err(io)?;
                    u.unpack(types, pos, &stage[..got]);
                    pos += got;
                    done += got as u64;
                    eof = got < m;
                }
                Ok(())
            });
            r.and_then(|()| sieve.flush(fs, fd, stage, &mut u, types, &mut pos, &mut eof))
                .map(|()| pos as u64)
        }
    };
    if atomic {
        let _ = fs.unlock(fd, 0, 0);
    }
    result
}

/// Data sieving (ROMIO's idea): small file ranges that lie close together are read as one
/// span into the staging buffer and taken out of it, one system call instead of one per
/// range; writes read the span, change the ranges and write it back, under a lock of the span
/// (window: `ind_wr_buffer_size`, at most the staging buffer).
struct Sieve {
    /// The ranges in the window (file offset, length), in file order.
    runs: [(u64, u64); SIEVE_RUNS],
    len: usize,
}

/// Ranges a sieving window holds at most.
const SIEVE_RUNS: usize = 256;
/// Ranges up to this long are sieved; longer ones are read directly.
const SIEVE_RUN_MAX: u64 = 16 << 10;

impl Sieve {
    fn new() -> Sieve {
        Sieve {
            runs: [(0, 0); SIEVE_RUNS],
            len: 0,
        }
    }

    /// Adds range (`off`, `n`) to the window if it is small and the window's span stays within
    /// `cap` bytes; whether it did.
    fn take(&mut self, off: u64, n: u64, cap: usize) -> bool {
        if n > SIEVE_RUN_MAX || cap == 0 || self.len == SIEVE_RUNS {
            return false;
        }
        if self.len > 0 {
            let first = self.runs[0].0;
            let (lo, ln) = self.runs[self.len - 1];
            if off < lo + ln || off + n - first > cap as u64 {
                return false;
            }
        } else if n > cap as u64 {
            return false;
        }
        self.runs[self.len] = (off, n);
        self.len += 1;
        true
    }

    /// Writes the window: one range straight; several as one span — read, the ranges packed
    /// into it, written back — under an exclusive lock of the span (when `lock`), so
    /// processes sieving interleaved ranges at once do not write back each other's old bytes.
    #[allow(clippy::too_many_arguments)]
    fn flush_write(
        &mut self,
        fs: &dyn FileSystem,
        fd: Fd,
        stage: &mut [u8],
        p: &mut Packer,
        types: &crate::datatype::table::TypeTable,
        pos: &mut usize,
        lock: bool,
    ) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let io = |e: fs::IoError| e.to_error("file access");
        let first = self.runs[0].0;
        let (lo, ln) = self.runs[self.len - 1];
        let span = (lo + ln - first) as usize;
        let n = self.len;
        self.len = 0;
        let several = n > 1;
        if several && lock {
            fs.lock(fd, first, span as u64, true).map_err(io)?;
        }
        let r = (|| {
            let win = &mut stage[..span];
            if several {
                let got = fs.read_at(fd, win, first).map_err(io)?;
                win[got..].fill(0);
            }
            for &(off, len) in &self.runs[..n] {
                let rel = (off - first) as usize;
                let mut done = 0usize;
                while done < len as usize {
                    let got = p.pack(types, *pos, &mut win[rel + done..rel + len as usize]);
                    if got == 0 {
                        return Err(Error::new(
                            ErrorClass::Intern,
                            Reason::BadArgument {
                                what: "the memory datatype ended before the view range",
                            },
                        ));
                    }
                    done += got;
                    *pos += got;
                }
            }
            fs.write_at(fd, win, first).map_err(io)
        })();
        if several && lock {
            let _ = fs.unlock(fd, first, span as u64);
        }
        r
    }

    /// Reads the window's span and hands each range to the unpacker.
    #[allow(clippy::too_many_arguments)]
    fn flush(
        &mut self,
        fs: &dyn FileSystem,
        fd: Fd,
        stage: &mut [u8],
        u: &mut Unpacker,
        types: &crate::datatype::table::TypeTable,
        pos: &mut usize,
        eof: &mut bool,
    ) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let first = self.runs[0].0;
        let (lo, ln) = self.runs[self.len - 1];
        let span = (lo + ln - first) as usize;
        let n = self.len;
        self.len = 0;
        let got = fs
            .read_at(fd, &mut stage[..span], first)
            .map_err(|e| e.to_error("file access"))?;
        for &(off, len) in &self.runs[..n] {
            let rel = (off - first) as usize;
            let avail = (len as usize).min(got.saturating_sub(rel));
            u.unpack(types, *pos, &stage[rel..rel + avail]);
            *pos += avail;
            if avail < len as usize {
                *eof = true;
                break;
            }
        }
        Ok(())
    }
}

/// Bytes of `count` instances of `dt`, checked to be whole etypes of the file's view.
pub fn access_bytes(e: &mut Engine, id: FileId, count: u64, dt: Datatype) -> Result<u64> {
    let view = e.io.get(id)?.view;
    let (bytes, _) = file_and_native_bytes(e, &view, count, dt)?;
    if bytes % view.etype_size != 0 {
        return Err(Error::new(
            ErrorClass::Type,
            Reason::BadArgument {
                what: "the access is not a whole number of the view's etypes",
            },
        ));
    }
    Ok(bytes)
}

/// `MPI_File_set_view` (collective in MPI; each member's view is its own). `sizes`: a user
/// representation's file sizes when they differ from the native ones.
#[allow(clippy::too_many_arguments)]
pub fn set_view(
    cx: &mut Inside,
    id: FileId,
    disp: u64,
    etype: Datatype,
    filetype: Datatype,
    external32: bool,
    datarep: Option<u8>,
    sizes: Option<layout::Sizes>,
) -> Result<()> {
    let e = cx.e();
    let types = &mut e.p2p.types;
    let ei = *types.check_committed(etype)?;
    let fi = *types.check_committed(filetype)?;
    let mut sizes = sizes;
    if external32 {
        // external32 of types whose size changes (long on LP64): the file holds them in
        // their external32 sizes, so the view is laid out in those.
        let rep = &crate::datatype::repr::Repr::EXTERNAL32;
        if types.stream_size(etype, rep)? != ei.size || types.stream_size(filetype, rep)? != fi.size
        {
            sizes = Some(layout::Sizes::External32);
        }
    }
    if ei.size == 0 {
        return Err(Error::new(
            ErrorClass::Type,
            Reason::BadArgument {
                what: "the etype has no data",
            },
        ));
    }
    if fi.extent < 0 {
        return Err(Error::new(
            ErrorClass::Type,
            Reason::BadArgument {
                what: "the filetype has a negative extent",
            },
        ));
    }
    if ei.lb < 0 || fi.lb < 0 || fi.true_lb < 0 {
        return Err(Error::new(
            ErrorClass::Type,
            Reason::BadArgument {
                what: "etype and filetype displacements must not be negative",
            },
        ));
    }
    // The view's shape in the file: the filetype's, or its layout in the file's sizes.
    let (lay, esize, li) = match sizes {
        Some(s) => {
            let esize = layout::file_size(e, etype, &s)?;
            let l = layout::build(e, filetype, &s)?;
            let li = *e.p2p.types.info(l)?;
            (l, esize, li)
        }
        None => (filetype, ei.size, fi),
    };
    let mut bad = |what| {
        if lay != filetype {
            e.p2p.types.release(lay);
        }
        Err(Error::new(ErrorClass::Type, Reason::BadArgument { what }))
    };
    if esize == 0 || li.size % esize != 0 || fi.size % ei.size != 0 {
        return bad("the filetype is not made of whole etypes");
    }
    if li.extent < 0 || li.lb < 0 || li.true_lb < 0 {
        return bad(
            "the filetype's layout in the file's sizes has a negative extent or displacement",
        );
    }
    let types = &mut e.p2p.types;
    types.retain(etype);
    types.retain(filetype);
    let f = e.io.get_mut(id)?;
    let old = f.view;
    f.view = View {
        disp,
        etype,
        filetype,
        layout: lay,
        sizes,
        etype_size: esize,
        size: li.size,
        extent: li.extent as i64,
        dense_at: li.dense_at.map(|a| a as i64),
        external32,
        datarep,
    };
    f.pos = 0;
    let fc = f.comm;
    release_view(e, &old);
    let rank = e.comm(fc)?.rank;
    if rank == 0 {
        shared::set(e, id, 0)?;
    }
    // The shared pointer is reset before anyone uses it under the new view.
    crate::coll::barrier(cx, fc)
}

/// Lets go of the types a view holds.
fn release_view(e: &mut Engine, v: &View) {
    let types = &mut e.p2p.types;
    types.release(v.etype);
    types.release(v.filetype);
    if v.layout != v.filetype {
        types.release(v.layout);
    }
}

/// Two-phase collective buffering moves external32 data only of memory types whose size
/// external32 keeps (the C API sends the others through the independent path, [`transfer`]).
fn same_size_in_external32(types: &crate::datatype::table::TypeTable, t: Datatype) -> Result<()> {
    let native = types.check_committed(t)?.size;
    if types.stream_size(t, &crate::datatype::repr::Repr::EXTERNAL32)? != native {
        return Err(Error::new(
            ErrorClass::Intern,
            Reason::BadArgument {
                what: "two-phase I/O of a memory type whose external32 size differs",
            },
        ));
    }
    Ok(())
}

/// `MPI_File_get_type_extent`: the extent of `dt` in the file of view `view` (the extent of
/// its layout in the file's sizes for a type whose size the representation changes).
pub fn file_extent(e: &mut Engine, view: &View, dt: Datatype) -> Result<i64> {
    let info = *e.p2p.types.info(dt)?;
    let sizes = match (view.sizes, view.external32) {
        (Some(s), _) => Some(s),
        (None, true) => Some(layout::Sizes::External32),
        (None, false) => None,
    };
    let Some(sizes) = sizes else {
        return Ok(info.extent as i64);
    };
    if sizes == layout::Sizes::External32
        && e.p2p
            .types
            .stream_size(dt, &crate::datatype::repr::Repr::EXTERNAL32)?
            == info.size
    {
        return Ok(info.extent as i64);
    }
    let l = layout::build(e, dt, &sizes)?;
    let ext = e.p2p.types.info(l).map(|i| i.extent as i64);
    e.p2p.types.release(l);
    ext
}

/// The bytes `count` instances of `dt` take in the file of view `view` (their external32
/// stream in an external32 view, their size in a user representation's file sizes) and
/// natively: (file, native).
pub fn file_and_native_bytes(
    e: &mut Engine,
    view: &View,
    count: u64,
    dt: Datatype,
) -> Result<(u64, u64)> {
    let types = &e.p2p.types;
    let native = types.check_committed(dt)?.size;
    let file = match (view.sizes, view.external32) {
        (_, true) => types.stream_size(dt, &crate::datatype::repr::Repr::EXTERNAL32)?,
        (Some(s), false) => layout::file_size(e, dt, &s)?,
        (None, false) => native,
    };
    let too_large = || Error::new(ErrorClass::Count, Reason::CountTooLarge);
    Ok((
        file.checked_mul(count).ok_or_else(too_large)?,
        native.checked_mul(count).ok_or_else(too_large)?,
    ))
}

/// `MPI_File_set_size` (`grow_only`: `MPI_File_preallocate`): collective; rank 0 changes the
/// file, every member learns the outcome.
pub fn resize(cx: &mut Inside, id: FileId, size: u64, grow_only: bool) -> Result<()> {
    let e = cx.e();
    let fs = file_system(e)?;
    let f = e.io.get(id)?;
    if f.amode & amode::RDONLY != 0 {
        return Err(Error::new(
            ErrorClass::ReadOnly,
            Reason::BadArgument {
                what: "the file was opened MPI_MODE_RDONLY: its size cannot change",
            },
        ));
    }
    let (fd, fc) = (f.fd, f.comm);
    let mut err = None;
    if e.comm(fc)?.rank == 0 {
        let r = match grow_only {
            true => fs.preallocate(fd, size),
            false => fs.truncate(fd, size),
        };
        err = r.err();
    }
    let code = agree(cx, fc, err.map_or(0, |e| e.class_code()))?;
    match (err, code) {
        (_, 0) => Ok(()),
        (Some(e), _) => Err(e.to_error("changing the file's size")),
        (None, c) => Err(remote_error(c, "rank 0 could not change the file's size")),
    }
}

/// The position (in etypes) `MPI_File_seek` or `MPI_File_seek_shared` moves to.
pub fn seek_target(
    e: &mut Engine,
    id: FileId,
    offset: i64,
    whence: i32,
    shared_ptr: bool,
) -> Result<u64> {
    let f = e.io.get(id)?;
    let v = f.view;
    let base = match whence {
        600 => 0i64,
        602 if shared_ptr => shared::get(e, id)? as i64,
        602 => f.pos as i64,
        604 => {
            let fs = file_system(e)?;
            let size = fs.size(f.fd).map_err(|e| e.to_error("the file's size"))?;
            let nodes = e.p2p.types.nodes(v.layout)?;
            (view::stream_before(nodes, &v, size)? / v.etype_size) as i64
        }
        _ => {
            return Err(Error::bad_arg(
                "whence is not MPI_SEEK_SET, MPI_SEEK_CUR or MPI_SEEK_END",
            ))
        }
    };
    let at = base
        .checked_add(offset)
        .filter(|a| *a >= 0)
        .ok_or(Error::bad_arg(
            "the seek would move before the start of the view",
        ))?;
    Ok(at as u64)
}

/// `MPI_File_seek_shared`: collective; rank 0 moves the pointer, all wait for it.
pub fn seek_shared(cx: &mut Inside, id: FileId, at: u64) -> Result<()> {
    let fc = cx.e().io.get(id)?.comm;
    // No member may still be reading the old value when rank 0 changes it.
    crate::coll::barrier(cx, fc)?;
    let mut err = 0;
    if cx.e().comm(fc)?.rank == 0 {
        if let Err(e) = shared::set(cx.e(), id, at) {
            err = e.class.code();
        }
    }
    match agree(cx, fc, err)? {
        0 => Ok(()),
        c => Err(remote_error(
            c,
            "rank 0 could not move the shared file pointer",
        )),
    }
}

/// Where this member's part of an ordered access starts (in etypes), given it accesses `n`
/// etypes: the shared pointer plus the members of lower rank's counts; the shared pointer moves
/// past them all (collective).
pub fn ordered_start(cx: &mut Inside, id: FileId, n: u64) -> Result<u64> {
    let fc = cx.e().io.get(id)?.comm;
    let rank = cx.e().comm(fc)?.rank;
    let mine = n.to_ne_bytes();
    let mut before = [0u8; 8];
    let call = crate::coll::Call::Exscan {
        send: Some(mine.as_ptr()),
        recv: before.as_mut_ptr(),
        count: 1,
        dt: Datatype::UINT64_T,
        op: crate::op::Op::Sum,
    };
    // SAFETY: both buffers hold one u64 and live through the call.
    unsafe { crate::coll::blocking(cx, fc, call, None)? };
    let before = if rank == 0 {
        0
    } else {
        u64::from_ne_bytes(before)
    };
    let mut total = [0u8; 8];
    crate::coll::allreduce(
        cx,
        Some(&mine),
        &mut total,
        1,
        Datatype::UINT64_T,
        crate::op::Op::Sum,
        fc,
    )?;
    let total = u64::from_ne_bytes(total);
    // Rank 0 takes the whole stretch at once; the others learn where it starts.
    let mut base = [0u8; 9];
    if rank == 0 {
        match shared::fetch_add(cx.e(), id, total) {
            Ok(b) => base[..8].copy_from_slice(&b.to_le_bytes()),
            Err(_) => base[8] = 1,
        }
    }
    // SAFETY: `base` holds 9 bytes and lives through the call.
    unsafe { crate::coll::bcast(cx, base.as_mut_ptr(), 9, Datatype::BYTE, 0, fc)? };
    if base[8] != 0 {
        return Err(Error::new(
            ErrorClass::Io,
            Reason::BadArgument {
                what: "rank 0 could not move the shared file pointer",
            },
        ));
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&base[..8]);
    // Bytes from rank 0, whatever its byte order: little-endian.
    Ok(u64::from_le_bytes(b) + before)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sieve_takes_small_ranges_in_order_within_its_span() {
        let mut s = Sieve::new();
        assert!(s.take(100, 8, 1000));
        assert!(s.take(200, 8, 1000));
        assert!(!s.take(150, 8, 1000), "a range behind the last one");
        assert!(!s.take(1095, 8, 1000), "the span would pass the buffer");
        assert!(s.take(1092, 8, 1000));
        assert!(
            !s.take(2000, SIEVE_RUN_MAX + 1, 1 << 30),
            "large ranges are read directly"
        );
        assert!(!Sieve::new().take(0, 8, 0), "no buffer, no sieving");
        let mut full = Sieve::new();
        assert!((0..SIEVE_RUNS as u64).all(|i| full.take(i * 16, 8, 1 << 20)));
        assert!(!full.take(SIEVE_RUNS as u64 * 16, 8, 1 << 20));
    }

    #[test]
    fn access_modes_are_checked_as_the_standard_says() {
        use amode::*;
        assert!(check_amode(RDWR | CREATE).is_ok());
        assert!(check_amode(WRONLY | CREATE | EXCL | DELETE_ON_CLOSE).is_ok());
        assert!(check_amode(RDONLY | SEQUENTIAL | UNIQUE_OPEN).is_ok());
        for bad in [
            0,
            RDONLY | RDWR,
            RDONLY | CREATE,
            RDONLY | EXCL,
            RDWR | SEQUENTIAL,
            1024 | RDWR,
        ] {
            assert_eq!(
                check_amode(bad).unwrap_err().class,
                ErrorClass::Amode,
                "{bad}"
            );
        }
    }
}
