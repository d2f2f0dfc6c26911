//! The schedule executor: runs a collective's algorithm one step at a time over the PML.
//!
//! In the manner of libNBC, but without materialising a schedule: an algorithm ([`Alg`]) is a
//! small state struct that, asked for step `k`, yields that step's actions into a bounded list
//! ([`Acts`]). The executor runs the step's local actions (copies, reductions) at once, in order,
//! then posts its receives and sends through the PML, and moves to step `k + 1` when they have
//! all completed. So a step's local actions see the data of the previous step's receives, and its
//! sends see the result of its local actions. A step without communication is followed at once.
//!
//! Reductions run segment by segment ([`Segs`]): the element range of the whole vector is cut into
//! pieces that fit the collective's scratch, and the algorithm is built anew for each piece.
//! Derived datatypes whose elements are all one predefined type are reduced in a packed working
//! form: each segment's input is converted into scratch before the algorithm runs, and its result
//! converted back after.
//!
//! Nothing here blocks: [`Coll::advance`] does what can be done now and says whether the
//! collective has finished. Blocking collectives call it in a progress loop; non-blocking ones are
//! advanced by [`crate::engine::Engine::progress`].

use core::mem::MaybeUninit;
use core::ptr::NonNull;

use heapless::Vec;

use super::alg::Alg;
use super::red::RedPlan;
use crate::comm::CommId;
use crate::datatype::convertor::{Packer, Unpacker};
use crate::datatype::table::TypeTable;
use crate::datatype::Datatype;
use crate::error::{Error, Result};
use crate::op::{self, Op};
use crate::p2p::P2p;
use crate::pml::request::{ReqId, SendMode, Source};

/// Most actions one step may yield.
pub(crate) const MAX_ACTS: usize = 64;
/// Peers one step of a linear algorithm addresses (a send and a receive each, within
/// [`MAX_ACTS`], with room for a copy).
pub(crate) const BATCH: u32 = 30;

/// `count` instances of `dt` at `ptr`: a user buffer, a block of one, or scratch.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub ptr: *mut u8,
    pub count: u64,
    pub dt: Datatype,
}

impl Span {
    pub(crate) fn new(ptr: *mut u8, count: u64, dt: Datatype) -> Span {
        Span { ptr, count, dt }
    }

    /// `len` raw bytes (packed staging on communicators of one architecture).
    pub(crate) fn bytes(ptr: *mut u8, len: u64) -> Span {
        Span {
            ptr,
            count: len,
            dt: Datatype::BYTE,
        }
    }

    /// Nothing (barrier messages).
    pub(crate) fn empty() -> Span {
        Span::bytes(NonNull::dangling().as_ptr(), 0)
    }
}

/// One action of a step.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Act {
    /// Send a span to a rank.
    Send(u32, Span),
    /// Receive a span from a rank.
    Recv(u32, Span),
    /// `inout = input op inout` over `n` elements of the working form.
    Reduce {
        inout: *mut u8,
        input: *const u8,
        n: u64,
    },
    /// Copy `src`'s data into `dst` (same packed size; the types may differ).
    Copy { dst: Span, src: Span },
    /// Copy `len` packed bytes of `src` from stream offset `sp` into `dst` at stream offset `dp`.
    CopyRange {
        dst: Span,
        dp: u64,
        src: Span,
        sp: u64,
        len: u64,
    },
}

/// The actions of one step, bounded. (Uninitialised storage: a step is asked for often, and
/// most yield two or three actions.)
pub(crate) struct Acts {
    buf: [MaybeUninit<Act>; MAX_ACTS],
    len: usize,
    pub overflow: bool,
}

impl Acts {
    pub(crate) fn new() -> Acts {
        Acts {
            buf: [const { MaybeUninit::uninit() }; MAX_ACTS],
            len: 0,
            overflow: false,
        }
    }

    /// The actions yielded, in order.
    pub(crate) fn list(&self) -> &[Act] {
        // SAFETY: the first `len` entries were written by `push`; `Act` is `Copy`.
        unsafe { core::slice::from_raw_parts(self.buf.as_ptr().cast::<Act>(), self.len) }
    }

