//! The origin's side of an operation: checking it, building its active message, posting the
//! reply's receive and sending.

use heapless::Vec;

use super::*;
use crate::datatype::repr::{convert, Repr};

/// A buffer of the user's: `count` instances of `ty` at `addr`.
#[derive(Clone, Copy, Debug)]
pub struct Buffer {
    /// Address.
    pub addr: *mut u8,
    /// Instances.
    pub count: u64,
    /// Datatype.
    pub ty: Datatype,
}

/// Where an operation goes: `count` instances of `ty` at displacement `disp` of rank `rank`.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// Rank in the window's group (or `MPI_PROC_NULL`).
    pub rank: i32,
    /// Displacement, in the target's units.
    pub disp: i64,
    /// Instances.
    pub count: u64,
    /// Datatype.
    pub ty: Datatype,
}

/// An operation.
#[derive(Clone, Copy, Debug)]
pub enum RmaOp {
    /// `MPI_Put`.
    Put {
        /// What goes.
        origin: Buffer,
    },
    /// `MPI_Get`.
    Get {
        /// Where it comes to.
        origin: Buffer,
    },
    /// `MPI_Accumulate`.
    Acc {
        /// What is combined in.
        origin: Buffer,
        /// How.
        op: Op,
    },
    /// `MPI_Get_accumulate` (`MPI_Fetch_and_op` is one element of it).
    GetAcc {
        /// What is combined in (ignored for `MPI_NO_OP`).
        origin: Buffer,
        /// Where the old contents come to.
        result: Buffer,
        /// How.
        op: Op,
    },
    /// `MPI_Compare_and_swap` of one element of `result.ty`.
    Cas {
        /// The new value.
        origin: *const u8,
        /// The value compared with.
        compare: *const u8,
        /// Where the old value comes to.
        result: Buffer,
    },
}

/// The one predefined type a datatype is made of, as accumulates require.
pub(super) fn element_type(types: &TypeTable, t: Datatype) -> Result<Datatype> {
    if t.is_predefined() {
        return Ok(t);
    }
    let mut found: Option<Datatype> = None;
    let mut stack: Vec<Datatype, 32> = Vec::new();
    let _ = stack.push(t);
    while let Some(x) = stack.pop() {
        if x.is_predefined() {
            if found.is_some_and(|f| f != x) {
                return Err(Error::new(
                    ErrorClass::Type,
                    Reason::BadArgument {
                        what: "an accumulate's datatypes must be built of one predefined type",
                    },
                ));
            }
            found = Some(x);
            continue;
        }
        for o in types.old_types(x)? {
            stack.push(o).map_err(|_| {
                Error::new(
                    ErrorClass::Type,
                    Reason::BadArgument {
                        what: "an accumulate's datatype is nested too deeply",
                    },
                )
            })?;
        }
    }
    found.ok_or(Error::new(ErrorClass::Type, Reason::InvalidDatatype))
}

fn range_err() -> Error {
    Error::new(
        ErrorClass::RmaRange,
        Reason::BadArgument {
            what: "the target memory lies outside the target's window",
        },
    )
}

