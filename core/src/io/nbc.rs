//! Non-blocking collective accesses (`MPI_File_iwrite_all`, `MPI_File_read_at_all_begin`, ...)
//! that go on while the members compute.
//!
//! A start call checks its own arguments, queues an [`Access`] and returns its request without
//! waiting for the other members or the file. Progress (the engine's, so every Wait and Test)
//! moves each access through the steps of the blocking [`twophase`] path as a state machine,
//! with the non-blocking collectives of [`crate::coll`] on the file's private communicator in
//! place of blocking ones:
//!
//! 1. the gather of every member's extent, whose words also carry each member's error class —
//!    so that a member's bad argument reaches every member's request;
//! 2. with collective buffering, per round: the exchange of sizes, an agreement that every
//!    member found memory for the round's buffers, the exchange of pieces (and for reads the
//!    replies), and the aggregator's access of its window; then an agreement on the outcome;
//! 3. without, each member's own access in the background ([`super::background`]).
//!
//! Collective calls on one file start in one order at every member, and the steps of an access
//! are collectives on the file's communicator: so only the oldest access of a file posts steps
//! (later ones wait their turn), and every blocking collective call on the file first waits for
//! the file's accesses ([`drain`]). At most [`MAX_ACCESSES`] are queued in a process; a start
//! beyond them first waits for the oldest to complete. Memory is what the blocking path uses:
//! the per-member arrays, the aggregator's `cb_buffer_size` window, and one round's buffers.

use super::file_system;
use super::fs::{IoError, Run, Ticket};
use super::twophase::{self, Arrays, Filled, Plan, Scratch, State, AGG, IN, OUT, RC, RD, SC, SD};
use super::{Dir, FileId, Memory};
use crate::coll::ints::Ints;
use crate::coll::{Buf, Call, VBuf};
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::Datatype;
use crate::engine::Engine;
use crate::error::{Error, ErrorClass, Result};
use crate::op::Op;
use crate::pml::request::ReqId;
use crate::shared::Inside;

/// Non-blocking collective accesses queued at once in a process.
pub const MAX_ACCESSES: usize = 16;

/// Words of the gather per member: the four of [`twophase::extent_of`] and the error class.
const GATHERED: usize = 5;

/// What an access waits for before its next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Its turn on the file.
    Queued,
    /// The gather of the extents.
    Gather,
    /// This member's own access in the background.
    Own,
    /// A round's exchange of sizes.
    Sizes,
    /// The agreement that every member has the round's buffers.
    Room,
    /// A round's exchange of pieces (writes) or requests (reads).
    Pieces,
    /// The aggregator's access of its window, in the background.
    Window,
    /// A read round's replies.
    Replies,
    /// The agreement on the outcome.
    Outcome,
}

/// The converter between the access's memory and its stream bytes.
enum Conv {
    Pack(Packer),
    Unpack(Unpacker),
}

/// A non-blocking collective access in progress.
pub struct Access {
    /// Start order in the process (older accesses of a file go first).
    seq: u64,
    /// The user's request.
    req: ReqId,
    file: FileId,
    comm: CommId,
    dir: Dir,
    start: u64,
    mem: Memory,
    /// This member's words for the gather.
    words: [u64; 4],
    /// This member's error found at the start: it still takes part, and every member's
    /// request fails.
    bad: Option<Error>,
    /// The per-member arrays, then the gathered words, then this member's words and the
    /// agreement's two words (see [`Region`]).
    _scratch: Scratch,
    /// The per-member arrays (the start of `scratch`).
    arr: Arrays,
    /// Where the rest of `scratch` is.
    region: Region,
    /// The aggregator's window (`cb_buffer_size` bytes; empty for other members).
    window: Option<Scratch>,
    /// One round's buffers: writes use the first two (send, receive), reads all four
    /// (requests out and in, replies out and in).
    bufs: [Option<Scratch>; 4],
    conv: Option<Conv>,
    /// The rounds' shared state, once collective buffering is chosen.
    state: Option<State>,
    naggs: usize,
    my_agg: Option<usize>,
    round: u64,
    rounds: u64,
    step: Step,
    /// The collective (or background access) the current step waits for.
    inner: Option<ReqId>,
    /// The aggregator's window access in the platform's background transfers.
    ticket: Option<Ticket>,
    /// Its outcome, once over.
    window_io: Option<core::result::Result<u64, IoError>>,
    /// The write window's range (and its lock) while it is written.
    filled: Option<Filled>,
}