    fn push(&mut self, a: Act) {
        match self.buf.get_mut(self.len) {
            Some(slot) => {
                slot.write(a);
                self.len += 1;
            }
            None => self.overflow = true,
        }
    }

    pub(crate) fn send(&mut self, to: u32, s: Span) {
        self.push(Act::Send(to, s));
    }

    pub(crate) fn recv(&mut self, from: u32, s: Span) {
        self.push(Act::Recv(from, s));
    }

    pub(crate) fn reduce(&mut self, inout: *mut u8, input: *const u8, n: u64) {
        if n > 0 && !core::ptr::eq(inout, input) {
            self.push(Act::Reduce { inout, input, n });
        }
    }

    pub(crate) fn copy_range(&mut self, dst: Span, dp: u64, src: Span, sp: u64, len: u64) {
        if len > 0 {
            self.push(Act::CopyRange {
                dst,
                dp,
                src,
                sp,
                len,
            });
        }
    }

    pub(crate) fn copy(&mut self, dst: Span, src: Span) {
        if !(core::ptr::eq(dst.ptr, src.ptr) && dst.dt == src.dt && dst.count == src.count) {
            self.push(Act::Copy { dst, src });
        }
    }
}

/// A user-defined operation: the platform's caller of the user's function and that function.
#[derive(Clone, Copy, Debug)]
pub struct UserOp {
    /// Calls `func` on `len` elements of `dt`: `inout[i] = input[i] op inout[i]`.
    pub call: unsafe fn(func: usize, input: *const u8, inout: *mut u8, len: i32, dt: Datatype),
    /// The user's function, as the caller knows it.
    pub func: usize,
    /// Whether the operation commutes.
    pub commute: bool,
}

/// An operation resolved for a collective.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ROp {
    Predef(Op),
    User(UserOp),
}

impl ROp {
    pub(crate) fn commutes(&self) -> bool {
        match self {
            ROp::Predef(o) => o.is_commutative(),
            ROp::User(u) => u.commute,
        }
    }
}

/// The working form of a reduction: elements of `w`, `ext` bytes apart.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Red {
    pub op: ROp,
    pub w: Datatype,
    pub ext: isize,
    /// Where the data of an element starts, from its base (user-defined types).
    pub true_lb: isize,
    /// Bytes from the first to the last byte of one element's data.
    pub true_ext: isize,
    /// Packed bytes of one element.
    pub size: u64,
}

impl Red {
    /// Scratch bytes `n` elements need.
    pub(crate) fn bytes(&self, n: u64) -> usize {
        if n == 0 {
            0
        } else {
            (n as usize - 1) * self.ext as usize + self.true_ext as usize
        }
    }

    /// The element base for scratch at `p` (so that the data starts at `p`).
    pub(crate) fn base(&self, p: *mut u8) -> *mut u8 {
        p.wrapping_offset(-self.true_lb)
    }

    /// Element `i` from `base`.
    pub(crate) fn at(&self, base: *mut u8, i: u64) -> *mut u8 {
        base.wrapping_offset(i as isize * self.ext)
    }

    /// A span of `n` elements at `base`.
    pub(crate) fn span(&self, base: *mut u8, n: u64) -> Span {
        Span::new(base, n, self.w)
    }

    /// Runs `inout = input op inout` over `n` elements.
    ///
    /// # Safety
    /// Both pointers are bases of `n` elements of the working form, readable (and `inout`
    /// writable), not otherwise in use.
    pub(crate) unsafe fn apply(&self, inout: *mut u8, input: *const u8, n: u64) -> Result<()> {
        match self.op {
            ROp::Predef(o) => {
                let len = n as usize * self.ext as usize;
                // SAFETY: the caller's contract; predefined types have no lower-bound offset, and
                // `n` elements at their extent span `len` bytes.
                let (a, b) = unsafe {
                    (
                        core::slice::from_raw_parts_mut(inout, len),
                        core::slice::from_raw_parts(input, len),
                    )
                };
                op::apply(o, self.w, a, b)
            }
            ROp::User(u) => {
                let mut done = 0u64;
                while done < n {
                    let k = (n - done).min(i32::MAX as u64);
                    let off = done as isize * self.ext;
                    // SAFETY: the caller's contract; the user's function reads and writes the
                    // type map of `k` elements from the bases.
                    unsafe {
                        (u.call)(
                            u.func,
                            input.wrapping_offset(off),
                            inout.wrapping_offset(off),
                            k as i32,
                            self.w,
                        )
                    };
                    done += k;
                }
                Ok(())
            }
        }
    }
}