/// Starts operation `op` on `target` of window `id`; `user` asks for a request the user will
/// complete (`MPI_Rput`, ...). Returns that request.
pub fn issue(
    cx: &mut Inside,
    id: WinId,
    op: RmaOp,
    target: Target,
    user: bool,
) -> Result<Option<ReqId>> {
    if !user && shared_element(cx.e(), id, op, &target)? {
        return Ok(None);
    }
    if let Some(r) = super::rdma::issue(cx, id, op, target, user)? {
        return Ok(r);
    }
    if !matches!(op, RmaOp::Put { .. } | RmaOp::Get { .. }) {
        // An accumulate by message after accumulates on the network: those complete first
        // (accumulates from one origin to one target are ordered).
        super::sync::wait_net(cx, id)?;
    }
    // Room for one more operation in flight.
    if cx.e().osc.get(id)?.pending.len() + 2 > MAX_PENDING {
        cx.block(|e| {
            let Engine { osc, p2p, .. } = e;
            let mem = osc.memory;
            let w = osc.get_mut(id)?;
            w.reap(p2p, mem);
            Ok((w.pending.len() + 2 <= MAX_PENDING).then_some(()))
        })?;
    }
    let e = cx.e();
    let Engine {
        osc, p2p, platform, ..
    } = e;
    let platform: &dyn Platform = *platform;
    let mem = osc.memory;
    let w = osc.get_mut(id)?;
    // A shared window: the operation is applied here, to the target's part in the segment.
    let local = w.seg.is_some();
    if target.rank == crate::pml::request::PROC_NULL {
        return if user {
            p2p.pml
                .requests_mut()
                .completed(Status::PROC_NULL, 0)
                .map(Some)
        } else {
            Ok(None)
        };
    }
    if target.rank < 0 || target.rank as u32 >= w.size {
        return Err(Error::new(
            ErrorClass::Rank,
            Reason::RankOutOfRange {
                rank: target.rank,
                size: w.size,
            },
        ));
    }
    let t = target.rank as u32;
    if !w.may_access(t) {
        return Err(sync_err(
            "an RMA operation outside an access epoch to that target",
        ));
    }
    if user && !(w.lock_all || w.peer(t).locked != 0) {
        return Err(sync_err(
            "request-based RMA operations are allowed only in passive-target epochs",
        ));
    }
    let types = &p2p.types;
    let ti = *types.check_committed(target.ty)?;
    let tbytes = target
        .count
        .checked_mul(ti.size)
        .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))?;
    // Range: what the target type touches must lie in the target's window.
    let peer = *w.peer(t);
    if w.flavor != Flavor::Dynamic && target.count > 0 && ti.size > 0 {
        let unit = peer.unit as i128;
        let lo = target.disp as i128 * unit + ti.true_lb as i128;
        let hi = target.disp as i128 * unit
            + (target.count as i128 - 1) * ti.extent as i128
            + ti.true_lb as i128
            + ti.true_extent as i128;
        if lo < 0 || hi > peer.size as i128 {
            return Err(range_err());
        }
    }
    if local && dense_copy(types, &peer, op, &target, &ti, tbytes)? {
        return if user {
            p2p.pml
                .requests_mut()
                .completed(Status::PROC_NULL, 0)
                .map(Some)
        } else {
            Ok(None)
        };
    }
    // What goes with the message, and where a reply lands.
    let (kind_, origin, result, acc) = match op {
        RmaOp::Put { origin } => (kind::PUT, Some(origin), None, None),
        RmaOp::Get { origin } => (kind::GET, None, Some(origin), None),
        RmaOp::Acc { origin, op } => (kind::ACC, Some(origin), None, Some(op)),
        RmaOp::GetAcc { origin, result, op } => (
            kind::GET_ACC,
            (op != Op::NoOp).then_some(origin),
            Some(result),
            Some(op),
        ),
        RmaOp::Cas { result, .. } => (kind::CAS, None, Some(result), None),
    };
    let mut hdr = AmHdr::new(kind_);
    hdr.disp = target.disp;
    let mut image_ = false;
    if let Some(op) = acc {
        let dt = element_type(types, target.ty)?;
        if let Some(o) = origin {
            if element_type(types, o.ty)? != dt {
                return Err(Error::new(
                    ErrorClass::Type,
                    Reason::BadArgument {
                        what: "an accumulate's origin and target types differ in their element",
                    },
                ));
            }
        }
        // An accumulate of nothing is a no-op whatever the operation (Open MPI and MPICH take
        // mpi4py's zero-byte `MPI_SUM` on `MPI_BYTE`).
        if !matches!(op, Op::Replace | Op::NoOp) && tbytes > 0 {
            if let Op::User(_) = op {
                return Err(Error::new(
                    ErrorClass::Op,
                    Reason::BadArgument {
                        what: "one-sided accumulates take predefined operations only",
                    },
                ));
            }
            crate::op::check(op, dt)?;
        }
        if matches!(dt.scalar(), Scalar::Pair { .. }) {
            if peer.repr.is_some() {
                return Err(Error::unsupported(
                    "MPI_MINLOC/MPI_MAXLOC accumulates to a target of another data representation",
                ));
            }
            // Pair types (MINLOC/MAXLOC) travel as memory images of the predefined type.
            let same = |b: Option<Buffer>| b.is_none_or(|b| b.ty == dt);
            if target.ty != dt || !same(origin) || !same(result) {
                return Err(Error::unsupported(
                    "one-sided accumulates of pair types other than the predefined pair itself",
                ));
            }
            image_ = true;
            hdr.flags |= wire::flags::IMAGE;
        }
        hdr.op = wire::op_code(op);
        hdr.basic = dt.code();
    }
    if let RmaOp::Cas { .. } = op {
        if !target.ty.is_predefined() || target.count != 1 {
            return Err(Error::new(ErrorClass::Type, Reason::InvalidDatatype));
        }
        // The element's type, so a shared window's target knows whether the CPU swaps it.
        hdr.basic = target.ty.code();
    }
    if local && !image_ && dense_acc(w, types, platform, t, op, &target, &ti, tbytes)? {
        return if user {
            p2p.pml
                .requests_mut()
                .completed(Status::PROC_NULL, 0)
                .map(Some)
        } else {
            Ok(None)
        };
    }
    // The target's description.
    let mut one = [WireNode::bytes(0)];
    let nodes_src: Option<&[crate::datatype::desc::Node]>;
    if image_ {
        let n = target.count * dt_extent(target.ty) as u64;
        one[0] = WireNode::bytes(n);
        hdr.count = 1;
        hdr.extent = 0;
        hdr.len = n;
        nodes_src = None;
    } else if let (Some(at), true) = (ti.dense_at, ti.extent as u64 == ti.size) {
        one[0] = WireNode::bytes(tbytes);
        one[0].disp = at as i64;
        hdr.count = 1;
        hdr.extent = 0;
        hdr.len = tbytes;
        nodes_src = None;
    } else {
        let nodes = types.nodes(target.ty)?;
        if nodes.len() > MAX_NODES {
            return Err(Error::unsupported(
                "one-sided target datatypes of more than 4096 description nodes",
            ));
        }
        hdr.count = target.count;
        hdr.extent = ti.extent as i64;
        hdr.len = tbytes;
        nodes_src = Some(nodes);
    }
    let ndesc = nodes_src.map_or(1, |n| n.len());
    hdr.ndesc = ndesc as u32;
    // Sizes must agree: what the origin gives (or takes) and what the target holds.
    let stream = |b: &Buffer| -> Result<u64> {
        if image_ {
            return Ok(b.count * dt_extent(b.ty) as u64);
        }
        let i = types.check_committed(b.ty)?;
        b.count
            .checked_mul(i.size)
            .ok_or(Error::new(ErrorClass::Count, Reason::CountTooLarge))
    };
    let data_len = match op {
        RmaOp::Cas { .. } => 2 * hdr.len,
        _ => match origin {
            Some(o) => {
                let n = stream(&o)?;
                if n != hdr.len {
                    return Err(size_mismatch());
                }
                n
            }
            None => 0,
        },
    };
    if let Some(r) = result {
        if stream(&r)? < hdr.len {
            return Err(size_mismatch());
        }
    }
    if result.is_some() {
        hdr.reply_tag = w.tag();
    }
    // A foreign target receives split data as bytes, unconverted: it goes in the message.
    let split = !local
        && peer.repr.is_none()
        && kind_ == kind::PUT
        && nodes_src.is_none()
        && !image_
        && data_len >= PUT_SPLIT;
    if split {
        hdr.flags |= wire::flags::DATA_FOLLOWS;
        hdr.reply_tag = w.tag();
    }
    let head = HDR_LEN + ndesc * NODE_LEN;
    let total = head + if split { 0 } else { data_len as usize };
    let mut buf = w.buffer(mem, total)?;
    {
        // SAFETY: the grant was just taken or reused; nothing else refers to it.
        let bytes = unsafe { buf.bytes(total) };
        let (h, rest) = bytes.split_at_mut(HDR_LEN);
        // Nodes first, then the header (emitting both at once needs them in one slice).
        let (nbytes, data) = rest.split_at_mut(ndesc * NODE_LEN);
        // Header and nodes in the target's byte order.
        let order = peer.repr.map_or(Endian::NATIVE, |r| r.endian);
        match nodes_src {
            None => nbytes.copy_from_slice(zerocopy::IntoBytes::as_bytes(&one[0].in_order(order))),
            Some(nodes) => {
                for (k, n) in nodes.iter().enumerate() {
                    let n = WireNode::of(n).in_order(order);
                    nbytes[k * NODE_LEN..(k + 1) * NODE_LEN]
                        .copy_from_slice(zerocopy::IntoBytes::as_bytes(&n));
                }
            }
        }
        h.copy_from_slice(zerocopy::IntoBytes::as_bytes(&hdr.in_order(order)));
        let packed = if split {
            Ok(0)
        } else {
            match op {
                RmaOp::Cas {
                    origin,
                    compare,
                    result,
                } => {
                    let n = hdr.len as usize;
                    let _ = result;
                    // SAFETY: MPI requires `origin` and `compare` to hold one element of the type.
                    unsafe {
                        core::ptr::copy_nonoverlapping(origin, data.as_mut_ptr(), n);
                        core::ptr::copy_nonoverlapping(compare, data.as_mut_ptr().add(n), n);
                    }
                    match peer.repr {
                        Some(to) => to_target(target.ty, &to, &mut data[..2 * n]).map(|_| 2 * n),
                        None => Ok(2 * n),
                    }
                }
                _ => match origin {
                    Some(o) if image_ => {
                        // SAFETY: MPI requires the origin buffer to hold `count` instances.
                        unsafe {
                            core::ptr::copy_nonoverlapping(o.addr, data.as_mut_ptr(), data.len())
                        };
                        Ok(data.len())
                    }
                    // SAFETY: MPI requires the origin buffer to hold `count` instances of its type,
                    // unchanged during the call; the packer lives only here.
                    Some(o) => match peer.repr {
                        None => unsafe { Packer::new(o.addr, o.count, o.ty, types) },
                        // SAFETY: as above; packed in the target's representation.
                        Some(to) => unsafe { Packer::external(o.addr, o.count, o.ty, types, to) },
                    }
                    .and_then(|mut p| {
                        let n = p.pack(types, 0, data);
                        if p.overflowed() {
                            return Err(Error::new(
                                ErrorClass::Other,
                                Reason::BadArgument {
                                    what: "a value does not fit the target's representation",
                                },
                            ));
                        }
                        Ok(n)
                    }),
                    None => Ok(0),
                },
            }
        };
        match packed {
            Ok(n) if n == data.len() => {}
            Ok(_) => {
                w.release(mem, buf);
                return Err(size_mismatch());
            }
            Err(e) => {
                w.release(mem, buf);
                return Err(e);
            }
        }
    }
    if local {
        // SAFETY: built just above; the window alone holds the grant.
        let msg: &[u8] = unsafe { buf.bytes(total) };
        let r = w.local(mem, &p2p.types, platform, t, msg, result, image_);
        w.release(mem, buf);
        r?;
        return if user {
            // Done already: the request completes at once.
            p2p.pml
                .requests_mut()
                .completed(Status::PROC_NULL, 0)
                .map(Some)
        } else {
            Ok(None)
        };
    }
    // The reply's receive goes up before the request leaves.
    let mut user_req = None;
    if let Some(r) = result {
        let tag = hdr.reply_tag;
        let conv = if image_ {
            // SAFETY: MPI lends the result buffer until the operation completes.
            unsafe { Unpacker::contiguous(r.addr, hdr.len as usize) }
        } else {
            // SAFETY: as above, for `count` instances of the result type.
            match unsafe { Unpacker::new(r.addr, r.count, r.ty, &p2p.types) } {
                Ok(c) => c,
                Err(e) => {
                    w.release(mem, buf);
                    return Err(e);
                }
            }
        };
        let s = p2p.sel(w.comm, Source::Rank(t), tag)?;
        let req = p2p.irecv(&s, conv, 0)?;
        w.track(Pending {
            req,
            target: t,
            buf: None,
            user,
        })?;
        if user {
            user_req = Some(req);
        }
    }
    if let Some(p) = w.peer_mut(t) {
        p.dirty = true;
    }
    let mut sent = w.send(
        p2p,
        mem,
        t,
        buf,
        total,
        user && user_req.is_none() && !split,
    )?;
    if let (true, Some(o)) = (split, origin) {
        // The data straight from the user's buffer, behind the header (same peer, same
        // communicator: it arrives after it).
        let d = p2p.dest(w.comm, t)?;
        // SAFETY: MPI lends the origin buffer, unchanged, until the put completes locally; the
        // request is tracked, and every completion call waits for it.
        let conv = unsafe { Packer::new(o.addr, o.count, o.ty, &p2p.types)? };
        sent = p2p.send(&d, hdr.reply_tag, conv, SendMode::Standard, 0)?;
        if let Some(req) = sent {
            w.track(Pending {
                req,
                target: t,
                buf: None,
                user,
            })?;
        }
    }
    if !user {
        return Ok(None);
    }
    match (user_req, sent) {
        (Some(r), _) => Ok(Some(r)),
        (None, Some(r)) => Ok(Some(r)),
        (None, None) => p2p
            .pml
            .requests_mut()
            .completed(Status::PROC_NULL, 0)
            .map(Some),
    }
}