// SAFETY: the pointers an access holds are its own memory from the platform (the scratch
// region, the window, the round's buffers) and the user's buffer lent until the request
// completes; the engine that owns the access is used by one thread at a time (its lock), which
// may be another than the one that started it, as for every request.
unsafe impl Send for Access {}

/// Where the parts of an access's scratch region are (in u64 words).
struct Region {
    p: usize,
}

impl Region {
    fn words(&self) -> usize {
        Arrays::N * self.p + GATHERED * self.p + GATHERED + 2
    }
    fn gathered(&self) -> usize {
        Arrays::N * self.p
    }
    fn mine(&self) -> usize {
        self.gathered() + GATHERED * self.p
    }
    fn flag_in(&self) -> usize {
        self.mine() + GATHERED
    }
    fn flag_out(&self) -> usize {
        self.flag_in() + 1
    }
}

impl Access {
    /// Whether a step is in flight (whose buffers the access must keep).
    fn waiting(&self) -> bool {
        self.inner.is_some() || self.ticket.is_some()
    }

    /// Word `k` of the scratch region.
    fn word(&self, k: usize) -> *mut u64 {
        // SAFETY: `k` is below the region's `Region::words`, the words the scratch holds.
        unsafe { self.arr.base.add(k) }
    }
}

/// The queued accesses of a process.
pub struct Queue {
    slots: [Option<Access>; MAX_ACCESSES],
    next: u64,
    live: usize,
}

impl Queue {
    /// Whether no access is queued.
    #[inline(always)]
    pub fn idle(&self) -> bool {
        self.live == 0
    }

    /// None queued.
    pub const fn new() -> Queue {
        Queue {
            slots: [const { None }; MAX_ACCESSES],
            next: 0,
            live: 0,
        }
    }

    /// Whether accesses of `file` are queued.
    pub fn busy(&self, file: FileId) -> bool {
        self.live > 0 && self.slots.iter().flatten().any(|a| a.file == file)
    }
}

impl Default for Queue {
    fn default() -> Queue {
        Queue::new()
    }
}

