//! A network's own one-sided operations (Open MPI's `osc/portals4`, and its `osc/rdma` over the
//! BTLs' put/get/atomics): the platform ([`crate::platform::Platform::rdma`]) or a BTL
//! ([`crate::btl::Btl::rdma`]) offers them and a window whose peers suit them moves its data
//! with them instead of active messages.
//!
//! The contract is Portals 4's: each process *exposes* its window memory under a key every member
//! agrees on (the hidden communicator's context id), at offsets from the window's start, so no
//! address travels. An origin's operation names the peer's process, the key and the offset; the
//! network applies it without the target's MPI library (on a NIC; the software NI applies it in
//! whatever Portals call the target makes next). Each operation adds one to the window's *counter*
//! when it is complete at the target (put and atomic: acknowledged; get and fetching atomics: the
//! reply is in), so a flush is "the counter reached what was issued".
//!
//! Which operations go this way (decided by the origin, the same for every process of the
//! window, see [`atomic_of`]): puts and gets between one dense run of memory on each side;
//! accumulates, fetch-and-ops and compare-and-swaps whose (operation, element type) the network
//! has as an atomic ([`Rdma::has_atomic`]; verbs: 8-byte sums and compare-and-swap only, at
//! 8-byte-aligned targets) — with dense buffers, or through derived types as one atomic per run of the
//! target type (`strided`), so each such pair always goes this way. Everything else stays an
//! active message.
//!
//! A network whose origins need more than the key to reach a part (verbs: the part's address and
//! rkey) gives each exposure a *card* ([`Rdma::card`]) that window creation gathers from every
//! member and hands to the origin's counter ([`Rdma::learn`]).

use super::origin::{Buffer, RmaOp, Target};
use super::{sync_err, WinId};
use crate::datatype::{Datatype, Scalar};
use crate::engine::Engine;
use crate::error::Result;
use crate::op::Op;
use crate::pml::request::{ReqId, Status};
use crate::shared::Inside;

/// Network operations an origin keeps in flight on one window before it waits for some.
const MAX_IN_FLIGHT: u64 = 1024;

/// The element of a network atomic: signed, unsigned or IEEE float, of 1, 2, 4 or 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// Signed integer of that many bytes.
    Int(u8),
    /// Unsigned integer of that many bytes.
    Uint(u8),
    /// IEEE float of that many bytes (4 or 8).
    Float(u8),
}

impl Elem {
    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            Elem::Int(n) | Elem::Uint(n) | Elem::Float(n) => n as usize,
        }
    }
}

/// A network atomic's operation (Portals' `ptl_op_t` minus the compare family, which
/// [`Rdma::compare_swap`] is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Logical or.
    Lor,
    /// Logical and.
    Land,
    /// Logical exclusive or.
    Lxor,
    /// Bitwise or.
    Bor,
    /// Bitwise and.
    Band,
    /// Bitwise exclusive or.
    Bxor,
    /// Replace (`MPI_REPLACE`).
    Swap,
}

/// The element of `dt` as a network atomic sees it, if it has one.
pub fn elem_of(dt: Datatype) -> Option<Elem> {
    match dt.scalar() {
        Scalar::Int(n) | Scalar::FortranInt(n) if matches!(n, 1 | 2 | 4 | 8) => Some(Elem::Int(n)),
        Scalar::Uint(n) if matches!(n, 1 | 2 | 4 | 8) => Some(Elem::Uint(n)),
        // Raw bytes and characters: only bitwise operations, replace and compare-and-swap are
        // defined on them, which are the same on unsigned bytes.
        Scalar::Byte | Scalar::Char if dt.extent() == 1 => Some(Elem::Uint(1)),
        Scalar::Float(n) if matches!(n, 4 | 8) => Some(Elem::Float(n)),
        _ => None,
    }
}

