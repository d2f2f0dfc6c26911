//! Node-aware collectives: within each node to or from a leader (over shared memory), among the
//! leaders across nodes, then within the node again. Barrier, Bcast, Reduce, Allreduce and
//! Allgather; the others (Gather, Scatter, the v- and all-to-all forms, scans, reduce-scatter)
//! run flat.
//!
//! A communicator whose members span more than one node, with more than one member on some node,
//! gets two hidden communicators the first time a blocking collective could use them
//! ([`Engine::comm_levels`]): one over the members on this process's node (the *node*
//! communicator; its rank 0, the member of lowest rank there, is the node's *leader*) and, at
//! the leaders, one over the leaders of all nodes in rank order. They are freed with the
//! communicator. Communicators on one node (such as those of the 100,000 create/free test) or
//! with one member per node never get them.
//!
//! The phases are ordinary blocking collectives on those communicators, each choosing its own
//! flat algorithm by size (so each node's traffic stays on `sm`, and only the leaders' traffic
//! crosses the network — for an allreduce, one vector per node instead of one per rank):
//!
//! - **Barrier**: node barrier, leaders' barrier, node barrier.
//! - **Bcast**: on the root's node, a node broadcast from the root, then the leaders' broadcast
//!   from that node's leader; on the other nodes, the leaders' broadcast, then a node broadcast
//!   from the leader. Any root.
//! - **Allreduce**: node reduce to the leader (into its receive buffer), leaders' allreduce in
//!   place, node broadcast.
//! - **Reduce**: node reduce to the leaders, leaders' reduce to the root's leader, which hands the
//!   result to the root when that is another member of its node. Only when the message fits the
//!   leaders' staging region of `coll_segment_bytes` (reserved at init unless `coll_hier` is
//!   `off`); larger ones run flat.
//! - **Allgather**: when each node's members have consecutive ranks (ranks placed by node), a
//!   node gather straight into the node's stretch of the leader's receive buffer, the leaders'
//!   allgatherv of the stretches in place, a node broadcast of the whole buffer. Otherwise flat
//!   (a node's blocks would be scattered over the buffer).
//!
//! Reductions go node-first only for commutative operations; a non-commutative one keeps the
//! flat, rank-ordered algorithms. Every member decides alike, from the call's arguments, the
//! communicator's node layout and the parameters: `coll_hier` = `off` never, `on` always where
//! the shape allows, `auto` likewise unless `coll_<name>_algorithm` forces a flat algorithm for
//! that collective (then the forced algorithm runs on the whole communicator, as without the
//! node layer; with `on`, a forced algorithm runs inside each level).
//!
//! *Non-blocking* Barrier, Bcast and Allreduce go node-aware too, once a blocking collective has
//! made the levels (making them is a blocking agreement a non-blocking call must not wait for):
//! the same phases, each started as a non-blocking collective on its hidden communicator when
//! the one before has completed ([`Chain`], advanced by the engine's progress). The tags of all
//! phases are reserved when the call starts, in call order, so that several in flight meet their
//! peers whatever order their phases complete in; the user's request completes after the last
//! phase. Non-blocking Reduce and Allgather run flat (their staging region and counts arrays
//! are the blocking form's, one at a time). Both layers may be mixed freely: the node layer uses
//! the hidden communicators' own contexts and collective sequence numbers, the flat layer the
//! communicator's.

use core::mem::MaybeUninit;

use super::{
    coll_tag, extent, parse, span_bytes, AllgatherAlg, AllreduceAlg, BarrierAlg, BcastAlg, Buf,
    Call, Colls, LayerMode, Mode, ReduceAlg, VBuf, MAX_ACTIVE,
};
use crate::arena::{Arena, Sizer};
use crate::coll::exec::Span;
use crate::comm::{CommId, Levels};
use crate::datatype::convertor::{Packer, Unpacker};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::params::{Default, Kind, ParamDef, Params};
use crate::pml::request::{ReqId, Status};
use crate::pool::Pool;
use crate::shared::Inside;

/// The tag of the hand-over from a node's leader to a reduce's root that is not the leader
/// (outside the collectives' range; used on the hidden node communicators only).
const TAG_ROOT: i32 = -0x180;

