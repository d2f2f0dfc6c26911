//! Non-blocking independent accesses that go on while the process computes.
//!
//! `MPI_File_iwrite_at` and the other independent non-blocking forms hand their file ranges to
//! the platform's background transfers ([`FileSystem::submit`]: a worker thread on Linux) and
//! return a request; progress polls the transfers and completes the requests. The data moves
//! without the engine: a contiguous memory buffer is read or written where it is, a
//! non-contiguous one is packed into a staging buffer at the start (writes only; such reads
//! complete at their start). Whatever needs the engine while the bytes move — atomic mode's
//! locks, converting data representations, collective forms — completes at its start, as does
//! an access on a platform without background transfers (the node build).

use super::fs::{FileSystem, Run, Ticket};
use super::{file_system, view, Dir, FileId, Memory};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::pml::request::{ReqId, Status, ANY_SOURCE, ANY_TAG};

/// The status of a file access (MPI leaves source and tag undefined; these are what
/// `MPI_STATUS_IGNORE`-like empty statuses say).
const EMPTY: Status = Status {
    source: ANY_SOURCE,
    tag: ANY_TAG,
    bytes: 0,
    message_bytes: 0,
    error: None,
    cancelled: false,
};

/// Transfers in flight at once; an access beyond them completes at its start.
pub const MAX_PENDING: usize = 64;

/// A transfer in flight.
struct Pending {
    req: ReqId,
    file: FileId,
    ticket: Ticket,
    /// The staging buffer of a packed write (its address), given back when the transfer is over.
    stage: Option<usize>,
}

/// The transfers of a process in flight.
pub struct Background {
    pending: heapless::Vec<Pending, MAX_PENDING>,
}

impl Background {
    /// None in flight.
    pub const fn new() -> Background {
        Background {
            pending: heapless::Vec::new(),
        }
    }

    /// Whether transfers of `file` are in flight.
    pub fn busy(&self, file: FileId) -> bool {
        self.pending.iter().any(|p| p.file == file)
    }
}

impl Default for Background {
    fn default() -> Background {
        Background::new()
    }
}

/// The memory side of a transfer: where its bytes are, and the staging buffer holding them if
/// they were packed.
struct Side {
    buf: *mut u8,
    stage: Option<*mut u8>,
}

/// Starts an independent access of `mem` at view-stream byte `start` of file `id` in the
/// background and returns its request with the bytes it will move; `None` when it cannot go in
/// the background (see the module's documentation), and the caller then does it at once.
///
/// # Safety
/// MPI's rule for non-blocking accesses: every byte of `mem` stays valid (and, for a read,
/// unused) until the request completes.
pub unsafe fn start(
    e: &mut Engine,
    id: FileId,
    dir: Dir,
    start: u64,
    mem: Memory,
) -> Result<Option<(ReqId, u64)>> {
    let fs = file_system(e)?;
    let f = e.io.get(id)?;
    if f.atomic
        || f.view.external32
        || f.view.datarep.is_some()
        || e.io.background.pending.is_full()
    {
        return Ok(None);
    }
    let (fd, view) = (f.fd, f.view);
    let types = &e.p2p.types;
    let (total, side) = match dir {
        Dir::Write => {
            // SAFETY: the caller's contract.
            let mut p = unsafe { Packer::new(mem.buf, mem.count, mem.dt, types)? };
            let total = p.packed_len();
            if total == 0 {
                return Ok(None);
            }
            let side = match p.data_ref(0, total) {
                Some(d) => Side {
                    buf: d.as_ptr().cast_mut(),
                    stage: None,
                },
                None => {
                    let Some(stage) = e.platform.alloc_mem(total) else {
                        return Ok(None);
                    };
                    // SAFETY: `stage` is `total` bytes from the platform, this access's alone.
                    let out = unsafe { core::slice::from_raw_parts_mut(stage, total) };
                    if p.pack(types, 0, out) != total {
                        // SAFETY: from alloc_mem above, given back once.
                        unsafe { e.platform.free_mem(stage) };
                        return Ok(None);
                    }
                    Side {
                        buf: stage,
                        stage: Some(stage),
                    }
                }
            };
            (total, side)
        }
        Dir::Read => {
            // SAFETY: the caller's contract.
            let u = unsafe { Unpacker::new(mem.buf, mem.count, mem.dt, types)? };
            let total = u.capacity();
            match u.dest_ref(0, total) {
                Some(buf) if total > 0 => (total, Side { buf, stage: None }),
                _ => return Ok(None),
            }
        }
    };
    // SAFETY: the caller's contract for `side.buf`, or the staging buffer kept until the end.
    let ticket = match unsafe { submit(e, fs, dir, fd, view, start, total as u64, &side) } {
        Ok(Some(t)) => t,
        other => {
            if let Some(stage) = side.stage {
                // SAFETY: from alloc_mem above, never handed to the platform's transfer.
                unsafe { e.platform.free_mem(stage) };
            }
            return other.map(|_| None);
        }
    };
    let req = e.p2p.pml.requests_mut().pending(0);
    let req = match req {
        Ok(r) => r,
        Err(err) => {
            // The transfer is running: it must be over before its memory may go.
            let _ = wait_for(e, fs, ticket);
            if let Some(stage) = side.stage {
                // SAFETY: from alloc_mem above; the transfer using it is over.
                unsafe { e.platform.free_mem(stage) };
            }
            return Err(err);
        }
    };
    // Room was checked above, and nothing since added any.
    let _ = e.io.background.pending.push(Pending {
        req,
        file: id,
        ticket,
        stage: side.stage.map(|s| s as usize),
    });
    Ok(Some((req, total as u64)))
}