/// Starts a non-blocking collective access of file `id` (`mine`: this member's view-stream
/// start and memory, or its error — it then still takes part, so that the others learn of it,
/// and its own start call returns the error); the request and the bytes the access will move.
///
/// # Safety
/// MPI's rule for a non-blocking access's buffer: valid (and, for a read, unused) until the
/// request completes.
pub unsafe fn start(
    cx: &mut Inside,
    id: FileId,
    dir: Dir,
    mine: Result<(u64, Memory)>,
) -> Result<(ReqId, u64)> {
    while cx.e().io.nbc.live == MAX_ACCESSES {
        cx.round();
    }
    let e = cx.e();
    let (fc, hints, view) = {
        let f = e.io.get(id)?;
        (f.comm, f.hints, f.view)
    };
    let c = e.check_comm(fc)?;
    let (p, me) = (c.size() as usize, c.rank as usize);
    let region = Region { p };
    // Without it this member could not even tell the others; as rare as the blocking path's
    // failure to agree.
    let Some(mut scratch) = Scratch::new(e, region.words() * 8) else {
        return Err(twophase::nomem());
    };
    let arr = Arrays {
        base: scratch.bytes().as_mut_ptr().cast(),
        p,
    };
    let naggs = twophase::place_aggregators(e, fc, &hints, &arr)?;
    let my_agg = (0..naggs).find(|a| arr.get(AGG, *a) == me as u64);
    let prepared = mine.and_then(|(start, mem)| {
        let words = twophase::extent_of(e, id, dir, start, mem)?;
        let types = &e.p2p.types;
        // SAFETY: the caller's contract.
        let conv = unsafe {
            match dir {
                Dir::Write => Conv::Pack(twophase::packer(types, &view, mem)?),
                Dir::Read => Conv::Unpack(twophase::unpacker(types, &view, mem)?),
            }
        };
        Ok((start, mem, words, conv))
    });
    let (start, mem, words, conv, bad) = match prepared {
        Ok((s, m, w, c)) => (s, m, w, Some(c), None),
        Err(err) => {
            let none = Memory {
                buf: core::ptr::null_mut(),
                count: 0,
                dt: Datatype::BYTE,
            };
            (0, none, [u64::MAX, 0, 0, 0], None, Some(err))
        }
    };
    let req = e.p2p.pml.requests_mut().pending(0)?;
    let q = &mut e.io.nbc;
    let Some(slot) = q.slots.iter().position(|s| s.is_none()) else {
        // The loop above made room and nothing since took it.
        let _ = e.p2p.pml.requests_mut().release(req);
        return Err(twophase::nomem());
    };
    q.slots[slot] = Some(Access {
        seq: q.next,
        req,
        file: id,
        comm: fc,
        dir,
        start,
        mem,
        words,
        bad,
        _scratch: scratch,
        arr,
        region,
        window: None,
        bufs: [None, None, None, None],
        conv,
        state: None,
        naggs,
        my_agg,
        round: 0,
        rounds: 0,
        step: Step::Queued,
        inner: None,
        ticket: None,
        window_io: None,
        filled: None,
    });
    q.next += 1;
    q.live += 1;
    // Posts the gather now when the access is the file's oldest, so the others can go on.
    progress(e);
    Ok((req, words[2]))
}

/// Waits until no access of file `id` is queued (before a blocking collective call on it, or
/// its close).
pub fn drain(cx: &mut Inside, id: FileId) {
    while cx.e().io.nbc.busy(id) {
        cx.round();
    }
}

/// Moves the queued accesses on; how many took a step.
pub fn progress(e: &mut Engine) -> usize {
    if e.io.nbc.live == 0 {
        return 0;
    }
    let mut moved = 0;
    for i in 0..MAX_ACCESSES {
        let Some((file, seq)) = e.io.nbc.slots[i].as_ref().map(|a| (a.file, a.seq)) else {
            continue;
        };
        let q = &mut e.io.nbc;
        if q.slots
            .iter()
            .flatten()
            .any(|b| b.file == file && b.seq < seq)
        {
            continue;
        }
        let Some(mut a) = q.slots[i].take() else {
            continue;
        };
        let before = (a.step, a.round);
        let r = advance(e, &mut a);
        if (a.step, a.round) != before {
            moved += 1;
        }
        let outcome = match r {
            Ok(None) if a.waiting() => {
                e.io.nbc.slots[i] = Some(a);
                continue;
            }
            // A step that neither finished nor waits cannot happen; fail rather than stall.
            Ok(None) => Err(Error::new(
                ErrorClass::Intern,
                crate::error::Reason::BadArgument {
                    what: "a non-blocking collective file access stalled",
                },
            )),
            Ok(Some(bytes)) => Ok(bytes),
            Err(err) => Err(err),
        };
        if a.waiting() {
            // Its buffers are in use: it stays queued (failed) until they are free.
            e.io.nbc.slots[i] = Some(a);
            continue;
        }
        moved += 1;
        e.io.nbc.live -= 1;
        super::background::complete(e, a.req, outcome);
    }
    moved
}