/// Whether `n` instances of `dt` are plain bytes from some offset: that offset.
pub(crate) fn dense(types: &TypeTable, dt: Datatype) -> Option<isize> {
    if dt.is_contiguous() {
        return Some(0);
    }
    let info = types.info(dt).ok()?;
    match (info.dense_at, info.uniform) {
        (Some(at), Some(_)) => Some(at),
        _ => None,
    }
}

/// Packed bytes of one instance of `dt`.
pub(crate) fn type_size(types: &TypeTable, dt: Datatype) -> u64 {
    if dt.is_predefined() {
        dt.size() as u64
    } else {
        types.info(dt).map_or(0, |i| i.size)
    }
}

/// Copies `len` packed bytes of `src`'s data from stream offset `sp` into `dst`'s data from
/// stream offset `dp`.
///
/// # Safety
/// The spans are buffers of their types, readable (`src`) and writable (`dst`), not overlapping
/// in the bytes copied.
pub(crate) unsafe fn copy_stream(
    types: &TypeTable,
    dst: Span,
    dp: u64,
    src: Span,
    sp: u64,
    len: u64,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    if let (Some(a), Some(b)) = (dense(types, dst.dt), dense(types, src.dt)) {
        // SAFETY: the caller's contract; dense instances are `len` plain bytes from the offset.
        unsafe {
            core::ptr::copy(
                src.ptr.wrapping_offset(b).wrapping_add(sp as usize),
                dst.ptr.wrapping_offset(a).wrapping_add(dp as usize),
                len as usize,
            )
        };
        return Ok(());
    }
    // SAFETY: the caller's contract.
    let mut pk = unsafe { Packer::new(src.ptr, src.count, src.dt, types)? };
    // SAFETY: the caller's contract.
    let mut up = unsafe { Unpacker::new(dst.ptr, dst.count, dst.dt, types)? };
    let mut bounce = [0u8; 512];
    let mut off = 0u64;
    while off < len {
        let want = ((len - off) as usize).min(bounce.len());
        let n = pk.pack(types, (sp + off) as usize, &mut bounce[..want]);
        if n == 0 {
            break;
        }
        up.unpack(types, (dp + off) as usize, &bounce[..n]);
        off += n as u64;
    }
    Ok(())
}

/// Most requests one step keeps in flight.
const MAX_PENDING: usize = MAX_ACTS;

/// The segment loop of a reduction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Segs {
    pub plan: RedPlan,
    /// Current segment: elements `a..b` of the whole vector.
    pub a: u64,
    pub b: u64,
}

/// Where a collective's scratch came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scratch {
    None,
    /// The region reserved for blocking collectives.
    Blocking,
    /// A range of the pool for non-blocking collectives.
    Pool {
        start: u32,
        len: u32,
    },
}

/// A later phase of a collective composed of several (intercommunicator collectives): an
/// algorithm planned in advance on a communicator of its own (the intercommunicator, or its local
/// intracommunicator), started when the phase before it has finished at this process.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Phase {
    pub comm: CommId,
    pub tag: i32,
    pub alg: Alg,
    pub red: Option<Red>,
    pub segs: Option<Segs>,
}

/// Most phases after the first.
pub(crate) const MAX_PHASES: usize = 2;
/// Most scratch ranges besides the first phase's (staging and the later phases' own).
pub(crate) const MORE_SCRATCH: usize = 6;

