//! Two-phase collective buffering (ROMIO's algorithm) for the collective data-access forms.
//!
//! When the members' accesses interleave in the file (or the `romio_cb_read`/`romio_cb_write`
//! hint says so), a few members — the *aggregators*, one per node by default (`cb_nodes`) —
//! do all the file accesses of the call. The aggregate access range (the smallest first byte
//! to the largest last byte of all members) is split into one *file domain* per aggregator,
//! aligned to `striping_unit`, and each domain is handled in rounds of at most
//! `cb_buffer_size` bytes. In a round every member sends each aggregator the pieces of its
//! data in that aggregator's current window (a list of file ranges, then their bytes; one
//! alltoallv), and the aggregator writes the window as one contiguous span — reading it first,
//! under an exclusive byte-range lock, only when the pieces leave gaps. Reads run the other
//! way: the members send their lists, the aggregator reads the window's span at once and sends
//! each member its bytes back.
//!
//! A member's pieces in a window are a contiguous stretch of its view stream (MPI requires a
//! filetype's displacements to be monotonically non-decreasing, so stream order is file
//! order), found with [`view::stream_before`] at the window's two ends: no per-member state
//! carries from round to round.
//!
//! Every member runs the same rounds, whatever its own share: the decisions (whether to use
//! two-phase at all, the aggregators, the domains, the number of rounds) are computed alike
//! from the gathered ranges and the hints, which rank 0 broadcast at open.

use super::{file_system, view, Dir, FileId, Memory};
use crate::coll::ints::Ints;
use crate::coll::{Buf, Call, VBuf};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::repr::Repr;
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Reason, Result};
use crate::info::{InfoId, InfoTable};
use crate::shared::Inside;

/// Whether collective buffering is used (`romio_cb_read`, `romio_cb_write`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CbMode {
    /// Always.
    Enable,
    /// Never: each member accesses its own data.
    Disable,
    /// When the members' access ranges interleave (ROMIO's rule).
    Automatic,
}

impl CbMode {
    /// The mode a hint's value names.
    pub fn parse(v: &[u8]) -> Option<CbMode> {
        match v {
            b"enable" => Some(CbMode::Enable),
            b"disable" => Some(CbMode::Disable),
            b"automatic" => Some(CbMode::Automatic),
            _ => None,
        }
    }

    fn name(self) -> &'static [u8] {
        match self {
            CbMode::Enable => b"enable",
            CbMode::Disable => b"disable",
            CbMode::Automatic => b"automatic",
        }
    }

    fn code(self) -> u64 {
        self as u64
    }

    fn from_code(c: u64) -> CbMode {
        match c {
            0 => CbMode::Enable,
            1 => CbMode::Disable,
            _ => CbMode::Automatic,
        }
    }
}

/// The I/O hints in force on a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hints {
    /// `romio_cb_read`.
    pub cb_read: CbMode,
    /// `romio_cb_write`.
    pub cb_write: CbMode,
    /// `cb_nodes`: aggregators (0: `cb_per_node` on each node).
    pub cb_nodes: u64,
    /// `stormpi_cb_per_node` (stormpi's own hint): aggregators per node when `cb_nodes` is 0 —
    /// an aggregator's share of the pieces is processor work, so one per node leaves the
    /// node's other cores idle while it sorts a whole round's pieces.
    pub cb_per_node: u64,
    /// `cb_buffer_size`: bytes an aggregator handles per round.
    pub cb_buffer_size: u64,
    /// `striping_unit`: file domains start at multiples of it.
    pub striping_unit: u64,
    /// `striping_factor`: kept and reported (the POSIX file system does not stripe).
    pub striping_factor: u64,
    /// `ind_wr_buffer_size`: the window of sieved independent writes.
    pub ind_wr_buffer_size: u64,
    /// `stormpi_cb_small_pieces` (stormpi's own hint): `automatic` chooses collective
    /// buffering only when the members' contiguous file pieces average fewer bytes than this —
    /// large pieces go to the file system as well straight from each member.
    pub cb_small_pieces: u64,
}

const WORDS: usize = 9;

impl Hints {
    /// The hints of `info` over `self` (values that do not parse are ignored, as MPI lets an
    /// implementation ignore hints).
    pub fn with_info(mut self, infos: &InfoTable, info: InfoId) -> Hints {
        let get = |k: &[u8]| infos.get(info, k).ok().flatten();
        let num = |k: &[u8], min: u64| {
            get(k)
                .and_then(|v| core::str::from_utf8(v).ok())
                .and_then(|s| s.trim().parse::<u64>().ok())
                .filter(|n| *n >= min)
        };
        if let Some(m) = get(b"romio_cb_read").and_then(CbMode::parse) {
            self.cb_read = m;
        }
        if let Some(m) = get(b"romio_cb_write").and_then(CbMode::parse) {
            self.cb_write = m;
        }
        if let Some(n) = num(b"cb_nodes", 1) {
            self.cb_nodes = n;
        }
        if let Some(n) = num(b"cb_buffer_size", 1) {
            self.cb_buffer_size = n;
        }
        if let Some(n) = num(b"striping_unit", 1) {
            self.striping_unit = n;
        }
        if let Some(n) = num(b"striping_factor", 1) {
            self.striping_factor = n;
        }
        if let Some(n) = num(b"ind_wr_buffer_size", 1) {
            self.ind_wr_buffer_size = n;
        }
        if let Some(n) = num(b"stormpi_cb_small_pieces", 1) {
            self.cb_small_pieces = n;
        }
        if let Some(n) = num(b"stormpi_cb_per_node", 1) {
            self.cb_per_node = n;
        }
        self
    }