/// Starts non-blocking collective `call` on the file's communicator.
///
/// # Safety
/// The buffers of `call` live until its request completes: they are the access's scratch
/// region and round buffers, which it keeps while [`Access::inner`] is set.
unsafe fn post(e: &mut Engine, comm: CommId, call: Call) -> Result<ReqId> {
    // SAFETY: the caller's contract.
    unsafe { e.colls().start(comm, call, 0, None) }
}

fn words(ptr: *mut u64, count: u64) -> Buf {
    Buf {
        ptr: ptr.cast(),
        count,
        dt: Datatype::UINT64_T,
    }
}

fn bytes_v(ptr: *mut u8, counts: *mut u64, displs: *mut u64) -> VBuf {
    VBuf {
        ptr,
        counts: Ints::Wide(counts as *const i64),
        displs: Ints::Wide(displs as *const i64),
        dt: Datatype::BYTE,
    }
}

impl Access {
    fn get(&self, k: usize) -> u64 {
        // SAFETY: a word of the region (see `word`), not in use by a collective in flight when
        // read.
        unsafe { *self.word(k) }
    }

    fn set(&self, k: usize, v: u64) {
        // SAFETY: as for `get`.
        unsafe { *self.word(k) = v }
    }

    /// Posts the agreement on `mine` (largest over the members into the second flag word).
    fn agree(&mut self, e: &mut Engine, mine: u64, then: Step) -> Result<()> {
        self.set(self.region.flag_in(), mine);
        let call = Call::Allreduce {
            send: Some(self.word(self.region.flag_in()).cast_const().cast()),
            recv: self.word(self.region.flag_out()).cast(),
            count: 1,
            dt: Datatype::UINT64_T,
            op: Op::Max,
        };
        // SAFETY: two words of the scratch region, kept with the access.
        self.inner = Some(unsafe { post(e, self.comm, call)? });
        self.step = then;
        Ok(())
    }

    /// Posts the exchange of round sizes (after computing this member's into OUT).
    fn begin_round(&mut self, e: &mut Engine) -> Result<()> {
        let (id, round, dir, arr) = (self.file, self.round, self.dir, self.arr);
        let st = self.state.as_mut().ok_or_else(stalled)?;
        match dir {
            Dir::Write => st.write_sizes(e, id, round)?,
            Dir::Read => st.read_sizes(e, id, round)?,
        }
        let call = Call::Alltoall {
            send: Some(words(arr.at(OUT), 2)),
            recv: words(arr.at(IN), 2),
        };
        // SAFETY: the OUT and IN arrays of the scratch region, kept with the access.
        self.inner = Some(unsafe { post(e, self.comm, call)? });
        self.step = Step::Sizes;
        Ok(())
    }

    /// Posts a read round's replies (laid out by SC/SD out, RC/RD in).
    fn post_replies(&mut self, e: &mut Engine) -> Result<()> {
        let arr = self.arr;
        let [_, _, Some(ys), Some(yr)] = &mut self.bufs else {
            return Err(stalled());
        };
        let call = Call::Alltoallv {
            send: Some(bytes_v(ys.bytes().as_mut_ptr(), arr.at(SC), arr.at(SD))),
            recv: bytes_v(yr.bytes().as_mut_ptr(), arr.at(RC), arr.at(RD)),
        };
        // SAFETY: the round's reply buffers, kept with the access.
        self.inner = Some(unsafe { post(e, self.comm, call)? });
        self.step = Step::Replies;
        Ok(())
    }

    /// The next round, or the agreement on the outcome after the last.
    fn next_round(&mut self, e: &mut Engine) -> Result<()> {
        self.bufs = [None, None, None, None];
        self.round += 1;
        if self.round < self.rounds {
            return self.begin_round(e);
        }
        let mine = self
            .state
            .as_ref()
            .and_then(|s| s.err.as_ref())
            .map_or(0, |err| err.class.code() as u64);
        self.agree(e, mine, Step::Outcome)
    }
}

