//! Creating and freeing windows, and attaching memory to dynamic ones.

use core::mem::MaybeUninit;

use heapless::Vec;

use super::*;
use crate::datatype::repr::Repr;

/// What the memory of a new window is. `MPI_Win_allocate` over processes of one node gets a
/// shared segment (each part on its own pages) like `MPI_Win_allocate_shared`, when the platform
/// has one.
#[derive(Clone, Copy, Debug)]
pub enum WinMemory {
    /// The user's `len` bytes at `base` (`MPI_Win_create`).
    User {
        /// Address.
        base: usize,
        /// Bytes.
        len: usize,
    },
    /// `len` bytes the engine allocates (`MPI_Win_allocate`).
    Allocate {
        /// Bytes.
        len: usize,
    },
    /// None yet (`MPI_Win_create_dynamic`).
    Dynamic,
    /// `len` bytes of a segment shared by the processes of the node
    /// (`MPI_Win_allocate_shared`); `noncontig`: each process's part starts on a page.
    Shared {
        /// Bytes.
        len: usize,
        /// The info `alloc_shared_noncontig`.
        noncontig: bool,
    },
}

/// Creates a window over `comm` (collective): returns it and the address of its memory.
pub fn create(
    cx: &mut Inside,
    comm: CommId,
    memory: WinMemory,
    unit: u32,
) -> Result<(WinId, usize)> {
    let c = cx.e().p2p.comm(comm)?;
    if c.is_inter() {
        return Err(Error::new(
            ErrorClass::Comm,
            Reason::BadArgument {
                what: "windows over intercommunicators are not supported",
            },
        ));
    }
    let homogeneous = cx.e().p2p.comm_homogeneous(comm)?;
    if !homogeneous {
        // Every member must lay data out as this process does (the origin describes the target
        // type with its own sizes); only the byte order and `long double`'s format may differ.
        reprs(cx, comm, &mut [])?;
    }
    let mem = cx.e().osc.memory;
    if let (WinMemory::Shared { .. }, false) = (memory, homogeneous) {
        return Err(Error::new(
            ErrorClass::RmaShared,
            Reason::BadArgument {
                what: "MPI_Win_allocate_shared over processes of different data representations",
            },
        ));
    }
    if let (WinMemory::Allocate { len }, true) = (memory, homogeneous) {
        // On one node, the engine's memory for the window is a shared segment too, so that
        // operations are loads and stores; where the platform has none, it is a grant.
        if one_node(cx, comm).is_ok() {
            match build(cx, comm, Flavor::Allocate, None, 0, len, unit, Some(true)) {
                Err(e) if e.class == ErrorClass::RmaShared => {}
                r => return r,
            }
        }
    }
    let (flavor, owned, base, len) = match memory {
        WinMemory::User { base, len } => (Flavor::Create, None, base, len),
        WinMemory::Allocate { len } => {
            if len == 0 {
                (Flavor::Allocate, None, 0, 0)
            } else {
                let g = Grant::take(mem, len, "window memory (MPI_Win_allocate)")?;
                (Flavor::Allocate, Some(g), g.ptr as usize, len)
            }
        }
        WinMemory::Dynamic => (Flavor::Dynamic, None, 0, 0),
        WinMemory::Shared { len, .. } => {
            one_node(cx, comm)?;
            (Flavor::Shared, None, 0, len)
        }
    };
    let shared = match memory {
        WinMemory::Shared { noncontig, .. } => Some(noncontig),
        _ => None,
    };
    let r = build(cx, comm, flavor, owned, base, len, unit, shared);
    if r.is_err() {
        if let Some(g) = owned {
            g.give_back(mem);
        }
    }
    r
}

/// The representation of every member of `comm` (into `out`, when it has room for them: `None`
/// for a member that stores data as this process does). Fails, alike on every member, unless
/// every member's elements have this process's sizes: a window's origin describes the target
/// type with its own sizes, so only the byte order and the format of `long double` may differ.
fn reprs(cx: &mut Inside, comm: CommId, out: &mut [Peer]) -> Result<()> {
    let p2p = &cx.e().p2p;
    let c = p2p.comm(comm)?;
    let g = c.group;
    let groups = &p2p.comms.groups;
    for r in 0..c.size() {
        let p = groups.proc_of(g, r);
        let arch = p2p.procs.get(p.0 as usize).and_then(|i| i.arch);
        let Some(repr) = arch.and_then(Repr::of) else {
            return Err(Error::unsupported(
                "windows over a process whose data representation is unknown",
            ));
        };
        let n = Repr::NATIVE;
        if (repr.long, repr.aint, repr.bool_, repr.logical) != (n.long, n.aint, n.bool_, n.logical)
            || repr.long_double.storage_bytes != n.long_double.storage_bytes
        {
            return Err(Error::unsupported(
                "windows over processes whose elements differ in size (e.g. 32- and 64-bit \
                 `long`); only the byte order and the format of `long double` may differ",
            ));
        }
        if let Some(peer) = out.get_mut(r as usize) {
            peer.repr = (!repr.same_as(&n)).then_some(repr);
        }
    }
    Ok(())
}