    /// Writes the values in force into `info` (what `MPI_File_get_info` returns); `aggregators`
    /// is the number of aggregators `cb_nodes` comes to on this communicator.
    pub fn put(&self, infos: &mut InfoTable, info: InfoId, aggregators: u64) -> Result<()> {
        let mut num = |k: &[u8], v: u64| {
            let mut s: heapless::String<24> = heapless::String::new();
            let _ = core::fmt::Write::write_fmt(&mut s, format_args!("{v}"));
            infos.set(info, k, s.as_bytes())
        };
        num(b"cb_nodes", aggregators)?;
        num(b"cb_buffer_size", self.cb_buffer_size)?;
        num(b"striping_unit", self.striping_unit)?;
        num(b"striping_factor", self.striping_factor)?;
        num(b"ind_wr_buffer_size", self.ind_wr_buffer_size)?;
        num(b"stormpi_cb_small_pieces", self.cb_small_pieces)?;
        num(b"stormpi_cb_per_node", self.cb_per_node)?;
        infos.set(info, b"romio_cb_read", self.cb_read.name())?;
        infos.set(info, b"romio_cb_write", self.cb_write.name())
    }

    fn words(&self) -> [u64; WORDS] {
        [
            self.cb_read.code(),
            self.cb_write.code(),
            self.cb_nodes,
            self.cb_buffer_size,
            self.striping_unit,
            self.striping_factor,
            self.ind_wr_buffer_size,
            self.cb_small_pieces,
            self.cb_per_node,
        ]
    }

    fn from_words(w: [u64; WORDS]) -> Hints {
        Hints {
            cb_read: CbMode::from_code(w[0]),
            cb_write: CbMode::from_code(w[1]),
            cb_nodes: w[2],
            cb_buffer_size: w[3].max(1),
            striping_unit: w[4].max(1),
            striping_factor: w[5],
            ind_wr_buffer_size: w[6].max(1),
            cb_small_pieces: w[7].max(1),
            cb_per_node: w[8].max(1),
        }
    }

    /// Rank 0's hints, at every member of `comm` (the collective decisions must agree).
    pub fn agree(self, cx: &mut Inside, comm: crate::comm::CommId) -> Result<Hints> {
        let mut w = self.words();
        // SAFETY: `w` holds WORDS u64s and lives through the call.
        unsafe {
            crate::coll::bcast(
                cx,
                w.as_mut_ptr().cast(),
                WORDS as u64,
                Datatype::UINT64_T,
                0,
                comm,
            )?
        };
        Ok(Hints::from_words(w))
    }
}

/// How many aggregators a communicator of `size` members whose nodes `node_of` gives has:
/// `want`, or with `want` 0 the first `per_node` members of each node (all of a smaller one).
fn aggregator_total(size: u32, want: u64, per_node: u64, node_of: &dyn Fn(u32) -> u32) -> u64 {
    // A member's place among the members of its node.
    let place = |r: u32| (0..r).filter(|q| node_of(*q) == node_of(r)).count() as u64;
    match want {
        0 => (0..size).filter(|r| place(*r) < per_node.max(1)).count() as u64,
        w => w.min(size as u64),
    }
}

/// The aggregators of a communicator of `size` members whose nodes `node_of` gives: the first
/// member of each node, then the second of each, ... until [`aggregator_total`] of them.
fn aggregators(
    size: u32,
    want: u64,
    per_node: u64,
    node_of: &dyn Fn(u32) -> u32,
    out: &mut [u64],
) -> usize {
    let place = |r: u32| (0..r).filter(|q| node_of(*q) == node_of(r)).count() as u64;
    let want = aggregator_total(size, want, per_node, node_of) as usize;
    let mut n = 0;
    let mut pass = 0u64;
    while n < want {
        for r in 0..size {
            if n < want && place(r) == pass {
                out[n] = r as u64;
                n += 1;
            }
        }
        pass += 1;
    }
    n
}

/// How many aggregators hints `h` give on file `id`'s communicator (what `cb_nodes` reports).
pub fn aggregator_count(cx: &mut Inside, comm: crate::comm::CommId, h: &Hints) -> Result<u64> {
    let e = cx.e();
    let c = e.check_comm(comm)?;
    let (g, size) = (c.group, c.size());
    let node_of = |r: u32| {
        let p = e.p2p.comms.groups.proc_of(g, r);
        e.p2p.procs[p.0 as usize].node
    };
    Ok(aggregator_total(size, h.cb_nodes, h.cb_per_node, &node_of))
}

/// Memory from the platform, given back when dropped.
pub(super) struct Scratch {
    ptr: *mut u8,
    len: usize,
    platform: &'static dyn crate::platform::Platform,
}

impl Scratch {
    pub(super) fn new(e: &Engine, len: usize) -> Option<Scratch> {
        let platform = e.platform;
        let ptr = platform.alloc_mem(len.max(8))?;
        Some(Scratch { ptr, len, platform })
    }

    pub(super) fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: `len` bytes from alloc_mem, owned by this value.
        unsafe { core::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: the pointer came from this platform's alloc_mem and is given back once.
        unsafe { self.platform.free_mem(self.ptr) };
    }
}

pub(super) fn nomem() -> Error {
    Error::new(
        ErrorClass::NoMem,
        Reason::BadArgument {
            what: "no memory for collective buffering (cb_buffer_size may be too large)",
        },
    )
}