/// Hands the aggregator's window access (`run` of the file, from or into the window) to the
/// platform's background transfers; `None` when it has none (the caller does it at once).
///
/// # Safety
/// `win` stays valid for `run.len` bytes until the transfer is over.
unsafe fn window_io(
    e: &Engine,
    st: &State,
    write: bool,
    win: &mut [u8],
    run: Run,
) -> Result<Option<Ticket>> {
    let fs = file_system(e)?;
    // SAFETY: the caller's contract.
    match unsafe { fs.submit(st.fd, write, win.as_mut_ptr(), &[run]) } {
        None => Ok(None),
        Some(Ok(t)) => Ok(Some(t)),
        Some(Err(err)) => Err(err.to_error("starting an aggregator's file access")),
    }
}

fn stalled() -> Error {
    Error::new(
        ErrorClass::Intern,
        crate::error::Reason::BadArgument {
            what: "a non-blocking collective file access lost its state",
        },
    )
}

/// Takes access `a` as far as it can go now: the bytes moved once it is over, `None` while it
/// waits (for [`Access::inner`]).
fn advance(e: &mut Engine, a: &mut Access) -> Result<Option<u64>> {
    loop {
        if let Some(t) = a.ticket {
            let Some(r) = file_system(e)?.poll(t) else {
                return Ok(None);
            };
            a.ticket = None;
            a.window_io = Some(r);
        }
        if let Some(r) = a.inner {
            let Some(st) = e.p2p.pml.requests_mut().test(r)? else {
                return Ok(None);
            };
            a.inner = None;
            if let Some(err) = st.error {
                return Err(err);
            }
            if a.step == Step::Own {
                return Ok(Some(st.bytes));
            }
        }
        match a.step {
            Step::Queued => {
                let mine = a.region.mine();
                for (k, w) in a.words.iter().enumerate() {
                    a.set(mine + k, *w);
                }
                let bad = a.bad.as_ref().map_or(0, |err| err.class.code() as u64);
                a.set(mine + 4, bad);
                let call = Call::Allgather {
                    send: Some(words(a.word(mine), GATHERED as u64)),
                    recv: words(a.word(a.region.gathered()), GATHERED as u64),
                };
                // SAFETY: words of the scratch region, kept with the access.
                a.inner = Some(unsafe { post(e, a.comm, call)? });
                a.step = Step::Gather;
            }
            Step::Gather => {
                if let Some(done) = gathered(e, a)? {
                    return Ok(Some(done));
                }
            }
            Step::Own => return Err(stalled()),
            Step::Sizes => {
                let st = a.state.as_ref().ok_or_else(stalled)?;
                let sizes: [usize; 4] = match a.dir {
                    Dir::Write => {
                        let (ns, nr) = st.layout(0, 0);
                        [ns, nr, 0, 0]
                    }
                    Dir::Read => {
                        let (nq, nqr) = st.layout(0, 0);
                        let (rs, rr) = st.reply_sizes();
                        [nq, nqr, rs as usize, rr as usize]
                    }
                };
                let used = match a.dir {
                    Dir::Write => 2,
                    Dir::Read => 4,
                };
                let mut ok = a.my_agg.is_none() || a.window.is_some();
                for (k, n) in sizes.iter().enumerate().take(used) {
                    a.bufs[k] = Scratch::new(e, *n);
                    ok &= a.bufs[k].is_some();
                }
                let flag = if ok {
                    0
                } else {
                    ErrorClass::NoMem.code() as u64
                };
                a.agree(e, flag, Step::Room)?;
            }
            Step::Room => {
                if a.get(a.region.flag_out()) != 0 {
                    a.bufs = [None, None, None, None];
                    return Err(twophase::nomem());
                }
                let (id, round, arr) = (a.file, a.round, a.arr);
                let Access {
                    state, bufs, conv, ..
                } = a;
                let st = state.as_mut().ok_or_else(stalled)?;
                let [Some(out), Some(inb), ..] = bufs else {
                    return Err(stalled());
                };
                let ob = out.bytes();
                match (a.dir, conv) {
                    (Dir::Write, Some(Conv::Pack(pk))) => st.fill_write(e, id, round, ob, pk)?,
                    (Dir::Read, _) => {
                        for g in 0..st.naggs {
                            st.records(e, id, g, round, ob)?;
                        }
                    }
                    _ => return Err(stalled()),
                }
                let call = Call::Alltoallv {
                    send: Some(bytes_v(ob.as_mut_ptr(), arr.at(SC), arr.at(SD))),
                    recv: bytes_v(inb.bytes().as_mut_ptr(), arr.at(RC), arr.at(RD)),
                };
                // SAFETY: the round's buffers laid out by the arrays, kept with the access.
                a.inner = Some(unsafe { post(e, a.comm, call)? });
                a.step = Step::Pieces;
            }
            Step::Pieces => {
                let (round, my_agg) = (a.round, a.my_agg);
                let Access {
                    state,
                    bufs,
                    window,
                    ..
                } = a;
                let st = state.as_mut().ok_or_else(stalled)?;
                let win: &mut [u8] = window.as_mut().map_or(&mut [], |w| w.bytes());
                match a.dir {
                    Dir::Write => {
                        bufs[0] = None;
                        if st.has_window(my_agg, round) {
                            let rb = bufs[1].as_mut().ok_or_else(stalled)?.bytes();
                            match st.fill_window(e, rb, win) {
                                Ok(Some(f)) => {
                                    let run = Run {
                                        off: f.lo,
                                        len: f.len,
                                    };
                                    // SAFETY: the window stays with the access until the
                                    // transfer is over (`ticket`).
                                    match unsafe { window_io(e, st, true, win, run) } {
                                        Ok(Some(t)) => {
                                            a.filled = Some(f);
                                            a.ticket = Some(t);
                                            a.step = Step::Window;
                                            continue;
                                        }
                                        Err(err) => {
                                            st.unlock(e, f);
                                            st.err.get_or_insert(err);
                                        }
                                        Ok(None) => {
                                            let r = file_system(e)?
                                                .write_at(st.fd, &win[..f.len as usize], f.lo)
                                                .map_err(|err| err.to_error("file access"));
                                            st.unlock(e, f);
                                            if let Err(err) = r {
                                                st.err.get_or_insert(err);
                                            }
                                        }
                                    }
                                }
                                Ok(None) => {}
                                Err(err) => {
                                    st.err.get_or_insert(err);
                                }
                            }
                        }
                        a.next_round(e)?;
                    }
                    Dir::Read => {
                        st.reply_layout();
                        let [_, Some(qr), Some(ys), Some(_)] = bufs else {
                            return Err(stalled());
                        };
                        if st.has_window(my_agg, round) {
                            let (lo, hi) = st.read_span(qr.bytes());
                            if lo < hi {
                                let run = Run {
                                    off: lo,
                                    len: hi - lo,
                                };
                                // SAFETY: as for the write window.
                                match unsafe { window_io(e, st, false, win, run) } {
                                    Ok(Some(t)) => {
                                        a.ticket = Some(t);
                                        a.step = Step::Window;
                                        continue;
                                    }
                                    Ok(None) => {
                                        if let Err(err) =
                                            st.read_window(e, qr.bytes(), ys.bytes(), win)
                                        {
                                            st.err.get_or_insert(err);
                                        }
                                    }
                                    Err(err) => {
                                        st.err.get_or_insert(err);
                                    }
                                }
                            }
                        }
                        a.post_replies(e)?;
                    }
                }
            }
            Step::Window => {
                let r = a.window_io.take().ok_or_else(stalled)?;
                let (dir, my_agg, round) = (a.dir, a.my_agg, a.round);
                let Access {
                    state,
                    bufs,
                    window,
                    filled,
                    ..
                } = a;
                let st = state.as_mut().ok_or_else(stalled)?;
                match dir {
                    Dir::Write => {
                        if let Some(f) = filled.take() {
                            st.unlock(e, f);
                        }
                        if let Err(err) = r {
                            st.err.get_or_insert(err.to_error("file access"));
                        }
                        a.next_round(e)?;
                    }
                    Dir::Read => {
                        let [_, Some(qr), Some(ys), Some(_)] = bufs else {
                            return Err(stalled());
                        };
                        let win: &[u8] = window.as_mut().map_or(&[], |w| &*w.bytes());
                        let (lo, _) = st.read_span(qr.bytes());
                        match r {
                            Ok(got) if st.has_window(my_agg, round) => {
                                st.replies(qr.bytes(), ys.bytes(), win, lo, got)
                            }
                            Ok(_) => {}
                            Err(err) => {
                                st.err.get_or_insert(err.to_error("file access"));
                            }
                        }
                        a.post_replies(e)?;
                    }
                }
            }
            Step::Replies => {
                let (id, round) = (a.file, a.round);
                let Access {
                    state, bufs, conv, ..
                } = a;
                let st = state.as_mut().ok_or_else(stalled)?;
                let (Some(yr), Some(Conv::Unpack(up))) = (bufs[3].as_mut(), conv) else {
                    return Err(stalled());
                };
                st.unpack_replies(e, id, round, yr.bytes(), up)?;
                a.next_round(e)?;
            }
            Step::Outcome => {
                let worst = a.get(a.region.flag_out());
                let st = a.state.as_mut().ok_or_else(stalled)?;
                let moved = match a.dir {
                    Dir::Write => st.total,
                    Dir::Read => st.moved,
                };
                return match (st.err.take(), worst) {
                    (_, 0) => Ok(Some(moved)),
                    (Some(err), _) => Err(err),
                    (None, c) => Err(super::remote_error(
                        c as i32,
                        "an aggregator's file access failed in a collective access",
                    )),
                };
            }
        }
    }
}