/// Packs `b`'s data into `out`; returns the bytes packed.
///
/// # Safety
/// `b` holds `count` instances of its type, unchanged during the call.
pub(super) unsafe fn pack_into(types: &TypeTable, b: &Buffer, out: &mut [u8]) -> Result<usize> {
    // SAFETY: the caller's contract.
    let mut p = unsafe { Packer::new(b.addr, b.count, b.ty, types) }?;
    Ok(p.pack(types, 0, out))
}

/// Unpacks `data` into `b`, which must take all of it.
///
/// # Safety
/// `b` has room for `count` instances of its type, untouched by others during the call.
pub(super) unsafe fn unpack_from(types: &TypeTable, b: &Buffer, data: &[u8]) -> Result<()> {
    // SAFETY: the caller's contract.
    let mut u = unsafe { Unpacker::new(b.addr, b.count, b.ty, types) }?;
    if u.unpack(types, 0, data) != data.len() {
        return Err(size_mismatch());
    }
    Ok(())
}

/// Converts the elements of predefined type `ty` that fill `data` (a compare-and-swap's origin
/// and compare values, one after the other) in place from this process's representation to `to`,
/// whose element sizes are this process's (`window::reprs` checked).
fn to_target(ty: Datatype, to: &Repr, data: &mut [u8]) -> Result<()> {
    let elems = crate::datatype::desc::predefined_elems(ty);
    let size = ty.extent();
    if size == 0 || !data.len().is_multiple_of(size) {
        return Err(Error::new(ErrorClass::Type, Reason::InvalidDatatype));
    }
    let mut tmp = [0u8; 16];
    for one in data.chunks_exact_mut(size) {
        for &(elem, at) in elems {
            let at = at as usize;
            let w = Repr::NATIVE.size(elem);
            let Some(src) = one.get(at..at + w) else {
                return Err(Error::new(ErrorClass::Type, Reason::InvalidDatatype));
            };
            let Some(dst) = tmp.get_mut(..w) else {
                return Err(Error::new(ErrorClass::Type, Reason::InvalidDatatype));
            };
            convert(elem, &Repr::NATIVE, src, to, dst, 1).map_err(|_| {
                Error::unsupported(
                    "a compare-and-swap element the target's representation cannot hold",
                )
            })?;
            one[at..at + w].copy_from_slice(dst);
        }
    }
    Ok(())
}