/// One collective in flight.
pub(crate) struct Coll {
    pub comm: CommId,
    pub tag: i32,
    pub alg: Alg,
    pub step: u32,
    pending: Vec<ReqId, MAX_PENDING>,
    pub red: Option<Red>,
    pub segs: Option<Segs>,
    pub err: Option<Error>,
    pub scratch: Scratch,
    /// The user's request (non-blocking collectives).
    pub req: Option<ReqId>,
    /// Derived types held until the collective completes.
    pub holds: [Option<&'static core::sync::atomic::AtomicU32>; 3],
    /// Phases still to run after the current one, in order (`None` once started or unused).
    pub phases: [Option<Phase>; MAX_PHASES],
    /// Scratch of the later phases (released with `scratch` when the collective ends).
    pub more_scratch: [Scratch; MORE_SCRATCH],
    done: bool,
}

impl Coll {
    pub(crate) fn new(comm: CommId, tag: i32, alg: Alg) -> Coll {
        Coll {
            comm,
            tag,
            alg,
            step: 0,
            pending: Vec::new(),
            red: None,
            segs: None,
            err: None,
            scratch: Scratch::None,
            req: None,
            holds: [None; 3],
            phases: [None; MAX_PHASES],
            more_scratch: [Scratch::None; MORE_SCRATCH],
            done: false,
        }
    }

    /// Every scratch range the collective holds.
    pub(crate) fn scratches(&self) -> impl Iterator<Item = Scratch> + '_ {
        core::iter::once(self.scratch).chain(self.more_scratch.iter().copied())
    }

    /// Starts the next phase, if there is one; false when the collective has none left.
    fn next_phase(&mut self, types: &TypeTable) -> Result<bool> {
        let Some(ph) = self.phases.iter_mut().find_map(Option::take) else {
            return Ok(false);
        };
        self.comm = ph.comm;
        self.tag = ph.tag;
        self.alg = ph.alg;
        self.red = ph.red;
        self.segs = ph.segs;
        self.step = 0;
        if self.segs.is_some() {
            // Converts the phase's first segment in now that the phases before it have
            // produced its input.
            self.start_segment(types)?;
        }
        Ok(true)
    }

    fn fail(&mut self, net: &mut P2p, e: Error) {
        if self.err.is_none() {
            self.err = Some(e);
        }
        // Receives not yet matched would wait forever for peers that gave up too.
        for id in self.pending.iter() {
            let _ = net.pml.cancel(*id);
        }
        self.done = true;
    }

    /// Does what can be done now; true once the collective has finished.
    pub(crate) fn advance(&mut self, net: &mut P2p) -> bool {
        loop {
            let mut i = 0;
            while i < self.pending.len() {
                match net.pml.requests_mut().test(self.pending[i]) {
                    Ok(None) => i += 1,
                    Ok(Some(st)) => {
                        self.pending.swap_remove(i);
                        if let Some(e) = st.error {
                            self.fail(net, e);
                        }
                    }
                    Err(e) => {
                        self.pending.swap_remove(i);
                        self.fail(net, e);
                    }
                }
            }
            if !self.pending.is_empty() {
                return false;
            }
            if self.done {
                return true;
            }
            if let Err(e) = self.next_step(net) {
                self.fail(net, e);
            }
        }
    }

    /// Starts the next step (or segment); marks the collective done after the last.
    fn next_step(&mut self, net: &mut P2p) -> Result<()> {
        let mut acts = Acts::new();
        let more = self.alg.step(self.step, &mut acts, &net.types);
        self.step += 1;
        if acts.overflow {
            return Err(Error::internal(
                "a collective step yielded more actions than its bound",
            ));
        }
        if !more {
            return self.end_segment(net);
        }
        for a in acts.list().iter() {
            // SAFETY: the algorithm's buffers are the user's (lent for the collective) and the
            // collective's scratch, sized by the plan.
            unsafe { local(&net.types, self.red.as_ref(), a)? };
        }
        for a in acts.list().iter() {
            if let Act::Recv(from, s) = *a {
                // SAFETY: as above; the receive completes before the collective does.
                let conv = unsafe { unpacker(&net.types, s)? };
                let sel = net.sel(self.comm, Source::Rank(from), self.tag)?;
                let id = net.irecv(&sel, conv, 0)?;
                self.track(id)?;
            }
        }
        for a in acts.list().iter() {
            if let Act::Send(to, s) = *a {
                // SAFETY: as above; the send completes before the collective does.
                let conv = unsafe { packer(&net.types, s)? };
                let d = net.dest(self.comm, to)?;
                if let Some(id) = net.send(&d, self.tag, conv, SendMode::Standard, 0)? {
                    self.track(id)?;
                }
            }
        }
        Ok(())
    }