/// Checks that every member of `comm` runs on this process's node (every member comes to the
/// same answer, so all fail alike).
fn one_node(cx: &mut Inside, comm: CommId) -> Result<()> {
    let p2p = &cx.e().p2p;
    let node_of = |p: crate::rte::ProcId| p2p.procs.get(p.0 as usize).map(|i| i.node);
    let c = p2p.comm(comm)?;
    let g = c.group;
    let groups = &p2p.comms.groups;
    let first = node_of(groups.proc_of(g, 0));
    if (1..c.size()).any(|r| node_of(groups.proc_of(g, r)) != first) {
        return Err(Error::new(
            ErrorClass::RmaShared,
            Reason::BadArgument {
                what: "MPI_Win_allocate_shared over a communicator whose processes are not all \
                       on one node",
            },
        ));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn build(
    cx: &mut Inside,
    comm: CommId,
    flavor: Flavor,
    owned: Option<Grant>,
    mut base: usize,
    len: usize,
    unit: u32,
    shared: Option<bool>,
) -> Result<(WinId, usize)> {
    let mem = cx.e().osc.memory;
    let size = cx.e().p2p.comm(comm)?.size();
    let rank = cx.e().p2p.comm(comm)?.rank;
    // Everyone's size and unit, for the origin's range checks.
    let mut s = Sizer::default();
    s.slice::<WinAttrs>(1)
        .slice::<Peer>(size as usize)
        .slice::<u64>(2 * size as usize);
    let table = Grant::take(mem, s.bytes(), "window tables")?;
    // SAFETY: the grant is fresh and the window's alone; the arena carves it into the values.
    let region =
        unsafe { core::slice::from_raw_parts_mut(table.ptr.cast::<MaybeUninit<u8>>(), table.len) };
    let mut arena = Arena::new(region);
    let carve = (|| -> Result<_> {
        let attrs = arena.one(WinAttrs {
            size: len as isize,
            disp_unit: unit as i32,
            flavor: flavor as i32,
            model: 2,
        })?;
        let peers = arena.slice(size as usize, |_| Peer::default())?;
        let all = arena.slice(2 * size as usize, |_| 0u64)?;
        Ok((attrs as *mut WinAttrs, peers, all))
    })();
    let (attrs, peers, all) = match carve {
        Ok(x) => x,
        Err(e) => {
            table.give_back(mem);
            return Err(e);
        }
    };
    let mine = [len as u64, unit as u64];
    let call = crate::coll::Call::Allgather {
        send: Some(crate::coll::Buf {
            ptr: mine.as_ptr() as *mut u8,
            count: 2,
            dt: Datatype::UINT64_T,
        }),
        recv: crate::coll::Buf {
            ptr: all.as_mut_ptr().cast(),
            count: 2,
            dt: Datatype::UINT64_T,
        },
    };
    // SAFETY: `mine` holds 2 and `all` 2 per member u64s, both live across the blocking call.
    let r = unsafe { crate::coll::collective(cx, comm, call, crate::coll::Mode::Blocking) };
    if let Err(e) = r {
        table.give_back(mem);
        return Err(e);
    }
    for (i, p) in peers.iter_mut().enumerate() {
        p.size = all[2 * i];
        p.unit = all[2 * i + 1];
    }
    if shared.is_none() {
        if let Err(e) = reprs(cx, comm, peers) {
            table.give_back(mem);
            return Err(e);
        }
    }
    let mut seg = None;
    if let Some(noncontig) = shared {
        match shm::Segment::setup(cx, comm, rank, peers, noncontig) {
            Ok(s) => seg = Some(s),
            Err(e) => {
                table.give_back(mem);
                return Err(e);
            }
        }
        base = peers[rank as usize].at;
    }
    let platform = cx.e().platform;
    let undo_seg = |seg: Option<shm::Segment>| {
        if let Some(s) = seg {
            s.release(mem, platform);
        }
    };
    let hidden = match crate::comm::create::dup(cx, comm) {
        Ok(h) => h,
        Err(e) => {
            undo_seg(seg);
            table.give_back(mem);
            return Err(e);
        }
    };
    if let Ok(c) = cx.e().p2p.comms.get_mut(hidden) {
        c.hidden = true;
    }
    {
        let p2p = &cx.e().p2p;
        let c = p2p.comm(comm)?;
        for (r, p) in peers.iter_mut().enumerate() {
            p.proc_ = p2p.comms.groups.proc_of(c.group, r as u32).0;
        }
    }
    let net = if seg.is_none() && flavor != Flavor::Dynamic && size > 1 {
        match rdma_setup(cx, hidden, base, len, peers, all) {
            Ok(n) => n,
            Err(e) => {
                undo_seg(seg);
                table.give_back(mem);
                let _ = crate::comm::create::free(cx, hidden);
                return Err(e);
            }
        }
    } else {
        None
    };
    let mut regions = Vec::new();
    if flavor != Flavor::Dynamic && len > 0 {
        let _ = regions.push((base, len));
    }
    let w = Window {
        comm: hidden,
        rank,
        size,
        base,
        len,
        unit,
        flavor,
        errhandler: ErrHandler::Fatal,
        name: [0; 128],
        name_len: 0,
        info: None,
        owned,
        seg,
        regions,
        table,
        attrs,
        peers: peers.as_mut_ptr(),
        pending: Vec::new(),
        replies: Vec::new(),
        incoming: None,
        data_in: None,
        cache: Vec::new(),
        next_tag: TAG_REPLY,
        shared: 0,
        exclusive: false,
        fence: false,
        lock_all: false,
        access: false,
        exposure: None,
        done: 0,
        net,
        passive: false,
    };
    match cx.e().osc.insert(w) {
        Ok(id) => Ok((id, base)),
        Err((e, seg)) => {
            undo_seg(seg);
            rdma_release(net);
            table.give_back(mem);
            let _ = crate::comm::create::free(cx, hidden);
            Err(e)
        }
    }
}

/// The network's operations for a new window over `hidden`, when the platform (or else a BTL)
/// has them, the parameter wants them and every member can take them (same data
/// representation, reached by the network), agreed by all members: each exposes its part under
/// the hidden communicator's context id and says whether it could, with its exposure's card
/// ([`super::rdma::Rdma::card`]), in `all` (room for two words per member); the exchange is also
/// the barrier after which every exposure is in place.
fn rdma_setup(
    cx: &mut Inside,
    hidden: CommId,
    base: usize,
    len: usize,
    peers: &[Peer],
    all: &mut [u64],
) -> Result<Option<Net>> {
    let e = cx.e();
    // The platform's, else the first BTL's that reaches every member (else the first BTL's,
    // which then says it cannot): `sm` reaches only the node, a network BTL more.
    let reaches_all = |r: &&'static dyn super::rdma::Rdma| peers.iter().all(|p| r.reaches(p.proc_));
    let chosen = match e.platform.rdma() {
        Some(r) => Some((r, 1u64)),
        None => {
            let named =
                |b: &dyn crate::btl::Btl| b.rdma().map(|r| (r, kind_of(b.attrs().component)));
            e.p2p
                .bml
                .btls()
                .filter_map(named)
                .find(|(r, _)| reaches_all(r))
                .or_else(|| e.p2p.bml.btls().find_map(named))
        }
    };
    let Some((rdma, kind)) = chosen else {
        return Ok(None);
    };
    if peers.iter().any(|p| p.repr.is_some()) {
        return Ok(None);
    }
    let key = cx.e().p2p.comm(hidden)?.cid.0 as u64;
    let mut net = None;
    let mut ok = 1u64;
    let mut card = (0u32, 0u64);
    if !peers.iter().all(|p| rdma.reaches(p.proc_)) {
        ok = 0;
    }
    match rdma.counter() {
        Ok(ct) => {
            let exposure = if len > 0 {
                rdma.expose(key, base as *mut u8, len).ok()
            } else {
                None
            };
            if len > 0 && exposure.is_none() {
                ok = 0;
            }
            card = rdma.card(exposure);
            net = Some(Net {
                rdma,
                key,
                exposure,
                ct,
                issued: 0,
                done: 0,
            });
        }
        Err(_) => ok = 0,
    }
    // Could (bit 32), which network (bits 40..48) and the card's 32-bit word; the card's
    // 64-bit word.
    let mine = [kind << 40 | ok << 32 | u64::from(card.0), card.1];
    let n = peers.len();
    let call = crate::coll::Call::Allgather {
        send: Some(crate::coll::Buf {
            ptr: mine.as_ptr() as *mut u8,
            count: 2,
            dt: Datatype::UINT64_T,
        }),
        recv: crate::coll::Buf {
            ptr: all.as_mut_ptr().cast(),
            count: 2,
            dt: Datatype::UINT64_T,
        },
    };
    if all.len() < 2 * n {
        rdma_release(net);
        return Err(Error::bad_arg("window table too small"));
    }
    // SAFETY: `mine` holds two and `all` (checked) two per member u64s, live across the call.
    let r = unsafe { crate::coll::collective(cx, hidden, call, crate::coll::Mode::Blocking) };
    if let Err(e) = r {
        rdma_release(net);
        return Err(e);
    }
    if (0..n).any(|i| (all[2 * i] >> 32) & 1 == 0 || all[2 * i] >> 40 != kind) {
        // Someone could not, or chose another network: the window is by messages everywhere.
        rdma_release(net);
        return Ok(None);
    }
    if let Some(nt) = net {
        for (i, p) in peers.iter().enumerate() {
            let card = (all[2 * i] as u32, all[2 * i + 1]);
            if let Err(e) = nt.rdma.learn(nt.ct, p.proc_, card) {
                rdma_release(net);
                return Err(e);
            }
        }
    }
    Ok(net)
}

/// A number naming a BTL's network operations by its component name (1 is the platform's), so
/// that the members of a window can tell they chose the same.
fn kind_of(component: &str) -> u64 {
    let h = component
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    2 + h % 254
}

/// Ends a window's exposure and frees its counter.
fn rdma_release(net: Option<Net>) {
    if let Some(n) = net {
        if let Some(x) = n.exposure {
            n.rdma.withdraw(x);
        }
        n.rdma.release_counter(n.ct);
    }
}

/// Frees window `id` (`MPI_Win_free`, collective): waits for this process's operations and for
/// every process to arrive, then returns its memory. Gives back the user's info, if any.
pub fn free(cx: &mut Inside, id: WinId) -> Result<Option<crate::info::InfoId>> {
    {
        let w = cx.e().osc.get(id)?;
        if w.lock_all
            || w.access
            || w.exposure.is_some()
            || (0..w.size).any(|r| w.peer(r).locked != 0)
        {
            return Err(sync_err("MPI_Win_free with an epoch still open"));
        }
    }
    super::sync::wait_settled(cx, id, None)?;
    let comm = cx.e().osc.get(id)?.comm;
    crate::coll::barrier(cx, comm)?;
    // Replies this target still sends must leave before their buffers go.
    cx.block(|e| {
        let Engine { osc, p2p, .. } = e;
        let mem = osc.memory;
        let w = osc.get_mut(id)?;
        w.reap(p2p, mem);
        Ok((w.replies.is_empty() && w.incoming.is_none() && w.data_in.is_none()).then_some(()))
    })?;
    let e = cx.e();
    let mem = e.osc.memory;
    let pool = e.osc.wins.as_mut().ok_or_else(no_win)?;
    let mut w = pool.remove(id).ok_or_else(no_win)?;
    e.osc.live -= 1;
    for g in w.cache.drain(..) {
        g.give_back(mem);
    }
    if let Some(g) = w.owned.take() {
        g.give_back(mem);
    }
    if let Some(s) = w.seg.take() {
        s.release(mem, e.platform);
    }
    // Every member passed the barrier with its operations complete: nothing is in flight to
    // this exposure any more.
    rdma_release(w.net.take());
    w.table.give_back(mem);
    crate::comm::create::free(cx, comm)?;
    Ok(w.info)
}

/// Attaches `len` bytes at `base` to dynamic window `id`.
pub fn attach(e: &mut Engine, id: WinId, base: usize, len: usize) -> Result<()> {
    let w = e.osc.get_mut(id)?;
    if w.flavor != Flavor::Dynamic {
        return Err(Error::new(
            ErrorClass::RmaFlavor,
            Reason::BadArgument {
                what: "memory is attached only to a dynamic window",
            },
        ));
    }
    if len == 0 {
        return Ok(());
    }
    w.regions.push((base, len)).map_err(|_| {
        Error::new(
            ErrorClass::RmaAttach,
            Reason::BadArgument {
                what: "more memory ranges attached to a window than stormpi keeps (64)",
            },
        )
    })
}

/// Detaches the range starting at `base` from dynamic window `id`.
pub fn detach(e: &mut Engine, id: WinId, base: usize) -> Result<()> {
    let w = e.osc.get_mut(id)?;
    if w.flavor != Flavor::Dynamic {
        return Err(Error::new(
            ErrorClass::RmaFlavor,
            Reason::BadArgument {
                what: "memory is detached only from a dynamic window",
            },
        ));
    }
    match w.regions.iter().position(|r| r.0 == base) {
        Some(i) => {
            w.regions.swap_remove(i);
            Ok(())
        }
        None => Err(Error::new(
            ErrorClass::RmaAttach,
            Reason::BadArgument {
                what: "no memory attached at that address",
            },
        )),
    }
}