fn op_err() -> Error {
    Error::new(
        ErrorClass::Op,
        Reason::BadArgument {
            what: "the operation is not defined on the datatype",
        },
    )
}

fn dt_extent(t: Datatype) -> usize {
    t.extent()
}

pub(super) fn size_mismatch() -> Error {
    Error::new(
        ErrorClass::Type,
        Reason::BadArgument {
            what: "the origin and target buffers hold different amounts of data",
        },
    )
}

/// A shared window's put or get between contiguous memory on both sides: one copy, without the
/// message `issue` builds for everything else. Whether it was one (the range was checked).
fn dense_copy(
    types: &TypeTable,
    peer: &Peer,
    op: RmaOp,
    target: &Target,
    ti: &crate::datatype::desc::TypeInfo,
    tbytes: u64,
) -> Result<bool> {
    let (RmaOp::Put { origin } | RmaOp::Get { origin }) = op else {
        return Ok(false);
    };
    let oi = types.check_committed(origin.ty)?;
    let (Some(o_at), Some(t_at)) = (oi.dense_at, ti.dense_at) else {
        return Ok(false);
    };
    if origin.count.checked_mul(oi.size) != Some(tbytes) || tbytes == 0 {
        return Ok(false);
    }
    let len = tbytes as usize;
    let remote = dense_target(peer, target, t_at, len)?;
    let local = origin.addr.wrapping_offset(o_at);
    // SAFETY: `remote..+len` lies inside the target's part of the segment this process maps
    // (checked above), which MPI lets origins read and write in an epoch; `local..+len` is the
    // user's buffer, `count` dense instances, lent by MPI for the call. They may overlap only if
    // the user puts from the window into itself, which `copy` allows.
    unsafe {
        match op {
            RmaOp::Put { .. } => super::shm::copy(local, remote, len),
            _ => super::shm::copy(remote, local, len),
        }
    }
    Ok(true)
}