/// After the gather: the outcome when the access ends here (a member's error, or this
/// member's own access done at once), else `None` with the next step posted.
fn gathered(e: &mut Engine, a: &mut Access) -> Result<Option<u64>> {
    let p = a.arr.p;
    let g = a.region.gathered();
    let worst = (0..p)
        .map(|r| a.get(g + GATHERED * r + 4))
        .max()
        .unwrap_or(0);
    if worst != 0 {
        return Err(a.bad.take().unwrap_or_else(|| {
            super::remote_error(worst as i32, "another member's collective access failed")
        }));
    }
    let (hints, atomic, fd) = {
        let f = e.io.get(a.file)?;
        (f.hints, f.atomic, f.fd)
    };
    let of = |r: usize| core::array::from_fn(|k| a.get(g + GATHERED * r + k));
    let Some((lo, hi)) = twophase::choose(p, &of, &hints, a.dir, atomic) else {
        // SAFETY: MPI's rule for the buffer, until the user's request completes.
        return match unsafe { super::background::start(e, a.file, a.dir, a.start, a.mem)? } {
            Some((r, _)) => {
                a.inner = Some(r);
                a.step = Step::Own;
                Ok(None)
            }
            // SAFETY: as above.
            None => unsafe { super::transfer(e, a.file, a.dir, a.start, a.mem) }.map(Some),
        };
    };
    let (plan, rounds): (Plan, u64) = twophase::domains(lo, hi, a.naggs, &hints);
    // Its failure is agreed with the first round's buffers.
    a.window = match a.my_agg {
        Some(_) => Scratch::new(e, plan.cb as usize),
        None => None,
    };
    a.state = Some(State {
        arr: a.arr,
        p,
        plan,
        naggs: a.naggs,
        start: a.start,
        total: a.words[2],
        fd,
        err: None,
        moved: 0,
    });
    a.rounds = rounds;
    a.round = 0;
    if rounds == 0 {
        a.agree(e, 0, Step::Outcome)?;
    } else {
        a.begin_round(e)?;
    }
    Ok(None)
}