/// The network atomic for accumulating with `op` on elements of `dt`, if there is one. This is a
/// function of (op, type) alone, so every accumulate of one pair goes the same way on every
/// process: the standard's atomicity (same op, same type) never mixes a network atomic with an
/// accumulate applied by the target's library.
pub fn atomic_of(op: Op, dt: Datatype) -> Option<(AtomicOp, Elem)> {
    let e = elem_of(dt)?;
    let float = matches!(e, Elem::Float(_));
    let a = match op {
        Op::Min => AtomicOp::Min,
        Op::Max => AtomicOp::Max,
        Op::Sum => AtomicOp::Sum,
        Op::Prod => AtomicOp::Prod,
        Op::Replace => AtomicOp::Swap,
        Op::Lor if !float => AtomicOp::Lor,
        Op::Land if !float => AtomicOp::Land,
        Op::Lxor if !float => AtomicOp::Lxor,
        Op::Bor if !float => AtomicOp::Bor,
        Op::Band if !float => AtomicOp::Band,
        Op::Bxor if !float => AtomicOp::Bxor,
        _ => return None,
    };
    if matches!(dt.scalar(), Scalar::Byte | Scalar::Char)
        && !matches!(
            a,
            AtomicOp::Swap | AtomicOp::Bor | AtomicOp::Band | AtomicOp::Bxor
        )
    {
        return None;
    }
    Some((a, e))
}

/// The network atomic for accumulating with `op` on elements of `dt` over `net`: [`atomic_of`]
/// when the network has it.
pub fn net_atomic(net: &dyn Rdma, op: Op, dt: Datatype) -> Option<(AtomicOp, Elem)> {
    atomic_of(op, dt).filter(|&(a, e)| net.has_atomic(a, e))
}

/// A network's one-sided operations, as the platform or a BTL offers them.
///
/// Offsets are bytes from the start of what the peer exposed under the key; a process is its
/// job-wide index (`ProcId`). Every initiating call that returns `Ok` adds exactly one to
/// `counter` once the operation is complete at the target (success or failure).
pub trait Rdma: Sync {
    /// Bytes one atomic may carry (larger accumulates are several).
    fn max_atomic(&self) -> usize;

    /// Whether the network has `op` on `elem` as an atomic (default: every pair [`atomic_of`]
    /// names, as Portals has). A function of the pair alone, the same on every process.
    fn has_atomic(&self, op: AtomicOp, elem: Elem) -> bool {
        let _ = (op, elem);
        true
    }

    /// Whether the network has compare-and-swap on `elem` (default: yes).
    fn has_compare_swap(&self, elem: Elem) -> bool {
        let _ = elem;
        true
    }

    /// Whether a get is atomic with the network's atomics, so `MPI_NO_OP` may be one (default:
    /// yes, as a Portals get is ordered with its atomics).
    fn atomic_get(&self) -> bool {
        true
    }

    /// The alignment, in bytes of a part's offset, that the network's atomics need (default 1).
    fn atomic_align(&self) -> u64 {
        1
    }

    /// Whether the network reaches process `proc` (default: every process).
    fn reaches(&self, proc: u32) -> bool {
        let _ = proc;
        true
    }

    /// What origins need, besides the key, to reach exposure `handle` (`None`: an empty part):
    /// a 32-bit and a 64-bit word (verbs: the rkey and the address; default: nothing).
    fn card(&self, handle: Option<u64>) -> (u32, u64) {
        let _ = handle;
        (0, 0)
    }

    /// Tells counter `ct`'s window the card of process `proc`'s exposure (default: ignored).
    fn learn(&self, ct: u64, proc: u32, card: (u32, u64)) -> Result<()> {
        let _ = (ct, proc, card);
        Ok(())
    }

    /// Exposes `len` bytes at `base` to peers' operations under `key`; returns what
    /// [`Rdma::withdraw`] takes.
    fn expose(&self, key: u64, base: *mut u8, len: usize) -> Result<u64>;

    /// Ends exposure `handle` (no operation is in flight to it: the window's last barrier).
    fn withdraw(&self, handle: u64);

    /// A new counter for one window's operations.
    fn counter(&self) -> Result<u64>;

    /// Frees counter `ct` (nothing counted on it is in flight).
    fn release_counter(&self, ct: u64);

    /// How many operations counted on `ct` completed; an error if any failed.
    fn completed(&self, ct: u64) -> Result<u64>;

    /// Writes `len` bytes from `src` at `off` of `key` at `proc`.
    ///
    /// # Safety
    /// `src..src+len` stays readable and unchanged until the operation is counted.
    unsafe fn put(
        &self,
        ct: u64,
        proc: u32,
        key: u64,
        off: u64,
        src: *const u8,
        len: usize,
    ) -> Result<()>;