// The piece lists travel as bytes among the file's members, which may differ in byte order:
// their words are little-endian on the wire.
fn rd(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

fn wr(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The largest error class any member of `comm` had (0: none).
fn agree(cx: &mut Inside, comm: crate::comm::CommId, mine: i32) -> Result<i32> {
    super::agree(cx, comm, mine)
}

/// The word array views of the scratch region: `P` u64s each.
#[derive(Clone, Copy)]
pub(super) struct Arrays {
    pub(super) base: *mut u64,
    pub(super) p: usize,
}

impl Arrays {
    pub(super) const N: usize = 13;

    pub(super) fn at(&self, k: usize) -> *mut u64 {
        // SAFETY: the scratch region holds N arrays of p u64s.
        unsafe { self.base.add(k * self.p) }
    }

    pub(super) fn get(&self, k: usize, i: usize) -> u64 {
        // SAFETY: i < p, k < N.
        unsafe { *self.at(k).add(i) }
    }

    pub(super) fn set(&self, k: usize, i: usize, v: u64) {
        // SAFETY: as above.
        unsafe { *self.at(k).add(i) = v }
    }
}

// Arrays of the scratch region (indexes into `Arrays`).
const LO: usize = 0; // gathered ranges: 2 words per member (lo, hi) in LO and LO+1's space
pub(super) const OUT: usize = 2; // sizes sent: 2 words per member
pub(super) const IN: usize = 4; // sizes received: 2 words per member
pub(super) const SC: usize = 6;
pub(super) const SD: usize = 7;
pub(super) const RC: usize = 8;
pub(super) const RD: usize = 9;
pub(super) const AGG: usize = 10;
const CUR: usize = 11;

/// One round's window of aggregator `a` (file range; empty when `lo >= hi`).
#[derive(Clone, Copy)]
pub(super) struct Plan {
    lo: u64,
    hi: u64,
    dsize: u64,
    /// Bytes of a window (`cb_buffer_size`).
    pub(super) cb: u64,
}

/// The file range of an aggregator's filled write window, and whether it holds the range's
/// lock (taken when the pieces left gaps).
#[derive(Clone, Copy)]
pub(super) struct Filled {
    /// First byte.
    pub(super) lo: u64,
    /// Bytes.
    pub(super) len: u64,
    locked: bool,
}

impl Plan {
    pub(super) fn window(&self, a: usize, round: u64) -> (u64, u64) {
        let d0 = self.lo.saturating_add(a as u64 * self.dsize);
        let d1 = d0.saturating_add(self.dsize).min(self.hi);
        let w0 = d0.saturating_add(round * self.cb);
        let w1 = w0.saturating_add(self.cb).min(d1);
        if w0 >= d1 {
            (0, 0)
        } else {
            (w0, w1)
        }
    }
}

/// This member's part of a collective access as the others need to know it: its file range
/// `[lo, hi)` (`lo` is `u64::MAX` when it moves nothing), its bytes, and how many contiguous
/// file pieces they are in (counted only when `automatic` may use it).
pub(super) fn extent_of(
    e: &Engine,
    id: FileId,
    dir: Dir,
    start: u64,
    mem: Memory,
) -> Result<[u64; 4]> {
    let f = e.io.get(id)?;
    let (v, hints) = (f.view, f.hints);
    let size = e.p2p.types.check_committed(mem.dt)?.size;
    let total = size
        .checked_mul(mem.count)
        .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
    if total == 0 {
        return Ok([u64::MAX, 0, 0, 0]);
    }
    let nodes = e.p2p.types.nodes(v.layout)?;
    let lo = view::byte_offset(nodes, &v, start)?;
    let hi = view::byte_offset(nodes, &v, start + total - 1)? + 1;
    let mut pieces = 0u64;
    if mode_of(&hints, dir) == CbMode::Automatic {
        view::runs(nodes, &v, start, total, &mut |_, _| {
            pieces += 1;
            Ok(())
        })?;
    }
    Ok([lo, hi, total, pieces])
}

fn mode_of(h: &Hints, dir: Dir) -> CbMode {
    match dir {
        Dir::Read => h.cb_read,
        Dir::Write => h.cb_write,
    }
}

/// Whether the members' gathered extents (`of(r)`: member `r`'s words from [`extent_of`]) call
/// for two-phase collective buffering, and then the aggregate file range; every member decides
/// alike from the same words.
pub(super) fn choose(
    p: usize,
    of: &dyn Fn(usize) -> [u64; 4],
    h: &Hints,
    dir: Dir,
    atomic: bool,
) -> Option<(u64, u64)> {
    let (all_bytes, all_pieces) = (0..p).fold((0u64, 0u64), |(b, n), r| {
        let w = of(r);
        (b + w[2], n + w[3])
    });
    // ROMIO's rule: interleaved when a member's range starts before the previous one's ends.
    let mut interleaved = false;
    let mut prev_hi = None;
    let (mut all_lo, mut all_hi) = (u64::MAX, 0u64);
    for r in 0..p {
        let [l, hi, _, _] = of(r);
        if l >= hi {
            continue;
        }
        if prev_hi.is_some_and(|ph| l < ph) {
            interleaved = true;
        }
        prev_hi = Some(hi);
        all_lo = all_lo.min(l);
        all_hi = all_hi.max(hi);
    }
    let two_phase = !atomic
        && all_lo < all_hi
        && match mode_of(h, dir) {
            CbMode::Enable => true,
            CbMode::Disable => false,
            // Interleaved (ROMIO's rule) and in pieces small enough that gathering them into
            // large file accesses pays for the exchange.
            CbMode::Automatic => {
                interleaved && all_bytes < h.cb_small_pieces.saturating_mul(all_pieces)
            }
        };
    two_phase.then_some((all_lo, all_hi))
}

/// Fills `arr`'s AGG array with the aggregators of `fc` under hints `h`; how many.
pub(super) fn place_aggregators(
    e: &Engine,
    fc: crate::comm::CommId,
    h: &Hints,
    arr: &Arrays,
) -> Result<usize> {
    let c = e.check_comm(fc)?;
    let (g, p) = (c.group, c.size());
    let node_of = |r: u32| {
        let pr = e.p2p.comms.groups.proc_of(g, r);
        e.p2p.procs[pr.0 as usize].node
    };
    // SAFETY: the AGG array holds p u64s.
    let out = unsafe { core::slice::from_raw_parts_mut(arr.at(AGG), p as usize) };
    Ok(aggregators(p, h.cb_nodes, h.cb_per_node, &node_of, out))
}

/// The file domains of `naggs` aggregators over `[all_lo, all_hi)` and the number of rounds.
pub(super) fn domains(all_lo: u64, all_hi: u64, naggs: usize, h: &Hints) -> (Plan, u64) {
    let unit = h.striping_unit.max(1);
    let base = all_lo - all_lo % unit;
    let per = (all_hi - base).div_ceil(naggs.max(1) as u64);
    let dsize = per.div_ceil(unit) * unit;
    let cb = h.cb_buffer_size.max(1);
    let plan = Plan {
        lo: base,
        hi: all_hi,
        dsize,
        cb,
    };
    (plan, dsize.div_ceil(cb))
}

/// A collective data access of this member (`mine`: the view-stream start and the memory; an
/// error when this member's arguments were bad — it then still takes part, so the others do
/// not wait for it, and every member returns an error). Two-phase when the hints and the
/// accesses call for it, else each member's own access; bytes moved.
///
/// # Safety
/// MPI's rule for the buffer of `mine`.
pub unsafe fn access(
    cx: &mut Inside,
    id: FileId,
    dir: Dir,
    mine: Result<(u64, Memory)>,
) -> Result<u64> {
    let (fc, hints, atomic, v, fd) = {
        let f = cx.e().io.get(id)?;
        (f.comm, f.hints, f.atomic, f.view, f.fd)
    };
    let c = cx.e().check_comm(fc)?;
    let (p, me) = (c.size() as usize, c.rank as usize);
    let range = mine.and_then(|(start, mem)| {
        let w = extent_of(cx.e(), id, dir, start, mem)?;
        Ok((start, mem, w))
    });
    let scratch = Scratch::new(cx.e(), p * Arrays::N * 8);
    let local = match (&range, &scratch) {
        (Err(e), _) => e.class.code(),
        (_, None) => ErrorClass::NoMem.code(),
        _ => 0,
    };
    let worst = agree(cx, fc, local)?;
    let ((start, mem, words), mut scratch) = match (range, scratch) {
        (Err(e), _) => return Err(e),
        (_, None) => return Err(nomem()),
        (Ok(r), Some(s)) => (r, s),
    };
    if worst != 0 {
        return Err(super::remote_error(
            worst,
            "another member's collective access failed",
        ));
    }
    let total = words[2];
    let arr = Arrays {
        base: scratch.bytes().as_mut_ptr().cast(),
        p,
    };
    // Gather every member's words (before OUT is used: they take the space of LO, LO+1 and
    // OUT).
    let call = Call::Allgather {
        send: Some(Buf {
            ptr: words.as_ptr() as *mut u8,
            count: 4,
            dt: Datatype::UINT64_T,
        }),
        recv: Buf {
            ptr: arr.at(LO).cast(),
            count: 4,
            dt: Datatype::UINT64_T,
        },
    };
    // SAFETY: `words` holds 4 u64s, the arrays from LO 4p; both live through the call.
    unsafe { crate::coll::blocking(cx, fc, call, None)? };
    let of = |r: usize| core::array::from_fn(|k| arr.get(LO, 4 * r + k));
    let Some((all_lo, all_hi)) = choose(p, &of, &hints, dir, atomic) else {
        drop(scratch);
        // SAFETY: the caller's contract.
        return unsafe { super::transfer(cx.e(), id, dir, start, mem) };
    };
    let naggs = place_aggregators(cx.e(), fc, &hints, &arr)?;
    let (plan, rounds) = domains(all_lo, all_hi, naggs, &hints);
    let my_agg = (0..naggs).find(|a| arr.get(AGG, *a) == me as u64);
    let mut window = match my_agg {
        Some(_) => Scratch::new(cx.e(), plan.cb as usize),
        None => Scratch::new(cx.e(), 0),
    };
    let code = agree(
        cx,
        fc,
        if window.is_none() {
            ErrorClass::NoMem.code()
        } else {
            0
        },
    )?;
    if code != 0 {
        return Err(nomem());
    }
    let window = window.as_mut().map(|w| w.bytes()).unwrap_or(&mut []);
    let mut state = State {
        arr,
        p,
        plan,
        naggs,
        start,
        total,
        fd,
        err: None,
        moved: 0,
    };
    let types = &cx.e().p2p.types;
    match dir {
        Dir::Write => {
            // SAFETY: the caller's contract.
            let mut pk = unsafe { packer(types, &v, mem)? };
            for round in 0..rounds {
                state.write_round(cx, fc, id, round, my_agg, window, &mut pk)?;
            }
            state.moved = total;
        }
        Dir::Read => {
            // SAFETY: the caller's contract.
            let mut up = unsafe { unpacker(types, &v, mem)? };
            for round in 0..rounds {
                state.read_round(cx, fc, id, round, my_agg, window, &mut up)?;
            }
        }
    }
    let mine = state.err.map_or(0, |e| e.class.code());
    let worst = agree(cx, fc, mine)?;
    match (state.err, worst) {
        (_, 0) => Ok(state.moved),
        (Some(e), _) => Err(e),
        (None, c) => Err(super::remote_error(
            c,
            "an aggregator's file access failed in a collective access",
        )),
    }
}

/// The packer of a collective write's memory (into the view's representation).
///
/// # Safety
/// MPI's rule for the buffer of `mem`, while the packer is used.
pub(super) unsafe fn packer(types: &TypeTable, v: &view::View, mem: Memory) -> Result<Packer> {
    if v.external32 {
        super::same_size_in_external32(types, mem.dt)?;
    }
    // SAFETY: the caller's contract; the packer keeps no borrow of the type table.
    unsafe {
        match v.external32 {
            true => Packer::external(mem.buf, mem.count, mem.dt, types, Repr::EXTERNAL32),
            false => Packer::new(mem.buf, mem.count, mem.dt, types),
        }
    }
}

/// The unpacker of a collective read's memory (from the view's representation).
///
/// # Safety
/// As [`packer`]'s.
pub(super) unsafe fn unpacker(types: &TypeTable, v: &view::View, mem: Memory) -> Result<Unpacker> {
    // SAFETY: the caller's contract.
    let mut up = unsafe { Unpacker::new(mem.buf, mem.count, mem.dt, types)? };
    if v.external32 {
        super::same_size_in_external32(types, mem.dt)?;
        up.set_source(types, &Repr::EXTERNAL32)?;
    }
    Ok(up)
}

/// What the rounds of one call share.
pub(super) struct State {
    pub(super) arr: Arrays,
    pub(super) p: usize,
    pub(super) plan: Plan,
    pub(super) naggs: usize,
    pub(super) start: u64,
    pub(super) total: u64,
    pub(super) fd: super::fs::Fd,
    pub(super) err: Option<Error>,
    pub(super) moved: u64,
}

impl State {
    /// This member's stream range [s0, s1) (relative to its access) in aggregator `a`'s window
    /// of `round`.
    pub(super) fn share(&self, e: &Engine, id: FileId, a: usize, round: u64) -> Result<(u64, u64)> {
        let (w0, w1) = self.plan.window(a, round);
        if w0 >= w1 || self.total == 0 {
            return Ok((0, 0));
        }
        let v = e.io.get(id)?.view;
        let nodes = e.p2p.types.nodes(v.layout)?;
        let b0 = view::stream_before(nodes, &v, w0)?;
        let b1 = view::stream_before(nodes, &v, w1)?;
        let s0 = b0.max(self.start).min(self.start + self.total) - self.start;
        let s1 = b1.max(self.start).min(self.start + self.total) - self.start;
        Ok((s0, s1.max(s0)))
    }

    /// Feeds `out` the file ranges of this member's stream bytes [s0, s1).
    fn runs(
        &self,
        e: &Engine,
        id: FileId,
        s0: u64,
        s1: u64,
        out: &mut dyn FnMut(u64, u64) -> Result<()>,
    ) -> Result<()> {
        let v = e.io.get(id)?.view;
        let nodes = e.p2p.types.nodes(v.layout)?;
        view::runs(nodes, &v, self.start + s0, s1 - s0, out)
    }

    /// Exchanges the sizes in OUT (2 words per member) into IN.
    fn exchange_sizes(&self, cx: &mut Inside, fc: crate::comm::CommId) -> Result<()> {
        let call = Call::Alltoall {
            send: Some(Buf {
                ptr: self.arr.at(OUT).cast(),
                count: 2,
                dt: Datatype::UINT64_T,
            }),
            recv: Buf {
                ptr: self.arr.at(IN).cast(),
                count: 2,
                dt: Datatype::UINT64_T,
            },
        };
        // SAFETY: the OUT and IN arrays hold 2p u64s each and live through the call.
        unsafe { crate::coll::blocking(cx, fc, call, None) }
    }

    /// Sends `send` (SC/SD) and receives into `recv` (RC/RD), bytes.
    fn exchange(
        &self,
        cx: &mut Inside,
        fc: crate::comm::CommId,
        send: *mut u8,
        recv: *mut u8,
    ) -> Result<()> {
        let call = Call::Alltoallv {
            send: Some(VBuf {
                ptr: send,
                counts: Ints::Wide(self.arr.at(SC) as *const i64),
                displs: Ints::Wide(self.arr.at(SD) as *const i64),
                dt: Datatype::BYTE,
            }),
            recv: VBuf {
                ptr: recv,
                counts: Ints::Wide(self.arr.at(RC) as *const i64),
                displs: Ints::Wide(self.arr.at(RD) as *const i64),
                dt: Datatype::BYTE,
            },
        };
        // SAFETY: the buffers hold what the counts and displacements say; the arrays hold p
        // words each; all live through the call.
        unsafe { crate::coll::blocking(cx, fc, call, None) }
    }

    /// Lays out counts `k`-th word of OUT (send) and IN (receive) into SC/SD and RC/RD; the
    /// totals.
    pub(super) fn layout(&self, k_send: usize, k_recv: usize) -> (usize, usize) {
        let (mut s, mut r) = (0u64, 0u64);
        for i in 0..self.p {
            let a = self.arr.get(OUT, 2 * i + k_send);
            let b = self.arr.get(IN, 2 * i + k_recv);
            self.arr.set(SC, i, a);
            self.arr.set(SD, i, s);
            self.arr.set(RC, i, b);
            self.arr.set(RD, i, r);
            s += a;
            r += b;
        }
        (s as usize, r as usize)
    }

    pub(super) fn zero_out(&self) {
        for i in 0..2 * self.p {
            self.arr.set(OUT, i, 0);
        }
    }

    /// Writes this member's records for aggregator `a` in `round` (their count, then offset and
    /// length of each contiguous run) at the start of its slot of the send buffer `buf`; the
    /// slot's place and length, the number of runs and where the share starts in this member's
    /// data, or `None` when it has no share.
    pub(super) fn records(
        &mut self,
        e: &Engine,
        id: FileId,
        a: usize,
        round: u64,
        buf: &mut [u8],
    ) -> Result<Option<(usize, usize, usize, u64)>> {
        let (s0, s1) = self.share(e, id, a, round)?;
        if s1 == s0 {
            return Ok(None);
        }
        let dest = self.arr.get(AGG, a) as usize;
        let at = self.arr.get(SD, dest) as usize;
        let len = self.arr.get(SC, dest) as usize;
        let msg = &mut buf[at..at + len];
        let mut n = 0usize;
        self.runs(e, id, s0, s1, &mut |off, l| {
            wr(msg, 8 + 16 * n, off);
            wr(msg, 16 + 16 * n, l);
            n += 1;
            Ok(())
        })?;
        wr(msg, 0, n as u64);
        Ok(Some((at, len, n, s0)))
    }

    /// Calls `f` for each aggregator this member has a share of the file for in `round`: with
    /// the aggregator's rank, the number of contiguous runs in the share and its bytes.
    fn each_share(
        &mut self,
        e: &Engine,
        id: FileId,
        round: u64,
        f: &mut dyn FnMut(&mut Self, usize, u64, u64),
    ) -> Result<()> {
        for a in 0..self.naggs {
            let (s0, s1) = self.share(e, id, a, round)?;
            if s1 == s0 {
                continue;
            }
            let mut n = 0u64;
            self.runs(e, id, s0, s1, &mut |_, _| {
                n += 1;
                Ok(())
            })?;
            let dest = self.arr.get(AGG, a) as usize;
            f(self, dest, n, s1 - s0);
        }
        Ok(())
    }

    /// Fills the send buffer `sb` (laid out by SC/SD) of write `round`: for each aggregator
    /// this member has a share for, its records and then its packed bytes.
    pub(super) fn fill_write(
        &mut self,
        e: &Engine,
        id: FileId,
        round: u64,
        sb: &mut [u8],
        pk: &mut Packer,
    ) -> Result<()> {
        for a in 0..self.naggs {
            let Some((at, len, n, s0)) = self.records(e, id, a, round, sb)? else {
                continue;
            };
            let msg = &mut sb[at..at + len];
            let data = &mut msg[8 + 16 * n..];
            let types = &e.p2p.types;
            let mut done = 0usize;
            while done < data.len() {
                let got = pk.pack(types, s0 as usize + done, &mut data[done..]);
                if got == 0 {
                    return Err(Error::new(
                        ErrorClass::Intern,
                        Reason::BadArgument {
                            what: "the memory datatype ended before the view range",
                        },
                    ));
                }
                done += got;
            }
        }
        Ok(())
    }

    /// The sizes of write `round` into OUT: records and bytes for each aggregator.
    pub(super) fn write_sizes(&mut self, e: &Engine, id: FileId, round: u64) -> Result<()> {
        self.zero_out();
        self.each_share(e, id, round, &mut |me, dest, n, bytes| {
            me.arr.set(OUT, 2 * dest, 8 + 16 * n + bytes)
        })
    }

    /// The sizes of read `round` into OUT: records (first words) and replies (second words).
    pub(super) fn read_sizes(&mut self, e: &Engine, id: FileId, round: u64) -> Result<()> {
        self.zero_out();
        self.each_share(e, id, round, &mut |me, dest, n, bytes| {
            me.arr.set(OUT, 2 * dest, 8 + 16 * n);
            me.arr.set(OUT, 2 * dest + 1, 8 + bytes);
        })
    }

    /// The reply sizes of a read round (outgoing: what others asked for, incoming: what this
    /// member asked for).
    pub(super) fn reply_sizes(&self) -> (u64, u64) {
        let (mut rs, mut rr) = (0u64, 0u64);
        for i in 0..self.p {
            rs += self.arr.get(IN, 2 * i + 1);
            rr += self.arr.get(OUT, 2 * i + 1);
        }
        (rs, rr)
    }

    /// Lays out the replies of a read round in SC/SD (outgoing) and RC/RD (incoming).
    pub(super) fn reply_layout(&self) {
        let (mut s, mut r) = (0u64, 0u64);
        for i in 0..self.p {
            let a = self.arr.get(IN, 2 * i + 1);
            let b = self.arr.get(OUT, 2 * i + 1);
            self.arr.set(SC, i, a);
            self.arr.set(SD, i, s);
            self.arr.set(RC, i, b);
            self.arr.set(RD, i, r);
            s += a;
            r += b;
        }
    }

    /// Takes in this member's replies `yb` of read `round`; `moved` counts their bytes.
    pub(super) fn unpack_replies(
        &mut self,
        e: &Engine,
        id: FileId,
        round: u64,
        yb: &[u8],
        up: &mut Unpacker,
    ) -> Result<()> {
        for a in 0..self.naggs {
            let (s0, s1) = self.share(e, id, a, round)?;
            if s1 == s0 {
                continue;
            }
            let src = self.arr.get(AGG, a) as usize;
            let m = &yb[self.arr.get(RD, src) as usize..][..self.arr.get(RC, src) as usize];
            let avail = (rd(m, 0) as usize).min(m.len() - 8);
            up.unpack(&e.p2p.types, s0 as usize, &m[8..8 + avail]);
            self.moved += avail as u64;
        }
        Ok(())
    }

    /// Whether this member, as aggregator `my_agg`, has a window in `round`.
    pub(super) fn has_window(&self, my_agg: Option<usize>, round: u64) -> bool {
        my_agg.is_some_and(|a| {
            let (w0, w1) = self.plan.window(a, round);
            w0 < w1
        })
    }

    /// One write round: each member sends each aggregator (records, bytes); the aggregators
    /// write their windows.
    #[allow(clippy::too_many_arguments)]
    fn write_round(
        &mut self,
        cx: &mut Inside,
        fc: crate::comm::CommId,
        id: FileId,
        round: u64,
        my_agg: Option<usize>,
        window: &mut [u8],
        pk: &mut Packer,
    ) -> Result<()> {
        self.write_sizes(cx.e(), id, round)?;
        self.exchange_sizes(cx, fc)?;
        let (ns, nr) = self.layout(0, 0);
        let send = Scratch::new(cx.e(), ns);
        let recv = Scratch::new(cx.e(), nr);
        let ok = send.is_some() && recv.is_some();
        if agree(cx, fc, if ok { 0 } else { ErrorClass::NoMem.code() })? != 0 {
            return Err(nomem());
        }
        let (Some(mut send), Some(mut recv)) = (send, recv) else {
            return Err(nomem());
        };
        let sb = send.bytes();
        self.fill_write(cx.e(), id, round, sb, pk)?;
        self.exchange(cx, fc, sb.as_mut_ptr(), recv.bytes().as_mut_ptr())?;
        drop(send);
        let Some(a) = my_agg else { return Ok(()) };
        let (w0, w1) = self.plan.window(a, round);
        if w0 >= w1 {
            return Ok(());
        }
        let rb = recv.bytes();
        if let Err(e) = self.write_window(cx.e(), rb, window) {
            self.err.get_or_insert(e);
        }
        Ok(())
    }

    /// Writes the pieces received (messages in RC/RD) through the window buffer.
    pub(super) fn write_window(&self, e: &Engine, rb: &[u8], window: &mut [u8]) -> Result<()> {
        let Some(f) = self.fill_window(e, rb, window)? else {
            return Ok(());
        };
        let fs = file_system(e)?;
        let r = fs
            .write_at(self.fd, &window[..f.len as usize], f.lo)
            .map_err(|err| err.to_error("file access"));
        self.unlock(e, f);
        r
    }

    /// Puts the pieces received (messages in RC/RD) in the window buffer, over the file's bytes
    /// between them when they leave gaps (read under an exclusive lock, which the caller lets
    /// go of with [`State::unlock`] once the window is written); the window's file range, or
    /// `None` when no piece came.
    pub(super) fn fill_window(
        &self,
        e: &Engine,
        rb: &[u8],
        window: &mut [u8],
    ) -> Result<Option<Filled>> {
        let fs = file_system(e)?;
        // The span the pieces cover, and (by merging the members' sorted lists) how much of it
        // they fill.
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for i in 0..self.p {
            self.arr.set(CUR, i, 0);
            let len = self.arr.get(RC, i) as usize;
            if len == 0 {
                continue;
            }
            let m = &rb[self.arr.get(RD, i) as usize..][..len];
            let n = rd(m, 0) as usize;
            if n > 0 {
                lo = lo.min(rd(m, 8));
                let last = 8 + 16 * (n - 1);
                hi = hi.max(rd(m, last) + rd(m, last + 8));
            }
        }
        if lo >= hi {
            return Ok(None);
        }
        let mut filled = 0u64;
        let mut reach = lo;
        loop {
            let mut best: Option<(usize, u64, u64)> = None;
            for i in 0..self.p {
                let len = self.arr.get(RC, i) as usize;
                if len == 0 {
                    continue;
                }
                let m = &rb[self.arr.get(RD, i) as usize..][..len];
                let k = self.arr.get(CUR, i) as usize;
                if k < rd(m, 0) as usize {
                    let (o, l) = (rd(m, 8 + 16 * k), rd(m, 16 + 16 * k));
                    if best.is_none_or(|b| o < b.1) {
                        best = Some((i, o, l));
                    }
                }
            }
            let Some((i, o, l)) = best else { break };
            self.arr.set(CUR, i, self.arr.get(CUR, i) + 1);
            let end = o + l;
            if end > reach {
                filled += end - reach.max(o);
                reach = end;
            }
        }
        let span = (hi - lo) as usize;
        let buf = &mut window[..span];
        let gaps = filled < hi - lo;
        let io = |e: super::fs::IoError| e.to_error("file access");
        if gaps {
            // Read-modify-write: the bytes between the pieces are the file's, and no other
            // writer may change them between this read and the write back.
            fs.lock(self.fd, lo, hi - lo, true).map_err(io)?;
        }
        let f = Filled {
            lo,
            len: hi - lo,
            locked: gaps,
        };
        if gaps {
            match fs.read_at(self.fd, buf, lo) {
                Ok(got) => buf[got..].fill(0),
                Err(err) => {
                    self.unlock(e, f);
                    return Err(io(err));
                }
            }
        }
        for i in 0..self.p {
            let len = self.arr.get(RC, i) as usize;
            if len == 0 {
                continue;
            }
            let m = &rb[self.arr.get(RD, i) as usize..][..len];
            let n = rd(m, 0) as usize;
            let mut d = 8 + 16 * n;
            for k in 0..n {
                let (o, l) = (rd(m, 8 + 16 * k) as usize, rd(m, 16 + 16 * k) as usize);
                let at = o - lo as usize;
                buf[at..at + l].copy_from_slice(&m[d..d + l]);
                d += l;
            }
        }
        Ok(Some(f))
    }

    /// Lets go of the lock [`State::fill_window`] took, if it took one.
    pub(super) fn unlock(&self, e: &Engine, f: Filled) {
        if let (true, Ok(fs)) = (f.locked, file_system(e)) {
            let _ = fs.unlock(self.fd, f.lo, f.len);
        }
    }

    /// One read round: each member sends each aggregator its records; the aggregators read
    /// their windows and send each member (bytes available, bytes).
    #[allow(clippy::too_many_arguments)]
    fn read_round(
        &mut self,
        cx: &mut Inside,
        fc: crate::comm::CommId,
        id: FileId,
        round: u64,
        my_agg: Option<usize>,
        window: &mut [u8],
        up: &mut Unpacker,
    ) -> Result<()> {
        self.read_sizes(cx.e(), id, round)?;
        self.exchange_sizes(cx, fc)?;
        // Requests go out as the first words say; replies come back as the second words say
        // (so the layout for replies is IN's second words outgoing, OUT's second incoming).
        let (nq, nqr) = self.layout(0, 0);
        let (rs, rr) = self.reply_sizes();
        let qs = Scratch::new(cx.e(), nq);
        let qr = Scratch::new(cx.e(), nqr);
        let ys = Scratch::new(cx.e(), rs as usize);
        let yr = Scratch::new(cx.e(), rr as usize);
        let ok = qs.is_some() && qr.is_some() && ys.is_some() && yr.is_some();
        if agree(cx, fc, if ok { 0 } else { ErrorClass::NoMem.code() })? != 0 {
            return Err(nomem());
        }
        let (Some(mut qs), Some(mut qr), Some(mut ys), Some(mut yr)) = (qs, qr, ys, yr) else {
            return Err(nomem());
        };
        let qb = qs.bytes();
        for a in 0..self.naggs {
            self.records(cx.e(), id, a, round, qb)?;
        }
        self.exchange(cx, fc, qb.as_mut_ptr(), qr.bytes().as_mut_ptr())?;
        // The replies: this member sends what others asked for (IN's second words) and
        // receives what it asked for (OUT's second words).
        self.reply_layout();
        let ysb = ys.bytes();
        if let Some(a) = my_agg {
            let (w0, w1) = self.plan.window(a, round);
            if w0 < w1 {
                // Requests arrived at the first-word layout of IN.
                if let Err(e) = self.read_window(cx.e(), qr.bytes(), ysb, window) {
                    self.err.get_or_insert(e);
                }
            }
        }
        self.exchange(cx, fc, ysb.as_mut_ptr(), yr.bytes().as_mut_ptr())?;
        self.unpack_replies(cx.e(), id, round, yr.bytes(), up)
    }

    /// Reads an aggregator's window and builds the replies (into `ys`, laid out by SC/SD)
    /// from the requests (`qr`, laid out by IN's first words).
    pub(super) fn read_window(
        &self,
        e: &Engine,
        qr: &[u8],
        ys: &mut [u8],
        window: &mut [u8],
    ) -> Result<()> {
        let fs = file_system(e)?;
        let (lo, hi) = self.read_span(qr);
        let got = if lo < hi {
            let span = (hi - lo) as usize;
            fs.read_at(self.fd, &mut window[..span], lo)
                .map_err(|e| e.to_error("file access"))?
        } else {
            0
        };
        self.replies(qr, ys, window, lo, got as u64);
        Ok(())
    }

    /// The request of member `i` in `qr`.
    fn request<'q>(&self, qr: &'q [u8], i: usize) -> &'q [u8] {
        let mut at = 0usize;
        for j in 0..i {
            at += self.arr.get(IN, 2 * j) as usize;
        }
        &qr[at..at + self.arr.get(IN, 2 * i) as usize]
    }

    /// The file range `[lo, hi)` the requests `qr` (laid out by IN's first words) cover (empty
    /// when `lo >= hi`).
    pub(super) fn read_span(&self, qr: &[u8]) -> (u64, u64) {
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for i in 0..self.p {
            let m = self.request(qr, i);
            if m.is_empty() {
                continue;
            }
            let n = rd(m, 0) as usize;
            if n > 0 {
                lo = lo.min(rd(m, 8));
                let last = 8 + 16 * (n - 1);
                hi = hi.max(rd(m, last) + rd(m, last + 8));
            }
        }
        (lo, hi)
    }

    /// Builds the replies (into `ys`, laid out by SC/SD) to the requests `qr` from the window,
    /// which holds `got` bytes of the file from `lo` (fewer than asked at the end of the file).
    pub(super) fn replies(&self, qr: &[u8], ys: &mut [u8], window: &[u8], lo: u64, got: u64) {
        let eof = lo.saturating_add(got);
        for i in 0..self.p {
            let m = self.request(qr, i);
            if m.is_empty() {
                continue;
            }
            let out = &mut ys[self.arr.get(SD, i) as usize..][..self.arr.get(SC, i) as usize];
            let n = rd(m, 0) as usize;
            let mut d = 8usize;
            let mut avail = 0u64;
            let mut short = false;
            for k in 0..n {
                let (o, l) = (rd(m, 8 + 16 * k), rd(m, 16 + 16 * k));
                let have = if short {
                    0
                } else {
                    eof.saturating_sub(o).min(l)
                };
                short |= have < l;
                let at = (o - lo) as usize;
                out[d..d + have as usize].copy_from_slice(&window[at..at + have as usize]);
                d += l as usize;
                avail += have;
            }
            wr(out, 0, avail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregators_are_one_per_node_then_the_next_of_each() {
        let nodes = [0u32, 0, 1, 1, 2, 2, 2];
        let node_of = |r: u32| nodes[r as usize];
        let mut out = [0u64; 7];
        assert_eq!(aggregators(7, 0, 1, &node_of, &mut out), 3);
        assert_eq!(&out[..3], &[0, 2, 4]);
        // Two per node; three: the nodes of two members give their two.
        assert_eq!(aggregators(7, 0, 2, &node_of, &mut out), 6);
        assert_eq!(&out[..6], &[0, 2, 4, 1, 3, 5]);
        assert_eq!(aggregators(7, 0, 3, &node_of, &mut out), 7);
        assert_eq!(out, [0, 2, 4, 1, 3, 5, 6]);
        assert_eq!(aggregators(7, 5, 1, &node_of, &mut out), 5);
        assert_eq!(&out[..5], &[0, 2, 4, 1, 3]);
        assert_eq!(aggregators(7, 100, 1, &node_of, &mut out), 7);
        assert_eq!(out, [0, 2, 4, 1, 3, 5, 6]);
    }

    #[test]
    fn windows_tile_the_domains_in_rounds() {
        let plan = Plan {
            lo: 100,
            hi: 1000,
            dsize: 512,
            cb: 200,
        };
        assert_eq!(plan.window(0, 0), (100, 300));
        assert_eq!(plan.window(0, 1), (300, 500));
        assert_eq!(plan.window(0, 2), (500, 612));
        assert_eq!(plan.window(0, 3), (0, 0));
        assert_eq!(plan.window(1, 0), (612, 812));
        assert_eq!(plan.window(1, 1), (812, 1000));
        assert_eq!(plan.window(1, 2), (0, 0));
    }

    #[test]
    fn collective_buffering_is_chosen_for_interleaved_small_pieces() {
        let h = Hints {
            cb_read: CbMode::Automatic,
            cb_write: CbMode::Enable,
            cb_nodes: 0,
            cb_buffer_size: 4096,
            striping_unit: 512,
            striping_factor: 1,
            ind_wr_buffer_size: 1000,
            cb_small_pieces: 256,
            cb_per_node: 1,
        };
        // Two members interleaved in 64-byte pieces; then the same ranges in one piece each.
        let small = |r: usize| [[0, 1000, 512, 8], [64, 1064, 512, 8]][r];
        let large = |r: usize| [[0, 1000, 512, 1], [64, 1064, 512, 1]][r];
        let apart = |r: usize| [[0, 512, 512, 8], [512, 1024, 512, 8]][r];
        assert_eq!(choose(2, &small, &h, Dir::Read, false), Some((0, 1064)));
        assert_eq!(choose(2, &large, &h, Dir::Read, false), None);
        assert_eq!(choose(2, &apart, &h, Dir::Read, false), None);
        assert_eq!(choose(2, &apart, &h, Dir::Write, false), Some((0, 1024)));
        assert_eq!(choose(2, &small, &h, Dir::Write, true), None);
        // A member that moves nothing (lo past hi) is left out of the range.
        let idle = |r: usize| [[u64::MAX, 0, 0, 0], [64, 1064, 512, 8]][r];
        assert_eq!(choose(2, &idle, &h, Dir::Write, false), Some((64, 1064)));
    }

    #[test]
    fn hints_round_trip_through_words() {
        let h = Hints {
            cb_read: CbMode::Disable,
            cb_write: CbMode::Enable,
            cb_nodes: 3,
            cb_buffer_size: 4096,
            striping_unit: 512,
            striping_factor: 4,
            ind_wr_buffer_size: 1000,
            cb_small_pieces: 777,
            cb_per_node: 5,
        };
        assert_eq!(Hints::from_words(h.words()), h);
    }
}