/// The address of `len` dense bytes at `target`'s displacement (plus `at`) in `peer`'s part of
/// a shared window. `issue` checked the range against the part's size; checked again here, so a
/// copy cannot leave the part whatever the arithmetic.
fn dense_target(peer: &Peer, target: &Target, at: isize, len: usize) -> Result<*mut u8> {
    let off = target.disp as i128 * peer.unit as i128 + at as i128;
    if off < 0 || off + len as i128 > peer.size as i128 {
        return Err(range_err());
    }
    Ok((peer.at + off as usize) as *mut u8)
}

/// A shared window's accumulate, fetch-and-op or compare-and-swap on a predefined target type
/// with dense buffers: applied in place — integer elements by CPU atomics ([`atomic`]), the
/// rest under the target's accumulate word — without the message `issue` builds for everything
/// else. Whether it was one.
#[allow(clippy::too_many_arguments)]
fn dense_acc(
    w: &Window,
    types: &TypeTable,
    platform: &dyn Platform,
    t: u32,
    op: RmaOp,
    target: &Target,
    ti: &crate::datatype::desc::TypeInfo,
    tbytes: u64,
) -> Result<bool> {
    let (Some(t_at), true, false) = (ti.dense_at, target.ty.is_predefined(), tbytes == 0) else {
        return Ok(false);
    };
    let Some(seg) = w.seg.as_ref() else {
        return Ok(false);
    };
    // The buffer's address if it holds exactly the target's bytes, densely.
    let dense = |b: &Buffer| -> Result<Option<*mut u8>> {
        let i = types.check_committed(b.ty)?;
        Ok(match i.dense_at {
            Some(a) if b.count.checked_mul(i.size) == Some(tbytes) => {
                Some(b.addr.wrapping_offset(a))
            }
            _ => None,
        })
    };
    let len = tbytes as usize;
    let dt = target.ty;
    // What to do under the word: (new data, compare value, where the old contents go, op).
    let (src, compare, res, how): (Option<*const u8>, Option<*const u8>, Option<*mut u8>, Op) =
        match op {
            RmaOp::Acc { origin, op } => match dense(&origin)? {
                Some(s) => (Some(s), None, None, op),
                None => return Ok(false),
            },
            RmaOp::GetAcc { origin, result, op } => {
                let Some(r) = dense(&result)? else {
                    return Ok(false);
                };
                let s = if op == Op::NoOp {
                    None
                } else {
                    match dense(&origin)? {
                        Some(s) => Some(s as *const u8),
                        None => return Ok(false),
                    }
                };
                (s, None, Some(r), op)
            }
            RmaOp::Cas {
                origin,
                compare,
                result,
            } => match dense(&result)? {
                Some(r) => (Some(origin), Some(compare), Some(r), Op::Replace),
                None => return Ok(false),
            },
            _ => return Ok(false),
        };
    let remote = dense_target(w.peer(t), target, t_at, len)?;
    if let Some(width) = atomic::width(dt, remote as usize) {
        // Integer elements: one CPU atomic each, no word (`atomic` says why that is safe).
        // SAFETY: `remote..+len` lies in the target's part of the segment this process maps,
        // whose integer elements every process updates only by atomics (`atomic::width`);
        // `src`, `compare` and `res` are the user's dense buffers of `len` bytes (one element
        // for a compare-and-swap), lent by MPI for the call and apart from the window.
        let r = unsafe {
            match (compare, src, res) {
                (Some(c), Some(s), Some(o)) if len == width => {
                    atomic::cas(width, remote, s, c, o);
                    Ok(true)
                }
                (Some(_), ..) => Err(Fault::Malformed),
                _ => atomic::combine_run(
                    how,
                    dt,
                    remote,
                    src.unwrap_or(core::ptr::null()),
                    res.unwrap_or(core::ptr::null_mut()),
                    len,
                ),
            }
        };
        return r.map_err(|_| {
            Error::new(
                ErrorClass::Op,
                Reason::BadArgument {
                    what: "the operation is not defined on the datatype",
                },
            )
        });
    }
    let r = seg.atomically(t, platform, || -> core::result::Result<(), Fault> {
        // SAFETY: `remote..+len` lies in the target's part of the segment this process maps
        // (`dense_target`), and every accumulate to that part holds the word this closure runs
        // under, so nothing else writes it meanwhile (a concurrent put is erroneous in MPI).
        // `src`, `compare` and `res` are the user's dense buffers of `len` bytes, lent by MPI
        // for the call; origin and result must not overlap (the standard says so).
        unsafe {
            if let Some(c) = compare {
                let cur = core::slice::from_raw_parts(remote, len);
                let equal = cur == core::slice::from_raw_parts(c, len);
                if let Some(r) = res {
                    core::ptr::copy(remote, r, len);
                }
                if equal {
                    if let Some(s) = src {
                        core::ptr::copy(s, remote, len);
                    }
                }
                return Ok(());
            }
            if let Some(r) = res {
                core::ptr::copy(remote, r, len);
            }
            if let Some(s) = src {
                let tgt = core::slice::from_raw_parts_mut(remote, len);
                apply::combine(how, dt, tgt, core::slice::from_raw_parts(s, len))?;
            }
        }
        Ok(())
    });
    r.map_err(|_| {
        Error::new(
            ErrorClass::Op,
            Reason::BadArgument {
                what: "the operation is not defined on the datatype",
            },
        )
    })?;
    Ok(true)
}