/// `coll_hier`.
pub static HIER: ParamDef = ParamDef {
    name: "coll_hier",
    kind: Kind::Str,
    default: Default::Str("auto"),
    description: "Node-aware Barrier, Bcast, Reduce, Allreduce and Allgather on communicators spanning nodes \
                  with several members on one: auto (unless coll_<name>_algorithm forces a flat \
                  one), on, off",
};

/// Whether the node layer runs (`coll_hier`): `Auto` where the shape allows, unless a flat
/// algorithm is forced for that collective; `On` where the shape allows, forced algorithms
/// running inside the levels; `Off` never.
pub(crate) type HierMode = LayerMode;

impl LayerMode {
    /// The node layer's mode the parameters ask for (`Auto` when unreadable; [`HierState::new`]
    /// reports it).
    fn of(params: &Params) -> LayerMode {
        LayerMode::parse(params.str(&HIER)).unwrap_or(LayerMode::Auto)
    }
}

/// One phase of a non-blocking node-aware collective: a collective on a hidden communicator
/// under the tag reserved for it when the whole was started.
#[derive(Clone, Copy, Debug)]
struct Phase {
    comm: CommId,
    call: Call,
    tag: i32,
}

/// A non-blocking node-aware collective in flight: its phases, started one after the other as
/// non-blocking collectives of their own, and the user's request, finished after the last.
#[derive(Debug)]
pub(crate) struct Chain {
    req: ReqId,
    phases: [Option<Phase>; 3],
    next: usize,
    cur: Option<ReqId>,
    err: Option<Error>,
    hold: Option<&'static core::sync::atomic::AtomicU32>,
}

/// The node layer's state: its mode, the leaders' staging region for a reduce, and the
/// non-blocking node-aware collectives in flight.
pub(crate) struct HierState {
    pub(crate) mode: HierMode,
    tmp: *mut u8,
    tmp_len: usize,
    /// A blocking reduce is using the staging region (another thread's meanwhile stages in
    /// pool scratch).
    tmp_busy: bool,
    chains: Pool<Chain>,
    active: u32,
}

impl HierState {
    /// Whether no hierarchical collective is in flight.
    #[inline(always)]
    pub(super) fn idle(&self) -> bool {
        self.active == 0
    }

    fn staging(params: &Params) -> usize {
        match HierMode::of(params) {
            HierMode::Off => 0,
            _ => super::scratch_len(params),
        }
    }

    /// Arena bytes of the staging region.
    pub(crate) fn size(params: &Params, sizer: &mut Sizer) {
        sizer.slice::<MaybeUninit<u64>>(HierState::staging(params) / 8);
        Pool::<Chain>::size(sizer, super::active_capacity(params));
    }

    /// The state, its staging region carved from `arena`.
    pub(crate) fn new(params: &Params, arena: &mut Arena) -> Result<HierState> {
        let mode = parse(params, &HIER, HierMode::parse)?;
        let len = HierState::staging(params);
        let mem = arena.slice(len / 8, |_| MaybeUninit::<u64>::uninit())?;
        let tmp = mem.as_mut_ptr().cast();
        Ok(HierState {
            mode,
            tmp,
            tmp_len: len,
            tmp_busy: false,
            chains: Pool::new(arena, super::active_capacity(params))?,
            active: 0,
        })
    }
}

/// Runs blocking collective `call` on `comm` over its node levels when it should (see the module
/// doc); false when the flat layer is to run it — also for every call whose arguments are
/// wrong, so that the flat layer reports the error as it always does.
///
/// # Safety
/// As for [`super::collective`].
pub(super) unsafe fn blocking(cx: &mut Inside, comm: CommId, call: &Call) -> Result<bool> {
    let e = cx.e();
    if e.coll.hier.mode == HierMode::Off || e.p2p.comms.levels(comm) == Levels::Flat {
        return Ok(false);
    }
    if !e.colls().hier_eligible(call) {
        return Ok(false);
    }
    let Levels::Nodes {
        node,
        leaders,
        blocked,
    } = crate::comm::create::levels(cx, comm)?
    else {
        return Ok(false);
    };
    // SAFETY: the caller's contract.
    unsafe { run(cx, comm, call, node, leaders, blocked) }
}