    /// Reads `len` bytes at `off` of `key` at `proc` into `dst`.
    ///
    /// # Safety
    /// `dst..dst+len` stays writable and otherwise untouched until the operation is counted.
    unsafe fn get(
        &self,
        ct: u64,
        proc: u32,
        key: u64,
        off: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<()>;

    /// Combines the `len` bytes of elements at `src` into those at `off` with `op`, atomically
    /// element by element (`len` at most [`Rdma::max_atomic`]); with `fetch`, the old contents
    /// go there first.
    ///
    /// # Safety
    /// `src` (and `fetch`) hold `len` bytes and stay as for `put` (and `get`) until counted.
    #[allow(clippy::too_many_arguments)]
    unsafe fn atomic(
        &self,
        ct: u64,
        proc: u32,
        key: u64,
        off: u64,
        src: *const u8,
        fetch: Option<*mut u8>,
        len: usize,
        op: AtomicOp,
        elem: Elem,
    ) -> Result<()>;

    /// Compares the element at `off` with `compare`, replaces it with `new` when equal, and
    /// returns the old value into `old`, atomically.
    ///
    /// # Safety
    /// Each pointer holds one element and stays as for `put`/`get` until counted.
    #[allow(clippy::too_many_arguments)]
    unsafe fn compare_swap(
        &self,
        ct: u64,
        proc: u32,
        key: u64,
        off: u64,
        new: *const u8,
        compare: *const u8,
        old: *mut u8,
        elem: Elem,
    ) -> Result<()>;
}

/// What an operation does on the network, once [`plan`] checked it.
#[derive(Clone, Copy, Debug)]
enum Plan {
    Put {
        src: *const u8,
    },
    Get {
        dst: *mut u8,
    },
    Atomic {
        src: *const u8,
        fetch: Option<*mut u8>,
        op: AtomicOp,
        elem: Elem,
    },
    Cas {
        new: *const u8,
        compare: *const u8,
        old: *mut u8,
        elem: Elem,
    },
}

/// Starts `op` on the network when window `id` uses it and the operation suits it (see the
/// module's description): `None` leaves it to active messages, which also report every error.
/// A request-based operation (`user`) completes before its request is handed back.
pub(super) fn issue(
    cx: &mut Inside,
    id: WinId,
    op: RmaOp,
    target: Target,
    user: bool,
) -> Result<Option<Option<ReqId>>> {
    let Some((t, off, len, plan)) = plan(cx.e(), id, op, &target, user)? else {
        let r = strided(cx, id, op, target, user)?;
        if r.is_none() {
            // An active message follows: what the network still carries lands first (the
            // network and the messages may take different paths, e.g. verbs queue pairs).
            let w = cx.e().osc.get_mut(id)?;
            if w.net.is_some_and(|n| n.issued > n.done) && !w.net_settled()? {
                super::sync::wait_net(cx, id)?;
            }
        }
        return Ok(r);
    };
    // Operations from one origin to one target land in order (accumulates by the default
    // `accumulate_ordering`; puts and gets as programs expect of one location): those still
    // travelling as messages arrive first.
    if cx.e().osc.get(id)?.peer(t).dirty {
        super::sync::flush_one(cx, id, t)?;
    }
    // Room for one more in flight.
    let crowded = |e: &mut Engine| -> Result<bool> {
        let w = e.osc.get_mut(id)?;
        Ok(match w.net {
            Some(n) => n.issued - n.done >= MAX_IN_FLIGHT && !w.net_settled()?,
            None => false,
        })
    };
    if crowded(cx.e())? {
        cx.block(|e| Ok((!crowded(e)?).then_some(())))?;
    }
    {
        let w = cx.e().osc.get_mut(id)?;
        let proc_ = w.peer(t).proc_;
        let Some(n) = w.net.as_mut() else {
            return Ok(None);
        };
        let r = n.rdma;
        // SAFETY: the buffers are the user's, lent by MPI until the operation completes, which a
        // flush, unlock, fence or complete waits for (the counter), as does a request-based
        // operation below; `plan` checked that each holds `len` dense bytes.
        unsafe {
            match plan {
                Plan::Put { src } => r.put(n.ct, proc_, n.key, off, src, len)?,
                Plan::Get { dst } => r.get(n.ct, proc_, n.key, off, dst, len)?,
                Plan::Cas {
                    new,
                    compare,
                    old,
                    elem,
                } => r.compare_swap(n.ct, proc_, n.key, off, new, compare, old, elem)?,
                Plan::Atomic {
                    src,
                    fetch,
                    op,
                    elem,
                } => {
                    // Pieces of whole elements, each within the network's bound.
                    let step = (r.max_atomic() / elem.size()).max(1) * elem.size();
                    let mut at = 0;
                    while at < len {
                        let k = step.min(len - at);
                        r.atomic(
                            n.ct,
                            proc_,
                            n.key,
                            off + at as u64,
                            src.wrapping_add(at),
                            fetch.map(|f| f.wrapping_add(at)),
                            k,
                            op,
                            elem,
                        )?;
                        n.issued += 1;
                        at += k;
                    }
                    n.issued -= 1;
                }
            }
        }
        n.issued += 1;
    }
    if !user {
        return Ok(Some(None));
    }
    super::sync::wait_net(cx, id)?;
    cx.e()
        .p2p
        .pml
        .requests_mut()
        .completed(Status::PROC_NULL, 0)
        .map(|r| Some(Some(r)))
}

/// Most description nodes of a target type whose runs [`strided`] walks.
const STRIDED_NODES: usize = 64;

/// An accumulate or get-accumulate whose (op, element type) the network has as an atomic but
/// whose buffers are not that element laid out densely (a derived or strided type): so that
/// every accumulate of the pair still goes by the network's atomics, the origin's data is packed,
/// each run of the target type is one atomic (or several, at `max_atomic`), and the operation is
/// waited for here (a fetch is unpacked into the result buffer then). `None` leaves it to
/// active messages (no network, not such an operation, an error for them to report, or a
/// target type of more than [`STRIDED_NODES`] description nodes).
fn strided(
    cx: &mut Inside,
    id: WinId,
    op: RmaOp,
    target: Target,
    user: bool,
) -> Result<Option<Option<ReqId>>> {
    let (origin, result, how) = match op {
        RmaOp::Acc { origin, op } => (origin, None, op),
        RmaOp::GetAcc { origin, result, op } if op != Op::NoOp => (origin, Some(result), op),
        _ => return Ok(None),
    };
    let e = cx.e();
    let w = e.osc.get(id)?;
    if w.net.is_none() || target.rank < 0 || target.count == 0 {
        return Ok(None);
    }
    let t = target.rank as u32;
    if t >= w.size || !w.may_access(t) || (user && !(w.lock_all || w.peer(t).locked != 0)) {
        return Ok(None);
    }
    let types = &e.p2p.types;
    let Ok(dt) = super::origin::element_type(types, target.ty) else {
        return Ok(None);
    };
    let same = |b: &Buffer| super::origin::element_type(types, b.ty).ok() == Some(dt);
    if !same(&origin) || result.is_some_and(|r| !same(&r)) {
        return Ok(None);
    }
    let Some((a, elem)) = w.net.and_then(|n| net_atomic(n.rdma, how, dt)) else {
        return Ok(None);
    };
    if how != Op::Replace && crate::op::check(how, dt).is_err() {
        return Ok(None);
    }
    let ti = *types.check_committed(target.ty)?;
    let bytes = |b: &Buffer| -> Option<u64> {
        let i = types.check_committed(b.ty).ok()?;
        b.count.checked_mul(i.size)
    };
    let Some(tbytes) = target.count.checked_mul(ti.size) else {
        return Ok(None);
    };
    if tbytes == 0
        || bytes(&origin) != Some(tbytes)
        || result.is_some_and(|r| bytes(&r).is_none_or(|n| n < tbytes))
    {
        return Ok(None);
    }
    let peer = w.peer(t);
    let unit = peer.unit as i128;
    let lo = target.disp as i128 * unit + ti.true_lb as i128;
    let hi = target.disp as i128 * unit
        + (target.count as i128 - 1) * ti.extent as i128
        + ti.true_lb as i128
        + ti.true_extent as i128;
    if lo < 0 || hi > peer.size as i128 {
        return Ok(None);
    }
    let nodes = types.nodes(target.ty)?;
    if nodes.len() > STRIDED_NODES {
        return Ok(None);
    }
    let mut wire: heapless::Vec<super::wire::WireNode, STRIDED_NODES> = heapless::Vec::new();
    for n in nodes {
        let _ = wire.push(super::wire::WireNode::of(n));
    }
    // Every run must start where the network's atomics may go.
    let align = w.net.map_or(1, |n| n.rdma.atomic_align().max(1)) as i128;
    let first = target.disp as i128 * unit;
    if align > 1 {
        let mut fits = first % align == 0;
        let _ = super::apply::walk(&wire, target.count, ti.extent as i64, &mut |off, _| {
            if (first + off as i128) % align != 0 {
                fits = false;
                return Err(super::apply::Fault::Malformed);
            }
            Ok(())
        });
        if !fits {
            return Ok(None);
        }
    }
    if peer.dirty {
        super::sync::flush_one(cx, id, t)?;
    }
    let e = cx.e();
    let Engine { osc, p2p, .. } = e;
    let mem = osc.memory;
    let w = osc.get_mut(id)?;
    let len = tbytes as usize;
    let mut data = w.buffer(mem, len)?;
    let mut fetched = match result {
        Some(_) => match w.buffer(mem, len) {
            Ok(g) => Some(g),
            Err(err) => {
                w.release(mem, data);
                return Err(err);
            }
        },
        None => None,
    };
    let types = &p2p.types;
    // SAFETY: the grant was just taken; the window alone holds it. MPI lends the origin buffer,
    // `count` instances of its type, for the call.
    let packed = unsafe {
        let out = data.bytes(len);
        super::origin::pack_into(types, &origin, out)
    };
    let proc_ = w.peer(t).proc_;
    let base = target.disp as i128 * unit;
    let mut issued = 0u64;
    let mut failure = None;
    if packed == Ok(len) {
        if let Some(n) = w.net.as_ref() {
            let r = n.rdma;
            let step = (r.max_atomic() / elem.size()).max(1) * elem.size();
            let mut pos = 0usize;
            let _ = super::apply::walk(&wire, target.count, ti.extent as i64, &mut |off, run| {
                let mut at = 0;
                while at < run {
                    let k = step.min(run - at);
                    let o = (base + off as i128 + at as i128) as u64;
                    let src = data.ptr.wrapping_add(pos + at) as *const u8;
                    let f = fetched.map(|g| g.ptr.wrapping_add(pos + at));
                    // SAFETY: `src` and `f` are inside the window's grants of `len` bytes (the
                    // runs hold `len` bytes in all), kept until the operations are waited for
                    // below; the target range was checked against the peer's part.
                    if let Err(err) = unsafe { r.atomic(n.ct, proc_, n.key, o, src, f, k, a, elem) }
                    {
                        failure = Some(err);
                        return Err(super::apply::Fault::Malformed);
                    }
                    issued += 1;
                    at += k;
                }
                pos += run;
                Ok(())
            });
        }
    }
    if let Some(n) = w.net.as_mut() {
        n.issued += issued;
    }
    // The grants must outlive every operation issued on them, failed call or not.
    let waited = super::sync::wait_net(cx, id);
    let Engine { osc, p2p, .. } = cx.e();
    let w = osc.get_mut(id)?;
    let mut out = Ok(());
    if let (Some(mut g), Some(r), Ok(()), None, Ok(n)) =
        (fetched, result, &waited, &failure, packed)
    {
        if n == len {
            // SAFETY: the fetches completed into the grant; MPI lends the result buffer,
            // `count` instances of its type, for the call.
            out = unsafe { super::origin::unpack_from(&p2p.types, &r, g.bytes(len)) };
        }
    }
    w.release(mem, data);
    if let Some(g) = fetched.take() {
        w.release(mem, g);
    }
    match packed {
        Ok(n) if n == len => {}
        Ok(_) => return Err(super::origin::size_mismatch()),
        Err(err) => return Err(err),
    }
    if let Some(err) = failure {
        return Err(err);
    }
    waited?;
    out?;
    if !user {
        return Ok(Some(None));
    }
    p2p.pml
        .requests_mut()
        .completed(Status::PROC_NULL, 0)
        .map(|r| Some(Some(r)))
}

/// The network form of `op` on `target`, when there is one: (target rank, byte offset in its
/// part, bytes, plan).
fn plan(
    e: &mut Engine,
    id: WinId,
    op: RmaOp,
    target: &Target,
    user: bool,
) -> Result<Option<(u32, u64, usize, Plan)>> {
    let w = e.osc.get(id)?;
    let Some(net) = w.net.map(|n| n.rdma) else {
        return Ok(None);
    };
    if target.rank < 0 || target.count == 0 {
        return Ok(None);
    }
    let t = target.rank as u32;
    if t >= w.size || !w.may_access(t) {
        return Ok(None);
    }
    if user && !(w.lock_all || w.peer(t).locked != 0) {
        return Err(sync_err(
            "request-based RMA operations are allowed only in passive-target epochs",
        ));
    }
    let types = &e.p2p.types;
    let ti = *types.check_committed(target.ty)?;
    let Some(t_at) = ti.dense_at else {
        return Ok(None);
    };
    let Some(tbytes) = target.count.checked_mul(ti.size) else {
        return Ok(None);
    };
    if tbytes == 0 || tbytes > isize::MAX as u64 {
        return Ok(None);
    }
    let len = tbytes as usize;
    let peer = w.peer(t);
    let lo = target.disp as i128 * peer.unit as i128 + t_at as i128;
    if lo < 0 || lo + len as i128 > peer.size as i128 {
        // Out of range: the general path says so.
        return Ok(None);
    }
    let off = lo as u64;
    // Where the network's atomics may go.
    let aligned = off.is_multiple_of(net.atomic_align().max(1));
    // A buffer's first byte if it holds the target's bytes densely.
    let dense = |b: &Buffer| -> Result<Option<*mut u8>> {
        let i = types.check_committed(b.ty)?;
        Ok(match i.dense_at {
            Some(a) if b.count.checked_mul(i.size) == Some(tbytes) => {
                Some(b.addr.wrapping_offset(a))
            }
            _ => None,
        })
    };
    // The one element type of an accumulate: the target's, predefined, and the origin's too.
    let element = |o: Option<&Buffer>| -> Result<Option<Datatype>> {
        let dt = target.ty;
        if !dt.is_predefined() || o.is_some_and(|b| !b.ty.is_predefined() || b.ty != dt) {
            return Ok(None);
        }
        Ok(Some(dt))
    };
    let plan = match op {
        RmaOp::Put { origin } => match dense(&origin)? {
            Some(src) => Plan::Put { src },
            None => return Ok(None),
        },
        RmaOp::Get { origin } => match dense(&origin)? {
            Some(dst) => Plan::Get { dst },
            None => return Ok(None),
        },
        RmaOp::Acc { origin, op } => {
            let Some(dt) = element(Some(&origin))? else {
                return Ok(None);
            };
            let (Some((a, elem)), Some(src)) = (net_atomic(net, op, dt), dense(&origin)?) else {
                return Ok(None);
            };
            if !aligned || (op != Op::Replace && crate::op::check(op, dt).is_err()) {
                return Ok(None);
            }
            Plan::Atomic {
                src,
                fetch: None,
                op: a,
                elem,
            }
        }
        RmaOp::GetAcc { origin, result, op } => {
            let o = (op != Op::NoOp).then_some(&origin);
            let Some(dt) = element(o)? else {
                return Ok(None);
            };
            if result.ty != dt {
                return Ok(None);
            }
            let Some(res) = dense(&result)? else {
                return Ok(None);
            };
            if op == Op::NoOp {
                // An atomic read: a get (the network applies it in one piece, in order with
                // its atomics).
                if elem_of(dt).is_none() || !net.atomic_get() {
                    return Ok(None);
                }
                Plan::Get { dst: res }
            } else {
                let (Some((a, elem)), Some(src)) = (net_atomic(net, op, dt), dense(&origin)?)
                else {
                    return Ok(None);
                };
                if !aligned || (op != Op::Replace && crate::op::check(op, dt).is_err()) {
                    return Ok(None);
                }
                Plan::Atomic {
                    src,
                    fetch: Some(res),
                    op: a,
                    elem,
                }
            }
        }
        RmaOp::Cas {
            origin,
            compare,
            result,
        } => {
            let dt = target.ty;
            // Compared as unsigned integers of the element's width: MPI compares bytes (a
            // float's compare by value would take 0.0 for -0.0).
            let elem = match elem_of(dt) {
                Some(e) => Elem::Uint(e.size() as u8),
                None => return Ok(None),
            };
            if !aligned || !net.has_compare_swap(elem) {
                return Ok(None);
            }
            if target.count != 1 || result.ty != dt || result.count < 1 {
                return Ok(None);
            }
            Plan::Cas {
                new: origin,
                compare,
                old: result.addr,
                elem,
            }
        }
    };
    Ok(Some((t, off, len, plan)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_ops_have_atomics_and_floats_only_arithmetic_ones() {
        assert_eq!(
            atomic_of(Op::Sum, Datatype::INT),
            Some((AtomicOp::Sum, Elem::Int(4)))
        );
        assert_eq!(
            atomic_of(Op::Bxor, Datatype::UINT64_T),
            Some((AtomicOp::Bxor, Elem::Uint(8)))
        );
        assert_eq!(
            atomic_of(Op::Max, Datatype::DOUBLE),
            Some((AtomicOp::Max, Elem::Float(8)))
        );
        assert_eq!(atomic_of(Op::Band, Datatype::DOUBLE), None);
        assert_eq!(atomic_of(Op::Sum, Datatype::LONG_DOUBLE), None);
        assert_eq!(atomic_of(Op::Minloc, Datatype::DOUBLE_INT), None);
        assert_eq!(atomic_of(Op::NoOp, Datatype::INT), None);
        assert_eq!(
            atomic_of(Op::Replace, Datatype::BYTE),
            Some((AtomicOp::Swap, Elem::Uint(1)))
        );
    }

    /// A network with verbs' atomics only: 8-byte sums.
    struct SumsOnly;

    impl Rdma for SumsOnly {
        fn max_atomic(&self) -> usize {
            8
        }
        fn has_atomic(&self, op: AtomicOp, elem: Elem) -> bool {
            op == AtomicOp::Sum && elem.size() == 8 && !matches!(elem, Elem::Float(_))
        }
        fn expose(&self, _: u64, _: *mut u8, _: usize) -> Result<u64> {
            Ok(0)
        }
        fn withdraw(&self, _: u64) {}
        fn counter(&self) -> Result<u64> {
            Ok(0)
        }
        fn release_counter(&self, _: u64) {}
        fn completed(&self, _: u64) -> Result<u64> {
            Ok(0)
        }
        unsafe fn put(&self, _: u64, _: u32, _: u64, _: u64, _: *const u8, _: usize) -> Result<()> {
            Ok(())
        }
        unsafe fn get(&self, _: u64, _: u32, _: u64, _: u64, _: *mut u8, _: usize) -> Result<()> {
            Ok(())
        }
        unsafe fn atomic(
            &self,
            _: u64,
            _: u32,
            _: u64,
            _: u64,
            _: *const u8,
            _: Option<*mut u8>,
            _: usize,
            _: AtomicOp,
            _: Elem,
        ) -> Result<()> {
            Ok(())
        }
        unsafe fn compare_swap(
            &self,
            _: u64,
            _: u32,
            _: u64,
            _: u64,
            _: *const u8,
            _: *const u8,
            _: *mut u8,
            _: Elem,
        ) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_network_without_an_atomic_leaves_the_pair_to_messages() {
        let n = SumsOnly;
        assert_eq!(
            net_atomic(&n, Op::Sum, Datatype::INT64_T),
            Some((AtomicOp::Sum, Elem::Int(8)))
        );
        assert_eq!(
            net_atomic(&n, Op::Sum, Datatype::UINT64_T),
            Some((AtomicOp::Sum, Elem::Uint(8)))
        );
        assert_eq!(net_atomic(&n, Op::Sum, Datatype::INT), None);
        assert_eq!(net_atomic(&n, Op::Sum, Datatype::DOUBLE), None);
        assert_eq!(net_atomic(&n, Op::Max, Datatype::INT64_T), None);
        assert_eq!(net_atomic(&n, Op::Replace, Datatype::INT64_T), None);
        // The defaults are Portals': every pair `atomic_of` names.
        assert!(n.has_compare_swap(Elem::Uint(4)) && n.atomic_get() && n.atomic_align() == 1);
    }
}