/// The lean path of a shared window: an operation whose origin (and result) buffer is `count`
/// elements of the target's predefined type — a put, a get, an accumulate or fetch-and-op of
/// integers by CPU atomics, a compare-and-swap of an integer — done here with the checks the
/// standard asks for and nothing else (no datatype walk, no message, no request). Whether it
/// was one; anything else is left to [`issue`]'s general path, which reports the errors.
pub(super) fn shared_element(
    e: &mut Engine,
    id: WinId,
    op: RmaOp,
    target: &Target,
) -> Result<bool> {
    let w = e.osc.get(id)?;
    let dt = target.ty;
    if w.seg.is_none() || !dt.is_predefined() || target.count == 0 || target.rank < 0 {
        return Ok(false);
    }
    let t = target.rank as u32;
    if t >= w.size || !w.may_access(t) {
        return Ok(false);
    }
    let same = |b: &Buffer| b.ty == dt && b.count == target.count;
    let len = match target.count.checked_mul(dt.size() as u64) {
        Some(n) if n > 0 && n <= isize::MAX as u64 => n as usize,
        _ => return Ok(false),
    };
    let peer = w.peer(t);
    let off = target.disp as i128 * peer.unit as i128;
    if off < 0 || off + len as i128 > peer.size as i128 {
        return Err(range_err());
    }
    let remote = (peer.at + off as usize) as *mut u8;
    // Asked only of accumulates: a put or get does not care.
    let width = || atomic::width(dt, remote as usize);
    match op {
        // A pair type with a gap (`MPI_DOUBLE_INT`) is not `count * size` dense bytes.
        RmaOp::Put { origin } | RmaOp::Get { origin } if same(&origin) && dt.is_contiguous() => {
            // SAFETY: `remote..+len` lies in the target's part of the segment this process maps
            // (checked just above), which MPI lets origins read and write in an epoch; the
            // origin buffer holds `count` dense elements of the predefined type, lent by MPI for
            // the call. `copy` allows the overlap of a put from the window into itself.
            unsafe {
                match op {
                    RmaOp::Put { .. } => core::ptr::copy(origin.addr, remote, len),
                    _ => core::ptr::copy(remote, origin.addr, len),
                }
            }
            Ok(true)
        }
        RmaOp::Acc { origin, op: how }
        | RmaOp::GetAcc {
            origin, op: how, ..
        } => {
            if how != Op::NoOp && !same(&origin) {
                return Ok(false);
            }
            let result = match op {
                RmaOp::GetAcc { result, .. } if same(&result) => result.addr,
                RmaOp::GetAcc { .. } => return Ok(false),
                _ => core::ptr::null_mut(),
            };
            match how {
                Op::User(_) | Op::Minloc | Op::Maxloc => return Ok(false),
                Op::Sum | Op::Prod | Op::Max | Op::Min | Op::Replace | Op::NoOp => {}
                _ => crate::op::check(how, dt)?,
            }
            let src = if how == Op::NoOp {
                core::ptr::null()
            } else {
                origin.addr as *const u8
            };
            if width().is_some() {
                // SAFETY: `remote..+len` lies in the target's part of the segment (checked
                // above), whose integer elements every process updates only by CPU atomics
                // (`atomic::width`); origin and result hold `count` elements of the type, lent
                // by MPI for the call and apart from the window (the standard says so).
                unsafe { atomic::combine_run(how, dt, remote, src, result, len) }
                    .map_err(|_| op_err())?;
                return Ok(true);
            }
            if matches!(dt.scalar(), Scalar::Pair { .. }) {
                if peer.repr.is_some() {
                    return Err(Error::unsupported(
                    "MPI_MINLOC/MPI_MAXLOC accumulates to a target of another data representation",
                ));
                }
                return Ok(false);
            }
            let Some(seg) = w.seg.as_ref() else {
                return Ok(false);
            };
            let platform: &dyn Platform = e.platform;
            let r = seg.atomically(t, platform, || {
                // SAFETY: as above, but these elements are updated only under the target's
                // accumulate word, which this closure holds: nothing else writes them meanwhile.
                unsafe {
                    if !result.is_null() {
                        core::ptr::copy_nonoverlapping(remote, result, len);
                    }
                    if src.is_null() {
                        return Ok(());
                    }
                    let tgt = core::slice::from_raw_parts_mut(remote, len);
                    apply::combine(how, dt, tgt, core::slice::from_raw_parts(src, len))
                }
            });
            r.map_err(|_| op_err())?;
            Ok(true)
        }
        RmaOp::Cas {
            origin,
            compare,
            result,
        } => match width() {
            Some(w) if target.count == 1 && same(&result) => {
                // SAFETY: as for an accumulate; `origin`, `compare` and `result` hold one
                // element each (MPI's rule for MPI_Compare_and_swap).
                unsafe { atomic::cas(w, remote, origin, compare, result.addr) };
                Ok(true)
            }
            _ => Ok(false),
        },
        _ => Ok(false),
    }
}