/// Hands the file ranges of stream bytes `start..start + total` to the platform.
///
/// # Safety
/// As [`start`]'s, for `side.buf`.
#[allow(clippy::too_many_arguments)]
unsafe fn submit(
    e: &Engine,
    fs: &'static dyn FileSystem,
    dir: Dir,
    fd: super::fs::Fd,
    view: view::View,
    start: u64,
    total: u64,
    side: &Side,
) -> Result<Option<Ticket>> {
    let nodes = e.p2p.types.nodes(view.layout)?;
    let mut count = 0usize;
    view::runs(nodes, &view, start, total, &mut |_, _| {
        count += 1;
        Ok(())
    })?;
    let bytes = count * core::mem::size_of::<Run>();
    let Some(mem) = e.platform.alloc_mem(bytes) else {
        return Ok(None);
    };
    let runs = mem.cast::<Run>();
    let mut i = 0usize;
    let filled = view::runs(nodes, &view, start, total, &mut |off, len| {
        if i < count {
            // SAFETY: `i < count` slots of `bytes` from alloc_mem (malloc's alignment suits
            // two u64s).
            unsafe { runs.add(i).write(Run { off, len }) };
            i += 1;
        }
        Ok(())
    });
    let r = filled.and_then(|()| {
        // SAFETY: `i` runs were written above; the caller's contract for the buffer.
        let list = unsafe { core::slice::from_raw_parts(runs, i) };
        // SAFETY: the caller's contract.
        match unsafe { fs.submit(fd, dir == Dir::Write, side.buf, list) } {
            None => Ok(None),
            Some(Ok(t)) => Ok(Some(t)),
            Some(Err(err)) => Err(err.to_error("starting a non-blocking file access")),
        }
    });
    // SAFETY: from alloc_mem above; the platform copied the runs it keeps.
    unsafe { e.platform.free_mem(mem) };
    r
}

/// Waits, outside any request, for transfer `t` to be over.
fn wait_for(e: &Engine, fs: &'static dyn FileSystem, t: Ticket) -> Option<Error> {
    loop {
        if let Some(r) = fs.poll(t) {
            return r
                .err()
                .map(|err| err.to_error("a non-blocking file access"));
        }
        e.platform.relax(1);
    }
}

/// Completes the requests of transfers that are over, and moves the queued non-blocking
/// collective accesses on; how many. With none (most calls of most programs), one inline test.
#[inline(always)]
pub fn progress(e: &mut Engine) -> usize {
    if e.io.nbc.idle() && e.io.background.pending.is_empty() {
        return 0;
    }
    progress_busy(e)
}

#[inline(never)]
fn progress_busy(e: &mut Engine) -> usize {
    let nbc = super::nbc::progress(e);
    if e.io.background.pending.is_empty() {
        return nbc;
    }
    let Ok(fs) = file_system(e) else {
        return 0;
    };
    let mut done = 0;
    let mut i = 0;
    while i < e.io.background.pending.len() {
        let p = &e.io.background.pending[i];
        let Some(r) = fs.poll(p.ticket) else {
            i += 1;
            continue;
        };
        let p = e.io.background.pending.swap_remove(i);
        finished(
            e,
            p,
            r.map_err(|err| err.to_error("a non-blocking file access")),
        );
        done += 1;
    }
    done + nbc
}

/// Waits for every transfer of file `id` to be over (before its descriptor closes), completing
/// their requests.
pub fn drain(e: &mut Engine, id: FileId) {
    while e.io.background.busy(id) {
        if progress(e) == 0 {
            e.platform.relax(1);
        }
    }
}

fn finished(e: &mut Engine, p: Pending, r: Result<u64>) {
    if let Some(stage) = p.stage {
        // SAFETY: from alloc_mem at the start; the transfer that used it is over.
        unsafe { e.platform.free_mem(stage as *mut u8) };
    }
    complete(e, p.req, r);
}

/// Completes the request of a file access with its outcome: the bytes it moved, or its error.
pub(crate) fn complete(e: &mut Engine, req: ReqId, r: Result<u64>) {
    let status = match r {
        Ok(bytes) => Status {
            bytes,
            message_bytes: bytes,
            ..EMPTY
        },
        Err(err) => Status {
            error: Some(err),
            ..EMPTY
        },
    };
    e.p2p.pml.requests_mut().finish(req, status);
}