    fn track(&mut self, id: ReqId) -> Result<()> {
        self.pending
            .push(id)
            .map_err(|_| Error::internal("a collective step posted more requests than its bound"))
    }

    /// The algorithm has finished its steps: converts a reduction segment's result out, starts
    /// the next segment if there is one, else marks the collective done.
    fn end_segment(&mut self, net: &mut P2p) -> Result<()> {
        let Some(mut s) = self.segs else {
            self.done = !self.next_phase(&net.types)?;
            return Ok(());
        };
        // SAFETY: the plan's buffers are the user's and the collective's scratch.
        unsafe { s.plan.convert_out(&net.types, s.a, s.b)? };
        if s.b >= s.plan.total {
            self.done = !self.next_phase(&net.types)?;
            return Ok(());
        }
        s.a = s.b;
        s.b = (s.a + s.plan.per).min(s.plan.total);
        self.segs = Some(s);
        self.start_segment(&net.types)
    }

    /// Builds the algorithm of the current segment (converting its input in).
    pub(crate) fn start_segment(&mut self, types: &TypeTable) -> Result<()> {
        let Some(s) = self.segs else { return Ok(()) };
        // SAFETY: as above.
        unsafe { s.plan.convert_in(types, s.a, s.b)? };
        self.alg = s.plan.segment(s.a, s.b);
        self.step = 0;
        Ok(())
    }
}

/// A packer over a span.
///
/// # Safety
/// The span's data stays readable and unchanged until the send completes.
pub(crate) unsafe fn packer(types: &TypeTable, s: Span) -> Result<Packer> {
    if s.dt.is_contiguous() {
        // SAFETY: the caller's contract.
        Ok(unsafe { Packer::elements(s.ptr, s.count as usize, s.dt) })
    } else {
        // SAFETY: the caller's contract.
        unsafe { Packer::new(s.ptr, s.count, s.dt, types) }
    }
}

/// Does `a` if it is local work (a copy or a reduction); sends and receives are the caller's.
///
/// # Safety
/// The spans and pointers of `a` are buffers the collective may read and write now.
pub(crate) unsafe fn local(types: &TypeTable, red: Option<&Red>, a: &Act) -> Result<()> {
    match *a {
        // SAFETY: the caller's contract.
        Act::Copy { dst, src } => unsafe {
            let len = src.count * type_size(types, src.dt);
            copy_stream(types, dst, 0, src, 0, len)
        },
        // SAFETY: the caller's contract.
        Act::CopyRange {
            dst,
            dp,
            src,
            sp,
            len,
        } => unsafe { copy_stream(types, dst, dp, src, sp, len) },
        Act::Reduce { inout, input, n } => {
            let red = red.ok_or(Error::internal("reduction step without an operation"))?;
            // SAFETY: the caller's contract.
            unsafe { red.apply(inout, input, n) }
        }
        Act::Send(..) | Act::Recv(..) => Ok(()),
    }
}

/// An unpacker over a span.
///
/// # Safety
/// The span's data stays writable and otherwise unused until the receive completes.
pub(crate) unsafe fn unpacker(types: &TypeTable, s: Span) -> Result<Unpacker> {
    if s.dt.is_contiguous() {
        // SAFETY: the caller's contract.
        Ok(unsafe { Unpacker::elements(s.ptr, s.count as usize, s.dt) })
    } else {
        // SAFETY: the caller's contract.
        unsafe { Unpacker::new(s.ptr, s.count, s.dt, types) }
    }
}