/// The phases of blocking `call` over the levels `node` and `leaders`: `Ok(false)` when the
/// flat layer is to run it.
///
/// # Safety
/// As for [`super::collective`].
unsafe fn run(
    cx: &mut Inside,
    comm: CommId,
    call: &Call,
    node: CommId,
    leaders: Option<CommId>,
    blocked: bool,
) -> Result<bool> {
    let e = cx.e();
    let c = e.check_comm(comm)?;
    let (g, size) = (c.group, c.size());
    let my_node = e.p2p.procs[e.p2p.me.0 as usize].node;
    let node_of = |e: &mut Engine, r: u32| {
        let p = e.p2p.comms.groups.proc_of(g, r);
        e.p2p.procs[p.0 as usize].node
    };
    let node_rank = e.check_comm(node)?.rank;
    // SAFETY (of every `sub` below): the caller's contract covers the buffers, which each
    // phase uses as the whole call would; the staging region is the engine's own.
    match *call {
        Call::Barrier => unsafe {
            sub(cx, node, Call::Barrier)?;
            if let Some(l) = leaders {
                sub(cx, l, Call::Barrier)?;
            }
            sub(cx, node, Call::Barrier)?;
        },
        Call::Bcast { buf, root } => {
            if root < 0 || root as u32 >= size {
                return Ok(false);
            }
            let root_node = node_of(cx.e(), root as u32);
            if root_node == my_node {
                let p = cx.e().p2p.comms.groups.proc_of(g, root as u32);
                let node_group = cx.e().check_comm(node)?.group;
                let nr = cx.e().p2p.comms.groups.rank_of(node_group, p).unwrap_or(0) as i32;
                unsafe { sub(cx, node, Call::Bcast { buf, root: nr })? };
                if let Some(l) = leaders {
                    let me = cx.e().check_comm(l)?.rank as i32;
                    unsafe { sub(cx, l, Call::Bcast { buf, root: me })? };
                }
            } else {
                if let Some(l) = leaders {
                    let lr = cx.e().colls().leader_of(l, root_node)?;
                    unsafe { sub(cx, l, Call::Bcast { buf, root: lr })? };
                }
                unsafe { sub(cx, node, Call::Bcast { buf, root: 0 })? };
            }
        }
        Call::Allreduce {
            send,
            recv,
            count,
            dt,
            op,
        } => {
            // The leader reduces into its own receive buffer (in place if the user's call
            // was), the others contribute their input.
            let send = match node_rank {
                0 => send,
                _ => Some(send.unwrap_or(recv)),
            };
            unsafe {
                sub(
                    cx,
                    node,
                    Call::Reduce {
                        send,
                        recv,
                        count,
                        dt,
                        op,
                        root: 0,
                    },
                )?;
                if let Some(l) = leaders {
                    sub(
                        cx,
                        l,
                        Call::Allreduce {
                            send: None,
                            recv,
                            count,
                            dt,
                            op,
                        },
                    )?;
                }
                let buf = Buf {
                    ptr: recv,
                    count,
                    dt,
                };
                sub(cx, node, Call::Bcast { buf, root: 0 })?;
            }
        }
        Call::Reduce {
            send,
            recv,
            count,
            dt,
            op,
            root,
        } => {
            if root < 0 || root as u32 >= size {
                return Ok(false);
            }
            let root = root as u32;
            let root_node = node_of(cx.e(), root);
            // A leader is the member of lowest rank on its node.
            let root_leads = !(0..root).any(|r| node_of(cx.e(), r) == root_node);
            let true_lb = cx.e().p2p.types.info(dt)?.true_lb;
            let span = span_bytes(&cx.e().p2p.types, &Span::new(recv, count, dt));
            let me = c_rank(cx.e(), comm)?;
            if span > cx.e().coll.hier.tmp_len || (send.is_none() && me != root) {
                return Ok(false);
            }
            // A leader that is not the root stages its node's result (laid out like `dt`);
            // the root's leader then everyone's. The staging region, or pool scratch when
            // another thread's reduce has it.
            let (held, region) = cx.e().colls().claim_stage()?;
            let stage = region.wrapping_offset(-true_lb);
            let (input, out) = match (node_rank, me == root) {
                (0, true) => (send, recv),
                (0, false) => (send, stage),
                (_, true) => (Some(send.unwrap_or(recv)), recv),
                (_, false) => (send, recv),
            };
            let r = (|| unsafe {
                sub(
                    cx,
                    node,
                    Call::Reduce {
                        send: input,
                        recv: out,
                        count,
                        dt,
                        op,
                        root: 0,
                    },
                )?;
                if let Some(l) = leaders {
                    let (send, lr) = match root_node == my_node {
                        true => (None, cx.e().check_comm(l)?.rank as i32),
                        false => (
                            Some(out as *const u8),
                            cx.e().colls().leader_of(l, root_node)?,
                        ),
                    };
                    sub(
                        cx,
                        l,
                        Call::Reduce {
                            send,
                            recv: out,
                            count,
                            dt,
                            op,
                            root: lr,
                        },
                    )?;
                }
                Ok(())
            })();
            if let Err(err) = r {
                cx.e().colls().release_stage(held);
                return Err(err);
            }
            if !root_leads && root_node == my_node && count > 0 {
                // The root's leader hands the result over (on the node communicator, with
                // a tag of its own: nothing else but collectives runs there).
                let node_group = cx.e().check_comm(node)?.group;
                let p = cx.e().p2p.comms.groups.proc_of(g, root);
                let nr = cx.e().p2p.comms.groups.rank_of(node_group, p).unwrap_or(0);
                if node_rank == 0 {
                    // SAFETY: the staging region holds the result, laid out like `dt`.
                    let r = unsafe { Packer::new(stage, count, dt, &cx.e().p2p.types) }
                        .and_then(|conv| cx.send_internal(conv, nr, TAG_ROOT, node));
                    if let Err(err) = r {
                        cx.e().colls().release_stage(held);
                        return Err(err);
                    }
                } else if me == root {
                    // SAFETY: the caller's contract: `recv` holds `count` instances of `dt`.
                    let conv = unsafe { Unpacker::new(recv, count, dt, &cx.e().p2p.types)? };
                    cx.recv_internal(conv, 0, TAG_ROOT, node)?;
                }
            }
            cx.e().colls().release_stage(held);
        }
        Call::Allgather { send, recv } => {
            let (c, p) = (recv.count, size as u64);
            if !blocked || c.checked_mul(p).is_none_or(|t| t > i32::MAX as u64) {
                return Ok(false);
            }
            let ext = extent(&cx.e().p2p.types, recv.dt)? as i64;
            let me = c_rank(cx.e(), comm)? as i64;
            let block = |r: i64| recv.ptr.wrapping_offset((r * c as i64 * ext) as isize);
            // This node's ranks are first .. first + node size: its blocks are one stretch,
            // which the node's gather fills at the leader.
            let first = me - node_rank as i64;
            let own = match (send, node_rank) {
                (None, 0) => None,
                (None, _) => Some(Buf {
                    ptr: block(me),
                    count: c,
                    dt: recv.dt,
                }),
                (s, _) => s,
            };
            let stretch = Buf {
                ptr: block(first),
                count: c,
                dt: recv.dt,
            };
            unsafe {
                sub(
                    cx,
                    node,
                    Call::Gather {
                        send: own,
                        recv: stretch,
                        root: 0,
                    },
                )?
            };
            if let Some(l) = leaders {
                // The leaders swap their stretches in place: one per node, in rank order
                // (the leaders' order), counts then displacements in pool scratch.
                let k = cx.e().check_comm(l)?.size() as usize;
                let (held, mem) = cx
                    .e()
                    .colls()
                    .grab(2 * k * size_of::<i32>(), Mode::NonBlocking { scope: 0 })?;
                // SAFETY: `mem` holds 2k ints, 64-byte aligned, ours until given back.
                let ints = unsafe { core::slice::from_raw_parts_mut(mem.cast::<i32>(), 2 * k) };
                let mut j = 0;
                for r in 0..size {
                    if j < k && (r == 0 || node_of(cx.e(), r) != node_of(cx.e(), r - 1)) {
                        ints[k + j] = (r as u64 * c) as i32;
                        j += 1;
                    }
                }
                for j in 0..k {
                    let end = match j + 1 < k {
                        true => ints[k + j + 1],
                        false => (p * c) as i32,
                    };
                    ints[j] = end - ints[k + j];
                }
                let ints = ints.as_ptr();
                let v = VBuf {
                    ptr: recv.ptr,
                    counts: super::ints::Ints::Int(ints),
                    displs: super::ints::Ints::Int(ints.wrapping_add(k)),
                    dt: recv.dt,
                };
                let r = unsafe {
                    sub(
                        cx,
                        l,
                        Call::Allgatherv {
                            send: None,
                            recv: v,
                        },
                    )
                };
                cx.e().colls().ungrab(held);
                r?;
            }
            let all = Buf {
                ptr: recv.ptr,
                count: c * p,
                dt: recv.dt,
            };
            unsafe { sub(cx, node, Call::Bcast { buf: all, root: 0 })? };
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// One blocking phase on a hidden communicator.
///
/// # Safety
/// As for [`super::collective`].
unsafe fn sub(cx: &mut Inside, comm: CommId, call: Call) -> Result<()> {
    // SAFETY: the caller's contract.
    unsafe { super::blocking(cx, comm, call, None) }
}

/// Drives the engine until no non-blocking node-aware collective in flight has phases on
/// `node` or `leaders` (hidden communicators about to be freed with their communicator: MPI
/// lets a communicator be freed while collectives on it are pending, and they complete
/// normally). Every other member started the same collectives, and any MPI call progresses
/// them, so this ends.
pub(crate) fn drain(cx: &mut Inside, node: CommId, leaders: Option<CommId>) {
    loop {
        let e = cx.e();
        let busy = e.coll.hier.chains.iter().any(|(_, c)| {
            c.phases
                .iter()
                .flatten()
                .any(|p| p.comm == node || Some(p.comm) == leaders)
        });
        if !busy {
            return;
        }
        cx.round();
    }
}

impl Colls<'_> {
    /// Whether `call` may go node-aware at all (before the layout is looked at).
    fn hier_eligible(&self, call: &Call) -> bool {
        let tune = self.coll.tune;
        let auto = self.coll.hier.mode == HierMode::Auto;
        match *call {
            Call::Barrier => !(auto && tune.barrier != BarrierAlg::Auto),
            Call::Bcast { buf, .. } => {
                !(auto && tune.bcast != BcastAlg::Auto) && extent(&self.p2p.types, buf.dt).is_ok()
            }
            Call::Reduce { dt, op, .. } | Call::Allreduce { dt, op, .. } => {
                let forced = match call {
                    Call::Reduce { .. } => tune.reduce != ReduceAlg::Auto,
                    _ => tune.allreduce != AllreduceAlg::Auto,
                };
                !(auto && forced)
                    && self
                        .working_form(dt, op)
                        .is_ok_and(|(red, _, _)| red.op.commutes())
            }
            Call::Allgather { send, recv } => {
                !(auto && tune.allgather != AllgatherAlg::Auto)
                    && extent(&self.p2p.types, recv.dt).is_ok()
                    && send.is_none_or(|s| self.p2p.types.check_committed(s.dt).is_ok())
            }
            _ => false,
        }
    }

    /// The non-blocking form, for Barrier, Bcast and Allreduce: the phases the blocking form
    /// runs, each started as a non-blocking collective when the one before has completed. Their
    /// tags are reserved now, in call order, so that every member's phases meet whatever order
    /// the phases of several collectives in flight complete in. `None` when the flat layer is to
    /// run `call` — also when the levels are not made yet (making them is a blocking agreement,
    /// which a non-blocking call must not wait for; every member knows alike whether a blocking
    /// collective made them before).
    ///
    /// # Safety
    /// As for [`super::collective`].
    pub(super) unsafe fn hier_start(
        &mut self,
        comm: CommId,
        call: &Call,
        scope: u32,
    ) -> Result<Option<ReqId>> {
        if self.coll.hier.mode == HierMode::Off {
            return Ok(None);
        }
        let Levels::Nodes { node, leaders, .. } = self.p2p.comms.levels(comm) else {
            return Ok(None);
        };
        if !matches!(
            call,
            Call::Barrier | Call::Bcast { .. } | Call::Allreduce { .. }
        ) || !self.hier_eligible(call)
        {
            return Ok(None);
        }
        let c = self.check_comm(comm)?;
        let (g, size) = (c.group, c.size());
        let my_node = self.p2p.procs[self.p2p.me.0 as usize].node;
        let node_rank = self.check_comm(node)?.rank;
        let ph = |comm: CommId, call: Call| Some(Phase { comm, call, tag: 0 });
        let (phases, dt): ([Option<Phase>; 3], _) = match *call {
            Call::Barrier => (
                [
                    ph(node, Call::Barrier),
                    leaders.and_then(|l| ph(l, Call::Barrier)),
                    ph(node, Call::Barrier),
                ],
                None,
            ),
            Call::Bcast { buf, root } => {
                if root < 0 || root as u32 >= size {
                    return Ok(None);
                }
                let p = self.p2p.comms.groups.proc_of(g, root as u32);
                let root_node = self.p2p.procs[p.0 as usize].node;
                if root_node == my_node {
                    let node_group = self.check_comm(node)?.group;
                    let nr = self.p2p.comms.groups.rank_of(node_group, p).unwrap_or(0) as i32;
                    let me = match leaders {
                        Some(l) => self.check_comm(l)?.rank as i32,
                        None => 0,
                    };
                    (
                        [
                            ph(node, Call::Bcast { buf, root: nr }),
                            leaders.and_then(|l| ph(l, Call::Bcast { buf, root: me })),
                            None,
                        ],
                        Some(buf.dt),
                    )
                } else {
                    let lr = match leaders {
                        Some(l) => self.leader_of(l, root_node)?,
                        None => 0,
                    };
                    (
                        [
                            leaders.and_then(|l| ph(l, Call::Bcast { buf, root: lr })),
                            ph(node, Call::Bcast { buf, root: 0 }),
                            None,
                        ],
                        Some(buf.dt),
                    )
                }
            }
            Call::Allreduce {
                send,
                recv,
                count,
                dt,
                op,
            } => {
                let send = match node_rank {
                    0 => send,
                    _ => Some(send.unwrap_or(recv)),
                };
                let buf = Buf {
                    ptr: recv,
                    count,
                    dt,
                };
                (
                    [
                        ph(
                            node,
                            Call::Reduce {
                                send,
                                recv,
                                count,
                                dt,
                                op,
                                root: 0,
                            },
                        ),
                        leaders.and_then(|l| {
                            ph(
                                l,
                                Call::Allreduce {
                                    send: None,
                                    recv,
                                    count,
                                    dt,
                                    op,
                                },
                            )
                        }),
                        ph(node, Call::Bcast { buf, root: 0 }),
                    ],
                    Some(dt),
                )
            }
            _ => return Ok(None),
        };
        let h = &mut self.coll.hier;
        if !h.chains.reserve() {
            return Err(h
                .chains
                .exhausted("non-blocking collectives in flight", MAX_ACTIVE.name));
        }
        let req = self.p2p.pml.requests_mut().pending(scope)?;
        let mut phases = phases;
        for p in phases.iter_mut().flatten() {
            p.tag = coll_tag(self.p2p.comms.next_coll_seq(p.comm));
        }
        let hold = dt.and_then(|d| self.p2p.types.hold(d));
        let Ok(key) = self.coll.hier.chains.insert(Chain {
            req,
            phases,
            next: 0,
            cur: None,
            err: None,
            hold,
        }) else {
            return Err(Error::internal("no room for a chain after reserving it"));
        };
        let slot = key.index;
        self.coll.hier.active += 1;
        self.advance_chain(slot);
        Ok(Some(req))
    }

    /// Moves chain `slot` on: collects its phase in flight if done, starts the next one, or
    /// finishes the user's request after the last. True if it finished.
    fn advance_chain(&mut self, slot: u32) -> bool {
        loop {
            let Some(ch) = self.coll.hier.chains.at_mut(slot) else {
                return false;
            };
            if let Some(id) = ch.cur {
                match self.p2p.pml.requests_mut().test(id) {
                    Ok(None) => return false,
                    Ok(Some(st)) => {
                        ch.cur = None;
                        ch.err = ch.err.or(st.error);
                    }
                    Err(e) => {
                        ch.cur = None;
                        ch.err = ch.err.or(Some(e));
                    }
                }
            }
            // The next phase, skipping the empty ones; none after an error.
            let mut phase = None;
            while phase.is_none() && ch.err.is_none() && ch.next < 3 {
                phase = ch.phases[ch.next];
                ch.next += 1;
            }
            if let Some(p) = phase {
                // SAFETY: the buffers are the user's, under the contract of the non-blocking
                // call that started the chain (valid until its request completes).
                let r = unsafe { self.start(p.comm, p.call, 0, Some(p.tag)) }.map(Some);
                let Some(ch) = self.coll.hier.chains.at_mut(slot) else {
                    return false;
                };
                match r {
                    Ok(id) => ch.cur = id,
                    Err(e) => ch.err = Some(e),
                }
                continue;
            }
            let chains = &mut self.coll.hier.chains;
            let Some(ch) = chains.key_at(slot).and_then(|k| chains.remove(k)) else {
                return false;
            };
            self.coll.hier.active -= 1;
            if let Some(h) = ch.hold {
                h.fetch_sub(1, core::sync::atomic::Ordering::Relaxed);
            }
            self.p2p.pml.requests_mut().finish(
                ch.req,
                Status {
                    error: ch.err,
                    ..Status::EMPTY
                },
            );
            return true;
        }
    }

    /// Advances the non-blocking node-aware collectives in flight; returns how many finished.
    pub(super) fn hier_progress(&mut self) -> usize {
        if self.coll.hier.active == 0 {
            return 0;
        }
        let mut finished = 0;
        for slot in 0..self.coll.hier.chains.capacity() {
            if self.coll.hier.chains.at(slot).is_some() {
                finished += self.advance_chain(slot) as usize;
            }
        }
        finished
    }

    /// The leaders' staging region, or pool scratch of its size when another thread's
    /// blocking reduce has it: whether the region was taken (give it back with
    /// [`Colls::release_stage`]) and where to stage.
    fn claim_stage(&mut self) -> Result<(Option<super::Scratch>, *mut u8)> {
        let h = &mut self.coll.hier;
        if !h.tmp_busy {
            h.tmp_busy = true;
            return Ok((None, h.tmp));
        }
        let len = h.tmp_len;
        let (sc, p) = self.grab(len, Mode::NonBlocking { scope: 0 })?;
        Ok((Some(sc), p))
    }

    /// Gives back what [`Colls::claim_stage`] took.
    fn release_stage(&mut self, held: Option<super::Scratch>) {
        match held {
            None => self.coll.hier.tmp_busy = false,
            Some(sc) => self.ungrab(sc),
        }
    }

    /// The rank, in leaders' communicator `l`, of the leader of node `node`.
    fn leader_of(&self, l: CommId, node: u32) -> Result<i32> {
        let g = self.check_comm(l)?.group;
        Ok(self
            .p2p
            .comms
            .groups
            .members(g)
            .position(|p| self.p2p.procs[p.0 as usize].node == node)
            .unwrap_or(0) as i32)
    }
}

/// My rank in `comm`.
fn c_rank(e: &mut Engine, comm: CommId) -> Result<u32> {
    Ok(e.check_comm(comm)?.rank)
}

#[cfg(test)]
mod tests {
    use super::HierMode;

    #[test]
    fn modes_parse() {
        assert_eq!(HierMode::parse(""), Some(HierMode::Auto));
        assert_eq!(HierMode::parse(" on "), Some(HierMode::On));
        assert_eq!(HierMode::parse("off"), Some(HierMode::Off));
        assert_eq!(HierMode::parse("0"), Some(HierMode::Off));
        assert_eq!(HierMode::parse("sometimes"), None);
    }
}
